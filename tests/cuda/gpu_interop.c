/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU layer's interop entries (backends/gpu: queue_wrap, buffer_export,
 * buffer_wrap of host memory) asked of a plugin's own ABI 2 table through
 * tests/cuda's stand-in driver (fake_libcuda.c), which keeps the state the
 * checks read: streams alive and the work queued on each, host
 * registrations. Nothing runs; what is checked is what the plugin asks of
 * the driver:
 * - queue_wrap over a stream of the device's context: writes, ops and events
 *   go to that stream; queue_finish works; queue_destroy leaves the stream
 *   alive (the test destroys it); the default stream (0) wraps; a stream of
 *   another context, a destroyed stream and the other vendor's kind are
 *   refused with a sentence;
 * - buffer_export: the vendor's device-pointer kind for an allocation, the
 *   caller's address for wrapped host memory;
 * - host memory: registered once per range, shared by a buffer inside it,
 *   unregistered with the last buffer; memory the application registered is
 *   used and left registered; an overlap that is not inside is refused.
 * usage: gpu_interop cuda|hip <plugin.so> <stand-in libcuda.so>; the CUDA
 * plugin finds the stand-in through TESSERA_CUDA_DRIVER, the HIP plugin
 * through tests/hip's runtime (TESSERA_HIP_RUNTIME and
 * TESSERA_HIP_TEST_CUDA_DRIVER). Exit 77 when the plugin sees no device. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_api.h"
#include "tessera/plugin.h"

static int failures;
static char last_error[512];

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                         \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, " (plugin error: %s)\n", last_error);                                        \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

static void host_log(void *handle, int level, const char *fmt, ...) {
  (void)handle, (void)level, (void)fmt;
}

static void host_set_error(void *handle, const char *fmt, ...) {
  (void)handle;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
}

static const char *host_get_env(const char *name) {
  return getenv(name);
}

/* The plugin is asked without the core: its statuses by hand. */
static const char *status_word(tsr_status status) {
  switch (status) {
  case TSR_OK:
    return "TSR_OK";
  case TSR_ERROR_INVALID_VALUE:
    return "TSR_ERROR_INVALID_VALUE";
  case TSR_ERROR_BAD_SIZE:
    return "TSR_ERROR_BAD_SIZE";
  case TSR_ERROR_WRONG_DEVICE:
    return "TSR_ERROR_WRONG_DEVICE";
  case TSR_ERROR_UNSUPPORTED:
    return "TSR_ERROR_UNSUPPORTED";
  default:
    return "another status";
  }
}

/* The stand-in driver's entry points and its test hooks. */
typedef int (*stream_work_fn)(CUstream, uint64_t *);
typedef int (*registrations_fn)(void);
static cuda_api cu;
static stream_work_fn stream_work;
static registrations_fn registrations;

static const tsr_plugin_v2 *table;
static void *device;
static bool hip;
static int32_t stream_kind, device_kind;

static tsr_plugin_tensor tensor(void *buffer, uint64_t offset, int rank, const int64_t *shape) {
  tsr_plugin_tensor t;
  memset(&t, 0, sizeof t);
  t.buffer = buffer;
  t.offset = offset;
  t.dtype = TSR_DTYPE_F32;
  t.rank = rank;
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; d--) {
    t.shape[d] = shape[d];
    t.strides[d] = stride;
    stride *= shape[d];
  }
  return t;
}

/* An rmsnorm of x [4, 64] into y, both in `buffer`, queued on `queue`. */
static tsr_status queue_rmsnorm(void *queue, void *buffer) {
  const int64_t shape[2] = {4, 64};
  tsr_rmsnorm_args args;
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.x = tensor(buffer, 0, 2, shape);
  args.y = tensor(buffer, 4 * 64 * sizeof(float), 2, shape);
  args.eps = 1e-6f;
  tsr_plugin_selection pick = {sizeof pick, NULL, NULL};
  tsr_status status = table->op_select(device, TSR_OP_RMSNORM, &args, NULL, &pick);
  if (status == TSR_OK)
    status = table->op_run(queue, TSR_OP_RMSNORM, &args, pick.config);
  return status;
}

static uint64_t work_of(CUstream stream) {
  uint64_t work = 0;
  return stream_work(stream, &work) ? work : UINT64_MAX;
}

static void test_queue_wrap(void) {
  CUcontext context = NULL, foreign = (CUcontext)(void *)&failures;
  CUstream stream = NULL, other = NULL, dead = NULL;
  cu.cuDevicePrimaryCtxRetain(&context, 0);
  cu.cuCtxSetCurrent(context);
  cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);
  cu.cuStreamCreate(&dead, CU_STREAM_NON_BLOCKING);
  cu.cuCtxSetCurrent(foreign);
  cu.cuStreamCreate(&other, CU_STREAM_NON_BLOCKING);
  cu.cuCtxSetCurrent(context);
  cu.cuStreamDestroy(dead); /* after `other` was made: its slot is not reused */

  void *queue = NULL, *buffer = NULL, *event = NULL;
  CHECK(table->queue_wrap(device, stream_kind, (uint64_t)(uintptr_t)stream, &queue) == TSR_OK,
        "queue_wrap of a stream of the device's context");
  CHECK(table->buffer_alloc(device, 8 * 64 * sizeof(float), &buffer) == TSR_OK, "buffer_alloc");
  if (queue && buffer) {
    uint64_t before = work_of(stream);
    float data[64] = {1};
    CHECK(table->buffer_write(queue, buffer, 0, data, sizeof data) == TSR_OK, "buffer_write");
    uint64_t after_write = work_of(stream);
    CHECK(after_write > before && after_write != UINT64_MAX,
          "the write went to the wrapped stream (work %llu -> %llu)", (unsigned long long)before,
          (unsigned long long)after_write);
    CHECK(queue_rmsnorm(queue, buffer) == TSR_OK, "an op on the wrapped queue");
    uint64_t after_op = work_of(stream);
    CHECK(after_op > after_write, "the op was launched on the wrapped stream (work %llu -> %llu)",
          (unsigned long long)after_write, (unsigned long long)after_op);
    CHECK(table->event_record(queue, &event) == TSR_OK && table->event_wait(event) == TSR_OK,
          "an event on the wrapped queue");
    CHECK(work_of(stream) > after_op, "the event was recorded on the wrapped stream");
    table->event_destroy(event);
    CHECK(table->queue_finish(queue) == TSR_OK, "queue_finish of the wrapped queue");
    table->queue_destroy(queue);
    CHECK(work_of(stream) != UINT64_MAX, "queue_destroy left the application's stream alive");
  }
  CHECK(cu.cuStreamDestroy(stream) == CUDA_SUCCESS, "the application destroys its stream");

  queue = NULL;
  CHECK(table->queue_wrap(device, stream_kind, 0, &queue) == TSR_OK && queue,
        "queue_wrap of the default stream");
  if (queue) {
    CHECK(queue_rmsnorm(queue, buffer) == TSR_OK, "an op on the default stream");
    CHECK(table->queue_finish(queue) == TSR_OK, "queue_finish on the default stream");
    table->queue_destroy(queue);
  }

  queue = NULL;
  last_error[0] = '\0';
  tsr_status status = table->queue_wrap(device, stream_kind, (uint64_t)(uintptr_t)other, &queue);
  /* CUDA names the other context; HIP's stand-in runtime knows no device of
   * that context, so the stream is no stream of any HIP device. */
  CHECK(!queue && (hip ? status == TSR_ERROR_INVALID_VALUE && strstr(last_error, "not a live")
                       : status == TSR_ERROR_WRONG_DEVICE && strstr(last_error, "another")),
        "a stream of another context is refused (%s)", status_word(status));
  last_error[0] = '\0';
  status = table->queue_wrap(device, stream_kind, (uint64_t)(uintptr_t)dead, &queue);
  CHECK(!queue && status == TSR_ERROR_INVALID_VALUE && strstr(last_error, "not a live stream"),
        "a destroyed stream is refused (%s)", status_word(status));
  last_error[0] = '\0';
  int32_t wrong = hip ? TSR_EXTERNAL_CUDA_STREAM : TSR_EXTERNAL_HIP_STREAM;
  status = table->queue_wrap(device, wrong, (uint64_t)(uintptr_t)other, &queue);
  CHECK(!queue && status == TSR_ERROR_UNSUPPORTED && strstr(last_error, "kind = "),
        "the other vendor's streams are refused (%s)", status_word(status));
  cu.cuCtxSetCurrent(foreign);
  cu.cuStreamDestroy(other);
  cu.cuCtxSetCurrent(context);
  table->buffer_free(device, buffer);
}

static void test_export_and_host_memory(void) {
  void *allocated = NULL, *wrapped = NULL, *inside = NULL, *overlap = NULL, *app = NULL;
  int32_t kind = 0;
  uint64_t address = 0;
  CHECK(table->buffer_alloc(device, 1000, &allocated) == TSR_OK &&
            table->buffer_export(allocated, &kind, &address) == TSR_OK && kind == device_kind &&
            address != 0,
        "export of an allocation: kind %d (want %d), address 0x%llx", (int)kind, (int)device_kind,
        (unsigned long long)address);
  table->buffer_free(device, allocated);

  char *memory = malloc(8192);
  int before = registrations();
  CHECK(table->buffer_wrap(device, TSR_EXTERNAL_HOST_POINTER, memory + 3, 4000, &wrapped) ==
                TSR_OK &&
            registrations() == before + 1,
        "host memory wrapped and registered (%d registrations, were %d)", registrations(), before);
  CHECK(wrapped && table->buffer_export(wrapped, &kind, &address) == TSR_OK &&
            kind == TSR_EXTERNAL_HOST_POINTER && address == (uint64_t)(uintptr_t)(memory + 3),
        "export of wrapped host memory: kind %d, address 0x%llx", (int)kind,
        (unsigned long long)address);
  CHECK(table->buffer_wrap(device, TSR_EXTERNAL_HOST_POINTER, memory + 100, 1000, &inside) ==
                TSR_OK &&
            registrations() == before + 1,
        "a range inside shares the registration (%d)", registrations());
  last_error[0] = '\0';
  tsr_status status =
      table->buffer_wrap(device, TSR_EXTERNAL_HOST_POINTER, memory + 3000, 2000, &overlap);
  CHECK(status == TSR_ERROR_INVALID_VALUE && !overlap && strstr(last_error, "overlap"),
        "a range overlapping without lying inside is refused (%s)", status_word(status));
  void *queue = NULL;
  CHECK(table->queue_create(device, &queue) == TSR_OK, "queue_create");
  if (queue && wrapped) {
    float data[16] = {2};
    CHECK(table->buffer_write(queue, wrapped, 0, data, sizeof data) == TSR_OK &&
              queue_rmsnorm(queue, wrapped) == TSR_OK && table->queue_finish(queue) == TSR_OK,
          "a write and an op on wrapped host memory");
  }
  table->buffer_free(device, wrapped);
  CHECK(registrations() == before + 1, "still registered for the buffer inside (%d)",
        registrations());
  table->buffer_free(device, inside);
  CHECK(registrations() == before, "unregistered with the last buffer (%d)", registrations());

  /* memory the application registered itself: used, left registered */
  CHECK(cu.cuMemHostRegister(memory, 8192, CU_MEMHOSTREGISTER_DEVICEMAP) == CUDA_SUCCESS,
        "the application registers its memory");
  CHECK(table->buffer_wrap(device, TSR_EXTERNAL_HOST_POINTER, memory + 64, 512, &app) == TSR_OK,
        "wrapping memory the application registered");
  table->buffer_free(device, app);
  CHECK(registrations() == before + 1, "the application's registration stays (%d)",
        registrations());
  CHECK(cu.cuMemHostUnregister(memory) == CUDA_SUCCESS, "the application unregisters");

  last_error[0] = '\0';
  status = table->buffer_wrap(device, TSR_EXTERNAL_HOST_POINTER, memory, 0, &app);
  CHECK(status == TSR_ERROR_BAD_SIZE && strstr(last_error, "bytes = 0"), "zero bytes (%s)",
        status_word(status));
  status = table->buffer_wrap(device, 99, memory, 16, &app);
  CHECK(status == TSR_ERROR_UNSUPPORTED && strstr(last_error, "kind = 99"), "kind 99 (%s)",
        status_word(status));
  if (queue)
    table->queue_destroy(queue);
  free(memory);
}

int main(int argc, char **argv) {
  if (argc != 4 || (strcmp(argv[1], "cuda") != 0 && strcmp(argv[1], "hip") != 0)) {
    fprintf(stderr, "usage: %s cuda|hip <plugin.so> <stand-in libcuda.so>\n", argv[0]);
    return 2;
  }
  hip = strcmp(argv[1], "hip") == 0;
  stream_kind = hip ? TSR_EXTERNAL_HIP_STREAM : TSR_EXTERNAL_CUDA_STREAM;
  device_kind = hip ? TSR_EXTERNAL_HIP_DEVICE_POINTER : TSR_EXTERNAL_CUDA_DEVICE_POINTER;
  void *driver = dlopen(argv[3], RTLD_NOW | RTLD_LOCAL);
  const char *missing = driver ? cuda_api_load(&cu, driver) : "the library";
  void *work_symbol = driver ? dlsym(driver, "fake_cuda_stream_work") : NULL;
  void *count_symbol = driver ? dlsym(driver, "fake_cuda_host_registrations") : NULL;
  if (missing || !work_symbol || !count_symbol || !cu.cuMemHostRegister) {
    fprintf(stderr, "FAIL: %s is not the stand-in driver (%s)\n", argv[3],
            missing ? missing : "no test hooks");
    return 1;
  }
  memcpy(&stream_work, &work_symbol, sizeof stream_work);
  memcpy(&registrations, &count_symbol, sizeof registrations);

  void *library = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
  void *entry_symbol = library ? dlsym(library, TSR_PLUGIN_ENTRY_SYMBOL) : NULL;
  tsr_plugin_entry_fn entry;
  memcpy(&entry, &entry_symbol, sizeof entry);
  table = entry_symbol ? entry(2) : NULL;
  if (!table || table->struct_size < offsetof(tsr_plugin_v2, queue_wrap) + sizeof(void *) ||
      !table->queue_wrap || !table->buffer_export) {
    fprintf(stderr, "FAIL: %s has no ABI 2 table with queue_wrap and buffer_export\n", argv[2]);
    return 1;
  }
  tsr_host_services_v2 host = {sizeof host, 2, host_log, host_set_error, host_get_env, NULL};
  void *plugin = NULL;
  char reason[256] = "";
  if (table->init(&host, &plugin, reason, sizeof reason) != TSR_OK ||
      table->device_count(plugin) == 0) {
    printf("SKIPPED: no device through the stand-in driver (%s)\n", reason);
    if (plugin)
      table->shutdown(plugin);
    return 77;
  }
  if (table->device_open(plugin, 0, &device) != TSR_OK) {
    fprintf(stderr, "FAIL: device_open: %s\n", last_error);
    return 1;
  }
  test_queue_wrap();
  test_export_and_host_memory();
  table->device_close(device);
  table->shutdown(plugin);
  dlclose(library);
  dlclose(driver);
  if (failures) {
    fprintf(stderr, "gpu_interop %s: %d failure(s)\n", argv[1], failures);
    return 1;
  }
  printf("gpu_interop %s: all passed\n", argv[1]);
  return 0;
}
