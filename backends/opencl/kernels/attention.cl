/* SPDX-License-Identifier: Apache-2.0 */
/* Attention forward (ops_attention.c launches these), f32 math on the
 * storage dtype of the build (-DTSR_DTYPE); program.c opens this file with
 * attention_common.cl (defaults, loads, scores, serving geometry). Semantics,
 * as the reference's: query row i of a sequence with Lq rows and Lkv keys
 * sits at key position p = i + Lkv - Lq (bottom-right alignment); key j is
 * seen when p - window_left <= j <= p + window_right (each bound only when
 * >= 0). A row that sees no key gets o = 0 and lse = -inf. An infinite score
 * (an infinity in q or k: the API masks no key with -inf) turns NaN, so
 * that its row's o and lse are NaN as in the reference, where e^-inf = 0
 * would hide it. Scores are in log2 units (q is scaled by scale * log2 e) so
 * the softmax runs on exp2. Few query rows against long keys (decode) have
 * their own kernel: attention_decode.cl.
 *
 * One of two kernels is built, by the options:
 *
 * tsr_attention_flash (-DTSR_ATT_FLASH -DTSR_ATT_DP=64|128|256
 *   -DTSR_ATT_BQ -DTSR_ATT_BKV -DTSR_ATT_RQ -DTSR_ATT_TPR): online softmax
 *   over BQ query rows of one (batch, key/value head). The rows are packed
 *   as (position, query head of the group) pairs, so the query heads that
 *   share a key/value head share its K/V tiles too (GQA decode fills a
 *   tile). K and V tiles of BKV keys go through one __local tile in turn;
 *   tiles no row of the group sees are never visited. TPR work items share
 *   RQ rows: for the scores each holds RQ x BKV/TPR of them, for the output
 *   RQ x DP/TPR columns as float4s. Head dims up to DP are zero padded;
 *   __local rows are padded by one float4 so that the work items reading
 *   different keys of one column fall in different banks. The last query
 *   tile goes first: under a causal mask it sees the most keys. Paged keys:
 *   each tile's rows are looked up once into __local memory.
 *   With -DTSR_ATT_SPLIT=1 (dense only: few work-groups for the device) the
 *   keys are cut into ranges of kv_chunk, a work-group each, which write
 *   unnormalised partial rows with their max and sum to f32 scratch;
 *   tsr_attention_combine then merges the ranges of each row.
 *
 * tsr_attention_generic (-DTSR_ATT_THREADS=<power of two> -DTSR_ATT_CPT):
 *   any head dim. A work-group per query row; each work item scores one key
 *   of a chunk of THREADS keys (a dot product over the whole head dim), the
 *   chunk's max and sum are group reductions, and each work item keeps CPT
 *   output columns. Head dims above THREADS * CPT take several passes over
 *   the keys, a block of columns each. */

#if defined(TSR_ATT_FLASH)

#define ATT_DP TSR_ATT_DP
#define ATT_BQ TSR_ATT_BQ
#define ATT_BKV TSR_ATT_BKV
#define ATT_RQ TSR_ATT_RQ
#define ATT_TPR TSR_ATT_TPR
#define ATT_WG (ATT_BQ / ATT_RQ * ATT_TPR)
#define ATT_D4 (ATT_DP / 4)         /* float4s of a row */
#define ATT_DQ4 (ATT_D4 + 1)        /* a __local row, padded */
#define ATT_KPT (ATT_BKV / ATT_TPR) /* keys per work item in the scores */
#define ATT_CPT4 (ATT_D4 / ATT_TPR) /* output float4s per work item */

#if ATT_BQ % ATT_RQ || ATT_BKV % ATT_TPR || ATT_D4 % ATT_TPR
#error "attention flash: BQ must be a multiple of RQ, BKV and DP / 4 of TPR"
#endif

/* Rows [j0, j0 + BKV) of k or v into s_kv, zero past kv_len and the head
 * dim: key j's row starts at base + j * ss, or (paged) at
 * rows[which * BKV + j - j0], `which` 0 for k and 1 for v. */
inline void tsr_att_stage(__local float4 *s_kv, const __global tsr_t *x, long base, long ss,
                          __local const long *rows, int which, long sd, int vec, int j0, int kv_len,
                          int dim, int tid) {
  for (int e = tid; e < ATT_BKV * ATT_D4; e += ATT_WG) {
    int j = e / ATT_D4, d4 = e % ATT_D4;
    int key = j0 + j;
    float4 value = (float4)(0.0f);
#if TSR_ATT_KV == 2
    if (key < kv_len)
      value = tsr_att_load4(x, rows[which * ATT_BKV + j], sd, 4 * d4, dim, vec);
#else
    (void)rows;
    (void)which;
    if (key < kv_len)
      value = tsr_att_load4(x, base + (long)key * ss, sd, 4 * d4, dim, vec);
#endif
    s_kv[j * ATT_DQ4 + d4] = value;
  }
}

__kernel __attribute__((reqd_work_group_size(ATT_WG, 1, 1))) void
tsr_attention_flash(const __global tsr_t *q, const __global tsr_t *k, const __global tsr_t *v,
                    __global tsr_t *o, __global float *lse, __global float *part,
                    TSR_ATT_INDEX_ARGS, volatile __global int *faults,
                    const tsr_cl_attention_params p) {
  __local float4 s_q[ATT_BQ * ATT_DQ4];
  __local float4 s_kv[ATT_BKV * ATT_DQ4];
  __local float s_p[ATT_BQ * ATT_BKV];
  __local int s_flag;
#if TSR_ATT_KV == 2
  __local long s_rows[2 * ATT_BKV]; /* the tile's key rows in k, then in v */
#else
  __local const long *s_rows = 0;
#endif
#if TSR_ATT_SPLIT
  (void)o; /* tsr_attention_combine writes o and lse */
  (void)lse;
#else
  (void)part;
#endif

  const int tid = (int)get_local_id(0);
  const int lane = tid % ATT_TPR;
  const int r0 = tid / ATT_TPR * ATT_RQ; /* this work item's first row in the tile */
  const int split = TSR_ATT_SPLIT ? (int)get_group_id(0) % p.splits : 0;
  const int tile = p.tiles - 1 - (int)get_group_id(0) / (TSR_ATT_SPLIT ? p.splits : 1);
  const int hk = (int)get_group_id(1), b = (int)get_group_id(2);
  const int row0 = tile * ATT_BQ;
  const tsr_att_seq seq = tsr_att_sequence(TSR_ATT_INDEX, &p, b, &s_flag, tid, ATT_WG);
  if (seq.fault >= 0) {
    tsr_att_fault(o, lse, faults, &p, &seq, b, hk, row0, ATT_BQ, tid, ATT_WG);
    return;
  }
  const int rows = seq.q_len * p.group; /* packed rows: row = i * group + head in group */
  if (row0 >= rows)
    return;
  const int shift = seq.kv_len - seq.q_len;
  const long2 kv_base = tsr_att_key_rows(bt, &p, &seq, b, hk, 0);

  for (int e = tid; e < ATT_BQ * ATT_D4; e += ATT_WG) {
    int r = e / ATT_D4, d4 = e % ATT_D4;
    int row = row0 + r;
    float4 x = (float4)(0.0f);
    if (row < rows) {
      int i = row / p.group, h = hk * p.group + row % p.group;
      x = tsr_att_load4(q, TSR_ATT_Q_ROW(p, q, seq, b, i, h), p.q_sd, 4 * d4, p.dim, TSR_ATT_VQ) *
          p.scale_log2;
    }
    s_q[r * ATT_DQ4 + d4] = x;
  }

  /* The keys any row of the tile sees. */
  const int pos_first = row0 / p.group + shift;
  const int pos_last = (min(row0 + ATT_BQ, rows) - 1) / p.group + shift;
  int lo = 0, hi = seq.kv_len - 1;
  if (p.window_left >= 0)
    lo = max(lo, pos_first - p.window_left);
  if (p.window_right >= 0)
    hi = min(hi, pos_last + p.window_right);
  if (TSR_ATT_SPLIT) {
    lo = max(lo, split * p.kv_chunk);
    hi = min(hi, split * p.kv_chunk + p.kv_chunk - 1);
  }

  int pos[ATT_RQ];
  float m[ATT_RQ], l[ATT_RQ];
  float4 acc[ATT_RQ][ATT_CPT4];
  for (int i = 0; i < ATT_RQ; i++) {
    /* rows past the end compute on zeros and store nothing */
    pos[i] = min(row0 + r0 + i, rows - 1) / p.group + shift;
    m[i] = -INFINITY;
    l[i] = 0.0f;
    for (int c = 0; c < ATT_CPT4; c++)
      acc[i][c] = (float4)(0.0f);
  }

  for (int j0 = lo / ATT_BKV * ATT_BKV; j0 <= hi; j0 += ATT_BKV) {
    barrier(CLK_LOCAL_MEM_FENCE); /* the last tile's V reads (and the q stores) are done */
#if TSR_ATT_KV == 2
    for (int j = tid; j < ATT_BKV; j += ATT_WG)
      if (j0 + j < seq.kv_len) {
        long2 at = tsr_att_key_rows(bt, &p, &seq, b, hk, j0 + j);
        s_rows[j] = at.x;
        s_rows[ATT_BKV + j] = at.y;
      }
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
    tsr_att_stage(s_kv, k, kv_base.x, p.k_ss, s_rows, 0, p.k_sd, TSR_ATT_VK, j0, seq.kv_len, p.dim,
                  tid);
    barrier(CLK_LOCAL_MEM_FENCE);

    float sc[ATT_RQ][ATT_KPT];
    for (int i = 0; i < ATT_RQ; i++)
      for (int t = 0; t < ATT_KPT; t++)
        sc[i][t] = 0.0f;
    for (int d4 = 0; d4 < ATT_D4; d4++) {
      float4 qv[ATT_RQ];
      for (int i = 0; i < ATT_RQ; i++)
        qv[i] = s_q[(r0 + i) * ATT_DQ4 + d4];
      for (int t = 0; t < ATT_KPT; t++) {
        float4 kv = s_kv[(lane + t * ATT_TPR) * ATT_DQ4 + d4];
        for (int i = 0; i < ATT_RQ; i++)
          sc[i][t] += dot(qv[i], kv);
      }
    }
    for (int i = 0; i < ATT_RQ; i++)
      for (int t = 0; t < ATT_KPT; t++) {
        int j = lane + t * ATT_TPR;
        s_p[(r0 + i) * ATT_BKV + j] =
            tsr_att_seen(&p, j0 + j, pos[i], seq.kv_len) ? tsr_att_score(&p, sc[i][t]) : -INFINITY;
      }
    barrier(CLK_LOCAL_MEM_FENCE);

    /* fmax skips NaN: a row of NaN scores keeps its max, and its NaN
     * reaches the sum (and o) through exp2(NaN). */
    float m_new[ATT_RQ], corr[ATT_RQ];
    for (int i = 0; i < ATT_RQ; i++)
      m_new[i] = m[i];
    for (int j = 0; j < ATT_BKV; j++)
      for (int i = 0; i < ATT_RQ; i++)
        m_new[i] = fmax(m_new[i], s_p[(r0 + i) * ATT_BKV + j]);
    for (int i = 0; i < ATT_RQ; i++)
      corr[i] = m[i] == -INFINITY ? 0.0f : exp2(m[i] - m_new[i]);
    barrier(CLK_LOCAL_MEM_FENCE); /* every max is read before scores turn probabilities */
    for (int i = 0; i < ATT_RQ; i++)
      for (int t = 0; t < ATT_KPT; t++) {
        int at = (r0 + i) * ATT_BKV + lane + t * ATT_TPR;
        float s = s_p[at];
        s_p[at] = s == -INFINITY ? 0.0f : exp2(s - m_new[i]);
      }
    tsr_att_stage(s_kv, v, kv_base.y, p.v_ss, s_rows, 1, p.v_sd, TSR_ATT_VV, j0, seq.kv_len, p.dim,
                  tid);
    barrier(CLK_LOCAL_MEM_FENCE);

    for (int i = 0; i < ATT_RQ; i++) {
      float sum = 0.0f;
      for (int j = 0; j < ATT_BKV; j++)
        sum += s_p[(r0 + i) * ATT_BKV + j];
      l[i] = l[i] * corr[i] + sum;
      m[i] = m_new[i];
      for (int c = 0; c < ATT_CPT4; c++)
        acc[i][c] *= corr[i];
    }
    for (int j = 0; j < ATT_BKV; j++) {
      float pj[ATT_RQ];
      for (int i = 0; i < ATT_RQ; i++)
        pj[i] = s_p[(r0 + i) * ATT_BKV + j];
      for (int c = 0; c < ATT_CPT4; c++) {
        float4 vv = s_kv[j * ATT_DQ4 + lane + c * ATT_TPR];
        for (int i = 0; i < ATT_RQ; i++)
          acc[i][c] = mad((float4)(pj[i]), vv, acc[i][c]);
      }
    }
  }

  for (int i = 0; i < ATT_RQ; i++) {
    int row = row0 + r0 + i;
    if (row >= rows)
      break;
    int qi = row / p.group, h = hk * p.group + row % p.group;
#if TSR_ATT_SPLIT
    /* this range's partial row, for tsr_attention_combine */
    long at = split * p.part_rows + ((long)b * p.hq + h) * p.sq + qi;
    long stats = p.splits * p.part_rows * p.dim;
    for (int c = 0; c < ATT_CPT4; c++) {
      int d = 4 * (lane + c * ATT_TPR);
      float4 x = acc[i][c];
      __global float *out = part + at * p.dim + d;
      if (d + 3 < p.dim) {
        vstore4(x, 0, out);
      } else {
        if (d < p.dim)
          out[0] = x.s0;
        if (d + 1 < p.dim)
          out[1] = x.s1;
        if (d + 2 < p.dim)
          out[2] = x.s2;
      }
    }
    if (lane == 0) {
      part[stats + at] = m[i];
      part[stats + p.splits * p.part_rows + at] = l[i];
    }
#else
    /* l = 0: no key seen, o = 0; a NaN l stays NaN */
    float inv = l[i] == 0.0f ? 0.0f : 1.0f / l[i];
    long o_base = TSR_ATT_Q_ROW(p, o, seq, b, qi, h);
    for (int c = 0; c < ATT_CPT4; c++) {
      float4 x = l[i] == 0.0f ? (float4)(0.0f) : acc[i][c] * inv;
      tsr_att_store4(o, o_base, p.o_sd, 4 * (lane + c * ATT_TPR), p.dim, TSR_ATT_VO, x);
    }
    if ((p.flags & TSR_CL_ATTENTION_LSE) && lane == 0)
      lse[TSR_ATT_LSE_AT(p, seq, b, qi, h)] = tsr_att_lse(m[i], l[i]);
#endif
  }
}

#if TSR_ATT_SPLIT
/* Merges the key ranges of each row (a work-group of 64 per row of
 * B * Hq * Sq): weights 2^(m_s - max) on each range's sum and output.
 * Dense problems only. */
__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void
tsr_attention_combine(__global tsr_t *o, __global float *lse, const __global float *part,
                      const tsr_cl_attention_params p) {
  const int tid = (int)get_local_id(0);
  const long row = (long)get_group_id(0); /* (b * Hq + h) * Sq + i */
  const int i = (int)(row % p.sq), h = (int)(row / p.sq % p.hq), b = (int)(row / p.sq / p.hq);
  const long stats = p.splits * p.part_rows * p.dim;
  const __global float *ms = part + stats + row, *ls = ms + p.splits * p.part_rows;
  float mx = -INFINITY;
  for (int s = 0; s < p.splits; s++)
    mx = fmax(mx, ms[s * p.part_rows]);
  /* a range that saw nothing weighs 0 (and -inf - -inf stays out); a NaN
   * sum stays NaN through the products */
  float total = 0.0f;
  for (int s = 0; s < p.splits; s++) {
    float m = ms[s * p.part_rows];
    total += (m == -INFINITY ? 0.0f : exp2(m - mx)) * ls[s * p.part_rows];
  }
  float inv = total == 0.0f ? 0.0f : 1.0f / total;
  long o_base = p.o_first + b * p.o_sb + (long)i * p.o_ss + (long)h * p.o_sh;
  for (int d = tid; d < p.dim; d += 64) {
    float x = 0.0f;
    for (int s = 0; s < p.splits; s++) {
      float m = ms[s * p.part_rows];
      x += (m == -INFINITY ? 0.0f : exp2(m - mx)) * part[(s * p.part_rows + row) * p.dim + d];
    }
    tsr_store(o, o_base + (long)d * p.o_sd, total == 0.0f ? 0.0f : x * inv);
  }
  if (tid == 0 && (p.flags & TSR_CL_ATTENTION_LSE))
    lse[p.lse_first + b * p.lse_sb + h * p.lse_sh + (long)i * p.lse_ss] = tsr_att_lse(mx, total);
}
#endif

#else /* the generic kernel */

#ifndef TSR_ATT_THREADS
#define TSR_ATT_THREADS 64
#endif
#ifndef TSR_ATT_CPT
#define TSR_ATT_CPT 4
#endif
#define ATT_T TSR_ATT_THREADS
#define ATT_CPT TSR_ATT_CPT

#if ATT_T & (ATT_T - 1)
#error "attention generic: TSR_ATT_THREADS must be a power of two"
#endif

__kernel __attribute__((reqd_work_group_size(ATT_T, 1, 1))) void
tsr_attention_generic(const __global tsr_t *q, const __global tsr_t *k, const __global tsr_t *v,
                      __global tsr_t *o, __global float *lse, __global float *part,
                      TSR_ATT_INDEX_ARGS, volatile __global int *faults,
                      const tsr_cl_attention_params p) {
  (void)part; /* the flash kernel's split scratch: unused here */
  __local float s_reduce[ATT_T];
  __local float s_p[ATT_T];
  __local int s_flag;
#if TSR_ATT_KV == 2
  __local long s_vrow[ATT_T]; /* the chunk's value rows */
#endif

  const int tid = (int)get_local_id(0);
  const int i = (int)get_group_id(0), h = (int)get_group_id(1), b = (int)get_group_id(2);
  const int hk = h / p.group;
  const tsr_att_seq seq = tsr_att_sequence(TSR_ATT_INDEX, &p, b, &s_flag, tid, ATT_T);
  if (seq.fault >= 0) {
    if (tid == 0)
      atomic_min(&faults[seq.fault], b);
    if (seq.located && i < min(seq.q_len, p.sq))
      tsr_att_nan_row(o, lse, &p, &seq, b, i, h, tid, ATT_T);
    return;
  }
  if (i >= seq.q_len)
    return;
  const long q_base = TSR_ATT_Q_ROW(p, q, seq, b, i, h);
  const long o_base = TSR_ATT_Q_ROW(p, o, seq, b, i, h);
  const long2 kv_base = tsr_att_key_rows(bt, &p, &seq, b, hk, 0);
  const int pos = i + seq.kv_len - seq.q_len;
  const int dim = p.dim;

  /* this row's keys: [lo, hi] */
  int lo = 0, hi = seq.kv_len - 1;
  if (p.window_left >= 0)
    lo = max(lo, pos - p.window_left);
  if (p.window_right >= 0)
    hi = min(hi, pos + p.window_right);

  /* one pass per block of T * CPT columns; at least one, for lse */
  for (int c0 = 0; c0 == 0 || c0 < dim; c0 += ATT_T * ATT_CPT) {
    float m = -INFINITY, l = 0.0f;
    float acc[ATT_CPT];
    for (int c = 0; c < ATT_CPT; c++)
      acc[c] = 0.0f;
    for (int j0 = lo; j0 <= hi; j0 += ATT_T) {
      int key = j0 + tid;
      float s = -INFINITY;
      if (key <= hi) {
#if TSR_ATT_KV == 2
        long2 rows = tsr_att_key_rows(bt, &p, &seq, b, hk, key);
        long k_row = rows.x;
        s_vrow[tid] = rows.y;
#else
        long k_row = kv_base.x + (long)key * p.k_ss;
#endif
        float dotp = 0.0f;
        for (int d = 0; d < dim; d++)
          dotp = mad(tsr_load(q, q_base + (long)d * p.q_sd), tsr_load(k, k_row + (long)d * p.k_sd),
                     dotp);
        s = tsr_att_score(&p, dotp * p.scale_log2);
      }
      /* fmax skips NaN (see the flash kernel) */
      float m_new = fmax(m, tsr_group_max(s, s_reduce, ATT_T));
      float prob = s == -INFINITY ? 0.0f : exp2(s - m_new);
      float corr = m == -INFINITY ? 0.0f : exp2(m - m_new);
      l = l * corr + tsr_group_sum(prob, s_reduce, ATT_T);
      m = m_new;
      s_p[tid] = prob;
      barrier(CLK_LOCAL_MEM_FENCE);
      int count = min(ATT_T, hi - j0 + 1);
      for (int c = 0; c < ATT_CPT; c++) {
        int d = c0 + tid + c * ATT_T;
        float a = acc[c] * corr;
        if (d < dim) {
#if TSR_ATT_KV == 2
          for (int j = 0; j < count; j++)
            a = mad(s_p[j], tsr_load(v, s_vrow[j] + (long)d * p.v_sd), a);
#else
          long v_col = kv_base.y + (long)j0 * p.v_ss + (long)d * p.v_sd;
          for (int j = 0; j < count; j++)
            a = mad(s_p[j], tsr_load(v, v_col + (long)j * p.v_ss), a);
#endif
        }
        acc[c] = a;
      }
      barrier(CLK_LOCAL_MEM_FENCE); /* s_p is read before the next chunk writes it */
    }
    float inv = l == 0.0f ? 0.0f : 1.0f / l;
    for (int c = 0; c < ATT_CPT; c++) {
      int d = c0 + tid + c * ATT_T;
      if (d < dim)
        tsr_store(o, o_base + (long)d * p.o_sd, l == 0.0f ? 0.0f : acc[c] * inv);
    }
    if (c0 == 0 && tid == 0 && (p.flags & TSR_CL_ATTENTION_LSE))
      lse[TSR_ATT_LSE_AT(p, seq, b, i, h)] = tsr_att_lse(m, l);
  }
}

#endif
