/* Times bf16 GEMM and grouped GEMM on cuda:0 through the public API, for
 * what the CLI cannot say: grouped GEMM beyond its 16-group shape syntax
 * (MoE: G equal groups of T / G tokens, B as [G][K][N]) and how much of a
 * call's time is host work the GPU waits for. Two timings, each the median
 * over two rotated input sets after warm-up:
 *   single  events around one call (as `tessera tune` times: host work of the
 *           call included)
 *   queued  events around 10 calls queued back to back, per call (host work
 *           hidden behind the GPU's)
 *
 * usage: gemm_bench gemm M N K [variant...]      ("heuristic": the default pick)
 *        gemm_bench grouped G T N K [variant...]     (no variant: heuristic)
 *        gemm_bench copy MIB...   (tsr_buffer_copy of MIB MiB, timed alike: what
 *                                  a transfer of that size reaches per call)
 * env: GEMM_DTYPE = bf16 (default), f16, f32 (strict) or tf32 (f32 inputs,
 *      TSR_COMPUTE_TF32); GEMM_TRANS_B = 1: B stored [N][K] (plain GEMM).
 * prints: <case> <variant> <single ms> <TFLOP/s> <queued ms> <TFLOP/s> */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/tessera.h"

enum { WARMUP = 3, REPEAT = 15, QUEUED = 10 };

static uint64_t state = 0x2545f4914f6cdd1dull;

static tsr_dtype bench_dtype = TSR_DTYPE_BF16;
static tsr_compute_mode bench_compute = TSR_COMPUTE_STRICT;

static float random_float(void) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return (float)((double)(state >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
}

static tsr_tensor random_tensor(tsr_device *device, tsr_queue *queue, int rank,
                                const int64_t *shape) {
  size_t elements = 1;
  for (int i = 0; i < rank; i++)
    elements *= (size_t)shape[i];
  size_t esize = bench_dtype == TSR_DTYPE_F32 ? 4 : 2;
  unsigned char *host = malloc(elements * esize);
  for (size_t i = 0; i < elements; i++) {
    float value = random_float();
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    if (esize == 4) {
      memcpy(host + 4 * i, &bits, 4);
    } else {
      uint16_t half = (uint16_t)(bits >> 16); /* bf16 */
      if (bench_dtype == TSR_DTYPE_F16) {     /* |value| < 1: exact enough as f16 */
        int exponent = (int)((bits >> 23) & 0xff) - 127 + 15;
        uint32_t mantissa = (bits >> 13) & 0x3ff;
        half = (uint16_t)((bits >> 16) & 0x8000);
        if (exponent > 0)
          half |= (uint16_t)(exponent << 10 | mantissa);
      }
      memcpy(host + 2 * i, &half, 2);
    }
  }
  tsr_buffer *buffer = NULL;
  if (tsr_buffer_create(device, elements * esize, &buffer) != TSR_OK ||
      tsr_buffer_write(queue, buffer, 0, host, elements * esize) != TSR_OK) {
    fprintf(stderr, "buffer: %s\n", tsr_last_error());
    exit(1);
  }
  free(host);
  return tsr_tensor_make(buffer, 0, bench_dtype, rank, shape);
}

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct problem {
  bool grouped;
  tsr_tensor a[2], b[2], d;
  int64_t *sizes, groups;
  tsr_buffer *src[2], *dst[2]; /* copy mode: copy_bytes from src to dst */
  size_t copy_bytes;
} problem;

static tsr_status run_once(tsr_queue *queue, const problem *p, int set, const char *variant) {
  if (p->copy_bytes)
    return tsr_buffer_copy(queue, p->src[set], 0, p->dst[set], 0, p->copy_bytes);
  if (p->grouped) {
    tsr_grouped_gemm_desc desc = TSR_GROUPED_GEMM_DESC_INIT;
    desc.a = p->a[set];
    desc.b = p->b[set];
    desc.d = p->d;
    desc.group_sizes = p->sizes;
    desc.group_count = p->groups;
    desc.compute = bench_compute;
    desc.variant = variant;
    return tsr_grouped_gemm(queue, &desc);
  }
  tsr_gemm_desc desc = TSR_GEMM_DESC_INIT;
  desc.a = p->a[set];
  desc.b = p->b[set];
  desc.d = p->d;
  desc.compute = bench_compute;
  desc.variant = variant;
  return tsr_gemm(queue, &desc);
}

/* Median ms per call of `calls` calls between two events. */
static double time_calls(tsr_queue *queue, const problem *p, const char *variant, int calls) {
  double times[REPEAT];
  for (int i = 0; i < WARMUP + REPEAT; i++) {
    tsr_event *start = NULL, *end = NULL;
    tsr_status status = tsr_event_record(queue, &start);
    for (int c = 0; c < calls && status == TSR_OK; c++)
      status = run_once(queue, p, (i + c) % 2, variant);
    if (status == TSR_OK)
      status = tsr_event_record(queue, &end);
    if (status == TSR_OK)
      status = tsr_event_wait(end);
    if (status != TSR_OK) {
      fprintf(stderr, "%s: %s\n", variant ? variant : "heuristic", tsr_last_error());
      exit(1);
    }
    double ms = 0.0;
    tsr_event_elapsed_ms(start, end, &ms);
    tsr_event_destroy(start);
    tsr_event_destroy(end);
    if (i >= WARMUP)
      times[i - WARMUP] = ms / calls;
  }
  qsort(times, REPEAT, sizeof times[0], compare);
  return times[REPEAT / 2];
}

/* gemm_bench copy MIB...: per size, single and queued ms and GB/s (read +
 * write). */
static int copy_mode(tsr_device *device, tsr_queue *queue, int argc, char **argv) {
  for (int i = 2; i < argc; i++) {
    problem p;
    memset(&p, 0, sizeof p);
    p.copy_bytes = (size_t)atoll(argv[i]) << 20;
    for (int s = 0; s < 2; s++)
      if (tsr_buffer_create(device, p.copy_bytes, &p.src[s]) != TSR_OK ||
          tsr_buffer_create(device, p.copy_bytes, &p.dst[s]) != TSR_OK) {
        fprintf(stderr, "copy buffers: %s\n", tsr_last_error());
        return 1;
      }
    double single = time_calls(queue, &p, "copy", 1);
    double queued = time_calls(queue, &p, "copy", QUEUED);
    double bytes = 2.0 * (double)p.copy_bytes;
    printf("copy_%sMiB\tcopy\t%.4f\t%.1f GB/s\t%.4f\t%.1f GB/s\n", argv[i], single,
           bytes / (single * 1e-3) / 1e9, queued, bytes / (queued * 1e-3) / 1e9);
    fflush(stdout);
    for (int s = 0; s < 2; s++) {
      tsr_buffer_destroy(p.src[s]);
      tsr_buffer_destroy(p.dst[s]);
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  bool grouped = argc > 1 && strcmp(argv[1], "grouped") == 0;
  bool copy = argc > 2 && strcmp(argv[1], "copy") == 0;
  int sizes_given = grouped ? 4 : 3;
  if (!copy && (argc < 2 + sizes_given || (!grouped && strcmp(argv[1], "gemm") != 0))) {
    fprintf(stderr,
            "usage: %s gemm M N K [variant...] | grouped G T N K [variant...] | copy MIB...\n",
            argv[0]);
    return 2;
  }
  const char *dtype_name = getenv("GEMM_DTYPE") ? getenv("GEMM_DTYPE") : "bf16";
  if (strcmp(dtype_name, "f16") == 0)
    bench_dtype = TSR_DTYPE_F16;
  else if (strcmp(dtype_name, "f32") == 0 || strcmp(dtype_name, "tf32") == 0)
    bench_dtype = TSR_DTYPE_F32;
  else
    dtype_name = "bf16";
  if (strcmp(dtype_name, "tf32") == 0)
    bench_compute = TSR_COMPUTE_TF32;
  bool trans_b = getenv("GEMM_TRANS_B") && atoi(getenv("GEMM_TRANS_B")) != 0;
  tsr_context *context = NULL;
  tsr_device *device = NULL;
  tsr_queue *queue = NULL;
  if (tsr_context_create(NULL, &context) != TSR_OK ||
      tsr_device_open(context, "cuda:0", &device) != TSR_OK ||
      tsr_queue_create(device, &queue) != TSR_OK) {
    fprintf(stderr, "cuda:0: %s\n", tsr_last_error());
    return 1;
  }
  if (copy) {
    int status = copy_mode(device, queue, argc, argv);
    tsr_queue_destroy(queue);
    tsr_context_destroy(context);
    return status;
  }
  problem p;
  memset(&p, 0, sizeof p);
  p.grouped = grouped;
  char name[96];
  double flops;
  if (grouped) {
    int64_t groups = atoll(argv[2]), tokens = atoll(argv[3]), n = atoll(argv[4]),
            k = atoll(argv[5]);
    p.groups = groups;
    p.sizes = malloc((size_t)groups * sizeof *p.sizes);
    for (int64_t g = 0; g < groups; g++)
      p.sizes[g] = tokens / groups + (g < tokens % groups);
    int64_t a_shape[2] = {tokens, k}, b_shape[3] = {groups, k, n}, d_shape[2] = {tokens, n};
    for (int s = 0; s < 2; s++) {
      p.a[s] = random_tensor(device, queue, 2, a_shape);
      p.b[s] = random_tensor(device, queue, 3, b_shape);
    }
    p.d = random_tensor(device, queue, 2, d_shape);
    flops = 2.0 * (double)tokens * (double)n * (double)k;
    snprintf(name, sizeof name, "grouped_%s_%lldx%lldx%lldx%lld", dtype_name, (long long)groups,
             (long long)tokens, (long long)n, (long long)k);
  } else {
    int64_t m = atoll(argv[2]), n = atoll(argv[3]), k = atoll(argv[4]);
    int64_t a_shape[3] = {1, m, k}, b_shape[3] = {1, k, n}, d_shape[3] = {1, m, n};
    int64_t bt_shape[3] = {1, n, k};
    for (int s = 0; s < 2; s++) {
      p.a[s] = random_tensor(device, queue, 3, a_shape);
      p.b[s] = trans_b ? tsr_tensor_transpose(random_tensor(device, queue, 3, bt_shape), 1, 2)
                       : random_tensor(device, queue, 3, b_shape);
    }
    p.d = random_tensor(device, queue, 3, d_shape);
    flops = 2.0 * (double)m * (double)n * (double)k;
    snprintf(name, sizeof name, "gemm_%s_%lldx%lldx%lld%s", dtype_name, (long long)m, (long long)n,
             (long long)k, trans_b ? "_bt" : "");
  }
  int first = 2 + sizes_given;
  for (int v = first; v < (argc > first ? argc : first + 1); v++) {
    const char *variant = argc > first ? argv[v] : NULL;
    if (variant && strcmp(variant, "heuristic") == 0)
      variant = NULL;
    double single = time_calls(queue, &p, variant, 1);
    double queued = time_calls(queue, &p, variant, QUEUED);
    printf("%s\t%s\t%.4f\t%.1f\t%.4f\t%.1f\n", name, variant ? variant : "heuristic", single,
           flops / (single * 1e-3) / 1e12, queued, flops / (queued * 1e-3) / 1e12);
    fflush(stdout);
  }
  tsr_queue_destroy(queue);
  tsr_context_destroy(context);
  return 0;
}
