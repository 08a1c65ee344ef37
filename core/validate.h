/* SPDX-License-Identifier: Apache-2.0 */
/* The checker shared by validate.c (one validator per op, the entry points)
 * and validate_check.c (the phases every op's tensors go through). Private to
 * core/. */
#ifndef TESSERA_VALIDATE_H
#define TESSERA_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>

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

static inline bool ck_present(const checker *ck, int index) {
  return ck->slots[index].tensor->buffer != NULL;
}

static inline const tsr_tensor *ck_tensor_of(const checker *ck, int index) {
  return ck->slots[index].tensor;
}

int ck_add_slot(checker *ck, const char *name, const tsr_tensor *tensor, unsigned flags,
                int32_t min_rank, int32_t max_rank);
tsr_status ck_check_struct_size(const checker *ck, const void *desc, size_t needed,
                                const char *struct_name);
tsr_status ck_check_presence(const checker *ck);
tsr_status ck_check_dtypes_valid(const checker *ck);
tsr_status ck_require_data_dtype(const checker *ck, int index);
tsr_status ck_require_same_dtype(const checker *ck, int index, int reference);
tsr_status ck_require_same_dtype_or_f32(const checker *ck, int index, int reference);
tsr_status ck_require_dtype(const checker *ck, int index, tsr_dtype dtype);
tsr_status ck_check_ranks(const checker *ck);
tsr_status ck_require_same_rank(const checker *ck, int index, int reference);
tsr_status ck_check_extents(checker *ck);
tsr_status ck_check_bounds(const checker *ck);
tsr_status ck_require_extent(const checker *ck, int index, int32_t dim, int reference,
                             int32_t reference_dim);
tsr_status ck_require_same_shape(const checker *ck, int index, int reference);
tsr_status ck_require_finite(const checker *ck, const char *name, float value);
tsr_status ck_require_finite_non_negative(const checker *ck, const char *name, float value);
tsr_status ck_require_enum(const checker *ck, const char *name, int value, int count,
                           const char *type_name);
tsr_status ck_check_overlaps(const checker *ck);
tsr_status ck_check_common_front(checker *ck);
tsr_status ck_check_sizes_and_bounds(checker *ck);
void ck_convert_tensor(const tsr_tensor *t, tsr_plugin_tensor *p);
void ck_convert_batched(const tsr_tensor *t, int64_t batch, tsr_plugin_tensor *p);

#endif /* TESSERA_VALIDATE_H */
