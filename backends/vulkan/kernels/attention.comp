/* SPDX-License-Identifier: Apache-2.0 */
#version 450
// Flash attention forward, the path every device runs: a workgroup takes BR
// query rows of one (batch, head), walks the visible keys BC at a time, and
// keeps a running max and sum per row (online softmax), so no Sq x Skv matrix
// exists anywhere. Scores are in log2 units (q pre-scaled by scale * log2 e)
// so the shader uses exp2. K and V of a block share one shared-memory tile,
// one after the other.
//
// Register blocking: TPR invocations share a group of RQ query rows. For the
// scores each holds RQ rows x BC/TPR keys (a 4-element shared read of q and
// of k feeds 4 x RQ x BC/TPR FMAs); for the output each holds RQ rows x
// DP/TPR columns as vec4s. Rows of q and k/v are padded to DP + 4 floats:
// 16-byte aligned, and neighbouring keys fall in different banks.
//
// GPU builds fix DP, RQ and TPR at build time
// (attention_<dtype>_d<DP>_q<RQ>_t<TPR>) so that glslc unrolls the register
// blocks. The _rolled builds (lavapipe) take DP and RQ as specialisation
// constants and keep the loops over keys, columns and staged elements rolled:
// lavapipe's LLVM otherwise unrolls them in full and compiles a DP = 128
// pipeline for tens of seconds. The small register-block loops (RQ, KPT,
// CPT / 4 trips) carry no hint there, so lavapipe's NIR unrolls them once the
// constants are known: llvmpipe ends every loop of an invocation after 65535
// loop iterations in all (its LP_MAX_TGSI_LOOP_ITERATIONS limiter, counted
// over the whole shader), and with those loops rolled too a DP = 128
// workgroup reached it after about 35 key blocks (1100 keys) and silently
// skipped the rest, output stores included; now about 250 blocks.
// Bindings: 0 q, 1 k, 2 v, 3 o, 4 lse (f32; bound to o and unused when absent).
//
// _serving builds (-DSERVING) run the serving forms: packed q, dense, packed
// or paged k/v, per-sequence lengths and masks, softcap. Their push block is
// AttentionServingPush and binding 5 is the plan attention_plan.comp wrote
// (attention_serving.glsl): the grid's z is the sequence, its x covers
// max_seqlen_q rows, and a workgroup past its sequence's rows returns before
// any barrier. A sequence at fault gets NaN rows (and lse) and reads no key.
// Dense builds are token for token what they were before serving existed.
// @variant f32_rolled -DDTYPE_F32 -DROLLED
// @variant f16_rolled -DDTYPE_F16 -DROLLED
// @variant bf16_rolled -DDTYPE_BF16 -DROLLED
// @variant f32_d32_q4_t8 -DDTYPE_F32 -DDP_C=32 -DRQ_C=4 -DTPR_C=8
// @variant f32_d64_q4_t8 -DDTYPE_F32 -DDP_C=64 -DRQ_C=4 -DTPR_C=8
// @variant f32_d128_q4_t8 -DDTYPE_F32 -DDP_C=128 -DRQ_C=4 -DTPR_C=8
// @variant f32_d128_q2_t8 -DDTYPE_F32 -DDP_C=128 -DRQ_C=2 -DTPR_C=8
// @variant f32_d256_q4_t16 -DDTYPE_F32 -DDP_C=256 -DRQ_C=4 -DTPR_C=16
// @variant f32_d256_q2_t16 -DDTYPE_F32 -DDP_C=256 -DRQ_C=2 -DTPR_C=16
// @variant f16_d32_q4_t8 -DDTYPE_F16 -DDP_C=32 -DRQ_C=4 -DTPR_C=8
// @variant f16_d64_q4_t8 -DDTYPE_F16 -DDP_C=64 -DRQ_C=4 -DTPR_C=8
// @variant f16_d128_q4_t8 -DDTYPE_F16 -DDP_C=128 -DRQ_C=4 -DTPR_C=8
// @variant f16_d128_q2_t8 -DDTYPE_F16 -DDP_C=128 -DRQ_C=2 -DTPR_C=8
// @variant f16_d256_q4_t16 -DDTYPE_F16 -DDP_C=256 -DRQ_C=4 -DTPR_C=16
// @variant f16_d256_q2_t16 -DDTYPE_F16 -DDP_C=256 -DRQ_C=2 -DTPR_C=16
// @variant bf16_d32_q4_t8 -DDTYPE_BF16 -DDP_C=32 -DRQ_C=4 -DTPR_C=8
// @variant bf16_d64_q4_t8 -DDTYPE_BF16 -DDP_C=64 -DRQ_C=4 -DTPR_C=8
// @variant bf16_d128_q4_t8 -DDTYPE_BF16 -DDP_C=128 -DRQ_C=4 -DTPR_C=8
// @variant bf16_d128_q2_t8 -DDTYPE_BF16 -DDP_C=128 -DRQ_C=2 -DTPR_C=8
// @variant bf16_d256_q4_t16 -DDTYPE_BF16 -DDP_C=256 -DRQ_C=4 -DTPR_C=16
// @variant bf16_d256_q2_t16 -DDTYPE_BF16 -DDP_C=256 -DRQ_C=2 -DTPR_C=16
// @variant f32_rolled_serving -DDTYPE_F32 -DROLLED -DSERVING
// @variant f16_rolled_serving -DDTYPE_F16 -DROLLED -DSERVING
// @variant bf16_rolled_serving -DDTYPE_BF16 -DROLLED -DSERVING
// @variant f32_d32_q4_t8_serving -DDTYPE_F32 -DDP_C=32 -DRQ_C=4 -DTPR_C=8 -DSERVING
// @variant f32_d64_q4_t8_serving -DDTYPE_F32 -DDP_C=64 -DRQ_C=4 -DTPR_C=8 -DSERVING
// @variant f32_d128_q4_t8_serving -DDTYPE_F32 -DDP_C=128 -DRQ_C=4 -DTPR_C=8 -DSERVING
// @variant f32_d128_q2_t8_serving -DDTYPE_F32 -DDP_C=128 -DRQ_C=2 -DTPR_C=8 -DSERVING
// @variant f32_d256_q4_t16_serving -DDTYPE_F32 -DDP_C=256 -DRQ_C=4 -DTPR_C=16 -DSERVING
// @variant f32_d256_q2_t16_serving -DDTYPE_F32 -DDP_C=256 -DRQ_C=2 -DTPR_C=16 -DSERVING
// @variant f16_d32_q4_t8_serving -DDTYPE_F16 -DDP_C=32 -DRQ_C=4 -DTPR_C=8 -DSERVING
// @variant f16_d64_q4_t8_serving -DDTYPE_F16 -DDP_C=64 -DRQ_C=4 -DTPR_C=8 -DSERVING
// @variant f16_d128_q4_t8_serving -DDTYPE_F16 -DDP_C=128 -DRQ_C=4 -DTPR_C=8 -DSERVING
// @variant f16_d128_q2_t8_serving -DDTYPE_F16 -DDP_C=128 -DRQ_C=2 -DTPR_C=8 -DSERVING
// @variant f16_d256_q4_t16_serving -DDTYPE_F16 -DDP_C=256 -DRQ_C=4 -DTPR_C=16 -DSERVING
// @variant f16_d256_q2_t16_serving -DDTYPE_F16 -DDP_C=256 -DRQ_C=2 -DTPR_C=16 -DSERVING
// @variant bf16_d32_q4_t8_serving -DDTYPE_BF16 -DDP_C=32 -DRQ_C=4 -DTPR_C=8 -DSERVING
// @variant bf16_d64_q4_t8_serving -DDTYPE_BF16 -DDP_C=64 -DRQ_C=4 -DTPR_C=8 -DSERVING
// @variant bf16_d128_q4_t8_serving -DDTYPE_BF16 -DDP_C=128 -DRQ_C=4 -DTPR_C=8 -DSERVING
// @variant bf16_d128_q2_t8_serving -DDTYPE_BF16 -DDP_C=128 -DRQ_C=2 -DTPR_C=8 -DSERVING
// @variant bf16_d256_q4_t16_serving -DDTYPE_BF16 -DDP_C=256 -DRQ_C=4 -DTPR_C=16 -DSERVING
// @variant bf16_d256_q2_t16_serving -DDTYPE_BF16 -DDP_C=256 -DRQ_C=2 -DTPR_C=16 -DSERVING
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#if defined(ROLLED)
#define LOOP [[dont_unroll]]
#define UNROLL
#else
#define LOOP
#define UNROLL [[unroll]]
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint BR = 32; // query rows per workgroup

const uint WG = gl_WorkGroupSize.x;
#if defined(ROLLED)
layout(constant_id = 2) const uint BC = 32; // keys per block
layout(constant_id = 3) const uint DP = 64; // head dim capacity (>= dim; zero padded)
layout(constant_id = 4) const uint RQ = 4;  // query rows per invocation
const uint TPR = WG / (BR / RQ);
#else
const uint DP = DP_C, RQ = RQ_C, TPR = TPR_C; // WG is BR / RQ * TPR
const uint BC = DP_C > 128 ? 16u : 32u;       // keys per block (configs.c's tables agree)
#endif
const uint DQ = DP + 4u;   // padded row (floats)
const uint KPT = BC / TPR; // keys per invocation in the scores
const uint CPT = DP / TPR; // output columns per invocation, CPT / 4 vec4s

layout(set = 0, binding = 0) readonly buffer Q { ELEM_T q[]; };
layout(set = 0, binding = 1) readonly buffer K { ELEM_T k[]; };
layout(set = 0, binding = 2) readonly buffer V { ELEM_T v[]; };
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
// This workgroup's sequence: main's locals (module-scope variables for
// them made lavapipe drop output stores past ~34 key blocks).
#define SQ uint(seq.q_len)
#define SKV uint(seq.kv_len)
#define STAGE_KV(values, base, stride) stage_kv(values, hk, b, seq, j0, tid)
#define SCORE(x) softcap_log2(poison_infinite(x))
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
#define STAGE_KV(values, base, stride) stage_kv(values, base, stride, j0, tid)
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

shared vec4 s_q[BR * DQ / 4u];
shared vec4 s_kv[BC * DQ / 4u];
shared float s_p[BR * BC];

#if defined(SERVING)
// Rows [j0, j0 + BC) of k or v of kv head `hk` into s_kv, zero beyond the
// sequence's keys and the head dim (base and stride unused: a key's row
// comes from the layout, attention_serving.glsl).
void stage_kv(bool values, uint hk, uint b, Seq seq, int j0, uint tid) {
  LOOP for (uint e = tid; e < BC * DP; e += WG) {
    uint j = e / DP, d = e % DP;
    float x = 0.0;
    if (uint(j0) + j < SKV && d < p.dim) {
      uint i = kv_row(values ? VIEW_V : VIEW_K, b, seq, hk, uint(j0) + j) + d;
      x = values ? elem_load(v[i]) : elem_load(k[i]);
    }
    s_kv[(j * DQ + d) >> 2][d & 3u] = x;
  }
}

// A sequence at fault: NaN in this workgroup's rows of o (and lse).
void poison_rows(uint b, Seq seq, uint i0, uint h, uint tid) {
  float qnan = uintBitsToFloat(0x7fc00000u);
  for (uint e = tid; e < BR * p.dim; e += WG) {
    uint r = e / p.dim, d = e % p.dim;
    if (i0 + r < SQ)
      o[q_row(VIEW_O, b, seq, h, i0 + r) + d] = elem_make(qnan);
  }
  if ((p.flags & SERVING_LSE) != 0u)
    for (uint r = tid; r < BR; r += WG)
      if (i0 + r < SQ)
        lse[lse_at(b, seq, h, i0 + r)] = qnan;
}
#else
// Rows [j0, j0 + BC) of k or v (by `base` and `stride`) into s_kv, zero
// beyond the keys and the head dim.
void stage_kv(bool values, uint base, uint stride, int j0, uint tid) {
  LOOP for (uint e = tid; e < BC * DP; e += WG) {
    uint j = e / DP, d = e % DP;
    float x = 0.0;
    if (uint(j0) + j < p.skv && d < p.dim) {
      uint i = base + (uint(j0) + j) * stride + d;
      x = values ? elem_load(v[i]) : elem_load(k[i]);
    }
    s_kv[(j * DQ + d) >> 2][d & 3u] = x;
  }
}
#endif

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint rg = tid / TPR, lane = tid % TPR;
  uint r0 = rg * RQ; // this invocation's first row in the workgroup
  uint i0 = gl_WorkGroupID.x * BR;
  uint h = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
  uint hk = h / p.group;
#if defined(SERVING)
  Seq seq = seq_load(b, 0u, 0u);
  if (i0 >= SQ)
    return; // past the sequence's rows (uniform: before any barrier)
  if (seq.kv_len < 0) {
    poison_rows(b, seq, i0, h, tid);
    return;
  }
  uint q_base = q_row(VIEW_Q, b, seq, h, 0u);
#else
  uint q_base = p.q.first + b * p.q.s0 + h * p.q.s2;
  uint k_base = p.k.first + b * p.k.s0 + hk * p.k.s2;
  uint v_base = p.v.first + b * p.v.s0 + hk * p.v.s2;
#endif
  int shift = int(SKV) - int(SQ); // query row i sits at key position i + shift

  LOOP for (uint e = tid; e < BR * DP; e += WG) {
    uint r = e / DP, d = e % DP;
    float x = 0.0;
    if (i0 + r < SQ && d < p.dim)
      x = elem_load(q[q_base + (i0 + r) * p.q.s1 + d]) * p.scale_log2;
    s_q[(r * DQ + d) >> 2][d & 3u] = x;
  }

  // The keys any row of this workgroup may see.
  int pos_first = int(i0) + shift, pos_last = int(min(i0 + BR, SQ)) - 1 + shift;
  int lo = 0, hi = int(SKV) - 1;
  if (p.window_left >= 0)
    lo = max(lo, pos_first - p.window_left);
  if (p.window_right >= 0)
    hi = min(hi, pos_last + p.window_right);

  vec4 acc[RQ][CPT / 4u];
  float m[RQ], l[RQ];
  UNROLL for (uint i = 0u; i < RQ; i++) {
    m[i] = NEG_INF;
    l[i] = 0.0;
    UNROLL for (uint c = 0u; c < CPT / 4u; c++)
      acc[i][c] = vec4(0.0);
  }

  LOOP for (int j0 = (lo / int(BC)) * int(BC); j0 <= hi; j0 += int(BC)) {
    barrier(); // the previous block's V reads (and the Q stores) are done
    STAGE_KV(false, k_base, p.k.s1);
    barrier();
    float sc[RQ][KPT];
    UNROLL for (uint i = 0u; i < RQ; i++)
      UNROLL for (uint t = 0u; t < KPT; t++)
        sc[i][t] = 0.0;
    LOOP for (uint d4 = 0u; d4 < DP / 4u; d4++) {
      vec4 qv[RQ];
      UNROLL for (uint i = 0u; i < RQ; i++)
        qv[i] = s_q[((r0 + i) * DQ >> 2) + d4];
      UNROLL for (uint t = 0u; t < KPT; t++) {
        vec4 kv = s_kv[((lane + t * TPR) * DQ >> 2) + d4];
        UNROLL for (uint i = 0u; i < RQ; i++)
          sc[i][t] += dot(qv[i], kv);
      }
    }
    UNROLL for (uint i = 0u; i < RQ; i++) {
      int pos = int(i0 + r0 + i) + shift;
      UNROLL for (uint t = 0u; t < KPT; t++) {
        int key = j0 + int(lane + t * TPR);
        bool seen = key < int(SKV) && (p.window_left < 0 || key >= pos - p.window_left) &&
                    (p.window_right < 0 || key <= pos + p.window_right);
        s_p[(r0 + i) * BC + lane + t * TPR] = seen ? SCORE(sc[i][t]) : NEG_INF;
      }
    }
    barrier();
    float m_new[RQ], corr[RQ];
    UNROLL for (uint i = 0u; i < RQ; i++)
      m_new[i] = m[i];
    LOOP for (uint jj = 0u; jj < BC; jj++)
      UNROLL for (uint i = 0u; i < RQ; i++)
        m_new[i] = max(m_new[i], s_p[(r0 + i) * BC + jj]);
    UNROLL for (uint i = 0u; i < RQ; i++)
      corr[i] = m[i] == NEG_INF ? 0.0 : exp2(m[i] - m_new[i]);
    barrier(); // every row's max is read before the probabilities replace the scores
    UNROLL for (uint i = 0u; i < RQ; i++)
      UNROLL for (uint t = 0u; t < KPT; t++) {
        uint at = (r0 + i) * BC + lane + t * TPR;
        float s = s_p[at];
        s_p[at] = s == NEG_INF ? 0.0 : exp2(s - m_new[i]);
      }
    STAGE_KV(true, v_base, p.v.s1);
    barrier();
    float sum[RQ];
    UNROLL for (uint i = 0u; i < RQ; i++)
      sum[i] = 0.0;
    LOOP for (uint jj = 0u; jj < BC; jj++)
      UNROLL for (uint i = 0u; i < RQ; i++)
        sum[i] += s_p[(r0 + i) * BC + jj];
    UNROLL for (uint i = 0u; i < RQ; i++) {
      l[i] = l[i] * corr[i] + sum[i];
      m[i] = m_new[i];
      UNROLL for (uint c = 0u; c < CPT / 4u; c++)
        acc[i][c] *= corr[i];
    }
    LOOP for (uint jj = 0u; jj < BC; jj++) {
      float pj[RQ];
      UNROLL for (uint i = 0u; i < RQ; i++)
        pj[i] = s_p[(r0 + i) * BC + jj];
      UNROLL for (uint c = 0u; c < CPT / 4u; c++) {
        vec4 vv = s_kv[(jj * DQ >> 2) + lane + c * TPR];
        UNROLL for (uint i = 0u; i < RQ; i++)
          acc[i][c] = fma(vec4(pj[i]), vv, acc[i][c]);
      }
    }
  }

  UNROLL for (uint i = 0u; i < RQ; i++) {
    uint row = i0 + r0 + i;
    // l = 0: no key seen (o = 0, lse = -inf); a NaN l stays NaN in both.
    float inv = l[i] == 0.0 ? 0.0 : 1.0 / l[i];
#if defined(SERVING)
    uint o_base = q_row(VIEW_O, b, seq, h, row);
#else
    uint o_base = p.o.first + b * p.o.s0 + row * p.o.s1 + h * p.o.s2;
#endif
    UNROLL for (uint c = 0u; c < CPT / 4u; c++) {
      uint d = 4u * (lane + c * TPR);
      vec4 x = acc[i][c] * inv;
      UNROLL for (uint e = 0u; e < 4u; e++)
        if (row < SQ && d + e < p.dim)
          o[o_base + d + e] = elem_make(x[e]);
    }
#if defined(SERVING)
    if (row < SQ && (p.flags & 1u) != 0u && lane == 0u)
      lse[lse_at(b, seq, h, row)] =
          l[i] == 0.0 ? NEG_INF : (m[i] + log2(l[i])) * 0.6931471805599453;
#else
    if (row < p.sq && (p.flags & 1u) != 0u && lane == 0u)
      lse[p.lse.first + b * p.lse.s0 + h * p.lse.s1 + row * p.lse.s2] =
          l[i] == 0.0 ? NEG_INF : (m[i] + log2(l[i])) * 0.6931471805599453;
#endif
  }
}
