/* SPDX-License-Identifier: Apache-2.0 */
/* The Vulkan plugin's ABI table (tsr_plugin_v2, ABI 2 only) and the op entry
 * points, which only route: init and shutdown live in instance.c, devices in
 * device.c, memory in memory.c, queues and events in queue.c, pipelines and
 * prepared configs in pipeline.c, variant tables and heuristics in
 * configs.c, launches in ops.c (fused ops), ops_gemm.c, ops_attention.c and
 * ops_kv_append.c. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "vulkan_internal.h"

#define VULKAN_STRINGIFY_(x) #x
#define VULKAN_STRINGIFY(x) VULKAN_STRINGIFY_(x)
#define VULKAN_PLUGIN_VERSION                                                                      \
  VULKAN_STRINGIFY(TSR_VERSION_MAJOR)                                                              \
  "." VULKAN_STRINGIFY(TSR_VERSION_MINOR) "." VULKAN_STRINGIFY(TSR_VERSION_PATCH)

/* The family that lists, prepares and runs an op; NULL for an op this
 * plugin does not know (a newer core's). */
static const vulkan_op_family *family_of(tsr_op op) {
  switch (op) {
  case TSR_OP_GEMM:
  case TSR_OP_GROUPED_GEMM:
    return &vulkan_gemm_family;
  case TSR_OP_ATTENTION:
    return &vulkan_attention_family;
  case TSR_OP_KV_APPEND:
    return &vulkan_kv_append_family;
  default:
    return tsr_plugin_op_known(op) ? &vulkan_fused_family : NULL;
  }
}

/* The family of `op` and the args copied at the size both sides know, or
 * a failure after tsr_plugin_fail (an unknown op: TSR_ERROR_UNSUPPORTED). */
static tsr_status op_family(const tsr_plugin_host *host, tsr_op op, const void *args,
                            tsr_plugin_any_args *copy, const vulkan_op_family **family) {
  *family = family_of(op);
  if (!*family)
    return tsr_plugin_fail(host, TSR_ERROR_UNSUPPORTED, "op %d is unknown", (int)op);
  if (!tsr_plugin_args_copy(op, args, copy))
    return tsr_plugin_fail(host, TSR_ERROR_INVALID_VALUE, "%s: args without a struct_size",
                           tsr_plugin_op_name(op));
  return TSR_OK;
}

/* The variants that can run the problem (at least one), or a failure after
 * tsr_plugin_fail. */
static tsr_status list_of(const vulkan_device *device, const vulkan_op_family *family, tsr_op op,
                          const tsr_plugin_any_args *copy, tsr_plugin_variant_list *out) {
  char why[TSR_PLUGIN_MESSAGE_CAPACITY] = "";
  tsr_status status = family->list(device, op, copy, out, why, sizeof why);
  if (status == TSR_OK && out->count == 0) {
    snprintf(why, sizeof why, "no variant can run this problem");
    status = TSR_ERROR_UNSUPPORTED;
  }
  if (status != TSR_OK)
    return tsr_plugin_fail(&device->plugin->host, status, "%s: %s", tsr_plugin_op_name(op), why);
  return TSR_OK;
}

/* op_variants' lister (tsr_plugin_variants_serve) and op_supported. */
static tsr_status list_variants(void *handle, tsr_op op, const void *args,
                                tsr_plugin_variant_list *out) {
  const vulkan_device *device = handle;
  tsr_plugin_any_args copy;
  const vulkan_op_family *family;
  tsr_status status = op_family(&device->plugin->host, op, args, &copy, &family);
  return status == TSR_OK ? list_of(device, family, op, &copy, out) : status;
}

static tsr_status vulkan_op_supported(void *handle, tsr_op op, const void *args) {
  tsr_plugin_variant_list list;
  list.struct_size = sizeof list;
  tsr_plugin_variants_clear(&list);
  return list_variants(handle, op, args, &list);
}

static tsr_status vulkan_op_variants(void *handle, tsr_op op, const void *args,
                                     tsr_plugin_variant_list *out) {
  const vulkan_device *device = handle;
  return tsr_plugin_variants_serve(&device->plugin->host, handle, op, args, out, list_variants);
}

/* Lists the variants (so that op_select(NULL) is op_variants' heuristic and
 * a name is valid exactly where op_variants lists it), then has the family
 * prepare the config: the variant's row and its pipeline. */
static tsr_status vulkan_op_select(void *handle, tsr_op op, const void *args, const char *variant,
                                   tsr_plugin_selection *out) {
  vulkan_device *device = handle;
  const tsr_plugin_host *host = &device->plugin->host;
  if (!out || out->struct_size < offsetof(tsr_plugin_selection, name) + sizeof out->name)
    return tsr_plugin_fail(host, TSR_ERROR_STRUCT_SIZE, "op_select: the selection is %s",
                           out ? "too short" : "missing");
  tsr_plugin_any_args copy;
  const vulkan_op_family *family;
  tsr_status status = op_family(host, op, args, &copy, &family);
  if (status != TSR_OK)
    return status;
  tsr_plugin_variant_list list;
  list.struct_size = sizeof list;
  tsr_plugin_variants_clear(&list);
  status = list_of(device, family, op, &copy, &list);
  if (status != TSR_OK)
    return status;
  const char *name = variant ? variant : list.variants[list.heuristic].name;
  uint32_t i = 0;
  while (i < list.count && strcmp(list.variants[i].name, name) != 0)
    i++;
  if (i == list.count)
    return tsr_plugin_fail(host, TSR_ERROR_NOT_FOUND,
                           "%s: variant '%s' cannot run this problem on this device",
                           tsr_plugin_op_name(op), name);
  const vulkan_config *config = NULL;
  status = family->prepare(device, op, &copy, list.variants[i].name, &config);
  if (status != TSR_OK)
    return status;
  out->config = config;
  out->name = config->name;
  return TSR_OK;
}

/* The steady-state path: the args copied, and the config's family records
 * the op with the config's pipeline. */
static tsr_status vulkan_op_run(void *handle, tsr_op op, const void *args, const void *config) {
  vulkan_queue *queue = handle;
  const tsr_plugin_host *host = &queue->device->plugin->host;
  tsr_plugin_any_args copy;
  const vulkan_op_family *family;
  tsr_status status = op_family(host, op, args, &copy, &family);
  if (status != TSR_OK)
    return status;
  const vulkan_config *prepared = config;
  if (!prepared || prepared->op != op)
    return tsr_plugin_fail(host, TSR_ERROR_INVALID_VALUE, "%s: the config is not one of this op's",
                           tsr_plugin_op_name(op));
  return family->run(queue, op, &copy, prepared);
}

static const tsr_plugin_v2 vulkan_plugin_table = {
    .struct_size = sizeof(tsr_plugin_v2),
    .abi_version = 2,
    .name = "vulkan",
    .version = VULKAN_PLUGIN_VERSION,
    .init = vulkan_init,
    .shutdown = vulkan_shutdown,
    .device_count = vulkan_device_count,
    .device_info = vulkan_device_info,
    .device_open = vulkan_device_open,
    .device_close = vulkan_device_close,
    .buffer_alloc = vulkan_buffer_alloc,
    .buffer_free = vulkan_buffer_free,
    .buffer_host_pointer = NULL,
    .queue_create = vulkan_queue_create,
    .queue_destroy = vulkan_queue_destroy,
    .queue_finish = vulkan_queue_finish,
    .buffer_write = vulkan_buffer_write,
    .buffer_read = vulkan_buffer_read,
    .buffer_copy = vulkan_buffer_copy,
    .event_record = vulkan_event_record,
    .event_wait = vulkan_event_wait,
    .event_elapsed_ms = vulkan_event_elapsed_ms,
    .event_destroy = vulkan_event_destroy,
    .buffer_wrap = vulkan_buffer_wrap,
    .op_supported = vulkan_op_supported,
    .op_variants = vulkan_op_variants,
    .op_select = vulkan_op_select,
    .op_run = vulkan_op_run,
    .buffer_export = vulkan_buffer_export,
    .queue_wrap = NULL,
    .queue_wait_event = vulkan_queue_wait_event,
    .event_flush = vulkan_event_flush,
    .queue_gate = vulkan_queue_gate,
    .gate_open = vulkan_gate_open,
    .buffer_copy_peer = NULL, /* two VkDevices share no memory: the core stages the copy */
};

TSR_PLUGIN_EXPORT_V2(vulkan_plugin_table)
