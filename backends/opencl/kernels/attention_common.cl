/* SPDX-License-Identifier: Apache-2.0 */
/* What the attention programs share (program.c opens attention.cl and
 * attention_decode.cl with this file): build-option defaults, loads and
 * stores of the storage dtype, scores, and the geometry of each sequence.
 *
 * Serving (-DTSR_ATT_SERVING=1): each sequence's geometry comes from the
 * int32 index tensors (tsr_att_sequence decides it, and which fault it
 * has, exactly as plugin.h's tsr_plugin_attention_seq_of), the layout by
 * build options: -DTSR_ATT_PACKED_Q=1 (cu_seqlens_q), -DTSR_ATT_KV=0|1|2
 * (k/v dense, packed by cu_seqlens_kv, paged by block_table),
 * -DTSR_ATT_SEQLENS=1 (seqlens_kv), -DTSR_ATT_SOFTCAP=1. A sequence at
 * fault records b in its fault word (atomic_min), gets NaN rows where they
 * can be located and reads no key. Without serving the geometry is the
 * dense one and folds away. Index tensors are read as plain ints (any
 * 4-byte address).
 *
 * -DTSR_ATT_VQ=1 (VK, VV, VO likewise): the tensor's head dim is contiguous
 * and a multiple of 4, so four elements go in one vector access; 2 (decode,
 * q, k, v): moreover every row starts 16 bytes aligned and the head dim is a
 * multiple of 8, so eight elements go in aligned words. */
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
#ifndef TSR_ATT_SERVING
#define TSR_ATT_SERVING 0
#endif
#ifndef TSR_ATT_PACKED_Q
#define TSR_ATT_PACKED_Q 0
#endif
#ifndef TSR_ATT_KV
#define TSR_ATT_KV 0
#endif
#ifndef TSR_ATT_SEQLENS
#define TSR_ATT_SEQLENS 0
#endif
#ifndef TSR_ATT_SOFTCAP
#define TSR_ATT_SOFTCAP 0
#endif
#ifndef TSR_ATT_SPLIT
#define TSR_ATT_SPLIT 0
#endif

/* ---- loads and stores ---- */

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

/* f16 pairs on NVIDIA (sm_80 on): its compiler turns vload_half into one
 * 2-byte load per element, so decode reads 16-byte words and converts them
 * in registers with cvt (inline PTX), as rows.cl does. */
#if TSR_DTYPE == TSR_CL_F16 && TSR_CL_DEVICE_NV_SM >= 80
#define TSR_ATT_F16_PTX 1
inline float2 tsr_att_f16x2(uint pair) {
  float lo, hi;
  __asm("{.reg .b16 l, h; mov.b32 {l, h}, %2; cvt.f32.f16 %0, l; cvt.f32.f16 %1, h;}"
        : "=f"(lo), "=f"(hi)
        : "r"(pair));
  return (float2)(lo, hi);
}
#else
#define TSR_ATT_F16_PTX 0
#endif

/* Head-dim elements d .. d + 7 (d a multiple of 8) of the row at `base`,
 * zero from `dim` on. vec 2: one aligned 16-byte word (two for f32; the
 * host checked every row's alignment and that dim % 8 == 0); 1: contiguous
 * (dim % 4 == 0); 0: any stride. */
inline float8 tsr_att_load8(const __global tsr_t *p, long base, long sd, int d, int dim, int vec) {
  if (vec == 2) {
    if (d >= dim)
      return (float8)(0.0f);
    const __global tsr_t *at = p + base + d;
#if TSR_DTYPE == TSR_CL_F32
    const __global float4 *w = (const __global float4 *)at;
    return (float8)(w[0], w[1]);
#elif TSR_ATT_F16_PTX
    uint4 w = *(const __global uint4 *)at;
    return (float8)(tsr_att_f16x2(w.s0), tsr_att_f16x2(w.s1), tsr_att_f16x2(w.s2),
                    tsr_att_f16x2(w.s3));
#elif TSR_DTYPE == TSR_CL_F16
    return vloada_half8(0, (const __global half *)at);
#else
    uint4 w = *(const __global uint4 *)at;
    return (float8)(as_float(w.s0 << 16), as_float(w.s0 & 0xffff0000u), as_float(w.s1 << 16),
                    as_float(w.s1 & 0xffff0000u), as_float(w.s2 << 16),
                    as_float(w.s2 & 0xffff0000u), as_float(w.s3 << 16),
                    as_float(w.s3 & 0xffff0000u));
#endif
  }
  return (float8)(tsr_att_load4(p, base, sd, d, dim, vec),
                  tsr_att_load4(p, base, sd, d + 4, dim, vec));
}

/* ---- scores ---- */

/* Infinite scores become NaN; finite ones and NaN stay. A compare rather
 * than isinf, which compilers assuming finite math may fold away. */
inline float tsr_att_poison_infinite(float s) {
  return fabs(s) > MAXFLOAT ? NAN : s;
}

/* A scaled score (log2 units) as the softmax takes it: poisoned, then
 * capped (tested before the cap, which would turn an infinity finite). */
inline float tsr_att_score(const tsr_cl_attention_params *p, float s) {
  s = tsr_att_poison_infinite(s);
#if TSR_ATT_SOFTCAP
  s = p->cap_log2 * tanh(s * p->cap_inv);
#else
  (void)p;
#endif
  return s;
}

/* Whether key `key` (>= 0) of a sequence of kv_len keys is seen from
 * position `pos`. */
inline bool tsr_att_seen(const tsr_cl_attention_params *p, int key, int pos, int kv_len) {
  return key < kv_len && (p->window_left < 0 || key >= pos - p->window_left) &&
         (p->window_right < 0 || key <= pos + p->window_right);
}

/* lse of a row from its running max (log2 units) and sum: -inf when no key
 * was seen, NaN when the sum is. */
inline float tsr_att_lse(float m, float l) {
  return l == 0.0f ? -INFINITY : (m + log2(l)) * TSR_ATT_LN2;
}

/* ---- sequences ---- */

/* The index tensors every attention kernel takes (any valid buffer where
 * absent: only the build's layout reads them). */
#define TSR_ATT_INDEX_ARGS                                                                         \
  const __global int *cu_q, const __global int *cu_kv, const __global int *bt,                     \
      const __global int *sl
#define TSR_ATT_INDEX cu_q, cu_kv, bt, sl

typedef struct tsr_att_seq {
  long q_first;  /* packed q: the sequence's first row; else 0 */
  long kv_first; /* packed k/v: its first key row; else 0 */
  int q_len, kv_len;
  int fault;   /* -1, or the TSR_CL_FAULT_* kind found */
  int located; /* q_first and q_len hold (not a cu_seqlens_q fault) */
} tsr_att_seq;

/* Sequence b's geometry and fault, checked in tsr_plugin_attention_seq_of's
 * order: cu_seqlens_q, cu_seqlens_kv, seqlens_kv against the layout, the two
 * bounds, then the block-table entries of keys [0, kv_len), which the
 * `threads` work items of the group check together (every work item must
 * call this: it has barriers when paged; `flag` is the group's scratch). */
inline tsr_att_seq tsr_att_sequence(TSR_ATT_INDEX_ARGS, const tsr_cl_attention_params *p, int b,
                                    __local int *flag, int tid, int threads) {
  tsr_att_seq s;
  s.q_first = 0;
  s.kv_first = 0;
  s.q_len = p->sq;
  s.kv_len = p->skv;
  s.fault = -1;
  s.located = 1;
#if TSR_ATT_SERVING
  long q_len = p->sq;
#if TSR_ATT_PACKED_Q
  {
    long lo = cu_q[p->cuq_first + b * p->cuq_s], hi = cu_q[p->cuq_first + (b + 1) * p->cuq_s];
    if (lo < 0 || hi < lo || hi > p->q_rows) {
      s.fault = TSR_CL_FAULT_CU_SEQLENS_Q;
      s.located = 0;
      s.q_len = 0;
      return s;
    }
    s.q_first = lo;
    q_len = hi - lo;
    s.q_len = (int)q_len;
  }
#endif
  long capacity = p->kv_capacity;
#if TSR_ATT_KV == 1
  {
    long lo = cu_kv[p->cukv_first + b * p->cukv_s], hi = cu_kv[p->cukv_first + (b + 1) * p->cukv_s];
    if (lo < 0 || hi < lo || hi > p->kv_rows) {
      s.fault = TSR_CL_FAULT_CU_SEQLENS_KV;
      return s;
    }
    s.kv_first = lo;
    capacity = hi - lo;
  }
#endif
  long kv_len = capacity;
#if TSR_ATT_SEQLENS
  kv_len = sl[p->sl_first + b * p->sl_s];
  if (kv_len < 0 || kv_len > capacity) {
    s.fault = TSR_CL_FAULT_SEQLENS_KV;
    return s;
  }
#endif
  if (q_len > p->sq) {
    s.fault = TSR_CL_FAULT_MAX_SEQLEN_Q;
    return s;
  }
  if (kv_len > p->skv) {
    s.fault = TSR_CL_FAULT_MAX_SEQLEN_KV;
    return s;
  }
  s.kv_len = (int)kv_len;
#if TSR_ATT_KV == 2
  /* the same values reach every work item: the branches above are uniform */
  if (tid == 0)
    *flag = 0;
  barrier(CLK_LOCAL_MEM_FENCE);
  int blocks = (s.kv_len + p->block_size - 1) / p->block_size;
  for (int j = tid; j < blocks; j += threads) {
    long e = bt[p->bt_first + b * p->bt_sb + j * p->bt_sj];
    if (e < 0 || e >= p->kv_rows)
      atomic_or(flag, 1);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (*flag)
    s.fault = TSR_CL_FAULT_BLOCK_TABLE;
#else
  (void)flag;
  (void)tid;
  (void)threads;
#endif
#else
  (void)cu_q;
  (void)cu_kv;
  (void)bt;
  (void)sl;
  (void)b;
  (void)flag;
  (void)tid;
  (void)threads;
#endif
  return s;
}

/* The first elements of key j's rows (kv head hk) in k (.x) and v (.y). */
inline long2 tsr_att_key_rows(const __global int *bt, const tsr_cl_attention_params *p,
                              const tsr_att_seq *s, int b, int hk, int j) {
#if TSR_ATT_KV == 2
  (void)s;
  /* shifts where the block size is a power of two: a division per key
   * costs decode more than its loads' issue */
  int index = p->block_shift >= 0 ? j >> p->block_shift : j / p->block_size;
  long within = p->block_shift >= 0 ? j & (p->block_size - 1) : j % p->block_size;
  long block = bt[p->bt_first + b * p->bt_sb + (long)index * p->bt_sj];
  return (long2)(p->k_first + block * p->k_sb + within * p->k_ss + hk * p->k_sh,
                 p->v_first + block * p->v_sb + within * p->v_ss + hk * p->v_sh);
#else
  (void)bt;
  long row = s->kv_first + j;
  return (long2)(p->k_first + b * p->k_sb + row * p->k_ss + hk * p->k_sh,
                 p->v_first + b * p->v_sb + row * p->v_ss + hk * p->v_sh);
#endif
}

/* The first element of query row i (of the sequence) of head h in q or o,
 * and its lse entry. */
#define TSR_ATT_Q_ROW(p, x, s, b, i, h)                                                            \
  ((p).x##_first + (b) * (p).x##_sb + ((s).q_first + (i)) * (p).x##_ss + (long)(h) * (p).x##_sh)
#define TSR_ATT_LSE_AT(p, s, b, i, h)                                                              \
  ((p).lse_first + (b) * (p).lse_sb + (long)(h) * (p).lse_sh + ((s).q_first + (i)) * (p).lse_ss)

/* A faulted sequence's row i of head h: NaN in o (columns lane, lane +
 * lanes, ...) and, by lane 0, in lse. */
inline void tsr_att_nan_row(__global tsr_t *o, __global float *lse,
                            const tsr_cl_attention_params *p, const tsr_att_seq *s, int b, int i,
                            int h, int lane, int lanes) {
  long base = TSR_ATT_Q_ROW(*p, o, *s, b, i, h);
  for (int d = lane; d < p->dim; d += lanes)
    tsr_store(o, base + (long)d * p->o_sd, NAN);
  if (lane == 0 && (p->flags & TSR_CL_ATTENTION_LSE))
    lse[TSR_ATT_LSE_AT(*p, *s, b, i, h)] = NAN;
}

/* What a work-group does with a sequence at fault: records b (its first
 * work item) and writes NaN into the packed rows [row0, row0 + count) it
 * owns, among the located rows its grid covers (i < min(Lq, Sq bound)). */
inline void tsr_att_fault(__global tsr_t *o, __global float *lse, volatile __global int *faults,
                          const tsr_cl_attention_params *p, const tsr_att_seq *s, int b, int hk,
                          int row0, int count, int tid, int threads) {
  if (tid == 0)
    atomic_min(&faults[s->fault], b);
  if (!s->located)
    return;
  int end = min(row0 + count, min(s->q_len, p->sq) * p->group);
  for (int row = row0; row < end; row++)
    tsr_att_nan_row(o, lse, p, s, b, row / p->group, hk * p->group + row % p->group, tid, threads);
}
