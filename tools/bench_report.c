/* SPDX-License-Identifier: Apache-2.0 */
/* What `tessera bench` prints and writes: the table of rows (median, min,
 * max, rates, fraction of the ceiling, baselines, flags), its legend, the
 * suites' verdicts and the JSON report. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "timing.h"

/* Column labels of the OpenBLAS variants. */
static const char *const openblas_columns[OPENBLAS_VARIANT_COUNT] = {"OB-inst ms", "OB-SKX ms",
                                                                     "OB-PSC ms"};

/* The marks of the flags in the table, and their names in the JSON. */
static const struct {
  unsigned flag;
  char mark;
  const char *name;
} flag_names[] = {
    {BENCH_ABOVE_CEILING, '^', "above_ceiling"},
    {BENCH_SPREAD, '~', "spread"},
    {BENCH_COPY_DRIFT, '~', "copy_drift"},
};
#define FLAG_NAME_COUNT (int)(sizeof flag_names / sizeof flag_names[0])

/* The vendor BLAS column: "NAME ms", at least as wide as the others (11),
 * wider for a longer name ("hipBLASLt ms"). */
static const char *vendor_label(const char *vendor_blas, char *buf, size_t capacity) {
  snprintf(buf, capacity, "%s ms", vendor_blas != NULL ? vendor_blas : "cuBLASLt");
  return buf;
}

static int vendor_width(const char *vendor_blas) {
  char label[48];
  size_t length = strlen(vendor_label(vendor_blas, label, sizeof label));
  return length > 11 ? (int)length : 11;
}

void bench_print_header(bool cpu, const char *vendor_blas) {
  printf("%-13s %-5s %-22s %10s %9s %9s %9s %9s %8s %-13s %6s", "op", "dtype", "shape", "median ms",
         "min", "max", "idle call", "GFLOP/s", "GB/s", "of peak", "copy");
  if (cpu)
    for (int v = 0; v < OPENBLAS_VARIANT_COUNT; v++)
      printf(" %11s %6s", openblas_columns[v], "x");
  if (!cpu || vendor_blas != NULL) { /* CPUs: OpenCL ones have CLBlast */
    char label[48];
    printf(" %*s %6s", vendor_width(vendor_blas), vendor_label(vendor_blas, label, sizeof label),
           "x");
  }
  printf(" %6s %s\n", "others", "flags");
}

void bench_print_row(const bench_row *r, bool cpu, const char *vendor_blas) {
  if (r->failed) {
    printf("%-13s %-5s %-22s %10s\n", tsr_op_name(r->spec.op), tsr_dtype_name(r->spec.dtype),
           r->shape, "failed");
    fflush(stdout);
    return;
  }
  char gflops[16] = "-", peak[32] = "-";
  if (r->gflops > 0.0)
    snprintf(gflops, sizeof gflops, "%.1f", r->gflops);
  if (isfinite(r->peak_fraction))
    snprintf(peak, sizeof peak, "%.0f%% %s", r->peak_fraction * 100.0, r->peak_kind);
  char copy[16] = "-";
  if (isfinite(r->copy_gbs))
    snprintf(copy, sizeof copy, "%.1f", r->copy_gbs);
  printf("%-13s %-5s %-22s %10.3f %9.3f %9.3f %9.3f %9s %8.2f %-13s %6s", tsr_op_name(r->spec.op),
         tsr_dtype_name(r->spec.dtype), r->shape, r->ms, r->min_ms, r->max_ms, r->idle_call_ms,
         gflops, r->gbs, peak, copy);
  for (int v = 0; cpu && v < OPENBLAS_VARIANT_COUNT; v++) {
    if (isfinite(r->openblas_ms[v]))
      printf(" %11.3f %6.2f", r->openblas_ms[v], r->openblas_ms[v] / r->ms);
    else
      printf(" %11s %6s", "-", "-");
  }
  if (!cpu || vendor_blas != NULL) {
    int width = vendor_width(vendor_blas);
    if (isfinite(r->vendor_blas_ms))
      printf(" %*.3f %6.2f", width, r->vendor_blas_ms, r->vendor_blas_ms / r->ms);
    else
      printf(" %*s %6s", width, "-", "-");
  }
  if (isfinite(r->others_load))
    printf(" %6.2f", r->others_load);
  else
    printf(" %6s", "-");
  char marks[FLAG_NAME_COUNT + 1] = "";
  for (int i = 0; i < FLAG_NAME_COUNT; i++)
    if ((r->flags & flag_names[i].flag) && strchr(marks, flag_names[i].mark) == NULL)
      marks[strlen(marks)] = flag_names[i].mark;
  printf(" %s\n", marks[0] ? marks : "-");
  fflush(stdout);
}

void bench_print_legend(bool hip, bool opencl) {
  printf("\nmedian ms, min, max: the median, least and greatest of event-timed runs over rotated "
         "input sets; on every device the runs "
         "are queued back to back (batches of %d after an untimed lead-in), so a sample is the "
         "device's time per call in a stream of calls, without the host's launch latency; "
         "cuBLASLt is timed the same way.\n"
         "idle call: ms of one call + tsr_queue_finish on the host clock after the device idled "
         "%.0f ms (median of up to %d): what an application that waits for each result pays, "
         "launch, wake-up and synchronisation included.\n",
         TIMING_BATCH, BENCH_IDLE_MS, TIMING_IDLE_CALLS);
  printf("of peak: GFLOP/s over the FMA peak (bf16: over the bf16 dot peak) for rows bound by "
         "arithmetic, GB/s over the copy bandwidth for rows bound by memory (the ceiling that "
         "allows the longer least time binds).\n"
         "copy: for rows bound by memory, the copy bandwidth (GB/s) timed just before and after "
         "the row (median), which 'of peak' and the criteria use: a shared host's memory "
         "bandwidth drifts; on CPUs read-only passes over the same buffer are timed there too "
         "(JSON read_gbs_around: what a plain two-stream read reached, for rows that only "
         "read).\n"
         "OB-inst / OB-SKX / OB-PSC: OpenBLAS cblas_sgemm as installed / with "
         "OPENBLAS_CORETYPE=SkylakeX / with OPENBLAS_CORETYPE=Prescott, on the same inputs with "
         "the same thread count; x = OpenBLAS time / tessera time (> 1: tessera is faster).\n"
         "cuBLASLt (GPU rows): cublasLtMatmul on the same device buffers in the same run, its "
         "heuristic's first algorithm, 32 MiB workspace, timed with CUDA events after the same "
         "warm-up, rotation and queueing (grouped GEMM: a loop of one call per group); x = "
         "cuBLASLt time / "
         "tessera time (> 1: tessera is faster); see docs/PERFORMANCE.md.\n");
  if (hip)
    printf("hipBLASLt / rocBLAS (HIP rows): hipblasLtMatmul (its heuristic's first algorithm, "
           "32 MiB workspace) where libhipblaslt loads, else rocblas_gemm_ex, on the same device "
           "buffers (copies where the plugin cannot wrap HIP memory) in the same run, timed with "
           "HIP events "
           "after the same warm-up, rotation and queueing (grouped GEMM: a loop of one call per "
           "group; tf32 rows: xf32 compute where the GPU has it); x = its time / tessera time "
           "(> 1: tessera is faster).\n");
  if (opencl)
    printf("CLBlast (OpenCL rows, GPUs and CPUs such as PoCL): CLBlastSgemm (f32; tf32 rows too) "
           "or CLBlastHgemm (f16, "
           "which accumulates in f16 and needs cl_khr_fp16; bf16: none) on copies of the inputs "
           "in its own context on the same OpenCL device, in the same run, timed with OpenCL "
           "profiling events after the same warm-up, rotation and queueing (grouped GEMM: a loop "
           "of one call per group); x = its time / tessera time (> 1: tessera is faster).\n");
  printf("others: cores' worth of CPU that other processes (and other guests of the hypervisor) "
         "used while the row was timed, worst of its windows; well above 0 means the row was "
         "disturbed.\n");
  printf("flags: ^ = rate above its ceiling (of peak over 100%%: data served from a cache, or a "
         "ceiling measured low; not a fraction of peak to trust); ~ = disturbed: max/min of the "
         "samples over %.1f, or, for rows bound by memory, the copy bandwidth timed just before "
         "and just after the row more than %.0f%% apart (JSON flags: above_ceiling, spread, "
         "copy_drift); rerun a flagged row alone before quoting it.\n",
         BENCH_SPREAD_LIMIT, (BENCH_DRIFT_LIMIT - 1.0) * 100.0);
}

void bench_print_criteria(const criterion_result *results, int count, const bench_suite *suite) {
  if (count == 0)
    return;
  const char *name = suite->name;
  printf("\nsuite %s: %s (ratios from this run; * = supplementary, tallied apart)\n", name,
         suite->about);
  printf("%-8s %-84s %9s %8s %9s  %s\n", "device", "criterion", "measured", "needs", "at most",
         "verdict");
  int tally[2][3] = {{0, 0, 0}, {0, 0, 0}}; /* [supplementary][PASS, FAIL, n/a] */
  for (int i = 0; i < count; i++) {
    const criterion_result *r = &results[i];
    char measured[16] = "-", needs[16], text[330];
    if (isfinite(r->measured))
      snprintf(measured, sizeof measured, "%.2f", r->measured);
    snprintf(needs, sizeof needs, ">= %g", r->threshold);
    char attainable[16] = "-";
    if (isfinite(r->attainable))
      snprintf(attainable, sizeof attainable, "%.2f", r->attainable);
    snprintf(text, sizeof text, "%s%s", r->supplementary ? "* " : "", r->text);
    printf("%-8s %-84s %9s %8s %9s  %s%s%s%s\n", r->device, text, measured, needs, attainable,
           r->verdict, r->why[0] ? " (" : "", r->why, r->why[0] ? ")" : "");
    int verdict = strcmp(r->verdict, "PASS") == 0 ? 0 : strcmp(r->verdict, "FAIL") == 0 ? 1 : 2;
    tally[r->supplementary ? 1 : 0][verdict]++;
  }
  printf("suite %s: %d PASS, %d FAIL, %d n/a (supplementary: %d PASS, %d FAIL, %d n/a)\n", name,
         tally[0][0], tally[0][1], tally[0][2], tally[1][0], tally[1][1], tally[1][2]);
  /* The ratios that have an "at most": against OpenBLAS, or another row. */
  bool bounded = false;
  for (int i = 0; i < suite->criterion_count; i++)
    bounded = bounded || suite->criteria[i].kind == OVER_OPENBLAS ||
              suite->criteria[i].kind == OVER_OWN_RATE;
  if (bounded)
    printf("(at most: the ratio this machine's measured peak allows, i.e. the FMA (bf16: bf16 dot) "
           "peak over the other side's rate; a threshold above it cannot be met here)\n");
}

static void json_host_peak(FILE *f, const char *key, const host_peak *peak, double others) {
  fprintf(f, ", \"%s\": ", key);
  if (!isfinite(peak->gflops)) {
    fputs("null", f);
    return;
  }
  fprintf(f, "{\"gflops\": ");
  json_number(f, peak->gflops);
  fprintf(f, ", \"isa\": ");
  json_string(f, peak->isa);
  fprintf(f, ", \"threads\": %d, \"others_load\": ", peak->threads);
  json_number(f, others);
  fprintf(f, "}");
}

bool bench_write_json(const char *path, const bench_options *o, const filter_text *filters,
                      const bench_row *rows, int row_count, const device_calibration *cals,
                      int device_count, const criterion_result *criteria, int criterion_count) {
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    cli_error("cannot write %s", path);
    return false;
  }
  json_report_head(f, "tessera bench");
  fprintf(f, "  \"suite\": ");
  json_string(f, o->suite != NULL ? o->suite->name : "default");
  fprintf(f, ",\n  \"short\": %s,\n  \"filters\": ", o->short_run ? "true" : "false");
  json_string(f, filters->text);
  fprintf(f, ",\n  \"devices\": [");
  for (int d = 0; d < device_count; d++) {
    const device_calibration *c = &cals[d];
    /* "device" as well as "selector": the key earlier reports used. */
    fprintf(f, "%s\n    {\"device\": ", d ? "," : "");
    json_string(f, c->device);
    fprintf(f, ", ");
    json_device_members(f, &c->info);
    fprintf(f, ", \"threads\": %d, \"copy_gbs\": ", c->threads);
    json_number(f, c->copy_gbs);
    fprintf(f, ", \"copy_bytes\": %zu, \"copy_runs\": %d", c->copy_bytes, c->copy_runs);
    fprintf(f, ", \"read_gbs\": ");
    json_number(f, c->read_gbs);
    fprintf(f, ", \"copy_others_load\": ");
    json_number(f, c->copy_others);
    fprintf(f, ", \"core_handoff_ns\": ");
    json_number(f, c->core_handoff_ns);
    json_host_peak(f, "fma_peak", &c->fma, c->fma_others);
    json_host_peak(f, "bf16_dot_peak", &c->bf16, c->bf16_others);
    fprintf(f, ", \"openblas\": {");
    for (int v = 0; v < OPENBLAS_VARIANT_COUNT; v++) {
      const openblas_probe *p = &c->openblas[v];
      fprintf(f, "%s\"%s\": ", v ? ", " : "", openblas_variant_key((openblas_variant)v));
      if (!c->is_cpu || !p->available) {
        fputs("null", f);
        continue;
      }
      fprintf(f, "{\"core\": ");
      json_string(f, p->core);
      fprintf(f, ", \"config\": ");
      json_string(f, p->config);
      fprintf(f, "}");
    }
    fprintf(f, "}, \"vendor_blas\": ");
    if (c->vendor_blas != NULL) {
      fprintf(f, "{\"name\": ");
      json_string(f, c->vendor_blas);
      fprintf(f, ", \"available\": %s, \"note\": ", c->vendor_blas_available ? "true" : "false");
      json_string(f, c->vendor_blas_note);
      fprintf(f, "}");
    } else {
      fputs("null", f);
    }
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
    fprintf(f, ", \"min_ms\": ");
    json_number(f, r->failed ? NAN : r->min_ms);
    fprintf(f, ", \"max_ms\": ");
    json_number(f, r->failed ? NAN : r->max_ms);
    fprintf(f, ", \"spread\": ");
    json_number(f, r->failed ? NAN : r->max_ms / r->min_ms);
    fprintf(f, ", \"idle_call_ms\": ");
    json_number(f, r->failed ? NAN : r->idle_call_ms);
    fprintf(f, ", \"runs\": %d, \"gflops\": ", r->runs);
    json_number(f, r->failed || r->gflops <= 0.0 ? NAN : r->gflops);
    fprintf(f, ", \"gbs\": ");
    json_number(f, r->failed ? NAN : r->gbs);
    fprintf(f, ", \"others_load\": ");
    json_number(f, r->others_load);
    fprintf(f, ", \"core_handoff_ns\": ");
    json_number(f, r->core_handoff_ns);
    fprintf(f, ", \"copy_gbs_around\": ");
    json_number(f, r->copy_gbs);
    fprintf(f, ", \"copy_gbs_before\": ");
    json_number(f, r->copy_before_gbs);
    fprintf(f, ", \"copy_gbs_after\": ");
    json_number(f, r->copy_after_gbs);
    fprintf(f, ", \"read_gbs_around\": ");
    json_number(f, r->read_gbs);
    fprintf(f, ", \"peak_fraction\": ");
    json_number(f, r->peak_fraction);
    fprintf(f, ", \"peak\": ");
    if (r->peak_kind)
      json_string(f, r->peak_kind);
    else
      fputs("null", f);
    for (int v = 0; v < OPENBLAS_VARIANT_COUNT; v++) {
      const char *key = openblas_variant_key((openblas_variant)v);
      fprintf(f, ", \"openblas_%s_ms\": ", key);
      json_number(f, r->openblas_ms[v]);
      fprintf(f, ", \"openblas_%s_over_tessera\": ", key);
      json_number(f, r->openblas_ms[v] / r->ms);
    }
    /* The cublaslt_* keys keep their meaning (cuBLASLt only); vendor_blas_*
     * are the same figures for whichever vendor BLAS the device has. */
    bool cublaslt = r->vendor_blas != NULL && strcmp(r->vendor_blas, "cuBLASLt") == 0;
    fprintf(f, ", \"cublaslt_ms\": ");
    json_number(f, cublaslt ? r->vendor_blas_ms : NAN);
    fprintf(f, ", \"cublaslt_over_tessera\": ");
    json_number(f, cublaslt ? r->vendor_blas_ms / r->ms : NAN);
    fprintf(f, ", \"cublaslt_relative_difference\": ");
    json_number(f, cublaslt ? r->vendor_blas_difference : NAN);
    fprintf(f, ", \"vendor_blas\": ");
    if (r->vendor_blas != NULL)
      json_string(f, r->vendor_blas);
    else
      fputs("null", f);
    fprintf(f, ", \"vendor_blas_ms\": ");
    json_number(f, r->vendor_blas_ms);
    fprintf(f, ", \"vendor_blas_over_tessera\": ");
    json_number(f, r->vendor_blas_ms / r->ms);
    fprintf(f, ", \"vendor_blas_relative_difference\": ");
    json_number(f, r->vendor_blas_difference);
    fprintf(f, ", \"flags\": [");
    for (int k = 0, written = 0; k < FLAG_NAME_COUNT; k++)
      if (r->flags & flag_names[k].flag)
        fprintf(f, "%s\"%s\"", written++ ? ", " : "", flag_names[k].name);
    fprintf(f, "]}");
  }
  fprintf(f, "\n  ],\n  \"criteria\": [");
  for (int i = 0; i < criterion_count; i++) {
    const criterion_result *c = &criteria[i];
    fprintf(f, "%s\n    {\"device\": ", i ? "," : "");
    json_string(f, c->device);
    fprintf(f, ", \"criterion\": ");
    json_string(f, c->text);
    fprintf(f, ", \"measured\": ");
    json_number(f, c->measured);
    fprintf(f, ", \"attainable\": ");
    json_number(f, c->attainable);
    fprintf(f, ", \"threshold\": ");
    json_number(f, c->threshold);
    fprintf(f, ", \"verdict\": \"%s\", \"supplementary\": %s", c->verdict,
            c->supplementary ? "true" : "false");
    if (c->why[0]) {
      fprintf(f, ", \"why\": ");
      json_string(f, c->why);
    }
    fprintf(f, "}");
  }
  fprintf(f, "%s]\n}\n", criterion_count ? "\n  " : "");
  bool ok = ferror(f) == 0;
  ok = fclose(f) == 0 && ok;
  if (!ok)
    cli_error("writing %s failed", path);
  return ok;
}
