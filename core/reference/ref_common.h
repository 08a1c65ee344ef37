/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal helpers shared by the fp64 reference ops: reading tensor elements
 * as double, walking indices, and scratch allocation. Not exported.
 */
#ifndef TESSERA_REF_COMMON_H
#define TESSERA_REF_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/plugin.h"
#include "tessera/reference.h"

/* Bytes per element (plugin.h's header-only helper, so the reference files
 * also build on their own for the standalone test driver). */
static inline int64_t tsr_ref_dtype_size(int32_t dtype) {
  return (int64_t)tsr_plugin_dtype_size(dtype);
}

/* Address of the element `element` elements (already multiplied by strides)
 * past the tensor's first element. */
static inline const char *tsr_ref_address(const tsr_plugin_tensor *t, int64_t element) {
  return (const char *)t->buffer + t->offset + element * tsr_ref_dtype_size(t->dtype);
}

/* Reads one element as double, exactly. memcpy rather than a typed load,
 * because a tensor's byte offset need not be aligned to its dtype. */
static inline double tsr_ref_load(const tsr_plugin_tensor *t, int64_t element) {
  const char *p = tsr_ref_address(t, element);
  switch (t->dtype) {
  case TSR_DTYPE_F32: {
    float f;
    memcpy(&f, p, sizeof f);
    return f;
  }
  case TSR_DTYPE_F16: {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return tsr_f16_to_f32(h);
  }
  case TSR_DTYPE_BF16: {
    uint16_t b;
    memcpy(&b, p, sizeof b);
    return tsr_bf16_to_f32(b);
  }
  case TSR_DTYPE_I32: {
    int32_t i;
    memcpy(&i, p, sizeof i);
    return i;
  }
  default:
    return NAN;
  }
}

/* Reads one i32 element (indices); other dtypes are converted by value. */
static inline int64_t tsr_ref_load_index(const tsr_plugin_tensor *t, int64_t element) {
  if (t->dtype == TSR_DTYPE_I32) {
    int32_t i;
    memcpy(&i, tsr_ref_address(t, element), sizeof i);
    return i;
  }
  double v = tsr_ref_load(t, element);
  /* A non-integral or huge index can match no class: map it outside [0, V). */
  if (!(v >= -9.0e18 && v <= 9.0e18) || v != floor(v))
    return INT64_MIN;
  return (int64_t)v;
}

static inline int tsr_ref_present(const tsr_plugin_tensor *t) {
  return t->buffer != NULL;
}

/* Product of the extents (0 for a bad rank). */
static inline int64_t tsr_ref_numel(const tsr_plugin_tensor *t) {
  if (t->rank < 1 || t->rank > TSR_MAX_RANK)
    return 0;
  int64_t n = 1;
  for (int32_t i = 0; i < t->rank; i++)
    n *= t->shape[i];
  return n;
}

/* Element offset of the `linear`-th element in row-major order of the shape. */
static inline int64_t tsr_ref_linear_offset(const tsr_plugin_tensor *t, int64_t linear) {
  int64_t offset = 0;
  for (int32_t i = t->rank - 1; i >= 0; i--) {
    int64_t extent = t->shape[i];
    offset += (linear % extent) * t->strides[i];
    linear /= extent;
  }
  return offset;
}

/* The view of t with its first dimension fixed at `index` (rank drops by 1). */
static inline tsr_plugin_tensor tsr_ref_subview(const tsr_plugin_tensor *t, int64_t index) {
  tsr_plugin_tensor sub = *t;
  sub.offset =
      (uint64_t)((int64_t)t->offset + index * t->strides[0] * tsr_ref_dtype_size(t->dtype));
  for (int32_t i = 1; i < t->rank; i++) {
    sub.shape[i - 1] = t->shape[i];
    sub.strides[i - 1] = t->strides[i];
  }
  sub.shape[t->rank - 1] = 0;
  sub.strides[t->rank - 1] = 0;
  sub.rank = t->rank - 1;
  return sub;
}

/* Scratch of `count` doubles; never NULL for count 0 unless memory ran out. */
double *tsr_ref_alloc(int64_t count);

/* Reads every element of t, row-major in its shape, into dense (numel values). */
void tsr_ref_load_dense(const tsr_plugin_tensor *t, double *dense);

#endif /* TESSERA_REF_COMMON_H */
