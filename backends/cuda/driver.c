/* SPDX-License-Identifier: Apache-2.0 */
/* libcuda at run time: dlopen, the driver API resolved (cuda_api.h), and
 * the GPU layer's driver table filled over it. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "cuda_internal.h"

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
