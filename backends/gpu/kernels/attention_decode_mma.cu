/* SPDX-License-Identifier: Apache-2.0 */
/* Split-KV decode on tensor cores (bf16 / f16, NVIDIA mma.sync). Included
 * after attention.cu (serving helpers, exp2 / pack helpers) and
 * attention_decode.cu (the combine kernel, which merges this kernel's
 * partials too); the prologue, partial layout and epilogue are
 * attention_decode_common.h's.
 *
 * - tsr_attention_decode_mma_<dt>_d<DP>_k<BKV>_s<STAGES>: a block of 4 warps
 *   per (key chunk, kv head x 16-row tile, sequence), the grid of the split
 *   kernel. Its 16 rows are the kv head's query heads x query rows (row =
 *   query row * group + head in group, padded to 16), one m16 tile, so each
 *   K/V row read serves the whole GQA group. K/V tiles of BKV keys stream
 *   through shared memory with cp.async, STAGES - 1 tiles in flight while
 *   one is used: the loads of a block never wait for its math (the
 *   CUDA-core kernel's warps alternate between the two). Each warp takes
 *   BKV / 4 keys of every tile (8: one n8 tile of S and P V with k16 half
 *   zero; else whole k16 steps): S = Q K^T and O += P V as m16n8k16
 *   products, its own online softmax (max, sum, o in mma accumulators); the
 *   four warps' states meet in shared memory at the end and the block
 *   writes one partial per row in the split kernel's format.
 * - The block of a (sequence, kv head, row tile) that ends last merges the
 *   partials itself (decode_arrive), so no combine kernel runs after it:
 *   that launch waited for the whole grid, then ran on an idle GPU.
 * - Paged keys: a tile lies in one cache block when blocks are whole tiles
 *   (one table entry a tile); otherwise each row has its entry. Either way
 *   a tile's entries are read one iteration before its copy is issued and
 *   kept in registers, so no copy waits on a table read. */

#include "attention_decode_common.h"

#if !defined(__HIPCC__)
namespace {

template <typename T, int DP, int BKV, int WARPS, int STAGES>
TSR_DEVICE void decode_mma_body(const attention_params &p) {
  constexpr int RT = TSR_GPU_DECODE_MMA_ROWS, THREADS = WARPS * 32;
  constexpr int PITCH = DP + TSR_GPU_FLASH_PAD, DK = DP / 16, NT_O = DP / 8, CHUNKS = DP / 8;
  constexpr int KW = BKV / WARPS, NT_S = KW / 8; /* keys of a tile per warp */
  constexpr int LOAD_ROW_STEP = THREADS / CHUNKS, LOAD_ROWS = BKV / LOAD_ROW_STEP;
  static_assert(KW == 8 || KW % 16 == 0, "a warp's keys: one n8 tile or whole k16 steps of P V");
  static_assert(KW != 8 || (DK % 2 == 0 && NT_O % 4 == 0), "8-key warps take k32 / n32 steps");
  static_assert(THREADS % CHUNKS == 0 && BKV % LOAD_ROW_STEP == 0, "whole row steps a thread");
  static_assert(STAGES >= 2, "at least one tile in flight");
  static_assert(THREADS == TSR_GPU_DECODE_THREADS, "launched as the split kernel");
  static_assert(WARPS * RT * (2 + DP) * 4 <= TSR_GPU_DECODE_MMA_SMEM(DP, BKV, STAGES),
                "the warps' states fit where the tiles were");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  uint16_t *q_tile = (uint16_t *)smem_raw;
  uint16_t *k_tiles = q_tile + RT * PITCH;
  uint16_t *v_tiles = k_tiles + STAGES * BKV * PITCH;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, q4 = lane & 3;
  const int mat = lane >> 3, r8 = lane & 7;
  const int64_t split = blockIdx.x, b = blockIdx.z;
  const int64_t kv_head = blockIdx.y / p.row_groups, tile = blockIdx.y % p.row_groups;
  const int dim = (int)p.head_dim;

  /* The visible keys of this thread's two rows (g, g + 8); tiles of BKV
   * keys from the one holding the first key any row sees (chunks are whole
   * tiles), their table entries checked. */
  int row_lo[2] = {0, 0}, row_hi[2] = {0, 0};
  decode_span span;
  if (!decode_span_of<RT>(p, b, split, tile, BKV, &span, [&](int r, int lo, int hi) {
        if (r == g || r == g + 8) {
          row_lo[r == g ? 0 : 1] = lo;
          row_hi[r == g ? 0 : 1] = hi;
        }
      })) {
    decode_arrive<T>(p, b, kv_head, tile);
    return;
  }
  const attn_seq &seq = span.seq;
  const int64_t tile0 = span.tile0;
  const int end_key = (int)span.end;
  const int tile_count = span.end > span.first ? (int)((span.end - tile0 + BKV - 1) / BKV) : 0;

#if TSR_GPU_HAS_MMA_SYNC
  const uint16_t *k_head, *v_head;
  if (p.paged) {
    k_head = (const uint16_t *)p.k + kv_head * p.k_h;
    v_head = (const uint16_t *)p.v + kv_head * p.v_h;
  } else {
    k_head = (const uint16_t *)p.k + b * p.k_b + seq.kv_first * p.k_s + kv_head * p.k_h;
    v_head = (const uint16_t *)p.v + b * p.v_b + seq.kv_first * p.v_s + kv_head * p.v_h;
  }
  const bool tile_in_block = p.paged && p.block_size % BKV == 0;
  const int load_col = (tid % CHUNKS) * 8, load_row = tid / CHUNKS;
  const int col_bytes = load_col < dim ? (dim - load_col >= 8 ? 16 : (dim - load_col) * 2) : 0;
  /* (32-bit division: a paged sequence holds fewer than 2^31 keys) */
  auto entry_of = [&](int j) {
    return p.block_shift >= 0 ? j >> p.block_shift : j / (int)p.block_size;
  };
  /* Paged: the cache block of each row of a tile, read from the table by
   * thread `row` one iteration before the tile's copy is issued (0 past
   * `end`: only the entries of keys before it were checked), stored just
   * before the barrier that precedes the copy: by parity of the tile, as
   * the next tile's entries are stored while this one's may still be read. */
  __shared__ int tile_blocks[2][BKV];
  auto entry_at = [&](int t) {
    const int j = (int)tile0 + t * BKV + tid;
    if (!p.paged || tid >= BKV || t >= tile_count || j >= end_key)
      return 0;
    return (int)attn_index(p.block_table, b * p.table_b + (int64_t)entry_of(j) * p.table_j);
  };
  /* Issues tile t's copy into `stage`: paged rows from tile_blocks, or
   * (`direct`, the first tiles) from the table itself. Rows past `end` are
   * zero-filled from nothing. */
  auto load_kv = [&](int stage, int t, bool direct) {
    const int kv0 = (int)(tile0 + (int64_t)t * BKV);
    uint16_t *ks = k_tiles + stage * BKV * PITCH, *vs = v_tiles + stage * BKV * PITCH;
    auto block_of_row = [&](int row) {
      if (!direct)
        return tile_blocks[t & 1][row];
      const int j = kv0 + row;
      return j < end_key
                 ? (int)attn_index(p.block_table, b * p.table_b + (int64_t)entry_of(j) * p.table_j)
                 : 0;
    };
    if (p.paged && !tile_in_block) {
#pragma unroll
      for (int r = 0; r < LOAD_ROWS; r++) {
        const int row = load_row + r * LOAD_ROW_STEP, j = kv0 + row;
        const bool inside = j < end_key && col_bytes > 0;
        const int64_t cache_block = block_of_row(row);
        const int64_t in_block = j - (int64_t)entry_of(j) * p.block_size;
        const int bytes = inside ? col_bytes : 0;
        tsr_cp_async16(ks + row * PITCH + load_col,
                       inside ? k_head + cache_block * p.k_b + in_block * p.k_s + load_col : k_head,
                       bytes);
        tsr_cp_async16(vs + row * PITCH + load_col,
                       inside ? v_head + cache_block * p.v_b + in_block * p.v_s + load_col : v_head,
                       bytes);
      }
      return;
    }
    const uint16_t *k_from, *v_from;
    if (tile_in_block) {
      const int64_t cache_block = block_of_row(0); /* the tile's one entry */
      const int64_t r0 = kv0 - (int64_t)entry_of(kv0) * p.block_size + load_row;
      k_from = k_head + cache_block * p.k_b + r0 * p.k_s + load_col;
      v_from = v_head + cache_block * p.v_b + r0 * p.v_s + load_col;
    } else {
      k_from = k_head + (int64_t)(kv0 + load_row) * p.k_s + load_col;
      v_from = v_head + (int64_t)(kv0 + load_row) * p.v_s + load_col;
    }
    const int64_t k_step = (int64_t)LOAD_ROW_STEP * p.k_s, v_step = (int64_t)LOAD_ROW_STEP * p.v_s;
#pragma unroll
    for (int r = 0; r < LOAD_ROWS; r++, k_from += k_step, v_from += v_step) {
      const int row = load_row + r * LOAD_ROW_STEP;
      const bool inside = kv0 + row < end_key && col_bytes > 0;
      const int bytes = inside ? col_bytes : 0;
      tsr_cp_async16(ks + row * PITCH + load_col, inside ? k_from : k_head, bytes);
      tsr_cp_async16(vs + row * PITCH + load_col, inside ? v_from : v_head, bytes);
    }
  };
  /* STAGES - 1 tiles in flight before the first is used (a commit group
   * each, empty past the last tile, so wait<STAGES - 2> always means "the
   * oldest is here"); then the entries of the first tile the loop copies. */
#pragma unroll
  for (int s = 0; s < STAGES - 1; s++) {
    if (s < tile_count)
      load_kv(s, s, true);
    tsr_cp_async_commit();
  }
  int next_entry = entry_at(STAGES - 1);

  /* The 16 query rows (bits as they are; padding rows and columns 0),
   * read while the first tiles load. */
  const uint16_t *q_seq = (const uint16_t *)p.q + b * p.q_b + seq.q_first * p.q_s;
  for (int idx = tid; idx < RT * DP; idx += THREADS) {
    const int r = idx / DP, c = idx % DP;
    const int64_t row = tile * RT + r, i = row / p.group, h = kv_head * p.group + row % p.group;
    uint16_t bits = 0;
    if (i < seq.q_len && c < dim)
      bits = q_seq[i * p.q_s + h * p.q_h + (int64_t)c * p.q_d];
    q_tile[r * PITCH + c] = bits;
  }

  float o[NT_O][4];
#pragma unroll
  for (int i = 0; i < NT_O; i++)
#pragma unroll
    for (int e = 0; e < 4; e++)
      o[i][e] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};
  uint32_t q_frag[DK][4];
  const bool capped = p.softcap > 0.0f;

  for (int it = 0; it < tile_count; it++) {
    if (p.paged && tid < BKV)
      tile_blocks[(it + STAGES - 1) & 1][tid] = next_entry;
    tsr_cp_async_wait<STAGES - 2>();
    __syncthreads();
    if (it == 0) {
#pragma unroll
      for (int kd = 0; kd < DK; kd++)
        tsr_ldmatrix_x4(q_frag[kd], q_tile + (lane & 15) * PITCH + kd * 16 + (lane >> 4) * 8);
    }
    /* the stage freed by the last iteration (every warp is past it), from
     * entries read an iteration ago; then the next tile's entries, which
     * arrive while this tile is used */
    if (it + STAGES - 1 < tile_count)
      load_kv((it + STAGES - 1) % STAGES, it + STAGES - 1, false);
    tsr_cp_async_commit();
    next_entry = entry_at(it + STAGES);
    const int stage = it % STAGES;
    const uint16_t *ks = k_tiles + stage * BKV * PITCH + warp * KW * PITCH;
    const uint16_t *vs = v_tiles + stage * BKV * PITCH + warp * KW * PITCH;
    const int key0 = (int)(tile0 + (int64_t)it * BKV) + warp * KW;

    float s[NT_S][4];
#pragma unroll
    for (int i = 0; i < NT_S; i++)
#pragma unroll
      for (int e = 0; e < 4; e++)
        s[i][e] = 0.0f;
    if constexpr (NT_S == 1) {
      /* one n8 tile: an x4 ldmatrix holds two k16 steps of it; even and
       * odd steps in two accumulators halve the chain */
      float s_odd[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int kd = 0; kd < DK; kd += 2) {
        uint32_t bk[4];
        tsr_ldmatrix_x4(bk, ks + r8 * PITCH + kd * 16 + mat * 8);
        tsr_mma_16816<T>(s[0], q_frag[kd], bk);
        tsr_mma_16816<T>(s_odd, q_frag[kd + 1], bk + 2);
      }
#pragma unroll
      for (int e = 0; e < 4; e++)
        s[0][e] += s_odd[e];
    } else {
#pragma unroll
      for (int kd = 0; kd < DK; kd++) {
#pragma unroll
        for (int np = 0; np < NT_S / 2; np++) {
          uint32_t bk[4];
          tsr_ldmatrix_x4(bk,
                          ks + (np * 16 + r8 + (mat >> 1) * 8) * PITCH + kd * 16 + (mat & 1) * 8);
          tsr_mma_16816<T>(s[2 * np], q_frag[kd], bk);
          tsr_mma_16816<T>(s[2 * np + 1], q_frag[kd], bk + 2);
        }
      }
    }
    /* log2 units (capped as the generic kernel: before the mask), masked
     * per row */
#pragma unroll
    for (int nt = 0; nt < NT_S; nt++) {
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int key = key0 + nt * 8 + 2 * q4 + (e & 1), rr = e >> 1;
        float x = capped ? decode_capped_log2(p, s[nt][e])
                         : attn_poison_infinite(s[nt][e] * p.scale_log2);
        if (key >= end_key || key < row_lo[rr] || key >= row_hi[rr])
          x = -INFINITY;
        s[nt][e] = x;
      }
    }
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
      float top = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < NT_S; nt++)
        top = fmaxf(top, fmaxf(s[nt][2 * rr], s[nt][2 * rr + 1]));
      top = fmaxf(top, TSR_SHFL_XOR(top, 1));
      top = fmaxf(top, TSR_SHFL_XOR(top, 2));
      const float new_max = fmaxf(row_max[rr], top); /* skips NaN: it reaches the sum */
      const float base = new_max == -INFINITY ? 0.0f : new_max;
      const float rescale = attn_exp2(row_max[rr] - base); /* 0 while the max is -inf */
      row_max[rr] = new_max;
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < NT_S; nt++) {
#pragma unroll
        for (int e = 2 * rr; e < 2 * rr + 2; e++) {
          const float prob = attn_exp2(s[nt][e] - base); /* -inf: 0 */
          s[nt][e] = prob;
          sum += prob;
        }
      }
      row_sum[rr] = row_sum[rr] * rescale + sum;
#pragma unroll
      for (int dt = 0; dt < NT_O; dt++) {
        o[dt][2 * rr] *= rescale;
        o[dt][2 * rr + 1] *= rescale;
      }
    }
    if constexpr (NT_S == 1) {
      /* P's 8 keys are k 0..7 of a k16 step whose upper half is 0 (A and
       * B alike: garbage times 0 could be NaN); one x4 ldmatrix.trans
       * holds V's 8 rows for four n8 tiles */
      const uint32_t a[4] = {attn_pack2<T>(s[0][0], s[0][1]), attn_pack2<T>(s[0][2], s[0][3]), 0u,
                             0u};
#pragma unroll
      for (int dq = 0; dq < NT_O / 4; dq++) {
        uint32_t bv[4];
        tsr_ldmatrix_x4_trans(bv, vs + r8 * PITCH + dq * 32 + mat * 8);
#pragma unroll
        for (int m = 0; m < 4; m++) {
          const uint32_t bm[2] = {bv[m], 0u};
          tsr_mma_16816<T>(o[4 * dq + m], a, bm);
        }
      }
    } else {
#pragma unroll
      for (int kk = 0; kk < KW / 16; kk++) {
        uint32_t a[4];
        a[0] = attn_pack2<T>(s[2 * kk][0], s[2 * kk][1]);
        a[1] = attn_pack2<T>(s[2 * kk][2], s[2 * kk][3]);
        a[2] = attn_pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
        a[3] = attn_pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
        for (int dp = 0; dp < NT_O / 2; dp++) {
          uint32_t bv[4];
          tsr_ldmatrix_x4_trans(bv, vs + (kk * 16 + r8 + (mat & 1) * 8) * PITCH + dp * 16 +
                                        (mat >> 1) * 8);
          tsr_mma_16816<T>(o[2 * dp], a, bv);
          tsr_mma_16816<T>(o[2 * dp + 1], a, bv + 2);
        }
      }
    }
  }
  tsr_cp_async_wait<0>();
  __syncthreads(); /* the stages become the warps' meeting place */

  /* The warps' states: ml [WARPS][RT][2], o [WARPS][RT][DP] (f32). */
  float *comb_ml = (float *)smem_raw;
  float *comb_o = comb_ml + WARPS * RT * 2;
#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    float total = row_sum[rr];
    total += TSR_SHFL_XOR(total, 1);
    total += TSR_SHFL_XOR(total, 2);
    const int r = g + rr * 8;
    if (q4 == 0) {
      comb_ml[(warp * RT + r) * 2] = row_max[rr];
      comb_ml[(warp * RT + r) * 2 + 1] = total;
    }
#pragma unroll
    for (int dt = 0; dt < NT_O; dt++) {
      const int col = dt * 8 + 2 * q4;
      comb_o[(warp * RT + r) * DP + col] = o[dt][2 * rr];
      comb_o[(warp * RT + r) * DP + col + 1] = o[dt][2 * rr + 1];
    }
  }
  __syncthreads();
  decode_write_partial<WARPS, RT, DP>(p, comb_ml, comb_o, b, kv_head, tile, split,
                                      decode_live_rows(p, seq.q_len, tile, RT));
  decode_arrive<T>(p, b, kv_head, tile);
#else
  TSR_TRAP();
#endif
}

} /* namespace */

/* Two blocks an SM (three where three fit the shared memory of sm_90: 168
 * registers a thread at most). */
#define TSR_GPU_DECODE_MMA_MIN_BLOCKS(DP, BKV, STAGES)                                             \
  (3 * (TSR_GPU_DECODE_MMA_SMEM(DP, BKV, STAGES) + 1024) <= 228 * 1024 ? 3 : 2)
#define TSR_DEFINE_DECODE_MMA_DTYPE(dt, T, DP, BKV, WARPS, STAGES)                                 \
  TSR_KERNEL void __launch_bounds__((WARPS)*32, TSR_GPU_DECODE_MMA_MIN_BLOCKS(DP, BKV, STAGES))    \
      tsr_attention_decode_mma_##dt##_d##DP##_k##BKV##_s##STAGES(                                  \
          TSR_PARAMS(tsr_gpu_attention_params) p) {                                                \
    decode_mma_body<T, DP, BKV, WARPS, STAGES>(p);                                                 \
  }
#define TSR_DEFINE_DECODE_MMA(DP, BKV, WARPS, STAGES)                                              \
  TSR_DEFINE_DECODE_MMA_DTYPE(bf16, tsr_bf16, DP, BKV, WARPS, STAGES)                              \
  TSR_DEFINE_DECODE_MMA_DTYPE(f16, tsr_f16, DP, BKV, WARPS, STAGES)
TSR_DECODE_MMA_CONFIGS(TSR_DEFINE_DECODE_MMA)
#endif /* !__HIPCC__ */
