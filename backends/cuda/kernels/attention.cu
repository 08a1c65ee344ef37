/* Attention forward, flash-style: scores are made and consumed a tile at a
 * time with an online softmax, so nothing of size Sq x Skv reaches global
 * memory.
 *
 * - tsr_attention_flash_<dt>_d<DP>: bf16/f16 on tensor cores (mma.sync).
 *   A block owns 64 query rows of one (batch, head); each of its 4 warps owns
 *   16 rows. Key/value tiles of BKV rows stream through shared memory with
 *   cp.async (double-buffered where it fits); S = Q K^T and O += P V are
 *   m16n8k16 products, P going from the S accumulators to A fragments in
 *   registers. Head dims up to DP (multiples of 8) are zero-padded to DP.
 * - tsr_attention_generic_<dt>: any dtype, head dim and strides, f32 math on
 *   CUDA cores; a warp per query row, key/value tiles shared by the block.
 * Masks: query row i sits at key position i + Skv - Sq; key j is visible when
 * j >= pos - window_left and j <= pos + window_right (each bound only when
 * >= 0). Rows that see no key get o = 0 and lse = -inf. */
#include "gpu_portability.h"
#include "kernel_list.h"
#include "kernel_params.h"

namespace {

typedef tsr_gpu_attention_params attention_params;

const float kLn2 = 0.6931471805599453f;

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

template <typename T, int DP, int BKV, int KV_STAGES, bool Q_REGS>
TSR_DEVICE void flash_body(const attention_params &p) {
  constexpr int BQ = TSR_GPU_FLASH_BQ, PITCH = DP + TSR_GPU_FLASH_PAD, THREADS = 128;
  constexpr int DK = DP / 16, NT_S = BKV / 8, NT_O = DP / 8, CHUNKS = DP / 8;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  uint16_t *q_tile = (uint16_t *)smem_raw;
  uint16_t *k_tiles = q_tile + BQ * PITCH;
  uint16_t *v_tiles = k_tiles + KV_STAGES * BKV * PITCH;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, q4 = lane & 3;
  const int mat = lane >> 3, r8 = lane & 7;
  const int64_t q0 = (int64_t)blockIdx.x * BQ, head = blockIdx.y, batch = blockIdx.z;
  const int64_t kv_head = head / p.group;
  const int64_t seq_q = p.seq_q, seq_kv = p.seq_kv, dim = p.head_dim;
  const uint16_t *q_base = (const uint16_t *)p.q + batch * p.q_b + head * p.q_h;
  const uint16_t *k_base = (const uint16_t *)p.k + batch * p.k_b + kv_head * p.k_h;
  const uint16_t *v_base = (const uint16_t *)p.v + batch * p.v_b + kv_head * p.v_h;

  int64_t q_last = (q0 + BQ < seq_q ? q0 + BQ : seq_q) - 1;
  int64_t kv_lo, kv_hi;
  key_range(p, q0, q_last, &kv_lo, &kv_hi);
  const int64_t first_tile = kv_lo / BKV;
  const int64_t tile_count = kv_hi > kv_lo ? (kv_hi - first_tile * BKV + BKV - 1) / BKV : 0;

#if TSR_GPU_HAS_MMA_SYNC
  for (int i = tid; i < BQ * CHUNKS; i += THREADS) {
    int r = i / CHUNKS, c = (i % CHUNKS) * 8;
    int64_t row = q0 + r;
    int valid = 0;
    const uint16_t *from = q_base;
    if (row < seq_q && c < dim) {
      valid = (dim - c >= 8 ? 8 : (int)(dim - c)) * 2;
      from = q_base + row * p.q_s + c;
    }
    tsr_cp_async16(q_tile + r * PITCH + c, from, valid);
  }
  auto load_kv = [&](int stage, int64_t tile) {
    int64_t kv0 = tile * BKV;
    uint16_t *ks = k_tiles + stage * BKV * PITCH, *vs = v_tiles + stage * BKV * PITCH;
    for (int i = tid; i < BKV * CHUNKS; i += THREADS) {
      int r = i / CHUNKS, c = (i % CHUNKS) * 8;
      int64_t key = kv0 + r;
      int valid = 0;
      const uint16_t *k_from = k_base, *v_from = v_base;
      if (key < seq_kv && c < dim) {
        valid = (dim - c >= 8 ? 8 : (int)(dim - c)) * 2;
        k_from = k_base + key * p.k_s + c;
        v_from = v_base + key * p.v_s + c;
      }
      tsr_cp_async16(ks + r * PITCH + c, k_from, valid);
      tsr_cp_async16(vs + r * PITCH + c, v_from, valid);
    }
  };
  if (tile_count > 0)
    load_kv(0, first_tile);
  tsr_cp_async_commit();

  float o[NT_O][4];
#pragma unroll
  for (int i = 0; i < NT_O; i++)
#pragma unroll
    for (int e = 0; e < 4; e++)
      o[i][e] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};
  uint32_t q_frag[Q_REGS ? DK : 1][4];

  const int64_t shift = seq_kv - seq_q;
  const int64_t row0 = q0 + warp * 16 + g;
  const int pos[2] = {(int)(row0 + shift), (int)(row0 + 8 + shift)};
  const int window_left = p.window_left < 0 ? -1 : (int)p.window_left;
  const int window_right = p.window_right < 0 ? -1 : (int)p.window_right;

  for (int64_t it = 0; it < tile_count; it++) {
    tsr_cp_async_wait<0>();
    __syncthreads();
    if (Q_REGS && it == 0) {
#pragma unroll
      for (int ks = 0; ks < (Q_REGS ? DK : 0); ks++)
        tsr_ldmatrix_x4(q_frag[ks],
                        q_tile + (warp * 16 + (lane & 15)) * PITCH + ks * 16 + (lane >> 4) * 8);
    }
    const int stage = KV_STAGES == 2 ? (int)(it & 1) : 0;
    if (KV_STAGES == 2 && it + 1 < tile_count)
      load_kv((int)((it + 1) & 1), first_tile + it + 1);
    tsr_cp_async_commit();
    const uint16_t *ks = k_tiles + stage * BKV * PITCH, *vs = v_tiles + stage * BKV * PITCH;

    float s[NT_S][4];
#pragma unroll
    for (int i = 0; i < NT_S; i++)
#pragma unroll
      for (int e = 0; e < 4; e++)
        s[i][e] = 0.0f;
#pragma unroll
    for (int kd = 0; kd < DK; kd++) {
      uint32_t a[4];
      if (Q_REGS) {
#pragma unroll
        for (int e = 0; e < 4; e++)
          a[e] = q_frag[Q_REGS ? kd : 0][e];
      } else {
        tsr_ldmatrix_x4(a, q_tile + (warp * 16 + (lane & 15)) * PITCH + kd * 16 + (lane >> 4) * 8);
      }
#pragma unroll
      for (int np = 0; np < NT_S / 2; np++) {
        uint32_t b[4];
        tsr_ldmatrix_x4(b, ks + (np * 16 + r8 + (mat >> 1) * 8) * PITCH + kd * 16 + (mat & 1) * 8);
        tsr_mma_16816<T>(s[2 * np], a, b);
        tsr_mma_16816<T>(s[2 * np + 1], a, b + 2);
      }
    }

    const int kv0 = (int)((first_tile + it) * BKV);
#pragma unroll
    for (int nt = 0; nt < NT_S; nt++) {
#pragma unroll
      for (int e = 0; e < 4; e++) {
        int key = kv0 + nt * 8 + 2 * q4 + (e & 1);
        int position = pos[e >> 1];
        bool visible = key < seq_kv && (window_left < 0 || key >= position - window_left) &&
                       (window_right < 0 || key <= position + window_right);
        s[nt][e] = visible ? s[nt][e] * p.scale_log2 : -INFINITY;
      }
    }
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < NT_S; nt++)
        tile_max = fmaxf(tile_max, fmaxf(s[nt][2 * rr], s[nt][2 * rr + 1]));
      tile_max = fmaxf(tile_max, TSR_SHFL_XOR(tile_max, 1));
      tile_max = fmaxf(tile_max, TSR_SHFL_XOR(tile_max, 2));
      float new_max = fmaxf(row_max[rr], tile_max);
      bool empty = new_max == -INFINITY;
      float rescale = empty ? 1.0f : exp2f(row_max[rr] - new_max);
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < NT_S; nt++) {
#pragma unroll
        for (int e = 2 * rr; e < 2 * rr + 2; e++) {
          float prob = empty ? 0.0f : exp2f(s[nt][e] - new_max);
          s[nt][e] = prob;
          sum += prob;
        }
      }
      row_sum[rr] = row_sum[rr] * rescale + sum;
      row_max[rr] = new_max;
#pragma unroll
      for (int dt = 0; dt < NT_O; dt++) {
        o[dt][2 * rr] *= rescale;
        o[dt][2 * rr + 1] *= rescale;
      }
    }

#pragma unroll
    for (int kk = 0; kk < BKV / 16; kk++) {
      uint32_t a[4];
      a[0] = tsr_pack2<T>(s[2 * kk][0], s[2 * kk][1]);
      a[1] = tsr_pack2<T>(s[2 * kk][2], s[2 * kk][3]);
      a[2] = tsr_pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      a[3] = tsr_pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
      for (int dp = 0; dp < NT_O / 2; dp++) {
        uint32_t b[4];
        tsr_ldmatrix_x4_trans(b, vs + (kk * 16 + r8 + (mat & 1) * 8) * PITCH + dp * 16 +
                                     (mat >> 1) * 8);
        tsr_mma_16816<T>(o[2 * dp], a, b);
        tsr_mma_16816<T>(o[2 * dp + 1], a, b + 2);
      }
    }
    if (KV_STAGES == 1 && it + 1 < tile_count) {
      __syncthreads();
      load_kv(0, first_tile + it + 1);
      tsr_cp_async_commit();
    }
  }
  tsr_cp_async_wait<0>();

#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    float total = row_sum[rr];
    total += TSR_SHFL_XOR(total, 1);
    total += TSR_SHFL_XOR(total, 2);
    int64_t row = row0 + rr * 8;
    if (row >= seq_q)
      continue;
    float inverse = total > 0.0f ? 1.0f / total : 0.0f;
    T *o_row = (T *)p.o + batch * p.o_b + head * p.o_h + row * p.o_s;
#pragma unroll
    for (int dt = 0; dt < NT_O; dt++) {
      int64_t col = dt * 8 + 2 * q4;
      if (col < dim) {
        float v0 = o[dt][2 * rr] * inverse, v1 = o[dt][2 * rr + 1] * inverse;
        T *dst = o_row + col * p.o_d;
        if (p.o_d == 1 && ((uintptr_t)dst & 3) == 0) {
          *(uint32_t *)dst = tsr_pack2<T>(v0, v1);
        } else {
          dst[0] = tsr_elem<T>::from_float(v0);
          dst[p.o_d] = tsr_elem<T>::from_float(v1);
        }
      }
    }
    if (p.has_lse && q4 == 0) {
      float lse = total > 0.0f ? (row_max[rr] + log2f(total)) * kLn2 : -INFINITY;
      ((float *)p.lse)[batch * p.lse_b + head * p.lse_h + row * p.lse_s] = lse;
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
      score = dot * p.scale_log2;
    }
    float new_max = fmaxf(running_max, tsr_warp_max(score));
    bool empty = new_max == -INFINITY;
    float rescale = empty ? 1.0f : exp2f(running_max - new_max);
    float prob = empty ? 0.0f : exp2f(score - new_max);
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
  float inverse = running_sum > 0.0f ? 1.0f / running_sum : 0.0f;
  T *o = (T *)p.o + batch * p.o_b + head * p.o_h + row * p.o_s;
  for (int d = lane; d < dim; d += 32)
    o[d * p.o_d] = tsr_elem<T>::from_float(o_rows[warp * dim + d] * inverse);
  if (p.has_lse && lane == 0)
    ((float *)p.lse)[batch * p.lse_b + head * p.lse_h + row * p.lse_s] =
        running_sum > 0.0f ? (running_max + log2f(running_sum)) * kLn2 : -INFINITY;
}

} /* namespace */

#if !defined(__HIPCC__)
#define TSR_DEFINE_FLASH_DTYPE(dt, T, DP, BKV, STAGES, QREGS)                                      \
  TSR_KERNEL void __launch_bounds__(128)                                                           \
      tsr_attention_flash_##dt##_d##DP(TSR_PARAMS(tsr_gpu_attention_params) p) {                   \
    flash_body<T, DP, BKV, STAGES, QREGS != 0>(p);                                                 \
  }
#define TSR_DEFINE_FLASH(DP, BKV, STAGES, QREGS)                                                   \
  TSR_DEFINE_FLASH_DTYPE(bf16, tsr_bf16, DP, BKV, STAGES, QREGS)                                   \
  TSR_DEFINE_FLASH_DTYPE(f16, tsr_f16, DP, BKV, STAGES, QREGS)
TSR_FLASH_CONFIGS(TSR_DEFINE_FLASH)
#endif

#define TSR_DEFINE_ATTN_GENERIC(dt, T)                                                             \
  TSR_KERNEL void __launch_bounds__(128)                                                           \
      tsr_attention_generic_##dt(TSR_PARAMS(tsr_gpu_attention_params) p) {                         \
    attention_generic_body<T>(p);                                                                  \
  }
TSR_DTYPES_ALL(TSR_DEFINE_ATTN_GENERIC)
