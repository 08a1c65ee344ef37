/* SPDX-License-Identifier: Apache-2.0 */
/* The driver table's memory entries over the HIP runtime: allocations,
 * the allocation holding an address (buffer_wrap), host memory registered
 * and mapped (tsr_buffer_wrap_host), memset and copies on the queue's
 * stream. Device addresses are the runtime's pointers as integers. */
#include "hip_internal.h"

static hipDeviceptr_t pointer_of(gpu_address address) {
  return (hipDeviceptr_t)(uintptr_t)address;
}

static int mem_alloc(void *context, size_t bytes, gpu_address *address) {
  const hip_api *api = context;
  void *pointer = NULL;
  hipError_t result = api->hipMalloc(&pointer, bytes);
  *address = (gpu_address)(uintptr_t)pointer;
  return result;
}

static int mem_free(void *context, gpu_address address) {
  const hip_api *api = context;
  return api->hipFree(pointer_of(address));
}

static int mem_range(void *context, gpu_address address, gpu_address *base, size_t *bytes) {
  const hip_api *api = context;
  hipDeviceptr_t start = NULL;
  hipError_t result = api->hipMemGetAddressRange(&start, bytes, pointer_of(address));
  *base = (gpu_address)(uintptr_t)start;
  return result;
}

static int memset32(void *context, gpu_address dst, uint32_t value, size_t count, void *stream) {
  const hip_api *api = context;
  return api->hipMemsetD32Async(pointer_of(dst), (int)value, count, stream);
}

static int copy_h2d(void *context, gpu_address dst, const void *src, size_t bytes, void *stream) {
  const hip_api *api = context;
  /* hipMemcpyHtoDAsync takes a non-const source; it only reads it. */
  void *source;
  memcpy(&source, &src, sizeof source);
  return api->hipMemcpyHtoDAsync(pointer_of(dst), source, bytes, stream);
}

static int copy_d2h(void *context, void *dst, gpu_address src, size_t bytes, void *stream) {
  const hip_api *api = context;
  return api->hipMemcpyDtoHAsync(dst, pointer_of(src), bytes, stream);
}

static int copy_d2d(void *context, gpu_address dst, gpu_address src, size_t bytes, void *stream) {
  const hip_api *api = context;
  return api->hipMemcpyDtoDAsync(pointer_of(dst), pointer_of(src), bytes, stream);
}

/* Host memory for tsr_buffer_wrap_host: pinned for every device and mapped. */
static int host_register(void *context, void *pointer, size_t bytes) {
  const hip_api *api = context;
  return api->hipHostRegister(pointer, bytes, hipHostRegisterPortable | hipHostRegisterMapped);
}

static int host_unregister(void *context, void *pointer) {
  const hip_api *api = context;
  return api->hipHostUnregister(pointer);
}

static int host_address(void *context, void *pointer, gpu_address *address) {
  const hip_api *api = context;
  void *mapped = NULL;
  hipError_t result = api->hipHostGetDevicePointer(&mapped, pointer, 0);
  *address = (gpu_address)(uintptr_t)mapped;
  return result;
}

void hip_memory_entries(gpu_driver *driver) {
  driver->mem_alloc = mem_alloc;
  driver->mem_free = mem_free;
  driver->mem_range = mem_range;
  driver->memset32 = memset32;
  driver->copy_h2d = copy_h2d;
  driver->copy_d2h = copy_d2h;
  driver->copy_d2d = copy_d2d;
  const hip_api *api = driver->context;
  if (api->hipHostRegister && api->hipHostUnregister && api->hipHostGetDevicePointer) {
    driver->host_register = host_register;
    driver->host_unregister = host_unregister;
    driver->host_address = host_address;
  }
  driver->host_already_registered = hipErrorHostMemoryAlreadyRegistered;
}
