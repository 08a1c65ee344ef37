/* SPDX-License-Identifier: Apache-2.0 */
#version 450
// Decode attention, second pass: merges the chunks attention_decode.comp
// left in scratch for each query row (o = sum_c acc_c 2^(m_c - m) / l with
// m = max m_c, l = sum_c l_c 2^(m_c - m)) and writes o and lse. One
// workgroup per (query row i, query head h, sequence b). Rows past the
// sequence's are not written; a sequence at fault gets NaN rows, one without
// keys o = 0 and lse = -inf (the split pass wrote nothing for either).
// Bindings: 0 o, 1 lse (f32; bound to o and unused when absent), 2 plan
// (bound to the partials and unread for dense problems), 3 partials.
// @variant f32 -DDTYPE_F32
// @variant f16 -DDTYPE_F16
// @variant bf16 -DDTYPE_BF16
#include "common.glsl"

layout(local_size_x = 64) in;

layout(set = 0, binding = 0) writeonly buffer O { ELEM_T o[]; };
layout(set = 0, binding = 1) writeonly buffer Lse { float lse[]; };
layout(set = 0, binding = 2) readonly buffer Plan { int plan[]; };
layout(set = 0, binding = 3) readonly buffer Part { float part[]; };

struct View {
  uint first, s0, s1, s2;
};

layout(push_constant) uniform CombinePush {
  uint max_q, plan_stride, group, block_size;
  View o, lse;  // attention_serving.glsl's views
  uint dim, flags; // flags: SERVING_LSE, SERVING_PLAN
  float softcap_log2; // unused (attention_serving.glsl names it)
  uint max_kv;     // dense problems: every sequence's key count
  uint chunk;      // keys per chunk
  uint chunks;     // chunks per sequence in the split pass's grid
  uint rows_pad;   // row tiles * rows per tile
  uint dp;         // the split pass's head-dim capacity (partials' stride)
  uint ml_base;    // where the (m, l) pairs start in `part`
} p;

#define SERVING_NO_INPUT
#include "attention_serving.glsl"

#define NEG_INF uintBitsToFloat(0xff800000u)

void main() {
  uint i = gl_WorkGroupID.x, h = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
  uint tid = gl_LocalInvocationID.x;
  Seq s = seq_load(b, p.max_q, p.max_kv);
  if (i >= uint(s.q_len))
    return;
  uint o_base = q_row(VIEW_O, b, s, h, i);
  bool with_lse = (p.flags & SERVING_LSE) != 0u;
  if (s.kv_len <= 0) {
    float fill = s.kv_len < 0 ? uintBitsToFloat(0x7fc00000u) : 0.0;
    for (uint d = tid; d < p.dim; d += gl_WorkGroupSize.x)
      o[o_base + d] = elem_make(fill);
    if (with_lse && tid == 0u)
      lse[lse_at(b, s, h, i)] = s.kv_len < 0 ? fill : NEG_INF;
    return;
  }
  uint hk = h / p.group, hl = h % p.group;
  uint chunks = (uint(s.kv_len) + p.chunk - 1u) / p.chunk;
  uint slot0 = (b * (gl_NumWorkGroups.y / p.group) + hk) * p.chunks * p.rows_pad + hl * p.max_q + i;
  float m = NEG_INF;
  for (uint c = 0u; c < chunks; c++)
    m = max(m, part[p.ml_base + (slot0 + c * p.rows_pad) * 2u]);
  float l = 0.0;
  for (uint c = 0u; c < chunks; c++) {
    uint at = p.ml_base + (slot0 + c * p.rows_pad) * 2u;
    float mc = part[at];
    l += (mc == NEG_INF ? 0.0 : exp2(mc - m)) * part[at + 1u];
  }
  // l = 0: no key seen (o = 0, lse = -inf); a NaN l stays NaN in both.
  float inv = l == 0.0 ? 0.0 : 1.0 / l;
  for (uint d = tid; d < p.dim; d += gl_WorkGroupSize.x) {
    float x = 0.0;
    for (uint c = 0u; c < chunks; c++) {
      uint slot = slot0 + c * p.rows_pad;
      float mc = part[p.ml_base + slot * 2u];
      x += (mc == NEG_INF ? 0.0 : exp2(mc - m)) * part[slot * p.dp + d];
    }
    o[o_base + d] = elem_make(x * inv);
  }
  if (with_lse && tid == 0u)
    lse[lse_at(b, s, h, i)] = l == 0.0 ? NEG_INF : (m + log2(l)) * 0.6931471805599453;
}
