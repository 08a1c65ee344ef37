/* SPDX-License-Identifier: Apache-2.0 */
/* Internal declarations of the CPU plugin: buffers, the thread pool, kernel
 * configs and kernel entry points. Not installed. */
#ifndef TESSERA_CPU_INTERNAL_H
#define TESSERA_CPU_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/plugin_helper.h"

/* The plugin's few thread-locals (36 bytes) use the initial-exec model: no
 * __tls_get_addr call where the pool reads its worker index on every split,
 * and no dynamic TLS block, whose bookkeeping LeakSanitizer of gcc 12 on
 * glibc 2.36 misread at exit and crashed in (its tracer, "signal 11"),
 * depending only on the heap's layout. A dlopen'ed library takes such
 * variables from the static TLS that glibc keeps spare for this. */
#if defined(__GNUC__)
#define CPU_TLS_INITIAL_EXEC __attribute__((tls_model("initial-exec")))
#else
#define CPU_TLS_INITIAL_EXEC
#endif

/* ---- memory ---- */

typedef struct cpu_buffer {
  /* 64-byte aligned when allocated here; the caller's pointer, of any
   * alignment, when wrapped (ops then check that each tensor's address is a
   * multiple of its element size: ops.c) */
  void *data;
  uint64_t bytes;
  bool wrapped; /* the application's memory: never freed here */
} cpu_buffer;

/* Address of a tensor's first element. */
static inline char *cpu_tensor_base(const tsr_plugin_tensor *t) {
  return (char *)((const cpu_buffer *)t->buffer)->data + t->offset;
}

/* ---- thread pool (pool.c) ---- */

typedef struct cpu_pool cpu_pool;

/* The split cost model. Posting a job costs its caller a few atomics and,
 * while workers are parked, one futex wake; a polling worker takes a chunk
 * about a microsecond after it is posted, and the chunk's data then moves
 * between cores' caches. A split that must pay back a few microseconds
 * makes every chunk at least CPU_CHUNK_MIN_NS of work, from the kernel's
 * one-thread rate at the fastest level (slower levels split a little later
 * than they could, never too early). The caller never waits for a worker
 * that was parked, so a split is never much slower than one thread. */
enum { CPU_CHUNK_MIN_NS = 16000 };

/* Items per chunk: CPU_CHUNK_MIN_NS of work at ns_per_item, at least 1. */
static inline int64_t cpu_grain(double ns_per_item) {
  double items = CPU_CHUNK_MIN_NS / (ns_per_item > 0.0 ? ns_per_item : 1.0);
  return items > 1.0 ? (int64_t)items : 1;
}

/* fn runs over [begin, end) chunks of [0, n); `worker` is 0..threads-1 and is
 * unique among concurrently running chunks (index per-thread scratch with it). */
typedef void (*cpu_range_fn)(void *context, int64_t begin, int64_t end, int worker);

/* A pool of `threads` (the caller counts as one); idle workers poll for
 * poll_ns before they park. */
cpu_pool *cpu_pool_create(int threads, int64_t poll_ns);
void cpu_pool_destroy(cpu_pool *pool);
int cpu_pool_threads(const cpu_pool *pool);
/* Runs fn(context, t, threads, worker) once for each share t of `threads`
 * (at most cpu_pool_threads(pool)) and returns when all are done: for
 * kernels that partition their work statically. Shares run on whichever
 * threads are awake, the caller's included, so one thread may run several
 * one after the other: a share must never wait for another. Nested calls
 * run inline. */
void cpu_pool_run_threads(cpu_pool *pool, int threads, cpu_range_fn fn, void *context);
/* Splits [0, n) into chunks of at least `grain` items over the pool's threads
 * (the caller's thread takes part; workers that are parked when it starts
 * may not) and returns when all are done. `grain` is the split's cost
 * model: a chunk of that many items should be several microseconds of
 * work, so that handing it to another thread pays. Calls from several
 * threads at once are serialised. */
void cpu_pool_parallel_for(cpu_pool *pool, int64_t n, int64_t grain, cpu_range_fn fn,
                           void *context);

/* What a kernel runs with. A kernel that fails writes a sentence into `error`
 * (the plugin reports it to the caller) and returns the status. A fault in
 * device data (a cross-entropy target, attention offsets or block tables, a
 * kv_append slot) is no failure of the kernel: it records the smallest index
 * at fault of its kind in the queue's `faults` (cpu_fault_record), carries
 * on with the rest, and tsr_queue_finish reports it (tsr_plugin_fault_report). */
typedef struct cpu_exec {
  cpu_pool *pool;
  char *error;
  size_t error_capacity;
  int32_t *faults; /* TSR_PLUGIN_FAULT_COUNT words of the queue; NULL: none kept */
  tsr_plugin_fault_context *fault_context;
} cpu_exec;

/* Records a fault of `kind` at `index`: an atomic min into the queue's word
 * (the pool's threads may record at once). Returns whether `index` is now
 * the smallest of its kind, so that the caller can keep the context that
 * goes with it. */
static inline bool cpu_fault_record(const cpu_exec *exec, int kind, int64_t index) {
  if (!exec->faults || kind < 0 || kind >= TSR_PLUGIN_FAULT_COUNT)
    return false;
  /* NONE is INT32_MAX: indices at or past it are kept just below */
  int32_t value = index >= TSR_PLUGIN_FAULT_NONE ? TSR_PLUGIN_FAULT_NONE - 1 : (int32_t)index;
  int32_t seen = __atomic_load_n(&exec->faults[kind], __ATOMIC_RELAXED);
  while (value < seen) {
    if (__atomic_compare_exchange_n(&exec->faults[kind], &seen, value, true, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED))
      return true;
  }
  return value == seen;
}

/* ---- kernel configs (configs.c) ---- */

/* GEMM variants. The packed method is BLIS-style: panels of A (MC x KC) and
 * B (KC x NC) are packed into MR-tall and NR-wide strips and an MR x NR
 * register block is the inner kernel. The gemv method is for few rows (M up
 * to ~16, decode): it streams B once, unpacked, over all threads. `isa` is
 * the kernel family (cpu_isa: generic, avx2 or avx512); bf16 inputs use
 * vdpbf16ps when the active level has AVX512_BF16. The auto method (grouped
 * GEMM only) never reaches a kernel: op_run turns it into the family's gemv
 * or first packed row from the group sizes (cpu_op_run_config). */
enum { CPU_GEMM_PACKED = 0, CPU_GEMM_GEMV = 1, CPU_GEMM_AUTO = 2 };
typedef struct cpu_gemm_config {
  const char *name; /* name_text: a named row, as every variant table's */
  int isa;
  int method;
  int mr, nr;     /* register block (packed) */
  int mc, kc, nc; /* cache blocks in rows / depth / columns (packed) */
  /* formatted once, when the rows are built at the first use */
  char name_text[64];
  char description[160];
} cpu_gemm_config;

/* Attention: tiles of queries and keys, online softmax. Every config row
 * starts with its name and description (configs.c lists them as they are). */
enum { CPU_ATTENTION_TILES = 0, CPU_ATTENTION_DECODE = 1 };
/* The decode method's chunk: keys per work item, or one of these. */
enum { CPU_DECODE_CHUNK_AUTO = 0, CPU_DECODE_CHUNK_WHOLE = -1 };
typedef struct cpu_attention_config {
  const char *name;
  const char *description;
  int method;   /* CPU_ATTENTION_TILES (flash tiles) or CPU_ATTENTION_DECODE (split-KV) */
  int block_q;  /* tiles: query rows per task */
  int block_kv; /* tiles: keys per tile */
  int chunk;    /* decode: keys per work item (CPU_DECODE_CHUNK_*: from the lengths, none) */
} cpu_attention_config;

/* Row ops (norms, softmax, cross entropy) and elementwise ops have one
 * variant each for now: the row-parallel kernel. */

/* ---- kernels (one file per op family in kernels/) ---- */

tsr_status cpu_gemm_run(const cpu_exec *exec, const tsr_gemm_args *args,
                        const cpu_gemm_config *config);
tsr_status cpu_grouped_gemm_run(const cpu_exec *exec, const tsr_grouped_gemm_args *args,
                                const cpu_gemm_config *config);
tsr_status cpu_attention_run(const cpu_exec *exec, const tsr_attention_args *args,
                             const cpu_attention_config *config);
tsr_status cpu_rmsnorm_run(const cpu_exec *exec, const tsr_rmsnorm_args *args);
tsr_status cpu_layernorm_run(const cpu_exec *exec, const tsr_layernorm_args *args);
tsr_status cpu_softmax_run(const cpu_exec *exec, const tsr_softmax_args *args);
tsr_status cpu_rope_run(const cpu_exec *exec, const tsr_rope_args *args);
tsr_status cpu_swiglu_run(const cpu_exec *exec, const tsr_swiglu_args *args);
tsr_status cpu_gelu_run(const cpu_exec *exec, const tsr_gelu_args *args);
tsr_status cpu_cross_entropy_run(const cpu_exec *exec, const tsr_cross_entropy_args *args);
tsr_status cpu_kv_append_run(const cpu_exec *exec, const tsr_kv_append_args *args);

/* A small dense product with the GEMM's own micro-kernels, for kernels that
 * multiply tiles (attention's q k^T and p v):
 *   c[i*ldc + j] (+)= sum_p a[i*lda + p] * b[p*b_row_stride + j*b_col_stride]
 * for i < m, j < n, p < k; `accumulate` adds to c instead of overwriting it.
 * Meant for tiles up to a few hundred in each extent; runs on the calling
 * thread (no pool) with the active instruction set, using per-thread scratch. */
void cpu_tile_gemm_f32(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                       int64_t b_row_stride, int64_t b_col_stride, float *c, int64_t ldc,
                       int accumulate);

/* Activation in float, shared by the GEMM epilogue and the gelu kernel. */
float cpu_activation(int32_t activation, float x);

#endif /* TESSERA_CPU_INTERNAL_H */
