/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the loader test cases (loader_faults.c, loader_hardening.c):
 * the temporary tree of a case, its environment, and reading reports back. */
#include "loader_test.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int loader_failures;

/* ------------------------------------------------------------------------ */
/* Files and directories of a case                                           */
/* ------------------------------------------------------------------------ */

/* Root of this case's temporary tree: <root>/plugins.d, <root>/second.d, ... */
char case_root[512];

void path_in_case(char *out, size_t capacity, const char *relative) {
  snprintf(out, capacity, "%s/%s", case_root, relative);
}

void make_case_root(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(case_root, sizeof case_root, "%s/tessera-loader-XXXXXX",
           tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
  if (mkdtemp(case_root) == NULL) {
    fprintf(stderr, "cannot create a temporary directory %s: %s\n", case_root, strerror(errno));
    exit(1);
  }
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  (void)st;
  (void)type;
  (void)ftw;
  if (remove(path) != 0)
    fprintf(stderr, "warning: cannot remove %s: %s\n", path, strerror(errno));
  return 0;
}

void remove_case_root(void) {
  if (case_root[0] != '\0')
    nftw(case_root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void make_dir(const char *relative) {
  char path[1024];
  path_in_case(path, sizeof path, relative);
  if (mkdir(path, 0755) != 0) {
    fprintf(stderr, "cannot create %s: %s\n", path, strerror(errno));
    exit(1);
  }
}

void write_bytes(const char *relative, const void *bytes, size_t count) {
  char path[1024];
  path_in_case(path, sizeof path, relative);
  FILE *file = fopen(path, "wb");
  if (file == NULL || fwrite(bytes, 1, count, file) != count || fclose(file) != 0) {
    fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
    exit(1);
  }
}

void write_text(const char *relative, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void write_text(const char *relative, const char *fmt, ...) {
  char text[4096];
  va_list ap;
  va_start(ap, fmt);
  int length = vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  if (length < 0 || (size_t)length >= sizeof text) {
    fprintf(stderr, "text for %s too long\n", relative);
    exit(1);
  }
  write_bytes(relative, text, (size_t)length);
}

void read_file(const char *path, char *out, size_t capacity) {
  FILE *file = fopen(path, "rb");
  size_t count = 0;
  if (file != NULL) {
    count = fread(out, 1, capacity - 1, file);
    fclose(file);
  } else {
    fprintf(stderr, "cannot read %s: %s\n", path, strerror(errno));
    exit(1);
  }
  out[count] = '\0';
}

/* The build writes the real CPU plugin's manifest (absolute library path);
 * every case gets a copy in its plugins.d. */
void add_cpu_manifest(const char *dir) {
  char text[4096], relative[256];
  read_file(LOADER_TEST_CPU_MANIFEST, text, sizeof text);
  snprintf(relative, sizeof relative, "%s/cpu.conf", dir);
  write_text(relative, "%s", text);
}

void write_manifest(const char *dir, const char *name, const char *library, const char *arch) {
  char relative[256];
  snprintf(relative, sizeof relative, "%s/%s.conf", dir, name);
  write_text(relative, "# loader fault test fixture\nlibrary = %s\nabi = 1\narch = %s\n", library,
             arch);
}

/* A plugins.d holding the CPU manifest, as every case starts. */
void make_plugins_dir(const char *dir) {
  make_dir(dir);
  add_cpu_manifest(dir);
}

/* ------------------------------------------------------------------------ */
/* Environment                                                               */
/* ------------------------------------------------------------------------ */

/* Only this case's directories are searched; nothing of the caller's
 * environment selects or filters. TESSERA_LOG is left alone for debugging. */
void isolate_environment(const char *plugin_path) {
  char xdg[1024], marker[1024];
  unsetenv("TESSERA_BACKENDS");
  unsetenv("TESSERA_DISABLE_BACKENDS");
  unsetenv("TESSERA_ADD_PLUGIN_PATH");
  unsetenv("TESSERA_DEVICE");
  unsetenv("TESSERA_CONFIG");
  path_in_case(xdg, sizeof xdg, "xdg");
  setenv("XDG_CONFIG_HOME", xdg, 1);
  path_in_case(marker, sizeof marker, "marker-written");
  setenv("TESSERA_TEST_MARKER", marker, 1);
  setenv("TESSERA_PLUGIN_PATH", plugin_path, 1);
}

/* TESSERA_PLUGIN_PATH of directories inside the case root. */
void search_dirs(const char *first, const char *second) {
  char path[2048];
  if (second == NULL)
    snprintf(path, sizeof path, "%s/%s", case_root, first);
  else
    snprintf(path, sizeof path, "%s/%s:%s/%s", case_root, first, case_root, second);
  isolate_environment(path);
}

bool marker_written(void) {
  return access(getenv("TESSERA_TEST_MARKER"), F_OK) == 0;
}

/* ------------------------------------------------------------------------ */
/* Context, reports and devices                                              */
/* ------------------------------------------------------------------------ */

const char *state_name(tsr_plugin_state state) {
  switch (state) {
  case TSR_PLUGIN_LOADED:
    return "LOADED";
  case TSR_PLUGIN_SKIPPED:
    return "SKIPPED";
  case TSR_PLUGIN_FILTERED:
    return "FILTERED";
  }
  return "?";
}

tsr_context *open_context(const tsr_context_options *options) {
  tsr_context *context = NULL;
  tsr_status status = tsr_context_create(options, &context);
  if (status != TSR_OK || context == NULL) {
    fprintf(stderr, "FAIL: tsr_context_create: %s: %s\n", tsr_status_name(status),
            tsr_last_error());
    exit(1);
  }
  uint32_t count = 0;
  tsr_plugin_count(context, &count);
  for (uint32_t i = 0; i < count; i++) {
    tsr_plugin_report report = {.struct_size = sizeof report};
    if (tsr_plugin_get_report(context, i, &report) != TSR_OK)
      continue;
    printf("report %u: %-10s %-8s abi %u devices %u manifest %s library %s reason \"%s\"\n", i,
           report.name, state_name(report.state), report.abi_version, report.device_count,
           report.manifest, report.library, report.reason);
  }
  return context;
}

/* The report of manifest `name` whose path contains `manifest_part` (NULL:
 * any). Fails the case when there is none. */
bool find_report(tsr_context *context, const char *name, const char *manifest_part,
                 tsr_plugin_report *out) {
  uint32_t count = 0;
  CHECK(tsr_plugin_count(context, &count) == TSR_OK, "tsr_plugin_count: %s", tsr_last_error());
  for (uint32_t i = 0; i < count; i++) {
    tsr_plugin_report report = {.struct_size = sizeof report};
    if (tsr_plugin_get_report(context, i, &report) != TSR_OK)
      continue;
    if (strcmp(report.name, name) == 0 &&
        (manifest_part == NULL || strstr(report.manifest, manifest_part) != NULL)) {
      *out = report;
      return true;
    }
  }
  CHECK(false, "no plugin report for manifest \"%s\"%s%s", name, manifest_part ? " in " : "",
        manifest_part ? manifest_part : "");
  return false;
}

/* Checks state and that the reason contains every one of the (NULL-ended)
 * substrings. */
void expect_report(tsr_context *context, const char *name, tsr_plugin_state state, ...) {
  tsr_plugin_report report;
  if (!find_report(context, name, NULL, &report))
    return;
  CHECK(report.state == state, "manifest \"%s\": state %s, expected %s (reason \"%s\")", name,
        state_name(report.state), state_name(state), report.reason);
  va_list ap;
  va_start(ap, state);
  for (const char *needle = va_arg(ap, const char *); needle != NULL;
       needle = va_arg(ap, const char *))
    CHECK(strstr(report.reason, needle) != NULL,
          "manifest \"%s\": reason \"%s\" does not contain \"%s\"", name, report.reason, needle);
  va_end(ap);
  if (state != TSR_PLUGIN_LOADED)
    CHECK(report.device_count == 0 && report.abi_version == 0,
          "manifest \"%s\" was not loaded but reports %u devices, abi %u", name,
          report.device_count, report.abi_version);
}

/* Devices whose backend is `backend`. */
uint32_t devices_of(tsr_context *context, const char *backend) {
  uint32_t count = 0, matching = 0;
  CHECK(tsr_device_count(context, &count) == TSR_OK, "tsr_device_count: %s", tsr_last_error());
  for (uint32_t i = 0; i < count; i++) {
    tsr_device *device = NULL;
    tsr_device_info info = {.struct_size = sizeof info};
    if (tsr_device_get(context, i, &device) != TSR_OK ||
        tsr_device_get_info(device, &info) != TSR_OK) {
      CHECK(false, "device %u: %s", i, tsr_last_error());
      continue;
    }
    if (strcmp(info.backend, backend) == 0)
      matching++;
  }
  return matching;
}

/* The point of every fault case: the good plugin still works. */
void expect_cpu_device(tsr_context *context) {
  uint32_t count = 0;
  tsr_device_count(context, &count);
  CHECK(count >= 1, "no device at all");
  CHECK(devices_of(context, "cpu") >= 1, "no device with backend \"cpu\"");
  expect_report(context, "cpu", TSR_PLUGIN_LOADED, NULL);
}

/* One broken manifest `name` in plugins.d next to cpu.conf: skipped with a
 * reason containing the substrings, CPU still there. */
void run_single_broken(const char *name, ...) {
  search_dirs("plugins.d", NULL);
  tsr_context *context = open_context(NULL);
  tsr_plugin_report report;
  if (find_report(context, name, NULL, &report)) {
    CHECK(report.state == TSR_PLUGIN_SKIPPED, "manifest \"%s\": state %s, expected SKIPPED", name,
          state_name(report.state));
    va_list ap;
    va_start(ap, name);
    for (const char *needle = va_arg(ap, const char *); needle != NULL;
         needle = va_arg(ap, const char *))
      CHECK(strstr(report.reason, needle) != NULL,
            "manifest \"%s\": reason \"%s\" does not contain \"%s\"", name, report.reason, needle);
    va_end(ap);
  }
  expect_cpu_device(context);
  tsr_context_destroy(context);
}

/* ------------------------------------------------------------------------ */
/* stderr of the library                                                     */
/* ------------------------------------------------------------------------ */

static int saved_stderr = -1;
static char capture_path[1024];

void capture_stderr_begin(const char *name) {
  path_in_case(capture_path, sizeof capture_path, name);
  fflush(stderr);
  saved_stderr = dup(STDERR_FILENO);
  int log_fd = open(capture_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (saved_stderr < 0 || log_fd < 0 || dup2(log_fd, STDERR_FILENO) < 0) {
    perror("redirecting stderr");
    exit(1);
  }
  close(log_fd);
}

const char *capture_stderr_end(void) {
  static char log[65536];
  fflush(stderr);
  dup2(saved_stderr, STDERR_FILENO);
  close(saved_stderr);
  saved_stderr = -1;
  read_file(capture_path, log, sizeof log);
  printf("---- captured stderr (%s) ----\n%s---- end ----\n", capture_path, log);
  return log;
}

static int saved_stdout = -1, saved_both_stderr = -1;
static char capture_out_path[1024], capture_err_path[1024];

/* Points `fd` at a fresh file `path`; returns the old descriptor's copy. */
static int redirect(int fd, const char *path) {
  int saved = dup(fd);
  int file = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (saved < 0 || file < 0 || dup2(file, fd) < 0) {
    perror("redirecting output");
    exit(1);
  }
  close(file);
  return saved;
}

void capture_output_begin(void) {
  path_in_case(capture_out_path, sizeof capture_out_path, "stdout.log");
  path_in_case(capture_err_path, sizeof capture_err_path, "stderr.log");
  fflush(stdout);
  fflush(stderr);
  saved_stdout = redirect(STDOUT_FILENO, capture_out_path);
  saved_both_stderr = redirect(STDERR_FILENO, capture_err_path);
}

void capture_output_end(char *out, size_t out_capacity, char *err, size_t err_capacity) {
  fflush(stdout);
  fflush(stderr);
  dup2(saved_stdout, STDOUT_FILENO);
  dup2(saved_both_stderr, STDERR_FILENO);
  close(saved_stdout);
  close(saved_both_stderr);
  saved_stdout = saved_both_stderr = -1;
  read_file(capture_out_path, out, out_capacity);
  read_file(capture_err_path, err, err_capacity);
  printf("---- captured stdout ----\n%s---- captured stderr ----\n%s---- end ----\n", out, err);
}

int count_occurrences(const char *text, const char *needle) {
  int count = 0;
  size_t length = strlen(needle);
  for (const char *at = strstr(text, needle); at != NULL; at = strstr(at + length, needle))
    count++;
  return count;
}
