/* SPDX-License-Identifier: Apache-2.0 */
/* The skinny GEMM path (M up to ~16: decode): B, the weights, is read once,
 * unpacked, by all threads, and A's few rows stay in L1.
 *
 *   B with unit column stride ([K, N] row-major): the threads split K; each
 *     walks its rows of B four at a time (four sequential streams, which
 *     keeps more memory requests in flight than one) and adds
 *     a[i][k] * B[k][j] into its own f32 partial rows (M x N, in L1/L2).
 *   B with unit row stride ([N, K] row-major, B = W^T): the threads split
 *     N; each walks four columns of B at a time (four streams), with dot
 *     products along k in vector lanes.
 *   Other strides: rows of B gathered into f32 lines, then as the first case.
 *
 * A second pass over the columns (parallel) sums the partial rows and runs
 * the epilogue (alpha, beta * C, bias, activation, D's dtype). f16 and bf16
 * B are converted to f32 in registers as they are loaded. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_kernels.h"

#if CPU_HAVE_X86_KERNELS
#include <immintrin.h>
#endif

enum {
  /* K per thread below which splitting K costs more than it gains. */
  GEMV_MIN_K_PER_PART = 256,
  /* Columns per task of the summing pass. */
  GEMV_SUM_COLUMNS = 256,
  /* Rows of A per register group in the unit-row-stride kernels. */
  GEMV_ROW_GROUP = 4,
  /* L1 bytes the AVX-512 row kernel gives the partial rows it updates. */
  GEMV_L1_PARTIAL_BYTES = 24 << 10,
  /* How far ahead of its loads that kernel prefetches. */
  GEMV_PREFETCH_BYTES = 2048,
  /* Page size for placing the partial sums (see gemv_partials). */
  GEMV_PAGE_BYTES = 4096,
};

enum { GEMV_B_ROWS, GEMV_B_COLUMNS, GEMV_B_STRIDED };

static int64_t min64(int64_t x, int64_t y) {
  return x < y ? x : y;
}

/* What every share of one product works on. */
typedef struct gemv_job {
  const gemm_problem *p;
  int isa;
  int layout;
  const float *a; /* m x k f32 rows, lda apart */
  int64_t lda;
  float *partials;     /* parts x m x ldp floats, part_stride apart */
  int64_t ldp;         /* floats between partial rows */
  int64_t part_stride; /* floats between parts */
  bool pairs;          /* bf16 layout of rows_avx512: 32-column groups as [even][odd] */
  int parts;           /* K split into this many parts (1: N split) */
  int shares;
  float alpha, beta;
  int32_t activation;
} gemv_job;

/* ------------------------------------------------------------------------ */
/* Portable kernels                                                          */
/* ------------------------------------------------------------------------ */

/* P[i][j] += sum over k in [k0, k1) of a[i][k] * line_k[j], one B row at a
 * time converted into `line` (any strides, any dtype). */
static void strided_rows_generic(const gemv_job *job, int64_t k0, int64_t k1, int64_t n0,
                                 int64_t n1, float *P, float *line) {
  const gemm_problem *p = job->p;
  const int64_t m = p->m;
  for (int64_t k = k0; k < k1; k++) {
    const char *row = gemm_at(&p->b, k, n0);
    for (int64_t j = 0; j < n1 - n0; j++)
      line[j] = tsr_load_as_f32(row, p->b.dtype, j * p->b.cs);
    for (int64_t i = 0; i < m; i++) {
      float a_ik = job->a[i * job->lda + k];
      float *out = P + i * job->ldp + n0;
      for (int64_t j = 0; j < n1 - n0; j++)
        out[j] += a_ik * line[j];
    }
  }
}

/* P[i][j] = sum over k in [k0, k1) of a[i][k] * B[k][j] for B with unit row
 * stride, one column at a time. */
static void columns_generic(const gemv_job *job, int64_t k0, int64_t k1, int64_t n0, int64_t n1,
                            float *P) {
  const gemm_problem *p = job->p;
  for (int64_t j = n0; j < n1; j++) {
    const char *column = gemm_at(&p->b, k0, j);
    for (int64_t i = 0; i < p->m; i++) {
      const float *a = job->a + i * job->lda;
      float sum = 0.0f;
      for (int64_t k = 0; k < k1 - k0; k++)
        sum += a[k0 + k] * tsr_load_as_f32(column, p->b.dtype, k);
      P[i * job->ldp + j] = sum;
    }
  }
}

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

GEMM_TARGET_AVX512 static void rows_avx512(const gemv_job *job, int64_t k0, int64_t k1, int64_t n0,
                                           int64_t n1, float *P) {
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

GEMM_TARGET_AVX512 static void columns_avx512(const gemv_job *job, int64_t k0, int64_t k1,
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

/* ------------------------------------------------------------------------ */
/* AVX2 kernels                                                              */
/* ------------------------------------------------------------------------ */

/* 8 elements of B as f32; `count` < 8 loads only that many. */
static GEMM_ALWAYS_INLINE GEMM_TARGET_AVX2 __m256 load_avx2(const char *p, int dtype,
                                                            int64_t count) {
  if (count >= 8) {
    if (dtype == TSR_DTYPE_F32)
      return _mm256_loadu_ps((const float *)p);
    __m128i half = _mm_loadu_si128((const __m128i *)p);
    if (dtype == TSR_DTYPE_F16)
      return _mm256_cvtph_ps(half);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(half), 16));
  }
  float values[8] = {0};
  for (int64_t i = 0; i < count; i++)
    values[i] = tsr_load_as_f32(p, dtype, i);
  return _mm256_loadu_ps(values);
}

static GEMM_ALWAYS_INLINE GEMM_TARGET_AVX2 void rows_avx2_dtype(const gemv_job *job, int64_t k0,
                                                                int64_t k1, int64_t n0, int64_t n1,
                                                                float *P, const int dtype) {
  const gemm_problem *p = job->p;
  const int64_t m = p->m, ldp = job->ldp, lda = job->lda;
  const int64_t eb = gemm_dtype_bytes(dtype), row_bytes = p->b.rs * eb;
  const float *a = job->a;
  int64_t full_end = n0 + (n1 - n0) / 8 * 8;
  int64_t k = k0;
  for (; k + 4 <= k1; k += 4) {
    const char *r0 = gemm_at(&p->b, k, 0), *r1 = r0 + row_bytes, *r2 = r1 + row_bytes,
               *r3 = r2 + row_bytes;
    for (int64_t j = n0; j < full_end; j += 8) {
      __m256 b0 = load_avx2(r0 + j * eb, dtype, 8), b1 = load_avx2(r1 + j * eb, dtype, 8),
             b2 = load_avx2(r2 + j * eb, dtype, 8), b3 = load_avx2(r3 + j * eb, dtype, 8);
      for (int64_t i = 0; i < m; i++) {
        const float *ai = a + i * lda + k;
        float *out = P + i * ldp + j;
        __m256 acc = _mm256_loadu_ps(out);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(ai[0]), b0, acc);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(ai[1]), b1, acc);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(ai[2]), b2, acc);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(ai[3]), b3, acc);
        _mm256_storeu_ps(out, acc);
      }
    }
    for (int64_t kk = k; kk < k + 4; kk++)
      for (int64_t j = full_end; j < n1; j++) {
        float b_value = tsr_load_as_f32(gemm_at(&p->b, kk, j), dtype, 0);
        for (int64_t i = 0; i < m; i++)
          P[i * ldp + j] += a[i * lda + kk] * b_value;
      }
  }
  for (; k < k1; k++) {
    const char *r0 = gemm_at(&p->b, k, 0);
    for (int64_t j = n0; j < full_end; j += 8) {
      __m256 b0 = load_avx2(r0 + j * eb, dtype, 8);
      for (int64_t i = 0; i < m; i++) {
        float *out = P + i * ldp + j;
        _mm256_storeu_ps(out,
                         _mm256_fmadd_ps(_mm256_set1_ps(a[i * lda + k]), b0, _mm256_loadu_ps(out)));
      }
    }
    for (int64_t j = full_end; j < n1; j++) {
      float b_value = tsr_load_as_f32(r0 + j * eb, dtype, 0);
      for (int64_t i = 0; i < m; i++)
        P[i * ldp + j] += a[i * lda + k] * b_value;
    }
  }
}

GEMM_TARGET_AVX2 static void rows_avx2(const gemv_job *job, int64_t k0, int64_t k1, int64_t n0,
                                       int64_t n1, float *P) {
  switch (job->p->b.dtype) {
  case TSR_DTYPE_F32:
    rows_avx2_dtype(job, k0, k1, n0, n1, P, TSR_DTYPE_F32);
    break;
  case TSR_DTYPE_F16:
    rows_avx2_dtype(job, k0, k1, n0, n1, P, TSR_DTYPE_F16);
    break;
  default:
    rows_avx2_dtype(job, k0, k1, n0, n1, P, TSR_DTYPE_BF16);
    break;
  }
}

static GEMM_ALWAYS_INLINE GEMM_TARGET_AVX2 float sum_avx2(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

/* Dot products of one row of A with four columns of B (unit row stride). */
static GEMM_ALWAYS_INLINE GEMM_TARGET_AVX2 void columns_avx2_dtype(const gemv_job *job, int64_t k0,
                                                                   int64_t k1, int64_t n0,
                                                                   int64_t n1, float *P,
                                                                   const int dtype) {
  const gemm_problem *p = job->p;
  const int64_t eb = gemm_dtype_bytes(dtype), length = k1 - k0;
  for (int64_t j = n0; j < n1; j += 4) {
    int columns = (int)min64(4, n1 - j);
    const char *col[4];
    for (int c = 0; c < 4; c++)
      col[c] = gemm_at(&p->b, k0, j + (c < columns ? c : columns - 1));
    for (int64_t i = 0; i < p->m; i++) {
      const float *a_row = job->a + i * job->lda + k0;
      __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                       _mm256_setzero_ps()};
      int64_t k = 0;
      for (; k + 8 <= length; k += 8) {
        __m256 a_value = _mm256_loadu_ps(a_row + k);
        for (int c = 0; c < 4; c++)
          acc[c] = _mm256_fmadd_ps(a_value, load_avx2(col[c] + k * eb, dtype, 8), acc[c]);
      }
      for (int c = 0; c < columns; c++) {
        float sum = sum_avx2(acc[c]);
        for (int64_t kk = k; kk < length; kk++)
          sum += a_row[kk] * tsr_load_as_f32(col[c], dtype, kk);
        P[i * job->ldp + j + c] = sum;
      }
    }
  }
}

GEMM_TARGET_AVX2 static void columns_avx2(const gemv_job *job, int64_t k0, int64_t k1, int64_t n0,
                                          int64_t n1, float *P) {
  switch (job->p->b.dtype) {
  case TSR_DTYPE_F32:
    columns_avx2_dtype(job, k0, k1, n0, n1, P, TSR_DTYPE_F32);
    break;
  case TSR_DTYPE_F16:
    columns_avx2_dtype(job, k0, k1, n0, n1, P, TSR_DTYPE_F16);
    break;
  default:
    columns_avx2_dtype(job, k0, k1, n0, n1, P, TSR_DTYPE_BF16);
    break;
  }
}
#endif /* CPU_HAVE_X86_KERNELS */

/* ------------------------------------------------------------------------ */
/* Driver                                                                    */
/* ------------------------------------------------------------------------ */

/* Share t: with K split, part t of K over every column into its own partial
 * rows; with N split, a range of columns (whole K) into partials[0]. */
static void gemv_share(void *context, int64_t t, int64_t shares, int worker) {
  const gemv_job *job = context;
  const gemm_problem *p = job->p;
  (void)worker;
  int64_t k0 = 0, k1 = p->k, n0 = 0, n1 = p->n;
  float *P = job->partials;
  if (job->parts > 1) {
    /* Multiples of 4 rows, so that each part runs the 4-row loop. */
    int64_t quads = (p->k + 3) / 4;
    k0 = min64(p->k, quads * t / shares * 4);
    k1 = min64(p->k, quads * (t + 1) / shares * 4);
    P += t * job->part_stride;
  } else {
    int64_t align = job->layout == GEMV_B_COLUMNS ? 4 : 64;
    int64_t units = (p->n + align - 1) / align;
    n0 = min64(p->n, units * t / shares * align);
    n1 = min64(p->n, units * (t + 1) / shares * align);
  }
  if (n0 >= n1)
    return;
  /* The row kernels add into P, including the padding columns up to ldp
   * that the last vector store covers. */
  const int64_t zero_end = n1 == p->n ? job->ldp : n1;
  if (job->layout != GEMV_B_COLUMNS || k0 >= k1)
    for (int64_t i = 0; i < p->m; i++)
      memset(P + i * job->ldp + n0, 0, (size_t)(zero_end - n0) * sizeof *P);
  if (k0 >= k1)
    return;
#if CPU_HAVE_X86_KERNELS
  if (job->isa == CPU_ISA_AVX512 && job->layout == GEMV_B_ROWS) {
    rows_avx512(job, k0, k1, n0, n1, P);
    return;
  }
  if (job->isa == CPU_ISA_AVX512 && job->layout == GEMV_B_COLUMNS) {
    columns_avx512(job, k0, k1, n0, n1, P);
    return;
  }
  if (job->isa == CPU_ISA_AVX2 && job->layout == GEMV_B_ROWS) {
    rows_avx2(job, k0, k1, n0, n1, P);
    return;
  }
  if (job->isa == CPU_ISA_AVX2 && job->layout == GEMV_B_COLUMNS) {
    columns_avx2(job, k0, k1, n0, n1, P);
    return;
  }
#endif
  if (job->layout == GEMV_B_COLUMNS) {
    columns_generic(job, k0, k1, n0, n1, P);
    return;
  }
  float *line = malloc((size_t)(n1 - n0) * sizeof *line);
  if (line) {
    strided_rows_generic(job, k0, k1, n0, n1, P, line);
    free(line);
    return;
  }
  /* No memory for a line: one element at a time. */
  for (int64_t k = k0; k < k1; k++)
    for (int64_t i = 0; i < p->m; i++)
      for (int64_t j = n0; j < n1; j++)
        P[i * job->ldp + j] +=
            job->a[i * job->lda + k] * tsr_load_as_f32(gemm_at(&p->b, k, j), p->b.dtype, 0);
}

/* Puts columns stored as 32-column groups of [16 even][16 odd] (the bf16
 * layout of rows_avx512) back in order. GEMV_SUM_COLUMNS is a multiple of 32,
 * so a chunk starts at a group. */
static void gemv_unpair(float *sum, int cols) {
  float group[32];
  for (int g = 0; g < cols; g += 32) { /* sum holds whole groups */
    memcpy(group, sum + g, sizeof group);
    for (int r = 0; r < 32 && g + r < cols; r++)
      sum[g + r] = group[(r & 1) ? 16 + r / 2 : r / 2];
  }
}

/* Columns [begin, end) x GEMV_SUM_COLUMNS: sums the parts, then the
 * epilogue into D. */
static void gemv_finish(void *context, int64_t begin, int64_t end, int worker) {
  const gemv_job *job = context;
  const gemm_problem *p = job->p;
  (void)worker;
  float sums[16 * GEMV_SUM_COLUMNS];
  for (int64_t chunk = begin; chunk < end; chunk++) {
    int64_t j0 = chunk * GEMV_SUM_COLUMNS;
    int cols = (int)min64(GEMV_SUM_COLUMNS, p->n - j0);
    /* Paired columns: the last group's odd half sits past `cols`. */
    int stored = job->pairs ? (int)min64(GEMV_SUM_COLUMNS, job->ldp - j0) : cols;
    for (int64_t i0 = 0; i0 < p->m; i0 += 16) {
      int rows = (int)min64(16, p->m - i0);
      for (int i = 0; i < rows; i++) {
        float *sum = sums + i * GEMV_SUM_COLUMNS;
        const float *row = job->partials + (i0 + i) * job->ldp + j0;
        memcpy(sum, row, (size_t)stored * sizeof *sum);
        for (int part = 1; part < job->parts; part++) {
          const float *add = row + part * job->part_stride;
          for (int j = 0; j < stored; j++)
            sum[j] += add[j];
        }
        if (job->pairs)
          gemv_unpair(sum, cols);
      }
      gemm_tile_out out = {.rows = rows,
                           .cols = cols,
                           .alpha = job->alpha,
                           .activation = job->activation,
                           .bias = p->bias ? p->bias + j0 : NULL,
                           .dst = gemm_at(&p->d, i0, j0),
                           .dst_dtype = p->d.dtype,
                           .dst_rs = p->d.rs,
                           .dst_cs = p->d.cs};
      if (p->c.base) {
        out.c = gemm_at(&p->c, i0, j0);
        out.c_dtype = p->c.dtype;
        out.c_rs = p->c.rs;
        out.c_cs = p->c.cs;
        out.beta = job->beta;
      }
      out.vector_store = out.dst_cs == 1 && (!out.c || out.c_cs == 1) &&
                         (out.activation == TSR_ACT_NONE || out.activation == TSR_ACT_RELU);
#if CPU_HAVE_X86_KERNELS
      if (job->isa == CPU_ISA_AVX512) {
        cpu_gemm_store_block_avx512(&out, sums, GEMV_SUM_COLUMNS);
        continue;
      }
#endif
      gemm_store_block(&out, sums, GEMV_SUM_COLUMNS);
    }
  }
}

static tsr_status gemv_fail(const cpu_exec *exec, const char *message) {
  if (exec->error && exec->error_capacity > 0)
    snprintf(exec->error, exec->error_capacity, "%s", message);
  return TSR_ERROR_OUT_OF_MEMORY;
}

/* Allocates the partial sums (returns the block to free; sets partials,
 * ldp and part_stride). Rows are padded to 64 columns for the full-vector
 * stores of the row kernels (64 columns a step). Each part starts at a page offset 2 KiB away
 * from B's: a load of B and a store to P whose addresses agree in their low
 * 12 bits can be taken for dependent (4K aliasing) and stall the stream. */
static void *gemv_partials(gemv_job *job, int parts) {
  const gemm_problem *p = job->p;
  job->ldp = (p->n + 63) / 64 * 64;
  const int64_t page_floats = GEMV_PAGE_BYTES / (int64_t)sizeof(float);
  job->part_stride = (p->m * job->ldp + page_floats - 1) / page_floats * page_floats;
  size_t bytes = (size_t)(parts * job->part_stride + page_floats) * sizeof(float);
  char *block = aligned_alloc(GEMV_PAGE_BYTES, bytes);
  if (!block)
    return NULL;
  uintptr_t b_offset = (uintptr_t)p->b.base % GEMV_PAGE_BYTES;
  uintptr_t shift = (b_offset + GEMV_PAGE_BYTES / 2) % GEMV_PAGE_BYTES / 64 * 64;
  job->partials = (float *)(block + shift);
  return block;
}

static tsr_status gemv_one(const cpu_exec *exec, int isa, const gemm_problem *p, float alpha,
                           float beta, int32_t activation) {
  const int threads = cpu_pool_threads(exec->pool);
  gemv_job job = {.p = p, .isa = isa, .alpha = alpha, .beta = beta, .activation = activation};
  job.layout = p->b.cs == 1 ? GEMV_B_ROWS : p->b.rs == 1 ? GEMV_B_COLUMNS : GEMV_B_STRIDED;

  /* A as f32 rows with unit stride along k: used in place when it is. */
  float *a_copy = NULL;
  if (p->a.dtype == TSR_DTYPE_F32 && p->a.cs == 1) {
    job.a = (const float *)p->a.base;
    job.lda = p->a.rs;
  } else {
    a_copy = malloc((size_t)(p->m * (p->k > 0 ? p->k : 1)) * sizeof *a_copy);
    if (!a_copy)
      return gemv_fail(exec, "cpu gemv: cannot allocate the f32 copy of A");
    for (int64_t i = 0; i < p->m; i++)
      for (int64_t k = 0; k < p->k; k++)
        a_copy[i * p->k + k] = tsr_load_as_f32(gemm_at(&p->a, i, k), p->a.dtype, 0);
    job.a = a_copy;
    job.lda = p->k;
  }

  /* Split K where the columns are few (or for row-major B, where splitting
   * K keeps every thread on whole rows: sequential streams); else split N. */
  int parts = (int)min64(threads, p->k / GEMV_MIN_K_PER_PART);
  if (parts < 1)
    parts = 1;
  if (job.layout == GEMV_B_COLUMNS && p->n >= 16 * (int64_t)threads)
    parts = 1;
  job.parts = parts;
  job.shares = parts > 1 ? parts : (int)min64(threads, (p->n + 15) / 16);
  if (job.shares < 1)
    job.shares = 1;
  job.pairs = isa == CPU_ISA_AVX512 && job.layout == GEMV_B_ROWS && p->b.dtype == TSR_DTYPE_BF16;
  void *partials_block = gemv_partials(&job, parts);
  if (!partials_block) {
    free(a_copy);
    return gemv_fail(exec, "cpu gemv: cannot allocate the partial sums");
  }
  cpu_pool_run_threads(exec->pool, job.shares, gemv_share, &job);
  int64_t chunks = (p->n + GEMV_SUM_COLUMNS - 1) / GEMV_SUM_COLUMNS;
  cpu_pool_parallel_for(exec->pool, chunks, 2, gemv_finish, &job);
  free(partials_block);
  free(a_copy);
  return TSR_OK;
}

tsr_status cpu_gemv_run(const cpu_exec *exec, int isa, const gemm_problem *problems, int64_t count,
                        float alpha, float beta, int32_t activation) {
  for (int64_t i = 0; i < count; i++) {
    tsr_status status = gemv_one(exec, isa, &problems[i], alpha, beta, activation);
    if (status != TSR_OK)
      return status;
  }
  return TSR_OK;
}
