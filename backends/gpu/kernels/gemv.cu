/* SPDX-License-Identifier: Apache-2.0 */
/* GEMM for few rows of A, and the GEMM helpers beside it:
 * - tsr_gemv_k_* / tsr_gemv_n_*: M <= 16, B streamed with 16-byte loads,
 *   optionally split over K into f32 partials that tsr_gemm_splitk_reduce
 *   sums in a fixed order.
 * - tsr_gemm_stream_*: the decode GEMM (M <= 16), weights streamed straight
 *   into mma.sync fragments, K split across warps and blocks.
 * - tsr_gemm_pack_b16/b32: K-major copies of operands the TMA-fed kernels
 *   (backends/cuda/kernels/gemm_sm90.cu) cannot load as they are.
 * Included after gemm.cu, whose tile resolution, split-K gather and fused
 * epilogue it uses (one translation unit: portable.cu). */
#include "gpu_portability.h"
#include "kernel_list.h"
#include "kernel_params.h"

namespace {

/* ------------------------------------------------------------------------ */
/* GEMV / split-K for few rows of A                                          */
/* ------------------------------------------------------------------------ */

/* Where a GEMV block's sums go: straight through the epilogue when the
 * launch has one K slice, else to the f32 partials of its slice. */
static __device__ __noinline__ void gemv_emit(const gemm_params &p, const gemm_tile &t, int64_t row,
                                              int64_t col, float sum) {
  if (p.split_k == 1) {
    tsr_store_any(t.d, p.out_dtype, row * p.d_m + col * p.d_n, epilogue_value(p, t, row, col, sum));
  } else {
    int64_t slot = (int64_t)blockIdx.y * p.batch_count + blockIdx.z;
    ((float *)p.workspace)[(slot * p.m + row) * p.n + col] = sum;
  }
}

/* B with unit stride along K (weights stored [N][K]): a warp per column of D,
 * lanes striding K with 16-byte loads; R rows of A per pass. */
template <typename T, int R> TSR_DEVICE void gemv_k_body(const gemm_params &p) {
  constexpr int V = 16 / (int)sizeof(T);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t col = (int64_t)blockIdx.x * (blockDim.x >> 5) + warp;
  if (col >= p.n)
    return;
  gemm_tile t;
  batch_pointers(p, (int64_t)p.batch_offset + blockIdx.z, t);
  const T *a = (const T *)t.a, *brow = (const T *)t.b + col * p.b_n;
  const int64_t k_begin = (int64_t)blockIdx.y * p.k_per_split;
  const int64_t k_end = k_begin + p.k_per_split < p.k ? k_begin + p.k_per_split : p.k;
  const int64_t k_vec_end = p.vec_b ? k_begin + (k_end - k_begin) / V * V : k_begin;

  for (int64_t m0 = 0; m0 < t.m; m0 += R) {
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; r++)
      acc[r] = 0.0f;
    for (int64_t k = k_begin + lane * V; k < k_vec_end; k += 32 * V) {
      float bv[V];
      tsr_vec16<T>::load(brow + k, bv);
#pragma unroll
      for (int r = 0; r < R; r++) {
        if (m0 + r < t.m) {
          const T *arow = a + (m0 + r) * p.a_m;
          float av[V];
          if (p.vec_a) {
            tsr_vec16<T>::load(arow + k, av);
          } else {
#pragma unroll
            for (int e = 0; e < V; e++)
              av[e] = tsr_elem<T>::to_float(arow[(k + e) * p.a_k]);
          }
#pragma unroll
          for (int e = 0; e < V; e++)
            acc[r] = fmaf(av[e], bv[e], acc[r]);
        }
      }
    }
    for (int64_t k = k_vec_end + lane; k < k_end; k += 32) {
      float bv = tsr_elem<T>::to_float(brow[k * p.b_k]);
#pragma unroll
      for (int r = 0; r < R; r++)
        if (m0 + r < t.m)
          acc[r] = fmaf(tsr_elem<T>::to_float(a[(m0 + r) * p.a_m + k * p.a_k]), bv, acc[r]);
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
      float sum = tsr_warp_sum(acc[r]);
      if (lane == (r & 31) && m0 + r < t.m)
        gemv_emit(p, t, m0 + r, col, sum);
    }
  }
}

/* B with unit stride along N (weights stored [K][N]): a thread per 8
 * columns of D, walking its K slice; R rows of A per pass. */
template <typename T, int R> TSR_DEVICE void gemv_n_body(const gemm_params &p) {
  const int64_t col0 = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
  if (col0 >= p.n)
    return;
  gemm_tile t;
  batch_pointers(p, (int64_t)p.batch_offset + blockIdx.z, t);
  const T *a = (const T *)t.a, *b = (const T *)t.b;
  const int64_t k_begin = (int64_t)blockIdx.y * p.k_per_split;
  const int64_t k_end = k_begin + p.k_per_split < p.k ? k_begin + p.k_per_split : p.k;
  const bool full = p.vec_b && col0 + 8 <= p.n;

  for (int64_t m0 = 0; m0 < t.m; m0 += R) {
    float acc[R][8];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
      for (int j = 0; j < 8; j++)
        acc[r][j] = 0.0f;
#pragma unroll 2
    for (int64_t k = k_begin; k < k_end; k++) {
      float bv[8];
      const T *brow = b + k * p.b_k;
      if (full) {
        if (sizeof(T) == 4) {
          tsr_vec16<T>::load(brow + col0, bv);
          tsr_vec16<T>::load(brow + col0 + 4, bv + 4);
        } else {
          tsr_vec16<T>::load(brow + col0, bv);
        }
      } else {
#pragma unroll
        for (int j = 0; j < 8; j++)
          bv[j] = col0 + j < p.n ? tsr_elem<T>::to_float(brow[(col0 + j) * p.b_n]) : 0.0f;
      }
#pragma unroll
      for (int r = 0; r < R; r++) {
        float av = m0 + r < t.m ? tsr_elem<T>::to_float(a[(m0 + r) * p.a_m + k * p.a_k]) : 0.0f;
#pragma unroll
        for (int j = 0; j < 8; j++)
          acc[r][j] = fmaf(av, bv[j], acc[r][j]);
      }
    }
#pragma unroll
    for (int r = 0; r < R; r++)
      if (m0 + r < t.m)
#pragma unroll
        for (int j = 0; j < 8; j++)
          if (col0 + j < p.n)
            gemv_emit(p, t, m0 + r, col0 + j, acc[r][j]);
  }
}

/* ------------------------------------------------------------------------ */
/* Decode GEMM (M <= 16): weights streamed straight into mma fragments       */
/* ------------------------------------------------------------------------ */

/* A block computes a 16 x 32 tile of D (rows past M are zero) over its K
 * slice; its W warps take the slice's 32-deep chunks in turn, U chunks in
 * flight per warp, and each lane loads its B and A fragments with 16-byte
 * loads from global memory: no shared memory, no barrier in the loop.
 *
 * Why 16-byte loads can feed mma.sync m16n8k16 directly: the sum over k
 * does not care about the order of k, so each 32-deep chunk is renumbered.
 * Lane (g = lane / 4, t = lane % 4) owns physical k = 8t .. 8t + 7 of the
 * chunk; in product step s (0, 1) its logical k pairs {2t, 2t + 1} and
 * {2t + 8, 2t + 9} are physical 8t + 4s + {0, 1} and 8t + 4s + {2, 3}. Then
 * A's fragment of a step is two 32-bit words of one 16-byte load of row g
 * (and of row g + 8), and so is B's when B is K-contiguous (lane g loads
 * column g of a group of 8). When B is N-contiguous, lane (g, t) loads 8
 * columns 8t .. 8t + 7 of the physical row that logical k g stands for, and
 * movmatrix transposes each 32-bit word across the warp into the B fragment
 * of columns {8u + 2r, 8u + 2r + 1 : u = 0..3} (word r): the 32 columns of
 * the tile in four groups of 8, each output pair still two adjacent
 * columns. */
template <typename T, int W, int U, bool B_K_MAJOR>
TSR_DEVICE void stream_chunks(const gemm_params &p, const gemm_tile &tile, int64_t k_begin,
                              int64_t k_end, float (&acc)[4][4]) {
#if TSR_GPU_HAS_MMA_SYNC
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int64_t chunks = (k_end - k_begin + 31) >> 5;
  const T *a = (const T *)tile.a, *b = (const T *)tile.b;
  const bool row_lo = g < tile.m, row_hi = g + 8 < tile.m;
  const T *a_lo = a + (row_lo ? g : 0) * p.a_m + 8 * t;
  const T *a_hi = a + (row_hi ? g + 8 : 0) * p.a_m + 8 * t;
  /* K-contiguous B: column group c, lane g's column. N-contiguous B: load
   * l = 2s + h (step s, fragment half h) reads the physical row standing
   * for logical k g (+ 8 h) of step s, at columns 8t .. 8t + 7. */
  const T *b_at[4];
  bool b_live[4];
  int b_row[4];
#pragma unroll
  for (int c = 0; c < 4; c++) {
    if (B_K_MAJOR) {
      const int64_t col = tile.n0 + 8 * c + g;
      b_live[c] = col < p.n;
      b_at[c] = b + (b_live[c] ? col : 0) * p.b_n + 8 * t;
      b_row[c] = 8 * t;
    } else {
      const int64_t col = tile.n0 + 8 * t;
      b_live[c] = col < p.n;
      b_row[c] = 8 * (g >> 1) + 4 * (c >> 1) + 2 * (c & 1) + (g & 1);
      b_at[c] = b + (b_live[c] ? col : 0);
    }
  }
  const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
  /* U chunks' fragments, from chunk i0 on (W apart); zero past the slice. */
  struct batch {
    uint4 b[U][4], a_lo[U], a_hi[U];
  };
  auto load = [&](batch &q, int64_t i0) {
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int64_t kc = k_begin + ((i0 + (int64_t)W * u) << 5);
      const bool a_in = kc + 8 * t < k_end;
#pragma unroll
      for (int c = 0; c < 4; c++) {
        const bool in = b_live[c] && kc + b_row[c] < k_end;
        q.b[u][c] =
            in ? tsr_load16_stream(B_K_MAJOR ? (const void *)(b_at[c] + kc)
                                             : (const void *)(b_at[c] + (kc + b_row[c]) * p.b_k))
               : zero;
      }
      q.a_lo[u] = row_lo && a_in ? __ldg((const uint4 *)(a_lo + kc)) : zero;
      q.a_hi[u] = row_hi && a_in ? __ldg((const uint4 *)(a_hi + kc)) : zero;
    }
  };
  auto multiply = [&](const batch &q) {
#pragma unroll
    for (int u = 0; u < U; u++) {
      uint32_t fb[4][4]; /* [column group][fragment word: 2s + h] */
#pragma unroll
      for (int c = 0; c < 4; c++) {
        const uint32_t w[4] = {q.b[u][c].x, q.b[u][c].y, q.b[u][c].z, q.b[u][c].w};
#pragma unroll
        for (int j = 0; j < 4; j++) {
          if (B_K_MAJOR)
            fb[c][j] = w[j];
          else
            fb[j][c] = tsr_movmatrix_trans(w[j]);
        }
      }
#pragma unroll
      for (int s = 0; s < 2; s++) {
        const uint32_t af[4] = {s ? q.a_lo[u].z : q.a_lo[u].x, s ? q.a_hi[u].z : q.a_hi[u].x,
                                s ? q.a_lo[u].w : q.a_lo[u].y, s ? q.a_hi[u].w : q.a_hi[u].y};
#pragma unroll
        for (int c = 0; c < 4; c++) {
          const uint32_t bf[2] = {fb[c][2 * s], fb[c][2 * s + 1]};
          tsr_mma_16816<T>(acc[c], af, bf);
        }
      }
    }
  };
  /* Two batches in registers: the next one's loads are in flight while the
   * current one multiplies, so a warp's memory stream never runs dry. */
  const int64_t step = (int64_t)W * U;
  batch first, second;
  load(first, warp);
  for (int64_t i0 = warp; i0 < chunks; i0 += 2 * step) {
    load(second, i0 + step);
    multiply(first);
    if (i0 + step >= chunks)
      break;
    load(first, i0 + 2 * step);
    multiply(second);
  }
#else
  (void)p, (void)tile, (void)k_begin, (void)k_end, (void)acc;
  TSR_TRAP();
#endif
}

/* blockIdx.x: 32-column tile, y: batch entry, z: K slice (split_k slices of
 * k_per_split, a multiple of 32). p.b_k_major: B is K-contiguous. */
template <typename T, int W, int U> TSR_DEVICE void gemm_stream_body(const gemm_params &p) {
  constexpr int THREADS = W * 32, PER = 256 / THREADS; /* output pairs per thread */
  static_assert(256 % THREADS == 0, "the 256 output pairs spread evenly");
  gemm_tile tile;
  batch_pointers(p, (int64_t)p.batch_offset + blockIdx.y, tile);
  tile.m0 = 0;
  tile.n0 = (int64_t)blockIdx.x * 32;
  const int64_t k_begin = (int64_t)blockIdx.z * p.k_per_split;
  const int64_t k_end = k_begin + p.k_per_split < p.k ? k_begin + p.k_per_split : p.k;
  float acc[4][4] = {};
  if (p.b_k_major)
    stream_chunks<T, W, U, true>(p, tile, k_begin, k_end, acc);
  else
    stream_chunks<T, W, U, false>(p, tile, k_begin, k_end, acc);

  /* The warps' partial tiles summed in warp order (deterministic): pair
   * j = 32 (2c + half) + lane holds rows g (+ 8 half), columns of group c. */
  __shared__ float2 partial[W][8][32];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
#pragma unroll
  for (int c = 0; c < 4; c++) {
    partial[warp][2 * c][lane] = make_float2(acc[c][0], acc[c][1]);
    partial[warp][2 * c + 1][lane] = make_float2(acc[c][2], acc[c][3]);
  }
  __syncthreads();
  float sums[2 * PER];
#pragma unroll
  for (int i = 0; i < PER; i++) {
    const int j = tid + i * THREADS;
    float2 s = make_float2(0.0f, 0.0f);
#pragma unroll
    for (int w = 0; w < W; w++) {
      s.x += partial[w][j >> 5][j & 31].x;
      s.y += partial[w][j >> 5][j & 31].y;
    }
    sums[2 * i] = s.x;
    sums[2 * i + 1] = s.y;
  }
  if (p.split_k > 1 && !splitk_gather<2 * PER, THREADS>(p, sums, tid))
    return;
#pragma unroll
  for (int i = 0; i < PER; i++) {
    const int j = tid + i * THREADS, c = j >> 6, half = (j >> 5) & 1, g = (j & 31) >> 2, t = j & 3;
    const int64_t col = tile.n0 + (p.b_k_major ? 8 * c + 2 * t : 8 * t + 2 * c);
    epilogue_pair(p, tile, g + 8 * half, col, sums[2 * i], sums[2 * i + 1]);
  }
}

/* ------------------------------------------------------------------------ */
/* Operand packing for the TMA-fed kernels                                   */
/* ------------------------------------------------------------------------ */

/* 32 x 32 tiles through shared memory: reads run along the source's unit
 * stride (rows or K), writes along K. S: uint16_t or uint32_t. */
template <typename S> TSR_DEVICE void gemm_pack_body(const tsr_gpu_gemm_pack_params &p) {
  __shared__ S tile[32][33];
  const S *src = (const S *)p.src;
  S *dst = (S *)p.dst;
  const bool rows_fast = p.src_row == 1 && p.src_k != 1;
  const int x = threadIdx.x & 31, y = threadIdx.x >> 5; /* 256 threads: 32 x 8 */
  const int64_t k0 = (int64_t)blockIdx.x * 32;
  for (int64_t b = blockIdx.z; b < p.batch; b += gridDim.z) {
    for (int64_t r0 = (int64_t)blockIdx.y * 32; r0 < p.rows; r0 += (int64_t)gridDim.y * 32) {
#pragma unroll
      for (int j = 0; j < 4; j++) { /* rows y, y + 8, y + 16, y + 24: a constant trip count */
        const int i = y + 8 * j;
        int rr = rows_fast ? x : i, kk = rows_fast ? i : x;
        int64_t gr = r0 + rr, gk = k0 + kk;
        S v = 0;
        if (gr < p.rows && gk < p.depth)
          v = src[b * p.src_batch + gr * p.src_row + gk * p.src_k];
        tile[rr][kk] = v;
      }
      __syncthreads();
#pragma unroll
      for (int j = 0; j < 4; j++) {
        const int i = y + 8 * j;
        int64_t gr = r0 + i, gk = k0 + x;
        if (gr < p.rows && gk < p.depth) {
          S v = tile[i][x];
          if constexpr (sizeof(S) == 4) {
#if TSR_GPU_HAS_MMA_SYNC
            if (p.round_tf32)
              v = tsr_to_tf32(__uint_as_float(v));
#endif
          }
          dst[(b * p.rows + gr) * p.dst_pitch + gk] = v;
        }
      }
      __syncthreads();
    }
  }
}

} /* namespace */

TSR_KERNEL void __launch_bounds__(256) tsr_gemm_pack_b16(TSR_PARAMS(tsr_gpu_gemm_pack_params) p) {
  gemm_pack_body<uint16_t>(p);
}
TSR_KERNEL void __launch_bounds__(256) tsr_gemm_pack_b32(TSR_PARAMS(tsr_gpu_gemm_pack_params) p) {
  gemm_pack_body<uint32_t>(p);
}

#define TSR_DEFINE_GEMV_K(dt, T, R)                                                                \
  TSR_KERNEL void __launch_bounds__(256)                                                           \
      tsr_gemv_k_##dt##_r##R(TSR_PARAMS(tsr_gpu_gemm_params) p) {                                  \
    gemv_k_body<T, R>(p);                                                                          \
  }
#define TSR_DEFINE_GEMV_N(dt, T, R)                                                                \
  TSR_KERNEL void __launch_bounds__(128)                                                           \
      tsr_gemv_n_##dt##_r##R(TSR_PARAMS(tsr_gpu_gemm_params) p) {                                  \
    gemv_n_body<T, R>(p);                                                                          \
  }
#define TSR_GEMV_FOR_ROWS_F32(R) TSR_DEFINE_GEMV_K(f32, float, R)
#define TSR_GEMV_FOR_ROWS_BF16(R) TSR_DEFINE_GEMV_K(bf16, tsr_bf16, R)
#define TSR_GEMV_FOR_ROWS_F16(R) TSR_DEFINE_GEMV_K(f16, tsr_f16, R)
TSR_GEMV_K_ROWS(TSR_GEMV_FOR_ROWS_F32)
TSR_GEMV_K_ROWS(TSR_GEMV_FOR_ROWS_BF16)
TSR_GEMV_K_ROWS(TSR_GEMV_FOR_ROWS_F16)
#define TSR_GEMV_N_FOR_ROWS_F32(R) TSR_DEFINE_GEMV_N(f32, float, R)
#define TSR_GEMV_N_FOR_ROWS_BF16(R) TSR_DEFINE_GEMV_N(bf16, tsr_bf16, R)
#define TSR_GEMV_N_FOR_ROWS_F16(R) TSR_DEFINE_GEMV_N(f16, tsr_f16, R)
TSR_GEMV_N_ROWS(TSR_GEMV_N_FOR_ROWS_F32)
TSR_GEMV_N_ROWS(TSR_GEMV_N_FOR_ROWS_BF16)
TSR_GEMV_N_ROWS(TSR_GEMV_N_FOR_ROWS_F16)

#define TSR_DEFINE_GEMM_STREAM(dt, T, W, U)                                                        \
  TSR_KERNEL void __launch_bounds__(W * 32)                                                        \
      tsr_gemm_stream_##dt##_w##W##_u##U(TSR_PARAMS(tsr_gpu_gemm_params) p) {                      \
    gemm_stream_body<T, W, U>(p);                                                                  \
  }
#define TSR_DEFINE_GEMM_STREAM_BOTH(W, U)                                                          \
  TSR_DEFINE_GEMM_STREAM(bf16, tsr_bf16, W, U) TSR_DEFINE_GEMM_STREAM(f16, tsr_f16, W, U)
#if TSR_GPU_NVIDIA_KERNELS
TSR_GEMM_STREAM_CONFIGS(TSR_DEFINE_GEMM_STREAM_BOTH)
#endif

/* Sums the K slices of a GEMV in slice order (deterministic) and runs the
 * epilogue: one thread per output element of the launch's batch entries. */
TSR_KERNEL void __launch_bounds__(256) tsr_gemm_splitk_reduce(TSR_PARAMS(tsr_gpu_gemm_params) p) {
  const int64_t per_batch = p.m * p.n;
  const int64_t total = per_batch * p.batch_count;
  const float *partials = (const float *)p.workspace;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t entry = i / per_batch, within = i % per_batch;
    int64_t row = within / p.n, col = within % p.n;
    float sum = 0.0f;
    for (int s = 0; s < p.split_k; s++)
      sum += partials[((int64_t)s * p.batch_count + entry) * per_batch + within];
    gemm_tile t;
    batch_pointers(p, (int64_t)p.batch_offset + entry, t);
    tsr_store_any(t.d, p.out_dtype, row * p.d_m + col * p.d_n, epilogue_value(p, t, row, col, sum));
  }
}
