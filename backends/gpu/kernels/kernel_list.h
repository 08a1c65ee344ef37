/* SPDX-License-Identifier: Apache-2.0 */
/* The portable kernels' instantiations, listed once for both sides: the
 * device code (the .cu files of this folder) instantiates a kernel for each
 * entry and the host (backends/gpu/configs.c) builds its variant tables and
 * kernel names from the same entries, so a name the host asks for always
 * exists in the module. A vendor's own kernels have their own list beside
 * their code (backends/cuda/kernels/sm90.h). */
#ifndef TESSERA_GPU_KERNEL_LIST_H
#define TESSERA_GPU_KERNEL_LIST_H

/* Tensor-core GEMM for bf16 / f16 (mma.sync m16n8k16):
 * X(BM, BN, BK, WARPS_M, WARPS_N, STAGES). The 16-row tile is the decode
 * path (M <= 16): split over K across blocks, the last block of a tile sums
 * the slices in order. */
#define TSR_GEMM_MMA_CONFIGS(X)                                                                    \
  X(128, 256, 32, 2, 4, 3)                                                                         \
  X(128, 128, 32, 2, 4, 4)                                                                         \
  X(128, 128, 32, 2, 4, 3)                                                                         \
  X(64, 128, 32, 2, 2, 4)                                                                          \
  X(64, 64, 32, 2, 2, 4)                                                                           \
  X(16, 128, 64, 1, 4, 4)

/* Tensor-core GEMM for f32 inputs in tf32 (mma.sync m16n8k8), same fields. */
#define TSR_GEMM_TF32_CONFIGS(X)                                                                   \
  X(128, 128, 16, 2, 4, 4)                                                                         \
  X(64, 64, 16, 2, 2, 4)

/* Decode GEMM for bf16 / f16 with M <= 16 (weights streamed into mma.sync
 * fragments): X(WARPS, CHUNKS), WARPS warps a block splitting its K slice,
 * two batches of CHUNKS 32-deep K chunks in registers per warp (one in
 * flight while the other multiplies). */
#define TSR_GEMM_STREAM_CONFIGS(X) X(4, 2) X(8, 2) X(8, 1)

/* Rows of A a GEMV thread block keeps accumulators for, per B layout:
 * K-contiguous B (a warp per column) and N-contiguous B (8 columns a thread). */
#define TSR_GEMV_K_ROWS(X) X(1) X(4) X(16)
#define TSR_GEMV_N_ROWS(X) X(1) X(4) X(8)

/* Flash attention on tensor cores: X(DP, BQ, BKV, WARPS, KV_STAGES,
 * Q_IN_REGISTERS): head dims up to DP (multiples of 8), BQ query rows per
 * block over WARPS warps (BQ / WARPS rows, a multiple of 16, per warp), BKV
 * keys per tile. Per head dim, the fastest on sm_90 (H100, measured) comes
 * first; the 64-row configs fit GPUs with less shared memory per block
 * (sm_86/89). */
#define TSR_FLASH_CONFIGS(X)                                                                       \
  X(64, 128, 128, 4, 2, 0)                                                                         \
  X(64, 128, 64, 4, 2, 1)                                                                          \
  X(64, 128, 64, 8, 2, 1)                                                                          \
  X(64, 64, 64, 4, 2, 1)                                                                           \
  X(128, 128, 64, 4, 2, 0)                                                                         \
  X(128, 128, 64, 8, 2, 1)                                                                         \
  X(128, 64, 64, 4, 2, 1)                                                                          \
  X(256, 64, 32, 4, 1, 0)

/* The flash configs that also have a serving form (packed / paged keys,
 * per-sequence lengths and masks, softcap, device faults): the first of
 * each head-dim class, its 64-row sibling and (d128) the 8-warp one that
 * keeps its registers, same fields. */
#define TSR_FLASH_SERVING_CONFIGS(X)                                                               \
  X(64, 128, 128, 4, 2, 0)                                                                         \
  X(64, 64, 64, 4, 2, 1)                                                                           \
  X(128, 128, 64, 4, 2, 0)                                                                         \
  X(128, 128, 64, 8, 2, 1)                                                                         \
  X(128, 64, 64, 4, 2, 1)                                                                          \
  X(256, 64, 32, 4, 1, 0)

/* Split-KV decode attention (attention_decode.cu): X(DP, RT), head dims up
 * to DP (multiples of a 16-byte vector), RT rows (query heads of a kv head x
 * query rows) per tile. */
#define TSR_DECODE_CONFIGS(X) X(64, 4) X(64, 8) X(128, 4) X(128, 8) X(256, 4) X(256, 8)
/* The split counts the decode variants force (decode_split<N>); 0: the
 * heuristic (decode_split_auto). */
#define TSR_DECODE_SPLITS(X) X(1) X(2) X(4) X(8) X(16) X(32) X(64)

/* Split-KV decode on tensor cores (attention_decode_mma.cu, bf16 / f16):
 * X(DP, BKV, WARPS, STAGES), BKV keys a tile (BKV / WARPS a warp: 8 or a
 * multiple of 16), STAGES tiles in shared memory (STAGES - 1 in flight).
 * DEFAULTS: one per head-dim class (64, 128, 256, in that order), what
 * decode_mma_split* run. VARIANTS: the decode_mma_d<DP>_k<BKV>_s<STAGES>
 * rows (heuristic split count): smaller tiles in more stages in the same or
 * less shared memory, so more of a block's ring is in flight while it waits.
 * Each leaves room for two blocks an SM on sm_90 (hence no 128-key d128
 * tile: two stages of it are 140 KB, one block an SM). */
#define TSR_DECODE_MMA_DEFAULTS(X) X(64, 64, 4, 4) X(128, 64, 4, 3) X(256, 64, 4, 2)
#define TSR_DECODE_MMA_VARIANTS(X)                                                                 \
  X(64, 32, 4, 8) X(128, 32, 4, 6) X(128, 32, 4, 4) X(256, 32, 4, 3)
#define TSR_DECODE_MMA_CONFIGS(X) TSR_DECODE_MMA_DEFAULTS(X) TSR_DECODE_MMA_VARIANTS(X)

/* dtype name in kernel names, with its device type. */
#define TSR_DTYPES_16(X) X(bf16, tsr_bf16) X(f16, tsr_f16)
#define TSR_DTYPES_ALL(X) X(f32, float) X(bf16, tsr_bf16) X(f16, tsr_f16)

#define TSR_GEMM_MMA_NAME(dt, BM, BN, BK, WM, WN, S)                                               \
  "tsr_gemm_mma_" #dt "_" #BM "x" #BN "x" #BK "_w" #WM "x" #WN "_s" #S
#define TSR_GEMM_PACK_NAME(bits) "tsr_gemm_pack_b" #bits
#define TSR_GEMM_TF32_NAME(BM, BN, BK, WM, WN, S)                                                  \
  "tsr_gemm_tf32_" #BM "x" #BN "x" #BK "_w" #WM "x" #WN "_s" #S
#define TSR_GEMM_SIMT16_NAME "tsr_gemm_simt_f32_128x128x16"
#define TSR_GEMM_SIMT16_B2_NAME "tsr_gemm_simt_f32_128x128x16_b2"
#define TSR_GEMM_STREAM_NAME(dt, W, U) "tsr_gemm_stream_" #dt "_w" #W "_u" #U
#define TSR_GEMV_K_NAME(dt, R) "tsr_gemv_k_" #dt "_r" #R
#define TSR_GEMV_N_NAME(dt, R) "tsr_gemv_n_" #dt "_r" #R
#define TSR_GEMM_SPLITK_NAME "tsr_gemm_splitk_reduce"
#define TSR_FLASH_NAME(dt, DP, BQ, BKV, W)                                                         \
  "tsr_attention_flash_" #dt "_d" #DP "_" #BQ "x" #BKV "_w" #W
/* FORM: serving (packed / paged / softcap) or varlen (neither paged nor capped) */
#define TSR_FLASH_FORM_NAME(FORM, dt, DP, BQ, BKV, W)                                              \
  "tsr_attention_flash_" #FORM "_" #dt "_d" #DP "_" #BQ "x" #BKV "_w" #W
#define TSR_FLASH_SERVING_NAME(dt, DP, BQ, BKV, W) TSR_FLASH_FORM_NAME(serving, dt, DP, BQ, BKV, W)
#define TSR_FLASH_VARLEN_NAME(dt, DP, BQ, BKV, W) TSR_FLASH_FORM_NAME(varlen, dt, DP, BQ, BKV, W)
#define TSR_ATTN_GENERIC_NAME(dt) "tsr_attention_generic_" #dt
#define TSR_DECODE_NAME(dt, DP, RT) "tsr_attention_decode_" #dt "_d" #DP "_r" #RT
#define TSR_DECODE_MMA_NAME(dt, DP, BKV, S)                                                        \
  "tsr_attention_decode_mma_" #dt "_d" #DP "_k" #BKV "_s" #S
#define TSR_DECODE_COMBINE_NAME(dt) "tsr_attention_decode_combine_" #dt
#define TSR_KV_APPEND_NAME(bits) "tsr_kv_append_b" #bits
#define TSR_ROWS_NAME(op, dt) "tsr_" #op "_" #dt
#define TSR_ELEMENTWISE_NAME(op, dt) "tsr_" #op "_" #dt

#endif /* TESSERA_GPU_KERNEL_LIST_H */
