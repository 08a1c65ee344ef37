/* SPDX-License-Identifier: Apache-2.0 */
/* GEMM launches: the parameter block from the args, tile layouts and
 * cp.async eligibility from the addresses, split-K over the queue's
 * workspace, GEMV for few rows, grouped GEMM in batches of groups. A
 * vendor's own configs (GPU_GEMM_VENDOR) go to its hooks once the block is
 * filled. Everything that depends on addresses or group sizes is decided
 * here, per call, from the args. */
#include <limits.h>
#include <stddef.h>
#include <string.h>

#include "ops.h"

/* How an operand's tiles reach shared memory: the tile layout follows its
 * unit stride; 16-byte cp.async needs that unit stride, the other strides
 * in multiples of 16 bytes and a 16-byte aligned start. */
static void operand_layout(const tsr_plugin_tensor *t, int row_dim, int k_dim, int batch_dim,
                           int esize, bool row_offsets_free, int32_t *k_major, int32_t *async) {
  int64_t row_stride = t->strides[row_dim], k_stride = t->strides[k_dim];
  *k_major = k_stride == 1 ? 1 : row_stride == 1 ? 0 : 1;
  int64_t unit = *k_major ? k_stride : row_stride;
  int64_t other = *k_major ? row_stride : k_stride;
  bool ok = unit == 1 && (other * esize) % 16 == 0 && gpu_tensor_address(t) % 16 == 0;
  if (batch_dim >= 0 && t->shape[batch_dim] > 1)
    ok = ok && (t->strides[batch_dim] * esize) % 16 == 0;
  /* Grouped GEMM starts groups at any row: only [row][k] tiles stay aligned. */
  if (!row_offsets_free && !*k_major)
    ok = false;
  *async = ok;
}

static void fill_epilogue(tsr_gpu_gemm_params *p, const tsr_plugin_tensor *bias, float alpha,
                          int32_t activation, int32_t out_dtype) {
  p->alpha = alpha;
  p->activation = activation;
  p->out_dtype = out_dtype;
  p->has_bias = bias->buffer != NULL;
  if (p->has_bias)
    p->bias = gpu_tensor_address(bias);
}

static tsr_status run_gemv(gpu_queue *queue, tsr_gpu_gemm_params *p, const tsr_gemm_args *g,
                           int64_t batch) {
  const gpu_device *device = queue->device;
  const int sms = device->props->multiprocessors;
  const int esize = gpu_element_size(g->a.dtype);
  const bool k_contiguous = g->b.strides[1] == 1;
  const int64_t m = p->m, n = p->n, k = p->k;
  bool aligned_b = gpu_tensor_address(&g->b) % 16 == 0 &&
                   (g->b.shape[0] == 1 || (g->b.strides[0] * esize) % 16 == 0);
  bool aligned_a = gpu_tensor_address(&g->a) % 16 == 0 &&
                   (g->a.shape[0] == 1 || (g->a.strides[0] * esize) % 16 == 0);
  /* GEMV kernels by B layout (0: K-contiguous, 1: N-contiguous), dtype and
   * rows a block keeps (the TSR_GEMV_*_ROWS lists). */
  const gpu_kernel *kernel =
      device->gemv[k_contiguous ? 0 : 1][gpu_dtype_slot(g->a.dtype)][m <= 1   ? 0
                                                                     : m <= 4 ? 1
                                                                              : 2];
  int64_t blocks_x, split, threads;
  if (k_contiguous) {
    p->vec_b = aligned_b && (g->b.strides[2] * esize) % 16 == 0;
    p->vec_a = aligned_a && g->a.strides[2] == 1 && (g->a.strides[1] * esize) % 16 == 0;
    threads = 256;
    blocks_x = gpu_ceil_div(n, 8);
    split = gpu_ceil_div((int64_t)sms * 32, n);
    int64_t most = k / 512 > 1 ? k / 512 : 1;
    split = split < 1 ? 1 : split > most ? most : split;
  } else {
    p->vec_b = aligned_b && (g->b.strides[1] * esize) % 16 == 0;
    threads = 128;
    blocks_x = gpu_ceil_div(gpu_ceil_div(n, 8), threads);
    split = gpu_ceil_div((int64_t)sms * 4, blocks_x);
    int64_t most = k / 64 > 1 ? k / 64 : 1;
    split = split < 1 ? 1 : split > most ? most : split;
  }
  int64_t per_split = gpu_ceil_div(gpu_ceil_div(k, split), 8) * 8;
  if (per_split < 8)
    per_split = 8;
  split = k > 0 ? gpu_ceil_div(k, per_split) : 1;
  p->k_per_split = per_split;
  p->split_k = (int32_t)split;

  for (int64_t b0 = 0; b0 < batch; b0 += GPU_MAX_GRID_YZ) {
    int64_t chunk = batch - b0 < GPU_MAX_GRID_YZ ? batch - b0 : GPU_MAX_GRID_YZ;
    p->batch_offset = (int32_t)b0;
    p->batch_count = (int32_t)chunk;
    if (split > 1) {
      tsr_status status = gpu_ensure_workspace(queue, (size_t)split * (size_t)chunk * (size_t)m *
                                                          (size_t)n * sizeof(float));
      if (status != TSR_OK)
        return status;
      p->workspace = gpu_workspace_data(queue);
    }
    tsr_status status = gpu_launch(queue, kernel, (uint64_t)blocks_x, (unsigned)split,
                                   (unsigned)chunk, (unsigned)threads, 0, p);
    if (status != TSR_OK)
      return status;
    if (split > 1) {
      int64_t total = m * n * chunk;
      int64_t blocks = gpu_ceil_div(total, 256);
      if (blocks > (int64_t)sms * 16)
        blocks = (int64_t)sms * 16;
      status = gpu_launch(queue, device->splitk, (uint64_t)blocks, 1, 1, 256, 0, p);
      if (status != TSR_OK)
        return status;
    }
  }
  return TSR_OK;
}

/* Split-K across the blocks of each tile (the last block of a tile sums
 * the slices in order, kernels/gemm.cu splitk_gather): K in steps of
 * `step` elements, split until tiles x batch x split reaches `slots`
 * blocks, each slice keeping at least `least` steps. Sets p->split_k and
 * p->k_per_split (all of K, rounded up to a step, for one slice); returns the batch entries one
 * launch may take (one counter per tile and entry). */
static int64_t plan_split_k(tsr_gpu_gemm_params *p, int64_t tiles, int64_t batch, int64_t slots,
                            int64_t step, int64_t least) {
  const int64_t steps = gpu_ceil_div(p->k, step);
  int64_t split = tiles * batch < slots ? slots / (tiles * batch) : 1;
  if (split > steps / least)
    split = steps / least;
  int64_t most_batch = GPU_WORKSPACE_COUNTERS / tiles;
  if (split <= 1 || most_batch < 1) {
    p->split_k = 1;
    p->k_per_split = steps * step; /* one slice: all of K */
    return GPU_MAX_GRID_YZ;
  }
  const int64_t per = gpu_ceil_div(steps, split);
  p->split_k = (int32_t)gpu_ceil_div(steps, per);
  p->k_per_split = per * step;
  return most_batch < GPU_MAX_GRID_YZ ? most_batch : GPU_MAX_GRID_YZ;
}

_Static_assert(sizeof(tsr_gpu_gemm_params) - offsetof(tsr_gpu_gemm_params, group_index) -
                       TSR_GPU_MAX_GROUPS * sizeof(int32_t) <
                   8,
               "the group arrays end the GEMM block: gpu_run_gemm clears what is before them");

tsr_status gpu_run_gemm(gpu_queue *queue, const tsr_gemm_args *g,
                        const gpu_gemm_prepared *prepared) {
  const gpu_gemm_config *c = prepared->config;
  /* The queue's block: its group arrays stay zero (only grouped GEMM, with
   * a block of its own, fills them), so only the fields before them are
   * cleared per call. */
  tsr_gpu_gemm_params *const p = &queue->gemm_params;
  memset(p, 0, offsetof(tsr_gpu_gemm_params, group_row_start));
  const int esize = gpu_element_size(g->a.dtype);
  const int64_t batch = g->d.shape[0];
  p->a = gpu_tensor_address(&g->a);
  p->b = gpu_tensor_address(&g->b);
  p->d = gpu_tensor_address(&g->d);
  p->m = g->d.shape[1];
  p->n = g->d.shape[2];
  p->k = g->a.shape[2];
  p->a_batch = g->a.strides[0];
  p->a_m = g->a.strides[1];
  p->a_k = g->a.strides[2];
  p->b_batch = g->b.strides[0];
  p->b_k = g->b.strides[1];
  p->b_n = g->b.strides[2];
  p->d_batch = g->d.strides[0];
  p->d_m = g->d.strides[1];
  p->d_n = g->d.strides[2];
  p->in_dtype = g->a.dtype;
  fill_epilogue(p, &g->bias, g->alpha, g->activation, g->d.dtype);
  p->bias_n = g->bias.buffer ? g->bias.strides[0] : 0;
  if (g->c.buffer && g->beta != 0.0f) {
    p->has_c = 1;
    p->c = gpu_tensor_address(&g->c);
    p->beta = g->beta;
    p->c_batch = g->c.strides[0];
    p->c_m = g->c.strides[1];
    p->c_n = g->c.strides[2];
  }
  if (p->m == 0 || p->n == 0 || batch == 0)
    return TSR_OK;
  if (c->kind == GPU_GEMM_GEMV)
    return run_gemv(queue, p, g, batch);
  if (c->kind == GPU_GEMM_VENDOR)
    return queue->device->plugin->catalog.vendor->gemm_run(queue, prepared, g, p, batch);

  int bm = c->bm, bn = c->bn, threads = c->warps_m * c->warps_n * 32, smem = c->smem;
  if (c->kind == GPU_GEMM_SIMT) {
    threads = 256;
    smem = 0;
  } else if (c->kind == GPU_GEMM_STREAM) {
    p->b_k_major = g->b.strides[1] == 1; /* the configs run only 16-byte rows */
  } else {
    operand_layout(&g->a, 1, 2, 0, esize, true, &p->a_k_major, &p->a_async);
    operand_layout(&g->b, 2, 1, 0, esize, true, &p->b_k_major, &p->b_async);
  }
  p->tiles_m = (int32_t)gpu_ceil_div(p->m, bm);
  p->tiles_n = (int32_t)gpu_ceil_div(p->n, bn);
  const gpu_kernel *kernel = prepared->kernel;
  const int sms = queue->device->props->multiprocessors;
  const int64_t tiles = (int64_t)p->tiles_m * p->tiles_n;
  int64_t most_batch = GPU_MAX_GRID_YZ;
  p->split_k = 1;
  if (c->kind == GPU_GEMM_MMA && c->bm == 16) {
    /* Decode shapes: split K over the blocks of each tile so that there are
     * about as many blocks as SMs: fewer, longer-lived blocks than one per
     * block slot (H100, queued: 16x4096x4096 21.7 -> 20.8 us, 1x8192x8192
     * 57.0 -> 53.8 us; half or 1.5 blocks per SM were slower;
     * docs/PERFORMANCE.md). */
    most_batch = plan_split_k(p, tiles, batch, sms, c->bk, 1);
  } else if (c->kind == GPU_GEMM_STREAM) {
    /* About one wave of resident blocks, each warp keeping a chunk of 32 of
     * every slice. */
    const int per_sm = kernel && kernel->blocks_per_sm > 0 ? kernel->blocks_per_sm : 1;
    most_batch = plan_split_k(p, tiles, batch, (int64_t)sms * per_sm, c->bk, c->warps_n);
  }
  const int64_t split = p->split_k;
  for (int64_t b0 = 0; b0 < batch; b0 += most_batch) {
    p->batch_offset = (int32_t)b0;
    int64_t chunk = batch - b0 < most_batch ? batch - b0 : most_batch;
    if (split > 1) {
      tsr_status status =
          gpu_ensure_workspace(queue, (size_t)(split * tiles * chunk) * (size_t)(bm * bn) * 4);
      if (status != TSR_OK)
        return status;
      p->workspace = gpu_workspace_data(queue);
      p->counters = queue->workspace;
    }
    tsr_status status = gpu_launch(queue, kernel, (uint64_t)tiles, (unsigned)chunk, (unsigned)split,
                                   (unsigned)threads, (unsigned)smem, p);
    if (status != TSR_OK)
      return status;
  }
  return TSR_OK;
}

tsr_status gpu_grouped_walk(gpu_queue *queue, const gpu_gemm_prepared *prepared,
                            const tsr_grouped_gemm_args *g, tsr_gpu_gemm_params *p, int bm,
                            gpu_group_launch_fn launch, void *user) {
  int64_t row = 0, tiles = 0;
  int used = 0;
  for (int64_t group = 0; group <= g->group_count; group++) {
    bool last = group == g->group_count;
    int64_t rows = last ? 0 : g->group_sizes[group];
    if (!last && rows > 0) {
      p->group_index[used] = (int32_t)group;
      p->group_row_start[used] = (int32_t)row;
      p->group_tile_start[used] = (int32_t)tiles;
      tiles += gpu_ceil_div(rows, bm) * p->tiles_n;
      row += rows;
      used++;
    }
    if (used > 0 && (last || used == TSR_GPU_MAX_GROUPS)) {
      p->group_row_start[used] = (int32_t)row;
      p->group_tile_start[used] = (int32_t)tiles;
      p->group_count = used;
      tsr_status status = launch(queue, prepared, p, tiles, user);
      if (status != TSR_OK)
        return status;
      used = 0;
      tiles = 0;
    }
  }
  return TSR_OK;
}

typedef struct block_shape {
  int threads, smem;
} block_shape;

static tsr_status launch_groups(gpu_queue *queue, const gpu_gemm_prepared *prepared,
                                tsr_gpu_gemm_params *p, int64_t tiles, void *user) {
  const block_shape *shape = user;
  return gpu_launch(queue, prepared->kernel, (uint64_t)tiles, 1, 1, (unsigned)shape->threads,
                    (unsigned)shape->smem, p);
}

tsr_status gpu_run_grouped_gemm(gpu_queue *queue, const tsr_grouped_gemm_args *g,
                                const gpu_gemm_prepared *prepared) {
  const gpu_gemm_config *c = prepared->config;
  tsr_gpu_gemm_params p;
  memset(&p, 0, sizeof p);
  const int esize = gpu_element_size(g->a.dtype);
  p.a = gpu_tensor_address(&g->a);
  p.b = gpu_tensor_address(&g->b);
  p.d = gpu_tensor_address(&g->d);
  p.n = g->d.shape[1];
  p.k = g->a.shape[1];
  p.a_m = g->a.strides[0];
  p.a_k = g->a.strides[1];
  p.b_batch = g->b.strides[0];
  p.b_k = g->b.strides[1];
  p.b_n = g->b.strides[2];
  p.d_m = g->d.strides[0];
  p.d_n = g->d.strides[1];
  p.in_dtype = g->a.dtype;
  fill_epilogue(&p, &g->bias, g->alpha, g->activation, g->d.dtype);
  if (g->bias.buffer) {
    p.bias_batch = g->bias.strides[0];
    p.bias_n = g->bias.strides[1];
  }
  if (p.n == 0)
    return TSR_OK;
  p.tiles_n = (int32_t)gpu_ceil_div(p.n, c->bn);
  if (c->kind == GPU_GEMM_VENDOR)
    return queue->device->plugin->catalog.vendor->grouped_run(queue, prepared, g, &p);
  block_shape shape = {c->warps_m * c->warps_n * 32, c->smem};
  if (c->kind == GPU_GEMM_SIMT) {
    shape.threads = 256;
    shape.smem = 0;
  } else {
    /* a: rows of each group start anywhere; b: a [K, N] matrix per group. */
    tsr_plugin_tensor a3 = g->a;
    a3.rank = 3;
    a3.shape[2] = g->a.shape[1];
    a3.strides[2] = g->a.strides[1];
    a3.shape[1] = g->a.shape[0];
    a3.strides[1] = g->a.strides[0];
    a3.shape[0] = 1;
    a3.strides[0] = 0;
    operand_layout(&a3, 1, 2, 0, esize, false, &p.a_k_major, &p.a_async);
    operand_layout(&g->b, 2, 1, 0, esize, true, &p.b_k_major, &p.b_async);
  }
  return gpu_grouped_walk(queue, prepared, g, &p, c->bm, launch_groups, &shape);
}
