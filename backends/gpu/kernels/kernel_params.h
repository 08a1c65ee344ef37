/* SPDX-License-Identifier: Apache-2.0 */
/* Kernel parameter blocks shared by the host side (C, plugin.c/ops.c) and the
 * device code (the .cu files of kernels/). Every kernel takes one of these structs by
 * value as its only parameter, so the host fills it and passes a pointer to
 * it to cuLaunchKernel. Plain C: fixed-width fields ordered so that no
 * compiler inserts padding differently (8-byte fields first, then 4-byte).
 *
 * Addresses are device byte addresses of a tensor's element 0 (buffer base +
 * tensor offset); strides are in elements, as in tsr_plugin_tensor. */
#ifndef TESSERA_GPU_KERNEL_PARAMS_H
#define TESSERA_GPU_KERNEL_PARAMS_H

#include <stdint.h>

/* dtype codes: the values of tsr_dtype (plugin.c asserts they agree). */
#define TSR_GPU_F32 1
#define TSR_GPU_F16 2
#define TSR_GPU_BF16 3
#define TSR_GPU_I32 4

/* activation codes: the values of tsr_activation. */
#define TSR_GPU_ACT_NONE 0
#define TSR_GPU_ACT_RELU 1
#define TSR_GPU_ACT_GELU_TANH 2
#define TSR_GPU_ACT_GELU_ERF 3
#define TSR_GPU_ACT_SILU 4

/* ---- GEMM, grouped GEMM, GEMV ---- */

/* Groups one grouped-GEMM launch can walk; more groups take more launches. */
#define TSR_GPU_MAX_GROUPS 128

typedef struct tsr_gpu_gemm_params {
  uint64_t a, b, c, bias, d;
  uint64_t workspace; /* f32 split-K partials [split][batch][m][n]; 0 when unused */
  uint64_t counters;  /* split-K tiles (mma): one uint32 per tile, zero between launches */
  int64_t m, n, k;    /* m: rows per batch entry (grouped: unused) */
  int64_t a_batch, a_m, a_k;
  int64_t b_batch, b_k, b_n; /* grouped: b_batch is the stride of the group index */
  int64_t c_batch, c_m, c_n;
  int64_t d_batch, d_m, d_n;
  int64_t bias_batch, bias_n; /* bias_batch: stride per group (grouped), else 0 */
  int64_t k_per_split;        /* GEMV: K elements per slice */
  float alpha, beta;
  int32_t activation;
  int32_t in_dtype;  /* a and b */
  int32_t out_dtype; /* c, bias and d */
  int32_t has_c;     /* c present and beta != 0 */
  int32_t has_bias;
  int32_t a_k_major; /* shared-memory layout of A tiles: 1 = [m][k], 0 = [k][m] */
  int32_t b_k_major; /* shared-memory layout of B tiles: 1 = [n][k], 0 = [k][n] */
  int32_t a_async;   /* A rows are 16-byte aligned runs: cp.async loads */
  int32_t b_async;
  int32_t vec_a, vec_b; /* GEMV: 16-byte loads of A rows / B along its unit stride */
  int32_t tiles_m, tiles_n;
  int32_t batch_offset; /* batch entry of blockIdx.y == 0 */
  int32_t group_count;  /* grouped launch: groups in it; 0 for plain GEMM */
  int32_t split_k;      /* GEMV and mma tiles: K slices (1: the kernel stores D itself) */
  int32_t batch_count;  /* GEMV and split-K reduce: batch entries in this launch */
  int32_t group_row_start[TSR_GPU_MAX_GROUPS + 1];  /* rows of a/d, from the launch's first */
  int32_t group_tile_start[TSR_GPU_MAX_GROUPS + 1]; /* tiles before each group */
  int32_t group_index[TSR_GPU_MAX_GROUPS];          /* index of b and bias per group */
} tsr_gpu_gemm_params;

/* Shared memory of the tensor-core GEMM: both tile layouts fit a stage, so
 * the layout can be chosen per call. PAD_K pads [row][k] tiles, PAD_MN pads
 * [k][row] tiles (elements), keeping ldmatrix / fragment loads free of bank
 * conflicts and every row 16-byte aligned. */
#define TSR_GPU_MAX2(x, y) ((x) > (y) ? (x) : (y))
#define TSR_GPU_GEMM_STAGE_ELEMS(BM, BK, PAD_K, PAD_MN)                                            \
  TSR_GPU_MAX2((BM) * ((BK) + (PAD_K)), (BK) * ((BM) + (PAD_MN)))
#define TSR_GPU_GEMM_SMEM(BM, BN, BK, STAGES, ESIZE, PAD_K, PAD_MN)                                \
  ((STAGES) *                                                                                      \
   (TSR_GPU_GEMM_STAGE_ELEMS(BM, BK, PAD_K, PAD_MN) +                                              \
    TSR_GPU_GEMM_STAGE_ELEMS(BN, BK, PAD_K, PAD_MN)) *                                             \
   (ESIZE))

/* Packs one GEMM operand into a K-major copy whose rows start on 16 bytes
 * (the TMA-fed kernels' input when the operand's own strides cannot be
 * addressed by TMA, or tf32 operands that are not K-major): dst[b][r][k] =
 * src[b * src_batch + r * src_row + k * src_k], rows dst_pitch elements
 * apart, batch entries rows * dst_pitch apart. round_tf32: f32 values are
 * rounded to tf32 (to nearest) on the way. */
typedef struct tsr_gpu_gemm_pack_params {
  uint64_t src, dst;
  int64_t rows, depth, batch;
  int64_t src_batch, src_row, src_k;
  int64_t dst_pitch;
  int32_t esize; /* 2 or 4 */
  int32_t round_tf32;
} tsr_gpu_gemm_pack_params;

/* ---- attention ---- */

typedef struct tsr_gpu_attention_params {
  uint64_t q, k, v, o, lse;
  int64_t q_b, q_s, q_h, q_d;
  int64_t k_b, k_s, k_h, k_d;
  int64_t v_b, v_s, v_h, v_d;
  int64_t o_b, o_s, o_h, o_d;
  int64_t lse_b, lse_h, lse_s;
  int64_t seq_q, seq_kv, heads_q, heads_kv, head_dim;
  int64_t window_left, window_right; /* < 0: unbounded */
  float scale_log2;                  /* scale * log2(e) */
  int32_t has_lse;
  int32_t kv_tile; /* generic kernel: keys per shared-memory tile */
  int32_t group;   /* heads_q / heads_kv */
  /* ---- serving (the generic and decode kernels; zero for dense problems) ----
   * Packed q/o: q_b = o_b = 0 and q_s the row stride of [total_q, Hq, D]
   * (row q_first + i); packed lse [Hq, total_q]: lse_b = 0. Packed k/v: k_b =
   * 0, k_s the row stride (row kv_first + j). Paged k/v: k_b is the block
   * stride, k_s the stride of a row within a block. seq_q is dense q's Sq,
   * seq_kv dense k's Skv or the paged capacity (max_blocks * block_size). */
  uint64_t cu_q, cu_kv, block_table, seqlens_kv; /* int32 index tensors; 0: absent */
  uint64_t faults;   /* the queue's TSR_PLUGIN_FAULT_COUNT int32 words */
  uint64_t partials; /* decode: the split partials in the queue's workspace */
  int64_t cu_q_stride, cu_kv_stride, seqlens_stride, table_b, table_j; /* elements */
  int64_t batch, max_seqlen_q, max_seqlen_kv;
  int64_t q_rows;  /* packed q: total_q */
  int64_t kv_rows; /* packed k: total_kv; paged: num_blocks */
  int64_t block_size, max_blocks;
  int64_t chunk; /* decode: keys per split (a multiple of the kernel's keys per step) */
  float scale;   /* scale as given (softcap applies to scale * q.k) */
  float softcap; /* 0: none */
  int32_t serving;
  int32_t packed_q, packed_kv, paged;
  int32_t block_shift; /* log2(block_size) when a power of two, else -1 */
  int32_t splits;      /* decode: key chunks per (sequence, kv head, row group) */
  int32_t row_groups;  /* decode: tiles of rows (query heads x query rows) per kv head */
  int32_t tile_rows;   /* decode: rows per tile (the split kernel's RT) */
  /* decode with softcap: cap * tanh(s / cap) in log2 units as
   * cap_log2 * (1 - 2 / (2^(s * cap_exp2) + 1)): 2 log2(e) / cap, cap log2(e) */
  float cap_exp2, cap_log2;
  /* decode on tensor cores: one uint32 per (sequence, kv head, row group),
   * zero between launches; the split block that arrives last merges the
   * partials (no combine launch). 0: the combine kernel does. */
  uint64_t combine_counters;
} tsr_gpu_attention_params;

/* Device faults (plugin.h's TSR_PLUGIN_FAULT_*; configs.c asserts they agree). */
#define TSR_GPU_FAULT_CE_TARGET 0
#define TSR_GPU_FAULT_CU_SEQLENS_Q 1
#define TSR_GPU_FAULT_CU_SEQLENS_KV 2
#define TSR_GPU_FAULT_SEQLENS_KV 3
#define TSR_GPU_FAULT_BLOCK_TABLE 4
#define TSR_GPU_FAULT_MAX_SEQLEN_Q 5
#define TSR_GPU_FAULT_MAX_SEQLEN_KV 6
#define TSR_GPU_FAULT_KV_SLOT 7

/* Flash kernel on tensor cores: BQ query rows and 2 x KV_STAGES key/value
 * tiles of BKV rows in shared memory, rows padded by FLASH_PAD elements. */
#define TSR_GPU_FLASH_PAD 8
#define TSR_GPU_FLASH_SMEM(DP, BQ, BKV, KV_STAGES)                                                 \
  (((BQ) + 2 * (KV_STAGES) * (BKV)) * ((DP) + TSR_GPU_FLASH_PAD) * 2)
/* Decode (split-KV) kernel: 128 threads; the rows of a kv head's tile (its
 * query heads x query rows, row = query row * group + head in group) in
 * tiles of 4 or 8; partials per (sequence, kv head, row group, split) in the
 * workspace: max and sum [rows][2] f32, then o [rows][head_dim] f32. */
#define TSR_GPU_DECODE_THREADS 128
#define TSR_GPU_DECODE_MAX_Q 16

/* Decode on tensor cores (attention_decode_mma.cu): one m16 tile of rows a
 * block (query heads x query rows of a kv head, padded), the Q tile and
 * STAGES K/V tiles of BKV keys in shared memory; its partials are the split
 * kernel's with tile_rows 16. */
#define TSR_GPU_DECODE_MMA_ROWS 16
#define TSR_GPU_DECODE_MMA_SMEM(DP, BKV, STAGES)                                                   \
  ((TSR_GPU_DECODE_MMA_ROWS + 2 * (STAGES) * (BKV)) * ((DP) + TSR_GPU_FLASH_PAD) * 2)

/* kv_append: a thread per 16-byte vector (vec) or element of a row. */
typedef struct tsr_gpu_kv_append_params {
  uint64_t k_new, v_new, k_cache, v_cache, slots, faults;
  int64_t rows, heads, units; /* units: 16-byte vectors (vec) or elements per (row, head) */
  int64_t slots_stride;
  int64_t kn_t, kn_h, kn_d, vn_t, vn_h, vn_d; /* k_new / v_new strides */
  int64_t kc_b, kc_s, kc_h, kc_d, vc_b, vc_s, vc_h, vc_d;
  int64_t block_size, slot_count; /* slot_count: num_blocks * block_size */
  int32_t has_v;
  int32_t vec; /* 16-byte units: unit stride along D, 16-byte aligned rows */
} tsr_gpu_kv_append_params;

/* Generic kernel: 4 query rows per block, one per warp. */
#define TSR_GPU_ATTN_ROWS 4
#define TSR_GPU_ATTN_GENERIC_SMEM(D, KT)                                                           \
  ((2 * TSR_GPU_ATTN_ROWS * (D) + 2 * (KT) * ((D) + 1) + TSR_GPU_ATTN_ROWS * 32) * 4)

/* ---- row ops: rmsnorm, layernorm, softmax, cross entropy ---- */

/* Up to three leading dimensions index the rows (the row is the last one). */
typedef struct tsr_gpu_rows_params {
  uint64_t x, residual, weight, bias, y, residual_out;
  uint64_t targets, loss, lse; /* cross entropy */
  uint64_t status;             /* int32 word: smallest row with a bad target */
  int64_t rows, n;
  int64_t lead[3]; /* extents of the leading dimensions, padded with 1 */
  int64_t x_lead[3], residual_lead[3], y_lead[3], residual_out_lead[3];
  int64_t x_col, residual_col, y_col, residual_out_col; /* stride of the row dimension */
  int64_t weight_stride, bias_stride;
  int64_t targets_stride, loss_stride, lse_stride;
  int64_t ignore_index;
  float eps, scale;
  int32_t dtype;
  int32_t weight_dtype; /* weight and bias */
  int32_t vec;          /* every row tensor: unit row stride, 16-byte aligned rows */
  int32_t cache_row;    /* the row (f32) fits the block's shared memory */
  int32_t regs;         /* vec, n a multiple of the vector, n <= TSR_GPU_ROW_REGS x threads:
                           the row lives in registers (one read, one write) */
  int32_t weight_vec;   /* weight (and bias): x's dtype, unit stride, 16-byte aligned */
} tsr_gpu_rows_params;
/* Elements of a row each thread holds in registers on the register path. */
#define TSR_GPU_ROW_REGS 32

/* ---- elementwise: swiglu, gelu, rope ---- */

typedef struct tsr_gpu_elementwise_params {
  uint64_t x, up, y; /* swiglu: x = gate */
  int64_t total;     /* elements (rope: pairs) */
  int64_t shape[4];  /* padded in front with 1 to rank 4 */
  int64_t x_strides[4], up_strides[4], y_strides[4];
  int64_t position_offset; /* rope */
  float log2_theta;        /* rope: log2(theta) */
  int32_t rotary_dim;      /* rope */
  int32_t style;           /* rope: 0 neox, 1 gpt-j */
  int32_t approximate;     /* gelu: 0 erf, 1 tanh */
  int32_t dtype;
  int32_t vec; /* all dense row-major, 16-byte aligned: flat vector loop; rope: the
                  16-byte path (unit channel stride, 16-byte aligned heads) */
} tsr_gpu_elementwise_params;
/* RoPE's 16-byte path: heads per thread (sines and cosines reused across them). */
#define TSR_GPU_ROPE_HEADS 4

#endif /* TESSERA_GPU_KERNEL_PARAMS_H */
