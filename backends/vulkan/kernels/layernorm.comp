#version 450
// LayerNorm: y = (x - mean) / sqrt(var + eps) * weight + bias, the variance
// from centred values (a second pass over registers, or over memory for rows
// too long to keep).
// Bindings: 0 x, 1 weight (32-bit words), 2 bias (32-bit words), 3 y (may
// alias x).
// @variant f32 -DDTYPE_F32
// @variant f16 -DDTYPE_F16
// @variant bf16 -DDTYPE_BF16
// @variant f32_sg -DDTYPE_F32 -DSUBGROUP
// @variant f16_sg -DDTYPE_F16 -DSUBGROUP
// @variant bf16_sg -DDTYPE_BF16 -DSUBGROUP
#include "rows.glsl"

layout(set = 0, binding = 0) readonly buffer X { ELEM_T x[]; };
layout(set = 0, binding = 0) readonly buffer X4 { ELEM4_T x4[]; };
layout(set = 0, binding = 1) readonly buffer W { uint w[]; };
layout(set = 0, binding = 2) readonly buffer B { uint b[]; };
layout(set = 0, binding = 3) writeonly buffer Y { ELEM_T y[]; };
layout(set = 0, binding = 3) writeonly buffer Y4 { ELEM4_T y4[]; };

layout(push_constant) uniform Push {
  uint rows, n, d1, d2;
  RowTensor tx, ty;
  uint w_first, w_stride, w_code, b_first, b_stride, b_code, flags; // 1 weight, 2 bias
  float eps;
} p;

float weight_at(uint c) {
  if ((p.flags & 1u) == 0u)
    return 1.0;
  uint i = p.w_first + c * p.w_stride;
  return word_decode(p.w_code, w[WORD_INDEX(p.w_code, i)], i);
}

float bias_at(uint c) {
  if ((p.flags & 2u) == 0u)
    return 0.0;
  uint i = p.b_first + c * p.b_stride;
  return word_decode(p.b_code, b[WORD_INDEX(p.b_code, i)], i);
}

void main() {
  uint r = row_index();
  if (r >= p.rows)
    return;
  uint tid = gl_LocalInvocationID.x;
  uint bx = row_base(p.tx, r, p.d1, p.d2), by = row_base(p.ty, r, p.d1, p.d2);
  float v[CACHE];
  float sum = 0.0;
  if (ITEMS > 0u) {
    for (uint it = 0u; it < ITEMS; it++) {
      uint c = (it * WG + tid) * VEC;
      if (c >= p.n)
        break;
      if (VEC == 4u) {
        vec4 q = elem4_load(x4[(bx + c) >> 2]);
        v[it * VEC] = q.x;
        v[it * VEC + 1u] = q.y;
        v[it * VEC + 2u] = q.z;
        v[it * VEC + 3u] = q.w;
        sum += (q.x + q.y) + (q.z + q.w);
      } else {
        v[it] = elem_load(x[bx + c * p.tx.inner]);
        sum += v[it];
      }
    }
  } else {
    for (uint c = tid; c < p.n; c += WG)
      sum += elem_load(x[bx + c * p.tx.inner]);
  }
  float mean = reduce_sum(sum) / float(p.n);
  float squares = 0.0;
  if (ITEMS > 0u) {
    for (uint it = 0u; it < ITEMS; it++) {
      uint c = (it * WG + tid) * VEC;
      if (c >= p.n)
        break;
      for (uint k = 0u; k < VEC; k++) {
        float d = v[it * VEC + k] - mean;
        squares += d * d;
      }
    }
  } else {
    for (uint c = tid; c < p.n; c += WG) {
      float d = elem_load(x[bx + c * p.tx.inner]) - mean;
      squares += d * d;
    }
  }
  float inv = 1.0 / sqrt(reduce_sum(squares) / float(p.n) + p.eps);
  if (ITEMS > 0u) {
    for (uint it = 0u; it < ITEMS; it++) {
      uint c = (it * WG + tid) * VEC;
      if (c >= p.n)
        break;
      if (VEC == 4u) {
        vec4 q = vec4(v[it * VEC], v[it * VEC + 1u], v[it * VEC + 2u], v[it * VEC + 3u]);
        vec4 wv = vec4(weight_at(c), weight_at(c + 1u), weight_at(c + 2u), weight_at(c + 3u));
        vec4 bv = vec4(bias_at(c), bias_at(c + 1u), bias_at(c + 2u), bias_at(c + 3u));
        y4[(by + c) >> 2] = elem4_make((q - mean) * inv * wv + bv);
      } else {
        y[by + c * p.ty.inner] = elem_make((v[it] - mean) * inv * weight_at(c) + bias_at(c));
      }
    }
  } else {
    for (uint c = tid; c < p.n; c += WG) {
      float q = elem_load(x[bx + c * p.tx.inner]);
      y[by + c * p.ty.inner] = elem_make((q - mean) * inv * weight_at(c) + bias_at(c));
    }
  }
}
