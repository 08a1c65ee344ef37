/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU plugin's queues: each is served by a worker thread that runs its
 * commands (ops, copies, timestamps) in order, spinning briefly before it
 * sleeps; events are CLOCK_MONOTONIC stamps taken when the queue reaches them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_plugin.h"

/* ------------------------------------------------------------------------ */
/* Queues                                                                    */
/* ------------------------------------------------------------------------ */

static int64_t monotonic_nanoseconds(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

void cpu_command_free(command *c) {
  free(c->group_sizes);
  free(c);
}

/* Runs one command on the queue's worker; a failure is kept for the next
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
    int64_t now = monotonic_nanoseconds();
    pthread_mutex_lock(&event->lock);
    event->nanoseconds = now;
    event->done = true;
    pthread_cond_broadcast(&event->reached);
    pthread_mutex_unlock(&event->lock);
    break;
  }
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

/* An idle queue worker spins this long before it sleeps: commands queued
 * back to back (event, op, event) then start without a thread wake-up,
 * which costs tens of microseconds in a virtual machine and would land
 * inside the events' timing. */
enum { QUEUE_SPIN_NS = 200000 };

static void spin_until_queued(cpu_queue *queue) {
  int64_t deadline = monotonic_nanoseconds() + QUEUE_SPIN_NS;
  for (int i = 0; atomic_load_explicit(&queue->queued, memory_order_acquire) == 0; i++) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if ((i & 63) == 63 && monotonic_nanoseconds() > deadline)
      return;
  }
}

static void *queue_main(void *argument) {
  cpu_queue *queue = argument;
  pthread_mutex_lock(&queue->lock);
  for (;;) {
    if (!queue->head && !queue->stopping) {
      pthread_mutex_unlock(&queue->lock);
      spin_until_queued(queue);
      pthread_mutex_lock(&queue->lock);
    }
    while (!queue->head && !queue->stopping)
      pthread_cond_wait(&queue->work_added, &queue->lock);
    command *c = queue->head;
    if (!c)
      break; /* stopping and drained */
    queue->head = c->next;
    if (!queue->head)
      queue->tail = NULL;
    atomic_fetch_sub_explicit(&queue->queued, 1, memory_order_relaxed);
    queue->running = true;
    pthread_mutex_unlock(&queue->lock);

    execute_command(queue, c);
    cpu_command_free(c);

    pthread_mutex_lock(&queue->lock);
    queue->running = false;
    if (!queue->head)
      pthread_cond_broadcast(&queue->drained);
  }
  pthread_mutex_unlock(&queue->lock);
  cpu_gemm_release_thread_workspace();
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
  pthread_cond_signal(&queue->work_added);
  pthread_mutex_unlock(&queue->lock);
}

void cpu_wait_idle(cpu_queue *queue) {
  pthread_mutex_lock(&queue->lock);
  while (queue->head || queue->running)
    pthread_cond_wait(&queue->drained, &queue->lock);
  pthread_mutex_unlock(&queue->lock);
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
  c->event = event;
  *out = event;
  cpu_enqueue(queue, c);
  return TSR_OK;
}

/* Returns the event's timestamp once its queue has reached it. */
static int64_t wait_event(cpu_event *event) {
  pthread_mutex_lock(&event->lock);
  while (!event->done)
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
