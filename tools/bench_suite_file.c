/* SPDX-License-Identifier: Apache-2.0 */
/* Suite files (docs/BENCHMARKS.md): where `tessera bench --suite NAME`
 * finds NAME.suite (<datadir>/tessera/bench/suites, found from where
 * libtessera or the tool itself lies, as the core finds plugins.d), and the
 * parser. A file is data from anywhere: every line is checked, and what is
 * wrong is named FILE:LINE, never truncated or guessed. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"

#define SUITE_MAX_BYTES (64 * 1024)
#define SUITE_MAX_LINE 1023
#define SUITE_MAX_WORDS 16
#define SUITE_ROW_NAME_MAX 31

/* The suites' old short names, kept for scripts. */
static const char *const short_names[][2] = {
    {"cpu", "cpu-kernels"}, {"cuda", "cuda-llm"}, {"vulkan", "vulkan-vs-cuda"}};
#define SHORT_NAME_COUNT (int)(sizeof short_names / sizeof short_names[0])

/* 1 to `max` characters of A-Z a-z 0-9 _ . : - */
static bool is_name(const char *word, size_t max) {
  size_t length = strlen(word);
  return length > 0 && length <= max &&
         strspn(word, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-") ==
             length;
}

/* ------------------------------------------------------------------------ */
/* Where the suites are                                                      */
/* ------------------------------------------------------------------------ */

static char suites_dir[PATH_MAX];
static pthread_once_t suites_dir_once = PTHREAD_ONCE_INIT;

/* `file`'s directory + "/" + relative + "/tessera/bench/suites", resolved,
 * into suites_dir when it is a directory. */
static bool try_suites_dir(const char *file, const char *relative) {
  const char *slash = strrchr(file, '/');
  if (slash == NULL)
    return false;
  char candidate[PATH_MAX];
  int n = snprintf(candidate, sizeof candidate, "%.*s/%s/tessera/bench/suites", (int)(slash - file),
                   file, relative);
  if (n < 0 || (size_t)n >= sizeof candidate)
    return false;
  char resolved[PATH_MAX];
  struct stat st;
  if (realpath(candidate, resolved) == NULL || stat(resolved, &st) != 0 || !S_ISDIR(st.st_mode))
    return false;
  snprintf(suites_dir, sizeof suites_dir, "%s", resolved);
  return true;
}

/* Relative to libtessera (lib/ -> share/), as the core finds plugins.d;
 * else relative to the tool (bin/ -> share/), for a static build. */
static void find_suites_dir(void) {
  Dl_info info;
  if (dladdr((void *)&tsr_context_create, &info) && info.dli_fname != NULL &&
      try_suites_dir(info.dli_fname, TSR_LIBDIR_TO_DATADIR))
    return;
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    if (try_suites_dir(exe, TSR_BINDIR_TO_DATADIR))
      return;
  }
  suites_dir[0] = '\0';
}

const char *bench_suites_dir(void) {
  pthread_once(&suites_dir_once, find_suites_dir);
  return suites_dir;
}

static int compare_names(const void *a, const void *b) {
  return strcmp(a, b);
}

/* The .suite files of the directory, by name ("a, b, c"), for messages. */
static void list_suites(const char *dir, char *buf, size_t capacity) {
  buf[0] = '\0';
  DIR *d = opendir(dir);
  if (d == NULL)
    return;
  char names[32][BENCH_SUITE_NAME_MAX];
  int count = 0;
  for (struct dirent *e = readdir(d); e != NULL && count < 32; e = readdir(d)) {
    size_t length = strlen(e->d_name);
    if (e->d_name[0] != '.' && length > 6 && length - 6 < BENCH_SUITE_NAME_MAX &&
        strcmp(e->d_name + length - 6, ".suite") == 0)
      snprintf(names[count++], BENCH_SUITE_NAME_MAX, "%.*s", (int)(length - 6), e->d_name);
  }
  closedir(d);
  qsort(names, (size_t)count, sizeof names[0], compare_names);
  for (int i = 0; i < count; i++) {
    size_t used = strlen(buf);
    snprintf(buf + used, capacity - used, "%s%s", i ? ", " : "", names[i]);
  }
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                   */
/* ------------------------------------------------------------------------ */

/* The whole file, NUL-terminated, in a malloc'd buffer; opened without
 * blocking and checked to be a regular file first (a FIFO must not hang). */
static char *read_suite_file(const char *path, size_t *length) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    cli_error("%s: cannot read: %s", path, strerror(errno));
    return NULL;
  }
  struct stat st;
  char *text = NULL;
  if (fstat(fd, &st) != 0) {
    cli_error("%s: cannot read: %s", path, strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    cli_error("%s: not a regular file", path);
  } else if (st.st_size > SUITE_MAX_BYTES) {
    cli_error("%s: larger than %d bytes", path, SUITE_MAX_BYTES);
  } else if ((text = malloc((size_t)st.st_size + 1)) == NULL) {
    cli_error("%s: out of memory", path);
  } else {
    size_t used = 0;
    ssize_t n = 1;
    /* The size may change under us: read until the end, never past the cap. */
    while (used <= SUITE_MAX_BYTES && (n = read(fd, text + used, (size_t)st.st_size - used)) > 0)
      used += (size_t)n;
    char extra;
    if (n < 0 || (used == (size_t)st.st_size && read(fd, &extra, 1) > 0)) {
      cli_error("%s: %s while reading", path, n < 0 ? strerror(errno) : "it grew");
      free(text);
      text = NULL;
    } else {
      text[used] = '\0';
      *length = used;
    }
  }
  close(fd);
  return text;
}

bool bench_suite_load(const char *name_or_path, bench_suite *suite) {
  char path[PATH_MAX + BENCH_SUITE_NAME_MAX + 8]; /* a directory, a name, .suite */
  if (strchr(name_or_path, '/') != NULL) {
    if (strlen(name_or_path) >= sizeof path) {
      cli_error("bench: suite path too long (%zu bytes)", strlen(name_or_path));
      return false;
    }
    snprintf(path, sizeof path, "%s", name_or_path);
  } else {
    const char *name = name_or_path;
    for (int i = 0; i < SHORT_NAME_COUNT; i++)
      if (strcmp(name, short_names[i][0]) == 0)
        name = short_names[i][1];
    const char *dir = bench_suites_dir();
    /* A name: no '/', no leading '.', so it stays inside the directory. */
    bool plain = name[0] != '.' && is_name(name, BENCH_SUITE_NAME_MAX - 1);
    struct stat st;
    if (dir[0] == '\0') {
      cli_error("bench: no suite '%s': the suites directory (<datadir>/tessera/bench/suites beside "
                "libtessera or the tool) was not found; --suite PATH reads a file",
                name_or_path);
      return false;
    }
    int n = snprintf(path, sizeof path, "%s/%s.suite", dir, plain ? name : "");
    if (!plain || n < 0 || (size_t)n >= sizeof path || stat(path, &st) != 0) {
      char there[1024], shorts[128] = "";
      list_suites(dir, there, sizeof there);
      for (int i = 0; i < SHORT_NAME_COUNT; i++)
        snprintf(shorts + strlen(shorts), sizeof shorts - strlen(shorts), "%s%s", i ? ", " : "",
                 short_names[i][0]);
      if (plain)
        cli_error("bench: unknown suite '%s': no %s.suite in %s (suites there: %s; short names: "
                  "%s); a PATH with '/' reads that file",
                  name_or_path, name, dir, there[0] ? there : "none", shorts);
      else
        cli_error("bench: unknown suite '%s': a suite's name is 1 to %d of A-Z a-z 0-9 _ . : - "
                  "and does not start with '.' (suites in %s: %s); a PATH with '/' reads that file",
                  name_or_path, BENCH_SUITE_NAME_MAX - 1, dir, there[0] ? there : "none");
      return false;
    }
  }
  size_t length = 0;
  char *text = read_suite_file(path, &length);
  if (text == NULL)
    return false;
  bool ok = bench_suite_parse(path, text, length, suite);
  free(text);
  return ok;
}

/* ------------------------------------------------------------------------ */
/* Parsing                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct parser {
  const char *path;
  int line;
  bench_suite *suite;
  char row_names[BENCH_MAX_ROWS][SUITE_ROW_NAME_MAX + 1];
  int seen[5];             /* line of each once-only key (about, runs-on, ...); 0: not yet */
  int reference_criterion; /* line of the first over-reference-* criterion; 0: none */
} parser;

static bool fail_at(const parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail_at(const parser *p, const char *fmt, ...) {
  char message[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  if (p->line > 0)
    cli_error("%s:%d: %s", p->path, p->line, message);
  else
    cli_error("%s: %s", p->path, message);
  return false;
}

static int find_row(const parser *p, const char *name) {
  for (int i = 0; i < p->suite->row_count; i++)
    if (strcmp(p->row_names[i], name) == 0)
      return i;
  return -1;
}

/* A threshold: a plain decimal number (no hex, inf or nan), 0 to 1e9. */
static bool parse_threshold(const parser *p, const char *word, double *value) {
  char *end = NULL;
  errno = 0;
  double v = strtod(word, &end);
  if (strspn(word, "0123456789.eE+-") != strlen(word) || end == word || *end != '\0' ||
      errno != 0 || !isfinite(v) || v < 0.0 || v > 1e9)
    return fail_at(p, "'%s' is not a threshold (a number from 0 to 1e9)", word);
  *value = v;
  return true;
}

/* row NAME|- OP DTYPE SHAPE [causal] [tf32] [short|full] */
static bool parse_row(parser *p, char **w, int n) {
  bench_suite *s = p->suite;
  if (n < 5)
    return fail_at(p, "row needs NAME (or -) OP DTYPE SHAPE");
  if (s->row_count == BENCH_MAX_ROWS)
    return fail_at(p, "more than %d rows", BENCH_MAX_ROWS);
  if (strcmp(w[1], "-") != 0) {
    if (!is_name(w[1], SUITE_ROW_NAME_MAX))
      return fail_at(p, "row name '%.40s' is not 1 to %d of A-Z a-z 0-9 _ . : -", w[1],
                     SUITE_ROW_NAME_MAX);
    if (find_row(p, w[1]) >= 0)
      return fail_at(p, "a row named '%s' is already above", w[1]);
  }
  tsr_op op = tsr_op_from_name(w[2]);
  if (op == TSR_OP_COUNT_)
    return fail_at(p, "unknown op '%.40s'", w[2]);
  tsr_dtype dtype = tsr_dtype_from_name(w[3]);
  if (dtype != TSR_DTYPE_F32 && dtype != TSR_DTYPE_F16 && dtype != TSR_DTYPE_BF16)
    return fail_at(p, "unknown dtype '%.40s' (dtypes: f32, f16, bf16)", w[3]);
  bool causal = false, tf32 = false;
  suite_row_runs runs = ROW_ALWAYS;
  for (int i = 5; i < n; i++) {
    bool *flag = strcmp(w[i], "causal") == 0 ? &causal : strcmp(w[i], "tf32") == 0 ? &tf32 : NULL;
    if (flag != NULL && !*flag) {
      *flag = true;
    } else if ((strcmp(w[i], "short") == 0 || strcmp(w[i], "full") == 0) && runs == ROW_ALWAYS) {
      runs = w[i][0] == 's' ? ROW_SHORT_ONLY : ROW_FULL_ONLY;
    } else {
      return fail_at(p,
                     "'%.40s' is not a row flag here (flags: causal, tf32, short or full; each "
                     "once)",
                     w[i]);
    }
  }
  if (causal && op != TSR_OP_ATTENTION)
    return fail_at(p, "causal is for attention rows");
  if (tf32 && (op != TSR_OP_GEMM || dtype != TSR_DTYPE_F32))
    return fail_at(p, "tf32 is for f32 gemm rows");
  problem_spec *spec = &s->rows[s->row_count];
  char why[256];
  if (!problem_spec_parse(spec, op, dtype, w[4], causal, why, sizeof why))
    return fail_at(p, "%s", why);
  /* Far beyond any device; keeps every tensor's element count (and byte
   * offsets) well inside int64. */
  if (!(problem_bytes(spec) <= 0x1p44) || !(problem_flops(spec) <= 1e18))
    return fail_at(p, "row %s %s %.40s is too large (%.3g bytes, at most 2^44)", w[2], w[3], w[4],
                   problem_bytes(spec));
  if (tf32)
    spec->gemm.compute = TSR_COMPUTE_TF32;
  s->row_runs[s->row_count] = runs;
  snprintf(p->row_names[s->row_count], sizeof p->row_names[0], "%s",
           strcmp(w[1], "-") == 0 ? "" : w[1]);
  s->row_count++;
  return true;
}

static const struct {
  const char *name;
  criterion_kind kind;
  int argument; /* 0: none; 1: an OpenBLAS variant; 2: a row */
} measures[] = {
    {"over-openblas", OVER_OPENBLAS, 1},
    {"over-cublaslt", OVER_CUBLASLT, 0},
    {"over-vendor-blas", OVER_VENDOR_BLAS, 0},
    {"tflops", TFLOPS_AT_LEAST, 0},
    {"over-row", OVER_OWN_RATE, 2},
    {"weights-over-copy", WEIGHTS_OVER_COPY, 0},
    {"bytes-over-copy", BYTES_OVER_COPY, 0},
    {"bytes-over-read", BYTES_OVER_READ, 0},
    {"over-reference-cublaslt", OVER_REFERENCE_CUBLASLT, 0},
    {"over-reference-rate", OVER_REFERENCE_RATE, 0},
};
#define MEASURE_COUNT (int)(sizeof measures / sizeof measures[0])

/* criterion ROW MEASURE [ARGUMENT] >= THRESHOLD [supplementary] [on DEVICES] */
static bool parse_criterion(parser *p, char **w, int n) {
  bench_suite *s = p->suite;
  if (s->criterion_count == BENCH_MAX_CRITERIA)
    return fail_at(p, "more than %d criteria", BENCH_MAX_CRITERIA);
  if (n < 3)
    return fail_at(p, "criterion needs ROW MEASURE [ARGUMENT] >= THRESHOLD");
  suite_criterion *c = &s->criteria[s->criterion_count];
  memset(c, 0, sizeof *c);
  c->row = find_row(p, w[1]);
  if (c->row < 0)
    return fail_at(p, "no row named '%.40s' above", w[1]);
  int m = 0;
  while (m < MEASURE_COUNT && strcmp(measures[m].name, w[2]) != 0)
    m++;
  if (m == MEASURE_COUNT)
    return fail_at(p,
                   "unknown measure '%.40s' (over-openblas, over-cublaslt, over-vendor-blas, "
                   "tflops, over-row, "
                   "weights-over-copy, bytes-over-copy, bytes-over-read, over-reference-cublaslt, "
                   "over-reference-rate)",
                   w[2]);
  c->kind = measures[m].kind;
  int next = 3;
  if (measures[m].argument != 0) {
    if (n <= next)
      return fail_at(p, "%s needs %s", w[2],
                     measures[m].argument == 1 ? "an OpenBLAS variant" : "a row");
    const char *argument = w[next++];
    if (measures[m].argument == 1) {
      c->reference = -1;
      for (int v = 0; v < OPENBLAS_VARIANT_COUNT; v++)
        if (strcmp(argument, openblas_variant_key((openblas_variant)v)) == 0)
          c->reference = v;
      if (c->reference < 0)
        return fail_at(p, "unknown OpenBLAS variant '%.40s' (as_installed, skylakex, prescott)",
                       argument);
    } else if ((c->reference = find_row(p, argument)) < 0) {
      return fail_at(p, "no row named '%.40s' above", argument);
    }
  }
  if (n <= next || strcmp(w[next], ">=") != 0)
    return fail_at(p, "expected '>= THRESHOLD' after %s%s%s", w[2], next > 3 ? " " : "",
                   next > 3 ? w[3] : "");
  if (n <= next + 1)
    return fail_at(p, "expected a threshold after '>='");
  if (!parse_threshold(p, w[next + 1], &c->threshold))
    return false;
  next += 2;
  if (next < n && strcmp(w[next], "supplementary") == 0) {
    c->supplementary = true;
    next++;
  }
  if (next < n && strcmp(w[next], "on") == 0) {
    /* on cpu|BACKEND: the devices the line judges (the others skip it) */
    if (next + 1 >= n)
      return fail_at(p, "'on' needs cpu or a backend name");
    const char *value = w[next + 1];
    if (!is_name(value, sizeof c->on - 1) || strchr(value, ':') != NULL ||
        strcmp(value, "any") == 0)
      return fail_at(p, "'%.40s' is not cpu or a backend name", value);
    snprintf(c->on, sizeof c->on, "%s", value);
    next += 2;
  }
  if (next < n)
    return fail_at(p,
                   "unexpected '%.40s' after the threshold (only 'supplementary' and 'on "
                   "DEVICES' may follow)",
                   w[next]);
  const problem_spec *row = &s->rows[c->row];
  if (c->kind == WEIGHTS_OVER_COPY && row->op != TSR_OP_GEMM)
    return fail_at(p, "weights-over-copy is for gemm rows");
  if (c->kind == OVER_OPENBLAS && (row->op != TSR_OP_GEMM || row->dtype != TSR_DTYPE_F32))
    return fail_at(p, "over-openblas is for f32 gemm rows (OpenBLAS times cblas_sgemm)");
  if ((c->kind == OVER_REFERENCE_CUBLASLT || c->kind == OVER_REFERENCE_RATE) &&
      p->reference_criterion == 0)
    p->reference_criterion = p->line;
  s->criterion_count++;
  return true;
}

/* The once-only keys, in the order of parser.seen. */
static const char *const once_keys[] = {"about", "runs-on", "reference", "default-devices",
                                        "cpu-devices"};

static bool parse_setting(parser *p, int key, char **w, int n, const char *rest) {
  bench_suite *s = p->suite;
  if (p->seen[key] != 0)
    return fail_at(p, "%s is already set on line %d", once_keys[key], p->seen[key]);
  p->seen[key] = p->line;
  if (key == 0) { /* about: the rest of the line */
    if (rest[0] == '\0' || strlen(rest) >= sizeof s->about)
      return fail_at(p, "about needs a text of 1 to %zu characters", sizeof s->about - 1);
    snprintf(s->about, sizeof s->about, "%s", rest);
    return true;
  }
  if (n != 2)
    return fail_at(p, "%s takes one value", w[0]);
  const char *value = w[1];
  switch (key) {
  case 1: /* runs-on any|cpu|BACKEND */
  case 2: /* reference BACKEND */
    if (!is_name(value, sizeof s->runs_on - 1) || strchr(value, ':') != NULL ||
        (key == 2 && (strcmp(value, "any") == 0 || strcmp(value, "cpu") == 0)))
      return fail_at(p, "'%.40s' is not a %s", value,
                     key == 1 ? "device kind (any, cpu or a backend name)" : "backend name");
    snprintf(key == 1 ? s->runs_on : s->reference, sizeof s->runs_on, "%s",
             strcmp(value, "any") == 0 ? "" : value);
    return true;
  case 3: /* default-devices all|SELECTOR */
    if (!is_name(value, sizeof s->default_devices - 1))
      return fail_at(p, "'%.40s' is not 'all' or a device selector", value);
    snprintf(s->default_devices, sizeof s->default_devices, "%s", value);
    return true;
  default: /* cpu-devices any|when-named */
    if (strcmp(value, "any") != 0 && strcmp(value, "when-named") != 0)
      return fail_at(p, "cpu-devices is 'any' or 'when-named', not '%.40s'", value);
    s->cpu_when_named = strcmp(value, "when-named") == 0;
    return true;
  }
}

/* One line, comment removed, into words (`about` takes the rest of the
 * line as it is, inner blanks kept). */
static bool parse_line(parser *p, char *line) {
  char *hash = strchr(line, '#');
  if (hash != NULL)
    *hash = '\0';
  char rest[SUITE_MAX_LINE + 1];
  const char *after = line + strspn(line, " \t");
  after += strcspn(after, " \t");
  after += strspn(after, " \t");
  size_t rest_length = strlen(after);
  while (rest_length > 0 && (after[rest_length - 1] == ' ' || after[rest_length - 1] == '\t'))
    rest_length--;
  snprintf(rest, sizeof rest, "%.*s", (int)rest_length, after);
  char *words[SUITE_MAX_WORDS];
  int n = 0;
  const char *first = line + strspn(line, " \t");
  if (strncmp(first, "about", 5) == 0 && (first[5] == '\0' || first[5] == ' ' || first[5] == '\t'))
    return parse_setting(p, 0, NULL, 1, rest); /* its text is not words */
  for (char *c = line; *c != '\0';) {
    c += strspn(c, " \t");
    if (*c == '\0')
      break;
    if (n == SUITE_MAX_WORDS)
      return fail_at(p, "more than %d words", SUITE_MAX_WORDS);
    words[n++] = c;
    c += strcspn(c, " \t");
    if (*c != '\0')
      *c++ = '\0';
  }
  if (n == 0)
    return true;
  if (strcmp(words[0], "row") == 0)
    return parse_row(p, words, n);
  if (strcmp(words[0], "criterion") == 0)
    return parse_criterion(p, words, n);
  for (int k = 0; k < (int)(sizeof once_keys / sizeof once_keys[0]); k++)
    if (strcmp(words[0], once_keys[k]) == 0)
      return parse_setting(p, k, words, n, rest);
  return fail_at(p,
                 "unknown key '%.40s' (keys: about, runs-on, reference, default-devices, "
                 "cpu-devices, row, criterion)",
                 words[0]);
}

/* The suite's name: the file's name without .suite. */
static bool name_from_path(parser *p, const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  size_t length = strlen(base);
  if (length > 6 && strcmp(base + length - 6, ".suite") == 0)
    length -= 6;
  if (length == 0 || length >= sizeof p->suite->name)
    return fail_at(p, "a suite's file name must have 1 to %zu characters before .suite",
                   sizeof p->suite->name - 1);
  snprintf(p->suite->name, sizeof p->suite->name, "%.*s", (int)length, base);
  return true;
}

bool bench_suite_parse(const char *path, const char *text, size_t length, bench_suite *suite) {
  memset(suite, 0, sizeof *suite);
  parser *p = calloc(1, sizeof *p);
  if (p == NULL) {
    cli_error("%s: out of memory", path);
    return false;
  }
  p->path = path;
  p->suite = suite;
  bool ok = name_from_path(p, path);
  char line[SUITE_MAX_LINE + 2];
  for (size_t at = 0; ok && at < length;) {
    p->line++;
    size_t end = at;
    while (end < length && text[end] != '\n')
      end++;
    size_t n = end - at;
    if (n > 0 && text[end - 1] == '\r')
      n--;
    if (n > SUITE_MAX_LINE) {
      ok = fail_at(p, "line longer than %d bytes", SUITE_MAX_LINE);
      break;
    }
    memcpy(line, text + at, n);
    line[n] = '\0';
    for (size_t i = 0; i < n && ok; i++)
      if ((unsigned char)line[i] > 0x7e || ((unsigned char)line[i] < 0x20 && line[i] != '\t'))
        ok = fail_at(p, "byte 0x%02x at column %zu: a suite file is printable ASCII",
                     (unsigned char)line[i], i + 1);
    ok = ok && parse_line(p, line);
    at = end + 1;
  }
  p->line = 0;
  if (ok && suite->row_count == 0)
    ok = fail_at(p, "no rows (a suite needs at least one 'row' line)");
  if (ok && p->reference_criterion != 0 && suite->reference[0] == '\0') {
    p->line = p->reference_criterion;
    ok = fail_at(p, "over-reference-* criteria need a 'reference BACKEND' line");
  }
  if (ok && suite->about[0] == '\0')
    ok = fail_at(p, "no 'about' line (what the suite measures)");
  free(p);
  return ok;
}
