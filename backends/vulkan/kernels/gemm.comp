/* SPDX-License-Identifier: Apache-2.0 */
#version 450
// GEMM and grouped GEMM, the path every device runs: shared-memory tiles of A
// and B (converted to f32 once, when staged), a TM x TN block of outputs per
// invocation in registers, f32 accumulation, the epilogue fused into the
// store. Any strides: the staging order follows the operand's contiguous
// dimension (A_KFAST, B_NFAST) so that neighbouring invocations read
// neighbouring elements. Bindings and push constants: gemm_common.glsl.
//
// GPU builds fix TM x TN at build time (gemm_<dtype>_<TM>x<TN>): glslc then
// unrolls the register loops and the accumulators stay in registers (with
// specialisation constants the NVIDIA driver left 8x8 blocks in local memory,
// 10x slower). The _rolled builds (for lavapipe) take TM, TN as
// specialisation constants and keep the k step rolled: lavapipe's LLVM
// otherwise unrolls BK x TM x TN FMAs and compiles for seconds per pipeline.
// @variant f32_4x4 -DDTYPE_F32 -DTM_C=4 -DTN_C=4
// @variant f16_4x4 -DDTYPE_F16 -DTM_C=4 -DTN_C=4
// @variant bf16_4x4 -DDTYPE_BF16 -DTM_C=4 -DTN_C=4
// @variant f32_8x8 -DDTYPE_F32 -DTM_C=8 -DTN_C=8
// @variant f16_8x8 -DDTYPE_F16 -DTM_C=8 -DTN_C=8
// @variant bf16_8x8 -DDTYPE_BF16 -DTM_C=8 -DTN_C=8
// @variant f32_rolled -DDTYPE_F32 -DROLLED
// @variant f16_rolled -DDTYPE_F16 -DROLLED
// @variant bf16_rolled -DDTYPE_BF16 -DROLLED
#extension GL_EXT_control_flow_attributes : require
#include "gemm_common.glsl"
#if defined(ROLLED)
#define LOOP [[dont_unroll]]
#else
#define LOOP [[unroll]]
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint BK = 16;
#if defined(ROLLED)
layout(constant_id = 4) const uint TM = 4;
layout(constant_id = 5) const uint TN = 4;
#else
const uint TM = TM_C, TN = TN_C;
#endif
layout(constant_id = 6) const uint A_KFAST = 1; // A's k stride is 1
layout(constant_id = 7) const uint B_NFAST = 1; // B's n stride is 1
layout(constant_id = 8) const uint OUT_F32 = 0;
layout(constant_id = 9) const uint GROUPED = 0;

const uint WG = (BM / TM) * (BN / TN);
const uint TX = BN / TN; // invocations along n
const uint TY = BM / TM; // along m

// One column of padding: the k-fast staging order then writes to distinct
// banks (stride BM + 1), and the reads below stay conflict-free.
shared float sa[BK * (BM + 1u)];
shared float sb[BK * (BN + 1u)];

void main() {
  uint z, row0, m0, mcount;
  gemm_locate(GROUPED != 0u, BM, z, row0, m0, mcount);
  if (m0 >= mcount)
    return; // uniform over the workgroup
  uint n0 = gl_WorkGroupID.y * BN;
  uint tid = gl_LocalInvocationID.x;
  uint tx = tid % TX, ty = tid / TX;
  uint a_base = p.a_first + z * p.a_sb + row0 * p.a_sm;
  uint b_base = p.b_first + z * p.b_sb;

  float acc[TM][TN];
  [[unroll]] for (uint i = 0u; i < TM; i++)
    [[unroll]] for (uint j = 0u; j < TN; j++)
      acc[i][j] = 0.0;

  for (uint k0 = 0u; k0 < p.k; k0 += BK) {
    for (uint e = tid; e < BM * BK; e += WG) {
      uint mm = A_KFAST != 0u ? e / BK : e % BM;
      uint kk = A_KFAST != 0u ? e % BK : e / BM;
      uint gm = m0 + mm, gk = k0 + kk;
      float v = 0.0;
      if (gm < mcount && gk < p.k)
        v = gemm_load_a(a_base + gm * p.a_sm + gk * p.a_sk);
      sa[kk * (BM + 1u) + mm] = v;
    }
    for (uint e = tid; e < BN * BK; e += WG) {
      uint nn = B_NFAST != 0u ? e % BN : e / BK;
      uint kk = B_NFAST != 0u ? e / BN : e % BK;
      uint gn = n0 + nn, gk = k0 + kk;
      float v = 0.0;
      if (gn < p.n && gk < p.k)
        v = gemm_load_b(b_base + gk * p.b_sk + gn * p.b_sn);
      sb[kk * (BN + 1u) + nn] = v;
    }
    barrier();
    LOOP for (uint kk = 0u; kk < BK; kk++) {
      float ra[TM], rb[TN];
      [[unroll]] for (uint i = 0u; i < TM; i++)
        ra[i] = sa[kk * (BM + 1u) + ty + i * TY];
      [[unroll]] for (uint j = 0u; j < TN; j++)
        rb[j] = sb[kk * (BN + 1u) + tx + j * TX];
      [[unroll]] for (uint i = 0u; i < TM; i++)
        [[unroll]] for (uint j = 0u; j < TN; j++)
          acc[i][j] = fma(ra[i], rb[j], acc[i][j]);
    }
    barrier();
  }

  [[unroll]] for (uint i = 0u; i < TM; i++) {
    uint gm = m0 + ty + i * TY;
    [[unroll]] for (uint j = 0u; j < TN; j++) {
      uint gn = n0 + tx + j * TX;
      if (gm < mcount && gn < p.n)
        gemm_store(z, row0, gm, gn, acc[i][j], OUT_F32 != 0u);
    }
  }
}
