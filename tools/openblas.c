/* SPDX-License-Identifier: Apache-2.0 */
#include "openblas.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

const char *openblas_variant_label(openblas_variant variant) {
  static const char *const labels[] = {"as installed", "SkylakeX", "Prescott"};
  return labels[variant];
}

const char *openblas_variant_coretype(openblas_variant variant) {
  static const char *const coretypes[] = {NULL, "SkylakeX", "Prescott"};
  return coretypes[variant];
}

const char *openblas_variant_key(openblas_variant variant) {
  static const char *const keys[] = {"as_installed", "skylakex", "prescott"};
  return keys[variant];
}

uint64_t bench_input_seed(int index) {
  return seed_mix(11, (uint64_t)index);
}

bool openblas_handles(const problem_spec *spec) {
  const gemm_spec *g = &spec->gemm;
  return spec->op == TSR_OP_GEMM && spec->dtype == TSR_DTYPE_F32 && g->batch <= 1 && !g->trans_a &&
         !g->trans_b && !g->has_c && !g->has_bias && g->activation == TSR_ACT_NONE &&
         g->alpha == 1.0f && g->m <= INT32_MAX && g->n <= INT32_MAX && g->k <= INT32_MAX;
}

/* ---- hashes and norms, computed the same way in parent and child ---- */

static uint64_t hash_bytes(uint64_t hash, const void *data, size_t bytes) {
  const unsigned char *p = data;
  size_t words = bytes / 8;
  for (size_t i = 0; i < words; i++) {
    uint64_t word;
    memcpy(&word, p + i * 8, 8);
    hash = (hash ^ word) * 0x100000001b3ull;
    hash ^= hash >> 29;
  }
  for (size_t i = words * 8; i < bytes; i++)
    hash = (hash ^ p[i]) * 0x100000001b3ull;
  return hash;
}

bool gemm_inputs_hash(problem *sets, int set_count, uint64_t *hash) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int s = 0; s < set_count; s++) {
    static const char *const names[] = {"a", "b"};
    for (int i = 0; i < 2; i++) {
      void *data = NULL;
      size_t bytes = 0;
      if (!problem_host_data(&sets[s], names[i], &data, &bytes))
        return false;
      h = hash_bytes(h, data, bytes);
    }
  }
  *hash = h;
  return true;
}

bool gemm_output_norm(problem *p, double *norm) {
  void *data = NULL;
  size_t bytes = 0;
  if (!problem_host_data(p, "d", &data, &bytes))
    return false;
  const float *d = data;
  double sum = 0.0;
  for (size_t i = 0; i < bytes / sizeof(float); i++)
    sum += (double)d[i] * (double)d[i];
  *norm = sqrt(sum);
  return true;
}

/* ---- the child: OpenBLAS loaded into a fresh process ---- */

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111 };

typedef void (*cblas_sgemm_fn)(int order, int trans_a, int trans_b, int m, int n, int k,
                               float alpha, const float *a, int lda, const float *b, int ldb,
                               float beta, float *c, int ldc);
typedef void (*set_threads_fn)(int threads);
typedef char *(*text_fn)(void);

typedef struct loaded_openblas {
  void *library;
  cblas_sgemm_fn sgemm;
  set_threads_fn set_threads;
  text_fn corename, config;
} loaded_openblas;

/* dlsym returns an object pointer; copying it into a function pointer is
 * how POSIX expects it to be used. */
static bool load_symbol(void *library, const char *name, void *function_pointer) {
  void *symbol = dlsym(library, name);
  if (symbol == NULL)
    return false;
  memcpy(function_pointer, &symbol, sizeof symbol);
  return true;
}

static bool load_openblas(loaded_openblas *blas) {
  memset(blas, 0, sizeof *blas);
  static const char *const names[] = {"libopenblas.so.0", "libopenblas.so"};
  for (size_t i = 0; i < sizeof names / sizeof names[0] && blas->library == NULL; i++)
    blas->library = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (blas->library == NULL) {
    cli_error("libopenblas.so.0 not found (%s)", dlerror());
    return false;
  }
  if (!load_symbol(blas->library, "cblas_sgemm", &blas->sgemm) ||
      !load_symbol(blas->library, "openblas_set_num_threads", &blas->set_threads)) {
    cli_error("libopenblas.so.0 lacks cblas_sgemm or openblas_set_num_threads");
    return false;
  }
  /* Optional: older builds may lack them. */
  load_symbol(blas->library, "openblas_get_corename", &blas->corename);
  load_symbol(blas->library, "openblas_get_config", &blas->config);
  return true;
}

static const char *text_or_unknown(text_fn function) {
  const char *text = function != NULL ? function() : NULL;
  return text != NULL && text[0] != '\0' ? text : "unknown";
}

static void run_sgemm(const loaded_openblas *blas, problem *p) {
  const gemm_spec *g = &p->spec.gemm;
  void *a, *b, *d;
  size_t bytes;
  problem_host_data(p, "a", &a, &bytes);
  problem_host_data(p, "b", &b, &bytes);
  problem_host_data(p, "d", &d, &bytes);
  blas->sgemm(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_NO_TRANS, (int)g->m, (int)g->n, (int)g->k,
              1.0f, a, (int)g->k, b, (int)g->n, 0.0f, d, (int)g->n);
}

int cmd_openblas_sgemm(int argc, char **argv) {
  bool probe = false;
  const char *shape = NULL;
  int64_t sets = 1, threads = 1, warmup = 1, min_runs = 3, max_runs = 10;
  double budget = 1.0;
  arg_cursor c;
  arg_begin(&c, argc, argv);
  while (!arg_done(&c)) {
    const char *value = NULL;
    int64_t *integer = NULL;
    if (arg_flag(&c, "--probe")) {
      probe = true;
    } else if (arg_value(&c, "--shape", &value)) {
      shape = value;
    } else if (arg_value(&c, "--budget", &value)) {
      char *end = NULL;
      budget = strtod(value, &end);
      if (end == value || *end != '\0' || !(budget >= 0.0)) {
        cli_error("%s: bad --budget '%s'", OPENBLAS_CHILD_COMMAND, value);
        return EXIT_USAGE;
      }
    } else if (arg_value(&c, "--sets", &value)) {
      integer = &sets;
    } else if (arg_value(&c, "--threads", &value)) {
      integer = &threads;
    } else if (arg_value(&c, "--warmup", &value)) {
      integer = &warmup;
    } else if (arg_value(&c, "--min-runs", &value)) {
      integer = &min_runs;
    } else if (arg_value(&c, "--max-runs", &value)) {
      integer = &max_runs;
    } else {
      return arg_unknown(&c, OPENBLAS_CHILD_COMMAND);
    }
    if (integer != NULL && !parse_int64(value, integer)) {
      cli_error("%s: bad number '%s'", OPENBLAS_CHILD_COMMAND, value);
      return EXIT_USAGE;
    }
  }
  if (c.failed)
    return EXIT_USAGE;
  if (!probe && shape == NULL) {
    cli_error("%s: --probe or --shape MxNxK", OPENBLAS_CHILD_COMMAND);
    return EXIT_USAGE;
  }
  if (sets < 1 || sets > 3 || threads < 1 || min_runs < 1 || max_runs < min_runs) {
    cli_error("%s: --sets 1..3, --threads >= 1, 1 <= --min-runs <= --max-runs",
              OPENBLAS_CHILD_COMMAND);
    return EXIT_USAGE;
  }
  problem_spec spec;
  if (!probe && (!problem_spec_from_shape(&spec, TSR_OP_GEMM, TSR_DTYPE_F32, shape, false) ||
                 !openblas_handles(&spec))) {
    cli_error("%s: '%s' is not a plain MxNxK f32 GEMM", OPENBLAS_CHILD_COMMAND, shape);
    return EXIT_USAGE;
  }

  loaded_openblas blas;
  if (!load_openblas(&blas))
    return EXIT_FAILED;
  if (probe) {
    printf("core=%s\tconfig=%s\n", text_or_unknown(blas.corename), text_or_unknown(blas.config));
    return EXIT_OK;
  }

  problem built[3];
  int count = 0;
  int rc = EXIT_OK;
  for (; count < (int)sets; count++) {
    if (problem_build_host(&built[count], &spec, bench_input_seed(count)) != TSR_OK) {
      cli_error("%s: %s", OPENBLAS_CHILD_COMMAND, built[count].error);
      count++;
      rc = EXIT_FAILED;
      break;
    }
  }
  uint64_t hash = 0;
  if (rc == EXIT_OK && !gemm_inputs_hash(built, count, &hash))
    rc = EXIT_FAILED;
  if (rc == EXIT_OK) {
    blas.set_threads((int)threads);
    for (int i = 0; i < warmup; i++)
      run_sgemm(&blas, &built[i % count]);
    double samples[TIMING_MAX_SAMPLES];
    if (max_runs > TIMING_MAX_SAMPLES)
      max_runs = TIMING_MAX_SAMPLES;
    int runs = 0;
    double total = 0.0;
    while (runs < max_runs && (runs < min_runs || total < budget)) {
      double start = now_seconds();
      run_sgemm(&blas, &built[runs % count]);
      double elapsed = now_seconds() - start;
      samples[runs++] = elapsed * 1e3;
      total += elapsed;
    }
    double norm = NAN;
    gemm_output_norm(&built[0], &norm);
    printf("core=%s\tmedian_ms=%.9g\truns=%d\thash=%016llx\tnorm=%.17g\n",
           text_or_unknown(blas.corename), median(samples, runs), runs, (unsigned long long)hash,
           norm);
  }
  for (int i = 0; i < count; i++)
    problem_destroy(&built[i]);
  return rc;
}

/* ---- the parent: spawning the child ---- */

static cpu_set_t remembered_affinity;
static bool affinity_remembered = false;

void openblas_remember_affinity(void) {
  affinity_remembered = sched_getaffinity(0, sizeof remembered_affinity, &remembered_affinity) == 0;
}

/* The environment of the child: ours without OPENBLAS_CORETYPE, plus the
 * variant's setting. */
static char **child_environment(openblas_variant variant) {
  size_t count = 0;
  while (environ[count] != NULL)
    count++;
  char **env = calloc(count + 2, sizeof *env);
  if (env == NULL)
    return NULL;
  size_t n = 0;
  static const char prefix[] = "OPENBLAS_CORETYPE=";
  for (size_t i = 0; i < count; i++)
    if (strncmp(environ[i], prefix, sizeof prefix - 1) != 0)
      env[n++] = environ[i];
  static char setting[64];
  const char *coretype = openblas_variant_coretype(variant);
  if (coretype != NULL) {
    snprintf(setting, sizeof setting, "%s%s", prefix, coretype);
    env[n++] = setting;
  }
  env[n] = NULL;
  return env;
}

/* Runs this executable with `args` (NULL-terminated, without argv[0]) and
 * the variant's environment; collects stdout into `out`. Returns the exit
 * status, or -1 (reason in `error`) when it could not run or was killed. */
static int run_child(openblas_variant variant, char **args, char *out, size_t capacity, char *error,
                     size_t error_capacity) {
  char *argv[24];
  size_t argc = 0;
  static char name[] = "tessera";
  argv[argc++] = name;
  for (size_t i = 0; args[i] != NULL && argc + 1 < sizeof argv / sizeof argv[0]; i++)
    argv[argc++] = args[i];
  argv[argc] = NULL;
  char **env = child_environment(variant);
  int pipe_ends[2];
  if (env == NULL || pipe(pipe_ends) != 0) {
    snprintf(error, error_capacity, "cannot start a child process: %s", strerror(errno));
    free(env);
    return -1;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addclose(&actions, pipe_ends[0]);
  posix_spawn_file_actions_adddup2(&actions, pipe_ends[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, pipe_ends[1]);
  /* The child inherits the calling thread's CPU mask: give it the one this
   * process started with. */
  cpu_set_t current;
  bool restore = affinity_remembered && sched_getaffinity(0, sizeof current, &current) == 0 &&
                 sched_setaffinity(0, sizeof remembered_affinity, &remembered_affinity) == 0;
  fflush(stdout);
  pid_t pid;
  int spawn_error = posix_spawn(&pid, "/proc/self/exe", &actions, NULL, argv, env);
  if (restore)
    sched_setaffinity(0, sizeof current, &current);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_ends[1]);
  free(env);
  if (spawn_error != 0) {
    close(pipe_ends[0]);
    snprintf(error, error_capacity, "cannot run /proc/self/exe: %s", strerror(spawn_error));
    return -1;
  }
  size_t used = 0;
  for (;;) {
    char chunk[512];
    ssize_t got = read(pipe_ends[0], chunk, sizeof chunk);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      break;
    size_t keep = (size_t)got < capacity - 1 - used ? (size_t)got : capacity - 1 - used;
    memcpy(out + used, chunk, keep);
    used += keep;
  }
  out[used] = '\0';
  close(pipe_ends[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      snprintf(error, error_capacity, "waitpid: %s", strerror(errno));
      return -1;
    }
  }
  if (!WIFEXITED(status)) {
    snprintf(error, error_capacity, "child killed by signal %d", WTERMSIG(status));
    return -1;
  }
  if (WEXITSTATUS(status) != 0)
    snprintf(error, error_capacity, "child exited with status %d (its message is above)",
             WEXITSTATUS(status));
  return WEXITSTATUS(status);
}

/* Copies the value of `key=` from a line of tab-separated fields. */
static bool field(const char *line, const char *key, char *value, size_t capacity) {
  size_t key_length = strlen(key);
  const char *at = line;
  while (at != NULL && *at != '\0') {
    if (strncmp(at, key, key_length) == 0 && at[key_length] == '=') {
      const char *start = at + key_length + 1;
      size_t length = strcspn(start, "\t\n");
      if (length >= capacity)
        length = capacity - 1;
      memcpy(value, start, length);
      value[length] = '\0';
      return true;
    }
    at = strchr(at, '\t');
    if (at != NULL)
      at++;
  }
  return false;
}

void openblas_probe_variant(openblas_variant variant, openblas_probe *probe) {
  memset(probe, 0, sizeof *probe);
  char command[] = OPENBLAS_CHILD_COMMAND, flag[] = "--probe";
  char *args[] = {command, flag, NULL};
  char out[1024];
  int status = run_child(variant, args, out, sizeof out, probe->error, sizeof probe->error);
  if (status != 0)
    return;
  if (!field(out, "core", probe->core, sizeof probe->core) ||
      !field(out, "config", probe->config, sizeof probe->config)) {
    snprintf(probe->error, sizeof probe->error, "unexpected child output: %.200s", out);
    return;
  }
  probe->available = true;
}

bool openblas_time_sgemm(openblas_variant variant, const problem_spec *spec, int set_count,
                         int threads, const timing_plan *plan, openblas_timing *timing) {
  memset(timing, 0, sizeof *timing);
  timing->median_ms = NAN;
  timing->output_norm = NAN;
  if (!openblas_handles(spec)) {
    snprintf(timing->error, sizeof timing->error, "not a plain f32 GEMM");
    return false;
  }
  char shape[96], sets[16], thread_count[16], warmup[16], min_runs[16], max_runs[16], budget[32];
  snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)spec->gemm.m, (long long)spec->gemm.n,
           (long long)spec->gemm.k);
  snprintf(sets, sizeof sets, "%d", set_count);
  snprintf(thread_count, sizeof thread_count, "%d", threads);
  snprintf(warmup, sizeof warmup, "%d", plan->warmup);
  snprintf(min_runs, sizeof min_runs, "%d", plan->min_runs);
  snprintf(max_runs, sizeof max_runs, "%d", plan->max_runs);
  snprintf(budget, sizeof budget, "%g", plan->budget);
  char command[] = OPENBLAS_CHILD_COMMAND, o_shape[] = "--shape", o_sets[] = "--sets",
       o_threads[] = "--threads", o_warmup[] = "--warmup", o_min[] = "--min-runs",
       o_max[] = "--max-runs", o_budget[] = "--budget";
  char *args[] = {command, o_shape, shape,    o_sets, sets,     o_threads, thread_count, o_warmup,
                  warmup,  o_min,   min_runs, o_max,  max_runs, o_budget,  budget,       NULL};
  char out[1024];
  int status = run_child(variant, args, out, sizeof out, timing->error, sizeof timing->error);
  if (status != 0)
    return false;
  char value[64];
  char *end = NULL;
  bool ok = field(out, "core", timing->core, sizeof timing->core);
  ok = ok && field(out, "median_ms", value, sizeof value);
  if (ok)
    timing->median_ms = strtod(value, &end);
  ok = ok && end != value && field(out, "runs", value, sizeof value);
  if (ok)
    timing->runs = atoi(value);
  ok = ok && field(out, "hash", value, sizeof value);
  if (ok)
    timing->inputs_hash = strtoull(value, &end, 16);
  ok = ok && end != value && field(out, "norm", value, sizeof value);
  if (ok)
    timing->output_norm = strtod(value, &end);
  if (!ok || !(timing->median_ms > 0.0)) {
    snprintf(timing->error, sizeof timing->error, "unexpected child output: %.200s", out);
    timing->median_ms = NAN;
    return false;
  }
  return true;
}
