/* SPDX-License-Identifier: Apache-2.0 */
/* Softmax and cross-entropy: the row ops that exponentiate (norm.h has the
 * row walkers and the array kernels they share with norm.c). */
#include "norm.h"

/* ---- softmax ---- */

typedef struct softmax_job {
  row_job rows;
  const tsr_softmax_args *args;
  int stream;
  int direct;
  int direct16; /* 16-bit x and y of one dtype, unit stride: softmax_direct16 */
} softmax_job;

/* e = e^((x - max) * scale) with the factor that normalises it: 1 / sum,
 * or for a row of all -inf, e filled with 0 (NaN when the row has a NaN,
 * which the max ignored) and factor 1. max is the row's max of x. */
static float softmax_exponentials(const row_kernels *k, float *e, const float *x, float scale,
                                  float max, int64_t width) {
  if (max == -INFINITY) {
    float fill = has_nan(x, width) ? NAN : 0.0f;
    for (int64_t i = 0; i < width; i++)
      e[i] = fill;
    return 1.0f;
  }
  /* NaN or +inf in the row make every output NaN through the sum. */
  return (float)(1.0 / k->exp_sum(e, x, scale, max, width));
}

/* Scratch that is stored to while rows of x are loaded sits half a page
 * away from x's offset within its page: a load whose address agrees with an
 * earlier store's in the low 12 bits can be taken for dependent on it (4K
 * aliasing) and wait, and rows of x and of a page-aligned scratch agree at
 * every step. The scratch block carries ALIAS_SHIFT_FLOATS spare floats. */
enum { ALIAS_SHIFT_FLOATS = 1024 };

static float *away_from_page_offset(float *scratch, const float *x) {
  uintptr_t have = (uintptr_t)scratch % 4096, want = ((uintptr_t)x + 2048) % 4096;
  return scratch + ((want - have + 4096) % 4096) / 64 * 64 / sizeof(float);
}

/* Per-worker scratch of the pipelined softmax: two rows of exponentials
 * and, per row of blocks, two sets of factors and the blocks' maxima and
 * sums. */
static int64_t softmax_direct_floats(int64_t width) {
  int64_t blocks = (width + SOFTMAX_BLOCK - 1) / SOFTMAX_BLOCK;
  return 2 * width + 4 * ((blocks + 15) / 16 * 16) + ALIAS_SHIFT_FLOATS;
}

/* Rows of f32 in place: each row's output pass fused with the reading of the
 * next row (block maxima, exponentials relative to them); a row's
 * exponentials alternate between two scratch rows. */
static void softmax_direct(const softmax_job *job, int64_t begin, int64_t end, int worker) {
  const tsr_softmax_args *args = job->args;
  const row_kernels *k = job->rows.kernels;
  const int64_t width = job->rows.width;
  const int64_t blocks = (width + SOFTMAX_BLOCK - 1) / SOFTMAX_BLOCK;
  const int64_t block_floats = (blocks + 15) / 16 * 16;
  float *e[2], *factors[2];
  const float *x = f32_row(&args->x, begin);
  e[0] = away_from_page_offset(worker_scratch(&job->rows, worker), x);
  e[1] = e[0] + width;
  factors[0] = e[1] + width;
  factors[1] = factors[0] + block_floats;
  float *block_max = factors[1] + block_floats, *block_sum = block_max + block_floats;
  row_ahead plan;
  k->softmax_step(NULL, NULL, NULL, width, 0, x, args->scale, e[0], block_max, block_sum,
                  plan_ahead(&plan, &args->x, NULL, begin, end));
  for (int64_t row = begin; row < end; row++) {
    int current = (int)((row - begin) & 1);
    if (k->softmax_factors(block_max, block_sum, blocks, args->scale, factors[current]) ==
        -INFINITY) {
      /* every score -inf: zeros; a NaN (ignored by the max) wins */
      float fill = has_nan(x, width) ? NAN : 0.0f;
      for (int64_t i = 0; i < width; i++)
        e[current][i] = fill;
      for (int64_t b = 0; b < blocks; b++)
        factors[current][b] = 1.0f;
    }
    x = row + 1 < end ? f32_row(&args->x, row + 1) : NULL;
    k->softmax_step(f32_row(&args->y, row), e[current], factors[current], width, job->stream, x,
                    args->scale, e[1 - current], block_max, block_sum,
                    x ? plan_ahead(&plan, &args->x, NULL, row + 1, end) : NULL);
  }
  if (job->stream)
    stream_fence(job->rows.level);
}

/* 16-bit rows, pipelined: the current row as f32 in one scratch row, its
 * exponentials in a third, and the next row widened (and its max taken) in
 * the loop that writes this row's y. */
static void softmax_direct16(const softmax_job *job, int64_t begin, int64_t end, int worker) {
  const tsr_softmax_args *args = job->args;
  const row_kernels *k = job->rows.kernels;
  const int64_t width = job->rows.width;
  const int32_t dtype = args->x.dtype;
  float *scratch = worker_scratch(&job->rows, worker);
  float *rows_f32[2] = {scratch, scratch + width}, *e = scratch + 2 * width;
  row_ahead plan;
  float max = k->sm16_step(NULL, NULL, 0.0f, width, 0, half_row(&args->x, begin), rows_f32[0],
                           dtype, plan_ahead(&plan, &args->x, NULL, begin, end));
  for (int64_t row = begin; row < end; row++) {
    const float *x = rows_f32[(row - begin) & 1];
    float factor = softmax_exponentials(k, e, x, args->scale, max, width);
    const uint16_t *next = row + 1 < end ? half_row(&args->x, row + 1) : NULL;
    max = k->sm16_step((uint16_t *)half_row(&args->y, row), e, factor, width, job->stream, next,
                       rows_f32[(row + 1 - begin) & 1], dtype,
                       plan_ahead(&plan, &args->x, NULL, row + 1, end));
  }
  if (job->stream)
    stream_fence(job->rows.level);
}

static void softmax_range(void *context, int64_t begin, int64_t end, int worker) {
  const softmax_job *job = context;
  if (job->direct) {
    softmax_direct(job, begin, end, worker);
    return;
  }
  if (job->direct16) {
    softmax_direct16(job, begin, end, worker);
    return;
  }
  const tsr_softmax_args *args = job->args;
  const row_kernels *k = job->rows.kernels;
  const int64_t width = job->rows.width;
  const float scale = args->scale;
  float *first = worker_scratch(&job->rows, worker), *second = first + width;
  for (int64_t row = begin; row < end; row++) {
    row_ahead plan;
    const row_ahead *ahead = plan_ahead(&plan, &args->x, NULL, row, end);
    const float *x = read_row(&job->rows, &args->x, row, first, ahead);
    float max = k->max_of(x, width, first_pass_ahead(&args->x, ahead));
    float *y = output_row(&args->y, row, second);
    /* The exponentials go to scratch so that y is written once. */
    float factor = softmax_exponentials(k, second, x, scale, max, width);
    k->scale(y, second, factor, NULL, width, job->stream);
    finish_row(&job->rows, &args->y, row, y, job->stream);
  }
  if (job->stream)
    stream_fence(job->rows.level);
}

tsr_status cpu_softmax_run(const cpu_exec *exec, const tsr_softmax_args *args) {
  int64_t width = args->x.shape[args->x.rank - 1];
  int64_t rows = tsr_plugin_row_count(&args->x);
  if (rows == 0 || width == 0)
    return TSR_OK;
  softmax_job job = {.args = args};
  /* softmax_direct16: two f32 rows and the exponentials. */
  int64_t per_worker = softmax_direct_floats(width);
  if (per_worker < 3 * width)
    per_worker = 3 * width;
  if (!row_job_init(&job.rows, exec, width, per_worker, 0, "cannot allocate softmax scratch"))
    return TSR_ERROR_OUT_OF_MEMORY;
  job.stream = should_stream(rows * width, args->y.dtype);
  const tsr_plugin_tensor *tensors[2] = {&args->x, &args->y};
  job.direct = job.rows.kernels->softmax_step && all_rows_f32(tensors, 2);
  job.direct16 = job.rows.kernels->sm16_step && half_rows(&args->x, &args->y);
  cpu_pool_parallel_for(exec->pool, rows, row_grain(width, SOFTMAX_NS_PER_ELEMENT), softmax_range,
                        &job);
  free(job.rows.scratch);
  return TSR_OK;
}

/* ---- cross-entropy ---- */

typedef struct bad_target {
  int64_t row; /* first bad row this worker saw; -1 when none */
} bad_target;

typedef struct cross_entropy_job {
  row_job rows;
  const tsr_cross_entropy_args *args;
  bad_target *bad; /* per worker */
  int direct;
} cross_entropy_job;

/* Writes row `row`'s loss (and lse) from its log-sum-exp; records a target
 * outside [0, vocab) that is not ignore_index. */
static void cross_entropy_finish(const cross_entropy_job *job, bad_target *bad, int64_t row,
                                 const float *x, double lse) {
  const tsr_cross_entropy_args *args = job->args;
  const int64_t vocab = job->rows.width;
  int64_t target =
      ((const int32_t *)cpu_tensor_base(&args->targets))[row * args->targets.strides[0]];
  float value;
  if (target == args->ignore_index) {
    value = 0.0f;
  } else if (target < 0 || target >= vocab) {
    value = NAN;
    if (bad->row < 0)
      bad->row = row;
  } else {
    value = (float)(lse - (double)x[target]);
  }
  ((float *)cpu_tensor_base(&args->loss))[row * args->loss.strides[0]] = value;
  if (args->lse.buffer)
    ((float *)cpu_tensor_base(&args->lse))[row * args->lse.strides[0]] = (float)lse;
}

/* log sum e^x from the row's max and the sum of e^(x - max): all -inf gives
 * -inf (log 0), a +inf logit +inf, and a NaN logit NaN. */
static double log_sum_exp(float max, double sum, const float *x, int64_t vocab) {
  if (isinf(max))
    return has_nan(x, vocab) ? NAN : (double)max;
  return (double)max + log(sum);
}

static void cross_entropy_direct(const cross_entropy_job *job, int64_t begin, int64_t end,
                                 int worker) {
  const tsr_cross_entropy_args *args = job->args;
  const row_kernels *k = job->rows.kernels;
  const int64_t vocab = job->rows.width;
  row_ahead plan;
  const float *x = f32_row(&args->logits, begin);
  float max = k->max_of(x, vocab, plan_ahead(&plan, &args->logits, NULL, begin, end));
  for (int64_t row = begin; row < end; row++) {
    double sum;
    float next_max = 0.0f;
    const float *next = row + 1 < end ? f32_row(&args->logits, row + 1) : NULL;
    if (next)
      sum = k->xe_step(x, max, vocab, next, &next_max,
                       plan_ahead(&plan, &args->logits, NULL, row + 1, end));
    else
      sum = k->exp_sum(NULL, x, 1.0f, max, vocab);
    cross_entropy_finish(job, &job->bad[worker], row, x, log_sum_exp(max, sum, x, vocab));
    x = next;
    max = next_max;
  }
}

static void cross_entropy_range(void *context, int64_t begin, int64_t end, int worker) {
  const cross_entropy_job *job = context;
  if (job->direct) {
    cross_entropy_direct(job, begin, end, worker);
    return;
  }
  const tsr_cross_entropy_args *args = job->args;
  const row_kernels *k = job->rows.kernels;
  const int64_t vocab = job->rows.width;
  float *scratch = worker_scratch(&job->rows, worker);
  for (int64_t row = begin; row < end; row++) {
    row_ahead plan;
    const row_ahead *ahead = plan_ahead(&plan, &args->logits, NULL, row, end);
    const float *x = read_row(&job->rows, &args->logits, row, scratch, ahead);
    float max = k->max_of(x, vocab, first_pass_ahead(&args->logits, ahead));
    /* exp(x - inf) is NaN; the sum is not used then */
    double sum = isinf(max) ? 0.0 : k->exp_sum(NULL, x, 1.0f, max, vocab);
    cross_entropy_finish(job, &job->bad[worker], row, x, log_sum_exp(max, sum, x, vocab));
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
  cross_entropy_job job = {.args = args};
  if (!row_job_init(&job.rows, exec, vocab, vocab, 0, "cannot allocate cross-entropy scratch"))
    return TSR_ERROR_OUT_OF_MEMORY;
  job.bad = calloc((size_t)threads, sizeof *job.bad);
  if (!job.bad) {
    free(job.rows.scratch);
    set_error(exec, "cannot allocate cross-entropy scratch", (size_t)threads * sizeof *job.bad);
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  for (int i = 0; i < threads; i++)
    job.bad[i].row = -1;
  const tsr_plugin_tensor *tensors[1] = {&args->logits};
  job.direct = job.rows.kernels->xe_step && all_rows_f32(tensors, 1);
  cpu_pool_parallel_for(exec->pool, rows, row_grain(vocab, CROSS_ENTROPY_NS_PER_ELEMENT),
                        cross_entropy_range, &job);

  int64_t first = -1;
  for (int i = 0; i < threads; i++)
    if (job.bad[i].row >= 0 && (first < 0 || job.bad[i].row < first))
      first = job.bad[i].row;
  free(job.rows.scratch);
  free(job.bad);
  /* A target out of range is a fault in device data, as on the GPUs: the
   * row's loss is NaN, the rest is computed, and tsr_queue_finish names the
   * first such row (with this call's vocab and ignore_index when its row is
   * the smallest so far). */
  if (first >= 0 && cpu_fault_record(exec, TSR_PLUGIN_FAULT_CE_TARGET, first) &&
      exec->fault_context) {
    exec->fault_context->vocab = vocab;
    exec->fault_context->ignore_index = args->ignore_index;
  }
  return TSR_OK;
}
