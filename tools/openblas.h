/* SPDX-License-Identifier: Apache-2.0 */
/* OpenBLAS's cblas_sgemm as the baseline of `tessera bench`, timed in a
 * child process (this executable re-run with a hidden subcommand) so that
 * each variant gets a clean library load: OpenBLAS picks its kernels from
 * OPENBLAS_CORETYPE once, when it loads, and its idle threads spin for a
 * while after each call, which would slow whatever runs next in the same
 * process. The child rebuilds the inputs from the same seeds (the same
 * generator as the device's problem) and reports a hash of them, so the
 * parent can prove both timed the same numbers. */
#ifndef TESSERA_TOOLS_OPENBLAS_H
#define TESSERA_TOOLS_OPENBLAS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "problem.h"
#include "timing.h"

typedef enum openblas_variant {
  OPENBLAS_AS_INSTALLED, /* OPENBLAS_CORETYPE removed from the environment */
  OPENBLAS_SKYLAKEX,     /* OPENBLAS_CORETYPE=SkylakeX: its fastest kernels here */
  /* OPENBLAS_CORETYPE=Prescott: the SSE3 kernels its detection falls back to
   * on CPUs it does not know (seen on the CI machines of this project,
   * whose CPU it detects as 'Prescott' under their hypervisor). */
  OPENBLAS_PRESCOTT,
  OPENBLAS_VARIANT_COUNT
} openblas_variant;

/* "as installed", "SkylakeX", "Prescott". */
const char *openblas_variant_label(openblas_variant variant);
/* The OPENBLAS_CORETYPE value the variant sets; NULL: none. */
const char *openblas_variant_coretype(openblas_variant variant);
/* A short key for JSON: "as_installed", "skylakex", "prescott". */
const char *openblas_variant_key(openblas_variant variant);

/* Remembers the CPUs this process may run on, before any plugin starts
 * threads, so children get all of them even if a plugin pins the caller. */
void openblas_remember_affinity(void);

typedef struct openblas_probe {
  bool available;
  char core[64];    /* openblas_get_corename(): the kernels it chose */
  char config[160]; /* openblas_get_config() */
  char error[256];  /* why not available */
} openblas_probe;

/* Loads OpenBLAS in a child with the variant's environment and reports
 * which kernels it picked. */
void openblas_probe_variant(openblas_variant variant, openblas_probe *probe);

/* The seed of input set `index` of a bench row (device and OpenBLAS alike). */
uint64_t bench_input_seed(int index);

/* True for the f32 GEMMs the baseline can run: plain row-major A [M,K] times
 * B [K,N], no batch, transposes, C, bias or activation. */
bool openblas_handles(const problem_spec *spec);

/* Hash of the input tensors a and b of each set, in order. False when a
 * tensor cannot be read on the host. */
bool gemm_inputs_hash(problem *sets, int set_count, uint64_t *hash);
/* The Frobenius norm of output d (to compare two libraries' products). */
bool gemm_output_norm(problem *p, double *norm);

typedef struct openblas_timing {
  double median_ms;
  int runs;
  uint64_t inputs_hash; /* gemm_inputs_hash of the child's sets */
  double output_norm;   /* gemm_output_norm of set 0's product */
  char core[64];
  char error[256]; /* set when the timing failed */
} openblas_timing;

/* Times cblas_sgemm on `set_count` input sets (bench_input_seed(0..)) of
 * `spec` with `threads` OpenBLAS threads, following `plan` (warm-up, runs,
 * budget; host clock around each call), in a child process. False on
 * failure, with the reason in timing->error. */
bool openblas_time_sgemm(openblas_variant variant, const problem_spec *spec, int set_count,
                         int threads, const timing_plan *plan, openblas_timing *timing);

/* The hidden subcommand the child runs:
 *   tessera __openblas-sgemm --probe
 *   tessera __openblas-sgemm --shape MxNxK --sets N --threads T
 *           --warmup W --min-runs A --max-runs B --budget SECONDS
 * It prints one line of key=value fields on stdout. */
int cmd_openblas_sgemm(int argc, char **argv);
#define OPENBLAS_CHILD_COMMAND "__openblas-sgemm"

#endif /* TESSERA_TOOLS_OPENBLAS_H */
