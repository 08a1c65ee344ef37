/* SPDX-License-Identifier: Apache-2.0 */
/* Kernel variants of the CUDA plugin (tile configurations), the tables that
 * say which ones each GPU architecture gets, and the heuristics that pick
 * one per problem (configs.c). Not installed. */
#ifndef TESSERA_CUDA_CONFIGS_H
#define TESSERA_CUDA_CONFIGS_H

#include <stdbool.h>
#include <stddef.h>

#include "cuda_internal.h"

typedef enum cuda_gemm_kind {
  CUDA_GEMM_MMA,   /* bf16 / f16 tensor cores */
  CUDA_GEMM_WGMMA, /* bf16 / f16 (and tf32) on sm_90a: wgmma + TMA, persistent */
  CUDA_GEMM_TF32,  /* f32 inputs on tensor cores, when compute = tf32 */
  CUDA_GEMM_SIMT,  /* true f32 */
  CUDA_GEMM_GEMV,  /* M <= 16: weights streamed, split over K */
  CUDA_GEMM_STREAM /* bf16 / f16, M <= 16: weights streamed into mma fragments */
} cuda_gemm_kind;

typedef struct cuda_gemm_config {
  const char *variant;
  cuda_gemm_kind kind;
  int bm, bn, bk, warps_m, warps_n, stages; /* stream: warps_n warps, `stages` chunks */
  int smem;                                 /* dynamic shared memory, bytes */
  /* kernel per dtype of A: [0] f32, [1] f16, [2] bf16 (NULL: none) */
  const char *kernels[3];
} cuda_gemm_config;

typedef enum cuda_attention_kind {
  CUDA_ATTENTION_FLASH,
  CUDA_ATTENTION_GENERIC
} cuda_attention_kind;

typedef struct cuda_attention_config {
  const char *variant;
  cuda_attention_kind kind;
  int head_dim_max; /* flash: DP */
  int block_kv, kv_stages;
  int smem;
  const char *kernels[3];
  int block_q, warps; /* flash: query rows and warps per block */
  int sm90a;          /* wgmma code: compute capability 9.0 only */
} cuda_attention_config;

/* A 16-bit GEMM operand as a 3-D TMA tensor map: dims {its unit-stride
 * dim, its other matrix dim, batch or group}, byte strides of the last two. */
typedef struct cuda_tma_operand {
  bool k_major; /* the unit stride runs along K */
  bool batched; /* the third dim is indexed (else it has extent 1) */
  uint64_t dims[3];
  uint64_t strides[2];
} cuda_tma_operand;

/* Describes matrix dims `row_dim` and `k_dim` (and `batch_dim`, -1: none)
 * of a 16-bit tensor as a TMA operand; false when TMA cannot load it: a
 * start that is not 16-byte aligned, no unit stride, other strides that are
 * not multiples of 16 bytes or not nested. */
bool cuda_tma_operand_of(const tsr_plugin_tensor *t, int row_dim, int k_dim, int batch_dim,
                         cuda_tma_operand *out);

/* Which operands of a plain GEMM the wgmma kernels take from a packed
 * K-major copy: those TMA cannot address, and for tf32 those not K-major. */
void cuda_wgmma_packs(const tsr_gemm_args *g, bool *pack_a, bool *pack_b);

/* Row ops (norms, softmax, cross entropy): threads per block. */
typedef struct cuda_rows_config {
  const char *variant;
  int threads;
} cuda_rows_config;

/* Elementwise ops: threads per block. */
typedef struct cuda_elementwise_config {
  const char *variant;
  int threads;
} cuda_elementwise_config;

/* Architecture class of a device: the key of the tile tables. */
typedef enum cuda_arch_class { CUDA_ARCH_SM80, CUDA_ARCH_SM86, CUDA_ARCH_SM90 } cuda_arch_class;
cuda_arch_class cuda_arch_of(const cuda_device_props *props);
const char *cuda_arch_class_name(cuda_arch_class arch);

/* Kernel index of a config for a dtype code (TSR_DTYPE_*), -1 when none. */
int cuda_gemm_kernel(const cuda_gemm_config *config, int32_t dtype);
int cuda_attention_kernel(const cuda_attention_config *config, int32_t dtype);

/* Fills `out` with every variant of `op` that can run this problem on the
 * device, and the heuristic's pick with its reason. TSR_ERROR_UNSUPPORTED
 * (with `why`) when none can. */
tsr_status cuda_op_variants(const cuda_device *device, tsr_op op, const void *args,
                            tsr_plugin_variant_list *out, char *why, size_t why_capacity);

/* The config of variant `name` (NULL: the heuristic's pick) when it can run
 * this problem; NULL otherwise, with the reason in `why`. */
const void *cuda_op_config(const cuda_device *device, tsr_op op, const void *args, const char *name,
                           char *why, size_t why_capacity);

/* Dynamic shared memory the generic attention kernel needs for head dim D
 * and its key tile; the largest key tile (<= 32) that fits `limit`, 0 if
 * none. */
int cuda_attention_generic_tile(int64_t head_dim, int limit);

/* Row ops cache the row in shared memory up to this many f32 values. */
enum { CUDA_ROWS_CACHE_BYTES = 64 * 1024 };

#endif /* TESSERA_CUDA_CONFIGS_H */
