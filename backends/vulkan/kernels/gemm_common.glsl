/* SPDX-License-Identifier: Apache-2.0 */
// Shared by the GEMM shaders (gemm.comp, the scalar path; gemm_coopmat.comp,
// cooperative matrices): the push constants, the operand and output views
// per dtype build, the group table of grouped GEMM and the fused epilogue.
//
// Bindings: 0 A, 1 B, 2 C, 3 bias, 4 D, 5 group table (grouped GEMM only).
// Absent C or bias are bound to D and never read (flags say which exist).
// D, C and bias have D's dtype: the build's dtype, or f32 when OUT_F32.
// Group table (uint words, G = p.batch): [0..G] prefix sums of M tiles per
// group, [G+1..2G+1] prefix sums of rows per group.
#ifndef TESSERA_VULKAN_GEMM_COMMON_GLSL
#define TESSERA_VULKAN_GEMM_COMMON_GLSL

#include "common.glsl"

layout(push_constant) uniform GemmPush {
  uint m, n, k, batch; // batch: the group count G for grouped GEMM
  uint a_first, a_sb, a_sm, a_sk;
  uint b_first, b_sb, b_sk, b_sn;
  uint c_first, c_sb, c_sm, c_sn;
  uint d_first, d_sb, d_sm, d_sn;
  uint bias_first, bias_sb, bias_sn, flags; // bit 0 C, bit 1 bias, bits 4..7 activation
  float alpha, beta;
} p;

#define GEMM_HAS_C 1u
#define GEMM_HAS_BIAS 2u

#if defined(DTYPE_F32)
layout(set = 0, binding = 0) readonly buffer GemmA { float a_elem[]; };
layout(set = 0, binding = 1) readonly buffer GemmB { float b_elem[]; };
#define gemm_load_a(i) a_elem[i]
#define gemm_load_b(i) b_elem[i]
#else
layout(set = 0, binding = 0) readonly buffer GemmA { uint16_t a_elem[]; };
layout(set = 0, binding = 1) readonly buffer GemmB { uint16_t b_elem[]; };
#define gemm_load_a(i) elem_load(a_elem[i])
#define gemm_load_b(i) elem_load(b_elem[i])
#endif

// C may be D itself (an in-place residual), so neither is restrict.
layout(set = 0, binding = 2) readonly buffer GemmC32 { float c32[]; };
layout(set = 0, binding = 3) readonly buffer GemmBias32 { float bias32[]; };
layout(set = 0, binding = 4) buffer GemmD32 { float d32[]; };
#if !defined(DTYPE_F32)
layout(set = 0, binding = 2) readonly buffer GemmC16 { uint16_t c16[]; };
layout(set = 0, binding = 3) readonly buffer GemmBias16 { uint16_t bias16[]; };
layout(set = 0, binding = 4) buffer GemmD16 { uint16_t d16[]; };
#endif
// D four elements at a time (gemm_store4): 16 bytes of f32, 8 of 16-bit.
layout(set = 0, binding = 4) buffer GemmD128 { vec4 d128[]; };
#if !defined(DTYPE_F32)
layout(set = 0, binding = 4) buffer GemmD64 { uvec2 d64[]; };
#endif
layout(set = 0, binding = 5) readonly buffer GemmGroups { uint group_table[]; };

// erf with |error| < 1.5e-7 (Abramowitz and Stegun 7.1.26): GLSL has none.
float gemm_erf(float x) {
  float t = 1.0 / (1.0 + 0.3275911 * abs(x));
  float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t +
                   0.254829592) * t * exp(-x * x);
  return x < 0.0 ? -y : y;
}

// tanh that stays finite for large |x| (some drivers' tanh overflows to NaN).
float gemm_tanh(float x) {
  float e = exp(-2.0 * abs(x));
  float y = (1.0 - e) / (1.0 + e);
  return x < 0.0 ? -y : y;
}

float gemm_activate(float v, uint act) {
  // NaN passes through relu: tested on the bits, since drivers may fold a
  // float compare (or max) as if NaN could not occur.
  if (act == 1u)
    return (floatBitsToUint(v) & 0x7fffffffu) > 0x7f800000u ? v : max(v, 0.0);
  // gelu and silu tend to 0 at -inf, where the formulas below give -inf * 0
  // = NaN; under -100 each is below 1e-40 in magnitude. NaN stays NaN.
  if (act >= 2u && act <= 4u && v < -100.0)
    return 0.0;
  if (act == 2u)
    return 0.5 * v * (1.0 + gemm_tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
  if (act == 3u)
    return 0.5 * v * (1.0 + gemm_erf(v * 0.7071067811865476));
  if (act == 4u)
    return v / (1.0 + exp(-v));
  return v;
}

// The output element (row gm, column gn of problem z) from its accumulator:
// act(alpha * acc + beta * C + bias), stored in D's dtype.
void gemm_store(uint z, uint row0, uint gm, uint gn, float acc, bool out_f32) {
  float v = p.alpha * acc;
  uint r = row0 + gm;
  if ((p.flags & GEMM_HAS_C) != 0u) {
    uint ci = p.c_first + z * p.c_sb + r * p.c_sm + gn * p.c_sn;
#if defined(DTYPE_F32)
    v += p.beta * c32[ci];
#else
    v += p.beta * (out_f32 ? c32[ci] : elem_load(c16[ci]));
#endif
  }
  if ((p.flags & GEMM_HAS_BIAS) != 0u) {
    uint bi = p.bias_first + z * p.bias_sb + gn * p.bias_sn;
#if defined(DTYPE_F32)
    v += bias32[bi];
#else
    v += out_f32 ? bias32[bi] : elem_load(bias16[bi]);
#endif
  }
  v = gemm_activate(v, (p.flags >> 4) & 15u);
  uint di = p.d_first + z * p.d_sb + r * p.d_sm + gn * p.d_sn;
#if defined(DTYPE_F32)
  d32[di] = v;
#else
  if (out_f32)
    d32[di] = v;
  else
    d16[di] = elem_make(v);
#endif
}

// Which problem and rows a workgroup's M tile belongs to. Plain GEMM: problem
// gl_WorkGroupID.z, rows from tile * bm. Grouped: the group whose tile range
// holds gl_WorkGroupID.x (binary search of the prefix sums), its first row
// (row0) and its row count.
void gemm_locate(bool grouped, uint bm, out uint z, out uint row0, out uint m0, out uint mcount) {
  uint tile = gl_WorkGroupID.x;
  if (!grouped) {
    z = gl_WorkGroupID.z;
    row0 = 0u;
    m0 = tile * bm;
    mcount = p.m;
    return;
  }
  uint lo = 0u, hi = p.batch; // group_table[lo] <= tile < group_table[hi]
  while (hi - lo > 1u) {
    uint mid = (lo + hi) >> 1;
    if (group_table[mid] <= tile)
      lo = mid;
    else
      hi = mid;
  }
  // Empty groups share their start with the next one: skip to the last.
  z = lo;
  row0 = group_table[p.batch + 1u + lo];
  mcount = group_table[p.batch + 2u + lo] - row0;
  m0 = (tile - group_table[lo]) * bm;
}

// Outputs (gm, gn .. gn + 3) of one row from their accumulators: one 16- or
// 8-byte store when D's row is contiguous there, the four lie inside and
// start on a multiple of four elements; else one at a time.
void gemm_store4(uint z, uint row0, uint gm, uint gn, vec4 acc, bool out_f32) {
  uint r = row0 + gm;
  uint di = p.d_first + z * p.d_sb + r * p.d_sm + gn * p.d_sn;
  if (gn + 3u >= p.n || p.d_sn != 1u || (di & 3u) != 0u) {
    for (uint i = 0u; i < 4u; i++)
      if (gn + i < p.n)
        gemm_store(z, row0, gm, gn + i, acc[i], out_f32);
    return;
  }
  vec4 v = p.alpha * acc;
  uint act = (p.flags >> 4) & 15u;
  for (uint i = 0u; i < 4u; i++) {
    if ((p.flags & GEMM_HAS_C) != 0u) {
      uint ci = p.c_first + z * p.c_sb + r * p.c_sm + (gn + i) * p.c_sn;
#if defined(DTYPE_F32)
      v[i] += p.beta * c32[ci];
#else
      v[i] += p.beta * (out_f32 ? c32[ci] : elem_load(c16[ci]));
#endif
    }
    if ((p.flags & GEMM_HAS_BIAS) != 0u) {
      uint bi = p.bias_first + z * p.bias_sb + (gn + i) * p.bias_sn;
#if defined(DTYPE_F32)
      v[i] += bias32[bi];
#else
      v[i] += out_f32 ? bias32[bi] : elem_load(bias16[bi]);
#endif
    }
    v[i] = gemm_activate(v[i], act);
  }
#if defined(DTYPE_F32)
  d128[di >> 2] = v;
#else
  if (out_f32)
    d128[di >> 2] = v;
  else
    d64[di >> 2] = elem4_make(v);
#endif
}

#endif
