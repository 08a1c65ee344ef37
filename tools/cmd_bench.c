/* SPDX-License-Identifier: Apache-2.0 */
/* tessera bench: op timings measured with queue events after warm-up, medians
 * (with the least and greatest sample) over rotated random input sets, rates
 * as GFLOP/s and GB/s, the fraction of this machine's measured ceiling (a
 * large buffer copy for bandwidth; for CPUs, a loop of independent FMAs on
 * the device's thread count for arithmetic) and, for f32 GEMM on CPUs,
 * OpenBLAS's cblas_sgemm on the same inputs in the same run: as installed,
 * with OPENBLAS_CORETYPE=SkylakeX (its fastest kernels on AVX-512) and with
 * Prescott (what its detection falls back to on CPUs it does not know).
 * The rows and criteria are suite files (bench/suites, read by
 * bench_suite_file.c; judged in bench_suites.c), the table and the JSON are
 * bench_report.c's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "commands.h"
#include "timing.h"

/* Keeps the worse of two loads (NaN: unknown). */
static void note_load(bench_row *row, double load) {
  if (isnan(row->others_load) || load > row->others_load)
    row->others_load = load;
}

/* ------------------------------------------------------------------------ */
/* Calibration                                                               */
/* ------------------------------------------------------------------------ */

/* Device bandwidth: a large buffer-to-buffer copy of random bytes, counted
 * as bytes read plus bytes written. The buffers stay allocated for the
 * device's rows, so each row bound by memory can be compared with copies
 * timed right around it: the memory bandwidth of a shared host drifts over
 * minutes, and a ratio should compare like with like. */
typedef struct copy_probe {
  tsr_queue *queue;
  tsr_buffer *src, *dst;
  size_t bytes;
  const void *host; /* CPU devices: src mapped, for read-only passes; else NULL */
  int threads;
} copy_probe;

static void copy_probe_destroy(copy_probe *probe) {
  tsr_buffer_destroy(probe->src);
  tsr_buffer_destroy(probe->dst);
  memset(probe, 0, sizeof *probe);
}

static bool copy_probe_create(tsr_device *device, tsr_queue *queue, uint64_t memory, bool short_run,
                              copy_probe *probe) {
  memset(probe, 0, sizeof *probe);
  probe->queue = queue;
  size_t bytes = short_run ? ((size_t)32 << 20) : ((size_t)256 << 20);
  while (memory > 0 && bytes > ((size_t)1 << 20) && (uint64_t)bytes * 8 > memory)
    bytes /= 2;
  probe->bytes = bytes;
  unsigned char *fill = malloc(bytes);
  if (fill == NULL) {
    cli_error("bench: out of host memory for the copy buffers");
    return false;
  }
  rng generator;
  rng_seed(&generator, 99);
  for (size_t i = 0; i < bytes; i += 8) {
    uint64_t word = rng_next(&generator);
    memcpy(fill + i, &word, bytes - i < 8 ? bytes - i : 8);
  }
  tsr_status status = tsr_buffer_create(device, bytes, &probe->src);
  if (status == TSR_OK)
    status = tsr_buffer_create(device, bytes, &probe->dst);
  if (status == TSR_OK)
    status = tsr_buffer_write(queue, probe->src, 0, fill, bytes);
  if (status == TSR_OK)
    status = tsr_buffer_copy(queue, probe->src, 0, probe->dst, 0, bytes); /* pages in dst */
  if (status == TSR_OK)
    status = tsr_queue_finish(queue);
  free(fill);
  if (status != TSR_OK) {
    cli_api_error("measuring copy bandwidth", status);
    copy_probe_destroy(probe);
    return false;
  }
  return true;
}

/* Appends `runs` event-timed copies (ms) to samples[*count]. */
static bool copy_probe_time(copy_probe *probe, int runs, double *samples, int *count) {
  tsr_status status = TSR_OK;
  for (int i = 0; i < runs && status == TSR_OK; i++) {
    tsr_event *start = NULL, *end = NULL;
    status = tsr_event_record(probe->queue, &start);
    if (status == TSR_OK)
      status = tsr_buffer_copy(probe->queue, probe->src, 0, probe->dst, 0, probe->bytes);
    if (status == TSR_OK)
      status = tsr_event_record(probe->queue, &end);
    if (status == TSR_OK)
      status = tsr_event_wait(end);
    double ms = 0.0;
    if (status == TSR_OK)
      status = tsr_event_elapsed_ms(start, end, &ms);
    if (status == TSR_OK && ms > 0.0)
      samples[(*count)++] = ms;
    tsr_event_destroy(start);
    tsr_event_destroy(end);
  }
  if (status != TSR_OK)
    cli_api_error("measuring copy bandwidth", status);
  return status == TSR_OK;
}

/* Read-only passes over the copy source on the host (CPU devices), GB/s
 * each; nothing where the buffer is not mapped. */
static void read_probe_time(const copy_probe *probe, int runs, double *samples, int *count) {
  for (int i = 0; i < runs && probe->host != NULL; i++) {
    double gbs = measure_read_bandwidth(probe->host, probe->bytes, probe->threads);
    if (isfinite(gbs))
      samples[(*count)++] = gbs;
  }
}

/* GB/s (read + write) of the median of `count` copy times. */
static double copy_gbs_of(const copy_probe *probe, double *samples, int count) {
  return count > 0 ? 2.0 * (double)probe->bytes / (median(samples, count) * 1e-3) / 1e9 : NAN;
}

/* The vendor BLAS that GEMM rows are compared with: cuBLASLt on CUDA
 * devices, hipBLASLt (else rocBLAS) on HIP ones, CLBlast on OpenCL ones
 * (CPU devices such as PoCL's too, beside OpenBLAS); nothing elsewhere. */
static void open_vendor_blas(const tsr_device_info *info, device_calibration *cal) {
  bool cuda = strcmp(info->backend, "cuda") == 0, hip = strcmp(info->backend, "hip") == 0;
  bool opencl = strcmp(info->backend, "opencl") == 0;
  if (!cuda && !hip && !opencl)
    return;
  char *note = cal->vendor_blas_note;
  size_t capacity = sizeof cal->vendor_blas_note;
  progress_update("bench %s: loading %s", info->selector,
                  cuda     ? "cuBLASLt"
                  : opencl ? "CLBlast"
                           : "hipBLASLt");
  if (cuda) {
    cal->vendor_blas = "cuBLASLt";
    cal->cublaslt = cublaslt_open(info, note, capacity);
    if (cal->cublaslt != NULL)
      snprintf(note, capacity, "%s", cublaslt_describe(cal->cublaslt));
  } else if (opencl) {
    cal->vendor_blas = "CLBlast";
    cal->clblast = clblast_open(info, note, capacity);
    if (cal->clblast != NULL)
      snprintf(note, capacity, "%s", clblast_describe(cal->clblast));
  } else {
    cal->hipblaslt = hipblaslt_open(info, note, capacity);
    /* The column is hipBLASLt's when neither loads: the one AMD tunes. */
    cal->vendor_blas = cal->hipblaslt != NULL ? hipblaslt_name(cal->hipblaslt) : "hipBLASLt";
    if (cal->hipblaslt != NULL)
      snprintf(note, capacity, "%s", hipblaslt_describe(cal->hipblaslt));
  }
  progress_clear();
  cal->vendor_blas_available =
      cal->cublaslt != NULL || cal->hipblaslt != NULL || cal->clblast != NULL;
  char label[32];
  snprintf(label, sizeof label,
           "%s:", cal->vendor_blas_available || !hip ? cal->vendor_blas : "hipBLASLt/rocBLAS");
  if (!cal->vendor_blas_available)
    printf("  %-11s not available (no baseline): %s\n", label, note);
  else
    printf("  %-11s %s: every GEMM row is timed with it too, on %s\n", label, note,
           opencl ? "copies of its inputs in its own context" : "the same device buffers");
}

static void calibrate_device(tsr_device *device, const tsr_device_info *info, tsr_queue *queue,
                             const bench_options *o, copy_probe *copy, device_calibration *cal) {
  memset(cal, 0, sizeof *cal);
  cal->core_handoff_ns = NAN;
  cal->info = *info;
  snprintf(cal->device, sizeof cal->device, "%s", info->selector);
  snprintf(cal->name, sizeof cal->name, "%.*s", (int)sizeof cal->name - 1, info->name);
  cal->is_cpu = info->type == TSR_DEVICE_CPU;
  cal->threads = (int)(info->compute_units ? info->compute_units : 1);
  cal->fma.gflops = NAN;
  cal->bf16.gflops = NAN;
  cal->read_gbs = NAN;
  cal->copy_others = cal->fma_others = cal->bf16_others = NAN;

  progress_update("bench %s: copy bandwidth", info->selector);
  load_mark mark;
  load_mark_now(&mark);
  if (copy_probe_create(device, queue, info->memory_bytes, o->short_run, copy)) {
    double samples[16];
    int count = 0;
    copy_probe_time(copy, o->short_run ? 3 : 9, samples, &count);
    cal->copy_bytes = copy->bytes;
    cal->copy_runs = count;
    cal->copy_gbs = copy_gbs_of(copy, samples, count);
    void *host = NULL;
    if (cal->is_cpu && tsr_buffer_map(copy->src, &host) == TSR_OK) {
      copy->host = host;
      copy->threads = cal->threads;
      double reads[16];
      int read_count = 0;
      read_probe_time(copy, o->short_run ? 3 : 9, reads, &read_count);
      cal->read_gbs = read_count > 0 ? median(reads, read_count) : NAN;
    }
  }
  cal->copy_others = load_others_since(&mark);
  progress_clear();
  if (isfinite(cal->copy_gbs))
    printf("  copy:       %.1f GB/s (read + write; tsr_buffer_copy of %zu MiB, median of %d; "
           "others %.2f)\n",
           cal->copy_gbs, cal->copy_bytes >> 20, cal->copy_runs, cal->copy_others);
  if (isfinite(cal->read_gbs))
    printf("  read:       %.1f GB/s (read only: %d threads sum the copy source, two streams each, "
           "median of %d; what a plain read reaches, beside which rows that only read, such as "
           "GEMV weights, can be seen)\n",
           cal->read_gbs, cal->threads, o->short_run ? 3 : 9);
  if (!cal->is_cpu) {
    printf("  arithmetic peak: not measured for %s devices (compute rows show no fraction)\n",
           info->backend);
    open_vendor_blas(info, cal);
    return;
  }
  /* The host's FMA rate on the device's threads: the plugin runs on these
   * cores, so this is the most its GEMM could reach. */
  double seconds = o->short_run ? 0.03 : 0.2;
  cal->peak_repeats = o->short_run ? 3 : 7;
  progress_update("bench %s: FMA peak", info->selector);
  load_mark_now(&mark);
  measure_fma_peak(cal->threads, seconds, cal->peak_repeats, &cal->fma);
  cal->fma_others = load_others_since(&mark);
  progress_clear();
  printf("  FMA peak:   %.1f GFLOP/s (f32, %s loop of independent FMAs on %d threads, best of %d; "
         "others %.2f)\n",
         cal->fma.gflops, cal->fma.isa, cal->threads, cal->peak_repeats, cal->fma_others);
  cal->core_handoff_ns = measure_core_handoff_ns(BENCH_HANDOFF_ROUND_TRIPS * 10);
  if (isfinite(cal->core_handoff_ns))
    printf("  hand-off:   %.0f ns a cache line between the first two CPUs (%s; JSON "
           "core_handoff_ns per row: the host may move a VM's vCPUs)\n",
           cal->core_handoff_ns,
           cal->core_handoff_ns > BENCH_FAR_CORES_NS
               ? "they share no cache: data written by one and read by the other is slow"
               : "they share a cache");
  progress_update("bench %s: bf16 dot peak", info->selector);
  load_mark_now(&mark);
  measure_bf16_dot_peak(cal->threads, seconds, cal->peak_repeats, &cal->bf16);
  cal->bf16_others = load_others_since(&mark);
  progress_clear();
  if (isfinite(cal->bf16.gflops))
    printf("  bf16 peak:  %.1f GFLOP/s (vdpbf16ps loop on %d threads, best of %d; others %.2f; "
           "the ceiling of bf16 rows)\n",
           cal->bf16.gflops, cal->threads, cal->peak_repeats, cal->bf16_others);

  for (int v = 0; v < OPENBLAS_VARIANT_COUNT; v++) {
    progress_update("bench %s: loading OpenBLAS", info->selector);
    openblas_probe_variant((openblas_variant)v, &cal->openblas[v]);
    progress_clear();
    const openblas_probe *p = &cal->openblas[v];
    const char *coretype = openblas_variant_coretype((openblas_variant)v);
    char how[64];
    if (coretype != NULL)
      snprintf(how, sizeof how, "OPENBLAS_CORETYPE=%s", coretype);
    else
      snprintf(how, sizeof how, "as installed");
    if (p->available)
      printf("  OpenBLAS:   %-27s core %s (%s)\n", how, p->core, p->config);
    else
      printf("  OpenBLAS:   %-27s not available: %s\n", how, p->error);
  }
  bool any_openblas = false;
  for (int v = 0; v < OPENBLAS_VARIANT_COUNT; v++)
    any_openblas = any_openblas || cal->openblas[v].available;
  if (any_openblas)
    printf("              cblas_sgemm with %d threads, each variant timed in its own child "
           "process on the same inputs\n",
           cal->threads);
  open_vendor_blas(info, cal); /* OpenCL CPU devices: CLBlast */
}

/* ------------------------------------------------------------------------ */
/* One row                                                                   */
/* ------------------------------------------------------------------------ */

timing_plan bench_plan_for(const problem_spec *spec, bool short_run, int device_type) {
  double flops = problem_flops(spec), bytes = problem_bytes(spec);
  /* One long run needs no second warm-up. */
  bool heavy = flops > 4e9 || bytes > 512e6;
  double warm = timing_warmup_seconds(device_type);
  return short_run ? (timing_plan){1, 3, 10, 0.1, warm}
                   : (timing_plan){heavy ? 1 : 3, 3, 30, heavy ? 2.0 : 1.0, warm};
}

/* OpenBLAS on the very same inputs, in a child; proves the inputs equal
 * (hash) and the products agree (norm) before trusting the time. */
static void time_openblas(problem *sets, int set_count, const timing_plan *plan,
                          const device_calibration *cal, bench_row *row) {
  uint64_t hash = 0;
  double norm = NAN;
  bool have_hash = gemm_inputs_hash(sets, set_count, &hash);
  bool have_norm = gemm_output_norm(&sets[0], &norm);
  for (int v = 0; v < OPENBLAS_VARIANT_COUNT; v++) {
    if (!cal->openblas[v].available)
      continue;
    char *error = row->openblas_error[v];
    size_t capacity = sizeof row->openblas_error[v];
    if (!have_hash || !have_norm) {
      snprintf(error, capacity, "cannot read the device's buffers on the host");
      continue;
    }
    openblas_timing t;
    load_mark mark;
    load_mark_now(&mark);
    bool timed =
        openblas_time_sgemm((openblas_variant)v, &row->spec, set_count, cal->threads, plan, &t);
    double competing = load_self_since(&mark);
    note_load(row, load_others_since(&mark));
    /* The parent only waits; if a plugin's idle threads spin instead of
     * sleeping, they take cores from OpenBLAS and the ratio flatters us. */
    if (competing > 0.05)
      cli_error("warning: tessera's own threads used %.2f cores while OpenBLAS %s ran gemm f32 %s "
                "(idle threads that spin?): that ratio flatters tessera",
                competing, openblas_variant_label((openblas_variant)v), row->shape);
    if (!timed) {
      snprintf(error, capacity, "%s", t.error);
    } else if (t.inputs_hash != hash) {
      snprintf(error, capacity, "its inputs differ from tessera's (hash %016llx vs %016llx)",
               (unsigned long long)t.inputs_hash, (unsigned long long)hash);
    } else if (!(fabs(t.output_norm - norm) <= 1e-4 * norm)) {
      snprintf(error, capacity, "its product differs from tessera's (norm %.9g vs %.9g)",
               t.output_norm, norm);
    } else {
      row->openblas_ms[v] = t.median_ms;
    }
    if (error[0] != '\0')
      cli_error("OpenBLAS %s on gemm f32 %s: %s", openblas_variant_label((openblas_variant)v),
                row->shape, error);
  }
}

/* Why the row's figures should not be taken at face value (bench.h). */
static unsigned row_flags(const bench_row *row) {
  unsigned flags = 0;
  if (isfinite(row->peak_fraction) && row->peak_fraction > 1.0)
    flags |= BENCH_ABOVE_CEILING;
  if (row->min_ms > 0.0 && row->max_ms / row->min_ms > BENCH_SPREAD_LIMIT)
    flags |= BENCH_SPREAD;
  double before = row->copy_before_gbs, after = row->copy_after_gbs;
  if (before > 0.0 && after > 0.0 && fmax(before, after) / fmin(before, after) > BENCH_DRIFT_LIMIT)
    flags |= BENCH_COPY_DRIFT;
  return flags;
}

/* The device's vendor BLAS on the row's problem, after tessera's timing;
 * fills the row's vendor_blas fields. */
static void time_vendor_blas(const tsr_device_info *info, problem *sets, int set_count,
                             tsr_queue *queue, const timing_plan *plan,
                             const device_calibration *cal, bench_row *row) {
  const problem_spec *spec = &sets[0].spec;
  const char *name = cal->vendor_blas;
  progress_update("bench %s: %s on %s %s %s", info->selector, name, tsr_op_name(spec->op),
                  tsr_dtype_name(spec->dtype), row->shape);
  bool timed;
  double median_ms, difference;
  char error[256];
  if (cal->cublaslt != NULL) {
    cublaslt_timing lt;
    timed = cublaslt_time(cal->cublaslt, sets, set_count, queue, plan, &lt);
    median_ms = lt.median_ms;
    difference = lt.difference;
    snprintf(error, sizeof error, "%s", lt.error);
  } else if (cal->clblast != NULL) {
    clblast_timing ct;
    timed = clblast_time(cal->clblast, sets, set_count, queue, plan, &ct);
    median_ms = ct.median_ms;
    difference = ct.difference;
    snprintf(error, sizeof error, "%s", ct.error);
  } else {
    hipblaslt_timing ht;
    timed = hipblaslt_time(cal->hipblaslt, sets, set_count, queue, plan, &ht);
    median_ms = ht.median_ms;
    difference = ht.difference;
    snprintf(error, sizeof error, "%s", ht.error);
  }
  progress_clear();
  /* Different summation orders and the output's rounding: a few units of
   * the output dtype's last place, normwise; a wrong layout mapping gives
   * O(1). CLBlastHgemm accumulates in f16, whose error grows as sqrt(K)
   * units (2e-2 at K = 16384). */
  bool strict = spec->op == TSR_OP_GEMM && spec->dtype == TSR_DTYPE_F32 &&
                spec->gemm.compute == TSR_COMPUTE_STRICT;
  double tolerance = strict                                                 ? 1e-4
                     : cal->clblast != NULL && spec->dtype == TSR_DTYPE_F16 ? 1e-1
                                                                            : 2e-2;
  if (!timed)
    cli_error("%s on %s %s %s: %s", name, tsr_op_name(spec->op), tsr_dtype_name(spec->dtype),
              row->shape, error);
  else if (!(difference <= tolerance))
    cli_error("%s on %s %s %s: its product differs from tessera's (relative %.3g): no ratio", name,
              tsr_op_name(spec->op), tsr_dtype_name(spec->dtype), row->shape, difference);
  else
    row->vendor_blas_ms = median_ms;
  row->vendor_blas = name;
  row->vendor_blas_difference = difference;
}

/* Benchmarks one row on one device; fills `row`. */
static void bench_one(tsr_device *device, const tsr_device_info *info, tsr_queue *queue,
                      const problem_spec *spec, const bench_options *o,
                      const device_calibration *cal, copy_probe *copy, bench_row *row) {
  memset(row, 0, sizeof *row);
  snprintf(row->device, sizeof row->device, "%s", info->selector);
  row->spec = *spec;
  row->peak_fraction = NAN;
  row->others_load = NAN;
  row->copy_gbs = NAN;
  row->idle_call_ms = NAN;
  row->core_handoff_ns = NAN;
  row->copy_before_gbs = row->copy_after_gbs = NAN;
  row->min_ms = row->max_ms = NAN;
  row->read_gbs = NAN;
  row->vendor_blas_ms = NAN;
  row->vendor_blas_difference = NAN;
  for (int v = 0; v < OPENBLAS_VARIANT_COUNT; v++)
    row->openblas_ms[v] = NAN;
  problem_format_shape(spec, row->shape, sizeof row->shape);

  /* Roofline from the calibration: whichever ceiling allows the longer
   * least time binds (decode attention is bound by memory, prefill by
   * arithmetic). */
  double flops = problem_flops(spec), bytes = problem_bytes(spec);
  const host_peak *peak =
      spec->dtype == TSR_DTYPE_BF16 && isfinite(cal->bf16.gflops) ? &cal->bf16 : &cal->fma;
  double compute_s = flops > 0.0 && isfinite(peak->gflops) ? flops / (peak->gflops * 1e9) : 0.0;
  double memory_s = isfinite(cal->copy_gbs) ? bytes / (cal->copy_gbs * 1e9) : 0.0;
  bool compute_known = flops == 0.0 || isfinite(peak->gflops);
  bool judged = compute_known && (compute_s > 0.0 || memory_s > 0.0);
  bool compute_bound = compute_s > memory_s;

  /* Two or three input sets used in turn, so no run finds its inputs
   * already in cache from the previous one (two when they are large). */
  problem sets[3];
  memset(sets, 0, sizeof sets);
  int set_count = bytes > 256e6 ? 2 : 3;
  bool baseline = (cal->cublaslt != NULL && cublaslt_handles(spec)) ||
                  (cal->hipblaslt != NULL && hipblaslt_handles(spec)) ||
                  (cal->clblast != NULL && clblast_handles(spec));
  /* The vendor BLAS allocates the buffers, so it knows their addresses
   * (CLBlast copies them: OpenCL memory is its context's). */
  const problem_allocator *allocator = NULL;
  if (baseline && cal->cublaslt != NULL)
    allocator = cublaslt_allocator(cal->cublaslt);
  else if (baseline && cal->hipblaslt != NULL)
    allocator = hipblaslt_allocator(cal->hipblaslt);
  problem_build_options build = {0, false, allocator};
  int built = 0;
  for (; built < set_count; built++) {
    if (problem_build(&sets[built], spec, device, queue, bench_input_seed(built), &build) !=
        TSR_OK) {
      cli_error("bench %s %s %s: %s", tsr_op_name(spec->op), tsr_dtype_name(spec->dtype),
                row->shape, sets[built].error);
      row->failed = true;
      built++;
      break;
    }
  }
  timing_plan plan = bench_plan_for(spec, o->short_run, info->type);
  /* A row bound by memory is compared with copies timed just before and
   * just after it (median of both). */
  bool bracket = judged && !compute_bound && copy->src != NULL;
  double copy_samples[16], read_samples[16];
  int copy_count = 0, read_count = 0, copy_runs = o->short_run ? 2 : 4;
  int copies_before = 0;
  if (!row->failed && bracket) {
    copy_probe_time(copy, copy_runs, copy_samples, &copy_count);
    read_probe_time(copy, copy_runs, read_samples, &read_count);
    copies_before = copy_count;
  }
  if (!row->failed && cal->is_cpu)
    row->core_handoff_ns = measure_core_handoff_ns(BENCH_HANDOFF_ROUND_TRIPS);
  if (!row->failed) {
    load_mark mark;
    load_mark_now(&mark);
    timing_stats stats;
    row->failed = time_problem(sets, set_count, queue, NULL, &plan, &stats) != TSR_OK;
    note_load(row, load_others_since(&mark));
    row->ms = stats.median_ms;
    row->min_ms = stats.min_ms;
    row->max_ms = stats.max_ms;
    row->runs = stats.runs;
  }
  if (!row->failed) {
    timing_stats idle;
    row->failed = time_idle_call(sets, set_count, queue, BENCH_IDLE_MS, o->short_run ? 0.1 : 0.3,
                                 &idle) != TSR_OK;
    row->idle_call_ms = idle.median_ms;
  }
  if (!row->failed && bracket) {
    read_probe_time(copy, copy_runs, read_samples, &read_count);
    copy_probe_time(copy, copy_runs, copy_samples, &copy_count);
    /* Before and after alone first: copy_gbs_of sorts what it is given. */
    row->copy_before_gbs = copy_gbs_of(copy, copy_samples, copies_before);
    row->copy_after_gbs =
        copy_gbs_of(copy, copy_samples + copies_before, copy_count - copies_before);
    row->copy_gbs = copy_gbs_of(copy, copy_samples, copy_count);
    row->read_gbs = read_count > 0 ? median(read_samples, read_count) : NAN;
  }
  if (!row->failed) {
    row->gflops = flops / (row->ms * 1e-3) / 1e9;
    row->gbs = bytes / (row->ms * 1e-3) / 1e9;
    if (judged) {
      double copy_gbs = isfinite(row->copy_gbs) ? row->copy_gbs : cal->copy_gbs;
      row->peak_fraction = compute_bound ? row->gflops / peak->gflops : row->gbs / copy_gbs;
      row->peak_kind = !compute_bound ? "copy" : peak == &cal->bf16 ? "bf16 dot" : "fma";
    }
    row->flags = row_flags(row);
    if (cal->is_cpu && info->host_visible && openblas_handles(spec))
      time_openblas(sets, set_count, &plan, cal, row);
    if (baseline)
      time_vendor_blas(info, sets, set_count, queue, &plan, cal, row);
  }
  for (int i = 0; i < built; i++)
    problem_destroy(&sets[i]);
}

/* ------------------------------------------------------------------------ */
/* The command                                                               */
/* ------------------------------------------------------------------------ */

/* A suite with criteria fixes its rows: --shape selects among them and
 * --compute leaves them as they are. In one without (the default rows),
 * --op with --shape times that problem instead, and --compute tf32 lets
 * its f32 GEMM rows use tf32. */
static bool suite_fixes_rows(const bench_options *o) {
  return o->suite != NULL && o->suite->criterion_count > 0;
}

/* Fills `o`; `storage` holds the suite read (o->suite points there). */
static int parse_bench_options(int argc, char **argv, bench_options *o, bench_suite *storage) {
  memset(o, 0, sizeof *o);
  o->op = TSR_OP_COUNT_;
  o->dtype = TSR_DTYPE_INVALID;
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
    } else if (arg_value(&c, "--dtype", &value)) {
      o->dtype = parse_float_dtype(value);
      if (o->dtype == TSR_DTYPE_INVALID)
        return EXIT_USAGE;
    } else if (arg_value(&c, "--shape", &value)) {
      o->shape = value;
    } else if (arg_flag(&c, "--causal")) {
      o->causal = true;
    } else if (arg_flag(&c, "--short")) {
      o->short_run = true;
    } else if (arg_flag(&c, "--list")) {
      o->list = true;
    } else if (arg_flag(&c, "--concurrent")) {
      o->concurrent = true;
    } else if (arg_value(&c, "--compute", &value)) {
      if (strcmp(value, "tf32") == 0) {
        o->compute = TSR_COMPUTE_TF32;
      } else if (strcmp(value, "strict") == 0) {
        o->compute = TSR_COMPUTE_STRICT;
      } else {
        cli_error("unknown --compute '%s' (strict, tf32: f32 GEMM rows)", value);
        return EXIT_USAGE;
      }
    } else if (arg_value(&c, "--json", &value)) {
      o->json_path = value;
    } else if (arg_value(&c, "--suite", &value)) {
      o->suite_arg = value;
    } else {
      return arg_unknown(&c, "bench");
    }
  }
  if (c.failed)
    return EXIT_USAGE;
  /* The suite's file, unless --op and --shape name the one problem to time
   * (the default suite's rows are not needed then). */
  if (o->suite_arg != NULL || o->shape == NULL) {
    if (!bench_suite_load(o->suite_arg != NULL ? o->suite_arg : "default", storage))
      return EXIT_USAGE;
    o->suite = storage;
  }
  if (o->list && o->json_path != NULL) {
    cli_error("bench: --list times nothing, so it writes no --json report");
    return EXIT_USAGE;
  }
  /* A SHAPE means nothing without its op: outside a suite with criteria
   * --shape is the problem to time, and must parse as that op's shape; in
   * such a suite it selects rows, and must at least parse. */
  if (o->shape != NULL) {
    problem_spec spec;
    int64_t extents[8];
    if (!suite_fixes_rows(o) && o->op == TSR_OP_COUNT_) {
      cli_error("bench: --shape needs --op (what '%s' means depends on the op; see 'tessera "
                "bench --help')",
                o->shape);
      return EXIT_USAGE;
    }
    if (o->op != TSR_OP_COUNT_) {
      if (!problem_spec_from_shape(&spec, o->op, TSR_DTYPE_F32, o->shape, o->causal))
        return EXIT_USAGE;
    } else if (parse_shape(o->shape, extents, 8) == 0) {
      cli_error("bench: --shape '%s' is not a SHAPE (extents joined by 'x', e.g. 4096x4096x4096)",
                o->shape);
      return EXIT_USAGE;
    }
  }
  /* The suite's devices unless told otherwise (default-devices): every
   * device (a suite with a reference device needs both kinds), or one. */
  const char *devices = o->suite != NULL ? o->suite->default_devices : "";
  if (strcmp(devices, "all") == 0 && o->selector_count == 0)
    o->all = true;
  else if (devices[0] != '\0' && strcmp(devices, "all") != 0 && o->selector_count == 0 && !o->all)
    o->selectors[o->selector_count++] = devices;
  return EXIT_OK;
}

/* The options that choose rows, as given, for "no case matched" and the
 * report. */
static void describe_filters(const bench_options *o, filter_text *filters) {
  memset(filters, 0, sizeof *filters);
  if (o->suite_arg != NULL && o->suite != NULL && strcmp(o->suite->name, "default") != 0)
    filter_add(filters, "--suite", o->suite_arg);
  for (int i = 0; i < o->selector_count; i++)
    filter_add(filters, "--device", o->selectors[i]);
  if (o->all)
    filter_add(filters, "--all", NULL);
  if (o->op != TSR_OP_COUNT_)
    filter_add(filters, "--op", tsr_op_name(o->op));
  if (o->dtype != TSR_DTYPE_INVALID)
    filter_add(filters, "--dtype", tsr_dtype_name(o->dtype));
  if (o->shape != NULL)
    filter_add(filters, "--shape", o->shape);
  if (o->causal)
    filter_add(filters, "--causal", NULL);
}

/* The rows to consider: outside a suite with criteria with --shape, that
 * shape of --op in the dtype asked for or in every float dtype; else the
 * suite's rows (`runs`: whether each runs with --short, without or both). */
static int collect_rows(const bench_options *o, problem_spec *specs, suite_row_runs *runs) {
  int count = 0;
  if (!suite_fixes_rows(o) && o->shape != NULL) {
    for (int t = 0; t < 3; t++)
      if (o->dtype == TSR_DTYPE_INVALID || o->dtype == cli_float_dtypes[t])
        if (problem_spec_from_shape(&specs[count], o->op, cli_float_dtypes[t], o->shape, o->causal))
          runs[count++] = ROW_ALWAYS;
  } else {
    count = o->suite->row_count;
    memcpy(specs, o->suite->rows, sizeof *specs * (size_t)count);
    memcpy(runs, o->suite->row_runs, sizeof *runs * (size_t)count);
  }
  /* --compute tf32: the f32 GEMM rows allow tf32 (suites with criteria fix
   * their own). */
  if (!suite_fixes_rows(o) && o->compute == TSR_COMPUTE_TF32)
    for (int i = 0; i < count; i++)
      if (specs[i].op == TSR_OP_GEMM && specs[i].dtype == TSR_DTYPE_F32)
        specs[i].gemm.compute = TSR_COMPUTE_TF32;
  return count;
}

/* The extents of a SHAPE as problem_format_shape writes them ("AxB"), for
 * comparing a suite's rows with --shape whatever spelling it had. */
static void normal_shape(const char *shape, char *buf, size_t capacity) {
  int64_t extents[8];
  int count = parse_shape(shape, extents, 8);
  format_shape(buf, capacity, extents, count);
}

/* Whether the filters keep row `spec` on this device. */
static bool row_selected(const bench_options *o, const tsr_device_info *info,
                         const problem_spec *spec, suite_row_runs runs) {
  if (runs == (o->short_run ? ROW_FULL_ONLY : ROW_SHORT_ONLY))
    return false;
  if (o->op != TSR_OP_COUNT_ && spec->op != o->op)
    return false;
  if (o->dtype != TSR_DTYPE_INVALID && spec->dtype != o->dtype)
    return false;
  if (!(info->op_mask & (1u << spec->op)) || !(info->dtype_mask & (1u << spec->dtype)))
    return false;
  if (!suite_fixes_rows(o) || o->shape == NULL)
    return true;
  char shape[96], wanted[96];
  problem_format_shape(spec, shape, sizeof shape);
  shape[strcspn(shape, " ")] = '\0'; /* " causal", " tf32" */
  normal_shape(o->shape, wanted, sizeof wanted);
  return strcmp(shape, wanted) == 0 &&
         (!o->causal || (spec->op == TSR_OP_ATTENTION && spec->attention.causal));
}

int cmd_bench(int argc, char **argv) {
  bench_options o;
  bench_suite suite_storage;
  int rc = parse_bench_options(argc, argv, &o, &suite_storage);
  if (rc != EXIT_OK)
    return rc;
  filter_text filters;
  describe_filters(&o, &filters);
  /* Before any plugin starts threads (children get these CPUs). */
  openblas_remember_affinity();
  tsr_context *context = open_context();
  if (context == NULL)
    return EXIT_FAILED;
  device_selection selection;
  rc = select_devices(context, o.selectors, o.selector_count, o.all, &selection);
  if (rc != EXIT_OK) {
    report_no_case("bench", &filters, NULL);
    tsr_context_destroy(context);
    return rc;
  }

  problem_spec specs[BENCH_MAX_ROWS];
  suite_row_runs runs[BENCH_MAX_ROWS];
  int spec_count = collect_rows(&o, specs, runs);
  const bench_suite *suite = o.suite;
  int suite_criterion_count = suite != NULL ? suite->criterion_count : 0;
  const suite_criterion *suite_criteria = suite != NULL ? suite->criteria : NULL;
  size_t device_count = selection.count;
  size_t cells = (size_t)spec_count * device_count;
  bench_row *rows = calloc(cells ? cells : 1, sizeof *rows);
  bool *present = calloc(cells ? cells : 1, sizeof *present);
  criterion_result *criteria =
      calloc((size_t)(suite_criterion_count + 1) * device_count, sizeof *criteria);
  device_calibration *cals = calloc(device_count, sizeof *cals);
  bench_row *ordered = calloc(cells ? cells : 1, sizeof *ordered);
  if (rows == NULL || present == NULL || criteria == NULL || cals == NULL || ordered == NULL) {
    cli_error("bench: out of host memory");
    free(rows);
    free(present);
    free(criteria);
    free(cals);
    free(ordered);
    tsr_context_destroy(context);
    return EXIT_FAILED;
  }
  int failures = 0, criterion_count = 0, ordered_count = 0, listed = 0;
  bool hip_ran = false;    /* the legend explains hipBLASLt / rocBLAS then */
  bool opencl_ran = false; /* and CLBlast */

  for (uint32_t d = 0; d < selection.count; d++) {
    tsr_device *device = selection.devices[d];
    const tsr_device_info *info = &selection.infos[d];
    device_calibration *cal = &cals[d];
    bench_row *device_rows = &rows[(size_t)d * (size_t)spec_count];
    bool *device_present = &present[(size_t)d * (size_t)spec_count];
    cal->info = *info;
    snprintf(cal->device, sizeof cal->device, "%s", info->selector);
    snprintf(cal->name, sizeof cal->name, "%.*s", (int)sizeof cal->name - 1, info->name);
    cal->copy_gbs = cal->read_gbs = cal->fma.gflops = cal->bf16.gflops = NAN;
    cal->copy_others = cal->fma_others = cal->bf16_others = NAN;
    printf("%s%s (%s, %u compute units)\n", d ? "\n" : "", info->selector, info->name,
           info->compute_units);
    char why[160];
    const char *skip =
        suite != NULL ? bench_suite_skip_reason(suite, info, o.selector_count > 0, why, sizeof why)
                      : NULL;
    if (skip != NULL) {
      printf("  skipped: %s\n", skip);
      continue;
    }
    bool selected[BENCH_MAX_ROWS];
    int selected_count = 0;
    for (int i = 0; i < spec_count; i++) {
      selected[i] = row_selected(&o, info, &specs[i], runs[i]);
      selected_count += selected[i];
    }
    /* Calibrating takes seconds: not for a device that times nothing. */
    if (selected_count == 0) {
      printf("  no row matches on this device\n");
      continue;
    }
    if (o.list) {
      for (int i = 0; i < spec_count; i++) {
        char shape[96];
        problem_format_shape(&specs[i], shape, sizeof shape);
        if (selected[i])
          printf("  %-13s %-5s %s\n", tsr_op_name(specs[i].op), tsr_dtype_name(specs[i].dtype),
                 shape);
      }
      listed += selected_count;
      continue;
    }
    tsr_queue *queue = NULL;
    tsr_status status = tsr_queue_create(device, &queue);
    if (status != TSR_OK) {
      cli_api_error("tsr_queue_create", status);
      failures++;
      continue;
    }
    copy_probe copy;
    memset(&copy, 0, sizeof copy);
    calibrate_device(device, info, queue, &o, &copy, cal);
    bench_print_header(cal->is_cpu, cal->vendor_blas);
    hip_ran = hip_ran || strcmp(info->backend, "hip") == 0;
    opencl_ran = opencl_ran || strcmp(info->backend, "opencl") == 0;
    for (int i = 0; i < spec_count; i++) {
      if (!selected[i])
        continue;
      const problem_spec *spec = &specs[i];
      char shape[96];
      problem_format_shape(spec, shape, sizeof shape);
      progress_update("bench %s: %s %s %s", info->selector, tsr_op_name(spec->op),
                      tsr_dtype_name(spec->dtype), shape);
      bench_row *row = &device_rows[i];
      bench_one(device, info, queue, spec, &o, cal, &copy, row);
      device_present[i] = true;
      progress_clear();
      bench_print_row(row, cal->is_cpu, cal->vendor_blas);
      ordered[ordered_count++] = *row;
      if (row->failed)
        failures++;
    }
    copy_probe_destroy(&copy);
    tsr_queue_destroy(queue);
    cublaslt_close(cal->cublaslt); /* after the queue: its buffers are gone */
    cal->cublaslt = NULL;
    hipblaslt_close(cal->hipblaslt);
    cal->hipblaslt = NULL;
    clblast_close(cal->clblast);
    cal->clblast = NULL;
  }
  if (o.concurrent && !o.list && selection.count > 1)
    failures += bench_concurrent(&selection, specs, spec_count, rows, present, &o);
  /* Judged once every device ran: a suite with a reference backend
   * compares with the rows of that backend's first device, which it judges
   * by nothing. */
  int reference = -1;
  for (uint32_t d = 0; d < selection.count && reference < 0; d++)
    if (suite != NULL && suite->reference[0] != '\0' &&
        strcmp(selection.infos[d].backend, suite->reference) == 0)
      reference = (int)d;
  for (uint32_t d = 0; d < selection.count && suite_criterion_count > 0; d++) {
    if (!bench_suite_judges(suite, &selection.infos[d]))
      continue;
    const bench_row *device_rows = &rows[(size_t)d * (size_t)spec_count];
    const bool *device_present = &present[(size_t)d * (size_t)spec_count];
    const bench_row *reference_rows =
        reference >= 0 ? &rows[(size_t)reference * (size_t)spec_count] : NULL;
    for (int c = 0; c < suite_criterion_count; c++)
      if (device_present[suite_criteria[c].row] && /* --op, --shape may leave rows out */
          bench_criterion_applies(&suite_criteria[c], &selection.infos[d]))
        bench_judge(&suite_criteria[c], device_rows, device_present, reference_rows,
                    reference >= 0 ? selection.infos[reference].selector : NULL, suite->reference,
                    &cals[d], specs, &criteria[criterion_count++]);
  }
  /* A run that timed nothing is no benchmark: fail, and say which filters
   * left nothing. */
  bool none = o.list ? listed == 0 : ordered_count == 0;
  if (none)
    report_no_case("bench", &filters, NULL);
  else if (o.list)
    printf("\nbench --list: %d row%s (nothing timed)\n", listed, listed == 1 ? "" : "s");
  if (ordered_count > 0) {
    bench_print_legend(hip_ran, opencl_ran);
    bench_print_criteria(criteria, criterion_count, suite);
  }

  bool json_ok = true;
  if (o.json_path != NULL && !o.list)
    json_ok = bench_write_json(o.json_path, &o, &filters, ordered, ordered_count, cals,
                               (int)device_count, criteria, criterion_count);
  free(rows);
  free(present);
  free(criteria);
  free(cals);
  free(ordered);
  tsr_context_destroy(context);
  /* A FAIL verdict is a finding about speed, not an error of the tool:
   * the exit status reports only rows that could not be run, or none. */
  return failures || none || !json_ok ? EXIT_FAILED : EXIT_OK;
}
