/* SPDX-License-Identifier: Apache-2.0 */
/* AMD's part of the variant tables, as data for the GPU layer
 * (backends/gpu/configs.h): the matrix-core GEMM kernels of kernels/
 * (MFMA on CDNA2/CDNA3, WMMA on RDNA3/RDNA4, a SIMT kernel for 16-bit data
 * elsewhere), their rows, and the GEMM tables per architecture class, chosen
 * by the gfx target. A kernel exists only in the code objects of the targets
 * that have its instruction; the layer marks the others unavailable there
 * (kernels_per_target). */
#include <string.h>

#include "hip_internal.h"
#include "kernels/hip_attention_list.h"
#include "kernels/hip_kernel_list.h"

_Static_assert(TSR_GPU_F32 == TSR_DTYPE_F32 && TSR_GPU_F16 == TSR_DTYPE_F16 &&
                   TSR_GPU_BF16 == TSR_DTYPE_BF16 && TSR_GPU_I32 == TSR_DTYPE_I32,
               "kernel dtype codes follow tsr_dtype");

/* The architecture classes, the index of each one's table (below). */
enum { ARCH_GENERIC, ARCH_CDNA2, ARCH_CDNA3, ARCH_RDNA2, ARCH_RDNA3, ARCH_RDNA4, ARCH_COUNT };
#define CLASS(arch) (1u << (arch))

/* ------------------------------------------------------------------------ */
/* Kernels and rows                                                          */
/* ------------------------------------------------------------------------ */

/* The kernels beyond the portable ones: per list entry and dtype, with the
 * dynamic shared memory and block size they are launched with. */
#define KERNEL_MFMA(BM, BN, BK, WM, WN, S, INST)                                                   \
  {TSR_HIP_GEMM_MFMA_NAME(bf16, BM, BN, BK, WM, WN, S), TSR_HIP_GEMM_MFMA_SMEM(BM, BN, BK, S),     \
   TSR_HIP_MFMA_THREADS(WM, WN)},                                                                  \
      {TSR_HIP_GEMM_MFMA_NAME(f16, BM, BN, BK, WM, WN, S), TSR_HIP_GEMM_MFMA_SMEM(BM, BN, BK, S),  \
       TSR_HIP_MFMA_THREADS(WM, WN)},
#define KERNEL_MFMA_F32(BM, BN, BK, WM, WN, S, INST)                                               \
  {TSR_HIP_GEMM_MFMA_NAME(f32, BM, BN, BK, WM, WN, S), TSR_HIP_GEMM_MFMA_F32_SMEM(BM, BN, BK, S),  \
   TSR_HIP_MFMA_THREADS(WM, WN)},
#define KERNEL_WMMA(NAME, BM, BN, BK, WM, WN, S)                                                   \
  {NAME(bf16, BM, BN, BK, WM, WN, S), TSR_HIP_GEMM_WMMA_SMEM(BM, BN, BK, S),                       \
   TSR_HIP_WMMA_THREADS(WM, WN)},                                                                  \
      {NAME(f16, BM, BN, BK, WM, WN, S), TSR_HIP_GEMM_WMMA_SMEM(BM, BN, BK, S),                    \
       TSR_HIP_WMMA_THREADS(WM, WN)},
#define KERNEL_WMMA11(BM, BN, BK, WM, WN, S)                                                       \
  KERNEL_WMMA(TSR_HIP_GEMM_WMMA11_NAME, BM, BN, BK, WM, WN, S)
#define KERNEL_WMMA12(BM, BN, BK, WM, WN, S)                                                       \
  KERNEL_WMMA(TSR_HIP_GEMM_WMMA12_NAME, BM, BN, BK, WM, WN, S)
#define KERNEL_SIMT16(BM, BN, BK, WM, WN)                                                          \
  {TSR_HIP_GEMM_SIMT16_NAME(bf16, BM, BN, BK), TSR_HIP_GEMM_SIMT16_SMEM(BM, BN, BK),               \
   TSR_HIP_SIMT16_THREADS(WM, WN)},                                                                \
      {TSR_HIP_GEMM_SIMT16_NAME(f16, BM, BN, BK), TSR_HIP_GEMM_SIMT16_SMEM(BM, BN, BK),            \
       TSR_HIP_SIMT16_THREADS(WM, WN)},

#define KERNEL_FLASH(NAME, SMEM, THREADS, DP, BQ, BKV, W)                                          \
  {NAME(bf16, DP, BQ, BKV, W), SMEM(DP, BQ, BKV, W), THREADS(W)},                                  \
      {NAME(f16, DP, BQ, BKV, W), SMEM(DP, BQ, BKV, W), THREADS(W)},
#define KERNEL_FLASH_MFMA(DP, BQ, BKV, W)                                                          \
  KERNEL_FLASH(TSR_HIP_FLASH_MFMA_NAME, TSR_HIP_FLASH_MFMA_SMEM, TSR_HIP_FLASH_MFMA_THREADS, DP,   \
               BQ, BKV, W)
#define KERNEL_FLASH_WMMA11(DP, BQ, BKV, W)                                                        \
  KERNEL_FLASH(TSR_HIP_FLASH_WMMA11_NAME, TSR_HIP_FLASH_WMMA_SMEM, TSR_HIP_FLASH_WMMA_THREADS, DP, \
               BQ, BKV, W)
#define KERNEL_FLASH_WMMA12(DP, BQ, BKV, W)                                                        \
  KERNEL_FLASH(TSR_HIP_FLASH_WMMA12_NAME, TSR_HIP_FLASH_WMMA_SMEM, TSR_HIP_FLASH_WMMA_THREADS, DP, \
               BQ, BKV, W)

static const gpu_kernel_info hip_kernels[] = {
    TSR_HIP_GEMM_MFMA_CONFIGS(KERNEL_MFMA) TSR_HIP_GEMM_MFMA_F32_CONFIGS(KERNEL_MFMA_F32)
        TSR_HIP_GEMM_WMMA11_CONFIGS(KERNEL_WMMA11) TSR_HIP_GEMM_WMMA12_CONFIGS(KERNEL_WMMA12)
            TSR_HIP_GEMM_SIMT16_CONFIGS(KERNEL_SIMT16) TSR_HIP_FLASH_MFMA_CONFIGS(KERNEL_FLASH_MFMA)
                TSR_HIP_FLASH_WMMA11_CONFIGS(KERNEL_FLASH_WMMA11)
                    TSR_HIP_FLASH_WMMA12_CONFIGS(KERNEL_FLASH_WMMA12)};

/* Flash attention rows (launched like the portable flash kernels: BQ query
 * rows a block, warps x 32 threads), each kept to the GPUs of its
 * instruction. */
#define FLASH_ROW(TAG, NAME, SMEM, THREADS, ENGINE, CLASSES, NOTE, DP, BQ, BKV, W)                 \
  {.name = TAG "_d" #DP "_" #BQ "x" #BKV "_w" #W,                                                  \
   .kind = GPU_ATTENTION_FLASH,                                                                    \
   .head_dim_max = DP,                                                                             \
   .block_kv = BKV,                                                                                \
   .kv_stages = 1,                                                                                 \
   .smem = SMEM(DP, BQ, BKV, W),                                                                   \
   .kernels = {NULL, NAME(f16, DP, BQ, BKV, W), NAME(bf16, DP, BQ, BKV, W)},                       \
   .block_q = BQ,                                                                                  \
   .warps = THREADS(W) / 32,                                                                       \
   .engine = ENGINE,                                                                               \
   .arch_note = NOTE,                                                                              \
   .arch_classes = CLASSES},
#define FLASH_MFMA(DP, BQ, BKV, W)                                                                 \
  FLASH_ROW("flash_mfma", TSR_HIP_FLASH_MFMA_NAME, TSR_HIP_FLASH_MFMA_SMEM,                        \
            TSR_HIP_FLASH_MFMA_THREADS, "CDNA MFMA", CLASS(ARCH_CDNA2) | CLASS(ARCH_CDNA3),        \
            "for CDNA GPUs (MFMA)", DP, BQ, BKV, W)
#define FLASH_WMMA11(DP, BQ, BKV, W)                                                               \
  FLASH_ROW("flash_wmma11", TSR_HIP_FLASH_WMMA11_NAME, TSR_HIP_FLASH_WMMA_SMEM,                    \
            TSR_HIP_FLASH_WMMA_THREADS, "RDNA3 WMMA", CLASS(ARCH_RDNA3), "for RDNA3 GPUs (WMMA)",  \
            DP, BQ, BKV, W)
#define FLASH_WMMA12(DP, BQ, BKV, W)                                                               \
  FLASH_ROW("flash_wmma12", TSR_HIP_FLASH_WMMA12_NAME, TSR_HIP_FLASH_WMMA_SMEM,                    \
            TSR_HIP_FLASH_WMMA_THREADS, "RDNA4 WMMA", CLASS(ARCH_RDNA4), "for RDNA4 GPUs (WMMA)",  \
            DP, BQ, BKV, W)

static const gpu_attention_config hip_attention[] = {
    TSR_HIP_FLASH_MFMA_CONFIGS(FLASH_MFMA) TSR_HIP_FLASH_WMMA11_CONFIGS(FLASH_WMMA11)
        TSR_HIP_FLASH_WMMA12_CONFIGS(FLASH_WMMA12)};

/* GEMM rows, launched as the portable tensor-core kind (GPU_GEMM_MMA:
 * tiles in grid.x, batch in grid.y, K slices in grid.z for 16-row tiles).
 * The host launches warps_m x warps_n x 32 threads: a wave64 is two such
 * warps. A row with an f32 kernel runs f32 problems (MFMA's f32 product is
 * an f32 product: strict compute). */
#define ROW(NAME, BM_, BN_, BK_, WARPS_M, WARPS_N, S, SMEM, F32, F16, BF16, WHAT)                  \
  {.name = NAME,                                                                                   \
   .kind = GPU_GEMM_MMA,                                                                           \
   .bm = BM_,                                                                                      \
   .bn = BN_,                                                                                      \
   .bk = BK_,                                                                                      \
   .warps_m = WARPS_M,                                                                             \
   .warps_n = WARPS_N,                                                                             \
   .stages = S,                                                                                    \
   .smem = SMEM,                                                                                   \
   .kernels = {F32, F16, BF16},                                                                    \
   .description = WHAT},
#define ROW_MFMA(BM, BN, BK, WM, WN, S, INST)                                                      \
  ROW("mfma_" #BM "x" #BN "x" #BK "_w" #WM "x" #WN, BM, BN, BK, 2 * (WM), WN, S,                   \
      TSR_HIP_GEMM_MFMA_SMEM(BM, BN, BK, S), NULL,                                                 \
      TSR_HIP_GEMM_MFMA_NAME(f16, BM, BN, BK, WM, WN, S),                                          \
      TSR_HIP_GEMM_MFMA_NAME(bf16, BM, BN, BK, WM, WN, S),                                         \
      "CDNA MFMA " #INST "x" #INST " (bf16/f16, f32 accumulate): block " #BM "x" #BN "x" #BK       \
      ", " #WM "x" #WN " wave64s, " #S " LDS stages fed through registers")
#define ROW_MFMA_F32(BM, BN, BK, WM, WN, S, INST)                                                  \
  ROW("mfma_f32_" #BM "x" #BN "x" #BK "_w" #WM "x" #WN, BM, BN, BK, 2 * (WM), WN, S,               \
      TSR_HIP_GEMM_MFMA_F32_SMEM(BM, BN, BK, S),                                                   \
      TSR_HIP_GEMM_MFMA_NAME(f32, BM, BN, BK, WM, WN, S), NULL, NULL,                              \
      "CDNA MFMA 16x16x4 f32 (strict f32 products): block " #BM "x" #BN "x" #BK ", " #WM "x" #WN   \
      " wave64s, " #S " LDS stages")
#define ROW_WMMA(TAG, NAME, BM, BN, BK, WM, WN, S, WHAT)                                           \
  ROW(TAG "_" #BM "x" #BN "x" #BK "_w" #WM "x" #WN, BM, BN, BK, WM, WN, S,                         \
      TSR_HIP_GEMM_WMMA_SMEM(BM, BN, BK, S), NULL, NAME(f16, BM, BN, BK, WM, WN, S),               \
      NAME(bf16, BM, BN, BK, WM, WN, S),                                                           \
      WHAT " WMMA 16x16x16 (bf16/f16, f32 accumulate): block " #BM "x" #BN "x" #BK ", " #WM        \
           "x" #WN " wave32s, " #S " LDS stages")
#define ROW_WMMA11(BM, BN, BK, WM, WN, S)                                                          \
  ROW_WMMA("wmma11", TSR_HIP_GEMM_WMMA11_NAME, BM, BN, BK, WM, WN, S, "RDNA3")
#define ROW_WMMA12(BM, BN, BK, WM, WN, S)                                                          \
  ROW_WMMA("wmma12", TSR_HIP_GEMM_WMMA12_NAME, BM, BN, BK, WM, WN, S, "RDNA4")
#define ROW_SIMT16(BM, BN, BK, WM, WN)                                                             \
  ROW("simt16_" #BM "x" #BN "x" #BK, BM, BN, BK, WM, WN, 2, TSR_HIP_GEMM_SIMT16_SMEM(BM, BN, BK),  \
      NULL, TSR_HIP_GEMM_SIMT16_NAME(f16, BM, BN, BK), TSR_HIP_GEMM_SIMT16_NAME(bf16, BM, BN, BK), \
      "bf16/f16 on f32 FMA (GPUs without matrix cores): block " #BM "x" #BN "x" #BK                \
      ", 256 threads, double-buffered LDS")

static const gpu_gemm_config hip_gemm[] = {
    TSR_HIP_GEMM_MFMA_CONFIGS(ROW_MFMA) TSR_HIP_GEMM_MFMA_F32_CONFIGS(ROW_MFMA_F32)
        TSR_HIP_GEMM_WMMA11_CONFIGS(ROW_WMMA11) TSR_HIP_GEMM_WMMA12_CONFIGS(ROW_WMMA12)
            TSR_HIP_GEMM_SIMT16_CONFIGS(ROW_SIMT16)};

/* Every architecture's table lists its matrix rows (fastest first: larger
 * tiles first, as the heuristic takes the first that fills the GPU), the
 * portable decode and f32 rows, then the SIMT 16-bit rows as the fallback.
 * Orders are reasoned, not measured: no AMD GPU was reachable (backends/hip/
 * README.md). */
#define DECODE_AND_F32 "gemv_splitk", "simt_128x128x16", "simt_128x128x16_b2"
#define MFMA_ROWS                                                                                  \
  "mfma_256x128x32_w4x2", "mfma_128x128x32_w2x2", "mfma_128x64x32_w2x2", "mfma_64x64x32_w2x2",     \
      "mfma_16x128x64_w1x4", "mfma_f32_128x128x16_w2x2", "mfma_f32_64x64x16_w2x2"
#define WMMA_ROWS(TAG)                                                                             \
  TAG "_128x128x32_w2x4", TAG "_128x128x32_w2x2", TAG "_128x64x32_w2x2", TAG "_64x64x32_w2x2",     \
      TAG "_16x128x64_w1x4"
#define SIMT16_ROWS "simt16_128x128x16", "simt16_64x64x16"
static const char *const generic_gemm[] = {SIMT16_ROWS, DECODE_AND_F32};
static const char *const cdna2_gemm[] = {MFMA_ROWS, SIMT16_ROWS, DECODE_AND_F32};
static const char *const cdna3_gemm[] = {MFMA_ROWS, SIMT16_ROWS, DECODE_AND_F32};
static const char *const rdna2_gemm[] = {SIMT16_ROWS, DECODE_AND_F32};
static const char *const rdna3_gemm[] = {WMMA_ROWS("wmma11"), SIMT16_ROWS, DECODE_AND_F32};
static const char *const rdna4_gemm[] = {WMMA_ROWS("wmma12"), SIMT16_ROWS, DECODE_AND_F32};

/* ------------------------------------------------------------------------ */
/* Tables per architecture class                                             */
/* ------------------------------------------------------------------------ */

static int arch_of(int major, int minor) {
  if (major == 9 && minor == 0x0a)
    return ARCH_CDNA2;
  if (major == 9 && minor >= 0x40)
    return ARCH_CDNA3;
  if (major == 10 && minor >= 0x30)
    return ARCH_RDNA2;
  if (major == 11)
    return ARCH_RDNA3;
  if (major == 12)
    return ARCH_RDNA4;
  return ARCH_GENERIC;
}

#define TABLE(NAME, LIST)                                                                          \
  { NAME, LIST, (int)(sizeof LIST / sizeof LIST[0]) }
static const gpu_arch_table arch_tables[ARCH_COUNT] = {
    [ARCH_GENERIC] = TABLE("generic (SIMT)", generic_gemm),
    [ARCH_CDNA2] = TABLE("cdna2 (gfx90a)", cdna2_gemm),
    [ARCH_CDNA3] = TABLE("cdna3 (gfx94x/gfx950)", cdna3_gemm),
    [ARCH_RDNA2] = TABLE("rdna2 (gfx103x)", rdna2_gemm),
    [ARCH_RDNA3] = TABLE("rdna3 (gfx11xx)", rdna3_gemm),
    [ARCH_RDNA4] = TABLE("rdna4 (gfx12xx)", rdna4_gemm),
};

const char *hip_arch_class_name(int major, int minor) {
  return arch_tables[arch_of(major, minor)].name;
}

const gpu_vendor hip_vendor = {
    .external_kind = TSR_EXTERNAL_HIP_DEVICE_POINTER,
    .external_what = "HIP device pointers",
    .external_stream_kind = TSR_EXTERNAL_HIP_STREAM,
    .external_stream_what = "HIP streams",
    .kernels_per_target = true,
    .kernels = hip_kernels,
    .kernel_count = (int)(sizeof hip_kernels / sizeof hip_kernels[0]),
    .gemm = hip_gemm,
    .gemm_count = (int)(sizeof hip_gemm / sizeof hip_gemm[0]),
    .attention = hip_attention,
    .attention_count = (int)(sizeof hip_attention / sizeof hip_attention[0]),
    .arch_tables = arch_tables,
    .arch_count = ARCH_COUNT,
    .arch_of = arch_of,
};
