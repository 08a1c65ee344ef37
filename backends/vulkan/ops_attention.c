/* SPDX-License-Identifier: Apache-2.0 */
/* Flash attention launches: bindings, push constants and the dispatch of the
 * config configs.c chose, on the scalar shader (kernels/attention.comp, any
 * device) or on cooperative matrices (kernels/attention_coopmat.comp, f16,
 * spirv_rewrite.c). Notes and figures: docs/PERFORMANCE.md.
 *
 * Serving problems (packed, paged, per-sequence lengths, softcap) first run
 * attention_plan.comp, which decides every sequence's geometry and faults
 * into a plan in the queue's scratch, then the _serving build of the scalar
 * or coopmat shader (prefill), or the decode path: attention_decode.comp (split-KV partials in
 * scratch after the plan) and attention_combine.comp (o and lse). Dense
 * problems with few query rows and long keys take the decode path without a
 * plan. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "configs.h"
#include "push_constants.h"
#include "vulkan_internal.h"

enum { ATTENTION_BINDINGS = 5 }; /* q, k, v, o, lse */

static tsr_status attention_list(const vulkan_device *device, tsr_op op, const void *args,
                                 tsr_plugin_variant_list *out, char *why, size_t why_capacity) {
  (void)op;
  return vulkan_attention_variants(device->props, args, out, why, why_capacity);
}

static bool attention_empty(const tsr_attention_args *a) {
  return a->q.shape[0] == 0 || a->q.shape[1] == 0 || a->q.shape[2] == 0 || a->q.shape[3] == 0;
}

/* A window as the shader takes it: -1 when unbounded, or wide enough that
 * it bounds nothing (every key is within Sq + Skv of every query), so that
 * position arithmetic never overflows. */
static int32_t clamp_window(int64_t w, int64_t sq, int64_t skv) {
  return w < 0 || w >= sq + skv ? -1 : (int32_t)w;
}

/* The bindings and push constants of a non-empty problem, with each
 * tensor's first element in first[] (q, k, v, o, lse); false with the reason
 * when a tensor does not fit a binding. */
static bool attention_launch(const vulkan_device *device, const tsr_attention_args *a,
                             vulkan_binding bind[ATTENTION_BINDINGS],
                             uint32_t first[ATTENTION_BINDINGS], vulkan_attention_push *push,
                             char *why, size_t capacity) {
  int64_t sq = a->q.shape[1], hq = a->q.shape[2], dim = a->q.shape[3];
  int64_t skv = a->k.shape[1], hkv = a->k.shape[2];
  const tsr_plugin_tensor *ts[ATTENTION_BINDINGS] = {&a->q, &a->k, &a->v, &a->o,
                                                     a->lse.buffer ? &a->lse : NULL};
  for (int i = 0; i < ATTENTION_BINDINGS; i++) {
    first[i] = 0;
    if (!ts[i]) {
      bind[i] = bind[3];
      continue;
    }
    /* Skv = 0 leaves k and v without elements: bind o in their place. */
    if (vulkan_tensor_span(ts[i]) == 0) {
      bind[i] = bind[3 < i ? 3 : 0];
      continue;
    }
    if (!vulkan_bind_tensor(device, ts[i], &bind[i], &first[i], why, capacity))
      return false;
  }
  memset(push, 0, sizeof *push);
  push->sq = (uint32_t)sq;
  push->skv = (uint32_t)skv;
  push->hq = (uint32_t)hq;
  push->group = (uint32_t)(hkv > 0 ? hq / hkv : 1);
  vulkan_attention_view *views[ATTENTION_BINDINGS] = {&push->q, &push->k, &push->v, &push->o,
                                                      &push->lse};
  for (int i = 0; i < ATTENTION_BINDINGS; i++)
    if (ts[i])
      *views[i] = (vulkan_attention_view){first[i], vulkan_stride_of(ts[i], 0),
                                          vulkan_stride_of(ts[i], 1), vulkan_stride_of(ts[i], 2)};
  push->flags = a->lse.buffer ? 1u : 0u;
  push->dim = (uint32_t)dim;
  push->window_left = clamp_window(a->window_left, sq, skv);
  push->window_right = a->causal ? 0 : clamp_window(a->window_right, sq, skv);
  push->scale_log2 = (float)((double)a->scale * 1.4426950408889634);
  return true;
}

/* The pipeline of config `c`: the coopmat build, with 16-byte staging loads
 * where dim is the build's head dim and every start and stride of q, k and
 * v is a multiple of 8 elements; else the scalar build (rolled on CPU
 * implementations, see attention.comp); `suffix` "_serving" for the serving
 * forms. */
static tsr_status attention_pipeline(vulkan_device *device, const tsr_attention_args *a,
                                     const vulkan_attention_config *c,
                                     const vulkan_attention_push *push, const uint32_t *first,
                                     const char *suffix, const vulkan_pipeline **out) {
  char name[48];
  if (c->coopmat) {
    const vulkan_attention_view *views[3] = {&push->q, &push->k, &push->v};
    uint32_t vec = push->dim == c->dp;
    for (int i = 0; i < 3; i++)
      vec = vec && first[i] % 8 == 0 && views[i]->s0 % 8 == 0 && views[i]->s1 % 8 == 0 &&
            views[i]->s2 % 8 == 0;
    snprintf(name, sizeof name, "attention_coopmat_f16_d%u%s", c->dp, suffix);
    uint32_t spec[1] = {vec};
    return vulkan_coopmat_pipeline(device, name, spec, 1, out);
  }
  if (device->props->type == VK_PHYSICAL_DEVICE_TYPE_CPU)
    snprintf(name, sizeof name, "attention_%s_rolled%s", vulkan_dtype_suffix(a->q.dtype), suffix);
  else
    snprintf(name, sizeof name, "attention_%s_d%u_q%u_t%u%s", vulkan_dtype_suffix(a->q.dtype),
             c->dp, c->rq, c->tpr, suffix);
  uint32_t spec[5] = {vulkan_attention_threads(c), c->br, c->bc, c->dp, c->rq};
  return vulkan_pipeline_get(device, name, spec, 5, 0, out);
}

/* ------------------------------------------------------------------------ */
/* Serving forms: the plan, the scalar serving build, the decode path        */
/* ------------------------------------------------------------------------ */

/* Where the passes of one serving call find their tensors: the bindings
 * (q, k, v, o, lse, and the index tensors cu_seqlens_q, cu_seqlens_kv,
 * block_table, seqlens_kv; an absent or empty one holds a stand-in that is
 * never read), each tensor's first element, and the views of
 * attention_serving.glsl. */
enum { SV_Q, SV_K, SV_V, SV_O, SV_LSE, SV_CU_Q, SV_CU_KV, SV_TABLE, SV_LENS, SV_COUNT };

typedef struct serving_launch {
  vulkan_attention_shape shape;
  vulkan_binding bind[SV_COUNT];
  uint32_t first[SV_COUNT];
  bool present[SV_COUNT]; /* bound to its own tensor */
  vulkan_attention_view q, k, v, o, lse;
  uint32_t group, block_size, plan_stride;
  uint64_t plan_bytes;
} serving_launch;

/* A rank-3 (packed) or rank-4 tensor's view: packed rows have no batch
 * stride. */
static vulkan_attention_view serving_view(const tsr_plugin_tensor *t, uint32_t first, bool packed) {
  if (packed)
    return (vulkan_attention_view){first, 0, vulkan_stride_of(t, 0), vulkan_stride_of(t, 1)};
  return (vulkan_attention_view){first, vulkan_stride_of(t, 0), vulkan_stride_of(t, 1),
                                 vulkan_stride_of(t, 2)};
}

/* Binds what the problem has; false with the reason when a tensor does not
 * fit a binding or an index passes 32 bits. Empty tensors (no keys at all,
 * say) are bound to one that is not, and never read. */
static bool serving_bind(const vulkan_device *device, const tsr_attention_args *a,
                         serving_launch *l, char *why, size_t capacity) {
  memset(l, 0, sizeof *l);
  vulkan_attention_shape_of(a, &l->shape);
  const vulkan_attention_shape *s = &l->shape;
  const bool serving = s->serving;
  const tsr_plugin_tensor *ts[SV_COUNT] = {
      &a->q,
      &a->k,
      &a->v,
      &a->o,
      a->lse.buffer ? &a->lse : NULL,
      serving && a->cu_seqlens_q.buffer ? &a->cu_seqlens_q : NULL,
      serving && a->cu_seqlens_kv.buffer ? &a->cu_seqlens_kv : NULL,
      serving && a->block_table.buffer ? &a->block_table : NULL,
      serving && a->seqlens_kv.buffer ? &a->seqlens_kv : NULL};
  int stand_in = -1;
  for (int i = 0; i < SV_COUNT; i++) {
    if (!ts[i] || vulkan_tensor_span(ts[i]) == 0)
      continue;
    if (!vulkan_bind_tensor(device, ts[i], &l->bind[i], &l->first[i], why, capacity))
      return false;
    l->present[i] = true;
    if (stand_in < 0)
      stand_in = i;
  }
  for (int i = 0; i < SV_COUNT; i++)
    if (!l->present[i] && stand_in >= 0)
      l->bind[i] = l->bind[stand_in];
  l->q = serving_view(&a->q, l->first[SV_Q], s->packed_q);
  l->o = serving_view(&a->o, l->first[SV_O], s->packed_q);
  l->k = serving_view(&a->k, l->first[SV_K], s->packed_kv);
  l->v = serving_view(&a->v, l->first[SV_V], s->packed_kv);
  if (a->lse.buffer)
    l->lse = serving_view(&a->lse, l->first[SV_LSE], s->packed_q);
  l->group = (uint32_t)(s->hkv > 0 ? s->hq / s->hkv : 1);
  l->block_size = s->paged ? (uint32_t)a->k.shape[1] : 1u;
  uint64_t stride = 4 + (s->paged ? (uint64_t)a->block_table.shape[1] : 0);
  l->plan_bytes = 4 * stride * (uint64_t)(s->batch > 0 ? s->batch : 1);
  if (l->plan_bytes > UINT32_MAX) {
    snprintf(why, capacity, "the plan of %lld sequences passes 32-bit indices",
             (long long)s->batch);
    return false;
  }
  l->plan_stride = (uint32_t)stride;
  return true;
}

/* Whether the problem has anything to compute (every sequence may still be
 * checked for faults). */
static bool serving_has_work(const serving_launch *l) {
  const vulkan_attention_shape *s = &l->shape;
  return l->present[SV_Q] && l->present[SV_O] && s->batch > 0 && s->max_q > 0 && s->hq > 0 &&
         s->dim > 0;
}

/* The plan pass: one workgroup per sequence into scratch [0, plan_bytes). */
static tsr_status plan_dispatch(vulkan_queue *queue, const vulkan_pipeline *pipeline,
                                const tsr_attention_args *a, const serving_launch *l,
                                const vulkan_binding *plan) {
  const vulkan_device_props *p = queue->device->props;
  const vulkan_attention_shape *s = &l->shape;
  vulkan_attention_plan_push push;
  memset(&push, 0, sizeof push);
  push.batch = (uint32_t)s->batch;
  push.flags = (a->cu_seqlens_q.buffer ? 1u : 0u) | (a->cu_seqlens_kv.buffer ? 2u : 0u) |
               (a->block_table.buffer ? 4u : 0u) | (a->seqlens_kv.buffer ? 8u : 0u);
  push.cu_q_first = l->first[SV_CU_Q];
  push.cu_q_stride = a->cu_seqlens_q.buffer ? vulkan_stride_of(&a->cu_seqlens_q, 0) : 0;
  push.cu_kv_first = l->first[SV_CU_KV];
  push.cu_kv_stride = a->cu_seqlens_kv.buffer ? vulkan_stride_of(&a->cu_seqlens_kv, 0) : 0;
  if (s->paged) {
    push.table_first = l->first[SV_TABLE];
    push.table_s0 = vulkan_stride_of(&a->block_table, 0);
    push.table_s1 = vulkan_stride_of(&a->block_table, 1);
    push.table_blocks = (uint32_t)a->block_table.shape[1];
  }
  push.lens_first = l->first[SV_LENS];
  push.lens_stride = a->seqlens_kv.buffer ? vulkan_stride_of(&a->seqlens_kv, 0) : 0;
  push.q_rows = (int32_t)(s->packed_q ? a->q.shape[0] : a->q.shape[1]);
  push.kv_rows = (int32_t)(s->packed_kv || s->paged ? a->k.shape[0] : a->k.shape[1]);
  push.block_size = (int32_t)l->block_size;
  push.max_q = (int32_t)s->max_q;
  push.max_kv = (int32_t)s->max_kv;
  push.plan_stride = l->plan_stride;
  vulkan_binding bind[6] = {
      l->bind[SV_CU_Q],          l->bind[SV_CU_KV], l->bind[SV_TABLE], l->bind[SV_LENS], *plan,
      vulkan_queue_faults(queue)};
  /* Absent index tensors: the plan stands in (never read). */
  for (int i = 0; i < 4; i++)
    if (!l->present[SV_CU_Q + i])
      bind[i] = *plan;
  uint32_t limit = p->max_workgroup_count[0];
  uint32_t gx = (uint64_t)s->batch < limit ? (uint32_t)s->batch : limit;
  uint32_t gy = gx ? (uint32_t)(((uint64_t)s->batch + gx - 1) / gx) : 0;
  return vulkan_dispatch(queue, pipeline, bind, 6, &push, sizeof push, gx, gy, 1);
}

/* The scalar serving build's push constants. */
static void serving_push(const tsr_attention_args *a, const serving_launch *l,
                         vulkan_attention_serving_push *push) {
  const vulkan_attention_shape *s = &l->shape;
  memset(push, 0, sizeof *push);
  push->max_q = (uint32_t)s->max_q;
  push->plan_stride = l->plan_stride;
  push->group = l->group;
  push->block_size = l->block_size;
  push->q = l->q;
  push->k = l->k;
  push->v = l->v;
  push->o = l->o;
  push->lse = l->lse;
  push->dim = (uint32_t)s->dim;
  push->flags = (a->lse.buffer ? VULKAN_SERVING_LSE : 0u) | (s->paged ? VULKAN_SERVING_PAGED : 0u) |
                VULKAN_SERVING_PLAN;
  push->window_left = clamp_window(a->window_left, s->max_q, s->max_kv);
  push->window_right = a->causal ? 0 : clamp_window(a->window_right, s->max_q, s->max_kv);
  push->scale_log2 = (float)((double)a->scale * 1.4426950408889634);
  push->softcap_log2 = (float)((double)a->softcap * 1.4426950408889634);
}

/* The decode path's subgroup use: shuffles over SHUF lanes of each key
 * group (attention_decode.comp) in subgroups of `size` (0: the driver's);
 * SHUF 1 without subgroup operations. */
static void decode_subgroups(const vulkan_device_props *p, uint32_t dp, uint32_t *shuf,
                             uint32_t *size) {
  uint32_t lanes = dp / 8;
  *shuf = 1;
  *size = 0;
  if (!p->subgroup_shuffle_vote || !p->subgroup_arithmetic)
    return;
  uint32_t sg = p->subgroup_size;
  if (p->subgroup_size_control) {
    sg = lanes < p->subgroup_min   ? p->subgroup_min
         : lanes > p->subgroup_max ? p->subgroup_max
                                   : lanes;
    *size = sg;
  }
  if (sg == 0 || (sg & (sg - 1)) != 0 || 128 % sg != 0)
    return;
  *shuf = lanes < sg ? lanes : sg;
}

/* The decode pass's 8-element loads: dim a multiple of 8 and every start
 * and stride of k and v a multiple of the unit (8 elements; 4 for f32,
 * loaded as two vec4s). */
static uint32_t decode_vec(const tsr_attention_args *a, const serving_launch *l) {
  uint32_t unit = a->q.dtype == TSR_DTYPE_F32 ? 4 : 8;
  const vulkan_attention_view *views[2] = {&l->k, &l->v};
  bool vec = l->shape.dim % 8 == 0;
  for (int i = 0; i < 2; i++)
    vec = vec && views[i]->first % unit == 0 && views[i]->s0 % unit == 0 &&
          views[i]->s1 % unit == 0 && views[i]->s2 % unit == 0;
  return vec ? 1u : 0u;
}

static tsr_status decode_prepare(vulkan_device *device, const tsr_attention_args *a,
                                 const vulkan_attention_config *c, const serving_launch *l,
                                 const vulkan_pipeline *pipes[3]) {
  const char *dtype = vulkan_dtype_suffix(a->q.dtype);
  vulkan_decode_plan d;
  vulkan_decode_plan_of(device->props, &l->shape, c, &d);
  uint32_t shuf, size;
  decode_subgroups(device->props, d.dp, &shuf, &size);
  char name[48];
  snprintf(name, sizeof name, "attention_decode_%s_d%u_r%u", dtype, d.dp, d.rt);
  uint32_t spec[2] = {decode_vec(a, l), shuf};
  tsr_status status = vulkan_pipeline_get(device, name, spec, 2, size, &pipes[0]);
  if (status != TSR_OK)
    return status;
  snprintf(name, sizeof name, "attention_combine_%s", dtype);
  status = vulkan_pipeline_get(device, name, NULL, 0, 0, &pipes[2]);
  if (status == TSR_OK && l->shape.serving)
    status = vulkan_pipeline_get(device, "attention_plan", NULL, 0, 0, &pipes[1]);
  return status;
}

/* Plan, split and combine passes of the decode path. Scratch: the plan,
 * then (aligned) every chunk's partial rows: dp floats each, then their
 * (m, l) pairs. */
static tsr_status decode_run(vulkan_queue *queue, const tsr_attention_args *a,
                             const vulkan_config *config, const serving_launch *l) {
  vulkan_device *device = queue->device;
  const vulkan_attention_shape *s = &l->shape;
  vulkan_decode_plan d;
  vulkan_decode_plan_of(device->props, s, config->row, &d);
  uint64_t align = device->props->storage_alignment ? device->props->storage_alignment : 256;
  uint64_t plan_span = s->serving ? (l->plan_bytes + align - 1) / align * align : 0;
  uint64_t slots = (uint64_t)s->batch * (uint64_t)s->hkv * d.splits * d.row_tiles * d.rt;
  uint64_t part_bytes = slots * (d.dp + 2) * 4;
  if (slots * (d.dp + 2) > UINT32_MAX)
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_UNSUPPORTED,
                           "attention: %llu partial rows of the split-KV decode pass 32-bit "
                           "indices; a variant with fewer splits may fit",
                           (unsigned long long)slots);
  vulkan_binding scratch;
  tsr_status status = vulkan_queue_scratch(queue, plan_span + part_bytes, &scratch);
  if (status != TSR_OK)
    return status;
  vulkan_binding plan = {scratch.buffer, scratch.offset, s->serving ? l->plan_bytes : 4};
  vulkan_binding part = {scratch.buffer, scratch.offset + plan_span, part_bytes};
  if (s->serving) {
    status = plan_dispatch(queue, config->extra[0], a, l, &plan);
    if (status != TSR_OK || !serving_has_work(l))
      return status;
  } else {
    plan = part; /* dense: never read */
  }
  uint32_t flags = (a->lse.buffer ? VULKAN_SERVING_LSE : 0u) |
                   (s->paged ? VULKAN_SERVING_PAGED : 0u) | (s->serving ? VULKAN_SERVING_PLAN : 0u);
  vulkan_attention_decode_push push;
  memset(&push, 0, sizeof push);
  push.max_q = (uint32_t)s->max_q;
  push.plan_stride = l->plan_stride;
  push.group = l->group;
  push.block_size = l->block_size;
  push.q = l->q;
  push.k = l->k;
  push.v = l->v;
  push.dim = (uint32_t)s->dim;
  push.flags = flags & ~(uint32_t)VULKAN_SERVING_LSE;
  push.window_left = clamp_window(a->window_left, s->max_q, s->max_kv);
  push.window_right = a->causal ? 0 : clamp_window(a->window_right, s->max_q, s->max_kv);
  push.scale_log2 = (float)((double)a->scale * 1.4426950408889634);
  push.softcap_log2 = s->serving ? (float)((double)a->softcap * 1.4426950408889634) : 0.0f;
  push.max_kv = (uint32_t)s->max_kv;
  push.chunk = d.chunk;
  push.rows = d.rows;
  push.row_tiles = d.row_tiles;
  push.ml_base = (uint32_t)(slots * d.dp);
  /* A shift and a mask for the block of a key where the size allows. */
  if (s->paged && (l->block_size & (l->block_size - 1)) == 0)
    while ((1u << push.block_shift) < l->block_size)
      push.block_shift++;
  vulkan_binding bind[5] = {l->bind[SV_Q], l->bind[SV_K], l->bind[SV_V], plan, part};
  if (s->max_kv > 0) {
    status = vulkan_dispatch(queue, config->pipeline, bind, 5, &push, sizeof push,
                             d.splits * d.row_tiles, (uint32_t)s->hkv, (uint32_t)s->batch);
    if (status != TSR_OK)
      return status;
  }
  vulkan_attention_combine_push cp;
  memset(&cp, 0, sizeof cp);
  cp.max_q = push.max_q;
  cp.plan_stride = push.plan_stride;
  cp.group = push.group;
  cp.block_size = push.block_size;
  cp.o = l->o;
  cp.lse = l->lse;
  cp.dim = push.dim;
  cp.flags = flags;
  cp.max_kv = push.max_kv;
  cp.chunk = d.chunk;
  cp.chunks = d.splits;
  cp.rows_pad = d.row_tiles * d.rt;
  cp.dp = d.dp;
  cp.ml_base = push.ml_base;
  vulkan_binding cbind[4] = {l->bind[SV_O], a->lse.buffer ? l->bind[SV_LSE] : l->bind[SV_O], plan,
                             part};
  return vulkan_dispatch(queue, config->extra[1], cbind, 4, &cp, sizeof cp, (uint32_t)s->max_q,
                         (uint32_t)s->hq, (uint32_t)s->batch);
}

/* The scalar serving build after the plan pass. */
static tsr_status serving_run(vulkan_queue *queue, const tsr_attention_args *a,
                              const vulkan_config *config, const serving_launch *l) {
  const vulkan_attention_config *c = config->row;
  const vulkan_attention_shape *s = &l->shape;
  vulkan_binding plan;
  tsr_status status = vulkan_queue_scratch(queue, l->plan_bytes, &plan);
  if (status != TSR_OK)
    return status;
  plan.range = l->plan_bytes;
  status = plan_dispatch(queue, config->extra[0], a, l, &plan);
  if (status != TSR_OK || !serving_has_work(l) || !config->pipeline)
    return status;
  vulkan_attention_serving_push push;
  serving_push(a, l, &push);
  vulkan_binding bind[6] = {l->bind[SV_Q], l->bind[SV_K],   l->bind[SV_V],
                            l->bind[SV_O], l->bind[SV_LSE], plan};
  if (!a->lse.buffer)
    bind[4] = l->bind[SV_O];
  return vulkan_dispatch(queue, config->pipeline, bind, 6, &push, sizeof push,
                         (uint32_t)((s->max_q + c->br - 1) / c->br), (uint32_t)s->hq,
                         (uint32_t)s->batch);
}

/* ------------------------------------------------------------------------ */
/* The family                                                                */
/* ------------------------------------------------------------------------ */

static tsr_status attention_prepare(vulkan_device *device, tsr_op op, const void *args,
                                    const char *name, const vulkan_config **out) {
  const tsr_plugin_host *host = &device->plugin->host;
  const tsr_attention_args *a = args;
  const vulkan_attention_config *c = vulkan_attention_config_find(name);
  if (!c)
    return tsr_plugin_fail(host, TSR_ERROR_NOT_FOUND, "attention: no variant named %s", name);
  char why[TSR_PLUGIN_MESSAGE_CAPACITY];
  if (c->decode || tsr_plugin_attention_is_serving(a)) {
    serving_launch l;
    if (!serving_bind(device, a, &l, why, sizeof why))
      return tsr_plugin_fail(host, TSR_ERROR_UNSUPPORTED, "attention: %s", why);
    const vulkan_pipeline *pipes[3] = {NULL, NULL, NULL}; /* main, plan, combine */
    tsr_status status = TSR_OK;
    if (c->decode) {
      status = decode_prepare(device, a, c, &l, pipes);
    } else {
      status = vulkan_pipeline_get(device, "attention_plan", NULL, 0, 0, &pipes[1]);
      if (status == TSR_OK && serving_has_work(&l)) {
        /* What attention_pipeline reads: dim and the q, k, v views (the
         * coopmat build's 16-byte loads). */
        vulkan_attention_push shim;
        memset(&shim, 0, sizeof shim);
        shim.dim = (uint32_t)l.shape.dim;
        shim.q = l.q;
        shim.k = l.k;
        shim.v = l.v;
        status = attention_pipeline(device, a, c, &shim, l.first, "_serving", &pipes[0]);
      }
    }
    if (status != TSR_OK)
      return status;
    const vulkan_pipeline *extra[VULKAN_CONFIG_EXTRA] = {pipes[1], pipes[2]};
    return vulkan_config_get_with(device, op, c->name, c, pipes[0], 0, extra, out);
  }
  const vulkan_pipeline *pipeline = NULL;
  if (!attention_empty(a)) {
    vulkan_binding bind[ATTENTION_BINDINGS];
    uint32_t first[ATTENTION_BINDINGS];
    vulkan_attention_push push;
    if (!attention_launch(device, a, bind, first, &push, why, sizeof why))
      return tsr_plugin_fail(host, TSR_ERROR_UNSUPPORTED, "attention: %s", why);
    tsr_status status = attention_pipeline(device, a, c, &push, first, "", &pipeline);
    if (status != TSR_OK)
      return status;
  }
  return vulkan_config_get(device, op, c->name, c, pipeline, 0, out);
}

static tsr_status attention_run(vulkan_queue *queue, tsr_op op, const void *args,
                                const vulkan_config *config) {
  (void)op;
  vulkan_device *device = queue->device;
  const tsr_attention_args *a = args;
  const vulkan_attention_config *c = config->row;
  char why[TSR_PLUGIN_MESSAGE_CAPACITY];
  if (c->decode || tsr_plugin_attention_is_serving(a)) {
    serving_launch l;
    if (!serving_bind(device, a, &l, why, sizeof why))
      return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_UNSUPPORTED, "attention: %s", why);
    if (l.shape.batch == 0)
      return TSR_OK;
    if (c->decode) {
      if (!l.shape.serving && !serving_has_work(&l))
        return TSR_OK;
      return decode_run(queue, a, config, &l);
    }
    return serving_run(queue, a, config, &l);
  }
  if (attention_empty(a) || !config->pipeline)
    return TSR_OK;
  vulkan_binding bind[ATTENTION_BINDINGS];
  uint32_t first[ATTENTION_BINDINGS];
  vulkan_attention_push push;
  if (!attention_launch(device, a, bind, first, &push, why, sizeof why))
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_UNSUPPORTED, "attention: %s", why);
  return vulkan_dispatch(queue, config->pipeline, bind, ATTENTION_BINDINGS, &push, sizeof push,
                         (uint32_t)((a->q.shape[1] + c->br - 1) / c->br), (uint32_t)a->q.shape[2],
                         (uint32_t)a->q.shape[0]);
}

const vulkan_op_family vulkan_attention_family = {attention_list, attention_prepare, attention_run};
