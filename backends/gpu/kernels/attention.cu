/* SPDX-License-Identifier: Apache-2.0 */
/* Attention forward, flash-style: scores are made and consumed a tile at a
 * time with an online softmax, so nothing of size Sq x Skv reaches global
 * memory.
 *
 * - tsr_attention_flash_<dt>_d<DP>_<BQ>x<BKV>_w<W>: bf16/f16 on tensor cores
 *   (mma.sync). A block owns BQ query rows of one (batch, head); each of its
 *   W warps owns BQ / W consecutive rows (one or two m16 tiles). Key/value
 *   tiles of BKV rows stream through shared memory with cp.async, the next
 *   tile loading while this one computes; S = Q K^T and O += P V are m16n8k16
 *   products, P going from the S accumulators to A fragments in registers.
 *   Masks are evaluated only on tiles a warp's rows do not all see in full;
 *   tiles none of them sees are skipped. Head dims up to DP (multiples of 8)
 *   are zero-padded to DP. The scale rides in the exp2 FMA.
 * - tsr_attention_flash_serving_<dt>_d<DP>_<BQ>x<BKV>_w<W>: the same kernel
 *   for serving problems on a grid (Hq, batch, query tiles) whose last query
 *   tiles launch first (flash_serving_at: the costliest tiles of every
 *   sequence before any cheaper one, longest-first as a list scheduler
 *   wants); blockIdx.y is a sequence, resolved (and at fault:
 *   NaN rows, the fault recorded) as the generic kernel does; packed q rows
 *   from the sequence's first, dense / packed / paged keys (a paged row's
 *   address from its block-table entry: one entry a tile when cache blocks
 *   are whole tiles, else one a row), per-sequence masks, softcap.
 * - tsr_attention_flash_varlen_<dt>_d<DP>_<BQ>x<BKV>_w<W>: the serving kernel
 *   without the block table and the softcap (packed or per-sequence-length
 *   keys), for variable-length prefill, on a grid (query tiles, Hq, batch)
 *   (flash_serving_at says why): the paged addressing and the tanh left in
 *   the loop cost a tenth of the rate in registers and stalls.
 * - tsr_attention_wgmma_*: the same on sm_90a with warpgroup products
 *   (NVIDIA-only: backends/cuda/kernels/attention_sm90.cu, which shares this
 *   file's helpers).
 * - tsr_attention_generic_<dt>: any dtype, head dim and strides, f32 math on
 *   CUDA cores; a warp per query row, key/value tiles shared by the block.
 * Masks: query row i sits at key position i + Skv - Sq; key j is visible when
 * j >= pos - window_left and j <= pos + window_right (each bound only when
 * >= 0). Rows that see no key get o = 0 and lse = -inf. A score that is
 * infinite (from an infinity in q or k; the API masks no key with -inf)
 * turns NaN before the mask is applied, so that row's o and lse are NaN as
 * in the reference, where e^-inf = 0 would hide it. */
#include "gpu_portability.h"
#include "kernel_list.h"
#include "kernel_params.h"

namespace {

typedef tsr_gpu_attention_params attention_params;

const float kLn2 = 0.6931471805599453f;

/* 0 * inf is NaN: infinite scores become NaN, finite ones stay as they are
 * (s + 0), in one FMA. */
TSR_DEVICE float attn_poison_infinite(float s) {
  return fmaf(0.0f, s, s);
}

/* Keys [lo, hi) that query rows [first, last] of a sequence of seq_q query
 * rows and seq_kv keys may see together. */
TSR_DEVICE void key_range_of(const attention_params &p, int64_t seq_q, int64_t seq_kv,
                             int64_t first, int64_t last, int64_t *lo, int64_t *hi) {
  int64_t shift = seq_kv - seq_q;
  *lo = 0;
  *hi = seq_kv;
  if (p.window_left >= 0 && first + shift - p.window_left > 0)
    *lo = first + shift - p.window_left;
  if (p.window_right >= 0 && last + shift + p.window_right + 1 < seq_kv)
    *hi = last + shift + p.window_right + 1;
}

/* The same for the dense problem's one geometry. */
TSR_DEVICE void key_range(const attention_params &p, int64_t first, int64_t last, int64_t *lo,
                          int64_t *hi) {
  key_range_of(p, p.seq_q, p.seq_kv, first, last, lo, hi);
}

/* ---- serving: one sequence's geometry ----
 * Decided exactly as tsr_plugin_attention_seq_of (plugin.h) decides it, in
 * its order: cu_seqlens_q, cu_seqlens_kv, seqlens_kv against the layout,
 * the two bounds, then (attn_table_ok) the block-table entries the keys
 * use. Index tensors are read as plain int32 (their alignment is not part
 * of the op's signature). A dense problem reads nothing. */
struct attn_seq {
  int64_t q_first, q_len;   /* packed: first row of q; dense: 0 */
  int64_t kv_first, kv_len; /* packed keys: first row of k; otherwise 0 */
  int fault;                /* TSR_GPU_FAULT_* or -1 */
  bool q_located;           /* q_first and q_len are meaningful */
};

TSR_DEVICE int64_t attn_index(uint64_t base, int64_t at) {
  return ((const int32_t *)base)[at];
}

/* Everything but the block-table scan; the same in every thread. */
TSR_DEVICE attn_seq attn_seq_head(const attention_params &p, int64_t b) {
  attn_seq s = {0, p.seq_q, 0, p.seq_kv, -1, true};
  if (!p.serving)
    return s;
  /* Every index is loaded before any is checked: the loads overlap instead
   * of paying a memory latency each at the block's start. */
  int64_t q_lo = 0, q_hi = 0, kv_lo = 0, kv_hi = 0, len = 0;
  if (p.cu_q) {
    q_lo = attn_index(p.cu_q, b * p.cu_q_stride);
    q_hi = attn_index(p.cu_q, (b + 1) * p.cu_q_stride);
  }
  if (p.cu_kv) {
    kv_lo = attn_index(p.cu_kv, b * p.cu_kv_stride);
    kv_hi = attn_index(p.cu_kv, (b + 1) * p.cu_kv_stride);
  }
  if (p.seqlens_kv)
    len = attn_index(p.seqlens_kv, b * p.seqlens_stride);
  if (p.cu_q) {
    if (q_lo < 0 || q_hi < q_lo || q_hi > p.q_rows) {
      s.fault = TSR_GPU_FAULT_CU_SEQLENS_Q;
      s.q_located = false;
      s.q_len = 0;
      return s;
    }
    s.q_first = q_lo;
    s.q_len = q_hi - q_lo;
  }
  int64_t capacity = p.seq_kv; /* dense Skv, or the paged capacity */
  if (p.cu_kv) {
    if (kv_lo < 0 || kv_hi < kv_lo || kv_hi > p.kv_rows) {
      s.fault = TSR_GPU_FAULT_CU_SEQLENS_KV;
      return s;
    }
    s.kv_first = kv_lo;
    capacity = kv_hi - kv_lo;
  }
  s.kv_len = capacity;
  if (p.seqlens_kv) {
    if (len < 0 || len > capacity) {
      s.fault = TSR_GPU_FAULT_SEQLENS_KV;
      return s;
    }
    s.kv_len = len;
  }
  if (s.q_len > p.max_seqlen_q) {
    s.fault = TSR_GPU_FAULT_MAX_SEQLEN_Q;
    return s;
  }
  if (s.kv_len > p.max_seqlen_kv)
    s.fault = TSR_GPU_FAULT_MAX_SEQLEN_KV;
  return s;
}

/* Block table entries [first, end) of sequence b all name a block of the
 * cache. Every thread of the block calls it (a barrier). */
TSR_DEVICE bool attn_table_ok(const attention_params &p, int64_t b, int64_t first, int64_t end) {
  int bad = 0;
  for (int64_t e = first + threadIdx.x; e < end; e += blockDim.x) {
    const int64_t block = attn_index(p.block_table, b * p.table_b + e * p.table_j);
    bad |= block < 0 || block >= p.kv_rows;
  }
  return !__syncthreads_or(bad);
}

/* The whole decision for sequence b; every thread of the block calls it. */
TSR_DEVICE attn_seq attn_seq_resolve(const attention_params &p, int64_t b) {
  attn_seq s = attn_seq_head(p, b);
  if (p.paged && s.fault < 0 &&
      !attn_table_ok(p, b, 0, (s.kv_len + p.block_size - 1) / p.block_size))
    s.fault = TSR_GPU_FAULT_BLOCK_TABLE;
  return s;
}

/* Records sequence b's fault: the smallest b of each kind (atomic min). */
TSR_DEVICE void attn_fault(const attention_params &p, int fault, int64_t b) {
  atomicMin((int *)p.faults + fault, (int)b);
}

/* Element offsets of key j of sequence b in k and in v (heads and dims
 * apart): a paged row through its block-table entry, a packed one after
 * kv_first; a dense one (k_b = 0 when packed). */
TSR_DEVICE void attn_key_rows(const attention_params &p, int64_t b, int64_t kv_first, int64_t j,
                              int64_t *k_row, int64_t *v_row) {
  if (p.paged) {
    /* 32-bit division: a paged sequence holds fewer than 2^31 keys */
    const int64_t e =
        p.block_shift >= 0 ? j >> p.block_shift : (int64_t)((int)j / (int)p.block_size);
    const int64_t r = j - e * p.block_size;
    const int64_t block = attn_index(p.block_table, b * p.table_b + e * p.table_j);
    *k_row = block * p.k_b + r * p.k_s;
    *v_row = block * p.v_b + r * p.v_s;
  } else {
    *k_row = b * p.k_b + (kv_first + j) * p.k_s;
    *v_row = b * p.v_b + (kv_first + j) * p.v_s;
  }
}

/* A scaled score (scale * q.k) in log2 units as the softmax takes it: an
 * infinite one turns NaN first (no mask), then the cap. */
TSR_DEVICE float attn_capped_log2(const attention_params &p, float dot) {
  const float s = attn_poison_infinite(dot * p.scale);
  return p.softcap * tanhf(s / p.softcap) * 1.4426950408889634f;
}

/* What one flash block works on: BQ query rows of one (batch, head), the
 * last query tile first (under a causal mask it has the most keys, so the
 * longest blocks start in the first wave and the short ones fill the tail),
 * and the BKV-key tiles any of those rows sees. */
struct flash_block {
  int64_t q0, head, batch;
  const uint16_t *q, *k, *v; /* q of (batch, head), k and v of its key/value head */
  int first_tile, tile_count;
};

template <int BQ, int BKV> TSR_DEVICE flash_block flash_block_of(const attention_params &p) {
  flash_block b;
  b.q0 = (int64_t)(gridDim.x - 1 - blockIdx.x) * BQ;
  b.head = blockIdx.y;
  b.batch = blockIdx.z;
  const int64_t kv_head = b.head / p.group;
  b.q = (const uint16_t *)p.q + b.batch * p.q_b + b.head * p.q_h;
  b.k = (const uint16_t *)p.k + b.batch * p.k_b + kv_head * p.k_h;
  b.v = (const uint16_t *)p.v + b.batch * p.v_b + kv_head * p.v_h;
  const int64_t q_last = (b.q0 + BQ < p.seq_q ? b.q0 + BQ : p.seq_q) - 1;
  int64_t lo, hi;
  key_range(p, b.q0, q_last, &lo, &hi);
  b.first_tile = (int)(lo / BKV);
  b.tile_count = hi > lo ? (int)((hi - (int64_t)b.first_tile * BKV + BKV - 1) / BKV) : 0;
  return b;
}

/* The serving grid's block: its query head, sequence and query tile, the
 * last tiles first (under a causal mask they have the most keys). The
 * serving kernel's grid is (Hq, batch, tiles): every sequence's costliest
 * tiles start before any cheaper one. The varlen kernel's is (tiles, Hq,
 * batch), as the dense kernel's: the blocks that run together share a
 * sequence's keys and values in L2 (all sequences' costliest tiles at once
 * read them from memory again for every tile) and differ in length, so
 * their starts and ends do not coincide; 2-4% faster on packed prefill. */
struct flash_serving_coords {
  int64_t head, seq, tile;
};
template <bool TILES_IN_X> TSR_DEVICE flash_serving_coords flash_serving_at() {
  if (TILES_IN_X)
    return {(int64_t)blockIdx.y, (int64_t)blockIdx.z, (int64_t)(gridDim.x - 1 - blockIdx.x)};
  return {(int64_t)blockIdx.x, (int64_t)blockIdx.y, (int64_t)(gridDim.z - 1 - blockIdx.z)};
}

/* The serving form of flash_block_of for sequence `seq` (resolved, no
 * fault) of blockIdx.y: q and o rows from its first (packed) or of its
 * batch entry (dense); k and v of its key rows (packed: from kv_first;
 * paged: the kv head only, rows come through the block table). */
template <int BQ, int BKV>
TSR_DEVICE flash_block flash_serving_block_of(const attention_params &p, const attn_seq &seq,
                                              const flash_serving_coords &at) {
  flash_block b;
  b.q0 = at.tile * BQ;
  b.head = at.head;
  b.batch = at.seq;
  const int64_t kv_head = b.head / p.group;
  b.q = (const uint16_t *)p.q + b.batch * p.q_b + seq.q_first * p.q_s + b.head * p.q_h;
  if (p.paged) {
    b.k = (const uint16_t *)p.k + kv_head * p.k_h;
    b.v = (const uint16_t *)p.v + kv_head * p.v_h;
  } else {
    b.k = (const uint16_t *)p.k + b.batch * p.k_b + seq.kv_first * p.k_s + kv_head * p.k_h;
    b.v = (const uint16_t *)p.v + b.batch * p.v_b + seq.kv_first * p.v_s + kv_head * p.v_h;
  }
  const int64_t q_last = (b.q0 + BQ < seq.q_len ? b.q0 + BQ : seq.q_len) - 1;
  int64_t lo, hi;
  key_range_of(p, seq.q_len, seq.kv_len, b.q0, q_last, &lo, &hi);
  b.first_tile = (int)(lo / BKV);
  b.tile_count = hi > lo ? (int)((hi - (int64_t)b.first_tile * BKV + BKV - 1) / BKV) : 0;
  return b;
}

/* A sequence at fault: recorded (once a block is enough: atomic min), and
 * NaN in the o rows and lse entries of the block's query tile [q0, q0 + BQ)
 * where they can be found. */
template <typename T>
TSR_DEVICE void flash_fault_rows(const attention_params &p, const attn_seq &seq,
                                 const flash_serving_coords &at, int64_t q0, int rows) {
  const int64_t b = at.seq, head = at.head;
  if (threadIdx.x == 0)
    attn_fault(p, seq.fault, b);
  if (!seq.q_located)
    return;
  const int64_t end = q0 + rows < seq.q_len ? q0 + rows : seq.q_len;
  const int dim = (int)p.head_dim;
  for (int64_t idx = threadIdx.x; idx < (end - q0) * dim; idx += blockDim.x) {
    const int64_t at = seq.q_first + q0 + idx / dim;
    const int d = (int)(idx % dim);
    ((T *)p.o)[b * p.o_b + head * p.o_h + at * p.o_s + d * p.o_d] = tsr_elem<T>::from_float(NAN);
    if (p.has_lse && d == 0)
      ((float *)p.lse)[b * p.lse_b + head * p.lse_h + at * p.lse_s] = NAN;
  }
}

#if !defined(__HIPCC__)

/* 2^x in one MUFU instruction; -inf gives +0, which masked scores rely on. */
TSR_DEVICE float attn_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

/* Two f32 values rounded into one register of two 16-bit values (low half
 * first) with one cvt instead of two. */
template <typename T> TSR_DEVICE uint32_t attn_pack2(float lo, float hi) {
  uint32_t r;
  if constexpr (std::is_same<T, tsr_bf16>::value)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

/* BQ query rows per block, WARPS warps each owning BQ / WARPS consecutive
 * rows (MT m16 tiles: two tiles per warp halve the K/V shared-memory reads
 * per product), BKV keys per tile, STAGES key/value buffers, Q fragments
 * kept in registers or re-read from shared memory each tile. */
template <typename T, int DP, int BQ, int BKV, int WARPS, int STAGES, bool Q_REGS, bool SERVING,
          bool GENERAL>
TSR_DEVICE void flash_body(const attention_params &p) {
  constexpr int THREADS = WARPS * 32, ROWS_PER_WARP = BQ / WARPS, MT = ROWS_PER_WARP / 16;
  constexpr int PITCH = DP + TSR_GPU_FLASH_PAD;
  constexpr int DK = DP / 16, NT_S = BKV / 8, NT_O = DP / 8, CHUNKS = DP / 8;
  constexpr int LOAD_ROW_STEP = THREADS / CHUNKS;
  static_assert(ROWS_PER_WARP % 16 == 0 && MT >= 1, "each warp owns whole m16 tiles");
  static_assert(THREADS % CHUNKS == 0 && BQ % LOAD_ROW_STEP == 0 && BKV % LOAD_ROW_STEP == 0,
                "every thread copies one fixed column of whole row steps");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  uint16_t *q_tile = (uint16_t *)smem_raw;
  uint16_t *k_tiles = q_tile + BQ * PITCH;
  uint16_t *v_tiles = k_tiles + STAGES * BKV * PITCH;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, q4 = lane & 3;
  const int mat = lane >> 3, r8 = lane & 7;
  /* Serving: the block's sequence (blockIdx.y) decides its geometry, and a
   * fault ends the block after its NaN rows; tiles past the sequence's
   * query rows have nothing to do. */
  attn_seq seq = {0, p.seq_q, 0, p.seq_kv, -1, true};
  const flash_serving_coords at =
      SERVING ? flash_serving_at<!GENERAL>() : flash_serving_coords{0, 0, 0};
  if (SERVING) {
    seq = GENERAL ? attn_seq_resolve(p, at.seq) : attn_seq_head(p, at.seq);
    const int64_t tile_q0 = at.tile * BQ;
    if (seq.fault >= 0) {
      flash_fault_rows<T>(p, seq, at, tile_q0, BQ);
      return;
    }
    if (tile_q0 >= seq.q_len)
      return;
  }
  const flash_block block =
      SERVING ? flash_serving_block_of<BQ, BKV>(p, seq, at) : flash_block_of<BQ, BKV>(p);
  const int64_t q0 = block.q0, head = block.head, batch = block.batch;
  const int seq_q = (int)seq.q_len, seq_kv = (int)seq.kv_len, dim = (int)p.head_dim;
  const uint16_t *q_base = block.q, *k_base = block.k, *v_base = block.v;
  const int first_tile = block.first_tile, tile_count = block.tile_count;
  /* paged keys: a tile lies in one cache block when blocks are whole tiles
   * (one table entry a tile), else each row reads its own entry */
  const bool paged = GENERAL && p.paged, tile_in_block = paged && p.block_size % BKV == 0;
  const bool capped = GENERAL && p.softcap > 0.0f;

#if TSR_GPU_HAS_MMA_SYNC
  /* Each thread copies 16 bytes at one fixed column of rows load_row,
   * load_row + LOAD_ROW_STEP, ...; columns past the head dim read nothing
   * and are zero-filled. */
  const int load_col = (tid % CHUNKS) * 8, load_row = tid / CHUNKS;
  const int col_bytes = load_col < dim ? (dim - load_col >= 8 ? 16 : (dim - load_col) * 2) : 0;
  {
    const uint16_t *from = q_base + (q0 + load_row) * p.q_s + load_col;
    const int64_t step = (int64_t)LOAD_ROW_STEP * p.q_s;
#pragma unroll
    for (int r = 0; r < BQ; r += LOAD_ROW_STEP, from += step) {
      bool inside = q0 + load_row + r < seq_q && col_bytes > 0;
      tsr_cp_async16(q_tile + (load_row + r) * PITCH + load_col, inside ? from : q_base,
                     inside ? col_bytes : 0);
    }
  }
  const int64_t k_step = (int64_t)LOAD_ROW_STEP * p.k_s, v_step = (int64_t)LOAD_ROW_STEP * p.v_s;
  auto load_kv = [&](int stage, int tile) {
    const int kv0 = tile * BKV;
    uint16_t *ks = k_tiles + stage * BKV * PITCH, *vs = v_tiles + stage * BKV * PITCH;
    if (paged && !tile_in_block) {
      /* a table entry per row (blocks smaller than a tile, or not whole
       * tiles); rows past the keys read none (their entries are unchecked) */
#pragma unroll
      for (int r = 0; r < BKV; r += LOAD_ROW_STEP) {
        const int j = kv0 + load_row + r;
        const bool inside = j < seq_kv && col_bytes > 0;
        int64_t k_row = 0, v_row = 0;
        if (j < seq_kv)
          attn_key_rows(p, batch, 0, j, &k_row, &v_row);
        const int bytes = inside ? col_bytes : 0;
        tsr_cp_async16(ks + (load_row + r) * PITCH + load_col,
                       inside ? k_base + k_row + load_col : k_base, bytes);
        tsr_cp_async16(vs + (load_row + r) * PITCH + load_col,
                       inside ? v_base + v_row + load_col : v_base, bytes);
      }
      return;
    }
    const uint16_t *k_from, *v_from;
    if (tile_in_block) {
      /* the tile's one entry (kv0 < seq_kv: a checked one) */
      const int64_t e = p.block_shift >= 0 ? kv0 >> p.block_shift : kv0 / (int)p.block_size;
      const int64_t cache_block = attn_index(p.block_table, batch * p.table_b + e * p.table_j);
      const int64_t r0 = kv0 - e * p.block_size + load_row;
      k_from = k_base + cache_block * p.k_b + r0 * p.k_s + load_col;
      v_from = v_base + cache_block * p.v_b + r0 * p.v_s + load_col;
    } else {
      k_from = k_base + (int64_t)(kv0 + load_row) * p.k_s + load_col;
      v_from = v_base + (int64_t)(kv0 + load_row) * p.v_s + load_col;
    }
#pragma unroll
    for (int r = 0; r < BKV; r += LOAD_ROW_STEP, k_from += k_step, v_from += v_step) {
      bool inside = kv0 + load_row + r < seq_kv && col_bytes > 0;
      int bytes = inside ? col_bytes : 0;
      tsr_cp_async16(ks + (load_row + r) * PITCH + load_col, inside ? k_from : k_base, bytes);
      tsr_cp_async16(vs + (load_row + r) * PITCH + load_col, inside ? v_from : v_base, bytes);
    }
  };
  if (tile_count > 0)
    load_kv(0, first_tile);
  tsr_cp_async_commit();

  float o[MT][NT_O][4];
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int i = 0; i < NT_O; i++)
#pragma unroll
      for (int e = 0; e < 4; e++)
        o[mt][i][e] = 0.0f;
  float row_max[MT][2], row_sum[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
      row_max[mt][rr] = -INFINITY;
      row_sum[mt][rr] = 0.0f;
    }
  uint32_t q_frag[Q_REGS ? MT : 1][Q_REGS ? DK : 1][4];

  const int warp_row0 = (int)q0 + warp * ROWS_PER_WARP;
  const int window_left = p.window_left < 0 ? -1 : (int)p.window_left;
  const int window_right = p.window_right < 0 ? -1 : (int)p.window_right;
  /* Scores stay unscaled and the scale rides in the exp2 FMA (s * c - m * c)
   * when it is positive; otherwise they are scaled first so the max is
   * still taken over what the softmax sees. */
  const bool scale_in_exp = p.scale_log2 > 0.0f && !capped;
  const float exp_scale = scale_in_exp ? p.scale_log2 : 1.0f;

  for (int it = 0; it < tile_count; it++) {
    tsr_cp_async_wait<0>();
    __syncthreads();
    if (Q_REGS && it == 0) {
#pragma unroll
      for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int kd = 0; kd < (Q_REGS ? DK : 0); kd++)
          tsr_ldmatrix_x4(q_frag[Q_REGS ? mt : 0][Q_REGS ? kd : 0],
                          q_tile + (warp * ROWS_PER_WARP + mt * 16 + (lane & 15)) * PITCH +
                              kd * 16 + (lane >> 4) * 8);
    }
    const int stage = STAGES == 2 ? (it & 1) : 0;
    if (STAGES == 2 && it + 1 < tile_count)
      load_kv((it + 1) & 1, first_tile + it + 1);
    tsr_cp_async_commit();
    const uint16_t *ks = k_tiles + stage * BKV * PITCH, *vs = v_tiles + stage * BKV * PITCH;
    const int kv0 = (first_tile + it) * BKV;

    /* Warp-uniform: a tile none of this warp's rows sees is skipped, and
     * one all of them see in full needs no mask. The row bounds are derived
     * here each tile rather than held across the loop: held, they raise the
     * serving kernel's spills from 84/116 to 108/164 bytes (ptxas, sm_90a,
     * d128 128x64). */
    const int shift = seq_kv - seq_q;
    const int warp_row_end = warp_row0 + ROWS_PER_WARP < seq_q ? warp_row0 + ROWS_PER_WARP : seq_q;
    const int pos_first = warp_row0 + shift, pos_last = warp_row_end - 1 + shift;
    const bool skip = warp_row0 >= seq_q || kv0 >= seq_kv ||
                      (window_right >= 0 && kv0 > pos_last + window_right) ||
                      (window_left >= 0 && kv0 + BKV - 1 < pos_first - window_left);
    const bool full = kv0 + BKV <= seq_kv &&
                      (window_right < 0 || kv0 + BKV - 1 <= pos_first + window_right) &&
                      (window_left < 0 || kv0 >= pos_last - window_left);
    if (!skip) {
      float s[MT][NT_S][4];
#pragma unroll
      for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int i = 0; i < NT_S; i++)
#pragma unroll
          for (int e = 0; e < 4; e++)
            s[mt][i][e] = 0.0f;
#pragma unroll
      for (int kd = 0; kd < DK; kd++) {
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
          if (Q_REGS) {
#pragma unroll
            for (int e = 0; e < 4; e++)
              a[mt][e] = q_frag[Q_REGS ? mt : 0][Q_REGS ? kd : 0][e];
          } else {
            tsr_ldmatrix_x4(a[mt], q_tile + (warp * ROWS_PER_WARP + mt * 16 + (lane & 15)) * PITCH +
                                       kd * 16 + (lane >> 4) * 8);
          }
        }
#pragma unroll
        for (int np = 0; np < NT_S / 2; np++) {
          uint32_t b[4];
          tsr_ldmatrix_x4(b,
                          ks + (np * 16 + r8 + (mat >> 1) * 8) * PITCH + kd * 16 + (mat & 1) * 8);
#pragma unroll
          for (int mt = 0; mt < MT; mt++) {
            tsr_mma_16816<T>(s[mt][2 * np], a[mt], b);
            tsr_mma_16816<T>(s[mt][2 * np + 1], a[mt], b + 2);
          }
        }
      }

      if (capped) {
        /* scale, NaN for infinities, the cap, log2 units: as the generic
         * kernel (exp_scale is 1) */
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
          for (int nt = 0; nt < NT_S; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
              s[mt][nt][e] = attn_capped_log2(p, s[mt][nt][e]);
      } else {
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
          for (int nt = 0; nt < NT_S; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
              s[mt][nt][e] = attn_poison_infinite(s[mt][nt][e]);
      }
      if (!scale_in_exp && !capped) {
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
          for (int nt = 0; nt < NT_S; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
              s[mt][nt][e] *= p.scale_log2;
      }
      if (!full) {
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
#pragma unroll
          for (int nt = 0; nt < NT_S; nt++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
              int key = kv0 + nt * 8 + 2 * q4 + (e & 1);
              int position = warp_row0 + mt * 16 + g + (e >> 1) * 8 + shift;
              bool visible = key < seq_kv && (window_left < 0 || key >= position - window_left) &&
                             (window_right < 0 || key <= position + window_right);
              if (!visible)
                s[mt][nt][e] = -INFINITY;
            }
          }
        }
      }
#pragma unroll
      for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int rr = 0; rr < 2; rr++) {
          float tile_max = -INFINITY;
#pragma unroll
          for (int nt = 0; nt < NT_S; nt++)
            tile_max = fmaxf(tile_max, fmaxf(s[mt][nt][2 * rr], s[mt][nt][2 * rr + 1]));
          tile_max = fmaxf(tile_max, TSR_SHFL_XOR(tile_max, 1));
          tile_max = fmaxf(tile_max, TSR_SHFL_XOR(tile_max, 2));
          const float new_max = fmaxf(row_max[mt][rr], tile_max);
          /* A row that has seen no key yet keeps max -inf: subtracting 0
           * instead keeps exp2(-inf) = 0 and no inf - inf. */
          const float max_scaled = new_max == -INFINITY ? 0.0f : __fmul_rn(new_max, exp_scale);
          /* Both products rounded alike (no FMA contraction), so an
           * unchanged max rescales by exactly 1. */
          const float rescale = attn_exp2(__fmul_rn(row_max[mt][rr], exp_scale) - max_scaled);
          row_max[mt][rr] = new_max;
          float sum = 0.0f;
#pragma unroll
          for (int nt = 0; nt < NT_S; nt++) {
#pragma unroll
            for (int e = 2 * rr; e < 2 * rr + 2; e++) {
              float prob = attn_exp2(fmaf(s[mt][nt][e], exp_scale, -max_scaled));
              s[mt][nt][e] = prob;
              sum += prob;
            }
          }
          row_sum[mt][rr] = row_sum[mt][rr] * rescale + sum;
#pragma unroll
          for (int dt = 0; dt < NT_O; dt++) {
            o[mt][dt][2 * rr] *= rescale;
            o[mt][dt][2 * rr + 1] *= rescale;
          }
        }
      }

#pragma unroll
      for (int kk = 0; kk < BKV / 16; kk++) {
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
          a[mt][0] = attn_pack2<T>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
          a[mt][1] = attn_pack2<T>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
          a[mt][2] = attn_pack2<T>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
          a[mt][3] = attn_pack2<T>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
        }
#pragma unroll
        for (int dp = 0; dp < NT_O / 2; dp++) {
          uint32_t b[4];
          tsr_ldmatrix_x4_trans(b, vs + (kk * 16 + r8 + (mat & 1) * 8) * PITCH + dp * 16 +
                                       (mat >> 1) * 8);
#pragma unroll
          for (int mt = 0; mt < MT; mt++) {
            tsr_mma_16816<T>(o[mt][2 * dp], a[mt], b);
            tsr_mma_16816<T>(o[mt][2 * dp + 1], a[mt], b + 2);
          }
        }
      }
    }
    if (STAGES == 1 && it + 1 < tile_count) {
      __syncthreads();
      load_kv(0, first_tile + it + 1);
      tsr_cp_async_commit();
    }
  }
  tsr_cp_async_wait<0>();

#pragma unroll
  for (int mt = 0; mt < MT; mt++) {
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
      float total = row_sum[mt][rr];
      total += TSR_SHFL_XOR(total, 1);
      total += TSR_SHFL_XOR(total, 2);
      const int row = warp_row0 + mt * 16 + rr * 8 + g;
      if (row >= seq_q)
        continue;
      /* total 0: no key seen; a NaN total stays NaN in o and lse */
      float inverse = total == 0.0f ? 0.0f : 1.0f / total;
      const int64_t at = seq.q_first + row; /* row of o and lse (packed: from the first) */
      T *o_row = (T *)p.o + batch * p.o_b + head * p.o_h + at * p.o_s;
#pragma unroll
      for (int dt = 0; dt < NT_O; dt++) {
        int col = dt * 8 + 2 * q4;
        if (col < dim) {
          float v0 = o[mt][dt][2 * rr] * inverse, v1 = o[mt][dt][2 * rr + 1] * inverse;
          T *dst = o_row + col * p.o_d;
          if (p.o_d == 1 && ((uintptr_t)dst & 3) == 0) {
            *(uint32_t *)dst = attn_pack2<T>(v0, v1);
          } else {
            dst[0] = tsr_elem<T>::from_float(v0);
            dst[p.o_d] = tsr_elem<T>::from_float(v1);
          }
        }
      }
      if (p.has_lse && q4 == 0) {
        float lse = total == 0.0f ? -INFINITY : (row_max[mt][rr] * exp_scale + log2f(total)) * kLn2;
        ((float *)p.lse)[batch * p.lse_b + head * p.lse_h + at * p.lse_s] = lse;
      }
    }
  }
#else
  (void)q_base;
  (void)k_base;
  (void)v_base;
  (void)tile_count;
  TSR_TRAP();
#endif
}

#endif /* !__HIPCC__ */

template <typename T> TSR_DEVICE void attention_generic_body(const attention_params &p) {
  constexpr int ROWS = TSR_GPU_ATTN_ROWS;
  extern __shared__ __align__(16) float smem_f32[];
  __shared__ int64_t ranges[ROWS][2];
  __shared__ int64_t key_rows[2][32]; /* the tile's k and v row offsets */
  const int dim = (int)p.head_dim, kt = p.kv_tile, pitch = dim + 1;
  float *q_rows = smem_f32;
  float *o_rows = q_rows + ROWS * dim;
  float *k_tile = o_rows + ROWS * dim;
  float *v_tile = k_tile + kt * pitch;
  float *probs = v_tile + kt * pitch;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t row = (int64_t)blockIdx.x * ROWS + warp, head = blockIdx.y, batch = blockIdx.z;
  const int64_t kv_head = head / p.group;
  /* The sequence's geometry (dense: the problem's); a sequence at fault
   * gets NaN in the rows this block owns, where they can be found. */
  const attn_seq seq = attn_seq_resolve(p, batch);
  const int64_t seq_q = seq.q_len, seq_kv = seq.kv_len;
  const int64_t q_at = seq.q_first + row; /* row of q / o / lse */
  if (seq.fault >= 0) {
    if (tid == 0)
      attn_fault(p, seq.fault, batch);
    if (!seq.q_located || row >= seq_q)
      return;
    T *o = (T *)p.o + batch * p.o_b + head * p.o_h + q_at * p.o_s;
    for (int d = lane; d < dim; d += 32)
      o[d * p.o_d] = tsr_elem<T>::from_float(NAN);
    if (p.has_lse && lane == 0)
      ((float *)p.lse)[batch * p.lse_b + head * p.lse_h + q_at * p.lse_s] = NAN;
    return;
  }
  const bool row_valid = row < seq_q;
  int64_t lo = seq_kv, hi = 0;
  if (row_valid)
    key_range_of(p, seq_q, seq_kv, row, row, &lo, &hi);
  if (lane == 0) {
    ranges[warp][0] = lo;
    ranges[warp][1] = hi;
  }
  const T *q = (const T *)p.q + batch * p.q_b + head * p.q_h + q_at * p.q_s;
  for (int d = lane; d < dim; d += 32) {
    q_rows[warp * dim + d] = row_valid ? tsr_elem<T>::to_float(q[d * p.q_d]) : 0.0f;
    o_rows[warp * dim + d] = 0.0f;
  }
  __syncthreads();
  int64_t block_lo = seq_kv, block_hi = 0;
  for (int w = 0; w < ROWS; w++) {
    if (ranges[w][0] < ranges[w][1]) {
      block_lo = ranges[w][0] < block_lo ? ranges[w][0] : block_lo;
      block_hi = ranges[w][1] > block_hi ? ranges[w][1] : block_hi;
    }
  }
  const T *k = (const T *)p.k + kv_head * p.k_h;
  const T *v = (const T *)p.v + kv_head * p.v_h;
  float running_max = -INFINITY, running_sum = 0.0f;

  for (int64_t kv0 = block_lo; kv0 < block_hi; kv0 += kt) {
    __syncthreads();
    if (tid < kt && kv0 + tid < block_hi)
      attn_key_rows(p, batch, seq.kv_first, kv0 + tid, &key_rows[0][tid], &key_rows[1][tid]);
    __syncthreads();
    for (int i = tid; i < kt * dim; i += blockDim.x) {
      int j = i / dim, d = i % dim;
      int64_t key = kv0 + j;
      bool inside = key < block_hi;
      k_tile[j * pitch + d] = inside ? tsr_elem<T>::to_float(k[key_rows[0][j] + d * p.k_d]) : 0.0f;
      v_tile[j * pitch + d] = inside ? tsr_elem<T>::to_float(v[key_rows[1][j] + d * p.v_d]) : 0.0f;
    }
    __syncthreads();
    float score = -INFINITY;
    int64_t key = kv0 + lane;
    if (lane < kt && key >= lo && key < hi) {
      float dot = 0.0f;
      const float *kr = k_tile + lane * pitch, *qr = q_rows + warp * dim;
      for (int d = 0; d < dim; d++)
        dot = fmaf(qr[d], kr[d], dot);
      score =
          p.softcap > 0.0f ? attn_capped_log2(p, dot) : attn_poison_infinite(dot * p.scale_log2);
    }
    /* The max skips NaN scores: a row of only NaN keeps max -inf, and its
     * NaN reaches the sum through exp2(NaN). */
    float new_max = fmaxf(running_max, tsr_warp_max(score));
    bool empty = new_max == -INFINITY;
    float rescale = empty ? 1.0f : exp2f(running_max - new_max);
    float prob = score == -INFINITY ? 0.0f : exp2f(score - (empty ? 0.0f : new_max));
    running_sum = running_sum * rescale + tsr_warp_sum(prob);
    running_max = new_max;
    probs[warp * 32 + lane] = prob;
    TSR_SYNCWARP();
    int used = kt < 32 ? kt : 32;
    for (int d = lane; d < dim; d += 32) {
      float acc = o_rows[warp * dim + d] * rescale;
      for (int j = 0; j < used; j++)
        acc = fmaf(probs[warp * 32 + j], v_tile[j * pitch + d], acc);
      o_rows[warp * dim + d] = acc;
    }
    TSR_SYNCWARP();
  }
  if (!row_valid)
    return;
  float inverse = running_sum == 0.0f ? 0.0f : 1.0f / running_sum;
  T *o = (T *)p.o + batch * p.o_b + head * p.o_h + q_at * p.o_s;
  for (int d = lane; d < dim; d += 32)
    o[d * p.o_d] = tsr_elem<T>::from_float(o_rows[warp * dim + d] * inverse);
  if (p.has_lse && lane == 0)
    ((float *)p.lse)[batch * p.lse_b + head * p.lse_h + q_at * p.lse_s] =
        running_sum == 0.0f ? -INFINITY : (running_max + log2f(running_sum)) * kLn2;
}

} /* namespace */

#if !defined(__HIPCC__)
#define TSR_DEFINE_FLASH_DTYPE(dt, T, DP, BQ, BKV, WARPS, STAGES, QREGS)                           \
  TSR_KERNEL void __launch_bounds__((WARPS)*32)                                                    \
      tsr_attention_flash_##dt##_d##DP##_##BQ##x##BKV##_w##WARPS(                                  \
          TSR_PARAMS(tsr_gpu_attention_params) p) {                                                \
    flash_body<T, DP, BQ, BKV, WARPS, STAGES, QREGS != 0, false, false>(p);                        \
  }
#define TSR_DEFINE_FLASH(DP, BQ, BKV, WARPS, STAGES, QREGS)                                        \
  TSR_DEFINE_FLASH_DTYPE(bf16, tsr_bf16, DP, BQ, BKV, WARPS, STAGES, QREGS)                        \
  TSR_DEFINE_FLASH_DTYPE(f16, tsr_f16, DP, BQ, BKV, WARPS, STAGES, QREGS)
TSR_FLASH_CONFIGS(TSR_DEFINE_FLASH)
/* Serving forms (packed / paged / per-sequence lengths, softcap, faults):
 * grid (Hq, batch, query tiles); varlen (neither paged nor capped): grid
 * (query tiles, Hq, batch). */
#define TSR_DEFINE_FLASH_SERVING_DTYPE(dt, T, DP, BQ, BKV, WARPS, STAGES, QREGS)                   \
  TSR_KERNEL void __launch_bounds__((WARPS)*32)                                                    \
      tsr_attention_flash_serving_##dt##_d##DP##_##BQ##x##BKV##_w##WARPS(                          \
          TSR_PARAMS(tsr_gpu_attention_params) p) {                                                \
    flash_body<T, DP, BQ, BKV, WARPS, STAGES, QREGS != 0, true, true>(p);                          \
  }                                                                                                \
  TSR_KERNEL void __launch_bounds__((WARPS)*32)                                                    \
      tsr_attention_flash_varlen_##dt##_d##DP##_##BQ##x##BKV##_w##WARPS(                           \
          TSR_PARAMS(tsr_gpu_attention_params) p) {                                                \
    flash_body<T, DP, BQ, BKV, WARPS, STAGES, QREGS != 0, true, false>(p);                         \
  }
#define TSR_DEFINE_FLASH_SERVING(DP, BQ, BKV, WARPS, STAGES, QREGS)                                \
  TSR_DEFINE_FLASH_SERVING_DTYPE(bf16, tsr_bf16, DP, BQ, BKV, WARPS, STAGES, QREGS)                \
  TSR_DEFINE_FLASH_SERVING_DTYPE(f16, tsr_f16, DP, BQ, BKV, WARPS, STAGES, QREGS)
TSR_FLASH_SERVING_CONFIGS(TSR_DEFINE_FLASH_SERVING)
#endif

#define TSR_DEFINE_ATTN_GENERIC(dt, T)                                                             \
  TSR_KERNEL void __launch_bounds__(128)                                                           \
      tsr_attention_generic_##dt(TSR_PARAMS(tsr_gpu_attention_params) p) {                         \
    attention_generic_body<T>(p);                                                                  \
  }
TSR_DTYPES_ALL(TSR_DEFINE_ATTN_GENERIC)
