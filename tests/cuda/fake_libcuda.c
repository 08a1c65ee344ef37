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

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

static int dummy_object;
static uint64_t launches;
static CUdeviceptr next_address = 1ull << 40;

CUresult cuInit(unsigned flags) {
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
CUresult cuDeviceGet(int *device, int ordinal) {
  *device = ordinal;
  return 0;
}
CUresult cuDeviceGetName(char *name, int length, int device) {
  (void)device;
  snprintf(name, (size_t)length, "Fake H100 (host-time stand-in)");
  return 0;
}
CUresult cuDeviceGetAttribute(int *value, int attribute, int device) {
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
CUresult cuDeviceTotalMem_v2(size_t *bytes, int device) {
  (void)device;
  *bytes = (size_t)80 << 30;
  return 0;
}
CUresult cuDeviceGetUuid_v2(void *uuid, int device) {
  (void)device;
  memset(uuid, 0x42, 16);
  return 0;
}
CUresult cuDevicePrimaryCtxRetain(void **context, int device) {
  (void)device;
  *context = &dummy_object;
  return 0;
}
CUresult cuDevicePrimaryCtxRelease_v2(int device) {
  (void)device;
  return 0;
}
CUresult cuCtxSetCurrent(void *context) {
  (void)context;
  return 0;
}
CUresult cuCtxSynchronize(void) {
  return 0;
}
CUresult cuMemAlloc_v2(CUdeviceptr *pointer, size_t bytes) {
  *pointer = next_address;
  next_address += (bytes + 0xffff) & ~(CUdeviceptr)0xffff;
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
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t bytes, void *stream) {
  (void)dst, (void)src, (void)bytes, (void)stream;
  return 0;
}
CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t bytes, void *stream) {
  (void)src, (void)stream;
  memset(dst, 0, bytes);
  return 0;
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes, void *stream) {
  (void)dst, (void)src, (void)bytes, (void)stream;
  return 0;
}
CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned value, size_t count, void *stream) {
  (void)dst, (void)value, (void)count, (void)stream;
  return 0;
}
CUresult cuStreamCreate(void **stream, unsigned flags) {
  (void)flags;
  *stream = &dummy_object;
  return 0;
}
CUresult cuStreamDestroy_v2(void *stream) {
  (void)stream;
  return 0;
}
CUresult cuStreamSynchronize(void *stream) {
  (void)stream;
  return 0;
}
CUresult cuEventCreate(void **event, unsigned flags) {
  (void)flags;
  *event = malloc(8);
  return 0;
}
CUresult cuEventRecord(void *event, void *stream) {
  (void)event, (void)stream;
  return 0;
}
CUresult cuEventSynchronize(void *event) {
  (void)event;
  return 0;
}
CUresult cuEventElapsedTime_v2(float *ms, void *start, void *end) {
  (void)start, (void)end;
  *ms = 0.001f;
  return 0;
}
CUresult cuEventDestroy_v2(void *event) {
  free(event);
  return 0;
}
CUresult cuModuleLoadData(void **module, const void *image) {
  (void)image;
  *module = &dummy_object;
  return 0;
}
CUresult cuModuleUnload(void *module) {
  (void)module;
  return 0;
}
CUresult cuModuleGetFunction(void **function, void *module, const char *name) {
  (void)module, (void)name;
  *function = &dummy_object;
  return 0;
}
CUresult cuFuncSetAttribute(void *function, int attribute, int value) {
  (void)function, (void)attribute, (void)value;
  return 0;
}
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, void *function, int block_size,
                                                     size_t dynamic_smem) {
  (void)function;
  int by_threads = block_size > 0 ? 2048 / block_size : 1;
  int by_smem = dynamic_smem > 0 ? (int)((228u * 1024u) / (dynamic_smem + 1024)) : 32;
  int n = by_threads < by_smem ? by_threads : by_smem;
  *blocks = n > 0 ? n : 0;
  return 0;
}
CUresult cuLaunchKernel(void *function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned smem, void *stream, void **params,
                        void **extra) {
  (void)function, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)smem,
      (void)stream, (void)params, (void)extra;
  launches++;
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
CUresult cuTensorMapEncodeTiled(void *map, int data_type, unsigned rank, void *address,
                                const unsigned long long *dims, const unsigned long long *strides,
                                const unsigned *box, const unsigned *element_strides,
                                int interleave, int swizzle, int l2, int oob) {
  (void)data_type, (void)rank, (void)dims, (void)strides, (void)box, (void)element_strides,
      (void)interleave, (void)swizzle, (void)l2, (void)oob;
  memset(map, 0, 128);
  memcpy(map, &address, sizeof address);
  return 0;
}
