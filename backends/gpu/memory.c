/* SPDX-License-Identifier: Apache-2.0 */
/* Buffers: device allocations, the application's device memory wrapped in
 * place, and transfers ordered on a queue's stream. */
#include <stdio.h>
#include <stdlib.h>

#include "gpu.h"

tsr_status gpu_buffer_alloc(void *handle, uint64_t bytes, void **out) {
  gpu_device *device = handle;
  const gpu_driver *d = &device->plugin->driver;
  tsr_status status = gpu_enter(device);
  if (status != TSR_OK)
    return status;
  gpu_buffer *buffer = calloc(1, sizeof *buffer);
  if (!buffer)
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_OUT_OF_MEMORY,
                           "out of host memory for a buffer");
  int error = d->mem_alloc(d->context, bytes > 0 ? (size_t)bytes : 1, &buffer->pointer);
  if (error != 0) {
    free(buffer);
    char what[96];
    snprintf(what, sizeof what, "allocating %llu bytes of device memory",
             (unsigned long long)bytes);
    return gpu_fail(device->plugin, error, what);
  }
  buffer->bytes = bytes;
  *out = buffer;
  return TSR_OK;
}

/* The core has waited for every queue that was given work on the buffer
 * (plugin rule: buffer_free comes after that work); a wrapped pointer is
 * only forgotten, so freeing it waits for no other stream. */
void gpu_buffer_free(void *handle, void *buffer_handle) {
  gpu_device *device = handle;
  gpu_buffer *buffer = buffer_handle;
  if (!buffer)
    return;
  const gpu_driver *d = &device->plugin->driver;
  if (!buffer->wrapped && gpu_enter(device) == TSR_OK)
    d->mem_free(d->context, buffer->pointer);
  free(buffer);
}

/* Wraps an application's device pointer. The driver confirms that the whole
 * range lies in one allocation of this context, so a stale or foreign pointer
 * is refused here instead of faulting in a kernel. */
tsr_status gpu_buffer_wrap(void *handle, int32_t kind, void *pointer, uint64_t bytes, void **out) {
  gpu_device *device = handle;
  const tsr_plugin_host *host = &device->plugin->host;
  const gpu_vendor *vendor = device->plugin->catalog.vendor;
  const gpu_driver *d = &device->plugin->driver;
  if (kind != vendor->external_kind)
    return tsr_plugin_fail(host, TSR_ERROR_UNSUPPORTED, "only %s can be wrapped (kind %d)",
                           vendor->external_what, (int)kind);
  tsr_status status = gpu_enter(device);
  if (status != TSR_OK)
    return status;
  gpu_address start = (gpu_address)(uintptr_t)pointer, base = 0;
  size_t size = 0;
  int error = d->mem_range(d->context, start, &base, &size);
  if (error != 0)
    return gpu_fail(device->plugin, error,
                    "finding the allocation of a pointer (is it device memory of this GPU?)");
  if (start - base > size || bytes > size - (start - base))
    return tsr_plugin_fail(
        host, TSR_ERROR_OUT_OF_BOUNDS,
        "%llu bytes at 0x%llx pass the end of their %llu-byte allocation at 0x%llx",
        (unsigned long long)bytes, (unsigned long long)start, (unsigned long long)size,
        (unsigned long long)base);
  gpu_buffer *buffer = calloc(1, sizeof *buffer);
  if (!buffer)
    return tsr_plugin_fail(host, TSR_ERROR_OUT_OF_MEMORY, "out of host memory for a buffer");
  buffer->pointer = start;
  buffer->bytes = bytes;
  buffer->wrapped = true;
  *out = buffer;
  return TSR_OK;
}

static bool check_range(const gpu_plugin *plugin, const char *what, const gpu_buffer *buffer,
                        uint64_t offset, uint64_t bytes) {
  return tsr_plugin_range_inside(&plugin->host, what, buffer->bytes, offset, bytes);
}

/* A host transfer: the range checked, the device current. The source may
 * be reused, or the data is there, once it returns: it waits for the copy. */
static tsr_status transfer(gpu_queue *queue, gpu_buffer *buffer, uint64_t offset, void *host,
                           uint64_t bytes, bool to_device) {
  gpu_plugin *plugin = queue->device->plugin;
  const gpu_driver *d = &plugin->driver;
  if (!check_range(plugin, to_device ? "write" : "read", buffer, offset, bytes))
    return TSR_ERROR_OUT_OF_BOUNDS;
  if (bytes == 0)
    return TSR_OK;
  tsr_status status = gpu_enter(queue->device);
  if (status != TSR_OK)
    return status;
  int error =
      to_device
          ? d->copy_h2d(d->context, buffer->pointer + offset, host, (size_t)bytes, queue->stream)
          : d->copy_d2h(d->context, host, buffer->pointer + offset, (size_t)bytes, queue->stream);
  if (error == 0)
    error = d->stream_sync(d->context, queue->stream);
  return error == 0 ? TSR_OK
                    : gpu_fail(plugin, error, to_device ? "writing a buffer" : "reading a buffer");
}

tsr_status gpu_buffer_write(void *queue, void *buffer, uint64_t offset, const void *src,
                            uint64_t bytes) {
  return transfer(queue, buffer, offset, (void *)src, bytes, true);
}

tsr_status gpu_buffer_read(void *queue, void *buffer, uint64_t offset, void *dst, uint64_t bytes) {
  return transfer(queue, buffer, offset, dst, bytes, false);
}

tsr_status gpu_buffer_copy(void *handle, void *src_handle, uint64_t src_offset, void *dst_handle,
                           uint64_t dst_offset, uint64_t bytes) {
  gpu_queue *queue = handle;
  gpu_plugin *plugin = queue->device->plugin;
  const gpu_driver *d = &plugin->driver;
  gpu_buffer *src = src_handle, *dst = dst_handle;
  if (!check_range(plugin, "copy source", src, src_offset, bytes) ||
      !check_range(plugin, "copy destination", dst, dst_offset, bytes))
    return TSR_ERROR_OUT_OF_BOUNDS;
  if (bytes == 0)
    return TSR_OK;
  tsr_status status = gpu_enter(queue->device);
  if (status != TSR_OK)
    return status;
  int error = d->copy_d2d(d->context, dst->pointer + dst_offset, src->pointer + src_offset,
                          (size_t)bytes, queue->stream);
  return error == 0 ? TSR_OK : gpu_fail(plugin, error, "copying between buffers");
}
