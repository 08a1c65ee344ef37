/* SPDX-License-Identifier: Apache-2.0 */
#version 450
// Decode attention (few query rows per sequence, long keys), split-KV pass:
// flash-decoding. A workgroup takes one (key chunk, row tile) of one kv head
// of one sequence: the RT query rows of the tile are the GQA group's heads
// times the sequence's query rows (row r = head-in-group * max_q + i), so
// each K and V row is read once per kv head and tile. Its partial result
// (unnormalised o, running max m and sum l, log2 units) goes to scratch;
// attention_combine.comp merges the chunks and writes o and lse.
//
// Inside the workgroup nothing waits on a barrier in the key loop (unless
// lanes must reduce through shared memory, below): LG = DP / 8 consecutive
// invocations form a key group, each holding 8 elements of the head dim
// (one 16-byte load of a 16-bit row, two of an f32 one), and the WG / LG
// groups take interleaved keys, KU each per step, K and V loads of all KU
// issued first (many loads in flight: decode is bound by memory). A score is
// a dot product over the group's lanes, summed by subgroup shuffles (the
// first SHUF lanes; SHUF = LG on a GPU) and through shared memory for the
// rest (CPU implementations, whose subgroups are narrower, and
// TESSERA_VULKAN_NO_SUBGROUPS). Every group keeps its own online softmax
// (m, l and RT x 8 outputs per invocation); the groups merge through shared
// memory once, at the end. Paged keys: the block ids of the next step are
// read one step ahead, so the table lookup does not add its latency to the
// K and V loads.
//
// lavapipe: llvmpipe ends every loop of an invocation after 65535 loop
// iterations in all (LP_MAX_TGSI_LOOP_ITERATIONS, counted over the whole
// shader), and without subgroups the lane sums loop LG times per score, so
// its table keeps chunks to 1024 keys (configs.c, decode_max_chunk).
//
// Specialisation constants: 0 VEC (1: 8-element loads; the host sets it when
// dim is a multiple of 8 and every start and stride of k and v is a multiple
// of 8 elements, 4 for f32), 1 SHUF (a power of two <= LG; 1: no subgroup
// operations at all).
// Bindings: 0 q, 1 k, 2 v, 3 plan (int32; bound to the partials and unread
// for dense problems), 4 partials (f32 scratch).
// @variant f32_d64_r4 -DDTYPE_F32 -DDP_C=64 -DRT_C=4 -DKU_C=4
// @variant f32_d64_r8 -DDTYPE_F32 -DDP_C=64 -DRT_C=8 -DKU_C=2
// @variant f32_d128_r4 -DDTYPE_F32 -DDP_C=128 -DRT_C=4 -DKU_C=4
// @variant f32_d128_r8 -DDTYPE_F32 -DDP_C=128 -DRT_C=8 -DKU_C=2
// @variant f32_d256_r4 -DDTYPE_F32 -DDP_C=256 -DRT_C=4 -DKU_C=4
// @variant f32_d256_r8 -DDTYPE_F32 -DDP_C=256 -DRT_C=8 -DKU_C=2
// @variant f16_d64_r4 -DDTYPE_F16 -DDP_C=64 -DRT_C=4 -DKU_C=4
// @variant f16_d64_r8 -DDTYPE_F16 -DDP_C=64 -DRT_C=8 -DKU_C=2
// @variant f16_d128_r4 -DDTYPE_F16 -DDP_C=128 -DRT_C=4 -DKU_C=4
// @variant f16_d128_r8 -DDTYPE_F16 -DDP_C=128 -DRT_C=8 -DKU_C=2
// @variant f16_d256_r4 -DDTYPE_F16 -DDP_C=256 -DRT_C=4 -DKU_C=4
// @variant f16_d256_r8 -DDTYPE_F16 -DDP_C=256 -DRT_C=8 -DKU_C=2
// @variant bf16_d64_r4 -DDTYPE_BF16 -DDP_C=64 -DRT_C=4 -DKU_C=4
// @variant bf16_d64_r8 -DDTYPE_BF16 -DDP_C=64 -DRT_C=8 -DKU_C=2
// @variant bf16_d128_r4 -DDTYPE_BF16 -DDP_C=128 -DRT_C=4 -DKU_C=4
// @variant bf16_d128_r8 -DDTYPE_BF16 -DDP_C=128 -DRT_C=8 -DKU_C=2
// @variant bf16_d256_r4 -DDTYPE_BF16 -DDP_C=256 -DRT_C=4 -DKU_C=4
// @variant bf16_d256_r8 -DDTYPE_BF16 -DDP_C=256 -DRT_C=8 -DKU_C=2
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "common.glsl"

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint VEC = 0;
layout(constant_id = 1) const uint SHUF = 1;

const uint WG = 128u;
const uint DP = DP_C;   // head dim capacity (>= dim)
const uint RT = RT_C;   // query rows per workgroup
const uint KU = KU_C;   // keys per group per step
const uint LG = DP / 8u; // invocations per key
const uint NG = WG / LG; // key groups
const uint KT = NG * KU; // keys per step

layout(set = 0, binding = 0) readonly buffer Q { ELEM_T q[]; };
layout(set = 0, binding = 1) readonly buffer K { ELEM_T k[]; };
layout(set = 0, binding = 2) readonly buffer V { ELEM_T v[]; };
#if defined(DTYPE_F32)
layout(set = 0, binding = 1) readonly buffer K4 { vec4 k4[]; };
layout(set = 0, binding = 2) readonly buffer V4 { vec4 v4[]; };
#else
layout(set = 0, binding = 1) readonly buffer K8 { uvec4 k8[]; };
layout(set = 0, binding = 2) readonly buffer V8 { uvec4 v8[]; };
#endif
layout(set = 0, binding = 3) readonly buffer Plan { int plan[]; };
layout(set = 0, binding = 4) writeonly buffer Part { float part[]; };

struct View {
  uint first, s0, s1, s2;
};

layout(push_constant) uniform DecodePush {
  uint max_q, plan_stride, group, block_size;
  View q, k, v;                  // attention_serving.glsl's views
  uint dim, flags;               // flags: SERVING_PAGED, SERVING_PLAN
  int window_left, window_right; // negative: unbounded
  float scale_log2, softcap_log2;
  uint max_kv;    // dense problems: every sequence's key count
  uint chunk;     // keys per chunk
  uint rows;      // group * max_q: the rows of one kv head
  uint row_tiles; // ceil(rows / RT); grid x is chunks * row_tiles
  uint ml_base;   // where the partials' (m, l) pairs start in `part`
  uint block_shift; // paged: log2(block_size) when a power of two, else 0
} p;

#define SERVING_NO_OUTPUT
#include "attention_serving.glsl"

#define NEG_INF uintBitsToFloat(0xff800000u)

float poison_infinite(float s) {
  return abs(s) > 3.40282347e38 ? uintBitsToFloat(0x7fc00000u) : s;
}

// Eight elements from element i (a multiple of 8, or of 4 for f32, when VEC;
// else element by element, zero from `valid` on), kept as loaded (Raw: 16-bit
// pairs stay packed) until used, so that the loads in flight hold half the
// registers. VEC loads are unconditional (element 0 of the binding stands in
// for a key past the range, then zeroed), so nothing branches between them.
#if defined(DTYPE_F32)
struct Raw {
  vec4 lo, hi;
};
Raw load8(bool values, uint i, uint valid) {
  if (VEC != 0u) {
    uint at = valid >= 8u ? i >> 2 : 0u;
    Raw r = values ? Raw(v4[at], v4[at + 1u]) : Raw(k4[at], k4[at + 1u]);
    return valid >= 8u ? r : Raw(vec4(0.0), vec4(0.0));
  }
  float x[8];
  [[unroll]] for (uint e = 0u; e < 8u; e++)
    x[e] = e < valid ? (values ? v[i + e] : k[i + e]) : 0.0;
  return Raw(vec4(x[0], x[1], x[2], x[3]), vec4(x[4], x[5], x[6], x[7]));
}
vec4 raw_lo(Raw r) { return r.lo; }
vec4 raw_hi(Raw r) { return r.hi; }
#else
struct Raw {
  uvec4 u;
};
Raw load8(bool values, uint i, uint valid) {
  if (VEC != 0u) {
    uint at = valid >= 8u ? i >> 3 : 0u;
    uvec4 u = values ? v8[at] : k8[at];
    return Raw(valid >= 8u ? u : uvec4(0u));
  }
  uint w[8];
  [[unroll]] for (uint e = 0u; e < 8u; e++)
    w[e] = e < valid ? (values ? uint(v[i + e]) : uint(k[i + e])) : 0u;
  return Raw(uvec4(w[0] | (w[1] << 16), w[2] | (w[3] << 16), w[4] | (w[5] << 16),
                   w[6] | (w[7] << 16)));
}
vec4 raw_lo(Raw r) { return elem4_load(r.u.xy); }
vec4 raw_hi(Raw r) { return elem4_load(r.u.zw); }
#endif

// Key j's block (its table entry) and row in it: a shift and a mask for
// power-of-two block sizes (block_shift > 0), else a division.
uint key_block(uint b, uint j) {
  uint at = b * p.plan_stride + 4u + (p.block_shift != 0u ? j >> p.block_shift : j / p.block_size);
  return uint(plan[at]);
}

uint key_row(uint which, uint b, Seq s, uint j, uint block, uint hk) {
  if ((p.flags & SERVING_PAGED) == 0u)
    return kv_row_in(which, b, s, hk, j, 0u);
  View t = view_of(which);
  uint r = p.block_shift != 0u ? j & (p.block_size - 1u) : j % p.block_size;
  return t.first + block * t.s0 + r * t.s1 + hk * t.s2;
}

// Lane sums that subgroups cannot finish: [group][LG / SHUF][KU * RT].
shared float s_red[WG / SHUF * KU * RT];
// The end-of-chunk merge: one row's outputs of every group, and (m, l).
shared float s_acc[NG * DP];
shared float s_ml[NG * RT * 2u];

void main() {
  // Invocations numbered along subgroups, so that a key group's lanes are
  // one subgroup's (LG divides the subgroup size, or SHUF says how far the
  // shuffles reach).
  uint tid = SHUF > 1u ? gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID
                       : gl_LocalInvocationID.x;
  uint g = tid / LG, lane = tid % LG;
  uint chunk = gl_WorkGroupID.x / p.row_tiles, tile = gl_WorkGroupID.x % p.row_tiles;
  uint hk = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
  Seq s = seq_load(b, p.max_q, p.max_kv);
  // Faults and empty sequences: the combine pass writes their rows. Every
  // return here is uniform and precedes the barriers.
  if (s.kv_len <= 0 || s.q_len <= 0)
    return;
  uint k0 = chunk * p.chunk;
  if (k0 >= uint(s.kv_len))
    return;
  int k_last = int(min(k0 + p.chunk, uint(s.kv_len))) - 1;

  // The tile's rows: query heads of the group times the sequence's rows.
  uint d0 = lane * 8u;
  uint valid = p.dim > d0 ? min(p.dim - d0, 8u) : 0u;
  vec4 qlo[RT], qhi[RT];
  int pos[RT];
  bool live[RT];
  int lo = k_last + 1, hi = -1; // keys any live row may see
  [[unroll]] for (uint r = 0u; r < RT; r++) {
    uint row = tile * RT + r;
    uint i = row % p.max_q, hl = row / p.max_q;
    live[r] = row < p.rows && i < uint(s.q_len);
    pos[r] = int(i) + s.kv_len - s.q_len;
    float x[8];
    uint base = live[r] ? q_row(VIEW_Q, b, s, hk * p.group + hl, i) + d0 : 0u;
    [[unroll]] for (uint e = 0u; e < 8u; e++)
      x[e] = live[r] && e < valid ? elem_load(q[base + e]) * p.scale_log2 : 0.0;
    qlo[r] = vec4(x[0], x[1], x[2], x[3]);
    qhi[r] = vec4(x[4], x[5], x[6], x[7]);
    if (live[r]) {
      int first = int(k0), last = k_last;
      if (p.window_left >= 0)
        first = max(first, pos[r] - p.window_left);
      if (p.window_right >= 0)
        last = min(last, pos[r] + p.window_right);
      if (first <= last) {
        lo = min(lo, first);
        hi = max(hi, last);
      }
    }
  }

  float m[RT], l[RT];
  vec4 acc_lo[RT], acc_hi[RT];
  [[unroll]] for (uint r = 0u; r < RT; r++) {
    m[r] = NEG_INF;
    l[r] = 0.0;
    acc_lo[r] = vec4(0.0);
    acc_hi[r] = vec4(0.0);
  }

  // Paged: the block ids of the next step's keys (a key past the range
  // reads the last key's entry, which exists, and is masked later).
  bool paged = (p.flags & SERVING_PAGED) != 0u;
  uint block_next[KU];
  [[unroll]] for (uint u = 0u; u < KU; u++)
    block_next[u] = 0u;
  if (paged && lo <= hi)
    [[unroll]] for (uint u = 0u; u < KU; u++)
      block_next[u] = key_block(b, uint(min(lo + int(u * NG + g), hi)));
  for (int j0 = lo; j0 <= hi; j0 += int(KT)) {
    // K and V of this group's KU keys, all loads issued before any use.
    Raw kr[KU], vr[KU];
    [[unroll]] for (uint u = 0u; u < KU; u++) {
      int j = j0 + int(u * NG + g);
      bool in_range = j <= hi;
      uint block = block_next[u];
      uint ik = in_range ? key_row(VIEW_K, b, s, uint(j), block, hk) + d0 : 0u;
      uint iv = in_range ? key_row(VIEW_V, b, s, uint(j), block, hk) + d0 : 0u;
      uint n = in_range ? valid : 0u;
      kr[u] = load8(false, ik, n);
      vr[u] = load8(true, iv, n);
    }
    // The next step's block ids, while these loads are in flight.
    if (paged)
      [[unroll]] for (uint u = 0u; u < KU; u++)
        block_next[u] = key_block(b, uint(min(j0 + int(KT + u * NG + g), hi)));
    float sc[KU * RT];
    [[unroll]] for (uint u = 0u; u < KU; u++) {
      vec4 klo = raw_lo(kr[u]), khi = raw_hi(kr[u]);
      [[unroll]] for (uint r = 0u; r < RT; r++)
        sc[u * RT + r] = dot(qlo[r], klo) + dot(qhi[r], khi);
    }
    // Sum over the group's lanes: shuffles, then shared memory for the rest.
    [[unroll]] for (uint o = 1u; o < SHUF; o <<= 1u)
      [[unroll]] for (uint e = 0u; e < KU * RT; e++)
        sc[e] += subgroupShuffleXor(sc[e], o);
    if (SHUF < LG) {
      uint parts = LG / SHUF, at = (g * parts + lane / SHUF) * KU * RT;
      barrier(); // the previous step's reads are done
      if (lane % SHUF == 0u)
        [[unroll]] for (uint e = 0u; e < KU * RT; e++)
          s_red[at + e] = sc[e];
      barrier();
      [[unroll]] for (uint e = 0u; e < KU * RT; e++) {
        float t = 0.0;
        for (uint w = 0u; w < parts; w++)
          t += s_red[(g * parts + w) * KU * RT + e];
        sc[e] = t;
      }
    }
    // Masks, softcap, and the group's online softmax.
    [[unroll]] for (uint r = 0u; r < RT; r++) {
      float m_new = m[r];
      [[unroll]] for (uint u = 0u; u < KU; u++) {
        int j = j0 + int(u * NG + g);
        bool seen = live[r] && j <= hi && (p.window_left < 0 || j >= pos[r] - p.window_left) &&
                    (p.window_right < 0 || j <= pos[r] + p.window_right);
        float x = seen ? softcap_log2(poison_infinite(sc[u * RT + r])) : NEG_INF;
        sc[u * RT + r] = x;
        m_new = max(m_new, x);
      }
      // The running max rarely moves once a few keys are in: rescale only
      // then (the branch is uniform over a key group).
      if (!(m_new == m[r])) {
        float corr = m[r] == NEG_INF ? 0.0 : exp2(m[r] - m_new);
        l[r] *= corr;
        acc_lo[r] *= corr;
        acc_hi[r] *= corr;
        m[r] = m_new;
      }
      [[unroll]] for (uint u = 0u; u < KU; u++) {
        float x = sc[u * RT + r];
        sc[u * RT + r] = x == NEG_INF ? 0.0 : exp2(x - m_new);
        l[r] += sc[u * RT + r];
      }
    }
    [[unroll]] for (uint u = 0u; u < KU; u++) {
      vec4 vlo = raw_lo(vr[u]), vhi = raw_hi(vr[u]);
      [[unroll]] for (uint r = 0u; r < RT; r++) {
        acc_lo[r] = fma(vec4(sc[u * RT + r]), vlo, acc_lo[r]);
        acc_hi[r] = fma(vec4(sc[u * RT + r]), vhi, acc_hi[r]);
      }
    }
  }

  // Merge the groups, a row at a time: m* = max m_g, weights 2^(m_g - m*).
  if (lane == 0u)
    [[unroll]] for (uint r = 0u; r < RT; r++) {
      s_ml[(g * RT + r) * 2u] = m[r];
      s_ml[(g * RT + r) * 2u + 1u] = l[r];
    }
  uint slot0 = ((b * gl_NumWorkGroups.y + hk) * (gl_NumWorkGroups.x / p.row_tiles) + chunk) *
                   (p.row_tiles * RT) + tile * RT;
  [[unroll]] for (uint r = 0u; r < RT; r++) {
    barrier(); // the previous row's reads are done (and s_ml is written)
    [[unroll]] for (uint e = 0u; e < 4u; e++) {
      s_acc[g * DP + d0 + e] = acc_lo[r][e];
      s_acc[g * DP + d0 + 4u + e] = acc_hi[r][e];
    }
    barrier();
    float mr = NEG_INF;
    for (uint w = 0u; w < NG; w++)
      mr = max(mr, s_ml[(w * RT + r) * 2u]);
    if (tile * RT + r >= p.rows || !live[r])
      continue; // uniform: the tile's rows are the same for every invocation
    for (uint d = tid; d < p.dim; d += WG) {
      float x = 0.0;
      for (uint w = 0u; w < NG; w++) {
        float mw = s_ml[(w * RT + r) * 2u];
        x += (mw == NEG_INF ? 0.0 : exp2(mw - mr)) * s_acc[w * DP + d];
      }
      part[(slot0 + r) * DP + d] = x;
    }
    if (tid == 0u) {
      float lr = 0.0;
      for (uint w = 0u; w < NG; w++) {
        float mw = s_ml[(w * RT + r) * 2u];
        lr += (mw == NEG_INF ? 0.0 : exp2(mw - mr)) * s_ml[(w * RT + r) * 2u + 1u];
      }
      part[p.ml_base + (slot0 + r) * 2u] = mr;
      part[p.ml_base + (slot0 + r) * 2u + 1u] = lr;
    }
  }
}
