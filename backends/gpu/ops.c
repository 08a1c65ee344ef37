/* SPDX-License-Identifier: Apache-2.0 */
/* op_run: a validated op and the config op_select prepared become kernel
 * parameter blocks (kernels/kernel_params.h), grids and launches on the
 * queue's stream. The steady path formats, compares and looks up nothing:
 * the prepared config holds its kernels; vectorisation and the other
 * choices that depend on addresses are made here from the args. GEMM is in
 * ops_gemm.c. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops.h"

tsr_status gpu_launch(gpu_queue *queue, const gpu_kernel *kernel, uint64_t grid_x, unsigned grid_y,
                      unsigned grid_z, unsigned threads, unsigned smem, void *params) {
  const gpu_plugin *plugin = queue->device->plugin;
  if (!kernel || !kernel->function)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_BACKEND,
                           "a kernel of this config is not in the loaded module");
  if (grid_x == 0 || grid_y == 0 || grid_z == 0)
    return TSR_OK;
  if (grid_x > (uint64_t)INT_MAX)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_UNSUPPORTED,
                           "%s would need %llu blocks, more than a grid holds", kernel->name,
                           (unsigned long long)grid_x);
  const unsigned grid[3] = {(unsigned)grid_x, grid_y, grid_z};
  const gpu_driver *d = &plugin->driver;
  int error = d->launch(d->context, kernel->function, grid, threads, smem, queue->stream, params);
  if (error != 0) {
    char what[160];
    snprintf(what, sizeof what,
             "launching %s (%llu x %u x %u blocks of %u threads, %u bytes shared)", kernel->name,
             (unsigned long long)grid_x, grid_y, grid_z, threads, smem);
    return gpu_fail(plugin, error, what);
  }
  return TSR_OK;
}

tsr_status gpu_ensure_workspace(gpu_queue *queue, size_t bytes) {
  bytes += GPU_WORKSPACE_COUNTER_BYTES;
  if (queue->workspace_bytes >= bytes)
    return TSR_OK;
  const gpu_plugin *plugin = queue->device->plugin;
  const gpu_driver *d = &plugin->driver;
  int error = d->stream_sync(d->context, queue->stream);
  if (error != 0)
    return gpu_fail(plugin, error, "waiting for the queue to grow its workspace");
  if (queue->workspace)
    d->mem_free(d->context, queue->workspace);
  queue->workspace = 0;
  queue->workspace_bytes = 0;
  size_t rounded = (bytes + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
  error = d->mem_alloc(d->context, rounded, &queue->workspace);
  if (error != 0) {
    queue->workspace = 0;
    return gpu_fail(plugin, error, "allocating the split-K workspace");
  }
  error = d->memset32(d->context, queue->workspace, 0, GPU_WORKSPACE_COUNTERS, queue->stream);
  if (error != 0)
    return gpu_fail(plugin, error, "clearing the split-K counters");
  queue->workspace_bytes = rounded;
  return TSR_OK;
}

/* ------------------------------------------------------------------------ */
/* Attention                                                                 */
/* ------------------------------------------------------------------------ */

/* A tensor's strides as the attention kernels take them: dense [B, S, H, D];
 * packed [rows, H, D] with batch stride 0 (rows counted from the sequence's
 * first); paged [blocks, block_size, H, D] alike, the block stride where the
 * batch's would be. */
static void copy_strides4(const tsr_plugin_tensor *t, int64_t *b, int64_t *s, int64_t *h,
                          int64_t *d) {
  const int first = t->rank == 3 ? -1 : 0;
  *b = first < 0 ? 0 : t->strides[0];
  *s = t->strides[first + 1];
  *h = t->strides[first + 2];
  *d = t->strides[first + 3];
}

/* Index tensors (plugin.h): their address, or 0 when absent. */
static uint64_t index_address(const tsr_plugin_tensor *t, int64_t *stride0, int64_t *stride1) {
  if (!t->buffer)
    return 0;
  if (stride0)
    *stride0 = t->strides[0];
  if (stride1)
    *stride1 = t->rank > 1 ? t->strides[1] : 0;
  return gpu_tensor_address(t);
}

/* The serving fields of the parameter block (the generic, decode and
 * serving flash kernels read them when p->serving is set). */
static void attention_serving(gpu_queue *queue, const tsr_attention_args *a,
                              tsr_gpu_attention_params *p) {
  const bool appended = a->struct_size >= sizeof(tsr_attention_args);
  p->serving = tsr_plugin_attention_is_serving(a) ? 1 : 0;
  p->batch = appended ? a->batch : a->q.shape[0];
  p->max_seqlen_q = appended ? a->max_seqlen_q : a->q.shape[1];
  p->max_seqlen_kv = appended ? a->max_seqlen_kv : a->k.shape[1];
  p->scale = a->scale;
  p->faults = queue->status;
  if (!p->serving)
    return;
  p->softcap = a->softcap;
  p->cu_q = index_address(&a->cu_seqlens_q, &p->cu_q_stride, NULL);
  p->cu_kv = index_address(&a->cu_seqlens_kv, &p->cu_kv_stride, NULL);
  p->seqlens_kv = index_address(&a->seqlens_kv, &p->seqlens_stride, NULL);
  p->block_table = index_address(&a->block_table, &p->table_b, &p->table_j);
  p->packed_q = p->cu_q != 0;
  p->packed_kv = p->cu_kv != 0;
  p->paged = p->block_table != 0;
  p->q_rows = p->packed_q ? a->q.shape[0] : 0;
  p->kv_rows = p->packed_kv || p->paged ? a->k.shape[0] : 0;
  if (p->paged) {
    p->block_size = a->k.shape[1];
    p->max_blocks = a->block_table.shape[1];
    p->seq_kv = p->max_blocks * p->block_size; /* the capacity of a sequence */
    p->block_shift = -1;
    for (int shift = 0; shift < 62; shift++)
      if (((int64_t)1 << shift) == p->block_size)
        p->block_shift = shift;
  }
  if (p->packed_q)
    p->seq_q = 0; /* lengths come from cu_seqlens_q */
  if (p->packed_kv)
    p->seq_kv = 0;
}

/* Below this many keys a decode block's fixed costs (its q rows, the
 * merge of its lane groups, a partial written and read) are not worth a
 * split of its own. */
enum { DECODE_MIN_CHUNK = 256, DECODE_WAVES = 4 };

/* Split-KV decode: the split kernel over (key chunk, kv head x row tile,
 * sequence), then the combine kernel over (kv head x row tile, sequence)
 * (the tensor-core kernel merges in its last block instead).
 * The split count is the variant's, or enough blocks for DECODE_WAVES waves
 * on the key-length bound (about half as many when lengths average half of
 * it), each chunk at least DECODE_MIN_CHUNK keys; chunks are whole steps of
 * the kernel's block (and whole cache blocks where those are larger). */
static tsr_status run_decode(gpu_queue *queue, tsr_gpu_attention_params *p,
                             const gpu_attention_prepared *prepared, int32_t dtype) {
  const gpu_device *device = queue->device;
  const gpu_attention_config *c = prepared->config;
  const int slot = gpu_dtype_slot(dtype), dim = gpu_decode_dim_class(p->head_dim);
  const int64_t max_q = p->max_seqlen_q > 0 ? p->max_seqlen_q : 1;
  const int rt = c->mma ? TSR_GPU_DECODE_MMA_ROWS : gpu_decode_tile_rows(p->group * max_q);
  /* a tensor-core tile variant's own kernel, else the head-dim class's */
  const bool tiled = c->mma && c->block_kv > 0;
  const gpu_kernel *kernel = tiled    ? prepared->kernel
                             : c->mma ? device->decode_mma[slot][dim]
                                      : device->decode[slot][dim][rt == 4 ? 0 : 1];
  const gpu_kernel *combine = device->decode_combine[slot];
  /* the kernel's keys per block step (attention_decode.cu), or per tile
   * (attention_decode_mma.cu) */
  const int dp = 64 << dim, vector = 16 / gpu_element_size(dtype), row_vectors = dp / vector;
  const int lanes = row_vectors < 32 ? row_vectors : 32;
  const int steps = (rt > 4 ? 4 : 8) / (row_vectors / lanes);
  int64_t granule = tiled    ? c->block_kv
                    : c->mma ? gpu_decode_mma_keys(dim)
                             : (int64_t)(TSR_GPU_DECODE_THREADS / 32) * (32 / lanes) * steps;
  const unsigned smem = tiled ? (unsigned)c->smem : c->mma ? (unsigned)gpu_decode_mma_smem(dim) : 0;
  /* softcap's constants (the tensor-core kernel's tanh through exp2) */
  if (p->softcap > 0.0f) {
    p->cap_exp2 = 2.8853900817779268f / p->softcap;
    p->cap_log2 = p->softcap * 1.4426950408889634f;
  }
  if (p->paged && p->block_size > granule && p->block_size % granule == 0)
    granule = p->block_size;
  p->tile_rows = rt;
  p->row_groups = (int32_t)gpu_ceil_div(p->group * max_q, rt);
  const int64_t max_kv = p->max_seqlen_kv > 0 ? p->max_seqlen_kv : 1;
  const int64_t pairs = p->batch * p->heads_kv * p->row_groups;
  int64_t splits = c->splits;
  if (splits <= 0) {
    const int64_t per_sm = kernel->blocks_per_sm > 0 ? kernel->blocks_per_sm : 1;
    const int64_t slots = (int64_t)device->props->multiprocessors * per_sm;
    const int64_t most = gpu_ceil_div(max_kv, DECODE_MIN_CHUNK);
    splits = gpu_ceil_div(DECODE_WAVES * slots, pairs);
    splits = splits < 1 ? 1 : splits > most ? most : splits;
  }
  p->chunk = gpu_ceil_div(gpu_ceil_div(max_kv, splits), granule) * granule;
  splits = gpu_ceil_div(max_kv, p->chunk);
  p->splits = (int32_t)splits;
  const size_t bytes =
      (size_t)(pairs * splits) * (size_t)rt * (size_t)(2 + p->head_dim) * sizeof(float);
  tsr_status status = gpu_ensure_workspace(queue, bytes);
  if (status != TSR_OK)
    return status;
  p->partials = gpu_workspace_data(queue);
  /* The tensor-core kernel merges the partials in the block of each
   * (sequence, kv head, row tile) that ends last, counting at the
   * workspace's counters: no combine launch behind the whole grid. */
  const bool merge_in_kernel = c->mma && pairs <= GPU_WORKSPACE_COUNTERS;
  p->combine_counters = merge_in_kernel ? queue->workspace : 0;
  const unsigned tiles = (unsigned)(p->heads_kv * p->row_groups);
  status = gpu_launch(queue, kernel, (uint64_t)splits, tiles, (unsigned)p->batch,
                      TSR_GPU_DECODE_THREADS, smem, p);
  if (status == TSR_OK && !merge_in_kernel)
    status = gpu_launch(queue, combine, tiles, 1, (unsigned)p->batch, TSR_GPU_DECODE_THREADS, 0, p);
  return status;
}

static tsr_status run_attention(gpu_queue *queue, const tsr_attention_args *a,
                                const gpu_attention_prepared *prepared) {
  const gpu_attention_config *c = prepared->config;
  tsr_gpu_attention_params p;
  memset(&p, 0, sizeof p);
  p.q = gpu_tensor_address(&a->q);
  p.k = gpu_tensor_address(&a->k);
  p.v = gpu_tensor_address(&a->v);
  p.o = gpu_tensor_address(&a->o);
  copy_strides4(&a->q, &p.q_b, &p.q_s, &p.q_h, &p.q_d);
  copy_strides4(&a->k, &p.k_b, &p.k_s, &p.k_h, &p.k_d);
  copy_strides4(&a->v, &p.v_b, &p.v_s, &p.v_h, &p.v_d);
  copy_strides4(&a->o, &p.o_b, &p.o_s, &p.o_h, &p.o_d);
  if (a->lse.buffer) {
    /* dense [B, Hq, Sq]; packed [Hq, total_q] (batch stride 0) */
    const bool packed = a->lse.rank == 2;
    p.has_lse = 1;
    p.lse = gpu_tensor_address(&a->lse);
    p.lse_b = packed ? 0 : a->lse.strides[0];
    p.lse_h = a->lse.strides[packed ? 0 : 1];
    p.lse_s = a->lse.strides[packed ? 1 : 2];
  }
  const int q_last = a->q.rank - 1, k_last = a->k.rank - 1;
  p.seq_q = a->q.rank == 4 ? a->q.shape[1] : 0;
  p.seq_kv = a->k.rank == 4 ? a->k.shape[1] : 0;
  p.heads_q = a->q.shape[q_last - 1];
  p.heads_kv = a->k.shape[k_last - 1];
  p.head_dim = a->q.shape[q_last];
  p.group = (int32_t)(p.heads_q / p.heads_kv);
  p.window_left = a->window_left < 0 ? -1 : a->window_left;
  p.window_right = a->window_right < 0 ? -1 : a->window_right;
  p.scale_log2 = a->scale * 1.4426950408889634f;
  attention_serving(queue, a, &p);
  const int64_t batch = p.batch;
  if (batch == 0 || p.heads_q == 0)
    return TSR_OK;
  if (!p.serving && p.seq_q == 0)
    return TSR_OK;
  tsr_status status;
  if (c->kind == GPU_ATTENTION_FLASH && !c->serving) {
    return gpu_launch(queue, prepared->kernel, (uint64_t)gpu_ceil_div(p.seq_q, c->block_q),
                      (unsigned)p.heads_q, (unsigned)batch, (unsigned)c->warps * 32,
                      (unsigned)c->smem, &p);
  } else if (c->kind == GPU_ATTENTION_FLASH) {
    /* Serving form: grid (Hq, batch, query tiles of the longest sequence's
     * bound, at least one so that every sequence's indices are checked),
     * tile-major so that the costliest tiles launch first; the varlen form:
     * (query tiles, Hq, batch) (attention.cu's flash_serving_at says why) */
    int64_t tiles = gpu_ceil_div(p.max_seqlen_q, c->block_q); /* serving: <= 65535 (select.c) */
    if (tiles < 1)
      tiles = 1;
    if (c->serving == 2)
      status = gpu_launch(queue, prepared->kernel, (uint64_t)tiles, (unsigned)p.heads_q,
                          (unsigned)batch, (unsigned)c->warps * 32, (unsigned)c->smem, &p);
    else
      status = gpu_launch(queue, prepared->kernel, (uint64_t)p.heads_q, (unsigned)batch,
                          (unsigned)tiles, (unsigned)c->warps * 32, (unsigned)c->smem, &p);
  } else if (c->kind == GPU_ATTENTION_DECODE) {
    status = run_decode(queue, &p, prepared, a->q.dtype);
  } else {
    int tile = gpu_attention_generic_tile(p.head_dim, queue->device->dynamic_smem_limit);
    p.kv_tile = tile;
    /* Serving: at least one row tile, so that every sequence's indices are
     * checked even when no sequence has query rows. */
    int64_t tiles = gpu_ceil_div(p.max_seqlen_q, TSR_GPU_ATTN_ROWS);
    if (p.serving && tiles < 1)
      tiles = 1;
    status =
        gpu_launch(queue, prepared->kernel, (uint64_t)tiles, (unsigned)p.heads_q, (unsigned)batch,
                   128, (unsigned)TSR_GPU_ATTN_GENERIC_SMEM(p.head_dim, (int64_t)tile), &p);
  }
  /* serving problems read device indices: queue_finish reads the fault words */
  if (status == TSR_OK && p.serving)
    queue->status_armed = true;
  return status;
}

/* ------------------------------------------------------------------------ */
/* kv_append                                                                 */
/* ------------------------------------------------------------------------ */

/* Whole 16-byte vectors along D: unit stride there, 16-byte aligned starts,
 * other strides whole vectors. */
static bool kv_vectorizable(const tsr_plugin_tensor *t, int esize) {
  if (!t->buffer)
    return true;
  const int last = t->rank - 1;
  if ((t->strides[last] != 1 && t->shape[last] > 1) || gpu_tensor_address(t) % 16 != 0 ||
      (t->shape[last] * esize) % 16 != 0)
    return false;
  for (int d = 0; d < last; d++)
    if (t->shape[d] > 1 && (t->strides[d] * esize) % 16 != 0)
      return false;
  return true;
}

static tsr_status run_kv_append(gpu_queue *queue, const tsr_kv_append_args *a,
                                const gpu_elementwise_prepared *c) {
  tsr_gpu_kv_append_params p;
  memset(&p, 0, sizeof p);
  const int esize = gpu_element_size(a->k_new.dtype);
  const int64_t dim = a->k_new.shape[2];
  p.k_new = gpu_tensor_address(&a->k_new);
  p.k_cache = gpu_tensor_address(&a->k_cache);
  p.slots = gpu_tensor_address(&a->slots);
  p.slots_stride = a->slots.strides[0];
  p.faults = queue->status;
  p.has_v = a->v_new.buffer && a->v_cache.buffer;
  if (p.has_v) {
    p.v_new = gpu_tensor_address(&a->v_new);
    p.v_cache = gpu_tensor_address(&a->v_cache);
    p.vn_t = a->v_new.strides[0];
    p.vn_h = a->v_new.strides[1];
    p.vn_d = a->v_new.strides[2];
    p.vc_b = a->v_cache.strides[0];
    p.vc_s = a->v_cache.strides[1];
    p.vc_h = a->v_cache.strides[2];
    p.vc_d = a->v_cache.strides[3];
  }
  p.kn_t = a->k_new.strides[0];
  p.kn_h = a->k_new.strides[1];
  p.kn_d = a->k_new.strides[2];
  p.kc_b = a->k_cache.strides[0];
  p.kc_s = a->k_cache.strides[1];
  p.kc_h = a->k_cache.strides[2];
  p.kc_d = a->k_cache.strides[3];
  p.rows = a->k_new.shape[0];
  p.heads = a->k_new.shape[1];
  p.block_size = a->k_cache.shape[1];
  p.slot_count = a->k_cache.shape[0] * a->k_cache.shape[1];
  p.vec = kv_vectorizable(&a->k_new, esize) && kv_vectorizable(&a->k_cache, esize) &&
          kv_vectorizable(&a->v_new, esize) && kv_vectorizable(&a->v_cache, esize);
  p.units = p.vec ? dim * esize / 16 : dim;
  const int64_t total = p.rows * p.heads * p.units;
  if (total == 0)
    return TSR_OK;
  int64_t blocks = gpu_ceil_div(total, c->config->threads);
  const int64_t most = (int64_t)queue->device->props->multiprocessors * 32;
  tsr_status status = gpu_launch(queue, c->kernel, (uint64_t)(blocks < most ? blocks : most), 1, 1,
                                 (unsigned)c->config->threads, 0, &p);
  if (status == TSR_OK)
    queue->status_armed = true;
  return status;
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
  int esize = gpu_element_size(t->dtype);
  if (t->strides[t->rank - 1] != 1 && t->shape[t->rank - 1] > 1)
    return false;
  if (gpu_tensor_address(t) % 16 != 0)
    return false;
  for (int d = 0; d + 1 < t->rank; d++)
    if (t->shape[d] > 1 && (t->strides[d] * esize) % 16 != 0)
      return false;
  return true;
}

static uint64_t address_or_zero(const tsr_plugin_tensor *t) {
  return t->buffer ? gpu_tensor_address(t) : 0;
}

/* A norm's weight or bias can be read 16 bytes at a time along x's rows:
 * absent, or x's dtype with a unit stride and a 16-byte aligned start. */
static bool weight_vectorizable(const tsr_plugin_tensor *w, int32_t x_dtype) {
  if (!w->buffer)
    return true;
  return w->dtype == x_dtype && (w->strides[0] == 1 || w->shape[0] <= 1) &&
         gpu_tensor_address(w) % 16 == 0;
}

static tsr_status launch_rows(gpu_queue *queue, tsr_gpu_rows_params *p,
                              const gpu_rows_prepared *prepared, bool may_cache) {
  const int threads = prepared->config->threads;
  if (p->rows == 0)
    return TSR_OK;
  /* Rows that fit the threads' registers are read once into them (see
   * kernels/norm.cu); longer or strided rows take the shared-memory cache.
   * Cross entropy (which never caches) streams any row length in batches of
   * 16-byte loads. */
  int64_t vector = 16 / gpu_element_size(p->dtype);
  p->regs =
      p->vec && p->n % vector == 0 && (p->n <= (int64_t)TSR_GPU_ROW_REGS * threads || !may_cache);
  p->cache_row = !p->regs && may_cache && p->n * 4 <= GPU_ROWS_CACHE_BYTES &&
                 p->n * 4 <= queue->device->dynamic_smem_limit;
  unsigned smem = p->cache_row ? (unsigned)(p->n * 4) : 0;
  int64_t blocks = p->rows < (1 << 20) ? p->rows : (1 << 20);
  /* Cross entropy's register path with 256 threads or more: the kernel
   * with half the batch (4 chunks in flight a thread), half the registers. */
  bool half_batch = p->regs && !may_cache && threads >= 256;
  return gpu_launch(queue, half_batch ? prepared->kernel_b4 : prepared->kernel, (uint64_t)blocks, 1,
                    1, (unsigned)threads, smem, p);
}

/* The row tensor x and, for the norms and softmax, the output y. */
static void rows_common(tsr_gpu_rows_params *p, const tsr_plugin_tensor *x,
                        const tsr_plugin_tensor *y) {
  memset(p, 0, sizeof *p);
  p->x = gpu_tensor_address(x);
  lead_of(x, p->lead, p->x_lead, &p->x_col);
  p->rows = tsr_plugin_row_count(x);
  p->n = x->shape[x->rank - 1];
  p->dtype = x->dtype;
  p->vec = rows_vectorizable(x);
  if (y) {
    int64_t lead[3];
    p->y = gpu_tensor_address(y);
    lead_of(y, lead, p->y_lead, &p->y_col);
    p->vec = p->vec && rows_vectorizable(y);
  }
}

/* A norm's weight along the row (absent: address 0, x's dtype). */
static void rows_weight(tsr_gpu_rows_params *p, const tsr_plugin_tensor *weight, float eps) {
  p->weight = address_or_zero(weight);
  p->weight_stride = weight->buffer ? weight->strides[0] : 0;
  p->weight_dtype = weight->buffer ? weight->dtype : p->dtype;
  p->eps = eps;
}

static tsr_status run_rmsnorm(gpu_queue *queue, const tsr_rmsnorm_args *a,
                              const gpu_rows_prepared *c) {
  tsr_gpu_rows_params p;
  rows_common(&p, &a->x, &a->y);
  int64_t lead[3];
  if (a->residual.buffer) {
    p.residual = gpu_tensor_address(&a->residual);
    lead_of(&a->residual, lead, p.residual_lead, &p.residual_col);
  }
  if (a->residual_out.buffer) {
    p.residual_out = gpu_tensor_address(&a->residual_out);
    lead_of(&a->residual_out, lead, p.residual_out_lead, &p.residual_out_col);
  }
  rows_weight(&p, &a->weight, a->eps);
  p.vec = p.vec && rows_vectorizable(&a->residual) && rows_vectorizable(&a->residual_out);
  p.weight_vec = weight_vectorizable(&a->weight, a->x.dtype);
  return launch_rows(queue, &p, c, true);
}

static tsr_status run_layernorm(gpu_queue *queue, const tsr_layernorm_args *a,
                                const gpu_rows_prepared *c) {
  tsr_gpu_rows_params p;
  rows_common(&p, &a->x, &a->y);
  rows_weight(&p, &a->weight, a->eps);
  p.bias = address_or_zero(&a->bias);
  p.bias_stride = a->bias.buffer ? a->bias.strides[0] : 0;
  if (!a->weight.buffer && a->bias.buffer)
    p.weight_dtype = a->bias.dtype;
  p.weight_vec =
      weight_vectorizable(&a->weight, a->x.dtype) && weight_vectorizable(&a->bias, a->x.dtype);
  return launch_rows(queue, &p, c, true);
}

static tsr_status run_softmax(gpu_queue *queue, const tsr_softmax_args *a,
                              const gpu_rows_prepared *c) {
  tsr_gpu_rows_params p;
  rows_common(&p, &a->x, &a->y);
  p.scale = a->scale;
  return launch_rows(queue, &p, c, true);
}

static tsr_status run_cross_entropy(gpu_queue *queue, const tsr_cross_entropy_args *a,
                                    const gpu_rows_prepared *c) {
  tsr_gpu_rows_params p;
  rows_common(&p, &a->logits, NULL);
  p.targets = gpu_tensor_address(&a->targets);
  p.targets_stride = a->targets.strides[0];
  p.loss = gpu_tensor_address(&a->loss);
  p.loss_stride = a->loss.strides[0];
  p.lse = address_or_zero(&a->lse);
  p.lse_stride = a->lse.buffer ? a->lse.strides[0] : 0;
  p.ignore_index = a->ignore_index;
  p.status = queue->status;
  tsr_status status = launch_rows(queue, &p, c, false);
  if (status == TSR_OK && p.rows > 0) {
    queue->status_armed = true;
    queue->fault_context.vocab = p.n;
    queue->fault_context.ignore_index = a->ignore_index;
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
  return gpu_tensor_address(t) % 16 == 0;
}

static tsr_status run_unary(gpu_queue *queue, const tsr_plugin_tensor *x,
                            const tsr_plugin_tensor *up, const tsr_plugin_tensor *y,
                            int32_t approximate, const gpu_elementwise_prepared *c) {
  tsr_gpu_elementwise_params p;
  memset(&p, 0, sizeof p);
  int64_t shape[4];
  p.x = gpu_tensor_address(x);
  p.y = gpu_tensor_address(y);
  pad4(x, p.shape, p.x_strides);
  pad4(y, shape, p.y_strides);
  if (up) {
    p.up = gpu_tensor_address(up);
    pad4(up, shape, p.up_strides);
  }
  p.total = p.shape[0] * p.shape[1] * p.shape[2] * p.shape[3];
  p.dtype = x->dtype;
  p.approximate = approximate;
  p.vec = dense_aligned(x) && dense_aligned(y) && (!up || dense_aligned(up));
  int64_t work = p.vec ? gpu_ceil_div(p.total, 16 / gpu_element_size(p.dtype)) : p.total;
  if (work == 0)
    return TSR_OK;
  int64_t blocks = gpu_ceil_div(work, c->config->threads);
  int64_t most = (int64_t)queue->device->props->multiprocessors * 32;
  if (blocks > most)
    blocks = most;
  return gpu_launch(queue, c->kernel, (uint64_t)blocks, 1, 1, (unsigned)c->config->threads, 0, &p);
}

static tsr_status run_rope(gpu_queue *queue, const tsr_rope_args *a,
                           const gpu_elementwise_prepared *c) {
  tsr_gpu_elementwise_params p;
  memset(&p, 0, sizeof p);
  int64_t shape[4];
  p.x = gpu_tensor_address(&a->x);
  p.y = gpu_tensor_address(&a->y);
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
  const unsigned threads = (unsigned)c->config->threads;
  int64_t tokens = p.shape[0] * p.shape[1];
  /* The 16-byte path (see rope_vec): unit channel strides, 16-byte aligned
   * head rows, head and rotary dims in whole vectors. */
  int64_t v = 16 / gpu_element_size(p.dtype);
  bool vec = p.x_strides[3] == 1 && p.y_strides[3] == 1 && p.shape[3] % v == 0 &&
             p.rotary_dim % (a->style == TSR_ROPE_NEOX ? 2 * v : v) == 0 &&
             gpu_tensor_address(&a->x) % 16 == 0 && gpu_tensor_address(&a->y) % 16 == 0;
  for (int d = 0; d < 3 && vec; d++)
    vec = (p.shape[d] <= 1 || (p.x_strides[d] % v == 0 && p.y_strides[d] % v == 0));
  if (vec) {
    p.vec = 1;
    int64_t slots = (a->style == TSR_ROPE_NEOX ? p.rotary_dim / 2 : p.rotary_dim) / v +
                    (p.shape[3] - p.rotary_dim) / v;
    int64_t groups = gpu_ceil_div(p.shape[2], TSR_GPU_ROPE_HEADS);
    int64_t blocks = gpu_ceil_div(tokens * groups * slots, threads);
    int64_t most = (int64_t)queue->device->props->multiprocessors * 32;
    return gpu_launch(queue, c->kernel, (uint64_t)(blocks < most ? blocks : most), 1, 1, threads, 0,
                      &p);
  }
  /* A block per token, grid-stride beyond a few waves (see rope_body). */
  int64_t most = (int64_t)queue->device->props->multiprocessors * 16;
  return gpu_launch(queue, c->kernel, (uint64_t)(tokens < most ? tokens : most), 1, 1, threads, 0,
                    &p);
}

/* ------------------------------------------------------------------------ */
/* The entry                                                                 */
/* ------------------------------------------------------------------------ */

tsr_status gpu_op_run(void *handle, tsr_op op, const void *args, const void *config) {
  gpu_queue *queue = handle;
  const gpu_prepared *prepared = config;
  if (!tsr_plugin_op_known(op) || !prepared || !((prepared->ops >> (unsigned)op) & 1u))
    return tsr_plugin_fail(&queue->device->plugin->host, TSR_ERROR_UNSUPPORTED,
                           "op %d is unknown or its config is not one of this op", (int)op);
  tsr_plugin_any_args copy;
  args = gpu_args_view(op, args, &copy);
  tsr_status status = gpu_enter(queue->device);
  if (status != TSR_OK)
    return status;
  switch (op) {
  case TSR_OP_GEMM:
    return gpu_run_gemm(queue, args, config);
  case TSR_OP_GROUPED_GEMM:
    return gpu_run_grouped_gemm(queue, args, config);
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
    return run_unary(queue, &a->gate, &a->up, &a->y, 0, config);
  }
  case TSR_OP_GELU: {
    const tsr_gelu_args *a = args;
    return run_unary(queue, &a->x, NULL, &a->y, a->approximate, config);
  }
  case TSR_OP_ROPE:
    return run_rope(queue, args, config);
  case TSR_OP_KV_APPEND:
    return run_kv_append(queue, args, config);
  default:
    return tsr_plugin_fail(&queue->device->plugin->host, TSR_ERROR_UNSUPPORTED, "op %d is unknown",
                           (int)op);
  }
}
