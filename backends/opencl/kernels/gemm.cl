/* SPDX-License-Identifier: Apache-2.0 */
/* GEMM and grouped GEMM: D = act(alpha * A B + beta * C + bias), f32 math.
 *
 * Kernels (arguments: A, B, C, bias, D, aux, params; absent C or bias get
 * D's buffer and a clear flag; aux is the group table, the split-K scratch
 * or any buffer):
 *   tsr_gemm_tile           (-DTSR_GEMM_TILE) a BM x BN tile per work-group
 *                           staged through local memory as f32, TM x TN
 *                           outputs per work item in registers.
 *   tsr_gemm_gemv           (-DTSR_GEMM_GEMV) M <= 16: every work item
 *                           streams its share of B once and keeps all rows'
 *                           sums; a work-group reduces over its k threads.
 *   tsr_gemm_splitk_reduce  (-DTSR_GEMM_GEMV) sums the GEMV's K splits from
 *                           f32 scratch and applies the epilogue.
 * Common options: TSR_DTYPE (A and B), TSR_OUT_F32 (D, C, bias in f32 rather
 * than A's dtype), TSR_GROUPED, TSR_EPI_VEC (D, C and bias are read and
 * written 4 columns at a time: unit column strides, everything else a
 * multiple of 4, N too). Vector loads of A and B (TSR_A_VEC, TSR_B_VEC,
 * TSR_GV_VEC, TSR_GV_AVEC: 1, 2, 4 or 8 elements) are used only where the
 * host found the operand's fast stride 1 and its start, other strides and
 * extent along the vector multiples of the width.
 *
 * Group table (aux, uint words, G groups): [0..G] prefix sums of M tiles per
 * group, [G+1..2G+1] prefix sums of rows. The GEMV reads the rows half only
 * and the host passes it alone. */

#ifndef TSR_OUT_F32
#define TSR_OUT_F32 0
#endif
#ifndef TSR_GROUPED
#define TSR_GROUPED 0
#endif
#ifndef TSR_EPI_VEC
#define TSR_EPI_VEC 0
#endif

/* ---- storage ---- */

/* V elements of an input starting at element i (i and the pointer aligned
 * to V elements, which the host checked) into f32. */
#if TSR_DTYPE == TSR_CL_F32
#define GEMM_IN2(p, i) (((const __global float2 *)(p))[(i) >> 1])
#define GEMM_IN4(p, i) (((const __global float4 *)(p))[(i) >> 2])
#define GEMM_IN8(p, i) (((const __global float8 *)(p))[(i) >> 3])
#elif TSR_DTYPE == TSR_CL_F16
/* Whole vectors of ushort, converted from a private copy: NVIDIA's compiler
 * turns vloada_halfN on global memory into 16-bit loads, and the private
 * copy into register conversions (H200: f16 GEMV 1.2 -> 3.2 TB/s, f16 GEMM
 * 31 -> 36 TFLOP/s; an exact integer conversion ran at 1.2-1.7 TB/s). */
inline float2 gemm_half2(ushort2 u) {
  return vload_half2(0, (const __private half *)&u);
}
inline float4 gemm_half4(ushort4 u) {
  return vload_half4(0, (const __private half *)&u);
}
inline float8 gemm_half8(ushort8 u) {
  return vload_half8(0, (const __private half *)&u);
}
#define GEMM_IN2(p, i) gemm_half2(((const __global ushort2 *)(p))[(i) >> 1])
#define GEMM_IN4(p, i) gemm_half4(((const __global ushort4 *)(p))[(i) >> 2])
#define GEMM_IN8(p, i) gemm_half8(((const __global ushort8 *)(p))[(i) >> 3])
#else
#define GEMM_IN2(p, i) as_float2(convert_uint2(((const __global ushort2 *)(p))[(i) >> 1]) << 16)
#define GEMM_IN4(p, i) as_float4(convert_uint4(((const __global ushort4 *)(p))[(i) >> 2]) << 16)
#define GEMM_IN8(p, i) as_float8(convert_uint8(((const __global ushort8 *)(p))[(i) >> 3]) << 16)
#endif

/* dst[0..v) = the v elements at p[i..]: v is a constant where it is called,
 * so one branch remains. */
inline void gemm_fetch(const __global tsr_t *p, long i, int v, float *dst) {
  if (v == 8) {
    float8 t = GEMM_IN8(p, i);
    dst[0] = t.s0;
    dst[1] = t.s1;
    dst[2] = t.s2;
    dst[3] = t.s3;
    dst[4] = t.s4;
    dst[5] = t.s5;
    dst[6] = t.s6;
    dst[7] = t.s7;
  } else if (v == 4) {
    float4 t = GEMM_IN4(p, i);
    dst[0] = t.s0;
    dst[1] = t.s1;
    dst[2] = t.s2;
    dst[3] = t.s3;
  } else if (v == 2) {
    float2 t = GEMM_IN2(p, i);
    dst[0] = t.s0;
    dst[1] = t.s1;
  } else {
    dst[0] = tsr_load(p, i);
  }
}

/* D, C and bias: A's dtype, or f32. */
#if TSR_OUT_F32 || TSR_DTYPE == TSR_CL_F32
typedef float tsr_out_t;
#define gemm_out_load(p, i) tsr_load_f32((p), (i))
#define gemm_out_store(p, i, v) tsr_store_f32((p), (i), (v))
#define gemm_out_load4(p, i) (((const __global float4 *)(p))[(i) >> 2])
#define gemm_out_store4(p, i, v) (((__global float4 *)(p))[(i) >> 2] = (v))
#elif TSR_DTYPE == TSR_CL_F16
typedef ushort tsr_out_t;
#define gemm_out_load(p, i) tsr_load_f16((p), (i))
#define gemm_out_store(p, i, v) tsr_store_f16((p), (i), (v))
#define gemm_out_load4(p, i) gemm_half4(((const __global ushort4 *)(p))[(i) >> 2])
#define gemm_out_store4(p, i, v) vstorea_half4_rte((v), (i) >> 2, (__global half *)(p))
#else
typedef ushort tsr_out_t;
#define gemm_out_load(p, i) tsr_load_bf16((p), (i))
#define gemm_out_store(p, i, v) tsr_store_bf16((p), (i), (v))
#define gemm_out_load4(p, i)                                                                       \
  as_float4(convert_uint4(((const __global ushort4 *)(p))[(i) >> 2]) << 16)
#define gemm_out_store4(p, i, v)                                                                   \
  (((__global ushort4 *)(p))[(i) >> 2] =                                                           \
       (ushort4)(tsr_f32_to_bf16((v).s0), tsr_f32_to_bf16((v).s1), tsr_f32_to_bf16((v).s2),        \
                 tsr_f32_to_bf16((v).s3)))
#endif

/* ---- epilogue ---- */

/* tsr_activation. NaN passes through relu (tested on the bits: a compiler
 * may fold a float compare as if NaN could not occur). gelu and silu tend
 * to 0 at -inf, where the formulas give -inf * 0; below -100 each is under
 * 1e-40 in magnitude. */
inline float gemm_activate(float v, int act) {
  if (act == 1)
    return (as_uint(v) & 0x7fffffffu) > 0x7f800000u ? v : fmax(v, 0.0f);
  if (act >= 2 && act <= 4 && v < -100.0f)
    return 0.0f;
  if (act == 2)
    return 0.5f * v * (1.0f + tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
  if (act == 3)
    return 0.5f * v * (1.0f + erf(v * 0.7071067811865476f));
  if (act == 4)
    return v / (1.0f + exp(-v));
  return v;
}

/* act(alpha * acc + beta * C[ci] + bias[bi]) for one output. */
inline float gemm_epilogue(float acc, const __global tsr_out_t *C, long ci,
                           const __global tsr_out_t *bias, long bi, int flags, float alpha,
                           float beta) {
  float v = alpha * acc;
  if (flags & TSR_CL_GEMM_HAS_C)
    v += beta * gemm_out_load(C, ci);
  if (flags & TSR_CL_GEMM_HAS_BIAS)
    v += gemm_out_load(bias, bi);
  return gemm_activate(v, flags >> TSR_CL_GEMM_ACTIVATION_SHIFT);
}

/* Output (row r of problem z, columns col .. col + w - 1) from acc[0..w):
 * four at a time when TSR_EPI_VEC and w is 4 (col a multiple of 4, the four
 * inside N), else one at a time up to N. `bz` picks the bias row (grouped). */
inline void gemm_write(const float *acc, int w, int z, int bz, long r, int col,
                       const __global tsr_out_t *C, const __global tsr_out_t *bias,
                       __global tsr_out_t *D, const tsr_cl_gemm_params *p) {
  long di = p->d_first + (long)z * p->d_sb + r * p->d_sm;
  long ci = p->c_first + (long)z * p->c_sb + r * p->c_sm;
  long bi = p->bias_first + (long)bz * p->bias_sb;
  int act = p->flags >> TSR_CL_GEMM_ACTIVATION_SHIFT;
#if TSR_EPI_VEC
  if (w == 4) {
    if (col >= p->n)
      return;
    float4 v = p->alpha * (float4)(acc[0], acc[1], acc[2], acc[3]);
    if (p->flags & TSR_CL_GEMM_HAS_C)
      v += p->beta * gemm_out_load4(C, ci + col);
    if (p->flags & TSR_CL_GEMM_HAS_BIAS)
      v += gemm_out_load4(bias, bi + col);
    v = (float4)(gemm_activate(v.s0, act), gemm_activate(v.s1, act), gemm_activate(v.s2, act),
                 gemm_activate(v.s3, act));
    gemm_out_store4(D, di + col, v);
    return;
  }
#endif
  for (int j = 0; j < w; j++) {
    long c = col + j;
    if (c < p->n)
      gemm_out_store(D, di + c * p->d_sn,
                     gemm_epilogue(acc[j], C, ci + c * p->c_sn, bias, bi + c * p->bias_sn, p->flags,
                                   p->alpha, p->beta));
  }
}

/* ------------------------------------------------------------------------ */
/* Tiled kernel                                                              */
/* ------------------------------------------------------------------------ */
#if defined(TSR_GEMM_TILE)

/* TSR_BM x TSR_BN outputs per work-group, k steps of TSR_BK, TSR_TM x TSR_TN
 * outputs per work item (multiples of 4). TSR_DB: two local stages, the next
 * k tile fetched into registers while this one is multiplied (one barrier a
 * step). TSR_A_KFAST / TSR_B_NFAST: which dimension of the operand is
 * contiguous (staging walks it with consecutive work items). */
#define GEMM_WG ((TSR_BM / TSR_TM) * (TSR_BN / TSR_TN))
#define GEMM_TX (TSR_BN / TSR_TN)
#define GEMM_TY (TSR_BM / TSR_TM)
#define GEMM_STAGES (TSR_DB ? 2 : 1)
#define GEMM_A_VECS (TSR_BM * TSR_BK / TSR_A_VEC)
#define GEMM_B_VECS (TSR_BN * TSR_BK / TSR_B_VEC)
#define GEMM_A_LOADS ((GEMM_A_VECS + GEMM_WG - 1) / GEMM_WG)
#define GEMM_B_LOADS ((GEMM_B_VECS + GEMM_WG - 1) / GEMM_WG)

#if TSR_TM % 4 || TSR_TN % 4 || TSR_BM % (4 * GEMM_TY) || TSR_BN % (4 * GEMM_TX)
#error "TSR_TM and TSR_TN must be multiples of 4"
#endif

/* Which tile of the grid a work-group takes: problems one after the other,
 * and inside one, `swizzle` M tiles side by side walking N, so that the
 * work-groups in flight share a few panels of A and of B in the cache. */
inline void gemm_tile_of(long r, int tiles_m, int tiles_n, int swizzle, int *tm, int *tn) {
  long band = (long)swizzle * tiles_n;
  long first = r / band * swizzle;
  long rows = min((long)tiles_m - first, (long)swizzle);
  long rest = r % band;
  *tm = (int)(first + rest % rows);
  *tn = (int)(rest / rows);
}

/* Positions of one work item's staging loads in a tile of BX rows (m or n)
 * by BK: the vector's row x and first k, for KFAST (vectors along k) or not
 * (vectors along x). Consecutive work items take consecutive rows in the
 * KFAST order, so their transposed stores into local memory hit distinct
 * banks; otherwise consecutive vectors along x. */
#define GEMM_STAGE_POS(e, bx, vec, kfast, x, kk)                                                   \
  do {                                                                                             \
    if (kfast) {                                                                                   \
      (x) = (e) % (bx);                                                                            \
      (kk) = (e) / (bx) * (vec);                                                                   \
    } else {                                                                                       \
      (x) = (e) % ((bx) / (vec)) * (vec);                                                          \
      (kk) = (e) / ((bx) / (vec));                                                                 \
    }                                                                                              \
  } while (0)

/* Registers to local memory: tile[kk][x], rows of BX floats. */
#define GEMM_STAGE_STORE(tile, bx, vec, kfast, x, kk, r)                                           \
  do {                                                                                             \
    if (kfast) {                                                                                   \
      for (int v_ = 0; v_ < (vec); v_++)                                                           \
        (tile)[((kk) + v_) * (bx) + (x)] = (r)[v_];                                                \
    } else if ((vec) == 4) {                                                                       \
      *(__local float4 *)&(tile)[(kk) * (bx) + (x)] = (float4)((r)[0], (r)[1], (r)[2], (r)[3]);    \
    } else {                                                                                       \
      for (int v_ = 0; v_ < (vec); v_++)                                                           \
        (tile)[(kk) * (bx) + (x) + v_] = (r)[v_];                                                  \
    }                                                                                              \
  } while (0)

__kernel __attribute__((reqd_work_group_size(GEMM_WG, 1, 1))) void
tsr_gemm_tile(const __global tsr_t *A, const __global tsr_t *B, const __global tsr_out_t *C,
              const __global tsr_out_t *bias, __global tsr_out_t *D, const __global uint *aux,
              const tsr_cl_gemm_params p) {
  /* float4 arrays: 16-byte aligned, read four floats at a time */
  __local float4 a_tile4[GEMM_STAGES * TSR_BK * TSR_BM / 4];
  __local float4 b_tile4[GEMM_STAGES * TSR_BK * TSR_BN / 4];
  __local float *a_tile = (__local float *)a_tile4;
  __local float *b_tile = (__local float *)b_tile4;

  /* the tile: problem z, group g (grouped), rows [m0, m0 + BM) of the
   * problem's mcount rows starting at row0, columns [n0, n0 + BN) */
  long t = get_group_id(0);
  int z = 0;
#if !TSR_GROUPED
  long per = (long)p.tiles_m * p.tiles_n;
  z = (int)(t / per);
  t -= z * per;
#endif
  int tm, tn;
  gemm_tile_of(t, p.tiles_m, p.tiles_n, p.swizzle, &tm, &tn);
  int g = z, row0 = 0, mcount = p.m;
#if TSR_GROUPED
  {
    /* the group whose tile range holds tm: aux[lo] <= tm < aux[hi]; empty
     * groups share their start with the next, so take the last */
    int lo = 0, hi = p.batch;
    while (hi - lo > 1) {
      int mid = (lo + hi) >> 1;
      if ((int)aux[mid] <= tm)
        lo = mid;
      else
        hi = mid;
    }
    g = lo;
    tm -= (int)aux[lo];
    row0 = (int)aux[p.batch + 1 + lo];
    mcount = (int)aux[p.batch + 2 + lo] - row0;
  }
#endif
  const int m0 = tm * TSR_BM, n0 = tn * TSR_BN;
  if (m0 >= mcount)
    return; /* whole work-group */

  const __global tsr_t *a = A + p.a_first + (long)z * p.a_sb + (long)row0 * p.a_sm;
  const __global tsr_t *b = B + p.b_first + (long)g * p.b_sb;
  const int tid = (int)get_local_id(0);
  const int tx = tid % GEMM_TX, ty = tid / GEMM_TX;

  /* each staging load's place in the tile, offset at k = 0 and row test */
  int a_x[GEMM_A_LOADS], a_kk[GEMM_A_LOADS], b_x[GEMM_B_LOADS], b_kk[GEMM_B_LOADS];
  long a_off[GEMM_A_LOADS], b_off[GEMM_B_LOADS];
  bool a_in[GEMM_A_LOADS], b_in[GEMM_B_LOADS];
  /* unit k strides when vectors run along k */
#if TSR_A_KFAST && TSR_A_VEC > 1
  const long a_sk = 1;
#else
  const long a_sk = p.a_sk;
#endif
#if !TSR_B_NFAST && TSR_B_VEC > 1
  const long b_sk = 1;
#else
  const long b_sk = p.b_sk;
#endif
#pragma unroll
  for (int l = 0; l < GEMM_A_LOADS; l++) {
    int e = tid + l * GEMM_WG;
    GEMM_STAGE_POS(e, TSR_BM, TSR_A_VEC, TSR_A_KFAST, a_x[l], a_kk[l]);
    a_in[l] = (GEMM_A_VECS % GEMM_WG == 0 || e < GEMM_A_VECS) && m0 + a_x[l] < mcount;
    a_off[l] = a_in[l] ? (long)(m0 + a_x[l]) * p.a_sm + a_kk[l] * a_sk : 0;
  }
#pragma unroll
  for (int l = 0; l < GEMM_B_LOADS; l++) {
    int e = tid + l * GEMM_WG;
    GEMM_STAGE_POS(e, TSR_BN, TSR_B_VEC, !TSR_B_NFAST, b_x[l], b_kk[l]);
    b_in[l] = (GEMM_B_VECS % GEMM_WG == 0 || e < GEMM_B_VECS) && n0 + b_x[l] < p.n;
    b_off[l] = b_in[l] ? (long)(n0 + b_x[l]) * p.b_sn + b_kk[l] * b_sk : 0;
  }

  float acc[TSR_TM][TSR_TN];
#pragma unroll
  for (int i = 0; i < TSR_TM; i++)
#pragma unroll
    for (int j = 0; j < TSR_TN; j++)
      acc[i][j] = 0.0f;

  float ra[GEMM_A_LOADS][TSR_A_VEC], rb[GEMM_B_LOADS][TSR_B_VEC];
  const int k_tiles = (p.k + TSR_BK - 1) / TSR_BK;

/* the k tile at k0 into ra, rb (zeros outside the matrices) */
#define GEMM_FETCH(k0)                                                                             \
  do {                                                                                             \
    _Pragma("unroll") for (int l = 0; l < GEMM_A_LOADS; l++) {                                     \
      if (a_in[l] && (k0) + a_kk[l] < p.k)                                                         \
        gemm_fetch(a, a_off[l] + a_sk * (k0), TSR_A_VEC, ra[l]);                                   \
      else                                                                                         \
        for (int v = 0; v < TSR_A_VEC; v++)                                                        \
          ra[l][v] = 0.0f;                                                                         \
    }                                                                                              \
    _Pragma("unroll") for (int l = 0; l < GEMM_B_LOADS; l++) {                                     \
      if (b_in[l] && (k0) + b_kk[l] < p.k)                                                         \
        gemm_fetch(b, b_off[l] + b_sk * (k0), TSR_B_VEC, rb[l]);                                   \
      else                                                                                         \
        for (int v = 0; v < TSR_B_VEC; v++)                                                        \
          rb[l][v] = 0.0f;                                                                         \
    }                                                                                              \
  } while (0)

#define GEMM_STORE(stage)                                                                          \
  do {                                                                                             \
    _Pragma("unroll") for (int l = 0; l < GEMM_A_LOADS; l++) {                                     \
      if (GEMM_A_VECS % GEMM_WG == 0 || tid + l * GEMM_WG < GEMM_A_VECS)                           \
        GEMM_STAGE_STORE(a_tile + (stage) * (TSR_BK * TSR_BM), TSR_BM, TSR_A_VEC, TSR_A_KFAST,     \
                         a_x[l], a_kk[l], ra[l]);                                                  \
    }                                                                                              \
    _Pragma("unroll") for (int l = 0; l < GEMM_B_LOADS; l++) {                                     \
      if (GEMM_B_VECS % GEMM_WG == 0 || tid + l * GEMM_WG < GEMM_B_VECS)                           \
        GEMM_STAGE_STORE(b_tile + (stage) * (TSR_BK * TSR_BN), TSR_BN, TSR_B_VEC, !TSR_B_NFAST,    \
                         b_x[l], b_kk[l], rb[l]);                                                  \
    }                                                                                              \
  } while (0)

/* acc += the stage's A tile times its B tile */
#define GEMM_MULTIPLY(stage)                                                                       \
  do {                                                                                             \
    const __local float4 *as_ = a_tile4 + (stage) * (TSR_BK * TSR_BM / 4) + ty;                    \
    const __local float4 *bs_ = b_tile4 + (stage) * (TSR_BK * TSR_BN / 4) + tx;                    \
    _Pragma("unroll") for (int kk = 0; kk < TSR_BK; kk++) {                                        \
      float av[TSR_TM], bv[TSR_TN];                                                                \
      _Pragma("unroll") for (int v = 0; v < TSR_TM / 4; v++) {                                     \
        float4 q = as_[kk * (TSR_BM / 4) + v * GEMM_TY];                                           \
        av[4 * v] = q.s0;                                                                          \
        av[4 * v + 1] = q.s1;                                                                      \
        av[4 * v + 2] = q.s2;                                                                      \
        av[4 * v + 3] = q.s3;                                                                      \
      }                                                                                            \
      _Pragma("unroll") for (int u = 0; u < TSR_TN / 4; u++) {                                     \
        float4 q = bs_[kk * (TSR_BN / 4) + u * GEMM_TX];                                           \
        bv[4 * u] = q.s0;                                                                          \
        bv[4 * u + 1] = q.s1;                                                                      \
        bv[4 * u + 2] = q.s2;                                                                      \
        bv[4 * u + 3] = q.s3;                                                                      \
      }                                                                                            \
      _Pragma("unroll") for (int i = 0; i < TSR_TM; i++) {                                         \
        _Pragma("unroll") for (int j = 0; j < TSR_TN; j++) {                                       \
          acc[i][j] = fma(av[i], bv[j], acc[i][j]);                                                \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
  } while (0)

#if TSR_DB
  if (k_tiles > 0) {
    GEMM_FETCH(0);
    GEMM_STORE(0);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int kt = 0; kt < k_tiles; kt++) {
    const int stage = kt & 1;
    const bool more = kt + 1 < k_tiles;
    if (more)
      GEMM_FETCH((kt + 1) * TSR_BK);
    GEMM_MULTIPLY(stage);
    if (more)
      GEMM_STORE(stage ^ 1);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#else
  for (int kt = 0; kt < k_tiles; kt++) {
    GEMM_FETCH(kt * TSR_BK);
    GEMM_STORE(0);
    barrier(CLK_LOCAL_MEM_FENCE);
    GEMM_MULTIPLY(0);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#endif

  /* work item rows (v * TY + ty) * 4 + e, columns (u * TX + tx) * 4 + e */
#pragma unroll
  for (int i = 0; i < TSR_TM; i++) {
    int gm = m0 + ((i / 4) * GEMM_TY + ty) * 4 + i % 4;
    if (gm >= mcount)
      continue;
#pragma unroll
    for (int u = 0; u < TSR_TN / 4; u++)
      gemm_write(&acc[i][4 * u], 4, z, g, (long)row0 + gm, n0 + (u * GEMM_TX + tx) * 4, C, bias, D,
                 &p);
  }
}

#endif /* TSR_GEMM_TILE */

/* ------------------------------------------------------------------------ */
/* GEMV (M <= 16) and the split-K reduction                                  */
/* ------------------------------------------------------------------------ */
#if defined(TSR_GEMM_GEMV)

/* TSR_GV_THREADS work items: TSR_GV_KT along k times GV_NT along n. B's
 * contiguous dimension decides the walk (TSR_GV_NFAST: n, else k) and
 * consecutive work items take consecutive vectors of TSR_GV_VEC elements
 * along it, so B is read once, in full cache lines. Every work item keeps
 * the sums of all TSR_GV_ROWS rows (the problem's M, or T when grouped). */
#define GV_T TSR_GV_THREADS
#define GV_KT TSR_GV_KT
#define GV_NT (GV_T / GV_KT)
#if TSR_GV_NFAST
#define GV_VN TSR_GV_VEC
#define GV_VK 1
#else
#define GV_VN TSR_GV_CN /* columns per work item: each A load serves them all */
#define GV_VK TSR_GV_VEC
#endif
#define GV_NB (GV_NT * GV_VN) /* columns per work-group */
#define GV_ROWS TSR_GV_ROWS
/* the reduction goes in passes of GV_RPP rows (local memory: at most
 * 4096 floats, rows of KT + 1 so neither order meets bank conflicts) */
#define GV_ROW_FLOATS (GV_VN * GV_NT * (GV_KT + 1))
#define GV_RPP_RAW (4096 / GV_ROW_FLOATS)
#define GV_RPP (GV_RPP_RAW < 1 ? 1 : GV_RPP_RAW > GV_ROWS ? GV_ROWS : GV_RPP_RAW)

/* One finished sum of row m (of the problem or group), column col: a
 * partial into the split-K scratch (aux) when K is split, else the output. */
inline void gemv_out(float sum, int s, int z, int zb, int row0, int m, int col,
                     const __global tsr_out_t *C, const __global tsr_out_t *bias,
                     __global tsr_out_t *D, __global uint *aux, const tsr_cl_gemm_params *p) {
  if (p->splits > 1)
    ((__global float *)aux)[s * p->split_stride + ((long)zb * p->m + m) * p->n + col] = sum;
  else
    gemm_write(&sum, 1, zb, z, (long)row0 + m, col, C, bias, D, p);
}

__kernel __attribute__((reqd_work_group_size(GV_T, 1, 1))) void
tsr_gemm_gemv(const __global tsr_t *A, const __global tsr_t *B, const __global tsr_out_t *C,
              const __global tsr_out_t *bias, __global tsr_out_t *D, __global uint *aux,
              const tsr_cl_gemm_params p) {
  /* work-group t: column block, then K split, then problem (group) */
  long t = get_group_id(0);
  const int blocks = (p.n + GV_NB - 1) / GV_NB;
  const int nb = (int)(t % blocks);
  t /= blocks;
  const int s = (int)(t % p.splits);
  const int z = (int)(t / p.splits);
  int zb = z, row0 = 0, rows = p.m;
#if TSR_GROUPED
  zb = 0;
  row0 = (int)aux[z];
  rows = (int)aux[z + 1] - row0;
  if (rows == 0)
    return; /* an empty group reads none of its B */
#endif
  const int tid = (int)get_local_id(0);
#if TSR_GV_NFAST
  const int c_local = tid % GV_NT, k_local = tid / GV_NT;
#else
  const int k_local = tid % GV_KT, c_local = tid / GV_KT;
#endif
  const int n0 = nb * GV_NB;
  const int n = n0 + c_local * GV_VN;
  const int k_begin = s * p.k_chunk;
  const int k_end = min(p.k, k_begin + p.k_chunk);
  const __global tsr_t *a = A + p.a_first + (long)zb * p.a_sb + (long)row0 * p.a_sm;
  const __global tsr_t *b = B + p.b_first + (long)z * p.b_sb;

  float acc[GV_ROWS][GV_VN];
#pragma unroll
  for (int m = 0; m < GV_ROWS; m++)
#pragma unroll
    for (int v = 0; v < GV_VN; v++)
      acc[m][v] = 0.0f;

  if (n < p.n) {
#if TSR_GV_NFAST
    /* vectors along n: b_sn is 1 when GV_VN > 1 */
    const long b_col = (long)n * (GV_VN > 1 ? 1 : p.b_sn);
    for (int k = k_begin + k_local; k < k_end; k += GV_KT) {
      float bv[GV_VN];
      gemm_fetch(b, b_col + (long)k * p.b_sk, GV_VN, bv);
      const long a_k = (long)k * p.a_sk;
#pragma unroll
      for (int m = 0; m < GV_ROWS; m++) {
        if (m < rows) {
          float av = tsr_load(a, (long)m * p.a_sm + a_k);
#pragma unroll
          for (int v = 0; v < GV_VN; v++)
            acc[m][v] = fma(av, bv[v], acc[m][v]);
        }
      }
    }
#else
    /* vectors along k: b_sk is 1 when GV_VK > 1, a_sk when TSR_GV_AVEC > 1 */
    const long b_col = (long)n * p.b_sn;
    const long b_sk = GV_VK > 1 ? 1 : p.b_sk;
    const long a_sk = TSR_GV_AVEC > 1 ? 1 : p.a_sk;
    for (int k = k_begin + k_local * GV_VK; k < k_end; k += GV_KT * GV_VK) {
      float bv[GV_VN][GV_VK];
#pragma unroll
      for (int v = 0; v < GV_VN; v++) {
        if (v == 0 || n + v < p.n) {
          gemm_fetch(b, b_col + v * p.b_sn + (long)k * b_sk, GV_VK, bv[v]);
        } else {
#pragma unroll
          for (int w = 0; w < GV_VK; w++)
            bv[v][w] = 0.0f;
        }
      }
#pragma unroll
      for (int m = 0; m < GV_ROWS; m++) {
        if (m < rows) {
          float av[GV_VK];
          const long a_row = (long)m * p.a_sm + (long)k * a_sk;
          if (TSR_GV_AVEC == GV_VK) {
            gemm_fetch(a, a_row, GV_VK, av);
          } else {
#pragma unroll
            for (int w = 0; w < GV_VK; w++)
              av[w] = tsr_load(a, a_row + w * a_sk);
          }
#pragma unroll
          for (int v = 0; v < GV_VN; v++)
#pragma unroll
            for (int w = 0; w < GV_VK; w++)
              acc[m][v] = fma(av[w], bv[v][w], acc[m][v]);
        }
      }
    }
#endif
  }

#if GV_KT > 1
  /* reduce over the KT work items of each column, GV_RPP rows at a time */
  __local float red[GV_RPP * GV_ROW_FLOATS];
#pragma unroll
  for (int mp = 0; mp < GV_ROWS; mp += GV_RPP) {
#pragma unroll
    for (int mr = 0; mr < GV_RPP; mr++)
      if (mp + mr < GV_ROWS)
#pragma unroll
        for (int v = 0; v < GV_VN; v++)
          red[((mr * GV_VN + v) * GV_NT + c_local) * (GV_KT + 1) + k_local] = acc[mp + mr][v];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int o = tid; o < GV_RPP * GV_VN * GV_NT; o += GV_T) {
      const int c = o % GV_NT, v = o / GV_NT % GV_VN, m = mp + o / (GV_NT * GV_VN);
      const int col = n0 + c * GV_VN + v;
      const __local float *r = red + o * (GV_KT + 1);
      float sum = 0.0f;
      for (int kk = 0; kk < GV_KT; kk++)
        sum += r[kk];
      if (m < GV_ROWS && m < rows && col < p.n)
        gemv_out(sum, s, z, zb, row0, m, col, C, bias, D, aux, &p);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#else
  /* one work item per column vector: nothing to reduce */
#pragma unroll
  for (int m = 0; m < GV_ROWS; m++)
#pragma unroll
    for (int v = 0; v < GV_VN; v++)
      if (m < rows && n + v < p.n)
        gemv_out(acc[m][v], s, z, zb, row0, m, n + v, C, bias, D, aux, &p);
#endif
}

/* One output per work item: the sum of the splits' partials, the epilogue
 * and the store. Plain GEMM only (grouped GEMM does not split K). */
__kernel void tsr_gemm_splitk_reduce(const __global float *partial, const __global tsr_out_t *C,
                                     const __global tsr_out_t *bias, __global tsr_out_t *D,
                                     const tsr_cl_gemm_params p) {
  long e = get_global_id(0);
  long plane = (long)p.m * p.n;
  if (e >= plane * p.batch)
    return;
  float sum = 0.0f;
  for (int s = 0; s < p.splits; s++)
    sum += partial[s * p.split_stride + e];
  int z = (int)(e / plane);
  long rest = e - z * plane;
  gemm_write(&sum, 1, z, 0, rest / p.n, (int)(rest % p.n), C, bias, D, &p);
}

#endif /* TSR_GEMM_GEMV */
