/* SPDX-License-Identifier: Apache-2.0 */
/* Device memory over libcuda: allocations (cuMemAlloc), the allocation an
 * application's pointer lies in (cuMemGetAddressRange, for
 * tsr_buffer_wrap_cuda), host memory registered and mapped (for
 * tsr_buffer_wrap_host), and transfers ordered on a stream. The buffers
 * themselves are the GPU layer's (backends/gpu/memory.c). */
#include "cuda_internal.h"

static int mem_alloc(void *context, size_t bytes, gpu_address *address) {
  const cuda_api *api = context;
  CUdeviceptr pointer = 0;
  CUresult result = api->cuMemAlloc(&pointer, bytes);
  *address = pointer;
  return result;
}

static int mem_free(void *context, gpu_address address) {
  const cuda_api *api = context;
  return api->cuMemFree(address);
}

static int mem_range(void *context, gpu_address address, gpu_address *base, size_t *bytes) {
  const cuda_api *api = context;
  CUdeviceptr start = 0;
  CUresult result = api->cuMemGetAddressRange(&start, bytes, address);
  *base = start;
  return result;
}

static int memset32(void *context, gpu_address dst, uint32_t value, size_t count, void *stream) {
  const cuda_api *api = context;
  return api->cuMemsetD32Async(dst, value, count, stream);
}

static int copy_h2d(void *context, gpu_address dst, const void *src, size_t bytes, void *stream) {
  const cuda_api *api = context;
  return api->cuMemcpyHtoDAsync(dst, src, bytes, stream);
}

static int copy_d2h(void *context, void *dst, gpu_address src, size_t bytes, void *stream) {
  const cuda_api *api = context;
  return api->cuMemcpyDtoHAsync(dst, src, bytes, stream);
}

static int copy_d2d(void *context, gpu_address dst, gpu_address src, size_t bytes, void *stream) {
  const cuda_api *api = context;
  return api->cuMemcpyDtoDAsync(dst, src, bytes, stream);
}

/* Host memory for tsr_buffer_wrap_host: pinned for every context and mapped;
 * with unified addressing (every 64-bit CUDA platform) its device address
 * is usually the host address itself. */
static int host_register(void *context, void *pointer, size_t bytes) {
  const cuda_api *api = context;
  return api->cuMemHostRegister(pointer, bytes,
                                CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
}

static int host_unregister(void *context, void *pointer) {
  const cuda_api *api = context;
  return api->cuMemHostUnregister(pointer);
}

static int host_address(void *context, void *pointer, gpu_address *address) {
  const cuda_api *api = context;
  CUdeviceptr mapped = 0;
  CUresult result = api->cuMemHostGetDevicePointer(&mapped, pointer, 0);
  *address = mapped;
  return result;
}

void cuda_memory_entries(gpu_driver *driver) {
  driver->mem_alloc = mem_alloc;
  driver->mem_free = mem_free;
  driver->mem_range = mem_range;
  driver->memset32 = memset32;
  driver->copy_h2d = copy_h2d;
  driver->copy_d2h = copy_d2h;
  driver->copy_d2d = copy_d2d;
  const cuda_api *api = driver->context;
  if (api->cuMemHostRegister && api->cuMemHostUnregister && api->cuMemHostGetDevicePointer) {
    driver->host_register = host_register;
    driver->host_unregister = host_unregister;
    driver->host_address = host_address;
  }
  driver->host_already_registered = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
}
