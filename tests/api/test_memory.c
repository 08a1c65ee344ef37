/* SPDX-License-Identifier: Apache-2.0 */
/* Buffers, queues and events through the CPU device. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_test.h"

enum { BYTES = 4096 };

static void fill_bytes(unsigned char *data, size_t bytes, unsigned seed) {
  for (size_t i = 0; i < bytes; i++)
    data[i] = (unsigned char)(i * 7u + seed * 13u + 1u);
}

static void test_buffer_create(tsr_device *device) {
  tsr_buffer *buffer = NULL;
  CHECK_STATUS(tsr_buffer_create(device, 0, &buffer), TSR_ERROR_BAD_SIZE);
  CHECK_ERROR("tsr_buffer_create", "bytes = 0");
  CHECK(buffer == NULL);
  CHECK_STATUS(tsr_buffer_create(device, SIZE_MAX, &buffer), TSR_ERROR_BAD_SIZE);
  CHECK(buffer == NULL);
  CHECK_STATUS(tsr_buffer_create(NULL, 16, &buffer), TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_buffer_create", "device");
  CHECK_STATUS(tsr_buffer_create(device, 16, NULL), TSR_ERROR_NULL_ARGUMENT);

  CHECK_STATUS(tsr_buffer_create(device, 1, &buffer), TSR_OK);
  size_t size = 0;
  CHECK_STATUS(tsr_buffer_size(buffer, &size), TSR_OK);
  CHECK_INT(size, 1);
  tsr_buffer_destroy(buffer);

  buffer = NULL;
  CHECK_STATUS(tsr_buffer_create(device, BYTES, &buffer), TSR_OK);
  REQUIRE(buffer != NULL);
  CHECK_STATUS(tsr_buffer_size(buffer, &size), TSR_OK);
  CHECK_INT(size, BYTES);
  tsr_device *owner = NULL;
  CHECK_STATUS(tsr_buffer_device(buffer, &owner), TSR_OK);
  CHECK(owner == device);
  CHECK_STATUS(tsr_buffer_size(NULL, &size), TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_buffer_size", "buffer");
  CHECK_STATUS(tsr_buffer_size(buffer, NULL), TSR_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(tsr_buffer_device(NULL, &owner), TSR_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(tsr_buffer_device(buffer, NULL), TSR_ERROR_NULL_ARGUMENT);

  /* The mapping is the buffer's memory and stays the same pointer. */
  void *host = NULL;
  CHECK_STATUS(tsr_buffer_map(buffer, &host), TSR_OK);
  CHECK(host != NULL);
  void *again = NULL;
  CHECK_STATUS(tsr_buffer_map(buffer, &again), TSR_OK);
  CHECK(again == host);
  CHECK_STATUS(tsr_buffer_map(NULL, &host), TSR_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(tsr_buffer_map(buffer, NULL), TSR_ERROR_NULL_ARGUMENT);
  tsr_buffer_destroy(buffer);
  tsr_buffer_destroy(NULL); /* allowed */
}

static void test_transfers(tsr_device *device, tsr_queue *queue) {
  tsr_buffer *first = NULL, *second = NULL;
  REQUIRE_OK(tsr_buffer_create(device, BYTES, &first));
  REQUIRE_OK(tsr_buffer_create(device, BYTES, &second));
  unsigned char *source = malloc(BYTES), *back = malloc(BYTES);
  REQUIRE(source != NULL && back != NULL);

  /* write, read back */
  fill_bytes(source, BYTES, 1);
  CHECK_STATUS(tsr_buffer_write(queue, first, 0, source, BYTES), TSR_OK);
  memset(back, 0, BYTES);
  CHECK_STATUS(tsr_buffer_read(queue, first, 0, back, BYTES), TSR_OK);
  CHECK(memcmp(back, source, BYTES) == 0);

  /* partial write at an offset leaves the rest */
  unsigned char patch[100];
  fill_bytes(patch, sizeof patch, 9);
  CHECK_STATUS(tsr_buffer_write(queue, first, 1000, patch, sizeof patch), TSR_OK);
  CHECK_STATUS(tsr_buffer_read(queue, first, 0, back, BYTES), TSR_OK);
  memcpy(source + 1000, patch, sizeof patch);
  CHECK(memcmp(back, source, BYTES) == 0);
  unsigned char tail[10];
  CHECK_STATUS(tsr_buffer_read(queue, first, BYTES - 10, tail, sizeof tail), TSR_OK);
  CHECK(memcmp(tail, source + BYTES - 10, sizeof tail) == 0);

  /* the mapping sees the same bytes after the queue finished */
  CHECK_STATUS(tsr_queue_finish(queue), TSR_OK);
  void *host = NULL;
  CHECK_STATUS(tsr_buffer_map(first, &host), TSR_OK);
  if (host)
    CHECK(memcmp(host, source, BYTES) == 0);
  /* and writes through the mapping are read back */
  if (host) {
    ((unsigned char *)host)[17] ^= 0xffu;
    source[17] ^= 0xffu;
    CHECK_STATUS(tsr_buffer_read(queue, first, 0, back, BYTES), TSR_OK);
    CHECK(memcmp(back, source, BYTES) == 0);
  }

  /* device copy between buffers and within one buffer */
  unsigned char *other = malloc(BYTES);
  REQUIRE(other != NULL);
  fill_bytes(other, BYTES, 3);
  CHECK_STATUS(tsr_buffer_write(queue, second, 0, other, BYTES), TSR_OK);
  CHECK_STATUS(tsr_buffer_copy(queue, first, 256, second, 512, 1024), TSR_OK);
  CHECK_STATUS(tsr_buffer_read(queue, second, 0, back, BYTES), TSR_OK);
  memcpy(other + 512, source + 256, 1024);
  CHECK(memcmp(back, other, BYTES) == 0);
  CHECK_STATUS(tsr_buffer_copy(queue, second, 0, second, 2048, 2048), TSR_OK);
  CHECK_STATUS(tsr_buffer_read(queue, second, 0, back, BYTES), TSR_OK);
  memcpy(other + 2048, other, 2048);
  CHECK(memcmp(back, other, BYTES) == 0);
  CHECK_STATUS(tsr_buffer_copy(queue, first, 0, second, 0, 0), TSR_OK);

  /* Out-of-range requests fail and change nothing. */
  CHECK_STATUS(tsr_buffer_write(queue, first, BYTES - 4, source, 8), TSR_ERROR_OUT_OF_BOUNDS);
  CHECK_ERROR("tsr_buffer_write", "4096");
  CHECK_STATUS(tsr_buffer_write(queue, first, BYTES + 1, source, 0), TSR_ERROR_OUT_OF_BOUNDS);
  CHECK_STATUS(tsr_buffer_write(queue, first, SIZE_MAX, source, 2), TSR_ERROR_OUT_OF_BOUNDS);
  CHECK_STATUS(tsr_buffer_read(queue, first, 1, back, BYTES), TSR_ERROR_OUT_OF_BOUNDS);
  CHECK_ERROR("tsr_buffer_read", "4096");
  CHECK_STATUS(tsr_buffer_read(queue, first, SIZE_MAX - 1, back, 4), TSR_ERROR_OUT_OF_BOUNDS);
  CHECK_STATUS(tsr_buffer_copy(queue, first, BYTES - 10, second, 0, 11), TSR_ERROR_OUT_OF_BOUNDS);
  CHECK_ERROR("tsr_buffer_copy", "src");
  CHECK_STATUS(tsr_buffer_copy(queue, first, 0, second, BYTES - 10, 11), TSR_ERROR_OUT_OF_BOUNDS);
  CHECK_ERROR("tsr_buffer_copy", "dst");
  CHECK_STATUS(tsr_buffer_copy(queue, first, 0, first, 100, 200), TSR_ERROR_OVERLAP);
  CHECK_ERROR("tsr_buffer_copy", "overlap");
  CHECK_STATUS(tsr_buffer_read(queue, first, 0, back, BYTES), TSR_OK);
  CHECK(memcmp(back, source, BYTES) == 0);
  CHECK_STATUS(tsr_buffer_read(queue, second, 0, back, BYTES), TSR_OK);
  CHECK(memcmp(back, other, BYTES) == 0);

  /* NULL arguments name themselves. */
  CHECK_STATUS(tsr_buffer_write(NULL, first, 0, source, 4), TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_buffer_write", "queue");
  CHECK_STATUS(tsr_buffer_write(queue, NULL, 0, source, 4), TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_buffer_write", "buffer");
  CHECK_STATUS(tsr_buffer_write(queue, first, 0, NULL, 4), TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_buffer_write", "src");
  CHECK_STATUS(tsr_buffer_read(queue, first, 0, NULL, 4), TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_buffer_read", "dst");
  CHECK_STATUS(tsr_buffer_copy(queue, NULL, 0, second, 0, 4), TSR_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(tsr_buffer_copy(queue, first, 0, NULL, 0, 4), TSR_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(tsr_queue_finish(NULL), TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_queue_finish", "queue");

  free(other);
  free(source);
  free(back);
  tsr_buffer_destroy(first);
  tsr_buffer_destroy(second);
}

/* A buffer of another context's device cannot be used with this queue. */
static void test_wrong_device(tsr_queue *queue) {
  tsr_context *other_context = api_context();
  tsr_device *other = api_cpu_device(other_context);
  tsr_buffer *foreign = NULL;
  REQUIRE_OK(tsr_buffer_create(other, 64, &foreign));
  unsigned char data[16] = {0};
  CHECK_STATUS(tsr_buffer_write(queue, foreign, 0, data, sizeof data), TSR_ERROR_WRONG_DEVICE);
  CHECK_ERROR("tsr_buffer_write", "buffer");
  CHECK_STATUS(tsr_buffer_read(queue, foreign, 0, data, sizeof data), TSR_ERROR_WRONG_DEVICE);
  tsr_context_destroy(other_context); /* frees `foreign` too */
}

static void test_queues_and_events(tsr_device *device) {
  tsr_queue *queue = NULL;
  CHECK_STATUS(tsr_queue_create(NULL, &queue), TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_queue_create", "device");
  CHECK_STATUS(tsr_queue_create(device, NULL), TSR_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(tsr_queue_create(device, &queue), TSR_OK);
  REQUIRE(queue != NULL);
  CHECK_STATUS(tsr_queue_finish(queue), TSR_OK);

  /* Time some real work between two events. */
  enum { N = 64 };
  tsr_buffer *buffer = NULL;
  REQUIRE_OK(tsr_buffer_create(device, 3 * N * N * sizeof(float), &buffer));
  float *values = malloc(3 * N * N * sizeof(float));
  REQUIRE(values != NULL);
  for (int i = 0; i < 3 * N * N; i++)
    values[i] = (float)(i % 13) * 0.125f;
  REQUIRE_OK(tsr_buffer_write(queue, buffer, 0, values, 3 * N * N * sizeof(float)));
  free(values);

  tsr_event *start = NULL, *end = NULL;
  CHECK_STATUS(tsr_event_record(queue, &start), TSR_OK);
  tsr_gemm_desc gemm = TSR_GEMM_DESC_INIT;
  gemm.a = api_tensor(buffer, 0, TSR_DTYPE_F32, 2, N, N, 0, 0);
  gemm.b = api_tensor(buffer, N * N * sizeof(float), TSR_DTYPE_F32, 2, N, N, 0, 0);
  gemm.d = api_tensor(buffer, 2 * N * N * sizeof(float), TSR_DTYPE_F32, 2, N, N, 0, 0);
  CHECK_STATUS(tsr_gemm(queue, &gemm), TSR_OK);
  CHECK_STATUS(tsr_event_record(queue, &end), TSR_OK);
  REQUIRE(start != NULL && end != NULL);
  CHECK_STATUS(tsr_event_wait(end), TSR_OK);
  CHECK_STATUS(tsr_event_wait(start), TSR_OK);
  double ms = -1.0;
  CHECK_STATUS(tsr_event_elapsed_ms(start, end, &ms), TSR_OK);
  CHECK(ms >= 0.0);
  CHECK(ms < 60000.0);
  double same = -1.0;
  CHECK_STATUS(tsr_event_elapsed_ms(start, start, &same), TSR_OK);
  CHECK(same >= 0.0);
  CHECK_STATUS(tsr_event_elapsed_ms(NULL, end, &ms), TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_event_elapsed_ms", "start");
  CHECK_STATUS(tsr_event_elapsed_ms(start, end, NULL), TSR_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(tsr_event_wait(NULL), TSR_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(tsr_event_record(NULL, &start), TSR_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(tsr_event_record(queue, NULL), TSR_ERROR_NULL_ARGUMENT);
  tsr_event_destroy(start);
  tsr_event_destroy(end);
  tsr_event_destroy(NULL);

  /* Two queues on one device work independently. */
  tsr_queue *second = NULL;
  CHECK_STATUS(tsr_queue_create(device, &second), TSR_OK);
  float one = 1.5f, back = 0.0f;
  CHECK_STATUS(tsr_buffer_write(second, buffer, 0, &one, sizeof one), TSR_OK);
  CHECK_STATUS(tsr_queue_finish(second), TSR_OK);
  CHECK_STATUS(tsr_buffer_read(queue, buffer, 0, &back, sizeof back), TSR_OK);
  CHECK(back == 1.5f);
  tsr_queue_destroy(second);

  tsr_buffer_destroy(buffer);
  tsr_queue_destroy(queue);
  tsr_queue_destroy(NULL);
}

/* Objects left alive are freed by tsr_context_destroy (run under ASan, a
 * leak here fails the test). */
static void test_context_owns_objects(void) {
  tsr_context *context = api_context();
  tsr_device *device = api_cpu_device(context);
  tsr_queue *queue = NULL;
  tsr_buffer *buffer = NULL;
  tsr_event *event = NULL;
  CHECK_STATUS(tsr_queue_create(device, &queue), TSR_OK);
  CHECK_STATUS(tsr_buffer_create(device, 128, &buffer), TSR_OK);
  CHECK_STATUS(tsr_event_record(queue, &event), TSR_OK);
  tsr_context_destroy(context);
}

int main(void) {
  tsr_context *context = api_context();
  tsr_device *device = api_cpu_device(context);
  tsr_queue *queue = NULL;
  REQUIRE_OK(tsr_queue_create(device, &queue));

  test_buffer_create(device);
  test_transfers(device, queue);
  test_wrong_device(queue);
  test_queues_and_events(device);
  test_context_owns_objects();

  tsr_queue_destroy(queue);
  tsr_context_destroy(context);
  return api_finish("test_memory");
}
