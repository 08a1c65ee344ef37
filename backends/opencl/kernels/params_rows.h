/* SPDX-License-Identifier: Apache-2.0 */
/* Parameters of the fused ops' kernels (kernels/rows.cl: rmsnorm,
 * layernorm, softmax, cross_entropy; kernels/elementwise.cl: swiglu, gelu,
 * rope), shared by the kernels and ops.c. Offsets and strides are in
 * elements of the tensor's own dtype, 64-bit so any tensor the core accepts
 * can be indexed. Fields go 64-bit first, then 32-bit; sizes are multiples
 * of 8 (opencl_types.h). */
#ifndef TESSERA_OPENCL_PARAMS_ROWS_H
#define TESSERA_OPENCL_PARAMS_ROWS_H

#ifndef __OPENCL_C_VERSION__
#include "opencl_types.h"
#endif

/* A row tensor with its leading dimensions folded into three, (d0, d1, d2):
 * element (row r, column c) is first + i0*s0 + i1*s1 + i2*s2 + c*inner with
 * r = (i0*d1 + i1)*d2 + i2. Strides of extent-1 dimensions are 0. */
typedef struct tsr_cl_row_view {
  tsr_cl_i64 first, s0, s1, s2, inner;
} tsr_cl_row_view;

/* A tensor of rank up to 4 with leading extents of 1 added: element
 * (i0, i1, i2, i3) is first + i0*s0 + i1*s1 + i2*s2 + i3*s3. */
typedef struct tsr_cl_elem_view {
  tsr_cl_i64 first, s0, s1, s2, s3;
} tsr_cl_elem_view;

/* rmsnorm flags */
#define TSR_CL_RMSNORM_RESIDUAL 1     /* residual present */
#define TSR_CL_RMSNORM_WEIGHT 2       /* weight present */
#define TSR_CL_RMSNORM_RESIDUAL_OUT 4 /* residual_out present */
#define TSR_CL_RMSNORM_WEIGHT_F32 8   /* weight is f32 (else the data dtype) */

typedef struct tsr_cl_rmsnorm_params {
  tsr_cl_i64 rows, n, d1, d2;
  tsr_cl_row_view x, residual, y, residual_out;
  tsr_cl_i64 w_first, w_stride;
  tsr_cl_i32 flags;
  tsr_cl_f32 eps;
} tsr_cl_rmsnorm_params;

/* layernorm flags */
#define TSR_CL_LAYERNORM_WEIGHT 1
#define TSR_CL_LAYERNORM_BIAS 2
#define TSR_CL_LAYERNORM_WEIGHT_F32 4
#define TSR_CL_LAYERNORM_BIAS_F32 8

typedef struct tsr_cl_layernorm_params {
  tsr_cl_i64 rows, n, d1, d2;
  tsr_cl_row_view x, y;
  tsr_cl_i64 w_first, w_stride, b_first, b_stride;
  tsr_cl_i32 flags;
  tsr_cl_f32 eps;
} tsr_cl_layernorm_params;

typedef struct tsr_cl_softmax_params {
  tsr_cl_i64 rows, n, d1, d2;
  tsr_cl_row_view x, y;
  tsr_cl_f32 scale;
  tsr_cl_i32 pad;
} tsr_cl_softmax_params;

/* cross_entropy flags */
#define TSR_CL_CROSS_ENTROPY_LSE 1 /* lse present */

/* logits [rows, n] as a row view (d1 = 1, d2 = rows: only s2 is used);
 * targets i32, loss and lse f32, each with a first element and a stride. */
typedef struct tsr_cl_cross_entropy_params {
  tsr_cl_i64 rows, n, d1, d2;
  tsr_cl_row_view x;
  tsr_cl_i64 t_first, t_stride, loss_first, loss_stride, lse_first, lse_stride;
  tsr_cl_i64 ignore_index;
  tsr_cl_i32 flags;
  tsr_cl_i32 pad;
} tsr_cl_cross_entropy_params;

/* Elementwise ops: `count` elements, the shape (1 or more, d1, d2, d3). */
typedef struct tsr_cl_swiglu_params {
  tsr_cl_i64 count, d1, d2, d3;
  tsr_cl_elem_view gate, up, y;
} tsr_cl_swiglu_params;

typedef struct tsr_cl_gelu_params {
  tsr_cl_i64 count, d1, d2, d3;
  tsr_cl_elem_view x, y;
  tsr_cl_i32 approximate; /* 0 erf, 1 tanh */
  tsr_cl_i32 pad;
} tsr_cl_gelu_params;

/* rope on x [B, S, H, D] (views' s0..s3 are the B, S, H, D strides): one
 * work item per (row, pair), rows = B*S*H, pairs = D / 2. */
typedef struct tsr_cl_rope_params {
  tsr_cl_i64 rows, seq, heads, pairs, half_rotary, position_offset;
  tsr_cl_elem_view x, y;
  tsr_cl_i32 gptj;
  tsr_cl_f32 log2_theta, rotary_dim;
  tsr_cl_i32 pad;
} tsr_cl_rope_params;

#endif /* TESSERA_OPENCL_PARAMS_ROWS_H */
