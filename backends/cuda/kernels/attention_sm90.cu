/* SPDX-License-Identifier: Apache-2.0 */
/* Flash attention on sm_90a with warpgroup products (wgmma):
 * tsr_attention_wgmma_<dt>_d<DP>_<BQ>x<BKV>_o<OVERLAP>, 64 query rows a
 * warpgroup; slower than the mma.sync kernel so far (docs/PERFORMANCE.md
 * says why). NVIDIA-only: included by module.cu after the portable
 * attention.cu (backends/gpu/kernels), whose loaders, masks and softmax
 * helpers (key_range, attn_exp2, attn_pack2, attn_poison_infinite) it
 * shares; it compiles to a trap on every target but sm_90a. */
#include "gpu_portability.h"
#include "kernel_list.h"
#include "kernel_params.h"
#include "sm90.h"

namespace {

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
  const flash_block block = flash_block_of<BQ, BKV>(p);
  const int64_t q0 = block.q0, head = block.head, batch = block.batch;
  const int seq_q = (int)p.seq_q, seq_kv = (int)p.seq_kv, dim = (int)p.head_dim;
  const uint16_t *q_base = block.q, *k_base = block.k, *v_base = block.v;
  const int first_tile = block.first_tile, tile_count = block.tile_count;

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

} /* namespace */

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
