/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU plugin's ABI table (tsr_plugin_v1): one device (the host), buffers
 * in host memory, in-order queues each served by a worker thread, events
 * that record CLOCK_MONOTONIC timestamps, and op entry points that queue the
 * kernels of kernels/. Kernels run on the queue's worker and spread their work
 * over the device's thread pool. */
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <emmintrin.h>
#include <xmmintrin.h>
#endif

#include "configs.h"
#include "cpu_internal.h"

#define CPU_STRINGIFY_(x) #x
#define CPU_STRINGIFY(x) CPU_STRINGIFY_(x)
#define CPU_PLUGIN_VERSION                                                                         \
  CPU_STRINGIFY(TSR_VERSION_MAJOR)                                                                 \
  "." CPU_STRINGIFY(TSR_VERSION_MINOR) "." CPU_STRINGIFY(TSR_VERSION_PATCH)

enum { CPU_BUFFER_ALIGNMENT = 64, CPU_MAX_THREADS = 4096, CPU_MESSAGE_CAPACITY = 512 };

/* ------------------------------------------------------------------------ */
/* Objects                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct cpu_plugin {
  tsr_host_services host;
  int threads;
  cpu_isa isa;
  char vendor[64];
  char name[256];
  char arch[64];
  uint64_t memory_bytes;
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
  bool done;
  int64_t nanoseconds; /* CLOCK_MONOTONIC when the queue reached the event */
  cpu_plugin *plugin;
} cpu_event;

typedef enum command_kind { COMMAND_OP, COMMAND_COPY, COMMAND_TIMESTAMP } command_kind;

/* Argument structs are copied, so the caller's may go away once op_run
 * returns. */
typedef union op_args {
  tsr_gemm_args gemm;
  tsr_grouped_gemm_args grouped_gemm;
  tsr_attention_args attention;
  tsr_rmsnorm_args rmsnorm;
  tsr_layernorm_args layernorm;
  tsr_softmax_args softmax;
  tsr_rope_args rope;
  tsr_swiglu_args swiglu;
  tsr_gelu_args gelu;
  tsr_cross_entropy_args cross_entropy;
} op_args;

typedef struct command {
  struct command *next;
  command_kind kind;
  /* COMMAND_OP */
  tsr_op op;
  const void *config;
  op_args args;
  int64_t *group_sizes; /* owned copy for grouped gemm */
  /* COMMAND_COPY */
  const char *copy_src;
  char *copy_dst;
  uint64_t copy_bytes;
  /* COMMAND_TIMESTAMP */
  cpu_event *event;
} command;

typedef struct cpu_queue {
  cpu_device *device;
  struct cpu_queue *next_in_device;
  pthread_t worker;
  pthread_mutex_t lock; /* guards everything below */
  pthread_cond_t work_added;
  pthread_cond_t drained;
  command *head, *tail;
  atomic_int queued; /* commands on the list: read without the lock while spinning */
  bool running;      /* the worker is executing a command it has taken off the list */
  bool stopping;
  tsr_status error; /* first failure since the last finish */
  char error_message[CPU_MESSAGE_CAPACITY];
} cpu_queue;

/* ------------------------------------------------------------------------ */
/* Host services                                                             */
/* ------------------------------------------------------------------------ */

static void plugin_log(const cpu_plugin *plugin, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void plugin_log(const cpu_plugin *plugin, int level, const char *fmt, ...) {
  if (!plugin->host.log)
    return;
  char message[CPU_MESSAGE_CAPACITY];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  plugin->host.log(plugin->host.host_handle, level, "%s", message);
}

static void plugin_error(const cpu_plugin *plugin, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void plugin_error(const cpu_plugin *plugin, const char *fmt, ...) {
  if (!plugin->host.set_error)
    return;
  char message[CPU_MESSAGE_CAPACITY];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  /* Named, as every plugin's sentences are (docs/PLUGINS.md, R23). */
  plugin->host.set_error(plugin->host.host_handle, "cpu: %s", message);
}

static const char *plugin_env(const cpu_plugin *plugin, const char *name) {
  return plugin->host.get_env ? plugin->host.get_env(name) : NULL;
}

static const char *op_name(tsr_op op) {
  static const char *const names[TSR_OP_COUNT_] = {
      "gemm",    "grouped_gemm", "attention", "rmsnorm", "layernorm",
      "softmax", "rope",         "swiglu",    "gelu",    "cross_entropy"};
  return (int)op >= 0 && op < TSR_OP_COUNT_ ? names[op] : "unknown op";
}

static bool op_known(tsr_op op) {
  return (int)op >= 0 && op < TSR_OP_COUNT_;
}

/* ------------------------------------------------------------------------ */
/* Machine description                                                       */
/* ------------------------------------------------------------------------ */

static void trim_copy(char *dst, size_t capacity, const char *src) {
  while (*src == ' ' || *src == '\t')
    src++;
  size_t length = strlen(src);
  while (length > 0 && (src[length - 1] == ' ' || src[length - 1] == '\t' ||
                        src[length - 1] == '\n' || src[length - 1] == '\r'))
    length--;
  if (length >= capacity)
    length = capacity - 1;
  memcpy(dst, src, length);
  dst[length] = '\0';
}

/* "model name : ..." from /proc/cpuinfo; 0 when there is none. */
static int cpuinfo_model_name(char *dst, size_t capacity) {
  FILE *file = fopen("/proc/cpuinfo", "r");
  if (!file)
    return 0;
  char line[512];
  int found = 0;
  while (!found && fgets(line, sizeof line, file)) {
    if (strncmp(line, "model name", 10) != 0)
      continue;
    const char *colon = strchr(line, ':');
    if (colon) {
      trim_copy(dst, capacity, colon + 1);
      found = dst[0] != '\0';
    }
  }
  fclose(file);
  return found;
}

static void describe_machine(cpu_plugin *plugin, cpu_isa isa) {
  snprintf(plugin->vendor, sizeof plugin->vendor, "unknown");
  plugin->name[0] = '\0';
#if defined(__x86_64__) || defined(__i386__)
  unsigned int regs[4];
  if (__get_cpuid(0, &regs[0], &regs[1], &regs[2], &regs[3])) {
    char vendor[13];
    memcpy(vendor, &regs[1], 4); /* ebx, edx, ecx spell it in that order */
    memcpy(vendor + 4, &regs[3], 4);
    memcpy(vendor + 8, &regs[2], 4);
    vendor[12] = '\0';
    trim_copy(plugin->vendor, sizeof plugin->vendor, vendor);
  }
  if (__get_cpuid(0x80000000u, &regs[0], &regs[1], &regs[2], &regs[3]) && regs[0] >= 0x80000004u) {
    char brand[49];
    for (unsigned int i = 0; i < 3; i++) {
      __get_cpuid(0x80000002u + i, &regs[0], &regs[1], &regs[2], &regs[3]);
      memcpy(brand + 16 * i, regs, 16);
    }
    brand[48] = '\0';
    trim_copy(plugin->name, sizeof plugin->name, brand);
  }
#endif
  if (plugin->name[0] == '\0' && !cpuinfo_model_name(plugin->name, sizeof plugin->name))
    snprintf(plugin->name, sizeof plugin->name, "CPU");

  struct utsname machine;
  const char *base = uname(&machine) == 0 ? machine.machine : "unknown";
#if defined(__x86_64__)
  base = "x86_64";
#endif
  /* The instruction set the kernels use is part of the architecture, so
   * tuning rows of an AVX2 run are not applied to an AVX-512 run. */
  if (isa == CPU_ISA_GENERIC)
    snprintf(plugin->arch, sizeof plugin->arch, "%s", base);
  else
    snprintf(plugin->arch, sizeof plugin->arch, "%s-%s", base, cpu_isa_name(isa));

  long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  plugin->memory_bytes = pages > 0 && page_size > 0 ? (uint64_t)pages * (uint64_t)page_size : 0;
}

static int available_cpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int count = CPU_COUNT(&set);
    if (count > 0)
      return count;
  }
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? (int)online : 1;
}

/* TESSERA_CPU_THREADS, else the CPUs this process may run on. */
static int choose_threads(const cpu_plugin *plugin) {
  int threads = available_cpus();
  const char *text = plugin_env(plugin, "TESSERA_CPU_THREADS");
  if (text && *text) {
    char *end;
    long value = strtol(text, &end, 10);
    if (*end == '\0' && value >= 1 && value <= CPU_MAX_THREADS)
      threads = (int)value;
    else
      plugin_log(plugin, TSR_LOG_WARN,
                 "TESSERA_CPU_THREADS = '%s' is not a thread count in 1..%d; using %d", text,
                 CPU_MAX_THREADS, threads);
  }
  return threads;
}

/* TESSERA_CPU_ISA lowers the instruction-set level (to compare or test
 * kernels); a level this machine lacks, or an unknown name, is refused with
 * a log line and the detected level is used. */
static cpu_isa choose_isa(const cpu_plugin *plugin) {
  char message[CPU_MESSAGE_CAPACITY];
  cpu_isa isa = cpu_isa_choose(plugin_env(plugin, "TESSERA_CPU_ISA"), cpu_isa_detect(), message,
                               sizeof message);
  if (message[0])
    plugin_log(plugin, TSR_LOG_WARN, "%s", message);
  return isa;
}

/* ------------------------------------------------------------------------ */
/* Plugin and device                                                         */
/* ------------------------------------------------------------------------ */

static tsr_status cpu_init(const tsr_host_services *host, void **out, char *reason,
                           size_t reason_capacity) {
  if (!host || !out) {
    if (reason && reason_capacity > 0)
      snprintf(reason, reason_capacity, "cpu plugin: init needs host services and an output");
    return TSR_ERROR_NULL_ARGUMENT;
  }
  cpu_plugin *plugin = calloc(1, sizeof *plugin);
  if (!plugin) {
    if (reason && reason_capacity > 0)
      snprintf(reason, reason_capacity, "cpu plugin: out of memory");
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  /* An older core may pass a shorter table: later fields stay NULL. */
  size_t size = host->struct_size < sizeof plugin->host ? host->struct_size : sizeof plugin->host;
  memcpy(&plugin->host, host, size);

  cpu_isa isa = choose_isa(plugin);
  cpu_isa_set_active(isa);
  plugin->isa = isa;
  plugin->threads = choose_threads(plugin);
  describe_machine(plugin, isa);
  plugin_log(plugin, TSR_LOG_DEBUG, "cpu: %s (%s), %d threads, %s kernels", plugin->name,
             plugin->vendor, plugin->threads, cpu_isa_name(isa));
  *out = plugin;
  return TSR_OK;
}

static void cpu_shutdown(void *handle) {
  free(handle);
}

static uint32_t cpu_device_count(void *handle) {
  (void)handle;
  return 1;
}

static tsr_status cpu_device_info(void *handle, uint32_t index, tsr_device_info *info) {
  cpu_plugin *plugin = handle;
  if (index != 0) {
    plugin_error(plugin, "the cpu plugin has one device, not index %u", index);
    return TSR_ERROR_NOT_FOUND;
  }
  info->type = TSR_DEVICE_CPU;
  snprintf(info->vendor, sizeof info->vendor, "%s", plugin->vendor);
  snprintf(info->name, sizeof info->name, "%s", plugin->name);
  snprintf(info->arch, sizeof info->arch, "%s", plugin->arch);
  snprintf(info->physical_id, sizeof info->physical_id, "cpu0");
  snprintf(info->driver_version, sizeof info->driver_version, "%s", CPU_PLUGIN_VERSION);
  info->memory_bytes = plugin->memory_bytes;
  info->compute_units = (uint32_t)plugin->threads;
  info->dtype_mask = (1u << TSR_DTYPE_F32) | (1u << TSR_DTYPE_F16) | (1u << TSR_DTYPE_BF16) |
                     (1u << TSR_DTYPE_I32);
  info->op_mask = (1u << TSR_OP_COUNT_) - 1u;
  info->host_visible = 1;
  cpu_machine_describe(plugin->isa, plugin->threads, info->details, sizeof info->details);
  return TSR_OK;
}

static tsr_status cpu_device_open(void *handle, uint32_t index, void **out) {
  cpu_plugin *plugin = handle;
  if (index != 0) {
    plugin_error(plugin, "the cpu plugin has one device, not index %u", index);
    return TSR_ERROR_NOT_FOUND;
  }
  cpu_device *device = calloc(1, sizeof *device);
  if (!device) {
    plugin_error(plugin, "cannot allocate the cpu device");
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  device->plugin = plugin;
  device->pool = cpu_pool_create(plugin->threads);
  if (!device->pool) {
    free(device);
    plugin_error(plugin, "cannot create the cpu thread pool");
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  if (cpu_pool_threads(device->pool) < plugin->threads)
    plugin_log(plugin, TSR_LOG_WARN, "cpu: started %d of %d threads",
               cpu_pool_threads(device->pool), plugin->threads);
  pthread_mutex_init(&device->lock, NULL);
  *out = device;
  return TSR_OK;
}

static void cpu_device_close(void *handle) {
  cpu_device *device = handle;
  if (!device)
    return;
  cpu_pool_destroy(device->pool);
  pthread_mutex_destroy(&device->lock);
  free(device);
}

/* ------------------------------------------------------------------------ */
/* Queues                                                                    */
/* ------------------------------------------------------------------------ */

static int64_t monotonic_nanoseconds(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

static tsr_status run_op(cpu_device *device, command *c, char *message, size_t capacity) {
  cpu_exec exec = {device->pool, message, capacity};
  switch (c->op) {
  case TSR_OP_GEMM:
    return cpu_gemm_run(&exec, &c->args.gemm, c->config);
  case TSR_OP_GROUPED_GEMM:
    return cpu_grouped_gemm_run(&exec, &c->args.grouped_gemm, c->config);
  case TSR_OP_ATTENTION:
    return cpu_attention_run(&exec, &c->args.attention, c->config);
  case TSR_OP_RMSNORM:
    return cpu_rmsnorm_run(&exec, &c->args.rmsnorm);
  case TSR_OP_LAYERNORM:
    return cpu_layernorm_run(&exec, &c->args.layernorm);
  case TSR_OP_SOFTMAX:
    return cpu_softmax_run(&exec, &c->args.softmax);
  case TSR_OP_ROPE:
    return cpu_rope_run(&exec, &c->args.rope);
  case TSR_OP_SWIGLU:
    return cpu_swiglu_run(&exec, &c->args.swiglu);
  case TSR_OP_GELU:
    return cpu_gelu_run(&exec, &c->args.gelu);
  case TSR_OP_CROSS_ENTROPY:
    return cpu_cross_entropy_run(&exec, &c->args.cross_entropy);
  default:
    snprintf(message, capacity, "cpu: op %d is unknown", (int)c->op);
    return TSR_ERROR_UNSUPPORTED;
  }
}

/* ------------------------------------------------------------------------ */
/* Copies                                                                    */
/* ------------------------------------------------------------------------ */

/* Below this a copy runs on the queue's thread with memcpy; above it the
 * pool's threads take equal parts. */
enum { COPY_PARALLEL_BYTES = 1 << 20 };
/* From this size the destination would not stay in the caches anyway, so
 * non-temporal stores skip reading its lines first (read-for-ownership). */
enum { COPY_STREAMING_BYTES = 8 << 20 };

#if defined(__x86_64__)
/* Non-temporal copy of whole 64-byte lines to a 64-byte-aligned dst, as two
 * interleaved sequential streams (more reads in flight than one), with
 * software prefetch ahead of each. */
static void copy_lines_streaming(char *dst, const char *src, size_t lines) {
  size_t half = lines / 2;
  const size_t ahead = 4096;
  for (size_t i = 0; i < half; i++) {
    for (int stream = 0; stream < 2; stream++) {
      size_t offset = (i + (size_t)stream * half) * 64;
      const char *s = src + offset;
      __m128i *d = (__m128i *)(void *)(dst + offset);
      _mm_prefetch(s + ahead, _MM_HINT_T0);
      __m128i x0 = _mm_loadu_si128((const __m128i *)(const void *)s);
      __m128i x1 = _mm_loadu_si128((const __m128i *)(const void *)(s + 16));
      __m128i x2 = _mm_loadu_si128((const __m128i *)(const void *)(s + 32));
      __m128i x3 = _mm_loadu_si128((const __m128i *)(const void *)(s + 48));
      _mm_stream_si128(d, x0);
      _mm_stream_si128(d + 1, x1);
      _mm_stream_si128(d + 2, x2);
      _mm_stream_si128(d + 3, x3);
    }
  }
  if (lines % 2)
    memcpy(dst + (lines - 1) * 64, src + (lines - 1) * 64, 64);
  _mm_sfence(); /* streaming stores are weakly ordered: finish them here */
}
#endif

typedef struct copy_job {
  char *dst;
  const char *src;
  uint64_t bytes;
  bool streaming;
} copy_job;

static void copy_part(void *context, int64_t t, int64_t parts, int worker) {
  const copy_job *job = context;
  (void)worker;
  /* Part boundaries on 4 KiB multiples of the destination. */
  uint64_t pages = (job->bytes + 4095) / 4096;
  uint64_t begin = pages * (uint64_t)t / (uint64_t)parts * 4096;
  uint64_t end = pages * (uint64_t)(t + 1) / (uint64_t)parts * 4096;
  end = end < job->bytes ? end : job->bytes;
  if (begin >= end)
    return;
  char *dst = job->dst + begin;
  const char *src = job->src + begin;
  size_t size = (size_t)(end - begin);
#if defined(__x86_64__)
  if (job->streaming) {
    size_t head = (size_t)((64 - ((uintptr_t)dst & 63)) & 63);
    head = head < size ? head : size;
    memcpy(dst, src, head);
    size_t lines = (size - head) / 64;
    copy_lines_streaming(dst + head, src + head, lines);
    size_t done = head + lines * 64;
    memcpy(dst + done, src + done, size - done);
    return;
  }
#endif
  memcpy(dst, src, size);
}

/* memmove semantics; large non-overlapping copies are split over the pool's
 * threads (one core alone cannot keep enough reads in flight to reach the
 * memory bandwidth). */
static void copy_memory(cpu_pool *pool, char *dst, const char *src, uint64_t bytes) {
  bool overlap = dst < src + bytes && src < dst + bytes;
  int threads = cpu_pool_threads(pool);
  if (overlap || bytes < COPY_PARALLEL_BYTES || threads < 2) {
    memmove(dst, src, (size_t)bytes);
    return;
  }
  copy_job job = {dst, src, bytes, bytes >= COPY_STREAMING_BYTES};
  cpu_pool_run_threads(pool, threads, copy_part, &job);
}

static void free_command(command *c) {
  free(c->group_sizes);
  free(c);
}

/* Runs one command on the queue's worker; a failure is kept for the next
 * queue_finish (the first one wins). */
static void execute_command(cpu_queue *queue, command *c) {
  tsr_status status = TSR_OK;
  char message[CPU_MESSAGE_CAPACITY] = "";
  switch (c->kind) {
  case COMMAND_OP:
    status = run_op(queue->device, c, message, sizeof message);
    if (status != TSR_OK && message[0] == '\0')
      snprintf(message, sizeof message, "cpu: %s failed with status %d", op_name(c->op),
               (int)status);
    break;
  case COMMAND_COPY:
    copy_memory(queue->device->pool, c->copy_dst, c->copy_src, c->copy_bytes);
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
    free_command(c);

    pthread_mutex_lock(&queue->lock);
    queue->running = false;
    if (!queue->head)
      pthread_cond_broadcast(&queue->drained);
  }
  pthread_mutex_unlock(&queue->lock);
  cpu_gemm_release_thread_workspace();
  return NULL;
}

static void enqueue(cpu_queue *queue, command *c) {
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

static void wait_idle(cpu_queue *queue) {
  pthread_mutex_lock(&queue->lock);
  while (queue->head || queue->running)
    pthread_cond_wait(&queue->drained, &queue->lock);
  pthread_mutex_unlock(&queue->lock);
}

static command *new_command(cpu_plugin *plugin, command_kind kind) {
  command *c = calloc(1, sizeof *c);
  if (!c)
    plugin_error(plugin, "cannot allocate a queue command");
  else
    c->kind = kind;
  return c;
}

static tsr_status cpu_queue_create(void *handle, void **out) {
  cpu_device *device = handle;
  cpu_queue *queue = calloc(1, sizeof *queue);
  if (!queue) {
    plugin_error(device->plugin, "cannot allocate a queue");
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  queue->device = device;
  atomic_init(&queue->queued, 0);
  pthread_mutex_init(&queue->lock, NULL);
  pthread_cond_init(&queue->work_added, NULL);
  pthread_cond_init(&queue->drained, NULL);
  if (pthread_create(&queue->worker, NULL, queue_main, queue) != 0) {
    pthread_cond_destroy(&queue->drained);
    pthread_cond_destroy(&queue->work_added);
    pthread_mutex_destroy(&queue->lock);
    free(queue);
    plugin_error(device->plugin, "cannot start the queue's worker thread");
    return TSR_ERROR_BACKEND;
  }
  pthread_mutex_lock(&device->lock);
  queue->next_in_device = device->queues;
  device->queues = queue;
  pthread_mutex_unlock(&device->lock);
  *out = queue;
  return TSR_OK;
}

static void cpu_queue_destroy(void *handle) {
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

static tsr_status cpu_queue_finish(void *handle) {
  cpu_queue *queue = handle;
  wait_idle(queue);
  pthread_mutex_lock(&queue->lock);
  tsr_status status = queue->error;
  char message[CPU_MESSAGE_CAPACITY];
  snprintf(message, sizeof message, "%s", queue->error_message);
  queue->error = TSR_OK;
  queue->error_message[0] = '\0';
  pthread_mutex_unlock(&queue->lock);
  if (status != TSR_OK)
    plugin_error(queue->device->plugin, "%s", message);
  return status;
}

/* ------------------------------------------------------------------------ */
/* Buffers                                                                   */
/* ------------------------------------------------------------------------ */

/* Buffers from this size are aligned to 2 MiB and offered transparent huge
 * pages: a streaming kernel then takes one TLB miss per 2 MiB, not per 4 KiB. */
enum { CPU_HUGE_PAGE_BYTES = 2 << 20, CPU_HUGE_BUFFER_MIN_BYTES = 8 << 20 };

static tsr_status cpu_buffer_alloc(void *handle, uint64_t bytes, void **out) {
  cpu_device *device = handle;
  uint64_t alignment =
      bytes >= CPU_HUGE_BUFFER_MIN_BYTES ? CPU_HUGE_PAGE_BYTES : CPU_BUFFER_ALIGNMENT;
  uint64_t rounded = (bytes + alignment - 1) / alignment * alignment;
  if (rounded == 0)
    rounded = alignment;
  cpu_buffer *buffer = malloc(sizeof *buffer);
  void *data = rounded >= bytes && (uint64_t)(size_t)rounded == rounded
                   ? aligned_alloc((size_t)alignment, (size_t)rounded)
                   : NULL;
  if (!buffer || !data) {
    free(buffer);
    free(data);
    plugin_error(device->plugin, "cannot allocate %llu bytes of host memory",
                 (unsigned long long)bytes);
    return TSR_ERROR_OUT_OF_MEMORY;
  }
#if defined(MADV_HUGEPAGE)
  if (alignment == CPU_HUGE_PAGE_BYTES)
    madvise(data, (size_t)rounded, MADV_HUGEPAGE); /* advice only: failure changes nothing */
#endif
  buffer->data = data;
  buffer->bytes = bytes;
  *out = buffer;
  return TSR_OK;
}

/* The core has waited for every queue that was given work on the buffer
 * (plugin rule: buffer_free comes after that work), so it goes at once. */
static void cpu_buffer_free(void *handle, void *buffer_handle) {
  (void)handle;
  cpu_buffer *buffer = buffer_handle;
  if (!buffer)
    return;
  free(buffer->data);
  free(buffer);
}

static void *cpu_buffer_host_pointer(void *handle, void *buffer_handle) {
  (void)handle;
  return ((cpu_buffer *)buffer_handle)->data;
}

static bool check_range(const cpu_plugin *plugin, const char *what, const cpu_buffer *buffer,
                        uint64_t offset, uint64_t bytes) {
  if (offset <= buffer->bytes && bytes <= buffer->bytes - offset)
    return true;
  plugin_error(plugin, "%s of %llu bytes at offset %llu passes the end of a %llu-byte buffer", what,
               (unsigned long long)bytes, (unsigned long long)offset,
               (unsigned long long)buffer->bytes);
  return false;
}

static tsr_status cpu_buffer_write(void *handle, void *buffer_handle, uint64_t offset,
                                   const void *src, uint64_t bytes) {
  cpu_queue *queue = handle;
  cpu_buffer *buffer = buffer_handle;
  if (!check_range(queue->device->plugin, "write", buffer, offset, bytes))
    return TSR_ERROR_OUT_OF_BOUNDS;
  wait_idle(queue);
  if (bytes > 0)
    memcpy((char *)buffer->data + offset, src, (size_t)bytes);
  return TSR_OK;
}

static tsr_status cpu_buffer_read(void *handle, void *buffer_handle, uint64_t offset, void *dst,
                                  uint64_t bytes) {
  cpu_queue *queue = handle;
  cpu_buffer *buffer = buffer_handle;
  if (!check_range(queue->device->plugin, "read", buffer, offset, bytes))
    return TSR_ERROR_OUT_OF_BOUNDS;
  wait_idle(queue);
  if (bytes > 0)
    memcpy(dst, (const char *)buffer->data + offset, (size_t)bytes);
  return TSR_OK;
}

static tsr_status cpu_buffer_copy(void *handle, void *src_handle, uint64_t src_offset,
                                  void *dst_handle, uint64_t dst_offset, uint64_t bytes) {
  cpu_queue *queue = handle;
  cpu_plugin *plugin = queue->device->plugin;
  cpu_buffer *src = src_handle, *dst = dst_handle;
  if (!check_range(plugin, "copy source", src, src_offset, bytes) ||
      !check_range(plugin, "copy destination", dst, dst_offset, bytes))
    return TSR_ERROR_OUT_OF_BOUNDS;
  if (bytes == 0)
    return TSR_OK;
  command *c = new_command(plugin, COMMAND_COPY);
  if (!c)
    return TSR_ERROR_OUT_OF_MEMORY;
  c->copy_src = (const char *)src->data + src_offset;
  c->copy_dst = (char *)dst->data + dst_offset;
  c->copy_bytes = bytes;
  enqueue(queue, c);
  return TSR_OK;
}

/* ------------------------------------------------------------------------ */
/* Events                                                                    */
/* ------------------------------------------------------------------------ */

static tsr_status cpu_event_record(void *handle, void **out) {
  cpu_queue *queue = handle;
  cpu_plugin *plugin = queue->device->plugin;
  cpu_event *event = calloc(1, sizeof *event);
  command *c = event ? new_command(plugin, COMMAND_TIMESTAMP) : NULL;
  if (!c) {
    free(event);
    plugin_error(plugin, "cannot allocate an event");
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  pthread_mutex_init(&event->lock, NULL);
  pthread_cond_init(&event->reached, NULL);
  event->plugin = plugin;
  c->event = event;
  *out = event;
  enqueue(queue, c);
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

static tsr_status cpu_event_wait(void *handle) {
  wait_event(handle);
  return TSR_OK;
}

static tsr_status cpu_event_elapsed_ms(void *start, void *end, double *ms) {
  int64_t begin = wait_event(start);
  int64_t finish = wait_event(end);
  *ms = (double)(finish - begin) / 1e6;
  return TSR_OK;
}

static void cpu_event_destroy(void *handle) {
  cpu_event *event = handle;
  if (!event)
    return;
  wait_event(event); /* its timestamp command still points at it until then */
  pthread_cond_destroy(&event->reached);
  pthread_mutex_destroy(&event->lock);
  free(event);
}

/* ------------------------------------------------------------------------ */
/* Ops                                                                       */
/* ------------------------------------------------------------------------ */

/* The tensor whose dtype decides whether the CPU kernels can run an op. */
static const tsr_plugin_tensor *op_data_tensor(tsr_op op, const void *args) {
  switch (op) {
  case TSR_OP_GEMM:
    return &((const tsr_gemm_args *)args)->a;
  case TSR_OP_GROUPED_GEMM:
    return &((const tsr_grouped_gemm_args *)args)->a;
  case TSR_OP_ATTENTION:
    return &((const tsr_attention_args *)args)->q;
  case TSR_OP_RMSNORM:
    return &((const tsr_rmsnorm_args *)args)->x;
  case TSR_OP_LAYERNORM:
    return &((const tsr_layernorm_args *)args)->x;
  case TSR_OP_SOFTMAX:
    return &((const tsr_softmax_args *)args)->x;
  case TSR_OP_ROPE:
    return &((const tsr_rope_args *)args)->x;
  case TSR_OP_SWIGLU:
    return &((const tsr_swiglu_args *)args)->gate;
  case TSR_OP_GELU:
    return &((const tsr_gelu_args *)args)->x;
  case TSR_OP_CROSS_ENTROPY:
    return &((const tsr_cross_entropy_args *)args)->logits;
  default:
    return NULL;
  }
}

static tsr_status cpu_op_supported(void *handle, tsr_op op, const void *args) {
  cpu_device *device = handle;
  if (!op_known(op)) {
    plugin_error(device->plugin, "op %d is unknown to the cpu plugin", (int)op);
    return TSR_ERROR_UNSUPPORTED;
  }
  /* Every op runs for f32, f16 and bf16; tf32 compute only permits rounding,
   * so strict f32 products satisfy it. */
  int32_t dtype = op_data_tensor(op, args)->dtype;
  if (dtype != TSR_DTYPE_F32 && dtype != TSR_DTYPE_F16 && dtype != TSR_DTYPE_BF16) {
    plugin_error(device->plugin, "the cpu plugin runs %s on f32, f16 and bf16, not dtype %d",
                 op_name(op), (int)dtype);
    return TSR_ERROR_UNSUPPORTED;
  }
  return TSR_OK;
}

static tsr_status cpu_op_variants_entry(void *handle, tsr_op op, const void *args,
                                        tsr_plugin_variant_list *out) {
  cpu_device *device = handle;
  /* The list is filled in full here and copied as far as the caller's
   * struct_size reaches, so a core with a shorter list is never overrun. */
  const size_t header = offsetof(tsr_plugin_variant_list, variants);
  if (out->struct_size < header) {
    plugin_error(device->plugin, "variant list struct_size %u is below the %zu bytes of ABI 1",
                 out->struct_size, header);
    return TSR_ERROR_STRUCT_SIZE;
  }
  if (out->struct_size >= sizeof *out) {
    /* the whole list fits: filled in place (no allocation on the op path) */
    uint32_t size = out->struct_size;
    tsr_status status = op_known(op) ? cpu_op_variants(op, args, out) : TSR_ERROR_UNSUPPORTED;
    out->struct_size = size;
    if (status != TSR_OK)
      plugin_error(device->plugin, "op %d is unknown to the cpu plugin", (int)op);
    return status;
  }
  tsr_plugin_variant_list *full = malloc(sizeof *full);
  if (!full) {
    plugin_error(device->plugin, "cannot allocate a variant list");
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  if (!op_known(op) || cpu_op_variants(op, args, full) != TSR_OK) {
    free(full);
    plugin_error(device->plugin, "op %d is unknown to the cpu plugin", (int)op);
    return TSR_ERROR_UNSUPPORTED;
  }
  size_t room = (out->struct_size - header) / sizeof(tsr_plugin_variant);
  if (room > TSR_PLUGIN_MAX_VARIANTS)
    room = TSR_PLUGIN_MAX_VARIANTS;
  out->count = full->count < room ? full->count : (uint32_t)room;
  out->heuristic = full->heuristic < (int32_t)out->count ? full->heuristic : 0;
  memcpy(out->reason, full->reason, sizeof out->reason);
  memcpy(out->variants, full->variants, out->count * sizeof(tsr_plugin_variant));
  free(full);
  return TSR_OK;
}

static tsr_status cpu_op_run(void *handle, tsr_op op, const void *args, const char *variant) {
  cpu_queue *queue = handle;
  cpu_plugin *plugin = queue->device->plugin;
  if (!op_known(op)) {
    plugin_error(plugin, "op %d is unknown to the cpu plugin", (int)op);
    return TSR_ERROR_UNSUPPORTED;
  }
  const void *config =
      variant ? cpu_op_find_variant(op, variant) : cpu_op_default_variant(op, args);
  if (!config) {
    char names[TSR_PLUGIN_MAX_VARIANTS * 64];
    cpu_op_variant_names(op, names, sizeof names);
    plugin_error(plugin, "the cpu plugin has no %s variant '%s'; it has: %s", op_name(op),
                 variant ? variant : "(none)", names);
    return TSR_ERROR_NOT_FOUND;
  }
  command *c = new_command(plugin, COMMAND_OP);
  if (!c)
    return TSR_ERROR_OUT_OF_MEMORY;
  c->op = op;
  c->config = config;
  /* Every args struct starts with its size; copy what both sides know. */
  size_t size = tsr_plugin_args_size(op);
  uint32_t given = *(const uint32_t *)args;
  memcpy(&c->args, args, given < size ? given : size);
  if (op == TSR_OP_GROUPED_GEMM) {
    tsr_grouped_gemm_args *grouped = &c->args.grouped_gemm;
    size_t count = grouped->group_count > 0 ? (size_t)grouped->group_count : 0;
    c->group_sizes = malloc((count > 0 ? count : 1) * sizeof *c->group_sizes);
    if (!c->group_sizes) {
      free_command(c);
      plugin_error(plugin, "cannot copy %zu group sizes", count);
      return TSR_ERROR_OUT_OF_MEMORY;
    }
    if (count > 0)
      memcpy(c->group_sizes, grouped->group_sizes, count * sizeof *c->group_sizes);
    grouped->group_sizes = c->group_sizes;
  }
  enqueue(queue, c);
  return TSR_OK;
}

/* ------------------------------------------------------------------------ */
/* Entry points                                                              */
/* ------------------------------------------------------------------------ */

static const tsr_plugin_v1 cpu_plugin_table = {
    .struct_size = sizeof(tsr_plugin_v1),
    .abi_version = 1,
    .name = "cpu",
    .version = CPU_PLUGIN_VERSION,
    .init = cpu_init,
    .shutdown = cpu_shutdown,
    .device_count = cpu_device_count,
    .device_info = cpu_device_info,
    .device_open = cpu_device_open,
    .device_close = cpu_device_close,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_free = cpu_buffer_free,
    .buffer_host_pointer = cpu_buffer_host_pointer,
    .queue_create = cpu_queue_create,
    .queue_destroy = cpu_queue_destroy,
    .queue_finish = cpu_queue_finish,
    .buffer_write = cpu_buffer_write,
    .buffer_read = cpu_buffer_read,
    .buffer_copy = cpu_buffer_copy,
    .event_record = cpu_event_record,
    .event_wait = cpu_event_wait,
    .event_elapsed_ms = cpu_event_elapsed_ms,
    .event_destroy = cpu_event_destroy,
    .op_supported = cpu_op_supported,
    .op_variants = cpu_op_variants_entry,
    .op_run = cpu_op_run,
    .buffer_wrap = NULL,
};

__attribute__((visibility("default"))) uint32_t tsr_plugin_negotiate(uint32_t core_max_abi);
__attribute__((visibility("default"))) const void *tsr_plugin_entry(uint32_t abi);

uint32_t tsr_plugin_negotiate(uint32_t core_max_abi) {
  return core_max_abi >= 1 ? 1 : 0;
}

const void *tsr_plugin_entry(uint32_t abi) {
  return abi == 1 ? &cpu_plugin_table : NULL;
}
