/* SPDX-License-Identifier: Apache-2.0 */
/* Row ops: RMSNorm (+ residual add), LayerNorm, softmax, cross entropy.
 * One block per row (grid-stride over rows).
 * Register path (regs: 16-byte accessible rows of a multiple of 8 (16-bit)
 * or 4 (f32) elements, at most TSR_GPU_ROW_REGS per thread): each thread
 * loads its 16-byte chunks of the row (chunk j * threads + t) into
 * registers, all loads issued before the first use; the statistics are
 * warp shuffles plus one shared-memory exchange per reduction; the output
 * is written from the registers with streaming stores. One read and one
 * write of the row, nothing through shared memory.
 * Otherwise (strided or long rows) rows are read once: the row,
 * in f32, stays in the block's shared memory between the statistics pass
 * and the output pass when it fits (cache_row), and is read again from
 * global memory otherwise. Accesses are 16 bytes wide when every row tensor
 * has a unit row stride and 16-byte aligned rows (vec); math is f32. */
#include "gpu_portability.h"
#include "kernel_list.h"
#include "kernel_params.h"

namespace {

typedef tsr_gpu_rows_params rows_params;

/* The largest finite f32: a sum of squares above it overflowed. */
const float kFloatMax = 3.40282347e38f;

TSR_DEVICE int64_t row_offset(const int64_t *lead, const int64_t *strides, int64_t row) {
  int64_t i2 = row % lead[2];
  row /= lead[2];
  int64_t i1 = row % lead[1];
  int64_t i0 = row / lead[1];
  return i0 * strides[0] + i1 * strides[1] + i2 * strides[2];
}

/* Sum over the block (blockDim.x a multiple of 32); every thread gets it. */
TSR_DEVICE float block_sum(float v, float *scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = tsr_warp_sum(v);
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  v = (int)threadIdx.x < warps ? scratch[threadIdx.x] : 0.0f;
  if (warp == 0)
    v = tsr_warp_sum(v);
  if (threadIdx.x == 0)
    scratch[0] = v;
  __syncthreads();
  v = scratch[0];
  __syncthreads();
  return v;
}

/* Running (max of x, sum of exp((x - max) * scale)) pairs, merged without
 * overflow; scale is positive (softmax's; 1 for cross entropy). Subtracting
 * before scaling keeps the max's own term exactly 1 at any scale. A NaN
 * value makes the sum NaN (also while the max is still -inf); a +inf max
 * is left to the caller. */
struct max_sum {
  float max, sum;
};
TSR_DEVICE max_sum merge(max_sum a, max_sum b, float scale) {
  float m = fmaxf(a.max, b.max);
  if (m == -INFINITY)
    return {m, a.sum + b.sum};
  return {m, a.sum * expf((a.max - m) * scale) + b.sum * expf((b.max - m) * scale)};
}
TSR_DEVICE max_sum add_value(max_sum a, float x, float scale) {
  if (x == -INFINITY)
    return a;
  if (x > a.max)
    return {x, a.sum * expf((a.max - x) * scale) + 1.0f};
  return {a.max, a.sum + expf((x - a.max) * scale)};
}
TSR_DEVICE max_sum block_max_sum(max_sum v, float *scratch, float scale) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
#pragma unroll
  for (int mask = 16; mask > 0; mask >>= 1) {
    max_sum other = {TSR_SHFL_XOR(v.max, mask), TSR_SHFL_XOR(v.sum, mask)};
    v = merge(v, other, scale);
  }
  if (lane == 0) {
    scratch[2 * warp] = v.max;
    scratch[2 * warp + 1] = v.sum;
  }
  __syncthreads();
  if (warp == 0) {
    max_sum w = {-INFINITY, 0.0f};
    if (lane < warps)
      w = {scratch[2 * lane], scratch[2 * lane + 1]};
#pragma unroll
    for (int mask = 16; mask > 0; mask >>= 1) {
      max_sum other = {TSR_SHFL_XOR(w.max, mask), TSR_SHFL_XOR(w.sum, mask)};
      w = merge(w, other, scale);
    }
    if (lane == 0) {
      scratch[0] = w.max;
      scratch[1] = w.sum;
    }
  }
  __syncthreads();
  v = {scratch[0], scratch[1]};
  __syncthreads();
  return v;
}

/* ---- register path ---- */

/* Sum / max over the block (blockDim.x a multiple of the warp); every
 * thread gets the result. One shared exchange; `scratch` holds a slot per
 * warp and may be reused after the call (the trailing barrier). */
TSR_DEVICE float block_reduce_sum(float v, float *scratch) {
  const int lane = threadIdx.x % TSR_GPU_WARP, warp = threadIdx.x / TSR_GPU_WARP;
  const int warps = blockDim.x / TSR_GPU_WARP;
  v = tsr_warp_sum(v);
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < warps; w++)
    total += scratch[w];
  __syncthreads();
  return total;
}
TSR_DEVICE float block_reduce_max(float v, float *scratch) {
  const int lane = threadIdx.x % TSR_GPU_WARP, warp = threadIdx.x / TSR_GPU_WARP;
  const int warps = blockDim.x / TSR_GPU_WARP;
  v = tsr_warp_max(v);
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  float total = -INFINITY;
  for (int w = 0; w < warps; w++)
    total = fmaxf(total, scratch[w]);
  __syncthreads();
  return total;
}

/* 16 bytes from f32, stored with an evict-first hint (written once, not
 * read again by this kernel). */
template <typename T> TSR_DEVICE void store16_streaming(T *p, const float *in) {
#if defined(__HIPCC__)
  tsr_vec16<T>::store(p, in);
#else
  uint4 raw;
  tsr_vec16<T>::store(&raw, in);
  __stcs((uint4 *)p, raw);
#endif
}

/* A row's chunks held by one thread: chunk j is the row's 16-byte chunk
 * j * blockDim.x + threadIdx.x; `live` counts the chunks this thread has. */
template <typename T> struct row_regs {
  static constexpr int V = 16 / (int)sizeof(T);
  static constexpr int R = TSR_GPU_ROW_REGS / V;
  float v[R][V];
  __device__ __forceinline__ int64_t chunk(int j) const {
    return (int64_t)j * blockDim.x + threadIdx.x;
  }
  /* Loads x (+ residual) of the row; chunks past the row are `fill`. */
  __device__ __forceinline__ void load(const T *x, const T *res, int64_t chunks, float fill) {
    uint4 raw[R], raw_res[R];
#pragma unroll
    for (int j = 0; j < R; j++)
      if (chunk(j) < chunks) {
        raw[j] = *(const uint4 *)(x + chunk(j) * V);
        if (res)
          raw_res[j] = *(const uint4 *)(res + chunk(j) * V);
      }
#pragma unroll
    for (int j = 0; j < R; j++) {
      if (chunk(j) < chunks) {
        tsr_vec16<T>::load(&raw[j], v[j]);
        if (res) {
          float add[V];
          tsr_vec16<T>::load(&raw_res[j], add);
#pragma unroll
          for (int i = 0; i < V; i++)
            v[j][i] += add[i];
        }
      } else {
#pragma unroll
        for (int i = 0; i < V; i++)
          v[j][i] = fill;
      }
    }
  }
};

/* weight[e .. e + V) as f32 (1 where there is no weight). */
template <typename T>
TSR_DEVICE void weights_at(const rows_params &p, uint64_t base, int64_t stride, int64_t e, float *w,
                           float absent) {
  constexpr int V = 16 / (int)sizeof(T);
  if (!base) {
#pragma unroll
    for (int i = 0; i < V; i++)
      w[i] = absent;
  } else if (p.weight_vec) {
#if defined(__HIPCC__)
    uint4 raw = *(const uint4 *)((const T *)base + e);
#else
    uint4 raw = __ldg((const uint4 *)((const T *)base + e));
#endif
    tsr_vec16<T>::load(&raw, w);
  } else {
#pragma unroll
    for (int i = 0; i < V; i++)
      w[i] = tsr_load_any((const void *)base, p.weight_dtype, (e + i) * stride);
  }
}

/* Hides a value's origin from the compiler, so that what it computed from
 * the value before is recomputed after rather than kept in registers. */
TSR_DEVICE void opaque(uint4 &v) {
#if defined(__HIPCC__)
  __asm__ volatile("" : "+v"(v.x), "+v"(v.y), "+v"(v.z), "+v"(v.w));
#else
  asm volatile("" : "+r"(v.x), "+r"(v.y), "+r"(v.z), "+r"(v.w));
#endif
}

/* The squares of a row's finite values overflowed f32 (|h| past ~1e19;
 * the reference sums them in fp64): 1 / sqrt(mean(h^2) + eps) again from
 * `small`, the sum of (h * unit)^2 with unit = 1 / the row's largest |h|
 * (mean(h^2) = mean((h unit)^2) / unit^2). An infinite h keeps the factor
 * 0, as the reference has it (its output is NaN there, 0 elsewhere). */
TSR_DEVICE float rms_rescaled(float small, float unit, const rows_params &p) {
  return unit * rsqrtf(small / (float)p.n + p.eps * unit * unit);
}

/* RMSNorm keeps the row as loaded (16-byte raw chunks of x, and of the
 * residual when there is one; 16 registers each for 16-bit rows) and widens
 * it to f32 where it is used, so a 256-thread block fits in 64 registers
 * and 4 blocks (rows) share an SM. The weight is read after the reduction:
 * 16 KiB that every row reuses, served from L1. */
template <typename T> TSR_DEVICE void rmsnorm_regs(const rows_params &p) {
  constexpr int V = 16 / (int)sizeof(T), R = TSR_GPU_ROW_REGS / V;
  __shared__ float scratch[32];
  const int64_t chunks = p.n / V;
  const int threads = blockDim.x, t = threadIdx.x;
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    const T *x = (const T *)p.x + row_offset(p.lead, p.x_lead, r);
    const T *res =
        p.residual ? (const T *)p.residual + row_offset(p.lead, p.residual_lead, r) : nullptr;
    uint4 xr[R], rr[R];
#pragma unroll
    for (int j = 0; j < R; j++) {
      const int64_t c = (int64_t)j * threads + t;
      if (c < chunks) {
        xr[j] = *(const uint4 *)(x + c * V);
        if (res)
          rr[j] = *(const uint4 *)(res + c * V);
      }
    }
    /* h of chunk j in f32: x (+ residual). */
    auto widen = [&](int j, float *h) {
      tsr_vec16<T>::load(&xr[j], h);
      if (res) {
        float add[V];
        tsr_vec16<T>::load(&rr[j], add);
#pragma unroll
        for (int i = 0; i < V; i++)
          h[i] += add[i];
      }
    };
    T *res_out =
        p.residual_out ? (T *)p.residual_out + row_offset(p.lead, p.residual_out_lead, r) : nullptr;
    float squares = 0.0f;
#pragma unroll
    for (int j = 0; j < R; j++) {
      const int64_t c = (int64_t)j * threads + t;
      if (c < chunks) {
        float h[V];
        widen(j, h);
#pragma unroll
        for (int i = 0; i < V; i++)
          squares = fmaf(h[i], h[i], squares);
        if (res_out)
          store16_streaming<T>(res_out + c * V, h);
      }
    }
    const float total = block_reduce_sum(squares, scratch);
    float inverse_rms = rsqrtf(total / (float)p.n + p.eps);
    if (total > kFloatMax) {
      /* Block-uniform and cold: see rms_rescaled. */
      float big = 0.0f;
#pragma unroll
      for (int j = 0; j < R; j++)
        if ((int64_t)j * threads + t < chunks) {
          float h[V];
          widen(j, h);
#pragma unroll
          for (int i = 0; i < V; i++)
            big = fmaxf(big, fabsf(h[i]));
        }
      big = block_reduce_max(big, scratch);
      if (big <= kFloatMax) {
        const float unit = 1.0f / big;
        float small = 0.0f;
#pragma unroll
        for (int j = 0; j < R; j++)
          if ((int64_t)j * threads + t < chunks) {
            float h[V];
            widen(j, h);
#pragma unroll
            for (int i = 0; i < V; i++)
              small = fmaf(h[i] * unit, h[i] * unit, small);
          }
        inverse_rms = rms_rescaled(block_reduce_sum(small, scratch), unit, p);
      }
    }
    /* Widen again below rather than keep the f32 values of the first pass
     * alive (twice the registers): the compiler may not reuse them. */
#pragma unroll
    for (int j = 0; j < R; j++) {
      opaque(xr[j]);
      if (res)
        opaque(rr[j]);
    }
    T *y = (T *)p.y + row_offset(p.lead, p.y_lead, r);
#pragma unroll
    for (int j = 0; j < R; j++) {
      const int64_t c = (int64_t)j * threads + t;
      if (c < chunks) {
        float h[V], w[V];
        weights_at<T>(p, p.weight, p.weight_stride, c * V, w, 1.0f);
        widen(j, h);
#pragma unroll
        for (int i = 0; i < V; i++)
          h[i] = h[i] * inverse_rms * w[i];
        store16_streaming<T>(y + c * V, h);
      }
    }
  }
}

template <typename T> TSR_DEVICE void layernorm_regs(const rows_params &p) {
  constexpr int V = row_regs<T>::V, R = row_regs<T>::R;
  __shared__ float scratch[32];
  const int64_t chunks = p.n / V;
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    const T *x = (const T *)p.x + row_offset(p.lead, p.x_lead, r);
    T *y = (T *)p.y + row_offset(p.lead, p.y_lead, r);
    row_regs<T> h;
    h.load(x, nullptr, chunks, 0.0f);
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < R; j++)
#pragma unroll
      for (int i = 0; i < V; i++)
        sum += h.v[j][i];
    const float mean = block_reduce_sum(sum, scratch) / (float)p.n;
    float squares = 0.0f;
#pragma unroll
    for (int j = 0; j < R; j++)
      if (h.chunk(j) < chunks)
#pragma unroll
        for (int i = 0; i < V; i++)
          squares = fmaf(h.v[j][i] - mean, h.v[j][i] - mean, squares);
    const float total = block_reduce_sum(squares, scratch);
    float inverse_std = rsqrtf(total / (float)p.n + p.eps);
    if (total > kFloatMax) {
      /* As rmsnorm's, over x - mean (block-uniform, cold). */
      float big = 0.0f;
#pragma unroll
      for (int j = 0; j < R; j++)
        if (h.chunk(j) < chunks)
#pragma unroll
          for (int i = 0; i < V; i++)
            big = fmaxf(big, fabsf(h.v[j][i] - mean));
      big = block_reduce_max(big, scratch);
      if (big <= kFloatMax) {
        const float unit = 1.0f / big;
        float small = 0.0f;
#pragma unroll
        for (int j = 0; j < R; j++)
          if (h.chunk(j) < chunks)
#pragma unroll
            for (int i = 0; i < V; i++)
              small = fmaf((h.v[j][i] - mean) * unit, (h.v[j][i] - mean) * unit, small);
        inverse_std = rms_rescaled(block_reduce_sum(small, scratch), unit, p);
      }
    }
#pragma unroll
    for (int j = 0; j < R; j++) {
      if (h.chunk(j) >= chunks)
        continue;
      float w[V], b[V];
      weights_at<T>(p, p.weight, p.weight_stride, h.chunk(j) * V, w, 1.0f);
      weights_at<T>(p, p.bias, p.bias_stride, h.chunk(j) * V, b, 0.0f);
#pragma unroll
      for (int i = 0; i < V; i++)
        h.v[j][i] = (h.v[j][i] - mean) * inverse_std * w[i] + b[i];
      store16_streaming<T>(y + h.chunk(j) * V, h.v[j]);
    }
  }
}

template <typename T> TSR_DEVICE void softmax_regs(const rows_params &p) {
  constexpr int V = row_regs<T>::V, R = row_regs<T>::R;
  __shared__ float scratch[32];
  const int64_t chunks = p.n / V;
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    const T *x = (const T *)p.x + row_offset(p.lead, p.x_lead, r);
    T *y = (T *)p.y + row_offset(p.lead, p.y_lead, r);
    row_regs<T> h;
    h.load(x, nullptr, chunks, -INFINITY);
    /* The max of x, and exponents (x - max) * scale (scale is positive):
     * the max's own is exactly 0 at any scale, and nothing overflows where
     * x * scale would. */
    float top = -INFINITY;
#pragma unroll
    for (int j = 0; j < R; j++)
      if (h.chunk(j) < chunks)
#pragma unroll
        for (int i = 0; i < V; i++)
          top = fmaxf(top, h.v[j][i]);
    top = block_reduce_max(top, scratch);
    /* A fully masked row (max -inf) gives zeros, as the reference does. */
    const float shift = top == -INFINITY ? 0.0f : top;
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < R; j++)
      if (h.chunk(j) < chunks)
#pragma unroll
        for (int i = 0; i < V; i++) {
          h.v[j][i] = expf((h.v[j][i] - shift) * p.scale);
          sum += h.v[j][i];
        }
    sum = block_reduce_sum(sum, scratch);
    /* sum 0: all -inf (zeros). A NaN, or a +inf (inf - inf), makes it NaN
     * and so the whole row, as in the reference. */
    const float inverse = sum == 0.0f ? 0.0f : 1.0f / sum;
#pragma unroll
    for (int j = 0; j < R; j++) {
      if (h.chunk(j) >= chunks)
        continue;
#pragma unroll
      for (int i = 0; i < V; i++)
        h.v[j][i] *= inverse;
      store16_streaming<T>(y + h.chunk(j) * V, h.v[j]);
    }
  }
}

/* Cross entropy reads the row once and keeps nothing: each thread takes
 * batches of R of its 16-byte chunks (all loads in flight before the
 * first use; R = 8 with 128 threads, or in the _b4 kernels R = 4 with 256
 * threads and fewer registers, covers 8192 16-bit elements, a whole row of
 * that length), folds each batch into a running (max, sum of exp)
 * pair, and the block merges the pairs. Any row length. Thread 0 reads the
 * target and the target's logit while the row is in flight, so the loss
 * costs no dependent memory round trips after the reduction. */
/* The largest of the 16 bytes' elements, as f32. 16-bit pairs compare as
 * pairs (one max for two elements, exact: no rounding in a max) where the
 * hardware has it. */
template <typename T> TSR_DEVICE float max16(const uint4 &raw) {
#if TSR_GPU_HAS_MMA_SYNC
  if constexpr (sizeof(T) == 2) {
    typedef
        typename std::conditional<std::is_same<T, tsr_bf16>::value, __nv_bfloat162, __half2>::type
            pair;
    const pair *w = (const pair *)&raw;
    pair m = __hmax2(__hmax2(w[0], w[1]), __hmax2(w[2], w[3]));
    const T *h = (const T *)&m;
    return fmaxf(tsr_elem<T>::to_float(h[0]), tsr_elem<T>::to_float(h[1]));
  }
#endif
  constexpr int V = 16 / (int)sizeof(T);
  float v[V], top = -INFINITY;
  tsr_vec16<T>::load(&raw, v);
#pragma unroll
  for (int i = 0; i < V; i++)
    top = fmaxf(top, v[i]);
  return top;
}

template <typename T, int R> TSR_DEVICE void cross_entropy_regs(const rows_params &p) {
  constexpr int V = 16 / (int)sizeof(T);
  __shared__ float scratch[64];
  const int64_t chunks = p.n / V;
  const int threads = blockDim.x, t = threadIdx.x;
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    const T *x = (const T *)p.x + row_offset(p.lead, p.x_lead, r);
    int64_t target = 0;
    if (t == 0)
      target = ((const int32_t *)p.targets)[r * p.targets_stride];
    float picked = 0.0f;
    bool first = true;
    max_sum running = {-INFINITY, 0.0f};
    for (int64_t base = t; base < chunks; base += (int64_t)R * threads) {
      uint4 raw[R];
#pragma unroll
      for (int j = 0; j < R; j++)
        if (base + (int64_t)j * threads < chunks)
          raw[j] = *(const uint4 *)(x + (base + (int64_t)j * threads) * V);
      if (t == 0 && first && target >= 0 && target < p.n)
        picked = tsr_elem<T>::to_float(x[target]);
      first = false;
      float top = -INFINITY;
#pragma unroll
      for (int j = 0; j < R; j++)
        if (base + (int64_t)j * threads < chunks)
          top = fmaxf(top, max16<T>(raw[j]));
      if (top == -INFINITY)
        continue;
#pragma unroll
      for (int j = 0; j < R; j++)
        opaque(raw[j]);
      /* exp(v - top) as 2^(v log2 e - top log2 e): one FFMA and one
       * MUFU.EX2 per element. */
      const float log2e = 1.4426950408889634f, shift = -top * log2e;
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < R; j++)
        if (base + (int64_t)j * threads < chunks) {
          float v[V];
          tsr_vec16<T>::load(&raw[j], v);
#pragma unroll
          for (int i = 0; i < V; i++)
            sum += exp2f(fmaf(v[i], log2e, shift));
        }
      running = merge(running, {top, sum}, 1.0f);
    }
    const max_sum total = block_max_sum(running, scratch, 1.0f);
    if (t == 0) {
      const float lse = total.max + logf(total.sum);
      float loss;
      if (target == p.ignore_index) {
        loss = 0.0f;
      } else if (target < 0 || target >= p.n) {
        loss = NAN;
        atomicMin((int *)p.status, r < 0x7fffffff ? (int)r : 0x7fffffff);
      } else {
        /* A row shorter than one element per thread leaves thread 0
         * without a batch. */
        loss = lse - (first ? tsr_elem<T>::to_float(x[target]) : picked);
      }
      ((float *)p.loss)[r * p.loss_stride] = loss;
      if (p.lse)
        ((float *)p.lse)[r * p.lse_stride] = lse;
    }
  }
}

/* Visits the row's elements in a fixed thread partition: f(index, count,
 * values) gets V consecutive elements (vector path) or one. */
template <typename T, typename F> TSR_DEVICE void for_row(const rows_params &p, F &&f) {
  constexpr int V = 16 / (int)sizeof(T);
  if (p.vec) {
    const int64_t chunks = p.n / V;
    for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x)
      f(c * V, V);
    for (int64_t e = chunks * V + threadIdx.x; e < p.n; e += blockDim.x)
      f(e, 1);
  } else {
    for (int64_t e = threadIdx.x; e < p.n; e += blockDim.x)
      f(e, 1);
  }
}

/* Loads `count` (V or 1) elements at column e of a row with column stride
 * `col` (unit when count is V). */
template <typename T>
TSR_DEVICE void load_run(const T *row, int64_t col, int64_t e, int count, float *out) {
  if (count > 1)
    tsr_vec16<T>::load(row + e, out);
  else
    out[0] = tsr_elem<T>::to_float(row[e * col]);
}
template <typename T>
TSR_DEVICE void store_run(T *row, int64_t col, int64_t e, int count, const float *in) {
  if (count > 1)
    tsr_vec16<T>::store(row + e, in);
  else
    row[e * col] = tsr_elem<T>::from_float(in[0]);
}

TSR_DEVICE float weight_at(const rows_params &p, uint64_t base, int64_t stride, int64_t e) {
  return base ? tsr_load_any((const void *)base, p.weight_dtype, e * stride) : 1.0f;
}

template <typename T> TSR_DEVICE void rmsnorm_body(const rows_params &p) {
  if (p.regs) {
    rmsnorm_regs<T>(p);
    return;
  }
  constexpr int V = 16 / (int)sizeof(T);
  extern __shared__ __align__(16) float row_cache[];
  __shared__ float scratch[64];
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    const T *x = (const T *)p.x + row_offset(p.lead, p.x_lead, r);
    const T *res =
        p.residual ? (const T *)p.residual + row_offset(p.lead, p.residual_lead, r) : nullptr;
    T *y = (T *)p.y + row_offset(p.lead, p.y_lead, r);
    T *res_out =
        p.residual_out ? (T *)p.residual_out + row_offset(p.lead, p.residual_out_lead, r) : nullptr;
    auto load_h = [&](int64_t e, int count, float *h) {
      load_run<T>(x, p.x_col, e, count, h);
      if (res) {
        float add[V];
        load_run<T>(res, p.residual_col, e, count, add);
        for (int i = 0; i < count; i++)
          h[i] += add[i];
      }
    };
    float squares = 0.0f;
    for_row<T>(p, [&](int64_t e, int count) {
      float h[V];
      load_h(e, count, h);
      for (int i = 0; i < count; i++)
        squares = fmaf(h[i], h[i], squares);
      if (res_out)
        store_run<T>(res_out, p.residual_out_col, e, count, h);
      if (p.cache_row)
        for (int i = 0; i < count; i++)
          row_cache[e + i] = h[i];
    });
    float total = block_sum(squares, scratch);
    float inverse_rms = rsqrtf(total / (float)p.n + p.eps);
    auto h_again = [&](int64_t e, int count, float *h) {
      if (p.cache_row)
        for (int i = 0; i < count; i++)
          h[i] = row_cache[e + i];
      else
        load_h(e, count, h);
    };
    if (total > kFloatMax) {
      /* Block-uniform and cold: see rms_rescaled. */
      float big = 0.0f;
      for_row<T>(p, [&](int64_t e, int count) {
        float h[V];
        h_again(e, count, h);
        for (int i = 0; i < count; i++)
          big = fmaxf(big, fabsf(h[i]));
      });
      big = block_reduce_max(big, scratch);
      if (big <= kFloatMax) {
        const float unit = 1.0f / big;
        float small = 0.0f;
        for_row<T>(p, [&](int64_t e, int count) {
          float h[V];
          h_again(e, count, h);
          for (int i = 0; i < count; i++)
            small = fmaf(h[i] * unit, h[i] * unit, small);
        });
        inverse_rms = rms_rescaled(block_sum(small, scratch), unit, p);
      }
    }
    for_row<T>(p, [&](int64_t e, int count) {
      float h[V];
      h_again(e, count, h);
      for (int i = 0; i < count; i++)
        h[i] = h[i] * inverse_rms * weight_at(p, p.weight, p.weight_stride, e + i);
      store_run<T>(y, p.y_col, e, count, h);
    });
  }
}

template <typename T> TSR_DEVICE void layernorm_body(const rows_params &p) {
  if (p.regs) {
    layernorm_regs<T>(p);
    return;
  }
  constexpr int V = 16 / (int)sizeof(T);
  extern __shared__ __align__(16) float row_cache[];
  __shared__ float scratch[64];
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    const T *x = (const T *)p.x + row_offset(p.lead, p.x_lead, r);
    T *y = (T *)p.y + row_offset(p.lead, p.y_lead, r);
    auto load_h = [&](int64_t e, int count, float *h) {
      if (p.cache_row)
        for (int i = 0; i < count; i++)
          h[i] = row_cache[e + i];
      else
        load_run<T>(x, p.x_col, e, count, h);
    };
    float sum = 0.0f;
    for_row<T>(p, [&](int64_t e, int count) {
      float h[V];
      load_run<T>(x, p.x_col, e, count, h);
      for (int i = 0; i < count; i++) {
        sum += h[i];
        if (p.cache_row)
          row_cache[e + i] = h[i];
      }
    });
    float mean = block_sum(sum, scratch) / (float)p.n;
    float squares = 0.0f;
    for_row<T>(p, [&](int64_t e, int count) {
      float h[V];
      load_h(e, count, h);
      for (int i = 0; i < count; i++)
        squares = fmaf(h[i] - mean, h[i] - mean, squares);
    });
    const float total = block_sum(squares, scratch);
    float inverse_std = rsqrtf(total / (float)p.n + p.eps);
    if (total > kFloatMax) {
      /* As rmsnorm's, over x - mean (block-uniform, cold). */
      float big = 0.0f;
      for_row<T>(p, [&](int64_t e, int count) {
        float h[V];
        load_h(e, count, h);
        for (int i = 0; i < count; i++)
          big = fmaxf(big, fabsf(h[i] - mean));
      });
      big = block_reduce_max(big, scratch);
      if (big <= kFloatMax) {
        const float unit = 1.0f / big;
        float small = 0.0f;
        for_row<T>(p, [&](int64_t e, int count) {
          float h[V];
          load_h(e, count, h);
          for (int i = 0; i < count; i++)
            small = fmaf((h[i] - mean) * unit, (h[i] - mean) * unit, small);
        });
        inverse_std = rms_rescaled(block_sum(small, scratch), unit, p);
      }
    }
    for_row<T>(p, [&](int64_t e, int count) {
      float h[V];
      load_h(e, count, h);
      for (int i = 0; i < count; i++) {
        float w = weight_at(p, p.weight, p.weight_stride, e + i);
        float b = p.bias
                      ? tsr_load_any((const void *)p.bias, p.weight_dtype, (e + i) * p.bias_stride)
                      : 0.0f;
        h[i] = (h[i] - mean) * inverse_std * w + b;
      }
      store_run<T>(y, p.y_col, e, count, h);
    });
  }
}

template <typename T> TSR_DEVICE void softmax_body(const rows_params &p) {
  if (p.regs) {
    softmax_regs<T>(p);
    return;
  }
  constexpr int V = 16 / (int)sizeof(T);
  extern __shared__ __align__(16) float row_cache[];
  __shared__ float scratch[64];
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    const T *x = (const T *)p.x + row_offset(p.lead, p.x_lead, r);
    T *y = (T *)p.y + row_offset(p.lead, p.y_lead, r);
    max_sum running = {-INFINITY, 0.0f};
    for_row<T>(p, [&](int64_t e, int count) {
      float h[V];
      load_run<T>(x, p.x_col, e, count, h);
      for (int i = 0; i < count; i++) {
        running = add_value(running, h[i], p.scale);
        if (p.cache_row)
          row_cache[e + i] = h[i];
      }
    });
    max_sum total = block_max_sum(running, scratch, p.scale);
    /* A NaN sum (a NaN in the row) stays NaN; a +inf max is inf / inf: NaN
     * too, as in the reference. A max of -inf: zeros, or NaN with a NaN. */
    float inverse = total.max == INFINITY ? NAN : 1.0f / total.sum;
    const float fill = total.sum == 0.0f ? 0.0f : NAN;
    for_row<T>(p, [&](int64_t e, int count) {
      float h[V];
      if (p.cache_row) {
        for (int i = 0; i < count; i++)
          h[i] = row_cache[e + i];
      } else {
        load_run<T>(x, p.x_col, e, count, h);
      }
      for (int i = 0; i < count; i++)
        h[i] = total.max == -INFINITY ? fill : expf((h[i] - total.max) * p.scale) * inverse;
      store_run<T>(y, p.y_col, e, count, h);
    });
  }
}

/* loss = lse(row) - row[target]; ignore_index rows get 0; any other target
 * outside [0, n) gets NaN and records the smallest such row in the queue's
 * status word, which queue_finish reports. */
template <typename T, int R> TSR_DEVICE void cross_entropy_body(const rows_params &p) {
  if (p.regs) {
    cross_entropy_regs<T, R>(p);
    return;
  }
  constexpr int V = 16 / (int)sizeof(T);
  __shared__ float scratch[64];
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    const T *x = (const T *)p.x + row_offset(p.lead, p.x_lead, r);
    max_sum running = {-INFINITY, 0.0f};
    for_row<T>(p, [&](int64_t e, int count) {
      float h[V];
      load_run<T>(x, p.x_col, e, count, h);
      for (int i = 0; i < count; i++)
        running = add_value(running, h[i], 1.0f);
    });
    max_sum total = block_max_sum(running, scratch, 1.0f);
    if (threadIdx.x == 0) {
      float lse = total.max + logf(total.sum);
      int64_t target = ((const int32_t *)p.targets)[r * p.targets_stride];
      float loss;
      if (target == p.ignore_index) {
        loss = 0.0f;
      } else if (target < 0 || target >= p.n) {
        loss = NAN;
        atomicMin((int *)p.status, r < 0x7fffffff ? (int)r : 0x7fffffff);
      } else {
        loss = lse - tsr_elem<T>::to_float(x[target * p.x_col]);
      }
      ((float *)p.loss)[r * p.loss_stride] = loss;
      if (p.lse)
        ((float *)p.lse)[r * p.lse_stride] = lse;
    }
  }
}

} /* namespace */

#ifndef TSR_ROWS_MIN_BLOCKS
#define TSR_ROWS_MIN_BLOCKS 2
#endif
#define TSR_ROWS_BOUNDS(T) __launch_bounds__(512, sizeof(T) == 2 ? TSR_ROWS_MIN_BLOCKS : 1)
#define TSR_DEFINE_ROWS(dt, T)                                                                     \
  TSR_KERNEL void TSR_ROWS_BOUNDS(T) tsr_rmsnorm_##dt(TSR_PARAMS(tsr_gpu_rows_params) p) {         \
    rmsnorm_body<T>(p);                                                                            \
  }                                                                                                \
  TSR_KERNEL void tsr_layernorm_##dt(TSR_PARAMS(tsr_gpu_rows_params) p) {                          \
    layernorm_body<T>(p);                                                                          \
  }                                                                                                \
  TSR_KERNEL void tsr_softmax_##dt(TSR_PARAMS(tsr_gpu_rows_params) p) {                            \
    softmax_body<T>(p);                                                                            \
  }                                                                                                \
  TSR_KERNEL void TSR_ROWS_BOUNDS(T) tsr_cross_entropy_##dt(TSR_PARAMS(tsr_gpu_rows_params) p) {   \
    cross_entropy_body<T, 8>(p);                                                                   \
  }                                                                                                \
  TSR_KERNEL void __launch_bounds__(512, 3)                                                        \
      tsr_cross_entropy_##dt##_b4(TSR_PARAMS(tsr_gpu_rows_params) p) {                             \
    cross_entropy_body<T, 4>(p);                                                                   \
  }
TSR_DTYPES_ALL(TSR_DEFINE_ROWS)
