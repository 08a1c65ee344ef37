/* SPDX-License-Identifier: Apache-2.0 */
/* Attention forward (ops_attention.c launches these), f32 math on the
 * storage dtype of the build (-DTSR_DTYPE). Semantics, as the reference's:
 * query row i sits at key position p = i + Skv - Sq (bottom-right
 * alignment); key j is seen when p - window_left <= j <= p + window_right
 * (each bound only when >= 0). A row that sees no key gets o = 0 and
 * lse = -inf. An infinite score (an infinity in q or k: the API masks no key
 * with -inf) turns NaN, so that its row's o and lse are NaN as in the
 * reference, where e^-inf = 0 would hide it. Scores are in log2 units (q is
 * scaled by scale * log2 e) so the softmax runs on exp2.
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
 *   tile goes first: under a causal mask it sees the most keys.
 *   With -DTSR_ATT_SPLIT=1 (few work-groups for the device: decode) the
 *   keys are cut into ranges of kv_chunk, a work-group each, which write
 *   unnormalised partial rows with their max and sum to f32 scratch;
 *   tsr_attention_combine then merges the ranges of each row.
 *
 * tsr_attention_generic (-DTSR_ATT_THREADS=<power of two> -DTSR_ATT_CPT):
 *   any head dim. A work-group per query row; each work item scores one key
 *   of a chunk of THREADS keys (a dot product over the whole head dim), the
 *   chunk's max and sum are group reductions, and each work item keeps CPT
 *   output columns. Head dims above THREADS * CPT take several passes over
 *   the keys, a block of columns each.
 *
 * -DTSR_ATT_VQ=1 (VK, VV, VO likewise): the tensor's head dim is contiguous
 * and a multiple of 4, so four elements go in one vector access. */

#define TSR_ATT_LN2 0.6931471805599453f

#ifndef TSR_ATT_VQ
#define TSR_ATT_VQ 0
#endif
#ifndef TSR_ATT_VK
#define TSR_ATT_VK 0
#endif
#ifndef TSR_ATT_VV
#define TSR_ATT_VV 0
#endif
#ifndef TSR_ATT_VO
#define TSR_ATT_VO 0
#endif

/* Four contiguous elements at p[i] (vload/vstore need element alignment
 * only). */
#if TSR_DTYPE == TSR_CL_F32
inline float4 tsr_att_vload4(const __global tsr_t *p, long i) {
  return vload4(0, p + i);
}
inline void tsr_att_vstore4(__global tsr_t *p, long i, float4 x) {
  vstore4(x, 0, p + i);
}
#elif TSR_DTYPE == TSR_CL_F16
inline float4 tsr_att_vload4(const __global tsr_t *p, long i) {
  return vload_half4(0, (const __global half *)(p + i));
}
inline void tsr_att_vstore4(__global tsr_t *p, long i, float4 x) {
  vstore_half4_rte(x, 0, (__global half *)(p + i));
}
#else
inline float4 tsr_att_vload4(const __global tsr_t *p, long i) {
  return as_float4(convert_uint4(vload4(0, p + i)) << 16);
}
inline void tsr_att_vstore4(__global tsr_t *p, long i, float4 x) {
  ushort4 u = (ushort4)(tsr_f32_to_bf16(x.s0), tsr_f32_to_bf16(x.s1), tsr_f32_to_bf16(x.s2),
                        tsr_f32_to_bf16(x.s3));
  vstore4(u, 0, p + i);
}
#endif

/* Head-dim elements d .. d + 3 (d a multiple of 4) of the row at `base`
 * with stride `sd`, zero from `dim` on; `vec` (a build constant) takes them
 * in one access. */
inline float4 tsr_att_load4(const __global tsr_t *p, long base, long sd, int d, int dim, int vec) {
  if (vec)
    return d < dim ? tsr_att_vload4(p, base + d) : (float4)(0.0f);
  float4 x = (float4)(0.0f);
  if (d < dim)
    x.s0 = tsr_load(p, base + (long)d * sd);
  if (d + 1 < dim)
    x.s1 = tsr_load(p, base + (long)(d + 1) * sd);
  if (d + 2 < dim)
    x.s2 = tsr_load(p, base + (long)(d + 2) * sd);
  if (d + 3 < dim)
    x.s3 = tsr_load(p, base + (long)(d + 3) * sd);
  return x;
}

inline void tsr_att_store4(__global tsr_t *p, long base, long sd, int d, int dim, int vec,
                           float4 x) {
  if (vec) {
    if (d < dim)
      tsr_att_vstore4(p, base + d, x);
    return;
  }
  if (d < dim)
    tsr_store(p, base + (long)d * sd, x.s0);
  if (d + 1 < dim)
    tsr_store(p, base + (long)(d + 1) * sd, x.s1);
  if (d + 2 < dim)
    tsr_store(p, base + (long)(d + 2) * sd, x.s2);
  if (d + 3 < dim)
    tsr_store(p, base + (long)(d + 3) * sd, x.s3);
}

/* Infinite scores become NaN; finite ones and NaN stay. A compare rather
 * than isinf, which compilers assuming finite math may fold away. */
inline float tsr_att_poison_infinite(float s) {
  return fabs(s) > MAXFLOAT ? NAN : s;
}

/* Whether key `key` is seen from position `pos` (key >= 0 always). */
inline bool tsr_att_seen(const tsr_cl_attention_params *p, int key, int pos) {
  return key < p->skv && (p->window_left < 0 || key >= pos - p->window_left) &&
         (p->window_right < 0 || key <= pos + p->window_right);
}

/* lse of a row from its running max (log2 units) and sum: -inf when no key
 * was seen, NaN when the sum is. */
inline float tsr_att_lse(float m, float l) {
  return l == 0.0f ? -INFINITY : (m + log2(l)) * TSR_ATT_LN2;
}

#if defined(TSR_ATT_FLASH)

#ifndef TSR_ATT_SPLIT
#define TSR_ATT_SPLIT 0
#endif

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

/* Rows [j0, j0 + BKV) of k or v into s_kv, zero past Skv and the head dim. */
inline void tsr_att_stage(__local float4 *s_kv, const __global tsr_t *x, long base, long ss,
                          long sd, int vec, int j0, const tsr_cl_attention_params *p, int tid) {
  for (int e = tid; e < ATT_BKV * ATT_D4; e += ATT_WG) {
    int j = e / ATT_D4, d4 = e % ATT_D4;
    int key = j0 + j;
    float4 value = (float4)(0.0f);
    if (key < p->skv)
      value = tsr_att_load4(x, base + (long)key * ss, sd, 4 * d4, p->dim, vec);
    s_kv[j * ATT_DQ4 + d4] = value;
  }
}

__kernel __attribute__((reqd_work_group_size(ATT_WG, 1, 1))) void
tsr_attention_flash(const __global tsr_t *q, const __global tsr_t *k, const __global tsr_t *v,
                    __global tsr_t *o, __global float *lse, __global float *part,
                    const tsr_cl_attention_params p) {
  __local float4 s_q[ATT_BQ * ATT_DQ4];
  __local float4 s_kv[ATT_BKV * ATT_DQ4];
  __local float s_p[ATT_BQ * ATT_BKV];
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
  const int rows = p.sq * p.group; /* packed rows: row = i * group + head in group */
  const int row0 = tile * ATT_BQ;
  const int shift = p.skv - p.sq;
  const long k_base = p.k_first + b * p.k_sb + hk * p.k_sh;
  const long v_base = p.v_first + b * p.v_sb + hk * p.v_sh;

  for (int e = tid; e < ATT_BQ * ATT_D4; e += ATT_WG) {
    int r = e / ATT_D4, d4 = e % ATT_D4;
    int row = row0 + r;
    float4 x = (float4)(0.0f);
    if (row < rows) {
      int i = row / p.group, h = hk * p.group + row % p.group;
      long base = p.q_first + b * p.q_sb + (long)i * p.q_ss + (long)h * p.q_sh;
      x = tsr_att_load4(q, base, p.q_sd, 4 * d4, p.dim, TSR_ATT_VQ) * p.scale_log2;
    }
    s_q[r * ATT_DQ4 + d4] = x;
  }

  /* The keys any row of the tile sees. */
  const int pos_first = row0 / p.group + shift;
  const int pos_last = (min(row0 + ATT_BQ, rows) - 1) / p.group + shift;
  int lo = 0, hi = p.skv - 1;
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
    tsr_att_stage(s_kv, k, k_base, p.k_ss, p.k_sd, TSR_ATT_VK, j0, &p, tid);
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
            tsr_att_seen(&p, j0 + j, pos[i]) ? tsr_att_poison_infinite(sc[i][t]) : -INFINITY;
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
    tsr_att_stage(s_kv, v, v_base, p.v_ss, p.v_sd, TSR_ATT_VV, j0, &p, tid);
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
    long o_base = p.o_first + b * p.o_sb + (long)qi * p.o_ss + (long)h * p.o_sh;
    for (int c = 0; c < ATT_CPT4; c++) {
      float4 x = l[i] == 0.0f ? (float4)(0.0f) : acc[i][c] * inv;
      tsr_att_store4(o, o_base, p.o_sd, 4 * (lane + c * ATT_TPR), p.dim, TSR_ATT_VO, x);
    }
    if ((p.flags & TSR_CL_ATTENTION_LSE) && lane == 0)
      lse[p.lse_first + b * p.lse_sb + h * p.lse_sh + (long)qi * p.lse_ss] =
          tsr_att_lse(m[i], l[i]);
#endif
  }
}

#if TSR_ATT_SPLIT
/* Merges the key ranges of each row (a work-group of 64 per row of
 * B * Hq * Sq): weights 2^(m_s - max) on each range's sum and output. */
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
                      const tsr_cl_attention_params p) {
  (void)part; /* the flash kernel's split scratch: unused here */
  __local float s_reduce[ATT_T];
  __local float s_p[ATT_T];

  const int tid = (int)get_local_id(0);
  const int i = (int)get_group_id(0), h = (int)get_group_id(1), b = (int)get_group_id(2);
  const int hk = h / p.group;
  const long q_base = p.q_first + b * p.q_sb + (long)i * p.q_ss + (long)h * p.q_sh;
  const long k_base = p.k_first + b * p.k_sb + (long)hk * p.k_sh;
  const long v_base = p.v_first + b * p.v_sb + (long)hk * p.v_sh;
  const long o_base = p.o_first + b * p.o_sb + (long)i * p.o_ss + (long)h * p.o_sh;
  const int pos = i + p.skv - p.sq;
  const int dim = p.dim;

  /* this row's keys: [lo, hi] */
  int lo = 0, hi = p.skv - 1;
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
        long k_row = k_base + (long)key * p.k_ss;
        float dotp = 0.0f;
        for (int d = 0; d < dim; d++)
          dotp = mad(tsr_load(q, q_base + (long)d * p.q_sd), tsr_load(k, k_row + (long)d * p.k_sd),
                     dotp);
        s = tsr_att_poison_infinite(dotp * p.scale_log2);
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
          long v_col = v_base + (long)j0 * p.v_ss + (long)d * p.v_sd;
          for (int j = 0; j < count; j++)
            a = mad(s_p[j], tsr_load(v, v_col + (long)j * p.v_ss), a);
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
      lse[p.lse_first + b * p.lse_sb + h * p.lse_sh + (long)i * p.lse_ss] = tsr_att_lse(m, l);
  }
}

#endif
