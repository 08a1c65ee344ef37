/* SPDX-License-Identifier: Apache-2.0 */
/* The part of the HIP runtime API tessera uses, declared once: types and
 * constants with the values of ROCm's hip_runtime_api.h (the same in ROCm 5
 * and 6 for everything here: the CUDA-compatible attribute range), and every
 * entry point's signature under the name libamdhip64 exports. The plugin
 * (driver.c), the hipBLASLt baseline (tools/hipblaslt.c) and the test
 * runtime (tests/hip) use it; the plugin resolves the entry points with
 * dlopen/dlsym into a hip_api (hip_api_load). No HIP header, no link-time
 * dependency on the HIP runtime. */
#ifndef TESSERA_HIP_API_H
#define TESSERA_HIP_API_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <dlfcn.h>

typedef int hipError_t;
typedef int hipDevice_t;
typedef void *hipDeviceptr_t;
typedef struct ihipModule_t *hipModule_t;
typedef struct ihipModuleSymbol_t *hipFunction_t;
typedef struct ihipStream_t *hipStream_t;
typedef struct ihipEvent_t *hipEvent_t;
typedef struct hipUUID_t {
  char bytes[16];
} hipUUID;

enum {
  hipSuccess = 0,
  hipErrorInvalidValue = 1,
  hipErrorOutOfMemory = 2,
  hipErrorNotInitialized = 3,
  hipErrorInsufficientDriver = 35,
  hipErrorNoDevice = 100,
  hipErrorInvalidDevice = 101,
  hipErrorInvalidImage = 200,
  hipErrorNoBinaryForGpu = 209,
  hipErrorNotFound = 500,
  hipErrorPeerAccessAlreadyEnabled = 704,
  hipErrorHostMemoryAlreadyRegistered = 712,
  hipErrorHostMemoryNotRegistered = 713,
};

/* hipDeviceAttribute_t values (the CUDA-compatible range, stable across ROCm
 * 5 and 6; the AMD-specific range moved, so none of it is used). */
enum {
  hipDeviceAttributeClockRate = 5,
  hipDeviceAttributeL2CacheSize = 19,
  hipDeviceAttributeComputeCapabilityMajor = 23,
  hipDeviceAttributeMaxThreadsPerBlock = 56,
  hipDeviceAttributeMemoryBusWidth = 59,
  hipDeviceAttributeMemoryClockRate = 60,
  hipDeviceAttributeComputeCapabilityMinor = 61,
  hipDeviceAttributeMultiprocessorCount = 63,
  hipDeviceAttributePciBusId = 67,
  hipDeviceAttributePciDeviceId = 68,
  hipDeviceAttributePciDomainID = 69,
  hipDeviceAttributeMaxSharedMemoryPerBlock = 74,
  hipDeviceAttributeSharedMemPerBlockOptin = 75,
  hipDeviceAttributeWarpSize = 87,
};

enum { hipStreamNonBlocking = 1 };
/* hipHostRegister flags: pinned for every device, mapped into the device
 * address space. */
enum { hipHostRegisterPortable = 1, hipHostRegisterMapped = 2 };
enum { hipEventDefault = 0 };
/* hipHostMalloc flags: pinned for every device, mapped. */
enum { hipHostMallocPortable = 1, hipHostMallocMapped = 2 };
/* hipStreamWaitValue32: until (*ptr & mask) >= value (not cyclic). */
enum { hipStreamWaitValueGte = 0 };

/* hipGetDeviceProperties fills a struct whose layout changed between ROCm 5
 * (792 bytes) and 6 (hipDeviceProp_tR0600, about 1.5 KiB); the plugin passes
 * a buffer of this size and reads only `name` (its first 256 bytes) and the
 * architecture string (gcnArchName, "gfx90a:sramecc+:xnack-"), which it
 * finds by content (hip_arch_from_props). */
enum { HIP_DEVICE_PROPS_BUFFER = 4096 };

/* X(field, exported symbol, older symbol or NULL, parameters): the entry
 * points the plugin cannot do without... */
#define HIP_API_REQUIRED(X)                                                                        \
  X(hipInit, hipInit, NULL, (unsigned int flags))                                                  \
  X(hipDriverGetVersion, hipDriverGetVersion, NULL, (int *version))                                \
  X(hipGetDeviceCount, hipGetDeviceCount, NULL, (int *count))                                      \
  X(hipDeviceGet, hipDeviceGet, NULL, (hipDevice_t * device, int ordinal))                         \
  X(hipDeviceGetName, hipDeviceGetName, NULL, (char *name, int length, hipDevice_t device))        \
  X(hipDeviceGetAttribute, hipDeviceGetAttribute, NULL, (int *value, int attribute, int device))   \
  X(hipDeviceTotalMem, hipDeviceTotalMem, NULL, (size_t * bytes, hipDevice_t device))              \
  X(hipGetDeviceProperties, hipGetDevicePropertiesR0600, "hipGetDeviceProperties",                 \
    (void *properties, int device))                                                                \
  X(hipSetDevice, hipSetDevice, NULL, (int device))                                                \
  X(hipDeviceSynchronize, hipDeviceSynchronize, NULL, (void))                                      \
  X(hipMalloc, hipMalloc, NULL, (void **pointer, size_t bytes))                                    \
  X(hipFree, hipFree, NULL, (void *pointer))                                                       \
  X(hipMemGetAddressRange, hipMemGetAddressRange, NULL,                                            \
    (hipDeviceptr_t * base, size_t * bytes, hipDeviceptr_t pointer))                               \
  X(hipMemcpyHtoDAsync, hipMemcpyHtoDAsync, NULL,                                                  \
    (hipDeviceptr_t dst, void *src, size_t bytes, hipStream_t stream))                             \
  X(hipMemcpyDtoHAsync, hipMemcpyDtoHAsync, NULL,                                                  \
    (void *dst, hipDeviceptr_t src, size_t bytes, hipStream_t stream))                             \
  X(hipMemcpyDtoDAsync, hipMemcpyDtoDAsync, NULL,                                                  \
    (hipDeviceptr_t dst, hipDeviceptr_t src, size_t bytes, hipStream_t stream))                    \
  X(hipMemsetD32Async, hipMemsetD32Async, NULL,                                                    \
    (hipDeviceptr_t dst, int value, size_t count, hipStream_t stream))                             \
  X(hipStreamCreateWithFlags, hipStreamCreateWithFlags, NULL,                                      \
    (hipStream_t * stream, unsigned int flags))                                                    \
  X(hipStreamDestroy, hipStreamDestroy, NULL, (hipStream_t stream))                                \
  X(hipStreamSynchronize, hipStreamSynchronize, NULL, (hipStream_t stream))                        \
  X(hipEventCreateWithFlags, hipEventCreateWithFlags, NULL,                                        \
    (hipEvent_t * event, unsigned int flags))                                                      \
  X(hipEventRecord, hipEventRecord, NULL, (hipEvent_t event, hipStream_t stream))                  \
  X(hipEventSynchronize, hipEventSynchronize, NULL, (hipEvent_t event))                            \
  X(hipEventElapsedTime, hipEventElapsedTime, NULL,                                                \
    (float *milliseconds, hipEvent_t start, hipEvent_t end))                                       \
  X(hipEventDestroy, hipEventDestroy, NULL, (hipEvent_t event))                                    \
  X(hipModuleLoadData, hipModuleLoadData, NULL, (hipModule_t * module, const void *image))         \
  X(hipModuleUnload, hipModuleUnload, NULL, (hipModule_t module))                                  \
  X(hipModuleGetFunction, hipModuleGetFunction, NULL,                                              \
    (hipFunction_t * function, hipModule_t module, const char *name))                              \
  X(hipModuleOccupancyMaxActiveBlocksPerMultiprocessor,                                            \
    hipModuleOccupancyMaxActiveBlocksPerMultiprocessor, NULL,                                      \
    (int *blocks, hipFunction_t function, int block_size, size_t dynamic_smem))                    \
  X(hipModuleLaunchKernel, hipModuleLaunchKernel, NULL,                                            \
    (hipFunction_t function, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,        \
     unsigned int block_x, unsigned int block_y, unsigned int block_z, unsigned int shared_bytes,  \
     hipStream_t stream, void **params, void **extra))

/* ...and those that may be missing (NULL then): the UUID (ROCm 5.1+), the
 * error words (the plugin then prints the number), interop: the device of
 * an application's stream, host memory registration (tsr_buffer_wrap_host),
 * and several GPUs: waits on another GPU's event, stream waits on a host
 * word (gates), peer access and peer copies. These return a value, not an
 * error code, where noted in hip_api. */
#define HIP_API_OPTIONAL(X)                                                                        \
  X(hipStreamGetDevice, hipStreamGetDevice, NULL, (hipStream_t stream, hipDevice_t * device))      \
  X(hipHostRegister, hipHostRegister, NULL, (void *pointer, size_t bytes, unsigned int flags))     \
  X(hipHostUnregister, hipHostUnregister, NULL, (void *pointer))                                   \
  X(hipHostGetDevicePointer, hipHostGetDevicePointer, NULL,                                        \
    (void **device_pointer, void *pointer, unsigned int flags))                                    \
  X(hipDeviceGetUuid, hipDeviceGetUuid, NULL, (hipUUID * uuid, hipDevice_t device))                \
  X(hipRuntimeGetVersion, hipRuntimeGetVersion, NULL, (int *version))                              \
  X(hipStreamWaitEvent, hipStreamWaitEvent, NULL,                                                  \
    (hipStream_t stream, hipEvent_t event, unsigned int flags))                                    \
  X(hipHostMalloc, hipHostMalloc, NULL, (void **pointer, size_t bytes, unsigned int flags))        \
  X(hipHostFree, hipHostFree, NULL, (void *pointer))                                               \
  X(hipStreamWaitValue32, hipStreamWaitValue32, NULL,                                              \
    (hipStream_t stream, void *pointer, uint32_t value, unsigned int flags, uint32_t mask))        \
  X(hipDeviceCanAccessPeer, hipDeviceCanAccessPeer, NULL, (int *can, int device, int peer))        \
  X(hipDeviceEnablePeerAccess, hipDeviceEnablePeerAccess, NULL, (int peer, unsigned int flags))    \
  X(hipMemcpyPeerAsync, hipMemcpyPeerAsync, NULL,                                                  \
    (void *dst, int dst_device, const void *src, int src_device, size_t bytes,                     \
     hipStream_t stream))

/* The two that return strings. */
typedef const char *(*hip_error_words_fn)(hipError_t error);

/* The prototypes, under the exported names (libamdhip64's own, or the test
 * runtime's definitions, checked against these). */
#define HIP_API_PROTOTYPE(field, symbol, older, parameters) hipError_t symbol parameters;
HIP_API_REQUIRED(HIP_API_PROTOTYPE)
HIP_API_OPTIONAL(HIP_API_PROTOTYPE)
#undef HIP_API_PROTOTYPE
const char *hipGetErrorName(hipError_t error);
const char *hipGetErrorString(hipError_t error);

/* The resolved entry points. */
typedef struct hip_api {
  void *library;
#define HIP_API_FIELD(field, symbol, older, parameters) hipError_t(*field) parameters;
  HIP_API_REQUIRED(HIP_API_FIELD)
  HIP_API_OPTIONAL(HIP_API_FIELD)
#undef HIP_API_FIELD
  hip_error_words_fn hipGetErrorName, hipGetErrorString; /* optional */
} hip_api;

/* Resolves every entry point of `library` (a dlopen handle) into `api`,
 * trying the exported name, then the older one. Returns NULL, or the name
 * of the first required entry point the library lacks (`api` is then
 * zeroed). */
static inline const char *hip_api_load(hip_api *api, void *library) {
  typedef struct entry {
    const char *names[2];
    size_t offset;
    int optional;
  } entry;
  static const entry entries[] = {
#define HIP_API_ENTRY(field, symbol, older, parameters)                                            \
  {{#symbol, older}, offsetof(hip_api, field), 0},
#define HIP_API_OPTIONAL_ENTRY(field, symbol, older, parameters)                                   \
  {{#symbol, older}, offsetof(hip_api, field), 1},
      HIP_API_REQUIRED(HIP_API_ENTRY) HIP_API_OPTIONAL(HIP_API_OPTIONAL_ENTRY)
#undef HIP_API_ENTRY
#undef HIP_API_OPTIONAL_ENTRY
          {{"hipGetErrorName", NULL}, offsetof(hip_api, hipGetErrorName), 1},
      {{"hipGetErrorString", NULL}, offsetof(hip_api, hipGetErrorString), 1},
  };
  memset(api, 0, sizeof *api);
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
    void *address = NULL;
    for (int n = 0; n < 2 && !address && entries[i].names[n]; n++)
      address = dlsym(library, entries[i].names[n]);
    if (!address && !entries[i].optional) {
      memset(api, 0, sizeof *api);
      return entries[i].names[0];
    }
    /* POSIX: a dlsym result converts to a function pointer by copying it. */
    memcpy((char *)api + entries[i].offset, &address, sizeof address);
  }
  api->library = library;
  return NULL;
}

#endif /* TESSERA_HIP_API_H */
