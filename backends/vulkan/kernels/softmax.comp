/* SPDX-License-Identifier: Apache-2.0 */
#version 450
// Softmax over each row of scale * x. A NaN or a +inf anywhere makes the row
// NaN; a row of -inf only gives zeros (the reference's contract). The max is
// taken over x and the exponents are (x - max) * scale (scale is positive):
// the max's own is exactly 0, where x * scale - max * scale may not be once
// the compiler fuses it into an FMA (an error of ~1e23 at scale 1e30), and
// nothing overflows where x * scale would.
// Bindings: 0 x, 1 y (may alias x).
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
layout(set = 0, binding = 1) writeonly buffer Y { ELEM_T y[]; };
layout(set = 0, binding = 1) writeonly buffer Y4 { ELEM4_T y4[]; };
layout(set = 0, binding = 1) writeonly buffer Y8 { uvec4 y8[]; };

layout(push_constant) uniform Push {
  uint rows, n, d1, d2;
  RowTensor tx, ty;
  float scale;
} p;

#define NEG_INF uintBitsToFloat(0xff800000u)
#define POS_INF uintBitsToFloat(0x7f800000u)

// Running max m and sum s of exp((v - m) * scale) of one invocation's values.
void online(inout float m, inout float s, inout float bad, float v) {
  if (isnan(v)) {
    bad = 1.0;
  } else if (v > m) {
    s = s * exp((m - v) * p.scale) + 1.0;
    m = v;
  } else if (v != NEG_INF) {
    s += exp((v - m) * p.scale);
  }
}

// The unit of VEC (4 or 8) elements at element e: lo 0..3, hi 4..7.
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
  float fill = 0.0, inv = 0.0, row_max = NEG_INF;
  bool special = false;
  if (ITEMS > 0u) {
    // The row is in registers: its max, then exp(v - max) once per element
    // (kept for the output), then their sum; no running rescale.
    float v[CACHE];
    float m = NEG_INF, bad = 0.0;
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
      } else {
        v[it] = elem_load(x[bx + c * p.tx.inner]);
      }
      for (uint k = 0u; k < VEC; k++) {
        float q = v[it * VEC + k];
        bad = isnan(q) ? 1.0 : bad;
        m = max(m, q);
      }
    }
    vec2 top = reduce_max2(vec2(m, bad));
    row_max = top.x;
    bool nan_row = top.y > 0.0 || row_max == POS_INF;
    special = nan_row || row_max == NEG_INF;
    fill = nan_row ? uintBitsToFloat(0x7fc00000u) : 0.0;
    float s = 0.0;
    for (uint it = 0u; it < ITEMS; it++) {
      uint c = (it * WG + tid) * VEC;
      if (c >= p.n)
        break;
      for (uint k = 0u; k < VEC; k++) {
        float e = exp((v[it * VEC + k] - row_max) * p.scale);
        v[it * VEC + k] = e;
        s += e;
      }
    }
    inv = 1.0 / reduce_sum(s);
    for (uint it = 0u; it < ITEMS; it++) {
      uint c = (it * WG + tid) * VEC;
      if (c >= p.n)
        break;
      if (VEC >= 4u) {
        vec4 lo, hi = vec4(0.0);
        for (uint k = 0u; k < 4u; k++) {
          lo[k] = v[it * VEC + k];
          if (VEC == 8u)
            hi[k] = v[it * VEC + 4u + k];
        }
        unit_out(by + c, special ? vec4(fill) : lo * inv, special ? vec4(fill) : hi * inv);
      } else {
        y[by + c * p.ty.inner] = elem_make(special ? fill : v[it] * inv);
      }
    }
    return;
  }
  // Too long to keep: one online pass for the max and sum, one to write.
  float m = NEG_INF, s = 0.0, bad = 0.0;
  for (uint c = tid; c < p.n; c += WG)
    online(m, s, bad, elem_load(x[bx + c * p.tx.inner]));
  vec2 top = reduce_max2(vec2(m, bad));
  row_max = top.x;
  bool nan_row = top.y > 0.0 || row_max == POS_INF, zero_row = row_max == NEG_INF;
  float total = reduce_sum(m == NEG_INF ? 0.0 : s * exp((m - row_max) * p.scale));
  inv = 1.0 / total;
  fill = nan_row ? uintBitsToFloat(0x7fc00000u) : 0.0;
  special = nan_row || zero_row;
  for (uint c = tid; c < p.n; c += WG) {
    float q = elem_load(x[bx + c * p.tx.inner]);
    y[by + c * p.ty.inner] = elem_make(special ? fill : exp((q - row_max) * p.scale) * inv);
  }
}
