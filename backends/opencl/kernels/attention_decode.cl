/* SPDX-License-Identifier: Apache-2.0 */
/* Split-KV decode (flash-decoding) for few query rows per sequence
 * (ops_attention.c picks it for max_seqlen_q <= 16); program.c opens this
 * file with attention_common.cl. Semantics as attention.cl's.
 *
 * tsr_attention_decode (-DTSR_ATT_DECODE -DTSR_ATT_DP=64|128|256
 *   -DTSR_ATT_RT=1|2|4|8 -DTSR_ATT_NB -DTSR_ATT_WG): a work-group per (key
 *   range, row tile, key/value head, sequence). Its RT rows are (position,
 *   query head of the GQA group) pairs, so each K/V row is read once per
 *   key/value head and row tile. The work-group is WG / KL lane groups of
 *   KL = DP / 8 work items; a lane group streams keys (NB per step, K and V
 *   loaded together, many loads in flight), each lane holding 8 head-dim
 *   elements of the RT query rows and of their outputs, with the online
 *   softmax in registers; a key's dot products are summed over its KL lanes
 *   (warp shuffles on NVIDIA, local memory elsewhere). The lane groups merge
 *   through local memory at the end. Without a split (-DTSR_ATT_SPLIT=0)
 *   that merge writes o and lse; with one, each range writes partial
 *   (o, max, sum) rows to f32 scratch ([splits][B][Hq][Sq][D], maxima, sums)
 *   and the range 0 group of key/value head 0 and row tile 0 records the
 *   sequence's geometry (q_first, Lq, Lkv, fault: 4 int32 from seq_first),
 *   then tsr_attention_decode_combine writes o and lse. */

#if !defined(TSR_ATT_DECODE)
#error "attention_decode.cl: build with -DTSR_ATT_DECODE"
#endif

#define DEC_DP TSR_ATT_DP
#define DEC_RT TSR_ATT_RT               /* query rows per work-group */
#define DEC_NB TSR_ATT_NB               /* keys per lane group and step */
#define DEC_WG TSR_ATT_WG               /* work items */
#define DEC_KL (DEC_DP / 8)             /* lanes per key: 8 head-dim elements each */
#define DEC_G (DEC_WG / DEC_KL)         /* lane groups */
#define DEC_UR (DEC_NB * DEC_RT)        /* dot products per lane group and step */
#define DEC_LOCAL (DEC_WG * DEC_RT * 8) /* floats: every lane group's output rows */
/* Loops over rows, keys and lanes unrolled, so their arrays stay in
 * registers. */
#define DEC_UNROLL _Pragma("unroll")

#if DEC_WG % DEC_KL || DEC_UR > DEC_KL || DEC_WG % 32
#error "attention decode: WG a multiple of 32 and of DP / 8, NB * RT at most DP / 8"
#endif

/* How a key's dot products are summed over its KL lanes: 2, NVIDIA warp
 * shuffles (inline PTX; a lane group lies within a warp); 0, local memory
 * (each lane's partials, then one lane per dot product sums them). */
#ifndef TSR_ATT_REDUCE
#if TSR_CL_DEVICE_NV_SM >= 70 && TSR_CL_DEVICE_WARP == 32
#define TSR_ATT_REDUCE 2
#else
#define TSR_ATT_REDUCE 0
#endif
#endif

#if TSR_ATT_REDUCE == 2
inline float tsr_att_shuffle_xor(float v, int lane_mask) {
  uint r;
  __asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;"
                 : "=r"(r)
                 : "r"(as_uint(v)), "r"(lane_mask));
  return as_float(r);
}
#endif

__kernel __attribute__((reqd_work_group_size(DEC_WG, 1, 1))) void
tsr_attention_decode(const __global tsr_t *q, const __global tsr_t *k, const __global tsr_t *v,
                     __global tsr_t *o, __global float *lse, __global float *part,
                     TSR_ATT_INDEX_ARGS, volatile __global int *faults,
                     const tsr_cl_attention_params p) {
  __local float s_mem[DEC_LOCAL]; /* lane partials during the keys, outputs after */
  __local float s_ml[2 * DEC_G * DEC_RT];
#if TSR_ATT_REDUCE == 0
  __local float s_sc[DEC_G * DEC_UR];
#endif
  __local int s_flag;
#if !TSR_ATT_SPLIT
  (void)part;
#endif

  const int tid = (int)get_local_id(0), lane = tid % DEC_KL, g = tid / DEC_KL;
  const int split = (int)get_group_id(0) % p.splits, tile = (int)get_group_id(0) / p.splits;
  const int hk = (int)get_group_id(1), b = (int)get_group_id(2);
  const int row0 = tile * DEC_RT;
  const tsr_att_seq seq = tsr_att_sequence(TSR_ATT_INDEX, &p, b, &s_flag, tid, DEC_WG);
#if TSR_ATT_SPLIT
  if (tid == 0 && split == 0 && tile == 0 && hk == 0) {
    /* the sequence as tsr_attention_decode_combine needs it */
    __global int *record = (__global int *)part + p.seq_first + 4 * (long)b;
    record[0] = (int)seq.q_first;
    record[1] = seq.q_len;
    record[2] = seq.kv_len;
    record[3] = seq.fault;
  }
  if (seq.fault >= 0) {
    if (tid == 0)
      atomic_min(&faults[seq.fault], b);
    return;
  }
#else
  if (seq.fault >= 0) {
    tsr_att_fault(o, lse, faults, &p, &seq, b, hk, row0, DEC_RT, tid, DEC_WG);
    return;
  }
#endif
  const int rows = seq.q_len * p.group;
  if (row0 >= rows)
    return;
  const int shift = seq.kv_len - seq.q_len;
  int lo = split * p.kv_chunk, hi = min(seq.kv_len - 1, lo + p.kv_chunk - 1);
#if TSR_ATT_SPLIT
  if (lo >= seq.kv_len)
    return; /* the combine reads ceil(kv_len / kv_chunk) ranges */
#endif
  const int pos_first = row0 / p.group + shift;
  const int pos_last = (min(row0 + DEC_RT, rows) - 1) / p.group + shift;
  if (p.window_left >= 0)
    lo = max(lo, pos_first - p.window_left);
  if (p.window_right >= 0)
    hi = min(hi, pos_last + p.window_right);

  /* whether every row of the tile sees every key of [lo, hi], as without a
   * window or where the window is wider than the range: then no key needs
   * a per-row test */
  const bool whole = (p.window_left < 0 || pos_last - p.window_left <= lo) &&
                     (p.window_right < 0 || pos_first + p.window_right >= hi);
  int pos[DEC_RT];
  float8 qf[DEC_RT], acc[DEC_RT];
  float m[DEC_RT], l[DEC_RT];
  DEC_UNROLL
  for (int r = 0; r < DEC_RT; r++) {
    int row = min(row0 + r, rows - 1), i = row / p.group, h = hk * p.group + row % p.group;
    pos[r] = i + shift;
    qf[r] = (float8)(0.0f);
    if (row0 + r < rows) /* rows past the end compute on zeros and store nothing */
      qf[r] =
          tsr_att_load8(q, TSR_ATT_Q_ROW(p, q, seq, b, i, h), p.q_sd, 8 * lane, p.dim, TSR_ATT_VQ) *
          p.scale_log2;
    acc[r] = (float8)(0.0f);
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }

  /* Lane group g takes keys j0 + g, j0 + g + G, ... (NB of them) per step;
   * every work item runs the same steps (the local-memory sums have
   * barriers). */
  /* key rows of the step's keys, looked up a step ahead: a paged row's block
   * comes from the block table, a load the K/V loads would wait for */
  long2 at[DEC_NB];
  DEC_UNROLL
  for (int u = 0; u < DEC_NB; u++) {
    int key = lo + u * DEC_G + g;
    at[u] = key <= hi ? tsr_att_key_rows(bt, &p, &seq, b, hk, key) : (long2)(0);
  }
  for (int j0 = lo; j0 <= hi; j0 += DEC_G * DEC_NB) {
    int key[DEC_NB];
    float8 kf[DEC_NB], vf[DEC_NB];
    DEC_UNROLL
    for (int u = 0; u < DEC_NB; u++) {
      key[u] = j0 + u * DEC_G + g;
      kf[u] = (float8)(0.0f);
      vf[u] = (float8)(0.0f);
      if (key[u] <= hi) {
        kf[u] = tsr_att_load8(k, at[u].x, p.k_sd, 8 * lane, p.dim, TSR_ATT_VK);
        vf[u] = tsr_att_load8(v, at[u].y, p.v_sd, 8 * lane, p.dim, TSR_ATT_VV);
      }
    }
    DEC_UNROLL
    for (int u = 0; u < DEC_NB; u++) {
      int next = key[u] + DEC_G * DEC_NB;
      at[u] = next <= hi ? tsr_att_key_rows(bt, &p, &seq, b, hk, next) : (long2)(0);
    }
    float s[DEC_NB][DEC_RT];
    DEC_UNROLL
    for (int u = 0; u < DEC_NB; u++) {
      DEC_UNROLL
      for (int r = 0; r < DEC_RT; r++)
        s[u][r] = dot(qf[r].lo, kf[u].lo) + dot(qf[r].hi, kf[u].hi);
    }
#if TSR_ATT_REDUCE == 2
    /* butterfly: every lane ends with the same sum (a + b == b + a) */
    DEC_UNROLL
    for (int u = 0; u < DEC_NB; u++) {
      DEC_UNROLL
      for (int r = 0; r < DEC_RT; r++) {
        DEC_UNROLL
        for (int mask = DEC_KL / 2; mask > 0; mask >>= 1)
          s[u][r] += tsr_att_shuffle_xor(s[u][r], mask);
      }
    }
#else
    DEC_UNROLL
    for (int u = 0; u < DEC_NB; u++) {
      DEC_UNROLL
      for (int r = 0; r < DEC_RT; r++)
        s_mem[(u * DEC_RT + r) * DEC_WG + tid] = s[u][r];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lane < DEC_UR) {
      float sum = 0.0f;
      DEC_UNROLL
      for (int x = 0; x < DEC_KL; x++)
        sum += s_mem[lane * DEC_WG + g * DEC_KL + x];
      s_sc[g * DEC_UR + lane] = sum;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    DEC_UNROLL
    for (int u = 0; u < DEC_NB; u++) {
      DEC_UNROLL
      for (int r = 0; r < DEC_RT; r++)
        s[u][r] = s_sc[g * DEC_UR + u * DEC_RT + r];
    }
#endif
    DEC_UNROLL
    for (int r = 0; r < DEC_RT; r++) {
      /* fmax skips NaN, whose row turns NaN through exp2 (see flash) */
      float m_new = m[r];
      DEC_UNROLL
      for (int u = 0; u < DEC_NB; u++) {
        s[u][r] = key[u] <= hi && (whole || tsr_att_seen(&p, key[u], pos[r], seq.kv_len))
                      ? tsr_att_score(&p, s[u][r])
                      : -INFINITY;
        m_new = fmax(m_new, s[u][r]);
      }
      float corr = m[r] == -INFINITY ? 0.0f : exp2(m[r] - m_new);
      float sum = l[r] * corr;
      float8 a = acc[r] * corr;
      DEC_UNROLL
      for (int u = 0; u < DEC_NB; u++) {
        float pr = s[u][r] == -INFINITY ? 0.0f : exp2(s[u][r] - m_new);
        sum += pr;
        a = mad((float8)(pr), vf[u], a);
      }
      acc[r] = a;
      l[r] = sum;
      m[r] = m_new;
    }
  }

  /* The lane groups' rows merged: weights 2^(m_g - max) as in a combine. */
  barrier(CLK_LOCAL_MEM_FENCE);
  DEC_UNROLL
  for (int r = 0; r < DEC_RT; r++)
    vstore8(acc[r], 0, s_mem + (g * DEC_RT + r) * DEC_DP + 8 * lane);
  if (lane == 0) {
    DEC_UNROLL
    for (int r = 0; r < DEC_RT; r++) {
      s_ml[g * DEC_RT + r] = m[r];
      s_ml[(DEC_G + g) * DEC_RT + r] = l[r];
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int e = tid; e < DEC_RT * DEC_DP; e += DEC_WG) {
    int r = e / DEC_DP, d = e % DEC_DP, row = row0 + r;
    if (row >= rows)
      break;
    if (d >= p.dim && d > 0)
      continue;
    float mx = -INFINITY;
    DEC_UNROLL
    for (int x = 0; x < DEC_G; x++)
      mx = fmax(mx, s_ml[x * DEC_RT + r]);
    float total = 0.0f, out = 0.0f;
    DEC_UNROLL
    for (int x = 0; x < DEC_G; x++) {
      float mg = s_ml[x * DEC_RT + r], w = mg == -INFINITY ? 0.0f : exp2(mg - mx);
      total += w * s_ml[(DEC_G + x) * DEC_RT + r];
      out += w * s_mem[(x * DEC_RT + r) * DEC_DP + d];
    }
    int i = row / p.group, h = hk * p.group + row % p.group;
#if TSR_ATT_SPLIT
    long at = split * p.part_rows + ((long)b * p.hq + h) * p.sq + i;
    long stats = p.splits * p.part_rows * p.dim;
    if (d < p.dim)
      part[at * p.dim + d] = out;
    if (d == 0) {
      part[stats + at] = mx;
      part[stats + p.splits * p.part_rows + at] = total;
    }
#else
    if (d < p.dim)
      tsr_store(o, TSR_ATT_Q_ROW(p, o, seq, b, i, h) + (long)d * p.o_sd,
                total == 0.0f ? 0.0f : out / total);
    if (d == 0 && (p.flags & TSR_CL_ATTENTION_LSE))
      lse[TSR_ATT_LSE_AT(p, seq, b, i, h)] = tsr_att_lse(mx, total);
#endif
  }
}

#if TSR_ATT_SPLIT
/* Merges the key ranges of each row of B * Hq * Sq (a work-group of 64
 * each), with the geometry tsr_attention_decode recorded per sequence: NaN
 * for a faulted sequence's located rows, nothing for rows it does not own,
 * ceil(Lkv / kv_chunk) ranges otherwise. */
__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void
tsr_attention_decode_combine(__global tsr_t *o, __global float *lse, const __global float *part,
                             const __global int *records, const tsr_cl_attention_params p) {
  const int tid = (int)get_local_id(0);
  const long row = (long)get_group_id(0); /* (b * Hq + h) * Sq + i */
  const int i = (int)(row % p.sq), h = (int)(row / p.sq % p.hq), b = (int)(row / p.sq / p.hq);
  const __global int *record = records + p.seq_first + 4 * (long)b;
  tsr_att_seq seq;
  seq.q_first = record[0];
  seq.kv_first = 0;
  seq.q_len = record[1];
  seq.kv_len = record[2];
  seq.fault = record[3];
  seq.located = seq.fault != TSR_CL_FAULT_CU_SEQLENS_Q;
  if (i >= seq.q_len || !seq.located)
    return;
  if (seq.fault >= 0) {
    tsr_att_nan_row(o, lse, &p, &seq, b, i, h, tid, 64);
    return;
  }
  const int ranges = seq.kv_len == 0 ? 0 : (seq.kv_len - 1) / p.kv_chunk + 1;
  const long stats = p.splits * p.part_rows * p.dim;
  const __global float *ms = part + stats + row, *ls = ms + p.splits * p.part_rows;
  float mx = -INFINITY;
  for (int s = 0; s < ranges; s++)
    mx = fmax(mx, ms[s * p.part_rows]);
  float total = 0.0f;
  for (int s = 0; s < ranges; s++) {
    float m = ms[s * p.part_rows];
    total += (m == -INFINITY ? 0.0f : exp2(m - mx)) * ls[s * p.part_rows];
  }
  float inv = total == 0.0f ? 0.0f : 1.0f / total;
  long o_base = TSR_ATT_Q_ROW(p, o, seq, b, i, h);
  for (int d = tid; d < p.dim; d += 64) {
    float x = 0.0f;
    for (int s = 0; s < ranges; s++) {
      float m = ms[s * p.part_rows];
      x += (m == -INFINITY ? 0.0f : exp2(m - mx)) * part[(s * p.part_rows + row) * p.dim + d];
    }
    tsr_store(o, o_base + (long)d * p.o_sd, total == 0.0f ? 0.0f : x * inv);
  }
  if (tid == 0 && (p.flags & TSR_CL_ATTENTION_LSE))
    lse[TSR_ATT_LSE_AT(p, seq, b, i, h)] = tsr_att_lse(mx, total);
}
#endif
