/* SPDX-License-Identifier: Apache-2.0 */
/* Op entry points: validate, then the op cache (op_cache.c) chooses once
 * per problem signature and queues; variants and explain for tools. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* Validation and the device handle: what every op call needs before the
 * cache (op_cache.c) or the plugin is asked anything. */
static tsr_status prepare(tsr_device *device, tsr_op op, const void *desc, const char *call,
                          tsr__op_args *args, void **handle) {
  if ((int)op < 0 || op >= TSR_OP_COUNT_)
    return tsr__fail(TSR_ERROR_INVALID_VALUE, call, "op = %d is not a tsr_op", (int)op);
  tsr_status st = tsr__validate_op(device, op, desc, call, args);
  if (st != TSR_OK)
    return st;
  if (!(device->info.op_mask & (1u << op)))
    return tsr__fail(TSR_ERROR_UNSUPPORTED, call, "%s (%s) does not support %s",
                     device->info.selector, device->info.name, tsr_op_name(op));
  return tsr__device_handle(device, call, handle);
}

static tsr_status check_supported(tsr_device *device, void *handle, const tsr__op_args *args,
                                  const char *call) {
  tsr_status st = device->plugin->table->op_supported(handle, args->op, tsr__op_args_pointer(args));
  if (st != TSR_OK) {
    char fallback[160];
    snprintf(fallback, sizeof fallback, "%s cannot run this %s problem", device->info.selector,
             tsr_op_name(args->op));
    return tsr__fail_plugin(st, call, fallback);
  }
  return TSR_OK;
}

/* "tsr_<op>" per op, for error messages: formatted once, not per call. */
static char call_names[TSR_OP_COUNT_][48];
static pthread_once_t call_names_once = PTHREAD_ONCE_INIT;

static void build_call_names(void) {
  for (int op = 0; op < TSR_OP_COUNT_; op++) {
    const char *name = tsr_op_name((tsr_op)op);
    snprintf(call_names[op], sizeof call_names[op], "tsr_%s", name ? name : "op_run");
  }
}

tsr_status tsr_op_run(tsr_queue *queue, tsr_op op, const void *desc) {
  pthread_once(&call_names_once, build_call_names);
  const char *call = (int)op >= 0 && op < TSR_OP_COUNT_ ? call_names[op] : "tsr_op_run";
  tsr__clear_error();
  if (!queue)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "queue is NULL");
  uint64_t generation = tsr__tuning_generation();
  tsr__desc_key key;
  tsr_status st;
  if (tsr__op_fast_run(queue, op, desc, call, generation, &key, &st))
    return st;
  tsr__op_args args;
  void *handle;
  st = prepare(queue->device, op, desc, call, &args, &handle);
  if (st != TSR_OK)
    return st;
  return tsr__op_cache_run(queue, handle, &args, call, &key, generation);
}

tsr_status tsr_gemm(tsr_queue *queue, const tsr_gemm_desc *desc) {
  return tsr_op_run(queue, TSR_OP_GEMM, desc);
}
tsr_status tsr_grouped_gemm(tsr_queue *queue, const tsr_grouped_gemm_desc *desc) {
  return tsr_op_run(queue, TSR_OP_GROUPED_GEMM, desc);
}
tsr_status tsr_attention(tsr_queue *queue, const tsr_attention_desc *desc) {
  return tsr_op_run(queue, TSR_OP_ATTENTION, desc);
}
tsr_status tsr_rmsnorm(tsr_queue *queue, const tsr_rmsnorm_desc *desc) {
  return tsr_op_run(queue, TSR_OP_RMSNORM, desc);
}
tsr_status tsr_layernorm(tsr_queue *queue, const tsr_layernorm_desc *desc) {
  return tsr_op_run(queue, TSR_OP_LAYERNORM, desc);
}
tsr_status tsr_softmax(tsr_queue *queue, const tsr_softmax_desc *desc) {
  return tsr_op_run(queue, TSR_OP_SOFTMAX, desc);
}
tsr_status tsr_rope(tsr_queue *queue, const tsr_rope_desc *desc) {
  return tsr_op_run(queue, TSR_OP_ROPE, desc);
}
tsr_status tsr_swiglu(tsr_queue *queue, const tsr_swiglu_desc *desc) {
  return tsr_op_run(queue, TSR_OP_SWIGLU, desc);
}
tsr_status tsr_gelu(tsr_queue *queue, const tsr_gelu_desc *desc) {
  return tsr_op_run(queue, TSR_OP_GELU, desc);
}
tsr_status tsr_cross_entropy(tsr_queue *queue, const tsr_cross_entropy_desc *desc) {
  return tsr_op_run(queue, TSR_OP_CROSS_ENTROPY, desc);
}
tsr_status tsr_kv_append(tsr_queue *queue, const tsr_kv_append_desc *desc) {
  return tsr_op_run(queue, TSR_OP_KV_APPEND, desc);
}

tsr_status tsr_op_variants(tsr_device *device, tsr_op op, const void *desc, tsr_variant_list *out) {
  static const char call[] = "tsr_op_variants";
  tsr__clear_error();
  if (!device || !out)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL", !device ? "device" : "out");
  if (out->struct_size < sizeof(tsr_variant_list))
    return tsr__fail(TSR_ERROR_STRUCT_SIZE, call,
                     "out->struct_size = %zu but the smallest known is %zu", out->struct_size,
                     sizeof(tsr_variant_list));
  tsr__op_args args;
  void *handle;
  tsr_status st = prepare(device, op, desc, call, &args, &handle);
  if (st == TSR_OK)
    st = check_supported(device, handle, &args, call);
  if (st != TSR_OK)
    return st;
  tsr_plugin_variant_list list;
  st = tsr__list_variants(device, handle, &args, call, &list);
  if (st != TSR_OK)
    return st;
  out->count = list.count > TSR_MAX_VARIANTS ? TSR_MAX_VARIANTS : list.count;
  for (uint32_t i = 0; i < out->count; i++) {
    tsr__strlcpy(out->names[i], list.variants[i].name, sizeof out->names[i]);
    tsr__strlcpy(out->descriptions[i], list.variants[i].description, sizeof out->descriptions[i]);
  }
  return TSR_OK;
}

tsr_status tsr_op_explain(tsr_device *device, tsr_op op, const void *desc, tsr_choice *out) {
  static const char call[] = "tsr_op_explain";
  tsr__clear_error();
  if (!device || !out)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL", !device ? "device" : "out");
  if (out->struct_size < sizeof(tsr_choice))
    return tsr__fail(TSR_ERROR_STRUCT_SIZE, call,
                     "out->struct_size = %zu but the smallest known is %zu", out->struct_size,
                     sizeof(tsr_choice));
  tsr__op_args args;
  void *handle;
  tsr_status st = prepare(device, op, desc, call, &args, &handle);
  if (st != TSR_OK)
    return st;
  tsr__selection selection;
  return tsr__select(device, handle, &args, call, &selection, out);
}
