/* SPDX-License-Identifier: Apache-2.0 */
/* Row ops: RMSNorm (with the residual add), LayerNorm, softmax and
 * cross-entropy. Each task owns whole rows (the last dimension), split over
 * the thread pool.
 *
 * A row is read from memory once: f32 rows of unit stride are used where
 * they lie (the first pass brings the row into L1/L2 and later passes find
 * it there), other rows are converted into per-worker f32 scratch first.
 * Every row is read completely before its outputs are written, so outputs
 * may alias inputs exactly. Large outputs are written with streaming stores.
 * Sums over a row accumulate in double.
 *
 * The passes over a row are small array kernels, in plain C and, on x86-64,
 * AVX2 and AVX-512 versions picked by the plugin's instruction set. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "configs.h"
#include "cpu_internal.h"
#include "cpu_kernel_util.h"

enum { MIN_ELEMENTS_PER_CHUNK = 16384 };
/* Softmax's fused step works in blocks of this many elements: a block is
 * read from memory once (its max), its exponentials are taken from L1 (4 KiB
 * blocks: 12.2-13.1 ms against 14.3 for 1 KiB on Zen 5, 8192 x 8192). */
enum { SOFTMAX_BLOCK = 1024 };

/* The array kernels of one vector level. Arrays are contiguous f32; `stream`
 * asks for non-temporal stores of y. */
typedef struct row_kernels {
  double (*sum)(const float *x, int64_t count, const row_ahead *ahead);
  /* sum of (x - centre)^2 */
  double (*sum_squares)(const float *x, float centre, int64_t count, const row_ahead *ahead);
  /* h = x + r; returns the sum of h^2 */
  double (*add_sum_squares)(float *h, const float *x, const float *r, int64_t count,
                            const row_ahead *ahead);
  /* y = x * factor * weight (weight NULL: 1) */
  void (*scale)(float *y, const float *x, float factor, const float *weight, int64_t count,
                int stream);
  /* y = (x - mean) * factor * weight + bias (weight, bias NULL: 1, 0) */
  void (*normalize)(float *y, const float *x, float mean, float factor, const float *weight,
                    const float *bias, int64_t count, int stream);
  /* max of x; NaN lanes may or may not win */
  float (*max_of)(const float *x, int64_t count, const row_ahead *ahead);
  /* e = e^((x - max) * scale) (e NULL: not stored); returns the sum of e.
   * Softmax scales are positive (the core rejects others), so max is the
   * max of x * scale too; subtracting before scaling keeps the max's own
   * exponent exactly 0 (an FMA of x * scale - max * scale leaves the
   * rounding error of max * scale, ~1e23 at scale 1e30) and cannot
   * overflow where x * scale would. */
  double (*exp_sum)(float *e, const float *x, float scale, float max, int64_t count);

  /* Fused steps: the last pass over a row together with the first pass over
   * the next row (`next`, never NULL; `ahead` prefetches past it), so that
   * memory is read and written in the same loop, as in a copy. NULL where a
   * level has none: the row loops then run the passes one after another. */
  /* scale(y, h, factor, weight); then h' = next_x + next_r (next_r NULL:
   * h' = next_x; else h' goes to next_h and, when next_residual_out is not
   * NULL, there too); returns the sum of h'^2 */
  double (*rms_step)(float *y, const float *h, float factor, const float *weight, int64_t count,
                     int stream, const float *next_x, const float *next_r, float *next_h,
                     float *next_residual_out, const row_ahead *ahead);
  /* normalize(y, x, ...); returns the sum of next */
  double (*ln_step)(float *y, const float *x, float mean, float factor, const float *weight,
                    const float *bias, int64_t count, int stream, const float *next,
                    const row_ahead *ahead);
  /* Softmax in blocks of SOFTMAX_BLOCK elements. y (NULL: none) = e *
   * factors[block]; and for next (NULL: none), per block: its max of next
   * into block_max, next_e = e^((next - that max) * scale) (0 where the max
   * is -inf) and the sum of next_e into block_sum. */
  void (*softmax_step)(float *y, const float *e, const float *factors, int64_t count, int stream,
                       const float *next, float scale, float *next_e, float *block_max,
                       float *block_sum, const row_ahead *ahead);
  /* factors[b] = e^((block_max[b] - max) * scale) / sum over a row's
   * blocks, with max the largest block max and sum the blocks' sums rescaled
   * alike; returns max (-inf, factors unset, for a row of all -inf) */
  float (*softmax_factors)(const float *block_max, const float *block_sum, int64_t blocks,
                           float scale, float *factors);
  /* returns the sum of e^(x - shift); *next_max = the max of next */
  double (*xe_step)(const float *x, float shift, int64_t count, const float *next, float *next_max,
                    const row_ahead *ahead);

  /* 16-bit rows (f16 or bf16 `dtype`, unit stride), converted in registers
   * instead of through f32 scratch: RMSNorm without a residual. NULL where a
   * level has none. rms16_step: y = x * factor * weight (weight f32, NULL:
   * 1) stored as dtype, and for next (NULL: none) the sum of its squares
   * (returned; next NULL and y NULL: the sum of x's squares). */
  double (*rms16_step)(uint16_t *y, const uint16_t *x, float factor, const float *weight,
                       int64_t count, int stream, const uint16_t *next, int32_t dtype,
                       const row_ahead *ahead);
  /* LayerNorm: y = normalize(x) stored as dtype (x: the row as f32; y NULL:
   * none), and next (NULL: none) widened into next_f32; returns the sum of
   * next. */
  double (*ln16_step)(uint16_t *y, const float *x, float mean, float factor, const float *weight,
                      const float *bias, int64_t count, int stream, const uint16_t *next,
                      float *next_f32, int32_t dtype, const row_ahead *ahead);
  /* Softmax: y = e * factor stored as dtype (y NULL: none), and next (NULL:
   * none) widened into next_f32; returns the max of next (-inf without
   * next; NaN lanes may or may not win). */
  float (*sm16_step)(uint16_t *y, const float *e, float factor, int64_t count, int stream,
                     const uint16_t *next, float *next_f32, int32_t dtype, const row_ahead *ahead);
} row_kernels;

/* ---- plain C ---- */

/* Reductions keep independent lanes, so they vectorise without reassociation. */
enum { LANES = 8 };

static double sum_generic(const float *x, int64_t count, const row_ahead *ahead) {
  (void)ahead;
  double lanes[LANES] = {0};
  int64_t i = 0;
  for (; i + LANES <= count; i += LANES)
    for (int k = 0; k < LANES; k++)
      lanes[k] += (double)x[i + k];
  double result = 0.0;
  for (; i < count; i++)
    result += (double)x[i];
  for (int k = 0; k < LANES; k++)
    result += lanes[k];
  return result;
}

static double sum_squares_generic(const float *x, float centre, int64_t count,
                                  const row_ahead *ahead) {
  (void)ahead;
  double lanes[LANES] = {0};
  int64_t i = 0;
  for (; i + LANES <= count; i += LANES)
    for (int k = 0; k < LANES; k++) {
      double d = (double)(x[i + k] - centre);
      lanes[k] += d * d;
    }
  double result = 0.0;
  for (; i < count; i++) {
    double d = (double)(x[i] - centre);
    result += d * d;
  }
  for (int k = 0; k < LANES; k++)
    result += lanes[k];
  return result;
}

static double add_sum_squares_generic(float *h, const float *x, const float *r, int64_t count,
                                      const row_ahead *ahead) {
  for (int64_t i = 0; i < count; i++)
    h[i] = x[i] + r[i];
  return sum_squares_generic(h, 0.0f, count, ahead);
}

static void scale_generic(float *y, const float *x, float factor, const float *weight,
                          int64_t count, int stream) {
  (void)stream;
  if (weight) {
    for (int64_t i = 0; i < count; i++)
      y[i] = x[i] * factor * weight[i];
  } else {
    for (int64_t i = 0; i < count; i++)
      y[i] = x[i] * factor;
  }
}

static void normalize_generic(float *y, const float *x, float mean, float factor,
                              const float *weight, const float *bias, int64_t count, int stream) {
  (void)stream;
  for (int64_t i = 0; i < count; i++) {
    float value = (x[i] - mean) * factor;
    if (weight)
      value *= weight[i];
    if (bias)
      value += bias[i];
    y[i] = value;
  }
}

static float max_of_generic(const float *x, int64_t count, const row_ahead *ahead) {
  (void)ahead;
  float lanes[LANES];
  for (int k = 0; k < LANES; k++)
    lanes[k] = -INFINITY;
  int64_t i = 0;
  for (; i + LANES <= count; i += LANES)
    for (int k = 0; k < LANES; k++)
      lanes[k] = x[i + k] > lanes[k] ? x[i + k] : lanes[k];
  float result = -INFINITY;
  for (; i < count; i++)
    result = x[i] > result ? x[i] : result;
  for (int k = 0; k < LANES; k++)
    result = lanes[k] > result ? lanes[k] : result;
  return result;
}

static double exp_sum_generic(float *e, const float *x, float scale, float max, int64_t count) {
  double lanes[LANES] = {0};
  float block[LANES];
  for (int64_t i = 0; i < count; i += LANES) {
    int64_t n = count - i < LANES ? count - i : LANES;
    for (int64_t k = 0; k < n; k++)
      block[k] = exp_f32((x[i + k] - max) * scale);
    if (e)
      memcpy(e + i, block, (size_t)n * sizeof(float));
    for (int64_t k = 0; k < n; k++)
      lanes[k] += (double)block[k];
  }
  double result = 0.0;
  for (int k = 0; k < LANES; k++)
    result += lanes[k];
  return result;
}

/* No fused steps: the row loops run the passes one after another. */
static const row_kernels GENERIC_KERNELS = {.sum = sum_generic,
                                            .sum_squares = sum_squares_generic,
                                            .add_sum_squares = add_sum_squares_generic,
                                            .scale = scale_generic,
                                            .normalize = normalize_generic,
                                            .max_of = max_of_generic,
                                            .exp_sum = exp_sum_generic};

/* The vector kernels sum exponentials in f32 over blocks of this many
 * elements (a few per lane) and add the blocks in double. */
enum { EXP_SUM_BLOCK = 1024 };

#if CPU_KERNELS_HAVE_AVX2

/* ---- AVX2 ---- */

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

typedef struct scale_context {
  const float *x, *weight, *bias;
  float factor, mean;
} scale_context;

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

static const row_kernels AVX2_KERNELS = {.sum = sum_avx2,
                                         .sum_squares = sum_squares_avx2,
                                         .add_sum_squares = add_sum_squares_avx2,
                                         .scale = scale_avx2,
                                         .normalize = normalize_avx2,
                                         .max_of = max_of_avx2,
                                         .exp_sum = exp_sum_avx2};

/* ---- AVX-512 ---- */

TARGET_AVX512 static double sum_avx512(const float *x, int64_t count, const row_ahead *ahead) {
  __m512d low = _mm512_setzero_pd(), high = low;
  for (int64_t i = 0; i < count; i += 16) {
    prefetch_ahead(ahead, i);
    accumulate_pd_avx512(&low, &high, _mm512_maskz_loadu_ps(lanes_avx512(count - i), x + i));
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(low, high));
}

TARGET_AVX512 static double sum_squares_avx512(const float *x, float centre, int64_t count,
                                               const row_ahead *ahead) {
  __m512d low = _mm512_setzero_pd(), high = low;
  const __m512 c = _mm512_set1_ps(centre);
  for (int64_t i = 0; i < count; i += 16) {
    prefetch_ahead(ahead, i);
    __mmask16 m = lanes_avx512(count - i);
    __m512 d = _mm512_maskz_sub_ps(m, _mm512_maskz_loadu_ps(m, x + i), c);
    __m512d d0 = _mm512_cvtps_pd(_mm512_castps512_ps256(d));
    __m512d d1 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(d), 1)));
    low = _mm512_fmadd_pd(d0, d0, low);
    high = _mm512_fmadd_pd(d1, d1, high);
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(low, high));
}

TARGET_AVX512 static double add_sum_squares_avx512(float *h, const float *x, const float *r,
                                                   int64_t count, const row_ahead *ahead) {
  __m512d low = _mm512_setzero_pd(), high = low;
  for (int64_t i = 0; i < count; i += 16) {
    prefetch_ahead(ahead, i);
    __mmask16 m = lanes_avx512(count - i);
    __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, r + i));
    _mm512_mask_storeu_ps(h + i, m, v);
    __m512d d0 = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    __m512d d1 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    low = _mm512_fmadd_pd(d0, d0, low);
    high = _mm512_fmadd_pd(d1, d1, high);
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(low, high));
}

TARGET_AVX512 static ALWAYS_INLINE __m512 scale_block_avx512(void *context, int64_t i,
                                                             __mmask16 m) {
  const scale_context *c = context;
  return _mm512_mul_ps(_mm512_maskz_loadu_ps(m, c->x + i), _mm512_set1_ps(c->factor));
}

TARGET_AVX512 static ALWAYS_INLINE __m512 scale_weight_block_avx512(void *context, int64_t i,
                                                                    __mmask16 m) {
  const scale_context *c = context;
  return _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, c->x + i), _mm512_set1_ps(c->factor)),
                       _mm512_maskz_loadu_ps(m, c->weight + i));
}

TARGET_AVX512 static void scale_avx512(float *y, const float *x, float factor, const float *weight,
                                       int64_t count, int stream) {
  scale_context c = {x, weight, NULL, factor, 0.0f};
  if (weight)
    map_avx512(y, count, stream, scale_weight_block_avx512, &c);
  else
    map_avx512(y, count, stream, scale_block_avx512, &c);
}

TARGET_AVX512 static ALWAYS_INLINE __m512 normalize_block_avx512(void *context, int64_t i,
                                                                 __mmask16 m) {
  const scale_context *c = context;
  __m512 v =
      _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, c->x + i), _mm512_set1_ps(c->mean)),
                    _mm512_set1_ps(c->factor));
  if (c->weight)
    v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, c->weight + i));
  if (c->bias)
    v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, c->bias + i));
  return v;
}

TARGET_AVX512 static void normalize_avx512(float *y, const float *x, float mean, float factor,
                                           const float *weight, const float *bias, int64_t count,
                                           int stream) {
  scale_context c = {x, weight, bias, factor, mean};
  map_avx512(y, count, stream, normalize_block_avx512, &c);
}

TARGET_AVX512 static float max_of_avx512(const float *x, int64_t count, const row_ahead *ahead) {
  __m512 m0 = _mm512_set1_ps(-INFINITY), m1 = m0;
  int64_t i = 0;
  for (; i + 32 <= count; i += 32) {
    prefetch_ahead(ahead, i);
    prefetch_ahead(ahead, i + 16);
    m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + i));
    m1 = _mm512_max_ps(m1, _mm512_loadu_ps(x + i + 16));
  }
  for (; i < count; i += 16) {
    prefetch_ahead(ahead, i);
    __mmask16 m = lanes_avx512(count - i);
    m0 = _mm512_mask_max_ps(m0, m, m0, _mm512_maskz_loadu_ps(m, x + i));
  }
  return _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
}

TARGET_AVX512 static double exp_sum_avx512(float *e, const float *x, float scale, float max,
                                           int64_t count) {
  const __m512 s = _mm512_set1_ps(scale), t = _mm512_set1_ps(max);
  double total = 0.0;
  for (int64_t b = 0; b < count; b += EXP_SUM_BLOCK) {
    int64_t end = count - b < EXP_SUM_BLOCK ? count : b + EXP_SUM_BLOCK;
    __m512 sum0 = _mm512_setzero_ps(), sum1 = sum0;
    int64_t i = b;
    for (; i + 32 <= end; i += 32) {
      __m512 v0 = exp_avx512(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), t), s));
      __m512 v1 = exp_avx512(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), t), s));
      if (e) {
        _mm512_storeu_ps(e + i, v0);
        _mm512_storeu_ps(e + i + 16, v1);
      }
      sum0 = _mm512_add_ps(sum0, v0);
      sum1 = _mm512_add_ps(sum1, v1);
    }
    for (; i < end; i += 16) {
      __mmask16 m = lanes_avx512(end - i);
      __m512 v = _mm512_maskz_mov_ps(
          m, exp_avx512(_mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), t), s)));
      if (e)
        _mm512_mask_storeu_ps(e + i, m, v);
      sum0 = _mm512_add_ps(sum0, v);
    }
    __m512d low = _mm512_setzero_pd(), high = low;
    accumulate_pd_avx512(&low, &high, _mm512_add_ps(sum0, sum1));
    total += _mm512_reduce_add_pd(_mm512_add_pd(low, high));
  }
  return total;
}

/* ---- AVX-512: fused steps (the last pass of a row with the first of the next) ---- */

typedef struct rms_step_context {
  const float *h, *weight, *next_x, *next_r;
  float *next_h, *next_residual_out;
  float factor;
  int stream;
  const row_ahead *ahead;
  __m512d low, high;
} rms_step_context;

TARGET_AVX512 static ALWAYS_INLINE __m512 rms_step_block_avx512(void *context, int64_t i,
                                                                __mmask16 m) {
  rms_step_context *c = context;
  prefetch_ahead(c->ahead, i);
  __m512 next = _mm512_maskz_loadu_ps(m, c->next_x + i);
  if (c->next_r) {
    next = _mm512_add_ps(next, _mm512_maskz_loadu_ps(m, c->next_r + i));
    _mm512_mask_storeu_ps(c->next_h + i, m, next);
    if (c->next_residual_out)
      store16_avx512(c->next_residual_out + i, next, m, c->stream);
  }
  __m512d d0 = _mm512_cvtps_pd(_mm512_castps512_ps256(next));
  __m512d d1 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(next), 1)));
  c->low = _mm512_fmadd_pd(d0, d0, c->low);
  c->high = _mm512_fmadd_pd(d1, d1, c->high);
  __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, c->h + i), _mm512_set1_ps(c->factor));
  return c->weight ? _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, c->weight + i)) : v;
}

TARGET_AVX512 static double rms_step_avx512(float *y, const float *h, float factor,
                                            const float *weight, int64_t count, int stream,
                                            const float *next_x, const float *next_r, float *next_h,
                                            float *next_residual_out, const row_ahead *ahead) {
  rms_step_context c = {h,
                        weight,
                        next_x,
                        next_r,
                        next_h,
                        next_residual_out,
                        factor,
                        stream,
                        ahead,
                        _mm512_setzero_pd(),
                        _mm512_setzero_pd()};
  map_avx512(y, count, stream, rms_step_block_avx512, &c);
  return _mm512_reduce_add_pd(_mm512_add_pd(c.low, c.high));
}

typedef struct ln_step_context {
  const float *x, *weight, *bias, *next;
  float mean, factor;
  const row_ahead *ahead;
  __m512d low, high;
} ln_step_context;

TARGET_AVX512 static ALWAYS_INLINE __m512 ln_step_block_avx512(void *context, int64_t i,
                                                               __mmask16 m) {
  ln_step_context *c = context;
  prefetch_ahead(c->ahead, i);
  accumulate_pd_avx512(&c->low, &c->high, _mm512_maskz_loadu_ps(m, c->next + i));
  __m512 v =
      _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, c->x + i), _mm512_set1_ps(c->mean)),
                    _mm512_set1_ps(c->factor));
  if (c->weight)
    v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, c->weight + i));
  if (c->bias)
    v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, c->bias + i));
  return v;
}

TARGET_AVX512 static double ln_step_avx512(float *y, const float *x, float mean, float factor,
                                           const float *weight, const float *bias, int64_t count,
                                           int stream, const float *next, const row_ahead *ahead) {
  ln_step_context c = {
      x, weight, bias, next, mean, factor, ahead, _mm512_setzero_pd(), _mm512_setzero_pd()};
  map_avx512(y, count, stream, ln_step_block_avx512, &c);
  return _mm512_reduce_add_pd(_mm512_add_pd(c.low, c.high));
}

/* One block's memory work: the max of next[i, i + n) and y[i, i + n) = e *
 * factor (without y: none), in 16-lane steps; reads and writes in one loop,
 * as a copy has them. */
TARGET_AVX512 static ALWAYS_INLINE __m512 softmax_memory_avx512(__m512 max, float *y,
                                                                const float *e, __m512 factor,
                                                                const float *next, int64_t i,
                                                                int64_t n, int stream,
                                                                const row_ahead *ahead) {
  for (int64_t end = i + n; i < end; i += 16) {
    prefetch_ahead(ahead, i);
    __mmask16 m = lanes_avx512(end - i);
    max = _mm512_mask_max_ps(max, m, max, _mm512_maskz_loadu_ps(m, next + i));
    if (y)
      store16_avx512(y + i, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, e + i), factor), m, stream);
  }
  return max;
}

/* softmax_memory_avx512 over 64 elements at i, all present, with the checks
 * made once per row: y (NULL: none) written with streaming stores when
 * `stream` (then 64-byte aligned at i), `prefetch` (NULL: none) the line
 * stream that prefetch_ahead would walk. The generic loop's per-vector masks
 * and branches cost more than its memory traffic here. */
TARGET_AVX512 static ALWAYS_INLINE __m512 softmax_memory64_avx512(__m512 max, float *y,
                                                                  const float *e, __m512 factor,
                                                                  const float *next, int64_t i,
                                                                  int stream, const char *prefetch,
                                                                  int64_t element_bytes) {
  if (prefetch)
    for (int u = 0; u < 4; u++)
      _mm_prefetch(prefetch + (i + 16 * u) * element_bytes, _MM_HINT_T0);
  for (int u = 0; u < 4; u++)
    max = _mm512_max_ps(max, _mm512_loadu_ps(next + i + 16 * u));
  if (y) {
    for (int u = 0; u < 4; u++) {
      __m512 v = _mm512_mul_ps(_mm512_loadu_ps(e + i + 16 * u), factor);
      if (stream)
        _mm512_stream_ps(y + i + 16 * u, v);
      else
        _mm512_storeu_ps(y + i + 16 * u, v);
    }
  }
  return max;
}

TARGET_AVX512 static void softmax_step_avx512(float *y, const float *e, const float *factors,
                                              int64_t count, int stream, const float *next,
                                              float scale, float *next_e, float *block_max,
                                              float *block_sum, const row_ahead *ahead) {
  const __m512 s = _mm512_set1_ps(scale), lowest = _mm512_set1_ps(-INFINITY);
  const int64_t blocks = (count + SOFTMAX_BLOCK - 1) / SOFTMAX_BLOCK;
  if (!next) {
    for (int64_t b = 0; b < blocks; b++) {
      int64_t i = b * SOFTMAX_BLOCK, n = count - i < SOFTMAX_BLOCK ? count - i : SOFTMAX_BLOCK;
      __m512 factor = _mm512_set1_ps(factors[b]);
      for (int64_t end = i + n; i < end; i += 16) {
        __mmask16 m = lanes_avx512(end - i);
        store16_avx512(y + i, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, e + i), factor), m, stream);
      }
    }
    return;
  }
  /* Skewed by a block so that memory and arithmetic overlap: while block b's
   * exponentials are computed from L1, block b + 1 is read from memory (its
   * max) and its part of y is written. One after the other, the memory
   * stream idled during the exponentials (softmax measured 0.55-0.65 of copy
   * that way). Only the last block can be short, so the next block never
   * outruns the current one. */
  /* the fast path's row-wide decisions: streaming stores where y is aligned
   * (rows' blocks start at multiples of 1024 elements), one prefetch stream
   * (softmax reads x only) */
  const int fast_stream = stream && ((uintptr_t)y & 63u) == 0;
  const char *prefetch = ahead && ahead->count == 1 ? ahead->rows[0] : NULL;
  const int64_t prefetch_limit = prefetch ? ahead->limit : (ahead ? 0 : count);
  const int64_t prefetch_bytes = prefetch ? ahead->element_bytes : 0;
  __m512 max = softmax_memory_avx512(lowest, y, e, _mm512_set1_ps(y ? factors[0] : 0.0f), next, 0,
                                     count < SOFTMAX_BLOCK ? count : SOFTMAX_BLOCK, stream, ahead);
  for (int64_t b = 0; b < blocks; b++) {
    const int64_t start = b * SOFTMAX_BLOCK;
    const int64_t n = count - start < SOFTMAX_BLOCK ? count - start : SOFTMAX_BLOCK;
    const int64_t next_start = start + SOFTMAX_BLOCK;
    const int64_t next_n =
        b + 1 < blocks ? (count - next_start < SOFTMAX_BLOCK ? count - next_start : SOFTMAX_BLOCK)
                       : 0;
    float block = _mm512_reduce_max_ps(max);
    __m512 shift = _mm512_set1_ps(block == -INFINITY ? 0.0f : block);
    __m512 factor = _mm512_set1_ps(y && next_n > 0 ? factors[b + 1] : 0.0f);
    __m512 next_max = lowest;
    __m512 sums[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                      _mm512_setzero_ps()};
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
      __m512 v[4];
      for (int u = 0; u < 4; u++)
        v[u] = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(next + start + i + 16 * u), shift), s);
      exp4_nonpositive_avx512(v);
      for (int u = 0; u < 4; u++) {
        _mm512_storeu_ps(next_e + start + i + 16 * u, v[u]);
        sums[u] = _mm512_add_ps(sums[u], v[u]);
      }
      if (i + 64 <= next_n && i + 64 <= prefetch_limit)
        next_max = softmax_memory64_avx512(next_max, y, e, factor, next, next_start + i,
                                           fast_stream, prefetch, prefetch_bytes);
      else if (i < next_n)
        next_max = softmax_memory_avx512(next_max, y, e, factor, next, next_start + i,
                                         next_n - i < 64 ? next_n - i : 64, stream, ahead);
    }
    for (; i < n; i += 16) {
      __mmask16 m = lanes_avx512(n - i);
      __m512 v = _mm512_maskz_mov_ps(
          m, exp_avx512(_mm512_mul_ps(
                 _mm512_sub_ps(_mm512_maskz_loadu_ps(m, next + start + i), shift), s)));
      _mm512_mask_storeu_ps(next_e + start + i, m, v);
      sums[0] = _mm512_add_ps(sums[0], v);
    }
    __m512 sum = _mm512_add_ps(_mm512_add_ps(sums[0], sums[1]), _mm512_add_ps(sums[2], sums[3]));
    block_max[b] = block;
    block_sum[b] = _mm512_reduce_add_ps(sum);
    max = next_max;
  }
}

TARGET_AVX512 static float softmax_factors_avx512(const float *block_max, const float *block_sum,
                                                  int64_t blocks, float scale, float *factors) {
  __m512 max = _mm512_set1_ps(-INFINITY);
  for (int64_t b = 0; b < blocks; b += 16) {
    __mmask16 m = lanes_avx512(blocks - b);
    max = _mm512_mask_max_ps(max, m, max, _mm512_maskz_loadu_ps(m, block_max + b));
  }
  float row_max = _mm512_reduce_max_ps(max);
  if (row_max == -INFINITY)
    return row_max;
  /* NaN or +inf blocks make every factor NaN through the sum. */
  __m512d total = _mm512_setzero_pd();
  for (int64_t b = 0; b < blocks; b += 16) {
    __mmask16 m = lanes_avx512(blocks - b);
    __m512 w = _mm512_maskz_mov_ps(
        m, exp_avx512(_mm512_mul_ps(
               _mm512_sub_ps(_mm512_maskz_loadu_ps(m, block_max + b), _mm512_set1_ps(row_max)),
               _mm512_set1_ps(scale))));
    _mm512_mask_storeu_ps(factors + b, m, w);
    __m512 weighted = _mm512_mul_ps(w, _mm512_maskz_loadu_ps(m, block_sum + b));
    __m512d high = _mm512_setzero_pd();
    accumulate_pd_avx512(&total, &high, weighted);
    total = _mm512_add_pd(total, high);
  }
  float inverse = (float)(1.0 / _mm512_reduce_add_pd(total));
  for (int64_t b = 0; b < blocks; b += 16) {
    __mmask16 m = lanes_avx512(blocks - b);
    _mm512_mask_storeu_ps(
        factors + b, m,
        _mm512_mul_ps(_mm512_maskz_loadu_ps(m, factors + b), _mm512_set1_ps(inverse)));
  }
  return row_max;
}

TARGET_AVX512 static double xe_step_avx512(const float *x, float shift, int64_t count,
                                           const float *next, float *next_max,
                                           const row_ahead *ahead) {
  const __m512 t = _mm512_set1_ps(shift);
  __m512 max = _mm512_set1_ps(-INFINITY);
  double total = 0.0;
  for (int64_t b = 0; b < count; b += EXP_SUM_BLOCK) {
    int64_t end = count - b < EXP_SUM_BLOCK ? count : b + EXP_SUM_BLOCK;
    __m512 sum = _mm512_setzero_ps();
    for (int64_t i = b; i < end; i += 16) {
      prefetch_ahead(ahead, i);
      __mmask16 m = lanes_avx512(end - i);
      max = _mm512_mask_max_ps(max, m, max, _mm512_maskz_loadu_ps(m, next + i));
      __m512 v = exp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), t));
      sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(m, v));
    }
    __m512d low = _mm512_setzero_pd(), high = low;
    accumulate_pd_avx512(&low, &high, sum);
    total += _mm512_reduce_add_pd(_mm512_add_pd(low, high));
  }
  *next_max = _mm512_reduce_max_ps(max);
  return total;
}

/* See row_kernels.rms16_step. Both rows are read as 16-lane 16-bit loads
 * widened in registers, and y's vectors are streamed when they fill an
 * aligned 32 bytes: the next row is read in the same loop that writes y, as
 * a copy reads and writes (the f32 rows' fused step, without scratch). */
/* 16 lanes of v (mask m) as dtype at y: streamed when stream is asked
 * and the lanes fill an aligned 32 bytes, else a masked store. */
TARGET_AVX512 static ALWAYS_INLINE void store16_as_half_avx512(uint16_t *y, __m512 v, __mmask16 m,
                                                               int32_t dtype, int stream) {
  __m256i h = to_half16_avx512(v, dtype);
  if (stream && m == 0xffff && ((uintptr_t)y & 31u) == 0)
    _mm256_stream_si256((__m256i *)y, h);
  else
    _mm256_mask_storeu_epi16(y, m, h);
}

TARGET_AVX512 static double rms16_step_avx512(uint16_t *y, const uint16_t *x, float factor,
                                              const float *weight, int64_t count, int stream,
                                              const uint16_t *next, int32_t dtype,
                                              const row_ahead *ahead) {
  __m512d low = _mm512_setzero_pd(), high = low;
  const __m512 f = _mm512_set1_ps(factor);
  const uint16_t *squared = y ? next : x;
  for (int64_t i = 0; i < count; i += 16) {
    prefetch_ahead(ahead, i);
    __mmask16 m = lanes_avx512(count - i);
    if (squared) {
      __m512 n = load16_half_avx512(squared + i, dtype, m);
      __m512d d0 = _mm512_cvtps_pd(_mm512_castps512_ps256(n));
      __m512d d1 =
          _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(n), 1)));
      low = _mm512_fmadd_pd(d0, d0, low);
      high = _mm512_fmadd_pd(d1, d1, high);
    }
    if (!y)
      continue;
    __m512 v = _mm512_mul_ps(load16_half_avx512(x + i, dtype, m), f);
    if (weight)
      v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, weight + i));
    store16_as_half_avx512(y + i, v, m, dtype, stream);
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(low, high));
}

/* 16 lanes (mask m) of a 16-bit row widened to f32, kept in f32 scratch
 * too (where the row's later passes read it). */
TARGET_AVX512 static ALWAYS_INLINE __m512 widen16_avx512(float *dst, const uint16_t *src,
                                                         __mmask16 m, int32_t dtype) {
  __m512 v = load16_half_avx512(src, dtype, m);
  _mm512_mask_storeu_ps(dst, m, v);
  return v;
}

/* See row_kernels.ln16_step: the f32 rows' ln_step for 16-bit rows, the
 * next row widened into scratch in the loop that writes this row's y. */
TARGET_AVX512 static double ln16_step_avx512(uint16_t *y, const float *x, float mean, float factor,
                                             const float *weight, const float *bias, int64_t count,
                                             int stream, const uint16_t *next, float *next_f32,
                                             int32_t dtype, const row_ahead *ahead) {
  __m512d low = _mm512_setzero_pd(), high = low;
  const __m512 f = _mm512_set1_ps(factor), centre = _mm512_set1_ps(mean);
  for (int64_t i = 0; i < count; i += 16) {
    prefetch_ahead(ahead, i);
    __mmask16 m = lanes_avx512(count - i);
    if (next)
      accumulate_pd_avx512(&low, &high, widen16_avx512(next_f32 + i, next + i, m, dtype));
    if (!y)
      continue;
    __m512 v = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), centre), f);
    if (weight)
      v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, weight + i));
    if (bias)
      v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, bias + i));
    store16_as_half_avx512(y + i, v, m, dtype, stream);
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(low, high));
}

/* See row_kernels.sm16_step. */
TARGET_AVX512 static float sm16_step_avx512(uint16_t *y, const float *e, float factor,
                                            int64_t count, int stream, const uint16_t *next,
                                            float *next_f32, int32_t dtype,
                                            const row_ahead *ahead) {
  __m512 max = _mm512_set1_ps(-INFINITY);
  const __m512 f = _mm512_set1_ps(factor);
  for (int64_t i = 0; i < count; i += 16) {
    prefetch_ahead(ahead, i);
    __mmask16 m = lanes_avx512(count - i);
    if (next)
      max = _mm512_mask_max_ps(max, m, max, widen16_avx512(next_f32 + i, next + i, m, dtype));
    if (y)
      store16_as_half_avx512(y + i, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, e + i), f), m, dtype,
                             stream);
  }
  return _mm512_reduce_max_ps(max);
}

static const row_kernels AVX512_KERNELS = {.sum = sum_avx512,
                                           .sum_squares = sum_squares_avx512,
                                           .add_sum_squares = add_sum_squares_avx512,
                                           .scale = scale_avx512,
                                           .normalize = normalize_avx512,
                                           .max_of = max_of_avx512,
                                           .exp_sum = exp_sum_avx512,
                                           .rms_step = rms_step_avx512,
                                           .ln_step = ln_step_avx512,
                                           .softmax_step = softmax_step_avx512,
                                           .softmax_factors = softmax_factors_avx512,
                                           .xe_step = xe_step_avx512,
                                           .rms16_step = rms16_step_avx512,
                                           .ln16_step = ln16_step_avx512,
                                           .sm16_step = sm16_step_avx512};

#endif /* CPU_KERNELS_HAVE_AVX2 */

static const row_kernels *select_kernels(kernel_level level) {
#if CPU_KERNELS_HAVE_AVX2
  if (level == KERNEL_AVX512)
    return &AVX512_KERNELS;
  if (level == KERNEL_AVX2)
    return &AVX2_KERNELS;
#endif
  (void)level;
  return &GENERIC_KERNELS;
}

/* ---- rows ---- */

static int has_nan(const float *x, int64_t count) {
  int found = 0;
  for (int64_t i = 0; i < count; i++)
    found |= x[i] != x[i];
  return found;
}

static void set_error(const cpu_exec *exec, const char *message, size_t bytes) {
  if (exec->error && exec->error_capacity > 0)
    snprintf(exec->error, exec->error_capacity, "%s (%zu bytes)", message, bytes);
}

/* What every row job shares: the kernels, the row length, and per-worker
 * scratch of `worker_floats` floats. */
typedef struct row_job {
  kernel_level level;
  const row_kernels *kernels;
  int64_t width;
  size_t worker_floats;
  float *scratch;
} row_job;

static int64_t last_stride(const tsr_plugin_tensor *t) {
  return t->strides[t->rank - 1];
}

/* A tensor whose rows can be used in place as f32 arrays. */
static int rows_are_f32(const tsr_plugin_tensor *t) {
  return t->dtype == TSR_DTYPE_F32 && last_stride(t) == 1;
}

/* Row `row` of t as contiguous f32: where it lies, or converted into scratch
 * (prefetching as `ahead` says: f32 rows prefetch in the row's first pass). */
static const float *read_row(const row_job *job, const tsr_plugin_tensor *t, int64_t row,
                             float *scratch, const row_ahead *ahead) {
  int64_t offset = tsr_plugin_row_offset(t, row);
  if (rows_are_f32(t))
    return (const float *)cpu_tensor_base(t) + offset;
  load_row(job->level, scratch, cpu_tensor_base(t), t->dtype, offset, last_stride(t), job->width,
           ahead);
  return scratch;
}

/* The prefetches of a first pass over a row that `read_row` gave: none when
 * read_row already converted (and prefetched) it. */
static const row_ahead *first_pass_ahead(const tsr_plugin_tensor *t, const row_ahead *ahead) {
  return rows_are_f32(t) ? ahead : NULL;
}

/* Where a row of output t is computed: in place when rows are f32, else in
 * scratch, which finish_row then converts into the tensor. */
static float *output_row(const tsr_plugin_tensor *t, int64_t row, float *scratch) {
  if (rows_are_f32(t))
    return (float *)cpu_tensor_base(t) + tsr_plugin_row_offset(t, row);
  return scratch;
}

static void finish_row(const row_job *job, const tsr_plugin_tensor *t, int64_t row,
                       const float *values, int stream) {
  if (rows_are_f32(t))
    return;
  store_row(job->level, cpu_tensor_base(t), t->dtype, tsr_plugin_row_offset(t, row), last_stride(t),
            values, job->width, stream);
}

/* Allocates `per_worker` floats for each pool thread plus `shared` floats
 * (weights and biases converted once) and fills in the job; 0 when out of
 * memory (with the error set). */
static int row_job_init(row_job *job, const cpu_exec *exec, int64_t width, int64_t per_worker,
                        int64_t shared, const char *what) {
  int threads = cpu_pool_threads(exec->pool);
  job->level = cpu_kernel_level();
  job->kernels = select_kernels(job->level);
  job->width = width;
  /* Whole cache lines per worker: no false sharing between workers. */
  job->worker_floats = ((size_t)per_worker + 15u) & ~(size_t)15u;
  size_t bytes = (job->worker_floats * (size_t)(threads > 0 ? threads : 1) + (size_t)shared + 16u) *
                 sizeof(float);
  job->scratch = aligned_alloc(64, (bytes + 63u) & ~(size_t)63u);
  if (!job->scratch) {
    set_error(exec, what, bytes);
    return 0;
  }
  return 1;
}

static float *worker_scratch(const row_job *job, int worker) {
  return job->scratch + (size_t)worker * job->worker_floats;
}

/* After the per-worker areas. */
static float *shared_scratch(const row_job *job, const cpu_exec *exec) {
  int threads = cpu_pool_threads(exec->pool);
  return job->scratch + job->worker_floats * (size_t)(threads > 0 ? threads : 1);
}

static int64_t row_grain(int64_t row_length) {
  int64_t grain = MIN_ELEMENTS_PER_CHUNK / (row_length > 0 ? row_length : 1);
  return grain > 0 ? grain : 1;
}

/* Optional per-channel vector (weight or bias) as f32: where it lies when it
 * is f32 of unit stride, else converted into dst; NULL when absent. */
static const float *load_vector(kernel_level level, const tsr_plugin_tensor *t, float *dst) {
  if (!t->buffer)
    return NULL;
  if (rows_are_f32(t))
    return (const float *)cpu_tensor_base(t);
  load_row(level, dst, cpu_tensor_base(t), t->dtype, 0, last_stride(t), t->shape[t->rank - 1],
           NULL);
  return dst;
}

/* Row `row` of an f32 tensor with unit-stride rows, where it lies. */
static float *f32_row(const tsr_plugin_tensor *t, int64_t row) {
  return (float *)cpu_tensor_base(t) + tsr_plugin_row_offset(t, row);
}

/* Whether every given tensor (absent ones aside) has f32 unit-stride rows. */
static int all_rows_f32(const tsr_plugin_tensor *const *tensors, int count) {
  for (int i = 0; i < count; i++)
    if (tensors[i]->buffer && !rows_are_f32(tensors[i]))
      return 0;
  return 1;
}

static float inverse_root(double sum_squares, int64_t width, float eps) {
  return (float)(1.0 / sqrt(sum_squares / (double)width + (double)eps));
}

/* ---- RMSNorm ---- */

typedef struct rmsnorm_job {
  row_job rows;
  const tsr_rmsnorm_args *args;
  const float *weight;
  int stream;
  int direct;   /* f32 unit-stride rows throughout and a fused step: pipelined rows */
  int direct16; /* the same for 16-bit x and y of one dtype, without a residual */
} rmsnorm_job;

static const uint16_t *half_row(const tsr_plugin_tensor *t, int64_t row) {
  return (const uint16_t *)cpu_tensor_base(t) + tsr_plugin_row_offset(t, row);
}

/* x and y both f16 or both bf16, rows of unit stride: the 16-bit steps. */
static int half_rows(const tsr_plugin_tensor *x, const tsr_plugin_tensor *y) {
  return (x->dtype == TSR_DTYPE_F16 || x->dtype == TSR_DTYPE_BF16) && y->dtype == x->dtype &&
         last_stride(x) == 1 && last_stride(y) == 1;
}

/* 16-bit rows without a residual, pipelined like rmsnorm_direct: each row's
 * output pass sums the next row's squares, both converted in registers. */
static void rmsnorm_direct16(const rmsnorm_job *job, int64_t begin, int64_t end) {
  const tsr_rmsnorm_args *args = job->args;
  const row_kernels *k = job->rows.kernels;
  const int64_t width = job->rows.width;
  const int32_t dtype = args->x.dtype;
  row_ahead plan;
  double sum_squares = k->rms16_step(NULL, half_row(&args->x, begin), 0.0f, NULL, width, 0, NULL,
                                     dtype, plan_ahead(&plan, &args->x, NULL, begin, end));
  for (int64_t row = begin; row < end; row++) {
    float factor = inverse_root(sum_squares, width, args->eps);
    uint16_t *y = (uint16_t *)half_row(&args->y, row);
    const uint16_t *next = row + 1 < end ? half_row(&args->x, row + 1) : NULL;
    sum_squares = k->rms16_step(y, half_row(&args->x, row), factor, job->weight, width, job->stream,
                                next, dtype, plan_ahead(&plan, &args->x, NULL, row + 1, end));
  }
  if (job->stream)
    stream_fence(job->rows.level);
}

/* Rows of f32 in place, the output pass of each row fused with the first
 * pass of the next (h of rows with a residual alternates between two
 * scratch rows). */
static void rmsnorm_direct(const rmsnorm_job *job, int64_t begin, int64_t end, int worker) {
  const tsr_rmsnorm_args *args = job->args;
  const row_kernels *k = job->rows.kernels;
  const int64_t width = job->rows.width;
  const tsr_plugin_tensor *residual = args->residual.buffer ? &args->residual : NULL;
  const int residual_out = args->residual_out.buffer != NULL;
  float *h_rows[2] = {worker_scratch(&job->rows, worker),
                      worker_scratch(&job->rows, worker) + width};
  row_ahead plan;
  const float *h = f32_row(&args->x, begin);
  double sum_squares;
  if (residual) {
    sum_squares = k->add_sum_squares(h_rows[0], h, f32_row(residual, begin), width,
                                     plan_ahead(&plan, &args->x, residual, begin, end));
    h = h_rows[0];
    if (residual_out)
      store_row(job->rows.level, cpu_tensor_base(&args->residual_out), TSR_DTYPE_F32,
                tsr_plugin_row_offset(&args->residual_out, begin), 1, h, width, job->stream);
  } else {
    sum_squares = k->sum_squares(h, 0.0f, width, plan_ahead(&plan, &args->x, NULL, begin, end));
  }
  for (int64_t row = begin; row < end; row++) {
    float factor = inverse_root(sum_squares, width, args->eps);
    float *y = f32_row(&args->y, row);
    if (row + 1 == end) {
      k->scale(y, h, factor, job->weight, width, job->stream);
      break;
    }
    const float *next_x = f32_row(&args->x, row + 1);
    float *next_h = residual ? h_rows[(row + 1 - begin) & 1] : NULL;
    sum_squares = k->rms_step(y, h, factor, job->weight, width, job->stream, next_x,
                              residual ? f32_row(residual, row + 1) : NULL, next_h,
                              residual_out ? f32_row(&args->residual_out, row + 1) : NULL,
                              plan_ahead(&plan, &args->x, residual, row + 1, end));
    h = residual ? next_h : next_x;
  }
  if (job->stream)
    stream_fence(job->rows.level);
}

static void rmsnorm_range(void *context, int64_t begin, int64_t end, int worker) {
  const rmsnorm_job *job = context;
  if (job->direct) {
    rmsnorm_direct(job, begin, end, worker);
    return;
  }
  if (job->direct16) {
    rmsnorm_direct16(job, begin, end);
    return;
  }
  const tsr_rmsnorm_args *args = job->args;
  const row_kernels *k = job->rows.kernels;
  const int64_t width = job->rows.width;
  /* x (converted), then r (converted) or y's f32 values, then h = x + r. */
  float *first = worker_scratch(&job->rows, worker);
  float *second = first + width, *third = second + width;
  for (int64_t row = begin; row < end; row++) {
    row_ahead plan;
    const row_ahead *ahead = plan_ahead(&plan, &args->x, &args->residual, row, end);
    const float *x = read_row(&job->rows, &args->x, row, first, ahead);
    const float *h = x;
    double sum_squares;
    float *y_values = second;
    if (args->residual.buffer) {
      const float *r = read_row(&job->rows, &args->residual, row, second, NULL);
      sum_squares = k->add_sum_squares(third, x, r, width, first_pass_ahead(&args->x, ahead));
      h = third;
      y_values = first; /* x is no longer needed */
      if (args->residual_out.buffer)
        store_row(job->rows.level, cpu_tensor_base(&args->residual_out), args->residual_out.dtype,
                  tsr_plugin_row_offset(&args->residual_out, row), last_stride(&args->residual_out),
                  h, width, job->stream);
    } else {
      sum_squares = k->sum_squares(x, 0.0f, width, first_pass_ahead(&args->x, ahead));
    }
    float inverse_rms = (float)(1.0 / sqrt(sum_squares / (double)width + (double)args->eps));
    float *y = output_row(&args->y, row, y_values);
    k->scale(y, h, inverse_rms, job->weight, width, job->stream);
    finish_row(&job->rows, &args->y, row, y, job->stream);
  }
  if (job->stream)
    stream_fence(job->rows.level);
}

tsr_status cpu_rmsnorm_run(const cpu_exec *exec, const tsr_rmsnorm_args *args) {
  int64_t width = args->x.shape[args->x.rank - 1];
  int64_t rows = tsr_plugin_row_count(&args->x);
  if (rows == 0 || width == 0)
    return TSR_OK;
  rmsnorm_job job = {.args = args};
  if (!row_job_init(&job.rows, exec, width, 3 * width, width, "cannot allocate rmsnorm scratch"))
    return TSR_ERROR_OUT_OF_MEMORY;
  job.weight = load_vector(job.rows.level, &args->weight, shared_scratch(&job.rows, exec));
  job.stream = should_stream(rows * width, args->y.dtype);
  const tsr_plugin_tensor *tensors[4] = {&args->x, &args->residual, &args->y, &args->residual_out};
  job.direct = job.rows.kernels->rms_step && all_rows_f32(tensors, 4);
  job.direct16 =
      job.rows.kernels->rms16_step && !args->residual.buffer && half_rows(&args->x, &args->y);
  cpu_pool_parallel_for(exec->pool, rows, row_grain(width), rmsnorm_range, &job);
  free(job.rows.scratch);
  return TSR_OK;
}

/* ---- LayerNorm ---- */

typedef struct layernorm_job {
  row_job rows;
  const tsr_layernorm_args *args;
  const float *weight, *bias;
  int stream;
  int direct;
  int direct16; /* 16-bit x and y of one dtype, unit stride: layernorm_direct16 */
} layernorm_job;

static void layernorm_direct(const layernorm_job *job, int64_t begin, int64_t end) {
  const tsr_layernorm_args *args = job->args;
  const row_kernels *k = job->rows.kernels;
  const int64_t width = job->rows.width;
  row_ahead plan;
  const float *x = f32_row(&args->x, begin);
  double mean = k->sum(x, width, plan_ahead(&plan, &args->x, NULL, begin, end)) / (double)width;
  for (int64_t row = begin; row < end; row++) {
    /* The second pass, over the row in cache: the variance of the centred
     * values does not cancel. */
    double sum_squares = k->sum_squares(x, (float)mean, width, NULL);
    float factor = inverse_root(sum_squares, width, args->eps);
    float *y = f32_row(&args->y, row);
    if (row + 1 == end) {
      k->normalize(y, x, (float)mean, factor, job->weight, job->bias, width, job->stream);
      break;
    }
    const float *next = f32_row(&args->x, row + 1);
    mean = k->ln_step(y, x, (float)mean, factor, job->weight, job->bias, width, job->stream, next,
                      plan_ahead(&plan, &args->x, NULL, row + 1, end)) /
           (double)width;
    x = next;
  }
  if (job->stream)
    stream_fence(job->rows.level);
}

/* 16-bit rows, pipelined as layernorm_direct: the current row as f32 in
 * one scratch row (its second pass reads it there), the next widened into
 * the other while this row's y is written. */
static void layernorm_direct16(const layernorm_job *job, int64_t begin, int64_t end, int worker) {
  const tsr_layernorm_args *args = job->args;
  const row_kernels *k = job->rows.kernels;
  const int64_t width = job->rows.width;
  const int32_t dtype = args->x.dtype;
  float *rows_f32[2] = {worker_scratch(&job->rows, worker),
                        worker_scratch(&job->rows, worker) + width};
  row_ahead plan;
  double sum = k->ln16_step(NULL, NULL, 0.0f, 0.0f, NULL, NULL, width, 0, half_row(&args->x, begin),
                            rows_f32[0], dtype, plan_ahead(&plan, &args->x, NULL, begin, end));
  for (int64_t row = begin; row < end; row++) {
    const float *x = rows_f32[(row - begin) & 1];
    double mean = sum / (double)width;
    /* The variance of the centred values (x in cache): it does not cancel. */
    double sum_squares = k->sum_squares(x, (float)mean, width, NULL);
    float factor = inverse_root(sum_squares, width, args->eps);
    const uint16_t *next = row + 1 < end ? half_row(&args->x, row + 1) : NULL;
    sum = k->ln16_step((uint16_t *)half_row(&args->y, row), x, (float)mean, factor, job->weight,
                       job->bias, width, job->stream, next, rows_f32[(row + 1 - begin) & 1], dtype,
                       plan_ahead(&plan, &args->x, NULL, row + 1, end));
  }
  if (job->stream)
    stream_fence(job->rows.level);
}

static void layernorm_range(void *context, int64_t begin, int64_t end, int worker) {
  const layernorm_job *job = context;
  if (job->direct) {
    layernorm_direct(job, begin, end);
    return;
  }
  if (job->direct16) {
    layernorm_direct16(job, begin, end, worker);
    return;
  }
  const tsr_layernorm_args *args = job->args;
  const row_kernels *k = job->rows.kernels;
  const int64_t width = job->rows.width;
  float *first = worker_scratch(&job->rows, worker), *second = first + width;
  for (int64_t row = begin; row < end; row++) {
    row_ahead plan;
    const row_ahead *ahead = plan_ahead(&plan, &args->x, NULL, row, end);
    const float *x = read_row(&job->rows, &args->x, row, first, ahead);
    /* Two passes (the second over the row in cache): the variance of the
     * centred values does not cancel. */
    double mean = k->sum(x, width, first_pass_ahead(&args->x, ahead)) / (double)width;
    double sum_squares = k->sum_squares(x, (float)mean, width, NULL);
    float inverse_std = (float)(1.0 / sqrt(sum_squares / (double)width + (double)args->eps));
    float *y = output_row(&args->y, row, second);
    k->normalize(y, x, (float)mean, inverse_std, job->weight, job->bias, width, job->stream);
    finish_row(&job->rows, &args->y, row, y, job->stream);
  }
  if (job->stream)
    stream_fence(job->rows.level);
}

tsr_status cpu_layernorm_run(const cpu_exec *exec, const tsr_layernorm_args *args) {
  int64_t width = args->x.shape[args->x.rank - 1];
  int64_t rows = tsr_plugin_row_count(&args->x);
  if (rows == 0 || width == 0)
    return TSR_OK;
  layernorm_job job = {.args = args};
  if (!row_job_init(&job.rows, exec, width, 2 * width, 2 * width,
                    "cannot allocate layernorm scratch"))
    return TSR_ERROR_OUT_OF_MEMORY;
  float *vectors = shared_scratch(&job.rows, exec);
  job.weight = load_vector(job.rows.level, &args->weight, vectors);
  job.bias = load_vector(job.rows.level, &args->bias, vectors + width);
  job.stream = should_stream(rows * width, args->y.dtype);
  const tsr_plugin_tensor *tensors[2] = {&args->x, &args->y};
  job.direct = job.rows.kernels->ln_step && all_rows_f32(tensors, 2);
  job.direct16 = job.rows.kernels->ln16_step && half_rows(&args->x, &args->y);
  cpu_pool_parallel_for(exec->pool, rows, row_grain(width), layernorm_range, &job);
  free(job.rows.scratch);
  return TSR_OK;
}

/* ---- softmax ---- */

typedef struct softmax_job {
  row_job rows;
  const tsr_softmax_args *args;
  int stream;
  int direct;
  int direct16; /* 16-bit x and y of one dtype, unit stride: softmax_direct16 */
} softmax_job;

/* e = e^((x - max) * scale) with the factor that normalises it: 1 / sum,
 * or for a row of all -inf, e filled with 0 (NaN when the row has a NaN,
 * which the max ignored) and factor 1. max is the row's max of x. */
static float softmax_exponentials(const row_kernels *k, float *e, const float *x, float scale,
                                  float max, int64_t width) {
  if (max == -INFINITY) {
    float fill = has_nan(x, width) ? NAN : 0.0f;
    for (int64_t i = 0; i < width; i++)
      e[i] = fill;
    return 1.0f;
  }
  /* NaN or +inf in the row make every output NaN through the sum. */
  return (float)(1.0 / k->exp_sum(e, x, scale, max, width));
}

/* Scratch that is stored to while rows of x are loaded sits half a page
 * away from x's offset within its page: a load whose address agrees with an
 * earlier store's in the low 12 bits can be taken for dependent on it (4K
 * aliasing) and wait, and rows of x and of a page-aligned scratch agree at
 * every step. The scratch block carries ALIAS_SHIFT_FLOATS spare floats. */
enum { ALIAS_SHIFT_FLOATS = 1024 };

static float *away_from_page_offset(float *scratch, const float *x) {
  uintptr_t have = (uintptr_t)scratch % 4096, want = ((uintptr_t)x + 2048) % 4096;
  return scratch + ((want - have + 4096) % 4096) / 64 * 64 / sizeof(float);
}

/* Per-worker scratch of the pipelined softmax: two rows of exponentials
 * and, per row of blocks, two sets of factors and the blocks' maxima and
 * sums. */
static int64_t softmax_direct_floats(int64_t width) {
  int64_t blocks = (width + SOFTMAX_BLOCK - 1) / SOFTMAX_BLOCK;
  return 2 * width + 4 * ((blocks + 15) / 16 * 16) + ALIAS_SHIFT_FLOATS;
}

/* Rows of f32 in place: each row's output pass fused with the reading of the
 * next row (block maxima, exponentials relative to them); a row's
 * exponentials alternate between two scratch rows. */
static void softmax_direct(const softmax_job *job, int64_t begin, int64_t end, int worker) {
  const tsr_softmax_args *args = job->args;
  const row_kernels *k = job->rows.kernels;
  const int64_t width = job->rows.width;
  const int64_t blocks = (width + SOFTMAX_BLOCK - 1) / SOFTMAX_BLOCK;
  const int64_t block_floats = (blocks + 15) / 16 * 16;
  float *e[2], *factors[2];
  const float *x = f32_row(&args->x, begin);
  e[0] = away_from_page_offset(worker_scratch(&job->rows, worker), x);
  e[1] = e[0] + width;
  factors[0] = e[1] + width;
  factors[1] = factors[0] + block_floats;
  float *block_max = factors[1] + block_floats, *block_sum = block_max + block_floats;
  row_ahead plan;
  k->softmax_step(NULL, NULL, NULL, width, 0, x, args->scale, e[0], block_max, block_sum,
                  plan_ahead(&plan, &args->x, NULL, begin, end));
  for (int64_t row = begin; row < end; row++) {
    int current = (int)((row - begin) & 1);
    if (k->softmax_factors(block_max, block_sum, blocks, args->scale, factors[current]) ==
        -INFINITY) {
      /* every score -inf: zeros; a NaN (ignored by the max) wins */
      float fill = has_nan(x, width) ? NAN : 0.0f;
      for (int64_t i = 0; i < width; i++)
        e[current][i] = fill;
      for (int64_t b = 0; b < blocks; b++)
        factors[current][b] = 1.0f;
    }
    x = row + 1 < end ? f32_row(&args->x, row + 1) : NULL;
    k->softmax_step(f32_row(&args->y, row), e[current], factors[current], width, job->stream, x,
                    args->scale, e[1 - current], block_max, block_sum,
                    x ? plan_ahead(&plan, &args->x, NULL, row + 1, end) : NULL);
  }
  if (job->stream)
    stream_fence(job->rows.level);
}

/* 16-bit rows, pipelined: the current row as f32 in one scratch row, its
 * exponentials in a third, and the next row widened (and its max taken) in
 * the loop that writes this row's y. */
static void softmax_direct16(const softmax_job *job, int64_t begin, int64_t end, int worker) {
  const tsr_softmax_args *args = job->args;
  const row_kernels *k = job->rows.kernels;
  const int64_t width = job->rows.width;
  const int32_t dtype = args->x.dtype;
  float *scratch = worker_scratch(&job->rows, worker);
  float *rows_f32[2] = {scratch, scratch + width}, *e = scratch + 2 * width;
  row_ahead plan;
  float max = k->sm16_step(NULL, NULL, 0.0f, width, 0, half_row(&args->x, begin), rows_f32[0],
                           dtype, plan_ahead(&plan, &args->x, NULL, begin, end));
  for (int64_t row = begin; row < end; row++) {
    const float *x = rows_f32[(row - begin) & 1];
    float factor = softmax_exponentials(k, e, x, args->scale, max, width);
    const uint16_t *next = row + 1 < end ? half_row(&args->x, row + 1) : NULL;
    max = k->sm16_step((uint16_t *)half_row(&args->y, row), e, factor, width, job->stream, next,
                       rows_f32[(row + 1 - begin) & 1], dtype,
                       plan_ahead(&plan, &args->x, NULL, row + 1, end));
  }
  if (job->stream)
    stream_fence(job->rows.level);
}

static void softmax_range(void *context, int64_t begin, int64_t end, int worker) {
  const softmax_job *job = context;
  if (job->direct) {
    softmax_direct(job, begin, end, worker);
    return;
  }
  if (job->direct16) {
    softmax_direct16(job, begin, end, worker);
    return;
  }
  const tsr_softmax_args *args = job->args;
  const row_kernels *k = job->rows.kernels;
  const int64_t width = job->rows.width;
  const float scale = args->scale;
  float *first = worker_scratch(&job->rows, worker), *second = first + width;
  for (int64_t row = begin; row < end; row++) {
    row_ahead plan;
    const row_ahead *ahead = plan_ahead(&plan, &args->x, NULL, row, end);
    const float *x = read_row(&job->rows, &args->x, row, first, ahead);
    float max = k->max_of(x, width, first_pass_ahead(&args->x, ahead));
    float *y = output_row(&args->y, row, second);
    /* The exponentials go to scratch so that y is written once. */
    float factor = softmax_exponentials(k, second, x, scale, max, width);
    k->scale(y, second, factor, NULL, width, job->stream);
    finish_row(&job->rows, &args->y, row, y, job->stream);
  }
  if (job->stream)
    stream_fence(job->rows.level);
}

tsr_status cpu_softmax_run(const cpu_exec *exec, const tsr_softmax_args *args) {
  int64_t width = args->x.shape[args->x.rank - 1];
  int64_t rows = tsr_plugin_row_count(&args->x);
  if (rows == 0 || width == 0)
    return TSR_OK;
  softmax_job job = {.args = args};
  /* softmax_direct16: two f32 rows and the exponentials. */
  int64_t per_worker = softmax_direct_floats(width);
  if (per_worker < 3 * width)
    per_worker = 3 * width;
  if (!row_job_init(&job.rows, exec, width, per_worker, 0, "cannot allocate softmax scratch"))
    return TSR_ERROR_OUT_OF_MEMORY;
  job.stream = should_stream(rows * width, args->y.dtype);
  const tsr_plugin_tensor *tensors[2] = {&args->x, &args->y};
  job.direct = job.rows.kernels->softmax_step && all_rows_f32(tensors, 2);
  job.direct16 = job.rows.kernels->sm16_step && half_rows(&args->x, &args->y);
  cpu_pool_parallel_for(exec->pool, rows, row_grain(width), softmax_range, &job);
  free(job.rows.scratch);
  return TSR_OK;
}

/* ---- cross-entropy ---- */

typedef struct bad_target {
  int64_t row; /* first bad row this worker saw; -1 when none */
  int64_t target;
  int64_t count;
} bad_target;

typedef struct cross_entropy_job {
  row_job rows;
  const tsr_cross_entropy_args *args;
  bad_target *bad; /* per worker */
  int direct;
} cross_entropy_job;

/* Writes row `row`'s loss (and lse) from its log-sum-exp; records a target
 * outside [0, vocab) that is not ignore_index. */
static void cross_entropy_finish(const cross_entropy_job *job, bad_target *bad, int64_t row,
                                 const float *x, double lse) {
  const tsr_cross_entropy_args *args = job->args;
  const int64_t vocab = job->rows.width;
  int64_t target =
      ((const int32_t *)cpu_tensor_base(&args->targets))[row * args->targets.strides[0]];
  float value;
  if (target == args->ignore_index) {
    value = 0.0f;
  } else if (target < 0 || target >= vocab) {
    value = NAN;
    if (bad->row < 0) {
      bad->row = row;
      bad->target = target;
    }
    bad->count++;
  } else {
    value = (float)(lse - (double)x[target]);
  }
  ((float *)cpu_tensor_base(&args->loss))[row * args->loss.strides[0]] = value;
  if (args->lse.buffer)
    ((float *)cpu_tensor_base(&args->lse))[row * args->lse.strides[0]] = (float)lse;
}

/* log sum e^x from the row's max and the sum of e^(x - max): all -inf gives
 * -inf (log 0), a +inf logit +inf, and a NaN logit NaN. */
static double log_sum_exp(float max, double sum, const float *x, int64_t vocab) {
  if (isinf(max))
    return has_nan(x, vocab) ? NAN : (double)max;
  return (double)max + log(sum);
}

static void cross_entropy_direct(const cross_entropy_job *job, int64_t begin, int64_t end,
                                 int worker) {
  const tsr_cross_entropy_args *args = job->args;
  const row_kernels *k = job->rows.kernels;
  const int64_t vocab = job->rows.width;
  row_ahead plan;
  const float *x = f32_row(&args->logits, begin);
  float max = k->max_of(x, vocab, plan_ahead(&plan, &args->logits, NULL, begin, end));
  for (int64_t row = begin; row < end; row++) {
    double sum;
    float next_max = 0.0f;
    const float *next = row + 1 < end ? f32_row(&args->logits, row + 1) : NULL;
    if (next)
      sum = k->xe_step(x, max, vocab, next, &next_max,
                       plan_ahead(&plan, &args->logits, NULL, row + 1, end));
    else
      sum = k->exp_sum(NULL, x, 1.0f, max, vocab);
    cross_entropy_finish(job, &job->bad[worker], row, x, log_sum_exp(max, sum, x, vocab));
    x = next;
    max = next_max;
  }
}

static void cross_entropy_range(void *context, int64_t begin, int64_t end, int worker) {
  const cross_entropy_job *job = context;
  if (job->direct) {
    cross_entropy_direct(job, begin, end, worker);
    return;
  }
  const tsr_cross_entropy_args *args = job->args;
  const row_kernels *k = job->rows.kernels;
  const int64_t vocab = job->rows.width;
  float *scratch = worker_scratch(&job->rows, worker);
  for (int64_t row = begin; row < end; row++) {
    row_ahead plan;
    const row_ahead *ahead = plan_ahead(&plan, &args->logits, NULL, row, end);
    const float *x = read_row(&job->rows, &args->logits, row, scratch, ahead);
    float max = k->max_of(x, vocab, first_pass_ahead(&args->logits, ahead));
    /* exp(x - inf) is NaN; the sum is not used then */
    double sum = isinf(max) ? 0.0 : k->exp_sum(NULL, x, 1.0f, max, vocab);
    cross_entropy_finish(job, &job->bad[worker], row, x, log_sum_exp(max, sum, x, vocab));
  }
}

tsr_status cpu_cross_entropy_run(const cpu_exec *exec, const tsr_cross_entropy_args *args) {
  int64_t vocab = args->logits.shape[args->logits.rank - 1];
  int64_t rows = tsr_plugin_row_count(&args->logits);
  if (rows == 0)
    return TSR_OK;
  int threads = cpu_pool_threads(exec->pool);
  if (threads < 1)
    threads = 1;
  cross_entropy_job job = {.args = args};
  if (!row_job_init(&job.rows, exec, vocab, vocab, 0, "cannot allocate cross-entropy scratch"))
    return TSR_ERROR_OUT_OF_MEMORY;
  job.bad = calloc((size_t)threads, sizeof *job.bad);
  if (!job.bad) {
    free(job.rows.scratch);
    set_error(exec, "cannot allocate cross-entropy scratch", (size_t)threads * sizeof *job.bad);
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  for (int i = 0; i < threads; i++)
    job.bad[i].row = -1;
  const tsr_plugin_tensor *tensors[1] = {&args->logits};
  job.direct = job.rows.kernels->xe_step && all_rows_f32(tensors, 1);
  cpu_pool_parallel_for(exec->pool, rows, row_grain(vocab), cross_entropy_range, &job);

  bad_target first = {-1, 0, 0};
  for (int i = 0; i < threads; i++) {
    if (job.bad[i].row >= 0 && (first.row < 0 || job.bad[i].row < first.row)) {
      first.row = job.bad[i].row;
      first.target = job.bad[i].target;
    }
    first.count += job.bad[i].count;
  }
  free(job.rows.scratch);
  free(job.bad);
  if (first.row < 0)
    return TSR_OK;
  if (exec->error && exec->error_capacity > 0)
    snprintf(exec->error, exec->error_capacity,
             "targets[%lld] = %lld is outside [0, %lld) and is not ignore_index (%lld); "
             "%lld row(s) have such targets and their loss is NaN",
             (long long)first.row, (long long)first.target, (long long)vocab,
             (long long)args->ignore_index, (long long)first.count);
  return TSR_ERROR_INVALID_VALUE;
}
