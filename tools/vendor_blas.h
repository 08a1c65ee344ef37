/* SPDX-License-Identifier: Apache-2.0 */
/* What the vendor BLAS baselines (cublaslt.c, hipblaslt.c, clblast.c) share:
 * binding a dlopen'ed library's entry points, and turning a GEMM or grouped
 * GEMM problem into the plain GEMMs each library is called with. */
#ifndef TESSERA_TOOLS_VENDOR_BLAS_H
#define TESSERA_TOOLS_VENDOR_BLAS_H

#include <stdbool.h>
#include <stddef.h>

#include "problem.h"

/* Binds `name` in `library` into *field (a function pointer, copied as POSIX
 * allows); false with "<what> lacks <name>" in why when it is missing. */
bool vendor_blas_bind(void *library, void *field, const char *name, const char *what, char *why,
                      size_t why_capacity);

/* The problem's tensor called `name` (NULL when it has none). */
const problem_tensor *vendor_blas_tensor(const problem *p, const char *name);

/* One plain GEMM, D = A B, on views a [M, K], b [K, N], d [M, N]. */
typedef struct vendor_blas_gemm {
  tsr_tensor a, b, d;
} vendor_blas_gemm;

/* The GEMMs a problem is: itself for a GEMM; for a grouped GEMM one per
 * non-empty group (rows [first, first + rows) of a and d, b's [K, N] slice
 * i). Returns how many (0: every group is empty). `out` holds
 * PROBLEM_MAX_GROUPS. */
int vendor_blas_gemms(const problem *p, const tsr_tensor *a, const tsr_tensor *b,
                      const tsr_tensor *d, vendor_blas_gemm *out);

#endif /* TESSERA_TOOLS_VENDOR_BLAS_H */
