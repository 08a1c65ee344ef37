/* SPDX-License-Identifier: Apache-2.0 */
/* What the CPU plugin's host-side files share: the plugin and device
 * (device.c), buffers (memory.c), queues, commands and events (queue.c), ops
 * (ops.c), and the entry points plugin.c's table holds. Not installed. */
#ifndef TESSERA_CPU_PLUGIN_H
#define TESSERA_CPU_PLUGIN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "configs.h"
#include "cpu_internal.h"
#include "tessera/plugin_helper.h"

#define CPU_STRINGIFY_(x) #x
#define CPU_STRINGIFY(x) CPU_STRINGIFY_(x)
#define CPU_PLUGIN_VERSION                                                                         \
  CPU_STRINGIFY(TSR_VERSION_MAJOR)                                                                 \
  "." CPU_STRINGIFY(TSR_VERSION_MINOR) "." CPU_STRINGIFY(TSR_VERSION_PATCH)

enum { CPU_BUFFER_ALIGNMENT = 64, CPU_MAX_THREADS = 4096 };

/* ------------------------------------------------------------------------ */
/* Objects                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct cpu_plugin {
  tsr_plugin_host host; /* named "cpu": every error sentence starts "cpu: " */
  int threads;
  int64_t poll_ns;        /* TESSERA_CPU_POLL_US: how long idle threads poll before they park */
  int64_t waiter_poll_ns; /* an event wait behind the queue's worker (park.h) */
  cpu_isa isa;
  cpu_identity identity;
} cpu_plugin;

struct cpu_queue;

typedef struct cpu_device {
  cpu_plugin *plugin;
  cpu_pool *pool;
  pthread_mutex_t lock; /* guards the queue list */
  struct cpu_queue *queues;
} cpu_device;

typedef struct cpu_event {
  pthread_mutex_t lock;
  pthread_cond_t reached;
  atomic_bool done;    /* set under the lock; polled without it */
  int64_t nanoseconds; /* CLOCK_MONOTONIC when the queue reached the event */
  cpu_plugin *plugin;
  struct cpu_queue *queue; /* read only while the event is not reached */
} cpu_event;

/* A gate (queue_gate): the queue's executing thread stops at it until
 * another thread opens it. Two references: the command's and the opener's. */
typedef struct cpu_gate {
  pthread_mutex_t lock;
  pthread_cond_t opened_cond;
  atomic_bool opened; /* set under the lock; polled without it */
  atomic_int refs;
  cpu_plugin *plugin;
} cpu_gate;

typedef enum command_kind {
  COMMAND_OP,
  COMMAND_COPY,
  COMMAND_TIMESTAMP,
  COMMAND_GATE
} command_kind;

typedef struct command {
  struct command *next;
  command_kind kind;
  /* COMMAND_OP */
  tsr_op op;
  const void *config; /* a config row of configs.c */
  /* copied (tsr_plugin_args_copy): the caller's may go away once op_run
   * returns */
  tsr_plugin_any_args args;
  int64_t *group_sizes; /* owned copy for grouped gemm */
  /* COMMAND_COPY */
  const char *copy_src;
  char *copy_dst;
  uint64_t copy_bytes;
  /* COMMAND_TIMESTAMP */
  cpu_event *event;
  /* COMMAND_GATE */
  cpu_gate *gate;
} command;

typedef struct cpu_queue {
  cpu_device *device;
  struct cpu_queue *next_in_device;
  pthread_t worker;
  pthread_mutex_t lock;      /* guards everything below but the atomics' reads */
  pthread_cond_t work_added; /* the worker parks on it */
  pthread_cond_t drained;    /* a thread waiting for another's commands parks on it */
  command *head, *tail;
  atomic_int queued; /* commands on the list: read without the lock while polling */
  /* A thread runs this queue's commands now: the worker, or one that waits
   * for the queue (cpu_wait_idle) and found the worker parked. Commands run
   * in order because only the thread that set this runs them. */
  atomic_bool executing;
  bool worker_parked;
  bool stopping;
  cpu_gemm_scratch scratch; /* GEMM memory kept for the thread that executes */
  tsr_status error;         /* first failure since the last finish */
  char error_message[TSR_PLUGIN_MESSAGE_CAPACITY];
  /* Faults in device data since the last finish (cpu_fault_record): written
   * by the executing thread and the pool while ops run, read and reset by
   * finish once the queue is idle. */
  int32_t faults[TSR_PLUGIN_FAULT_COUNT];
  tsr_plugin_fault_context fault_context;
} cpu_queue;

/* ---- device.c ---- */

tsr_status cpu_init(const tsr_host_services_v2 *services, void **out, char *reason,
                    size_t reason_capacity);
void cpu_shutdown(void *handle);
uint32_t cpu_device_count(void *handle);
tsr_status cpu_device_info(void *handle, uint32_t index, tsr_device_info *info);
tsr_status cpu_device_open(void *handle, uint32_t index, void **out);
void cpu_device_close(void *handle);

/* ---- memory.c ---- */

tsr_status cpu_buffer_alloc(void *handle, uint64_t bytes, void **out);
void cpu_buffer_free(void *handle, void *buffer_handle);
void *cpu_buffer_host_pointer(void *handle, void *buffer_handle);
tsr_status cpu_buffer_wrap(void *handle, int32_t kind, void *pointer, uint64_t bytes, void **out);
tsr_status cpu_buffer_export(void *buffer_handle, int32_t *kind, uint64_t *address);
tsr_status cpu_buffer_write(void *handle, void *buffer_handle, uint64_t offset, const void *src,
                            uint64_t bytes);
tsr_status cpu_buffer_read(void *handle, void *buffer_handle, uint64_t offset, void *dst,
                           uint64_t bytes);
tsr_status cpu_buffer_copy(void *handle, void *src_handle, uint64_t src_offset, void *dst_handle,
                           uint64_t dst_offset, uint64_t bytes);
/* What a COMMAND_COPY runs on the queue's worker (memmove semantics). */
void cpu_copy_memory(cpu_pool *pool, char *dst, const char *src, uint64_t bytes);

/* ---- queue.c ---- */

tsr_status cpu_queue_create(void *handle, void **out);
void cpu_queue_destroy(void *handle);
tsr_status cpu_queue_finish(void *handle);
tsr_status cpu_event_record(void *handle, void **out);
tsr_status cpu_event_wait(void *handle);
tsr_status cpu_event_elapsed_ms(void *start, void *end, double *ms);
void cpu_event_destroy(void *handle);
/* Several devices: one CPU device, so a wait for an event of another queue
 * is left to the core (TSR_ERROR_UNSUPPORTED), which gates the queue. */
tsr_status cpu_queue_wait_event(void *queue, void *event);
tsr_status cpu_queue_gate(void *queue, void **gate);
void cpu_gate_open(void *gate);
/* A zeroed command of `kind` (NULL, with the error set, when out of memory). */
command *cpu_command_new(cpu_plugin *plugin, command_kind kind);
void cpu_command_free(command *c);
/* Appends c to the queue; its worker (or a thread in cpu_wait_idle) runs and
 * frees it. */
void cpu_enqueue(cpu_queue *queue, command *c);
/* Returns when the queue has run everything given to it: runs the commands
 * on the calling thread when the worker is not running them already. */
void cpu_wait_idle(cpu_queue *queue);

/* ---- ops.c ---- */

tsr_status cpu_op_supported(void *handle, tsr_op op, const void *args);
tsr_status cpu_op_variants_entry(void *handle, tsr_op op, const void *args,
                                 tsr_plugin_variant_list *out);
tsr_status cpu_op_select(void *handle, tsr_op op, const void *args, const char *variant,
                         tsr_plugin_selection *out);
tsr_status cpu_op_run(void *handle, tsr_op op, const void *args, const void *config);
/* Runs a COMMAND_OP's kernel on the queue's worker; a failure writes its
 * sentence into `message`, a fault in device data lands in the queue's
 * fault words. */
tsr_status cpu_run_op(cpu_queue *queue, command *c, char *message, size_t capacity);

#endif /* TESSERA_CPU_PLUGIN_H */
