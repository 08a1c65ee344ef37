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
 * - tsr_attention_wgmma_<dt>_d<DP>_<BQ>x<BKV>_o<OVERLAP>: the same on sm_90a
 *   with warpgroup products (wgmma), 64 rows a warpgroup; slower than the
 *   mma.sync kernel so far (docs/PERFORMANCE.md says why).
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
  /* Last query tile first: under a causal mask it has the most keys, so the
   * longest blocks start in the first wave and the short ones fill the tail. */
  const int64_t q0 = (int64_t)(gridDim.x - 1 - blockIdx.x) * BQ, head = blockIdx.y,
                batch = blockIdx.z;
  const int64_t kv_head = head / p.group;
  const int seq_q = (int)p.seq_q, seq_kv = (int)p.seq_kv, dim = (int)p.head_dim;
  const uint16_t *q_base = (const uint16_t *)p.q + batch * p.q_b + head * p.q_h;
  const uint16_t *k_base = (const uint16_t *)p.k + batch * p.k_b + kv_head * p.k_h;
  const uint16_t *v_base = (const uint16_t *)p.v + batch * p.v_b + kv_head * p.v_h;

  int64_t q_last = (q0 + BQ < p.seq_q ? q0 + BQ : p.seq_q) - 1;
  int64_t kv_lo, kv_hi;
  key_range(p, q0, q_last, &kv_lo, &kv_hi);
  const int first_tile = (int)(kv_lo / BKV);
  const int tile_count =
      kv_hi > kv_lo ? (int)((kv_hi - (int64_t)first_tile * BKV + BKV - 1) / BKV) : 0;

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
  __trap();
#endif
}

/* ---- sm_90a: wgmma flash kernel ---------------------------------------- */

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TSR_ATTN_HAS_WGMMA 1
#else
#define TSR_ATTN_HAS_WGMMA 0
#endif

#if TSR_ATTN_HAS_WGMMA

/* Shared-memory matrix descriptor, no swizzle: 8 x 16-byte core matrices,
 * `leading` bytes apart along K and `stride` bytes apart along M/N. */
TSR_DEVICE uint64_t attn_wgmma_desc(const void *tile, uint32_t leading, uint32_t stride) {
  return (uint64_t)((tsr_smem_address(tile) & 0x3FFFF) >> 4) | ((uint64_t)(leading >> 4) << 16) |
         ((uint64_t)(stride >> 4) << 32);
}
/* Pins accumulator registers in place around the asynchronous products, so
 * the compiler neither reads them before the wait nor moves writes past the
 * issue. */
template <int N> TSR_DEVICE void attn_pin_registers(float *r) {
#pragma unroll
  for (int i = 0; i < N; i++)
    asm volatile("" : "+f"(r[i])::"memory");
}

/* D (64 x 64, f32) = A B (+ D when accumulate): A and B from shared memory. */
template <typename T, int TRANS_B>
TSR_DEVICE void attn_wgmma_ss_n64(float *d, uint64_t desc_a, uint64_t desc_b, int accumulate) {
#define TSR_ATTN_WGMMA_SS_N64(type)                                                                \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                        \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." type "." type " "                     \
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, " \
               "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, " \
               "p, 1, 1, 0, %35;\n}\n"                                                             \
               : TSR_WGMMA_ACC32(d)                                                                \
               : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(TRANS_B))
  if constexpr (std::is_same<T, tsr_bf16>::value)
    TSR_ATTN_WGMMA_SS_N64("bf16");
  else
    TSR_ATTN_WGMMA_SS_N64("f16");
#undef TSR_ATTN_WGMMA_SS_N64
}

/* D (64 x 64, f32) += A B: A (64 x 16) from registers, B from shared memory. */
template <typename T, int TRANS_B>
TSR_DEVICE void attn_wgmma_rs_n64(float *d, const uint32_t *a, uint64_t desc_b) {
#define TSR_ATTN_WGMMA_RS_N64(type)                                                                \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %38, 0;\n"                                        \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." type "." type " "                     \
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, " \
               "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, "     \
               "%33, %34, %35}, %36, p, 1, 1, %37;\n}\n"                                           \
               : TSR_WGMMA_ACC32(d)                                                                \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "n"(TRANS_B), "r"(1))
  if constexpr (std::is_same<T, tsr_bf16>::value)
    TSR_ATTN_WGMMA_RS_N64("bf16");
  else
    TSR_ATTN_WGMMA_RS_N64("f16");
#undef TSR_ATTN_WGMMA_RS_N64
}

/* D (64 x 128, f32) = A B (+ D when accumulate): A and B from shared memory. */
template <typename T, int TRANS_B>
TSR_DEVICE void attn_wgmma_ss_n128(float *d, uint64_t desc_a, uint64_t desc_b, int accumulate) {
#define TSR_ATTN_WGMMA_SS_N128(type)                                                               \
  asm volatile(                                                                                    \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                                 \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." type "." type " "                             \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "     \
      "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, " \
      "%37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, " \
      "%55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, %67;\n}\n"              \
      : TSR_WGMMA_ACC64(d)                                                                         \
      : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(TRANS_B))
  if constexpr (std::is_same<T, tsr_bf16>::value)
    TSR_ATTN_WGMMA_SS_N128("bf16");
  else
    TSR_ATTN_WGMMA_SS_N128("f16");
#undef TSR_ATTN_WGMMA_SS_N128
}

/* D (64 x 128, f32) += A B: A (64 x 16) from registers, B from shared memory. */
template <typename T, int TRANS_B>
TSR_DEVICE void attn_wgmma_rs_n128(float *d, const uint32_t *a, uint64_t desc_b) {
#define TSR_ATTN_WGMMA_RS_N128(type)                                                               \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %70, 0;\n"                                        \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." type "." type " "                    \
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, " \
               "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, "  \
               "%34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, "  \
               "%50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, "     \
               "%65, %66, %67}, %68, p, 1, 1, %69;\n}\n"                                           \
               : TSR_WGMMA_ACC64(d)                                                                \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "n"(TRANS_B), "r"(1))
  if constexpr (std::is_same<T, tsr_bf16>::value)
    TSR_ATTN_WGMMA_RS_N128("bf16");
  else
    TSR_ATTN_WGMMA_RS_N128("f16");
#undef TSR_ATTN_WGMMA_RS_N128
}

template <typename T, int N, int TRANS_B>
TSR_DEVICE void attn_wgmma_ss(float *d, uint64_t desc_a, uint64_t desc_b, int accumulate) {
  static_assert(N == 64 || N == 128, "attn_wgmma_ss covers n64 and n128");
  if constexpr (N == 64)
    attn_wgmma_ss_n64<T, TRANS_B>(d, desc_a, desc_b, accumulate);
  else
    attn_wgmma_ss_n128<T, TRANS_B>(d, desc_a, desc_b, accumulate);
}
template <typename T, int N, int TRANS_B>
TSR_DEVICE void attn_wgmma_rs(float *d, const uint32_t *a, uint64_t desc_b) {
  static_assert(N == 64 || N == 128, "attn_wgmma_rs covers n64 and n128");
  if constexpr (N == 64)
    attn_wgmma_rs_n64<T, TRANS_B>(d, a, desc_b);
  else
    attn_wgmma_rs_n128<T, TRANS_B>(d, a, desc_b);
}

#endif /* TSR_ATTN_HAS_WGMMA */

/* The sm_90a kernel: WGS warpgroups, each owning 64 consecutive query rows
 * (BQ = 64 WGS). S = Q K^T is one wgmma chain per tile (Q and K from shared
 * memory), O += P V another (P from registers, V read N-major). Tiles sit in
 * shared memory as 8-row x 16-byte core matrices, core (row block i, column
 * block j) at i * DP * 16 + j * 128 bytes: cp.async fills them with
 * consecutive threads on consecutive 16-byte cells, free of bank conflicts.
 * Loading, masks and the online softmax are the mma.sync kernel's, per
 * warpgroup instead of per warp. */
template <typename T, int DP, int BKV, int WGS, bool OVERLAP>
TSR_DEVICE void flash_wgmma_body(const attention_params &p) {
#if TSR_ATTN_HAS_WGMMA
  constexpr int BQ = 64 * WGS, THREADS = 128 * WGS, CHUNKS = DP / 8;
  constexpr int STAGES = OVERLAP ? 3 : 2;
  constexpr int NT_S = BKV / 8, NT_O = DP / 8, DK = DP / 16;
  constexpr int ROW_BLOCK_BYTES = DP * 16; /* 8 rows */
  constexpr int LOAD_ROW_STEP = THREADS / CHUNKS;
  static_assert(THREADS % (8 * CHUNKS) == 0, "every thread copies one fixed column");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  uint16_t *q_tile = (uint16_t *)smem_raw;
  uint16_t *k_tiles = q_tile + BQ * DP;
  uint16_t *v_tiles = k_tiles + STAGES * BKV * DP;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, q4 = lane & 3;
  const int group = warp >> 2, warp_in_group = warp & 3;
  const int64_t q0 = (int64_t)(gridDim.x - 1 - blockIdx.x) * BQ, head = blockIdx.y,
                batch = blockIdx.z;
  const int64_t kv_head = head / p.group;
  const int seq_q = (int)p.seq_q, seq_kv = (int)p.seq_kv, dim = (int)p.head_dim;
  const uint16_t *q_base = (const uint16_t *)p.q + batch * p.q_b + head * p.q_h;
  const uint16_t *k_base = (const uint16_t *)p.k + batch * p.k_b + kv_head * p.k_h;
  const uint16_t *v_base = (const uint16_t *)p.v + batch * p.v_b + kv_head * p.v_h;

  int64_t q_last = (q0 + BQ < p.seq_q ? q0 + BQ : p.seq_q) - 1;
  int64_t kv_lo, kv_hi;
  key_range(p, q0, q_last, &kv_lo, &kv_hi);
  const int first_tile = (int)(kv_lo / BKV);
  const int tile_count =
      kv_hi > kv_lo ? (int)((kv_hi - (int64_t)first_tile * BKV + BKV - 1) / BKV) : 0;

  /* Thread t copies row (t / 8CHUNKS) 8 + t % 8 (plus row steps) at column
   * block (t / 8) % CHUNKS into cell t (plus THREADS per row step). */
  const int load_col = ((tid >> 3) % CHUNKS) * 8, load_row = (tid / (8 * CHUNKS)) * 8 + (tid & 7);
  const int col_bytes = load_col < dim ? (dim - load_col >= 8 ? 16 : (dim - load_col) * 2) : 0;
  {
    const uint16_t *from = q_base + (q0 + load_row) * p.q_s + load_col;
    const int64_t step = (int64_t)LOAD_ROW_STEP * p.q_s;
#pragma unroll
    for (int r = 0, cell = tid; load_row + r < BQ;
         r += LOAD_ROW_STEP, cell += THREADS, from += step) {
      bool inside = q0 + load_row + r < p.seq_q && col_bytes > 0;
      tsr_cp_async16(q_tile + cell * 8, inside ? from : q_base, inside ? col_bytes : 0);
    }
  }
  const int64_t k_step = (int64_t)LOAD_ROW_STEP * p.k_s, v_step = (int64_t)LOAD_ROW_STEP * p.v_s;
  auto load_kv = [&](int stage, int tile) {
    const int kv0 = tile * BKV;
    uint16_t *ks = k_tiles + stage * BKV * DP, *vs = v_tiles + stage * BKV * DP;
    const uint16_t *k_from = k_base + (int64_t)(kv0 + load_row) * p.k_s + load_col;
    const uint16_t *v_from = v_base + (int64_t)(kv0 + load_row) * p.v_s + load_col;
#pragma unroll
    for (int r = 0, cell = tid; load_row + r < BKV;
         r += LOAD_ROW_STEP, cell += THREADS, k_from += k_step, v_from += v_step) {
      bool inside = kv0 + load_row + r < seq_kv && col_bytes > 0;
      int bytes = inside ? col_bytes : 0;
      tsr_cp_async16(ks + cell * 8, inside ? k_from : k_base, bytes);
      tsr_cp_async16(vs + cell * 8, inside ? v_from : v_base, bytes);
    }
  };
  if (tile_count > 0)
    load_kv(0, first_tile);
  tsr_cp_async_commit();

  float o[NT_O * 4], s[NT_S * 4];
#pragma unroll
  for (int i = 0; i < NT_O * 4; i++)
    o[i] = 0.0f;
#pragma unroll
  for (int i = 0; i < NT_S * 4; i++)
    s[i] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};

  const int shift = seq_kv - seq_q;
  const int group_row0 = (int)q0 + group * 64, warp_row0 = group_row0 + warp_in_group * 16;
  const int group_row_end = group_row0 + 64 < seq_q ? group_row0 + 64 : seq_q;
  const int pos_first = group_row0 + shift, pos_last = group_row_end - 1 + shift;
  const int window_left = p.window_left < 0 ? -1 : (int)p.window_left;
  const int window_right = p.window_right < 0 ? -1 : (int)p.window_right;
  const bool scale_in_exp = p.scale_log2 > 0.0f;
  const float exp_scale = scale_in_exp ? p.scale_log2 : 1.0f;
  const uint64_t q_desc =
      attn_wgmma_desc(q_tile + group * 8 * (ROW_BLOCK_BYTES / 2), 128, ROW_BLOCK_BYTES);

  /* OVERLAP: the product O += P V of one tile runs on the tensor cores
   * while the softmax of the next tile runs on the other units (its V stays
   * one stage longer, hence three stages); O is rescaled once it lands. */
  uint32_t pa[BKV / 16][4];
  bool pending = false;
  const uint16_t *pending_v = v_tiles;
  auto issue_pv = [&](const uint16_t *vs) {
    /* V as B, N-major (transposed): key blocks are the K stride, column
     * blocks N. */
    const uint64_t v_desc = attn_wgmma_desc(vs, ROW_BLOCK_BYTES, 128);
    tsr_wgmma_fence();
    attn_pin_registers<NT_O * 4>(o);
#pragma unroll
    for (int kk = 0; kk < BKV / 16; kk++)
      attn_wgmma_rs<T, DP, 1>(o, pa[kk], v_desc + kk * ((2 * ROW_BLOCK_BYTES) >> 4));
    tsr_wgmma_commit();
  };

  for (int it = 0; it < tile_count; it++) {
    tsr_cp_async_wait<0>();
    tsr_fence_proxy_async();
    __syncthreads();
    const int stage = it % STAGES;
    if (it + 1 < tile_count)
      load_kv((it + 1) % STAGES, first_tile + it + 1);
    tsr_cp_async_commit();
    const uint16_t *ks = k_tiles + stage * BKV * DP, *vs = v_tiles + stage * BKV * DP;
    const int kv0 = (first_tile + it) * BKV;

    /* Warpgroup-uniform, since wgmma runs on all four warps together. */
    const bool active = !(group_row0 >= seq_q || kv0 >= seq_kv ||
                          (window_right >= 0 && kv0 > pos_last + window_right) ||
                          (window_left >= 0 && kv0 + BKV - 1 < pos_first - window_left));
    const bool full = kv0 + BKV <= seq_kv &&
                      (window_right < 0 || kv0 + BKV - 1 <= pos_first + window_right) &&
                      (window_left < 0 || kv0 >= pos_last - window_left);
    if (!OVERLAP && !active)
      continue;

    if (active) {
      /* K as B, K-major: key blocks are the N stride, column blocks K. */
      const uint64_t k_desc = attn_wgmma_desc(ks, 128, ROW_BLOCK_BYTES);
      tsr_wgmma_fence();
#pragma unroll
      for (int kd = 0; kd < DK; kd++)
        attn_wgmma_ss<T, BKV, 0>(s, q_desc + kd * (256 >> 4), k_desc + kd * (256 >> 4), kd > 0);
      tsr_wgmma_commit();
    }
    if (OVERLAP && pending)
      issue_pv(pending_v);
    float rescale[2] = {1.0f, 1.0f};
    if (active) {
      if (OVERLAP && pending)
        tsr_wgmma_wait<1>();
      else
        tsr_wgmma_wait<0>();
      attn_pin_registers<NT_S * 4>(s);

#pragma unroll
      for (int i = 0; i < NT_S * 4; i++)
        s[i] = attn_poison_infinite(s[i]);
      if (!scale_in_exp) {
#pragma unroll
        for (int i = 0; i < NT_S * 4; i++)
          s[i] *= p.scale_log2;
      }
      if (!full) {
#pragma unroll
        for (int nt = 0; nt < NT_S; nt++) {
#pragma unroll
          for (int e = 0; e < 4; e++) {
            int key = kv0 + nt * 8 + 2 * q4 + (e & 1);
            int position = warp_row0 + g + (e >> 1) * 8 + shift;
            bool visible = key < seq_kv && (window_left < 0 || key >= position - window_left) &&
                           (window_right < 0 || key <= position + window_right);
            if (!visible)
              s[nt * 4 + e] = -INFINITY;
          }
        }
      }
#pragma unroll
      for (int rr = 0; rr < 2; rr++) {
        float tile_max = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < NT_S; nt++)
          tile_max = fmaxf(tile_max, fmaxf(s[nt * 4 + 2 * rr], s[nt * 4 + 2 * rr + 1]));
        tile_max = fmaxf(tile_max, TSR_SHFL_XOR(tile_max, 1));
        tile_max = fmaxf(tile_max, TSR_SHFL_XOR(tile_max, 2));
        const float new_max = fmaxf(row_max[rr], tile_max);
        const float max_scaled = new_max == -INFINITY ? 0.0f : __fmul_rn(new_max, exp_scale);
        rescale[rr] = attn_exp2(__fmul_rn(row_max[rr], exp_scale) - max_scaled);
        row_max[rr] = new_max;
        float sum = 0.0f;
#pragma unroll
        for (int nt = 0; nt < NT_S; nt++) {
#pragma unroll
          for (int e = 2 * rr; e < 2 * rr + 2; e++) {
            float prob = attn_exp2(fmaf(s[nt * 4 + e], exp_scale, -max_scaled));
            s[nt * 4 + e] = prob;
            sum += prob;
          }
        }
        row_sum[rr] = row_sum[rr] * rescale[rr] + sum;
      }
    }
    if (OVERLAP && pending) {
      tsr_wgmma_wait<0>();
      attn_pin_registers<NT_O * 4>(o);
    }
    pending = false;
    if (active) {
#pragma unroll
      for (int rr = 0; rr < 2; rr++) {
#pragma unroll
        for (int dt = 0; dt < NT_O; dt++) {
          o[dt * 4 + 2 * rr] *= rescale[rr];
          o[dt * 4 + 2 * rr + 1] *= rescale[rr];
        }
      }
#pragma unroll
      for (int kk = 0; kk < BKV / 16; kk++) {
        pa[kk][0] = attn_pack2<T>(s[(2 * kk) * 4 + 0], s[(2 * kk) * 4 + 1]);
        pa[kk][1] = attn_pack2<T>(s[(2 * kk) * 4 + 2], s[(2 * kk) * 4 + 3]);
        pa[kk][2] = attn_pack2<T>(s[(2 * kk + 1) * 4 + 0], s[(2 * kk + 1) * 4 + 1]);
        pa[kk][3] = attn_pack2<T>(s[(2 * kk + 1) * 4 + 2], s[(2 * kk + 1) * 4 + 3]);
      }
      if (OVERLAP) {
        pending = true;
        pending_v = vs;
      } else {
        issue_pv(vs);
        tsr_wgmma_wait<0>();
        attn_pin_registers<NT_O * 4>(o);
      }
    }
  }
  if (OVERLAP && pending) {
    issue_pv(pending_v);
    tsr_wgmma_wait<0>();
    attn_pin_registers<NT_O * 4>(o);
  }
  tsr_cp_async_wait<0>();

#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    float total = row_sum[rr];
    total += TSR_SHFL_XOR(total, 1);
    total += TSR_SHFL_XOR(total, 2);
    const int row = warp_row0 + rr * 8 + g;
    if (row >= seq_q)
      continue;
    /* total 0: no key seen; a NaN total stays NaN in o and lse */
    float inverse = total == 0.0f ? 0.0f : 1.0f / total;
    T *o_row = (T *)p.o + batch * p.o_b + head * p.o_h + row * p.o_s;
#pragma unroll
    for (int dt = 0; dt < NT_O; dt++) {
      int col = dt * 8 + 2 * q4;
      if (col < dim) {
        float v0 = o[dt * 4 + 2 * rr] * inverse, v1 = o[dt * 4 + 2 * rr + 1] * inverse;
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
      float lse = total == 0.0f ? -INFINITY : (row_max[rr] * exp_scale + log2f(total)) * kLn2;
      ((float *)p.lse)[batch * p.lse_b + head * p.lse_h + row * p.lse_s] = lse;
    }
  }
#else
  (void)p;
  __trap();
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
    __syncwarp();
    int used = kt < 32 ? kt : 32;
    for (int d = lane; d < dim; d += 32) {
      float acc = o_rows[warp * dim + d] * rescale;
      for (int j = 0; j < used; j++)
        acc = fmaf(probs[warp * 32 + j], v_tile[j * pitch + d], acc);
      o_rows[warp * dim + d] = acc;
    }
    __syncwarp();
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
#define TSR_DEFINE_FLASH_WGMMA_DTYPE(dt, T, DP, BQ, BKV, OV)                                       \
  TSR_KERNEL void __launch_bounds__((BQ)*2, 1)                                                     \
      tsr_attention_wgmma_##dt##_d##DP##_##BQ##x##BKV##_o##OV(TSR_PARAMS(tsr_gpu_attention_params) \
                                                                  p) {                             \
    flash_wgmma_body<T, DP, BKV, (BQ) / 64, (OV) != 0>(p);                                         \
  }
#define TSR_DEFINE_FLASH_WGMMA(DP, BQ, BKV, OV)                                                    \
  TSR_DEFINE_FLASH_WGMMA_DTYPE(bf16, tsr_bf16, DP, BQ, BKV, OV)                                    \
  TSR_DEFINE_FLASH_WGMMA_DTYPE(f16, tsr_f16, DP, BQ, BKV, OV)
TSR_FLASH_WGMMA_CONFIGS(TSR_DEFINE_FLASH_WGMMA)
#endif

#define TSR_DEFINE_ATTN_GENERIC(dt, T)                                                             \
  TSR_KERNEL void __launch_bounds__(128)                                                           \
      tsr_attention_generic_##dt(TSR_PARAMS(tsr_gpu_attention_params) p) {                         \
    attention_generic_body<T>(p);                                                                  \
  }
TSR_DTYPES_ALL(TSR_DEFINE_ATTN_GENERIC)
