/* SPDX-License-Identifier: Apache-2.0 */
/* The Vulkan plugin's variant tables and heuristics (configs.h): named rows,
 * one table per op family, and per device class the rows it lists and the
 * heuristic's parameters.
 *
 * Row ops run one workgroup per row; its size is the tile parameter: wide
 * enough that each invocation keeps a few 4-element units of the row in
 * registers (one read of memory), small enough that several workgroups share
 * a compute unit. lavapipe runs a workgroup's invocations as SIMD lanes of
 * one CPU thread, so it prefers small workgroups (fewer barrier round trips)
 * and few, fat GEMM invocations; GPUs want 256 and up. Notes and figures:
 * docs/PERFORMANCE.md. */
#include "configs.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Device classes                                                            */
/* ------------------------------------------------------------------------ */

typedef enum config_class {
  CLASS_LAVAPIPE,   /* Mesa's CPU implementation (CI) */
  CLASS_NVIDIA,     /* subgroup 32, 48 KiB shared memory per workgroup */
  CLASS_AMD_WAVE32, /* RDNA: subgroups of 32 allowed */
  CLASS_AMD_WAVE64, /* GCN / CDNA: subgroups of 64 only */
  CLASS_INTEL,
  CLASS_GENERIC,
  CLASS_COUNT_
} config_class;

static const char *const simt_lavapipe[] = {"simt_32x32x16_4x4", "simt_64x64x16_4x4",
                                            "simt_64x64x16_8x8", NULL};
static const char *const simt_gpu[] = {"simt_64x64x16_4x4",   "simt_64x64x16_8x8",
                                       "simt_128x64x16_8x8",  "simt_128x128x8_8x8",
                                       "simt_128x128x16_8x8", NULL};
static const char *const simt_intel[] = {"simt_64x64x16_4x4", "simt_64x64x16_8x8",
                                         "simt_128x64x16_8x8", "simt_128x128x8_8x8", NULL};
static const char *const simt_generic[] = {"simt_32x32x16_4x4",  "simt_64x64x16_4x4",
                                           "simt_64x64x16_8x8",  "simt_128x64x16_8x8",
                                           "simt_128x128x8_8x8", NULL};

static const vulkan_class_row class_rows[CLASS_COUNT_] = {
    [CLASS_LAVAPIPE] = {.name = "lavapipe",
                        .rows_min = 64,
                        .rows_max = 256,
                        .elementwise = "elementwise_t64",
                        .gemm_simt = simt_lavapipe,
                        .gemm_small = "simt_32x32x16_4x4",
                        .gemm_large = "simt_64x64x16_8x8",
                        .gemm_large_outputs = 16384,
                        .attention_threads = 64,
                        .attention_threads_only = true,
                        .decode_per_unit = 2,
                        .decode_units = 8,
                        .decode_min_chunk = 256,
                        .decode_max_chunk = 1024,
                        .kv_append = "kv_append_t64"},
    [CLASS_NVIDIA] = {.name = "nvidia",
                      .rows_min = 128,
                      .rows_max = 1024,
                      .elementwise = "elementwise_t256",
                      .gemm_simt = simt_gpu,
                      .attention_threads = 128,
                      .decode_per_unit = 16,
                      .decode_units = 32,
                      .decode_min_chunk = 256,
                      .kv_append = "kv_append_t256"},
    [CLASS_AMD_WAVE32] = {.name = "amd-wave32",
                          .rows_min = 128,
                          .rows_max = 1024,
                          .elementwise = "elementwise_t256",
                          .gemm_simt = simt_gpu,
                          .attention_threads = 128,
                          .decode_per_unit = 16,
                          .decode_units = 32,
                          .decode_min_chunk = 256,
                          .kv_append = "kv_append_t256"},
    [CLASS_AMD_WAVE64] = {.name = "amd-wave64",
                          .rows_min = 64,
                          .rows_max = 1024,
                          .elementwise = "elementwise_t256",
                          .gemm_simt = simt_gpu,
                          .attention_threads = 128,
                          .decode_per_unit = 16,
                          .decode_units = 32,
                          .decode_min_chunk = 256,
                          .kv_append = "kv_append_t256"},
    [CLASS_INTEL] = {.name = "intel",
                     .rows_min = 64,
                     .rows_max = 512,
                     .elementwise = "elementwise_t128",
                     .gemm_simt = simt_intel,
                     .attention_threads = 128,
                     .decode_per_unit = 16,
                     .decode_units = 32,
                     .decode_min_chunk = 256,
                     .kv_append = "kv_append_t256"},
    [CLASS_GENERIC] = {.name = "generic",
                       .rows_min = 64,
                       .rows_max = 256,
                       .elementwise = "elementwise_t128",
                       .gemm_simt = simt_generic,
                       .attention_threads = 128,
                       .decode_per_unit = 16,
                       .decode_units = 32,
                       .decode_min_chunk = 256,
                       .kv_append = "kv_append_t256"}};

const vulkan_class_row *vulkan_class_of(const vulkan_device_props *p) {
  if (p->type == VK_PHYSICAL_DEVICE_TYPE_CPU)
    return &class_rows[CLASS_LAVAPIPE];
  switch (p->vendor_id) {
  case VULKAN_VENDOR_NVIDIA:
    return &class_rows[CLASS_NVIDIA];
  case VULKAN_VENDOR_AMD:
    return &class_rows[p->subgroup_min <= 32 ? CLASS_AMD_WAVE32 : CLASS_AMD_WAVE64];
  case VULKAN_VENDOR_INTEL:
    return &class_rows[CLASS_INTEL];
  default:
    return &class_rows[CLASS_GENERIC];
  }
}

static bool name_listed(const char *const *names, const char *name) {
  for (; *names; names++)
    if (strcmp(*names, name) == 0)
      return true;
  return false;
}

const char *vulkan_dtype_suffix(int32_t dtype) {
  switch (dtype) {
  case TSR_DTYPE_F32:
    return "f32";
  case TSR_DTYPE_F16:
    return "f16";
  case TSR_DTYPE_BF16:
    return "bf16";
  default:
    return NULL;
  }
}

/* ------------------------------------------------------------------------ */
/* Fused ops                                                                 */
/* ------------------------------------------------------------------------ */

/* Every config any class may list; each class's row picks from these. */
#define ROWS_UNITS " invocations per row, up to 8 16-byte units each in registers"
#define ELEMENTWISE_UNITS " invocations per workgroup, 4 elements each when contiguous and aligned"
static const vulkan_fused_config rows_configs[] = {{"rows_t64", 64, "64" ROWS_UNITS},
                                                   {"rows_t128", 128, "128" ROWS_UNITS},
                                                   {"rows_t256", 256, "256" ROWS_UNITS},
                                                   {"rows_t512", 512, "512" ROWS_UNITS},
                                                   {"rows_t1024", 1024, "1024" ROWS_UNITS}};
static const vulkan_fused_config elementwise_configs[] = {
    {"elementwise_t64", 64, "64" ELEMENTWISE_UNITS},
    {"elementwise_t128", 128, "128" ELEMENTWISE_UNITS},
    {"elementwise_t256", 256, "256" ELEMENTWISE_UNITS}};
enum { ROWS_CONFIGS = 5, ELEMENTWISE_CONFIGS = 3 };

bool vulkan_is_row_op(tsr_op op) {
  return op == TSR_OP_RMSNORM || op == TSR_OP_LAYERNORM || op == TSR_OP_SOFTMAX ||
         op == TSR_OP_CROSS_ENTROPY;
}

/* Rows: about 16 elements per invocation (four vector units), within the
 * class's range and the device's workgroup limit. */
static int rows_pick(const vulkan_device_props *p, int64_t n) {
  const vulkan_class_row *t = vulkan_class_of(p);
  uint32_t want = t->rows_min;
  while (want < t->rows_max && (int64_t)want * 16 < n)
    want *= 2;
  int pick = 0;
  for (int i = 0; i < ROWS_CONFIGS; i++)
    if (rows_configs[i].threads <= want && rows_configs[i].threads <= p->max_workgroup_invocations)
      pick = i;
  return pick;
}

/* Whether the class lists row config i on this device. */
static bool rows_listed(const vulkan_device_props *p, const vulkan_class_row *t, int i) {
  uint32_t threads = rows_configs[i].threads;
  return threads >= t->rows_min && threads <= t->rows_max &&
         threads <= p->max_workgroup_invocations;
}

void vulkan_fused_variants(const vulkan_device_props *p, tsr_op op, int64_t n,
                           tsr_plugin_variant_list *out) {
  const vulkan_class_row *t = vulkan_class_of(p);
  out->count = 0;
  out->heuristic = 0;
  if (vulkan_is_row_op(op)) {
    int pick = rows_pick(p, n);
    for (int i = 0; i < ROWS_CONFIGS; i++) {
      if (!rows_listed(p, t, i))
        continue;
      if (i == pick)
        out->heuristic = (int32_t)out->count;
      tsr_plugin_variants_add(out, rows_configs[i].name, "%s", rows_configs[i].description);
    }
    snprintf(out->reason, sizeof out->reason,
             "%s table: about 16 elements per invocation for rows of %lld, within %u..%u", t->name,
             (long long)n, t->rows_min, t->rows_max);
    return;
  }
  for (int i = 0; i < ELEMENTWISE_CONFIGS; i++) {
    if (strcmp(elementwise_configs[i].name, t->elementwise) == 0)
      out->heuristic = (int32_t)out->count;
    tsr_plugin_variants_add(out, elementwise_configs[i].name, "%s",
                            elementwise_configs[i].description);
  }
  snprintf(out->reason, sizeof out->reason, "%s table: %s", t->name, t->elementwise);
}

const vulkan_fused_config *vulkan_fused_config_find(tsr_op op, const char *name) {
  if (vulkan_is_row_op(op))
    return tsr_plugin_row_find(rows_configs, ROWS_CONFIGS, sizeof rows_configs[0], name);
  return tsr_plugin_row_find(elementwise_configs, ELEMENTWISE_CONFIGS,
                             sizeof elementwise_configs[0], name);
}

/* ------------------------------------------------------------------------ */
/* Cooperative matrices                                                      */
/* ------------------------------------------------------------------------ */

static bool lists_16x8x16(const vulkan_coopmat_shape *shapes, uint32_t count) {
  for (uint32_t i = 0; i < count; i++) {
    const vulkan_coopmat_shape *s = &shapes[i];
    if (s->m == 16 && s->n == 8 && s->k == 16 && s->a_type == 0 && s->b_type == 0 &&
        s->c_type == 1 && s->result_type == 1 && s->scope == 3)
      return true;
  }
  return false;
}

vulkan_coopmat_route vulkan_coopmat_route_of(const vulkan_device_props *p) {
  if (!p->shader_float16 || !p->storage_16bit || p->subgroup_min > 32 || p->subgroup_max < 32 ||
      (p->subgroup_min != p->subgroup_max && !p->subgroup_size_control))
    return VULKAN_COOPMAT_NONE;
  if (p->coopmat_khr && lists_16x8x16(p->coopmat_khr_shapes, p->coopmat_khr_count))
    return VULKAN_COOPMAT_KHR;
  if (p->coopmat_nv && lists_16x8x16(p->coopmat_nv_shapes, p->coopmat_nv_count))
    return VULKAN_COOPMAT_NV;
  return VULKAN_COOPMAT_NONE;
}

static const char *coopmat_route_name(const vulkan_device_props *p) {
  return vulkan_coopmat_route_of(p) == VULKAN_COOPMAT_KHR ? "KHR" : "NV";
}

static bool dtype_usable(const vulkan_device_props *p, int32_t dtype, char *why, size_t capacity) {
  if (dtype == TSR_DTYPE_F32)
    return true;
  if ((dtype == TSR_DTYPE_F16 || dtype == TSR_DTYPE_BF16) && !p->storage_16bit) {
    snprintf(why, capacity, "the device lacks 16-bit storage buffers (storageBuffer16BitAccess)");
    return false;
  }
  if (dtype == TSR_DTYPE_F16 && !p->shader_float16) {
    snprintf(why, capacity, "the device lacks shaderFloat16");
    return false;
  }
  if (dtype != TSR_DTYPE_F16 && dtype != TSR_DTYPE_BF16) {
    snprintf(why, capacity, "dtype %d is not a GEMM or attention dtype", (int)dtype);
    return false;
  }
  return true;
}

/* ------------------------------------------------------------------------ */
/* GEMM                                                                      */
/* ------------------------------------------------------------------------ */

static const vulkan_gemm_config gemm_configs[] = {
    {"simt_32x32x16_4x4", VULKAN_GEMM_SIMT, 32, 32, 16, 4, 4, 0, 0, 0, 0},
    {"simt_64x64x16_4x4", VULKAN_GEMM_SIMT, 64, 64, 16, 4, 4, 0, 0, 0, 0},
    {"simt_64x64x16_8x8", VULKAN_GEMM_SIMT, 64, 64, 16, 8, 8, 0, 0, 0, 0},
    {"simt_128x64x16_8x8", VULKAN_GEMM_SIMT, 128, 64, 16, 8, 8, 0, 0, 0, 0},
    {"simt_128x128x8_8x8", VULKAN_GEMM_SIMT, 128, 128, 8, 8, 8, 0, 0, 0, 0},
    {"simt_128x128x16_8x8", VULKAN_GEMM_SIMT, 128, 128, 16, 8, 8, 0, 0, 0, 0},
    {"coopmat_64x64x32_2x2", VULKAN_GEMM_COOPMAT, 64, 64, 32, 0, 0, 2, 2, 2, 2},
    {"coopmat_128x64x32_2x2", VULKAN_GEMM_COOPMAT, 128, 64, 32, 0, 0, 2, 2, 4, 2},
    {"coopmat_128x128x32_2x2", VULKAN_GEMM_COOPMAT, 128, 128, 32, 0, 0, 2, 2, 4, 4},
    {"coopmat_128x128x32_2x4", VULKAN_GEMM_COOPMAT, 128, 128, 32, 0, 0, 2, 4, 4, 2},
};
enum { GEMM_CONFIGS = sizeof gemm_configs / sizeof gemm_configs[0] };

/* GPUs: the largest tile that still gives every compute unit two workgroups
 * (H100: 128x128 tiles reach 29-30 TFLOP/s at 4096^3, but a grouped
 * 8x256x1024x1024 runs 5x faster in 64x64 tiles, 4x the workgroups); the
 * last of each order is taken whatever the count. */
static const char *const gemm_occupancy_simt[] = {"simt_128x128x16_8x8", "simt_128x64x16_8x8",
                                                  "simt_64x64x16_4x4"};
static const char *const gemm_occupancy_coopmat[] = {
    "coopmat_128x128x32_2x2", "coopmat_128x64x32_2x2", "coopmat_64x64x32_2x2"};
enum { GEMM_OCCUPANCY_STEPS = 3, GEMM_WORKGROUPS_PER_UNIT = 2 };

const vulkan_gemm_config *vulkan_gemm_config_find(const char *name) {
  return tsr_plugin_row_find(gemm_configs, GEMM_CONFIGS, sizeof gemm_configs[0], name);
}

uint32_t vulkan_gemm_threads(const vulkan_gemm_config *c) {
  if (c->kind == VULKAN_GEMM_SIMT)
    return (c->bm / c->tm) * (c->bn / c->tn);
  return c->sg_m * c->sg_n * 32;
}

/* Shared memory of a config (as the shaders declare it). */
static uint32_t gemm_shared_bytes(const vulkan_gemm_config *c) {
  if (c->kind == VULKAN_GEMM_SIMT)
    return 4 * c->bk * (c->bm + 1 + c->bn + 1);
  /* Two stages of f16 tiles with 8 elements of padding per line (the
   * larger of the two layouts, which follow the operands' strides); the
   * epilogue reuses the A stages. */
  uint32_t a = c->bm * (c->bk + 8) * 2, b = c->bk * (c->bn + 8) * 2;
  uint32_t at = c->bk * (c->bm + 8) * 2, bt = c->bn * (c->bk + 8) * 2;
  uint32_t tiles = (a > at ? a : at) + (b > bt ? b : bt);
  return 2 * tiles;
}

/* coopmat: the epilogue stages a row of accumulators per subgroup (16 x
 * wn * 16 f32) in the shared stages, whichever layouts they have
 * (gemm_coopmat.comp). */
static bool coopmat_epilogue_fits(const vulkan_gemm_config *c) {
  uint32_t a = c->bm * (c->bk + 8) * 2, at = c->bk * (c->bm + 8) * 2;
  uint32_t b = c->bk * (c->bn + 8) * 2, bt = c->bn * (c->bk + 8) * 2;
  uint32_t stages = 2 * ((a < at ? a : at) + (b < bt ? b : bt));
  return stages >= c->sg_m * c->sg_n * 16 * c->wn * 16 * 4;
}

static bool gemm_config_fits(const vulkan_device_props *p, const vulkan_gemm_config *c) {
  /* coopmat: every invocation stages whole 8-element units of both tiles. */
  uint32_t threads = vulkan_gemm_threads(c);
  if (c->kind == VULKAN_GEMM_COOPMAT &&
      (threads == 0 || (c->bm * c->bk / 8) % threads || (c->bn * c->bk / 8) % threads ||
       !coopmat_epilogue_fits(c)))
    return false;
  return threads <= p->max_workgroup_invocations && gemm_shared_bytes(c) <= p->shared_memory_bytes;
}

/* Whether the problem's shape and operands can run at all (dtypes, sizes,
 * grids); false with the reason. */
static bool gemm_problem_ok(const vulkan_device_props *p, const vulkan_gemm_problem *g, char *why,
                            size_t capacity) {
  if (!dtype_usable(p, g->dtype, why, capacity))
    return false;
  if (g->out_f32 && g->d->dtype != TSR_DTYPE_F32) {
    snprintf(why, capacity, "d's dtype must be a's or f32");
    return false;
  }
  if (g->m > UINT32_MAX || g->n > UINT32_MAX || g->k > UINT32_MAX || g->batch > UINT32_MAX) {
    snprintf(why, capacity, "extents beyond 32 bits");
    return false;
  }
  if (!g->grouped && (uint64_t)g->batch > p->max_workgroup_count[2]) {
    snprintf(why, capacity, "a batch of %lld exceeds the device's %u workgroups along z",
             (long long)g->batch, p->max_workgroup_count[2]);
    return false;
  }
  return true;
}

static bool coopmat_usable(const vulkan_device_props *p, const vulkan_gemm_problem *g) {
  return g->dtype == TSR_DTYPE_F16 && vulkan_coopmat_route_of(p) != VULKAN_COOPMAT_NONE;
}

void vulkan_gemm_grid(const vulkan_gemm_problem *g, const vulkan_gemm_config *c, uint64_t grid[3]) {
  uint64_t mt = 0;
  if (g->grouped) {
    for (int64_t i = 0; i < g->batch; i++)
      mt += ((uint64_t)g->group_sizes[i] + c->bm - 1) / c->bm;
  } else {
    mt = ((uint64_t)g->m + c->bm - 1) / c->bm;
  }
  grid[0] = mt;
  grid[1] = ((uint64_t)g->n + c->bn - 1) / c->bn;
  grid[2] = g->grouped ? 1 : (uint64_t)g->batch;
}

/* The grid as the listing and the heuristic see it: from the problem's
 * signature alone, so for grouped GEMM the most M tiles any group sizes of
 * this total can need (each group adds at most one partial tile), not the
 * group sizes' own count (run's vulkan_gemm_grid, never larger). */
static void gemm_grid_bound(const vulkan_gemm_problem *g, const vulkan_gemm_config *c,
                            uint64_t grid[3]) {
  if (!g->grouped) {
    vulkan_gemm_grid(g, c, grid);
    return;
  }
  grid[0] = ((uint64_t)g->m + (uint64_t)g->batch * (c->bm - 1)) / c->bm;
  grid[1] = ((uint64_t)g->n + c->bn - 1) / c->bn;
  grid[2] = 1;
}

static bool gemm_grid_fits(const vulkan_device_props *p, const vulkan_gemm_problem *g,
                           const vulkan_gemm_config *c) {
  uint64_t grid[3];
  gemm_grid_bound(g, c, grid);
  return grid[0] <= p->max_workgroup_count[0] && grid[1] <= p->max_workgroup_count[1] &&
         grid[2] <= p->max_workgroup_count[2];
}

static int gemm_add(tsr_plugin_variant_list *out, const vulkan_device_props *p,
                    const vulkan_gemm_config *c) {
  if (c->kind == VULKAN_GEMM_SIMT)
    return tsr_plugin_variants_add(
        out, c->name,
        "scalar f32 FMA: %ux%u tile, k step %u, %ux%u outputs per invocation, %u "
        "invocations, %u B shared",
        c->bm, c->bn, c->bk, c->tm, c->tn, vulkan_gemm_threads(c), gemm_shared_bytes(c));
  return tsr_plugin_variants_add(
      out, c->name,
      "%s cooperative matrix 16x8x16 f16->f32: %ux%u tile, k step %u, %ux%u subgroups "
      "of %ux%u 16x16 blocks, %u B shared",
      coopmat_route_name(p), c->bm, c->bn, c->bk, c->sg_m, c->sg_n, c->wm, c->wn,
      gemm_shared_bytes(c));
}

/* The occupancy heuristic: the first config of the order that fits and
 * gives `want` workgroups, else the last that fits. */
static const char *gemm_occupancy_pick(const vulkan_device_props *p, const vulkan_gemm_problem *g,
                                       bool coop, uint64_t want) {
  const char *const *order = coop ? gemm_occupancy_coopmat : gemm_occupancy_simt;
  for (int o = 0; o < GEMM_OCCUPANCY_STEPS; o++) {
    const vulkan_gemm_config *c = vulkan_gemm_config_find(order[o]);
    if (!c || !gemm_config_fits(p, c))
      continue;
    uint64_t grid[3];
    gemm_grid_bound(g, c, grid);
    if (o == GEMM_OCCUPANCY_STEPS - 1 || grid[0] * grid[1] * grid[2] >= want)
      return c->name;
  }
  return NULL;
}

tsr_status vulkan_gemm_variants(const vulkan_device_props *p, const vulkan_gemm_problem *g,
                                tsr_plugin_variant_list *out, char *why, size_t capacity) {
  if (!gemm_problem_ok(p, g, why, capacity))
    return TSR_ERROR_UNSUPPORTED;
  const vulkan_class_row *t = vulkan_class_of(p);
  bool coop = coopmat_usable(p, g);
  double outputs = (double)g->m * (double)g->n * (double)(g->grouped ? 1 : g->batch);
  const char *pick = NULL;
  char reason[160];
  if (t->gemm_small) {
    /* One CPU thread runs a workgroup: tile size matters little past the
     * SIMD width, so only tiny problems take the smallest tile. */
    bool large = outputs >= t->gemm_large_outputs;
    pick = large ? t->gemm_large : t->gemm_small;
    snprintf(reason, sizeof reason, "%s problem", large ? "large" : "small");
  } else {
    uint64_t want = GEMM_WORKGROUPS_PER_UNIT * (uint64_t)(p->compute_units ? p->compute_units : 32);
    pick = gemm_occupancy_pick(p, g, coop, want);
    snprintf(reason, sizeof reason, "%sthe largest tile giving %llu workgroups (2 per unit)",
             coop ? "f16 on cooperative matrices 16x8x16; " : "", (unsigned long long)want);
  }
  out->count = 0;
  out->heuristic = 0;
  for (int i = 0; i < GEMM_CONFIGS; i++) {
    const vulkan_gemm_config *c = &gemm_configs[i];
    if (c->kind == VULKAN_GEMM_SIMT && !name_listed(t->gemm_simt, c->name))
      continue;
    if (c->kind == VULKAN_GEMM_COOPMAT && !coop)
      continue;
    if (!gemm_config_fits(p, c) || !gemm_grid_fits(p, g, c))
      continue;
    int index = gemm_add(out, p, c);
    if (index >= 0 && pick && strcmp(c->name, pick) == 0)
      out->heuristic = index;
  }
  if (out->count == 0) {
    snprintf(why, capacity, "no tile config fits this device's limits for this problem");
    return TSR_ERROR_UNSUPPORTED;
  }
  snprintf(out->reason, sizeof out->reason, "%s table: %s (%.3g outputs): %s", t->name, reason,
           outputs, out->variants[out->heuristic].name);
  return TSR_OK;
}

/* ------------------------------------------------------------------------ */
/* Attention                                                                 */
/* ------------------------------------------------------------------------ */

static const vulkan_attention_config attention_configs[] = {
    {"flash_d32_q32_r4_t64", 32, 32, 32, 4, 8, false, false, 0},
    {"flash_d64_q32_r4_t64", 32, 32, 64, 4, 8, false, false, 0},
    {"flash_d64_q64_r4_t128", 64, 32, 64, 4, 8, false, false, 0},
    {"flash_d128_q32_r4_t64", 32, 32, 128, 4, 8, false, false, 0},
    {"flash_d128_q16_r2_t64", 16, 32, 128, 2, 8, false, false, 0},
    {"flash_d128_q32_r2_t128", 32, 32, 128, 2, 8, false, false, 0},
    {"flash_d256_q16_r4_t64", 16, 16, 256, 4, 16, false, false, 0},
    {"flash_d256_q8_r2_t64", 8, 16, 256, 2, 16, false, false, 0},
    {"flash_d256_q16_r2_t128", 16, 16, 256, 2, 16, false, false, 0},
    {"coopmat_d64_q64", 64, 64, 64, 0, 0, true, false, 0},
    {"coopmat_d128_q64", 64, 64, 128, 0, 0, true, false, 0},
    {.name = "decode_split_auto", .decode = true, .splits = 0},
    {.name = "decode_split1", .decode = true, .splits = 1},
    {.name = "decode_split2", .decode = true, .splits = 2},
    {.name = "decode_split4", .decode = true, .splits = 4},
    {.name = "decode_split8", .decode = true, .splits = 8},
    {.name = "decode_split16", .decode = true, .splits = 16},
    {.name = "decode_split32", .decode = true, .splits = 32},
    {.name = "decode_split64", .decode = true, .splits = 64},
};
enum { ATTENTION_CONFIGS = sizeof attention_configs / sizeof attention_configs[0] };

/* The decode path: at most this many query rows per sequence (few rows
 * against many keys; more rows are a prefill for the tile kernels), and for
 * dense problems (which the tile kernels ran before serving existed) at
 * least this many keys. Fixed listed splits stop where chunks would fall
 * under DECODE_LISTED_CHUNK keys. */
enum { DECODE_MAX_Q = 16, DECODE_DENSE_MIN_KV = 512, DECODE_LISTED_CHUNK = 64 };
enum { DECODE_THREADS = 128, DECODE_CHUNK_ALIGN = 64 };

const vulkan_attention_config *vulkan_attention_config_find(const char *name) {
  return tsr_plugin_row_find(attention_configs, ATTENTION_CONFIGS, sizeof attention_configs[0],
                             name);
}

uint32_t vulkan_attention_threads(const vulkan_attention_config *c) {
  if (c->decode)
    return DECODE_THREADS;
  return c->coopmat ? 128 : c->br / c->rq * c->tpr;
}

void vulkan_attention_shape_of(const tsr_attention_args *a, vulkan_attention_shape *s) {
  memset(s, 0, sizeof *s);
  s->serving = tsr_plugin_attention_is_serving(a);
  if (!s->serving) {
    s->batch = a->q.shape[0];
    s->max_q = a->q.shape[1];
    s->hq = a->q.shape[2];
    s->dim = a->q.shape[3];
    s->max_kv = a->k.shape[1];
    s->hkv = a->k.shape[2];
    return;
  }
  s->packed_q = a->cu_seqlens_q.buffer != NULL;
  s->packed_kv = a->cu_seqlens_kv.buffer != NULL;
  s->paged = a->block_table.buffer != NULL;
  s->batch = a->batch;
  s->hq = a->q.shape[a->q.rank - 2];
  s->dim = a->q.shape[a->q.rank - 1];
  s->hkv = a->k.shape[a->k.rank - 2];
  s->max_q = a->max_seqlen_q;
  s->max_kv = a->max_seqlen_kv;
}

static uint64_t ceil_div(uint64_t x, uint64_t y) {
  return (x + y - 1) / y;
}

void vulkan_decode_plan_of(const vulkan_device_props *p, const vulkan_attention_shape *s,
                           const vulkan_attention_config *c, vulkan_decode_plan *out) {
  const vulkan_class_row *t = vulkan_class_of(p);
  uint32_t dp = 64;
  while (dp < s->dim)
    dp *= 2;
  uint64_t group = s->hkv > 0 ? (uint64_t)(s->hq / s->hkv) : 1;
  uint64_t rows = group * (uint64_t)s->max_q;
  out->dp = dp;
  out->rows = (uint32_t)rows;
  out->rt = rows <= 4 ? 4 : 8;
  out->row_tiles = (uint32_t)ceil_div(rows ? rows : 1, out->rt);
  uint64_t kv = s->max_kv > 0 ? (uint64_t)s->max_kv : 1;
  uint64_t splits = c->splits;
  if (!splits) {
    /* Enough workgroups to fill the device (decode_per_unit per unit), each
     * chunk at least decode_min_chunk keys: every chunk writes a partial row
     * the combine reads back, worth it only against enough keys. */
    uint64_t units = p->compute_units ? p->compute_units : t->decode_units;
    uint64_t base = (uint64_t)s->batch * (uint64_t)s->hkv * out->row_tiles;
    splits = ceil_div(units * t->decode_per_unit, base ? base : 1);
    uint64_t most = ceil_div(kv, t->decode_min_chunk);
    if (splits > most)
      splits = most;
    if (splits < 1)
      splits = 1;
  }
  if (t->decode_max_chunk && ceil_div(kv, splits) > t->decode_max_chunk)
    splits = ceil_div(kv, t->decode_max_chunk);
  uint64_t chunk = ceil_div(ceil_div(kv, splits), DECODE_CHUNK_ALIGN) * DECODE_CHUNK_ALIGN;
  out->chunk = (uint32_t)chunk;
  out->splits = (uint32_t)ceil_div(kv, chunk);
}

/* Shared memory of a config (as the shaders declare it). decode: the lane
 * sums (at most 16 per invocation, without subgroups), one row of every key
 * group's outputs and the groups' (m, l). */
static uint32_t attention_shared_bytes(const vulkan_attention_config *c) {
  if (c->decode)
    return 4 * (DECODE_THREADS * 16 + DECODE_THREADS * 8 + DECODE_THREADS * 2);
  /* coopmat: the staged f16 rows (padded by 8), then a 16 x bc f32 region
   * per subgroup. */
  if (c->coopmat)
    return 2 * c->bc * (c->dp + 8) + 4 * 16 * c->bc * 4;
  return 4 * ((c->br + c->bc) * (c->dp + 4) + c->br * c->bc);
}

/* The coopmat attention: f16 on a device with the GEMM's 16x8x16 shape, and
 * subgroup shuffles and votes (its scalar softmax pairs invocations). Serving
 * prefill runs its _serving builds where COOPMAT_SERVING is 1 (0 leaves the
 * serving forms to the scalar and decode shaders). */
enum { COOPMAT_SERVING = 1 };

static bool attention_coopmat_usable(const vulkan_device_props *p, const tsr_attention_args *a,
                                     const vulkan_attention_shape *s) {
  return a->q.dtype == TSR_DTYPE_F16 && vulkan_coopmat_route_of(p) != VULKAN_COOPMAT_NONE &&
         p->subgroup_shuffle_vote && (COOPMAT_SERVING || !s->serving);
}

static bool attention_problem_ok(const vulkan_device_props *p, const tsr_attention_args *a,
                                 const vulkan_attention_shape *s, char *why, size_t capacity) {
  if (!dtype_usable(p, a->q.dtype, why, capacity))
    return false;
  const tsr_plugin_tensor *ts[4] = {&a->q, &a->k, &a->v, &a->o};
  static const char *names[4] = {"q", "k", "v", "o"};
  for (int i = 0; i < 4; i++) {
    int last = ts[i]->rank - 1;
    if (ts[i]->shape[last] > 1 && ts[i]->strides[last] != 1) {
      snprintf(why, capacity, "%s's head dimension has stride %lld; this plugin needs 1", names[i],
               (long long)ts[i]->strides[last]);
      return false;
    }
  }
  if (s->dim > 256) {
    snprintf(why, capacity, "head dim %lld is above 256", (long long)s->dim);
    return false;
  }
  /* The shader's key positions (i + Skv - Sq, +- windows) are 32-bit ints. */
  if (s->max_q + s->max_kv > INT32_MAX / 2 || s->hq > p->max_workgroup_count[1] ||
      s->batch > p->max_workgroup_count[2]) {
    snprintf(why, capacity, "sequence, head or batch extents beyond the device's grid");
    return false;
  }
  return true;
}

/* Whether the decode path can run the problem, and whether the heuristic
 * wants it there. */
static bool decode_fits(const vulkan_device_props *p, const vulkan_attention_shape *s,
                        const vulkan_attention_config *c) {
  if (s->max_q > DECODE_MAX_Q || s->hkv <= 0 ||
      attention_shared_bytes(c) > p->shared_memory_bytes ||
      DECODE_THREADS > p->max_workgroup_invocations || s->hkv > p->max_workgroup_count[1])
    return false;
  vulkan_decode_plan d;
  vulkan_decode_plan_of(p, s, c, &d);
  /* The partials (dp floats and an (m, l) pair per row and chunk) with
   * 32-bit indices in one binding of scratch, after the plan (its largest,
   * a table's worth, is left to run's check). */
  uint64_t slots = (uint64_t)s->batch * (uint64_t)s->hkv * d.splits * d.row_tiles * d.rt;
  return (uint64_t)d.splits * d.row_tiles <= p->max_workgroup_count[0] &&
         s->max_q <= p->max_workgroup_count[0] && slots * (d.dp + 2) <= UINT32_MAX &&
         (!p->max_storage_range || slots * (d.dp + 2) * 4 <= p->max_storage_range);
}

static bool decode_wanted(const vulkan_attention_shape *s) {
  return s->max_q <= DECODE_MAX_Q && (s->serving || s->max_kv >= DECODE_DENSE_MIN_KV);
}

/* Fixed split counts are listed while their chunks keep DECODE_LISTED_CHUNK
 * keys (and the first, 1, always), and where they are within the class's
 * longest chunk. */
static bool decode_listed(const vulkan_device_props *p, const vulkan_attention_shape *s,
                          const vulkan_attention_config *c) {
  uint64_t kv = (uint64_t)(s->max_kv > 0 ? s->max_kv : 1);
  uint32_t most = vulkan_class_of(p)->decode_max_chunk;
  if (c->splits && most && ceil_div(kv, c->splits) > most)
    return false;
  return c->splits <= 1 || (uint64_t)(c->splits - 1) * DECODE_LISTED_CHUNK < kv;
}

static int decode_add(tsr_plugin_variant_list *out, const vulkan_device_props *p,
                      const vulkan_attention_shape *s, const vulkan_attention_config *c) {
  vulkan_decode_plan d;
  vulkan_decode_plan_of(p, s, c, &d);
  return tsr_plugin_variants_add(out, c->name,
                                 "split-KV decode%s: %u x %u keys per sequence, %u GQA rows per "
                                 "workgroup, head dim <= %u, 128 invocations, then a combine pass",
                                 c->splits ? "" : " (heuristic)", d.splits, d.chunk, d.rt, d.dp);
}

tsr_status vulkan_attention_variants(const vulkan_device_props *p, const tsr_attention_args *a,
                                     tsr_plugin_variant_list *out, char *why, size_t capacity) {
  vulkan_attention_shape s;
  vulkan_attention_shape_of(a, &s);
  if (!attention_problem_ok(p, a, &s, why, capacity))
    return TSR_ERROR_UNSUPPORTED;
  const vulkan_class_row *t = vulkan_class_of(p);
  int64_t dim = s.dim;
  uint32_t dp = 32;
  while (dp < dim)
    dp *= 2;
  /* lavapipe: the 64-invocation configs (fewer SIMD passes per barrier);
   * GPUs: 128 invocations and 32 rows where the head dim allows. */
  bool coop = attention_coopmat_usable(p, a, &s);
  bool decode =
      decode_wanted(&s) && decode_fits(p, &s, vulkan_attention_config_find("decode_split_auto"));
  const char *pick = NULL;
  uint32_t picked_rows = 0, coop_dp = 0;
  bool decode_picked = false;
  out->count = 0;
  out->heuristic = 0;
  for (int i = 0; i < ATTENTION_CONFIGS; i++) {
    const vulkan_attention_config *c = &attention_configs[i];
    bool picked;
    int index;
    if (c->decode) {
      if (!decode_fits(p, &s, c) || !decode_listed(p, &s, c))
        continue;
      picked = decode && c->splits == 0;
      decode_picked = decode_picked || picked;
      index = decode_add(out, p, &s, c);
    } else {
      uint32_t threads = vulkan_attention_threads(c);
      if (c->dp < dim || threads > p->max_workgroup_invocations ||
          attention_shared_bytes(c) > p->shared_memory_bytes || (c->coopmat && !coop))
        continue;
      uint64_t groups = ((uint64_t)s.max_q + c->br - 1) / c->br;
      if (groups > p->max_workgroup_count[0])
        continue;
      if (c->coopmat) {
        /* The smallest head-dim capacity wins over every scalar config
         * (H100, f16 D128: see docs/PERFORMANCE.md). */
        picked = !decode && (!coop_dp || c->dp < coop_dp);
        if (picked)
          coop_dp = c->dp;
        index = tsr_plugin_variants_add(
            out, c->name,
            "cooperative matrices (%s) 16x8x16 f16 -> f32: %u query rows x %u keys per step, "
            "head dim <= %u, 4 subgroups of 32, %u B shared, lazily rescaled output",
            coopmat_route_name(p), c->br, c->bc, c->dp, attention_shared_bytes(c));
      } else {
        /* GPUs: 128 invocations, the most rows per workgroup (H100, f16 D128:
         * q32_r2_t128 90.6 ms, q32_r4_t64 124.6 ms). */
        bool want = c->dp == dp &&
                    (threads == t->attention_threads || (!t->attention_threads_only && !pick));
        picked = !decode && want && !coop_dp && (!pick || c->br > picked_rows);
        if (picked)
          picked_rows = c->br;
        index = tsr_plugin_variants_add(
            out, c->name,
            "scalar online softmax: %u query rows x %u keys per step, head dim <= %u, %u rows "
            "per invocation, %u invocations, %u B shared",
            c->br, c->bc, c->dp, c->rq, threads, attention_shared_bytes(c));
      }
    }
    if (picked && index >= 0) {
      pick = c->name;
      out->heuristic = index;
    }
  }
  if (out->count == 0) {
    snprintf(why, capacity, "no attention config fits this device's limits for this problem");
    return TSR_ERROR_UNSUPPORTED;
  }
  if (decode_picked) {
    snprintf(out->reason, sizeof out->reason,
             "%s table: split-KV decode (max_seqlen_q %lld <= %d, up to %lld keys), key chunks "
             "for %u workgroups per compute unit: %s",
             t->name, (long long)s.max_q, DECODE_MAX_Q, (long long)s.max_kv, t->decode_per_unit,
             out->variants[out->heuristic].name);
    return TSR_OK;
  }
  snprintf(out->reason, sizeof out->reason,
           "%s table: %s, the smallest head-dim capacity for D = %lld, %s: %s", t->name,
           coop_dp ? "f16 on cooperative matrices" : "scalar", (long long)dim,
           coop_dp                     ? "64 rows"
           : t->attention_threads_only ? "64-invocation workgroups"
                                       : "wide workgroups",
           out->variants[out->heuristic].name);
  return TSR_OK;
}

/* ------------------------------------------------------------------------ */
/* kv_append                                                                 */
/* ------------------------------------------------------------------------ */

static const vulkan_kv_append_config kv_append_configs[] = {{"kv_append_t64", 64},
                                                            {"kv_append_t256", 256}};
enum { KV_APPEND_CONFIGS = sizeof kv_append_configs / sizeof kv_append_configs[0] };

void vulkan_kv_append_variants(const vulkan_device_props *p, tsr_plugin_variant_list *out) {
  const vulkan_class_row *t = vulkan_class_of(p);
  out->count = 0;
  out->heuristic = 0;
  for (int i = 0; i < KV_APPEND_CONFIGS; i++) {
    const vulkan_kv_append_config *c = &kv_append_configs[i];
    if (c->threads > p->max_workgroup_invocations)
      continue;
    int index = tsr_plugin_variants_add(
        out, c->name, "%u invocations per workgroup, one element of k_new (and v_new) each",
        c->threads);
    if (index >= 0 && strcmp(c->name, t->kv_append) == 0)
      out->heuristic = index;
  }
  snprintf(out->reason, sizeof out->reason, "%s table: %s", t->name, t->kv_append);
}

const vulkan_kv_append_config *vulkan_kv_append_config_find(const char *name) {
  return tsr_plugin_row_find(kv_append_configs, KV_APPEND_CONFIGS, sizeof kv_append_configs[0],
                             name);
}
