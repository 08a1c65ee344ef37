/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of a GPU plugin through the public API: the CUDA plugin, or (built
 * with -DTEST_HIP_PLUGIN, by tests/hip) the HIP plugin, whose runtime
 * library TESSERA_HIP_RUNTIME names as TESSERA_CUDA_DRIVER names CUDA's.
 *   no_driver       with TESSERA_CUDA_DRIVER naming a missing library the
 *                   plugin still loads, reports zero devices, and logs why at
 *                   debug level; opening "cuda" fails cleanly.
 *   this_machine    with this machine's driver (if any): the plugin loads;
 *                   every GPU it reports has sane info and a working buffer
 *                   round trip, copy and event timing.
 *   check CLI [JUNIT]
 *                   runs `CLI check --device cuda:0` when a CUDA device is
 *                   present; exits 77 (ctest's skip code) when none is.
 * TESSERA_PLUGIN_PATH points at a plugins.d holding only the CUDA plugin. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tessera/tessera.h"

enum { EXIT_SKIP = 77 };

#ifdef TEST_HIP_PLUGIN
#define BACKEND "hip"
#define DRIVER_VARIABLE "TESSERA_HIP_RUNTIME"
#define MISSING_DRIVER "/nonexistent/libamdhip64-for-tessera-tests.so.6"
#define ARCH_PREFIX "gfx"
#else
#define BACKEND "cuda"
#define DRIVER_VARIABLE "TESSERA_CUDA_DRIVER"
#define MISSING_DRIVER "/nonexistent/libcuda-for-tessera-tests.so.1"
#define ARCH_PREFIX "sm_"
#endif

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

/* The report of the manifest named "cuda"; 0 when there is none. */
static int cuda_report(tsr_context *context, tsr_plugin_report *report) {
  uint32_t count = 0;
  if (tsr_plugin_count(context, &count) != TSR_OK)
    return 0;
  for (uint32_t i = 0; i < count; i++) {
    memset(report, 0, sizeof *report);
    report->struct_size = sizeof *report;
    if (tsr_plugin_get_report(context, i, report) == TSR_OK && strcmp(report->name, BACKEND) == 0)
      return 1;
  }
  return 0;
}

/* Number of devices whose selector starts with "cuda". */
static uint32_t cuda_devices(tsr_context *context) {
  uint32_t count = 0, found = 0;
  if (tsr_device_count(context, &count) != TSR_OK)
    return 0;
  for (uint32_t i = 0; i < count; i++) {
    tsr_device *device = NULL;
    tsr_device_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (tsr_device_get(context, i, &device) == TSR_OK &&
        tsr_device_get_info(device, &info) == TSR_OK && strcmp(info.backend, BACKEND) == 0)
      found++;
  }
  return found;
}

static int test_no_driver(void) {
  const char *missing = MISSING_DRIVER;
  setenv(DRIVER_VARIABLE, missing, 1);
  setenv("TESSERA_LOG", "debug", 1);
  /* Catch the debug log (stderr) in a file to look for the reason. */
  char log_path[] = "/tmp/tessera-" BACKEND "-log-XXXXXX";
  int log_fd = mkstemp(log_path);
  if (log_fd < 0) {
    fail("cannot make a temporary file for the log");
    return 1;
  }
  fflush(stderr);
  int saved_stderr = dup(2);
  dup2(log_fd, 2);
  tsr_context *context = NULL;
  tsr_status status = tsr_context_create(NULL, &context);
  fflush(stderr);
  dup2(saved_stderr, 2);
  close(saved_stderr);

  char log[16384] = "";
  lseek(log_fd, 0, SEEK_SET);
  ssize_t got = read(log_fd, log, sizeof log - 1);
  log[got > 0 ? got : 0] = '\0';
  close(log_fd);
  unlink(log_path);
  printf("---- debug log ----\n%s-------------------\n", log);

  if (status != TSR_OK) {
    fail("tsr_context_create: %s: %s", tsr_status_name(status), tsr_last_error());
    return 1;
  }
  tsr_plugin_report report;
  if (!cuda_report(context, &report)) {
    fail("no plugin report for the " BACKEND " manifest");
  } else {
    if (report.state != TSR_PLUGIN_LOADED)
      fail("the " BACKEND " plugin is not loaded (state %d: %s)", (int)report.state, report.reason);
    if (report.device_count != 0)
      fail("the " BACKEND " plugin reports %u devices without a driver", report.device_count);
  }
  if (cuda_devices(context) != 0)
    fail(BACKEND " devices are listed without a driver");
  if (!strstr(log, missing))
    fail("the debug log does not name the missing driver %s", missing);
  if (!strstr(log, "no devices"))
    fail("the debug log does not say that there are no devices");
  tsr_device *device = NULL;
  status = tsr_device_open(context, BACKEND, &device);
  if (status != TSR_ERROR_NOT_FOUND)
    fail("tsr_device_open(\"" BACKEND "\") returned %s, expected TSR_ERROR_NOT_FOUND",
         tsr_status_name(status));
  else if (tsr_last_error()[0] == '\0')
    fail("tsr_device_open(\"" BACKEND "\") failed without an error message");
  tsr_context_destroy(context);
  return failures ? 1 : 0;
}

/* A buffer round trip, a device copy and event timing on one GPU. */
static void exercise(tsr_device *device, const tsr_device_info *info) {
  enum { COUNT = 1 << 20 };
  unsigned *host = malloc(COUNT * sizeof *host), *back = malloc(COUNT * sizeof *back);
  tsr_buffer *a = NULL, *b = NULL;
  tsr_queue *queue = NULL;
  tsr_event *start = NULL, *end = NULL;
  if (!host || !back) {
    fail("out of host memory");
    goto done;
  }
  for (unsigned i = 0; i < COUNT; i++)
    host[i] = i * 2654435761u;
  if (tsr_buffer_create(device, COUNT * sizeof *host, &a) != TSR_OK ||
      tsr_buffer_create(device, COUNT * sizeof *host, &b) != TSR_OK ||
      tsr_queue_create(device, &queue) != TSR_OK) {
    fail("%s: buffers or queue: %s", info->selector, tsr_last_error());
    goto done;
  }
  if (tsr_buffer_write(queue, a, 0, host, COUNT * sizeof *host) != TSR_OK ||
      tsr_event_record(queue, &start) != TSR_OK ||
      tsr_buffer_copy(queue, a, 0, b, 0, COUNT * sizeof *host) != TSR_OK ||
      tsr_event_record(queue, &end) != TSR_OK ||
      tsr_buffer_read(queue, b, 0, back, COUNT * sizeof *back) != TSR_OK ||
      tsr_queue_finish(queue) != TSR_OK) {
    fail("%s: write/copy/read: %s", info->selector, tsr_last_error());
    goto done;
  }
  if (memcmp(host, back, COUNT * sizeof *host) != 0)
    fail("%s: the data read back differs from what was written", info->selector);
  double ms = -1.0;
  if (tsr_event_elapsed_ms(start, end, &ms) != TSR_OK || ms < 0.0)
    fail("%s: event timing: %s", info->selector, tsr_last_error());
  printf("%s: %s, %s, %u SMs, %s: 4 MiB copy in %.3f ms\n", info->selector, info->name, info->arch,
         info->compute_units, info->physical_id, ms);
done:
  tsr_event_destroy(start);
  tsr_event_destroy(end);
  tsr_queue_destroy(queue);
  tsr_buffer_destroy(a);
  tsr_buffer_destroy(b);
  free(host);
  free(back);
}

static int test_this_machine(void) {
  if (!getenv("TESSERA_TEST_KEEP_DRIVER"))
    unsetenv(DRIVER_VARIABLE);
  tsr_context *context = NULL;
  tsr_status status = tsr_context_create(NULL, &context);
  if (status != TSR_OK) {
    fail("tsr_context_create: %s: %s", tsr_status_name(status), tsr_last_error());
    return 1;
  }
  tsr_plugin_report report;
  if (!cuda_report(context, &report) || report.state != TSR_PLUGIN_LOADED)
    fail("the " BACKEND " plugin is not loaded");
  uint32_t count = 0;
  tsr_device_count(context, &count);
  for (uint32_t i = 0; i < count; i++) {
    tsr_device *device = NULL;
    tsr_device_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (tsr_device_get(context, i, &device) != TSR_OK ||
        tsr_device_get_info(device, &info) != TSR_OK) {
      fail("device %u: %s", i, tsr_last_error());
      continue;
    }
    if (strcmp(info.backend, BACKEND) != 0)
      continue;
    if (info.type != TSR_DEVICE_GPU || strncmp(info.arch, ARCH_PREFIX, 3) != 0 ||
        strncmp(info.physical_id, "GPU-", 4) != 0 || info.compute_units == 0 ||
        info.memory_bytes == 0)
      fail("%s: implausible info (type %d, arch %s, id %s, %u SMs)", info.selector, (int)info.type,
           info.arch, info.physical_id, info.compute_units);
    exercise(device, &info);
  }
  printf(BACKEND " plugin: %u device(s)\n", report.device_count);
  tsr_context_destroy(context);
  return failures ? 1 : 0;
}

static int test_check(const char *cli, const char *junit) {
  if (!getenv("TESSERA_TEST_KEEP_DRIVER"))
    unsetenv(DRIVER_VARIABLE);
  tsr_context *context = NULL;
  if (tsr_context_create(NULL, &context) != TSR_OK) {
    fail("tsr_context_create: %s", tsr_last_error());
    return 1;
  }
  uint32_t found = cuda_devices(context);
  tsr_context_destroy(context);
  if (found == 0) {
    printf("no " BACKEND " device here: skipped\n");
    return EXIT_SKIP;
  }
  fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    if (junit)
      execl(cli, cli, "check", "--device", BACKEND ":0", "--junit", junit, (char *)NULL);
    else
      execl(cli, cli, "check", "--device", BACKEND ":0", (char *)NULL);
    perror(cli);
    _exit(127);
  }
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child) {
    fail("cannot run %s", cli);
    return 1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "no_driver") == 0)
    return test_no_driver();
  if (argc >= 2 && strcmp(argv[1], "this_machine") == 0)
    return test_this_machine();
  if (argc >= 3 && strcmp(argv[1], "check") == 0)
    return test_check(argv[2], argc >= 4 ? argv[3] : NULL);
  fprintf(stderr, "usage: %s no_driver | this_machine | check CLI [JUNIT]\n", argv[0]);
  return 2;
}
