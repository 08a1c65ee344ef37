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

/* Keys [lo, hi) that query rows [first, last] may see together. */
TSR_DEVICE void key_range(const attention_params &p, int64_t first, int64_t last, int64_t *lo,
                          int64_t *hi) {
  int64_t shift = p.seq_kv - p.seq_q;
  *lo = 0;
  *hi = p.seq_kv;
  if (p.window_left >= 0 && first + shift - p.window_left > 0)
    *lo = first + shift - p.window_left;
  if (p.window_right >= 0 && last + shift + p.window_right + 1 < p.seq_kv)
    *hi = last + shift + p.window_right + 1;
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
template <typename T, int DP, int BQ, int BKV, int WARPS, int STAGES, bool Q_REGS>
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
  const flash_block block = flash_block_of<BQ, BKV>(p);
  const int64_t q0 = block.q0, head = block.head, batch = block.batch;
  const int seq_q = (int)p.seq_q, seq_kv = (int)p.seq_kv, dim = (int)p.head_dim;
  const uint16_t *q_base = block.q, *k_base = block.k, *v_base = block.v;
  const int first_tile = block.first_tile, tile_count = block.tile_count;

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
      bool inside = q0 + load_row + r < p.seq_q && col_bytes > 0;
      tsr_cp_async16(q_tile + (load_row + r) * PITCH + load_col, inside ? from : q_base,
                     inside ? col_bytes : 0);
    }
  }
  const int64_t k_step = (int64_t)LOAD_ROW_STEP * p.k_s, v_step = (int64_t)LOAD_ROW_STEP * p.v_s;
  auto load_kv = [&](int stage, int tile) {
    const int kv0 = tile * BKV;
    uint16_t *ks = k_tiles + stage * BKV * PITCH, *vs = v_tiles + stage * BKV * PITCH;
    const uint16_t *k_from = k_base + (int64_t)(kv0 + load_row) * p.k_s + load_col;
    const uint16_t *v_from = v_base + (int64_t)(kv0 + load_row) * p.v_s + load_col;
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

  const int shift = seq_kv - seq_q;
  const int warp_row0 = (int)q0 + warp * ROWS_PER_WARP;
  const int warp_row_end = warp_row0 + ROWS_PER_WARP < seq_q ? warp_row0 + ROWS_PER_WARP : seq_q;
  const int pos_first = warp_row0 + shift, pos_last = warp_row_end - 1 + shift;
  const int window_left = p.window_left < 0 ? -1 : (int)p.window_left;
  const int window_right = p.window_right < 0 ? -1 : (int)p.window_right;
  /* Scores stay unscaled and the scale rides in the exp2 FMA (s * c - m * c)
   * when it is positive; otherwise they are scaled first so the max is
   * still taken over what the softmax sees. */
  const bool scale_in_exp = p.scale_log2 > 0.0f;
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
     * one all of them see in full needs no mask. */
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

#pragma unroll
      for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT_S; nt++)
#pragma unroll
          for (int e = 0; e < 4; e++)
            s[mt][nt][e] = attn_poison_infinite(s[mt][nt][e]);
      if (!scale_in_exp) {
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
      T *o_row = (T *)p.o + batch * p.o_b + head * p.o_h + row * p.o_s;
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
        ((float *)p.lse)[batch * p.lse_b + head * p.lse_h + row * p.lse_s] = lse;
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
  const int dim = (int)p.head_dim, kt = p.kv_tile, pitch = dim + 1;
  float *q_rows = smem_f32;
  float *o_rows = q_rows + ROWS * dim;
  float *k_tile = o_rows + ROWS * dim;
  float *v_tile = k_tile + kt * pitch;
  float *probs = v_tile + kt * pitch;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t row = (int64_t)blockIdx.x * ROWS + warp, head = blockIdx.y, batch = blockIdx.z;
  const int64_t kv_head = head / p.group;
  const bool row_valid = row < p.seq_q;
  int64_t lo = p.seq_kv, hi = 0;
  if (row_valid)
    key_range(p, row, row, &lo, &hi);
  if (lane == 0) {
    ranges[warp][0] = lo;
    ranges[warp][1] = hi;
  }
  const T *q = (const T *)p.q + batch * p.q_b + head * p.q_h + row * p.q_s;
  for (int d = lane; d < dim; d += 32) {
    q_rows[warp * dim + d] = row_valid ? tsr_elem<T>::to_float(q[d * p.q_d]) : 0.0f;
    o_rows[warp * dim + d] = 0.0f;
  }
  __syncthreads();
  int64_t block_lo = p.seq_kv, block_hi = 0;
  for (int w = 0; w < ROWS; w++) {
    if (ranges[w][0] < ranges[w][1]) {
      block_lo = ranges[w][0] < block_lo ? ranges[w][0] : block_lo;
      block_hi = ranges[w][1] > block_hi ? ranges[w][1] : block_hi;
    }
  }
  const T *k = (const T *)p.k + batch * p.k_b + kv_head * p.k_h;
  const T *v = (const T *)p.v + batch * p.v_b + kv_head * p.v_h;
  float running_max = -INFINITY, running_sum = 0.0f;

  for (int64_t kv0 = block_lo; kv0 < block_hi; kv0 += kt) {
    __syncthreads();
    for (int i = tid; i < kt * dim; i += blockDim.x) {
      int j = i / dim, d = i % dim;
      int64_t key = kv0 + j;
      bool inside = key < block_hi;
      k_tile[j * pitch + d] = inside ? tsr_elem<T>::to_float(k[key * p.k_s + d * p.k_d]) : 0.0f;
      v_tile[j * pitch + d] = inside ? tsr_elem<T>::to_float(v[key * p.v_s + d * p.v_d]) : 0.0f;
    }
    __syncthreads();
    float score = -INFINITY;
    int64_t key = kv0 + lane;
    if (lane < kt && key >= lo && key < hi) {
      float dot = 0.0f;
      const float *kr = k_tile + lane * pitch, *qr = q_rows + warp * dim;
      for (int d = 0; d < dim; d++)
        dot = fmaf(qr[d], kr[d], dot);
      score = attn_poison_infinite(dot * p.scale_log2);
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
  T *o = (T *)p.o + batch * p.o_b + head * p.o_h + row * p.o_s;
  for (int d = lane; d < dim; d += 32)
    o[d * p.o_d] = tsr_elem<T>::from_float(o_rows[warp * dim + d] * inverse);
  if (p.has_lse && lane == 0)
    ((float *)p.lse)[batch * p.lse_b + head * p.lse_h + row * p.lse_s] =
        running_sum == 0.0f ? -INFINITY : (running_max + log2f(running_sum)) * kLn2;
}

} /* namespace */

#if !defined(__HIPCC__)
#define TSR_DEFINE_FLASH_DTYPE(dt, T, DP, BQ, BKV, WARPS, STAGES, QREGS)                           \
  TSR_KERNEL void __launch_bounds__((WARPS)*32)                                                    \
      tsr_attention_flash_##dt##_d##DP##_##BQ##x##BKV##_w##WARPS(                                  \
          TSR_PARAMS(tsr_gpu_attention_params) p) {                                                \
    flash_body<T, DP, BQ, BKV, WARPS, STAGES, QREGS != 0>(p);                                      \
  }
#define TSR_DEFINE_FLASH(DP, BQ, BKV, WARPS, STAGES, QREGS)                                        \
  TSR_DEFINE_FLASH_DTYPE(bf16, tsr_bf16, DP, BQ, BKV, WARPS, STAGES, QREGS)                        \
  TSR_DEFINE_FLASH_DTYPE(f16, tsr_f16, DP, BQ, BKV, WARPS, STAGES, QREGS)
TSR_FLASH_CONFIGS(TSR_DEFINE_FLASH)
#endif

#define TSR_DEFINE_ATTN_GENERIC(dt, T)                                                             \
  TSR_KERNEL void __launch_bounds__(128)                                                           \
      tsr_attention_generic_##dt(TSR_PARAMS(tsr_gpu_attention_params) p) {                         \
    attention_generic_body<T>(p);                                                                  \
  }
TSR_DTYPES_ALL(TSR_DEFINE_ATTN_GENERIC)
