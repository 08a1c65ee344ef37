/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU plugin's op entry points: whether an op runs, its variants, the
 * config of a variant (a row of configs.c), and queuing the op with it; the
 * queue's worker runs it through the kernels of kernels/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_plugin.h"

static tsr_status unknown_op(const cpu_plugin *plugin, tsr_op op) {
  return tsr_plugin_fail(&plugin->host, TSR_ERROR_UNSUPPORTED, "op %d is unknown to the cpu plugin",
                         (int)op);
}

tsr_status cpu_run_op(cpu_queue *queue, command *c, char *message, size_t capacity) {
  cpu_exec exec = {queue->device->pool, message, capacity, queue->faults, &queue->fault_context};
  switch (c->op) {
  case TSR_OP_GEMM:
    return cpu_gemm_run(&exec, &c->args.gemm, c->config);
  case TSR_OP_GROUPED_GEMM:
    return cpu_grouped_gemm_run(&exec, &c->args.grouped_gemm, c->config);
  case TSR_OP_ATTENTION:
    return cpu_attention_run(&exec, &c->args.attention, c->config);
  case TSR_OP_RMSNORM:
    return cpu_rmsnorm_run(&exec, &c->args.rmsnorm);
  case TSR_OP_LAYERNORM:
    return cpu_layernorm_run(&exec, &c->args.layernorm);
  case TSR_OP_SOFTMAX:
    return cpu_softmax_run(&exec, &c->args.softmax);
  case TSR_OP_ROPE:
    return cpu_rope_run(&exec, &c->args.rope);
  case TSR_OP_SWIGLU:
    return cpu_swiglu_run(&exec, &c->args.swiglu);
  case TSR_OP_GELU:
    return cpu_gelu_run(&exec, &c->args.gelu);
  case TSR_OP_CROSS_ENTROPY:
    return cpu_cross_entropy_run(&exec, &c->args.cross_entropy);
  case TSR_OP_KV_APPEND:
    return cpu_kv_append_run(&exec, &c->args.kv_append);
  default:
    snprintf(message, capacity, "op %d is unknown", (int)c->op);
    return TSR_ERROR_UNSUPPORTED;
  }
}

/* ------------------------------------------------------------------------ */
/* Ops                                                                       */
/* ------------------------------------------------------------------------ */

/* The tensor whose dtype decides whether the CPU kernels can run an op. */
static const tsr_plugin_tensor *op_data_tensor(tsr_op op, const void *args) {
  switch (op) {
  case TSR_OP_GEMM:
    return &((const tsr_gemm_args *)args)->a;
  case TSR_OP_GROUPED_GEMM:
    return &((const tsr_grouped_gemm_args *)args)->a;
  case TSR_OP_ATTENTION:
    return &((const tsr_attention_args *)args)->q;
  case TSR_OP_RMSNORM:
    return &((const tsr_rmsnorm_args *)args)->x;
  case TSR_OP_LAYERNORM:
    return &((const tsr_layernorm_args *)args)->x;
  case TSR_OP_SOFTMAX:
    return &((const tsr_softmax_args *)args)->x;
  case TSR_OP_ROPE:
    return &((const tsr_rope_args *)args)->x;
  case TSR_OP_SWIGLU:
    return &((const tsr_swiglu_args *)args)->gate;
  case TSR_OP_GELU:
    return &((const tsr_gelu_args *)args)->x;
  case TSR_OP_CROSS_ENTROPY:
    return &((const tsr_cross_entropy_args *)args)->logits;
  case TSR_OP_KV_APPEND:
    return &((const tsr_kv_append_args *)args)->k_new;
  default:
    return NULL;
  }
}

/* The tensors of an op's args (they follow struct_size in each struct) and
 * their names, for the alignment check. */
typedef struct op_tensor_list {
  const tsr_plugin_tensor *first;
  int count;
  const char *const *names;
} op_tensor_list;

static op_tensor_list op_tensors(tsr_op op, const void *args) {
  static const char *const gemm[] = {"a", "b", "c", "bias", "d"};
  static const char *const grouped[] = {"a", "b", "bias", "d"};
  static const char *const attention[] = {"q", "k", "v", "o", "lse"};
  static const char *const rmsnorm[] = {"x", "residual", "weight", "y", "residual_out"};
  static const char *const layernorm[] = {"x", "weight", "bias", "y"};
  static const char *const x_y[] = {"x", "y"};
  static const char *const swiglu[] = {"gate", "up", "y"};
  static const char *const cross_entropy[] = {"logits", "targets", "loss", "lse"};
  static const char *const kv_append[] = {"k_new", "v_new", "k_cache", "v_cache", "slots"};
  switch (op) {
  case TSR_OP_GEMM:
    return (op_tensor_list){&((const tsr_gemm_args *)args)->a, 5, gemm};
  case TSR_OP_GROUPED_GEMM:
    return (op_tensor_list){&((const tsr_grouped_gemm_args *)args)->a, 4, grouped};
  case TSR_OP_ATTENTION:
    return (op_tensor_list){&((const tsr_attention_args *)args)->q, 5, attention};
  case TSR_OP_RMSNORM:
    return (op_tensor_list){&((const tsr_rmsnorm_args *)args)->x, 5, rmsnorm};
  case TSR_OP_LAYERNORM:
    return (op_tensor_list){&((const tsr_layernorm_args *)args)->x, 4, layernorm};
  case TSR_OP_SOFTMAX:
    return (op_tensor_list){&((const tsr_softmax_args *)args)->x, 2, x_y};
  case TSR_OP_ROPE:
    return (op_tensor_list){&((const tsr_rope_args *)args)->x, 2, x_y};
  case TSR_OP_SWIGLU:
    return (op_tensor_list){&((const tsr_swiglu_args *)args)->gate, 3, swiglu};
  case TSR_OP_GELU:
    return (op_tensor_list){&((const tsr_gelu_args *)args)->x, 2, x_y};
  case TSR_OP_CROSS_ENTROPY:
    return (op_tensor_list){&((const tsr_cross_entropy_args *)args)->logits, 4, cross_entropy};
  case TSR_OP_KV_APPEND:
    return (op_tensor_list){&((const tsr_kv_append_args *)args)->k_new, 5, kv_append};
  default:
    return (op_tensor_list){NULL, 0, NULL};
  }
}

static size_t element_bytes(int32_t dtype) {
  return dtype == TSR_DTYPE_F32 || dtype == TSR_DTYPE_I32 ? 4 : 2;
}

/* The kernels read and write elements through typed pointers (and align
 * streaming stores by whole elements), so every element must lie at a
 * multiple of its size. The core checks that offsets are; only wrapped
 * memory can start at an address that is not (an allocation is 64-byte
 * aligned). TSR_ERROR_INVALID_VALUE naming the tensor otherwise. */
static tsr_status check_list_alignment(const cpu_plugin *plugin, tsr_op op, op_tensor_list list) {
  for (int i = 0; i < list.count; i++) {
    const tsr_plugin_tensor *t = &list.first[i];
    if (!t->buffer)
      continue;
    size_t size = element_bytes(t->dtype);
    uintptr_t address = (uintptr_t)cpu_tensor_base(t);
    if (address % size != 0)
      return tsr_plugin_fail(&plugin->host, TSR_ERROR_INVALID_VALUE,
                             "%s: %s starts at %p (its buffer's memory plus offset %llu), not a "
                             "multiple of its %s element size (%zu bytes); wrap memory aligned "
                             "to the element size",
                             tsr_plugin_op_name(op), list.names[i], (void *)address,
                             (unsigned long long)t->offset, tsr_plugin_dtype_name(t->dtype), size);
  }
  return TSR_OK;
}

static tsr_status check_alignment(const cpu_plugin *plugin, tsr_op op, const void *args) {
  tsr_status status = check_list_alignment(plugin, op, op_tensors(op, args));
  /* attention's serving index tensors (i32, read as int32_t) follow later */
  const tsr_attention_args *a = args;
  if (status == TSR_OK && op == TSR_OP_ATTENTION && a->struct_size >= sizeof *a) {
    static const char *const index_names[] = {"cu_seqlens_q", "cu_seqlens_kv", "block_table",
                                              "seqlens_kv"};
    status = check_list_alignment(plugin, op, (op_tensor_list){&a->cu_seqlens_q, 4, index_names});
  }
  return status;
}

tsr_status cpu_op_supported(void *handle, tsr_op op, const void *args) {
  cpu_device *device = handle;
  if (!tsr_plugin_op_known(op))
    return unknown_op(device->plugin, op);
  /* Every op runs for f32, f16 and bf16; tf32 compute only permits rounding,
   * so strict f32 products satisfy it. */
  int32_t dtype = op_data_tensor(op, args)->dtype;
  if (dtype != TSR_DTYPE_F32 && dtype != TSR_DTYPE_F16 && dtype != TSR_DTYPE_BF16)
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_UNSUPPORTED,
                           "the cpu plugin runs %s on f32, f16 and bf16, not dtype %d",
                           tsr_plugin_op_name(op), (int)dtype);
  return check_alignment(device->plugin, op, args);
}

/* configs.c lists the variants; every known op has some. */
static tsr_status fill_variants(void *handle, tsr_op op, const void *args,
                                tsr_plugin_variant_list *out) {
  (void)handle;
  return cpu_op_variants(op, args, out);
}

tsr_status cpu_op_variants_entry(void *handle, tsr_op op, const void *args,
                                 tsr_plugin_variant_list *out) {
  cpu_device *device = handle;
  return tsr_plugin_variants_serve(&device->plugin->host, handle, op, args, out, fill_variants);
}

/* The row of configs.c behind the variant (NULL: the heuristic's pick, the
 * one op_variants marks); both depend only on the problem's signature. */
tsr_status cpu_op_select(void *handle, tsr_op op, const void *args, const char *variant,
                         tsr_plugin_selection *out) {
  cpu_device *device = handle;
  if (!tsr_plugin_op_known(op))
    return unknown_op(device->plugin, op);
  const void *config =
      variant ? cpu_op_find_variant(op, variant) : cpu_op_default_variant(op, args);
  if (!config)
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_NOT_FOUND,
                           "%s has no variant '%s' at the %s level", tsr_plugin_op_name(op),
                           variant ? variant : "(none)", cpu_isa_name(cpu_isa_active()));
  return tsr_plugin_select_row(out, config);
}

/* The steady-state path: copies, one allocation, no formatting (except on
 * failure), no names. */
tsr_status cpu_op_run(void *handle, tsr_op op, const void *args, const void *config) {
  cpu_queue *queue = handle;
  cpu_plugin *plugin = queue->device->plugin;
  if (!tsr_plugin_op_known(op))
    return unknown_op(plugin, op);
  if (!config)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_INVALID_VALUE,
                           "%s was given no config (op_select makes one)", tsr_plugin_op_name(op));
  command *c = cpu_command_new(plugin, COMMAND_OP);
  if (!c)
    return TSR_ERROR_OUT_OF_MEMORY;
  c->op = op;
  if (!tsr_plugin_args_copy(op, args, &c->args)) {
    cpu_command_free(c);
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_INVALID_VALUE,
                           "the %s args have no struct_size", tsr_plugin_op_name(op));
  }
  /* Again here: op_supported may have answered for an aligned problem of
   * the same signature (wrapped memory's alignment is the caller's). */
  tsr_status status = check_alignment(plugin, op, &c->args);
  if (status != TSR_OK) {
    cpu_command_free(c);
    return status;
  }
  if (op == TSR_OP_GROUPED_GEMM) {
    tsr_grouped_gemm_args *grouped = &c->args.grouped_gemm;
    size_t count = grouped->group_count > 0 ? (size_t)grouped->group_count : 0;
    c->group_sizes = malloc((count > 0 ? count : 1) * sizeof *c->group_sizes);
    if (!c->group_sizes) {
      cpu_command_free(c);
      return tsr_plugin_fail(&plugin->host, TSR_ERROR_OUT_OF_MEMORY, "cannot copy %zu group sizes",
                             count);
    }
    if (count > 0)
      memcpy(c->group_sizes, grouped->group_sizes, count * sizeof *c->group_sizes);
    grouped->group_sizes = c->group_sizes;
  }
  /* grouped GEMM's auto rows pick the gemv or the packed path here, from
   * the group sizes (not part of the signature the core chose it for) */
  c->config = cpu_op_run_config(op, &c->args, config);
  cpu_enqueue(queue, c);
  return TSR_OK;
}
