/* SPDX-License-Identifier: Apache-2.0 */
/* What the vendor BLAS baselines share (vendor_blas.h). */
#include "vendor_blas.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

bool vendor_blas_bind(void *library, void *field, const char *name, const char *what, char *why,
                      size_t why_capacity) {
  void *address = dlsym(library, name);
  memcpy(field, &address, sizeof address);
  if (address == NULL)
    snprintf(why, why_capacity, "%s lacks %s", what, name);
  return address != NULL;
}

const problem_tensor *vendor_blas_tensor(const problem *p, const char *name) {
  for (int i = 0; i < p->tensor_count; i++)
    if (strcmp(p->tensors[i].name, name) == 0)
      return &p->tensors[i];
  return NULL;
}

int vendor_blas_gemms(const problem *p, const tsr_tensor *a, const tsr_tensor *b,
                      const tsr_tensor *d, vendor_blas_gemm *out) {
  if (p->spec.op == TSR_OP_GEMM) {
    out[0] = (vendor_blas_gemm){*a, *b, *d};
    return 1;
  }
  const grouped_gemm_spec *g = &p->spec.grouped;
  size_t es = tsr_dtype_size(p->spec.dtype);
  int count = 0;
  int64_t first_row = 0;
  for (int64_t i = 0; i < g->group_count && count < PROBLEM_MAX_GROUPS; i++) {
    int64_t rows = g->group_sizes[i];
    if (rows == 0)
      continue;
    vendor_blas_gemm *call = &out[count++];
    call->a = *a;
    call->d = *d;
    call->a.shape[0] = call->d.shape[0] = rows;
    call->a.offset += (size_t)(first_row * a->strides[0]) * es;
    call->d.offset += (size_t)(first_row * d->strides[0]) * es;
    call->b = *b;
    call->b.rank = 2;
    call->b.offset += (size_t)(i * b->strides[0]) * es;
    call->b.shape[0] = b->shape[1];
    call->b.shape[1] = b->shape[2];
    call->b.strides[0] = b->strides[1];
    call->b.strides[1] = b->strides[2];
    first_row += rows;
  }
  return count;
}
