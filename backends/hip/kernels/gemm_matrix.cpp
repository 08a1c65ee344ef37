/* SPDX-License-Identifier: Apache-2.0 */
/* GEMM on AMD matrix cores (MFMA on CDNA2/3, WMMA on RDNA3/4) and a 16-bit
 * SIMT GEMM for GPUs without them. Included after portable.cu in the HIP
 * module (module.cpp), so gemm.cu's helpers (resolve_tile, splitk_gather,
 * epilogue_pair) are in this translation unit; launched by the same host
 * code as the mma.sync kernels (kind GPU_GEMM_MMA), so every field of
 * tsr_gpu_gemm_params means what it means there.
 *
 * - One body for every engine (matrix_core.h) and tile: BM x BN tiles, BK
 *   deep slices, waves of WAVE lanes each owning a (BM / WM) x (BN / WN)
 *   sub-tile of instruction tiles. AMD has no asynchronous global -> LDS
 *   copy on these targets, so the next slice is loaded into registers
 *   while the current one multiplies, then stored to the other of two LDS
 *   buffers: one barrier a slice.
 * - Operand tiles in LDS follow the operand's unit stride ([row][k] or
 *   [k][row], p.a_k_major / p.b_k_major) so transposes cost nothing; rows
 *   are padded 16 bytes. Fragments are read from LDS by the layout
 *   functions: k-major tiles as 8- or 16-byte vectors (a lane's k run),
 *   the other layout element by element.
 * - Global loads: 16 bytes where p.a_async / p.b_async say the operand's
 *   unit-stride runs are 16-byte aligned, else element by element (any
 *   strides); outside the matrices zero.
 * - Epilogue: each instruction tile of accumulators is staged through the
 *   wave's piece of LDS and stored a column pair a lane, row by row, through
 *   epilogue_pair (alpha, beta C, bias, activation, D dtype). */
#include "hip_kernel_list.h"
#include "matrix_core.h"

namespace {

/* One operand's BK-deep slice (R rows: BM of A or BN of B) in registers on
 * its way to LDS: 16-byte chunks along the tile's contiguous dimension (k
 * for [row][k] tiles, rows for [k][row]). */
template <typename S, int R, int BK, int THREADS> struct mx_slice {
  static constexpr int CHUNK = 16 / (int)sizeof(S);
  static constexpr int TOTAL = R * BK / CHUNK;
  static constexpr int PER = (TOTAL + THREADS - 1) / THREADS;
  uint4 v[PER];

  /* Chunk i's line (row of a [row][k] tile, k of a [k][row] one) and first
   * element along the line. */
  static __device__ __forceinline__ void place(int i, bool k_major, int &line, int &pos) {
    if (k_major) {
      line = i / (BK / CHUNK);
      pos = i % (BK / CHUNK) * CHUNK;
    } else {
      line = i / (R / CHUNK);
      pos = i % (R / CHUNK) * CHUNK;
    }
  }

  __device__ __forceinline__ void fetch(const S *src, int64_t rows, int64_t depth,
                                        int64_t row_stride, int64_t k_stride, int64_t r0,
                                        int64_t k0, bool k_major, bool vec, int tid) {
#pragma unroll
    for (int it = 0; it < PER; it++) {
      const int i = tid + it * THREADS;
      if (TOTAL % THREADS != 0 && i >= TOTAL)
        break;
      int line, pos;
      place(i, k_major, line, pos);
      int64_t gr, gk, left, along;
      bool inside;
      if (k_major) {
        gr = r0 + line;
        gk = k0 + pos;
        inside = gr < rows;
        left = depth - gk;
        along = k_stride;
      } else {
        gk = k0 + line;
        gr = r0 + pos;
        inside = gk < depth;
        left = rows - gr;
        along = row_stride;
      }
      const S *from = src + gr * row_stride + gk * k_stride;
      if (inside && vec && left >= CHUNK) {
        v[it] = *(const uint4 *)from;
      } else {
        /* Inline: a call here would make the accumulators caller-saved. */
        S e[CHUNK];
#pragma unroll
        for (int j = 0; j < CHUNK; j++)
          e[j] = inside && j < left ? from[j * along] : (S)0;
        memcpy(&v[it], e, 16);
      }
    }
  }

  /* Into an LDS stage laid out [R][BK + PAD] or [BK][R + PAD]. */
  template <int PAD> __device__ __forceinline__ void store(S *stage, bool k_major, int tid) const {
#pragma unroll
    for (int it = 0; it < PER; it++) {
      const int i = tid + it * THREADS;
      if (TOTAL % THREADS != 0 && i >= TOTAL)
        break;
      int line, pos;
      place(i, k_major, line, pos);
      *(uint4 *)(stage + line * (k_major ? BK + PAD : R + PAD) + pos) = v[it];
    }
  }
};

/* A lane's A (IS_A) or B fragment at tile row / column `rc0` and slice
 * offset kk, from an LDS stage of R rows. */
template <class E, typename S, bool IS_A, int R, int BK, int PAD>
TSR_DEVICE void mx_fragment(uint32_t *w, const S *stage, bool k_major, int rc0, int kk, int lane) {
  constexpr int ID = E::ID;
  /* 16-bit elements: a k run read at once (8 or 4 elements). */
  constexpr int V = sizeof(S) == 2 ? (E::RUN >= 8 ? 8 : E::RUN >= 4 ? 4 : 1) : 1;
  if (V > 1 && k_major) {
#pragma unroll
    for (int q = 0; q < E::AB / V; q++) {
      const int r = q * V;
      const int rc = rc0 + (IS_A ? tsr_mx_a_row<ID>(lane, r) : tsr_mx_b_col<ID>(lane, r));
      const int k = kk + (IS_A ? tsr_mx_a_k<ID>(lane, r) : tsr_mx_b_k<ID>(lane, r));
      const S *from = stage + rc * (BK + PAD) + k;
      if constexpr (V == 8) {
        uint4 x = *(const uint4 *)from;
        w[4 * q] = x.x;
        w[4 * q + 1] = x.y;
        w[4 * q + 2] = x.z;
        w[4 * q + 3] = x.w;
      } else {
        uint2 x = *(const uint2 *)from;
        w[2 * q] = x.x;
        w[2 * q + 1] = x.y;
      }
    }
  } else {
#pragma unroll
    for (int r = 0; r < E::AB; r++) {
      const int rc = rc0 + (IS_A ? tsr_mx_a_row<ID>(lane, r) : tsr_mx_b_col<ID>(lane, r));
      const int k = kk + (IS_A ? tsr_mx_a_k<ID>(lane, r) : tsr_mx_b_k<ID>(lane, r));
      const uint32_t x = k_major ? stage[rc * (BK + PAD) + k] : stage[k * (R + PAD) + rc];
      if (sizeof(S) == 4)
        w[r] = x;
      else if (r & 1)
        w[r / 2] |= x << 16;
      else
        w[r / 2] = x;
    }
  }
}

/* Orders one wave's LDS accesses (the epilogue's staging). A wave64 is two
 * warps on NVIDIA (emulation): a named barrier per wave. */
template <int WAVE> TSR_DEVICE void mx_wave_sync(int wave) {
#if TSR_HIP_MX_EMULATED
  if constexpr (WAVE == 64)
    asm volatile("bar.sync %0, 64;" ::"r"(wave + 1) : "memory");
  else
    __syncwarp();
#else
  (void)wave;
  TSR_SYNCWARP(); /* a wavefront runs in lock step */
#endif
}

/* K slices of this block: all of K, or its split-K share (blockIdx.z). */
template <int BK>
TSR_DEVICE void mx_k_range(const gemm_params &p, int64_t &kt_first, int64_t &k_tiles) {
  const int64_t k_tiles_all = (p.k + BK - 1) / BK;
  kt_first = 0;
  k_tiles = k_tiles_all;
  if (p.split_k > 1) {
    const int64_t per = p.k_per_split / BK;
    kt_first = (int64_t)blockIdx.z * per;
    k_tiles = k_tiles_all - kt_first < per ? k_tiles_all - kt_first : per;
  }
}

/* E: a tsr_mx_engine; T: tsr_bf16, tsr_f16 or float (MFMA f32). */
template <class E, typename T, int BM, int BN, int BK, int WM, int WN, int STAGES>
TSR_DEVICE void gemm_matrix_body(const gemm_params &p) {
  typedef typename std::conditional<sizeof(T) == 4, uint32_t, uint16_t>::type S;
  constexpr int WAVE = E::WAVE, WAVES = WM * WN, THREADS = WAVES * WAVE;
  constexpr int PAD = TSR_HIP_GEMM_PAD((int)sizeof(S));
  constexpr int A_STAGE = TSR_GPU_GEMM_STAGE_ELEMS(BM, BK, PAD, PAD);
  constexpr int B_STAGE = TSR_GPU_GEMM_STAGE_ELEMS(BN, BK, PAD, PAD);
  constexpr int WTM = BM / WM, WTN = BN / WN, MT = WTM / E::M, NT = WTN / E::N;
  static_assert(WTM % E::M == 0 && WTN % E::N == 0, "wave tiles are whole instruction tiles");
  static_assert(BK % E::K == 0 && BK % (16 / sizeof(S)) == 0, "slices are whole instructions");
  static_assert(STAGES == 2, "two LDS buffers, the next slice in registers");
  static_assert(WAVES * E::M * (E::N + 1) * 4 <= 2 * (A_STAGE + B_STAGE) * (int)sizeof(S),
                "the epilogue's staging fits the operand buffers");
  static_assert(!TSR_HIP_MX_EMULATED || WAVE != 64 || WAVES <= 15, "named barriers 1..15");

  extern __shared__ __align__(16) unsigned char smem_raw[];
  S *a_stages = (S *)smem_raw;
  S *b_stages = a_stages + STAGES * A_STAGE;

  gemm_tile t;
  resolve_tile(p, BM, BN, t);
  const int tid = threadIdx.x, lane = tid % WAVE, wave = tid / WAVE;
  const int wave_m = wave / WN, wave_n = wave % WN;
  tsr_mx_wave ctx = {lane, wave, nullptr};
#if TSR_HIP_MX_EMULATED
  __shared__ float scratch[WAVES][TSR_MX_SCRATCH_FLOATS];
  ctx.scratch = scratch[wave];
#endif
  const bool a_k_major = p.a_k_major != 0, b_k_major = p.b_k_major != 0;
  const bool a_vec = p.a_async != 0, b_vec = p.b_async != 0;
  const S *a_src = (const S *)t.a, *b_src = (const S *)t.b;
  int64_t kt_first, k_tiles;
  mx_k_range<BK>(p, kt_first, k_tiles);

  typename E::acc acc[MT][NT];
#pragma unroll
  for (int i = 0; i < MT; i++)
#pragma unroll
    for (int j = 0; j < NT; j++)
      E::zero(acc[i][j]);

  mx_slice<S, BM, BK, THREADS> a_next;
  mx_slice<S, BN, BK, THREADS> b_next;
  auto fetch = [&](int64_t k_tile) {
    const int64_t k0 = (kt_first + k_tile) * BK;
    a_next.fetch(a_src, t.m, p.k, p.a_m, p.a_k, t.m0, k0, a_k_major, a_vec, tid);
    b_next.fetch(b_src, p.n, p.k, p.b_n, p.b_k, t.n0, k0, b_k_major, b_vec, tid);
  };
  auto store = [&](int buffer) {
    a_next.template store<PAD>(a_stages + buffer * A_STAGE, a_k_major, tid);
    b_next.template store<PAD>(b_stages + buffer * B_STAGE, b_k_major, tid);
  };

  if (k_tiles > 0) {
    fetch(0);
    store(0);
  }
  __syncthreads();
  for (int64_t kt = 0; kt < k_tiles; kt++) {
    const int buffer = (int)(kt & 1);
    const bool more = kt + 1 < k_tiles;
    if (more)
      fetch(kt + 1); /* in flight while this slice multiplies */
    const S *as = a_stages + buffer * A_STAGE, *bs = b_stages + buffer * B_STAGE;
#pragma unroll
    for (int kk = 0; kk < BK; kk += E::K) {
      /* All B fragments, then A one tile row at a time: fewer live
       * registers than holding both. */
      uint32_t bf[NT][E::WORDS];
#pragma unroll
      for (int nt = 0; nt < NT; nt++)
        mx_fragment<E, S, false, BN, BK, PAD>(bf[nt], bs, b_k_major, wave_n * WTN + nt * E::N, kk,
                                              lane);
#pragma unroll
      for (int mt = 0; mt < MT; mt++) {
        uint32_t af[E::WORDS];
        mx_fragment<E, S, true, BM, BK, PAD>(af, as, a_k_major, wave_m * WTM + mt * E::M, kk, lane);
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
          E::mma(acc[mt][nt], af, bf[nt], ctx);
      }
    }
    /* The other buffer was last read in the previous slice, before the
     * barrier that ended it. */
    if (more)
      store(buffer ^ 1);
    __syncthreads();
  }

  if (p.split_k > 1) {
    float flat[MT * NT * E::C];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
      for (int j = 0; j < NT; j++)
#pragma unroll
        for (int r = 0; r < E::C; r++)
          flat[(i * NT + j) * E::C + r] = acc[i][j][r];
    if (!splitk_gather<MT * NT * E::C, THREADS>(p, flat, tid))
      return;
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
      for (int j = 0; j < NT; j++)
#pragma unroll
        for (int r = 0; r < E::C; r++)
          acc[i][j][r] = flat[(i * NT + j) * E::C + r];
  }

  /* Each instruction tile goes through the wave's piece of LDS (free now:
   * the last slice ended with a barrier), then the wave stores it row by
   * row, a column pair a lane: one inlined epilogue per tile in a loop that
   * is not unrolled, so the accumulators stay in registers. */
  float *c_tile = (float *)smem_raw + wave * (E::M * (E::N + 1));
#pragma unroll
  for (int mt = 0; mt < MT; mt++) {
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
#pragma unroll
      for (int r = 0; r < E::C; r++)
        c_tile[tsr_mx_c_row<E::ID>(lane, r) * (E::N + 1) + tsr_mx_c_col<E::ID>(lane, r)] =
            acc[mt][nt][r];
      mx_wave_sync<WAVE>(wave);
      const int64_t row0 = t.m0 + wave_m * WTM + mt * E::M, col0 = t.n0 + wave_n * WTN + nt * E::N;
#pragma unroll 1
      for (int i = lane; i < E::M * E::N / 2; i += WAVE) {
        const int row = i / (E::N / 2), col = i % (E::N / 2) * 2;
        epilogue_pair(p, t, row0 + row, col0 + col, c_tile[row * (E::N + 1) + col],
                      c_tile[row * (E::N + 1) + col + 1]);
      }
      mx_wave_sync<WAVE>(wave);
    }
  }
}

/* ------------------------------------------------------------------------ */
/* 16-bit SIMT GEMM (no matrix instruction)                                  */
/* ------------------------------------------------------------------------ */

template <typename T> TSR_DEVICE float mx_half_to_float(uint16_t bits) {
  T x;
  memcpy(&x, &bits, 2);
  return tsr_elem<T>::to_float(x);
}

/* A slice stored as f32 in [k][row] order (float4 reads along rows). */
template <typename T, int R, int BK, int THREADS, int PITCH>
TSR_DEVICE void simt16_store(const mx_slice<uint16_t, R, BK, THREADS> &s, float *tile, bool k_major,
                             int tid) {
  typedef mx_slice<uint16_t, R, BK, THREADS> slice;
#pragma unroll
  for (int it = 0; it < slice::PER; it++) {
    const int i = tid + it * THREADS;
    if (slice::TOTAL % THREADS != 0 && i >= slice::TOTAL)
      break;
    int line, pos;
    slice::place(i, k_major, line, pos);
    uint16_t e[8];
    memcpy(e, &s.v[it], 16);
#pragma unroll
    for (int j = 0; j < 8; j++) {
      const float x = mx_half_to_float<T>(e[j]);
      if (k_major)
        tile[(pos + j) * PITCH + line] = x;
      else
        tile[line * PITCH + pos + j] = x;
    }
  }
}

/* 256 threads as 16 x 16, each BM / 16 x BN / 16 outputs in groups of 4
 * rows / columns 64 apart (conflict-free float4 reads). */
template <typename T, int BM, int BN, int BK>
TSR_DEVICE void gemm_simt16x_body(const gemm_params &p) {
  constexpr int THREADS = 256, TM = BM / 16, TN = BN / 16;
  constexpr int A_PITCH = BM + 4, B_PITCH = BN + 4;
  static_assert(BM % 64 == 0 && BN % 64 == 0, "rows in groups of 4 per thread, 64 apart");
  static_assert(BN <= BM + 8, "a 64-row strip of outputs fits the operand buffers");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float *a_tiles = (float *)smem_raw;          /* [2][BK][A_PITCH] */
  float *b_tiles = a_tiles + 2 * BK * A_PITCH; /* [2][BK][B_PITCH] */

  gemm_tile t;
  resolve_tile(p, BM, BN, t);
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const bool a_k_major = p.a_k_major != 0, b_k_major = p.b_k_major != 0;
  const bool a_vec = p.a_async != 0, b_vec = p.b_async != 0;
  const uint16_t *a_src = (const uint16_t *)t.a, *b_src = (const uint16_t *)t.b;
  int64_t kt_first, k_tiles;
  mx_k_range<BK>(p, kt_first, k_tiles);

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; i++)
#pragma unroll
    for (int j = 0; j < TN; j++)
      acc[i][j] = 0.0f;

  mx_slice<uint16_t, BM, BK, THREADS> a_next;
  mx_slice<uint16_t, BN, BK, THREADS> b_next;
  auto fetch = [&](int64_t k_tile) {
    const int64_t k0 = (kt_first + k_tile) * BK;
    a_next.fetch(a_src, t.m, p.k, p.a_m, p.a_k, t.m0, k0, a_k_major, a_vec, tid);
    b_next.fetch(b_src, p.n, p.k, p.b_n, p.b_k, t.n0, k0, b_k_major, b_vec, tid);
  };
  auto store = [&](int buffer) {
    simt16_store<T, BM, BK, THREADS, A_PITCH>(a_next, a_tiles + buffer * BK * A_PITCH, a_k_major,
                                              tid);
    simt16_store<T, BN, BK, THREADS, B_PITCH>(b_next, b_tiles + buffer * BK * B_PITCH, b_k_major,
                                              tid);
  };

  if (k_tiles > 0) {
    fetch(0);
    store(0);
  }
  __syncthreads();
  for (int64_t kt = 0; kt < k_tiles; kt++) {
    const int buffer = (int)(kt & 1);
    const bool more = kt + 1 < k_tiles;
    if (more)
      fetch(kt + 1);
    const float *as = a_tiles + buffer * BK * A_PITCH, *bs = b_tiles + buffer * BK * B_PITCH;
#pragma unroll
    for (int kk = 0; kk < BK; kk++) {
      float av[TM], bv[TN];
#pragma unroll
      for (int g = 0; g < TM / 4; g++) {
        const float4 x = *(const float4 *)&as[kk * A_PITCH + g * 64 + ty * 4];
        av[4 * g] = x.x;
        av[4 * g + 1] = x.y;
        av[4 * g + 2] = x.z;
        av[4 * g + 3] = x.w;
      }
#pragma unroll
      for (int g = 0; g < TN / 4; g++) {
        const float4 x = *(const float4 *)&bs[kk * B_PITCH + g * 64 + tx * 4];
        bv[4 * g] = x.x;
        bv[4 * g + 1] = x.y;
        bv[4 * g + 2] = x.z;
        bv[4 * g + 3] = x.w;
      }
#pragma unroll
      for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++)
          acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    if (more)
      store(buffer ^ 1);
    __syncthreads();
  }

  if (p.split_k > 1 && !splitk_gather<TM * TN, THREADS>(p, &acc[0][0], tid))
    return;
  /* 64-row strips through LDS (the last slice ended with a barrier), then a
   * loop that is not unrolled stores column pairs: one inlined epilogue, the
   * accumulators stay in registers. */
  float *strip = (float *)smem_raw; /* [64][BN] */
#pragma unroll
  for (int g = 0; g < TM / 4; g++) {
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
      for (int h = 0; h < TN / 4; h++)
        *(float4 *)&strip[(ty * 4 + i) * BN + h * 64 + tx * 4] =
            make_float4(acc[4 * g + i][4 * h], acc[4 * g + i][4 * h + 1], acc[4 * g + i][4 * h + 2],
                        acc[4 * g + i][4 * h + 3]);
    __syncthreads();
#pragma unroll 1
    for (int i = tid; i < 64 * BN / 2; i += THREADS) {
      const int row = i / (BN / 2), col = i % (BN / 2) * 2;
      epilogue_pair(p, t, t.m0 + g * 64 + row, t.n0 + col, strip[row * BN + col],
                    strip[row * BN + col + 1]);
    }
    __syncthreads();
  }
}

} /* namespace */

/* ------------------------------------------------------------------------ */
/* Kernels                                                                   */
/* ------------------------------------------------------------------------ */

/* __launch_bounds__ takes only the block size: HIP reads a second argument
 * as waves per execution unit, not CUDA's blocks per SM. */

#if TSR_HIP_HAS_MFMA
template <typename T, int INST> struct mx_mfma_engine;
template <typename T> struct mx_mfma_engine<T, 32> {
  typedef tsr_mx_engine<T, tsr_mx_mfma32> type;
};
template <typename T> struct mx_mfma_engine<T, 16> {
  typedef tsr_mx_engine<T, tsr_mx_mfma16> type;
};

#define TSR_HIP_DEFINE_MFMA(dt, T, BM, BN, BK, WM, WN, S, INST)                                    \
  TSR_KERNEL void __launch_bounds__(WM *WN * 64)                                                   \
      tsr_gemm_mfma_##dt##_##BM##x##BN##x##BK##_w##WM##x##WN##_s##S(                               \
          TSR_PARAMS(tsr_gpu_gemm_params) p) {                                                     \
    gemm_matrix_body<typename mx_mfma_engine<T, INST>::type, T, BM, BN, BK, WM, WN, S>(p);         \
  }
#define TSR_HIP_DEFINE_MFMA_16(BM, BN, BK, WM, WN, S, INST)                                        \
  TSR_HIP_DEFINE_MFMA(bf16, tsr_bf16, BM, BN, BK, WM, WN, S, INST)                                 \
  TSR_HIP_DEFINE_MFMA(f16, tsr_f16, BM, BN, BK, WM, WN, S, INST)
TSR_HIP_GEMM_MFMA_CONFIGS(TSR_HIP_DEFINE_MFMA_16)

#define TSR_HIP_DEFINE_MFMA_F32(BM, BN, BK, WM, WN, S, INST)                                       \
  TSR_KERNEL void __launch_bounds__(WM *WN * 64)                                                   \
      tsr_gemm_mfma_f32_##BM##x##BN##x##BK##_w##WM##x##WN##_s##S(TSR_PARAMS(tsr_gpu_gemm_params)   \
                                                                     p) {                          \
    static_assert(INST == 16, "v_mfma_f32_16x16x4_f32");                                           \
    gemm_matrix_body<tsr_mx_engine<float, tsr_mx_mfma16f32>, float, BM, BN, BK, WM, WN, S>(p);     \
  }
TSR_HIP_GEMM_MFMA_F32_CONFIGS(TSR_HIP_DEFINE_MFMA_F32)
#endif

#if TSR_HIP_HAS_WMMA11
#define TSR_HIP_DEFINE_WMMA11(dt, T, BM, BN, BK, WM, WN, S)                                        \
  TSR_KERNEL void __launch_bounds__(WM *WN * 32)                                                   \
      tsr_gemm_wmma11_##dt##_##BM##x##BN##x##BK##_w##WM##x##WN##_s##S(                             \
          TSR_PARAMS(tsr_gpu_gemm_params) p) {                                                     \
    gemm_matrix_body<tsr_mx_engine<T, tsr_mx_wmma11>, T, BM, BN, BK, WM, WN, S>(p);                \
  }
#define TSR_HIP_DEFINE_WMMA11_16(BM, BN, BK, WM, WN, S)                                            \
  TSR_HIP_DEFINE_WMMA11(bf16, tsr_bf16, BM, BN, BK, WM, WN, S)                                     \
  TSR_HIP_DEFINE_WMMA11(f16, tsr_f16, BM, BN, BK, WM, WN, S)
TSR_HIP_GEMM_WMMA11_CONFIGS(TSR_HIP_DEFINE_WMMA11_16)
#endif

#if TSR_HIP_HAS_WMMA12
#define TSR_HIP_DEFINE_WMMA12(dt, T, BM, BN, BK, WM, WN, S)                                        \
  TSR_KERNEL void __launch_bounds__(WM *WN * 32)                                                   \
      tsr_gemm_wmma12_##dt##_##BM##x##BN##x##BK##_w##WM##x##WN##_s##S(                             \
          TSR_PARAMS(tsr_gpu_gemm_params) p) {                                                     \
    gemm_matrix_body<tsr_mx_engine<T, tsr_mx_wmma12>, T, BM, BN, BK, WM, WN, S>(p);                \
  }
#define TSR_HIP_DEFINE_WMMA12_16(BM, BN, BK, WM, WN, S)                                            \
  TSR_HIP_DEFINE_WMMA12(bf16, tsr_bf16, BM, BN, BK, WM, WN, S)                                     \
  TSR_HIP_DEFINE_WMMA12(f16, tsr_f16, BM, BN, BK, WM, WN, S)
TSR_HIP_GEMM_WMMA12_CONFIGS(TSR_HIP_DEFINE_WMMA12_16)
#endif

/* Every target. */
#define TSR_HIP_DEFINE_SIMT16(dt, T, BM, BN, BK, WM, WN)                                           \
  TSR_KERNEL void __launch_bounds__(WM *WN * 32)                                                   \
      tsr_gemm_simt16_##dt##_##BM##x##BN##x##BK(TSR_PARAMS(tsr_gpu_gemm_params) p) {               \
    static_assert(WM * WN * 32 == 256, "256 threads");                                             \
    gemm_simt16x_body<T, BM, BN, BK>(p);                                                           \
  }
#define TSR_HIP_DEFINE_SIMT16_16(BM, BN, BK, WM, WN)                                               \
  TSR_HIP_DEFINE_SIMT16(bf16, tsr_bf16, BM, BN, BK, WM, WN)                                        \
  TSR_HIP_DEFINE_SIMT16(f16, tsr_f16, BM, BN, BK, WM, WN)
TSR_HIP_GEMM_SIMT16_CONFIGS(TSR_HIP_DEFINE_SIMT16_16)
