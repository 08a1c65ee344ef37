/* SPDX-License-Identifier: Apache-2.0 */
/* AMD's vendor BLAS as bench's baseline for GEMM rows on HIP devices, what
 * cublaslt.h is for CUDA ones: hipBLASLt (hipblasLtMatmul, its heuristic's
 * first algorithm) where libhipblaslt loads, else rocBLAS (rocblas_gemm_ex).
 * The HIP runtime and the library are dlopen'ed (no link-time dependency,
 * no HIP header: the HIP runtime is declared in backends/hip/hip_api.h, the
 * few BLAS types and entry points in hipblaslt.c). The problem's buffers
 * are hipMalloc'ed by this module and wrapped as tessera buffers
 * (tsr_buffer_wrap_hip), so the library runs on the very same device
 * memory (where the plugin refuses the wrap: on copies of tessera's
 * buffers, same bytes at the same offsets), on its own stream, timed with
 * HIP events after tessera's queue has finished.
 * Everything degrades to "no baseline" with a reason where the runtime, the
 * library or a GPU is missing. */
#ifndef TESSERA_TOOLS_HIPBLASLT_H
#define TESSERA_TOOLS_HIPBLASLT_H

#include <stdbool.h>
#include <stddef.h>

#include "problem.h"
#include "timing.h"

typedef struct hipblaslt_session hipblaslt_session;

/* Opens a session for a tessera HIP device (matched by its PCI address in
 * the device's details, else by its backend index): the HIP runtime (the
 * library TESSERA_HIP_RUNTIME names when set, else libamdhip64.so.7, .6,
 * .5), then hipBLASLt (libhipblaslt.so.1, .so.0; 0.6 or later), else
 * rocBLAS (librocblas.so.4, .so.3), a stream, events and workspace. NULL
 * with the reason (for each library tried) in `why` when any is missing. */
hipblaslt_session *hipblaslt_open(const tsr_device_info *info, char *why, size_t why_capacity);
void hipblaslt_close(hipblaslt_session *session);
/* The library timed: "hipBLASLt" or "rocBLAS". */
const char *hipblaslt_name(const hipblaslt_session *session);
/* What was loaded ("hipBLASLt 0.12.1 (libhipblaslt.so.0), HIP runtime
 * 60443483 (libamdhip64.so.6), device 0 (PCI 0000:c1:00)"). */
const char *hipblaslt_describe(const hipblaslt_session *session);

/* Builds problems on this allocator so their device addresses are known. */
const problem_allocator *hipblaslt_allocator(hipblaslt_session *session);

/* Whether the baseline can time this problem: the GEMMs cuBLASLt times
 * (plain GEMM, grouped GEMM as a loop of per-group calls; f32/f16/bf16). */
bool hipblaslt_handles(const problem_spec *spec);

typedef struct hipblaslt_timing {
  double median_ms;
  int runs;
  double difference; /* ||D_vendor - D_tessera|| / ||D_tessera|| on sets[0] */
  char algo[96];     /* what ran (heuristic's workspace, compute type) */
  char error[256];   /* why it was not timed; "" when it was */
} hipblaslt_timing;

/* Times the library on `sets` (built on hipblaslt_allocator; tessera's
 * output in sets[0]'s d:
 * call after tessera's timing) with the same plan as tessera, rotating the
 * sets in the same order. First compares its product with tessera's (proves
 * the layout mapping). `queue` is finished first. */
bool hipblaslt_time(hipblaslt_session *session, problem *sets, int set_count, tsr_queue *queue,
                    const timing_plan *plan, hipblaslt_timing *out);

#endif /* TESSERA_TOOLS_HIPBLASLT_H */
