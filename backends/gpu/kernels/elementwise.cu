/* SPDX-License-Identifier: Apache-2.0 */
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

/* tsr_silu and tsr_gelu_* give 0, not NaN, at -inf (gpu_portability.h). */
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
/* Rotary tables kept in shared memory per token: pairs past this take
 * their sine and cosine from sincosf directly. */
#define TSR_ROPE_TABLE_PAIRS 512

/* A block per token (grid-stride): the token's sines and cosines are taken
 * once into shared memory and serve all its heads (sincosf per head and
 * pair was most of the old kernel's time, with 64-bit index division per
 * pair); then the block's threads walk the token's heads x pairs, pair
 * index fastest, so neighbouring threads touch neighbouring channels. */
/* The 16-byte path (vec): unit channel stride, 16-byte aligned head rows,
 * head_dim a multiple of V = 16 / sizeof(T) and rotary_dim of 2V (neox) or
 * V (gpt-j). A thread's item is (token, group of TSR_GPU_ROPE_HEADS heads,
 * slot), slot fastest so neighbouring threads touch neighbouring 16 bytes:
 * a rotating slot is V channel pairs (neox: channels [sV, sV + V) with
 * their partners rotary_dim / 2 further; gpt-j: V channels, V / 2 adjacent
 * pairs), a copying slot V channels past rotary_dim. The slot's sines and
 * cosines are computed once and serve its heads; every load of the item is
 * issued before the first store; no shared memory, no barrier. */
template <typename T> TSR_DEVICE void rope_vec(const elementwise_params &p) {
  constexpr int V = 16 / (int)sizeof(T);
  constexpr int HPT = TSR_GPU_ROPE_HEADS;
  const int heads = (int)p.shape[2], dim = (int)p.shape[3];
  const int half_rot = p.rotary_dim / 2;
  const bool neox = p.style == 0;
  const int rot_slots = neox ? half_rot / V : p.rotary_dim / V;
  const int slots = rot_slots + (dim - p.rotary_dim) / V;
  const int groups = (heads + HPT - 1) / HPT;
  const int64_t items = p.shape[0] * p.shape[1] * groups * slots;
  const T *x = (const T *)p.x;
  T *y = (T *)p.y;
  for (int64_t item = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; item < items;
       item += (int64_t)gridDim.x * blockDim.x) {
    const int slot = (int)(item % slots);
    const int64_t rest = item / slots;
    const int group = (int)(rest % groups);
    const int64_t token = rest / groups;
    const int64_t batch = token / p.shape[1], s = token % p.shape[1];
    const bool rotate = slot < rot_slots;
    const int c0 = rotate ? slot * V : p.rotary_dim + (slot - rot_slots) * V;
    const int c1 = c0 + half_rot; /* neox partner chunk */
    const bool two = rotate && neox;
    float sine[V], cosine[V];
    if (rotate) {
      const float position = (float)(p.position_offset + s);
      /* neox: element i pairs with its partner (pair c0 + i); gpt-j:
       * elements 2k, 2k + 1 are pair c0 / 2 + k. */
#pragma unroll
      for (int i = 0; i < V; i++) {
        const int pair = neox ? c0 + i : c0 / 2 + i / 2;
        if (!neox && (i & 1)) {
          sine[i] = sine[i - 1];
          cosine[i] = cosine[i - 1];
          continue;
        }
        float inv_freq = exp2f(-(float)(2 * pair) / (float)p.rotary_dim * p.log2_theta);
        sincosf(position * inv_freq, &sine[i], &cosine[i]);
      }
    }
    const T *xt = x + batch * p.x_strides[0] + s * p.x_strides[1];
    T *yt = y + batch * p.y_strides[0] + s * p.y_strides[1];
    uint4 ra[HPT], rb[HPT];
#pragma unroll
    for (int j = 0; j < HPT; j++) {
      const int h = group * HPT + j;
      if (h < heads) {
        ra[j] = *(const uint4 *)(xt + h * p.x_strides[2] + c0);
        if (two)
          rb[j] = *(const uint4 *)(xt + h * p.x_strides[2] + c1);
      }
    }
#pragma unroll
    for (int j = 0; j < HPT; j++) {
      const int h = group * HPT + j;
      if (h >= heads)
        continue;
      float a[V], b[V];
      tsr_vec16<T>::load(&ra[j], a);
      if (two) {
        tsr_vec16<T>::load(&rb[j], b);
#pragma unroll
        for (int i = 0; i < V; i++) {
          const float ra_ = a[i] * cosine[i] - b[i] * sine[i];
          const float rb_ = b[i] * cosine[i] + a[i] * sine[i];
          a[i] = ra_;
          b[i] = rb_;
        }
        tsr_vec16<T>::store(yt + h * p.y_strides[2] + c1, b);
      } else if (rotate) {
#pragma unroll
        for (int i = 0; i < V; i += 2) {
          const float ra_ = a[i] * cosine[i] - a[i + 1] * sine[i];
          const float rb_ = a[i + 1] * cosine[i] + a[i] * sine[i];
          a[i] = ra_;
          a[i + 1] = rb_;
        }
      }
      tsr_vec16<T>::store(yt + h * p.y_strides[2] + c0, a);
    }
  }
}

template <typename T> TSR_DEVICE void rope_body(const elementwise_params &p) {
  if (p.vec) {
    rope_vec<T>(p);
    return;
  }
  __shared__ float sines[TSR_ROPE_TABLE_PAIRS], cosines[TSR_ROPE_TABLE_PAIRS];
  const int64_t tokens = p.shape[0] * p.shape[1];
  const int half_dim = (int)(p.shape[3] / 2);
  const int half_rot = p.rotary_dim / 2;
  const int pairs = (int)p.shape[2] * half_dim;
  const bool table = half_rot <= TSR_ROPE_TABLE_PAIRS;
  const T *x = (const T *)p.x;
  T *y = (T *)p.y;
  for (int64_t token = blockIdx.x; token < tokens; token += gridDim.x) {
    const int64_t batch = token / p.shape[1], s = token % p.shape[1];
    const float position = (float)(p.position_offset + s);
    if (table) {
      __syncthreads(); /* the last token's readers are done with the table */
      for (int i = threadIdx.x; i < half_rot; i += blockDim.x) {
        float inv_freq = exp2f(-(float)(2 * i) / (float)p.rotary_dim * p.log2_theta);
        sincosf(position * inv_freq, &sines[i], &cosines[i]);
      }
      __syncthreads();
    }
    const T *x_token = x + batch * p.x_strides[0] + s * p.x_strides[1];
    T *y_token = y + batch * p.y_strides[0] + s * p.y_strides[1];
    for (int q = threadIdx.x; q < pairs; q += blockDim.x) {
      const int h = q / half_dim, pair = q - h * half_dim;
      int c0, c1;
      const bool rotate = pair < half_rot;
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
      const T *xr = x_token + h * p.x_strides[2];
      T *yr = y_token + h * p.y_strides[2];
      float a = tsr_elem<T>::to_float(xr[c0 * p.x_strides[3]]);
      float b = tsr_elem<T>::to_float(xr[c1 * p.x_strides[3]]);
      if (rotate) {
        float sine, cosine;
        if (table) {
          sine = sines[pair];
          cosine = cosines[pair];
        } else {
          float inv_freq = exp2f(-(float)(2 * pair) / (float)p.rotary_dim * p.log2_theta);
          sincosf(position * inv_freq, &sine, &cosine);
        }
        float ra = a * cosine - b * sine, rb = b * cosine + a * sine;
        a = ra;
        b = rb;
      }
      yr[c0 * p.y_strides[3]] = tsr_elem<T>::from_float(a);
      yr[c1 * p.y_strides[3]] = tsr_elem<T>::from_float(b);
    }
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
