/* SPDX-License-Identifier: Apache-2.0 */
/* cuBLASLt as bench's baseline for GEMM rows on CUDA devices, in the same
 * run and on the very same device buffers: the CUDA driver and cuBLASLt are
 * dlopen'ed (no link-time dependency; the few types and entry points used
 * are declared in cublaslt.c), the problem's buffers are cuMemAlloc'ed by
 * this module and wrapped as tessera buffers (tsr_buffer_wrap_cuda), and
 * cuBLASLt runs on its own stream, timed with CUDA events, after tessera's
 * queue has finished. Conventions: docs/PERFORMANCE.md.
 * Everything degrades to "no baseline" with a reason where the driver, the
 * library or a GPU is missing. */
#ifndef TESSERA_TOOLS_CUBLASLT_H
#define TESSERA_TOOLS_CUBLASLT_H

#include <stdbool.h>
#include <stddef.h>

#include "problem.h"
#include "timing.h"

typedef struct cublaslt_session cublaslt_session;

/* Finds and loads libcublasLt: the file or directory named by
 * TESSERA_CUBLASLT when set (and nothing else then), else libcublasLt.so.13,
 * .so.12, .so through the dynamic linker. Returns the dlopen handle, or NULL
 * with the reason in `why`; `loaded` gets what was opened. */
void *cublaslt_load_library(char *loaded, size_t loaded_capacity, char *why, size_t why_capacity);

/* Opens a session for a tessera CUDA device (matched by UUID, else by its
 * index): driver, primary context, cuBLASLt handle, stream, events and
 * workspace. NULL with the reason in `why` when any of it is missing. */
cublaslt_session *cublaslt_open(const tsr_device_info *info, char *why, size_t why_capacity);
void cublaslt_close(cublaslt_session *session);
/* What was loaded ("libcublasLt.so.13, version 130100"). */
const char *cublaslt_describe(const cublaslt_session *session);

/* Builds problems on this allocator so their device addresses are known. */
const problem_allocator *cublaslt_allocator(cublaslt_session *session);

/* Whether cuBLASLt can time this problem: plain GEMM (no epilogue, one
 * batch) and grouped GEMM (a loop of per-group calls), f32/f16/bf16. */
bool cublaslt_handles(const problem_spec *spec);

typedef struct cublaslt_timing {
  double median_ms;
  int runs;
  double difference; /* ||D_cublaslt - D_tessera|| / ||D_tessera|| on sets[0] */
  char algo[64];     /* what the heuristic gave (workspace, waves) */
  char error[256];   /* why it was not timed; "" when it was */
} cublaslt_timing;

/* Times cuBLASLt on `sets` (built on cublaslt_allocator, tessera's output
 * in sets[0]'s d: call after tessera's timing) with the same plan as
 * tessera, rotating the sets in the same order. First compares its product
 * with tessera's (proves the layout mapping). `queue` is finished first. */
bool cublaslt_time(cublaslt_session *session, problem *sets, int set_count, tsr_queue *queue,
                   const timing_plan *plan, cublaslt_timing *out);

/* `tessera __cublaslt-probe`: loads the library (and a session on the first
 * CUDA device when there is one) and says what it found; exit 0 only when
 * cuBLASLt could be loaded. For tests and for bench/gpu/run.sh. */
int cmd_cublaslt_probe(int argc, char **argv);

#endif /* TESSERA_TOOLS_CUBLASLT_H */
