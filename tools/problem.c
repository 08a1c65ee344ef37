/* SPDX-License-Identifier: Apache-2.0 */
/* A problem built on a device: its tensors laid out (with guard bands), the
 * public descriptor, the inputs drawn from a seed, and building, running,
 * resetting and destroying it. The reference and the checks of its outputs
 * are in problem_verify.c, the spec's words and numbers in problem_spec.c. */
#include "problem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "problem_internal.h"

/* ------------------------------------------------------------------------ */
/* Layout                                                                    */
/* ------------------------------------------------------------------------ */

/* A dense view with `pad` extra elements per row (the stride of the second to
 * last dimension) and dense outer dimensions over the padded rows. */
static tsr_tensor padded_view(tsr_dtype dtype, int32_t rank, const int64_t *shape, int64_t pad) {
  tsr_tensor view = tsr_tensor_make(NULL, 0, dtype, rank, shape);
  if (rank >= 2 && pad > 0) {
    int64_t stride = shape[rank - 1] + pad;
    for (int32_t i = rank - 2; i >= 0; i--) {
      view.strides[i] = stride;
      stride *= shape[i];
    }
  }
  return view;
}

/* A view of the storage shape with dimensions d0 and d1 swapped. */
static tsr_tensor transposed_view(tsr_dtype dtype, int32_t rank, const int64_t *storage_shape,
                                  int32_t d0, int32_t d1) {
  return tsr_tensor_transpose(tsr_tensor_make(NULL, 0, dtype, rank, storage_shape), d0, d1);
}

/* Elements from the first to one past the last the view reaches. */
static int64_t view_span(const tsr_tensor *view) {
  int64_t last = 0;
  for (int32_t i = 0; i < view->rank; i++)
    last += (view->shape[i] - 1) * view->strides[i];
  return last + 1;
}

/* Element offset (from the view's first element) of the `linear`-th element
 * in row-major order of its shape. */
int64_t problem_view_offset(const tsr_tensor *view, int64_t linear) {
  int64_t offset = 0;
  for (int32_t i = view->rank - 1; i >= 0; i--) {
    offset += (linear % view->shape[i]) * view->strides[i];
    linear /= view->shape[i];
  }
  return offset;
}

static int add_tensor(problem *p, const char *name, tensor_role role, tsr_tensor view) {
  problem_tensor *t = &p->tensors[p->tensor_count];
  memset(t, 0, sizeof *t);
  t->name = name;
  t->role = role;
  t->view = view;
  t->alias = -1;
  t->numel = tsr_tensor_numel(&view);
  return p->tensor_count++;
}

int problem_find_tensor(const problem *p, const char *name) {
  for (int i = 0; i < p->tensor_count; i++)
    if (strcmp(p->tensors[i].name, name) == 0)
      return i;
  return -1;
}

/* The public tensor of a named problem tensor (absent when there is none). */
static tsr_tensor tensor_or_absent(const problem *p, const char *name) {
  int i = problem_find_tensor(p, name);
  tsr_tensor absent;
  memset(&absent, 0, sizeof absent);
  return i < 0 ? absent : p->tensors[i].view;
}

static void layout_gemm(problem *p) {
  const gemm_spec *g = &p->spec.gemm;
  tsr_dtype dt = p->spec.dtype, out = g->out_f32 ? TSR_DTYPE_F32 : dt;
  bool batched = g->batch > 1;
  int32_t rank = batched ? 3 : 2;
  int64_t lead = batched ? 1 : 0; /* index of the first matrix dimension */
  int64_t shape[3];

  shape[0] = g->batch;
  shape[lead] = g->trans_a ? g->k : g->m;
  shape[lead + 1] = g->trans_a ? g->m : g->k;
  tsr_tensor a = g->trans_a ? transposed_view(dt, rank, shape, (int32_t)lead, (int32_t)lead + 1)
                            : tsr_tensor_make(NULL, 0, dt, rank, shape);
  add_tensor(p, "a", ROLE_INPUT, a);

  /* A shared b is one matrix seen through a batch stride of 0. */
  int32_t b_rank = batched && !g->share_b ? 3 : 2;
  int64_t b_lead = b_rank == 3 ? 1 : 0;
  shape[0] = g->batch;
  shape[b_lead] = g->trans_b ? g->n : g->k;
  shape[b_lead + 1] = g->trans_b ? g->k : g->n;
  tsr_tensor b = g->trans_b
                     ? transposed_view(dt, b_rank, shape, (int32_t)b_lead, (int32_t)b_lead + 1)
                     : tsr_tensor_make(NULL, 0, dt, b_rank, shape);
  if (batched && g->share_b) {
    b.rank = 3;
    b.shape[2] = b.shape[1];
    b.strides[2] = b.strides[1];
    b.shape[1] = b.shape[0];
    b.strides[1] = b.strides[0];
    b.shape[0] = g->batch;
    b.strides[0] = 0;
  }
  add_tensor(p, "b", ROLE_INPUT, b);

  shape[0] = g->batch;
  shape[lead] = g->m;
  shape[lead + 1] = g->n;
  if (g->has_c && !g->c_in_place)
    add_tensor(p, "c", ROLE_INPUT, tsr_tensor_make(NULL, 0, out, rank, shape));
  if (g->has_bias)
    add_tensor(p, "bias", ROLE_INPUT, tsr_tensor_make(NULL, 0, out, 1, &g->n));
  add_tensor(p, "d", g->has_c && g->c_in_place ? ROLE_INOUT : ROLE_OUTPUT,
             tsr_tensor_make(NULL, 0, out, rank, shape));
}

static void layout_grouped(problem *p) {
  const grouped_gemm_spec *g = &p->spec.grouped;
  tsr_dtype dt = p->spec.dtype, out = g->out_f32 ? TSR_DTYPE_F32 : dt;
  int64_t t = problem_group_total(g);
  int64_t shape[3] = {t, g->k, 0};
  add_tensor(p, "a", ROLE_INPUT, tsr_tensor_make(NULL, 0, dt, 2, shape));
  shape[0] = g->group_count;
  shape[1] = g->k;
  shape[2] = g->n;
  add_tensor(p, "b", ROLE_INPUT, tsr_tensor_make(NULL, 0, dt, 3, shape));
  if (g->has_bias) {
    shape[0] = g->group_count;
    shape[1] = g->n;
    add_tensor(p, "bias", ROLE_INPUT, tsr_tensor_make(NULL, 0, out, 2, shape));
  }
  shape[0] = t;
  shape[1] = g->n;
  add_tensor(p, "d", ROLE_OUTPUT, tsr_tensor_make(NULL, 0, out, 2, shape));
}

/* [B, S, H, D], stored as such or as [B, H, S, D] (permuted strides). */
static tsr_tensor bshd_view(tsr_dtype dtype, int64_t b, int64_t s, int64_t h, int64_t d,
                            bool bhsd) {
  if (bhsd) {
    int64_t storage[4] = {b, h, s, d};
    return transposed_view(dtype, 4, storage, 1, 2);
  }
  int64_t shape[4] = {b, s, h, d};
  return tsr_tensor_make(NULL, 0, dtype, 4, shape);
}

/* [rows, H, D] of packed sequences, stored as such or as [H, rows, D]. */
static tsr_tensor packed_view(tsr_dtype dtype, int64_t rows, int64_t h, int64_t d, bool permuted) {
  if (permuted) {
    int64_t storage[3] = {h, rows, d};
    return transposed_view(dtype, 3, storage, 0, 1);
  }
  int64_t shape[3] = {rows, h, d};
  return tsr_tensor_make(NULL, 0, dtype, 3, shape);
}

static void layout_attention(problem *p) {
  const attention_spec *a = &p->spec.attention;
  tsr_dtype dt = p->spec.dtype;
  int64_t total_q = 0, total_kv = 0;
  for (int64_t b = 0; b < a->batch; b++) {
    total_q += attention_q_len(a, b);
    total_kv += attention_kv_len(a, b);
  }
  tsr_tensor q = a->packed_q ? packed_view(dt, total_q, a->heads_q, a->head_dim, a->bhsd)
                             : bshd_view(dt, a->batch, a->seq_q, a->heads_q, a->head_dim, a->bhsd);
  tsr_tensor kv;
  if (a->kv_layout == KV_PACKED) {
    kv = packed_view(dt, total_kv, a->heads_kv, a->head_dim, a->bhsd);
  } else if (a->kv_layout == KV_PAGED) {
    /* [blocks, bs, H, D], or stored [blocks, H, bs, D] as some engines keep it */
    kv = bshd_view(dt, attention_pool_blocks(a), a->block_size, a->heads_kv, a->head_dim, a->bhsd);
  } else {
    kv = bshd_view(dt, a->batch, a->seq_kv, a->heads_kv, a->head_dim, a->bhsd);
  }
  add_tensor(p, "q", ROLE_INPUT, q);
  add_tensor(p, "k", ROLE_INPUT, kv);
  add_tensor(p, "v", ROLE_INPUT, kv);
  add_tensor(p, "o", ROLE_OUTPUT, q);
  if (a->has_lse) {
    int64_t shape[3] = {a->batch, a->heads_q, a->seq_q};
    if (a->packed_q) {
      shape[0] = a->heads_q;
      shape[1] = total_q;
    }
    add_tensor(p, "lse", ROLE_OUTPUT,
               tsr_tensor_make(NULL, 0, TSR_DTYPE_F32, a->packed_q ? 2 : 3, shape));
  }
  int64_t offsets = a->batch + 1;
  if (a->packed_q)
    add_tensor(p, "cu_seqlens_q", ROLE_INPUT, tsr_tensor_make(NULL, 0, TSR_DTYPE_I32, 1, &offsets));
  if (a->kv_layout == KV_PACKED)
    add_tensor(p, "cu_seqlens_kv", ROLE_INPUT,
               tsr_tensor_make(NULL, 0, TSR_DTYPE_I32, 1, &offsets));
  if (a->kv_layout == KV_PAGED) {
    int64_t shape[2] = {a->batch, attention_table_columns(a)};
    add_tensor(p, "block_table", ROLE_INPUT, tsr_tensor_make(NULL, 0, TSR_DTYPE_I32, 2, shape));
  }
  if (a->seqlens_kv || a->kv_layout == KV_PAGED)
    add_tensor(p, "seqlens_kv", ROLE_INPUT, tsr_tensor_make(NULL, 0, TSR_DTYPE_I32, 1, &a->batch));
}

static void layout_kv_append(problem *p) {
  const kv_append_spec *k = &p->spec.kv_append;
  tsr_dtype dt = p->spec.dtype;
  tsr_tensor fresh = packed_view(dt, k->rows, k->heads, k->head_dim, k->strided_new);
  tsr_tensor cache = bshd_view(dt, k->blocks, k->block_size, k->heads, k->head_dim, false);
  add_tensor(p, "k_new", ROLE_INPUT, fresh);
  if (k->values)
    add_tensor(p, "v_new", ROLE_INPUT, fresh);
  add_tensor(p, "k_cache", ROLE_INOUT, cache);
  if (k->values)
    add_tensor(p, "v_cache", ROLE_INOUT, cache);
  add_tensor(p, "slots", ROLE_INPUT, tsr_tensor_make(NULL, 0, TSR_DTYPE_I32, 1, &k->rows));
}

/* The slot of new row t: distinct slots spread over the cache in no order,
 * every skip_every-th one -1 (padding). */
int64_t problem_kv_slot(const kv_append_spec *k, int64_t t) {
  if (k->skip_every > 0 && t % k->skip_every == k->skip_every - 1)
    return -1;
  const int64_t slots = k->blocks * k->block_size;
  int64_t step = slots / 3 + 1;
  for (;; step++) { /* coprime with slots: t -> slot is one to one */
    int64_t x = step, y = slots;
    while (y != 0) {
      int64_t r = x % y;
      x = y;
      y = r;
    }
    if (x == 1)
      break;
  }
  return (t * step + 5) % slots;
}

static void layout_rows(problem *p) {
  const rows_spec *r = &p->spec.rows;
  tsr_dtype dt = p->spec.dtype, wdt = r->weight_f32 ? TSR_DTYPE_F32 : dt;
  tsr_tensor rows = padded_view(dt, r->rank, r->shape, r->pad);
  const int64_t *n = &r->shape[r->rank - 1];
  switch (p->spec.op) {
  case TSR_OP_RMSNORM:
    add_tensor(p, "x", ROLE_INPUT, rows);
    if (r->has_residual)
      add_tensor(p, "residual", ROLE_INPUT, rows);
    if (r->has_weight)
      add_tensor(p, "weight", ROLE_INPUT, tsr_tensor_make(NULL, 0, wdt, 1, n));
    add_tensor(p, "y", ROLE_OUTPUT, rows);
    if (r->has_residual_out)
      add_tensor(p, "residual_out", ROLE_OUTPUT, rows);
    break;
  case TSR_OP_LAYERNORM:
    add_tensor(p, "x", ROLE_INPUT, rows);
    if (r->has_weight)
      add_tensor(p, "weight", ROLE_INPUT, tsr_tensor_make(NULL, 0, wdt, 1, n));
    if (r->has_bias)
      add_tensor(p, "bias", ROLE_INPUT, tsr_tensor_make(NULL, 0, wdt, 1, n));
    add_tensor(p, "y", ROLE_OUTPUT, rows);
    break;
  case TSR_OP_SWIGLU:
    add_tensor(p, "gate", ROLE_INPUT, rows);
    add_tensor(p, "up", ROLE_INPUT, rows);
    add_tensor(p, "y", ROLE_OUTPUT, rows);
    break;
  default: /* softmax, gelu */
    add_tensor(p, "x", ROLE_INPUT, rows);
    add_tensor(p, "y", ROLE_OUTPUT, rows);
    break;
  }
}

static void layout_rope(problem *p) {
  const rope_spec *r = &p->spec.rope;
  tsr_tensor view = bshd_view(p->spec.dtype, r->batch, r->seq, r->heads, r->head_dim, r->bhsd);
  if (r->in_place) {
    add_tensor(p, "x", ROLE_INOUT, view);
  } else {
    add_tensor(p, "x", ROLE_INPUT, view);
    add_tensor(p, "y", ROLE_OUTPUT, view);
  }
}

static void layout_cross_entropy(problem *p) {
  const cross_entropy_spec *c = &p->spec.cross_entropy;
  int64_t shape[2] = {c->rows, c->vocab};
  add_tensor(p, "logits", ROLE_INPUT, padded_view(p->spec.dtype, 2, shape, c->pad));
  add_tensor(p, "targets", ROLE_INPUT, tsr_tensor_make(NULL, 0, TSR_DTYPE_I32, 1, &c->rows));
  add_tensor(p, "loss", ROLE_OUTPUT, tsr_tensor_make(NULL, 0, TSR_DTYPE_F32, 1, &c->rows));
  if (c->has_lse)
    add_tensor(p, "lse", ROLE_OUTPUT, tsr_tensor_make(NULL, 0, TSR_DTYPE_F32, 1, &c->rows));
}

/* Fills the public descriptor from the laid-out (and allocated) tensors. */
static void make_descriptor(problem *p) {
  problem_desc *d = &p->desc;
  memset(d, 0, sizeof *d);
  switch (p->spec.op) {
  case TSR_OP_GEMM: {
    const gemm_spec *g = &p->spec.gemm;
    tsr_gemm_desc desc = TSR_GEMM_DESC_INIT;
    desc.a = tensor_or_absent(p, "a");
    desc.b = tensor_or_absent(p, "b");
    desc.d = tensor_or_absent(p, "d");
    if (g->has_c)
      desc.c = g->c_in_place ? desc.d : tensor_or_absent(p, "c");
    desc.bias = tensor_or_absent(p, "bias");
    desc.alpha = g->alpha;
    desc.beta = g->beta;
    desc.activation = g->activation;
    desc.compute = g->compute;
    d->gemm = desc;
    break;
  }
  case TSR_OP_GROUPED_GEMM: {
    const grouped_gemm_spec *g = &p->spec.grouped;
    tsr_grouped_gemm_desc desc = TSR_GROUPED_GEMM_DESC_INIT;
    desc.a = tensor_or_absent(p, "a");
    desc.b = tensor_or_absent(p, "b");
    desc.bias = tensor_or_absent(p, "bias");
    desc.d = tensor_or_absent(p, "d");
    memcpy(p->group_sizes, g->group_sizes, sizeof p->group_sizes);
    desc.group_sizes = p->group_sizes;
    desc.group_count = g->group_count;
    desc.alpha = g->alpha;
    desc.activation = g->activation;
    d->grouped = desc;
    break;
  }
  case TSR_OP_ATTENTION: {
    const attention_spec *a = &p->spec.attention;
    tsr_attention_desc desc = TSR_ATTENTION_DESC_INIT;
    desc.q = tensor_or_absent(p, "q");
    desc.k = tensor_or_absent(p, "k");
    desc.v = tensor_or_absent(p, "v");
    desc.o = tensor_or_absent(p, "o");
    desc.lse = tensor_or_absent(p, "lse");
    desc.scale = a->scale;
    desc.causal = a->causal;
    desc.window_left = a->window_left;
    desc.window_right = a->window_right;
    desc.cu_seqlens_q = tensor_or_absent(p, "cu_seqlens_q");
    desc.cu_seqlens_kv = tensor_or_absent(p, "cu_seqlens_kv");
    desc.block_table = tensor_or_absent(p, "block_table");
    desc.seqlens_kv = tensor_or_absent(p, "seqlens_kv");
    if (a->hint_lengths) {
      for (int64_t b = 0; b < a->batch; b++) {
        if (a->packed_q && attention_q_len(a, b) > desc.max_seqlen_q)
          desc.max_seqlen_q = attention_q_len(a, b);
        if ((a->kv_layout != KV_DENSE || a->seqlens_kv) &&
            attention_kv_len(a, b) > desc.max_seqlen_kv)
          desc.max_seqlen_kv = attention_kv_len(a, b);
      }
    }
    if (a->fault == FAULT_MAX_SEQLEN_KV)
      desc.max_seqlen_kv--;
    desc.softcap = a->softcap;
    d->attention = desc;
    break;
  }
  case TSR_OP_KV_APPEND: {
    tsr_kv_append_desc desc = TSR_KV_APPEND_DESC_INIT;
    desc.k_new = tensor_or_absent(p, "k_new");
    desc.v_new = tensor_or_absent(p, "v_new");
    desc.k_cache = tensor_or_absent(p, "k_cache");
    desc.v_cache = tensor_or_absent(p, "v_cache");
    desc.slots = tensor_or_absent(p, "slots");
    d->kv_append = desc;
    break;
  }
  case TSR_OP_RMSNORM: {
    tsr_rmsnorm_desc desc = TSR_RMSNORM_DESC_INIT;
    desc.x = tensor_or_absent(p, "x");
    desc.residual = tensor_or_absent(p, "residual");
    desc.weight = tensor_or_absent(p, "weight");
    desc.y = tensor_or_absent(p, "y");
    desc.residual_out = tensor_or_absent(p, "residual_out");
    if (p->spec.rows.eps != 0.0f)
      desc.eps = p->spec.rows.eps;
    d->rmsnorm = desc;
    break;
  }
  case TSR_OP_LAYERNORM: {
    tsr_layernorm_desc desc = TSR_LAYERNORM_DESC_INIT;
    desc.x = tensor_or_absent(p, "x");
    desc.weight = tensor_or_absent(p, "weight");
    desc.bias = tensor_or_absent(p, "bias");
    desc.y = tensor_or_absent(p, "y");
    if (p->spec.rows.eps != 0.0f)
      desc.eps = p->spec.rows.eps;
    d->layernorm = desc;
    break;
  }
  case TSR_OP_SOFTMAX: {
    tsr_softmax_desc desc = TSR_SOFTMAX_DESC_INIT;
    desc.x = tensor_or_absent(p, "x");
    desc.y = tensor_or_absent(p, "y");
    desc.scale = p->spec.rows.scale;
    d->softmax = desc;
    break;
  }
  case TSR_OP_ROPE: {
    const rope_spec *r = &p->spec.rope;
    tsr_rope_desc desc = TSR_ROPE_DESC_INIT;
    desc.x = tensor_or_absent(p, "x");
    desc.y = r->in_place ? desc.x : tensor_or_absent(p, "y");
    desc.position_offset = r->position_offset;
    desc.theta = r->theta;
    desc.rotary_dim = r->rotary_dim;
    desc.style = r->style;
    d->rope = desc;
    break;
  }
  case TSR_OP_SWIGLU: {
    tsr_swiglu_desc desc = TSR_SWIGLU_DESC_INIT;
    desc.gate = tensor_or_absent(p, "gate");
    desc.up = tensor_or_absent(p, "up");
    desc.y = tensor_or_absent(p, "y");
    d->swiglu = desc;
    break;
  }
  case TSR_OP_GELU: {
    tsr_gelu_desc desc = TSR_GELU_DESC_INIT;
    desc.x = tensor_or_absent(p, "x");
    desc.y = tensor_or_absent(p, "y");
    desc.approximate = p->spec.rows.approximate;
    d->gelu = desc;
    break;
  }
  case TSR_OP_CROSS_ENTROPY: {
    tsr_cross_entropy_desc desc = TSR_CROSS_ENTROPY_DESC_INIT;
    desc.logits = tensor_or_absent(p, "logits");
    desc.targets = tensor_or_absent(p, "targets");
    desc.loss = tensor_or_absent(p, "loss");
    desc.lse = tensor_or_absent(p, "lse");
    desc.ignore_index = p->spec.cross_entropy.ignore_index;
    d->cross_entropy = desc;
    break;
  }
  default:
    break;
  }
}

const void *problem_descriptor(problem *p) {
  return &p->desc;
}

/* ------------------------------------------------------------------------ */
/* Inputs                                                                    */
/* ------------------------------------------------------------------------ */

/* Guard bands and padding hold 0xff 0x7f repeated: read as f32, f16, bf16 it
 * is a NaN, so a kernel that reads outside its tensor poisons its output. */
static void poison(unsigned char *bytes, size_t count) {
  for (size_t i = 0; i < count; i++)
    bytes[i] = (i & 1) ? 0x7f : 0xff;
}

/* The magnitude inputs are drawn with: attention queries are scaled so the
 * scores have a standard deviation near 1, a softmax neither flat nor one-hot. */
static double input_scale(const problem *p, const problem_tensor *t) {
  if (p->spec.op == TSR_OP_ATTENTION && strcmp(t->name, "q") == 0)
    return 2.5;
  if (p->spec.op == TSR_OP_CROSS_ENTROPY && strcmp(t->name, "logits") == 0)
    return 3.0;
  return 1.0;
}

/* The large magnitude of SPECIAL_LARGE: 1e30, squares and products of
 * which overflow f32 while fp64 holds them; in f16 (which ends at 65504)
 * 3e4, so that x + residual still fits. */
static double huge_value(tsr_dtype dtype) {
  return dtype == TSR_DTYPE_F16 ? 3.0e4 : 1.0e30;
}

/* SPECIAL_NON_FINITE and SPECIAL_LARGE inputs: true with *value where
 * element `linear` (row-major in the tensor's shape) of t takes a special
 * value instead of the random draw u.
 *   gemm (non-finite): every fifth bias element cycles through +inf, -inf,
 *     NaN, so each activation of the epilogue meets them.
 *   attention (non-finite): of the rows of q ([B, Sq, Hq] flattened) every
 *     fourth from the second has -inf in channel 0 (every key's channel 0
 *     is positive, so each of its scores is -inf: not a row without keys),
 *     the next +inf in channel 1 (scores of both signs), the next NaN in
 *     the last channel; key Skv - 1 of batch 0, kv head 0 has +inf in its
 *     last channel, poisoning exactly the rows that see it.
 *   softmax: non-finite: rows r = 1, 2, 3 (mod 4) get a +inf, a NaN, and
 *     -inf in every third element; large: every element huge * u.
 *   rmsnorm, layernorm (large): every element of x and residual huge * u.
 *   swiglu, gelu: every fifth element of gate / x (and of up, offset)
 *     cycles through +inf, -inf, NaN; large: every third through +-88,
 *     +-100, +-1e4 and +-huge. */
static bool special_input(const problem *p, const problem_tensor *t, int64_t linear, double u,
                          double *value) {
  const special_inputs special = p->spec.special;
  const tsr_dtype dtype = t->view.dtype;
  const int32_t rank = t->view.rank;
  const int64_t n = t->view.shape[rank - 1];
  const int64_t row = linear / n, column = linear % n;
  static const double non_finite[3] = {INFINITY, -INFINITY, NAN};
  switch (p->spec.op) {
  case TSR_OP_ATTENTION: {
    if (special != SPECIAL_NON_FINITE)
      return false;
    if (strcmp(t->name, "q") == 0) {
      const int64_t channel[4] = {-1, 0, n > 1 ? 1 : 0, n - 1};
      const double poison[4] = {0.0, -INFINITY, INFINITY, NAN};
      if (column != channel[row % 4])
        return false;
      *value = poison[row % 4];
      return true;
    }
    if (strcmp(t->name, "k") == 0) {
      const attention_spec *a = &p->spec.attention;
      /* row = (b * Skv + j) * Hkv + h */
      if (row == (a->seq_kv - 1) * a->heads_kv && column == n - 1 && n > 1) {
        *value = INFINITY;
        return true;
      }
      if (column == 0) {
        *value = 0.25 + 0.75 * fabs(u);
        return true;
      }
    }
    return false;
  }
  case TSR_OP_GEMM:
    /* The epilogue's activation meets +inf, -inf and NaN: every fifth
     * element of the bias cycles through them. */
    if (special != SPECIAL_NON_FINITE || strcmp(t->name, "bias") != 0 || linear % 5 != 1)
      return false;
    *value = non_finite[(linear / 5) % 3];
    return true;
  case TSR_OP_SOFTMAX:
    if (special == SPECIAL_LARGE) {
      *value = huge_value(dtype) * u;
      return true;
    }
    if ((row % 4 == 1 && column == n / 2) || (row % 4 == 2 && column == n / 3)) {
      *value = row % 4 == 1 ? INFINITY : NAN;
      return true;
    }
    if (row % 4 == 3 && column % 3 == 0) {
      *value = -INFINITY;
      return true;
    }
    return false;
  case TSR_OP_RMSNORM:
  case TSR_OP_LAYERNORM:
    if (special != SPECIAL_LARGE || strcmp(t->name, "weight") == 0 || strcmp(t->name, "bias") == 0)
      return false;
    *value = huge_value(dtype) * u;
    return true;
  case TSR_OP_SWIGLU:
  case TSR_OP_GELU: {
    const bool second = strcmp(t->name, "up") == 0;
    if (special == SPECIAL_NON_FINITE) {
      if (linear % 5 != (second ? 3 : 1))
        return false;
      *value = non_finite[(linear / 5) % 3];
      return true;
    }
    const double large[8] = {
        88.0, -88.0, 100.0, -100.0, 1e4, -1e4, huge_value(dtype), -huge_value(dtype)};
    if (linear % 3 != (second ? 2 : 1))
      return false;
    *value = large[(linear / 3) % 8];
    return true;
  }
  default:
    return false;
  }
}

static double input_value(const problem *p, const problem_tensor *t, rng *generator,
                          int64_t linear) {
  double u = rng_uniform(generator);
  double special;
  if (p->spec.special != SPECIAL_NONE && special_input(p, t, linear, u, &special))
    return special;
  if (t->view.dtype == TSR_DTYPE_I32 && p->spec.op == TSR_OP_ATTENTION) {
    const attention_spec *a = &p->spec.attention;
    if (strcmp(t->name, "block_table") == 0) {
      const int64_t columns = t->view.shape[1];
      if (a->fault == FAULT_BLOCK_TABLE && linear == columns)
        return (double)attention_pool_blocks(a);
      return (double)attention_block_of(a, linear / columns, linear % columns);
    }
    if (strcmp(t->name, "seqlens_kv") == 0) {
      if (a->fault == FAULT_SEQLENS_KV && linear == 0)
        return (double)(a->kv_layout == KV_PAGED ? attention_table_columns(a) * a->block_size
                                                 : a->seq_kv) +
               1.0;
      return (double)attention_kv_len(a, linear);
    }
    if (a->fault == FAULT_CU_SEQLENS_Q && linear == 2 && strcmp(t->name, "cu_seqlens_q") == 0)
      return (double)(t->view.shape[0] > 0 ? 1 << 20 : 0);
    if (a->fault == FAULT_CU_SEQLENS_KV && linear == 1 && strcmp(t->name, "cu_seqlens_kv") == 0)
      return -3.0;
    int64_t offset = 0; /* cu_seqlens_q / cu_seqlens_kv: the running sums */
    for (int64_t b = 0; b < linear; b++)
      offset +=
          strcmp(t->name, "cu_seqlens_q") == 0 ? attention_q_len(a, b) : attention_kv_len(a, b);
    return (double)offset;
  }
  if (p->spec.op == TSR_OP_KV_APPEND && strcmp(t->name, "slots") == 0) {
    const kv_append_spec *k = &p->spec.kv_append;
    if (k->fault == FAULT_KV_SLOT && linear == 3)
      return (double)(k->blocks * k->block_size);
    return (double)problem_kv_slot(k, linear);
  }
  if (p->spec.op == TSR_OP_CROSS_ENTROPY && strcmp(t->name, "targets") == 0) {
    const cross_entropy_spec *c = &p->spec.cross_entropy;
    if (c->ignore_every > 0 && linear % c->ignore_every == c->ignore_every - 1)
      return (double)c->ignore_index;
    return (double)rng_below(generator, c->vocab);
  }
  if (strcmp(t->name, "weight") == 0)
    return 1.0 + 0.5 * u; /* norm weights sit around 1 */
  if (p->spec.op == TSR_OP_SOFTMAX && p->spec.rows.masked) {
    const rows_spec *r = &p->spec.rows;
    int64_t n = r->shape[r->rank - 1];
    int64_t rows = problem_rows_numel(r) / n;
    /* The last row (when there are several) is fully masked; elsewhere about
     * one entry in six, never a whole row. */
    if ((rows > 1 && linear / n == rows - 1) || (linear % n != 0 && rng_below(generator, 6) == 0))
      return -INFINITY;
  }
  return u * input_scale(p, t);
}

/* ------------------------------------------------------------------------ */
/* Build, run, reset                                                         */
/* ------------------------------------------------------------------------ */

tsr_status problem_fail(problem *p, tsr_status status, const char *what) {
  snprintf(p->error, sizeof p->error, "%s: %s: %s", what, tsr_status_name(status),
           tsr_last_error());
  return status;
}

/* The same values as the element loop of layout_and_fill, drawn in the
 * same order, for a dense tensor whose inputs need no per-element rule
 * (bench fills gigabytes: the general loop's index arithmetic and name
 * lookups per element take tens of seconds there). False: not applicable. */
static bool fill_dense_fast(const problem *p, problem_tensor *t, rng *generator,
                            unsigned char *base, size_t guard) {
  if (view_span(&t->view) != t->numel || t->view.dtype == TSR_DTYPE_I32)
    return false;
  for (int64_t d = t->view.rank - 1, expected = 1; d >= 0; d--) {
    if (t->view.shape[d] > 1 && t->view.strides[d] != expected)
      return false;
    expected *= t->view.shape[d];
  }
  if ((p->spec.op == TSR_OP_SOFTMAX && p->spec.rows.masked) || p->spec.special != SPECIAL_NONE)
    return false;
  if (p->spec.op == TSR_OP_CROSS_ENTROPY && strcmp(t->name, "targets") == 0)
    return false;
  size_t element = tsr_dtype_size(t->view.dtype);
  if (t->role == ROLE_OUTPUT) {
    for (int64_t e = 0; e < t->numel; e++)
      dtype_store_nan(base, t->view.dtype, e);
  } else {
    bool weight = strcmp(t->name, "weight") == 0;
    double scale = input_scale(p, t);
    for (int64_t e = 0; e < t->numel; e++) {
      double u = rng_uniform(generator);
      dtype_store(base, t->view.dtype, e, weight ? 1.0 + 0.5 * u : u * scale);
    }
  }
  if (t->output_mask != NULL)
    memset(t->output_mask + guard, 1, (size_t)t->numel * element);
  return true;
}

/* Lays the problem out and fills every tensor's host image (inputs from
 * `seed`, outputs NaN) between `guard` poisoned bytes; no device involved. */
static tsr_status layout_and_fill(problem *p, const problem_spec *spec, uint64_t seed, size_t guard,
                                  bool keep_images) {
  memset(p, 0, sizeof *p);
  p->spec = *spec;
  switch (spec->op) {
  case TSR_OP_GEMM:
    layout_gemm(p);
    break;
  case TSR_OP_GROUPED_GEMM:
    layout_grouped(p);
    break;
  case TSR_OP_ATTENTION:
    layout_attention(p);
    break;
  case TSR_OP_RMSNORM:
  case TSR_OP_LAYERNORM:
  case TSR_OP_SOFTMAX:
  case TSR_OP_SWIGLU:
  case TSR_OP_GELU:
    layout_rows(p);
    break;
  case TSR_OP_ROPE:
    layout_rope(p);
    break;
  case TSR_OP_CROSS_ENTROPY:
    layout_cross_entropy(p);
    break;
  case TSR_OP_KV_APPEND:
    layout_kv_append(p);
    break;
  default:
    snprintf(p->error, sizeof p->error, "unknown op %d", (int)spec->op);
    return TSR_ERROR_INVALID_VALUE;
  }

  for (int i = 0; i < p->tensor_count; i++) {
    problem_tensor *t = &p->tensors[i];
    size_t element = tsr_dtype_size(t->view.dtype);
    size_t data = (size_t)view_span(&t->view) * element;
    t->buffer_bytes = guard + data + guard;
    t->view.offset = guard;
    t->image = malloc(t->buffer_bytes);
    t->output_mask = t->role == ROLE_INPUT ? NULL : calloc(t->buffer_bytes, 1);
    if (t->image == NULL || (t->role != ROLE_INPUT && t->output_mask == NULL)) {
      snprintf(p->error, sizeof p->error, "out of host memory for %s (%zu bytes)", t->name,
               t->buffer_bytes);
      return TSR_ERROR_OUT_OF_MEMORY;
    }
    if (t->role != ROLE_INPUT && keep_images) {
      t->reference = calloc((size_t)t->numel, sizeof(double));
      t->observed = calloc((size_t)t->numel, sizeof(double));
      if (t->reference == NULL || t->observed == NULL) {
        snprintf(p->error, sizeof p->error, "out of host memory for %s", t->name);
        return TSR_ERROR_OUT_OF_MEMORY;
      }
    }
    poison(t->image, t->buffer_bytes);

    /* Each tensor draws from its own stream, so adding an optional tensor to
     * a case does not change the values of the others. */
    rng generator;
    rng_seed(&generator, seed_mix(seed, (uint64_t)i + 1));
    unsigned char *base = t->image + guard;
    if (fill_dense_fast(p, t, &generator, base, guard))
      continue;
    for (int64_t e = 0; e < t->numel; e++) {
      int64_t offset = problem_view_offset(&t->view, e);
      if (t->role == ROLE_OUTPUT) {
        dtype_store_nan(base, t->view.dtype, offset);
      } else {
        double value = input_value(p, t, &generator, e);
        dtype_store(base, t->view.dtype, offset, value);
      }
      if (t->output_mask != NULL)
        memset(t->output_mask + guard + (size_t)offset * element, 1, element);
    }
  }
  return TSR_OK;
}

tsr_status problem_build(problem *p, const problem_spec *spec, tsr_device *device, tsr_queue *queue,
                         uint64_t seed, const problem_build_options *options) {
  tsr_status status = layout_and_fill(p, spec, seed, options->guard_bytes, options->keep_images);
  if (status != TSR_OK)
    return status;
  for (int i = 0; i < p->tensor_count; i++) {
    problem_tensor *t = &p->tensors[i];
    if (options->allocator != NULL) {
      status = options->allocator->create(options->allocator->user, device, t->buffer_bytes,
                                          &t->view.buffer, &t->device_address);
      if (status != TSR_OK)
        return problem_fail(p, status, "allocating device memory");
      t->allocator = options->allocator;
    } else {
      status = tsr_buffer_create(device, t->buffer_bytes, &t->view.buffer);
      if (status != TSR_OK)
        return problem_fail(p, status, "tsr_buffer_create");
    }
    status = tsr_buffer_write(queue, t->view.buffer, 0, t->image, t->buffer_bytes);
    if (status != TSR_OK)
      return problem_fail(p, status, "tsr_buffer_write");
  }
  status = tsr_queue_finish(queue);
  if (status != TSR_OK)
    return problem_fail(p, status, "tsr_queue_finish");
  if (!options->keep_images) {
    for (int i = 0; i < p->tensor_count; i++) {
      free(p->tensors[i].image);
      free(p->tensors[i].output_mask);
      p->tensors[i].image = NULL;
      p->tensors[i].output_mask = NULL;
    }
  }
  make_descriptor(p);
  return TSR_OK;
}

tsr_status problem_build_host(problem *p, const problem_spec *spec, uint64_t seed) {
  return layout_and_fill(p, spec, seed, 0, false);
}

bool problem_host_data(problem *p, const char *name, void **data, size_t *bytes) {
  int i = problem_find_tensor(p, name);
  if (i < 0)
    return false;
  problem_tensor *t = &p->tensors[i];
  *bytes = (size_t)view_span(&t->view) * tsr_dtype_size(t->view.dtype);
  if (t->image != NULL) {
    *data = t->image + t->view.offset;
    return true;
  }
  void *mapped = NULL;
  if (t->view.buffer == NULL || tsr_buffer_map(t->view.buffer, &mapped) != TSR_OK)
    return false;
  *data = (unsigned char *)mapped + t->view.offset;
  return true;
}

tsr_status problem_run(problem *p, tsr_queue *queue, const char *variant) {
  /* Every descriptor has `variant` at a different place; set it on a copy. */
  problem_desc desc = p->desc;
  switch (p->spec.op) {
  case TSR_OP_GEMM:
    desc.gemm.variant = variant;
    break;
  case TSR_OP_GROUPED_GEMM:
    desc.grouped.variant = variant;
    break;
  case TSR_OP_ATTENTION:
    desc.attention.variant = variant;
    break;
  case TSR_OP_RMSNORM:
    desc.rmsnorm.variant = variant;
    break;
  case TSR_OP_LAYERNORM:
    desc.layernorm.variant = variant;
    break;
  case TSR_OP_SOFTMAX:
    desc.softmax.variant = variant;
    break;
  case TSR_OP_ROPE:
    desc.rope.variant = variant;
    break;
  case TSR_OP_SWIGLU:
    desc.swiglu.variant = variant;
    break;
  case TSR_OP_GELU:
    desc.gelu.variant = variant;
    break;
  case TSR_OP_CROSS_ENTROPY:
    desc.cross_entropy.variant = variant;
    break;
  case TSR_OP_KV_APPEND:
    desc.kv_append.variant = variant;
    break;
  default:
    break;
  }
  return tsr_op_run(queue, p->spec.op, &desc);
}

tsr_status problem_reset(problem *p, tsr_queue *queue) {
  for (int i = 0; i < p->tensor_count; i++) {
    problem_tensor *t = &p->tensors[i];
    if (t->image == NULL || t->role == ROLE_INPUT)
      continue;
    tsr_status status = tsr_buffer_write(queue, t->view.buffer, 0, t->image, t->buffer_bytes);
    if (status != TSR_OK)
      return problem_fail(p, status, "tsr_buffer_write");
  }
  tsr_status status = tsr_queue_finish(queue);
  return status == TSR_OK ? TSR_OK : problem_fail(p, status, "tsr_queue_finish");
}

void problem_destroy(problem *p) {
  for (int i = 0; i < p->tensor_count; i++) {
    problem_tensor *t = &p->tensors[i];
    tsr_buffer_destroy(t->view.buffer);
    if (t->allocator != NULL && t->device_address != 0)
      t->allocator->release(t->allocator->user, t->device_address);
    free(t->image);
    free(t->output_mask);
    free(t->reference);
    free(t->observed);
  }
  p->tensor_count = 0;
}
