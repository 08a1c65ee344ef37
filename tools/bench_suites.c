/* SPDX-License-Identifier: Apache-2.0 */
/* The rows `tessera bench` times: the default rows (the ops an LLM spends
 * its time in) and the acceptance suites of issues 3 (cpu), 4 (cuda) and 5
 * (vulkan), each with its criteria and how a criterion is judged from the
 * rows of one run. */
#include <math.h>
#include <string.h>

#include "bench.h"

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

static bool row_ok(const bench_row *row) {
  return row != NULL && !row->failed && row->ms > 0.0;
}

void bench_judge(const suite_criterion *c, const bench_row *device_rows, const bool *row_present,
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

int bench_suite_rows(bench_suite suite, bool short_run, problem_spec *rows) {
  switch (suite) {
  case SUITE_CPU:
    return cpu_suite_rows(rows);
  case SUITE_CUDA:
    return cuda_suite_rows(rows);
  case SUITE_VULKAN:
    return vulkan_suite_rows(rows);
  default:
    return default_rows(short_run, rows);
  }
}

const suite_criterion *bench_suite_criteria(bench_suite suite, int *count) {
  switch (suite) {
  case SUITE_CPU:
    *count = CPU_CRITERIA;
    return cpu_criteria;
  case SUITE_CUDA:
    *count = CUDA_CRITERIA;
    return cuda_criteria;
  case SUITE_VULKAN:
    *count = VULKAN_CRITERIA;
    return vulkan_criteria;
  default:
    *count = 0;
    return NULL;
  }
}

const char *bench_suite_name(bench_suite suite) {
  static const char *const names[] = {"default", "cpu", "cuda", "vulkan"};
  return names[suite];
}
