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

static void copy_strides4(const tsr_plugin_tensor *t, int64_t *b, int64_t *s, int64_t *h,
                          int64_t *d) {
  *b = t->strides[0];
  *s = t->strides[1];
  *h = t->strides[2];
  *d = t->strides[3];
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
    p.has_lse = 1;
    p.lse = gpu_tensor_address(&a->lse);
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
  if (c->kind == GPU_ATTENTION_FLASH)
    return gpu_launch(queue, prepared->kernel, (uint64_t)gpu_ceil_div(p.seq_q, c->block_q),
                      (unsigned)p.heads_q, (unsigned)batch, (unsigned)c->warps * 32,
                      (unsigned)c->smem, &p);
  int tile = gpu_attention_generic_tile(p.head_dim, queue->device->dynamic_smem_limit);
  p.kv_tile = tile;
  return gpu_launch(queue, prepared->kernel, (uint64_t)gpu_ceil_div(p.seq_q, TSR_GPU_ATTN_ROWS),
                    (unsigned)p.heads_q, (unsigned)batch, 128,
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
  default:
    return tsr_plugin_fail(&queue->device->plugin->host, TSR_ERROR_UNSUPPORTED, "op %d is unknown",
                           (int)op);
  }
}
