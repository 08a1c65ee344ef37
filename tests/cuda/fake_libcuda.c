/* SPDX-License-Identifier: Apache-2.0 */
/* A stand-in CUDA driver for measuring the CUDA plugin's host work on a
 * machine without a GPU: one device that looks like an H100 (compute
 * capability 9.0, 132 SMs, 227 KiB of shared memory per block), every call
 * succeeds, launches and copies do nothing, device "memory" is address space
 * that is never touched. Load it with TESSERA_CUDA_DRIVER=<path to the .so>.
 * Results computed through it are garbage; only host times mean anything.
 *
 * Built by tests/cuda/CMakeLists.txt as lib/libtessera-fake-cuda.so: the
 * cuda.fake_driver test runs the CUDA plugin's whole host path through it in
 * CI, and bench/gpu/host_overhead.sh counts that path's instructions. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The signatures of backends/cuda/cuda_api.h: each definition below is
 * checked against the prototype the plugin resolves. */
#include "cuda_api.h"

/* What handles point at: never read. */
static int dummy_object;
#define DUMMY(type) ((type)(void *)&dummy_object)
static uint64_t launches;
static CUdeviceptr next_address = 1ull << 40;

CUresult cuInit(unsigned int flags) {
  (void)flags;
  return 0;
}
CUresult cuDriverGetVersion(int *version) {
  *version = 12080;
  return 0;
}
CUresult cuDeviceGetCount(int *count) {
  *count = 1;
  return 0;
}
CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  *device = ordinal;
  return 0;
}
CUresult cuDeviceGetName(char *name, int length, CUdevice device) {
  (void)device;
  snprintf(name, (size_t)length, "Fake H100 (host-time stand-in)");
  return 0;
}
CUresult cuDeviceGetAttribute(int *value, int attribute, CUdevice device) {
  (void)device;
  switch (attribute) {
  case 1: /* max threads per block */
    *value = 1024;
    break;
  case 8: /* shared memory per block */
    *value = 48 * 1024;
    break;
  case 13:
    *value = 1980000;
    break;
  case 16: /* SMs */
    *value = 132;
    break;
  case 36:
    *value = 2619000;
    break;
  case 37:
    *value = 5120;
    break;
  case 38:
    *value = 50 * 1024 * 1024;
    break;
  case 75:
    *value = 9;
    break;
  case 76:
    *value = 0;
    break;
  case 81:
    *value = 228 * 1024;
    break;
  case 97:
    *value = 227 * 1024;
    break;
  default:
    *value = 0;
  }
  return 0;
}
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice device) {
  (void)device;
  *bytes = (size_t)80 << 30;
  return 0;
}
CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice device) {
  (void)device;
  memset(uuid, 0x42, 16);
  return 0;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice device) {
  (void)device;
  *context = DUMMY(CUcontext);
  return 0;
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  (void)device;
  return 0;
}
CUresult cuCtxSetCurrent(CUcontext context) {
  (void)context;
  return 0;
}
CUresult cuCtxSynchronize(void) {
  return 0;
}
CUresult cuMemAlloc_v2(CUdeviceptr *pointer, size_t bytes) {
  /* atomic: the threads tests allocate from several threads (TSan) */
  *pointer =
      __atomic_fetch_add(&next_address, (bytes + 0xffff) & ~(CUdeviceptr)0xffff, __ATOMIC_RELAXED);
  return 0;
}
CUresult cuMemFree_v2(CUdeviceptr pointer) {
  (void)pointer;
  return 0;
}
CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *bytes, CUdeviceptr pointer) {
  *base = pointer;
  *bytes = 0;
  return 1;
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t bytes, CUstream stream) {
  (void)dst, (void)src, (void)bytes, (void)stream;
  return 0;
}
CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  (void)src, (void)stream;
  memset(dst, 0, bytes);
  return 0;
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  (void)dst, (void)src, (void)bytes, (void)stream;
  return 0;
}
CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t count, CUstream stream) {
  (void)dst, (void)value, (void)count, (void)stream;
  return 0;
}
CUresult cuStreamCreate(CUstream *stream, unsigned int flags) {
  (void)flags;
  *stream = DUMMY(CUstream);
  return 0;
}
CUresult cuStreamDestroy_v2(CUstream stream) {
  (void)stream;
  return 0;
}
CUresult cuStreamSynchronize(CUstream stream) {
  (void)stream;
  return 0;
}
CUresult cuEventCreate(CUevent *event, unsigned int flags) {
  (void)flags;
  *event = malloc(8);
  return 0;
}
CUresult cuEventRecord(CUevent event, CUstream stream) {
  (void)event, (void)stream;
  return 0;
}
CUresult cuEventSynchronize(CUevent event) {
  (void)event;
  return 0;
}
CUresult cuEventElapsedTime_v2(float *ms, CUevent start, CUevent end) {
  (void)start, (void)end;
  *ms = 0.001f;
  return 0;
}
CUresult cuEventDestroy_v2(CUevent event) {
  free(event);
  return 0;
}
CUresult cuModuleLoadData(CUmodule *module, const void *image) {
  (void)image;
  *module = DUMMY(CUmodule);
  return 0;
}
CUresult cuModuleUnload(CUmodule module) {
  (void)module;
  return 0;
}
CUresult cuModuleGetFunction(CUfunction *function, CUmodule module, const char *name) {
  (void)module, (void)name;
  *function = DUMMY(CUfunction);
  return 0;
}
CUresult cuFuncSetAttribute(CUfunction function, int attribute, int value) {
  (void)function, (void)attribute, (void)value;
  return 0;
}
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, CUfunction function,
                                                     int block_size, size_t dynamic_smem) {
  (void)function;
  int by_threads = block_size > 0 ? 2048 / block_size : 1;
  int by_smem = dynamic_smem > 0 ? (int)((228u * 1024u) / (dynamic_smem + 1024)) : 32;
  int n = by_threads < by_smem ? by_threads : by_smem;
  *blocks = n > 0 ? n : 0;
  return 0;
}
CUresult cuLaunchKernel(CUfunction function, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int smem,
                        CUstream stream, void **params, void **extra) {
  (void)function, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)smem,
      (void)stream, (void)params, (void)extra;
  __atomic_fetch_add(&launches, 1, __ATOMIC_RELAXED);
  return 0;
}
CUresult cuGetErrorName(CUresult error, const char **name) {
  (void)error;
  *name = "CUDA_ERROR_FAKE";
  return 0;
}
CUresult cuGetErrorString(CUresult error, const char **text) {
  (void)error;
  *text = "fake driver";
  return 0;
}
CUresult cuTensorMapEncodeTiled(void *map, int data_type, unsigned int rank, void *address,
                                const unsigned long long *dims, const unsigned long long *strides,
                                const unsigned int *box, const unsigned int *element_strides,
                                int interleave, int swizzle, int l2, int oob) {
  (void)data_type, (void)rank, (void)dims, (void)strides, (void)box, (void)element_strides,
      (void)interleave, (void)swizzle, (void)l2, (void)oob;
  memset(map, 0, 128);
  memcpy(map, &address, sizeof address);
  return 0;
}
