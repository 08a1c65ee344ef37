/* SPDX-License-Identifier: Apache-2.0 */
/* The op path after validation: a per-queue cache of chosen configs keyed by
 * the problem's signature, so a repeated call costs a hash, a compare and
 * op_run, with no variant list, environment read or string formatting.
 *
 * The signature is the plugin args with what may change between calls of one
 * problem taken out: buffer handles (only presence stays), byte offsets (only
 * the alignment of the address, up to 256 bytes, stays), rope's
 * position_offset and grouped gemm's group_sizes (their count stays). A
 * variant named in the call (desc->variant) is part of the signature.
 * docs/PLUGINS.md binds plugins to give one answer per signature. Entries
 * are tagged with the tuning database's generation, so an edited database
 * takes effect as it did when every call asked it. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Every args struct is struct_size, then its tensors (validate.c relies on
 * it too). */
_Static_assert(offsetof(tsr_gemm_args, a) == offsetof(tsr_attention_args, q) &&
                   offsetof(tsr_gemm_args, a) == offsetof(tsr_grouped_gemm_args, a) &&
                   offsetof(tsr_gemm_args, a) == offsetof(tsr_rmsnorm_args, x) &&
                   offsetof(tsr_gemm_args, a) == offsetof(tsr_layernorm_args, x) &&
                   offsetof(tsr_gemm_args, a) == offsetof(tsr_softmax_args, x) &&
                   offsetof(tsr_gemm_args, a) == offsetof(tsr_rope_args, x) &&
                   offsetof(tsr_gemm_args, a) == offsetof(tsr_swiglu_args, gate) &&
                   offsetof(tsr_gemm_args, a) == offsetof(tsr_gelu_args, x) &&
                   offsetof(tsr_gemm_args, a) == offsetof(tsr_cross_entropy_args, logits),
               "plugin args structs start with their tensors");

typedef struct op_signature {
  int32_t op;
  uint8_t align[TSR__OP_MAX_TENSORS];
  uint8_t pad[3];
  char variant[64]; /* desc->variant, "" when none */
  tsr_plugin_any_args args;
} op_signature;

/* Bytes of a signature that mean something for `op` (a multiple of 8). */
static size_t signature_bytes(tsr_op op) {
  size_t bytes = offsetof(op_signature, args) + tsr_plugin_args_size(op);
  return (bytes + 7) & ~(size_t)7;
}

#define CACHE_SLOTS 64 /* a power of two; a model's distinct problems per queue */

typedef struct cache_entry {
  uint64_t hash; /* 0: empty */
  uint64_t generation;
  tsr__selection selection;
  op_signature signature;
} cache_entry;

struct tsr__op_cache {
  cache_entry entries[CACHE_SLOTS];
};

void tsr__op_cache_free(tsr__op_cache *cache) {
  free(cache);
}

/* false when the signature cannot stand for the call (a variant name longer
 * than any variant's). */
static bool make_signature(const tsr__op_args *args, op_signature *sig) {
  size_t bytes = signature_bytes(args->op);
  memset(sig, 0, bytes);
  sig->op = (int32_t)args->op;
  if (args->variant) {
    size_t length = strnlen(args->variant, sizeof sig->variant);
    if (length == sizeof sig->variant)
      return false;
    memcpy(sig->variant, args->variant, length);
  }
  memcpy(sig->align, args->tensor_align_log2, sizeof sig->align);
  memcpy(&sig->args, tsr__op_args_pointer(args), tsr_plugin_args_size(args->op));
  tsr_plugin_tensor *tensors =
      (tsr_plugin_tensor *)((char *)&sig->args + offsetof(tsr_gemm_args, a));
  for (int t = 0; t < TSR__OP_MAX_TENSORS; t++) {
    if (args->tensor_align_log2[t] == 0xff)
      continue; /* absent, or past the op's tensors: left as copied */
    tensors[t].buffer = (void *)(uintptr_t)1;
    tensors[t].offset = 0;
  }
  if (args->op == TSR_OP_ROPE)
    sig->args.rope.position_offset = 0;
  else if (args->op == TSR_OP_GROUPED_GEMM)
    sig->args.grouped_gemm.group_sizes = NULL;
  return true;
}

static uint64_t hash_signature(const op_signature *sig, size_t bytes) {
  const unsigned char *p = (const unsigned char *)sig;
  uint64_t h = 0x9e3779b97f4a7c15u;
  for (size_t i = 0; i < bytes; i += 8) {
    uint64_t word;
    memcpy(&word, p + i, sizeof word);
    h = (h ^ word) * 0xff51afd7ed558ccdu;
    h ^= h >> 29;
  }
  return h ? h : 1;
}

static tsr_status run_selected(tsr_queue *queue, const tsr__op_args *args,
                               const tsr__selection *selection) {
  const tsr_plugin_slot *plugin = queue->device->plugin;
  const void *plugin_args = tsr__op_args_pointer(args);
  if (plugin->v1)
    return plugin->v1->op_run(queue->handle, args->op, plugin_args, selection->name);
  return plugin->table->op_run(queue->handle, args->op, plugin_args, selection->config);
}

static void mark_buffers(tsr_queue *queue, const tsr__op_args *args) {
  for (int i = 0; i < args->buffer_count; i++)
    tsr__buffer_mark(args->buffers[i], queue);
}

static tsr_status run_and_report(tsr_queue *queue, const tsr__op_args *args,
                                 const tsr__selection *selection, const char *call) {
  mark_buffers(queue, args);
  tsr_status st = run_selected(queue, args, selection);
  return st == TSR_OK ? TSR_OK : tsr__fail_plugin(st, call, "the plugin could not queue the op");
}

tsr_status tsr__op_cache_run(tsr_queue *queue, void *device_handle, const tsr__op_args *args,
                             const char *call) {
  tsr_status st;
  op_signature sig;
  size_t bytes = signature_bytes(args->op);
  if (!make_signature(args, &sig)) {
    /* Not one to remember: chosen for this call alone. */
    tsr__selection selection;
    pthread_mutex_lock(&queue->lock);
    st = tsr__select(queue->device, device_handle, args, call, &selection, NULL);
    if (st == TSR_OK)
      st = run_and_report(queue, args, &selection, call);
    pthread_mutex_unlock(&queue->lock);
    return st;
  }
  uint64_t hash = hash_signature(&sig, bytes);
  uint64_t generation = tsr__tuning_generation();

  pthread_mutex_lock(&queue->lock);
  if (!queue->op_cache && !(queue->op_cache = calloc(1, sizeof *queue->op_cache))) {
    pthread_mutex_unlock(&queue->lock);
    return tsr__fail(TSR_ERROR_OUT_OF_MEMORY, call, "out of host memory");
  }
  cache_entry *entry = &queue->op_cache->entries[hash & (CACHE_SLOTS - 1)];
  if (entry->hash != hash || entry->generation != generation ||
      memcmp(&entry->signature, &sig, bytes)) {
    entry->hash = 0; /* empty until the new selection is whole */
    st = tsr__select(queue->device, device_handle, args, call, &entry->selection, NULL);
    if (st != TSR_OK) {
      pthread_mutex_unlock(&queue->lock);
      return st;
    }
    memcpy(&entry->signature, &sig, bytes);
    entry->generation = generation;
    entry->hash = hash;
  }
  st = run_and_report(queue, args, &entry->selection, call);
  pthread_mutex_unlock(&queue->lock);
  return st;
}
