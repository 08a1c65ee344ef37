/* SPDX-License-Identifier: Apache-2.0 */
#version 450
// SwiGLU: y = silu(gate) * up. Bindings: 0 gate, 1 up, 2 y (may alias either).
// @variant f32 -DDTYPE_F32
// @variant f16 -DDTYPE_F16
// @variant bf16 -DDTYPE_BF16
#include "elementwise.glsl"

layout(set = 0, binding = 0) readonly buffer G { ELEM_T g[]; };
layout(set = 0, binding = 0) readonly buffer G4 { ELEM4_T g4[]; };
layout(set = 0, binding = 1) readonly buffer U { ELEM_T u[]; };
layout(set = 0, binding = 1) readonly buffer U4 { ELEM4_T u4[]; };
layout(set = 0, binding = 2) writeonly buffer Y { ELEM_T y[]; };
layout(set = 0, binding = 2) writeonly buffer Y4 { ELEM4_T y4[]; };

layout(push_constant) uniform Push {
  uint count, d1, d2, d3;
  ElemTensor tg, tu, ty;
} p;

// x sigmoid(x) = x / (1 + e^-x). Below -88 it is under 6e-37 in magnitude:
// 0 there, which -inf needs (-inf / inf is NaN). NaN fails the compare and
// stays NaN.
float silu(float a) {
  return a < -88.0 ? 0.0 : a / (1.0 + exp(-a));
}

vec4 silu(vec4 a) {
  return mix(a / (1.0 + exp(-a)), vec4(0.0), lessThan(a, vec4(-88.0)));
}

void main() {
  uint e = item_index() * VEC;
  if (e >= p.count)
    return;
  if (VEC == 4u) {
    vec4 a = elem4_load(g4[(p.tg.first + e) >> 2]);
    vec4 b = elem4_load(u4[(p.tu.first + e) >> 2]);
    y4[(p.ty.first + e) >> 2] = elem4_make(silu(a) * b);
  } else {
    float a = elem_load(g[elem_offset(p.tg, e, p.d1, p.d2, p.d3)]);
    float b = elem_load(u[elem_offset(p.tu, e, p.d1, p.d2, p.d3)]);
    y[elem_offset(p.ty, e, p.d1, p.d2, p.d3)] = elem_make(silu(a) * b);
  }
}
