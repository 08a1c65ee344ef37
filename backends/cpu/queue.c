/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU plugin's queues: each has a worker thread that runs its commands
 * (ops, copies, timestamps) in order, so work proceeds while the
 * application does something else. A thread that waits for the queue
 * (tsr_queue_finish, a transfer) and finds the worker parked runs the
 * commands itself instead of waiting for the worker to wake, which in a
 * virtual machine can take hundreds of microseconds: a synchronous call
 * then costs its work. Idle threads poll for the device's poll window
 * (TESSERA_CPU_POLL_US), then park. Events are CLOCK_MONOTONIC stamps
 * taken when the queue reaches them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_plugin.h"
#include "park.h"

/* ------------------------------------------------------------------------ */
/* Queues                                                                    */
/* ------------------------------------------------------------------------ */

void cpu_command_free(command *c) {
  free(c->group_sizes);
  free(c);
}

static void gate_unref(cpu_gate *gate) {
  if (atomic_fetch_sub_explicit(&gate->refs, 1, memory_order_acq_rel) != 1)
    return;
  pthread_cond_destroy(&gate->opened_cond);
  pthread_mutex_destroy(&gate->lock);
  free(gate);
}

static bool gate_is_open(const void *argument) {
  return atomic_load_explicit(&((const cpu_gate *)argument)->opened, memory_order_acquire);
}

/* The executing thread waits at the gate: briefly polling (a copy staged
 * for it is usually short), then asleep. */
static void gate_pass(cpu_gate *gate) {
  if (!cpu_poll(gate_is_open, gate, gate->plugin->waiter_poll_ns)) {
    pthread_mutex_lock(&gate->lock);
    while (!atomic_load_explicit(&gate->opened, memory_order_relaxed))
      pthread_cond_wait(&gate->opened_cond, &gate->lock);
    pthread_mutex_unlock(&gate->lock);
  }
  gate_unref(gate);
}

/* Runs one command on the executing thread; a failure is kept for the next
 * queue_finish (the first one wins). */
static void execute_command(cpu_queue *queue, command *c) {
  tsr_status status = TSR_OK;
  char message[TSR_PLUGIN_MESSAGE_CAPACITY];
  message[0] = '\0';
  switch (c->kind) {
  case COMMAND_OP:
    status = cpu_run_op(queue, c, message, sizeof message);
    if (status != TSR_OK && message[0] == '\0')
      snprintf(message, sizeof message, "%s failed with status %d", tsr_plugin_op_name(c->op),
               (int)status);
    break;
  case COMMAND_COPY:
    cpu_copy_memory(queue->device->pool, c->copy_dst, c->copy_src, c->copy_bytes);
    break;
  case COMMAND_TIMESTAMP: {
    cpu_event *event = c->event;
    int64_t now = cpu_clock_ns();
    pthread_mutex_lock(&event->lock);
    event->nanoseconds = now;
    atomic_store_explicit(&event->done, true, memory_order_release);
    pthread_cond_broadcast(&event->reached);
    pthread_mutex_unlock(&event->lock);
    break;
  }
  case COMMAND_GATE:
    gate_pass(c->gate);
    break;
  }
  if (status != TSR_OK) {
    pthread_mutex_lock(&queue->lock);
    if (queue->error == TSR_OK) {
      queue->error = status;
      snprintf(queue->error_message, sizeof queue->error_message, "%s", message);
    }
    pthread_mutex_unlock(&queue->lock);
  }
}

/* Runs the listed commands in order on the calling thread, which set
 * `executing`, until the list is empty or `until` (when given) is reached;
 * the lock is held on entry and on return. The queue's GEMM memory is
 * installed for the time. */
static void run_commands(cpu_queue *queue, const cpu_event *until) {
  cpu_gemm_scratch_exchange(&queue->scratch);
  while (queue->head && !(until && atomic_load_explicit(&until->done, memory_order_acquire))) {
    command *c = queue->head;
    queue->head = c->next;
    if (!queue->head)
      queue->tail = NULL;
    atomic_fetch_sub_explicit(&queue->queued, 1, memory_order_relaxed);
    pthread_mutex_unlock(&queue->lock);
    execute_command(queue, c);
    cpu_command_free(c);
    pthread_mutex_lock(&queue->lock);
  }
  cpu_gemm_scratch_exchange(&queue->scratch);
  atomic_store_explicit(&queue->executing, false, memory_order_release);
  pthread_cond_broadcast(&queue->drained);
  /* Commands left behind (stopped at `until`) go on on the worker; one that
   * is stopping waits for this thread to finish. */
  if ((queue->head || queue->stopping) && queue->worker_parked)
    pthread_cond_signal(&queue->work_added);
}

/* Under the lock: commands wait and nobody runs them. */
static bool runnable(const cpu_queue *queue) {
  return queue->head && !atomic_load_explicit(&queue->executing, memory_order_relaxed);
}

static bool worker_has_work(const void *argument) {
  const cpu_queue *queue = argument;
  return atomic_load_explicit(&queue->queued, memory_order_acquire) > 0 &&
         !atomic_load_explicit(&queue->executing, memory_order_acquire);
}

static void *queue_main(void *argument) {
  cpu_queue *queue = argument;
  cpu_name_thread("tsr-cpu-queue");
  /* the worker polls for the next command only briefly: its CPU is the
   * pool's too */
  int64_t poll_ns = cpu_waiter_poll_ns(queue->device->plugin->poll_ns, true);
  bool ran = false;
  pthread_mutex_lock(&queue->lock);
  for (;;) {
    if (runnable(queue)) {
      atomic_store_explicit(&queue->executing, true, memory_order_relaxed);
      run_commands(queue, NULL);
      ran = true;
      continue;
    }
    if (queue->stopping && !queue->head && !atomic_load(&queue->executing))
      break;
    /* Poll only after running commands itself: more are likely to follow
     * (event, op, event). While another thread runs them, park at once
     * rather than take a CPU from it. */
    if (ran && !queue->stopping) {
      ran = false;
      pthread_mutex_unlock(&queue->lock);
      cpu_poll(worker_has_work, queue, poll_ns);
      pthread_mutex_lock(&queue->lock);
      continue;
    }
    queue->worker_parked = true;
    while (!runnable(queue) && !(queue->stopping && !atomic_load(&queue->executing)))
      pthread_cond_wait(&queue->work_added, &queue->lock);
    queue->worker_parked = false;
  }
  pthread_mutex_unlock(&queue->lock);
  return NULL;
}

void cpu_enqueue(cpu_queue *queue, command *c) {
  c->next = NULL;
  pthread_mutex_lock(&queue->lock);
  if (queue->tail)
    queue->tail->next = c;
  else
    queue->head = c;
  queue->tail = c;
  atomic_fetch_add_explicit(&queue->queued, 1, memory_order_release);
  if (queue->worker_parked)
    pthread_cond_signal(&queue->work_added);
  pthread_mutex_unlock(&queue->lock);
}

static bool executor_done(const void *argument) {
  return !atomic_load_explicit(&((const cpu_queue *)argument)->executing, memory_order_acquire);
}

/* Waits until nothing is listed or running. Runs the commands itself when
 * nobody runs them; polls, then parks, while another thread does. With
 * `until`, returns once that event is reached or another thread runs the
 * commands (the event's own wait follows). */
static void help_queue(cpu_queue *queue, const cpu_event *until) {
  pthread_mutex_lock(&queue->lock);
  for (;;) {
    if (until && atomic_load_explicit(&until->done, memory_order_acquire))
      break;
    if (runnable(queue)) {
      atomic_store_explicit(&queue->executing, true, memory_order_relaxed);
      run_commands(queue, until);
      continue;
    }
    if (!atomic_load_explicit(&queue->executing, memory_order_relaxed) || until)
      break; /* nothing listed, nothing running; or the event's wait follows */
    pthread_mutex_unlock(&queue->lock);
    /* (finish polls briefly even where the pool fills the cores: it waits
     * once for a batch, where an event waiter waits at each event) */
    cpu_poll(executor_done, queue, cpu_waiter_poll_ns(queue->device->plugin->poll_ns, true));
    pthread_mutex_lock(&queue->lock);
    while (atomic_load_explicit(&queue->executing, memory_order_relaxed))
      pthread_cond_wait(&queue->drained, &queue->lock);
  }
  pthread_mutex_unlock(&queue->lock);
}

void cpu_wait_idle(cpu_queue *queue) {
  help_queue(queue, NULL);
}

command *cpu_command_new(cpu_plugin *plugin, command_kind kind) {
  command *c = calloc(1, sizeof *c);
  if (!c)
    tsr_plugin_fail(&plugin->host, TSR_ERROR_OUT_OF_MEMORY, "cannot allocate a queue command");
  else
    c->kind = kind;
  return c;
}

tsr_status cpu_queue_create(void *handle, void **out) {
  cpu_device *device = handle;
  cpu_queue *queue = calloc(1, sizeof *queue);
  if (!queue)
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_OUT_OF_MEMORY,
                           "cannot allocate a queue");
  queue->device = device;
  tsr_plugin_faults_clear(queue->faults);
  atomic_init(&queue->queued, 0);
  atomic_init(&queue->executing, false);
  pthread_mutex_init(&queue->lock, NULL);
  pthread_cond_init(&queue->work_added, NULL);
  pthread_cond_init(&queue->drained, NULL);
  if (pthread_create(&queue->worker, NULL, queue_main, queue) != 0) {
    pthread_cond_destroy(&queue->drained);
    pthread_cond_destroy(&queue->work_added);
    pthread_mutex_destroy(&queue->lock);
    free(queue);
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_BACKEND,
                           "cannot start the queue's worker thread");
  }
  pthread_mutex_lock(&device->lock);
  queue->next_in_device = device->queues;
  device->queues = queue;
  pthread_mutex_unlock(&device->lock);
  *out = queue;
  return TSR_OK;
}

void cpu_queue_destroy(void *handle) {
  cpu_queue *queue = handle;
  if (!queue)
    return;
  pthread_mutex_lock(&queue->lock);
  queue->stopping = true; /* the worker drains the list before it stops */
  pthread_cond_signal(&queue->work_added);
  pthread_mutex_unlock(&queue->lock);
  pthread_join(queue->worker, NULL);
  cpu_gemm_scratch_free(&queue->scratch);

  cpu_device *device = queue->device;
  pthread_mutex_lock(&device->lock);
  for (cpu_queue **link = &device->queues; *link; link = &(*link)->next_in_device) {
    if (*link == queue) {
      *link = queue->next_in_device;
      break;
    }
  }
  pthread_mutex_unlock(&device->lock);
  pthread_cond_destroy(&queue->drained);
  pthread_cond_destroy(&queue->work_added);
  pthread_mutex_destroy(&queue->lock);
  free(queue);
}

/* A failure of a kernel comes first; then the first fault in device data
 * (tsr_plugin_fault_report's sentence, the one every plugin gives). Both are
 * reset, so each is reported once. */
tsr_status cpu_queue_finish(void *handle) {
  cpu_queue *queue = handle;
  cpu_wait_idle(queue);
  pthread_mutex_lock(&queue->lock);
  tsr_status status = queue->error;
  char message[sizeof queue->error_message];
  if (status != TSR_OK) /* nothing is copied or formatted on the usual path */
    memcpy(message, queue->error_message, sizeof message);
  queue->error = TSR_OK;
  queue->error_message[0] = '\0';
  /* idle: no kernel writes the words now (wait_idle's lock orders them) */
  int32_t faults[TSR_PLUGIN_FAULT_COUNT];
  bool faulted = false;
  for (int i = 0; i < TSR_PLUGIN_FAULT_COUNT; i++) {
    faults[i] = queue->faults[i];
    faulted |= faults[i] != TSR_PLUGIN_FAULT_NONE;
  }
  tsr_plugin_fault_context context = queue->fault_context;
  if (faulted)
    tsr_plugin_faults_clear(queue->faults);
  pthread_mutex_unlock(&queue->lock);
  if (status != TSR_OK)
    return tsr_plugin_fail(&queue->device->plugin->host, status, "%s", message);
  if (faulted)
    return tsr_plugin_fault_report(&queue->device->plugin->host, faults, &context);
  return TSR_OK;
}

/* ------------------------------------------------------------------------ */
/* Events                                                                    */
/* ------------------------------------------------------------------------ */

tsr_status cpu_event_record(void *handle, void **out) {
  cpu_queue *queue = handle;
  cpu_plugin *plugin = queue->device->plugin;
  cpu_event *event = calloc(1, sizeof *event);
  command *c = event ? cpu_command_new(plugin, COMMAND_TIMESTAMP) : NULL;
  if (!c) {
    free(event);
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_OUT_OF_MEMORY, "cannot allocate an event");
  }
  pthread_mutex_init(&event->lock, NULL);
  pthread_cond_init(&event->reached, NULL);
  event->plugin = plugin;
  event->queue = queue;
  atomic_init(&event->done, false);
  c->event = event;
  *out = event;
  cpu_enqueue(queue, c);
  return TSR_OK;
}

/* Returns the event's timestamp once its queue has reached it, running the
 * commands before it when the queue's worker is parked. A queue is
 * destroyed only once it has run everything, so one whose event is not
 * reached yet is alive. */
static bool event_reached(const void *argument) {
  return atomic_load_explicit(&((const cpu_event *)argument)->done, memory_order_acquire);
}

static int64_t wait_event(cpu_event *event) {
  if (!event_reached(event)) {
    help_queue(event->queue, event);
    cpu_poll(event_reached, event, event->plugin->waiter_poll_ns);
  }
  pthread_mutex_lock(&event->lock);
  while (!atomic_load_explicit(&event->done, memory_order_relaxed))
    pthread_cond_wait(&event->reached, &event->lock);
  int64_t nanoseconds = event->nanoseconds;
  pthread_mutex_unlock(&event->lock);
  return nanoseconds;
}

tsr_status cpu_event_wait(void *handle) {
  wait_event(handle);
  return TSR_OK;
}

tsr_status cpu_event_elapsed_ms(void *start, void *end, double *ms) {
  int64_t begin = wait_event(start);
  int64_t finish = wait_event(end);
  *ms = (double)(finish - begin) / 1e6;
  return TSR_OK;
}

void cpu_event_destroy(void *handle) {
  cpu_event *event = handle;
  if (!event)
    return;
  wait_event(event); /* its timestamp command still points at it until then */
  pthread_cond_destroy(&event->reached);
  pthread_mutex_destroy(&event->lock);
  free(event);
}

/* ------------------------------------------------------------------------ */
/* Several devices                                                           */
/* ------------------------------------------------------------------------ */

tsr_status cpu_queue_wait_event(void *queue, void *event) {
  /* A queue is in order; another queue's event is bridged by the core (a
   * command here that points at another queue's event would outlive it). */
  return ((const cpu_event *)event)->queue == queue ? TSR_OK : TSR_ERROR_UNSUPPORTED;
}

tsr_status cpu_queue_gate(void *handle, void **out) {
  cpu_queue *queue = handle;
  cpu_plugin *plugin = queue->device->plugin;
  cpu_gate *gate = calloc(1, sizeof *gate);
  command *c = gate ? cpu_command_new(plugin, COMMAND_GATE) : NULL;
  if (!c) {
    free(gate);
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_OUT_OF_MEMORY, "cannot allocate a gate");
  }
  pthread_mutex_init(&gate->lock, NULL);
  pthread_cond_init(&gate->opened_cond, NULL);
  atomic_init(&gate->opened, false);
  atomic_init(&gate->refs, 2);
  gate->plugin = plugin;
  c->gate = gate;
  *out = gate;
  cpu_enqueue(queue, c);
  return TSR_OK;
}

void cpu_gate_open(void *handle) {
  cpu_gate *gate = handle;
  pthread_mutex_lock(&gate->lock);
  atomic_store_explicit(&gate->opened, true, memory_order_release);
  pthread_cond_broadcast(&gate->opened_cond);
  pthread_mutex_unlock(&gate->lock);
  gate_unref(gate);
}
