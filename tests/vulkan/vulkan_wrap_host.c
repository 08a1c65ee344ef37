/* SPDX-License-Identifier: Apache-2.0 */
/* tsr_buffer_wrap_host on vulkan:0 (VK_EXT_external_memory_host; lavapipe
 * in CI), through the public API:
 * - zero copy: an rmsnorm on a malloc'ed array and a gemm on an array that
 *   starts 4 bytes past a page give hand-computed values in the caller's
 *   memory with no buffer_read, and the caller's own change to the input is
 *   seen by the next op with no buffer_write;
 * - writes, reads and copies on wrapped memory that does not start on a
 *   16-byte boundary (the shader copy takes only whole 16-byte units of
 *   both sides), with an allocated buffer on the other end;
 * - destroying the buffer leaves the memory (and what the ops wrote) to the
 *   caller, who frees it;
 * - bad input: NULL pointer, zero bytes, a CUDA pointer.
 * Run with and without TESSERA_VULKAN_NO_MAPPING (reads and writes through
 * the staging copies). Exit 77 (skipped) without a Vulkan device, or when
 * the device lacks the extension (after checking that wrap says so). */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/tessera.h"

enum { EXIT_SKIP = 77, PAGE = 4096 };

static int failures;
static tsr_device *device;
static tsr_queue *queue;

#define EXPECT(condition, ...)                                                                     \
  do {                                                                                             \
    if (!(condition)) {                                                                            \
      fprintf(stdout, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #condition);                         \
      fprintf(stdout, __VA_ARGS__);                                                                \
      fprintf(stdout, " (last error: %s)\n", tsr_last_error());                                    \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

static void die(const char *what, tsr_status status) {
  fprintf(stdout, "FAIL: %s: %s: %s\n", what, tsr_status_name(status), tsr_last_error());
  exit(1);
}

static tsr_buffer *wrap(void *pointer, size_t bytes) {
  tsr_buffer *buffer = NULL;
  tsr_status status = tsr_buffer_wrap_host(device, pointer, bytes, &buffer);
  if (status != TSR_OK)
    die("tsr_buffer_wrap_host", status);
  return buffer;
}

static void finish(const char *what) {
  tsr_status status = tsr_queue_finish(queue);
  if (status != TSR_OK)
    die(what, status);
}

static void expect_near(const char *what, const float *got, const float *want, int count) {
  for (int i = 0; i < count; i++)
    EXPECT(fabsf(got[i] - want[i]) <= 1e-4f * (1.0f + fabsf(want[i])), "%s[%d] = %g, want %g", what,
           i, (double)got[i], (double)want[i]);
}

/* x [2, 4], weight [4], y [2, 4] in one malloc'ed array. Row [3, 4, 0, 0]:
 * mean of squares 25/4, rms 2.5. */
static void test_rmsnorm(void) {
  float *memory = malloc(20 * sizeof(float));
  float *x = memory, *weight = memory + 8, *y = memory + 12;
  const float x0[8] = {3, 4, 0, 0, 1, 1, 1, 1}, w0[4] = {1, 1, 2, 0.5f};
  memcpy(x, x0, sizeof x0);
  memcpy(weight, w0, sizeof w0);
  for (int i = 0; i < 8; i++)
    y[i] = NAN;
  tsr_buffer *buffer = wrap(memory, 20 * sizeof(float));
  const int64_t shape[2] = {2, 4}, n = 4;
  tsr_rmsnorm_desc desc = TSR_RMSNORM_DESC_INIT;
  desc.x = tsr_tensor_make(buffer, 0, TSR_DTYPE_F32, 2, shape);
  desc.weight = tsr_tensor_make(buffer, 8 * sizeof(float), TSR_DTYPE_F32, 1, &n);
  desc.y = tsr_tensor_make(buffer, 12 * sizeof(float), TSR_DTYPE_F32, 2, shape);
  tsr_status status = tsr_rmsnorm(queue, &desc);
  EXPECT(status == TSR_OK, "tsr_rmsnorm: %s", tsr_status_name(status));
  finish("finish after rmsnorm");
  const float want0[8] = {1.2f, 1.6f, 0, 0, 1, 1, 2, 0.5f};
  expect_near("rmsnorm y in the caller's array", y, want0, 8);

  x[0] = 0, x[1] = 0, x[2] = 3, x[3] = 4; /* the caller's own change */
  x[4] = 2, x[5] = 0, x[6] = 0, x[7] = 0;
  for (int i = 0; i < 8; i++)
    y[i] = NAN;
  status = tsr_rmsnorm(queue, &desc);
  EXPECT(status == TSR_OK, "second tsr_rmsnorm: %s", tsr_status_name(status));
  finish("finish after the second rmsnorm");
  const float want1[8] = {0, 0, 2.4f, 0.8f, 2, 0, 0, 0};
  expect_near("rmsnorm y after the caller changed x", y, want1, 8);
  tsr_buffer_destroy(buffer);
  expect_near("y after tsr_buffer_destroy", y, want1, 8);
  free(memory);
}

/* d = a b, a [2, 3], b [3, 2], d [2, 2], 4 bytes past a page. */
static void test_gemm(void) {
  char *memory = aligned_alloc(PAGE, 2 * PAGE);
  memset(memory, 0, 2 * PAGE);
  float *base = (float *)(void *)(memory + 4);
  float *a = base, *b = base + 6, *d = base + 12;
  const float a0[6] = {1, 2, 3, 4, 5, 6}, b0[6] = {7, 8, 9, 10, 11, 12};
  memcpy(a, a0, sizeof a0);
  memcpy(b, b0, sizeof b0);
  for (int i = 0; i < 4; i++)
    d[i] = NAN;
  tsr_buffer *buffer = wrap(base, 16 * sizeof(float));
  const int64_t a_shape[2] = {2, 3}, b_shape[2] = {3, 2}, d_shape[2] = {2, 2};
  tsr_gemm_desc desc = TSR_GEMM_DESC_INIT;
  desc.a = tsr_tensor_make(buffer, 0, TSR_DTYPE_F32, 2, a_shape);
  desc.b = tsr_tensor_make(buffer, 6 * sizeof(float), TSR_DTYPE_F32, 2, b_shape);
  desc.d = tsr_tensor_make(buffer, 12 * sizeof(float), TSR_DTYPE_F32, 2, d_shape);
  tsr_status status = tsr_gemm(queue, &desc);
  EXPECT(status == TSR_OK, "tsr_gemm 4 bytes past a page: %s", tsr_status_name(status));
  finish("finish after gemm");
  const float want0[4] = {58, 64, 139, 154};
  expect_near("gemm d", d, want0, 4);
  a[0] = 2;
  b[5] = 0;
  for (int i = 0; i < 4; i++)
    d[i] = NAN;
  status = tsr_gemm(queue, &desc);
  EXPECT(status == TSR_OK, "second tsr_gemm: %s", tsr_status_name(status));
  finish("finish after the second gemm");
  const float want1[4] = {65, 36, 139, 82};
  expect_near("gemm d after the caller changed a and b", d, want1, 4);
  /* the import covers whole pages around the array: nothing else written */
  for (int i = 0; i < 4; i++)
    EXPECT(memory[i] == 0, "byte %d before the array is %d", i, memory[i]);
  for (int i = 4 + 16 * (int)sizeof(float); i < 2 * PAGE; i++)
    if (memory[i] != 0) {
      EXPECT(memory[i] == 0, "byte %d after the array is %d", i, memory[i]);
      break;
    }
  tsr_buffer_destroy(buffer);
  free(memory);
}

/* Transfers on memory 4 bytes past a page, against an allocated buffer. */
static void test_transfers(void) {
  unsigned char *memory = aligned_alloc(PAGE, PAGE);
  memset(memory, 0xee, PAGE);
  unsigned char *start = memory + 4;
  tsr_buffer *wrapped = wrap(start, 256);
  tsr_buffer *allocated = NULL;
  tsr_status status = tsr_buffer_create(device, 256, &allocated);
  if (status != TSR_OK)
    die("tsr_buffer_create", status);
  unsigned char pattern[256];
  for (int i = 0; i < 256; i++)
    pattern[i] = (unsigned char)(i * 7 + 1);
  status = tsr_buffer_write(queue, wrapped, 0, pattern, sizeof pattern);
  EXPECT(status == TSR_OK && memcmp(start, pattern, sizeof pattern) == 0,
         "a write lands in the caller's memory: %s", tsr_status_name(status));
  EXPECT(memory[0] == 0xee && memory[260] == 0xee, "the write stayed inside the range");
  /* offset 0 (address 4 past a page): not whole 16-byte units, a plain copy */
  status = tsr_buffer_copy(queue, wrapped, 0, allocated, 0, 64);
  unsigned char back[64];
  if (status == TSR_OK)
    status = tsr_buffer_read(queue, allocated, 0, back, sizeof back);
  EXPECT(status == TSR_OK && memcmp(back, pattern, 64) == 0,
         "copy from wrapped offset 0: %s (first byte %u, want %u)", tsr_status_name(status),
         back[0], pattern[0]);
  /* offset 12 (address 16 past a page): whole units, the shader copy */
  status = tsr_buffer_copy(queue, wrapped, 12, allocated, 64, 64);
  if (status == TSR_OK)
    status = tsr_buffer_read(queue, allocated, 64, back, sizeof back);
  EXPECT(status == TSR_OK && memcmp(back, pattern + 12, 64) == 0,
         "copy from wrapped offset 12: %s (first byte %u, want %u)", tsr_status_name(status),
         back[0], pattern[12]);
  /* into the wrapped memory, then read by the caller directly */
  status = tsr_buffer_copy(queue, allocated, 0, wrapped, 128, 64);
  if (status == TSR_OK)
    finish("finish after the copy into wrapped memory");
  EXPECT(status == TSR_OK && memcmp(start + 128, pattern, 64) == 0, "copy into wrapped memory: %s",
         tsr_status_name(status));
  status = tsr_buffer_read(queue, wrapped, 100, back, 16);
  EXPECT(status == TSR_OK && memcmp(back, pattern + 100, 16) == 0, "read of wrapped memory: %s",
         tsr_status_name(status));
  tsr_buffer_destroy(allocated);
  tsr_buffer_destroy(wrapped);
  EXPECT(memory[0] == 0xee && memcmp(start + 128, pattern, 64) == 0,
         "the memory is the caller's after tsr_buffer_destroy");
  free(memory);
}

static void test_bad_input(void) {
  float value = 0;
  tsr_buffer *buffer = NULL;
  tsr_status status = tsr_buffer_wrap_host(device, NULL, 4, &buffer);
  EXPECT(status == TSR_ERROR_NULL_ARGUMENT && !buffer, "NULL pointer: %s", tsr_status_name(status));
  status = tsr_buffer_wrap_host(device, &value, 0, &buffer);
  EXPECT(status == TSR_ERROR_BAD_SIZE && !buffer, "zero bytes: %s", tsr_status_name(status));
  status = tsr_buffer_wrap_cuda(device, (uint64_t)(uintptr_t)&value, sizeof value, &buffer);
  EXPECT(status == TSR_ERROR_UNSUPPORTED && !buffer && strstr(tsr_last_error(), "kind = 2"),
         "a CUDA pointer on vulkan: %s", tsr_status_name(status));
}

int main(void) {
  tsr_context *context = NULL;
  tsr_status status = tsr_context_create(NULL, &context);
  if (status != TSR_OK)
    die("tsr_context_create", status);
  if (tsr_device_open(context, "vulkan:0", &device) != TSR_OK) {
    printf("SKIPPED: no Vulkan device\n");
    tsr_context_destroy(context);
    return EXIT_SKIP;
  }
  if ((status = tsr_queue_create(device, &queue)) != TSR_OK)
    die("tsr_queue_create", status);
  float probe[4] = {0};
  tsr_buffer *buffer = NULL;
  status = tsr_buffer_wrap_host(device, probe, sizeof probe, &buffer);
  if (status == TSR_ERROR_UNSUPPORTED) {
    int says = strstr(tsr_last_error(), "VK_EXT_external_memory_host") != NULL;
    printf("%s: %s\n", says ? "SKIPPED" : "FAIL", tsr_last_error());
    tsr_queue_destroy(queue);
    tsr_context_destroy(context);
    return says ? EXIT_SKIP : 1;
  }
  if (status != TSR_OK)
    die("tsr_buffer_wrap_host of a small array", status);
  tsr_buffer_destroy(buffer);
  test_rmsnorm();
  test_gemm();
  test_transfers();
  test_bad_input();
  tsr_queue_destroy(queue);
  tsr_context_destroy(context);
  if (failures) {
    printf("vulkan_wrap_host: %d failure(s)\n", failures);
    return 1;
  }
  printf("vulkan_wrap_host: all passed\n");
  return 0;
}
