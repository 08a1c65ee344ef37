/* SPDX-License-Identifier: Apache-2.0 */
/* GEMM, grouped GEMM and flash attention launches of the Vulkan plugin: the
 * push-constant blocks (mirrors of kernels/gemm_common.glsl and
 * kernels/attention.comp), the variant tables per device class, the
 * heuristics, and the dispatches. Two GEMM paths: "simt" (kernels/gemm.comp,
 * shared-memory tiles and register blocking, any device) and "coopmat"
 * (kernels/gemm_coopmat.comp, cooperative matrices 16x8x16 f16 -> f32,
 * written for GL_NV_cooperative_matrix and rewritten here to
 * SPV_KHR_cooperative_matrix where the device lists that shape). Grouped GEMM
 * runs the same shaders with a group table (prefix sums of M tiles and rows
 * per group) in one dispatch. Notes and figures: docs/PERFORMANCE.md. */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "configs.h"
#include "vulkan_internal.h"

/* ------------------------------------------------------------------------ */
/* Push constants                                                            */
/* ------------------------------------------------------------------------ */

/* Mirrors GemmPush (kernels/gemm_common.glsl). */
typedef struct vulkan_gemm_push {
  uint32_t m, n, k, batch;
  uint32_t a_first, a_sb, a_sm, a_sk;
  uint32_t b_first, b_sb, b_sk, b_sn;
  uint32_t c_first, c_sb, c_sm, c_sn;
  uint32_t d_first, d_sb, d_sm, d_sn;
  uint32_t bias_first, bias_sb, bias_sn, flags;
  float alpha, beta;
} vulkan_gemm_push;

/* A tensor's first element and its strides along its first three
 * dimensions (B, S, H; for lse B, H, S). */
typedef struct vulkan_attention_view {
  uint32_t first, s0, s1, s2;
} vulkan_attention_view;

/* Mirrors AttentionPush (kernels/attention.comp). */
typedef struct vulkan_attention_push {
  uint32_t sq, skv, hq, group;           /* group: query heads per kv head */
  vulkan_attention_view q, k, v, o, lse; /* lse: first, b, h, s strides */
  uint32_t dim, flags;                   /* flags bit 0: write lse */
  int32_t window_left, window_right;     /* negative: unbounded */
  float scale_log2;                      /* scale * log2(e): the shader uses exp2 */
} vulkan_attention_push;

_Static_assert(sizeof(vulkan_gemm_push) <= VULKAN_PUSH_BYTES, "gemm push fits");
_Static_assert(sizeof(vulkan_attention_push) <= VULKAN_PUSH_BYTES, "attention push fits");

enum { GEMM_HAS_C = 1, GEMM_HAS_BIAS = 2 };
enum { BIND_A, BIND_B, BIND_C, BIND_BIAS, BIND_D, BIND_GROUPS, GEMM_BINDINGS };

/* ------------------------------------------------------------------------ */
/* GEMM configs                                                              */
/* ------------------------------------------------------------------------ */

typedef enum gemm_kind { GEMM_SIMT, GEMM_COOPMAT } gemm_kind;

/* A GEMM variant. simt: a bm x bn x bk tile, tm x tn outputs per invocation.
 * coopmat: sg_m x sg_n subgroups, each wm x wn 16x16 accumulators, bk deep. */
typedef struct vulkan_gemm_config {
  const char *name;
  gemm_kind kind;
  uint32_t bm, bn, bk;
  uint32_t tm, tn;     /* simt */
  uint32_t sg_m, sg_n; /* coopmat */
  uint32_t wm, wn;     /* coopmat: 16x16 tiles per subgroup */
} vulkan_gemm_config;

static const vulkan_gemm_config gemm_configs[] = {
    {"simt_32x32x16_4x4", GEMM_SIMT, 32, 32, 16, 4, 4, 0, 0, 0, 0},
    {"simt_64x64x16_4x4", GEMM_SIMT, 64, 64, 16, 4, 4, 0, 0, 0, 0},
    {"simt_64x64x16_8x8", GEMM_SIMT, 64, 64, 16, 8, 8, 0, 0, 0, 0},
    {"simt_128x64x16_8x8", GEMM_SIMT, 128, 64, 16, 8, 8, 0, 0, 0, 0},
    {"simt_128x128x8_8x8", GEMM_SIMT, 128, 128, 8, 8, 8, 0, 0, 0, 0},
    {"simt_128x128x16_8x8", GEMM_SIMT, 128, 128, 16, 8, 8, 0, 0, 0, 0},
    {"coopmat_64x64x32_2x2", GEMM_COOPMAT, 64, 64, 32, 0, 0, 2, 2, 2, 2},
    {"coopmat_128x64x32_2x2", GEMM_COOPMAT, 128, 64, 32, 0, 0, 2, 2, 4, 2},
    {"coopmat_128x128x32_2x2", GEMM_COOPMAT, 128, 128, 32, 0, 0, 2, 2, 4, 4},
    {"coopmat_128x128x32_2x4", GEMM_COOPMAT, 128, 128, 32, 0, 0, 2, 4, 4, 2},
};
enum { GEMM_CONFIGS = sizeof gemm_configs / sizeof gemm_configs[0] };

/* Per device class: the simt configs it lists (a bit per index) and its
 * picks for small and large problems. lavapipe runs a workgroup as SIMD
 * lanes of one CPU thread: few, fat invocations do best there. */
typedef struct gemm_class_table {
  uint32_t simt_mask;
  int small, large;
} gemm_class_table;

static const gemm_class_table gemm_tables[VULKAN_CLASS_COUNT_] = {
    [VULKAN_CLASS_LAVAPIPE] = {0x07, 0, 2},   [VULKAN_CLASS_NVIDIA] = {0x3e, 1, 5},
    [VULKAN_CLASS_AMD_WAVE32] = {0x3e, 1, 5}, [VULKAN_CLASS_AMD_WAVE64] = {0x3e, 1, 5},
    [VULKAN_CLASS_INTEL] = {0x1e, 1, 3},      [VULKAN_CLASS_GENERIC] = {0x1f, 1, 3}};

/* One GEMM or grouped GEMM as the shaders see it. */
typedef struct gemm_problem {
  const tsr_plugin_tensor *a, *b, *c, *bias, *d;
  int64_t m, n, k, batch; /* grouped: m is T (all rows), batch is G */
  bool grouped;
  const int64_t *group_sizes;
  float alpha, beta;
  int32_t activation;
  int32_t dtype; /* of a and b */
  bool out_f32;  /* d (and c, bias) f32 while a, b are 16-bit */
} gemm_problem;

static gemm_problem gemm_problem_of(const tsr_gemm_args *g) {
  gemm_problem p = {&g->a,
                    &g->b,
                    g->c.buffer ? &g->c : NULL,
                    g->bias.buffer ? &g->bias : NULL,
                    &g->d,
                    g->a.shape[1],
                    g->b.shape[2],
                    g->a.shape[2],
                    g->d.shape[0],
                    false,
                    NULL,
                    g->alpha,
                    g->c.buffer ? g->beta : 0.0f,
                    g->activation,
                    g->a.dtype,
                    g->d.dtype != g->a.dtype};
  return p;
}

static gemm_problem grouped_problem_of(const tsr_grouped_gemm_args *g) {
  gemm_problem p = {&g->a,          &g->b,         NULL,           g->bias.buffer ? &g->bias : NULL,
                    &g->d,          g->a.shape[0], g->b.shape[2],  g->a.shape[1],
                    g->group_count, true,          g->group_sizes, g->alpha,
                    0.0f,           g->activation, g->a.dtype,     g->d.dtype != g->a.dtype};
  return p;
}

/* A stride as the shaders take it: 0 along extents of 1 (whatever the
 * caller gave there), else the element stride, which fits 32 bits once the
 * tensor fits one binding. */
static uint32_t stride_of(const tsr_plugin_tensor *t, int dim) {
  return t->shape[dim] > 1 ? (uint32_t)t->strides[dim] : 0u;
}

/* Shader build suffix of a dtype (tessera.h numbers f32, f16, bf16 from 1). */
static const char *dtype_name(int32_t dtype) {
  static const char *const suffixes[] = {NULL, "f32", "f16", "bf16"};
  return dtype >= TSR_DTYPE_F32 && dtype <= TSR_DTYPE_BF16 ? suffixes[dtype] : NULL;
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

/* Which cooperative-matrix extension runs the coopmat shaders: they
 * multiply 16x8x16 (f16 inputs, f32 accumulator and result, subgroup scope),
 * in subgroups of 32. KHR (the NV build rewritten, see coopmat_nv_to_khr)
 * where the device lists that shape, else NV. */
typedef enum coopmat_route { COOPMAT_NONE, COOPMAT_NV, COOPMAT_KHR } coopmat_route;

static bool lists_16x8x16(const vulkan_coopmat_shape *shapes, uint32_t count) {
  for (uint32_t i = 0; i < count; i++) {
    const vulkan_coopmat_shape *s = &shapes[i];
    if (s->m == 16 && s->n == 8 && s->k == 16 && s->a_type == 0 && s->b_type == 0 &&
        s->c_type == 1 && s->result_type == 1 && s->scope == 3)
      return true;
  }
  return false;
}

static coopmat_route coopmat_route_of(const vulkan_device_props *p) {
  if (!p->shader_float16 || !p->storage_16bit || p->subgroup_min > 32 || p->subgroup_max < 32 ||
      (p->subgroup_min != p->subgroup_max && !p->subgroup_size_control))
    return COOPMAT_NONE;
  if (p->coopmat_khr && lists_16x8x16(p->coopmat_khr_shapes, p->coopmat_khr_count))
    return COOPMAT_KHR;
  if (p->coopmat_nv && lists_16x8x16(p->coopmat_nv_shapes, p->coopmat_nv_count))
    return COOPMAT_NV;
  return COOPMAT_NONE;
}

static uint32_t gemm_threads(const vulkan_device_props *p, const vulkan_gemm_config *c) {
  if (c->kind == GEMM_SIMT)
    return (c->bm / c->tm) * (c->bn / c->tn);
  (void)p;
  return c->sg_m * c->sg_n * 32;
}

/* Shared memory of a config (as the shaders declare it). */
static uint32_t gemm_shared_bytes(const vulkan_gemm_config *c) {
  if (c->kind == GEMM_SIMT)
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
  uint32_t threads = gemm_threads(p, c);
  if (c->kind == GEMM_COOPMAT && (threads == 0 || (c->bm * c->bk / 8) % threads ||
                                  (c->bn * c->bk / 8) % threads || !coopmat_epilogue_fits(c)))
    return false;
  return threads <= p->max_workgroup_invocations && gemm_shared_bytes(c) <= p->shared_memory_bytes;
}

/* Whether the problem's shape and operands can run at all (dtypes, sizes,
 * grids); false with the reason. */
static bool gemm_problem_ok(const vulkan_device *device, const gemm_problem *g, char *why,
                            size_t capacity) {
  const vulkan_device_props *p = device->props;
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

static bool coopmat_usable(const vulkan_device_props *p, const gemm_problem *g) {
  return g->dtype == TSR_DTYPE_F16 && coopmat_route_of(p) != COOPMAT_NONE;
}

/* The grid of a config: M tiles (all groups' for grouped GEMM), N tiles,
 * batch. */
static void gemm_grid(const gemm_problem *g, const vulkan_gemm_config *c, uint64_t grid[3]) {
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

static bool gemm_grid_fits(const vulkan_device_props *p, const gemm_problem *g,
                           const vulkan_gemm_config *c) {
  uint64_t grid[3];
  gemm_grid(g, c, grid);
  return grid[0] <= p->max_workgroup_count[0] && grid[1] <= p->max_workgroup_count[1] &&
         grid[2] <= p->max_workgroup_count[2];
}

static void gemm_describe(const vulkan_device_props *p, const vulkan_gemm_config *c, char *out,
                          size_t capacity) {
  if (c->kind == GEMM_SIMT)
    snprintf(out, capacity,
             "scalar f32 FMA: %ux%u tile, k step %u, %ux%u outputs per invocation, %u "
             "invocations, %u B shared",
             c->bm, c->bn, c->bk, c->tm, c->tn, gemm_threads(p, c), gemm_shared_bytes(c));
  else
    snprintf(out, capacity,
             "%s cooperative matrix 16x8x16 f16->f32: %ux%u tile, k step %u, %ux%u subgroups "
             "of %ux%u 16x16 blocks, %u B shared",
             coopmat_route_of(p) == COOPMAT_KHR ? "KHR" : "NV", c->bm, c->bn, c->bk, c->sg_m,
             c->sg_n, c->wm, c->wn, gemm_shared_bytes(c));
}

static tsr_status gemm_variants(const vulkan_device *device, const gemm_problem *g,
                                tsr_plugin_variant_list *out, char *why, size_t capacity) {
  const vulkan_device_props *p = device->props;
  if (!gemm_problem_ok(device, g, why, capacity))
    return TSR_ERROR_UNSUPPORTED;
  vulkan_config_class cls = vulkan_config_class_of(p);
  const gemm_class_table *t = &gemm_tables[cls];
  bool coop = coopmat_usable(p, g);
  double outputs = (double)g->m * (double)g->n * (double)(g->grouped ? 1 : g->batch);
  const char *pick = NULL;
  char reason[160];
  if (cls == VULKAN_CLASS_LAVAPIPE) {
    /* One CPU thread runs a workgroup: tile size matters little past the
     * SIMD width, so only tiny problems take the smallest tile. */
    bool large = outputs >= 16384;
    pick = gemm_configs[large ? t->large : t->small].name;
    snprintf(reason, sizeof reason, "%s problem", large ? "large" : "small");
  } else {
    /* GPUs: the largest tile that still gives every compute unit two
     * workgroups (H100: 128x128 tiles reach 29-30 TFLOP/s at 4096^3, but a
     * grouped 8x256x1024x1024 runs 5x faster in 64x64 tiles, 4x the
     * workgroups). */
    static const char *const simt_order[] = {"simt_128x128x16_8x8", "simt_128x64x16_8x8",
                                             "simt_64x64x16_4x4"};
    static const char *const coop_order[] = {"coopmat_128x128x32_2x2", "coopmat_128x64x32_2x2",
                                             "coopmat_64x64x32_2x2"};
    bool coop_pick = coop;
    const char *const *order = coop_pick ? coop_order : simt_order;
    uint64_t want = 2 * (uint64_t)(p->compute_units ? p->compute_units : 32);
    for (int o = 0; o < 3 && !pick; o++) {
      for (int i = 0; i < GEMM_CONFIGS; i++) {
        const vulkan_gemm_config *c = &gemm_configs[i];
        if (strcmp(c->name, order[o]) != 0 || !gemm_config_fits(p, c))
          continue;
        uint64_t grid[3];
        gemm_grid(g, c, grid);
        if (o == 2 || grid[0] * grid[1] * grid[2] >= want)
          pick = c->name;
      }
    }
    snprintf(reason, sizeof reason, "%sthe largest tile giving %llu workgroups (2 per unit)",
             coop_pick ? "f16 on cooperative matrices 16x8x16; " : "", (unsigned long long)want);
  }
  char description[160];
  out->count = 0;
  out->heuristic = 0;
  for (int i = 0; i < GEMM_CONFIGS; i++) {
    const vulkan_gemm_config *c = &gemm_configs[i];
    if (c->kind == GEMM_SIMT && !(t->simt_mask & (1u << i)))
      continue;
    if (c->kind == GEMM_COOPMAT && !coop)
      continue;
    if (!gemm_config_fits(p, c) || !gemm_grid_fits(p, g, c))
      continue;
    gemm_describe(p, c, description, sizeof description);
    if (strcmp(c->name, pick) == 0)
      out->heuristic = (int32_t)out->count;
    vulkan_put_variant(out, c->name, description);
  }
  if (out->count == 0) {
    snprintf(why, capacity, "no tile config fits this device's limits for this problem");
    return TSR_ERROR_UNSUPPORTED;
  }
  snprintf(out->reason, sizeof out->reason, "%s table: %s (%.3g outputs): %s",
           vulkan_config_class_name(cls), reason, outputs, out->variants[out->heuristic].name);
  return TSR_OK;
}

/* The listed config named `name` (NULL: the heuristic's pick). */
static const vulkan_gemm_config *gemm_choose(vulkan_queue *queue, const gemm_problem *g,
                                             const char *name, tsr_status *status) {
  vulkan_device *device = queue->device;
  tsr_plugin_variant_list list;
  memset(&list, 0, sizeof list);
  char why[VULKAN_MESSAGE_CAPACITY] = "";
  *status = gemm_variants(device, g, &list, why, sizeof why);
  if (*status != TSR_OK) {
    vulkan_set_error(device->plugin, "vulkan: %s: %s", g->grouped ? "grouped_gemm" : "gemm", why);
    return NULL;
  }
  const char *chosen = name ? name : list.variants[list.heuristic].name;
  for (uint32_t i = 0; i < list.count; i++)
    if (strcmp(list.variants[i].name, chosen) == 0)
      for (int j = 0; j < GEMM_CONFIGS; j++)
        if (strcmp(gemm_configs[j].name, chosen) == 0)
          return &gemm_configs[j];
  vulkan_set_error(device->plugin, "vulkan: %s: variant '%s' is not listed for this problem",
                   g->grouped ? "grouped_gemm" : "gemm", chosen);
  *status = TSR_ERROR_NOT_FOUND;
  return NULL;
}

/* Uploads the group table (prefix sums of M tiles, then of rows): in the
 * command buffer (vulkan_queue_upload) where it fits, else into the queue's
 * scratch with one fill per run of equal words. Nothing waits either way. */
static tsr_status gemm_group_table(vulkan_queue *queue, const gemm_problem *g, uint32_t bm,
                                   vulkan_binding *out) {
  uint64_t words = 2 * (uint64_t)g->batch + 2;
  uint32_t *table = malloc(words * sizeof *table);
  if (!table) {
    vulkan_set_error(queue->device->plugin, "vulkan: out of host memory for a group table");
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  uint64_t g_count = (uint64_t)g->batch;
  table[0] = 0;
  table[g_count + 1] = 0;
  for (uint64_t i = 0; i < g_count; i++) {
    table[i + 1] = table[i] + (uint32_t)(((uint64_t)g->group_sizes[i] + bm - 1) / bm);
    table[g_count + 2 + i] = table[g_count + 1 + i] + (uint32_t)g->group_sizes[i];
  }
  tsr_status status;
  if (words * 4 <= VULKAN_UPLOAD_BYTES) {
    status = vulkan_queue_upload(queue, table, (uint32_t)(words * 4), out);
  } else {
    status = vulkan_queue_scratch(queue, words * 4, out);
    if (status == TSR_OK)
      out->range = words * 4;
    for (uint64_t start = 0, w = 1; status == TSR_OK && start < words; w++) {
      if (w < words && table[w] == table[start])
        continue;
      vulkan_binding b = *out;
      b.offset += start * 4;
      status = vulkan_fill(queue, &b, (w - start) * 4, table[start]);
      start = w;
    }
  }
  free(table);
  return status;
}

/* ------------------------------------------------------------------------ */
/* NV -> KHR cooperative-matrix SPIR-V                                       */
/* ------------------------------------------------------------------------ */

/* SPIR-V opcodes and enumerants the rewrite touches. */
enum {
  SPV_OP_EXTENSION = 10,
  SPV_OP_CAPABILITY = 17,
  SPV_OP_TYPE_INT = 21,
  SPV_OP_TYPE_FLOAT = 22,
  SPV_OP_CONSTANT_TRUE = 41,
  SPV_OP_CONSTANT_FALSE = 42,
  SPV_OP_CONSTANT = 43,
  SPV_CAP_COOPMAT_NV = 5357,
  SPV_CAP_COOPMAT_KHR = 6022,
  SPV_OP_TYPE_COOPMAT_NV = 5358,
  SPV_OP_LOAD_NV = 5359,
  SPV_OP_STORE_NV = 5360,
  SPV_OP_MULADD_NV = 5361,
  SPV_OP_LENGTH_NV = 5362,
  SPV_OP_TYPE_COOPMAT_KHR = 4456,
  SPV_OP_LOAD_KHR = 4457,
  SPV_OP_STORE_KHR = 4458,
  SPV_OP_MULADD_KHR = 4459,
  SPV_OP_LENGTH_KHR = 4460
};

static uint32_t spv_word(uint32_t op, uint32_t count) {
  return count << 16 | op;
}

/* Rewrites the SPIR-V of gemm_coopmat.comp (GL_NV_cooperative_matrix) into
 * SPV_KHR_cooperative_matrix: capability and extension renamed, each NV
 * matrix type given the KHR use its shape implies (f32: accumulator; f16
 * 16 columns: A, 8 columns: B, which is why the shader multiplies 16x8x16),
 * loads and stores with a layout constant in place of the column-major bool
 * (and their operands reordered), multiply-add and length renumbered. The
 * instructions are otherwise the same, so one glslc build serves both
 * extensions. Returns a malloc'd module, or NULL for anything it does not
 * map. */
static uint32_t *coopmat_nv_to_khr(const uint32_t *in, size_t words, size_t *out_words) {
  if (words < 5 || in[0] != 0x07230203u)
    return NULL;
  uint32_t bound = in[3];
  /* Values of 32-bit integer constants, widths of float types, bool
   * constants (1 true, 2 false), indexed by id. */
  uint32_t *value = calloc(bound, sizeof *value);
  uint8_t *kind = calloc(bound, 1);
  /* The rewrite adds three constants (12 words) and a word per matrix type. */
  size_t types = 0;
  for (size_t i = 5; i < words && in[i] >> 16; i += in[i] >> 16)
    types += (in[i] & 0xffffu) == SPV_OP_TYPE_COOPMAT_NV;
  uint32_t *out = malloc((words + 12 + types) * sizeof *out);
  if (!value || !kind || !out) {
    free(value);
    free(kind);
    free(out);
    return NULL;
  }
  enum { KIND_CONST = 1, KIND_TRUE, KIND_FALSE, KIND_F16, KIND_F32 };
  uint32_t uint_type = 0;
  for (size_t i = 5; i < words;) {
    uint32_t op = in[i] & 0xffffu, n = in[i] >> 16;
    if (n == 0 || i + n > words)
      goto fail;
    if (op == SPV_OP_TYPE_INT && n == 4 && in[i + 2] == 32 && in[i + 3] == 0 && !uint_type)
      uint_type = in[i + 1];
    else if (op == SPV_OP_TYPE_FLOAT && n == 3 && in[i + 1] < bound)
      kind[in[i + 1]] = in[i + 2] == 16 ? KIND_F16 : in[i + 2] == 32 ? KIND_F32 : 0;
    else if (op == SPV_OP_CONSTANT && n == 4 && in[i + 2] < bound) {
      kind[in[i + 2]] = KIND_CONST;
      value[in[i + 2]] = in[i + 3];
    } else if ((op == SPV_OP_CONSTANT_TRUE || op == SPV_OP_CONSTANT_FALSE) && n == 3 &&
               in[i + 2] < bound)
      kind[in[i + 2]] = op == SPV_OP_CONSTANT_TRUE ? KIND_TRUE : KIND_FALSE;
    i += n;
  }
  if (!uint_type)
    goto fail;
  /* Three new constants: 0, 1, 2 (row-major / matrix A, column-major /
   * matrix B, accumulator). */
  uint32_t c[3] = {bound, bound + 1, bound + 2};
  memcpy(out, in, 5 * sizeof *out);
  out[3] = bound + 3;
  size_t o = 5;
  bool constants_out = false;
  for (size_t i = 5; i < words;) {
    uint32_t op = in[i] & 0xffffu, n = in[i] >> 16;
    const uint32_t *w = in + i;
    i += n;
    if (op == SPV_OP_CAPABILITY && n == 2 && w[1] == SPV_CAP_COOPMAT_NV) {
      out[o++] = w[0];
      out[o++] = SPV_CAP_COOPMAT_KHR;
    } else if (op == SPV_OP_EXTENSION && n == 8 &&
               memcmp(w + 1, "SPV_NV_cooperative_matrix", 26) == 0) {
      out[o++] = w[0];
      memset(out + o, 0, 7 * sizeof *out);
      memcpy(out + o, "SPV_KHR_cooperative_matrix", 27);
      o += 7;
    } else if (op == SPV_OP_TYPE_COOPMAT_NV && n == 6) {
      if (!constants_out) {
        for (uint32_t k = 0; k < 3; k++) {
          out[o++] = spv_word(SPV_OP_CONSTANT, 4);
          out[o++] = uint_type;
          out[o++] = c[k];
          out[o++] = k;
        }
        constants_out = true;
      }
      uint32_t component = w[2], rows = w[4], cols = w[5];
      if (component >= bound || rows >= bound || cols >= bound || kind[rows] != KIND_CONST ||
          kind[cols] != KIND_CONST || value[rows] != 16)
        goto fail;
      uint32_t use;
      if (kind[component] == KIND_F32)
        use = 2;
      else if (kind[component] == KIND_F16 && value[cols] == 16)
        use = 0;
      else if (kind[component] == KIND_F16 && value[cols] == 8)
        use = 1;
      else
        goto fail;
      out[o++] = spv_word(SPV_OP_TYPE_COOPMAT_KHR, 7);
      memcpy(out + o, w + 1, 5 * sizeof *out);
      o += 5;
      out[o++] = c[use];
    } else if ((op == SPV_OP_LOAD_NV && n >= 6) || (op == SPV_OP_STORE_NV && n >= 5)) {
      /* load: type result pointer stride colmajor [access...];
       * store: pointer object stride colmajor [access...]. KHR: the layout
       * before the stride. */
      size_t at = op == SPV_OP_LOAD_NV ? 4 : 3;
      uint32_t stride = w[at], major = w[at + 1];
      if (major >= bound || (kind[major] != KIND_TRUE && kind[major] != KIND_FALSE))
        goto fail;
      out[o++] = spv_word(op == SPV_OP_LOAD_NV ? SPV_OP_LOAD_KHR : SPV_OP_STORE_KHR, n);
      memcpy(out + o, w + 1, (at - 1) * sizeof *out);
      o += at - 1;
      out[o++] = c[kind[major] == KIND_TRUE ? 1 : 0];
      out[o++] = stride;
      memcpy(out + o, w + at + 2, (n - at - 2) * sizeof *out);
      o += n - at - 2;
    } else if (op == SPV_OP_MULADD_NV || op == SPV_OP_LENGTH_NV) {
      out[o++] = spv_word(op == SPV_OP_MULADD_NV ? SPV_OP_MULADD_KHR : SPV_OP_LENGTH_KHR, n);
      memcpy(out + o, w + 1, (n - 1) * sizeof *out);
      o += n - 1;
    } else {
      memcpy(out + o, w, n * sizeof *out);
      o += n;
    }
  }
  free(value);
  free(kind);
  *out_words = o;
  return out;
fail:
  free(value);
  free(kind);
  free(out);
  return NULL;
}

/* The KHR forms of the coopmat builds, rewritten once per process and kept
 * (a few hundred KB at most; the blobs they come from live as long). */
typedef struct khr_code {
  struct khr_code *next;
  char name[64]; /* the pipeline cache key: "<embedded name>_khr" */
  uint32_t *code;
  size_t words;
} khr_code;

static khr_code *khr_codes;
static pthread_mutex_t khr_codes_lock = PTHREAD_MUTEX_INITIALIZER;

/* The KHR form of embedded shader `name` with specialisation constants
 * spec[0..n). */
static tsr_status matrix_pipeline_khr(vulkan_device *device, const char *name, const uint32_t *spec,
                                      uint32_t n_spec, const vulkan_pipeline **out) {
  pthread_mutex_lock(&khr_codes_lock);
  khr_code *found = NULL;
  for (khr_code *e = khr_codes; e && !found; e = e->next)
    if (strncmp(e->name, name, strlen(name)) == 0 && strcmp(e->name + strlen(name), "_khr") == 0)
      found = e;
  if (!found) {
    const vulkan_shader_blob *blob = vulkan_shader_find(name);
    size_t words = 0;
    uint32_t *code = blob ? coopmat_nv_to_khr(blob->code, blob->bytes / 4, &words) : NULL;
    found = code ? calloc(1, sizeof *found) : NULL;
    if (found) {
      snprintf(found->name, sizeof found->name, "%s_khr", name);
      found->code = code;
      found->words = words;
      found->next = khr_codes;
      khr_codes = found;
    } else {
      free(code);
    }
  }
  pthread_mutex_unlock(&khr_codes_lock);
  if (!found) {
    vulkan_set_error(device->plugin, "vulkan: %s: no KHR cooperative-matrix form", name);
    return TSR_ERROR_BACKEND;
  }
  vulkan_shader_blob blob = {found->name, found->code, found->words * 4};
  return vulkan_pipeline_get_code(device, &blob, spec, n_spec, 0, out);
}

/* A coopmat build's pipeline on the device's route: the KHR form where the
 * device lists the shape there (TESSERA_VULKAN_COOPMAT_NV keeps the NV
 * build), else the NV build in subgroups of 32. */
static tsr_status coopmat_pipeline(vulkan_device *device, const char *name, const uint32_t *spec,
                                   uint32_t n_spec, const vulkan_pipeline **out) {
  const vulkan_device_props *props = device->props;
  if (coopmat_route_of(props) == COOPMAT_KHR && !device->coopmat_force_nv)
    return matrix_pipeline_khr(device, name, spec, n_spec, out);
  return vulkan_pipeline_get(device, name, spec, n_spec,
                             props->subgroup_min != props->subgroup_max ? 32 : 0, out);
}

static tsr_status gemm_run(vulkan_queue *queue, const gemm_problem *g, const char *variant) {
  vulkan_device *device = queue->device;
  const vulkan_device_props *props = device->props;
  tsr_status status;
  const vulkan_gemm_config *c = gemm_choose(queue, g, variant, &status);
  if (!c)
    return status;
  if (g->m == 0 || g->n == 0 || g->batch == 0)
    return TSR_OK;

  vulkan_binding bind[GEMM_BINDINGS];
  memset(bind, 0, sizeof bind);
  vulkan_gemm_push push;
  memset(&push, 0, sizeof push);
  char why[VULKAN_MESSAGE_CAPACITY] = "";
  const tsr_plugin_tensor *ts[5] = {g->a, g->b, g->c, g->bias, g->d};
  uint32_t first[5] = {0};
  for (int i = 0; i < 5; i++) {
    if (!ts[i])
      continue;
    if (!vulkan_bind_tensor(device, ts[i], &bind[i], &first[i], why, sizeof why)) {
      vulkan_set_error(device->plugin, "vulkan: %s: %s", g->grouped ? "grouped_gemm" : "gemm", why);
      return TSR_ERROR_UNSUPPORTED;
    }
  }
  if (!g->c)
    bind[BIND_C] = bind[BIND_D];
  if (!g->bias)
    bind[BIND_BIAS] = bind[BIND_D];
  push.m = (uint32_t)g->m;
  push.n = (uint32_t)g->n;
  push.k = (uint32_t)g->k;
  push.batch = (uint32_t)g->batch;
  push.alpha = g->alpha;
  push.beta = g->beta;
  push.flags =
      (g->c ? GEMM_HAS_C : 0u) | (g->bias ? GEMM_HAS_BIAS : 0u) | ((uint32_t)g->activation << 4);
  push.a_first = first[0];
  push.b_first = first[1];
  push.c_first = first[2];
  push.bias_first = first[3];
  push.d_first = first[4];
  if (g->grouped) {
    /* a [T, K], b [G, K, N], bias [G, N], d [T, N] */
    push.a_sm = stride_of(g->a, 0);
    push.a_sk = stride_of(g->a, 1);
    push.d_sm = stride_of(g->d, 0);
    push.d_sn = stride_of(g->d, 1);
    if (g->bias) {
      push.bias_sb = stride_of(g->bias, 0);
      push.bias_sn = stride_of(g->bias, 1);
    }
  } else {
    push.a_sb = stride_of(g->a, 0);
    push.a_sm = stride_of(g->a, 1);
    push.a_sk = stride_of(g->a, 2);
    push.d_sb = stride_of(g->d, 0);
    push.d_sm = stride_of(g->d, 1);
    push.d_sn = stride_of(g->d, 2);
    if (g->c) {
      push.c_sb = stride_of(g->c, 0);
      push.c_sm = stride_of(g->c, 1);
      push.c_sn = stride_of(g->c, 2);
    }
    if (g->bias)
      push.bias_sn = stride_of(g->bias, 0);
  }
  push.b_sb = stride_of(g->b, 0);
  push.b_sk = stride_of(g->b, 1);
  push.b_sn = stride_of(g->b, 2);

  /* The shaders declare the group table either way: plain GEMM binds D there
   * (never read), so every declared binding is written. */
  bind[BIND_GROUPS] = bind[BIND_D];
  uint32_t n_bind = GEMM_BINDINGS;
  if (g->grouped) {
    status = gemm_group_table(queue, g, c->bm, &bind[BIND_GROUPS]);
    if (status != TSR_OK)
      return status;
  }

  uint32_t a_kfast = push.a_sk == 1 || g->k == 1;
  uint32_t b_nfast = push.b_sn == 1 || g->n == 1;
  uint32_t threads = gemm_threads(props, c);
  char name[48];
  const vulkan_pipeline *pipeline = NULL;
  if (c->kind == GEMM_SIMT) {
    /* CPU implementations compile the rolled build (see gemm.comp). */
    if (props->type == VK_PHYSICAL_DEVICE_TYPE_CPU)
      snprintf(name, sizeof name, "gemm_%s_rolled", dtype_name(g->dtype));
    else
      snprintf(name, sizeof name, "gemm_%s_%ux%u", dtype_name(g->dtype), c->tm, c->tn);
    uint32_t spec[10] = {threads, c->bm,   c->bn,   c->bk,      c->tm,
                         c->tn,   a_kfast, b_nfast, g->out_f32, g->grouped};
    status = vulkan_pipeline_get(device, name, spec, 10, 0, &pipeline);
  } else {
    /* 8-element (16-byte) loads where the contiguous dimension and every
     * other stride and start allow it. */
    uint32_t a_vec =
        a_kfast ? (push.a_sm % 8 == 0 && push.a_sb % 8 == 0 && first[0] % 8 == 0 && g->k % 8 == 0)
                : (push.a_sk % 8 == 0 && push.a_sb % 8 == 0 && first[0] % 8 == 0 && g->m % 8 == 0 &&
                   !g->grouped && push.a_sm == 1);
    uint32_t b_vec =
        b_nfast ? (push.b_sk % 8 == 0 && push.b_sb % 8 == 0 && first[1] % 8 == 0 && g->n % 8 == 0)
                : (push.b_sn % 8 == 0 && push.b_sb % 8 == 0 && first[1] % 8 == 0 && g->k % 8 == 0 &&
                   push.b_sk == 1);
    snprintf(name, sizeof name, "gemm_coopmat_f16_%ux%u_%ux%u", c->bm, c->bn, c->sg_m, c->sg_n);
    uint32_t spec[15] = {threads, c->bm, c->bn,      c->bk,      c->sg_m,
                         c->sg_n, c->wm, c->wn,      a_kfast,    b_nfast,
                         a_vec,   b_vec, g->out_f32, g->grouped, device->coopmat_probe};
    status = coopmat_pipeline(device, name, spec, 15, &pipeline);
  }
  if (status != TSR_OK)
    return status;
  uint64_t grid[3];
  gemm_grid(g, c, grid);
  if (grid[0] == 0)
    return TSR_OK;
  return vulkan_dispatch(queue, pipeline, bind, n_bind, &push, sizeof push, (uint32_t)grid[0],
                         (uint32_t)grid[1], (uint32_t)grid[2]);
}

/* ------------------------------------------------------------------------ */
/* Attention                                                                 */
/* ------------------------------------------------------------------------ */

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

static const vulkan_attention_config attention_configs[] = {
    {"flash_d32_q32_r4_t64", 32, 32, 32, 4, 8, false},
    {"flash_d64_q32_r4_t64", 32, 32, 64, 4, 8, false},
    {"flash_d64_q64_r4_t128", 64, 32, 64, 4, 8, false},
    {"flash_d128_q32_r4_t64", 32, 32, 128, 4, 8, false},
    {"flash_d128_q16_r2_t64", 16, 32, 128, 2, 8, false},
    {"flash_d128_q32_r2_t128", 32, 32, 128, 2, 8, false},
    {"flash_d256_q16_r4_t64", 16, 16, 256, 4, 16, false},
    {"flash_d256_q8_r2_t64", 8, 16, 256, 2, 16, false},
    {"flash_d256_q16_r2_t128", 16, 16, 256, 2, 16, false},
    {"coopmat_d64_q64", 64, 64, 64, 0, 0, true},
    {"coopmat_d128_q64", 64, 64, 128, 0, 0, true},
};
enum { ATTENTION_CONFIGS = sizeof attention_configs / sizeof attention_configs[0] };

static uint32_t attention_threads(const vulkan_attention_config *c) {
  return c->coopmat ? 128 : c->br / c->rq * c->tpr;
}

static uint32_t attention_shared_bytes(const vulkan_attention_config *c) {
  /* coopmat: the staged f16 rows (padded by 8), then a 16 x bc f32 region
   * per subgroup. */
  if (c->coopmat)
    return 2 * c->bc * (c->dp + 8) + 4 * 16 * c->bc * 4;
  return 4 * ((c->br + c->bc) * (c->dp + 4) + c->br * c->bc);
}

/* The coopmat attention: f16 on a device with the GEMM's 16x8x16 shape, and
 * subgroup shuffles and votes (its scalar softmax pairs invocations). */
static bool attention_coopmat_usable(const vulkan_device_props *p, const tsr_attention_args *a) {
  return a->q.dtype == TSR_DTYPE_F16 && coopmat_route_of(p) != COOPMAT_NONE &&
         p->subgroup_shuffle_vote;
}

static bool attention_problem_ok(const vulkan_device *device, const tsr_attention_args *a,
                                 char *why, size_t capacity) {
  const vulkan_device_props *p = device->props;
  if (!dtype_usable(p, a->q.dtype, why, capacity))
    return false;
  const tsr_plugin_tensor *ts[4] = {&a->q, &a->k, &a->v, &a->o};
  static const char *names[4] = {"q", "k", "v", "o"};
  for (int i = 0; i < 4; i++)
    if (ts[i]->shape[3] > 1 && ts[i]->strides[3] != 1) {
      snprintf(why, capacity, "%s's head dimension has stride %lld; this plugin needs 1", names[i],
               (long long)ts[i]->strides[3]);
      return false;
    }
  if (a->q.shape[3] > 256) {
    snprintf(why, capacity, "head dim %lld is above 256", (long long)a->q.shape[3]);
    return false;
  }
  /* The shader's key positions (i + Skv - Sq, +- windows) are 32-bit ints. */
  if (a->q.shape[1] + a->k.shape[1] > INT32_MAX / 2 || a->q.shape[2] > p->max_workgroup_count[1] ||
      a->q.shape[0] > p->max_workgroup_count[2]) {
    snprintf(why, capacity, "sequence, head or batch extents beyond the device's grid");
    return false;
  }
  return true;
}

static tsr_status attention_variants(const vulkan_device *device, const tsr_attention_args *a,
                                     tsr_plugin_variant_list *out, char *why, size_t capacity) {
  const vulkan_device_props *p = device->props;
  if (!attention_problem_ok(device, a, why, capacity))
    return TSR_ERROR_UNSUPPORTED;
  vulkan_config_class cls = vulkan_config_class_of(p);
  int64_t dim = a->q.shape[3];
  uint32_t dp = 32;
  while (dp < dim)
    dp *= 2;
  /* lavapipe: the 64-invocation configs (fewer SIMD passes per barrier);
   * GPUs: 128 invocations and 32 rows where the head dim allows. */
  bool small_wg = cls == VULKAN_CLASS_LAVAPIPE;
  bool coop = attention_coopmat_usable(p, a);
  const char *pick = NULL;
  uint32_t picked_rows = 0, coop_dp = 0;
  char description[160];
  out->count = 0;
  out->heuristic = 0;
  for (int i = 0; i < ATTENTION_CONFIGS; i++) {
    const vulkan_attention_config *c = &attention_configs[i];
    if (c->dp < dim || attention_threads(c) > p->max_workgroup_invocations ||
        attention_shared_bytes(c) > p->shared_memory_bytes || (c->coopmat && !coop))
      continue;
    uint64_t groups = ((uint64_t)a->q.shape[1] + c->br - 1) / c->br;
    if (groups > p->max_workgroup_count[0])
      continue;
    if (c->coopmat) {
      snprintf(description, sizeof description,
               "cooperative matrices (%s) 16x8x16 f16 -> f32: %u query rows x %u keys per step, "
               "head dim <= %u, 4 subgroups of 32, %u B shared, lazily rescaled output",
               coopmat_route_of(p) == COOPMAT_KHR ? "KHR" : "NV", c->br, c->bc, c->dp,
               attention_shared_bytes(c));
      /* The smallest head-dim capacity wins over every scalar config
       * (H100, f16 D128: see docs/PERFORMANCE.md). */
      if (!coop_dp || c->dp < coop_dp) {
        coop_dp = c->dp;
        pick = c->name;
        out->heuristic = (int32_t)out->count;
      }
      vulkan_put_variant(out, c->name, description);
      continue;
    }
    snprintf(description, sizeof description,
             "scalar online softmax: %u query rows x %u keys per step, head dim <= %u, %u rows "
             "per invocation, %u invocations, %u B shared",
             c->br, c->bc, c->dp, c->rq, attention_threads(c), attention_shared_bytes(c));
    /* GPUs: 128 invocations, the most rows per workgroup (H100, f16 D128:
     * q32_r2_t128 90.6 ms, q32_r4_t64 124.6 ms). */
    bool want = c->dp == dp &&
                (small_wg ? attention_threads(c) == 64 : attention_threads(c) == 128 || !pick);
    if (want && !coop_dp && (!pick || c->br > picked_rows)) {
      picked_rows = c->br;
      pick = c->name;
      out->heuristic = (int32_t)out->count;
    }
    vulkan_put_variant(out, c->name, description);
  }
  if (out->count == 0) {
    snprintf(why, capacity, "no attention config fits this device's limits for this problem");
    return TSR_ERROR_UNSUPPORTED;
  }
  snprintf(out->reason, sizeof out->reason,
           "%s table: %s, the smallest head-dim capacity for D = %lld, %s: %s",
           vulkan_config_class_name(cls), coop_dp ? "f16 on cooperative matrices" : "scalar",
           (long long)dim,
           coop_dp    ? "64 rows"
           : small_wg ? "64-invocation workgroups"
                      : "wide workgroups",
           out->variants[out->heuristic].name);
  return TSR_OK;
}

/* The coopmat build: 16-byte staging loads where dim is the build's head dim
 * and every start and stride of q, k and v is a multiple of 8 elements. */
static tsr_status attention_coopmat_run(vulkan_queue *queue, const vulkan_attention_config *c,
                                        const tsr_attention_args *a, const vulkan_binding *bind,
                                        const uint32_t *first, const vulkan_attention_push *push) {
  vulkan_device *device = queue->device;
  const vulkan_attention_view *views[3] = {&push->q, &push->k, &push->v};
  uint32_t vec = push->dim == c->dp;
  for (int i = 0; i < 3; i++)
    vec = vec && first[i] % 8 == 0 && views[i]->s0 % 8 == 0 && views[i]->s1 % 8 == 0 &&
          views[i]->s2 % 8 == 0;
  char name[48];
  snprintf(name, sizeof name, "attention_coopmat_f16_d%u", c->dp);
  uint32_t spec[1] = {vec};
  const vulkan_pipeline *pipeline = NULL;
  tsr_status status = coopmat_pipeline(device, name, spec, 1, &pipeline);
  if (status != TSR_OK)
    return status;
  return vulkan_dispatch(queue, pipeline, bind, 5, push, sizeof *push,
                         (uint32_t)((a->q.shape[1] + c->br - 1) / c->br), (uint32_t)a->q.shape[2],
                         (uint32_t)a->q.shape[0]);
}

/* A window as the shader takes it: -1 when unbounded, or wide enough that
 * it bounds nothing (every key is within Sq + Skv of every query), so that
 * position arithmetic never overflows. */
static int32_t clamp_window(int64_t w, int64_t sq, int64_t skv) {
  return w < 0 || w >= sq + skv ? -1 : (int32_t)w;
}

tsr_status vulkan_run_attention(vulkan_queue *queue, const tsr_attention_args *a,
                                const char *variant) {
  vulkan_device *device = queue->device;
  tsr_plugin_variant_list list;
  memset(&list, 0, sizeof list);
  char why[VULKAN_MESSAGE_CAPACITY] = "";
  tsr_status status = attention_variants(device, a, &list, why, sizeof why);
  if (status != TSR_OK) {
    vulkan_set_error(device->plugin, "vulkan: attention: %s", why);
    return status;
  }
  const char *chosen = variant ? variant : list.variants[list.heuristic].name;
  const vulkan_attention_config *c = NULL;
  for (uint32_t i = 0; i < list.count && !c; i++)
    if (strcmp(list.variants[i].name, chosen) == 0)
      for (int j = 0; j < ATTENTION_CONFIGS; j++)
        if (strcmp(attention_configs[j].name, chosen) == 0)
          c = &attention_configs[j];
  if (!c) {
    vulkan_set_error(device->plugin, "vulkan: attention: variant '%s' is not listed", chosen);
    return TSR_ERROR_NOT_FOUND;
  }
  int64_t batch = a->q.shape[0], sq = a->q.shape[1], hq = a->q.shape[2], dim = a->q.shape[3];
  int64_t skv = a->k.shape[1], hkv = a->k.shape[2];
  if (batch == 0 || sq == 0 || hq == 0 || dim == 0)
    return TSR_OK;

  vulkan_binding bind[5];
  uint32_t first[5] = {0};
  const tsr_plugin_tensor *ts[5] = {&a->q, &a->k, &a->v, &a->o, a->lse.buffer ? &a->lse : NULL};
  for (int i = 0; i < 5; i++) {
    if (!ts[i]) {
      bind[i] = bind[3];
      continue;
    }
    /* Skv = 0 leaves k and v without elements: bind o in their place. */
    if (vulkan_tensor_span(ts[i]) == 0) {
      bind[i] = bind[3 < i ? 3 : 0];
      continue;
    }
    if (!vulkan_bind_tensor(device, ts[i], &bind[i], &first[i], why, sizeof why)) {
      vulkan_set_error(device->plugin, "vulkan: attention: %s", why);
      return TSR_ERROR_UNSUPPORTED;
    }
  }
  vulkan_attention_push push;
  memset(&push, 0, sizeof push);
  push.sq = (uint32_t)sq;
  push.skv = (uint32_t)skv;
  push.hq = (uint32_t)hq;
  push.group = (uint32_t)(hkv > 0 ? hq / hkv : 1);
  vulkan_attention_view *views[5] = {&push.q, &push.k, &push.v, &push.o, &push.lse};
  for (int i = 0; i < 5; i++)
    if (ts[i])
      *views[i] = (vulkan_attention_view){first[i], stride_of(ts[i], 0), stride_of(ts[i], 1),
                                          stride_of(ts[i], 2)};
  push.flags = a->lse.buffer ? 1u : 0u;
  push.dim = (uint32_t)dim;
  push.window_left = clamp_window(a->window_left, sq, skv);
  push.window_right = a->causal ? 0 : clamp_window(a->window_right, sq, skv);
  push.scale_log2 = (float)((double)a->scale * 1.4426950408889634);

  char name[48];
  if (c->coopmat)
    return attention_coopmat_run(queue, c, a, bind, first, &push);
  /* CPU implementations compile the rolled build (see attention.comp). */
  if (device->props->type == VK_PHYSICAL_DEVICE_TYPE_CPU)
    snprintf(name, sizeof name, "attention_%s_rolled", dtype_name(a->q.dtype));
  else
    snprintf(name, sizeof name, "attention_%s_d%u_q%u_t%u", dtype_name(a->q.dtype), c->dp, c->rq,
             c->tpr);
  uint32_t spec[5] = {attention_threads(c), c->br, c->bc, c->dp, c->rq};
  const vulkan_pipeline *pipeline = NULL;
  status = vulkan_pipeline_get(device, name, spec, 5, 0, &pipeline);
  if (status != TSR_OK)
    return status;
  return vulkan_dispatch(queue, pipeline, bind, 5, &push, sizeof push,
                         (uint32_t)((sq + c->br - 1) / c->br), (uint32_t)hq, (uint32_t)batch);
}

/* ------------------------------------------------------------------------ */
/* Entry points (vulkan_internal.h)                                          */
/* ------------------------------------------------------------------------ */

tsr_status vulkan_matrix_variants(const vulkan_device *device, tsr_op op, const void *args,
                                  tsr_plugin_variant_list *out, char *why, size_t why_capacity) {
  switch (op) {
  case TSR_OP_GEMM: {
    gemm_problem g = gemm_problem_of(args);
    return gemm_variants(device, &g, out, why, why_capacity);
  }
  case TSR_OP_GROUPED_GEMM: {
    gemm_problem g = grouped_problem_of(args);
    return gemm_variants(device, &g, out, why, why_capacity);
  }
  case TSR_OP_ATTENTION:
    return attention_variants(device, args, out, why, why_capacity);
  default:
    snprintf(why, why_capacity, "not a matrix op");
    return TSR_ERROR_UNSUPPORTED;
  }
}

tsr_status vulkan_run_gemm(vulkan_queue *queue, const tsr_gemm_args *args, const char *variant) {
  gemm_problem g = gemm_problem_of(args);
  return gemm_run(queue, &g, variant);
}

tsr_status vulkan_run_grouped_gemm(vulkan_queue *queue, const tsr_grouped_gemm_args *args,
                                   const char *variant) {
  gemm_problem g = grouped_problem_of(args);
  return gemm_run(queue, &g, variant);
}
