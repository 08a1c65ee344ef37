/* SPDX-License-Identifier: Apache-2.0 */
/* Parameters of the GEMM kernels (kernels/gemm.cl), shared with ops_gemm.c.
 * Element offsets and strides of every operand, the extents, the tile grid
 * and the epilogue. Grouped GEMM: batch is the group count, a/d strides are
 * per row, b_sb and bias_sb step from one group's matrix to the next. */
#ifndef TESSERA_OPENCL_PARAMS_GEMM_H
#define TESSERA_OPENCL_PARAMS_GEMM_H

#ifndef __OPENCL_C_VERSION__
#include "opencl_types.h" /* programs get it in their prelude instead */
#endif

/* flags: which optional operands the epilogue reads, and the activation */
#define TSR_CL_GEMM_HAS_C 1
#define TSR_CL_GEMM_HAS_BIAS 2
#define TSR_CL_GEMM_ACTIVATION_SHIFT 4

typedef struct tsr_cl_gemm_params {
  tsr_cl_i64 a_first, b_first, c_first, bias_first, d_first;
  tsr_cl_i64 a_sb, a_sm, a_sk;
  tsr_cl_i64 b_sb, b_sk, b_sn;
  tsr_cl_i64 c_sb, c_sm, c_sn;
  tsr_cl_i64 d_sb, d_sm, d_sn;
  tsr_cl_i64 bias_sb, bias_sn;
  tsr_cl_i64 split_stride; /* split-K: elements between the partial planes */
  tsr_cl_i32 m, n, k, batch;
  tsr_cl_i32 tiles_m, tiles_n; /* tiled kernel: M tiles (of all groups), N tiles */
  tsr_cl_i32 swizzle;          /* M tiles visited together, for L2 reuse of B */
  tsr_cl_i32 flags;            /* TSR_CL_GEMM_* */
  tsr_cl_i32 k_chunk;          /* GEMV: K elements per split (a multiple of the vector) */
  tsr_cl_i32 splits;           /* GEMV: K splits; > 1 writes partial sums */
  tsr_cl_f32 alpha, beta;
} tsr_cl_gemm_params;

#endif /* TESSERA_OPENCL_PARAMS_GEMM_H */
