/* SPDX-License-Identifier: Apache-2.0 */
/* Where each sequence of an attention problem lies: the serving layouts
 * (packed queries, packed or paged keys, per-sequence key lengths) read from
 * the index tensors, which live in host memory on the CPU. Every sequence is
 * decided once, before any thread touches k or v, by
 * tsr_plugin_attention_seq_of (the definition every plugin and the reference
 * share), so a sequence at fault is never followed into k or v: its rows of
 * o and lse become NaN where they can be located, and the smallest b of each
 * fault kind goes to the queue's fault words. */
#include "attention.h"

/* The first element of an optional i32 tensor, or NULL. */
static const int32_t *index_base(const tsr_plugin_tensor *t) {
  return t->buffer ? (const int32_t *)cpu_tensor_base(t) : NULL;
}

/* NaN into every row of o and lse that sequence b owns. */
static void poison_sequence(const attention_geometry *g, int64_t b) {
  const tsr_attention_args *args = g->args;
  const tsr_plugin_attention_seq *s = &g->seqs[b];
  char *o_base = cpu_tensor_base(&args->o);
  float *lse_base = args->lse.buffer ? (float *)cpu_tensor_base(&args->lse) : NULL;
  float *nan_row = malloc((size_t)(g->head_dim > 0 ? g->head_dim : 1) * sizeof(float));
  for (int64_t d = 0; nan_row && d < g->head_dim; d++)
    nan_row[d] = NAN;
  for (int64_t head = 0; head < g->q_heads; head++) {
    for (int64_t i = 0; i < s->q_len; i++) {
      int64_t offset = attention_q_offset(g, &args->o, b, head, i);
      if (nan_row)
        store_span(o_base, args->o.dtype, offset, g->o_dim_stride, nan_row, g->head_dim);
      else /* out of memory for 2 KiB: element by element */
        for (int64_t d = 0; d < g->head_dim; d++)
          tsr_store_from_f32(o_base, args->o.dtype, offset + d * g->o_dim_stride, NAN);
      if (lse_base)
        lse_base[attention_lse_offset(g, &args->lse, b, head, i)] = NAN;
    }
  }
  free(nan_row);
}

tsr_status attention_geometry_init(attention_geometry *g, const cpu_exec *exec,
                                   const tsr_attention_args *args) {
  memset(g, 0, sizeof *g);
  g->args = args;
  const int serving = args->struct_size >= sizeof *args;
  const int32_t *cu_q = serving ? index_base(&args->cu_seqlens_q) : NULL;
  const int32_t *cu_kv = serving ? index_base(&args->cu_seqlens_kv) : NULL;
  const int32_t *table = serving ? index_base(&args->block_table) : NULL;
  const int32_t *lens_kv = serving ? index_base(&args->seqlens_kv) : NULL;
  g->packed_q = cu_q != NULL;
  g->packed_kv = cu_kv != NULL;
  g->paged = table != NULL;
  g->softcap = serving ? args->softcap : 0.0f;
  const int qr = args->q.rank, kr = args->k.rank;
  g->batch = g->packed_q ? args->cu_seqlens_q.shape[0] - 1 : args->q.shape[0];
  g->q_heads = args->q.shape[qr - 2];
  g->head_dim = args->q.shape[qr - 1];
  g->kv_heads = args->k.shape[kr - 2];
  g->group = g->kv_heads > 0 ? g->q_heads / g->kv_heads : 1;
  g->q_dim_stride = args->q.strides[qr - 1];
  g->o_dim_stride = args->o.strides[qr - 1];
  g->k_dim_stride = args->k.strides[kr - 1];
  g->v_dim_stride = args->v.strides[kr - 1];
  if (g->paged) {
    g->block_table = table;
    g->block_size = args->k.shape[1];
    g->table_row_stride = args->block_table.strides[0];
    g->table_column_stride = args->block_table.strides[1];
  }
  if (g->batch <= 0)
    return TSR_OK;
  g->seqs = malloc((size_t)g->batch * sizeof *g->seqs);
  if (!g->seqs) {
    if (exec->error && exec->error_capacity > 0)
      snprintf(exec->error, exec->error_capacity,
               "cannot allocate the geometry of %lld attention sequences", (long long)g->batch);
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  for (int64_t b = 0; b < g->batch; b++) {
    tsr_plugin_attention_seq s = tsr_plugin_attention_seq_of(args, b, cu_q, cu_kv, table, lens_kv);
    g->seqs[b] = s;
    if (s.fault >= 0) {
      cpu_fault_record(exec, s.fault, b);
      if (s.q_located)
        poison_sequence(g, b);
      continue;
    }
    if (s.q_len > g->longest_q)
      g->longest_q = s.q_len;
    if (s.kv_len > g->longest_kv)
      g->longest_kv = s.kv_len;
  }
  return TSR_OK;
}

void attention_geometry_free(attention_geometry *g) {
  free(g->seqs);
  g->seqs = NULL;
}
