/* SPDX-License-Identifier: Apache-2.0 */
/* Attention's online-softmax, rescale and transpose steps in AVX-512
 * (F/BW/VL/DQ); attention.h describes them. */
#include "attention.h"

#if CPU_KERNELS_HAVE_AVX2

TARGET_AVX512 static void softmax_rows_avx512(float *s, int64_t ld, int64_t rows, int64_t keys,
                                              const visible_keys *visible, int all_visible,
                                              float *row_max, float *row_sum, float *correction) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512 nan = _mm512_set1_ps(NAN);
  for (int64_t r = 0; r < rows; r++) {
    float *row = s + r * ld;
    int32_t first = all_visible ? 0 : visible[r].first;
    int32_t last = all_visible ? (int32_t)keys - 1 : visible[r].last;
    const __m512i lo = _mm512_set1_epi32(first), hi = _mm512_set1_epi32(last);
    __m512 max = _mm512_set1_ps(-INFINITY);
    for (int64_t j = 0; j < keys; j += 16) {
      __m512i index = _mm512_add_epi32(lane, _mm512_set1_epi32((int32_t)j));
      __mmask16 seen = _mm512_cmpge_epi32_mask(index, lo) & _mm512_cmple_epi32_mask(index, hi);
      max = _mm512_mask_max_ps(max, seen, max, _mm512_maskz_loadu_ps(seen, row + j));
    }
    float tile_max = _mm512_reduce_max_ps(max);
    float new_max = tile_max > row_max[r] ? tile_max : row_max[r];
    const __m512 shift = _mm512_set1_ps(safe_shift(new_max));
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < keys; j += 16) {
      __m512i index = _mm512_add_epi32(lane, _mm512_set1_epi32((int32_t)j));
      __mmask16 seen = _mm512_cmpge_epi32_mask(index, lo) & _mm512_cmple_epi32_mask(index, hi);
      __m512 v = _mm512_maskz_loadu_ps(seen, row + j);
      __m512 p = _mm512_maskz_mov_ps(seen, exp_avx512(_mm512_sub_ps(v, shift)));
      /* NaN where a seen score is infinite (fpclass 0x18: +inf, -inf) */
      p = _mm512_mask_mov_ps(p, _mm512_fpclass_ps_mask(v, 0x18) & seen, nan);
      sum = _mm512_add_ps(sum, p);
      _mm512_mask_storeu_ps(row + j, lanes_avx512(keys - j), p);
    }
    correction[r] = exp_f32(row_max[r] - safe_shift(new_max));
    row_sum[r] = row_sum[r] * correction[r] + _mm512_reduce_add_ps(sum);
    row_max[r] = new_max;
  }
}

TARGET_AVX512 static void rescale_rows_avx512(float *o, int64_t ld, int64_t rows, int64_t dim,
                                              const float *correction) {
  for (int64_t r = 0; r < rows; r++) {
    if (correction[r] == 1.0f)
      continue;
    const __m512 f = _mm512_set1_ps(correction[r]);
    float *row = o + r * ld;
    for (int64_t c = 0; c < dim; c += 16) {
      __mmask16 m = lanes_avx512(dim - c);
      _mm512_mask_storeu_ps(row + c, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, row + c), f));
    }
  }
}

/* 16 x 16 blocks: unpack pairs, 64-bit pairs, then two rounds of 128-bit
 * lane shuffles; rows past `keys` and columns past `dim` are masked off. */
TARGET_AVX512 static void transpose_avx512(float *dst, int64_t dst_ld, const float *src,
                                           int64_t src_ld, int64_t keys, int64_t dim) {
  for (int64_t j0 = 0; j0 < keys; j0 += 16) {
    int64_t rows = keys - j0 < 16 ? keys - j0 : 16;
    __mmask16 out_mask = lanes_avx512(rows);
    for (int64_t d0 = 0; d0 < dim; d0 += 16) {
      __mmask16 in_mask = lanes_avx512(dim - d0);
      __m512 a[16], t[16], u[16];
      for (int i = 0; i < 16; i++)
        a[i] = i < rows ? _mm512_maskz_loadu_ps(in_mask, src + (j0 + i) * src_ld + d0)
                        : _mm512_setzero_ps();
      for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]);
      }
      for (int i = 0; i < 4; i++) {
        __m512d x = _mm512_castps_pd(t[4 * i]), y = _mm512_castps_pd(t[4 * i + 2]);
        __m512d z = _mm512_castps_pd(t[4 * i + 1]), w = _mm512_castps_pd(t[4 * i + 3]);
        u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(x, y));
        u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(x, y));
        u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(z, w));
        u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(z, w));
      }
      /* Lane l of u[4 * g + m] holds column 4 l + m of rows 4 g .. 4 g + 3. */
      for (int m = 0; m < 4; m++) {
        __m512 w0 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0x88);
        __m512 w1 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0xdd);
        __m512 w2 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0x88);
        __m512 w3 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0xdd);
        __m512 column[4] = {_mm512_shuffle_f32x4(w0, w2, 0x88), _mm512_shuffle_f32x4(w1, w3, 0x88),
                            _mm512_shuffle_f32x4(w0, w2, 0xdd), _mm512_shuffle_f32x4(w1, w3, 0xdd)};
        for (int l = 0; l < 4; l++) {
          int64_t d = d0 + 4 * l + m;
          if (d < dim)
            _mm512_mask_storeu_ps(dst + d * dst_ld + j0, out_mask, column[l]);
        }
      }
    }
  }
}

/* cap * tanh(s / cap) with tanh(y) = sign(y) (1 - 2 / (e^(2|y|) + 1)): e^x
 * to inf for large |y| gives +-1; near 0 the absolute error is an ulp of 1,
 * which the factor cap keeps far below the scores' own rounding. Scores that
 * are not finite (fpclass 0x99: NaN, +-inf) become NaN. */
TARGET_AVX512 static void softcap_rows_avx512(float *s, int64_t ld, int64_t rows, int64_t keys,
                                              float cap) {
  const __m512 inverse = _mm512_set1_ps(1.0f / cap), factor = _mm512_set1_ps(cap);
  const __m512 one = _mm512_set1_ps(1.0f), two = _mm512_set1_ps(2.0f);
  const __m512 sign = _mm512_set1_ps(-0.0f), nan = _mm512_set1_ps(NAN);
  for (int64_t r = 0; r < rows; r++) {
    float *row = s + r * ld;
    for (int64_t j = 0; j < keys; j += 16) {
      __mmask16 m = lanes_avx512(keys - j);
      __m512 x = _mm512_maskz_loadu_ps(m, row + j);
      __m512 y = _mm512_mul_ps(x, inverse);
      __m512 magnitude = _mm512_andnot_ps(sign, y);
      __m512 e = exp_avx512(_mm512_add_ps(magnitude, magnitude));
      __m512 t = _mm512_sub_ps(one, _mm512_div_ps(two, _mm512_add_ps(e, one)));
      t = _mm512_or_ps(t, _mm512_and_ps(sign, y));
      t = _mm512_mask_mov_ps(_mm512_mul_ps(t, factor), _mm512_fpclass_ps_mask(x, 0x99), nan);
      _mm512_mask_storeu_ps(row + j, m, t);
    }
  }
}

const attention_kernels cpu_attention_kernels_avx512 = {softmax_rows_avx512, rescale_rows_avx512,
                                                        transpose_avx512, softcap_rows_avx512};

#endif /* CPU_KERNELS_HAVE_AVX2 */
