/* SPDX-License-Identifier: Apache-2.0 */
/* Bad inputs of tsr_gemm and tsr_grouped_gemm: each rule of the validation
 * gives its status and a sentence naming the argument, and nothing changes. */
#include <math.h>
#include <stdint.h>

#include "api_test.h"

/* ---- gemm: a [4, 8] x b [8, 5] + c [4, 5] + bias [5] -> d [4, 5] ---- */

static tsr_gemm_desc gemm_good(const api_fixture *f) {
  tsr_gemm_desc desc = TSR_GEMM_DESC_INIT;
  desc.a = api_tensor(f->buffers[0], 0, TSR_DTYPE_F32, 2, 4, 8, 0, 0);
  desc.b = api_tensor(f->buffers[1], 0, TSR_DTYPE_F32, 2, 8, 5, 0, 0);
  desc.c = api_tensor(f->buffers[2], 0, TSR_DTYPE_F32, 2, 4, 5, 0, 0);
  desc.bias = api_tensor(f->buffers[3], 0, TSR_DTYPE_F32, 1, 5, 0, 0, 0);
  desc.d = api_tensor(f->buffers[4], 0, TSR_DTYPE_F32, 2, 4, 5, 0, 0);
  desc.alpha = 1.0f;
  desc.beta = 0.5f;
  desc.activation = TSR_ACT_RELU;
  return desc;
}

API_EDIT(tsr_gemm_desc, gemm_size_zero) {
  d->struct_size = 0;
}
API_EDIT(tsr_gemm_desc, gemm_size_short) {
  d->struct_size = sizeof *d - 1;
}
API_EDIT(tsr_gemm_desc, gemm_a_absent) {
  d->a.buffer = NULL;
}
API_EDIT(tsr_gemm_desc, gemm_b_absent) {
  d->b.buffer = NULL;
}
API_EDIT(tsr_gemm_desc, gemm_d_absent) {
  d->d.buffer = NULL;
}
API_EDIT(tsr_gemm_desc, gemm_a_foreign) {
  d->a.buffer = f->foreign;
}
API_EDIT(tsr_gemm_desc, gemm_c_foreign) {
  d->c.buffer = f->foreign;
}
API_EDIT(tsr_gemm_desc, gemm_a_dtype_zero) {
  d->a.dtype = TSR_DTYPE_INVALID;
}
API_EDIT(tsr_gemm_desc, gemm_a_dtype_99) {
  d->a.dtype = (tsr_dtype)99;
}
API_EDIT(tsr_gemm_desc, gemm_bias_dtype_count) {
  d->bias.dtype = TSR_DTYPE_COUNT_;
}
API_EDIT(tsr_gemm_desc, gemm_ab_i32) {
  d->a.dtype = TSR_DTYPE_I32;
  d->b.dtype = TSR_DTYPE_I32;
}
API_EDIT(tsr_gemm_desc, gemm_b_f16) {
  d->b.dtype = TSR_DTYPE_F16;
}
API_EDIT(tsr_gemm_desc, gemm_d_bf16_for_f16) {
  d->a.dtype = TSR_DTYPE_F16;
  d->b.dtype = TSR_DTYPE_F16;
  d->c.dtype = TSR_DTYPE_BF16;
  d->bias.dtype = TSR_DTYPE_BF16;
  d->d.dtype = TSR_DTYPE_BF16;
}
API_EDIT(tsr_gemm_desc, gemm_d_f16_for_f32) {
  d->d.dtype = TSR_DTYPE_F16;
}
API_EDIT(tsr_gemm_desc, gemm_c_f16) {
  d->c.dtype = TSR_DTYPE_F16;
}
API_EDIT(tsr_gemm_desc, gemm_bias_f32_for_f16_d) {
  d->a.dtype = TSR_DTYPE_F16;
  d->b.dtype = TSR_DTYPE_F16;
  d->c.dtype = TSR_DTYPE_F16;
  d->d.dtype = TSR_DTYPE_F16;
}
API_EDIT(tsr_gemm_desc, gemm_a_rank1) {
  d->a.rank = 1;
}
API_EDIT(tsr_gemm_desc, gemm_a_rank4) {
  d->a = api_tensor(d->a.buffer, 0, TSR_DTYPE_F32, 4, 1, 1, 4, 8);
}
API_EDIT(tsr_gemm_desc, gemm_b_rank0) {
  d->b.rank = 0;
}
API_EDIT(tsr_gemm_desc, gemm_b_rank_negative) {
  d->b.rank = -3;
}
API_EDIT(tsr_gemm_desc, gemm_d_rank5) {
  d->d.rank = 5;
}
API_EDIT(tsr_gemm_desc, gemm_c_rank1) {
  d->c.rank = 1;
}
API_EDIT(tsr_gemm_desc, gemm_bias_rank2) {
  d->bias = api_tensor(d->bias.buffer, 0, TSR_DTYPE_F32, 2, 1, 5, 0, 0);
}
API_EDIT(tsr_gemm_desc, gemm_a_extent_zero) {
  d->a.shape[0] = 0;
}
API_EDIT(tsr_gemm_desc, gemm_b_extent_negative) {
  d->b.shape[1] = -5;
}
API_EDIT(tsr_gemm_desc, gemm_d_stride_negative) {
  d->d.strides[0] = -1;
}
API_EDIT(tsr_gemm_desc, gemm_a_count_overflow) {
  d->a.shape[0] = INT64_C(1) << 40;
  d->a.shape[1] = INT64_C(1) << 40;
}
API_EDIT(tsr_gemm_desc, gemm_a_stride_overflow) {
  d->a.strides[0] = INT64_MAX / 2;
}
API_EDIT(tsr_gemm_desc, gemm_d_offset_overflow) {
  d->d.offset = SIZE_MAX - 8;
}
API_EDIT(tsr_gemm_desc, gemm_a_offset_past_end) {
  d->a.offset = API_BUFFER_BYTES - 64;
}
API_EDIT(tsr_gemm_desc, gemm_d_stride_past_end) {
  d->d.strides[0] = 4096;
}
API_EDIT(tsr_gemm_desc, gemm_bias_offset_past_end) {
  d->bias.offset = API_BUFFER_BYTES - 16;
}
API_EDIT(tsr_gemm_desc, gemm_a_misaligned) {
  d->a.offset = 2;
}
API_EDIT(tsr_gemm_desc, gemm_k_mismatch) {
  d->b.shape[0] = 6;
}
API_EDIT(tsr_gemm_desc, gemm_m_mismatch) {
  d->d.shape[0] = 3;
}
API_EDIT(tsr_gemm_desc, gemm_n_mismatch) {
  d->d.shape[1] = 6;
  d->d.strides[0] = 6;
}
API_EDIT(tsr_gemm_desc, gemm_c_mismatch) {
  d->c.shape[1] = 4;
}
API_EDIT(tsr_gemm_desc, gemm_bias_mismatch) {
  d->bias.shape[0] = 4;
}
API_EDIT(tsr_gemm_desc, gemm_batch_mismatch) {
  d->a = api_tensor(d->a.buffer, 0, TSR_DTYPE_F32, 3, 3, 4, 8, 0);
  d->d = api_tensor(d->d.buffer, 0, TSR_DTYPE_F32, 3, 2, 4, 5, 0);
}
API_EDIT(tsr_gemm_desc, gemm_batch_without_d_batch) {
  d->b = api_tensor(d->b.buffer, 0, TSR_DTYPE_F32, 3, 2, 8, 5, 0);
}
API_EDIT(tsr_gemm_desc, gemm_c_batch_mismatch) {
  d->c = api_tensor(d->c.buffer, 0, TSR_DTYPE_F32, 3, 3, 4, 5, 0);
  d->d = api_tensor(d->d.buffer, 0, TSR_DTYPE_F32, 3, 2, 4, 5, 0);
}
API_EDIT(tsr_gemm_desc, gemm_alpha_nan) {
  d->alpha = NAN;
}
API_EDIT(tsr_gemm_desc, gemm_alpha_inf) {
  d->alpha = INFINITY;
}
API_EDIT(tsr_gemm_desc, gemm_beta_inf) {
  d->beta = -INFINITY;
}
API_EDIT(tsr_gemm_desc, gemm_activation_count) {
  d->activation = TSR_ACT_COUNT_;
}
API_EDIT(tsr_gemm_desc, gemm_activation_negative) {
  d->activation = (tsr_activation)-1;
}
API_EDIT(tsr_gemm_desc, gemm_compute_count) {
  d->compute = TSR_COMPUTE_COUNT_;
}
API_EDIT(tsr_gemm_desc, gemm_tf32_with_bf16) {
  d->a.dtype = TSR_DTYPE_BF16;
  d->b.dtype = TSR_DTYPE_BF16;
  d->compute = TSR_COMPUTE_TF32;
}
API_EDIT(tsr_gemm_desc, gemm_d_zero_stride) {
  d->d.strides[0] = 0;
}
API_EDIT(tsr_gemm_desc, gemm_d_self_overlap) {
  d->d.strides[0] = 2; /* rows 2 elements apart but 5 long */
}
API_EDIT(tsr_gemm_desc, gemm_d_overlaps_a) {
  d->d.buffer = d->a.buffer;
  d->d.offset = 16;
}
API_EDIT(tsr_gemm_desc, gemm_d_overlaps_c_shifted) {
  d->d.buffer = d->c.buffer;
  d->d.offset = 4;
}
API_EDIT(tsr_gemm_desc, gemm_d_same_as_c_other_strides) {
  d->d.buffer = d->c.buffer;
  d->d.strides[0] = 1; /* d is c transposed-in-memory: same bytes, other view */
  d->d.strides[1] = 4;
}
API_EDIT(tsr_gemm_desc, gemm_d_overlaps_bias) {
  d->d.buffer = d->bias.buffer;
  d->d.offset = 0;
}
API_EDIT(tsr_gemm_desc, gemm_unknown_variant) {
  d->variant = "no-such-variant";
}

static const api_case gemm_cases[] = {
    {"desc NULL", TSR_ERROR_NULL_ARGUMENT, "desc", NULL},
    {"struct_size 0", TSR_ERROR_STRUCT_SIZE, "struct_size = 0", gemm_size_zero},
    {"struct_size short", TSR_ERROR_STRUCT_SIZE, "struct_size", gemm_size_short},
    {"a absent", TSR_ERROR_NULL_ARGUMENT, "a.buffer", gemm_a_absent},
    {"b absent", TSR_ERROR_NULL_ARGUMENT, "b.buffer", gemm_b_absent},
    {"d absent", TSR_ERROR_NULL_ARGUMENT, "d.buffer", gemm_d_absent},
    {"a on another device", TSR_ERROR_WRONG_DEVICE, "a.buffer", gemm_a_foreign},
    {"c on another device", TSR_ERROR_WRONG_DEVICE, "c.buffer", gemm_c_foreign},
    {"a.dtype invalid", TSR_ERROR_INVALID_VALUE, "a.dtype = 0", gemm_a_dtype_zero},
    {"a.dtype 99", TSR_ERROR_INVALID_VALUE, "a.dtype = 99", gemm_a_dtype_99},
    {"bias.dtype count", TSR_ERROR_INVALID_VALUE, "bias.dtype", gemm_bias_dtype_count},
    {"a, b i32", TSR_ERROR_DTYPE_MISMATCH, "a.dtype = i32", gemm_ab_i32},
    {"b f16, a f32", TSR_ERROR_DTYPE_MISMATCH, "b.dtype = f16 but a.dtype = f32", gemm_b_f16},
    {"d bf16, a f16", TSR_ERROR_DTYPE_MISMATCH, "d.dtype = bf16 but a.dtype = f16",
     gemm_d_bf16_for_f16},
    {"d f16, a f32", TSR_ERROR_DTYPE_MISMATCH, "d.dtype = f16 but a.dtype = f32",
     gemm_d_f16_for_f32},
    {"c f16, d f32", TSR_ERROR_DTYPE_MISMATCH, "c.dtype = f16 but d.dtype = f32", gemm_c_f16},
    {"bias f32, d f16", TSR_ERROR_DTYPE_MISMATCH, "bias.dtype = f32 but d.dtype = f16",
     gemm_bias_f32_for_f16_d},
    {"a rank 1", TSR_ERROR_RANK, "a.rank = 1", gemm_a_rank1},
    {"a rank 4", TSR_ERROR_RANK, "a.rank = 4", gemm_a_rank4},
    {"b rank 0", TSR_ERROR_RANK, "b.rank = 0", gemm_b_rank0},
    {"b rank -3", TSR_ERROR_RANK, "b.rank = -3", gemm_b_rank_negative},
    {"d rank 5", TSR_ERROR_RANK, "d.rank = 5", gemm_d_rank5},
    {"c rank 1", TSR_ERROR_RANK, "c.rank = 1", gemm_c_rank1},
    {"bias rank 2", TSR_ERROR_RANK, "bias.rank = 2", gemm_bias_rank2},
    {"a extent 0", TSR_ERROR_BAD_SIZE, "a.shape[0] = 0", gemm_a_extent_zero},
    {"b extent -5", TSR_ERROR_BAD_SIZE, "b.shape[1] = -5", gemm_b_extent_negative},
    {"d stride -1", TSR_ERROR_BAD_SIZE, "d.strides[0] = -1", gemm_d_stride_negative},
    {"a element count overflows", TSR_ERROR_BAD_SIZE, "a's", gemm_a_count_overflow},
    {"a stride overflows", TSR_ERROR_BAD_SIZE, "a's", gemm_a_stride_overflow},
    {"d offset overflows", TSR_ERROR_BAD_SIZE, "d's", gemm_d_offset_overflow},
    {"a past the end", TSR_ERROR_OUT_OF_BOUNDS, "a reaches byte 16448 of a 16384-byte buffer",
     gemm_a_offset_past_end},
    {"d stride past the end", TSR_ERROR_OUT_OF_BOUNDS, "d reaches byte", gemm_d_stride_past_end},
    {"bias past the end", TSR_ERROR_OUT_OF_BOUNDS, "bias reaches byte", gemm_bias_offset_past_end},
    {"a misaligned", TSR_ERROR_INVALID_VALUE,
     "a.offset = 2 is not a multiple of the f32 element size (4)", gemm_a_misaligned},
    {"K mismatch", TSR_ERROR_SHAPE_MISMATCH, "a.shape[1] = 8 but b.shape[0] = 6", gemm_k_mismatch},
    {"M mismatch", TSR_ERROR_SHAPE_MISMATCH, "d.shape[0] = 3 but a.shape[0] = 4", gemm_m_mismatch},
    {"N mismatch", TSR_ERROR_SHAPE_MISMATCH, "d.shape[1] = 6 but b.shape[1] = 5", gemm_n_mismatch},
    {"c shape", TSR_ERROR_SHAPE_MISMATCH, "c.shape[1] = 4 but d.shape[1] = 5", gemm_c_mismatch},
    {"bias shape", TSR_ERROR_SHAPE_MISMATCH, "bias.shape[0] = 4 but d.shape[1] = 5",
     gemm_bias_mismatch},
    {"batch mismatch", TSR_ERROR_SHAPE_MISMATCH, "a.shape[0] = 3 but d.shape[0] = 2",
     gemm_batch_mismatch},
    {"batched b, rank-2 d", TSR_ERROR_SHAPE_MISMATCH, "b.shape[0] = 2", gemm_batch_without_d_batch},
    {"c batch mismatch", TSR_ERROR_SHAPE_MISMATCH, "c.shape[0] = 3 but d.shape[0] = 2",
     gemm_c_batch_mismatch},
    {"alpha NaN", TSR_ERROR_INVALID_VALUE, "alpha", gemm_alpha_nan},
    {"alpha inf", TSR_ERROR_INVALID_VALUE, "alpha", gemm_alpha_inf},
    {"beta -inf with c", TSR_ERROR_INVALID_VALUE, "beta", gemm_beta_inf},
    {"activation count", TSR_ERROR_INVALID_VALUE, "activation = 5", gemm_activation_count},
    {"activation -1", TSR_ERROR_INVALID_VALUE, "activation = -1", gemm_activation_negative},
    {"compute count", TSR_ERROR_INVALID_VALUE, "compute = 2", gemm_compute_count},
    {"tf32 with bf16", TSR_ERROR_INVALID_VALUE, "compute", gemm_tf32_with_bf16},
    {"d zero stride", TSR_ERROR_OVERLAP, "d.strides[0] = 0", gemm_d_zero_stride},
    {"d rows overlap", TSR_ERROR_OVERLAP, "d has elements", gemm_d_self_overlap},
    {"d overlaps a", TSR_ERROR_OVERLAP, "d overlaps input a", gemm_d_overlaps_a},
    {"d overlaps c shifted", TSR_ERROR_OVERLAP, "d overlaps c", gemm_d_overlaps_c_shifted},
    {"d is c's bytes in another layout", TSR_ERROR_OVERLAP, "d overlaps c",
     gemm_d_same_as_c_other_strides},
    {"d overlaps bias", TSR_ERROR_OVERLAP, "d overlaps input bias", gemm_d_overlaps_bias},
    {"unknown variant", TSR_ERROR_NOT_FOUND, "no-such-variant", gemm_unknown_variant},
};

/* ---- grouped gemm: a [6, 8], b [3, 8, 5], bias [3, 5], d [6, 5], groups 2+0+4 ---- */

static const int64_t good_groups[] = {2, 0, 4};
static const int64_t negative_groups[] = {2, -1, 5};
static const int64_t short_groups[] = {2, 0, 3};
static const int64_t two_groups[] = {2, 4};

static tsr_grouped_gemm_desc grouped_good(const api_fixture *f) {
  tsr_grouped_gemm_desc desc = TSR_GROUPED_GEMM_DESC_INIT;
  desc.a = api_tensor(f->buffers[0], 0, TSR_DTYPE_F32, 2, 6, 8, 0, 0);
  desc.b = api_tensor(f->buffers[1], 0, TSR_DTYPE_F32, 3, 3, 8, 5, 0);
  desc.bias = api_tensor(f->buffers[2], 0, TSR_DTYPE_F32, 2, 3, 5, 0, 0);
  desc.d = api_tensor(f->buffers[3], 0, TSR_DTYPE_F32, 2, 6, 5, 0, 0);
  desc.group_sizes = good_groups;
  desc.group_count = 3;
  desc.alpha = 0.5f;
  desc.activation = TSR_ACT_SILU;
  return desc;
}

API_EDIT(tsr_grouped_gemm_desc, grouped_size_short) {
  d->struct_size = 8;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_a_absent) {
  d->a.buffer = NULL;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_b_absent) {
  d->b.buffer = NULL;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_d_absent) {
  d->d.buffer = NULL;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_sizes_null) {
  d->group_sizes = NULL;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_d_foreign) {
  d->d.buffer = f->foreign;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_b_dtype_invalid) {
  d->b.dtype = (tsr_dtype)42;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_a_i32) {
  d->a.dtype = TSR_DTYPE_I32;
  d->b.dtype = TSR_DTYPE_I32;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_b_bf16) {
  d->b.dtype = TSR_DTYPE_BF16;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_d_f16) {
  d->d.dtype = TSR_DTYPE_F16;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_bias_f16) {
  d->bias.dtype = TSR_DTYPE_F16;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_a_rank3) {
  d->a = api_tensor(d->a.buffer, 0, TSR_DTYPE_F32, 3, 1, 6, 8, 0);
}
API_EDIT(tsr_grouped_gemm_desc, grouped_b_rank2) {
  d->b = api_tensor(d->b.buffer, 0, TSR_DTYPE_F32, 2, 8, 5, 0, 0);
}
API_EDIT(tsr_grouped_gemm_desc, grouped_d_rank3) {
  d->d = api_tensor(d->d.buffer, 0, TSR_DTYPE_F32, 3, 1, 6, 5, 0);
}
API_EDIT(tsr_grouped_gemm_desc, grouped_bias_rank1) {
  d->bias = api_tensor(d->bias.buffer, 0, TSR_DTYPE_F32, 1, 5, 0, 0, 0);
}
API_EDIT(tsr_grouped_gemm_desc, grouped_a_extent_zero) {
  d->a.shape[1] = 0;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_b_stride_negative) {
  d->b.strides[0] = -40;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_count_zero) {
  d->group_count = 0;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_count_negative) {
  d->group_count = -2;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_size_negative) {
  d->group_sizes = negative_groups;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_b_past_end) {
  d->b.offset = API_BUFFER_BYTES - 400;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_count_vs_b) {
  d->group_sizes = two_groups;
  d->group_count = 2;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_k_mismatch) {
  d->b = api_tensor(d->b.buffer, 0, TSR_DTYPE_F32, 3, 3, 7, 5, 0);
}
API_EDIT(tsr_grouped_gemm_desc, grouped_t_mismatch) {
  d->d.shape[0] = 5;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_n_mismatch) {
  d->d.shape[1] = 4;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_bias_groups) {
  d->bias.shape[0] = 2;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_bias_n) {
  d->bias.shape[1] = 4;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_sizes_sum) {
  d->group_sizes = short_groups;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_alpha_nan) {
  d->alpha = NAN;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_activation) {
  d->activation = (tsr_activation)9;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_compute) {
  d->compute = (tsr_compute_mode)7;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_tf32_f16) {
  d->a.dtype = TSR_DTYPE_F16;
  d->b.dtype = TSR_DTYPE_F16;
  d->compute = TSR_COMPUTE_TF32;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_d_zero_stride) {
  d->d.strides[1] = 0;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_d_overlaps_b) {
  d->d.buffer = d->b.buffer;
  d->d.offset = 64;
}
API_EDIT(tsr_grouped_gemm_desc, grouped_d_is_a) {
  d->d.buffer = d->a.buffer; /* d [6, 5] on top of a [6, 8] */
}

static const api_case grouped_cases[] = {
    {"desc NULL", TSR_ERROR_NULL_ARGUMENT, "desc", NULL},
    {"struct_size short", TSR_ERROR_STRUCT_SIZE, "struct_size = 8", grouped_size_short},
    {"a absent", TSR_ERROR_NULL_ARGUMENT, "a.buffer", grouped_a_absent},
    {"b absent", TSR_ERROR_NULL_ARGUMENT, "b.buffer", grouped_b_absent},
    {"d absent", TSR_ERROR_NULL_ARGUMENT, "d.buffer", grouped_d_absent},
    {"group_sizes NULL", TSR_ERROR_NULL_ARGUMENT, "group_sizes", grouped_sizes_null},
    {"d on another device", TSR_ERROR_WRONG_DEVICE, "d.buffer", grouped_d_foreign},
    {"b.dtype invalid", TSR_ERROR_INVALID_VALUE, "b.dtype = 42", grouped_b_dtype_invalid},
    {"a i32", TSR_ERROR_DTYPE_MISMATCH, "a.dtype = i32", grouped_a_i32},
    {"b bf16", TSR_ERROR_DTYPE_MISMATCH, "b.dtype = bf16 but a.dtype = f32", grouped_b_bf16},
    {"d f16", TSR_ERROR_DTYPE_MISMATCH, "d.dtype = f16 but a.dtype = f32", grouped_d_f16},
    {"bias f16", TSR_ERROR_DTYPE_MISMATCH, "bias.dtype = f16 but d.dtype = f32", grouped_bias_f16},
    {"a rank 3", TSR_ERROR_RANK, "a.rank = 3", grouped_a_rank3},
    {"b rank 2", TSR_ERROR_RANK, "b.rank = 2", grouped_b_rank2},
    {"d rank 3", TSR_ERROR_RANK, "d.rank = 3", grouped_d_rank3},
    {"bias rank 1", TSR_ERROR_RANK, "bias.rank = 1", grouped_bias_rank1},
    {"a extent 0", TSR_ERROR_BAD_SIZE, "a.shape[1] = 0", grouped_a_extent_zero},
    {"b stride negative", TSR_ERROR_BAD_SIZE, "b.strides[0] = -40", grouped_b_stride_negative},
    {"group_count 0", TSR_ERROR_BAD_SIZE, "group_count = 0", grouped_count_zero},
    {"group_count -2", TSR_ERROR_BAD_SIZE, "group_count = -2", grouped_count_negative},
    {"negative group size", TSR_ERROR_BAD_SIZE, "group_sizes[1] = -1", grouped_size_negative},
    {"b past the end", TSR_ERROR_OUT_OF_BOUNDS, "b reaches byte", grouped_b_past_end},
    {"group_count vs b", TSR_ERROR_SHAPE_MISMATCH, "b.shape[0] = 3 but group_count = 2",
     grouped_count_vs_b},
    {"K mismatch", TSR_ERROR_SHAPE_MISMATCH, "a.shape[1] = 8 but b.shape[1] = 7",
     grouped_k_mismatch},
    {"T mismatch", TSR_ERROR_SHAPE_MISMATCH, "d.shape[0] = 5 but a.shape[0] = 6",
     grouped_t_mismatch},
    {"N mismatch", TSR_ERROR_SHAPE_MISMATCH, "d.shape[1] = 4 but b.shape[2] = 5",
     grouped_n_mismatch},
    {"bias groups", TSR_ERROR_SHAPE_MISMATCH, "bias.shape[0] = 2", grouped_bias_groups},
    {"bias N", TSR_ERROR_SHAPE_MISMATCH, "bias.shape[1] = 4", grouped_bias_n},
    {"sizes sum", TSR_ERROR_SHAPE_MISMATCH, "group_sizes sum to 5 but a.shape[0] = 6",
     grouped_sizes_sum},
    {"alpha NaN", TSR_ERROR_INVALID_VALUE, "alpha", grouped_alpha_nan},
    {"activation 9", TSR_ERROR_INVALID_VALUE, "activation = 9", grouped_activation},
    {"compute 7", TSR_ERROR_INVALID_VALUE, "compute = 7", grouped_compute},
    {"tf32 with f16", TSR_ERROR_INVALID_VALUE, "compute", grouped_tf32_f16},
    {"d zero stride", TSR_ERROR_OVERLAP, "d.strides[1] = 0", grouped_d_zero_stride},
    {"d overlaps b", TSR_ERROR_OVERLAP, "d overlaps input b", grouped_d_overlaps_b},
    {"d on top of a", TSR_ERROR_OVERLAP, "d overlaps input a", grouped_d_is_a},
};

int main(void) {
  api_fixture f;
  api_fixture_open(&f);

  tsr_gemm_desc gemm = gemm_good(&f);
  api_run_cases(&f, TSR_OP_GEMM, &gemm, sizeof gemm, gemm_cases, API_COUNT(gemm_cases));

  tsr_grouped_gemm_desc grouped = grouped_good(&f);
  api_run_cases(&f, TSR_OP_GROUPED_GEMM, &grouped, sizeof grouped, grouped_cases,
                API_COUNT(grouped_cases));

  /* A NULL queue is named, before the descriptor is looked at. */
  CHECK_STATUS(tsr_gemm(NULL, &gemm), TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_gemm", "queue");
  /* tsr_op_run with an op that does not exist. */
  CHECK_STATUS(tsr_op_run(f.queue, TSR_OP_COUNT_, &gemm), TSR_ERROR_INVALID_VALUE);
  CHECK_STATUS(tsr_op_run(f.queue, (tsr_op)-1, &gemm), TSR_ERROR_INVALID_VALUE);
  /* The generic entry names the op's own call. */
  gemm.b.shape[0] = 6;
  CHECK_STATUS(tsr_op_run(f.queue, TSR_OP_GEMM, &gemm), TSR_ERROR_SHAPE_MISMATCH);
  CHECK_ERROR("tsr_gemm", "a.shape[1] = 8 but b.shape[0] = 6");
  /* A failing call clears nothing it should not: a good call afterwards works
   * and leaves no stale error text behind. */
  gemm = gemm_good(&f);
  CHECK_STATUS(tsr_gemm(f.queue, &gemm), TSR_OK);
  CHECK_STR(tsr_last_error(), "");
  CHECK_STATUS(tsr_queue_finish(f.queue), TSR_OK);

  api_fixture_close(&f);
  return api_finish("test_validate_gemm");
}
