/* SPDX-License-Identifier: Apache-2.0 */
/* Environment, strings, dtype and op names, tensor view helpers. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

const char *tsr__getenv(const char *name) {
  return secure_getenv(name);
}

void tsr__strlcpy(char *dst, const char *src, size_t capacity) {
  if (capacity == 0)
    return;
  size_t n = strlen(src);
  if (n >= capacity)
    n = capacity - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

bool tsr__list_contains(const char *list, const char *name) {
  size_t len = strlen(name);
  const char *p = list;
  while (*p) {
    while (*p == ',' || *p == ' ')
      p++;
    const char *end = p;
    while (*end && *end != ',' && *end != ' ')
      end++;
    if ((size_t)(end - p) == len && len > 0 && !strncmp(p, name, len))
      return true;
    p = end;
  }
  return false;
}

size_t tsr_dtype_size(tsr_dtype dtype) {
  return tsr_plugin_dtype_size(dtype);
}

static const char *const dtype_names[TSR_DTYPE_COUNT_] = {"invalid", "f32", "f16", "bf16", "i32"};

const char *tsr_dtype_name(tsr_dtype dtype) {
  if ((int)dtype <= 0 || dtype >= TSR_DTYPE_COUNT_)
    return "invalid";
  return dtype_names[dtype];
}

tsr_dtype tsr_dtype_from_name(const char *name) {
  if (!name)
    return TSR_DTYPE_INVALID;
  for (int i = 1; i < TSR_DTYPE_COUNT_; i++)
    if (!strcmp(name, dtype_names[i]))
      return (tsr_dtype)i;
  return TSR_DTYPE_INVALID;
}

static const char *const op_names[TSR_OP_COUNT_] = {
    "gemm", "grouped_gemm", "attention", "rmsnorm",       "layernorm", "softmax",
    "rope", "swiglu",       "gelu",      "cross_entropy", "kv_append"};

const char *tsr_op_name(tsr_op op) {
  if ((int)op < 0 || op >= TSR_OP_COUNT_)
    return NULL;
  return op_names[op];
}

tsr_op tsr_op_from_name(const char *name) {
  if (!name)
    return TSR_OP_COUNT_;
  for (int i = 0; i < TSR_OP_COUNT_; i++)
    if (!strcmp(name, op_names[i]))
      return (tsr_op)i;
  return TSR_OP_COUNT_;
}

tsr_tensor tsr_tensor_make(tsr_buffer *buffer, size_t offset, tsr_dtype dtype, int32_t rank,
                           const int64_t *shape) {
  tsr_tensor t;
  memset(&t, 0, sizeof t);
  t.buffer = buffer;
  t.offset = offset;
  t.dtype = dtype;
  t.rank = rank;
  if (rank < 1 || rank > TSR_MAX_RANK || !shape)
    return t;
  int64_t stride = 1;
  for (int32_t i = rank - 1; i >= 0; i--) {
    t.shape[i] = shape[i];
    t.strides[i] = stride;
    stride *= shape[i] > 0 ? shape[i] : 1;
  }
  return t;
}

tsr_tensor tsr_tensor_transpose(tsr_tensor tensor, int32_t d0, int32_t d1) {
  if (d0 < 0 || d1 < 0 || d0 >= tensor.rank || d1 >= tensor.rank)
    return tensor;
  int64_t s = tensor.shape[d0];
  tensor.shape[d0] = tensor.shape[d1];
  tensor.shape[d1] = s;
  s = tensor.strides[d0];
  tensor.strides[d0] = tensor.strides[d1];
  tensor.strides[d1] = s;
  return tensor;
}

int64_t tsr_tensor_numel(const tsr_tensor *tensor) {
  if (!tensor || tensor->rank < 1 || tensor->rank > TSR_MAX_RANK)
    return 0;
  int64_t n = 1;
  for (int32_t i = 0; i < tensor->rank; i++) {
    if (tensor->shape[i] < 0 || __builtin_mul_overflow(n, tensor->shape[i], &n))
      return 0;
  }
  return n;
}
