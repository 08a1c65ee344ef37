/* SPDX-License-Identifier: Apache-2.0 */
#version 450
// Serving attention, first pass: the geometry of every sequence, decided
// once (tsr_plugin_attention_seq_of in plugin.h, check for check, in its
// order) and written to the plan the attention shaders read, so that every
// workgroup of a sequence agrees and none reads the index tensors or a key
// before its sequence is known to be sound. One workgroup per sequence b
// (folded over x and y). Its record at plan[b * plan_stride]:
//   [0] q_first  first row of packed q (0 for dense q)
//   [1] q_len    Lq(b); 0 when cu_seqlens_q is at fault (rows not located)
//   [2] kv_first first row of packed k/v (0 otherwise)
//   [3] kv_len   Lkv(b), or -1 at any fault: the sequence's rows become NaN
//   [4 + j]      paged: block_table[b, j] for the blocks keys [0, kv_len) use
// A fault is recorded as an atomic min of b into faults[kind] (the queue's
// TSR_PLUGIN_FAULT_COUNT words, read by queue_finish).
// Bindings: 0 cu_seqlens_q, 1 cu_seqlens_kv, 2 block_table, 3 seqlens_kv
// (int32 at any 4-byte address; an absent one is bound to the plan and not
// read), 4 plan (int32, scratch), 5 faults.
layout(local_size_x = 64) in;

layout(set = 0, binding = 0) readonly buffer CuQ { int cu_q[]; };
layout(set = 0, binding = 1) readonly buffer CuKv { int cu_kv[]; };
layout(set = 0, binding = 2) readonly buffer Table { int table[]; };
layout(set = 0, binding = 3) readonly buffer Lens { int lens[]; };
layout(set = 0, binding = 4) writeonly buffer Plan { int plan[]; };
layout(set = 0, binding = 5) buffer Faults { int faults[]; };

layout(push_constant) uniform PlanPush {
  uint batch, flags; // flags: 1 cu_seqlens_q, 2 cu_seqlens_kv, 4 block_table, 8 seqlens_kv
  uint cu_q_first, cu_q_stride, cu_kv_first, cu_kv_stride;
  uint table_first, table_s0, table_s1, table_blocks; // table_blocks: its shape[1]
  uint lens_first, lens_stride;
  int q_rows;    // packed q: q.shape[0]; dense: Sq
  int kv_rows;   // packed k: k.shape[0]; dense: Skv; paged: blocks of the pool
  int block_size; // paged: k.shape[1]
  int max_q, max_kv;
  uint plan_stride;
} p;

// tsr_plugin_fault kinds (plugin.h)
const uint FAULT_CU_SEQLENS_Q = 1u, FAULT_CU_SEQLENS_KV = 2u, FAULT_SEQLENS_KV = 3u,
           FAULT_BLOCK_TABLE = 4u, FAULT_MAX_SEQLEN_Q = 5u, FAULT_MAX_SEQLEN_KV = 6u;

shared uint s_bad;

void record(uint b, int q_first, int q_len, int kv_first, int kv_len) {
  uint at = b * p.plan_stride;
  plan[at] = q_first;
  plan[at + 1u] = q_len;
  plan[at + 2u] = kv_first;
  plan[at + 3u] = kv_len;
}

void main() {
  uint b = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (b >= p.batch)
    return;
  uint tid = gl_LocalInvocationID.x;
  // Every invocation decides the scalar checks alike (the same reads), so
  // the early returns below are uniform and precede the barriers.
  int q_first = 0, q_len = p.q_rows;
  if ((p.flags & 1u) != 0u) {
    int lo = cu_q[p.cu_q_first + b * p.cu_q_stride];
    int hi = cu_q[p.cu_q_first + (b + 1u) * p.cu_q_stride];
    if (lo < 0 || hi < lo || hi > p.q_rows) {
      if (tid == 0u) {
        record(b, 0, 0, 0, -1);
        atomicMin(faults[FAULT_CU_SEQLENS_Q], int(b));
      }
      return;
    }
    q_first = lo;
    q_len = hi - lo;
  }
  int kv_first = 0, capacity;
  if ((p.flags & 2u) != 0u) {
    int lo = cu_kv[p.cu_kv_first + b * p.cu_kv_stride];
    int hi = cu_kv[p.cu_kv_first + (b + 1u) * p.cu_kv_stride];
    if (lo < 0 || hi < lo || hi > p.kv_rows) {
      if (tid == 0u) {
        record(b, q_first, q_len, 0, -1);
        atomicMin(faults[FAULT_CU_SEQLENS_KV], int(b));
      }
      return;
    }
    kv_first = lo;
    capacity = hi - lo;
  } else if ((p.flags & 4u) != 0u) {
    capacity = int(p.table_blocks) * p.block_size; // validation keeps it within int32
  } else {
    capacity = p.kv_rows;
  }
  int kv_len = capacity;
  uint fault = 0u;
  if ((p.flags & 8u) != 0u) {
    kv_len = lens[p.lens_first + b * p.lens_stride];
    if (kv_len < 0 || kv_len > capacity)
      fault = FAULT_SEQLENS_KV;
  }
  if (fault == 0u && q_len > p.max_q)
    fault = FAULT_MAX_SEQLEN_Q;
  if (fault == 0u && kv_len > p.max_kv)
    fault = FAULT_MAX_SEQLEN_KV;
  if (fault != 0u) {
    if (tid == 0u) {
      record(b, q_first, q_len, kv_first, -1);
      atomicMin(faults[fault], int(b));
    }
    return;
  }
  if ((p.flags & 4u) != 0u) {
    // Every entry keys [0, kv_len) use, copied next to the record.
    if (tid == 0u)
      s_bad = 0u;
    barrier();
    uint blocks = (uint(kv_len) + uint(p.block_size) - 1u) / uint(p.block_size);
    uint row = p.table_first + b * p.table_s0, at = b * p.plan_stride + 4u;
    bool bad = false;
    for (uint j = tid; j < blocks; j += gl_WorkGroupSize.x) {
      int e = table[row + j * p.table_s1];
      bad = bad || e < 0 || e >= p.kv_rows;
      plan[at + j] = e;
    }
    if (bad)
      atomicOr(s_bad, 1u);
    barrier();
    if (s_bad != 0u) {
      if (tid == 0u) {
        record(b, q_first, q_len, kv_first, -1);
        atomicMin(faults[FAULT_BLOCK_TABLE], int(b));
      }
      return;
    }
  }
  if (tid == 0u)
    record(b, q_first, q_len, kv_first, kv_len);
}
