/* SPDX-License-Identifier: Apache-2.0 */
/* fp64 reference, serving forms: a paged cache and seqlens over a padded
 * dense cache give exactly the dense result of each sequence's keys, packed
 * sequences exactly their own dense results, softcap a hand-computed value,
 * faulty index data NaN rows for that sequence only, and kv_append the
 * slots it names. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tessera/reference.h"

static int check_count, failure_count;

static void check(const char *what, int ok) {
  check_count++;
  if (!ok) {
    failure_count++;
    fprintf(stderr, "FAIL %s\n", what);
  }
}

static tsr_plugin_tensor dense(void *buffer, tsr_dtype dtype, int32_t rank, const int64_t *shape) {
  tsr_plugin_tensor t;
  memset(&t, 0, sizeof t);
  t.buffer = buffer;
  t.dtype = dtype;
  t.rank = rank;
  int64_t stride = 1;
  for (int32_t i = rank - 1; i >= 0; i--) {
    t.shape[i] = shape[i];
    t.strides[i] = stride;
    stride *= shape[i];
  }
  return t;
}

static uint64_t state = 0x2545f4914f6cdd1dull;
static void fill(float *values, int64_t count) {
  for (int64_t i = 0; i < count; i++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    values[i] = (float)((double)(state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
}

static tsr_attention_args base_args(tsr_plugin_tensor q, tsr_plugin_tensor k, tsr_plugin_tensor v) {
  tsr_attention_args a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.q = q;
  a.k = k;
  a.v = v;
  a.o = q;
  a.scale = 0.5f;
  a.window_left = -1;
  a.window_right = -1;
  return a;
}

enum { B = 2, SQ = 3, HQ = 4, HKV = 2, D = 8, SKV = 20, BS = 8, BLOCKS = 7 };

/* Paged blocks in shuffled order and seqlens over a padded dense cache both
 * equal, bit for bit, the dense op on each sequence's own keys. */
static void test_paged_and_seqlens(void) {
  static float q[B * SQ * HQ * D], k[B * SKV * HKV * D], v[B * SKV * HKV * D];
  static float kp[BLOCKS * BS * HKV * D], vp[BLOCKS * BS * HKV * D];
  fill(q, B * SQ * HQ * D);
  fill(k, B * SKV * HKV * D);
  fill(v, B * SKV * HKV * D);
  const int32_t lengths[B] = {20, 13};
  const int32_t table[B * 3] = {5, 0, 3, 6, 1, 99}; /* 99: past the need, never read */
  for (int b = 0; b < B; b++)
    for (int j = 0; j < lengths[b]; j++)
      for (int e = 0; e < HKV * D; e++) {
        const int64_t from = ((int64_t)b * SKV + j) * HKV * D + e;
        const int64_t to = ((int64_t)table[b * 3 + j / BS] * BS + j % BS) * HKV * D + e;
        kp[to] = k[from];
        vp[to] = v[from];
      }
  const int64_t qs[4] = {B, SQ, HQ, D}, ks[4] = {B, SKV, HKV, D}, ps[4] = {BLOCKS, BS, HKV, D};
  const int64_t ts[2] = {B, 3}, ls[1] = {B};
  static double paged_o[B * SQ * HQ * D], paged_lse[B * HQ * SQ];
  static double padded_o[B * SQ * HQ * D], padded_lse[B * HQ * SQ];
  tsr_attention_args a = base_args(dense(q, TSR_DTYPE_F32, 4, qs), dense(kp, TSR_DTYPE_F32, 4, ps),
                                   dense(vp, TSR_DTYPE_F32, 4, ps));
  a.block_table = dense((void *)table, TSR_DTYPE_I32, 2, ts);
  a.seqlens_kv = dense((void *)lengths, TSR_DTYPE_I32, 1, ls);
  a.causal = 1;
  a.window_right = 0;
  a.softcap = 1.5f;
  check("paged runs", tsr_reference_attention(&a, paged_o, paged_lse) == TSR_OK);
  a.k = dense(k, TSR_DTYPE_F32, 4, ks);
  a.v = dense(v, TSR_DTYPE_F32, 4, ks);
  a.block_table.buffer = NULL;
  check("seqlens over a padded cache runs",
        tsr_reference_attention(&a, padded_o, padded_lse) == TSR_OK);
  check("paged == padded with seqlens (o)", !memcmp(paged_o, padded_o, sizeof paged_o));
  check("paged == padded with seqlens (lse)", !memcmp(paged_lse, padded_lse, sizeof paged_lse));

  /* Sequence 1 alone: a dense problem of 13 keys gives the same rows. */
  static float k1[13 * HKV * D], v1[13 * HKV * D];
  memcpy(k1, k + SKV * HKV * D, sizeof k1);
  memcpy(v1, v + SKV * HKV * D, sizeof v1);
  const int64_t q1s[4] = {1, SQ, HQ, D}, k1s[4] = {1, 13, HKV, D};
  tsr_attention_args one =
      base_args(dense(q + SQ * HQ * D, TSR_DTYPE_F32, 4, q1s), dense(k1, TSR_DTYPE_F32, 4, k1s),
                dense(v1, TSR_DTYPE_F32, 4, k1s));
  one.causal = 1;
  one.window_right = 0;
  one.softcap = 1.5f;
  static double one_o[SQ * HQ * D], one_lse[HQ * SQ];
  check("one sequence runs", tsr_reference_attention(&one, one_o, one_lse) == TSR_OK);
  check("sequence 1 == its dense problem (o)", !memcmp(one_o, paged_o + SQ * HQ * D, sizeof one_o));
  check("sequence 1 == its dense problem (lse)",
        !memcmp(one_lse, paged_lse + HQ * SQ, sizeof one_lse));

  /* A table entry out of range: sequence 1 NaN, sequence 0 untouched. */
  const int32_t bad_table[B * 3] = {5, 0, 3, 6, 7, 0};
  a.k = dense(kp, TSR_DTYPE_F32, 4, ps);
  a.v = dense(vp, TSR_DTYPE_F32, 4, ps);
  a.block_table = dense((void *)bad_table, TSR_DTYPE_I32, 2, ts);
  static double bad_o[B * SQ * HQ * D], bad_lse[B * HQ * SQ];
  check("faulty table runs", tsr_reference_attention(&a, bad_o, bad_lse) == TSR_OK);
  check("faulty table: sequence 0 right", !memcmp(bad_o, paged_o, sizeof bad_o / 2));
  check("faulty table: sequence 1 NaN", isnan(bad_o[SQ * HQ * D]) && isnan(bad_lse[HQ * SQ]));
}

/* Packed sequences (one of length 0) against each sequence's dense result,
 * causal with a window; lse in the packed [Hq, total] layout. */
static void test_packed(void) {
  enum { TOTAL = 8 };
  static float q[TOTAL * HQ * D], k[TOTAL * HKV * D], v[TOTAL * HKV * D];
  fill(q, TOTAL * HQ * D);
  fill(k, TOTAL * HKV * D);
  fill(v, TOTAL * HKV * D);
  const int32_t cu[4] = {0, 3, 3, 8};
  const int64_t qs[3] = {TOTAL, HQ, D}, ks[3] = {TOTAL, HKV, D}, cs[1] = {4};
  tsr_attention_args a = base_args(dense(q, TSR_DTYPE_F32, 3, qs), dense(k, TSR_DTYPE_F32, 3, ks),
                                   dense(v, TSR_DTYPE_F32, 3, ks));
  a.cu_seqlens_q = dense((void *)cu, TSR_DTYPE_I32, 1, cs);
  a.cu_seqlens_kv = a.cu_seqlens_q;
  a.causal = 1;
  a.window_left = 2;
  a.window_right = 0;
  static double o[TOTAL * HQ * D], lse[HQ * TOTAL];
  check("packed runs", tsr_reference_attention(&a, o, lse) == TSR_OK);
  for (int s = 0; s < 3; s++) {
    const int first = cu[s], length = cu[s + 1] - cu[s];
    if (length == 0)
      continue;
    const int64_t q1[4] = {1, length, HQ, D}, k1[4] = {1, length, HKV, D};
    tsr_attention_args one = base_args(dense(q + first * HQ * D, TSR_DTYPE_F32, 4, q1),
                                       dense(k + first * HKV * D, TSR_DTYPE_F32, 4, k1),
                                       dense(v + first * HKV * D, TSR_DTYPE_F32, 4, k1));
    one.causal = 1;
    one.window_left = 2;
    one.window_right = 0;
    double one_o[5 * HQ * D], one_lse[HQ * 5];
    check("one sequence runs", tsr_reference_attention(&one, one_o, one_lse) == TSR_OK);
    check("packed o == the sequence's dense o",
          !memcmp(one_o, o + first * HQ * D, sizeof(double) * length * HQ * D));
    for (int h = 0; h < HQ; h++)
      check("packed lse == the sequence's dense lse",
            !memcmp(one_lse + h * length, lse + h * TOTAL + first, sizeof(double) * length));
  }
  /* cu_seqlens_q leaving [0, total]: sequences 1 and 2 unwritten, 0 right. */
  const int32_t bad[4] = {0, 3, 99, 8};
  a.cu_seqlens_q = dense((void *)bad, TSR_DTYPE_I32, 1, cs);
  static double bad_o[TOTAL * HQ * D];
  for (int i = 0; i < TOTAL * HQ * D; i++)
    bad_o[i] = -7.0;
  check("faulty offsets run", tsr_reference_attention(&a, bad_o, NULL) == TSR_OK);
  check("faulty offsets: sequence 0 right", !memcmp(bad_o, o, sizeof(double) * 3 * HQ * D));
  check("faulty offsets: later rows untouched", bad_o[3 * HQ * D] == -7.0);
}

/* softcap by hand: one query, two keys, D 1: scores 0.5 * q * k capped. */
static void test_softcap_value(void) {
  float q[1] = {4.0f}, k[2] = {1.0f, -0.5f}, v[2] = {2.0f, -1.0f};
  const int64_t qs[4] = {1, 1, 1, 1}, ks[4] = {1, 2, 1, 1};
  tsr_attention_args a = base_args(dense(q, TSR_DTYPE_F32, 4, qs), dense(k, TSR_DTYPE_F32, 4, ks),
                                   dense(v, TSR_DTYPE_F32, 4, ks));
  a.softcap = 1.0f;
  double o, lse;
  check("softcap runs", tsr_reference_attention(&a, &o, &lse) == TSR_OK);
  const double s0 = tanh(2.0), s1 = tanh(-1.0);
  const double w0 = exp(s0), w1 = exp(s1);
  check("softcap o", fabs(o - (2.0 * w0 - w1) / (w0 + w1)) < 1e-15);
  check("softcap lse", fabs(lse - log(w0 + w1)) < 1e-15);
}

static void test_kv_append(void) {
  float k_new[3 * 2] = {1, 2, 3, 4, 5, 6}, k_cache[2 * 8 * 1 * 2];
  for (int i = 0; i < 32; i++)
    k_cache[i] = -1.0f;
  const int32_t slots[3] = {9, -1, 0};
  const int64_t ns[3] = {3, 1, 2}, cs[4] = {2, 8, 1, 2}, ss[1] = {3};
  tsr_kv_append_args a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.k_new = dense(k_new, TSR_DTYPE_F32, 3, ns);
  a.k_cache = dense(k_cache, TSR_DTYPE_F32, 4, cs);
  a.slots = dense((void *)slots, TSR_DTYPE_I32, 1, ss);
  double out[32];
  check("kv_append runs", tsr_reference_kv_append(&a, out, NULL) == TSR_OK);
  check("slot 9 holds row 0", out[18] == 1.0 && out[19] == 2.0);
  check("slot 0 holds row 2", out[0] == 5.0 && out[1] == 6.0);
  check("other slots keep the cache", out[2] == -1.0 && out[20] == -1.0);
  const int32_t bad[3] = {16, 1, 2};
  a.slots = dense((void *)bad, TSR_DTYPE_I32, 1, ss);
  check("a slot past the cache is reported",
        tsr_reference_kv_append(&a, out, NULL) == TSR_ERROR_INVALID_VALUE);
  check("the other rows are written", out[2] == 3.0 && out[4] == 5.0);
}

int main(void) {
  test_paged_and_seqlens();
  test_packed();
  test_softcap_value();
  test_kv_append();
  printf("test_reference_serving: %d checks, %d failed\n", check_count, failure_count);
  return failure_count ? 1 : 0;
}
