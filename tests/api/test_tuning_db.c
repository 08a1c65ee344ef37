/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/tuning_db.c on its own, with the library directory, the environment
 * and the log stubbed: the index's precedence rules, user rows shadowing
 * packaged ones, what makes the database load again (and what does not),
 * the generation, stale-row and non-regular-file warnings once per loaded
 * database, and lookups racing rewrites from other threads.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api_test.h"
#include "internal.h"

/* ---- stubs of what tuning_db.c uses from the rest of the core ---- */

static char library_dir[1024];
static atomic_int warnings;
static char last_warning[2048];

const char *tsr__library_dir(void) {
  return library_dir;
}

const char *tsr__getenv(const char *name) {
  return getenv(name);
}

void tsr__log(int level, const char *fmt, ...) {
  if (level != TSR_LOG_WARN)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_warning, sizeof last_warning, fmt, ap);
  va_end(ap);
  atomic_fetch_add(&warnings, 1);
}

/* ---- helpers ---- */

static char dir[512], user[1200], system_dir[1400];

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  REQUIRE(f != NULL);
  fputs(text, f);
  REQUIRE(fclose(f) == 0);
}

static void system_file(char *path, size_t capacity, const char *name) {
  snprintf(path, capacity, "%s/%s", system_dir, name);
}

/* The variant the database gives for (dev, gemm, f32, shape), "" for none;
 * `source` gets "file:line". */
static const char *lookup(const char *shape, char *source) {
  static char variant[128];
  char where[4200];
  if (!tsr__tuning_lookup("dev", "gemm", "f32", shape, variant, sizeof variant,
                          source ? source : where, sizeof where))
    variant[0] = '\0';
  return variant;
}

static bool has_variant(void *context, const char *name) {
  (void)context;
  return strncmp(name, "stale", 5) != 0;
}

/* ---- the index alone ---- */

static void check_index(void) {
  tsr__tuning_index *index = tsr__tuning_index_create();
  REQUIRE(index != NULL);
  static const char user_rows[] = "# comment\n"
                                  "dev gemm f32 * u_wild_1\n"
                                  "dev gemm f32 * u_wild_2\n"
                                  "dev gemm f32 m1 u_exact_1\n"
                                  "dev gemm f32 m1 u_exact_2 # later rows override\n"
                                  "dev gemm f32 m1\n"              /* 4 fields */
                                  "dev gemm f32 m1 a b\n"          /* 6 fields */
                                  "dev gemm f32 m1 n\0ul\n"        /* a NUL byte */
                                  "dev\tgemm\tf32\tm2\tu_tabs\r\n" /* CRLF */
                                  "dev gemm f16 m3 u_f16";         /* no final newline */
  static const char system_rows[] = "dev gemm f32 m1 s_exact\n"
                                    "dev gemm f32 m4 s_exact_4\n"
                                    "dev gemm f32 * s_wild\n"
                                    "dev gemm f16 * s_wild_f16\n";
  REQUIRE(tsr__tuning_index_add(index, 0, user_rows, sizeof user_rows - 1));
  REQUIRE(tsr__tuning_index_add(index, 1, system_rows, sizeof system_rows - 1));
  tsr__tuning_row row;
  struct {
    const char *dtype, *shape, *variant;
    int file, line;
  } cases[] = {
      {"f32", "m1", "u_exact_2", 0, 5},  /* the last exact row of the first file */
      {"f32", "m2", "u_tabs", 0, 9},     /* tabs and a carriage return */
      {"f32", "m4", "u_wild_1", 0, 2},   /* the user file's wildcard beats a system exact row */
      {"f32", "m9", "u_wild_1", 0, 2},   /* the first wildcard row of a file */
      {"f16", "m3", "u_f16", 0, 10},     /* the last line, no newline */
      {"f16", "m9", "s_wild_f16", 1, 4}, /* only the system file has one */
      {"f32", "*", "u_wild_2", 0, 3},    /* a '*' problem: the last '*' row, as an exact one */
  };
  for (size_t i = 0; i < API_COUNT(cases); i++) {
    tsr__tuning_key key = {"dev", "gemm", cases[i].dtype, cases[i].shape};
    CHECK(tsr__tuning_index_find(index, &key, &row));
    CHECK_STR(row.variant, cases[i].variant);
    CHECK_INT(row.file, cases[i].file);
    CHECK_INT(row.line, cases[i].line);
  }
  /* No row, and queries no row could match. */
  const tsr__tuning_key misses[] = {{"dev", "gemm", "bf16", "m1"},
                                    {"other", "gemm", "f32", "m1"},
                                    {"dev", "gemm f32", "m1", "x"},
                                    {"dev", "", "f32", "m1"},
                                    {"dev#", "gemm", "f32", "m1"}};
  for (size_t i = 0; i < API_COUNT(misses); i++)
    CHECK(!tsr__tuning_index_find(index, &misses[i], &row));
  /* Each row warns once; the two rows of one key are told apart. */
  tsr__tuning_key exact = {"dev", "gemm", "f32", "m1"}, wild = {"dev", "gemm", "f32", "m9"};
  REQUIRE(tsr__tuning_index_find(index, &exact, &row));
  CHECK(tsr__tuning_index_claim_warning(index, row.id));
  CHECK(!tsr__tuning_index_claim_warning(index, row.id));
  REQUIRE(tsr__tuning_index_find(index, &wild, &row));
  CHECK(tsr__tuning_index_claim_warning(index, row.id));
  CHECK(!tsr__tuning_index_claim_warning(index, row.id));
  tsr__tuning_index_destroy(index);

  /* The row splitter on its own. */
  const char *field[5];
  size_t length[5];
  CHECK(tsr__tuning_split_row(" a b\tc d e \n", 12, field, length));
  CHECK_INT(length[4], 1);
  CHECK(!tsr__tuning_split_row("# a b c d e", 11, field, length));
  CHECK(!tsr__tuning_split_row("", 0, field, length));
}

/* ---- the database: files, reloads, generations ---- */

static void check_database(void) {
  char a[1600], b[1600], source[4200], want[4200];
  system_file(a, sizeof a, "a.tsv");
  system_file(b, sizeof b, "b.tsv");
  write_file(a, "dev gemm f32 m1 sys_a\ndev gemm f32 m2 sys_a2\n");
  write_file(b, "dev gemm f32 m1 sys_b\ndev gemm f32 m3 sys_b3\n");
  write_file(user, "dev gemm f32 m1 user_1\n");
  uint64_t parsed = tsr__tuning_parse_count();

  /* The user file, then the system files in sorted order. */
  CHECK_STR(lookup("m1", source), "user_1");
  snprintf(want, sizeof want, "%s:1", user);
  CHECK_STR(source, want);
  CHECK_STR(lookup("m2", NULL), "sys_a2");
  CHECK_STR(lookup("m3", source), "sys_b3");
  snprintf(want, sizeof want, "%s:2", b);
  CHECK_STR(source, want);
  CHECK_STR(lookup("m5", NULL), "");
  CHECK_INT(tsr__tuning_parse_count() - parsed, 3);

  /* Unchanged files: no parse, one generation, however many lookups. */
  uint64_t generation = tsr__tuning_generation();
  CHECK(generation != 0);
  for (int i = 0; i < 1000; i++)
    lookup(i % 2 ? "m1" : "m3", NULL);
  CHECK_INT(tsr__tuning_parse_count() - parsed, 3);
  CHECK_INT(tsr__tuning_generation(), generation);

  /* Each kind of change is seen by the next lookup. */
  write_file(a, "dev gemm f32 m2 sys_a2_new\n"); /* in place */
  CHECK_STR(lookup("m2", NULL), "sys_a2_new");
  uint64_t after_edit = tsr__tuning_generation();
  CHECK(after_edit != generation);
  unlink(user); /* removed */
  CHECK_STR(lookup("m1", NULL), "sys_b");
  char c[1600];
  system_file(c, sizeof c, "0.tsv"); /* added, sorting first */
  write_file(c, "dev gemm f32 m1 sys_0\n");
  CHECK_STR(lookup("m1", NULL), "sys_0");
  char ignored[1600];
  system_file(ignored, sizeof ignored, "notes.txt"); /* not *.tsv */
  write_file(ignored, "dev gemm f32 m1 from_txt\n");
  CHECK_STR(lookup("m1", NULL), "sys_0");
  unlink(ignored);
  unlink(c);
  CHECK_STR(lookup("m1", NULL), "sys_b");

  /* A changed path (the environment) is another database. */
  char other[1300];
  snprintf(other, sizeof other, "%s/other.tsv", dir);
  write_file(other, "dev gemm f32 m1 other_1\n");
  REQUIRE(setenv("TESSERA_TUNING_DB", other, 1) == 0);
  CHECK_STR(lookup("m1", NULL), "other_1");
  REQUIRE(setenv("TESSERA_TUNING_DB", user, 1) == 0);
  CHECK_STR(lookup("m1", NULL), "sys_b");
  unlink(other);

  /* tsr_tuning_record's invalidation: a new generation and a parse even
   * though no file changed. */
  generation = tsr__tuning_generation();
  parsed = tsr__tuning_parse_count();
  tsr__tuning_invalidate();
  CHECK(tsr__tuning_generation() != generation);
  CHECK(tsr__tuning_parse_count() > parsed);
  unlink(a);
  unlink(b);
}

/* A stale row warns once per loaded database; a non-regular file is ignored
 * with one warning. */
static void check_warnings(void) {
  write_file(user, "dev gemm f32 m1 stale_variant\ndev gemm f32 * stale_wild\n");
  tsr__tuning_key key = {"dev", "gemm", "f32", "m1"}, other = {"dev", "gemm", "f32", "m7"};
  tsr__tuning_match match;
  int first = 0, other_first = 0;
  for (int i = 0; i < 100; i++) {
    CHECK_INT(tsr__tuning_find(&key, has_variant, NULL, &match), TSR__TUNING_STALE);
    first += match.first_warning;
    CHECK_INT(tsr__tuning_find(&other, has_variant, NULL, &match), TSR__TUNING_STALE);
    other_first += match.first_warning;
  }
  CHECK_INT(first, 1);
  CHECK_INT(other_first, 1);
  CHECK_STR(match.variant, "stale_wild");
  CHECK_INT(tsr__tuning_find(&key, NULL, NULL, &match), TSR__TUNING_HIT);
  write_file(user, "# a new database\ndev gemm f32 m1 stale_variant\n");
  first = 0;
  for (int i = 0; i < 100; i++) {
    tsr__tuning_find(&key, has_variant, NULL, &match);
    first += match.first_warning;
  }
  CHECK_INT(first, 1);

  char fifo[1600];
  system_file(fifo, sizeof fifo, "fifo.tsv");
  REQUIRE(mkfifo(fifo, 0644) == 0);
  int before = atomic_load(&warnings);
  for (int i = 0; i < 100; i++)
    CHECK_STR(lookup("m1", NULL), "stale_variant");
  CHECK_INT(atomic_load(&warnings) - before, 1);
  CHECK(strstr(last_warning, "not a regular file") != NULL);
  unlink(fifo);
  unlink(user);
}

static void check_user_path(void) {
  char path[4096];
  const char *saved = getenv("TESSERA_TUNING_DB");
  char *keep = saved ? strdup(saved) : NULL;
  REQUIRE(unsetenv("TESSERA_TUNING_DB") == 0);
  REQUIRE(setenv("HOME", "/home/someone", 1) == 0);
  REQUIRE(setenv("XDG_CACHE_HOME", "cache", 1) == 0);
  CHECK(tsr__tuning_user_path_env(path, sizeof path) > 0);
  CHECK_STR(path, "/home/someone/.cache/tessera/tuning.tsv");
  REQUIRE(setenv("XDG_CACHE_HOME", "/xdg", 1) == 0);
  CHECK(tsr__tuning_user_path_env(path, sizeof path) > 0);
  CHECK_STR(path, "/xdg/tessera/tuning.tsv");
  REQUIRE(unsetenv("XDG_CACHE_HOME") == 0);
  REQUIRE(setenv("HOME", "home", 1) == 0);
  CHECK_INT(tsr__tuning_user_path_env(path, sizeof path), -1);
  REQUIRE(setenv("TESSERA_TUNING_DB", "relative.tsv", 1) == 0); /* explicit: kept as given */
  CHECK(tsr__tuning_user_path_env(path, sizeof path) > 0);
  CHECK_STR(path, "relative.tsv");
  if (keep)
    setenv("TESSERA_TUNING_DB", keep, 1);
  free(keep);
}

/* ---- lookups racing rewrites ---- */

static atomic_bool stop;
static atomic_int bad_answers;

static void *lookup_loop(void *unused) {
  (void)unused;
  char variant[128], source[4200];
  while (!atomic_load(&stop)) {
    if (!tsr__tuning_lookup("dev", "gemm", "f32", "m1", variant, sizeof variant, source,
                            sizeof source))
      continue; /* between the unlink and the rename's file */
    /* An in-place rewrite can be read half done (that is why
     * tsr_tuning_record renames); anything else is wrong. */
    size_t n = strlen(variant);
    if (n == 0 || (strncmp(variant, "even", n) && strncmp(variant, "odd", n)))
      atomic_fetch_add(&bad_answers, 1);
  }
  return NULL;
}

static void check_threads(void) {
  pthread_t threads[4];
  for (int i = 0; i < 4; i++)
    REQUIRE(pthread_create(&threads[i], NULL, lookup_loop, NULL) == 0);
  char tmp[1300];
  snprintf(tmp, sizeof tmp, "%s.tmp", user);
  for (int i = 0; i < 300; i++) {
    const char *text = i % 2 ? "dev gemm f32 m1 odd\n" : "dev gemm f32 m1 even\n";
    if (i % 3 == 0) {
      write_file(user, text); /* in place */
    } else {
      write_file(tmp, text); /* replaced */
      REQUIRE(rename(tmp, user) == 0);
    }
    if (i % 50 == 0)
      tsr__tuning_invalidate();
    char variant[128], source[4200];
    /* This thread's own write is seen by its next lookup. */
    CHECK(tsr__tuning_lookup("dev", "gemm", "f32", "m1", variant, sizeof variant, source,
                             sizeof source));
    CHECK_STR(variant, i % 2 ? "odd" : "even");
  }
  atomic_store(&stop, true);
  for (int i = 0; i < 4; i++)
    pthread_join(threads[i], NULL);
  CHECK_INT(atomic_load(&bad_answers), 0);
  unlink(user);
}

int main(void) {
  snprintf(dir, sizeof dir, "%s/tessera-test-tuning-db-XXXXXX",
           getenv("TMPDIR") && *getenv("TMPDIR") == '/' ? getenv("TMPDIR") : "/tmp");
  REQUIRE(mkdtemp(dir) != NULL);
  /* <dir>/lib is the library's directory: the packaged files are in
   * <dir>/lib/<datadir>/tessera/tuning, made here step by step. */
  snprintf(library_dir, sizeof library_dir, "%s/lib", dir);
  REQUIRE(mkdir(library_dir, 0755) == 0);
  snprintf(system_dir, sizeof system_dir, "%s/%s", library_dir, TSR_LIBDIR_TO_DATADIR);
  for (char *p = system_dir + strlen(library_dir) + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      mkdir(system_dir, 0755);
      *p = '/';
    }
  mkdir(system_dir, 0755);
  strncat(system_dir, "/tessera", sizeof system_dir - strlen(system_dir) - 1);
  REQUIRE(mkdir(system_dir, 0755) == 0);
  strncat(system_dir, "/tuning", sizeof system_dir - strlen(system_dir) - 1);
  REQUIRE(mkdir(system_dir, 0755) == 0);
  snprintf(user, sizeof user, "%s/user.tsv", dir);
  REQUIRE(setenv("TESSERA_TUNING_DB", user, 1) == 0);

  check_index();
  check_database();
  check_warnings();
  check_user_path();
  check_threads();

  char path[1600];
  rmdir(system_dir);
  snprintf(path, sizeof path, "%s/%s/tessera", library_dir, TSR_LIBDIR_TO_DATADIR);
  rmdir(path);
  snprintf(path, sizeof path, "%s/%s", library_dir, TSR_LIBDIR_TO_DATADIR);
  rmdir(path);
  rmdir(library_dir);
  rmdir(dir);
  return api_finish("test_tuning_db");
}
