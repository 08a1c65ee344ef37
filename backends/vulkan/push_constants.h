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

/* Mirrors AttentionServingPush (attention.comp's _serving builds); views as
 * attention_serving.glsl describes them. */
typedef struct vulkan_attention_serving_push {
  uint32_t max_q, plan_stride, group, block_size;
  vulkan_attention_view q, k, v, o, lse;
  uint32_t dim, flags; /* VULKAN_SERVING_* */
  int32_t window_left, window_right;
  float scale_log2, softcap_log2; /* softcap * log2(e); 0: none */
} vulkan_attention_serving_push;

/* attention_serving.glsl's flags. */
enum { VULKAN_SERVING_LSE = 1, VULKAN_SERVING_PAGED = 2, VULKAN_SERVING_PLAN = 4 };

/* Mirrors PlanPush (kernels/attention_plan.comp). */
typedef struct vulkan_attention_plan_push {
  uint32_t batch, flags; /* 1 cu_seqlens_q, 2 cu_seqlens_kv, 4 block_table, 8 seqlens_kv */
  uint32_t cu_q_first, cu_q_stride, cu_kv_first, cu_kv_stride;
  uint32_t table_first, table_s0, table_s1, table_blocks;
  uint32_t lens_first, lens_stride;
  int32_t q_rows, kv_rows, block_size, max_q, max_kv;
  uint32_t plan_stride;
} vulkan_attention_plan_push;

/* Mirrors DecodePush (kernels/attention_decode.comp). */
typedef struct vulkan_attention_decode_push {
  uint32_t max_q, plan_stride, group, block_size;
  vulkan_attention_view q, k, v;
  uint32_t dim, flags;
  int32_t window_left, window_right;
  float scale_log2, softcap_log2;
  uint32_t max_kv, chunk, rows, row_tiles, ml_base;
  uint32_t block_shift; /* log2(block_size) for powers of two, else 0 */
} vulkan_attention_decode_push;

/* Mirrors CombinePush (kernels/attention_combine.comp). */
typedef struct vulkan_attention_combine_push {
  uint32_t max_q, plan_stride, group, block_size;
  vulkan_attention_view o, lse;
  uint32_t dim, flags;
  float softcap_log2;
  uint32_t max_kv, chunk, chunks, rows_pad, dp, ml_base;
} vulkan_attention_combine_push;

/* ---- kv_append (ops_kv_append.c) ---- */

/* Mirrors KvAppendPush (kernels/kv_append.comp). */
typedef struct vulkan_kv_append_push {
  uint32_t count, heads, dim, flags;  /* flags bit 0: values too */
  vulkan_attention_view k_new, v_new; /* first, strides along T, Hkv, D */
  uint32_t kc_first, kc_s0, kc_s1, kc_s2, kc_s3;
  uint32_t vc_first, vc_s0, vc_s1, vc_s2, vc_s3;
  uint32_t slots_first, slots_stride, block_size;
  int32_t slot_count;
} vulkan_kv_append_push;

_Static_assert(sizeof(vulkan_rmsnorm_push) <= VULKAN_PUSH_BYTES &&
                   sizeof(vulkan_layernorm_push) <= VULKAN_PUSH_BYTES &&
                   sizeof(vulkan_softmax_push) <= VULKAN_PUSH_BYTES &&
                   sizeof(vulkan_cross_entropy_push) <= VULKAN_PUSH_BYTES &&
                   sizeof(vulkan_swiglu_push) <= VULKAN_PUSH_BYTES &&
                   sizeof(vulkan_gelu_push) <= VULKAN_PUSH_BYTES &&
                   sizeof(vulkan_rope_push) <= VULKAN_PUSH_BYTES &&
                   sizeof(vulkan_gemm_push) <= VULKAN_PUSH_BYTES &&
                   sizeof(vulkan_attention_push) <= VULKAN_PUSH_BYTES &&
                   sizeof(vulkan_attention_serving_push) <= VULKAN_PUSH_BYTES &&
                   sizeof(vulkan_attention_plan_push) <= VULKAN_PUSH_BYTES &&
                   sizeof(vulkan_attention_decode_push) <= VULKAN_PUSH_BYTES &&
                   sizeof(vulkan_attention_combine_push) <= VULKAN_PUSH_BYTES &&
                   sizeof(vulkan_kv_append_push) <= VULKAN_PUSH_BYTES,
               "push constants fit VULKAN_PUSH_BYTES");

#endif /* TESSERA_VULKAN_PUSH_CONSTANTS_H */
