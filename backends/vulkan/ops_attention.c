/* SPDX-License-Identifier: Apache-2.0 */
/* Flash attention launches: bindings, push constants and the dispatch of the
 * config configs.c chose, on the scalar shader (kernels/attention.comp, any
 * device) or on cooperative matrices (kernels/attention_coopmat.comp, f16,
 * spirv_rewrite.c). Notes and figures: docs/PERFORMANCE.md. */
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
 * implementations, see attention.comp). */
static tsr_status attention_pipeline(vulkan_device *device, const tsr_attention_args *a,
                                     const vulkan_attention_config *c,
                                     const vulkan_attention_push *push, const uint32_t *first,
                                     const vulkan_pipeline **out) {
  char name[48];
  if (c->coopmat) {
    const vulkan_attention_view *views[3] = {&push->q, &push->k, &push->v};
    uint32_t vec = push->dim == c->dp;
    for (int i = 0; i < 3; i++)
      vec = vec && first[i] % 8 == 0 && views[i]->s0 % 8 == 0 && views[i]->s1 % 8 == 0 &&
            views[i]->s2 % 8 == 0;
    snprintf(name, sizeof name, "attention_coopmat_f16_d%u", c->dp);
    uint32_t spec[1] = {vec};
    return vulkan_coopmat_pipeline(device, name, spec, 1, out);
  }
  if (device->props->type == VK_PHYSICAL_DEVICE_TYPE_CPU)
    snprintf(name, sizeof name, "attention_%s_rolled", vulkan_dtype_suffix(a->q.dtype));
  else
    snprintf(name, sizeof name, "attention_%s_d%u_q%u_t%u", vulkan_dtype_suffix(a->q.dtype), c->dp,
             c->rq, c->tpr);
  uint32_t spec[5] = {vulkan_attention_threads(c), c->br, c->bc, c->dp, c->rq};
  return vulkan_pipeline_get(device, name, spec, 5, 0, out);
}

static tsr_status attention_prepare(vulkan_device *device, tsr_op op, const void *args,
                                    const char *name, const vulkan_config **out) {
  const tsr_plugin_host *host = &device->plugin->host;
  const tsr_attention_args *a = args;
  const vulkan_attention_config *c = vulkan_attention_config_find(name);
  if (!c)
    return tsr_plugin_fail(host, TSR_ERROR_NOT_FOUND, "attention: no variant named %s", name);
  const vulkan_pipeline *pipeline = NULL;
  if (!attention_empty(a)) {
    vulkan_binding bind[ATTENTION_BINDINGS];
    uint32_t first[ATTENTION_BINDINGS];
    vulkan_attention_push push;
    char why[TSR_PLUGIN_MESSAGE_CAPACITY];
    if (!attention_launch(device, a, bind, first, &push, why, sizeof why))
      return tsr_plugin_fail(host, TSR_ERROR_UNSUPPORTED, "attention: %s", why);
    tsr_status status = attention_pipeline(device, a, c, &push, first, &pipeline);
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
  if (attention_empty(a) || !config->pipeline)
    return TSR_OK;
  vulkan_binding bind[ATTENTION_BINDINGS];
  uint32_t first[ATTENTION_BINDINGS];
  vulkan_attention_push push;
  char why[TSR_PLUGIN_MESSAGE_CAPACITY];
  if (!attention_launch(device, a, bind, first, &push, why, sizeof why))
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_UNSUPPORTED, "attention: %s", why);
  return vulkan_dispatch(queue, config->pipeline, bind, ATTENTION_BINDINGS, &push, sizeof push,
                         (uint32_t)((a->q.shape[1] + c->br - 1) / c->br), (uint32_t)a->q.shape[2],
                         (uint32_t)a->q.shape[0]);
}

const vulkan_op_family vulkan_attention_family = {attention_list, attention_prepare, attention_run};
