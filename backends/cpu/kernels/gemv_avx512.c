/* SPDX-License-Identifier: Apache-2.0 */
/* The gemv path's AVX-512 kernels: B's rows (bf16 as even/odd column pairs)
 * or columns streamed once into f32 partial rows (gemv.c describes the path). */
#include "gemv.h"

#if CPU_HAVE_X86_KERNELS

/* ------------------------------------------------------------------------ */
/* AVX-512 kernels                                                           */
/* ------------------------------------------------------------------------ */

static GEMM_ALWAYS_INLINE GEMM_TARGET_AVX512 __mmask16 lanes_below(int64_t count) {
  return count >= 16  ? (__mmask16)0xffff
         : count <= 0 ? (__mmask16)0
                      : (__mmask16)((1u << count) - 1u);
}

/* 16 elements of B (lanes in `mask`) as f32. */
static GEMM_ALWAYS_INLINE GEMM_TARGET_AVX512 __m512 load_avx512(const char *p, int dtype,
                                                                __mmask16 mask) {
  if (dtype == TSR_DTYPE_F32)
    return _mm512_maskz_loadu_ps(mask, p);
  __m256i half = _mm256_maskz_loadu_epi16(mask, p);
  if (dtype == TSR_DTYPE_F16)
    return _mm512_cvtph_ps(half);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16));
}

/* P[i][j] += sum over k of a[i][k] * B[k][j], B with unit column stride,
 * four rows of B at a time: each step loads 64 columns of four rows and
 * updates each partial row once for all four, so P's loads and stores (in
 * L1) are a quarter of B's. One row at a time they were as many as B's and
 * held the stream to ~30 GB/s on Zen 5 with 2 threads, against ~45 GB/s
 * four at a time, as fast as a plain read in the same harness. The four rows
 * are a quarter of the thread's rows apart: four sequential streams far
 * apart read faster than four a row apart (bf16 GEMV +25%, f32 +5-10%;
 * docs/PERFORMANCE.md). The partial rows stay in L1: when m rows of P over all columns
 * would not fit, columns go in chunks of `chunk` and each chunk walks all the
 * rows. Software prefetch 2 KiB ahead in each stream (or the next rows'
 * chunk).
 * bf16 is widened with one shift (even columns) and one mask (odd columns)
 * of a 32-element load, no shuffles: P then holds each group of 32 columns
 * as [16 even][16 odd], which gemv_finish puts back in order. */

/* 64 columns of one row of B (`lanes` of them valid, for the tail) as f32. */
static GEMM_ALWAYS_INLINE GEMM_TARGET_AVX512 void load_row64_avx512(const char *at, int64_t lanes,
                                                                    const int dtype, __m512 b[4]) {
  if (dtype == TSR_DTYPE_BF16) {
    const __m512i odd_half = _mm512_set1_epi32((int)0xffff0000u);
    for (int h = 0; h < 2; h++) {
      int64_t left = lanes - 32 * h;
      __mmask32 mask = left >= 32  ? (__mmask32)0xffffffffu
                       : left <= 0 ? (__mmask32)0
                                   : (__mmask32)((1u << left) - 1u);
      __m512i x = _mm512_maskz_loadu_epi16(mask, at + 64 * h);
      b[2 * h] = _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
      b[2 * h + 1] = _mm512_castsi512_ps(_mm512_and_si512(x, odd_half));
    }
  } else {
    const int64_t eb = gemm_dtype_bytes(dtype);
    for (int v = 0; v < 4; v++)
      b[v] = load_avx512(at + 16 * v * eb, dtype, lanes_below(lanes - 16 * v));
  }
}

/* P[i][j0 + 0..63] += sum over r < rows of a[i][k + r s] * B[k + r s][j0 + 0..63]
 * for i < m: 64 columns (`lanes` valid) of `rows` (1 or 4) rows of B, s rows
 * apart, that start at `at`, `distance` bytes apart. */
static GEMM_ALWAYS_INLINE GEMM_TARGET_AVX512 void
row_step_avx512(const char *at, int64_t distance, int64_t s, const int rows, const float *a_k,
                int64_t lda, float *P, int64_t ldp, int64_t m, int64_t lanes, const int dtype) {
  if (m == 1) {
    /* one partial row: B's vectors go straight into its four sums, so any
     * number of rows fits in registers */
    __m512 sum[4];
    for (int v = 0; v < 4; v++)
      sum[v] = _mm512_load_ps(P + 16 * v);
    for (int r = 0; r < rows; r++) {
      __m512 b[4], ar = _mm512_set1_ps(a_k[r * s]);
      load_row64_avx512(at + r * distance, lanes, dtype, b);
      for (int v = 0; v < 4; v++)
        sum[v] = _mm512_fmadd_ps(ar, b[v], sum[v]);
    }
    for (int v = 0; v < 4; v++)
      _mm512_store_ps(P + 16 * v, sum[v]);
    return;
  }
  __m512 b[4][4];
  for (int r = 0; r < rows; r++)
    load_row64_avx512(at + r * distance, lanes, dtype, b[r]);
  for (int64_t i = 0; i < m; i++) {
    __m512 ai[4];
    for (int r = 0; r < rows; r++)
      ai[r] = _mm512_set1_ps(a_k[i * lda + r * s]);
    float *out = P + i * ldp;
    for (int v = 0; v < 4; v++) {
      __m512 sum = _mm512_load_ps(out + 16 * v);
      for (int r = 0; r < rows; r++)
        sum = _mm512_fmadd_ps(ai[r], b[r][v], sum);
      _mm512_store_ps(out + 16 * v, sum);
    }
  }
}

/* Rows k, k + s, ..., k + (rows - 1) s of B over the columns [c0, c1). */
static GEMM_ALWAYS_INLINE GEMM_TARGET_AVX512 void
row_group_avx512(const gemv_job *job, int64_t k, int64_t s, const int rows, int64_t c0, int64_t c1,
                 int64_t ahead, float *P, const int dtype, const int64_t m) {
  const gemm_problem *p = job->p;
  const int64_t eb = gemm_dtype_bytes(dtype), distance = p->b.rs * eb * s;
  const char *row = gemm_at(&p->b, k, 0);
  const float *a_k = job->a + k;
  const int64_t full_end = c0 + (c1 - c0) / 64 * 64;
  int64_t j = c0;
  for (; j < full_end; j += 64) {
    const char *at = row + j * eb;
    for (int r = 0; r < rows; r++)
      for (int64_t line = 0; line < 64 * eb; line += 64)
        _mm_prefetch(at + r * distance + line + ahead, _MM_HINT_T0);
    row_step_avx512(at, distance, s, rows, a_k, job->lda, P + j, job->ldp, m, 64, dtype);
  }
  if (j < c1)
    row_step_avx512(row + j * eb, distance, s, rows, a_k, job->lda, P + j, job->ldp, m, c1 - j,
                    dtype);
}

static GEMM_ALWAYS_INLINE GEMM_TARGET_AVX512 void rows_avx512_dtype(const gemv_job *job, int64_t k0,
                                                                    int64_t k1, int64_t n0,
                                                                    int64_t n1, float *P,
                                                                    const int dtype, const int m1) {
  const gemm_problem *p = job->p;
  const int64_t m = m1 ? 1 : p->m;
  const int64_t row_bytes = p->b.rs * gemm_dtype_bytes(dtype);
  int64_t chunk = GEMV_L1_PARTIAL_BYTES / (4 * m) / 64 * 64;
  if (chunk < 64)
    chunk = 64;
  for (int64_t c0 = n0; c0 < n1; c0 += chunk) {
    const int64_t c1 = min64(n1, c0 + chunk);
    /* whole rows: a distance along the streams; chunks: the next rows' */
    const int64_t ahead = c1 - c0 == p->n ? GEMV_PREFETCH_BYTES : row_bytes;
    /* four streams a quarter of the rows apart */
    const int64_t quarter = (k1 - k0) / 4;
    for (int64_t k = k0; k < k0 + quarter; k++)
      row_group_avx512(job, k, quarter, 4, c0, c1, ahead, P, dtype, m);
    for (int64_t k = k0 + 4 * quarter; k < k1; k++)
      row_group_avx512(job, k, 1, 1, c0, c1, row_bytes, P, dtype, m);
  }
}

GEMM_TARGET_AVX512 void cpu_gemv_rows_avx512(const gemv_job *job, int64_t k0, int64_t k1,
                                             int64_t n0, int64_t n1, float *P) {
  const int m1 = job->p->m == 1; /* decode: the row loop unrolled away */
  switch (job->p->b.dtype) {
  case TSR_DTYPE_F32:
    if (m1)
      rows_avx512_dtype(job, k0, k1, n0, n1, P, TSR_DTYPE_F32, 1);
    else
      rows_avx512_dtype(job, k0, k1, n0, n1, P, TSR_DTYPE_F32, 0);
    break;
  case TSR_DTYPE_F16:
    rows_avx512_dtype(job, k0, k1, n0, n1, P, TSR_DTYPE_F16, 0);
    break;
  default:
    if (m1)
      rows_avx512_dtype(job, k0, k1, n0, n1, P, TSR_DTYPE_BF16, 1);
    else
      rows_avx512_dtype(job, k0, k1, n0, n1, P, TSR_DTYPE_BF16, 0);
    break;
  }
}

/* Dot products of ROWS rows of A with four columns of B (unit row stride),
 * k in vector lanes; P[i][j] = the sums over [k0, k1). */
static GEMM_ALWAYS_INLINE GEMM_TARGET_AVX512 void
columns_group_avx512(const gemv_job *job, int64_t i0, int64_t k0, int64_t k1, int64_t j,
                     int columns, float *P, const int dtype, const int rows) {
  const gemm_problem *p = job->p;
  const int64_t eb = gemm_dtype_bytes(dtype);
  const char *col[4];
  for (int c = 0; c < 4; c++)
    col[c] = gemm_at(&p->b, k0, j + (c < columns ? c : columns - 1));
  const float *a_row[GEMV_ROW_GROUP];
  for (int i = 0; i < rows; i++)
    a_row[i] = job->a + (i0 + i) * job->lda + k0;
  __m512 acc[GEMV_ROW_GROUP][4];
  for (int i = 0; i < rows; i++)
    for (int c = 0; c < 4; c++)
      acc[i][c] = _mm512_setzero_ps();
  const int64_t length = k1 - k0;
  for (int64_t k = 0; k < length; k += 16) {
    __mmask16 mask = lanes_below(length - k);
    __m512 b[4];
    for (int c = 0; c < 4; c++)
      b[c] = load_avx512(col[c] + k * eb, dtype, mask);
    for (int i = 0; i < rows; i++) {
      __m512 a_value = _mm512_maskz_loadu_ps(mask, a_row[i] + k);
      for (int c = 0; c < 4; c++)
        acc[i][c] = _mm512_fmadd_ps(a_value, b[c], acc[i][c]);
    }
  }
  for (int i = 0; i < rows; i++)
    for (int c = 0; c < columns; c++)
      P[(i0 + i) * job->ldp + j + c] = _mm512_reduce_add_ps(acc[i][c]);
}

static GEMM_ALWAYS_INLINE GEMM_TARGET_AVX512 void columns_avx512_dtype(const gemv_job *job,
                                                                       int64_t k0, int64_t k1,
                                                                       int64_t n0, int64_t n1,
                                                                       float *P, const int dtype) {
  const int64_t m = job->p->m;
  for (int64_t j = n0; j < n1; j += 4) {
    int columns = (int)min64(4, n1 - j);
    for (int64_t i0 = 0; i0 < m; i0 += GEMV_ROW_GROUP) {
      switch (min64(GEMV_ROW_GROUP, m - i0)) {
      case 1:
        columns_group_avx512(job, i0, k0, k1, j, columns, P, dtype, 1);
        break;
      case 2:
        columns_group_avx512(job, i0, k0, k1, j, columns, P, dtype, 2);
        break;
      case 3:
        columns_group_avx512(job, i0, k0, k1, j, columns, P, dtype, 3);
        break;
      default:
        columns_group_avx512(job, i0, k0, k1, j, columns, P, dtype, 4);
        break;
      }
    }
  }
}

GEMM_TARGET_AVX512 void cpu_gemv_columns_avx512(const gemv_job *job, int64_t k0, int64_t k1,
                                                int64_t n0, int64_t n1, float *P) {
  switch (job->p->b.dtype) {
  case TSR_DTYPE_F32:
    columns_avx512_dtype(job, k0, k1, n0, n1, P, TSR_DTYPE_F32);
    break;
  case TSR_DTYPE_F16:
    columns_avx512_dtype(job, k0, k1, n0, n1, P, TSR_DTYPE_F16);
    break;
  default:
    columns_avx512_dtype(job, k0, k1, n0, n1, P, TSR_DTYPE_BF16);
    break;
  }
}

#endif /* CPU_HAVE_X86_KERNELS */
