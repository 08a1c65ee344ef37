/* SPDX-License-Identifier: Apache-2.0 */
/* A test HIP runtime (libtessera-hip-on-cuda.so): the HIP entry points the
 * plugin resolves (backends/hip/hip_api.h), implemented over the CUDA driver
 * API, so the HIP plugin's host code, and its kernels compiled for NVIDIA,
 * run on an NVIDIA GPU where no AMD GPU is at hand. The device pretends to
 * be the AMD GPU named by TESSERA_HIP_TEST_ARCH (default
 * gfx90a:sramecc+:xnack-): its name, warp size, LDS size and the code
 * object the modules load follow that architecture, while everything runs
 * through CUDA.
 *
 * Environment:
 *   TESSERA_HIP_TEST_CUDA_DRIVER  the CUDA driver to dlopen (libcuda.so.1);
 *                                 tests/cuda's stand-in driver in CI
 *   TESSERA_HIP_TEST_ARCH         the AMD architecture to pretend to be
 *   TESSERA_HIP_TEST_VERBOSE      set: why init failed goes to stderr
 *
 * Modules are clang offload bundles (tests/hip/make_code_object_bundle.c
 * writes them) whose entry for the pretended architecture holds an NVIDIA
 * fatbin, cubin or PTX. Not a full HIP: only what the plugin calls. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>

#include "cuda_api.h"
#include "hip_api.h"

/* The tree builds with hidden visibility: a runtime exports its API. */
#define HIP_EXPORT __attribute__((visibility("default")))

/* ROCm 5's name for the entry point hip_api.h declares as
 * hipGetDevicePropertiesR0600; both are exported. */
HIP_EXPORT hipError_t hipGetDeviceProperties(void *properties, int device);

/* CUdevice_attribute values cuda_api.h lacks (the driver's cuda.h). */
enum { CU_ATTR_WARP_SIZE = 10 };

/* A module's ids and sizes are bounded: the bundle carries no total size. */
enum { BUNDLE_MAX_ENTRIES = 64, BUNDLE_MAX_ID = 256 };
static const char bundle_magic[] = "__CLANG_OFFLOAD_BUNDLE__";
enum { BUNDLE_MAGIC_BYTES = sizeof bundle_magic - 1 };
#define BUNDLE_MAX_ENTRY_BYTES ((uint64_t)1 << 32)

/* Where ROCm 5's hipDeviceProp_t keeps gcnArchName[256]; name[256] is at 0. */
enum { PROPS_NAME_OFFSET = 0, PROPS_ARCH_OFFSET = 396, PROPS_STRING_BYTES = 256 };

enum { AMD_LDS_BYTES = 65536 };

/* hipError_t values hip_api.h does not name (ROCm's hip_runtime_api.h). */
enum { HIP_ERROR_INVALID_HANDLE = 400, HIP_ERROR_NOT_SUPPORTED = 801 };

/* More GPUs than one host has. */
enum { MAX_DEVICES = 64 };

/* ------------------------------------------------------------------------ */
/* State                                                                     */
/* ------------------------------------------------------------------------ */

/* Written once under pthread_once, read-only afterwards, except contexts[]
 * (under context_lock). */
static struct {
  pthread_once_t once;
  hipError_t status; /* hipSuccess, or why every call fails */
  cuda_api api;
  int device_count;
  /* Static, not heap: a caller that dlcloses the library would otherwise
   * leave them to LeakSanitizer as leaks. */
  CUdevice devices[MAX_DEVICES];
  CUcontext contexts[MAX_DEVICES]; /* retained primary contexts or NULL */
  pthread_mutex_t context_lock;
} runtime = {.once = PTHREAD_ONCE_INIT, .context_lock = PTHREAD_MUTEX_INITIALIZER};

/* The device whose context this thread made current (-1: none yet). */
static _Thread_local int thread_device = -1;

static void init_failed(hipError_t status, const char *why, const char *detail) {
  runtime.status = status;
  if (getenv("TESSERA_HIP_TEST_VERBOSE"))
    fprintf(stderr, "hip-on-cuda: %s%s%s\n", why, detail ? ": " : "", detail ? detail : "");
}

static void init_once(void) {
  const char *name = getenv("TESSERA_HIP_TEST_CUDA_DRIVER");
  if (!name || !*name)
    name = "libcuda.so.1";
  void *library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char *error = dlerror();
    init_failed(hipErrorNoDevice, "cannot load the CUDA driver", error ? error : name);
    return;
  }
  const char *missing = cuda_api_load(&runtime.api, library);
  if (missing) {
    init_failed(hipErrorNoDevice, "the CUDA driver lacks", missing);
    dlclose(library);
    return;
  }
  CUresult result = runtime.api.cuInit(0);
  int count = 0;
  if (result == CUDA_SUCCESS)
    result = runtime.api.cuDeviceGetCount(&count);
  if (result != CUDA_SUCCESS || count <= 0) {
    const char *text = NULL;
    if (result != CUDA_SUCCESS && runtime.api.cuGetErrorString(result, &text) != CUDA_SUCCESS)
      text = NULL;
    init_failed(hipErrorNoDevice, result != CUDA_SUCCESS ? "CUDA init failed" : "no CUDA device",
                text);
    /* The library stays loaded: hipGetErrorName may still ask it. */
    return;
  }
  if (count > MAX_DEVICES)
    count = MAX_DEVICES;
  for (int i = 0; i < count; i++) {
    result = runtime.api.cuDeviceGet(&runtime.devices[i], i);
    if (result != CUDA_SUCCESS) {
      init_failed(hipErrorNoDevice, "cuDeviceGet failed", NULL);
      return;
    }
  }
  runtime.device_count = count;
  runtime.status = hipSuccess;
}

static hipError_t init(void) {
  pthread_once(&runtime.once, init_once);
  return runtime.status;
}

/* Every call but device discovery: "not initialized" where init failed. */
static hipError_t ready(void) {
  return init() == hipSuccess ? hipSuccess : hipErrorNotInitialized;
}

static hipError_t check_device(int device) {
  hipError_t status = ready();
  if (status != hipSuccess)
    return status;
  return device >= 0 && device < runtime.device_count ? hipSuccess : hipErrorInvalidDevice;
}

/* `device`'s primary context, retained the first time any thread asks
 * (kept for the life of the process). */
static hipError_t device_context(int device, CUcontext *out) {
  hipError_t status = check_device(device);
  if (status != hipSuccess)
    return status;
  pthread_mutex_lock(&runtime.context_lock);
  CUcontext context = runtime.contexts[device];
  CUresult result = CUDA_SUCCESS;
  if (!context) {
    result = runtime.api.cuDevicePrimaryCtxRetain(&context, runtime.devices[device]);
    if (result == CUDA_SUCCESS)
      runtime.contexts[device] = context;
  }
  pthread_mutex_unlock(&runtime.context_lock);
  *out = context;
  return result;
}

/* Makes `device`'s primary context current on this thread. */
static hipError_t enter_device(int device) {
  CUcontext context = NULL;
  hipError_t result = device_context(device, &context);
  if (result != hipSuccess)
    return result;
  result = runtime.api.cuCtxSetCurrent(context);
  if (result != CUDA_SUCCESS)
    return result;
  thread_device = device;
  return hipSuccess;
}

/* Calls that need a context act on this thread's, device 0's by default. */
static hipError_t with_context(void) {
  hipError_t status = ready();
  if (status != hipSuccess || thread_device >= 0)
    return status;
  return enter_device(0);
}

static CUdeviceptr device_pointer(const void *pointer) {
  return (CUdeviceptr)(uintptr_t)pointer;
}

/* The pretended AMD architecture, "gfx90a:sramecc+:xnack-" by default. */
static const char *arch_string(void) {
  const char *arch = getenv("TESSERA_HIP_TEST_ARCH");
  return arch && *arch ? arch : "gfx90a:sramecc+:xnack-";
}

/* The length of an architecture string's processor ("gfx90a" of
 * "gfx90a:sramecc+:xnack-"). */
static size_t arch_base_length(const char *arch) {
  return strcspn(arch, ":");
}

/* HIP reports gfxMMmS as compute capability MM.m (gfx90a: 9.0, gfx942:
 * 9.4, gfx1100: 11.0); 9.0 where the name does not parse. */
static void arch_capability(int *major, int *minor) {
  const char *arch = arch_string();
  size_t length = arch_base_length(arch);
  *major = 9;
  *minor = 0;
  if (length < 6 || strncmp(arch, "gfx", 3) != 0)
    return;
  const char *digits = arch + 3;
  size_t count = length - 3;
  int parsed = 0;
  for (size_t i = 0; i + 2 < count; i++) {
    if (digits[i] < '0' || digits[i] > '9')
      return;
    parsed = parsed * 10 + (digits[i] - '0');
  }
  char m = digits[count - 2];
  if (m < '0' || m > '9')
    return;
  *major = parsed;
  *minor = m - '0';
}

/* ------------------------------------------------------------------------ */
/* Init and devices                                                          */
/* ------------------------------------------------------------------------ */

HIP_EXPORT hipError_t hipInit(unsigned int flags) {
  if (flags != 0)
    return hipErrorInvalidValue;
  return init();
}

HIP_EXPORT hipError_t hipDriverGetVersion(int *version) {
  if (!version)
    return hipErrorInvalidValue;
  hipError_t status = ready();
  if (status != hipSuccess)
    return status;
  return runtime.api.cuDriverGetVersion(version);
}

HIP_EXPORT hipError_t hipRuntimeGetVersion(int *version) {
  return hipDriverGetVersion(version);
}

HIP_EXPORT hipError_t hipGetDeviceCount(int *count) {
  if (!count)
    return hipErrorInvalidValue;
  hipError_t status = init();
  *count = status == hipSuccess ? runtime.device_count : 0;
  return status == hipSuccess ? hipSuccess : hipErrorNoDevice;
}

HIP_EXPORT hipError_t hipDeviceGet(hipDevice_t *device, int ordinal) {
  if (!device)
    return hipErrorInvalidValue;
  hipError_t status = check_device(ordinal);
  if (status == hipSuccess)
    *device = ordinal; /* HIP's device handle is the ordinal */
  return status;
}

HIP_EXPORT hipError_t hipDeviceGetName(char *name, int length, hipDevice_t device) {
  if (!name || length <= 0)
    return hipErrorInvalidValue;
  hipError_t status = check_device(device);
  if (status != hipSuccess)
    return status;
  return runtime.api.cuDeviceGetName(name, length, runtime.devices[device]);
}

HIP_EXPORT hipError_t hipDeviceTotalMem(size_t *bytes, hipDevice_t device) {
  if (!bytes)
    return hipErrorInvalidValue;
  hipError_t status = check_device(device);
  if (status != hipSuccess)
    return status;
  return runtime.api.cuDeviceTotalMem(bytes, runtime.devices[device]);
}

HIP_EXPORT hipError_t hipDeviceGetUuid(hipUUID *uuid, hipDevice_t device) {
  if (!uuid)
    return hipErrorInvalidValue;
  hipError_t status = check_device(device);
  if (status != hipSuccess)
    return status;
  CUuuid cuda_uuid;
  CUresult result = runtime.api.cuDeviceGetUuid(&cuda_uuid, runtime.devices[device]);
  if (result == CUDA_SUCCESS)
    memcpy(uuid->bytes, cuda_uuid.bytes, sizeof uuid->bytes);
  return result;
}

HIP_EXPORT hipError_t hipDeviceGetAttribute(int *value, int attribute, int device) {
  if (!value)
    return hipErrorInvalidValue;
  hipError_t status = check_device(device);
  if (status != hipSuccess)
    return status;
  int cuda_attribute;
  switch (attribute) {
  case hipDeviceAttributeClockRate:
    cuda_attribute = CU_ATTR_CLOCK_RATE;
    break;
  case hipDeviceAttributeL2CacheSize:
    cuda_attribute = CU_ATTR_L2_CACHE_SIZE;
    break;
  case hipDeviceAttributeMaxThreadsPerBlock:
    cuda_attribute = CU_ATTR_MAX_THREADS_PER_BLOCK;
    break;
  case hipDeviceAttributeMemoryBusWidth:
    cuda_attribute = CU_ATTR_GLOBAL_MEMORY_BUS_WIDTH;
    break;
  case hipDeviceAttributeMemoryClockRate:
    cuda_attribute = CU_ATTR_MEMORY_CLOCK_RATE;
    break;
  case hipDeviceAttributeMultiprocessorCount:
    cuda_attribute = CU_ATTR_MULTIPROCESSOR_COUNT;
    break;
  case hipDeviceAttributePciBusId:
    cuda_attribute = CU_ATTR_PCI_BUS_ID;
    break;
  case hipDeviceAttributePciDeviceId:
    cuda_attribute = CU_ATTR_PCI_DEVICE_ID;
    break;
  case hipDeviceAttributePciDomainID:
    cuda_attribute = CU_ATTR_PCI_DOMAIN_ID;
    break;
  /* What makes it look like the AMD GPU: its LDS, wavefront and version. */
  case hipDeviceAttributeMaxSharedMemoryPerBlock:
  case hipDeviceAttributeSharedMemPerBlockOptin:
    *value = AMD_LDS_BYTES;
    return hipSuccess;
  case hipDeviceAttributeWarpSize:
    /* gfx9 (CDNA) runs wave64; RDNA (gfx10+) defaults to wave32. */
    *value = strncmp(arch_string(), "gfx9", 4) == 0 ? 64 : 32;
    return hipSuccess;
  case hipDeviceAttributeComputeCapabilityMajor:
  case hipDeviceAttributeComputeCapabilityMinor: {
    int major, minor;
    arch_capability(&major, &minor);
    *value = attribute == hipDeviceAttributeComputeCapabilityMajor ? major : minor;
    return hipSuccess;
  }
  default:
    return hipErrorInvalidValue;
  }
  return runtime.api.cuDeviceGetAttribute(value, cuda_attribute, runtime.devices[device]);
}

/* The caller's buffer is HIP_DEVICE_PROPS_BUFFER bytes (hip_api.h): only
 * the name and the architecture string are filled, where ROCm 5 has them;
 * the rest is zero. */
static hipError_t get_device_properties(void *properties, int device) {
  if (!properties)
    return hipErrorInvalidValue;
  hipError_t status = check_device(device);
  if (status != hipSuccess)
    return status;
  char *bytes = properties;
  memset(bytes, 0, HIP_DEVICE_PROPS_BUFFER);
  CUresult result = runtime.api.cuDeviceGetName(bytes + PROPS_NAME_OFFSET, PROPS_STRING_BYTES,
                                                runtime.devices[device]);
  if (result != CUDA_SUCCESS)
    return result;
  bytes[PROPS_NAME_OFFSET + PROPS_STRING_BYTES - 1] = '\0';
  snprintf(bytes + PROPS_ARCH_OFFSET, PROPS_STRING_BYTES, "%s", arch_string());
  return hipSuccess;
}

HIP_EXPORT hipError_t hipGetDevicePropertiesR0600(void *properties, int device) {
  return get_device_properties(properties, device);
}

HIP_EXPORT hipError_t hipGetDeviceProperties(void *properties, int device) {
  return get_device_properties(properties, device);
}

HIP_EXPORT hipError_t hipSetDevice(int device) {
  return enter_device(device);
}

HIP_EXPORT hipError_t hipDeviceSynchronize(void) {
  hipError_t status = with_context();
  return status != hipSuccess ? status : runtime.api.cuCtxSynchronize();
}

/* ------------------------------------------------------------------------ */
/* Memory                                                                    */
/* ------------------------------------------------------------------------ */

HIP_EXPORT hipError_t hipMalloc(void **pointer, size_t bytes) {
  if (!pointer)
    return hipErrorInvalidValue;
  *pointer = NULL;
  hipError_t status = with_context();
  /* HIP gives NULL for 0 bytes where CUDA refuses. */
  if (status != hipSuccess || bytes == 0)
    return status;
  CUdeviceptr allocated = 0;
  CUresult result = runtime.api.cuMemAlloc(&allocated, bytes);
  if (result == CUDA_SUCCESS)
    *pointer = (void *)(uintptr_t)allocated;
  return result;
}

HIP_EXPORT hipError_t hipFree(void *pointer) {
  hipError_t status = with_context();
  if (status != hipSuccess || !pointer)
    return status;
  return runtime.api.cuMemFree(device_pointer(pointer));
}

HIP_EXPORT hipError_t hipMemGetAddressRange(hipDeviceptr_t *base, size_t *bytes,
                                            hipDeviceptr_t pointer) {
  hipError_t status = with_context();
  if (status != hipSuccess)
    return status;
  CUdeviceptr start = 0;
  size_t size = 0;
  CUresult result = runtime.api.cuMemGetAddressRange(&start, &size, device_pointer(pointer));
  if (result != CUDA_SUCCESS)
    return result;
  if (base)
    *base = (hipDeviceptr_t)(uintptr_t)start;
  if (bytes)
    *bytes = size;
  return hipSuccess;
}

HIP_EXPORT hipError_t hipMemcpyHtoDAsync(hipDeviceptr_t dst, void *src, size_t bytes,
                                         hipStream_t stream) {
  hipError_t status = with_context();
  return status != hipSuccess
             ? status
             : runtime.api.cuMemcpyHtoDAsync(device_pointer(dst), src, bytes, (CUstream)stream);
}

HIP_EXPORT hipError_t hipMemcpyDtoHAsync(void *dst, hipDeviceptr_t src, size_t bytes,
                                         hipStream_t stream) {
  hipError_t status = with_context();
  return status != hipSuccess
             ? status
             : runtime.api.cuMemcpyDtoHAsync(dst, device_pointer(src), bytes, (CUstream)stream);
}

HIP_EXPORT hipError_t hipMemcpyDtoDAsync(hipDeviceptr_t dst, hipDeviceptr_t src, size_t bytes,
                                         hipStream_t stream) {
  hipError_t status = with_context();
  return status != hipSuccess
             ? status
             : runtime.api.cuMemcpyDtoDAsync(device_pointer(dst), device_pointer(src), bytes,
                                             (CUstream)stream);
}

HIP_EXPORT hipError_t hipMemsetD32Async(hipDeviceptr_t dst, int value, size_t count,
                                        hipStream_t stream) {
  hipError_t status = with_context();
  return status != hipSuccess
             ? status
             : runtime.api.cuMemsetD32Async(device_pointer(dst), (unsigned int)value, count,
                                            (CUstream)stream);
}

/* hipHostRegisterPortable and hipHostRegisterMapped have the values of
 * CU_MEMHOSTREGISTER_PORTABLE and _DEVICEMAP: the flags pass through. */
HIP_EXPORT hipError_t hipHostRegister(void *pointer, size_t bytes, unsigned int flags) {
  hipError_t status = with_context();
  if (status != hipSuccess)
    return status;
  return runtime.api.cuMemHostRegister ? runtime.api.cuMemHostRegister(pointer, bytes, flags)
                                       : HIP_ERROR_NOT_SUPPORTED;
}

HIP_EXPORT hipError_t hipHostUnregister(void *pointer) {
  hipError_t status = with_context();
  if (status != hipSuccess)
    return status;
  return runtime.api.cuMemHostUnregister ? runtime.api.cuMemHostUnregister(pointer)
                                         : HIP_ERROR_NOT_SUPPORTED;
}

HIP_EXPORT hipError_t hipHostGetDevicePointer(void **device_pointer, void *pointer,
                                              unsigned int flags) {
  if (!device_pointer)
    return hipErrorInvalidValue;
  hipError_t status = with_context();
  if (status != hipSuccess)
    return status;
  if (!runtime.api.cuMemHostGetDevicePointer)
    return HIP_ERROR_NOT_SUPPORTED;
  CUdeviceptr mapped = 0;
  CUresult result = runtime.api.cuMemHostGetDevicePointer(&mapped, pointer, flags);
  *device_pointer = (void *)(uintptr_t)mapped;
  return result;
}

/* ------------------------------------------------------------------------ */
/* Streams and events: the CUDA handles themselves                          */
/* ------------------------------------------------------------------------ */

HIP_EXPORT hipError_t hipStreamCreateWithFlags(hipStream_t *stream, unsigned int flags) {
  if (!stream || (flags & ~(unsigned int)hipStreamNonBlocking))
    return hipErrorInvalidValue;
  hipError_t status = with_context();
  if (status != hipSuccess)
    return status;
  CUstream created = NULL;
  CUresult result = runtime.api.cuStreamCreate(
      &created, (flags & hipStreamNonBlocking) ? CU_STREAM_NON_BLOCKING : 0);
  if (result == CUDA_SUCCESS)
    *stream = (hipStream_t)created;
  return result;
}

HIP_EXPORT hipError_t hipStreamDestroy(hipStream_t stream) {
  hipError_t status = with_context();
  return status != hipSuccess ? status : runtime.api.cuStreamDestroy((CUstream)stream);
}

HIP_EXPORT hipError_t hipStreamSynchronize(hipStream_t stream) {
  hipError_t status = with_context();
  return status != hipSuccess ? status : runtime.api.cuStreamSynchronize((CUstream)stream);
}

/* The device whose primary context the stream's context is; a context
 * that is no device's primary one is an invalid handle to HIP. */
HIP_EXPORT hipError_t hipStreamGetDevice(hipStream_t stream, hipDevice_t *device) {
  if (!device)
    return hipErrorInvalidValue;
  hipError_t status = with_context();
  if (status != hipSuccess)
    return status;
  if (!runtime.api.cuStreamGetCtx)
    return HIP_ERROR_NOT_SUPPORTED;
  CUcontext context = NULL;
  CUresult result = runtime.api.cuStreamGetCtx((CUstream)stream, &context);
  if (result != CUDA_SUCCESS)
    return result;
  int found = -1;
  pthread_mutex_lock(&runtime.context_lock);
  for (int i = 0; i < runtime.device_count && found < 0; i++)
    if (runtime.contexts[i] && runtime.contexts[i] == context)
      found = i;
  pthread_mutex_unlock(&runtime.context_lock);
  if (found < 0)
    return HIP_ERROR_INVALID_HANDLE;
  *device = found;
  return hipSuccess;
}

/* Several GPUs, over the CUDA driver's entries (not supported where it
 * lacks them). hipHostMalloc's flags are cuMemHostAlloc's (portable 1,
 * mapped 2 = DEVICEMAP); only the >= wait with a full mask is offered. */
HIP_EXPORT hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags) {
  hipError_t status = with_context();
  if (status != hipSuccess)
    return status;
  if (!runtime.api.cuStreamWaitEvent)
    return HIP_ERROR_NOT_SUPPORTED;
  return runtime.api.cuStreamWaitEvent((CUstream)stream, (CUevent)event, flags);
}

HIP_EXPORT hipError_t hipHostMalloc(void **pointer, size_t bytes, unsigned int flags) {
  hipError_t status = with_context();
  if (status != hipSuccess)
    return status;
  if (!runtime.api.cuMemHostAlloc)
    return HIP_ERROR_NOT_SUPPORTED;
  return runtime.api.cuMemHostAlloc(pointer, bytes, flags);
}

HIP_EXPORT hipError_t hipHostFree(void *pointer) {
  hipError_t status = with_context();
  if (status != hipSuccess)
    return status;
  if (!runtime.api.cuMemFreeHost)
    return HIP_ERROR_NOT_SUPPORTED;
  return runtime.api.cuMemFreeHost(pointer);
}

HIP_EXPORT hipError_t hipStreamWaitValue32(hipStream_t stream, void *pointer, uint32_t value,
                                           unsigned int flags, uint32_t mask) {
  hipError_t status = with_context();
  if (status != hipSuccess)
    return status;
  if (!runtime.api.cuStreamWaitValue32 || flags != hipStreamWaitValueGte || mask != 0xffffffffu)
    return HIP_ERROR_NOT_SUPPORTED;
  return runtime.api.cuStreamWaitValue32((CUstream)stream, device_pointer(pointer), value,
                                         CU_STREAM_WAIT_VALUE_GEQ);
}

HIP_EXPORT hipError_t hipDeviceCanAccessPeer(int *can, int device, int peer) {
  hipError_t status = check_device(device);
  if (status == hipSuccess)
    status = check_device(peer);
  if (status != hipSuccess)
    return status;
  if (!runtime.api.cuDeviceCanAccessPeer)
    return HIP_ERROR_NOT_SUPPORTED;
  return runtime.api.cuDeviceCanAccessPeer(can, runtime.devices[device], runtime.devices[peer]);
}

/* From this thread's device to `peer`'s memory. */
HIP_EXPORT hipError_t hipDeviceEnablePeerAccess(int peer, unsigned int flags) {
  CUcontext context = NULL;
  hipError_t status = with_context();
  if (status == hipSuccess)
    status = device_context(peer, &context);
  if (status != hipSuccess)
    return status;
  if (!runtime.api.cuCtxEnablePeerAccess)
    return HIP_ERROR_NOT_SUPPORTED;
  return runtime.api.cuCtxEnablePeerAccess(context, flags);
}

HIP_EXPORT hipError_t hipMemcpyPeerAsync(void *dst, int dst_device, const void *src, int src_device,
                                         size_t bytes, hipStream_t stream) {
  CUcontext dst_context = NULL, src_context = NULL;
  hipError_t status = with_context();
  if (status == hipSuccess)
    status = device_context(dst_device, &dst_context);
  if (status == hipSuccess)
    status = device_context(src_device, &src_context);
  if (status != hipSuccess)
    return status;
  if (!runtime.api.cuMemcpyPeerAsync)
    return HIP_ERROR_NOT_SUPPORTED;
  return runtime.api.cuMemcpyPeerAsync(device_pointer(dst), dst_context, device_pointer(src),
                                       src_context, bytes, (CUstream)stream);
}

/* hipEventDefault/BlockingSync/DisableTiming/Interprocess have CUDA's
 * CU_EVENT_* values: the flags pass through. */
HIP_EXPORT hipError_t hipEventCreateWithFlags(hipEvent_t *event, unsigned int flags) {
  if (!event)
    return hipErrorInvalidValue;
  hipError_t status = with_context();
  if (status != hipSuccess)
    return status;
  CUevent created = NULL;
  CUresult result = runtime.api.cuEventCreate(&created, flags);
  if (result == CUDA_SUCCESS)
    *event = (hipEvent_t)created;
  return result;
}

HIP_EXPORT hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream) {
  hipError_t status = with_context();
  return status != hipSuccess ? status
                              : runtime.api.cuEventRecord((CUevent)event, (CUstream)stream);
}

HIP_EXPORT hipError_t hipEventSynchronize(hipEvent_t event) {
  hipError_t status = with_context();
  return status != hipSuccess ? status : runtime.api.cuEventSynchronize((CUevent)event);
}

HIP_EXPORT hipError_t hipEventElapsedTime(float *milliseconds, hipEvent_t start, hipEvent_t end) {
  if (!milliseconds)
    return hipErrorInvalidValue;
  hipError_t status = with_context();
  return status != hipSuccess
             ? status
             : runtime.api.cuEventElapsedTime(milliseconds, (CUevent)start, (CUevent)end);
}

HIP_EXPORT hipError_t hipEventDestroy(hipEvent_t event) {
  hipError_t status = with_context();
  return status != hipSuccess ? status : runtime.api.cuEventDestroy((CUevent)event);
}

/* ------------------------------------------------------------------------ */
/* Modules: clang offload bundles holding NVIDIA code                       */
/* ------------------------------------------------------------------------ */

static uint64_t read_u64(const unsigned char *bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; i--)
    value = value << 8 | bytes[i];
  return value;
}

/* The processor an entry id targets: "gfx90a" of
 * "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-", as (start, length); none
 * (length 0) for ids without a target ID, such as the host's. */
static size_t id_target(const char *id, size_t id_length, const char **target) {
  const char *found = NULL;
  for (size_t i = 0; i + 1 < id_length; i++)
    if (id[i] == '-' && id[i + 1] == '-')
      found = id + i + 2;
  if (!found)
    return 0;
  size_t length = 0;
  while (found + length < id + id_length && found[length] != ':')
    length++;
  *target = found;
  return length;
}

/* Finds the entry of the bundle `image` for the pretended architecture:
 * one whose whole target ID matches first, else one whose processor does.
 * Returns hipSuccess, hipErrorInvalidImage or hipErrorNoBinaryForGpu. */
static hipError_t bundle_find(const unsigned char *image, const unsigned char **data,
                              size_t *size) {
  /* Byte by byte: stops at the first difference in a short non-bundle. */
  for (int i = 0; i < BUNDLE_MAGIC_BYTES; i++)
    if (image[i] != (unsigned char)bundle_magic[i])
      return hipErrorInvalidImage;
  const unsigned char *cursor = image + BUNDLE_MAGIC_BYTES;
  uint64_t count = read_u64(cursor);
  cursor += 8;
  if (count == 0 || count > BUNDLE_MAX_ENTRIES)
    return hipErrorInvalidImage;
  const char *arch = arch_string();
  size_t base_length = arch_base_length(arch), arch_length = strlen(arch);
  const unsigned char *by_base = NULL, *exact = NULL;
  uint64_t by_base_size = 0, exact_size = 0;
  for (uint64_t i = 0; i < count; i++) {
    uint64_t offset = read_u64(cursor), bytes = read_u64(cursor + 8);
    uint64_t id_length = read_u64(cursor + 16);
    if (id_length > BUNDLE_MAX_ID || offset > BUNDLE_MAX_ENTRY_BYTES ||
        bytes > BUNDLE_MAX_ENTRY_BYTES)
      return hipErrorInvalidImage;
    const char *id = (const char *)cursor + 24;
    cursor += 24 + id_length;
    const char *target = NULL;
    size_t target_length = id_target(id, (size_t)id_length, &target);
    if (bytes == 0 || !target || target_length != base_length ||
        memcmp(target, arch, base_length) != 0)
      continue;
    /* The whole target ID: from the processor to the id's end. */
    size_t full_length = (size_t)(id + id_length - target);
    if (!exact && full_length == arch_length && memcmp(target, arch, arch_length) == 0) {
      exact = image + offset;
      exact_size = bytes;
    }
    if (!by_base) {
      by_base = image + offset;
      by_base_size = bytes;
    }
  }
  if (!by_base)
    return hipErrorNoBinaryForGpu;
  *data = exact ? exact : by_base;
  *size = (size_t)(exact ? exact_size : by_base_size);
  return hipSuccess;
}

HIP_EXPORT hipError_t hipModuleLoadData(hipModule_t *module, const void *image) {
  if (!module || !image)
    return hipErrorInvalidValue;
  hipError_t status = with_context();
  if (status != hipSuccess)
    return status;
  const unsigned char *data = NULL;
  size_t size = 0;
  status = bundle_find(image, &data, &size);
  if (status != hipSuccess)
    return status;
  /* A copy: an entry need not be aligned as cubins want, and PTX must end
   * in NUL, which an entry does not. */
  char *copy = malloc(size + 1);
  if (!copy)
    return hipErrorOutOfMemory;
  memcpy(copy, data, size);
  copy[size] = '\0';
  CUmodule loaded = NULL;
  CUresult result = runtime.api.cuModuleLoadData(&loaded, copy);
  free(copy);
  if (result == CUDA_SUCCESS)
    *module = (hipModule_t)loaded;
  return result;
}

HIP_EXPORT hipError_t hipModuleUnload(hipModule_t module) {
  hipError_t status = with_context();
  return status != hipSuccess ? status : runtime.api.cuModuleUnload((CUmodule)module);
}

HIP_EXPORT hipError_t hipModuleGetFunction(hipFunction_t *function, hipModule_t module,
                                           const char *name) {
  if (!function || !name)
    return hipErrorInvalidValue;
  hipError_t status = with_context();
  if (status != hipSuccess)
    return status;
  CUfunction found = NULL;
  /* CUDA_ERROR_NOT_FOUND is hipErrorNotFound (500): passes through. */
  CUresult result = runtime.api.cuModuleGetFunction(&found, (CUmodule)module, name);
  if (result != CUDA_SUCCESS)
    return result;
  /* AMD gives every kernel the whole 64 KiB LDS without opt-in; CUDA caps
   * dynamic shared memory at 48 KiB unless raised. Best effort: a kernel
   * whose static shared memory leaves no room still works below 48 KiB. */
  (void)runtime.api.cuFuncSetAttribute(found, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                       AMD_LDS_BYTES);
  *function = (hipFunction_t)found;
  return hipSuccess;
}

HIP_EXPORT hipError_t hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks,
                                                                         hipFunction_t function,
                                                                         int block_size,
                                                                         size_t dynamic_smem) {
  if (!blocks)
    return hipErrorInvalidValue;
  hipError_t status = with_context();
  return status != hipSuccess ? status
                              : runtime.api.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                                    blocks, (CUfunction)function, block_size, dynamic_smem);
}

HIP_EXPORT hipError_t hipModuleLaunchKernel(hipFunction_t function, unsigned int grid_x,
                                            unsigned int grid_y, unsigned int grid_z,
                                            unsigned int block_x, unsigned int block_y,
                                            unsigned int block_z, unsigned int shared_bytes,
                                            hipStream_t stream, void **params, void **extra) {
  /* HIP's `extra` packing (HIP_LAUNCH_PARAM_*) has other values than CUDA's
   * CU_LAUNCH_PARAM_*; the plugin passes kernelParams only. */
  if (extra)
    return hipErrorInvalidValue;
  hipError_t status = with_context();
  return status != hipSuccess
             ? status
             : runtime.api.cuLaunchKernel((CUfunction)function, grid_x, grid_y, grid_z, block_x,
                                          block_y, block_z, shared_bytes, (CUstream)stream, params,
                                          NULL);
}

/* ------------------------------------------------------------------------ */
/* Error words: literals only, so any thread may keep them                  */
/* ------------------------------------------------------------------------ */

static const struct {
  hipError_t code;
  const char *name, *text;
} hip_errors[] = {
    {hipSuccess, "hipSuccess", "no error"},
    {hipErrorInvalidValue, "hipErrorInvalidValue", "invalid argument"},
    {hipErrorOutOfMemory, "hipErrorOutOfMemory", "out of memory"},
    {hipErrorNotInitialized, "hipErrorNotInitialized", "initialization error"},
    {hipErrorInsufficientDriver, "hipErrorInsufficientDriver",
     "driver version is insufficient for runtime version"},
    {hipErrorNoDevice, "hipErrorNoDevice", "no GPU device is detected"},
    {hipErrorInvalidDevice, "hipErrorInvalidDevice", "invalid device ordinal"},
    {hipErrorInvalidImage, "hipErrorInvalidImage", "device kernel image is invalid"},
    {hipErrorNoBinaryForGpu, "hipErrorNoBinaryForGpu",
     "no kernel image is available for execution on the device"},
    {hipErrorNotFound, "hipErrorNotFound", "named symbol not found"},
};

/* The HIP words for the codes of hip_api.h, else the CUDA driver's (its
 * strings are static too), else `unknown`. */
static const char *error_words(hipError_t error, int want_name, const char *unknown) {
  for (size_t i = 0; i < sizeof hip_errors / sizeof hip_errors[0]; i++)
    if (hip_errors[i].code == error)
      return want_name ? hip_errors[i].name : hip_errors[i].text;
  init();
  const char *words = NULL;
  if (runtime.api.library) {
    CUresult result = want_name ? runtime.api.cuGetErrorName(error, &words)
                                : runtime.api.cuGetErrorString(error, &words);
    if (result != CUDA_SUCCESS)
      words = NULL;
  }
  return words ? words : unknown;
}

HIP_EXPORT const char *hipGetErrorName(hipError_t error) {
  return error_words(error, 1, "hipErrorUnknown");
}

HIP_EXPORT const char *hipGetErrorString(hipError_t error) {
  return error_words(error, 0, "unknown error");
}
