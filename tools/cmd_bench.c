/* tessera bench: op timings measured with queue events after warm-up, medians
 * over rotated random input sets, rates as TFLOP/s or GB/s, the fraction of
 * the device's measured ceiling (a large buffer copy for bandwidth, the
 * vendor GEMM for matrix rate) and, where a vendor library is on the machine
 * (OpenBLAS for the CPU), its time on the same inputs in the same run. */
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "common.h"
#include "problem.h"
#include "timing.h"

/* ---- OpenBLAS, loaded at run time so the tool never depends on it ---- */

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

typedef void (*cblas_sgemm_fn)(int order, int trans_a, int trans_b, int m, int n, int k,
                               float alpha, const float *a, int lda, const float *b, int ldb,
                               float beta, float *c, int ldc);
typedef void (*openblas_set_num_threads_fn)(int threads);

typedef struct vendor_blas {
  void *library;
  cblas_sgemm_fn sgemm;
  openblas_set_num_threads_fn set_threads;
} vendor_blas;

static bool vendor_open(vendor_blas *blas) {
  memset(blas, 0, sizeof *blas);
  static const char *const names[] = {"libopenblas.so.0", "libopenblas.so"};
  for (size_t i = 0; i < sizeof names / sizeof names[0] && blas->library == NULL; i++)
    blas->library = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (blas->library == NULL)
    return false;
  /* dlsym returns an object pointer; copying it into a function pointer is
   * how POSIX expects it to be used. */
  void *sgemm = dlsym(blas->library, "cblas_sgemm");
  void *set_threads = dlsym(blas->library, "openblas_set_num_threads");
  if (sgemm == NULL || set_threads == NULL) {
    dlclose(blas->library);
    blas->library = NULL;
    return false;
  }
  memcpy(&blas->sgemm, &sgemm, sizeof sgemm);
  memcpy(&blas->set_threads, &set_threads, sizeof set_threads);
  return true;
}

static void vendor_close(vendor_blas *blas) {
  if (blas->library != NULL)
    dlclose(blas->library);
  memset(blas, 0, sizeof *blas);
}

/* One row-major sgemm D = A B with A [M,K] and B [K,N] given by strides
 * (either dimension may be the unit-stride one). */
typedef struct host_gemm {
  const float *a, *b;
  float *d;
  int m, n, k;
  int trans_a, trans_b;
  int lda, ldb, ldd;
} host_gemm;

static void vendor_sgemm(const vendor_blas *blas, const host_gemm *g) {
  blas->sgemm(CBLAS_ROW_MAJOR, g->trans_a ? CBLAS_TRANS : CBLAS_NO_TRANS,
              g->trans_b ? CBLAS_TRANS : CBLAS_NO_TRANS, g->m, g->n, g->k, 1.0f, g->a, g->lda, g->b,
              g->ldb, 0.0f, g->d, g->ldd);
}

/* Median host time of the vendor call over rotated input sets. */
static double time_vendor(const vendor_blas *blas, const host_gemm *sets, int set_count, int warmup,
                          int min_runs, int max_runs, double budget) {
  for (int i = 0; i < warmup; i++)
    vendor_sgemm(blas, &sets[i % set_count]);
  double samples[TIMING_MAX_SAMPLES];
  if (max_runs > TIMING_MAX_SAMPLES)
    max_runs = TIMING_MAX_SAMPLES;
  int count = 0;
  double total = 0.0;
  while (count < max_runs && (count < min_runs || total < budget)) {
    double start = now_seconds();
    vendor_sgemm(blas, &sets[count % set_count]);
    double elapsed = now_seconds() - start;
    samples[count++] = elapsed * 1e3;
    total += elapsed;
  }
  return median(samples, count);
}

/* ---- rows ---- */

typedef struct bench_options {
  const char *selectors[MAX_SELECTED_DEVICES];
  int selector_count;
  bool all;
  tsr_op op; /* TSR_OP_COUNT_: every op */
  bool short_run;
  const char *json_path;
} bench_options;

typedef struct bench_row {
  char device[48];
  problem_spec spec;
  char shape[96];
  double ms, tflops, gbs;
  double ceiling_fraction;  /* NaN: no ceiling known */
  const char *ceiling_kind; /* "copy", "sgemm" */
  double vendor_ms;         /* NaN: no vendor timing */
  int runs;
  bool failed;
} bench_row;

typedef struct device_ceiling {
  char device[48];
  double copy_gbs;      /* NaN when not measured */
  double vendor_tflops; /* NaN when no vendor GEMM */
  char vendor[32];
  int threads;
} device_ceiling;

static problem_spec square_gemm(tsr_dtype dtype, int64_t size) {
  problem_spec s;
  problem_spec_from_shape(&s, TSR_OP_GEMM, dtype, "1x1x1", false);
  s.gemm.m = s.gemm.n = s.gemm.k = size;
  return s;
}

static problem_spec shaped(tsr_op op, tsr_dtype dtype, const char *shape, bool causal) {
  problem_spec s;
  if (!problem_spec_from_shape(&s, op, dtype, shape, causal))
    memset(&s, 0, sizeof s); /* cannot happen for the built-in shapes */
  return s;
}

/* The default rows: the ops an LLM spends its time in, at sizes that take
 * a second or so each on a small CPU (--short: a fraction of that). */
static int default_rows(bool short_run, problem_spec *rows) {
  int n = 0;
  static const int64_t full_sizes[] = {512, 1024, 2048};
  static const int64_t short_sizes[] = {256, 512};
  const int64_t *sizes = short_run ? short_sizes : full_sizes;
  int size_count = short_run ? 2 : 3;
  for (int d = 0; d < 2; d++)
    for (int i = 0; i < size_count; i++)
      rows[n++] = square_gemm(d == 0 ? TSR_DTYPE_F32 : TSR_DTYPE_BF16, sizes[i]);
  const tsr_dtype bf16 = TSR_DTYPE_BF16;
  if (short_run) {
    rows[n++] = shaped(TSR_OP_ATTENTION, bf16, "1x4x4x256x256x64", true);
    rows[n++] = shaped(TSR_OP_RMSNORM, bf16, "1024x1024", false);
    rows[n++] = shaped(TSR_OP_SOFTMAX, TSR_DTYPE_F32, "1024x1024", false);
    rows[n++] = shaped(TSR_OP_SWIGLU, bf16, "1024x1024", false);
    rows[n++] = shaped(TSR_OP_ROPE, bf16, "1x256x8x64", false);
    rows[n++] = shaped(TSR_OP_CROSS_ENTROPY, bf16, "128x8192", false);
    rows[n++] = shaped(TSR_OP_GROUPED_GEMM, bf16, "4x512x256x256", false);
  } else {
    rows[n++] = shaped(TSR_OP_ATTENTION, bf16, "1x8x8x1024x1024x64", true);
    rows[n++] = shaped(TSR_OP_ATTENTION, bf16, "4x32x8x1x2048x128", true); /* decode */
    rows[n++] = shaped(TSR_OP_RMSNORM, bf16, "4096x4096", false);
    rows[n++] = shaped(TSR_OP_SOFTMAX, TSR_DTYPE_F32, "4096x4096", false);
    rows[n++] = shaped(TSR_OP_SWIGLU, bf16, "2048x4096", false);
    rows[n++] = shaped(TSR_OP_ROPE, bf16, "1x2048x32x128", false);
    rows[n++] = shaped(TSR_OP_CROSS_ENTROPY, bf16, "512x32000", false);
    rows[n++] = shaped(TSR_OP_GROUPED_GEMM, bf16, "8x2048x1024x1024", false);
  }
  return n;
}

/* Device bandwidth: a large buffer-to-buffer copy, counted as bytes read
 * plus bytes written. */
static double measure_copy_gbs(tsr_device *device, tsr_queue *queue, uint64_t memory,
                               bool short_run) {
  size_t bytes = short_run ? ((size_t)32 << 20) : ((size_t)256 << 20);
  while (memory > 0 && bytes > ((size_t)1 << 20) && (uint64_t)bytes * 8 > memory)
    bytes /= 2;
  tsr_buffer *src = NULL, *dst = NULL;
  double result = NAN;
  unsigned char *fill = malloc(bytes);
  if (fill == NULL)
    return NAN;
  rng generator;
  rng_seed(&generator, 99);
  for (size_t i = 0; i < bytes; i += 8) {
    uint64_t word = rng_next(&generator);
    memcpy(fill + i, &word, bytes - i < 8 ? bytes - i : 8);
  }
  tsr_status status = tsr_buffer_create(device, bytes, &src);
  if (status == TSR_OK)
    status = tsr_buffer_create(device, bytes, &dst);
  if (status == TSR_OK)
    status = tsr_buffer_write(queue, src, 0, fill, bytes);
  if (status == TSR_OK)
    status = tsr_buffer_copy(queue, src, 0, dst, 0, bytes); /* warm-up: pages in dst */
  if (status == TSR_OK)
    status = tsr_queue_finish(queue);
  double samples[8];
  int count = 0;
  for (int i = 0; i < (short_run ? 3 : 5) && status == TSR_OK; i++) {
    tsr_event *start = NULL, *end = NULL;
    status = tsr_event_record(queue, &start);
    if (status == TSR_OK)
      status = tsr_buffer_copy(queue, src, 0, dst, 0, bytes);
    if (status == TSR_OK)
      status = tsr_event_record(queue, &end);
    if (status == TSR_OK)
      status = tsr_event_wait(end);
    double ms = 0.0;
    if (status == TSR_OK)
      status = tsr_event_elapsed_ms(start, end, &ms);
    if (status == TSR_OK && ms > 0.0)
      samples[count++] = ms;
    tsr_event_destroy(start);
    tsr_event_destroy(end);
  }
  if (status != TSR_OK)
    cli_api_error("measuring copy bandwidth", status);
  else if (count > 0)
    result = 2.0 * (double)bytes / (median(samples, count) * 1e-3) / 1e9;
  tsr_buffer_destroy(src);
  tsr_buffer_destroy(dst);
  free(fill);
  return result;
}

/* The vendor's matrix rate on host buffers of random data. */
static double measure_vendor_tflops(const vendor_blas *blas, int64_t size, bool short_run) {
  size_t count = (size_t)(size * size);
  float *a = malloc(count * sizeof *a), *b = malloc(count * sizeof *b),
        *d = malloc(count * sizeof *d);
  double tflops = NAN;
  if (a != NULL && b != NULL && d != NULL) {
    rng generator;
    rng_seed(&generator, 5);
    for (size_t i = 0; i < count; i++) {
      a[i] = (float)rng_uniform(&generator);
      b[i] = (float)rng_uniform(&generator);
    }
    host_gemm g = {a, b, d, (int)size, (int)size, (int)size, 0, 0, (int)size, (int)size, (int)size};
    double ms = time_vendor(blas, &g, 1, 1, 3, short_run ? 5 : 10, short_run ? 0.1 : 0.5);
    tflops = 2.0 * (double)size * (double)size * (double)size / (ms * 1e-3) / 1e12;
  }
  free(a);
  free(b);
  free(d);
  return tflops;
}

/* Host views of a built f32 gemm problem for the vendor call (needs a
 * host-visible device and finished work). */
static bool host_gemm_of(problem *p, host_gemm *g) {
  void *pointers[3];
  const char *names[3] = {"a", "b", "d"};
  const tsr_tensor *views[3];
  for (int i = 0; i < 3; i++) {
    views[i] = NULL;
    for (int t = 0; t < p->tensor_count; t++)
      if (strcmp(p->tensors[t].name, names[i]) == 0)
        views[i] = &p->tensors[t].view;
    if (views[i] == NULL || tsr_buffer_map(views[i]->buffer, &pointers[i]) != TSR_OK)
      return false;
    pointers[i] = (char *)pointers[i] + views[i]->offset;
  }
  const gemm_spec *s = &p->spec.gemm;
  g->a = pointers[0];
  g->b = pointers[1];
  g->d = pointers[2];
  g->m = (int)s->m;
  g->n = (int)s->n;
  g->k = (int)s->k;
  g->trans_a = s->trans_a;
  g->trans_b = s->trans_b;
  /* Row-major leading dimension: the stride of the first matrix dimension
   * of what is stored (the transposed view's larger stride). */
  g->lda = (int)(s->trans_a ? views[0]->strides[views[0]->rank - 1]
                            : views[0]->strides[views[0]->rank - 2]);
  g->ldb = (int)(s->trans_b ? views[1]->strides[views[1]->rank - 1]
                            : views[1]->strides[views[1]->rank - 2]);
  g->ldd = (int)views[2]->strides[views[2]->rank - 2];
  return true;
}

static void print_row(const bench_row *r) {
  char tflops[16] = "-", gbs[16] = "-", ceiling[32] = "-", vendor_ms[16] = "-", ratio[16] = "-";
  if (r->tflops > 0.0)
    snprintf(tflops, sizeof tflops, "%.4f", r->tflops);
  snprintf(gbs, sizeof gbs, "%.2f", r->gbs);
  if (isfinite(r->ceiling_fraction))
    snprintf(ceiling, sizeof ceiling, "%.0f%% %s", r->ceiling_fraction * 100.0, r->ceiling_kind);
  if (isfinite(r->vendor_ms)) {
    snprintf(vendor_ms, sizeof vendor_ms, "%.4f", r->vendor_ms);
    snprintf(ratio, sizeof ratio, "%.2f", r->vendor_ms / r->ms);
  }
  if (r->failed)
    printf("%-13s %-5s %-26s %10s\n", tsr_op_name(r->spec.op), tsr_dtype_name(r->spec.dtype),
           r->shape, "failed");
  else
    printf("%-13s %-5s %-26s %10.4f %9s %9s %-12s %10s %10s\n", tsr_op_name(r->spec.op),
           tsr_dtype_name(r->spec.dtype), r->shape, r->ms, tflops, gbs, ceiling, vendor_ms, ratio);
  fflush(stdout);
}

static bool write_bench_json(const char *path, const bench_row *rows, int row_count,
                             const device_ceiling *ceilings, int device_count, bool short_run) {
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    cli_error("cannot write %s", path);
    return false;
  }
  fprintf(f, "{\n  \"tool\": \"tessera bench\",\n  \"version\": ");
  json_string(f, tsr_version());
  fprintf(f, ",\n  \"short\": %s,\n  \"devices\": [", short_run ? "true" : "false");
  for (int d = 0; d < device_count; d++) {
    fprintf(f, "%s\n    {\"device\": ", d ? "," : "");
    json_string(f, ceilings[d].device);
    fprintf(f, ", \"copy_gbs\": ");
    json_number(f, ceilings[d].copy_gbs);
    fprintf(f, ", \"vendor\": ");
    if (ceilings[d].vendor[0])
      json_string(f, ceilings[d].vendor);
    else
      fputs("null", f);
    fprintf(f, ", \"vendor_gemm_tflops\": ");
    json_number(f, ceilings[d].vendor_tflops);
    fprintf(f, "}");
  }
  fprintf(f, "\n  ],\n  \"rows\": [");
  for (int i = 0; i < row_count; i++) {
    const bench_row *r = &rows[i];
    fprintf(f, "%s\n    {\"device\": ", i ? "," : "");
    json_string(f, r->device);
    fprintf(f, ", \"op\": \"%s\", \"dtype\": \"%s\", \"shape\": ", tsr_op_name(r->spec.op),
            tsr_dtype_name(r->spec.dtype));
    json_string(f, r->shape);
    fprintf(f, ", \"status\": \"%s\", \"median_ms\": ", r->failed ? "failed" : "ok");
    json_number(f, r->failed ? NAN : r->ms);
    fprintf(f, ", \"runs\": %d, \"tflops\": ", r->runs);
    json_number(f, r->failed || r->tflops <= 0.0 ? NAN : r->tflops);
    fprintf(f, ", \"gbs\": ");
    json_number(f, r->failed ? NAN : r->gbs);
    fprintf(f, ", \"ceiling_fraction\": ");
    json_number(f, r->ceiling_fraction);
    fprintf(f, ", \"ceiling\": ");
    if (r->ceiling_kind)
      json_string(f, r->ceiling_kind);
    else
      fputs("null", f);
    fprintf(f, ", \"vendor_ms\": ");
    json_number(f, r->vendor_ms);
    fprintf(f, ", \"tessera_over_vendor\": ");
    json_number(f, isfinite(r->vendor_ms) ? r->vendor_ms / r->ms : NAN);
    fprintf(f, "}");
  }
  fprintf(f, "\n  ]\n}\n");
  bool ok = ferror(f) == 0;
  ok = fclose(f) == 0 && ok;
  if (!ok)
    cli_error("writing %s failed", path);
  return ok;
}

static int parse_bench_options(int argc, char **argv, bench_options *o) {
  memset(o, 0, sizeof *o);
  o->op = TSR_OP_COUNT_;
  arg_cursor c;
  arg_begin(&c, argc, argv);
  while (!arg_done(&c)) {
    const char *value = NULL;
    if (arg_value(&c, "--device", &value)) {
      if (o->selector_count == MAX_SELECTED_DEVICES) {
        cli_error("bench: too many --device options");
        return EXIT_USAGE;
      }
      o->selectors[o->selector_count++] = value;
    } else if (arg_flag(&c, "--all")) {
      o->all = true;
    } else if (arg_value(&c, "--op", &value)) {
      o->op = parse_op(value);
      if (o->op == TSR_OP_COUNT_)
        return EXIT_USAGE;
    } else if (arg_flag(&c, "--short")) {
      o->short_run = true;
    } else if (arg_value(&c, "--json", &value)) {
      o->json_path = value;
    } else {
      return arg_unknown(&c, "bench");
    }
  }
  return c.failed ? EXIT_USAGE : EXIT_OK;
}

/* Benchmarks one row on one device; fills `row`. */
static void bench_one(tsr_device *device, const tsr_device_info *info, tsr_queue *queue,
                      const problem_spec *spec, const bench_options *o, const vendor_blas *blas,
                      const device_ceiling *ceiling, bench_row *row) {
  memset(row, 0, sizeof *row);
  snprintf(row->device, sizeof row->device, "%s", info->selector);
  row->spec = *spec;
  row->ceiling_fraction = NAN;
  row->vendor_ms = NAN;
  problem_format_shape(spec, row->shape, sizeof row->shape);

  /* Two or three input sets used in turn, so no run finds its inputs
   * already in cache from the previous one (two when they are large). */
  problem sets[3];
  memset(sets, 0, sizeof sets);
  double bytes = problem_bytes(spec);
  int set_count = bytes > 256e6 ? 2 : 3;
  problem_build_options build = {0, false};
  int built = 0;
  for (; built < set_count; built++) {
    if (problem_build(&sets[built], spec, device, queue, seed_mix(11, (uint64_t)built), &build) !=
        TSR_OK) {
      cli_error("bench %s %s %s: %s", tsr_op_name(spec->op), tsr_dtype_name(spec->dtype),
                row->shape, sets[built].error);
      row->failed = true;
      built++;
      break;
    }
  }
  double flops = problem_flops(spec);
  if (!row->failed) {
    /* One long run needs no second warm-up. */
    bool heavy = flops > 4e9 || bytes > 512e6;
    timing_plan plan = o->short_run ? (timing_plan){1, 3, 10, 0.1}
                                    : (timing_plan){heavy ? 1 : 3, 3, 30, heavy ? 2.0 : 1.0};
    row->failed = time_problem(sets, set_count, queue, NULL, &plan, &row->ms, &row->runs) != TSR_OK;
  }
  if (!row->failed) {
    row->tflops = flops / (row->ms * 1e-3) / 1e12;
    row->gbs = bytes / (row->ms * 1e-3) / 1e9;
    /* Roofline: the least time the measured ceilings allow, from the matrix
     * rate or the bandwidth, whichever binds (decode attention is bound by
     * memory, prefill by arithmetic); the fraction is that over the time. */
    double compute_s = flops > 0.0 && isfinite(ceiling->vendor_tflops)
                           ? flops / (ceiling->vendor_tflops * 1e12)
                           : 0.0;
    double memory_s = isfinite(ceiling->copy_gbs) ? bytes / (ceiling->copy_gbs * 1e9) : 0.0;
    bool compute_known = flops == 0.0 || isfinite(ceiling->vendor_tflops);
    if (compute_known && (compute_s > 0.0 || memory_s > 0.0)) {
      row->ceiling_fraction = (compute_s > memory_s ? compute_s : memory_s) / (row->ms * 1e-3);
      row->ceiling_kind = compute_s > memory_s ? "sgemm" : "copy";
    }
    /* The vendor GEMM on the very same inputs, where there is one. */
    if (blas->library != NULL && spec->op == TSR_OP_GEMM && spec->dtype == TSR_DTYPE_F32 &&
        spec->gemm.batch <= 1 && info->host_visible) {
      host_gemm g[3];
      bool mapped = true;
      for (int i = 0; i < set_count && mapped; i++)
        mapped = host_gemm_of(&sets[i], &g[i]);
      if (mapped) {
        bool heavy = flops > 4e9;
        row->vendor_ms =
            o->short_run ? time_vendor(blas, g, set_count, 1, 3, 10, 0.1)
                         : time_vendor(blas, g, set_count, heavy ? 1 : 3, 3, 30, heavy ? 2.0 : 1.0);
      }
    }
  }
  for (int i = 0; i < built; i++)
    problem_destroy(&sets[i]);
}

int cmd_bench(int argc, char **argv) {
  bench_options o;
  int rc = parse_bench_options(argc, argv, &o);
  if (rc != EXIT_OK)
    return rc;
  tsr_context *context = open_context();
  if (context == NULL)
    return EXIT_FAILED;
  device_selection selection;
  rc = select_devices(context, o.selectors, o.selector_count, o.all, &selection);
  if (rc != EXIT_OK) {
    tsr_context_destroy(context);
    return rc;
  }

  problem_spec specs[32];
  int spec_count = default_rows(o.short_run, specs);
  bench_row *rows = calloc((size_t)(spec_count * (int)selection.count), sizeof *rows);
  device_ceiling ceilings[MAX_SELECTED_DEVICES];
  if (rows == NULL) {
    cli_error("bench: out of host memory");
    tsr_context_destroy(context);
    return EXIT_FAILED;
  }
  vendor_blas blas;
  bool have_blas = vendor_open(&blas);
  int row_count = 0, failures = 0;

  for (uint32_t d = 0; d < selection.count; d++) {
    tsr_device *device = selection.devices[d];
    const tsr_device_info *info = &selection.infos[d];
    device_ceiling *ceiling = &ceilings[d];
    memset(ceiling, 0, sizeof *ceiling);
    snprintf(ceiling->device, sizeof ceiling->device, "%s", info->selector);
    ceiling->vendor_tflops = NAN;
    tsr_queue *queue = NULL;
    tsr_status status = tsr_queue_create(device, &queue);
    if (status != TSR_OK) {
      cli_api_error("tsr_queue_create", status);
      failures++;
      continue;
    }
    printf("%s%s (%s, %u compute units)\n", d ? "\n" : "", info->selector, info->name,
           info->compute_units);
    progress_update("bench %s: copy bandwidth", info->selector);
    ceiling->copy_gbs = measure_copy_gbs(device, queue, info->memory_bytes, o.short_run);
    progress_clear();
    if (isfinite(ceiling->copy_gbs))
      printf("  copy bandwidth: %.1f GB/s (read + write)\n", ceiling->copy_gbs);
    bool cpu_vendor = have_blas && info->type == TSR_DEVICE_CPU;
    if (cpu_vendor) {
      ceiling->threads = (int)(info->compute_units ? info->compute_units : 1);
      blas.set_threads(ceiling->threads);
      snprintf(ceiling->vendor, sizeof ceiling->vendor, "openblas");
      progress_update("bench %s: OpenBLAS sgemm ceiling", info->selector);
      int64_t size = o.short_run ? 512 : 1024;
      ceiling->vendor_tflops = measure_vendor_tflops(&blas, size, o.short_run);
      progress_clear();
      printf("  vendor GEMM: OpenBLAS sgemm %lldx%lldx%lld, %d threads: %.4f TFLOP/s\n",
             (long long)size, (long long)size, (long long)size, ceiling->threads,
             ceiling->vendor_tflops);
    } else if (info->type == TSR_DEVICE_CPU) {
      printf("  vendor GEMM: none (libopenblas.so.0 not found)\n");
    } else {
      printf("  vendor GEMM: none timed by this tool for %s devices\n", info->backend);
    }
    printf("%-13s %-5s %-26s %10s %9s %9s %-12s %10s %10s\n", "op", "dtype", "shape", "median ms",
           "TFLOP/s", "GB/s", "of ceiling", "vendor ms", "tsr/vendor");
    vendor_blas none;
    memset(&none, 0, sizeof none);
    for (int i = 0; i < spec_count; i++) {
      const problem_spec *spec = &specs[i];
      if (o.op != TSR_OP_COUNT_ && spec->op != o.op)
        continue;
      if (!(info->op_mask & (1u << spec->op)) || !(info->dtype_mask & (1u << spec->dtype)))
        continue;
      char shape[96];
      problem_format_shape(spec, shape, sizeof shape);
      progress_update("bench %s: %s %s %s", info->selector, tsr_op_name(spec->op),
                      tsr_dtype_name(spec->dtype), shape);
      bench_row *row = &rows[row_count++];
      bench_one(device, info, queue, spec, &o, cpu_vendor ? &blas : &none, ceiling, row);
      progress_clear();
      print_row(row);
      if (row->failed)
        failures++;
    }
    tsr_queue_destroy(queue);
  }
  printf("\n(of ceiling: the least time the vendor GEMM's rate or the copy bandwidth allows "
         "(whichever binds) over the measured time; "
         "tsr/vendor: tessera's rate over the vendor library's on the same inputs, > 1 means "
         "tessera is faster)\n");

  bool json_ok = true;
  if (o.json_path != NULL)
    json_ok =
        write_bench_json(o.json_path, rows, row_count, ceilings, (int)selection.count, o.short_run);
  vendor_close(&blas);
  free(rows);
  tsr_context_destroy(context);
  return failures || !json_ok ? EXIT_FAILED : EXIT_OK;
}
