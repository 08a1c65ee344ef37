/* SPDX-License-Identifier: Apache-2.0 */
/* Attention (kernels/attention.cl): the build options a problem's signature
 * decides (dtype, tile, vector access of each tensor, the key split), the
 * parameters and the launches; the variant table and heuristic are in
 * configs.c. Two kernels: "flash_*"
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

#include "configs.h"

/* ---- problems ---- */

/* Extents the kernels' 32-bit positions take: i + Skv - Sq +- a window, and
 * the packed rows Sq * (Hq / Hkv), stay far from overflow. */
#define ATTENTION_MAX_EXTENT ((int64_t)1 << 30)

static opencl_attention_problem problem_of(const void *args) {
  const tsr_attention_args *a = args;
  opencl_attention_problem g;
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
static bool attention_empty(const opencl_attention_problem *g) {
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

/* Split keys: each range at least this many keys, at most this many ranges,
 * and the scratch of partial rows at most this large. */
enum { ATTENTION_SPLIT_MIN_KEYS = 64, ATTENTION_SPLIT_MAX = 128 };
#define ATTENTION_SPLIT_MAX_BYTES ((uint64_t)256 << 20)

/* Key ranges of a flash row (1: no split) and the keys of each (a multiple
 * of the key tile): split when the grid does not fill the device and the
 * keys are many (decode), decided from the signature alone. */
static uint32_t attention_splits(const opencl_device_props *props,
                                 const opencl_attention_problem *g, const opencl_attention_row *row,
                                 uint32_t *kv_chunk) {
  *kv_chunk = 0;
  if (row->kind != OPENCL_ATTENTION_FLASH || attention_empty(g))
    return 1;
  uint64_t groups = opencl_attention_row_all_groups(g, row),
           want = opencl_attention_groups_wanted(props);
  uint64_t most = (uint64_t)g->skv / ATTENTION_SPLIT_MIN_KEYS;
  if (groups == 0 || groups >= want || most < 2)
    return 1;
  want = opencl_attention_split_groups_wanted(props);
  uint64_t splits = opencl_ceil_div(want, groups);
  if (splits > most)
    splits = most;
  if (splits > ATTENTION_SPLIT_MAX)
    splits = ATTENTION_SPLIT_MAX;
  uint64_t chunk = opencl_ceil_div(opencl_ceil_div((uint64_t)g->skv, splits), row->bkv) * row->bkv;
  splits = opencl_ceil_div((uint64_t)g->skv, chunk);
  uint64_t part_rows = (uint64_t)g->batch * (uint64_t)g->hq * (uint64_t)g->sq;
  if (splits < 2 || splits * part_rows * ((uint64_t)g->dim + 2) * 4 > ATTENTION_SPLIT_MAX_BYTES ||
      part_rows * 64 > UINT32_MAX ||
      groups * splits * opencl_attention_row_threads(row) > UINT32_MAX)
    return 1;
  *kv_chunk = (uint32_t)chunk;
  return (uint32_t)splits;
}

/* ---- listing ---- */

static bool problem_ok(const opencl_attention_problem *g, char *why, size_t capacity) {
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

static tsr_status attention_list(const opencl_device *device, tsr_op op, const void *args,
                                 tsr_plugin_variant_list *out, char *why, size_t why_capacity) {
  (void)op;
  opencl_attention_problem g = problem_of(args);
  if (!problem_ok(&g, why, why_capacity))
    return TSR_ERROR_UNSUPPORTED;
  return opencl_attention_variants(device->props, &g, out, why, why_capacity);
}

/* ---- preparing ---- */

static void build_options(const opencl_attention_problem *g, const opencl_attention_row *row,
                          bool split, char *options, size_t capacity) {
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
  opencl_attention_problem g = problem_of(args);
  const opencl_attention_row *row = opencl_attention_row_find(name);
  if (!row)
    return tsr_plugin_fail(host, TSR_ERROR_NOT_FOUND, "attention: no variant named %s", name);
  char why[TSR_PLUGIN_MESSAGE_CAPACITY];
  if (!problem_ok(&g, why, sizeof why))
    return tsr_plugin_fail(host, TSR_ERROR_UNSUPPORTED, "attention: %s", why);
  if (!opencl_attention_row_takes(device->props, &g, row))
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
    if (kernel->max_work_group < opencl_attention_row_threads(row) ||
        (combine && combine->max_work_group < 64))
      return tsr_plugin_fail(host, TSR_ERROR_UNSUPPORTED,
                             "attention: variant %s needs %u work items but its kernel takes %zu "
                             "on %s",
                             name, opencl_attention_row_threads(row), kernel->max_work_group,
                             device->props->name);
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

static void params_of(const opencl_attention_problem *g, const opencl_attention_row *row,
                      uint32_t splits, uint32_t kv_chunk, tsr_cl_attention_params *p) {
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
  p->tiles = (tsr_cl_i32)opencl_attention_row_groups(g, row);
  p->splits = (tsr_cl_i32)splits;
  p->kv_chunk = (tsr_cl_i32)kv_chunk;
  p->part_rows = g->batch * g->hq * g->sq;
  p->scale_log2 = (float)((double)a->scale * 1.4426950408889634);
}

static tsr_status attention_run(opencl_queue *queue, tsr_op op, const void *args,
                                const opencl_config *config) {
  (void)op;
  opencl_attention_problem g = problem_of(args);
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
  size_t local[3] = {opencl_attention_row_threads(row), 1, 1};
  size_t global[3] = {(size_t)(opencl_attention_row_groups(&g, row) * splits) * local[0],
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
