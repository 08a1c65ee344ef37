/* SPDX-License-Identifier: Apache-2.0 */
/* The push-constant blocks of the Vulkan plugin's shaders, as C structs: each
 * mirrors a block in kernels/ field for field (std430 layout: 32-bit fields,
 * no padding), and each fits VULKAN_PUSH_BYTES. Not installed. */
#ifndef TESSERA_VULKAN_PUSH_CONSTANTS_H
#define TESSERA_VULKAN_PUSH_CONSTANTS_H

#include <stdint.h>

#include "vulkan_internal.h"

/* ---- row ops and elementwise ops (ops.c) ---- */

/* Mirrors RowTensor (rows.glsl) and ElemTensor (elementwise.glsl). */
typedef struct vulkan_row_tensor {
  uint32_t first, s0, s1, s2, inner;
} vulkan_row_tensor;

typedef struct vulkan_elem_tensor {
  uint32_t first, s0, s1, s2, s3;
} vulkan_elem_tensor;

/* kernels/rmsnorm.comp */
typedef struct vulkan_rmsnorm_push {
  uint32_t rows, n, d1, d2;
  vulkan_row_tensor x, residual, y, residual_out;
  uint32_t w_first, w_stride, w_code, flags;
  float eps;
} vulkan_rmsnorm_push;

/* kernels/layernorm.comp */
typedef struct vulkan_layernorm_push {
  uint32_t rows, n, d1, d2;
  vulkan_row_tensor x, y;
  uint32_t w_first, w_stride, w_code, b_first, b_stride, b_code, flags;
  float eps;
} vulkan_layernorm_push;

/* kernels/softmax.comp */
typedef struct vulkan_softmax_push {
  uint32_t rows, n, d1, d2;
  vulkan_row_tensor x, y;
  float scale;
} vulkan_softmax_push;

/* kernels/cross_entropy.comp */
typedef struct vulkan_cross_entropy_push {
  uint32_t rows, n, d1, d2;
  vulkan_row_tensor x;
  uint32_t t_first, t_stride, loss_first, loss_stride, lse_first, lse_stride;
  int32_t ignore_index;
  uint32_t flags;
} vulkan_cross_entropy_push;

/* kernels/swiglu.comp */
typedef struct vulkan_swiglu_push {
  uint32_t count, d1, d2, d3;
  vulkan_elem_tensor gate, up, y;
} vulkan_swiglu_push;

/* kernels/gelu.comp */
typedef struct vulkan_gelu_push {
  uint32_t count, d1, d2, d3;
  vulkan_elem_tensor x, y;
  uint32_t approximate;
} vulkan_gelu_push;

/* kernels/rope.comp */
typedef struct vulkan_rope_push {
  uint32_t rows, seq, heads, pairs;
  vulkan_elem_tensor x, y;
  uint32_t half_rotary, gptj;
  int32_t position_offset;
  float log2_theta, rotary_dim;
} vulkan_rope_push;

/* ---- GEMM and grouped GEMM (ops_gemm.c) ---- */

/* Mirrors GemmPush (kernels/gemm_common.glsl). */
typedef struct vulkan_gemm_push {
  uint32_t m, n, k, batch;
  uint32_t a_first, a_sb, a_sm, a_sk;
  uint32_t b_first, b_sb, b_sk, b_sn;
  uint32_t c_first, c_sb, c_sm, c_sn;
  uint32_t d_first, d_sb, d_sm, d_sn;
  uint32_t bias_first, bias_sb, bias_sn, flags;
  float alpha, beta;
} vulkan_gemm_push;

/* GemmPush.flags: bit 0 C, bit 1 bias, bits 4..7 the activation. */
enum { VULKAN_GEMM_HAS_C = 1, VULKAN_GEMM_HAS_BIAS = 2, VULKAN_GEMM_ACTIVATION_SHIFT = 4 };

/* The GEMM shaders' bindings (gemm_common.glsl). */
enum {
  VULKAN_GEMM_BIND_A,
  VULKAN_GEMM_BIND_B,
  VULKAN_GEMM_BIND_C,
  VULKAN_GEMM_BIND_BIAS,
  VULKAN_GEMM_BIND_D,
  VULKAN_GEMM_BIND_GROUPS,
  VULKAN_GEMM_BINDINGS
};

/* ---- attention (ops_attention.c) ---- */

/* A tensor's first element and its strides along its first three
 * dimensions (B, S, H; for lse B, H, S). */
typedef struct vulkan_attention_view {
  uint32_t first, s0, s1, s2;
} vulkan_attention_view;

/* Mirrors AttentionPush (kernels/attention.comp, attention_coopmat.comp). */
typedef struct vulkan_attention_push {
  uint32_t sq, skv, hq, group;           /* group: query heads per kv head */
  vulkan_attention_view q, k, v, o, lse; /* lse: first, b, h, s strides */
  uint32_t dim, flags;                   /* flags bit 0: write lse */
  int32_t window_left, window_right;     /* negative: unbounded */
  float scale_log2;                      /* scale * log2(e): the shader uses exp2 */
} vulkan_attention_push;

_Static_assert(sizeof(vulkan_rmsnorm_push) <= VULKAN_PUSH_BYTES &&
                   sizeof(vulkan_layernorm_push) <= VULKAN_PUSH_BYTES &&
                   sizeof(vulkan_softmax_push) <= VULKAN_PUSH_BYTES &&
                   sizeof(vulkan_cross_entropy_push) <= VULKAN_PUSH_BYTES &&
                   sizeof(vulkan_swiglu_push) <= VULKAN_PUSH_BYTES &&
                   sizeof(vulkan_gelu_push) <= VULKAN_PUSH_BYTES &&
                   sizeof(vulkan_rope_push) <= VULKAN_PUSH_BYTES &&
                   sizeof(vulkan_gemm_push) <= VULKAN_PUSH_BYTES &&
                   sizeof(vulkan_attention_push) <= VULKAN_PUSH_BYTES,
               "push constants fit VULKAN_PUSH_BYTES");

#endif /* TESSERA_VULKAN_PUSH_CONSTANTS_H */
