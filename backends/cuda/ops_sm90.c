/* SPDX-License-Identifier: Apache-2.0 */
/* The sm_90a GEMM launches (kernels/gemm_sm90.cu): TMA tensor maps of the
 * operands (cuTensorMapEncodeTiled), operands TMA cannot load packed
 * K-major into the queue's workspace first, and a persistent grid of a
 * block per SM slot. The GPU layer fills the parameter block and calls
 * these through the vendor description's hooks. */
#include <limits.h>
#include <string.h>

#include "../gpu/ops.h"
#include "cuda_internal.h"
#include "kernels/sm90.h"

bool cuda_tma_operand_of(const tsr_plugin_tensor *t, int row_dim, int k_dim, int batch_dim,
                         cuda_tma_operand *out) {
  const int64_t esize = t->dtype == TSR_DTYPE_F32 ? 4 : 2;
  memset(out, 0, sizeof *out);
  int64_t rows = t->shape[row_dim], depth = t->shape[k_dim];
  int64_t row_stride = t->strides[row_dim], k_stride = t->strides[k_dim];
  if (rows < 1 || depth < 1 || gpu_tensor_address(t) % 16 != 0)
    return false;
  /* A dim of extent 1 may carry any stride: it is never stepped along. */
  if (depth == 1)
    k_stride = 1;
  if (rows == 1)
    row_stride = k_stride == 1 ? depth : 1;
  out->k_major = k_stride == 1;
  if (!out->k_major && row_stride != 1)
    return false;
  int64_t inner = out->k_major ? depth : rows, outer = out->k_major ? rows : depth;
  int64_t outer_stride = out->k_major ? row_stride : k_stride;
  if (outer == 1)
    outer_stride = (inner * esize + 15) / 16 * 16 / esize;
  if (outer_stride < inner || (outer_stride * esize) % 16 != 0)
    return false;
  out->dims[0] = (uint64_t)inner;
  out->dims[1] = (uint64_t)outer;
  out->strides[0] = (uint64_t)(outer_stride * esize);
  int64_t batch = batch_dim >= 0 ? t->shape[batch_dim] : 1;
  int64_t batch_stride = batch_dim >= 0 ? t->strides[batch_dim] : 0;
  out->batched = batch > 1 && batch_stride != 0;
  if (out->batched) {
    if (batch_stride < outer_stride * outer || (batch_stride * esize) % 16 != 0)
      return false;
    out->dims[2] = (uint64_t)batch;
    out->strides[1] = (uint64_t)(batch_stride * esize);
  } else {
    out->dims[2] = 1;
    out->strides[1] = out->strides[0] * (uint64_t)outer;
  }
  return (out->strides[1] >> 40) == 0;
}

/* Which operands of a plain GEMM the wgmma kernels take from a packed
 * K-major copy: those TMA cannot address, and for tf32 those not K-major. */
static void wgmma_packs(const tsr_gemm_args *g, bool *pack_a, bool *pack_b) {
  cuda_tma_operand a, b;
  bool tf32 = g->a.dtype == TSR_DTYPE_F32;
  *pack_a = !cuda_tma_operand_of(&g->a, 1, 2, 0, &a) || (tf32 && !a.k_major);
  *pack_b = !cuda_tma_operand_of(&g->b, 2, 1, 0, &b) || (tf32 && !b.k_major);
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

/* The TMA tensor map of a wgmma operand at `address`: boxes of 128 bytes
 * along its unit stride (the swizzle span: 64 16-bit or 32 f32 elements) by
 * `tile_rows` rows when that stride runs along K, else by 64 k (the kernel
 * loads 64-wide chunks). */
static tsr_status encode_wgmma_map(gpu_queue *queue, tsr_gpu_tensor_map *map, uint64_t address,
                                   int32_t dtype, const cuda_tma_operand *operand,
                                   unsigned tile_rows) {
  const cuda_plugin *plugin = cuda_plugin_of(queue->device->plugin);
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
    CUresult result = plugin->api.cuTensorMapEncodeTiled(
        map,
        dtype == TSR_DTYPE_BF16  ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
        : dtype == TSR_DTYPE_F32 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        3, (void *)(uintptr_t)key.address, dims, strides, box, element_strides,
        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (result != CUDA_SUCCESS)
      return gpu_fail(&plugin->gpu, result, "encoding a TMA tensor map for a wgmma GEMM operand");
    wgmma_map_entry *slot = &cache[next_slot++ % 8];
    slot->key = key;
    slot->map = *map;
    slot->valid = true;
  }
  return TSR_OK;
}

static tsr_status encode_wgmma_operand(gpu_queue *queue, tsr_gpu_tensor_map *map,
                                       const tsr_plugin_tensor *t, int row_dim, int k_dim,
                                       int batch_dim, unsigned tile_rows, int32_t *k_major,
                                       int32_t *batched) {
  cuda_tma_operand operand;
  if (!cuda_tma_operand_of(t, row_dim, k_dim, batch_dim, &operand))
    return tsr_plugin_fail(&queue->device->plugin->host, TSR_ERROR_UNSUPPORTED,
                           "a wgmma GEMM operand is not TMA-addressable");
  *k_major = operand.k_major;
  *batched = operand.batched;
  return encode_wgmma_map(queue, map, gpu_tensor_address(t), t->dtype, &operand, tile_rows);
}

/* A wgmma operand the kernel cannot load as it is: its K-major copy in the
 * workspace at `dst`, rows padded to 16 bytes (tf32: rounded to nearest). */
typedef struct packed_operand {
  tsr_gpu_gemm_pack_params pack;
  cuda_tma_operand tma;
} packed_operand;

static void plan_pack(const tsr_plugin_tensor *t, int row_dim, int k_dim, packed_operand *out) {
  memset(out, 0, sizeof *out);
  const int esize = gpu_element_size(t->dtype);
  tsr_gpu_gemm_pack_params *p = &out->pack;
  p->src = gpu_tensor_address(t);
  p->rows = t->shape[row_dim];
  p->depth = t->shape[k_dim];
  p->batch = t->shape[0] > 1 && t->strides[0] != 0 ? t->shape[0] : 1;
  p->src_batch = t->strides[0];
  p->src_row = t->strides[row_dim];
  p->src_k = t->strides[k_dim];
  p->dst_pitch = gpu_ceil_div(p->depth, 16 / esize) * (16 / esize);
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

static tsr_status launch_pack(gpu_queue *queue, packed_operand *o, uint64_t dst) {
  o->pack.dst = dst;
  int64_t grid_y = gpu_ceil_div(o->pack.rows, 32), grid_z = o->pack.batch;
  return gpu_launch(queue, queue->device->pack[o->pack.esize == 4 ? 1 : 0],
                    (uint64_t)gpu_ceil_div(o->pack.depth, 32),
                    (unsigned)(grid_y < GPU_MAX_GRID_YZ ? grid_y : GPU_MAX_GRID_YZ),
                    (unsigned)(grid_z < GPU_MAX_GRID_YZ ? grid_z : GPU_MAX_GRID_YZ), 256, 0,
                    &o->pack);
}

/* A persistent wgmma launch: a block per SM slot, or fewer when there are
 * fewer tiles; each block walks its tiles. */
static tsr_status launch_wgmma(gpu_queue *queue, const gpu_gemm_prepared *prepared,
                               tsr_gpu_gemm_sm90_params *params, int64_t tiles) {
  const gpu_kernel *kernel = prepared->kernel;
  int per_sm = kernel ? kernel->blocks_per_sm : 1;
  int64_t slots = (int64_t)queue->device->props->multiprocessors * (per_sm > 0 ? per_sm : 1);
  int64_t grid = tiles < slots ? tiles : slots;
  return gpu_launch(queue, kernel, (uint64_t)grid, 1, 1, 384, (unsigned)prepared->config->smem,
                    params);
}

tsr_status cuda_gemm_sm90_run(gpu_queue *queue, const gpu_gemm_prepared *prepared,
                              const tsr_gemm_args *g, tsr_gpu_gemm_params *p, int64_t batch) {
  const gpu_gemm_config *c = prepared->config;
  tsr_gpu_gemm_sm90_params params;
  memset(&params, 0, sizeof params);
  bool pack_a, pack_b;
  wgmma_packs(g, &pack_a, &pack_b);
  packed_operand packed_a, packed_b;
  tsr_status status = TSR_OK;
  if (pack_a || pack_b) {
    if (pack_a)
      plan_pack(&g->a, 1, 2, &packed_a);
    if (pack_b)
      plan_pack(&g->b, 2, 1, &packed_b);
    size_t bytes_a = pack_a ? packed_bytes(&packed_a) : 0;
    status = gpu_ensure_workspace(queue, bytes_a + (pack_b ? packed_bytes(&packed_b) : 0));
    if (status == TSR_OK && pack_a)
      status = launch_pack(queue, &packed_a, gpu_workspace_data(queue));
    if (status == TSR_OK && pack_b)
      status = launch_pack(queue, &packed_b, gpu_workspace_data(queue) + bytes_a);
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
  p->tiles_m = (int32_t)gpu_ceil_div(p->m, c->bm);
  p->tiles_n = (int32_t)gpu_ceil_div(p->n, c->bn);
  /* Batches per launch: the tile index stays within int32 per launch. */
  int64_t per_batch = (int64_t)p->tiles_m * p->tiles_n;
  int64_t most = INT_MAX / per_batch > 0 ? INT_MAX / per_batch : 1;
  for (int64_t b0 = 0; b0 < batch; b0 += most) {
    int64_t chunk = batch - b0 < most ? batch - b0 : most;
    p->batch_offset = (int32_t)b0;
    p->batch_count = (int32_t)chunk;
    params.gemm = *p;
    status = launch_wgmma(queue, prepared, &params, per_batch * chunk);
    if (status != TSR_OK)
      return status;
  }
  return TSR_OK;
}

static tsr_status launch_groups(gpu_queue *queue, const gpu_gemm_prepared *prepared,
                                tsr_gpu_gemm_params *p, int64_t tiles, void *user) {
  tsr_gpu_gemm_sm90_params *wgmma = user;
  wgmma->gemm = *p;
  return launch_wgmma(queue, prepared, wgmma, tiles);
}

tsr_status cuda_grouped_gemm_sm90_run(gpu_queue *queue, const gpu_gemm_prepared *prepared,
                                      const tsr_grouped_gemm_args *g, tsr_gpu_gemm_params *p) {
  tsr_gpu_gemm_sm90_params wgmma;
  memset(&wgmma, 0, sizeof wgmma);
  /* a: one map over the stacked rows of all groups; b: the group is the
   * map's third dim. */
  tsr_status status = encode_wgmma_operand(queue, &wgmma.map_a, &g->a, 0, 1, -1, 128, &p->a_k_major,
                                           &wgmma.a_batched);
  if (status == TSR_OK)
    status = encode_wgmma_operand(queue, &wgmma.map_b, &g->b, 2, 1, 0,
                                  (unsigned)prepared->config->bn, &p->b_k_major, &wgmma.b_batched);
  if (status != TSR_OK)
    return status;
  return gpu_grouped_walk(queue, prepared, g, p, prepared->config->bm, launch_groups, &wgmma);
}
