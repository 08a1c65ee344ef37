/* SPDX-License-Identifier: Apache-2.0 */
/* One correct small run of every op on the CPU device, compared element by
 * element with the fp64 reference (tessera/reference.h). The reference reads
 * the same buffers through tsr_buffer_map, before the op runs (so in-place
 * forms are checked against the original inputs). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_test.h"
#include "tessera/reference.h"

static tsr_device *device;
static tsr_queue *queue;

/* ---- data ---- */

static uint32_t random_state = 12345u;

/* Uniform in [-1, 1), from a fixed seed. */
static float next_value(void) {
  random_state = random_state * 1664525u + 1013904223u;
  return (float)((random_state >> 8) & 0xffffu) / 32768.0f - 1.0f;
}

/* A buffer of `count` elements of `dtype` holding seeded values. */
static tsr_buffer *random_buffer(tsr_dtype dtype, int64_t count) {
  size_t element = tsr_dtype_size(dtype);
  tsr_buffer *buffer = NULL;
  REQUIRE_OK(tsr_buffer_create(device, (size_t)count * element, &buffer));
  unsigned char *host = malloc((size_t)count * element);
  REQUIRE(host != NULL);
  for (int64_t i = 0; i < count; i++)
    tsr_store_from_f32(host, (int32_t)dtype, i, next_value());
  REQUIRE_OK(tsr_buffer_write(queue, buffer, 0, host, (size_t)count * element));
  free(host);
  return buffer;
}

/* Output buffers start as NaN, so an element the op does not write fails. */
static tsr_buffer *nan_buffer(tsr_dtype dtype, int64_t count) {
  size_t element = tsr_dtype_size(dtype);
  tsr_buffer *buffer = NULL;
  REQUIRE_OK(tsr_buffer_create(device, (size_t)count * element, &buffer));
  unsigned char *host = malloc((size_t)count * element);
  REQUIRE(host != NULL);
  for (int64_t i = 0; i < count; i++)
    tsr_store_from_f32(host, (int32_t)dtype, i, NAN);
  REQUIRE_OK(tsr_buffer_write(queue, buffer, 0, host, (size_t)count * element));
  free(host);
  return buffer;
}

static double *doubles(int64_t count) {
  double *values = calloc((size_t)count, sizeof(double));
  REQUIRE(values != NULL);
  return values;
}

/* ---- host views for the reference ---- */

static tsr_plugin_tensor host_tensor(const tsr_tensor *t) {
  tsr_plugin_tensor p;
  memset(&p, 0, sizeof p);
  if (t->buffer == NULL)
    return p;
  void *host = NULL;
  REQUIRE_OK(tsr_queue_finish(queue));
  REQUIRE_OK(tsr_buffer_map(t->buffer, &host));
  p.buffer = host;
  p.offset = t->offset;
  p.dtype = (int32_t)t->dtype;
  p.rank = t->rank;
  for (int32_t d = 0; d < t->rank; d++) {
    p.shape[d] = t->shape[d];
    p.strides[d] = t->strides[d];
  }
  return p;
}

/* gemm operands as the plugin sees them: rank 3, a shared operand with batch
 * stride 0. */
static tsr_plugin_tensor host_batched(const tsr_tensor *t, int64_t batch) {
  tsr_plugin_tensor p = host_tensor(t);
  if (t->buffer != NULL && t->rank == 2) {
    p.rank = 3;
    p.shape[2] = t->shape[1];
    p.shape[1] = t->shape[0];
    p.strides[2] = t->strides[1];
    p.strides[1] = t->strides[0];
    p.shape[0] = batch;
    p.strides[0] = 0;
  }
  return p;
}

/* ---- comparison ---- */

/* Compares every element of `out` (any strides), in row-major order of its
 * shape, with `want`: |got - want| <= atol + rtol * |want|. */
static void compare(const char *label, const tsr_tensor *out, const double *want, double rtol,
                    double atol) {
  REQUIRE_OK(tsr_queue_finish(queue));
  void *host = NULL;
  REQUIRE_OK(tsr_buffer_map(out->buffer, &host));
  const unsigned char *base = (const unsigned char *)host + out->offset;
  int64_t count = tsr_tensor_numel(out);
  int64_t bad = 0;
  double worst = 0.0;
  for (int64_t linear = 0; linear < count; linear++) {
    int64_t rest = linear, element = 0;
    for (int32_t d = out->rank - 1; d >= 0; d--) {
      element += (rest % out->shape[d]) * out->strides[d];
      rest /= out->shape[d];
    }
    double got = tsr_load_as_f32(base, (int32_t)out->dtype, element);
    double error = fabs(got - want[linear]);
    bool same_infinity = isinf(want[linear]) && got == want[linear];
    if (!same_infinity && !(error <= atol + rtol * fabs(want[linear]))) {
      if (bad < 5)
        fprintf(stderr, "%s: element %lld = %.9g, reference %.9g\n", label, (long long)linear, got,
                want[linear]);
      bad++;
    }
    if (!same_infinity && error > worst)
      worst = error;
  }
  char message[256];
  snprintf(message, sizeof message, "%s matches the reference (%lld of %lld differ, worst %.3g)",
           label, (long long)bad, (long long)count, worst);
  api_check(bad == 0 && count > 0, __FILE__, __LINE__, message);
}

#define RTOL 2e-5
#define ATOL 2e-6

/* ---- gemm ---- */

static void run_gemm_transposed_a(void) {
  /* a [5, 7] stored as [7, 5] (strides 1, 5); c, bias, gelu. */
  tsr_buffer *a = random_buffer(TSR_DTYPE_F32, 35), *b = random_buffer(TSR_DTYPE_F32, 42);
  tsr_buffer *c = random_buffer(TSR_DTYPE_F32, 30), *bias = random_buffer(TSR_DTYPE_F32, 6);
  tsr_buffer *d = nan_buffer(TSR_DTYPE_F32, 30);
  tsr_gemm_desc desc = TSR_GEMM_DESC_INIT;
  desc.a = tsr_tensor_transpose(api_tensor(a, 0, TSR_DTYPE_F32, 2, 7, 5, 0, 0), 0, 1);
  desc.b = api_tensor(b, 0, TSR_DTYPE_F32, 2, 7, 6, 0, 0);
  desc.c = api_tensor(c, 0, TSR_DTYPE_F32, 2, 5, 6, 0, 0);
  desc.bias = api_tensor(bias, 0, TSR_DTYPE_F32, 1, 6, 0, 0, 0);
  desc.d = api_tensor(d, 0, TSR_DTYPE_F32, 2, 5, 6, 0, 0);
  desc.alpha = 0.75f;
  desc.beta = 0.5f;
  desc.activation = TSR_ACT_GELU_TANH;

  tsr_gemm_args args = {sizeof args,
                        host_batched(&desc.a, 1),
                        host_batched(&desc.b, 1),
                        host_batched(&desc.c, 1),
                        host_tensor(&desc.bias),
                        host_batched(&desc.d, 1),
                        0.75f,
                        0.5f,
                        TSR_ACT_GELU_TANH,
                        TSR_COMPUTE_STRICT};
  double *want = doubles(30);
  CHECK_STATUS(tsr_reference_gemm(&args, want), TSR_OK);
  CHECK_STATUS(tsr_gemm(queue, &desc), TSR_OK);
  compare("gemm (a transposed, c, bias, gelu_tanh)", &desc.d, want, RTOL, ATOL);
  free(want);
  tsr_buffer_destroy(a);
  tsr_buffer_destroy(b);
  tsr_buffer_destroy(c);
  tsr_buffer_destroy(bias);
  tsr_buffer_destroy(d);
}

static void run_gemm_batched_shared_a(void) {
  /* a [4, 3] shared by a batch of 2: b [2, 3, 5], d [2, 4, 5]; c [1, 4, 5]
   * broadcast over the batch (a batch of 1 with a non-zero stride); silu. */
  tsr_buffer *a = random_buffer(TSR_DTYPE_F32, 12), *b = random_buffer(TSR_DTYPE_F32, 30);
  tsr_buffer *c = random_buffer(TSR_DTYPE_F32, 20), *d = nan_buffer(TSR_DTYPE_F32, 40);
  tsr_gemm_desc desc = TSR_GEMM_DESC_INIT;
  desc.a = api_tensor(a, 0, TSR_DTYPE_F32, 2, 4, 3, 0, 0);
  desc.b = api_tensor(b, 0, TSR_DTYPE_F32, 3, 2, 3, 5, 0);
  desc.c = api_tensor(c, 0, TSR_DTYPE_F32, 3, 1, 4, 5, 0);
  desc.d = api_tensor(d, 0, TSR_DTYPE_F32, 3, 2, 4, 5, 0);
  desc.beta = -0.5f;
  desc.activation = TSR_ACT_SILU;

  tsr_gemm_args args;
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.a = host_batched(&desc.a, 2);
  args.b = host_tensor(&desc.b);
  args.c = host_tensor(&desc.c);
  args.c.shape[0] = 2;
  args.c.strides[0] = 0;
  args.d = host_tensor(&desc.d);
  args.alpha = 1.0f;
  args.beta = -0.5f;
  args.activation = TSR_ACT_SILU;
  double *want = doubles(40);
  CHECK_STATUS(tsr_reference_gemm(&args, want), TSR_OK);
  CHECK_STATUS(tsr_gemm(queue, &desc), TSR_OK);
  compare("gemm (batch 2, shared a, broadcast c, silu)", &desc.d, want, RTOL, ATOL);
  free(want);
  tsr_buffer_destroy(a);
  tsr_buffer_destroy(b);
  tsr_buffer_destroy(c);
  tsr_buffer_destroy(d);
}

static void run_gemm_in_place_bf16(void) {
  /* bf16 a [3, 9] b [9, 4] into f32 d, which is also c (residual add). */
  tsr_buffer *a = random_buffer(TSR_DTYPE_BF16, 27), *b = random_buffer(TSR_DTYPE_BF16, 36);
  tsr_buffer *cd = random_buffer(TSR_DTYPE_F32, 12);
  tsr_gemm_desc desc = TSR_GEMM_DESC_INIT;
  desc.a = api_tensor(a, 0, TSR_DTYPE_BF16, 2, 3, 9, 0, 0);
  desc.b = api_tensor(b, 0, TSR_DTYPE_BF16, 2, 9, 4, 0, 0);
  desc.c = api_tensor(cd, 0, TSR_DTYPE_F32, 2, 3, 4, 0, 0);
  desc.d = desc.c;
  desc.beta = 1.0f;
  desc.activation = TSR_ACT_RELU;

  tsr_gemm_args args;
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.a = host_batched(&desc.a, 1);
  args.b = host_batched(&desc.b, 1);
  args.c = host_batched(&desc.c, 1);
  args.d = host_batched(&desc.d, 1);
  args.alpha = 1.0f;
  args.beta = 1.0f;
  args.activation = TSR_ACT_RELU;
  double *want = doubles(12);
  CHECK_STATUS(tsr_reference_gemm(&args, want), TSR_OK);
  CHECK_STATUS(tsr_gemm(queue, &desc), TSR_OK);
  compare("gemm (bf16 in, f32 out, c == d, relu)", &desc.d, want, RTOL, ATOL);
  free(want);
  tsr_buffer_destroy(a);
  tsr_buffer_destroy(b);
  tsr_buffer_destroy(cd);
}

static void run_grouped_gemm(void) {
  static const int64_t sizes[] = {2, 0, 4};
  tsr_buffer *a = random_buffer(TSR_DTYPE_F32, 24), *b = random_buffer(TSR_DTYPE_F32, 60);
  tsr_buffer *bias = random_buffer(TSR_DTYPE_F32, 15), *d = nan_buffer(TSR_DTYPE_F32, 30);
  tsr_grouped_gemm_desc desc = TSR_GROUPED_GEMM_DESC_INIT;
  desc.a = api_tensor(a, 0, TSR_DTYPE_F32, 2, 6, 4, 0, 0);
  desc.b = api_tensor(b, 0, TSR_DTYPE_F32, 3, 3, 4, 5, 0);
  desc.bias = api_tensor(bias, 0, TSR_DTYPE_F32, 2, 3, 5, 0, 0);
  desc.d = api_tensor(d, 0, TSR_DTYPE_F32, 2, 6, 5, 0, 0);
  desc.group_sizes = sizes;
  desc.group_count = 3;
  desc.alpha = 1.25f;
  desc.activation = TSR_ACT_RELU;

  tsr_grouped_gemm_args args;
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.a = host_tensor(&desc.a);
  args.b = host_tensor(&desc.b);
  args.bias = host_tensor(&desc.bias);
  args.d = host_tensor(&desc.d);
  args.group_sizes = sizes;
  args.group_count = 3;
  args.alpha = 1.25f;
  args.activation = TSR_ACT_RELU;
  double *want = doubles(30);
  CHECK_STATUS(tsr_reference_grouped_gemm(&args, want), TSR_OK);
  CHECK_STATUS(tsr_grouped_gemm(queue, &desc), TSR_OK);
  compare("grouped_gemm (groups 2, 0, 4; bias, relu)", &desc.d, want, RTOL, ATOL);
  free(want);
  tsr_buffer_destroy(a);
  tsr_buffer_destroy(b);
  tsr_buffer_destroy(bias);
  tsr_buffer_destroy(d);
}

/* ---- attention ---- */

static void run_attention(int causal, int64_t window_left, int64_t window_right,
                          const char *label) {
  /* q [2, 3, 4, 8], k, v [2, 5, 2, 8] (GQA 2:1, Sq != Skv), lse [2, 4, 3];
   * k stored BHSD: [B, H, S, D] memory viewed as [B, S, H, D]. */
  tsr_buffer *q = random_buffer(TSR_DTYPE_F32, 192), *k = random_buffer(TSR_DTYPE_F32, 160);
  tsr_buffer *v = random_buffer(TSR_DTYPE_F32, 160), *o = nan_buffer(TSR_DTYPE_F32, 192);
  tsr_buffer *lse = nan_buffer(TSR_DTYPE_F32, 24);
  tsr_attention_desc desc = TSR_ATTENTION_DESC_INIT;
  desc.q = api_tensor(q, 0, TSR_DTYPE_F32, 4, 2, 3, 4, 8);
  desc.k = tsr_tensor_transpose(api_tensor(k, 0, TSR_DTYPE_F32, 4, 2, 2, 5, 8), 1, 2);
  desc.v = api_tensor(v, 0, TSR_DTYPE_F32, 4, 2, 5, 2, 8);
  desc.o = api_tensor(o, 0, TSR_DTYPE_F32, 4, 2, 3, 4, 8);
  desc.lse = api_tensor(lse, 0, TSR_DTYPE_F32, 3, 2, 4, 3, 0);
  desc.causal = causal;
  desc.window_left = window_left;
  desc.window_right = window_right;

  tsr_attention_args args;
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.q = host_tensor(&desc.q);
  args.k = host_tensor(&desc.k);
  args.v = host_tensor(&desc.v);
  args.o = host_tensor(&desc.o);
  args.lse = host_tensor(&desc.lse);
  args.scale = (float)(1.0 / sqrt(8.0));
  args.causal = causal;
  args.window_left = window_left;
  args.window_right = causal ? 0 : window_right;
  double *want_o = doubles(192), *want_lse = doubles(24);
  CHECK_STATUS(tsr_reference_attention(&args, want_o, want_lse), TSR_OK);
  CHECK_STATUS(tsr_attention(queue, &desc), TSR_OK);
  char name[160];
  snprintf(name, sizeof name, "attention o (%s)", label);
  compare(name, &desc.o, want_o, 1e-4, 1e-5);
  snprintf(name, sizeof name, "attention lse (%s)", label);
  compare(name, &desc.lse, want_lse, 1e-4, 1e-5);
  free(want_o);
  free(want_lse);
  tsr_buffer_destroy(q);
  tsr_buffer_destroy(k);
  tsr_buffer_destroy(v);
  tsr_buffer_destroy(o);
  tsr_buffer_destroy(lse);
}

/* ---- row ops ---- */

static void run_rmsnorm(void) {
  /* residual_out written over residual (in place), weight f32. */
  tsr_buffer *x = random_buffer(TSR_DTYPE_F32, 48), *residual = random_buffer(TSR_DTYPE_F32, 48);
  tsr_buffer *weight = random_buffer(TSR_DTYPE_F32, 16), *y = nan_buffer(TSR_DTYPE_F32, 48);
  tsr_rmsnorm_desc desc = TSR_RMSNORM_DESC_INIT;
  desc.x = api_tensor(x, 0, TSR_DTYPE_F32, 2, 3, 16, 0, 0);
  desc.residual = api_tensor(residual, 0, TSR_DTYPE_F32, 2, 3, 16, 0, 0);
  desc.weight = api_tensor(weight, 0, TSR_DTYPE_F32, 1, 16, 0, 0, 0);
  desc.y = api_tensor(y, 0, TSR_DTYPE_F32, 2, 3, 16, 0, 0);
  desc.residual_out = desc.residual;
  desc.eps = 1e-5f;

  tsr_rmsnorm_args args;
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.x = host_tensor(&desc.x);
  args.residual = host_tensor(&desc.residual);
  args.weight = host_tensor(&desc.weight);
  args.y = host_tensor(&desc.y);
  args.residual_out = host_tensor(&desc.residual_out);
  args.eps = 1e-5f;
  double *want_y = doubles(48), *want_h = doubles(48);
  CHECK_STATUS(tsr_reference_rmsnorm(&args, want_y, want_h), TSR_OK);
  CHECK_STATUS(tsr_rmsnorm(queue, &desc), TSR_OK);
  compare("rmsnorm y (residual, weight)", &desc.y, want_y, RTOL, ATOL);
  compare("rmsnorm residual_out (in place over residual)", &desc.residual_out, want_h, RTOL, ATOL);
  free(want_y);
  free(want_h);
  tsr_buffer_destroy(x);
  tsr_buffer_destroy(residual);
  tsr_buffer_destroy(weight);
  tsr_buffer_destroy(y);
}

static void run_layernorm(void) {
  tsr_buffer *x = random_buffer(TSR_DTYPE_F32, 120), *weight = random_buffer(TSR_DTYPE_F32, 12);
  tsr_buffer *bias = random_buffer(TSR_DTYPE_F32, 12), *y = nan_buffer(TSR_DTYPE_F32, 120);
  tsr_layernorm_desc desc = TSR_LAYERNORM_DESC_INIT;
  desc.x = api_tensor(x, 0, TSR_DTYPE_F32, 3, 2, 5, 12, 0);
  desc.weight = api_tensor(weight, 0, TSR_DTYPE_F32, 1, 12, 0, 0, 0);
  desc.bias = api_tensor(bias, 0, TSR_DTYPE_F32, 1, 12, 0, 0, 0);
  desc.y = api_tensor(y, 0, TSR_DTYPE_F32, 3, 2, 5, 12, 0);

  tsr_layernorm_args args;
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.x = host_tensor(&desc.x);
  args.weight = host_tensor(&desc.weight);
  args.bias = host_tensor(&desc.bias);
  args.y = host_tensor(&desc.y);
  args.eps = desc.eps;
  double *want = doubles(120);
  CHECK_STATUS(tsr_reference_layernorm(&args, want), TSR_OK);
  CHECK_STATUS(tsr_layernorm(queue, &desc), TSR_OK);
  compare("layernorm (weight, bias)", &desc.y, want, 1e-4, 1e-5);
  free(want);
  tsr_buffer_destroy(x);
  tsr_buffer_destroy(weight);
  tsr_buffer_destroy(bias);
  tsr_buffer_destroy(y);
}

static void run_softmax(void) {
  /* In place, scale 2.5, over rows of a column-major view. */
  tsr_buffer *x = random_buffer(TSR_DTYPE_F32, 30);
  tsr_softmax_desc desc = TSR_SOFTMAX_DESC_INIT;
  desc.x = tsr_tensor_transpose(api_tensor(x, 0, TSR_DTYPE_F32, 2, 10, 3, 0, 0), 0, 1);
  desc.y = desc.x;
  desc.scale = 2.5f;

  tsr_softmax_args args;
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.x = host_tensor(&desc.x);
  args.y = host_tensor(&desc.y);
  args.scale = 2.5f;
  double *want = doubles(30);
  CHECK_STATUS(tsr_reference_softmax(&args, want), TSR_OK);
  CHECK_STATUS(tsr_softmax(queue, &desc), TSR_OK);
  compare("softmax (in place, strided rows, scale 2.5)", &desc.y, want, 1e-4, 1e-6);
  free(want);
  tsr_buffer_destroy(x);
}

static void run_rope(tsr_rope_style style, int32_t rotary_dim, bool in_place, int64_t position,
                     const char *label) {
  tsr_buffer *x = random_buffer(TSR_DTYPE_F32, 64);
  tsr_buffer *y = in_place ? NULL : nan_buffer(TSR_DTYPE_F32, 64);
  tsr_rope_desc desc = TSR_ROPE_DESC_INIT;
  desc.x = api_tensor(x, 0, TSR_DTYPE_F32, 4, 1, 4, 2, 8);
  desc.y = in_place ? desc.x : api_tensor(y, 0, TSR_DTYPE_F32, 4, 1, 4, 2, 8);
  desc.position_offset = position;
  desc.rotary_dim = rotary_dim;
  desc.style = style;

  tsr_rope_args args;
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.x = host_tensor(&desc.x);
  args.y = host_tensor(&desc.y);
  args.position_offset = position;
  args.theta = 10000.0f;
  args.rotary_dim = rotary_dim ? rotary_dim : 8;
  args.style = (int32_t)style;
  double *want = doubles(64);
  CHECK_STATUS(tsr_reference_rope(&args, want), TSR_OK);
  CHECK_STATUS(tsr_rope(queue, &desc), TSR_OK);
  compare(label, &desc.y, want, 1e-4, 1e-6);
  free(want);
  tsr_buffer_destroy(x);
  tsr_buffer_destroy(y);
}

static void run_swiglu(void) {
  tsr_buffer *gate = random_buffer(TSR_DTYPE_F32, 24), *up = random_buffer(TSR_DTYPE_F32, 24);
  tsr_swiglu_desc desc = TSR_SWIGLU_DESC_INIT;
  desc.gate = api_tensor(gate, 0, TSR_DTYPE_F32, 2, 4, 6, 0, 0);
  desc.up = api_tensor(up, 0, TSR_DTYPE_F32, 2, 4, 6, 0, 0);
  desc.y = desc.up; /* in place over up */

  tsr_swiglu_args args = {sizeof args, host_tensor(&desc.gate), host_tensor(&desc.up),
                          host_tensor(&desc.y)};
  double *want = doubles(24);
  CHECK_STATUS(tsr_reference_swiglu(&args, want), TSR_OK);
  CHECK_STATUS(tsr_swiglu(queue, &desc), TSR_OK);
  compare("swiglu (y == up)", &desc.y, want, RTOL, ATOL);
  free(want);
  tsr_buffer_destroy(gate);
  tsr_buffer_destroy(up);
}

static void run_gelu(tsr_gelu_approx approximate, const char *label) {
  tsr_buffer *x = random_buffer(TSR_DTYPE_F32, 35), *y = nan_buffer(TSR_DTYPE_F32, 35);
  tsr_gelu_desc desc = TSR_GELU_DESC_INIT;
  desc.x = api_tensor(x, 0, TSR_DTYPE_F32, 2, 5, 7, 0, 0);
  desc.y = api_tensor(y, 0, TSR_DTYPE_F32, 2, 5, 7, 0, 0);
  desc.approximate = approximate;

  tsr_gelu_args args = {sizeof args, host_tensor(&desc.x), host_tensor(&desc.y),
                        (int32_t)approximate};
  double *want = doubles(35);
  CHECK_STATUS(tsr_reference_gelu(&args, want), TSR_OK);
  CHECK_STATUS(tsr_gelu(queue, &desc), TSR_OK);
  compare(label, &desc.y, want, RTOL, ATOL);
  free(want);
  tsr_buffer_destroy(x);
  tsr_buffer_destroy(y);
}

static void run_cross_entropy(void) {
  static const int32_t targets[4] = {3, -100, 9, 0};
  tsr_buffer *logits = random_buffer(TSR_DTYPE_F32, 40), *target_buffer = NULL;
  REQUIRE_OK(tsr_buffer_create(device, sizeof targets, &target_buffer));
  REQUIRE_OK(tsr_buffer_write(queue, target_buffer, 0, targets, sizeof targets));
  tsr_buffer *loss = nan_buffer(TSR_DTYPE_F32, 4), *lse = nan_buffer(TSR_DTYPE_F32, 4);
  tsr_cross_entropy_desc desc = TSR_CROSS_ENTROPY_DESC_INIT;
  desc.logits = api_tensor(logits, 0, TSR_DTYPE_F32, 2, 4, 10, 0, 0);
  desc.targets = api_tensor(target_buffer, 0, TSR_DTYPE_I32, 1, 4, 0, 0, 0);
  desc.loss = api_tensor(loss, 0, TSR_DTYPE_F32, 1, 4, 0, 0, 0);
  desc.lse = api_tensor(lse, 0, TSR_DTYPE_F32, 1, 4, 0, 0, 0);

  tsr_cross_entropy_args args = {sizeof args,
                                 host_tensor(&desc.logits),
                                 host_tensor(&desc.targets),
                                 host_tensor(&desc.loss),
                                 host_tensor(&desc.lse),
                                 -100};
  double *want_loss = doubles(4), *want_lse = doubles(4);
  CHECK_STATUS(tsr_reference_cross_entropy(&args, want_loss, want_lse), TSR_OK);
  CHECK(want_loss[1] == 0.0); /* the ignored row */
  CHECK_STATUS(tsr_cross_entropy(queue, &desc), TSR_OK);
  compare("cross_entropy loss (ignore_index row)", &desc.loss, want_loss, 1e-5, 1e-6);
  compare("cross_entropy lse", &desc.lse, want_lse, 1e-5, 1e-6);
  free(want_loss);
  free(want_lse);
  tsr_buffer_destroy(logits);
  tsr_buffer_destroy(target_buffer);
  tsr_buffer_destroy(loss);
  tsr_buffer_destroy(lse);
}

int main(void) {
  tsr_context *context = api_context();
  device = api_cpu_device(context);
  REQUIRE_OK(tsr_queue_create(device, &queue));

  run_gemm_transposed_a();
  run_gemm_batched_shared_a();
  run_gemm_in_place_bf16();
  run_grouped_gemm();
  run_attention(1, -1, -1, "causal, GQA, Sq < Skv, BHSD k");
  run_attention(0, 1, 1, "window 1/1, GQA, BHSD k");
  run_rmsnorm();
  run_layernorm();
  run_softmax();
  run_rope(TSR_ROPE_NEOX, 0, false, 3, "rope (neox, full rotary_dim, offset 3)");
  /* the same structure at other positions and in other buffers: the queue's
   * repeated-call path patches the position, as decoding does each step */
  run_rope(TSR_ROPE_NEOX, 0, false, 4, "rope (neox, offset 4)");
  run_rope(TSR_ROPE_NEOX, 0, false, 1000, "rope (neox, offset 1000)");
  run_rope(TSR_ROPE_GPTJ, 4, true, 3, "rope (gpt-j, rotary_dim 4, in place)");
  run_swiglu();
  run_gelu(TSR_GELU_ERF, "gelu (erf)");
  run_gelu(TSR_GELU_TANH, "gelu (tanh)");
  run_cross_entropy();

  tsr_queue_destroy(queue);
  tsr_context_destroy(context);
  return api_finish("test_ops_cpu");
}
