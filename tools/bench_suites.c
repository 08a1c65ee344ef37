/* SPDX-License-Identifier: Apache-2.0 */
/* How a suite's criterion is judged from the rows of one run, and which
 * devices a suite runs on. The suites themselves are files (bench/suites,
 * read by bench_suite_file.c; docs/BENCHMARKS.md). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"

const char *bench_backend_label(const char *backend) {
  static const char *const labels[][2] = {
      {"cpu", "CPU"}, {"cuda", "CUDA"}, {"hip", "HIP"}, {"opencl", "OpenCL"}, {"vulkan", "Vulkan"}};
  for (size_t i = 0; i < sizeof labels / sizeof labels[0]; i++)
    if (strcmp(backend, labels[i][0]) == 0)
      return labels[i][1];
  return backend;
}

/* Whether the device is of a kind a suite file names (`runs-on`, a
 * criterion's `on`): "" any device, "cpu" devices of type CPU, else a
 * backend's devices. */
static bool device_of_kind(const char *kind, const tsr_device_info *info) {
  if (kind[0] == '\0')
    return true;
  if (strcmp(kind, "cpu") == 0)
    return info->type == TSR_DEVICE_CPU;
  return strcmp(info->backend, kind) == 0;
}

/* Whether the device is one the suite is about (`runs-on`). */
static bool runs_on(const bench_suite *suite, const tsr_device_info *info) {
  return device_of_kind(suite->runs_on, info);
}

bool bench_suite_judges(const bench_suite *suite, const tsr_device_info *info) {
  return runs_on(suite, info);
}

bool bench_criterion_applies(const suite_criterion *c, const tsr_device_info *info) {
  return device_of_kind(c->on, info);
}

const char *bench_suite_skip_reason(const bench_suite *suite, const tsr_device_info *info,
                                    bool named, char *buf, size_t capacity) {
  bool reference = suite->reference[0] != '\0' && strcmp(info->backend, suite->reference) == 0;
  if (!runs_on(suite, info) && !reference) {
    const char *what =
        strcmp(suite->runs_on, "cpu") == 0 ? "CPU" : bench_backend_label(suite->runs_on);
    if (suite->reference[0] != '\0')
      snprintf(buf, capacity, "suite %s runs on %s devices (and %s ones for reference)",
               suite->name, what, bench_backend_label(suite->reference));
    else
      snprintf(buf, capacity, "suite %s runs on %s devices", suite->name, what);
    return buf;
  }
  /* Rows sized for GPUs: a CPU device (lavapipe) runs them only when named. */
  if (suite->cpu_when_named && !named && info->type == TSR_DEVICE_CPU) {
    snprintf(buf, capacity, "a CPU device; name it with --device to run suite %s on it",
             suite->name);
    return buf;
  }
  return NULL;
}

static bool row_ok(const bench_row *row) {
  return row != NULL && !row->failed && row->ms > 0.0;
}

/* The row's vendor BLAS time when that library was cuBLASLt (the
 * *-cublaslt measures keep meaning cuBLASLt); else NaN. */
static double cublaslt_ms(const bench_row *row) {
  bool cublaslt = row->vendor_blas != NULL && strcmp(row->vendor_blas, "cuBLASLt") == 0;
  return cublaslt ? row->vendor_blas_ms : NAN;
}

void bench_judge(const suite_criterion *c, const bench_row *device_rows, const bool *row_present,
                 const bench_row *reference_rows, const char *reference_device,
                 const char *reference_backend, const device_calibration *cal,
                 const problem_spec *specs, criterion_result *result) {
  memset(result, 0, sizeof *result);
  snprintf(result->device, sizeof result->device, "%s", cal->device);
  result->threshold = c->threshold;
  result->measured = NAN;
  result->attainable = NAN;
  const bench_row *row = &device_rows[c->row]; /* the caller only judges rows that ran */
  result->supplementary = c->supplementary;
  const bench_row *reference =
      c->kind == OVER_OWN_RATE && row_present[c->reference] ? &device_rows[c->reference] : NULL;
  char shape[96], reference_shape[96];
  problem_format_shape(&specs[c->row], shape, sizeof shape);
  const char *op = tsr_op_name(specs[c->row].op), *dtype = tsr_dtype_name(specs[c->row].dtype);
  switch (c->kind) {
  case OVER_CUBLASLT:
    snprintf(result->text, sizeof result->text, "%s %s %s: tessera / cuBLASLt%s", op, dtype, shape,
             specs[c->row].op == TSR_OP_GROUPED_GEMM ? " (a loop of per-group calls)" : "");
    if (row_ok(row) && isfinite(cublaslt_ms(row)))
      result->measured = cublaslt_ms(row) / row->ms;
    else if (row_ok(row))
      snprintf(result->why, sizeof result->why, "cuBLASLt not timed");
    break;
  case OVER_VENDOR_BLAS: {
    /* Named after what the device has: cuBLASLt, hipBLASLt, rocBLAS or CLBlast. */
    const char *vendor = row->vendor_blas != NULL ? row->vendor_blas : cal->vendor_blas;
    snprintf(result->text, sizeof result->text, "%s %s %s: tessera / %s%s", op, dtype, shape,
             vendor != NULL ? vendor : "vendor BLAS",
             specs[c->row].op == TSR_OP_GROUPED_GEMM ? " (a loop of per-group calls)" : "");
    if (row_ok(row) && isfinite(row->vendor_blas_ms))
      result->measured = row->vendor_blas_ms / row->ms;
    else if (row_ok(row) && vendor == NULL)
      snprintf(result->why, sizeof result->why, "no vendor BLAS for %s devices",
               bench_backend_label(cal->info.backend));
    else if (row_ok(row))
      snprintf(result->why, sizeof result->why, "%s not timed", vendor);
    break;
  }
  case OVER_REFERENCE_CUBLASLT:
  case OVER_REFERENCE_RATE: {
    const bench_row *there = reference_rows ? &reference_rows[c->row] : NULL;
    const char *label = bench_backend_label(reference_backend);
    char anyone[48];
    snprintf(anyone, sizeof anyone, "a %s device", label);
    snprintf(result->text, sizeof result->text, "%s %s %s: %s%s%s", op, dtype, shape,
             c->kind == OVER_REFERENCE_CUBLASLT ? "tessera / cuBLASLt on " : "TFLOP/s / ",
             reference_device ? reference_device : anyone,
             c->kind == OVER_REFERENCE_RATE ? "'s (reported)" : "");
    if (!row_ok(row))
      break;
    if (!row_ok(there))
      snprintf(result->why, sizeof result->why, "no %s device ran the row", label);
    else if (c->kind == OVER_REFERENCE_RATE)
      result->measured = row->gflops / there->gflops;
    else if (isfinite(cublaslt_ms(there)))
      result->measured = cublaslt_ms(there) / row->ms;
    else
      snprintf(result->why, sizeof result->why, "cuBLASLt not timed there");
    break;
  }
  case TFLOPS_AT_LEAST:
    snprintf(result->text, sizeof result->text, "%s %s %s: TFLOP/s", op, dtype, shape);
    if (row_ok(row))
      result->measured = row->gflops / 1e3;
    break;
  case OVER_OPENBLAS: {
    openblas_variant v = (openblas_variant)c->reference;
    const openblas_probe *probe = &cal->openblas[v];
    snprintf(result->text, sizeof result->text, "%s %s %s: tessera / OpenBLAS %s%s%s%s", op, dtype,
             shape, openblas_variant_label(v), probe->available ? " (core " : "",
             probe->available ? probe->core : "", probe->available ? ")" : "");
    if (row_ok(row) && isfinite(row->openblas_ms[v])) {
      result->measured = row->openblas_ms[v] / row->ms;
      double openblas_gflops = problem_flops(&row->spec) / (row->openblas_ms[v] * 1e-3) / 1e9;
      result->attainable = cal->fma.gflops / openblas_gflops;
    } else if (row_ok(row))
      snprintf(result->why, sizeof result->why, "OpenBLAS %s not timed", openblas_variant_label(v));
    break;
  }
  case OVER_OWN_RATE:
    problem_format_shape(&specs[c->reference], reference_shape, sizeof reference_shape);
    snprintf(result->text, sizeof result->text, "%s %s %s: GFLOP/s / tessera's %s %s %s", op, dtype,
             shape, tsr_op_name(specs[c->reference].op), tsr_dtype_name(specs[c->reference].dtype),
             reference_shape);
    if (row_ok(row) && row_ok(reference)) {
      result->measured = row->gflops / reference->gflops;
      const host_peak *peak =
          row->spec.dtype == TSR_DTYPE_BF16 && isfinite(cal->bf16.gflops) ? &cal->bf16 : &cal->fma;
      result->attainable = peak->gflops / reference->gflops;
    } else if (row_ok(row))
      snprintf(result->why, sizeof result->why, "reference row not run");
    break;
  case WEIGHTS_OVER_COPY:
  case BYTES_OVER_COPY:
    snprintf(result->text, sizeof result->text, "%s %s %s: %s / copy bandwidth", op, dtype, shape,
             c->kind == WEIGHTS_OVER_COPY ? "GB/s of the weights" : "GB/s");
    double copy_gbs = isfinite(row->copy_gbs) ? row->copy_gbs : cal->copy_gbs;
    if (row_ok(row) && isfinite(copy_gbs)) {
      double gbs = row->gbs;
      if (c->kind == WEIGHTS_OVER_COPY) {
        const gemm_spec *g = &row->spec.gemm;
        double weight_bytes = (double)g->k * (double)g->n * (double)tsr_dtype_size(row->spec.dtype);
        gbs = weight_bytes / (row->ms * 1e-3) / 1e9;
      }
      result->measured = gbs / copy_gbs;
    } else if (row_ok(row)) {
      snprintf(result->why, sizeof result->why, "copy bandwidth not measured");
    }
    break;
  case BYTES_OVER_READ: {
    /* the read-only passes around the row, else the calibration's (CPUs) */
    snprintf(result->text, sizeof result->text, "%s %s %s: GB/s / read bandwidth", op, dtype,
             shape);
    double read_gbs = isfinite(row->read_gbs) ? row->read_gbs : cal->read_gbs;
    if (row_ok(row) && isfinite(read_gbs))
      result->measured = row->gbs / read_gbs;
    else if (row_ok(row))
      snprintf(result->why, sizeof result->why, "read bandwidth not measured (CPU devices only)");
    break;
  }
  }
  if (!row_ok(row))
    snprintf(result->why, sizeof result->why, "row failed");
  result->verdict = !isfinite(result->measured)        ? "n/a"
                    : result->measured >= c->threshold ? "PASS"
                                                       : "FAIL";
}
