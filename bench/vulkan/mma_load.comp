#version 450
// SPDX-License-Identifier: Apache-2.0
// Cooperative-matrix multiply-adds fed from shared memory inside the loop, as
// tessera's GEMM shader does: each iteration every subgroup loads 4 A
// fragments (16x16 f16) and 8 B fragments (16x8 f16) from a shared tile and
// runs the 32 16x8x16 MulAdds between them into 32 f32 accumulators.
//   SH_UVEC4   0: the shared tile is float16_t[]; 1: uvec4[] (the GEMM's type,
//              offsets and strides then count 16-byte units)
//   B_COLMAJOR 1: B fragments loaded column-major (B stored [n][k])
//   B_N        8 (default): B fragments 16x8, 32 16x8x16 MulAdds; 16: B
//              fragments 16x16, 4 of them and 16 16x16x16 MulAdds (the same
//              FLOP and bytes; 72 ldmatrix instead of 108, the same HMMA
//              count in the H100 driver's code; docs/PERFORMANCE.md)
//   SRC_GLOBAL 1: the fragments come from the workgroup's own 8 KiB of the
//              storage buffer (L1-resident after the first pass) instead of
//              shared memory; needs SH_UVEC4 1. Its contents are whatever the
//              buffer holds: the timing does not depend on the values.
// FLOP per workgroup and iteration: 32 * 4096 * 4 subgroups = 524288.
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require

#ifndef SH_UVEC4
#define SH_UVEC4 0
#endif
#ifndef B_COLMAJOR
#define B_COLMAJOR 0
#endif
#ifndef B_N
#define B_N 8
#endif
#ifndef SRC_GLOBAL
#define SRC_GLOBAL 0
#endif

layout(local_size_x = 128) in;
layout(push_constant) uniform Push { uint iters; };
layout(set = 0, binding = 0) writeonly buffer Out { float data[]; } outbuf;
layout(set = 0, binding = 0) readonly buffer In { uvec4 data[]; } inbuf;

// A: 64 rows of 32 k (+8 padding halfs); B: 32 k rows of 64 n (+8), or,
// column-major, 64 n rows of 32 k (+8). Lengths in halfs.
const uint A_LINE = 40u, B_LINE = B_COLMAJOR != 0 ? 40u : 72u;
const uint A_HALFS = 64u * 40u, B_OFF = A_HALFS, TOTAL = A_HALFS + 64u * 72u;
#if SH_UVEC4
shared uvec4 tile[TOTAL / 8u];
#define UNIT(h) ((h) / 8u)
#else
shared float16_t tile[TOTAL];
#define UNIT(h) (h)
#endif

void main() {
  // Nonzero data that depends on a run-time value, so nothing folds.
#if SH_UVEC4
  for (uint i = gl_LocalInvocationIndex; i < TOTAL / 8u; i += 128u) {
    uint w[4];
    for (uint j = 0u; j < 4u; j++)
      w[j] = packFloat2x16(f16vec2(float16_t(float(1u + (8u * i + 2u * j + iters) % 7u) / 512.0),
                                   float16_t(float(1u + (8u * i + 2u * j + 1u + iters) % 7u) / 512.0)));
    tile[i] = uvec4(w[0], w[1], w[2], w[3]);
  }
#else
  for (uint i = gl_LocalInvocationIndex; i < TOTAL; i += 128u)
    tile[i] = float16_t(float(1u + (i + iters) % 7u) / 512.0);
#endif
  barrier();

#if SRC_GLOBAL
  const uint src_base = gl_WorkGroupID.x * 4096u; // the slice, in uvec4s
#define SRC inbuf.data
#define AT(h) (src_base + UNIT(h))
#else
#define SRC tile
#define AT(h) UNIT(h)
#endif
  const uint NB = 64u / B_N; // B fragments per k half
  fcoopmatNV<32, gl_ScopeSubgroup, 16, B_N> acc[4u * NB];
  [[unroll]] for (uint t = 0u; t < 4u * NB; t++)
    acc[t] = fcoopmatNV<32, gl_ScopeSubgroup, 16, B_N>(0.0);
  fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fa[4];
  fcoopmatNV<16, gl_ScopeSubgroup, 16, B_N> fb[NB];
  for (uint it = 0u; it < iters; it++) {
    uint kk = (it & 1u) * 16u; // alternate k halves: the loads cannot be hoisted
    [[unroll]] for (uint i = 0u; i < 4u; i++)
      coopMatLoadNV(fa[i], SRC, AT(i * 16u * A_LINE + kk), UNIT(A_LINE), false);
    [[unroll]] for (uint j = 0u; j < NB; j++) {
      if (B_COLMAJOR != 0)
        coopMatLoadNV(fb[j], SRC, AT(B_OFF + j * B_N * B_LINE + kk), UNIT(B_LINE), true);
      else
        coopMatLoadNV(fb[j], SRC, AT(B_OFF + kk * B_LINE + j * B_N), UNIT(B_LINE), false);
    }
    [[unroll]] for (uint i = 0u; i < 4u; i++)
      [[unroll]] for (uint j = 0u; j < NB; j++)
        acc[i * NB + j] = coopMatMulAddNV(fa[i], fb[j], acc[i * NB + j]);
  }
  // 32 accumulators of 128 floats per subgroup: the workgroup's 64 KiB slice.
  uint base = gl_WorkGroupID.x * 16384u + gl_SubgroupID * 4096u;
  [[unroll]] for (uint t = 0u; t < 4u * NB; t++)
    coopMatStoreNV(acc[t], outbuf.data, base + t * 16u * B_N, B_N, false);
}
