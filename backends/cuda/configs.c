/* SPDX-License-Identifier: Apache-2.0 */
/* NVIDIA's part of the variant tables, as data for the GPU layer
 * (backends/gpu/configs.h): the sm_90a kernels (kernels/sm90.h), their GEMM
 * and attention rows, the GEMM tile tables per architecture class (sm_80,
 * sm_86/89, sm_90), and when the wgmma + TMA GEMM runs a problem. */
#include <string.h>

#include "cuda_internal.h"
#include "kernels/sm90.h"

/* The fatbin nvcc built (generated .c file). */
extern const unsigned char tsr_cuda_fatbin[];
extern const char tsr_cuda_fatbin_archs[];

_Static_assert(TSR_GPU_F32 == TSR_DTYPE_F32 && TSR_GPU_F16 == TSR_DTYPE_F16 &&
                   TSR_GPU_BF16 == TSR_DTYPE_BF16 && TSR_GPU_I32 == TSR_DTYPE_I32,
               "kernel dtype codes follow tsr_dtype");
_Static_assert(TSR_GPU_ACT_SILU == TSR_ACT_SILU && TSR_GPU_ACT_GELU_ERF == TSR_ACT_GELU_ERF &&
                   TSR_GPU_ACT_GELU_TANH == TSR_ACT_GELU_TANH && TSR_GPU_ACT_RELU == TSR_ACT_RELU,
               "kernel activation codes follow tsr_activation");

/* ------------------------------------------------------------------------ */
/* The sm_90a kernels and rows                                               */
/* ------------------------------------------------------------------------ */

#define KERNEL_WGMMA(BN, S)                                                                        \
  {TSR_GEMM_WGMMA_NAME(bf16, BN, S), TSR_GPU_WGMMA_SMEM(BN, S), 384},                              \
      {TSR_GEMM_WGMMA_NAME(f16, BN, S), TSR_GPU_WGMMA_SMEM(BN, S), 384},                           \
      {TSR_GEMM_WGMMA_TF32_NAME(BN, S), TSR_GPU_WGMMA_SMEM(BN, S), 384},
#define KERNEL_FLASH_WGMMA(DP, BQ, BKV, OV)                                                        \
  {TSR_FLASH_WGMMA_NAME(bf16, DP, BQ, BKV, OV), TSR_GPU_FLASH_WGMMA_SMEM(DP, BQ, BKV, OV),         \
   (BQ)*2},                                                                                        \
      {TSR_FLASH_WGMMA_NAME(f16, DP, BQ, BKV, OV), TSR_GPU_FLASH_WGMMA_SMEM(DP, BQ, BKV, OV),      \
       (BQ)*2},

static const gpu_kernel_info sm90_kernels[] = {TSR_GEMM_WGMMA_CONFIGS(KERNEL_WGMMA)
                                                   TSR_FLASH_WGMMA_CONFIGS(KERNEL_FLASH_WGMMA)};

/* How much more a wgmma block does per SM than the mma.sync tiles, rounded
 * down: on an H100 at 4096^3 bf16, 615-640 against 175-180 TFLOP/s
 * (docs/PERFORMANCE.md). Utilisation is weighed by it, so that a wgmma
 * config whose tiles keep a third of the SMs busy still beats mma.sync
 * tiles that fill them all. */
#define WGMMA_SPEEDUP 3.0

/* wgmma: 3 warpgroups (a TMA producer, two consumers of 64 rows each). */
#define GEMM_WGMMA(BN, S)                                                                          \
  {.name = "wgmma_128x" #BN "x64_s" #S "_ws_p",                                                    \
   .kind = GPU_GEMM_VENDOR,                                                                        \
   .bm = 128,                                                                                      \
   .bn = BN,                                                                                       \
   .bk = 64,                                                                                       \
   .warps_m = 3,                                                                                   \
   .warps_n = 4,                                                                                   \
   .stages = S,                                                                                    \
   .smem = TSR_GPU_WGMMA_SMEM(BN, S),                                                              \
   .kernels = {TSR_GEMM_WGMMA_TF32_NAME(BN, S), TSR_GEMM_WGMMA_NAME(f16, BN, S),                   \
               TSR_GEMM_WGMMA_NAME(bf16, BN, S)},                                                  \
   .speedup = WGMMA_SPEEDUP,                                                                       \
   .description = "sm_90a wgmma (bf16/f16/tf32) fed by TMA: 128x" #BN " x 128 B of K, " #S         \
                  " stages, producer + 2 consumer warpgroups, persistent; unaligned operands "     \
                  "packed"},

static const gpu_gemm_config sm90_gemm[] = {TSR_GEMM_WGMMA_CONFIGS(GEMM_WGMMA)};

#define FLASH_WGMMA(DP, BQ, BKV, OV)                                                               \
  {.name = "flash_wgmma_d" #DP "_" #BQ "x" #BKV "_o" #OV,                                          \
   .kind = GPU_ATTENTION_FLASH,                                                                    \
   .head_dim_max = DP,                                                                             \
   .block_kv = BKV,                                                                                \
   .kv_stages = 2 + (OV),                                                                          \
   .smem = TSR_GPU_FLASH_WGMMA_SMEM(DP, BQ, BKV, OV),                                              \
   .kernels = {NULL, TSR_FLASH_WGMMA_NAME(f16, DP, BQ, BKV, OV),                                   \
               TSR_FLASH_WGMMA_NAME(bf16, DP, BQ, BKV, OV)},                                       \
   .block_q = BQ,                                                                                  \
   .warps = (BQ) / 16,                                                                             \
   .engine = "sm_90a wgmma",                                                                       \
   .arch_exact = 1,                                                                                \
   .arch_major = 9,                                                                                \
   .arch_minor = 0,                                                                                \
   .arch_note = "sm_90a code (wgmma)"},

static const gpu_attention_config sm90_attention[] = {TSR_FLASH_WGMMA_CONFIGS(FLASH_WGMMA)};

/* ------------------------------------------------------------------------ */
/* Tile tables per architecture                                              */
/* ------------------------------------------------------------------------ */

/* Which tile configs each architecture gets, fastest first (the heuristic
 * takes the first that fills the GPU). sm_90 is ordered by `tessera tune`
 * on an H200 (docs/PERFORMANCE.md), behind the wgmma + TMA kernels (sm_90a,
 * compute capability 9.0 only; docs/PERFORMANCE.md); sm_80
 * (A100: 164 KiB shared memory per SM) takes the same tiles in the same
 * order until measured there; sm_86 and sm_89 (99 KiB per block, 100 KiB per
 * SM, 128 FP32 lanes but half the tensor throughput per SM) leave out
 * 128x256, which would run one block per SM with 254 registers a thread, and
 * lead with tiles that fit two blocks. */
/* The decode configs, every architecture alike (mma.sync and movmatrix:
 * sm_80 on), fastest on the H100 first (docs/PERFORMANCE.md). */
#define STREAM_TABLE "stream_16x32_w8_u2", "stream_16x32_w4_u2", "stream_16x32_w8_u1"
static const char *const sm80_gemm[] = {
    "mma_64x128x32_w2x2_s4",   "mma_128x128x32_w2x4_s4", "mma_128x128x32_w2x4_s3",
    "mma_128x256x32_w2x4_s3",  "mma_64x64x32_w2x2_s4",   "mma_16x128x64_w1x4_s4",
    "tf32_128x128x16_w2x4_s4", "tf32_64x64x16_w2x2_s4",  STREAM_TABLE};
static const char *const sm86_gemm[] = {"mma_64x128x32_w2x2_s4",   "mma_128x128x32_w2x4_s3",
                                        "mma_64x64x32_w2x2_s4",    "mma_128x128x32_w2x4_s4",
                                        "mma_16x128x64_w1x4_s4",   "tf32_64x64x16_w2x2_s4",
                                        "tf32_128x128x16_w2x4_s4", STREAM_TABLE};
static const char *const sm90_gemm_table[] = {"wgmma_128x256x64_s4_ws_p",
                                              "wgmma_128x128x64_s6_ws_p",
                                              "mma_64x128x32_w2x2_s4",
                                              "mma_128x128x32_w2x4_s4",
                                              "mma_128x128x32_w2x4_s3",
                                              "mma_128x256x32_w2x4_s3",
                                              "mma_64x64x32_w2x2_s4",
                                              "mma_16x128x64_w1x4_s4",
                                              "tf32_128x128x16_w2x4_s4",
                                              "tf32_64x64x16_w2x2_s4",
                                              STREAM_TABLE};

enum { ARCH_SM80, ARCH_SM86, ARCH_SM90 };
static const gpu_arch_table arch_tables[] = {
    [ARCH_SM80] = {"sm_80", sm80_gemm, (int)(sizeof sm80_gemm / sizeof sm80_gemm[0])},
    [ARCH_SM86] = {"sm_86/sm_89", sm86_gemm, (int)(sizeof sm86_gemm / sizeof sm86_gemm[0])},
    [ARCH_SM90] = {"sm_90", sm90_gemm_table,
                   (int)(sizeof sm90_gemm_table / sizeof sm90_gemm_table[0])},
};

static int arch_of(int major, int minor) {
  if (major >= 9)
    return ARCH_SM90;
  if (major == 8 && minor == 0)
    return ARCH_SM80;
  return ARCH_SM86;
}

const char *cuda_arch_name(int major, int minor) {
  return arch_tables[arch_of(major, minor)].name;
}

/* ------------------------------------------------------------------------ */
/* When the wgmma + TMA GEMM runs                                            */
/* ------------------------------------------------------------------------ */

/* The TMA-fed kernels need compute capability 9.0 exactly (sm_90a code),
 * the driver's tensor-map encoder, 16-bit data or f32 as tf32, and K > 0;
 * grouped GEMM, operands TMA can address. A plain GEMM's operands that TMA
 * cannot address (rows that do not start on 16 bytes: 1793 bf16 columns)
 * or, for tf32, that are not K-major are packed first (ops_sm90.c). */
static bool wgmma_runs(const gpu_device *device, const gpu_gemm_config *config,
                       const gpu_gemm_shape *s) {
  (void)config;
  if (!(s->dtype == TSR_DTYPE_F16 || s->dtype == TSR_DTYPE_BF16 ||
        (s->dtype == TSR_DTYPE_F32 && s->compute == TSR_COMPUTE_TF32)))
    return false;
  if (device->props->arch_major != 9 || device->props->arch_minor != 0 ||
      !cuda_plugin_of(device->plugin)->api.cuTensorMapEncodeTiled || s->k < 1)
    return false;
  cuda_tma_operand a, b;
  if (s->grouped)
    return s->dtype != TSR_DTYPE_F32 && cuda_tma_operand_of(&s->groups->a, 0, 1, -1, &a) &&
           cuda_tma_operand_of(&s->groups->b, 2, 1, 0, &b);
  return s->dtype != TSR_DTYPE_F32 || s->compute == TSR_COMPUTE_TF32;
}

const gpu_vendor cuda_vendor = {
    .external_kind = TSR_EXTERNAL_CUDA_DEVICE_POINTER,
    .external_what = "CUDA device pointers",
    .external_stream_kind = TSR_EXTERNAL_CUDA_STREAM,
    .external_stream_what = "CUDA streams",
    .image = tsr_cuda_fatbin,
    .image_targets = tsr_cuda_fatbin_archs,
    .kernels = sm90_kernels,
    .kernel_count = (int)(sizeof sm90_kernels / sizeof sm90_kernels[0]),
    .gemm = sm90_gemm,
    .gemm_count = (int)(sizeof sm90_gemm / sizeof sm90_gemm[0]),
    .attention = sm90_attention,
    .attention_count = (int)(sizeof sm90_attention / sizeof sm90_attention[0]),
    .arch_tables = arch_tables,
    .arch_count = (int)(sizeof arch_tables / sizeof arch_tables[0]),
    .arch_of = arch_of,
    .gemm_runs = wgmma_runs,
    .gemm_run = cuda_gemm_sm90_run,
    .grouped_run = cuda_grouped_gemm_sm90_run,
};
