/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA plugin's kernel registry, variant tables per architecture, and
 * the heuristics that pick a variant per problem. The kernel instantiations
 * come from kernels/kernel_list.h, the list the device code is built from. */
#include "configs.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "kernels/kernel_list.h"
#include "kernels/kernel_params.h"

/* ------------------------------------------------------------------------ */
/* Kernel registry                                                           */
/* ------------------------------------------------------------------------ */

#define MMA_SMEM(BM, BN, BK, S) TSR_GPU_GEMM_SMEM(BM, BN, BK, S, 2, 8, 8)
#define TF32_SMEM(BM, BN, BK, S) TSR_GPU_GEMM_SMEM(BM, BN, BK, S, 4, 4, 8)

#define KERNEL_MMA_DT(dt, BM, BN, BK, WM, WN, S)                                                   \
  {TSR_GEMM_MMA_NAME(dt, BM, BN, BK, WM, WN, S), MMA_SMEM(BM, BN, BK, S), (WM) * (WN)*32},
#define KERNEL_MMA(BM, BN, BK, WM, WN, S)                                                          \
  KERNEL_MMA_DT(bf16, BM, BN, BK, WM, WN, S) KERNEL_MMA_DT(f16, BM, BN, BK, WM, WN, S)
#define KERNEL_WGMMA(BN, S)                                                                        \
  {TSR_GEMM_WGMMA_NAME(bf16, BN, S), TSR_GPU_WGMMA_SMEM(BN, S), 384},                              \
      {TSR_GEMM_WGMMA_NAME(f16, BN, S), TSR_GPU_WGMMA_SMEM(BN, S), 384},                           \
      {TSR_GEMM_WGMMA_TF32_NAME(BN, S), TSR_GPU_WGMMA_SMEM(BN, S), 384},
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
#define KERNEL_FLASH_WGMMA(DP, BQ, BKV, OV)                                                        \
  {TSR_FLASH_WGMMA_NAME(bf16, DP, BQ, BKV, OV), TSR_GPU_FLASH_WGMMA_SMEM(DP, BQ, BKV, OV),         \
   (BQ)*2},                                                                                        \
      {TSR_FLASH_WGMMA_NAME(f16, DP, BQ, BKV, OV), TSR_GPU_FLASH_WGMMA_SMEM(DP, BQ, BKV, OV),      \
       (BQ)*2},
#define KERNEL_PER_DTYPE(dt, T)                                                                    \
  {TSR_ATTN_GENERIC_NAME(dt), -1, 0}, {TSR_ROWS_NAME(rmsnorm, dt), -1, 0},                         \
      {TSR_ROWS_NAME(layernorm, dt), -1, 0}, {TSR_ROWS_NAME(softmax, dt), -1, 0},                  \
      {TSR_ROWS_NAME(cross_entropy, dt), 0, 0}, {TSR_ROWS_NAME(cross_entropy, dt) "_b4", 0, 0},    \
      {TSR_ELEMENTWISE_NAME(swiglu, dt), 0, 0}, {TSR_ELEMENTWISE_NAME(gelu, dt), 0, 0},            \
      {TSR_ELEMENTWISE_NAME(rope, dt), 0, 0},

static const cuda_kernel_info kernel_table[] = {
    TSR_GEMM_MMA_CONFIGS(KERNEL_MMA) TSR_GEMM_WGMMA_CONFIGS(KERNEL_WGMMA)
        TSR_GEMM_TF32_CONFIGS(KERNEL_TF32){TSR_GEMM_SIMT16_NAME, 0, 256},
    {TSR_GEMM_SIMT16_B2_NAME, 0, 256},
    TSR_GEMM_STREAM_CONFIGS(KERNEL_STREAM) TSR_GEMV_K_ROWS(KERNEL_GEMV_K_F32)
        TSR_GEMV_K_ROWS(KERNEL_GEMV_K_BF16) TSR_GEMV_K_ROWS(KERNEL_GEMV_K_F16)
            TSR_GEMV_N_ROWS(KERNEL_GEMV_N_F32) TSR_GEMV_N_ROWS(KERNEL_GEMV_N_BF16)
                TSR_GEMV_N_ROWS(KERNEL_GEMV_N_F16){TSR_GEMM_SPLITK_NAME, 0, 256},
    {TSR_GEMM_PACK_NAME(16), 0, 256},
    {TSR_GEMM_PACK_NAME(32), 0, 256},
    TSR_FLASH_CONFIGS(KERNEL_FLASH) TSR_FLASH_WGMMA_CONFIGS(KERNEL_FLASH_WGMMA)
        TSR_DTYPES_ALL(KERNEL_PER_DTYPE)};
enum { KERNEL_COUNT = sizeof kernel_table / sizeof kernel_table[0] };

/* Name -> index through an open-addressing table built once. */
enum { KERNEL_HASH_SLOTS = 512 };
static short kernel_hash[KERNEL_HASH_SLOTS];
static pthread_once_t kernel_hash_once = PTHREAD_ONCE_INIT;

static unsigned hash_name(const char *name) {
  unsigned h = 2166136261u; /* FNV-1a */
  for (; *name; name++)
    h = (h ^ (unsigned char)*name) * 16777619u;
  return h;
}

static void build_kernel_hash(void) {
  for (int i = 0; i < KERNEL_HASH_SLOTS; i++)
    kernel_hash[i] = -1;
  for (int k = 0; k < KERNEL_COUNT; k++) {
    unsigned slot = hash_name(kernel_table[k].name) % KERNEL_HASH_SLOTS;
    while (kernel_hash[slot] >= 0)
      slot = (slot + 1) % KERNEL_HASH_SLOTS;
    kernel_hash[slot] = (short)k;
  }
}

int cuda_kernel_count(void) {
  return KERNEL_COUNT;
}

const cuda_kernel_info *cuda_kernel_at(int index) {
  return index >= 0 && index < KERNEL_COUNT ? &kernel_table[index] : NULL;
}

int cuda_kernel_index(const char *name) {
  if (!name)
    return -1;
  pthread_once(&kernel_hash_once, build_kernel_hash);
  for (unsigned slot = hash_name(name) % KERNEL_HASH_SLOTS; kernel_hash[slot] >= 0;
       slot = (slot + 1) % KERNEL_HASH_SLOTS)
    if (strcmp(kernel_table[kernel_hash[slot]].name, name) == 0)
      return kernel_hash[slot];
  return -1;
}

/* ------------------------------------------------------------------------ */
/* Variant tables                                                            */
/* ------------------------------------------------------------------------ */

#define GEMM_MMA(BM, BN, BK, WM, WN, S)                                                            \
  {"mma_" #BM "x" #BN "x" #BK "_w" #WM "x" #WN "_s" #S,                                            \
   CUDA_GEMM_MMA,                                                                                  \
   BM,                                                                                             \
   BN,                                                                                             \
   BK,                                                                                             \
   WM,                                                                                             \
   WN,                                                                                             \
   S,                                                                                              \
   MMA_SMEM(BM, BN, BK, S),                                                                        \
   {NULL, TSR_GEMM_MMA_NAME(f16, BM, BN, BK, WM, WN, S),                                           \
    TSR_GEMM_MMA_NAME(bf16, BM, BN, BK, WM, WN, S)}},
/* wgmma: 3 warpgroups (a TMA producer, two consumers of 64 rows each). */
#define GEMM_WGMMA(BN, S)                                                                          \
  {"wgmma_128x" #BN "x64_s" #S "_ws_p",                                                            \
   CUDA_GEMM_WGMMA,                                                                                \
   128,                                                                                            \
   BN,                                                                                             \
   64,                                                                                             \
   3,                                                                                              \
   4,                                                                                              \
   S,                                                                                              \
   TSR_GPU_WGMMA_SMEM(BN, S),                                                                      \
   {TSR_GEMM_WGMMA_TF32_NAME(BN, S), TSR_GEMM_WGMMA_NAME(f16, BN, S),                              \
    TSR_GEMM_WGMMA_NAME(bf16, BN, S)}},
#define GEMM_TF32(BM, BN, BK, WM, WN, S)                                                           \
  {"tf32_" #BM "x" #BN "x" #BK "_w" #WM "x" #WN "_s" #S,                                           \
   CUDA_GEMM_TF32,                                                                                 \
   BM,                                                                                             \
   BN,                                                                                             \
   BK,                                                                                             \
   WM,                                                                                             \
   WN,                                                                                             \
   S,                                                                                              \
   TF32_SMEM(BM, BN, BK, S),                                                                       \
   {TSR_GEMM_TF32_NAME(BM, BN, BK, WM, WN, S), NULL, NULL}},

/* Decode GEMM: a 16 x 32 tile per block of W warps, U chunks in flight. */
#define GEMM_STREAM(W, U)                                                                          \
  {"stream_16x32_w" #W "_u" #U,                                                                    \
   CUDA_GEMM_STREAM,                                                                               \
   16,                                                                                             \
   32,                                                                                             \
   32,                                                                                             \
   1,                                                                                              \
   W,                                                                                              \
   U,                                                                                              \
   0,                                                                                              \
   {NULL, TSR_GEMM_STREAM_NAME(f16, W, U), TSR_GEMM_STREAM_NAME(bf16, W, U)}},

static const cuda_gemm_config gemm_configs[] = {
    TSR_GEMM_WGMMA_CONFIGS(GEMM_WGMMA) TSR_GEMM_MMA_CONFIGS(GEMM_MMA)
        TSR_GEMM_TF32_CONFIGS(GEMM_TF32){"simt_128x128x16",
                                         CUDA_GEMM_SIMT,
                                         128,
                                         128,
                                         16,
                                         4,
                                         4,
                                         2,
                                         0,
                                         {TSR_GEMM_SIMT16_NAME, NULL, NULL}},
    {"simt_128x128x16_b2",
     CUDA_GEMM_SIMT,
     128,
     128,
     16,
     4,
     4,
     2,
     0,
     {TSR_GEMM_SIMT16_B2_NAME, NULL, NULL}},
    {"gemv_splitk", CUDA_GEMM_GEMV, 0, 0, 0, 0, 0, 0, 0, {NULL, NULL, NULL}},
    TSR_GEMM_STREAM_CONFIGS(GEMM_STREAM)};
enum { GEMM_CONFIG_COUNT = sizeof gemm_configs / sizeof gemm_configs[0] };

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
static const char *const sm90_gemm[] = {"wgmma_128x256x64_s4_ws_p",
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

typedef struct arch_table {
  const char *name;
  const char *const *gemm;
  int gemm_count;
} arch_table;

static const arch_table arch_tables[] = {
    {"sm_80", sm80_gemm, (int)(sizeof sm80_gemm / sizeof sm80_gemm[0])},
    {"sm_86/sm_89", sm86_gemm, (int)(sizeof sm86_gemm / sizeof sm86_gemm[0])},
    {"sm_90", sm90_gemm, (int)(sizeof sm90_gemm / sizeof sm90_gemm[0])},
};

#define FLASH(DP, BQ, BKV, W, S, Q)                                                                \
  {"flash_mma_d" #DP "_" #BQ "x" #BKV "_w" #W,                                                     \
   CUDA_ATTENTION_FLASH,                                                                           \
   DP,                                                                                             \
   BKV,                                                                                            \
   S,                                                                                              \
   TSR_GPU_FLASH_SMEM(DP, BQ, BKV, S),                                                             \
   {NULL, TSR_FLASH_NAME(f16, DP, BQ, BKV, W), TSR_FLASH_NAME(bf16, DP, BQ, BKV, W)},              \
   BQ,                                                                                             \
   W,                                                                                              \
   0},
#define FLASH_WGMMA(DP, BQ, BKV, OV)                                                               \
  {"flash_wgmma_d" #DP "_" #BQ "x" #BKV "_o" #OV,                                                  \
   CUDA_ATTENTION_FLASH,                                                                           \
   DP,                                                                                             \
   BKV,                                                                                            \
   2 + (OV),                                                                                       \
   TSR_GPU_FLASH_WGMMA_SMEM(DP, BQ, BKV, OV),                                                      \
   {NULL, TSR_FLASH_WGMMA_NAME(f16, DP, BQ, BKV, OV),                                              \
    TSR_FLASH_WGMMA_NAME(bf16, DP, BQ, BKV, OV)},                                                  \
   BQ,                                                                                             \
   (BQ) / 16,                                                                                      \
   1},
/* The heuristic takes the first config of the smallest head-dim class that
 * holds the head dim: per class the mma.sync kernels in their measured order
 * on sm_90, then the sm_90a wgmma ones (slower so far: docs/PERFORMANCE.md),
 * which tune can still pick. */
static const cuda_attention_config attention_configs[] = {
    TSR_FLASH_CONFIGS(FLASH) TSR_FLASH_WGMMA_CONFIGS(FLASH_WGMMA){
        "flash_generic",
        CUDA_ATTENTION_GENERIC,
        0,
        32,
        1,
        -1,
        {TSR_ATTN_GENERIC_NAME(f32), TSR_ATTN_GENERIC_NAME(f16), TSR_ATTN_GENERIC_NAME(bf16)},
        TSR_GPU_ATTN_ROWS,
        TSR_GPU_ATTN_ROWS,
        0},
};
enum { ATTENTION_CONFIG_COUNT = sizeof attention_configs / sizeof attention_configs[0] };

static const cuda_rows_config rows_configs[] = {
    {"rows_t128", 128}, {"rows_t256", 256}, {"rows_t512", 512}};
enum { ROWS_CONFIG_COUNT = 3 };
static const cuda_elementwise_config elementwise_config = {"elementwise_t256", 256};

cuda_arch_class cuda_arch_of(const cuda_device_props *props) {
  if (props->cc_major >= 9)
    return CUDA_ARCH_SM90;
  if (props->cc_major == 8 && props->cc_minor == 0)
    return CUDA_ARCH_SM80;
  return CUDA_ARCH_SM86;
}

const char *cuda_arch_class_name(cuda_arch_class arch) {
  return arch_tables[arch].name;
}

static int dtype_slot(int32_t dtype) {
  return dtype == TSR_DTYPE_F32 ? 0 : dtype == TSR_DTYPE_F16 ? 1 : dtype == TSR_DTYPE_BF16 ? 2 : -1;
}

/* What the GEMM choice needs of each config that does not depend on the
 * problem, resolved once (by name) rather than in every call: its kernel per
 * dtype, and its place in each architecture's table (-1: not listed). */
enum { ARCH_CLASS_COUNT = sizeof arch_tables / sizeof arch_tables[0] };
static int gemm_kernel_of[GEMM_CONFIG_COUNT][3];
static int gemm_arch_rank[ARCH_CLASS_COUNT][GEMM_CONFIG_COUNT];
static pthread_once_t gemm_tables_once = PTHREAD_ONCE_INIT;

static void build_gemm_tables(void) {
  for (int i = 0; i < GEMM_CONFIG_COUNT; i++)
    for (int slot = 0; slot < 3; slot++)
      gemm_kernel_of[i][slot] = cuda_kernel_index(gemm_configs[i].kernels[slot]);
  for (int a = 0; a < ARCH_CLASS_COUNT; a++) {
    for (int i = 0; i < GEMM_CONFIG_COUNT; i++) {
      gemm_arch_rank[a][i] = -1;
      for (int t = 0; t < arch_tables[a].gemm_count && gemm_arch_rank[a][i] < 0; t++)
        if (strcmp(arch_tables[a].gemm[t], gemm_configs[i].variant) == 0)
          gemm_arch_rank[a][i] = t;
    }
  }
}

static int gemm_index(const cuda_gemm_config *config) {
  return (int)(config - gemm_configs);
}

int cuda_gemm_kernel(const cuda_gemm_config *config, int32_t dtype) {
  int slot = dtype_slot(dtype);
  if (slot < 0)
    return -1;
  pthread_once(&gemm_tables_once, build_gemm_tables);
  int i = gemm_index(config);
  return i >= 0 && i < GEMM_CONFIG_COUNT ? gemm_kernel_of[i][slot]
                                         : cuda_kernel_index(config->kernels[slot]);
}

int cuda_attention_kernel(const cuda_attention_config *config, int32_t dtype) {
  int slot = dtype_slot(dtype);
  return slot < 0 ? -1 : cuda_kernel_index(config->kernels[slot]);
}

int cuda_attention_generic_tile(int64_t head_dim, int limit) {
  for (int tile = 32; tile >= 1; tile /= 2)
    if ((int64_t)TSR_GPU_ATTN_GENERIC_SMEM(head_dim, (int64_t)tile) <= (int64_t)limit)
      return tile;
  return 0;
}

/* ------------------------------------------------------------------------ */
/* What can run a problem                                                    */
/* ------------------------------------------------------------------------ */

static bool in_arch_table(const cuda_device *device, const cuda_gemm_config *c) {
  pthread_once(&gemm_tables_once, build_gemm_tables);
  return gemm_arch_rank[cuda_arch_of(device->props)][gemm_index(c)] >= 0;
}

/* Blocks of a kernel resident per SM (0: it cannot run on this device). */
static int resident_blocks(const cuda_device *device, int kernel) {
  return kernel >= 0 ? device->blocks_per_sm[kernel] : 0;
}

typedef struct gemm_shape {
  bool grouped;
  int64_t m, n, k, batch; /* grouped: m is the mean rows per non-empty group */
  int32_t dtype, compute;
  const tsr_grouped_gemm_args *groups;
  const tsr_gemm_args *plain;
} gemm_shape;

static gemm_shape shape_of(tsr_op op, const void *args) {
  gemm_shape s;
  memset(&s, 0, sizeof s);
  if (op == TSR_OP_GEMM) {
    const tsr_gemm_args *g = args;
    s.plain = g;
    s.m = g->d.shape[1];
    s.n = g->d.shape[2];
    s.k = g->a.shape[2];
    s.batch = g->d.shape[0];
    s.dtype = g->a.dtype;
    s.compute = g->compute;
  } else {
    const tsr_grouped_gemm_args *g = args;
    s.grouped = true;
    s.groups = g;
    int64_t rows = 0, used = 0;
    for (int64_t i = 0; i < g->group_count; i++) {
      if (g->group_sizes[i] > 0) {
        rows += g->group_sizes[i];
        used++;
      }
    }
    s.m = used ? (rows + used - 1) / used : 0;
    s.n = g->d.shape[1];
    s.k = g->a.shape[1];
    s.batch = 1;
    s.dtype = g->a.dtype;
    s.compute = g->compute;
  }
  return s;
}

bool cuda_tma_operand_of(const tsr_plugin_tensor *t, int row_dim, int k_dim, int batch_dim,
                         cuda_tma_operand *out) {
  const int64_t esize = t->dtype == TSR_DTYPE_F32 ? 4 : 2;
  memset(out, 0, sizeof *out);
  int64_t rows = t->shape[row_dim], depth = t->shape[k_dim];
  int64_t row_stride = t->strides[row_dim], k_stride = t->strides[k_dim];
  if (rows < 1 || depth < 1 || cuda_tensor_address(t) % 16 != 0)
    return false;
  /* A dim of extent 1 may carry any stride: it is never stepped along. */
  if (depth == 1)
    k_stride = 1;
  if (rows == 1)
    row_stride = k_stride == 1 ? depth : 1;
  out->k_major = k_stride == 1;
  if (!out->k_major && row_stride != 1)
    return false;
  int64_t inner = out->k_major ? depth : rows, outer = out->k_major ? rows : depth;
  int64_t outer_stride = out->k_major ? row_stride : k_stride;
  if (outer == 1)
    outer_stride = (inner * esize + 15) / 16 * 16 / esize;
  if (outer_stride < inner || (outer_stride * esize) % 16 != 0)
    return false;
  out->dims[0] = (uint64_t)inner;
  out->dims[1] = (uint64_t)outer;
  out->strides[0] = (uint64_t)(outer_stride * esize);
  int64_t batch = batch_dim >= 0 ? t->shape[batch_dim] : 1;
  int64_t batch_stride = batch_dim >= 0 ? t->strides[batch_dim] : 0;
  out->batched = batch > 1 && batch_stride != 0;
  if (out->batched) {
    if (batch_stride < outer_stride * outer || (batch_stride * esize) % 16 != 0)
      return false;
    out->dims[2] = (uint64_t)batch;
    out->strides[1] = (uint64_t)(batch_stride * esize);
  } else {
    out->dims[2] = 1;
    out->strides[1] = out->strides[0] * (uint64_t)outer;
  }
  return (out->strides[1] >> 40) == 0;
}

/* The TMA-fed kernels need compute capability 9.0 exactly (sm_90a code),
 * the driver's tensor-map encoder and K > 0; grouped GEMM, operands TMA can
 * address. A plain GEMM's operands that TMA cannot address (rows that do not
 * start on 16 bytes: 1793 bf16 columns) or, for tf32, that are not K-major
 * are packed first (ops.c, cuda_wgmma_packs). */
static bool wgmma_runs_problem(const cuda_device *device, const gemm_shape *s) {
  if (device->props->cc_major != 9 || device->props->cc_minor != 0 ||
      !device->plugin->driver.cuTensorMapEncodeTiled || s->k < 1)
    return false;
  cuda_tma_operand a, b;
  if (s->grouped)
    return s->dtype != TSR_DTYPE_F32 && cuda_tma_operand_of(&s->groups->a, 0, 1, -1, &a) &&
           cuda_tma_operand_of(&s->groups->b, 2, 1, 0, &b);
  return s->dtype != TSR_DTYPE_F32 || s->compute == TSR_COMPUTE_TF32;
}

void cuda_wgmma_packs(const tsr_gemm_args *g, bool *pack_a, bool *pack_b) {
  cuda_tma_operand a, b;
  bool tf32 = g->a.dtype == TSR_DTYPE_F32;
  *pack_a = !cuda_tma_operand_of(&g->a, 1, 2, 0, &a) || (tf32 && !a.k_major);
  *pack_b = !cuda_tma_operand_of(&g->b, 2, 1, 0, &b) || (tf32 && !b.k_major);
}

/* A tensor's dims other than `unit` (the unit-stride one) step in whole
 * 16-byte units, and it starts on 16 bytes: 16-byte loads reach every row. */
static bool rows_of_16_bytes(const tsr_plugin_tensor *t, int unit) {
  if (t->strides[unit] != 1 || cuda_tensor_address(t) % 16 != 0)
    return false;
  for (int d = 0; d < 3; d++)
    if (d != unit && t->shape[d] > 1 && (t->strides[d] * 2) % 16 != 0)
      return false;
  return true;
}

/* The decode kernels load 16 bytes (8 elements) at a time: A along K, B
 * along K or along N, with K (and, for N-contiguous B, N) a multiple of 8. */
static bool stream_layout_ok(const tsr_gemm_args *g) {
  int64_t k = g->a.shape[2], n = g->b.shape[2];
  if (k < 1 || k % 8 != 0 || !rows_of_16_bytes(&g->a, 2))
    return false;
  return rows_of_16_bytes(&g->b, 1) || (n % 8 == 0 && rows_of_16_bytes(&g->b, 2));
}

static bool gemm_config_runs(const cuda_device *device, const cuda_gemm_config *c,
                             const gemm_shape *s) {
  switch (c->kind) {
  case CUDA_GEMM_WGMMA:
    return (s->dtype == TSR_DTYPE_F16 || s->dtype == TSR_DTYPE_BF16 ||
            (s->dtype == TSR_DTYPE_F32 && s->compute == TSR_COMPUTE_TF32)) &&
           in_arch_table(device, c) && resident_blocks(device, cuda_gemm_kernel(c, s->dtype)) > 0 &&
           wgmma_runs_problem(device, s);
  case CUDA_GEMM_MMA:
    return (s->dtype == TSR_DTYPE_F16 || s->dtype == TSR_DTYPE_BF16) && in_arch_table(device, c) &&
           resident_blocks(device, cuda_gemm_kernel(c, s->dtype)) > 0;
  case CUDA_GEMM_TF32:
    return s->dtype == TSR_DTYPE_F32 && s->compute == TSR_COMPUTE_TF32 &&
           in_arch_table(device, c) && resident_blocks(device, cuda_gemm_kernel(c, s->dtype)) > 0;
  case CUDA_GEMM_SIMT:
    return s->dtype == TSR_DTYPE_F32;
  case CUDA_GEMM_STREAM:
    return (s->dtype == TSR_DTYPE_F16 || s->dtype == TSR_DTYPE_BF16) && !s->grouped && s->m <= 16 &&
           in_arch_table(device, c) && resident_blocks(device, cuda_gemm_kernel(c, s->dtype)) > 0 &&
           stream_layout_ok(s->plain);
  case CUDA_GEMM_GEMV:
    return !s->grouped && s->m <= 16 &&
           (s->plain->b.strides[1] == 1 || s->plain->b.strides[2] == 1);
  }
  return false;
}

/* Tiles a config makes of the problem. */
static int64_t gemm_tiles(const cuda_gemm_config *c, const gemm_shape *s) {
  int64_t tiles_n = (s->n + c->bn - 1) / c->bn;
  if (!s->grouped)
    return (s->m + c->bm - 1) / c->bm * tiles_n * s->batch;
  int64_t tiles = 0;
  for (int64_t i = 0; i < s->groups->group_count; i++)
    tiles += (s->groups->group_sizes[i] + c->bm - 1) / c->bm * tiles_n;
  return tiles;
}

/* Wave quantisation: the share of the device's block slots a config's tiles
 * keep busy in their last wave (with fewer tiles than SMs: the share of SMs
 * busy). */
static double gemm_utilisation(const cuda_device *device, const cuda_gemm_config *c,
                               const gemm_shape *s, int64_t *tiles_out, int *per_sm_out) {
  const int sms = device->props->multiprocessors;
  int per_sm =
      c->kind == CUDA_GEMM_SIMT ? 1 : resident_blocks(device, cuda_gemm_kernel(c, s->dtype));
  if (per_sm < 1)
    per_sm = 1;
  int64_t tiles = gemm_tiles(c, s);
  int64_t slots = (int64_t)sms * per_sm;
  *tiles_out = tiles;
  *per_sm_out = per_sm;
  if (tiles <= 0)
    return 1.0;
  if (tiles <= slots)
    return (double)(tiles < sms ? tiles : sms) / sms;
  return (double)tiles / (double)(((tiles + slots - 1) / slots) * slots);
}

/* GEMV for M up to this; above it the tensor-core tiles won on an H200
 * (16x4096x4096: 64x64 tiles 0.067 ms, GEMV 0.125 ms; 1x8192x8192: GEMV
 * 0.084 ms, 64x64 tiles 0.122 ms). */
enum { GEMV_MAX_ROWS = 4 };
/* 16-bit GEMMs with at most this many rows take the 16-row mma tiles split
 * over K (docs/PERFORMANCE.md). */
enum { SKINNY_MAX_ROWS = 16 };
/* Strict f32: tiles per SM from which the two-blocks-an-SM SIMT kernel leads. */
enum { SIMT_MANY_WAVES = 6 };
/* A config whose last wave keeps this share of the block slots busy counts
 * as filling the GPU. */
#define GEMM_GOOD_UTILISATION 0.8
/* How much more a wgmma block does per SM than the mma.sync tiles, rounded
 * down: on an H100 at 4096^3 bf16, 615-640 against 175-180 TFLOP/s
 * (docs/PERFORMANCE.md).
 * Utilisation is weighed by it, so that a wgmma config whose tiles keep a
 * third of the SMs busy still beats mma.sync tiles that fill them all. */
#define GEMM_WGMMA_SPEEDUP 3.0

/* The arch table lists tile configs fastest first (measured on an H200 for
 * sm_90: 64x128 beat 128x128 and 128x256 at 4096^3..8192^3, since these
 * mma.sync kernels gain more from resident warps than from tile size; the
 * wgmma configs, measured on an H100, come before them all). The
 * pick is the first config whose tiles fill the GPU; when none does (small
 * problems), the one that keeps the most SMs busy. */
static int gemm_heuristic(const cuda_device *device, const gemm_shape *s, const int *candidates,
                          int count, char *reason, size_t capacity) {
  const int sms = device->props->multiprocessors;
  /* Decode shapes whose rows 16-byte loads reach: the stream configs. Up to
   * 64 MiB of weights two chunks a batch (more bytes in flight per warp
   * early on), beyond that one (more resident warps): H100, queued,
   * 16x4096x4096 17.1 against 18.7 us, 1x8192x8192 51.2 against 54.1,
   * 16x8192x28672 173-175 against 178-182 (docs/PERFORMANCE.md). */
  const cuda_arch_class arch = cuda_arch_of(device->props);
  pthread_once(&gemm_tables_once, build_gemm_tables);
  const bool many_weights = (double)s->k * (double)s->n * (double)s->batch * 2.0 > 64.0 * 1048576;
  const char *stream_pick = many_weights ? "stream_16x32_w8_u1" : "stream_16x32_w8_u2";
  /* Every stream config runs the same problems: one is a candidate iff all
   * of them are (each arch table lists them all). */
  int stream = -1;
  for (int i = 0; i < count && stream < 0; i++)
    if (strcmp(gemm_configs[candidates[i]].variant, stream_pick) == 0)
      stream = i;
  if (stream >= 0) {
    if (reason)
      snprintf(reason, capacity,
               "M = %lld <= %d, 16-byte rows: B streamed straight into tensor-core fragments "
               "(16x32 tiles, split over K so that the blocks fill %d SMs; %s MiB of B)",
               (long long)s->m, SKINNY_MAX_ROWS, sms, many_weights ? "more than 64" : "up to 64");
    return stream;
  }
  /* Other decode shapes stream B once too. 16-bit: 16-row tensor-core tiles
   * split over K, except one row against a K-contiguous B, where the GEMV's
   * warp per column streamed faster (H100: 54.5 against 60.3 us at
   * 1x8192x8192). */
  bool gemv_k = s->m == 1 && !s->grouped && s->plain->b.strides[1] == 1;
  bool skinny = !s->grouped && s->dtype != TSR_DTYPE_F32 && s->m <= SKINNY_MAX_ROWS && !gemv_k;
  bool gemv = !skinny && s->m <= GEMV_MAX_ROWS;
  for (int i = 0; i < count && (skinny || gemv); i++) {
    const cuda_gemm_config *c = &gemm_configs[candidates[i]];
    if ((skinny && c->kind == CUDA_GEMM_MMA && c->bm == 16) ||
        (gemv && c->kind == CUDA_GEMM_GEMV)) {
      if (reason)
        snprintf(reason, capacity,
                 "M = %lld <= %d: %s, split over K so that the blocks fill %d SMs", (long long)s->m,
                 skinny ? SKINNY_MAX_ROWS : GEMV_MAX_ROWS,
                 skinny ? "16-row tensor-core tiles stream B (the last block of a tile sums the "
                          "K slices in order)"
                        : "B streamed once by the GEMV kernels",
                 sms);
      return i;
    }
  }
  if (s->dtype == TSR_DTYPE_F32 && s->compute != TSR_COMPUTE_TF32) {
    /* Two blocks an SM hide more latency but spill a few registers: worth
     * it once the tiles fill the SMs SIMT_MANY_WAVES times over (H100,
     * queued: 4096^3 3.43 against 3.54 ms, 3072^3 1.67 against 1.65,
     * 1024^3 0.147 against 0.119; docs/PERFORMANCE.md). */
    int simt = -1, simt_two = -1;
    for (int i = 0; i < count; i++) {
      const cuda_gemm_config *c = &gemm_configs[candidates[i]];
      if (c->kind != CUDA_GEMM_SIMT)
        continue;
      int per_sm = resident_blocks(device, cuda_gemm_kernel(c, s->dtype));
      if (per_sm >= 2 && simt_two < 0)
        simt_two = i;
      else if (per_sm == 1 && simt < 0)
        simt = i;
    }
    const int64_t tiles = simt_two >= 0 ? gemm_tiles(&gemm_configs[candidates[simt_two]], s) : 0;
    const bool many = simt_two >= 0 && tiles >= (int64_t)SIMT_MANY_WAVES * sms;
    int pick = many || simt < 0 ? simt_two : simt;
    if (pick >= 0) {
      if (reason)
        snprintf(reason, capacity,
                 "f32 with strict compute: true f32 products on CUDA cores (128x128 tiles, %s: "
                 "%lld tiles %s %d x %d SMs)",
                 many ? "two blocks an SM" : "one block an SM", (long long)tiles, many ? ">=" : "<",
                 SIMT_MANY_WAVES, sms);
      return pick;
    }
  }
  const arch_table *table = &arch_tables[arch];
  int best = -1, chosen = -1, best_per_sm = 1;
  double best_util = -1.0;
  int64_t best_tiles = 0;
  for (int t = 0; t < table->gemm_count && chosen < 0; t++) {
    for (int i = 0; i < count; i++) {
      const cuda_gemm_config *c = &gemm_configs[candidates[i]];
      if (gemm_arch_rank[arch][candidates[i]] != t)
        continue;
      int64_t tiles;
      int per_sm;
      double util = gemm_utilisation(device, c, s, &tiles, &per_sm);
      if (c->kind == CUDA_GEMM_WGMMA)
        util *= GEMM_WGMMA_SPEEDUP;
      if (util > best_util + 1e-9 || util >= GEMM_GOOD_UTILISATION) {
        best = i;
        best_util = util;
        best_tiles = tiles;
        best_per_sm = per_sm;
      }
      if (util >= GEMM_GOOD_UTILISATION)
        chosen = i;
    }
  }
  if (best < 0)
    best = 0;
  if (reason) {
    const cuda_gemm_config *c = &gemm_configs[candidates[best]];
    snprintf(reason, capacity,
             "%sM = %lld, N = %lld, K = %lld: %lld tiles of %dx%d over %d SMs x %d resident keep "
             "%.0f%% of the last wave's block slots busy%s; %s",
             s->grouped ? "grouped, mean rows per group " : "", (long long)s->m, (long long)s->n,
             (long long)s->k, (long long)best_tiles, c->bm, c->bn, sms, best_per_sm,
             (c->kind == CUDA_GEMM_WGMMA ? best_util / GEMM_WGMMA_SPEEDUP : best_util) * 100.0,
             c->kind == CUDA_GEMM_WGMMA ? " (weighed x3: wgmma)" : "",
             chosen >= 0 ? "the fastest config of the table that fills the GPU"
                         : "no config fills the GPU: the one that keeps the most SMs busy");
  }
  return best;
}

/* Attention on tensor cores needs 16-bit data, a head dim that is a multiple
 * of 8 up to DP, unit stride along the head dim and 16-byte aligned rows. */
static bool flash_layout_ok(const tsr_attention_args *a, char *why, size_t capacity) {
  const tsr_plugin_tensor *tensors[3] = {&a->q, &a->k, &a->v};
  const char *names[3] = {"q", "k", "v"};
  if (a->q.dtype != TSR_DTYPE_F16 && a->q.dtype != TSR_DTYPE_BF16) {
    snprintf(why, capacity, "tensor-core attention needs f16 or bf16");
    return false;
  }
  if (a->q.shape[3] % 8 != 0) {
    snprintf(why, capacity, "tensor-core attention needs a head dim that is a multiple of 8");
    return false;
  }
  for (int i = 0; i < 3; i++) {
    const tsr_plugin_tensor *t = tensors[i];
    bool ok = t->strides[3] == 1 && cuda_tensor_address(t) % 16 == 0;
    for (int d = 0; d < 3 && ok; d++)
      ok = t->shape[d] == 1 || (t->strides[d] * 2) % 16 == 0;
    if (!ok) {
      snprintf(why, capacity,
               "tensor-core attention needs %s with unit stride along the head dim and 16-byte "
               "aligned rows",
               names[i]);
      return false;
    }
  }
  return true;
}

static bool attention_config_runs(const cuda_device *device, const cuda_attention_config *c,
                                  const tsr_attention_args *a, char *why, size_t capacity) {
  if (c->kind == CUDA_ATTENTION_GENERIC) {
    if (cuda_attention_generic_tile(a->q.shape[3], device->dynamic_smem_limit) < 1) {
      snprintf(why, capacity,
               "head dim %lld needs more shared memory than the %d bytes a block has",
               (long long)a->q.shape[3], device->dynamic_smem_limit);
      return false;
    }
    return true;
  }
  if (!flash_layout_ok(a, why, capacity))
    return false;
  if (c->sm90a && (device->props->cc_major != 9 || device->props->cc_minor != 0)) {
    snprintf(why, capacity, "%s is sm_90a code (wgmma)", c->variant);
    return false;
  }
  if (a->q.shape[3] > c->head_dim_max) {
    snprintf(why, capacity, "%s covers head dims up to %d", c->variant, c->head_dim_max);
    return false;
  }
  if (resident_blocks(device, cuda_attention_kernel(c, a->q.dtype)) < 1) {
    snprintf(why, capacity, "%s needs %d bytes of shared memory, more than this GPU gives a block",
             c->variant, c->smem);
    return false;
  }
  return true;
}

static bool op_is_rows(tsr_op op) {
  return op == TSR_OP_RMSNORM || op == TSR_OP_LAYERNORM || op == TSR_OP_SOFTMAX ||
         op == TSR_OP_CROSS_ENTROPY;
}

static bool op_is_elementwise(tsr_op op) {
  return op == TSR_OP_ROPE || op == TSR_OP_SWIGLU || op == TSR_OP_GELU;
}

/* Row length of a row op. */
static int64_t row_length(tsr_op op, const void *args) {
  switch (op) {
  case TSR_OP_RMSNORM: {
    const tsr_rmsnorm_args *r = args;
    return r->x.shape[r->x.rank - 1];
  }
  case TSR_OP_LAYERNORM: {
    const tsr_layernorm_args *r = args;
    return r->x.shape[r->x.rank - 1];
  }
  case TSR_OP_SOFTMAX: {
    const tsr_softmax_args *r = args;
    return r->x.shape[r->x.rank - 1];
  }
  default: {
    const tsr_cross_entropy_args *r = args;
    return r->logits.shape[1];
  }
  }
}

/* ------------------------------------------------------------------------ */
/* Listing                                                                   */
/* ------------------------------------------------------------------------ */

static void copy_text(char *dst, size_t capacity, const char *src) {
  size_t length = strlen(src);
  if (length >= capacity)
    length = capacity - 1;
  memcpy(dst, src, length);
  dst[length] = '\0';
}

static void put_variant(tsr_plugin_variant_list *out, const char *name, const char *description) {
  if (out->count >= TSR_PLUGIN_MAX_VARIANTS)
    return;
  tsr_plugin_variant *v = &out->variants[out->count++];
  copy_text(v->name, sizeof v->name, name);
  copy_text(v->description, sizeof v->description, description);
}

static void describe_gemm(const cuda_gemm_config *c, char *buf, size_t capacity) {
  switch (c->kind) {
  case CUDA_GEMM_WGMMA:
    snprintf(buf, capacity,
             "sm_90a wgmma (bf16/f16/tf32) fed by TMA: %dx%d x 128 B of K, %d stages, "
             "producer + 2 consumer warpgroups, persistent; unaligned operands packed",
             c->bm, c->bn, c->stages);
    break;
  case CUDA_GEMM_MMA:
    snprintf(buf, capacity,
             "mma.sync m16n8k16: block %dx%dx%d, %dx%d warps, %d cp.async stages, %d KiB "
             "shared%s",
             c->bm, c->bn, c->bk, c->warps_m, c->warps_n, c->stages, c->smem / 1024,
             c->bm == 16 ? ", split over K when the tiles cannot fill the GPU" : "");
    break;
  case CUDA_GEMM_TF32:
    snprintf(
        buf, capacity,
        "tf32 mma.sync m16n8k8: block %dx%dx%d, %dx%d warps, %d cp.async stages, %d KiB shared",
        c->bm, c->bn, c->bk, c->warps_m, c->warps_n, c->stages, c->smem / 1024);
    break;
  case CUDA_GEMM_SIMT:
    snprintf(buf, capacity,
             "true f32 FMA on CUDA cores: block 128x128x%d, 8x8 outputs a thread, cp.async "
             "staging, %s",
             c->bk,
             c->kernels[0] && strcmp(c->kernels[0], TSR_GEMM_SIMT16_B2_NAME) == 0
                 ? "two blocks an SM (128 registers)"
                 : "one block an SM");
    break;
  case CUDA_GEMM_STREAM:
    snprintf(buf, capacity,
             "M <= 16: 16x32 tiles, B streamed by 16-byte loads into mma.sync fragments, "
             "%d warps split K, 2 x %d chunks of 32 a warp in registers",
             c->warps_n, c->stages);
    break;
  case CUDA_GEMM_GEMV:
    snprintf(buf, capacity,
             "GEMV for M <= 16: B streamed once with 16-byte loads, split over K into f32 "
             "partials when N is small");
    break;
  }
}

/* GEMM list entries (name and description), formatted once: the core lists
 * variants on every call. */
static tsr_plugin_variant gemm_entries[GEMM_CONFIG_COUNT];
static pthread_once_t gemm_entries_once = PTHREAD_ONCE_INIT;

static void build_gemm_entries(void) {
  for (int i = 0; i < GEMM_CONFIG_COUNT; i++) {
    copy_text(gemm_entries[i].name, sizeof gemm_entries[i].name, gemm_configs[i].variant);
    describe_gemm(&gemm_configs[i], gemm_entries[i].description,
                  sizeof gemm_entries[i].description);
  }
}

/* The GEMM choice for one problem: which configs can run it and the
 * heuristic's pick. The core asks three times per call (op_supported,
 * op_variants, op_run) and applications repeat the same problem (layers,
 * decode steps), so each thread keeps the last few choices, keyed by the
 * args' bytes and the tensors' device addresses (alignment decides what
 * TMA can load), and the device. Grouped GEMM is not kept: its choice also
 * depends on the group sizes behind a pointer. */
enum { GEMM_MEMO_SLOTS = 4 };

typedef struct gemm_choice {
  const cuda_device *device;
  tsr_gemm_args args;
  CUdeviceptr addresses[5];
  uint32_t runs;  /* bit i: gemm_configs[i] can run the problem */
  int count;      /* configs that can */
  int pick;       /* the heuristic's config index */
  int pick_place; /* its place in the list (configs in index order) */
  char reason[256];
  bool valid;
} gemm_choice;

static _Thread_local gemm_choice gemm_memo[GEMM_MEMO_SLOTS];
static _Thread_local unsigned gemm_memo_next;

static void gemm_key(const tsr_gemm_args *g, tsr_gemm_args *args, CUdeviceptr addresses[5]) {
  memset(args, 0, sizeof *args);
  size_t given = g->struct_size < sizeof *args ? g->struct_size : sizeof *args;
  memcpy(args, g, given);
  const tsr_plugin_tensor *tensors[5] = {&g->a, &g->b, &g->c, &g->bias, &g->d};
  for (int i = 0; i < 5; i++)
    addresses[i] = tensors[i]->buffer ? cuda_tensor_address(tensors[i]) : 0;
}

static const gemm_choice *choose_gemm(const cuda_device *device, const tsr_gemm_args *g) {
  tsr_gemm_args args;
  CUdeviceptr addresses[5];
  gemm_key(g, &args, addresses);
  for (int i = 0; i < GEMM_MEMO_SLOTS; i++) {
    const gemm_choice *m = &gemm_memo[i];
    if (m->valid && m->device == device && memcmp(m->addresses, addresses, sizeof addresses) == 0 &&
        memcmp(&m->args, &args, sizeof args) == 0)
      return m;
  }
  gemm_choice *m = &gemm_memo[gemm_memo_next++ % GEMM_MEMO_SLOTS];
  m->valid = false;
  m->device = device;
  m->args = args;
  memcpy(m->addresses, addresses, sizeof addresses);
  gemm_shape s = shape_of(TSR_OP_GEMM, &m->args);
  int candidates[GEMM_CONFIG_COUNT];
  m->runs = 0;
  m->count = 0;
  for (int i = 0; i < GEMM_CONFIG_COUNT; i++) {
    if (gemm_config_runs(device, &gemm_configs[i], &s)) {
      candidates[m->count++] = i;
      m->runs |= 1u << i;
    }
  }
  m->reason[0] = '\0';
  m->pick = -1;
  m->pick_place = 0;
  if (m->count > 0) {
    m->pick_place = gemm_heuristic(device, &s, candidates, m->count, m->reason, sizeof m->reason);
    m->pick = candidates[m->pick_place];
  }
  m->valid = true;
  return m;
}

_Static_assert(GEMM_CONFIG_COUNT <= 32, "gemm_choice.runs is a 32-bit mask");

tsr_status cuda_op_variants(const cuda_device *device, tsr_op op, const void *args,
                            tsr_plugin_variant_list *out, char *why, size_t why_capacity) {
  out->count = 0;
  out->heuristic = 0;
  out->reason[0] = '\0';
  char description[160];
  if (op == TSR_OP_GEMM) {
    pthread_once(&gemm_entries_once, build_gemm_entries);
    const gemm_choice *m = choose_gemm(device, args);
    if (m->count == 0) {
      snprintf(why, why_capacity, "no GEMM kernel of this build runs dtype %d on this GPU",
               (int)m->args.a.dtype);
      return TSR_ERROR_UNSUPPORTED;
    }
    for (int i = 0; i < GEMM_CONFIG_COUNT; i++)
      if (m->runs & (1u << i))
        out->variants[out->count++] = gemm_entries[i];
    out->heuristic = m->pick_place;
    memcpy(out->reason, m->reason, sizeof out->reason);
    return TSR_OK;
  }
  if (op == TSR_OP_GROUPED_GEMM) {
    gemm_shape s = shape_of(op, args);
    int candidates[GEMM_CONFIG_COUNT], count = 0;
    pthread_once(&gemm_entries_once, build_gemm_entries);
    for (int i = 0; i < GEMM_CONFIG_COUNT; i++) {
      if (gemm_config_runs(device, &gemm_configs[i], &s)) {
        candidates[count++] = i;
        out->variants[out->count++] = gemm_entries[i];
      }
    }
    if (count == 0) {
      snprintf(why, why_capacity, "no GEMM kernel of this build runs dtype %d on this GPU",
               (int)s.dtype);
      return TSR_ERROR_UNSUPPORTED;
    }
    out->heuristic = gemm_heuristic(device, &s, candidates, count, out->reason, sizeof out->reason);
    return TSR_OK;
  }
  if (op == TSR_OP_ATTENTION) {
    const tsr_attention_args *a = args;
    char reason[256] = "";
    int flash_pick = -1, flash_short_pick = -1, pick_dim = 0;
    for (int i = 0; i < ATTENTION_CONFIG_COUNT; i++) {
      const cuda_attention_config *c = &attention_configs[i];
      char not_here[256];
      if (!attention_config_runs(device, c, a, not_here, sizeof not_here)) {
        if (c->kind == CUDA_ATTENTION_FLASH && reason[0] == '\0')
          snprintf(reason, sizeof reason, "%s", not_here);
        continue;
      }
      if (c->kind == CUDA_ATTENTION_FLASH) {
        snprintf(description, sizeof description,
                 "flash on tensor cores (%s): %d query rows (%d warps) x %d keys a tile, head "
                 "dim padded to %d, %d key/value stage%s",
                 c->sm90a ? "sm_90a wgmma" : "mma.sync", c->block_q, c->warps, c->block_kv,
                 c->head_dim_max, c->kv_stages, c->kv_stages > 1 ? "s" : "");
        /* The first config of the smallest head-dim class that holds the
         * head dim; 64-row blocks when there are few query rows. */
        if (flash_pick < 0 || c->head_dim_max < pick_dim) {
          flash_pick = (int)out->count;
          pick_dim = c->head_dim_max;
          flash_short_pick = -1;
        }
        if (flash_short_pick < 0 && c->head_dim_max == pick_dim && c->block_q <= 64)
          flash_short_pick = (int)out->count;
      } else {
        snprintf(description, sizeof description,
                 "flash on CUDA cores: any dtype, head dim and strides; a warp per query row, f32");
      }
      put_variant(out, c->variant, description);
    }
    if (out->count == 0) {
      snprintf(why, why_capacity, "%s", reason);
      return TSR_ERROR_UNSUPPORTED;
    }
    if (flash_pick >= 0 && a->q.shape[1] <= 64 && flash_short_pick >= 0) {
      out->heuristic = flash_short_pick;
      snprintf(out->reason, sizeof out->reason,
               "head dim %lld, %lld query rows: the smallest tensor-core tile that holds the head "
               "dim, 64 rows a block",
               (long long)a->q.shape[3], (long long)a->q.shape[1]);
    } else if (flash_pick >= 0) {
      out->heuristic = flash_pick;
      snprintf(out->reason, sizeof out->reason,
               "head dim %lld: the smallest tensor-core tile that holds it, the fastest such "
               "config on sm_90",
               (long long)a->q.shape[3]);
    } else {
      out->heuristic = (int)out->count - 1;
      snprintf(out->reason, sizeof out->reason, "the generic kernel: %s", reason);
    }
    return TSR_OK;
  }
  if (op_is_rows(op)) {
    for (int i = 0; i < ROWS_CONFIG_COUNT; i++) {
      snprintf(description, sizeof description,
               "a block of %d threads per row, 16-byte accesses when aligned, row kept in shared "
               "memory up to %d KiB",
               rows_configs[i].threads, CUDA_ROWS_CACHE_BYTES / 1024);
      put_variant(out, rows_configs[i].variant, description);
    }
    int64_t n = row_length(op, args);
    /* Measured on an H200 at 16384 x 8192 bf16: cross entropy (reductions
     * only) fastest with 128 threads, the norms and softmax with 256 (512
     * within 1%). */
    out->heuristic = op == TSR_OP_CROSS_ENTROPY || n <= 1024 ? 0 : 1;
    snprintf(out->reason, sizeof out->reason, "%s rows of %lld: %d threads a row",
             op == TSR_OP_CROSS_ENTROPY ? "cross-entropy" : "norm/softmax", (long long)n,
             rows_configs[out->heuristic].threads);
    return TSR_OK;
  }
  if (op_is_elementwise(op)) {
    put_variant(out, elementwise_config.variant,
                "grid-stride loop, 256 threads a block, 16-byte vectors over dense data");
    snprintf(out->reason, sizeof out->reason, "the only variant of this op");
    return TSR_OK;
  }
  snprintf(why, why_capacity, "op %d is unknown to the cuda plugin", (int)op);
  return TSR_ERROR_UNSUPPORTED;
}

/* GEMM configs without formatting any description or reason: this runs
 * inside every tsr_gemm call. */
static const void *gemm_op_config(const cuda_device *device, tsr_op op, const void *args,
                                  const char *name, char *why, size_t why_capacity) {
  if (op == TSR_OP_GEMM) {
    const gemm_choice *m = choose_gemm(device, args);
    if (m->count == 0) {
      snprintf(why, why_capacity, "no GEMM kernel of this build runs dtype %d on this GPU",
               (int)m->args.a.dtype);
      return NULL;
    }
    if (!name || strcmp(gemm_configs[m->pick].variant, name) == 0)
      return &gemm_configs[m->pick];
    for (int i = 0; i < GEMM_CONFIG_COUNT; i++)
      if ((m->runs & (1u << i)) && strcmp(gemm_configs[i].variant, name) == 0)
        return &gemm_configs[i];
    size_t used = (size_t)snprintf(why, why_capacity,
                                   "variant '%s' cannot run this problem here; these can:", name);
    for (int i = 0, listed = 0; i < GEMM_CONFIG_COUNT && used < why_capacity; i++)
      if (m->runs & (1u << i))
        used += (size_t)snprintf(why + used, why_capacity - used, "%s %s", listed++ ? "," : "",
                                 gemm_configs[i].variant);
    return NULL;
  }
  gemm_shape s = shape_of(op, args);
  int candidates[GEMM_CONFIG_COUNT], count = 0;
  for (int i = 0; i < GEMM_CONFIG_COUNT; i++)
    if (gemm_config_runs(device, &gemm_configs[i], &s))
      candidates[count++] = i;
  if (count == 0) {
    snprintf(why, why_capacity, "no GEMM kernel of this build runs dtype %d on this GPU",
             (int)s.dtype);
    return NULL;
  }
  if (!name)
    return &gemm_configs[candidates[gemm_heuristic(device, &s, candidates, count, NULL, 0)]];
  for (int i = 0; i < count; i++)
    if (strcmp(gemm_configs[candidates[i]].variant, name) == 0)
      return &gemm_configs[candidates[i]];
  size_t used = (size_t)snprintf(why, why_capacity,
                                 "variant '%s' cannot run this problem here; these can:", name);
  for (int i = 0; i < count && used < why_capacity; i++)
    used += (size_t)snprintf(why + used, why_capacity - used, "%s %s", i ? "," : "",
                             gemm_configs[candidates[i]].variant);
  return NULL;
}

const void *cuda_op_config(const cuda_device *device, tsr_op op, const void *args, const char *name,
                           char *why, size_t why_capacity) {
  if (op == TSR_OP_GEMM || op == TSR_OP_GROUPED_GEMM)
    return gemm_op_config(device, op, args, name, why, why_capacity);
  tsr_plugin_variant_list list;
  if (cuda_op_variants(device, op, args, &list, why, why_capacity) != TSR_OK)
    return NULL;
  int pick = list.heuristic;
  if (name) {
    pick = -1;
    for (uint32_t i = 0; i < list.count; i++)
      if (strcmp(list.variants[i].name, name) == 0)
        pick = (int)i;
    if (pick < 0) {
      size_t used = (size_t)snprintf(why, why_capacity,
                                     "variant '%s' cannot run this problem here; these can:", name);
      for (uint32_t i = 0; i < list.count && used < why_capacity; i++)
        used += (size_t)snprintf(why + used, why_capacity - used, "%s %s", i ? "," : "",
                                 list.variants[i].name);
      return NULL;
    }
  }
  const char *chosen = list.variants[pick].name;
  if (op == TSR_OP_GEMM || op == TSR_OP_GROUPED_GEMM) {
    for (int i = 0; i < GEMM_CONFIG_COUNT; i++)
      if (strcmp(gemm_configs[i].variant, chosen) == 0)
        return &gemm_configs[i];
  } else if (op == TSR_OP_ATTENTION) {
    for (int i = 0; i < ATTENTION_CONFIG_COUNT; i++)
      if (strcmp(attention_configs[i].variant, chosen) == 0)
        return &attention_configs[i];
  } else if (op_is_rows(op)) {
    for (int i = 0; i < ROWS_CONFIG_COUNT; i++)
      if (strcmp(rows_configs[i].variant, chosen) == 0)
        return &rows_configs[i];
  } else if (op_is_elementwise(op)) {
    return &elementwise_config;
  }
  snprintf(why, why_capacity, "variant '%s' has no config", chosen);
  return NULL;
}
