#version 450
// SPDX-License-Identifier: Apache-2.0
// Cooperative-matrix multiply-add throughput kernel (GL_NV_cooperative_matrix).
// Compiled several times with -D defines (see build.sh):
//   MMA_N     N of the MxNxK = 16xNx16 shape: 16 (default) or 8
//   ACC_BITS  accumulator precision: 32 (default) or 16
//   NACC      number of independent accumulators: 4 or 8 (default)
//   ACC_ARRAY 0: named variables acc0..acc7 (default); 1: an array updated in an [[unroll]] loop,
//             which is how the GEMM shader writes it
// Each subgroup (32 invocations on NVIDIA, 4 per workgroup) does NACC MulAdds per iteration:
// 2*16*MMA_N*16 FLOP each.
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require

#ifndef MMA_N
#define MMA_N 16
#endif
#ifndef ACC_BITS
#define ACC_BITS 32
#endif
#ifndef NACC
#define NACC 8
#endif
#ifndef ACC_ARRAY
#define ACC_ARRAY 0
#endif

#if ACC_BITS == 32
#define ACC_T float
#else
#define ACC_T float16_t
#endif
#define MAT_A fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define MAT_B fcoopmatNV<16, gl_ScopeSubgroup, 16, MMA_N>
#define MAT_C fcoopmatNV<ACC_BITS, gl_ScopeSubgroup, 16, MMA_N>
#define A_ELEMS (16 * 16)
#define B_ELEMS (16 * MMA_N)
#define C_ELEMS (16 * MMA_N)

layout(local_size_x = 128) in;
layout(push_constant) uniform Push { uint iters; };
// The host gives every workgroup its own 64 KiB slice of this buffer.
layout(set = 0, binding = 0) writeonly buffer Out { ACC_T data[]; } outbuf;

// Two A and two B fragments, so the MulAdds of one iteration are not all the same product.
shared float16_t tile[2 * A_ELEMS + 2 * B_ELEMS];

void main() {
  // Nonzero data that depends on a run-time value, so the compiler cannot fold the loads.
  for (uint i = gl_LocalInvocationIndex; i < tile.length(); i += gl_WorkGroupSize.x)
    tile[i] = float16_t(float(1u + (i + iters) % 7u) / 512.0);
  barrier();

  uint base = gl_WorkGroupID.x * (65536u / (ACC_BITS / 8)) + gl_SubgroupID * NACC * C_ELEMS;

#if ACC_ARRAY
  MAT_A a[2];
  MAT_B b[2];
  coopMatLoadNV(a[0], tile, 0, 16, false);
  coopMatLoadNV(a[1], tile, A_ELEMS, 16, false);
  coopMatLoadNV(b[0], tile, 2 * A_ELEMS, MMA_N, false);
  coopMatLoadNV(b[1], tile, 2 * A_ELEMS + B_ELEMS, MMA_N, false);
  MAT_C acc[NACC];
  [[unroll]] for (int j = 0; j < NACC; ++j) acc[j] = MAT_C(0.0);
  for (uint it = 0; it < iters; ++it) {
    [[unroll]] for (int j = 0; j < NACC; ++j)
      acc[j] = coopMatMulAddNV(a[(j >> 1) & 1], b[j & 1], acc[j]);
  }
  [[unroll]] for (int j = 0; j < NACC; ++j)
    coopMatStoreNV(acc[j], outbuf.data, base + uint(j) * C_ELEMS, MMA_N, false);
#else
  // Named accumulators: no array for the compiler to keep in (or spill to) local memory.
  MAT_C acc0 = MAT_C(0.0), acc1 = MAT_C(0.0), acc2 = MAT_C(0.0), acc3 = MAT_C(0.0);
#if NACC == 8
  MAT_C acc4 = MAT_C(0.0), acc5 = MAT_C(0.0), acc6 = MAT_C(0.0), acc7 = MAT_C(0.0);
#endif
  MAT_A a0, a1;
  MAT_B b0, b1;
  coopMatLoadNV(a0, tile, 0, 16, false);
  coopMatLoadNV(a1, tile, A_ELEMS, 16, false);
  coopMatLoadNV(b0, tile, 2 * A_ELEMS, MMA_N, false);
  coopMatLoadNV(b1, tile, 2 * A_ELEMS + B_ELEMS, MMA_N, false);
  for (uint it = 0; it < iters; ++it) {
    acc0 = coopMatMulAddNV(a0, b0, acc0);
    acc1 = coopMatMulAddNV(a0, b1, acc1);
    acc2 = coopMatMulAddNV(a1, b0, acc2);
    acc3 = coopMatMulAddNV(a1, b1, acc3);
#if NACC == 8
    acc4 = coopMatMulAddNV(a0, b0, acc4);
    acc5 = coopMatMulAddNV(a0, b1, acc5);
    acc6 = coopMatMulAddNV(a1, b0, acc6);
    acc7 = coopMatMulAddNV(a1, b1, acc7);
#endif
  }
  coopMatStoreNV(acc0, outbuf.data, base + 0 * C_ELEMS, MMA_N, false);
  coopMatStoreNV(acc1, outbuf.data, base + 1 * C_ELEMS, MMA_N, false);
  coopMatStoreNV(acc2, outbuf.data, base + 2 * C_ELEMS, MMA_N, false);
  coopMatStoreNV(acc3, outbuf.data, base + 3 * C_ELEMS, MMA_N, false);
#if NACC == 8
  coopMatStoreNV(acc4, outbuf.data, base + 4 * C_ELEMS, MMA_N, false);
  coopMatStoreNV(acc5, outbuf.data, base + 5 * C_ELEMS, MMA_N, false);
  coopMatStoreNV(acc6, outbuf.data, base + 6 * C_ELEMS, MMA_N, false);
  coopMatStoreNV(acc7, outbuf.data, base + 7 * C_ELEMS, MMA_N, false);
#endif
#endif
}
