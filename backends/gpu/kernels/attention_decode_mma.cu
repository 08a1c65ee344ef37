/* SPDX-License-Identifier: Apache-2.0 */
/* Split-KV decode on tensor cores (bf16 / f16, NVIDIA mma.sync). Included
 * after attention.cu (serving helpers, exp2 / pack helpers) and
 * attention_decode.cu (the partial layout and the combine kernel, which
 * merges this kernel's partials too).
 *
 * - tsr_attention_decode_mma_<dt>_d<DP>: a block of 4 warps per (key chunk,
 *   kv head x 16-row tile, sequence), the grid of the split kernel. Its 16
 *   rows are the kv head's query heads x query rows (row = query row *
 *   group + head in group, padded to 16), one m16 tile, so each K/V row read
 *   serves the whole GQA group. K/V tiles of BKV keys stream through shared
 *   memory with cp.async, STAGES - 1 tiles in flight while one is used: the
 *   loads of a block never wait for its math (the CUDA-core kernel's warps
 *   alternate between the two). Each warp takes BKV / 4 keys of every tile:
 *   S = Q K^T and O += P V as m16n8k16 products, its own online softmax
 *   (max, sum, o in mma accumulators); the four warps' states meet in shared
 *   memory at the end and the block writes one partial per row in the split
 *   kernel's format ([split] of ml [16][2], then o [16][head_dim]).
 * - Paged keys: a tile lies in one cache block when blocks are whole tiles
 *   (one table entry a tile); otherwise each row reads its entry (already in
 *   L1: the block's table check read the chunk's entries). */

#if !defined(__HIPCC__)
namespace {

template <typename T, int DP, int BKV, int WARPS, int STAGES>
TSR_DEVICE void decode_mma_body(const attention_params &p) {
  constexpr int RT = TSR_GPU_DECODE_MMA_ROWS, THREADS = WARPS * 32;
  constexpr int PITCH = DP + TSR_GPU_FLASH_PAD, DK = DP / 16, NT_O = DP / 8, CHUNKS = DP / 8;
  constexpr int KW = BKV / WARPS, NT_S = KW / 8; /* keys of a tile per warp */
  constexpr int LOAD_ROW_STEP = THREADS / CHUNKS;
  static_assert(KW % 16 == 0, "a warp's keys are whole k16 steps of P V");
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

  /* As the split kernel: a sequence at fault is the combine kernel's to
   * report; chunks past the keys and tiles past the rows have no partial. */
  const attn_seq seq = attn_seq_head(p, b);
  if (seq.fault >= 0)
    return;
  const int64_t chunk_first = split * p.chunk;
  if (chunk_first >= seq.kv_len || tile * RT >= seq.q_len * p.group)
    return;
  const int64_t chunk_end = chunk_first + p.chunk < seq.kv_len ? chunk_first + p.chunk : seq.kv_len;

  /* The visible keys of this thread's two rows (g, g + 8) and the union of
   * all 16 rows' within the chunk (int: key counts stay below 2^31). */
  int row_lo[2] = {0, 0}, row_hi[2] = {0, 0};
  int64_t first = chunk_end, end = chunk_first;
  for (int r = 0; r < RT; r++) {
    const int64_t i = (tile * RT + r) / p.group;
    if (i >= seq.q_len)
      continue;
    int64_t lo, hi;
    key_range_of(p, seq.q_len, seq.kv_len, i, i, &lo, &hi);
    if (r == g || r == g + 8) {
      row_lo[r == g ? 0 : 1] = (int)lo;
      row_hi[r == g ? 0 : 1] = (int)(hi > lo ? hi : lo);
    }
    lo = lo > chunk_first ? lo : chunk_first;
    hi = hi < chunk_end ? hi : chunk_end;
    if (lo < hi) {
      first = lo < first ? lo : first;
      end = hi > end ? hi : end;
    }
  }
  if (first >= end) {
    first = chunk_first;
    end = chunk_first; /* no key: the partial says so */
  }
  /* Tiles of BKV keys from the tile holding `first` (chunks are whole
   * tiles, so tiles never cross a chunk); the table entries of every key
   * read are checked, from tile0's on (a bad one leaves the partial
   * unwritten: the combine kernel's scan finds it and reports it). */
  const int64_t tile0 = first - (first - chunk_first) % BKV;
  const int tile_count = end > first ? (int)((end - tile0 + BKV - 1) / BKV) : 0;
  if (p.paged && first < end &&
      !attn_table_ok(p, b, tile0 / p.block_size, (end - 1) / p.block_size + 1))
    return;

#if TSR_GPU_HAS_MMA_SYNC
  /* The 16 query rows (bits as they are; padding rows and columns 0). */
  const uint16_t *q_seq = (const uint16_t *)p.q + b * p.q_b + seq.q_first * p.q_s;
  for (int idx = tid; idx < RT * DP; idx += THREADS) {
    const int r = idx / DP, c = idx % DP;
    const int64_t row = tile * RT + r, i = row / p.group, h = kv_head * p.group + row % p.group;
    uint16_t bits = 0;
    if (i < seq.q_len && c < dim)
      bits = q_seq[i * p.q_s + h * p.q_h + (int64_t)c * p.q_d];
    q_tile[r * PITCH + c] = bits;
  }

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
  const int end_key = (int)end;
  auto load_kv = [&](int stage, int t) {
    const int kv0 = (int)(tile0 + (int64_t)t * BKV);
    uint16_t *ks = k_tiles + stage * BKV * PITCH, *vs = v_tiles + stage * BKV * PITCH;
    if (p.paged && !tile_in_block) {
#pragma unroll
      for (int r = 0; r < BKV; r += LOAD_ROW_STEP) {
        const int j = kv0 + load_row + r;
        /* keys past `end` read nothing (their entries may be unchecked) */
        const bool inside = j < end_key && col_bytes > 0;
        int64_t k_row = 0, v_row = 0;
        if (j < end_key)
          attn_key_rows(p, b, 0, j, &k_row, &v_row);
        const int bytes = inside ? col_bytes : 0;
        tsr_cp_async16(ks + (load_row + r) * PITCH + load_col,
                       inside ? k_head + k_row + load_col : k_head, bytes);
        tsr_cp_async16(vs + (load_row + r) * PITCH + load_col,
                       inside ? v_head + v_row + load_col : v_head, bytes);
      }
      return;
    }
    const uint16_t *k_from, *v_from;
    if (tile_in_block) {
      const int64_t e = p.block_shift >= 0 ? kv0 >> p.block_shift : kv0 / (int)p.block_size;
      const int64_t cache_block = attn_index(p.block_table, b * p.table_b + e * p.table_j);
      const int64_t r0 = kv0 - e * p.block_size + load_row;
      k_from = k_head + cache_block * p.k_b + r0 * p.k_s + load_col;
      v_from = v_head + cache_block * p.v_b + r0 * p.v_s + load_col;
    } else {
      k_from = k_head + (int64_t)(kv0 + load_row) * p.k_s + load_col;
      v_from = v_head + (int64_t)(kv0 + load_row) * p.v_s + load_col;
    }
    const int64_t k_step = (int64_t)LOAD_ROW_STEP * p.k_s, v_step = (int64_t)LOAD_ROW_STEP * p.v_s;
#pragma unroll
    for (int r = 0; r < BKV; r += LOAD_ROW_STEP, k_from += k_step, v_from += v_step) {
      const bool inside = kv0 + load_row + r < end_key && col_bytes > 0;
      const int bytes = inside ? col_bytes : 0;
      tsr_cp_async16(ks + (load_row + r) * PITCH + load_col, inside ? k_from : k_head, bytes);
      tsr_cp_async16(vs + (load_row + r) * PITCH + load_col, inside ? v_from : v_head, bytes);
    }
  };
  /* STAGES - 1 tiles in flight before the first is used (a commit group
   * each, empty past the last tile, so wait<STAGES - 2> always means "the
   * oldest is here"). */
#pragma unroll
  for (int s = 0; s < STAGES - 1; s++) {
    if (s < tile_count)
      load_kv(s, s);
    tsr_cp_async_commit();
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
    tsr_cp_async_wait<STAGES - 2>();
    __syncthreads();
    if (it == 0) {
#pragma unroll
      for (int kd = 0; kd < DK; kd++)
        tsr_ldmatrix_x4(q_frag[kd], q_tile + (lane & 15) * PITCH + kd * 16 + (lane >> 4) * 8);
    }
    /* the stage freed by the last iteration (every warp is past it) */
    if (it + STAGES - 1 < tile_count)
      load_kv((it + STAGES - 1) % STAGES, it + STAGES - 1);
    tsr_cp_async_commit();
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
#pragma unroll
    for (int kd = 0; kd < DK; kd++) {
#pragma unroll
      for (int np = 0; np < NT_S / 2; np++) {
        uint32_t bk[4];
        tsr_ldmatrix_x4(bk, ks + (np * 16 + r8 + (mat >> 1) * 8) * PITCH + kd * 16 + (mat & 1) * 8);
        tsr_mma_16816<T>(s[2 * np], q_frag[kd], bk);
        tsr_mma_16816<T>(s[2 * np + 1], q_frag[kd], bk + 2);
      }
    }
    /* log2 units (capped as the generic kernel), masked per row */
#pragma unroll
    for (int nt = 0; nt < NT_S; nt++) {
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int key = key0 + nt * 8 + 2 * q4 + (e & 1), rr = e >> 1;
        float x =
            capped ? attn_capped_log2(p, s[nt][e]) : attn_poison_infinite(s[nt][e] * p.scale_log2);
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
  const int64_t partial = ((b * p.heads_kv + kv_head) * p.row_groups + tile) * p.splits + split;
  float *ml_out = (float *)p.partials + partial * RT * 2;
  float *o_out = (float *)p.partials + decode_partial_count(p) * RT * 2 + partial * RT * dim;
  for (int idx = tid; idx < RT * dim; idx += THREADS) {
    const int r = idx / dim, d = idx % dim;
    float top = -INFINITY;
#pragma unroll
    for (int w = 0; w < WARPS; w++)
      top = fmaxf(top, comb_ml[(w * RT + r) * 2]);
    float sum = 0.0f, acc = 0.0f;
#pragma unroll
    for (int w = 0; w < WARPS; w++) {
      const float mw = comb_ml[(w * RT + r) * 2];
      const float weight = mw == -INFINITY ? 0.0f : attn_exp2(mw - top);
      sum += comb_ml[(w * RT + r) * 2 + 1] * weight;
      acc += comb_o[(w * RT + r) * DP + d] * weight;
    }
    o_out[idx] = acc;
    if (d == 0) {
      ml_out[r * 2] = top;
      ml_out[r * 2 + 1] = sum;
    }
  }
#else
  TSR_TRAP();
#endif
}

} /* namespace */

#define TSR_DEFINE_DECODE_MMA_DTYPE(dt, T, DP, BKV, WARPS, STAGES)                                 \
  TSR_KERNEL void __launch_bounds__((WARPS)*32, 2)                                                 \
      tsr_attention_decode_mma_##dt##_d##DP(TSR_PARAMS(tsr_gpu_attention_params) p) {              \
    decode_mma_body<T, DP, BKV, WARPS, STAGES>(p);                                                 \
  }
#define TSR_DEFINE_DECODE_MMA(DP, BKV, WARPS, STAGES)                                              \
  TSR_DEFINE_DECODE_MMA_DTYPE(bf16, tsr_bf16, DP, BKV, WARPS, STAGES)                              \
  TSR_DEFINE_DECODE_MMA_DTYPE(f16, tsr_f16, DP, BKV, WARPS, STAGES)
TSR_DECODE_MMA_CONFIGS(TSR_DEFINE_DECODE_MMA)
#endif /* !__HIPCC__ */
