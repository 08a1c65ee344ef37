/* SPDX-License-Identifier: Apache-2.0 */
/* What the split-KV decode kernels share (attention_decode.cu on CUDA cores,
 * attention_decode_mma.cu on tensor cores): the partial layout, a block's
 * prologue (its sequence, fault, key chunk and the keys its rows see, the
 * block-table check) and its epilogue (the block's lane groups or warps
 * merged into one partial). Included after attention.cu (serving helpers). */
#ifndef TESSERA_GPU_ATTENTION_DECODE_COMMON_H
#define TESSERA_GPU_ATTENTION_DECODE_COMMON_H

namespace {

TSR_DEVICE float decode_exp2(float x) {
#if defined(__HIPCC__)
  return exp2f(x);
#else
  return attn_exp2(x); /* MUFU; -inf gives 0, NaN stays NaN */
#endif
}

/* Partials: [batch][kv head][row tile][split] of ml [rows][2], then o
 * [rows][head_dim] after all the ml entries. */
TSR_DEVICE int64_t decode_partial_count(const attention_params &p) {
  return p.batch * p.heads_kv * p.row_groups * p.splits;
}

/* Softcap in log2 units: cap * tanh(s / cap) * log2(e) of the scaled score
 * s = scale * dot (an infinite s turns NaN first), as attn_capped_log2, with
 * its division and tanhf replaced by constants of the parameter block:
 * tanh(x) = 1 - 2 / (2^(2 x log2(e)) + 1), one MUFU exp2 and one reciprocal
 * (within a few f32 ulps of tanhf; +-inf scores give +-cap, NaN stays). */
TSR_DEVICE float decode_capped_log2(const attention_params &p, float dot) {
#if defined(__HIPCC__)
  return attn_capped_log2(p, dot);
#else
  const float s = attn_poison_infinite(dot * p.scale);
  const float e = attn_exp2(s * p.cap_exp2); /* +inf for large s: 2 / inf = 0 */
  return p.cap_log2 * (1.0f - __fdividef(2.0f, e + 1.0f));
#endif
}

/* A split block's work: (key chunk `split`, row tile `tile` of RT rows, kv
 * head) of sequence b. */
struct decode_span {
  attn_seq seq;
  int64_t chunk_first, chunk_end; /* the chunk's keys */
  int64_t first, end;             /* keys any row of the tile sees in the chunk (none: equal) */
  int64_t tile0;                  /* first, down to whole `align` keys from chunk_first */
};

/* The prologue of both split kernels; false when the block writes no
 * partial: the sequence is at fault (the combine kernel reports it; here it
 * is only never read), the chunk lies past its keys or the tile past its
 * rows (the combine kernel reads no partial there), or a block-table entry
 * of a key the block would read is bad (the partial stays unwritten: the
 * combine kernel's scan finds it and reports the sequence). `row_keys(r,
 * lo, hi)` gets each live row's visible keys [lo, hi), hi >= lo (int: key
 * counts stay below 2^31, which validation and op_select check). Every
 * thread of the block calls it (the table check is a barrier). */
template <int RT, typename RowKeys>
TSR_DEVICE bool decode_span_of(const attention_params &p, int64_t b, int64_t split, int64_t tile,
                               int align, decode_span *out, RowKeys row_keys) {
  decode_span &s = *out;
  s.seq = attn_seq_head(p, b);
  if (s.seq.fault >= 0)
    return false;
  s.chunk_first = split * p.chunk;
  if (s.chunk_first >= s.seq.kv_len || tile * RT >= s.seq.q_len * p.group)
    return false;
  s.chunk_end = s.chunk_first + p.chunk < s.seq.kv_len ? s.chunk_first + p.chunk : s.seq.kv_len;
  /* Each row's visible keys; the block reads their union within its chunk. */
  s.first = s.chunk_end;
  s.end = s.chunk_first;
  /* (unrolled for the small tiles, whose callers keep every row's range in
   * registers) */
  constexpr int ROW_UNROLL = RT <= 8 ? RT : 1;
#pragma unroll ROW_UNROLL
  for (int r = 0; r < RT; r++) {
    const int64_t i = (tile * RT + r) / p.group;
    if (i >= s.seq.q_len)
      continue;
    int64_t lo, hi;
    key_range_of(p, s.seq.q_len, s.seq.kv_len, i, i, &lo, &hi);
    row_keys(r, (int)lo, (int)(hi > lo ? hi : lo));
    lo = lo > s.chunk_first ? lo : s.chunk_first;
    hi = hi < s.chunk_end ? hi : s.chunk_end;
    if (lo < hi) {
      s.first = lo < s.first ? lo : s.first;
      s.end = hi > s.end ? hi : s.end;
    }
  }
  if (s.first >= s.end) {
    s.first = s.chunk_first;
    s.end = s.chunk_first; /* no key: the partial says so */
  }
  /* (chunks are whole multiples of `align`: tiles never cross a chunk) */
  s.tile0 = s.first - (s.first - s.chunk_first) % align;
  return !(p.paged && s.first < s.end &&
           !attn_table_ok(p, b, s.tile0 / p.block_size, (s.end - 1) / p.block_size + 1));
}

/* Rows of row tile `tile` that hold a query row (GQA group x query rows,
 * padded to whole tiles): the partials and the combine skip the rest. */
TSR_DEVICE int decode_live_rows(const attention_params &p, int64_t q_len, int64_t tile, int rt) {
  const int64_t live = q_len * p.group - tile * rt;
  return live < 0 ? 0 : live < rt ? (int)live : rt;
}

/* The epilogue of both split kernels: GROUPS states (a lane group's or a
 * warp's max and sum in log2 units, unnormalised o) of each of RT rows,
 * ml [GROUPS][RT][2] and o [GROUPS][RT][DP] in shared memory, merged into
 * the block's partial: the max over groups, each weighed by 2^(its max -
 * that max); a group that saw no key weighs 0 (a NaN sum stays NaN:
 * NaN * 0). Only the `live` rows (decode_live_rows) are written: a tile of
 * 16 rows holding one query of a GQA group of 4 writes a quarter. After a
 * barrier that made the states visible. */
template <int GROUPS, int RT, int DP>
TSR_DEVICE void decode_write_partial(const attention_params &p, const float *comb_ml,
                                     const float *comb_o, int64_t b, int64_t kv_head, int64_t tile,
                                     int64_t split, int live) {
  const int dim = (int)p.head_dim;
  const int64_t partial = ((b * p.heads_kv + kv_head) * p.row_groups + tile) * p.splits + split;
  float *ml_out = (float *)p.partials + partial * RT * 2;
  float *o_out = (float *)p.partials + decode_partial_count(p) * RT * 2 + partial * RT * dim;
  for (int idx = threadIdx.x; idx < live * dim; idx += TSR_GPU_DECODE_THREADS) {
    const int r = idx / dim, d = idx % dim;
    float top = -INFINITY;
#pragma unroll
    for (int g = 0; g < GROUPS; g++)
      top = fmaxf(top, comb_ml[(g * RT + r) * 2]);
    float sum = 0.0f, o = 0.0f;
#pragma unroll
    for (int g = 0; g < GROUPS; g++) {
      const float mg = comb_ml[(g * RT + r) * 2];
      const float w = mg == -INFINITY ? 0.0f : decode_exp2(mg - top);
      sum += comb_ml[(g * RT + r) * 2 + 1] * w;
      o += comb_o[(g * RT + r) * DP + d] * w;
    }
    /* (past L1: the block that merges them may run on another SM) */
    TSR_STORE_CG(o_out + idx, o);
    if (d == 0) {
      TSR_STORE_CG(ml_out + r * 2, top);
      TSR_STORE_CG(ml_out + r * 2 + 1, sum);
    }
  }
}

} /* namespace */

#endif /* TESSERA_GPU_ATTENTION_DECODE_COMMON_H */
