/* SPDX-License-Identifier: Apache-2.0 */
/* kv_append launches (kernels/kv_append.comp): one invocation per element
 * of k_new (and v_new), any strides, slots checked on the device (a slot past
 * the cache is recorded in the queue's fault words, read by queue_finish). */
#include <stdio.h>
#include <string.h>

#include "configs.h"
#include "push_constants.h"
#include "vulkan_internal.h"

enum { KV_BINDINGS = 6 }; /* k_new, v_new, k_cache, v_cache, slots, faults */

static uint64_t kv_count(const tsr_kv_append_args *a) {
  return (uint64_t)a->k_new.shape[0] * (uint64_t)a->k_new.shape[1] * (uint64_t)a->k_new.shape[2];
}

static tsr_status kv_list(const vulkan_device *device, tsr_op op, const void *args,
                          tsr_plugin_variant_list *out, char *why, size_t why_capacity) {
  (void)op;
  const vulkan_device_props *p = device->props;
  const tsr_kv_append_args *a = args;
  int32_t dtype = a->k_new.dtype;
  if (dtype != TSR_DTYPE_F32 &&
      !((dtype == TSR_DTYPE_F16 || dtype == TSR_DTYPE_BF16) && p->storage_16bit)) {
    snprintf(why, why_capacity, "dtype %d needs 16-bit storage buffers, which the device lacks",
             (int)dtype);
    return TSR_ERROR_UNSUPPORTED;
  }
  /* Every element index the shader forms is 32-bit (each tensor fits one
   * binding: vulkan_bind_tensor), and so is the flat element count. */
  if (kv_count(a) > UINT32_MAX) {
    snprintf(why, why_capacity, "%llu elements per call pass 32-bit indices",
             (unsigned long long)kv_count(a));
    return TSR_ERROR_UNSUPPORTED;
  }
  vulkan_kv_append_variants(p, out);
  return TSR_OK;
}

/* Bindings and push constants; false with the reason when a tensor does not
 * fit a binding. */
static bool kv_launch(const vulkan_device *device, vulkan_queue *queue, const tsr_kv_append_args *a,
                      vulkan_binding bind[KV_BINDINGS], vulkan_kv_append_push *push, char *why,
                      size_t capacity) {
  bool values = a->v_new.buffer != NULL;
  const tsr_plugin_tensor *ts[5] = {&a->k_new, values ? &a->v_new : &a->k_new, &a->k_cache,
                                    values ? &a->v_cache : &a->k_cache, &a->slots};
  uint32_t first[5];
  for (int i = 0; i < 5; i++)
    if (!vulkan_bind_tensor(device, ts[i], &bind[i], &first[i], why, capacity))
      return false;
  if (queue)
    bind[5] = vulkan_queue_faults(queue);
  memset(push, 0, sizeof *push);
  push->count = (uint32_t)kv_count(a);
  push->heads = (uint32_t)a->k_new.shape[1];
  push->dim = (uint32_t)a->k_new.shape[2];
  push->flags = values ? 1u : 0u;
  vulkan_attention_view *news[2] = {&push->k_new, &push->v_new};
  for (int i = 0; i < 2; i++)
    *news[i] = (vulkan_attention_view){first[i], vulkan_stride_of(ts[i], 0),
                                       vulkan_stride_of(ts[i], 1), vulkan_stride_of(ts[i], 2)};
  uint32_t *caches[2][5] = {
      {&push->kc_first, &push->kc_s0, &push->kc_s1, &push->kc_s2, &push->kc_s3},
      {&push->vc_first, &push->vc_s0, &push->vc_s1, &push->vc_s2, &push->vc_s3}};
  for (int i = 0; i < 2; i++) {
    *caches[i][0] = first[2 + i];
    for (int d = 0; d < 4; d++)
      *caches[i][1 + d] = vulkan_stride_of(ts[2 + i], d);
  }
  push->slots_first = first[4];
  push->slots_stride = vulkan_stride_of(&a->slots, 0);
  push->block_size = (uint32_t)a->k_cache.shape[1];
  push->slot_count = (int32_t)(a->k_cache.shape[0] * a->k_cache.shape[1]);
  return true;
}

static tsr_status kv_prepare(vulkan_device *device, tsr_op op, const void *args, const char *name,
                             const vulkan_config **out) {
  const tsr_plugin_host *host = &device->plugin->host;
  const tsr_kv_append_args *a = args;
  const vulkan_kv_append_config *c = vulkan_kv_append_config_find(name);
  if (!c)
    return tsr_plugin_fail(host, TSR_ERROR_NOT_FOUND, "kv_append: no variant named %s", name);
  const vulkan_pipeline *pipeline = NULL;
  if (kv_count(a) > 0) {
    vulkan_binding bind[KV_BINDINGS];
    vulkan_kv_append_push push;
    char why[TSR_PLUGIN_MESSAGE_CAPACITY];
    if (!kv_launch(device, NULL, a, bind, &push, why, sizeof why))
      return tsr_plugin_fail(host, TSR_ERROR_UNSUPPORTED, "kv_append: %s", why);
    char shader[32];
    snprintf(shader, sizeof shader, "kv_append_%s", vulkan_dtype_suffix(a->k_new.dtype));
    uint32_t spec[1] = {c->threads};
    tsr_status status = vulkan_pipeline_get(device, shader, spec, 1, 0, &pipeline);
    if (status != TSR_OK)
      return status;
  }
  return vulkan_config_get(device, op, c->name, c, pipeline, 0, out);
}

static tsr_status kv_run(vulkan_queue *queue, tsr_op op, const void *args,
                         const vulkan_config *config) {
  (void)op;
  vulkan_device *device = queue->device;
  const tsr_kv_append_args *a = args;
  const vulkan_kv_append_config *c = config->row;
  if (kv_count(a) == 0 || !config->pipeline)
    return TSR_OK;
  vulkan_binding bind[KV_BINDINGS];
  vulkan_kv_append_push push;
  char why[TSR_PLUGIN_MESSAGE_CAPACITY];
  if (!kv_launch(device, queue, a, bind, &push, why, sizeof why))
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_UNSUPPORTED, "kv_append: %s", why);
  uint64_t groups = (kv_count(a) + c->threads - 1) / c->threads;
  uint32_t limit = device->props->max_workgroup_count[0];
  uint32_t gx = groups < limit ? (uint32_t)groups : limit;
  uint32_t gy = (uint32_t)((groups + gx - 1) / gx);
  return vulkan_dispatch(queue, config->pipeline, bind, KV_BINDINGS, &push, sizeof push, gx, gy, 1);
}

const vulkan_op_family vulkan_kv_append_family = {kv_list, kv_prepare, kv_run};
