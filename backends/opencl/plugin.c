/* SPDX-License-Identifier: Apache-2.0 */
/* The OpenCL plugin's ABI table (tsr_plugin_v2, ABI 2 only) and the op entry
 * points, which only route: init, devices and info live in device.c,
 * buffers in memory.c, queues, events and launches in queue.c, programs and
 * prepared configs in program.c, device classes in configs.c, the op
 * families in ops.c (fused ops), ops_gemm.c and ops_attention.c (attention
 * and kv_append). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "opencl_internal.h"

#define OPENCL_STRINGIFY_(x) #x
#define OPENCL_STRINGIFY(x) OPENCL_STRINGIFY_(x)
#define OPENCL_PLUGIN_VERSION                                                                      \
  OPENCL_STRINGIFY(TSR_VERSION_MAJOR)                                                              \
  "." OPENCL_STRINGIFY(TSR_VERSION_MINOR) "." OPENCL_STRINGIFY(TSR_VERSION_PATCH)

/* The family of `op` and the args copied at the size both sides know, or a
 * failure after tsr_plugin_fail (an op of a newer core: unsupported). */
static tsr_status op_family(const tsr_plugin_host *host, tsr_op op, const void *args,
                            tsr_plugin_any_args *copy, const opencl_op_family **family) {
  *family = op == TSR_OP_GEMM || op == TSR_OP_GROUPED_GEMM     ? &opencl_gemm_family
            : op == TSR_OP_ATTENTION || op == TSR_OP_KV_APPEND ? &opencl_attention_family
            : tsr_plugin_op_known(op)                          ? &opencl_fused_family
                                                               : NULL;
  if (!*family)
    return tsr_plugin_fail(host, TSR_ERROR_UNSUPPORTED, "op %d is unknown", (int)op);
  if (!tsr_plugin_args_copy(op, args, copy))
    return tsr_plugin_fail(host, TSR_ERROR_INVALID_VALUE, "%s: args without a struct_size",
                           tsr_plugin_op_name(op));
  return TSR_OK;
}

/* The variants that can run the problem (at least one), or a failure. */
static tsr_status list_of(const opencl_device *device, const opencl_op_family *family, tsr_op op,
                          const tsr_plugin_any_args *copy, tsr_plugin_variant_list *out) {
  char why[TSR_PLUGIN_MESSAGE_CAPACITY] = "";
  tsr_status status = family->list(device, op, copy, out, why, sizeof why);
  if (status == TSR_OK && out->count == 0) {
    snprintf(why, sizeof why, "no variant can run this problem");
    status = TSR_ERROR_UNSUPPORTED;
  }
  return status == TSR_OK ? TSR_OK
                          : tsr_plugin_fail(&device->plugin->host, status, "%s: %s",
                                            tsr_plugin_op_name(op), why);
}

static tsr_status list_variants(void *handle, tsr_op op, const void *args,
                                tsr_plugin_variant_list *out) {
  const opencl_device *device = handle;
  tsr_plugin_any_args copy;
  const opencl_op_family *family;
  tsr_status status = op_family(&device->plugin->host, op, args, &copy, &family);
  return status == TSR_OK ? list_of(device, family, op, &copy, out) : status;
}

static tsr_status opencl_op_supported(void *handle, tsr_op op, const void *args) {
  tsr_plugin_variant_list list;
  list.struct_size = sizeof list;
  tsr_plugin_variants_clear(&list);
  return list_variants(handle, op, args, &list);
}

static tsr_status opencl_op_variants(void *handle, tsr_op op, const void *args,
                                     tsr_plugin_variant_list *out) {
  const opencl_device *device = handle;
  return tsr_plugin_variants_serve(&device->plugin->host, handle, op, args, out, list_variants);
}

/* Lists the variants (so op_select(NULL) is the heuristic's pick and a name
 * is valid exactly where op_variants lists it), then the family prepares. */
static tsr_status opencl_op_select(void *handle, tsr_op op, const void *args, const char *variant,
                                   tsr_plugin_selection *out) {
  opencl_device *device = handle;
  const tsr_plugin_host *host = &device->plugin->host;
  if (!out || out->struct_size < offsetof(tsr_plugin_selection, name) + sizeof out->name)
    return tsr_plugin_fail(host, TSR_ERROR_STRUCT_SIZE, "op_select: the selection is %s",
                           out ? "too short" : "missing");
  tsr_plugin_any_args copy;
  const opencl_op_family *family;
  tsr_status status = op_family(host, op, args, &copy, &family);
  tsr_plugin_variant_list list;
  list.struct_size = sizeof list;
  tsr_plugin_variants_clear(&list);
  if (status == TSR_OK)
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
  const opencl_config *config = NULL;
  status = family->prepare(device, op, &copy, list.variants[i].name, &config);
  if (status != TSR_OK)
    return status;
  out->config = config;
  out->name = config->name;
  return TSR_OK;
}

static tsr_status opencl_op_run(void *handle, tsr_op op, const void *args, const void *config) {
  opencl_queue *queue = handle;
  const tsr_plugin_host *host = &queue->device->plugin->host;
  tsr_plugin_any_args copy;
  const opencl_op_family *family;
  tsr_status status = op_family(host, op, args, &copy, &family);
  if (status != TSR_OK)
    return status;
  const opencl_config *prepared = config;
  if (!prepared || prepared->op != op)
    return tsr_plugin_fail(host, TSR_ERROR_INVALID_VALUE, "%s: the config is not one of this op's",
                           tsr_plugin_op_name(op));
  return family->run(queue, op, &copy, prepared);
}

static const tsr_plugin_v2 opencl_plugin_table = {
    .struct_size = sizeof(tsr_plugin_v2),
    .abi_version = 2,
    .name = "opencl",
    .version = OPENCL_PLUGIN_VERSION,
    .init = opencl_init,
    .shutdown = opencl_shutdown,
    .device_count = opencl_device_count,
    .device_info = opencl_device_info,
    .device_open = opencl_device_open,
    .device_close = opencl_device_close,
    .buffer_alloc = opencl_buffer_alloc,
    .buffer_free = opencl_buffer_free,
    .buffer_host_pointer = NULL,
    .queue_create = opencl_queue_create,
    .queue_destroy = opencl_queue_destroy,
    .queue_finish = opencl_queue_finish,
    .buffer_write = opencl_buffer_write,
    .buffer_read = opencl_buffer_read,
    .buffer_copy = opencl_buffer_copy,
    .event_record = opencl_event_record,
    .event_wait = opencl_event_wait,
    .event_elapsed_ms = opencl_event_elapsed_ms,
    .event_destroy = opencl_event_destroy,
    .buffer_wrap = opencl_buffer_wrap,
    .op_supported = opencl_op_supported,
    .op_variants = opencl_op_variants,
    .op_select = opencl_op_select,
    .op_run = opencl_op_run,
    .buffer_export = NULL,
    .queue_wrap = NULL,
    .queue_wait_event = opencl_queue_wait_event,
    .event_flush = NULL, /* event_record flushes the queue */
    .queue_gate = opencl_queue_gate,
    .gate_open = opencl_gate_open,
    .buffer_copy_peer = NULL, /* a context per device: no buffer is shared */
};

TSR_PLUGIN_EXPORT_V2(opencl_plugin_table)
