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
  /* Decode heuristic (split-KV): key chunks per sequence so that B * Hkv *
   * row tiles * chunks reaches decode_per_unit workgroups per compute unit
   * (decode_units where the device does not say how many it has), each
   * chunk at least decode_min_chunk keys. */
  uint32_t decode_per_unit, decode_units, decode_min_chunk;
  /* At most this many keys per chunk (0: any): lavapipe ends every loop of an
   * invocation after 65535 iterations in all (see attention_decode.comp). */
  uint32_t decode_max_chunk;
  const char *kv_append; /* the kv_append variant picked */
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
 * and 64 keys per step (rq, tpr unused). decode: the split-KV path
 * (attention_decode.comp, then attention_combine.comp) with `splits` key
 * chunks per sequence (0: the heuristic's count); its head-dim capacity and
 * rows per workgroup follow the problem (vulkan_decode_plan). */
typedef struct vulkan_attention_config {
  const char *name;
  uint32_t br, bc, dp, rq, tpr;
  bool coopmat;
  bool decode;
  uint32_t splits;
} vulkan_attention_config;

/* An attention problem's extents, dense or serving: B, the heads, the head
 * dim and the query / key length bounds (dense: Sq and Skv), and its
 * layouts. */
typedef struct vulkan_attention_shape {
  int64_t batch, hq, hkv, dim, max_q, max_kv;
  bool serving; /* tsr_plugin_attention_is_serving */
  bool packed_q, packed_kv, paged;
} vulkan_attention_shape;

void vulkan_attention_shape_of(const tsr_attention_args *a, vulkan_attention_shape *out);

/* The decode path's launch geometry for a problem and a decode config:
 * head-dim capacity dp (64, 128, 256), rows per workgroup rt (4 or 8; the
 * build's KU keys per group per step with it), the rows of one kv head
 * (group * max_q) in row_tiles tiles, and the key chunks: splits (resolved)
 * of `chunk` keys. */
typedef struct vulkan_decode_plan {
  uint32_t dp, rt, rows, row_tiles;
  uint32_t splits, chunk;
} vulkan_decode_plan;

void vulkan_decode_plan_of(const vulkan_device_props *props, const vulkan_attention_shape *s,
                           const vulkan_attention_config *c, vulkan_decode_plan *out);

tsr_status vulkan_attention_variants(const vulkan_device_props *props, const tsr_attention_args *a,
                                     tsr_plugin_variant_list *out, char *why, size_t capacity);
const vulkan_attention_config *vulkan_attention_config_find(const char *name);
uint32_t vulkan_attention_threads(const vulkan_attention_config *c);

/* ---- kv_append ---- */

/* Invocations per workgroup (one element of k_new each). */
typedef struct vulkan_kv_append_config {
  const char *name;
  uint32_t threads;
} vulkan_kv_append_config;

void vulkan_kv_append_variants(const vulkan_device_props *props, tsr_plugin_variant_list *out);
const vulkan_kv_append_config *vulkan_kv_append_config_find(const char *name);

#endif /* TESSERA_VULKAN_CONFIGS_H */
