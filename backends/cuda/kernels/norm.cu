/* Row ops: RMSNorm (+ residual add), LayerNorm, softmax, cross entropy.
 * One block per row (grid-stride over rows). Rows are read once: the row,
 * in f32, stays in the block's shared memory between the statistics pass
 * and the output pass when it fits (cache_row), and is read again from
 * global memory otherwise. Accesses are 16 bytes wide when every row tensor
 * has a unit row stride and 16-byte aligned rows (vec); math is f32. */
#include "gpu_portability.h"
#include "kernel_list.h"
#include "kernel_params.h"

namespace {

typedef tsr_gpu_rows_params rows_params;

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

/* Running (max, sum of exp(x - max)) pairs, merged without overflow. */
struct max_sum {
  float max, sum;
};
TSR_DEVICE max_sum merge(max_sum a, max_sum b) {
  float m = fmaxf(a.max, b.max);
  if (m == -INFINITY)
    return {m, 0.0f};
  return {m, a.sum * expf(a.max - m) + b.sum * expf(b.max - m)};
}
TSR_DEVICE max_sum add_value(max_sum a, float x) {
  if (x == -INFINITY)
    return a;
  if (x > a.max)
    return {x, a.sum * expf(a.max - x) + 1.0f};
  return {a.max, a.sum + expf(x - a.max)};
}
TSR_DEVICE max_sum block_max_sum(max_sum v, float *scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
#pragma unroll
  for (int mask = 16; mask > 0; mask >>= 1) {
    max_sum other = {TSR_SHFL_XOR(v.max, mask), TSR_SHFL_XOR(v.sum, mask)};
    v = merge(v, other);
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
      w = merge(w, other);
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
    for_row<T>(p, [&](int64_t e, int count) {
      float h[V];
      if (p.cache_row)
        for (int i = 0; i < count; i++)
          h[i] = row_cache[e + i];
      else
        load_h(e, count, h);
      for (int i = 0; i < count; i++)
        h[i] = h[i] * inverse_rms * weight_at(p, p.weight, p.weight_stride, e + i);
      store_run<T>(y, p.y_col, e, count, h);
    });
  }
}

template <typename T> TSR_DEVICE void layernorm_body(const rows_params &p) {
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
    float inverse_std = rsqrtf(block_sum(squares, scratch) / (float)p.n + p.eps);
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
        h[i] *= p.scale;
        running = add_value(running, h[i]);
        if (p.cache_row)
          row_cache[e + i] = h[i];
      }
    });
    max_sum total = block_max_sum(running, scratch);
    float inverse = total.sum > 0.0f ? 1.0f / total.sum : 0.0f;
    for_row<T>(p, [&](int64_t e, int count) {
      float h[V];
      if (p.cache_row) {
        for (int i = 0; i < count; i++)
          h[i] = row_cache[e + i];
      } else {
        load_run<T>(x, p.x_col, e, count, h);
        for (int i = 0; i < count; i++)
          h[i] *= p.scale;
      }
      for (int i = 0; i < count; i++)
        h[i] = total.max == -INFINITY ? 0.0f : expf(h[i] - total.max) * inverse;
      store_run<T>(y, p.y_col, e, count, h);
    });
  }
}

/* loss = lse(row) - row[target]; ignore_index rows get 0; any other target
 * outside [0, n) gets NaN and records the smallest such row in the queue's
 * status word, which queue_finish reports. */
template <typename T> TSR_DEVICE void cross_entropy_body(const rows_params &p) {
  constexpr int V = 16 / (int)sizeof(T);
  __shared__ float scratch[64];
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    const T *x = (const T *)p.x + row_offset(p.lead, p.x_lead, r);
    max_sum running = {-INFINITY, 0.0f};
    for_row<T>(p, [&](int64_t e, int count) {
      float h[V];
      load_run<T>(x, p.x_col, e, count, h);
      for (int i = 0; i < count; i++)
        running = add_value(running, h[i]);
    });
    max_sum total = block_max_sum(running, scratch);
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

#define TSR_DEFINE_ROWS(dt, T)                                                                     \
  TSR_KERNEL void tsr_rmsnorm_##dt(TSR_PARAMS(tsr_gpu_rows_params) p) {                            \
    rmsnorm_body<T>(p);                                                                            \
  }                                                                                                \
  TSR_KERNEL void tsr_layernorm_##dt(TSR_PARAMS(tsr_gpu_rows_params) p) {                          \
    layernorm_body<T>(p);                                                                          \
  }                                                                                                \
  TSR_KERNEL void tsr_softmax_##dt(TSR_PARAMS(tsr_gpu_rows_params) p) {                            \
    softmax_body<T>(p);                                                                            \
  }                                                                                                \
  TSR_KERNEL void tsr_cross_entropy_##dt(TSR_PARAMS(tsr_gpu_rows_params) p) {                      \
    cross_entropy_body<T>(p);                                                                      \
  }
TSR_DTYPES_ALL(TSR_DEFINE_ROWS)
