/* SPDX-License-Identifier: Apache-2.0 */
#version 450
// Flash attention forward on cooperative matrices (f16 in, f32 accumulate),
// for head dims of 64 and 128 on devices whose subgroups are 32 wide. The
// same push constants and bindings as attention.comp; the same NV -> KHR
// SPIR-V rewrite as gemm_coopmat.comp (spirv_rewrite.c), hence the same three
// fragment types: A 16x16 f16, B 16x8 f16, accumulator 16x8 f32.
//
// A workgroup is 4 subgroups and takes 64 query rows of one (batch, head),
// 16 per subgroup; it walks the visible keys 64 at a time. Per block:
//   1. K's 64 rows go to shared memory (f16, rows padded by 8 elements);
//   2. each subgroup forms S = Q K^T for its 16 rows (Q's fragments stay in
//      registers for the whole walk) and stores S to its own shared region;
//   3. scalar code (two invocations per row, 32 keys each) applies the scale
//      and the mask, takes the row max, and writes P = exp2(S - m) as f16
//      back into the region;
//   4. V's 64 rows replace K's, and each subgroup adds P V to its output
//      fragments.
// The output lives in accumulator fragments, which cannot be scaled per row
// in place, so the running max m is lazy: it moves only when a block's max
// exceeds it by more than RESCALE_LOG2 (P then stays <= 2^RESCALE_LOG2,
// exact in f16's range), and only then do the fragments go through shared
// memory to be rescaled. Softmax is invariant to the choice of m, so the
// result is the same; the first block that sees a key sets m without any
// rescaling (the output is still zero then).
// VEC (specialisation constant 0): q, k and v are staged by 16-byte loads;
// the host sets it when dim equals the build's head dim and every start and
// stride is a multiple of 8 elements. Otherwise 8 checked 2-byte loads.
// Bindings: 0 q, 1 k, 2 v, 3 o, 4 lse (f32; bound to o and unused when absent).
// _serving builds: the serving forms as attention.comp's (push block
// AttentionServingPush, binding 5 the plan; attention_serving.glsl): rows
// and keys are staged row by row from the layout (a paged key's row through
// its block), so VEC needs every start and stride, the block stride
// included, to be a multiple of 8 elements. Dense builds are token for token
// what they were before serving existed.
// @variant f16_d64 -DDTYPE_F16 -DDP_C=64
// @variant f16_d128 -DDTYPE_F16 -DDP_C=128
// @variant f16_d64_serving -DDTYPE_F16 -DDP_C=64 -DSERVING
// @variant f16_d128_serving -DDTYPE_F16 -DDP_C=128 -DSERVING
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_vote : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint VEC = 0;

const uint DP = DP_C;          // head dim of the build
const uint BR = 64u, BC = 64u; // query rows per workgroup, keys per block
const uint LINE = (DP + 8u) / 8u; // a staged row of q, k or v, in 16-byte units
const uint REGION = 16u * BC / 4u; // a subgroup's S / P / rescale region, 16-byte units
const uint P_LINE = (BC + 8u) / 8u; // a row of P (f16) in the region
const float RESCALE_LOG2 = 8.0;

layout(set = 0, binding = 0) readonly buffer Q { ELEM_T q[]; };
layout(set = 0, binding = 0) readonly buffer Q4 { uvec4 q4[]; };
layout(set = 0, binding = 1) readonly buffer K { ELEM_T k[]; };
layout(set = 0, binding = 1) readonly buffer K4 { uvec4 k4[]; };
layout(set = 0, binding = 2) readonly buffer V { ELEM_T v[]; };
layout(set = 0, binding = 2) readonly buffer V4 { uvec4 v4[]; };
layout(set = 0, binding = 3) writeonly buffer O { ELEM_T o[]; };
layout(set = 0, binding = 4) writeonly buffer Lse { float lse[]; };

struct View {
  uint first, s0, s1, s2;
};

#if defined(SERVING)
layout(set = 0, binding = 5) readonly buffer Plan { int plan[]; };

layout(push_constant) uniform AttentionServingPush {
  uint max_q, plan_stride, group, block_size;
  View q, k, v, o; // attention_serving.glsl's views
  View lse;
  uint dim, flags; // flags: attention_serving.glsl's SERVING_*
  int window_left, window_right; // negative: unbounded
  float scale_log2, softcap_log2; // softcap_log2: softcap * log2 e, 0: none
} p;
#include "attention_serving.glsl"
// This workgroup's sequence: main's locals.
#define SQ uint(seq.q_len)
#define SKV uint(seq.kv_len)
#define SCORE(x) softcap_log2(poison_infinite(x))
#define STAGE(which, base, stride, r0, rows) stage(which, b, seq, which == 0u ? h : hk, r0, rows, tid)
#else
layout(push_constant) uniform AttentionPush {
  uint sq, skv, hq, group; // group: query heads per kv head
  View q, k, v, o; // strides along B, S, H (D is contiguous)
  View lse;        // strides along B, H, S
  uint dim, flags; // flags bit 0: write lse
  int window_left, window_right; // negative: unbounded
  float scale_log2;
} p;
#define SQ p.sq
#define SKV p.skv
#define SCORE(x) poison_infinite(x)
#define STAGE(which, base, stride, r0, rows) stage(which, base, stride, r0, rows, tid)
#endif

#define NEG_INF uintBitsToFloat(0xff800000u)

// A seen score that is infinite comes from an infinity in q or k (keys are
// never masked by -inf in the data): NaN, so that the row's sum, o and lse
// turn NaN as in the reference, where e^-inf = 0 would hide it. Masked keys
// get NEG_INF after this. The compare, unlike isinf, survives compilers
// that assume no infinities in arithmetic.
float poison_infinite(float s) {
  return abs(s) > 3.40282347e38 ? uintBitsToFloat(0x7fc00000u) : s;
}

// The staged rows (q before the walk, then k or v of each block), then the
// four subgroups' regions.
shared uvec4 smem[BC * LINE + 4u * REGION];
const uint REGION_BASE = BC * LINE;

uint pack2(uint lo, uint hi) { return lo | (hi << 16); }

#if defined(SERVING)
// Rows [r0, r0 + 64) of q (which 0, head `head`), k (1) or v (2, kv head
// `head`) of sequence b into the staged rows, each row's start from the
// layout; zero past `rows` and dim.
void stage(uint which, uint b, Seq seq, uint head, uint r0, uint rows, uint tid) {
  [[unroll]] for (uint i = 0u; i < BC * (DP / 8u) / 128u; i++) {
    uint u = tid + i * 128u;
    uint r = u / (DP / 8u), d = (u % (DP / 8u)) * 8u;
    uint e = 0u;
    if (r0 + r < rows)
      e = (which == 0u ? q_row(VIEW_Q, b, seq, head, r0 + r)
                       : kv_row(which == 1u ? VIEW_K : VIEW_V, b, seq, head, r0 + r)) +
          d;
#else
// Rows [r0, r0 + 64) of q (which 0), k (1) or v (2) from element `base`
// (rows `stride` apart) into the staged rows; zero past `rows` and dim.
void stage(uint which, uint base, uint stride, uint r0, uint rows, uint tid) {
  [[unroll]] for (uint i = 0u; i < BC * (DP / 8u) / 128u; i++) {
    uint u = tid + i * 128u;
    uint r = u / (DP / 8u), d = (u % (DP / 8u)) * 8u;
    uint e = base + (r0 + r) * stride + d;
#endif
    uvec4 x = uvec4(0u);
    if (r0 + r < rows) {
      if (VEC != 0u) {
        x = which == 0u ? q4[e >> 3] : which == 1u ? k4[e >> 3] : v4[e >> 3];
      } else {
        uint w[8];
        [[unroll]] for (uint j = 0u; j < 8u; j++) {
          w[j] = 0u;
          if (d + j < p.dim)
            w[j] = which == 0u ? uint(q[e + j]) : which == 1u ? uint(k[e + j]) : uint(v[e + j]);
        }
        x = uvec4(pack2(w[0], w[1]), pack2(w[2], w[3]), pack2(w[4], w[5]), pack2(w[6], w[7]));
      }
    }
    smem[r * LINE + d / 8u] = x;
  }
}

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  uint i0 = gl_WorkGroupID.x * BR;
  uint h = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
  uint hk = h / p.group;
#if defined(SERVING)
  Seq seq = seq_load(b, 0u, 0u);
  if (i0 >= SQ)
    return; // past the sequence's rows (uniform: before any barrier)
  if (seq.kv_len < 0) {
    // At fault: NaN rows (and lse), no key read.
    float qnan = uintBitsToFloat(0x7fc00000u);
    for (uint e = tid; e < BR * p.dim; e += 128u) {
      uint r = e / p.dim, d = e % p.dim;
      if (i0 + r < SQ)
        o[q_row(VIEW_O, b, seq, h, i0 + r) + d] = elem_make(qnan);
    }
    if ((p.flags & SERVING_LSE) != 0u && tid < BR && i0 + tid < SQ)
      lse[lse_at(b, seq, h, i0 + tid)] = qnan;
    return;
  }
#else
  uint q_base = p.q.first + b * p.q.s0 + h * p.q.s2;
  uint k_base = p.k.first + b * p.k.s0 + hk * p.k.s2;
  uint v_base = p.v.first + b * p.v.s0 + hk * p.v.s2;
#endif
  int shift = int(SKV) - int(SQ); // query row i sits at key position i + shift
  uint region = REGION_BASE + sg * REGION;
  // The scalar passes: two invocations per row, each 32 keys (or columns).
  uint row = lane >> 1, half_ = lane & 1u;
  int pos = int(i0 + sg * 16u + row) + shift;

  STAGE(0u, q_base, p.q.s1, i0, SQ);
  barrier();
  fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fq[DP / 16u];
  [[unroll]] for (uint d = 0u; d < DP / 16u; d++)
    coopMatLoadNV(fq[d], smem, sg * 16u * LINE + d * 2u, LINE, false);

  fcoopmatNV<32, gl_ScopeSubgroup, 16, 8> acc_o[DP / 8u];
  [[unroll]] for (uint d = 0u; d < DP / 8u; d++)
    acc_o[d] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 8>(0.0);
  float m = NEG_INF, l = 0.0; // this row's max in use and sum

  // The keys any row of this workgroup may see.
  int pos_first = int(i0) + shift, pos_last = int(min(i0 + BR, SQ)) - 1 + shift;
  int lo = 0, hi = int(SKV) - 1;
  if (p.window_left >= 0)
    lo = max(lo, pos_first - p.window_left);
  if (p.window_right >= 0)
    hi = min(hi, pos_last + p.window_right);

  for (int j0 = (lo / int(BC)) * int(BC); j0 <= hi; j0 += int(BC)) {
    barrier(); // q's fragments, or the previous block's V, are read
    STAGE(1u, k_base, p.k.s1, uint(j0), SKV);
    barrier();
    {
      fcoopmatNV<32, gl_ScopeSubgroup, 16, 8> acc_s[BC / 8u];
      [[unroll]] for (uint j = 0u; j < BC / 8u; j++)
        acc_s[j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 8>(0.0);
      [[unroll]] for (uint d = 0u; d < DP / 16u; d++) {
        [[unroll]] for (uint j = 0u; j < BC / 8u; j++) {
          // K^T's 16 x 8 fragment: column c is key 8 j + c, row r dim 16 d + r.
          fcoopmatNV<16, gl_ScopeSubgroup, 16, 8> fk;
          coopMatLoadNV(fk, smem, j * 8u * LINE + d * 2u, LINE, true);
          acc_s[j] = coopMatMulAddNV(fq[d], fk, acc_s[j]);
        }
      }
      [[unroll]] for (uint j = 0u; j < BC / 8u; j++)
        coopMatStoreNV(acc_s[j], smem, region + j * 2u, BC / 4u, false);
    }
    subgroupMemoryBarrierShared();
    subgroupBarrier();

    // This invocation's 32 scores, scaled and masked.
    float s[32];
    float block_max = NEG_INF;
    [[unroll]] for (uint c = 0u; c < 8u; c++) {
      vec4 x = uintBitsToFloat(smem[region + row * (BC / 4u) + half_ * 8u + c]);
      [[unroll]] for (uint e = 0u; e < 4u; e++) {
        int key = j0 + int(half_ * 32u + 4u * c + e);
        bool seen = key < int(SKV) && (p.window_left < 0 || key >= pos - p.window_left) &&
                    (p.window_right < 0 || key <= pos + p.window_right);
        s[4u * c + e] = seen ? SCORE(x[e] * p.scale_log2) : NEG_INF;
        block_max = max(block_max, s[4u * c + e]);
      }
    }
    block_max = max(block_max, subgroupShuffleXor(block_max, 1u));
    float corr = 1.0;
    bool move = block_max > m + RESCALE_LOG2; // false while block_max is -inf
    if (move) {
      corr = m == NEG_INF ? 0.0 : exp2(m - block_max);
      m = block_max;
    }
    // Output rows that hold something and must shrink: through the region,
    // 8 fragments (64 columns) a round.
    if (subgroupAny(move && l > 0.0)) {
      subgroupBarrier(); // every invocation has read its scores
      [[unroll]] for (uint round = 0u; round < DP / 64u; round++) {
        [[unroll]] for (uint j = 0u; j < 8u; j++)
          coopMatStoreNV(acc_o[round * 8u + j], smem, region + j * 2u, BC / 4u, false);
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        [[unroll]] for (uint c = 0u; c < 8u; c++) {
          uint at = region + row * (BC / 4u) + half_ * 8u + c;
          smem[at] = floatBitsToUint(uintBitsToFloat(smem[at]) * corr);
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        [[unroll]] for (uint j = 0u; j < 8u; j++)
          coopMatLoadNV(acc_o[round * 8u + j], smem, region + j * 2u, BC / 4u, false);
        subgroupBarrier();
      }
    }
    subgroupBarrier(); // the region is free for P
    float sum = 0.0;
    [[unroll]] for (uint c = 0u; c < 4u; c++) {
      uint w[4];
      [[unroll]] for (uint e = 0u; e < 4u; e++) {
        float p0 = s[8u * c + 2u * e] == NEG_INF ? 0.0 : exp2(s[8u * c + 2u * e] - m);
        float p1 = s[8u * c + 2u * e + 1u] == NEG_INF ? 0.0 : exp2(s[8u * c + 2u * e + 1u] - m);
        // The sum counts what P V multiplies: the f16 values.
        uint packed = packFloat2x16(f16vec2(p0, p1));
        vec2 rounded = unpackHalf2x16(packed);
        sum += rounded.x + rounded.y;
        w[e] = packed;
      }
      smem[region + row * P_LINE + half_ * 4u + c] = uvec4(w[0], w[1], w[2], w[3]);
    }
    sum += subgroupShuffleXor(sum, 1u);
    l = l * corr + sum;

    barrier(); // every subgroup is done with K (and has written its P)
    STAGE(2u, v_base, p.v.s1, uint(j0), SKV);
    barrier();
    [[unroll]] for (uint kk = 0u; kk < BC / 16u; kk++) {
      fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fp;
      coopMatLoadNV(fp, smem, region + kk * 2u, P_LINE, false);
      [[unroll]] for (uint d = 0u; d < DP / 8u; d++) {
        fcoopmatNV<16, gl_ScopeSubgroup, 16, 8> fv;
        coopMatLoadNV(fv, smem, kk * 16u * LINE + d, LINE, false);
        acc_o[d] = coopMatMulAddNV(fp, fv, acc_o[d]);
      }
    }
  }

  // Output: O / l, 64 columns a round through the region.
  uint out_row = i0 + sg * 16u + row;
  // l = 0: no key seen (o = 0, lse = -inf); a NaN l stays NaN in both.
  float inv = l == 0.0 ? 0.0 : 1.0 / l;
#if defined(SERVING)
  uint o_base = out_row < SQ ? q_row(VIEW_O, b, seq, h, out_row) : 0u;
#else
  uint o_base = p.o.first + b * p.o.s0 + out_row * p.o.s1 + h * p.o.s2;
#endif
  subgroupBarrier(); // P V has read the region
  [[unroll]] for (uint round = 0u; round < DP / 64u; round++) {
    [[unroll]] for (uint j = 0u; j < 8u; j++)
      coopMatStoreNV(acc_o[round * 8u + j], smem, region + j * 2u, BC / 4u, false);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    [[unroll]] for (uint c = 0u; c < 8u; c++) {
      vec4 x = uintBitsToFloat(smem[region + row * (BC / 4u) + half_ * 8u + c]) * inv;
      [[unroll]] for (uint e = 0u; e < 4u; e++) {
        uint d = round * 64u + half_ * 32u + 4u * c + e;
        if (out_row < SQ && d < p.dim)
          o[o_base + d] = elem_make(x[e]);
      }
    }
    subgroupBarrier();
  }
#if defined(SERVING)
  if (out_row < SQ && (p.flags & 1u) != 0u && half_ == 0u)
    lse[lse_at(b, seq, h, out_row)] = l == 0.0 ? NEG_INF : (m + log2(l)) * 0.6931471805599453;
#else
  if (out_row < p.sq && (p.flags & 1u) != 0u && half_ == 0u)
    lse[p.lse.first + b * p.lse.s0 + h * p.lse.s1 + out_row * p.lse.s2] =
        l == 0.0 ? NEG_INF : (m + log2(l)) * 0.6931471805599453;
#endif
}
