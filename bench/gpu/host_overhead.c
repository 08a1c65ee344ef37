/* SPDX-License-Identifier: Apache-2.0 */
/* Host time of one op call on a device, by host clock: how long tsr_gemm
 * (validation, variant choice, the plugin's config, launch) keeps the
 * calling thread, and the pieces that can be called alone (tsr_op_explain:
 * validation + choice; tsr_op_variants: validation + the plugin's list).
 * Every figure is the median over batches of calls of the mean per call.
 * With a real GPU the queue is drained between batches (outside the clock),
 * so the launches never wait for a full queue; the "single" row is the GPU
 * time between two events around one call (as `tessera bench` times) and
 * "queued" the same for 10 calls back to back, per call.
 *
 * usage: host_overhead [device [pairs]] (default cuda:0): with `pairs`, only
 *        that many tsr_gemm (16x4096x4096) + tsr_rmsnorm (16x4096) pairs,
 *        inputs never written, each call's status checked (for a profiler:
 *        bench/gpu/host_overhead.sh counts instructions with callgrind)
 * Shapes: bf16 1x256x256 (launch floor), 1x8192x8192 (B [K][N] and [N][K]), 16x4096x4096, 4096^3.
 * With TESSERA_CUDA_DRIVER naming tests/cuda/fake_libcuda.c built as a
 * library (the build's lib/libtessera-fake-cuda.so), this measures the plugin
 * without a GPU (the GPU rows are then meaningless). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tessera/tessera.h"

enum { BATCH = 50, BATCHES = 21 };

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void fail(const char *what) {
  fprintf(stderr, "%s: %s\n", what, tsr_last_error());
  exit(1);
}

static bool fill = true;

static tsr_tensor tensor(tsr_device *device, tsr_queue *queue, int64_t d0, int64_t d1, int64_t d2) {
  int64_t shape[3] = {d0, d1, d2};
  size_t bytes = (size_t)(d0 * d1 * d2) * 2;
  tsr_buffer *buffer = NULL;
  if (tsr_buffer_create(device, bytes, &buffer) != TSR_OK)
    fail("tsr_buffer_create");
  if (!fill)
    return tsr_tensor_make(buffer, 0, TSR_DTYPE_BF16, 3, shape);
  /* small random-ish values (bf16 bit patterns around +-0.5), never zeros */
  uint16_t *host = malloc(bytes);
  uint32_t s = 12345u + (uint32_t)bytes;
  for (size_t i = 0; i < bytes / 2; i++) {
    s = s * 1664525u + 1013904223u;
    host[i] = (uint16_t)(0x3e00u | ((s >> 16) & 0x7fu) | ((s >> 8) & 0x8000u));
  }
  if (tsr_buffer_write(queue, buffer, 0, host, bytes) != TSR_OK)
    fail("tsr_buffer_write");
  free(host);
  return tsr_tensor_make(buffer, 0, TSR_DTYPE_BF16, 3, shape);
}

typedef enum what { RUN, EXPLAIN, VARIANTS, EVENT_RUN } what;

/* Median over batches of the host us per call. */
static double host_us(tsr_device *device, tsr_queue *queue, const tsr_gemm_desc *desc, what w) {
  double times[BATCHES];
  tsr_choice choice = {.struct_size = sizeof choice};
  static tsr_variant_list list;
  list.struct_size = sizeof list;
  for (int b = 0; b < BATCHES + 2; b++) {
    tsr_event *events[2 * BATCH];
    double t0 = now_us();
    for (int i = 0; i < BATCH; i++) {
      tsr_status st = TSR_OK;
      switch (w) {
      case RUN:
        st = tsr_gemm(queue, desc);
        break;
      case EXPLAIN:
        st = tsr_op_explain(device, TSR_OP_GEMM, desc, &choice);
        break;
      case VARIANTS:
        st = tsr_op_variants(device, TSR_OP_GEMM, desc, &list);
        break;
      case EVENT_RUN:
        st = tsr_event_record(queue, &events[2 * i]);
        if (st == TSR_OK)
          st = tsr_gemm(queue, desc);
        if (st == TSR_OK)
          st = tsr_event_record(queue, &events[2 * i + 1]);
        break;
      }
      if (st != TSR_OK)
        fail("call");
    }
    double t1 = now_us();
    if (w == EVENT_RUN)
      for (int i = 0; i < 2 * BATCH; i++)
        tsr_event_destroy(events[i]);
    if (tsr_queue_finish(queue) != TSR_OK)
      fail("tsr_queue_finish");
    if (b >= 2)
      times[b - 2] = (t1 - t0) / BATCH;
  }
  qsort(times, BATCHES, sizeof times[0], compare);
  return times[BATCHES / 2];
}

/* GPU ms per call between two events around `calls` calls (median of 15). */
static double gpu_ms(tsr_queue *queue, const tsr_gemm_desc *desc, int calls) {
  double times[15];
  for (int r = 0; r < 18; r++) {
    tsr_event *start = NULL, *end = NULL;
    if (tsr_event_record(queue, &start) != TSR_OK)
      fail("tsr_event_record");
    for (int c = 0; c < calls; c++)
      if (tsr_gemm(queue, desc) != TSR_OK)
        fail("tsr_gemm");
    if (tsr_event_record(queue, &end) != TSR_OK || tsr_event_wait(end) != TSR_OK)
      fail("tsr_event_record");
    double ms = 0.0;
    tsr_event_elapsed_ms(start, end, &ms);
    tsr_event_destroy(start);
    tsr_event_destroy(end);
    if (r >= 3)
      times[r - 3] = ms / calls;
  }
  qsort(times, 15, sizeof times[0], compare);
  return times[7];
}

int main(int argc, char **argv) {
  const char *selector = argc > 1 ? argv[1] : "cuda:0";
  tsr_context *context = NULL;
  tsr_device *device = NULL;
  tsr_queue *queue = NULL;
  if (tsr_context_create(NULL, &context) != TSR_OK ||
      tsr_device_open(context, selector, &device) != TSR_OK ||
      tsr_queue_create(device, &queue) != TSR_OK)
    fail(selector);
  if (argc > 2) {
    fill = false;
    tsr_gemm_desc desc = TSR_GEMM_DESC_INIT;
    desc.a = tensor(device, queue, 1, 16, 4096);
    desc.b = tensor(device, queue, 1, 4096, 4096);
    desc.d = tensor(device, queue, 1, 16, 4096);
    tsr_rmsnorm_desc norm = TSR_RMSNORM_DESC_INIT;
    norm.x = tsr_tensor_make(desc.d.buffer, 0, TSR_DTYPE_BF16, 2, (int64_t[]){16, 4096});
    norm.y = tsr_tensor_make(desc.a.buffer, 0, TSR_DTYPE_BF16, 2, (int64_t[]){16, 4096});
    norm.weight = tsr_tensor_make(desc.b.buffer, 0, TSR_DTYPE_BF16, 1, (int64_t[]){4096});
    long pairs = atol(argv[2]);
    double t0 = now_us();
    for (long i = 0; i < pairs; i++) {
      if (tsr_gemm(queue, &desc) != TSR_OK)
        fail("tsr_gemm");
      if (tsr_rmsnorm(queue, &norm) != TSR_OK)
        fail("tsr_rmsnorm");
      if (i % 64 == 63 && tsr_queue_finish(queue) != TSR_OK)
        fail("tsr_queue_finish");
    }
    if (tsr_queue_finish(queue) != TSR_OK)
      fail("tsr_queue_finish");
    printf("%ld gemm + rmsnorm pairs: %.2f us a pair\n", pairs, (now_us() - t0) / (double)pairs);
    tsr_buffer_destroy(desc.a.buffer);
    tsr_buffer_destroy(desc.b.buffer);
    tsr_buffer_destroy(desc.d.buffer);
    tsr_queue_destroy(queue);
    tsr_context_destroy(context);
    return 0;
  }
  struct {
    const char *name;
    int64_t m, n, k;
    bool trans_b;
  } shapes[] = {{"1x256x256", 1, 256, 256, false},
                {"1x8192x8192", 1, 8192, 8192, false},
                {"1x8192x8192_bt", 1, 8192, 8192, true},
                {"16x4096x4096", 16, 4096, 4096, false},
                {"4096^3", 4096, 4096, 4096, false}};
  printf("%-16s %-26s %8s %8s %8s %8s %9s %9s\n", "case (bf16)", "variant", "gemm_us", "ev+gemm",
         "explain", "variants", "single_ms", "queued_ms");
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    tsr_gemm_desc desc = TSR_GEMM_DESC_INIT;
    desc.a = tensor(device, queue, 1, shapes[s].m, shapes[s].k);
    desc.b = shapes[s].trans_b
                 ? tsr_tensor_transpose(tensor(device, queue, 1, shapes[s].n, shapes[s].k), 1, 2)
                 : tensor(device, queue, 1, shapes[s].k, shapes[s].n);
    desc.d = tensor(device, queue, 1, shapes[s].m, shapes[s].n);
    tsr_choice choice = {.struct_size = sizeof choice};
    if (tsr_op_explain(device, TSR_OP_GEMM, &desc, &choice) != TSR_OK)
      fail("tsr_op_explain");
    for (int i = 0; i < 5; i++)
      if (tsr_gemm(queue, &desc) != TSR_OK)
        fail("tsr_gemm");
    double run = host_us(device, queue, &desc, RUN);
    double event_run = host_us(device, queue, &desc, EVENT_RUN);
    double explain = host_us(device, queue, &desc, EXPLAIN);
    double variants = host_us(device, queue, &desc, VARIANTS);
    double single = gpu_ms(queue, &desc, 1), queued = gpu_ms(queue, &desc, 10);
    printf("%-16s %-26s %8.2f %8.2f %8.2f %8.2f %9.4f %9.4f\n", shapes[s].name, choice.variant, run,
           event_run, explain, variants, single, queued);
    fflush(stdout);
    tsr_buffer_destroy(desc.a.buffer);
    tsr_buffer_destroy(desc.b.buffer);
    tsr_buffer_destroy(desc.d.buffer);
  }
  tsr_queue_destroy(queue);
  tsr_context_destroy(context);
  return 0;
}
