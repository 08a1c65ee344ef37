/* SPDX-License-Identifier: Apache-2.0 */
/* Times the Vulkan plugin's bandwidth-bound row ops against a device copy of
 * the same bytes, with queue events (median of the timed runs), for the
 * vulkan-vs-cuda suite's "rmsnorm and softmax on 16384x8192 at >= 70% of copy
 * bandwidth".
 *
 *   vulkan_rows_bench [--probe] [--cold MS] [--sets 2] [DEVICE] [ROWSxN] [VARIANT...]
 *
 * --probe adds, per op, checks of the event timing itself: the median per
 * op with PROBE_BATCH ops between one pair of events (no event overhead),
 * with a host pause of PROBE_PAUSE_US between a start event that has been
 * waited on and the op (what a timing that counts host gaps would add), and
 * the host time of one op call (recording only).
 * --cold MS leaves the device idle MS milliseconds before each op's warm-up
 * and timing, then times it again at once: how long an idle device takes to
 * come back to speed (tessera tune builds its inputs on the host for seconds,
 * then warms up twice). --sets 2 rotates over two input/output sets, as tune
 * and bench do.
 *
 * DEVICE defaults to vulkan:0, the shape to 16384x8192. Each op runs with the
 * heuristic's variant and then each VARIANT named. GB/s counts one read of x
 * (and weight) and one write of y; the copy's counts its read and write. */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tessera/tessera.h"

enum { WARMUP = 3, RUNS = 15, PROBE_BATCH = 10, PROBE_PAUSE_US = 1000 };

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
  tsr_buffer *xs[2], *ys[2], *w;
  int sets;      /* input/output sets rotated over (1 or 2) */
  unsigned runs; /* calls so far: picks the set */
  int64_t rows, n;
  tsr_dtype dtype;
} bench;

static tsr_status run_once(bench *b, bench_op op, const char *variant) {
  int set = (int)(b->runs++ % (unsigned)b->sets);
  int64_t shape[2] = {b->rows, b->n};
  tsr_tensor x = tsr_tensor_make(b->xs[set], 0, b->dtype, 2, shape);
  tsr_tensor y = tsr_tensor_make(b->ys[set], 0, b->dtype, 2, shape);
  size_t bytes = (size_t)(b->rows * b->n) * (b->dtype == TSR_DTYPE_F32 ? 4 : 2);
  if (op == OP_COPY)
    return tsr_buffer_copy(b->queue, b->xs[set], 0, b->ys[set], 0, bytes);
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
static tsr_status time_op(bench *b, bench_op op, const char *variant, double *median) {
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

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

/* The --probe rows: batch, pause and host-call medians (see the header). */
static tsr_status probe(bench *b, bench_op op, const char *variant, double *batch_ms,
                        double *pause_ms, double *host_us) {
  double batch[RUNS], pause[RUNS], host[RUNS];
  tsr_status s = tsr_queue_finish(b->queue);
  for (int i = 0; i < RUNS && s == TSR_OK; i++) {
    tsr_event *start = NULL, *end = NULL;
    s = tsr_event_record(b->queue, &start);
    for (int k = 0; k < PROBE_BATCH && s == TSR_OK; k++)
      s = run_once(b, op, variant);
    if (s == TSR_OK)
      s = tsr_event_record(b->queue, &end);
    if (s == TSR_OK)
      s = tsr_event_elapsed_ms(start, end, &batch[i]);
    batch[i] /= PROBE_BATCH;
    tsr_event_destroy(start);
    tsr_event_destroy(end);
    start = end = NULL;
    if (s == TSR_OK)
      s = tsr_event_record(b->queue, &start);
    if (s == TSR_OK)
      s = tsr_event_wait(start);
    if (s == TSR_OK) {
      struct timespec pause_for = {0, PROBE_PAUSE_US * 1000L};
      nanosleep(&pause_for, NULL);
      double t0 = now_us();
      s = run_once(b, op, variant);
      host[i] = now_us() - t0;
    }
    if (s == TSR_OK)
      s = tsr_event_record(b->queue, &end);
    if (s == TSR_OK)
      s = tsr_event_elapsed_ms(start, end, &pause[i]);
    tsr_event_destroy(start);
    tsr_event_destroy(end);
  }
  if (s != TSR_OK)
    return s;
  qsort(batch, RUNS, sizeof batch[0], compare_double);
  qsort(pause, RUNS, sizeof pause[0], compare_double);
  qsort(host, RUNS, sizeof host[0], compare_double);
  *batch_ms = batch[RUNS / 2];
  *pause_ms = pause[RUNS / 2];
  *host_us = host[RUNS / 2];
  return TSR_OK;
}

int main(int argc, char **argv) {
  bool probing = false;
  long cold_ms = 0;
  int sets = 1;
  while (argc > 1 && strncmp(argv[1], "--", 2) == 0) {
    if (strcmp(argv[1], "--probe") == 0) {
      probing = true;
    } else if (strcmp(argv[1], "--cold") == 0 && argc > 2) {
      cold_ms = atol(argv[2]);
      argv++;
      argc--;
    } else if (strcmp(argv[1], "--sets") == 0 && argc > 2) {
      sets = atoi(argv[2]) == 2 ? 2 : 1;
      argv++;
      argc--;
    } else {
      fprintf(stderr, "vulkan_rows_bench: unknown option %s\n", argv[1]);
      return 2;
    }
    argv++;
    argc--;
  }
  const char *selector = argc > 1 ? argv[1] : "vulkan:0";
  long long rows = 16384, n = 8192;
  if (argc > 2 && sscanf(argv[2], "%lldx%lld", &rows, &n) != 2) {
    fprintf(stderr, "usage: vulkan_rows_bench [--probe] [DEVICE] [ROWSxN] [VARIANT...]\n");
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
    bench b = {.rows = rows, .n = n, .dtype = dtypes[d], .sets = sets};
    size_t esize = dtypes[d] == TSR_DTYPE_F32 ? 4 : 2;
    size_t bytes = (size_t)(rows * n) * esize;
    s = tsr_queue_create(device, &b.queue);
    for (int i = 0; i < sets && s == TSR_OK; i++) {
      s = tsr_buffer_create(device, bytes, &b.xs[i]);
      if (s == TSR_OK)
        s = tsr_buffer_create(device, bytes, &b.ys[i]);
    }
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
      for (int i = 0; i < sets && s == TSR_OK; i++)
        s = tsr_buffer_write(b.queue, b.xs[i], 0, host, bytes);
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
        double ms = 0, cold = 0;
        if (cold_ms > 0) {
          s = tsr_queue_finish(b.queue);
          struct timespec idle = {cold_ms / 1000, (cold_ms % 1000) * 1000000L};
          nanosleep(&idle, NULL);
          if (s == TSR_OK)
            s = time_op(&b, (bench_op)op, variant, &cold);
          if (s == TSR_OK)
            printf("  after %ld ms idle: %.3f ms; at once again:\n", cold_ms, cold);
        }
        if (s == TSR_OK)
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
        double batch_ms = 0, pause_ms = 0, host_us = 0;
        if (probing && probe(&b, (bench_op)op, variant, &batch_ms, &pause_ms, &host_us) == TSR_OK)
          printf("  probe: %d ops between two events %.3f ms each; after a %d us host pause "
                 "%.3f ms; host %.1f us per op call\n",
                 PROBE_BATCH, batch_ms, PROBE_PAUSE_US, pause_ms, host_us);
      }
    }
    for (int i = 0; i < sets; i++) {
      tsr_buffer_destroy(b.xs[i]);
      tsr_buffer_destroy(b.ys[i]);
    }
    tsr_buffer_destroy(b.w);
    tsr_queue_destroy(b.queue);
  }
  tsr_context_destroy(context);
  return status;
}
