/* SPDX-License-Identifier: Apache-2.0 */
/* Bad inputs of the serving forms of tsr_attention (packed, paged, seqlens,
 * softcap, length hints) and of tsr_kv_append: each rule gives its status
 * and a sentence naming the argument, and nothing changes. Then the good
 * forms run, and a caller built before the serving fields still works. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "api_test.h"

/* Paged decode: q [3, 1, 4, 8], k/v [6 blocks, 8, 2, 8], block_table
 * [3, 2], seqlens_kv [3]; indices in buffer 5 (table at 0, lengths at 64). */
static tsr_attention_desc paged_good(const api_fixture *f) {
  tsr_attention_desc desc = TSR_ATTENTION_DESC_INIT;
  desc.q = api_tensor(f->buffers[0], 0, TSR_DTYPE_F32, 4, 3, 1, 4, 8);
  desc.k = api_tensor(f->buffers[1], 0, TSR_DTYPE_F32, 4, 6, 8, 2, 8);
  desc.v = api_tensor(f->buffers[2], 0, TSR_DTYPE_F32, 4, 6, 8, 2, 8);
  desc.o = api_tensor(f->buffers[3], 0, TSR_DTYPE_F32, 4, 3, 1, 4, 8);
  desc.lse = api_tensor(f->buffers[4], 0, TSR_DTYPE_F32, 3, 3, 4, 1, 0);
  desc.block_table = api_tensor(f->buffers[5], 0, TSR_DTYPE_I32, 2, 3, 2, 0, 0);
  desc.seqlens_kv = api_tensor(f->buffers[5], 64, TSR_DTYPE_I32, 1, 3, 0, 0, 0);
  return desc;
}

/* Packed prefill: q, o [10, 4, 8], k, v [12, 2, 8], cu_seqlens_q/kv [3]
 * (at bytes 128 and 192 of buffer 5), lse [4, 10]. */
static tsr_attention_desc packed_good(const api_fixture *f) {
  tsr_attention_desc desc = TSR_ATTENTION_DESC_INIT;
  desc.q = api_tensor(f->buffers[0], 0, TSR_DTYPE_F32, 3, 10, 4, 8, 0);
  desc.k = api_tensor(f->buffers[1], 0, TSR_DTYPE_F32, 3, 12, 2, 8, 0);
  desc.v = api_tensor(f->buffers[2], 0, TSR_DTYPE_F32, 3, 12, 2, 8, 0);
  desc.o = api_tensor(f->buffers[3], 0, TSR_DTYPE_F32, 3, 10, 4, 8, 0);
  desc.lse = api_tensor(f->buffers[4], 0, TSR_DTYPE_F32, 2, 4, 10, 0, 0);
  desc.cu_seqlens_q = api_tensor(f->buffers[5], 128, TSR_DTYPE_I32, 1, 3, 0, 0, 0);
  desc.cu_seqlens_kv = api_tensor(f->buffers[5], 192, TSR_DTYPE_I32, 1, 3, 0, 0, 0);
  desc.causal = 1;
  desc.max_seqlen_q = 6;
  desc.max_seqlen_kv = 7;
  return desc;
}

API_EDIT(tsr_attention_desc, table_f32) {
  d->block_table.dtype = TSR_DTYPE_F32;
}
API_EDIT(tsr_attention_desc, seqlens_f16) {
  d->seqlens_kv.dtype = TSR_DTYPE_F16;
}
API_EDIT(tsr_attention_desc, table_without_seqlens) {
  d->seqlens_kv.buffer = NULL;
}
API_EDIT(tsr_attention_desc, table_rank1) {
  d->block_table = api_tensor(d->block_table.buffer, 0, TSR_DTYPE_I32, 1, 6, 0, 0, 0);
}
API_EDIT(tsr_attention_desc, table_rows) {
  d->block_table.shape[0] = 2;
}
API_EDIT(tsr_attention_desc, seqlens_rows) {
  d->seqlens_kv.shape[0] = 4;
}
API_EDIT(tsr_attention_desc, block_size_12) {
  d->k = api_tensor(d->k.buffer, 0, TSR_DTYPE_F32, 4, 4, 12, 2, 8);
  d->v = d->k;
}
API_EDIT(tsr_attention_desc, paged_and_packed_kv) {
  d->cu_seqlens_kv = api_tensor(f->buffers[5], 192, TSR_DTYPE_I32, 1, 4, 0, 0, 0);
}
API_EDIT(tsr_attention_desc, hint_kv_past_layout) {
  d->max_seqlen_kv = 17;
}
API_EDIT(tsr_attention_desc, hint_negative) {
  d->max_seqlen_kv = -1;
}
API_EDIT(tsr_attention_desc, hint_q_dense) {
  d->max_seqlen_q = 2;
}
API_EDIT(tsr_attention_desc, softcap_negative) {
  d->softcap = -1.0f;
}
API_EDIT(tsr_attention_desc, softcap_nan) {
  d->softcap = NAN;
}
API_EDIT(tsr_attention_desc, table_overlaps_o) {
  d->block_table.buffer = d->o.buffer;
}
API_EDIT(tsr_attention_desc, table_foreign) {
  d->block_table.buffer = f->foreign;
}
API_EDIT(tsr_attention_desc, table_past_end) {
  d->block_table.offset = API_BUFFER_BYTES - 8;
}

static const api_case paged_cases[] = {
    {"block_table f32", TSR_ERROR_DTYPE_MISMATCH, "block_table.dtype = f32", table_f32},
    {"seqlens_kv f16", TSR_ERROR_DTYPE_MISMATCH, "seqlens_kv.dtype = f16", seqlens_f16},
    {"block_table without seqlens_kv", TSR_ERROR_INVALID_VALUE, "without seqlens_kv",
     table_without_seqlens},
    {"block_table rank 1", TSR_ERROR_RANK, "block_table.rank = 1", table_rank1},
    {"block_table rows", TSR_ERROR_SHAPE_MISMATCH, "block_table.shape[0] = 2 but it must be 3",
     table_rows},
    {"seqlens_kv rows", TSR_ERROR_SHAPE_MISMATCH, "seqlens_kv.shape[0] = 4 but it must be 3",
     seqlens_rows},
    {"block size 12", TSR_ERROR_SHAPE_MISMATCH, "k.shape[1] = 12 is the block size", block_size_12},
    {"paged and packed keys", TSR_ERROR_INVALID_VALUE, "either packed or paged",
     paged_and_packed_kv},
    {"max_seqlen_kv past the table", TSR_ERROR_INVALID_VALUE, "max_seqlen_kv = 17",
     hint_kv_past_layout},
    {"max_seqlen_kv negative", TSR_ERROR_INVALID_VALUE, "max_seqlen_kv = -1", hint_negative},
    {"max_seqlen_q with dense q", TSR_ERROR_INVALID_VALUE, "max_seqlen_q = 2", hint_q_dense},
    {"softcap negative", TSR_ERROR_INVALID_VALUE, "softcap", softcap_negative},
    {"softcap NaN", TSR_ERROR_INVALID_VALUE, "softcap", softcap_nan},
    {"block_table in o's buffer", TSR_ERROR_OVERLAP, "block_table", table_overlaps_o},
    {"block_table on another device", TSR_ERROR_WRONG_DEVICE, "block_table.buffer", table_foreign},
    {"block_table past the end", TSR_ERROR_OUT_OF_BOUNDS, "block_table reaches byte",
     table_past_end},
};

API_EDIT(tsr_attention_desc, cu_q_rows) {
  d->cu_seqlens_q.shape[0] = 0;
}
API_EDIT(tsr_attention_desc, cu_kv_rows) {
  d->cu_seqlens_kv.shape[0] = 4;
}
API_EDIT(tsr_attention_desc, q_rank4_packed) {
  d->q = api_tensor(d->q.buffer, 0, TSR_DTYPE_F32, 4, 1, 10, 4, 8);
}
API_EDIT(tsr_attention_desc, lse_dense_layout) {
  d->lse = api_tensor(d->lse.buffer, 0, TSR_DTYPE_F32, 2, 10, 4, 0, 0);
}
API_EDIT(tsr_attention_desc, k_heads_packed) {
  d->k = api_tensor(d->k.buffer, 0, TSR_DTYPE_F32, 3, 12, 3, 8, 0);
  d->v = d->k;
}
API_EDIT(tsr_attention_desc, hint_q_past_total) {
  d->max_seqlen_q = 11;
}
API_EDIT(tsr_attention_desc, cu_q_i64_stride_zero) {
  d->cu_seqlens_q.dtype = TSR_DTYPE_BF16;
}

static const api_case packed_cases[] = {
    {"cu_seqlens_q empty", TSR_ERROR_BAD_SIZE, "cu_seqlens_q.shape[0] = 0", cu_q_rows},
    {"cu_seqlens_kv rows", TSR_ERROR_SHAPE_MISMATCH, "cu_seqlens_kv.shape[0] = 4 but it must be 3",
     cu_kv_rows},
    {"packed q of rank 4", TSR_ERROR_RANK, "q.rank = 4", q_rank4_packed},
    {"lse in the dense layout", TSR_ERROR_SHAPE_MISMATCH, "lse.shape[0] = 10 but q.shape[1] = 4",
     lse_dense_layout},
    {"kv heads", TSR_ERROR_SHAPE_MISMATCH, "is not a multiple of k.shape[1] = 3", k_heads_packed},
    {"max_seqlen_q past total", TSR_ERROR_INVALID_VALUE, "max_seqlen_q = 11", hint_q_past_total},
    {"cu_seqlens_q bf16", TSR_ERROR_DTYPE_MISMATCH, "cu_seqlens_q.dtype = bf16",
     cu_q_i64_stride_zero},
};

/* kv_append: k_new, v_new [3, 2, 8]; caches [4, 8, 2, 8]; slots [3]. */
static tsr_kv_append_desc append_good(const api_fixture *f) {
  tsr_kv_append_desc desc = TSR_KV_APPEND_DESC_INIT;
  desc.k_new = api_tensor(f->buffers[0], 0, TSR_DTYPE_F32, 3, 3, 2, 8, 0);
  desc.v_new = api_tensor(f->buffers[1], 0, TSR_DTYPE_F32, 3, 3, 2, 8, 0);
  desc.k_cache = api_tensor(f->buffers[2], 0, TSR_DTYPE_F32, 4, 4, 8, 2, 8);
  desc.v_cache = api_tensor(f->buffers[3], 0, TSR_DTYPE_F32, 4, 4, 8, 2, 8);
  desc.slots = api_tensor(f->buffers[5], 256, TSR_DTYPE_I32, 1, 3, 0, 0, 0);
  return desc;
}

API_EDIT(tsr_kv_append_desc, append_size_zero) {
  d->struct_size = 0;
}
API_EDIT(tsr_kv_append_desc, append_k_absent) {
  d->k_new.buffer = NULL;
}
API_EDIT(tsr_kv_append_desc, append_v_cache_absent) {
  d->v_cache.buffer = NULL;
}
API_EDIT(tsr_kv_append_desc, append_slots_absent) {
  d->slots.buffer = NULL;
}
API_EDIT(tsr_kv_append_desc, append_cache_f16) {
  d->k_cache.dtype = TSR_DTYPE_F16;
}
API_EDIT(tsr_kv_append_desc, append_slots_f32) {
  d->slots.dtype = TSR_DTYPE_F32;
}
API_EDIT(tsr_kv_append_desc, append_heads) {
  d->k_cache = api_tensor(d->k_cache.buffer, 0, TSR_DTYPE_F32, 4, 4, 8, 1, 8);
  d->v_cache = api_tensor(d->v_cache.buffer, 0, TSR_DTYPE_F32, 4, 4, 8, 1, 8);
}
API_EDIT(tsr_kv_append_desc, append_slots_rows) {
  d->slots.shape[0] = 2;
}
API_EDIT(tsr_kv_append_desc, append_cache_rank3) {
  d->k_cache = api_tensor(d->k_cache.buffer, 0, TSR_DTYPE_F32, 3, 32, 2, 8, 0);
}
API_EDIT(tsr_kv_append_desc, append_cache_is_new) {
  d->k_cache.buffer = d->k_new.buffer;
}
API_EDIT(tsr_kv_append_desc, append_i32) {
  d->k_new.dtype = TSR_DTYPE_I32;
  d->v_new.dtype = TSR_DTYPE_I32;
  d->k_cache.dtype = TSR_DTYPE_I32;
  d->v_cache.dtype = TSR_DTYPE_I32;
}

static const api_case append_cases[] = {
    {"struct_size 0", TSR_ERROR_STRUCT_SIZE, "struct_size = 0", append_size_zero},
    {"k_new absent", TSR_ERROR_NULL_ARGUMENT, "k_new.buffer", append_k_absent},
    {"v_cache absent with v_new", TSR_ERROR_NULL_ARGUMENT, "v_new is given without v_cache",
     append_v_cache_absent},
    {"slots absent", TSR_ERROR_NULL_ARGUMENT, "slots.buffer", append_slots_absent},
    {"k_cache f16", TSR_ERROR_DTYPE_MISMATCH, "k_cache.dtype = f16", append_cache_f16},
    {"slots f32", TSR_ERROR_DTYPE_MISMATCH, "slots.dtype = f32", append_slots_f32},
    {"cache heads", TSR_ERROR_SHAPE_MISMATCH, "k_cache.shape[2] = 1 but k_new.shape[1] = 2",
     append_heads},
    {"slots rows", TSR_ERROR_SHAPE_MISMATCH, "slots.shape[0] = 2 but k_new.shape[0] = 3",
     append_slots_rows},
    {"cache rank 3", TSR_ERROR_RANK, "k_cache.rank = 3", append_cache_rank3},
    {"cache in k_new's buffer", TSR_ERROR_OVERLAP, "k_cache", append_cache_is_new},
    {"i32 data", TSR_ERROR_DTYPE_MISMATCH, "k_new.dtype = i32", append_i32},
};

int main(void) {
  api_fixture f;
  api_fixture_open(&f);

  /* Good indices: the table names blocks 5, 2 | 0, 4 | 3, 1; lengths 16, 9,
   * 0; offsets 0, 4, 10 (queries) and 0, 7, 12 (keys); slots 3, -1, 31. */
  const int32_t table[6] = {5, 2, 0, 4, 3, 1}, lengths[3] = {16, 9, 0};
  const int32_t cu_q[3] = {0, 4, 10}, cu_kv[3] = {0, 7, 12}, slots[3] = {3, -1, 31};
  REQUIRE_OK(tsr_buffer_write(f.queue, f.buffers[5], 0, table, sizeof table));
  REQUIRE_OK(tsr_buffer_write(f.queue, f.buffers[5], 64, lengths, sizeof lengths));
  REQUIRE_OK(tsr_buffer_write(f.queue, f.buffers[5], 128, cu_q, sizeof cu_q));
  REQUIRE_OK(tsr_buffer_write(f.queue, f.buffers[5], 192, cu_kv, sizeof cu_kv));
  REQUIRE_OK(tsr_buffer_write(f.queue, f.buffers[5], 256, slots, sizeof slots));
  REQUIRE_OK(tsr_queue_finish(f.queue));

  tsr_attention_desc paged = paged_good(&f);
  api_run_cases(&f, TSR_OP_ATTENTION, &paged, sizeof paged, paged_cases, API_COUNT(paged_cases));
  tsr_attention_desc packed = packed_good(&f);
  api_run_cases(&f, TSR_OP_ATTENTION, &packed, sizeof packed, packed_cases,
                API_COUNT(packed_cases));
  tsr_kv_append_desc append = append_good(&f);
  api_run_cases(&f, TSR_OP_KV_APPEND, &append, sizeof append, append_cases,
                API_COUNT(append_cases));

  /* The good forms run and finish cleanly. */
  CHECK_STATUS(tsr_attention(f.queue, &paged), TSR_OK);
  CHECK_STATUS(tsr_queue_finish(f.queue), TSR_OK);
  paged.softcap = 30.0f;
  paged.max_seqlen_kv = 16;
  CHECK_STATUS(tsr_attention(f.queue, &paged), TSR_OK);
  CHECK_STATUS(tsr_queue_finish(f.queue), TSR_OK);
  CHECK_STATUS(tsr_attention(f.queue, &packed), TSR_OK);
  CHECK_STATUS(tsr_queue_finish(f.queue), TSR_OK);
  CHECK_STATUS(tsr_kv_append(f.queue, &append), TSR_OK);
  CHECK_STATUS(tsr_queue_finish(f.queue), TSR_OK);

  /* A hint shorter than a length is found on the device: sequence 0 has 16
   * keys, the hint says 15. */
  paged.max_seqlen_kv = 15;
  CHECK_STATUS(tsr_attention(f.queue, &paged), TSR_OK);
  CHECK_STATUS(tsr_queue_finish(f.queue), TSR_ERROR_INVALID_VALUE);
  CHECK(strstr(tsr_last_error(), "sequence 0 has more keys than max_seqlen_kv") != NULL);
  CHECK_STATUS(tsr_queue_finish(f.queue), TSR_OK); /* reported once */

  /* A slot past the cache: reported, the other rows written. */
  const int32_t bad_slots[3] = {3, 32, 0};
  REQUIRE_OK(tsr_buffer_write(f.queue, f.buffers[5], 256, bad_slots, sizeof bad_slots));
  CHECK_STATUS(tsr_kv_append(f.queue, &append), TSR_OK);
  CHECK_STATUS(tsr_queue_finish(f.queue), TSR_ERROR_INVALID_VALUE);
  CHECK(strstr(tsr_last_error(), "slots[1] is at or past num_blocks * block_size") != NULL);

  /* A caller built before the serving fields: the shorter struct is the
   * dense op. */
  tsr_attention_desc old = TSR_ATTENTION_DESC_INIT;
  old.struct_size = offsetof(tsr_attention_desc, cu_seqlens_q);
  old.q = api_tensor(f.buffers[0], 0, TSR_DTYPE_F32, 4, 2, 3, 4, 8);
  old.k = api_tensor(f.buffers[1], 0, TSR_DTYPE_F32, 4, 2, 5, 2, 8);
  old.v = api_tensor(f.buffers[2], 0, TSR_DTYPE_F32, 4, 2, 5, 2, 8);
  old.o = api_tensor(f.buffers[3], 0, TSR_DTYPE_F32, 4, 2, 3, 4, 8);
  old.block_table = paged.block_table; /* past its struct_size: never read */
  CHECK_STATUS(tsr_attention(f.queue, &old), TSR_OK);
  CHECK_STATUS(tsr_queue_finish(f.queue), TSR_OK);

  api_fixture_close(&f);
  return api_finish("test_validate_serving");
}
