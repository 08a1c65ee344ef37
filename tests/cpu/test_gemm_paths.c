/* SPDX-License-Identifier: Apache-2.0 */
/* Every GEMM path of the CPU plugin against the fp64 reference, at the
 * instruction-set level in TESSERA_CPU_ISA (ctest runs this once per level;
 * a level this machine lacks is skipped with exit code 77): the gemv path
 * (both B layouts, every dtype), the packed path with several K slices
 * (partial sums in D and in f32 scratch), transposed operands, odd K for the
 * bf16 pair kernels, strided and in-place outputs, the fused epilogue,
 * batches with a shared B, and grouped GEMM; the splits over threads where
 * each thread packs its own B strips (ctest runs it with 3 threads too). Each case runs with every
 * variant the device lists and with the heuristic's pick; outputs are
 * poisoned with NaN first, so an unwritten element fails. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/reference.h>
#include <tessera/tessera.h>

static int failures;
static tsr_device *device;
static tsr_queue *queue;
static uint64_t random_state = 0x2545f4914f6cdd1dull;

static float next_random(void) {
  random_state ^= random_state << 13;
  random_state ^= random_state >> 7;
  random_state ^= random_state << 17;
  return (float)(random_state >> 40) / (float)(1u << 23) - 1.0f;
}

static void die(const char *what, tsr_status status) {
  fprintf(stderr, "test_gemm_paths: %s: %s: %s\n", what, tsr_status_name(status), tsr_last_error());
  exit(1);
}

/* A buffer of `count` random elements of dtype (exactly representable). */
static tsr_buffer *random_buffer(int64_t count, tsr_dtype dtype) {
  size_t bytes = (size_t)count * tsr_dtype_size(dtype);
  tsr_buffer *buffer;
  tsr_status status = tsr_buffer_create(device, bytes > 0 ? bytes : 4, &buffer);
  if (status != TSR_OK)
    die("tsr_buffer_create", status);
  void *host;
  if ((status = tsr_buffer_map(buffer, &host)) != TSR_OK)
    die("tsr_buffer_map", status);
  for (int64_t i = 0; i < count; i++)
    tsr_store_from_f32(host, dtype, i, next_random());
  return buffer;
}

static void poison(tsr_buffer *buffer, int64_t count, tsr_dtype dtype) {
  void *host;
  tsr_status status = tsr_buffer_map(buffer, &host);
  if (status != TSR_OK)
    die("tsr_buffer_map", status);
  for (int64_t i = 0; i < count; i++)
    tsr_store_from_f32(host, dtype, i, NAN);
}

static const void *host_of(void *user, const tsr_buffer *buffer) {
  (void)user;
  void *host = NULL;
  return tsr_buffer_map((tsr_buffer *)buffer, &host) == TSR_OK ? host : NULL;
}

/* ||out - ref|| / ||ref|| over d's dense elements, NaN when any is NaN. */
static double relative_error(const tsr_tensor *d, const double *reference, int64_t count) {
  void *host;
  if (tsr_buffer_map(d->buffer, &host) != TSR_OK)
    return NAN;
  const char *base = (const char *)host + d->offset;
  double num = 0.0, den = 0.0;
  int64_t index = 0;
  int64_t outer = d->rank == 3 ? d->shape[0] : 1;
  int r = d->rank == 3 ? 1 : 0;
  for (int64_t b = 0; b < outer; b++)
    for (int64_t i = 0; i < d->shape[r]; i++)
      for (int64_t j = 0; j < d->shape[r + 1]; j++, index++) {
        int64_t at =
            (d->rank == 3 ? b * d->strides[0] : 0) + i * d->strides[r] + j * d->strides[r + 1];
        double value = tsr_load_as_f32(base, d->dtype, at);
        if (isnan(value))
          return NAN;
        num += (value - reference[index]) * (value - reference[index]);
        den += reference[index] * reference[index];
      }
  (void)count;
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

static double bound_for(tsr_dtype out) {
  return out == TSR_DTYPE_F32 ? 2e-5 : out == TSR_DTYPE_F16 ? 3e-3 : 1.2e-2;
}

typedef struct gemm_case {
  const char *name;
  int64_t batch, m, n, k;
  bool transpose_a, transpose_b, transpose_d;
  tsr_dtype in, out;
  bool c, c_in_place, bias, share_b;
  float alpha, beta;
  tsr_activation activation;
} gemm_case;

/* Runs `desc` with each variant (and the heuristic), comparing with `ref`. */
static void run_all_variants(const char *name, tsr_op op, void *desc, const char **variant_slot,
                             const tsr_tensor *d, const double *ref, int64_t count,
                             tsr_dtype out_dtype, tsr_buffer *d_buffer, int64_t d_elements,
                             bool can_poison, const void *c_backup, size_t c_bytes) {
  tsr_variant_list list;
  memset(&list, 0, sizeof list);
  list.struct_size = sizeof list;
  tsr_status status = tsr_op_variants(device, op, desc, &list);
  if (status != TSR_OK)
    die("tsr_op_variants", status);
  for (uint32_t v = 0; v <= list.count; v++) {
    *variant_slot = v < list.count ? list.names[v] : NULL;
    if (can_poison) {
      poison(d_buffer, d_elements, out_dtype);
    } else { /* in place: restore C, which is D */
      void *host;
      tsr_buffer_map(d_buffer, &host);
      memcpy(host, c_backup, c_bytes);
    }
    status = tsr_op_run(queue, op, desc);
    if (status == TSR_OK)
      status = tsr_queue_finish(queue);
    if (status != TSR_OK) {
      fprintf(stderr, "FAIL %s [%s]: %s: %s\n", name, *variant_slot ? *variant_slot : "heuristic",
              tsr_status_name(status), tsr_last_error());
      failures++;
      continue;
    }
    double error = relative_error(d, ref, count);
    bool ok = error <= bound_for(out_dtype);
    if (!ok)
      failures++;
    printf("%s %-26s %-46s error %.2e\n", ok ? "ok  " : "FAIL", name,
           *variant_slot ? *variant_slot : "(heuristic)", error);
  }
  *variant_slot = NULL;
}

static void run_gemm_case(const gemm_case *c) {
  int64_t batch = c->batch, m = c->m, n = c->n, k = c->k;
  int64_t b_batch = c->share_b ? 1 : batch;
  tsr_buffer *a = random_buffer(batch * m * k, c->in);
  tsr_buffer *b = random_buffer(b_batch * k * n, c->in);
  tsr_buffer *d = random_buffer(batch * m * n, c->out);
  tsr_buffer *c_buffer = c->c && !c->c_in_place ? random_buffer(batch * m * n, c->out) : NULL;
  tsr_buffer *bias = c->bias ? random_buffer(n, c->out) : NULL;

  tsr_gemm_desc desc = TSR_GEMM_DESC_INIT;
  int rank = batch > 1 ? 3 : 2;
  int64_t a_shape[3] = {batch, c->transpose_a ? k : m, c->transpose_a ? m : k};
  int64_t b_shape[3] = {b_batch, c->transpose_b ? n : k, c->transpose_b ? k : n};
  int64_t d_shape[3] = {batch, c->transpose_d ? n : m, c->transpose_d ? m : n};
  desc.a = tsr_tensor_make(a, 0, c->in, rank, rank == 3 ? a_shape : a_shape + 1);
  desc.b = tsr_tensor_make(b, 0, c->in, rank, rank == 3 ? b_shape : b_shape + 1);
  desc.d = tsr_tensor_make(d, 0, c->out, rank, rank == 3 ? d_shape : d_shape + 1);
  if (c->transpose_a)
    desc.a = tsr_tensor_transpose(desc.a, rank - 2, rank - 1);
  if (c->transpose_b)
    desc.b = tsr_tensor_transpose(desc.b, rank - 2, rank - 1);
  if (c->transpose_d)
    desc.d = tsr_tensor_transpose(desc.d, rank - 2, rank - 1);
  if (c->share_b)
    desc.b.strides[0] = 0, desc.b.shape[0] = batch;
  if (c->c) {
    desc.c = c->c_in_place ? desc.d : tsr_tensor_make(c_buffer, 0, c->out, rank, desc.d.shape);
    if (!c->c_in_place)
      memcpy(desc.c.strides, desc.d.strides, sizeof desc.c.strides);
    desc.beta = c->beta;
  }
  if (bias)
    desc.bias = tsr_tensor_make(bias, 0, c->out, 1, &n);
  desc.alpha = c->alpha;
  desc.activation = c->activation;

  tsr_gemm_args args;
  tsr_status status =
      tsr_reference_prepare(device, TSR_OP_GEMM, &desc, host_of, NULL, &args, sizeof args);
  if (status != TSR_OK)
    die("tsr_reference_prepare", status);
  int64_t count = batch * m * n;
  double *ref = malloc((size_t)count * sizeof *ref);
  if ((status = tsr_reference_gemm(&args, ref)) != TSR_OK)
    die("tsr_reference_gemm", status);
  size_t d_bytes = (size_t)count * tsr_dtype_size(c->out);
  void *c_backup = malloc(d_bytes), *d_host;
  tsr_buffer_map(d, &d_host);
  memcpy(c_backup, d_host, d_bytes);
  run_all_variants(c->name, TSR_OP_GEMM, &desc, &desc.variant, &desc.d, ref, count, c->out, d,
                   count, !c->c_in_place, c_backup, d_bytes);
  free(c_backup);
  free(ref);
  tsr_buffer_destroy(a);
  tsr_buffer_destroy(b);
  tsr_buffer_destroy(d);
  if (c_buffer)
    tsr_buffer_destroy(c_buffer);
  if (bias)
    tsr_buffer_destroy(bias);
}

static void run_grouped_case(const char *name, const int64_t *sizes, int64_t groups, int64_t n,
                             int64_t k, tsr_dtype dtype, bool with_bias, tsr_activation act) {
  int64_t t = 0;
  for (int64_t g = 0; g < groups; g++)
    t += sizes[g];
  tsr_buffer *a = random_buffer(t * k, dtype);
  tsr_buffer *b = random_buffer(groups * k * n, dtype);
  tsr_buffer *d = random_buffer(t * n, dtype);
  tsr_buffer *bias = with_bias ? random_buffer(groups * n, dtype) : NULL;
  tsr_grouped_gemm_desc desc = TSR_GROUPED_GEMM_DESC_INIT;
  desc.a = tsr_tensor_make(a, 0, dtype, 2, (int64_t[]){t, k});
  desc.b = tsr_tensor_make(b, 0, dtype, 3, (int64_t[]){groups, k, n});
  desc.d = tsr_tensor_make(d, 0, dtype, 2, (int64_t[]){t, n});
  if (bias)
    desc.bias = tsr_tensor_make(bias, 0, dtype, 2, (int64_t[]){groups, n});
  desc.group_sizes = sizes;
  desc.group_count = groups;
  desc.activation = act;
  tsr_grouped_gemm_args args;
  tsr_status status =
      tsr_reference_prepare(device, TSR_OP_GROUPED_GEMM, &desc, host_of, NULL, &args, sizeof args);
  if (status != TSR_OK)
    die("tsr_reference_prepare", status);
  double *ref = malloc((size_t)(t * n) * sizeof *ref);
  if ((status = tsr_reference_grouped_gemm(&args, ref)) != TSR_OK)
    die("tsr_reference_grouped_gemm", status);
  run_all_variants(name, TSR_OP_GROUPED_GEMM, &desc, &desc.variant, &desc.d, ref, t * n, dtype, d,
                   t * n, true, NULL, 0);
  free(ref);
  tsr_buffer_destroy(a);
  tsr_buffer_destroy(b);
  tsr_buffer_destroy(d);
  if (bias)
    tsr_buffer_destroy(bias);
}

int main(void) {
  tsr_context *context;
  tsr_status status = tsr_context_create(NULL, &context);
  if (status != TSR_OK)
    die("tsr_context_create", status);
  if ((status = tsr_device_open(context, "cpu", &device)) != TSR_OK)
    die("tsr_device_open", status);
  tsr_device_info info = {.struct_size = sizeof info};
  if ((status = tsr_device_get_info(device, &info)) != TSR_OK)
    die("tsr_device_get_info", status);
  const char *wanted = getenv("TESSERA_CPU_ISA");
  const char *in_use = strstr(info.details, "isa in use: ");
  if (!in_use) {
    fprintf(stderr, "test_gemm_paths: the cpu device reports no 'isa in use' line\n");
    return 1;
  }
  in_use += strlen("isa in use: ");
  if (wanted && *wanted &&
      (strncmp(in_use, wanted, strlen(wanted)) != 0 || in_use[strlen(wanted)] != '\n')) {
    printf("SKIP: TESSERA_CPU_ISA=%s is not available here (in use: %.*s)\n", wanted,
           (int)strcspn(in_use, "\n"), in_use);
    tsr_context_destroy(context);
    return 77;
  }
  printf("isa in use: %.*s\n", (int)strcspn(in_use, "\n"), in_use);
  if ((status = tsr_queue_create(device, &queue)) != TSR_OK)
    die("tsr_queue_create", status);

  const tsr_dtype F32 = TSR_DTYPE_F32, F16 = TSR_DTYPE_F16, BF16 = TSR_DTYPE_BF16;
  const gemm_case cases[] = {
      {"gemv f32 rows", 1, 1, 300, 1030, false, false, false, F32, F32, false, false, true, false,
       0.5f, 0.0f, TSR_ACT_RELU},
      {"gemv f32 columns", 1, 3, 257, 1030, false, true, false, F32, F32, true, false, false, false,
       1.0f, 0.5f, TSR_ACT_NONE},
      {"gemv bf16 rows", 1, 16, 200, 777, false, false, false, BF16, BF16, false, false, true,
       false, 1.0f, 0.0f, TSR_ACT_SILU},
      {"gemv f16 columns", 1, 5, 100, 513, true, true, false, F16, F32, false, false, false, false,
       1.0f, 0.0f, TSR_ACT_NONE},
      {"gemv f32 strided out", 1, 2, 70, 300, false, false, true, F32, F32, false, false, true,
       false, 1.0f, 0.0f, TSR_ACT_GELU_ERF},
      {"packed f32 epilogue", 1, 100, 70, 700, true, false, false, F32, F32, true, false, true,
       false, -1.0f, 0.75f, TSR_ACT_GELU_TANH},
      {"packed f32 in-place c", 1, 131, 97, 1500, false, true, false, F32, F32, true, true, false,
       false, 1.0f, 1.0f, TSR_ACT_NONE},
      {"packed bf16 scratch sums", 1, 61, 83, 1500, false, false, false, BF16, BF16, false, false,
       true, false, 1.0f, 0.0f, TSR_ACT_RELU},
      {"packed bf16 to f32", 1, 64, 64, 96, true, true, false, BF16, F32, true, false, false, false,
       2.0f, -0.5f, TSR_ACT_NONE},
      {"packed f16", 1, 45, 50, 1100, false, false, false, F16, F16, true, false, false, false,
       1.0f, 0.25f, TSR_ACT_GELU_ERF},
      {"packed bf16 odd k", 1, 29, 35, 257, false, false, false, BF16, BF16, false, false, false,
       false, 1.0f, 0.0f, TSR_ACT_NONE},
      {"packed f32 strided out", 1, 30, 40, 200, false, false, true, F32, F32, true, false, true,
       false, 1.0f, 1.0f, TSR_ACT_RELU},
      /* one row block split across columns (each thread packs its own
       * strips), and several row blocks with each thread packing the
       * whole panel itself, both over several K slices */
      {"packed f32 split across columns", 1, 40, 1000, 1300, false, false, false, F32, F32, false,
       false, true, false, 1.0f, 0.0f, TSR_ACT_NONE},
      {"packed bf16 own panels", 1, 600, 200, 1100, false, true, false, BF16, BF16, true, false,
       true, false, 1.0f, 0.5f, TSR_ACT_SILU},
      {"batched shared b", 3, 33, 40, 300, false, false, false, F32, F32, false, false, true, true,
       1.0f, 0.0f, TSR_ACT_NONE},
      {"batched bf16 in-place", 2, 20, 36, 900, false, true, false, BF16, BF16, true, true, false,
       false, 1.0f, 1.0f, TSR_ACT_NONE},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    run_gemm_case(&cases[i]);
  const int64_t sizes_a[] = {0, 5, 40, 1, 17};
  run_grouped_case("grouped f32", sizes_a, 5, 48, 600, F32, true, TSR_ACT_SILU);
  const int64_t sizes_b[] = {3, 2, 0, 30};
  run_grouped_case("grouped bf16", sizes_b, 4, 40, 300, BF16, false, TSR_ACT_NONE);

  tsr_queue_destroy(queue);
  tsr_context_destroy(context);
  if (failures) {
    fprintf(stderr, "test_gemm_paths: %d failure(s)\n", failures);
    return 1;
  }
  printf("test_gemm_paths: all cases passed\n");
  return 0;
}
