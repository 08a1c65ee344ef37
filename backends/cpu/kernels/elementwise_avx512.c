/* SPDX-License-Identifier: Apache-2.0 */
/* SwiGLU, GELU and RoPE array kernels in AVX-512 (F/BW/VL/DQ); elementwise.h
 * has the formulas' constants. */
#include "elementwise.h"

#if CPU_KERNELS_HAVE_AVX2

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

TARGET_AVX512 static ALWAYS_INLINE void swiglu16_step_avx512(uint16_t *y, const uint16_t *gate,
                                                             const uint16_t *up, int32_t dtype,
                                                             bool hw_bf16, __mmask16 m,
                                                             bool stream) {
  __m512 g = load16_half_avx512(gate, dtype, m), u = load16_half_avx512(up, dtype, m);
  __m512 v = _mm512_mul_ps(silu_fast_avx512(g), u);
  __m256i out = hw_bf16 ? to_bf16_hw16_avx512(v) : to_half16_avx512(v, dtype);
  if (stream)
    _mm256_stream_si256((__m256i *)y, out);
  else
    _mm256_mask_storeu_epi16(y, m, out);
}

/* One loop per dtype and bf16 rounding (ALWAYS_INLINE: no test left in
 * it); y is streamed a whole aligned vector at a time where asked. */
TARGET_AVX512 static ALWAYS_INLINE void swiglu16_loop(uint16_t *y, const uint16_t *gate,
                                                      const uint16_t *up, int64_t count,
                                                      int32_t dtype, bool hw_bf16, int stream,
                                                      int prefetch) {
  const bool streaming = stream && ((uintptr_t)y & 31u) == 0;
  int64_t i = 0;
  for (; i + 32 <= count; i += 32) {
    if (prefetch) { /* a 64-byte line of each input every 32 elements */
      _mm_prefetch((const char *)(gate + i + PREFETCH_AHEAD_ELEMENTS), _MM_HINT_T2);
      _mm_prefetch((const char *)(up + i + PREFETCH_AHEAD_ELEMENTS), _MM_HINT_T2);
    }
    swiglu16_step_avx512(y + i, gate + i, up + i, dtype, hw_bf16, 0xffff, streaming);
    swiglu16_step_avx512(y + i + 16, gate + i + 16, up + i + 16, dtype, hw_bf16, 0xffff, streaming);
  }
  for (; i < count; i += 16) {
    __mmask16 m = lanes_avx512(count - i);
    swiglu16_step_avx512(y + i, gate + i, up + i, dtype, hw_bf16, m, streaming && m == 0xffff);
  }
}

TARGET_AVX512 static void swiglu16_avx512(uint16_t *y, const uint16_t *gate, const uint16_t *up,
                                          int64_t count, int32_t dtype, int stream, int prefetch) {
  if (dtype == TSR_DTYPE_F16)
    swiglu16_loop(y, gate, up, count, TSR_DTYPE_F16, false, stream, prefetch);
  else if (cpu_isa_includes(cpu_isa_active(), CPU_ISA_AVX512_BF16))
    swiglu16_loop(y, gate, up, count, TSR_DTYPE_BF16, true, stream, prefetch);
  else
    swiglu16_loop(y, gate, up, count, TSR_DTYPE_BF16, false, stream, prefetch);
}

const elementwise_kernels cpu_elementwise_kernels_avx512 = {
    swiglu_avx512, gelu_avx512, angles_avx512, rope_neox_avx512, rope_gptj_avx512, swiglu16_avx512};

#endif /* CPU_KERNELS_HAVE_AVX2 */
