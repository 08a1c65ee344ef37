/* Times the Vulkan plugin's bandwidth-bound row ops against a device copy of
 * the same bytes, with queue events (median of the timed runs), for issue 5's
 * "rmsnorm and softmax on 16384x8192 at >= 70% of copy bandwidth".
 *
 *   vulkan_rows_bench [DEVICE] [ROWSxN] [VARIANT...]
 *
 * DEVICE defaults to vulkan:0, the shape to 16384x8192. Each op runs with the
 * heuristic's variant and then each VARIANT named. GB/s counts one read of x
 * (and weight) and one write of y; the copy's counts its read and write. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/tessera.h"

enum { WARMUP = 3, RUNS = 15 };

static int fail(const char *what, tsr_status status) {
  fprintf(stderr, "vulkan_rows_bench: %s: %s (%s)\n", what, tsr_status_name(status),
          tsr_last_error());
  return 1;
}

static int compare_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef enum { OP_COPY, OP_RMSNORM, OP_SOFTMAX } bench_op;

typedef struct bench {
  tsr_queue *queue;
  tsr_buffer *x, *y, *w;
  int64_t rows, n;
  tsr_dtype dtype;
} bench;

static tsr_status run_once(const bench *b, bench_op op, const char *variant) {
  int64_t shape[2] = {b->rows, b->n};
  tsr_tensor x = tsr_tensor_make(b->x, 0, b->dtype, 2, shape);
  tsr_tensor y = tsr_tensor_make(b->y, 0, b->dtype, 2, shape);
  size_t bytes = (size_t)(b->rows * b->n) * (b->dtype == TSR_DTYPE_F32 ? 4 : 2);
  if (op == OP_COPY)
    return tsr_buffer_copy(b->queue, b->x, 0, b->y, 0, bytes);
  if (op == OP_RMSNORM) {
    tsr_rmsnorm_desc d = TSR_RMSNORM_DESC_INIT;
    d.x = x;
    d.y = y;
    d.weight = tsr_tensor_make(b->w, 0, b->dtype, 1, &b->n);
    d.eps = 1e-6f;
    d.variant = variant;
    return tsr_rmsnorm(b->queue, &d);
  }
  tsr_softmax_desc d = TSR_SOFTMAX_DESC_INIT;
  d.x = x;
  d.y = y;
  d.variant = variant;
  return tsr_softmax(b->queue, &d);
}

/* Median milliseconds of RUNS timed runs, each between two events. */
static tsr_status time_op(const bench *b, bench_op op, const char *variant, double *median) {
  double ms[RUNS];
  for (int i = 0; i < WARMUP; i++) {
    tsr_status s = run_once(b, op, variant);
    if (s != TSR_OK)
      return s;
  }
  tsr_status s = tsr_queue_finish(b->queue);
  for (int i = 0; i < RUNS && s == TSR_OK; i++) {
    tsr_event *start = NULL, *end = NULL;
    s = tsr_event_record(b->queue, &start);
    if (s == TSR_OK)
      s = run_once(b, op, variant);
    if (s == TSR_OK)
      s = tsr_event_record(b->queue, &end);
    if (s == TSR_OK)
      s = tsr_event_elapsed_ms(start, end, &ms[i]);
    tsr_event_destroy(start);
    tsr_event_destroy(end);
  }
  if (s != TSR_OK)
    return s;
  qsort(ms, RUNS, sizeof ms[0], compare_double);
  *median = ms[RUNS / 2];
  return TSR_OK;
}

int main(int argc, char **argv) {
  const char *selector = argc > 1 ? argv[1] : "vulkan:0";
  long long rows = 16384, n = 8192;
  if (argc > 2 && sscanf(argv[2], "%lldx%lld", &rows, &n) != 2) {
    fprintf(stderr, "usage: vulkan_rows_bench [DEVICE] [ROWSxN] [VARIANT...]\n");
    return 2;
  }
  tsr_context *context = NULL;
  tsr_status s = tsr_context_create(NULL, &context);
  if (s != TSR_OK)
    return fail("tsr_context_create", s);
  tsr_device *device = NULL;
  s = tsr_device_open(context, selector, &device);
  if (s != TSR_OK)
    return fail(selector, s);
  tsr_device_info info = {.struct_size = sizeof info};
  tsr_device_get_info(device, &info);
  printf("device %s: %s (%s)\n", info.selector, info.name, info.driver_version);
  const tsr_dtype dtypes[2] = {TSR_DTYPE_F32, TSR_DTYPE_BF16};
  int status = 0;
  for (int d = 0; d < 2 && status == 0; d++) {
    bench b = {.rows = rows, .n = n, .dtype = dtypes[d]};
    size_t esize = dtypes[d] == TSR_DTYPE_F32 ? 4 : 2;
    size_t bytes = (size_t)(rows * n) * esize;
    s = tsr_queue_create(device, &b.queue);
    if (s == TSR_OK)
      s = tsr_buffer_create(device, bytes, &b.x);
    if (s == TSR_OK)
      s = tsr_buffer_create(device, bytes, &b.y);
    if (s == TSR_OK)
      s = tsr_buffer_create(device, (size_t)n * esize, &b.w);
    /* Inputs: a cheap pseudo-random pattern (never zeros). */
    unsigned char *host = s == TSR_OK ? malloc(bytes) : NULL;
    if (host) {
      uint32_t state = 12345u;
      for (size_t i = 0; i < bytes / 2; i++) {
        state = state * 1664525u + 1013904223u;
        uint16_t half = (uint16_t)(0x3c00u | ((state >> 16) & 0x3ffu)); /* 1..2 in f16/bf16-ish */
        if (esize == 4)
          half = (uint16_t)((i & 1) ? 0x3f80u | ((state >> 20) & 0x7f) : (state >> 8));
        memcpy(host + 2 * i, &half, 2);
      }
      s = tsr_buffer_write(b.queue, b.x, 0, host, bytes);
      if (s == TSR_OK)
        s = tsr_buffer_write(b.queue, b.w, 0, host, (size_t)n * esize);
      free(host);
    }
    if (s != TSR_OK) {
      status = fail("setting up", s);
      break;
    }
    double copy_ms = 0;
    s = time_op(&b, OP_COPY, NULL, &copy_ms);
    if (s != TSR_OK) {
      status = fail("copy", s);
      break;
    }
    double copy_gbs = 2.0 * (double)bytes / (copy_ms * 1e6);
    printf("%-8s %-5s %lldx%lld  %-12s %8.3f ms %8.1f GB/s\n", "copy", d ? "bf16" : "f32", rows, n,
           "-", copy_ms, copy_gbs);
    for (int op = OP_RMSNORM; op <= OP_SOFTMAX && status == 0; op++) {
      for (int v = 2; v < (argc > 3 ? argc : 3); v++) {
        const char *variant = v == 2 ? NULL : argv[v];
        double ms = 0;
        s = time_op(&b, (bench_op)op, variant, &ms);
        if (s != TSR_OK) {
          printf("%-8s %-5s %s: %s\n", op == OP_RMSNORM ? "rmsnorm" : "softmax", d ? "bf16" : "f32",
                 variant ? variant : "(heuristic)", tsr_last_error());
          continue;
        }
        double moved = 2.0 * (double)bytes + (op == OP_RMSNORM ? (double)n * esize : 0.0);
        double gbs = moved / (ms * 1e6);
        printf("%-8s %-5s %lldx%lld  %-12s %8.3f ms %8.1f GB/s  %5.1f%% of copy\n",
               op == OP_RMSNORM ? "rmsnorm" : "softmax", d ? "bf16" : "f32", rows, n,
               variant ? variant : "(heuristic)", ms, gbs, 100.0 * gbs / copy_gbs);
      }
    }
    tsr_buffer_destroy(b.x);
    tsr_buffer_destroy(b.y);
    tsr_buffer_destroy(b.w);
    tsr_queue_destroy(b.queue);
  }
  tsr_context_destroy(context);
  return status;
}
