/* SPDX-License-Identifier: Apache-2.0 */
/* CLBlast as bench's baseline for GEMM rows on OpenCL GPUs, what cublaslt.h
 * is for CUDA devices and hipblaslt.h for HIP ones. The OpenCL ICD loader
 * and CLBlast are dlopen'ed (no link-time dependency; the few CLBlast
 * entry points and enums used are declared in clblast.c with the values of
 * its public clblast_c.h). OpenCL memory of one context cannot be used in
 * another, so the session has its own context and in-order profiling queue
 * on the same cl_device_id and runs on copies of tessera's buffers (the
 * same bytes at the same offsets, read back through tsr_buffer_read),
 * timed with OpenCL event profiling after tessera's queue has finished.
 * f32 rows run CLBlastSgemm (f32 compute also for tf32 rows), f16 rows
 * CLBlastHgemm (which accumulates in f16, and needs cl_khr_fp16); bf16 has
 * no CLBlast routine. Everything degrades to "no baseline" with a reason
 * where the loader, CLBlast or the device is missing. */
#ifndef TESSERA_TOOLS_CLBLAST_H
#define TESSERA_TOOLS_CLBLAST_H

#include <stdbool.h>
#include <stddef.h>

#include "problem.h"
#include "timing.h"

typedef struct clblast_session clblast_session;

/* Opens a session for a tessera OpenCL device: the ICD loader (the library
 * TESSERA_OPENCL_LIBRARY names when set, else libOpenCL.so.1, .so), CLBlast
 * (the file TESSERA_CLBLAST names when set, else libclblast.so.1, .so), the
 * same cl_device_id (matched by UUID, else PCI address, from the device's
 * physical_id and details, else by name), a context and a queue. NULL with
 * the reason in `why` when any of it is missing. */
clblast_session *clblast_open(const tsr_device_info *info, char *why, size_t why_capacity);
void clblast_close(clblast_session *session);
/* What was loaded ("CLBlast 1.5.3 (libclblast.so.1), libOpenCL.so.1,
 * NVIDIA CUDA: NVIDIA H100 80GB HBM3 (OpenCL 3.0 CUDA, driver 580.95),
 * matched by UUID"). */
const char *clblast_describe(const clblast_session *session);

/* Whether the row gets a CLBlast column: the GEMMs cuBLASLt times (plain
 * GEMM, grouped GEMM as a loop of per-group calls). bf16 rows and f16 rows
 * on devices without cl_khr_fp16 are among them, so that clblast_time says
 * why they have no baseline. */
bool clblast_handles(const problem_spec *spec);

typedef struct clblast_timing {
  double median_ms;
  int runs;
  double difference; /* ||D_clblast - D_tessera|| / ||D_tessera|| on sets[0] */
  char algo[96];     /* what ran (calls, routine, temporary buffer) */
  char error[256];   /* why it was not timed; "" when it was */
} clblast_timing;

/* Times CLBlast on `sets` (tessera's output in sets[0]'s d: call after
 * tessera's timing) with the same plan as tessera, rotating the sets in the
 * same order. First compares its product with tessera's (proves the layout
 * mapping). `queue` is finished first. */
bool clblast_time(clblast_session *session, problem *sets, int set_count, tsr_queue *queue,
                  const timing_plan *plan, clblast_timing *out);

#endif /* TESSERA_TOOLS_CLBLAST_H */
