/* SPDX-License-Identifier: Apache-2.0 */
/* The row ops' array kernels in AVX-512 (F/BW/VL/DQ), with the fused steps
 * that overlap one row's last pass with the next row's first (norm.h). */
#include "norm.h"

#if CPU_KERNELS_HAVE_AVX2

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
    accumulate_squares_pd_avx512(&low, &high, d);
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
    accumulate_squares_pd_avx512(&low, &high, v);
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
  accumulate_squares_pd_avx512(&c->low, &c->high, next);
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

/* 16 lanes of a rows16 pass at i (mask m): the squares of `squared` into
 * *sum (f32: a block's lane sums, see rms16_pass), y = x * f (* weight). */
TARGET_AVX512 static ALWAYS_INLINE void rms16_lanes(uint16_t *y, const uint16_t *x, __m512 f,
                                                    const float *weight, const uint16_t *squared,
                                                    int64_t i, __mmask16 m, bool full_stream,
                                                    int32_t dtype, bool hw_bf16, bool sum,
                                                    bool write, bool weighted, __m512 *acc) {
  if (sum) {
    __m512 n = load16_half_avx512(squared + i, dtype, m);
    *acc = _mm512_fmadd_ps(n, n, *acc);
  }
  if (write) {
    __m512 v = _mm512_mul_ps(load16_half_avx512(x + i, dtype, m), f);
    if (weighted)
      v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, weight + i));
    __m256i h = hw_bf16 ? to_bf16_hw16_avx512(v) : to_half16_avx512(v, dtype);
    if (full_stream)
      _mm256_stream_si256((__m256i *)(y + i), h);
    else
      _mm256_mask_storeu_epi16(y + i, m, h);
  }
}

enum { RMS16_BLOCK = 512 }; /* elements whose squares are summed in f32 */

/* One rms16_step pass with its choices fixed (ALWAYS_INLINE: each caller
 * below gets a loop without tests). Squares are summed in f32 over blocks
 * of 512 (32 terms a lane, two accumulators: a relative error of 1e-6 at
 * worst), the blocks in double; a block whose f32 sum is outside
 * [2^-100, 2^100] again in double. 32 elements a step, one prefetch a line. */
TARGET_AVX512 static ALWAYS_INLINE double rms16_pass(uint16_t *y, const uint16_t *x, float factor,
                                                     const float *weight, int64_t count, int stream,
                                                     const uint16_t *squared, int32_t dtype,
                                                     bool hw_bf16, const row_ahead *ahead, bool sum,
                                                     bool write, bool weighted) {
  const __m512 f = _mm512_set1_ps(factor);
  const bool streaming = write && stream && ((uintptr_t)y & 31u) == 0;
  __m512d low = _mm512_setzero_pd(), high = low;
  for (int64_t b = 0; b < count; b += RMS16_BLOCK) {
    const int64_t end = count - b < RMS16_BLOCK ? count : b + RMS16_BLOCK;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
    int64_t i = b;
    for (; i + 32 <= end; i += 32) {
      prefetch_ahead(ahead, i);
      rms16_lanes(y, x, f, weight, squared, i, 0xffff, streaming, dtype, hw_bf16, sum, write,
                  weighted, &acc0);
      rms16_lanes(y, x, f, weight, squared, i + 16, 0xffff, streaming, dtype, hw_bf16, sum, write,
                  weighted, &acc1);
    }
    for (; i < end; i += 16) {
      prefetch_ahead(ahead, i);
      __mmask16 m = lanes_avx512(end - i);
      rms16_lanes(y, x, f, weight, squared, i, m, streaming && m == 0xffff, dtype, hw_bf16, sum,
                  write, weighted, &acc0);
    }
    if (!sum)
      continue;
    __m512 block = _mm512_add_ps(acc0, acc1);
    float total = _mm512_reduce_add_ps(block);
    if (total >= 0x1p-100f && total <= 0x1p100f) {
      accumulate_pd_avx512(&low, &high, block);
      continue;
    }
    /* a square may have overflowed or underflowed f32 (16-bit rows have
     * f32's range): the block again in double */
    for (int64_t j = b; j < end; j += 16) {
      __mmask16 m = lanes_avx512(end - j);
      __m512 n = load16_half_avx512(squared + j, dtype, m);
      accumulate_squares_pd_avx512(&low, &high, n);
    }
  }
  return sum ? _mm512_reduce_add_pd(_mm512_add_pd(low, high)) : 0.0;
}

/* The passes of one dtype (and bf16 rounding), chosen once a row. */
TARGET_AVX512 static ALWAYS_INLINE double
rms16_dtype(uint16_t *y, const uint16_t *x, float factor, const float *weight, int64_t count,
            int stream, const uint16_t *next, int32_t dtype, bool hw, const row_ahead *ahead) {
  if (!y)
    return rms16_pass(NULL, NULL, 0.0f, NULL, count, 0, x, dtype, hw, ahead, true, false, false);
  if (next && weight)
    return rms16_pass(y, x, factor, weight, count, stream, next, dtype, hw, ahead, true, true,
                      true);
  if (next)
    return rms16_pass(y, x, factor, NULL, count, stream, next, dtype, hw, ahead, true, true, false);
  if (weight)
    return rms16_pass(y, x, factor, weight, count, stream, NULL, dtype, hw, ahead, false, true,
                      true);
  return rms16_pass(y, x, factor, NULL, count, stream, NULL, dtype, hw, ahead, false, true, false);
}

/* See row_kernels.rms16_step. Both rows are read as 16-lane 16-bit loads
 * widened in registers, and y's vectors are streamed when they fill an
 * aligned 32 bytes: the next row is read in the same loop that writes y, as
 * a copy reads and writes (the f32 rows' fused step, without scratch). */
TARGET_AVX512 static double rms16_step_avx512(uint16_t *y, const uint16_t *x, float factor,
                                              const float *weight, int64_t count, int stream,
                                              const uint16_t *next, int32_t dtype,
                                              const row_ahead *ahead) {
  if (dtype == TSR_DTYPE_F16)
    return rms16_dtype(y, x, factor, weight, count, stream, next, TSR_DTYPE_F16, false, ahead);
  if (cpu_isa_includes(cpu_isa_active(), CPU_ISA_AVX512_BF16))
    return rms16_dtype(y, x, factor, weight, count, stream, next, TSR_DTYPE_BF16, true, ahead);
  return rms16_dtype(y, x, factor, weight, count, stream, next, TSR_DTYPE_BF16, false, ahead);
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

const row_kernels cpu_norm_kernels_avx512 = {.sum = sum_avx512,
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
