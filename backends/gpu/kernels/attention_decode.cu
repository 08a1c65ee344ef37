/* SPDX-License-Identifier: Apache-2.0 */
/* Attention for decode (few query rows, long keys): split-KV, as in
 * flash-decoding. Included after attention.cu (its serving helpers).
 *
 * - tsr_attention_decode_<dt>_d<DP>_r<RT>: a block of 128 threads per
 *   (sequence, kv head, row tile, key chunk). Its rows are the tile's RT of
 *   the kv head's query heads x query rows (row = query row * group + head
 *   in group), so each K/V row it reads serves every query head of the GQA
 *   group. A key row is read by LPK lanes, 16 bytes each (LPK = the row's
 *   16-byte vectors, at most 32); a warp reads KPW = 32 / LPK keys at once
 *   and U such steps back to back before it uses any (8 x 16 bytes of K and
 *   V per lane in flight). Each group of LPK lanes keeps its own online
 *   softmax (max, sum, o) for the keys it saw, so the key loop has no
 *   barrier; the groups meet in shared memory at the end and the block
 *   writes one partial (max, sum in log2 units, unnormalised o) per row to
 *   the queue's workspace. A paged row's address comes from its block-table
 *   entry, one read per key row (lanes of a row share it).
 * - tsr_attention_decode_combine_<dt>: a block per (sequence, kv head, row
 *   tile) merges the chunks' partials, writes o and lse, and is the one
 *   that decides and reports a sequence's fault (NaN rows); the split
 *   kernel only declines to read a sequence at fault.
 * Partials, the prologue and the epilogue: attention_decode_common.h. */

#include "attention_decode_common.h"

namespace {

/* 16 bytes of K or V, read once: not kept in L1 on NVIDIA. */
TSR_DEVICE uint4 decode_load16(const void *p) {
#if defined(__HIPCC__)
  return *(const uint4 *)p;
#else
  return tsr_load16_stream(p);
#endif
}

template <typename T, int DP, int RT> TSR_DEVICE void decode_body(const attention_params &p) {
  constexpr int V = 16 / (int)sizeof(T); /* elements per 16-byte vector */
  constexpr int CHP = DP / V;            /* vectors of a padded row */
  constexpr int LPK = CHP < 32 ? CHP : 32;
  constexpr int VPL = CHP / LPK; /* vectors per lane */
  constexpr int KPW = 32 / LPK;  /* keys per warp step */
  /* steps in flight: 8 x 16 bytes of K and of V a lane (4 with 8-row
   * tiles, whose scores and accumulators take twice the registers) */
  constexpr int U = (RT > 4 ? 4 : 8) / VPL;
  constexpr int E = VPL * V; /* elements of a row per lane */
  constexpr int WARPS = TSR_GPU_DECODE_THREADS / 32;
  constexpr int WARP_KEYS = KPW * U, BLOCK_KEYS = WARPS * WARP_KEYS;
  constexpr int GROUPS = WARPS * KPW;
  static_assert(CHP % LPK == 0 && 32 % LPK == 0 && U >= 1, "lanes split rows evenly");
  __shared__ float comb_ml[GROUPS][RT][2];
  __shared__ float comb_o[GROUPS][RT][DP];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int group_lane = lane % LPK, group = warp * KPW + lane / LPK;
  const int64_t split = blockIdx.x, b = blockIdx.z;
  const int64_t kv_head = blockIdx.y / p.row_groups, tile = blockIdx.y % p.row_groups;
  const int vectors = (int)p.head_dim / V;

  /* Each row's visible keys; the block reads their union in its chunk. */
  int row_lo[RT], row_hi[RT];
#pragma unroll
  for (int r = 0; r < RT; r++) {
    row_lo[r] = 0;
    row_hi[r] = 0;
  }
  decode_span span;
  if (!decode_span_of<RT>(p, b, split, tile, 1, &span, [&](int r, int lo, int hi) {
        row_lo[r] = lo;
        row_hi[r] = hi;
      }))
    return;
  const attn_seq &seq = span.seq;
  const int64_t first = span.first, end = span.end;

  /* The rows' query vectors (f32), this lane's columns of them. */
  float q[RT][E];
#pragma unroll
  for (int r = 0; r < RT; r++) {
    const int64_t row = tile * RT + r, i = row / p.group, h = kv_head * p.group + row % p.group;
    const bool live = i < seq.q_len;
    const T *qr = (const T *)p.q + b * p.q_b + (seq.q_first + (live ? i : 0)) * p.q_s + h * p.q_h;
#pragma unroll
    for (int vp = 0; vp < VPL; vp++) {
      const int c = group_lane + vp * LPK;
#pragma unroll
      for (int e = 0; e < V; e++)
        q[r][vp * V + e] =
            live && c < vectors ? tsr_elem<T>::to_float(qr[(int64_t)(c * V + e) * p.q_d]) : 0.0f;
    }
  }

  float m[RT], l[RT], acc[RT][E];
#pragma unroll
  for (int r = 0; r < RT; r++) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int e = 0; e < E; e++)
      acc[r][e] = 0.0f;
  }
  const T *k_head = (const T *)p.k + kv_head * p.k_h;
  const T *v_head = (const T *)p.v + kv_head * p.v_h;
  const bool use_cap = p.softcap > 0.0f;

  for (int64_t key0 = first + warp * WARP_KEYS; key0 < end; key0 += BLOCK_KEYS) {
    /* U steps of loads issued before any is used. */
    uint4 kr[U][VPL], vr[U][VPL];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int64_t j = key0 + u * KPW + lane / LPK;
      int64_t k_row = 0, v_row = 0;
      if (j < end)
        attn_key_rows(p, b, seq.kv_first, j, &k_row, &v_row);
#pragma unroll
      for (int vp = 0; vp < VPL; vp++) {
        const int c = group_lane + vp * LPK;
        if (j < end && c < vectors) {
          kr[u][vp] = decode_load16(k_head + k_row + c * V);
          vr[u][vp] = decode_load16(v_head + v_row + c * V);
        } else {
          kr[u][vp] = make_uint4(0, 0, 0, 0);
          vr[u][vp] = make_uint4(0, 0, 0, 0);
        }
      }
    }
    /* Scores: this lane's columns, then summed over the LPK lanes. */
    float s[U][RT];
#pragma unroll
    for (int u = 0; u < U; u++) {
#pragma unroll
      for (int r = 0; r < RT; r++)
        s[u][r] = 0.0f;
#pragma unroll
      for (int vp = 0; vp < VPL; vp++) {
        float kf[V];
        tsr_vec16<T>::load(&kr[u][vp], kf);
#pragma unroll
        for (int r = 0; r < RT; r++)
#pragma unroll
          for (int e = 0; e < V; e++)
            s[u][r] = fmaf(q[r][vp * V + e], kf[e], s[u][r]);
      }
#pragma unroll
      for (int r = 0; r < RT; r++)
#pragma unroll
        for (int mask = LPK / 2; mask > 0; mask >>= 1)
          s[u][r] += TSR_SHFL_XOR(s[u][r], mask);
    }
    /* Scaled (log2 units), capped, masked; then the online softmax over
     * this group's U keys. */
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int64_t j = key0 + u * KPW + lane / LPK;
#pragma unroll
      for (int r = 0; r < RT; r++) {
        /* (tanhf, not decode_capped_log2: that one spills 4-row tiles) */
        float x =
            use_cap ? attn_capped_log2(p, s[u][r]) : attn_poison_infinite(s[u][r] * p.scale_log2);
        if (j >= end || j < row_lo[r] || j >= row_hi[r])
          x = -INFINITY;
        s[u][r] = x;
      }
    }
#pragma unroll
    for (int r = 0; r < RT; r++) {
      float top = m[r];
#pragma unroll
      for (int u = 0; u < U; u++)
        top = fmaxf(top, s[u][r]); /* skips NaN: it reaches the sum below */
      const float base = top == -INFINITY ? 0.0f : top;
      const float rescale = decode_exp2(m[r] - base); /* 0 while m is -inf */
      float sum = 0.0f;
#pragma unroll
      for (int u = 0; u < U; u++) {
        s[u][r] = s[u][r] == -INFINITY ? 0.0f : decode_exp2(s[u][r] - base);
        sum += s[u][r];
      }
      m[r] = top;
      l[r] = l[r] * rescale + sum;
#pragma unroll
      for (int e = 0; e < E; e++)
        acc[r][e] *= rescale;
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
#pragma unroll
      for (int vp = 0; vp < VPL; vp++) {
        float vf[V];
        tsr_vec16<T>::load(&vr[u][vp], vf);
#pragma unroll
        for (int r = 0; r < RT; r++)
#pragma unroll
          for (int e = 0; e < V; e++)
            acc[r][vp * V + e] = fmaf(s[u][r], vf[e], acc[r][vp * V + e]);
      }
    }
  }

  /* The groups' states meet in shared memory; the block writes the merge. */
#pragma unroll
  for (int r = 0; r < RT; r++) {
#pragma unroll
    for (int vp = 0; vp < VPL; vp++)
#pragma unroll
      for (int e = 0; e < V; e++)
        comb_o[group][r][(group_lane + vp * LPK) * V + e] = acc[r][vp * V + e];
    if (group_lane == 0) {
      comb_ml[group][r][0] = m[r];
      comb_ml[group][r][1] = l[r];
    }
  }
  __syncthreads();
  decode_write_partial<GROUPS, RT, DP>(p, &comb_ml[0][0][0], &comb_o[0][0][0], b, kv_head, tile,
                                       split, decode_live_rows(p, seq.q_len, tile, RT));
}

/* Merges the partials of one (sequence, kv head, row tile), writes o and
 * lse; reports a fault and writes NaN into the sequence's rows of the tile
 * (those the grid covers, where they can be found). By the combine kernel's
 * block, or the split block that arrived last (decode_arrive). */
template <typename T>
TSR_DEVICE void decode_combine_pair(const attention_params &p, int64_t b, int64_t kv_head,
                                    int64_t tile) {
  const int rt = p.tile_rows, dim = (int)p.head_dim;
  const attn_seq seq = attn_seq_resolve(p, b);
  if (seq.fault >= 0 && threadIdx.x == 0 && kv_head == 0 && tile == 0)
    attn_fault(p, seq.fault, b);
  if (seq.fault >= 0 && !seq.q_located)
    return;
  const int64_t chunks = seq.fault >= 0 ? 0 : (seq.kv_len + p.chunk - 1) / p.chunk;
  const int64_t partial0 = ((b * p.heads_kv + kv_head) * p.row_groups + tile) * p.splits;
  const float *ml = (const float *)p.partials + partial0 * rt * 2;
  const float *os =
      (const float *)p.partials + decode_partial_count(p) * rt * 2 + partial0 * rt * dim;
  /* the tile's rows that hold a query row (no partial was written for the
   * others) */
  const int live = decode_live_rows(p, seq.q_len, tile, rt);
  for (int idx = threadIdx.x; idx < live * dim; idx += blockDim.x) {
    const int r = idx / dim, d = idx % dim;
    const int64_t row = tile * rt + r, i = row / p.group, h = kv_head * p.group + row % p.group;
    if (i >= p.max_seqlen_q)
      continue;
    const int64_t at = seq.q_first + i;
    float out, lse;
    if (seq.fault >= 0) {
      out = NAN;
      lse = NAN;
    } else {
      /* (unrolled: four chunks' loads in flight at once, not one L2
       * round trip a chunk; the same order of sums) */
      float top = -INFINITY;
#pragma unroll 4
      for (int64_t s = 0; s < chunks; s++)
        top = fmaxf(top, TSR_LOAD_CG(ml + (s * rt + r) * 2));
      float sum = 0.0f, o = 0.0f;
#pragma unroll 4
      for (int64_t s = 0; s < chunks; s++) {
        const float ms = TSR_LOAD_CG(ml + (s * rt + r) * 2);
        const float w = ms == -INFINITY ? 0.0f : exp2f(ms - top);
        sum += TSR_LOAD_CG(ml + (s * rt + r) * 2 + 1) * w;
        o += TSR_LOAD_CG(os + (s * rt + r) * dim + d) * w;
      }
      /* sum 0: no key seen (o = 0, lse = -inf); a NaN sum stays NaN */
      out = sum == 0.0f ? 0.0f : o / sum;
      lse = sum == 0.0f ? -INFINITY : (top + log2f(sum)) * kLn2;
    }
    T *o_row = (T *)p.o + b * p.o_b + at * p.o_s + h * p.o_h;
    o_row[(int64_t)d * p.o_d] = tsr_elem<T>::from_float(out);
    if (p.has_lse && d == 0)
      ((float *)p.lse)[b * p.lse_b + h * p.lse_h + at * p.lse_s] = lse;
  }
}

template <typename T> TSR_DEVICE void decode_combine_body(const attention_params &p) {
  decode_combine_pair<T>(p, blockIdx.z, blockIdx.x / p.row_groups, blockIdx.x % p.row_groups);
}

/* The end of every split block when p.combine_counters is set (its partial
 * written, or none: a chunk past the sequence's end, a sequence at fault):
 * it counts itself in at its (sequence, kv head, row tile); the last of the
 * p.splits blocks resets the counter and merges the partials, which the
 * others have made visible. Uniform across the block (it has barriers). */
template <typename T>
TSR_DEVICE void decode_arrive(const attention_params &p, int64_t b, int64_t kv_head, int64_t tile) {
  if (!p.combine_counters)
    return;
  __shared__ int last_block;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned *counter =
        (unsigned *)p.combine_counters + (b * p.heads_kv + kv_head) * p.row_groups + tile;
    const unsigned ticket = atomicAdd(counter, 1u);
    last_block = ticket == (unsigned)p.splits - 1;
    if (last_block)
      atomicExch(counter, 0u);
  }
  __syncthreads();
  if (!last_block)
    return;
  __threadfence();
  decode_combine_pair<T>(p, b, kv_head, tile);
}

} /* namespace */

/* Three blocks an SM with 4-row tiles (168 registers; 12 warps with 8 KB of
 * K/V in flight each on sm_90), two with 8-row tiles (whose scores and
 * accumulators spill at 168). */
#define TSR_GPU_DECODE_MIN_BLOCKS(RT) ((RT) > 4 ? 2 : 3)
#define TSR_DEFINE_DECODE_DTYPE(dt, T, DP, RT)                                                     \
  TSR_KERNEL void __launch_bounds__(TSR_GPU_DECODE_THREADS, TSR_GPU_DECODE_MIN_BLOCKS(RT))         \
      tsr_attention_decode_##dt##_d##DP##_r##RT(TSR_PARAMS(tsr_gpu_attention_params) p) {          \
    decode_body<T, DP, RT>(p);                                                                     \
  }
#define TSR_DEFINE_DECODE(DP, RT)                                                                  \
  TSR_DEFINE_DECODE_DTYPE(f32, float, DP, RT)                                                      \
  TSR_DEFINE_DECODE_DTYPE(bf16, tsr_bf16, DP, RT)                                                  \
  TSR_DEFINE_DECODE_DTYPE(f16, tsr_f16, DP, RT)
TSR_DECODE_CONFIGS(TSR_DEFINE_DECODE)

#define TSR_DEFINE_DECODE_COMBINE(dt, T)                                                           \
  TSR_KERNEL void __launch_bounds__(TSR_GPU_DECODE_THREADS)                                        \
      tsr_attention_decode_combine_##dt(TSR_PARAMS(tsr_gpu_attention_params) p) {                  \
    decode_combine_body<T>(p);                                                                     \
  }
TSR_DTYPES_ALL(TSR_DEFINE_DECODE_COMBINE)
