/* SPDX-License-Identifier: Apache-2.0 */
/* fp64 reference: activations, GEMM and grouped GEMM. */
#include "ref_common.h"

double tsr_reference_activation(tsr_activation activation, double x) {
  /* Every activation tends to 0 at -inf and to x at +inf; the formulas below
   * would give inf * 0 = NaN there. */
  if (isinf(x) && activation > TSR_ACT_NONE && activation < TSR_ACT_COUNT_)
    return x > 0.0 ? x : 0.0;
  switch (activation) {
  case TSR_ACT_NONE:
    return x;
  case TSR_ACT_RELU:
    /* Written so that NaN stays NaN (fmax would drop it). */
    return x < 0.0 ? 0.0 : x;
  case TSR_ACT_GELU_TANH: {
    const double sqrt_2_over_pi = 0.79788456080286535588;
    return 0.5 * x * (1.0 + tanh(sqrt_2_over_pi * (x + 0.044715 * x * x * x)));
  }
  case TSR_ACT_GELU_ERF:
    return 0.5 * x * (1.0 + erf(x * 0.70710678118654752440));
  case TSR_ACT_SILU:
    return x / (1.0 + exp(-x));
  default:
    return NAN;
  }
}

static int activation_is_valid(int32_t activation) {
  return activation >= 0 && activation < TSR_ACT_COUNT_;
}

/* out[rows, n] = a_rows[rows, k] * b[k, n], all dense. The r-k-n order streams
 * b and out rows contiguously, so the inner loop vectorises. */
static void multiply_dense(const double *a_rows, const double *b, int64_t rows, int64_t k,
                           int64_t n, double *out) {
  for (int64_t r = 0; r < rows; r++) {
    double *out_row = out + r * n;
    for (int64_t j = 0; j < n; j++)
      out_row[j] = 0.0;
    const double *a_row = a_rows + r * k;
    for (int64_t kk = 0; kk < k; kk++) {
      const double a_value = a_row[kk];
      const double *b_row = b + kk * n;
      for (int64_t j = 0; j < n; j++)
        out_row[j] += a_value * b_row[j];
    }
  }
}

tsr_status tsr_reference_gemm(const tsr_gemm_args *args, double *d) {
  if (args == NULL || d == NULL || args->a.buffer == NULL || args->b.buffer == NULL)
    return TSR_ERROR_NULL_ARGUMENT;
  if (!activation_is_valid(args->activation))
    return TSR_ERROR_INVALID_VALUE;
  if (args->a.rank != 3 || args->b.rank != 3 || args->d.rank != 3)
    return TSR_ERROR_INVALID_VALUE;

  const int64_t batch = args->d.shape[0];
  const int64_t m = args->d.shape[1];
  const int64_t n = args->d.shape[2];
  const int64_t k = args->a.shape[2];
  const double alpha = args->alpha;
  const double beta = args->beta;
  const int has_c = tsr_ref_present(&args->c);
  const int has_bias = tsr_ref_present(&args->bias);

  double *a_dense = tsr_ref_alloc(m * k);
  double *b_dense = tsr_ref_alloc(k * n);
  double *bias = tsr_ref_alloc(n);
  if (a_dense == NULL || b_dense == NULL || bias == NULL) {
    free(a_dense);
    free(b_dense);
    free(bias);
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  for (int64_t j = 0; j < n; j++)
    bias[j] = has_bias ? tsr_ref_load(&args->bias, j * args->bias.strides[0]) : 0.0;

  for (int64_t bt = 0; bt < batch; bt++) {
    /* A batch stride of 0 shares the operand: gather it once. */
    if (bt == 0 || args->a.strides[0] != 0) {
      tsr_plugin_tensor a_view = tsr_ref_subview(&args->a, bt);
      tsr_ref_load_dense(&a_view, a_dense);
    }
    if (bt == 0 || args->b.strides[0] != 0) {
      tsr_plugin_tensor b_view = tsr_ref_subview(&args->b, bt);
      tsr_ref_load_dense(&b_view, b_dense);
    }
    double *d_batch = d + bt * m * n;
    multiply_dense(a_dense, b_dense, m, k, n, d_batch);
    for (int64_t i = 0; i < m; i++) {
      for (int64_t j = 0; j < n; j++) {
        double value = alpha * d_batch[i * n + j];
        /* BLAS convention: with beta == 0, C is not read (NaN in C stays out). */
        if (has_c && beta != 0.0) {
          const tsr_plugin_tensor *c = &args->c;
          value +=
              beta * tsr_ref_load(c, bt * c->strides[0] + i * c->strides[1] + j * c->strides[2]);
        }
        value += bias[j];
        d_batch[i * n + j] = tsr_reference_activation((tsr_activation)args->activation, value);
      }
    }
  }
  free(a_dense);
  free(b_dense);
  free(bias);
  return TSR_OK;
}

tsr_status tsr_reference_grouped_gemm(const tsr_grouped_gemm_args *args, double *d) {
  if (args == NULL || d == NULL || args->a.buffer == NULL || args->b.buffer == NULL)
    return TSR_ERROR_NULL_ARGUMENT;
  if (args->group_count > 0 && args->group_sizes == NULL)
    return TSR_ERROR_NULL_ARGUMENT;
  if (!activation_is_valid(args->activation))
    return TSR_ERROR_INVALID_VALUE;
  if (args->a.rank != 2 || args->b.rank != 3 || args->d.rank != 2)
    return TSR_ERROR_INVALID_VALUE;

  const int64_t total_rows = args->d.shape[0];
  const int64_t n = args->d.shape[1];
  const int64_t k = args->a.shape[1];
  const int64_t groups = args->group_count;
  const double alpha = args->alpha;
  const int has_bias = tsr_ref_present(&args->bias);

  /* Group sizes decide which rows are read: refuse any that would overrun. */
  int64_t sum = 0;
  for (int64_t g = 0; g < groups; g++) {
    if (args->group_sizes[g] < 0 || args->group_sizes[g] > total_rows - sum)
      return TSR_ERROR_INVALID_VALUE;
    sum += args->group_sizes[g];
  }
  if (sum != total_rows)
    return TSR_ERROR_INVALID_VALUE;

  double *a_dense = tsr_ref_alloc(total_rows * k);
  double *b_dense = tsr_ref_alloc(k * n);
  if (a_dense == NULL || b_dense == NULL) {
    free(a_dense);
    free(b_dense);
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  tsr_ref_load_dense(&args->a, a_dense);

  int64_t start = 0;
  for (int64_t g = 0; g < groups; g++) {
    const int64_t rows = args->group_sizes[g];
    if (rows == 0)
      continue;
    tsr_plugin_tensor b_view = tsr_ref_subview(&args->b, g);
    tsr_ref_load_dense(&b_view, b_dense);
    double *d_rows = d + start * n;
    multiply_dense(a_dense + start * k, b_dense, rows, k, n, d_rows);
    for (int64_t j = 0; j < n; j++) {
      const tsr_plugin_tensor *bias = &args->bias;
      const double bias_value =
          has_bias ? tsr_ref_load(bias, g * bias->strides[0] + j * bias->strides[1]) : 0.0;
      for (int64_t r = 0; r < rows; r++) {
        const double value = alpha * d_rows[r * n + j] + bias_value;
        d_rows[r * n + j] = tsr_reference_activation((tsr_activation)args->activation, value);
      }
    }
    start += rows;
  }
  free(a_dense);
  free(b_dense);
  return TSR_OK;
}
