/* SPDX-License-Identifier: Apache-2.0 */
/* fp64 reference: rotary position embedding, SwiGLU and GELU. */
#include "ref_common.h"

tsr_status tsr_reference_rope(const tsr_rope_args *args, double *y) {
  if (args == NULL || y == NULL || args->x.buffer == NULL)
    return TSR_ERROR_NULL_ARGUMENT;
  if (args->x.rank != 4 || (args->style != TSR_ROPE_NEOX && args->style != TSR_ROPE_GPTJ))
    return TSR_ERROR_INVALID_VALUE;
  const tsr_plugin_tensor *x = &args->x;
  const int64_t batches = x->shape[0];
  const int64_t tokens = x->shape[1];
  const int64_t heads = x->shape[2];
  const int64_t dim = x->shape[3];
  const int64_t rotary_dim = args->rotary_dim;
  /* A bad rotary_dim would read past the row: refuse rather than assume. */
  if (rotary_dim <= 0 || rotary_dim % 2 != 0 || rotary_dim > dim)
    return TSR_ERROR_INVALID_VALUE;
  const int64_t half = rotary_dim / 2;
  const double theta = args->theta;

  double *inverse_frequency = tsr_ref_alloc(half);
  if (inverse_frequency == NULL)
    return TSR_ERROR_OUT_OF_MEMORY;
  for (int64_t i = 0; i < half; i++)
    inverse_frequency[i] = pow(theta, -2.0 * (double)i / (double)rotary_dim);

  for (int64_t b = 0; b < batches; b++) {
    for (int64_t s = 0; s < tokens; s++) {
      const double position = (double)(args->position_offset + s);
      for (int64_t h = 0; h < heads; h++) {
        const int64_t base = b * x->strides[0] + s * x->strides[1] + h * x->strides[2];
        double *y_row = y + ((b * tokens + s) * heads + h) * dim;
        for (int64_t c = 0; c < dim; c++)
          y_row[c] = tsr_ref_load(x, base + c * x->strides[3]);
        for (int64_t i = 0; i < half; i++) {
          const int64_t first = args->style == TSR_ROPE_NEOX ? i : 2 * i;
          const int64_t second = args->style == TSR_ROPE_NEOX ? i + half : 2 * i + 1;
          const double angle = position * inverse_frequency[i];
          const double cos_angle = cos(angle);
          const double sin_angle = sin(angle);
          const double x0 = y_row[first];
          const double x1 = y_row[second];
          y_row[first] = x0 * cos_angle - x1 * sin_angle;
          y_row[second] = x1 * cos_angle + x0 * sin_angle;
        }
      }
    }
  }
  free(inverse_frequency);
  return TSR_OK;
}

tsr_status tsr_reference_swiglu(const tsr_swiglu_args *args, double *y) {
  if (args == NULL || y == NULL || args->gate.buffer == NULL || args->up.buffer == NULL)
    return TSR_ERROR_NULL_ARGUMENT;
  if (args->gate.rank < 1 || args->gate.rank > TSR_MAX_RANK || args->up.rank != args->gate.rank)
    return TSR_ERROR_INVALID_VALUE;
  const int64_t count = tsr_ref_numel(&args->gate);
  for (int64_t e = 0; e < count; e++) {
    const double gate = tsr_ref_load(&args->gate, tsr_ref_linear_offset(&args->gate, e));
    const double up = tsr_ref_load(&args->up, tsr_ref_linear_offset(&args->up, e));
    y[e] = tsr_reference_activation(TSR_ACT_SILU, gate) * up;
  }
  return TSR_OK;
}

tsr_status tsr_reference_gelu(const tsr_gelu_args *args, double *y) {
  if (args == NULL || y == NULL || args->x.buffer == NULL)
    return TSR_ERROR_NULL_ARGUMENT;
  if (args->x.rank < 1 || args->x.rank > TSR_MAX_RANK)
    return TSR_ERROR_INVALID_VALUE;
  tsr_activation activation;
  switch (args->approximate) {
  case TSR_GELU_ERF:
    activation = TSR_ACT_GELU_ERF;
    break;
  case TSR_GELU_TANH:
    activation = TSR_ACT_GELU_TANH;
    break;
  default:
    return TSR_ERROR_INVALID_VALUE;
  }
  const int64_t count = tsr_ref_numel(&args->x);
  for (int64_t e = 0; e < count; e++)
    y[e] = tsr_reference_activation(activation,
                                    tsr_ref_load(&args->x, tsr_ref_linear_offset(&args->x, e)));
  return TSR_OK;
}
