/* SPDX-License-Identifier: Apache-2.0 */
/* The portable kernels and variant rows (from kernels/kernel_list.h, the
 * list the device code is built from), and the catalogue that joins them
 * with a vendor's rows once per plugin: kernel indices by name, each GEMM
 * config's place in each architecture table. Nothing here runs per op. */
#include "configs.h"

#include <stdio.h>
#include <string.h>

#include "kernels/kernel_list.h"
#include "kernels/kernel_params.h"

/* ------------------------------------------------------------------------ */
/* Portable kernels                                                          */
/* ------------------------------------------------------------------------ */

#define MMA_SMEM(BM, BN, BK, S) TSR_GPU_GEMM_SMEM(BM, BN, BK, S, 2, 8, 8)
#define TF32_SMEM(BM, BN, BK, S) TSR_GPU_GEMM_SMEM(BM, BN, BK, S, 4, 4, 8)

#define KERNEL_MMA_DT(dt, BM, BN, BK, WM, WN, S)                                                   \
  {TSR_GEMM_MMA_NAME(dt, BM, BN, BK, WM, WN, S), MMA_SMEM(BM, BN, BK, S), (WM) * (WN)*32},
#define KERNEL_MMA(BM, BN, BK, WM, WN, S)                                                          \
  KERNEL_MMA_DT(bf16, BM, BN, BK, WM, WN, S) KERNEL_MMA_DT(f16, BM, BN, BK, WM, WN, S)
#define KERNEL_TF32(BM, BN, BK, WM, WN, S)                                                         \
  {TSR_GEMM_TF32_NAME(BM, BN, BK, WM, WN, S), TF32_SMEM(BM, BN, BK, S), (WM) * (WN)*32},
#define KERNEL_STREAM(W, U)                                                                        \
  {TSR_GEMM_STREAM_NAME(bf16, W, U), 0, (W)*32}, {TSR_GEMM_STREAM_NAME(f16, W, U), 0, (W)*32},
#define KERNEL_GEMV_K_DT(dt, R) {TSR_GEMV_K_NAME(dt, R), 0, 256},
#define KERNEL_GEMV_N_DT(dt, R) {TSR_GEMV_N_NAME(dt, R), 0, 128},
#define KERNEL_GEMV_K_F32(R) KERNEL_GEMV_K_DT(f32, R)
#define KERNEL_GEMV_K_BF16(R) KERNEL_GEMV_K_DT(bf16, R)
#define KERNEL_GEMV_K_F16(R) KERNEL_GEMV_K_DT(f16, R)
#define KERNEL_GEMV_N_F32(R) KERNEL_GEMV_N_DT(f32, R)
#define KERNEL_GEMV_N_BF16(R) KERNEL_GEMV_N_DT(bf16, R)
#define KERNEL_GEMV_N_F16(R) KERNEL_GEMV_N_DT(f16, R)
#define KERNEL_FLASH(DP, BQ, BKV, W, S, Q)                                                         \
  {TSR_FLASH_NAME(bf16, DP, BQ, BKV, W), TSR_GPU_FLASH_SMEM(DP, BQ, BKV, S), (W)*32},              \
      {TSR_FLASH_NAME(f16, DP, BQ, BKV, W), TSR_GPU_FLASH_SMEM(DP, BQ, BKV, S), (W)*32},
#define KERNEL_FLASH_SERVING(DP, BQ, BKV, W, S, Q)                                                 \
  {TSR_FLASH_SERVING_NAME(bf16, DP, BQ, BKV, W), TSR_GPU_FLASH_SMEM(DP, BQ, BKV, S), (W)*32},      \
      {TSR_FLASH_SERVING_NAME(f16, DP, BQ, BKV, W), TSR_GPU_FLASH_SMEM(DP, BQ, BKV, S), (W)*32},   \
      {TSR_FLASH_VARLEN_NAME(bf16, DP, BQ, BKV, W), TSR_GPU_FLASH_SMEM(DP, BQ, BKV, S), (W)*32},   \
      {TSR_FLASH_VARLEN_NAME(f16, DP, BQ, BKV, W), TSR_GPU_FLASH_SMEM(DP, BQ, BKV, S), (W)*32},
#define KERNEL_PER_DTYPE(dt, T)                                                                    \
  {TSR_ATTN_GENERIC_NAME(dt), -1, 0}, {TSR_ROWS_NAME(rmsnorm, dt), -1, 0},                         \
      {TSR_ROWS_NAME(layernorm, dt), -1, 0}, {TSR_ROWS_NAME(softmax, dt), -1, 0},                  \
      {TSR_ROWS_NAME(cross_entropy, dt), 0, 0}, {TSR_ROWS_NAME(cross_entropy, dt) "_b4", 0, 0},    \
      {TSR_ELEMENTWISE_NAME(swiglu, dt), 0, 0}, {TSR_ELEMENTWISE_NAME(gelu, dt), 0, 0},            \
      {TSR_ELEMENTWISE_NAME(rope, dt), 0, 0},

#define KERNEL_DECODE_DT(dt, DP, RT) {TSR_DECODE_NAME(dt, DP, RT), 0, TSR_GPU_DECODE_THREADS},
#define KERNEL_DECODE(DP, RT)                                                                      \
  KERNEL_DECODE_DT(f32, DP, RT) KERNEL_DECODE_DT(bf16, DP, RT) KERNEL_DECODE_DT(f16, DP, RT)
#define KERNEL_DECODE_COMBINE(dt, T) {TSR_DECODE_COMBINE_NAME(dt), 0, 0},
#define KERNEL_DECODE_MMA(DP, BKV, W, S)                                                           \
  {TSR_DECODE_MMA_NAME(bf16, DP, BKV, S), TSR_GPU_DECODE_MMA_SMEM(DP, BKV, S), (W)*32},            \
      {TSR_DECODE_MMA_NAME(f16, DP, BKV, S), TSR_GPU_DECODE_MMA_SMEM(DP, BKV, S), (W)*32},

static const gpu_kernel_info portable_kernels[] = {
    TSR_GEMM_MMA_CONFIGS(KERNEL_MMA)
        TSR_GEMM_TF32_CONFIGS(KERNEL_TF32){TSR_GEMM_SIMT16_NAME, 0, 256},
    {TSR_GEMM_SIMT16_B2_NAME, 0, 256},
    TSR_GEMM_STREAM_CONFIGS(KERNEL_STREAM) TSR_GEMV_K_ROWS(KERNEL_GEMV_K_F32)
        TSR_GEMV_K_ROWS(KERNEL_GEMV_K_BF16) TSR_GEMV_K_ROWS(KERNEL_GEMV_K_F16)
            TSR_GEMV_N_ROWS(KERNEL_GEMV_N_F32) TSR_GEMV_N_ROWS(KERNEL_GEMV_N_BF16)
                TSR_GEMV_N_ROWS(KERNEL_GEMV_N_F16){TSR_GEMM_SPLITK_NAME, 0, 256},
    {TSR_GEMM_PACK_NAME(16), 0, 256},
    {TSR_GEMM_PACK_NAME(32), 0, 256},
    TSR_FLASH_CONFIGS(KERNEL_FLASH) TSR_FLASH_SERVING_CONFIGS(KERNEL_FLASH_SERVING)
        TSR_DTYPES_ALL(KERNEL_PER_DTYPE) TSR_DECODE_CONFIGS(KERNEL_DECODE)
            TSR_DTYPES_ALL(KERNEL_DECODE_COMBINE)
                TSR_DECODE_MMA_CONFIGS(KERNEL_DECODE_MMA){TSR_KV_APPEND_NAME(16), 0, 0},
    {TSR_KV_APPEND_NAME(32), 0, 0}};
enum { PORTABLE_KERNELS = sizeof portable_kernels / sizeof portable_kernels[0] };

/* ------------------------------------------------------------------------ */
/* Portable variant rows                                                     */
/* ------------------------------------------------------------------------ */

/* A GEMM row: name, kind, tile (BM x BN x BK), warps (WM x WN), stages,
 * dynamic shared memory, kernels per dtype slot (f32, f16, bf16). */
#define GEMM_ROW(NAME, KIND, BM, BN, BK, WM, WN, S, SMEM, F32, F16, BF16)                          \
  {.name = NAME,                                                                                   \
   .kind = KIND,                                                                                   \
   .bm = BM,                                                                                       \
   .bn = BN,                                                                                       \
   .bk = BK,                                                                                       \
   .warps_m = WM,                                                                                  \
   .warps_n = WN,                                                                                  \
   .stages = S,                                                                                    \
   .smem = SMEM,                                                                                   \
   .kernels = {F32, F16, BF16}},
#define GEMM_MMA(BM, BN, BK, WM, WN, S)                                                            \
  GEMM_ROW("mma_" #BM "x" #BN "x" #BK "_w" #WM "x" #WN "_s" #S, GPU_GEMM_MMA, BM, BN, BK, WM, WN,  \
           S, MMA_SMEM(BM, BN, BK, S), NULL, TSR_GEMM_MMA_NAME(f16, BM, BN, BK, WM, WN, S),        \
           TSR_GEMM_MMA_NAME(bf16, BM, BN, BK, WM, WN, S))
#define GEMM_TF32(BM, BN, BK, WM, WN, S)                                                           \
  GEMM_ROW("tf32_" #BM "x" #BN "x" #BK "_w" #WM "x" #WN "_s" #S, GPU_GEMM_TF32, BM, BN, BK, WM,    \
           WN, S, TF32_SMEM(BM, BN, BK, S), TSR_GEMM_TF32_NAME(BM, BN, BK, WM, WN, S), NULL, NULL)
/* Decode GEMM: a 16 x 32 tile per block of W warps, U chunks in flight. */
#define GEMM_STREAM(W, U)                                                                          \
  GEMM_ROW("stream_16x32_w" #W "_u" #U, GPU_GEMM_STREAM, 16, 32, 32, 1, W, U, 0, NULL,             \
           TSR_GEMM_STREAM_NAME(f16, W, U), TSR_GEMM_STREAM_NAME(bf16, W, U))

/* After a vendor's own rows, in this order (the variant lists' order). */
static const gpu_gemm_config portable_gemm[] = {
    TSR_GEMM_MMA_CONFIGS(GEMM_MMA) TSR_GEMM_TF32_CONFIGS(GEMM_TF32)
        GEMM_ROW("simt_128x128x16", GPU_GEMM_SIMT, 128, 128, 16, 4, 4, 2, 0, TSR_GEMM_SIMT16_NAME,
                 NULL, NULL) GEMM_ROW("simt_128x128x16_b2", GPU_GEMM_SIMT, 128, 128, 16, 4, 4, 2, 0,
                                      TSR_GEMM_SIMT16_B2_NAME, NULL, NULL)
            GEMM_ROW("gemv_splitk", GPU_GEMM_GEMV, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL)
                TSR_GEMM_STREAM_CONFIGS(GEMM_STREAM)};
enum { PORTABLE_GEMM = sizeof portable_gemm / sizeof portable_gemm[0] };

#define FLASH(DP, BQ, BKV, W, S, Q)                                                                \
  {.name = "flash_mma_d" #DP "_" #BQ "x" #BKV "_w" #W,                                             \
   .kind = GPU_ATTENTION_FLASH,                                                                    \
   .head_dim_max = DP,                                                                             \
   .block_kv = BKV,                                                                                \
   .kv_stages = S,                                                                                 \
   .smem = TSR_GPU_FLASH_SMEM(DP, BQ, BKV, S),                                                     \
   .kernels = {NULL, TSR_FLASH_NAME(f16, DP, BQ, BKV, W), TSR_FLASH_NAME(bf16, DP, BQ, BKV, W)},   \
   .block_q = BQ,                                                                                  \
   .warps = W,                                                                                     \
   .engine = "mma.sync"},
/* The heuristic takes the first config of the smallest head-dim class that
 * holds the head dim: per class the mma.sync kernels in their measured order
 * on sm_90, then a vendor's (CUDA: the sm_90a wgmma ones, slower so far:
 * docs/PERFORMANCE.md), which tune can still pick; the generic kernel last. */
/* The serving forms of some of them: serving problems only (the dense
 * rows decline those), same tiles. FORM serving (1: packed / paged /
 * softcap) or varlen (2: neither paged nor capped); the varlen rows come
 * first so that packed / per-sequence-length problems without a block
 * table or softcap take them. */
#define FLASH_FORM(FORM, SERVING, DP, BQ, BKV, W, S)                                               \
  {.name = "flash_mma_" #FORM "_d" #DP "_" #BQ "x" #BKV "_w" #W,                                   \
   .kind = GPU_ATTENTION_FLASH,                                                                    \
   .head_dim_max = DP,                                                                             \
   .block_kv = BKV,                                                                                \
   .kv_stages = S,                                                                                 \
   .smem = TSR_GPU_FLASH_SMEM(DP, BQ, BKV, S),                                                     \
   .kernels = {NULL, TSR_FLASH_FORM_NAME(FORM, f16, DP, BQ, BKV, W),                               \
               TSR_FLASH_FORM_NAME(FORM, bf16, DP, BQ, BKV, W)},                                   \
   .block_q = BQ,                                                                                  \
   .warps = W,                                                                                     \
   .engine = "mma.sync",                                                                           \
   .serving = SERVING},
#define FLASH_SERVING(DP, BQ, BKV, W, S, Q) FLASH_FORM(serving, 1, DP, BQ, BKV, W, S)
#define FLASH_VARLEN(DP, BQ, BKV, W, S, Q) FLASH_FORM(varlen, 2, DP, BQ, BKV, W, S)
static const gpu_attention_config portable_flash[] = {TSR_FLASH_CONFIGS(
    FLASH) TSR_FLASH_SERVING_CONFIGS(FLASH_VARLEN) TSR_FLASH_SERVING_CONFIGS(FLASH_SERVING)};
static const gpu_attention_config attention_generic = {.name = "flash_generic",
                                                       .kind = GPU_ATTENTION_GENERIC,
                                                       .block_kv = 32,
                                                       .kv_stages = 1,
                                                       .smem = -1,
                                                       .kernels = {TSR_ATTN_GENERIC_NAME(f32),
                                                                   TSR_ATTN_GENERIC_NAME(f16),
                                                                   TSR_ATTN_GENERIC_NAME(bf16)},
                                                       .block_q = TSR_GPU_ATTN_ROWS,
                                                       .warps = TSR_GPU_ATTN_ROWS};
enum { PORTABLE_FLASH = sizeof portable_flash / sizeof portable_flash[0] };
/* Split-KV decode: the heuristic's split count, then forced ones (tune);
 * on tensor cores first (bf16 / f16 on GPUs with mma.sync), then on CUDA
 * cores (any dtype). The tensor-core rows without a tile run the head-dim
 * class's default kernel (TSR_DECODE_MMA_DEFAULTS); the tile variants
 * before them (TSR_DECODE_MMA_VARIANTS, heuristic split count) run their
 * own kernel and only head dims of their class (DP / 2 < D <= DP). */
#define DECODE_AUTO(NAME, MMA)                                                                     \
  {.name = NAME, .kind = GPU_ATTENTION_DECODE, .smem = 0, .splits = 0, .mma = MMA},
#define DECODE_ROW(N)                                                                              \
  {.name = "decode_split" #N, .kind = GPU_ATTENTION_DECODE, .smem = 0, .splits = N},
#define DECODE_MMA_ROW(N)                                                                          \
  {.name = "decode_mma_split" #N, .kind = GPU_ATTENTION_DECODE, .smem = 0, .splits = N, .mma = 1},
#define DECODE_MMA_TILE(DP, BKV, W, S)                                                             \
  {.name = "decode_mma_d" #DP "_k" #BKV "_s" #S,                                                   \
   .kind = GPU_ATTENTION_DECODE,                                                                   \
   .head_dim_max = DP,                                                                             \
   .block_kv = BKV,                                                                                \
   .kv_stages = S,                                                                                 \
   .smem = TSR_GPU_DECODE_MMA_SMEM(DP, BKV, S),                                                    \
   .kernels = {NULL, TSR_DECODE_MMA_NAME(f16, DP, BKV, S), TSR_DECODE_MMA_NAME(bf16, DP, BKV, S)}, \
   .warps = W,                                                                                     \
   .engine = "mma.sync",                                                                           \
   .splits = 0,                                                                                    \
   .mma = 1},
static const gpu_attention_config attention_decode[] = {
    TSR_DECODE_MMA_VARIANTS(DECODE_MMA_TILE) DECODE_AUTO("decode_mma_split_auto", 1)
        TSR_DECODE_SPLITS(DECODE_MMA_ROW) DECODE_AUTO("decode_split_auto", 0)
            TSR_DECODE_SPLITS(DECODE_ROW)};
enum { PORTABLE_DECODE = sizeof attention_decode / sizeof attention_decode[0] };

const gpu_threads_config gpu_rows_configs[3] = {
    {"rows_t128", 128}, {"rows_t256", 256}, {"rows_t512", 512}};
const gpu_threads_config gpu_elementwise_config = {"elementwise_t256", 256};
const gpu_threads_config gpu_kv_append_config = {"kv_append_t256", 256};

_Static_assert(TSR_GPU_FAULT_CE_TARGET == TSR_PLUGIN_FAULT_CE_TARGET &&
                   TSR_GPU_FAULT_CU_SEQLENS_Q == TSR_PLUGIN_FAULT_CU_SEQLENS_Q &&
                   TSR_GPU_FAULT_CU_SEQLENS_KV == TSR_PLUGIN_FAULT_CU_SEQLENS_KV &&
                   TSR_GPU_FAULT_SEQLENS_KV == TSR_PLUGIN_FAULT_SEQLENS_KV &&
                   TSR_GPU_FAULT_BLOCK_TABLE == TSR_PLUGIN_FAULT_BLOCK_TABLE &&
                   TSR_GPU_FAULT_MAX_SEQLEN_Q == TSR_PLUGIN_FAULT_MAX_SEQLEN_Q &&
                   TSR_GPU_FAULT_MAX_SEQLEN_KV == TSR_PLUGIN_FAULT_MAX_SEQLEN_KV &&
                   TSR_GPU_FAULT_KV_SLOT == TSR_PLUGIN_FAULT_KV_SLOT,
               "kernel fault kinds are plugin.h's");

/* ------------------------------------------------------------------------ */
/* Small lookups                                                             */
/* ------------------------------------------------------------------------ */

int gpu_dtype_slot(int32_t dtype) {
  return dtype == TSR_DTYPE_F32 ? 0 : dtype == TSR_DTYPE_F16 ? 1 : dtype == TSR_DTYPE_BF16 ? 2 : -1;
}

static const char *const dtype_tags[GPU_DTYPE_SLOTS] = {"f32", "f16", "bf16"};

const tsr_op gpu_row_ops[GPU_ROW_OPS] = {TSR_OP_RMSNORM, TSR_OP_LAYERNORM, TSR_OP_SOFTMAX,
                                         TSR_OP_CROSS_ENTROPY};
const tsr_op gpu_elementwise_ops[GPU_ELEMENTWISE_OPS] = {TSR_OP_SWIGLU, TSR_OP_GELU, TSR_OP_ROPE};

int gpu_rows_op_index(tsr_op op) {
  for (int i = 0; i < GPU_ROW_OPS; i++)
    if (gpu_row_ops[i] == op)
      return i;
  return -1;
}

int gpu_elementwise_op_index(tsr_op op) {
  for (int i = 0; i < GPU_ELEMENTWISE_OPS; i++)
    if (gpu_elementwise_ops[i] == op)
      return i;
  return -1;
}

int gpu_attention_generic_tile(int64_t head_dim, int limit) {
  for (int tile = 32; tile >= 1; tile /= 2)
    if ((int64_t)TSR_GPU_ATTN_GENERIC_SMEM(head_dim, (int64_t)tile) <= (int64_t)limit)
      return tile;
  return 0;
}

int gpu_decode_dim_class(int64_t head_dim) {
  return head_dim <= 64 ? 0 : head_dim <= 128 ? 1 : head_dim <= 256 ? 2 : -1;
}

/* The head-dim classes' default tensor-core decode kernels. */
#define DECODE_MMA_SMEM(DP, BKV, W, S) TSR_GPU_DECODE_MMA_SMEM(DP, BKV, S),
#define DECODE_MMA_KEYS(DP, BKV, W, S) BKV,
#define DECODE_MMA_STAGES(DP, BKV, W, S) S,
static const int decode_mma_smem[GPU_DECODE_DIMS] = {TSR_DECODE_MMA_DEFAULTS(DECODE_MMA_SMEM)};
static const int decode_mma_keys[GPU_DECODE_DIMS] = {TSR_DECODE_MMA_DEFAULTS(DECODE_MMA_KEYS)};
static const int decode_mma_stages[GPU_DECODE_DIMS] = {TSR_DECODE_MMA_DEFAULTS(DECODE_MMA_STAGES)};

int gpu_decode_mma_smem(int dim_class) {
  return decode_mma_smem[dim_class];
}

int gpu_decode_mma_keys(int dim_class) {
  return decode_mma_keys[dim_class];
}

int gpu_decode_tile_rows(int64_t rows_per_kv_head) {
  return rows_per_kv_head <= 4 ? 4 : 8;
}

/* ------------------------------------------------------------------------ */
/* The catalogue                                                             */
/* ------------------------------------------------------------------------ */

const gpu_kernel_info *gpu_catalog_kernel(const gpu_catalog *catalog, int index) {
  if (index < 0 || index >= catalog->kernel_count)
    return NULL;
  return index < catalog->portable_kernels ? &portable_kernels[index]
                                           : &catalog->vendor->kernels[index - PORTABLE_KERNELS];
}

static unsigned hash_name(const char *name) {
  unsigned h = 2166136261u; /* FNV-1a */
  for (; *name; name++)
    h = (h ^ (unsigned char)*name) * 16777619u;
  return h;
}

/* Index of a kernel by name; -1 when there is none (or no name). */
static int kernel_index(const gpu_catalog *catalog, const char *name) {
  if (!name)
    return -1;
  for (unsigned slot = hash_name(name) % GPU_KERNEL_HASH_SLOTS; catalog->kernel_hash[slot] >= 0;
       slot = (slot + 1) % GPU_KERNEL_HASH_SLOTS)
    if (strcmp(gpu_catalog_kernel(catalog, catalog->kernel_hash[slot])->name, name) == 0)
      return catalog->kernel_hash[slot];
  return -1;
}

/* The kernel `name` must exist: -1 for no name, false with `why` when the
 * module lacks it. */
static bool resolve(const gpu_catalog *catalog, const char *name, int *index, char *why,
                    size_t capacity) {
  *index = kernel_index(catalog, name);
  if (name && *index < 0) {
    snprintf(why, capacity, "no kernel named %s in this build", name);
    return false;
  }
  return true;
}

static bool build_kernels(gpu_catalog *c, const gpu_vendor *vendor, char *why, size_t capacity) {
  c->portable_kernels = PORTABLE_KERNELS;
  c->kernel_count = PORTABLE_KERNELS + vendor->kernel_count;
  if (c->kernel_count > GPU_KERNEL_HASH_SLOTS / 2) {
    snprintf(why, capacity, "%d kernels: more than this build's table holds", c->kernel_count);
    return false;
  }
  for (int i = 0; i < GPU_KERNEL_HASH_SLOTS; i++)
    c->kernel_hash[i] = -1;
  for (int k = 0; k < c->kernel_count; k++) {
    unsigned slot = hash_name(gpu_catalog_kernel(c, k)->name) % GPU_KERNEL_HASH_SLOTS;
    while (c->kernel_hash[slot] >= 0)
      slot = (slot + 1) % GPU_KERNEL_HASH_SLOTS;
    c->kernel_hash[slot] = (short)k;
  }
  return true;
}

static bool build_gemm(gpu_catalog *c, const gpu_vendor *vendor, char *why, size_t capacity) {
  c->gemm_count = 0;
  if (vendor->gemm_count + PORTABLE_GEMM > GPU_MAX_GEMM_CONFIGS) {
    snprintf(why, capacity, "%d GEMM configs: more than %d", vendor->gemm_count + PORTABLE_GEMM,
             GPU_MAX_GEMM_CONFIGS);
    return false;
  }
  for (int i = 0; i < vendor->gemm_count; i++)
    c->gemm[c->gemm_count++] = &vendor->gemm[i];
  for (int i = 0; i < PORTABLE_GEMM; i++)
    c->gemm[c->gemm_count++] = &portable_gemm[i];
  if (vendor->arch_count > GPU_MAX_ARCH_TABLES) {
    snprintf(why, capacity, "%d arch tables: more than %d", vendor->arch_count,
             GPU_MAX_ARCH_TABLES);
    return false;
  }
  for (int i = 0; i < c->gemm_count; i++)
    for (int slot = 0; slot < GPU_DTYPE_SLOTS; slot++)
      if (!resolve(c, c->gemm[i]->kernels[slot], &c->gemm_kernel[i][slot], why, capacity))
        return false;
  for (int a = 0; a < vendor->arch_count; a++) {
    const gpu_arch_table *table = &vendor->arch_tables[a];
    for (int i = 0; i < c->gemm_count; i++) {
      c->gemm_rank[a][i] = -1;
      for (int t = 0; t < table->gemm_count && c->gemm_rank[a][i] < 0; t++)
        if (strcmp(table->gemm[t], c->gemm[i]->name) == 0)
          c->gemm_rank[a][i] = t;
    }
  }
  return true;
}

static bool build_attention(gpu_catalog *c, const gpu_vendor *vendor, char *why, size_t capacity) {
  c->attention_count = 0;
  if (PORTABLE_FLASH + vendor->attention_count + PORTABLE_DECODE + 1 > GPU_MAX_ATTENTION_CONFIGS) {
    snprintf(why, capacity, "too many attention configs");
    return false;
  }
  for (int i = 0; i < PORTABLE_FLASH; i++)
    c->attention[c->attention_count++] = &portable_flash[i];
  for (int i = 0; i < vendor->attention_count; i++)
    c->attention[c->attention_count++] = &vendor->attention[i];
  for (int i = 0; i < PORTABLE_DECODE; i++)
    c->attention[c->attention_count++] = &attention_decode[i];
  c->attention[c->attention_count++] = &attention_generic;
  for (int i = 0; i < c->attention_count; i++)
    for (int slot = 0; slot < GPU_DTYPE_SLOTS; slot++)
      if (!resolve(c, c->attention[i]->kernels[slot], &c->attention_kernel[i][slot], why, capacity))
        return false;
  return true;
}

/* Kernels named by pattern: GEMV per B layout, dtype and rows a block keeps
 * (the TSR_GEMV_*_ROWS lists), the split-K reduction, the operand packers,
 * the row and elementwise ops per dtype. */
static bool build_named(gpu_catalog *c, char *why, size_t capacity) {
  static const int gemv_rows[2][3] = {{1, 4, 16}, {1, 4, 8}};
  static const char *const row_names[GPU_ROW_OPS] = {"rmsnorm", "layernorm", "softmax",
                                                     "cross_entropy"};
  static const char *const elementwise_names[GPU_ELEMENTWISE_OPS] = {"swiglu", "gelu", "rope"};
  char name[64];
  bool ok = true;
  for (int d = 0; d < GPU_DTYPE_SLOTS && ok; d++) {
    for (int layout = 0; layout < 2 && ok; layout++) {
      for (int r = 0; r < 3 && ok; r++) {
        snprintf(name, sizeof name, "tsr_gemv_%s_%s_r%d", layout ? "n" : "k", dtype_tags[d],
                 gemv_rows[layout][r]);
        ok = resolve(c, name, &c->gemv_kernel[layout][d][r], why, capacity);
      }
    }
    for (int op = 0; op < GPU_ROW_OPS && ok; op++) {
      snprintf(name, sizeof name, "tsr_%s_%s", row_names[op], dtype_tags[d]);
      ok = resolve(c, name, &c->rows_kernel[op][d][0], why, capacity);
      c->rows_kernel[op][d][1] = -1;
      if (ok && gpu_row_ops[op] == TSR_OP_CROSS_ENTROPY) {
        snprintf(name, sizeof name, "tsr_%s_%s_b4", row_names[op], dtype_tags[d]);
        ok = resolve(c, name, &c->rows_kernel[op][d][1], why, capacity);
      }
    }
    for (int op = 0; op < GPU_ELEMENTWISE_OPS && ok; op++) {
      snprintf(name, sizeof name, "tsr_%s_%s", elementwise_names[op], dtype_tags[d]);
      ok = resolve(c, name, &c->elementwise_kernel[op][d], why, capacity);
    }
  }
  static const int decode_dims[GPU_DECODE_DIMS] = {64, 128, 256};
  for (int d = 0; d < GPU_DTYPE_SLOTS && ok; d++) {
    for (int dim = 0; dim < GPU_DECODE_DIMS && ok; dim++)
      for (int t = 0; t < GPU_DECODE_TILES && ok; t++) {
        snprintf(name, sizeof name, "tsr_attention_decode_%s_d%d_r%d", dtype_tags[d],
                 decode_dims[dim], 4 << t);
        ok = resolve(c, name, &c->decode_kernel[d][dim][t], why, capacity);
      }
    snprintf(name, sizeof name, "tsr_attention_decode_combine_%s", dtype_tags[d]);
    ok = ok && resolve(c, name, &c->decode_combine_kernel[d], why, capacity);
    for (int dim = 0; dim < GPU_DECODE_DIMS && ok; dim++) {
      c->decode_mma_kernel[d][dim] = -1;
      if (d == 0)
        continue; /* 16-bit only */
      snprintf(name, sizeof name, "tsr_attention_decode_mma_%s_d%d_k%d_s%d", dtype_tags[d],
               decode_dims[dim], decode_mma_keys[dim], decode_mma_stages[dim]);
      ok = resolve(c, name, &c->decode_mma_kernel[d][dim], why, capacity);
    }
  }
  return ok && resolve(c, TSR_KV_APPEND_NAME(16), &c->kv_append_kernel[0], why, capacity) &&
         resolve(c, TSR_KV_APPEND_NAME(32), &c->kv_append_kernel[1], why, capacity) &&
         resolve(c, TSR_GEMM_SPLITK_NAME, &c->splitk_kernel, why, capacity) &&
         resolve(c, TSR_GEMM_PACK_NAME(16), &c->pack_kernel[0], why, capacity) &&
         resolve(c, TSR_GEMM_PACK_NAME(32), &c->pack_kernel[1], why, capacity);
}

bool gpu_catalog_build(gpu_catalog *catalog, const gpu_vendor *vendor, char *why, size_t capacity) {
  memset(catalog, 0, sizeof *catalog);
  catalog->vendor = vendor;
  return build_kernels(catalog, vendor, why, capacity) &&
         build_gemm(catalog, vendor, why, capacity) &&
         build_attention(catalog, vendor, why, capacity) && build_named(catalog, why, capacity);
}
