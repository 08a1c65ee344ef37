/* SPDX-License-Identifier: Apache-2.0 */
/* The row ops' array kernels in AVX2 (+FMA, F16C): the passes one after
 * another, no fused steps (norm.h). */
#include "norm.h"

#if CPU_KERNELS_HAVE_AVX2

TARGET_AVX2 static double sum_avx2(const float *x, int64_t count, const row_ahead *ahead) {
  __m256d low = _mm256_setzero_pd(), high = low;
  for (int64_t i = 0; i < count; i += 8) {
    prefetch_ahead(ahead, i);
    accumulate_pd_avx2(&low, &high, load_avx2(x + i, count - i));
  }
  return sum_lanes_pd_avx2(_mm256_add_pd(low, high));
}

TARGET_AVX2 static double sum_squares_avx2(const float *x, float centre, int64_t count,
                                           const row_ahead *ahead) {
  __m256d low = _mm256_setzero_pd(), high = low;
  const __m256 c = _mm256_set1_ps(centre);
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    prefetch_ahead(ahead, i);
    __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), c);
    __m256d d0 = _mm256_cvtps_pd(_mm256_castps256_ps128(d));
    __m256d d1 = _mm256_cvtps_pd(_mm256_extractf128_ps(d, 1));
    low = _mm256_fmadd_pd(d0, d0, low);
    high = _mm256_fmadd_pd(d1, d1, high);
  }
  double result = sum_lanes_pd_avx2(_mm256_add_pd(low, high));
  for (; i < count; i++) {
    double d = (double)(x[i] - centre);
    result += d * d;
  }
  return result;
}

TARGET_AVX2 static double add_sum_squares_avx2(float *h, const float *x, const float *r,
                                               int64_t count, const row_ahead *ahead) {
  __m256d low = _mm256_setzero_pd(), high = low;
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    prefetch_ahead(ahead, i);
    __m256 v = _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(r + i));
    _mm256_storeu_ps(h + i, v);
    __m256d d0 = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
    __m256d d1 = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    low = _mm256_fmadd_pd(d0, d0, low);
    high = _mm256_fmadd_pd(d1, d1, high);
  }
  double result = sum_lanes_pd_avx2(_mm256_add_pd(low, high));
  for (; i < count; i++) {
    h[i] = x[i] + r[i];
    result += (double)h[i] * (double)h[i];
  }
  return result;
}

TARGET_AVX2 static ALWAYS_INLINE __m256 scale_block_avx2(void *context, int64_t i, int64_t count) {
  const scale_context *c = context;
  return _mm256_mul_ps(load_avx2(c->x + i, count), _mm256_set1_ps(c->factor));
}

TARGET_AVX2 static ALWAYS_INLINE __m256 scale_weight_block_avx2(void *context, int64_t i,
                                                                int64_t count) {
  const scale_context *c = context;
  return _mm256_mul_ps(_mm256_mul_ps(load_avx2(c->x + i, count), _mm256_set1_ps(c->factor)),
                       load_avx2(c->weight + i, count));
}

TARGET_AVX2 static void scale_avx2(float *y, const float *x, float factor, const float *weight,
                                   int64_t count, int stream) {
  scale_context c = {x, weight, NULL, factor, 0.0f};
  if (weight)
    map_avx2(y, count, stream, scale_weight_block_avx2, &c);
  else
    map_avx2(y, count, stream, scale_block_avx2, &c);
}

TARGET_AVX2 static ALWAYS_INLINE __m256 normalize_block_avx2(void *context, int64_t i,
                                                             int64_t count) {
  const scale_context *c = context;
  __m256 v = _mm256_mul_ps(_mm256_sub_ps(load_avx2(c->x + i, count), _mm256_set1_ps(c->mean)),
                           _mm256_set1_ps(c->factor));
  if (c->weight)
    v = _mm256_mul_ps(v, load_avx2(c->weight + i, count));
  if (c->bias)
    v = _mm256_add_ps(v, load_avx2(c->bias + i, count));
  return v;
}

TARGET_AVX2 static void normalize_avx2(float *y, const float *x, float mean, float factor,
                                       const float *weight, const float *bias, int64_t count,
                                       int stream) {
  scale_context c = {x, weight, bias, factor, mean};
  map_avx2(y, count, stream, normalize_block_avx2, &c);
}

TARGET_AVX2 static float max_of_avx2(const float *x, int64_t count, const row_ahead *ahead) {
  __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0;
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) {
    prefetch_ahead(ahead, i);
    prefetch_ahead(ahead, i + 8);
    m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
    m1 = _mm256_max_ps(m1, _mm256_loadu_ps(x + i + 8));
  }
  float result = max_lanes_avx2(_mm256_max_ps(m0, m1));
  for (; i < count; i++)
    result = x[i] > result ? x[i] : result;
  return result;
}

TARGET_AVX2 static double exp_sum_avx2(float *e, const float *x, float scale, float max,
                                       int64_t count) {
  const __m256 s = _mm256_set1_ps(scale), t = _mm256_set1_ps(max);
  double total = 0.0;
  for (int64_t b = 0; b < count; b += EXP_SUM_BLOCK) {
    int64_t end = count - b < EXP_SUM_BLOCK ? count : b + EXP_SUM_BLOCK;
    __m256 sum0 = _mm256_setzero_ps(), sum1 = sum0;
    int64_t i = b;
    for (; i + 16 <= end; i += 16) {
      __m256 v0 = exp_avx2(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), t), s));
      __m256 v1 = exp_avx2(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), t), s));
      if (e) {
        _mm256_storeu_ps(e + i, v0);
        _mm256_storeu_ps(e + i + 8, v1);
      }
      sum0 = _mm256_add_ps(sum0, v0);
      sum1 = _mm256_add_ps(sum1, v1);
    }
    for (; i < end; i += 8) {
      __m256i lanes = lanes_avx2(end - i);
      __m256 v = exp_avx2(_mm256_mul_ps(_mm256_sub_ps(load_avx2(x + i, end - i), t), s));
      v = _mm256_and_ps(v, _mm256_castsi256_ps(lanes)); /* lanes past the end add nothing */
      if (e)
        _mm256_maskstore_ps(e + i, lanes, v);
      sum0 = _mm256_add_ps(sum0, v);
    }
    __m256d low = _mm256_setzero_pd(), high = low;
    accumulate_pd_avx2(&low, &high, _mm256_add_ps(sum0, sum1));
    total += sum_lanes_pd_avx2(_mm256_add_pd(low, high));
  }
  return total;
}

const row_kernels cpu_norm_kernels_avx2 = {.sum = sum_avx2,
                                           .sum_squares = sum_squares_avx2,
                                           .add_sum_squares = add_sum_squares_avx2,
                                           .scale = scale_avx2,
                                           .normalize = normalize_avx2,
                                           .max_of = max_of_avx2,
                                           .exp_sum = exp_sum_avx2};

#endif /* CPU_KERNELS_HAVE_AVX2 */
