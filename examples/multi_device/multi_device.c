/* SPDX-License-Identifier: Apache-2.0 */
/* Two devices working on one model, pipeline style: device A computes
 * h = x W1, copies h to device B, and B computes y = h W2 once the copy has
 * landed, ordered by an event of A's queue that B's queue waits for. The
 * host thread never waits in between. y is checked against a double
 * computation, then a large copy from A to B is timed with A's events.
 *
 *   tessera-multi-device-example [A [B [MiB]]]   (default: devices 0 and 1, 256 MiB)
 *
 * A and B may be any two devices, of one plugin (cuda:0, cuda:1: peer to
 * peer) or of two (cuda:0, vulkan:0; cpu:0, vulkan:0: staged through host
 * memory). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

enum { M = 64, K = 256, H = 128, N = 96 };

static int failed(const char *what) {
  fprintf(stderr, "%s: %s\n", what, tsr_last_error());
  return 1;
}
#define TRY(call)                                                                                  \
  do {                                                                                             \
    if ((call) != TSR_OK)                                                                          \
      return failed(#call);                                                                        \
  } while (0)

static tsr_buffer *upload(tsr_device *device, tsr_queue *queue, const float *data, size_t count) {
  tsr_buffer *buffer = NULL;
  if (tsr_buffer_create(device, count * sizeof(float), &buffer) != TSR_OK)
    return NULL;
  if (data && tsr_buffer_write(queue, buffer, 0, data, count * sizeof(float)) != TSR_OK)
    return NULL;
  return buffer;
}

static int pipeline(tsr_device *a, tsr_queue *qa, tsr_device *b, tsr_queue *qb) {
  static float x[M * K], w1[K * H], w2[H * N], y[M * N];
  for (int i = 0; i < M * K; i++)
    x[i] = (float)((i * 7) % 11 - 5) / 8.0f;
  for (int i = 0; i < K * H; i++)
    w1[i] = (float)((i * 5) % 13 - 6) / 16.0f;
  for (int i = 0; i < H * N; i++)
    w2[i] = (float)((i * 3) % 7 - 3) / 8.0f;
  tsr_buffer *xb = upload(a, qa, x, M * K), *w1b = upload(a, qa, w1, K * H);
  tsr_buffer *ha = upload(a, qa, NULL, M * H), *hb = upload(b, qb, NULL, M * H);
  tsr_buffer *w2b = upload(b, qb, w2, H * N), *yb = upload(b, qb, NULL, M * N);
  if (!xb || !w1b || !ha || !hb || !w2b || !yb)
    return failed("allocating and uploading");

  tsr_gemm_desc first = TSR_GEMM_DESC_INIT;
  first.a = tsr_tensor_make(xb, 0, TSR_DTYPE_F32, 2, (int64_t[]){M, K});
  first.b = tsr_tensor_make(w1b, 0, TSR_DTYPE_F32, 2, (int64_t[]){K, H});
  first.d = tsr_tensor_make(ha, 0, TSR_DTYPE_F32, 2, (int64_t[]){M, H});
  TRY(tsr_gemm(qa, &first));
  /* On A's queue: after the GEMM, before whatever A does next. */
  TRY(tsr_buffer_copy(qa, ha, 0, hb, 0, M * H * sizeof(float)));
  tsr_event *sent = NULL;
  TRY(tsr_event_record(qa, &sent));
  TRY(tsr_queue_wait_event(qb, sent)); /* B's next op waits; this thread does not */
  tsr_event_destroy(sent);
  tsr_gemm_desc second = TSR_GEMM_DESC_INIT;
  second.a = tsr_tensor_make(hb, 0, TSR_DTYPE_F32, 2, (int64_t[]){M, H});
  second.b = tsr_tensor_make(w2b, 0, TSR_DTYPE_F32, 2, (int64_t[]){H, N});
  second.d = tsr_tensor_make(yb, 0, TSR_DTYPE_F32, 2, (int64_t[]){M, N});
  TRY(tsr_gemm(qb, &second));
  TRY(tsr_buffer_read(qb, yb, 0, y, sizeof y));
  TRY(tsr_queue_finish(qa));
  TRY(tsr_queue_finish(qb));

  double worst = 0.0;
  for (int i = 0; i < M; i++) {
    for (int j = 0; j < N; j++) {
      double want = 0.0;
      for (int h = 0; h < H; h++) {
        double hidden = 0.0;
        for (int k = 0; k < K; k++)
          hidden += (double)x[i * K + k] * w1[k * H + h];
        want += hidden * w2[h * N + j];
      }
      double error = fabs(y[i * N + j] - want) / (1.0 + fabs(want));
      worst = error > worst ? error : worst;
    }
  }
  tsr_buffer *all[] = {xb, w1b, ha, hb, w2b, yb};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    tsr_buffer_destroy(all[i]);
  printf("pipeline: x W1 on A, h copied to B, h W2 on B: max error = %.3g (%s)\n", worst,
         worst < 1e-3 ? "ok" : "FAILED");
  return worst < 1e-3 ? 0 : 1;
}

/* A copy of `mib` MiB from A to B on A's queue, timed with A's events
 * (median of 5 after one untimed), every byte checked once. */
static int timed_copy(tsr_device *a, tsr_queue *qa, tsr_device *b, tsr_queue *qb, size_t mib) {
  size_t bytes = mib << 20;
  tsr_buffer *src = NULL, *dst = NULL;
  unsigned char *host = malloc(bytes), *back = malloc(bytes);
  if (!host || !back) {
    fprintf(stderr, "out of host memory for %zu MiB\n", mib);
    return 1;
  }
  for (size_t i = 0; i < bytes; i++)
    host[i] = (unsigned char)(i * 2654435761u >> 24);
  TRY(tsr_buffer_create(a, bytes, &src));
  TRY(tsr_buffer_create(b, bytes, &dst));
  TRY(tsr_buffer_write(qa, src, 0, host, bytes));
  double ms[5];
  for (int run = -1; run < 5; run++) {
    tsr_event *start = NULL, *end = NULL;
    TRY(tsr_event_record(qa, &start));
    TRY(tsr_buffer_copy(qa, src, 0, dst, 0, bytes));
    TRY(tsr_event_record(qa, &end));
    if (run >= 0)
      TRY(tsr_event_elapsed_ms(start, end, &ms[run]));
    else
      TRY(tsr_event_wait(end));
    tsr_event_destroy(start);
    tsr_event_destroy(end);
  }
  tsr_event *done = NULL;
  TRY(tsr_event_record(qa, &done));
  TRY(tsr_queue_wait_event(qb, done));
  tsr_event_destroy(done);
  TRY(tsr_buffer_read(qb, dst, 0, back, bytes));
  for (int i = 0; i < 5; i++) /* a few values: sort for the median */
    for (int j = i + 1; j < 5; j++)
      if (ms[j] < ms[i]) {
        double t = ms[i];
        ms[i] = ms[j];
        ms[j] = t;
      }
  bool same = memcmp(host, back, bytes) == 0;
  printf("copy A -> B: %zu MiB in %.3f ms (median of 5) = %.1f GB/s, bytes %s\n", mib, ms[2],
         (double)bytes / (ms[2] * 1e-3) / 1e9, same ? "ok" : "DIFFER");
  tsr_buffer_destroy(src);
  tsr_buffer_destroy(dst);
  free(host);
  free(back);
  return same ? 0 : 1;
}

int main(int argc, char **argv) {
  tsr_context *context = NULL;
  TRY(tsr_context_create(NULL, &context));
  uint32_t count = 0;
  TRY(tsr_device_count(context, &count));
  tsr_device *a = NULL, *b = NULL;
  if (argc > 1)
    TRY(tsr_device_open(context, argv[1], &a));
  else
    TRY(tsr_device_get(context, 0, &a));
  if (argc > 2)
    TRY(tsr_device_open(context, argv[2], &b));
  else
    TRY(tsr_device_get(context, count > 1 ? 1 : 0, &b));
  size_t mib = argc > 3 ? (size_t)strtoul(argv[3], NULL, 10) : 256;
  tsr_device_info ia = {.struct_size = sizeof ia}, ib = {.struct_size = sizeof ib};
  TRY(tsr_device_get_info(a, &ia));
  TRY(tsr_device_get_info(b, &ib));
  printf("A = %s (%s), B = %s (%s)%s\n", ia.selector, ia.name, ib.selector, ib.name,
         strcmp(ia.physical_id, ib.physical_id) ? "" : ", one physical device");
  tsr_queue *qa = NULL, *qb = NULL;
  TRY(tsr_queue_create(a, &qa));
  TRY(tsr_queue_create(b, &qb));
  int rc = pipeline(a, qa, b, qb);
  if (rc == 0 && mib > 0)
    rc = timed_copy(a, qa, b, qb, mib);
  tsr_context_destroy(context);
  return rc;
}
