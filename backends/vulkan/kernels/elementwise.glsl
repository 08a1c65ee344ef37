/* SPDX-License-Identifier: Apache-2.0 */
// Elementwise ops (swiglu, gelu): one invocation per VEC elements, the
// workgroups folded over x and y of the grid. Specialisation constants:
//   0 WG      invocations per workgroup
//   1 CONTIG  1: every tensor is dense row-major (offset = first + e)
//   2 VEC     4: CONTIG, 4-element aligned starts and a count divisible by 4
#ifndef TESSERA_VULKAN_ELEMENTWISE_GLSL
#define TESSERA_VULKAN_ELEMENTWISE_GLSL

#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint CONTIG = 1;
layout(constant_id = 2) const uint VEC = 1;

// A rank-4 view (leading extents of 1 added): element (i0, i1, i2, i3) is
// first + i0*s0 + i1*s1 + i2*s2 + i3*s3.
struct ElemTensor {
  uint first, s0, s1, s2, s3;
};

uint item_index() {
  return (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
}

uint elem_offset(ElemTensor t, uint e, uint d1, uint d2, uint d3) {
  if (CONTIG != 0u)
    return t.first + e;
  uint i3 = e % d3;
  e /= d3;
  uint i2 = e % d2;
  e /= d2;
  return t.first + (e / d1) * t.s0 + (e % d1) * t.s1 + i2 * t.s2 + i3 * t.s3;
}

#endif
