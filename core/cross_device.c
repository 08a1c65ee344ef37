/* SPDX-License-Identifier: Apache-2.0 */
/* Work across devices: a queue waiting for another device's event, and
 * copies between buffers of two devices.
 *
 * Within one plugin the plugin does both itself where it can (CUDA waits on
 * another GPU's event with cuStreamWaitEvent and copies peer to peer).
 * Otherwise a helper thread bridges the two devices on the host: the target
 * queue gets a gate (the plugin's queue_gate), which holds the work queued
 * after it; the thread waits for the event (or, for a copy, for the queue to
 * reach the copy), stages the bytes through host memory on the core's own
 * transfer queues, and opens the gate. The calling thread never waits, and
 * neither queue's owner is blocked: the thread takes no queue lock while it
 * waits. A plugin without gates gets the same done on the calling thread. */
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

/* Host staging for copies where neither side is host memory. */
enum { STAGING_CHUNK = 32 << 20 };

typedef struct bridge_job {
  tsr_context *context;
  tsr_queue *queue; /* the gated queue */
  void *gate;
  /* What the thread waits for first: an event of any device (a reference
   * held), or the plugin event marking where the queue reaches the copy. */
  tsr_event *event;
  void *reached;
  /* The copy, when there is one (references held on both buffers). */
  tsr_buffer *src, *dst;
  size_t src_offset, dst_offset, bytes;
} bridge_job;

/* ---- bookkeeping: who pins what ---- */

static void pin(tsr_context *context, tsr_queue *a, tsr_queue *b) {
  pthread_mutex_lock(&context->lock);
  context->bridge_jobs++;
  a->bridge_jobs++;
  if (b)
    b->bridge_jobs++;
  pthread_mutex_unlock(&context->lock);
}

static void unpin(tsr_context *context, tsr_queue *a, tsr_queue *b) {
  pthread_mutex_lock(&context->lock);
  context->bridge_jobs--;
  a->bridge_jobs--;
  if (b)
    b->bridge_jobs--;
  pthread_cond_broadcast(&context->bridged);
  pthread_mutex_unlock(&context->lock);
}

void tsr__bridges_wait(tsr_context *context, tsr_queue *queue) {
  pthread_mutex_lock(&context->lock);
  while (queue ? queue->bridge_jobs > 0 : context->bridge_jobs > 0)
    pthread_cond_wait(&context->bridged, &context->lock);
  pthread_mutex_unlock(&context->lock);
}

/* Keeps the first failure of a staged copy for the queue's next finish. */
static void record_failure(tsr_queue *queue, tsr_status status, const char *message) {
  tsr_context *context = queue->device->context;
  pthread_mutex_lock(&context->lock);
  if (!queue->bridge_failed) {
    queue->bridge_status = status;
    snprintf(queue->bridge_message, sizeof queue->bridge_message, "%s", message);
    __atomic_store_n(&queue->bridge_failed, 1u, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&context->lock);
}

tsr_status tsr__bridge_take_failure(tsr_queue *queue, const char *call) {
  if (!__atomic_load_n(&queue->bridge_failed, __ATOMIC_ACQUIRE))
    return TSR_OK;
  tsr_context *context = queue->device->context;
  char message[sizeof queue->bridge_message];
  pthread_mutex_lock(&context->lock);
  tsr_status status = queue->bridge_status;
  memcpy(message, queue->bridge_message, sizeof message);
  queue->bridge_failed = 0;
  pthread_mutex_unlock(&context->lock);
  return tsr__fail(status, call, "%s", message);
}

/* ---- the core's transfer queues ---- */

/* The device's transfer queue, made on first use; the caller holds
 * transfer_lock. */
static tsr_status transfer_queue(tsr_device *device, void **out) {
  if (!device->transfer_queue) {
    void *handle = NULL;
    tsr_status st = tsr__device_handle(device, "tsr_buffer_copy", &handle);
    if (st == TSR_OK)
      st = tsr__table(device)->queue_create(handle, &device->transfer_queue);
    if (st != TSR_OK)
      return st;
  }
  *out = device->transfer_queue;
  return TSR_OK;
}

void tsr__transfer_queues_destroy(tsr_context *context) {
  for (uint32_t i = 0; i < context->device_count; i++) {
    tsr_device *device = context->devices[i];
    if (device->transfer_queue)
      tsr__table(device)->queue_destroy(device->transfer_queue);
    device->transfer_queue = NULL;
  }
}

/* Host memory the core may address directly: a CPU device's buffers. */
static char *host_bytes(tsr_buffer *buffer) {
  const tsr_plugin_v2 *t = tsr__table(buffer->device);
  if (buffer->device->info.type != TSR_DEVICE_CPU || !t->buffer_host_pointer)
    return NULL;
  return t->buffer_host_pointer(buffer->device->handle, buffer->handle);
}

/* Reads or writes `bytes` of a buffer through its device's transfer queue,
 * finished before it returns. */
static tsr_status transfer(tsr_buffer *buffer, size_t offset, void *host, size_t bytes, bool write,
                           char *why, size_t capacity) {
  tsr_device *device = buffer->device;
  const tsr_plugin_v2 *t = tsr__table(device);
  pthread_mutex_lock(&device->transfer_lock);
  void *queue = NULL;
  tsr_status st = transfer_queue(device, &queue);
  if (st == TSR_OK)
    st = write ? t->buffer_write(queue, buffer->handle, offset, host, bytes)
               : t->buffer_read(queue, buffer->handle, offset, host, bytes);
  if (st == TSR_OK)
    st = t->queue_finish(queue);
  pthread_mutex_unlock(&device->transfer_lock);
  if (st != TSR_OK) {
    char detail[256];
    if (!tsr__take_plugin_error(detail, sizeof detail))
      snprintf(detail, sizeof detail, "status %d", (int)st);
    snprintf(why, capacity, "%s %s failed: %s", write ? "writing" : "reading",
             device->info.selector, detail);
  }
  return st;
}

/* Copies between two devices' buffers through host memory, on the calling
 * thread; the queues' order is the caller's business. */
static tsr_status stage_copy(tsr_buffer *src, size_t src_offset, tsr_buffer *dst, size_t dst_offset,
                             size_t bytes, char *why, size_t capacity) {
  char *from = host_bytes(src), *to = host_bytes(dst);
  if (from && to) {
    memmove(to + dst_offset, from + src_offset, bytes);
    return TSR_OK;
  }
  if (from)
    return transfer(dst, dst_offset, from + src_offset, bytes, true, why, capacity);
  if (to)
    return transfer(src, src_offset, to + dst_offset, bytes, false, why, capacity);
  size_t chunk = bytes < STAGING_CHUNK ? bytes : STAGING_CHUNK;
  char *staging = malloc(chunk);
  if (!staging) {
    snprintf(why, capacity, "out of host memory for %zu bytes of staging", chunk);
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  tsr_status st = TSR_OK;
  for (size_t done = 0; done < bytes && st == TSR_OK; done += chunk) {
    size_t n = bytes - done < chunk ? bytes - done : chunk;
    st = transfer(src, src_offset + done, staging, n, false, why, capacity);
    if (st == TSR_OK)
      st = transfer(dst, dst_offset + done, staging, n, true, why, capacity);
  }
  free(staging);
  return st;
}

/* ---- waiting for events ---- */

/* Waits for an event without its queue's lock where its plugin allows
 * (event_flush ran on it), else under the lock as tsr_event_wait does. */
static tsr_status wait_event_unlocked(tsr_event *event) {
  const tsr_plugin_v2 *t = tsr__table(event->queue->device);
  if (tsr__plugin_multi(event->queue->device))
    return t->event_wait(event->handle);
  tsr__queue_lock(event->queue);
  tsr_status st = t->event_wait(event->handle);
  tsr__queue_unlock(event->queue);
  return st;
}

/* Makes an event waitable from another thread without its queue's lock. */
static tsr_status flush_event(tsr_event *event) {
  const tsr_plugin_v2 *t = tsr__table(event->queue->device);
  if (!t->event_flush)
    return TSR_OK;
  tsr__queue_lock(event->queue);
  tsr_status st = t->event_flush(event->handle);
  tsr__queue_unlock(event->queue);
  return st;
}

/* ---- the helper thread ---- */

static void job_finish(bridge_job *job) {
  tsr_queue *event_queue = job->event ? job->event->queue : NULL;
  const tsr_plugin_v2 *t = tsr__table(job->queue->device);
  t->gate_open(job->gate);
  if (job->event)
    tsr__event_unref(job->event);
  if (job->src)
    tsr__buffer_unref(job->src);
  if (job->dst)
    tsr__buffer_unref(job->dst);
  tsr_context *context = job->context;
  tsr_queue *queue = job->queue;
  free(job);
  unpin(context, queue, event_queue);
}

static void job_run(bridge_job *job) {
  char why[320] = "";
  tsr_status st = TSR_OK;
  const tsr_plugin_v2 *t = tsr__table(job->queue->device);
  if (job->event) {
    st = wait_event_unlocked(job->event);
    if (st != TSR_OK)
      snprintf(why, sizeof why, "waiting for an event of %s failed",
               job->event->queue->device->info.selector);
  }
  if (job->reached) {
    st = t->event_wait(job->reached);
    t->event_destroy(job->reached);
    if (st != TSR_OK)
      snprintf(why, sizeof why, "waiting for %s to reach the copy failed",
               job->queue->device->info.selector);
  }
  if (st == TSR_OK && job->src)
    st = stage_copy(job->src, job->src_offset, job->dst, job->dst_offset, job->bytes, why,
                    sizeof why);
  if (st != TSR_OK) {
    char message[384];
    if (job->src)
      snprintf(message, sizeof message, "the copy of %zu bytes from %s to %s failed: %s",
               job->bytes, job->src->device->info.selector, job->dst->device->info.selector, why);
    else
      snprintf(message, sizeof message, "%s", why);
    record_failure(job->queue, st, message);
  }
  job_finish(job);
}

static void *job_main(void *argument) {
  job_run(argument);
  return NULL;
}

/* Runs the job on a thread of its own; on the calling thread if none can
 * be made (the gate then opens before this returns). */
static void job_start(bridge_job *job) {
  pthread_attr_t attr;
  pthread_t thread;
  bool started = false;
  if (pthread_attr_init(&attr) == 0) {
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    started = pthread_create(&thread, &attr, job_main, job) == 0;
    pthread_attr_destroy(&attr);
  }
  if (!started)
    job_run(job);
}

/* A new job gating `queue`: the gate queued after whatever the caller puts
 * before it (under the queue's lock). */
static tsr_status job_new(tsr_queue *queue, const char *call, bridge_job **out) {
  bridge_job *job = calloc(1, sizeof *job);
  if (!job)
    return tsr__fail(TSR_ERROR_OUT_OF_MEMORY, call, "out of host memory");
  job->context = queue->device->context;
  job->queue = queue;
  *out = job;
  return TSR_OK;
}

/* ---- tsr_queue_wait_event ---- */

tsr_status tsr_queue_wait_event(tsr_queue *queue, tsr_event *event) {
  static const char call[] = "tsr_queue_wait_event";
  tsr__clear_error();
  if (!queue || !event)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL", !queue ? "queue" : "event");
  if (event->queue->device->context != queue->device->context)
    return tsr__fail(TSR_ERROR_WRONG_DEVICE, call,
                     "the event and the queue come from two different contexts");
  if (event->queue == queue)
    return TSR_OK; /* a queue is in order */
  const tsr_plugin_v2 *t = tsr__table(queue->device);
  tsr_status st = flush_event(event);
  if (st != TSR_OK)
    return tsr__fail_plugin(st, call, "the event's plugin could not submit it");
  if (event->queue->device->plugin == queue->device->plugin && t->queue_wait_event) {
    tsr__queue_lock(queue);
    st = t->queue_wait_event(queue->handle, event->handle);
    tsr__queue_unlock(queue);
    if (st == TSR_OK)
      return TSR_OK;
    if (st != TSR_ERROR_UNSUPPORTED)
      return tsr__fail_plugin(st, call, "the plugin could not queue the wait");
    tsr__take_plugin_error(NULL, 0); /* no sentence is owed for UNSUPPORTED */
  }
  bridge_job *job = NULL;
  if (tsr__plugin_multi(queue->device)) {
    st = job_new(queue, call, &job);
    if (st != TSR_OK)
      return st;
    tsr__queue_lock(queue);
    st = t->queue_gate(queue->handle, &job->gate);
    tsr__queue_unlock(queue);
    if (st != TSR_OK) {
      free(job);
      job = NULL;
      if (st != TSR_ERROR_UNSUPPORTED)
        return tsr__fail_plugin(st, call, "the plugin could not queue a gate");
      tsr__take_plugin_error(NULL, 0);
    }
  }
  if (!job) {
    /* No gates here: wait on this thread, so the queue's later work comes
     * after the event. */
    st = wait_event_unlocked(event);
    return st == TSR_OK ? st : tsr__fail_plugin(st, call, "waiting for the event failed");
  }
  __atomic_add_fetch(&event->refs, 1, __ATOMIC_ACQ_REL);
  job->event = event;
  pin(job->context, queue, event->queue);
  job_start(job);
  return TSR_OK;
}

/* ---- tsr_buffer_copy across devices ---- */

/* The copy behind a gate, staged by a helper thread. TSR_ERROR_UNSUPPORTED
 * (nothing queued, no sentence) when the plugin has no gate for the queue
 * after all. */
static tsr_status copy_gated(tsr_queue *queue, tsr_buffer *src, size_t src_offset, tsr_buffer *dst,
                             size_t dst_offset, size_t bytes) {
  static const char call[] = "tsr_buffer_copy";
  const tsr_plugin_v2 *t = tsr__table(queue->device);
  tsr_status st;
  if (!tsr__buffer_ref(src))
    return tsr__fail(TSR_ERROR_INVALID_VALUE, call, "src was destroyed during the call");
  if (!tsr__buffer_ref(dst)) {
    tsr__buffer_unref(src);
    return tsr__fail(TSR_ERROR_INVALID_VALUE, call, "dst was destroyed during the call");
  }
  bridge_job *job = NULL;
  st = job_new(queue, call, &job);
  if (st != TSR_OK) {
    tsr__buffer_unref(src);
    tsr__buffer_unref(dst);
    return st;
  }
  job->src = src;
  job->dst = dst;
  job->src_offset = src_offset;
  job->dst_offset = dst_offset;
  job->bytes = bytes;
  tsr__queue_lock(queue);
  st = t->event_record(queue->handle, &job->reached);
  if (st == TSR_OK && t->event_flush) {
    st = t->event_flush(job->reached);
    if (st != TSR_OK)
      t->event_destroy(job->reached);
  }
  if (st == TSR_OK) {
    st = t->queue_gate(queue->handle, &job->gate);
    if (st != TSR_OK)
      t->event_destroy(job->reached);
  }
  tsr__queue_unlock(queue);
  if (st != TSR_OK) {
    tsr__buffer_unref(src);
    tsr__buffer_unref(dst);
    free(job);
    if (st == TSR_ERROR_UNSUPPORTED)
      return st;
    return tsr__fail_plugin(st, call, "the plugin could not queue the copy's gate");
  }
  pin(job->context, queue, NULL);
  job_start(job);
  return TSR_OK;
}

tsr_status tsr__copy_across(tsr_queue *queue, tsr_buffer *src, size_t src_offset, tsr_buffer *dst,
                            size_t dst_offset, size_t bytes) {
  static const char call[] = "tsr_buffer_copy";
  const tsr_plugin_v2 *t = tsr__table(queue->device);
  tsr__buffer_mark(src, queue);
  tsr__buffer_mark(dst, queue);
  tsr_status st;
  if (src->device->plugin == dst->device->plugin && t->buffer_copy_peer) {
    tsr__queue_lock(queue);
    st = t->buffer_copy_peer(queue->handle, src->device->handle, src->handle, src_offset,
                             dst->device->handle, dst->handle, dst_offset, bytes);
    tsr__queue_unlock(queue);
    if (st == TSR_OK)
      return TSR_OK;
    if (st != TSR_ERROR_UNSUPPORTED)
      return tsr__fail_plugin(st, call, "the plugin could not queue the copy between devices");
    tsr__take_plugin_error(NULL, 0); /* no sentence is owed for UNSUPPORTED */
  }
  /* Both devices' handles are open: each buffer was made on its device. */
  if (tsr__plugin_multi(queue->device) && t->event_record && t->event_wait) {
    st = copy_gated(queue, src, src_offset, dst, dst_offset, bytes);
    if (st != TSR_ERROR_UNSUPPORTED)
      return st;
    tsr__take_plugin_error(NULL, 0);
  }
  /* No gates: the queue's earlier work first, then the copy, here. */
  tsr__queue_lock(queue);
  void *reached = NULL;
  st = t->event_record ? t->event_record(queue->handle, &reached) : t->queue_finish(queue->handle);
  if (st == TSR_OK && reached) {
    st = t->event_wait(reached);
    t->event_destroy(reached);
  }
  tsr__queue_unlock(queue);
  if (st != TSR_OK)
    return tsr__fail_plugin(st, call, "waiting for the queue's earlier work failed");
  char why[320];
  st = stage_copy(src, src_offset, dst, dst_offset, bytes, why, sizeof why);
  return st == TSR_OK ? st : tsr__fail(st, call, "%s", why);
}
