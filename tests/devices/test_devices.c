/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Two devices at once: copies between their buffers (tsr_buffer_copy with
 * src and dst on different devices, queued on either device's queue) and
 * one device's queue waiting for the other's event (tsr_queue_wait_event).
 * Every byte is checked, guard bytes around each copy included. The two
 * selectors may name the same device: its two queues then wait for each
 * other.
 *
 *   test_devices A B copies     sizes 1 .. 33 MiB + 5 both ways, issued on either queue
 *   test_devices A B ordering   B's copy of A's buffer waits for A's slow work to end
 *   test_devices A B teardown   queues and the context destroyed with bridged work pending
 *   test_devices A B refusals   buffers of one device refused by the other's queue
 *
 * Exit 0: passed; 1: a failure (printed); 77: A or B is not present.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/tessera.h"

static int failures;

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    if (failures++ < 20) {                                                                         \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                         \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
    }                                                                                              \
  } while (0)

static bool ok_call(tsr_status status, const char *expression, int line) {
  if (status == TSR_OK)
    return true;
  if (failures++ < 20)
    fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, line, expression, tsr_last_error());
  return false;
}
#define OK(expr) ok_call((expr), #expr, __LINE__)

enum { GUARD = 0xa5 };

static void fill_bytes(unsigned char *data, size_t n, uint32_t seed) {
  uint32_t state = seed * 2654435761u + 7u;
  for (size_t i = 0; i < n; i++) {
    state = state * 1664525u + 1013904223u;
    data[i] = (unsigned char)(state >> 24);
  }
}

typedef struct side {
  tsr_device *device;
  tsr_queue *queue;
  const char *selector;
} side;

/* A buffer of `bytes` on `s`, holding `data` (or GUARD bytes when NULL). */
static tsr_buffer *buffer_with(side *s, size_t bytes, const unsigned char *data) {
  tsr_buffer *buffer = NULL;
  if (!OK(tsr_buffer_create(s->device, bytes, &buffer)))
    return NULL;
  unsigned char *guard = NULL;
  if (!data) {
    guard = malloc(bytes);
    if (!guard) {
      FAIL("out of host memory");
      tsr_buffer_destroy(buffer);
      return NULL;
    }
    memset(guard, GUARD, bytes);
  }
  if (!OK(tsr_buffer_write(s->queue, buffer, 0, data ? data : guard, bytes)) ||
      !OK(tsr_queue_finish(s->queue))) {
    tsr_buffer_destroy(buffer);
    buffer = NULL;
  }
  free(guard);
  return buffer;
}

/* The first byte where `got` differs from `want`, or -1. */
static long first_difference(const unsigned char *got, const unsigned char *want, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (got[i] != want[i])
      return (long)i;
  return -1;
}

/* Copies n bytes from `from` to `to` on `issuer`'s queue (one of the two),
 * then reads the destination on its own device's queue after waiting for
 * an event the issuing queue records after the copy. */
static void copy_case(side *from, side *to, side *issuer, size_t n, uint32_t seed) {
  const size_t src_offset = 3, dst_offset = 5, slack = 16;
  size_t src_bytes = n + slack, dst_bytes = n + slack;
  unsigned char *source = malloc(src_bytes), *got = malloc(dst_bytes), *want = malloc(dst_bytes);
  if (!source || !got || !want) {
    FAIL("out of host memory for %zu bytes", n);
    goto done;
  }
  fill_bytes(source, src_bytes, seed);
  memset(want, GUARD, dst_bytes);
  memcpy(want + dst_offset, source + src_offset, n);
  tsr_buffer *src = buffer_with(from, src_bytes, source);
  tsr_buffer *dst = buffer_with(to, dst_bytes, NULL);
  if (src && dst && OK(tsr_buffer_copy(issuer->queue, src, src_offset, dst, dst_offset, n))) {
    tsr_event *copied = NULL;
    if (issuer != to && OK(tsr_event_record(issuer->queue, &copied))) {
      OK(tsr_queue_wait_event(to->queue, copied));
      tsr_event_destroy(copied); /* at once: the wait keeps what it needs */
    }
    memset(got, 0, dst_bytes);
    if (OK(tsr_buffer_read(to->queue, dst, 0, got, dst_bytes))) {
      long at = first_difference(got, want, dst_bytes);
      if (at >= 0)
        FAIL("%s -> %s on %s's queue, %zu bytes: byte %ld is 0x%02x, want 0x%02x", from->selector,
             to->selector, issuer->selector, n, at, got[at], want[at]);
    }
    OK(tsr_queue_finish(issuer->queue));
    OK(tsr_queue_finish(to->queue));
  }
  tsr_buffer_destroy(src);
  tsr_buffer_destroy(dst);
done:
  free(source);
  free(got);
  free(want);
}

static void run_copies(side *a, side *b) {
  static const size_t sizes[] = {1, 7, 4097, (1u << 20) + 3, (33u << 20) + 5};
  uint32_t seed = 1;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    copy_case(a, b, a, sizes[i], seed++);
    copy_case(a, b, b, sizes[i], seed++);
    copy_case(b, a, a, sizes[i], seed++);
    copy_case(b, a, b, sizes[i], seed++);
  }
}

/* A's queue computes X = 0 * B with GEMMs long enough to outlast a thread
 * hand-off (X held other bytes before) and records an event; B's queue
 * waits for it and copies X into Y on B, then within B into Z. Without the
 * wait B's copy would see the old bytes or a mix. */
static void run_ordering(side *a, side *b) {
  enum { N = 1024, BYTES = N * N * 4 };
  tsr_device_info info = {.struct_size = sizeof info};
  if (!OK(tsr_device_get_info(a->device, &info)))
    return;
  int rounds = info.type == TSR_DEVICE_GPU ? 200 : 3;
  float *zeros = calloc(N * N, sizeof *zeros), *values = malloc(BYTES), *got = malloc(BYTES);
  unsigned char *old = malloc(BYTES);
  if (!zeros || !values || !got || !old) {
    FAIL("out of host memory");
    goto done;
  }
  for (size_t i = 0; i < (size_t)N * N; i++)
    values[i] = (float)(int)(i % 13) - 6.0f;
  fill_bytes(old, BYTES, 11);
  tsr_buffer *x = buffer_with(a, BYTES, old), *zero = buffer_with(a, BYTES, (void *)zeros);
  tsr_buffer *right = buffer_with(a, BYTES, (void *)values);
  tsr_buffer *y = buffer_with(b, BYTES, NULL), *z = buffer_with(b, BYTES, NULL);
  if (x && zero && right && y && z) {
    int64_t shape[2] = {N, N};
    tsr_gemm_desc gemm = TSR_GEMM_DESC_INIT;
    gemm.a = tsr_tensor_make(zero, 0, TSR_DTYPE_F32, 2, shape);
    gemm.b = tsr_tensor_make(right, 0, TSR_DTYPE_F32, 2, shape);
    gemm.d = tsr_tensor_make(x, 0, TSR_DTYPE_F32, 2, shape);
    for (int round = 0; round < rounds; round++)
      OK(tsr_gemm(a->queue, &gemm));
    tsr_event *written = NULL;
    if (OK(tsr_event_record(a->queue, &written)))
      OK(tsr_queue_wait_event(b->queue, written));
    /* (the event stays until the end: destroying an event may wait for it) */
    OK(tsr_buffer_copy(b->queue, x, 0, y, 0, BYTES));
    OK(tsr_buffer_copy(b->queue, y, 0, z, 0, BYTES));
    if (OK(tsr_buffer_read(b->queue, z, 0, got, BYTES))) {
      for (size_t i = 0; i < (size_t)N * N; i++) {
        if (got[i] != 0.0f) {
          FAIL("%s waited for %s's event but element %zu of the copy is %g, not 0 (%s)",
               b->selector, a->selector, i, (double)got[i],
               memcmp(&got[i], old + i * 4, 4) ? "neither old nor new" : "the old bytes");
          break;
        }
      }
    }
    OK(tsr_queue_finish(a->queue));
    OK(tsr_queue_finish(b->queue));
    tsr_event_destroy(written);
  }
  tsr_buffer_destroy(x);
  tsr_buffer_destroy(zero);
  tsr_buffer_destroy(right);
  tsr_buffer_destroy(y);
  tsr_buffer_destroy(z);
done:
  free(zeros);
  free(values);
  free(got);
  free(old);
}

/* A status and a sentence that names the call and both devices. */
static void expect_refusal(tsr_status status, tsr_status want, const char *what, const char *sel_a,
                           const char *sel_b) {
  const char *error = tsr_last_error();
  if (status != want)
    FAIL("%s: status %s, want %s", what, tsr_status_name(status), tsr_status_name(want));
  else if (!strstr(error, sel_a) || !strstr(error, sel_b))
    FAIL("%s: the error does not name %s and %s: \"%s\"", what, sel_a, sel_b, error);
}

static void run_refusals(side *a, side *b) {
  if (a->device == b->device) {
    printf("refusals need two devices; %s twice: nothing to refuse\n", a->selector);
    return;
  }
  tsr_buffer *on_a = buffer_with(a, 64, NULL), *on_b = buffer_with(b, 64, NULL);
  tsr_buffer *also_b = buffer_with(b, 64, NULL);
  if (!on_a || !on_b || !also_b)
    goto done;
  unsigned char host[64];
  expect_refusal(tsr_buffer_write(a->queue, on_b, 0, host, 8), TSR_ERROR_WRONG_DEVICE,
                 "tsr_buffer_write", a->selector, b->selector);
  expect_refusal(tsr_buffer_read(a->queue, on_b, 0, host, 8), TSR_ERROR_WRONG_DEVICE,
                 "tsr_buffer_read", a->selector, b->selector);
  expect_refusal(tsr_buffer_copy(a->queue, on_b, 0, also_b, 0, 8), TSR_ERROR_WRONG_DEVICE,
                 "tsr_buffer_copy on a third device's queue", a->selector, b->selector);
  int64_t shape[2] = {2, 8};
  tsr_softmax_desc softmax = TSR_SOFTMAX_DESC_INIT;
  softmax.x = tsr_tensor_make(on_b, 0, TSR_DTYPE_F32, 2, shape);
  softmax.y = tsr_tensor_make(on_a, 0, TSR_DTYPE_F32, 2, shape);
  expect_refusal(tsr_softmax(a->queue, &softmax), TSR_ERROR_WRONG_DEVICE, "tsr_softmax",
                 a->selector, b->selector);
  if (tsr_queue_wait_event(NULL, NULL) != TSR_ERROR_NULL_ARGUMENT)
    FAIL("tsr_queue_wait_event(NULL, NULL) was not refused");
  /* Nothing refused was queued: a's buffer still holds its guard bytes. */
  unsigned char got[64], want[64];
  memset(want, GUARD, sizeof want);
  if (OK(tsr_buffer_read(a->queue, on_a, 0, got, sizeof got)) && memcmp(got, want, sizeof got))
    FAIL("a refused call changed %s's buffer", a->selector);
  OK(tsr_queue_finish(a->queue));
done:
  tsr_buffer_destroy(on_a);
  tsr_buffer_destroy(on_b);
  tsr_buffer_destroy(also_b);
}

/* Copies and waits still in flight when their queues and then the context
 * go: every destroy waits for them, nothing leaks (the sanitizer builds). */
static void run_teardown(side *a, side *b) {
  enum { BYTES = 4 << 20 };
  unsigned char *data = malloc(BYTES);
  if (!data) {
    FAIL("out of host memory");
    return;
  }
  fill_bytes(data, BYTES, 21);
  tsr_buffer *x = buffer_with(a, BYTES, data), *y = buffer_with(b, BYTES, NULL);
  free(data);
  if (!x || !y)
    return;
  for (int i = 0; i < 4; i++) {
    tsr_event *e = NULL;
    OK(tsr_buffer_copy(a->queue, x, 0, y, 0, BYTES));
    if (OK(tsr_event_record(a->queue, &e)))
      OK(tsr_queue_wait_event(b->queue, e)); /* e stays for the context to destroy */
    OK(tsr_buffer_copy(b->queue, y, 0, x, 0, BYTES));
  }
  tsr_queue_destroy(b->queue);
  b->queue = NULL;
  tsr_buffer_destroy(y); /* x, a's queue and the events go with the context */
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: test_devices A B copies|ordering|teardown|refusals\n");
    return 2;
  }
  tsr_context *context = NULL;
  if (!OK(tsr_context_create(NULL, &context)))
    return 1;
  side a = {.selector = argv[1]}, b = {.selector = argv[2]};
  if (tsr_device_open(context, a.selector, &a.device) != TSR_OK ||
      tsr_device_open(context, b.selector, &b.device) != TSR_OK) {
    printf("SKIPPED: %s or %s is not present\n", a.selector, b.selector);
    tsr_context_destroy(context);
    return 77;
  }
  if (!OK(tsr_queue_create(a.device, &a.queue)) || !OK(tsr_queue_create(b.device, &b.queue))) {
    tsr_context_destroy(context);
    return 1;
  }
  const char *which = argv[3];
  if (!strcmp(which, "copies"))
    run_copies(&a, &b);
  else if (!strcmp(which, "ordering"))
    run_ordering(&a, &b);
  else if (!strcmp(which, "refusals"))
    run_refusals(&a, &b);
  else if (!strcmp(which, "teardown"))
    run_teardown(&a, &b);
  else {
    fprintf(stderr, "unknown case %s\n", which);
    failures++;
  }
  tsr_context_destroy(context);
  if (failures)
    fprintf(stderr, "%d failure(s)\n", failures);
  else
    printf("%s %s %s: passed\n", a.selector, b.selector, which);
  return failures ? 1 : 0;
}
