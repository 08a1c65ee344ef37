/* SPDX-License-Identifier: Apache-2.0 */
/* AVX-512 GEMM micro-kernels: MR x 32 blocks (two zmm vectors of B per k),
 * the A value broadcast from memory into the FMA, MR x 2 accumulators in
 * registers. f32 strips use vfmadd231ps; bf16 pair strips use vdpbf16ps
 * (AVX512_BF16), two k per instruction. The epilogue (alpha, partial sums of
 * earlier K slices, beta * C, bias, relu, conversion to D's dtype) runs on
 * the accumulators with masked loads and stores for partial blocks; other
 * activations and strided outputs go through gemm_store_block. */
#include "gemm_kernels.h"

#if CPU_HAVE_X86_KERNELS
#include <immintrin.h>

/* ------------------------------------------------------------------------ */
/* Epilogue                                                                  */
/* ------------------------------------------------------------------------ */

static GEMM_ALWAYS_INLINE GEMM_TARGET_AVX512 __mmask16 columns_mask(int cols) {
  return cols >= 16 ? (__mmask16)0xffff : cols <= 0 ? (__mmask16)0 : (__mmask16)((1u << cols) - 1u);
}

/* 16 values of a row of any dtype as f32 (lanes outside `mask` are 0). */
static GEMM_ALWAYS_INLINE GEMM_TARGET_AVX512 __m512 load16(const char *p, int32_t dtype,
                                                           __mmask16 mask) {
  if (dtype == TSR_DTYPE_F32)
    return _mm512_maskz_loadu_ps(mask, p);
  __m256i half = _mm256_maskz_loadu_epi16(mask, p);
  if (dtype == TSR_DTYPE_F16)
    return _mm512_cvtph_ps(half);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16));
}

/* f32 to bf16 rounding to nearest even, NaN kept quiet (as tsr_f32_to_bf16). */
static GEMM_ALWAYS_INLINE GEMM_TARGET_AVX512 __m256i to_bf16(__m512 v) {
  __m512i x = _mm512_castps_si512(v);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb), 16);
  __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rounded, nan, quiet));
}

static GEMM_ALWAYS_INLINE GEMM_TARGET_AVX512 void store16(char *p, int32_t dtype, __mmask16 mask,
                                                          __m512 v) {
  if (dtype == TSR_DTYPE_F32)
    _mm512_mask_storeu_ps(p, mask, v);
  else if (dtype == TSR_DTYPE_F16)
    _mm256_mask_storeu_epi16(p, mask, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  else
    _mm256_mask_storeu_epi16(p, mask, to_bf16(v));
}

/* Row i of the block (columns 0-15 in v0, 16-31 in v1) through the epilogue. */
static GEMM_ALWAYS_INLINE GEMM_TARGET_AVX512 void
store_row(const gemm_tile_out *o, int i, __m512 v0, __m512 v1, __mmask16 m0, __mmask16 m1) {
  __m512 alpha = _mm512_set1_ps(o->alpha);
  v0 = _mm512_mul_ps(v0, alpha);
  v1 = _mm512_mul_ps(v1, alpha);
  if (o->prior) {
    const float *p = o->prior + i * o->prior_ld;
    v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, p));
    v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, p + 16));
  }
  if (o->c) {
    int64_t bytes = gemm_dtype_bytes(o->c_dtype);
    const char *p = o->c + i * o->c_rs * bytes;
    __m512 beta = _mm512_set1_ps(o->beta);
    v0 = _mm512_fmadd_ps(beta, load16(p, o->c_dtype, m0), v0);
    v1 = _mm512_fmadd_ps(beta, load16(p + 16 * bytes, o->c_dtype, m1), v1);
  }
  if (o->bias) {
    v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, o->bias));
    v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, o->bias + 16));
  }
  if (o->activation == TSR_ACT_RELU) {
    /* max(0, v) returns v when v is NaN (the second operand). */
    v0 = _mm512_max_ps(_mm512_setzero_ps(), v0);
    v1 = _mm512_max_ps(_mm512_setzero_ps(), v1);
  }
  int64_t bytes = gemm_dtype_bytes(o->dst_dtype);
  char *d = o->dst + i * o->dst_rs * bytes;
  store16(d, o->dst_dtype, m0, v0);
  store16(d + 16 * bytes, o->dst_dtype, m1, v1);
}

/* Brings the block's rows of prior / C / D towards L1 while the k loop
 * runs, so that the epilogue does not wait on memory. */
static GEMM_ALWAYS_INLINE GEMM_TARGET_AVX512 void prefetch_outputs(const gemm_tile_out *o) {
  int64_t dst_row = o->dst_rs * gemm_dtype_bytes(o->dst_dtype);
  for (int i = 0; i < o->rows; i++) {
    if (o->prior) {
      _mm_prefetch((const char *)(o->prior + i * o->prior_ld), _MM_HINT_T0);
      _mm_prefetch((const char *)(o->prior + i * o->prior_ld + 16), _MM_HINT_T0);
    }
    if (o->c)
      _mm_prefetch(o->c + i * o->c_rs * gemm_dtype_bytes(o->c_dtype), _MM_HINT_T0);
    _mm_prefetch(o->dst + i * dst_row, _MM_HINT_T0);
    _mm_prefetch(o->dst + i * dst_row + 63, _MM_HINT_T0);
  }
}

/* A block in memory through the same epilogue, 32 columns at a time. */
GEMM_TARGET_AVX512 void cpu_gemm_store_block_avx512(const gemm_tile_out *o, const float *block,
                                                    int64_t ld) {
  if (!o->vector_store) {
    gemm_store_block(o, block, ld);
    return;
  }
  gemm_tile_out part = *o;
  int64_t dst_bytes = gemm_dtype_bytes(o->dst_dtype);
  int64_t c_bytes = o->c ? gemm_dtype_bytes(o->c_dtype) : 0;
  for (int j = 0; j < o->cols; j += 32) {
    part.cols = o->cols - j;
    __mmask16 m0 = columns_mask(part.cols), m1 = columns_mask(part.cols - 16);
    part.prior = o->prior ? o->prior + j : NULL;
    part.c = o->c ? o->c + j * c_bytes : NULL;
    part.bias = o->bias ? o->bias + j : NULL;
    part.dst = o->dst + j * dst_bytes;
    for (int i = 0; i < o->rows; i++)
      store_row(&part, i, _mm512_maskz_loadu_ps(m0, block + i * ld + j),
                _mm512_maskz_loadu_ps(m1, block + i * ld + j + 16), m0, m1);
  }
}

/* ------------------------------------------------------------------------ */
/* Packing                                                                   */
/* ------------------------------------------------------------------------ */

/* In-register transpose of a 16 x 16 block of 32-bit lanes: r[i] lane j
 * becomes r[j] lane i. */
static GEMM_ALWAYS_INLINE GEMM_TARGET_AVX512 void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    r[i + 1] =
        _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    r[i + 2] = _mm512_castpd_ps(
        _mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    r[i + 3] = _mm512_castpd_ps(
        _mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
  }
  /* r[4q + s] now holds, in each 128-bit lane L, elements (4q..4q+3, 4L + s)
   * of the input; two shuffles of 128-bit lanes gather them. */
  for (int s = 0; s < 4; s++) {
    __m512 a = _mm512_shuffle_f32x4(r[s], r[4 + s], 0x88); /* lanes 0,2 of each */
    __m512 b = _mm512_shuffle_f32x4(r[s], r[4 + s], 0xdd); /* lanes 1,3 */
    __m512 c = _mm512_shuffle_f32x4(r[8 + s], r[12 + s], 0x88);
    __m512 d = _mm512_shuffle_f32x4(r[8 + s], r[12 + s], 0xdd);
    t[s] = _mm512_shuffle_f32x4(a, c, 0x88);      /* column s */
    t[8 + s] = _mm512_shuffle_f32x4(a, c, 0xdd);  /* column 8 + s */
    t[4 + s] = _mm512_shuffle_f32x4(b, d, 0x88);  /* column 4 + s */
    t[12 + s] = _mm512_shuffle_f32x4(b, d, 0xdd); /* column 12 + s */
  }
  for (int i = 0; i < 16; i++)
    r[i] = t[i];
}

/* 16 32-bit lanes starting at p: f32 values of a dtype (mask: lanes read),
 * or raw bf16 pairs (pairs = true). */
static GEMM_ALWAYS_INLINE GEMM_TARGET_AVX512 __m512 load_lanes(const char *p, int32_t dtype,
                                                               bool pairs, __mmask16 mask) {
  if (pairs)
    return _mm512_castsi512_ps(_mm512_maskz_loadu_epi32(mask, p));
  return load16(p, dtype, mask);
}

/* Rows (or columns) of a matrix as 32-bit lanes, transposed into a packed
 * strip: source vector i (i < count) starts at base + i * stride_bytes and
 * holds `length` lanes; lane t of vector i goes to dst[t * ld + i], `width`
 * lanes per t (vectors count..width-1 give zeros). */
static GEMM_ALWAYS_INLINE GEMM_TARGET_AVX512 void
transpose_into(const char *base, int64_t stride_bytes, int count, int64_t length, int32_t dtype,
               bool pairs, int width, int64_t ld, float *dst) {
  const int64_t lane_bytes = pairs ? 4 : gemm_dtype_bytes(dtype);
  const __mmask16 store_mask = columns_mask(width);
  for (int64_t t0 = 0; t0 < length; t0 += 16) {
    __mmask16 load_mask = columns_mask((int)(length - t0 < 16 ? length - t0 : 16));
    __m512 r[16];
    for (int i = 0; i < 16; i++)
      r[i] = i < count
                 ? load_lanes(base + i * stride_bytes + t0 * lane_bytes, dtype, pairs, load_mask)
                 : _mm512_setzero_ps();
    transpose16(r);
    int64_t rows_out = length - t0 < 16 ? length - t0 : 16;
    for (int t = 0; t < rows_out; t++)
      _mm512_mask_storeu_ps(dst + (t0 + t) * ld, store_mask, r[t]);
  }
}

GEMM_TARGET_AVX512 bool cpu_gemm_pack_a_avx512(const gemm_operand *a, int64_t row0, int rows,
                                               int64_t k0, int64_t kc, int mr, int format,
                                               void *dst) {
  if (mr > 16 || rows > mr)
    return false;
  const int64_t eb = gemm_dtype_bytes(a->dtype);
  if (format == GEMM_FORMAT_F32) {
    if (a->cs == 1) { /* rows contiguous along k: transpose */
      transpose_into(gemm_at(a, row0, k0), a->rs * eb, rows, kc, a->dtype, false, mr, mr, dst);
      return true;
    }
    if (a->rs == 1) { /* columns contiguous: one masked copy per k */
      __mmask16 load_mask = columns_mask(rows), store_mask = columns_mask(mr);
      float *out = dst;
      for (int64_t k = 0; k < kc; k++)
        _mm512_mask_storeu_ps(out + k * mr, store_mask,
                              load16(gemm_at(a, row0, k0 + k), a->dtype, load_mask));
      return true;
    }
    return false;
  }
  /* bf16 pairs from rows contiguous along k: 32-bit lanes are pairs. */
  if (a->dtype != TSR_DTYPE_BF16 || a->cs != 1)
    return false;
  const int64_t full = kc / 2;
  uint32_t *out = dst;
  transpose_into(gemm_at(a, row0, k0), a->rs * eb, rows, full, a->dtype, true, mr, mr,
                 (float *)out);
  if (kc % 2) {
    for (int r = 0; r < mr; r++)
      out[full * mr + r] = r < rows ? *(const uint16_t *)gemm_at(a, row0 + r, k0 + kc - 1) : 0u;
  }
  return true;
}

GEMM_TARGET_AVX512 bool cpu_gemm_pack_b_avx512(const gemm_operand *b, int64_t k0, int64_t kc,
                                               int64_t col0, int cols, int nr, int format,
                                               void *dst) {
  if (nr != 32 || cols > nr)
    return false;
  const int64_t eb = gemm_dtype_bytes(b->dtype);
  const __mmask16 m0 = columns_mask(cols), m1 = columns_mask(cols - 16);
  if (format == GEMM_FORMAT_F32) {
    float *out = dst;
    if (b->cs == 1) { /* rows contiguous: two vectors per k */
      for (int64_t k = 0; k < kc; k++) {
        const char *row = gemm_at(b, k0 + k, col0);
        _mm512_store_ps(out + k * 32, load16(row, b->dtype, m0));
        _mm512_store_ps(out + k * 32 + 16, load16(row + 16 * eb, b->dtype, m1));
      }
      return true;
    }
    if (b->rs == 1) { /* columns contiguous along k: transpose 16 columns at a time */
      for (int half = 0; half < 2; half++) {
        int count = cols - 16 * half;
        count = count < 0 ? 0 : count > 16 ? 16 : count;
        transpose_into(gemm_at(b, k0, col0 + 16 * half), b->cs * eb, count, kc, b->dtype, false, 16,
                       32, out + 16 * half);
      }
      return true;
    }
    return false;
  }
  if (b->dtype != TSR_DTYPE_BF16)
    return false;
  uint32_t *out = dst;
  const int64_t pairs = (kc + 1) / 2;
  if (b->cs == 1) { /* interleave rows k and k + 1, 16-bit lanes */
    const __m512i first = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
    const __m512i second = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
    const __mmask32 mask = cols >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << cols) - 1u);
    for (int64_t p = 0; p < pairs; p++) {
      __m512i even = _mm512_maskz_loadu_epi16(mask, gemm_at(b, k0 + 2 * p, col0));
      __m512i odd = 2 * p + 1 < kc
                        ? _mm512_maskz_loadu_epi16(mask, gemm_at(b, k0 + 2 * p + 1, col0))
                        : _mm512_setzero_si512();
      __m512i lo = _mm512_unpacklo_epi16(even, odd), hi = _mm512_unpackhi_epi16(even, odd);
      _mm512_store_si512(out + p * 32, _mm512_permutex2var_epi64(lo, first, hi));
      _mm512_store_si512(out + p * 32 + 16, _mm512_permutex2var_epi64(lo, second, hi));
    }
    return true;
  }
  return false;
}

/* ------------------------------------------------------------------------ */
/* Micro-kernels                                                             */
/* ------------------------------------------------------------------------ */

#define ROWS8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define ROWS12(X) ROWS8(X) X(8) X(9) X(10) X(11)
#define ROWS14(X) ROWS12(X) X(12) X(13)

#define DECLARE_ACC(i) __m512 acc##i##_0 = _mm512_setzero_ps(), acc##i##_1 = _mm512_setzero_ps();
#define FMA_F32(i)                                                                                 \
  {                                                                                                \
    __m512 a_i = _mm512_set1_ps(a[i]);                                                             \
    acc##i##_0 = _mm512_fmadd_ps(a_i, b0, acc##i##_0);                                             \
    acc##i##_1 = _mm512_fmadd_ps(a_i, b1, acc##i##_1);                                             \
  }
#define DOT_BF16(i)                                                                                \
  {                                                                                                \
    __m512bh a_i = (__m512bh)_mm512_set1_epi32((int)a[i]);                                         \
    acc##i##_0 = _mm512_dpbf16_ps(acc##i##_0, a_i, b0);                                            \
    acc##i##_1 = _mm512_dpbf16_ps(acc##i##_1, a_i, b1);                                            \
  }
#define STORE_ROW(i)                                                                               \
  if (i < o->rows)                                                                                 \
    store_row(o, i, acc##i##_0, acc##i##_1, m0, m1);
#define SPILL_ROW(i)                                                                               \
  _mm512_storeu_ps(block + i * 32, acc##i##_0);                                                    \
  _mm512_storeu_ps(block + i * 32 + 16, acc##i##_1);

#define EPILOGUE(MR, ROWS)                                                                         \
  if (o->vector_store) {                                                                           \
    __mmask16 m0 = columns_mask(o->cols), m1 = columns_mask(o->cols - 16);                         \
    ROWS(STORE_ROW)                                                                                \
  } else {                                                                                         \
    float block[MR * 32];                                                                          \
    ROWS(SPILL_ROW)                                                                                \
    gemm_store_block(o, block, 32);                                                                \
  }

#define DEFINE_F32_KERNEL(MR, ROWS)                                                                \
  GEMM_TARGET_AVX512 static void f32_##MR##x32(int64_t kc, const void *a_pack, const void *b_pack, \
                                               const gemm_tile_out *o) {                           \
    const float *a = a_pack;                                                                       \
    const float *b = b_pack;                                                                       \
    ROWS(DECLARE_ACC)                                                                              \
    prefetch_outputs(o);                                                                           \
    for (int64_t k = 0; k < kc; k++) {                                                             \
      __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);                                  \
      ROWS(FMA_F32)                                                                                \
      a += MR;                                                                                     \
      b += 32;                                                                                     \
    }                                                                                              \
    EPILOGUE(MR, ROWS)                                                                             \
  }

#define DEFINE_BF16_KERNEL(MR, ROWS)                                                               \
  GEMM_TARGET_AVX512_BF16 static void bf16_##MR##x32(int64_t kc, const void *a_pack,               \
                                                     const void *b_pack, const gemm_tile_out *o) { \
    const uint32_t *a = a_pack;                                                                    \
    const uint32_t *b = b_pack;                                                                    \
    ROWS(DECLARE_ACC)                                                                              \
    prefetch_outputs(o);                                                                           \
    for (int64_t pair = 0; pair < (kc + 1) / 2; pair++) {                                          \
      __m512bh b0 = (__m512bh)_mm512_load_si512(b), b1 = (__m512bh)_mm512_load_si512(b + 16);      \
      ROWS(DOT_BF16)                                                                               \
      a += MR;                                                                                     \
      b += 32;                                                                                     \
    }                                                                                              \
    EPILOGUE(MR, ROWS)                                                                             \
  }

DEFINE_F32_KERNEL(14, ROWS14)
DEFINE_F32_KERNEL(12, ROWS12)
DEFINE_F32_KERNEL(8, ROWS8)
DEFINE_BF16_KERNEL(14, ROWS14)
DEFINE_BF16_KERNEL(12, ROWS12)
DEFINE_BF16_KERNEL(8, ROWS8)

const gemm_kernel cpu_gemm_avx512_kernels[] = {
    {CPU_ISA_AVX512, GEMM_FORMAT_F32, 14, 32, f32_14x32},
    {CPU_ISA_AVX512, GEMM_FORMAT_F32, 12, 32, f32_12x32},
    {CPU_ISA_AVX512, GEMM_FORMAT_F32, 8, 32, f32_8x32},
    {CPU_ISA_AVX512, GEMM_FORMAT_BF16_PAIRS, 14, 32, bf16_14x32},
    {CPU_ISA_AVX512, GEMM_FORMAT_BF16_PAIRS, 12, 32, bf16_12x32},
    {CPU_ISA_AVX512, GEMM_FORMAT_BF16_PAIRS, 8, 32, bf16_8x32},
};
const int cpu_gemm_avx512_kernel_count =
    (int)(sizeof cpu_gemm_avx512_kernels / sizeof cpu_gemm_avx512_kernels[0]);

#endif /* CPU_HAVE_X86_KERNELS */
