/* SPDX-License-Identifier: Apache-2.0 */
/* Attention's online-softmax, rescale and transpose steps in AVX2 (+FMA,
 * F16C); attention.h describes them. */
#include "attention.h"

#if CPU_KERNELS_HAVE_AVX2

TARGET_AVX2 static void softmax_rows_avx2(float *s, int64_t ld, int64_t rows, int64_t keys,
                                          const visible_keys *visible, int all_visible,
                                          float *row_max, float *row_sum, float *correction) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 inf = _mm256_set1_ps(INFINITY);
  for (int64_t r = 0; r < rows; r++) {
    float *row = s + r * ld;
    int32_t first = all_visible ? 0 : visible[r].first;
    int32_t last = all_visible ? (int32_t)keys - 1 : visible[r].last;
    const __m256i lo = _mm256_set1_epi32(first - 1), hi = _mm256_set1_epi32(last + 1);
    __m256 max = _mm256_set1_ps(-INFINITY);
    for (int64_t j = 0; j < keys; j += 8) {
      __m256i index = _mm256_add_epi32(lane, _mm256_set1_epi32((int32_t)j));
      __m256i seen = _mm256_and_si256(_mm256_cmpgt_epi32(index, lo), _mm256_cmpgt_epi32(hi, index));
      __m256 v = _mm256_maskload_ps(row + j, seen);
      max = _mm256_blendv_ps(max, _mm256_max_ps(max, v), _mm256_castsi256_ps(seen));
    }
    float tile_max = max_lanes_avx2(max);
    float new_max = tile_max > row_max[r] ? tile_max : row_max[r];
    const __m256 shift = _mm256_set1_ps(safe_shift(new_max));
    __m256 sum = _mm256_setzero_ps();
    for (int64_t j = 0; j < keys; j += 8) {
      __m256i index = _mm256_add_epi32(lane, _mm256_set1_epi32((int32_t)j));
      __m256i seen = _mm256_and_si256(_mm256_cmpgt_epi32(index, lo), _mm256_cmpgt_epi32(hi, index));
      __m256 v = _mm256_maskload_ps(row + j, seen); /* 0 where unseen */
      __m256 p = exp_avx2(_mm256_sub_ps(v, shift));
      /* all ones (a NaN) where the score is infinite */
      p = _mm256_or_ps(p, _mm256_cmp_ps(_mm256_and_ps(v, magnitude), inf, _CMP_EQ_OQ));
      p = _mm256_and_ps(p, _mm256_castsi256_ps(seen));
      sum = _mm256_add_ps(sum, p);
      if (keys - j >= 8)
        _mm256_storeu_ps(row + j, p);
      else
        _mm256_maskstore_ps(row + j, lanes_avx2(keys - j), p);
    }
    __m256d low = _mm256_setzero_pd(), high = low;
    accumulate_pd_avx2(&low, &high, sum);
    correction[r] = exp_f32(row_max[r] - safe_shift(new_max));
    row_sum[r] = row_sum[r] * correction[r] + (float)sum_lanes_pd_avx2(_mm256_add_pd(low, high));
    row_max[r] = new_max;
  }
}

TARGET_AVX2 static void rescale_rows_avx2(float *o, int64_t ld, int64_t rows, int64_t dim,
                                          const float *correction) {
  for (int64_t r = 0; r < rows; r++) {
    if (correction[r] == 1.0f)
      continue;
    const __m256 f = _mm256_set1_ps(correction[r]);
    float *row = o + r * ld;
    int64_t c = 0;
    for (; c + 8 <= dim; c += 8)
      _mm256_storeu_ps(row + c, _mm256_mul_ps(_mm256_loadu_ps(row + c), f));
    for (; c < dim; c++)
      row[c] *= correction[r];
  }
}

/* 8 x 8 blocks: unpack pairs, then 64-bit pairs, then 128-bit halves. */
TARGET_AVX2 static void transpose_avx2(float *dst, int64_t dst_ld, const float *src, int64_t src_ld,
                                       int64_t keys, int64_t dim) {
  int64_t j0 = 0;
  for (; j0 + 8 <= keys; j0 += 8) {
    int64_t d0 = 0;
    for (; d0 + 8 <= dim; d0 += 8) {
      __m256 a[8], t[8], u[8];
      for (int i = 0; i < 8; i++)
        a[i] = _mm256_loadu_ps(src + (j0 + i) * src_ld + d0);
      for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(a[2 * i], a[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(a[2 * i], a[2 * i + 1]);
      }
      for (int i = 0; i < 2; i++) {
        __m256d x = _mm256_castps_pd(t[4 * i]), y = _mm256_castps_pd(t[4 * i + 2]);
        __m256d z = _mm256_castps_pd(t[4 * i + 1]), w = _mm256_castps_pd(t[4 * i + 3]);
        u[4 * i] = _mm256_castpd_ps(_mm256_unpacklo_pd(x, y));
        u[4 * i + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(x, y));
        u[4 * i + 2] = _mm256_castpd_ps(_mm256_unpacklo_pd(z, w));
        u[4 * i + 3] = _mm256_castpd_ps(_mm256_unpackhi_pd(z, w));
      }
      /* u[m] holds column m (low half) and m + 4 (high half) of rows 0-3,
       * u[4 + m] the same of rows 4-7. */
      for (int m = 0; m < 4; m++) {
        _mm256_storeu_ps(dst + (d0 + m) * dst_ld + j0,
                         _mm256_permute2f128_ps(u[m], u[4 + m], 0x20));
        _mm256_storeu_ps(dst + (d0 + m + 4) * dst_ld + j0,
                         _mm256_permute2f128_ps(u[m], u[4 + m], 0x31));
      }
    }
    transpose_generic(dst + d0 * dst_ld + j0, dst_ld, src + j0 * src_ld + d0, src_ld, 8, dim - d0);
  }
  transpose_generic(dst + j0, dst_ld, src + j0 * src_ld, src_ld, keys - j0, dim);
}

/* cap * tanh(s / cap) as in attention_avx512.c; scores that are not
 * finite (|s| not below inf, or unordered) become NaN. */
TARGET_AVX2 static void softcap_rows_avx2(float *s, int64_t ld, int64_t rows, int64_t keys,
                                          float cap) {
  const __m256 inverse = _mm256_set1_ps(1.0f / cap), factor = _mm256_set1_ps(cap);
  const __m256 one = _mm256_set1_ps(1.0f), two = _mm256_set1_ps(2.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f), nan = _mm256_set1_ps(NAN);
  const __m256 inf = _mm256_set1_ps(INFINITY);
  for (int64_t r = 0; r < rows; r++) {
    float *row = s + r * ld;
    for (int64_t j = 0; j < keys; j += 8) {
      __m256i m = lanes_avx2(keys - j);
      __m256 x = _mm256_maskload_ps(row + j, m);
      __m256 y = _mm256_mul_ps(x, inverse);
      __m256 magnitude = _mm256_andnot_ps(sign, y);
      __m256 e = exp_avx2(_mm256_add_ps(magnitude, magnitude));
      __m256 t = _mm256_sub_ps(one, _mm256_div_ps(two, _mm256_add_ps(e, one)));
      t = _mm256_mul_ps(_mm256_or_ps(t, _mm256_and_ps(sign, y)), factor);
      __m256 finite = _mm256_cmp_ps(_mm256_andnot_ps(sign, x), inf, _CMP_LT_OQ);
      _mm256_maskstore_ps(row + j, m, _mm256_blendv_ps(nan, t, finite));
    }
  }
}

const attention_kernels cpu_attention_kernels_avx2 = {softmax_rows_avx2, rescale_rows_avx2,
                                                      transpose_avx2, softcap_rows_avx2};

#endif /* CPU_KERNELS_HAVE_AVX2 */
