/* SPDX-License-Identifier: Apache-2.0 */
#include "problem.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "tessera/reference.h"

/* ------------------------------------------------------------------------ */
/* Descriptions, shapes, work                                                */
/* ------------------------------------------------------------------------ */

static const char *activation_name(tsr_activation activation) {
  switch (activation) {
  case TSR_ACT_RELU:
    return "relu";
  case TSR_ACT_GELU_TANH:
    return "gelu_tanh";
  case TSR_ACT_GELU_ERF:
    return "gelu_erf";
  case TSR_ACT_SILU:
    return "silu";
  default:
    return "none";
  }
}

/* Appends printf output to buf (always terminated, truncates). */
static void append(char *buf, size_t capacity, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t capacity, const char *fmt, ...) {
  size_t used = strlen(buf);
  if (used + 1 >= capacity)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + used, capacity - used, fmt, ap);
  va_end(ap);
}

static int64_t group_total(const grouped_gemm_spec *g) {
  int64_t total = 0;
  for (int64_t i = 0; i < g->group_count; i++)
    total += g->group_sizes[i];
  return total;
}

void problem_describe(const problem_spec *spec, char *buf, size_t capacity) {
  buf[0] = '\0';
  switch (spec->op) {
  case TSR_OP_GEMM: {
    const gemm_spec *g = &spec->gemm;
    if (g->batch > 1)
      append(buf, capacity, "%lldx", (long long)g->batch);
    append(buf, capacity, "%lldx%lldx%lld", (long long)g->m, (long long)g->n, (long long)g->k);
    if (g->trans_a)
      append(buf, capacity, " trans_a");
    if (g->trans_b)
      append(buf, capacity, " trans_b");
    if (g->share_b)
      append(buf, capacity, " shared_b");
    if (g->alpha != 1.0f)
      append(buf, capacity, " alpha=%g", (double)g->alpha);
    if (g->has_c)
      append(buf, capacity, " %s beta=%g", g->c_in_place ? "c=d" : "c", (double)g->beta);
    if (g->has_bias)
      append(buf, capacity, " bias");
    if (g->activation != TSR_ACT_NONE)
      append(buf, capacity, " %s", activation_name(g->activation));
    if (g->out_f32)
      append(buf, capacity, " out=f32");
    break;
  }
  case TSR_OP_GROUPED_GEMM: {
    const grouped_gemm_spec *g = &spec->grouped;
    append(buf, capacity, "groups=[");
    for (int64_t i = 0; i < g->group_count; i++)
      append(buf, capacity, "%s%lld", i ? "," : "", (long long)g->group_sizes[i]);
    append(buf, capacity, "] n=%lld k=%lld", (long long)g->n, (long long)g->k);
    if (g->alpha != 1.0f)
      append(buf, capacity, " alpha=%g", (double)g->alpha);
    if (g->has_bias)
      append(buf, capacity, " bias");
    if (g->activation != TSR_ACT_NONE)
      append(buf, capacity, " %s", activation_name(g->activation));
    if (g->out_f32)
      append(buf, capacity, " out=f32");
    break;
  }
  case TSR_OP_ATTENTION: {
    const attention_spec *a = &spec->attention;
    append(buf, capacity, "b=%lld hq=%lld hkv=%lld sq=%lld skv=%lld d=%lld", (long long)a->batch,
           (long long)a->heads_q, (long long)a->heads_kv, (long long)a->seq_q, (long long)a->seq_kv,
           (long long)a->head_dim);
    if (a->bhsd)
      append(buf, capacity, " bhsd");
    if (a->causal)
      append(buf, capacity, " causal");
    if (a->window_left >= 0 || (!a->causal && a->window_right >= 0))
      append(buf, capacity, " window=(%lld,%lld)", (long long)a->window_left,
             (long long)a->window_right);
    if (a->scale != 0.0f)
      append(buf, capacity, " scale=%g", (double)a->scale);
    if (a->has_lse)
      append(buf, capacity, " lse");
    break;
  }
  case TSR_OP_RMSNORM:
  case TSR_OP_LAYERNORM:
  case TSR_OP_SOFTMAX:
  case TSR_OP_SWIGLU:
  case TSR_OP_GELU: {
    const rows_spec *r = &spec->rows;
    char shape[96];
    format_shape(shape, sizeof shape, r->shape, r->rank);
    append(buf, capacity, "%s", shape);
    if (r->pad)
      append(buf, capacity, " row_pad=%lld", (long long)r->pad);
    if (r->has_residual)
      append(buf, capacity, " residual");
    if (r->has_residual_out)
      append(buf, capacity, " residual_out");
    if (r->has_weight)
      append(buf, capacity, " weight%s", r->weight_f32 ? "(f32)" : "");
    if (r->has_bias)
      append(buf, capacity, " bias");
    if (r->eps != 0.0f)
      append(buf, capacity, " eps=%g", (double)r->eps);
    if (spec->op == TSR_OP_SOFTMAX && r->scale != 0.0f)
      append(buf, capacity, " scale=%g", (double)r->scale);
    if (r->masked)
      append(buf, capacity, " -inf entries");
    if (spec->op == TSR_OP_GELU)
      append(buf, capacity, " %s", r->approximate == TSR_GELU_TANH ? "tanh" : "erf");
    break;
  }
  case TSR_OP_ROPE: {
    const rope_spec *r = &spec->rope;
    append(buf, capacity, "b=%lld s=%lld h=%lld d=%lld %s", (long long)r->batch, (long long)r->seq,
           (long long)r->heads, (long long)r->head_dim,
           r->style == TSR_ROPE_GPTJ ? "gptj" : "neox");
    if (r->rotary_dim)
      append(buf, capacity, " rotary_dim=%d", (int)r->rotary_dim);
    if (r->position_offset)
      append(buf, capacity, " offset=%lld", (long long)r->position_offset);
    if (r->theta != 0.0f)
      append(buf, capacity, " theta=%g", (double)r->theta);
    if (r->in_place)
      append(buf, capacity, " in-place");
    if (r->bhsd)
      append(buf, capacity, " bhsd");
    break;
  }
  case TSR_OP_CROSS_ENTROPY: {
    const cross_entropy_spec *c = &spec->cross_entropy;
    append(buf, capacity, "%lldx%lld", (long long)c->rows, (long long)c->vocab);
    if (c->pad)
      append(buf, capacity, " row_pad=%lld", (long long)c->pad);
    if (c->ignore_every)
      append(buf, capacity, " ignore_index=%lld every %lld rows", (long long)c->ignore_index,
             (long long)c->ignore_every);
    if (c->has_lse)
      append(buf, capacity, " lse");
    break;
  }
  default:
    append(buf, capacity, "?");
  }
  if (spec->special == SPECIAL_NON_FINITE)
    append(buf, capacity, " NaN/inf inputs");
  else if (spec->special == SPECIAL_LARGE)
    append(buf, capacity, " large inputs");
}

void problem_format_shape(const problem_spec *spec, char *buf, size_t capacity) {
  buf[0] = '\0';
  switch (spec->op) {
  case TSR_OP_GEMM: {
    const gemm_spec *g = &spec->gemm;
    if (g->batch > 1)
      append(buf, capacity, "%lldx", (long long)g->batch);
    append(buf, capacity, "%lldx%lldx%lld", (long long)g->m, (long long)g->n, (long long)g->k);
    if (spec->dtype == TSR_DTYPE_F32 && g->compute == TSR_COMPUTE_TF32)
      append(buf, capacity, " tf32");
    break;
  }
  case TSR_OP_GROUPED_GEMM: {
    const grouped_gemm_spec *g = &spec->grouped;
    append(buf, capacity, "%lldx%lldx%lldx%lld", (long long)g->group_count,
           (long long)group_total(g), (long long)g->n, (long long)g->k);
    break;
  }
  case TSR_OP_ATTENTION: {
    const attention_spec *a = &spec->attention;
    append(buf, capacity, "%lldx%lldx%lldx%lldx%lldx%lld%s", (long long)a->batch,
           (long long)a->heads_q, (long long)a->heads_kv, (long long)a->seq_q, (long long)a->seq_kv,
           (long long)a->head_dim, a->causal ? " causal" : "");
    break;
  }
  case TSR_OP_ROPE: {
    const rope_spec *r = &spec->rope;
    append(buf, capacity, "%lldx%lldx%lldx%lld", (long long)r->batch, (long long)r->seq,
           (long long)r->heads, (long long)r->head_dim);
    break;
  }
  case TSR_OP_CROSS_ENTROPY:
    append(buf, capacity, "%lldx%lld", (long long)spec->cross_entropy.rows,
           (long long)spec->cross_entropy.vocab);
    break;
  default:
    format_shape(buf, capacity, spec->rows.shape, spec->rows.rank);
    break;
  }
}

const char *problem_shape_help(void) {
  return "  gemm           MxNxK or BATCHxMxNxK (row-major A [M,K], B [K,N])\n"
         "  grouped_gemm   GxTxNxK (T rows split over G groups as evenly as possible)\n"
         "  attention      BxHqxHkvxSqxSkvxD (add --causal for a causal mask)\n"
         "  rmsnorm, layernorm, softmax, swiglu, gelu\n"
         "                 RxN (rows x row length; 1 to 4 extents)\n"
         "  rope           BxSxHxD\n"
         "  cross_entropy  RxV (rows x vocabulary)\n";
}

bool problem_spec_from_shape(problem_spec *spec, tsr_op op, tsr_dtype dtype, const char *shape,
                             bool causal) {
  int64_t e[8];
  int count = parse_shape(shape, e, 8);
  memset(spec, 0, sizeof *spec);
  spec->op = op;
  spec->dtype = dtype;
  const char *want = NULL;
  switch (op) {
  case TSR_OP_GEMM:
    if (count == 3 || count == 4) {
      gemm_spec *g = &spec->gemm;
      int i = 0;
      g->batch = count == 4 ? e[i++] : 1;
      g->m = e[i++];
      g->n = e[i++];
      g->k = e[i++];
      g->alpha = 1.0f;
      return true;
    }
    want = "MxNxK or BATCHxMxNxK";
    break;
  case TSR_OP_GROUPED_GEMM:
    if (count == 4 && e[0] <= PROBLEM_MAX_GROUPS) {
      grouped_gemm_spec *g = &spec->grouped;
      g->group_count = e[0];
      for (int64_t i = 0; i < e[0]; i++)
        g->group_sizes[i] = e[1] / e[0] + (i < e[1] % e[0] ? 1 : 0);
      g->n = e[2];
      g->k = e[3];
      g->alpha = 1.0f;
      return true;
    }
    want = "GxTxNxK with G <= 64";
    break;
  case TSR_OP_ATTENTION:
    if (count == 6 && e[1] % e[2] == 0) {
      attention_spec *a = &spec->attention;
      a->batch = e[0];
      a->heads_q = e[1];
      a->heads_kv = e[2];
      a->seq_q = e[3];
      a->seq_kv = e[4];
      a->head_dim = e[5];
      a->causal = causal;
      a->window_left = -1;
      a->window_right = causal ? 0 : -1;
      return true;
    }
    want = "BxHqxHkvxSqxSkvxD with Hq a multiple of Hkv";
    break;
  case TSR_OP_RMSNORM:
  case TSR_OP_LAYERNORM:
  case TSR_OP_SOFTMAX:
  case TSR_OP_SWIGLU:
  case TSR_OP_GELU:
    if (count >= 1 && count <= TSR_MAX_RANK) {
      rows_spec *r = &spec->rows;
      r->rank = count;
      memcpy(r->shape, e, sizeof(int64_t) * (size_t)count);
      r->has_weight = op == TSR_OP_RMSNORM || op == TSR_OP_LAYERNORM;
      r->has_bias = op == TSR_OP_LAYERNORM;
      return true;
    }
    want = "RxN (1 to 4 extents)";
    break;
  case TSR_OP_ROPE:
    if (count == 4 && e[3] % 2 == 0) {
      rope_spec *r = &spec->rope;
      r->batch = e[0];
      r->seq = e[1];
      r->heads = e[2];
      r->head_dim = e[3];
      return true;
    }
    want = "BxSxHxD with D even";
    break;
  case TSR_OP_CROSS_ENTROPY:
    if (count == 2) {
      cross_entropy_spec *c = &spec->cross_entropy;
      c->rows = e[0];
      c->vocab = e[1];
      c->ignore_index = -100;
      c->has_lse = true;
      return true;
    }
    want = "RxV";
    break;
  default:
    break;
  }
  cli_error("shape '%s' does not fit %s: expected %s", shape, tsr_op_name(op),
            want ? want : "a known op");
  return false;
}

/* Query/key pairs the mask lets through, per (batch, head). */
static double attention_visible_pairs(const attention_spec *a) {
  double pairs = 0.0;
  int64_t right = a->causal ? 0 : a->window_right;
  for (int64_t i = 0; i < a->seq_q; i++) {
    int64_t p = i + a->seq_kv - a->seq_q;
    int64_t first = 0, last = a->seq_kv - 1;
    if (a->window_left >= 0 && p - a->window_left > first)
      first = p - a->window_left;
    if (right >= 0 && p + right < last)
      last = p + right;
    if (last >= first)
      pairs += (double)(last - first + 1);
  }
  return pairs;
}

static int64_t rows_numel(const rows_spec *r) {
  int64_t n = 1;
  for (int i = 0; i < r->rank; i++)
    n *= r->shape[i];
  return n;
}

double problem_flops(const problem_spec *spec) {
  switch (spec->op) {
  case TSR_OP_GEMM: {
    const gemm_spec *g = &spec->gemm;
    return 2.0 * (double)(g->batch > 1 ? g->batch : 1) * (double)g->m * (double)g->n * (double)g->k;
  }
  case TSR_OP_GROUPED_GEMM:
    return 2.0 * (double)group_total(&spec->grouped) * (double)spec->grouped.n *
           (double)spec->grouped.k;
  case TSR_OP_ATTENTION: {
    const attention_spec *a = &spec->attention;
    /* q k^T and p v: two multiply-adds per visible pair and channel. */
    return 4.0 * (double)a->batch * (double)a->heads_q * (double)a->head_dim *
           attention_visible_pairs(a);
  }
  default:
    return 0.0;
  }
}

double problem_bytes(const problem_spec *spec) {
  double es = (double)tsr_dtype_size(spec->dtype);
  switch (spec->op) {
  case TSR_OP_GEMM: {
    const gemm_spec *g = &spec->gemm;
    double batch = (double)(g->batch > 1 ? g->batch : 1);
    double out = g->out_f32 ? 4.0 : es;
    double bytes = batch * (double)g->m * (double)g->k * es;
    bytes += (g->share_b ? 1.0 : batch) * (double)g->k * (double)g->n * es;
    bytes += batch * (double)g->m * (double)g->n * out * (g->has_c && !g->c_in_place ? 2 : 1);
    if (g->c_in_place)
      bytes += batch * (double)g->m * (double)g->n * out;
    if (g->has_bias)
      bytes += (double)g->n * out;
    return bytes;
  }
  case TSR_OP_GROUPED_GEMM: {
    const grouped_gemm_spec *g = &spec->grouped;
    double t = (double)group_total(g), out = g->out_f32 ? 4.0 : es;
    return t * (double)g->k * es + (double)g->group_count * (double)g->k * (double)g->n * es +
           t * (double)g->n * out + (g->has_bias ? (double)g->group_count * (double)g->n * out : 0);
  }
  case TSR_OP_ATTENTION: {
    const attention_spec *a = &spec->attention;
    double q = (double)(a->batch * a->seq_q * a->heads_q * a->head_dim);
    double kv = (double)(a->batch * a->seq_kv * a->heads_kv * a->head_dim);
    return (2.0 * q + 2.0 * kv) * es +
           (a->has_lse ? 4.0 * (double)(a->batch * a->heads_q * a->seq_q) : 0.0);
  }
  case TSR_OP_RMSNORM:
  case TSR_OP_LAYERNORM:
  case TSR_OP_SOFTMAX:
  case TSR_OP_SWIGLU:
  case TSR_OP_GELU: {
    const rows_spec *r = &spec->rows;
    double n = (double)rows_numel(r), row = (double)r->shape[r->rank - 1];
    double wes = r->weight_f32 ? 4.0 : es;
    double streams = 2.0; /* x in, y out */
    if (spec->op == TSR_OP_SWIGLU)
      streams = 3.0;
    if (r->has_residual)
      streams += 1.0;
    if (r->has_residual_out)
      streams += 1.0;
    return streams * n * es + ((r->has_weight ? 1 : 0) + (r->has_bias ? 1 : 0)) * row * wes;
  }
  case TSR_OP_ROPE: {
    const rope_spec *r = &spec->rope;
    return 2.0 * (double)(r->batch * r->seq * r->heads * r->head_dim) * es;
  }
  case TSR_OP_CROSS_ENTROPY: {
    const cross_entropy_spec *c = &spec->cross_entropy;
    return (double)(c->rows * c->vocab) * es + (double)c->rows * (4.0 + 4.0 + (c->has_lse ? 4 : 0));
  }
  default:
    return 0.0;
  }
}

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
static int64_t view_offset(const tsr_tensor *view, int64_t linear) {
  int64_t offset = 0;
  for (int32_t i = view->rank - 1; i >= 0; i--) {
    offset += (linear % view->shape[i]) * view->strides[i];
    linear /= view->shape[i];
  }
  return offset;
}

/* "name[i,j,k]" for the linear index of a view. */
static void format_index(char *buf, size_t capacity, const char *name, const tsr_tensor *view,
                         int64_t linear) {
  int64_t index[TSR_MAX_RANK] = {0};
  for (int32_t i = view->rank - 1; i >= 0; i--) {
    index[i] = linear % view->shape[i];
    linear /= view->shape[i];
  }
  snprintf(buf, capacity, "%s[", name);
  for (int32_t i = 0; i < view->rank; i++)
    append(buf, capacity, "%s%lld", i ? "," : "", (long long)index[i]);
  append(buf, capacity, "]");
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

static int find_tensor(const problem *p, const char *name) {
  for (int i = 0; i < p->tensor_count; i++)
    if (strcmp(p->tensors[i].name, name) == 0)
      return i;
  return -1;
}

/* The public tensor of a named problem tensor (absent when there is none). */
static tsr_tensor tensor_or_absent(const problem *p, const char *name) {
  int i = find_tensor(p, name);
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
  int64_t t = group_total(g);
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

static void layout_attention(problem *p) {
  const attention_spec *a = &p->spec.attention;
  tsr_dtype dt = p->spec.dtype;
  add_tensor(p, "q", ROLE_INPUT,
             bshd_view(dt, a->batch, a->seq_q, a->heads_q, a->head_dim, a->bhsd));
  add_tensor(p, "k", ROLE_INPUT,
             bshd_view(dt, a->batch, a->seq_kv, a->heads_kv, a->head_dim, a->bhsd));
  add_tensor(p, "v", ROLE_INPUT,
             bshd_view(dt, a->batch, a->seq_kv, a->heads_kv, a->head_dim, a->bhsd));
  add_tensor(p, "o", ROLE_OUTPUT,
             bshd_view(dt, a->batch, a->seq_q, a->heads_q, a->head_dim, a->bhsd));
  if (a->has_lse) {
    int64_t shape[3] = {a->batch, a->heads_q, a->seq_q};
    add_tensor(p, "lse", ROLE_OUTPUT, tsr_tensor_make(NULL, 0, TSR_DTYPE_F32, 3, shape));
  }
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
    d->attention = desc;
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
    int64_t rows = rows_numel(r) / n;
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

static tsr_status fail(problem *p, tsr_status status, const char *what) {
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
      int64_t offset = view_offset(&t->view, e);
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
        return fail(p, status, "allocating device memory");
      t->allocator = options->allocator;
    } else {
      status = tsr_buffer_create(device, t->buffer_bytes, &t->view.buffer);
      if (status != TSR_OK)
        return fail(p, status, "tsr_buffer_create");
    }
    status = tsr_buffer_write(queue, t->view.buffer, 0, t->image, t->buffer_bytes);
    if (status != TSR_OK)
      return fail(p, status, "tsr_buffer_write");
  }
  status = tsr_queue_finish(queue);
  if (status != TSR_OK)
    return fail(p, status, "tsr_queue_finish");
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
  int i = find_tensor(p, name);
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
      return fail(p, status, "tsr_buffer_write");
  }
  tsr_status status = tsr_queue_finish(queue);
  return status == TSR_OK ? TSR_OK : fail(p, status, "tsr_queue_finish");
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

/* ------------------------------------------------------------------------ */
/* Reference and error bounds                                                */
/* ------------------------------------------------------------------------ */

/* The host copy of a buffer's whole contents: the image of the tensor that
 * owns it (aliases share their owner's buffer). */
static const void *host_copy_of(void *user, const tsr_buffer *buffer) {
  const problem *p = user;
  for (int i = 0; i < p->tensor_count; i++)
    if (p->tensors[i].alias < 0 && p->tensors[i].view.buffer == buffer)
      return p->tensors[i].image;
  return NULL;
}

static double *reference_of(problem *p, const char *name) {
  int i = find_tensor(p, name);
  return i < 0 ? NULL : p->tensors[i].reference;
}

/* The core normalises the descriptor (tsr_reference_prepare), so the oracle
 * sees exactly the problem the plugin sees. */
tsr_status problem_reference(problem *p) {
  if (p->tensor_count == 0 || p->tensors[0].image == NULL)
    return TSR_ERROR_INVALID_VALUE; /* built without keep_images */
  tsr_device *device;
  tsr_status status = tsr_buffer_device(p->tensors[0].view.buffer, &device);
  if (status != TSR_OK)
    return status;
  union {
    tsr_gemm_args gemm;
    tsr_grouped_gemm_args grouped;
    tsr_attention_args attention;
    tsr_rmsnorm_args rmsnorm;
    tsr_layernorm_args layernorm;
    tsr_softmax_args softmax;
    tsr_rope_args rope;
    tsr_swiglu_args swiglu;
    tsr_gelu_args gelu;
    tsr_cross_entropy_args cross_entropy;
  } args;
  status = tsr_reference_prepare(device, p->spec.op, problem_descriptor(p), host_copy_of, p, &args,
                                 sizeof args);
  if (status != TSR_OK)
    return status;
  switch (p->spec.op) {
  case TSR_OP_GEMM:
    return tsr_reference_gemm(&args.gemm, reference_of(p, "d"));
  case TSR_OP_GROUPED_GEMM:
    return tsr_reference_grouped_gemm(&args.grouped, reference_of(p, "d"));
  case TSR_OP_ATTENTION:
    return tsr_reference_attention(&args.attention, reference_of(p, "o"), reference_of(p, "lse"));
  case TSR_OP_RMSNORM:
    return tsr_reference_rmsnorm(&args.rmsnorm, reference_of(p, "y"),
                                 reference_of(p, "residual_out"));
  case TSR_OP_LAYERNORM:
    return tsr_reference_layernorm(&args.layernorm, reference_of(p, "y"));
  case TSR_OP_SOFTMAX:
    return tsr_reference_softmax(&args.softmax, reference_of(p, "y"));
  case TSR_OP_ROPE:
    return tsr_reference_rope(&args.rope, reference_of(p, p->spec.rope.in_place ? "x" : "y"));
  case TSR_OP_SWIGLU:
    return tsr_reference_swiglu(&args.swiglu, reference_of(p, "y"));
  case TSR_OP_GELU:
    return tsr_reference_gelu(&args.gelu, reference_of(p, "y"));
  case TSR_OP_CROSS_ENTROPY:
    return tsr_reference_cross_entropy(&args.cross_entropy, reference_of(p, "loss"),
                                       reference_of(p, "lse"));
  default:
    return TSR_ERROR_INVALID_VALUE;
  }
}

/* Error bounds. A correct kernel's normwise relative error comes from
 * rounding its output (a few u_out, including intermediates rounded to the
 * dtype such as attention probabilities), from f32 accumulation over K terms
 * (grows like sqrt(K) for random data), and from single-precision
 * transcendental functions (exp, tanh, erf, rsqrt: a few ulp, also fast
 * hardware versions). The constants leave a margin of several times what a
 * correct kernel shows, while a wrong mask, a missing bias or an off-by-one
 * position changes results by far more (tessera check's self-test shows
 * both sides). */
#define BOUND_OUTPUT 6.0
#define BOUND_ACCUMULATION 8.0
#define BOUND_TRANSCENDENTAL 16.0
/* Elementwise, a value may differ from the reference by this many bounds
 * times (|reference| + rms of the output): catches one wrong edge element
 * that the normwise error of a large output would dilute. */
#define BOUND_ELEMENTWISE 16.0

static double bound_for(tsr_dtype out, double accumulation, bool transcendental, double extra) {
  const double u32 = ldexp(1.0, -24);
  return BOUND_OUTPUT * dtype_unit_roundoff(out) + BOUND_ACCUMULATION * u32 * sqrt(accumulation) +
         (transcendental ? BOUND_TRANSCENDENTAL * ldexp(1.0, -22) : 0.0) + extra;
}

static bool activation_transcendental(tsr_activation activation) {
  return activation == TSR_ACT_GELU_TANH || activation == TSR_ACT_GELU_ERF ||
         activation == TSR_ACT_SILU;
}

static double output_bound(const problem *p, const problem_tensor *t) {
  tsr_dtype dt = p->spec.dtype;
  switch (p->spec.op) {
  case TSR_OP_GEMM:
    return bound_for(t->view.dtype, (double)p->spec.gemm.k,
                     activation_transcendental(p->spec.gemm.activation), 0.0);
  case TSR_OP_GROUPED_GEMM:
    return bound_for(t->view.dtype, (double)p->spec.grouped.k,
                     activation_transcendental(p->spec.grouped.activation), 0.0);
  case TSR_OP_ATTENTION: {
    const attention_spec *a = &p->spec.attention;
    if (strcmp(t->name, "lse") == 0) {
      /* Kernels may fold the scale into q in the input dtype before the
       * product, so lse is held to the dtype's precision, not f32's. */
      return bound_for(dt, (double)a->head_dim, true, 0.0);
    }
    return bound_for(dt, (double)(a->seq_kv + a->head_dim), true, 0.0);
  }
  case TSR_OP_RMSNORM:
  case TSR_OP_LAYERNORM:
  case TSR_OP_SOFTMAX: {
    if (strcmp(t->name, "residual_out") == 0)
      return bound_for(dt, 1.0, false, 0.0);
    const rows_spec *r = &p->spec.rows;
    return bound_for(dt, (double)r->shape[r->rank - 1], true, 0.0);
  }
  case TSR_OP_ROPE: {
    /* Angles are position * theta^(-2i/d) in f32: their absolute error grows
     * with the position, and so does the output's. */
    const rope_spec *r = &p->spec.rope;
    double max_position = (double)(r->position_offset + r->seq);
    return bound_for(dt, 1.0, true, 8.0 * ldexp(1.0, -24) * max_position);
  }
  case TSR_OP_SWIGLU:
  case TSR_OP_GELU:
    return bound_for(dt, 1.0, true, 0.0);
  case TSR_OP_CROSS_ENTROPY:
    return bound_for(TSR_DTYPE_F32, (double)p->spec.cross_entropy.vocab, true, 0.0);
  default:
    return 0.0;
  }
}

/* ------------------------------------------------------------------------ */
/* Verification                                                              */
/* ------------------------------------------------------------------------ */

/* Describes a changed byte outside the outputs' elements. */
static void describe_stray_write(const problem_tensor *t, size_t guard, size_t byte,
                                 unsigned char before, unsigned char after, char *buf,
                                 size_t capacity) {
  size_t data_end = t->buffer_bytes - guard;
  if (byte < guard)
    snprintf(buf, capacity, "guard band before %s overwritten at byte -%zu (0x%02x -> 0x%02x)",
             t->name, guard - byte, before, after);
  else if (byte >= data_end)
    snprintf(buf, capacity, "guard band after %s overwritten at byte +%zu (0x%02x -> 0x%02x)",
             t->name, byte - data_end, before, after);
  else if (t->role == ROLE_INPUT)
    snprintf(buf, capacity, "input %s modified at byte %zu of its data (0x%02x -> 0x%02x)", t->name,
             byte - guard, before, after);
  else
    snprintf(buf, capacity, "padding between elements of %s overwritten at byte %zu", t->name,
             byte - guard);
}

/* Normwise and elementwise error of `observed` against the reference over
 * its finite elements; an infinite reference value must be matched exactly,
 * a NaN one by a NaN where the case expects NaN outputs (else the case is
 * broken), and any other non-finite value fails. */
static bool output_error(const problem_tensor *t, const double *observed, bool nan_outputs,
                         double *error, char *message, size_t capacity) {
  double diff2 = 0.0, ref2 = 0.0;
  int64_t finite = 0;
  for (int64_t e = 0; e < t->numel; e++) {
    double r = t->reference[e], o = observed[e];
    char where[96];
    if (isnan(r)) {
      if (nan_outputs && isnan(o))
        continue;
      format_index(where, sizeof where, t->name, &t->view, e);
      if (nan_outputs)
        snprintf(message, capacity, "%s = %.6g, expected NaN", where, o);
      else
        snprintf(message, capacity,
                 "the reference of %s is NaN but the case expects no NaN outputs (a broken "
                 "case)",
                 where);
      *error = INFINITY;
      return false;
    }
    if (isinf(r)) {
      if (o != r) {
        format_index(where, sizeof where, t->name, &t->view, e);
        snprintf(message, capacity, "%s = %.6g, expected %.6g", where, o, r);
        *error = INFINITY;
        return false;
      }
      continue;
    }
    if (!isfinite(o)) {
      format_index(where, sizeof where, t->name, &t->view, e);
      snprintf(message, capacity, "%s = %.6g (not finite), expected %.6g", where, o, r);
      *error = INFINITY;
      return false;
    }
    diff2 += (o - r) * (o - r);
    ref2 += r * r;
    finite++;
  }
  *error = ref2 > 0.0 ? sqrt(diff2 / ref2) : sqrt(diff2);
  if (*error > t->bound) {
    snprintf(message, capacity, "%s: relative error %.3g > bound %.3g", t->name, *error, t->bound);
    /* Name the worst element too: it usually points at the bug. */
    double worst = -1.0;
    int64_t worst_index = 0;
    for (int64_t e = 0; e < t->numel; e++) {
      double d = fabs(observed[e] - t->reference[e]);
      if (isfinite(t->reference[e]) && d > worst) {
        worst = d;
        worst_index = e;
      }
    }
    char where[96];
    format_index(where, sizeof where, t->name, &t->view, worst_index);
    append(message, capacity, "; worst %s = %.6g, expected %.6g", where, observed[worst_index],
           t->reference[worst_index]);
    return false;
  }
  double rms = finite > 0 ? sqrt(ref2 / (double)finite) : 0.0;
  for (int64_t e = 0; e < t->numel; e++) {
    double r = t->reference[e];
    if (!isfinite(r))
      continue;
    if (fabs(observed[e] - r) > BOUND_ELEMENTWISE * t->bound * (fabs(r) + rms)) {
      char where[96];
      format_index(where, sizeof where, t->name, &t->view, e);
      snprintf(message, capacity,
               "%s = %.6g, expected %.6g (elementwise error beyond %.0f x bound; normwise "
               "%.3g within %.3g)",
               where, observed[e], r, BOUND_ELEMENTWISE, *error, t->bound);
      return false;
    }
  }
  return true;
}

static bool reference_has_nan(const problem *p) {
  for (int i = 0; i < p->tensor_count; i++) {
    const problem_tensor *t = &p->tensors[i];
    for (int64_t e = 0; t->role != ROLE_INPUT && t->reference && e < t->numel; e++)
      if (isnan(t->reference[e]))
        return true;
  }
  return false;
}

tsr_status problem_verify(problem *p, tsr_queue *queue, verify_result *result) {
  memset(result, 0, sizeof *result);
  result->passed = true;
  if (p->tensor_count == 0 || p->tensors[0].image == NULL) {
    snprintf(p->error, sizeof p->error, "problem_verify needs a problem built with keep_images");
    return TSR_ERROR_INVALID_VALUE;
  }
  size_t guard = p->tensors[0].view.offset;
  double worst_ratio = -1.0;
  for (int i = 0; i < p->tensor_count; i++) {
    problem_tensor *t = &p->tensors[i];
    unsigned char *after = malloc(t->buffer_bytes);
    if (after == NULL) {
      snprintf(p->error, sizeof p->error, "out of host memory reading %s back", t->name);
      return TSR_ERROR_OUT_OF_MEMORY;
    }
    tsr_status status = tsr_buffer_read(queue, t->view.buffer, 0, after, t->buffer_bytes);
    if (status != TSR_OK) {
      free(after);
      return fail(p, status, "tsr_buffer_read");
    }
    /* Every byte that is not an output element must be as written. */
    for (size_t b = 0; b < t->buffer_bytes && result->passed; b++) {
      if ((t->output_mask == NULL || !t->output_mask[b]) && after[b] != t->image[b]) {
        describe_stray_write(t, guard, b, t->image[b], after[b], result->message,
                             sizeof result->message);
        result->passed = false;
        result->error = INFINITY;
      }
    }
    if (t->role != ROLE_INPUT) {
      for (int64_t e = 0; e < t->numel; e++)
        t->observed[e] = dtype_load(after + guard, t->view.dtype, view_offset(&t->view, e));
      t->bound = output_bound(p, t);
      if (result->passed) {
        double error = 0.0;
        bool ok = output_error(t, t->observed, p->spec.nan_outputs, &error, result->message,
                               sizeof result->message);
        double ratio = error / t->bound;
        if (!ok || ratio > worst_ratio) {
          worst_ratio = ratio;
          result->error = error;
          result->bound = t->bound;
        }
        if (!ok)
          result->passed = false;
      }
    }
    free(after);
  }
  if (p->spec.nan_outputs && result->passed && !reference_has_nan(p)) {
    snprintf(result->message, sizeof result->message,
             "the case expects NaN outputs but the reference has none (its special inputs "
             "missed)");
    result->passed = false;
    result->error = INFINITY;
  }
  return TSR_OK;
}

void problem_compare(const problem *a, const problem *b, verify_result *result) {
  memset(result, 0, sizeof *result);
  result->passed = true;
  double worst_ratio = -1.0;
  for (int i = 0; i < a->tensor_count && i < b->tensor_count; i++) {
    const problem_tensor *ta = &a->tensors[i], *tb = &b->tensors[i];
    if (ta->role == ROLE_INPUT || ta->observed == NULL || tb->observed == NULL)
      continue;
    /* The difference between the devices, on the reference's scale. */
    double diff2 = 0.0, ref2 = 0.0, worst = -1.0;
    int64_t worst_index = 0;
    bool mismatch = false;
    for (int64_t e = 0; e < ta->numel; e++) {
      double x = ta->observed[e], y = tb->observed[e];
      if (x == y)
        continue; /* includes equal infinities */
      if (isnan(x) && isnan(y) && isnan(ta->reference[e]))
        continue; /* both NaN where NaN is right (verify checked that it is expected) */
      if (!isfinite(x) || !isfinite(y)) {
        mismatch = true;
        worst_index = e;
        break;
      }
      diff2 += (x - y) * (x - y);
      if (fabs(x - y) > worst) {
        worst = fabs(x - y);
        worst_index = e;
      }
    }
    for (int64_t e = 0; e < ta->numel; e++)
      if (isfinite(ta->reference[e]))
        ref2 += ta->reference[e] * ta->reference[e];
    double error = mismatch ? INFINITY : (ref2 > 0.0 ? sqrt(diff2 / ref2) : sqrt(diff2));
    if (error / ta->bound > worst_ratio) {
      worst_ratio = error / ta->bound;
      result->error = error;
      result->bound = ta->bound;
    }
    if (result->passed && error > ta->bound) {
      char where[96];
      format_index(where, sizeof where, ta->name, &ta->view, worst_index);
      snprintf(result->message, sizeof result->message,
               "devices disagree on %s: relative difference %.3g > bound %.3g; worst %s = %.6g "
               "vs %.6g (reference %.6g)",
               ta->name, error, ta->bound, where, ta->observed[worst_index],
               tb->observed[worst_index], ta->reference[worst_index]);
      result->passed = false;
    }
  }
}
