/* SPDX-License-Identifier: Apache-2.0 */
/* SwiGLU, GELU and RoPE array kernels in AVX2 (+FMA, F16C); elementwise.h
 * has the formulas' constants. */
#include "elementwise.h"

#if CPU_KERNELS_HAVE_AVX2

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

const elementwise_kernels cpu_elementwise_kernels_avx2 = {
    swiglu_avx2, gelu_avx2, angles_avx2, rope_neox_avx2, rope_gptj_avx2, NULL};

#endif /* CPU_KERNELS_HAVE_AVX2 */
