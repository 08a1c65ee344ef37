/* SPDX-License-Identifier: Apache-2.0 */
/* The gemv path's AVX2 kernels: B's rows or columns streamed once into f32
 * partial rows (gemv.c describes the path). */
#include "gemv.h"

#if CPU_HAVE_X86_KERNELS

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

GEMM_TARGET_AVX2 void cpu_gemv_rows_avx2(const gemv_job *job, int64_t k0, int64_t k1, int64_t n0,
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

GEMM_TARGET_AVX2 void cpu_gemv_columns_avx2(const gemv_job *job, int64_t k0, int64_t k1, int64_t n0,
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
