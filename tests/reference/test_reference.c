/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the fp64 reference ops: hand-computed values for tiny cases and
 * identities that must hold for any input. Uses nothing from libtessera but
 * the reference functions and plugin.h's inline helpers, so it also builds
 * directly against the core/reference sources.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/reference.h"

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define COUNT(array) ((int64_t)(sizeof(array) / sizeof((array)[0])))

static int check_count;
static int failure_count;

static void fail(const char *what, const char *detail) {
  failure_count++;
  printf("FAIL %s: %s\n", what, detail);
}

/* Equal within tol relative to max(1, |want|); infinities and NaN must match
 * exactly (NaN wanted means NaN got). */
static int values_match(double got, double want, double tol) {
  if (isnan(want))
    return isnan(got);
  if (isinf(want))
    return got == want;
  if (!isfinite(got))
    return 0;
  return fabs(got - want) <= tol * fmax(1.0, fabs(want));
}

static void check_value(const char *what, double got, double want, double tol) {
  check_count++;
  if (!values_match(got, want, tol)) {
    char detail[160];
    snprintf(detail, sizeof detail, "got %.17g, want %.17g (tolerance %g)", got, want, tol);
    fail(what, detail);
  }
}

static void check_array(const char *what, const double *got, const double *want, int64_t count,
                        double tol) {
  check_count++;
  for (int64_t i = 0; i < count; i++) {
    if (!values_match(got[i], want[i], tol)) {
      char detail[200];
      snprintf(detail, sizeof detail, "element %lld: got %.17g, want %.17g (tolerance %g)",
               (long long)i, got[i], want[i], tol);
      fail(what, detail);
      return;
    }
  }
}

static void check_status(const char *what, tsr_status got, tsr_status want) {
  check_count++;
  if (got != want) {
    char detail[96];
    snprintf(detail, sizeof detail, "status %d, want %d", (int)got, (int)want);
    fail(what, detail);
  }
}

/* A dense row-major tensor over host memory. */
static tsr_plugin_tensor dense(void *buffer, tsr_dtype dtype, int32_t rank, const int64_t *shape) {
  tsr_plugin_tensor t;
  memset(&t, 0, sizeof t);
  t.buffer = buffer;
  t.dtype = dtype;
  t.rank = rank;
  int64_t stride = 1;
  for (int32_t i = rank - 1; i >= 0; i--) {
    t.shape[i] = shape[i];
    t.strides[i] = stride;
    stride *= shape[i];
  }
  return t;
}

static tsr_plugin_tensor absent(void) {
  tsr_plugin_tensor t;
  memset(&t, 0, sizeof t);
  return t;
}

/* Deterministic values in [-1, 1). */
static uint64_t random_state = 0x9e3779b97f4a7c15ull;
static float random_value(void) {
  random_state = random_state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((double)(random_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}
static void fill_random(float *values, int64_t count) {
  for (int64_t i = 0; i < count; i++)
    values[i] = random_value();
}

/* ------------------------------------------------------------------------ */
/* GEMM                                                                       */
/* ------------------------------------------------------------------------ */

static tsr_gemm_args gemm_args(tsr_plugin_tensor a, tsr_plugin_tensor b, tsr_plugin_tensor d) {
  tsr_gemm_args args;
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.a = a;
  args.b = b;
  args.d = d;
  args.alpha = 1.0f;
  args.activation = TSR_ACT_NONE;
  return args;
}

/* A = [[1,2,3],[4,5,6]], B = [[1,-1],[0,2],[-1,0.5]]:
 * A B = [[1+0-3, -1+4+1.5], [4+0-6, -4+10+3]] = [[-2, 4.5], [-2, 9]]. */
static float gemm_a[] = {1, 2, 3, 4, 5, 6};
static float gemm_b[] = {1, -1, 0, 2, -1, 0.5f};
static float gemm_b_transposed[] = {1, 0, -1, -1, 2, 0.5f}; /* B^T stored [N, K] */

static void test_gemm_bias_relu(void) {
  float bias[] = {3, -5};
  float d_storage[4];
  tsr_gemm_args args = gemm_args(dense(gemm_a, TSR_DTYPE_F32, 3, SHAPE(1, 2, 3)),
                                 dense(gemm_b, TSR_DTYPE_F32, 3, SHAPE(1, 3, 2)),
                                 dense(d_storage, TSR_DTYPE_F32, 3, SHAPE(1, 2, 2)));
  args.bias = dense(bias, TSR_DTYPE_F32, 1, SHAPE(2));
  args.activation = TSR_ACT_RELU;
  double d[4];
  check_status("gemm bias+relu status", tsr_reference_gemm(&args, d), TSR_OK);
  /* [[-2+3, 4.5-5], [-2+3, 9-5]] = [[1, -0.5], [1, 4]], relu clamps -0.5. */
  const double want[] = {1, 0, 1, 4};
  check_array("gemm 2x3x2 bias+relu", d, want, 4, 0);
}

static void test_gemm_alpha_beta(void) {
  float c[] = {1, 1, 1, 1};
  float d_storage[4];
  tsr_gemm_args args = gemm_args(dense(gemm_a, TSR_DTYPE_F32, 3, SHAPE(1, 2, 3)),
                                 dense(gemm_b, TSR_DTYPE_F32, 3, SHAPE(1, 3, 2)),
                                 dense(d_storage, TSR_DTYPE_F32, 3, SHAPE(1, 2, 2)));
  args.c = dense(c, TSR_DTYPE_F32, 3, SHAPE(1, 2, 2));
  args.alpha = 0.5f;
  args.beta = 2.0f;
  double d[4];
  check_status("gemm alpha/beta status", tsr_reference_gemm(&args, d), TSR_OK);
  /* 0.5 * [[-2, 4.5], [-2, 9]] + 2 */
  const double want[] = {1, 4.25, 1, 6.5};
  check_array("gemm alpha*AB + beta*C", d, want, 4, 0);

  /* beta 0: C is not read, so even a NaN there stays out. */
  float c_nan[] = {NAN, NAN, NAN, NAN};
  args.c = dense(c_nan, TSR_DTYPE_F32, 3, SHAPE(1, 2, 2));
  args.beta = 0.0f;
  tsr_reference_gemm(&args, d);
  const double want_no_c[] = {-1, 2.25, -1, 4.5};
  check_array("gemm beta 0 ignores C", d, want_no_c, 4, 0);
}

static void test_gemm_transposed_and_batched(void) {
  double d[8];
  float d_storage[8];
  /* B as a strided view of its transpose: element (k, n) at n*K + k. */
  tsr_plugin_tensor b_view = dense(gemm_b_transposed, TSR_DTYPE_F32, 3, SHAPE(1, 3, 2));
  b_view.strides[0] = 0;
  b_view.strides[1] = 1;
  b_view.strides[2] = 3;
  tsr_gemm_args args = gemm_args(dense(gemm_a, TSR_DTYPE_F32, 3, SHAPE(1, 2, 3)), b_view,
                                 dense(d_storage, TSR_DTYPE_F32, 3, SHAPE(1, 2, 2)));
  tsr_reference_gemm(&args, d);
  const double want[] = {-2, 4.5, -2, 9};
  check_array("gemm with transposed B via strides", d, want, 4, 0);

  /* Batch 2: A shared through a batch stride of 0; b[1] = 2 * b[0]. */
  float b_batched[12];
  for (int i = 0; i < 6; i++) {
    b_batched[i] = gemm_b[i];
    b_batched[6 + i] = 2 * gemm_b[i];
  }
  tsr_plugin_tensor a_shared = dense(gemm_a, TSR_DTYPE_F32, 3, SHAPE(2, 2, 3));
  a_shared.strides[0] = 0;
  args = gemm_args(a_shared, dense(b_batched, TSR_DTYPE_F32, 3, SHAPE(2, 3, 2)),
                   dense(d_storage, TSR_DTYPE_F32, 3, SHAPE(2, 2, 2)));
  tsr_reference_gemm(&args, d);
  const double want_batched[] = {-2, 4.5, -2, 9, -4, 9, -4, 18};
  check_array("gemm batch 2 with shared A", d, want_batched, 8, 0);
}

static void test_gemm_half_inputs(void) {
  /* [0.5, 1.5, -2] . [2, 0.25, 1] = 1 + 0.375 - 2 = -0.625, exact in f16/bf16. */
  const float a_values[] = {0.5f, 1.5f, -2.0f};
  const float b_values[] = {2.0f, 0.25f, 1.0f};
  uint16_t a_f16[3], b_f16[3], a_bf16[3], b_bf16[3];
  for (int i = 0; i < 3; i++) {
    a_f16[i] = tsr_f32_to_f16(a_values[i]);
    b_f16[i] = tsr_f32_to_f16(b_values[i]);
    a_bf16[i] = tsr_f32_to_bf16(a_values[i]);
    b_bf16[i] = tsr_f32_to_bf16(b_values[i]);
  }
  float d_storage[1];
  double d[1];
  tsr_gemm_args args = gemm_args(dense(a_f16, TSR_DTYPE_F16, 3, SHAPE(1, 1, 3)),
                                 dense(b_f16, TSR_DTYPE_F16, 3, SHAPE(1, 3, 1)),
                                 dense(d_storage, TSR_DTYPE_F32, 3, SHAPE(1, 1, 1)));
  tsr_reference_gemm(&args, d);
  check_value("gemm f16 inputs", d[0], -0.625, 0);
  args.a = dense(a_bf16, TSR_DTYPE_BF16, 3, SHAPE(1, 1, 3));
  args.b = dense(b_bf16, TSR_DTYPE_BF16, 3, SHAPE(1, 3, 1));
  tsr_reference_gemm(&args, d);
  check_value("gemm bf16 inputs", d[0], -0.625, 0);

  /* f16 0x3555 is 1365/4096 = 0.333251953125: read exactly, not as 1/3. */
  uint16_t third = 0x3555;
  uint16_t one = tsr_f32_to_f16(1.0f);
  args.a = dense(&third, TSR_DTYPE_F16, 3, SHAPE(1, 1, 1));
  args.b = dense(&one, TSR_DTYPE_F16, 3, SHAPE(1, 1, 1));
  tsr_reference_gemm(&args, d);
  check_value("f16 0x3555 widened exactly", d[0], 0.333251953125, 0);
  /* bf16 0x3eab is 0x3eab0000 as f32 = 0.333984375. */
  uint16_t third_bf16 = 0x3eab;
  uint16_t one_bf16 = tsr_f32_to_bf16(1.0f);
  args.a = dense(&third_bf16, TSR_DTYPE_BF16, 3, SHAPE(1, 1, 1));
  args.b = dense(&one_bf16, TSR_DTYPE_BF16, 3, SHAPE(1, 1, 1));
  tsr_reference_gemm(&args, d);
  check_value("bf16 0x3eab widened exactly", d[0], 0.333984375, 0);
}

static void test_gemm_activations(void) {
  /* 1x1x1 gemm of x * 1 through each activation. */
  float one = 1.0f;
  float x = 1.0f;
  float d_storage[1];
  double d[1];
  tsr_gemm_args args = gemm_args(dense(&x, TSR_DTYPE_F32, 3, SHAPE(1, 1, 1)),
                                 dense(&one, TSR_DTYPE_F32, 3, SHAPE(1, 1, 1)),
                                 dense(d_storage, TSR_DTYPE_F32, 3, SHAPE(1, 1, 1)));
  const struct {
    tsr_activation activation;
    double want;
    const char *name;
  } cases[] = {
      {TSR_ACT_NONE, 1.0, "gemm act none(1)"},
      {TSR_ACT_RELU, 1.0, "gemm act relu(1)"},
      {TSR_ACT_GELU_ERF, 0.8413447460685429, "gemm act gelu_erf(1)"},
      {TSR_ACT_GELU_TANH, 0.8411919906082768, "gemm act gelu_tanh(1)"},
      {TSR_ACT_SILU, 0.7310585786300049, "gemm act silu(1)"},
  };
  for (int i = 0; i < COUNT(cases); i++) {
    args.activation = cases[i].activation;
    tsr_reference_gemm(&args, d);
    check_value(cases[i].name, d[0], cases[i].want, 1e-15);
  }
  args.activation = TSR_ACT_COUNT_;
  check_status("gemm unknown activation", tsr_reference_gemm(&args, d), TSR_ERROR_INVALID_VALUE);

  check_value("gelu_erf(-1)", tsr_reference_activation(TSR_ACT_GELU_ERF, -1.0),
              -0.15865525393145707, 1e-15);
  check_value("relu(-3)", tsr_reference_activation(TSR_ACT_RELU, -3.0), 0.0, 0);
  check_value("silu(-inf)", tsr_reference_activation(TSR_ACT_SILU, -INFINITY), 0.0, 0);
  check_value("gelu_tanh(-inf)", tsr_reference_activation(TSR_ACT_GELU_TANH, -INFINITY), 0.0, 0);
  check_value("gelu_erf(+inf)", tsr_reference_activation(TSR_ACT_GELU_ERF, INFINITY), INFINITY, 0);
  check_value("relu(NaN)", tsr_reference_activation(TSR_ACT_RELU, NAN), NAN, 0);
}

static void test_grouped_gemm(void) {
  enum { T = 5, K = 3, N = 4, G = 3 };
  const int64_t sizes[G] = {2, 0, 3};
  float a[T * K], b[G * K * N], bias[G * N], d_storage[T * N];
  fill_random(a, T * K);
  fill_random(b, G * K * N);
  fill_random(bias, G * N);
  tsr_grouped_gemm_args args;
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.a = dense(a, TSR_DTYPE_F32, 2, SHAPE(T, K));
  args.b = dense(b, TSR_DTYPE_F32, 3, SHAPE(G, K, N));
  args.bias = dense(bias, TSR_DTYPE_F32, 2, SHAPE(G, N));
  args.d = dense(d_storage, TSR_DTYPE_F32, 2, SHAPE(T, N));
  args.group_sizes = sizes;
  args.group_count = G;
  args.alpha = 1.5f;
  args.activation = TSR_ACT_GELU_TANH;
  double d[T * N];
  check_status("grouped gemm status", tsr_reference_grouped_gemm(&args, d), TSR_OK);

  /* Each group separately through tsr_reference_gemm. */
  int64_t start = 0;
  for (int g = 0; g < G; g++) {
    if (sizes[g] == 0)
      continue;
    tsr_gemm_args single = gemm_args(dense(a + start * K, TSR_DTYPE_F32, 3, SHAPE(1, sizes[g], K)),
                                     dense(b + g * K * N, TSR_DTYPE_F32, 3, SHAPE(1, K, N)),
                                     dense(d_storage, TSR_DTYPE_F32, 3, SHAPE(1, sizes[g], N)));
    single.bias = dense(bias + g * N, TSR_DTYPE_F32, 1, SHAPE(N));
    single.alpha = 1.5f;
    single.activation = TSR_ACT_GELU_TANH;
    double want[T * N];
    tsr_reference_gemm(&single, want);
    char what[64];
    snprintf(what, sizeof what, "grouped gemm group %d equals gemm", g);
    check_array(what, d + start * N, want, sizes[g] * N, 1e-15);
    start += sizes[g];
  }

  const int64_t bad_sizes[G] = {2, 0, 4};
  args.group_sizes = bad_sizes;
  check_status("grouped gemm sizes past T", tsr_reference_grouped_gemm(&args, d),
               TSR_ERROR_INVALID_VALUE);
}

/* ------------------------------------------------------------------------ */
/* Attention                                                                  */
/* ------------------------------------------------------------------------ */

static tsr_attention_args attention_args(tsr_plugin_tensor q, tsr_plugin_tensor k,
                                         tsr_plugin_tensor v) {
  tsr_attention_args args;
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.q = q;
  args.k = k;
  args.v = v;
  args.o = q; /* shape only; the reference writes dense doubles */
  args.scale = 1.0f;
  args.window_left = -1;
  args.window_right = -1;
  return args;
}

static void test_attention_two_keys(void) {
  /* q = [1, 0]; k = [[1, 0], [0, 1]]: scores [1, 0]; p = [e, 1] / (e + 1).
   * o = p0 [1, 2] + p1 [3, 4] = [1 + 2 p1, 2 + 2 p1]; lse = ln(e + 1). */
  float q[] = {1, 0};
  float k[] = {1, 0, 0, 1};
  float v[] = {1, 2, 3, 4};
  tsr_attention_args args = attention_args(dense(q, TSR_DTYPE_F32, 4, SHAPE(1, 1, 1, 2)),
                                           dense(k, TSR_DTYPE_F32, 4, SHAPE(1, 2, 1, 2)),
                                           dense(v, TSR_DTYPE_F32, 4, SHAPE(1, 2, 1, 2)));
  double o[2], lse[1];
  check_status("attention 2 keys status", tsr_reference_attention(&args, o, lse), TSR_OK);
  const double want[] = {1.5378828427399902, 2.5378828427399904};
  check_array("attention 2 keys output", o, want, 2, 1e-15);
  check_value("attention 2 keys lse", lse[0], 1.3132616875182228, 1e-15);

  /* Causal with Sq = 1 < Skv = 2: the query sits at position 1, sees both. */
  args.causal = 1;
  args.window_right = 0;
  tsr_reference_attention(&args, o, lse);
  check_array("causal Sq<Skv last query sees every key", o, want, 2, 1e-15);

  /* lse is optional. */
  check_status("attention without lse", tsr_reference_attention(&args, o, NULL), TSR_OK);
  check_array("attention output without lse", o, want, 2, 1e-15);
}

static void test_attention_one_key_returns_v(void) {
  enum { B = 2, SQ = 3, H = 2, D = 5 };
  float q[B * SQ * H * D], k[B * 1 * H * D], v[B * 1 * H * D];
  fill_random(q, COUNT(q));
  fill_random(k, COUNT(k));
  fill_random(v, COUNT(v));
  tsr_attention_args args = attention_args(dense(q, TSR_DTYPE_F32, 4, SHAPE(B, SQ, H, D)),
                                           dense(k, TSR_DTYPE_F32, 4, SHAPE(B, 1, H, D)),
                                           dense(v, TSR_DTYPE_F32, 4, SHAPE(B, 1, H, D)));
  args.scale = 0.7f;
  double o[B * SQ * H * D], want[B * SQ * H * D], lse[B * H * SQ];
  tsr_reference_attention(&args, o, lse);
  for (int b = 0; b < B; b++)
    for (int s = 0; s < SQ; s++)
      for (int h = 0; h < H; h++)
        for (int c = 0; c < D; c++)
          want[((b * SQ + s) * H + h) * D + c] = v[(b * H + h) * D + c];
  check_array("attention with one key returns v", o, want, COUNT(o), 1e-15);
  /* lse of a single score is the score itself. */
  double dot = 0;
  for (int c = 0; c < D; c++)
    dot += (double)q[c] * k[c];
  check_value("attention one key lse is the score", lse[0], 0.7f * dot, 1e-12);
}

static void test_attention_causal_and_window(void) {
  enum { S = 4, D = 3 };
  float q[S * D], k[S * D], v[S * D];
  fill_random(q, COUNT(q));
  fill_random(k, COUNT(k));
  fill_random(v, COUNT(v));
  tsr_attention_args args = attention_args(dense(q, TSR_DTYPE_F32, 4, SHAPE(1, S, 1, D)),
                                           dense(k, TSR_DTYPE_F32, 4, SHAPE(1, S, 1, D)),
                                           dense(v, TSR_DTYPE_F32, 4, SHAPE(1, S, 1, D)));
  double o[S * D], lse[S];
  args.causal = 1;
  args.window_right = 0;
  tsr_reference_attention(&args, o, lse);
  const double v0[] = {v[0], v[1], v[2]};
  check_array("causal Sq==Skv first query returns v[0]", o, v0, D, 1e-15);

  /* Window (0 left, causal): every query sees only its own position. */
  args.window_left = 0;
  tsr_reference_attention(&args, o, lse);
  double want[S * D];
  for (int i = 0; i < S * D; i++)
    want[i] = v[i];
  check_array("window 0-left causal returns v at the same position", o, want, S * D, 1e-15);

  /* Sq = 2 < Skv = 4 with the same window: query i sits at i + 2. */
  args.q = dense(q, TSR_DTYPE_F32, 4, SHAPE(1, 2, 1, D));
  args.o = args.q;
  tsr_reference_attention(&args, o, lse);
  check_array("window 0 with Sq<Skv aligns to the end", o, want + 2 * D, 2 * D, 1e-15);

  /* Causal with Sq = 4 > Skv = 2: queries 0 and 1 sit before every key. */
  args.q = dense(q, TSR_DTYPE_F32, 4, SHAPE(1, S, 1, D));
  args.o = args.q;
  args.k = dense(k, TSR_DTYPE_F32, 4, SHAPE(1, 2, 1, D));
  args.v = dense(v, TSR_DTYPE_F32, 4, SHAPE(1, 2, 1, D));
  args.window_left = -1;
  tsr_reference_attention(&args, o, lse);
  const double zeros[2 * D] = {0};
  check_array("rows with no visible key give o = 0", o, zeros, 2 * D, 0);
  check_value("row with no visible key: lse = -inf (row 0)", lse[0], -INFINITY, 0);
  check_value("row with no visible key: lse = -inf (row 1)", lse[1], -INFINITY, 0);
  check_array("query 2 with Skv=2 causal sees key 0 only", o + 2 * D, v0, D, 1e-15);
  check_value("query 2 lse is its one score", lse[2],
              (double)q[2 * D] * k[0] + (double)q[2 * D + 1] * k[1] + (double)q[2 * D + 2] * k[2],
              1e-12);
}

/* A sliding window equals plain attention over the slice of keys it sees:
 * query i (position p = i + Skv - Sq) sees [p - left, p + right]. */
static void test_attention_window_equals_key_slice(void) {
  enum { SQ = 4, SKV = 7, H = 2, D = 3 };
  const int64_t left = 2, right = 1;
  float q[SQ * H * D], k[SKV * H * D], v[SKV * H * D];
  fill_random(q, COUNT(q));
  fill_random(k, COUNT(k));
  fill_random(v, COUNT(v));
  tsr_attention_args windowed = attention_args(dense(q, TSR_DTYPE_F32, 4, SHAPE(1, SQ, H, D)),
                                               dense(k, TSR_DTYPE_F32, 4, SHAPE(1, SKV, H, D)),
                                               dense(v, TSR_DTYPE_F32, 4, SHAPE(1, SKV, H, D)));
  windowed.window_left = left;
  windowed.window_right = right;
  double o[SQ * H * D], lse[H * SQ];
  tsr_reference_attention(&windowed, o, lse);
  for (int64_t i = 0; i < SQ; i++) {
    const int64_t p = i + SKV - SQ;
    const int64_t first = p - left < 0 ? 0 : p - left;
    const int64_t last = p + right >= SKV ? SKV - 1 : p + right;
    tsr_attention_args sliced = windowed;
    sliced.window_left = sliced.window_right = -1;
    sliced.q.offset = (uint64_t)(i * H * D) * sizeof(float);
    sliced.q.shape[1] = 1;
    sliced.k.offset = sliced.v.offset = (uint64_t)(first * H * D) * sizeof(float);
    sliced.k.shape[1] = sliced.v.shape[1] = last - first + 1;
    sliced.o = sliced.q;
    double o_slice[H * D], lse_slice[H];
    tsr_reference_attention(&sliced, o_slice, lse_slice);
    char what[80];
    snprintf(what, sizeof what, "window [-%d, +%d] query %d equals its key slice", (int)left,
             (int)right, (int)i);
    check_array(what, o + i * H * D, o_slice, H * D, 1e-15);
    for (int h = 0; h < H; h++)
      check_value("window lse equals the key slice's lse", lse[h * SQ + i], lse_slice[h], 1e-15);
  }

  /* causal = 1 means window_right = 0 even if the args left it at -1. */
  windowed.causal = 1;
  windowed.window_right = -1;
  double o_flag[SQ * H * D];
  tsr_reference_attention(&windowed, o_flag, NULL);
  windowed.causal = 0;
  windowed.window_right = 0;
  tsr_reference_attention(&windowed, o, NULL);
  check_array("causal flag equals window_right 0", o_flag, o, COUNT(o), 0);
}

/* Windows reaching past every key (up to INT64_MAX) equal unbounded ones:
 * p - window_left and p + window_right must not overflow, for Sq < Skv and
 * Sq > Skv (negative positions), causal or not. */
static void test_attention_huge_windows(void) {
  enum { SKV = 5, H = 1, D = 3, SQ_MAX = 9 };
  float q[SQ_MAX * H * D], k[SKV * H * D], v[SKV * H * D];
  fill_random(q, COUNT(q));
  fill_random(k, COUNT(k));
  fill_random(v, COUNT(v));
  const int64_t windows[] = {INT64_MAX, INT64_MAX - 1, INT32_MAX, (int64_t)INT32_MAX + 1,
                             SKV + SQ_MAX};
  const int64_t lengths[] = {2, SQ_MAX};
  for (int l = 0; l < COUNT(lengths); l++) {
    const int64_t sq = lengths[l];
    for (int causal = 0; causal <= 1; causal++) {
      tsr_attention_args args = attention_args(dense(q, TSR_DTYPE_F32, 4, SHAPE(1, sq, H, D)),
                                               dense(k, TSR_DTYPE_F32, 4, SHAPE(1, SKV, H, D)),
                                               dense(v, TSR_DTYPE_F32, 4, SHAPE(1, SKV, H, D)));
      args.causal = causal;
      args.window_right = causal ? 0 : -1;
      double want[SQ_MAX * H * D], want_lse[SQ_MAX * H];
      tsr_reference_attention(&args, want, want_lse);
      for (int w = 0; w < COUNT(windows); w++) {
        double o[SQ_MAX * H * D], lse[SQ_MAX * H];
        args.window_left = windows[w];
        args.window_right = causal ? 0 : windows[w];
        tsr_reference_attention(&args, o, lse);
        char what[96];
        snprintf(what, sizeof what, "window %lld, Sq %lld, causal %d equals unbounded",
                 (long long)windows[w], (long long)sq, causal);
        check_array(what, o, want, sq * H * D, 0);
        check_array(what, lse, want_lse, sq * H, 0);
      }
    }
  }
}

/* A NaN or an infinity in a query row (or in a key it sees) makes every
 * score it touches non-finite: that row's o and lse are NaN, whatever the
 * signs (an all -inf row of scores is not "no key seen"). Other rows are
 * untouched. */
static void test_attention_non_finite(void) {
  enum { SQ = 4, SKV = 3, D = 2 };
  float q[SQ * D] = {0.5f, -0.25f, -INFINITY, 0.0f, INFINITY, 1.0f, NAN, 0.5f};
  /* Key channel 0 is positive: q[1] = (-inf, 0) scores -inf against every key. */
  float k[SKV * D] = {1.0f, 0.5f, 0.75f, -0.5f, 0.25f, 1.0f};
  float v[SKV * D];
  fill_random(v, COUNT(v));
  tsr_attention_args args = attention_args(dense(q, TSR_DTYPE_F32, 4, SHAPE(1, SQ, 1, D)),
                                           dense(k, TSR_DTYPE_F32, 4, SHAPE(1, SKV, 1, D)),
                                           dense(v, TSR_DTYPE_F32, 4, SHAPE(1, SKV, 1, D)));
  double o[SQ * D], lse[SQ];
  check_status("attention non-finite q status", tsr_reference_attention(&args, o, lse), TSR_OK);
  check_value("finite query row: finite lse", isfinite(lse[0]) ? 1.0 : 0.0, 1.0, 0);
  for (int i = 1; i < SQ; i++) {
    char what[64];
    snprintf(what, sizeof what, "non-finite query row %d: lse NaN", i);
    check_value(what, lse[i], NAN, 0);
    snprintf(what, sizeof what, "non-finite query row %d: o NaN", i);
    const double nan_row[D] = {NAN, NAN};
    check_array(what, o + i * D, nan_row, D, 0);
  }
  /* A row that sees no key reads no score: o = 0 and lse = -inf still, even
   * with a NaN query (Sq > Skv causal: row 0 sits before every key). */
  float q_nan[SQ * D] = {NAN, NAN, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
  args.q = dense(q_nan, TSR_DTYPE_F32, 4, SHAPE(1, SQ, 1, D));
  args.o = args.q;
  args.causal = 1;
  args.window_right = 0;
  tsr_reference_attention(&args, o, lse);
  check_value("NaN query that sees no key: lse -inf", lse[0], -INFINITY, 0);
  check_value("NaN query that sees no key: o = 0", o[0], 0.0, 0);
  /* An infinite key poisons exactly the rows that see it: with window 0/0
   * query row i (position i - 1) sees key i - 1 only. */
  float k_inf[SKV * D] = {1.0f, 0.5f, -INFINITY, 0.25f, 0.25f, 1.0f};
  args.q = dense(q_nan + 2, TSR_DTYPE_F32, 4, SHAPE(1, 3, 1, D));
  args.o = args.q;
  args.k = dense(k_inf, TSR_DTYPE_F32, 4, SHAPE(1, SKV, 1, D));
  args.causal = 0;
  args.window_left = 0;
  args.window_right = 0;
  tsr_reference_attention(&args, o, lse);
  check_value("row seeing a finite key: finite lse", isfinite(lse[0]) ? 1.0 : 0.0, 1.0, 0);
  check_value("row seeing an infinite key: lse NaN", lse[1], NAN, 0);
  check_value("row seeing an infinite key: o NaN", o[1 * D], NAN, 0);
  check_value("row after it: finite lse", isfinite(lse[2]) ? 1.0 : 0.0, 1.0, 0);
}

static void test_attention_gqa_and_layouts(void) {
  enum { B = 2, SQ = 3, SKV = 5, HQ = 4, HKV = 2, D = 4 };
  float q[B * SQ * HQ * D], k[B * SKV * HKV * D], v[B * SKV * HKV * D];
  float k_repeated[B * SKV * HQ * D], v_repeated[B * SKV * HQ * D];
  fill_random(q, COUNT(q));
  fill_random(k, COUNT(k));
  fill_random(v, COUNT(v));
  for (int b = 0; b < B; b++)
    for (int j = 0; j < SKV; j++)
      for (int h = 0; h < HQ; h++)
        for (int c = 0; c < D; c++) {
          const int from = ((b * SKV + j) * HKV + h / (HQ / HKV)) * D + c;
          k_repeated[((b * SKV + j) * HQ + h) * D + c] = k[from];
          v_repeated[((b * SKV + j) * HQ + h) * D + c] = v[from];
        }
  tsr_attention_args gqa = attention_args(dense(q, TSR_DTYPE_F32, 4, SHAPE(B, SQ, HQ, D)),
                                          dense(k, TSR_DTYPE_F32, 4, SHAPE(B, SKV, HKV, D)),
                                          dense(v, TSR_DTYPE_F32, 4, SHAPE(B, SKV, HKV, D)));
  gqa.causal = 1;
  gqa.scale = 0.5f;
  tsr_attention_args mha = gqa;
  mha.k = dense(k_repeated, TSR_DTYPE_F32, 4, SHAPE(B, SKV, HQ, D));
  mha.v = dense(v_repeated, TSR_DTYPE_F32, 4, SHAPE(B, SKV, HQ, D));
  double o_gqa[B * SQ * HQ * D], o_mha[B * SQ * HQ * D];
  double lse_gqa[B * HQ * SQ], lse_mha[B * HQ * SQ];
  tsr_reference_attention(&gqa, o_gqa, lse_gqa);
  tsr_reference_attention(&mha, o_mha, lse_mha);
  check_array("GQA equals MHA with repeated kv heads", o_gqa, o_mha, COUNT(o_gqa), 1e-15);
  check_array("GQA lse equals MHA lse", lse_gqa, lse_mha, COUNT(lse_gqa), 1e-15);

  /* MQA through a head stride of 0 equals Hkv = 1. */
  tsr_attention_args mqa = gqa;
  mqa.k = dense(k, TSR_DTYPE_F32, 4, SHAPE(B, SKV, 1, D));
  mqa.v = dense(v, TSR_DTYPE_F32, 4, SHAPE(B, SKV, 1, D));
  mqa.k.strides[0] = mqa.v.strides[0] = SKV * HKV * D;
  mqa.k.strides[1] = mqa.v.strides[1] = HKV * D;
  tsr_attention_args broadcast = mqa;
  broadcast.k.shape[2] = broadcast.v.shape[2] = HQ;
  broadcast.k.strides[2] = broadcast.v.strides[2] = 0;
  double o_mqa[B * SQ * HQ * D], o_broadcast[B * SQ * HQ * D];
  tsr_reference_attention(&mqa, o_mqa, NULL);
  tsr_reference_attention(&broadcast, o_broadcast, NULL);
  check_array("MQA equals MHA with head stride 0", o_mqa, o_broadcast, COUNT(o_mqa), 1e-15);

  /* BHSD data read through permuted strides equals the BSHD copy. */
  float q_bhsd[B * HQ * SQ * D];
  for (int b = 0; b < B; b++)
    for (int s = 0; s < SQ; s++)
      for (int h = 0; h < HQ; h++)
        for (int c = 0; c < D; c++)
          q_bhsd[((b * HQ + h) * SQ + s) * D + c] = q[((b * SQ + s) * HQ + h) * D + c];
  tsr_attention_args bhsd = gqa;
  bhsd.q = dense(q_bhsd, TSR_DTYPE_F32, 4, SHAPE(B, SQ, HQ, D));
  bhsd.q.strides[0] = HQ * SQ * D;
  bhsd.q.strides[1] = D;
  bhsd.q.strides[2] = SQ * D;
  double o_bhsd[B * SQ * HQ * D];
  tsr_reference_attention(&bhsd, o_bhsd, NULL);
  check_array("BHSD q via strides equals BSHD", o_bhsd, o_gqa, COUNT(o_gqa), 0);
}

/* ------------------------------------------------------------------------ */
/* Row ops                                                                    */
/* ------------------------------------------------------------------------ */

static void test_softmax(void) {
  /* softmax([0, ln 2, ln 3]) = [1, 2, 3] / 6 (inputs rounded to f32). */
  float x[] = {0.0f, (float)log(2.0), (float)log(3.0)};
  tsr_softmax_args args;
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.x = dense(x, TSR_DTYPE_F32, 1, SHAPE(3));
  args.y = args.x;
  args.scale = 1.0f;
  double y[3];
  check_status("softmax status", tsr_reference_softmax(&args, y), TSR_OK);
  const double want[] = {1.0 / 6, 2.0 / 6, 3.0 / 6};
  check_array("softmax [0, ln2, ln3]", y, want, 3, 1e-7);

  /* scale 2 on half the values gives the same. */
  float half[] = {0.0f, (float)(log(2.0) / 2), (float)(log(3.0) / 2)};
  args.x = dense(half, TSR_DTYPE_F32, 1, SHAPE(3));
  args.scale = 2.0f;
  tsr_reference_softmax(&args, y);
  check_array("softmax with scale 2", y, want, 3, 1e-7);

  /* A row of -inf gives zeros; a row with one -inf ignores it. */
  float rows[] = {-INFINITY, -INFINITY, -INFINITY, 0.0f, -INFINITY, 0.0f};
  args.x = dense(rows, TSR_DTYPE_F32, 2, SHAPE(2, 3));
  args.scale = 1.0f;
  double y2[6];
  tsr_reference_softmax(&args, y2);
  const double want2[] = {0, 0, 0, 0.5, 0, 0.5};
  check_array("softmax all -inf row gives zeros", y2, want2, 6, 0);

  /* A +inf or a NaN makes the whole row NaN; -inf entries are zeros. */
  float special[] = {1.0f, INFINITY, -INFINITY, 1.0f, NAN, 0.0f, INFINITY, INFINITY, 2.0f};
  args.x = dense(special, TSR_DTYPE_F32, 2, SHAPE(3, 3));
  double y_special[9];
  tsr_reference_softmax(&args, y_special);
  for (int i = 0; i < 9; i++)
    check_value("softmax row with +inf or NaN is NaN", y_special[i], NAN, 0);

  /* A huge scale is exact: scale * x in fp64 cannot overflow, so the max
   * gets 1 (ties share it) and everything else 0, even where scale * x is
   * beyond f32's range. */
  float spread[] = {0.5f, -1.0f, 0.75f, 1e30f, -1e30f, 3e38f, 0.25f, 0.25f, -0.5f};
  args.x = dense(spread, TSR_DTYPE_F32, 2, SHAPE(3, 3));
  args.scale = 1e30f;
  double y_huge[9];
  tsr_reference_softmax(&args, y_huge);
  const double want_huge[] = {0, 0, 1, 0, 0, 1, 0.5, 0.5, 0};
  check_array("softmax with scale 1e30", y_huge, want_huge, 9, 0);
  args.scale = 1.0f;

  /* Rows sum to 1: rank 3, non-contiguous rows (a [2, 3, 7] view into a
   * [2, 3, 9] array) and an unaligned byte offset. */
  enum { R0 = 2, R1 = 3, N = 7, PITCH = 9 };
  float values[R0 * R1 * PITCH];
  fill_random(values, COUNT(values));
  for (int i = 0; i < COUNT(values); i++)
    values[i] *= 8.0f;
  unsigned char bytes[sizeof values + 1];
  memcpy(bytes + 1, values, sizeof values);
  args.x = dense(bytes, TSR_DTYPE_F32, 3, SHAPE(R0, R1, N));
  args.x.offset = 1;
  args.x.strides[1] = PITCH;
  args.x.strides[0] = R1 * PITCH;
  double y3[R0 * R1 * N];
  tsr_reference_softmax(&args, y3);
  for (int r = 0; r < R0 * R1; r++) {
    double sum = 0;
    for (int c = 0; c < N; c++)
      sum += y3[r * N + c];
    char what[64];
    snprintf(what, sizeof what, "softmax row %d sums to 1", r);
    check_value(what, sum, 1.0, 1e-14);
  }
  /* Larger input, larger probability: spot check ordering in row 4. */
  const float *row4 = values + (4 / R1) * R1 * PITCH + (4 % R1) * PITCH;
  check_value("softmax ratio is exp of the difference", y3[4 * N + 1] / y3[4 * N + 0],
              exp((double)row4[1] - row4[0]), 1e-13);
}

static void test_rmsnorm(void) {
  enum { N = 8 };
  const double c = 0.75;
  const float eps = 1e-3f;
  float x[N], weight[N];
  for (int i = 0; i < N; i++) {
    x[i] = (float)c;
    weight[i] = 0.5f + 0.25f * (float)i;
  }
  tsr_rmsnorm_args args;
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.x = dense(x, TSR_DTYPE_F32, 1, SHAPE(N));
  args.weight = dense(weight, TSR_DTYPE_F32, 1, SHAPE(N));
  args.y = args.x;
  args.eps = eps;
  double y[N], want[N];
  check_status("rmsnorm status", tsr_reference_rmsnorm(&args, y, NULL), TSR_OK);
  for (int i = 0; i < N; i++)
    want[i] = weight[i] * c / sqrt(c * c + (double)eps);
  check_array("rmsnorm of a constant row", y, want, N, 1e-15);

  /* Residual: x = c - r and r = c give h = c; residual_out gets h. */
  float x_part[N], residual[N];
  for (int i = 0; i < N; i++) {
    residual[i] = (float)(0.125 * i);
    x_part[i] = (float)(c - 0.125 * i);
  }
  args.x = dense(x_part, TSR_DTYPE_F32, 1, SHAPE(N));
  args.residual = dense(residual, TSR_DTYPE_F32, 1, SHAPE(N));
  double residual_out[N], h[N];
  tsr_reference_rmsnorm(&args, y, residual_out);
  for (int i = 0; i < N; i++)
    h[i] = c;
  check_array("rmsnorm with residual", y, want, N, 1e-15);
  check_array("rmsnorm residual_out is x + residual", residual_out, h, N, 0);

  /* No weight: a row of [3, 4] has rms sqrt(12.5). */
  float pair[] = {3, 4};
  args.x = dense(pair, TSR_DTYPE_F32, 1, SHAPE(2));
  args.residual = absent();
  args.weight = absent();
  args.eps = 0.0f;
  tsr_reference_rmsnorm(&args, y, NULL);
  const double want_pair[] = {3 / sqrt(12.5), 4 / sqrt(12.5)};
  check_array("rmsnorm [3, 4] without weight", y, want_pair, 2, 1e-15);
}

static void test_layernorm(void) {
  /* [1, 2, 3]: mean 2, population variance 2/3: y = [-1, 0, 1] * sqrt(3/2). */
  float x[] = {1, 2, 3};
  float weight[] = {2, 2, 2};
  float bias[] = {1, 1, 1};
  tsr_layernorm_args args;
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.x = dense(x, TSR_DTYPE_F32, 1, SHAPE(3));
  args.y = args.x;
  args.eps = 0.0f;
  double y[3];
  check_status("layernorm status", tsr_reference_layernorm(&args, y), TSR_OK);
  const double want[] = {-1.224744871391589, 0, 1.224744871391589};
  check_array("layernorm [1, 2, 3]", y, want, 3, 1e-15);
  args.weight = dense(weight, TSR_DTYPE_F32, 1, SHAPE(3));
  args.bias = dense(bias, TSR_DTYPE_F32, 1, SHAPE(3));
  tsr_reference_layernorm(&args, y);
  const double want_affine[] = {1 - 2.449489742783178, 1, 1 + 2.449489742783178};
  check_array("layernorm with weight and bias", y, want_affine, 3, 1e-15);

  /* Random rows: mean 0, variance var / (var + eps), close to 1. */
  enum { ROWS = 4, N = 33 };
  float values[ROWS * N];
  fill_random(values, COUNT(values));
  args.x = dense(values, TSR_DTYPE_F32, 2, SHAPE(ROWS, N));
  args.weight = absent();
  args.bias = absent();
  args.eps = 1e-5f;
  double out[ROWS * N];
  tsr_reference_layernorm(&args, out);
  for (int r = 0; r < ROWS; r++) {
    double mean = 0, var = 0;
    for (int c = 0; c < N; c++)
      mean += out[r * N + c];
    mean /= N;
    for (int c = 0; c < N; c++)
      var += (out[r * N + c] - mean) * (out[r * N + c] - mean);
    var /= N;
    char what[64];
    snprintf(what, sizeof what, "layernorm row %d mean 0", r);
    check_value(what, mean, 0.0, 1e-14);
    snprintf(what, sizeof what, "layernorm row %d variance ~1", r);
    check_value(what, var, 1.0, 1e-3);
  }
}

static void test_cross_entropy(void) {
  /* logits [0, ln 2, ln 3]: lse = ln 6; loss(target 2) = ln 6 - ln 3 = ln 2.
   * Rows: target 2, ignored (-100), out of range (5), target 0 (after the bad
   * row, to show every row is finished). */
  const float row[] = {0.0f, (float)log(2.0), (float)log(3.0)};
  float logits[4 * 3];
  for (int r = 0; r < 4; r++)
    memcpy(logits + r * 3, row, sizeof row);
  int32_t targets[] = {2, -100, 5, 0};
  tsr_cross_entropy_args args;
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.logits = dense(logits, TSR_DTYPE_F32, 2, SHAPE(4, 3));
  args.targets = dense(targets, TSR_DTYPE_I32, 1, SHAPE(4));
  args.ignore_index = -100;
  double loss[4], lse[4];
  check_status("cross entropy with a bad target", tsr_reference_cross_entropy(&args, loss, lse),
               TSR_ERROR_INVALID_VALUE);
  const double ln6 = 1.791759469228055;
  const double want_loss[] = {0.6931471805599453, 0.0, NAN, ln6};
  const double want_lse[] = {ln6, ln6, ln6, ln6};
  check_array("cross entropy loss", loss, want_loss, 4, 1e-7);
  check_array("cross entropy lse (ignored rows too)", lse, want_lse, 4, 1e-7);

  targets[2] = 1; /* ln 6 - ln 2 = ln 3 */
  check_status("cross entropy valid targets", tsr_reference_cross_entropy(&args, loss, NULL),
               TSR_OK);
  check_value("cross entropy loss target 1", loss[2], 1.0986122886681098, 1e-7);

  /* Transposed logits (stored [V, R]) read through strides. */
  float transposed[3 * 4];
  for (int r = 0; r < 4; r++)
    for (int c = 0; c < 3; c++)
      transposed[c * 4 + r] = logits[r * 3 + c];
  args.logits.buffer = transposed;
  args.logits.strides[0] = 1;
  args.logits.strides[1] = 4;
  double loss_t[4];
  tsr_reference_cross_entropy(&args, loss_t, NULL);
  check_array("cross entropy with strided logits", loss_t, loss, 4, 0);
}

/* ------------------------------------------------------------------------ */
/* Elementwise                                                                */
/* ------------------------------------------------------------------------ */

static void test_rope(void) {
  /* rotary_dim 4: pair 0 turns by position * 1 rad, pair 1 by
   * position * theta^(-1/2); theta = (2/pi)^2 makes that pi/2 per step.
   * x = [1, 2, 3, 4, 5, 6] at positions 1 and 2; channels 4, 5 are copied. */
  const double pi = 3.14159265358979323846;
  float x[2 * 6] = {1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6};
  tsr_rope_args args;
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.x = dense(x, TSR_DTYPE_F32, 4, SHAPE(1, 2, 1, 6));
  args.y = args.x;
  args.position_offset = 1;
  args.theta = (float)((2 / pi) * (2 / pi));
  args.rotary_dim = 4;
  args.style = TSR_ROPE_NEOX;
  double y[12];
  check_status("rope status", tsr_reference_rope(&args, y), TSR_OK);
  /* neox pairs (0, 2) and (1, 3). Position 1: (1, 3) by 1 rad; (2, 4) by 90
   * degrees -> (-4, 2). Position 2: (1, 3) by 2 rad; (2, 4) by 180 -> (-2, -4). */
  const double want_neox[] = {-1.9841106485555495, -4, 2.4623779024123156,   2,  5, 6,
                              -3.1440391170241875, -2, -0.33914308281574557, -4, 5, 6};
  check_array("rope neox by 90 and 180 degrees", y, want_neox, 12, 1e-6);

  /* gptj pairs (0, 1) and (2, 3). Position 1: (1, 2) by 1 rad; (3, 4) by 90
   * degrees -> (-4, 3). */
  args.style = TSR_ROPE_GPTJ;
  args.x = dense(x, TSR_DTYPE_F32, 4, SHAPE(1, 1, 1, 6));
  tsr_reference_rope(&args, y);
  const double want_gptj[] = {-1.1426396637476532, 1.922075596544176, -4, 3, 5, 6};
  check_array("rope gptj by 90 degrees", y, want_gptj, 6, 1e-6);

  /* Position 0 is the identity, in any style. */
  args.position_offset = 0;
  tsr_reference_rope(&args, y);
  const double identity[] = {1, 2, 3, 4, 5, 6};
  check_array("rope at position 0 is the identity", y, identity, 6, 0);

  args.rotary_dim = 8;
  check_status("rope rotary_dim past D", tsr_reference_rope(&args, y), TSR_ERROR_INVALID_VALUE);
}

static void test_swiglu_and_gelu(void) {
  float gate[] = {1, 0, -2};
  float up[] = {2, 5, 1};
  tsr_swiglu_args swiglu;
  memset(&swiglu, 0, sizeof swiglu);
  swiglu.struct_size = sizeof swiglu;
  swiglu.gate = dense(gate, TSR_DTYPE_F32, 1, SHAPE(3));
  swiglu.up = dense(up, TSR_DTYPE_F32, 1, SHAPE(3));
  swiglu.y = swiglu.gate;
  double y[3];
  check_status("swiglu status", tsr_reference_swiglu(&swiglu, y), TSR_OK);
  /* silu(1) * 2; silu(0) * 5 = 0; silu(-2) = -2 / (1 + e^2). */
  const double want[] = {1.4621171572600098, 0, -2 / (1 + exp(2.0))};
  check_array("swiglu", y, want, 3, 1e-15);

  /* Broadcast up over rows through a stride of 0. */
  float gate_rows[] = {1, 0, -2, 1, 0, -2};
  swiglu.gate = dense(gate_rows, TSR_DTYPE_F32, 2, SHAPE(2, 3));
  swiglu.up = dense(up, TSR_DTYPE_F32, 2, SHAPE(2, 3));
  swiglu.up.strides[0] = 0;
  double y_rows[6];
  tsr_reference_swiglu(&swiglu, y_rows);
  check_array("swiglu broadcast row 0", y_rows, want, 3, 1e-15);
  check_array("swiglu broadcast row 1", y_rows + 3, want, 3, 1e-15);

  float x[] = {0, 1, -1};
  tsr_gelu_args gelu;
  memset(&gelu, 0, sizeof gelu);
  gelu.struct_size = sizeof gelu;
  gelu.x = dense(x, TSR_DTYPE_F32, 1, SHAPE(3));
  gelu.y = gelu.x;
  gelu.approximate = TSR_GELU_ERF;
  check_status("gelu status", tsr_reference_gelu(&gelu, y), TSR_OK);
  const double want_erf[] = {0, 0.8413447460685429, -0.15865525393145707};
  check_array("gelu erf (gelu(0) = 0)", y, want_erf, 3, 1e-15);
  gelu.approximate = TSR_GELU_TANH;
  tsr_reference_gelu(&gelu, y);
  /* tanh form is odd-symmetric around x/2: gelu(-1) = gelu(1) - 1. */
  const double want_tanh[] = {0, 0.8411919906082768, 0.8411919906082768 - 1};
  check_array("gelu tanh (gelu(0) = 0)", y, want_tanh, 3, 1e-15);
  gelu.approximate = TSR_GELU_COUNT_;
  check_status("gelu unknown approximation", tsr_reference_gelu(&gelu, y), TSR_ERROR_INVALID_VALUE);
}

static void test_null_arguments(void) {
  double out[4];
  float value = 1.0f;
  tsr_gemm_args gemm = gemm_args(dense(&value, TSR_DTYPE_F32, 3, SHAPE(1, 1, 1)),
                                 dense(&value, TSR_DTYPE_F32, 3, SHAPE(1, 1, 1)),
                                 dense(&value, TSR_DTYPE_F32, 3, SHAPE(1, 1, 1)));
  check_status("gemm NULL args", tsr_reference_gemm(NULL, out), TSR_ERROR_NULL_ARGUMENT);
  check_status("gemm NULL d", tsr_reference_gemm(&gemm, NULL), TSR_ERROR_NULL_ARGUMENT);
  gemm.a.buffer = NULL;
  check_status("gemm NULL a buffer", tsr_reference_gemm(&gemm, out), TSR_ERROR_NULL_ARGUMENT);
  check_status("grouped gemm NULL args", tsr_reference_grouped_gemm(NULL, out),
               TSR_ERROR_NULL_ARGUMENT);
  check_status("attention NULL args", tsr_reference_attention(NULL, out, out),
               TSR_ERROR_NULL_ARGUMENT);
  tsr_attention_args attention = attention_args(dense(&value, TSR_DTYPE_F32, 4, SHAPE(1, 1, 1, 1)),
                                                dense(&value, TSR_DTYPE_F32, 4, SHAPE(1, 1, 1, 1)),
                                                dense(&value, TSR_DTYPE_F32, 4, SHAPE(1, 1, 1, 1)));
  check_status("attention NULL o", tsr_reference_attention(&attention, NULL, out),
               TSR_ERROR_NULL_ARGUMENT);
  check_status("rmsnorm NULL y", tsr_reference_rmsnorm(NULL, NULL, NULL), TSR_ERROR_NULL_ARGUMENT);
  check_status("layernorm NULL args", tsr_reference_layernorm(NULL, out), TSR_ERROR_NULL_ARGUMENT);
  check_status("softmax NULL args", tsr_reference_softmax(NULL, out), TSR_ERROR_NULL_ARGUMENT);
  check_status("rope NULL args", tsr_reference_rope(NULL, out), TSR_ERROR_NULL_ARGUMENT);
  check_status("swiglu NULL args", tsr_reference_swiglu(NULL, out), TSR_ERROR_NULL_ARGUMENT);
  check_status("gelu NULL args", tsr_reference_gelu(NULL, out), TSR_ERROR_NULL_ARGUMENT);
  tsr_cross_entropy_args cross_entropy;
  memset(&cross_entropy, 0, sizeof cross_entropy);
  int32_t target = 0;
  cross_entropy.logits = dense(&value, TSR_DTYPE_F32, 2, SHAPE(1, 1));
  cross_entropy.targets = dense(&target, TSR_DTYPE_I32, 1, SHAPE(1));
  check_status("cross entropy NULL loss", tsr_reference_cross_entropy(&cross_entropy, NULL, out),
               TSR_ERROR_NULL_ARGUMENT);
  check_status("cross entropy NULL args", tsr_reference_cross_entropy(NULL, out, out),
               TSR_ERROR_NULL_ARGUMENT);
}

int main(void) {
  test_gemm_bias_relu();
  test_gemm_alpha_beta();
  test_gemm_transposed_and_batched();
  test_gemm_half_inputs();
  test_gemm_activations();
  test_grouped_gemm();
  test_attention_two_keys();
  test_attention_one_key_returns_v();
  test_attention_causal_and_window();
  test_attention_window_equals_key_slice();
  test_attention_gqa_and_layouts();
  test_attention_huge_windows();
  test_attention_non_finite();
  test_softmax();
  test_rmsnorm();
  test_layernorm();
  test_cross_entropy();
  test_rope();
  test_swiglu_and_gelu();
  test_null_arguments();
  printf("test_reference: %d checks, %d failed\n", check_count, failure_count);
  return failure_count == 0 ? 0 : 1;
}
