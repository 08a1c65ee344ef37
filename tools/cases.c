/* SPDX-License-Identifier: Apache-2.0 */
#include "cases.h"

#include <stdint.h>
#include <string.h>

/* Case sizes are kept small enough that the whole table runs in seconds on a
 * two-core CPU with the portable kernels and the plain fp64 reference, while
 * still reaching every remainder path: extents 1, 7, 17, 127, 1793, padded
 * and permuted strides, empty groups and fully masked rows. */

#define MAX_CASES 48

typedef struct case_table {
  int count;
  check_case cases[MAX_CASES];
} case_table;

static void add(case_table *table, problem_spec spec, bool quick) {
  table->cases[table->count].spec = spec;
  table->cases[table->count].quick = quick;
  table->count++;
}

/* NaN and infinities among the inputs (problem.c's special_input says
 * where); the case expects NaN outputs wherever the reference has them. */
static problem_spec non_finite(problem_spec s) {
  s.special = SPECIAL_NON_FINITE;
  s.nan_outputs = true;
  return s;
}

/* Large magnitudes among the inputs (up to 1e30): outputs stay finite. */
static problem_spec large(problem_spec s) {
  s.special = SPECIAL_LARGE;
  return s;
}

static problem_spec gemm(int64_t batch, int64_t m, int64_t n, int64_t k) {
  problem_spec s;
  memset(&s, 0, sizeof s);
  s.op = TSR_OP_GEMM;
  s.gemm.batch = batch;
  s.gemm.m = m;
  s.gemm.n = n;
  s.gemm.k = k;
  s.gemm.alpha = 1.0f;
  return s;
}

static problem_spec with_epilogue(problem_spec s, float alpha, bool c, float beta, bool bias,
                                  tsr_activation activation) {
  s.gemm.alpha = alpha;
  s.gemm.has_c = c;
  s.gemm.beta = beta;
  s.gemm.has_bias = bias;
  s.gemm.activation = activation;
  return s;
}

static problem_spec with_layout(problem_spec s, bool trans_a, bool trans_b) {
  s.gemm.trans_a = trans_a;
  s.gemm.trans_b = trans_b;
  return s;
}

static void gemm_cases(case_table *t) {
  add(t, gemm(1, 1, 1, 1), true);                               /* 0 */
  add(t, gemm(1, 7, 17, 127), false);                           /* 1 */
  add(t, gemm(1, 127, 7, 17), false);                           /* 2 */
  add(t, gemm(1, 17, 1, 7), false);                             /* 3 */
  add(t, with_layout(gemm(1, 64, 64, 64), true, false), false); /* 4 */
  add(t, with_layout(gemm(1, 48, 80, 64), false, true), false); /* 5 */
  add(t, with_layout(gemm(1, 33, 65, 129), true, true), false); /* 6 */
  add(t, gemm(1, 1793, 17, 127), false);                        /* 7 */
  add(t, gemm(1, 17, 17, 1793), false);                         /* 8 */
  add(t, with_epilogue(gemm(1, 65, 33, 127), 0.75f, true, 0.5f, true, TSR_ACT_RELU), true);
  add(t, with_epilogue(gemm(1, 31, 64, 96), 1.0f, false, 0.0f, true, TSR_ACT_GELU_TANH), false);
  add(t, with_epilogue(gemm(1, 31, 64, 96), 1.0f, false, 0.0f, true, TSR_ACT_GELU_ERF), false);
  add(t, with_epilogue(gemm(1, 40, 56, 72), 1.0f, true, -1.0f, true, TSR_ACT_SILU), false);
  problem_spec s = with_layout(gemm(3, 31, 45, 67), false, true); /* 13 */
  s = with_epilogue(s, 1.0f, true, 1.0f, false, TSR_ACT_NONE);
  s.gemm.c_in_place = true;
  add(t, s, true);
  s = with_layout(gemm(4, 20, 24, 28), true, false); /* 14 */
  s.gemm.share_b = true;
  add(t, s, false);
  s = with_epilogue(gemm(1, 37, 29, 41), 1.0f, true, 0.25f, true, TSR_ACT_NONE); /* 15 */
  s.gemm.out_f32 = true;
  add(t, s, false);
  add(t, with_epilogue(gemm(1, 128, 128, 128), -1.5f, false, 0.0f, false, TSR_ACT_NONE), false);
  add(t, gemm(1, 1, 127, 1793), false);             /* 17 */
  s = with_layout(gemm(2, 17, 7, 127), true, true); /* 18 */
  add(t, with_epilogue(s, 1.0f, true, 0.5f, true, TSR_ACT_GELU_ERF), false);
  s = with_epilogue(gemm(1, 100, 100, 100), 1.0f, true, 1.0f, false, TSR_ACT_NONE); /* 19 */
  s.gemm.c_in_place = true;
  add(t, s, false);
  /* Past the CPU's cache blocks in every dimension (N beyond one NC panel,
   * K beyond KC, M beyond MC), with partial blocks at each end. */
  add(t, with_layout(gemm(1, 7, 4099, 33), false, true), false);                    /* 20 */
  s = with_epilogue(gemm(2, 130, 260, 300), 1.0f, false, 0.0f, true, TSR_ACT_SILU); /* 21 */
  add(t, s, false);
  /* +-inf and NaN in the bias through each activation: gelu and silu of -inf
   * are 0, not -inf * 0. */
  static const tsr_activation acts[4] = {TSR_ACT_RELU, TSR_ACT_GELU_TANH, TSR_ACT_GELU_ERF,
                                         TSR_ACT_SILU};
  for (int i = 0; i < 4; i++) /* 22 .. 25 */
    add(t, non_finite(with_epilogue(gemm(1, 9, 23 + 8 * i, 17), 1.0f, false, 0.0f, true, acts[i])),
        false);
}

static problem_spec grouped(const int64_t *sizes, int64_t groups, int64_t n, int64_t k) {
  problem_spec s;
  memset(&s, 0, sizeof s);
  s.op = TSR_OP_GROUPED_GEMM;
  s.grouped.group_count = groups;
  memcpy(s.grouped.group_sizes, sizes, sizeof(int64_t) * (size_t)groups);
  s.grouped.n = n;
  s.grouped.k = k;
  s.grouped.alpha = 1.0f;
  return s;
}

static problem_spec with_grouped_epilogue(problem_spec s, float alpha, bool bias,
                                          tsr_activation activation) {
  s.grouped.alpha = alpha;
  s.grouped.has_bias = bias;
  s.grouped.activation = activation;
  return s;
}

static void grouped_gemm_cases(case_table *t) {
  static const int64_t g0[] = {5, 0, 17, 1};
  static const int64_t g1[] = {0, 7, 127, 1, 0, 33, 2, 0};
  static const int64_t g2[] = {0, 0, 45};
  static const int64_t g3[] = {129};
  static const int64_t g4[] = {31, 1, 64, 0, 17, 7};
  static const int64_t g5[] = {3, 0, 9, 1, 0, 0, 17, 2, 5, 0, 1, 8, 0, 4, 11, 2};
  static const int64_t g6[] = {1793, 3};
  add(t, grouped(g0, 4, 17, 33), true);
  add(t, with_grouped_epilogue(grouped(g1, 8, 48, 64), 1.0f, true, TSR_ACT_SILU), true);
  add(t, with_grouped_epilogue(grouped(g2, 3, 127, 17), 0.5f, true, TSR_ACT_GELU_TANH), false);
  add(t, with_grouped_epilogue(grouped(g3, 1, 65, 127), 1.0f, false, TSR_ACT_RELU), false);
  problem_spec s = with_grouped_epilogue(grouped(g4, 6, 31, 257), 1.0f, true, TSR_ACT_NONE);
  s.grouped.out_f32 = true;
  add(t, s, false);
  add(t, with_grouped_epilogue(grouped(g5, 16, 80, 96), 1.25f, false, TSR_ACT_GELU_ERF), false);
  add(t, grouped(g6, 2, 33, 17), false);
}

static problem_spec attention(int64_t batch, int64_t hq, int64_t hkv, int64_t sq, int64_t skv,
                              int64_t d) {
  problem_spec s;
  memset(&s, 0, sizeof s);
  s.op = TSR_OP_ATTENTION;
  attention_spec *a = &s.attention;
  a->batch = batch;
  a->heads_q = hq;
  a->heads_kv = hkv;
  a->seq_q = sq;
  a->seq_kv = skv;
  a->head_dim = d;
  a->window_left = -1;
  a->window_right = -1;
  return s;
}

static problem_spec causal(problem_spec s) {
  s.attention.causal = true;
  s.attention.window_right = 0;
  return s;
}

static problem_spec with_lse(problem_spec s) {
  s.attention.has_lse = true;
  return s;
}

static problem_spec bhsd(problem_spec s) {
  s.attention.bhsd = true;
  return s;
}

static problem_spec window(problem_spec s, int64_t left, int64_t right) {
  s.attention.window_left = left;
  s.attention.window_right = right;
  return s;
}

/* Serving forms: per-sequence lengths (lens_q may be NULL: dense q). */
static problem_spec serving(problem_spec s, bool packed_q, attention_kv_layout kv,
                            const int64_t *lens_q, const int64_t *lens_kv) {
  attention_spec *a = &s.attention;
  a->packed_q = packed_q;
  a->kv_layout = kv;
  a->seqlens_kv = kv == KV_PAGED || (kv == KV_DENSE && lens_kv != NULL);
  a->hint_lengths = true;
  for (int64_t b = 0; b < a->batch; b++) {
    if (lens_q)
      a->q_lens[b] = lens_q[b];
    if (lens_kv)
      a->kv_lens[b] = lens_kv[b];
    if (lens_q && lens_q[b] > a->seq_q)
      a->seq_q = lens_q[b];
    if (lens_kv && lens_kv[b] > a->seq_kv && kv != KV_DENSE)
      a->seq_kv = lens_kv[b];
  }
  return s;
}

static problem_spec paged(problem_spec s, int64_t block_size, int64_t shared, int64_t spare,
                          int64_t slack) {
  s.attention.block_size = block_size;
  s.attention.shared_blocks = shared;
  s.attention.spare_blocks = spare;
  s.attention.table_slack = slack;
  return s;
}

static problem_spec softcapped(problem_spec s, float cap) {
  s.attention.softcap = cap;
  return s;
}

static problem_spec planted(problem_spec s, planted_fault fault) {
  if (s.op == TSR_OP_KV_APPEND)
    s.kv_append.fault = fault;
  else
    s.attention.fault = fault;
  s.nan_outputs = s.op == TSR_OP_ATTENTION;
  return s;
}

/* Lengths 0 and 1, lengths of no tile's multiple, shuffled and shared
 * blocks, block sizes 8, 16, 24 and 256, GQA 1, 4 and 8, windows with
 * packed sequences, softcap, and seqlens over a padded dense cache. */
static void serving_cases(case_table *t) {
  static const int64_t q24[] = {0, 1, 17, 70};
  add(t, with_lse(causal(serving(attention(4, 4, 1, 0, 0, 64), true, KV_PACKED, q24, q24))), true);
  static const int64_t q25[] = {33, 5, 100};
  add(t, bhsd(serving(attention(3, 2, 2, 0, 0, 32), true, KV_PACKED, q25, q25)), false); /* 25 */
  static const int64_t kv26[] = {300, 0, 37, 1, 129};
  add(t,
      with_lse(
          paged(serving(attention(5, 8, 1, 1, 0, 128), false, KV_PAGED, NULL, kv26), 16, 2, 3, 3)),
      true); /* 26: decode, shared prefix blocks, spare blocks, table slack */
  static const int64_t kv27[] = {9, 200, 64};
  add(t,
      with_lse(causal(
          paged(serving(attention(3, 8, 2, 4, 0, 64), false, KV_PAGED, NULL, kv27), 8, 0, 1, 0))),
      false); /* 27: four query rows per sequence (speculative decode) */
  static const int64_t q28[] = {5, 40, 1}, kv28[] = {20, 40, 90};
  add(t,
      causal(paged(serving(attention(3, 4, 4, 0, 0, 64), true, KV_PAGED, q28, kv28), 16, 0, 0, 1)),
      false); /* 28: chunked prefill against a paged cache */
  static const int64_t q29[] = {50, 3, 77};
  add(t,
      with_lse(
          window(causal(serving(attention(3, 4, 2, 0, 0, 64), true, KV_PACKED, q29, q29)), 16, 0)),
      false);                                                                       /* 29 */
  add(t, with_lse(softcapped(causal(attention(2, 4, 2, 33, 47, 64)), 2.0f)), true); /* 30 */
  static const int64_t kv31[] = {100, 513};
  add(t,
      with_lse(softcapped(
          paged(serving(attention(2, 16, 2, 1, 0, 128), false, KV_PAGED, NULL, kv31), 256, 0, 0, 0),
          5.0f)),
      false); /* 31: block size 256 */
  static const int64_t kv32[] = {64, 10, 0};
  problem_spec s = serving(attention(3, 4, 4, 2, 64, 32), false, KV_DENSE, NULL, kv32);
  s.attention.hint_lengths = false; /* 32: seqlens over a padded dense cache, no hints */
  add(t, with_lse(s), false);
  static const int64_t q33[] = {3, 1, 8}, kv33[] = {10, 1, 20};
  add(t, with_lse(causal(serving(attention(3, 2, 1, 0, 0, 80), true, KV_PACKED, q33, kv33))),
      false); /* 33: queries the end of longer keys */
  static const int64_t kv34[] = {1, 24, 49};
  add(t, paged(serving(attention(3, 2, 2, 1, 0, 16), false, KV_PAGED, NULL, kv34), 24, 1, 0, 2),
      false); /* 34 */
  static const int64_t kv35[] = {1793, 2500};
  add(t,
      with_lse(
          paged(serving(attention(2, 8, 2, 1, 0, 128), false, KV_PAGED, NULL, kv35), 16, 0, 4, 0)),
      false); /* 35: long keys, the split path */
  static const int64_t q36[] = {127, 300, 65};
  add(t, with_lse(causal(serving(attention(3, 8, 2, 0, 0, 128), true, KV_PACKED, q36, q36))),
      false); /* 36: varlen prefill on the tile path */
  /* Planted faults in device data: reported by tsr_queue_finish, the
   * faulty sequences' rows NaN (or untouched when they cannot be found),
   * every other sequence right. */
  static const int64_t kv37[] = {40, 17, 100};
  add(t,
      planted(with_lse(paged(serving(attention(3, 4, 2, 1, 0, 64), false, KV_PAGED, NULL, kv37), 16,
                             0, 0, 1)),
              FAULT_BLOCK_TABLE),
      true); /* 37 */
  static const int64_t q38[] = {5, 7, 9, 11};
  add(t,
      planted(with_lse(serving(attention(4, 2, 2, 0, 0, 32), true, KV_PACKED, q38, q38)),
              FAULT_CU_SEQLENS_Q),
      false);
  add(t,
      planted(serving(attention(4, 2, 1, 0, 0, 32), true, KV_PACKED, q38, q38),
              FAULT_CU_SEQLENS_KV),
      false); /* 39 */
  add(t,
      planted(paged(serving(attention(3, 4, 2, 2, 0, 64), false, KV_PAGED, NULL, kv37), 8, 0, 0, 0),
              FAULT_SEQLENS_KV),
      false);
  add(t,
      planted(with_lse(paged(serving(attention(3, 4, 1, 1, 0, 64), false, KV_PAGED, NULL, kv37), 16,
                             0, 0, 0)),
              FAULT_MAX_SEQLEN_KV),
      false); /* 41 */
}

static void attention_cases(case_table *t) {
  add(t, attention(1, 1, 1, 1, 1, 16), true);                       /* 0 */
  add(t, attention(2, 4, 4, 17, 17, 64), false);                    /* 1 */
  add(t, with_lse(causal(attention(1, 4, 2, 33, 33, 64))), true);   /* 2 */
  add(t, with_lse(causal(attention(2, 8, 1, 7, 127, 32))), false);  /* 3: Sq < Skv */
  add(t, with_lse(causal(attention(1, 2, 1, 127, 17, 64))), false); /* 4: Sq > Skv */
  add(t, with_lse(bhsd(attention(1, 4, 4, 64, 64, 128))), false);   /* 5 */
  add(t, with_lse(window(causal(attention(1, 4, 2, 100, 100, 64)), 16, 0)), false);
  add(t, window(attention(1, 2, 2, 77, 77, 32), 8, 8), false);     /* 7 */
  add(t, with_lse(causal(attention(2, 8, 2, 1, 300, 64))), false); /* 8: decode */
  problem_spec s = bhsd(causal(attention(1, 2, 2, 50, 60, 48)));   /* 9 */
  s.attention.scale = 0.3f;
  add(t, s, false);
  add(t, attention(1, 3, 3, 40, 9, 16), false); /* 10 */
  add(t, with_lse(bhsd(causal(attention(1, 8, 1, 129, 129, 80)))), false);
  add(t, with_lse(window(attention(1, 2, 2, 7, 1793, 8), 100, -1)), false); /* 12 */
  /* Windows near the top of int64 and int32, 2^32 + 3 (3 when truncated to
   * 32 bits), and just above and at what reaches every key (Skv left, Sq
   * right): each equals unbounded; Sq != Skv both ways, causal and not. */
  add(t, with_lse(window(attention(1, 2, 1, 37, 23, 32), INT64_MAX, INT64_MAX)), true); /* 13 */
  add(t, with_lse(window(causal(attention(1, 2, 2, 19, 45, 16)), INT64_MAX - 1, 0)), false);
  add(t, with_lse(window(causal(attention(2, 4, 2, 50, 30, 64)), INT32_MAX, 0)), false); /* 15 */
  add(t, window(attention(1, 2, 2, 9, 70, 32), INT32_MAX, INT64_MAX - 1), false);
  const int64_t past_int32 = (INT64_C(1) << 32) + 3;
  add(t, with_lse(window(attention(1, 2, 1, 40, 33, 32), past_int32, past_int32)), false); /* 17 */
  add(t, with_lse(window(attention(1, 2, 1, 40, 33, 32), 34, 41)), false);
  add(t, with_lse(window(causal(attention(1, 2, 1, 40, 33, 32)), 33, 0)), false); /* 19 */
  add(t, with_lse(window(attention(1, 2, 1, 40, 33, 32), 32, 39)), false);
  /* NaN and inf in query rows and in one key: those rows' o and lse NaN. */
  add(t, with_lse(non_finite(causal(attention(1, 4, 2, 21, 29, 32)))), true); /* 21 */
  add(t, with_lse(non_finite(bhsd(attention(2, 2, 2, 17, 17, 64)))), false);
  add(t, with_lse(non_finite(attention(1, 4, 4, 33, 65, 128))), false); /* 23 */
  serving_cases(t);
}

static problem_spec rows(tsr_op op, int32_t rank, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
  problem_spec s;
  memset(&s, 0, sizeof s);
  s.op = op;
  s.rows.rank = rank;
  int64_t dims[4] = {d0, d1, d2, d3};
  memcpy(s.rows.shape, dims, sizeof dims);
  return s;
}

static problem_spec padded(problem_spec s, int64_t pad) {
  s.rows.pad = pad;
  return s;
}

static problem_spec norm(problem_spec s, bool residual, bool residual_out, bool weight, bool bias,
                         bool weight_f32) {
  s.rows.has_residual = residual;
  s.rows.has_residual_out = residual_out;
  s.rows.has_weight = weight;
  s.rows.has_bias = bias;
  s.rows.weight_f32 = weight_f32;
  return s;
}

static void rmsnorm_cases(case_table *t) {
  const tsr_op op = TSR_OP_RMSNORM;
  add(t, norm(rows(op, 2, 1, 1, 0, 0), false, false, true, false, false), true);
  add(t, rows(op, 2, 7, 17, 0, 0), false);
  add(t, norm(rows(op, 2, 16, 127, 0, 0), true, true, true, false, false), true);
  add(t, padded(norm(rows(op, 2, 5, 1793, 0, 0), true, false, true, false, true), 3), false);
  add(t, padded(norm(rows(op, 3, 3, 4, 64, 0), true, true, true, false, false), 5), false);
  problem_spec s = norm(rows(op, 2, 64, 1024, 0, 0), false, false, true, false, false);
  s.rows.eps = 1e-5f;
  add(t, s, false);
  add(t, norm(rows(op, 1, 4096, 0, 0, 0), false, false, true, false, false), false);
  /* 1e30 in f32 and bf16: the sum of squares overflows f32, not fp64. */
  add(t, large(norm(rows(op, 2, 6, 1000, 0, 0), true, true, true, false, false)), false);
  add(t, large(padded(rows(op, 2, 3, 5000, 0, 0), 2)), false);
}

static void layernorm_cases(case_table *t) {
  const tsr_op op = TSR_OP_LAYERNORM;
  add(t, norm(rows(op, 2, 1, 1, 0, 0), false, false, true, true, false), true);
  add(t, norm(rows(op, 2, 7, 17, 0, 0), false, false, true, true, false), false);
  add(t, padded(rows(op, 2, 33, 127, 0, 0), 3), false);
  add(t, norm(rows(op, 2, 4, 1793, 0, 0), false, false, true, true, true), false);
  add(t, padded(norm(rows(op, 3, 2, 5, 256, 0), false, false, true, true, false), 7), true);
  problem_spec s = norm(rows(op, 2, 1, 4096, 0, 0), false, false, true, false, false);
  s.rows.eps = 1e-3f;
  add(t, s, false);
  add(t, large(norm(rows(op, 2, 6, 1000, 0, 0), false, false, true, true, false)), false);
  add(t, large(padded(rows(op, 2, 2, 5000, 0, 0), 3)), false);
}

static problem_spec scaled(problem_spec s, float scale) {
  s.rows.scale = scale;
  return s;
}

static void softmax_cases(case_table *t) {
  const tsr_op op = TSR_OP_SOFTMAX;
  add(t, rows(op, 2, 1, 1, 0, 0), true);
  add(t, rows(op, 2, 7, 17, 0, 0), false);
  add(t, padded(scaled(rows(op, 2, 33, 127, 0, 0), 0.5f), 2), false);
  add(t, scaled(rows(op, 2, 3, 1793, 0, 0), 4.0f), false);
  add(t, padded(rows(op, 3, 2, 3, 64, 0), 1), true);
  problem_spec s = rows(op, 2, 5, 33, 0, 0);
  s.rows.masked = true;
  add(t, s, false);
  add(t, rows(op, 2, 1, 4096, 0, 0), false);
  /* several rows of several 1024-element blocks and a tail: the CPU's
   * pipelined softmax (one row's output pass fused with the next's reading) */
  add(t, rows(op, 2, 4, 3100, 0, 0), false);
  /* scale 1e30: the max gets 1, the rest 0; with inputs of 1e30 too, scale
   * times x is far beyond f32 (the reference computes it in fp64). */
  add(t, scaled(rows(op, 2, 9, 300, 0, 0), 1e30f), false); /* 8 */
  add(t, scaled(large(rows(op, 2, 5, 1100, 0, 0)), 1e30f), false);
  /* +inf or NaN in a row: the row is NaN; -inf entries are zeros. */
  add(t, non_finite(rows(op, 2, 12, 77, 0, 0)), true); /* 10 */
  add(t, padded(non_finite(rows(op, 2, 8, 3100, 0, 0)), 3), false);
}

static problem_spec rope(int64_t batch, int64_t seq, int64_t heads, int64_t dim,
                         tsr_rope_style style, int64_t offset) {
  problem_spec s;
  memset(&s, 0, sizeof s);
  s.op = TSR_OP_ROPE;
  s.rope.batch = batch;
  s.rope.seq = seq;
  s.rope.heads = heads;
  s.rope.head_dim = dim;
  s.rope.style = style;
  s.rope.position_offset = offset;
  return s;
}

static void rope_cases(case_table *t) {
  add(t, rope(1, 1, 1, 2, TSR_ROPE_NEOX, 0), true);
  add(t, rope(2, 17, 4, 64, TSR_ROPE_NEOX, 0), false);
  add(t, rope(2, 17, 4, 64, TSR_ROPE_GPTJ, 5), true);
  problem_spec s = rope(1, 33, 2, 128, TSR_ROPE_NEOX, 1000);
  s.rope.rotary_dim = 64;
  s.rope.theta = 500000.0f;
  add(t, s, false);
  s = rope(1, 7, 3, 80, TSR_ROPE_GPTJ, 127);
  s.rope.rotary_dim = 32;
  s.rope.in_place = true;
  add(t, s, false);
  s = rope(2, 16, 4, 32, TSR_ROPE_NEOX, 3);
  s.rope.bhsd = true;
  add(t, s, false);
  s = rope(1, 127, 1, 16, TSR_ROPE_GPTJ, 0);
  s.rope.theta = 100.0f;
  add(t, s, false);
  s = rope(3, 5, 2, 6, TSR_ROPE_NEOX, 0);
  s.rope.rotary_dim = 2;
  add(t, s, false);
}

static void swiglu_cases(case_table *t) {
  const tsr_op op = TSR_OP_SWIGLU;
  add(t, rows(op, 1, 1, 0, 0, 0), true);
  add(t, rows(op, 2, 7, 17, 0, 0), false);
  add(t, padded(rows(op, 2, 127, 1793, 0, 0), 9), false);
  add(t, rows(op, 3, 3, 5, 64, 0), true);
  /* +-inf and NaN, then +-88, +-100, +-1e4, +-1e30, dense (vector paths)
   * and padded (strided paths). */
  add(t, non_finite(rows(op, 2, 7, 128, 0, 0)), false); /* 4 */
  add(t, padded(non_finite(rows(op, 2, 7, 130, 0, 0)), 3), false);
  add(t, large(rows(op, 2, 7, 128, 0, 0)), false); /* 6 */
  add(t, padded(large(rows(op, 2, 7, 130, 0, 0)), 3), false);
}

static problem_spec gelu(problem_spec s, tsr_gelu_approx approximate) {
  s.rows.approximate = approximate;
  return s;
}

static void gelu_cases(case_table *t) {
  const tsr_op op = TSR_OP_GELU;
  add(t, gelu(rows(op, 1, 1, 0, 0, 0), TSR_GELU_ERF), true);
  add(t, gelu(rows(op, 2, 17, 127, 0, 0), TSR_GELU_TANH), false);
  add(t, padded(gelu(rows(op, 2, 7, 1793, 0, 0), TSR_GELU_ERF), 4), false);
  add(t, gelu(rows(op, 4, 2, 3, 4, 17), TSR_GELU_TANH), true);
  /* As swiglu's: both approximations, dense and padded. */
  add(t, gelu(non_finite(rows(op, 2, 7, 128, 0, 0)), TSR_GELU_ERF), false); /* 4 */
  add(t, gelu(padded(non_finite(rows(op, 2, 7, 130, 0, 0)), 3), TSR_GELU_TANH), false);
  add(t, gelu(large(rows(op, 2, 7, 128, 0, 0)), TSR_GELU_TANH), false); /* 6 */
  add(t, gelu(padded(large(rows(op, 2, 7, 130, 0, 0)), 3), TSR_GELU_ERF), false);
  add(t, gelu(non_finite(rows(op, 2, 7, 128, 0, 0)), TSR_GELU_TANH), false); /* 8 */
  add(t, gelu(large(rows(op, 2, 7, 128, 0, 0)), TSR_GELU_ERF), false);
}

static problem_spec cross_entropy(int64_t rows, int64_t vocab, bool lse) {
  problem_spec s;
  memset(&s, 0, sizeof s);
  s.op = TSR_OP_CROSS_ENTROPY;
  s.cross_entropy.rows = rows;
  s.cross_entropy.vocab = vocab;
  s.cross_entropy.ignore_index = -100;
  s.cross_entropy.has_lse = lse;
  return s;
}

static problem_spec ignoring(problem_spec s, int64_t index, int64_t every) {
  s.cross_entropy.ignore_index = index;
  s.cross_entropy.ignore_every = every;
  return s;
}

static void cross_entropy_cases(case_table *t) {
  add(t, cross_entropy(1, 1, true), true);
  add(t, cross_entropy(7, 17, true), false);
  add(t, ignoring(cross_entropy(33, 127, true), -100, 3), true);
  problem_spec s = ignoring(cross_entropy(4, 1793, false), 3, 2);
  s.cross_entropy.pad = 5;
  add(t, s, false);
  add(t, cross_entropy(16, 32000, true), false);
  add(t, ignoring(cross_entropy(5, 64, true), -100, 1), false); /* every row ignored */
}

static problem_spec kv_append(int64_t rows, int64_t heads, int64_t dim, int64_t blocks,
                              int64_t block_size, bool values, bool strided, int64_t skip_every) {
  problem_spec s;
  memset(&s, 0, sizeof s);
  s.op = TSR_OP_KV_APPEND;
  kv_append_spec *k = &s.kv_append;
  k->rows = rows;
  k->heads = heads;
  k->head_dim = dim;
  k->blocks = blocks;
  k->block_size = block_size;
  k->values = values;
  k->strided_new = strided;
  k->skip_every = skip_every;
  return s;
}

static void kv_append_cases(case_table *t) {
  add(t, kv_append(1, 1, 16, 2, 8, true, false, 0), true);
  add(t, kv_append(17, 4, 64, 8, 16, true, false, 5), true);
  add(t, kv_append(33, 2, 128, 10, 8, false, true, 0), false);
  add(t, kv_append(7, 8, 80, 3, 24, true, true, 3), false);
  add(t, kv_append(256, 8, 128, 2, 256, true, false, 0), false);
  add(t, planted(kv_append(9, 2, 32, 4, 8, true, false, 0), FAULT_KV_SLOT), true);
}

const check_case *check_cases(tsr_op op, int *count) {
  static case_table tables[TSR_OP_COUNT_];
  static bool built = false;
  if (!built) {
    gemm_cases(&tables[TSR_OP_GEMM]);
    grouped_gemm_cases(&tables[TSR_OP_GROUPED_GEMM]);
    attention_cases(&tables[TSR_OP_ATTENTION]);
    rmsnorm_cases(&tables[TSR_OP_RMSNORM]);
    layernorm_cases(&tables[TSR_OP_LAYERNORM]);
    softmax_cases(&tables[TSR_OP_SOFTMAX]);
    rope_cases(&tables[TSR_OP_ROPE]);
    swiglu_cases(&tables[TSR_OP_SWIGLU]);
    gelu_cases(&tables[TSR_OP_GELU]);
    cross_entropy_cases(&tables[TSR_OP_CROSS_ENTROPY]);
    kv_append_cases(&tables[TSR_OP_KV_APPEND]);
    built = true;
  }
  if ((int)op < 0 || op >= TSR_OP_COUNT_) {
    *count = 0;
    return NULL;
  }
  *count = tables[op].count;
  return tables[op].cases;
}
