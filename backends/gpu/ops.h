/* SPDX-License-Identifier: Apache-2.0 */
/* What the op launchers share (ops.c, ops_gemm.c, and a vendor's own
 * launches such as backends/cuda/ops_sm90.c): launching a resolved kernel,
 * the queue's workspace, and the GEMM steps a vendor kernel reuses. Not
 * installed. */
#ifndef TESSERA_GPU_OPS_H
#define TESSERA_GPU_OPS_H

#include "gpu.h"

enum { GPU_MAX_GRID_YZ = 65535 };

/* The queue's scratch starts with the split-K tile counters (zeroed when
 * allocated; each launch leaves them zero), then data: split-K partials or
 * packed GEMM operands. */
enum {
  GPU_WORKSPACE_COUNTER_BYTES = 64 * 1024,
  GPU_WORKSPACE_COUNTERS = GPU_WORKSPACE_COUNTER_BYTES / 4
};

static inline int gpu_element_size(int32_t dtype) {
  return dtype == TSR_DTYPE_F16 || dtype == TSR_DTYPE_BF16 ? 2 : 4;
}

static inline int64_t gpu_ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

static inline gpu_address gpu_workspace_data(const gpu_queue *queue) {
  return queue->workspace + GPU_WORKSPACE_COUNTER_BYTES;
}

/* Queues `kernel` on the queue's stream with one parameter block; a grid
 * with a zero extent queues nothing. */
tsr_status gpu_launch(gpu_queue *queue, const gpu_kernel *kernel, uint64_t grid_x, unsigned grid_y,
                      unsigned grid_z, unsigned threads, unsigned smem, void *params);

/* The queue's scratch, at least `bytes` of data after the counters. Growing
 * it waits for the stream, since queued kernels may still read the old one. */
tsr_status gpu_ensure_workspace(gpu_queue *queue, size_t bytes);

/* Grouped GEMM: walks the groups (sizes from the call), filling p's group
 * arrays for up to TSR_GPU_MAX_GROUPS non-empty groups of bm-row tiles at a
 * time, and calls `launch` for each such batch with its tile count. */
typedef tsr_status (*gpu_group_launch_fn)(gpu_queue *queue, const gpu_gemm_prepared *prepared,
                                          tsr_gpu_gemm_params *p, int64_t tiles, void *user);
tsr_status gpu_grouped_walk(gpu_queue *queue, const gpu_gemm_prepared *prepared,
                            const tsr_grouped_gemm_args *g, tsr_gpu_gemm_params *p, int bm,
                            gpu_group_launch_fn launch, void *user);

/* The op families (ops_gemm.c, ops.c). */
tsr_status gpu_run_gemm(gpu_queue *queue, const tsr_gemm_args *g, const gpu_gemm_prepared *c);
tsr_status gpu_run_grouped_gemm(gpu_queue *queue, const tsr_grouped_gemm_args *g,
                                const gpu_gemm_prepared *c);

#endif /* TESSERA_GPU_OPS_H */
