/* SPDX-License-Identifier: Apache-2.0 */
/* GEMM, batched and grouped GEMM, and the GEMV / split-K path.
 *
 * - Tensor cores (bf16/f16 mma.sync m16n8k16; f32 inputs as tf32 m16n8k8 when
 *   the caller allows it): BM x BN block tiles, a multi-stage cp.async
 *   pipeline of BK-deep slices in shared memory, warps of WTM x WTN sub-tiles
 *   fed by ldmatrix. Each operand's tile layout in shared memory follows its
 *   unit stride ([row][k] or [k][row]) so transposes cost nothing; operands
 *   whose rows are not 16-byte aligned runs take a synchronous element loader
 *   into the same layout.
 *   The 16-row tile (M <= 16) splits K across blocks; the last block of a
 *   tile sums the slices in order (splitk_gather).
 * - True f32 (strict compute): a SIMT kernel, 128x128x16 tiles, 8x8 per
 *   thread, 16-byte loads of interior tiles.
 * - M <= 16: GEMV kernels stream B with 16-byte loads, optionally split over
 *   K into f32 partials that tsr_gemm_splitk_reduce sums in a fixed order.
 * - tsr_gemm_pack_b16/b32: K-major copies of operands the TMA-fed kernels
 *   (gemm_sm90.cu) cannot load as they are.
 * Every kernel ends in the same fused epilogue: alpha, beta*C (C may be D),
 * bias, activation, conversion to D's dtype, any D strides. Grouped GEMM is
 * one launch whose blocks walk the tiles of all groups (see resolve_tile). */
#include "gpu_portability.h"
#include "kernel_list.h"
#include "kernel_params.h"

namespace {

typedef tsr_gpu_gemm_params gemm_params;

/* The operands of one block's tile after resolving its batch entry or group. */
struct gemm_tile {
  const char *a, *b, *c, *bias;
  char *d;
  int64_t m; /* rows of this problem */
  int64_t m0, n0;
};

TSR_DEVICE int dtype_size(int dtype) {
  return dtype == TSR_GPU_F32 ? 4 : 2;
}

/* Pointers of batch entry `batch` of a plain (batched) GEMM. */
TSR_DEVICE void batch_pointers(const gemm_params &p, int64_t batch, gemm_tile &t) {
  int in_size = dtype_size(p.in_dtype), out_size = dtype_size(p.out_dtype);
  t.a = (const char *)p.a + batch * p.a_batch * in_size;
  t.b = (const char *)p.b + batch * p.b_batch * in_size;
  t.c = (const char *)p.c + batch * p.c_batch * out_size;
  t.bias = (const char *)p.bias;
  t.d = (char *)p.d + batch * p.d_batch * out_size;
  t.m = p.m;
}

/* Tile `linear` of batch entry `batch` (plain GEMM) or of the launch
 * (grouped: it runs over the tiles of all groups; a binary search over the
 * prefix sums finds the group). Plain GEMM walks tiles in groups of 8 tile
 * rows so that neighbouring blocks share A and B panels in L2. `group` gets
 * the group's slot in the launch (grouped) or -1. */
TSR_DEVICE void resolve_tile_at(const gemm_params &p, int64_t linear, int64_t batch, int bm, int bn,
                                gemm_tile &t, int &group) {
  int64_t tm, tn;
  if (p.group_count > 0) {
    int lo = 0, hi = p.group_count;
    while (hi - lo > 1) {
      int mid = (lo + hi) >> 1;
      if (p.group_tile_start[mid] <= linear)
        lo = mid;
      else
        hi = mid;
    }
    int64_t local = linear - p.group_tile_start[lo];
    tm = local / p.tiles_n;
    tn = local % p.tiles_n;
    int64_t row0 = p.group_row_start[lo];
    int64_t index = p.group_index[lo];
    int in_size = dtype_size(p.in_dtype), out_size = dtype_size(p.out_dtype);
    t.a = (const char *)p.a + row0 * p.a_m * in_size;
    t.b = (const char *)p.b + index * p.b_batch * in_size;
    t.c = nullptr;
    t.bias = (const char *)p.bias + index * p.bias_batch * out_size;
    t.d = (char *)p.d + row0 * p.d_m * out_size;
    t.m = p.group_row_start[lo + 1] - row0;
    group = lo;
  } else {
    const int64_t rows_per_group = 8;
    int64_t span = rows_per_group * p.tiles_n;
    int64_t first = linear / span * rows_per_group;
    int64_t rows_here = p.tiles_m - first < rows_per_group ? p.tiles_m - first : rows_per_group;
    int64_t within = linear % span;
    tm = first + within % rows_here;
    tn = within / rows_here;
    batch_pointers(p, batch, t);
    group = -1;
  }
  t.m0 = tm * bm;
  t.n0 = tn * bn;
}

/* Block -> tile: blockIdx.x is the tile, blockIdx.y the batch entry. */
TSR_DEVICE void resolve_tile(const gemm_params &p, int bm, int bn, gemm_tile &t) {
  int group;
  resolve_tile_at(p, blockIdx.x, (int64_t)p.batch_offset + blockIdx.y, bm, bn, t, group);
}

/* alpha * acc + beta * C + bias, then the activation: one output element. */
TSR_DEVICE float epilogue_value(const gemm_params &p, const gemm_tile &t, int64_t row, int64_t col,
                                float acc) {
  float x = p.alpha * acc;
  if (p.has_c)
    x += p.beta * tsr_load_any(t.c, p.out_dtype, row * p.c_m + col * p.c_n);
  if (p.has_bias)
    x += tsr_load_any(t.bias, p.out_dtype, col * p.bias_n);
  return tsr_activation(p.activation, x);
}

/* Stores v0, v1 at (row, col), (row, col + 1): one access when D's columns
 * are contiguous and the pair is aligned. */
TSR_DEVICE void store_pair(const gemm_params &p, const gemm_tile &t, int64_t row, int64_t col,
                           bool two, float v0, float v1) {
  int64_t index = row * p.d_m + col * p.d_n;
  if (two && p.d_n == 1) {
    if (p.out_dtype == TSR_GPU_F32) {
      float *dst = (float *)t.d + index;
      if (((uintptr_t)dst & 7) == 0) {
        *(float2 *)dst = make_float2(v0, v1);
        return;
      }
    } else {
      uint16_t *dst = (uint16_t *)t.d + index;
      if (((uintptr_t)dst & 3) == 0) {
        *(uint32_t *)dst =
            p.out_dtype == TSR_GPU_BF16 ? tsr_pack2<tsr_bf16>(v0, v1) : tsr_pack2<tsr_f16>(v0, v1);
        return;
      }
    }
  }
  tsr_store_any(t.d, p.out_dtype, index, v0);
  if (two)
    tsr_store_any(t.d, p.out_dtype, index + p.d_n, v1);
}

/* The full epilogue of a pair, out of line: kernels inline it at every
 * accumulator, and one copy keeps them small. */
static __device__ __noinline__ void epilogue_fused_pair(const gemm_params &p, const gemm_tile &t,
                                                        int64_t row, int64_t col, bool two,
                                                        float v0, float v1) {
  v0 = epilogue_value(p, t, row, col, v0);
  if (two)
    v1 = epilogue_value(p, t, row, col + 1, v1);
  store_pair(p, t, row, col, two, v0, v1);
}

/* Outputs (row, col) and (row, col + 1) of a tile. */
TSR_DEVICE void epilogue_pair(const gemm_params &p, const gemm_tile &t, int64_t row, int64_t col,
                              float v0, float v1) {
  if (row >= t.m || col >= p.n)
    return;
  bool two = col + 1 < p.n;
  if (p.has_c || p.has_bias || p.activation != TSR_GPU_ACT_NONE)
    epilogue_fused_pair(p, t, row, col, two, v0, v1);
  else
    store_pair(p, t, row, col, two, p.alpha * v0, p.alpha * v1);
}

/* ------------------------------------------------------------------------ */
/* Tensor-core GEMM                                                          */
/* ------------------------------------------------------------------------ */

/* Loads one BK-deep slice of an operand (R rows: BM of A or BN of B) into a
 * shared-memory stage. `k_major`: stage layout [R][BK + PAD_K], else
 * [BK][R + PAD_MN]. `async`: 16-byte cp.async along the unit stride (the
 * host checked alignment); else element loads through registers. Elements
 * past the matrix are zero. S is the element's storage type. */
template <typename S, int R, int BK, int THREADS, int PAD_K, int PAD_MN>
TSR_DEVICE void load_operand(S *stage, const S *src, int64_t rows, int64_t depth,
                             int64_t row_stride, int64_t k_stride, int64_t r0, int64_t k0,
                             bool k_major, bool async, int tid) {
  constexpr int CHUNK = 16 / (int)sizeof(S);
#if TSR_GPU_HAS_MMA_SYNC
  if (async) {
    if (k_major) {
      constexpr int PER_ROW = BK / CHUNK, TOTAL = R * PER_ROW;
#pragma unroll
      for (int it = 0; it < (TOTAL + THREADS - 1) / THREADS; it++) {
        int i = tid + it * THREADS;
        if (TOTAL % THREADS != 0 && i >= TOTAL)
          break;
        int r = i / PER_ROW, c = (i % PER_ROW) * CHUNK;
        int64_t gr = r0 + r, gk = k0 + c;
        int valid = 0;
        const S *from = src;
        if (gr < rows && gk < depth) {
          int64_t left = depth - gk;
          valid = (left >= CHUNK ? CHUNK : (int)left) * (int)sizeof(S);
          from = src + gr * row_stride + gk;
        }
        tsr_cp_async16(stage + r * (BK + PAD_K) + c, from, valid);
      }
    } else {
      constexpr int PER_ROW = R / CHUNK, TOTAL = BK * PER_ROW;
#pragma unroll
      for (int it = 0; it < (TOTAL + THREADS - 1) / THREADS; it++) {
        int i = tid + it * THREADS;
        if (TOTAL % THREADS != 0 && i >= TOTAL)
          break;
        int kk = i / PER_ROW, c = (i % PER_ROW) * CHUNK;
        int64_t gk = k0 + kk, gr = r0 + c;
        int valid = 0;
        const S *from = src;
        if (gk < depth && gr < rows) {
          int64_t left = rows - gr;
          valid = (left >= CHUNK ? CHUNK : (int)left) * (int)sizeof(S);
          from = src + gk * k_stride + gr;
        }
        tsr_cp_async16(stage + kk * (R + PAD_MN) + c, from, valid);
      }
    }
    return;
  }
#endif
  /* Consecutive threads walk the operand's unit-stride dimension. */
  constexpr int TOTAL = R * BK;
  bool rows_fast = row_stride == 1 && k_stride != 1;
#pragma unroll 4
  for (int i = tid; i < TOTAL; i += THREADS) {
    int r, kk;
    if (rows_fast) {
      kk = i / R;
      r = i % R;
    } else {
      r = i / BK;
      kk = i % BK;
    }
    int64_t gr = r0 + r, gk = k0 + kk;
    S value = 0;
    if (gr < rows && gk < depth)
      value = src[gr * row_stride + gk * k_stride];
    if (k_major)
      stage[r * (BK + PAD_K) + kk] = value;
    else
      stage[kk * (R + PAD_MN) + r] = value;
  }
}

/* Split-K across the blocks of a tile (blockIdx.z is the K slice): every
 * block writes its accumulators to its slot of the f32 workspace; the block
 * that arrives last at the tile's counter sums all slices in slice order
 * (the same result whatever the arrival order), resets the counter and
 * returns true to run the epilogue; the others return false. */
template <int ACC, int THREADS>
TSR_DEVICE bool splitk_gather(const gemm_params &p, float *acc, int tid) {
  __shared__ int last_block;
  const int64_t slot = (int64_t)blockIdx.y * gridDim.x + blockIdx.x;
  float *slices = (float *)p.workspace + slot * p.split_k * (ACC * THREADS);
  float *mine = slices + (int64_t)blockIdx.z * (ACC * THREADS);
#pragma unroll
  for (int e = 0; e < ACC; e++)
    __stcg(mine + e * THREADS + tid, acc[e]);
  __threadfence();
  __syncthreads();
  if (tid == 0) {
    unsigned *counter = (unsigned *)p.counters + slot;
    unsigned ticket = atomicAdd(counter, 1u);
    last_block = ticket == (unsigned)p.split_k - 1;
    if (last_block)
      atomicExch(counter, 0u);
  }
  __syncthreads();
  if (!last_block)
    return false;
  __threadfence();
#pragma unroll
  for (int e = 0; e < ACC; e++)
    acc[e] = 0.0f;
  for (int s = 0; s < p.split_k; s++) {
    const float *slice = slices + (int64_t)s * (ACC * THREADS);
#pragma unroll
    for (int e = 0; e < ACC; e++)
      acc[e] += __ldcg(slice + e * THREADS + tid);
  }
  return true;
}

/* T: tsr_bf16, tsr_f16, or float (tf32). */
template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES>
TSR_DEVICE void gemm_tc_body(const gemm_params &p) {
  constexpr bool TF32 = sizeof(T) == 4;
  typedef typename std::conditional<TF32, uint32_t, uint16_t>::type S;
  constexpr int THREADS = WM * WN * 32;
  constexpr int PAD_K = TF32 ? 4 : 8, PAD_MN = 8;
  constexpr int A_STAGE = TSR_GPU_GEMM_STAGE_ELEMS(BM, BK, PAD_K, PAD_MN);
  constexpr int B_STAGE = TSR_GPU_GEMM_STAGE_ELEMS(BN, BK, PAD_K, PAD_MN);
  constexpr int WTM = BM / WM, WTN = BN / WN;
  constexpr int MT = WTM / 16, NT = WTN / 8;
  static_assert(NT % 2 == 0, "warp tiles cover pairs of 8-column mma tiles");

  extern __shared__ __align__(16) unsigned char smem_raw[];
  S *a_stages = (S *)smem_raw;
  S *b_stages = a_stages + STAGES * A_STAGE;

  gemm_tile t;
  resolve_tile(p, BM, BN, t);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp / WN, warp_n = warp % WN;
  const bool a_k_major = p.a_k_major != 0, b_k_major = p.b_k_major != 0;
  const bool a_async = p.a_async != 0, b_async = p.b_async != 0;
  const S *a_src = (const S *)t.a, *b_src = (const S *)t.b;
  /* Split over K (blockIdx.z is the slice): k_per_split is a multiple of BK. */
  const int64_t k_tiles_all = (p.k + BK - 1) / BK;
  int64_t kt_first = 0, k_tiles = k_tiles_all;
  if (p.split_k > 1) {
    kt_first = (int64_t)blockIdx.z * (p.k_per_split / BK);
    k_tiles =
        k_tiles_all - kt_first < p.k_per_split / BK ? k_tiles_all - kt_first : p.k_per_split / BK;
  }

  float acc[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; i++)
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
      for (int e = 0; e < 4; e++)
        acc[i][j][e] = 0.0f;

  auto load_stage = [&](int stage, int64_t k_tile) {
    int64_t k0 = (kt_first + k_tile) * BK;
    load_operand<S, BM, BK, THREADS, PAD_K, PAD_MN>(a_stages + stage * A_STAGE, a_src, t.m, p.k,
                                                    p.a_m, p.a_k, t.m0, k0, a_k_major, a_async,
                                                    tid);
    load_operand<S, BN, BK, THREADS, PAD_K, PAD_MN>(b_stages + stage * B_STAGE, b_src, p.n, p.k,
                                                    p.b_n, p.b_k, t.n0, k0, b_k_major, b_async,
                                                    tid);
  };

#if TSR_GPU_HAS_MMA_SYNC
#pragma unroll
  for (int s = 0; s < STAGES - 1; s++) {
    if (s < k_tiles)
      load_stage(s, s);
    tsr_cp_async_commit();
  }

  for (int64_t kt = 0; kt < k_tiles; kt++) {
    tsr_cp_async_wait<STAGES - 2>();
    __syncthreads();
    int64_t next = kt + STAGES - 1;
    if (next < k_tiles)
      load_stage((int)(next % STAGES), next);
    tsr_cp_async_commit();

    const S *as = a_stages + (kt % STAGES) * A_STAGE;
    const S *bs = b_stages + (kt % STAGES) * B_STAGE;
    if constexpr (!TF32) {
#pragma unroll
      for (int kk = 0; kk < BK; kk += 16) {
        uint32_t af[MT][4], bf[NT][2];
        const int mat = lane >> 3, r8 = lane & 7;
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
          int row0 = warp_m * WTM + mt * 16;
          if (a_k_major)
            tsr_ldmatrix_x4(af[mt],
                            as + (row0 + (lane & 15)) * (BK + PAD_K) + kk + (lane >> 4) * 8);
          else
            tsr_ldmatrix_x4_trans(af[mt], as + (kk + r8 + (mat >> 1) * 8) * (BM + PAD_MN) + row0 +
                                              (mat & 1) * 8);
        }
#pragma unroll
        for (int np = 0; np < NT / 2; np++) {
          int col0 = warp_n * WTN + np * 16;
          uint32_t r4[4];
          if (b_k_major)
            tsr_ldmatrix_x4(r4,
                            bs + (col0 + r8 + (mat >> 1) * 8) * (BK + PAD_K) + kk + (mat & 1) * 8);
          else
            tsr_ldmatrix_x4_trans(r4, bs + (kk + r8 + (mat & 1) * 8) * (BN + PAD_MN) + col0 +
                                          (mat >> 1) * 8);
          bf[2 * np][0] = r4[0];
          bf[2 * np][1] = r4[1];
          bf[2 * np + 1][0] = r4[2];
          bf[2 * np + 1][1] = r4[3];
        }
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
          for (int nt = 0; nt < NT; nt++)
            tsr_mma_16816<T>(acc[mt][nt], af[mt], bf[nt]);
      }
    } else {
      const float *af32 = (const float *)as, *bf32 = (const float *)bs;
      const int g = lane >> 2, q = lane & 3;
#pragma unroll
      for (int kk = 0; kk < BK; kk += 8) {
        uint32_t af[MT][4], bf[NT][2];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
          int r0 = warp_m * WTM + mt * 16;
#pragma unroll
          for (int e = 0; e < 4; e++) {
            int r = r0 + g + (e & 1) * 8, k = kk + q + (e >> 1) * 4;
            float v = a_k_major ? af32[r * (BK + PAD_K) + k] : af32[k * (BM + PAD_MN) + r];
            af[mt][e] = tsr_to_tf32(v);
          }
        }
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
          int c = warp_n * WTN + nt * 8 + g;
#pragma unroll
          for (int e = 0; e < 2; e++) {
            int k = kk + q + e * 4;
            float v = b_k_major ? bf32[c * (BK + PAD_K) + k] : bf32[k * (BN + PAD_MN) + c];
            bf[nt][e] = tsr_to_tf32(v);
          }
        }
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
          for (int nt = 0; nt < NT; nt++)
            tsr_mma_1688_tf32(acc[mt][nt], af[mt], bf[nt]);
      }
    }
  }
  tsr_cp_async_wait<0>();
#else
  /* Built only for GPUs with mma.sync (the host never selects these kernels
   * elsewhere). */
  (void)load_stage;
  (void)k_tiles;
  __trap();
#endif

  if (p.split_k > 1 && !splitk_gather<MT * NT * 4, THREADS>(p, &acc[0][0][0], tid))
    return;
  const int g = lane >> 2, q = lane & 3;
#pragma unroll
  for (int mt = 0; mt < MT; mt++) {
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
      int64_t row = t.m0 + warp_m * WTM + mt * 16 + g;
      int64_t col = t.n0 + warp_n * WTN + nt * 8 + 2 * q;
      epilogue_pair(p, t, row, col, acc[mt][nt][0], acc[mt][nt][1]);
      epilogue_pair(p, t, row + 8, col, acc[mt][nt][2], acc[mt][nt][3]);
    }
  }
}

/* ------------------------------------------------------------------------ */
/* True f32 GEMM (SIMT)                                                      */
/* ------------------------------------------------------------------------ */

/* 128x128 tiles, 16 deep, 8x8 outputs a thread. Each K slice goes to
 * shared memory ([k][row] for both operands), double-buffered, one barrier a
 * slice: cp.async of 16 bytes where the tile lies inside the matrices and the
 * operand's rows are unit-stride and aligned; K-contiguous rows through
 * registers (16-byte loads, transposed by 4 scalar stores after the slice's
 * products); anything else element by element with 4-byte cp.async, zero-
 * filled outside the matrices. With only the K-contiguous rows' next slice
 * in registers a thread fits 128 registers (some spilled), so two blocks
 * share an SM (the _b2 kernel): with one block and the whole next slice in
 * registers (255) each scheduler had two warps and issued on 69% of cycles
 * (ncu: fixed-latency and dispatch stalls unhidden;
 * docs/PERFORMANCE.md). */
struct simt_operand {
  const float *base;
  int64_t rows, stride_r, stride_k; /* rows: M of A or N of B */
  bool vec_r;                       /* 16-byte copies along rows (unit row stride, aligned) */
  bool vec_k; /* 16-byte loads along k (unit k stride, aligned): through registers */
};

/* K-contiguous rows inside the matrices: 16-byte loads into registers, 4
 * scalar shared stores after the slice's products (the transpose). */
TSR_DEVICE bool simt_k_rows(const simt_operand &o, int64_t r0, int64_t k0, int64_t depth, int bk) {
  return o.vec_k && r0 + 128 <= o.rows && k0 + bk <= depth;
}
template <int BK>
TSR_DEVICE void simt_load(const simt_operand &o, int64_t r0, int64_t k0, int tid, float4 (&v)[2]) {
#pragma unroll
  for (int j = 0; j < 2; j++) {
    const int i = tid + j * 256, r = i / (BK / 4), kk = (i % (BK / 4)) * 4;
    v[j] = *(const float4 *)(o.base + (r0 + r) * o.stride_r + (k0 + kk));
  }
}
template <int BK, int PITCH>
TSR_DEVICE void simt_store(float (*tile)[PITCH], int tid, const float4 (&v)[2]) {
#pragma unroll
  for (int j = 0; j < 2; j++) {
    const int i = tid + j * 256, r = i / (BK / 4), kk = (i % (BK / 4)) * 4;
    tile[kk][r] = v[j].x;
    tile[kk + 1][r] = v[j].y;
    tile[kk + 2][r] = v[j].z;
    tile[kk + 3][r] = v[j].w;
  }
}

template <int BK, int PITCH>
TSR_DEVICE void simt_fetch(const simt_operand &o, float (*tile)[PITCH], int64_t r0, int64_t k0,
                           int64_t depth, int tid, bool via_registers = false) {
  constexpr int R = 128, THREADS = 256;
  if (o.vec_r && r0 + R <= o.rows && k0 + BK <= depth) {
#pragma unroll
    for (int j = 0; j < R * BK / 4 / THREADS; j++) { /* 4 consecutive rows at one k */
      const int i = tid + j * THREADS, kk = i / (R / 4), r = (i % (R / 4)) * 4;
      tsr_cp_async16(&tile[kk][r], o.base + (r0 + r) + (k0 + kk) * o.stride_k, 16);
    }
    return;
  }
  if (via_registers)
    return; /* simt_load / simt_store move this slice */
  /* Element by element: a warp covers 32 consecutive elements along the
   * operand's unit stride (rows when the row stride is 1, else k). */
  const bool rows_fast = o.stride_r == 1;
#pragma unroll
  for (int j = 0; j < R * BK / THREADS; j++) {
    const int i = tid + j * THREADS;
    const int r = rows_fast ? i % R : i / BK, kk = rows_fast ? i / R : i % BK;
    const int64_t gr = r0 + r, gk = k0 + kk;
    const bool in = gr < o.rows && gk < depth;
    tsr_cp_async4(&tile[kk][r], in ? o.base + gr * o.stride_r + gk * o.stride_k : o.base,
                  in ? 4 : 0);
  }
}

TSR_DEVICE void gemm_simt16_body(const gemm_params &p) {
  constexpr int BK = 16, PITCH = 132;
  __shared__ __align__(16) float a_tile[2][BK][PITCH];
  __shared__ __align__(16) float b_tile[2][BK][PITCH];
  gemm_tile t;
  resolve_tile(p, 128, 128, t);
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const bool a_base16 = ((uintptr_t)t.a & 15) == 0, b_base16 = ((uintptr_t)t.b & 15) == 0;
  simt_operand a = {(const float *)t.a, t.m, p.a_m, p.a_k, false, false};
  a.vec_r = a_base16 && p.a_m == 1 && p.a_k != 1 && (p.a_k & 3) == 0;
  a.vec_k = a_base16 && !a.vec_r && p.a_k == 1 && (p.a_m & 3) == 0;
  simt_operand b = {(const float *)t.b, p.n, p.b_n, p.b_k, false, false};
  b.vec_r = b_base16 && p.b_n == 1 && p.b_k != 1 && (p.b_k & 3) == 0;
  b.vec_k = b_base16 && !b.vec_r && p.b_k == 1 && (p.b_n & 3) == 0;
  const int64_t k_tiles = (p.k + BK - 1) / BK;

  float acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; i++)
#pragma unroll
    for (int j = 0; j < 8; j++)
      acc[i][j] = 0.0f;

  float4 a_next[2], b_next[2];
  if (k_tiles > 0) {
    const bool a_regs = simt_k_rows(a, t.m0, 0, p.k, BK), b_regs = simt_k_rows(b, t.n0, 0, p.k, BK);
    if (a_regs) {
      simt_load<BK>(a, t.m0, 0, tid, a_next);
      simt_store<BK, PITCH>(a_tile[0], tid, a_next);
    }
    if (b_regs) {
      simt_load<BK>(b, t.n0, 0, tid, b_next);
      simt_store<BK, PITCH>(b_tile[0], tid, b_next);
    }
    simt_fetch<BK, PITCH>(a, a_tile[0], t.m0, 0, p.k, tid, a_regs);
    simt_fetch<BK, PITCH>(b, b_tile[0], t.n0, 0, p.k, tid, b_regs);
  }
  tsr_cp_async_commit();
  tsr_cp_async_wait<0>();
  __syncthreads();
  for (int64_t kt = 0; kt < k_tiles; kt++) {
    const int buffer = (int)(kt & 1);
    /* The other buffer was last read in the previous slice, before the
     * barrier that ended it. */
    bool a_regs = false, b_regs = false;
    if (kt + 1 < k_tiles) {
      const int64_t k1 = (kt + 1) * BK;
      a_regs = simt_k_rows(a, t.m0, k1, p.k, BK);
      b_regs = simt_k_rows(b, t.n0, k1, p.k, BK);
      if (a_regs)
        simt_load<BK>(a, t.m0, k1, tid, a_next);
      if (b_regs)
        simt_load<BK>(b, t.n0, k1, tid, b_next);
      simt_fetch<BK, PITCH>(a, a_tile[buffer ^ 1], t.m0, k1, p.k, tid, a_regs);
      simt_fetch<BK, PITCH>(b, b_tile[buffer ^ 1], t.n0, k1, p.k, tid, b_regs);
    }
    tsr_cp_async_commit();
#pragma unroll
    for (int kk = 0; kk < BK; kk++) {
      float4 a0 = *(const float4 *)&a_tile[buffer][kk][ty * 4];
      float4 a1 = *(const float4 *)&a_tile[buffer][kk][64 + ty * 4];
      float4 b0 = *(const float4 *)&b_tile[buffer][kk][tx * 4];
      float4 b1 = *(const float4 *)&b_tile[buffer][kk][64 + tx * 4];
      float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 8; j++)
          acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    if (a_regs)
      simt_store<BK, PITCH>(a_tile[buffer ^ 1], tid, a_next);
    if (b_regs)
      simt_store<BK, PITCH>(b_tile[buffer ^ 1], tid, b_next);
    tsr_cp_async_wait<0>();
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < 8; i++) {
    int64_t row = t.m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
#pragma unroll
    for (int j = 0; j < 8; j += 2) {
      int64_t col = t.n0 + (j < 4 ? tx * 4 + j : 64 + tx * 4 + j - 4);
      epilogue_pair(p, t, row, col, acc[i][j], acc[i][j + 1]);
    }
  }
}

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
  __trap();
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
      for (int i = y; i < 32; i += 8) {
        int rr = rows_fast ? x : i, kk = rows_fast ? i : x;
        int64_t gr = r0 + rr, gk = k0 + kk;
        S v = 0;
        if (gr < p.rows && gk < p.depth)
          v = src[b * p.src_batch + gr * p.src_row + gk * p.src_k];
        tile[rr][kk] = v;
      }
      __syncthreads();
#pragma unroll
      for (int i = y; i < 32; i += 8) {
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

/* ------------------------------------------------------------------------ */
/* Kernels                                                                   */
/* ------------------------------------------------------------------------ */

#define TSR_DEFINE_GEMM_MMA(dt, T, BM, BN, BK, WM, WN, S)                                          \
  TSR_KERNEL void __launch_bounds__(WM *WN * 32)                                                   \
      tsr_gemm_mma_##dt##_##BM##x##BN##x##BK##_w##WM##x##WN##_s##S(TSR_PARAMS(tsr_gpu_gemm_params) \
                                                                       p) {                        \
    gemm_tc_body<T, BM, BN, BK, WM, WN, S>(p);                                                     \
  }
#define TSR_DEFINE_GEMM_MMA_BOTH(BM, BN, BK, WM, WN, S)                                            \
  TSR_DEFINE_GEMM_MMA(bf16, tsr_bf16, BM, BN, BK, WM, WN, S)                                       \
  TSR_DEFINE_GEMM_MMA(f16, tsr_f16, BM, BN, BK, WM, WN, S)
TSR_GEMM_MMA_CONFIGS(TSR_DEFINE_GEMM_MMA_BOTH)

#define TSR_DEFINE_GEMM_TF32(BM, BN, BK, WM, WN, S)                                                \
  TSR_KERNEL void __launch_bounds__(WM *WN * 32)                                                   \
      tsr_gemm_tf32_##BM##x##BN##x##BK##_w##WM##x##WN##_s##S(TSR_PARAMS(tsr_gpu_gemm_params) p) {  \
    gemm_tc_body<float, BM, BN, BK, WM, WN, S>(p);                                                 \
  }
TSR_GEMM_TF32_CONFIGS(TSR_DEFINE_GEMM_TF32)

/* One block an SM (207 registers, no spills) for problems of few tiles, two
 * (128 registers, a few spilled) where the tiles fill the SMs many times. */
TSR_KERNEL void __launch_bounds__(256, 1)
    tsr_gemm_simt_f32_128x128x16(TSR_PARAMS(tsr_gpu_gemm_params) p) {
  gemm_simt16_body(p);
}
TSR_KERNEL void __launch_bounds__(256, 2)
    tsr_gemm_simt_f32_128x128x16_b2(TSR_PARAMS(tsr_gpu_gemm_params) p) {
  gemm_simt16_body(p);
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
TSR_GEMM_STREAM_CONFIGS(TSR_DEFINE_GEMM_STREAM_BOTH)

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
