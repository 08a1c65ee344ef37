/* SPDX-License-Identifier: Apache-2.0 */
/* GEMM and grouped GEMM launches: bindings, push constants, the group table
 * and the dispatch of the config configs.c chose. Two paths: "simt"
 * (kernels/gemm.comp, shared-memory tiles and register blocking, any device)
 * and "coopmat" (kernels/gemm_coopmat.comp, cooperative matrices 16x8x16
 * f16 -> f32, spirv_rewrite.c). Grouped GEMM runs the same shaders with a
 * group table (prefix sums of M tiles and rows per group) in one dispatch.
 * Notes and figures: docs/PERFORMANCE.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "configs.h"
#include "push_constants.h"
#include "vulkan_internal.h"

static vulkan_gemm_problem gemm_problem_of(const tsr_gemm_args *g) {
  vulkan_gemm_problem p = {&g->a,
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

static vulkan_gemm_problem grouped_problem_of(const tsr_grouped_gemm_args *g) {
  vulkan_gemm_problem p = {
      &g->a,          &g->b,         NULL,           g->bias.buffer ? &g->bias : NULL,
      &g->d,          g->a.shape[0], g->b.shape[2],  g->a.shape[1],
      g->group_count, true,          g->group_sizes, g->alpha,
      0.0f,           g->activation, g->a.dtype,     g->d.dtype != g->a.dtype};
  return p;
}

static vulkan_gemm_problem problem_of(tsr_op op, const void *args) {
  return op == TSR_OP_GEMM ? gemm_problem_of(args) : grouped_problem_of(args);
}

static bool gemm_empty(const vulkan_gemm_problem *g) {
  return g->m == 0 || g->n == 0 || g->batch == 0;
}

static tsr_status gemm_list(const vulkan_device *device, tsr_op op, const void *args,
                            tsr_plugin_variant_list *out, char *why, size_t why_capacity) {
  vulkan_gemm_problem g = problem_of(op, args);
  return vulkan_gemm_variants(device->props, &g, out, why, why_capacity);
}

/* The bindings (the group table's left to the caller) and push constants of
 * a problem, with each operand's first element in first[] (a, b, c, bias,
 * d); false with the reason when a tensor does not fit a binding. */
static bool gemm_launch(const vulkan_device *device, const vulkan_gemm_problem *g,
                        vulkan_binding *bind, vulkan_gemm_push *push, uint32_t first[5], char *why,
                        size_t capacity) {
  memset(bind, 0, VULKAN_GEMM_BINDINGS * sizeof *bind);
  memset(push, 0, sizeof *push);
  const tsr_plugin_tensor *ts[5] = {g->a, g->b, g->c, g->bias, g->d};
  for (int i = 0; i < 5; i++) {
    first[i] = 0;
    if (ts[i] && !vulkan_bind_tensor(device, ts[i], &bind[i], &first[i], why, capacity))
      return false;
  }
  if (!g->c)
    bind[VULKAN_GEMM_BIND_C] = bind[VULKAN_GEMM_BIND_D];
  if (!g->bias)
    bind[VULKAN_GEMM_BIND_BIAS] = bind[VULKAN_GEMM_BIND_D];
  /* The shaders declare the group table either way: plain GEMM binds D there
   * (never read), so every declared binding is written. */
  bind[VULKAN_GEMM_BIND_GROUPS] = bind[VULKAN_GEMM_BIND_D];
  push->m = (uint32_t)g->m;
  push->n = (uint32_t)g->n;
  push->k = (uint32_t)g->k;
  push->batch = (uint32_t)g->batch;
  push->alpha = g->alpha;
  push->beta = g->beta;
  push->flags = (g->c ? VULKAN_GEMM_HAS_C : 0u) | (g->bias ? VULKAN_GEMM_HAS_BIAS : 0u) |
                ((uint32_t)g->activation << VULKAN_GEMM_ACTIVATION_SHIFT);
  push->a_first = first[0];
  push->b_first = first[1];
  push->c_first = first[2];
  push->bias_first = first[3];
  push->d_first = first[4];
  if (g->grouped) {
    /* a [T, K], b [G, K, N], bias [G, N], d [T, N] */
    push->a_sm = vulkan_stride_of(g->a, 0);
    push->a_sk = vulkan_stride_of(g->a, 1);
    push->d_sm = vulkan_stride_of(g->d, 0);
    push->d_sn = vulkan_stride_of(g->d, 1);
    if (g->bias) {
      push->bias_sb = vulkan_stride_of(g->bias, 0);
      push->bias_sn = vulkan_stride_of(g->bias, 1);
    }
  } else {
    push->a_sb = vulkan_stride_of(g->a, 0);
    push->a_sm = vulkan_stride_of(g->a, 1);
    push->a_sk = vulkan_stride_of(g->a, 2);
    push->d_sb = vulkan_stride_of(g->d, 0);
    push->d_sm = vulkan_stride_of(g->d, 1);
    push->d_sn = vulkan_stride_of(g->d, 2);
    if (g->c) {
      push->c_sb = vulkan_stride_of(g->c, 0);
      push->c_sm = vulkan_stride_of(g->c, 1);
      push->c_sn = vulkan_stride_of(g->c, 2);
    }
    if (g->bias)
      push->bias_sn = vulkan_stride_of(g->bias, 0);
  }
  push->b_sb = vulkan_stride_of(g->b, 0);
  push->b_sk = vulkan_stride_of(g->b, 1);
  push->b_sn = vulkan_stride_of(g->b, 2);
  return true;
}

/* The pipeline of config `c` for the problem: the simt build (rolled on CPU
 * implementations, see gemm.comp) or the coopmat build, specialised with the
 * tile, the operands' fast dimensions and, for coopmat, 8-element (16-byte)
 * loads where the contiguous dimension and every other stride and start
 * allow them. */
static tsr_status gemm_pipeline(vulkan_device *device, const vulkan_gemm_problem *g,
                                const vulkan_gemm_config *c, const vulkan_gemm_push *push,
                                const uint32_t first[5], const vulkan_pipeline **out) {
  const vulkan_device_props *props = device->props;
  uint32_t a_kfast = push->a_sk == 1 || g->k == 1;
  uint32_t b_nfast = push->b_sn == 1 || g->n == 1;
  uint32_t threads = vulkan_gemm_threads(c);
  char name[48];
  if (c->kind == VULKAN_GEMM_SIMT) {
    if (props->type == VK_PHYSICAL_DEVICE_TYPE_CPU)
      snprintf(name, sizeof name, "gemm_%s_rolled", vulkan_dtype_suffix(g->dtype));
    else
      snprintf(name, sizeof name, "gemm_%s_%ux%u", vulkan_dtype_suffix(g->dtype), c->tm, c->tn);
    uint32_t spec[10] = {threads, c->bm,   c->bn,   c->bk,      c->tm,
                         c->tn,   a_kfast, b_nfast, g->out_f32, g->grouped};
    return vulkan_pipeline_get(device, name, spec, 10, 0, out);
  }
  uint32_t a_vec =
      a_kfast ? (push->a_sm % 8 == 0 && push->a_sb % 8 == 0 && first[0] % 8 == 0 && g->k % 8 == 0)
              : (push->a_sk % 8 == 0 && push->a_sb % 8 == 0 && first[0] % 8 == 0 && g->m % 8 == 0 &&
                 !g->grouped && push->a_sm == 1);
  uint32_t b_vec =
      b_nfast ? (push->b_sk % 8 == 0 && push->b_sb % 8 == 0 && first[1] % 8 == 0 && g->n % 8 == 0)
              : (push->b_sn % 8 == 0 && push->b_sb % 8 == 0 && first[1] % 8 == 0 && g->k % 8 == 0 &&
                 push->b_sk == 1);
  snprintf(name, sizeof name, "gemm_coopmat_f16_%ux%u_%ux%u", c->bm, c->bn, c->sg_m, c->sg_n);
  uint32_t spec[15] = {threads, c->bm, c->bn,      c->bk,      c->sg_m,
                       c->sg_n, c->wm, c->wn,      a_kfast,    b_nfast,
                       a_vec,   b_vec, g->out_f32, g->grouped, device->coopmat_probe};
  return vulkan_coopmat_pipeline(device, name, spec, 15, out);
}

static tsr_status gemm_prepare(vulkan_device *device, tsr_op op, const void *args, const char *name,
                               const vulkan_config **out) {
  const tsr_plugin_host *host = &device->plugin->host;
  vulkan_gemm_problem g = problem_of(op, args);
  const vulkan_gemm_config *c = vulkan_gemm_config_find(name);
  if (!c)
    return tsr_plugin_fail(host, TSR_ERROR_NOT_FOUND, "%s: no variant named %s",
                           tsr_plugin_op_name(op), name);
  const vulkan_pipeline *pipeline = NULL;
  if (!gemm_empty(&g)) {
    vulkan_binding bind[VULKAN_GEMM_BINDINGS];
    vulkan_gemm_push push;
    uint32_t first[5];
    char why[TSR_PLUGIN_MESSAGE_CAPACITY];
    if (!gemm_launch(device, &g, bind, &push, first, why, sizeof why))
      return tsr_plugin_fail(host, TSR_ERROR_UNSUPPORTED, "%s: %s", tsr_plugin_op_name(op), why);
    tsr_status status = gemm_pipeline(device, &g, c, &push, first, &pipeline);
    if (status != TSR_OK)
      return status;
  }
  return vulkan_config_get(device, op, c->name, c, pipeline, 0, out);
}

/* Uploads the group table (prefix sums of M tiles, then of rows): in the
 * command buffer (vulkan_queue_upload) where it fits, else into the queue's
 * scratch with one fill per run of equal words. Nothing waits either way. */
static tsr_status gemm_group_table(vulkan_queue *queue, const vulkan_gemm_problem *g, uint32_t bm,
                                   vulkan_binding *out) {
  uint64_t words = 2 * (uint64_t)g->batch + 2;
  uint32_t *table = malloc(words * sizeof *table);
  if (!table)
    return tsr_plugin_fail(&queue->device->plugin->host, TSR_ERROR_OUT_OF_MEMORY,
                           "out of host memory for a group table");
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

static tsr_status gemm_run(vulkan_queue *queue, tsr_op op, const void *args,
                           const vulkan_config *config) {
  vulkan_device *device = queue->device;
  vulkan_gemm_problem g = problem_of(op, args);
  const vulkan_gemm_config *c = config->row;
  if (gemm_empty(&g) || !config->pipeline)
    return TSR_OK;
  vulkan_binding bind[VULKAN_GEMM_BINDINGS];
  vulkan_gemm_push push;
  uint32_t first[5];
  char why[TSR_PLUGIN_MESSAGE_CAPACITY];
  if (!gemm_launch(device, &g, bind, &push, first, why, sizeof why))
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_UNSUPPORTED, "%s: %s",
                           tsr_plugin_op_name(op), why);
  if (g.grouped) {
    tsr_status status = gemm_group_table(queue, &g, c->bm, &bind[VULKAN_GEMM_BIND_GROUPS]);
    if (status != TSR_OK)
      return status;
  }
  uint64_t grid[3];
  vulkan_gemm_grid(&g, c, grid);
  if (grid[0] == 0)
    return TSR_OK;
  return vulkan_dispatch(queue, config->pipeline, bind, VULKAN_GEMM_BINDINGS, &push, sizeof push,
                         (uint32_t)grid[0], (uint32_t)grid[1], (uint32_t)grid[2]);
}

const vulkan_op_family vulkan_gemm_family = {gemm_list, gemm_prepare, gemm_run};
