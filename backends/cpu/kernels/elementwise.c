/* Elementwise ops (activations, SwiGLU, GELU) and rotary position
 * embedding. Elementwise ops walk rows of the last dimension (each tensor with
 * its own strides) in chunks, converting through small f32 buffers so the
 * arithmetic runs on contiguous floats. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "configs.h"
#include "cpu_internal.h"
#include "cpu_kernel_util.h"

/* Elements per task and per f32 staging buffer; tasks are grouped so a chunk
 * of the pool holds at least MIN_ELEMENTS_PER_CHUNK elements. */
enum { TASK_ELEMENTS = 4096, STAGE_ELEMENTS = 256, MIN_ELEMENTS_PER_CHUNK = 16384 };

static const float SQRT_2_OVER_PI = 0.7978845608028654f;
static const float INV_SQRT_2 = 0.7071067811865476f;

/* Bulk SiLU and tanh-GELU: the same formulas as cpu_activation, with the
 * vectorisable exp_f32 in place of libm's expf (a few ulp instead of one).
 * -inf, whose formula gives inf / inf, is mapped to +0 with an integer mask. */
static ALWAYS_INLINE float zero_if_minus_inf(float x, float value) {
  union {
    float f;
    uint32_t u;
  } in = {x}, out = {value};
  out.u &= ~(0u - (uint32_t)(in.u == 0xff800000u));
  return out.f;
}

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

/* The bulk loops, also compiled for AVX2 (the same C, 8 lanes instead of 4)
 * and picked by the plugin's instruction set. */
static ALWAYS_INLINE void swiglu_body(float *gate, const float *up, int64_t count) {
  for (int64_t k = 0; k < count; k++)
    gate[k] = silu_f32(gate[k]) * up[k];
}

static ALWAYS_INLINE void gelu_tanh_body(float *x, int64_t count) {
  for (int64_t k = 0; k < count; k++)
    x[k] = gelu_tanh_f32(x[k]);
}

static void swiglu_baseline(float *gate, const float *up, int64_t count) {
  swiglu_body(gate, up, count);
}

static void gelu_tanh_baseline(float *x, int64_t count) {
  gelu_tanh_body(x, count);
}

#if CPU_KERNELS_HAVE_AVX2
__attribute__((target("avx2,fma"))) static void swiglu_avx2(float *gate, const float *up,
                                                            int64_t count) {
  swiglu_body(gate, up, count);
}

__attribute__((target("avx2,fma"))) static void gelu_tanh_avx2(float *x, int64_t count) {
  gelu_tanh_body(x, count);
}
#endif

/* ---- elementwise: y = f(a) or y = f(a, b) ---- */

typedef enum elementwise_kind { ELEMENTWISE_SWIGLU, ELEMENTWISE_ACTIVATION } elementwise_kind;

typedef struct elementwise_job {
  elementwise_kind kind;
  int32_t activation;
  const tsr_plugin_tensor *a, *b, *y; /* b only for SwiGLU */
  const char *a_base, *b_base;
  char *y_base;
  int64_t row_length, tasks_per_row;
  void (*swiglu)(float *gate, const float *up, int64_t count);
  void (*gelu_tanh)(float *x, int64_t count);
} elementwise_job;

static void elementwise_range(void *context, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const elementwise_job *job = context;
  const int64_t last = job->y->rank - 1;
  float a[STAGE_ELEMENTS], b[STAGE_ELEMENTS];
  for (int64_t task = begin; task < end; task++) {
    int64_t row = task / job->tasks_per_row;
    int64_t start = task % job->tasks_per_row * TASK_ELEMENTS;
    int64_t stop =
        start + TASK_ELEMENTS < job->row_length ? start + TASK_ELEMENTS : job->row_length;
    int64_t a_row = tsr_plugin_row_offset(job->a, row);
    int64_t y_row = tsr_plugin_row_offset(job->y, row);
    int64_t b_row = job->b ? tsr_plugin_row_offset(job->b, row) : 0;
    for (int64_t i = start; i < stop; i += STAGE_ELEMENTS) {
      int64_t count = stop - i < STAGE_ELEMENTS ? stop - i : STAGE_ELEMENTS;
      load_span(a, job->a_base, job->a->dtype, a_row + i * job->a->strides[last],
                job->a->strides[last], count);
      if (job->kind == ELEMENTWISE_SWIGLU) {
        load_span(b, job->b_base, job->b->dtype, b_row + i * job->b->strides[last],
                  job->b->strides[last], count);
        job->swiglu(a, b, count);
      } else if (job->activation == TSR_ACT_GELU_TANH) {
        job->gelu_tanh(a, count);
      } else {
        for (int64_t k = 0; k < count; k++)
          a[k] = cpu_activation(job->activation, a[k]);
      }
      store_span(job->y_base, job->y->dtype, y_row + i * job->y->strides[last],
                 job->y->strides[last], a, count);
    }
  }
}

static void elementwise_run(const cpu_exec *exec, elementwise_job *job) {
  const tsr_plugin_tensor *y = job->y;
  job->row_length = y->shape[y->rank - 1];
  int64_t rows = tsr_plugin_row_count(y);
  if (rows == 0 || job->row_length == 0)
    return;
  job->tasks_per_row = (job->row_length + TASK_ELEMENTS - 1) / TASK_ELEMENTS;
  job->swiglu = swiglu_baseline;
  job->gelu_tanh = gelu_tanh_baseline;
#if CPU_KERNELS_HAVE_AVX2
  if (cpu_isa_active() >= CPU_ISA_AVX2) {
    job->swiglu = swiglu_avx2;
    job->gelu_tanh = gelu_tanh_avx2;
  }
#endif
  int64_t task_elements = job->row_length < TASK_ELEMENTS ? job->row_length : TASK_ELEMENTS;
  int64_t grain = MIN_ELEMENTS_PER_CHUNK / task_elements;
  cpu_pool_parallel_for(exec->pool, rows * job->tasks_per_row, grain > 0 ? grain : 1,
                        elementwise_range, job);
}

tsr_status cpu_swiglu_run(const cpu_exec *exec, const tsr_swiglu_args *args) {
  elementwise_job job = {.kind = ELEMENTWISE_SWIGLU,
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
  elementwise_job job = {.kind = ELEMENTWISE_ACTIVATION,
                         .activation = args->approximate == TSR_GELU_TANH ? TSR_ACT_GELU_TANH
                                                                          : TSR_ACT_GELU_ERF,
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
  const char *x_base;
  char *y_base;
  int64_t seq_len, heads, head_dim, half;
  float *scratch; /* per worker: cos[half], sin[half], row[head_dim] */
  size_t worker_floats;
  double *inverse_frequency; /* theta^(-2i / rotary_dim), i < half */
} rope_job;

/* One task: token (b, s), all heads. The angles depend on the position only,
 * so they are computed once per token. */
static void rope_range(void *context, int64_t begin, int64_t end, int worker) {
  const rope_job *job = context;
  const tsr_rope_args *args = job->args;
  const tsr_plugin_tensor *x = &args->x, *y = &args->y;
  const int64_t half = job->half, head_dim = job->head_dim;
  const int neox = args->style == TSR_ROPE_NEOX;
  float *cosines = job->scratch + (size_t)worker * job->worker_floats;
  float *sines = cosines + half;
  float *row = sines + half;
  for (int64_t token = begin; token < end; token++) {
    int64_t s = token % job->seq_len, b = token / job->seq_len;
    double position = (double)(args->position_offset + s);
    for (int64_t i = 0; i < half; i++) {
      double angle = position * job->inverse_frequency[i];
      cosines[i] = (float)cos(angle);
      sines[i] = (float)sin(angle);
    }
    for (int64_t h = 0; h < job->heads; h++) {
      int64_t x_offset = b * x->strides[0] + s * x->strides[1] + h * x->strides[2];
      int64_t y_offset = b * y->strides[0] + s * y->strides[1] + h * y->strides[2];
      /* The whole row is read before any write: y may be x. */
      load_span(row, job->x_base, x->dtype, x_offset, x->strides[3], head_dim);
      if (neox) {
        for (int64_t i = 0; i < half; i++) {
          float first = row[i], second = row[i + half];
          row[i] = first * cosines[i] - second * sines[i];
          row[i + half] = second * cosines[i] + first * sines[i];
        }
      } else {
        for (int64_t i = 0; i < half; i++) {
          float first = row[2 * i], second = row[2 * i + 1];
          row[2 * i] = first * cosines[i] - second * sines[i];
          row[2 * i + 1] = second * cosines[i] + first * sines[i];
        }
      }
      store_span(job->y_base, y->dtype, y_offset, y->strides[3], row, head_dim);
    }
  }
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
  int threads = cpu_pool_threads(exec->pool);
  job.worker_floats = (size_t)(2 * job.half + job.head_dim);
  size_t scratch_bytes = job.worker_floats * sizeof(float) * (size_t)(threads > 0 ? threads : 1);
  size_t frequency_bytes = (size_t)(job.half > 0 ? job.half : 1) * sizeof(double);
  job.scratch = malloc(scratch_bytes);
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
  int64_t grain = MIN_ELEMENTS_PER_CHUNK / token_elements;
  cpu_pool_parallel_for(exec->pool, tokens, grain > 0 ? grain : 1, rope_range, &job);
  free(job.scratch);
  free(job.inverse_frequency);
  return TSR_OK;
}
