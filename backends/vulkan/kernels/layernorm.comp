/* SPDX-License-Identifier: Apache-2.0 */
#version 450
// LayerNorm: y = (x - mean) / sqrt(var + eps) * weight + bias, the variance
// from centred values (a second pass over registers, or over memory for rows
// too long to keep).
// Bindings: 0 x, 1 weight (32-bit words), 2 bias (32-bit words), 3 y (may
// alias x). Flags 4 / 8: weight / bias unit-stride with a VEC-aligned first
// element (vector loads).
// @variant f32 -DDTYPE_F32
// @variant f16 -DDTYPE_F16
// @variant bf16 -DDTYPE_BF16
// @variant f32_sg -DDTYPE_F32 -DSUBGROUP
// @variant f16_sg -DDTYPE_F16 -DSUBGROUP
// @variant bf16_sg -DDTYPE_BF16 -DSUBGROUP
#include "rows.glsl"

layout(set = 0, binding = 0) readonly buffer X { ELEM_T x[]; };
layout(set = 0, binding = 0) readonly buffer X4 { ELEM4_T x4[]; };
layout(set = 0, binding = 0) readonly buffer X8 { uvec4 x8[]; };
layout(set = 0, binding = 1) readonly buffer W { uint w[]; };
layout(set = 0, binding = 1) readonly buffer W2 { uvec2 w2[]; };
layout(set = 0, binding = 1) readonly buffer W4 { uvec4 w4[]; };
layout(set = 0, binding = 2) readonly buffer B { uint b[]; };
layout(set = 0, binding = 2) readonly buffer B2 { uvec2 b2[]; };
layout(set = 0, binding = 2) readonly buffer B4 { uvec4 b4[]; };
layout(set = 0, binding = 3) writeonly buffer Y { ELEM_T y[]; };
layout(set = 0, binding = 3) writeonly buffer Y4 { ELEM4_T y4[]; };
layout(set = 0, binding = 3) writeonly buffer Y8 { uvec4 y8[]; };

layout(push_constant) uniform Push {
  uint rows, n, d1, d2;
  RowTensor tx, ty;
  uint w_first, w_stride, w_code, b_first, b_stride, b_code, flags; // 1 weight, 2 bias, 4, 8
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

// The weights (bias: the biases) of the unit at column c: lo elements 0..3,
// hi 4..7. Two functions: GLSL passes no buffer as an argument.
void weight_unit(uint c, out vec4 lo, out vec4 hi) {
  hi = vec4(1.0);
  if ((p.flags & 4u) != 0u) {
    uint i = p.w_first + c;
    if (p.w_code == WORD_F32) {
      lo = uintBitsToFloat(w4[i >> 2]);
      if (VEC == 8u)
        hi = uintBitsToFloat(w4[(i >> 2) + 1u]);
    } else if (VEC == 8u) {
      uvec4 u = w4[i >> 3];
      lo = words_decode4(p.w_code, u.xy);
      hi = words_decode4(p.w_code, u.zw);
    } else {
      lo = words_decode4(p.w_code, w2[i >> 2]);
    }
    return;
  }
  lo = vec4(weight_at(c), weight_at(c + 1u), weight_at(c + 2u), weight_at(c + 3u));
  if (VEC == 8u)
    hi = vec4(weight_at(c + 4u), weight_at(c + 5u), weight_at(c + 6u), weight_at(c + 7u));
}

void bias_unit(uint c, out vec4 lo, out vec4 hi) {
  hi = vec4(0.0);
  if ((p.flags & 8u) != 0u) {
    uint i = p.b_first + c;
    if (p.b_code == WORD_F32) {
      lo = uintBitsToFloat(b4[i >> 2]);
      if (VEC == 8u)
        hi = uintBitsToFloat(b4[(i >> 2) + 1u]);
    } else if (VEC == 8u) {
      uvec4 u = b4[i >> 3];
      lo = words_decode4(p.b_code, u.xy);
      hi = words_decode4(p.b_code, u.zw);
    } else {
      lo = words_decode4(p.b_code, b2[i >> 2]);
    }
    return;
  }
  lo = vec4(bias_at(c), bias_at(c + 1u), bias_at(c + 2u), bias_at(c + 3u));
  if (VEC == 8u)
    hi = vec4(bias_at(c + 4u), bias_at(c + 5u), bias_at(c + 6u), bias_at(c + 7u));
}

void unit_in(uint e, out vec4 lo, out vec4 hi) {
  hi = vec4(0.0);
#ifdef HAS_VEC8
  if (VEC == 8u) {
    uvec4 u = x8[e >> 3];
    lo = unit_lo(u);
    hi = unit_hi(u);
    return;
  }
#endif
  lo = elem4_load(x4[e >> 2]);
}

void unit_out(uint e, vec4 lo, vec4 hi) {
#ifdef HAS_VEC8
  if (VEC == 8u) {
    y8[e >> 3] = unit_make(lo, hi);
    return;
  }
#endif
  y4[e >> 2] = elem4_make(lo);
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
      if (VEC >= 4u) {
        vec4 lo, hi;
        unit_in(bx + c, lo, hi);
        for (uint k = 0u; k < 4u; k++) {
          v[it * VEC + k] = lo[k];
          if (VEC == 8u)
            v[it * VEC + 4u + k] = hi[k];
        }
        sum += dot(lo + hi, vec4(1.0));
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
  float total = reduce_sum(squares);
  float inv = 1.0 / sqrt(total / float(p.n) + p.eps);
  if (total > FLT_MAX) {
    // The squares of finite values overflowed (|x - mean| past ~1e19):
    // again in units of the largest |x - mean| (uniform: every invocation
    // has the same total). An infinite x keeps inv 0, as the reference
    // does (its row is NaN through inf - mean anyway).
    float big = 0.0;
    if (ITEMS > 0u) {
      for (uint it = 0u; it < ITEMS; it++)
        for (uint k = 0u; k < VEC; k++)
          if ((it * WG + tid) * VEC < p.n)
            big = max(big, abs(v[it * VEC + k] - mean));
    } else {
      for (uint c = tid; c < p.n; c += WG)
        big = max(big, abs(elem_load(x[bx + c * p.tx.inner]) - mean));
    }
    big = reduce_max(big);
    if (big <= FLT_MAX) {
      float unit = 1.0 / big, small = 0.0;
      if (ITEMS > 0u) {
        for (uint it = 0u; it < ITEMS; it++)
          for (uint k = 0u; k < VEC; k++)
            if ((it * WG + tid) * VEC < p.n) {
              float d = (v[it * VEC + k] - mean) * unit;
              small += d * d;
            }
      } else {
        for (uint c = tid; c < p.n; c += WG) {
          float d = (elem_load(x[bx + c * p.tx.inner]) - mean) * unit;
          small += d * d;
        }
      }
      inv = unit / sqrt(reduce_sum(small) / float(p.n) + p.eps * unit * unit);
    }
  }
  if (ITEMS > 0u) {
    for (uint it = 0u; it < ITEMS; it++) {
      uint c = (it * WG + tid) * VEC;
      if (c >= p.n)
        break;
      if (VEC >= 4u) {
        vec4 lo, hi = vec4(0.0), wlo, whi, blo, bhi;
        for (uint k = 0u; k < 4u; k++) {
          lo[k] = v[it * VEC + k];
          if (VEC == 8u)
            hi[k] = v[it * VEC + 4u + k];
        }
        weight_unit(c, wlo, whi);
        bias_unit(c, blo, bhi);
        unit_out(by + c, (lo - mean) * inv * wlo + blo, (hi - mean) * inv * whi + bhi);
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
