/* SPDX-License-Identifier: Apache-2.0 */
/* Bad inputs of the fused ops (rmsnorm, layernorm, softmax, rope, swiglu, gelu,
 * cross_entropy): each rule gives its status and a sentence naming the
 * argument, and nothing changes. */
#include <math.h>
#include <stdint.h>

#include "api_test.h"

/* ---- rmsnorm: x, residual, y, residual_out [3, 16], weight [16] ---- */

static tsr_rmsnorm_desc rmsnorm_good(const api_fixture *f) {
  tsr_rmsnorm_desc desc = TSR_RMSNORM_DESC_INIT;
  desc.x = api_tensor(f->buffers[0], 0, TSR_DTYPE_F32, 2, 3, 16, 0, 0);
  desc.residual = api_tensor(f->buffers[1], 0, TSR_DTYPE_F32, 2, 3, 16, 0, 0);
  desc.weight = api_tensor(f->buffers[2], 0, TSR_DTYPE_F32, 1, 16, 0, 0, 0);
  desc.y = api_tensor(f->buffers[3], 0, TSR_DTYPE_F32, 2, 3, 16, 0, 0);
  desc.residual_out = api_tensor(f->buffers[4], 0, TSR_DTYPE_F32, 2, 3, 16, 0, 0);
  return desc;
}

API_EDIT(tsr_rmsnorm_desc, rms_size) {
  d->struct_size = 4;
}
API_EDIT(tsr_rmsnorm_desc, rms_x_absent) {
  d->x.buffer = NULL;
}
API_EDIT(tsr_rmsnorm_desc, rms_y_absent) {
  d->y.buffer = NULL;
}
API_EDIT(tsr_rmsnorm_desc, rms_residual_foreign) {
  d->residual.buffer = f->foreign;
}
API_EDIT(tsr_rmsnorm_desc, rms_x_dtype_invalid) {
  d->x.dtype = (tsr_dtype)5;
}
API_EDIT(tsr_rmsnorm_desc, rms_weight_dtype_invalid) {
  d->weight.dtype = TSR_DTYPE_INVALID;
}
API_EDIT(tsr_rmsnorm_desc, rms_x_i32) {
  d->x.dtype = TSR_DTYPE_I32;
  d->residual.dtype = TSR_DTYPE_I32;
  d->y.dtype = TSR_DTYPE_I32;
  d->residual_out.dtype = TSR_DTYPE_I32;
}
API_EDIT(tsr_rmsnorm_desc, rms_residual_f16) {
  d->residual.dtype = TSR_DTYPE_F16;
}
API_EDIT(tsr_rmsnorm_desc, rms_weight_f16) {
  d->weight.dtype = TSR_DTYPE_F16;
}
API_EDIT(tsr_rmsnorm_desc, rms_weight_bf16_for_f16) {
  d->x.dtype = TSR_DTYPE_F16;
  d->residual.dtype = TSR_DTYPE_F16;
  d->y.dtype = TSR_DTYPE_F16;
  d->residual_out.dtype = TSR_DTYPE_F16;
  d->weight.dtype = TSR_DTYPE_BF16;
}
API_EDIT(tsr_rmsnorm_desc, rms_y_bf16) {
  d->y.dtype = TSR_DTYPE_BF16;
}
API_EDIT(tsr_rmsnorm_desc, rms_residual_out_f16) {
  d->residual_out.dtype = TSR_DTYPE_F16;
}
API_EDIT(tsr_rmsnorm_desc, rms_x_rank0) {
  d->x.rank = 0;
}
API_EDIT(tsr_rmsnorm_desc, rms_x_rank5) {
  d->x.rank = 5;
}
API_EDIT(tsr_rmsnorm_desc, rms_y_rank1) {
  d->y = api_tensor(d->y.buffer, 0, TSR_DTYPE_F32, 1, 48, 0, 0, 0);
}
API_EDIT(tsr_rmsnorm_desc, rms_residual_rank3) {
  d->residual = api_tensor(d->residual.buffer, 0, TSR_DTYPE_F32, 3, 1, 3, 16, 0);
}
API_EDIT(tsr_rmsnorm_desc, rms_weight_rank2) {
  d->weight = api_tensor(d->weight.buffer, 0, TSR_DTYPE_F32, 2, 1, 16, 0, 0);
}
API_EDIT(tsr_rmsnorm_desc, rms_x_extent_zero) {
  d->x.shape[1] = 0;
}
API_EDIT(tsr_rmsnorm_desc, rms_y_stride_negative) {
  d->y.strides[1] = -1;
}
API_EDIT(tsr_rmsnorm_desc, rms_residual_past_end) {
  d->residual.offset = API_BUFFER_BYTES - 100;
}
API_EDIT(tsr_rmsnorm_desc, rms_y_past_end) {
  d->y.strides[0] = 4000;
}
API_EDIT(tsr_rmsnorm_desc, rms_residual_shape) {
  d->residual.shape[0] = 2;
}
API_EDIT(tsr_rmsnorm_desc, rms_y_shape) {
  d->y.shape[1] = 8;
}
API_EDIT(tsr_rmsnorm_desc, rms_residual_out_shape) {
  d->residual_out.shape[0] = 4;
}
API_EDIT(tsr_rmsnorm_desc, rms_weight_shape) {
  d->weight.shape[0] = 15;
}
API_EDIT(tsr_rmsnorm_desc, rms_eps_nan) {
  d->eps = NAN;
}
API_EDIT(tsr_rmsnorm_desc, rms_eps_negative) {
  d->eps = -1e-5f;
}
API_EDIT(tsr_rmsnorm_desc, rms_y_zero_stride) {
  d->y.strides[0] = 0;
}
API_EDIT(tsr_rmsnorm_desc, rms_y_is_residual) {
  d->y = d->residual;
}
API_EDIT(tsr_rmsnorm_desc, rms_y_shifted_x) {
  d->y.buffer = d->x.buffer;
  d->y.offset = 4;
}
API_EDIT(tsr_rmsnorm_desc, rms_y_overlaps_weight) {
  d->y.buffer = d->weight.buffer;
  d->y.offset = 32;
}
API_EDIT(tsr_rmsnorm_desc, rms_outputs_overlap) {
  d->residual_out = d->y;
}
API_EDIT(tsr_rmsnorm_desc, rms_both_outputs_x) {
  d->y = d->x;
  d->residual_out = d->x;
}
API_EDIT(tsr_rmsnorm_desc, rms_residual_out_shifted_residual) {
  d->residual_out.buffer = d->residual.buffer;
  d->residual_out.offset = 64;
}

static const api_case rmsnorm_cases[] = {
    {"desc NULL", TSR_ERROR_NULL_ARGUMENT, "desc", NULL},
    {"struct_size 4", TSR_ERROR_STRUCT_SIZE, "struct_size = 4", rms_size},
    {"x absent", TSR_ERROR_NULL_ARGUMENT, "x.buffer", rms_x_absent},
    {"y absent", TSR_ERROR_NULL_ARGUMENT, "y.buffer", rms_y_absent},
    {"residual on another device", TSR_ERROR_WRONG_DEVICE, "residual.buffer", rms_residual_foreign},
    {"x.dtype 5", TSR_ERROR_INVALID_VALUE, "x.dtype = 5", rms_x_dtype_invalid},
    {"weight.dtype invalid", TSR_ERROR_INVALID_VALUE, "weight.dtype = 0", rms_weight_dtype_invalid},
    {"x i32", TSR_ERROR_DTYPE_MISMATCH, "x.dtype = i32", rms_x_i32},
    {"residual f16", TSR_ERROR_DTYPE_MISMATCH, "residual.dtype = f16 but x.dtype = f32",
     rms_residual_f16},
    {"weight f16 for f32 x", TSR_ERROR_DTYPE_MISMATCH, "weight.dtype = f16 but x.dtype = f32",
     rms_weight_f16},
    {"weight bf16 for f16 x", TSR_ERROR_DTYPE_MISMATCH, "weight.dtype = bf16 but x.dtype = f16",
     rms_weight_bf16_for_f16},
    {"y bf16", TSR_ERROR_DTYPE_MISMATCH, "y.dtype = bf16 but x.dtype = f32", rms_y_bf16},
    {"residual_out f16", TSR_ERROR_DTYPE_MISMATCH, "residual_out.dtype = f16",
     rms_residual_out_f16},
    {"x rank 0", TSR_ERROR_RANK, "x.rank = 0", rms_x_rank0},
    {"x rank 5", TSR_ERROR_RANK, "x.rank = 5", rms_x_rank5},
    {"y rank 1", TSR_ERROR_RANK, "y.rank = 1 but x.rank = 2", rms_y_rank1},
    {"residual rank 3", TSR_ERROR_RANK, "residual.rank = 3", rms_residual_rank3},
    {"weight rank 2", TSR_ERROR_RANK, "weight.rank = 2", rms_weight_rank2},
    {"x extent 0", TSR_ERROR_BAD_SIZE, "x.shape[1] = 0", rms_x_extent_zero},
    {"y stride -1", TSR_ERROR_BAD_SIZE, "y.strides[1] = -1", rms_y_stride_negative},
    {"residual past the end", TSR_ERROR_OUT_OF_BOUNDS, "residual reaches byte 16476",
     rms_residual_past_end},
    {"y past the end", TSR_ERROR_OUT_OF_BOUNDS, "y reaches byte", rms_y_past_end},
    {"residual shape", TSR_ERROR_SHAPE_MISMATCH, "residual.shape[0] = 2 but x.shape[0] = 3",
     rms_residual_shape},
    {"y shape", TSR_ERROR_SHAPE_MISMATCH, "y.shape[1] = 8 but x.shape[1] = 16", rms_y_shape},
    {"residual_out shape", TSR_ERROR_SHAPE_MISMATCH, "residual_out.shape[0] = 4",
     rms_residual_out_shape},
    {"weight shape", TSR_ERROR_SHAPE_MISMATCH, "weight.shape[0] = 15 but x.shape[1] = 16",
     rms_weight_shape},
    {"eps NaN", TSR_ERROR_INVALID_VALUE, "eps", rms_eps_nan},
    {"eps negative", TSR_ERROR_INVALID_VALUE, "eps", rms_eps_negative},
    {"y zero stride", TSR_ERROR_OVERLAP, "y.strides[0] = 0", rms_y_zero_stride},
    {"y is residual", TSR_ERROR_OVERLAP, "y overlaps input residual", rms_y_is_residual},
    {"y is x shifted", TSR_ERROR_OVERLAP, "y overlaps x", rms_y_shifted_x},
    {"y overlaps weight", TSR_ERROR_OVERLAP, "y overlaps input weight", rms_y_overlaps_weight},
    {"residual_out is y", TSR_ERROR_OVERLAP, "outputs y and residual_out overlap",
     rms_outputs_overlap},
    {"y and residual_out both x", TSR_ERROR_OVERLAP, "outputs y and residual_out overlap",
     rms_both_outputs_x},
    {"residual_out is residual shifted", TSR_ERROR_OVERLAP, "residual_out overlaps residual",
     rms_residual_out_shifted_residual},
};

/* ---- layernorm: x, y [2, 5, 12], weight, bias [12] ---- */

static tsr_layernorm_desc layernorm_good(const api_fixture *f) {
  tsr_layernorm_desc desc = TSR_LAYERNORM_DESC_INIT;
  desc.x = api_tensor(f->buffers[0], 0, TSR_DTYPE_F32, 3, 2, 5, 12, 0);
  desc.weight = api_tensor(f->buffers[1], 0, TSR_DTYPE_F32, 1, 12, 0, 0, 0);
  desc.bias = api_tensor(f->buffers[2], 0, TSR_DTYPE_F32, 1, 12, 0, 0, 0);
  desc.y = api_tensor(f->buffers[3], 0, TSR_DTYPE_F32, 3, 2, 5, 12, 0);
  return desc;
}

API_EDIT(tsr_layernorm_desc, ln_size) {
  d->struct_size = 0;
}
API_EDIT(tsr_layernorm_desc, ln_x_absent) {
  d->x.buffer = NULL;
}
API_EDIT(tsr_layernorm_desc, ln_y_absent) {
  d->y.buffer = NULL;
}
API_EDIT(tsr_layernorm_desc, ln_bias_foreign) {
  d->bias.buffer = f->foreign;
}
API_EDIT(tsr_layernorm_desc, ln_bias_dtype_invalid) {
  d->bias.dtype = (tsr_dtype)1000;
}
API_EDIT(tsr_layernorm_desc, ln_x_i32) {
  d->x.dtype = TSR_DTYPE_I32;
  d->y.dtype = TSR_DTYPE_I32;
}
API_EDIT(tsr_layernorm_desc, ln_weight_bf16) {
  d->weight.dtype = TSR_DTYPE_BF16;
}
API_EDIT(tsr_layernorm_desc, ln_bias_f16) {
  d->bias.dtype = TSR_DTYPE_F16;
}
API_EDIT(tsr_layernorm_desc, ln_y_f16) {
  d->y.dtype = TSR_DTYPE_F16;
}
API_EDIT(tsr_layernorm_desc, ln_x_rank5) {
  d->x.rank = 5;
}
API_EDIT(tsr_layernorm_desc, ln_y_rank2) {
  d->y = api_tensor(d->y.buffer, 0, TSR_DTYPE_F32, 2, 10, 12, 0, 0);
}
API_EDIT(tsr_layernorm_desc, ln_bias_rank2) {
  d->bias = api_tensor(d->bias.buffer, 0, TSR_DTYPE_F32, 2, 12, 1, 0, 0);
}
API_EDIT(tsr_layernorm_desc, ln_weight_extent_negative) {
  d->weight.shape[0] = -12;
}
API_EDIT(tsr_layernorm_desc, ln_x_past_end) {
  d->x.offset = API_BUFFER_BYTES;
}
API_EDIT(tsr_layernorm_desc, ln_y_shape) {
  d->y.shape[1] = 4;
}
API_EDIT(tsr_layernorm_desc, ln_weight_shape) {
  d->weight.shape[0] = 13;
}
API_EDIT(tsr_layernorm_desc, ln_bias_shape) {
  d->bias.shape[0] = 6;
}
API_EDIT(tsr_layernorm_desc, ln_eps_inf) {
  d->eps = INFINITY;
}
API_EDIT(tsr_layernorm_desc, ln_eps_negative) {
  d->eps = -0.5f;
}
API_EDIT(tsr_layernorm_desc, ln_y_zero_stride) {
  d->y.strides[1] = 0;
}
API_EDIT(tsr_layernorm_desc, ln_y_transposed_x) {
  /* Same bytes as x, rows and batches swapped: not the in-place form. */
  d->y = d->x;
  d->y.strides[0] = 12;
  d->y.strides[1] = 24;
  d->y.shape[0] = 2;
  d->y.shape[1] = 5;
}
API_EDIT(tsr_layernorm_desc, ln_y_overlaps_bias) {
  d->y.buffer = d->bias.buffer;
  d->y.offset = 8;
}

static const api_case layernorm_cases[] = {
    {"desc NULL", TSR_ERROR_NULL_ARGUMENT, "desc", NULL},
    {"struct_size 0", TSR_ERROR_STRUCT_SIZE, "struct_size = 0", ln_size},
    {"x absent", TSR_ERROR_NULL_ARGUMENT, "x.buffer", ln_x_absent},
    {"y absent", TSR_ERROR_NULL_ARGUMENT, "y.buffer", ln_y_absent},
    {"bias on another device", TSR_ERROR_WRONG_DEVICE, "bias.buffer", ln_bias_foreign},
    {"bias.dtype 1000", TSR_ERROR_INVALID_VALUE, "bias.dtype = 1000", ln_bias_dtype_invalid},
    {"x i32", TSR_ERROR_DTYPE_MISMATCH, "x.dtype = i32", ln_x_i32},
    {"weight bf16", TSR_ERROR_DTYPE_MISMATCH, "weight.dtype = bf16 but x.dtype = f32",
     ln_weight_bf16},
    {"bias f16", TSR_ERROR_DTYPE_MISMATCH, "bias.dtype = f16 but x.dtype = f32", ln_bias_f16},
    {"y f16", TSR_ERROR_DTYPE_MISMATCH, "y.dtype = f16 but x.dtype = f32", ln_y_f16},
    {"x rank 5", TSR_ERROR_RANK, "x.rank = 5", ln_x_rank5},
    {"y rank 2", TSR_ERROR_RANK, "y.rank = 2 but x.rank = 3", ln_y_rank2},
    {"bias rank 2", TSR_ERROR_RANK, "bias.rank = 2", ln_bias_rank2},
    {"weight extent -12", TSR_ERROR_BAD_SIZE, "weight.shape[0] = -12", ln_weight_extent_negative},
    {"x past the end", TSR_ERROR_OUT_OF_BOUNDS, "x reaches byte 16864 of a 16384-byte buffer",
     ln_x_past_end},
    {"y shape", TSR_ERROR_SHAPE_MISMATCH, "y.shape[1] = 4 but x.shape[1] = 5", ln_y_shape},
    {"weight shape", TSR_ERROR_SHAPE_MISMATCH, "weight.shape[0] = 13 but x.shape[2] = 12",
     ln_weight_shape},
    {"bias shape", TSR_ERROR_SHAPE_MISMATCH, "bias.shape[0] = 6 but x.shape[2] = 12",
     ln_bias_shape},
    {"eps inf", TSR_ERROR_INVALID_VALUE, "eps", ln_eps_inf},
    {"eps negative", TSR_ERROR_INVALID_VALUE, "eps = -0.5", ln_eps_negative},
    {"y zero stride", TSR_ERROR_OVERLAP, "y.strides[1] = 0", ln_y_zero_stride},
    {"y is x in another layout", TSR_ERROR_OVERLAP, "y overlaps x", ln_y_transposed_x},
    {"y overlaps bias", TSR_ERROR_OVERLAP, "y overlaps input bias", ln_y_overlaps_bias},
};

/* ---- softmax: x, y [2, 3, 10] ---- */

static tsr_softmax_desc softmax_good(const api_fixture *f) {
  tsr_softmax_desc desc = TSR_SOFTMAX_DESC_INIT;
  desc.x = api_tensor(f->buffers[0], 0, TSR_DTYPE_F32, 3, 2, 3, 10, 0);
  desc.y = api_tensor(f->buffers[1], 0, TSR_DTYPE_F32, 3, 2, 3, 10, 0);
  return desc;
}

API_EDIT(tsr_softmax_desc, sm_size) {
  d->struct_size = sizeof *d - 1;
}
API_EDIT(tsr_softmax_desc, sm_x_absent) {
  d->x.buffer = NULL;
}
API_EDIT(tsr_softmax_desc, sm_y_foreign) {
  d->y.buffer = f->foreign;
}
API_EDIT(tsr_softmax_desc, sm_x_dtype_invalid) {
  d->x.dtype = (tsr_dtype)77;
}
API_EDIT(tsr_softmax_desc, sm_x_i32) {
  d->x.dtype = TSR_DTYPE_I32;
  d->y.dtype = TSR_DTYPE_I32;
}
API_EDIT(tsr_softmax_desc, sm_y_bf16) {
  d->y.dtype = TSR_DTYPE_BF16;
}
API_EDIT(tsr_softmax_desc, sm_x_rank5) {
  d->x.rank = 5;
}
API_EDIT(tsr_softmax_desc, sm_y_rank4) {
  d->y = api_tensor(d->y.buffer, 0, TSR_DTYPE_F32, 4, 1, 2, 3, 10);
}
API_EDIT(tsr_softmax_desc, sm_x_extent_zero) {
  d->x.shape[0] = 0;
}
API_EDIT(tsr_softmax_desc, sm_y_past_end) {
  d->y.offset = API_BUFFER_BYTES - 100;
}
API_EDIT(tsr_softmax_desc, sm_y_shape) {
  d->y.shape[2] = 9;
}
API_EDIT(tsr_softmax_desc, sm_scale_nan) {
  d->scale = NAN;
}
API_EDIT(tsr_softmax_desc, sm_scale_negative) {
  d->scale = -2.0f;
}
API_EDIT(tsr_softmax_desc, sm_y_zero_stride) {
  d->y.strides[2] = 0;
}
API_EDIT(tsr_softmax_desc, sm_y_shifted_x) {
  d->y.buffer = d->x.buffer;
  d->y.offset = 40;
}

static const api_case softmax_cases[] = {
    {"desc NULL", TSR_ERROR_NULL_ARGUMENT, "desc", NULL},
    {"struct_size short", TSR_ERROR_STRUCT_SIZE, "tsr_softmax_desc", sm_size},
    {"x absent", TSR_ERROR_NULL_ARGUMENT, "x.buffer", sm_x_absent},
    {"y on another device", TSR_ERROR_WRONG_DEVICE, "y.buffer", sm_y_foreign},
    {"x.dtype 77", TSR_ERROR_INVALID_VALUE, "x.dtype = 77", sm_x_dtype_invalid},
    {"x i32", TSR_ERROR_DTYPE_MISMATCH, "x.dtype = i32", sm_x_i32},
    {"y bf16", TSR_ERROR_DTYPE_MISMATCH, "y.dtype = bf16 but x.dtype = f32", sm_y_bf16},
    {"x rank 5", TSR_ERROR_RANK, "x.rank = 5", sm_x_rank5},
    {"y rank 4", TSR_ERROR_RANK, "y.rank = 4 but x.rank = 3", sm_y_rank4},
    {"x extent 0", TSR_ERROR_BAD_SIZE, "x.shape[0] = 0", sm_x_extent_zero},
    {"y past the end", TSR_ERROR_OUT_OF_BOUNDS, "y reaches byte 16524", sm_y_past_end},
    {"y shape", TSR_ERROR_SHAPE_MISMATCH, "y.shape[2] = 9 but x.shape[2] = 10", sm_y_shape},
    {"scale NaN", TSR_ERROR_INVALID_VALUE, "scale", sm_scale_nan},
    {"scale negative", TSR_ERROR_INVALID_VALUE, "scale = -2", sm_scale_negative},
    {"y zero stride", TSR_ERROR_OVERLAP, "y.strides[2] = 0", sm_y_zero_stride},
    {"y is x shifted by a row", TSR_ERROR_OVERLAP, "y overlaps x", sm_y_shifted_x},
};

/* ---- rope: x, y [1, 4, 2, 8] ---- */

static tsr_rope_desc rope_good(const api_fixture *f) {
  tsr_rope_desc desc = TSR_ROPE_DESC_INIT;
  desc.x = api_tensor(f->buffers[0], 0, TSR_DTYPE_F32, 4, 1, 4, 2, 8);
  desc.y = api_tensor(f->buffers[1], 0, TSR_DTYPE_F32, 4, 1, 4, 2, 8);
  desc.position_offset = 3;
  return desc;
}

API_EDIT(tsr_rope_desc, rope_size) {
  d->struct_size = 0;
}
API_EDIT(tsr_rope_desc, rope_x_absent) {
  d->x.buffer = NULL;
}
API_EDIT(tsr_rope_desc, rope_y_absent) {
  d->y.buffer = NULL;
}
API_EDIT(tsr_rope_desc, rope_x_foreign) {
  d->x.buffer = f->foreign;
}
API_EDIT(tsr_rope_desc, rope_y_dtype_invalid) {
  d->y.dtype = TSR_DTYPE_INVALID;
}
API_EDIT(tsr_rope_desc, rope_x_i32) {
  d->x.dtype = TSR_DTYPE_I32;
  d->y.dtype = TSR_DTYPE_I32;
}
API_EDIT(tsr_rope_desc, rope_y_f16) {
  d->y.dtype = TSR_DTYPE_F16;
}
API_EDIT(tsr_rope_desc, rope_x_rank3) {
  d->x = api_tensor(d->x.buffer, 0, TSR_DTYPE_F32, 3, 4, 2, 8, 0);
}
API_EDIT(tsr_rope_desc, rope_y_rank2) {
  d->y = api_tensor(d->y.buffer, 0, TSR_DTYPE_F32, 2, 8, 8, 0, 0);
}
API_EDIT(tsr_rope_desc, rope_x_stride_negative) {
  d->x.strides[1] = -16;
}
API_EDIT(tsr_rope_desc, rope_x_past_end) {
  d->x.strides[1] = 2048;
}
API_EDIT(tsr_rope_desc, rope_y_shape) {
  d->y.shape[2] = 1;
}
API_EDIT(tsr_rope_desc, rope_odd_head_dim) {
  d->x = api_tensor(d->x.buffer, 0, TSR_DTYPE_F32, 4, 1, 4, 2, 7);
  d->y = api_tensor(d->y.buffer, 0, TSR_DTYPE_F32, 4, 1, 4, 2, 7);
}
API_EDIT(tsr_rope_desc, rope_rotary_odd) {
  d->rotary_dim = 5;
}
API_EDIT(tsr_rope_desc, rope_rotary_too_big) {
  d->rotary_dim = 10;
}
API_EDIT(tsr_rope_desc, rope_rotary_negative) {
  d->rotary_dim = -2;
}
API_EDIT(tsr_rope_desc, rope_theta_nan) {
  d->theta = NAN;
}
API_EDIT(tsr_rope_desc, rope_theta_negative) {
  d->theta = -10000.0f;
}
API_EDIT(tsr_rope_desc, rope_style) {
  d->style = TSR_ROPE_COUNT_;
}
API_EDIT(tsr_rope_desc, rope_position_overflow) {
  d->position_offset = INT64_MAX - 1;
}
API_EDIT(tsr_rope_desc, rope_y_zero_stride) {
  d->y.strides[1] = 0;
}
API_EDIT(tsr_rope_desc, rope_y_shifted_x) {
  d->y.buffer = d->x.buffer;
  d->y.offset = 32;
}

static const api_case rope_cases[] = {
    {"desc NULL", TSR_ERROR_NULL_ARGUMENT, "desc", NULL},
    {"struct_size 0", TSR_ERROR_STRUCT_SIZE, "struct_size = 0", rope_size},
    {"x absent", TSR_ERROR_NULL_ARGUMENT, "x.buffer", rope_x_absent},
    {"y absent", TSR_ERROR_NULL_ARGUMENT, "y.buffer", rope_y_absent},
    {"x on another device", TSR_ERROR_WRONG_DEVICE, "x.buffer", rope_x_foreign},
    {"y.dtype invalid", TSR_ERROR_INVALID_VALUE, "y.dtype = 0", rope_y_dtype_invalid},
    {"x i32", TSR_ERROR_DTYPE_MISMATCH, "x.dtype = i32", rope_x_i32},
    {"y f16", TSR_ERROR_DTYPE_MISMATCH, "y.dtype = f16 but x.dtype = f32", rope_y_f16},
    {"x rank 3", TSR_ERROR_RANK, "x.rank = 3 but rope needs rank 4", rope_x_rank3},
    {"y rank 2", TSR_ERROR_RANK, "y.rank = 2", rope_y_rank2},
    {"x stride negative", TSR_ERROR_BAD_SIZE, "x.strides[1] = -16", rope_x_stride_negative},
    {"x past the end", TSR_ERROR_OUT_OF_BOUNDS, "x reaches byte", rope_x_past_end},
    {"y shape", TSR_ERROR_SHAPE_MISMATCH, "y.shape[2] = 1 but x.shape[2] = 2", rope_y_shape},
    {"odd head dim", TSR_ERROR_SHAPE_MISMATCH, "x.shape[3] = 7", rope_odd_head_dim},
    {"rotary_dim 5", TSR_ERROR_INVALID_VALUE, "rotary_dim = 5", rope_rotary_odd},
    {"rotary_dim 10 > D", TSR_ERROR_INVALID_VALUE, "rotary_dim = 10", rope_rotary_too_big},
    {"rotary_dim -2", TSR_ERROR_INVALID_VALUE, "rotary_dim = -2", rope_rotary_negative},
    {"theta NaN", TSR_ERROR_INVALID_VALUE, "theta", rope_theta_nan},
    {"theta negative", TSR_ERROR_INVALID_VALUE, "theta = -10000", rope_theta_negative},
    {"style 2", TSR_ERROR_INVALID_VALUE, "style = 2", rope_style},
    {"positions overflow", TSR_ERROR_INVALID_VALUE, "position_offset", rope_position_overflow},
    {"y zero stride", TSR_ERROR_OVERLAP, "y.strides[1] = 0", rope_y_zero_stride},
    {"y is x shifted", TSR_ERROR_OVERLAP, "y overlaps x", rope_y_shifted_x},
};

/* ---- swiglu: gate, up, y [4, 6] ---- */

static tsr_swiglu_desc swiglu_good(const api_fixture *f) {
  tsr_swiglu_desc desc = TSR_SWIGLU_DESC_INIT;
  desc.gate = api_tensor(f->buffers[0], 0, TSR_DTYPE_F32, 2, 4, 6, 0, 0);
  desc.up = api_tensor(f->buffers[1], 0, TSR_DTYPE_F32, 2, 4, 6, 0, 0);
  desc.y = api_tensor(f->buffers[2], 0, TSR_DTYPE_F32, 2, 4, 6, 0, 0);
  return desc;
}

API_EDIT(tsr_swiglu_desc, sw_size) {
  d->struct_size = 1;
}
API_EDIT(tsr_swiglu_desc, sw_gate_absent) {
  d->gate.buffer = NULL;
}
API_EDIT(tsr_swiglu_desc, sw_up_absent) {
  d->up.buffer = NULL;
}
API_EDIT(tsr_swiglu_desc, sw_y_absent) {
  d->y.buffer = NULL;
}
API_EDIT(tsr_swiglu_desc, sw_up_foreign) {
  d->up.buffer = f->foreign;
}
API_EDIT(tsr_swiglu_desc, sw_up_dtype_invalid) {
  d->up.dtype = (tsr_dtype)6;
}
API_EDIT(tsr_swiglu_desc, sw_gate_i32) {
  d->gate.dtype = TSR_DTYPE_I32;
  d->up.dtype = TSR_DTYPE_I32;
  d->y.dtype = TSR_DTYPE_I32;
}
API_EDIT(tsr_swiglu_desc, sw_up_f16) {
  d->up.dtype = TSR_DTYPE_F16;
}
API_EDIT(tsr_swiglu_desc, sw_y_bf16) {
  d->y.dtype = TSR_DTYPE_BF16;
}
API_EDIT(tsr_swiglu_desc, sw_gate_rank5) {
  d->gate.rank = 5;
}
API_EDIT(tsr_swiglu_desc, sw_up_rank1) {
  d->up = api_tensor(d->up.buffer, 0, TSR_DTYPE_F32, 1, 24, 0, 0, 0);
}
API_EDIT(tsr_swiglu_desc, sw_y_extent_zero) {
  d->y.shape[1] = 0;
}
API_EDIT(tsr_swiglu_desc, sw_up_past_end) {
  d->up.offset = API_BUFFER_BYTES - 92;
}
API_EDIT(tsr_swiglu_desc, sw_up_shape) {
  d->up.shape[0] = 3;
}
API_EDIT(tsr_swiglu_desc, sw_y_shape) {
  d->y.shape[1] = 5;
}
API_EDIT(tsr_swiglu_desc, sw_y_zero_stride) {
  d->y.strides[0] = 0;
}
API_EDIT(tsr_swiglu_desc, sw_y_shifted_up) {
  d->y.buffer = d->up.buffer;
  d->y.offset = 24;
}
API_EDIT(tsr_swiglu_desc, sw_y_is_gate_overlaps_up) {
  /* y may be gate, but then up must not overlap it. */
  d->up.buffer = d->gate.buffer;
  d->up.offset = 48;
  d->y = d->gate;
}

static const api_case swiglu_cases[] = {
    {"desc NULL", TSR_ERROR_NULL_ARGUMENT, "desc", NULL},
    {"struct_size 1", TSR_ERROR_STRUCT_SIZE, "struct_size = 1", sw_size},
    {"gate absent", TSR_ERROR_NULL_ARGUMENT, "gate.buffer", sw_gate_absent},
    {"up absent", TSR_ERROR_NULL_ARGUMENT, "up.buffer", sw_up_absent},
    {"y absent", TSR_ERROR_NULL_ARGUMENT, "y.buffer", sw_y_absent},
    {"up on another device", TSR_ERROR_WRONG_DEVICE, "up.buffer", sw_up_foreign},
    {"up.dtype 6", TSR_ERROR_INVALID_VALUE, "up.dtype = 6", sw_up_dtype_invalid},
    {"gate i32", TSR_ERROR_DTYPE_MISMATCH, "gate.dtype = i32", sw_gate_i32},
    {"up f16", TSR_ERROR_DTYPE_MISMATCH, "up.dtype = f16 but gate.dtype = f32", sw_up_f16},
    {"y bf16", TSR_ERROR_DTYPE_MISMATCH, "y.dtype = bf16 but gate.dtype = f32", sw_y_bf16},
    {"gate rank 5", TSR_ERROR_RANK, "gate.rank = 5", sw_gate_rank5},
    {"up rank 1", TSR_ERROR_RANK, "up.rank = 1 but gate.rank = 2", sw_up_rank1},
    {"y extent 0", TSR_ERROR_BAD_SIZE, "y.shape[1] = 0", sw_y_extent_zero},
    {"up past the end", TSR_ERROR_OUT_OF_BOUNDS, "up reaches byte 16388 of a 16384-byte buffer",
     sw_up_past_end},
    {"up shape", TSR_ERROR_SHAPE_MISMATCH, "up.shape[0] = 3 but gate.shape[0] = 4", sw_up_shape},
    {"y shape", TSR_ERROR_SHAPE_MISMATCH, "y.shape[1] = 5 but gate.shape[1] = 6", sw_y_shape},
    {"y zero stride", TSR_ERROR_OVERLAP, "y.strides[0] = 0", sw_y_zero_stride},
    {"y is up shifted", TSR_ERROR_OVERLAP, "y overlaps up", sw_y_shifted_up},
    {"y is gate, up overlaps it", TSR_ERROR_OVERLAP, "y overlaps up", sw_y_is_gate_overlaps_up},
};

/* ---- gelu: x, y [5, 7] ---- */

static tsr_gelu_desc gelu_good(const api_fixture *f) {
  tsr_gelu_desc desc = TSR_GELU_DESC_INIT;
  desc.x = api_tensor(f->buffers[0], 0, TSR_DTYPE_F32, 2, 5, 7, 0, 0);
  desc.y = api_tensor(f->buffers[1], 0, TSR_DTYPE_F32, 2, 5, 7, 0, 0);
  desc.approximate = TSR_GELU_TANH;
  return desc;
}

API_EDIT(tsr_gelu_desc, gelu_size) {
  d->struct_size = 0;
}
API_EDIT(tsr_gelu_desc, gelu_x_absent) {
  d->x.buffer = NULL;
}
API_EDIT(tsr_gelu_desc, gelu_y_absent) {
  d->y.buffer = NULL;
}
API_EDIT(tsr_gelu_desc, gelu_y_foreign) {
  d->y.buffer = f->foreign;
}
API_EDIT(tsr_gelu_desc, gelu_x_dtype_invalid) {
  d->x.dtype = (tsr_dtype)-1;
}
API_EDIT(tsr_gelu_desc, gelu_x_i32) {
  d->x.dtype = TSR_DTYPE_I32;
  d->y.dtype = TSR_DTYPE_I32;
}
API_EDIT(tsr_gelu_desc, gelu_y_f16) {
  d->y.dtype = TSR_DTYPE_F16;
}
API_EDIT(tsr_gelu_desc, gelu_x_rank0) {
  d->x.rank = 0;
}
API_EDIT(tsr_gelu_desc, gelu_y_rank3) {
  d->y = api_tensor(d->y.buffer, 0, TSR_DTYPE_F32, 3, 1, 5, 7, 0);
}
API_EDIT(tsr_gelu_desc, gelu_x_overflow) {
  d->x.shape[0] = INT64_MAX / 4;
  d->x.strides[0] = 7;
}
API_EDIT(tsr_gelu_desc, gelu_y_past_end) {
  d->y.offset = API_BUFFER_BYTES - 136;
}
API_EDIT(tsr_gelu_desc, gelu_y_shape) {
  d->y.shape[0] = 4;
}
API_EDIT(tsr_gelu_desc, gelu_approx_count) {
  d->approximate = TSR_GELU_COUNT_;
}
API_EDIT(tsr_gelu_desc, gelu_approx_negative) {
  d->approximate = (tsr_gelu_approx)-1;
}
API_EDIT(tsr_gelu_desc, gelu_y_zero_stride) {
  d->y.strides[0] = 0;
}
API_EDIT(tsr_gelu_desc, gelu_y_shifted_x) {
  d->y.buffer = d->x.buffer;
  d->y.offset = 28;
}

static const api_case gelu_cases[] = {
    {"desc NULL", TSR_ERROR_NULL_ARGUMENT, "desc", NULL},
    {"struct_size 0", TSR_ERROR_STRUCT_SIZE, "struct_size = 0", gelu_size},
    {"x absent", TSR_ERROR_NULL_ARGUMENT, "x.buffer", gelu_x_absent},
    {"y absent", TSR_ERROR_NULL_ARGUMENT, "y.buffer", gelu_y_absent},
    {"y on another device", TSR_ERROR_WRONG_DEVICE, "y.buffer", gelu_y_foreign},
    {"x.dtype -1", TSR_ERROR_INVALID_VALUE, "x.dtype = -1", gelu_x_dtype_invalid},
    {"x i32", TSR_ERROR_DTYPE_MISMATCH, "x.dtype = i32", gelu_x_i32},
    {"y f16", TSR_ERROR_DTYPE_MISMATCH, "y.dtype = f16 but x.dtype = f32", gelu_y_f16},
    {"x rank 0", TSR_ERROR_RANK, "x.rank = 0", gelu_x_rank0},
    {"y rank 3", TSR_ERROR_RANK, "y.rank = 3 but x.rank = 2", gelu_y_rank3},
    {"x extent overflows", TSR_ERROR_BAD_SIZE, "x's", gelu_x_overflow},
    {"y past the end", TSR_ERROR_OUT_OF_BOUNDS, "y reaches byte 16388", gelu_y_past_end},
    {"y shape", TSR_ERROR_SHAPE_MISMATCH, "y.shape[0] = 4 but x.shape[0] = 5", gelu_y_shape},
    {"approximate 2", TSR_ERROR_INVALID_VALUE, "approximate = 2", gelu_approx_count},
    {"approximate -1", TSR_ERROR_INVALID_VALUE, "approximate = -1", gelu_approx_negative},
    {"y zero stride", TSR_ERROR_OVERLAP, "y.strides[0] = 0", gelu_y_zero_stride},
    {"y is x shifted a row", TSR_ERROR_OVERLAP, "y overlaps x", gelu_y_shifted_x},
};

/* ---- cross entropy: logits [4, 10], targets i32 [4], loss, lse f32 [4] ---- */

static tsr_cross_entropy_desc cross_entropy_good(const api_fixture *f) {
  tsr_cross_entropy_desc desc = TSR_CROSS_ENTROPY_DESC_INIT;
  desc.logits = api_tensor(f->buffers[0], 0, TSR_DTYPE_F32, 2, 4, 10, 0, 0);
  desc.targets = api_tensor(f->buffers[5], 0, TSR_DTYPE_I32, 1, 4, 0, 0, 0);
  desc.loss = api_tensor(f->buffers[2], 0, TSR_DTYPE_F32, 1, 4, 0, 0, 0);
  desc.lse = api_tensor(f->buffers[3], 0, TSR_DTYPE_F32, 1, 4, 0, 0, 0);
  return desc;
}

API_EDIT(tsr_cross_entropy_desc, ce_size) {
  d->struct_size = 16;
}
API_EDIT(tsr_cross_entropy_desc, ce_logits_absent) {
  d->logits.buffer = NULL;
}
API_EDIT(tsr_cross_entropy_desc, ce_targets_absent) {
  d->targets.buffer = NULL;
}
API_EDIT(tsr_cross_entropy_desc, ce_loss_absent) {
  d->loss.buffer = NULL;
}
API_EDIT(tsr_cross_entropy_desc, ce_lse_foreign) {
  d->lse.buffer = f->foreign;
}
API_EDIT(tsr_cross_entropy_desc, ce_targets_dtype_invalid) {
  d->targets.dtype = (tsr_dtype)12;
}
API_EDIT(tsr_cross_entropy_desc, ce_logits_i32) {
  d->logits.dtype = TSR_DTYPE_I32;
}
API_EDIT(tsr_cross_entropy_desc, ce_targets_f32) {
  d->targets.dtype = TSR_DTYPE_F32;
}
API_EDIT(tsr_cross_entropy_desc, ce_loss_f16) {
  d->loss.dtype = TSR_DTYPE_F16;
}
API_EDIT(tsr_cross_entropy_desc, ce_lse_bf16) {
  d->lse.dtype = TSR_DTYPE_BF16;
}
API_EDIT(tsr_cross_entropy_desc, ce_logits_rank1) {
  d->logits = api_tensor(d->logits.buffer, 0, TSR_DTYPE_F32, 1, 40, 0, 0, 0);
}
API_EDIT(tsr_cross_entropy_desc, ce_targets_rank2) {
  d->targets = api_tensor(d->targets.buffer, 0, TSR_DTYPE_I32, 2, 4, 1, 0, 0);
}
API_EDIT(tsr_cross_entropy_desc, ce_loss_rank2) {
  d->loss = api_tensor(d->loss.buffer, 0, TSR_DTYPE_F32, 2, 4, 1, 0, 0);
}
API_EDIT(tsr_cross_entropy_desc, ce_logits_extent_zero) {
  d->logits.shape[1] = 0;
}
API_EDIT(tsr_cross_entropy_desc, ce_loss_stride_negative) {
  d->loss.strides[0] = -1;
}
API_EDIT(tsr_cross_entropy_desc, ce_targets_past_end) {
  d->targets.strides[0] = 5000;
}
API_EDIT(tsr_cross_entropy_desc, ce_targets_shape) {
  d->targets.shape[0] = 3;
}
API_EDIT(tsr_cross_entropy_desc, ce_loss_shape) {
  d->loss.shape[0] = 5;
}
API_EDIT(tsr_cross_entropy_desc, ce_lse_shape) {
  d->lse.shape[0] = 2;
}
API_EDIT(tsr_cross_entropy_desc, ce_loss_zero_stride) {
  d->loss.strides[0] = 0;
}
API_EDIT(tsr_cross_entropy_desc, ce_loss_overlaps_logits) {
  d->loss.buffer = d->logits.buffer;
  d->loss.offset = 156;
}
API_EDIT(tsr_cross_entropy_desc, ce_lse_is_targets) {
  d->lse.buffer = d->targets.buffer;
  d->lse.offset = d->targets.offset;
}
API_EDIT(tsr_cross_entropy_desc, ce_lse_is_loss) {
  d->lse = d->loss;
}

static const api_case cross_entropy_cases[] = {
    {"desc NULL", TSR_ERROR_NULL_ARGUMENT, "desc", NULL},
    {"struct_size 16", TSR_ERROR_STRUCT_SIZE, "struct_size = 16", ce_size},
    {"logits absent", TSR_ERROR_NULL_ARGUMENT, "logits.buffer", ce_logits_absent},
    {"targets absent", TSR_ERROR_NULL_ARGUMENT, "targets.buffer", ce_targets_absent},
    {"loss absent", TSR_ERROR_NULL_ARGUMENT, "loss.buffer", ce_loss_absent},
    {"lse on another device", TSR_ERROR_WRONG_DEVICE, "lse.buffer", ce_lse_foreign},
    {"targets.dtype 12", TSR_ERROR_INVALID_VALUE, "targets.dtype = 12", ce_targets_dtype_invalid},
    {"logits i32", TSR_ERROR_DTYPE_MISMATCH, "logits.dtype = i32", ce_logits_i32},
    {"targets f32", TSR_ERROR_DTYPE_MISMATCH, "targets.dtype = f32", ce_targets_f32},
    {"loss f16", TSR_ERROR_DTYPE_MISMATCH, "loss.dtype = f16", ce_loss_f16},
    {"lse bf16", TSR_ERROR_DTYPE_MISMATCH, "lse.dtype = bf16", ce_lse_bf16},
    {"logits rank 1", TSR_ERROR_RANK, "logits.rank = 1", ce_logits_rank1},
    {"targets rank 2", TSR_ERROR_RANK, "targets.rank = 2", ce_targets_rank2},
    {"loss rank 2", TSR_ERROR_RANK, "loss.rank = 2", ce_loss_rank2},
    {"logits extent 0", TSR_ERROR_BAD_SIZE, "logits.shape[1] = 0", ce_logits_extent_zero},
    {"loss stride -1", TSR_ERROR_BAD_SIZE, "loss.strides[0] = -1", ce_loss_stride_negative},
    {"targets past the end", TSR_ERROR_OUT_OF_BOUNDS, "targets reaches byte 60004",
     ce_targets_past_end},
    {"targets shape", TSR_ERROR_SHAPE_MISMATCH, "targets.shape[0] = 3 but logits.shape[0] = 4",
     ce_targets_shape},
    {"loss shape", TSR_ERROR_SHAPE_MISMATCH, "loss.shape[0] = 5 but logits.shape[0] = 4",
     ce_loss_shape},
    {"lse shape", TSR_ERROR_SHAPE_MISMATCH, "lse.shape[0] = 2 but logits.shape[0] = 4",
     ce_lse_shape},
    {"loss zero stride", TSR_ERROR_OVERLAP, "loss.strides[0] = 0", ce_loss_zero_stride},
    {"loss overlaps logits", TSR_ERROR_OVERLAP, "loss overlaps input logits",
     ce_loss_overlaps_logits},
    {"lse is targets", TSR_ERROR_OVERLAP, "lse overlaps input targets", ce_lse_is_targets},
    {"lse is loss", TSR_ERROR_OVERLAP, "outputs loss and lse overlap", ce_lse_is_loss},
};

/* Writes valid class indices (one ignored row) into the targets buffer. */
static void write_targets(api_fixture *f) {
  const int32_t targets[4] = {3, -100, 9, 0};
  REQUIRE_OK(tsr_buffer_write(f->queue, f->buffers[5], 0, targets, sizeof targets));
}

int main(void) {
  api_fixture f;
  api_fixture_open(&f);
  write_targets(&f);

  tsr_rmsnorm_desc rmsnorm = rmsnorm_good(&f);
  api_run_cases(&f, TSR_OP_RMSNORM, &rmsnorm, sizeof rmsnorm, rmsnorm_cases,
                API_COUNT(rmsnorm_cases));
  tsr_layernorm_desc layernorm = layernorm_good(&f);
  api_run_cases(&f, TSR_OP_LAYERNORM, &layernorm, sizeof layernorm, layernorm_cases,
                API_COUNT(layernorm_cases));
  tsr_softmax_desc softmax = softmax_good(&f);
  api_run_cases(&f, TSR_OP_SOFTMAX, &softmax, sizeof softmax, softmax_cases,
                API_COUNT(softmax_cases));
  tsr_rope_desc rope = rope_good(&f);
  api_run_cases(&f, TSR_OP_ROPE, &rope, sizeof rope, rope_cases, API_COUNT(rope_cases));
  tsr_swiglu_desc swiglu = swiglu_good(&f);
  api_run_cases(&f, TSR_OP_SWIGLU, &swiglu, sizeof swiglu, swiglu_cases, API_COUNT(swiglu_cases));
  tsr_gelu_desc gelu = gelu_good(&f);
  api_run_cases(&f, TSR_OP_GELU, &gelu, sizeof gelu, gelu_cases, API_COUNT(gelu_cases));
  tsr_cross_entropy_desc cross_entropy = cross_entropy_good(&f);
  api_run_cases(&f, TSR_OP_CROSS_ENTROPY, &cross_entropy, sizeof cross_entropy, cross_entropy_cases,
                API_COUNT(cross_entropy_cases));

  /* The documented in-place forms and optional tensors are accepted. */
  rmsnorm = rmsnorm_good(&f);
  rmsnorm.residual_out = rmsnorm.residual;
  CHECK_STATUS(tsr_rmsnorm(f.queue, &rmsnorm), TSR_OK);
  rmsnorm.residual_out = rmsnorm.x;
  rmsnorm.y = rmsnorm_good(&f).y;
  CHECK_STATUS(tsr_rmsnorm(f.queue, &rmsnorm), TSR_OK);
  rmsnorm = rmsnorm_good(&f);
  rmsnorm.y = rmsnorm.x;
  CHECK_STATUS(tsr_rmsnorm(f.queue, &rmsnorm), TSR_OK);
  rmsnorm = rmsnorm_good(&f);
  rmsnorm.residual.buffer = NULL;
  rmsnorm.residual_out.buffer = NULL;
  rmsnorm.weight.buffer = NULL;
  CHECK_STATUS(tsr_rmsnorm(f.queue, &rmsnorm), TSR_OK);
  layernorm = layernorm_good(&f);
  layernorm.y = layernorm.x;
  CHECK_STATUS(tsr_layernorm(f.queue, &layernorm), TSR_OK);
  softmax = softmax_good(&f);
  softmax.y = softmax.x;
  CHECK_STATUS(tsr_softmax(f.queue, &softmax), TSR_OK);
  rope = rope_good(&f);
  rope.y = rope.x;
  rope.rotary_dim = 4;
  rope.style = TSR_ROPE_GPTJ;
  CHECK_STATUS(tsr_rope(f.queue, &rope), TSR_OK);
  swiglu = swiglu_good(&f);
  swiglu.y = swiglu.up;
  CHECK_STATUS(tsr_swiglu(f.queue, &swiglu), TSR_OK);
  swiglu.y = swiglu.gate;
  CHECK_STATUS(tsr_swiglu(f.queue, &swiglu), TSR_OK);
  gelu = gelu_good(&f);
  gelu.y = gelu.x;
  CHECK_STATUS(tsr_gelu(f.queue, &gelu), TSR_OK);
  cross_entropy = cross_entropy_good(&f);
  cross_entropy.lse.buffer = NULL;
  CHECK_STATUS(tsr_cross_entropy(f.queue, &cross_entropy), TSR_OK);
  CHECK_STATUS(tsr_queue_finish(f.queue), TSR_OK);

  api_fixture_close(&f);
  return api_finish("test_validate_fused");
}
