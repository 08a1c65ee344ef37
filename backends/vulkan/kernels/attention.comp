#version 450
// Flash attention forward, the path every device runs: a workgroup takes BR
// query rows of one (batch, head), walks the visible keys BC at a time, and
// keeps a running max and sum per row (online softmax), so no Sq x Skv matrix
// exists anywhere. Scores are in log2 units (q pre-scaled by scale * log2 e)
// so the shader uses exp2. K and V of a block share one shared-memory tile,
// one after the other. TPR = WG / BR invocations share a query row: each
// holds DP / TPR of its output columns in registers.
// Bindings: 0 q, 1 k, 2 v, 3 o, 4 lse (f32; bound to o and unused when absent).
//
// GPU builds fix DP and TPR at build time (attention_<dtype>_d<DP>_r<TPR>)
// so that glslc unrolls the per-invocation output columns into registers.
// The _rolled builds (lavapipe) take them as specialisation constants and
// keep the loops over the head dim and the key block rolled: lavapipe's LLVM
// otherwise unrolls them in full and compiles a DP = 128 pipeline for tens
// of seconds.
// @variant f32_rolled -DDTYPE_F32 -DROLLED
// @variant f16_rolled -DDTYPE_F16 -DROLLED
// @variant bf16_rolled -DDTYPE_BF16 -DROLLED
// @variant f32_d32_r4 -DDTYPE_F32 -DDP_C=32 -DTPR_C=4
// @variant f32_d64_r4 -DDTYPE_F32 -DDP_C=64 -DTPR_C=4
// @variant f32_d64_r8 -DDTYPE_F32 -DDP_C=64 -DTPR_C=8
// @variant f32_d128_r4 -DDTYPE_F32 -DDP_C=128 -DTPR_C=4
// @variant f32_d128_r8 -DDTYPE_F32 -DDP_C=128 -DTPR_C=8
// @variant f32_d256_r4 -DDTYPE_F32 -DDP_C=256 -DTPR_C=4
// @variant f32_d256_r8 -DDTYPE_F32 -DDP_C=256 -DTPR_C=8
// @variant f16_d32_r4 -DDTYPE_F16 -DDP_C=32 -DTPR_C=4
// @variant f16_d64_r4 -DDTYPE_F16 -DDP_C=64 -DTPR_C=4
// @variant f16_d64_r8 -DDTYPE_F16 -DDP_C=64 -DTPR_C=8
// @variant f16_d128_r4 -DDTYPE_F16 -DDP_C=128 -DTPR_C=4
// @variant f16_d128_r8 -DDTYPE_F16 -DDP_C=128 -DTPR_C=8
// @variant f16_d256_r4 -DDTYPE_F16 -DDP_C=256 -DTPR_C=4
// @variant f16_d256_r8 -DDTYPE_F16 -DDP_C=256 -DTPR_C=8
// @variant bf16_d32_r4 -DDTYPE_BF16 -DDP_C=32 -DTPR_C=4
// @variant bf16_d64_r4 -DDTYPE_BF16 -DDP_C=64 -DTPR_C=4
// @variant bf16_d64_r8 -DDTYPE_BF16 -DDP_C=64 -DTPR_C=8
// @variant bf16_d128_r4 -DDTYPE_BF16 -DDP_C=128 -DTPR_C=4
// @variant bf16_d128_r8 -DDTYPE_BF16 -DDP_C=128 -DTPR_C=8
// @variant bf16_d256_r4 -DDTYPE_BF16 -DDP_C=256 -DTPR_C=4
// @variant bf16_d256_r8 -DDTYPE_BF16 -DDP_C=256 -DTPR_C=8
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#if defined(ROLLED)
#define LOOP [[dont_unroll]]
#define UNROLL [[dont_unroll]]
#else
#define LOOP
#define UNROLL [[unroll]]
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint BR = 16; // query rows per workgroup
layout(constant_id = 2) const uint BC = 32; // keys per block
const uint WG = gl_WorkGroupSize.x;
#if defined(ROLLED)
layout(constant_id = 3) const uint DP = 64; // head dim capacity (>= dim; zero padded)
const uint TPR = WG / BR;
#else
const uint DP = DP_C, TPR = TPR_C; // WG is BR * TPR
#endif

layout(set = 0, binding = 0) readonly buffer Q { ELEM_T q[]; };
layout(set = 0, binding = 1) readonly buffer K { ELEM_T k[]; };
layout(set = 0, binding = 2) readonly buffer V { ELEM_T v[]; };
layout(set = 0, binding = 3) writeonly buffer O { ELEM_T o[]; };
layout(set = 0, binding = 4) writeonly buffer Lse { float lse[]; };

struct View {
  uint first, s0, s1, s2;
};

layout(push_constant) uniform AttentionPush {
  uint sq, skv, hq, group; // group: query heads per kv head
  View q, k, v, o; // strides along B, S, H (D is contiguous)
  View lse;        // strides along B, H, S
  uint dim, flags; // flags bit 0: write lse
  int window_left, window_right; // negative: unbounded
  float scale_log2;
} p;

#define NEG_INF uintBitsToFloat(0xff800000u)

shared float s_q[BR * DP];
shared float s_kv[BC * (DP + 1u)]; // +1: rows read by neighbouring invocations sit in distinct banks
shared float s_p[BR * BC];

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint row = tid / TPR, lane = tid % TPR;
  uint i0 = gl_WorkGroupID.x * BR;
  uint h = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
  uint hk = h / p.group;
  uint q_base = p.q.first + b * p.q.s0 + h * p.q.s2;
  uint k_base = p.k.first + b * p.k.s0 + hk * p.k.s2;
  uint v_base = p.v.first + b * p.v.s0 + hk * p.v.s2;
  int shift = int(p.skv) - int(p.sq); // query row i sits at key position i + shift

  LOOP for (uint e = tid; e < BR * DP; e += WG) {
    uint r = e / DP, d = e % DP;
    float x = 0.0;
    if (i0 + r < p.sq && d < p.dim)
      x = elem_load(q[q_base + (i0 + r) * p.q.s1 + d]) * p.scale_log2;
    s_q[e] = x;
  }

  // The keys any row of this workgroup may see.
  int pos_first = int(i0) + shift, pos_last = int(min(i0 + BR, p.sq)) - 1 + shift;
  int lo = 0, hi = int(p.skv) - 1;
  if (p.window_left >= 0)
    lo = max(lo, pos_first - p.window_left);
  if (p.window_right >= 0)
    hi = min(hi, pos_last + p.window_right);
  int my_pos = int(i0 + row) + shift;
  int my_lo = p.window_left >= 0 ? my_pos - p.window_left : 0;
  int my_hi = p.window_right >= 0 ? my_pos + p.window_right : int(p.skv) - 1;

  const uint CPT = DP / TPR; // output columns per invocation: lane + c * TPR
  float acc[CPT];
  UNROLL for (uint c = 0u; c < CPT; c++)
    acc[c] = 0.0;
  float m = NEG_INF, l = 0.0;

  LOOP for (int j0 = (lo / int(BC)) * int(BC); j0 <= hi; j0 += int(BC)) {
    barrier(); // the previous block's V reads (and the Q stores) are done
    LOOP for (uint e = tid; e < BC * DP; e += WG) {
      uint j = e / DP, d = e % DP;
      float x = 0.0;
      if (uint(j0) + j < p.skv && d < p.dim)
        x = elem_load(k[k_base + (uint(j0) + j) * p.k.s1 + d]);
      s_kv[j * (DP + 1u) + d] = x;
    }
    barrier();
    LOOP for (uint jj = lane; jj < BC; jj += TPR) {
      int key = j0 + int(jj);
      float s = NEG_INF;
      if (key >= my_lo && key <= my_hi && key < int(p.skv)) {
        s = 0.0;
        UNROLL for (uint d = 0u; d < DP; d++)
          s = fma(s_q[row * DP + d], s_kv[jj * (DP + 1u) + d], s);
      }
      s_p[row * BC + jj] = s;
    }
    barrier();
    float mb = NEG_INF;
    LOOP for (uint jj = 0u; jj < BC; jj++)
      mb = max(mb, s_p[row * BC + jj]);
    float m_new = max(m, mb);
    float corr = m == NEG_INF ? 0.0 : exp2(m - m_new);
    barrier(); // every row's max is read before the probabilities replace the scores
    LOOP for (uint jj = lane; jj < BC; jj += TPR) {
      float s = s_p[row * BC + jj];
      s_p[row * BC + jj] = s == NEG_INF ? 0.0 : exp2(s - m_new);
    }
    LOOP for (uint e = tid; e < BC * DP; e += WG) {
      uint j = e / DP, d = e % DP;
      float x = 0.0;
      if (uint(j0) + j < p.skv && d < p.dim)
        x = elem_load(v[v_base + (uint(j0) + j) * p.v.s1 + d]);
      s_kv[j * (DP + 1u) + d] = x;
    }
    barrier();
    float sum = 0.0;
    LOOP for (uint jj = 0u; jj < BC; jj++)
      sum += s_p[row * BC + jj];
    l = l * corr + sum;
    m = m_new;
    UNROLL for (uint c = 0u; c < CPT; c++)
      acc[c] *= corr;
    LOOP for (uint jj = 0u; jj < BC; jj++) {
      float pj = s_p[row * BC + jj];
      UNROLL for (uint c = 0u; c < CPT; c++)
        acc[c] = fma(pj, s_kv[jj * (DP + 1u) + lane + c * TPR], acc[c]);
    }
  }

  uint i = i0 + row;
  if (i >= p.sq)
    return;
  float inv = l > 0.0 ? 1.0 / l : 0.0;
  uint o_base = p.o.first + b * p.o.s0 + i * p.o.s1 + h * p.o.s2;
  UNROLL for (uint c = 0u; c < CPT; c++) {
    uint d = lane + c * TPR;
    if (d < p.dim)
      o[o_base + d] = elem_make(acc[c] * inv);
  }
  if ((p.flags & 1u) != 0u && lane == 0u)
    lse[p.lse.first + b * p.lse.s0 + h * p.lse.s1 + i * p.lse.s2] =
        l > 0.0 ? (m + log2(l)) * 0.6931471805599453 : NEG_INF;
}
