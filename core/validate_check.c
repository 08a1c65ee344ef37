/* SPDX-License-Identifier: Apache-2.0 */
/* The validation phases every op's tensors go through (validate.h):
 * presence and device, dtypes, ranks, extents and strides, buffer bounds,
 * extents fitting together, scalars, aliasing; and the conversion of a public
 * tensor into the plugin's. */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "validate.h"

int ck_add_slot(checker *ck, const char *name, const tsr_tensor *tensor, unsigned flags,
                int32_t min_rank, int32_t max_rank) {
  slot *s = &ck->slots[ck->count];
  memset(s, 0, sizeof *s);
  s->name = name;
  s->tensor = tensor;
  s->flags = flags;
  s->min_rank = min_rank;
  s->max_rank = max_rank;
  return ck->count++;
}

/* ---- descriptor size ---- */

/* Reads only the leading struct_size before trusting the rest of `desc`. */
tsr_status ck_check_struct_size(const checker *ck, const void *desc, size_t needed,
                                const char *struct_name) {
  if (desc == NULL)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, ck->call, "desc is NULL");
  size_t struct_size;
  memcpy(&struct_size, desc, sizeof struct_size);
  if (struct_size < needed)
    return tsr__fail(TSR_ERROR_STRUCT_SIZE, ck->call,
                     "desc->struct_size = %zu but %s needs at least %zu (set it to sizeof(%s))",
                     struct_size, struct_name, needed, struct_name);
  return TSR_OK;
}

/* ---- presence and device ---- */

tsr_status ck_check_presence(const checker *ck) {
  for (int i = 0; i < ck->count; i++) {
    const slot *s = &ck->slots[i];
    const tsr_buffer *buffer = s->tensor->buffer;
    if (buffer == NULL) {
      if (s->flags & SLOT_REQUIRED)
        return tsr__fail(TSR_ERROR_NULL_ARGUMENT, ck->call, "%s.buffer is NULL but %s needs %s",
                         s->name, ck->op_name, s->name);
      continue;
    }
    /* Before anything else reads the handle: a destroyed one stays readable. */
    if (!tsr__buffer_live(buffer))
      return tsr__fail(TSR_ERROR_INVALID_VALUE, ck->call,
                       "%s.buffer (%p) was destroyed by tsr_buffer_destroy", s->name,
                       (const void *)buffer);
    if (buffer->device == ck->device)
      continue;
    /* Two contexts both have a "cpu:0": say which mistake it is. */
    if (buffer->device != NULL && buffer->device->context != ck->device->context)
      return tsr__fail(TSR_ERROR_WRONG_DEVICE, ck->call,
                       "%s.buffer belongs to %s of another context, not to this context's %s",
                       s->name, buffer->device->info.selector, ck->device->info.selector);
    return tsr__fail(TSR_ERROR_WRONG_DEVICE, ck->call, "%s.buffer belongs to device %s, not to %s",
                     s->name, buffer->device ? buffer->device->info.selector : "(none)",
                     ck->device->info.selector);
  }
  return TSR_OK;
}

/* ---- dtypes ---- */

static bool is_data_dtype(int32_t dtype) {
  return dtype == TSR_DTYPE_F32 || dtype == TSR_DTYPE_F16 || dtype == TSR_DTYPE_BF16;
}

static const char *dtype_label(int32_t dtype) {
  return tsr_dtype_name((tsr_dtype)dtype);
}

tsr_status ck_check_dtypes_valid(const checker *ck) {
  for (int i = 0; i < ck->count; i++) {
    const slot *s = &ck->slots[i];
    int32_t dtype = (int32_t)s->tensor->dtype;
    if (s->tensor->buffer != NULL && (dtype <= TSR_DTYPE_INVALID || dtype >= TSR_DTYPE_COUNT_))
      return tsr__fail(TSR_ERROR_INVALID_VALUE, ck->call,
                       "%s.dtype = %" PRId32 " is not a valid tsr_dtype", s->name, dtype);
  }
  return TSR_OK;
}

/* The slot holds data (f32, f16, bf16), not indices. */
tsr_status ck_require_data_dtype(const checker *ck, int index) {
  const slot *s = &ck->slots[index];
  if (ck_present(ck, index) && !is_data_dtype((int32_t)s->tensor->dtype))
    return tsr__fail(TSR_ERROR_DTYPE_MISMATCH, ck->call,
                     "%s.dtype = %s but %s takes f32, f16 or bf16", s->name,
                     dtype_label((int32_t)s->tensor->dtype), ck->op_name);
  return TSR_OK;
}

tsr_status ck_require_same_dtype(const checker *ck, int index, int reference) {
  const slot *s = &ck->slots[index];
  const slot *r = &ck->slots[reference];
  if (ck_present(ck, index) && s->tensor->dtype != r->tensor->dtype)
    return tsr__fail(TSR_ERROR_DTYPE_MISMATCH, ck->call, "%s.dtype = %s but %s.dtype = %s", s->name,
                     dtype_label((int32_t)s->tensor->dtype), r->name,
                     dtype_label((int32_t)r->tensor->dtype));
  return TSR_OK;
}

tsr_status ck_require_same_dtype_or_f32(const checker *ck, int index, int reference) {
  const slot *s = &ck->slots[index];
  const slot *r = &ck->slots[reference];
  if (ck_present(ck, index) && s->tensor->dtype != r->tensor->dtype &&
      s->tensor->dtype != TSR_DTYPE_F32)
    return tsr__fail(TSR_ERROR_DTYPE_MISMATCH, ck->call,
                     "%s.dtype = %s but %s.dtype = %s (%s takes %s's dtype or f32)", s->name,
                     dtype_label((int32_t)s->tensor->dtype), r->name,
                     dtype_label((int32_t)r->tensor->dtype), s->name, r->name);
  return TSR_OK;
}

tsr_status ck_require_dtype(const checker *ck, int index, tsr_dtype dtype) {
  const slot *s = &ck->slots[index];
  if (ck_present(ck, index) && s->tensor->dtype != dtype)
    return tsr__fail(TSR_ERROR_DTYPE_MISMATCH, ck->call, "%s.dtype = %s but %s needs %s", s->name,
                     dtype_label((int32_t)s->tensor->dtype), s->name, dtype_label((int32_t)dtype));
  return TSR_OK;
}

/* ---- ranks ---- */

tsr_status ck_check_ranks(const checker *ck) {
  for (int i = 0; i < ck->count; i++) {
    const slot *s = &ck->slots[i];
    int32_t rank = s->tensor->rank;
    if (s->tensor->buffer == NULL || (rank >= s->min_rank && rank <= s->max_rank))
      continue;
    if (s->min_rank == s->max_rank)
      return tsr__fail(TSR_ERROR_RANK, ck->call, "%s.rank = %" PRId32 " but %s needs rank %" PRId32,
                       s->name, rank, ck->op_name, s->min_rank);
    if (s->max_rank == s->min_rank + 1)
      return tsr__fail(TSR_ERROR_RANK, ck->call,
                       "%s.rank = %" PRId32 " but %s takes rank %" PRId32 " or %" PRId32, s->name,
                       rank, ck->op_name, s->min_rank, s->max_rank);
    return tsr__fail(TSR_ERROR_RANK, ck->call,
                     "%s.rank = %" PRId32 " but %s takes rank %" PRId32 " to %" PRId32, s->name,
                     rank, ck->op_name, s->min_rank, s->max_rank);
  }
  return TSR_OK;
}

tsr_status ck_require_same_rank(const checker *ck, int index, int reference) {
  const slot *s = &ck->slots[index];
  const slot *r = &ck->slots[reference];
  if (ck_present(ck, index) && s->tensor->rank != r->tensor->rank)
    return tsr__fail(TSR_ERROR_RANK, ck->call,
                     "%s.rank = %" PRId32 " but %s.rank = %" PRId32 " (%s needs %s's shape)",
                     s->name, s->tensor->rank, r->name, r->tensor->rank, s->name, r->name);
  return TSR_OK;
}

/* ---- extents, strides, byte sizes ---- */

tsr_status ck_check_extents(checker *ck) {
  for (int i = 0; i < ck->count; i++) {
    slot *s = &ck->slots[i];
    const tsr_tensor *t = s->tensor;
    if (t->buffer == NULL)
      continue;
    int64_t elements = 1;
    int64_t last = 0; /* element offset of the last element */
    bool overflow = false;
    for (int32_t d = 0; d < t->rank; d++) {
      if (t->shape[d] <= 0)
        return tsr__fail(TSR_ERROR_BAD_SIZE, ck->call,
                         "%s.shape[%" PRId32 "] = %" PRId64 " but extents must be positive",
                         s->name, d, t->shape[d]);
      if (t->strides[d] < 0)
        return tsr__fail(TSR_ERROR_BAD_SIZE, ck->call,
                         "%s.strides[%" PRId32 "] = %" PRId64 " but strides must be non-negative",
                         s->name, d, t->strides[d]);
      int64_t reach;
      overflow |= __builtin_mul_overflow(elements, t->shape[d], &elements);
      overflow |= __builtin_mul_overflow(t->shape[d] - 1, t->strides[d], &reach);
      overflow |= __builtin_add_overflow(last, reach, &last);
    }
    int64_t bytes = 0;
    size_t end = 0;
    if (!overflow) {
      overflow |= __builtin_add_overflow(last, (int64_t)1, &bytes);
      overflow |= __builtin_mul_overflow(bytes, (int64_t)tsr_plugin_dtype_size(t->dtype), &bytes);
    }
    if (!overflow)
      overflow |= __builtin_add_overflow(t->offset, (size_t)bytes, &end);
    if (overflow)
      return tsr__fail(TSR_ERROR_BAD_SIZE, ck->call,
                       "%s's element count or byte extent (offset %zu, rank %" PRId32
                       ") overflows 64 bits",
                       s->name, t->offset, t->rank);
    s->end = end;
  }
  return TSR_OK;
}

tsr_status ck_check_bounds(const checker *ck) {
  for (int i = 0; i < ck->count; i++) {
    const slot *s = &ck->slots[i];
    const tsr_buffer *buffer = s->tensor->buffer;
    /* Kernels load whole elements (and vectors of them): an element never
     * straddles its natural alignment. */
    size_t element = tsr_plugin_dtype_size(s->tensor->dtype);
    if (buffer != NULL && element > 1 && s->tensor->offset % element != 0)
      return tsr__fail(TSR_ERROR_INVALID_VALUE, ck->call,
                       "%s.offset = %zu is not a multiple of the %s element size (%zu)", s->name,
                       s->tensor->offset, dtype_label(s->tensor->dtype), element);
    if (buffer != NULL && s->end > buffer->size)
      return tsr__fail(TSR_ERROR_OUT_OF_BOUNDS, ck->call,
                       "%s reaches byte %zu of a %zu-byte buffer (offset %zu)", s->name, s->end,
                       buffer->size, s->tensor->offset);
  }
  return TSR_OK;
}

/* ---- extents fitting together ---- */

tsr_status ck_require_extent(const checker *ck, int index, int32_t dim, int reference,
                             int32_t reference_dim) {
  const tsr_tensor *t = ck_tensor_of(ck, index);
  const tsr_tensor *r = ck_tensor_of(ck, reference);
  if (t->buffer != NULL && t->shape[dim] != r->shape[reference_dim])
    return tsr__fail(TSR_ERROR_SHAPE_MISMATCH, ck->call,
                     "%s.shape[%" PRId32 "] = %" PRId64 " but %s.shape[%" PRId32 "] = %" PRId64,
                     ck->slots[index].name, dim, t->shape[dim], ck->slots[reference].name,
                     reference_dim, r->shape[reference_dim]);
  return TSR_OK;
}

/* Same rank (checked earlier) and the same extent in every dimension. */
tsr_status ck_require_same_shape(const checker *ck, int index, int reference) {
  const tsr_tensor *t = ck_tensor_of(ck, index);
  if (t->buffer == NULL)
    return TSR_OK;
  for (int32_t d = 0; d < t->rank; d++)
    TRY(ck_require_extent(ck, index, d, reference, d));
  return TSR_OK;
}

/* ---- scalars ---- */

tsr_status ck_require_finite(const checker *ck, const char *name, float value) {
  if (!isfinite(value))
    return tsr__fail(TSR_ERROR_INVALID_VALUE, ck->call, "%s = %g but it must be finite", name,
                     (double)value);
  return TSR_OK;
}

tsr_status ck_require_finite_non_negative(const checker *ck, const char *name, float value) {
  TRY(ck_require_finite(ck, name, value));
  if (value < 0.0f)
    return tsr__fail(TSR_ERROR_INVALID_VALUE, ck->call, "%s = %g but it must not be negative", name,
                     (double)value);
  return TSR_OK;
}

tsr_status ck_require_enum(const checker *ck, const char *name, int value, int count,
                           const char *type_name) {
  if (value < 0 || value >= count)
    return tsr__fail(TSR_ERROR_INVALID_VALUE, ck->call, "%s = %d is not a %s (0 to %d)", name,
                     value, type_name, count - 1);
  return TSR_OK;
}

/* ---- aliasing ---- */

/* Appends printf output at *used, never past capacity. */
static void append(char *buf, size_t capacity, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t capacity, size_t *used, const char *fmt, ...) {
  if (*used + 1 >= capacity)
    return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + *used, capacity - *used, fmt, ap);
  va_end(ap);
  if (n > 0)
    *used = *used + (size_t)n < capacity ? *used + (size_t)n : capacity - 1;
}

/* "shape [2, 3], strides [3, 1]" */
static void format_layout(const tsr_tensor *t, char *buf, size_t capacity) {
  size_t used = 0;
  buf[0] = '\0';
  append(buf, capacity, &used, "shape [");
  for (int32_t d = 0; d < t->rank; d++)
    append(buf, capacity, &used, d ? ", %" PRId64 : "%" PRId64, t->shape[d]);
  append(buf, capacity, &used, "], strides [");
  for (int32_t d = 0; d < t->rank; d++)
    append(buf, capacity, &used, d ? ", %" PRId64 : "%" PRId64, t->strides[d]);
  append(buf, capacity, &used, "]");
}

/* An output must write each element to its own memory. A zero stride on an
 * extent > 1 is the common mistake and gets its own sentence; otherwise the
 * dimensions, sorted by stride, must each step past everything the smaller
 * ones reach (a sufficient test that accepts every dense or padded layout). */
static tsr_status check_output_distinct(const checker *ck, const slot *s) {
  const tsr_tensor *t = s->tensor;
  int32_t order[TSR_MAX_RANK];
  int32_t count = 0;
  for (int32_t d = 0; d < t->rank; d++) {
    if (t->shape[d] == 1)
      continue;
    if (t->strides[d] == 0)
      return tsr__fail(TSR_ERROR_OVERLAP, ck->call,
                       "%s.strides[%" PRId32 "] = 0 on an extent of %" PRId64
                       ": an output may not write one element twice",
                       s->name, d, t->shape[d]);
    int32_t at = count++;
    while (at > 0 && t->strides[order[at - 1]] > t->strides[d]) {
      order[at] = order[at - 1];
      at--;
    }
    order[at] = d;
  }
  int64_t reach = 0; /* highest element offset the smaller-stride dimensions reach */
  for (int32_t i = 0; i < count; i++) {
    int32_t d = order[i];
    if (t->strides[d] <= reach) {
      char layout[160];
      format_layout(t, layout, sizeof layout);
      return tsr__fail(TSR_ERROR_OVERLAP, ck->call,
                       "%s has elements that share memory (%s): an output may not write one "
                       "element twice",
                       s->name, layout);
    }
    reach += (t->shape[d] - 1) * t->strides[d];
  }
  return TSR_OK;
}

/* The same elements in the same order, ignoring extent-1 dimensions (so a
 * rank-2 gemm c matches a rank-3 d with a batch of 1). */
static bool same_view(const tsr_tensor *x, const tsr_tensor *y) {
  if (x->buffer != y->buffer || x->offset != y->offset || x->dtype != y->dtype)
    return false;
  int32_t i = 0, j = 0;
  for (;;) {
    while (i < x->rank && x->shape[i] == 1)
      i++;
    while (j < y->rank && y->shape[j] == 1)
      j++;
    if (i == x->rank || j == y->rank)
      return i == x->rank && j == y->rank;
    if (x->shape[i] != y->shape[j] || x->strides[i] != y->strides[j])
      return false;
    i++;
    j++;
  }
}

static bool byte_ranges_meet(const slot *x, const slot *y) {
  return x->tensor->buffer == y->tensor->buffer && x->tensor->offset < y->end &&
         y->tensor->offset < x->end;
}

tsr_status ck_check_overlaps(const checker *ck) {
  for (int o = 0; o < ck->count; o++) {
    const slot *out = &ck->slots[o];
    if (!(out->flags & SLOT_OUTPUT) || out->tensor->buffer == NULL)
      continue;
    TRY(check_output_distinct(ck, out));
    for (int i = 0; i < ck->count; i++) {
      const slot *other = &ck->slots[i];
      if (i == o || other->tensor->buffer == NULL || !byte_ranges_meet(out, other))
        continue;
      if (other->flags & SLOT_OUTPUT) {
        if (i < o)
          continue; /* reported from the other side */
        return tsr__fail(
            TSR_ERROR_OVERLAP, ck->call,
            "outputs %s and %s overlap in one buffer (bytes [%zu, %zu) and [%zu, %zu))", out->name,
            other->name, out->tensor->offset, out->end, other->tensor->offset, other->end);
      }
      bool alias_allowed = (out->may_alias & (1u << i)) != 0;
      if (alias_allowed && same_view(out->tensor, other->tensor))
        continue;
      if (alias_allowed)
        return tsr__fail(TSR_ERROR_OVERLAP, ck->call,
                         "%s overlaps %s in one buffer (bytes [%zu, %zu) and [%zu, %zu)) without "
                         "being the same view: in place needs %s to be exactly %s",
                         out->name, other->name, out->tensor->offset, out->end,
                         other->tensor->offset, other->end, out->name, other->name);
      return tsr__fail(TSR_ERROR_OVERLAP, ck->call,
                       "%s overlaps input %s in one buffer (bytes [%zu, %zu) and [%zu, %zu))",
                       out->name, other->name, out->tensor->offset, out->end, other->tensor->offset,
                       other->end);
    }
  }
  return TSR_OK;
}

/* Presence, device and dtype validity: the phases before the op's own dtype
 * rules. */
tsr_status ck_check_common_front(checker *ck) {
  TRY(ck_check_presence(ck));
  return ck_check_dtypes_valid(ck);
}

/* Extents and bounds: the phases between the op's rank rules and its shape
 * rules. */
tsr_status ck_check_sizes_and_bounds(checker *ck) {
  TRY(ck_check_extents(ck));
  return ck_check_bounds(ck);
}

/* ---- conversion ---- */

void ck_convert_tensor(const tsr_tensor *t, tsr_plugin_tensor *p) {
  memset(p, 0, sizeof *p);
  if (t->buffer == NULL)
    return;
  p->buffer = t->buffer->handle;
  p->offset = t->offset;
  p->dtype = (int32_t)t->dtype;
  p->rank = t->rank;
  for (int32_t d = 0; d < t->rank; d++) {
    p->shape[d] = t->shape[d];
    p->strides[d] = t->strides[d];
  }
}

/* gemm operands as [batch, rows, cols]: rank 2 and batch-1 operands share one
 * matrix across the batch with a batch stride of 0. */
void ck_convert_batched(const tsr_tensor *t, int64_t batch, tsr_plugin_tensor *p) {
  ck_convert_tensor(t, p);
  if (t->buffer == NULL)
    return;
  if (t->rank == 2) {
    p->rank = 3;
    p->shape[2] = t->shape[1];
    p->shape[1] = t->shape[0];
    p->strides[2] = t->strides[1];
    p->strides[1] = t->strides[0];
    p->shape[0] = batch;
    p->strides[0] = 0;
  } else if (t->shape[0] == 1) {
    p->shape[0] = batch;
    p->strides[0] = 0;
  }
}
