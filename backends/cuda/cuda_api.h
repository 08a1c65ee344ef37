/* SPDX-License-Identifier: Apache-2.0 */
/* The part of the CUDA driver API tessera uses, declared once: types and
 * constants with the values of the driver's cuda.h, and every entry point's
 * signature under the name libcuda exports. The plugin (driver.c), the
 * cuBLASLt baseline (tools/cublaslt.c) and the tests (tests/cuda) resolve
 * them with dlopen/dlsym into a cuda_api (cuda_api_load); the stand-in
 * driver (tests/cuda/fake_libcuda.c) defines them, checked against these
 * prototypes. No link-time dependency on libcuda or the CUDA runtime. */
#ifndef TESSERA_CUDA_API_H
#define TESSERA_CUDA_API_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <dlfcn.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUuuid_st {
  char bytes[16];
} CUuuid;

enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
  CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
  CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
};

/* CUdevice_attribute values. */
enum {
  CU_ATTR_MAX_THREADS_PER_BLOCK = 1,
  CU_ATTR_MAX_SHARED_MEMORY_PER_BLOCK = 8,
  CU_ATTR_CLOCK_RATE = 13,
  CU_ATTR_MULTIPROCESSOR_COUNT = 16,
  CU_ATTR_PCI_BUS_ID = 33,
  CU_ATTR_PCI_DEVICE_ID = 34,
  CU_ATTR_MEMORY_CLOCK_RATE = 36,
  CU_ATTR_GLOBAL_MEMORY_BUS_WIDTH = 37,
  CU_ATTR_L2_CACHE_SIZE = 38,
  CU_ATTR_PCI_DOMAIN_ID = 50,
  CU_ATTR_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_ATTR_COMPUTE_CAPABILITY_MINOR = 76,
  CU_ATTR_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
  CU_ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
};

enum { CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8 };

/* cuTensorMapEncodeTiled arguments (CUtensorMapDataType, ...Swizzle,
 * ...L2promotion values). The map itself is 128 bytes, 64-byte aligned
 * (tsr_gpu_tensor_map, kernels/sm90.h). */
enum {
  CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6,
  CU_TENSOR_MAP_DATA_TYPE_FLOAT32 = 7,
  CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9,
  CU_TENSOR_MAP_INTERLEAVE_NONE = 0,
  CU_TENSOR_MAP_SWIZZLE_128B = 3,
  CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3,
  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0,
};
enum { CU_STREAM_NON_BLOCKING = 1 };
/* cuMemHostRegister flags: pinned for every context, mapped into the device
 * address space. */
enum { CU_MEMHOSTREGISTER_PORTABLE = 1, CU_MEMHOSTREGISTER_DEVICEMAP = 2 };
enum { CU_EVENT_DEFAULT = 0 };
/* cuMemHostAlloc flags: as cuMemHostRegister's. */
enum { CU_MEMHOSTALLOC_PORTABLE = 1, CU_MEMHOSTALLOC_DEVICEMAP = 2 };
/* cuStreamWaitValue32: until (int32_t)(*address - value) >= 0. */
enum { CU_STREAM_WAIT_VALUE_GEQ = 0 };

/* X(field, exported symbol, older symbol or NULL, parameters): the entry
 * points a user cannot do without... */
#define CUDA_API_REQUIRED(X)                                                                       \
  X(cuInit, cuInit, NULL, (unsigned int flags))                                                    \
  X(cuDriverGetVersion, cuDriverGetVersion, NULL, (int *version))                                  \
  X(cuDeviceGetCount, cuDeviceGetCount, NULL, (int *count))                                        \
  X(cuDeviceGet, cuDeviceGet, NULL, (CUdevice * device, int ordinal))                              \
  X(cuDeviceGetName, cuDeviceGetName, NULL, (char *name, int length, CUdevice device))             \
  X(cuDeviceGetAttribute, cuDeviceGetAttribute, NULL,                                              \
    (int *value, int attribute, CUdevice device))                                                  \
  X(cuDeviceTotalMem, cuDeviceTotalMem_v2, NULL, (size_t * bytes, CUdevice device))                \
  X(cuDeviceGetUuid, cuDeviceGetUuid_v2, "cuDeviceGetUuid", (CUuuid * uuid, CUdevice device))      \
  X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, NULL,                                      \
    (CUcontext * context, CUdevice device))                                                        \
  X(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, "cuDevicePrimaryCtxRelease",          \
    (CUdevice device))                                                                             \
  X(cuCtxSetCurrent, cuCtxSetCurrent, NULL, (CUcontext context))                                   \
  X(cuCtxSynchronize, cuCtxSynchronize, NULL, (void))                                              \
  X(cuMemAlloc, cuMemAlloc_v2, NULL, (CUdeviceptr * pointer, size_t bytes))                        \
  X(cuMemFree, cuMemFree_v2, NULL, (CUdeviceptr pointer))                                          \
  X(cuMemGetAddressRange, cuMemGetAddressRange_v2, NULL,                                           \
    (CUdeviceptr * base, size_t * bytes, CUdeviceptr pointer))                                     \
  X(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2, NULL,                                                 \
    (CUdeviceptr dst, const void *src, size_t bytes, CUstream stream))                             \
  X(cuMemcpyDtoHAsync, cuMemcpyDtoHAsync_v2, NULL,                                                 \
    (void *dst, CUdeviceptr src, size_t bytes, CUstream stream))                                   \
  X(cuMemcpyDtoDAsync, cuMemcpyDtoDAsync_v2, NULL,                                                 \
    (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream))                             \
  X(cuMemsetD32Async, cuMemsetD32Async, NULL,                                                      \
    (CUdeviceptr dst, unsigned int value, size_t count, CUstream stream))                          \
  X(cuStreamCreate, cuStreamCreate, NULL, (CUstream * stream, unsigned int flags))                 \
  X(cuStreamDestroy, cuStreamDestroy_v2, "cuStreamDestroy", (CUstream stream))                     \
  X(cuStreamSynchronize, cuStreamSynchronize, NULL, (CUstream stream))                             \
  X(cuEventCreate, cuEventCreate, NULL, (CUevent * event, unsigned int flags))                     \
  X(cuEventRecord, cuEventRecord, NULL, (CUevent event, CUstream stream))                          \
  X(cuEventSynchronize, cuEventSynchronize, NULL, (CUevent event))                                 \
  X(cuEventElapsedTime, cuEventElapsedTime_v2, "cuEventElapsedTime",                               \
    (float *milliseconds, CUevent start, CUevent end))                                             \
  X(cuEventDestroy, cuEventDestroy_v2, "cuEventDestroy", (CUevent event))                          \
  X(cuModuleLoadData, cuModuleLoadData, NULL, (CUmodule * module, const void *image))              \
  X(cuModuleUnload, cuModuleUnload, NULL, (CUmodule module))                                       \
  X(cuModuleGetFunction, cuModuleGetFunction, NULL,                                                \
    (CUfunction * function, CUmodule module, const char *name))                                    \
  X(cuFuncSetAttribute, cuFuncSetAttribute, NULL, (CUfunction function, int attribute, int value)) \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor, cuOccupancyMaxActiveBlocksPerMultiprocessor,      \
    NULL, (int *blocks, CUfunction function, int block_size, size_t dynamic_smem))                 \
  X(cuLaunchKernel, cuLaunchKernel, NULL,                                                          \
    (CUfunction function, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,           \
     unsigned int block_x, unsigned int block_y, unsigned int block_z, unsigned int shared_bytes,  \
     CUstream stream, void **params, void **extra))                                                \
  X(cuGetErrorName, cuGetErrorName, NULL, (CUresult error, const char **name))                     \
  X(cuGetErrorString, cuGetErrorString, NULL, (CUresult error, const char **text))

/* ...and those that may be missing (NULL then): the tensor-map encoder of
 * CUDA 12.0+ drivers (without it the TMA-fed sm_90a GEMM kernels are not
 * offered), the synchronous copies the plugin never uses, interop: the
 * context of an application's stream (CUDA 9.2+), host memory registration
 * (tsr_buffer_wrap_host), and several GPUs: waits on another GPU's event,
 * stream waits on a host word (gates; the _v2 entry of CUDA 11.7+ drivers,
 * where stream memory operations are on by default), peer access and peer
 * copies. */
#define CUDA_API_OPTIONAL(X)                                                                       \
  X(cuStreamGetCtx, cuStreamGetCtx, NULL, (CUstream stream, CUcontext * context))                  \
  X(cuMemHostRegister, cuMemHostRegister_v2, "cuMemHostRegister",                                  \
    (void *pointer, size_t bytes, unsigned int flags))                                             \
  X(cuMemHostUnregister, cuMemHostUnregister, NULL, (void *pointer))                               \
  X(cuMemHostGetDevicePointer, cuMemHostGetDevicePointer_v2, "cuMemHostGetDevicePointer",          \
    (CUdeviceptr * device_pointer, void *pointer, unsigned int flags))                             \
  X(cuTensorMapEncodeTiled, cuTensorMapEncodeTiled, NULL,                                          \
    (void *tensor_map, int data_type, unsigned int rank, void *global_address,                     \
     const unsigned long long *global_dims, const unsigned long long *global_strides,              \
     const unsigned int *box_dims, const unsigned int *element_strides, int interleave,            \
     int swizzle, int l2_promotion, int oob_fill))                                                 \
  X(cuMemcpyHtoD, cuMemcpyHtoD_v2, NULL, (CUdeviceptr dst, const void *src, size_t bytes))         \
  X(cuMemcpyDtoH, cuMemcpyDtoH_v2, NULL, (void *dst, CUdeviceptr src, size_t bytes))               \
  X(cuStreamWaitEvent, cuStreamWaitEvent, NULL,                                                    \
    (CUstream stream, CUevent event, unsigned int flags))                                          \
  X(cuMemHostAlloc, cuMemHostAlloc, NULL, (void **pointer, size_t bytes, unsigned int flags))      \
  X(cuMemFreeHost, cuMemFreeHost, NULL, (void *pointer))                                           \
  X(cuStreamWaitValue32, cuStreamWaitValue32_v2, "cuStreamWaitValue32",                            \
    (CUstream stream, CUdeviceptr address, unsigned int value, unsigned int flags))                \
  X(cuDeviceCanAccessPeer, cuDeviceCanAccessPeer, NULL,                                            \
    (int *can, CUdevice device, CUdevice peer))                                                    \
  X(cuCtxEnablePeerAccess, cuCtxEnablePeerAccess, NULL, (CUcontext peer, unsigned int flags))      \
  X(cuMemcpyPeerAsync, cuMemcpyPeerAsync, NULL,                                                    \
    (CUdeviceptr dst, CUcontext dst_context, CUdeviceptr src, CUcontext src_context, size_t bytes, \
     CUstream stream))

/* The prototypes, under the exported names (libcuda's own, or the stand-in
 * driver's definitions). */
#define CUDA_API_PROTOTYPE(field, symbol, older, parameters) CUresult symbol parameters;
CUDA_API_REQUIRED(CUDA_API_PROTOTYPE)
CUDA_API_OPTIONAL(CUDA_API_PROTOTYPE)
#undef CUDA_API_PROTOTYPE

/* The resolved entry points. */
typedef struct cuda_api {
  void *library;
#define CUDA_API_FIELD(field, symbol, older, parameters) CUresult(*field) parameters;
  CUDA_API_REQUIRED(CUDA_API_FIELD)
  CUDA_API_OPTIONAL(CUDA_API_FIELD)
#undef CUDA_API_FIELD
} cuda_api;

/* Resolves every entry point of `library` (a dlopen handle) into `api`,
 * trying the exported name, then the older one. Returns NULL, or the name
 * of the first required entry point the library lacks (`api` is then
 * zeroed). */
static inline const char *cuda_api_load(cuda_api *api, void *library) {
  typedef struct entry {
    const char *names[2];
    size_t offset;
    int optional;
  } entry;
  static const entry entries[] = {
#define CUDA_API_ENTRY(field, symbol, older, parameters)                                           \
  {{#symbol, older}, offsetof(cuda_api, field), 0},
#define CUDA_API_OPTIONAL_ENTRY(field, symbol, older, parameters)                                  \
  {{#symbol, older}, offsetof(cuda_api, field), 1},
      CUDA_API_REQUIRED(CUDA_API_ENTRY) CUDA_API_OPTIONAL(CUDA_API_OPTIONAL_ENTRY)
#undef CUDA_API_ENTRY
#undef CUDA_API_OPTIONAL_ENTRY
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

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints a UUID. */
static inline void cuda_uuid_format(const CUuuid *uuid, char *out, size_t capacity) {
  const unsigned char *b = (const unsigned char *)uuid->bytes;
  snprintf(out, capacity,
           "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
           b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
           b[15]);
}

#endif /* TESSERA_CUDA_API_H */
