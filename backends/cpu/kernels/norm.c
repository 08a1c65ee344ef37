/* Row ops: RMSNorm (with the residual add), LayerNorm, softmax and
 * cross-entropy. Each task owns whole rows (the last dimension); a row is
 * read into f32 scratch before anything is written, so outputs may alias
 * inputs exactly. Reductions over a row accumulate in double. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "configs.h"
#include "cpu_internal.h"
#include "cpu_kernel_util.h"

enum { MIN_ELEMENTS_PER_CHUNK = 16384 };

/* x[i] = e^(x[i] - shift): the hot loop of softmax and cross-entropy, also
 * compiled for AVX2 (the same C, 8 lanes instead of 4) and picked by the
 * plugin's instruction set. */
static ALWAYS_INLINE void exp_shifted_body(float *x, int64_t count, float shift) {
  for (int64_t i = 0; i < count; i++)
    x[i] = exp_f32(x[i] - shift);
}

static void exp_shifted_baseline(float *x, int64_t count, float shift) {
  exp_shifted_body(x, count, shift);
}

#if CPU_KERNELS_HAVE_AVX2
__attribute__((target("avx2,fma"))) static void exp_shifted_avx2(float *x, int64_t count,
                                                                 float shift) {
  exp_shifted_body(x, count, shift);
}
#endif

static void exp_shifted(float *x, int64_t count, float shift) {
#if CPU_KERNELS_HAVE_AVX2
  if (cpu_isa_active() >= CPU_ISA_AVX2) {
    exp_shifted_avx2(x, count, shift);
    return;
  }
#endif
  exp_shifted_baseline(x, count, shift);
}

/* Reductions over a row with independent lanes, so they vectorise without
 * reassociation; the sums accumulate in double. */
static float max_f32(const float *x, int64_t count) {
  float lanes[16];
  for (int k = 0; k < 16; k++)
    lanes[k] = -INFINITY;
  int64_t i = 0;
  for (; i + 16 <= count; i += 16)
    for (int k = 0; k < 16; k++)
      lanes[k] = x[i + k] > lanes[k] ? x[i + k] : lanes[k];
  float result = -INFINITY;
  for (; i < count; i++)
    result = x[i] > result ? x[i] : result;
  for (int k = 0; k < 16; k++)
    result = lanes[k] > result ? lanes[k] : result;
  return result;
}

static int has_nan(const float *x, int64_t count) {
  int found = 0;
  for (int64_t i = 0; i < count; i++)
    found |= x[i] != x[i];
  return found;
}

static double sum_f64(const float *x, int64_t count) {
  double lanes[8] = {0};
  int64_t i = 0;
  for (; i + 8 <= count; i += 8)
    for (int k = 0; k < 8; k++)
      lanes[k] += (double)x[i + k];
  double result = 0.0;
  for (; i < count; i++)
    result += (double)x[i];
  for (int k = 0; k < 8; k++)
    result += lanes[k];
  return result;
}

/* Sum of (x[i] - centre)^2. */
static double sum_squares_f64(const float *x, int64_t count, double centre) {
  double lanes[8] = {0};
  int64_t i = 0;
  for (; i + 8 <= count; i += 8)
    for (int k = 0; k < 8; k++) {
      double d = (double)x[i + k] - centre;
      lanes[k] += d * d;
    }
  double result = 0.0;
  for (; i < count; i++) {
    double d = (double)x[i] - centre;
    result += d * d;
  }
  for (int k = 0; k < 8; k++)
    result += lanes[k];
  return result;
}

static void set_error(const cpu_exec *exec, const char *message, size_t bytes) {
  if (exec->error && exec->error_capacity > 0)
    snprintf(exec->error, exec->error_capacity, "%s (%zu bytes)", message, bytes);
}

/* Per-call scratch: `per_worker` floats for each pool thread plus `shared`
 * floats (weights and biases converted once). NULL when out of memory. */
static float *scratch_alloc(const cpu_exec *exec, int64_t per_worker, int64_t shared,
                            size_t *bytes) {
  int threads = cpu_pool_threads(exec->pool);
  *bytes = ((size_t)per_worker * (size_t)(threads > 0 ? threads : 1) + (size_t)shared + 1) *
           sizeof(float);
  return malloc(*bytes);
}

static int64_t row_grain(int64_t row_length) {
  int64_t grain = MIN_ELEMENTS_PER_CHUNK / (row_length > 0 ? row_length : 1);
  return grain > 0 ? grain : 1;
}

/* Optional per-channel vector (weight or bias) as f32, or NULL when absent. */
static const float *load_vector(const tsr_plugin_tensor *t, float *dst) {
  if (!t->buffer)
    return NULL;
  load_span(dst, cpu_tensor_base(t), t->dtype, 0, t->strides[t->rank - 1], t->shape[t->rank - 1]);
  return dst;
}

static int64_t last_stride(const tsr_plugin_tensor *t) {
  return t->strides[t->rank - 1];
}

/* ---- RMSNorm ---- */

typedef struct rmsnorm_job {
  const tsr_rmsnorm_args *args;
  int64_t width;
  const float *weight;
  float *scratch; /* per worker: 2 * width */
} rmsnorm_job;

static void rmsnorm_range(void *context, int64_t begin, int64_t end, int worker) {
  const rmsnorm_job *job = context;
  const tsr_rmsnorm_args *args = job->args;
  const int64_t width = job->width;
  float *h = job->scratch + (size_t)worker * (size_t)(2 * width);
  float *other = h + width;
  for (int64_t row = begin; row < end; row++) {
    load_span(h, cpu_tensor_base(&args->x), args->x.dtype, tsr_plugin_row_offset(&args->x, row),
              last_stride(&args->x), width);
    if (args->residual.buffer) {
      load_span(other, cpu_tensor_base(&args->residual), args->residual.dtype,
                tsr_plugin_row_offset(&args->residual, row), last_stride(&args->residual), width);
      for (int64_t i = 0; i < width; i++)
        h[i] += other[i];
    }
    double sum_squares = sum_squares_f64(h, width, 0.0);
    float inverse_rms = (float)(1.0 / sqrt(sum_squares / (double)width + (double)args->eps));
    if (args->residual_out.buffer)
      store_span(cpu_tensor_base(&args->residual_out), args->residual_out.dtype,
                 tsr_plugin_row_offset(&args->residual_out, row), last_stride(&args->residual_out),
                 h, width);
    if (job->weight) {
      for (int64_t i = 0; i < width; i++)
        other[i] = h[i] * inverse_rms * job->weight[i];
    } else {
      for (int64_t i = 0; i < width; i++)
        other[i] = h[i] * inverse_rms;
    }
    store_span(cpu_tensor_base(&args->y), args->y.dtype, tsr_plugin_row_offset(&args->y, row),
               last_stride(&args->y), other, width);
  }
}

tsr_status cpu_rmsnorm_run(const cpu_exec *exec, const tsr_rmsnorm_args *args) {
  int64_t width = args->x.shape[args->x.rank - 1];
  int64_t rows = tsr_plugin_row_count(&args->x);
  if (rows == 0 || width == 0)
    return TSR_OK;
  size_t bytes;
  float *scratch = scratch_alloc(exec, 2 * width, width, &bytes);
  if (!scratch) {
    set_error(exec, "cannot allocate rmsnorm scratch", bytes);
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  int threads = cpu_pool_threads(exec->pool);
  float *weight = scratch + (size_t)(2 * width) * (size_t)(threads > 0 ? threads : 1);
  rmsnorm_job job = {args, width, load_vector(&args->weight, weight), scratch};
  cpu_pool_parallel_for(exec->pool, rows, row_grain(width), rmsnorm_range, &job);
  free(scratch);
  return TSR_OK;
}

/* ---- LayerNorm ---- */

typedef struct layernorm_job {
  const tsr_layernorm_args *args;
  int64_t width;
  const float *weight, *bias;
  float *scratch; /* per worker: width */
} layernorm_job;

static void layernorm_range(void *context, int64_t begin, int64_t end, int worker) {
  const layernorm_job *job = context;
  const tsr_layernorm_args *args = job->args;
  const int64_t width = job->width;
  float *x = job->scratch + (size_t)worker * (size_t)width;
  for (int64_t row = begin; row < end; row++) {
    load_span(x, cpu_tensor_base(&args->x), args->x.dtype, tsr_plugin_row_offset(&args->x, row),
              last_stride(&args->x), width);
    /* Two passes: the variance of the centred values does not cancel. */
    double mean = sum_f64(x, width) / (double)width;
    double sum_squares = sum_squares_f64(x, width, mean);
    float inverse_std = (float)(1.0 / sqrt(sum_squares / (double)width + (double)args->eps));
    float mean_f = (float)mean;
    for (int64_t i = 0; i < width; i++) {
      float value = (x[i] - mean_f) * inverse_std;
      if (job->weight)
        value *= job->weight[i];
      if (job->bias)
        value += job->bias[i];
      x[i] = value;
    }
    store_span(cpu_tensor_base(&args->y), args->y.dtype, tsr_plugin_row_offset(&args->y, row),
               last_stride(&args->y), x, width);
  }
}

tsr_status cpu_layernorm_run(const cpu_exec *exec, const tsr_layernorm_args *args) {
  int64_t width = args->x.shape[args->x.rank - 1];
  int64_t rows = tsr_plugin_row_count(&args->x);
  if (rows == 0 || width == 0)
    return TSR_OK;
  size_t bytes;
  float *scratch = scratch_alloc(exec, width, 2 * width, &bytes);
  if (!scratch) {
    set_error(exec, "cannot allocate layernorm scratch", bytes);
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  int threads = cpu_pool_threads(exec->pool);
  float *vectors = scratch + (size_t)width * (size_t)(threads > 0 ? threads : 1);
  layernorm_job job = {args, width, load_vector(&args->weight, vectors),
                       load_vector(&args->bias, vectors + width), scratch};
  cpu_pool_parallel_for(exec->pool, rows, row_grain(width), layernorm_range, &job);
  free(scratch);
  return TSR_OK;
}

/* ---- softmax ---- */

typedef struct softmax_job {
  const tsr_softmax_args *args;
  int64_t width;
  float *scratch; /* per worker: width */
} softmax_job;

static void softmax_range(void *context, int64_t begin, int64_t end, int worker) {
  const softmax_job *job = context;
  const tsr_softmax_args *args = job->args;
  const int64_t width = job->width;
  const float scale = args->scale;
  float *x = job->scratch + (size_t)worker * (size_t)width;
  for (int64_t row = begin; row < end; row++) {
    load_span(x, cpu_tensor_base(&args->x), args->x.dtype, tsr_plugin_row_offset(&args->x, row),
              last_stride(&args->x), width);
    for (int64_t i = 0; i < width; i++)
      x[i] *= scale;
    float max = max_f32(x, width);
    if (max == -INFINITY) { /* every score -inf: zeros; a NaN (ignored by max) wins */
      float fill = has_nan(x, width) ? NAN : 0.0f;
      for (int64_t i = 0; i < width; i++)
        x[i] = fill;
    } else { /* NaN or +inf in the row make every output NaN through the sum */
      exp_shifted(x, width, max);
      float inverse = (float)(1.0 / sum_f64(x, width));
      for (int64_t i = 0; i < width; i++)
        x[i] *= inverse;
    }
    store_span(cpu_tensor_base(&args->y), args->y.dtype, tsr_plugin_row_offset(&args->y, row),
               last_stride(&args->y), x, width);
  }
}

tsr_status cpu_softmax_run(const cpu_exec *exec, const tsr_softmax_args *args) {
  int64_t width = args->x.shape[args->x.rank - 1];
  int64_t rows = tsr_plugin_row_count(&args->x);
  if (rows == 0 || width == 0)
    return TSR_OK;
  size_t bytes;
  float *scratch = scratch_alloc(exec, width, 0, &bytes);
  if (!scratch) {
    set_error(exec, "cannot allocate softmax scratch", bytes);
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  softmax_job job = {args, width, scratch};
  cpu_pool_parallel_for(exec->pool, rows, row_grain(width), softmax_range, &job);
  free(scratch);
  return TSR_OK;
}

/* ---- cross-entropy ---- */

typedef struct bad_target {
  int64_t row; /* first bad row this worker saw; -1 when none */
  int64_t target;
  int64_t count;
} bad_target;

typedef struct cross_entropy_job {
  const tsr_cross_entropy_args *args;
  int64_t vocab;
  float *scratch;  /* per worker: vocab */
  bad_target *bad; /* per worker */
} cross_entropy_job;

static void cross_entropy_range(void *context, int64_t begin, int64_t end, int worker) {
  const cross_entropy_job *job = context;
  const tsr_cross_entropy_args *args = job->args;
  const int64_t vocab = job->vocab;
  float *x = job->scratch + (size_t)worker * (size_t)vocab;
  bad_target *bad = &job->bad[worker];
  const int32_t *targets = (const int32_t *)cpu_tensor_base(&args->targets);
  float *loss = (float *)cpu_tensor_base(&args->loss);
  float *lse_out = args->lse.buffer ? (float *)cpu_tensor_base(&args->lse) : NULL;
  for (int64_t row = begin; row < end; row++) {
    load_span(x, cpu_tensor_base(&args->logits), args->logits.dtype,
              tsr_plugin_row_offset(&args->logits, row), last_stride(&args->logits), vocab);
    int64_t target = targets[row * args->targets.strides[0]];
    int target_valid = target >= 0 && target < vocab;
    /* Read before the row is overwritten by its exponentials. */
    double target_logit = target_valid ? (double)x[target] : 0.0;
    float max = max_f32(x, vocab);
    double lse = max; /* all -inf: log 0; a +inf logit: an infinite sum */
    if (isinf(max)) {
      if (has_nan(x, vocab))
        lse = NAN;
    } else { /* a NaN logit makes the sum NaN */
      exp_shifted(x, vocab, max);
      lse = (double)max + log(sum_f64(x, vocab));
    }
    float value;
    if (target == args->ignore_index) {
      value = 0.0f;
    } else if (!target_valid) {
      value = NAN;
      if (bad->row < 0) {
        bad->row = row;
        bad->target = target;
      }
      bad->count++;
    } else {
      value = (float)(lse - target_logit);
    }
    loss[row * args->loss.strides[0]] = value;
    if (lse_out)
      lse_out[row * args->lse.strides[0]] = (float)lse;
  }
}

tsr_status cpu_cross_entropy_run(const cpu_exec *exec, const tsr_cross_entropy_args *args) {
  int64_t vocab = args->logits.shape[args->logits.rank - 1];
  int64_t rows = tsr_plugin_row_count(&args->logits);
  if (rows == 0)
    return TSR_OK;
  int threads = cpu_pool_threads(exec->pool);
  if (threads < 1)
    threads = 1;
  size_t bytes;
  float *scratch = scratch_alloc(exec, vocab, 0, &bytes);
  bad_target *bad = calloc((size_t)threads, sizeof *bad);
  if (!scratch || !bad) {
    free(scratch);
    free(bad);
    set_error(exec, "cannot allocate cross-entropy scratch", bytes);
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  for (int i = 0; i < threads; i++)
    bad[i].row = -1;
  cross_entropy_job job = {args, vocab, scratch, bad};
  cpu_pool_parallel_for(exec->pool, rows, row_grain(vocab), cross_entropy_range, &job);

  bad_target first = {-1, 0, 0};
  for (int i = 0; i < threads; i++) {
    if (bad[i].row >= 0 && (first.row < 0 || bad[i].row < first.row)) {
      first.row = bad[i].row;
      first.target = bad[i].target;
    }
    first.count += bad[i].count;
  }
  free(scratch);
  free(bad);
  if (first.row < 0)
    return TSR_OK;
  if (exec->error && exec->error_capacity > 0)
    snprintf(exec->error, exec->error_capacity,
             "targets[%lld] = %lld is outside [0, %lld) and is not ignore_index (%lld); "
             "%lld row(s) have such targets and their loss is NaN",
             (long long)first.row, (long long)first.target, (long long)vocab,
             (long long)args->ignore_index, (long long)first.count);
  return TSR_ERROR_INVALID_VALUE;
}
