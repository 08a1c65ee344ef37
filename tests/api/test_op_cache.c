/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The op path of plugin ABI 2 (core/op_cache.c, core/choose.c), seen through
 * the probe plugin (probe_plugin.c), which counts op_select calls and tells
 * by its output which config ran:
 * - a repeated problem is chosen once per queue; another shape, another
 *   address alignment or another queue chooses again; another offset with
 *   the same alignment does not; the repeated-call path still checks each
 *   call's buffers (destroyed, too small, overlapping, of another context);
 * - desc->variant is part of the signature: honoured, chosen once, and a
 *   name the plugin lacks fails on every call;
 * - TESSERA_CONFIG is read when the context is made; "probe.gelu:" scopes an
 *   entry to one backend, which wins over an unscoped one; an entry for
 *   another backend changes nothing here; a malformed entry is ignored;
 * - a tuning row recorded between calls takes effect on the next call, and
 *   explain agrees with what ran.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_test.h"

struct probe_stats {
  int selects, runs;
  char last_run[16];
  int variants_calls, supported_calls;
};
static struct probe_stats *stats;

enum { COUNT = 1024 }; /* floats: the whole 4096-byte buffer */
static tsr_context *context;
static tsr_device *device;
static tsr_queue *queue;
static tsr_buffer *buffer;
static float input[COUNT];

static void open_probe(const char *config) {
  if (config)
    setenv("TESSERA_CONFIG", config, 1);
  else
    unsetenv("TESSERA_CONFIG");
  REQUIRE_OK(tsr_context_create(NULL, &context));
  unsetenv("TESSERA_CONFIG"); /* read once, when the context was made */
  REQUIRE_OK(tsr_device_open(context, "probe", &device));
  REQUIRE_OK(tsr_queue_create(device, &queue));
  REQUIRE_OK(tsr_buffer_create(device, sizeof input, &buffer));
  REQUIRE_OK(tsr_buffer_write(queue, buffer, 0, input, sizeof input));
}

static void close_probe(void) {
  tsr_buffer_destroy(buffer);
  tsr_queue_destroy(queue);
  tsr_context_destroy(context);
}

/* gelu over `count` floats from byte `in` to byte `out` of the buffer. */
static tsr_gelu_desc gelu_at(uint64_t in, uint64_t out, int64_t count) {
  tsr_gelu_desc g = TSR_GELU_DESC_INIT;
  g.x = tsr_tensor_make(buffer, in, TSR_DTYPE_F32, 1, &count);
  g.y = tsr_tensor_make(buffer, out, TSR_DTYPE_F32, 1, &count);
  return g;
}

/* Runs it; returns the config that ran, checked against the output. */
static const char *run(tsr_queue *q, const tsr_gelu_desc *g) {
  if (!CHECK_STATUS(tsr_gelu(q, g), TSR_OK)) {
    printf("  %s\n", tsr_last_error());
    return "";
  }
  float y;
  REQUIRE_OK(tsr_buffer_read(q, buffer, g->y.offset, &y, sizeof y));
  float x = input[g->x.offset / sizeof(float)];
  double want = 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
  double added = y - want;
  CHECK(fabs(added) < 1e-4 || fabs(added - 1.0) < 1e-4);
  CHECK_STR(stats->last_run, fabs(added - 1.0) < 1e-4 ? "probe-b" : "probe-a");
  return stats->last_run;
}

static void check_cache(void) {
  open_probe(NULL);
  tsr_gelu_desc g = gelu_at(0, 1024, 16);
  int before = stats->selects;
  CHECK_STR(run(queue, &g), "probe-a");
  CHECK_STR(run(queue, &g), "probe-a");
  CHECK_INT(stats->selects - before, 1); /* chosen once */
  /* other offsets, the same 256-byte alignment: the same problem */
  tsr_gelu_desc moved = gelu_at(256, 1280, 16);
  int supported = stats->supported_calls, listed = stats->variants_calls;
  run(queue, &moved);
  CHECK_INT(stats->selects - before, 1);
  CHECK_INT(stats->supported_calls, supported); /* the steady path asks nothing */
  CHECK_INT(stats->variants_calls, listed);
  /* 4-byte aligned input: a problem of its own */
  tsr_gelu_desc unaligned = gelu_at(4, 1024, 16);
  run(queue, &unaligned);
  CHECK_INT(stats->selects - before, 2);
  run(queue, &unaligned);
  CHECK_INT(stats->selects - before, 2);
  /* another shape */
  tsr_gelu_desc longer = gelu_at(0, 1024, 32);
  run(queue, &longer);
  CHECK_INT(stats->selects - before, 3);
  /* another queue has its own cache */
  tsr_queue *other = NULL;
  REQUIRE_OK(tsr_queue_create(device, &other));
  run(other, &g);
  CHECK_INT(stats->selects - before, 4);
  run(other, &g);
  CHECK_INT(stats->selects - before, 4);
  tsr_queue_destroy(other);

  /* the repeated-call path checks the buffers on every call: the same
   * structure with a destroyed buffer, a tensor past the end, an output
   * meeting its input, a buffer of another context each fail as validation
   * says, and a good call after them still runs */
  tsr_buffer *spare = NULL;
  REQUIRE_OK(tsr_buffer_create(device, 4096, &spare));
  tsr_gelu_desc elsewhere = gelu_at(0, 1024, 16);
  elsewhere.y.buffer = spare;
  CHECK_STATUS(tsr_gelu(queue, &elsewhere), TSR_OK);
  REQUIRE_OK(tsr_queue_finish(queue));
  tsr_buffer_destroy(spare);
  CHECK_STATUS(tsr_gelu(queue, &elsewhere), TSR_ERROR_INVALID_VALUE);
  CHECK_ERROR("tsr_gelu", "destroyed");
  tsr_gelu_desc past = gelu_at(0, 4096 - 32, 16);
  CHECK_STATUS(tsr_gelu(queue, &past), TSR_ERROR_OUT_OF_BOUNDS);
  tsr_gelu_desc meeting = gelu_at(0, 32, 16);
  CHECK_STATUS(tsr_gelu(queue, &meeting), TSR_ERROR_OVERLAP);
  tsr_context *other_context = NULL;
  tsr_device *other_device = NULL;
  tsr_buffer *foreign = NULL;
  REQUIRE_OK(tsr_context_create(NULL, &other_context));
  REQUIRE_OK(tsr_device_open(other_context, "probe", &other_device));
  REQUIRE_OK(tsr_buffer_create(other_device, 4096, &foreign));
  tsr_gelu_desc away = gelu_at(0, 1024, 16);
  away.y.buffer = foreign;
  CHECK_STATUS(tsr_gelu(queue, &away), TSR_ERROR_WRONG_DEVICE);
  tsr_context_destroy(other_context);
  CHECK_STR(run(queue, &g), "probe-a");

  /* a variant named in the call: part of the signature, so chosen once */
  g.variant = "probe-b";
  int named = stats->selects;
  CHECK_STR(run(queue, &g), "probe-b");
  CHECK_STR(run(queue, &g), "probe-b");
  CHECK_INT(stats->selects - named, 1);
  /* one it lacks fails every time, with the names it has */
  g.variant = "probe-z";
  for (int i = 0; i < 2; i++) {
    CHECK_STATUS(tsr_gelu(queue, &g), TSR_ERROR_NOT_FOUND);
    CHECK_ERROR("tsr_gelu", "probe-a, probe-b");
  }
  /* a name longer than any variant's: refused without the cache */
  char long_name[100];
  memset(long_name, 'x', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = '\0';
  g.variant = long_name;
  CHECK_STATUS(tsr_gelu(queue, &g), TSR_ERROR_NOT_FOUND);
  g.variant = NULL;
  CHECK_STR(run(queue, &g), "probe-a"); /* the automatic choice is untouched */
  close_probe();
}

static void check_config(const char *config, const char *want) {
  printf("TESSERA_CONFIG=%s\n", config);
  open_probe(config);
  tsr_gelu_desc g = gelu_at(0, 1024, 16);
  CHECK_STR(run(queue, &g), want);
  tsr_choice choice = {.struct_size = sizeof choice};
  CHECK_STATUS(tsr_op_explain(device, TSR_OP_GELU, &g, &choice), TSR_OK);
  CHECK_STR(choice.variant, want);
  close_probe();
}

static void check_tuning_row(void) {
  char path[256];
  snprintf(path, sizeof path, "%s", getenv("TESSERA_TUNING_DB"));
  unlink(path);
  open_probe(NULL);
  tsr_gelu_desc g = gelu_at(0, 1024, 16);
  CHECK_STR(run(queue, &g), "probe-a");
  CHECK_STATUS(tsr_tuning_record(device, TSR_OP_GELU, &g, "probe-b", NULL), TSR_OK);
  CHECK_STR(run(queue, &g), "probe-b"); /* the new row, on the very next call */
  tsr_choice choice = {.struct_size = sizeof choice};
  CHECK_STATUS(tsr_op_explain(device, TSR_OP_GELU, &g, &choice), TSR_OK);
  CHECK_STR(choice.variant, "probe-b");
  CHECK_INT(choice.rule, TSR_CHOICE_TUNING_DB);
  /* a row naming a variant the probe lacks: the heuristic, with a warning */
  FILE *f = fopen(path, "w");
  REQUIRE(f != NULL);
  fprintf(f, "%s\tgelu\tf32\t*\tprobe-z\n", choice.device_key);
  fclose(f);
  CHECK_STR(run(queue, &g), "probe-a");
  close_probe();
  unlink(path);
}

static char manifest[512]; /* <run's directory>/probe.conf */

static void write_manifest(const char *library) {
  FILE *f = fopen(manifest, "w");
  REQUIRE(f != NULL);
  fprintf(f, "library = %s\nabi = 2\n", library);
  fclose(f);
}

/* An ABI 2 table without op_select is skipped, with the reason. */
static void check_table_without_select(void) {
  write_manifest(TEST_PROBE_NO_SELECT_PLUGIN);
  tsr_context *c = NULL;
  REQUIRE_OK(tsr_context_create(NULL, &c));
  tsr_plugin_report report = {.struct_size = sizeof report};
  CHECK_STATUS(tsr_plugin_get_report(c, 0, &report), TSR_OK);
  CHECK_INT(report.state, TSR_PLUGIN_SKIPPED);
  CHECK(strstr(report.reason, "op_select") != NULL);
  printf("no op_select: %s\n", report.reason);
  tsr_context_destroy(c);
}

int main(void) {
  for (int i = 0; i < COUNT; i++)
    input[i] = (float)(i - 20) * 0.125f;
  /* The probe plugin's manifest, in a directory of this run's own. */
  char dir[] = "/tmp/tessera-op-cache-XXXXXX";
  REQUIRE(mkdtemp(dir) != NULL);
  snprintf(manifest, sizeof manifest, "%s/probe.conf", dir);
  write_manifest(TEST_PROBE_PLUGIN);
  setenv("TESSERA_PLUGIN_PATH", dir, 1);
  void *library = dlopen(TEST_PROBE_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(library != NULL);
  stats = dlsym(library, "probe_stats");
  REQUIRE(stats != NULL);

  check_cache();
  check_config("gelu:probe-b", "probe-b");
  check_config("probe.gelu:probe-b", "probe-b");
  check_config("cpu.gelu:no-such-variant, vulkan.gelu:x", "probe-a");
  check_config("gelu:probe-b,probe.gelu:probe-a", "probe-a");
  check_config("probe.gelu:probe-b,gelu:probe-a", "probe-b");
  check_config("gelu, :x, probe.:y, nosuchop:z, probe.gelu:probe-b", "probe-b");
  check_tuning_row();
  check_table_without_select();

  dlclose(library);
  unlink(manifest);
  rmdir(dir);
  return api_finish("test_op_cache");
}
