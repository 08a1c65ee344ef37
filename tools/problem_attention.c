/* SPDX-License-Identifier: Apache-2.0 */
/* The serving forms of an attention problem: per-sequence lengths, the paged
 * pool and its block table, and their SHAPE options. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "problem_internal.h"

bool attention_is_serving(const attention_spec *a) {
  return a->packed_q || a->kv_layout != KV_DENSE || a->seqlens_kv || a->softcap != 0.0f;
}

int64_t attention_q_len(const attention_spec *a, int64_t b) {
  return a->packed_q ? a->q_lens[b] : a->seq_q;
}

int64_t attention_kv_len(const attention_spec *a, int64_t b) {
  return a->kv_layout != KV_DENSE || a->seqlens_kv ? a->kv_lens[b] : a->seq_kv;
}

static int64_t blocks_for(const attention_spec *a, int64_t b) {
  return (attention_kv_len(a, b) + a->block_size - 1) / a->block_size;
}

/* Leading blocks sequence b takes from sequence 0 (a shared prefix). */
static int64_t shared_of(const attention_spec *a, int64_t b) {
  if (b == 0 || a->shared_blocks <= 0)
    return 0;
  int64_t shared = a->shared_blocks;
  if (shared > blocks_for(a, b))
    shared = blocks_for(a, b);
  if (shared > blocks_for(a, 0))
    shared = blocks_for(a, 0);
  return shared;
}

/* Blocks sequence b owns alone. */
static int64_t own_blocks(const attention_spec *a, int64_t b) {
  return blocks_for(a, b) - shared_of(a, b);
}

int64_t attention_pool_blocks(const attention_spec *a) {
  int64_t total = a->spare_blocks;
  for (int64_t b = 0; b < a->batch; b++)
    total += own_blocks(a, b);
  return total > 0 ? total : 1;
}

int64_t attention_table_columns(const attention_spec *a) {
  int64_t most = 0;
  for (int64_t b = 0; b < a->batch; b++)
    if (blocks_for(a, b) > most)
      most = blocks_for(a, b);
  return most + a->table_slack > 0 ? most + a->table_slack : 1;
}

static int64_t gcd64(int64_t x, int64_t y) {
  while (y != 0) {
    int64_t t = x % y;
    x = y;
    y = t;
  }
  return x;
}

/* Block j of sequence b: the flat index among owned blocks goes through an
 * affine permutation of the pool, so neighbours land far apart and in no
 * order; shared blocks are sequence 0's; columns past the need hold a value
 * no pool has (a kernel that reads them faults or fails the check). */
int64_t attention_block_of(const attention_spec *a, int64_t b, int64_t j) {
  if (j >= blocks_for(a, b))
    return 0x40000000 + j;
  if (j < shared_of(a, b))
    return attention_block_of(a, 0, j);
  int64_t flat = j - shared_of(a, b);
  for (int64_t s = 0; s < b; s++)
    flat += own_blocks(a, s);
  const int64_t pool = attention_pool_blocks(a);
  int64_t step = pool / 2 + 1;
  while (gcd64(step, pool) != 1)
    step++;
  return (flat * step + 3) % pool;
}

void attention_skewed_lengths(int64_t *lens, int64_t count, int64_t lo, int64_t hi) {
  rng generator;
  rng_seed(&generator, 0x5e9ull + (uint64_t)count);
  for (int64_t b = 0; b < count; b++) {
    double u = rng_uniform(&generator) * 0.5 + 0.5; /* [0, 1) */
    double f = b % 4 == 3 ? 0.845 + 0.155 * u : 0.584 * u;
    lens[b] = lo + (int64_t)((double)(hi - lo) * f);
  }
}

double attention_visible_pairs_total(const attention_spec *a) {
  double pairs = 0.0;
  const int64_t right = a->causal ? 0 : a->window_right;
  for (int64_t b = 0; b < a->batch; b++) {
    const int64_t lq = attention_q_len(a, b), lkv = attention_kv_len(a, b);
    for (int64_t i = 0; i < lq; i++) {
      int64_t p = i + lkv - lq;
      int64_t first = 0, last = lkv - 1;
      if (a->window_left >= 0 && p - a->window_left > first)
        first = p - a->window_left;
      if (right >= 0 && p + right < last)
        last = p + right;
      if (last >= first)
        pairs += (double)(last - first + 1);
    }
  }
  return pairs;
}

/* Lengths for the SHAPE options: keys from lens=LO-HI (else Skv each);
 * packed queries as long as their keys when Sq == Skv (prefill), else
 * min(Sq, keys). */
static void fill_lengths(attention_spec *a) {
  if (a->lens_hi > 0)
    attention_skewed_lengths(a->kv_lens, a->batch, a->lens_lo, a->lens_hi);
  else
    for (int64_t b = 0; b < a->batch; b++)
      a->kv_lens[b] = a->seq_kv;
  for (int64_t b = 0; b < a->batch; b++)
    a->q_lens[b] = a->seq_q == a->seq_kv      ? a->kv_lens[b]
                   : a->seq_q < a->kv_lens[b] ? a->seq_q
                                              : a->kv_lens[b];
}

bool attention_parse_options(attention_spec *a, const char *options, char *why, size_t capacity) {
  const char *p = options;
  while (*p == ':') {
    p++;
    const char *end = strchr(p, ':');
    size_t length = end ? (size_t)(end - p) : strlen(p);
    char token[64];
    if (length >= sizeof token) {
      snprintf(why, capacity, "attention option '%.*s' is too long", (int)length, p);
      return false;
    }
    memcpy(token, p, length);
    token[length] = '\0';
    long long x, y;
    double f;
    char extra;
    if (strcmp(token, "packed") == 0) {
      a->packed_q = true;
      a->kv_layout = KV_PACKED;
    } else if (strcmp(token, "packed_q") == 0) {
      a->packed_q = true;
    } else if (sscanf(token, "paged=%lld%c", &x, &extra) == 1 && x > 0 && x % 8 == 0) {
      a->kv_layout = KV_PAGED;
      a->seqlens_kv = true;
      a->block_size = x;
    } else if (sscanf(token, "lens=%lld-%lld%c", &x, &y, &extra) == 2 && x >= 0 && y >= x) {
      a->lens_lo = x;
      a->lens_hi = y;
    } else if (sscanf(token, "softcap=%lf%c", &f, &extra) == 1 && f > 0.0) {
      a->softcap = (float)f;
    } else if (sscanf(token, "shared=%lld%c", &x, &extra) == 1 && x >= 0) {
      a->shared_blocks = x;
    } else {
      snprintf(why, capacity,
               "attention option '%s' is none of packed, packed_q, paged=N (a multiple of 8), "
               "lens=LO-HI, softcap=X, shared=N",
               token);
      return false;
    }
    p += length;
  }
  if (a->batch > PROBLEM_MAX_SEQS && (a->packed_q || a->kv_layout != KV_DENSE)) {
    snprintf(why, capacity, "serving attention takes at most %d sequences", PROBLEM_MAX_SEQS);
    return false;
  }
  if (a->lens_hi > 0) {
    if (a->kv_layout == KV_DENSE)
      a->seqlens_kv = true;
    if (a->lens_hi > a->seq_kv)
      a->seq_kv = a->lens_hi;
  }
  fill_lengths(a);
  a->hint_lengths = attention_is_serving(a);
  return true;
}

void attention_format_options(const attention_spec *a, char *buf, size_t capacity) {
  if (a->packed_q && a->kv_layout == KV_PACKED)
    problem_append(buf, capacity, ":packed");
  else if (a->packed_q)
    problem_append(buf, capacity, ":packed_q");
  if (a->kv_layout == KV_PAGED)
    problem_append(buf, capacity, ":paged=%lld", (long long)a->block_size);
  if (a->lens_hi > 0)
    problem_append(buf, capacity, ":lens=%lld-%lld", (long long)a->lens_lo, (long long)a->lens_hi);
  if (a->shared_blocks > 0)
    problem_append(buf, capacity, ":shared=%lld", (long long)a->shared_blocks);
  if (a->softcap != 0.0f)
    problem_append(buf, capacity, ":softcap=%g", (double)a->softcap);
}

const char *problem_expected_fault(const problem_spec *spec, char *buf, size_t capacity) {
  planted_fault fault = spec->op == TSR_OP_ATTENTION   ? spec->attention.fault
                        : spec->op == TSR_OP_KV_APPEND ? spec->kv_append.fault
                                                       : FAULT_NONE;
  switch (fault) {
  case FAULT_BLOCK_TABLE:
    snprintf(buf, capacity, "block_table row 1 ");
    break;
  case FAULT_CU_SEQLENS_Q:
    snprintf(buf, capacity, "cu_seqlens_q[1], cu_seqlens_q[2]");
    break;
  case FAULT_CU_SEQLENS_KV:
    snprintf(buf, capacity, "cu_seqlens_kv[0], cu_seqlens_kv[1]");
    break;
  case FAULT_SEQLENS_KV:
    snprintf(buf, capacity, "seqlens_kv[0] ");
    break;
  case FAULT_MAX_SEQLEN_KV: {
    const attention_spec *a = &spec->attention;
    int64_t longest = 0;
    for (int64_t b = 1; b < a->batch; b++)
      if (attention_kv_len(a, b) > attention_kv_len(a, longest))
        longest = b;
    snprintf(buf, capacity, "sequence %lld has more keys than max_seqlen_kv", (long long)longest);
    break;
  }
  case FAULT_KV_SLOT:
    snprintf(buf, capacity, "slots[3] ");
    break;
  default:
    return NULL;
  }
  return buf;
}
