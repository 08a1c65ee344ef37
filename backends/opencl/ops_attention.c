/* SPDX-License-Identifier: Apache-2.0 */
/* Attention (kernels/attention.cl, attention_decode.cl) and kv_append
 * (kernels/kv_append.cl): the build options a problem's signature decides
 * (dtype, tile, vector access of each tensor, the serving layout, the key
 * split), the parameters and the launches; the variant tables and
 * heuristics are in configs.c. Three attention kernels: "flash_*" (online
 * softmax over query tiles that share K/V tiles in local memory, head dims
 * up to 256 in classes of 64, 128 and 256; when the grid of a dense
 * problem does not fill the device the keys are split over work-groups and
 * a second kernel merges the partial rows), "decode_*" (split-KV decode for
 * at most 16 query rows per sequence: the GQA group's rows share each K/V
 * row, key ranges over work-groups, then a combine kernel) and "generic_*"
 * (a work-group per query row, any head dim, little local memory), so that
 * every problem runs. Serving problems (packed, paged, seqlens, softcap)
 * take every kernel, built with their layout; their kernels check the
 * index tensors on the device and report faults through the queue's fault
 * words (queue.c). */
#include <stdio.h>
#include <string.h>

#include "kernels/opencl_types.h"

#include "kernels/params_attention.h"
#include "opencl_internal.h"

#include "configs.h"

_Static_assert(sizeof(tsr_cl_attention_params) % 8 == 0 && sizeof(tsr_cl_kv_append_params) % 8 == 0,
               "params structs are whole 8-byte words (opencl_internal.h)");

/* ---- problems ---- */

/* Extents the kernels' 32-bit positions take: i + Skv - Sq +- a window, and
 * the packed rows Sq * (Hq / Hkv), stay far from overflow. */
#define ATTENTION_MAX_EXTENT ((int64_t)1 << 30)

static opencl_attention_problem problem_of(const void *args) {
  const tsr_attention_args *a = args;
  opencl_attention_problem g;
  memset(&g, 0, sizeof g);
  g.a = a;
  g.serving = tsr_plugin_attention_is_serving(a);
  g.hq = a->q.shape[a->q.rank - 2];
  g.dim = a->q.shape[a->q.rank - 1];
  g.hkv = a->k.shape[a->k.rank - 2];
  if (g.serving) {
    g.packed_q = a->cu_seqlens_q.buffer != NULL;
    g.packed_kv = a->cu_seqlens_kv.buffer != NULL;
    g.paged = a->block_table.buffer != NULL;
    g.seqlens = a->seqlens_kv.buffer != NULL;
    g.softcap = a->softcap > 0.0f;
    g.batch = a->batch;
    g.sq = a->max_seqlen_q;
    g.skv = a->max_seqlen_kv;
  } else {
    g.batch = a->q.shape[0];
    g.sq = a->q.shape[1];
    g.skv = a->k.shape[1];
  }
  g.group = g.hkv > 0 ? g.hq / g.hkv : 1;
  g.lse = a->lse.buffer != NULL;
  return g;
}

/* Nothing to compute: no rows, or no columns and no lse. A serving problem
 * runs whenever it has sequences and heads, for its kernels check every
 * sequence's indices (a fault is reported even where nothing is written). */
static bool attention_empty(const opencl_attention_problem *g) {
  if (g->serving)
    return g->batch == 0 || g->hq == 0 || g->hkv == 0;
  return g->batch == 0 || g->sq == 0 || g->hq == 0 || (g->dim == 0 && !g->lse);
}

/* A stride as the kernels use it: 0 where the extent is 1. */
static int64_t stride_of(const tsr_plugin_tensor *t, int dim) {
  return t->shape[dim] > 1 ? t->strides[dim] : 0;
}

/* Whether four head-dim elements of `t` go in one vector access: a
 * contiguous head dim, a multiple of 4 long. */
static bool head_vector(const tsr_plugin_tensor *t) {
  int last = t->rank - 1;
  return t->shape[last] > 0 && t->shape[last] % 4 == 0 && t->strides[last] == 1;
}

/* The decode kernel's access to q, k or v: 2 when every row starts on a
 * 16-byte boundary and the head dim is contiguous and a multiple of 8
 * (aligned words), else head_vector's 1 or 0. */
static int head_words(const tsr_plugin_tensor *t) {
  if (!head_vector(t))
    return 0;
  int last = t->rank - 1;
  int64_t unit = t->dtype == TSR_DTYPE_F32 ? 4 : 8; /* elements of 16 bytes */
  const opencl_buffer *b = t->buffer;
  uint64_t address = (b && b->host ? (uint64_t)(uintptr_t)b->host : 0) + t->offset;
  bool aligned = t->shape[last] % 8 == 0 && address % 16 == 0;
  for (int d = 0; d < last; d++)
    aligned = aligned && stride_of(t, d) % unit == 0;
  return aligned ? 2 : 1;
}

/* Split keys of the flash kernel (dense only): each range at least this
 * many keys, at most this many ranges, and the scratch of partial rows at
 * most this large. */
enum { ATTENTION_SPLIT_MIN_KEYS = 64, ATTENTION_SPLIT_MAX = 128 };
#define ATTENTION_SPLIT_MAX_BYTES ((uint64_t)256 << 20)

/* Key ranges of a flash row (1: no split) and the keys of each (a multiple
 * of the key tile): split when the grid does not fill the device and the
 * keys are many, decided from the signature alone. */
static uint32_t attention_splits(const opencl_device_props *props,
                                 const opencl_attention_problem *g, const opencl_attention_row *row,
                                 uint32_t *kv_chunk) {
  *kv_chunk = 0;
  if (row->kind != OPENCL_ATTENTION_FLASH || g->serving || attention_empty(g))
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

static tsr_status kv_append_list(const opencl_device *device, const tsr_kv_append_args *a,
                                 tsr_plugin_variant_list *out, char *why, size_t why_capacity);

static tsr_status attention_list(const opencl_device *device, tsr_op op, const void *args,
                                 tsr_plugin_variant_list *out, char *why, size_t why_capacity) {
  if (op == TSR_OP_KV_APPEND)
    return kv_append_list(device, args, out, why, why_capacity);
  opencl_attention_problem g = problem_of(args);
  if (!problem_ok(&g, why, why_capacity))
    return TSR_ERROR_UNSUPPORTED;
  return opencl_attention_variants(device->props, &g, out, why, why_capacity);
}

/* ---- preparing ---- */

/* -D options of the serving layout (none for a dense problem, whose builds
 * stay what they were). */
static int serving_options(const opencl_attention_problem *g, char *options, size_t capacity) {
  if (!g->serving)
    return 0;
  int n =
      snprintf(options, capacity,
               " -DTSR_ATT_SERVING=1 -DTSR_ATT_PACKED_Q=%d -DTSR_ATT_KV=%d -DTSR_ATT_SEQLENS=%d "
               "-DTSR_ATT_SOFTCAP=%d",
               g->packed_q,
               g->paged       ? 2
               : g->packed_kv ? 1
                              : 0,
               g->seqlens, g->softcap);
  return n < 0 || (size_t)n >= capacity ? 0 : n;
}

static void build_options(const opencl_device_props *props, const opencl_attention_problem *g,
                          const opencl_attention_row *row, bool split, char *options,
                          size_t capacity) {
  const tsr_attention_args *a = g->a;
  int n = snprintf(options, capacity, "-DTSR_DTYPE=%d ", (int)a->q.dtype);
  if (n < 0 || (size_t)n >= capacity)
    return;
  int more = 0;
  opencl_attention_decode_plan plan;
  if (row->kind == OPENCL_ATTENTION_FLASH)
    more = snprintf(options + n, capacity - (size_t)n,
                    "-DTSR_ATT_FLASH -DTSR_ATT_DP=%u -DTSR_ATT_BQ=%u -DTSR_ATT_BKV=%u "
                    "-DTSR_ATT_RQ=%u -DTSR_ATT_TPR=%u -DTSR_ATT_VQ=%d -DTSR_ATT_VK=%d "
                    "-DTSR_ATT_VV=%d -DTSR_ATT_VO=%d -DTSR_ATT_SPLIT=%d",
                    row->dp, row->bq, row->bkv, row->rq, row->tpr, head_vector(&a->q),
                    head_vector(&a->k), head_vector(&a->v), head_vector(&a->o), split ? 1 : 0);
  else if (row->kind == OPENCL_ATTENTION_DECODE &&
           opencl_attention_decode_plan_of(props, g, row, &plan))
    more = snprintf(options + n, capacity - (size_t)n,
                    "-DTSR_ATT_DECODE -DTSR_ATT_DP=%u -DTSR_ATT_RT=%u -DTSR_ATT_NB=%u "
                    "-DTSR_ATT_WG=%u -DTSR_ATT_VQ=%d -DTSR_ATT_VK=%d -DTSR_ATT_VV=%d "
                    "-DTSR_ATT_SPLIT=%d",
                    plan.dp, plan.rt, plan.nb, plan.threads, head_words(&a->q), head_words(&a->k),
                    head_words(&a->v), plan.splits > 1 ? 1 : 0);
  else
    more = snprintf(options + n, capacity - (size_t)n, "-DTSR_ATT_THREADS=%u -DTSR_ATT_CPT=%u",
                    row->threads, row->cpt);
  if (more < 0 || (size_t)(n + more) >= capacity)
    return;
  n += more;
  serving_options(g, options + n, capacity - (size_t)n);
}

/* The kernels of a row: the main one, the combine (a key split), the
 * source and the work items of the main one. */
typedef struct attention_kernels {
  const char *source, *main, *combine;
  uint32_t threads;
} attention_kernels;

static attention_kernels kernels_of(const opencl_device_props *props,
                                    const opencl_attention_problem *g,
                                    const opencl_attention_row *row, bool split) {
  attention_kernels k = {"attention", "tsr_attention_generic", NULL,
                         opencl_attention_row_threads(row)};
  opencl_attention_decode_plan plan;
  if (row->kind == OPENCL_ATTENTION_FLASH) {
    k.main = "tsr_attention_flash";
    k.combine = split ? "tsr_attention_combine" : NULL;
  } else if (row->kind == OPENCL_ATTENTION_DECODE &&
             opencl_attention_decode_plan_of(props, g, row, &plan)) {
    k.source = "attention_decode";
    k.main = "tsr_attention_decode";
    k.combine = split ? "tsr_attention_decode_combine" : NULL;
    k.threads = plan.threads;
  }
  return k;
}

/* Whether the problem splits its keys with this row (decode: its plan). */
static bool row_splits(const opencl_device_props *props, const opencl_attention_problem *g,
                       const opencl_attention_row *row) {
  opencl_attention_decode_plan plan;
  if (row->kind == OPENCL_ATTENTION_DECODE)
    return opencl_attention_decode_plan_of(props, g, row, &plan) && plan.splits > 1;
  uint32_t kv_chunk;
  return attention_splits(props, g, row, &kv_chunk) > 1;
}

static tsr_status kv_append_prepare(opencl_device *device, const tsr_kv_append_args *a,
                                    const char *name, const opencl_config **out);

static tsr_status attention_prepare(opencl_device *device, tsr_op op, const void *args,
                                    const char *name, const opencl_config **out) {
  if (op == TSR_OP_KV_APPEND)
    return kv_append_prepare(device, args, name, out);
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
    bool split = row_splits(device->props, &g, row);
    attention_kernels names = kernels_of(device->props, &g, row, split);
    char options[512];
    build_options(device->props, &g, row, split, options, sizeof options);
    tsr_status status = opencl_kernel_get(device, names.source, options, names.main, &kernel);
    if (status == TSR_OK && names.combine)
      status = opencl_kernel_get(device, names.source, options, names.combine, &combine);
    if (status != TSR_OK)
      return status;
    if (kernel->max_work_group < names.threads || (combine && combine->max_work_group < 64))
      return tsr_plugin_fail(host, TSR_ERROR_UNSUPPORTED,
                             "attention: variant %s needs %u work items but its kernel takes %zu "
                             "on %s",
                             name, names.threads, kernel->max_work_group, device->props->name);
  }
  return opencl_config_get(device, op, row->name, row, kernel, combine, 0, out);
}

/* ---- running ---- */

/* A tensor as (first, along B, S, H, D): rank 4 as it is, rank 3 (packed
 * [total, H, D]) with no batch stride; lse dense [B, H, S] or packed
 * [H, total] into (first, B, H, S). */
static void view_of(const tsr_plugin_tensor *t, tsr_cl_i64 *first, tsr_cl_i64 *s0, tsr_cl_i64 *s1,
                    tsr_cl_i64 *s2, tsr_cl_i64 *s3) {
  *first = opencl_tensor_first(t);
  int lead = (s3 ? 4 : 3) - t->rank; /* 1: the batch dimension is missing */
  tsr_cl_i64 *out[4] = {s0, s1, s2, s3};
  *s0 = 0;
  for (int d = 0; d < t->rank; d++)
    if (out[d + lead])
      *out[d + lead] = stride_of(t, d);
}

static void index_of(const tsr_plugin_tensor *t, tsr_cl_i64 *first, tsr_cl_i64 *s0,
                     tsr_cl_i64 *s1) {
  if (!t->buffer)
    return;
  *first = opencl_tensor_first(t);
  *s0 = t->strides[0];
  if (s1)
    *s1 = t->strides[1];
}

static void params_of(const opencl_attention_problem *g, uint32_t tiles, uint32_t splits,
                      uint32_t kv_chunk, tsr_cl_attention_params *p) {
  const tsr_attention_args *a = g->a;
  memset(p, 0, sizeof *p);
  view_of(&a->q, &p->q_first, &p->q_sb, &p->q_ss, &p->q_sh, &p->q_sd);
  view_of(&a->k, &p->k_first, &p->k_sb, &p->k_ss, &p->k_sh, &p->k_sd);
  view_of(&a->v, &p->v_first, &p->v_sb, &p->v_ss, &p->v_sh, &p->v_sd);
  view_of(&a->o, &p->o_first, &p->o_sb, &p->o_ss, &p->o_sh, &p->o_sd);
  if (g->lse) {
    /* dense [B, H, S] is (B, H, S) already; packed [H, total] lacks B */
    if (a->lse.rank == 3)
      view_of(&a->lse, &p->lse_first, &p->lse_sb, &p->lse_sh, &p->lse_ss, NULL);
    else {
      p->lse_first = opencl_tensor_first(&a->lse);
      p->lse_sh = stride_of(&a->lse, 0);
      p->lse_ss = stride_of(&a->lse, 1);
    }
    p->flags |= TSR_CL_ATTENTION_LSE;
  }
  if (g->serving) {
    index_of(&a->cu_seqlens_q, &p->cuq_first, &p->cuq_s, NULL);
    index_of(&a->cu_seqlens_kv, &p->cukv_first, &p->cukv_s, NULL);
    index_of(&a->block_table, &p->bt_first, &p->bt_sb, &p->bt_sj);
    index_of(&a->seqlens_kv, &p->sl_first, &p->sl_s, NULL);
    p->q_rows = g->packed_q ? a->q.shape[0] : 0;
    p->kv_rows = g->packed_kv || g->paged ? a->k.shape[0] : 0;
    p->kv_capacity = g->paged ? a->block_table.shape[1] * a->k.shape[1] : a->k.shape[1];
    p->block_size = g->paged ? (tsr_cl_i32)a->k.shape[1] : 0;
    p->block_shift = -1;
    for (int shift = 0; shift < 31 && p->block_size > 0; shift++)
      if (p->block_size == (tsr_cl_i32)1 << shift)
        p->block_shift = shift;
    if (g->softcap) {
      p->cap_log2 = (float)((double)a->softcap * 1.4426950408889634);
      p->cap_inv = (float)(0.6931471805599453 / (double)a->softcap);
    }
  }
  p->sq = (tsr_cl_i32)g->sq;
  p->skv = (tsr_cl_i32)g->skv;
  p->hq = (tsr_cl_i32)g->hq;
  p->group = (tsr_cl_i32)g->group;
  p->dim = (tsr_cl_i32)g->dim;
  /* The core passes -1 or windows below Skv (left) and Sq (right), the
   * serving bounds for serving problems; causal is window_right 0 whatever
   * the window says, as in the reference. */
  int64_t left = a->window_left, right = a->causal ? 0 : a->window_right;
  p->window_left = left < 0 || left >= g->skv + g->sq ? -1 : (tsr_cl_i32)left;
  p->window_right = right < 0 || right >= g->skv + g->sq ? -1 : (tsr_cl_i32)right;
  p->tiles = (tsr_cl_i32)tiles;
  p->splits = (tsr_cl_i32)splits;
  p->kv_chunk = (tsr_cl_i32)kv_chunk;
  p->part_rows = g->batch * g->hq * g->sq;
  p->seq_first = splits * p->part_rows * (g->dim + 2);
  p->scale_log2 = (float)((double)a->scale * 1.4426950408889634);
}

/* The buffer of an optional tensor, or `fallback` (never read). */
static cl_mem mem_or(const tsr_plugin_tensor *t, cl_mem fallback) {
  cl_mem mem = opencl_tensor_mem(t);
  return mem ? mem : fallback;
}

static tsr_status kv_append_run(opencl_queue *queue, const tsr_kv_append_args *a,
                                const opencl_config *config);

static tsr_status attention_run(opencl_queue *queue, tsr_op op, const void *args,
                                const opencl_config *config) {
  if (op == TSR_OP_KV_APPEND)
    return kv_append_run(queue, args, config);
  opencl_attention_problem g = problem_of(args);
  if (attention_empty(&g) || !config->kernel)
    return TSR_OK;
  const opencl_attention_row *row = config->row;
  const tsr_attention_args *a = g.a;
  const opencl_device *device = queue->device;
  uint32_t kv_chunk = 0, splits = 1, threads = opencl_attention_row_threads(row);
  uint64_t tiles = opencl_attention_row_groups(&g, row);
  if (row->kind == OPENCL_ATTENTION_DECODE) {
    opencl_attention_decode_plan plan;
    if (!opencl_attention_decode_plan_of(device->props, &g, row, &plan))
      return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_BACKEND,
                             "attention: config %s has no plan for this problem", row->name);
    splits = plan.splits;
    kv_chunk = plan.chunk;
    threads = plan.threads;
  } else {
    splits = attention_splits(device->props, &g, row, &kv_chunk);
  }
  if ((splits > 1) != (config->kernel2 != NULL))
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_BACKEND,
                           "attention: config %s was prepared for another key split", row->name);
  tsr_cl_attention_params p;
  params_of(&g, (uint32_t)tiles, splits, kv_chunk, &p);
  cl_mem o = opencl_tensor_mem(&a->o), q = opencl_tensor_mem(&a->q);
  /* k and v of no key are never read: any valid buffer does */
  cl_mem k = mem_or(&a->k, o), v = mem_or(&a->v, o), lse = mem_or(&a->lse, o);
  cl_mem cu_q = mem_or(&a->cu_seqlens_q, o), cu_kv = o, bt = o, sl = o, faults = o;
  if (g.serving) {
    cu_kv = mem_or(&a->cu_seqlens_kv, o);
    bt = mem_or(&a->block_table, o);
    sl = mem_or(&a->seqlens_kv, o);
    tsr_status status = opencl_queue_faults(queue, &faults);
    if (status != TSR_OK)
      return status;
  }
  cl_mem part = o;
  if (splits > 1) {
    uint64_t bytes = ((uint64_t)p.seq_first + 4ull * (uint64_t)g.batch) * 4;
    tsr_status status = opencl_queue_scratch(queue, bytes, &part);
    if (status != TSR_OK)
      return status;
  }
  size_t local[3] = {threads, 1, 1};
  size_t global[3] = {(size_t)(tiles * splits) * local[0],
                      (size_t)(row->kind == OPENCL_ATTENTION_GENERIC ? g.hq : g.hkv),
                      (size_t)g.batch};
  opencl_arg list[12] = {OPENCL_ARG(q),   OPENCL_ARG(k),    OPENCL_ARG(v),      OPENCL_ARG(o),
                         OPENCL_ARG(lse), OPENCL_ARG(part), OPENCL_ARG(cu_q),   OPENCL_ARG(cu_kv),
                         OPENCL_ARG(bt),  OPENCL_ARG(sl),   OPENCL_ARG(faults), OPENCL_ARG(p)};
  tsr_status status = opencl_launch(queue, config->kernel, list, 12, 3, global, local);
  if (status != TSR_OK || splits <= 1)
    return status;
  size_t combine_local[3] = {64, 1, 1}, combine_global[3] = {(size_t)p.part_rows * 64, 1, 1};
  if (row->kind == OPENCL_ATTENTION_DECODE) {
    opencl_arg list2[5] = {OPENCL_ARG(o), OPENCL_ARG(lse), OPENCL_ARG(part), OPENCL_ARG(part),
                           OPENCL_ARG(p)};
    return opencl_launch(queue, config->kernel2, list2, 5, 1, combine_global, combine_local);
  }
  opencl_arg list2[4] = {OPENCL_ARG(o), OPENCL_ARG(lse), OPENCL_ARG(part), OPENCL_ARG(p)};
  return opencl_launch(queue, config->kernel2, list2, 4, 1, combine_global, combine_local);
}

/* ---- kv_append ---- */

/* (row, head) pairs a launch takes at most per work-group pass: the kernel
 * loops over the rest. */
#define KV_APPEND_MAX_GROUPS 65536

/* Nothing to run: no rows. (Rows of no head or no element still have their
 * slots checked.) */
static bool kv_append_empty(const tsr_kv_append_args *a) {
  return a->k_new.shape[0] == 0;
}

static tsr_status kv_append_list(const opencl_device *device, const tsr_kv_append_args *a,
                                 tsr_plugin_variant_list *out, char *why, size_t why_capacity) {
  int32_t dtype = a->k_new.dtype;
  if (dtype != TSR_DTYPE_F32 && dtype != TSR_DTYPE_F16 && dtype != TSR_DTYPE_BF16) {
    snprintf(why, why_capacity, "k_new's dtype %s is not f32, f16 or bf16",
             tsr_plugin_dtype_name(dtype));
    return TSR_ERROR_UNSUPPORTED;
  }
  if (a->k_new.shape[2] > INT32_MAX || a->k_new.shape[1] > INT32_MAX) {
    snprintf(why, why_capacity, "a head dim or head count beyond 2^31 - 1");
    return TSR_ERROR_UNSUPPORTED;
  }
  return opencl_kv_append_variants(device->props, a->k_new.shape[2], out, why, why_capacity);
}

static tsr_status kv_append_prepare(opencl_device *device, const tsr_kv_append_args *a,
                                    const char *name, const opencl_config **out) {
  const opencl_kv_append_row *row = opencl_kv_append_row_find(device->props, name);
  if (!row)
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_NOT_FOUND,
                           "kv_append: no variant named %s fits this device", name);
  const opencl_kernel *kernel = NULL;
  if (!kv_append_empty(a)) {
    char options[96];
    snprintf(options, sizeof options, "-DTSR_DTYPE=%d -DTSR_KV_THREADS=%u", (int)a->k_new.dtype,
             row->threads);
    tsr_status status = opencl_kernel_get(device, "kv_append", options, "tsr_kv_append", &kernel);
    if (status != TSR_OK)
      return status;
    if (kernel->max_work_group < row->threads)
      return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_UNSUPPORTED,
                             "kv_append: variant %s needs %u work items but its kernel takes %zu "
                             "on %s",
                             name, row->threads, kernel->max_work_group, device->props->name);
  }
  return opencl_config_get(device, TSR_OP_KV_APPEND, row->name, row, kernel, NULL, 0, out);
}

static tsr_status kv_append_run(opencl_queue *queue, const tsr_kv_append_args *a,
                                const opencl_config *config) {
  if (kv_append_empty(a) || !config->kernel)
    return TSR_OK;
  const opencl_kv_append_row *row = config->row;
  tsr_cl_kv_append_params p;
  memset(&p, 0, sizeof p);
  p.kn_first = opencl_tensor_first(&a->k_new);
  p.kn_st = a->k_new.strides[0];
  p.kn_sh = a->k_new.strides[1];
  p.kn_sd = a->k_new.strides[2];
  p.kc_first = opencl_tensor_first(&a->k_cache);
  p.kc_sb = a->k_cache.strides[0];
  p.kc_ss = a->k_cache.strides[1];
  p.kc_sh = a->k_cache.strides[2];
  p.kc_sd = a->k_cache.strides[3];
  if (a->v_new.buffer && a->v_cache.buffer) {
    p.vn_first = opencl_tensor_first(&a->v_new);
    p.vn_st = a->v_new.strides[0];
    p.vn_sh = a->v_new.strides[1];
    p.vn_sd = a->v_new.strides[2];
    p.vc_first = opencl_tensor_first(&a->v_cache);
    p.vc_sb = a->v_cache.strides[0];
    p.vc_ss = a->v_cache.strides[1];
    p.vc_sh = a->v_cache.strides[2];
    p.vc_sd = a->v_cache.strides[3];
    p.flags |= TSR_CL_KV_APPEND_V;
  }
  p.slots_first = opencl_tensor_first(&a->slots);
  p.slots_s = a->slots.strides[0];
  /* no heads: one pair per row with nothing to copy, so the slots are
   * checked all the same */
  int64_t heads = a->k_new.shape[1] ? a->k_new.shape[1] : 1;
  p.rows = a->k_new.shape[0] * heads;
  p.slots = a->k_cache.shape[0] * a->k_cache.shape[1];
  p.heads = (tsr_cl_i32)heads;
  p.dim = a->k_new.shape[1] ? (tsr_cl_i32)a->k_new.shape[2] : 0;
  p.block_size = (tsr_cl_i32)a->k_cache.shape[1];
  cl_mem k_new = opencl_tensor_mem(&a->k_new), k_cache = opencl_tensor_mem(&a->k_cache);
  cl_mem v_new = mem_or(&a->v_new, k_new), v_cache = mem_or(&a->v_cache, k_cache);
  cl_mem slots = opencl_tensor_mem(&a->slots), faults = NULL;
  tsr_status status = opencl_queue_faults(queue, &faults);
  if (status != TSR_OK)
    return status;
  uint64_t groups =
      (uint64_t)p.rows < KV_APPEND_MAX_GROUPS ? (uint64_t)p.rows : KV_APPEND_MAX_GROUPS;
  size_t local[3] = {row->threads, 1, 1}, global[3] = {(size_t)groups * row->threads, 1, 1};
  opencl_arg list[7] = {OPENCL_ARG(k_new),   OPENCL_ARG(v_new), OPENCL_ARG(k_cache),
                        OPENCL_ARG(v_cache), OPENCL_ARG(slots), OPENCL_ARG(faults),
                        OPENCL_ARG(p)};
  return opencl_launch(queue, config->kernel, list, 7, 1, global, local);
}

const opencl_op_family opencl_attention_family = {attention_list, attention_prepare, attention_run};
