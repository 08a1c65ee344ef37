/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Loader fault tests: purpose-built broken plugins and manifests, each case in
 * its own temporary plugins.d next to a manifest for the real CPU plugin. A
 * broken plugin must be skipped with a reason that says the right thing, and
 * the CPU device must still appear. Nothing in discovery may abort.
 *
 *   usage: loader_faults <case>      (loader_faults --list names the cases)
 *
 * The hardening cases (paths that do not fit, FIFOs, relative XDG_CONFIG_HOME
 * and HOME, one library named twice, visible limits, environment warnings,
 * why a plugin has no device) are in loader_hardening.c, the cases for the
 * plugin rules of docs/PLUGINS.md (broken tables, no printing, unknown ops,
 * set_error, environment) in loader_rules.c, the `name =` key and
 * per-architecture manifests in loader_names.c, the helpers in loader_util.c.
 *
 * Reason substrings asserted (report.reason of the broken manifest, state
 * SKIPPED unless noted; matching is case-sensitive):
 *   library_missing_absolute   "not found" and the library path
 *   library_missing_relative   "not found"; report.library ends with
 *                              "plugins.d/missing/libtessera-missing.so.1"
 *   library_missing_bare       "libtessera-nothing-here.so.1"
 *   not_shared_object          "not a shared object" or "invalid ELF header"
 *   no_entry                   "tsr_plugin_entry"
 *   no_negotiate               "tsr_plugin_negotiate"
 *   abi_newer                  "newer"
 *   abi_older                  "older"
 *   init_fails                 "init" and the plugin's own reason
 *                              "the widget driver refused to start (fixture)"
 *   wrong_arch                 "arch" and the manifest's arch name; the
 *                              library's constructor did not run
 *   duplicate_name             "duplicate" (on the second directory's manifest)
 *   manifest_is_directory      "manifest"
 *   manifest_dangling_symlink  "manifest"
 *   garbage_binary             "manifest"
 *   garbage_no_library         "manifest" and "library"
 *   garbage_no_equals          "manifest" and "line 2"
 *   garbage_bad_abi            "manifest" and "line 2"
 *   filter_*                   state FILTERED (no reason asserted)
 *   unknown_key_ignored        state LOADED: unknown keys are ignored
 *   debug_log                  stderr with TESSERA_LOG=debug contains "noentry"
 *                              and "tsr_plugin_entry" (the skip), and
 *                              "unknown key" (the ignored manifest key)
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loader_test.h"

/* ------------------------------------------------------------------------ */
/* Cases                                                                     */
/* ------------------------------------------------------------------------ */

static void case_library_missing_absolute(void) {
  make_plugins_dir("plugins.d");
  write_manifest("plugins.d", "missing", "/nonexistent/tessera/libtessera-missing.so.1",
                 LOADER_TEST_ARCH);
  run_single_broken("missing", "not found", "/nonexistent/tessera/libtessera-missing.so.1", NULL);
}

static void case_library_missing_relative(void) {
  make_plugins_dir("plugins.d");
  write_manifest("plugins.d", "missing", "missing/libtessera-missing.so.1", LOADER_TEST_ARCH);
  run_single_broken("missing", "not found", NULL);
  /* A relative path is relative to the manifest's directory. */
  search_dirs("plugins.d", NULL);
  tsr_context *context = open_context(NULL);
  tsr_plugin_report report;
  const char *tail = "plugins.d/missing/libtessera-missing.so.1";
  if (find_report(context, "missing", NULL, &report)) {
    size_t length = strlen(report.library), tail_length = strlen(tail);
    CHECK(length >= tail_length && strcmp(report.library + length - tail_length, tail) == 0 &&
              report.library[0] == '/',
          "library \"%s\" was not resolved against the manifest's directory", report.library);
  }
  tsr_context_destroy(context);
}

static void case_library_missing_bare(void) {
  make_plugins_dir("plugins.d");
  write_manifest("plugins.d", "missing", "libtessera-nothing-here.so.1", LOADER_TEST_ARCH);
  run_single_broken("missing", "libtessera-nothing-here.so.1", NULL);
}

static void case_not_shared_object(void) {
  make_plugins_dir("plugins.d");
  /* Longer than an ELF header, so the dynamic linker reads it and objects to
   * its contents, not its length. */
  write_text("plugins.d/libtessera-text.so",
             "This is a text file that only looks like a shared object by its name.\n"
             "A loader must refuse it and say why, and load the other plugins.\n");
  char library[1024];
  path_in_case(library, sizeof library, "plugins.d/libtessera-text.so");
  write_manifest("plugins.d", "text", library, LOADER_TEST_ARCH);
  search_dirs("plugins.d", NULL);
  tsr_context *context = open_context(NULL);
  tsr_plugin_report report;
  if (find_report(context, "text", NULL, &report)) {
    CHECK(report.state == TSR_PLUGIN_SKIPPED, "state %s", state_name(report.state));
    CHECK(strstr(report.reason, "not a shared object") != NULL ||
              strstr(report.reason, "invalid ELF header") != NULL,
          "reason \"%s\" says neither \"not a shared object\" nor \"invalid ELF header\"",
          report.reason);
  }
  expect_cpu_device(context);
  tsr_context_destroy(context);
}

static void case_no_entry(void) {
  make_plugins_dir("plugins.d");
  write_manifest("plugins.d", "noentry", LOADER_TEST_LIB_NO_ENTRY, LOADER_TEST_ARCH);
  run_single_broken("noentry", "tsr_plugin_entry", NULL);
}

static void case_no_negotiate(void) {
  make_plugins_dir("plugins.d");
  write_manifest("plugins.d", "nonegotiate", LOADER_TEST_LIB_NO_NEGOTIATE, LOADER_TEST_ARCH);
  run_single_broken("nonegotiate", "tsr_plugin_negotiate", NULL);
}

static void case_abi_newer(void) {
  make_plugins_dir("plugins.d");
  write_manifest("plugins.d", "abinewer", LOADER_TEST_LIB_ABI_NEWER, LOADER_TEST_ARCH);
  run_single_broken("abinewer", "newer", NULL);
}

static void case_abi_older(void) {
  make_plugins_dir("plugins.d");
  write_manifest("plugins.d", "abiolder", LOADER_TEST_LIB_ABI_OLDER, LOADER_TEST_ARCH);
  run_single_broken("abiolder", "older", NULL);
}

static void case_init_fails(void) {
  make_plugins_dir("plugins.d");
  write_manifest("plugins.d", "initfails", LOADER_TEST_LIB_INIT_FAILS, LOADER_TEST_ARCH);
  run_single_broken("initfails", "init", "the widget driver refused to start (fixture)", NULL);
}

static void case_wrong_arch(void) {
  make_plugins_dir("plugins.d");
  write_manifest("plugins.d", "otherarch", LOADER_TEST_LIB_MARKER, LOADER_TEST_OTHER_ARCH);
  run_single_broken("otherarch", "arch", LOADER_TEST_OTHER_ARCH, NULL);
  CHECK(!marker_written(), "the wrong-arch library was loaded (its constructor ran)");
}

/* The control for the marker: with the right arch the same library is loaded
 * (then skipped for lacking the plugin symbols), and the marker appears. */
static void case_marker_control(void) {
  make_plugins_dir("plugins.d");
  write_manifest("plugins.d", "marked", LOADER_TEST_LIB_MARKER, LOADER_TEST_ARCH);
  run_single_broken("marked", NULL);
  CHECK(marker_written(), "the marker library was loaded but its constructor left no marker");
}

static void case_duplicate_name(void) {
  make_plugins_dir("plugins.d");
  make_dir("second.d");
  /* Same name "cpu" in the second directory, naming the marker library: it
   * must be reported as a duplicate and never loaded. */
  write_manifest("second.d", "cpu", LOADER_TEST_LIB_MARKER, LOADER_TEST_ARCH);
  search_dirs("plugins.d", "second.d");
  tsr_context *context = open_context(NULL);
  tsr_plugin_report first, second;
  if (find_report(context, "cpu", "/plugins.d/", &first))
    CHECK(first.state == TSR_PLUGIN_LOADED, "first directory's cpu: state %s (\"%s\")",
          state_name(first.state), first.reason);
  if (find_report(context, "cpu", "/second.d/", &second)) {
    CHECK(second.state == TSR_PLUGIN_SKIPPED, "second directory's cpu: state %s",
          state_name(second.state));
    CHECK(strstr(second.reason, "duplicate") != NULL, "reason \"%s\" lacks \"duplicate\"",
          second.reason);
  }
  CHECK(!marker_written(), "the duplicate's library was loaded");
  CHECK(devices_of(context, "cpu") >= 1, "no cpu device");
  tsr_context_destroy(context);
}

static void case_manifest_is_directory(void) {
  make_plugins_dir("plugins.d");
  /* Tests run as root, where permissions do not stop reads; a directory
   * cannot be read as a file by anyone. */
  make_dir("plugins.d/unreadable.conf");
  run_single_broken("unreadable", "manifest", NULL);
}

static void case_manifest_dangling_symlink(void) {
  make_plugins_dir("plugins.d");
  char link[1024];
  path_in_case(link, sizeof link, "plugins.d/dangling.conf");
  if (symlink("/nonexistent/tessera/dangling-target.conf", link) != 0) {
    fprintf(stderr, "cannot create symlink %s: %s\n", link, strerror(errno));
    exit(1);
  }
  run_single_broken("dangling", "manifest", NULL);
}

static void case_garbage_binary(void) {
  make_plugins_dir("plugins.d");
  const unsigned char bytes[] = {0x7f, 'E',  'L',  'F',  0x02, 0x01, 0x00, 0xff, 0xfe, 0x00,
                                 0x80, 0x81, '=',  0x00, 0x0a, 0x3d, 0xc3, 0x28, 0xa0, 0xa1,
                                 0x00, 0x00, 0x01, 0x02, 0x03, 0x0a, 0xe2, 0x82, 0x28, 0xff};
  write_bytes("plugins.d/binary.conf", bytes, sizeof bytes);
  run_single_broken("binary", "manifest", NULL);
}

static void case_garbage_no_library(void) {
  make_plugins_dir("plugins.d");
  write_text("plugins.d/nolibrary.conf", "# no library key\nabi = 1\narch = %s\n",
             LOADER_TEST_ARCH);
  run_single_broken("nolibrary", "manifest", "library", NULL);
}

/* Unknown keys are ignored (a newer manifest format must not make an older
 * core drop a plugin): the manifest names a working plugin, which loads. */
static void case_unknown_key_ignored(void) {
  make_plugins_dir("plugins.d");
  write_text("plugins.d/unknownkey.conf", "library = %s\nabi = 1\ncolour = blue\narch = %s\n",
             LOADER_TEST_LIB_SAMPLE, LOADER_TEST_ARCH);
  search_dirs("plugins.d", NULL);
  tsr_context *context = open_context(NULL);
  expect_report(context, "unknownkey", TSR_PLUGIN_LOADED, NULL);
  CHECK(devices_of(context, "sample") == 1, "the plugin of a manifest with an unknown key did "
                                            "not load");
  expect_cpu_device(context);
  tsr_context_destroy(context);
}

static void case_garbage_no_equals(void) {
  make_plugins_dir("plugins.d");
  write_text("plugins.d/noequals.conf", "library = %s\nthis line has no equals sign\n",
             LOADER_TEST_LIB_SAMPLE);
  run_single_broken("noequals", "manifest", "line 2", NULL);
}

static void case_garbage_bad_abi(void) {
  make_plugins_dir("plugins.d");
  write_text("plugins.d/badabi.conf", "library = %s\nabi = one\narch = %s\n",
             LOADER_TEST_LIB_SAMPLE, LOADER_TEST_ARCH);
  run_single_broken("badabi", "manifest", "line 2", NULL);
}

static void case_empty_plugins_d(void) {
  make_dir("plugins.d");
  search_dirs("plugins.d", NULL);
  tsr_context *context = open_context(NULL);
  uint32_t plugins = 99, devices = 99;
  CHECK(tsr_plugin_count(context, &plugins) == TSR_OK && plugins == 0, "%u plugin reports",
        plugins);
  CHECK(tsr_device_count(context, &devices) == TSR_OK && devices == 0, "%u devices", devices);
  tsr_device *device = NULL;
  tsr_status status = tsr_device_open(context, "best", &device);
  CHECK(status == TSR_ERROR_NOT_FOUND, "tsr_device_open(best) with no device: %s",
        tsr_status_name(status));
  CHECK(tsr_last_error()[0] != '\0', "no error message for a missing device");
  tsr_context_destroy(context);
}

/* A directory in the path that does not exist is passed over. */
static void case_missing_plugin_dir(void) {
  make_plugins_dir("plugins.d");
  char path[2048];
  snprintf(path, sizeof path, "%s/does-not-exist.d:%s/plugins.d", case_root, case_root);
  isolate_environment(path);
  tsr_context *context = open_context(NULL);
  expect_cpu_device(context);
  tsr_context_destroy(context);
}

/* cpu, the working sample plugin, and "marked" (the marker library): the
 * filters must leave a plugin out before loading it. */
static void make_filter_case(void) {
  make_plugins_dir("plugins.d");
  write_manifest("plugins.d", "sample", LOADER_TEST_LIB_SAMPLE, LOADER_TEST_ARCH);
  write_manifest("plugins.d", "marked", LOADER_TEST_LIB_MARKER, LOADER_TEST_ARCH);
  search_dirs("plugins.d", NULL);
}

static void case_filter_backends(void) {
  make_filter_case();
  setenv("TESSERA_BACKENDS", "cpu,sample", 1);
  tsr_context *context = open_context(NULL);
  expect_report(context, "marked", TSR_PLUGIN_FILTERED, NULL);
  expect_report(context, "sample", TSR_PLUGIN_LOADED, NULL);
  CHECK(devices_of(context, "sample") == 1, "sample device missing");
  CHECK(!marker_written(), "a plugin left out by TESSERA_BACKENDS was loaded");
  expect_cpu_device(context);
  tsr_context_destroy(context);
}

static void case_filter_disable(void) {
  make_filter_case();
  setenv("TESSERA_DISABLE_BACKENDS", "marked,sample", 1);
  tsr_context *context = open_context(NULL);
  expect_report(context, "marked", TSR_PLUGIN_FILTERED, NULL);
  expect_report(context, "sample", TSR_PLUGIN_FILTERED, NULL);
  CHECK(devices_of(context, "sample") == 0, "a disabled plugin's device appeared");
  CHECK(!marker_written(), "a plugin dropped by TESSERA_DISABLE_BACKENDS was loaded");
  expect_cpu_device(context);
  tsr_context_destroy(context);
}

/* Context options take precedence over the environment. */
static void case_filter_options(void) {
  make_filter_case();
  setenv("TESSERA_BACKENDS", "marked", 1);
  tsr_context_options options = TSR_CONTEXT_OPTIONS_INIT;
  options.backends = "cpu,sample";
  options.disable_backends = "sample";
  tsr_context *context = open_context(&options);
  expect_report(context, "marked", TSR_PLUGIN_FILTERED, NULL);
  expect_report(context, "sample", TSR_PLUGIN_FILTERED, NULL);
  CHECK(!marker_written(), "options.backends did not override TESSERA_BACKENDS");
  expect_cpu_device(context);
  tsr_context_destroy(context);
}

static void case_add_plugin_path(void) {
  make_plugins_dir("plugins.d");
  make_dir("extra.d");
  write_manifest("extra.d", "sample", LOADER_TEST_LIB_SAMPLE, LOADER_TEST_ARCH);
  char extra[1024];
  path_in_case(extra, sizeof extra, "extra.d");

  search_dirs("plugins.d", NULL);
  tsr_context *context = open_context(NULL);
  CHECK(devices_of(context, "sample") == 0, "sample device without its directory being added");
  tsr_context_destroy(context);

  setenv("TESSERA_ADD_PLUGIN_PATH", extra, 1);
  context = open_context(NULL);
  expect_report(context, "sample", TSR_PLUGIN_LOADED, NULL);
  CHECK(devices_of(context, "sample") == 1, "TESSERA_ADD_PLUGIN_PATH: sample device missing");
  expect_cpu_device(context);
  tsr_context_destroy(context);

  unsetenv("TESSERA_ADD_PLUGIN_PATH");
  tsr_context_options options = TSR_CONTEXT_OPTIONS_INIT;
  options.add_plugin_path = extra;
  context = open_context(&options);
  CHECK(devices_of(context, "sample") == 1, "options.add_plugin_path: sample device missing");
  expect_cpu_device(context);
  tsr_context_destroy(context);
}

static void case_debug_log(void) {
  make_plugins_dir("plugins.d");
  write_manifest("plugins.d", "noentry", LOADER_TEST_LIB_NO_ENTRY, LOADER_TEST_ARCH);
  write_text("plugins.d/unknownkey.conf", "library = %s\nabi = 1\ncolour = blue\n",
             LOADER_TEST_LIB_SAMPLE);
  search_dirs("plugins.d", NULL);
  setenv("TESSERA_LOG", "debug", 1);

  capture_stderr_begin("stderr.log");
  tsr_context *context = NULL;
  tsr_status status = tsr_context_create(NULL, &context);
  const char *log = capture_stderr_end();
  CHECK(status == TSR_OK, "tsr_context_create: %s", tsr_last_error());
  CHECK(strstr(log, "noentry") != NULL, "the debug log does not name the skipped manifest");
  CHECK(strstr(log, "tsr_plugin_entry") != NULL, "the debug log does not say why it was skipped");
  CHECK(strstr(log, "unknown key") != NULL, "the debug log does not note the unknown key");
  if (context != NULL)
    expect_cpu_device(context);
  tsr_context_destroy(context);
}

/* The sample plugin of examples/plugin, loaded by path: it computes swiglu and
 * gelu, refuses the rest, and lists one variant. */
static float reference_gelu(float x, tsr_gelu_approx approximate) {
  double v = x;
  if (approximate == TSR_GELU_TANH)
    return (float)(0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))));
  return (float)(0.5 * v * (1.0 + erf(v / sqrt(2.0))));
}

static bool close_enough(float got, float want) {
  return fabsf(got - want) <= 1e-5f + 1e-5f * fabsf(want);
}

/* The sample plugin's ops through the core, built against ABI 2 (today's
 * sample) or ABI 1 (its frozen copy). */
static void run_sample_ops(const char *library) {
  make_plugins_dir("plugins.d");
  write_manifest("plugins.d", "sample", library, LOADER_TEST_ARCH);
  search_dirs("plugins.d", NULL);
  tsr_context *context = open_context(NULL);
  expect_report(context, "sample", TSR_PLUGIN_LOADED, NULL);

  tsr_device *device = NULL;
  tsr_status status = tsr_device_open(context, "sample", &device);
  CHECK(status == TSR_OK, "tsr_device_open(sample): %s", tsr_last_error());
  if (status != TSR_OK) {
    tsr_context_destroy(context);
    return;
  }
  tsr_device_info info = {.struct_size = sizeof info};
  CHECK(tsr_device_get_info(device, &info) == TSR_OK, "%s", tsr_last_error());
  CHECK(strcmp(info.name, "tessera sample device") == 0, "name \"%s\"", info.name);
  CHECK(strcmp(info.backend, "sample") == 0, "backend \"%s\"", info.backend);
  CHECK(info.host_visible != 0, "not host visible");
  CHECK(info.op_mask == ((1u << TSR_OP_SWIGLU) | (1u << TSR_OP_GELU)), "op mask %#x", info.op_mask);

  enum { rows = 6, cols = 7, count = rows * cols };
  float gate[count], up[count], x[count], y[count];
  for (int i = 0; i < count; i++) {
    gate[i] = (float)(i - 20) * 0.37f;
    up[i] = 1.5f - (float)i * 0.11f;
    x[i] = (float)(i - 21) * 0.29f;
  }
  const size_t bytes = sizeof(float) * count;
  tsr_buffer *gate_buffer = NULL, *up_buffer = NULL, *x_buffer = NULL, *y_buffer = NULL;
  tsr_queue *queue = NULL;
  CHECK(tsr_buffer_create(device, bytes, &gate_buffer) == TSR_OK &&
            tsr_buffer_create(device, bytes, &up_buffer) == TSR_OK &&
            tsr_buffer_create(device, bytes, &x_buffer) == TSR_OK &&
            tsr_buffer_create(device, bytes, &y_buffer) == TSR_OK &&
            tsr_queue_create(device, &queue) == TSR_OK,
        "buffers/queue: %s", tsr_last_error());
  if (queue == NULL || y_buffer == NULL) {
    tsr_context_destroy(context);
    return;
  }
  tsr_buffer_write(queue, gate_buffer, 0, gate, bytes);
  tsr_buffer_write(queue, up_buffer, 0, up, bytes);
  tsr_buffer_write(queue, x_buffer, 0, x, bytes);
  const int64_t shape[2] = {rows, cols};

  tsr_event *start = NULL, *end = NULL;
  CHECK(tsr_event_record(queue, &start) == TSR_OK, "event: %s", tsr_last_error());
  tsr_swiglu_desc swiglu = TSR_SWIGLU_DESC_INIT;
  swiglu.gate = tsr_tensor_make(gate_buffer, 0, TSR_DTYPE_F32, 2, shape);
  swiglu.up = tsr_tensor_make(up_buffer, 0, TSR_DTYPE_F32, 2, shape);
  swiglu.y = tsr_tensor_make(y_buffer, 0, TSR_DTYPE_F32, 2, shape);
  CHECK(tsr_swiglu(queue, &swiglu) == TSR_OK, "swiglu: %s", tsr_last_error());
  CHECK(tsr_event_record(queue, &end) == TSR_OK, "event: %s", tsr_last_error());
  CHECK(tsr_buffer_read(queue, y_buffer, 0, y, bytes) == TSR_OK, "read: %s", tsr_last_error());
  CHECK(tsr_queue_finish(queue) == TSR_OK, "finish: %s", tsr_last_error());
  for (int i = 0; i < count; i++) {
    float want = (float)((double)gate[i] / (1.0 + exp(-(double)gate[i])) * up[i]);
    CHECK(close_enough(y[i], want), "swiglu[%d] = %g, expected %g", i, y[i], want);
  }
  double ms = -1.0;
  if (start != NULL && end != NULL) {
    CHECK(tsr_event_wait(end) == TSR_OK, "event wait: %s", tsr_last_error());
    CHECK(tsr_event_elapsed_ms(start, end, &ms) == TSR_OK && ms >= 0.0, "elapsed %g ms: %s", ms,
          tsr_last_error());
  }
  tsr_event_destroy(start);
  tsr_event_destroy(end);

  /* gelu on a transposed (non-contiguous) view, both approximations. */
  for (int approximate = 0; approximate < TSR_GELU_COUNT_; approximate++) {
    tsr_gelu_desc gelu = TSR_GELU_DESC_INIT;
    const int64_t transposed_shape[2] = {cols, rows};
    gelu.x = tsr_tensor_transpose(tsr_tensor_make(x_buffer, 0, TSR_DTYPE_F32, 2, shape), 0, 1);
    gelu.y = tsr_tensor_make(y_buffer, 0, TSR_DTYPE_F32, 2, transposed_shape);
    gelu.approximate = (tsr_gelu_approx)approximate;
    CHECK(tsr_gelu(queue, &gelu) == TSR_OK, "gelu: %s", tsr_last_error());
    CHECK(tsr_queue_finish(queue) == TSR_OK, "finish: %s", tsr_last_error());
    void *mapped = NULL;
    CHECK(tsr_buffer_map(y_buffer, &mapped) == TSR_OK && mapped != NULL, "map: %s",
          tsr_last_error());
    if (mapped == NULL)
      break;
    const float *out = mapped;
    for (int c = 0; c < cols; c++)
      for (int r = 0; r < rows; r++) {
        float want = reference_gelu(x[r * cols + c], (tsr_gelu_approx)approximate);
        CHECK(close_enough(out[c * rows + r], want), "gelu(%d)[%d][%d] = %g, expected %g",
              approximate, c, r, out[c * rows + r], want);
      }
  }

  tsr_gelu_desc gelu = TSR_GELU_DESC_INIT;
  gelu.x = tsr_tensor_make(x_buffer, 0, TSR_DTYPE_F32, 2, shape);
  gelu.y = tsr_tensor_make(y_buffer, 0, TSR_DTYPE_F32, 2, shape);
  tsr_variant_list variants = {.struct_size = sizeof variants};
  CHECK(tsr_op_variants(device, TSR_OP_GELU, &gelu, &variants) == TSR_OK, "variants: %s",
        tsr_last_error());
  CHECK(variants.count == 1 && strcmp(variants.names[0], "elementwise-f32") == 0,
        "variants: %u, first \"%s\"", variants.count, variants.names[0]);
  tsr_choice choice = {.struct_size = sizeof choice};
  CHECK(tsr_op_explain(device, TSR_OP_GELU, &gelu, &choice) == TSR_OK &&
            strcmp(choice.variant, "elementwise-f32") == 0 && choice.rule == TSR_CHOICE_HEURISTIC,
        "explain: %s, '%s' rule %d", tsr_last_error(), choice.variant, (int)choice.rule);
  /* A variant named in the call: the one it has runs, another is refused. */
  gelu.variant = "elementwise-f32";
  CHECK(tsr_gelu(queue, &gelu) == TSR_OK, "gelu, variant named: %s", tsr_last_error());
  gelu.variant = "no-such-variant";
  status = tsr_gelu(queue, &gelu);
  CHECK(status == TSR_ERROR_NOT_FOUND && strstr(tsr_last_error(), "elementwise-f32") != NULL,
        "gelu, unknown variant: %s: %s", tsr_status_name(status), tsr_last_error());
  gelu.variant = NULL;
  CHECK(tsr_queue_finish(queue) == TSR_OK, "finish: %s", tsr_last_error());

  /* Anything else is refused with a reason, and nothing is run. */
  const int64_t square[2] = {rows, rows};
  tsr_gemm_desc gemm = TSR_GEMM_DESC_INIT;
  gemm.a = tsr_tensor_make(x_buffer, 0, TSR_DTYPE_F32, 2, square);
  gemm.b = tsr_tensor_make(up_buffer, 0, TSR_DTYPE_F32, 2, square);
  gemm.d = tsr_tensor_make(y_buffer, 0, TSR_DTYPE_F32, 2, square);
  status = tsr_gemm(queue, &gemm);
  CHECK(status == TSR_ERROR_UNSUPPORTED, "gemm on the sample device: %s", tsr_status_name(status));
  CHECK(tsr_last_error()[0] != '\0', "gemm refused without a reason");
  printf("gemm refused: %s\n", tsr_last_error());
  const int64_t halves[2] = {rows, cols};
  gelu.x = tsr_tensor_make(x_buffer, 0, TSR_DTYPE_BF16, 2, halves);
  gelu.y = tsr_tensor_make(y_buffer, 0, TSR_DTYPE_BF16, 2, halves);
  status = tsr_gelu(queue, &gelu);
  CHECK(status == TSR_ERROR_UNSUPPORTED, "bf16 gelu on the sample device: %s",
        tsr_status_name(status));
  CHECK(tsr_last_error()[0] != '\0', "bf16 gelu refused without a reason");
  printf("bf16 gelu refused: %s\n", tsr_last_error());

  tsr_queue_destroy(queue);
  tsr_buffer_destroy(gate_buffer);
  tsr_buffer_destroy(up_buffer);
  tsr_buffer_destroy(x_buffer);
  tsr_buffer_destroy(y_buffer);
  expect_cpu_device(context);
  tsr_context_destroy(context);
}

static void case_sample_ops(void) {
  run_sample_ops(LOADER_TEST_LIB_SAMPLE);
}

static void case_sample_v1_ops(void) {
  run_sample_ops(LOADER_TEST_LIB_SAMPLE_V1);
}

/* ------------------------------------------------------------------------ */

static const loader_case cases[] = {
    {"library_missing_absolute", case_library_missing_absolute},
    {"library_missing_relative", case_library_missing_relative},
    {"library_missing_bare", case_library_missing_bare},
    {"not_shared_object", case_not_shared_object},
    {"no_entry", case_no_entry},
    {"no_negotiate", case_no_negotiate},
    {"abi_newer", case_abi_newer},
    {"abi_older", case_abi_older},
    {"init_fails", case_init_fails},
    {"wrong_arch", case_wrong_arch},
    {"marker_control", case_marker_control},
    {"duplicate_name", case_duplicate_name},
    {"manifest_is_directory", case_manifest_is_directory},
    {"manifest_dangling_symlink", case_manifest_dangling_symlink},
    {"garbage_binary", case_garbage_binary},
    {"garbage_no_library", case_garbage_no_library},
    {"garbage_no_equals", case_garbage_no_equals},
    {"unknown_key_ignored", case_unknown_key_ignored},
    {"garbage_bad_abi", case_garbage_bad_abi},
    {"empty_plugins_d", case_empty_plugins_d},
    {"missing_plugin_dir", case_missing_plugin_dir},
    {"filter_backends", case_filter_backends},
    {"filter_disable", case_filter_disable},
    {"filter_options", case_filter_options},
    {"add_plugin_path", case_add_plugin_path},
    {"debug_log", case_debug_log},
    {"sample_ops", case_sample_ops},
    {"sample_v1_ops", case_sample_v1_ops},
};

/* A case of this file's table or of loader_hardening.c's, loader_rules.c's
 * or loader_names.c's; NULL when none. */
static const loader_case *find_case(const char *name, bool list) {
  const struct {
    const loader_case *cases;
    size_t count;
  } tables[] = {{cases, sizeof cases / sizeof cases[0]},
                {loader_hardening_cases, loader_hardening_case_count},
                {loader_rules_cases, loader_rules_case_count},
                {loader_names_cases, loader_names_case_count}};
  for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
    for (size_t i = 0; i < tables[t].count; i++) {
      const loader_case *c = &tables[t].cases[i];
      if (list)
        printf("%s\n", c->name);
      else if (strcmp(name, c->name) == 0)
        return c;
    }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--list") == 0) {
    find_case(NULL, true);
    return 0;
  }
  if (argc != 2) {
    fprintf(stderr, "usage: %s <case> | --list\n", argv[0]);
    return 2;
  }
  const loader_case *c = find_case(argv[1], false);
  if (c == NULL) {
    fprintf(stderr, "unknown case \"%s\" (see --list)\n", argv[1]);
    return 2;
  }
  make_case_root();
  atexit(remove_case_root);
  c->run();
  printf("%s: %s (%d failed checks)\n", c->name, loader_failures ? "FAILED" : "passed",
         loader_failures);
  return loader_failures ? 1 : 0;
}
