/* SPDX-License-Identifier: Apache-2.0 */
/* libamdhip64 at run time: dlopen, the runtime API resolved (hip_api.h), and
 * the GPU layer's driver table filled over it; here also its entries for
 * several GPUs (event waits across devices, gates, peer copies). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "hip_internal.h"

/* ---- several GPUs ---- */

/* A device's "context" is its ordinal + 1 (device.c). */
static int ordinal_of(void *device_context) {
  return (int)((intptr_t)device_context - 1);
}

static int stream_wait_event(void *context, void *stream, void *event) {
  const hip_api *api = context;
  return api->hipStreamWaitEvent(stream, event, 0);
}

/* The gate word: pinned for every device, mapped. */
static int host_alloc(void *context, size_t bytes, void **pointer) {
  const hip_api *api = context;
  return api->hipHostMalloc(pointer, bytes, hipHostMallocPortable | hipHostMallocMapped);
}

static int host_free(void *context, void *pointer) {
  const hip_api *api = context;
  return api->hipHostFree(pointer);
}

static int stream_wait_value32(void *context, void *stream, gpu_address address, uint32_t value) {
  const hip_api *api = context;
  return api->hipStreamWaitValue32(stream, (void *)(uintptr_t)address, value, hipStreamWaitValueGte,
                                   0xffffffffu);
}

static int peer_can_access(void *context, int device, int peer, int *can) {
  const hip_api *api = context;
  return api->hipDeviceCanAccessPeer(can, device, peer);
}

/* From the current device (device_enter made it so). */
static int peer_enable(void *context, void *peer_context) {
  const hip_api *api = context;
  return api->hipDeviceEnablePeerAccess(ordinal_of(peer_context), 0);
}

static int copy_peer(void *context, gpu_address dst, void *dst_context, gpu_address src,
                     void *src_context, size_t bytes, void *stream) {
  const hip_api *api = context;
  return api->hipMemcpyPeerAsync((void *)(uintptr_t)dst, ordinal_of(dst_context),
                                 (const void *)(uintptr_t)src, ordinal_of(src_context), bytes,
                                 stream);
}

/* Each group only where the runtime has all its entry points. */
static void multi_entries(gpu_driver *driver) {
  const hip_api *api = driver->context;
  if (api->hipStreamWaitEvent)
    driver->stream_wait_event = stream_wait_event;
  if (api->hipHostMalloc && api->hipHostFree && api->hipStreamWaitValue32) {
    driver->host_alloc = host_alloc;
    driver->host_free = host_free;
    driver->stream_wait_value32 = stream_wait_value32;
  }
  if (api->hipDeviceCanAccessPeer && api->hipDeviceEnablePeerAccess) {
    driver->peer_can_access = peer_can_access;
    driver->peer_enable = peer_enable;
  }
  if (api->hipMemcpyPeerAsync)
    driver->copy_peer = copy_peer;
  driver->peer_already_enabled = hipErrorPeerAccessAlreadyEnabled;
}

/* The runtime a system has: ROCm 7, 6, then 5 (Debian 12 ships 5.2). */
/* RTLD_NODELETE: loaded once per process and never unmapped. The runtime's
 * static constructors allocate state that only its own globals hold, so each
 * unload leaked it (measured with ROCm 5.2 and no GPU: 408 bytes a context),
 * and ROCm does not support initialising again after an unload. */
#define HIP_RUNTIME_DLOPEN_FLAGS (RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE)
static const char *const default_runtimes[] = {"libamdhip64.so.7", "libamdhip64.so.6",
                                               "libamdhip64.so.5"};

bool hip_driver_open(hip_plugin *plugin, const char *library, char *why, size_t capacity) {
  void *handle = NULL;
  const char *name = NULL;
  char errors[600] = "";
  size_t used = 0;
  if (library && *library) {
    name = library;
    handle = dlopen(name, HIP_RUNTIME_DLOPEN_FLAGS);
  } else {
    for (size_t i = 0; i < sizeof default_runtimes / sizeof default_runtimes[0] && !handle; i++) {
      name = default_runtimes[i];
      handle = dlopen(name, HIP_RUNTIME_DLOPEN_FLAGS);
      if (!handle && used < sizeof errors) {
        int n = snprintf(errors + used, sizeof errors - used, "%s%s", used ? "; " : "", name);
        used += n > 0 ? (size_t)n : 0;
      }
    }
  }
  if (!handle) {
    const char *error = dlerror();
    if (library && *library)
      snprintf(why, capacity, "cannot load the HIP runtime %s: %s", name,
               error ? error : "unknown dlopen error");
    else
      snprintf(why, capacity, "no HIP runtime found (tried %s): %s", errors,
               error ? error : "unknown dlopen error");
    return false;
  }
  const char *missing = hip_api_load(&plugin->api, handle);
  if (missing) {
    snprintf(why, capacity, "the HIP runtime %s lacks %s (ROCm too old?)", name, missing);
    dlclose(handle);
    return false;
  }
  gpu_driver *driver = &plugin->gpu.driver;
  memset(driver, 0, sizeof *driver);
  driver->context = &plugin->api;
  driver->out_of_memory = hipErrorOutOfMemory;
  driver->not_found = hipErrorNotFound;
  driver->describe = hip_describe;
  hip_device_entries(driver);
  hip_memory_entries(driver);
  hip_queue_entries(driver);
  multi_entries(driver);
  return true;
}

void hip_driver_close(hip_plugin *plugin) {
  if (plugin->api.library)
    dlclose(plugin->api.library);
  memset(&plugin->api, 0, sizeof plugin->api);
}

void hip_describe(void *context, int result, char *buffer, size_t capacity) {
  const hip_api *api = context;
  const char *name = api->hipGetErrorName ? api->hipGetErrorName(result) : NULL;
  const char *text = api->hipGetErrorString ? api->hipGetErrorString(result) : NULL;
  if (name && text && strcmp(name, text) != 0)
    snprintf(buffer, capacity, "%s (%s)", name, text);
  else if (name)
    snprintf(buffer, capacity, "%s", name);
  else
    snprintf(buffer, capacity, "HIP error %d", result);
}
