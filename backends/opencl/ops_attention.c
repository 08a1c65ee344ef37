/* SPDX-License-Identifier: Apache-2.0 */
/* Attention (kernels/attention.cl): the variant table and heuristic, the
 * build options a problem's signature decides (dtype, tile, vector access
 * of each tensor), the parameters and the launches. Two kernels: "flash_*"
 * (online softmax over query tiles that share K/V tiles in local memory,
 * head dims up to 256 in classes of 64, 128 and 256; when the grid does not
 * fill the device, as in decode, the keys are split over work-groups and a
 * second kernel merges the partial rows) and "generic_*" (a work-group per
 * query row, any head dim, little local memory), so that every problem
 * runs. */
#include <stdio.h>
#include <string.h>

#include "kernels/opencl_types.h"

#include "kernels/params_attention.h"
#include "opencl_internal.h"

/* ---- variants (moves to configs.c) ---- */

typedef enum opencl_attention_kind {
  OPENCL_ATTENTION_FLASH,
  OPENCL_ATTENTION_GENERIC
} opencl_attention_kind;

typedef struct opencl_attention_row {
  const char *name;
  opencl_attention_kind kind;
  /* flash: head dims up to dp; bq query rows and bkv keys per tile; tpr work
   * items share rq rows (bq / rq * tpr work items) */
  uint32_t dp, bq, bkv, rq, tpr;
  /* generic: work items (a power of two), output columns per work item */
  uint32_t threads, cpt;
} opencl_attention_row;

static const opencl_attention_row attention_rows[] = {
    {"flash_d64_q32_k32", OPENCL_ATTENTION_FLASH, 64, 32, 32, 4, 8, 0, 0},
    {"flash_d64_q64_k32", OPENCL_ATTENTION_FLASH, 64, 64, 32, 4, 8, 0, 0},
    {"flash_d128_q16_k16", OPENCL_ATTENTION_FLASH, 128, 16, 16, 2, 8, 0, 0},
    {"flash_d128_q16_k32", OPENCL_ATTENTION_FLASH, 128, 16, 32, 2, 8, 0, 0},
    {"flash_d128_q32_k32", OPENCL_ATTENTION_FLASH, 128, 32, 32, 2, 8, 0, 0},
    {"flash_d256_q8_k16", OPENCL_ATTENTION_FLASH, 256, 8, 16, 2, 16, 0, 0},
    {"flash_d256_q16_k16", OPENCL_ATTENTION_FLASH, 256, 16, 16, 2, 16, 0, 0},
    /* few rows (decode): a row per work item row-group */
    {"flash_d64_q8_k32", OPENCL_ATTENTION_FLASH, 64, 8, 32, 1, 8, 0, 0},
    {"flash_d128_q8_k32", OPENCL_ATTENTION_FLASH, 128, 8, 32, 1, 8, 0, 0},
    {"flash_d256_q4_k16", OPENCL_ATTENTION_FLASH, 256, 4, 16, 1, 16, 0, 0},
    {"generic_t64", OPENCL_ATTENTION_GENERIC, 0, 0, 0, 0, 0, 64, 4},
    {"generic_t128", OPENCL_ATTENTION_GENERIC, 0, 0, 0, 0, 0, 128, 4},
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
    [OPENCL_CLASS_GENERIC] = {attention_order_gpu, "generic_t128", 2, 8},
    [OPENCL_CLASS_NVIDIA] = {attention_order_gpu, "generic_t128", 2, 8},
    [OPENCL_CLASS_AMD] = {attention_order_gpu, "generic_t128", 2, 8},
    [OPENCL_CLASS_INTEL] = {attention_order_gpu, "generic_t128", 2, 8},
    [OPENCL_CLASS_MALI] = {attention_order_mobile, "generic_t64", 2, 4},
    [OPENCL_CLASS_ADRENO] = {attention_order_mobile, "generic_t64", 2, 4},
    [OPENCL_CLASS_POCL_CPU] = {attention_order_cpu, "generic_t64", 2, 2},
};

static const attention_class_row *attention_class_of(const opencl_device_props *props) {
  opencl_class c =
      props->device_class < OPENCL_CLASS_COUNT ? props->device_class : OPENCL_CLASS_GENERIC;
  return &attention_classes[c];
}

static const opencl_attention_row *attention_row_find(const char *name) {
  return tsr_plugin_row_find(attention_rows, ATTENTION_ROWS, sizeof attention_rows[0], name);
}

/* ---- problems ---- */

/* Extents the kernels' 32-bit positions take: i + Skv - Sq +- a window, and
 * the packed rows Sq * (Hq / Hkv), stay far from overflow. */
#define ATTENTION_MAX_EXTENT ((int64_t)1 << 30)

typedef struct attention_problem {
  const tsr_attention_args *a;
  int64_t batch, sq, skv, hq, hkv, dim, group;
  bool lse;
} attention_problem;

static attention_problem problem_of(const void *args) {
  const tsr_attention_args *a = args;
  attention_problem g;
  g.a = a;
  g.batch = a->q.shape[0];
  g.sq = a->q.shape[1];
  g.hq = a->q.shape[2];
  g.dim = a->q.shape[3];
  g.skv = a->k.shape[1];
  g.hkv = a->k.shape[2];
  g.group = g.hkv > 0 ? g.hq / g.hkv : 1;
  g.lse = a->lse.buffer != NULL;
  return g;
}

/* Nothing to compute: no rows, or no columns and no lse. */
static bool attention_empty(const attention_problem *g) {
  return g->batch == 0 || g->sq == 0 || g->hq == 0 || (g->dim == 0 && !g->lse);
}

/* A stride as the kernels use it: 0 where the extent is 1. */
static int64_t stride_of(const tsr_plugin_tensor *t, int dim) {
  return t->shape[dim] > 1 ? t->strides[dim] : 0;
}

/* Whether four head-dim elements of `t` go in one vector access: a
 * contiguous head dim, a multiple of 4 long. */
static bool head_vector(const tsr_plugin_tensor *t) {
  return t->shape[3] > 0 && t->shape[3] % 4 == 0 && t->strides[3] == 1;
}

/* The smallest flash head-dim class holding `dim`, or 0 above 256. */
static uint32_t dim_class(int64_t dim) {
  return dim <= 64 ? 64 : dim <= 128 ? 128 : dim <= 256 ? 256 : 0;
}

static uint32_t row_threads(const opencl_attention_row *row) {
  return row->kind == OPENCL_ATTENTION_FLASH ? row->bq / row->rq * row->tpr : row->threads;
}

static uint64_t row_local_bytes(const opencl_attention_row *row) {
  if (row->kind == OPENCL_ATTENTION_GENERIC)
    return 8ull * row->threads;
  /* q and k/v tiles in float4 rows padded by one, then the probabilities */
  return 16ull * (row->bq + row->bkv) * (row->dp / 4 + 1) + 4ull * row->bq * row->bkv;
}

static uint64_t ceil_div(uint64_t x, uint64_t y) {
  return (x + y - 1) / y;
}

/* Work-groups along the first grid dimension. */
static uint64_t row_groups(const attention_problem *g, const opencl_attention_row *row) {
  if (row->kind == OPENCL_ATTENTION_GENERIC)
    return (uint64_t)g->sq;
  return ceil_div((uint64_t)g->sq * (uint64_t)g->group, row->bq);
}

/* Split keys: each range at least this many keys, at most this many ranges,
 * and the scratch of partial rows at most this large. */
enum { ATTENTION_SPLIT_MIN_KEYS = 64, ATTENTION_SPLIT_MAX = 128 };
#define ATTENTION_SPLIT_MAX_BYTES ((uint64_t)256 << 20)

static uint64_t device_want(const opencl_device_props *props) {
  uint64_t units = props->compute_units ? props->compute_units : 16;
  return attention_class_of(props)->groups_per_unit * units;
}

/* Work-groups of the whole grid, before any split. */
static uint64_t row_all_groups(const attention_problem *g, const opencl_attention_row *row) {
  return row_groups(g, row) * (uint64_t)(row->kind == OPENCL_ATTENTION_FLASH ? g->hkv : g->hq) *
         (uint64_t)g->batch;
}

/* Key ranges of a flash row (1: no split) and the keys of each (a multiple
 * of the key tile): split when the grid does not fill the device and the
 * keys are many (decode), decided from the signature alone. */
static uint32_t attention_splits(const opencl_device_props *props, const attention_problem *g,
                                 const opencl_attention_row *row, uint32_t *kv_chunk) {
  *kv_chunk = 0;
  if (row->kind != OPENCL_ATTENTION_FLASH || attention_empty(g))
    return 1;
  uint64_t groups = row_all_groups(g, row), want = device_want(props);
  uint64_t most = (uint64_t)g->skv / ATTENTION_SPLIT_MIN_KEYS;
  if (groups == 0 || groups >= want || most < 2)
    return 1;
  uint64_t units = props->compute_units ? props->compute_units : 16;
  want = attention_class_of(props)->split_groups_per_unit * units;
  uint64_t splits = ceil_div(want, groups);
  if (splits > most)
    splits = most;
  if (splits > ATTENTION_SPLIT_MAX)
    splits = ATTENTION_SPLIT_MAX;
  uint64_t chunk = ceil_div(ceil_div((uint64_t)g->skv, splits), row->bkv) * row->bkv;
  splits = ceil_div((uint64_t)g->skv, chunk);
  uint64_t part_rows = (uint64_t)g->batch * (uint64_t)g->hq * (uint64_t)g->sq;
  if (splits < 2 || splits * part_rows * ((uint64_t)g->dim + 2) * 4 > ATTENTION_SPLIT_MAX_BYTES ||
      part_rows * 64 > UINT32_MAX || groups * splits * row_threads(row) > UINT32_MAX)
    return 1;
  *kv_chunk = (uint32_t)chunk;
  return (uint32_t)splits;
}

/* ---- listing ---- */

static bool problem_ok(const attention_problem *g, char *why, size_t capacity) {
  int32_t dtype = g->a->q.dtype;
  if (dtype != TSR_DTYPE_F32 && dtype != TSR_DTYPE_F16 && dtype != TSR_DTYPE_BF16) {
    snprintf(why, capacity, "q's dtype %s is not f32, f16 or bf16", tsr_plugin_dtype_name(dtype));
    return false;
  }
  if (g->hq > INT32_MAX || g->batch > INT32_MAX || g->sq > ATTENTION_MAX_EXTENT ||
      g->skv > ATTENTION_MAX_EXTENT || g->dim > ATTENTION_MAX_EXTENT ||
      g->sq * g->group > ATTENTION_MAX_EXTENT) {
    snprintf(why, capacity,
             "extents beyond the kernels' 32-bit positions (Sq %lld, Skv %lld, Hq %lld, D %lld, "
             "B %lld; at most 2^30 each and Sq * Hq / Hkv at most 2^30)",
             (long long)g->sq, (long long)g->skv, (long long)g->hq, (long long)g->dim,
             (long long)g->batch);
    return false;
  }
  return true;
}

static bool row_fits(const opencl_device_props *props, const opencl_attention_row *row) {
  uint32_t threads = row_threads(row);
  if (threads > props->max_work_group || threads > props->max_work_item[0])
    return false;
  return props->local_is_global || row_local_bytes(row) <= props->local_memory_bytes;
}

/* Whether the row takes the problem: flash rows up to their head dim, and a
 * first grid dimension of at most 2^32 - 1 work items (what every runtime
 * takes). */
static bool row_runs(const attention_problem *g, const opencl_attention_row *row) {
  if (row->kind == OPENCL_ATTENTION_FLASH && (uint64_t)g->dim > row->dp)
    return false;
  return row_groups(g, row) * row_threads(row) <= UINT32_MAX;
}

static int row_add(tsr_plugin_variant_list *out, const opencl_attention_row *row) {
  if (row->kind == OPENCL_ATTENTION_FLASH)
    return tsr_plugin_variants_add(
        out, row->name,
        "online softmax: %u query rows (GQA heads packed) x %u keys per tile, head dim <= %u, "
        "%u rows per %u work items, %u work items, %llu B local, keys split when few groups",
        row->bq, row->bkv, row->dp, row->rq, row->tpr, row_threads(row),
        (unsigned long long)row_local_bytes(row));
  return tsr_plugin_variants_add(out, row->name,
                                 "a work-group of %u work items per query row, any head dim (%u "
                                 "columns per pass and work item), keys in chunks of %u",
                                 row->threads, row->cpt, row->threads);
}

/* The heuristic, over the flash rows of the problem's head-dim class in
 * the class's order: the first (largest) tile at least half filled by the
 * rows of a (batch, key/value head) that gives groups_per_unit work-groups
 * per compute unit; else the largest half filled (its keys split to fill
 * the device); else the fullest (decode without GQA: one row per head).
 * The generic row above 256, or when no flash row fits the device. */
static const opencl_attention_row *attention_pick(const opencl_device_props *props,
                                                  const attention_problem *g, char *reason,
                                                  size_t capacity) {
  const attention_class_row *cls = attention_class_of(props);
  uint32_t dp = dim_class(g->dim);
  uint64_t want = device_want(props);
  uint64_t packed = (uint64_t)g->sq * (uint64_t)g->group; /* rows per (batch, kv head) */
  const opencl_attention_row *pick = NULL, *largest_half = NULL, *fullest = NULL;
  double best_fill = -1.0;
  for (const char *const *o = cls->order; dp && *o; o++) {
    const opencl_attention_row *row = attention_row_find(*o);
    if (!row || row->dp != dp || !row_fits(props, row) || !row_runs(g, row))
      continue;
    uint64_t capacity_rows = row_groups(g, row) * row->bq;
    double fill = capacity_rows ? (double)packed / (double)capacity_rows : 0.0;
    if (fill > best_fill) {
      best_fill = fill;
      fullest = row;
    }
    if (packed * 2 < capacity_rows)
      continue;
    if (!largest_half)
      largest_half = row;
    if (row_all_groups(g, row) >= want) {
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
  const opencl_attention_row *row = attention_row_find(cls->generic);
  if (row && row_fits(props, row) && row_runs(g, row))
    return row;
  for (int i = 0; i < ATTENTION_ROWS; i++) {
    row = &attention_rows[i];
    if (row->kind == OPENCL_ATTENTION_GENERIC && row_fits(props, row) && row_runs(g, row))
      return row;
  }
  return NULL;
}

static tsr_status attention_list(const opencl_device *device, tsr_op op, const void *args,
                                 tsr_plugin_variant_list *out, char *why, size_t why_capacity) {
  (void)op;
  const opencl_device_props *props = device->props;
  attention_problem g = problem_of(args);
  if (!problem_ok(&g, why, why_capacity))
    return TSR_ERROR_UNSUPPORTED;
  char reason[200];
  const opencl_attention_row *pick = attention_pick(props, &g, reason, sizeof reason);
  out->count = 0;
  out->heuristic = 0;
  for (int i = 0; i < ATTENTION_ROWS; i++) {
    const opencl_attention_row *row = &attention_rows[i];
    if (!row_fits(props, row) || !row_runs(&g, row))
      continue;
    int index = row_add(out, row);
    if (index >= 0 && row == pick)
      out->heuristic = index;
  }
  if (out->count == 0) {
    snprintf(why, why_capacity,
             "no attention variant fits %s's limits (%zu work items, %llu B local) for Sq %lld",
             props->name, props->max_work_group, (unsigned long long)props->local_memory_bytes,
             (long long)g.sq);
    return TSR_ERROR_UNSUPPORTED;
  }
  snprintf(out->reason, sizeof out->reason, "%s: %s", reason, out->variants[out->heuristic].name);
  return TSR_OK;
}

/* ---- preparing ---- */

static void build_options(const attention_problem *g, const opencl_attention_row *row, bool split,
                          char *options, size_t capacity) {
  const tsr_attention_args *a = g->a;
  int n = snprintf(options, capacity, "-DTSR_DTYPE=%d ", (int)a->q.dtype);
  if (n < 0 || (size_t)n >= capacity)
    return;
  if (row->kind == OPENCL_ATTENTION_FLASH)
    snprintf(options + n, capacity - (size_t)n,
             "-DTSR_ATT_FLASH -DTSR_ATT_DP=%u -DTSR_ATT_BQ=%u -DTSR_ATT_BKV=%u -DTSR_ATT_RQ=%u "
             "-DTSR_ATT_TPR=%u -DTSR_ATT_VQ=%d -DTSR_ATT_VK=%d -DTSR_ATT_VV=%d -DTSR_ATT_VO=%d "
             "-DTSR_ATT_SPLIT=%d",
             row->dp, row->bq, row->bkv, row->rq, row->tpr, head_vector(&a->q), head_vector(&a->k),
             head_vector(&a->v), head_vector(&a->o), split ? 1 : 0);
  else
    snprintf(options + n, capacity - (size_t)n, "-DTSR_ATT_THREADS=%u -DTSR_ATT_CPT=%u",
             row->threads, row->cpt);
}

static const char *kernel_name(const opencl_attention_row *row) {
  return row->kind == OPENCL_ATTENTION_FLASH ? "tsr_attention_flash" : "tsr_attention_generic";
}

static tsr_status attention_prepare(opencl_device *device, tsr_op op, const void *args,
                                    const char *name, const opencl_config **out) {
  const tsr_plugin_host *host = &device->plugin->host;
  attention_problem g = problem_of(args);
  const opencl_attention_row *row = attention_row_find(name);
  if (!row)
    return tsr_plugin_fail(host, TSR_ERROR_NOT_FOUND, "attention: no variant named %s", name);
  char why[TSR_PLUGIN_MESSAGE_CAPACITY];
  if (!problem_ok(&g, why, sizeof why))
    return tsr_plugin_fail(host, TSR_ERROR_UNSUPPORTED, "attention: %s", why);
  if (!row_fits(device->props, row) || !row_runs(&g, row))
    return tsr_plugin_fail(host, TSR_ERROR_NOT_FOUND,
                           "attention: variant %s cannot run this problem (head dim %lld, Sq "
                           "%lld) within %s's limits",
                           name, (long long)g.dim, (long long)g.sq, device->props->name);
  const opencl_kernel *kernel = NULL, *combine = NULL;
  if (!attention_empty(&g)) {
    uint32_t kv_chunk;
    bool split = attention_splits(device->props, &g, row, &kv_chunk) > 1;
    char options[384];
    build_options(&g, row, split, options, sizeof options);
    tsr_status status = opencl_kernel_get(device, "attention", options, kernel_name(row), &kernel);
    if (status == TSR_OK && split)
      status = opencl_kernel_get(device, "attention", options, "tsr_attention_combine", &combine);
    if (status != TSR_OK)
      return status;
    if (kernel->max_work_group < row_threads(row) || (combine && combine->max_work_group < 64))
      return tsr_plugin_fail(host, TSR_ERROR_UNSUPPORTED,
                             "attention: variant %s needs %u work items but its kernel takes %zu "
                             "on %s",
                             name, row_threads(row), kernel->max_work_group, device->props->name);
  }
  return opencl_config_get(device, op, row->name, row, kernel, combine, 0, out);
}

/* ---- running ---- */

static void view_of(const tsr_plugin_tensor *t, tsr_cl_i64 *first, tsr_cl_i64 *s0, tsr_cl_i64 *s1,
                    tsr_cl_i64 *s2, tsr_cl_i64 *s3) {
  *first = opencl_tensor_first(t);
  *s0 = stride_of(t, 0);
  *s1 = stride_of(t, 1);
  *s2 = stride_of(t, 2);
  if (s3)
    *s3 = stride_of(t, 3);
}

static void params_of(const attention_problem *g, const opencl_attention_row *row, uint32_t splits,
                      uint32_t kv_chunk, tsr_cl_attention_params *p) {
  const tsr_attention_args *a = g->a;
  memset(p, 0, sizeof *p);
  view_of(&a->q, &p->q_first, &p->q_sb, &p->q_ss, &p->q_sh, &p->q_sd);
  view_of(&a->k, &p->k_first, &p->k_sb, &p->k_ss, &p->k_sh, &p->k_sd);
  view_of(&a->v, &p->v_first, &p->v_sb, &p->v_ss, &p->v_sh, &p->v_sd);
  view_of(&a->o, &p->o_first, &p->o_sb, &p->o_ss, &p->o_sh, &p->o_sd);
  if (g->lse) {
    view_of(&a->lse, &p->lse_first, &p->lse_sb, &p->lse_sh, &p->lse_ss, NULL);
    p->flags |= TSR_CL_ATTENTION_LSE;
  }
  p->sq = (tsr_cl_i32)g->sq;
  p->skv = (tsr_cl_i32)g->skv;
  p->hq = (tsr_cl_i32)g->hq;
  p->group = (tsr_cl_i32)g->group;
  p->dim = (tsr_cl_i32)g->dim;
  /* The core passes -1 or windows below Skv (left) and Sq (right); causal
   * is window_right 0 whatever the window says, as in the reference. */
  int64_t left = a->window_left, right = a->causal ? 0 : a->window_right;
  p->window_left = left < 0 || left >= g->skv + g->sq ? -1 : (tsr_cl_i32)left;
  p->window_right = right < 0 || right >= g->skv + g->sq ? -1 : (tsr_cl_i32)right;
  p->tiles = (tsr_cl_i32)row_groups(g, row);
  p->splits = (tsr_cl_i32)splits;
  p->kv_chunk = (tsr_cl_i32)kv_chunk;
  p->part_rows = g->batch * g->hq * g->sq;
  p->scale_log2 = (float)((double)a->scale * 1.4426950408889634);
}

static tsr_status attention_run(opencl_queue *queue, tsr_op op, const void *args,
                                const opencl_config *config) {
  (void)op;
  attention_problem g = problem_of(args);
  if (attention_empty(&g) || !config->kernel)
    return TSR_OK;
  const opencl_attention_row *row = config->row;
  const tsr_attention_args *a = g.a;
  const opencl_device *device = queue->device;
  uint32_t kv_chunk;
  uint32_t splits = attention_splits(device->props, &g, row, &kv_chunk);
  if ((splits > 1) != (config->kernel2 != NULL))
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_BACKEND,
                           "attention: config %s was prepared for another key split", row->name);
  tsr_cl_attention_params p;
  params_of(&g, row, splits, kv_chunk, &p);
  cl_mem o = opencl_tensor_mem(&a->o), q = opencl_tensor_mem(&a->q);
  cl_mem k = opencl_tensor_mem(&a->k), v = opencl_tensor_mem(&a->v);
  cl_mem lse = g.lse ? opencl_tensor_mem(&a->lse) : o;
  /* k and v of Skv = 0 are never read: any valid buffer does */
  if (!k)
    k = o;
  if (!v)
    v = o;
  cl_mem part = o;
  if (splits > 1) {
    uint64_t bytes = (uint64_t)splits * (uint64_t)p.part_rows * ((uint64_t)g.dim + 2) * 4;
    tsr_status status = opencl_queue_scratch(queue, bytes, &part);
    if (status != TSR_OK)
      return status;
  }
  size_t local[3] = {row_threads(row), 1, 1};
  size_t global[3] = {(size_t)(row_groups(&g, row) * splits) * local[0],
                      (size_t)(row->kind == OPENCL_ATTENTION_FLASH ? g.hkv : g.hq),
                      (size_t)g.batch};
  opencl_arg list[7] = {OPENCL_ARG(q),   OPENCL_ARG(k),    OPENCL_ARG(v), OPENCL_ARG(o),
                        OPENCL_ARG(lse), OPENCL_ARG(part), OPENCL_ARG(p)};
  tsr_status status = opencl_launch(queue, config->kernel, list, 7, 3, global, local);
  if (status != TSR_OK || splits <= 1)
    return status;
  size_t combine_local[3] = {64, 1, 1}, combine_global[3] = {(size_t)p.part_rows * 64, 1, 1};
  opencl_arg list2[4] = {OPENCL_ARG(o), OPENCL_ARG(lse), OPENCL_ARG(part), OPENCL_ARG(p)};
  return opencl_launch(queue, config->kernel2, list2, 4, 1, combine_global, combine_local);
}

const opencl_op_family opencl_attention_family = {attention_list, attention_prepare, attention_run};
