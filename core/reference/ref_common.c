/* SPDX-License-Identifier: Apache-2.0 */
/* Scratch allocation and dense gathering for the fp64 reference ops. */
#include "ref_common.h"

double *tsr_ref_alloc(int64_t count) {
  if (count < 0 || (uint64_t)count > SIZE_MAX / sizeof(double))
    return NULL;
  /* malloc(0) may return NULL, which would read as out-of-memory. */
  return malloc(count == 0 ? sizeof(double) : (size_t)count * sizeof(double));
}

void tsr_ref_load_dense(const tsr_plugin_tensor *t, double *dense) {
  int64_t count = tsr_ref_numel(t);
  if (count <= 0)
    return;
  /* An odometer over the index keeps the walk O(numel) without divisions. */
  int64_t index[TSR_MAX_RANK] = {0};
  int64_t offset = 0;
  int32_t last = t->rank - 1;
  for (int64_t n = 0; n < count; n++) {
    dense[n] = tsr_ref_load(t, offset);
    for (int32_t d = last; d >= 0; d--) {
      index[d]++;
      offset += t->strides[d];
      if (index[d] < t->shape[d])
        break;
      offset -= index[d] * t->strides[d];
      index[d] = 0;
    }
  }
}
