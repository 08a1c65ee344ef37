/* SPDX-License-Identifier: Apache-2.0 */
/* Checked view helpers (tessera.h): slices, permutations, explicit strides
 * and dense allocations. Unlike tsr_tensor_make they validate, so a wrong
 * view fails where it is made, not in a later op. */
#include <string.h>

#include "internal.h"

/* The geometry every helper needs: a known dtype and rank 1..TSR_MAX_RANK. */
static tsr_status check_kind(const char *call, const char *what, tsr_dtype dtype, int32_t rank) {
  if (tsr_dtype_size(dtype) == 0)
    return tsr__fail(TSR_ERROR_INVALID_VALUE, call, "%sdtype = %d is not a tessera dtype", what,
                     (int)dtype);
  if (rank < 1 || rank > TSR_MAX_RANK)
    return tsr__fail(TSR_ERROR_RANK, call, "%srank = %d (must be 1 to %d)", what, (int)rank,
                     TSR_MAX_RANK);
  return TSR_OK;
}

tsr_status tsr_tensor_slice(const tsr_tensor *tensor, int32_t dim, int64_t start, int64_t stop,
                            int64_t step, tsr_tensor *out) {
  static const char call[] = "tsr_tensor_slice";
  tsr__clear_error();
  if (!tensor || !out)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL", !tensor ? "tensor" : "out");
  tsr_status st = check_kind(call, "tensor->", tensor->dtype, tensor->rank);
  if (st != TSR_OK)
    return st;
  if (dim < 0 || dim >= tensor->rank)
    return tsr__fail(TSR_ERROR_INVALID_VALUE, call, "dim = %d but the tensor has rank %d", (int)dim,
                     (int)tensor->rank);
  if (step < 1)
    return tsr__fail(TSR_ERROR_INVALID_VALUE, call, "step = %lld (must be 1 or more)",
                     (long long)step);
  const int64_t extent = tensor->shape[dim];
  if (start < 0 || stop < start || stop > extent)
    return tsr__fail(TSR_ERROR_OUT_OF_BOUNDS, call,
                     "start = %lld, stop = %lld on dimension %d of extent %lld (need 0 <= start "
                     "<= stop <= extent)",
                     (long long)start, (long long)stop, (int)dim, (long long)extent);
  tsr_tensor t = *tensor;
  int64_t advance, stride;
  size_t offset;
  if (__builtin_mul_overflow(start, tensor->strides[dim], &advance) || advance < 0 ||
      __builtin_mul_overflow((uint64_t)advance, (uint64_t)tsr_dtype_size(t.dtype), &offset) ||
      __builtin_add_overflow(offset, t.offset, &offset) ||
      __builtin_mul_overflow(tensor->strides[dim], step, &stride))
    return tsr__fail(TSR_ERROR_BAD_SIZE, call,
                     "start = %lld or step = %lld times strides[%d] = %lld overflows",
                     (long long)start, (long long)step, (int)dim, (long long)tensor->strides[dim]);
  t.offset = offset;
  t.shape[dim] = (stop - start + step - 1) / step; /* stop - start <= extent: no overflow */
  t.strides[dim] = stride;
  *out = t;
  return TSR_OK;
}

tsr_status tsr_tensor_permute(const tsr_tensor *tensor, const int32_t *order, tsr_tensor *out) {
  static const char call[] = "tsr_tensor_permute";
  tsr__clear_error();
  if (!tensor || !order || !out)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL",
                     !tensor  ? "tensor"
                     : !order ? "order"
                              : "out");
  tsr_status st = check_kind(call, "tensor->", tensor->dtype, tensor->rank);
  if (st != TSR_OK)
    return st;
  tsr_tensor t = *tensor;
  unsigned seen = 0;
  for (int32_t i = 0; i < tensor->rank; i++) {
    int32_t from = order[i];
    if (from < 0 || from >= tensor->rank || (seen & (1u << from)))
      return tsr__fail(TSR_ERROR_INVALID_VALUE, call,
                       "order[%d] = %d: order must hold each of 0..%d once", (int)i, (int)from,
                       (int)tensor->rank - 1);
    seen |= 1u << from;
    t.shape[i] = tensor->shape[from];
    t.strides[i] = tensor->strides[from];
  }
  *out = t;
  return TSR_OK;
}

tsr_status tsr_tensor_strided(tsr_buffer *buffer, size_t offset, tsr_dtype dtype, int32_t rank,
                              const int64_t *shape, const int64_t *strides, tsr_tensor *out) {
  static const char call[] = "tsr_tensor_strided";
  tsr__clear_error();
  if (!buffer || !shape || !out)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL",
                     !buffer  ? "buffer"
                     : !shape ? "shape"
                              : "out");
  if (!tsr__buffer_live(buffer))
    return tsr__fail(TSR_ERROR_INVALID_VALUE, call,
                     "buffer (%p) was destroyed by tsr_buffer_destroy", (void *)buffer);
  tsr_status st = check_kind(call, "", dtype, rank);
  if (st != TSR_OK)
    return st;
  tsr_tensor t = tsr_tensor_make(buffer, offset, dtype, rank, shape);
  int64_t numel = 1, last = 0;
  for (int32_t i = 0; i < rank; i++) {
    if (shape[i] < 0 || __builtin_mul_overflow(numel, shape[i], &numel))
      return tsr__fail(TSR_ERROR_BAD_SIZE, call, "shape[%d] = %lld", (int)i, (long long)shape[i]);
    if (strides) {
      if (strides[i] < 0)
        return tsr__fail(TSR_ERROR_INVALID_VALUE, call, "strides[%d] = %lld is negative", (int)i,
                         (long long)strides[i]);
      t.strides[i] = strides[i];
    }
  }
  uint64_t end = offset;
  for (int32_t i = 0; i < rank && numel > 0; i++) {
    int64_t reach;
    if (__builtin_mul_overflow(shape[i] - 1, t.strides[i], &reach) ||
        __builtin_add_overflow(last, reach, &last))
      return tsr__fail(TSR_ERROR_BAD_SIZE, call, "the elements' offsets overflow at strides[%d]",
                       (int)i);
  }
  if (numel > 0 &&
      (__builtin_mul_overflow((uint64_t)last + 1, (uint64_t)tsr_dtype_size(dtype), &end) ||
       __builtin_add_overflow(end, (uint64_t)offset, &end)))
    end = UINT64_MAX;
  if (end > buffer->size)
    return tsr__fail(TSR_ERROR_OUT_OF_BOUNDS, call,
                     "the view reaches byte %llu of the %zu-byte buffer (offset %zu)",
                     (unsigned long long)end, buffer->size, offset);
  *out = t;
  return TSR_OK;
}

/* Allocation shared by tsr_tensor_alloc and tsr_tensor_like, failing as `call`. */
static tsr_status alloc_dense(tsr_device *device, tsr_dtype dtype, int32_t rank,
                              const int64_t *shape, tsr_tensor *out, const char *call,
                              const char *what) {
  tsr_status st = check_kind(call, what, dtype, rank);
  if (st != TSR_OK)
    return st;
  size_t bytes = tsr_dtype_size(dtype);
  for (int32_t i = 0; i < rank; i++)
    if (shape[i] < 0 || __builtin_mul_overflow(bytes, (size_t)shape[i], &bytes) ||
        bytes > (size_t)INT64_MAX)
      return tsr__fail(TSR_ERROR_BAD_SIZE, call,
                       "%sshape[%d] = %lld: a negative extent or a byte "
                       "size that overflows",
                       what, (int)i, (long long)shape[i]);
  if (bytes == 0)
    bytes = tsr_dtype_size(dtype); /* no element: still a valid buffer */
  tsr_buffer *buffer = NULL;
  st = tsr_buffer_create(device, bytes, &buffer);
  if (st != TSR_OK) {
    char why[512];
    tsr__strlcpy(why, tsr_last_error(), sizeof why);
    return tsr__fail(st, call, "%s", why);
  }
  *out = tsr_tensor_make(buffer, 0, dtype, rank, shape);
  return TSR_OK;
}

tsr_status tsr_tensor_alloc(tsr_device *device, tsr_dtype dtype, int32_t rank, const int64_t *shape,
                            tsr_tensor *out) {
  static const char call[] = "tsr_tensor_alloc";
  tsr__clear_error();
  if (!device || !shape || !out)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL",
                     !device  ? "device"
                     : !shape ? "shape"
                              : "out");
  return alloc_dense(device, dtype, rank, shape, out, call, "");
}

tsr_status tsr_tensor_like(tsr_device *device, const tsr_tensor *like, tsr_tensor *out) {
  static const char call[] = "tsr_tensor_like";
  tsr__clear_error();
  if (!device || !like || !out)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL",
                     !device ? "device"
                     : !like ? "like"
                             : "out");
  int64_t shape[TSR_MAX_RANK];
  memcpy(shape, like->shape, sizeof shape); /* out may be like */
  return alloc_dense(device, like->dtype, like->rank, shape, out, call, "like->");
}
