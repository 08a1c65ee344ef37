/* SPDX-License-Identifier: Apache-2.0 */
/* The NVIDIA-only (sm_90a) kernels of the CUDA plugin: their instantiation
 * lists and names (as backends/gpu/kernels/kernel_list.h for the portable
 * ones), parameter blocks and shared-memory sizes (read by the host, C:
 * configs.c, ops_sm90.c), and the wgmma helpers the device code of
 * gemm_sm90.cu and attention_sm90.cu shares (C++, nvcc only). */
#ifndef TESSERA_CUDA_SM90_H
#define TESSERA_CUDA_SM90_H

#include "kernel_params.h"

/* Hopper GEMM for bf16 / f16, and f32 inputs as tf32 (sm_90a: wgmma fed by
 * TMA, warp-specialised, persistent): X(BN, STAGES); 128 x BN block tiles,
 * K slices of 128 bytes (64 16-bit or 32 tf32 elements). */
#define TSR_GEMM_WGMMA_CONFIGS(X) X(256, 4) X(128, 6)

/* Flash attention on sm_90a (wgmma): X(DP, BQ, BKV, OVERLAP), BQ / 64
 * warpgroups of 64 query rows each, BKV keys per tile; OVERLAP 1: each
 * tile's P V product runs under the next tile's softmax (three key/value
 * stages), 0: one after the other (two stages). */
#define TSR_FLASH_WGMMA_CONFIGS(X)                                                                 \
  X(128, 192, 64, 0)                                                                               \
  X(128, 192, 64, 1)                                                                               \
  X(64, 192, 128, 0)                                                                               \
  X(64, 192, 64, 1)

#define TSR_GEMM_WGMMA_NAME(dt, BN, S) "tsr_gemm_wgmma_" #dt "_128x" #BN "x64_s" #S
#define TSR_GEMM_WGMMA_TF32_NAME(BN, S) "tsr_gemm_wgmma_tf32_128x" #BN "x32_s" #S
#define TSR_FLASH_WGMMA_NAME(dt, DP, BQ, BKV, OV)                                                  \
  "tsr_attention_wgmma_" #dt "_d" #DP "_" #BQ "x" #BKV "_o" #OV
/* The sm_90a wgmma GEMM (gemm_sm90.cu): TMA tensor maps of A and B
 * (CUtensorMap: 128 opaque bytes, 64-byte aligned, built on the host with
 * cuTensorMapEncodeTiled) ahead of the common GEMM block. Each map is 3-D:
 * {the operand's unit-stride dim, its other matrix dim, batch or group}. */
#ifdef __cplusplus
#define TSR_GPU_ALIGN64 alignas(64)
#else
#define TSR_GPU_ALIGN64 _Alignas(64)
#endif
typedef struct tsr_gpu_tensor_map {
  TSR_GPU_ALIGN64 uint64_t opaque[16];
} tsr_gpu_tensor_map;

typedef struct tsr_gpu_gemm_sm90_params {
  tsr_gpu_tensor_map map_a, map_b;
  tsr_gpu_gemm_params gemm;     /* a_k_major / b_k_major: which tile layout the maps load */
  int32_t a_batched, b_batched; /* batch (plain) coordinate of the maps' third dim; else 0 */
} tsr_gpu_gemm_sm90_params;

/* Dynamic shared memory of a wgmma config: STAGES x (A 128 rows + B BN rows)
 * of 128 bytes (64 16-bit or 32 tf32 elements of K), 1024 bytes to align them for the 128-byte
 * swizzle, and the stages' two mbarriers. */
#define TSR_GPU_WGMMA_SMEM(BN, STAGES) ((STAGES) * (128 + (BN)) * 64 * 2 + 1024 + 16 * (STAGES))

/* The sm_90a (wgmma) kernel: unpadded tiles, 2 + OVERLAP key/value stages. */
#define TSR_GPU_FLASH_WGMMA_SMEM(DP, BQ, BKV, OVERLAP)                                             \
  (((BQ) + 2 * (2 + (OVERLAP)) * (BKV)) * (DP)*2)

#if defined(__CUDACC__)
/* wgmma accumulators as inline-asm operands: fragments d[0..N-1], read and
 * written ("+f"), in the order the instruction lists its D registers. */
#define TSR_WGMMA_ACC8(d, i)                                                                       \
  "+f"(d[i + 0]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]),  \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define TSR_WGMMA_ACC32(d)                                                                         \
  TSR_WGMMA_ACC8(d, 0), TSR_WGMMA_ACC8(d, 8), TSR_WGMMA_ACC8(d, 16), TSR_WGMMA_ACC8(d, 24)
#define TSR_WGMMA_ACC64(d)                                                                         \
  TSR_WGMMA_ACC32(d), TSR_WGMMA_ACC8(d, 32), TSR_WGMMA_ACC8(d, 40), TSR_WGMMA_ACC8(d, 48),         \
      TSR_WGMMA_ACC8(d, 56)
#define TSR_WGMMA_ACC128(d)                                                                        \
  TSR_WGMMA_ACC64(d), TSR_WGMMA_ACC8(d, 64), TSR_WGMMA_ACC8(d, 72), TSR_WGMMA_ACC8(d, 80),         \
      TSR_WGMMA_ACC8(d, 88), TSR_WGMMA_ACC8(d, 96), TSR_WGMMA_ACC8(d, 104),                        \
      TSR_WGMMA_ACC8(d, 112), TSR_WGMMA_ACC8(d, 120)

/* sm_90a warpgroup matrix products (wgmma), shared by the GEMM and attention
 * kernels: ordering around the asynchronous products. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
TSR_DEVICE void tsr_wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
TSR_DEVICE void tsr_wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
/* Waits until at most N committed groups are still running. */
template <int N> TSR_DEVICE void tsr_wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* Ordinary (generic-proxy) shared-memory writes, cp.async's included, before
 * the tensor cores or the copy engine read them through the async proxy. */
TSR_DEVICE void tsr_fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
#endif
#endif /* __CUDACC__ */

#endif /* TESSERA_CUDA_SM90_H */
