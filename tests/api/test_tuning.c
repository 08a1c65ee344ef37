/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tuning database as tsr_op_explain and the ops see it: a row written
 * with tsr_tuning_record, or a file rewritten by another program (even in
 * place with the same size), is used by the very next call; comments, blank
 * and malformed lines are skipped with line numbers kept; a removed file
 * falls back to the heuristic; the file is parsed once however many calls
 * look it up; a row naming a variant the device lacks warns once per loaded
 * database; a FIFO as the database or as tsr_tuning_record's target neither
 * hangs nor is used; a relative XDG_CACHE_HOME or HOME is ignored.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api_test.h"

static char dir[1024]; /* this run's private directory */
static char path[2048];
static tsr_context *context;
static tsr_device *device;
static tsr_queue *queue;
static tsr_buffer *buffer;
static char first[64], second[64];

static void open_device(void) {
  context = api_context();
  device = api_cpu_device(context);
  REQUIRE_OK(tsr_queue_create(device, &queue));
  REQUIRE_OK(tsr_buffer_create(device, 65536, &buffer));
}

static void close_device(void) {
  tsr_buffer_destroy(buffer);
  tsr_queue_destroy(queue);
  tsr_context_destroy(context);
}

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

static void write_file(const char *file, const char *text) {
  FILE *f = fopen(file, "w");
  REQUIRE(f != NULL);
  fputs(text, f);
  REQUIRE(fclose(f) == 0);
}

/* The whole file (the caller frees it). */
static char *read_file(const char *file) {
  FILE *f = fopen(file, "r");
  REQUIRE(f != NULL);
  size_t capacity = 4096, used = 0, n;
  char *text = malloc(capacity);
  REQUIRE(text != NULL);
  while ((n = fread(text + used, 1, capacity - used - 1, f)) > 0) {
    used += n;
    if (capacity - used < 2) {
      capacity *= 2;
      text = realloc(text, capacity);
      REQUIRE(text != NULL);
    }
  }
  fclose(f);
  text[used] = '\0';
  return text;
}

static void make_dir(const char *format, const char *a, const char *b) {
  char name[4096];
  snprintf(name, sizeof name, format, a, b);
  REQUIRE(mkdir(name, 0755) == 0);
}

/* ---- stderr capture: tessera logs there ---- */

static int saved_stderr = -1;
static char capture_path[2048];

static void capture_begin(void) {
  fflush(stderr);
  snprintf(capture_path, sizeof capture_path, "%s/stderr.txt", dir);
  int fd = open(capture_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE(fd >= 0);
  saved_stderr = dup(2);
  REQUIRE(saved_stderr >= 0 && dup2(fd, 2) == 2);
  close(fd);
}

/* The text written to stderr since capture_begin (the caller frees it). */
static char *capture_end(void) {
  fflush(stderr);
  REQUIRE(dup2(saved_stderr, 2) == 2);
  close(saved_stderr);
  return read_file(capture_path);
}

static int count(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
    n++;
  return n;
}

/* Runs `body` in a child process under an alarm, so that a call that hangs
 * fails the check instead of stalling ctest. Called before the parent makes
 * any context: a fork keeps no worker threads. */
static bool in_child(void (*body)(void)) {
  fflush(NULL);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    alarm(20);
    body();
    close_device();
    exit(api_finish("test_tuning (child)"));
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  if (WIFSIGNALED(status))
    fprintf(stderr, "child killed by signal %d (SIGALRM: a call hung)\n", WTERMSIG(status));
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* ---- a FIFO as the database and as tsr_tuning_record's target ---- */

static char fifo[2048];

static void fifo_lookup_body(void) {
  REQUIRE(setenv("TESSERA_TUNING_DB", fifo, 1) == 0);
  open_device();
  tsr_gemm_desc g = gemm();
  capture_begin();
  tsr_choice choice = explain();
  tsr_status run = tsr_gemm(queue, &g);
  tsr_status finish = tsr_queue_finish(queue);
  for (int i = 0; i < 20; i++)
    explain();
  char *log = capture_end();
  CHECK_INT(choice.rule, TSR_CHOICE_HEURISTIC);
  CHECK_STATUS(run, TSR_OK);
  CHECK_STATUS(finish, TSR_OK);
  /* ignored with one warning, not one per call */
  CHECK_INT(count(log, "not a regular file"), 1);
  free(log);
}

static void fifo_record_body(void) {
  open_device();
  tsr_gemm_desc g = gemm();
  tsr_variant_list list = {.struct_size = sizeof list};
  REQUIRE_OK(tsr_op_variants(device, TSR_OP_GEMM, &g, &list));
  CHECK_STATUS(tsr_tuning_record(device, TSR_OP_GEMM, &g, list.names[0], fifo), TSR_ERROR_IO);
  CHECK_ERROR("tsr_tuning_record", "not a regular file");
  REQUIRE(setenv("TESSERA_TUNING_DB", fifo, 1) == 0);
  CHECK_STATUS(tsr_tuning_record(device, TSR_OP_GEMM, &g, list.names[0], NULL), TSR_ERROR_IO);
  CHECK_ERROR("tsr_tuning_record", "not a regular file");
  struct stat st;
  CHECK(stat(fifo, &st) == 0 && S_ISFIFO(st.st_mode)); /* left as it was */
}

/* ---- the database read and used ---- */

static void check_record_and_edits(const tsr_choice *before) {
  tsr_gemm_desc g = gemm();
  /* tsr_tuning_record: seen by the next call, twice in a row. */
  REQUIRE_OK(tsr_tuning_record(device, TSR_OP_GEMM, &g, second, NULL));
  tsr_choice recorded = explain();
  CHECK_INT(recorded.rule, TSR_CHOICE_TUNING_DB);
  CHECK_STR(recorded.variant, second);
  REQUIRE_OK(tsr_tuning_record(device, TSR_OP_GEMM, &g, first, NULL));
  recorded = explain();
  CHECK_INT(recorded.rule, TSR_CHOICE_TUNING_DB);
  CHECK_STR(recorded.variant, first);

  /* Another program's rewrite, seen by the next call without waiting:
   * comments, a blank line, malformed rows, a row for another dtype, then
   * the row (line 6). */
  char text[8192];
  snprintf(text, sizeof text,
           "# written by hand\n"
           "\n"
           "%s gemm f32 %s\n"
           "%s gemm f16 %s %s\n"
           "%s gemm f32 %s %s extra-field\n"
           "%s gemm f32 %s %s   # the one\n",
           before->device_key, before->shape_class, before->device_key, before->shape_class, first,
           before->device_key, before->shape_class, first, before->device_key, before->shape_class,
           second);
  write_file(path, text);
  tsr_choice edited = explain();
  CHECK_INT(edited.rule, TSR_CHOICE_TUNING_DB);
  CHECK_STR(edited.variant, second);
  char want_source[4200];
  snprintf(want_source, sizeof want_source, "%s:6", path);
  CHECK_STR(edited.source, want_source);

  /* Rewritten in place with the same size, within one timestamp tick: the
   * size and often the modification time are unchanged, the content is not. */
  char a[512], b[512];
  snprintf(a, sizeof a, "%s gemm f32 %s %s #%*s\n", before->device_key, before->shape_class, first,
           (int)(strlen(second) + 1), "");
  snprintf(b, sizeof b, "%s gemm f32 %s %s #%*s\n", before->device_key, before->shape_class, second,
           (int)(strlen(first) + 1), "");
  REQUIRE(strlen(a) == strlen(b));
  for (int i = 0; i < 3; i++) {
    write_file(path, a);
    tsr_choice now_a = explain();
    CHECK_STR(now_a.variant, first);
    write_file(path, b);
    tsr_choice now_b = explain();
    CHECK_STR(now_b.variant, second);
  }

  /* A later exact row of a file overrides an earlier one; a wildcard row is
   * used only when no row names the shape class. */
  snprintf(text, sizeof text, "%s gemm f32 %s %s\n%s gemm f32 %s %s\n", before->device_key,
           before->shape_class, first, before->device_key, before->shape_class, second);
  write_file(path, text);
  CHECK_STR(explain().variant, second);
  snprintf(text, sizeof text, "%s gemm f32 * %s\n", before->device_key, first);
  write_file(path, text);
  tsr_choice wildcard = explain();
  CHECK_INT(wildcard.rule, TSR_CHOICE_TUNING_DB);
  CHECK_STR(wildcard.variant, first);

  /* tsr_tuning_record keeps the other lines as they are, long ones too, and
   * starts its row on a line of its own after a last line with no newline. */
  char long_comment[2100];
  memset(long_comment, 'x', sizeof long_comment - 1);
  long_comment[0] = '#';
  long_comment[sizeof long_comment - 1] = '\0';
  snprintf(text, sizeof text, "%s\nother:dev gemm f32 %s keep_me", long_comment,
           before->shape_class);
  write_file(path, text);
  REQUIRE_OK(tsr_tuning_record(device, TSR_OP_GEMM, &g, second, NULL));
  char *kept = read_file(path);
  CHECK(strncmp(kept, text, strlen(text)) == 0 && kept[strlen(text)] == '\n');
  free(kept);
  tsr_choice appended = explain();
  CHECK_INT(appended.rule, TSR_CHOICE_TUNING_DB);
  CHECK_STR(appended.variant, second);

  /* The file removed: back to the heuristic at once. */
  unlink(path);
  tsr_choice after = explain();
  CHECK_INT(after.rule, TSR_CHOICE_HEURISTIC);
  CHECK_STR(after.variant, before->variant);
}

/* A row naming a variant the device does not have: ignored, with one warning
 * per loaded database however many calls meet it. */
static void check_stale_row(const tsr_choice *before) {
  char text[1024];
  snprintf(text, sizeof text, "%s gemm f32 %s no_such_variant\n", before->device_key,
           before->shape_class);
  write_file(path, text);
  tsr_gemm_desc g = gemm();
  int heuristic = 0;
  capture_begin();
  for (int i = 0; i < 100; i++)
    heuristic += explain().rule == TSR_CHOICE_HEURISTIC;
  for (int i = 0; i < 10; i++)
    CHECK_STATUS(tsr_gemm(queue, &g), TSR_OK);
  char *log = capture_end();
  CHECK_INT(heuristic, 100);
  CHECK_INT(count(log, "no_such_variant"), 1);
  free(log);

  /* A rewritten file is a new database: its stale row warns once more. */
  snprintf(text, sizeof text, "# rewritten\n%s gemm f32 %s no_such_variant\n", before->device_key,
           before->shape_class);
  write_file(path, text);
  capture_begin();
  for (int i = 0; i < 100; i++)
    explain();
  log = capture_end();
  CHECK_INT(count(log, "no_such_variant"), 1);
  free(log);
  CHECK_STATUS(tsr_queue_finish(queue), TSR_OK);
  unlink(path);
}

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* 100,000 rows for other devices, then this problem's row: 10,000 calls
 * parse the file once. */
static void check_large_database(const tsr_choice *before) {
  FILE *f = fopen(path, "w");
  REQUIRE(f != NULL);
  for (int i = 0; i < 100000; i++)
    fprintf(f, "cpu:vendor-%d:x86_64:some-cpu\tgemm\tf32\tm%dn64k64\t%s\n", i, i, first);
  fprintf(f, "%s\tgemm\tf32\t%s\t%s\n", before->device_key, before->shape_class, second);
  REQUIRE(fclose(f) == 0);
  REQUIRE(setenv("TESSERA_LOG", "debug", 1) == 0);
  close_device(); /* TESSERA_LOG is read when a context is made */
  open_device();
  capture_begin();
  int wrong = 0;
  double start = seconds();
  for (int i = 0; i < 10000; i++) {
    tsr_choice choice = explain();
    wrong += choice.rule != TSR_CHOICE_TUNING_DB || strcmp(choice.variant, second) != 0;
  }
  double elapsed = seconds() - start;
  char *log = capture_end();
  REQUIRE(unsetenv("TESSERA_LOG") == 0);
  close_device();
  open_device();
  CHECK_INT(wrong, 0);
  CHECK_INT(count(log, "read tuning database"), 1);
  free(log);
  printf("10,000 lookups in a 100,001-row database: %.3f s\n", elapsed);
  /* Not a benchmark: scanning the rows on each call took ~18 s here, an
   * index lookup takes milliseconds; the bound only catches a return to
   * per-call scans. */
  CHECK(elapsed < 5.0);
  unlink(path);
}

/* ---- the user database's path ---- */

static void restore_env(const char *name, const char *value) {
  if (value)
    setenv(name, value, 1);
  else
    unsetenv(name);
}

static void check_user_path(void) {
  char *saved[3];
  const char *names[3] = {"TESSERA_TUNING_DB", "XDG_CACHE_HOME", "HOME"};
  for (int i = 0; i < 3; i++) {
    const char *value = getenv(names[i]);
    saved[i] = value ? strdup(value) : NULL;
  }
  char home[2048], want[4096], got[4096];
  snprintf(home, sizeof home, "%s/home", dir);
  unsetenv("TESSERA_TUNING_DB");
  setenv("HOME", home, 1);

  /* The XDG base directory spec: a relative path is invalid, as if unset. */
  setenv("XDG_CACHE_HOME", "relative-cache", 1);
  REQUIRE_OK(tsr_tuning_user_path(got, sizeof got));
  snprintf(want, sizeof want, "%s/.cache/tessera/tuning.tsv", home);
  CHECK_STR(got, want);
  setenv("XDG_CACHE_HOME", dir, 1);
  REQUIRE_OK(tsr_tuning_user_path(got, sizeof got));
  snprintf(want, sizeof want, "%s/tessera/tuning.tsv", dir);
  CHECK_STR(got, want);
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "relative-home", 1);
  CHECK_STATUS(tsr_tuning_user_path(got, sizeof got), TSR_ERROR_NOT_FOUND);
  setenv("XDG_CACHE_HOME", "", 1);
  CHECK_STATUS(tsr_tuning_user_path(got, sizeof got), TSR_ERROR_NOT_FOUND);

  /* Lookups follow the same rule: the relative directory's row (resolved
   * against the working directory) is not read, the home one is. */
  char cwd[4096];
  REQUIRE(getcwd(cwd, sizeof cwd) != NULL);
  REQUIRE(chdir(dir) == 0);
  make_dir("%s%s", "xdg-relative", "");
  make_dir("%s%s", "xdg-relative/tessera", "");
  make_dir("%s%s", home, "");
  make_dir("%s%s", home, "/.cache");
  make_dir("%s%s", home, "/.cache/tessera");
  tsr_choice before = explain();
  char row[1024];
  snprintf(row, sizeof row, "%s gemm f32 %s %s\n", before.device_key, before.shape_class, first);
  write_file("xdg-relative/tessera/tuning.tsv", row);
  snprintf(row, sizeof row, "%s gemm f32 %s %s\n", before.device_key, before.shape_class, second);
  snprintf(want, sizeof want, "%s/.cache/tessera/tuning.tsv", home);
  write_file(want, row);
  setenv("HOME", home, 1);
  setenv("XDG_CACHE_HOME", "xdg-relative", 1);
  tsr_choice choice = explain();
  CHECK_INT(choice.rule, TSR_CHOICE_TUNING_DB);
  CHECK_STR(choice.variant, second);
  CHECK(strncmp(choice.source, want, strlen(want)) == 0);
  unlink(want);
  unlink("xdg-relative/tessera/tuning.tsv");
  REQUIRE(chdir(cwd) == 0);
  for (int i = 0; i < 3; i++) {
    restore_env(names[i], saved[i]);
    free(saved[i]);
  }
}

/* Run with TESSERA_TUNING_RECHECK_MS=60000: the files are not looked at again
 * within the minute, so another program's edit waits, while
 * tsr_tuning_record's own row is used at once. */
static void check_recheck_interval(void) {
  open_device();
  tsr_gemm_desc g = gemm();
  tsr_variant_list list = {.struct_size = sizeof list};
  REQUIRE_OK(tsr_op_variants(device, TSR_OP_GEMM, &g, &list));
  REQUIRE(list.count >= 2);
  tsr_choice before = explain(); /* loads the database: no file yet */
  CHECK_INT(before.rule, TSR_CHOICE_HEURISTIC);
  char row[1024];
  snprintf(row, sizeof row, "%s gemm f32 %s %s\n", before.device_key, before.shape_class,
           list.names[0]);
  write_file(path, row);
  tsr_choice unseen = explain();
  CHECK_INT(unseen.rule, TSR_CHOICE_HEURISTIC);
  REQUIRE_OK(tsr_tuning_record(device, TSR_OP_GEMM, &g, list.names[1], NULL));
  tsr_choice recorded = explain();
  CHECK_INT(recorded.rule, TSR_CHOICE_TUNING_DB);
  CHECK_STR(recorded.variant, list.names[1]);
  close_device();
}

int main(int argc, char **argv) {
  snprintf(dir, sizeof dir, "%s/tessera-test-tuning-XXXXXX",
           getenv("TMPDIR") && *getenv("TMPDIR") == '/' ? getenv("TMPDIR") : "/tmp");
  REQUIRE(mkdtemp(dir) != NULL);
  snprintf(path, sizeof path, "%s/tuning.tsv", dir);
  REQUIRE(setenv("TESSERA_TUNING_DB", path, 1) == 0);
  if (argc > 1 && strcmp(argv[1], "recheck") == 0) {
    check_recheck_interval();
    unlink(path);
    rmdir(dir);
    return api_finish("test_tuning recheck");
  }

  snprintf(fifo, sizeof fifo, "%s/fifo.tsv", dir);
  REQUIRE(mkfifo(fifo, 0644) == 0);
  CHECK(in_child(fifo_lookup_body));
  CHECK(in_child(fifo_record_body));

  open_device();
  tsr_gemm_desc g = gemm();
  tsr_variant_list list = {.struct_size = sizeof list};
  REQUIRE_OK(tsr_op_variants(device, TSR_OP_GEMM, &g, &list));
  REQUIRE(list.count >= 2);
  snprintf(first, sizeof first, "%s", list.names[0]);
  snprintf(second, sizeof second, "%s", list.names[1]);
  tsr_choice before = explain();
  CHECK_INT(before.rule, TSR_CHOICE_HEURISTIC);

  check_record_and_edits(&before);
  check_stale_row(&before);
  check_large_database(&before);
  check_user_path();

  close_device();
  unlink(fifo);
  unlink(capture_path);
  unlink(path);
  char sub[4096];
  const char *dirs[] = {"xdg-relative/tessera", "xdg-relative", "home/.cache/tessera",
                        "home/.cache", "home"};
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    snprintf(sub, sizeof sub, "%s/%s", dir, dirs[i]);
    rmdir(sub);
  }
  rmdir(dir);
  return api_finish("test_tuning");
}
