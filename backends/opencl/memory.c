/* SPDX-License-Identifier: Apache-2.0 */
/* Buffers: one cl_mem per tessera buffer (the OpenCL runtime is the
 * allocator), host memory wrapped with CL_MEM_USE_HOST_PTR on devices that
 * share it, and the tensor helpers the op families use. */
#include <stdlib.h>

#include "opencl_internal.h"

tsr_status opencl_buffer_alloc(void *handle, uint64_t bytes, void **out) {
  opencl_device *device = handle;
  opencl_plugin *plugin = device->plugin;
  if (bytes > device->props->max_allocation)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_OUT_OF_MEMORY,
                           "buffer_alloc: %llu bytes exceed the device's largest allocation "
                           "(%llu bytes, CL_DEVICE_MAX_MEM_ALLOC_SIZE)",
                           (unsigned long long)bytes,
                           (unsigned long long)device->props->max_allocation);
  opencl_buffer *buffer = calloc(1, sizeof *buffer);
  if (!buffer)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_OUT_OF_MEMORY, "buffer_alloc: out of memory");
  cl_int error = CL_SUCCESS;
  buffer->mem = plugin->cl.clCreateBuffer(device->context, CL_MEM_READ_WRITE, bytes, NULL, &error);
  if (!buffer->mem || error != CL_SUCCESS) {
    free(buffer);
    return opencl_fail(plugin, error == CL_SUCCESS ? CL_OUT_OF_RESOURCES : error, "clCreateBuffer");
  }
  buffer->bytes = bytes;
  *out = buffer;
  return TSR_OK;
}

void opencl_buffer_free(void *handle, void *b) {
  opencl_device *device = handle;
  opencl_buffer *buffer = b;
  if (!buffer)
    return;
  if (buffer->mem)
    device->plugin->cl.clReleaseMemObject(buffer->mem);
  free(buffer);
}

tsr_status opencl_buffer_wrap(void *handle, int32_t kind, void *pointer, uint64_t bytes,
                              void **out) {
  opencl_device *device = handle;
  opencl_plugin *plugin = device->plugin;
  if (kind != TSR_EXTERNAL_HOST_POINTER)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_UNSUPPORTED,
                           "buffer_wrap: the OpenCL plugin wraps host memory only (kind %d)",
                           (int)kind);
  if (!device->props->host_unified)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_UNSUPPORTED,
                           "buffer_wrap: %s does not share host memory "
                           "(CL_DEVICE_HOST_UNIFIED_MEMORY is false)",
                           device->props->name);
  opencl_buffer *buffer = calloc(1, sizeof *buffer);
  if (!buffer)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_OUT_OF_MEMORY, "buffer_wrap: out of memory");
  cl_int error = CL_SUCCESS;
  buffer->mem = plugin->cl.clCreateBuffer(device->context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR,
                                          bytes, pointer, &error);
  if (!buffer->mem || error != CL_SUCCESS) {
    free(buffer);
    return opencl_fail(plugin, error == CL_SUCCESS ? CL_INVALID_HOST_PTR : error,
                       "clCreateBuffer(CL_MEM_USE_HOST_PTR)");
  }
  buffer->bytes = bytes;
  buffer->host = pointer;
  buffer->wrapped = true;
  *out = buffer;
  return TSR_OK;
}

static int64_t dtype_bytes(int32_t dtype) {
  return dtype == TSR_DTYPE_F16 || dtype == TSR_DTYPE_BF16 ? 2 : 4;
}

cl_mem opencl_tensor_mem(const tsr_plugin_tensor *t) {
  return t->buffer ? ((const opencl_buffer *)t->buffer)->mem : NULL;
}

int64_t opencl_tensor_first(const tsr_plugin_tensor *t) {
  return (int64_t)t->offset / dtype_bytes(t->dtype);
}

int64_t opencl_tensor_span(const tsr_plugin_tensor *t) {
  int64_t last = 0;
  for (int d = 0; d < t->rank; d++) {
    if (t->shape[d] == 0)
      return 0;
    last += (t->shape[d] - 1) * t->strides[d];
  }
  return last + 1;
}
