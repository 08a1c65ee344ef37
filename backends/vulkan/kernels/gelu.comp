/* SPDX-License-Identifier: Apache-2.0 */
#version 450
// GELU, exact (erf) or tanh approximation. erf comes from erfc with a
// Chebyshev fit whose relative error stays below 1.2e-7 for any argument, so
// the left tail (where 1 + erf is tiny) keeps its precision; tanh is written
// through exp(-2|u|), which cannot overflow.
// Bindings: 0 x, 1 y (may alias x).
// @variant f32 -DDTYPE_F32
// @variant f16 -DDTYPE_F16
// @variant bf16 -DDTYPE_BF16
#include "elementwise.glsl"

layout(set = 0, binding = 0) readonly buffer X { ELEM_T x[]; };
layout(set = 0, binding = 0) readonly buffer X4 { ELEM4_T x4[]; };
layout(set = 0, binding = 1) writeonly buffer Y { ELEM_T y[]; };
layout(set = 0, binding = 1) writeonly buffer Y4 { ELEM4_T y4[]; };

layout(push_constant) uniform Push {
  uint count, d1, d2, d3;
  ElemTensor tx, ty;
  uint approximate; // 0 erf, 1 tanh
} p;

float erfc_nonneg(float z) {
  float t = 1.0 / (1.0 + 0.5 * z);
  float poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
               t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
               t * (-0.82215223 + t * 0.17087277))))))));
  return t * exp(-z * z + poly);
}

// Below -20 either form is under 1e-80 in magnitude: 0, which -inf needs
// (v times a vanishing factor is -inf * 0 = NaN there). NaN fails the compare
// and stays NaN.
float gelu(float v) {
  if (v < -20.0)
    return 0.0;
  if (p.approximate == 0u) {
    float u = -v * 0.70710678118654752; // 1 + erf(v / sqrt 2) = erfc(u)
    float c = u >= 0.0 ? erfc_nonneg(u) : 2.0 - erfc_nonneg(-u);
    return 0.5 * v * c;
  }
  float u = 0.79788456080286536 * (v + 0.044715 * v * v * v);
  float e = exp(-2.0 * abs(u));
  float t = (1.0 - e) / (1.0 + e);
  return 0.5 * v * (1.0 + (u < 0.0 ? -t : t));
}

void main() {
  uint e = item_index() * VEC;
  if (e >= p.count)
    return;
  if (VEC == 4u) {
    vec4 a = elem4_load(x4[(p.tx.first + e) >> 2]);
    y4[(p.ty.first + e) >> 2] = elem4_make(vec4(gelu(a.x), gelu(a.y), gelu(a.z), gelu(a.w)));
  } else {
    float a = elem_load(x[elem_offset(p.tx, e, p.d1, p.d2, p.d3)]);
    y[elem_offset(p.ty, e, p.d1, p.d2, p.d3)] = elem_make(gelu(a));
  }
}
