/*
 * The tuning database as tsr_op_explain sees it: rows written with
 * tsr_tuning_record take effect at once (the parsed files are cached between
 * calls and the cache is dropped on a write); rows written by another program
 * take effect after the cache's recheck interval (one second); comments,
 * blank and malformed lines are skipped with line numbers kept; a removed file
 * falls back to the heuristic.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api_test.h"

static tsr_device *device;
static tsr_buffer *buffer;

/* A 1 x 64 x 64 f32 GEMM in one buffer. */
static tsr_gemm_desc gemm(void) {
  tsr_gemm_desc g = TSR_GEMM_DESC_INIT;
  g.a = tsr_tensor_make(buffer, 0, TSR_DTYPE_F32, 2, (int64_t[]){1, 64});
  g.b = tsr_tensor_make(buffer, 256, TSR_DTYPE_F32, 2, (int64_t[]){64, 64});
  g.d = tsr_tensor_make(buffer, 256 + 64 * 64 * 4, TSR_DTYPE_F32, 2, (int64_t[]){1, 64});
  return g;
}

static tsr_choice explain(void) {
  tsr_gemm_desc g = gemm();
  tsr_choice choice = {.struct_size = sizeof choice};
  REQUIRE_OK(tsr_op_explain(device, TSR_OP_GEMM, &g, &choice));
  return choice;
}

/* Past the cache's recheck interval, and past the file system's timestamp
 * granularity, so that a rewrite is seen as a change. */
static void wait_recheck(void) {
  struct timespec pause = {1, 200 * 1000 * 1000};
  nanosleep(&pause, NULL);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  REQUIRE(f != NULL);
  fputs(text, f);
  REQUIRE(fclose(f) == 0);
}

int main(void) {
  char path[4096];
  REQUIRE_OK(tsr_tuning_user_path(path, sizeof path));
  unlink(path);
  tsr_context *context = api_context();
  device = api_cpu_device(context);
  REQUIRE_OK(tsr_buffer_create(device, 65536, &buffer));

  tsr_gemm_desc g = gemm();
  tsr_variant_list list = {.struct_size = sizeof list};
  REQUIRE_OK(tsr_op_variants(device, TSR_OP_GEMM, &g, &list));
  REQUIRE(list.count >= 2);
  const char *first = list.names[0], *second = list.names[1];

  tsr_choice before = explain();
  CHECK_INT(before.rule, TSR_CHOICE_HEURISTIC);

  /* tsr_tuning_record: seen by the next call, twice in a row. */
  REQUIRE_OK(tsr_tuning_record(device, TSR_OP_GEMM, &g, second, NULL));
  tsr_choice recorded = explain();
  CHECK_INT(recorded.rule, TSR_CHOICE_TUNING_DB);
  CHECK_STR(recorded.variant, second);
  REQUIRE_OK(tsr_tuning_record(device, TSR_OP_GEMM, &g, first, NULL));
  recorded = explain();
  CHECK_INT(recorded.rule, TSR_CHOICE_TUNING_DB);
  CHECK_STR(recorded.variant, first);

  /* Another program's rewrite: comments, a blank line, malformed rows, a row
   * for another dtype, then the row (line 6), seen after the recheck. */
  char text[8192];
  snprintf(text, sizeof text,
           "# written by hand\n"
           "\n"
           "%s gemm f32 %s\n"
           "%s gemm f16 %s %s\n"
           "%s gemm f32 %s %s extra-field\n"
           "%s gemm f32 %s %s   # the one\n",
           before.device_key, before.shape_class, before.device_key, before.shape_class, first,
           before.device_key, before.shape_class, first, before.device_key, before.shape_class,
           second);
  wait_recheck();
  write_file(path, text);
  wait_recheck();
  tsr_choice edited = explain();
  CHECK_INT(edited.rule, TSR_CHOICE_TUNING_DB);
  CHECK_STR(edited.variant, second);
  char want_source[4200];
  snprintf(want_source, sizeof want_source, "%s:6", path);
  CHECK_STR(edited.source, want_source);

  /* A wildcard row only when no row names the shape class. */
  snprintf(text, sizeof text, "%s gemm f32 * %s\n", before.device_key, first);
  write_file(path, text);
  wait_recheck();
  tsr_choice wildcard = explain();
  CHECK_INT(wildcard.rule, TSR_CHOICE_TUNING_DB);
  CHECK_STR(wildcard.variant, first);

  /* The file removed: back to the heuristic. */
  unlink(path);
  wait_recheck();
  tsr_choice after = explain();
  CHECK_INT(after.rule, TSR_CHOICE_HEURISTIC);
  CHECK_STR(after.variant, before.variant);

  tsr_buffer_destroy(buffer);
  tsr_context_destroy(context);
  return api_finish("test_tuning");
}
