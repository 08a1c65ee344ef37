/* SPDX-License-Identifier: Apache-2.0 */
/* Kernel variants as data: named rows (first member `const char *name`,
 * the variant name tuning databases store) for each op family, the vendor
 * description a GPU plugin hands the layer (its kernels, its own rows, its
 * per-architecture tables and hooks), the catalogue built from both at
 * init, and the prepared configs op_select answers with. */
#ifndef TESSERA_GPU_CONFIGS_H
#define TESSERA_GPU_CONFIGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernel_params.h"
#include "tessera/plugin.h"

struct gpu_device;
struct gpu_queue;

/* ---- the kernels of a module ---- */

typedef struct gpu_kernel_info {
  const char *name;
  int dynamic_smem; /* the most dynamic shared memory it is launched with; -1: device limit */
  int threads;      /* block size (for the occupancy query), 0: not queried */
} gpu_kernel_info;

/* A kernel of an open device, resolved once at device_open. */
typedef struct gpu_kernel {
  void *function;    /* NULL: not loadable on this device */
  int blocks_per_sm; /* resident at its launch shape (0: cannot run here) */
  const char *name;  /* for error sentences */
} gpu_kernel;

/* ---- variant rows ---- */

typedef enum gpu_gemm_kind {
  GPU_GEMM_MMA,    /* bf16 / f16 tensor cores */
  GPU_GEMM_VENDOR, /* the vendor's own kernels (CUDA: sm_90a wgmma + TMA), its hooks decide */
  GPU_GEMM_TF32,   /* f32 inputs on tensor cores, when compute = tf32 */
  GPU_GEMM_SIMT,   /* true f32 */
  GPU_GEMM_GEMV,   /* M <= 16: weights streamed, split over K */
  GPU_GEMM_STREAM  /* bf16 / f16, M <= 16: weights streamed into mma fragments */
} gpu_gemm_kind;

typedef struct gpu_gemm_config {
  const char *name;
  gpu_gemm_kind kind;
  int bm, bn, bk, warps_m, warps_n, stages; /* stream: warps_n warps, `stages` chunks */
  int smem;                                 /* dynamic shared memory, bytes */
  /* kernel per dtype of A: [0] f32, [1] f16, [2] bf16 (NULL: none) */
  const char *kernels[3];
  /* How much more a block does per SM than the mma.sync tiles (the
   * heuristic weighs utilisation by it; 0 means 1), and a fixed description
   * (NULL: made from the fields). */
  double speedup;
  const char *description;
} gpu_gemm_config;

typedef enum gpu_attention_kind {
  GPU_ATTENTION_FLASH,
  GPU_ATTENTION_GENERIC,
  GPU_ATTENTION_DECODE /* split-KV for few query rows (kernels from the catalogue's decode table) */
} gpu_attention_kind;

typedef struct gpu_attention_config {
  const char *name;
  gpu_attention_kind kind;
  int head_dim_max; /* flash: DP */
  int block_kv, kv_stages;
  int smem;
  const char *kernels[3];
  int block_q, warps; /* flash: query rows and warps per block */
  const char *engine; /* flash: what multiplies ("mma.sync", "sm_90a wgmma") */
  /* Runs only on the architecture arch_major.arch_minor ("sm_90a code
   * (wgmma)": 9.0); arch_exact 0: any. */
  int arch_exact, arch_major, arch_minor;
  const char *arch_note;
  /* Runs only on devices of these vendor arch classes (bit per index of
   * its arch tables; HIP: the matrix instruction's GPUs); 0: any. */
  uint32_t arch_classes;
  int splits; /* decode: key chunks forced (0: the heuristic) */
  /* flash: 0 runs dense problems only; 1 is the serving form (packed /
   * paged / per-sequence lengths, softcap, faults), serving problems only;
   * 2 the varlen form, the serving one without block tables and softcap
   * (fewer registers: docs/PERFORMANCE.md) */
  int serving;
  /* decode: 1 for the tensor-core kernel (attention_decode_mma.cu, 16-row
   * tiles), 0 for the CUDA-core one */
  int mma;
} gpu_attention_config;

/* Row ops (norms, softmax, cross entropy) and elementwise ops: threads per
 * block. */
typedef struct gpu_threads_config {
  const char *name;
  int threads;
} gpu_threads_config;

/* A vendor's list of GEMM configs for one architecture class, fastest first
 * (the heuristic takes the first whose tiles fill the GPU). */
typedef struct gpu_arch_table {
  const char *name; /* "sm_90" */
  const char *const *gemm;
  int gemm_count;
} gpu_arch_table;

/* A GEMM problem as the heuristics see it. */
typedef struct gpu_gemm_shape {
  bool grouped;
  int64_t m, n, k, batch; /* grouped: m is the mean rows per group */
  int32_t dtype, compute;
  const tsr_grouped_gemm_args *groups;
  const tsr_gemm_args *plain;
} gpu_gemm_shape;

/* ---- prepared configs: what op_select answers, op_run launches ---- */

/* Every prepared config starts with this: the variant name (first, as
 * tsr_plugin_select_row wants) and the ops it runs (bit per tsr_op). */
typedef struct gpu_prepared {
  const char *name;
  uint32_t ops;
} gpu_prepared;

typedef struct gpu_gemm_prepared {
  gpu_prepared head;
  const gpu_gemm_config *config;
  const gpu_kernel *kernel; /* for the dtype it was prepared for (GEMV: NULL) */
} gpu_gemm_prepared;

typedef struct gpu_attention_prepared {
  gpu_prepared head;
  const gpu_attention_config *config;
  const gpu_kernel *kernel;
} gpu_attention_prepared;

typedef struct gpu_rows_prepared {
  gpu_prepared head;
  const gpu_threads_config *config;
  const gpu_kernel *kernel, *kernel_b4; /* b4: cross entropy's half-batch kernel */
} gpu_rows_prepared;

typedef struct gpu_elementwise_prepared {
  gpu_prepared head;
  const gpu_threads_config *config;
  const gpu_kernel *kernel;
} gpu_elementwise_prepared;

/* ---- the vendor description ---- */

typedef struct gpu_vendor {
  /* The memory buffer_wrap takes (tsr_external_kind), in words (host memory
   * too, where the driver can register it), and the kind of memory and
   * streams buffer_export and queue_wrap speak. */
  int32_t external_kind;
  const char *external_what;
  int32_t external_stream_kind;
  const char *external_stream_what;
  /* The embedded module (CUDA: a fatbin) and the targets it holds. */
  const void *image;
  const char *image_targets;
  /* A device's code object may lack some kernels (HIP: the matrix-core
   * kernels exist only for the targets that have the instruction): a kernel
   * the module lacks is then marked unavailable on that device instead of
   * failing device_open. */
  bool kernels_per_target;
  /* Kernels of the module beyond the portable ones. */
  const gpu_kernel_info *kernels;
  int kernel_count;
  /* Its own variants: GEMM rows (listed before the portable ones; kind
   * GPU_GEMM_VENDOR runs through the hooks below) and attention rows
   * (listed after the portable flash rows, before the generic kernel). */
  const gpu_gemm_config *gemm;
  int gemm_count;
  const gpu_attention_config *attention;
  int attention_count;
  /* GEMM tables per architecture class, and the class of a device. */
  const gpu_arch_table *arch_tables;
  int arch_count;
  int (*arch_of)(int arch_major, int arch_minor);
  /* GPU_GEMM_VENDOR rows: whether one runs a problem on a device (the layer
   * has checked its arch table and occupancy), and the launches of a plain
   * GEMM (`p` filled but for tiles and layouts) and a grouped one. */
  bool (*gemm_runs)(const struct gpu_device *device, const gpu_gemm_config *config,
                    const gpu_gemm_shape *shape);
  tsr_status (*gemm_run)(struct gpu_queue *queue, const gpu_gemm_prepared *prepared,
                         const tsr_gemm_args *args, tsr_gpu_gemm_params *p, int64_t batch);
  tsr_status (*grouped_run)(struct gpu_queue *queue, const gpu_gemm_prepared *prepared,
                            const tsr_grouped_gemm_args *args, tsr_gpu_gemm_params *p);
} gpu_vendor;

/* ---- the catalogue: vendor and portable rows together, built at init ---- */

enum {
  GPU_MAX_GEMM_CONFIGS = 48, /* a vendor's rows and the portable ones */
  GPU_MAX_ATTENTION_CONFIGS = 64,
  GPU_MAX_ARCH_TABLES = 8,
  GPU_KERNEL_HASH_SLOTS = 1024,
  GPU_ROW_OPS = 4,         /* rmsnorm, layernorm, softmax, cross entropy */
  GPU_ELEMENTWISE_OPS = 3, /* swiglu, gelu, rope */
  GPU_DTYPE_SLOTS = 3,     /* f32, f16, bf16 */
  GPU_DECODE_DIMS = 3,     /* decode head-dim classes: up to 64, 128, 256 */
  GPU_DECODE_TILES = 2,    /* decode tile rows: 4, 8 */
};

typedef struct gpu_catalog {
  const gpu_vendor *vendor;
  int portable_kernels, kernel_count; /* kernel index: portable ones, then the vendor's */
  short kernel_hash[GPU_KERNEL_HASH_SLOTS];
  const gpu_gemm_config *gemm[GPU_MAX_GEMM_CONFIGS];
  int gemm_count;
  int gemm_kernel[GPU_MAX_GEMM_CONFIGS][GPU_DTYPE_SLOTS];
  int gemm_rank[GPU_MAX_ARCH_TABLES][GPU_MAX_GEMM_CONFIGS]; /* place in each arch table, -1 */
  const gpu_attention_config *attention[GPU_MAX_ATTENTION_CONFIGS];
  int attention_count;
  int attention_kernel[GPU_MAX_ATTENTION_CONFIGS][GPU_DTYPE_SLOTS];
  /* [layout: 0 K-contiguous B, 1 N-contiguous][dtype slot][rows class] */
  int gemv_kernel[2][GPU_DTYPE_SLOTS][3];
  int splitk_kernel, pack_kernel[2]; /* pack: 16-bit, 32-bit */
  /* decode attention: [dtype slot][head-dim class 64/128/256][tile rows 4/8],
   * its combine kernel per dtype; kv_append per element size (16, 32 bits) */
  int decode_kernel[GPU_DTYPE_SLOTS][GPU_DECODE_DIMS][GPU_DECODE_TILES];
  int decode_combine_kernel[GPU_DTYPE_SLOTS];
  int decode_mma_kernel[GPU_DTYPE_SLOTS][GPU_DECODE_DIMS]; /* f32: -1 */
  int kv_append_kernel[2];
  int rows_kernel[GPU_ROW_OPS][GPU_DTYPE_SLOTS][2];
  int elementwise_kernel[GPU_ELEMENTWISE_OPS][GPU_DTYPE_SLOTS];
} gpu_catalog;

/* Builds the catalogue; false (with `why`) when a table is too large or
 * names a kernel the module lacks. */
bool gpu_catalog_build(gpu_catalog *catalog, const gpu_vendor *vendor, char *why, size_t capacity);
const gpu_kernel_info *gpu_catalog_kernel(const gpu_catalog *catalog, int index);

/* The portable rows of the row and elementwise ops. */
extern const gpu_threads_config gpu_rows_configs[3];
extern const gpu_threads_config gpu_elementwise_config;

/* Slot of a dtype in per-dtype tables (f32 0, f16 1, bf16 2), -1 else. */
int gpu_dtype_slot(int32_t dtype);
/* Row ops and elementwise ops in the order of the catalogue's tables, and
 * an op's index there (-1: not one of them). */
extern const tsr_op gpu_row_ops[GPU_ROW_OPS];
extern const tsr_op gpu_elementwise_ops[GPU_ELEMENTWISE_OPS];
int gpu_rows_op_index(tsr_op op);
int gpu_elementwise_op_index(tsr_op op);

/* Dynamic shared memory the generic attention kernel needs for head dim D
 * and its key tile: the largest key tile (<= 32) that fits `limit`, 0 if
 * none. */
int gpu_attention_generic_tile(int64_t head_dim, int limit);

/* Decode attention's head-dim class (index of 64, 128, 256; -1: wider) and
 * tile class (4 rows: 0, 8 rows: 1) for a problem's rows per kv head. */
int gpu_decode_dim_class(int64_t head_dim);
int gpu_decode_tile_rows(int64_t rows_per_kv_head);
/* The tensor-core decode kernel of a head-dim class: its dynamic shared
 * memory and keys a tile (kernel_list.h's TSR_DECODE_MMA_CONFIGS). */
int gpu_decode_mma_smem(int dim_class);
int gpu_decode_mma_keys(int dim_class);

/* kv_append's one variant. */
extern const gpu_threads_config gpu_kv_append_config;

/* Row ops cache the row in shared memory up to this many f32 values. */
enum { GPU_ROWS_CACHE_BYTES = 64 * 1024 };

#endif /* TESSERA_GPU_CONFIGS_H */
