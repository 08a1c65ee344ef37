/* SPDX-License-Identifier: Apache-2.0 */
#version 450
// GEMM and grouped GEMM on cooperative matrices, shape 16x8x16 (A 16x16,
// B 16x8, f16 -> f32, subgroup scope). Written against
// GL_NV_cooperative_matrix because Debian 12's glslc (glslang 11.13) has no
// GL_KHR_cooperative_matrix; the plugin rewrites the SPIR-V to
// SPV_KHR_cooperative_matrix when it loads it (spirv_rewrite.c). The 16x8 B
// fragment is what makes that rewrite possible: A, B and accumulator
// fragments then have distinct NV types, each of which maps to one KHR
// matrix use.
//
// A workgroup computes a BM x BN tile with SG_M x SG_N subgroups, each WM x WN
// 16x16 accumulators. A and B go through shared memory as f16, two stages:
// while the subgroups multiply one stage, each invocation holds the next
// step's loads in registers and stores them into the other stage, so there is
// one barrier per k step. The staging unit is 8 elements along the operand's
// contiguous dimension (one 16-byte load when A_VEC / B_VEC, else 8 checked
// scalar loads); the shared layout follows that dimension (row- or
// column-major fragments), with 8 elements of padding per line against bank
// conflicts. The epilogue stages rows of f32 accumulators in the A stages.
// Bindings and push constants: gemm_common.glsl.
// Tile shapes are fixed per build (gemm_coopmat_f16_<BM>x<BN>_<SG_M>x<SG_N>,
// subgroups of 32) so that glslc unrolls the fragment loops and the
// accumulator arrays stay in registers.
// @variant f16_64x64_2x2 -DDTYPE_F16 -DSG_M_C=2 -DSG_N_C=2 -DWM_C=2 -DWN_C=2
// @variant f16_128x128_2x2 -DDTYPE_F16 -DSG_M_C=2 -DSG_N_C=2 -DWM_C=4 -DWN_C=4
// @variant f16_128x128_2x4 -DDTYPE_F16 -DSG_M_C=2 -DSG_N_C=4 -DWM_C=4 -DWN_C=2
// @variant f16_128x64_2x2 -DDTYPE_F16 -DSG_M_C=2 -DSG_N_C=2 -DWM_C=4 -DWN_C=2
// (16-deep k steps, with 128x128 and 128x256 / 256x128 tiles, ran correctly
// but slower on the H100 and were dropped: docs/PERFORMANCE.md.)
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
#include "gemm_common.glsl"

const uint SG_M = SG_M_C, SG_N = SG_N_C; // subgroups along m and n
const uint WM = WM_C, WN = WN_C;         // 16x16 tiles per subgroup along m and n
const uint BM = SG_M * WM * 16u, BN = SG_N * WN * 16u, BK = 32u;
layout(local_size_x = SG_M_C * SG_N_C * 32) in;
layout(constant_id = 8) const uint A_KFAST = 1;
layout(constant_id = 9) const uint B_NFAST = 1;
layout(constant_id = 10) const uint A_VEC = 0;
layout(constant_id = 11) const uint B_VEC = 0;
layout(constant_id = 12) const uint OUT_F32 = 0;
layout(constant_id = 13) const uint GROUPED = 0;
// Diagnosis only (TESSERA_VULKAN_COOPMAT_PROBE, a sum of bits; wrong
// results): 1 skips the global loads (multiplies what shared memory holds),
// 2 the multiplies, 4 the barrier of the k loop, 8 the second shared stage,
// 16 the epilogue.
layout(constant_id = 14) const uint PROBE = 0;

const uint WG = SG_M * SG_N * 32u;
// Lines of the shared tiles (in 16-byte units) and their lengths.
const uint A_LINE = A_KFAST != 0u ? (BK + 8u) / 8u : (BM + 8u) / 8u;
const uint A_LINES = A_KFAST != 0u ? BM : BK;
const uint B_LINE = B_NFAST != 0u ? (BN + 8u) / 8u : (BK + 8u) / 8u;
const uint B_LINES = B_NFAST != 0u ? BK : BN;
const uint A_STAGE = A_LINE * A_LINES, B_STAGE = B_LINE * B_LINES;
const uint A_UNITS = BM * BK / 8u, B_UNITS = BN * BK / 8u; // per k step
const uint A_PER = A_UNITS / WG, B_PER = B_UNITS / WG;       // per invocation

layout(set = 0, binding = 0) readonly buffer GemmA4 { uvec4 a_vec[]; };
layout(set = 0, binding = 1) readonly buffer GemmB4 { uvec4 b_vec[]; };

// Two A stages, then two B stages; the epilogue reuses all of it.
shared uvec4 smem[2u * (A_STAGE + B_STAGE)];
const uint B_BASE = 2u * A_STAGE;

uint pack2(uint lo, uint hi) { return lo | (hi << 16); }

// Unit u of A's k step at k0: 8 elements along A's contiguous dimension,
// zero outside the problem.
uvec4 load_a(uint u, uint a_base, uint m0, uint mcount, uint k0) {
  uint gm, gk;
  if (A_KFAST != 0u) {
    gm = m0 + u / (BK / 8u);
    gk = k0 + (u % (BK / 8u)) * 8u;
  } else {
    gk = k0 + u / (BM / 8u);
    gm = m0 + (u % (BM / 8u)) * 8u;
  }
  uint e = a_base + gm * p.a_sm + gk * p.a_sk;
  if (A_VEC != 0u)
    return gm < mcount && gk < p.k ? a_vec[e >> 3] : uvec4(0u);
  uint w[8];
  [[unroll]] for (uint i = 0u; i < 8u; i++) {
    uint m = A_KFAST != 0u ? gm : gm + i, k = A_KFAST != 0u ? gk + i : gk;
    w[i] = m < mcount && k < p.k ? uint(a_elem[e + i * (A_KFAST != 0u ? p.a_sk : p.a_sm)]) : 0u;
  }
  return uvec4(pack2(w[0], w[1]), pack2(w[2], w[3]), pack2(w[4], w[5]), pack2(w[6], w[7]));
}

uvec4 load_b(uint u, uint b_base, uint n0, uint k0) {
  uint gn, gk;
  if (B_NFAST != 0u) {
    gk = k0 + u / (BN / 8u);
    gn = n0 + (u % (BN / 8u)) * 8u;
  } else {
    gn = n0 + u / (BK / 8u);
    gk = k0 + (u % (BK / 8u)) * 8u;
  }
  uint e = b_base + gk * p.b_sk + gn * p.b_sn;
  if (B_VEC != 0u)
    return gn < p.n && gk < p.k ? b_vec[e >> 3] : uvec4(0u);
  uint w[8];
  [[unroll]] for (uint i = 0u; i < 8u; i++) {
    uint n = B_NFAST != 0u ? gn + i : gn, k = B_NFAST != 0u ? gk : gk + i;
    w[i] = n < p.n && k < p.k ? uint(b_elem[e + i * (B_NFAST != 0u ? p.b_sn : p.b_sk)]) : 0u;
  }
  return uvec4(pack2(w[0], w[1]), pack2(w[2], w[3]), pack2(w[4], w[5]), pack2(w[6], w[7]));
}

// Where unit u lands in a shared stage (in 16-byte units).
uint a_slot(uint u) {
  uint per = A_KFAST != 0u ? BK / 8u : BM / 8u;
  return (u / per) * A_LINE + u % per;
}
uint b_slot(uint u) {
  uint per = B_NFAST != 0u ? BN / 8u : BK / 8u;
  return (u / per) * B_LINE + u % per;
}

void main() {
  uint z, row0, m0, mcount;
  gemm_locate(GROUPED != 0u, BM, z, row0, m0, mcount);
  if (m0 >= mcount)
    return; // uniform over the workgroup
  uint n0 = gl_WorkGroupID.y * BN;
  uint tid = gl_LocalInvocationID.x;
  uint sg = gl_SubgroupID;
  uint wm0 = (sg / SG_N) * WM * 16u, wn0 = (sg % SG_N) * WN * 16u;
  uint a_base = p.a_first + z * p.a_sb + row0 * p.a_sm;
  uint b_base = p.b_first + z * p.b_sb;

  const uint WN8 = 2u * WN; // 16x8 fragments per subgroup along n
  fcoopmatNV<32, gl_ScopeSubgroup, 16, 8> acc[WM * WN8];
  [[unroll]] for (uint t = 0u; t < WM * WN8; t++)
    acc[t] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 8>(0.0);

  uvec4 ra[A_PER], rb[B_PER];
  [[unroll]] for (uint i = 0u; i < A_PER; i++)
    ra[i] = load_a(tid + i * WG, a_base, m0, mcount, 0u);
  [[unroll]] for (uint i = 0u; i < B_PER; i++)
    rb[i] = load_b(tid + i * WG, b_base, n0, 0u);
  [[unroll]] for (uint i = 0u; i < A_PER; i++)
    smem[a_slot(tid + i * WG)] = ra[i];
  [[unroll]] for (uint i = 0u; i < B_PER; i++)
    smem[B_BASE + b_slot(tid + i * WG)] = rb[i];
  barrier();

  // One 16-deep product step at shared-memory offset KK (a constant): the
  // fragment arrays are indexed only by unrolled loops, so every index is a
  // constant. Indexing them by the step as well (fa[kk / 16][i] in a loop
  // over kk) left them in local memory on NVIDIA's driver: ~30 TFLOP/s at
  // 4096^3 against ~620 for the bare multiply (bench/vulkan/).
  fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fa[WM];
  fcoopmatNV<16, gl_ScopeSubgroup, 16, 8> fb[WN8];
#define COOPMAT_STEP(KK)                                                                           \
  [[unroll]] for (uint i = 0u; i < WM; i++) {                                                      \
    uint m = wm0 + i * 16u;                                                                        \
    if (A_KFAST != 0u)                                                                             \
      coopMatLoadNV(fa[i], smem, sa0 + m * A_LINE + (KK) / 8u, A_LINE, false);                     \
    else                                                                                           \
      coopMatLoadNV(fa[i], smem, sa0 + (KK) * A_LINE + m / 8u, A_LINE, true);                      \
  }                                                                                                \
  [[unroll]] for (uint j = 0u; j < WN8; j++) {                                                     \
    uint n = wn0 + j * 8u;                                                                         \
    if (B_NFAST != 0u)                                                                             \
      coopMatLoadNV(fb[j], smem, sb0 + (KK) * B_LINE + n / 8u, B_LINE, false);                     \
    else                                                                                           \
      coopMatLoadNV(fb[j], smem, sb0 + n * B_LINE + (KK) / 8u, B_LINE, true);                      \
  }                                                                                                \
  if ((PROBE & 2u) == 0u) {                                                                        \
    [[unroll]] for (uint i = 0u; i < WM; i++)                                                      \
      [[unroll]] for (uint j = 0u; j < WN8; j++)                                                   \
        acc[i * WN8 + j] = coopMatMulAddNV(fa[i], fb[j], acc[i * WN8 + j]);                        \
  } else if ((KK) == 0u) {                                                                         \
    acc[0] = coopMatMulAddNV(fa[0], fb[0], acc[0]);                                                \
  }

  uint steps = (p.k + BK - 1u) / BK;
  for (uint s = 0u; s < steps; s++) {
    uint stage = (PROBE & 8u) != 0u ? 0u : s & 1u;
    bool more = s + 1u < steps && (PROBE & 1u) == 0u;
    if (more) {
      uint k1 = (s + 1u) * BK;
      [[unroll]] for (uint i = 0u; i < A_PER; i++)
        ra[i] = load_a(tid + i * WG, a_base, m0, mcount, k1);
      [[unroll]] for (uint i = 0u; i < B_PER; i++)
        rb[i] = load_b(tid + i * WG, b_base, n0, k1);
    }
    uint sa0 = stage * A_STAGE, sb0 = B_BASE + stage * B_STAGE;
    COOPMAT_STEP(0u)
    COOPMAT_STEP(16u)
    if (more) {
      uint next = (stage ^ 1u);
      [[unroll]] for (uint i = 0u; i < A_PER; i++)
        smem[next * A_STAGE + a_slot(tid + i * WG)] = ra[i];
      [[unroll]] for (uint i = 0u; i < B_PER; i++)
        smem[B_BASE + next * B_STAGE + b_slot(tid + i * WG)] = rb[i];
    }
    if ((PROBE & 4u) == 0u)
      barrier();
  }

  // Epilogue, a row of accumulators (16 x 16 WN) at a time, staged as f32
  // in the shared stages (free once every subgroup is past the k loop;
  // configs.c checks that they hold a row per subgroup), then stored four
  // adjacent columns per invocation and step. Every accumulator index must
  // be a constant, hence the rows spelled out and the column loop unrolled:
  // one indexed by a loop variable puts the whole accumulator array in local
  // memory, and every product of the k loop then goes through it (NVIDIA,
  // 4096^3 f16: 30 TFLOP/s instead of ~220).
  if ((PROBE & 16u) != 0u)
    return;
  if ((PROBE & 4u) != 0u)
    barrier();
  const uint ROW = WN8 * 8u; // floats in a staged row
  uint lane = gl_SubgroupInvocationID;
  uint c0 = sg * (16u * ROW / 4u); // this subgroup's rows, in 16-byte units
#define COOPMAT_EPILOGUE_ROW(I)                                                                    \
  if ((I) < WM) {                                                                                  \
    [[unroll]] for (uint j = 0u; j < WN8; j++)                                                     \
      coopMatStoreNV(acc[(I) * WN8 + j], smem, c0 + j * 2u, ROW / 4u, false);                      \
    subgroupMemoryBarrierShared();                                                                 \
    subgroupBarrier();                                                                             \
    for (uint q = lane; q < 4u * ROW; q += 32u) {                                                  \
      uint gm = m0 + wm0 + (I) * 16u + q / (ROW / 4u), gn = n0 + wn0 + (q % (ROW / 4u)) * 4u;      \
      if (gm < mcount && gn < p.n)                                                                 \
        gemm_store4(z, row0, gm, gn, uintBitsToFloat(smem[c0 + q]), OUT_F32 != 0u);                \
    }                                                                                              \
    subgroupBarrier();                                                                             \
  }
  COOPMAT_EPILOGUE_ROW(0u)
  COOPMAT_EPILOGUE_ROW(1u)
  COOPMAT_EPILOGUE_ROW(2u)
  COOPMAT_EPILOGUE_ROW(3u)
}
