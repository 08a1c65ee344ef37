/* SPDX-License-Identifier: Apache-2.0 */
/* Resolving the CUDA driver API from libcuda.so.1 at run time. */
#include "driver.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* One entry point: the exported names to try in order (versioned first),
 * where the pointer goes in cuda_driver, and whether the plugin works
 * without it. */
typedef struct driver_symbol {
  const char *names[2];
  size_t offset;
  int optional;
} driver_symbol;

#define SYMBOL(field, ...)                                                                         \
  { {__VA_ARGS__}, offsetof(cuda_driver, field), 0 }
#define OPTIONAL_SYMBOL(field, name)                                                               \
  { {name, NULL}, offsetof(cuda_driver, field), 1 }

static const driver_symbol driver_symbols[] = {
    SYMBOL(cuInit, "cuInit"),
    SYMBOL(cuDriverGetVersion, "cuDriverGetVersion"),
    SYMBOL(cuDeviceGetCount, "cuDeviceGetCount"),
    SYMBOL(cuDeviceGet, "cuDeviceGet"),
    SYMBOL(cuDeviceGetName, "cuDeviceGetName"),
    SYMBOL(cuDeviceGetAttribute, "cuDeviceGetAttribute"),
    SYMBOL(cuDeviceTotalMem, "cuDeviceTotalMem_v2"),
    SYMBOL(cuDeviceGetUuid, "cuDeviceGetUuid_v2", "cuDeviceGetUuid"),
    SYMBOL(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
    SYMBOL(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"),
    SYMBOL(cuCtxSetCurrent, "cuCtxSetCurrent"),
    SYMBOL(cuCtxSynchronize, "cuCtxSynchronize"),
    SYMBOL(cuMemAlloc, "cuMemAlloc_v2"),
    SYMBOL(cuMemFree, "cuMemFree_v2"),
    SYMBOL(cuMemGetAddressRange, "cuMemGetAddressRange_v2"),
    SYMBOL(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
    SYMBOL(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
    SYMBOL(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"),
    SYMBOL(cuMemsetD32Async, "cuMemsetD32Async"),
    SYMBOL(cuStreamCreate, "cuStreamCreate"),
    SYMBOL(cuStreamDestroy, "cuStreamDestroy_v2", "cuStreamDestroy"),
    SYMBOL(cuStreamSynchronize, "cuStreamSynchronize"),
    SYMBOL(cuEventCreate, "cuEventCreate"),
    SYMBOL(cuEventRecord, "cuEventRecord"),
    SYMBOL(cuEventSynchronize, "cuEventSynchronize"),
    SYMBOL(cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime"),
    SYMBOL(cuEventDestroy, "cuEventDestroy_v2", "cuEventDestroy"),
    SYMBOL(cuModuleLoadData, "cuModuleLoadData"),
    SYMBOL(cuModuleUnload, "cuModuleUnload"),
    SYMBOL(cuModuleGetFunction, "cuModuleGetFunction"),
    SYMBOL(cuFuncSetAttribute, "cuFuncSetAttribute"),
    SYMBOL(cuOccupancyMaxActiveBlocksPerMultiprocessor,
           "cuOccupancyMaxActiveBlocksPerMultiprocessor"),
    SYMBOL(cuLaunchKernel, "cuLaunchKernel"),
    SYMBOL(cuGetErrorName, "cuGetErrorName"),
    SYMBOL(cuGetErrorString, "cuGetErrorString"),
    OPTIONAL_SYMBOL(cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled"),
};

int cuda_driver_open(cuda_driver *driver, const char *library, char *why, size_t why_capacity) {
  memset(driver, 0, sizeof *driver);
  const char *name = library && *library ? library : "libcuda.so.1";
  void *handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *error = dlerror();
    snprintf(why, why_capacity, "cannot load the CUDA driver %s: %s", name,
             error ? error : "unknown dlopen error");
    return 0;
  }
  for (size_t i = 0; i < sizeof driver_symbols / sizeof driver_symbols[0]; i++) {
    const driver_symbol *s = &driver_symbols[i];
    void *address = NULL;
    for (int n = 0; n < 2 && !address && s->names[n]; n++)
      address = dlsym(handle, s->names[n]);
    if (!address && s->optional)
      continue;
    if (!address) {
      snprintf(why, why_capacity, "the CUDA driver %s lacks %s (driver too old?)", name,
               s->names[0]);
      dlclose(handle);
      memset(driver, 0, sizeof *driver);
      return 0;
    }
    /* POSIX: a dlsym result converts to a function pointer by copying it. */
    memcpy((char *)driver + s->offset, &address, sizeof address);
  }
  driver->library = handle;
  return 1;
}

void cuda_driver_close(cuda_driver *driver) {
  if (driver->library)
    dlclose(driver->library);
  memset(driver, 0, sizeof *driver);
}

void cuda_driver_describe(const cuda_driver *driver, CUresult result, char *buffer,
                          size_t capacity) {
  const char *name = NULL, *text = NULL;
  if (driver->cuGetErrorName)
    driver->cuGetErrorName(result, &name);
  if (driver->cuGetErrorString)
    driver->cuGetErrorString(result, &text);
  if (name && text)
    snprintf(buffer, capacity, "%s (%s)", name, text);
  else
    snprintf(buffer, capacity, "CUDA error %d", result);
}
