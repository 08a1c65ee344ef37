/* SPDX-License-Identifier: Apache-2.0 */
/* What a problem is, in words and numbers: its one-line description, its
 * SHAPE (parsed and printed), and the work it does (flops, bytes). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "problem_internal.h"

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

void problem_append(char *buf, size_t capacity, const char *fmt, ...) {
  size_t used = strlen(buf);
  if (used + 1 >= capacity)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + used, capacity - used, fmt, ap);
  va_end(ap);
}

int64_t problem_group_total(const grouped_gemm_spec *g) {
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
      problem_append(buf, capacity, "%lldx", (long long)g->batch);
    problem_append(buf, capacity, "%lldx%lldx%lld", (long long)g->m, (long long)g->n,
                   (long long)g->k);
    if (g->trans_a)
      problem_append(buf, capacity, " trans_a");
    if (g->trans_b)
      problem_append(buf, capacity, " trans_b");
    if (g->share_b)
      problem_append(buf, capacity, " shared_b");
    if (g->alpha != 1.0f)
      problem_append(buf, capacity, " alpha=%g", (double)g->alpha);
    if (g->has_c)
      problem_append(buf, capacity, " %s beta=%g", g->c_in_place ? "c=d" : "c", (double)g->beta);
    if (g->has_bias)
      problem_append(buf, capacity, " bias");
    if (g->activation != TSR_ACT_NONE)
      problem_append(buf, capacity, " %s", activation_name(g->activation));
    if (g->out_f32)
      problem_append(buf, capacity, " out=f32");
    break;
  }
  case TSR_OP_GROUPED_GEMM: {
    const grouped_gemm_spec *g = &spec->grouped;
    problem_append(buf, capacity, "groups=[");
    for (int64_t i = 0; i < g->group_count; i++)
      problem_append(buf, capacity, "%s%lld", i ? "," : "", (long long)g->group_sizes[i]);
    problem_append(buf, capacity, "] n=%lld k=%lld", (long long)g->n, (long long)g->k);
    if (g->alpha != 1.0f)
      problem_append(buf, capacity, " alpha=%g", (double)g->alpha);
    if (g->has_bias)
      problem_append(buf, capacity, " bias");
    if (g->activation != TSR_ACT_NONE)
      problem_append(buf, capacity, " %s", activation_name(g->activation));
    if (g->out_f32)
      problem_append(buf, capacity, " out=f32");
    break;
  }
  case TSR_OP_ATTENTION: {
    const attention_spec *a = &spec->attention;
    problem_append(buf, capacity, "b=%lld hq=%lld hkv=%lld sq=%lld skv=%lld d=%lld",
                   (long long)a->batch, (long long)a->heads_q, (long long)a->heads_kv,
                   (long long)a->seq_q, (long long)a->seq_kv, (long long)a->head_dim);
    if (a->bhsd)
      problem_append(buf, capacity, " bhsd");
    if (a->causal)
      problem_append(buf, capacity, " causal");
    if (a->window_left >= 0 || (!a->causal && a->window_right >= 0))
      problem_append(buf, capacity, " window=(%lld,%lld)", (long long)a->window_left,
                     (long long)a->window_right);
    if (a->scale != 0.0f)
      problem_append(buf, capacity, " scale=%g", (double)a->scale);
    if (a->has_lse)
      problem_append(buf, capacity, " lse");
    if (attention_is_serving(a)) {
      if (a->packed_q)
        problem_append(buf, capacity, " packed_q");
      if (a->kv_layout == KV_PACKED)
        problem_append(buf, capacity, " packed_kv");
      if (a->kv_layout == KV_PAGED)
        problem_append(buf, capacity, " paged(bs=%lld pool=%lld%s%s)", (long long)a->block_size,
                       (long long)attention_pool_blocks(a), a->shared_blocks ? " shared" : "",
                       a->table_slack ? " slack" : "");
      else if (a->seqlens_kv)
        problem_append(buf, capacity, " seqlens_kv");
      if (a->softcap != 0.0f)
        problem_append(buf, capacity, " softcap=%g", (double)a->softcap);
      if (!a->hint_lengths)
        problem_append(buf, capacity, " no_hints");
      if (a->packed_q || a->kv_layout != KV_DENSE || a->seqlens_kv) {
        problem_append(buf, capacity, " lens(q:kv)=");
        for (int64_t b = 0; b < a->batch && b < 6; b++)
          problem_append(buf, capacity, "%s%lld:%lld", b ? "," : "",
                         (long long)attention_q_len(a, b), (long long)attention_kv_len(a, b));
        if (a->batch > 6)
          problem_append(buf, capacity, ",...");
      }
    }
    break;
  }
  case TSR_OP_KV_APPEND: {
    const kv_append_spec *k = &spec->kv_append;
    problem_append(buf, capacity, "t=%lld hkv=%lld d=%lld cache=%lldx%lld", (long long)k->rows,
                   (long long)k->heads, (long long)k->head_dim, (long long)k->blocks,
                   (long long)k->block_size);
    if (!k->values)
      problem_append(buf, capacity, " keys_only");
    if (k->strided_new)
      problem_append(buf, capacity, " strided");
    if (k->skip_every)
      problem_append(buf, capacity, " skip_every=%lld", (long long)k->skip_every);
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
    problem_append(buf, capacity, "%s", shape);
    if (r->pad)
      problem_append(buf, capacity, " row_pad=%lld", (long long)r->pad);
    if (r->has_residual)
      problem_append(buf, capacity, " residual");
    if (r->has_residual_out)
      problem_append(buf, capacity, " residual_out");
    if (r->has_weight)
      problem_append(buf, capacity, " weight%s", r->weight_f32 ? "(f32)" : "");
    if (r->has_bias)
      problem_append(buf, capacity, " bias");
    if (r->eps != 0.0f)
      problem_append(buf, capacity, " eps=%g", (double)r->eps);
    if (spec->op == TSR_OP_SOFTMAX && r->scale != 0.0f)
      problem_append(buf, capacity, " scale=%g", (double)r->scale);
    if (r->masked)
      problem_append(buf, capacity, " -inf entries");
    if (spec->op == TSR_OP_GELU)
      problem_append(buf, capacity, " %s", r->approximate == TSR_GELU_TANH ? "tanh" : "erf");
    break;
  }
  case TSR_OP_ROPE: {
    const rope_spec *r = &spec->rope;
    problem_append(buf, capacity, "b=%lld s=%lld h=%lld d=%lld %s", (long long)r->batch,
                   (long long)r->seq, (long long)r->heads, (long long)r->head_dim,
                   r->style == TSR_ROPE_GPTJ ? "gptj" : "neox");
    if (r->rotary_dim)
      problem_append(buf, capacity, " rotary_dim=%d", (int)r->rotary_dim);
    if (r->position_offset)
      problem_append(buf, capacity, " offset=%lld", (long long)r->position_offset);
    if (r->theta != 0.0f)
      problem_append(buf, capacity, " theta=%g", (double)r->theta);
    if (r->in_place)
      problem_append(buf, capacity, " in-place");
    if (r->bhsd)
      problem_append(buf, capacity, " bhsd");
    break;
  }
  case TSR_OP_CROSS_ENTROPY: {
    const cross_entropy_spec *c = &spec->cross_entropy;
    problem_append(buf, capacity, "%lldx%lld", (long long)c->rows, (long long)c->vocab);
    if (c->pad)
      problem_append(buf, capacity, " row_pad=%lld", (long long)c->pad);
    if (c->ignore_every)
      problem_append(buf, capacity, " ignore_index=%lld every %lld rows",
                     (long long)c->ignore_index, (long long)c->ignore_every);
    if (c->has_lse)
      problem_append(buf, capacity, " lse");
    break;
  }
  default:
    problem_append(buf, capacity, "?");
  }
  if (spec->special == SPECIAL_NON_FINITE)
    problem_append(buf, capacity, " NaN/inf inputs");
  else if (spec->special == SPECIAL_LARGE)
    problem_append(buf, capacity, " large inputs");
}

void problem_format_shape(const problem_spec *spec, char *buf, size_t capacity) {
  buf[0] = '\0';
  switch (spec->op) {
  case TSR_OP_GEMM: {
    const gemm_spec *g = &spec->gemm;
    if (g->batch > 1)
      problem_append(buf, capacity, "%lldx", (long long)g->batch);
    problem_append(buf, capacity, "%lldx%lldx%lld", (long long)g->m, (long long)g->n,
                   (long long)g->k);
    if (spec->dtype == TSR_DTYPE_F32 && g->compute == TSR_COMPUTE_TF32)
      problem_append(buf, capacity, " tf32");
    break;
  }
  case TSR_OP_GROUPED_GEMM: {
    const grouped_gemm_spec *g = &spec->grouped;
    problem_append(buf, capacity, "%lldx%lldx%lldx%lld", (long long)g->group_count,
                   (long long)problem_group_total(g), (long long)g->n, (long long)g->k);
    break;
  }
  case TSR_OP_ATTENTION: {
    const attention_spec *a = &spec->attention;
    problem_append(buf, capacity, "%lldx%lldx%lldx%lldx%lldx%lld%s", (long long)a->batch,
                   (long long)a->heads_q, (long long)a->heads_kv, (long long)a->seq_q,
                   (long long)a->seq_kv, (long long)a->head_dim, "");
    attention_format_options(a, buf, capacity);
    if (a->causal)
      problem_append(buf, capacity, " causal");
    break;
  }
  case TSR_OP_KV_APPEND: {
    const kv_append_spec *k = &spec->kv_append;
    problem_append(buf, capacity, "%lldx%lldx%lldx%lldx%lld", (long long)k->rows,
                   (long long)k->heads, (long long)k->head_dim, (long long)k->blocks,
                   (long long)k->block_size);
    break;
  }
  case TSR_OP_ROPE: {
    const rope_spec *r = &spec->rope;
    problem_append(buf, capacity, "%lldx%lldx%lldx%lld", (long long)r->batch, (long long)r->seq,
                   (long long)r->heads, (long long)r->head_dim);
    break;
  }
  case TSR_OP_CROSS_ENTROPY:
    problem_append(buf, capacity, "%lldx%lld", (long long)spec->cross_entropy.rows,
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
         "  attention      BxHqxHkvxSqxSkvxD (add --causal for a causal mask), then\n"
         "                 options :packed :packed_q :paged=BS :lens=LO-HI :softcap=X\n"
         "                 :shared=N (32x32x8x1x8192x128:paged=16:lens=512-8192 is decode)\n"
         "  rmsnorm, layernorm, softmax, swiglu, gelu\n"
         "                 RxN (rows x row length; 1 to 4 extents)\n"
         "  rope           BxSxHxD\n"
         "  cross_entropy  RxV (rows x vocabulary)\n"
         "  kv_append      TxHkvxDxBLOCKSxBLOCK_SIZE (T new rows into the paged cache)\n";
}

bool problem_spec_from_shape(problem_spec *spec, tsr_op op, tsr_dtype dtype, const char *shape,
                             bool causal) {
  size_t capacity = strlen(shape) + 128; /* the whole shape, as typed */
  char *why = malloc(capacity);
  if (why == NULL) {
    cli_error("out of host memory");
    return false;
  }
  bool ok = problem_spec_parse(spec, op, dtype, shape, causal, why, capacity);
  if (!ok)
    cli_error("%s", why);
  free(why);
  return ok;
}

bool problem_spec_parse(problem_spec *spec, tsr_op op, tsr_dtype dtype, const char *shape,
                        bool causal, char *why, size_t capacity) {
  int64_t e[8];
  /* attention's serving options follow the extents after a ':' */
  char extents[128];
  const char *options = strchr(shape, ':');
  size_t extents_length = options ? (size_t)(options - shape) : strlen(shape);
  if (extents_length >= sizeof extents)
    extents_length = sizeof extents - 1;
  memcpy(extents, shape, extents_length);
  extents[extents_length] = '\0';
  int count = options && op != TSR_OP_ATTENTION ? 0 : parse_shape(extents, e, 8);
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
      return options ? attention_parse_options(a, options, why, capacity) : true;
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
  case TSR_OP_KV_APPEND:
    if (count == 5 && e[4] > 0) {
      kv_append_spec *k = &spec->kv_append;
      k->rows = e[0];
      k->heads = e[1];
      k->head_dim = e[2];
      k->blocks = e[3];
      k->block_size = e[4];
      k->values = true;
      return true;
    }
    want = "TxHkvxDxBLOCKSxBLOCK_SIZE";
    break;
  default:
    break;
  }
  snprintf(why, capacity, "shape '%s' does not fit %s: expected %s", shape, tsr_op_name(op),
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

int64_t problem_rows_numel(const rows_spec *r) {
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
    return 2.0 * (double)problem_group_total(&spec->grouped) * (double)spec->grouped.n *
           (double)spec->grouped.k;
  case TSR_OP_ATTENTION: {
    const attention_spec *a = &spec->attention;
    /* q k^T and p v: two multiply-adds per visible pair and channel. */
    if (attention_is_serving(a))
      return 4.0 * (double)a->heads_q * (double)a->head_dim * attention_visible_pairs_total(a);
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
    double t = (double)problem_group_total(g), out = g->out_f32 ? 4.0 : es;
    return t * (double)g->k * es + (double)g->group_count * (double)g->k * (double)g->n * es +
           t * (double)g->n * out + (g->has_bias ? (double)g->group_count * (double)g->n * out : 0);
  }
  case TSR_OP_ATTENTION: {
    const attention_spec *a = &spec->attention;
    double q_rows = 0.0, kv_rows = 0.0; /* what the sequences use, not the pool */
    for (int64_t b = 0; b < a->batch; b++) {
      q_rows += (double)attention_q_len(a, b);
      kv_rows += (double)attention_kv_len(a, b);
    }
    double q = q_rows * (double)(a->heads_q * a->head_dim);
    double kv = kv_rows * (double)(a->heads_kv * a->head_dim);
    return (2.0 * q + 2.0 * kv) * es + (a->has_lse ? 4.0 * q_rows * (double)a->heads_q : 0.0);
  }
  case TSR_OP_RMSNORM:
  case TSR_OP_LAYERNORM:
  case TSR_OP_SOFTMAX:
  case TSR_OP_SWIGLU:
  case TSR_OP_GELU: {
    const rows_spec *r = &spec->rows;
    double n = (double)problem_rows_numel(r), row = (double)r->shape[r->rank - 1];
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
  case TSR_OP_KV_APPEND: {
    const kv_append_spec *k = &spec->kv_append;
    return (k->values ? 4.0 : 2.0) * (double)(k->rows * k->heads * k->head_dim) * es +
           4.0 * (double)k->rows;
  }
  default:
    return 0.0;
  }
}
