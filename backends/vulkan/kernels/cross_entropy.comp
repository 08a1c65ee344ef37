/* SPDX-License-Identifier: Apache-2.0 */
#version 450
// Cross entropy per row of logits [R, V]: lse = log(sum(exp(x))) in one
// online pass, loss = lse - x[target]; loss 0 for ignore_index; a target
// outside [0, V) gives NaN and its row (the smallest such) in the status
// word, which queue_finish reports.
// Bindings: 0 logits, 1 targets (i32), 2 loss (f32), 3 lse (f32), 4 status.
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
layout(set = 0, binding = 1) readonly buffer T { int targets[]; };
layout(set = 0, binding = 2) writeonly buffer L { float loss[]; };
layout(set = 0, binding = 3) writeonly buffer S { float lse[]; };
layout(set = 0, binding = 4) buffer Status { int bad_row; };

layout(push_constant) uniform Push {
  uint rows, n, d1, d2;
  RowTensor tx;
  uint t_first, t_stride, loss_first, loss_stride, lse_first, lse_stride;
  int ignore_index;
  uint flags; // 1 lse present, 2 ignore_index is an int32
} p;

#define NEG_INF uintBitsToFloat(0xff800000u)
#define POS_INF uintBitsToFloat(0x7f800000u)

void online(inout float m, inout float s, inout float bad, float v) {
  if (isnan(v)) {
    bad = 1.0;
  } else if (v > m) {
    s = (m == NEG_INF ? 0.0 : s * exp(m - v)) + 1.0;
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
  uint bx = row_base(p.tx, r, p.d1, p.d2);
  float m = NEG_INF, s = 0.0, bad = 0.0;
#ifdef HAS_VEC8
  if (VEC == 8u) {
    for (uint c = tid * 8u; c < p.n; c += WG * 8u) {
      uvec4 u = x8[(bx + c) >> 3];
      vec4 lo = unit_lo(u), hi = unit_hi(u);
      for (uint k = 0u; k < 4u; k++)
        online(m, s, bad, lo[k]);
      for (uint k = 0u; k < 4u; k++)
        online(m, s, bad, hi[k]);
    }
  } else
#endif
  if (VEC == 4u) {
    for (uint c = tid * 4u; c < p.n; c += WG * 4u) {
      vec4 q = elem4_load(x4[(bx + c) >> 2]);
      online(m, s, bad, q.x);
      online(m, s, bad, q.y);
      online(m, s, bad, q.z);
      online(m, s, bad, q.w);
    }
  } else {
    for (uint c = tid; c < p.n; c += WG)
      online(m, s, bad, elem_load(x[bx + c * p.tx.inner]));
  }
  vec2 top = reduce_max2(vec2(m, bad));
  float row_max = top.x;
  // +inf logits make exp(v - m) NaN: the sum only matters for finite maxima.
  float part = (m == NEG_INF || row_max == POS_INF) ? 0.0 : s * exp(m - row_max);
  float total = reduce_sum(part);
  if (tid != 0u)
    return;
  float row_lse;
  if (top.y > 0.0)
    row_lse = uintBitsToFloat(0x7fc00000u);
  else if (row_max == NEG_INF || row_max == POS_INF)
    row_lse = row_max;
  else
    row_lse = row_max + log(total);
  if ((p.flags & 1u) != 0u)
    lse[p.lse_first + r * p.lse_stride] = row_lse;
  int target = targets[p.t_first + r * p.t_stride];
  float value;
  if ((p.flags & 2u) != 0u && target == p.ignore_index) {
    value = 0.0;
  } else if (target < 0 || uint(target) >= p.n) {
    value = uintBitsToFloat(0x7fc00000u);
    atomicMin(bad_row, int(r));
  } else {
    value = row_lse - elem_load(x[bx + uint(target) * p.tx.inner]);
  }
  loss[p.loss_first + r * p.loss_stride] = value;
}
