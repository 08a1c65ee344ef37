/* SPDX-License-Identifier: Apache-2.0 */
/* fp64 reference: row ops over the last dimension (rmsnorm, layernorm,
 * softmax) and per-row cross-entropy. */
#include "ref_common.h"

static int row_rank_is_valid(const tsr_plugin_tensor *t) {
  return t->rank >= 1 && t->rank <= TSR_MAX_RANK;
}

static int64_t row_length(const tsr_plugin_tensor *t) {
  return t->shape[t->rank - 1];
}

/* Reads row `row` of a row-op tensor into dense (row_length values). */
static void load_row(const tsr_plugin_tensor *t, int64_t row, double *dense) {
  const int64_t base = tsr_plugin_row_offset(t, row);
  const int64_t stride = t->strides[t->rank - 1];
  const int64_t length = row_length(t);
  for (int64_t c = 0; c < length; c++)
    dense[c] = tsr_ref_load(t, base + c * stride);
}

/* Reads an optional [N] vector, or `absent` for every entry when missing. */
static void load_vector_or(const tsr_plugin_tensor *t, int64_t length, double absent,
                           double *dense) {
  for (int64_t c = 0; c < length; c++)
    dense[c] = tsr_ref_present(t) ? tsr_ref_load(t, c * t->strides[0]) : absent;
}

tsr_status tsr_reference_rmsnorm(const tsr_rmsnorm_args *args, double *y, double *residual_out) {
  if (args == NULL || y == NULL || args->x.buffer == NULL)
    return TSR_ERROR_NULL_ARGUMENT;
  if (!row_rank_is_valid(&args->x))
    return TSR_ERROR_INVALID_VALUE;
  const int64_t rows = tsr_plugin_row_count(&args->x);
  const int64_t n = row_length(&args->x);
  const double eps = args->eps;
  const int has_residual = tsr_ref_present(&args->residual);

  double *h = tsr_ref_alloc(n);
  double *residual = tsr_ref_alloc(n);
  double *weight = tsr_ref_alloc(n);
  if (h == NULL || residual == NULL || weight == NULL) {
    free(h);
    free(residual);
    free(weight);
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  load_vector_or(&args->weight, n, 1.0, weight);
  for (int64_t r = 0; r < rows; r++) {
    load_row(&args->x, r, h);
    if (has_residual) {
      load_row(&args->residual, r, residual);
      for (int64_t c = 0; c < n; c++)
        h[c] += residual[c];
    }
    double sum_squares = 0.0;
    for (int64_t c = 0; c < n; c++)
      sum_squares += h[c] * h[c];
    /* n == 0 leaves nothing to write, so the 0/0 below is never used. */
    const double inv_rms = 1.0 / sqrt(sum_squares / (double)n + eps);
    for (int64_t c = 0; c < n; c++) {
      y[r * n + c] = h[c] * inv_rms * weight[c];
      if (residual_out != NULL)
        residual_out[r * n + c] = h[c];
    }
  }
  free(h);
  free(residual);
  free(weight);
  return TSR_OK;
}

tsr_status tsr_reference_layernorm(const tsr_layernorm_args *args, double *y) {
  if (args == NULL || y == NULL || args->x.buffer == NULL)
    return TSR_ERROR_NULL_ARGUMENT;
  if (!row_rank_is_valid(&args->x))
    return TSR_ERROR_INVALID_VALUE;
  const int64_t rows = tsr_plugin_row_count(&args->x);
  const int64_t n = row_length(&args->x);
  const double eps = args->eps;

  double *x = tsr_ref_alloc(n);
  double *weight = tsr_ref_alloc(n);
  double *bias = tsr_ref_alloc(n);
  if (x == NULL || weight == NULL || bias == NULL) {
    free(x);
    free(weight);
    free(bias);
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  load_vector_or(&args->weight, n, 1.0, weight);
  load_vector_or(&args->bias, n, 0.0, bias);
  for (int64_t r = 0; r < rows; r++) {
    load_row(&args->x, r, x);
    double sum = 0.0;
    for (int64_t c = 0; c < n; c++)
      sum += x[c];
    const double mean = sum / (double)n;
    /* Two passes: the variance of centred values does not cancel. */
    double sum_squares = 0.0;
    for (int64_t c = 0; c < n; c++)
      sum_squares += (x[c] - mean) * (x[c] - mean);
    const double inv_std = 1.0 / sqrt(sum_squares / (double)n + eps);
    for (int64_t c = 0; c < n; c++)
      y[r * n + c] = (x[c] - mean) * inv_std * weight[c] + bias[c];
  }
  free(x);
  free(weight);
  free(bias);
  return TSR_OK;
}

tsr_status tsr_reference_softmax(const tsr_softmax_args *args, double *y) {
  if (args == NULL || y == NULL || args->x.buffer == NULL)
    return TSR_ERROR_NULL_ARGUMENT;
  if (!row_rank_is_valid(&args->x))
    return TSR_ERROR_INVALID_VALUE;
  const int64_t rows = tsr_plugin_row_count(&args->x);
  const int64_t n = row_length(&args->x);
  const double scale = args->scale;

  for (int64_t r = 0; r < rows; r++) {
    double *y_row = y + r * n;
    load_row(&args->x, r, y_row);
    double max_value = -INFINITY;
    int has_nan = 0;
    /* scale * x of f32 values cannot overflow in fp64: a huge scale gives
     * 1 at the max (shared by ties) and 0 elsewhere, as in exact math. */
    for (int64_t c = 0; c < n; c++) {
      y_row[c] *= scale;
      if (isnan(y_row[c]) || y_row[c] == INFINITY)
        has_nan = 1;
      else if (y_row[c] > max_value)
        max_value = y_row[c];
    }
    if (has_nan || max_value == -INFINITY) {
      /* All -inf: zeros by contract. NaN or +inf anywhere (inf / inf): the
       * whole row is NaN. -inf entries alone are zeros. */
      for (int64_t c = 0; c < n; c++)
        y_row[c] = has_nan ? NAN : 0.0;
      continue;
    }
    double sum = 0.0;
    for (int64_t c = 0; c < n; c++) {
      y_row[c] = exp(y_row[c] - max_value);
      sum += y_row[c];
    }
    for (int64_t c = 0; c < n; c++)
      y_row[c] /= sum;
  }
  return TSR_OK;
}

tsr_status tsr_reference_cross_entropy(const tsr_cross_entropy_args *args, double *loss,
                                       double *lse) {
  if (args == NULL || loss == NULL || args->logits.buffer == NULL || args->targets.buffer == NULL)
    return TSR_ERROR_NULL_ARGUMENT;
  if (args->logits.rank != 2 || args->targets.rank != 1)
    return TSR_ERROR_INVALID_VALUE;
  const tsr_plugin_tensor *logits = &args->logits;
  const int64_t rows = logits->shape[0];
  const int64_t classes = logits->shape[1];
  tsr_status status = TSR_OK;

  for (int64_t r = 0; r < rows; r++) {
    const int64_t base = r * logits->strides[0];
    const int64_t stride = logits->strides[1];
    double max_value = -INFINITY;
    int has_nan = 0;
    for (int64_t c = 0; c < classes; c++) {
      const double value = tsr_ref_load(logits, base + c * stride);
      if (isnan(value))
        has_nan = 1;
      else if (value > max_value)
        max_value = value;
    }
    double row_lse;
    if (has_nan) {
      row_lse = NAN;
    } else if (max_value == -INFINITY || max_value == INFINITY) {
      /* All -inf: log 0. A +inf logit: the sum is infinite. */
      row_lse = max_value;
    } else {
      double sum = 0.0;
      for (int64_t c = 0; c < classes; c++)
        sum += exp(tsr_ref_load(logits, base + c * stride) - max_value);
      row_lse = max_value + log(sum);
    }
    if (lse != NULL)
      lse[r] = row_lse;

    const int64_t target = tsr_ref_load_index(&args->targets, r * args->targets.strides[0]);
    if (target == args->ignore_index) {
      loss[r] = 0.0;
    } else if (target < 0 || target >= classes) {
      loss[r] = NAN;
      status = TSR_ERROR_INVALID_VALUE;
    } else {
      loss[r] = row_lse - tsr_ref_load(logits, base + target * stride);
    }
  }
  return status;
}
