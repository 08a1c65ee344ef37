/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cases for the plugin requirements of docs/PLUGINS.md (run by loader_faults,
 * one ctest each). What each asserts:
 *
 *   abi_above_offer        R2: negotiate answers 3 to an offer of 2: SKIPPED
 *                          "answered ABI 2, above the offered 1"
 *   entry_null             R3: entry returns NULL for the negotiated version:
 *                          SKIPPED "tsr_plugin_entry(1) returned no table"
 *   table_too_small        R3: struct_size of a shorter v1: SKIPPED
 *                          "malformed" and "struct_size <its size>"
 *   table_abi_mismatch     R3: abi_version 2 in a table for ABI 1: SKIPPED
 *                          "malformed" and "abi_version 2"
 *   table_lacks_op_run     R4: op_run NULL: SKIPPED "lacks required entry
 *                          'op_run'"
 *     (each next to the CPU plugin and the sample plugin, which still load)
 *   plugins_print_nothing  R24: with TESSERA_LOG=error, a context with the
 *                          CPU and sample plugins, a softmax on cpu:0, a gelu
 *                          on sample:0, finishing and destroying write nothing
 *                          to stdout or stderr
 *
 * The last three dlopen the CPU plugin and the sample plugin themselves and
 * call their tables with stub host services:
 *
 *   plugin_unknown_op      R18: op_supported, op_variants and op_run of op
 *                          TSR_OP_COUNT_ (what a newer core adds next) and 999
 *                          answer TSR_ERROR_UNSUPPORTED after set_error, and
 *                          queue_finish then has no deferred error
 *   plugin_set_error       R23: failing buffer_alloc (UINT64_MAX/2 bytes, its
 *                          message giving the size), device_open of index 7
 *                          and an out-of-range buffer_write call set_error
 *                          first
 *   plugin_env_after_init  R25 (in part): once device_open has returned,
 *                          buffer_alloc, queue_create, buffer_write,
 *                          op_supported, op_variants, op_run (the heuristic's
 *                          variant), queue_finish, buffer_read, buffer_free
 *                          and queue_destroy never call get_env; the op's
 *                          result is checked so it really ran
 */
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/plugin.h>

#include "loader_test.h"

/* ------------------------------------------------------------------------ */
/* Broken tables (R2 to R4)                                                  */
/* ------------------------------------------------------------------------ */

/* Manifest `name` for `library` next to the CPU and sample plugins: skipped
 * with a reason holding the two substrings (second may be NULL), the others
 * loaded. */
static void run_broken_table(const char *name, const char *library, const char *needle,
                             const char *second_needle) {
  make_plugins_dir("plugins.d");
  write_manifest("plugins.d", name, library, LOADER_TEST_ARCH);
  write_manifest("plugins.d", "sample", LOADER_TEST_LIB_SAMPLE, LOADER_TEST_ARCH);
  search_dirs("plugins.d", NULL);
  tsr_context *context = open_context(NULL);
  expect_report(context, name, TSR_PLUGIN_SKIPPED, needle, second_needle, NULL);
  expect_report(context, "sample", TSR_PLUGIN_LOADED, NULL);
  CHECK(devices_of(context, "sample") == 1, "the sample plugin's device is missing");
  CHECK(devices_of(context, "nodevices") == 0, "the broken plugin has devices");
  expect_cpu_device(context);
  tsr_context_destroy(context);
}

static void case_abi_above_offer(void) {
  run_broken_table("aboveoffer", LOADER_TEST_LIB_BREAK_ABOVE_OFFER,
                   "answered ABI 3, above the offered 2", NULL);
}

static void case_entry_null(void) {
  run_broken_table("entrynull", LOADER_TEST_LIB_BREAK_ENTRY_NULL,
                   "tsr_plugin_entry(1) returned no table", NULL);
}

static void case_table_too_small(void) {
  char size[64];
  snprintf(size, sizeof size, "struct_size %zu,", offsetof(tsr_plugin_v1, buffer_wrap));
  run_broken_table("tableshort", LOADER_TEST_LIB_BREAK_TABLE_SHORT, "malformed", size);
}

static void case_table_abi_mismatch(void) {
  run_broken_table("tableabi", LOADER_TEST_LIB_BREAK_TABLE_ABI, "malformed", "abi_version 2;");
}

static void case_table_lacks_op_run(void) {
  run_broken_table("noop", LOADER_TEST_LIB_BREAK_NO_OP_RUN, "lacks required entry 'op_run'", NULL);
}

/* ------------------------------------------------------------------------ */
/* Nothing printed (R24)                                                     */
/* ------------------------------------------------------------------------ */

enum { ROWS = 4, COLS = 16, COUNT = ROWS * COLS };

/* Runs `op` (softmax or gelu) on 4x16 f32 on device `selector` through the
 * public API; the statuses go to `statuses` (checked once output is back). */
static void run_public_op(tsr_context *context, const char *selector, tsr_op op, float *y,
                          tsr_status *statuses) {
  float x[COUNT];
  for (int i = 0; i < COUNT; i++)
    x[i] = (float)(i % COLS) * 0.25f - (float)(i / COLS);
  const int64_t shape[2] = {ROWS, COLS};
  tsr_device *device = NULL;
  tsr_buffer *x_buffer = NULL, *y_buffer = NULL;
  tsr_queue *queue = NULL;
  statuses[0] = tsr_device_open(context, selector, &device);
  if (statuses[0] != TSR_OK)
    return;
  statuses[1] = tsr_buffer_create(device, sizeof x, &x_buffer);
  statuses[2] = tsr_buffer_create(device, sizeof x, &y_buffer);
  statuses[3] = tsr_queue_create(device, &queue);
  if (statuses[1] != TSR_OK || statuses[2] != TSR_OK || statuses[3] != TSR_OK)
    return;
  statuses[4] = tsr_buffer_write(queue, x_buffer, 0, x, sizeof x);
  if (op == TSR_OP_SOFTMAX) {
    tsr_softmax_desc softmax = TSR_SOFTMAX_DESC_INIT;
    softmax.x = tsr_tensor_make(x_buffer, 0, TSR_DTYPE_F32, 2, shape);
    softmax.y = tsr_tensor_make(y_buffer, 0, TSR_DTYPE_F32, 2, shape);
    statuses[5] = tsr_softmax(queue, &softmax);
  } else {
    tsr_gelu_desc gelu = TSR_GELU_DESC_INIT;
    gelu.x = tsr_tensor_make(x_buffer, 0, TSR_DTYPE_F32, 2, shape);
    gelu.y = tsr_tensor_make(y_buffer, 0, TSR_DTYPE_F32, 2, shape);
    statuses[5] = tsr_gelu(queue, &gelu);
  }
  statuses[6] = tsr_buffer_read(queue, y_buffer, 0, y, sizeof x);
  statuses[7] = tsr_queue_finish(queue);
  tsr_queue_destroy(queue);
  tsr_buffer_destroy(x_buffer);
  tsr_buffer_destroy(y_buffer);
}

static void case_plugins_print_nothing(void) {
  make_plugins_dir("plugins.d");
  write_manifest("plugins.d", "sample", LOADER_TEST_LIB_SAMPLE, LOADER_TEST_ARCH);
  search_dirs("plugins.d", NULL);
  setenv("TESSERA_LOG", "error", 1);
  static char out[65536], err[65536];
  float softmax_y[COUNT] = {0}, gelu_y[COUNT] = {0};
  tsr_status created, cpu[8], sample[8];
  for (int i = 0; i < 8; i++)
    cpu[i] = sample[i] = TSR_OK;

  capture_output_begin();
  tsr_context *context = NULL;
  created = tsr_context_create(NULL, &context);
  if (created == TSR_OK) {
    run_public_op(context, "cpu:0", TSR_OP_SOFTMAX, softmax_y, cpu);
    run_public_op(context, "sample:0", TSR_OP_GELU, gelu_y, sample);
    tsr_context_destroy(context);
  }
  capture_output_end(out, sizeof out, err, sizeof err);

  CHECK(created == TSR_OK, "tsr_context_create: %s", tsr_status_name(created));
  for (int i = 0; i < 8; i++) {
    CHECK(cpu[i] == TSR_OK, "cpu:0 step %d: %s", i, tsr_status_name(cpu[i]));
    CHECK(sample[i] == TSR_OK, "sample:0 step %d: %s", i, tsr_status_name(sample[i]));
  }
  for (int r = 0; r < ROWS; r++) {
    double sum = 0.0;
    for (int c = 0; c < COLS; c++)
      sum += softmax_y[r * COLS + c];
    CHECK(fabs(sum - 1.0) < 1e-4, "softmax row %d sums to %g: the op did not run", r, sum);
  }
  CHECK(gelu_y[COLS - 1] > 3.0f, "gelu(3.75) = %g: the op did not run", gelu_y[COLS - 1]);
  CHECK(out[0] == '\0', "something was written to stdout (%zu bytes)", strlen(out));
  CHECK(err[0] == '\0', "something was written to stderr (%zu bytes)", strlen(err));
}

/* ------------------------------------------------------------------------ */
/* Tables called directly, with stub host services                           */
/* ------------------------------------------------------------------------ */

/* What the plugin did with the host services. */
static struct {
  int set_error_calls;
  char last_error[512];
  int log_calls;
  int foreign_handles; /* log or set_error with another host_handle */
  int get_env_calls;   /* all of them */
  bool watch_env;      /* count get_env calls in env_watched */
  int env_watched;     /* calls made while watch_env */
  char env_watched_names[512];
} stub;

static void stub_log(void *handle, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void stub_log(void *handle, int level, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  stub.log_calls++;
  stub.foreign_handles += handle != &stub;
  printf("plugin log (level %d): %s\n", level, line);
}

static void stub_set_error(void *handle, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void stub_set_error(void *handle, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(stub.last_error, sizeof stub.last_error, fmt, ap);
  va_end(ap);
  stub.set_error_calls++;
  stub.foreign_handles += handle != &stub;
  printf("plugin set_error: %s\n", stub.last_error);
}

static const char *stub_get_env(const char *name) {
  stub.get_env_calls++;
  if (stub.watch_env) {
    stub.env_watched++;
    size_t used = strlen(stub.env_watched_names);
    snprintf(stub.env_watched_names + used, sizeof stub.env_watched_names - used, " %s", name);
  }
  return getenv(name);
}

static const tsr_host_services_v2 stub_host = {
    .struct_size = sizeof(tsr_host_services_v2),
    .abi_version = TSR_PLUGIN_ABI_VERSION,
    .log = stub_log,
    .set_error = stub_set_error,
    .get_env = stub_get_env,
    .host_handle = &stub,
};

typedef struct direct_plugin {
  const char *label;
  const char *path;
  tsr_op op; /* the op it runs: softmax (cpu) or gelu (sample) */
  void *library;
  const tsr_plugin_v2 *table;
  void *state;
  void *device;
} direct_plugin;

static direct_plugin direct_plugins[] = {
    {"cpu", LOADER_TEST_LIB_CPU, TSR_OP_SOFTMAX, NULL, NULL, NULL, NULL},
    {"sample", LOADER_TEST_LIB_SAMPLE, TSR_OP_GELU, NULL, NULL, NULL, NULL},
};
enum { DIRECT_PLUGIN_COUNT = sizeof direct_plugins / sizeof direct_plugins[0] };

/* dlopen, negotiate, entry, init, device_open 0: as the core does. */
static bool direct_open(direct_plugin *p) {
  p->library = dlopen(p->path, RTLD_NOW | RTLD_LOCAL);
  CHECK(p->library != NULL, "%s: dlopen %s: %s", p->label, p->path, dlerror());
  if (p->library == NULL)
    return false;
  tsr_plugin_negotiate_fn negotiate;
  tsr_plugin_entry_fn entry;
  *(void **)&negotiate = dlsym(p->library, TSR_PLUGIN_NEGOTIATE_SYMBOL);
  *(void **)&entry = dlsym(p->library, TSR_PLUGIN_ENTRY_SYMBOL);
  CHECK(negotiate != NULL && entry != NULL, "%s: the ABI symbols are missing", p->label);
  if (negotiate == NULL || entry == NULL)
    return false;
  uint32_t abi = negotiate(TSR_PLUGIN_ABI_VERSION);
  CHECK(abi == TSR_PLUGIN_ABI_VERSION, "%s: negotiated ABI %u", p->label, abi);
  p->table = abi == TSR_PLUGIN_ABI_VERSION ? entry(abi) : NULL;
  CHECK(p->table != NULL && p->table->struct_size >= sizeof(tsr_plugin_v2) &&
            p->table->abi_version == abi,
        "%s: no well-formed v2 table", p->label);
  if (p->table == NULL || p->table->struct_size < sizeof(tsr_plugin_v2))
    return false;
  char reason[400] = "";
  tsr_status status = p->table->init(&stub_host, &p->state, reason, sizeof reason);
  CHECK(status == TSR_OK, "%s: init: %s (%s)", p->label, tsr_status_name(status), reason);
  if (status != TSR_OK)
    return false;
  CHECK(p->table->device_count(p->state) >= 1, "%s: no device", p->label);
  status = p->table->device_open(p->state, 0, &p->device);
  CHECK(status == TSR_OK, "%s: device_open(0): %s", p->label, tsr_status_name(status));
  return status == TSR_OK;
}

static void direct_close(direct_plugin *p) {
  if (p->device != NULL)
    p->table->device_close(p->device);
  if (p->state != NULL && p->table->shutdown != NULL)
    p->table->shutdown(p->state);
  if (p->library != NULL)
    dlclose(p->library);
  p->library = p->state = p->device = NULL;
  p->table = NULL;
  CHECK(stub.foreign_handles == 0, "%s: %d host calls with a handle other than host_handle",
        p->label, stub.foreign_handles);
}

/* Runs `call` (an expression) and checks it fails with set_error first. */
#define EXPECT_FAILS_WITH_ERROR(p, status, call)                                                   \
  do {                                                                                             \
    stub.set_error_calls = 0;                                                                      \
    stub.last_error[0] = '\0';                                                                     \
    (status) = (call);                                                                             \
    CHECK((status) != TSR_OK, "%s: %s succeeded", (p)->label, #call);                              \
    CHECK(stub.set_error_calls >= 1 && stub.last_error[0] != '\0',                                 \
          "%s: %s returned %s without host->set_error", (p)->label, #call,                         \
          tsr_status_name(status));                                                                \
    CHECK(strncmp(stub.last_error, (p)->table->name, strlen((p)->table->name)) == 0 &&             \
              stub.last_error[strlen((p)->table->name)] == ':',                                    \
          "%s: the sentence \"%s\" does not start with the plugin's name", (p)->label,             \
          stub.last_error);                                                                        \
  } while (0)

static void case_plugin_unknown_op(void) {
  const tsr_op unknown[] = {TSR_OP_COUNT_, (tsr_op)999};
  tsr_plugin_any_args dummy;
  memset(&dummy, 0, sizeof dummy);
  dummy.softmax.struct_size = sizeof dummy;
  for (int i = 0; i < DIRECT_PLUGIN_COUNT; i++) {
    direct_plugin *p = &direct_plugins[i];
    if (!direct_open(p)) {
      direct_close(p);
      continue;
    }
    void *queue = NULL;
    tsr_status status = p->table->queue_create(p->device, &queue);
    CHECK(status == TSR_OK, "%s: queue_create: %s", p->label, tsr_status_name(status));
    for (size_t u = 0; u < sizeof unknown / sizeof unknown[0]; u++) {
      tsr_op op = unknown[u];
      printf("%s: op %d\n", p->label, (int)op);
      EXPECT_FAILS_WITH_ERROR(p, status, p->table->op_supported(p->device, op, &dummy));
      CHECK(status == TSR_ERROR_UNSUPPORTED, "%s: op_supported(op %d): %s", p->label, (int)op,
            tsr_status_name(status));
      tsr_plugin_variant_list list;
      memset(&list, 0, sizeof list);
      list.struct_size = sizeof list;
      EXPECT_FAILS_WITH_ERROR(p, status, p->table->op_variants(p->device, op, &dummy, &list));
      CHECK(status == TSR_ERROR_UNSUPPORTED, "%s: op_variants(op %d): %s", p->label, (int)op,
            tsr_status_name(status));
      tsr_plugin_selection selection = {sizeof selection, NULL, NULL};
      EXPECT_FAILS_WITH_ERROR(p, status,
                              p->table->op_select(p->device, op, &dummy, NULL, &selection));
      CHECK(status == TSR_ERROR_UNSUPPORTED, "%s: op_select(op %d): %s", p->label, (int)op,
            tsr_status_name(status));
      if (queue == NULL)
        continue;
      EXPECT_FAILS_WITH_ERROR(p, status, p->table->op_run(queue, op, &dummy, NULL));
      CHECK(status == TSR_ERROR_UNSUPPORTED, "%s: op_run(op %d): %s", p->label, (int)op,
            tsr_status_name(status));
      status = p->table->queue_finish(queue);
      CHECK(status == TSR_OK, "%s: queue_finish after the refused op %d: %s", p->label, (int)op,
            tsr_status_name(status));
    }
    if (queue != NULL)
      p->table->queue_destroy(queue);
    direct_close(p);
  }
}

static void case_plugin_set_error(void) {
  for (int i = 0; i < DIRECT_PLUGIN_COUNT; i++) {
    direct_plugin *p = &direct_plugins[i];
    if (!direct_open(p)) {
      direct_close(p);
      continue;
    }
    tsr_status status;
    void *buffer = NULL, *device = NULL, *queue = NULL;
    const uint64_t huge = UINT64_MAX / 2;
    EXPECT_FAILS_WITH_ERROR(p, status, p->table->buffer_alloc(p->device, huge, &buffer));
    char value[32];
    snprintf(value, sizeof value, "%llu", (unsigned long long)huge);
    CHECK(strstr(stub.last_error, value) != NULL, "%s: the message \"%s\" does not give the size",
          p->label, stub.last_error);
    EXPECT_FAILS_WITH_ERROR(p, status, p->table->device_open(p->state, 7, &device));
    CHECK(strstr(stub.last_error, "7") != NULL, "%s: the message \"%s\" does not give the index",
          p->label, stub.last_error);
    /* A write past the end (the core checks ranges first; the plugin must
     * still refuse it with a reason). */
    char bytes[128] = {0};
    status = p->table->buffer_alloc(p->device, 64, &buffer);
    CHECK(status == TSR_OK, "%s: buffer_alloc(64): %s", p->label, tsr_status_name(status));
    tsr_status queued = p->table->queue_create(p->device, &queue);
    CHECK(queued == TSR_OK, "%s: queue_create: %s", p->label, tsr_status_name(queued));
    if (status == TSR_OK && queued == TSR_OK)
      EXPECT_FAILS_WITH_ERROR(p, status,
                              p->table->buffer_write(queue, buffer, 0, bytes, sizeof bytes));
    if (queue != NULL)
      p->table->queue_destroy(queue);
    if (buffer != NULL)
      p->table->buffer_free(p->device, buffer);
    direct_close(p);
  }
}

static tsr_plugin_tensor direct_tensor(void *buffer) {
  tsr_plugin_tensor t;
  memset(&t, 0, sizeof t);
  t.buffer = buffer;
  t.dtype = TSR_DTYPE_F32;
  t.rank = 2;
  t.shape[0] = ROWS;
  t.shape[1] = COLS;
  t.strides[0] = COLS;
  t.strides[1] = 1;
  return t;
}

/* One op through the table, from buffer_alloc to queue_destroy; checks the
 * result. */
static void direct_run_op(direct_plugin *p) {
  const tsr_plugin_v2 *t = p->table;
  float x[COUNT], y[COUNT];
  for (int i = 0; i < COUNT; i++) {
    x[i] = (float)(i % COLS) * 0.25f - (float)(i / COLS);
    y[i] = NAN;
  }
  void *x_buffer = NULL, *y_buffer = NULL, *queue = NULL;
  tsr_status status = t->buffer_alloc(p->device, sizeof x, &x_buffer);
  if (status == TSR_OK)
    status = t->buffer_alloc(p->device, sizeof y, &y_buffer);
  if (status == TSR_OK)
    status = t->queue_create(p->device, &queue);
  CHECK(status == TSR_OK, "%s: buffers and queue: %s", p->label, tsr_status_name(status));
  tsr_softmax_args softmax;
  tsr_gelu_args gelu;
  memset(&softmax, 0, sizeof softmax);
  memset(&gelu, 0, sizeof gelu);
  softmax.struct_size = sizeof softmax;
  softmax.x = direct_tensor(x_buffer);
  softmax.y = direct_tensor(y_buffer);
  softmax.scale = 1.0f;
  gelu.struct_size = sizeof gelu;
  gelu.x = direct_tensor(x_buffer);
  gelu.y = direct_tensor(y_buffer);
  gelu.approximate = TSR_GELU_ERF;
  const void *args = p->op == TSR_OP_SOFTMAX ? (const void *)&softmax : (const void *)&gelu;
  tsr_plugin_variant_list list;
  memset(&list, 0, sizeof list);
  list.struct_size = sizeof list;
  if (status == TSR_OK)
    status = t->buffer_write(queue, x_buffer, 0, x, sizeof x);
  if (status == TSR_OK)
    status = t->op_supported(p->device, p->op, args);
  if (status == TSR_OK)
    status = t->op_variants(p->device, p->op, args, &list);
  CHECK(status == TSR_OK && list.count >= 1 && list.heuristic >= 0 &&
            (uint32_t)list.heuristic < list.count,
        "%s: op %d: %s, %u variants, heuristic %d", p->label, (int)p->op, tsr_status_name(status),
        list.count, list.heuristic);
  if (status == TSR_OK && list.count >= 1 && list.heuristic >= 0 &&
      (uint32_t)list.heuristic < list.count) {
    /* R26: op_select with no name picks the variant op_variants calls the
     * heuristic's; a name it does not have is TSR_ERROR_NOT_FOUND. */
    const char *heuristic = list.variants[list.heuristic].name;
    tsr_plugin_selection selection = {sizeof selection, NULL, NULL};
    status = t->op_select(p->device, p->op, args, NULL, &selection);
    CHECK(status == TSR_OK && selection.name && !strcmp(selection.name, heuristic),
          "%s: op_select(NULL): %s, '%s' but the heuristic is '%s'", p->label,
          tsr_status_name(status), selection.name ? selection.name : "(null)", heuristic);
    tsr_plugin_selection missing = {sizeof missing, NULL, NULL};
    tsr_status not_found = TSR_OK;
    EXPECT_FAILS_WITH_ERROR(p, not_found,
                            t->op_select(p->device, p->op, args, "no-such-variant", &missing));
    CHECK(not_found == TSR_ERROR_NOT_FOUND, "%s: op_select('no-such-variant'): %s", p->label,
          tsr_status_name(not_found));
    status = t->op_run(queue, p->op, args, selection.config);
    CHECK(status == TSR_OK, "%s: op_run(%s): %s", p->label, heuristic, tsr_status_name(status));
    status = t->queue_finish(queue);
    CHECK(status == TSR_OK, "%s: queue_finish: %s", p->label, tsr_status_name(status));
    status = t->buffer_read(queue, y_buffer, 0, y, sizeof y);
    CHECK(status == TSR_OK, "%s: buffer_read: %s", p->label, tsr_status_name(status));
    for (int r = 0; r < ROWS && p->op == TSR_OP_SOFTMAX; r++) {
      double sum = 0.0;
      for (int c = 0; c < COLS; c++)
        sum += y[r * COLS + c];
      CHECK(fabs(sum - 1.0) < 1e-4, "%s: softmax row %d sums to %g", p->label, r, sum);
    }
    for (int i = 0; i < COUNT && p->op == TSR_OP_GELU; i++) {
      double want = 0.5 * x[i] * (1.0 + erf(x[i] / sqrt(2.0)));
      CHECK(fabs(y[i] - want) < 1e-4, "%s: gelu[%d] = %g, expected %g", p->label, i, y[i], want);
    }
  }
  if (queue != NULL)
    t->queue_destroy(queue);
  if (x_buffer != NULL)
    t->buffer_free(p->device, x_buffer);
  if (y_buffer != NULL)
    t->buffer_free(p->device, y_buffer);
}

static void case_plugin_env_after_init(void) {
  for (int i = 0; i < DIRECT_PLUGIN_COUNT; i++) {
    direct_plugin *p = &direct_plugins[i];
    stub.get_env_calls = 0;
    if (!direct_open(p)) {
      direct_close(p);
      continue;
    }
    printf("%s: %d get_env calls in init and device_open\n", p->label, stub.get_env_calls);
    stub.watch_env = true;
    stub.env_watched = 0;
    stub.env_watched_names[0] = '\0';
    direct_run_op(p);
    stub.watch_env = false;
    CHECK(stub.env_watched == 0, "%s: %d get_env calls after device_open:%s", p->label,
          stub.env_watched, stub.env_watched_names);
    direct_close(p);
  }
}

/* ------------------------------------------------------------------------ */

const loader_case loader_rules_cases[] = {
    {"abi_above_offer", case_abi_above_offer},
    {"entry_null", case_entry_null},
    {"table_too_small", case_table_too_small},
    {"table_abi_mismatch", case_table_abi_mismatch},
    {"table_lacks_op_run", case_table_lacks_op_run},
    {"plugins_print_nothing", case_plugins_print_nothing},
    {"plugin_unknown_op", case_plugin_unknown_op},
    {"plugin_set_error", case_plugin_set_error},
    {"plugin_env_after_init", case_plugin_env_after_init},
};
const size_t loader_rules_case_count = sizeof loader_rules_cases / sizeof loader_rules_cases[0];
