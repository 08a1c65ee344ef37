/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of the OpenCL plugin through the public API.
 *   no_loader  with TESSERA_OPENCL_LIBRARY naming a missing library the
 *              plugin still loads, reports zero devices and says why at
 *              debug level; opening "opencl" fails cleanly.
 *   device     on opencl:0 (exit 77, ctest's skip, without one): buffers
 *              written and read back at offsets, a copy, event timing, host memory wrapped where
 * the device shares it (refused with the reason where not), an allocation beyond the device's limit
 * refused as out of memory, a cross-entropy target out of range reported by queue_finish once.
 *   cache      with a fresh $XDG_CACHE_HOME: a first context builds rmsnorm's
 *              program from source and caches its binary, a second loads
 *              the binary (the debug log says which), and after every cache
 *              file is corrupted a third builds again; all three compute
 *              the same right answer.
 * TESSERA_PLUGIN_PATH points at a plugins.d holding only the OpenCL plugin. */
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

/* Runs `body` with stderr going to a file, and returns what it wrote. */
typedef struct captured {
  char path[64];
  int fd, saved;
} captured;

static bool capture_begin(captured *c) {
  snprintf(c->path, sizeof c->path, "/tmp/tessera-opencl-log-XXXXXX");
  c->fd = mkstemp(c->path);
  if (c->fd < 0)
    return false;
  fflush(stderr);
  c->saved = dup(2);
  dup2(c->fd, 2);
  return true;
}

static void capture_end(captured *c, char *out, size_t capacity) {
  fflush(stderr);
  dup2(c->saved, 2);
  close(c->saved);
  out[0] = '\0';
  FILE *f = fopen(c->path, "r");
  if (f) {
    size_t got = fread(out, 1, capacity - 1, f);
    out[got] = '\0';
    fclose(f);
  }
  close(c->fd);
  remove(c->path);
}

static int test_no_loader(void) {
  setenv("TESSERA_OPENCL_LIBRARY", "/nonexistent/libOpenCL-for-tessera-tests.so.1", 1);
  setenv("TESSERA_LOG", "debug", 1);
  captured c;
  if (!capture_begin(&c)) {
    fail("cannot make a temporary file for the log");
    return 1;
  }
  tsr_context *context = NULL;
  tsr_status status = tsr_context_create(NULL, &context);
  static char log[16384];
  capture_end(&c, log, sizeof log);
  if (status != TSR_OK) {
    fail("tsr_context_create: %s", tsr_status_name(status));
    return 1;
  }
  uint32_t plugins = 0, count = 0;
  tsr_plugin_count(context, &plugins);
  bool loaded = false;
  for (uint32_t i = 0; i < plugins; i++) {
    tsr_plugin_report report = {.struct_size = sizeof report};
    if (tsr_plugin_get_report(context, i, &report) == TSR_OK && !strcmp(report.name, "opencl")) {
      loaded = report.state == TSR_PLUGIN_LOADED;
      if (report.device_count != 0)
        fail("the plugin reports %u devices without an ICD loader", report.device_count);
    }
  }
  if (!loaded)
    fail("the OpenCL plugin did not load without an ICD loader");
  tsr_device_count(context, &count);
  if (count != 0)
    fail("%u devices without an ICD loader", count);
  tsr_device *device = NULL;
  if (tsr_device_open(context, "opencl", &device) != TSR_ERROR_NOT_FOUND)
    fail("opening \"opencl\" without a loader did not fail with TSR_ERROR_NOT_FOUND");
  tsr_context_destroy(context);
  if (!strstr(log, "no devices: no OpenCL ICD loader") ||
      !strstr(log, "libOpenCL-for-tessera-tests.so.1"))
    fail("the debug log does not say the loader is missing:\n%s", log);
  return failures ? 1 : 0;
}

/* Opens opencl:0; false (the caller skips) without one. */
static bool open_device(tsr_context **context, tsr_device **device, tsr_queue **queue) {
  *context = NULL;
  *device = NULL;
  *queue = NULL;
  if (tsr_context_create(NULL, context) != TSR_OK)
    return false;
  if (tsr_device_open(*context, "opencl:0", device) != TSR_OK) {
    tsr_context_destroy(*context);
    return false;
  }
  if (tsr_queue_create(*device, queue) != TSR_OK) {
    fail("tsr_queue_create: %s", tsr_last_error());
    tsr_context_destroy(*context);
    return false;
  }
  return true;
}

static void test_buffers(tsr_device *device, tsr_queue *queue) {
  enum { N = 4096 };
  static unsigned char bytes[N], back[N];
  for (int i = 0; i < N; i++)
    bytes[i] = (unsigned char)(i * 7 + 3);
  tsr_buffer *a = NULL, *b = NULL;
  EXPECT_OK(tsr_buffer_create(device, N, &a));
  EXPECT_OK(tsr_buffer_create(device, N, &b));
  if (!a || !b)
    return;
  EXPECT_OK(tsr_buffer_write(queue, a, 0, bytes, N));
  EXPECT_OK(tsr_buffer_write(queue, a, 100, bytes, 10)); /* at an offset */
  EXPECT_OK(tsr_buffer_read(queue, a, 0, back, N));
  for (int i = 0; i < N; i++) {
    unsigned char want = i >= 100 && i < 110 ? bytes[i - 100] : bytes[i];
    if (back[i] != want) {
      fail("byte %d read back %d, wrote %d", i, back[i], want);
      break;
    }
  }
  EXPECT_OK(tsr_buffer_write(queue, a, 0, bytes, N));
  EXPECT_OK(tsr_buffer_copy(queue, a, 8, b, 16, 1000));
  EXPECT_OK(tsr_buffer_read(queue, b, 16, back, 1000));
  if (memcmp(back, bytes + 8, 1000) != 0)
    fail("a copy between buffers changed the bytes");
  tsr_buffer_destroy(a);
  tsr_buffer_destroy(b);

  tsr_device_info info = {.struct_size = sizeof info};
  EXPECT_OK(tsr_device_get_info(device, &info));
  tsr_buffer *huge = NULL;
  tsr_status status = tsr_buffer_create(device, (size_t)info.memory_bytes * 4 + 4096, &huge);
  if (status != TSR_ERROR_OUT_OF_MEMORY)
    fail("a buffer of 4x the device's memory gave %s, not out of memory", tsr_status_name(status));
  if (huge)
    tsr_buffer_destroy(huge);
}

static void test_wrap(tsr_device *device, tsr_queue *queue) {
  enum { N = 1024 };
  float *host = aligned_alloc(4096, N * sizeof(float));
  if (!host)
    return;
  for (int i = 0; i < N; i++)
    host[i] = (float)i;
  tsr_buffer *wrapped = NULL;
  tsr_status status = tsr_buffer_wrap_host(device, host, N * sizeof(float), &wrapped);
  tsr_device_info info = {.struct_size = sizeof info};
  EXPECT_OK(tsr_device_get_info(device, &info));
  if (status == TSR_OK) {
    float back[N];
    EXPECT_OK(tsr_buffer_read(queue, wrapped, 0, back, sizeof back));
    if (memcmp(back, host, sizeof back) != 0)
      fail("a wrapped host buffer does not read back the host's values");
    tsr_buffer_destroy(wrapped);
  } else if (status != TSR_ERROR_UNSUPPORTED || !strstr(tsr_last_error(), "host memory")) {
    fail("wrapping host memory: %s (%s)", tsr_status_name(status), tsr_last_error());
  }
  free(host);
}

static void test_events(tsr_queue *queue) {
  tsr_event *start = NULL, *end = NULL;
  EXPECT_OK(tsr_event_record(queue, &start));
  EXPECT_OK(tsr_event_record(queue, &end));
  double ms = -1;
  if (start && end) {
    EXPECT_OK(tsr_event_wait(end));
    EXPECT_OK(tsr_event_elapsed_ms(start, end, &ms));
    if (!(ms >= 0 && ms < 10000))
      fail("two adjacent events are %g ms apart", ms);
  }
  tsr_event_destroy(start);
  tsr_event_destroy(end);
}

static void test_cross_entropy_target(tsr_device *device, tsr_queue *queue) {
  enum { ROWS = 4, VOCAB = 10 };
  float logits[ROWS * VOCAB];
  for (int i = 0; i < ROWS * VOCAB; i++)
    logits[i] = (float)(i % 7) * 0.25f;
  int32_t targets[ROWS] = {1, 2, 10, 3}; /* row 2 is out of range */
  tsr_buffer *l = NULL, *t = NULL, *loss = NULL;
  EXPECT_OK(tsr_buffer_create(device, sizeof logits, &l));
  EXPECT_OK(tsr_buffer_create(device, sizeof targets, &t));
  EXPECT_OK(tsr_buffer_create(device, ROWS * sizeof(float), &loss));
  if (!l || !t || !loss)
    return;
  EXPECT_OK(tsr_buffer_write(queue, l, 0, logits, sizeof logits));
  EXPECT_OK(tsr_buffer_write(queue, t, 0, targets, sizeof targets));
  tsr_cross_entropy_desc d = {.struct_size = sizeof d};
  int64_t shape[2] = {ROWS, VOCAB}, rows[1] = {ROWS};
  d.logits = tsr_tensor_make(l, 0, TSR_DTYPE_F32, 2, shape);
  d.targets = tsr_tensor_make(t, 0, TSR_DTYPE_I32, 1, rows);
  d.loss = tsr_tensor_make(loss, 0, TSR_DTYPE_F32, 1, rows);
  d.ignore_index = -100;
  EXPECT_OK(tsr_cross_entropy(queue, &d));
  tsr_status status = tsr_queue_finish(queue);
  if (status != TSR_ERROR_INVALID_VALUE || !strstr(tsr_last_error(), "targets[2]"))
    fail("a target out of range gave %s (%s) at queue_finish", tsr_status_name(status),
         tsr_last_error());
  EXPECT_OK(tsr_queue_finish(queue)); /* reported once */
  tsr_buffer_destroy(l);
  tsr_buffer_destroy(t);
  tsr_buffer_destroy(loss);
}

static int test_device(void) {
  tsr_context *context;
  tsr_device *device;
  tsr_queue *queue;
  if (!open_device(&context, &device, &queue)) {
    printf("SKIPPED: no opencl:0 (%s)\n", tsr_last_error());
    return failures ? 1 : EXIT_SKIP;
  }
  test_buffers(device, queue);
  test_wrap(device, queue);
  test_events(queue);
  test_cross_entropy_target(device, queue);
  tsr_queue_destroy(queue);
  tsr_context_destroy(context);
  return failures ? 1 : 0;
}

/* rmsnorm of 3 rows of 70 on a fresh context; returns the debug log. */
static bool rmsnorm_run(char *log, size_t capacity) {
  enum { ROWS = 3, COLS = 70 };
  captured c;
  if (!capture_begin(&c))
    return false;
  tsr_context *context;
  tsr_device *device;
  tsr_queue *queue;
  bool opened = open_device(&context, &device, &queue);
  float x[ROWS * COLS], y[ROWS * COLS] = {0}, w[COLS];
  for (int i = 0; i < ROWS * COLS; i++)
    x[i] = (float)((i * 37) % 23) * 0.125f - 1.0f;
  for (int i = 0; i < COLS; i++)
    w[i] = 0.5f + (float)i / COLS;
  if (opened) {
    tsr_buffer *bx = NULL, *by = NULL, *bw = NULL;
    EXPECT_OK(tsr_buffer_create(device, sizeof x, &bx));
    EXPECT_OK(tsr_buffer_create(device, sizeof y, &by));
    EXPECT_OK(tsr_buffer_create(device, sizeof w, &bw));
    if (bx && by && bw) {
      EXPECT_OK(tsr_buffer_write(queue, bx, 0, x, sizeof x));
      EXPECT_OK(tsr_buffer_write(queue, bw, 0, w, sizeof w));
      int64_t shape[2] = {ROWS, COLS}, n[1] = {COLS};
      tsr_rmsnorm_desc d = {.struct_size = sizeof d, .eps = 1e-5f};
      d.x = tsr_tensor_make(bx, 0, TSR_DTYPE_F32, 2, shape);
      d.y = tsr_tensor_make(by, 0, TSR_DTYPE_F32, 2, shape);
      d.weight = tsr_tensor_make(bw, 0, TSR_DTYPE_F32, 1, n);
      EXPECT_OK(tsr_rmsnorm(queue, &d));
      EXPECT_OK(tsr_buffer_read(queue, by, 0, y, sizeof y));
    }
    tsr_buffer_destroy(bx);
    tsr_buffer_destroy(by);
    tsr_buffer_destroy(bw);
    tsr_queue_destroy(queue);
    tsr_context_destroy(context);
  }
  capture_end(&c, log, capacity);
  if (!opened)
    return false;
  for (int r = 0; r < ROWS; r++) {
    double ss = 0;
    for (int i = 0; i < COLS; i++)
      ss += (double)x[r * COLS + i] * x[r * COLS + i];
    double inv = 1.0 / sqrt(ss / COLS + 1e-5);
    for (int i = 0; i < COLS; i++) {
      double want = x[r * COLS + i] * inv * w[i];
      if (fabs(y[r * COLS + i] - want) > 1e-5 * (1 + fabs(want))) {
        fail("rmsnorm y[%d][%d] = %g, want %g", r, i, (double)y[r * COLS + i], want);
        return true;
      }
    }
  }
  return true;
}

static int corrupt_cache_files(const char *dir) { /* dir: under 1100 bytes */
  DIR *d = opendir(dir);
  int count = 0;
  if (!d)
    return 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    size_t n = strlen(e->d_name);
    if (n < 5 || strcmp(e->d_name + n - 4, ".bin") != 0)
      continue;
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "r+b");
    if (!f)
      continue;
    fseek(f, 40, SEEK_SET); /* inside the binary, past the header */
    fputs("corrupted by tessera's tests", f);
    fclose(f);
    count++;
  }
  closedir(d);
  return count;
}

static int test_cache(void) {
  char home[] = "/tmp/tessera-opencl-cache-XXXXXX";
  if (!mkdtemp(home)) {
    fail("cannot make a temporary cache directory");
    return 1;
  }
  setenv("XDG_CACHE_HOME", home, 1);
  setenv("TESSERA_LOG", "debug", 1);
  unsetenv("TESSERA_OPENCL_CACHE");
  static char log[65536];
  if (!rmsnorm_run(log, sizeof log)) {
    printf("SKIPPED: no opencl:0\n");
    return failures ? 1 : EXIT_SKIP;
  }
  if (!strstr(log, "rows.cl") || !strstr(log, "built from source") || !strstr(log, "cached as"))
    fail("the first run did not build and cache rows.cl:\n%s", log);
  rmsnorm_run(log, sizeof log);
  if (!strstr(log, "binary cache hit") || strstr(log, "built from source"))
    fail("the second run did not load every program from the cache:\n%s", log);
  char dir[1100];
  snprintf(dir, sizeof dir, "%s/tessera/opencl", home);
  if (corrupt_cache_files(dir) == 0)
    fail("no cache file under %s", dir);
  rmsnorm_run(log, sizeof log);
  if (!strstr(log, "unusable; building again") || !strstr(log, "built from source"))
    fail("a corrupted cache file was not rebuilt:\n%s", log);
  rmsnorm_run(log, sizeof log);
  if (!strstr(log, "binary cache hit") || strstr(log, "built from source"))
    fail("the rebuilt cache file was not used:\n%s", log);
  char command[1200];
  snprintf(command, sizeof command, "rm -rf '%s'", home);
  if (system(command) != 0)
    fail("cannot remove %s", home);
  return failures ? 1 : 0;
}

int main(int argc, char **argv) {
  const char *which = argc > 1 ? argv[1] : "";
  if (!strcmp(which, "no_loader"))
    return test_no_loader();
  if (!strcmp(which, "device"))
    return test_device();
  if (!strcmp(which, "cache"))
    return test_cache();
  fprintf(stderr, "usage: opencl_plugin_test no_loader|device|cache\n");
  return 2;
}
