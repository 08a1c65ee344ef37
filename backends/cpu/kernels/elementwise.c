/* SPDX-License-Identifier: Apache-2.0 */
/* Elementwise ops (SwiGLU, GELU) and rotary position embedding.
 *
 * Elementwise ops split their rows (the last dimension; the whole tensor
 * when every tensor is dense) into tasks over the thread pool. f32 data of
 * unit stride is computed where it lies, one pass over memory, with the
 * inputs prefetched ahead into L2 and large outputs written with streaming
 * stores; other data is converted through small f32 buffers. The array
 * kernels come in plain C and, on x86-64, AVX2 and AVX-512 versions picked
 * by the plugin's instruction set. */
#include "elementwise.h"

/* Elements per task; tasks are grouped into chunks of the pool by the split
 * cost model (cpu_grain) at the one-thread rates below (AVX-512, bf16 and
 * f32 alike within a few percent). STAGE_ELEMENTS: the f32 buffers of the
 * converting path. */
enum { TASK_ELEMENTS = 4096, STAGE_ELEMENTS = 512 };
#define ACTIVATION_NS_PER_ELEMENT 0.5
#define ROPE_NS_PER_ELEMENT 0.5

/* ---- scalar activations (the GEMM epilogue and the plain C kernels) ---- */

/* -inf, whose formulas give inf / inf or inf * 0, is mapped to +0 with an
 * integer mask (branch-free, so the loops around it vectorise). */
static ALWAYS_INLINE float zero_if_minus_inf(float x, float value) {
  union {
    float f;
    uint32_t u;
  } in = {x}, out = {value};
  out.u &= ~(0u - (uint32_t)(in.u == 0xff800000u));
  return out.f;
}

/* Bulk SiLU and tanh-GELU: the formulas of cpu_activation with the
 * vectorisable exp_f32 in place of libm's expf (a few ulp instead of one). */
static ALWAYS_INLINE float silu_f32(float x) {
  return zero_if_minus_inf(x, x / (1.0f + exp_f32(-x)));
}

static ALWAYS_INLINE float gelu_tanh_f32(float x) {
  float u = SQRT_2_OVER_PI * (x + 0.044715f * x * x * x);
  return zero_if_minus_inf(x, x / (1.0f + exp_f32(-2.0f * u)));
}

float cpu_activation(int32_t activation, float x) {
  /* Each activation tends to 0 at -inf and to x at +inf; the formulas below
   * would give inf / inf or inf * 0 there. */
  if (isinf(x) && activation > TSR_ACT_NONE && activation < TSR_ACT_COUNT_)
    return x > 0.0f ? x : 0.0f;
  switch (activation) {
  case TSR_ACT_RELU:
    return x < 0.0f ? 0.0f : x; /* NaN passes through */
  case TSR_ACT_GELU_TANH: {
    /* 0.5 x (1 + tanh(u)) = x / (1 + e^(-2u)): no cancellation for x < 0. */
    float u = SQRT_2_OVER_PI * (x + 0.044715f * x * x * x);
    return x / (1.0f + expf(-2.0f * u));
  }
  case TSR_ACT_GELU_ERF:
    /* 1 + erf(z) = erfc(-z), accurate where erf(z) is near -1. */
    return 0.5f * x * erfcf(-x * INV_SQRT_2);
  case TSR_ACT_SILU:
    return x / (1.0f + expf(-x));
  default:
    return x;
  }
}
/* ---- plain C ---- */

static void swiglu_generic(float *y, const float *gate, const float *up, int64_t count, int stream,
                           int prefetch) {
  (void)stream;
  (void)prefetch;
  for (int64_t i = 0; i < count; i++)
    y[i] = silu_f32(gate[i]) * up[i];
}

static void gelu_generic(float *y, const float *x, int64_t count, int approximate, int stream,
                         int prefetch) {
  (void)stream;
  (void)prefetch;
  if (approximate == TSR_GELU_TANH) {
    for (int64_t i = 0; i < count; i++)
      y[i] = gelu_tanh_f32(x[i]);
  } else {
    for (int64_t i = 0; i < count; i++)
      y[i] = cpu_activation(TSR_ACT_GELU_ERF, x[i]);
  }
}

static void rope_neox_generic(float *y, const float *x, const float *cosines, const float *sines,
                              int64_t half, int64_t dim, int stream) {
  (void)stream;
  for (int64_t i = 0; i < half; i++) {
    float first = x[i], second = x[i + half];
    y[i] = first * cosines[i] - second * sines[i];
    y[i + half] = second * cosines[i] + first * sines[i];
  }
  for (int64_t i = 2 * half; i < dim; i++)
    y[i] = x[i];
}

const elementwise_kernels cpu_elementwise_kernels_generic = {
    swiglu_generic, gelu_generic, angles_generic, rope_neox_generic, rope_gptj_generic, NULL};

/* ---- elementwise: y = f(a) or y = f(a, b) ---- */

/* Whether t's elements fill [0, numel) in row-major order. */
static int is_dense(const tsr_plugin_tensor *t) {
  int64_t expected = 1;
  for (int32_t i = t->rank - 1; i >= 0; i--) {
    if (t->shape[i] != 1 && t->strides[i] != expected)
      return 0;
    expected *= t->shape[i];
  }
  return 1;
}

typedef struct elementwise_job {
  kernel_level level;
  const elementwise_kernels *kernels;
  int approximate;                    /* gelu: tsr_gelu_approx; -1 for SwiGLU */
  const tsr_plugin_tensor *a, *b, *y; /* b only for SwiGLU */
  const char *a_base, *b_base;
  char *y_base;
  int flat;   /* every tensor dense: one row of all elements */
  int direct; /* every tensor f32 with unit-stride rows: no conversion */
  int half;   /* SwiGLU, one 16-bit dtype, unit-stride rows: swiglu16 */
  int stream;
  int64_t row_length, tasks_per_row;
} elementwise_job;

static int64_t element_offset(const elementwise_job *job, const tsr_plugin_tensor *t, int64_t row) {
  return job->flat ? 0 : tsr_plugin_row_offset(t, row);
}

static void apply(const elementwise_job *job, float *y, const float *a, const float *b,
                  int64_t count, int stream, int prefetch) {
  if (job->approximate < 0)
    job->kernels->swiglu(y, a, b, count, stream, prefetch);
  else
    job->kernels->gelu(y, a, count, job->approximate, stream, prefetch);
}

static void elementwise_range(void *context, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const elementwise_job *job = context;
  const int64_t last = job->y->rank - 1;
  const int64_t a_stride = job->flat ? 1 : job->a->strides[last];
  const int64_t b_stride = job->flat || !job->b ? 1 : job->b->strides[last];
  const int64_t y_stride = job->flat ? 1 : job->y->strides[last];
  for (int64_t task = begin; task < end; task++) {
    int64_t row = task / job->tasks_per_row;
    int64_t start = task % job->tasks_per_row * TASK_ELEMENTS;
    int64_t stop =
        start + TASK_ELEMENTS < job->row_length ? start + TASK_ELEMENTS : job->row_length;
    int64_t a_row = element_offset(job, job->a, row);
    int64_t y_row = element_offset(job, job->y, row);
    int64_t b_row = job->b ? element_offset(job, job->b, row) : 0;
    if (job->half) {
      job->kernels->swiglu16((uint16_t *)job->y_base + y_row + start,
                             (const uint16_t *)job->a_base + a_row + start,
                             (const uint16_t *)job->b_base + b_row + start, stop - start,
                             job->y->dtype, job->stream, 1);
      continue;
    }
    if (job->direct) {
      const float *b = job->b ? (const float *)job->b_base + b_row + start : NULL;
      apply(job, (float *)job->y_base + y_row + start, (const float *)job->a_base + a_row + start,
            b, stop - start, job->stream, 1);
      continue;
    }
    float a[STAGE_ELEMENTS], b[STAGE_ELEMENTS];
    for (int64_t i = start; i < stop; i += STAGE_ELEMENTS) {
      int64_t count = stop - i < STAGE_ELEMENTS ? stop - i : STAGE_ELEMENTS;
      load_row(job->level, a, job->a_base, job->a->dtype, a_row + i * a_stride, a_stride, count,
               NULL);
      if (job->b)
        load_row(job->level, b, job->b_base, job->b->dtype, b_row + i * b_stride, b_stride, count,
                 NULL);
      apply(job, a, a, b, count, 0, 0);
      store_row(job->level, job->y_base, job->y->dtype, y_row + i * y_stride, y_stride, a, count,
                job->stream);
    }
  }
  if (job->stream)
    stream_fence(job->level);
}

static void elementwise_run(const cpu_exec *exec, elementwise_job *job) {
  const tsr_plugin_tensor *y = job->y;
  int64_t numel = 1;
  for (int32_t i = 0; i < y->rank; i++)
    numel *= y->shape[i];
  if (numel == 0)
    return;
  job->level = cpu_kernel_level();
  job->kernels = select_kernels(job->level);
  job->flat = is_dense(job->a) && is_dense(job->y) && (!job->b || is_dense(job->b));
  job->row_length = job->flat ? numel : y->shape[y->rank - 1];
  int64_t rows = job->flat ? 1 : tsr_plugin_row_count(y);
  int unit_rows =
      job->flat || (job->a->strides[job->a->rank - 1] == 1 && y->strides[y->rank - 1] == 1 &&
                    (!job->b || job->b->strides[job->b->rank - 1] == 1));
  job->direct = unit_rows && job->a->dtype == TSR_DTYPE_F32 && y->dtype == TSR_DTYPE_F32;
  job->half = unit_rows && job->approximate < 0 && job->kernels->swiglu16 &&
              y->dtype != TSR_DTYPE_F32 && job->a->dtype == y->dtype && job->b->dtype == y->dtype;
  job->stream = should_stream(numel, y->dtype);
  job->tasks_per_row = (job->row_length + TASK_ELEMENTS - 1) / TASK_ELEMENTS;
  int64_t task_elements = job->row_length < TASK_ELEMENTS ? job->row_length : TASK_ELEMENTS;
  cpu_pool_parallel_for(exec->pool, rows * job->tasks_per_row,
                        cpu_grain(ACTIVATION_NS_PER_ELEMENT * (double)task_elements),
                        elementwise_range, job);
}

tsr_status cpu_swiglu_run(const cpu_exec *exec, const tsr_swiglu_args *args) {
  elementwise_job job = {.approximate = -1,
                         .a = &args->gate,
                         .b = &args->up,
                         .y = &args->y,
                         .a_base = cpu_tensor_base(&args->gate),
                         .b_base = cpu_tensor_base(&args->up),
                         .y_base = cpu_tensor_base(&args->y)};
  elementwise_run(exec, &job);
  return TSR_OK;
}

tsr_status cpu_gelu_run(const cpu_exec *exec, const tsr_gelu_args *args) {
  elementwise_job job = {.approximate =
                             args->approximate == TSR_GELU_TANH ? TSR_GELU_TANH : TSR_GELU_ERF,
                         .a = &args->x,
                         .y = &args->y,
                         .a_base = cpu_tensor_base(&args->x),
                         .y_base = cpu_tensor_base(&args->y)};
  elementwise_run(exec, &job);
  return TSR_OK;
}

/* ---- rotary position embedding ---- */

typedef struct rope_job {
  const tsr_rope_args *args;
  kernel_level level;
  const elementwise_kernels *kernels;
  const char *x_base;
  char *y_base;
  int64_t seq_len, heads, head_dim, half;
  int direct; /* x and y f32 with unit-stride rows */
  int stream;
  float *scratch; /* per worker: cos[half], sin[half], cos2[2 half], sin2[2 half], row[2 dim] */
  size_t worker_floats;
  double *inverse_frequency; /* theta^(-2i / rotary_dim), i < half */
} rope_job;

/* One task: token (b, s), all heads. The angles depend on the position only,
 * so they are computed once per token. */
static void rope_range(void *context, int64_t begin, int64_t end, int worker) {
  const rope_job *job = context;
  const tsr_rope_args *args = job->args;
  const tsr_plugin_tensor *x = &args->x, *y = &args->y;
  const int64_t half = job->half, head_dim = job->head_dim, rotary = 2 * half;
  const int neox = args->style == TSR_ROPE_NEOX;
  float *cosines = job->scratch + (size_t)worker * job->worker_floats;
  float *sines = cosines + half;
  float *cos2 = sines + half, *sin2 = cos2 + rotary;
  float *row_in = sin2 + rotary, *row_out = row_in + head_dim;
  for (int64_t token = begin; token < end; token++) {
    int64_t s = token % job->seq_len, b = token / job->seq_len;
    job->kernels->angles(cosines, sines, (double)(args->position_offset + s),
                         job->inverse_frequency, half);
    if (!neox) {
      for (int64_t i = 0; i < half; i++) {
        cos2[2 * i] = cos2[2 * i + 1] = cosines[i];
        sin2[2 * i] = -sines[i];
        sin2[2 * i + 1] = sines[i];
      }
    }
    for (int64_t h = 0; h < job->heads; h++) {
      int64_t x_offset = b * x->strides[0] + s * x->strides[1] + h * x->strides[2];
      int64_t y_offset = b * y->strides[0] + s * y->strides[1] + h * y->strides[2];
      /* A row is read whole before it is written: y may be x. */
      const float *in = row_in;
      float *out = row_out;
      if (job->direct) {
        in = (const float *)job->x_base + x_offset;
        out = (float *)job->y_base + y_offset;
      } else {
        load_row(job->level, row_in, job->x_base, x->dtype, x_offset, x->strides[3], head_dim,
                 NULL);
      }
      if (neox)
        job->kernels->rope_neox(out, in, cosines, sines, half, head_dim, job->stream);
      else
        job->kernels->rope_gptj(out, in, cos2, sin2, rotary, head_dim, job->stream);
      if (!job->direct)
        store_row(job->level, job->y_base, y->dtype, y_offset, y->strides[3], row_out, head_dim,
                  job->stream);
    }
  }
  if (job->stream)
    stream_fence(job->level);
}

tsr_status cpu_rope_run(const cpu_exec *exec, const tsr_rope_args *args) {
  rope_job job = {.args = args,
                  .x_base = cpu_tensor_base(&args->x),
                  .y_base = cpu_tensor_base(&args->y),
                  .seq_len = args->x.shape[1],
                  .heads = args->x.shape[2],
                  .head_dim = args->x.shape[3],
                  .half = args->rotary_dim / 2};
  int64_t tokens = args->x.shape[0] * job.seq_len;
  if (tokens == 0 || job.heads == 0 || job.head_dim == 0)
    return TSR_OK;
  job.level = cpu_kernel_level();
  job.kernels = select_kernels(job.level);
  job.direct = args->x.dtype == TSR_DTYPE_F32 && args->y.dtype == TSR_DTYPE_F32 &&
               args->x.strides[3] == 1 && args->y.strides[3] == 1;
  job.stream = should_stream(tokens * job.heads * job.head_dim, args->y.dtype);
  int threads = cpu_pool_threads(exec->pool);
  job.worker_floats = ((size_t)(6 * job.half + 2 * job.head_dim) + 15u) & ~(size_t)15u;
  size_t scratch_bytes = job.worker_floats * sizeof(float) * (size_t)(threads > 0 ? threads : 1);
  size_t frequency_bytes = (size_t)(job.half > 0 ? job.half : 1) * sizeof(double);
  job.scratch = aligned_alloc(64, (scratch_bytes + 63u) & ~(size_t)63u);
  job.inverse_frequency = malloc(frequency_bytes);
  if (!job.scratch || !job.inverse_frequency) {
    free(job.scratch);
    free(job.inverse_frequency);
    if (exec->error && exec->error_capacity > 0)
      snprintf(exec->error, exec->error_capacity, "cannot allocate %zu bytes of rope scratch",
               scratch_bytes + frequency_bytes);
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  for (int64_t i = 0; i < job.half; i++)
    job.inverse_frequency[i] = pow((double)args->theta, -2.0 * (double)i / args->rotary_dim);
  int64_t token_elements = job.heads * job.head_dim;
  cpu_pool_parallel_for(exec->pool, tokens, cpu_grain(ROPE_NS_PER_ELEMENT * (double)token_elements),
                        rope_range, &job);
  free(job.scratch);
  free(job.inverse_frequency);
  return TSR_OK;
}
