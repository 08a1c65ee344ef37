/* SPDX-License-Identifier: Apache-2.0 */
#version 450
// RMSNorm with an optional residual added first:
//   h = x (+ residual); y = h / sqrt(mean(h^2) + eps) * weight; residual_out = h
// Bindings: 0 x, 1 residual, 2 weight (32-bit words, dtype in w_code),
// 3 y, 4 residual_out. Absent tensors are bound to x and flagged off.
// Flag 8: the weight is unit-stride and its first element VEC-aligned, so a
// unit's weights come in one or two vector loads.
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
layout(set = 0, binding = 1) readonly buffer R { ELEM_T res[]; };
layout(set = 0, binding = 1) readonly buffer R4 { ELEM4_T res4[]; };
layout(set = 0, binding = 1) readonly buffer R8 { uvec4 res8[]; };
layout(set = 0, binding = 2) readonly buffer W { uint w[]; };
layout(set = 0, binding = 2) readonly buffer W2 { uvec2 w2[]; };
layout(set = 0, binding = 2) readonly buffer W4 { uvec4 w4[]; };
layout(set = 0, binding = 3) writeonly buffer Y { ELEM_T y[]; };
layout(set = 0, binding = 3) writeonly buffer Y4 { ELEM4_T y4[]; };
layout(set = 0, binding = 3) writeonly buffer Y8 { uvec4 y8[]; };
layout(set = 0, binding = 4) buffer O { ELEM_T rout[]; };
layout(set = 0, binding = 4) writeonly buffer O4 { ELEM4_T rout4[]; };
layout(set = 0, binding = 4) writeonly buffer O8 { uvec4 rout8[]; };

layout(push_constant) uniform Push {
  uint rows, n, d1, d2;
  RowTensor tx, tr, ty, to;
  uint w_first, w_stride, w_code, flags; // 1 residual, 2 weight, 4 residual_out, 8 weight units
  float eps;
} p;

float weight_at(uint c) {
  if ((p.flags & 2u) == 0u)
    return 1.0;
  uint i = p.w_first + c * p.w_stride;
  return word_decode(p.w_code, w[WORD_INDEX(p.w_code, i)], i);
}

// The weights of the unit at column c: lo (elements 0..3) and hi (4..7).
void weight_unit(uint c, out vec4 lo, out vec4 hi) {
  hi = vec4(1.0);
  if ((p.flags & 8u) != 0u) {
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

// h = x (+ residual) of the unit at column c (VEC 4 or 8), residual_out
// written.
void unit_in(uint bx, uint br, uint bo, uint c, bool has_res, bool has_out, out vec4 lo,
             out vec4 hi) {
  hi = vec4(0.0);
#ifdef HAS_VEC8
  if (VEC == 8u) {
    uvec4 u = x8[(bx + c) >> 3];
    lo = unit_lo(u);
    hi = unit_hi(u);
    if (has_res) {
      uvec4 q = res8[(br + c) >> 3];
      lo += unit_lo(q);
      hi += unit_hi(q);
    }
    if (has_out)
      rout8[(bo + c) >> 3] = unit_make(lo, hi);
    return;
  }
#endif
  lo = elem4_load(x4[(bx + c) >> 2]);
  if (has_res)
    lo += elem4_load(res4[(br + c) >> 2]);
  if (has_out)
    rout4[(bo + c) >> 2] = elem4_make(lo);
}

void unit_out(uint by, uint c, vec4 lo, vec4 hi) {
#ifdef HAS_VEC8
  if (VEC == 8u) {
    y8[(by + c) >> 3] = unit_make(lo, hi);
    return;
  }
#endif
  y4[(by + c) >> 2] = elem4_make(lo);
}

// h of column c read again for rows too long to keep: from residual_out when
// it was written (it may alias x; this invocation wrote this column), else
// from x (+ residual), which nothing has overwritten then.
float h_again(uint bx, uint br, uint bo, uint c, bool has_res, bool has_out) {
  if (has_out)
    return elem_load(rout[bo + c * p.to.inner]);
  float v = elem_load(x[bx + c * p.tx.inner]);
  if (has_res)
    v += elem_load(res[br + c * p.tr.inner]);
  return v;
}

void main() {
  uint r = row_index();
  if (r >= p.rows)
    return;
  uint tid = gl_LocalInvocationID.x;
  bool has_res = (p.flags & 1u) != 0u, has_out = (p.flags & 4u) != 0u;
  uint bx = row_base(p.tx, r, p.d1, p.d2), br = row_base(p.tr, r, p.d1, p.d2);
  uint by = row_base(p.ty, r, p.d1, p.d2), bo = row_base(p.to, r, p.d1, p.d2);
  float h[CACHE];
  float squares = 0.0;
  if (ITEMS > 0u) {
    for (uint it = 0u; it < ITEMS; it++) {
      uint c = (it * WG + tid) * VEC;
      if (c >= p.n)
        break;
      if (VEC >= 4u) {
        vec4 lo, hi;
        unit_in(bx, br, bo, c, has_res, has_out, lo, hi);
        squares += dot(lo, lo) + dot(hi, hi);
        for (uint k = 0u; k < 4u; k++) {
          h[it * VEC + k] = lo[k];
          if (VEC == 8u)
            h[it * VEC + 4u + k] = hi[k];
        }
      } else {
        float v = elem_load(x[bx + c * p.tx.inner]);
        if (has_res)
          v += elem_load(res[br + c * p.tr.inner]);
        if (has_out)
          rout[bo + c * p.to.inner] = elem_make(v);
        squares += v * v;
        h[it] = v;
      }
    }
  } else {
    for (uint c = tid; c < p.n; c += WG) {
      float v = elem_load(x[bx + c * p.tx.inner]);
      if (has_res)
        v += elem_load(res[br + c * p.tr.inner]);
      if (has_out)
        rout[bo + c * p.to.inner] = elem_make(v);
      squares += v * v;
    }
  }
  float total = reduce_sum(squares);
  float scale = 1.0 / sqrt(total / float(p.n) + p.eps);
  if (total > FLT_MAX) {
    // The squares of finite values overflowed (|h| past ~1e19): again in
    // units of the row's largest |h|, mean(h^2) = big^2 mean((h / big)^2).
    // Uniform: every invocation has the same total. An infinite h keeps
    // scale 0 (h * 0 is NaN there and 0 elsewhere, as in the reference).
    float big = 0.0;
    if (ITEMS > 0u) {
      for (uint it = 0u; it < ITEMS; it++)
        for (uint k = 0u; k < VEC; k++)
          if ((it * WG + tid) * VEC < p.n)
            big = max(big, abs(h[it * VEC + k]));
    } else {
      for (uint c = tid; c < p.n; c += WG)
        big = max(big, abs(h_again(bx, br, bo, c, has_res, has_out)));
    }
    big = reduce_max(big);
    if (big <= FLT_MAX) {
      float unit = 1.0 / big, small = 0.0;
      if (ITEMS > 0u) {
        for (uint it = 0u; it < ITEMS; it++)
          for (uint k = 0u; k < VEC; k++)
            if ((it * WG + tid) * VEC < p.n) {
              float q = h[it * VEC + k] * unit;
              small += q * q;
            }
      } else {
        for (uint c = tid; c < p.n; c += WG) {
          float q = h_again(bx, br, bo, c, has_res, has_out) * unit;
          small += q * q;
        }
      }
      scale = unit / sqrt(reduce_sum(small) / float(p.n) + p.eps * unit * unit);
    }
  }
  if (ITEMS > 0u) {
    for (uint it = 0u; it < ITEMS; it++) {
      uint c = (it * WG + tid) * VEC;
      if (c >= p.n)
        break;
      if (VEC >= 4u) {
        vec4 wlo, whi, lo, hi = vec4(0.0);
        weight_unit(c, wlo, whi);
        for (uint k = 0u; k < 4u; k++) {
          lo[k] = h[it * VEC + k];
          if (VEC == 8u)
            hi[k] = h[it * VEC + 4u + k];
        }
        unit_out(by, c, lo * scale * wlo, hi * scale * whi);
      } else {
        y[by + c * p.ty.inner] = elem_make(h[it] * scale * weight_at(c));
      }
    }
  } else {
    for (uint c = tid; c < p.n; c += WG)
      y[by + c * p.ty.inner] =
          elem_make(h_again(bx, br, bo, c, has_res, has_out) * scale * weight_at(c));
  }
}
