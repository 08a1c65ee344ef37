/* SPDX-License-Identifier: Apache-2.0 */
/* Buffers, queues and events: argument checks, then the plugin. Every object
 * is linked into its context so that destroying the context frees it.
 *
 * Threads: a device may be used from several threads, one queue per thread.
 * Each queue has a lock that its owner takes around every plugin call
 * (uncontended, so the op path stays parallel); another thread takes it only
 * to drain the queue before freeing a buffer that was given work there, or
 * to wait on one of its events. A buffer remembers the queues that were given
 * work on it, so destroying a buffer waits only for those. */
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

static void link_init(tsr_object_link *head) {
  head->prev = head->next = head;
}

void tsr__objects_init(tsr_context *context) {
  pthread_mutex_init(&context->lock, NULL);
  pthread_cond_init(&context->drained, NULL);
  pthread_cond_init(&context->bridged, NULL);
  link_init(&context->buffers);
  link_init(&context->queues);
  link_init(&context->events);
  link_init(&context->dead_buffers);
  link_init(&context->exports);
}

void tsr__export_add(tsr_context *context, tsr__export_link *record) {
  link_add(context, &context->exports, &record->link);
}

void tsr__export_remove(tsr_context *context, tsr__export_link *record) {
  link_remove(context, &record->link);
}

void tsr__objects_release(tsr_context *context) {
  while (context->dead_buffers.next != &context->dead_buffers) {
    tsr_object_link *l = context->dead_buffers.next;
    l->prev->next = l->next;
    l->next->prev = l->prev;
    free(l);
  }
  pthread_cond_destroy(&context->drained);
  pthread_cond_destroy(&context->bridged);
  pthread_mutex_destroy(&context->lock);
}

/* Destroyed buffer records kept readable before they go back to malloc: a
 * stale handle among the last DEAD_BUFFERS_KEPT destroyed is reported. */
enum { DEAD_BUFFERS_KEPT = 4096 };

/* A buffer handle a public call may read: not NULL-checked here. */
static tsr_status check_live(const char *call, const char *name, const tsr_buffer *buffer) {
  if (tsr__buffer_live(buffer))
    return TSR_OK;
  return tsr__fail(TSR_ERROR_INVALID_VALUE, call, "%s (%p) was destroyed by tsr_buffer_destroy",
                   name, (const void *)buffer);
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
  st = tsr__table(device)->buffer_alloc(handle, bytes, &buffer->handle);
  if (st != TSR_OK) {
    free(buffer);
    char fallback[160];
    snprintf(fallback, sizeof fallback, "%s could not allocate %zu bytes", device->info.selector,
             bytes);
    return tsr__fail_plugin(st, call, fallback);
  }
  buffer->device = device;
  buffer->size = bytes;
  buffer->address_align_log2 = 8; /* plugin allocations: docs/PLUGINS.md */
  buffer->refs = 1;
  __atomic_store_n(&buffer->state, TSR__BUFFER_LIVE, __ATOMIC_RELEASE);
  link_add(device->context, &device->context->buffers, &buffer->link);
  *out = buffer;
  return TSR_OK;
}

tsr_status tsr__buffer_wrap(tsr_device *device, tsr_external_kind kind, void *handle, size_t bytes,
                            tsr_buffer **out, const char *call) {
  tsr__clear_error();
  if (!device || !out || !handle)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL",
                     !device ? "device"
                     : !out  ? "out"
                             : "the pointer");
  if (bytes == 0 || bytes > (size_t)INT64_MAX)
    return tsr__fail(TSR_ERROR_BAD_SIZE, call, "bytes = %zu (must be 1..%lld)", bytes,
                     (long long)INT64_MAX);
  const tsr_plugin_v2 *t = tsr__table(device);
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
  /* The caller's pointer decides the alignment ops may count on. */
  unsigned align = (unsigned)__builtin_ctzll((uint64_t)(uintptr_t)handle | 256u);
  buffer->address_align_log2 = (uint8_t)align;
  buffer->refs = 1;
  __atomic_store_n(&buffer->state, TSR__BUFFER_LIVE, __ATOMIC_RELEASE);
  link_add(device->context, &device->context->buffers, &buffer->link);
  *out = buffer;
  return TSR_OK;
}

tsr_status tsr_buffer_wrap_host(tsr_device *device, void *pointer, size_t bytes, tsr_buffer **out) {
  return tsr__buffer_wrap(device, TSR_EXTERNAL_HOST_POINTER, pointer, bytes, out,
                          "tsr_buffer_wrap_host");
}

tsr_status tsr_buffer_wrap_cuda(tsr_device *device, uint64_t device_pointer, size_t bytes,
                                tsr_buffer **out) {
  return tsr__buffer_wrap(device, TSR_EXTERNAL_CUDA_DEVICE_POINTER,
                          (void *)(uintptr_t)device_pointer, bytes, out, "tsr_buffer_wrap_cuda");
}

tsr_status tsr_buffer_wrap_hip(tsr_device *device, uint64_t device_pointer, size_t bytes,
                               tsr_buffer **out) {
  return tsr__buffer_wrap(device, TSR_EXTERNAL_HIP_DEVICE_POINTER,
                          (void *)(uintptr_t)device_pointer, bytes, out, "tsr_buffer_wrap_hip");
}

/* Queues an event on `queue` and waits for it: the queue's earlier work is
 * done, and its deferred errors stay for its owner's tsr_queue_finish. */
static void drain_one(tsr_queue *queue) {
  const tsr_plugin_v2 *t = tsr__table(queue->device);
  if (!t->event_record || !t->event_wait)
    return;
  tsr__queue_lock(queue);
  void *event = NULL;
  if (t->event_record(queue->handle, &event) == TSR_OK) {
    t->event_wait(event);
    if (t->event_destroy)
      t->event_destroy(event);
  }
  tsr__queue_unlock(queue);
}

/* Queues of any device count: a copy between devices queued on another
 * device's queue uses the buffer too. */
static bool drains(const tsr_queue *queue, uint64_t used) {
  return (queue->bit & used) != 0;
}

/* Waits until no queue that was given work on `buffer` still has some. */
static void drain_queues_of(tsr_buffer *buffer) {
  tsr_context *context = buffer->device->context;
  uint64_t used = __atomic_load_n(&buffer->queues_used, __ATOMIC_ACQUIRE);
  if (!used)
    return;
  /* The queues are pinned with a drainer count (tsr_queue_destroy waits for
   * it), so the waits below hold no context-wide lock. */
  pthread_mutex_lock(&context->lock);
  size_t count = 0;
  for (tsr_object_link *l = context->queues.next; l != &context->queues; l = l->next)
    count += drains((tsr_queue *)l, used);
  tsr_queue *few[16];
  tsr_queue **queues = count <= 16 ? few : malloc(count * sizeof *queues);
  if (!queues) {
    for (tsr_object_link *l = context->queues.next; l != &context->queues; l = l->next)
      if (drains((tsr_queue *)l, used))
        drain_one((tsr_queue *)l);
    pthread_mutex_unlock(&context->lock);
    return;
  }
  size_t n = 0;
  for (tsr_object_link *l = context->queues.next; l != &context->queues; l = l->next) {
    tsr_queue *q = (tsr_queue *)l;
    if (drains(q, used)) {
      q->drainers++;
      queues[n++] = q;
    }
  }
  pthread_mutex_unlock(&context->lock);
  for (size_t i = 0; i < n; i++)
    drain_one(queues[i]);
  pthread_mutex_lock(&context->lock);
  for (size_t i = 0; i < n; i++)
    queues[i]->drainers--;
  pthread_cond_broadcast(&context->drained);
  pthread_mutex_unlock(&context->lock);
  if (queues != few)
    free(queues);
}

void tsr_buffer_destroy(tsr_buffer *buffer) {
  if (!buffer)
    return;
  uint32_t expected = TSR__BUFFER_LIVE;
  if (!__atomic_compare_exchange_n(&buffer->state, &expected, TSR__BUFFER_DEAD, false,
                                   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    tsr__log(TSR_LOG_WARN, "tsr_buffer_destroy: buffer %p was already destroyed; ignored",
             (void *)buffer);
    return;
  }
  /* The handle is dead from here on; a DLPack export may keep the memory. */
  tsr__buffer_unref(buffer);
}

bool tsr__buffer_ref(tsr_buffer *buffer) {
  uint32_t refs = __atomic_load_n(&buffer->refs, __ATOMIC_ACQUIRE);
  do {
    if (refs == 0)
      return false;
  } while (!__atomic_compare_exchange_n(&buffer->refs, &refs, refs + 1, true, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE));
  if (tsr__buffer_live(buffer))
    return true;
  tsr__buffer_unref(buffer);
  return false;
}

/* The last reference went: free the memory once its queues are done with it. */
void tsr__buffer_unref(tsr_buffer *buffer) {
  if (__atomic_sub_fetch(&buffer->refs, 1, __ATOMIC_ACQ_REL) != 0)
    return;
  tsr_context *context = buffer->device->context;
  link_remove(context, &buffer->link);
  drain_queues_of(buffer);
  tsr__table(buffer->device)->buffer_free(buffer->device->handle, buffer->handle);
  buffer->handle = NULL;
  if (buffer->on_free)
    buffer->on_free(buffer->on_free_arg);
  buffer->on_free = NULL;
  /* Keep the record readable (state DEAD); free the oldest beyond the limit. */
  tsr_object_link *oldest = NULL;
  pthread_mutex_lock(&context->lock);
  tsr_object_link *head = &context->dead_buffers;
  buffer->link.next = head;
  buffer->link.prev = head->prev;
  head->prev->next = &buffer->link;
  head->prev = &buffer->link;
  if (++context->dead_buffer_count > DEAD_BUFFERS_KEPT) {
    oldest = head->next;
    oldest->prev->next = oldest->next;
    oldest->next->prev = oldest->prev;
    context->dead_buffer_count--;
  }
  pthread_mutex_unlock(&context->lock);
  free(oldest);
}

tsr_status tsr_buffer_size(const tsr_buffer *buffer, size_t *bytes) {
  tsr__clear_error();
  if (!buffer || !bytes)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, "tsr_buffer_size", "%s is NULL",
                     !buffer ? "buffer" : "bytes");
  tsr_status st = check_live("tsr_buffer_size", "buffer", buffer);
  if (st != TSR_OK)
    return st;
  *bytes = buffer->size;
  return TSR_OK;
}

tsr_status tsr_buffer_device(const tsr_buffer *buffer, tsr_device **device) {
  tsr__clear_error();
  if (!buffer || !device)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, "tsr_buffer_device", "%s is NULL",
                     !buffer ? "buffer" : "device");
  tsr_status st = check_live("tsr_buffer_device", "buffer", buffer);
  if (st != TSR_OK)
    return st;
  *device = buffer->device;
  return TSR_OK;
}

tsr_status tsr_buffer_map(tsr_buffer *buffer, void **host_pointer) {
  static const char call[] = "tsr_buffer_map";
  tsr__clear_error();
  if (!buffer || !host_pointer)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL",
                     !buffer ? "buffer" : "host_pointer");
  tsr_status st = check_live(call, "buffer", buffer);
  if (st != TSR_OK)
    return st;
  const tsr_plugin_v2 *t = tsr__table(buffer->device);
  void *p = t->buffer_host_pointer ? t->buffer_host_pointer(buffer->device->handle, buffer->handle)
                                   : NULL;
  if (!p)
    return tsr__fail(TSR_ERROR_UNSUPPORTED, call, "buffers of %s are not host visible",
                     buffer->device->info.selector);
  *host_pointer = p;
  return TSR_OK;
}

/* ---- queues ---- */

/* A new queue: the plugin's own (kind 0) or one over the caller's stream. */
static tsr_status queue_new(tsr_device *device, int32_t kind, uint64_t stream, tsr_queue **out,
                            const char *call) {
  tsr__clear_error();
  if (!device || !out)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL", !device ? "device" : "out");
  const tsr_plugin_v2 *t = tsr__table(device);
  const char *vendor = kind == TSR_EXTERNAL_CUDA_STREAM ? "CUDA" : "HIP";
  if (kind && !t->queue_wrap)
    return tsr__fail(TSR_ERROR_UNSUPPORTED, call,
                     "%s is not a %s device: the %s plugin cannot wrap native streams",
                     device->info.selector, vendor, device->info.backend);
  void *handle;
  tsr_status st = tsr__device_handle(device, call, &handle);
  if (st != TSR_OK)
    return st;
  tsr_queue *queue = calloc(1, sizeof *queue);
  if (!queue)
    return tsr__fail(TSR_ERROR_OUT_OF_MEMORY, call, "out of host memory");
  st = kind ? t->queue_wrap(handle, kind, stream, &queue->handle)
            : t->queue_create(handle, &queue->handle);
  if (st != TSR_OK) {
    free(queue);
    char fallback[160];
    if (kind)
      snprintf(fallback, sizeof fallback, "%s cannot use %s stream 0x%llx", device->info.selector,
               vendor, (unsigned long long)stream);
    else
      snprintf(fallback, sizeof fallback, "the plugin could not create a queue");
    return tsr__fail_plugin(st, call, fallback);
  }
  queue->device = device;
  pthread_mutex_init(&queue->lock, NULL);
  tsr_context *context = device->context;
  pthread_mutex_lock(&context->lock);
  uint64_t free_slots = ~context->queue_slots & ~TSR__QUEUE_BIT_OVERFLOW;
  queue->bit = free_slots ? free_slots & -free_slots : TSR__QUEUE_BIT_OVERFLOW;
  context->queue_slots |= queue->bit & ~TSR__QUEUE_BIT_OVERFLOW;
  pthread_mutex_unlock(&context->lock);
  link_add(context, &context->queues, &queue->link);
  *out = queue;
  return TSR_OK;
}

tsr_status tsr_queue_create(tsr_device *device, tsr_queue **out) {
  return queue_new(device, 0, 0, out, "tsr_queue_create");
}

tsr_status tsr_queue_wrap_cuda_stream(tsr_device *device, uint64_t stream, tsr_queue **out) {
  return queue_new(device, TSR_EXTERNAL_CUDA_STREAM, stream, out, "tsr_queue_wrap_cuda_stream");
}

tsr_status tsr_queue_wrap_hip_stream(tsr_device *device, uint64_t stream, tsr_queue **out) {
  return queue_new(device, TSR_EXTERNAL_HIP_STREAM, stream, out, "tsr_queue_wrap_hip_stream");
}

static void queue_free(tsr_queue *queue) {
  tsr__table(queue->device)->queue_destroy(queue->handle);
  tsr__op_cache_free(queue->op_cache);
  tsr__op_fast_free(queue->op_fast);
  pthread_mutex_destroy(&queue->lock);
  free(queue);
}

/* Unlinks a queue once no other thread is draining it and frees its slot. */
static void queue_unlink(tsr_context *context, tsr_queue *queue) {
  pthread_mutex_lock(&context->lock);
  while (queue->drainers > 0)
    pthread_cond_wait(&context->drained, &context->lock);
  queue->link.prev->next = queue->link.next;
  queue->link.next->prev = queue->link.prev;
  queue->link.prev = queue->link.next = &queue->link;
  context->queue_slots &= ~(queue->bit & ~TSR__QUEUE_BIT_OVERFLOW);
  pthread_mutex_unlock(&context->lock);
}

void tsr_queue_destroy(tsr_queue *queue) {
  if (!queue)
    return;
  tsr_context *context = queue->device->context;
  /* Helper threads that gate this queue or wait for its events end first. */
  tsr__bridges_wait(context, queue);
  /* Events recorded on this queue lose their queue: destroy them with it. */
  pthread_mutex_lock(&context->lock);
  tsr_object_link *l = context->events.next;
  while (l != &context->events) {
    tsr_object_link *next = l->next;
    tsr_event *e = (tsr_event *)l;
    if (e->queue == queue) {
      l->prev->next = l->next;
      l->next->prev = l->prev;
      if (tsr__table(queue->device)->event_destroy)
        tsr__table(queue->device)->event_destroy(e->handle);
      free(e);
    }
    l = next;
  }
  pthread_mutex_unlock(&context->lock);
  queue_unlink(context, queue);
  queue_free(queue);
}

tsr_status tsr_queue_finish(tsr_queue *queue) {
  static const char call[] = "tsr_queue_finish";
  tsr__clear_error();
  if (!queue)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "queue is NULL");
  tsr__queue_lock(queue);
  tsr_status st = tsr__table(queue->device)->queue_finish(queue->handle);
  tsr__queue_unlock(queue);
  if (st != TSR_OK)
    return tsr__fail_plugin(st, call, "a queued operation failed");
  return tsr__bridge_take_failure(queue, call);
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
  tsr_status st = check_live(call, name, buffer);
  if (st != TSR_OK)
    return st;
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
  tsr__buffer_mark(buffer, queue);
  tsr__queue_lock(queue);
  st = tsr__table(queue->device)->buffer_write(queue->handle, buffer->handle, offset, src, bytes);
  tsr__queue_unlock(queue);
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
  tsr__buffer_mark((tsr_buffer *)buffer, queue);
  tsr__queue_lock(queue);
  st = tsr__table(queue->device)->buffer_read(queue->handle, buffer->handle, offset, dst, bytes);
  tsr__queue_unlock(queue);
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
  tsr_status st = check_live(call, "src", src);
  if (st == TSR_OK)
    st = check_live(call, "dst", dst);
  if (st == TSR_OK && src->device != queue->device && dst->device != queue->device)
    st = tsr__fail(TSR_ERROR_WRONG_DEVICE, call,
                   "src is on %s and dst on %s, but the queue is on %s: a copy runs on a queue "
                   "of the source's or the destination's device",
                   src->device->info.selector, dst->device->info.selector,
                   queue->device->info.selector);
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
  if (src->device != dst->device)
    return tsr__copy_across(queue, (tsr_buffer *)src, src_offset, dst, dst_offset, bytes);
  const tsr_plugin_v2 *t = tsr__table(queue->device);
  if (!t->buffer_copy)
    return tsr__fail(TSR_ERROR_UNSUPPORTED, call, "the %s plugin has no device copy",
                     queue->device->info.backend);
  tsr__buffer_mark((tsr_buffer *)src, queue);
  tsr__buffer_mark(dst, queue);
  tsr__queue_lock(queue);
  st = t->buffer_copy(queue->handle, src->handle, src_offset, dst->handle, dst_offset, bytes);
  tsr__queue_unlock(queue);
  return st == TSR_OK ? st : tsr__fail_plugin(st, call, "the plugin could not queue the copy");
}

/* ---- events ---- */

tsr_status tsr_event_record(tsr_queue *queue, tsr_event **out) {
  static const char call[] = "tsr_event_record";
  tsr__clear_error();
  if (!queue || !out)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL", !queue ? "queue" : "out");
  const tsr_plugin_v2 *t = tsr__table(queue->device);
  if (!t->event_record || !t->event_wait || !t->event_destroy)
    return tsr__fail(TSR_ERROR_UNSUPPORTED, call, "the %s plugin has no events",
                     queue->device->info.backend);
  tsr_event *event = calloc(1, sizeof *event);
  if (!event)
    return tsr__fail(TSR_ERROR_OUT_OF_MEMORY, call, "out of host memory");
  tsr__queue_lock(queue);
  tsr_status st = t->event_record(queue->handle, &event->handle);
  tsr__queue_unlock(queue);
  if (st != TSR_OK) {
    free(event);
    return tsr__fail_plugin(st, call, "the plugin could not record an event");
  }
  event->queue = queue;
  event->refs = 1;
  link_add(queue->device->context, &queue->device->context->events, &event->link);
  *out = event;
  return TSR_OK;
}

tsr_status tsr_event_wait(tsr_event *event) {
  static const char call[] = "tsr_event_wait";
  tsr__clear_error();
  if (!event)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "event is NULL");
  /* The event may belong to another thread's queue: its wait may submit there. */
  tsr__queue_lock(event->queue);
  tsr_status st = tsr__table(event->queue->device)->event_wait(event->handle);
  tsr__queue_unlock(event->queue);
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
  const tsr_plugin_v2 *t = tsr__table(start->queue->device);
  if (!t->event_elapsed_ms)
    return tsr__fail(TSR_ERROR_UNSUPPORTED, call, "the %s plugin cannot time events",
                     start->queue->device->info.backend);
  /* Both queues, in address order so that two such calls cannot deadlock. */
  tsr_queue *first = start->queue < end->queue ? start->queue : end->queue;
  tsr_queue *second = start->queue < end->queue ? end->queue : start->queue;
  tsr__queue_lock(first);
  if (second != first)
    tsr__queue_lock(second);
  tsr_status st = t->event_elapsed_ms(start->handle, end->handle, ms);
  if (second != first)
    tsr__queue_unlock(second);
  tsr__queue_unlock(first);
  return st == TSR_OK ? st : tsr__fail_plugin(st, call, "the plugin could not time the events");
}

void tsr__event_unref(tsr_event *event) {
  if (__atomic_sub_fetch(&event->refs, 1, __ATOMIC_ACQ_REL) != 0)
    return;
  tsr__table(event->queue->device)->event_destroy(event->handle);
  free(event);
}

void tsr_event_destroy(tsr_event *event) {
  if (!event)
    return;
  link_remove(event->queue->device->context, &event->link);
  tsr__event_unref(event);
}

void tsr__destroy_objects(tsr_context *context) {
  /* DLPack exports still alive lose their buffer, which is freed below:
   * their deleters then free only themselves. */
  while (context->exports.next != &context->exports) {
    tsr__export_link *record = (tsr__export_link *)context->exports.next;
    link_remove(context, &record->link);
    record->buffer = NULL;
  }
  /* Helper threads hold events, queues and buffers: they end first. */
  tsr__bridges_wait(context, NULL);
  while (context->events.next != &context->events)
    tsr_event_destroy((tsr_event *)context->events.next);
  /* Queues finish their work before buffers go. */
  while (context->queues.next != &context->queues) {
    tsr_queue *q = (tsr_queue *)context->queues.next;
    queue_unlink(context, q);
    queue_free(q);
  }
  tsr__transfer_queues_destroy(context);
  while (context->buffers.next != &context->buffers) {
    tsr_buffer *b = (tsr_buffer *)context->buffers.next;
    link_remove(context, &b->link);
    __atomic_store_n(&b->state, TSR__BUFFER_DEAD, __ATOMIC_RELEASE);
    tsr__table(b->device)->buffer_free(b->device->handle, b->handle);
    if (b->on_free)
      b->on_free(b->on_free_arg);
    free(b);
  }
}
