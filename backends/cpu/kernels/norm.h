/* SPDX-License-Identifier: Apache-2.0 */
/* What the row-op files share (norm.c: the plain C array kernels, RMSNorm and
 * LayerNorm; softmax.c: softmax and cross-entropy; norm_avx2.c and
 * norm_avx512.c: the vector array kernels): the table of array kernels of
 * one vector level, and the row walkers every row op uses.
 *
 * Row ops: RMSNorm (with the residual add), LayerNorm, softmax and
 * cross-entropy. Each task owns whole rows (the last dimension), split over
 * the thread pool.
 *
 * A row is read from memory once: f32 rows of unit stride are used where
 * they lie (the first pass brings the row into L1/L2 and later passes find
 * it there), other rows are converted into per-worker f32 scratch first.
 * Every row is read completely before its outputs are written, so outputs
 * may alias inputs exactly. Large outputs are written with streaming stores.
 * Sums over a row accumulate in double.
 *
 * The passes over a row are small array kernels, in plain C and, on x86-64,
 * AVX2 and AVX-512 versions picked by the plugin's instruction set. */
#ifndef TESSERA_CPU_NORM_H
#define TESSERA_CPU_NORM_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "configs.h"
#include "cpu_internal.h"
#include "cpu_kernel_util.h"

/* One-thread rates of the row kernels on AVX-512 (f32 rows from L2, 2026
 * EPYC and Xeon machines), the split cost model's input (cpu_grain). */
#define RMSNORM_NS_PER_ELEMENT 0.25
#define LAYERNORM_NS_PER_ELEMENT 0.3
#define SOFTMAX_NS_PER_ELEMENT 0.45
#define CROSS_ENTROPY_NS_PER_ELEMENT 0.45
/* Softmax's fused step works in blocks of this many elements: a block is
 * read from memory once (its max), its exponentials are taken from L1 (4 KiB
 * blocks: 12.2-13.1 ms against 14.3 for 1 KiB on Zen 5, 8192 x 8192). */
enum { SOFTMAX_BLOCK = 1024 };

/* The array kernels of one vector level. Arrays are contiguous f32; `stream`
 * asks for non-temporal stores of y. */
typedef struct row_kernels {
  double (*sum)(const float *x, int64_t count, const row_ahead *ahead);
  /* sum of (x - centre)^2 */
  double (*sum_squares)(const float *x, float centre, int64_t count, const row_ahead *ahead);
  /* h = x + r; returns the sum of h^2 */
  double (*add_sum_squares)(float *h, const float *x, const float *r, int64_t count,
                            const row_ahead *ahead);
  /* y = x * factor * weight (weight NULL: 1) */
  void (*scale)(float *y, const float *x, float factor, const float *weight, int64_t count,
                int stream);
  /* y = (x - mean) * factor * weight + bias (weight, bias NULL: 1, 0) */
  void (*normalize)(float *y, const float *x, float mean, float factor, const float *weight,
                    const float *bias, int64_t count, int stream);
  /* max of x; NaN lanes may or may not win */
  float (*max_of)(const float *x, int64_t count, const row_ahead *ahead);
  /* e = e^((x - max) * scale) (e NULL: not stored); returns the sum of e.
   * Softmax scales are positive (the core rejects others), so max is the
   * max of x * scale too; subtracting before scaling keeps the max's own
   * exponent exactly 0 (an FMA of x * scale - max * scale leaves the
   * rounding error of max * scale, ~1e23 at scale 1e30) and cannot
   * overflow where x * scale would. */
  double (*exp_sum)(float *e, const float *x, float scale, float max, int64_t count);

  /* Fused steps: the last pass over a row together with the first pass over
   * the next row (`next`, never NULL; `ahead` prefetches past it), so that
   * memory is read and written in the same loop, as in a copy. NULL where a
   * level has none: the row loops then run the passes one after another. */
  /* scale(y, h, factor, weight); then h' = next_x + next_r (next_r NULL:
   * h' = next_x; else h' goes to next_h and, when next_residual_out is not
   * NULL, there too); returns the sum of h'^2 */
  double (*rms_step)(float *y, const float *h, float factor, const float *weight, int64_t count,
                     int stream, const float *next_x, const float *next_r, float *next_h,
                     float *next_residual_out, const row_ahead *ahead);
  /* normalize(y, x, ...); returns the sum of next */
  double (*ln_step)(float *y, const float *x, float mean, float factor, const float *weight,
                    const float *bias, int64_t count, int stream, const float *next,
                    const row_ahead *ahead);
  /* Softmax in blocks of SOFTMAX_BLOCK elements. y (NULL: none) = e *
   * factors[block]; and for next (NULL: none), per block: its max of next
   * into block_max, next_e = e^((next - that max) * scale) (0 where the max
   * is -inf) and the sum of next_e into block_sum. */
  void (*softmax_step)(float *y, const float *e, const float *factors, int64_t count, int stream,
                       const float *next, float scale, float *next_e, float *block_max,
                       float *block_sum, const row_ahead *ahead);
  /* factors[b] = e^((block_max[b] - max) * scale) / sum over a row's
   * blocks, with max the largest block max and sum the blocks' sums rescaled
   * alike; returns max (-inf, factors unset, for a row of all -inf) */
  float (*softmax_factors)(const float *block_max, const float *block_sum, int64_t blocks,
                           float scale, float *factors);
  /* returns the sum of e^(x - shift); *next_max = the max of next */
  double (*xe_step)(const float *x, float shift, int64_t count, const float *next, float *next_max,
                    const row_ahead *ahead);

  /* 16-bit rows (f16 or bf16 `dtype`, unit stride), converted in registers
   * instead of through f32 scratch: RMSNorm without a residual. NULL where a
   * level has none. rms16_step: y = x * factor * weight (weight f32, NULL:
   * 1) stored as dtype, and for next (NULL: none) the sum of its squares
   * (returned; next NULL and y NULL: the sum of x's squares). */
  double (*rms16_step)(uint16_t *y, const uint16_t *x, float factor, const float *weight,
                       int64_t count, int stream, const uint16_t *next, int32_t dtype,
                       const row_ahead *ahead);
  /* LayerNorm: y = normalize(x) stored as dtype (x: the row as f32; y NULL:
   * none), and next (NULL: none) widened into next_f32; returns the sum of
   * next. */
  double (*ln16_step)(uint16_t *y, const float *x, float mean, float factor, const float *weight,
                      const float *bias, int64_t count, int stream, const uint16_t *next,
                      float *next_f32, int32_t dtype, const row_ahead *ahead);
  /* Softmax: y = e * factor stored as dtype (y NULL: none), and next (NULL:
   * none) widened into next_f32; returns the max of next (-inf without
   * next; NaN lanes may or may not win). */
  float (*sm16_step)(uint16_t *y, const float *e, float factor, int64_t count, int stream,
                     const uint16_t *next, float *next_f32, int32_t dtype, const row_ahead *ahead);
} row_kernels;

/* The vector kernels sum exponentials in f32 over blocks of this many
 * elements (a few per lane) and add the blocks in double. */
enum { EXP_SUM_BLOCK = 1024 };

/* Shared by the AVX2 and AVX-512 scale and normalize kernels. */
typedef struct scale_context {
  const float *x, *weight, *bias;
  float factor, mean;
} scale_context;

/* The tables of each level (norm.c, norm_avx2.c, norm_avx512.c) and select_kernels. */
CPU_KERNEL_TABLES(row_kernels, norm)

/* ---- rows ---- */

static inline int has_nan(const float *x, int64_t count) {
  int found = 0;
  for (int64_t i = 0; i < count; i++)
    found |= x[i] != x[i];
  return found;
}

static inline void set_error(const cpu_exec *exec, const char *message, size_t bytes) {
  if (exec->error && exec->error_capacity > 0)
    snprintf(exec->error, exec->error_capacity, "%s (%zu bytes)", message, bytes);
}

/* What every row job shares: the kernels, the row length, and per-worker
 * scratch of `worker_floats` floats. */
typedef struct row_job {
  kernel_level level;
  const row_kernels *kernels;
  int64_t width;
  size_t worker_floats;
  float *scratch;
} row_job;

static inline int64_t last_stride(const tsr_plugin_tensor *t) {
  return t->strides[t->rank - 1];
}

/* A tensor whose rows can be used in place as f32 arrays. */
static inline int rows_are_f32(const tsr_plugin_tensor *t) {
  return t->dtype == TSR_DTYPE_F32 && last_stride(t) == 1;
}

/* Row `row` of t as contiguous f32: where it lies, or converted into scratch
 * (prefetching as `ahead` says: f32 rows prefetch in the row's first pass). */
static inline const float *read_row(const row_job *job, const tsr_plugin_tensor *t, int64_t row,
                                    float *scratch, const row_ahead *ahead) {
  int64_t offset = tsr_plugin_row_offset(t, row);
  if (rows_are_f32(t))
    return (const float *)cpu_tensor_base(t) + offset;
  load_row(job->level, scratch, cpu_tensor_base(t), t->dtype, offset, last_stride(t), job->width,
           ahead);
  return scratch;
}

/* The prefetches of a first pass over a row that `read_row` gave: none when
 * read_row already converted (and prefetched) it. */
static inline const row_ahead *first_pass_ahead(const tsr_plugin_tensor *t,
                                                const row_ahead *ahead) {
  return rows_are_f32(t) ? ahead : NULL;
}

/* Where a row of output t is computed: in place when rows are f32, else in
 * scratch, which finish_row then converts into the tensor. */
static inline float *output_row(const tsr_plugin_tensor *t, int64_t row, float *scratch) {
  if (rows_are_f32(t))
    return (float *)cpu_tensor_base(t) + tsr_plugin_row_offset(t, row);
  return scratch;
}

static inline void finish_row(const row_job *job, const tsr_plugin_tensor *t, int64_t row,
                              const float *values, int stream) {
  if (rows_are_f32(t))
    return;
  store_row(job->level, cpu_tensor_base(t), t->dtype, tsr_plugin_row_offset(t, row), last_stride(t),
            values, job->width, stream);
}

/* Allocates `per_worker` floats for each pool thread plus `shared` floats
 * (weights and biases converted once) and fills in the job; 0 when out of
 * memory (with the error set). */
static inline int row_job_init(row_job *job, const cpu_exec *exec, int64_t width,
                               int64_t per_worker, int64_t shared, const char *what) {
  int threads = cpu_pool_threads(exec->pool);
  job->level = cpu_kernel_level();
  job->kernels = select_kernels(job->level);
  job->width = width;
  /* Whole cache lines per worker: no false sharing between workers. */
  job->worker_floats = ((size_t)per_worker + 15u) & ~(size_t)15u;
  size_t bytes = (job->worker_floats * (size_t)(threads > 0 ? threads : 1) + (size_t)shared + 16u) *
                 sizeof(float);
  job->scratch = aligned_alloc(64, (bytes + 63u) & ~(size_t)63u);
  if (!job->scratch) {
    set_error(exec, what, bytes);
    return 0;
  }
  return 1;
}

static inline float *worker_scratch(const row_job *job, int worker) {
  return job->scratch + (size_t)worker * job->worker_floats;
}

/* After the per-worker areas. */
static inline float *shared_scratch(const row_job *job, const cpu_exec *exec) {
  int threads = cpu_pool_threads(exec->pool);
  return job->scratch + job->worker_floats * (size_t)(threads > 0 ? threads : 1);
}

static inline int64_t row_grain(int64_t row_length, double ns_per_element) {
  return cpu_grain(ns_per_element * (double)(row_length > 0 ? row_length : 1));
}

/* Optional per-channel vector (weight or bias) as f32: where it lies when it
 * is f32 of unit stride, else converted into dst; NULL when absent. */
static inline const float *load_vector(kernel_level level, const tsr_plugin_tensor *t, float *dst) {
  if (!t->buffer)
    return NULL;
  if (rows_are_f32(t))
    return (const float *)cpu_tensor_base(t);
  load_row(level, dst, cpu_tensor_base(t), t->dtype, 0, last_stride(t), t->shape[t->rank - 1],
           NULL);
  return dst;
}

/* Row `row` of an f32 tensor with unit-stride rows, where it lies. */
static inline float *f32_row(const tsr_plugin_tensor *t, int64_t row) {
  return (float *)cpu_tensor_base(t) + tsr_plugin_row_offset(t, row);
}

/* Whether every given tensor (absent ones aside) has f32 unit-stride rows. */
static inline int all_rows_f32(const tsr_plugin_tensor *const *tensors, int count) {
  for (int i = 0; i < count; i++)
    if (tensors[i]->buffer && !rows_are_f32(tensors[i]))
      return 0;
  return 1;
}

static inline float inverse_root(double sum_squares, int64_t width, float eps) {
  return (float)(1.0 / sqrt(sum_squares / (double)width + (double)eps));
}

static inline const uint16_t *half_row(const tsr_plugin_tensor *t, int64_t row) {
  return (const uint16_t *)cpu_tensor_base(t) + tsr_plugin_row_offset(t, row);
}

/* x and y both f16 or both bf16, rows of unit stride: the 16-bit steps. */
static inline int half_rows(const tsr_plugin_tensor *x, const tsr_plugin_tensor *y) {
  return (x->dtype == TSR_DTYPE_F16 || x->dtype == TSR_DTYPE_BF16) && y->dtype == x->dtype &&
         last_stride(x) == 1 && last_stride(y) == 1;
}

#endif /* TESSERA_CPU_NORM_H */
