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

_Static_assert(sizeof(tsr_plugin_tensor) == 11 * sizeof(uint64_t),
               "a plugin tensor is 11 words: buffer, offset, dtype and rank, 4 extents, 4 "
               "strides");

/* The signature, compact: a header word (op, presence and alignment of each
 * tensor, variant length), the variant's name, each tensor's dtype, rank,
 * extents and strides, then the op's scalars. */
enum {
  TENSOR_WORDS = 9,
  VARIANT_WORDS = 8,
  SIGNATURE_WORDS = 1 + VARIANT_WORDS + 5 * 9 + 4 * 11 + 16
};

typedef struct op_signature {
  uint32_t count; /* words in use */
  uint64_t words[SIGNATURE_WORDS];
} op_signature;

/* Builds the signature and its hash in one pass; false when it cannot stand
 * for the call (a variant name longer than any variant's). */
static bool make_signature(const tsr__op_args *args, op_signature *sig, uint64_t *hash) {
  const uint64_t *raw = (const uint64_t *)tsr__op_args_pointer(args);
  int tensors = tsr__op_tensor_count(args->op);
  uint64_t header = (uint64_t)args->op;
  for (int t = 0; t < tensors; t++)
    header |= (uint64_t)(args->tensor_align_log2[t] & 0xf) << (8 + 4 * t); /* 0xf: absent */
  size_t variant_length = 0;
  if (args->variant) {
    variant_length = strnlen(args->variant, VARIANT_WORDS * 8);
    if (variant_length == VARIANT_WORDS * 8)
      return false;
    header |= (uint64_t)(variant_length + 1) << 32;
  }
  tsr__key_builder key = tsr__key_begin(sig->words);
  key = tsr__key_add(key, header);
  key = tsr__key_add_name(key, args->variant, variant_length);
  /* each tensor: its words after buffer and offset */
  for (int t = 0; t < tensors; t++)
    for (int i = 0; i < TENSOR_WORDS; i++)
      key = tsr__key_add(key, raw[1 + 11 * t + 2 + i]);
  /* the scalars, without rope's position and grouped gemm's sizes */
  size_t end = tsr_plugin_args_size(args->op) / 8;
  size_t skip = args->op == TSR_OP_ROPE           ? offsetof(tsr_rope_args, position_offset) / 8
                : args->op == TSR_OP_GROUPED_GEMM ? offsetof(tsr_grouped_gemm_args, group_sizes) / 8
                                                  : 0;
  /* attention's appended index tensors: presence and structure, not where
   * they live (plugins read them as plain int32) */
  size_t extra_first = 0, extra_end = 0;
  if (args->op == TSR_OP_ATTENTION) {
    extra_first = offsetof(tsr_attention_args, cu_seqlens_q) / 8;
    extra_end = extra_first + 4 * 11;
  }
  for (size_t w = 1 + 11 * (size_t)tensors; w < end; w++) {
    uint64_t word = w == skip ? 0 : raw[w];
    if (w >= extra_first && w < extra_end && (w - extra_first) % 11 < 2)
      word = (w - extra_first) % 11 == 0 ? raw[w] != 0 : 0;
    key = tsr__key_add(key, word);
  }
  sig->count = key.count;
  *hash = tsr__key_hash(key);
  return true;
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

static bool same_signature(const op_signature *a, const op_signature *b) {
  return a->count == b->count && !memcmp(a->words, b->words, a->count * sizeof a->words[0]);
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

tsr_status tsr__op_run_selected(tsr_queue *queue, const tsr__op_args *args,
                                const tsr__selection *selection, const char *call) {
  mark_buffers(queue, args);
  tsr_status st = run_selected(queue, args, selection);
  return st == TSR_OK ? TSR_OK : tsr__fail_plugin(st, call, "the plugin could not queue the op");
}

tsr_status tsr__op_cache_run(tsr_queue *queue, void *device_handle, const tsr__op_args *args,
                             const char *call, const tsr__desc_key *key, uint64_t generation) {
  tsr_status st;
  op_signature sig;
  uint64_t hash;
  if (!make_signature(args, &sig, &hash)) {
    /* Not one to remember: chosen for this call alone. */
    tsr__selection selection;
    pthread_mutex_lock(&queue->lock);
    st = tsr__select(queue->device, device_handle, args, call, &selection, NULL);
    if (st == TSR_OK)
      st = tsr__op_run_selected(queue, args, &selection, call);
    pthread_mutex_unlock(&queue->lock);
    return st;
  }
  pthread_mutex_lock(&queue->lock);
  if (!queue->op_cache && !(queue->op_cache = calloc(1, sizeof *queue->op_cache))) {
    pthread_mutex_unlock(&queue->lock);
    return tsr__fail(TSR_ERROR_OUT_OF_MEMORY, call, "out of host memory");
  }
  cache_entry *entry = &queue->op_cache->entries[hash & (CACHE_SLOTS - 1)];
  if (entry->hash != hash || entry->generation != generation ||
      !same_signature(&entry->signature, &sig)) {
    entry->hash = 0; /* empty until the new selection is whole */
    st = tsr__select(queue->device, device_handle, args, call, &entry->selection, NULL);
    if (st != TSR_OK) {
      pthread_mutex_unlock(&queue->lock);
      return st;
    }
    entry->signature.count = sig.count;
    memcpy(entry->signature.words, sig.words, sig.count * sizeof sig.words[0]);
    entry->generation = generation;
    entry->hash = hash;
  }
  st = tsr__op_run_selected(queue, args, &entry->selection, call);
  if (st == TSR_OK)
    tsr__op_fast_remember(queue, key, generation, args, &entry->selection);
  pthread_mutex_unlock(&queue->lock);
  return st;
}
