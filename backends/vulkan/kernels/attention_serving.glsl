/* SPDX-License-Identifier: Apache-2.0 */
// Serving attention's geometry, shared by attention.comp (-DSERVING),
// attention_decode.comp and attention_combine.comp. The including shader
// declares, before this file:
//   - `struct View { uint first, s0, s1, s2; }` and a push block `p` with
//     View q, k, v, o, lse (q, k, v absent under SERVING_NO_INPUT, o and
//     lse under SERVING_NO_OUTPUT); uint flags, plan_stride, block_size;
//     float softcap_log2;
//   - the plan buffer `plan` (int32, attention_plan.comp's records).
// Views, element strides (the head dim is contiguous):
//   q, o   s0 batch (0 for packed rows), s1 row, s2 head
//   k, v   s0 batch (0 for packed rows; paged: block), s1 row, s2 head
//   lse    s0 batch (0 when packed), s1 head, s2 row
// The host keeps every index within 32 bits (each tensor fits one binding).
#ifndef TESSERA_VULKAN_ATTENTION_SERVING_GLSL
#define TESSERA_VULKAN_ATTENTION_SERVING_GLSL

// flags
const uint SERVING_LSE = 1u;   // write lse
const uint SERVING_PAGED = 2u; // k/v are a block pool, the plan holds block ids
const uint SERVING_PLAN = 4u;  // per-sequence geometry from the plan (else dense)
const uint VIEW_Q = 0u, VIEW_K = 1u, VIEW_V = 2u, VIEW_O = 3u;

// One sequence: rows [q_first, q_first + q_len) of packed q (q_first 0 for
// dense q), keys [kv_first, kv_first + kv_len) of packed k (kv_first 0
// otherwise); kv_len < 0: the sequence is at fault (NaN rows).
struct Seq {
  int q_first, q_len, kv_first, kv_len;
};

// The geometry of sequence b; dense problems (no plan): every sequence has
// the layout's lengths.
Seq seq_load(uint b, uint dense_q, uint dense_kv) {
  if ((p.flags & SERVING_PLAN) == 0u)
    return Seq(0, int(dense_q), 0, int(dense_kv));
  uint at = b * p.plan_stride;
  return Seq(plan[at], plan[at + 1u], plan[at + 2u], plan[at + 3u]);
}

// A View copied out of the push block field by field (passing the block's
// member whole trips glslc's optimiser: the two struct types differ in
// layout). SERVING_NO_INPUT / SERVING_NO_OUTPUT: the push block has no q, k,
// v / no o, lse (the decode passes each hold half of them).
View view_of(uint which) {
#if !defined(SERVING_NO_INPUT)
  if (which == VIEW_K)
    return View(p.k.first, p.k.s0, p.k.s1, p.k.s2);
  if (which == VIEW_V)
    return View(p.v.first, p.v.s0, p.v.s1, p.v.s2);
  if (which == VIEW_Q)
    return View(p.q.first, p.q.s0, p.q.s1, p.q.s2);
#endif
#if !defined(SERVING_NO_OUTPUT)
  if (which == VIEW_O)
    return View(p.o.first, p.o.s0, p.o.s1, p.o.s2);
#endif
  return View(0u, 0u, 0u, 0u);
}

// Element index of row j (of head `head`) of k (VIEW_K) or v (VIEW_V) in
// sequence b; paged: `block` is block_table[b, j / block_size] (kv_block).
uint kv_block(uint b, uint j) {
  return uint(plan[b * p.plan_stride + 4u + j / p.block_size]);
}

uint kv_row_in(uint which, uint b, Seq s, uint head, uint j, uint block) {
  View t = view_of(which);
  if ((p.flags & SERVING_PAGED) != 0u)
    return t.first + block * t.s0 + (j % p.block_size) * t.s1 + head * t.s2;
  return t.first + b * t.s0 + (uint(s.kv_first) + j) * t.s1 + head * t.s2;
}

uint kv_row(uint which, uint b, Seq s, uint head, uint j) {
  uint block = (p.flags & SERVING_PAGED) != 0u ? kv_block(b, j) : 0u;
  return kv_row_in(which, b, s, head, j, block);
}

// Element index of query row i (of head `head`) of q (VIEW_Q) or o (VIEW_O)
// in sequence b.
uint q_row(uint which, uint b, Seq s, uint head, uint i) {
  View t = view_of(which);
  return t.first + b * t.s0 + (uint(s.q_first) + i) * t.s1 + head * t.s2;
}

#if !defined(SERVING_NO_OUTPUT)
uint lse_at(uint b, Seq s, uint head, uint i) {
  return p.lse.first + b * p.lse.s0 + head * p.lse.s1 + (uint(s.q_first) + i) * p.lse.s2;
}
#endif

// softcap * tanh(s / softcap) in log2 units (C = softcap * log2 e, s scaled
// by log2 e): C tanh(s / C). tanh from exp2 of a non-positive argument, so
// large scores give +-C rather than inf / inf; the error is absolute (about
// C * 1e-7), which is what the softmax feels. A NaN stays NaN.
float softcap_log2(float s) {
  float c = p.softcap_log2;
  if (c == 0.0)
    return s;
  float x = s / c;
  float t = exp2(-2.8853900817779268 * abs(x)); // e^(-2|x|)
  float th = (1.0 - t) / (1.0 + t);
  return c * (x < 0.0 ? -th : th);
}

#endif
