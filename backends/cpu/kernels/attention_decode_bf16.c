/* SPDX-License-Identifier: Apache-2.0 */
/* The split-KV decode path for bf16 keys and values on AVX512_BF16: both
 * products multiply bf16 pairs with vdpbf16ps, so no row is converted to
 * f32. (Converting rows and using FMAs, attention_decode_avx512.c, ran paged
 * decode at about 6 GB/s with the data in cache on the 2-vCPU machine this
 * was measured on; the pair products run it at 35-45 GB/s in cache.)
 *
 * Scores: the queries are bf16 already (the input), so q . k is a pair dot
 * product, exact products summed in f32; blocks of 4 rows x 4 keys keep 16
 * accumulators that one transposing reduction (as attention_decode_avx512.c)
 * turns into 16 scores, then scaled. The key rows are read where they lie,
 * four keys at a time with every kv head's rows of them, so memory is read
 * in order. P V: the probabilities are rounded to bf16 pairs (p_j, p_j+1)
 * and two value rows interleaved by channel (vpunpck{l,h}wd), so one
 * vdpbf16ps adds p_j v_j + p_j+1 v_j+1 for 16 channels; as flash attention
 * does on GPUs, P is bf16 here (a relative error of 2^-9 per weight, far
 * inside the bf16 output's rounding). The interleave is a pass of its own
 * over the tile's value rows in order, into scratch: interleaving in
 * registers inside each head's P V reads the rows head by head, and paged
 * decode then read 14.5 GB/s instead of 19.4 (bf16, 32 x 8 heads x 4096
 * keys, block 16, with a plain read at 31-34 GB/s). The interleave leaves
 * the channels of each 32-channel block in the order attention.h's
 * decode_pv_bf16_fn states; the caller puts them back. */
#include "attention.h"

#if CPU_KERNELS_HAVE_AVX2

#define TARGET_AVX512_BF16                                                                         \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")))

/* Lane n of the result = the sum of the 16 lanes of a[n]. */
TARGET_AVX512_BF16 static ALWAYS_INLINE __m512 reduce16(const __m512 a[16]) {
  __m512 b[8], c[4];
  for (int i = 0; i < 8; i++)
    b[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]),
                         _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
  for (int i = 0; i < 4; i++) {
    __m512d x = _mm512_castps_pd(b[2 * i]), y = _mm512_castps_pd(b[2 * i + 1]);
    c[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  }
  __m512 d0 =
      _mm512_add_ps(_mm512_shuffle_f32x4(c[0], c[1], 0x88), _mm512_shuffle_f32x4(c[0], c[1], 0xdd));
  __m512 d1 =
      _mm512_add_ps(_mm512_shuffle_f32x4(c[2], c[3], 0x88), _mm512_shuffle_f32x4(c[2], c[3], 0xdd));
  return _mm512_add_ps(_mm512_shuffle_f32x4(d0, d1, 0x88), _mm512_shuffle_f32x4(d0, d1, 0xdd));
}

TARGET_AVX512_BF16 static ALWAYS_INLINE __m512bh load_pairs(const uint16_t *p) {
  return (__m512bh)_mm512_loadu_si512((const void *)p);
}

/* Into L2: every kv head's channels of a key row (whole when they lie side
 * by side, as in every layout but a strided one). */
static ALWAYS_INLINE void prefetch_row(const uint16_t *row, int64_t heads, int64_t head_stride,
                                       int64_t dim) {
  for (int64_t h = 0; h < heads; h++)
    for (int64_t c = 0; c < dim; c += 32)
      __builtin_prefetch(row + h * head_stride + c, 0, 2);
}

/* Lanes 0..3 of the result = the sums of the 16 lanes of a[0..3]. */
TARGET_AVX512_BF16 static ALWAYS_INLINE __m128 reduce4(const __m512 a[4]) {
  __m512 b0 = _mm512_add_ps(_mm512_unpacklo_ps(a[0], a[1]), _mm512_unpackhi_ps(a[0], a[1]));
  __m512 b1 = _mm512_add_ps(_mm512_unpacklo_ps(a[2], a[3]), _mm512_unpackhi_ps(a[2], a[3]));
  __m512 c = _mm512_add_ps(
      _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(b0), _mm512_castps_pd(b1))),
      _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(b0), _mm512_castps_pd(b1))));
  __m256 d = _mm256_add_ps(_mm512_castps512_ps256(c),
                           _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(c), 1)));
  return _mm_add_ps(_mm256_castps256_ps128(d), _mm256_extractf128_ps(d, 1));
}

/* Scores of keys [j, j + 4) for 4 query rows (16 accumulators) or 1. */
TARGET_AVX512_BF16 static ALWAYS_INLINE void scores_4x4(const uint16_t *q, int64_t q_ld,
                                                        const uint16_t *const k[4], int64_t dim,
                                                        __m512 factor, float *s, int64_t s_ld) {
  __m512 acc[16];
  for (int i = 0; i < 16; i++)
    acc[i] = _mm512_setzero_ps();
  for (int64_t c = 0; c < dim; c += 32) {
    __m512bh b[4] = {load_pairs(k[0] + c), load_pairs(k[1] + c), load_pairs(k[2] + c),
                     load_pairs(k[3] + c)};
    for (int i = 0; i < 4; i++) {
      __m512bh a = load_pairs(q + i * q_ld + c);
      for (int x = 0; x < 4; x++)
        acc[4 * i + x] = _mm512_dpbf16_ps(acc[4 * i + x], a, b[x]);
    }
  }
  __m512 sum = _mm512_mul_ps(reduce16(acc), factor);
  _mm_storeu_ps(s, _mm512_castps512_ps128(sum));
  _mm_storeu_ps(s + s_ld, _mm512_extractf32x4_ps(sum, 1));
  _mm_storeu_ps(s + 2 * s_ld, _mm512_extractf32x4_ps(sum, 2));
  _mm_storeu_ps(s + 3 * s_ld, _mm512_extractf32x4_ps(sum, 3));
}

TARGET_AVX512_BF16 static ALWAYS_INLINE void
scores_1x4(const uint16_t *q, const uint16_t *const k[4], int64_t dim, __m512 factor, float *s) {
  __m512 acc[4];
  for (int i = 0; i < 4; i++)
    acc[i] = _mm512_setzero_ps();
  for (int64_t c = 0; c < dim; c += 32) {
    __m512bh a = load_pairs(q + c);
    for (int x = 0; x < 4; x++)
      acc[x] = _mm512_dpbf16_ps(acc[x], a, load_pairs(k[x] + c));
  }
  _mm_storeu_ps(s, _mm_mul_ps(reduce4(acc), _mm512_castps512_ps128(factor)));
}

/* Keys in fours, every kv head's rows of a key together: the tile's key
 * rows are read in order, whole, while the next tile's are prefetched
 * row by row. */
TARGET_AVX512_BF16 static void decode_scores_bf16(const decode_bf16_tile *tile, const uint16_t *q,
                                                  int64_t q_ld, int64_t group_rows, float scale,
                                                  float *s, int64_t s_ld) {
  const __m512 factor = _mm512_set1_ps(scale);
  const int64_t dim = tile->dim, heads = tile->heads, stride = tile->k_head_stride;
  for (int64_t j = 0; j < tile->keys; j += 4) {
    for (int64_t x = j; x < j + 4 && x < tile->next_keys; x++)
      prefetch_row(tile->k_next[x], heads, stride, dim);
    for (int64_t h = 0; h < heads; h++) {
      const uint16_t *k[4] = {tile->k_rows[j] + h * stride, tile->k_rows[j + 1] + h * stride,
                              tile->k_rows[j + 2] + h * stride, tile->k_rows[j + 3] + h * stride};
      const uint16_t *qh = q + h * group_rows * q_ld;
      float *sh = s + h * group_rows * s_ld + j;
      int64_t r = 0;
      for (; r + 4 <= group_rows; r += 4)
        scores_4x4(qh + r * q_ld, q_ld, k, dim, factor, sh + r * s_ld, s_ld);
      for (; r < group_rows; r++)
        scores_1x4(qh + r * q_ld, k, dim, factor, sh + r * s_ld);
    }
  }
}

/* p[r * p_ld + j] = bf16(s[r * s_ld + j]) for j < keys, and 0 up to the
 * next even j: the pairs decode_pv_bf16 broadcasts. */
TARGET_AVX512_BF16 static void decode_p_pairs_bf16(const float *s, int64_t s_ld, int64_t rows,
                                                   int64_t keys, uint16_t *p, int64_t p_ld) {
  const int64_t even = (keys + 1) & ~(int64_t)1;
  for (int64_t r = 0; r < rows; r++) {
    const float *row = s + r * s_ld;
    uint16_t *out = p + r * p_ld;
    for (int64_t j = 0; j < even; j += 32) {
      __m512 low = _mm512_maskz_loadu_ps(lanes_avx512(keys - j), row + j);
      __m512 high =
          _mm512_maskz_loadu_ps(lanes_avx512(keys - j - 16 > 0 ? keys - j - 16 : 0), row + j + 16);
      __m512i pairs = (__m512i)_mm512_cvtne2ps_pbh(high, low);
      int64_t count = even - j < 32 ? even - j : 32;
      _mm512_mask_storeu_epi16(out + j, (__mmask32)(count >= 32 ? 0xffffffffu : (1u << count) - 1u),
                               pairs);
    }
  }
}

/* Value rows j, j + 1 interleaved by channel (vpunpck{l,h}wd), for every kv
 * head, in order of the rows, while the next tile's rows are prefetched:
 * pairs[(h * pair_count + m) * 2 dim + 64 x + {0, 32}] = the low and high
 * halves of 32-channel block x of pair m. An odd last key pairs with itself
 * (its partner's weight is 0). */
TARGET_AVX512_BF16 static void decode_interleave_bf16(const decode_bf16_tile *tile,
                                                      uint16_t *pairs) {
  const int64_t dim = tile->dim, heads = tile->heads, stride = tile->v_head_stride;
  const int64_t pair_count = (tile->keys + 1) / 2;
  for (int64_t m = 0; m < pair_count; m++) {
    const int64_t j = 2 * m;
    for (int64_t x = j; x < j + 2 && x < tile->next_keys; x++)
      prefetch_row(tile->v_next[x], heads, stride, dim);
    const uint16_t *a = tile->v_rows[j], *b = j + 1 < tile->keys ? tile->v_rows[j + 1] : a;
    for (int64_t h = 0; h < heads; h++) {
      uint16_t *out = pairs + (h * pair_count + m) * 2 * dim;
      for (int64_t c = 0; c < dim; c += 32) {
        __m512i x = _mm512_loadu_si512((const void *)(a + h * stride + c));
        __m512i y = _mm512_loadu_si512((const void *)(b + h * stride + c));
        _mm512_storeu_si512((void *)(out + 2 * c), _mm512_unpacklo_epi16(x, y));
        _mm512_storeu_si512((void *)(out + 2 * c + 32), _mm512_unpackhi_epi16(x, y));
      }
    }
  }
}

/* ROWS rows x 32 * BLOCKS channels from c: 2 * ROWS * BLOCKS accumulators
 * over every key pair. */
#define PV_BLOCK(ROWS, BLOCKS)                                                                     \
  do {                                                                                             \
    __m512 acc[ROWS][2 * BLOCKS];                                                                  \
    for (int i = 0; i < ROWS; i++)                                                                 \
      for (int x = 0; x < 2 * BLOCKS; x++)                                                         \
        acc[i][x] = _mm512_loadu_ps(o0 + i * o_ld + c + 16 * x);                                   \
    for (int64_t m = 0; m < pair_count; m++) {                                                     \
      const uint16_t *v = pairs + m * 2 * dim + 2 * c;                                             \
      __m512bh b[2 * BLOCKS];                                                                      \
      for (int x = 0; x < 2 * BLOCKS; x++)                                                         \
        b[x] = load_pairs(v + 32 * x);                                                             \
      for (int i = 0; i < ROWS; i++) {                                                             \
        __m512bh w = (__m512bh)_mm512_set1_epi32((int32_t)w0[i * w_ld + m]);                       \
        for (int x = 0; x < 2 * BLOCKS; x++)                                                       \
          acc[i][x] = _mm512_dpbf16_ps(acc[i][x], b[x], w);                                        \
      }                                                                                            \
    }                                                                                              \
    for (int i = 0; i < ROWS; i++)                                                                 \
      for (int x = 0; x < 2 * BLOCKS; x++)                                                         \
        _mm512_storeu_ps(o0 + i * o_ld + c + 16 * x, acc[i][x]);                                   \
  } while (0)

/* One kv head's rows: blocks of 4 rows x 64 channels (16 accumulators: each
 * interleaved pair loaded once for the 4 rows), then 32 channels, then rows
 * one at a time. */
TARGET_AVX512_BF16 static void decode_pv_bf16(const uint16_t *p, int64_t p_ld, int64_t rows,
                                              const uint16_t *pairs, int64_t keys, int64_t dim,
                                              float *o, int64_t o_ld) {
  const int64_t w_ld = p_ld / 2, pair_count = (keys + 1) / 2;
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const uint32_t *w0 = (const uint32_t *)(p + r * p_ld);
    float *o0 = o + r * o_ld;
    int64_t c = 0;
    for (; c + 64 <= dim; c += 64)
      PV_BLOCK(4, 2);
    for (; c < dim; c += 32)
      PV_BLOCK(4, 1);
  }
  for (; r < rows; r++) {
    const uint32_t *w0 = (const uint32_t *)(p + r * p_ld);
    float *o0 = o + r * o_ld;
    int64_t c = 0;
    for (; c + 128 <= dim; c += 128)
      PV_BLOCK(1, 4);
    for (; c < dim; c += 32)
      PV_BLOCK(1, 1);
  }
}

#undef PV_BLOCK

const decode_bf16_kernels cpu_decode_kernels_bf16 = {decode_scores_bf16, decode_p_pairs_bf16,
                                                     decode_interleave_bf16, decode_pv_bf16};

#endif /* CPU_KERNELS_HAVE_AVX2 */
