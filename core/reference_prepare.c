/* SPDX-License-Identifier: Apache-2.0 */
/* tsr_reference_prepare: the core's own validation and normalisation, handed
 * to testers with host copies in place of device buffers, so the oracle sees
 * exactly the problem a plugin sees. */
#include <stddef.h>
#include <string.h>

#include "internal.h"
#include "tessera/reference.h"

/* Offsets of the tensor fields in each op's args struct; -1 ends a list. */
#define T(type, field) (int)offsetof(type, field)
static const int tensor_fields[TSR_OP_COUNT_][10] = {
    [TSR_OP_GEMM] = {T(tsr_gemm_args, a), T(tsr_gemm_args, b), T(tsr_gemm_args, c),
                     T(tsr_gemm_args, bias), T(tsr_gemm_args, d), -1},
    [TSR_OP_GROUPED_GEMM] = {T(tsr_grouped_gemm_args, a), T(tsr_grouped_gemm_args, b),
                             T(tsr_grouped_gemm_args, bias), T(tsr_grouped_gemm_args, d), -1},
    [TSR_OP_ATTENTION] = {T(tsr_attention_args, q), T(tsr_attention_args, k),
                          T(tsr_attention_args, v), T(tsr_attention_args, o),
                          T(tsr_attention_args, lse), T(tsr_attention_args, cu_seqlens_q),
                          T(tsr_attention_args, cu_seqlens_kv), T(tsr_attention_args, block_table),
                          T(tsr_attention_args, seqlens_kv), -1},
    [TSR_OP_RMSNORM] = {T(tsr_rmsnorm_args, x), T(tsr_rmsnorm_args, residual),
                        T(tsr_rmsnorm_args, weight), T(tsr_rmsnorm_args, y),
                        T(tsr_rmsnorm_args, residual_out), -1},
    [TSR_OP_LAYERNORM] = {T(tsr_layernorm_args, x), T(tsr_layernorm_args, weight),
                          T(tsr_layernorm_args, bias), T(tsr_layernorm_args, y), -1},
    [TSR_OP_SOFTMAX] = {T(tsr_softmax_args, x), T(tsr_softmax_args, y), -1},
    [TSR_OP_ROPE] = {T(tsr_rope_args, x), T(tsr_rope_args, y), -1},
    [TSR_OP_SWIGLU] = {T(tsr_swiglu_args, gate), T(tsr_swiglu_args, up), T(tsr_swiglu_args, y), -1},
    [TSR_OP_GELU] = {T(tsr_gelu_args, x), T(tsr_gelu_args, y), -1},
    [TSR_OP_CROSS_ENTROPY] = {T(tsr_cross_entropy_args, logits), T(tsr_cross_entropy_args, targets),
                              T(tsr_cross_entropy_args, loss), T(tsr_cross_entropy_args, lse), -1},
    [TSR_OP_KV_APPEND] = {T(tsr_kv_append_args, k_new), T(tsr_kv_append_args, v_new),
                          T(tsr_kv_append_args, k_cache), T(tsr_kv_append_args, v_cache),
                          T(tsr_kv_append_args, slots), -1},
};
#undef T

/* The public buffer whose plugin handle validation put into the args. */
static const tsr_buffer *buffer_of_handle(tsr_device *device, const void *handle) {
  tsr_context *context = device->context;
  const tsr_buffer *found = NULL;
  pthread_mutex_lock(&context->lock);
  for (tsr_object_link *l = context->buffers.next; l != &context->buffers && !found; l = l->next) {
    const tsr_buffer *b = (const tsr_buffer *)l;
    if (b->device == device && b->handle == handle)
      found = b;
  }
  pthread_mutex_unlock(&context->lock);
  return found;
}

tsr_status tsr_reference_prepare(tsr_device *device, tsr_op op, const void *desc,
                                 tsr_reference_host_fn host_of, void *user, void *args,
                                 size_t capacity) {
  static const char call[] = "tsr_reference_prepare";
  tsr__clear_error();
  if (!device || !host_of || !args)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL",
                     !device    ? "device"
                     : !host_of ? "host_of"
                                : "args");
  if ((int)op < 0 || op >= TSR_OP_COUNT_)
    return tsr__fail(TSR_ERROR_INVALID_VALUE, call, "op = %d is not a tsr_op", (int)op);
  if (capacity < tsr_plugin_args_size(op))
    return tsr__fail(TSR_ERROR_BAD_SIZE, call, "capacity = %zu but the %s args need %zu bytes",
                     capacity, tsr_op_name(op), tsr_plugin_args_size(op));
  tsr__op_args normalised;
  tsr_status st = tsr__validate_op(device, op, desc, call, &normalised);
  if (st != TSR_OK)
    return st;
  /* The union keeps the args struct aligned while its fields are patched. */
  unsigned char *prepared = (unsigned char *)tsr__op_args_pointer(&normalised);
  for (const int *field = tensor_fields[op]; *field >= 0; field++) {
    tsr_plugin_tensor *t = (tsr_plugin_tensor *)(prepared + *field);
    if (!t->buffer)
      continue;
    const tsr_buffer *buffer = buffer_of_handle(device, t->buffer);
    const void *host = buffer ? host_of(user, buffer) : NULL;
    if (!host)
      return tsr__fail(TSR_ERROR_NOT_FOUND, call,
                       "host_of gave no host copy of a %s tensor's buffer", tsr_op_name(op));
    t->buffer = (void *)host;
  }
  memcpy(args, prepared, tsr_plugin_args_size(op));
  return TSR_OK;
}
