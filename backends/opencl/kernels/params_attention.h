/* SPDX-License-Identifier: Apache-2.0 */
/* Parameters of the attention kernels (kernels/attention.cl) and of
 * kv_append (kernels/kv_append.cl), shared with ops_attention.c.
 *
 * Attention tensors are viewed as q [B, S, Hq, D], k and v [B, S, Hkv, D],
 * o like q and lse [B, Hq, S] (f32), each with its element offset and a
 * stride per dimension (0 where the extent is 1). The serving layouts fit
 * the same views: packed q, o or k/v ([total, H, D]) have a batch stride of
 * 0 and their sequence's first row added to the row; packed lse [Hq, total]
 * likewise; paged k/v [num_blocks, block_size, Hkv, D] use the batch stride
 * for the block and the row stride within it. */
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
  /* split keys (flash with -DTSR_ATT_SPLIT=1, decode with splits > 1):
   * partial rows B * Hq * Sq per split; the f32 scratch holds every split's
   * unnormalised output rows [splits][B][Hq][Sq][D], then their maxima, then
   * their sums (decode: then 4 int32 per sequence from seq_first on) */
  tsr_cl_i64 part_rows;
  tsr_cl_i64 seq_first; /* decode split: int32 index of the sequence records */
  /* serving (-DTSR_ATT_SERVING): the int32 index tensors' first elements
   * and strides, and the extents their entries are checked against */
  tsr_cl_i64 cuq_first, cuq_s, cukv_first, cukv_s;
  tsr_cl_i64 bt_first, bt_sb, bt_sj, sl_first, sl_s;
  tsr_cl_i64 q_rows;      /* packed q: total_q */
  tsr_cl_i64 kv_rows;     /* packed k/v: total_kv; paged: num_blocks */
  tsr_cl_i64 kv_capacity; /* keys a dense or paged layout holds per sequence */
  tsr_cl_i32 sq, skv, hq; /* serving: sq and skv are max_seqlen_q / _kv */
  tsr_cl_i32 group;       /* query heads per key/value head */
  tsr_cl_i32 dim;
  tsr_cl_i32 flags; /* TSR_CL_ATTENTION_* */
  /* -1: unbounded; else key j is seen from position p when
   * p - window_left <= j <= p + window_right (p = i + Skv - Sq) */
  tsr_cl_i32 window_left, window_right;
  tsr_cl_i32 tiles;      /* flash: query tiles per (batch, key/value head);
                            decode: row tiles */
  tsr_cl_i32 splits;     /* key ranges, each a work-group's (1: no split) */
  tsr_cl_i32 kv_chunk;   /* keys per split, a multiple of the key tile */
  tsr_cl_i32 block_size; /* paged */
  tsr_cl_f32 scale_log2; /* scale * log2(e): the kernels use exp2 */
  /* softcap (-DTSR_ATT_SOFTCAP), on scores in log2 units:
   * s = cap_log2 * tanh(s * cap_inv) with cap_log2 = softcap * log2(e) and
   * cap_inv = ln(2) / softcap */
  tsr_cl_f32 cap_log2, cap_inv;
  tsr_cl_i32 block_shift; /* paged: log2(block_size) when a power of two, else -1 */
} tsr_cl_attention_params;

/* kv_append: k_new, v_new [T, Hkv, D] and the caches [blocks, block_size,
 * Hkv, D], slots i32 [T]; v absent: flags without TSR_CL_KV_APPEND_V. */
#define TSR_CL_KV_APPEND_V 1

typedef struct tsr_cl_kv_append_params {
  tsr_cl_i64 kn_first, kn_st, kn_sh, kn_sd;
  tsr_cl_i64 vn_first, vn_st, vn_sh, vn_sd;
  tsr_cl_i64 kc_first, kc_sb, kc_ss, kc_sh, kc_sd;
  tsr_cl_i64 vc_first, vc_sb, vc_ss, vc_sh, vc_sd;
  tsr_cl_i64 slots_first, slots_s;
  tsr_cl_i64 rows;  /* T * Hkv: (row, head) pairs */
  tsr_cl_i64 slots; /* num_blocks * block_size */
  tsr_cl_i32 heads, dim, block_size, flags;
} tsr_cl_kv_append_params;

#endif /* TESSERA_OPENCL_PARAMS_ATTENTION_H */
