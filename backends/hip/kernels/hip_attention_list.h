/* SPDX-License-Identifier: Apache-2.0 */
/* The HIP plugin's flash attention kernels on matrix cores
 * (attention_matrix.cpp), listed once for both sides: the device code
 * instantiates one kernel per entry and dtype (bf16, f16), the host
 * (backends/hip/configs.c) builds its gpu_attention_config rows from the
 * same entries. Plain C: the expansions hold only numbers and string
 * literals.
 *
 * Every kernel takes tsr_gpu_attention_params and is launched like the
 * portable flash kernels (kind GPU_ATTENTION_FLASH): grid (ceil(Sq / BQ),
 * Hq, B), block = the THREADS macro of its family (the config's warps =
 * THREADS / 32: MFMA 2 * W, WMMA W), dynamic shared memory = the SMEM
 * macro of its family (at most 64 KiB, a workgroup's LDS). The host selects
 * them as it selects the portable flash kernels: f16 / bf16, head_dim <= DP
 * and a multiple of 8, q / k / v with unit head-dim stride and 16-byte
 * aligned rows; o any strides.
 *
 * A kernel exists only in code objects for targets with its instruction
 * (MFMA: gfx90a, gfx940-942; WMMA11: gfx1100-1103, gfx1150/1151; WMMA12:
 * gfx1200/1201), and in the NVIDIA emulation build. */
#ifndef TESSERA_HIP_ATTENTION_LIST_H
#define TESSERA_HIP_ATTENTION_LIST_H

/* Shared-memory padding of a tile row (elements, 16 bytes): keeps rows
 * 16-byte aligned for vector reads and staggers banks. */
#define TSR_HIP_FLASH_PAD 8

/* Shared memory: a K tile [BKV][DP + PAD], a transposed V tile
 * [DP][BKV + PAD] and, where Q_LDS, the Q tile [BQ][DP + PAD]; 16-bit. */
#define TSR_HIP_FLASH_SMEM(DP, BQ, BKV, Q_LDS)                                                     \
  (((BKV) * ((DP) + TSR_HIP_FLASH_PAD) + (DP) * ((BKV) + TSR_HIP_FLASH_PAD) +                      \
    ((Q_LDS) ? (BQ) * ((DP) + TSR_HIP_FLASH_PAD) : 0)) *                                           \
   2)

/* ---- CDNA2 / CDNA3 (wave64): v_mfma_f32_{16x16x16,32x32x8}_{bf16_1k,f16} ----
 * X(DP, BQ, BKV, W): head dims up to DP, BQ query rows per block over W
 * waves of 64 lanes, each owning BQ / W consecutive rows; BQ / W is also
 * the instruction (16: 16x16x16, 32: 32x32x8). BKV keys per tile. Q stays
 * in registers. Threads W * 64. */
#define TSR_HIP_FLASH_MFMA_CONFIGS(X)                                                              \
  X(64, 64, 64, 4)                                                                                 \
  X(128, 64, 64, 4)                                                                                \
  X(128, 128, 64, 4)                                                                               \
  X(256, 64, 32, 4)
#define TSR_HIP_FLASH_MFMA_THREADS(W) ((W)*64)
#define TSR_HIP_FLASH_MFMA_SMEM(DP, BQ, BKV, W) TSR_HIP_FLASH_SMEM(DP, BQ, BKV, 0)

/* ---- RDNA3 (gfx11) and RDNA4 (gfx12), wave32:
 * v_wmma_f32_16x16x16_{f16,bf16} ----
 * X(DP, BQ, BKV, W): as above with waves of 32 lanes, 16 query rows each
 * (BQ = 16 W). The f32 output takes DP / 2 registers a lane, so beyond
 * DP 64 Q is re-read from shared memory (TSR_HIP_FLASH_WMMA_Q_LDS) and key
 * tiles shrink: in registers (gfx11, DP 128) it spilled ~400 VGPRs.
 * Threads W * 32. */
#define TSR_HIP_FLASH_WMMA11_CONFIGS(X)                                                            \
  X(64, 64, 64, 4)                                                                                 \
  X(128, 64, 32, 4)                                                                                \
  X(256, 64, 16, 4)
#define TSR_HIP_FLASH_WMMA12_CONFIGS(X) TSR_HIP_FLASH_WMMA11_CONFIGS(X)
#define TSR_HIP_FLASH_WMMA_Q_LDS(DP) ((DP) > 64)
#define TSR_HIP_FLASH_WMMA_THREADS(W) ((W)*32)
#define TSR_HIP_FLASH_WMMA_SMEM(DP, BQ, BKV, W)                                                    \
  TSR_HIP_FLASH_SMEM(DP, BQ, BKV, TSR_HIP_FLASH_WMMA_Q_LDS(DP))

/* Kernel names (dt: bf16, f16), e.g. "tsr_attention_mfma_bf16_d128_64x64_w4". */
#define TSR_HIP_FLASH_MFMA_NAME(dt, DP, BQ, BKV, W)                                                \
  "tsr_attention_mfma_" #dt "_d" #DP "_" #BQ "x" #BKV "_w" #W
#define TSR_HIP_FLASH_WMMA11_NAME(dt, DP, BQ, BKV, W)                                              \
  "tsr_attention_wmma11_" #dt "_d" #DP "_" #BQ "x" #BKV "_w" #W
#define TSR_HIP_FLASH_WMMA12_NAME(dt, DP, BQ, BKV, W)                                              \
  "tsr_attention_wmma12_" #dt "_d" #DP "_" #BQ "x" #BKV "_w" #W

#endif /* TESSERA_HIP_ATTENTION_LIST_H */
