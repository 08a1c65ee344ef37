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
 * - M <= 16 (GEMV, the decode kernels) and operand packing: gemv.cu.
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
    TSR_STORE_CG(mine + e * THREADS + tid, acc[e]);
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
      acc[e] += TSR_LOAD_CG(slice + e * THREADS + tid);
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
  TSR_TRAP();
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

} /* namespace */

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
#if TSR_GPU_NVIDIA_KERNELS
TSR_GEMM_MMA_CONFIGS(TSR_DEFINE_GEMM_MMA_BOTH)
#endif

#define TSR_DEFINE_GEMM_TF32(BM, BN, BK, WM, WN, S)                                                \
  TSR_KERNEL void __launch_bounds__(WM *WN * 32)                                                   \
      tsr_gemm_tf32_##BM##x##BN##x##BK##_w##WM##x##WN##_s##S(TSR_PARAMS(tsr_gpu_gemm_params) p) {  \
    gemm_tc_body<float, BM, BN, BK, WM, WN, S>(p);                                                 \
  }
#if TSR_GPU_NVIDIA_KERNELS
TSR_GEMM_TF32_CONFIGS(TSR_DEFINE_GEMM_TF32)
#endif

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
