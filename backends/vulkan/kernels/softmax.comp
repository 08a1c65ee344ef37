#version 450
// Softmax over each row of scale * x. A NaN anywhere makes the row NaN; a
// row of -inf only gives zeros (the reference's contract).
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
layout(set = 0, binding = 1) writeonly buffer Y { ELEM_T y[]; };
layout(set = 0, binding = 1) writeonly buffer Y4 { ELEM4_T y4[]; };

layout(push_constant) uniform Push {
  uint rows, n, d1, d2;
  RowTensor tx, ty;
  float scale;
} p;

#define NEG_INF uintBitsToFloat(0xff800000u)

// Running max m and sum s of exp(v - m) of one invocation's values.
void online(inout float m, inout float s, inout float bad, float v) {
  if (isnan(v)) {
    bad = 1.0;
  } else if (v > m) {
    s = s * exp(m - v) + 1.0;
    m = v;
  } else if (v != NEG_INF) {
    s += exp(v - m);
  }
}

void main() {
  uint r = row_index();
  if (r >= p.rows)
    return;
  uint tid = gl_LocalInvocationID.x;
  uint bx = row_base(p.tx, r, p.d1, p.d2), by = row_base(p.ty, r, p.d1, p.d2);
  float v[CACHE];
  float m = NEG_INF, s = 0.0, bad = 0.0;
  if (ITEMS > 0u) {
    for (uint it = 0u; it < ITEMS; it++) {
      uint c = (it * WG + tid) * VEC;
      if (c >= p.n)
        break;
      if (VEC == 4u) {
        vec4 q = elem4_load(x4[(bx + c) >> 2]) * p.scale;
        v[it * VEC] = q.x;
        v[it * VEC + 1u] = q.y;
        v[it * VEC + 2u] = q.z;
        v[it * VEC + 3u] = q.w;
        for (uint k = 0u; k < 4u; k++)
          online(m, s, bad, v[it * VEC + k]);
      } else {
        v[it] = elem_load(x[bx + c * p.tx.inner]) * p.scale;
        online(m, s, bad, v[it]);
      }
    }
  } else {
    for (uint c = tid; c < p.n; c += WG)
      online(m, s, bad, elem_load(x[bx + c * p.tx.inner]) * p.scale);
  }
  vec2 top = reduce_max2(vec2(m, bad));
  float row_max = top.x;
  bool nan_row = top.y > 0.0, zero_row = row_max == NEG_INF;
  float total = reduce_sum(m == NEG_INF ? 0.0 : s * exp(m - row_max));
  float inv = 1.0 / total;
  float fill = nan_row ? uintBitsToFloat(0x7fc00000u) : 0.0;
  bool special = nan_row || zero_row;
  if (ITEMS > 0u) {
    for (uint it = 0u; it < ITEMS; it++) {
      uint c = (it * WG + tid) * VEC;
      if (c >= p.n)
        break;
      if (VEC == 4u) {
        vec4 q = vec4(v[it * VEC], v[it * VEC + 1u], v[it * VEC + 2u], v[it * VEC + 3u]);
        y4[(by + c) >> 2] = elem4_make(special ? vec4(fill) : exp(q - row_max) * inv);
      } else {
        y[by + c * p.ty.inner] = elem_make(special ? fill : exp(v[it] - row_max) * inv);
      }
    }
  } else {
    for (uint c = tid; c < p.n; c += WG) {
      float q = elem_load(x[bx + c * p.tx.inner]) * p.scale;
      y[by + c * p.ty.inner] = elem_make(special ? fill : exp(q - row_max) * inv);
    }
  }
}
