/* SPDX-License-Identifier: Apache-2.0 */
#version 450
// kv_append (reshape-and-cache): row t of k_new (and v_new) [T, Hkv, D]
// goes to row slots[t] % block_size of block slots[t] / block_size of
// k_cache (and v_cache) [num_blocks, block_size, Hkv, D]. A negative slot
// skips its row; one at or past num_blocks * block_size is never written and
// its row t is recorded (atomic min) in faults[TSR_PLUGIN_FAULT_KV_SLOT].
// Any strides: one invocation per element of k_new, (t, h, d) from the flat
// index over [T, Hkv, D]; workgroups folded over x and y. Slots are int32 at
// any 4-byte address.
// Bindings: 0 k_new, 1 v_new, 2 k_cache, 3 v_cache (v bound to k and
// untouched without values), 4 slots, 5 faults.
// @variant f32 -DDTYPE_F32
// @variant f16 -DDTYPE_F16
// @variant bf16 -DDTYPE_BF16
#include "common.glsl"

layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) readonly buffer KNew { ELEM_T k_new[]; };
layout(set = 0, binding = 1) readonly buffer VNew { ELEM_T v_new[]; };
layout(set = 0, binding = 2) writeonly buffer KCache { ELEM_T k_cache[]; };
layout(set = 0, binding = 3) writeonly buffer VCache { ELEM_T v_cache[]; };
layout(set = 0, binding = 4) readonly buffer Slots { int slots[]; };
layout(set = 0, binding = 5) buffer Faults { int faults[]; };

struct Strided3 {
  uint first, s0, s1, s2;
};

layout(push_constant) uniform KvAppendPush {
  uint count, heads, dim, flags; // count: T * Hkv * D; flags bit 0: values too
  Strided3 k_new, v_new;         // strides along T, Hkv, D
  uint kc_first, kc_s0, kc_s1, kc_s2, kc_s3;
  uint vc_first, vc_s0, vc_s1, vc_s2, vc_s3;
  uint slots_first, slots_stride;
  uint block_size;
  int slot_count; // num_blocks * block_size (fits int32: validated)
} p;

const uint FAULT_KV_SLOT = 7u; // TSR_PLUGIN_FAULT_KV_SLOT

void main() {
  uint e = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x +
           gl_LocalInvocationID.x;
  if (e >= p.count)
    return;
  uint d = e % p.dim, th = e / p.dim;
  uint h = th % p.heads, t = th / p.heads;
  int slot = slots[p.slots_first + t * p.slots_stride];
  if (slot < 0)
    return;
  if (slot >= p.slot_count) {
    if (h == 0u && d == 0u)
      atomicMin(faults[FAULT_KV_SLOT], int(t));
    return;
  }
  uint block = uint(slot) / p.block_size, row = uint(slot) % p.block_size;
  k_cache[p.kc_first + block * p.kc_s0 + row * p.kc_s1 + h * p.kc_s2 + d * p.kc_s3] =
      k_new[p.k_new.first + t * p.k_new.s0 + h * p.k_new.s1 + d * p.k_new.s2];
  if ((p.flags & 1u) != 0u)
    v_cache[p.vc_first + block * p.vc_s0 + row * p.vc_s1 + h * p.vc_s2 + d * p.vc_s3] =
        v_new[p.v_new.first + t * p.v_new.s0 + h * p.v_new.s1 + d * p.v_new.s2];
}
