/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Op argument validation: turns a public op descriptor into the plugin's args
 * struct, or fails with a status and a sentence naming the argument and the
 * values. Plugins rely on what is checked here (plugin.h), so every rule that
 * keeps a kernel inside its buffers lives here and nowhere else.
 *
 * Checks run in phases over all tensors of the op, in this order, so that the
 * status a caller gets does not depend on which tensor happens to come first:
 * descriptor size, presence and device, dtypes, ranks, extents and strides,
 * buffer bounds, extents fitting together, scalars and enums, then aliasing.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define MAX_SLOTS TSR__OP_MAX_TENSORS

enum slot_flags { SLOT_REQUIRED = 1u, SLOT_OUTPUT = 2u };

/* One tensor argument of an op, as the generic phases see it. */
typedef struct slot {
  const char *name;
  const tsr_tensor *tensor;
  unsigned flags;
  int32_t min_rank, max_rank;
  /* For an output: bit i set when slot i may be this exact same view (an
   * in-place form the op documents). */
  unsigned may_alias;
  /* One past the last byte the tensor reaches, from check_extents. */
  size_t end;
} slot;

typedef struct checker {
  tsr_device *device;
  const char *call;
  const char *op_name;
  slot slots[MAX_SLOTS];
  int count;
} checker;

#define TRY(expr)                                                                                  \
  do {                                                                                             \
    tsr_status try_status_ = (expr);                                                               \
    if (try_status_ != TSR_OK)                                                                     \
      return try_status_;                                                                          \
  } while (0)

static int add_slot(checker *ck, const char *name, const tsr_tensor *tensor, unsigned flags,
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

static bool present(const checker *ck, int index) {
  return ck->slots[index].tensor->buffer != NULL;
}

static const tsr_tensor *tensor_of(const checker *ck, int index) {
  return ck->slots[index].tensor;
}

/* ---- descriptor size ---- */

/* Reads only the leading struct_size before trusting the rest of `desc`. */
static tsr_status check_struct_size(const checker *ck, const void *desc, size_t needed,
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

static tsr_status check_presence(const checker *ck) {
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

static tsr_status check_dtypes_valid(const checker *ck) {
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
static tsr_status require_data_dtype(const checker *ck, int index) {
  const slot *s = &ck->slots[index];
  if (present(ck, index) && !is_data_dtype((int32_t)s->tensor->dtype))
    return tsr__fail(TSR_ERROR_DTYPE_MISMATCH, ck->call,
                     "%s.dtype = %s but %s takes f32, f16 or bf16", s->name,
                     dtype_label((int32_t)s->tensor->dtype), ck->op_name);
  return TSR_OK;
}

static tsr_status require_same_dtype(const checker *ck, int index, int reference) {
  const slot *s = &ck->slots[index];
  const slot *r = &ck->slots[reference];
  if (present(ck, index) && s->tensor->dtype != r->tensor->dtype)
    return tsr__fail(TSR_ERROR_DTYPE_MISMATCH, ck->call, "%s.dtype = %s but %s.dtype = %s", s->name,
                     dtype_label((int32_t)s->tensor->dtype), r->name,
                     dtype_label((int32_t)r->tensor->dtype));
  return TSR_OK;
}

static tsr_status require_same_dtype_or_f32(const checker *ck, int index, int reference) {
  const slot *s = &ck->slots[index];
  const slot *r = &ck->slots[reference];
  if (present(ck, index) && s->tensor->dtype != r->tensor->dtype &&
      s->tensor->dtype != TSR_DTYPE_F32)
    return tsr__fail(TSR_ERROR_DTYPE_MISMATCH, ck->call,
                     "%s.dtype = %s but %s.dtype = %s (%s takes %s's dtype or f32)", s->name,
                     dtype_label((int32_t)s->tensor->dtype), r->name,
                     dtype_label((int32_t)r->tensor->dtype), s->name, r->name);
  return TSR_OK;
}

static tsr_status require_dtype(const checker *ck, int index, tsr_dtype dtype) {
  const slot *s = &ck->slots[index];
  if (present(ck, index) && s->tensor->dtype != dtype)
    return tsr__fail(TSR_ERROR_DTYPE_MISMATCH, ck->call, "%s.dtype = %s but %s needs %s", s->name,
                     dtype_label((int32_t)s->tensor->dtype), s->name, dtype_label((int32_t)dtype));
  return TSR_OK;
}

/* ---- ranks ---- */

static tsr_status check_ranks(const checker *ck) {
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

static tsr_status require_same_rank(const checker *ck, int index, int reference) {
  const slot *s = &ck->slots[index];
  const slot *r = &ck->slots[reference];
  if (present(ck, index) && s->tensor->rank != r->tensor->rank)
    return tsr__fail(TSR_ERROR_RANK, ck->call,
                     "%s.rank = %" PRId32 " but %s.rank = %" PRId32 " (%s needs %s's shape)",
                     s->name, s->tensor->rank, r->name, r->tensor->rank, s->name, r->name);
  return TSR_OK;
}

/* ---- extents, strides, byte sizes ---- */

static tsr_status check_extents(checker *ck) {
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
      overflow |= __builtin_mul_overflow(bytes, (int64_t)tsr_dtype_size(t->dtype), &bytes);
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

static tsr_status check_bounds(const checker *ck) {
  for (int i = 0; i < ck->count; i++) {
    const slot *s = &ck->slots[i];
    const tsr_buffer *buffer = s->tensor->buffer;
    /* Kernels load whole elements (and vectors of them): an element never
     * straddles its natural alignment. */
    size_t element = tsr_dtype_size(s->tensor->dtype);
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

static tsr_status require_extent(const checker *ck, int index, int32_t dim, int reference,
                                 int32_t reference_dim) {
  const tsr_tensor *t = tensor_of(ck, index);
  const tsr_tensor *r = tensor_of(ck, reference);
  if (t->buffer != NULL && t->shape[dim] != r->shape[reference_dim])
    return tsr__fail(TSR_ERROR_SHAPE_MISMATCH, ck->call,
                     "%s.shape[%" PRId32 "] = %" PRId64 " but %s.shape[%" PRId32 "] = %" PRId64,
                     ck->slots[index].name, dim, t->shape[dim], ck->slots[reference].name,
                     reference_dim, r->shape[reference_dim]);
  return TSR_OK;
}

/* Same rank (checked earlier) and the same extent in every dimension. */
static tsr_status require_same_shape(const checker *ck, int index, int reference) {
  const tsr_tensor *t = tensor_of(ck, index);
  if (t->buffer == NULL)
    return TSR_OK;
  for (int32_t d = 0; d < t->rank; d++)
    TRY(require_extent(ck, index, d, reference, d));
  return TSR_OK;
}

/* ---- scalars ---- */

static tsr_status require_finite(const checker *ck, const char *name, float value) {
  if (!isfinite(value))
    return tsr__fail(TSR_ERROR_INVALID_VALUE, ck->call, "%s = %g but it must be finite", name,
                     (double)value);
  return TSR_OK;
}

static tsr_status require_finite_non_negative(const checker *ck, const char *name, float value) {
  TRY(require_finite(ck, name, value));
  if (value < 0.0f)
    return tsr__fail(TSR_ERROR_INVALID_VALUE, ck->call, "%s = %g but it must not be negative", name,
                     (double)value);
  return TSR_OK;
}

static tsr_status require_enum(const checker *ck, const char *name, int value, int count,
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

static tsr_status check_overlaps(const checker *ck) {
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
static tsr_status check_common_front(checker *ck) {
  TRY(check_presence(ck));
  return check_dtypes_valid(ck);
}

/* Extents and bounds: the phases between the op's rank rules and its shape
 * rules. */
static tsr_status check_sizes_and_bounds(checker *ck) {
  TRY(check_extents(ck));
  return check_bounds(ck);
}

/* ---- conversion ---- */

static void convert_tensor(const tsr_tensor *t, tsr_plugin_tensor *p) {
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
static void convert_batched(const tsr_tensor *t, int64_t batch, tsr_plugin_tensor *p) {
  convert_tensor(t, p);
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

/* ---- gemm ---- */

/* The batch extent of a rank-3 operand must be d's or 1 (broadcast). */
static tsr_status check_gemm_batch(const checker *ck, int index, int d_index) {
  const tsr_tensor *t = tensor_of(ck, index);
  const tsr_tensor *d = tensor_of(ck, d_index);
  if (t->buffer == NULL || t->rank != 3 || t->shape[0] == 1)
    return TSR_OK;
  if (d->rank == 2)
    return tsr__fail(TSR_ERROR_SHAPE_MISMATCH, ck->call,
                     "%s.shape[0] = %" PRId64 " but d is rank 2 (a batch of 1)",
                     ck->slots[index].name, t->shape[0]);
  if (t->shape[0] != d->shape[0])
    return tsr__fail(TSR_ERROR_SHAPE_MISMATCH, ck->call,
                     "%s.shape[0] = %" PRId64 " but d.shape[0] = %" PRId64
                     " (a batch extent must be d's or 1)",
                     ck->slots[index].name, t->shape[0], d->shape[0]);
  return TSR_OK;
}

static tsr_status check_compute_mode(const checker *ck, int compute, const tsr_tensor *a) {
  TRY(require_enum(ck, "compute", compute, TSR_COMPUTE_COUNT_, "tsr_compute_mode"));
  if (compute == TSR_COMPUTE_TF32 && a->dtype != TSR_DTYPE_F32)
    return tsr__fail(TSR_ERROR_INVALID_VALUE, ck->call,
                     "compute = tf32 but a.dtype = %s (tf32 applies to f32 inputs only)",
                     dtype_label((int32_t)a->dtype));
  return TSR_OK;
}

static tsr_status validate_gemm(checker *ck, const void *raw, tsr__op_args *out) {
  tsr_gemm_args *args = &out->u.gemm;
  TRY(check_struct_size(ck, raw, sizeof(tsr_gemm_desc), "tsr_gemm_desc"));
  const tsr_gemm_desc *desc = raw;
  out->variant = desc->variant;
  int a = add_slot(ck, "a", &desc->a, SLOT_REQUIRED, 2, 3);
  int b = add_slot(ck, "b", &desc->b, SLOT_REQUIRED, 2, 3);
  int c = add_slot(ck, "c", &desc->c, 0, 2, 3);
  int bias = add_slot(ck, "bias", &desc->bias, 0, 1, 1);
  int d = add_slot(ck, "d", &desc->d, SLOT_REQUIRED | SLOT_OUTPUT, 2, 3);
  ck->slots[d].may_alias = 1u << c;

  TRY(check_common_front(ck));
  TRY(require_data_dtype(ck, a));
  TRY(require_same_dtype(ck, b, a));
  TRY(require_same_dtype_or_f32(ck, d, a));
  TRY(require_same_dtype(ck, c, d));
  TRY(require_same_dtype(ck, bias, d));
  TRY(check_ranks(ck));
  TRY(check_sizes_and_bounds(ck));

  const tsr_tensor *ta = &desc->a, *tb = &desc->b, *tc = &desc->c, *td = &desc->d;
  int32_t ra = ta->rank, rb = tb->rank, rd = td->rank;
  TRY(require_extent(ck, a, ra - 1, b, rb - 2)); /* K */
  TRY(require_extent(ck, d, rd - 2, a, ra - 2)); /* M */
  TRY(require_extent(ck, d, rd - 1, b, rb - 1)); /* N */
  if (tc->buffer != NULL) {
    TRY(require_extent(ck, c, tc->rank - 2, d, rd - 2));
    TRY(require_extent(ck, c, tc->rank - 1, d, rd - 1));
  }
  TRY(require_extent(ck, bias, 0, d, rd - 1));
  TRY(check_gemm_batch(ck, a, d));
  TRY(check_gemm_batch(ck, b, d));
  TRY(check_gemm_batch(ck, c, d));

  TRY(require_finite(ck, "alpha", desc->alpha));
  if (tc->buffer != NULL)
    TRY(require_finite(ck, "beta", desc->beta));
  TRY(require_enum(ck, "activation", (int)desc->activation, TSR_ACT_COUNT_, "tsr_activation"));
  TRY(check_compute_mode(ck, (int)desc->compute, ta));

  TRY(check_overlaps(ck));

  int64_t batch = rd == 3 ? td->shape[0] : 1;
  args->struct_size = sizeof *args;
  convert_batched(ta, batch, &args->a);
  convert_batched(tb, batch, &args->b);
  convert_batched(tc, batch, &args->c);
  convert_tensor(&desc->bias, &args->bias);
  convert_batched(td, batch, &args->d);
  args->alpha = desc->alpha;
  args->beta = tc->buffer != NULL ? desc->beta : 0.0f;
  args->activation = (int32_t)desc->activation;
  args->compute = (int32_t)desc->compute;
  return TSR_OK;
}

/* ---- grouped gemm ---- */

static tsr_status check_group_sizes(const checker *ck, const tsr_grouped_gemm_desc *desc, int a) {
  int64_t total = 0;
  for (int64_t g = 0; g < desc->group_count; g++) {
    int64_t size = desc->group_sizes[g];
    if (size < 0)
      return tsr__fail(
          TSR_ERROR_BAD_SIZE, ck->call,
          "group_sizes[%" PRId64 "] = %" PRId64 " but group sizes must be non-negative", g, size);
    if (__builtin_add_overflow(total, size, &total))
      return tsr__fail(TSR_ERROR_BAD_SIZE, ck->call, "group_sizes overflow int64 when summed");
  }
  if (total != tensor_of(ck, a)->shape[0])
    return tsr__fail(TSR_ERROR_SHAPE_MISMATCH, ck->call,
                     "group_sizes sum to %" PRId64 " but a.shape[0] = %" PRId64, total,
                     tensor_of(ck, a)->shape[0]);
  return TSR_OK;
}

static tsr_status validate_grouped_gemm(checker *ck, const void *raw, tsr__op_args *out) {
  tsr_grouped_gemm_args *args = &out->u.grouped_gemm;
  TRY(check_struct_size(ck, raw, sizeof(tsr_grouped_gemm_desc), "tsr_grouped_gemm_desc"));
  const tsr_grouped_gemm_desc *desc = raw;
  out->variant = desc->variant;
  int a = add_slot(ck, "a", &desc->a, SLOT_REQUIRED, 2, 2);
  int b = add_slot(ck, "b", &desc->b, SLOT_REQUIRED, 3, 3);
  int bias = add_slot(ck, "bias", &desc->bias, 0, 2, 2);
  int d = add_slot(ck, "d", &desc->d, SLOT_REQUIRED | SLOT_OUTPUT, 2, 2);

  TRY(check_presence(ck));
  if (desc->group_sizes == NULL)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, ck->call, "group_sizes is NULL");
  TRY(check_dtypes_valid(ck));
  TRY(require_data_dtype(ck, a));
  TRY(require_same_dtype(ck, b, a));
  TRY(require_same_dtype_or_f32(ck, d, a));
  TRY(require_same_dtype(ck, bias, d));
  TRY(check_ranks(ck));
  TRY(check_extents(ck));
  if (desc->group_count <= 0)
    return tsr__fail(TSR_ERROR_BAD_SIZE, ck->call,
                     "group_count = %" PRId64 " but it must be positive", desc->group_count);
  TRY(check_bounds(ck));

  const tsr_tensor *tb = &desc->b;
  if (tb->shape[0] != desc->group_count)
    return tsr__fail(TSR_ERROR_SHAPE_MISMATCH, ck->call,
                     "b.shape[0] = %" PRId64 " but group_count = %" PRId64, tb->shape[0],
                     desc->group_count);
  TRY(require_extent(ck, a, 1, b, 1));    /* K */
  TRY(require_extent(ck, d, 0, a, 0));    /* T */
  TRY(require_extent(ck, d, 1, b, 2));    /* N */
  TRY(require_extent(ck, bias, 0, b, 0)); /* G */
  TRY(require_extent(ck, bias, 1, b, 2)); /* N */
  TRY(check_group_sizes(ck, desc, a));

  TRY(require_finite(ck, "alpha", desc->alpha));
  TRY(require_enum(ck, "activation", (int)desc->activation, TSR_ACT_COUNT_, "tsr_activation"));
  TRY(check_compute_mode(ck, (int)desc->compute, &desc->a));

  TRY(check_overlaps(ck));

  args->struct_size = sizeof *args;
  convert_tensor(&desc->a, &args->a);
  convert_tensor(&desc->b, &args->b);
  convert_tensor(&desc->bias, &args->bias);
  convert_tensor(&desc->d, &args->d);
  args->group_sizes = desc->group_sizes;
  args->group_count = desc->group_count;
  args->alpha = desc->alpha;
  args->activation = (int32_t)desc->activation;
  args->compute = (int32_t)desc->compute;
  return TSR_OK;
}

/* ---- attention ---- */

/* A window as plugins get it: -1 when unbounded, which it is when negative
 * or when it reaches past every key from every query row (positions run
 * from Skv - Sq to Skv - 1: a left window of Skv or more reaches below key
 * 0 from all of them, a right window of Sq or more past key Skv - 1). So a
 * plugin never sees a window of Skv or more (left) or Sq or more (right),
 * and position +- window cannot overflow, in 32 bits either when the
 * sequences fit. */
static int64_t unbounded_window(int64_t window, int64_t reach) {
  return window < 0 || window >= reach ? -1 : window;
}

static tsr_status validate_attention(checker *ck, const void *raw, tsr__op_args *out) {
  tsr_attention_args *args = &out->u.attention;
  TRY(check_struct_size(ck, raw, sizeof(tsr_attention_desc), "tsr_attention_desc"));
  const tsr_attention_desc *desc = raw;
  out->variant = desc->variant;
  int q = add_slot(ck, "q", &desc->q, SLOT_REQUIRED, 4, 4);
  int k = add_slot(ck, "k", &desc->k, SLOT_REQUIRED, 4, 4);
  int v = add_slot(ck, "v", &desc->v, SLOT_REQUIRED, 4, 4);
  int o = add_slot(ck, "o", &desc->o, SLOT_REQUIRED | SLOT_OUTPUT, 4, 4);
  int lse = add_slot(ck, "lse", &desc->lse, SLOT_OUTPUT, 3, 3);

  TRY(check_common_front(ck));
  TRY(require_data_dtype(ck, q));
  TRY(require_same_dtype(ck, k, q));
  TRY(require_same_dtype(ck, v, q));
  TRY(require_same_dtype(ck, o, q));
  TRY(require_dtype(ck, lse, TSR_DTYPE_F32));
  TRY(check_ranks(ck));
  TRY(check_sizes_and_bounds(ck));

  TRY(require_extent(ck, k, 0, q, 0)); /* B */
  TRY(require_extent(ck, k, 3, q, 3)); /* D */
  TRY(require_same_shape(ck, v, k));
  TRY(require_same_shape(ck, o, q));
  const int64_t heads_q = desc->q.shape[2], heads_kv = desc->k.shape[2];
  if (heads_q % heads_kv != 0)
    return tsr__fail(TSR_ERROR_SHAPE_MISMATCH, ck->call,
                     "q.shape[2] = %" PRId64 " is not a multiple of k.shape[2] = %" PRId64
                     " (query heads must share key/value heads evenly)",
                     heads_q, heads_kv);
  TRY(require_extent(ck, lse, 0, q, 0)); /* B */
  TRY(require_extent(ck, lse, 1, q, 2)); /* Hq */
  TRY(require_extent(ck, lse, 2, q, 1)); /* Sq */

  TRY(require_finite_non_negative(ck, "scale", desc->scale));
  if (desc->causal && desc->window_right > 0)
    return tsr__fail(TSR_ERROR_INVALID_VALUE, ck->call,
                     "window_right = %" PRId64 " but causal attention needs -1 or 0",
                     desc->window_right);

  TRY(check_overlaps(ck));

  args->struct_size = sizeof *args;
  convert_tensor(&desc->q, &args->q);
  convert_tensor(&desc->k, &args->k);
  convert_tensor(&desc->v, &args->v);
  convert_tensor(&desc->o, &args->o);
  convert_tensor(&desc->lse, &args->lse);
  args->scale = desc->scale != 0.0f ? desc->scale : (float)(1.0 / sqrt((double)desc->q.shape[3]));
  args->causal = desc->causal ? 1 : 0;
  args->window_left = unbounded_window(desc->window_left, desc->k.shape[1]);
  args->window_right = desc->causal ? 0 : unbounded_window(desc->window_right, desc->q.shape[1]);
  return TSR_OK;
}

/* ---- row ops ---- */

static tsr_status validate_rmsnorm(checker *ck, const void *raw, tsr__op_args *out) {
  tsr_rmsnorm_args *args = &out->u.rmsnorm;
  TRY(check_struct_size(ck, raw, sizeof(tsr_rmsnorm_desc), "tsr_rmsnorm_desc"));
  const tsr_rmsnorm_desc *desc = raw;
  out->variant = desc->variant;
  int x = add_slot(ck, "x", &desc->x, SLOT_REQUIRED, 1, TSR_MAX_RANK);
  int residual = add_slot(ck, "residual", &desc->residual, 0, 1, TSR_MAX_RANK);
  int weight = add_slot(ck, "weight", &desc->weight, 0, 1, 1);
  int y = add_slot(ck, "y", &desc->y, SLOT_REQUIRED | SLOT_OUTPUT, 1, TSR_MAX_RANK);
  int residual_out =
      add_slot(ck, "residual_out", &desc->residual_out, SLOT_OUTPUT, 1, TSR_MAX_RANK);
  ck->slots[y].may_alias = 1u << x;
  ck->slots[residual_out].may_alias = (1u << residual) | (1u << x);

  TRY(check_common_front(ck));
  TRY(require_data_dtype(ck, x));
  TRY(require_same_dtype(ck, residual, x));
  TRY(require_same_dtype_or_f32(ck, weight, x));
  TRY(require_same_dtype(ck, y, x));
  TRY(require_same_dtype(ck, residual_out, x));
  TRY(check_ranks(ck));
  TRY(require_same_rank(ck, residual, x));
  TRY(require_same_rank(ck, y, x));
  TRY(require_same_rank(ck, residual_out, x));
  TRY(check_sizes_and_bounds(ck));

  TRY(require_same_shape(ck, residual, x));
  TRY(require_same_shape(ck, y, x));
  TRY(require_same_shape(ck, residual_out, x));
  TRY(require_extent(ck, weight, 0, x, desc->x.rank - 1));

  TRY(require_finite_non_negative(ck, "eps", desc->eps));
  TRY(check_overlaps(ck));

  args->struct_size = sizeof *args;
  convert_tensor(&desc->x, &args->x);
  convert_tensor(&desc->residual, &args->residual);
  convert_tensor(&desc->weight, &args->weight);
  convert_tensor(&desc->y, &args->y);
  convert_tensor(&desc->residual_out, &args->residual_out);
  args->eps = desc->eps;
  return TSR_OK;
}

static tsr_status validate_layernorm(checker *ck, const void *raw, tsr__op_args *out) {
  tsr_layernorm_args *args = &out->u.layernorm;
  TRY(check_struct_size(ck, raw, sizeof(tsr_layernorm_desc), "tsr_layernorm_desc"));
  const tsr_layernorm_desc *desc = raw;
  out->variant = desc->variant;
  int x = add_slot(ck, "x", &desc->x, SLOT_REQUIRED, 1, TSR_MAX_RANK);
  int weight = add_slot(ck, "weight", &desc->weight, 0, 1, 1);
  int bias = add_slot(ck, "bias", &desc->bias, 0, 1, 1);
  int y = add_slot(ck, "y", &desc->y, SLOT_REQUIRED | SLOT_OUTPUT, 1, TSR_MAX_RANK);
  ck->slots[y].may_alias = 1u << x;

  TRY(check_common_front(ck));
  TRY(require_data_dtype(ck, x));
  TRY(require_same_dtype_or_f32(ck, weight, x));
  TRY(require_same_dtype_or_f32(ck, bias, x));
  TRY(require_same_dtype(ck, y, x));
  TRY(check_ranks(ck));
  TRY(require_same_rank(ck, y, x));
  TRY(check_sizes_and_bounds(ck));

  TRY(require_same_shape(ck, y, x));
  TRY(require_extent(ck, weight, 0, x, desc->x.rank - 1));
  TRY(require_extent(ck, bias, 0, x, desc->x.rank - 1));

  TRY(require_finite_non_negative(ck, "eps", desc->eps));
  TRY(check_overlaps(ck));

  args->struct_size = sizeof *args;
  convert_tensor(&desc->x, &args->x);
  convert_tensor(&desc->weight, &args->weight);
  convert_tensor(&desc->bias, &args->bias);
  convert_tensor(&desc->y, &args->y);
  args->eps = desc->eps;
  return TSR_OK;
}

static tsr_status validate_softmax(checker *ck, const void *raw, tsr__op_args *out) {
  tsr_softmax_args *args = &out->u.softmax;
  TRY(check_struct_size(ck, raw, sizeof(tsr_softmax_desc), "tsr_softmax_desc"));
  const tsr_softmax_desc *desc = raw;
  out->variant = desc->variant;
  int x = add_slot(ck, "x", &desc->x, SLOT_REQUIRED, 1, TSR_MAX_RANK);
  int y = add_slot(ck, "y", &desc->y, SLOT_REQUIRED | SLOT_OUTPUT, 1, TSR_MAX_RANK);
  ck->slots[y].may_alias = 1u << x;

  TRY(check_common_front(ck));
  TRY(require_data_dtype(ck, x));
  TRY(require_same_dtype(ck, y, x));
  TRY(check_ranks(ck));
  TRY(require_same_rank(ck, y, x));
  TRY(check_sizes_and_bounds(ck));
  TRY(require_same_shape(ck, y, x));
  TRY(require_finite_non_negative(ck, "scale", desc->scale));
  TRY(check_overlaps(ck));

  args->struct_size = sizeof *args;
  convert_tensor(&desc->x, &args->x);
  convert_tensor(&desc->y, &args->y);
  args->scale = desc->scale != 0.0f ? desc->scale : 1.0f;
  return TSR_OK;
}

/* ---- rope ---- */

static tsr_status validate_rope(checker *ck, const void *raw, tsr__op_args *out) {
  tsr_rope_args *args = &out->u.rope;
  TRY(check_struct_size(ck, raw, sizeof(tsr_rope_desc), "tsr_rope_desc"));
  const tsr_rope_desc *desc = raw;
  out->variant = desc->variant;
  int x = add_slot(ck, "x", &desc->x, SLOT_REQUIRED, 4, 4);
  int y = add_slot(ck, "y", &desc->y, SLOT_REQUIRED | SLOT_OUTPUT, 4, 4);
  ck->slots[y].may_alias = 1u << x;

  TRY(check_common_front(ck));
  TRY(require_data_dtype(ck, x));
  TRY(require_same_dtype(ck, y, x));
  TRY(check_ranks(ck));
  TRY(check_sizes_and_bounds(ck));

  TRY(require_same_shape(ck, y, x));
  const int64_t head_dim = desc->x.shape[3];
  if (head_dim % 2 != 0)
    return tsr__fail(TSR_ERROR_SHAPE_MISMATCH, ck->call,
                     "x.shape[3] = %" PRId64 " but rope needs an even head dimension", head_dim);
  if (desc->rotary_dim < 0 || desc->rotary_dim % 2 != 0 || desc->rotary_dim > head_dim)
    return tsr__fail(TSR_ERROR_INVALID_VALUE, ck->call,
                     "rotary_dim = %" PRId32 " but it must be even and in (0, x.shape[3] = %" PRId64
                     "] (or 0 for all of it)",
                     desc->rotary_dim, head_dim);

  TRY(require_finite_non_negative(ck, "theta", desc->theta));
  TRY(require_enum(ck, "style", (int)desc->style, TSR_ROPE_COUNT_, "tsr_rope_style"));
  int64_t last_position;
  if (__builtin_add_overflow(desc->position_offset, desc->x.shape[1] - 1, &last_position))
    return tsr__fail(TSR_ERROR_INVALID_VALUE, ck->call,
                     "position_offset = %" PRId64 " plus x.shape[1] = %" PRId64 " overflows int64",
                     desc->position_offset, desc->x.shape[1]);
  TRY(check_overlaps(ck));

  args->struct_size = sizeof *args;
  convert_tensor(&desc->x, &args->x);
  convert_tensor(&desc->y, &args->y);
  args->position_offset = desc->position_offset;
  args->theta = desc->theta != 0.0f ? desc->theta : 10000.0f;
  args->rotary_dim = desc->rotary_dim != 0 ? desc->rotary_dim : (int32_t)head_dim;
  args->style = (int32_t)desc->style;
  return TSR_OK;
}

/* ---- elementwise ---- */

static tsr_status validate_swiglu(checker *ck, const void *raw, tsr__op_args *out) {
  tsr_swiglu_args *args = &out->u.swiglu;
  TRY(check_struct_size(ck, raw, sizeof(tsr_swiglu_desc), "tsr_swiglu_desc"));
  const tsr_swiglu_desc *desc = raw;
  out->variant = desc->variant;
  int gate = add_slot(ck, "gate", &desc->gate, SLOT_REQUIRED, 1, TSR_MAX_RANK);
  int up = add_slot(ck, "up", &desc->up, SLOT_REQUIRED, 1, TSR_MAX_RANK);
  int y = add_slot(ck, "y", &desc->y, SLOT_REQUIRED | SLOT_OUTPUT, 1, TSR_MAX_RANK);
  ck->slots[y].may_alias = (1u << gate) | (1u << up);

  TRY(check_common_front(ck));
  TRY(require_data_dtype(ck, gate));
  TRY(require_same_dtype(ck, up, gate));
  TRY(require_same_dtype(ck, y, gate));
  TRY(check_ranks(ck));
  TRY(require_same_rank(ck, up, gate));
  TRY(require_same_rank(ck, y, gate));
  TRY(check_sizes_and_bounds(ck));
  TRY(require_same_shape(ck, up, gate));
  TRY(require_same_shape(ck, y, gate));
  TRY(check_overlaps(ck));

  args->struct_size = sizeof *args;
  convert_tensor(&desc->gate, &args->gate);
  convert_tensor(&desc->up, &args->up);
  convert_tensor(&desc->y, &args->y);
  return TSR_OK;
}

static tsr_status validate_gelu(checker *ck, const void *raw, tsr__op_args *out) {
  tsr_gelu_args *args = &out->u.gelu;
  TRY(check_struct_size(ck, raw, sizeof(tsr_gelu_desc), "tsr_gelu_desc"));
  const tsr_gelu_desc *desc = raw;
  out->variant = desc->variant;
  int x = add_slot(ck, "x", &desc->x, SLOT_REQUIRED, 1, TSR_MAX_RANK);
  int y = add_slot(ck, "y", &desc->y, SLOT_REQUIRED | SLOT_OUTPUT, 1, TSR_MAX_RANK);
  ck->slots[y].may_alias = 1u << x;

  TRY(check_common_front(ck));
  TRY(require_data_dtype(ck, x));
  TRY(require_same_dtype(ck, y, x));
  TRY(check_ranks(ck));
  TRY(require_same_rank(ck, y, x));
  TRY(check_sizes_and_bounds(ck));
  TRY(require_same_shape(ck, y, x));
  TRY(require_enum(ck, "approximate", (int)desc->approximate, TSR_GELU_COUNT_, "tsr_gelu_approx"));
  TRY(check_overlaps(ck));

  args->struct_size = sizeof *args;
  convert_tensor(&desc->x, &args->x);
  convert_tensor(&desc->y, &args->y);
  args->approximate = (int32_t)desc->approximate;
  return TSR_OK;
}

/* ---- cross entropy ---- */

static tsr_status validate_cross_entropy(checker *ck, const void *raw, tsr__op_args *out) {
  tsr_cross_entropy_args *args = &out->u.cross_entropy;
  TRY(check_struct_size(ck, raw, sizeof(tsr_cross_entropy_desc), "tsr_cross_entropy_desc"));
  const tsr_cross_entropy_desc *desc = raw;
  out->variant = desc->variant;
  int logits = add_slot(ck, "logits", &desc->logits, SLOT_REQUIRED, 2, 2);
  int targets = add_slot(ck, "targets", &desc->targets, SLOT_REQUIRED, 1, 1);
  int loss = add_slot(ck, "loss", &desc->loss, SLOT_REQUIRED | SLOT_OUTPUT, 1, 1);
  int lse = add_slot(ck, "lse", &desc->lse, SLOT_OUTPUT, 1, 1);

  TRY(check_common_front(ck));
  TRY(require_data_dtype(ck, logits));
  TRY(require_dtype(ck, targets, TSR_DTYPE_I32));
  TRY(require_dtype(ck, loss, TSR_DTYPE_F32));
  TRY(require_dtype(ck, lse, TSR_DTYPE_F32));
  TRY(check_ranks(ck));
  TRY(check_sizes_and_bounds(ck));

  TRY(require_extent(ck, targets, 0, logits, 0));
  TRY(require_extent(ck, loss, 0, logits, 0));
  TRY(require_extent(ck, lse, 0, logits, 0));
  TRY(check_overlaps(ck));

  args->struct_size = sizeof *args;
  convert_tensor(&desc->logits, &args->logits);
  convert_tensor(&desc->targets, &args->targets);
  convert_tensor(&desc->loss, &args->loss);
  convert_tensor(&desc->lse, &args->lse);
  args->ignore_index = desc->ignore_index;
  return TSR_OK;
}

/* ---- entry points ---- */

tsr_status tsr__validate_op(tsr_device *device, tsr_op op, const void *desc, const char *call,
                            tsr__op_args *out) {
  if (call == NULL)
    call = "tsr_op_run";
  if (device == NULL)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "device is NULL");
  if (out == NULL)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "out is NULL");
  const char *op_name = tsr_op_name(op);
  if (op_name == NULL)
    return tsr__fail(TSR_ERROR_INVALID_VALUE, call, "op = %d is not a tsr_op (0 to %d)", (int)op,
                     TSR_OP_COUNT_ - 1);

  checker ck;
  memset(&ck, 0, sizeof ck);
  ck.device = device;
  ck.call = call;
  ck.op_name = op_name;
  memset(out, 0, sizeof *out);
  out->op = op;

  tsr_status status = TSR_ERROR_INVALID_VALUE;
  switch (op) {
  case TSR_OP_GEMM:
    status = validate_gemm(&ck, desc, out);
    break;
  case TSR_OP_GROUPED_GEMM:
    status = validate_grouped_gemm(&ck, desc, out);
    break;
  case TSR_OP_ATTENTION:
    status = validate_attention(&ck, desc, out);
    break;
  case TSR_OP_RMSNORM:
    status = validate_rmsnorm(&ck, desc, out);
    break;
  case TSR_OP_LAYERNORM:
    status = validate_layernorm(&ck, desc, out);
    break;
  case TSR_OP_SOFTMAX:
    status = validate_softmax(&ck, desc, out);
    break;
  case TSR_OP_ROPE:
    status = validate_rope(&ck, desc, out);
    break;
  case TSR_OP_SWIGLU:
    status = validate_swiglu(&ck, desc, out);
    break;
  case TSR_OP_GELU:
    status = validate_gelu(&ck, desc, out);
    break;
  case TSR_OP_CROSS_ENTROPY:
    status = validate_cross_entropy(&ck, desc, out);
    break;
  case TSR_OP_COUNT_:
    break;
  }
  if (status == TSR_OK) {
    /* The buffers the op touches, so the queue can be remembered on each. */
    for (int i = 0; i < ck.count; i++)
      if (ck.slots[i].tensor->buffer != NULL)
        out->buffers[out->buffer_count++] = ck.slots[i].tensor->buffer;
  }
  return status;
}

const void *tsr__op_args_pointer(const tsr__op_args *args) {
  if (args == NULL)
    return NULL;
  switch (args->op) {
  case TSR_OP_GEMM:
    return &args->u.gemm;
  case TSR_OP_GROUPED_GEMM:
    return &args->u.grouped_gemm;
  case TSR_OP_ATTENTION:
    return &args->u.attention;
  case TSR_OP_RMSNORM:
    return &args->u.rmsnorm;
  case TSR_OP_LAYERNORM:
    return &args->u.layernorm;
  case TSR_OP_SOFTMAX:
    return &args->u.softmax;
  case TSR_OP_ROPE:
    return &args->u.rope;
  case TSR_OP_SWIGLU:
    return &args->u.swiglu;
  case TSR_OP_GELU:
    return &args->u.gelu;
  case TSR_OP_CROSS_ENTROPY:
    return &args->u.cross_entropy;
  case TSR_OP_COUNT_:
    break;
  }
  return NULL;
}
