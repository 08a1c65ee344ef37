/* SPDX-License-Identifier: Apache-2.0 */
/* Bad inputs of tsr_attention: each rule of the validation gives its status
 * and a sentence naming the argument, and nothing changes. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "api_test.h"

/* q [2, 3, 4, 8], k, v [2, 5, 2, 8] (GQA 2:1), o [2, 3, 4, 8], lse [2, 4, 3]. */
static tsr_attention_desc attention_good(const api_fixture *f) {
  tsr_attention_desc desc = TSR_ATTENTION_DESC_INIT;
  desc.q = api_tensor(f->buffers[0], 0, TSR_DTYPE_F32, 4, 2, 3, 4, 8);
  desc.k = api_tensor(f->buffers[1], 0, TSR_DTYPE_F32, 4, 2, 5, 2, 8);
  desc.v = api_tensor(f->buffers[2], 0, TSR_DTYPE_F32, 4, 2, 5, 2, 8);
  desc.o = api_tensor(f->buffers[3], 0, TSR_DTYPE_F32, 4, 2, 3, 4, 8);
  desc.lse = api_tensor(f->buffers[4], 0, TSR_DTYPE_F32, 3, 2, 4, 3, 0);
  desc.causal = 1;
  return desc;
}

API_EDIT(tsr_attention_desc, size_zero) {
  d->struct_size = 0;
}
API_EDIT(tsr_attention_desc, size_short) {
  d->struct_size = offsetof(tsr_attention_desc, cu_seqlens_q) - sizeof(void *);
}
API_EDIT(tsr_attention_desc, q_absent) {
  d->q.buffer = NULL;
}
API_EDIT(tsr_attention_desc, k_absent) {
  d->k.buffer = NULL;
}
API_EDIT(tsr_attention_desc, v_absent) {
  d->v.buffer = NULL;
}
API_EDIT(tsr_attention_desc, o_absent) {
  d->o.buffer = NULL;
}
API_EDIT(tsr_attention_desc, v_foreign) {
  d->v.buffer = f->foreign;
}
API_EDIT(tsr_attention_desc, lse_foreign) {
  d->lse.buffer = f->foreign;
}
API_EDIT(tsr_attention_desc, q_dtype_invalid) {
  d->q.dtype = TSR_DTYPE_INVALID;
}
API_EDIT(tsr_attention_desc, lse_dtype_invalid) {
  d->lse.dtype = (tsr_dtype)-4;
}
API_EDIT(tsr_attention_desc, q_i32) {
  d->q.dtype = TSR_DTYPE_I32;
  d->k.dtype = TSR_DTYPE_I32;
  d->v.dtype = TSR_DTYPE_I32;
  d->o.dtype = TSR_DTYPE_I32;
}
API_EDIT(tsr_attention_desc, k_f16) {
  d->k.dtype = TSR_DTYPE_F16;
}
API_EDIT(tsr_attention_desc, v_bf16) {
  d->v.dtype = TSR_DTYPE_BF16;
}
API_EDIT(tsr_attention_desc, o_f16) {
  d->o.dtype = TSR_DTYPE_F16;
}
API_EDIT(tsr_attention_desc, lse_f16) {
  d->lse.dtype = TSR_DTYPE_F16;
}
API_EDIT(tsr_attention_desc, lse_bf16_inputs) {
  d->q.dtype = TSR_DTYPE_BF16;
  d->k.dtype = TSR_DTYPE_BF16;
  d->v.dtype = TSR_DTYPE_BF16;
  d->o.dtype = TSR_DTYPE_BF16;
  d->lse.dtype = TSR_DTYPE_BF16;
}
API_EDIT(tsr_attention_desc, q_rank3) {
  d->q = api_tensor(d->q.buffer, 0, TSR_DTYPE_F32, 3, 6, 4, 8, 0);
}
API_EDIT(tsr_attention_desc, k_rank5) {
  d->k.rank = 5;
}
API_EDIT(tsr_attention_desc, o_rank2) {
  d->o = api_tensor(d->o.buffer, 0, TSR_DTYPE_F32, 2, 24, 8, 0, 0);
}
API_EDIT(tsr_attention_desc, lse_rank4) {
  d->lse = api_tensor(d->lse.buffer, 0, TSR_DTYPE_F32, 4, 2, 4, 3, 1);
}
API_EDIT(tsr_attention_desc, q_extent_zero) {
  d->q.shape[3] = 0;
}
API_EDIT(tsr_attention_desc, v_stride_negative) {
  d->v.strides[1] = -16;
}
API_EDIT(tsr_attention_desc, k_stride_overflow) {
  d->k.strides[0] = INT64_MAX;
}
API_EDIT(tsr_attention_desc, o_past_end) {
  d->o.offset = API_BUFFER_BYTES - 512;
}
API_EDIT(tsr_attention_desc, lse_past_end) {
  d->lse.strides[0] = 4096;
}
API_EDIT(tsr_attention_desc, k_batch) {
  d->k.shape[0] = 1;
  d->v.shape[0] = 1;
}
API_EDIT(tsr_attention_desc, k_head_dim) {
  d->k = api_tensor(d->k.buffer, 0, TSR_DTYPE_F32, 4, 2, 5, 2, 4);
  d->v = api_tensor(d->v.buffer, 0, TSR_DTYPE_F32, 4, 2, 5, 2, 4);
}
API_EDIT(tsr_attention_desc, v_keys) {
  d->v.shape[1] = 4;
}
API_EDIT(tsr_attention_desc, v_heads) {
  d->v = api_tensor(d->v.buffer, 0, TSR_DTYPE_F32, 4, 2, 5, 1, 8);
}
API_EDIT(tsr_attention_desc, o_queries) {
  d->o.shape[1] = 2;
}
API_EDIT(tsr_attention_desc, o_heads) {
  d->o = api_tensor(d->o.buffer, 0, TSR_DTYPE_F32, 4, 2, 3, 2, 8);
}
API_EDIT(tsr_attention_desc, heads_not_multiple) {
  d->k = api_tensor(d->k.buffer, 0, TSR_DTYPE_F32, 4, 2, 5, 3, 8);
  d->v = api_tensor(d->v.buffer, 0, TSR_DTYPE_F32, 4, 2, 5, 3, 8);
}
API_EDIT(tsr_attention_desc, lse_batch) {
  d->lse.shape[0] = 1;
}
API_EDIT(tsr_attention_desc, lse_heads) {
  d->lse.shape[1] = 2;
}
API_EDIT(tsr_attention_desc, lse_queries) {
  d->lse = api_tensor(d->lse.buffer, 0, TSR_DTYPE_F32, 3, 2, 4, 5, 0);
}
API_EDIT(tsr_attention_desc, scale_nan) {
  d->scale = NAN;
}
API_EDIT(tsr_attention_desc, scale_inf) {
  d->scale = INFINITY;
}
API_EDIT(tsr_attention_desc, scale_negative) {
  d->scale = -0.25f;
}
API_EDIT(tsr_attention_desc, causal_window_right) {
  d->causal = 1;
  d->window_right = 2;
}
API_EDIT(tsr_attention_desc, o_zero_stride) {
  d->o.strides[2] = 0;
}
API_EDIT(tsr_attention_desc, o_heads_overlap) {
  d->o.strides[2] = 4; /* heads 4 apart but 8 wide */
}
API_EDIT(tsr_attention_desc, o_is_q) {
  d->o = d->q;
}
API_EDIT(tsr_attention_desc, o_overlaps_v) {
  d->o.buffer = d->v.buffer;
  d->o.offset = 128;
}
API_EDIT(tsr_attention_desc, lse_overlaps_o) {
  d->lse.buffer = d->o.buffer;
  d->lse.offset = 256;
}
API_EDIT(tsr_attention_desc, lse_overlaps_k) {
  d->lse.buffer = d->k.buffer;
  d->lse.offset = 0;
}
API_EDIT(tsr_attention_desc, unknown_variant) {
  d->variant = "attention-nonexistent";
}

static const api_case attention_cases[] = {
    {"desc NULL", TSR_ERROR_NULL_ARGUMENT, "desc", NULL},
    {"struct_size 0", TSR_ERROR_STRUCT_SIZE, "struct_size = 0", size_zero},
    {"struct_size short", TSR_ERROR_STRUCT_SIZE, "tsr_attention_desc", size_short},
    {"q absent", TSR_ERROR_NULL_ARGUMENT, "q.buffer", q_absent},
    {"k absent", TSR_ERROR_NULL_ARGUMENT, "k.buffer", k_absent},
    {"v absent", TSR_ERROR_NULL_ARGUMENT, "v.buffer", v_absent},
    {"o absent", TSR_ERROR_NULL_ARGUMENT, "o.buffer", o_absent},
    {"v on another device", TSR_ERROR_WRONG_DEVICE, "v.buffer", v_foreign},
    {"lse on another device", TSR_ERROR_WRONG_DEVICE, "lse.buffer", lse_foreign},
    {"q.dtype invalid", TSR_ERROR_INVALID_VALUE, "q.dtype = 0", q_dtype_invalid},
    {"lse.dtype -4", TSR_ERROR_INVALID_VALUE, "lse.dtype = -4", lse_dtype_invalid},
    {"q i32", TSR_ERROR_DTYPE_MISMATCH, "q.dtype = i32", q_i32},
    {"k f16", TSR_ERROR_DTYPE_MISMATCH, "k.dtype = f16 but q.dtype = f32", k_f16},
    {"v bf16", TSR_ERROR_DTYPE_MISMATCH, "v.dtype = bf16 but q.dtype = f32", v_bf16},
    {"o f16", TSR_ERROR_DTYPE_MISMATCH, "o.dtype = f16 but q.dtype = f32", o_f16},
    {"lse f16", TSR_ERROR_DTYPE_MISMATCH, "lse.dtype = f16", lse_f16},
    {"lse bf16 with bf16 inputs", TSR_ERROR_DTYPE_MISMATCH, "lse.dtype = bf16", lse_bf16_inputs},
    {"q rank 3", TSR_ERROR_RANK, "q.rank = 3 but attention needs rank 4", q_rank3},
    {"k rank 5", TSR_ERROR_RANK, "k.rank = 5", k_rank5},
    {"o rank 2", TSR_ERROR_RANK, "o.rank = 2", o_rank2},
    {"lse rank 4", TSR_ERROR_RANK, "lse.rank = 4", lse_rank4},
    {"q extent 0", TSR_ERROR_BAD_SIZE, "q.shape[3] = 0", q_extent_zero},
    {"v stride negative", TSR_ERROR_BAD_SIZE, "v.strides[1] = -16", v_stride_negative},
    {"k stride overflows", TSR_ERROR_BAD_SIZE, "k's", k_stride_overflow},
    {"o past the end", TSR_ERROR_OUT_OF_BOUNDS, "o reaches byte 16640 of a 16384-byte buffer",
     o_past_end},
    {"lse past the end", TSR_ERROR_OUT_OF_BOUNDS, "lse reaches byte", lse_past_end},
    {"k batch", TSR_ERROR_SHAPE_MISMATCH, "k.shape[0] = 1 but q.shape[0] = 2", k_batch},
    {"k head dim", TSR_ERROR_SHAPE_MISMATCH, "k.shape[3] = 4 but q.shape[3] = 8", k_head_dim},
    {"v keys", TSR_ERROR_SHAPE_MISMATCH, "v.shape[1] = 4 but k.shape[1] = 5", v_keys},
    {"v heads", TSR_ERROR_SHAPE_MISMATCH, "v.shape[2] = 1 but k.shape[2] = 2", v_heads},
    {"o queries", TSR_ERROR_SHAPE_MISMATCH, "o.shape[1] = 2 but q.shape[1] = 3", o_queries},
    {"o heads", TSR_ERROR_SHAPE_MISMATCH, "o.shape[2] = 2 but q.shape[2] = 4", o_heads},
    {"Hq not a multiple of Hkv", TSR_ERROR_SHAPE_MISMATCH,
     "q.shape[2] = 4 is not a multiple of k.shape[2] = 3", heads_not_multiple},
    {"lse batch", TSR_ERROR_SHAPE_MISMATCH, "lse.shape[0] = 1 but q.shape[0] = 2", lse_batch},
    {"lse heads", TSR_ERROR_SHAPE_MISMATCH, "lse.shape[1] = 2 but q.shape[2] = 4", lse_heads},
    {"lse queries", TSR_ERROR_SHAPE_MISMATCH, "lse.shape[2] = 5 but q.shape[1] = 3", lse_queries},
    {"scale NaN", TSR_ERROR_INVALID_VALUE, "scale", scale_nan},
    {"scale inf", TSR_ERROR_INVALID_VALUE, "scale", scale_inf},
    {"scale negative", TSR_ERROR_INVALID_VALUE, "scale = -0.25", scale_negative},
    {"causal with window_right 2", TSR_ERROR_INVALID_VALUE, "window_right = 2",
     causal_window_right},
    {"o zero stride", TSR_ERROR_OVERLAP, "o.strides[2] = 0", o_zero_stride},
    {"o heads overlap", TSR_ERROR_OVERLAP, "o has elements", o_heads_overlap},
    {"o is q", TSR_ERROR_OVERLAP, "o overlaps input q", o_is_q},
    {"o overlaps v", TSR_ERROR_OVERLAP, "o overlaps input v", o_overlaps_v},
    {"lse overlaps o", TSR_ERROR_OVERLAP, "outputs o and lse overlap", lse_overlaps_o},
    {"lse overlaps k", TSR_ERROR_OVERLAP, "lse overlaps input k", lse_overlaps_k},
    {"unknown variant", TSR_ERROR_NOT_FOUND, "attention-nonexistent", unknown_variant},
};

int main(void) {
  api_fixture f;
  api_fixture_open(&f);

  tsr_attention_desc good = attention_good(&f);
  api_run_cases(&f, TSR_OP_ATTENTION, &good, sizeof good, attention_cases,
                API_COUNT(attention_cases));

  /* Forms that must be accepted: causal with window_right -1 or 0, no lse,
   * BHSD views through strides, a sliding window. */
  good.window_right = 0;
  CHECK_STATUS(tsr_attention(f.queue, &good), TSR_OK);
  good.causal = 0;
  good.window_left = 2;
  good.window_right = 1;
  good.lse.buffer = NULL;
  CHECK_STATUS(tsr_attention(f.queue, &good), TSR_OK);
  tsr_attention_desc bhsd = attention_good(&f);
  /* q stored [B, H, S, D]: element (b, s, h, c) at ((b * 4 + h) * 3 + s) * 8 + c. */
  bhsd.q.strides[0] = 96;
  bhsd.q.strides[1] = 8;
  bhsd.q.strides[2] = 24;
  CHECK_STATUS(tsr_attention(f.queue, &bhsd), TSR_OK);
  CHECK_STATUS(tsr_queue_finish(f.queue), TSR_OK);

  api_fixture_close(&f);
  return api_finish("test_validate_attention");
}
