/* SPDX-License-Identifier: Apache-2.0 */
#version 450
// Rotary position embedding on x [B, S, H, D]: invocation (row, i) with
// row = (b*S + s)*H + h rotates pair i < rotary_dim/2 (neox: i and
// i + rotary_dim/2; gpt-j: 2i and 2i+1) by (position_offset + s) *
// theta^(-2i/rotary_dim), and copies the two elements rotary_dim + 2(i - half)
// and the next one past the rotary part. The angle is reduced to [-pi, pi]
// in two steps (6.28125 has 8 significant bits, so k * 6.28125 is exact)
// before sin and cos, whose accuracy drivers only promise near zero.
// Bindings: 0 x, 1 y (may alias x).
// @variant f32 -DDTYPE_F32
// @variant f16 -DDTYPE_F16
// @variant bf16 -DDTYPE_BF16
#include "elementwise.glsl"

layout(set = 0, binding = 0) readonly buffer X { ELEM_T x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { ELEM_T y[]; };

layout(push_constant) uniform Push {
  uint rows, seq, heads, pairs; // pairs = D / 2
  ElemTensor tx, ty;            // s0..s3 for B, S, H, D
  uint half_rotary, gptj;
  int position_offset;
  float log2_theta, rotary_dim;
} p;

void main() {
  uint item = item_index();
  uint row = item / p.pairs, i = item % p.pairs;
  if (row >= p.rows)
    return;
  uint h = row % p.heads, q = row / p.heads;
  uint s = q % p.seq, b = q / p.seq;
  uint bx = p.tx.first + b * p.tx.s0 + s * p.tx.s1 + h * p.tx.s2;
  uint by = p.ty.first + b * p.ty.s0 + s * p.ty.s1 + h * p.ty.s2;
  if (i >= p.half_rotary) {
    uint c = 2u * p.half_rotary + 2u * (i - p.half_rotary);
    float a0 = elem_load(x[bx + c * p.tx.s3]);
    float a1 = elem_load(x[bx + (c + 1u) * p.tx.s3]);
    y[by + c * p.ty.s3] = elem_make(a0);
    y[by + (c + 1u) * p.ty.s3] = elem_make(a1);
    return;
  }
  uint c0 = p.gptj != 0u ? 2u * i : i;
  uint c1 = p.gptj != 0u ? 2u * i + 1u : i + p.half_rotary;
  float position = float(p.position_offset + int(s));
  float angle = position * exp2(-float(2u * i) / p.rotary_dim * p.log2_theta);
  float k = round(angle * 0.15915494309189535);
  float reduced = (angle - k * 6.28125) - k * 0.0019353071795864769;
  float sn = sin(reduced), cs = cos(reduced);
  float a0 = elem_load(x[bx + c0 * p.tx.s3]);
  float a1 = elem_load(x[bx + c1 * p.tx.s3]);
  y[by + c0 * p.ty.s3] = elem_make(a0 * cs - a1 * sn);
  y[by + c1 * p.ty.s3] = elem_make(a1 * cs + a0 * sn);
}
