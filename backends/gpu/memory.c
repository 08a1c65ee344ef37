/* SPDX-License-Identifier: Apache-2.0 */
/* Buffers: device allocations, the application's device memory wrapped in
 * place, its host memory registered and mapped, exports, and transfers
 * ordered on a queue's stream. */
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
  buffer->kind = device->plugin->catalog.vendor->external_kind;
  *out = buffer;
  return TSR_OK;
}

/* Drops a buffer's use of a registration this plugin made; the last user
 * unregisters the memory. */
static void registration_release(gpu_device *device, gpu_host_registration *registration) {
  const gpu_driver *d = &device->plugin->driver;
  bool last = false;
  pthread_mutex_lock(&device->lock);
  if (--registration->users == 0) {
    last = true;
    for (gpu_host_registration **link = &device->registrations; *link; link = &(*link)->next) {
      if (*link == registration) {
        *link = registration->next;
        break;
      }
    }
  }
  pthread_mutex_unlock(&device->lock);
  if (last) {
    if (gpu_enter(device) == TSR_OK)
      d->host_unregister(d->context, registration->start);
    free(registration);
  }
}

/* The core has waited for every queue that was given work on the buffer
 * (plugin rule: buffer_free comes after that work); a wrapped pointer is
 * only forgotten, so freeing it waits for no other stream, and wrapped host
 * memory is unregistered when this plugin registered it. */
void gpu_buffer_free(void *handle, void *buffer_handle) {
  gpu_device *device = handle;
  gpu_buffer *buffer = buffer_handle;
  if (!buffer)
    return;
  const gpu_driver *d = &device->plugin->driver;
  if (buffer->registration)
    registration_release(device, buffer->registration);
  else if (!buffer->wrapped && gpu_enter(device) == TSR_OK)
    d->mem_free(d->context, buffer->pointer);
  free(buffer);
}

/* mapped_range's error for a range mapped in pieces (no driver error). */
enum { GPU_NOT_CONTIGUOUS = -1 };

/* "buffer_wrap: <bytes> of host memory at <pointer>: <what>: <driver's words>". */
static tsr_status host_fail(const gpu_device *device, tsr_status status, int error,
                            const char *what, const void *pointer, uint64_t bytes) {
  const gpu_plugin *plugin = device->plugin;
  char described[256];
  if (error == GPU_NOT_CONTIGUOUS)
    snprintf(described, sizeof described, "its last byte is not mapped after its first");
  else
    plugin->driver.describe(plugin->driver.context, error, described, sizeof described);
  return tsr_plugin_fail(&plugin->host, status,
                         "buffer_wrap: %llu bytes of host memory at %p: %s: %s",
                         (unsigned long long)bytes, pointer, what, described);
}

/* The device address of [pointer, pointer + bytes) when the whole range is
 * mapped contiguously (checked at both ends: a registration covers whole
 * ranges, but the application's may end early). */
static int mapped_range(const gpu_driver *d, char *pointer, uint64_t bytes, gpu_address *address) {
  gpu_address last = 0;
  int error = d->host_address(d->context, pointer, address);
  if (error == 0)
    error = d->host_address(d->context, pointer + bytes - 1, &last);
  if (error == 0 && last - *address != bytes - 1)
    error = GPU_NOT_CONTIGUOUS;
  return error;
}

/* Wraps the application's host memory: page-locked and mapped through the
 * driver, so kernels read and write it in place over the bus. Memory the
 * application registered itself (cudaHostRegister, cudaHostAlloc) is used
 * as it is; a range inside one this plugin registered shares it. */
static tsr_status wrap_host(gpu_device *device, char *pointer, uint64_t bytes, gpu_buffer *buffer) {
  const gpu_plugin *plugin = device->plugin;
  const gpu_driver *d = &plugin->driver;
  if (!d->host_register || !d->host_unregister || !d->host_address)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_UNSUPPORTED,
                           "buffer_wrap: this driver cannot map host memory for the GPU (it lacks "
                           "host memory registration); wrap %s instead",
                           plugin->catalog.vendor->external_what);
  tsr_status status = gpu_enter(device);
  if (status != TSR_OK)
    return status;
  gpu_host_registration *shared = NULL, *overlap = NULL;
  pthread_mutex_lock(&device->lock);
  const uintptr_t begin = (uintptr_t)pointer, end = begin + (uintptr_t)bytes;
  for (gpu_host_registration *r = device->registrations; r && !shared; r = r->next) {
    const uintptr_t r_begin = (uintptr_t)r->start, r_end = r_begin + r->bytes;
    if (begin >= r_begin && end <= r_end) {
      shared = r;
      r->users++;
    } else if (begin < r_end && r_begin < end) {
      overlap = r;
    }
  }
  pthread_mutex_unlock(&device->lock);
  if (shared) {
    int error = mapped_range(d, pointer, bytes, &buffer->pointer);
    if (error != 0) {
      registration_release(device, shared);
      return host_fail(device, TSR_ERROR_BACKEND, error, "finding its device address", pointer,
                       bytes);
    }
    buffer->registration = shared;
    return TSR_OK;
  }
  if (overlap)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_INVALID_VALUE,
                           "buffer_wrap: %llu bytes of host memory at %p overlap, without lying "
                           "inside, the %zu bytes at %p wrapped before on this device; wrap the "
                           "whole range once and use offsets into it",
                           (unsigned long long)bytes, (void *)pointer, overlap->bytes,
                           (void *)overlap->start);
  gpu_host_registration *registration = calloc(1, sizeof *registration);
  if (!registration)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_OUT_OF_MEMORY,
                           "out of host memory for a buffer");
  int error = d->host_register(d->context, pointer, (size_t)bytes);
  if (error == d->host_already_registered) {
    /* the application's registration: use it, never undo it */
    free(registration);
    registration = NULL;
    error = mapped_range(d, pointer, bytes, &buffer->pointer);
    if (error != 0)
      return host_fail(device, TSR_ERROR_INVALID_VALUE, error,
                       "it is partly registered with the driver already, not all of it", pointer,
                       bytes);
    return TSR_OK;
  }
  if (error != 0) {
    free(registration);
    return host_fail(device, TSR_ERROR_UNSUPPORTED, error,
                     "the driver could not page-lock and map it", pointer, bytes);
  }
  error = mapped_range(d, pointer, bytes, &buffer->pointer);
  if (error != 0) {
    d->host_unregister(d->context, pointer);
    free(registration);
    return host_fail(device, TSR_ERROR_BACKEND, error, "finding its device address", pointer,
                     bytes);
  }
  registration->start = pointer;
  registration->bytes = (size_t)bytes;
  registration->users = 1;
  pthread_mutex_lock(&device->lock);
  registration->next = device->registrations;
  device->registrations = registration;
  pthread_mutex_unlock(&device->lock);
  buffer->registration = registration;
  return TSR_OK;
}

/* Wraps an application's device pointer. The driver confirms that the whole
 * range lies in one allocation of this context, so a stale or foreign pointer
 * is refused here instead of faulting in a kernel. */
static tsr_status wrap_device(gpu_device *device, gpu_address start, uint64_t bytes,
                              gpu_buffer *buffer) {
  const gpu_driver *d = &device->plugin->driver;
  tsr_status status = gpu_enter(device);
  if (status != TSR_OK)
    return status;
  gpu_address base = 0;
  size_t size = 0;
  int error = d->mem_range(d->context, start, &base, &size);
  if (error != 0)
    return gpu_fail(device->plugin, error,
                    "finding the allocation of a pointer (is it device memory of this GPU?)");
  if (start - base > size || bytes > size - (start - base))
    return tsr_plugin_fail(
        &device->plugin->host, TSR_ERROR_OUT_OF_BOUNDS,
        "%llu bytes at 0x%llx pass the end of their %llu-byte allocation at 0x%llx",
        (unsigned long long)bytes, (unsigned long long)start, (unsigned long long)size,
        (unsigned long long)base);
  buffer->pointer = start;
  return TSR_OK;
}

tsr_status gpu_buffer_wrap(void *handle, int32_t kind, void *pointer, uint64_t bytes, void **out) {
  gpu_device *device = handle;
  const tsr_plugin_host *host = &device->plugin->host;
  const gpu_vendor *vendor = device->plugin->catalog.vendor;
  if (kind != vendor->external_kind && kind != TSR_EXTERNAL_HOST_POINTER)
    return tsr_plugin_fail(host, TSR_ERROR_UNSUPPORTED,
                           "buffer_wrap: kind = %d is neither %s (kind %d) nor host memory (kind "
                           "%d)",
                           (int)kind, vendor->external_what, (int)vendor->external_kind,
                           (int)TSR_EXTERNAL_HOST_POINTER);
  if (!pointer || bytes == 0)
    return tsr_plugin_fail(host, !pointer ? TSR_ERROR_NULL_ARGUMENT : TSR_ERROR_BAD_SIZE,
                           "buffer_wrap: pointer = %p, bytes = %llu (need memory and 1 byte or "
                           "more)",
                           pointer, (unsigned long long)bytes);
  if (kind == TSR_EXTERNAL_HOST_POINTER && bytes > (uint64_t)(UINTPTR_MAX - (uintptr_t)pointer))
    return tsr_plugin_fail(host, TSR_ERROR_BAD_SIZE,
                           "buffer_wrap: %llu bytes at %p pass the end of the address space",
                           (unsigned long long)bytes, pointer);
  gpu_buffer *buffer = calloc(1, sizeof *buffer);
  if (!buffer)
    return tsr_plugin_fail(host, TSR_ERROR_OUT_OF_MEMORY, "out of host memory for a buffer");
  tsr_status status = kind == TSR_EXTERNAL_HOST_POINTER
                          ? wrap_host(device, pointer, bytes, buffer)
                          : wrap_device(device, (gpu_address)(uintptr_t)pointer, bytes, buffer);
  if (status != TSR_OK) {
    free(buffer);
    return status;
  }
  buffer->bytes = bytes;
  buffer->wrapped = true;
  buffer->kind = kind;
  buffer->host = kind == TSR_EXTERNAL_HOST_POINTER ? pointer : NULL;
  *out = buffer;
  return TSR_OK;
}

/* Device memory (allocated or wrapped) as the vendor's device pointer;
 * wrapped host memory as the application's host address. */
tsr_status gpu_buffer_export(void *handle, int32_t *kind, uint64_t *address) {
  const gpu_buffer *buffer = handle;
  *kind = buffer->kind;
  *address = buffer->host ? (uint64_t)(uintptr_t)buffer->host : buffer->pointer;
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
  /* The stream's earlier work first: a copy from or to pageable memory
   * waits for it inside the driver, holding the driver's staging for the
   * whole process, so a copy queued behind a gate (which another thread
   * opens after a transfer of its own) would deadlock with that thread. */
  int error = d->stream_sync(d->context, queue->stream);
  if (error == 0)
    error =
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

/* ---- between two GPUs of the plugin ---- */

/* Peer access between two opened devices is set up once per pair of
 * openings, process-wide (another thread may be copying between them the
 * other way); rare, so one lock does. */
static pthread_mutex_t peer_lock = PTHREAD_MUTEX_INITIALIZER;

/* Lets `from`'s context use `to`'s memory where the hardware allows (NVLink
 * or PCIe peer to peer). Best effort: where it is off, the runtime stages
 * peer copies through host memory itself. Leaves no device current. */
static void peer_allow(const gpu_device *from, const gpu_device *to) {
  const gpu_plugin *plugin = from->plugin;
  const gpu_driver *d = &plugin->driver;
  int can = 0;
  int error = d->peer_can_access(d->context, from->props->handle, to->props->handle, &can);
  if (error == 0 && !can) {
    tsr_plugin_log(&plugin->host, TSR_LOG_DEBUG,
                   "GPU %d (%s) cannot access the memory of GPU %d directly; copies between them "
                   "go through host memory",
                   from->props->ordinal, from->props->name, to->props->ordinal);
    return;
  }
  if (error == 0)
    error = d->device_enter(d->context, from->context);
  if (error == 0) {
    error = d->peer_enable(d->context, to->context);
    if (error == d->peer_already_enabled)
      error = 0;
  }
  if (error != 0) {
    char described[256];
    d->describe(d->context, error, described, sizeof described);
    tsr_plugin_log(&plugin->host, TSR_LOG_DEBUG,
                   "peer access from GPU %d to GPU %d is off (%s); copies between them go "
                   "through host memory",
                   from->props->ordinal, to->props->ordinal, described);
  }
}

static void peers_connect(gpu_device *a, gpu_device *b) {
  const gpu_plugin *plugin = a->plugin;
  const gpu_driver *d = &plugin->driver;
  if (!d->peer_can_access || !d->peer_enable)
    return;
  const size_t ia = (size_t)(a->props - plugin->devices), ib = (size_t)(b->props - plugin->devices);
  pthread_mutex_lock(&peer_lock);
  if (a->peer_serials[ib] != b->serial || b->peer_serials[ia] != a->serial) {
    peer_allow(a, b);
    peer_allow(b, a);
    /* Tried once per pair of openings, whatever the answer. */
    a->peer_serials[ib] = b->serial;
    b->peer_serials[ia] = a->serial;
  }
  pthread_mutex_unlock(&peer_lock);
}

/* A copy between buffers of two devices of the plugin, on the queue's
 * stream (the queue's device is one of them): cuMemcpyPeerAsync /
 * hipMemcpyPeerAsync, peer to peer once peer access is on. Wrapped device
 * memory is copied like the plugin's own; wrapped host memory is left to
 * the core (TSR_ERROR_UNSUPPORTED), which copies it through the host. */
tsr_status gpu_buffer_copy_peer(void *handle, void *src_device, void *src_handle,
                                uint64_t src_offset, void *dst_device, void *dst_handle,
                                uint64_t dst_offset, uint64_t bytes) {
  gpu_queue *queue = handle;
  gpu_device *from = src_device, *to = dst_device;
  gpu_plugin *plugin = queue->device->plugin;
  const gpu_driver *d = &plugin->driver;
  const gpu_buffer *src = src_handle, *dst = dst_handle;
  if (queue->device != from && queue->device != to)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_WRONG_DEVICE,
                           "buffer_copy_peer: the queue's device (GPU %d) holds neither the "
                           "source (on GPU %d) nor the destination (on GPU %d)",
                           queue->device->props->ordinal, from->props->ordinal, to->props->ordinal);
  if (!check_range(plugin, "copy source", src, src_offset, bytes) ||
      !check_range(plugin, "copy destination", dst, dst_offset, bytes))
    return TSR_ERROR_OUT_OF_BOUNDS;
  if (src->kind == TSR_EXTERNAL_HOST_POINTER || dst->kind == TSR_EXTERNAL_HOST_POINTER)
    return TSR_ERROR_UNSUPPORTED;
  if (bytes == 0)
    return TSR_OK;
  const bool same_context = from->context == to->context;
  if (!same_context && !d->copy_peer)
    return TSR_ERROR_UNSUPPORTED;
  if (!same_context)
    peers_connect(from, to);
  tsr_status status = gpu_enter(queue->device);
  if (status != TSR_OK)
    return status;
  const gpu_address source = src->pointer + src_offset, target = dst->pointer + dst_offset;
  int error = same_context ? d->copy_d2d(d->context, target, source, (size_t)bytes, queue->stream)
                           : d->copy_peer(d->context, target, to->context, source, from->context,
                                          (size_t)bytes, queue->stream);
  if (error == 0)
    return TSR_OK;
  char what[128];
  snprintf(what, sizeof what, "copying %llu bytes from GPU %d to GPU %d", (unsigned long long)bytes,
           from->props->ordinal, to->props->ordinal);
  return gpu_fail(plugin, error, what);
}
