/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU plugin's wrapped host memory (tsr_buffer_wrap_host), through the
 * public API:
 * - ops read and write the caller's array in place: an rmsnorm on a malloc'ed
 *   array and a gemm on an array that starts 4 bytes past a 64-byte line (bf16
 *   rmsnorm 2 bytes past one) give hand-computed values in the caller's
 *   memory, with no buffer_read; the caller's own change to the input is seen
 *   by the next op with no buffer_write;
 * - tsr_buffer_map gives the caller's pointer; destroying the buffer leaves the
 *   memory (and its contents) to the caller, who frees it;
 * - memory whose address is no multiple of an element size wraps (transfers
 *   work) but an op on it is refused with a sentence naming the tensor;
 * - bad input: NULL pointer, zero bytes, a CUDA pointer on the CPU device.
 * Then the plugin's own table (dlopen'ed, argv[1]): buffer_export gives the
 * host address of an allocated and of a wrapped buffer.
 * usage: cpu_test_wrap_host <libtessera-cpu.so>. Exit 0 on success. */
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/plugin.h>
#include <tessera/tessera.h>

static int failures;

#define EXPECT(condition, ...)                                                                     \
  do {                                                                                             \
    if (!(condition)) {                                                                            \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #condition);                         \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, " (last error: %s)\n", tsr_last_error());                                    \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

static tsr_device *device;
static tsr_queue *queue;

static void die(const char *what, tsr_status status) {
  fprintf(stderr, "test_wrap_host: %s: %s: %s\n", what, tsr_status_name(status), tsr_last_error());
  exit(1);
}

static void expect_near(const char *what, const float *got, const float *want, int count,
                        float tolerance) {
  for (int i = 0; i < count; i++)
    EXPECT(fabsf(got[i] - want[i]) <= tolerance, "%s[%d] = %g, want %g", what, i, (double)got[i],
           (double)want[i]);
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

/* rmsnorm over rows of 4 in a malloc'ed array holding x [2, 4], weight [4]
 * and y [2, 4]. Row [3, 4, 0, 0]: mean of squares 25/4, rms 2.5. */
static void test_rmsnorm_malloc(void) {
  float *memory = malloc(20 * sizeof(float));
  float *x = memory, *weight = memory + 8, *y = memory + 12;
  const float x0[8] = {3, 4, 0, 0, 1, 1, 1, 1};
  const float w0[4] = {1, 1, 2, 0.5f};
  memcpy(x, x0, sizeof x0);
  memcpy(weight, w0, sizeof w0);
  for (int i = 0; i < 8; i++)
    y[i] = NAN;
  tsr_buffer *buffer = wrap(memory, 20 * sizeof(float));

  void *mapped = NULL;
  EXPECT(tsr_buffer_map(buffer, &mapped) == TSR_OK && mapped == memory,
         "tsr_buffer_map gave %p for the caller's %p", mapped, (void *)memory);

  const int64_t shape[2] = {2, 4}, n = 4;
  tsr_rmsnorm_desc desc = TSR_RMSNORM_DESC_INIT;
  desc.x = tsr_tensor_make(buffer, 0, TSR_DTYPE_F32, 2, shape);
  desc.weight = tsr_tensor_make(buffer, 8 * sizeof(float), TSR_DTYPE_F32, 1, &n);
  desc.y = tsr_tensor_make(buffer, 12 * sizeof(float), TSR_DTYPE_F32, 2, shape);
  tsr_status status = tsr_rmsnorm(queue, &desc);
  EXPECT(status == TSR_OK, "tsr_rmsnorm on wrapped memory: %s", tsr_status_name(status));
  finish("tsr_queue_finish after rmsnorm");
  /* row 0: [3, 4, 0, 0] / 2.5 * w; row 1: all ones have rms 1 */
  const float want0[8] = {1.2f, 1.6f, 0, 0, 1, 1, 2, 0.5f};
  expect_near("rmsnorm y (read from the caller's array)", y, want0, 8, 1e-5f);

  /* The caller changes x in place: the next op sees it, no write call. */
  x[0] = 0, x[1] = 0, x[2] = 3, x[3] = 4;
  x[4] = 2, x[5] = 0, x[6] = 0, x[7] = 0;
  for (int i = 0; i < 8; i++)
    y[i] = NAN;
  status = tsr_rmsnorm(queue, &desc);
  EXPECT(status == TSR_OK, "second tsr_rmsnorm: %s", tsr_status_name(status));
  finish("tsr_queue_finish after the second rmsnorm");
  /* row 0: [0, 0, 3, 4] / 2.5 * w; row 1: [2, 0, 0, 0], rms 1 */
  const float want1[8] = {0, 0, 2.4f, 0.8f, 2, 0, 0, 0};
  expect_near("rmsnorm y after the caller changed x", y, want1, 8, 1e-5f);

  /* Destroying the wrapper leaves the memory and its contents to us. */
  float kept[8];
  memcpy(kept, y, sizeof kept);
  tsr_buffer_destroy(buffer);
  EXPECT(memcmp(kept, y, sizeof kept) == 0, "y changed when the buffer was destroyed");
  memory[0] = 1.0f; /* still ours to use (ASan: no use after free) */
  free(memory);     /* and to free (ASan: no double free) */
}

/* gemm d = a b with a [2, 3], b [3, 2], d [2, 2] in an array that starts 4
 * bytes past a 64-byte boundary. */
static void test_gemm_misaligned(void) {
  char *memory = aligned_alloc(64, 128);
  float *base = (float *)(void *)(memory + 4);
  float *a = base, *b = base + 6, *d = base + 12;
  const float a0[6] = {1, 2, 3, 4, 5, 6};
  const float b0[6] = {7, 8, 9, 10, 11, 12};
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
  EXPECT(status == TSR_OK, "tsr_gemm on memory 4 bytes past a line: %s", tsr_status_name(status));
  finish("tsr_queue_finish after gemm");
  /* [1 2 3; 4 5 6] [7 8; 9 10; 11 12] */
  const float want0[4] = {58, 64, 139, 154};
  expect_near("gemm d", d, want0, 4, 1e-4f);

  a[0] = 2; /* row 0 gains [7 8] */
  b[5] = 0; /* column 1 loses 12 * a[., 2] */
  for (int i = 0; i < 4; i++)
    d[i] = NAN;
  status = tsr_gemm(queue, &desc);
  EXPECT(status == TSR_OK, "second tsr_gemm: %s", tsr_status_name(status));
  finish("tsr_queue_finish after the second gemm");
  const float want1[4] = {65, 72 - 36, 139, 154 - 72};
  expect_near("gemm d after the caller changed a and b", d, want1, 4, 1e-4f);
  tsr_buffer_destroy(buffer);
  free(memory);
}

/* bf16 rmsnorm 2 bytes past a 64-byte boundary: element-aligned, so it runs. */
static void test_bf16_two_bytes_in(void) {
  char *memory = aligned_alloc(64, 64);
  uint16_t *x = (uint16_t *)(void *)(memory + 2), *y = x + 4;
  const float x0[4] = {3, 4, 0, 0};
  for (int i = 0; i < 4; i++) {
    x[i] = tsr_f32_to_bf16(x0[i]);
    y[i] = tsr_f32_to_bf16(NAN);
  }
  tsr_buffer *buffer = wrap(x, 8 * sizeof(uint16_t));
  const int64_t shape[1] = {4};
  tsr_rmsnorm_desc desc = TSR_RMSNORM_DESC_INIT;
  desc.x = tsr_tensor_make(buffer, 0, TSR_DTYPE_BF16, 1, shape);
  desc.y = tsr_tensor_make(buffer, 4 * sizeof(uint16_t), TSR_DTYPE_BF16, 1, shape);
  tsr_status status = tsr_rmsnorm(queue, &desc);
  EXPECT(status == TSR_OK, "bf16 tsr_rmsnorm 2 bytes in: %s", tsr_status_name(status));
  finish("tsr_queue_finish after the bf16 rmsnorm");
  float got[4];
  for (int i = 0; i < 4; i++)
    got[i] = tsr_bf16_to_f32(y[i]);
  const float want[4] = {1.2f, 1.6f, 0, 0};
  expect_near("bf16 rmsnorm y", got, want, 4, 1e-2f);
  tsr_buffer_destroy(buffer);
  free(memory);
}

/* f32 data one byte past a line: the buffer is fine for bytes, not for ops. */
static void test_not_element_aligned(void) {
  char *memory = aligned_alloc(64, 64);
  char *start = memory + 1;
  memset(memory, 0, 64);
  tsr_buffer *buffer = wrap(start, 32);
  const float values[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  tsr_status status = tsr_buffer_write(queue, buffer, 0, values, sizeof values);
  EXPECT(status == TSR_OK, "tsr_buffer_write: %s", tsr_status_name(status));
  EXPECT(memcmp(start, values, sizeof values) == 0, "the write did not land in the caller's array");
  float back[8] = {0};
  status = tsr_buffer_read(queue, buffer, 0, back, sizeof back);
  EXPECT(status == TSR_OK && memcmp(back, values, sizeof back) == 0, "tsr_buffer_read: %s",
         tsr_status_name(status));

  const int64_t shape[1] = {4};
  tsr_softmax_desc desc = TSR_SOFTMAX_DESC_INIT;
  desc.x = tsr_tensor_make(buffer, 0, TSR_DTYPE_F32, 1, shape);
  desc.y = tsr_tensor_make(buffer, 4 * sizeof(float), TSR_DTYPE_F32, 1, shape);
  status = tsr_softmax(queue, &desc);
  EXPECT(status == TSR_ERROR_INVALID_VALUE, "softmax on f32 one byte off: %s",
         tsr_status_name(status));
  EXPECT(strstr(tsr_last_error(), "x starts at") &&
             strstr(tsr_last_error(), "element size (4 bytes)"),
         "the message names the tensor and the element size");
  EXPECT(memcmp(start + 16, values + 4, 16) == 0, "the refused op wrote y");
  finish("tsr_queue_finish after the refusal");
  tsr_buffer_destroy(buffer);
  free(memory);
}

static void test_bad_input(void) {
  float value = 0;
  tsr_buffer *buffer = NULL;
  tsr_status status = tsr_buffer_wrap_host(device, NULL, 4, &buffer);
  EXPECT(status == TSR_ERROR_NULL_ARGUMENT && buffer == NULL, "NULL pointer: %s",
         tsr_status_name(status));
  EXPECT(strstr(tsr_last_error(), "tsr_buffer_wrap_host") != NULL, "the call is named");
  status = tsr_buffer_wrap_host(device, &value, 0, &buffer);
  EXPECT(status == TSR_ERROR_BAD_SIZE && buffer == NULL, "zero bytes: %s", tsr_status_name(status));
  EXPECT(strstr(tsr_last_error(), "bytes = 0") != NULL, "the size is named");
  status = tsr_buffer_wrap_cuda(device, (uint64_t)(uintptr_t)&value, sizeof value, &buffer);
  EXPECT(status == TSR_ERROR_UNSUPPORTED && buffer == NULL, "a CUDA pointer on cpu: %s",
         tsr_status_name(status));
  EXPECT(strstr(tsr_last_error(), "kind = 2") != NULL, "the kind is named");
}

/* ---- the plugin's table: buffer_export ---- */

static void host_log(void *handle, int level, const char *fmt, ...) {
  (void)handle, (void)level, (void)fmt;
}
static void host_set_error(void *handle, const char *fmt, ...) {
  (void)handle, (void)fmt;
}
static const char *host_get_env(const char *name) {
  return getenv(name);
}

static void test_export(const char *library) {
  void *handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    fprintf(stderr, "FAIL: dlopen %s: %s\n", library, dlerror());
    failures++;
    return;
  }
  tsr_plugin_entry_fn entry;
  void *symbol = dlsym(handle, TSR_PLUGIN_ENTRY_SYMBOL);
  memcpy(&entry, &symbol, sizeof entry);
  const tsr_plugin_v2 *table = entry ? entry(2) : NULL;
  EXPECT(table &&
             table->struct_size >=
                 offsetof(tsr_plugin_v2, buffer_export) + sizeof table->buffer_export &&
             table->buffer_export,
         "the cpu table has buffer_export");
  if (!table || !table->buffer_export) {
    dlclose(handle);
    return;
  }
  tsr_host_services_v2 host = {sizeof host, 2, host_log, host_set_error, host_get_env, NULL};
  void *plugin = NULL, *dev = NULL, *allocated = NULL, *wrapped = NULL;
  char reason[256];
  if (table->init(&host, &plugin, reason, sizeof reason) != TSR_OK ||
      table->device_open(plugin, 0, &dev) != TSR_OK) {
    fprintf(stderr, "FAIL: cpu plugin init/device_open\n");
    failures++;
    dlclose(handle);
    return;
  }
  char array[40];
  int32_t kind = 0;
  uint64_t address = 0;
  EXPECT(table->buffer_alloc(dev, 100, &allocated) == TSR_OK &&
             table->buffer_export(allocated, &kind, &address) == TSR_OK &&
             kind == TSR_EXTERNAL_HOST_POINTER &&
             address == (uint64_t)(uintptr_t)table->buffer_host_pointer(dev, allocated),
         "export of an allocation: kind %d, address 0x%llx", (int)kind,
         (unsigned long long)address);
  EXPECT(table->buffer_wrap(dev, TSR_EXTERNAL_HOST_POINTER, array + 3, 37, &wrapped) == TSR_OK &&
             table->buffer_export(wrapped, &kind, &address) == TSR_OK &&
             kind == TSR_EXTERNAL_HOST_POINTER && address == (uint64_t)(uintptr_t)(array + 3),
         "export of wrapped memory: kind %d, address 0x%llx for %p", (int)kind,
         (unsigned long long)address, (void *)(array + 3));
  table->buffer_free(dev, wrapped);
  table->buffer_free(dev, allocated);
  table->device_close(dev);
  table->shutdown(plugin);
  dlclose(handle);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s <libtessera-cpu.so>\n", argv[0]);
    return 2;
  }
  tsr_context_options options = TSR_CONTEXT_OPTIONS_INIT;
  options.backends = "cpu";
  tsr_context *context = NULL;
  tsr_status status = tsr_context_create(&options, &context);
  if (status != TSR_OK)
    die("tsr_context_create", status);
  if ((status = tsr_device_open(context, "cpu", &device)) != TSR_OK)
    die("tsr_device_open(cpu)", status);
  if ((status = tsr_queue_create(device, &queue)) != TSR_OK)
    die("tsr_queue_create", status);
  test_rmsnorm_malloc();
  test_gemm_misaligned();
  test_bf16_two_bytes_in();
  test_not_element_aligned();
  test_bad_input();
  tsr_queue_destroy(queue);
  tsr_context_destroy(context);
  test_export(argv[1]);
  if (failures) {
    fprintf(stderr, "test_wrap_host: %d failure(s)\n", failures);
    return 1;
  }
  printf("test_wrap_host: all passed\n");
  return 0;
}
