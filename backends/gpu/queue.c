/* SPDX-License-Identifier: Apache-2.0 */
/* Queues (a stream each, the plugin's or the application's, with the fault
 * words kernels report bad device-resident indices to, and a workspace),
 * finishing them, events, and what the core needs across devices: a queue
 * waiting for another GPU's event, and gates. */
#include <stdlib.h>

#include "gpu.h"

/* A queue's gates: one 32-bit word of pinned host memory mapped for the
 * device, which the stream waits on. Gate k holds the work queued after it
 * until the word reaches k; gate_open raises the word to the highest T with
 * every ticket up to T opened, so gates opened out of order each hold only
 * their own part of the stream. */
typedef struct gpu_gate gpu_gate;
typedef struct gpu_gate_opener {
  pthread_mutex_t lock; /* guards everything below (queue_gate vs gate_open) */
  uint32_t *word;       /* host address: written by gate_open only */
  gpu_address device_word;
  uint32_t issued;   /* the last ticket given out (tickets start at 1) */
  uint32_t released; /* the word's value: every ticket up to it is open */
  gpu_gate *early;   /* gates opened ahead of their turn, by ticket */
  bool broken;       /* the stream cannot wait on the word: no more gates */
} gpu_gate_opener;

struct gpu_gate {
  gpu_gate_opener *opener;
  uint32_t ticket;
  gpu_gate *next; /* in opener->early */
};

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
  const bool entered = gpu_enter(device) == TSR_OK;
  if (entered) {
    d->stream_sync(d->context, queue->stream);
    if (queue->workspace)
      d->mem_free(d->context, queue->workspace);
    d->mem_free(d->context, queue->status);
    if (!queue->stream_wrapped)
      d->stream_destroy(d->context, queue->stream);
  }
  /* The core opened every gate before this (the stream sync waited for the
   * word); any gate still parked here is freed all the same. */
  gpu_gate_opener *gates = queue->gates;
  if (gates) {
    while (gates->early) {
      gpu_gate *gate = gates->early;
      gates->early = gate->next;
      free(gate);
    }
    if (entered)
      d->host_free(d->context, gates->word);
    pthread_mutex_destroy(&gates->lock);
    free(gates);
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

/* ---- across devices ---- */

/* Work queued on the queue after this waits for `event` on the GPU, an
 * event of this device or of another of the plugin's (CUDA and HIP let a
 * stream wait for an event of another context or device). */
tsr_status gpu_queue_wait_event(void *handle, void *event_handle) {
  gpu_queue *queue = handle;
  const gpu_event *event = event_handle;
  gpu_plugin *plugin = queue->device->plugin;
  const gpu_driver *d = &plugin->driver;
  if (!d->stream_wait_event)
    return TSR_ERROR_UNSUPPORTED;
  tsr_status status = gpu_enter(queue->device);
  if (status != TSR_OK)
    return status;
  int error = d->stream_wait_event(d->context, queue->stream, event->event);
  return error == 0 ? TSR_OK
                    : gpu_fail(plugin, error,
                               event->device == queue->device
                                   ? "making a queue wait for an event"
                                   : "making a queue wait for an event of another GPU");
}

/* Gates are off for a queue (a debug line says why); the core falls back. */
static tsr_status gates_unavailable(gpu_queue *queue, int error, const char *what) {
  const gpu_plugin *plugin = queue->device->plugin;
  char described[256] = "";
  if (error != 0)
    plugin->driver.describe(plugin->driver.context, error, described, sizeof described);
  tsr_plugin_log(&plugin->host, TSR_LOG_DEBUG, "no gates on a queue of %s: %s%s%s",
                 queue->device->props->name, what, error != 0 ? ": " : "", described);
  return TSR_ERROR_UNSUPPORTED;
}

/* The queue's gate word, made at its first gate (under the queue's lock,
 * with the device current). */
static tsr_status gates_create(gpu_queue *queue) {
  const gpu_plugin *plugin = queue->device->plugin;
  const gpu_driver *d = &plugin->driver;
  gpu_gate_opener *gates = calloc(1, sizeof *gates);
  if (!gates)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_OUT_OF_MEMORY,
                           "out of host memory for a queue's gates");
  void *word = NULL;
  int error = d->host_alloc(d->context, sizeof(uint32_t), &word);
  if (error != 0) {
    free(gates);
    return gates_unavailable(queue, error, "allocating pinned host memory for the gate word");
  }
  gates->word = word;
  __atomic_store_n(gates->word, 0u, __ATOMIC_RELEASE);
  error = d->host_address(d->context, word, &gates->device_word);
  if (error != 0) {
    d->host_free(d->context, word);
    free(gates);
    return gates_unavailable(queue, error, "mapping the gate word for the device");
  }
  pthread_mutex_init(&gates->lock, NULL);
  queue->gates = gates;
  return TSR_OK;
}

/* A gate: the stream waits until the word reaches a new ticket. A stream
 * that cannot wait on host memory (stream memory operations off) answers
 * TSR_ERROR_UNSUPPORTED, now and for the queue's later gates. */
tsr_status gpu_queue_gate(void *handle, void **out) {
  gpu_queue *queue = handle;
  const gpu_plugin *plugin = queue->device->plugin;
  const gpu_driver *d = &plugin->driver;
  if (!d->stream_wait_value32 || !d->host_alloc || !d->host_free || !d->host_address)
    return TSR_ERROR_UNSUPPORTED;
  if (queue->gates && queue->gates->broken)
    return TSR_ERROR_UNSUPPORTED;
  tsr_status status = gpu_enter(queue->device);
  if (status == TSR_OK && !queue->gates)
    status = gates_create(queue);
  if (status != TSR_OK)
    return status;
  gpu_gate_opener *gates = queue->gates;
  gpu_gate *gate = calloc(1, sizeof *gate);
  if (!gate)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_OUT_OF_MEMORY, "out of host memory for a gate");
  /* Tickets never wrap: HIP's >= is not cyclic (CUDA's is). Four billion
   * gates on one queue end in the core's fallback. */
  pthread_mutex_lock(&gates->lock);
  const bool spent = gates->issued == UINT32_MAX;
  const uint32_t ticket = spent ? 0 : ++gates->issued;
  pthread_mutex_unlock(&gates->lock);
  if (spent) {
    free(gate);
    return gates_unavailable(queue, 0, "its 2^32 - 1 gate tickets are spent");
  }
  int error = d->stream_wait_value32(d->context, queue->stream, gates->device_word, ticket);
  if (error != 0) {
    /* Nothing waits on the ticket: take it back (queue_gate is serialised
     * by the queue's lock, so it is still the last one). */
    pthread_mutex_lock(&gates->lock);
    gates->issued--;
    gates->broken = true;
    pthread_mutex_unlock(&gates->lock);
    free(gate);
    return gates_unavailable(queue, error, "the stream cannot wait on host memory");
  }
  gate->opener = gates;
  gate->ticket = ticket;
  *out = gate;
  return TSR_OK;
}

/* Opens a gate (any thread, no queue lock): the word rises past it only
 * when every earlier gate is open too; until then it waits, by ticket, in
 * the opener's list. Allocates nothing, so it cannot fail. */
void gpu_gate_open(void *handle) {
  gpu_gate *gate = handle;
  if (!gate)
    return;
  gpu_gate_opener *gates = gate->opener;
  pthread_mutex_lock(&gates->lock);
  if (gate->ticket != gates->released + 1) {
    gpu_gate **link = &gates->early;
    while (*link && (*link)->ticket < gate->ticket)
      link = &(*link)->next;
    gate->next = *link;
    *link = gate;
    pthread_mutex_unlock(&gates->lock);
    return;
  }
  uint32_t released = gate->ticket;
  free(gate);
  while (gates->early && gates->early->ticket == released + 1) {
    gpu_gate *next = gates->early;
    gates->early = next->next;
    released = next->ticket;
    free(next);
  }
  gates->released = released;
  /* The device polls the word over the bus; a release store keeps the
   * host's earlier writes (staged data) ahead of it. */
  __atomic_store_n(gates->word, released, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&gates->lock);
}
