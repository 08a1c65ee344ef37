/* SPDX-License-Identifier: Apache-2.0 */
/* The HIP plugin's own GEMM kernels (gemm_matrix.cpp), listed once for both
 * sides like kernel_list.h: the device code instantiates one kernel per
 * entry and dtype, the host (backends/hip/configs.c) builds its rows and
 * kernel tables from the same entries. Plain C: the expansions hold only
 * numbers and string literals.
 *
 * All of them are launched like the portable mma.sync kernels (kind
 * GPU_GEMM_MMA): grid.x tiles, grid.y batch entries, grid.z split-K slices
 * (honoured by every kernel; the host splits only 16-row tiles), dynamic
 * shared memory = the SMEM macro of the entry, block = the THREADS macro.
 * The host's launch takes warps_m * warps_n * 32 threads, so a row sets
 * warps_m * warps_n = THREADS / 32 (MFMA: warps_m = 2 * WM, warps_n = WN).
 * A kernel exists only in code objects for targets with its instruction
 * (MFMA: gfx90a, gfx940-942; WMMA11: gfx1100-1103, gfx1150/1151; WMMA12:
 * gfx1200/1201); the simt16 kernels exist for every target. */
#ifndef TESSERA_HIP_KERNEL_LIST_H
#define TESSERA_HIP_KERNEL_LIST_H

#include "kernel_params.h"

/* Shared-memory padding of the operand tiles (elements): 16 bytes a row, as
 * in the portable kernels, keeps rows 16-byte aligned and staggers banks. */
#define TSR_HIP_GEMM_PAD(ESIZE) ((ESIZE) == 4 ? 4 : 8)
/* Tiles of both layouts fit a stage, so the layout is chosen per call. */
#define TSR_HIP_GEMM_MX_SMEM(BM, BN, BK, STAGES, ESIZE)                                            \
  TSR_GPU_GEMM_SMEM(BM, BN, BK, STAGES, ESIZE, TSR_HIP_GEMM_PAD(ESIZE), TSR_HIP_GEMM_PAD(ESIZE))

/* ---- CDNA2 / CDNA3 (wave64): v_mfma_f32_{32x32x8,16x16x16}_{bf16_1k,f16} ----
 * X(BM, BN, BK, WM, WN, STAGES, INST): BM x BN tiles, BK deep slices, WM x WN
 * waves of 64 lanes (wave tile BM / WM x BN / WN), STAGES shared-memory
 * buffers (2: global loads of the next slice go through registers while
 * the current one multiplies), INST 32 (32x32x8) or 16 (16x16x16).
 * Threads: WM * WN * 64. Shared memory: TSR_HIP_GEMM_MFMA_SMEM (at most
 * 64 KiB, the LDS of a workgroup). The 16-row tile is the decode path
 * (split over K). */
#define TSR_HIP_GEMM_MFMA_CONFIGS(X)                                                               \
  X(256, 128, 32, 4, 2, 2, 32)                                                                     \
  X(128, 128, 32, 2, 2, 2, 32)                                                                     \
  X(128, 64, 32, 2, 2, 2, 32)                                                                      \
  X(64, 64, 32, 2, 2, 2, 16)                                                                       \
  X(16, 128, 64, 1, 4, 2, 16)
#define TSR_HIP_MFMA_THREADS(WM, WN) ((WM) * (WN)*64)
#define TSR_HIP_GEMM_MFMA_SMEM(BM, BN, BK, STAGES) TSR_HIP_GEMM_MX_SMEM(BM, BN, BK, STAGES, 2)

/* True f32 on CDNA (v_mfma_f32_16x16x4_f32, an f32 product: usable for
 * strict f32 compute), the same fields (INST 16). Threads WM * WN * 64. */
#define TSR_HIP_GEMM_MFMA_F32_CONFIGS(X)                                                           \
  X(128, 128, 16, 2, 2, 2, 16)                                                                     \
  X(64, 64, 16, 2, 2, 2, 16)
#define TSR_HIP_GEMM_MFMA_F32_SMEM(BM, BN, BK, STAGES) TSR_HIP_GEMM_MX_SMEM(BM, BN, BK, STAGES, 4)

/* ---- RDNA3 (gfx11) and RDNA4 (gfx12), wave32:
 * v_wmma_f32_16x16x16_{f16,bf16} ----
 * X(BM, BN, BK, WM, WN, STAGES): fields as above, waves of 32 lanes.
 * Threads: WM * WN * 32 (warps_m = WM, warps_n = WN). Shared memory:
 * TSR_HIP_GEMM_WMMA_SMEM. 128 x 128 tiles take 8 waves: with 4 (64 x 64 a
 * wave) gfx11's replicated 16-element fragments and 128 accumulators
 * spilled (clang 19: 256 VGPRs, ~350 spilled). */
#define TSR_HIP_GEMM_WMMA11_CONFIGS(X)                                                             \
  X(128, 128, 32, 2, 4, 2)                                                                         \
  X(128, 64, 32, 2, 2, 2)                                                                          \
  X(64, 64, 32, 2, 2, 2)                                                                           \
  X(16, 128, 64, 1, 4, 2)
#define TSR_HIP_GEMM_WMMA12_CONFIGS(X) TSR_HIP_GEMM_WMMA11_CONFIGS(X)
#define TSR_HIP_WMMA_THREADS(WM, WN) ((WM) * (WN)*32)
#define TSR_HIP_GEMM_WMMA_SMEM(BM, BN, BK, STAGES) TSR_HIP_GEMM_MX_SMEM(BM, BN, BK, STAGES, 2)

/* ---- every target (RDNA2 / gfx1030 has no matrix cores): 16-bit inputs,
 * f32 FMA ----
 * X(BM, BN, BK, WM, WN): BM x BN tiles (BM, BN multiples of 64), BK deep,
 * 256 threads as WM x WN = 8 warps of 32 (each thread BM / 16 x BN / 16
 * outputs). Shared memory TSR_HIP_GEMM_SIMT16_SMEM (slices stored as f32,
 * double-buffered). */
#define TSR_HIP_GEMM_SIMT16_CONFIGS(X)                                                             \
  X(128, 128, 16, 2, 4)                                                                            \
  X(64, 64, 16, 2, 4)
#define TSR_HIP_SIMT16_THREADS(WM, WN) ((WM) * (WN)*32)
#define TSR_HIP_GEMM_SIMT16_SMEM(BM, BN, BK) (2 * (BK) * ((BM) + 4 + (BN) + 4) * 4)

/* dtype name in kernel names, with its device type. */
#define TSR_HIP_DTYPES_16(X) X(bf16, tsr_bf16) X(f16, tsr_f16)

/* Kernel names (dt: bf16, f16; f32 for the MFMA f32 list). INST is not in
 * the name: no two MFMA entries share a tile. */
#define TSR_HIP_GEMM_MFMA_NAME(dt, BM, BN, BK, WM, WN, S)                                          \
  "tsr_gemm_mfma_" #dt "_" #BM "x" #BN "x" #BK "_w" #WM "x" #WN "_s" #S
#define TSR_HIP_GEMM_WMMA11_NAME(dt, BM, BN, BK, WM, WN, S)                                        \
  "tsr_gemm_wmma11_" #dt "_" #BM "x" #BN "x" #BK "_w" #WM "x" #WN "_s" #S
#define TSR_HIP_GEMM_WMMA12_NAME(dt, BM, BN, BK, WM, WN, S)                                        \
  "tsr_gemm_wmma12_" #dt "_" #BM "x" #BN "x" #BK "_w" #WM "x" #WN "_s" #S
#define TSR_HIP_GEMM_SIMT16_NAME(dt, BM, BN, BK) "tsr_gemm_simt16_" #dt "_" #BM "x" #BN "x" #BK

#endif /* TESSERA_HIP_KERNEL_LIST_H */
