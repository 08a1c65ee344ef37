/* SPDX-License-Identifier: Apache-2.0 */
/* The split-KV decode path's products in AVX-512 (attention.h describes
 * them). Scores: blocks of 4 query rows x 4 keys keep 16 accumulators, each
 * a 16-lane partial dot product that one transposing reduction turns into
 * the 16 scores; a query row left over takes 16 keys at a time. P V: blocks
 * of 4 rows x 64 channels, each value row loaded once for the 4 rows. */
#include "attention.h"

#if CPU_KERNELS_HAVE_AVX2

/* Lane n of the result = the sum of the 16 lanes of a[n]. */
TARGET_AVX512 static ALWAYS_INLINE __m512 reduce16_avx512(const __m512 a[16]) {
  __m512 b[8], c[4];
  /* per 128-bit lane: [x0+x2, y0+y2, x1+x3, y1+y3] for x = a[2i], y = a[2i+1] */
  for (int i = 0; i < 8; i++)
    b[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]),
                         _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
  /* per 128-bit lane: the lane's sums of a[4i .. 4i + 3] */
  for (int i = 0; i < 4; i++) {
    __m512d x = _mm512_castps_pd(b[2 * i]), y = _mm512_castps_pd(b[2 * i + 1]);
    c[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  }
  /* add the four 128-bit lanes of each: a 4 x 4 transpose of lanes */
  __m512 d0 =
      _mm512_add_ps(_mm512_shuffle_f32x4(c[0], c[1], 0x88), _mm512_shuffle_f32x4(c[0], c[1], 0xdd));
  __m512 d1 =
      _mm512_add_ps(_mm512_shuffle_f32x4(c[2], c[3], 0x88), _mm512_shuffle_f32x4(c[2], c[3], 0xdd));
  return _mm512_add_ps(_mm512_shuffle_f32x4(d0, d1, 0x88), _mm512_shuffle_f32x4(d0, d1, 0xdd));
}

TARGET_AVX512 static void decode_scores_avx512(const float *q, int64_t q_ld, int64_t rows,
                                               const float *k, int64_t k_ld, int64_t keys,
                                               int64_t dim, float *s, int64_t s_ld) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const float *q0 = q + r * q_ld;
    for (int64_t j = 0; j < keys; j += 4) {
      const float *k0 = k + j * k_ld;
      __m512 acc[16];
      for (int i = 0; i < 16; i++)
        acc[i] = _mm512_setzero_ps();
      for (int64_t c = 0; c < dim; c += 16) {
        __m512 a[4], b[4];
        for (int i = 0; i < 4; i++) {
          a[i] = _mm512_loadu_ps(q0 + i * q_ld + c);
          b[i] = _mm512_loadu_ps(k0 + i * k_ld + c);
        }
        for (int i = 0; i < 4; i++)
          for (int x = 0; x < 4; x++)
            acc[4 * i + x] = _mm512_fmadd_ps(a[i], b[x], acc[4 * i + x]);
      }
      __m512 sum = reduce16_avx512(acc);
      _mm_storeu_ps(s + r * s_ld + j, _mm512_castps512_ps128(sum));
      _mm_storeu_ps(s + (r + 1) * s_ld + j, _mm512_extractf32x4_ps(sum, 1));
      _mm_storeu_ps(s + (r + 2) * s_ld + j, _mm512_extractf32x4_ps(sum, 2));
      _mm_storeu_ps(s + (r + 3) * s_ld + j, _mm512_extractf32x4_ps(sum, 3));
    }
  }
  for (; r < rows; r++) {
    const float *q_row = q + r * q_ld;
    for (int64_t j = 0; j < keys; j += 16) {
      const float *k0 = k + j * k_ld;
      __m512 acc[16];
      for (int i = 0; i < 16; i++)
        acc[i] = _mm512_setzero_ps();
      for (int64_t c = 0; c < dim; c += 16) {
        __m512 a = _mm512_loadu_ps(q_row + c);
        for (int x = 0; x < 16; x++)
          acc[x] = _mm512_fmadd_ps(a, _mm512_loadu_ps(k0 + x * k_ld + c), acc[x]);
      }
      _mm512_storeu_ps(s + r * s_ld + j, reduce16_avx512(acc));
    }
  }
}

TARGET_AVX512 static void decode_pv_avx512(const float *p, int64_t p_ld, int64_t rows,
                                           const float *v, int64_t v_ld, int64_t keys, int64_t dim,
                                           float *o, int64_t o_ld) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const float *p0 = p + r * p_ld;
    float *o0 = o + r * o_ld;
    int64_t c = 0;
    for (; c + 64 <= dim; c += 64) {
      __m512 acc[4][4];
      for (int i = 0; i < 4; i++)
        for (int x = 0; x < 4; x++)
          acc[i][x] = _mm512_loadu_ps(o0 + i * o_ld + c + 16 * x);
      for (int64_t j = 0; j < keys; j++) {
        const float *row = v + j * v_ld + c;
        __m512 b[4];
        for (int x = 0; x < 4; x++)
          b[x] = _mm512_loadu_ps(row + 16 * x);
        for (int i = 0; i < 4; i++) {
          __m512 w = _mm512_set1_ps(p0[i * p_ld + j]);
          for (int x = 0; x < 4; x++)
            acc[i][x] = _mm512_fmadd_ps(w, b[x], acc[i][x]);
        }
      }
      for (int i = 0; i < 4; i++)
        for (int x = 0; x < 4; x++)
          _mm512_storeu_ps(o0 + i * o_ld + c + 16 * x, acc[i][x]);
    }
    for (; c < dim; c += 16) {
      __m512 acc[4];
      for (int i = 0; i < 4; i++)
        acc[i] = _mm512_loadu_ps(o0 + i * o_ld + c);
      for (int64_t j = 0; j < keys; j++) {
        __m512 b = _mm512_loadu_ps(v + j * v_ld + c);
        for (int i = 0; i < 4; i++)
          acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(p0[i * p_ld + j]), b, acc[i]);
      }
      for (int i = 0; i < 4; i++)
        _mm512_storeu_ps(o0 + i * o_ld + c, acc[i]);
    }
  }
  for (; r < rows; r++) {
    const float *p_row = p + r * p_ld;
    float *o_row = o + r * o_ld;
    int64_t c = 0;
    for (; c + 64 <= dim; c += 64) {
      __m512 acc[4];
      for (int x = 0; x < 4; x++)
        acc[x] = _mm512_loadu_ps(o_row + c + 16 * x);
      for (int64_t j = 0; j < keys; j++) {
        __m512 w = _mm512_set1_ps(p_row[j]);
        for (int x = 0; x < 4; x++)
          acc[x] = _mm512_fmadd_ps(w, _mm512_loadu_ps(v + j * v_ld + c + 16 * x), acc[x]);
      }
      for (int x = 0; x < 4; x++)
        _mm512_storeu_ps(o_row + c + 16 * x, acc[x]);
    }
    for (; c < dim; c += 16) {
      __m512 acc = _mm512_loadu_ps(o_row + c);
      for (int64_t j = 0; j < keys; j++)
        acc = _mm512_fmadd_ps(_mm512_set1_ps(p_row[j]), _mm512_loadu_ps(v + j * v_ld + c), acc);
      _mm512_storeu_ps(o_row + c, acc);
    }
  }
}

const decode_kernels cpu_decode_kernels_avx512 = {decode_scores_avx512, decode_pv_avx512};

#endif /* CPU_KERNELS_HAVE_AVX2 */
