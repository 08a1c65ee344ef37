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
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "validate.h"

/* ---- gemm ---- */

/* The batch extent of a rank-3 operand must be d's or 1 (broadcast). */
static tsr_status check_gemm_batch(const checker *ck, int index, int d_index) {
  const tsr_tensor *t = ck_tensor_of(ck, index);
  const tsr_tensor *d = ck_tensor_of(ck, d_index);
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
  TRY(ck_require_enum(ck, "compute", compute, TSR_COMPUTE_COUNT_, "tsr_compute_mode"));
  if (compute == TSR_COMPUTE_TF32 && a->dtype != TSR_DTYPE_F32)
    return tsr__fail(TSR_ERROR_INVALID_VALUE, ck->call,
                     "compute = tf32 but a.dtype = %s (tf32 applies to f32 inputs only)",
                     tsr_dtype_name(a->dtype));
  return TSR_OK;
}

static tsr_status validate_gemm(checker *ck, const void *raw, tsr__op_args *out) {
  tsr_gemm_args *args = &out->u.gemm;
  TRY(ck_check_struct_size(ck, raw, sizeof(tsr_gemm_desc), "tsr_gemm_desc"));
  const tsr_gemm_desc *desc = raw;
  out->variant = desc->variant;
  int a = ck_add_slot(ck, "a", &desc->a, SLOT_REQUIRED, 2, 3);
  int b = ck_add_slot(ck, "b", &desc->b, SLOT_REQUIRED, 2, 3);
  int c = ck_add_slot(ck, "c", &desc->c, 0, 2, 3);
  int bias = ck_add_slot(ck, "bias", &desc->bias, 0, 1, 1);
  int d = ck_add_slot(ck, "d", &desc->d, SLOT_REQUIRED | SLOT_OUTPUT, 2, 3);
  ck->slots[d].may_alias = 1u << c;

  TRY(ck_check_common_front(ck));
  TRY(ck_require_data_dtype(ck, a));
  TRY(ck_require_same_dtype(ck, b, a));
  TRY(ck_require_same_dtype_or_f32(ck, d, a));
  TRY(ck_require_same_dtype(ck, c, d));
  TRY(ck_require_same_dtype(ck, bias, d));
  TRY(ck_check_ranks(ck));
  TRY(ck_check_sizes_and_bounds(ck));

  const tsr_tensor *ta = &desc->a, *tb = &desc->b, *tc = &desc->c, *td = &desc->d;
  int32_t ra = ta->rank, rb = tb->rank, rd = td->rank;
  TRY(ck_require_extent(ck, a, ra - 1, b, rb - 2)); /* K */
  TRY(ck_require_extent(ck, d, rd - 2, a, ra - 2)); /* M */
  TRY(ck_require_extent(ck, d, rd - 1, b, rb - 1)); /* N */
  if (tc->buffer != NULL) {
    TRY(ck_require_extent(ck, c, tc->rank - 2, d, rd - 2));
    TRY(ck_require_extent(ck, c, tc->rank - 1, d, rd - 1));
  }
  TRY(ck_require_extent(ck, bias, 0, d, rd - 1));
  TRY(check_gemm_batch(ck, a, d));
  TRY(check_gemm_batch(ck, b, d));
  TRY(check_gemm_batch(ck, c, d));

  TRY(ck_require_finite(ck, "alpha", desc->alpha));
  if (tc->buffer != NULL)
    TRY(ck_require_finite(ck, "beta", desc->beta));
  TRY(ck_require_enum(ck, "activation", (int)desc->activation, TSR_ACT_COUNT_, "tsr_activation"));
  TRY(check_compute_mode(ck, (int)desc->compute, ta));

  TRY(ck_check_overlaps(ck));

  int64_t batch = rd == 3 ? td->shape[0] : 1;
  args->struct_size = sizeof *args;
  ck_convert_batched(ta, batch, &args->a);
  ck_convert_batched(tb, batch, &args->b);
  ck_convert_batched(tc, batch, &args->c);
  ck_convert_tensor(&desc->bias, &args->bias);
  ck_convert_batched(td, batch, &args->d);
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
  if (total != ck_tensor_of(ck, a)->shape[0])
    return tsr__fail(TSR_ERROR_SHAPE_MISMATCH, ck->call,
                     "group_sizes sum to %" PRId64 " but a.shape[0] = %" PRId64, total,
                     ck_tensor_of(ck, a)->shape[0]);
  return TSR_OK;
}

static tsr_status validate_grouped_gemm(checker *ck, const void *raw, tsr__op_args *out) {
  tsr_grouped_gemm_args *args = &out->u.grouped_gemm;
  TRY(ck_check_struct_size(ck, raw, sizeof(tsr_grouped_gemm_desc), "tsr_grouped_gemm_desc"));
  const tsr_grouped_gemm_desc *desc = raw;
  out->variant = desc->variant;
  int a = ck_add_slot(ck, "a", &desc->a, SLOT_REQUIRED, 2, 2);
  int b = ck_add_slot(ck, "b", &desc->b, SLOT_REQUIRED, 3, 3);
  int bias = ck_add_slot(ck, "bias", &desc->bias, 0, 2, 2);
  int d = ck_add_slot(ck, "d", &desc->d, SLOT_REQUIRED | SLOT_OUTPUT, 2, 2);

  TRY(ck_check_presence(ck));
  if (desc->group_sizes == NULL)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, ck->call, "group_sizes is NULL");
  TRY(ck_check_dtypes_valid(ck));
  TRY(ck_require_data_dtype(ck, a));
  TRY(ck_require_same_dtype(ck, b, a));
  TRY(ck_require_same_dtype_or_f32(ck, d, a));
  TRY(ck_require_same_dtype(ck, bias, d));
  TRY(ck_check_ranks(ck));
  TRY(ck_check_extents(ck));
  if (desc->group_count <= 0)
    return tsr__fail(TSR_ERROR_BAD_SIZE, ck->call,
                     "group_count = %" PRId64 " but it must be positive", desc->group_count);
  TRY(ck_check_bounds(ck));

  const tsr_tensor *tb = &desc->b;
  if (tb->shape[0] != desc->group_count)
    return tsr__fail(TSR_ERROR_SHAPE_MISMATCH, ck->call,
                     "b.shape[0] = %" PRId64 " but group_count = %" PRId64, tb->shape[0],
                     desc->group_count);
  TRY(ck_require_extent(ck, a, 1, b, 1));    /* K */
  TRY(ck_require_extent(ck, d, 0, a, 0));    /* T */
  TRY(ck_require_extent(ck, d, 1, b, 2));    /* N */
  TRY(ck_require_extent(ck, bias, 0, b, 0)); /* G */
  TRY(ck_require_extent(ck, bias, 1, b, 2)); /* N */
  TRY(check_group_sizes(ck, desc, a));

  TRY(ck_require_finite(ck, "alpha", desc->alpha));
  TRY(ck_require_enum(ck, "activation", (int)desc->activation, TSR_ACT_COUNT_, "tsr_activation"));
  TRY(check_compute_mode(ck, (int)desc->compute, &desc->a));

  TRY(ck_check_overlaps(ck));

  args->struct_size = sizeof *args;
  ck_convert_tensor(&desc->a, &args->a);
  ck_convert_tensor(&desc->b, &args->b);
  ck_convert_tensor(&desc->bias, &args->bias);
  ck_convert_tensor(&desc->d, &args->d);
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

/* An i32 index tensor of the serving forms: rank 1 [extent] (rank 2 for the
 * block table, checked by the caller). */
static tsr_status require_index_extent(const checker *ck, int index, int64_t extent,
                                       const char *meaning) {
  const tsr_tensor *t = ck_tensor_of(ck, index);
  if (t->buffer != NULL && t->shape[0] != extent)
    return tsr__fail(TSR_ERROR_SHAPE_MISMATCH, ck->call,
                     "%s.shape[0] = %" PRId64 " but it must be %" PRId64 " (%s)",
                     ck->slots[index].name, t->shape[0], extent, meaning);
  return TSR_OK;
}

/* A host bound of the lengths: 0 means the layout's own bound; otherwise
 * it must lie in [1, layout]. */
static tsr_status resolve_bound(const checker *ck, const char *name, int64_t given, int64_t layout,
                                const char *layout_name, int64_t *out) {
  if (given < 0 || given > layout)
    return tsr__fail(TSR_ERROR_INVALID_VALUE, ck->call,
                     "%s = %" PRId64 " but it must be in [0, %" PRId64 "] (%s; 0: that bound)",
                     name, given, layout, layout_name);
  *out = given != 0 ? given : layout;
  return TSR_OK;
}

static tsr_status validate_attention(checker *ck, const void *raw, tsr__op_args *out) {
  tsr_attention_args *args = &out->u.attention;
  const size_t dense_size = offsetof(tsr_attention_desc, cu_seqlens_q);
  TRY(ck_check_struct_size(ck, raw, dense_size, "tsr_attention_desc"));
  /* A caller built before the serving fields passes the shorter struct: its
   * missing fields read as zero (the dense form). The copy outlives this
   * function because the checker's slots point into it until
   * tsr__validate_op has collected the buffers. */
  size_t given;
  memcpy(&given, raw, sizeof given);
  static _Thread_local tsr_attention_desc copy;
  memset(&copy, 0, sizeof copy);
  memcpy(&copy, raw, given < sizeof copy ? given : sizeof copy);
  const tsr_attention_desc *desc = &copy;
  out->variant = desc->variant;
  const bool packed_q = desc->cu_seqlens_q.buffer != NULL;
  const bool packed_kv = desc->cu_seqlens_kv.buffer != NULL;
  const bool paged = desc->block_table.buffer != NULL;
  const int32_t q_rank = packed_q ? 3 : 4, kv_rank = packed_kv ? 3 : 4;
  int q = ck_add_slot(ck, "q", &desc->q, SLOT_REQUIRED, q_rank, q_rank);
  int k = ck_add_slot(ck, "k", &desc->k, SLOT_REQUIRED, kv_rank, kv_rank);
  int v = ck_add_slot(ck, "v", &desc->v, SLOT_REQUIRED, kv_rank, kv_rank);
  int o = ck_add_slot(ck, "o", &desc->o, SLOT_REQUIRED | SLOT_OUTPUT, q_rank, q_rank);
  int lse = ck_add_slot(ck, "lse", &desc->lse, SLOT_OUTPUT, q_rank - 1, q_rank - 1);
  int cu_q = ck_add_slot(ck, "cu_seqlens_q", &desc->cu_seqlens_q, 0, 1, 1);
  int cu_kv = ck_add_slot(ck, "cu_seqlens_kv", &desc->cu_seqlens_kv, 0, 1, 1);
  int table = ck_add_slot(ck, "block_table", &desc->block_table, 0, 2, 2);
  int lens_kv = ck_add_slot(ck, "seqlens_kv", &desc->seqlens_kv, 0, 1, 1);

  TRY(ck_check_common_front(ck));
  TRY(ck_require_data_dtype(ck, q));
  TRY(ck_require_same_dtype(ck, k, q));
  TRY(ck_require_same_dtype(ck, v, q));
  TRY(ck_require_same_dtype(ck, o, q));
  TRY(ck_require_dtype(ck, lse, TSR_DTYPE_F32));
  TRY(ck_require_dtype(ck, cu_q, TSR_DTYPE_I32));
  TRY(ck_require_dtype(ck, cu_kv, TSR_DTYPE_I32));
  TRY(ck_require_dtype(ck, table, TSR_DTYPE_I32));
  TRY(ck_require_dtype(ck, lens_kv, TSR_DTYPE_I32));
  if (packed_kv && paged)
    return tsr__fail(TSR_ERROR_INVALID_VALUE, ck->call,
                     "cu_seqlens_kv and block_table are both given but keys are either packed "
                     "or paged");
  if (paged && !desc->seqlens_kv.buffer)
    return tsr__fail(TSR_ERROR_INVALID_VALUE, ck->call,
                     "block_table is given without seqlens_kv (a paged cache needs each "
                     "sequence's key count)");
  TRY(ck_check_ranks(ck));
  TRY(ck_check_sizes_and_bounds(ck));

  /* Extents: D is the last, heads the one before, in every layout. */
  const int32_t qd = q_rank - 1, kd = kv_rank - 1;
  TRY(ck_require_extent(ck, k, kd, q, qd)); /* D */
  TRY(ck_require_same_shape(ck, v, k));
  TRY(ck_require_same_shape(ck, o, q));
  const int64_t heads_q = desc->q.shape[qd - 1], heads_kv = desc->k.shape[kd - 1];
  if (heads_q % heads_kv != 0)
    return tsr__fail(TSR_ERROR_SHAPE_MISMATCH, ck->call,
                     "q.shape[%d] = %" PRId64 " is not a multiple of k.shape[%d] = %" PRId64
                     " (query heads must share key/value heads evenly)",
                     (int)(qd - 1), heads_q, (int)(kd - 1), heads_kv);
  int64_t batch;
  if (packed_q) {
    if (desc->cu_seqlens_q.shape[0] < 1)
      return tsr__fail(TSR_ERROR_SHAPE_MISMATCH, ck->call,
                       "cu_seqlens_q.shape[0] = 0 but it holds B + 1 offsets");
    batch = desc->cu_seqlens_q.shape[0] - 1;
    TRY(ck_require_extent(ck, lse, 0, q, 1)); /* Hq */
    TRY(ck_require_extent(ck, lse, 1, q, 0)); /* total_q */
  } else {
    batch = desc->q.shape[0];
    TRY(ck_require_extent(ck, lse, 0, q, 0)); /* B */
    TRY(ck_require_extent(ck, lse, 1, q, 2)); /* Hq */
    TRY(ck_require_extent(ck, lse, 2, q, 1)); /* Sq */
  }
  TRY(require_index_extent(ck, cu_kv, batch + 1, "B + 1 offsets"));
  TRY(require_index_extent(ck, table, batch, "a row per sequence"));
  TRY(require_index_extent(ck, lens_kv, batch, "a length per sequence"));
  int64_t kv_capacity; /* the most keys one sequence can have */
  if (paged) {
    const int64_t block_size = desc->k.shape[1];
    if (block_size % 8 != 0)
      return tsr__fail(TSR_ERROR_SHAPE_MISMATCH, ck->call,
                       "k.shape[1] = %" PRId64 " is the block size of a paged cache and must be "
                       "a multiple of 8",
                       block_size);
    if (__builtin_mul_overflow(desc->block_table.shape[1], block_size, &kv_capacity) ||
        kv_capacity > INT32_MAX)
      return tsr__fail(TSR_ERROR_INVALID_VALUE, ck->call,
                       "block_table.shape[1] = %" PRId64 " blocks of %" PRId64
                       " keys pass 2^31 - 1 keys per sequence",
                       desc->block_table.shape[1], block_size);
  } else if (packed_kv) {
    kv_capacity = desc->k.shape[0];
  } else {
    if (!packed_q)
      TRY(ck_require_extent(ck, k, 0, q, 0)); /* B */
    else if (desc->k.shape[0] != batch)
      return tsr__fail(TSR_ERROR_SHAPE_MISMATCH, ck->call,
                       "k.shape[0] = %" PRId64 " but cu_seqlens_q gives B = %" PRId64
                       " sequences (dense keys hold one row of keys a sequence)",
                       desc->k.shape[0], batch);
    kv_capacity = desc->k.shape[1];
  }
  const int64_t q_capacity = packed_q ? desc->q.shape[0] : desc->q.shape[1];
  if ((packed_q || packed_kv || paged) && (q_capacity > INT32_MAX || kv_capacity > INT32_MAX))
    return tsr__fail(TSR_ERROR_INVALID_VALUE, ck->call,
                     "%" PRId64 " query rows or %" PRId64 " keys pass the 2^31 - 1 that i32 "
                     "offsets reach",
                     q_capacity, kv_capacity);
  int64_t max_q = q_capacity, max_kv = kv_capacity;
  if (packed_q)
    TRY(resolve_bound(ck, "max_seqlen_q", desc->max_seqlen_q, q_capacity, "q.shape[0]", &max_q));
  else if (desc->max_seqlen_q != 0 && desc->max_seqlen_q != q_capacity)
    return tsr__fail(TSR_ERROR_INVALID_VALUE, ck->call,
                     "max_seqlen_q = %" PRId64 " but dense queries all have q.shape[1] = %" PRId64
                     " rows (0 or that)",
                     desc->max_seqlen_q, q_capacity);
  if (packed_kv || paged || desc->seqlens_kv.buffer)
    TRY(resolve_bound(ck, "max_seqlen_kv", desc->max_seqlen_kv, kv_capacity,
                      paged       ? "block_table.shape[1] * k.shape[1]"
                      : packed_kv ? "k.shape[0]"
                                  : "k.shape[1]",
                      &max_kv));
  else if (desc->max_seqlen_kv != 0 && desc->max_seqlen_kv != kv_capacity)
    return tsr__fail(TSR_ERROR_INVALID_VALUE, ck->call,
                     "max_seqlen_kv = %" PRId64 " but dense keys all have k.shape[1] = %" PRId64
                     " rows (0 or that; seqlens_kv gives shorter ones)",
                     desc->max_seqlen_kv, kv_capacity);

  TRY(ck_require_finite_non_negative(ck, "scale", desc->scale));
  TRY(ck_require_finite_non_negative(ck, "softcap", desc->softcap));
  if (desc->causal && desc->window_right > 0)
    return tsr__fail(TSR_ERROR_INVALID_VALUE, ck->call,
                     "window_right = %" PRId64 " but causal attention needs -1 or 0",
                     desc->window_right);
  const bool serving =
      packed_q || packed_kv || paged || desc->seqlens_kv.buffer || desc->softcap != 0.0f;
  if (serving && !(ck->device->info.op_mask & (1u << TSR_OP_KV_APPEND)))
    return tsr__fail(TSR_ERROR_UNSUPPORTED, ck->call,
                     "%s's plugin predates packed, paged and softcapped attention (it has no "
                     "kv_append)",
                     ck->device->info.selector);

  TRY(ck_check_overlaps(ck));

  args->struct_size = sizeof *args;
  ck_convert_tensor(&desc->q, &args->q);
  ck_convert_tensor(&desc->k, &args->k);
  ck_convert_tensor(&desc->v, &args->v);
  ck_convert_tensor(&desc->o, &args->o);
  ck_convert_tensor(&desc->lse, &args->lse);
  ck_convert_tensor(&desc->cu_seqlens_q, &args->cu_seqlens_q);
  ck_convert_tensor(&desc->cu_seqlens_kv, &args->cu_seqlens_kv);
  ck_convert_tensor(&desc->block_table, &args->block_table);
  ck_convert_tensor(&desc->seqlens_kv, &args->seqlens_kv);
  args->scale = desc->scale != 0.0f ? desc->scale : (float)(1.0 / sqrt((double)desc->q.shape[qd]));
  args->causal = desc->causal ? 1 : 0;
  args->window_left = unbounded_window(desc->window_left, max_kv);
  args->window_right = desc->causal ? 0 : unbounded_window(desc->window_right, max_q);
  args->batch = batch;
  args->max_seqlen_q = max_q;
  args->max_seqlen_kv = max_kv;
  args->softcap = desc->softcap;
  args->reserved = 0;
  return TSR_OK;
}

/* ---- kv_append ---- */

static tsr_status validate_kv_append(checker *ck, const void *raw, tsr__op_args *out) {
  tsr_kv_append_args *args = &out->u.kv_append;
  TRY(ck_check_struct_size(ck, raw, sizeof(tsr_kv_append_desc), "tsr_kv_append_desc"));
  const tsr_kv_append_desc *desc = raw;
  out->variant = desc->variant;
  int k_new = ck_add_slot(ck, "k_new", &desc->k_new, SLOT_REQUIRED, 3, 3);
  int v_new = ck_add_slot(ck, "v_new", &desc->v_new, 0, 3, 3);
  int k_cache = ck_add_slot(ck, "k_cache", &desc->k_cache, SLOT_REQUIRED | SLOT_OUTPUT, 4, 4);
  int v_cache = ck_add_slot(ck, "v_cache", &desc->v_cache, SLOT_OUTPUT, 4, 4);
  int slots = ck_add_slot(ck, "slots", &desc->slots, SLOT_REQUIRED, 1, 1);

  TRY(ck_check_common_front(ck));
  if ((desc->v_new.buffer == NULL) != (desc->v_cache.buffer == NULL))
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, ck->call,
                     "%s is given without %s (values are appended as a pair or not at all)",
                     desc->v_new.buffer ? "v_new" : "v_cache",
                     desc->v_new.buffer ? "v_cache" : "v_new");
  TRY(ck_require_data_dtype(ck, k_new));
  TRY(ck_require_same_dtype(ck, v_new, k_new));
  TRY(ck_require_same_dtype(ck, k_cache, k_new));
  TRY(ck_require_same_dtype(ck, v_cache, k_new));
  TRY(ck_require_dtype(ck, slots, TSR_DTYPE_I32));
  TRY(ck_check_ranks(ck));
  TRY(ck_check_sizes_and_bounds(ck));
  TRY(ck_require_same_shape(ck, v_new, k_new));
  TRY(ck_require_same_shape(ck, v_cache, k_cache));
  TRY(ck_require_extent(ck, k_cache, 2, k_new, 1)); /* Hkv */
  TRY(ck_require_extent(ck, k_cache, 3, k_new, 2)); /* D */
  TRY(ck_require_extent(ck, slots, 0, k_new, 0));   /* T */
  int64_t cache_slots;
  if (__builtin_mul_overflow(desc->k_cache.shape[0], desc->k_cache.shape[1], &cache_slots) ||
      cache_slots > INT32_MAX)
    return tsr__fail(TSR_ERROR_INVALID_VALUE, ck->call,
                     "k_cache holds %" PRId64 " x %" PRId64
                     " slots, more than i32 slots reach (2^31 - 1)",
                     desc->k_cache.shape[0], desc->k_cache.shape[1]);
  TRY(ck_check_overlaps(ck));

  args->struct_size = sizeof *args;
  ck_convert_tensor(&desc->k_new, &args->k_new);
  ck_convert_tensor(&desc->v_new, &args->v_new);
  ck_convert_tensor(&desc->k_cache, &args->k_cache);
  ck_convert_tensor(&desc->v_cache, &args->v_cache);
  ck_convert_tensor(&desc->slots, &args->slots);
  return TSR_OK;
}

/* ---- row ops ---- */

static tsr_status validate_rmsnorm(checker *ck, const void *raw, tsr__op_args *out) {
  tsr_rmsnorm_args *args = &out->u.rmsnorm;
  TRY(ck_check_struct_size(ck, raw, sizeof(tsr_rmsnorm_desc), "tsr_rmsnorm_desc"));
  const tsr_rmsnorm_desc *desc = raw;
  out->variant = desc->variant;
  int x = ck_add_slot(ck, "x", &desc->x, SLOT_REQUIRED, 1, TSR_MAX_RANK);
  int residual = ck_add_slot(ck, "residual", &desc->residual, 0, 1, TSR_MAX_RANK);
  int weight = ck_add_slot(ck, "weight", &desc->weight, 0, 1, 1);
  int y = ck_add_slot(ck, "y", &desc->y, SLOT_REQUIRED | SLOT_OUTPUT, 1, TSR_MAX_RANK);
  int residual_out =
      ck_add_slot(ck, "residual_out", &desc->residual_out, SLOT_OUTPUT, 1, TSR_MAX_RANK);
  ck->slots[y].may_alias = 1u << x;
  ck->slots[residual_out].may_alias = (1u << residual) | (1u << x);

  TRY(ck_check_common_front(ck));
  TRY(ck_require_data_dtype(ck, x));
  TRY(ck_require_same_dtype(ck, residual, x));
  TRY(ck_require_same_dtype_or_f32(ck, weight, x));
  TRY(ck_require_same_dtype(ck, y, x));
  TRY(ck_require_same_dtype(ck, residual_out, x));
  TRY(ck_check_ranks(ck));
  TRY(ck_require_same_rank(ck, residual, x));
  TRY(ck_require_same_rank(ck, y, x));
  TRY(ck_require_same_rank(ck, residual_out, x));
  TRY(ck_check_sizes_and_bounds(ck));

  TRY(ck_require_same_shape(ck, residual, x));
  TRY(ck_require_same_shape(ck, y, x));
  TRY(ck_require_same_shape(ck, residual_out, x));
  TRY(ck_require_extent(ck, weight, 0, x, desc->x.rank - 1));

  TRY(ck_require_finite_non_negative(ck, "eps", desc->eps));
  TRY(ck_check_overlaps(ck));

  args->struct_size = sizeof *args;
  ck_convert_tensor(&desc->x, &args->x);
  ck_convert_tensor(&desc->residual, &args->residual);
  ck_convert_tensor(&desc->weight, &args->weight);
  ck_convert_tensor(&desc->y, &args->y);
  ck_convert_tensor(&desc->residual_out, &args->residual_out);
  args->eps = desc->eps;
  return TSR_OK;
}

static tsr_status validate_layernorm(checker *ck, const void *raw, tsr__op_args *out) {
  tsr_layernorm_args *args = &out->u.layernorm;
  TRY(ck_check_struct_size(ck, raw, sizeof(tsr_layernorm_desc), "tsr_layernorm_desc"));
  const tsr_layernorm_desc *desc = raw;
  out->variant = desc->variant;
  int x = ck_add_slot(ck, "x", &desc->x, SLOT_REQUIRED, 1, TSR_MAX_RANK);
  int weight = ck_add_slot(ck, "weight", &desc->weight, 0, 1, 1);
  int bias = ck_add_slot(ck, "bias", &desc->bias, 0, 1, 1);
  int y = ck_add_slot(ck, "y", &desc->y, SLOT_REQUIRED | SLOT_OUTPUT, 1, TSR_MAX_RANK);
  ck->slots[y].may_alias = 1u << x;

  TRY(ck_check_common_front(ck));
  TRY(ck_require_data_dtype(ck, x));
  TRY(ck_require_same_dtype_or_f32(ck, weight, x));
  TRY(ck_require_same_dtype_or_f32(ck, bias, x));
  TRY(ck_require_same_dtype(ck, y, x));
  TRY(ck_check_ranks(ck));
  TRY(ck_require_same_rank(ck, y, x));
  TRY(ck_check_sizes_and_bounds(ck));

  TRY(ck_require_same_shape(ck, y, x));
  TRY(ck_require_extent(ck, weight, 0, x, desc->x.rank - 1));
  TRY(ck_require_extent(ck, bias, 0, x, desc->x.rank - 1));

  TRY(ck_require_finite_non_negative(ck, "eps", desc->eps));
  TRY(ck_check_overlaps(ck));

  args->struct_size = sizeof *args;
  ck_convert_tensor(&desc->x, &args->x);
  ck_convert_tensor(&desc->weight, &args->weight);
  ck_convert_tensor(&desc->bias, &args->bias);
  ck_convert_tensor(&desc->y, &args->y);
  args->eps = desc->eps;
  return TSR_OK;
}

static tsr_status validate_softmax(checker *ck, const void *raw, tsr__op_args *out) {
  tsr_softmax_args *args = &out->u.softmax;
  TRY(ck_check_struct_size(ck, raw, sizeof(tsr_softmax_desc), "tsr_softmax_desc"));
  const tsr_softmax_desc *desc = raw;
  out->variant = desc->variant;
  int x = ck_add_slot(ck, "x", &desc->x, SLOT_REQUIRED, 1, TSR_MAX_RANK);
  int y = ck_add_slot(ck, "y", &desc->y, SLOT_REQUIRED | SLOT_OUTPUT, 1, TSR_MAX_RANK);
  ck->slots[y].may_alias = 1u << x;

  TRY(ck_check_common_front(ck));
  TRY(ck_require_data_dtype(ck, x));
  TRY(ck_require_same_dtype(ck, y, x));
  TRY(ck_check_ranks(ck));
  TRY(ck_require_same_rank(ck, y, x));
  TRY(ck_check_sizes_and_bounds(ck));
  TRY(ck_require_same_shape(ck, y, x));
  TRY(ck_require_finite_non_negative(ck, "scale", desc->scale));
  TRY(ck_check_overlaps(ck));

  args->struct_size = sizeof *args;
  ck_convert_tensor(&desc->x, &args->x);
  ck_convert_tensor(&desc->y, &args->y);
  args->scale = desc->scale != 0.0f ? desc->scale : 1.0f;
  return TSR_OK;
}

/* ---- rope ---- */

static tsr_status validate_rope(checker *ck, const void *raw, tsr__op_args *out) {
  tsr_rope_args *args = &out->u.rope;
  TRY(ck_check_struct_size(ck, raw, sizeof(tsr_rope_desc), "tsr_rope_desc"));
  const tsr_rope_desc *desc = raw;
  out->variant = desc->variant;
  int x = ck_add_slot(ck, "x", &desc->x, SLOT_REQUIRED, 4, 4);
  int y = ck_add_slot(ck, "y", &desc->y, SLOT_REQUIRED | SLOT_OUTPUT, 4, 4);
  ck->slots[y].may_alias = 1u << x;

  TRY(ck_check_common_front(ck));
  TRY(ck_require_data_dtype(ck, x));
  TRY(ck_require_same_dtype(ck, y, x));
  TRY(ck_check_ranks(ck));
  TRY(ck_check_sizes_and_bounds(ck));

  TRY(ck_require_same_shape(ck, y, x));
  const int64_t head_dim = desc->x.shape[3];
  if (head_dim % 2 != 0)
    return tsr__fail(TSR_ERROR_SHAPE_MISMATCH, ck->call,
                     "x.shape[3] = %" PRId64 " but rope needs an even head dimension", head_dim);
  if (desc->rotary_dim < 0 || desc->rotary_dim % 2 != 0 || desc->rotary_dim > head_dim)
    return tsr__fail(TSR_ERROR_INVALID_VALUE, ck->call,
                     "rotary_dim = %" PRId32 " but it must be even and in (0, x.shape[3] = %" PRId64
                     "] (or 0 for all of it)",
                     desc->rotary_dim, head_dim);

  TRY(ck_require_finite_non_negative(ck, "theta", desc->theta));
  TRY(ck_require_enum(ck, "style", (int)desc->style, TSR_ROPE_COUNT_, "tsr_rope_style"));
  int64_t last_position;
  if (__builtin_add_overflow(desc->position_offset, desc->x.shape[1] - 1, &last_position))
    return tsr__fail(TSR_ERROR_INVALID_VALUE, ck->call,
                     "position_offset = %" PRId64 " plus x.shape[1] = %" PRId64 " overflows int64",
                     desc->position_offset, desc->x.shape[1]);
  TRY(ck_check_overlaps(ck));

  args->struct_size = sizeof *args;
  ck_convert_tensor(&desc->x, &args->x);
  ck_convert_tensor(&desc->y, &args->y);
  args->position_offset = desc->position_offset;
  args->theta = desc->theta != 0.0f ? desc->theta : 10000.0f;
  args->rotary_dim = desc->rotary_dim != 0 ? desc->rotary_dim : (int32_t)head_dim;
  args->style = (int32_t)desc->style;
  return TSR_OK;
}

/* ---- elementwise ---- */

static tsr_status validate_swiglu(checker *ck, const void *raw, tsr__op_args *out) {
  tsr_swiglu_args *args = &out->u.swiglu;
  TRY(ck_check_struct_size(ck, raw, sizeof(tsr_swiglu_desc), "tsr_swiglu_desc"));
  const tsr_swiglu_desc *desc = raw;
  out->variant = desc->variant;
  int gate = ck_add_slot(ck, "gate", &desc->gate, SLOT_REQUIRED, 1, TSR_MAX_RANK);
  int up = ck_add_slot(ck, "up", &desc->up, SLOT_REQUIRED, 1, TSR_MAX_RANK);
  int y = ck_add_slot(ck, "y", &desc->y, SLOT_REQUIRED | SLOT_OUTPUT, 1, TSR_MAX_RANK);
  ck->slots[y].may_alias = (1u << gate) | (1u << up);

  TRY(ck_check_common_front(ck));
  TRY(ck_require_data_dtype(ck, gate));
  TRY(ck_require_same_dtype(ck, up, gate));
  TRY(ck_require_same_dtype(ck, y, gate));
  TRY(ck_check_ranks(ck));
  TRY(ck_require_same_rank(ck, up, gate));
  TRY(ck_require_same_rank(ck, y, gate));
  TRY(ck_check_sizes_and_bounds(ck));
  TRY(ck_require_same_shape(ck, up, gate));
  TRY(ck_require_same_shape(ck, y, gate));
  TRY(ck_check_overlaps(ck));

  args->struct_size = sizeof *args;
  ck_convert_tensor(&desc->gate, &args->gate);
  ck_convert_tensor(&desc->up, &args->up);
  ck_convert_tensor(&desc->y, &args->y);
  return TSR_OK;
}

static tsr_status validate_gelu(checker *ck, const void *raw, tsr__op_args *out) {
  tsr_gelu_args *args = &out->u.gelu;
  TRY(ck_check_struct_size(ck, raw, sizeof(tsr_gelu_desc), "tsr_gelu_desc"));
  const tsr_gelu_desc *desc = raw;
  out->variant = desc->variant;
  int x = ck_add_slot(ck, "x", &desc->x, SLOT_REQUIRED, 1, TSR_MAX_RANK);
  int y = ck_add_slot(ck, "y", &desc->y, SLOT_REQUIRED | SLOT_OUTPUT, 1, TSR_MAX_RANK);
  ck->slots[y].may_alias = 1u << x;

  TRY(ck_check_common_front(ck));
  TRY(ck_require_data_dtype(ck, x));
  TRY(ck_require_same_dtype(ck, y, x));
  TRY(ck_check_ranks(ck));
  TRY(ck_require_same_rank(ck, y, x));
  TRY(ck_check_sizes_and_bounds(ck));
  TRY(ck_require_same_shape(ck, y, x));
  TRY(ck_require_enum(ck, "approximate", (int)desc->approximate, TSR_GELU_COUNT_,
                      "tsr_gelu_approx"));
  TRY(ck_check_overlaps(ck));

  args->struct_size = sizeof *args;
  ck_convert_tensor(&desc->x, &args->x);
  ck_convert_tensor(&desc->y, &args->y);
  args->approximate = (int32_t)desc->approximate;
  return TSR_OK;
}

/* ---- cross entropy ---- */

static tsr_status validate_cross_entropy(checker *ck, const void *raw, tsr__op_args *out) {
  tsr_cross_entropy_args *args = &out->u.cross_entropy;
  TRY(ck_check_struct_size(ck, raw, sizeof(tsr_cross_entropy_desc), "tsr_cross_entropy_desc"));
  const tsr_cross_entropy_desc *desc = raw;
  out->variant = desc->variant;
  int logits = ck_add_slot(ck, "logits", &desc->logits, SLOT_REQUIRED, 2, 2);
  int targets = ck_add_slot(ck, "targets", &desc->targets, SLOT_REQUIRED, 1, 1);
  int loss = ck_add_slot(ck, "loss", &desc->loss, SLOT_REQUIRED | SLOT_OUTPUT, 1, 1);
  int lse = ck_add_slot(ck, "lse", &desc->lse, SLOT_OUTPUT, 1, 1);

  TRY(ck_check_common_front(ck));
  TRY(ck_require_data_dtype(ck, logits));
  TRY(ck_require_dtype(ck, targets, TSR_DTYPE_I32));
  TRY(ck_require_dtype(ck, loss, TSR_DTYPE_F32));
  TRY(ck_require_dtype(ck, lse, TSR_DTYPE_F32));
  TRY(ck_check_ranks(ck));
  TRY(ck_check_sizes_and_bounds(ck));

  TRY(ck_require_extent(ck, targets, 0, logits, 0));
  TRY(ck_require_extent(ck, loss, 0, logits, 0));
  TRY(ck_require_extent(ck, lse, 0, logits, 0));
  TRY(ck_check_overlaps(ck));

  args->struct_size = sizeof *args;
  ck_convert_tensor(&desc->logits, &args->logits);
  ck_convert_tensor(&desc->targets, &args->targets);
  ck_convert_tensor(&desc->loss, &args->loss);
  ck_convert_tensor(&desc->lse, &args->lse);
  args->ignore_index = desc->ignore_index;
  return TSR_OK;
}

/* ---- entry points ---- */

int tsr__op_tensor_count(tsr_op op) {
  static const int counts[TSR_OP_COUNT_] = {5, 4, 5, 5, 4, 2, 2, 3, 2, 4, 5};
  return (int)op >= 0 && op < TSR_OP_COUNT_ ? counts[op] : 0;
}

/* The alignment of each plugin tensor's first byte, for the op cache's
 * signature: the buffer's (its allocation or the caller's pointer) and the
 * offset's, whichever is smaller. */
static void record_alignments(const checker *ck, tsr__op_args *out) {
  const tsr_plugin_tensor *tensors =
      (const tsr_plugin_tensor *)((const char *)tsr__op_args_pointer(out) +
                                  offsetof(tsr_gemm_args, a));
  int count = tsr__op_tensor_count(out->op);
  memset(out->tensor_align_log2, 0xff, sizeof out->tensor_align_log2);
  for (int t = 0; t < count; t++) {
    const tsr_plugin_tensor *p = &tensors[t];
    if (!p->buffer)
      continue;
    /* Validators add slots in the args' order: slot t first, then a search.
     * A tensor is always found (its buffer and offset came from a slot). */
    const tsr_buffer *buffer = NULL;
    for (int k = 0; k < ck->count && !buffer; k++) {
      const tsr_tensor *d = ck->slots[(t + k) % ck->count].tensor;
      if (d->buffer && d->buffer->handle == p->buffer && d->offset == p->offset)
        buffer = d->buffer;
    }
    unsigned align = buffer ? tsr__address_align_log2(buffer, p->offset) : 0;
    out->tensor_align_log2[t] = (uint8_t)align;
  }
}

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

  /* Slots are cleared as they are added; of `out`, the header here, each
   * tensor by its conversion and the scalars' words (padding included, which
   * the op cache's signature reads) below. */
  checker ck;
  ck.device = device;
  ck.call = call;
  ck.op_name = op_name;
  ck.count = 0;
  out->op = op;
  out->variant = NULL;
  out->buffer_count = 0;
  size_t args_end = tsr_plugin_args_size(op);
  size_t tensors_end =
      offsetof(tsr_gemm_args, a) + (size_t)tsr__op_tensor_count(op) * sizeof(tsr_plugin_tensor);
  if (args_end > tensors_end)
    memset((char *)&out->u + tensors_end, 0, args_end - tensors_end);

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
  case TSR_OP_KV_APPEND:
    status = validate_kv_append(&ck, desc, out);
    break;
  case TSR_OP_COUNT_:
    break;
  }
  if (status == TSR_OK) {
    /* The buffers the op touches, so the queue can be remembered on each. */
    for (int i = 0; i < ck.count; i++)
      if (ck.slots[i].tensor->buffer != NULL)
        out->buffers[out->buffer_count++] = ck.slots[i].tensor->buffer;
    record_alignments(&ck, out);
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
  case TSR_OP_KV_APPEND:
    return &args->u.kv_append;
  case TSR_OP_COUNT_:
    break;
  }
  return NULL;
}
