/* SPDX-License-Identifier: Apache-2.0 */
/* The variant tables and heuristics of the OpenCL plugin (configs.h): the
 * device classes, then per op family its rows, its per-class tables keyed
 * on the class (plus the device's compute units and local memory) and the
 * heuristic that picks from them. */
#include <stdio.h>
#include <string.h>

#include "configs.h"

/* ------------------------------------------------------------------------ */
/* Device classes                                                           */
/* ------------------------------------------------------------------------ */

static bool contains(const char *text, const char *word) {
  return strstr(text, word) != NULL;
}

opencl_class opencl_class_of(const opencl_device_props *p) {
  if (p->type & CL_DEVICE_TYPE_CPU)
    return OPENCL_CLASS_POCL_CPU;
  switch (p->vendor_id) {
  case 0x10de:
    return OPENCL_CLASS_NVIDIA;
  case 0x1002:
    return OPENCL_CLASS_AMD;
  case 0x8086:
    return OPENCL_CLASS_INTEL;
  case 0x13b5:
    return OPENCL_CLASS_MALI;
  case 0x5143:
    return OPENCL_CLASS_ADRENO;
  default:
    break;
  }
  /* Some drivers report PCI-less vendor ids: go by the names. */
  if (contains(p->name, "Mali") || contains(p->vendor, "ARM"))
    return OPENCL_CLASS_MALI;
  if (contains(p->name, "Adreno") || contains(p->vendor, "QUALCOMM"))
    return OPENCL_CLASS_ADRENO;
  if (contains(p->vendor, "NVIDIA"))
    return OPENCL_CLASS_NVIDIA;
  if (contains(p->vendor, "Advanced Micro Devices") || contains(p->vendor, "AMD"))
    return OPENCL_CLASS_AMD;
  if (contains(p->vendor, "Intel"))
    return OPENCL_CLASS_INTEL;
  return OPENCL_CLASS_GENERIC;
}

const char *opencl_class_name(opencl_class device_class) {
  static const char *const names[OPENCL_CLASS_COUNT] = {"generic", "nvidia", "amd", "intel",
                                                        "mali",    "adreno", "cpu"};
  return device_class < OPENCL_CLASS_COUNT ? names[device_class] : "generic";
}

/* The device's class as an index of the per-class tables. */
static opencl_class class_index(const opencl_device_props *p) {
  return p->device_class < OPENCL_CLASS_COUNT ? p->device_class : OPENCL_CLASS_GENERIC;
}

/* Whether a work-group of `threads` work items using `local_bytes` of local
 * memory fits the device's limits. */
static bool group_fits(const opencl_device_props *p, uint32_t threads, uint64_t local_bytes) {
  if (threads > p->max_work_group || threads > p->max_work_item[0])
    return false;
  return p->local_is_global || local_bytes <= p->local_memory_bytes;
}

static uint64_t compute_units_or_16(const opencl_device_props *p) {
  return p->compute_units ? p->compute_units : 16;
}

/* ------------------------------------------------------------------------ */
/* Fused ops (kernels/rows.cl, kernels/elementwise.cl)                      */
/* ------------------------------------------------------------------------ */

#define ROWS_UNITS " work items per row, up to 8 vector units each kept in private memory"
#define ELEMENTWISE_UNITS " work items per group in a grid-stride loop"
static const opencl_fused_row fused_rows_table[] = {
    {"rows_t16", 16, "16" ROWS_UNITS},      {"rows_t32", 32, "32" ROWS_UNITS},
    {"rows_t64", 64, "64" ROWS_UNITS},      {"rows_t128", 128, "128" ROWS_UNITS},
    {"rows_t256", 256, "256" ROWS_UNITS},   {"rows_t512", 512, "512" ROWS_UNITS},
    {"rows_t1024", 1024, "1024" ROWS_UNITS}};
static const opencl_fused_row fused_elementwise_table[] = {
    {"elementwise_t64", 64, "64" ELEMENTWISE_UNITS},
    {"elementwise_t128", 128, "128" ELEMENTWISE_UNITS},
    {"elementwise_t256", 256, "256" ELEMENTWISE_UNITS}};
enum {
  FUSED_ROWS = sizeof fused_rows_table / sizeof fused_rows_table[0],
  FUSED_ELEMENTWISE = sizeof fused_elementwise_table / sizeof fused_elementwise_table[0]
};

/* Per device class: the row-op group sizes listed (rows_min..rows_max), what
 * the row heuristic aims at, the elementwise pick, and whether elementwise
 * ops read 16-byte units. GPUs want wide groups to hide latency: about 16
 * elements per work item, as on the Vulkan plugin, in groups of at most 256
 * (NVIDIA's OpenCL reports CL_KERNEL_WORK_GROUP_SIZE 256 for these kernels
 * whatever their registers, and AMD's devices report 256 as their limit).
 * CPUs (PoCL) run a group as one thread's loop over its items, vectorised
 * across them, where every barrier costs a pass over the group: the fewest
 * items that still keep the row in private memory (a long softmax row
 * streamed costs twice the exps), and scalar elementwise code (units there
 * defeat the vectoriser: GELU ran at 60% of the scalar build's speed). */
typedef struct opencl_fused_class {
  uint32_t rows_min, rows_max;
  uint32_t row_elements; /* elements per work item aimed at; 0: fewest items that keep the row */
  const char *elementwise;
  bool elementwise_units;
} opencl_fused_class;

static const opencl_fused_class fused_classes[OPENCL_CLASS_COUNT] = {
    [OPENCL_CLASS_GENERIC] = {64, 256, 16, "elementwise_t128", true},
    [OPENCL_CLASS_NVIDIA] = {32, 256, 16, "elementwise_t256", true},
    [OPENCL_CLASS_AMD] = {64, 256, 16, "elementwise_t256", true},
    [OPENCL_CLASS_INTEL] = {64, 256, 16, "elementwise_t128", true},
    [OPENCL_CLASS_MALI] = {64, 256, 16, "elementwise_t128", true},
    [OPENCL_CLASS_ADRENO] = {64, 256, 16, "elementwise_t128", true},
    [OPENCL_CLASS_POCL_CPU] = {16, 256, 0, "elementwise_t64", false},
};

bool opencl_fused_is_row_op(tsr_op op) {
  return op == TSR_OP_RMSNORM || op == TSR_OP_LAYERNORM || op == TSR_OP_SOFTMAX ||
         op == TSR_OP_CROSS_ENTROPY;
}

static const opencl_fused_class *fused_class_of(const opencl_device_props *p) {
  return &fused_classes[class_index(p)];
}

bool opencl_fused_elementwise_units(const opencl_device_props *p) {
  return fused_class_of(p)->elementwise_units;
}

/* Whether the class lists row variant i on this device: its range, cut to
 * the device's group limit; a device whose limit is below the range gets
 * the largest size it allows. */
static bool fused_rows_listed(const opencl_device_props *p, int i) {
  const opencl_fused_class *c = fused_class_of(p);
  uint32_t threads = fused_rows_table[i].threads;
  if (threads > p->max_work_group)
    return false;
  if (p->max_work_group < c->rows_min)
    return i + 1 == FUSED_ROWS || fused_rows_table[i + 1].threads > p->max_work_group;
  return threads >= c->rows_min && threads <= c->rows_max;
}

/* The group size the class aims at for rows of n elements read in units of
 * `vec`: row_elements per work item, or (row_elements 0) the fewest items
 * that keep the row in private memory, the fewest of all when none can. */
static uint32_t fused_rows_want(const opencl_fused_class *c, int64_t n, uint32_t vec) {
  uint32_t want = c->rows_min;
  if (c->row_elements == 0) {
    int64_t units = (n + vec - 1) / vec;
    while (want < c->rows_max && (int64_t)want * OPENCL_FUSED_MAX_ITEMS < units)
      want *= 2;
    return (int64_t)want * OPENCL_FUSED_MAX_ITEMS < units ? c->rows_min : want;
  }
  while (want < c->rows_max && (int64_t)want * c->row_elements < n)
    want *= 2;
  return want;
}

/* The largest listed size up to `want` (the smallest listed when none is). */
static int fused_rows_pick(const opencl_device_props *p, uint32_t want) {
  int pick = -1;
  for (int i = 0; i < FUSED_ROWS; i++)
    if (fused_rows_listed(p, i) && (pick < 0 || fused_rows_table[i].threads <= want))
      pick = i;
  return pick;
}

static void fused_row_variants(const opencl_device_props *p, int64_t n, uint32_t vec,
                               tsr_plugin_variant_list *out) {
  const opencl_fused_class *c = fused_class_of(p);
  const char *class_name = opencl_class_name(p->device_class);
  int pick = fused_rows_pick(p, fused_rows_want(c, n, vec));
  for (int i = 0; i < FUSED_ROWS; i++) {
    if (!fused_rows_listed(p, i))
      continue;
    if (i == pick)
      out->heuristic = (int32_t)out->count;
    tsr_plugin_variants_add(out, fused_rows_table[i].name, "%s", fused_rows_table[i].description);
  }
  if (c->row_elements)
    snprintf(out->reason, sizeof out->reason,
             "%s table: about %u elements per work item for rows of %lld, within %u..%u",
             class_name, c->row_elements, (long long)n, c->rows_min, c->rows_max);
  else
    snprintf(out->reason, sizeof out->reason,
             "%s table: the fewest work items (%u..%u) keeping rows of %lld in private "
             "memory, %u-element units",
             class_name, c->rows_min, c->rows_max, (long long)n, vec);
}

static void fused_elementwise_variants(const opencl_device_props *p, tsr_plugin_variant_list *out) {
  const opencl_fused_class *c = fused_class_of(p);
  for (int i = 0; i < FUSED_ELEMENTWISE; i++) {
    if (fused_elementwise_table[i].threads > p->max_work_group)
      continue;
    if (strcmp(fused_elementwise_table[i].name, c->elementwise) == 0)
      out->heuristic = (int32_t)out->count;
    tsr_plugin_variants_add(out, fused_elementwise_table[i].name, "%s%s",
                            fused_elementwise_table[i].description,
                            c->elementwise_units ? ", 16-byte units when dense and aligned" : "");
  }
  snprintf(out->reason, sizeof out->reason, "%s table: %s", opencl_class_name(p->device_class),
           c->elementwise);
}

tsr_status opencl_fused_variants(const opencl_device_props *p, tsr_op op, int64_t n, uint32_t vec,
                                 tsr_plugin_variant_list *out, char *why, size_t capacity) {
  out->count = 0;
  out->heuristic = 0;
  if (opencl_fused_is_row_op(op))
    fused_row_variants(p, n, vec, out);
  else
    fused_elementwise_variants(p, out);
  if (out->count == 0) {
    snprintf(why, capacity, "no variant fits the device's %zu work items per group",
             p->max_work_group);
    return TSR_ERROR_UNSUPPORTED;
  }
  return TSR_OK;
}

const opencl_fused_row *opencl_fused_row_find(tsr_op op, const char *name) {
  if (opencl_fused_is_row_op(op))
    return tsr_plugin_row_find(fused_rows_table, FUSED_ROWS, sizeof fused_rows_table[0], name);
  return tsr_plugin_row_find(fused_elementwise_table, FUSED_ELEMENTWISE,
                             sizeof fused_elementwise_table[0], name);
}

/* ------------------------------------------------------------------------ */
/* GEMM and grouped GEMM (kernels/gemm.cl)                                  */
/* ------------------------------------------------------------------------ */

static const opencl_gemm_row gemm_rows[] = {
    {"tile_32x32x16_4x4", OPENCL_GEMM_TILE, 32, 32, 16, 4, 4, true, 0, 0, 0},
    {"tile_64x64x16_4x4", OPENCL_GEMM_TILE, 64, 64, 16, 4, 4, true, 0, 0, 0},
    {"tile_128x64x16_8x8", OPENCL_GEMM_TILE, 128, 64, 16, 8, 8, true, 0, 0, 0},
    {"tile_128x128x8_8x8", OPENCL_GEMM_TILE, 128, 128, 8, 8, 8, true, 0, 0, 0},
    {"tile_128x128x16_8x8", OPENCL_GEMM_TILE, 128, 128, 16, 8, 8, true, 0, 0, 0},
    {"gemv_t64", OPENCL_GEMM_GEMV, 0, 0, 0, 0, 0, false, 64, 1, 16},
    {"gemv_t256", OPENCL_GEMM_GEMV, 0, 0, 0, 0, 0, false, 256, 8, 32},
};
enum { GEMM_ROWS = sizeof gemm_rows / sizeof gemm_rows[0] };

/* GEMV takes problems of at most this many rows (all groups' rows when
 * grouped): every work item keeps a sum per row. */
enum { GEMM_GEMV_MAX_ROWS = 16 };

/* Per device class: the rows it lists, its GEMV row, and the tile orders
 * of the occupancy heuristic (largest first; the last is taken whatever the
 * count). PoCL runs a work-group as loops over its work items, vectorised
 * across them: 4x4 blocks beat 8x8 there (1024^3 f32 on 2 EPYC cores:
 * 64x64x16 4x4 27-34 GFLOP/s, 32x32x16 4x4 32-39, 128x64x16 8x8 24,
 * 128x128x8 8x8 3; CLBlast's SGEMM 24; k steps of 8 ran 2-5x slower). */
typedef struct gemm_class_row {
  const char *const *listed;
  const char *gemv;
  const char *const *occupancy;
  uint32_t groups_per_unit; /* work-groups wanted per compute unit */
} gemm_class_row;

static const char *const gemm_listed_cpu[] = {"tile_32x32x16_4x4", "tile_64x64x16_4x4", "gemv_t64",
                                              NULL};
static const char *const gemm_order_cpu[] = {"tile_64x64x16_4x4", "tile_32x32x16_4x4", NULL};
static const char *const gemm_listed_gpu[] = {
    "tile_32x32x16_4x4",   "tile_64x64x16_4x4", "tile_128x64x16_8x8", "tile_128x128x8_8x8",
    "tile_128x128x16_8x8", "gemv_t64",          "gemv_t256",          NULL};
/* H200 at 4096^3 f32: 128x128x8 36.2 TFLOP/s, 128x64x16 34.9, 128x128x16
 * 30.7, 64x64x16 27.9 (CLBlast's SGEMM 29.6) */
static const char *const gemm_order_gpu[] = {"tile_128x128x8_8x8", "tile_128x64x16_8x8",
                                             "tile_64x64x16_4x4", "tile_32x32x16_4x4", NULL};
/* embedded GPUs: small local memories, few compute units */
static const char *const gemm_order_mobile[] = {"tile_64x64x16_4x4", "tile_32x32x16_4x4", NULL};

static const gemm_class_row gemm_classes[OPENCL_CLASS_COUNT] = {
    [OPENCL_CLASS_GENERIC] = {gemm_listed_gpu, "gemv_t256", gemm_order_gpu, 2},
    [OPENCL_CLASS_NVIDIA] = {gemm_listed_gpu, "gemv_t256", gemm_order_gpu, 2},
    [OPENCL_CLASS_AMD] = {gemm_listed_gpu, "gemv_t256", gemm_order_gpu, 2},
    [OPENCL_CLASS_INTEL] = {gemm_listed_gpu, "gemv_t256", gemm_order_gpu, 2},
    [OPENCL_CLASS_MALI] = {gemm_listed_gpu, "gemv_t64", gemm_order_mobile, 2},
    [OPENCL_CLASS_ADRENO] = {gemm_listed_gpu, "gemv_t64", gemm_order_mobile, 2},
    [OPENCL_CLASS_POCL_CPU] = {gemm_listed_cpu, "gemv_t64", gemm_order_cpu, 4},
};

static const gemm_class_row *gemm_class_of(const opencl_device_props *props) {
  return &gemm_classes[class_index(props)];
}

uint32_t opencl_gemm_groups_per_unit(const opencl_device_props *props) {
  return gemm_class_of(props)->groups_per_unit;
}

const opencl_gemm_row *opencl_gemm_row_find(const char *name) {
  return tsr_plugin_row_find(gemm_rows, GEMM_ROWS, sizeof gemm_rows[0], name);
}

static bool name_listed(const char *const *names, const char *name) {
  for (; *names; names++)
    if (strcmp(*names, name) == 0)
      return true;
  return false;
}

uint32_t opencl_gemm_row_threads(const opencl_gemm_row *row) {
  if (row->kind == OPENCL_GEMM_TILE)
    return (row->bm / row->tm) * (row->bn / row->tn);
  return row->threads;
}

static uint64_t gemm_row_local_bytes(const opencl_gemm_row *row) {
  if (row->kind == OPENCL_GEMM_TILE)
    return 4ull * row->bk * (row->bm + row->bn) * (row->double_buffer ? 2 : 1);
  return 4096 * 4;
}

/* Work-groups of a tile row: for grouped GEMM, the most that group sizes of
 * this total can need (each group adds at most one partial tile), since the
 * listing sees the signature only. */
static uint64_t tile_groups_bound(const opencl_gemm_problem *g, const opencl_gemm_row *row) {
  uint64_t tn = opencl_ceil_div((uint64_t)g->n, row->bn);
  if (g->grouped) {
    uint64_t bound = ((uint64_t)g->m + (uint64_t)g->batch * (row->bm - 1)) / row->bm;
    uint64_t rows = (uint64_t)g->m; /* every tile has a row */
    return (bound < rows ? bound : rows) * tn;
  }
  return opencl_ceil_div((uint64_t)g->m, row->bm) * tn * (uint64_t)g->batch;
}

static bool gemm_row_fits(const opencl_device_props *props, const opencl_gemm_row *row) {
  return group_fits(props, opencl_gemm_row_threads(row), gemm_row_local_bytes(row));
}

static bool gemm_row_runs(const opencl_gemm_problem *g, const opencl_gemm_row *row) {
  /* Work-groups are numbered along one dimension; keep them within what
   * every runtime takes (2^31 - 1 blocks on NVIDIA's). */
  if (row->kind == OPENCL_GEMM_GEMV)
    return g->m <= GEMM_GEMV_MAX_ROWS;
  return tile_groups_bound(g, row) <= INT32_MAX;
}

bool opencl_gemm_row_takes(const opencl_device_props *props, const opencl_gemm_problem *g,
                           const opencl_gemm_row *row) {
  return gemm_row_fits(props, row) && gemm_row_runs(g, row);
}

/* The heuristic: GEMV for M <= 16; else the largest tile of the class's
 * order giving groups_per_unit work-groups per compute unit. */
static const char *gemm_pick(const opencl_device_props *props, const opencl_gemm_problem *g,
                             char *reason, size_t capacity) {
  const gemm_class_row *cls = gemm_class_of(props);
  if (g->m <= GEMM_GEMV_MAX_ROWS) {
    const opencl_gemm_row *row = opencl_gemm_row_find(cls->gemv);
    if (row && gemm_row_fits(props, row)) {
      snprintf(reason, capacity, "%s %lld <= %d: B streamed once", g->grouped ? "T" : "M",
               (long long)g->m, GEMM_GEMV_MAX_ROWS);
      return row->name;
    }
  }
  uint64_t want = cls->groups_per_unit * compute_units_or_16(props);
  const char *pick = NULL;
  for (const char *const *o = cls->occupancy; *o; o++) {
    const opencl_gemm_row *row = opencl_gemm_row_find(*o);
    if (!row || !opencl_gemm_row_takes(props, g, row))
      continue;
    pick = row->name;
    if (tile_groups_bound(g, row) >= want)
      break;
  }
  snprintf(reason, capacity, "the largest tile giving %llu work-groups (%u per compute unit)",
           (unsigned long long)want, cls->groups_per_unit);
  return pick;
}

static int gemm_row_add(tsr_plugin_variant_list *out, const opencl_gemm_row *row) {
  if (row->kind == OPENCL_GEMM_TILE)
    return tsr_plugin_variants_add(out, row->name,
                                   "local-memory tiles %ux%u, k step %u, %ux%u outputs per work "
                                   "item, %u work items, %s",
                                   row->bm, row->bn, row->bk, row->tm, row->tn,
                                   opencl_gemm_row_threads(row),
                                   row->double_buffer ? "two stages" : "one stage");
  return tsr_plugin_variants_add(out, row->name,
                                 "M <= %d: B streamed once by %u work items (%u or %u along k), "
                                 "K split into f32 scratch when columns do not fill the device",
                                 GEMM_GEMV_MAX_ROWS, row->threads, row->k_threads_n,
                                 row->k_threads_k);
}

tsr_status opencl_gemm_variants(const opencl_device_props *props, const opencl_gemm_problem *g,
                                tsr_plugin_variant_list *out, char *why, size_t capacity) {
  const gemm_class_row *cls = gemm_class_of(props);
  char reason[160];
  const char *pick = gemm_pick(props, g, reason, sizeof reason);
  out->count = 0;
  out->heuristic = 0;
  for (int i = 0; i < GEMM_ROWS; i++) {
    const opencl_gemm_row *row = &gemm_rows[i];
    if (!name_listed(cls->listed, row->name) || !opencl_gemm_row_takes(props, g, row))
      continue;
    int index = gemm_row_add(out, row);
    if (index >= 0 && pick && strcmp(row->name, pick) == 0)
      out->heuristic = index;
  }
  if (out->count == 0) {
    snprintf(why, capacity, "no GEMM variant fits %s's limits (%zu work items, %llu B local)",
             props->name, props->max_work_group, (unsigned long long)props->local_memory_bytes);
    return TSR_ERROR_UNSUPPORTED;
  }
  snprintf(out->reason, sizeof out->reason, "%s: %s", reason, out->variants[out->heuristic].name);
  return TSR_OK;
}

/* ------------------------------------------------------------------------ */
/* Attention (kernels/attention.cl)                                         */
/* ------------------------------------------------------------------------ */

static const opencl_attention_row attention_rows[] = {
    {"flash_d64_q32_k32", OPENCL_ATTENTION_FLASH, 64, 32, 32, 4, 8, 0, 0, 0},
    {"flash_d64_q64_k32", OPENCL_ATTENTION_FLASH, 64, 64, 32, 4, 8, 0, 0, 0},
    {"flash_d128_q16_k16", OPENCL_ATTENTION_FLASH, 128, 16, 16, 2, 8, 0, 0, 0},
    {"flash_d128_q16_k32", OPENCL_ATTENTION_FLASH, 128, 16, 32, 2, 8, 0, 0, 0},
    {"flash_d128_q32_k32", OPENCL_ATTENTION_FLASH, 128, 32, 32, 2, 8, 0, 0, 0},
    {"flash_d256_q8_k16", OPENCL_ATTENTION_FLASH, 256, 8, 16, 2, 16, 0, 0, 0},
    {"flash_d256_q16_k16", OPENCL_ATTENTION_FLASH, 256, 16, 16, 2, 16, 0, 0, 0},
    /* few rows (decode): a row per work item row-group */
    {"flash_d64_q8_k32", OPENCL_ATTENTION_FLASH, 64, 8, 32, 1, 8, 0, 0, 0},
    {"flash_d128_q8_k32", OPENCL_ATTENTION_FLASH, 128, 8, 32, 1, 8, 0, 0, 0},
    {"flash_d256_q4_k16", OPENCL_ATTENTION_FLASH, 256, 4, 16, 1, 16, 0, 0, 0},
    {"generic_t64", OPENCL_ATTENTION_GENERIC, 0, 0, 0, 0, 0, 64, 4, 0},
    {"generic_t128", OPENCL_ATTENTION_GENERIC, 0, 0, 0, 0, 0, 128, 4, 0},
    /* split-KV decode (kernels/attention_decode.cl): the key ranges by the
     * heuristic, or at most N of them */
    {"decode_split_auto", OPENCL_ATTENTION_DECODE, 0, 0, 0, 0, 0, 0, 0, 0},
    {"decode_split1", OPENCL_ATTENTION_DECODE, 0, 0, 0, 0, 0, 0, 0, 1},
    {"decode_split2", OPENCL_ATTENTION_DECODE, 0, 0, 0, 0, 0, 0, 0, 2},
    {"decode_split4", OPENCL_ATTENTION_DECODE, 0, 0, 0, 0, 0, 0, 0, 4},
    {"decode_split8", OPENCL_ATTENTION_DECODE, 0, 0, 0, 0, 0, 0, 0, 8},
    {"decode_split16", OPENCL_ATTENTION_DECODE, 0, 0, 0, 0, 0, 0, 0, 16},
    {"decode_split32", OPENCL_ATTENTION_DECODE, 0, 0, 0, 0, 0, 0, 0, 32},
    {"decode_split64", OPENCL_ATTENTION_DECODE, 0, 0, 0, 0, 0, 0, 0, 64},
};
enum { ATTENTION_ROWS = sizeof attention_rows / sizeof attention_rows[0] };

/* Per device class: the flash rows in the heuristic's order, largest tile
 * first (attention_pick), the generic row for head dims above 256, and the
 * work-groups per compute unit wanted. CPUs run a work-group as one
 * thread's loop over its work items: a few fat work-groups per core do. */
typedef struct attention_class_row {
  const char *const *order;
  const char *generic;
  uint32_t groups_per_unit;
  /* work-groups per compute unit a key split aims at: decode is bound by
   * memory, and GPUs need many loads in flight to reach its bandwidth */
  uint32_t split_groups_per_unit;
  /* the decode kernel: work items, work-groups per compute unit its key
   * split aims at (ranges of at least decode_min_chunk keys; many small
   * ranges also even out sequences of different lengths), and the query
   * rows per key/value head up to which the heuristic picks it */
  uint32_t decode_threads, decode_groups_per_unit, decode_min_chunk, decode_max_rows;
} attention_class_row;

static const char *const attention_order_gpu[] = {"flash_d64_q64_k32",
                                                  "flash_d64_q32_k32",
                                                  "flash_d64_q8_k32",
                                                  "flash_d128_q32_k32",
                                                  "flash_d128_q16_k32",
                                                  "flash_d128_q16_k16",
                                                  "flash_d128_q8_k32",
                                                  "flash_d256_q16_k16",
                                                  "flash_d256_q8_k16",
                                                  "flash_d256_q4_k16",
                                                  NULL};
/* embedded GPUs: 32 KiB of local memory or less, few compute units */
static const char *const attention_order_mobile[] = {"flash_d64_q32_k32",
                                                     "flash_d64_q8_k32",
                                                     "flash_d128_q16_k16",
                                                     "flash_d128_q8_k32",
                                                     "flash_d256_q8_k16",
                                                     "flash_d256_q4_k16",
                                                     NULL};
static const char *const attention_order_cpu[] = {"flash_d64_q64_k32",  "flash_d64_q32_k32",
                                                  "flash_d64_q8_k32",   "flash_d128_q32_k32",
                                                  "flash_d128_q16_k32", "flash_d128_q8_k32",
                                                  "flash_d256_q16_k16", "flash_d256_q8_k16",
                                                  "flash_d256_q4_k16",  NULL};

static const attention_class_row attention_classes[OPENCL_CLASS_COUNT] = {
    [OPENCL_CLASS_GENERIC] = {attention_order_gpu, "generic_t128", 2, 8, 128, 16, 256, 32},
    [OPENCL_CLASS_NVIDIA] = {attention_order_gpu, "generic_t128", 2, 8, 128, 16, 256, 32},
    [OPENCL_CLASS_AMD] = {attention_order_gpu, "generic_t128", 2, 8, 128, 16, 256, 32},
    [OPENCL_CLASS_INTEL] = {attention_order_gpu, "generic_t128", 2, 8, 128, 16, 256, 32},
    [OPENCL_CLASS_MALI] = {attention_order_mobile, "generic_t64", 2, 4, 64, 4, 256, 32},
    [OPENCL_CLASS_ADRENO] = {attention_order_mobile, "generic_t64", 2, 4, 64, 4, 256, 32},
    /* PoCL keeps each work item's values live across barriers in memory:
     * fewer work items per group, and decode only for one or two rows per
     * key/value head (bf16, D 128, paged: 2x the flash tile's rate for one
     * row, 2.7x slower for four, 4x for sixteen) */
    [OPENCL_CLASS_POCL_CPU] = {attention_order_cpu, "generic_t64", 2, 2, 64, 2, 512, 2},
};

static const attention_class_row *attention_class_of(const opencl_device_props *props) {
  return &attention_classes[class_index(props)];
}

uint64_t opencl_attention_groups_wanted(const opencl_device_props *props) {
  return attention_class_of(props)->groups_per_unit * compute_units_or_16(props);
}

uint64_t opencl_attention_split_groups_wanted(const opencl_device_props *props) {
  return attention_class_of(props)->split_groups_per_unit * compute_units_or_16(props);
}

const opencl_attention_row *opencl_attention_row_find(const char *name) {
  return tsr_plugin_row_find(attention_rows, ATTENTION_ROWS, sizeof attention_rows[0], name);
}

/* The smallest flash head-dim class holding `dim`, or 0 above 256. */
static uint32_t dim_class(int64_t dim) {
  return dim <= 64 ? 64 : dim <= 128 ? 128 : dim <= 256 ? 256 : 0;
}

uint32_t opencl_attention_row_threads(const opencl_attention_row *row) {
  return row->kind == OPENCL_ATTENTION_FLASH ? row->bq / row->rq * row->tpr : row->threads;
}

/* Local memory of a flash or generic row, with what a paged build adds (the
 * key rows of a tile or chunk) and the sequence check's flag. */
static uint64_t attention_row_local_bytes(const opencl_attention_row *row) {
  if (row->kind == OPENCL_ATTENTION_GENERIC)
    return 16ull * row->threads + 16;
  /* q and k/v tiles in float4 rows padded by one, then the probabilities */
  return 16ull * (row->bq + row->bkv) * (row->dp / 4 + 1) + 4ull * row->bq * row->bkv +
         16ull * row->bkv + 16;
}

/* Query rows a (batch, key/value head) has at most: the positions times
 * the GQA group; serving grids have at least one (every sequence's indices
 * are checked even when no sequence has a query row). */
static uint64_t attention_packed_rows(const opencl_attention_problem *g) {
  uint64_t rows = (uint64_t)g->sq * (uint64_t)g->group;
  return g->serving && rows == 0 ? 1 : rows;
}

/* Decode: rows per work-group, the smallest of 1, 2, 4, 8 that holds a
 * (batch, key/value head)'s rows, else 8 in several tiles. */
static uint32_t decode_rows_per_tile(const opencl_attention_problem *g) {
  uint64_t rows = attention_packed_rows(g);
  return rows <= 1 ? 1 : rows <= 2 ? 2 : rows <= 4 ? 4 : 8;
}

uint64_t opencl_attention_row_groups(const opencl_attention_problem *g,
                                     const opencl_attention_row *row) {
  if (row->kind == OPENCL_ATTENTION_GENERIC)
    return g->serving && g->sq == 0 ? 1 : (uint64_t)g->sq;
  if (row->kind == OPENCL_ATTENTION_DECODE)
    return opencl_ceil_div(attention_packed_rows(g), decode_rows_per_tile(g));
  return opencl_ceil_div(attention_packed_rows(g), row->bq);
}

uint64_t opencl_attention_row_all_groups(const opencl_attention_problem *g,
                                         const opencl_attention_row *row) {
  return opencl_attention_row_groups(g, row) *
         (uint64_t)(row->kind == OPENCL_ATTENTION_GENERIC ? g->hq : g->hkv) * (uint64_t)g->batch;
}

/* Decode key splits: ranges a multiple of 64 keys (at least 64 for a fixed
 * count), at most 128 of them, their partial rows at most 256 MiB of
 * scratch. */
enum { DECODE_CHUNK_ROUND = 64, DECODE_SPLIT_MAX = 128 };
#define DECODE_SPLIT_MAX_BYTES ((uint64_t)256 << 20)

bool opencl_attention_decode_plan_of(const opencl_device_props *props,
                                     const opencl_attention_problem *g,
                                     const opencl_attention_row *row,
                                     opencl_attention_decode_plan *out) {
  uint32_t dp = dim_class(g->dim);
  if (row->kind != OPENCL_ATTENTION_DECODE || !dp || g->sq > OPENCL_ATTENTION_DECODE_MAX_Q ||
      props->decode_miscompiled)
    return false;
  const attention_class_row *cls = attention_class_of(props);
  opencl_attention_decode_plan plan;
  plan.dp = dp;
  plan.rt = decode_rows_per_tile(g);
  plan.nb = plan.rt >= 8 ? 1 : plan.rt >= 4 ? 2 : 4; /* registers: q, outputs, K/V words */
  plan.threads = cls->decode_threads;
  uint32_t lanes = dp / 8, groups = plan.threads / lanes;
  /* outputs of every lane group, their maxima and sums, the lane sums */
  plan.local_bytes = 4ull * ((uint64_t)plan.threads * plan.rt * 8 + 2ull * groups * plan.rt +
                             (uint64_t)groups * plan.nb * plan.rt) +
                     4;
  if (groups == 0 || !group_fits(props, plan.threads, plan.local_bytes))
    return false;
  uint64_t tiles = opencl_attention_row_groups(g, row);
  uint64_t keys = (uint64_t)g->skv, splits, min_chunk = DECODE_CHUNK_ROUND;
  if (row->splits) {
    splits = row->splits;
  } else {
    uint64_t base = (uint64_t)g->batch * (uint64_t)g->hkv * tiles;
    splits =
        base ? opencl_ceil_div(cls->decode_groups_per_unit * compute_units_or_16(props), base) : 1;
    min_chunk = cls->decode_min_chunk;
  }
  uint64_t most = opencl_ceil_div(keys, min_chunk);
  if (splits > most)
    splits = most;
  if (splits > DECODE_SPLIT_MAX)
    splits = DECODE_SPLIT_MAX;
  uint64_t chunk = 0;
  if (splits > 1) {
    chunk = opencl_ceil_div(opencl_ceil_div(keys, splits), DECODE_CHUNK_ROUND) * DECODE_CHUNK_ROUND;
    splits = opencl_ceil_div(keys, chunk);
  }
  uint64_t part_rows = (uint64_t)g->batch * (uint64_t)g->hq * (uint64_t)g->sq;
  if (splits > 1 && ((splits * part_rows * ((uint64_t)g->dim + 2) + 4ull * (uint64_t)g->batch) * 4 >
                         DECODE_SPLIT_MAX_BYTES ||
                     part_rows * 64 > UINT32_MAX))
    splits = 1;
  if (splits <= 1) {
    splits = 1;
    chunk = keys ? keys : 1;
  }
  if (splits * tiles * plan.threads > UINT32_MAX)
    return false;
  plan.row_tiles = (uint32_t)tiles;
  plan.splits = (uint32_t)splits;
  plan.chunk = (uint32_t)chunk;
  *out = plan;
  return true;
}

static bool attention_row_fits(const opencl_device_props *props, const opencl_attention_row *row) {
  return group_fits(props, opencl_attention_row_threads(row), attention_row_local_bytes(row));
}

/* Whether the row takes the problem: flash rows up to their head dim, and a
 * first grid dimension of at most 2^32 - 1 work items (what every runtime
 * takes). */
static bool attention_row_runs(const opencl_attention_problem *g, const opencl_attention_row *row) {
  if (row->kind == OPENCL_ATTENTION_FLASH && (uint64_t)g->dim > row->dp)
    return false;
  return opencl_attention_row_groups(g, row) * opencl_attention_row_threads(row) <= UINT32_MAX;
}

bool opencl_attention_row_takes(const opencl_device_props *props, const opencl_attention_problem *g,
                                const opencl_attention_row *row) {
  if (row->kind == OPENCL_ATTENTION_DECODE) {
    /* a fixed count is listed where the keys allow that many ranges */
    opencl_attention_decode_plan plan;
    return opencl_attention_decode_plan_of(props, g, row, &plan) &&
           (row->splits <= 1 ||
            row->splits <= opencl_ceil_div((uint64_t)g->skv, DECODE_CHUNK_ROUND));
  }
  return attention_row_fits(props, row) && attention_row_runs(g, row);
}

static int attention_row_add(const opencl_device_props *props, const opencl_attention_problem *g,
                             tsr_plugin_variant_list *out, const opencl_attention_row *row) {
  if (row->kind == OPENCL_ATTENTION_FLASH)
    return tsr_plugin_variants_add(
        out, row->name,
        "online softmax: %u query rows (GQA heads packed) x %u keys per tile, head dim <= %u, "
        "%u rows per %u work items, %u work items, %llu B local, keys split when few groups",
        row->bq, row->bkv, row->dp, row->rq, row->tpr, opencl_attention_row_threads(row),
        (unsigned long long)attention_row_local_bytes(row));
  if (row->kind == OPENCL_ATTENTION_DECODE) {
    opencl_attention_decode_plan plan;
    if (!opencl_attention_decode_plan_of(props, g, row, &plan))
      return -1;
    return tsr_plugin_variants_add(
        out, row->name,
        "split-KV decode: %u query rows (GQA heads packed) per work-group of %u, head dim <= %u, "
        "keys in %u ranges of %u (%s)%s",
        plan.rt, plan.threads, plan.dp, plan.splits, plan.chunk,
        row->splits ? "at most the count named" : "from B * Hkv, the key bound, compute units",
        plan.splits > 1 ? ", merged by a second kernel" : "");
  }
  return tsr_plugin_variants_add(out, row->name,
                                 "a work-group of %u work items per query row, any head dim (%u "
                                 "columns per pass and work item), keys in chunks of %u",
                                 row->threads, row->cpt, row->threads);
}

/* The heuristic. Few query rows (max_seqlen_q <= 16, at most
 * decode_max_rows per key/value head): split-KV decode, its key ranges by
 * the decode heuristic. Otherwise over the flash rows of the problem's head-dim class
 * in the class's order: the first (largest) tile at least half filled by
 * the rows of a (batch, key/value head) that gives groups_per_unit
 * work-groups per compute unit; else the largest half filled (its keys
 * split to fill the device); else the fullest (decode without GQA: one row
 * per head). The generic row above 256, or when no flash row fits the
 * device. */
static const opencl_attention_row *attention_pick(const opencl_device_props *props,
                                                  const opencl_attention_problem *g, char *reason,
                                                  size_t capacity) {
  const attention_class_row *cls = attention_class_of(props);
  uint32_t dp = dim_class(g->dim);
  uint64_t want = opencl_attention_groups_wanted(props);
  uint64_t packed = (uint64_t)g->sq * (uint64_t)g->group; /* rows per (batch, kv head) */
  const opencl_attention_row *decode = opencl_attention_row_find("decode_split_auto");
  opencl_attention_decode_plan plan;
  if (decode && packed <= cls->decode_max_rows &&
      opencl_attention_decode_plan_of(props, g, decode, &plan)) {
    snprintf(reason, capacity,
             "few query rows (%lld per sequence, %llu per key/value head): split-KV decode, %u "
             "key ranges of %u keys (%llu x %u work-groups, %llu compute units)",
             (long long)g->sq, (unsigned long long)packed, plan.splits, plan.chunk,
             (unsigned long long)(g->batch * g->hkv), plan.row_tiles,
             (unsigned long long)compute_units_or_16(props));
    return decode;
  }
  const opencl_attention_row *pick = NULL, *largest_half = NULL, *fullest = NULL;
  double best_fill = -1.0;
  for (const char *const *o = cls->order; dp && *o; o++) {
    const opencl_attention_row *row = opencl_attention_row_find(*o);
    if (!row || row->dp != dp || !opencl_attention_row_takes(props, g, row))
      continue;
    uint64_t capacity_rows = opencl_attention_row_groups(g, row) * row->bq;
    double fill = capacity_rows ? (double)packed / (double)capacity_rows : 0.0;
    if (fill > best_fill) {
      best_fill = fill;
      fullest = row;
    }
    if (packed * 2 < capacity_rows)
      continue;
    if (!largest_half)
      largest_half = row;
    if (opencl_attention_row_all_groups(g, row) >= want) {
      pick = row;
      break;
    }
  }
  const char *rule = "the largest tile at least half full giving the work-groups wanted";
  if (!pick) {
    rule = largest_half ? "the largest tile at least half full, too few work-groups"
                        : "the fullest tile, none half full";
    pick = largest_half ? largest_half : fullest;
  }
  if (pick) {
    snprintf(reason, capacity,
             "%s (head dim %lld in class %u, %llu rows per key/value head, %llu work-groups "
             "wanted)",
             rule, (long long)g->dim, dp, (unsigned long long)packed, (unsigned long long)want);
    return pick;
  }
  snprintf(reason, capacity, "%s", dp ? "no flash tile fits this device" : "head dim above 256");
  const opencl_attention_row *row = opencl_attention_row_find(cls->generic);
  if (row && opencl_attention_row_takes(props, g, row))
    return row;
  for (int i = 0; i < ATTENTION_ROWS; i++) {
    row = &attention_rows[i];
    if (row->kind == OPENCL_ATTENTION_GENERIC && opencl_attention_row_takes(props, g, row))
      return row;
  }
  return NULL;
}

tsr_status opencl_attention_variants(const opencl_device_props *props,
                                     const opencl_attention_problem *g,
                                     tsr_plugin_variant_list *out, char *why, size_t capacity) {
  char reason[200];
  const opencl_attention_row *pick = attention_pick(props, g, reason, sizeof reason);
  out->count = 0;
  out->heuristic = 0;
  for (int i = 0; i < ATTENTION_ROWS; i++) {
    const opencl_attention_row *row = &attention_rows[i];
    if (!opencl_attention_row_takes(props, g, row))
      continue;
    int index = attention_row_add(props, g, out, row);
    if (index >= 0 && row == pick)
      out->heuristic = index;
  }
  if (out->count == 0) {
    snprintf(why, capacity,
             "no attention variant fits %s's limits (%zu work items, %llu B local) for Sq %lld",
             props->name, props->max_work_group, (unsigned long long)props->local_memory_bytes,
             (long long)g->sq);
    return TSR_ERROR_UNSUPPORTED;
  }
  snprintf(out->reason, sizeof out->reason, "%s: %s", reason, out->variants[out->heuristic].name);
  return TSR_OK;
}

/* ------------------------------------------------------------------------ */
/* kv_append (kernels/kv_append.cl)                                         */
/* ------------------------------------------------------------------------ */

static const opencl_kv_append_row kv_append_rows[] = {
    {"kv_append_t64", 64},
    {"kv_append_t128", 128},
};
enum { KV_APPEND_ROWS = sizeof kv_append_rows / sizeof kv_append_rows[0] };

const opencl_kv_append_row *opencl_kv_append_row_find(const opencl_device_props *props,
                                                      const char *name) {
  const opencl_kv_append_row *row =
      tsr_plugin_row_find(kv_append_rows, KV_APPEND_ROWS, sizeof kv_append_rows[0], name);
  return row && group_fits(props, row->threads, 0) ? row : NULL;
}

/* The heuristic: a work item per element of the head dim, up to 128. */
tsr_status opencl_kv_append_variants(const opencl_device_props *props, int64_t dim,
                                     tsr_plugin_variant_list *out, char *why, size_t capacity) {
  out->count = 0;
  out->heuristic = 0;
  const char *pick = NULL;
  for (int i = 0; i < KV_APPEND_ROWS; i++) {
    const opencl_kv_append_row *row = &kv_append_rows[i];
    if (!group_fits(props, row->threads, 0))
      continue;
    int index = tsr_plugin_variants_add(out, row->name,
                                        "a work-group of %u work items per (row, head), copying "
                                        "the head dim as stored",
                                        row->threads);
    if (index >= 0 && (!pick || dim > (int64_t)kv_append_rows[i - 1].threads)) {
      out->heuristic = index;
      pick = row->name;
    }
  }
  if (out->count == 0) {
    snprintf(why, capacity, "no kv_append variant fits %s's limits (%zu work items)", props->name,
             props->max_work_group);
    return TSR_ERROR_UNSUPPORTED;
  }
  snprintf(out->reason, sizeof out->reason, "head dim %lld: %s", (long long)dim,
           out->variants[out->heuristic].name);
  return TSR_OK;
}
