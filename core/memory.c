/* Buffers, queues and events: argument checks, then the plugin. Every object
 * is linked into its context so that destroying the context frees it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static void link_add(tsr_context *context, tsr_object_link *head, tsr_object_link *node) {
  pthread_mutex_lock(&context->lock);
  node->next = head;
  node->prev = head->prev;
  head->prev->next = node;
  head->prev = node;
  pthread_mutex_unlock(&context->lock);
}

static void link_remove(tsr_context *context, tsr_object_link *node) {
  pthread_mutex_lock(&context->lock);
  node->prev->next = node->next;
  node->next->prev = node->prev;
  node->prev = node->next = node;
  pthread_mutex_unlock(&context->lock);
}

static const tsr_plugin_v1 *table_of(const tsr_device *device) {
  return device->plugin->table;
}

/* ---- buffers ---- */

tsr_status tsr_buffer_create(tsr_device *device, size_t bytes, tsr_buffer **out) {
  static const char call[] = "tsr_buffer_create";
  tsr__clear_error();
  if (!device || !out)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL", !device ? "device" : "out");
  if (bytes == 0 || bytes > (size_t)INT64_MAX)
    return tsr__fail(TSR_ERROR_BAD_SIZE, call, "bytes = %zu (must be 1..%lld)", bytes,
                     (long long)INT64_MAX);
  void *handle;
  tsr_status st = tsr__device_handle(device, call, &handle);
  if (st != TSR_OK)
    return st;
  tsr_buffer *buffer = calloc(1, sizeof *buffer);
  if (!buffer)
    return tsr__fail(TSR_ERROR_OUT_OF_MEMORY, call, "out of host memory");
  st = table_of(device)->buffer_alloc(handle, bytes, &buffer->handle);
  if (st != TSR_OK) {
    free(buffer);
    char fallback[160];
    snprintf(fallback, sizeof fallback, "%s could not allocate %zu bytes", device->info.selector,
             bytes);
    return tsr__fail_plugin(st, call, fallback);
  }
  buffer->device = device;
  buffer->size = bytes;
  link_add(device->context, &device->context->buffers, &buffer->link);
  *out = buffer;
  return TSR_OK;
}

static tsr_status buffer_wrap(tsr_device *device, tsr_external_kind kind, void *handle,
                              size_t bytes, tsr_buffer **out, const char *call) {
  tsr__clear_error();
  if (!device || !out || !handle)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL",
                     !device ? "device"
                     : !out  ? "out"
                             : "the pointer");
  if (bytes == 0 || bytes > (size_t)INT64_MAX)
    return tsr__fail(TSR_ERROR_BAD_SIZE, call, "bytes = %zu (must be 1..%lld)", bytes,
                     (long long)INT64_MAX);
  const tsr_plugin_v1 *t = table_of(device);
  if (!t->buffer_wrap)
    return tsr__fail(TSR_ERROR_UNSUPPORTED, call, "the %s plugin cannot wrap external memory",
                     device->info.backend);
  void *device_handle;
  tsr_status st = tsr__device_handle(device, call, &device_handle);
  if (st != TSR_OK)
    return st;
  tsr_buffer *buffer = calloc(1, sizeof *buffer);
  if (!buffer)
    return tsr__fail(TSR_ERROR_OUT_OF_MEMORY, call, "out of host memory");
  st = t->buffer_wrap(device_handle, (int32_t)kind, handle, bytes, &buffer->handle);
  if (st != TSR_OK) {
    free(buffer);
    char fallback[160];
    snprintf(fallback, sizeof fallback, "%s cannot use this memory", device->info.selector);
    return tsr__fail_plugin(st, call, fallback);
  }
  buffer->device = device;
  buffer->size = bytes;
  link_add(device->context, &device->context->buffers, &buffer->link);
  *out = buffer;
  return TSR_OK;
}

tsr_status tsr_buffer_wrap_host(tsr_device *device, void *pointer, size_t bytes, tsr_buffer **out) {
  return buffer_wrap(device, TSR_EXTERNAL_HOST_POINTER, pointer, bytes, out,
                     "tsr_buffer_wrap_host");
}

tsr_status tsr_buffer_wrap_cuda(tsr_device *device, uint64_t device_pointer, size_t bytes,
                                tsr_buffer **out) {
  return buffer_wrap(device, TSR_EXTERNAL_CUDA_DEVICE_POINTER, (void *)(uintptr_t)device_pointer,
                     bytes, out, "tsr_buffer_wrap_cuda");
}

/* Waits until no queue of the device still has work that may use a buffer,
 * without consuming the queues' deferred errors. */
static void drain_device_queues(tsr_device *device) {
  tsr_context *context = device->context;
  const tsr_plugin_v1 *t = table_of(device);
  pthread_mutex_lock(&context->lock);
  for (tsr_object_link *l = context->queues.next; l != &context->queues; l = l->next) {
    tsr_queue *q = (tsr_queue *)l;
    if (q->device != device)
      continue;
    void *event = NULL;
    if (t->event_record && t->event_wait && t->event_record(q->handle, &event) == TSR_OK) {
      t->event_wait(event);
      if (t->event_destroy)
        t->event_destroy(event);
    }
  }
  pthread_mutex_unlock(&context->lock);
}

static void buffer_free(tsr_buffer *buffer) {
  drain_device_queues(buffer->device);
  table_of(buffer->device)->buffer_free(buffer->device->handle, buffer->handle);
  free(buffer);
}

void tsr_buffer_destroy(tsr_buffer *buffer) {
  if (!buffer)
    return;
  link_remove(buffer->device->context, &buffer->link);
  buffer_free(buffer);
}

tsr_status tsr_buffer_size(const tsr_buffer *buffer, size_t *bytes) {
  tsr__clear_error();
  if (!buffer || !bytes)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, "tsr_buffer_size", "%s is NULL",
                     !buffer ? "buffer" : "bytes");
  *bytes = buffer->size;
  return TSR_OK;
}

tsr_status tsr_buffer_device(const tsr_buffer *buffer, tsr_device **device) {
  tsr__clear_error();
  if (!buffer || !device)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, "tsr_buffer_device", "%s is NULL",
                     !buffer ? "buffer" : "device");
  *device = buffer->device;
  return TSR_OK;
}

tsr_status tsr_buffer_map(tsr_buffer *buffer, void **host_pointer) {
  static const char call[] = "tsr_buffer_map";
  tsr__clear_error();
  if (!buffer || !host_pointer)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL",
                     !buffer ? "buffer" : "host_pointer");
  const tsr_plugin_v1 *t = table_of(buffer->device);
  void *p = t->buffer_host_pointer ? t->buffer_host_pointer(buffer->device->handle, buffer->handle)
                                   : NULL;
  if (!p)
    return tsr__fail(TSR_ERROR_UNSUPPORTED, call, "buffers of %s are not host visible",
                     buffer->device->info.selector);
  *host_pointer = p;
  return TSR_OK;
}

/* ---- queues ---- */

tsr_status tsr_queue_create(tsr_device *device, tsr_queue **out) {
  static const char call[] = "tsr_queue_create";
  tsr__clear_error();
  if (!device || !out)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL", !device ? "device" : "out");
  void *handle;
  tsr_status st = tsr__device_handle(device, call, &handle);
  if (st != TSR_OK)
    return st;
  tsr_queue *queue = calloc(1, sizeof *queue);
  if (!queue)
    return tsr__fail(TSR_ERROR_OUT_OF_MEMORY, call, "out of host memory");
  st = table_of(device)->queue_create(handle, &queue->handle);
  if (st != TSR_OK) {
    free(queue);
    return tsr__fail_plugin(st, call, "the plugin could not create a queue");
  }
  queue->device = device;
  link_add(device->context, &device->context->queues, &queue->link);
  *out = queue;
  return TSR_OK;
}

static void queue_free(tsr_queue *queue) {
  table_of(queue->device)->queue_destroy(queue->handle);
  free(queue);
}

void tsr_queue_destroy(tsr_queue *queue) {
  if (!queue)
    return;
  tsr_context *context = queue->device->context;
  /* Events recorded on this queue lose their queue: destroy them with it. */
  pthread_mutex_lock(&context->lock);
  tsr_object_link *l = context->events.next;
  while (l != &context->events) {
    tsr_object_link *next = l->next;
    tsr_event *e = (tsr_event *)l;
    if (e->queue == queue) {
      l->prev->next = l->next;
      l->next->prev = l->prev;
      if (table_of(queue->device)->event_destroy)
        table_of(queue->device)->event_destroy(e->handle);
      free(e);
    }
    l = next;
  }
  pthread_mutex_unlock(&context->lock);
  link_remove(context, &queue->link);
  queue_free(queue);
}

tsr_status tsr_queue_finish(tsr_queue *queue) {
  static const char call[] = "tsr_queue_finish";
  tsr__clear_error();
  if (!queue)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "queue is NULL");
  tsr_status st = table_of(queue->device)->queue_finish(queue->handle);
  if (st != TSR_OK)
    return tsr__fail_plugin(st, call, "a queued operation failed");
  return TSR_OK;
}

static tsr_status check_range(const char *call, const char *what, size_t offset, size_t bytes,
                              size_t size) {
  size_t end;
  if (__builtin_add_overflow(offset, bytes, &end) || end > size)
    return tsr__fail(TSR_ERROR_OUT_OF_BOUNDS, call,
                     "%s range [%zu, %zu + %zu) reaches past the %zu-byte buffer", what, offset,
                     offset, bytes, size);
  return TSR_OK;
}

static tsr_status check_queue_buffer(const char *call, const tsr_queue *queue,
                                     const tsr_buffer *buffer, const char *name) {
  if (buffer->device != queue->device)
    return tsr__fail(TSR_ERROR_WRONG_DEVICE, call, "%s is on %s but the queue is on %s", name,
                     buffer->device->info.selector, queue->device->info.selector);
  return TSR_OK;
}

tsr_status tsr_buffer_write(tsr_queue *queue, tsr_buffer *buffer, size_t offset, const void *src,
                            size_t bytes) {
  static const char call[] = "tsr_buffer_write";
  tsr__clear_error();
  if (!queue || !buffer || (!src && bytes))
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL",
                     !queue    ? "queue"
                     : !buffer ? "buffer"
                               : "src");
  tsr_status st = check_queue_buffer(call, queue, buffer, "buffer");
  if (st == TSR_OK)
    st = check_range(call, "write", offset, bytes, buffer->size);
  if (st != TSR_OK || bytes == 0)
    return st;
  st = table_of(queue->device)->buffer_write(queue->handle, buffer->handle, offset, src, bytes);
  return st == TSR_OK ? st : tsr__fail_plugin(st, call, "the plugin could not write the buffer");
}

tsr_status tsr_buffer_read(tsr_queue *queue, const tsr_buffer *buffer, size_t offset, void *dst,
                           size_t bytes) {
  static const char call[] = "tsr_buffer_read";
  tsr__clear_error();
  if (!queue || !buffer || (!dst && bytes))
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL",
                     !queue    ? "queue"
                     : !buffer ? "buffer"
                               : "dst");
  tsr_status st = check_queue_buffer(call, queue, buffer, "buffer");
  if (st == TSR_OK)
    st = check_range(call, "read", offset, bytes, buffer->size);
  if (st != TSR_OK || bytes == 0)
    return st;
  st = table_of(queue->device)->buffer_read(queue->handle, buffer->handle, offset, dst, bytes);
  return st == TSR_OK ? st : tsr__fail_plugin(st, call, "the plugin could not read the buffer");
}

tsr_status tsr_buffer_copy(tsr_queue *queue, const tsr_buffer *src, size_t src_offset,
                           tsr_buffer *dst, size_t dst_offset, size_t bytes) {
  static const char call[] = "tsr_buffer_copy";
  tsr__clear_error();
  if (!queue || !src || !dst)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL",
                     !queue ? "queue"
                     : !src ? "src"
                            : "dst");
  tsr_status st = check_queue_buffer(call, queue, src, "src");
  if (st == TSR_OK)
    st = check_queue_buffer(call, queue, dst, "dst");
  if (st == TSR_OK)
    st = check_range(call, "src", src_offset, bytes, src->size);
  if (st == TSR_OK)
    st = check_range(call, "dst", dst_offset, bytes, dst->size);
  if (st != TSR_OK)
    return st;
  if (src == dst && src_offset < dst_offset + bytes && dst_offset < src_offset + bytes)
    return tsr__fail(TSR_ERROR_OVERLAP, call,
                     "src [%zu, +%zu) and dst [%zu, +%zu) overlap in the same buffer", src_offset,
                     bytes, dst_offset, bytes);
  if (bytes == 0)
    return TSR_OK;
  const tsr_plugin_v1 *t = table_of(queue->device);
  if (!t->buffer_copy)
    return tsr__fail(TSR_ERROR_UNSUPPORTED, call, "the %s plugin has no device copy",
                     queue->device->info.backend);
  st = t->buffer_copy(queue->handle, src->handle, src_offset, dst->handle, dst_offset, bytes);
  return st == TSR_OK ? st : tsr__fail_plugin(st, call, "the plugin could not queue the copy");
}

/* ---- events ---- */

tsr_status tsr_event_record(tsr_queue *queue, tsr_event **out) {
  static const char call[] = "tsr_event_record";
  tsr__clear_error();
  if (!queue || !out)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL", !queue ? "queue" : "out");
  const tsr_plugin_v1 *t = table_of(queue->device);
  if (!t->event_record || !t->event_wait || !t->event_destroy)
    return tsr__fail(TSR_ERROR_UNSUPPORTED, call, "the %s plugin has no events",
                     queue->device->info.backend);
  tsr_event *event = calloc(1, sizeof *event);
  if (!event)
    return tsr__fail(TSR_ERROR_OUT_OF_MEMORY, call, "out of host memory");
  tsr_status st = t->event_record(queue->handle, &event->handle);
  if (st != TSR_OK) {
    free(event);
    return tsr__fail_plugin(st, call, "the plugin could not record an event");
  }
  event->queue = queue;
  link_add(queue->device->context, &queue->device->context->events, &event->link);
  *out = event;
  return TSR_OK;
}

tsr_status tsr_event_wait(tsr_event *event) {
  static const char call[] = "tsr_event_wait";
  tsr__clear_error();
  if (!event)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "event is NULL");
  tsr_status st = table_of(event->queue->device)->event_wait(event->handle);
  return st == TSR_OK ? st : tsr__fail_plugin(st, call, "waiting for the event failed");
}

tsr_status tsr_event_elapsed_ms(tsr_event *start, tsr_event *end, double *ms) {
  static const char call[] = "tsr_event_elapsed_ms";
  tsr__clear_error();
  if (!start || !end || !ms)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL",
                     !start ? "start"
                     : !end ? "end"
                            : "ms");
  if (start->queue->device != end->queue->device)
    return tsr__fail(TSR_ERROR_WRONG_DEVICE, call, "start is on %s but end is on %s",
                     start->queue->device->info.selector, end->queue->device->info.selector);
  const tsr_plugin_v1 *t = table_of(start->queue->device);
  if (!t->event_elapsed_ms)
    return tsr__fail(TSR_ERROR_UNSUPPORTED, call, "the %s plugin cannot time events",
                     start->queue->device->info.backend);
  tsr_status st = t->event_elapsed_ms(start->handle, end->handle, ms);
  return st == TSR_OK ? st : tsr__fail_plugin(st, call, "the plugin could not time the events");
}

void tsr_event_destroy(tsr_event *event) {
  if (!event)
    return;
  link_remove(event->queue->device->context, &event->link);
  table_of(event->queue->device)->event_destroy(event->handle);
  free(event);
}

void tsr__destroy_objects(tsr_context *context) {
  while (context->events.next != &context->events)
    tsr_event_destroy((tsr_event *)context->events.next);
  /* Queues finish their work before buffers go. */
  while (context->queues.next != &context->queues) {
    tsr_queue *q = (tsr_queue *)context->queues.next;
    link_remove(context, &q->link);
    queue_free(q);
  }
  while (context->buffers.next != &context->buffers) {
    tsr_buffer *b = (tsr_buffer *)context->buffers.next;
    link_remove(context, &b->link);
    table_of(b->device)->buffer_free(b->device->handle, b->handle);
    free(b);
  }
}
