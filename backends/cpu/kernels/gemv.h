/* SPDX-License-Identifier: Apache-2.0 */
/* What the gemv files share (gemv.c: the plain C kernels and the driver;
 * gemv_avx2.c, gemv_avx512.c: the vector kernels): the job one product's
 * shares work on and the vector kernels' entry points. */
#ifndef TESSERA_CPU_GEMV_H
#define TESSERA_CPU_GEMV_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_kernels.h"

#if CPU_HAVE_X86_KERNELS
#include <immintrin.h>
#endif

/* One thread's time per weight streamed (bf16 weights from memory; f32 a
 * little more): the split cost model's input (cpu_grain). */
#define GEMV_NS_PER_WEIGHT 0.1

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

static inline int64_t min64(int64_t x, int64_t y) {
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

#if CPU_HAVE_X86_KERNELS
/* With B's rows of unit stride (P += a B, K split) or its columns (P = a B,
 * N split), over k in [k0, k1) and columns [n0, n1), into the partial rows P. */
void cpu_gemv_rows_avx512(const gemv_job *job, int64_t k0, int64_t k1, int64_t n0, int64_t n1,
                          float *P);
void cpu_gemv_columns_avx512(const gemv_job *job, int64_t k0, int64_t k1, int64_t n0, int64_t n1,
                             float *P);
void cpu_gemv_rows_avx2(const gemv_job *job, int64_t k0, int64_t k1, int64_t n0, int64_t n1,
                        float *P);
void cpu_gemv_columns_avx2(const gemv_job *job, int64_t k0, int64_t k1, int64_t n0, int64_t n1,
                           float *P);
#endif

#endif /* TESSERA_CPU_GEMV_H */
