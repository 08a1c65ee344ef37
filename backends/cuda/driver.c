/* SPDX-License-Identifier: Apache-2.0 */
/* libcuda at run time: dlopen, the driver API resolved (cuda_api.h), and
 * the GPU layer's driver table filled over it; here also its entries for
 * several GPUs (event waits across contexts, gates, peer copies). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "cuda_internal.h"

/* ---- several GPUs ---- */

/* The event may belong to another context (another GPU's primary one). */
static int stream_wait_event(void *context, void *stream, void *event) {
  const cuda_api *api = context;
  return api->cuStreamWaitEvent(stream, event, 0);
}

/* The gate word: pinned for every context, mapped for the device. */
static int host_alloc(void *context, size_t bytes, void **pointer) {
  const cuda_api *api = context;
  return api->cuMemHostAlloc(pointer, bytes, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
}

static int host_free(void *context, void *pointer) {
  const cuda_api *api = context;
  return api->cuMemFreeHost(pointer);
}

/* GEQ is cyclic ((int32_t)(*address - value) >= 0); the layer's tickets
 * only grow, so it is a plain >= for them. */
static int stream_wait_value32(void *context, void *stream, gpu_address address, uint32_t value) {
  const cuda_api *api = context;
  return api->cuStreamWaitValue32(stream, address, value, CU_STREAM_WAIT_VALUE_GEQ);
}

static int peer_can_access(void *context, int device, int peer, int *can) {
  const cuda_api *api = context;
  return api->cuDeviceCanAccessPeer(can, device, peer);
}

static int peer_enable(void *context, void *peer_context) {
  const cuda_api *api = context;
  return api->cuCtxEnablePeerAccess(peer_context, 0);
}

static int copy_peer(void *context, gpu_address dst, void *dst_context, gpu_address src,
                     void *src_context, size_t bytes, void *stream) {
  const cuda_api *api = context;
  return api->cuMemcpyPeerAsync(dst, dst_context, src, src_context, bytes, stream);
}

/* Each group only where the driver has all its entry points. */
static void multi_entries(gpu_driver *driver) {
  const cuda_api *api = driver->context;
  if (api->cuStreamWaitEvent)
    driver->stream_wait_event = stream_wait_event;
  if (api->cuMemHostAlloc && api->cuMemFreeHost && api->cuStreamWaitValue32) {
    driver->host_alloc = host_alloc;
    driver->host_free = host_free;
    driver->stream_wait_value32 = stream_wait_value32;
  }
  if (api->cuDeviceCanAccessPeer && api->cuCtxEnablePeerAccess) {
    driver->peer_can_access = peer_can_access;
    driver->peer_enable = peer_enable;
  }
  if (api->cuMemcpyPeerAsync)
    driver->copy_peer = copy_peer;
  driver->peer_already_enabled = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
}

bool cuda_driver_open(cuda_plugin *plugin, const char *library, char *why, size_t capacity) {
  const char *name = library && *library ? library : "libcuda.so.1";
  void *handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *error = dlerror();
    snprintf(why, capacity, "cannot load the CUDA driver %s: %s", name,
             error ? error : "unknown dlopen error");
    return false;
  }
  const char *missing = cuda_api_load(&plugin->api, handle);
  if (missing) {
    snprintf(why, capacity, "the CUDA driver %s lacks %s (driver too old?)", name, missing);
    dlclose(handle);
    return false;
  }
  gpu_driver *driver = &plugin->gpu.driver;
  memset(driver, 0, sizeof *driver);
  driver->context = &plugin->api;
  driver->out_of_memory = CUDA_ERROR_OUT_OF_MEMORY;
  driver->not_found = CUDA_ERROR_NOT_FOUND;
  driver->describe = cuda_describe;
  cuda_device_entries(driver);
  cuda_memory_entries(driver);
  cuda_queue_entries(driver);
  multi_entries(driver);
  return true;
}

void cuda_driver_close(cuda_plugin *plugin) {
  if (plugin->api.library)
    dlclose(plugin->api.library);
  memset(&plugin->api, 0, sizeof plugin->api);
}

void cuda_describe(void *context, int result, char *buffer, size_t capacity) {
  const cuda_api *api = context;
  const char *name = NULL, *text = NULL;
  if (api->cuGetErrorName)
    api->cuGetErrorName(result, &name);
  if (api->cuGetErrorString)
    api->cuGetErrorString(result, &text);
  if (name && text)
    snprintf(buffer, capacity, "%s (%s)", name, text);
  else
    snprintf(buffer, capacity, "CUDA error %d", result);
}
