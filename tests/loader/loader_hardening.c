/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Loader hardening cases (run by loader_faults, one ctest each): paths that do
 * not fit the fixed buffers, files that are not regular files, environment
 * values the XDG spec says to ignore, caps that must be visible, and reasons
 * a user can act on. What each asserts:
 *
 *   library_too_long           a `library =` whose first 1023 bytes name a
 *                              real plugin: SKIPPED "too long", not loaded
 *   library_relative_long_dir  relative library that no longer fits once
 *                              joined to its manifest's long directory, and
 *                              that exists relative to the CWD: SKIPPED
 *                              "too long", not loaded from the CWD
 *   manifest_path_too_long     <dir>/<name>.conf over 1023 bytes, whose
 *                              truncation names another manifest: SKIPPED
 *                              "too long", the other one never read
 *   manifest_fifo              a FIFO x.conf: SKIPPED "not a regular file",
 *                              no hang (SIGALRM fails the case after 10 s)
 *   library_fifo               a FIFO as the library: the same
 *   xdg_config_relative        relative XDG_CONFIG_HOME is ignored (HOME's
 *                              ~/.config is used instead)
 *   home_relative              relative HOME is ignored
 *   same_library               two manifests, one library (one by a symlink):
 *                              the second SKIPPED "same library as plugin
 *                              'alpha'", one device
 *   insecure_permissions       TESSERA_LOG=debug notes a world-writable
 *                              plugins.d and manifest, and a manifest owned
 *                              by another user
 *   too_many_dirs              the 65th directory is named in a warning
 *   name_too_long              a 70-character manifest name: SKIPPED "63"
 *   plugin_name_too_long       a plugin whose table name does not fit a
 *                              device's backend field: SKIPPED "31"
 *   log_unknown_level          TESSERA_LOG=chatty warns exactly once
 *   filter_unknown_names       names in TESSERA_BACKENDS / _DISABLE_BACKENDS
 *                              that match no manifest: one warning each
 *   zero_devices_reason        a loaded plugin with no device: its last log
 *                              message (debug level) is its report's reason,
 *                              with TESSERA_LOG unset
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loader_test.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static void die(const char *what, const char *path) {
  fprintf(stderr, "%s %s: %s\n", what, path, strerror(errno));
  exit(1);
}

/* Creates <case_root>/<base>/d.../d... so that the absolute path of the last
 * directory is exactly `length` bytes; writes it to `out`. */
static void make_long_dir(char *out, size_t capacity, const char *base, size_t length) {
  make_dir(base);
  path_in_case(out, capacity, base);
  while (strlen(out) < length) {
    size_t remaining = length - strlen(out); /* including the '/' */
    size_t component = remaining > 201 ? 200 : remaining - 1;
    if (remaining > 201 && remaining - 201 < 2)
      component = 150; /* never leave a 1-byte remainder (a bare '/') */
    if (component == 0 || strlen(out) + 1 + component >= capacity) {
      fprintf(stderr, "make_long_dir: cannot reach %zu bytes\n", length);
      exit(1);
    }
    size_t at = strlen(out);
    out[at] = '/';
    memset(out + at + 1, 'd', component);
    out[at + 1 + component] = '\0';
    if (mkdir(out, 0755) != 0)
      die("cannot create", out);
  }
}

static void write_absolute(const char *path, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void write_absolute(const char *path, const char *fmt, ...) {
  FILE *file = fopen(path, "w");
  if (file == NULL)
    die("cannot write", path);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(file, fmt, ap);
  va_end(ap);
  if (fclose(file) != 0)
    die("cannot write", path);
}

static void make_symlink(const char *target, const char *path) {
  if (symlink(target, path) != 0)
    die("cannot create symlink", path);
}

/* The report whose manifest path contains `part`, without failing the case. */
static bool report_by_manifest(tsr_context *context, const char *part, tsr_plugin_report *out) {
  uint32_t count = 0;
  tsr_plugin_count(context, &count);
  for (uint32_t i = 0; i < count; i++) {
    tsr_plugin_report report = {.struct_size = sizeof report};
    if (tsr_plugin_get_report(context, i, &report) == TSR_OK &&
        strstr(report.manifest, part) != NULL) {
      *out = report;
      return true;
    }
  }
  return false;
}

static bool has_report(tsr_context *context, const char *name) {
  uint32_t count = 0;
  tsr_plugin_count(context, &count);
  for (uint32_t i = 0; i < count; i++) {
    tsr_plugin_report report = {.struct_size = sizeof report};
    if (tsr_plugin_get_report(context, i, &report) == TSR_OK && strcmp(report.name, name) == 0)
      return true;
  }
  return false;
}

static void expect_skipped_with(const tsr_plugin_report *report, const char *needle) {
  CHECK(report->state == TSR_PLUGIN_SKIPPED, "manifest %s: state %s, expected SKIPPED",
        report->manifest, state_name(report->state));
  CHECK(strstr(report->reason, needle) != NULL, "manifest %s: reason \"%s\" lacks \"%s\"",
        report->manifest, report->reason, needle);
}

static void on_alarm(int signal_number) {
  (void)signal_number;
  static const char message[] = "FAIL: tsr_context_create hung (no answer in 10 s)\n";
  ssize_t ignored = write(STDERR_FILENO, message, sizeof message - 1);
  (void)ignored;
  _exit(1);
}

/* Fails the case, instead of hanging until ctest's timeout, when discovery
 * blocks. */
static void fail_if_hung(void) {
  signal(SIGALRM, on_alarm);
  alarm(10);
}

/* ------------------------------------------------------------------------ */
/* Paths that do not fit                                                     */
/* ------------------------------------------------------------------------ */

static void case_library_too_long(void) {
  make_plugins_dir("plugins.d");
  char prefix[2048];
  const char *leaf = "/libsample-link-x.so";
  make_long_dir(prefix, sizeof prefix, "deep", 1023 - strlen(leaf));
  /* 1023 bytes that name the sample plugin... */
  strcat(prefix, leaf);
  CHECK(strlen(prefix) == 1023, "prefix is %zu bytes", strlen(prefix));
  make_symlink(LOADER_TEST_LIB_SAMPLE, prefix);
  /* ...and a library value that only starts with them. */
  write_text("plugins.d/long.conf", "library = %s.but-not-this-one\nabi = 1\narch = %s\n", prefix,
             LOADER_TEST_ARCH);
  search_dirs("plugins.d", NULL);
  tsr_context *context = open_context(NULL);
  tsr_plugin_report report;
  if (find_report(context, "long", NULL, &report))
    expect_skipped_with(&report, "too long");
  CHECK(devices_of(context, "sample") == 0, "a truncated library path was loaded");
  expect_cpu_device(context);
  tsr_context_destroy(context);
}

static void case_library_relative_long_dir(void) {
  make_plugins_dir("plugins.d");
  char deep[2048], manifest[2100], cwd_library[1024];
  make_long_dir(deep, sizeof deep, "deep", 1000);
  const char *relative = "rel/libsample-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx.so";
  snprintf(manifest, sizeof manifest, "%s/rel.conf", deep);
  write_absolute(manifest, "library = %s\nabi = 1\narch = %s\n", relative, LOADER_TEST_ARCH);
  /* The same relative path exists under the CWD: it must not be used. */
  make_dir("rel");
  path_in_case(cwd_library, sizeof cwd_library, relative);
  make_symlink(LOADER_TEST_LIB_SAMPLE, cwd_library);
  if (chdir(case_root) != 0)
    die("cannot chdir to", case_root);
  char path[4096];
  snprintf(path, sizeof path, "%s/plugins.d:%s", case_root, deep);
  isolate_environment(path);
  tsr_context *context = open_context(NULL);
  tsr_plugin_report report;
  if (find_report(context, "rel", NULL, &report))
    expect_skipped_with(&report, "too long");
  CHECK(devices_of(context, "sample") == 0, "the relative library was loaded from the CWD");
  expect_cpu_device(context);
  tsr_context_destroy(context);
}

static void case_manifest_path_too_long(void) {
  make_plugins_dir("plugins.d");
  char deep[2048], path[4096];
  make_long_dir(deep, sizeof deep, "deep", 1017);
  /* <deep>/sample.conf is 1029 bytes; its first 1023 are <deep>/sampl, a
   * manifest for the marker library, which must never be read. */
  snprintf(path, sizeof path, "%s/sample.conf", deep);
  write_absolute(path, "library = %s\nabi = 1\narch = %s\n", LOADER_TEST_LIB_SAMPLE,
                 LOADER_TEST_ARCH);
  snprintf(path, sizeof path, "%s/sampl", deep);
  write_absolute(path, "library = %s\nabi = 1\narch = %s\n", LOADER_TEST_LIB_MARKER,
                 LOADER_TEST_ARCH);
  snprintf(path, sizeof path, "%s/plugins.d:%s", case_root, deep);
  isolate_environment(path);
  tsr_context *context = open_context(NULL);
  tsr_plugin_report report;
  if (find_report(context, "sample", NULL, &report))
    expect_skipped_with(&report, "too long");
  CHECK(!marker_written(), "a truncated manifest path was read (the marker library loaded)");
  CHECK(devices_of(context, "sample") == 0, "a manifest whose path does not fit was loaded");
  expect_cpu_device(context);
  tsr_context_destroy(context);
}

/* ------------------------------------------------------------------------ */
/* Files that are not regular files                                          */
/* ------------------------------------------------------------------------ */

static void case_manifest_fifo(void) {
  make_plugins_dir("plugins.d");
  char fifo[1024];
  path_in_case(fifo, sizeof fifo, "plugins.d/fifo.conf");
  if (mkfifo(fifo, 0644) != 0)
    die("cannot create FIFO", fifo);
  fail_if_hung();
  run_single_broken("fifo", "not a regular file", NULL);
}

static void case_library_fifo(void) {
  make_plugins_dir("plugins.d");
  char fifo[1024];
  path_in_case(fifo, sizeof fifo, "plugins.d/libfifo.so");
  if (mkfifo(fifo, 0644) != 0)
    die("cannot create FIFO", fifo);
  write_manifest("plugins.d", "fifolib", fifo, LOADER_TEST_ARCH);
  fail_if_hung();
  run_single_broken("fifolib", "not a regular file", NULL);
}

/* ------------------------------------------------------------------------ */
/* Environment                                                               */
/* ------------------------------------------------------------------------ */

/* The default directories (XDG_CONFIG_HOME as given, NULL: unset), with
 * only the CPU plugin and this case's own manifests loaded (the build tree's
 * other plugins stay out). The CWD is the case root, where the relative
 * directories are. */
static tsr_context *open_default_dirs(const char *xdg_config_home, const char *own_names) {
  isolate_environment("");
  unsetenv("TESSERA_PLUGIN_PATH");
  if (xdg_config_home != NULL)
    setenv("XDG_CONFIG_HOME", xdg_config_home, 1);
  else
    unsetenv("XDG_CONFIG_HOME");
  if (chdir(case_root) != 0)
    die("cannot chdir to", case_root);
  tsr_context_options options = TSR_CONTEXT_OPTIONS_INIT;
  char backends[256];
  snprintf(backends, sizeof backends, "cpu,%s", own_names);
  options.backends = backends;
  return open_context(&options);
}

static void make_config_dir(const char *base, const char *name, const char *library) {
  char dir[256];
  make_dir(base);
  snprintf(dir, sizeof dir, "%s/tessera", base);
  make_dir(dir);
  snprintf(dir, sizeof dir, "%s/tessera/plugins.d", base);
  make_dir(dir);
  write_manifest(dir, name, library, LOADER_TEST_ARCH);
}

static void case_xdg_config_relative(void) {
  make_config_dir("relxdg", "relxdg", LOADER_TEST_LIB_MARKER);
  make_dir("home");
  make_config_dir("home/.config", "fromhome", LOADER_TEST_LIB_SAMPLE);
  char home[1024];
  path_in_case(home, sizeof home, "home");
  setenv("HOME", home, 1);
  /* The XDG Base Directory spec: a relative value is treated as unset, so
   * $HOME/.config is searched instead. */
  tsr_context *context = open_default_dirs("relxdg", "relxdg,fromhome");
  CHECK(!has_report(context, "relxdg"), "a relative XDG_CONFIG_HOME was searched");
  CHECK(!marker_written(), "a plugin under a relative XDG_CONFIG_HOME was loaded");
  expect_report(context, "fromhome", TSR_PLUGIN_LOADED, NULL);
  expect_cpu_device(context);
  tsr_context_destroy(context);
}

static void case_home_relative(void) {
  make_dir("relhome");
  make_config_dir("relhome/.config", "relhome", LOADER_TEST_LIB_MARKER);
  setenv("HOME", "relhome", 1);
  tsr_context *context = open_default_dirs(NULL, "relhome");
  CHECK(!has_report(context, "relhome"), "a relative HOME was searched");
  CHECK(!marker_written(), "a plugin under a relative HOME was loaded");
  expect_cpu_device(context);
  tsr_context_destroy(context);
}

/* ------------------------------------------------------------------------ */
/* One library, two manifests                                                */
/* ------------------------------------------------------------------------ */

static void case_same_library(void) {
  make_plugins_dir("plugins.d");
  char link[1024];
  path_in_case(link, sizeof link, "plugins.d/libsample-again.so");
  make_symlink(LOADER_TEST_LIB_SAMPLE, link);
  write_manifest("plugins.d", "alpha", LOADER_TEST_LIB_SAMPLE, LOADER_TEST_ARCH);
  write_manifest("plugins.d", "beta", link, LOADER_TEST_ARCH);
  search_dirs("plugins.d", NULL);
  tsr_context *context = open_context(NULL);
  expect_report(context, "alpha", TSR_PLUGIN_LOADED, NULL);
  expect_report(context, "beta", TSR_PLUGIN_SKIPPED, "same library as plugin 'alpha'", NULL);
  CHECK(devices_of(context, "sample") == 1, "%u sample devices, expected 1",
        devices_of(context, "sample"));
  tsr_device *device = NULL;
  CHECK(tsr_device_open(context, "sample:0", &device) == TSR_OK, "sample:0: %s", tsr_last_error());
  expect_cpu_device(context);
  tsr_context_destroy(context);
}

/* ------------------------------------------------------------------------ */
/* Permissions and ownership (debug notes)                                   */
/* ------------------------------------------------------------------------ */

static void case_insecure_permissions(void) {
  make_plugins_dir("plugins.d");
  write_manifest("plugins.d", "sample", LOADER_TEST_LIB_SAMPLE, LOADER_TEST_ARCH);
  write_manifest("plugins.d", "noentry", LOADER_TEST_LIB_NO_ENTRY, LOADER_TEST_ARCH);
  char dir[1024], writable[1024], foreign[1024];
  path_in_case(dir, sizeof dir, "plugins.d");
  path_in_case(writable, sizeof writable, "plugins.d/sample.conf");
  path_in_case(foreign, sizeof foreign, "plugins.d/noentry.conf");
  if (chmod(dir, 0777) != 0 || chmod(writable, 0666) != 0)
    die("cannot chmod in", dir);
  bool chowned = geteuid() == 0 && chown(foreign, 4321, 4321) == 0;
  if (!chowned)
    printf("not root: the other-owner note is not checked\n");
  search_dirs("plugins.d", NULL);
  setenv("TESSERA_LOG", "debug", 1);
  capture_stderr_begin("stderr.log");
  tsr_context *context = open_context(NULL);
  const char *log = capture_stderr_end();
  CHECK(count_occurrences(log, "world-writable") >= 2,
        "no debug note for a world-writable plugins.d and manifest");
  char needle[1100];
  snprintf(needle, sizeof needle, "%s: world-writable", dir);
  CHECK(strstr(log, needle) != NULL, "no note \"%s\"", needle);
  snprintf(needle, sizeof needle, "%s: world-writable", writable);
  CHECK(strstr(log, needle) != NULL, "no note \"%s\"", needle);
  if (chowned) {
    snprintf(needle, sizeof needle, "%s: owned by uid 4321", foreign);
    CHECK(strstr(log, needle) != NULL, "no note \"%s\"", needle);
  }
  expect_report(context, "sample", TSR_PLUGIN_LOADED, NULL);
  expect_cpu_device(context);
  tsr_context_destroy(context);
}

/* ------------------------------------------------------------------------ */
/* Caps that must be visible                                                 */
/* ------------------------------------------------------------------------ */

static void case_too_many_dirs(void) {
  make_plugins_dir("plugins.d");
  make_dir("extra.d");
  write_manifest("extra.d", "sample", LOADER_TEST_LIB_SAMPLE, LOADER_TEST_ARCH);
  /* plugins.d, 63 missing directories, then extra.d as the 65th. */
  char path[16384], extra[1024];
  int used = snprintf(path, sizeof path, "%s/plugins.d", case_root);
  for (int i = 2; i <= 64; i++)
    used += snprintf(path + used, sizeof path - (size_t)used, ":%s/missing-%d.d", case_root, i);
  path_in_case(extra, sizeof extra, "extra.d");
  snprintf(path + used, sizeof path - (size_t)used, ":%s", extra);
  isolate_environment(path);
  setenv("TESSERA_LOG", "warn", 1);
  capture_stderr_begin("stderr.log");
  tsr_context *context = open_context(NULL);
  const char *log = capture_stderr_end();
  CHECK(strstr(log, extra) != NULL, "the 65th directory %s is not named in a warning", extra);
  CHECK(strstr(log, "64") != NULL, "the warning does not give the limit (64)");
  CHECK(devices_of(context, "sample") == 0, "the 65th directory was searched");
  expect_cpu_device(context);
  tsr_context_destroy(context);
}

static void case_name_too_long(void) {
  make_plugins_dir("plugins.d");
  char name[80];
  memset(name, 'n', 70);
  name[70] = '\0';
  write_manifest("plugins.d", name, LOADER_TEST_LIB_SAMPLE, LOADER_TEST_ARCH);
  search_dirs("plugins.d", NULL);
  tsr_context *context = open_context(NULL);
  tsr_plugin_report report;
  CHECK(report_by_manifest(context, name, &report), "no report for the 70-character name");
  if (report_by_manifest(context, name, &report))
    expect_skipped_with(&report, "63");
  CHECK(devices_of(context, "sample") == 0, "a manifest with a cut name was loaded");
  expect_cpu_device(context);
  tsr_context_destroy(context);
}

static void case_plugin_name_too_long(void) {
  make_plugins_dir("plugins.d");
  write_manifest("plugins.d", "longname", LOADER_TEST_LIB_LONG_NAME, LOADER_TEST_ARCH);
  run_single_broken("longname", "31", NULL);
}

/* ------------------------------------------------------------------------ */
/* Environment names                                                         */
/* ------------------------------------------------------------------------ */

static void case_log_unknown_level(void) {
  make_plugins_dir("plugins.d");
  write_manifest("plugins.d", "noentry", LOADER_TEST_LIB_NO_ENTRY, LOADER_TEST_ARCH);
  search_dirs("plugins.d", NULL);
  setenv("TESSERA_LOG", "chatty", 1);
  capture_stderr_begin("stderr.log");
  for (int i = 0; i < 2; i++)
    tsr_context_destroy(open_context(NULL));
  const char *log = capture_stderr_end();
  CHECK(count_occurrences(log, "TESSERA_LOG") == 1, "%d warnings about TESSERA_LOG, expected 1",
        count_occurrences(log, "TESSERA_LOG"));
  CHECK(strstr(log, "chatty") != NULL, "the warning does not quote the value");
  /* Unknown means the default (warn): the info-level skip note stays out. */
  CHECK(strstr(log, "noentry") == NULL, "an unknown TESSERA_LOG logged below warn");
}

static void case_filter_unknown_names(void) {
  make_plugins_dir("plugins.d");
  write_manifest("plugins.d", "sample", LOADER_TEST_LIB_SAMPLE, LOADER_TEST_ARCH);
  search_dirs("plugins.d", NULL);
  setenv("TESSERA_LOG", "warn", 1);
  setenv("TESSERA_BACKENDS", "cpu, sample,nosuch", 1);
  setenv("TESSERA_DISABLE_BACKENDS", "alsonot,sample", 1);
  capture_stderr_begin("stderr.log");
  tsr_context *context = open_context(NULL);
  const char *log = capture_stderr_end();
  CHECK(count_occurrences(log, "'nosuch'") == 1, "%d warnings for 'nosuch', expected 1",
        count_occurrences(log, "'nosuch'"));
  CHECK(count_occurrences(log, "'alsonot'") == 1, "%d warnings for 'alsonot', expected 1",
        count_occurrences(log, "'alsonot'"));
  CHECK(strstr(log, "'cpu'") == NULL && strstr(log, "'sample'") == NULL,
        "a warning for a name that has a manifest");
  CHECK(strstr(log, "TESSERA_BACKENDS") != NULL && strstr(log, "TESSERA_DISABLE_BACKENDS"),
        "the warnings do not say which variable");
  expect_report(context, "sample", TSR_PLUGIN_FILTERED, NULL);
  expect_cpu_device(context);
  tsr_context_destroy(context);
}

/* ------------------------------------------------------------------------ */
/* Why a loaded plugin has no device                                         */
/* ------------------------------------------------------------------------ */

static void case_zero_devices_reason(void) {
  make_plugins_dir("plugins.d");
  write_manifest("plugins.d", "nodevices", LOADER_TEST_LIB_NO_DEVICES, LOADER_TEST_ARCH);
  search_dirs("plugins.d", NULL);
  unsetenv("TESSERA_LOG");
  tsr_context *context = open_context(NULL);
  expect_report(context, "nodevices", TSR_PLUGIN_LOADED,
                "no widget found: /dev/widget0 is missing (fixture)", NULL);
  tsr_plugin_report report;
  if (find_report(context, "nodevices", NULL, &report))
    CHECK(report.device_count == 0, "%u devices", report.device_count);
  expect_cpu_device(context);
  tsr_context_destroy(context);
}

/* ------------------------------------------------------------------------ */

const loader_case loader_hardening_cases[] = {
    {"library_too_long", case_library_too_long},
    {"library_relative_long_dir", case_library_relative_long_dir},
    {"manifest_path_too_long", case_manifest_path_too_long},
    {"manifest_fifo", case_manifest_fifo},
    {"library_fifo", case_library_fifo},
    {"xdg_config_relative", case_xdg_config_relative},
    {"home_relative", case_home_relative},
    {"same_library", case_same_library},
    {"insecure_permissions", case_insecure_permissions},
    {"too_many_dirs", case_too_many_dirs},
    {"name_too_long", case_name_too_long},
    {"plugin_name_too_long", case_plugin_name_too_long},
    {"log_unknown_level", case_log_unknown_level},
    {"filter_unknown_names", case_filter_unknown_names},
    {"zero_devices_reason", case_zero_devices_reason},
};
const size_t loader_hardening_case_count =
    sizeof loader_hardening_cases / sizeof loader_hardening_cases[0];
