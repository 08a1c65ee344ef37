/* SPDX-License-Identifier: Apache-2.0 */
/* Every variant table of the OpenCL plugin and the heuristics that pick from
 * them (configs.c): the device classes that key the tables (vendor, type,
 * platform), the fused ops' work-group sizes, the GEMM tiles and the
 * attention tiles. Tables are arrays of named rows (the variant name first,
 * the name tuning databases store); the op families (ops*.c) plan the
 * problem, build and launch, and read the rows without deciding what runs.
 * Not installed. */
#ifndef TESSERA_OPENCL_CONFIGS_H
#define TESSERA_OPENCL_CONFIGS_H

#include <stdbool.h>
#include <stdint.h>

#include "opencl_internal.h"

/* ---- device classes ---- */

opencl_class opencl_class_of(const opencl_device_props *props);
/* "nvidia", "amd", "intel", "mali", "adreno", "cpu", "generic": the device's
 * arch in tsr_device_info and its tuning key. */
const char *opencl_class_name(opencl_class device_class);

static inline uint64_t opencl_ceil_div(uint64_t x, uint64_t y) {
  return (x + y - 1) / y;
}

/* ---- fused ops: row ops (norms, softmax, cross entropy), elementwise ---- */

/* A fused-op variant: work items per group. Row ops run one group per row
 * (each item keeping up to OPENCL_FUSED_MAX_ITEMS vector units of the row in
 * private memory, or streaming longer rows); elementwise ops run a
 * grid-stride loop. */
typedef struct opencl_fused_row {
  const char *name;
  uint32_t threads;
  const char *description;
} opencl_fused_row;

/* Row-op units a work item keeps in private memory at most; longer rows are
 * read again from memory (softmax then takes an online pass). */
enum { OPENCL_FUSED_MAX_ITEMS = 8 };

bool opencl_fused_is_row_op(tsr_op op);
/* Whether the device class has elementwise ops read 16-byte units (where
 * every tensor is dense and aligned). */
bool opencl_fused_elementwise_units(const opencl_device_props *props);
/* The variants the device class lists and the heuristic's pick for rows of
 * `n` elements read in units of `vec` (row ops); TSR_ERROR_UNSUPPORTED with
 * `why` when none fits the device. */
tsr_status opencl_fused_variants(const opencl_device_props *props, tsr_op op, int64_t n,
                                 uint32_t vec, tsr_plugin_variant_list *out, char *why,
                                 size_t capacity);
/* The row named `name` of the op's table (row ops or elementwise), or NULL. */
const opencl_fused_row *opencl_fused_row_find(tsr_op op, const char *name);

/* ---- GEMM and grouped GEMM ---- */

typedef enum opencl_gemm_kind { OPENCL_GEMM_TILE, OPENCL_GEMM_GEMV } opencl_gemm_kind;

typedef struct opencl_gemm_row {
  const char *name;
  opencl_gemm_kind kind;
  /* tile: BM x BN outputs per work-group, k step BK, TM x TN per work item,
   * two local stages (the next k tile fetched during this one's FMAs) */
  uint32_t bm, bn, bk, tm, tn;
  bool double_buffer;
  /* gemv: work items, and how many of them share a column along k when B
   * is contiguous along n (k_threads_n) or along k (k_threads_k) */
  uint32_t threads, k_threads_n, k_threads_k;
} opencl_gemm_row;

/* One GEMM or grouped GEMM as the kernels see it. */
typedef struct opencl_gemm_problem {
  const tsr_plugin_tensor *a, *b, *c, *bias, *d; /* c, bias NULL when absent */
  int64_t m, n, k, batch; /* grouped: m is T (all rows), batch the group count */
  bool grouped;
  const int64_t *group_sizes;
  float alpha, beta;
  int32_t activation, dtype;
  bool out_f32;
} opencl_gemm_problem;

/* The variants the device class lists that can run the problem, with the
 * heuristic's pick and reason; TSR_ERROR_UNSUPPORTED with `why` when none
 * fits the device. */
tsr_status opencl_gemm_variants(const opencl_device_props *props, const opencl_gemm_problem *g,
                                tsr_plugin_variant_list *out, char *why, size_t capacity);
/* The row named `name`, or NULL. */
const opencl_gemm_row *opencl_gemm_row_find(const char *name);
uint32_t opencl_gemm_row_threads(const opencl_gemm_row *row);
/* Whether the row fits the device's limits and takes the problem. */
bool opencl_gemm_row_takes(const opencl_device_props *props, const opencl_gemm_problem *g,
                           const opencl_gemm_row *row);
/* Work-groups per compute unit the device class wants (GEMV's K splits aim
 * at twice as many). */
uint32_t opencl_gemm_groups_per_unit(const opencl_device_props *props);

/* ---- attention ---- */

typedef enum opencl_attention_kind {
  OPENCL_ATTENTION_FLASH,
  OPENCL_ATTENTION_GENERIC,
  OPENCL_ATTENTION_DECODE
} opencl_attention_kind;

typedef struct opencl_attention_row {
  const char *name;
  opencl_attention_kind kind;
  /* flash: head dims up to dp; bq query rows and bkv keys per tile; tpr work
   * items share rq rows (bq / rq * tpr work items) */
  uint32_t dp, bq, bkv, rq, tpr;
  /* generic: work items (a power of two), output columns per work item */
  uint32_t threads, cpt;
  /* decode: key ranges at most (0: the heuristic's count) */
  uint32_t splits;
} opencl_attention_row;

/* One attention problem as the kernels see it. Serving problems
 * (tsr_plugin_attention_is_serving): batch is args->batch, sq and skv the
 * bounds max_seqlen_q / max_seqlen_kv, and the layout flags say which index
 * tensors there are; dense ones take the extents of q and k. */
typedef struct opencl_attention_problem {
  const tsr_attention_args *a;
  int64_t batch, sq, skv, hq, hkv, dim, group;
  bool lse;
  bool serving, packed_q, packed_kv, paged, seqlens, softcap;
} opencl_attention_problem;

/* The variants that can run the problem, with the heuristic's pick and
 * reason; TSR_ERROR_UNSUPPORTED with `why` when none fits the device. */
tsr_status opencl_attention_variants(const opencl_device_props *props,
                                     const opencl_attention_problem *g,
                                     tsr_plugin_variant_list *out, char *why, size_t capacity);
/* The row named `name`, or NULL. */
const opencl_attention_row *opencl_attention_row_find(const char *name);
uint32_t opencl_attention_row_threads(const opencl_attention_row *row);
/* Whether the row fits the device's limits and takes the problem. */
bool opencl_attention_row_takes(const opencl_device_props *props, const opencl_attention_problem *g,
                                const opencl_attention_row *row);
/* Work-groups along the first grid dimension, and in the whole grid (before
 * any key split); serving grids have at least one row of work-groups, which
 * check the sequences' indices when no sequence has a query row. */
uint64_t opencl_attention_row_groups(const opencl_attention_problem *g,
                                     const opencl_attention_row *row);
uint64_t opencl_attention_row_all_groups(const opencl_attention_problem *g,
                                         const opencl_attention_row *row);
/* Work-groups the device class wants in a grid, and in a grid whose keys
 * are split (decode). */
uint64_t opencl_attention_groups_wanted(const opencl_device_props *props);
uint64_t opencl_attention_split_groups_wanted(const opencl_device_props *props);

/* A decode row's plan for a problem (kernels/attention_decode.cl): head-dim
 * class dp, rt query rows per work-group (the GQA group's heads times the
 * positions, in row_tiles tiles), nb keys per lane group and step, the
 * work items, and the key split: `splits` ranges of `chunk` keys (1 and
 * the key bound: none). */
typedef struct opencl_attention_decode_plan {
  uint32_t dp, rt, nb, threads;
  uint32_t row_tiles;
  uint32_t splits, chunk;
  uint64_t local_bytes;
} opencl_attention_decode_plan;

/* Query rows per sequence the decode rows take at most. */
enum { OPENCL_ATTENTION_DECODE_MAX_Q = 16 };

/* The plan of a decode row, or false when it cannot run the problem on the
 * device (head dim above 256, more than 16 query rows per sequence, the
 * device's limits). */
bool opencl_attention_decode_plan_of(const opencl_device_props *props,
                                     const opencl_attention_problem *g,
                                     const opencl_attention_row *row,
                                     opencl_attention_decode_plan *out);

/* ---- kv_append ---- */

typedef struct opencl_kv_append_row {
  const char *name;
  uint32_t threads; /* work items per (row, head) pair */
} opencl_kv_append_row;

/* The variants, with the heuristic's pick (by the head dim); TSR_ERROR_
 * UNSUPPORTED with `why` when none fits the device. */
tsr_status opencl_kv_append_variants(const opencl_device_props *props, int64_t dim,
                                     tsr_plugin_variant_list *out, char *why, size_t capacity);
/* The row named `name` that fits the device, or NULL. */
const opencl_kv_append_row *opencl_kv_append_row_find(const opencl_device_props *props,
                                                      const char *name);

#endif /* TESSERA_OPENCL_CONFIGS_H */
