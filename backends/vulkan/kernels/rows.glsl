/* SPDX-License-Identifier: Apache-2.0 */
// Row ops (rmsnorm, layernorm, softmax, cross entropy): one workgroup per
// row, rows folded over x and y of the grid. Specialisation constants:
//   0 WG     invocations per workgroup (a power of two)
//   1 ITEMS  row units each invocation keeps in registers (0: the row is too
//            long; it is read again from memory instead)
//   2 VEC    elements per unit: 8 (16-bit dtypes) or 4 when every tensor of
//            the row is unit-stride and aligned to that many elements (16-byte
//            loads, or 8-byte ones for 16-bit data aligned to 4), else 1
// Reductions use subgroup arithmetic in -DSUBGROUP builds and a shared-memory
// tree otherwise.
#ifndef TESSERA_VULKAN_ROWS_GLSL
#define TESSERA_VULKAN_ROWS_GLSL

#ifdef SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint ITEMS = 1;
layout(constant_id = 2) const uint VEC = 1;
const uint CACHE = (ITEMS == 0u ? 1u : ITEMS) * VEC;

// 16-bit builds have 8-element units: a uvec4 of packed pairs (lo holds
// elements 0..3, hi 4..7). f32 units are at most a vec4.
#if defined(DTYPE_F16) || defined(DTYPE_BF16)
#define HAS_VEC8
vec4 unit_lo(uvec4 u) { return elem4_load(u.xy); }
vec4 unit_hi(uvec4 u) { return elem4_load(u.zw); }
uvec4 unit_make(vec4 lo, vec4 hi) { return uvec4(elem4_make(lo), elem4_make(hi)); }
#endif

// A row tensor: element of (row r, column c) is
// first + i0*s0 + i1*s1 + i2*s2 + c*inner, r = (i0*d1 + i1)*d2 + i2.
struct RowTensor {
  uint first, s0, s1, s2, inner;
};

uint row_base(RowTensor t, uint r, uint d1, uint d2) {
  uint i2 = r % d2;
  uint q = r / d2;
  return t.first + (q / d1) * t.s0 + (q % d1) * t.s1 + i2 * t.s2;
}

uint row_index() {
  return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
}

shared vec2 reduce_shared[WG];

#ifdef SUBGROUP
vec2 reduce_sum2(vec2 v) {
  v = subgroupAdd(v);
  barrier();
  if (subgroupElect())
    reduce_shared[gl_SubgroupID] = v;
  barrier();
  vec2 t = vec2(0.0);
  for (uint i = 0u; i < gl_NumSubgroups; i++)
    t += reduce_shared[i];
  return t;
}
vec2 reduce_max2(vec2 v) {
  v = subgroupMax(v);
  barrier();
  if (subgroupElect())
    reduce_shared[gl_SubgroupID] = v;
  barrier();
  vec2 t = reduce_shared[0];
  for (uint i = 1u; i < gl_NumSubgroups; i++)
    t = max(t, reduce_shared[i]);
  return t;
}
#else
vec2 reduce_sum2(vec2 v) {
  uint tid = gl_LocalInvocationID.x;
  barrier();
  reduce_shared[tid] = v;
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1) {
    if (tid < s)
      reduce_shared[tid] += reduce_shared[tid + s];
    barrier();
  }
  return reduce_shared[0];
}
vec2 reduce_max2(vec2 v) {
  uint tid = gl_LocalInvocationID.x;
  barrier();
  reduce_shared[tid] = v;
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1) {
    if (tid < s)
      reduce_shared[tid] = max(reduce_shared[tid], reduce_shared[tid + s]);
    barrier();
  }
  return reduce_shared[0];
}
#endif

float reduce_sum(float v) {
  return reduce_sum2(vec2(v, 0.0)).x;
}

float reduce_max(float v) {
  return reduce_max2(vec2(v, 0.0)).x;
}

// The largest finite f32: a sum of squares above it overflowed.
#define FLT_MAX 3.40282347e38

#endif
