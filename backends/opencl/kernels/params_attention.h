/* SPDX-License-Identifier: Apache-2.0 */
/* Parameters of the attention kernels (kernels/attention.cl), shared with
 * ops_attention.c. Tensors are q [B, Sq, Hq, D], k and v [B, Skv, Hkv, D],
 * o like q and lse [B, Hq, Sq] (f32), each with its element offset and a
 * stride per dimension (0 where the extent is 1). */
#ifndef TESSERA_OPENCL_PARAMS_ATTENTION_H
#define TESSERA_OPENCL_PARAMS_ATTENTION_H

/* flags */
#define TSR_CL_ATTENTION_LSE 1 /* write lse */

typedef struct tsr_cl_attention_params {
  tsr_cl_i64 q_first, k_first, v_first, o_first, lse_first;
  tsr_cl_i64 q_sb, q_ss, q_sh, q_sd; /* along B, S, H, D */
  tsr_cl_i64 k_sb, k_ss, k_sh, k_sd;
  tsr_cl_i64 v_sb, v_ss, v_sh, v_sd;
  tsr_cl_i64 o_sb, o_ss, o_sh, o_sd;
  tsr_cl_i64 lse_sb, lse_sh, lse_ss; /* along B, H, S */
  /* split keys (flash with -DTSR_ATT_SPLIT=1): partial rows B * Hq * Sq per
   * split; the f32 scratch holds every split's unnormalised output rows
   * [splits][B][Hq][Sq][D], then their maxima, then their sums */
  tsr_cl_i64 part_rows;
  tsr_cl_i32 sq, skv, hq;
  tsr_cl_i32 group; /* query heads per key/value head */
  tsr_cl_i32 dim;
  tsr_cl_i32 flags; /* TSR_CL_ATTENTION_* */
  /* -1: unbounded; else key j is seen from position p when
   * p - window_left <= j <= p + window_right (p = i + Skv - Sq) */
  tsr_cl_i32 window_left, window_right;
  tsr_cl_i32 tiles;      /* flash: query tiles per (batch, key/value head) */
  tsr_cl_i32 splits;     /* flash: key ranges, each a work-group's (1: no split) */
  tsr_cl_i32 kv_chunk;   /* keys per split, a multiple of the key tile */
  tsr_cl_f32 scale_log2; /* scale * log2(e): the kernels use exp2 */
} tsr_cl_attention_params;

#endif /* TESSERA_OPENCL_PARAMS_ATTENTION_H */
