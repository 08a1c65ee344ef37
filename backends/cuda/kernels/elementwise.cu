/* Elementwise ops: SwiGLU, GELU, RoPE. Grid-stride loops; when every tensor
 * is dense row-major and 16-byte aligned (vec) SwiGLU and GELU walk the
 * elements as one flat array of 16-byte vectors, otherwise each element's
 * offset comes from its 4-D index and each tensor's strides. Math is f32. */
#include "gpu_portability.h"
#include "kernel_list.h"
#include "kernel_params.h"

namespace {

typedef tsr_gpu_elementwise_params elementwise_params;

TSR_DEVICE void unflatten(const elementwise_params &p, int64_t linear, int64_t *index) {
  for (int d = 3; d >= 0; d--) {
    index[d] = linear % p.shape[d];
    linear /= p.shape[d];
  }
}

TSR_DEVICE int64_t offset_of(const int64_t *index, const int64_t *strides) {
  return index[0] * strides[0] + index[1] * strides[1] + index[2] * strides[2] +
         index[3] * strides[3];
}

template <typename T, typename F> TSR_DEVICE void unary_map(const elementwise_params &p, F &&f) {
  constexpr int V = 16 / (int)sizeof(T);
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const T *x = (const T *)p.x;
  const T *up = (const T *)p.up;
  T *y = (T *)p.y;
  if (p.vec) {
    const int64_t chunks = p.total / V;
    for (int64_t c = first; c < chunks; c += stride) {
      float a[V], b[V];
      tsr_vec16<T>::load(x + c * V, a);
      if (up)
        tsr_vec16<T>::load(up + c * V, b);
#pragma unroll
      for (int i = 0; i < V; i++)
        a[i] = f(a[i], up ? b[i] : 0.0f);
      tsr_vec16<T>::store(y + c * V, a);
    }
    for (int64_t e = chunks * V + first; e < p.total; e += stride)
      y[e] = tsr_elem<T>::from_float(
          f(tsr_elem<T>::to_float(x[e]), up ? tsr_elem<T>::to_float(up[e]) : 0.0f));
    return;
  }
  for (int64_t e = first; e < p.total; e += stride) {
    int64_t index[4];
    unflatten(p, e, index);
    float a = tsr_elem<T>::to_float(x[offset_of(index, p.x_strides)]);
    float b = up ? tsr_elem<T>::to_float(up[offset_of(index, p.up_strides)]) : 0.0f;
    y[offset_of(index, p.y_strides)] = tsr_elem<T>::from_float(f(a, b));
  }
}

template <typename T> TSR_DEVICE void swiglu_body(const elementwise_params &p) {
  unary_map<T>(p, [](float gate, float up) { return tsr_silu(gate) * up; });
}

template <typename T> TSR_DEVICE void gelu_body(const elementwise_params &p) {
  const bool tanh_form = p.approximate != 0;
  unary_map<T>(
      p, [tanh_form](float x, float) { return tanh_form ? tsr_gelu_tanh(x) : tsr_gelu_erf(x); });
}

/* x, y [B, S, H, D]; one thread per channel pair. Pairs below rotary_dim / 2
 * rotate (neox: (i, i + rotary_dim / 2); gpt-j: (2i, 2i + 1)) by the angle
 * (position_offset + s) * theta^(-2i / rotary_dim); the remaining channels are
 * copied in pairs. y may be x: a thread reads both elements before writing. */
template <typename T> TSR_DEVICE void rope_body(const elementwise_params &p) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  const int64_t half_dim = p.shape[3] / 2;
  const int half_rot = p.rotary_dim / 2;
  const T *x = (const T *)p.x;
  T *y = (T *)p.y;
  for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < p.total; idx += stride) {
    int64_t pair = idx % half_dim, row = idx / half_dim;
    int64_t h = row % p.shape[2];
    row /= p.shape[2];
    int64_t s = row % p.shape[1], batch = row / p.shape[1];
    int64_t c0, c1;
    bool rotate = pair < half_rot;
    if (!rotate) {
      c0 = p.rotary_dim + 2 * (pair - half_rot);
      c1 = c0 + 1;
    } else if (p.style == 0) {
      c0 = pair;
      c1 = pair + half_rot;
    } else {
      c0 = 2 * pair;
      c1 = c0 + 1;
    }
    int64_t x_row = batch * p.x_strides[0] + s * p.x_strides[1] + h * p.x_strides[2];
    int64_t y_row = batch * p.y_strides[0] + s * p.y_strides[1] + h * p.y_strides[2];
    int64_t x0 = x_row + c0 * p.x_strides[3], x1 = x_row + c1 * p.x_strides[3];
    int64_t y0 = y_row + c0 * p.y_strides[3], y1 = y_row + c1 * p.y_strides[3];
    float a = tsr_elem<T>::to_float(x[x0]), b = tsr_elem<T>::to_float(x[x1]);
    if (rotate) {
      float inv_freq = exp2f(-(float)(2 * pair) / (float)p.rotary_dim * p.log2_theta);
      float angle = (float)(p.position_offset + s) * inv_freq;
      float sine, cosine;
      sincosf(angle, &sine, &cosine);
      float ra = a * cosine - b * sine, rb = b * cosine + a * sine;
      a = ra;
      b = rb;
    }
    y[y0] = tsr_elem<T>::from_float(a);
    y[y1] = tsr_elem<T>::from_float(b);
  }
}

} /* namespace */

#define TSR_DEFINE_ELEMENTWISE(dt, T)                                                              \
  TSR_KERNEL void tsr_swiglu_##dt(TSR_PARAMS(tsr_gpu_elementwise_params) p) {                      \
    swiglu_body<T>(p);                                                                             \
  }                                                                                                \
  TSR_KERNEL void tsr_gelu_##dt(TSR_PARAMS(tsr_gpu_elementwise_params) p) {                        \
    gelu_body<T>(p);                                                                               \
  }                                                                                                \
  TSR_KERNEL void tsr_rope_##dt(TSR_PARAMS(tsr_gpu_elementwise_params) p) {                        \
    rope_body<T>(p);                                                                               \
  }
TSR_DTYPES_ALL(TSR_DEFINE_ELEMENTWISE)
