/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of the Vulkan plugin through the public API.
 *   no_loader   with TESSERA_VULKAN_LOADER naming a missing library the plugin
 *               still loads, reports zero devices and says why at debug
 *               level; opening "vulkan" fails cleanly.
 *   device      on vulkan:0 (exit 77, ctest's skip, without one): many small
 *               buffers sub-allocated and read back intact, one larger than a
 *               block, a copy, event timing, a wait on an event nothing
 *               was recorded after, a cross-entropy target out of
 *               range reported by queue_finish (once, then cleared), a
 *               buffer larger than the device-local heap refused as out of
 *               memory with both sizes named (the driver is never asked),
 *               the pipeline cache written under $XDG_CACHE_HOME/tessera, and
 *               problems of one signature (the core's op cache key: other
 *               offsets of the same alignment, other group sizes, other rope
 *               position_offset) run right with the config chosen for the
 *               first, an out-of-range position_offset refused at run time.
 * TESSERA_PLUGIN_PATH points at a plugins.d holding only the Vulkan plugin. */
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tessera/reference.h"
#include "tessera/tessera.h"

enum { EXIT_SKIP = 77 };

static int failures = 0;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stdout, "FAIL: ");
  vfprintf(stdout, fmt, ap);
  fprintf(stdout, "\n");
  va_end(ap);
  failures++;
}

#define EXPECT_OK(call)                                                                            \
  do {                                                                                             \
    tsr_status s_ = (call);                                                                        \
    if (s_ != TSR_OK)                                                                              \
      fail("%s: %s (%s)", #call, tsr_status_name(s_), tsr_last_error());                           \
  } while (0)

static int test_no_loader(void) {
  setenv("TESSERA_VULKAN_LOADER", "/nonexistent/libvulkan-for-tessera-tests.so.1", 1);
  setenv("TESSERA_LOG", "debug", 1);
  char log_path[] = "/tmp/tessera-vulkan-log-XXXXXX";
  int log_fd = mkstemp(log_path);
  if (log_fd < 0) {
    fail("cannot make a temporary file for the log");
    return 1;
  }
  fflush(stderr);
  int saved = dup(2);
  dup2(log_fd, 2);
  tsr_context *context = NULL;
  tsr_status status = tsr_context_create(NULL, &context);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  if (status != TSR_OK) {
    fail("tsr_context_create: %s", tsr_status_name(status));
    return 1;
  }
  uint32_t plugins = 0, count = 0;
  tsr_plugin_count(context, &plugins);
  bool loaded = false;
  for (uint32_t i = 0; i < plugins; i++) {
    tsr_plugin_report report = {.struct_size = sizeof report};
    if (tsr_plugin_get_report(context, i, &report) == TSR_OK && !strcmp(report.name, "vulkan")) {
      loaded = report.state == TSR_PLUGIN_LOADED;
      if (report.device_count != 0)
        fail("the plugin reports %u devices without a loader", report.device_count);
    }
  }
  if (!loaded)
    fail("the Vulkan plugin did not load without a Vulkan loader");
  tsr_device_count(context, &count);
  if (count != 0)
    fail("%u devices without a Vulkan loader", count);
  tsr_device *device = NULL;
  if (tsr_device_open(context, "vulkan", &device) != TSR_ERROR_NOT_FOUND)
    fail("opening \"vulkan\" without a loader did not fail with TSR_ERROR_NOT_FOUND");
  tsr_context_destroy(context);
  char log[16384] = "";
  FILE *f = fopen(log_path, "r");
  if (f) {
    size_t got = fread(log, 1, sizeof log - 1, f);
    log[got] = '\0';
    fclose(f);
  }
  close(log_fd);
  remove(log_path);
  if (!strstr(log, "no devices: cannot load the Vulkan loader") ||
      !strstr(log, "libvulkan-for-tessera-tests.so.1"))
    fail("the debug log does not say the loader is missing:\n%s", log);
  return failures ? 1 : 0;
}

static bool cache_file_present(const char *dir) {
  char path[1100];
  snprintf(path, sizeof path, "%s/tessera", dir);
  DIR *d = opendir(path);
  if (!d)
    return false;
  bool found = false;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    found = found || (strncmp(e->d_name, "vulkan-", 7) == 0 && strstr(e->d_name, ".pipelines"));
  closedir(d);
  return found;
}

static void test_buffers(tsr_device *device, tsr_queue *queue) {
  /* Many small buffers share blocks; each must keep its own bytes. */
  enum { SMALL = 300 };
  tsr_buffer *small[SMALL] = {0};
  for (int i = 0; i < SMALL; i++) {
    size_t bytes = 4 + (size_t)(i % 7) * 1000;
    EXPECT_OK(tsr_buffer_create(device, bytes, &small[i]));
    unsigned char pattern[7000];
    memset(pattern, i & 0xff, bytes);
    if (small[i])
      EXPECT_OK(tsr_buffer_write(queue, small[i], 0, pattern, bytes));
  }
  for (int i = 0; i < SMALL; i += 2) { /* free every other one, then reuse the holes */
    tsr_buffer_destroy(small[i]);
    small[i] = NULL;
  }
  for (int i = 0; i < SMALL; i += 2)
    EXPECT_OK(tsr_buffer_create(device, 64, &small[i]));
  for (int i = 1; i < SMALL; i += 2) {
    size_t bytes = 4 + (size_t)(i % 7) * 1000;
    unsigned char back[7000];
    if (!small[i])
      continue;
    EXPECT_OK(tsr_buffer_read(queue, small[i], 0, back, bytes));
    for (size_t b = 0; b < bytes; b++)
      if (back[b] != (unsigned char)(i & 0xff)) {
        fail("buffer %d byte %zu reads %u, wrote %u", i, b, back[b], i & 0xff);
        break;
      }
  }
  for (int i = 0; i < SMALL; i++)
    tsr_buffer_destroy(small[i]);

  /* A buffer larger than a block (its own allocation), written and copied
   * with events around the copy. */
  size_t big = (size_t)80 << 20;
  tsr_buffer *a = NULL, *b = NULL;
  EXPECT_OK(tsr_buffer_create(device, big, &a));
  EXPECT_OK(tsr_buffer_create(device, big, &b));
  uint32_t *host = malloc(big);
  if (!a || !b || !host) {
    fail("cannot allocate the large buffers");
  } else {
    for (size_t i = 0; i < big / 4; i++)
      host[i] = (uint32_t)(i * 2654435761u);
    EXPECT_OK(tsr_buffer_write(queue, a, 0, host, big));
    tsr_event *start = NULL, *end = NULL;
    EXPECT_OK(tsr_event_record(queue, &start));
    EXPECT_OK(tsr_buffer_copy(queue, a, 0, b, 0, big));
    EXPECT_OK(tsr_event_record(queue, &end));
    double ms = -1;
    if (start && end) {
      tsr_status s = tsr_event_elapsed_ms(start, end, &ms);
      if (s != TSR_OK && s != TSR_ERROR_UNSUPPORTED)
        fail("tsr_event_elapsed_ms: %s (%s)", tsr_status_name(s), tsr_last_error());
      else if (s == TSR_OK && !(ms >= 0.0 && ms < 60000.0))
        fail("a copy of 80 MiB took %g ms by the events", ms);
    }
    tsr_event_destroy(start);
    tsr_event_destroy(end);
    /* Events are submitted with later work; waiting on the last one, with
     * nothing after it, submits it rather than waiting forever. */
    tsr_event *last = NULL;
    EXPECT_OK(tsr_buffer_copy(queue, b, 0, a, 0, big));
    EXPECT_OK(tsr_event_record(queue, &last));
    if (last)
      EXPECT_OK(tsr_event_wait(last));
    tsr_event_destroy(last);
    memset(host, 0, big);
    EXPECT_OK(tsr_buffer_read(queue, b, 0, host, big));
    for (size_t i = 0; i < big / 4; i++)
      if (host[i] != (uint32_t)(i * 2654435761u)) {
        fail("copied word %zu is %u", i, host[i]);
        break;
      }
  }
  free(host);
  tsr_buffer_destroy(a);
  tsr_buffer_destroy(b);
}

/* A target outside [0, V) makes that row NaN and queue_finish fail once;
 * the next finish is clean. */
static void test_bad_target(tsr_device *device, tsr_queue *queue) {
  enum { R = 5, V = 37 };
  float logits[R * V];
  for (int i = 0; i < R * V; i++)
    logits[i] = (float)((i * 7) % 11) * 0.25f;
  int32_t targets[R] = {3, -100, V, 0, -1};
  tsr_buffer *bl = NULL, *bt = NULL, *bo = NULL;
  EXPECT_OK(tsr_buffer_create(device, sizeof logits, &bl));
  EXPECT_OK(tsr_buffer_create(device, sizeof targets, &bt));
  EXPECT_OK(tsr_buffer_create(device, R * sizeof(float), &bo));
  if (!bl || !bt || !bo)
    return;
  EXPECT_OK(tsr_buffer_write(queue, bl, 0, logits, sizeof logits));
  EXPECT_OK(tsr_buffer_write(queue, bt, 0, targets, sizeof targets));
  int64_t shape[2] = {R, V}, rows = R;
  tsr_cross_entropy_desc d = TSR_CROSS_ENTROPY_DESC_INIT;
  d.logits = tsr_tensor_make(bl, 0, TSR_DTYPE_F32, 2, shape);
  d.targets = tsr_tensor_make(bt, 0, TSR_DTYPE_I32, 1, &rows);
  d.loss = tsr_tensor_make(bo, 0, TSR_DTYPE_F32, 1, &rows);
  d.ignore_index = -100;
  EXPECT_OK(tsr_cross_entropy(queue, &d));
  tsr_status s = tsr_queue_finish(queue);
  if (s != TSR_ERROR_INVALID_VALUE)
    fail("queue_finish after a bad target returned %s", tsr_status_name(s));
  else if (!strstr(tsr_last_error(), "targets[2]"))
    fail("the error names the wrong row: %s", tsr_last_error());
  float loss[R];
  EXPECT_OK(tsr_buffer_read(queue, bo, 0, loss, sizeof loss));
  if (!isnan(loss[2]) || !isnan(loss[4]) || loss[1] != 0.0f || !(loss[0] > 0.0f) ||
      !(loss[3] > 0.0f))
    fail("losses %g %g %g %g %g", loss[0], loss[1], loss[2], loss[3], loss[4]);
  s = tsr_queue_finish(queue);
  if (s != TSR_OK)
    fail("a second queue_finish returned %s: the error was not cleared", tsr_status_name(s));
  targets[2] = 1;
  targets[4] = 2;
  EXPECT_OK(tsr_buffer_write(queue, bt, 0, targets, sizeof targets));
  EXPECT_OK(tsr_cross_entropy(queue, &d));
  EXPECT_OK(tsr_queue_finish(queue));
  tsr_buffer_destroy(bl);
  tsr_buffer_destroy(bt);
  tsr_buffer_destroy(bo);
}

/* ---- problems of one signature ---- */

/* One f32 buffer and its host mirror; ops read inputs written from the
 * mirror and write outputs elsewhere, so the mirror holds every input. */
enum { SIG_FLOATS = 16384 };
typedef struct sig_buffer {
  tsr_buffer *buffer;
  float host[SIG_FLOATS];
} sig_buffer;

static const void *sig_host_of(void *user, const tsr_buffer *buffer) {
  sig_buffer *b = user;
  return buffer == b->buffer ? b->host : NULL;
}

/* Runs the op (`run` with `desc`) and compares `count` outputs at byte
 * offset `out` with the fp64 reference of the same problem. */
static void sig_check(tsr_device *device, tsr_queue *queue, sig_buffer *b, tsr_op op,
                      const void *desc, tsr_status (*run)(tsr_queue *, const void *), size_t out,
                      size_t count, const char *what) {
  tsr_plugin_any_args args;
  double *want = calloc(count, sizeof *want);
  float *got = calloc(count, sizeof *got);
  tsr_status s = tsr_reference_prepare(device, op, desc, sig_host_of, b, &args, sizeof args);
  if (s != TSR_OK || !want || !got) {
    fail("%s: tsr_reference_prepare: %s (%s)", what, tsr_status_name(s), tsr_last_error());
  } else {
    if (op == TSR_OP_GROUPED_GEMM)
      s = tsr_reference_grouped_gemm(&args.grouped_gemm, want);
    else if (op == TSR_OP_ROPE)
      s = tsr_reference_rope(&args.rope, want);
    else
      s = tsr_reference_rmsnorm(&args.rmsnorm, want, NULL);
    if (s != TSR_OK)
      fail("%s: the reference failed: %s", what, tsr_status_name(s));
    EXPECT_OK(run(queue, desc));
    EXPECT_OK(tsr_buffer_read(queue, b->buffer, out, got, count * sizeof *got));
    for (size_t i = 0; i < count; i++)
      if (!(fabs(got[i] - want[i]) <= 1e-4 * (1.0 + fabs(want[i])))) {
        fail("%s: output %zu is %.7g, the reference %.7g", what, i, got[i], want[i]);
        break;
      }
  }
  free(want);
  free(got);
}

static tsr_status run_rmsnorm(tsr_queue *queue, const void *desc) {
  return tsr_rmsnorm(queue, desc);
}
static tsr_status run_grouped_gemm(tsr_queue *queue, const void *desc) {
  return tsr_grouped_gemm(queue, desc);
}
static tsr_status run_rope(tsr_queue *queue, const void *desc) {
  return tsr_rope(queue, desc);
}

/* The core asks op_select once per signature and runs later problems of
 * that signature with the same config: what only op_run may decide (exact
 * offsets, group sizes, rope's position_offset) must be read there. */
static void test_one_signature(tsr_device *device, tsr_queue *queue) {
  sig_buffer *b = calloc(1, sizeof *b);
  if (!b) {
    fail("out of host memory");
    return;
  }
  for (int i = 0; i < SIG_FLOATS; i++)
    b->host[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
  EXPECT_OK(tsr_buffer_create(device, sizeof b->host, &b->buffer));
  if (!b->buffer) {
    free(b);
    return;
  }
  EXPECT_OK(tsr_buffer_write(queue, b->buffer, 0, b->host, sizeof b->host));
  char what[96];

  /* rmsnorm [3, 40]: x and y at offsets 16 bytes past a 64-byte boundary,
   * then 48 (both 16-byte aligned: one signature). */
  static const size_t x_at[2] = {4096 + 16, 8192 + 48}, y_at[2] = {40960 + 16, 49152 + 48};
  int64_t rows[2] = {3, 40};
  for (int i = 0; i < 2; i++) {
    tsr_rmsnorm_desc d = TSR_RMSNORM_DESC_INIT;
    d.x = tsr_tensor_make(b->buffer, x_at[i], TSR_DTYPE_F32, 2, rows);
    d.y = tsr_tensor_make(b->buffer, y_at[i], TSR_DTYPE_F32, 2, rows);
    snprintf(what, sizeof what, "rmsnorm at offsets %zu, %zu", x_at[i], y_at[i]);
    sig_check(device, queue, b, TSR_OP_RMSNORM, &d, run_rmsnorm, y_at[i], 3 * 40, what);
  }

  /* grouped GEMM: a [12, 16], b [3, 16, 8], d [12, 8], three splits of the
   * 12 rows. */
  static const int64_t splits[3][3] = {{4, 4, 4}, {0, 1, 11}, {12, 0, 0}};
  int64_t a_shape[2] = {12, 16}, b_shape[3] = {3, 16, 8}, d_shape[2] = {12, 8};
  for (int i = 0; i < 3; i++) {
    tsr_grouped_gemm_desc d = TSR_GROUPED_GEMM_DESC_INIT;
    d.a = tsr_tensor_make(b->buffer, 0, TSR_DTYPE_F32, 2, a_shape);
    d.b = tsr_tensor_make(b->buffer, 1024, TSR_DTYPE_F32, 3, b_shape);
    d.d = tsr_tensor_make(b->buffer, 57344, TSR_DTYPE_F32, 2, d_shape);
    d.group_sizes = splits[i];
    d.group_count = 3;
    snprintf(what, sizeof what, "grouped_gemm with groups %lld, %lld, %lld",
             (long long)splits[i][0], (long long)splits[i][1], (long long)splits[i][2]);
    sig_check(device, queue, b, TSR_OP_GROUPED_GEMM, &d, run_grouped_gemm, 57344, 12 * 8, what);
  }

  /* rope [1, 4, 2, 8] at three position offsets, then one whose positions
   * leave 32 bits: refused by op_run, and the queue goes on. */
  static const int64_t positions[3] = {0, 37, 1000};
  int64_t x_shape[4] = {1, 4, 2, 8};
  tsr_rope_desc d = TSR_ROPE_DESC_INIT;
  d.x = tsr_tensor_make(b->buffer, 2048, TSR_DTYPE_F32, 4, x_shape);
  d.y = tsr_tensor_make(b->buffer, 61440, TSR_DTYPE_F32, 4, x_shape);
  for (int i = 0; i < 3; i++) {
    d.position_offset = positions[i];
    snprintf(what, sizeof what, "rope at position_offset %lld", (long long)positions[i]);
    sig_check(device, queue, b, TSR_OP_ROPE, &d, run_rope, 61440, 4 * 2 * 8, what);
  }
  d.position_offset = INT32_MAX - 2;
  tsr_status s = tsr_rope(queue, &d);
  if (s != TSR_ERROR_UNSUPPORTED || !strstr(tsr_last_error(), "vulkan: rope: position_offset"))
    fail("rope at position_offset 2^31 - 3: %s (%s), not refused by the plugin", tsr_status_name(s),
         tsr_last_error());
  d.position_offset = 7;
  sig_check(device, queue, b, TSR_OP_ROPE, &d, run_rope, 61440, 4 * 2 * 8,
            "rope after a refused one");
  EXPECT_OK(tsr_queue_finish(queue));
  tsr_buffer_destroy(b->buffer);
  free(b);
}

/* One byte more than the device-local heap (info.memory_bytes): the plugin
 * must refuse it before asking the driver, as out of memory, saying how
 * large the request and the heap are. */
static void test_larger_than_heap(tsr_device *device, const tsr_device_info *info) {
  if (info->memory_bytes == 0 || info->memory_bytes >= (uint64_t)SIZE_MAX) {
    fail("vulkan:0 reports a memory size of %llu bytes", (unsigned long long)info->memory_bytes);
    return;
  }
  size_t bytes = (size_t)info->memory_bytes + 1;
  tsr_buffer *buffer = NULL;
  tsr_status status = tsr_buffer_create(device, bytes, &buffer);
  const char *why = tsr_last_error();
  char request[32], heap[32];
  snprintf(request, sizeof request, "%zu bytes", bytes);
  snprintf(heap, sizeof heap, "%llu-byte", (unsigned long long)info->memory_bytes);
  if (status != TSR_ERROR_OUT_OF_MEMORY)
    fail("a buffer of heap + 1 = %zu bytes: %s (%s), not TSR_ERROR_OUT_OF_MEMORY", bytes,
         tsr_status_name(status), why);
  else if (!strstr(why, request) || !strstr(why, heap))
    fail("a buffer of heap + 1 bytes: the error '%s' does not name '%s' and '%s'", why, request,
         heap);
  else
    printf("heap + 1 bytes refused: %s\n", why);
  tsr_buffer_destroy(buffer);
}

static int test_device(void) {
  char cache_dir[] = "/tmp/tessera-vulkan-cache-XXXXXX";
  if (!mkdtemp(cache_dir)) {
    fail("cannot make a cache directory");
    return 1;
  }
  setenv("XDG_CACHE_HOME", cache_dir, 1);
  tsr_context *context = NULL;
  if (tsr_context_create(NULL, &context) != TSR_OK) {
    fail("tsr_context_create: %s", tsr_last_error());
    return 1;
  }
  tsr_device *device = NULL;
  if (tsr_device_open(context, "vulkan:0", &device) != TSR_OK) {
    printf("SKIP: no Vulkan device (%s)\n", tsr_last_error());
    tsr_context_destroy(context);
    return EXIT_SKIP;
  }
  tsr_device_info info = {.struct_size = sizeof info};
  EXPECT_OK(tsr_device_get_info(device, &info));
  printf("vulkan:0 = %s, %s, arch %s, id %s\n", info.name, info.driver_version, info.arch,
         info.physical_id);
  if (strncmp(info.physical_id, "GPU-", 4) != 0 || strlen(info.physical_id) != 40)
    fail("physical id '%s' is not a UUID", info.physical_id);
  if (!(info.dtype_mask & (1u << TSR_DTYPE_F32)))
    fail("f32 is not in the dtype mask");
  tsr_queue *queue = NULL;
  EXPECT_OK(tsr_queue_create(device, &queue));
  if (queue) {
    test_buffers(device, queue);
    test_bad_target(device, queue);
    test_one_signature(device, queue);
  }
  test_larger_than_heap(device, &info);
  tsr_context_destroy(context); /* closes the device: the cache is saved */
  if (!cache_file_present(cache_dir))
    fail("no pipeline cache under %s/tessera after the device closed", cache_dir);
  char command[200];
  snprintf(command, sizeof command, "rm -rf '%s'", cache_dir);
  if (system(command) != 0)
    fail("cannot remove %s", cache_dir);
  return failures ? 1 : 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  int status;
  if (!strcmp(mode, "no_loader"))
    status = test_no_loader();
  else if (!strcmp(mode, "device"))
    status = test_device();
  else {
    fprintf(stderr, "usage: vulkan_plugin_test no_loader|device\n");
    return 2;
  }
  printf("%s: %s\n", mode, status == 0 ? "ok" : status == EXIT_SKIP ? "skipped" : "FAILED");
  return status;
}
