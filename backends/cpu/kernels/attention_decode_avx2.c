/* SPDX-License-Identifier: Apache-2.0 */
/* The split-KV decode path's products in AVX2 + FMA (attention.h describes
 * them). Scores: blocks of 4 query rows x 2 keys keep 8 accumulators that
 * one transposing reduction turns into the 8 scores; a query row left over
 * takes 8 keys at a time. P V: blocks of 4 rows x 16 channels. */
#include "attention.h"

#if CPU_KERNELS_HAVE_AVX2

/* Lane n of the result = the sum of the 8 lanes of a[n]. */
TARGET_AVX2 static ALWAYS_INLINE __m256 reduce8_avx2(const __m256 a[8]) {
  __m256 h01 = _mm256_hadd_ps(a[0], a[1]), h23 = _mm256_hadd_ps(a[2], a[3]);
  __m256 h45 = _mm256_hadd_ps(a[4], a[5]), h67 = _mm256_hadd_ps(a[6], a[7]);
  /* per 128-bit half: the half's sums of a[0..3] and of a[4..7] */
  __m256 g0 = _mm256_hadd_ps(h01, h23), g1 = _mm256_hadd_ps(h45, h67);
  return _mm256_add_ps(_mm256_permute2f128_ps(g0, g1, 0x20), _mm256_permute2f128_ps(g0, g1, 0x31));
}

TARGET_AVX2 static void decode_scores_avx2(const float *q, int64_t q_ld, int64_t rows,
                                           const float *k, int64_t k_ld, int64_t keys, int64_t dim,
                                           float *s, int64_t s_ld) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const float *q0 = q + r * q_ld;
    for (int64_t j = 0; j < keys; j += 2) {
      const float *k0 = k + j * k_ld;
      __m256 acc[8];
      for (int i = 0; i < 8; i++)
        acc[i] = _mm256_setzero_ps();
      for (int64_t c = 0; c < dim; c += 8) {
        __m256 b0 = _mm256_loadu_ps(k0 + c), b1 = _mm256_loadu_ps(k0 + k_ld + c);
        for (int i = 0; i < 4; i++) {
          __m256 a = _mm256_loadu_ps(q0 + i * q_ld + c);
          acc[2 * i] = _mm256_fmadd_ps(a, b0, acc[2 * i]);
          acc[2 * i + 1] = _mm256_fmadd_ps(a, b1, acc[2 * i + 1]);
        }
      }
      __m256 sum = reduce8_avx2(acc);
      __m128 low = _mm256_castps256_ps128(sum), high = _mm256_extractf128_ps(sum, 1);
      _mm_storel_pi((__m64 *)(s + r * s_ld + j), low);
      _mm_storeh_pi((__m64 *)(s + (r + 1) * s_ld + j), low);
      _mm_storel_pi((__m64 *)(s + (r + 2) * s_ld + j), high);
      _mm_storeh_pi((__m64 *)(s + (r + 3) * s_ld + j), high);
    }
  }
  for (; r < rows; r++) {
    const float *q_row = q + r * q_ld;
    for (int64_t j = 0; j < keys; j += 8) {
      const float *k0 = k + j * k_ld;
      __m256 acc[8];
      for (int i = 0; i < 8; i++)
        acc[i] = _mm256_setzero_ps();
      for (int64_t c = 0; c < dim; c += 8) {
        __m256 a = _mm256_loadu_ps(q_row + c);
        for (int x = 0; x < 8; x++)
          acc[x] = _mm256_fmadd_ps(a, _mm256_loadu_ps(k0 + x * k_ld + c), acc[x]);
      }
      _mm256_storeu_ps(s + r * s_ld + j, reduce8_avx2(acc));
    }
  }
}

TARGET_AVX2 static void decode_pv_avx2(const float *p, int64_t p_ld, int64_t rows, const float *v,
                                       int64_t v_ld, int64_t keys, int64_t dim, float *o,
                                       int64_t o_ld) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const float *p0 = p + r * p_ld;
    float *o0 = o + r * o_ld;
    for (int64_t c = 0; c < dim; c += 16) {
      __m256 acc[4][2];
      for (int i = 0; i < 4; i++)
        for (int x = 0; x < 2; x++)
          acc[i][x] = _mm256_loadu_ps(o0 + i * o_ld + c + 8 * x);
      for (int64_t j = 0; j < keys; j++) {
        __m256 b0 = _mm256_loadu_ps(v + j * v_ld + c), b1 = _mm256_loadu_ps(v + j * v_ld + c + 8);
        for (int i = 0; i < 4; i++) {
          __m256 w = _mm256_broadcast_ss(p0 + i * p_ld + j);
          acc[i][0] = _mm256_fmadd_ps(w, b0, acc[i][0]);
          acc[i][1] = _mm256_fmadd_ps(w, b1, acc[i][1]);
        }
      }
      for (int i = 0; i < 4; i++)
        for (int x = 0; x < 2; x++)
          _mm256_storeu_ps(o0 + i * o_ld + c + 8 * x, acc[i][x]);
    }
  }
  for (; r < rows; r++) {
    const float *p_row = p + r * p_ld;
    float *o_row = o + r * o_ld;
    for (int64_t c = 0; c < dim; c += 16) {
      __m256 acc0 = _mm256_loadu_ps(o_row + c), acc1 = _mm256_loadu_ps(o_row + c + 8);
      for (int64_t j = 0; j < keys; j++) {
        __m256 w = _mm256_broadcast_ss(p_row + j);
        acc0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(v + j * v_ld + c), acc0);
        acc1 = _mm256_fmadd_ps(w, _mm256_loadu_ps(v + j * v_ld + c + 8), acc1);
      }
      _mm256_storeu_ps(o_row + c, acc0);
      _mm256_storeu_ps(o_row + c + 8, acc1);
    }
  }
}

const decode_kernels cpu_decode_kernels_avx2 = {decode_scores_avx2, decode_pv_avx2};

#endif /* CPU_KERNELS_HAVE_AVX2 */
