/* SPDX-License-Identifier: Apache-2.0 */
/* The part of the CUDA driver API the plugin uses, resolved from
 * libcuda.so.1 with dlopen at init: no link-time dependency on libcuda or the
 * CUDA runtime, so the plugin loads (and reports no device) where the
 * driver is absent. Types and constants are declared here, with the values
 * of the driver's cuda.h. */
#ifndef TESSERA_CUDA_DRIVER_H
#define TESSERA_CUDA_DRIVER_H

#include <stddef.h>

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
  CUDA_ERROR_NO_DEVICE = 100,
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
 * ...L2promotion values). The map itself is tsr_gpu_tensor_map
 * (kernels/kernel_params.h): 128 bytes, 64-byte aligned. */
enum {
  CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6,
  CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9,
  CU_TENSOR_MAP_INTERLEAVE_NONE = 0,
  CU_TENSOR_MAP_SWIZZLE_128B = 3,
  CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3,
  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0,
};
enum { CU_STREAM_NON_BLOCKING = 1 };
enum { CU_EVENT_DEFAULT = 0 };

typedef struct cuda_driver {
  void *library;
  CUresult (*cuInit)(unsigned int flags);
  CUresult (*cuDriverGetVersion)(int *version);
  CUresult (*cuDeviceGetCount)(int *count);
  CUresult (*cuDeviceGet)(CUdevice *device, int ordinal);
  CUresult (*cuDeviceGetName)(char *name, int length, CUdevice device);
  CUresult (*cuDeviceGetAttribute)(int *value, int attribute, CUdevice device);
  CUresult (*cuDeviceTotalMem)(size_t *bytes, CUdevice device);
  CUresult (*cuDeviceGetUuid)(CUuuid *uuid, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *context, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice device);
  CUresult (*cuCtxSetCurrent)(CUcontext context);
  CUresult (*cuCtxSynchronize)(void);
  CUresult (*cuMemAlloc)(CUdeviceptr *pointer, size_t bytes);
  CUresult (*cuMemFree)(CUdeviceptr pointer);
  CUresult (*cuMemGetAddressRange)(CUdeviceptr *base, size_t *bytes, CUdeviceptr pointer);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr dst, const void *src, size_t bytes, CUstream stream);
  CUresult (*cuMemcpyDtoHAsync)(void *dst, CUdeviceptr src, size_t bytes, CUstream stream);
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream);
  CUresult (*cuMemsetD32Async)(CUdeviceptr dst, unsigned int value, size_t count, CUstream stream);
  CUresult (*cuStreamCreate)(CUstream *stream, unsigned int flags);
  CUresult (*cuStreamDestroy)(CUstream stream);
  CUresult (*cuStreamSynchronize)(CUstream stream);
  CUresult (*cuEventCreate)(CUevent *event, unsigned int flags);
  CUresult (*cuEventRecord)(CUevent event, CUstream stream);
  CUresult (*cuEventSynchronize)(CUevent event);
  CUresult (*cuEventElapsedTime)(float *milliseconds, CUevent start, CUevent end);
  CUresult (*cuEventDestroy)(CUevent event);
  CUresult (*cuModuleLoadData)(CUmodule *module, const void *image);
  CUresult (*cuModuleUnload)(CUmodule module);
  CUresult (*cuModuleGetFunction)(CUfunction *function, CUmodule module, const char *name);
  CUresult (*cuFuncSetAttribute)(CUfunction function, int attribute, int value);
  CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int *blocks, CUfunction function,
                                                          int block_size, size_t dynamic_smem);
  CUresult (*cuLaunchKernel)(CUfunction function, unsigned int grid_x, unsigned int grid_y,
                             unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                             unsigned int block_z, unsigned int shared_bytes, CUstream stream,
                             void **params, void **extra);
  CUresult (*cuGetErrorName)(CUresult error, const char **name);
  CUresult (*cuGetErrorString)(CUresult error, const char **text);
  /* Optional (CUDA 12.0+ drivers): NULL where missing; the TMA-fed sm_90a
   * GEMM kernels are then not offered. */
  CUresult (*cuTensorMapEncodeTiled)(void *tensor_map, int data_type, unsigned int rank,
                                     void *global_address, const unsigned long long *global_dims,
                                     const unsigned long long *global_strides,
                                     const unsigned int *box_dims,
                                     const unsigned int *element_strides, int interleave,
                                     int swizzle, int l2_promotion, int oob_fill);
} cuda_driver;

/* Opens `library` (NULL: libcuda.so.1) and resolves every entry point
 * (the optional ones may stay NULL).
 * Returns 0 and fills `why` (a sentence) when that fails; the driver is then
 * zeroed and unusable. */
int cuda_driver_open(cuda_driver *driver, const char *library, char *why, size_t why_capacity);
void cuda_driver_close(cuda_driver *driver);

/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for a result. */
void cuda_driver_describe(const cuda_driver *driver, CUresult result, char *buffer,
                          size_t capacity);

#endif /* TESSERA_CUDA_DRIVER_H */
