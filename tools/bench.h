/* SPDX-License-Identifier: Apache-2.0 */
/* What the parts of `tessera bench` share: its options, a suite (rows and
 * criteria, read from a .suite file), a device's calibration and a timed
 * row. cmd_bench.c calibrates and times, bench_suite_file.c finds and reads
 * suite files, bench_suites.c judges the criteria, bench_report.c prints the
 * table and writes the JSON. */
#ifndef TESSERA_TOOLS_BENCH_H
#define TESSERA_TOOLS_BENCH_H

#include <stdbool.h>
#include <stddef.h>

#include "calibrate.h"
#include "clblast.h"
#include "common.h"
#include "cublaslt.h"
#include "hipblaslt.h"
#include "openblas.h"
#include "problem.h"

/* ---- suites (read by bench_suite_file.c, judged by bench_suites.c) ---- */

typedef enum criterion_kind {
  OVER_OPENBLAS,     /* OpenBLAS time (one variant) / tessera time */
  OVER_CUBLASLT,     /* cuBLASLt time (same buffers, same run) / tessera time */
  OVER_VENDOR_BLAS,  /* vendor BLAS (cuBLASLt, hipBLASLt, rocBLAS, CLBlast) / tessera */
  TFLOPS_AT_LEAST,   /* TFLOP/s (threshold in TFLOP/s) */
  OVER_OWN_RATE,     /* GFLOP/s / GFLOP/s of another row */
  WEIGHTS_OVER_COPY, /* GB/s of B (the weights) / copy bandwidth */
  BYTES_OVER_COPY,   /* GB/s / copy bandwidth */
  BYTES_OVER_READ,   /* GB/s / read-only bandwidth (CPU devices, where it is measured) */
  /* against the same row on the suite's reference device (the first device
   * of its `reference` backend, in the same run) */
  OVER_REFERENCE_CUBLASLT, /* cuBLASLt time there / this device's time */
  OVER_REFERENCE_RATE      /* this device's GFLOP/s / tessera's there */
} criterion_kind;

typedef struct suite_criterion {
  int row;
  criterion_kind kind;
  int reference; /* OVER_OPENBLAS: the variant; OVER_OWN_RATE: the row */
  double threshold;
  bool supplementary; /* not part of the acceptance: shown for context, tallied apart */
  char on[16];        /* `on`: "" every device judged; "cpu" CPU devices; else a backend */
} suite_criterion;

#define BENCH_MAX_ROWS 64
#define BENCH_MAX_CRITERIA 128
#define BENCH_SUITE_NAME_MAX 64

/* When a row runs (a suite file's `short` and `full` flags). */
typedef enum suite_row_runs { ROW_ALWAYS, ROW_SHORT_ONLY, ROW_FULL_ONLY } suite_row_runs;

/* A suite as its file (docs/BENCHMARKS.md) describes it. */
typedef struct bench_suite {
  char name[BENCH_SUITE_NAME_MAX]; /* the file's name without .suite */
  char about[256];                 /* what it measures */
  int row_count;
  problem_spec rows[BENCH_MAX_ROWS];
  suite_row_runs row_runs[BENCH_MAX_ROWS];
  int criterion_count;
  suite_criterion criteria[BENCH_MAX_CRITERIA];
  char runs_on[32];         /* "": every device; "cpu": CPU devices; else a backend */
  char reference[32];       /* "": none; else the backend of the reference device */
  char default_devices[64]; /* without --device/--all: "" (the usual), "all", or a selector */
  bool cpu_when_named;      /* CPU devices run it only when named with --device */
} bench_suite;

/* Reads the suite `name_or_path`: a path (with a '/') is read as it is; a
 * name is NAME.suite in the installed suites directory (short names cpu,
 * cuda and vulkan stand for the suites they used to be). Prints why not and
 * returns false on failure (a file's errors name FILE:LINE). */
bool bench_suite_load(const char *name_or_path, bench_suite *suite);
/* Reads a suite from memory: what bench_suite_load does after reading
 * `path` (only named in messages). */
bool bench_suite_parse(const char *path, const char *text, size_t length, bench_suite *suite);
/* The installed suites directory ("" where none is found). */
const char *bench_suites_dir(void);
/* "CUDA" for cuda, and so on: a backend as the suites' messages name it. */
const char *bench_backend_label(const char *backend);

typedef struct bench_options {
  const char *selectors[MAX_SELECTED_DEVICES];
  int selector_count;
  bool all;
  tsr_op op;         /* TSR_OP_COUNT_: every op */
  tsr_dtype dtype;   /* TSR_DTYPE_INVALID: every dtype */
  const char *shape; /* the shape to time (needs op), or in a suite with criteria a filter */
  bool causal;       /* attention: causal (with shape: the row's, else a filter) */
  bool short_run;
  bool list; /* print the rows each device would run; time nothing */
  const char *json_path;
  const char *suite_arg;    /* --suite as given; NULL: none */
  bench_suite *suite;       /* the suite read; NULL when none is needed (--op with --shape) */
  tsr_compute_mode compute; /* f32 GEMM rows: strict or tf32 */
  /* After the solo rows, every row again on all devices at once, one
   * thread each, each device's rate beside its solo rate. */
  bool concurrent;
} bench_options;

/* What a device can do at most, measured at the start of its rows. */
typedef struct device_calibration {
  tsr_device_info info; /* the device, for the report */
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
  double core_handoff_ns; /* CPUs: between the first two CPUs (calibrate.h); else NaN */
  /* Cores other processes used during each measurement (NaN: unknown). */
  double copy_others, fma_others, bf16_others;
  openblas_probe openblas[OPENBLAS_VARIANT_COUNT]; /* CPUs only */
  /* The vendor BLAS that GEMM rows are compared with: cuBLASLt on CUDA
   * devices, hipBLASLt or rocBLAS on HIP ones, CLBlast on OpenCL GPUs
   * (NULL name: none tried). */
  const char *vendor_blas;
  cublaslt_session *cublaslt;   /* CUDA devices with cuBLASLt; else NULL */
  hipblaslt_session *hipblaslt; /* HIP devices with hipBLASLt or rocBLAS; else NULL */
  clblast_session *clblast;     /* OpenCL GPUs with CLBlast; else NULL */
  bool vendor_blas_available;
  char vendor_blas_note[1200]; /* what was loaded, or why nothing was */
} device_calibration;

/* Why a row's figures should not be taken at face value (bench_row.flags). */
enum {
  /* its rate is above 100% of its ceiling: data served from a cache, or a
   * ceiling measured low (a disturbed calibration) */
  BENCH_ABOVE_CEILING = 1 << 0,
  /* the slowest sample took more than BENCH_SPREAD_LIMIT times the fastest:
   * something else had the device or the host for part of the row */
  BENCH_SPREAD = 1 << 1,
  /* rows bound by memory: the copy bandwidth timed just before and just
   * after the row differ by more than BENCH_DRIFT_LIMIT: the machine's
   * memory bandwidth changed while the row ran */
  BENCH_COPY_DRIFT = 1 << 2,
};
/* CPUs: round trips of the hand-off probe before each row (about 0.1-0.5
 * ms), and the one-way time above which two cores share no cache. */
#define BENCH_HANDOFF_ROUND_TRIPS 1000
#define BENCH_FAR_CORES_NS 100.0
#define BENCH_SPREAD_LIMIT 1.5
#define BENCH_DRIFT_LIMIT 1.2

/* How long a device idles before an idle-call sample: past the CPU plugin's
 * default poll window (0.5 ms), so its threads are parked, as an
 * application's pauses between calls let them. */
#define BENCH_IDLE_MS 5.0

typedef struct bench_row {
  char device[48];
  problem_spec spec;
  char shape[96];
  double ms, min_ms, max_ms; /* median, least and greatest sample */
  double idle_call_ms;       /* one call + finish after the device idled; NaN: not timed */
  double gflops, gbs;
  double peak_fraction;                       /* NaN: no ceiling known */
  const char *peak_kind;                      /* "fma", "bf16 dot", "copy" */
  double openblas_ms[OPENBLAS_VARIANT_COUNT]; /* NaN: not timed */
  char openblas_error[OPENBLAS_VARIANT_COUNT][256];
  double others_load;     /* cores used by other processes while timed (worst window) */
  double core_handoff_ns; /* CPUs: measure_core_handoff_ns just before the row; else NaN */
  double copy_gbs;        /* rows bound by memory: copies timed around the row; else NaN */
  double copy_before_gbs, copy_after_gbs; /* the same, before and after alone */
  double read_gbs; /* the same on CPUs: read-only passes around the row; else NaN */
  /* The device's vendor BLAS on the same problem (cuBLASLt: the same
   * buffers; CLBlast: copies; grouped: a loop of calls); NaN: not timed.
   * `vendor_blas` names it (a static string; NULL: none tried for this
   * row). */
  const char *vendor_blas;
  double vendor_blas_ms;
  double vendor_blas_difference; /* ||D_vendor - D|| / ||D|| */
  int runs;
  unsigned flags; /* BENCH_ABOVE_CEILING, ... */
  bool failed;
} bench_row;

/* ---- judging (bench_suites.c) ---- */

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

/* Judges one criterion on a device's rows (`row_present`: which ran);
 * `reference_rows`: the rows of the suite's reference device
 * (`reference_device`, of backend `reference_backend`), or NULL. */
void bench_judge(const suite_criterion *c, const bench_row *device_rows, const bool *row_present,
                 const bench_row *reference_rows, const char *reference_device,
                 const char *reference_backend, const device_calibration *cal,
                 const problem_spec *specs, criterion_result *result);
/* Why `suite` does not run on this device (NULL: it does); `named`: the
 * devices were named with --device. */
const char *bench_suite_skip_reason(const bench_suite *suite, const tsr_device_info *info,
                                    bool named, char *buf, size_t capacity);
/* Whether the suite judges its criteria on this device (not on its
 * reference devices). */
bool bench_suite_judges(const bench_suite *suite, const tsr_device_info *info);
/* Whether the criterion's `on` takes in the device. */
bool bench_criterion_applies(const suite_criterion *c, const tsr_device_info *info);

/* ---- output (bench_report.c) ---- */

/* The table: CPU devices show the OpenBLAS columns, others the vendor
 * BLAS's, headed by its name (`vendor_blas`; NULL: "cuBLASLt"). */
void bench_print_header(bool cpu, const char *vendor_blas);
void bench_print_row(const bench_row *row, bool cpu, const char *vendor_blas);
/* `hip`: a HIP device ran, so hipBLASLt / rocBLAS are explained too;
 * `opencl`: an OpenCL GPU ran, so CLBlast is. */
void bench_print_legend(bool hip, bool opencl);
/* The timing plan of a row (cmd_bench.c). */
timing_plan bench_plan_for(const problem_spec *spec, bool short_run, int device_type);
/* --concurrent (bench_concurrent.c): each row present on two devices or
 * more runs on all of them at once, a thread per device with its own queue;
 * prints each device's rate beside its solo rate (rows: device d's row i at
 * [d * spec_count + i]). Returns the number of rows that failed. */
int bench_concurrent(const device_selection *selection, const problem_spec *specs, int spec_count,
                     const bench_row *rows, const bool *present, const bench_options *o);
void bench_print_criteria(const criterion_result *results, int count, const bench_suite *suite);
/* The JSON report; `filters` as given on the command line. */
bool bench_write_json(const char *path, const bench_options *o, const filter_text *filters,
                      const bench_row *rows, int row_count, const device_calibration *cals,
                      int device_count, const criterion_result *criteria, int criterion_count);

#endif /* TESSERA_TOOLS_BENCH_H */
