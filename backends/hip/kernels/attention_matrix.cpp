/* SPDX-License-Identifier: Apache-2.0 */
/* Flash attention forward on AMD matrix cores (MFMA on CDNA2/3, WMMA on
 * RDNA3/4), over the engines of matrix_core.h. Included after portable.cu
 * and gemm_matrix.cpp in the HIP module (module.cpp), so attention.cu's
 * helpers (key_range, attn_poison_infinite) and gemm_matrix.cpp's
 * (mx_slice, mx_fragment, mx_wave_sync) are in this translation unit. Same
 * contract as attention.cu's flash kernels (tsr_gpu_attention_params, masks,
 * empty rows -> o 0 and lse -inf, NaN from infinite scores).
 *
 * - A block owns BQ query rows of one (batch, head); each wave owns N of
 *   them (the instruction's N). Keys stream in tiles of BKV through LDS: K
 *   as [key][d], V transposed as [d][key].
 * - Everything is computed transposed: S^T = K Q^T (A = K from LDS, B = Q^T
 *   in registers, or re-read from LDS where Q_LDS) and O^T = V^T P^T (A =
 *   V^T from LDS, B = P^T). On every instruction a lane's accumulator
 *   elements share one column, so a lane holds one query row: its running
 *   max, sum and rescale are lane-local, reduced only across the few lanes
 *   of the same column. And the S^T accumulator already is the B operand
 *   P^T (same lane, same keys) for MFMA and gfx12 WMMA; gfx11 WMMA, whose B
 *   holds all 16 keys in each lane half, swaps halves with one shuffle.
 * - No asynchronous global -> LDS copy on these targets: the V tile loads
 *   into registers while S^T multiplies, the next K tile while O^T does;
 *   each is then stored to its one LDS buffer, two barriers a tile.
 * - Masks only on tiles the wave does not see in full; tiles none of the
 *   wave's rows sees are skipped by that wave, tiles none of the block's
 *   rows sees are never loaded. Head dims beyond head_dim are zero-filled
 *   and their instructions skipped. */
#include "hip_attention_list.h"
#include "matrix_core.h"

#if TSR_HIP_HAS_MFMA || TSR_HIP_HAS_WMMA11 || TSR_HIP_HAS_WMMA12
namespace {

TSR_DEVICE float fx_exp2(float x) {
#if defined(__HIPCC__)
  return exp2f(x);
#else
  return attn_exp2(x); /* emulation on NVIDIA: attention.cu's MUFU exp2 */
#endif
}

/* The value of lane (lane ^ mask) of the wave. Emulated, a wave64 is two
 * warps, so across them the value goes through the wave's scratch (free
 * between instructions: each emulated instruction ends with a wave sync). */
template <int WAVE> TSR_DEVICE uint32_t fx_xor(uint32_t v, int mask, const tsr_mx_wave &w) {
#if TSR_HIP_MX_EMULATED
  if (mask < 32)
    return __shfl_xor_sync(0xffffffffu, v, mask);
  uint32_t *x = (uint32_t *)w.scratch;
  x[w.lane] = v;
  mx_wave_sync<WAVE>(w.wave);
  v = x[w.lane ^ mask];
  mx_wave_sync<WAVE>(w.wave);
  return v;
#else
  (void)w;
  return (uint32_t)__shfl_xor((int)v, mask, WAVE);
#endif
}

/* Max / sum over the lanes holding the same query (same lane % N). */
template <class E> TSR_DEVICE float fx_query_max(float v, const tsr_mx_wave &w) {
#pragma unroll
  for (int mask = E::N; mask < E::WAVE; mask *= 2)
    v = fmaxf(v, __uint_as_float(fx_xor<E::WAVE>(__float_as_uint(v), mask, w)));
  return v;
}
template <class E> TSR_DEVICE float fx_query_sum(float v, const tsr_mx_wave &w) {
#pragma unroll
  for (int mask = E::N; mask < E::WAVE; mask *= 2)
    v += __uint_as_float(fx_xor<E::WAVE>(__float_as_uint(v), mask, w));
  return v;
}

/* 8 elements from global memory at `from`: 16 bytes where all are inside,
 * else one by one (left: elements before the row's end), zero outside.
 * Words are assembled directly: a local array here costs scratch. */
TSR_DEVICE uint4 fx_load8(const uint16_t *from, bool inside, int left) {
  if (inside && left >= 8)
    return *(const uint4 *)from;
  uint32_t w[4];
#pragma unroll
  for (int q = 0; q < 4; q++) {
    const uint32_t lo = inside && 2 * q < left ? from[2 * q] : 0u;
    const uint32_t hi = inside && 2 * q + 1 < left ? from[2 * q + 1] : 0u;
    w[q] = lo | hi << 16;
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

/* Element j of 8 16-bit elements held in a uint4. */
TSR_DEVICE uint32_t fx_half(const uint4 &x, int j) {
  const uint32_t word = j < 2 ? x.x : j < 4 ? x.y : j < 6 ? x.z : x.w;
  return j & 1 ? word >> 16 : word & 0xffffu;
}

/* A V tile on its way to LDS, transposed to [DP][BKV + PAD] so that V^T's
 * A fragments (a d row, a run of keys) read as vectors. A thread takes two
 * keys of one 8-wide d chunk and stores (key, key + 1) pairs as words:
 * consecutive threads write consecutive words. */
template <int BKV, int DP, int THREADS> struct fx_vt_tile {
  static constexpr int PAIRS = BKV / 2, TOTAL = PAIRS * (DP / 8);
  static constexpr int PER = (TOTAL + THREADS - 1) / THREADS;
  uint4 v[PER][2];

  __device__ __forceinline__ void fetch(const uint16_t *base, int64_t stride, int kv0, int seq_kv,
                                        int dim, int tid) {
#pragma unroll
    for (int it = 0; it < PER; it++) {
      const int i = tid + it * THREADS;
      if (TOTAL % THREADS != 0 && i >= TOTAL)
        break;
      const int key = kv0 + 2 * (i % PAIRS), col = i / PAIRS * 8;
#pragma unroll
      for (int h = 0; h < 2; h++)
        v[it][h] = fx_load8(base + (int64_t)(key + h) * stride + col, key + h < seq_kv, dim - col);
    }
  }

  __device__ __forceinline__ void store(uint16_t *vt, int tid) const {
    constexpr int PITCH = BKV + TSR_HIP_FLASH_PAD;
#pragma unroll
    for (int it = 0; it < PER; it++) {
      const int i = tid + it * THREADS;
      if (TOTAL % THREADS != 0 && i >= TOTAL)
        break;
      const int pair = i % PAIRS, col = i / PAIRS * 8;
#pragma unroll
      for (int j = 0; j < 8; j++)
        *(uint32_t *)(vt + (col + j) * PITCH + 2 * pair) =
            fx_half(v[it][0], j) | fx_half(v[it][1], j) << 16;
    }
  }
};

/* A lane's B fragment of Q^T (its query row, d from d0) straight from
 * global memory: the B layout's k runs are contiguous in a q row. */
template <class E>
TSR_DEVICE void fx_q_fragment(uint32_t *w, const uint16_t *row, bool valid, int d0, int dim,
                              int lane) {
  constexpr int U = E::RUN < 8 ? E::RUN : 8; /* runs of 4, 8 or 16: 8- or 16-byte loads */
  static_assert(U == 4 || U == 8, "k runs of 4 or 8 elements");
#pragma unroll
  for (int q = 0; q < E::AB / U; q++) {
    const int r = q * U, k = d0 + tsr_mx_b_k<E::ID>(lane, r);
    if (valid && k + U <= dim) {
      if constexpr (U == 8) {
        const uint4 x = *(const uint4 *)(row + k);
        w[r / 2] = x.x;
        w[r / 2 + 1] = x.y;
        w[r / 2 + 2] = x.z;
        w[r / 2 + 3] = x.w;
      } else {
        const uint2 x = *(const uint2 *)(row + k);
        w[r / 2] = x.x;
        w[r / 2 + 1] = x.y;
      }
    } else {
#pragma unroll
      for (int j = 0; j < U; j += 2) {
        const uint32_t lo = valid && k + j < dim ? row[k + j] : 0u;
        const uint32_t hi = valid && k + j + 1 < dim ? row[k + j + 1] : 0u;
        w[(r + j) / 2] = lo | hi << 16;
      }
    }
  }
}

/* B fragment j (keys j K .. j K + K - 1 of the tile) of P^T from the S^T
 * accumulator s holding probabilities. MFMA and gfx12 WMMA: element r of
 * fragment j is accumulator element j AB + r (the C layout's rows of a lane
 * are the B layout's k). gfx11 WMMA: a lane holds keys 2 r + half, while B
 * wants all 16 keys in both halves: the halves swap their packed pairs. */
template <class E, typename T>
TSR_DEVICE void fx_p_fragment(uint32_t *b, const typename E::acc &s, int j, const tsr_mx_wave &w) {
  if constexpr (E::ID == TSR_MX_WMMA11) {
    (void)j;
    const bool upper = w.lane >= 16;
#pragma unroll
    for (int m = 0; m < 4; m++) {
      const uint32_t own = tsr_pack2<T>(s[2 * m], s[2 * m + 1]); /* keys 4m + h, 4m + 2 + h */
      const uint32_t other = fx_xor<32>(own, 16, w);
      const uint32_t even = upper ? other : own, odd = upper ? own : other;
      b[2 * m] = (even & 0xffffu) | odd << 16;         /* keys 4m, 4m + 1 */
      b[2 * m + 1] = even >> 16 | (odd & 0xffff0000u); /* keys 4m + 2, 4m + 3 */
    }
  } else {
    (void)w;
#pragma unroll
    for (int q = 0; q < E::AB / 2; q++)
      b[q] = tsr_pack2<T>(s[j * E::AB + 2 * q], s[j * E::AB + 2 * q + 1]);
  }
}

/* E: a tsr_mx_engine of T (tsr_bf16, tsr_f16); Q_LDS: Q re-read from LDS
 * instead of held in registers. */
template <class E, typename T, int DP, int BQ, int BKV, int WAVES, bool Q_LDS>
TSR_DEVICE void flash_matrix_body(const attention_params &p) {
  constexpr int WAVE = E::WAVE, THREADS = WAVES * WAVE, PAD = TSR_HIP_FLASH_PAD;
  constexpr int KT = BKV / E::M; /* S^T instruction tiles (keys) */
  constexpr int KB = BKV / E::K; /* P^T fragments (key blocks of O^T) */
  constexpr int DK = DP / E::K;  /* d blocks of S^T */
  constexpr int DT = DP / E::M;  /* O^T instruction tiles (d) */
  static_assert(BQ == WAVES * E::N, "each wave owns N query rows");
  static_assert(BKV % E::M == 0 && DP % E::M == 0 && E::M % E::K == 0, "whole instructions");
  static_assert(BKV % 16 == 0 && DP % 8 == 0, "16-byte aligned LDS rows and chunks");
  static_assert(!TSR_HIP_MX_EMULATED || WAVE != 64 || WAVES <= 15, "named barriers 1..15");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  uint16_t *k_tile = (uint16_t *)smem_raw;       /* [BKV][DP + PAD] */
  uint16_t *vt_tile = k_tile + BKV * (DP + PAD); /* [DP][BKV + PAD] */
  uint16_t *q_tile = vt_tile + DP * (BKV + PAD); /* [BQ][DP + PAD], Q_LDS only */

  const int tid = threadIdx.x, lane = tid % WAVE, wave = tid / WAVE;
  tsr_mx_wave ctx = {lane, wave, nullptr};
#if TSR_HIP_MX_EMULATED
  __shared__ float scratch[WAVES][TSR_MX_SCRATCH_FLOATS];
  ctx.scratch = scratch[wave];
#endif
  const flash_block block = flash_block_of<BQ, BKV>(p);
  const int64_t q0 = block.q0, head = block.head, batch = block.batch;
  const int seq_q = (int)p.seq_q, seq_kv = (int)p.seq_kv, dim = (int)p.head_dim;
  const uint16_t *q_base = block.q, *k_base = block.k, *v_base = block.v;
  const int first_tile = block.first_tile, tile_count = block.tile_count;

  const int shift = seq_kv - seq_q;
  const int wave_row0 = (int)q0 + wave * E::N;
  const int wave_row_end = wave_row0 + E::N < seq_q ? wave_row0 + E::N : seq_q;
  const int pos_first = wave_row0 + shift, pos_last = wave_row_end - 1 + shift;
  const int window_left = p.window_left < 0 ? -1 : (int)p.window_left;
  const int window_right = p.window_right < 0 ? -1 : (int)p.window_right;
  /* This lane's query row (the column of all its accumulators). */
  const int row = wave_row0 + tsr_mx_c_col<E::ID>(lane, 0), position = row + shift;
  /* As in attention.cu: the scale rides in the exp2 FMA when positive. */
  const bool scale_in_exp = p.scale_log2 > 0.0f;
  const float exp_scale = scale_in_exp ? p.scale_log2 : 1.0f;

  mx_slice<uint16_t, BKV, DP, THREADS> k_next;
  fx_vt_tile<BKV, DP, THREADS> v_next;
  auto fetch_k = [&](int tile) {
    k_next.fetch(k_base, seq_kv, dim, p.k_s, 1, (int64_t)tile * BKV, 0, true, true, tid);
  };

  uint32_t q_frag[Q_LDS ? 1 : DK][E::WORDS];
  if constexpr (Q_LDS) {
    mx_slice<uint16_t, BQ, DP, THREADS> q_slice;
    q_slice.fetch(q_base, seq_q, dim, p.q_s, 1, q0, 0, true, true, tid);
    q_slice.template store<PAD>(q_tile, true, tid);
  } else {
    const uint16_t *q_row = q_base + (int64_t)row * p.q_s;
#pragma unroll
    for (int kd = 0; kd < (Q_LDS ? 0 : DK); kd++)
      fx_q_fragment<E>(q_frag[kd], q_row, row < seq_q, kd * E::K, dim, lane);
  }
  if (tile_count > 0) {
    fetch_k(first_tile);
    k_next.template store<PAD>(k_tile, true, tid);
  }
  __syncthreads();

  typename E::acc o[DT];
#pragma unroll
  for (int dt = 0; dt < DT; dt++)
    E::zero(o[dt]);
  float row_max = -INFINITY, row_sum = 0.0f; /* row_sum: this lane's keys only */

  for (int it = 0; it < tile_count; it++) {
    const int kv0 = (first_tile + it) * BKV;
    const bool more = it + 1 < tile_count;
    v_next.fetch(v_base, p.v_s, kv0, seq_kv, dim, tid); /* in flight during S^T */

    /* Wave-uniform: a tile none of the wave's rows sees is skipped, one all
     * of them see in full needs no mask. */
    const bool skip = wave_row0 >= seq_q || kv0 >= seq_kv ||
                      (window_right >= 0 && kv0 > pos_last + window_right) ||
                      (window_left >= 0 && kv0 + BKV - 1 < pos_first - window_left);
    const bool full = kv0 + BKV <= seq_kv &&
                      (window_right < 0 || kv0 + BKV - 1 <= pos_first + window_right) &&
                      (window_left < 0 || kv0 >= pos_last - window_left);
    uint32_t p_frag[KB][E::WORDS];
    if (!skip) {
      typename E::acc s[KT];
#pragma unroll
      for (int kt = 0; kt < KT; kt++)
        E::zero(s[kt]);
#pragma unroll
      for (int kd = 0; kd < DK; kd++) {
        if (kd * E::K >= dim)
          continue; /* zero-padded head dims */
        uint32_t qb[E::WORDS];
        if constexpr (Q_LDS) {
          mx_fragment<E, uint16_t, false, BQ, DP, PAD>(qb, q_tile, true, wave * E::N, kd * E::K,
                                                       lane);
        } else {
#pragma unroll
          for (int i = 0; i < E::WORDS; i++)
            qb[i] = q_frag[Q_LDS ? 0 : kd][i];
        }
#pragma unroll
        for (int kt = 0; kt < KT; kt++) {
          uint32_t a[E::WORDS];
          mx_fragment<E, uint16_t, true, BKV, DP, PAD>(a, k_tile, true, kt * E::M, kd * E::K, lane);
          E::mma(s[kt], a, qb, ctx);
        }
      }

#pragma unroll
      for (int kt = 0; kt < KT; kt++) {
#pragma unroll
        for (int r = 0; r < E::C; r++) {
          float x = attn_poison_infinite(s[kt][r]);
          if (!scale_in_exp)
            x *= p.scale_log2;
          if (!full) {
            const int key = kv0 + kt * E::M + tsr_mx_c_row<E::ID>(lane, r);
            const bool visible = key < seq_kv &&
                                 (window_left < 0 || key >= position - window_left) &&
                                 (window_right < 0 || key <= position + window_right);
            if (!visible)
              x = -INFINITY;
          }
          s[kt][r] = x;
        }
      }
      float tile_max = -INFINITY;
#pragma unroll
      for (int kt = 0; kt < KT; kt++)
#pragma unroll
        for (int r = 0; r < E::C; r++)
          tile_max = fmaxf(tile_max, s[kt][r]);
      tile_max = fx_query_max<E>(tile_max, ctx);
      const float new_max = fmaxf(row_max, tile_max);
      /* A row that has seen no key keeps max -inf: subtracting 0 instead
       * keeps exp2(-inf) = 0 and no inf - inf. An unchanged max rescales by
       * exactly 1 (HIP's __fmul_rn may contract, so no product identity). */
      const float max_scaled = new_max == -INFINITY ? 0.0f : new_max * exp_scale;
      const float rescale = new_max == row_max ? 1.0f : fx_exp2(row_max * exp_scale - max_scaled);
      row_max = new_max;
      float sum = 0.0f;
#pragma unroll
      for (int kt = 0; kt < KT; kt++) {
#pragma unroll
        for (int r = 0; r < E::C; r++) {
          const float prob = fx_exp2(fmaf(s[kt][r], exp_scale, -max_scaled));
          s[kt][r] = prob;
          sum += prob;
        }
      }
      row_sum = row_sum * rescale + sum;
#pragma unroll
      for (int dt = 0; dt < DT; dt++)
#pragma unroll
        for (int r = 0; r < E::C; r++)
          o[dt][r] *= rescale;
#pragma unroll
      for (int kt = 0; kt < KT; kt++)
#pragma unroll
        for (int j = 0; j < E::M / E::K; j++)
          fx_p_fragment<E, T>(p_frag[kt * (E::M / E::K) + j], s[kt], j, ctx);
    }

    /* V^T's buffer was last read before the barrier that ended the
     * previous tile; this tile's K reads end at the next barrier. */
    v_next.store(vt_tile, tid);
    if (more)
      fetch_k(first_tile + it + 1); /* in flight during O^T */
    __syncthreads();
    if (!skip) {
#pragma unroll
      for (int dt = 0; dt < DT; dt++) {
        if (dt * E::M >= dim)
          continue;
#pragma unroll
        for (int kb = 0; kb < KB; kb++) {
          uint32_t a[E::WORDS];
          mx_fragment<E, uint16_t, true, DP, BKV, PAD>(a, vt_tile, true, dt * E::M, kb * E::K,
                                                       lane);
          E::mma(o[dt], a, p_frag[kb], ctx);
        }
      }
    }
    if (more)
      k_next.template store<PAD>(k_tile, true, tid);
    __syncthreads();
  }

  const float total = fx_query_sum<E>(row_sum, ctx);
  if (row >= seq_q)
    return;
  /* total 0: no key seen; a NaN total stays NaN in o and lse */
  const float inverse = total == 0.0f ? 0.0f : 1.0f / total;
  T *o_row = (T *)p.o + batch * p.o_b + head * p.o_h + (int64_t)row * p.o_s;
  /* A lane's d come in runs of G consecutive elements (gfx11 WMMA: none). */
  constexpr int G = E::ID == TSR_MX_WMMA11 ? 1 : E::ID == TSR_MX_WMMA12 ? 8 : 4;
#pragma unroll
  for (int dt = 0; dt < DT; dt++) {
#pragma unroll
    for (int r = 0; r < E::C; r += G) {
      const int d = dt * E::M + tsr_mx_c_row<E::ID>(lane, r);
      T *dst = o_row + d * p.o_d;
      if (G > 1 && p.o_d == 1 && d + G <= dim && (uintptr_t)dst % (2 * G) == 0) {
        uint32_t w[G > 1 ? G / 2 : 1];
#pragma unroll
        for (int q = 0; q < G / 2; q++)
          w[q] = tsr_pack2<T>(o[dt][r + 2 * q] * inverse, o[dt][r + 2 * q + 1] * inverse);
        if constexpr (G == 8)
          *(uint4 *)dst = make_uint4(w[0], w[1], w[2], w[3]);
        else if constexpr (G == 4)
          *(uint2 *)dst = make_uint2(w[0], w[1]);
      } else {
#pragma unroll
        for (int j = 0; j < G; j++)
          if (d + j < dim)
            dst[j * p.o_d] = tsr_elem<T>::from_float(o[dt][r + j] * inverse);
      }
    }
  }
  if (p.has_lse && lane < E::N) {
    const float lse = total == 0.0f ? -INFINITY : (row_max * exp_scale + log2f(total)) * kLn2;
    ((float *)p.lse)[batch * p.lse_b + head * p.lse_h + row * p.lse_s] = lse;
  }
}

} /* namespace */
#endif

/* ------------------------------------------------------------------------ */
/* Kernels                                                                   */
/* ------------------------------------------------------------------------ */

#if TSR_HIP_HAS_MFMA
/* BQ / W rows a wave: the instruction (gemm_matrix.cpp's mx_mfma_engine). */
#define TSR_HIP_DEFINE_FLASH_MFMA(dt, T, DP, BQ, BKV, W)                                           \
  TSR_KERNEL void __launch_bounds__(TSR_HIP_FLASH_MFMA_THREADS(W))                                 \
      tsr_attention_mfma_##dt##_d##DP##_##BQ##x##BKV##_w##W(TSR_PARAMS(tsr_gpu_attention_params)   \
                                                                p) {                               \
    flash_matrix_body<typename mx_mfma_engine<T, (BQ) / (W)>::type, T, DP, BQ, BKV, W, false>(p);  \
  }
#define TSR_HIP_DEFINE_FLASH_MFMA_16(DP, BQ, BKV, W)                                               \
  TSR_HIP_DEFINE_FLASH_MFMA(bf16, tsr_bf16, DP, BQ, BKV, W)                                        \
  TSR_HIP_DEFINE_FLASH_MFMA(f16, tsr_f16, DP, BQ, BKV, W)
TSR_HIP_FLASH_MFMA_CONFIGS(TSR_HIP_DEFINE_FLASH_MFMA_16)
#endif

#define TSR_HIP_DEFINE_FLASH_WMMA(family, layout, dt, T, DP, BQ, BKV, W)                           \
  TSR_KERNEL void __launch_bounds__(TSR_HIP_FLASH_WMMA_THREADS(W))                                 \
      tsr_attention_##family##_##dt##_d##DP##_##BQ##x##BKV##_w##W(                                 \
          TSR_PARAMS(tsr_gpu_attention_params) p) {                                                \
    flash_matrix_body<tsr_mx_engine<T, layout>, T, DP, BQ, BKV, W,                                 \
                      TSR_HIP_FLASH_WMMA_Q_LDS(DP) != 0>(p);                                       \
  }

/* Both 16-bit dtypes of one config of a WMMA family. */
#define TSR_HIP_DEFINE_FLASH_WMMA_16(family, layout, DP, BQ, BKV, W)                               \
  TSR_HIP_DEFINE_FLASH_WMMA(family, layout, bf16, tsr_bf16, DP, BQ, BKV, W)                        \
  TSR_HIP_DEFINE_FLASH_WMMA(family, layout, f16, tsr_f16, DP, BQ, BKV, W)

#if TSR_HIP_HAS_WMMA11
#define TSR_HIP_DEFINE_FLASH_WMMA11_16(DP, BQ, BKV, W)                                             \
  TSR_HIP_DEFINE_FLASH_WMMA_16(wmma11, tsr_mx_wmma11, DP, BQ, BKV, W)
TSR_HIP_FLASH_WMMA11_CONFIGS(TSR_HIP_DEFINE_FLASH_WMMA11_16)
#endif

#if TSR_HIP_HAS_WMMA12
#define TSR_HIP_DEFINE_FLASH_WMMA12_16(DP, BQ, BKV, W)                                             \
  TSR_HIP_DEFINE_FLASH_WMMA_16(wmma12, tsr_mx_wmma12, DP, BQ, BKV, W)
TSR_HIP_FLASH_WMMA12_CONFIGS(TSR_HIP_DEFINE_FLASH_WMMA12_16)
#endif
