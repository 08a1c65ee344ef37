/* SPDX-License-Identifier: Apache-2.0 */
/* Queues (a stream each, the plugin's or the application's, with the fault
 * words kernels report bad device-resident indices to, and a workspace),
 * finishing them, and events. */
#include <stdlib.h>

#include "gpu.h"

/* A queue on `stream`: the plugin's own new stream (wrapped false), or the
 * application's. Its status word is set on the stream, ahead of any op; on
 * the plugin's stream creation also waits for that, to report a fault
 * here, while the application's stream is never waited for. */
static tsr_status queue_new(gpu_device *device, void *stream, bool wrapped, void **out) {
  const gpu_driver *d = &device->plugin->driver;
  gpu_queue *queue = calloc(1, sizeof *queue);
  if (!queue)
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_OUT_OF_MEMORY,
                           "out of host memory for a queue");
  queue->device = device;
  queue->stream_wrapped = wrapped;
  int error = 0;
  if (wrapped)
    queue->stream = stream;
  else if ((error = d->stream_create(d->context, &queue->stream)) != 0) {
    free(queue);
    return gpu_fail(device->plugin, error, "creating a stream");
  }
  error = d->mem_alloc(d->context, TSR_PLUGIN_FAULT_COUNT * sizeof(int32_t), &queue->status);
  if (error == 0)
    error = d->memset32(d->context, queue->status, TSR_PLUGIN_FAULT_NONE, TSR_PLUGIN_FAULT_COUNT,
                        queue->stream);
  if (error == 0 && !wrapped)
    error = d->stream_sync(d->context, queue->stream);
  if (error != 0) {
    if (queue->status) {
      if (wrapped) /* the memset may be queued behind the application's work */
        d->stream_sync(d->context, queue->stream);
      d->mem_free(d->context, queue->status);
    }
    if (!wrapped)
      d->stream_destroy(d->context, queue->stream);
    free(queue);
    return gpu_fail(device->plugin, error, "creating the queue's fault words");
  }
  pthread_mutex_lock(&device->lock);
  queue->next_in_device = device->queues;
  device->queues = queue;
  pthread_mutex_unlock(&device->lock);
  *out = queue;
  return TSR_OK;
}

tsr_status gpu_queue_create(void *handle, void **out) {
  gpu_device *device = handle;
  tsr_status status = gpu_enter(device);
  if (status != TSR_OK)
    return status;
  return queue_new(device, NULL, false, out);
}

/* A queue over the application's stream. Where the driver says which
 * context a stream belongs to, a stream of another GPU or context is
 * refused here (work on it would fault or run elsewhere); otherwise the
 * caller's word is taken. */
tsr_status gpu_queue_wrap(void *handle, int32_t kind, uint64_t stream, void **out) {
  gpu_device *device = handle;
  const gpu_plugin *plugin = device->plugin;
  const gpu_driver *d = &plugin->driver;
  const gpu_vendor *vendor = plugin->catalog.vendor;
  if (kind != vendor->external_stream_kind)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_UNSUPPORTED,
                           "queue_wrap: kind = %d is not one of %s (kind %d)", (int)kind,
                           vendor->external_stream_what, (int)vendor->external_stream_kind);
  tsr_status status = gpu_enter(device);
  if (status != TSR_OK)
    return status;
  void *native = (void *)(uintptr_t)stream;
  if (d->stream_owner) {
    void *owner = NULL;
    int error = d->stream_owner(d->context, native, &owner);
    if (error != 0) {
      char described[256];
      d->describe(d->context, error, described, sizeof described);
      return tsr_plugin_fail(&plugin->host, TSR_ERROR_INVALID_VALUE,
                             "queue_wrap: stream 0x%llx is not a live stream the driver knows "
                             "(%s)",
                             (unsigned long long)stream, described);
    }
    if (owner != device->context)
      return tsr_plugin_fail(&plugin->host, TSR_ERROR_WRONG_DEVICE,
                             "queue_wrap: stream 0x%llx belongs to another GPU or context than "
                             "%s (the device's primary context)",
                             (unsigned long long)stream, device->props->name);
  } else {
    tsr_plugin_log(&plugin->host, TSR_LOG_DEBUG,
                   "queue_wrap: the driver cannot say which device stream 0x%llx belongs to; "
                   "taking it as %s's",
                   (unsigned long long)stream, device->props->name);
  }
  return queue_new(device, native, true, out);
}

void gpu_queue_destroy(void *handle) {
  gpu_queue *queue = handle;
  if (!queue)
    return;
  gpu_device *device = queue->device;
  const gpu_driver *d = &device->plugin->driver;
  /* Waits for the stream (the queue's work may still use the workspace and
   * the status word); the application's stream stays the application's. */
  if (gpu_enter(device) == TSR_OK) {
    d->stream_sync(d->context, queue->stream);
    if (queue->workspace)
      d->mem_free(d->context, queue->workspace);
    d->mem_free(d->context, queue->status);
    if (!queue->stream_wrapped)
      d->stream_destroy(d->context, queue->stream);
  }
  pthread_mutex_lock(&device->lock);
  for (gpu_queue **link = &device->queues; *link; link = &(*link)->next_in_device) {
    if (*link == queue) {
      *link = queue->next_in_device;
      break;
    }
  }
  pthread_mutex_unlock(&device->lock);
  free(queue);
}

/* Waits for the stream; a fault of queued work (the driver reports it at
 * the wait) or a bad index a kernel found (a cross-entropy target, an
 * attention offset, length or block-table entry, a kv_append slot) is
 * returned here, once. */
tsr_status gpu_queue_finish(void *handle) {
  gpu_queue *queue = handle;
  gpu_plugin *plugin = queue->device->plugin;
  const gpu_driver *d = &plugin->driver;
  tsr_status status = gpu_enter(queue->device);
  if (status != TSR_OK)
    return status;
  int error = d->stream_sync(d->context, queue->stream);
  if (error != 0)
    return gpu_fail(plugin, error, "queued work failed on the GPU");
  if (!queue->status_armed)
    return TSR_OK;
  queue->status_armed = false;
  int32_t words[TSR_PLUGIN_FAULT_COUNT];
  tsr_plugin_faults_clear(words);
  error = d->copy_d2h(d->context, words, queue->status, sizeof words, queue->stream);
  if (error == 0)
    error = d->memset32(d->context, queue->status, TSR_PLUGIN_FAULT_NONE, TSR_PLUGIN_FAULT_COUNT,
                        queue->stream);
  if (error == 0)
    error = d->stream_sync(d->context, queue->stream);
  if (error != 0)
    return gpu_fail(plugin, error, "reading the queue's fault words");
  return tsr_plugin_fault_report(&plugin->host, words, &queue->fault_context);
}

tsr_status gpu_event_record(void *handle, void **out) {
  gpu_queue *queue = handle;
  gpu_plugin *plugin = queue->device->plugin;
  const gpu_driver *d = &plugin->driver;
  tsr_status status = gpu_enter(queue->device);
  if (status != TSR_OK)
    return status;
  gpu_event *event = calloc(1, sizeof *event);
  if (!event)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_OUT_OF_MEMORY,
                           "out of host memory for an event");
  event->device = queue->device;
  int error = d->event_create(d->context, &event->event);
  if (error == 0) {
    error = d->event_record(d->context, event->event, queue->stream);
    if (error != 0)
      d->event_destroy(d->context, event->event);
  }
  if (error != 0) {
    free(event);
    return gpu_fail(plugin, error, "recording an event");
  }
  *out = event;
  return TSR_OK;
}

/* Waits on the host for `event`, then (with `end`) for `end` and reads the
 * time between them. */
static tsr_status wait_events(gpu_event *event, gpu_event *end, float *elapsed) {
  gpu_plugin *plugin = event->device->plugin;
  const gpu_driver *d = &plugin->driver;
  tsr_status status = gpu_enter(event->device);
  if (status != TSR_OK)
    return status;
  int error = d->event_sync(d->context, event->event);
  if (error == 0 && end)
    error = d->event_sync(d->context, end->event);
  if (error == 0 && end)
    error = d->event_elapsed(d->context, event->event, end->event, elapsed);
  return error == 0 ? TSR_OK
                    : gpu_fail(plugin, error, end ? "timing two events" : "waiting for an event");
}

tsr_status gpu_event_wait(void *handle) {
  return wait_events(handle, NULL, NULL);
}

tsr_status gpu_event_elapsed_ms(void *start, void *end, double *ms) {
  float elapsed = 0.0f;
  tsr_status status = wait_events(start, end, &elapsed);
  if (status == TSR_OK)
    *ms = elapsed;
  return status;
}

void gpu_event_destroy(void *handle) {
  gpu_event *event = handle;
  if (!event)
    return;
  const gpu_driver *d = &event->device->plugin->driver;
  if (gpu_enter(event->device) == TSR_OK)
    d->event_destroy(d->context, event->event);
  free(event);
}
