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
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "configs.h"
#include "cpu_internal.h"
#include "cpu_kernel_util.h"

/* Elements per task; tasks are grouped so a chunk of the pool holds at least
 * MIN_ELEMENTS_PER_CHUNK elements. STAGE_ELEMENTS: the f32 buffers of the
 * converting path. */
enum { TASK_ELEMENTS = 4096, STAGE_ELEMENTS = 512, MIN_ELEMENTS_PER_CHUNK = 16384 };
/* How far ahead (in elements) streaming loops prefetch their inputs. */
enum { PREFETCH_AHEAD_ELEMENTS = 2048 };

static const float SQRT_2_OVER_PI = 0.7978845608028654f;
static const float INV_SQRT_2 = 0.7071067811865476f;

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

/* erfc(a) for a >= 0 in the vector kernels: t * H(t) * e^(-a^2) with
 * t = 1 / (1 + ERFC_P a) in (0, 1]. H is a degree-10 polynomial fitted here
 * (mpmath chebyfit of erfc(a) e^(a^2) / t over t in [0, 1]): relative error
 * 8e-9 in exact arithmetic, 1e-7 evaluated in f32 by Horner's rule. Highest
 * degree first. */
static const float ERFC_P = 0.4f;
static const float ERFC_A_MAX = 11.0f;
static const float ERFC_H[11] = {-2.986862883e-02f, 1.438410729e-01f,  -2.430417389e-01f,
                                 1.468032449e-01f,  -5.379316583e-02f, 8.712064475e-02f,
                                 1.180951223e-01f,  1.718905717e-01f,  2.076007277e-01f,
                                 2.256763130e-01f,  2.256758362e-01f};

/* ---- array kernels ---- */

/* `prefetch`: the inputs are in memory and are prefetched ahead. */
typedef struct elementwise_kernels {
  void (*swiglu)(float *y, const float *gate, const float *up, int64_t count, int stream,
                 int prefetch);
  void (*gelu)(float *y, const float *x, int64_t count, int approximate, int stream, int prefetch);
  /* cos and sin of position * inverse_frequency[i], i < half, computed in
   * double and rounded */
  void (*angles)(float *cosines, float *sines, double position, const double *inverse_frequency,
                 int64_t half);
  /* neox: pairs (i, i + half) of the first 2 * half channels turn; the
   * channels from 2 * half to dim are copied */
  void (*rope_neox)(float *y, const float *x, const float *cosines, const float *sines,
                    int64_t half, int64_t dim, int stream);
  /* gpt-j: pairs (2i, 2i + 1); cos2 and sin2 hold each pair's cosine twice
   * and its sine as (-s, s) */
  void (*rope_gptj)(float *y, const float *x, const float *cos2, const float *sin2, int64_t rotary,
                    int64_t dim, int stream);
} elementwise_kernels;

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

static void angles_generic(float *cosines, float *sines, double position,
                           const double *inverse_frequency, int64_t half) {
  for (int64_t i = 0; i < half; i++) {
    double angle = position * inverse_frequency[i];
    cosines[i] = (float)cos(angle);
    sines[i] = (float)sin(angle);
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

static void rope_gptj_generic(float *y, const float *x, const float *cos2, const float *sin2,
                              int64_t rotary, int64_t dim, int stream) {
  (void)stream;
  for (int64_t i = 0; i < rotary; i += 2) {
    float first = x[i], second = x[i + 1];
    y[i] = first * cos2[i] + second * sin2[i];
    y[i + 1] = second * cos2[i + 1] + first * sin2[i + 1];
  }
  for (int64_t i = rotary; i < dim; i++)
    y[i] = x[i];
}

static const elementwise_kernels GENERIC_KERNELS = {swiglu_generic, gelu_generic, angles_generic,
                                                    rope_neox_generic, rope_gptj_generic};

/* The reduction of angles to [-pi/4, pi/4] (vector kernels, in double):
 * angle - k pi/2 with pi/2 in two parts, the first through an FMA. */
static const double PI_OVER_2_HIGH = 1.5707963267948966;
static const double PI_OVER_2_LOW = 6.123233995736766e-17;
static const double TWO_OVER_PI = 0.6366197723675814;

#if CPU_KERNELS_HAVE_AVX2

/* ---- AVX2 ---- */

TARGET_AVX2 static ALWAYS_INLINE __m256 silu_avx2(__m256 x) {
  __m256 value = _mm256_div_ps(
      x, _mm256_add_ps(_mm256_set1_ps(1.0f), exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), x))));
  __m256 minus_inf = _mm256_cmp_ps(x, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ);
  return _mm256_andnot_ps(minus_inf, value);
}

TARGET_AVX2 static ALWAYS_INLINE __m256 gelu_tanh_avx2(__m256 x) {
  __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
  __m256 u = _mm256_mul_ps(_mm256_set1_ps(SQRT_2_OVER_PI),
                           _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), x3, x));
  __m256 value = _mm256_div_ps(
      x, _mm256_add_ps(_mm256_set1_ps(1.0f), exp_avx2(_mm256_mul_ps(_mm256_set1_ps(-2.0f), u))));
  __m256 minus_inf = _mm256_cmp_ps(x, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ);
  return _mm256_andnot_ps(minus_inf, value);
}

/* 0.5 x (1 + erf(x / sqrt 2)): with E = erfc(|z|), 0.5 x E for z < 0 and
 * x - 0.5 x E for z >= 0. */
TARGET_AVX2 static ALWAYS_INLINE __m256 gelu_erf_avx2(__m256 x) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  __m256 z = _mm256_mul_ps(x, _mm256_set1_ps(INV_SQRT_2));
  /* Past 11, e^(-a^2) is 0 in f32 (and a^2 stays finite for the split). */
  __m256 a = _mm256_min_ps(_mm256_andnot_ps(sign_bit, z), _mm256_set1_ps(ERFC_A_MAX));
  __m256 t = _mm256_div_ps(_mm256_set1_ps(1.0f),
                           _mm256_fmadd_ps(_mm256_set1_ps(ERFC_P), a, _mm256_set1_ps(1.0f)));
  __m256 h = _mm256_set1_ps(ERFC_H[0]);
  for (int k = 1; k < 11; k++)
    h = _mm256_fmadd_ps(h, t, _mm256_set1_ps(ERFC_H[k]));
  /* e^(-a^2) with a^2 = high + low split exactly by an FMA. */
  __m256 high = _mm256_mul_ps(a, a);
  __m256 low = _mm256_fmsub_ps(a, a, high);
  __m256 gauss = exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), high));
  gauss = _mm256_fnmadd_ps(gauss, low, gauss);
  __m256 e = _mm256_mul_ps(t, _mm256_mul_ps(h, gauss));
  /* x (1 - E / 2) rather than x - x E / 2: E is 0 where x is inf. */
  __m256 positive_value =
      _mm256_mul_ps(x, _mm256_fnmadd_ps(_mm256_set1_ps(0.5f), e, _mm256_set1_ps(1.0f)));
  __m256 negative_value = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), e);
  __m256 negative = _mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_LT_OQ);
  __m256 value = _mm256_blendv_ps(positive_value, negative_value, negative);
  __m256 minus_inf = _mm256_cmp_ps(x, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ);
  return _mm256_andnot_ps(minus_inf, value);
}

typedef struct map_context {
  const float *a, *b;
  int prefetch;
} map_context;

TARGET_AVX2 static ALWAYS_INLINE void prefetch_inputs(const map_context *c, int64_t i) {
  if (c->prefetch) {
    _mm_prefetch((const char *)(c->a + i + PREFETCH_AHEAD_ELEMENTS), _MM_HINT_T2);
    if (c->b)
      _mm_prefetch((const char *)(c->b + i + PREFETCH_AHEAD_ELEMENTS), _MM_HINT_T2);
  }
}

TARGET_AVX2 static ALWAYS_INLINE __m256 swiglu_block_avx2(void *context, int64_t i, int64_t count) {
  const map_context *c = context;
  if ((i & 15) == 0)
    prefetch_inputs(c, i);
  return _mm256_mul_ps(silu_avx2(load_avx2(c->a + i, count)), load_avx2(c->b + i, count));
}

TARGET_AVX2 static ALWAYS_INLINE __m256 gelu_tanh_block_avx2(void *context, int64_t i,
                                                             int64_t count) {
  const map_context *c = context;
  if ((i & 15) == 0)
    prefetch_inputs(c, i);
  return gelu_tanh_avx2(load_avx2(c->a + i, count));
}

TARGET_AVX2 static ALWAYS_INLINE __m256 gelu_erf_block_avx2(void *context, int64_t i,
                                                            int64_t count) {
  const map_context *c = context;
  if ((i & 15) == 0)
    prefetch_inputs(c, i);
  return gelu_erf_avx2(load_avx2(c->a + i, count));
}

TARGET_AVX2 static void swiglu_avx2(float *y, const float *gate, const float *up, int64_t count,
                                    int stream, int prefetch) {
  map_context c = {gate, up, prefetch};
  map_avx2(y, count, stream, swiglu_block_avx2, &c);
}

TARGET_AVX2 static void gelu_avx2(float *y, const float *x, int64_t count, int approximate,
                                  int stream, int prefetch) {
  map_context c = {x, NULL, prefetch};
  if (approximate == TSR_GELU_TANH)
    map_avx2(y, count, stream, gelu_tanh_block_avx2, &c);
  else
    map_avx2(y, count, stream, gelu_erf_block_avx2, &c);
}

/* sin and cos of r in [-pi/4, pi/4]: Taylor series to r^9 and r^10, below
 * 2e-9 of error, far under f32's rounding. */
TARGET_AVX2 static ALWAYS_INLINE void sin_cos_reduced_avx2(__m256d r, __m256d *sine,
                                                           __m256d *cosine) {
  __m256d r2 = _mm256_mul_pd(r, r);
  __m256d s = _mm256_set1_pd(1.0 / 362880.0);
  s = _mm256_fmadd_pd(s, r2, _mm256_set1_pd(-1.0 / 5040.0));
  s = _mm256_fmadd_pd(s, r2, _mm256_set1_pd(1.0 / 120.0));
  s = _mm256_fmadd_pd(s, r2, _mm256_set1_pd(-1.0 / 6.0));
  *sine = _mm256_fmadd_pd(_mm256_mul_pd(s, r2), r, r);
  __m256d c = _mm256_set1_pd(-1.0 / 3628800.0);
  c = _mm256_fmadd_pd(c, r2, _mm256_set1_pd(1.0 / 40320.0));
  c = _mm256_fmadd_pd(c, r2, _mm256_set1_pd(-1.0 / 720.0));
  c = _mm256_fmadd_pd(c, r2, _mm256_set1_pd(1.0 / 24.0));
  c = _mm256_fmadd_pd(c, r2, _mm256_set1_pd(-0.5));
  *cosine = _mm256_fmadd_pd(c, r2, _mm256_set1_pd(1.0));
}

TARGET_AVX2 static void angles_avx2(float *cosines, float *sines, double position,
                                    const double *inverse_frequency, int64_t half) {
  int64_t i = 0;
  for (; i + 4 <= half; i += 4) {
    __m256d angle = _mm256_mul_pd(_mm256_set1_pd(position), _mm256_loadu_pd(inverse_frequency + i));
    __m256d k = _mm256_round_pd(_mm256_mul_pd(angle, _mm256_set1_pd(TWO_OVER_PI)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256d r = _mm256_fnmadd_pd(k, _mm256_set1_pd(PI_OVER_2_HIGH), angle);
    r = _mm256_fnmadd_pd(k, _mm256_set1_pd(PI_OVER_2_LOW), r);
    __m256d sine, cosine;
    sin_cos_reduced_avx2(r, &sine, &cosine);
    /* Quadrant q = k mod 4: odd swaps sine and cosine; the signs follow. */
    __m256i q = _mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(k));
    __m256d odd = _mm256_castsi256_pd(
        _mm256_cmpeq_epi64(_mm256_and_si256(q, _mm256_set1_epi64x(1)), _mm256_set1_epi64x(1)));
    __m256d sin_value = _mm256_blendv_pd(sine, cosine, odd);
    __m256d cos_value = _mm256_blendv_pd(cosine, sine, odd);
    __m256i sin_negative = _mm256_slli_epi64(_mm256_and_si256(q, _mm256_set1_epi64x(2)), 62);
    __m256i cos_negative = _mm256_slli_epi64(
        _mm256_and_si256(_mm256_add_epi64(q, _mm256_set1_epi64x(1)), _mm256_set1_epi64x(2)), 62);
    sin_value = _mm256_xor_pd(sin_value, _mm256_castsi256_pd(sin_negative));
    cos_value = _mm256_xor_pd(cos_value, _mm256_castsi256_pd(cos_negative));
    _mm_storeu_ps(sines + i, _mm256_cvtpd_ps(sin_value));
    _mm_storeu_ps(cosines + i, _mm256_cvtpd_ps(cos_value));
  }
  angles_generic(cosines + i, sines + i, position, inverse_frequency + i, half - i);
}

TARGET_AVX2 static void rope_neox_avx2(float *y, const float *x, const float *cosines,
                                       const float *sines, int64_t half, int64_t dim, int stream) {
  int64_t i = 0;
  for (; i + 8 <= half; i += 8) {
    __m256 first = _mm256_loadu_ps(x + i), second = _mm256_loadu_ps(x + i + half);
    __m256 c = _mm256_loadu_ps(cosines + i), s = _mm256_loadu_ps(sines + i);
    store8_avx2(y + i, _mm256_fnmadd_ps(second, s, _mm256_mul_ps(first, c)), stream);
    store8_avx2(y + i + half, _mm256_fmadd_ps(first, s, _mm256_mul_ps(second, c)), stream);
  }
  for (; i < half; i++) {
    float first = x[i], second = x[i + half];
    y[i] = first * cosines[i] - second * sines[i];
    y[i + half] = second * cosines[i] + first * sines[i];
  }
  for (i = 2 * half; i + 8 <= dim; i += 8)
    store8_avx2(y + i, _mm256_loadu_ps(x + i), stream);
  for (; i < dim; i++)
    y[i] = x[i];
}

TARGET_AVX2 static void rope_gptj_avx2(float *y, const float *x, const float *cos2,
                                       const float *sin2, int64_t rotary, int64_t dim, int stream) {
  int64_t i = 0;
  for (; i + 8 <= rotary; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    __m256 swapped = _mm256_permute_ps(v, 0xb1); /* pairs exchanged */
    store8_avx2(y + i,
                _mm256_fmadd_ps(swapped, _mm256_loadu_ps(sin2 + i),
                                _mm256_mul_ps(v, _mm256_loadu_ps(cos2 + i))),
                stream);
  }
  rope_gptj_generic(y + i, x + i, cos2 + i, sin2 + i, rotary - i, dim - i, 0);
}

static const elementwise_kernels AVX2_KERNELS = {swiglu_avx2, gelu_avx2, angles_avx2,
                                                 rope_neox_avx2, rope_gptj_avx2};

/* ---- AVX-512 ---- */

TARGET_AVX512 static ALWAYS_INLINE __m512 gelu_tanh_avx512(__m512 x) {
  __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
  __m512 u = _mm512_mul_ps(_mm512_set1_ps(SQRT_2_OVER_PI),
                           _mm512_fmadd_ps(_mm512_set1_ps(0.044715f), x3, x));
  __m512 value = _mm512_div_ps(
      x, _mm512_add_ps(_mm512_set1_ps(1.0f), exp_avx512(_mm512_mul_ps(_mm512_set1_ps(-2.0f), u))));
  __mmask16 minus_inf = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ);
  return _mm512_maskz_mov_ps((__mmask16)~minus_inf, value);
}

TARGET_AVX512 static ALWAYS_INLINE __m512 gelu_erf_avx512(__m512 x) {
  __m512 z = _mm512_mul_ps(x, _mm512_set1_ps(INV_SQRT_2));
  __m512 a = _mm512_min_ps(_mm512_abs_ps(z), _mm512_set1_ps(ERFC_A_MAX));
  __m512 t = _mm512_div_ps(_mm512_set1_ps(1.0f),
                           _mm512_fmadd_ps(_mm512_set1_ps(ERFC_P), a, _mm512_set1_ps(1.0f)));
  __m512 h = _mm512_set1_ps(ERFC_H[0]);
  for (int k = 1; k < 11; k++)
    h = _mm512_fmadd_ps(h, t, _mm512_set1_ps(ERFC_H[k]));
  __m512 high = _mm512_mul_ps(a, a);
  __m512 low = _mm512_fmsub_ps(a, a, high);
  __m512 gauss = exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), high));
  gauss = _mm512_fnmadd_ps(gauss, low, gauss);
  __m512 e = _mm512_mul_ps(t, _mm512_mul_ps(h, gauss));
  __m512 positive_value =
      _mm512_mul_ps(x, _mm512_fnmadd_ps(_mm512_set1_ps(0.5f), e, _mm512_set1_ps(1.0f)));
  __m512 negative_value = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), e);
  __mmask16 negative = _mm512_cmp_ps_mask(z, _mm512_setzero_ps(), _CMP_LT_OQ);
  __m512 value = _mm512_mask_blend_ps(negative, positive_value, negative_value);
  __mmask16 minus_inf = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ);
  return _mm512_maskz_mov_ps((__mmask16)~minus_inf, value);
}

TARGET_AVX512 static ALWAYS_INLINE void prefetch_inputs_avx512(const map_context *c, int64_t i) {
  if (c->prefetch) {
    _mm_prefetch((const char *)(c->a + i + PREFETCH_AHEAD_ELEMENTS), _MM_HINT_T2);
    if (c->b)
      _mm_prefetch((const char *)(c->b + i + PREFETCH_AHEAD_ELEMENTS), _MM_HINT_T2);
  }
}

TARGET_AVX512 static ALWAYS_INLINE __m512 swiglu_block_avx512(void *context, int64_t i,
                                                              __mmask16 m) {
  const map_context *c = context;
  prefetch_inputs_avx512(c, i);
  return _mm512_mul_ps(silu_fast_avx512(_mm512_maskz_loadu_ps(m, c->a + i)),
                       _mm512_maskz_loadu_ps(m, c->b + i));
}

TARGET_AVX512 static ALWAYS_INLINE __m512 gelu_tanh_block_avx512(void *context, int64_t i,
                                                                 __mmask16 m) {
  const map_context *c = context;
  prefetch_inputs_avx512(c, i);
  return gelu_tanh_avx512(_mm512_maskz_loadu_ps(m, c->a + i));
}

TARGET_AVX512 static ALWAYS_INLINE __m512 gelu_erf_block_avx512(void *context, int64_t i,
                                                                __mmask16 m) {
  const map_context *c = context;
  prefetch_inputs_avx512(c, i);
  return gelu_erf_avx512(_mm512_maskz_loadu_ps(m, c->a + i));
}

TARGET_AVX512 static void swiglu_avx512(float *y, const float *gate, const float *up, int64_t count,
                                        int stream, int prefetch) {
  map_context c = {gate, up, prefetch};
  map_avx512(y, count, stream, swiglu_block_avx512, &c);
}

TARGET_AVX512 static void gelu_avx512(float *y, const float *x, int64_t count, int approximate,
                                      int stream, int prefetch) {
  map_context c = {x, NULL, prefetch};
  if (approximate == TSR_GELU_TANH)
    map_avx512(y, count, stream, gelu_tanh_block_avx512, &c);
  else
    map_avx512(y, count, stream, gelu_erf_block_avx512, &c);
}

TARGET_AVX512 static void angles_avx512(float *cosines, float *sines, double position,
                                        const double *inverse_frequency, int64_t half) {
  for (int64_t i = 0; i < half; i += 8) {
    __mmask8 m = (__mmask8)(half - i >= 8 ? 0xffu : (1u << (half - i)) - 1u);
    __m512d angle =
        _mm512_mul_pd(_mm512_set1_pd(position), _mm512_maskz_loadu_pd(m, inverse_frequency + i));
    __m512d k = _mm512_roundscale_pd(_mm512_mul_pd(angle, _mm512_set1_pd(TWO_OVER_PI)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512d r = _mm512_fnmadd_pd(k, _mm512_set1_pd(PI_OVER_2_HIGH), angle);
    r = _mm512_fnmadd_pd(k, _mm512_set1_pd(PI_OVER_2_LOW), r);
    __m512d r2 = _mm512_mul_pd(r, r);
    __m512d s = _mm512_set1_pd(1.0 / 362880.0);
    s = _mm512_fmadd_pd(s, r2, _mm512_set1_pd(-1.0 / 5040.0));
    s = _mm512_fmadd_pd(s, r2, _mm512_set1_pd(1.0 / 120.0));
    s = _mm512_fmadd_pd(s, r2, _mm512_set1_pd(-1.0 / 6.0));
    __m512d sine = _mm512_fmadd_pd(_mm512_mul_pd(s, r2), r, r);
    __m512d c = _mm512_set1_pd(-1.0 / 3628800.0);
    c = _mm512_fmadd_pd(c, r2, _mm512_set1_pd(1.0 / 40320.0));
    c = _mm512_fmadd_pd(c, r2, _mm512_set1_pd(-1.0 / 720.0));
    c = _mm512_fmadd_pd(c, r2, _mm512_set1_pd(1.0 / 24.0));
    c = _mm512_fmadd_pd(c, r2, _mm512_set1_pd(-0.5));
    __m512d cosine = _mm512_fmadd_pd(c, r2, _mm512_set1_pd(1.0));
    /* Quadrant q = k mod 4: odd swaps sine and cosine; the signs follow. */
    __m512i q = _mm512_cvtpd_epi64(k);
    __mmask8 odd = _mm512_test_epi64_mask(q, _mm512_set1_epi64(1));
    __m512d sin_value = _mm512_mask_blend_pd(odd, sine, cosine);
    __m512d cos_value = _mm512_mask_blend_pd(odd, cosine, sine);
    __m512i sin_negative = _mm512_slli_epi64(_mm512_and_si512(q, _mm512_set1_epi64(2)), 62);
    __m512i cos_negative = _mm512_slli_epi64(
        _mm512_and_si512(_mm512_add_epi64(q, _mm512_set1_epi64(1)), _mm512_set1_epi64(2)), 62);
    sin_value = _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(sin_value), sin_negative));
    cos_value = _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(cos_value), cos_negative));
    _mm256_mask_storeu_ps(sines + i, m, _mm512_cvtpd_ps(sin_value));
    _mm256_mask_storeu_ps(cosines + i, m, _mm512_cvtpd_ps(cos_value));
  }
}

TARGET_AVX512 static void rope_neox_avx512(float *y, const float *x, const float *cosines,
                                           const float *sines, int64_t half, int64_t dim,
                                           int stream) {
  for (int64_t i = 0; i < half; i += 16) {
    __mmask16 m = lanes_avx512(half - i);
    __m512 first = _mm512_maskz_loadu_ps(m, x + i), second = _mm512_maskz_loadu_ps(m, x + i + half);
    __m512 c = _mm512_maskz_loadu_ps(m, cosines + i), s = _mm512_maskz_loadu_ps(m, sines + i);
    store16_avx512(y + i, _mm512_fnmadd_ps(second, s, _mm512_mul_ps(first, c)), m, stream);
    store16_avx512(y + i + half, _mm512_fmadd_ps(first, s, _mm512_mul_ps(second, c)), m, stream);
  }
  for (int64_t i = 2 * half; i < dim; i += 16) {
    __mmask16 m = lanes_avx512(dim - i);
    store16_avx512(y + i, _mm512_maskz_loadu_ps(m, x + i), m, stream);
  }
}

TARGET_AVX512 static void rope_gptj_avx512(float *y, const float *x, const float *cos2,
                                           const float *sin2, int64_t rotary, int64_t dim,
                                           int stream) {
  for (int64_t i = 0; i < rotary; i += 16) {
    __mmask16 m = lanes_avx512(rotary - i); /* rotary is even: pairs stay whole */
    __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    __m512 swapped = _mm512_permute_ps(v, 0xb1);
    store16_avx512(y + i,
                   _mm512_fmadd_ps(swapped, _mm512_maskz_loadu_ps(m, sin2 + i),
                                   _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, cos2 + i))),
                   m, stream);
  }
  for (int64_t i = rotary; i < dim; i += 16) {
    __mmask16 m = lanes_avx512(dim - i);
    store16_avx512(y + i, _mm512_maskz_loadu_ps(m, x + i), m, stream);
  }
}

static const elementwise_kernels AVX512_KERNELS = {swiglu_avx512, gelu_avx512, angles_avx512,
                                                   rope_neox_avx512, rope_gptj_avx512};

#endif /* CPU_KERNELS_HAVE_AVX2 */

static const elementwise_kernels *select_kernels(kernel_level level) {
#if CPU_KERNELS_HAVE_AVX2
  if (level == KERNEL_AVX512)
    return &AVX512_KERNELS;
  if (level == KERNEL_AVX2)
    return &AVX2_KERNELS;
#endif
  (void)level;
  return &GENERIC_KERNELS;
}

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
  job->direct =
      job->a->dtype == TSR_DTYPE_F32 && y->dtype == TSR_DTYPE_F32 &&
      (job->flat || (job->a->strides[job->a->rank - 1] == 1 && y->strides[y->rank - 1] == 1 &&
                     (!job->b || job->b->strides[job->b->rank - 1] == 1)));
  job->stream = should_stream(numel, y->dtype);
  job->tasks_per_row = (job->row_length + TASK_ELEMENTS - 1) / TASK_ELEMENTS;
  int64_t task_elements = job->row_length < TASK_ELEMENTS ? job->row_length : TASK_ELEMENTS;
  int64_t grain = MIN_ELEMENTS_PER_CHUNK / task_elements;
  cpu_pool_parallel_for(exec->pool, rows * job->tasks_per_row, grain > 0 ? grain : 1,
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
  int64_t grain = MIN_ELEMENTS_PER_CHUNK / token_elements;
  cpu_pool_parallel_for(exec->pool, tokens, grain > 0 ? grain : 1, rope_range, &job);
  free(job.scratch);
  free(job.inverse_frequency);
  return TSR_OK;
}
