/* SPDX-License-Identifier: Apache-2.0 */
/* CPU row ops and memory, through the public API on the "cpu" device (the
 * 16-bit row and read-against-copy figures of docs/PERFORMANCE.md):
 *
 *   row_ops time OP ROWS COLS     OP rmsnorm | layernorm | softmax: 4 rounds of a
 *                                 256 MiB tsr_buffer_copy (best of 3) beside OP on
 *                                 f32 and on bf16 ROWS x COLS (3 rotated inputs,
 *                                 median of 9 calls; weight and bias where the op
 *                                 has them); GB/s count x read and y written
 *   row_ops dump OP ROWS COLS F   OP on bf16 ROWS x COLS from fixed data, y written
 *                                 to file F (compare ISA levels: TESSERA_CPU_ISA)
 *   row_ops read                  8 rounds: the copy (best of 3) against a plain
 *                                 read of the same 256 MiB on 2 threads (best of 3)
 *
 * build: cc -O2 -std=c11 -pthread bench/cpu/row_ops.c -Iinclude -Lbuild/lib -ltessera \
 *          -Wl,-rpath,$PWD/build/lib -o /tmp/row_ops
 * Run alone on the machine: its memory bandwidth drifts (docs/PERFORMANCE.md). */
#define _POSIX_C_SOURCE 200809L
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tessera/tessera.h"

#define CHECK(call)                                                                                \
  do {                                                                                             \
    if ((call) != TSR_OK) {                                                                        \
      fprintf(stderr, "%s: %s\n", #call, tsr_last_error());                                        \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

enum { COPY_BYTES = 256 << 20 };

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static tsr_device *device;
static tsr_queue *queue;

static tsr_buffer *buffer(size_t bytes, void **host) {
  tsr_buffer *b = NULL;
  CHECK(tsr_buffer_create(device, bytes, &b));
  CHECK(tsr_buffer_map(b, host));
  return b;
}

/* Nonzero 16-bit patterns (bf16 of magnitude 1..2, either sign) or f32. */
static tsr_buffer *filled(size_t elements, tsr_dtype dtype, unsigned seed) {
  void *host;
  tsr_buffer *b = buffer(elements * tsr_dtype_size(dtype), &host);
  for (size_t i = 0; i < elements; i++) {
    seed = seed * 1103515245u + 12345u;
    uint16_t bits = (uint16_t)(0x3f80u + ((seed >> 16) & 0x7fu) + (((seed >> 8) & 1u) << 15));
    if (dtype == TSR_DTYPE_F32) {
      uint32_t word = (uint32_t)bits << 16;
      memcpy((float *)host + i, &word, 4);
    } else {
      ((uint16_t *)host)[i] = bits;
    }
  }
  return b;
}

static double copy_gbs(tsr_buffer *src, tsr_buffer *dst) {
  double best = 1e30;
  for (int i = 0; i < 3; i++) {
    double t = now();
    CHECK(tsr_buffer_copy(queue, src, 0, dst, 0, COPY_BYTES));
    CHECK(tsr_queue_finish(queue));
    t = now() - t;
    best = t < best ? t : best;
  }
  return 2.0 * COPY_BYTES / best / 1e9;
}

static void run_op(const char *op, tsr_dtype dtype, int64_t rows, int64_t cols, tsr_buffer *x,
                   tsr_buffer *y, tsr_buffer *weight, tsr_buffer *bias) {
  int64_t shape[2] = {rows, cols}, vector[1] = {cols};
  tsr_tensor tx = tsr_tensor_make(x, 0, dtype, 2, shape),
             ty = tsr_tensor_make(y, 0, dtype, 2, shape);
  if (strcmp(op, "rmsnorm") == 0) {
    tsr_rmsnorm_desc d = TSR_RMSNORM_DESC_INIT;
    d.x = tx, d.y = ty, d.weight = tsr_tensor_make(weight, 0, dtype, 1, vector);
    CHECK(tsr_rmsnorm(queue, &d));
  } else if (strcmp(op, "layernorm") == 0) {
    tsr_layernorm_desc d = TSR_LAYERNORM_DESC_INIT;
    d.x = tx, d.y = ty, d.weight = tsr_tensor_make(weight, 0, dtype, 1, vector);
    d.bias = tsr_tensor_make(bias, 0, dtype, 1, vector);
    CHECK(tsr_layernorm(queue, &d));
  } else if (strcmp(op, "softmax") == 0) {
    tsr_softmax_desc d = TSR_SOFTMAX_DESC_INIT;
    d.x = tx, d.y = ty;
    CHECK(tsr_softmax(queue, &d));
  } else {
    fprintf(stderr, "unknown op %s\n", op);
    exit(2);
  }
  CHECK(tsr_queue_finish(queue));
}

static void time_mode(const char *op, int64_t rows, int64_t cols) {
  void *host;
  tsr_buffer *src = buffer(COPY_BYTES, &host), *dst;
  memset(host, 1, COPY_BYTES);
  dst = buffer(COPY_BYTES, &host);
  memset(host, 1, COPY_BYTES);
  const tsr_dtype dtypes[2] = {TSR_DTYPE_F32, TSR_DTYPE_BF16};
  for (int round = 0; round < 4; round++) {
    printf("copy %.1f GB/s", copy_gbs(src, dst));
    for (int d = 0; d < 2; d++) {
      size_t elements = (size_t)rows * (size_t)cols;
      tsr_buffer *x[3], *y = filled(elements, dtypes[d], 7);
      for (int k = 0; k < 3; k++)
        x[k] = filled(elements, dtypes[d], 11u + (unsigned)k);
      tsr_buffer *weight = filled((size_t)cols, dtypes[d], 3),
                 *bias = filled((size_t)cols, dtypes[d], 5);
      double times[9];
      for (int i = 0; i < 9; i++) {
        double t = now();
        run_op(op, dtypes[d], rows, cols, x[i % 3], y, weight, bias);
        times[i] = now() - t;
      }
      qsort(times, 9, sizeof times[0], compare);
      double bytes = 2.0 * (double)elements * (double)tsr_dtype_size(dtypes[d]);
      printf("  %s %.3f ms %.1f GB/s", tsr_dtype_name(dtypes[d]), times[4] * 1e3,
             bytes / times[4] / 1e9);
      for (int k = 0; k < 3; k++)
        tsr_buffer_destroy(x[k]);
      tsr_buffer_destroy(y);
      tsr_buffer_destroy(weight);
      tsr_buffer_destroy(bias);
    }
    printf("\n");
  }
}

static void dump_mode(const char *op, int64_t rows, int64_t cols, const char *path) {
  size_t elements = (size_t)rows * (size_t)cols;
  tsr_buffer *x = filled(elements, TSR_DTYPE_BF16, 1), *y = filled(elements, TSR_DTYPE_BF16, 2);
  tsr_buffer *weight = filled((size_t)cols, TSR_DTYPE_BF16, 3);
  tsr_buffer *bias = filled((size_t)cols, TSR_DTYPE_BF16, 5);
  run_op(op, TSR_DTYPE_BF16, rows, cols, x, y, weight, bias);
  void *host;
  CHECK(tsr_buffer_map(y, &host));
  FILE *f = fopen(path, "wb");
  if (f == NULL || fwrite(host, 2, elements, f) != elements) {
    fprintf(stderr, "cannot write %s\n", path);
    exit(1);
  }
  fclose(f);
}

/* The plain read: each of 2 threads sums its half as two streams of 64-byte
 * lines, prefetching 2 KiB ahead (bench's measure_read_bandwidth). */
typedef struct reader {
  const unsigned char *data;
  size_t bytes;
  uint64_t sum;
} reader;

__attribute__((target("avx512f"))) static void *read_half(void *arg) {
  reader *r = arg;
  const size_t half = r->bytes / 2;
  __m512i sum[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
  for (size_t at = 0; at < half; at += 64)
    for (int s = 0; s < 2; s++) {
      const unsigned char *line = r->data + (size_t)s * half + at;
      _mm_prefetch((const char *)line + 2048, _MM_HINT_T0);
      sum[s] = _mm512_add_epi64(sum[s], _mm512_loadu_si512(line));
    }
  uint64_t lanes[8];
  _mm512_storeu_si512(lanes, _mm512_add_epi64(sum[0], sum[1]));
  for (int i = 0; i < 8; i++)
    r->sum += lanes[i];
  return NULL;
}

static void read_mode(void) {
  void *host;
  tsr_buffer *src = buffer(COPY_BYTES, &host), *dst;
  memset(host, 1, COPY_BYTES);
  const unsigned char *data = host;
  dst = buffer(COPY_BYTES, &host);
  memset(host, 1, COPY_BYTES);
  for (int round = 0; round < 8; round++) {
    double copy = copy_gbs(src, dst), best = 1e30;
    for (int i = 0; i < 3; i++) {
      reader r[2] = {{data, COPY_BYTES / 2, 0}, {data + COPY_BYTES / 2, COPY_BYTES / 2, 0}};
      pthread_t threads[2];
      double t = now();
      for (int k = 0; k < 2; k++)
        pthread_create(&threads[k], NULL, read_half, &r[k]);
      for (int k = 0; k < 2; k++)
        pthread_join(threads[k], NULL);
      t = now() - t;
      best = t < best ? t : best;
    }
    double read = COPY_BYTES / best / 1e9;
    printf("round %d: copy %.1f GB/s (read + write), read-only %.1f GB/s, read/copy %.2f\n", round,
           copy, read, read / copy);
  }
}

int main(int argc, char **argv) {
  tsr_context *context = NULL;
  CHECK(tsr_context_create(NULL, &context));
  CHECK(tsr_device_open(context, "cpu", &device));
  CHECK(tsr_queue_create(device, &queue));
  if (argc == 5 && strcmp(argv[1], "time") == 0)
    time_mode(argv[2], atoll(argv[3]), atoll(argv[4]));
  else if (argc == 6 && strcmp(argv[1], "dump") == 0)
    dump_mode(argv[2], atoll(argv[3]), atoll(argv[4]), argv[5]);
  else if (argc == 2 && strcmp(argv[1], "read") == 0)
    read_mode();
  else {
    fprintf(stderr, "usage: %s time OP ROWS COLS | dump OP ROWS COLS FILE | read\n", argv[0]);
    return 2;
  }
  tsr_queue_destroy(queue);
  tsr_context_destroy(context);
  return 0;
}
