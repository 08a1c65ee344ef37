/* tessera bench: op timings measured with queue events after warm-up, medians
 * over rotated random input sets, rates as GFLOP/s and GB/s, the fraction of
 * this machine's measured ceiling (a large buffer copy for bandwidth; for
 * CPUs, a loop of independent FMAs on the device's thread count for
 * arithmetic) and, for f32 GEMM on CPUs, OpenBLAS's cblas_sgemm on the same
 * inputs in the same run: as installed, with OPENBLAS_CORETYPE=SkylakeX (its
 * fastest kernels on AVX-512) and with Prescott (what its detection falls
 * back to on CPUs it does not know).
 * `--suite cpu` runs exactly the rows of issue 3's acceptance criteria and
 * judges each against its threshold. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate.h"
#include "commands.h"
#include "common.h"
#include "cublaslt.h"
#include "openblas.h"
#include "problem.h"
#include "timing.h"

typedef enum bench_suite { SUITE_DEFAULT, SUITE_CPU, SUITE_CUDA, SUITE_VULKAN } bench_suite;

typedef struct bench_options {
  const char *selectors[MAX_SELECTED_DEVICES];
  int selector_count;
  bool all;
  tsr_op op;         /* TSR_OP_COUNT_: every op */
  const char *shape; /* only rows of this shape (SHAPE syntax); NULL: all */
  bool short_run;
  const char *json_path;
  bench_suite suite;
  tsr_compute_mode compute; /* f32 GEMM rows: strict or tf32 */
} bench_options;

/* What a device can do at most, measured at the start of its rows. */
typedef struct device_calibration {
  char device[48];
  char name[96];
  bool is_cpu;
  int threads;
  double copy_gbs; /* NaN when not measured */
  size_t copy_bytes;
  int copy_runs;
  double read_gbs; /* CPUs: read-only bandwidth of the copy buffer; else NaN */
  host_peak fma;   /* CPUs only; gflops NaN otherwise */
  host_peak bf16;  /* CPUs with AVX512_BF16 only */
  int peak_repeats;
  /* Cores other processes used during each measurement (NaN: unknown). */
  double copy_others, fma_others, bf16_others;
  openblas_probe openblas[OPENBLAS_VARIANT_COUNT]; /* CPUs only */
  cublaslt_session *cublaslt;                      /* CUDA devices with cuBLASLt; else NULL */
  char cublaslt_why[320];                          /* why not, for CUDA devices */
} device_calibration;

typedef struct bench_row {
  char device[48];
  problem_spec spec;
  char shape[96];
  double ms, gflops, gbs;
  double peak_fraction;                       /* NaN: no ceiling known */
  const char *peak_kind;                      /* "fma", "bf16 dot", "copy" */
  double openblas_ms[OPENBLAS_VARIANT_COUNT]; /* NaN: not timed */
  char openblas_error[OPENBLAS_VARIANT_COUNT][256];
  double others_load; /* cores used by other processes while timed (worst window) */
  double copy_gbs;    /* rows bound by memory: copies timed around the row; else NaN */
  double read_gbs;    /* the same on CPUs: read-only passes around the row; else NaN */
  double cublaslt_ms; /* cuBLASLt on the same buffers (grouped: a loop of calls); NaN: not timed */
  double cublaslt_difference; /* ||D_lt - D|| / ||D|| */
  int runs;
  bool failed;
} bench_row;

/* Keeps the worse of two loads (NaN: unknown). */
static void note_load(bench_row *row, double load) {
  if (isnan(row->others_load) || load > row->others_load)
    row->others_load = load;
}

/* ------------------------------------------------------------------------ */
/* Rows                                                                      */
/* ------------------------------------------------------------------------ */

static problem_spec gemm_shape(tsr_dtype dtype, int64_t m, int64_t n, int64_t k) {
  problem_spec s;
  problem_spec_from_shape(&s, TSR_OP_GEMM, dtype, "1x1x1", false);
  s.gemm.m = m;
  s.gemm.n = n;
  s.gemm.k = k;
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
      rows[n++] = gemm_shape(d == 0 ? TSR_DTYPE_F32 : TSR_DTYPE_BF16, sizes[i], sizes[i], sizes[i]);
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

/* ---- suite cpu: issue 3's acceptance, row by row ---- */

enum {
  CPU_GEMM_1024,
  CPU_GEMM_2048,
  CPU_GEMM_4096,
  CPU_GEMM_LLAMA, /* 4096x11008x4096 */
  CPU_GEMM_BF16_4096,
  CPU_GEMV_F32,
  CPU_GEMV_BF16,
  CPU_RMSNORM,
  CPU_SOFTMAX,
  CPU_SWIGLU,
  CPU_ATTENTION,
  CPU_SUITE_ROWS
};

static int cpu_suite_rows(problem_spec *rows) {
  const tsr_dtype f32 = TSR_DTYPE_F32, bf16 = TSR_DTYPE_BF16;
  rows[CPU_GEMM_1024] = gemm_shape(f32, 1024, 1024, 1024);
  rows[CPU_GEMM_2048] = gemm_shape(f32, 2048, 2048, 2048);
  rows[CPU_GEMM_4096] = gemm_shape(f32, 4096, 4096, 4096);
  rows[CPU_GEMM_LLAMA] = gemm_shape(f32, 4096, 11008, 4096);
  rows[CPU_GEMM_BF16_4096] = gemm_shape(bf16, 4096, 4096, 4096);
  rows[CPU_GEMV_F32] = gemm_shape(f32, 1, 4096, 4096);
  rows[CPU_GEMV_BF16] = gemm_shape(bf16, 1, 4096, 4096);
  rows[CPU_RMSNORM] = shaped(TSR_OP_RMSNORM, f32, "8192x8192", false);
  rows[CPU_SOFTMAX] = shaped(TSR_OP_SOFTMAX, f32, "8192x8192", false);
  rows[CPU_SWIGLU] = shaped(TSR_OP_SWIGLU, f32, "8192x8192", false);
  rows[CPU_ATTENTION] = shaped(TSR_OP_ATTENTION, f32, "1x8x8x2048x2048x128", false);
  return CPU_SUITE_ROWS;
}

typedef enum criterion_kind {
  OVER_OPENBLAS,     /* OpenBLAS time (one variant) / tessera time */
  OVER_CUBLASLT,     /* cuBLASLt time (same buffers, same run) / tessera time */
  TFLOPS_AT_LEAST,   /* TFLOP/s (threshold in TFLOP/s) */
  OVER_OWN_RATE,     /* GFLOP/s / GFLOP/s of another row */
  WEIGHTS_OVER_COPY, /* GB/s of B (the weights) / copy bandwidth */
  BYTES_OVER_COPY,   /* GB/s / copy bandwidth */
  /* against the same row on the reference device (suite vulkan: the first
   * CUDA device, in the same run) */
  OVER_REFERENCE_CUBLASLT, /* cuBLASLt time there / this device's time */
  OVER_REFERENCE_RATE      /* this device's GFLOP/s / tessera's there */
} criterion_kind;

typedef struct suite_criterion {
  int row;
  criterion_kind kind;
  int reference; /* OVER_OPENBLAS: the variant; OVER_OWN_RATE: the row */
  double threshold;
  bool supplementary; /* not in the words; shown for context */
} suite_criterion;

/* The criteria, in its order. The Prescott lines are supplementary:
 * "as installed" is whatever OpenBLAS's detection picks on the machine at
 * hand, and the criterion was written where it picked Prescott. */
static const suite_criterion cpu_criteria[] = {
    {CPU_GEMM_1024, OVER_OPENBLAS, OPENBLAS_SKYLAKEX, 0.95, false},
    {CPU_GEMM_1024, OVER_OPENBLAS, OPENBLAS_AS_INSTALLED, 4.0, false},
    {CPU_GEMM_1024, OVER_OPENBLAS, OPENBLAS_PRESCOTT, 4.0, true},
    {CPU_GEMM_2048, OVER_OPENBLAS, OPENBLAS_SKYLAKEX, 0.95, false},
    {CPU_GEMM_2048, OVER_OPENBLAS, OPENBLAS_AS_INSTALLED, 4.0, false},
    {CPU_GEMM_2048, OVER_OPENBLAS, OPENBLAS_PRESCOTT, 4.0, true},
    {CPU_GEMM_4096, OVER_OPENBLAS, OPENBLAS_SKYLAKEX, 0.95, false},
    {CPU_GEMM_4096, OVER_OPENBLAS, OPENBLAS_AS_INSTALLED, 4.0, false},
    {CPU_GEMM_4096, OVER_OPENBLAS, OPENBLAS_PRESCOTT, 4.0, true},
    {CPU_GEMM_LLAMA, OVER_OPENBLAS, OPENBLAS_SKYLAKEX, 0.95, false},
    {CPU_GEMM_LLAMA, OVER_OPENBLAS, OPENBLAS_AS_INSTALLED, 4.0, false},
    {CPU_GEMM_LLAMA, OVER_OPENBLAS, OPENBLAS_PRESCOTT, 4.0, true},
    {CPU_GEMM_BF16_4096, OVER_OWN_RATE, CPU_GEMM_4096, 1.6, false},
    {CPU_GEMV_F32, WEIGHTS_OVER_COPY, 0, 0.8, false},
    {CPU_GEMV_BF16, WEIGHTS_OVER_COPY, 0, 0.8, false},
    {CPU_RMSNORM, BYTES_OVER_COPY, 0, 0.8, false},
    {CPU_SOFTMAX, BYTES_OVER_COPY, 0, 0.8, false},
    {CPU_SWIGLU, BYTES_OVER_COPY, 0, 0.8, false},
    {CPU_ATTENTION, OVER_OWN_RATE, CPU_GEMM_4096, 0.5, false},
};
#define CPU_CRITERIA (int)(sizeof cpu_criteria / sizeof cpu_criteria[0])

/* ---- suite cuda: issue 4's acceptance, row by row ---- */

enum {
  CU_BF16_4096,
  CU_BF16_8192,
  CU_BF16_WIDE, /* 4096x11008x4096 */
  CU_BF16_DEEP, /* 4096x4096x11008 */
  CU_BF16_1793,
  CU_F16_4096,
  CU_F16_8192,
  CU_F16_WIDE,
  CU_F16_DEEP,
  CU_F16_1793,
  CU_TF32_4096,
  CU_F32_4096,
  CU_GEMV_1,
  CU_GEMV_16,
  CU_GROUPED,
  CU_ATTENTION,
  CU_ATTENTION_CAUSAL,
  CU_RMSNORM,
  CU_SOFTMAX,
  CU_SWIGLU,
  CU_ROPE,
  CU_CROSS_ENTROPY,
  CUDA_SUITE_ROWS
};

static int cuda_suite_rows(problem_spec *rows) {
  const tsr_dtype dts[2] = {TSR_DTYPE_BF16, TSR_DTYPE_F16};
  for (int i = 0; i < 2; i++) {
    int base = i == 0 ? CU_BF16_4096 : CU_F16_4096;
    rows[base + 0] = gemm_shape(dts[i], 4096, 4096, 4096);
    rows[base + 1] = gemm_shape(dts[i], 8192, 8192, 8192);
    rows[base + 2] = gemm_shape(dts[i], 4096, 11008, 4096);
    rows[base + 3] = gemm_shape(dts[i], 4096, 4096, 11008);
    rows[base + 4] = gemm_shape(dts[i], 1793, 1793, 1793);
  }
  rows[CU_TF32_4096] = gemm_shape(TSR_DTYPE_F32, 4096, 4096, 4096);
  rows[CU_TF32_4096].gemm.compute = TSR_COMPUTE_TF32;
  rows[CU_F32_4096] = gemm_shape(TSR_DTYPE_F32, 4096, 4096, 4096);
  const tsr_dtype bf16 = TSR_DTYPE_BF16;
  rows[CU_GEMV_1] = gemm_shape(bf16, 1, 8192, 8192);
  rows[CU_GEMV_16] = gemm_shape(bf16, 16, 4096, 4096);
  rows[CU_GROUPED] = shaped(TSR_OP_GROUPED_GEMM, bf16, "64x32768x2048x4096", false);
  rows[CU_ATTENTION] = shaped(TSR_OP_ATTENTION, bf16, "4x32x32x4096x4096x128", false);
  rows[CU_ATTENTION_CAUSAL] = shaped(TSR_OP_ATTENTION, bf16, "4x32x32x4096x4096x128", true);
  rows[CU_RMSNORM] = shaped(TSR_OP_RMSNORM, bf16, "16384x8192", false);
  rows[CU_SOFTMAX] = shaped(TSR_OP_SOFTMAX, bf16, "16384x8192", false);
  rows[CU_SWIGLU] = shaped(TSR_OP_SWIGLU, bf16, "16384x8192", false);
  rows[CU_ROPE] = shaped(TSR_OP_ROPE, bf16, "4x4096x32x128", false);
  rows[CU_CROSS_ENTROPY] = shaped(TSR_OP_CROSS_ENTROPY, bf16, "16384x8192", false);
  return CUDA_SUITE_ROWS;
}

/* Issue 4's criteria, in its order; the cuBLASLt ratios of the GEMV rows
 * are supplementary (the issue judges them against the copy bandwidth). */
static const suite_criterion cuda_criteria[] = {
    {CU_BF16_4096, OVER_CUBLASLT, 0, 0.75, false},
    {CU_BF16_8192, OVER_CUBLASLT, 0, 0.75, false},
    {CU_BF16_WIDE, OVER_CUBLASLT, 0, 0.75, false},
    {CU_BF16_DEEP, OVER_CUBLASLT, 0, 0.75, false},
    {CU_F16_4096, OVER_CUBLASLT, 0, 0.75, false},
    {CU_F16_8192, OVER_CUBLASLT, 0, 0.75, false},
    {CU_F16_WIDE, OVER_CUBLASLT, 0, 0.75, false},
    {CU_F16_DEEP, OVER_CUBLASLT, 0, 0.75, false},
    {CU_TF32_4096, OVER_CUBLASLT, 0, 0.6, false},
    {CU_F32_4096, OVER_CUBLASLT, 0, 0.7, false},
    {CU_BF16_1793, OVER_CUBLASLT, 0, 1.0, false},
    {CU_F16_1793, OVER_CUBLASLT, 0, 1.0, true},
    {CU_GEMV_1, WEIGHTS_OVER_COPY, 0, 0.85, false},
    {CU_GEMV_16, WEIGHTS_OVER_COPY, 0, 0.85, false},
    {CU_GEMV_1, OVER_CUBLASLT, 0, 1.0, true},
    {CU_GEMV_16, OVER_CUBLASLT, 0, 1.0, true},
    {CU_GROUPED, OVER_CUBLASLT, 0, 2.5, false},
    {CU_ATTENTION, TFLOPS_AT_LEAST, 0, 250.0, false},
    {CU_ATTENTION_CAUSAL, TFLOPS_AT_LEAST, 0, 250.0, false},
    {CU_RMSNORM, BYTES_OVER_COPY, 0, 0.85, false},
    {CU_SOFTMAX, BYTES_OVER_COPY, 0, 0.85, false},
    {CU_SWIGLU, BYTES_OVER_COPY, 0, 0.85, false},
    {CU_ROPE, BYTES_OVER_COPY, 0, 0.85, false},
    {CU_CROSS_ENTROPY, BYTES_OVER_COPY, 0, 0.85, false},
};
#define CUDA_CRITERIA (int)(sizeof cuda_criteria / sizeof cuda_criteria[0])

/* ---- suite vulkan: issue 5's acceptance on a GPU with a CUDA device
 * beside it (the same GPU through both plugins) ---- */

enum {
  VK_F16_4096,
  VK_RMSNORM_F32,
  VK_SOFTMAX_F32,
  VK_RMSNORM_BF16,
  VK_SOFTMAX_BF16,
  VK_ATTENTION,
  VK_ATTENTION_CAUSAL,
  VULKAN_SUITE_ROWS
};

static int vulkan_suite_rows(problem_spec *rows) {
  rows[VK_F16_4096] = gemm_shape(TSR_DTYPE_F16, 4096, 4096, 4096);
  rows[VK_RMSNORM_F32] = shaped(TSR_OP_RMSNORM, TSR_DTYPE_F32, "16384x8192", false);
  rows[VK_SOFTMAX_F32] = shaped(TSR_OP_SOFTMAX, TSR_DTYPE_F32, "16384x8192", false);
  rows[VK_RMSNORM_BF16] = shaped(TSR_OP_RMSNORM, TSR_DTYPE_BF16, "16384x8192", false);
  rows[VK_SOFTMAX_BF16] = shaped(TSR_OP_SOFTMAX, TSR_DTYPE_BF16, "16384x8192", false);
  rows[VK_ATTENTION] = shaped(TSR_OP_ATTENTION, TSR_DTYPE_F16, "4x32x32x4096x4096x128", false);
  rows[VK_ATTENTION_CAUSAL] =
      shaped(TSR_OP_ATTENTION, TSR_DTYPE_F16, "4x32x32x4096x4096x128", true);
  return VULKAN_SUITE_ROWS;
}

/* The issue names no dtype for the row ops: both f32 and bf16 are judged.
 * Attention is to be measured and reported against the CUDA plugin: its
 * ratio has no threshold (0). */
static const suite_criterion vulkan_criteria[] = {
    {VK_F16_4096, OVER_REFERENCE_CUBLASLT, 0, 0.5, false},
    {VK_RMSNORM_F32, BYTES_OVER_COPY, 0, 0.7, false},
    {VK_SOFTMAX_F32, BYTES_OVER_COPY, 0, 0.7, false},
    {VK_RMSNORM_BF16, BYTES_OVER_COPY, 0, 0.7, false},
    {VK_SOFTMAX_BF16, BYTES_OVER_COPY, 0, 0.7, false},
    {VK_ATTENTION, OVER_REFERENCE_RATE, 0, 0.0, false},
    {VK_ATTENTION_CAUSAL, OVER_REFERENCE_RATE, 0, 0.0, true},
    {VK_F16_4096, OVER_REFERENCE_RATE, 0, 0.0, true},
};
#define VULKAN_CRITERIA (int)(sizeof vulkan_criteria / sizeof vulkan_criteria[0])

typedef struct criterion_result {
  char device[48];
  char text[320];
  double measured; /* NaN: could not be judged */
  /* The most the measured ceilings allow for this ratio (the arithmetic
   * peak over the other side's rate); NaN where no such bound applies. */
  double attainable;
  double threshold;
  const char *verdict; /* "PASS", "FAIL", "n/a" */
  char why[96];        /* for n/a */
  bool supplementary;
} criterion_result;

static bool row_ok(const bench_row *row) {
  return row != NULL && !row->failed && row->ms > 0.0;
}

/* `reference_rows`: the reference device's rows (suite vulkan), or NULL. */
static void judge(const suite_criterion *c, const bench_row *device_rows, const bool *row_present,
                  const bench_row *reference_rows, const char *reference_device,
                  const device_calibration *cal, const problem_spec *specs,
                  criterion_result *result) {
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
    if (row_ok(row) && isfinite(row->cublaslt_ms))
      result->measured = row->cublaslt_ms / row->ms;
    else if (row_ok(row))
      snprintf(result->why, sizeof result->why, "cuBLASLt not timed");
    break;
  case OVER_REFERENCE_CUBLASLT:
  case OVER_REFERENCE_RATE: {
    const bench_row *there = reference_rows ? &reference_rows[c->row] : NULL;
    snprintf(result->text, sizeof result->text, "%s %s %s: %s%s%s", op, dtype, shape,
             c->kind == OVER_REFERENCE_CUBLASLT ? "tessera / cuBLASLt on " : "TFLOP/s / ",
             reference_device ? reference_device : "a CUDA device",
             c->kind == OVER_REFERENCE_RATE ? "'s (reported)" : "");
    if (!row_ok(row))
      break;
    if (!row_ok(there))
      snprintf(result->why, sizeof result->why, "no CUDA device ran the row");
    else if (c->kind == OVER_REFERENCE_RATE)
      result->measured = row->gflops / there->gflops;
    else if (isfinite(there->cublaslt_ms))
      result->measured = there->cublaslt_ms / row->ms;
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
  }
  if (!row_ok(row))
    snprintf(result->why, sizeof result->why, "row failed");
  result->verdict = !isfinite(result->measured)        ? "n/a"
                    : result->measured >= c->threshold ? "PASS"
                                                       : "FAIL";
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

static void calibrate_device(tsr_device *device, const tsr_device_info *info, tsr_queue *queue,
                             const bench_options *o, copy_probe *copy, device_calibration *cal) {
  memset(cal, 0, sizeof *cal);
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
    if (strcmp(info->backend, "cuda") == 0) {
      progress_update("bench %s: loading cuBLASLt", info->selector);
      cal->cublaslt = cublaslt_open(info, cal->cublaslt_why, sizeof cal->cublaslt_why);
      progress_clear();
      if (cal->cublaslt != NULL)
        printf("  cuBLASLt:   %s: every GEMM row is timed with it too, on the same device "
               "buffers\n",
               cublaslt_describe(cal->cublaslt));
      else
        printf("  cuBLASLt:   not available (no baseline): %s\n", cal->cublaslt_why);
    }
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
}

/* ------------------------------------------------------------------------ */
/* One row                                                                   */
/* ------------------------------------------------------------------------ */

static timing_plan plan_for(const problem_spec *spec, bool short_run, int device_type) {
  double flops = problem_flops(spec), bytes = problem_bytes(spec);
  /* One long run needs no second warm-up. */
  bool heavy = flops > 4e9 || bytes > 512e6;
  double warm = timing_warmup_seconds(device_type);
  bool queued = timing_queued(device_type);
  return short_run ? (timing_plan){1, 3, 10, 0.1, warm, queued}
                   : (timing_plan){heavy ? 1 : 3, 3, 30, heavy ? 2.0 : 1.0, warm, queued};
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
  row->read_gbs = NAN;
  row->cublaslt_ms = NAN;
  row->cublaslt_difference = NAN;
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
  bool baseline = cal->cublaslt != NULL && cublaslt_handles(spec);
  problem_build_options build = {0, false, baseline ? cublaslt_allocator(cal->cublaslt) : NULL};
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
  timing_plan plan = plan_for(spec, o->short_run, info->type);
  /* A row bound by memory is compared with copies timed just before and
   * just after it (median of both). */
  bool bracket = judged && !compute_bound && copy->src != NULL;
  double copy_samples[16], read_samples[16];
  int copy_count = 0, read_count = 0, copy_runs = o->short_run ? 2 : 4;
  if (!row->failed && bracket) {
    copy_probe_time(copy, copy_runs, copy_samples, &copy_count);
    read_probe_time(copy, copy_runs, read_samples, &read_count);
  }
  if (!row->failed) {
    load_mark mark;
    load_mark_now(&mark);
    row->failed = time_problem(sets, set_count, queue, NULL, &plan, &row->ms, &row->runs) != TSR_OK;
    note_load(row, load_others_since(&mark));
  }
  if (!row->failed && bracket) {
    read_probe_time(copy, copy_runs, read_samples, &read_count);
    copy_probe_time(copy, copy_runs, copy_samples, &copy_count);
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
    if (cal->is_cpu && info->host_visible && openblas_handles(spec))
      time_openblas(sets, set_count, &plan, cal, row);
    if (baseline) {
      cublaslt_timing lt;
      progress_update("bench %s: cuBLASLt on %s %s %s", info->selector, tsr_op_name(spec->op),
                      tsr_dtype_name(spec->dtype), row->shape);
      bool timed = cublaslt_time(cal->cublaslt, sets, set_count, queue, &plan, &lt);
      progress_clear();
      /* Different summation orders and the output's rounding: a few units
       * of the output dtype's last place, normwise; a wrong layout mapping
       * gives O(1). */
      bool strict = spec->op == TSR_OP_GEMM && spec->dtype == TSR_DTYPE_F32 &&
                    spec->gemm.compute == TSR_COMPUTE_STRICT;
      double tolerance = strict ? 1e-4 : 2e-2;
      if (!timed)
        cli_error("cuBLASLt on %s %s %s: %s", tsr_op_name(spec->op), tsr_dtype_name(spec->dtype),
                  row->shape, lt.error);
      else if (!(lt.difference <= tolerance))
        cli_error("cuBLASLt on %s %s %s: its product differs from tessera's (relative %.3g): no "
                  "ratio",
                  tsr_op_name(spec->op), tsr_dtype_name(spec->dtype), row->shape, lt.difference);
      else
        row->cublaslt_ms = lt.median_ms;
      row->cublaslt_difference = lt.difference;
    }
  }
  for (int i = 0; i < built; i++)
    problem_destroy(&sets[i]);
}

/* ------------------------------------------------------------------------ */
/* Output                                                                    */
/* ------------------------------------------------------------------------ */

/* Column labels of the OpenBLAS variants. */
static const char *const openblas_columns[OPENBLAS_VARIANT_COUNT] = {"OB-inst ms", "OB-SKX ms",
                                                                     "OB-PSC ms"};

/* CPU devices show the OpenBLAS columns, GPU devices cuBLASLt's. */
static void print_header(bool cpu) {
  printf("%-13s %-5s %-22s %10s %9s %8s %-13s %6s", "op", "dtype", "shape", "median ms", "GFLOP/s",
         "GB/s", "of peak", "copy");
  if (cpu)
    for (int v = 0; v < OPENBLAS_VARIANT_COUNT; v++)
      printf(" %11s %6s", openblas_columns[v], "x");
  else
    printf(" %11s %6s", "cuBLASLt ms", "x");
  printf(" %6s\n", "others");
}

static void print_row(const bench_row *r, bool cpu) {
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
  printf("%-13s %-5s %-22s %10.3f %9s %8.2f %-13s %6s", tsr_op_name(r->spec.op),
         tsr_dtype_name(r->spec.dtype), r->shape, r->ms, gflops, r->gbs, peak, copy);
  for (int v = 0; cpu && v < OPENBLAS_VARIANT_COUNT; v++) {
    if (isfinite(r->openblas_ms[v]))
      printf(" %11.3f %6.2f", r->openblas_ms[v], r->openblas_ms[v] / r->ms);
    else
      printf(" %11s %6s", "-", "-");
  }
  if (!cpu) {
    if (isfinite(r->cublaslt_ms))
      printf(" %11.3f %6.2f", r->cublaslt_ms, r->cublaslt_ms / r->ms);
    else
      printf(" %11s %6s", "-", "-");
  }
  if (isfinite(r->others_load))
    printf(" %6.2f\n", r->others_load);
  else
    printf(" %6s\n", "-");
  fflush(stdout);
}

static void print_legend(void) {
  printf("\nmedian ms: the median of event-timed runs over rotated input sets; on GPUs the runs "
         "are queued back to back (batches of %d after an untimed lead-in), so a sample is the "
         "device's time per call in a stream of calls, without the host's launch latency; "
         "cuBLASLt is timed the same way.\n",
         TIMING_BATCH);
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
         "tessera time (> 1: tessera is faster); see bench/notes/cuda-gemm-baselines.md.\n"
         "others: cores' worth of CPU that other processes (and other guests of the hypervisor) "
         "used while the row was timed, worst of its windows; well above 0 means the row was "
         "disturbed.\n");
}

static void print_criteria(const criterion_result *results, int count, bench_suite suite) {
  if (count == 0)
    return;
  const char *name = suite == SUITE_CUDA ? "cuda" : suite == SUITE_VULKAN ? "vulkan" : "cpu";
  printf("\nsuite %s: issue %d acceptance (ratios from this run; * = supplementary, not in the "
         "issue)\n",
         name,
         suite == SUITE_CUDA     ? 4
         : suite == SUITE_VULKAN ? 5
                                 : 3);
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
  if (suite == SUITE_CPU)
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

static bool write_bench_json(const char *path, const bench_options *o, const bench_row *rows,
                             int row_count, const device_calibration *cals, int device_count,
                             const criterion_result *criteria, int criterion_count) {
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    cli_error("cannot write %s", path);
    return false;
  }
  fprintf(f, "{\n  \"tool\": \"tessera bench\",\n  \"version\": ");
  json_string(f, tsr_version());
  fprintf(f, ",\n  \"suite\": \"%s\",\n  \"short\": %s,\n  \"devices\": [",
          o->suite == SUITE_CPU      ? "cpu"
          : o->suite == SUITE_CUDA   ? "cuda"
          : o->suite == SUITE_VULKAN ? "vulkan"
                                     : "default",
          o->short_run ? "true" : "false");
  for (int d = 0; d < device_count; d++) {
    const device_calibration *c = &cals[d];
    fprintf(f, "%s\n    {\"device\": ", d ? "," : "");
    json_string(f, c->device);
    fprintf(f, ", \"name\": ");
    json_string(f, c->name);
    fprintf(f, ", \"threads\": %d, \"copy_gbs\": ", c->threads);
    json_number(f, c->copy_gbs);
    fprintf(f, ", \"copy_bytes\": %zu, \"copy_runs\": %d", c->copy_bytes, c->copy_runs);
    fprintf(f, ", \"read_gbs\": ");
    json_number(f, c->read_gbs);
    fprintf(f, ", \"copy_others_load\": ");
    json_number(f, c->copy_others);
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
    fprintf(f, "}}");
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
    fprintf(f, ", \"runs\": %d, \"gflops\": ", r->runs);
    json_number(f, r->failed || r->gflops <= 0.0 ? NAN : r->gflops);
    fprintf(f, ", \"gbs\": ");
    json_number(f, r->failed ? NAN : r->gbs);
    fprintf(f, ", \"others_load\": ");
    json_number(f, r->others_load);
    fprintf(f, ", \"copy_gbs_around\": ");
    json_number(f, r->copy_gbs);
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
    fprintf(f, ", \"cublaslt_ms\": ");
    json_number(f, r->cublaslt_ms);
    fprintf(f, ", \"cublaslt_over_tessera\": ");
    json_number(f, r->cublaslt_ms / r->ms);
    fprintf(f, ", \"cublaslt_relative_difference\": ");
    json_number(f, r->cublaslt_difference);
    fprintf(f, "}");
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

/* ------------------------------------------------------------------------ */
/* The command                                                               */
/* ------------------------------------------------------------------------ */

static int parse_bench_options(int argc, char **argv, bench_options *o) {
  memset(o, 0, sizeof *o);
  o->op = TSR_OP_COUNT_;
  o->suite = SUITE_DEFAULT;
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
    } else if (arg_value(&c, "--shape", &value)) {
      o->shape = value;
    } else if (arg_flag(&c, "--short")) {
      o->short_run = true;
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
      if (strcmp(value, "cpu") == 0) {
        o->suite = SUITE_CPU;
      } else if (strcmp(value, "cuda") == 0) {
        o->suite = SUITE_CUDA;
      } else if (strcmp(value, "vulkan") == 0) {
        o->suite = SUITE_VULKAN;
      } else if (strcmp(value, "default") == 0) {
        o->suite = SUITE_DEFAULT;
      } else {
        cli_error("unknown suite '%s' (suites: default, cpu, cuda, vulkan)", value);
        return EXIT_USAGE;
      }
    } else {
      return arg_unknown(&c, "bench");
    }
  }
  if (c.failed)
    return EXIT_USAGE;
  /* The cpu suite is about the CPU device unless told otherwise. */
  if (o->suite == SUITE_CPU && o->selector_count == 0 && !o->all)
    o->selectors[o->selector_count++] = "cpu";
  if (o->suite == SUITE_CUDA && o->selector_count == 0 && !o->all)
    o->selectors[o->selector_count++] = "cuda";
  /* The Vulkan devices, and the CUDA devices as the same run's reference. */
  if (o->suite == SUITE_VULKAN && o->selector_count == 0)
    o->all = true;
  return EXIT_OK;
}

int cmd_bench(int argc, char **argv) {
  bench_options o;
  int rc = parse_bench_options(argc, argv, &o);
  if (rc != EXIT_OK)
    return rc;
  /* Before any plugin starts threads (children get these CPUs). */
  openblas_remember_affinity();
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
  int spec_count = o.suite == SUITE_CPU      ? cpu_suite_rows(specs)
                   : o.suite == SUITE_CUDA   ? cuda_suite_rows(specs)
                   : o.suite == SUITE_VULKAN ? vulkan_suite_rows(specs)
                                             : default_rows(o.short_run, specs);
  /* --compute tf32: the f32 GEMM rows allow tf32 (the suites fix their own). */
  if (o.suite == SUITE_DEFAULT && o.compute == TSR_COMPUTE_TF32)
    for (int i = 0; i < spec_count; i++)
      if (specs[i].op == TSR_OP_GEMM && specs[i].dtype == TSR_DTYPE_F32)
        specs[i].gemm.compute = TSR_COMPUTE_TF32;
  const suite_criterion *suite_criteria = o.suite == SUITE_CPU      ? cpu_criteria
                                          : o.suite == SUITE_CUDA   ? cuda_criteria
                                          : o.suite == SUITE_VULKAN ? vulkan_criteria
                                                                    : NULL;
  int suite_criterion_count = o.suite == SUITE_CPU      ? CPU_CRITERIA
                              : o.suite == SUITE_CUDA   ? CUDA_CRITERIA
                              : o.suite == SUITE_VULKAN ? VULKAN_CRITERIA
                                                        : 0;
  size_t device_count = selection.count;
  bench_row *rows = calloc((size_t)spec_count * device_count, sizeof *rows);
  bool *present = calloc((size_t)spec_count * device_count, sizeof *present);
  criterion_result *criteria =
      calloc((size_t)(suite_criterion_count + 1) * device_count, sizeof *criteria);
  device_calibration *cals = calloc(device_count, sizeof *cals);
  bench_row *ordered = calloc((size_t)spec_count * device_count, sizeof *ordered);
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
  int failures = 0, criterion_count = 0, ordered_count = 0;

  for (uint32_t d = 0; d < selection.count; d++) {
    tsr_device *device = selection.devices[d];
    const tsr_device_info *info = &selection.infos[d];
    device_calibration *cal = &cals[d];
    bench_row *device_rows = &rows[(size_t)d * (size_t)spec_count];
    bool *device_present = &present[(size_t)d * (size_t)spec_count];
    snprintf(cal->device, sizeof cal->device, "%s", info->selector);
    snprintf(cal->name, sizeof cal->name, "%.*s", (int)sizeof cal->name - 1, info->name);
    cal->copy_gbs = cal->read_gbs = cal->fma.gflops = cal->bf16.gflops = NAN;
    cal->copy_others = cal->fma_others = cal->bf16_others = NAN;
    printf("%s%s (%s, %u compute units)\n", d ? "\n" : "", info->selector, info->name,
           info->compute_units);
    if (o.suite == SUITE_CPU && info->type != TSR_DEVICE_CPU) {
      printf("  skipped: suite cpu runs on CPU devices\n");
      continue;
    }
    if (o.suite == SUITE_CUDA && strcmp(info->backend, "cuda") != 0) {
      printf("  skipped: suite cuda runs on CUDA devices\n");
      continue;
    }
    if (o.suite == SUITE_VULKAN && strcmp(info->backend, "vulkan") != 0 &&
        strcmp(info->backend, "cuda") != 0) {
      printf("  skipped: suite vulkan runs on Vulkan devices (and CUDA ones for reference)\n");
      continue;
    }
    /* Its rows are GPU-sized (attention: 275 GFLOP a run); a CPU Vulkan
     * device (lavapipe) runs them only when named with --device. */
    if (o.suite == SUITE_VULKAN && o.selector_count == 0 && info->type == TSR_DEVICE_CPU) {
      printf("  skipped: a CPU device; name it with --device to run suite vulkan on it\n");
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
    print_header(cal->is_cpu);
    for (int i = 0; i < spec_count; i++) {
      const problem_spec *spec = &specs[i];
      if (o.op != TSR_OP_COUNT_ && spec->op != o.op)
        continue;
      if (!(info->op_mask & (1u << spec->op)) || !(info->dtype_mask & (1u << spec->dtype)))
        continue;
      char shape[96];
      problem_format_shape(spec, shape, sizeof shape);
      if (o.shape != NULL && strcmp(o.shape, shape) != 0)
        continue;
      progress_update("bench %s: %s %s %s", info->selector, tsr_op_name(spec->op),
                      tsr_dtype_name(spec->dtype), shape);
      bench_row *row = &device_rows[i];
      bench_one(device, info, queue, spec, &o, cal, &copy, row);
      device_present[i] = true;
      progress_clear();
      print_row(row, cal->is_cpu);
      ordered[ordered_count++] = *row;
      if (row->failed)
        failures++;
    }
    copy_probe_destroy(&copy);
    tsr_queue_destroy(queue);
    cublaslt_close(cal->cublaslt); /* after the queue: its buffers are gone */
    cal->cublaslt = NULL;
  }
  /* Judged once every device ran: suite vulkan compares with the first
   * CUDA device's rows (its reference), which it judges by nothing. */
  int reference = -1;
  for (uint32_t d = 0; d < selection.count && reference < 0; d++)
    if (o.suite == SUITE_VULKAN && strcmp(selection.infos[d].backend, "cuda") == 0)
      reference = (int)d;
  for (uint32_t d = 0; d < selection.count; d++) {
    if (o.suite == SUITE_VULKAN && strcmp(selection.infos[d].backend, "vulkan") != 0)
      continue;
    const bench_row *device_rows = &rows[(size_t)d * (size_t)spec_count];
    const bool *device_present = &present[(size_t)d * (size_t)spec_count];
    const bench_row *reference_rows =
        reference >= 0 ? &rows[(size_t)reference * (size_t)spec_count] : NULL;
    for (int c = 0; c < suite_criterion_count; c++)
      if (device_present[suite_criteria[c].row]) /* --op, --shape may leave rows out */
        judge(&suite_criteria[c], device_rows, device_present, reference_rows,
              reference >= 0 ? selection.infos[reference].selector : NULL, &cals[d], specs,
              &criteria[criterion_count++]);
  }
  print_legend();
  print_criteria(criteria, criterion_count, o.suite);

  bool json_ok = true;
  if (o.json_path != NULL)
    json_ok = write_bench_json(o.json_path, &o, ordered, ordered_count, cals, (int)device_count,
                               criteria, criterion_count);
  free(rows);
  free(present);
  free(criteria);
  free(cals);
  free(ordered);
  tsr_context_destroy(context);
  /* A FAIL verdict is a finding about speed, not an error of the tool:
   * the exit status reports only rows that could not be run. */
  return failures || !json_ok ? EXIT_FAILED : EXIT_OK;
}
