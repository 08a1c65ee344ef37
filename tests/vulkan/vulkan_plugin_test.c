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
 *               and the pipeline cache written under $XDG_CACHE_HOME/tessera.
 * TESSERA_PLUGIN_PATH points at a plugins.d holding only the Vulkan plugin. */
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
