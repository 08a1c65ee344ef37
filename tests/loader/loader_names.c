/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cases for the manifest's `name =` key and per-architecture manifest files
 * (what Debian packages install: cpu.x86_64-linux-gnu.conf with name = cpu).
 * Run by loader_faults, one ctest each:
 *
 *   name_key_filter     cpu.test-arch.conf and sample.test-arch.conf with
 *                       name = cpu / sample: TESSERA_BACKENDS=cpu loads cpu
 *                       (report name "cpu"), filters sample and warns about
 *                       nothing; TESSERA_DISABLE_BACKENDS=cpu filters cpu only
 *   name_key_old_style  cpu.conf without name = is still "cpu" (file name),
 *                       and TESSERA_BACKENDS=cpu keeps it
 *   name_key_multiarch  name = cpu three times: another arch's manifest
 *                       sorted before and after this arch's one: those two
 *                       SKIPPED for "arch" (never "duplicate", never loaded),
 *                       this arch's LOADED, with and without TESSERA_BACKENDS
 *   name_key_duplicate  cpu.conf and zz-cpu.conf with name = cpu, both this
 *                       arch: the second SKIPPED "duplicate name", not loaded
 *   name_key_invalid    name = a,b / an empty name / a 64-character name:
 *                       SKIPPED with "name" in the reason, reported under the
 *                       file name; the CPU plugin still loads
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader_test.h"

/* A manifest file `relative` (in the case root) with `name = <name>`. */
static void write_named(const char *relative, const char *name, const char *library,
                        const char *arch) {
  write_text(relative, "# loader name test\nname = %s\nlibrary = %s\nabi = 2\narch = %s\n", name,
             library, arch);
}

/* Checks the report of manifest file `file` (named `name`): state, and a
 * reason holding `needle` (NULL: anything). */
static void expect_file(tsr_context *context, const char *name, const char *file,
                        tsr_plugin_state state, const char *needle) {
  tsr_plugin_report report;
  if (!find_report(context, name, file, &report))
    return;
  CHECK(report.state == state, "%s: state %s, expected %s (reason \"%s\")", file,
        state_name(report.state), state_name(state), report.reason);
  if (needle)
    CHECK(strstr(report.reason, needle) != NULL, "%s: reason \"%s\" lacks \"%s\"", file,
          report.reason, needle);
}

static void case_name_key_filter(void) {
  make_dir("plugins.d");
  write_named("plugins.d/cpu.test-arch.conf", "cpu", LOADER_TEST_LIB_CPU, LOADER_TEST_ARCH);
  write_named("plugins.d/sample.test-arch.conf", "sample", LOADER_TEST_LIB_SAMPLE,
              LOADER_TEST_ARCH);
  search_dirs("plugins.d", NULL);
  setenv("TESSERA_BACKENDS", "cpu", 1);
  capture_stderr_begin("filter.log");
  tsr_context *context = open_context(NULL);
  const char *log = capture_stderr_end();
  expect_file(context, "cpu", "/cpu.test-arch.conf", TSR_PLUGIN_LOADED, NULL);
  expect_file(context, "sample", "/sample.test-arch.conf", TSR_PLUGIN_FILTERED, NULL);
  CHECK(devices_of(context, "cpu") >= 1, "no cpu device");
  CHECK(devices_of(context, "sample") == 0, "the filtered sample plugin has a device");
  CHECK(strstr(log, "'cpu'") == NULL, "TESSERA_BACKENDS=cpu warned although name = cpu exists");
  tsr_context_destroy(context);

  unsetenv("TESSERA_BACKENDS");
  setenv("TESSERA_DISABLE_BACKENDS", "cpu", 1);
  context = open_context(NULL);
  expect_file(context, "cpu", "/cpu.test-arch.conf", TSR_PLUGIN_FILTERED, NULL);
  expect_file(context, "sample", "/sample.test-arch.conf", TSR_PLUGIN_LOADED, NULL);
  CHECK(devices_of(context, "cpu") == 0, "TESSERA_DISABLE_BACKENDS=cpu left a cpu device");
  tsr_context_destroy(context);
}

static void case_name_key_old_style(void) {
  make_plugins_dir("plugins.d"); /* cpu.conf as the build writes it for tests: no name = */
  search_dirs("plugins.d", NULL);
  setenv("TESSERA_BACKENDS", "cpu", 1);
  tsr_context *context = open_context(NULL);
  expect_file(context, "cpu", "/cpu.conf", TSR_PLUGIN_LOADED, NULL);
  expect_cpu_device(context);
  tsr_context_destroy(context);
}

static void case_name_key_multiarch(void) {
  make_dir("plugins.d");
  write_named("plugins.d/cpu.a-other.conf", "cpu", LOADER_TEST_LIB_MARKER, LOADER_TEST_OTHER_ARCH);
  write_named("plugins.d/cpu.b-this.conf", "cpu", LOADER_TEST_LIB_CPU, LOADER_TEST_ARCH);
  write_named("plugins.d/cpu.c-other.conf", "cpu", LOADER_TEST_LIB_MARKER, LOADER_TEST_OTHER_ARCH);
  search_dirs("plugins.d", NULL);
  for (int filtered = 0; filtered < 2; filtered++) {
    if (filtered)
      setenv("TESSERA_BACKENDS", "cpu", 1);
    tsr_context *context = open_context(NULL);
    expect_file(context, "cpu", "/cpu.a-other.conf", TSR_PLUGIN_SKIPPED, "arch");
    expect_file(context, "cpu", "/cpu.b-this.conf", TSR_PLUGIN_LOADED, NULL);
    expect_file(context, "cpu", "/cpu.c-other.conf", TSR_PLUGIN_SKIPPED, "arch");
    CHECK(devices_of(context, "cpu") >= 1, "no cpu device (TESSERA_BACKENDS %s)",
          filtered ? "cpu" : "unset");
    tsr_context_destroy(context);
  }
  CHECK(!marker_written(), "another architecture's library was loaded");
}

static void case_name_key_duplicate(void) {
  make_plugins_dir("plugins.d");
  write_named("plugins.d/zz-cpu.conf", "cpu", LOADER_TEST_LIB_MARKER, LOADER_TEST_ARCH);
  search_dirs("plugins.d", NULL);
  tsr_context *context = open_context(NULL);
  expect_file(context, "cpu", "/cpu.conf", TSR_PLUGIN_LOADED, NULL);
  expect_file(context, "cpu", "/zz-cpu.conf", TSR_PLUGIN_SKIPPED, "duplicate name");
  CHECK(!marker_written(), "the duplicate's library was loaded");
  tsr_context_destroy(context);
}

static void case_name_key_invalid(void) {
  make_plugins_dir("plugins.d");
  write_named("plugins.d/comma.conf", "a,b", LOADER_TEST_LIB_MARKER, LOADER_TEST_ARCH);
  write_named("plugins.d/empty.conf", "", LOADER_TEST_LIB_MARKER, LOADER_TEST_ARCH);
  char long_name[65];
  memset(long_name, 'n', 64);
  long_name[64] = '\0';
  write_named("plugins.d/long.conf", long_name, LOADER_TEST_LIB_MARKER, LOADER_TEST_ARCH);
  search_dirs("plugins.d", NULL);
  tsr_context *context = open_context(NULL);
  expect_file(context, "comma", "/comma.conf", TSR_PLUGIN_SKIPPED, "name");
  expect_file(context, "empty", "/empty.conf", TSR_PLUGIN_SKIPPED, "name");
  expect_file(context, "long", "/long.conf", TSR_PLUGIN_SKIPPED, "name too long");
  CHECK(!marker_written(), "a manifest with a bad name was loaded");
  expect_cpu_device(context);
  tsr_context_destroy(context);
}

const loader_case loader_names_cases[] = {
    {"name_key_filter", case_name_key_filter},
    {"name_key_old_style", case_name_key_old_style},
    {"name_key_multiarch", case_name_key_multiarch},
    {"name_key_duplicate", case_name_key_duplicate},
    {"name_key_invalid", case_name_key_invalid},
};
const size_t loader_names_case_count = sizeof loader_names_cases / sizeof loader_names_cases[0];
