/* SPDX-License-Identifier: Apache-2.0 */
/* fp64 reference: attention forward (causal, sliding window, GQA/MQA, lse,
 * softcap) over dense, packed (cu_seqlens) and paged (block table) layouts,
 * one sequence at a time with tsr_plugin_attention_seq_of's geometry. */
#include "ref_common.h"

/* The first element of an optional i32 tensor, or NULL. Validation keeps
 * offsets a multiple of 4 from an aligned buffer start. */
static const int32_t *index_base(const tsr_plugin_tensor *t) {
  return t->buffer ? (const int32_t *)tsr_ref_address(t, 0) : NULL;
}

typedef struct ref_layout {
  const tsr_attention_args *args;
  int packed_q, packed_kv, paged;
  const int32_t *block_table;
} ref_layout;

/* Element offset of key row j (of sequence b and its geometry s) in k or v. */
static int64_t key_row(const ref_layout *l, const tsr_plugin_tensor *t, int64_t b,
                       const tsr_plugin_attention_seq *s, int64_t kv_head, int64_t j) {
  if (l->paged) {
    const tsr_plugin_tensor *bt = &l->args->block_table;
    const int64_t block_size = t->shape[1];
    const int64_t block = l->block_table[b * bt->strides[0] + (j / block_size) * bt->strides[1]];
    return block * t->strides[0] + (j % block_size) * t->strides[1] + kv_head * t->strides[2];
  }
  if (l->packed_kv)
    return (s->kv_first + j) * t->strides[0] + kv_head * t->strides[1];
  return b * t->strides[0] + j * t->strides[1] + kv_head * t->strides[2];
}

/* Element offset of query row i of head h (q and o share the layout). */
static int64_t query_row(const ref_layout *l, const tsr_plugin_tensor *t, int64_t b,
                         const tsr_plugin_attention_seq *s, int64_t head, int64_t i) {
  if (l->packed_q)
    return (s->q_first + i) * t->strides[0] + head * t->strides[1];
  return b * t->strides[0] + i * t->strides[1] + head * t->strides[2];
}

/* Gathers row-major [Lkv, D] of one kv head of sequence b. */
static void load_keys(const ref_layout *l, const tsr_plugin_tensor *t, int64_t b,
                      const tsr_plugin_attention_seq *s, int64_t kv_head, int64_t dim,
                      double *dense) {
  const int64_t dim_stride = t->strides[t->rank - 1];
  for (int64_t j = 0; j < s->kv_len; j++) {
    const int64_t base = key_row(l, t, b, s, kv_head, j);
    for (int64_t c = 0; c < dim; c++)
      dense[j * dim + c] = tsr_ref_load(t, base + c * dim_stride);
  }
}

/* One query row against the keys it sees; writes o_row[dim] and *lse_out. */
static void attend_row(const tsr_attention_args *args, const double *q_row, const double *k_head,
                       const double *v_head, int64_t dim, int64_t first, int64_t last,
                       double *scores, double *o_row, double *lse_out) {
  const double scale = args->scale, softcap = args->softcap;
  double max_score = -INFINITY;
  int has_nan = 0;
  for (int64_t j = first; j <= last; j++) {
    double dot = 0.0;
    for (int64_t c = 0; c < dim; c++)
      dot += q_row[c] * k_head[j * dim + c];
    double s = scale * dot;
    /* In fp64 the score of finite inputs is finite, so a non-finite one
     * comes from a NaN or an infinity in q or k: tested before the cap,
     * which would turn an infinity into +-softcap. */
    if (!isfinite(s)) {
      has_nan = 1;
      continue;
    }
    if (softcap > 0.0)
      s = softcap * tanh(s / softcap);
    scores[j] = s;
    if (s > max_score)
      max_score = s;
  }
  /* A non-finite score poisons the whole row (o and lse NaN). */
  const double fill = has_nan ? NAN : 0.0;
  for (int64_t c = 0; c < dim; c++)
    o_row[c] = fill;
  if (has_nan) {
    if (lse_out != NULL)
      *lse_out = NAN;
    return;
  }
  if (first > last) { /* no visible key: nothing to weigh */
    if (lse_out != NULL)
      *lse_out = -INFINITY;
    return;
  }
  double sum = 0.0;
  for (int64_t j = first; j <= last; j++) {
    const double weight = exp(scores[j] - max_score);
    sum += weight;
    for (int64_t c = 0; c < dim; c++)
      o_row[c] += weight * v_head[j * dim + c];
  }
  for (int64_t c = 0; c < dim; c++)
    o_row[c] /= sum;
  if (lse_out != NULL)
    *lse_out = max_score + log(sum);
}

tsr_status tsr_reference_attention(const tsr_attention_args *args, double *o, double *lse) {
  if (args == NULL || o == NULL || args->q.buffer == NULL || args->k.buffer == NULL ||
      args->v.buffer == NULL)
    return TSR_ERROR_NULL_ARGUMENT;
  const int serving = args->struct_size >= sizeof(tsr_attention_args);
  ref_layout l = {args, 0, 0, 0, NULL};
  if (serving) {
    l.packed_q = args->cu_seqlens_q.buffer != NULL;
    l.packed_kv = args->cu_seqlens_kv.buffer != NULL;
    l.paged = args->block_table.buffer != NULL;
    l.block_table = index_base(&args->block_table);
  }
  const int32_t q_rank = l.packed_q ? 3 : 4, kv_rank = l.packed_kv ? 3 : 4;
  if (args->q.rank != q_rank || args->k.rank != kv_rank || args->v.rank != kv_rank)
    return TSR_ERROR_INVALID_VALUE;

  const int64_t batches = l.packed_q ? args->cu_seqlens_q.shape[0] - 1 : args->q.shape[0];
  const int64_t hq = args->q.shape[q_rank - 2];
  const int64_t dim = args->q.shape[q_rank - 1];
  const int64_t hkv = args->k.shape[kv_rank - 2];
  const int64_t dense_sq = l.packed_q ? 0 : args->q.shape[1];
  const int64_t total_q = l.packed_q ? args->q.shape[0] : 0;
  if (hkv <= 0 ? hq != 0 : hq % hkv != 0)
    return TSR_ERROR_INVALID_VALUE;
  const int64_t heads_per_kv = hkv > 0 ? hq / hkv : 1;
  int64_t kv_capacity = args->k.shape[kv_rank == 3 ? 0 : 1];
  if (l.paged)
    kv_capacity = args->block_table.shape[1] * args->k.shape[1];
  const int64_t window_left = args->window_left;
  /* Causal is window_right = 0; honour the flag even if the window was left -1. */
  const int64_t window_right = args->causal ? 0 : args->window_right;

  const int64_t rows = kv_capacity > 0 ? kv_capacity : 1;
  double *k_head = tsr_ref_alloc(rows * dim);
  double *v_head = tsr_ref_alloc(rows * dim);
  double *q_row = tsr_ref_alloc(dim);
  double *scores = tsr_ref_alloc(rows);
  if (k_head == NULL || v_head == NULL || q_row == NULL || scores == NULL) {
    free(k_head);
    free(v_head);
    free(q_row);
    free(scores);
    return TSR_ERROR_OUT_OF_MEMORY;
  }

  const tsr_plugin_tensor *q = &args->q;
  const int32_t *cu_q = serving ? index_base(&args->cu_seqlens_q) : NULL;
  const int32_t *cu_kv = serving ? index_base(&args->cu_seqlens_kv) : NULL;
  const int32_t *lens_kv = serving ? index_base(&args->seqlens_kv) : NULL;
  for (int64_t b = 0; b < batches; b++) {
    const tsr_plugin_attention_seq s =
        tsr_plugin_attention_seq_of(args, b, cu_q, cu_kv, l.block_table, lens_kv);
    if (s.fault >= 0 && !s.q_located)
      continue; /* its rows cannot be found */
    for (int64_t kv_head = 0; kv_head < hkv; kv_head++) {
      if (s.fault < 0) {
        load_keys(&l, &args->k, b, &s, kv_head, dim, k_head);
        load_keys(&l, &args->v, b, &s, kv_head, dim, v_head);
      }
      for (int64_t h = kv_head * heads_per_kv; h < (kv_head + 1) * heads_per_kv; h++) {
        for (int64_t i = 0; i < s.q_len; i++) {
          double *o_row = l.packed_q ? o + ((s.q_first + i) * hq + h) * dim
                                     : o + ((b * dense_sq + i) * hq + h) * dim;
          double *lse_out = lse == NULL  ? NULL
                            : l.packed_q ? lse + h * total_q + s.q_first + i
                                         : lse + (b * hq + h) * dense_sq + i;
          if (s.fault >= 0) {
            for (int64_t c = 0; c < dim; c++)
              o_row[c] = NAN;
            if (lse_out != NULL)
              *lse_out = NAN;
            continue;
          }
          /* Visible keys form one interval [first, last] around position p.
           * Compared before subtracting or adding, so that windows up to
           * INT64_MAX cannot overflow (p lies in [-Lq, Lkv)). */
          const int64_t p = i + s.kv_len - s.q_len;
          int64_t first = 0;
          int64_t last = s.kv_len - 1;
          if (window_left >= 0 && window_left < p)
            first = p - window_left;
          if (window_right >= 0 && window_right < last - p)
            last = p + window_right;
          const int64_t q_base = query_row(&l, q, b, &s, h, i);
          for (int64_t c = 0; c < dim; c++)
            q_row[c] = tsr_ref_load(q, q_base + c * q->strides[q_rank - 1]);
          attend_row(args, q_row, k_head, v_head, dim, first, last, scores, o_row, lse_out);
        }
      }
    }
  }
  free(k_head);
  free(v_head);
  free(q_row);
  free(scores);
  return TSR_OK;
}

tsr_status tsr_reference_kv_append(const tsr_kv_append_args *args, double *k_cache,
                                   double *v_cache) {
  if (args == NULL || k_cache == NULL || args->k_new.buffer == NULL ||
      args->k_cache.buffer == NULL || args->slots.buffer == NULL)
    return TSR_ERROR_NULL_ARGUMENT;
  if (args->v_new.buffer != NULL && v_cache == NULL)
    return TSR_ERROR_NULL_ARGUMENT;
  const tsr_plugin_tensor *kc = &args->k_cache;
  const int64_t blocks = kc->shape[0], block_size = kc->shape[1], heads = kc->shape[2],
                dim = kc->shape[3];
  const int64_t row_elems = heads * dim, slots = blocks * block_size;
  /* The cache as it was: rows no slot names keep their values. */
  for (int64_t r = 0; r < slots; r++)
    for (int64_t h = 0; h < heads; h++)
      for (int64_t c = 0; c < dim; c++) {
        const int64_t at = (r / block_size) * kc->strides[0] + (r % block_size) * kc->strides[1] +
                           h * kc->strides[2] + c * kc->strides[3];
        k_cache[r * row_elems + h * dim + c] = tsr_ref_load(kc, at);
        if (args->v_cache.buffer)
          v_cache[r * row_elems + h * dim + c] = tsr_ref_load(&args->v_cache, at);
      }
  int fault = 0;
  for (int64_t t = 0; t < args->k_new.shape[0]; t++) {
    const int64_t slot = tsr_ref_load_index(&args->slots, t * args->slots.strides[0]);
    if (slot < 0)
      continue;
    if (slot >= slots) {
      fault = 1;
      continue;
    }
    for (int64_t h = 0; h < heads; h++)
      for (int64_t c = 0; c < dim; c++) {
        const tsr_plugin_tensor *kn = &args->k_new;
        const int64_t from = t * kn->strides[0] + h * kn->strides[1] + c * kn->strides[2];
        k_cache[slot * row_elems + h * dim + c] = tsr_ref_load(kn, from);
        if (args->v_new.buffer) {
          const tsr_plugin_tensor *vn = &args->v_new;
          const int64_t vf = t * vn->strides[0] + h * vn->strides[1] + c * vn->strides[2];
          v_cache[slot * row_elems + h * dim + c] = tsr_ref_load(vn, vf);
        }
      }
  }
  return fault ? TSR_ERROR_INVALID_VALUE : TSR_OK;
}
