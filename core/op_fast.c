/* SPDX-License-Identifier: Apache-2.0 */
/* The repeated-call path: validation split in two. What depends only on the
 * descriptor's structure (dtypes, ranks, extents, strides, which tensors are
 * present, the alignment of their addresses, the scalars, desc->variant) is
 * validated once and remembered per queue with the converted args and the
 * chosen config; what depends on the buffers (alive, on this device, the
 * tensor inside, outputs not meeting another tensor of the same buffer) is
 * checked on every call, a few compares per tensor. So the layers of a model,
 * which differ only in their weights' buffers and the offsets into an
 * activation arena, share one entry. Anything unusual (a buffer that fails a
 * check, ranges that meet, grouped gemm's host array, a descriptor of another
 * size) takes the validated path, which reports errors exactly as before. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Where each op's descriptor keeps what the key needs: its size, its scalars
 * (one contiguous run of fields, without padding), its variant field, and
 * which tensors are outputs. Tensors follow struct_size in every descriptor,
 * in the order of the plugin args' tensors. */
typedef struct desc_layout {
  size_t size;
  int tensors;
  size_t scalars, scalar_bytes;
  size_t variant;
  unsigned outputs; /* bit per tensor */
} desc_layout;

#define SCALARS(type, first, last, last_size)                                                      \
  offsetof(type, first), offsetof(type, last) + (last_size)-offsetof(type, first)

static const desc_layout layouts[TSR_OP_COUNT_] = {
    [TSR_OP_GEMM] = {sizeof(tsr_gemm_desc), 5, SCALARS(tsr_gemm_desc, alpha, compute, 4),
                     offsetof(tsr_gemm_desc, variant), 1u << 4},
    [TSR_OP_GROUPED_GEMM] = {0, 0, 0, 0, 0, 0}, /* its host array: always validated */
    [TSR_OP_ATTENTION] = {sizeof(tsr_attention_desc), 5,
                          SCALARS(tsr_attention_desc, scale, window_right, 8),
                          offsetof(tsr_attention_desc, variant), (1u << 3) | (1u << 4)},
    [TSR_OP_RMSNORM] = {sizeof(tsr_rmsnorm_desc), 5, SCALARS(tsr_rmsnorm_desc, eps, eps, 4),
                        offsetof(tsr_rmsnorm_desc, variant), (1u << 3) | (1u << 4)},
    [TSR_OP_LAYERNORM] = {sizeof(tsr_layernorm_desc), 4, SCALARS(tsr_layernorm_desc, eps, eps, 4),
                          offsetof(tsr_layernorm_desc, variant), 1u << 3},
    [TSR_OP_SOFTMAX] = {sizeof(tsr_softmax_desc), 2, SCALARS(tsr_softmax_desc, scale, scale, 4),
                        offsetof(tsr_softmax_desc, variant), 1u << 1},
    [TSR_OP_ROPE] = {sizeof(tsr_rope_desc), 2, SCALARS(tsr_rope_desc, theta, style, 4),
                     offsetof(tsr_rope_desc, variant), 1u << 1},
    [TSR_OP_SWIGLU] = {sizeof(tsr_swiglu_desc), 3, 0, 0, offsetof(tsr_swiglu_desc, variant),
                       1u << 2},
    [TSR_OP_GELU] = {sizeof(tsr_gelu_desc), 2, SCALARS(tsr_gelu_desc, approximate, approximate, 4),
                     offsetof(tsr_gelu_desc, variant), 1u << 1},
    [TSR_OP_CROSS_ENTROPY] = {sizeof(tsr_cross_entropy_desc), 4,
                              SCALARS(tsr_cross_entropy_desc, ignore_index, ignore_index, 8),
                              offsetof(tsr_cross_entropy_desc, variant), (1u << 2) | (1u << 3)},
    [TSR_OP_KV_APPEND] = {sizeof(tsr_kv_append_desc), 5, 0, 0,
                          offsetof(tsr_kv_append_desc, variant), (1u << 2) | (1u << 3)},
};

_Static_assert(offsetof(tsr_gemm_desc, a) == sizeof(size_t) &&
                   offsetof(tsr_attention_desc, q) == sizeof(size_t) &&
                   offsetof(tsr_rmsnorm_desc, x) == sizeof(size_t) &&
                   offsetof(tsr_layernorm_desc, x) == sizeof(size_t) &&
                   offsetof(tsr_softmax_desc, x) == sizeof(size_t) &&
                   offsetof(tsr_rope_desc, x) == sizeof(size_t) &&
                   offsetof(tsr_swiglu_desc, gate) == sizeof(size_t) &&
                   offsetof(tsr_gelu_desc, x) == sizeof(size_t) &&
                   offsetof(tsr_cross_entropy_desc, logits) == sizeof(size_t) &&
                   offsetof(tsr_kv_append_desc, k_new) == sizeof(size_t),
               "descriptors start with struct_size, then their tensors");
_Static_assert(sizeof(tsr_tensor) == 11 * sizeof(uint64_t) &&
                   offsetof(tsr_tensor, dtype) == 2 * sizeof(uint64_t),
               "a tensor is buffer, offset, then 9 words of structure");

#define FAST_SLOTS 64 /* a power of two: a model's distinct op structures per queue */

typedef struct fast_entry {
  uint64_t hash; /* 0: empty */
  uint64_t generation;
  uint32_t count;
  uint64_t words[TSR__DESC_KEY_WORDS];
  uint64_t span[TSR__OP_MAX_TENSORS]; /* bytes each tensor reaches from its offset */
  tsr_plugin_any_args args;           /* converted, buffers and offsets to patch */
  tsr__selection selection;
} fast_entry;

struct tsr__op_fast {
  fast_entry entries[FAST_SLOTS];
};

void tsr__op_fast_free(tsr__op_fast *fast) {
  free(fast);
}

static const tsr_tensor *desc_tensors(const void *desc) {
  return (const tsr_tensor *)((const char *)desc + sizeof(size_t));
}

/* The key of a descriptor: false when it has none (grouped gemm, another
 * struct size, a variant name longer than any). Reads each present buffer's
 * alignment, which a destroyed buffer's record still holds. */
static bool make_key(tsr_op op, const void *desc, tsr__desc_key *key) {
  const desc_layout *layout = &layouts[op];
  size_t struct_size;
  memcpy(&struct_size, desc, sizeof struct_size);
  if (!layout->size || struct_size != layout->size)
    return false;
  if (op == TSR_OP_ATTENTION) {
    /* the serving forms: their index tensors are not among the key's */
    const tsr_attention_desc *a = desc;
    if (a->cu_seqlens_q.buffer || a->cu_seqlens_kv.buffer || a->block_table.buffer ||
        a->seqlens_kv.buffer || a->softcap != 0.0f || a->max_seqlen_q || a->max_seqlen_kv)
      return false;
  }
  const char *variant;
  memcpy(&variant, (const char *)desc + layout->variant, sizeof variant);
  size_t variant_length = variant ? strnlen(variant, 64) : 0;
  if (variant_length == 64)
    return false;
  const tsr_tensor *tensors = desc_tensors(desc);
  uint64_t header = (uint64_t)op | (uint64_t)(variant ? variant_length + 1 : 0) << 32;
  for (int t = 0; t < layout->tensors; t++) {
    const tsr_tensor *x = &tensors[t];
    unsigned align = x->buffer ? tsr__address_align_log2(x->buffer, x->offset) : 0xf;
    header |= (uint64_t)align << (8 + 4 * t);
  }
  tsr__key_builder builder = tsr__key_begin(key->words);
  builder = tsr__key_add(builder, header);
  builder = tsr__key_add_name(builder, variant, variant_length);
  for (int t = 0; t < layout->tensors; t++) {
    const uint64_t *words = (const uint64_t *)&tensors[t];
    for (int i = 2; i < 11; i++)
      builder = tsr__key_add(builder, tensors[t].buffer ? words[i] : 0);
  }
  uint64_t scalars[3] = {0, 0, 0};
  memcpy(scalars, (const char *)desc + layout->scalars, layout->scalar_bytes);
  for (size_t i = 0; i * 8 < layout->scalar_bytes; i++)
    builder = tsr__key_add(builder, scalars[i]);
  key->count = builder.count;
  key->hash = tsr__key_hash(builder);
  return true;
}

/* The per-call checks: every present buffer alive, of this device, holding
 * the tensor; no output meeting another tensor of its buffer (aliasing rules
 * are the validated path's). */
static bool buffers_fit(const tsr_queue *queue, const desc_layout *layout,
                        const tsr_tensor *tensors, const fast_entry *entry,
                        uint64_t end[TSR__OP_MAX_TENSORS]) {
  for (int t = 0; t < layout->tensors; t++) {
    const tsr_buffer *b = tensors[t].buffer;
    if (!b)
      continue;
    if (!tsr__buffer_live(b) || b->device != queue->device ||
        __builtin_add_overflow(tensors[t].offset, entry->span[t], &end[t]) || end[t] > b->size)
      return false;
  }
  for (int o = 0; o < layout->tensors; o++) {
    if (!(layout->outputs & (1u << o)) || !tensors[o].buffer)
      continue;
    for (int t = 0; t < layout->tensors; t++)
      if (t != o && tensors[t].buffer == tensors[o].buffer && tensors[o].offset < end[t] &&
          tensors[t].offset < end[o])
        return false;
  }
  return true;
}

bool tsr__op_fast_run(tsr_queue *queue, tsr_op op, const void *desc, const char *call,
                      uint64_t generation, tsr__desc_key *key, tsr_status *status) {
  key->usable = desc && (int)op >= 0 && op < TSR_OP_COUNT_ && make_key(op, desc, key);
  if (!key->usable)
    return false;
  const desc_layout *layout = &layouts[op];
  const tsr_tensor *tensors = desc_tensors(desc);
  pthread_mutex_lock(&queue->lock);
  fast_entry *entry =
      queue->op_fast ? &queue->op_fast->entries[key->hash & (FAST_SLOTS - 1)] : NULL;
  uint64_t end[TSR__OP_MAX_TENSORS];
  if (!entry || entry->hash != key->hash || entry->generation != generation ||
      entry->count != key->count ||
      memcmp(entry->words, key->words, key->count * sizeof key->words[0]) ||
      !buffers_fit(queue, layout, tensors, entry, end)) {
    pthread_mutex_unlock(&queue->lock);
    return false;
  }
  tsr__op_args args;
  args.op = op;
  memcpy(&args.variant, (const char *)desc + layout->variant, sizeof args.variant);
  memcpy(&args.u, &entry->args, tsr_plugin_args_size(op));
  tsr_plugin_tensor *converted =
      (tsr_plugin_tensor *)((char *)&args.u + offsetof(tsr_gemm_args, a));
  args.buffer_count = 0;
  for (int t = 0; t < layout->tensors; t++) {
    tsr_buffer *b = tensors[t].buffer;
    if (!b)
      continue;
    converted[t].buffer = b->handle;
    converted[t].offset = tensors[t].offset;
    args.buffers[args.buffer_count++] = b;
  }
  if (op == TSR_OP_ROPE) {
    const tsr_rope_desc *rope = desc;
    int64_t last;
    if (__builtin_add_overflow(rope->position_offset, rope->x.shape[1] - 1, &last)) {
      pthread_mutex_unlock(&queue->lock);
      return false;
    }
    args.u.rope.position_offset = rope->position_offset;
  }
  *status = tsr__op_run_selected(queue, &args, &entry->selection, call);
  pthread_mutex_unlock(&queue->lock);
  return true;
}

/* Bytes a validated plugin tensor reaches from its offset. */
static uint64_t span_of(const tsr_plugin_tensor *t) {
  if (!t->buffer)
    return 0;
  int64_t last = 0;
  for (int32_t d = 0; d < t->rank; d++)
    last += (t->shape[d] - 1) * t->strides[d];
  return (uint64_t)(last + 1) * tsr_plugin_dtype_size(t->dtype);
}

void tsr__op_fast_remember(tsr_queue *queue, const tsr__desc_key *key, uint64_t generation,
                           const tsr__op_args *args, const tsr__selection *selection) {
  if (!key->usable)
    return;
  if (!queue->op_fast && !(queue->op_fast = calloc(1, sizeof *queue->op_fast)))
    return; /* the validated path keeps working without it */
  fast_entry *entry = &queue->op_fast->entries[key->hash & (FAST_SLOTS - 1)];
  entry->hash = key->hash;
  entry->generation = generation;
  entry->count = key->count;
  memcpy(entry->words, key->words, key->count * sizeof key->words[0]);
  memcpy(&entry->args, tsr__op_args_pointer(args), tsr_plugin_args_size(args->op));
  const tsr_plugin_tensor *converted =
      (const tsr_plugin_tensor *)((const char *)&entry->args + offsetof(tsr_gemm_args, a));
  for (int t = 0; t < layouts[args->op].tensors; t++)
    entry->span[t] = span_of(&converted[t]);
  entry->selection = *selection;
}
