/* SPDX-License-Identifier: Apache-2.0 */
/* RMSNorm (with the residual add) and LayerNorm, and the plain C array
 * kernels of every row op (norm.h describes how the row ops work). */
#include "norm.h"

/* ---- plain C ---- */

/* Reductions keep independent lanes, so they vectorise without reassociation. */
enum { LANES = 8 };

static double sum_generic(const float *x, int64_t count, const row_ahead *ahead) {
  (void)ahead;
  double lanes[LANES] = {0};
  int64_t i = 0;
  for (; i + LANES <= count; i += LANES)
    for (int k = 0; k < LANES; k++)
      lanes[k] += (double)x[i + k];
  double result = 0.0;
  for (; i < count; i++)
    result += (double)x[i];
  for (int k = 0; k < LANES; k++)
    result += lanes[k];
  return result;
}

static double sum_squares_generic(const float *x, float centre, int64_t count,
                                  const row_ahead *ahead) {
  (void)ahead;
  double lanes[LANES] = {0};
  int64_t i = 0;
  for (; i + LANES <= count; i += LANES)
    for (int k = 0; k < LANES; k++) {
      double d = (double)(x[i + k] - centre);
      lanes[k] += d * d;
    }
  double result = 0.0;
  for (; i < count; i++) {
    double d = (double)(x[i] - centre);
    result += d * d;
  }
  for (int k = 0; k < LANES; k++)
    result += lanes[k];
  return result;
}

static double add_sum_squares_generic(float *h, const float *x, const float *r, int64_t count,
                                      const row_ahead *ahead) {
  for (int64_t i = 0; i < count; i++)
    h[i] = x[i] + r[i];
  return sum_squares_generic(h, 0.0f, count, ahead);
}

static void scale_generic(float *y, const float *x, float factor, const float *weight,
                          int64_t count, int stream) {
  (void)stream;
  if (weight) {
    for (int64_t i = 0; i < count; i++)
      y[i] = x[i] * factor * weight[i];
  } else {
    for (int64_t i = 0; i < count; i++)
      y[i] = x[i] * factor;
  }
}

static void normalize_generic(float *y, const float *x, float mean, float factor,
                              const float *weight, const float *bias, int64_t count, int stream) {
  (void)stream;
  for (int64_t i = 0; i < count; i++) {
    float value = (x[i] - mean) * factor;
    if (weight)
      value *= weight[i];
    if (bias)
      value += bias[i];
    y[i] = value;
  }
}

static float max_of_generic(const float *x, int64_t count, const row_ahead *ahead) {
  (void)ahead;
  float lanes[LANES];
  for (int k = 0; k < LANES; k++)
    lanes[k] = -INFINITY;
  int64_t i = 0;
  for (; i + LANES <= count; i += LANES)
    for (int k = 0; k < LANES; k++)
      lanes[k] = x[i + k] > lanes[k] ? x[i + k] : lanes[k];
  float result = -INFINITY;
  for (; i < count; i++)
    result = x[i] > result ? x[i] : result;
  for (int k = 0; k < LANES; k++)
    result = lanes[k] > result ? lanes[k] : result;
  return result;
}

static double exp_sum_generic(float *e, const float *x, float scale, float max, int64_t count) {
  double lanes[LANES] = {0};
  float block[LANES];
  for (int64_t i = 0; i < count; i += LANES) {
    int64_t n = count - i < LANES ? count - i : LANES;
    for (int64_t k = 0; k < n; k++)
      block[k] = exp_f32((x[i + k] - max) * scale);
    if (e)
      memcpy(e + i, block, (size_t)n * sizeof(float));
    for (int64_t k = 0; k < n; k++)
      lanes[k] += (double)block[k];
  }
  double result = 0.0;
  for (int k = 0; k < LANES; k++)
    result += lanes[k];
  return result;
}

/* No fused steps: the row loops run the passes one after another. */
const row_kernels cpu_norm_kernels_generic = {.sum = sum_generic,
                                              .sum_squares = sum_squares_generic,
                                              .add_sum_squares = add_sum_squares_generic,
                                              .scale = scale_generic,
                                              .normalize = normalize_generic,
                                              .max_of = max_of_generic,
                                              .exp_sum = exp_sum_generic};

/* ---- RMSNorm ---- */

typedef struct rmsnorm_job {
  row_job rows;
  const tsr_rmsnorm_args *args;
  const float *weight;
  int stream;
  int direct;   /* f32 unit-stride rows throughout and a fused step: pipelined rows */
  int direct16; /* the same for 16-bit x and y of one dtype, without a residual */
} rmsnorm_job;

/* 16-bit rows without a residual, pipelined like rmsnorm_direct: each row's
 * output pass sums the next row's squares, both converted in registers. */
static void rmsnorm_direct16(const rmsnorm_job *job, int64_t begin, int64_t end) {
  const tsr_rmsnorm_args *args = job->args;
  const row_kernels *k = job->rows.kernels;
  const int64_t width = job->rows.width;
  const int32_t dtype = args->x.dtype;
  row_ahead plan;
  double sum_squares = k->rms16_step(NULL, half_row(&args->x, begin), 0.0f, NULL, width, 0, NULL,
                                     dtype, plan_ahead(&plan, &args->x, NULL, begin, end));
  for (int64_t row = begin; row < end; row++) {
    float factor = inverse_root(sum_squares, width, args->eps);
    uint16_t *y = (uint16_t *)half_row(&args->y, row);
    const uint16_t *next = row + 1 < end ? half_row(&args->x, row + 1) : NULL;
    sum_squares = k->rms16_step(y, half_row(&args->x, row), factor, job->weight, width, job->stream,
                                next, dtype, plan_ahead(&plan, &args->x, NULL, row + 1, end));
  }
  if (job->stream)
    stream_fence(job->rows.level);
}

/* Rows of f32 in place, the output pass of each row fused with the first
 * pass of the next (h of rows with a residual alternates between two
 * scratch rows). */
static void rmsnorm_direct(const rmsnorm_job *job, int64_t begin, int64_t end, int worker) {
  const tsr_rmsnorm_args *args = job->args;
  const row_kernels *k = job->rows.kernels;
  const int64_t width = job->rows.width;
  const tsr_plugin_tensor *residual = args->residual.buffer ? &args->residual : NULL;
  const int residual_out = args->residual_out.buffer != NULL;
  float *h_rows[2] = {worker_scratch(&job->rows, worker),
                      worker_scratch(&job->rows, worker) + width};
  row_ahead plan;
  const float *h = f32_row(&args->x, begin);
  double sum_squares;
  if (residual) {
    sum_squares = k->add_sum_squares(h_rows[0], h, f32_row(residual, begin), width,
                                     plan_ahead(&plan, &args->x, residual, begin, end));
    h = h_rows[0];
    if (residual_out)
      store_row(job->rows.level, cpu_tensor_base(&args->residual_out), TSR_DTYPE_F32,
                tsr_plugin_row_offset(&args->residual_out, begin), 1, h, width, job->stream);
  } else {
    sum_squares = k->sum_squares(h, 0.0f, width, plan_ahead(&plan, &args->x, NULL, begin, end));
  }
  for (int64_t row = begin; row < end; row++) {
    float factor = inverse_root(sum_squares, width, args->eps);
    float *y = f32_row(&args->y, row);
    if (row + 1 == end) {
      k->scale(y, h, factor, job->weight, width, job->stream);
      break;
    }
    const float *next_x = f32_row(&args->x, row + 1);
    float *next_h = residual ? h_rows[(row + 1 - begin) & 1] : NULL;
    sum_squares = k->rms_step(y, h, factor, job->weight, width, job->stream, next_x,
                              residual ? f32_row(residual, row + 1) : NULL, next_h,
                              residual_out ? f32_row(&args->residual_out, row + 1) : NULL,
                              plan_ahead(&plan, &args->x, residual, row + 1, end));
    h = residual ? next_h : next_x;
  }
  if (job->stream)
    stream_fence(job->rows.level);
}

static void rmsnorm_range(void *context, int64_t begin, int64_t end, int worker) {
  const rmsnorm_job *job = context;
  if (job->direct) {
    rmsnorm_direct(job, begin, end, worker);
    return;
  }
  if (job->direct16) {
    rmsnorm_direct16(job, begin, end);
    return;
  }
  const tsr_rmsnorm_args *args = job->args;
  const row_kernels *k = job->rows.kernels;
  const int64_t width = job->rows.width;
  /* x (converted), then r (converted) or y's f32 values, then h = x + r. */
  float *first = worker_scratch(&job->rows, worker);
  float *second = first + width, *third = second + width;
  for (int64_t row = begin; row < end; row++) {
    row_ahead plan;
    const row_ahead *ahead = plan_ahead(&plan, &args->x, &args->residual, row, end);
    const float *x = read_row(&job->rows, &args->x, row, first, ahead);
    const float *h = x;
    double sum_squares;
    float *y_values = second;
    if (args->residual.buffer) {
      const float *r = read_row(&job->rows, &args->residual, row, second, NULL);
      sum_squares = k->add_sum_squares(third, x, r, width, first_pass_ahead(&args->x, ahead));
      h = third;
      y_values = first; /* x is no longer needed */
      if (args->residual_out.buffer)
        store_row(job->rows.level, cpu_tensor_base(&args->residual_out), args->residual_out.dtype,
                  tsr_plugin_row_offset(&args->residual_out, row), last_stride(&args->residual_out),
                  h, width, job->stream);
    } else {
      sum_squares = k->sum_squares(x, 0.0f, width, first_pass_ahead(&args->x, ahead));
    }
    float inverse_rms = (float)(1.0 / sqrt(sum_squares / (double)width + (double)args->eps));
    float *y = output_row(&args->y, row, y_values);
    k->scale(y, h, inverse_rms, job->weight, width, job->stream);
    finish_row(&job->rows, &args->y, row, y, job->stream);
  }
  if (job->stream)
    stream_fence(job->rows.level);
}

tsr_status cpu_rmsnorm_run(const cpu_exec *exec, const tsr_rmsnorm_args *args) {
  int64_t width = args->x.shape[args->x.rank - 1];
  int64_t rows = tsr_plugin_row_count(&args->x);
  if (rows == 0 || width == 0)
    return TSR_OK;
  rmsnorm_job job = {.args = args};
  if (!row_job_init(&job.rows, exec, width, 3 * width, width, "cannot allocate rmsnorm scratch"))
    return TSR_ERROR_OUT_OF_MEMORY;
  job.weight = load_vector(job.rows.level, &args->weight, shared_scratch(&job.rows, exec));
  job.stream = should_stream(rows * width, args->y.dtype);
  const tsr_plugin_tensor *tensors[4] = {&args->x, &args->residual, &args->y, &args->residual_out};
  job.direct = job.rows.kernels->rms_step && all_rows_f32(tensors, 4);
  job.direct16 =
      job.rows.kernels->rms16_step && !args->residual.buffer && half_rows(&args->x, &args->y);
  cpu_pool_parallel_for(exec->pool, rows, row_grain(width, RMSNORM_NS_PER_ELEMENT), rmsnorm_range,
                        &job);
  free(job.rows.scratch);
  return TSR_OK;
}

/* ---- LayerNorm ---- */

typedef struct layernorm_job {
  row_job rows;
  const tsr_layernorm_args *args;
  const float *weight, *bias;
  int stream;
  int direct;
  int direct16; /* 16-bit x and y of one dtype, unit stride: layernorm_direct16 */
} layernorm_job;

static void layernorm_direct(const layernorm_job *job, int64_t begin, int64_t end) {
  const tsr_layernorm_args *args = job->args;
  const row_kernels *k = job->rows.kernels;
  const int64_t width = job->rows.width;
  row_ahead plan;
  const float *x = f32_row(&args->x, begin);
  double mean = k->sum(x, width, plan_ahead(&plan, &args->x, NULL, begin, end)) / (double)width;
  for (int64_t row = begin; row < end; row++) {
    /* The second pass, over the row in cache: the variance of the centred
     * values does not cancel. */
    double sum_squares = k->sum_squares(x, (float)mean, width, NULL);
    float factor = inverse_root(sum_squares, width, args->eps);
    float *y = f32_row(&args->y, row);
    if (row + 1 == end) {
      k->normalize(y, x, (float)mean, factor, job->weight, job->bias, width, job->stream);
      break;
    }
    const float *next = f32_row(&args->x, row + 1);
    mean = k->ln_step(y, x, (float)mean, factor, job->weight, job->bias, width, job->stream, next,
                      plan_ahead(&plan, &args->x, NULL, row + 1, end)) /
           (double)width;
    x = next;
  }
  if (job->stream)
    stream_fence(job->rows.level);
}

/* 16-bit rows, pipelined as layernorm_direct: the current row as f32 in
 * one scratch row (its second pass reads it there), the next widened into
 * the other while this row's y is written. */
static void layernorm_direct16(const layernorm_job *job, int64_t begin, int64_t end, int worker) {
  const tsr_layernorm_args *args = job->args;
  const row_kernels *k = job->rows.kernels;
  const int64_t width = job->rows.width;
  const int32_t dtype = args->x.dtype;
  float *rows_f32[2] = {worker_scratch(&job->rows, worker),
                        worker_scratch(&job->rows, worker) + width};
  row_ahead plan;
  double sum = k->ln16_step(NULL, NULL, 0.0f, 0.0f, NULL, NULL, width, 0, half_row(&args->x, begin),
                            rows_f32[0], dtype, plan_ahead(&plan, &args->x, NULL, begin, end));
  for (int64_t row = begin; row < end; row++) {
    const float *x = rows_f32[(row - begin) & 1];
    double mean = sum / (double)width;
    /* The variance of the centred values (x in cache): it does not cancel. */
    double sum_squares = k->sum_squares(x, (float)mean, width, NULL);
    float factor = inverse_root(sum_squares, width, args->eps);
    const uint16_t *next = row + 1 < end ? half_row(&args->x, row + 1) : NULL;
    sum = k->ln16_step((uint16_t *)half_row(&args->y, row), x, (float)mean, factor, job->weight,
                       job->bias, width, job->stream, next, rows_f32[(row + 1 - begin) & 1], dtype,
                       plan_ahead(&plan, &args->x, NULL, row + 1, end));
  }
  if (job->stream)
    stream_fence(job->rows.level);
}

static void layernorm_range(void *context, int64_t begin, int64_t end, int worker) {
  const layernorm_job *job = context;
  if (job->direct) {
    layernorm_direct(job, begin, end);
    return;
  }
  if (job->direct16) {
    layernorm_direct16(job, begin, end, worker);
    return;
  }
  const tsr_layernorm_args *args = job->args;
  const row_kernels *k = job->rows.kernels;
  const int64_t width = job->rows.width;
  float *first = worker_scratch(&job->rows, worker), *second = first + width;
  for (int64_t row = begin; row < end; row++) {
    row_ahead plan;
    const row_ahead *ahead = plan_ahead(&plan, &args->x, NULL, row, end);
    const float *x = read_row(&job->rows, &args->x, row, first, ahead);
    /* Two passes (the second over the row in cache): the variance of the
     * centred values does not cancel. */
    double mean = k->sum(x, width, first_pass_ahead(&args->x, ahead)) / (double)width;
    double sum_squares = k->sum_squares(x, (float)mean, width, NULL);
    float inverse_std = (float)(1.0 / sqrt(sum_squares / (double)width + (double)args->eps));
    float *y = output_row(&args->y, row, second);
    k->normalize(y, x, (float)mean, inverse_std, job->weight, job->bias, width, job->stream);
    finish_row(&job->rows, &args->y, row, y, job->stream);
  }
  if (job->stream)
    stream_fence(job->rows.level);
}

tsr_status cpu_layernorm_run(const cpu_exec *exec, const tsr_layernorm_args *args) {
  int64_t width = args->x.shape[args->x.rank - 1];
  int64_t rows = tsr_plugin_row_count(&args->x);
  if (rows == 0 || width == 0)
    return TSR_OK;
  layernorm_job job = {.args = args};
  if (!row_job_init(&job.rows, exec, width, 2 * width, 2 * width,
                    "cannot allocate layernorm scratch"))
    return TSR_ERROR_OUT_OF_MEMORY;
  float *vectors = shared_scratch(&job.rows, exec);
  job.weight = load_vector(job.rows.level, &args->weight, vectors);
  job.bias = load_vector(job.rows.level, &args->bias, vectors + width);
  job.stream = should_stream(rows * width, args->y.dtype);
  const tsr_plugin_tensor *tensors[2] = {&args->x, &args->y};
  job.direct = job.rows.kernels->ln_step && all_rows_f32(tensors, 2);
  job.direct16 = job.rows.kernels->ln16_step && half_rows(&args->x, &args->y);
  cpu_pool_parallel_for(exec->pool, rows, row_grain(width, LAYERNORM_NS_PER_ELEMENT),
                        layernorm_range, &job);
  free(job.rows.scratch);
  return TSR_OK;
}
