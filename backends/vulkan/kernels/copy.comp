/* SPDX-License-Identifier: Apache-2.0 */
#version 450
// Buffer copy in 16-byte units (tsr_buffer_copy when both offsets and the
// size are multiples of 16): faster than vkCmdCopyBuffer on a compute queue,
// and the bandwidth ceiling bench rows are measured against.
// Bindings: 0 source, 1 destination. Each invocation moves UNITS units,
// WG apart, so a workgroup's accesses stay contiguous.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint UNITS = 4;

layout(set = 0, binding = 0) readonly buffer S { uvec4 src[]; };
layout(set = 0, binding = 1) writeonly buffer D { uvec4 dst[]; };

layout(push_constant) uniform Push {
  uint count, src_first, dst_first;
} p;

void main() {
  uint group = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  uint base = group * WG * UNITS + gl_LocalInvocationID.x;
  for (uint k = 0u; k < UNITS; k++) {
    uint i = base + k * WG;
    if (i < p.count)
      dst[p.dst_first + i] = src[p.src_first + i];
  }
}
