/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gemm: the smallest useful tessera application.
 *
 * Opens the device named by TESSERA_DEVICE (or the best one), runs
 * D = gelu(A B + bias) in bf16 on random data, reads D back, and compares it
 * with a plain float loop on the host. Prints a checksum and the largest error;
 * exits non-zero if the error is larger than bf16 rounding explains.
 *
 *   usage: tessera-gemm-example [M N K]      (default 96 80 112)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <tessera/tessera.h>

/* Uniform in [-1, 1), from a fixed seed so runs are comparable. */
static float next_random(uint64_t *state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return (float)(*state >> 40) / (float)(1u << 23) - 1.0f;
}

static float gelu_tanh(float x) {
  const float sqrt_2_over_pi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * (x + 0.044715f * x * x * x)));
}

static int fail(const char *what, tsr_status status) {
  fprintf(stderr, "gemm example: %s failed: %s: %s\n", what, tsr_status_name(status),
          tsr_last_error());
  return 1;
}

static int parse_extent(const char *text, int64_t *out) {
  char *end;
  long long value = strtoll(text, &end, 10);
  if (*text == '\0' || *end != '\0' || value < 1 || value > 16384)
    return 0;
  *out = value;
  return 1;
}

int main(int argc, char **argv) {
  int64_t m = 96, n = 80, k = 112;
  if (argc == 4) {
    if (!parse_extent(argv[1], &m) || !parse_extent(argv[2], &n) || !parse_extent(argv[3], &k)) {
      fprintf(stderr, "gemm example: M, N and K must be integers in 1..16384\n");
      return 2;
    }
  } else if (argc != 1) {
    fprintf(stderr, "usage: %s [M N K]\n", argv[0]);
    return 2;
  }

  size_t a_count = (size_t)(m * k), b_count = (size_t)(k * n), d_count = (size_t)(m * n);
  uint16_t *a = malloc(a_count * sizeof *a);
  uint16_t *b = malloc(b_count * sizeof *b);
  uint16_t *bias = malloc((size_t)n * sizeof *bias);
  uint16_t *d = malloc(d_count * sizeof *d);
  if (a == NULL || b == NULL || bias == NULL || d == NULL) {
    fprintf(stderr, "gemm example: out of host memory\n");
    return 1;
  }
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < a_count; i++)
    a[i] = tsr_f32_to_bf16(next_random(&seed));
  for (size_t i = 0; i < b_count; i++)
    b[i] = tsr_f32_to_bf16(next_random(&seed));
  for (int64_t j = 0; j < n; j++)
    bias[j] = tsr_f32_to_bf16(next_random(&seed));

  tsr_context *context = NULL;
  tsr_device *device = NULL;
  tsr_queue *queue = NULL;
  tsr_buffer *a_buffer = NULL, *b_buffer = NULL, *bias_buffer = NULL, *d_buffer = NULL;
  tsr_status status;
  int exit_code = 1;

  if ((status = tsr_context_create(NULL, &context)) != TSR_OK) {
    exit_code = fail("tsr_context_create", status);
    goto done;
  }
  /* NULL: TESSERA_DEVICE if set, else "best". */
  if ((status = tsr_device_open(context, NULL, &device)) != TSR_OK) {
    exit_code = fail("tsr_device_open", status);
    goto done;
  }
  tsr_device_info info = {.struct_size = sizeof info};
  if ((status = tsr_device_get_info(device, &info)) != TSR_OK) {
    exit_code = fail("tsr_device_get_info", status);
    goto done;
  }
  printf("device: %s (%s)\n", info.name, info.selector);

  if ((status = tsr_buffer_create(device, a_count * 2, &a_buffer)) != TSR_OK ||
      (status = tsr_buffer_create(device, b_count * 2, &b_buffer)) != TSR_OK ||
      (status = tsr_buffer_create(device, (size_t)n * 2, &bias_buffer)) != TSR_OK ||
      (status = tsr_buffer_create(device, d_count * 2, &d_buffer)) != TSR_OK) {
    exit_code = fail("tsr_buffer_create", status);
    goto done;
  }
  if ((status = tsr_queue_create(device, &queue)) != TSR_OK) {
    exit_code = fail("tsr_queue_create", status);
    goto done;
  }
  if ((status = tsr_buffer_write(queue, a_buffer, 0, a, a_count * 2)) != TSR_OK ||
      (status = tsr_buffer_write(queue, b_buffer, 0, b, b_count * 2)) != TSR_OK ||
      (status = tsr_buffer_write(queue, bias_buffer, 0, bias, (size_t)n * 2)) != TSR_OK) {
    exit_code = fail("tsr_buffer_write", status);
    goto done;
  }

  tsr_gemm_desc gemm = TSR_GEMM_DESC_INIT;
  gemm.a = tsr_tensor_make(a_buffer, 0, TSR_DTYPE_BF16, 2, (int64_t[]){m, k});
  gemm.b = tsr_tensor_make(b_buffer, 0, TSR_DTYPE_BF16, 2, (int64_t[]){k, n});
  gemm.bias = tsr_tensor_make(bias_buffer, 0, TSR_DTYPE_BF16, 1, (int64_t[]){n});
  gemm.d = tsr_tensor_make(d_buffer, 0, TSR_DTYPE_BF16, 2, (int64_t[]){m, n});
  gemm.activation = TSR_ACT_GELU_TANH;
  if ((status = tsr_gemm(queue, &gemm)) != TSR_OK) {
    exit_code = fail("tsr_gemm", status);
    goto done;
  }
  if ((status = tsr_buffer_read(queue, d_buffer, 0, d, d_count * 2)) != TSR_OK) {
    exit_code = fail("tsr_buffer_read", status);
    goto done;
  }
  if ((status = tsr_queue_finish(queue)) != TSR_OK) {
    exit_code = fail("tsr_queue_finish", status);
    goto done;
  }

  /* The host loop sees the same bf16 inputs and accumulates in float. The
   * error is measured relative to max(1, |reference|), so that values near
   * zero are not judged by their relative error alone. */
  double checksum = 0.0, max_error = 0.0;
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) {
      float sum = 0.0f;
      for (int64_t p = 0; p < k; p++)
        sum += tsr_bf16_to_f32(a[i * k + p]) * tsr_bf16_to_f32(b[p * n + j]);
      float reference = gelu_tanh(sum + tsr_bf16_to_f32(bias[j]));
      float got = tsr_bf16_to_f32(d[i * n + j]);
      double error = fabs((double)got - reference) / fmax(1.0, fabs(reference));
      if (!(error <= max_error)) /* also catches NaN */
        max_error = isnan(error) ? INFINITY : error;
      checksum += got;
    }
  }
  /* bf16 keeps 8 significant bits: rounding the output costs up to 2^-8
   * relative; allow a few such steps for different summation orders. */
  const double tolerance = 1.0 / 64.0;
  printf("gemm %lld x %lld x %lld bf16, bias + gelu: checksum = %.6f, max error = %.3g (%s)\n",
         (long long)m, (long long)n, (long long)k, checksum, max_error,
         max_error <= tolerance ? "ok" : "TOO LARGE");
  exit_code = max_error <= tolerance ? 0 : 1;

done:
  tsr_queue_destroy(queue);
  tsr_buffer_destroy(a_buffer);
  tsr_buffer_destroy(b_buffer);
  tsr_buffer_destroy(bias_buffer);
  tsr_buffer_destroy(d_buffer);
  tsr_context_destroy(context);
  free(a);
  free(b);
  free(bias);
  free(d);
  return exit_code;
}
