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
 * CI, and bench/gpu/host_overhead.sh counts that path's instructions.
 *
 * For the interop tests (gpu_interop.c) it keeps a little state: streams
 * are slots of a fixed pool that remember their context, whether they are
 * alive, and how much work was queued on them; the current context is per
 * thread; host registrations are kept as ranges (device address = host
 * address, as with unified addressing). fake_cuda_stream_work and
 * fake_cuda_host_registrations let a test read it.
 *
 * Several GPUs' entries (event waits, stream waits on a host word, peer
 * access and copies) succeed and count as stream work; nothing waits, so a
 * gate never holds anything here. TESSERA_FAKE_CUDA_DEVICES=<n> (1 to 8,
 * default 1) makes n alike devices, each with a primary context of its own. cuMemHostAlloc'ed
 * memory is real host memory, mapped like a registration but not counted as one. */
#include <pthread.h>
#include <stdbool.h>
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

/* The context cuCtxSetCurrent made current on this thread (NULL: none). */
static _Thread_local CUcontext current_context;

/* Streams: pool slots, claimed and released atomically. */
enum { FAKE_STREAMS = 1024 };
typedef struct fake_stream {
  int live;
  CUcontext context;
  uint64_t work; /* launches, copies, memsets and event records queued */
} fake_stream;
static fake_stream streams[FAKE_STREAMS];

static fake_stream *stream_slot(CUstream stream) {
  fake_stream *slot = (fake_stream *)(void *)stream;
  return slot >= streams && slot < streams + FAKE_STREAMS ? slot : NULL;
}

/* Counts work queued on a pool stream (the default streams count nowhere). */
static void stream_work(CUstream stream) {
  fake_stream *slot = stream_slot(stream);
  if (slot)
    __atomic_fetch_add(&slot->work, 1, __ATOMIC_RELAXED);
}

/* 1 and the work queued on it when `stream` is a live stream, else 0. */
__attribute__((visibility("default"))) int fake_cuda_stream_work(CUstream stream, uint64_t *work) {
  fake_stream *slot = stream_slot(stream);
  if (!slot || !__atomic_load_n(&slot->live, __ATOMIC_ACQUIRE))
    return 0;
  *work = __atomic_load_n(&slot->work, __ATOMIC_RELAXED);
  return 1;
}

/* Registered host ranges. */
enum { FAKE_REGISTRATIONS = 64 };
static struct {
  char *start;
  size_t bytes;
} registrations[FAKE_REGISTRATIONS];
static int registration_count;
static pthread_mutex_t registration_lock = PTHREAD_MUTEX_INITIALIZER;
/* cuMemHostAlloc'ed blocks (under registration_lock). */
enum { FAKE_HOST_ALLOCS = 1024 };
static struct {
  char *start;
  size_t bytes;
} host_allocs[FAKE_HOST_ALLOCS];
static int host_alloc_count;

__attribute__((visibility("default"))) int fake_cuda_host_registrations(void) {
  pthread_mutex_lock(&registration_lock);
  int count = registration_count;
  pthread_mutex_unlock(&registration_lock);
  return count;
}

CUresult cuInit(unsigned int flags) {
  (void)flags;
  return 0;
}
CUresult cuDriverGetVersion(int *version) {
  *version = 12080;
  return 0;
}
enum { FAKE_MAX_DEVICES = 8 };
CUresult cuDeviceGetCount(int *count) {
  const char *wanted = getenv("TESSERA_FAKE_CUDA_DEVICES");
  int n = wanted ? atoi(wanted) : 1;
  *count = n < 1 ? 1 : n > FAKE_MAX_DEVICES ? FAKE_MAX_DEVICES : n;
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
  memset(uuid, 0x42, 16);
  uuid->bytes[15] = (char)(0x42 + device); /* device 0's as before */
  return 0;
}
/* One primary context per device: what their handles point at. */
static char primary_contexts[FAKE_MAX_DEVICES];
CUresult cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice device) {
  if (device < 0 || device >= FAKE_MAX_DEVICES)
    return 101; /* CUDA_ERROR_INVALID_DEVICE */
  *context = (CUcontext)(void *)&primary_contexts[device];
  return 0;
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  (void)device;
  return 0;
}
CUresult cuCtxSetCurrent(CUcontext context) {
  current_context = context;
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
  stream_work(stream);
  return 0;
}
CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  (void)src;
  stream_work(stream);
  memset(dst, 0, bytes);
  return 0;
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  (void)dst, (void)src, (void)bytes, (void)stream;
  stream_work(stream);
  return 0;
}
CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t count, CUstream stream) {
  (void)dst, (void)value, (void)count, (void)stream;
  stream_work(stream);
  return 0;
}
CUresult cuStreamCreate(CUstream *stream, unsigned int flags) {
  (void)flags;
  for (int i = 0; i < FAKE_STREAMS; i++) {
    int expected = 0;
    if (__atomic_compare_exchange_n(&streams[i].live, &expected, 1, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED)) {
      streams[i].context = current_context;
      __atomic_store_n(&streams[i].work, 0, __ATOMIC_RELAXED);
      *stream = (CUstream)(void *)&streams[i];
      return 0;
    }
  }
  return CUDA_ERROR_OUT_OF_MEMORY;
}
/* A stream that is not alive: CUDA_ERROR_INVALID_HANDLE. */
static CUresult check_stream(CUstream stream) {
  fake_stream *slot = stream_slot(stream);
  if (slot && !__atomic_load_n(&slot->live, __ATOMIC_ACQUIRE))
    return 400;
  return !slot && (uintptr_t)stream > 2 ? 400 : 0; /* 0, legacy, per-thread: fine */
}
CUresult cuStreamDestroy_v2(CUstream stream) {
  fake_stream *slot = stream_slot(stream);
  int expected = 1;
  if (!slot || !__atomic_compare_exchange_n(&slot->live, &expected, 0, false, __ATOMIC_ACQ_REL,
                                            __ATOMIC_RELAXED))
    return 400;
  return 0;
}
CUresult cuStreamSynchronize(CUstream stream) {
  return check_stream(stream);
}
CUresult cuStreamGetCtx(CUstream stream, CUcontext *context) {
  CUresult result = check_stream(stream);
  if (result != 0)
    return result;
  fake_stream *slot = stream_slot(stream);
  *context = slot ? slot->context : current_context; /* the default streams: the current one */
  return 0;
}
CUresult cuEventCreate(CUevent *event, unsigned int flags) {
  (void)flags;
  *event = malloc(8);
  return 0;
}
CUresult cuEventRecord(CUevent event, CUstream stream) {
  (void)event;
  stream_work(stream);
  return check_stream(stream);
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
      (void)params, (void)extra;
  __atomic_fetch_add(&launches, 1, __ATOMIC_RELAXED);
  stream_work(stream);
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

/* Host registration: whole ranges, none overlapping (712 then, as CUDA
 * answers for memory registered before). */
CUresult cuMemHostRegister_v2(void *pointer, size_t bytes, unsigned int flags) {
  (void)flags;
  char *start = pointer;
  CUresult result = 0;
  pthread_mutex_lock(&registration_lock);
  for (int i = 0; i < registration_count && result == 0; i++)
    if (start < registrations[i].start + registrations[i].bytes &&
        registrations[i].start < start + bytes)
      result = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  if (result == 0 && registration_count == FAKE_REGISTRATIONS)
    result = CUDA_ERROR_OUT_OF_MEMORY;
  if (result == 0) {
    registrations[registration_count].start = start;
    registrations[registration_count].bytes = bytes;
    registration_count++;
  }
  pthread_mutex_unlock(&registration_lock);
  return result;
}
CUresult cuMemHostUnregister(void *pointer) {
  CUresult result = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  pthread_mutex_lock(&registration_lock);
  for (int i = 0; i < registration_count; i++) {
    if (registrations[i].start == pointer) {
      registrations[i] = registrations[--registration_count];
      result = 0;
      break;
    }
  }
  pthread_mutex_unlock(&registration_lock);
  return result;
}
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *device_pointer, void *pointer,
                                      unsigned int flags) {
  (void)flags;
  char *address = pointer;
  CUresult result = 1; /* CUDA_ERROR_INVALID_VALUE: not registered */
  pthread_mutex_lock(&registration_lock);
  for (int i = 0; i < registration_count; i++)
    if (address >= registrations[i].start &&
        address < registrations[i].start + registrations[i].bytes)
      result = 0;
  for (int i = 0; i < host_alloc_count; i++)
    if (address >= host_allocs[i].start && address < host_allocs[i].start + host_allocs[i].bytes)
      result = 0;
  pthread_mutex_unlock(&registration_lock);
  *device_pointer = result == 0 ? (CUdeviceptr)(uintptr_t)pointer : 0;
  return result;
}

/* Several GPUs. */
CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags) {
  (void)event, (void)flags;
  stream_work(stream);
  return check_stream(stream);
}
CUresult cuMemHostAlloc(void **pointer, size_t bytes, unsigned int flags) {
  (void)flags;
  char *block = calloc(1, bytes > 0 ? bytes : 1);
  if (!block)
    return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult result = 0;
  pthread_mutex_lock(&registration_lock);
  if (host_alloc_count == FAKE_HOST_ALLOCS) {
    result = CUDA_ERROR_OUT_OF_MEMORY;
  } else {
    host_allocs[host_alloc_count].start = block;
    host_allocs[host_alloc_count].bytes = bytes;
    host_alloc_count++;
  }
  pthread_mutex_unlock(&registration_lock);
  if (result != 0) {
    free(block);
    block = NULL;
  }
  *pointer = block;
  return result;
}
CUresult cuMemFreeHost(void *pointer) {
  CUresult result = 1; /* CUDA_ERROR_INVALID_VALUE: not from cuMemHostAlloc */
  pthread_mutex_lock(&registration_lock);
  for (int i = 0; i < host_alloc_count; i++) {
    if (host_allocs[i].start == pointer) {
      host_allocs[i] = host_allocs[--host_alloc_count];
      result = 0;
      break;
    }
  }
  pthread_mutex_unlock(&registration_lock);
  if (result == 0)
    free(pointer);
  return result;
}
CUresult cuStreamWaitValue32_v2(CUstream stream, CUdeviceptr address, unsigned int value,
                                unsigned int flags) {
  (void)value, (void)flags;
  stream_work(stream);
  return address == 0 || address % 4 != 0 ? 1 : check_stream(stream);
}
CUresult cuDeviceCanAccessPeer(int *can, CUdevice device, CUdevice peer) {
  *can = device != peer;
  return 0;
}
CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
  (void)peer, (void)flags;
  return 0;
}
CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dst_context, CUdeviceptr src,
                           CUcontext src_context, size_t bytes, CUstream stream) {
  (void)dst, (void)dst_context, (void)src, (void)src_context, (void)bytes;
  stream_work(stream);
  return check_stream(stream);
}
