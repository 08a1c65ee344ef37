/* SPDX-License-Identifier: Apache-2.0 */
/* Every variant table of the Vulkan plugin and the heuristics that pick from
 * them (configs.c): the device classes that key the tables (vendor, subgroup
 * size, shared memory, cooperative matrices), the fused ops' workgroups, the
 * GEMM tiles and the attention blocks. Tables are arrays of named rows (the
 * variant name first); launches (ops*.c) read the rows and never decide what
 * runs. Not installed. */
#ifndef TESSERA_VULKAN_CONFIGS_H
#define TESSERA_VULKAN_CONFIGS_H

#include <stdbool.h>
#include <stdint.h>

#include "vulkan_internal.h"

/* ---- device classes ---- */

/* One device class: its name (the devices' `arch` string) and what its
 * tables list and its heuristics pick. */
typedef struct vulkan_class_row {
  const char *name;             /* "lavapipe", "nvidia", "amd-wave32", ... */
  uint32_t rows_min, rows_max;  /* row-op workgroups listed */
  const char *elementwise;      /* the elementwise variant picked */
  const char *const *gemm_simt; /* the simt GEMM variants listed, NULL-ended */
  /* GEMM heuristic: gemm_small below gemm_large_outputs outputs, gemm_large
   * from there; NULL: the largest tile that still gives every compute unit
   * two workgroups (vulkan_gemm_occupancy_order). */
  const char *gemm_small, *gemm_large;
  double gemm_large_outputs;
  /* Attention heuristic: the scalar config of the head dim with this many
   * invocations and the most rows; attention_threads_only: nothing else
   * (else the first config of the head dim until one has that many). */
  uint32_t attention_threads;
  bool attention_threads_only;
} vulkan_class_row;

const vulkan_class_row *vulkan_class_of(const vulkan_device_props *props);

/* Shader build suffix of a dtype ("f32", "f16", "bf16"); NULL for others. */
const char *vulkan_dtype_suffix(int32_t dtype);

/* ---- fused ops: row ops (norms, softmax, cross entropy), elementwise ---- */

/* Invocations per workgroup. */
typedef struct vulkan_fused_config {
  const char *name;
  uint32_t threads;
  const char *description;
} vulkan_fused_config;

/* Row units (VEC elements) an invocation keeps in registers at most; longer
 * rows are read again from memory. */
enum { VULKAN_ROWS_MAX_ITEMS = 8 };

bool vulkan_is_row_op(tsr_op op);
/* Fills `out` with the fused-op variants this device class lists and the
 * heuristic's pick for a row (or element) count `n` per workgroup. */
void vulkan_fused_variants(const vulkan_device_props *props, tsr_op op, int64_t n,
                           tsr_plugin_variant_list *out);
/* The row named `name` of the op's table (row ops or elementwise), or NULL. */
const vulkan_fused_config *vulkan_fused_config_find(tsr_op op, const char *name);

/* ---- cooperative matrices ---- */

/* Which cooperative-matrix extension runs the coopmat shaders: they
 * multiply 16x8x16 (f16 inputs, f32 accumulator and result, subgroup scope),
 * in subgroups of 32. KHR (the NV build rewritten, spirv_rewrite.c) where
 * the device lists that shape, else NV. */
typedef enum vulkan_coopmat_route {
  VULKAN_COOPMAT_NONE,
  VULKAN_COOPMAT_NV,
  VULKAN_COOPMAT_KHR
} vulkan_coopmat_route;

vulkan_coopmat_route vulkan_coopmat_route_of(const vulkan_device_props *props);

/* ---- GEMM and grouped GEMM ---- */

typedef enum vulkan_gemm_kind { VULKAN_GEMM_SIMT, VULKAN_GEMM_COOPMAT } vulkan_gemm_kind;

/* A GEMM variant. simt (kernels/gemm.comp): a bm x bn x bk tile, tm x tn
 * outputs per invocation. coopmat (kernels/gemm_coopmat.comp): sg_m x sg_n
 * subgroups, each wm x wn 16x16 accumulators, bk deep. */
typedef struct vulkan_gemm_config {
  const char *name;
  vulkan_gemm_kind kind;
  uint32_t bm, bn, bk;
  uint32_t tm, tn;     /* simt */
  uint32_t sg_m, sg_n; /* coopmat */
  uint32_t wm, wn;     /* coopmat: 16x16 tiles per subgroup */
} vulkan_gemm_config;

/* One GEMM or grouped GEMM as the shaders see it. */
typedef struct vulkan_gemm_problem {
  const tsr_plugin_tensor *a, *b, *c, *bias, *d;
  int64_t m, n, k, batch; /* grouped: m is T (all rows), batch is G */
  bool grouped;
  const int64_t *group_sizes;
  float alpha, beta;
  int32_t activation;
  int32_t dtype; /* of a and b */
  bool out_f32;  /* d (and c, bias) f32 while a, b are 16-bit */
} vulkan_gemm_problem;

/* The variants that can run the problem, with the heuristic's pick, or
 * TSR_ERROR_UNSUPPORTED with the reason in `why`. */
tsr_status vulkan_gemm_variants(const vulkan_device_props *props, const vulkan_gemm_problem *g,
                                tsr_plugin_variant_list *out, char *why, size_t capacity);
/* The row named `name`, or NULL. */
const vulkan_gemm_config *vulkan_gemm_config_find(const char *name);
uint32_t vulkan_gemm_threads(const vulkan_gemm_config *c);
/* The grid of a config: M tiles (all groups' for grouped GEMM), N tiles,
 * batch. */
void vulkan_gemm_grid(const vulkan_gemm_problem *g, const vulkan_gemm_config *c, uint64_t grid[3]);

/* ---- attention ---- */

/* br query rows per workgroup, bc keys per block, head dims up to dp; tpr
 * invocations share rq rows (threads = br / rq * tpr). The GPU builds fix
 * bc at 32 (16 above dp 128): see attention.comp. coopmat: f16 on
 * cooperative matrices (attention_coopmat.comp), 4 subgroups of 32, 64 rows
 * and 64 keys per step (rq, tpr unused). */
typedef struct vulkan_attention_config {
  const char *name;
  uint32_t br, bc, dp, rq, tpr;
  bool coopmat;
} vulkan_attention_config;

tsr_status vulkan_attention_variants(const vulkan_device_props *props, const tsr_attention_args *a,
                                     tsr_plugin_variant_list *out, char *why, size_t capacity);
const vulkan_attention_config *vulkan_attention_config_find(const char *name);
uint32_t vulkan_attention_threads(const vulkan_attention_config *c);

#endif /* TESSERA_VULKAN_CONFIGS_H */
