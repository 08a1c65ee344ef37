/* SPDX-License-Identifier: Apache-2.0 */
/* fp64 reference: attention forward (causal, sliding window, GQA/MQA, lse). */
#include "ref_common.h"

/* Gathers row-major [S, D] of head `head` in batch `batch` of a [B, S, H, D]
 * tensor. */
static void load_head(const tsr_plugin_tensor *t, int64_t batch, int64_t head, double *dense) {
  const int64_t rows = t->shape[1];
  const int64_t dim = t->shape[3];
  for (int64_t s = 0; s < rows; s++) {
    const int64_t base = batch * t->strides[0] + s * t->strides[1] + head * t->strides[2];
    for (int64_t c = 0; c < dim; c++)
      dense[s * dim + c] = tsr_ref_load(t, base + c * t->strides[3]);
  }
}

tsr_status tsr_reference_attention(const tsr_attention_args *args, double *o, double *lse) {
  if (args == NULL || o == NULL || args->q.buffer == NULL || args->k.buffer == NULL ||
      args->v.buffer == NULL)
    return TSR_ERROR_NULL_ARGUMENT;
  if (args->q.rank != 4 || args->k.rank != 4 || args->v.rank != 4)
    return TSR_ERROR_INVALID_VALUE;

  const int64_t batches = args->q.shape[0];
  const int64_t sq = args->q.shape[1];
  const int64_t hq = args->q.shape[2];
  const int64_t dim = args->q.shape[3];
  const int64_t skv = args->k.shape[1];
  const int64_t hkv = args->k.shape[2];
  if (hkv <= 0 ? hq != 0 : hq % hkv != 0)
    return TSR_ERROR_INVALID_VALUE;
  const int64_t heads_per_kv = hkv > 0 ? hq / hkv : 1;
  const double scale = args->scale;
  const int64_t window_left = args->window_left;
  /* Causal is window_right = 0; honour the flag even if the window was left -1. */
  const int64_t window_right = args->causal ? 0 : args->window_right;

  double *k_head = tsr_ref_alloc(skv * dim);
  double *v_head = tsr_ref_alloc(skv * dim);
  double *q_row = tsr_ref_alloc(dim);
  double *scores = tsr_ref_alloc(skv);
  if (k_head == NULL || v_head == NULL || q_row == NULL || scores == NULL) {
    free(k_head);
    free(v_head);
    free(q_row);
    free(scores);
    return TSR_ERROR_OUT_OF_MEMORY;
  }

  const tsr_plugin_tensor *q = &args->q;
  for (int64_t b = 0; b < batches; b++) {
    for (int64_t kv_head = 0; kv_head < hkv; kv_head++) {
      load_head(&args->k, b, kv_head, k_head);
      load_head(&args->v, b, kv_head, v_head);
      for (int64_t h = kv_head * heads_per_kv; h < (kv_head + 1) * heads_per_kv; h++) {
        for (int64_t i = 0; i < sq; i++) {
          double *o_row = o + ((b * sq + i) * hq + h) * dim;
          double *lse_out = lse != NULL ? lse + (b * hq + h) * sq + i : NULL;

          /* Visible keys form one interval [first, last] around position p.
           * Compared before subtracting or adding, so that windows up to
           * INT64_MAX cannot overflow (p lies in [-Sq, Skv)). */
          const int64_t p = i + skv - sq;
          int64_t first = 0;
          int64_t last = skv - 1;
          if (window_left >= 0 && window_left < p)
            first = p - window_left;
          if (window_right >= 0 && window_right < last - p)
            last = p + window_right;

          const int64_t q_base = b * q->strides[0] + i * q->strides[1] + h * q->strides[2];
          for (int64_t c = 0; c < dim; c++)
            q_row[c] = tsr_ref_load(q, q_base + c * q->strides[3]);

          double max_score = -INFINITY;
          int has_nan = 0;
          for (int64_t j = first; j <= last; j++) {
            double dot = 0.0;
            for (int64_t c = 0; c < dim; c++)
              dot += q_row[c] * k_head[j * dim + c];
            scores[j] = scale * dot;
            /* In fp64 the score of finite f32 inputs is finite, so a
             * non-finite one comes from a NaN or an infinity in q or k. The
             * API has no additive mask: -inf is no way to hide a key. */
            if (!isfinite(scores[j]))
              has_nan = 1;
            else if (scores[j] > max_score)
              max_score = scores[j];
          }
          /* A non-finite score poisons the whole row (o and lse NaN). */
          const double fill = has_nan ? NAN : 0.0;
          for (int64_t c = 0; c < dim; c++)
            o_row[c] = fill;
          if (has_nan) {
            if (lse_out != NULL)
              *lse_out = NAN;
            continue;
          }
          /* No visible key: nothing to weigh. */
          if (first > last) {
            if (lse_out != NULL)
              *lse_out = -INFINITY;
            continue;
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
      }
    }
  }
  free(k_head);
  free(v_head);
  free(q_row);
  free(scores);
  return TSR_OK;
}
