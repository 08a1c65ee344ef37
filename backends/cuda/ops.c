/* SPDX-License-Identifier: Apache-2.0 */
/* Op launchers: turn a validated tsr_*_args and the chosen config into the
 * kernel parameter block (kernels/kernel_params.h), pick the grid, and queue
 * the kernel(s) on the queue's stream. */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "configs.h"
#include "cuda_internal.h"
#include "kernels/kernel_list.h"
#include "kernels/kernel_params.h"

enum { MAX_GRID_YZ = 65535 };

static int element_size(int32_t dtype) {
  return dtype == TSR_DTYPE_F16 || dtype == TSR_DTYPE_BF16 ? 2 : 4;
}

static const char *dtype_tag(int32_t dtype) {
  return dtype == TSR_DTYPE_F32 ? "f32" : dtype == TSR_DTYPE_F16 ? "f16" : "bf16";
}

static int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

static tsr_status launch(cuda_queue *queue, int kernel, uint64_t grid_x, unsigned grid_y,
                         unsigned grid_z, unsigned threads, unsigned smem, void *params) {
  cuda_device *device = queue->device;
  const cuda_plugin *plugin = device->plugin;
  const cuda_kernel_info *info = cuda_kernel_at(kernel);
  if (!info || !device->functions[kernel]) {
    cuda_set_error(plugin, "cuda: kernel %d is not in the loaded module", kernel);
    return TSR_ERROR_BACKEND;
  }
  if (grid_x == 0 || grid_y == 0 || grid_z == 0)
    return TSR_OK;
  if (grid_x > (uint64_t)INT_MAX) {
    cuda_set_error(plugin, "cuda: %s would need %llu blocks, more than a grid holds", info->name,
                   (unsigned long long)grid_x);
    return TSR_ERROR_UNSUPPORTED;
  }
  void *arguments[] = {params};
  CUresult result =
      plugin->driver.cuLaunchKernel(device->functions[kernel], (unsigned)grid_x, grid_y, grid_z,
                                    threads, 1, 1, smem, queue->stream, arguments, NULL);
  if (result != CUDA_SUCCESS) {
    char what[160];
    snprintf(what, sizeof what,
             "launching %s (%llu x %u x %u blocks of %u threads, %u bytes shared)", info->name,
             (unsigned long long)grid_x, grid_y, grid_z, threads, smem);
    return cuda_fail(plugin, result, what);
  }
  return TSR_OK;
}

static tsr_status launch_named(cuda_queue *queue, const char *name, uint64_t grid_x,
                               unsigned grid_y, unsigned grid_z, unsigned threads, unsigned smem,
                               void *params) {
  int kernel = cuda_kernel_index(name);
  if (kernel < 0) {
    cuda_set_error(queue->device->plugin, "cuda: no kernel named %s in this build", name);
    return TSR_ERROR_BACKEND;
  }
  return launch(queue, kernel, grid_x, grid_y, grid_z, threads, smem, params);
}

/* The queue's scratch starts with the split-K tile counters (zeroed when
 * allocated; each launch leaves them zero), then data: split-K partials or
 * packed GEMM operands. */
enum { WORKSPACE_COUNTER_BYTES = 64 * 1024, WORKSPACE_COUNTERS = WORKSPACE_COUNTER_BYTES / 4 };

static CUdeviceptr workspace_data(const cuda_queue *queue) {
  return queue->workspace + WORKSPACE_COUNTER_BYTES;
}

/* The queue's scratch, at least `bytes` of data after the counters. Growing
 * it waits for the stream, since queued kernels may still read the old one. */
static tsr_status ensure_workspace(cuda_queue *queue, size_t bytes) {
  bytes += WORKSPACE_COUNTER_BYTES;
  if (queue->workspace_bytes >= bytes)
    return TSR_OK;
  const cuda_driver *driver = &queue->device->plugin->driver;
  CUresult result = driver->cuStreamSynchronize(queue->stream);
  if (result != CUDA_SUCCESS)
    return cuda_fail(queue->device->plugin, result, "waiting for the queue to grow its workspace");
  if (queue->workspace)
    driver->cuMemFree(queue->workspace);
  queue->workspace = 0;
  queue->workspace_bytes = 0;
  size_t rounded = (bytes + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
  result = driver->cuMemAlloc(&queue->workspace, rounded);
  if (result != CUDA_SUCCESS) {
    queue->workspace = 0;
    return cuda_fail(queue->device->plugin, result, "allocating the split-K workspace");
  }
  result = driver->cuMemsetD32Async(queue->workspace, 0, WORKSPACE_COUNTERS, queue->stream);
  if (result != CUDA_SUCCESS)
    return cuda_fail(queue->device->plugin, result, "clearing the split-K counters");
  queue->workspace_bytes = rounded;
  return TSR_OK;
}

/* ------------------------------------------------------------------------ */
/* GEMM                                                                      */
/* ------------------------------------------------------------------------ */

/* How an operand's tiles reach shared memory: the tile layout follows its
 * unit stride; 16-byte cp.async needs that unit stride, the other strides
 * in multiples of 16 bytes and a 16-byte aligned start. */
static void operand_layout(const tsr_plugin_tensor *t, int row_dim, int k_dim, int batch_dim,
                           int esize, bool row_offsets_free, int32_t *k_major, int32_t *async) {
  int64_t row_stride = t->strides[row_dim], k_stride = t->strides[k_dim];
  *k_major = k_stride == 1 ? 1 : row_stride == 1 ? 0 : 1;
  int64_t unit = *k_major ? k_stride : row_stride;
  int64_t other = *k_major ? row_stride : k_stride;
  bool ok = unit == 1 && (other * esize) % 16 == 0 && cuda_tensor_address(t) % 16 == 0;
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
    p->bias = cuda_tensor_address(bias);
}

/* GEMV kernels by B layout (0: K-contiguous, 1: N-contiguous), dtype (f32,
 * f16, bf16) and rows a block keeps (the TSR_GEMV_*_ROWS lists), resolved
 * once rather than formatted and looked up in every call. */
static int gemv_kernels[2][3][3];
static pthread_once_t gemv_kernels_once = PTHREAD_ONCE_INIT;

static void build_gemv_kernels(void) {
  static const char *const tags[3] = {"f32", "f16", "bf16"};
  static const int rows[2][3] = {{1, 4, 16}, {1, 4, 8}};
  for (int layout = 0; layout < 2; layout++)
    for (int d = 0; d < 3; d++)
      for (int r = 0; r < 3; r++) {
        char name[64];
        snprintf(name, sizeof name, "tsr_gemv_%s_%s_r%d", layout ? "n" : "k", tags[d],
                 rows[layout][r]);
        gemv_kernels[layout][d][r] = cuda_kernel_index(name);
      }
}

static int gemv_kernel(bool k_contiguous, int32_t dtype, int64_t m) {
  pthread_once(&gemv_kernels_once, build_gemv_kernels);
  int d = dtype == TSR_DTYPE_F32 ? 0 : dtype == TSR_DTYPE_F16 ? 1 : 2;
  return gemv_kernels[k_contiguous ? 0 : 1][d][m <= 1 ? 0 : m <= 4 ? 1 : 2];
}

static tsr_status run_gemv(cuda_queue *queue, tsr_gpu_gemm_params *p, const tsr_gemm_args *g,
                           int64_t batch) {
  const int sms = queue->device->props->multiprocessors;
  const int esize = element_size(g->a.dtype);
  const bool k_contiguous = g->b.strides[1] == 1;
  const int64_t m = p->m, n = p->n, k = p->k;
  bool aligned_b = cuda_tensor_address(&g->b) % 16 == 0 &&
                   (g->b.shape[0] == 1 || (g->b.strides[0] * esize) % 16 == 0);
  bool aligned_a = cuda_tensor_address(&g->a) % 16 == 0 &&
                   (g->a.shape[0] == 1 || (g->a.strides[0] * esize) % 16 == 0);
  const int kernel = gemv_kernel(k_contiguous, g->a.dtype, m);
  int64_t blocks_x, split, threads;
  if (k_contiguous) {
    p->vec_b = aligned_b && (g->b.strides[2] * esize) % 16 == 0;
    p->vec_a = aligned_a && g->a.strides[2] == 1 && (g->a.strides[1] * esize) % 16 == 0;
    threads = 256;
    blocks_x = ceil_div(n, 8);
    split = ceil_div((int64_t)sms * 32, n);
    int64_t most = k / 512 > 1 ? k / 512 : 1;
    split = split < 1 ? 1 : split > most ? most : split;
  } else {
    p->vec_b = aligned_b && (g->b.strides[1] * esize) % 16 == 0;
    threads = 128;
    blocks_x = ceil_div(ceil_div(n, 8), threads);
    split = ceil_div((int64_t)sms * 4, blocks_x);
    int64_t most = k / 64 > 1 ? k / 64 : 1;
    split = split < 1 ? 1 : split > most ? most : split;
  }
  int64_t per_split = ceil_div(ceil_div(k, split), 8) * 8;
  if (per_split < 8)
    per_split = 8;
  split = k > 0 ? ceil_div(k, per_split) : 1;
  p->k_per_split = per_split;
  p->split_k = (int32_t)split;

  for (int64_t b0 = 0; b0 < batch; b0 += MAX_GRID_YZ) {
    int64_t chunk = batch - b0 < MAX_GRID_YZ ? batch - b0 : MAX_GRID_YZ;
    p->batch_offset = (int32_t)b0;
    p->batch_count = (int32_t)chunk;
    if (split > 1) {
      tsr_status status = ensure_workspace(queue, (size_t)split * (size_t)chunk * (size_t)m *
                                                      (size_t)n * sizeof(float));
      if (status != TSR_OK)
        return status;
      p->workspace = workspace_data(queue);
    }
    tsr_status status = launch(queue, kernel, (uint64_t)blocks_x, (unsigned)split, (unsigned)chunk,
                               (unsigned)threads, 0, p);
    if (status != TSR_OK)
      return status;
    if (split > 1) {
      int64_t total = m * n * chunk;
      int64_t blocks = ceil_div(total, 256);
      if (blocks > (int64_t)sms * 16)
        blocks = (int64_t)sms * 16;
      status = launch_named(queue, TSR_GEMM_SPLITK_NAME, (uint64_t)blocks, 1, 1, 256, 0, p);
      if (status != TSR_OK)
        return status;
    }
  }
  return TSR_OK;
}

/* Everything a tensor map is encoded from (zero-padded, compared bytewise). */
typedef struct wgmma_map_key {
  uint64_t address;
  unsigned long long dims[3], strides[2];
  int32_t dtype;
  uint32_t box_rows;
} wgmma_map_key;

typedef struct wgmma_map_entry {
  tsr_gpu_tensor_map map;
  wgmma_map_key key;
  bool valid;
} wgmma_map_entry;

enum { CU_TENSOR_MAP_DATA_TYPE_FLOAT32_ = 7 }; /* CUtensorMapDataType's FLOAT32 */

/* The TMA tensor map of a wgmma operand at `address`: boxes of 128 bytes
 * along its unit stride (the swizzle span: 64 16-bit or 32 f32 elements) by
 * `tile_rows` rows when that stride runs along K, else by 64 k (the kernel
 * loads 64-wide chunks). */
static tsr_status encode_wgmma_map(cuda_queue *queue, tsr_gpu_tensor_map *map, uint64_t address,
                                   int32_t dtype, const cuda_tma_operand *operand,
                                   unsigned tile_rows) {
  const cuda_plugin *plugin = queue->device->plugin;
  unsigned long long dims[3], strides[2];
  for (int i = 0; i < 3; i++)
    dims[i] = operand->dims[i];
  strides[0] = operand->strides[0];
  strides[1] = operand->strides[1];
  unsigned inner = dtype == TSR_DTYPE_F32 ? 32 : 64;
  unsigned box[3] = {inner, operand->k_major ? tile_rows : 64, 1}, element_strides[3] = {1, 1, 1};
  /* Encoding is host work inside every call: repeated calls on the same
   * operands (layers, benchmarks) reuse the last few maps of this thread. */
  wgmma_map_key key;
  memset(&key, 0, sizeof key);
  key.address = address;
  key.dtype = dtype;
  key.box_rows = box[1];
  memcpy(key.dims, dims, sizeof dims);
  memcpy(key.strides, strides, sizeof strides);
  static _Thread_local wgmma_map_entry cache[8];
  static _Thread_local unsigned next_slot;
  const wgmma_map_entry *hit = NULL;
  for (int i = 0; i < 8 && !hit; i++)
    if (cache[i].valid && memcmp(&cache[i].key, &key, sizeof key) == 0)
      hit = &cache[i];
  if (hit) {
    *map = hit->map;
  } else {
    CUresult result = plugin->driver.cuTensorMapEncodeTiled(
        map,
        dtype == TSR_DTYPE_BF16  ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
        : dtype == TSR_DTYPE_F32 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32_
                                 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        3, (void *)(uintptr_t)key.address, dims, strides, box, element_strides,
        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (result != CUDA_SUCCESS)
      return cuda_fail(plugin, result, "encoding a TMA tensor map for a wgmma GEMM operand");
    wgmma_map_entry *slot = &cache[next_slot++ % 8];
    slot->key = key;
    slot->map = *map;
    slot->valid = true;
  }
  return TSR_OK;
}

static tsr_status encode_wgmma_operand(cuda_queue *queue, tsr_gpu_tensor_map *map,
                                       const tsr_plugin_tensor *t, int row_dim, int k_dim,
                                       int batch_dim, unsigned tile_rows, int32_t *k_major,
                                       int32_t *batched) {
  cuda_tma_operand operand;
  if (!cuda_tma_operand_of(t, row_dim, k_dim, batch_dim, &operand)) {
    cuda_set_error(queue->device->plugin, "cuda: a wgmma GEMM operand is not TMA-addressable");
    return TSR_ERROR_UNSUPPORTED;
  }
  *k_major = operand.k_major;
  *batched = operand.batched;
  return encode_wgmma_map(queue, map, cuda_tensor_address(t), t->dtype, &operand, tile_rows);
}

/* A wgmma operand the kernel cannot load as it is: its K-major copy in the
 * workspace at `dst`, rows padded to 16 bytes (tf32: rounded to nearest). */
typedef struct packed_operand {
  tsr_gpu_gemm_pack_params pack;
  cuda_tma_operand tma;
} packed_operand;

static void plan_pack(const tsr_plugin_tensor *t, int row_dim, int k_dim, packed_operand *out) {
  memset(out, 0, sizeof *out);
  const int esize = element_size(t->dtype);
  tsr_gpu_gemm_pack_params *p = &out->pack;
  p->src = cuda_tensor_address(t);
  p->rows = t->shape[row_dim];
  p->depth = t->shape[k_dim];
  p->batch = t->shape[0] > 1 && t->strides[0] != 0 ? t->shape[0] : 1;
  p->src_batch = t->strides[0];
  p->src_row = t->strides[row_dim];
  p->src_k = t->strides[k_dim];
  p->dst_pitch = ceil_div(p->depth, 16 / esize) * (16 / esize);
  p->esize = esize;
  p->round_tf32 = t->dtype == TSR_DTYPE_F32;
  out->tma.k_major = true;
  out->tma.batched = p->batch > 1;
  out->tma.dims[0] = (uint64_t)p->depth;
  out->tma.dims[1] = (uint64_t)p->rows;
  out->tma.dims[2] = (uint64_t)p->batch;
  out->tma.strides[0] = (uint64_t)(p->dst_pitch * esize);
  out->tma.strides[1] = (uint64_t)(p->dst_pitch * esize * p->rows);
}

static size_t packed_bytes(const packed_operand *o) {
  size_t bytes = (size_t)o->pack.batch * (size_t)o->pack.rows * (size_t)o->pack.dst_pitch *
                 (size_t)o->pack.esize;
  return (bytes + 255) & ~(size_t)255;
}

static tsr_status launch_pack(cuda_queue *queue, packed_operand *o, uint64_t dst) {
  o->pack.dst = dst;
  int64_t grid_y = ceil_div(o->pack.rows, 32), grid_z = o->pack.batch;
  return launch_named(queue, o->pack.esize == 4 ? TSR_GEMM_PACK_NAME(32) : TSR_GEMM_PACK_NAME(16),
                      (uint64_t)ceil_div(o->pack.depth, 32),
                      (unsigned)(grid_y < MAX_GRID_YZ ? grid_y : MAX_GRID_YZ),
                      (unsigned)(grid_z < MAX_GRID_YZ ? grid_z : MAX_GRID_YZ), 256, 0, &o->pack);
}

/* A persistent wgmma launch: a block per SM slot, or fewer when there are
 * fewer tiles; each block walks its tiles. */
static tsr_status launch_wgmma(cuda_queue *queue, const cuda_gemm_config *c, int32_t dtype,
                               tsr_gpu_gemm_sm90_params *params, int64_t tiles) {
  int kernel = cuda_gemm_kernel(c, dtype);
  int per_sm = kernel >= 0 ? queue->device->blocks_per_sm[kernel] : 1;
  int64_t slots = (int64_t)queue->device->props->multiprocessors * (per_sm > 0 ? per_sm : 1);
  int64_t grid = tiles < slots ? tiles : slots;
  return launch(queue, kernel, (uint64_t)grid, 1, 1, 384, (unsigned)c->smem, params);
}

static tsr_status run_gemm_wgmma(cuda_queue *queue, tsr_gpu_gemm_params *p, const tsr_gemm_args *g,
                                 const cuda_gemm_config *c, int64_t batch) {
  tsr_gpu_gemm_sm90_params params;
  memset(&params, 0, sizeof params);
  bool pack_a, pack_b;
  cuda_wgmma_packs(g, &pack_a, &pack_b);
  packed_operand packed_a, packed_b;
  tsr_status status = TSR_OK;
  if (pack_a || pack_b) {
    if (pack_a)
      plan_pack(&g->a, 1, 2, &packed_a);
    if (pack_b)
      plan_pack(&g->b, 2, 1, &packed_b);
    size_t bytes_a = pack_a ? packed_bytes(&packed_a) : 0;
    status = ensure_workspace(queue, bytes_a + (pack_b ? packed_bytes(&packed_b) : 0));
    if (status == TSR_OK && pack_a)
      status = launch_pack(queue, &packed_a, workspace_data(queue));
    if (status == TSR_OK && pack_b)
      status = launch_pack(queue, &packed_b, workspace_data(queue) + bytes_a);
    if (status != TSR_OK)
      return status;
  }
  if (pack_a) {
    p->a_k_major = 1;
    params.a_batched = packed_a.tma.batched;
    status =
        encode_wgmma_map(queue, &params.map_a, packed_a.pack.dst, g->a.dtype, &packed_a.tma, 128);
  } else {
    status = encode_wgmma_operand(queue, &params.map_a, &g->a, 1, 2, 0, 128, &p->a_k_major,
                                  &params.a_batched);
  }
  if (status != TSR_OK)
    return status;
  if (pack_b) {
    p->b_k_major = 1;
    params.b_batched = packed_b.tma.batched;
    status = encode_wgmma_map(queue, &params.map_b, packed_b.pack.dst, g->b.dtype, &packed_b.tma,
                              (unsigned)c->bn);
  } else {
    status = encode_wgmma_operand(queue, &params.map_b, &g->b, 2, 1, 0, (unsigned)c->bn,
                                  &p->b_k_major, &params.b_batched);
  }
  if (status != TSR_OK)
    return status;
  p->tiles_m = (int32_t)ceil_div(p->m, c->bm);
  p->tiles_n = (int32_t)ceil_div(p->n, c->bn);
  /* Batches per launch: the tile index stays within int32 per launch. */
  int64_t per_batch = (int64_t)p->tiles_m * p->tiles_n;
  int64_t most = INT_MAX / per_batch > 0 ? INT_MAX / per_batch : 1;
  for (int64_t b0 = 0; b0 < batch; b0 += most) {
    int64_t chunk = batch - b0 < most ? batch - b0 : most;
    p->batch_offset = (int32_t)b0;
    p->batch_count = (int32_t)chunk;
    params.gemm = *p;
    status = launch_wgmma(queue, c, g->a.dtype, &params, per_batch * chunk);
    if (status != TSR_OK)
      return status;
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
  const int64_t steps = ceil_div(p->k, step);
  int64_t split = tiles * batch < slots ? slots / (tiles * batch) : 1;
  if (split > steps / least)
    split = steps / least;
  int64_t most_batch = WORKSPACE_COUNTERS / tiles;
  if (split <= 1 || most_batch < 1) {
    p->split_k = 1;
    p->k_per_split = steps * step; /* one slice: all of K */
    return MAX_GRID_YZ;
  }
  const int64_t per = ceil_div(steps, split);
  p->split_k = (int32_t)ceil_div(steps, per);
  p->k_per_split = per * step;
  return most_batch < MAX_GRID_YZ ? most_batch : MAX_GRID_YZ;
}

static tsr_status run_gemm(cuda_queue *queue, const tsr_gemm_args *g, const cuda_gemm_config *c) {
  tsr_gpu_gemm_params p;
  memset(&p, 0, sizeof p);
  const int esize = element_size(g->a.dtype);
  const int64_t batch = g->d.shape[0];
  p.a = cuda_tensor_address(&g->a);
  p.b = cuda_tensor_address(&g->b);
  p.d = cuda_tensor_address(&g->d);
  p.m = g->d.shape[1];
  p.n = g->d.shape[2];
  p.k = g->a.shape[2];
  p.a_batch = g->a.strides[0];
  p.a_m = g->a.strides[1];
  p.a_k = g->a.strides[2];
  p.b_batch = g->b.strides[0];
  p.b_k = g->b.strides[1];
  p.b_n = g->b.strides[2];
  p.d_batch = g->d.strides[0];
  p.d_m = g->d.strides[1];
  p.d_n = g->d.strides[2];
  p.in_dtype = g->a.dtype;
  fill_epilogue(&p, &g->bias, g->alpha, g->activation, g->d.dtype);
  p.bias_n = g->bias.buffer ? g->bias.strides[0] : 0;
  if (g->c.buffer && g->beta != 0.0f) {
    p.has_c = 1;
    p.c = cuda_tensor_address(&g->c);
    p.beta = g->beta;
    p.c_batch = g->c.strides[0];
    p.c_m = g->c.strides[1];
    p.c_n = g->c.strides[2];
  }
  if (p.m == 0 || p.n == 0 || batch == 0)
    return TSR_OK;
  if (c->kind == CUDA_GEMM_GEMV)
    return run_gemv(queue, &p, g, batch);
  if (c->kind == CUDA_GEMM_WGMMA)
    return run_gemm_wgmma(queue, &p, g, c, batch);

  int bm = c->bm, bn = c->bn, threads = c->warps_m * c->warps_n * 32, smem = c->smem;
  if (c->kind == CUDA_GEMM_SIMT) {
    threads = 256;
    smem = 0;
  } else if (c->kind == CUDA_GEMM_STREAM) {
    p.b_k_major = g->b.strides[1] == 1; /* the configs run only 16-byte rows */
  } else {
    operand_layout(&g->a, 1, 2, 0, esize, true, &p.a_k_major, &p.a_async);
    operand_layout(&g->b, 2, 1, 0, esize, true, &p.b_k_major, &p.b_async);
  }
  p.tiles_m = (int32_t)ceil_div(p.m, bm);
  p.tiles_n = (int32_t)ceil_div(p.n, bn);
  int kernel = cuda_gemm_kernel(c, g->a.dtype);
  const int64_t tiles = (int64_t)p.tiles_m * p.tiles_n;
  int64_t most_batch = MAX_GRID_YZ;
  p.split_k = 1;
  if (c->kind == CUDA_GEMM_MMA && c->bm == 16) {
    /* Decode shapes: split K over the blocks of each tile so that there are
     * about as many blocks as SMs: fewer, longer-lived blocks than one per
     * block slot (H100, queued: 16x4096x4096 21.7 -> 20.8 us, 1x8192x8192
     * 57.0 -> 53.8 us; half or 1.5 blocks per SM were slower;
     * docs/PERFORMANCE.md). */
    most_batch = plan_split_k(&p, tiles, batch, queue->device->props->multiprocessors, c->bk, 1);
  } else if (c->kind == CUDA_GEMM_STREAM) {
    /* About one wave of resident blocks, each warp keeping a chunk of 32 of
     * every slice. */
    const int per_sm = kernel >= 0 && queue->device->blocks_per_sm[kernel] > 0
                           ? queue->device->blocks_per_sm[kernel]
                           : 1;
    most_batch =
        plan_split_k(&p, tiles, batch, (int64_t)queue->device->props->multiprocessors * per_sm,
                     c->bk, c->warps_n);
  }
  const int64_t split = p.split_k;
  for (int64_t b0 = 0; b0 < batch; b0 += most_batch) {
    p.batch_offset = (int32_t)b0;
    int64_t chunk = batch - b0 < most_batch ? batch - b0 : most_batch;
    if (split > 1) {
      tsr_status status =
          ensure_workspace(queue, (size_t)(split * tiles * chunk) * (size_t)(bm * bn) * 4);
      if (status != TSR_OK)
        return status;
      p.workspace = workspace_data(queue);
      p.counters = queue->workspace;
    }
    tsr_status status = launch(queue, kernel, (uint64_t)tiles, (unsigned)chunk, (unsigned)split,
                               (unsigned)threads, (unsigned)smem, &p);
    if (status != TSR_OK)
      return status;
  }
  return TSR_OK;
}

static tsr_status run_grouped_gemm(cuda_queue *queue, const tsr_grouped_gemm_args *g,
                                   const cuda_gemm_config *c) {
  tsr_gpu_gemm_params p;
  memset(&p, 0, sizeof p);
  const int esize = element_size(g->a.dtype);
  p.a = cuda_tensor_address(&g->a);
  p.b = cuda_tensor_address(&g->b);
  p.d = cuda_tensor_address(&g->d);
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
  int bm = c->bm, bn = c->bn, threads = c->warps_m * c->warps_n * 32, smem = c->smem;
  tsr_gpu_gemm_sm90_params wgmma;
  memset(&wgmma, 0, sizeof wgmma);
  if (c->kind == CUDA_GEMM_SIMT) {
    threads = 256;
    smem = 0;
  } else if (c->kind == CUDA_GEMM_WGMMA) {
    /* a: one map over the stacked rows of all groups; b: the group is the
     * map's third dim. */
    tsr_status status = encode_wgmma_operand(queue, &wgmma.map_a, &g->a, 0, 1, -1, 128,
                                             &p.a_k_major, &wgmma.a_batched);
    if (status == TSR_OK)
      status = encode_wgmma_operand(queue, &wgmma.map_b, &g->b, 2, 1, 0, (unsigned)bn, &p.b_k_major,
                                    &wgmma.b_batched);
    if (status != TSR_OK)
      return status;
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
  p.tiles_n = (int32_t)ceil_div(p.n, bn);
  int kernel = cuda_gemm_kernel(c, g->a.dtype);

  int64_t row = 0, tiles = 0;
  int used = 0;
  for (int64_t group = 0; group <= g->group_count; group++) {
    bool last = group == g->group_count;
    int64_t rows = last ? 0 : g->group_sizes[group];
    if (!last && rows > 0) {
      p.group_index[used] = (int32_t)group;
      p.group_row_start[used] = (int32_t)row;
      p.group_tile_start[used] = (int32_t)tiles;
      tiles += ceil_div(rows, bm) * p.tiles_n;
      row += rows;
      used++;
    }
    if (used > 0 && (last || used == TSR_GPU_MAX_GROUPS)) {
      p.group_row_start[used] = (int32_t)row;
      p.group_tile_start[used] = (int32_t)tiles;
      p.group_count = used;
      tsr_status status;
      if (c->kind == CUDA_GEMM_WGMMA) {
        wgmma.gemm = p;
        status = launch_wgmma(queue, c, g->a.dtype, &wgmma, tiles);
      } else {
        status =
            launch(queue, kernel, (uint64_t)tiles, 1, 1, (unsigned)threads, (unsigned)smem, &p);
      }
      if (status != TSR_OK)
        return status;
      used = 0;
      tiles = 0;
    }
  }
  return TSR_OK;
}

/* ------------------------------------------------------------------------ */
/* Attention                                                                 */
/* ------------------------------------------------------------------------ */

static void copy_strides4(const tsr_plugin_tensor *t, int64_t *b, int64_t *s, int64_t *h,
                          int64_t *d) {
  *b = t->strides[0];
  *s = t->strides[1];
  *h = t->strides[2];
  *d = t->strides[3];
}

static tsr_status run_attention(cuda_queue *queue, const tsr_attention_args *a,
                                const cuda_attention_config *c) {
  tsr_gpu_attention_params p;
  memset(&p, 0, sizeof p);
  p.q = cuda_tensor_address(&a->q);
  p.k = cuda_tensor_address(&a->k);
  p.v = cuda_tensor_address(&a->v);
  p.o = cuda_tensor_address(&a->o);
  copy_strides4(&a->q, &p.q_b, &p.q_s, &p.q_h, &p.q_d);
  copy_strides4(&a->k, &p.k_b, &p.k_s, &p.k_h, &p.k_d);
  copy_strides4(&a->v, &p.v_b, &p.v_s, &p.v_h, &p.v_d);
  copy_strides4(&a->o, &p.o_b, &p.o_s, &p.o_h, &p.o_d);
  if (a->lse.buffer) {
    p.has_lse = 1;
    p.lse = cuda_tensor_address(&a->lse);
    p.lse_b = a->lse.strides[0];
    p.lse_h = a->lse.strides[1];
    p.lse_s = a->lse.strides[2];
  }
  const int64_t batch = a->q.shape[0];
  p.seq_q = a->q.shape[1];
  p.seq_kv = a->k.shape[1];
  p.heads_q = a->q.shape[2];
  p.heads_kv = a->k.shape[2];
  p.head_dim = a->q.shape[3];
  p.group = (int32_t)(p.heads_q / p.heads_kv);
  p.window_left = a->window_left < 0 ? -1 : a->window_left;
  p.window_right = a->window_right < 0 ? -1 : a->window_right;
  p.scale_log2 = a->scale * 1.4426950408889634f;
  if (p.seq_q == 0 || batch == 0 || p.heads_q == 0)
    return TSR_OK;
  int kernel = cuda_attention_kernel(c, a->q.dtype);
  if (c->kind == CUDA_ATTENTION_FLASH)
    return launch(queue, kernel, (uint64_t)ceil_div(p.seq_q, c->block_q), (unsigned)p.heads_q,
                  (unsigned)batch, (unsigned)c->warps * 32, (unsigned)c->smem, &p);
  int tile = cuda_attention_generic_tile(p.head_dim, queue->device->dynamic_smem_limit);
  p.kv_tile = tile;
  return launch(queue, kernel, (uint64_t)ceil_div(p.seq_q, TSR_GPU_ATTN_ROWS), (unsigned)p.heads_q,
                (unsigned)batch, 128,
                (unsigned)TSR_GPU_ATTN_GENERIC_SMEM(p.head_dim, (int64_t)tile), &p);
}

/* ------------------------------------------------------------------------ */
/* Row ops                                                                   */
/* ------------------------------------------------------------------------ */

/* The leading (row-indexing) dimensions of a row tensor, padded in front to
 * three; `col` receives the stride of the row dimension. */
static void lead_of(const tsr_plugin_tensor *t, int64_t lead[3], int64_t strides[3], int64_t *col) {
  int leading = t->rank - 1;
  for (int i = 0; i < 3; i++) {
    int d = leading - 3 + i;
    lead[i] = d >= 0 ? t->shape[d] : 1;
    strides[i] = d >= 0 ? t->strides[d] : 0;
  }
  *col = t->strides[t->rank - 1];
}

/* Rows of `t` can be read as 16-byte vectors. */
static bool rows_vectorizable(const tsr_plugin_tensor *t) {
  if (!t->buffer)
    return true;
  int esize = element_size(t->dtype);
  if (t->strides[t->rank - 1] != 1 && t->shape[t->rank - 1] > 1)
    return false;
  if (cuda_tensor_address(t) % 16 != 0)
    return false;
  for (int d = 0; d + 1 < t->rank; d++)
    if (t->shape[d] > 1 && (t->strides[d] * esize) % 16 != 0)
      return false;
  return true;
}

static uint64_t address_or_zero(const tsr_plugin_tensor *t) {
  return t->buffer ? cuda_tensor_address(t) : 0;
}

/* A norm's weight or bias can be read 16 bytes at a time along x's rows:
 * absent, or x's dtype with a unit stride and a 16-byte aligned start. */
static bool weight_vectorizable(const tsr_plugin_tensor *w, int32_t x_dtype) {
  if (!w->buffer)
    return true;
  return w->dtype == x_dtype && (w->strides[0] == 1 || w->shape[0] <= 1) &&
         cuda_tensor_address(w) % 16 == 0;
}

static tsr_status launch_rows(cuda_queue *queue, const char *op, tsr_gpu_rows_params *p,
                              const cuda_rows_config *c, bool may_cache) {
  if (p->rows == 0)
    return TSR_OK;
  /* Rows that fit the threads' registers are read once into them (see
   * kernels/norm.cu); longer or strided rows take the shared-memory cache.
   * Cross entropy (which never caches) streams any row length in batches of
   * 16-byte loads. */
  int64_t vector = 16 / element_size(p->dtype);
  p->regs = p->vec && p->n % vector == 0 &&
            (p->n <= (int64_t)TSR_GPU_ROW_REGS * c->threads || !may_cache);
  p->cache_row = !p->regs && may_cache && p->n * 4 <= CUDA_ROWS_CACHE_BYTES &&
                 p->n * 4 <= queue->device->dynamic_smem_limit;
  unsigned smem = p->cache_row ? (unsigned)(p->n * 4) : 0;
  int64_t blocks = p->rows < (1 << 20) ? p->rows : (1 << 20);
  char name[64];
  /* Cross entropy's register path with 256 threads or more: the kernel
   * with half the batch (4 chunks in flight a thread), half the registers. */
  bool half_batch = p->regs && !may_cache && c->threads >= 256;
  snprintf(name, sizeof name, "tsr_%s_%s%s", op, dtype_tag(p->dtype), half_batch ? "_b4" : "");
  return launch_named(queue, name, (uint64_t)blocks, 1, 1, (unsigned)c->threads, smem, p);
}

static void rows_common(tsr_gpu_rows_params *p, const tsr_plugin_tensor *x) {
  memset(p, 0, sizeof *p);
  p->x = cuda_tensor_address(x);
  lead_of(x, p->lead, p->x_lead, &p->x_col);
  p->rows = tsr_plugin_row_count(x);
  p->n = x->shape[x->rank - 1];
  p->dtype = x->dtype;
}

static tsr_status run_rmsnorm(cuda_queue *queue, const tsr_rmsnorm_args *a,
                              const cuda_rows_config *c) {
  tsr_gpu_rows_params p;
  rows_common(&p, &a->x);
  int64_t lead[3];
  p.y = cuda_tensor_address(&a->y);
  lead_of(&a->y, lead, p.y_lead, &p.y_col);
  if (a->residual.buffer) {
    p.residual = cuda_tensor_address(&a->residual);
    lead_of(&a->residual, lead, p.residual_lead, &p.residual_col);
  }
  if (a->residual_out.buffer) {
    p.residual_out = cuda_tensor_address(&a->residual_out);
    lead_of(&a->residual_out, lead, p.residual_out_lead, &p.residual_out_col);
  }
  p.weight = address_or_zero(&a->weight);
  p.weight_stride = a->weight.buffer ? a->weight.strides[0] : 0;
  p.weight_dtype = a->weight.buffer ? a->weight.dtype : a->x.dtype;
  p.eps = a->eps;
  p.vec = rows_vectorizable(&a->x) && rows_vectorizable(&a->y) && rows_vectorizable(&a->residual) &&
          rows_vectorizable(&a->residual_out);
  p.weight_vec = weight_vectorizable(&a->weight, a->x.dtype);
  return launch_rows(queue, "rmsnorm", &p, c, true);
}

static tsr_status run_layernorm(cuda_queue *queue, const tsr_layernorm_args *a,
                                const cuda_rows_config *c) {
  tsr_gpu_rows_params p;
  rows_common(&p, &a->x);
  int64_t lead[3];
  p.y = cuda_tensor_address(&a->y);
  lead_of(&a->y, lead, p.y_lead, &p.y_col);
  p.weight = address_or_zero(&a->weight);
  p.weight_stride = a->weight.buffer ? a->weight.strides[0] : 0;
  p.bias = address_or_zero(&a->bias);
  p.bias_stride = a->bias.buffer ? a->bias.strides[0] : 0;
  p.weight_dtype = a->weight.buffer ? a->weight.dtype : a->bias.buffer ? a->bias.dtype : a->x.dtype;
  p.eps = a->eps;
  p.vec = rows_vectorizable(&a->x) && rows_vectorizable(&a->y);
  p.weight_vec =
      weight_vectorizable(&a->weight, a->x.dtype) && weight_vectorizable(&a->bias, a->x.dtype);
  return launch_rows(queue, "layernorm", &p, c, true);
}

static tsr_status run_softmax(cuda_queue *queue, const tsr_softmax_args *a,
                              const cuda_rows_config *c) {
  tsr_gpu_rows_params p;
  rows_common(&p, &a->x);
  int64_t lead[3];
  p.y = cuda_tensor_address(&a->y);
  lead_of(&a->y, lead, p.y_lead, &p.y_col);
  p.scale = a->scale;
  p.vec = rows_vectorizable(&a->x) && rows_vectorizable(&a->y);
  return launch_rows(queue, "softmax", &p, c, true);
}

static tsr_status run_cross_entropy(cuda_queue *queue, const tsr_cross_entropy_args *a,
                                    const cuda_rows_config *c) {
  tsr_gpu_rows_params p;
  rows_common(&p, &a->logits);
  p.targets = cuda_tensor_address(&a->targets);
  p.targets_stride = a->targets.strides[0];
  p.loss = cuda_tensor_address(&a->loss);
  p.loss_stride = a->loss.strides[0];
  p.lse = address_or_zero(&a->lse);
  p.lse_stride = a->lse.buffer ? a->lse.strides[0] : 0;
  p.ignore_index = a->ignore_index;
  p.status = queue->status;
  p.vec = rows_vectorizable(&a->logits);
  tsr_status status = launch_rows(queue, "cross_entropy", &p, c, false);
  if (status == TSR_OK && p.rows > 0) {
    queue->status_armed = true;
    queue->status_vocab = p.n;
    queue->status_ignore_index = a->ignore_index;
  }
  return status;
}

/* ------------------------------------------------------------------------ */
/* Elementwise                                                               */
/* ------------------------------------------------------------------------ */

/* Shape and strides padded in front to rank 4. */
static void pad4(const tsr_plugin_tensor *t, int64_t shape[4], int64_t strides[4]) {
  int missing = 4 - t->rank;
  for (int i = 0; i < 4; i++) {
    shape[i] = i < missing ? 1 : t->shape[i - missing];
    strides[i] = i < missing ? 0 : t->strides[i - missing];
  }
}

static bool dense_aligned(const tsr_plugin_tensor *t) {
  if (!t->buffer)
    return true;
  int64_t expected = 1;
  for (int d = t->rank - 1; d >= 0; d--) {
    if (t->shape[d] > 1 && t->strides[d] != expected)
      return false;
    expected *= t->shape[d];
  }
  return cuda_tensor_address(t) % 16 == 0;
}

static tsr_status launch_elementwise(cuda_queue *queue, const char *op,
                                     tsr_gpu_elementwise_params *p,
                                     const cuda_elementwise_config *c, int64_t work) {
  if (work == 0)
    return TSR_OK;
  int64_t blocks = ceil_div(work, c->threads);
  int64_t most = (int64_t)queue->device->props->multiprocessors * 32;
  if (blocks > most)
    blocks = most;
  char name[64];
  snprintf(name, sizeof name, "tsr_%s_%s", op, dtype_tag(p->dtype));
  return launch_named(queue, name, (uint64_t)blocks, 1, 1, (unsigned)c->threads, 0, p);
}

static tsr_status run_unary(cuda_queue *queue, const char *op, const tsr_plugin_tensor *x,
                            const tsr_plugin_tensor *up, const tsr_plugin_tensor *y,
                            int32_t approximate, const cuda_elementwise_config *c) {
  tsr_gpu_elementwise_params p;
  memset(&p, 0, sizeof p);
  int64_t shape[4];
  p.x = cuda_tensor_address(x);
  p.y = cuda_tensor_address(y);
  pad4(x, p.shape, p.x_strides);
  pad4(y, shape, p.y_strides);
  if (up) {
    p.up = cuda_tensor_address(up);
    pad4(up, shape, p.up_strides);
  }
  p.total = p.shape[0] * p.shape[1] * p.shape[2] * p.shape[3];
  p.dtype = x->dtype;
  p.approximate = approximate;
  p.vec = dense_aligned(x) && dense_aligned(y) && (!up || dense_aligned(up));
  int64_t work = p.vec ? ceil_div(p.total, 16 / element_size(p.dtype)) : p.total;
  return launch_elementwise(queue, op, &p, c, work);
}

static tsr_status run_rope(cuda_queue *queue, const tsr_rope_args *a,
                           const cuda_elementwise_config *c) {
  tsr_gpu_elementwise_params p;
  memset(&p, 0, sizeof p);
  int64_t shape[4];
  p.x = cuda_tensor_address(&a->x);
  p.y = cuda_tensor_address(&a->y);
  pad4(&a->x, p.shape, p.x_strides);
  pad4(&a->y, shape, p.y_strides);
  p.total = p.shape[0] * p.shape[1] * p.shape[2] * (p.shape[3] / 2);
  p.position_offset = a->position_offset;
  p.log2_theta = log2f(a->theta);
  p.rotary_dim = a->rotary_dim;
  p.style = a->style;
  p.dtype = a->x.dtype;
  if (p.total == 0)
    return TSR_OK;
  int64_t tokens = p.shape[0] * p.shape[1];
  char name[64];
  snprintf(name, sizeof name, "tsr_rope_%s", dtype_tag(p.dtype));
  /* The 16-byte path (see rope_vec): unit channel strides, 16-byte aligned
   * head rows, head and rotary dims in whole vectors. */
  int64_t v = 16 / element_size(p.dtype);
  bool vec = p.x_strides[3] == 1 && p.y_strides[3] == 1 && p.shape[3] % v == 0 &&
             p.rotary_dim % (a->style == TSR_ROPE_NEOX ? 2 * v : v) == 0 &&
             cuda_tensor_address(&a->x) % 16 == 0 && cuda_tensor_address(&a->y) % 16 == 0;
  for (int d = 0; d < 3 && vec; d++)
    vec = (p.shape[d] <= 1 || (p.x_strides[d] % v == 0 && p.y_strides[d] % v == 0));
  if (vec) {
    p.vec = 1;
    int64_t slots = (a->style == TSR_ROPE_NEOX ? p.rotary_dim / 2 : p.rotary_dim) / v +
                    (p.shape[3] - p.rotary_dim) / v;
    int64_t groups = ceil_div(p.shape[2], TSR_GPU_ROPE_HEADS);
    int64_t blocks = ceil_div(tokens * groups * slots, c->threads);
    int64_t most = (int64_t)queue->device->props->multiprocessors * 32;
    return launch_named(queue, name, (uint64_t)(blocks < most ? blocks : most), 1, 1,
                        (unsigned)c->threads, 0, &p);
  }
  /* A block per token, grid-stride beyond a few waves (see rope_body). */
  int64_t most = (int64_t)queue->device->props->multiprocessors * 16;
  return launch_named(queue, name, (uint64_t)(tokens < most ? tokens : most), 1, 1,
                      (unsigned)c->threads, 0, &p);
}

/* ------------------------------------------------------------------------ */

tsr_status cuda_op_launch(cuda_queue *queue, tsr_op op, const void *args, const void *config) {
  switch (op) {
  case TSR_OP_GEMM:
    return run_gemm(queue, args, config);
  case TSR_OP_GROUPED_GEMM:
    return run_grouped_gemm(queue, args, config);
  case TSR_OP_ATTENTION:
    return run_attention(queue, args, config);
  case TSR_OP_RMSNORM:
    return run_rmsnorm(queue, args, config);
  case TSR_OP_LAYERNORM:
    return run_layernorm(queue, args, config);
  case TSR_OP_SOFTMAX:
    return run_softmax(queue, args, config);
  case TSR_OP_CROSS_ENTROPY:
    return run_cross_entropy(queue, args, config);
  case TSR_OP_SWIGLU: {
    const tsr_swiglu_args *a = args;
    return run_unary(queue, "swiglu", &a->gate, &a->up, &a->y, 0, config);
  }
  case TSR_OP_GELU: {
    const tsr_gelu_args *a = args;
    return run_unary(queue, "gelu", &a->x, NULL, &a->y, a->approximate, config);
  }
  case TSR_OP_ROPE:
    return run_rope(queue, args, config);
  default:
    cuda_set_error(queue->device->plugin, "cuda: op %d is unknown", (int)op);
    return TSR_ERROR_UNSUPPORTED;
  }
}
