/* SPDX-License-Identifier: Apache-2.0 */
/* Row ops: rmsnorm, layernorm, softmax, cross_entropy (params_rows.h). One
 * work-group per row; groups take rows g, g + groups, ... so any row count
 * fits a grid of bounded size. Options besides -DTSR_DTYPE:
 *   TSR_THREADS  work items per group (a power of two)
 *   TSR_ITEMS    row units each work item keeps in private memory (1, 2, 4
 *                or 8; 0: the row is too long and is read again instead)
 *   TSR_VEC      elements per unit: 1, or 4 / 8 when every row tensor is
 *                unit-stride, its rows start at multiples of TSR_VEC
 *                elements of an aligned address and TSR_VEC divides the row
 *                (aligned 8- or 16-byte loads); the host checks all that.
 * Reductions: rows_reduce2. Kernels take no restrict
 * pointers: outputs may alias inputs (y and x are then the same view; each
 * element is read before the work item owning it writes it). */

#ifndef TSR_THREADS
#define TSR_THREADS 256
#endif
#ifndef TSR_ITEMS
#define TSR_ITEMS 0
#endif
#ifndef TSR_VEC
#define TSR_VEC 1
#endif

#define ROWS_CAT_(a, b) a##b
#define ROWS_CAT(a, b) ROWS_CAT_(a, b)
/* The TSR_VEC-wide form of a type or builtin: ROWS_V(float) is float4. */
#define ROWS_V(name) ROWS_CAT(name, TSR_VEC)

#define ROWS_CACHE (TSR_ITEMS > 0 ? TSR_ITEMS : 1)
/* Loops over the cached units unrolled, so the units stay in registers
 * (NVIDIA's compiler kept 8-unit caches in memory otherwise). */
#define ROWS_UNROLL _Pragma("unroll")
#define ROWS_FLT_MAX 3.40282347e38f

#if TSR_VEC == 1
typedef float rows_unit;
#elif TSR_VEC == 4 || TSR_VEC == 8
typedef ROWS_V(float) rows_unit;
#else
#error "TSR_VEC must be 1, 4 or 8"
#endif

/* ---- units of a row ---- */

#if TSR_VEC > 1 && TSR_DTYPE == TSR_CL_BF16
inline ROWS_V(ushort) rows_bf16_pack(rows_unit v) {
  ROWS_V(uint) x = ROWS_CAT(as_uint, TSR_VEC)(v);
  ROWS_V(uint) rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  ROWS_V(uint) quiet = (x >> 16) | 0x40u; /* NaN stays NaN */
  rounded = select(rounded, quiet, (x & 0x7fffffffu) > 0x7f800000u);
  return ROWS_CAT(convert_ushort, TSR_VEC)(rounded);
}
#endif

/* f16 units on NVIDIA (sm_80 on): NVIDIA's OpenCL turns vloada_half /
 * vstorea_half into one 2-byte access per element (rows ran at 18% of the
 * copy rate), so units move as whole 8- or 16-byte words converted in
 * registers by cvt, two halves at a time (inline PTX, which its compiler
 * takes). */
#if TSR_VEC > 1 && TSR_DTYPE == TSR_CL_F16 && TSR_CL_DEVICE_NV_SM >= 80
#define ROWS_F16_PTX 1
#if TSR_VEC == 4
typedef uint2 rows_f16_word;
#else
typedef uint4 rows_f16_word;
#endif

inline float2 rows_f16x2_widen(uint pair) {
  float lo, hi;
  __asm("{.reg .b16 l, h; mov.b32 {l, h}, %2; cvt.f32.f16 %0, l; cvt.f32.f16 %1, h;}"
        : "=f"(lo), "=f"(hi)
        : "r"(pair));
  return (float2)(lo, hi);
}

inline uint rows_f16x2_narrow(float lo, float hi) {
  uint pair;
  __asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(pair) : "f"(hi), "f"(lo));
  return pair;
}

inline rows_unit rows_f16_widen(rows_f16_word w) {
#if TSR_VEC == 4
  return (float4)(rows_f16x2_widen(w.s0), rows_f16x2_widen(w.s1));
#else
  return (float8)(rows_f16x2_widen(w.s0), rows_f16x2_widen(w.s1), rows_f16x2_widen(w.s2),
                  rows_f16x2_widen(w.s3));
#endif
}

inline rows_f16_word rows_f16_narrow(rows_unit v) {
#if TSR_VEC == 4
  return (uint2)(rows_f16x2_narrow(v.s0, v.s1), rows_f16x2_narrow(v.s2, v.s3));
#else
  return (uint4)(rows_f16x2_narrow(v.s0, v.s1), rows_f16x2_narrow(v.s2, v.s3),
                 rows_f16x2_narrow(v.s4, v.s5), rows_f16x2_narrow(v.s6, v.s7));
#endif
}
#else
#define ROWS_F16_PTX 0
#endif

/* The unit at column c (a multiple of TSR_VEC) of the row starting at
 * element b, whose columns are `inner` elements apart. Unit indices are
 * b / TSR_VEC + c / TSR_VEC (b is a multiple of TSR_VEC too): the compiler
 * folds that into one base address per row and constant offsets per cached
 * unit, where (b + c) / TSR_VEC cost registers per unit. */
inline rows_unit rows_load(const __global tsr_t *p, long b, long c, long inner) {
#if TSR_VEC == 1
  return tsr_load(p, b + c * inner);
#else
  (void)inner; /* 1: the host checked */
  long u = b / TSR_VEC + c / TSR_VEC;
#if TSR_DTYPE == TSR_CL_F32
  return ((const __global rows_unit *)p)[u];
#elif ROWS_F16_PTX
  return rows_f16_widen(((const __global rows_f16_word *)p)[u]);
#elif TSR_DTYPE == TSR_CL_F16
  return ROWS_V(vloada_half)(u, (const __global half *)p);
#else
  ROWS_V(ushort) bits = ((const __global ROWS_V(ushort) *)p)[u];
  return ROWS_CAT(as_float, TSR_VEC)(ROWS_CAT(convert_uint, TSR_VEC)(bits) << 16);
#endif
#endif
}

inline void rows_store(__global tsr_t *p, long b, long c, long inner, rows_unit v) {
#if TSR_VEC == 1
  tsr_store(p, b + c * inner, v);
#else
  (void)inner;
  long u = b / TSR_VEC + c / TSR_VEC;
#if TSR_DTYPE == TSR_CL_F32
  ((__global rows_unit *)p)[u] = v;
#elif ROWS_F16_PTX
  ((__global rows_f16_word *)p)[u] = rows_f16_narrow(v);
#elif TSR_DTYPE == TSR_CL_F16
  ROWS_CAT(ROWS_V(vstorea_half), _rte)(v, u, (__global half *)p);
#else
  ((__global ROWS_V(ushort) *)p)[u] = rows_bf16_pack(v);
#endif
#endif
}

/* Element c of a 1-D parameter (weight, bias) of f32 or of the data dtype. */
inline float rows_param_at(const __global uchar *w, long first, long stride, int f32, long c) {
  long i = first + c * stride;
  if (f32)
    return ((const __global float *)w)[i];
  return tsr_load((const __global tsr_t *)w, i);
}

/* rmsnorm's and layernorm's flags and parameter layout fixed at build time
 * (GPUs: -DTSR_ROW_FLAGS, -DTSR_ROW_PARAMS_UNIT=1 when every weight and
 * bias is unit-stride), else read from the params: code for absent tensors,
 * other dtypes and strides then is not there to hold registers (NVIDIA's
 * layernorm used all 255 and spilled with everything kept). */
#ifdef TSR_ROW_FLAGS
#define ROWS_FLAGS(p) TSR_ROW_FLAGS
#else
#define ROWS_FLAGS(p) (p).flags
#endif
#ifndef TSR_ROW_PARAMS_UNIT
#define TSR_ROW_PARAMS_UNIT 0
#endif

/* The parameter unit at column c: a vector load when it is unit-stride
 * (element alignment is all vloadn needs), else element by element. */
inline rows_unit rows_param(const __global uchar *w, long first, long stride, int f32, long c) {
#if TSR_VEC == 1
  return rows_param_at(w, first, TSR_ROW_PARAMS_UNIT ? 1 : stride, f32, c);
#else
  if (TSR_ROW_PARAMS_UNIT || stride == 1) {
    long i = first + c;
    if (f32)
      return ROWS_V(vload)(0, (const __global float *)w + i);
#if TSR_DTYPE == TSR_CL_F16
    return ROWS_V(vload_half)(0, (const __global half *)w + i);
#elif TSR_DTYPE == TSR_CL_BF16
    ROWS_V(ushort) bits = ROWS_V(vload)(0, (const __global ushort *)w + i);
    return ROWS_CAT(as_float, TSR_VEC)(ROWS_CAT(convert_uint, TSR_VEC)(bits) << 16);
#else
    return ROWS_V(vload)(0, (const __global float *)w + i);
#endif
  }
  /* Components spelled out: a private array indexed by the loop lived in
   * stack memory on NVIDIA. */
#define ROWS_AT(k) rows_param_at(w, first, stride, f32, c + (k))
#if TSR_VEC == 4
  return (float4)(ROWS_AT(0), ROWS_AT(1), ROWS_AT(2), ROWS_AT(3));
#else
  return (float8)(ROWS_AT(0), ROWS_AT(1), ROWS_AT(2), ROWS_AT(3), ROWS_AT(4), ROWS_AT(5),
                  ROWS_AT(6), ROWS_AT(7));
#endif
#undef ROWS_AT
#endif
}

/* Runs `statement` once per component of unit v, in order, with
 * ROWS_COMPONENT naming it (no private array: see rows_param). */
#if TSR_VEC == 1
#define ROWS_EACH_COMPONENT(v, statement)                                                          \
  do {                                                                                             \
    float ROWS_COMPONENT = (v);                                                                    \
    statement;                                                                                     \
  } while (0)
#else
#define ROWS_ONE_COMPONENT(v, k, statement)                                                        \
  do {                                                                                             \
    float ROWS_COMPONENT = (v).k;                                                                  \
    statement;                                                                                     \
  } while (0)
#define ROWS_EACH_OF_FOUR(v, statement)                                                            \
  ROWS_ONE_COMPONENT(v, s0, statement);                                                            \
  ROWS_ONE_COMPONENT(v, s1, statement);                                                            \
  ROWS_ONE_COMPONENT(v, s2, statement);                                                            \
  ROWS_ONE_COMPONENT(v, s3, statement)
#if TSR_VEC == 4
#define ROWS_EACH_COMPONENT(v, statement)                                                          \
  do {                                                                                             \
    ROWS_EACH_OF_FOUR(v, statement);                                                               \
  } while (0)
#else
#define ROWS_EACH_COMPONENT(v, statement)                                                          \
  do {                                                                                             \
    ROWS_EACH_OF_FOUR((v).lo, statement);                                                          \
    ROWS_EACH_OF_FOUR((v).hi, statement);                                                          \
  } while (0)
#endif
#endif

inline float rows_unit_sum(rows_unit v) {
#if TSR_VEC == 1
  return v;
#elif TSR_VEC == 4
  return (v.s0 + v.s1) + (v.s2 + v.s3);
#else
  return ((v.s0 + v.s1) + (v.s2 + v.s3)) + ((v.s4 + v.s5) + (v.s6 + v.s7));
#endif
}

/* The largest non-NaN component (-inf when all are NaN or -inf). */
inline float rows_unit_max(rows_unit v) {
#if TSR_VEC == 1
  return v;
#elif TSR_VEC == 4
  return fmax(fmax(v.s0, v.s1), fmax(v.s2, v.s3));
#else
  return fmax(fmax(fmax(v.s0, v.s1), fmax(v.s2, v.s3)), fmax(fmax(v.s4, v.s5), fmax(v.s6, v.s7)));
#endif
}

inline bool rows_unit_nan(rows_unit v) {
#if TSR_VEC == 1
  return isnan(v);
#else
  return any(isnan(v));
#endif
}

/* ---- rows and reductions ---- */

/* The first element of row r of a view. */
inline long rows_base(tsr_cl_row_view t, long r, long d1, long d2) {
  long i2 = r % d2, q = r / d2;
  return t.first + (q / d1) * t.s0 + (q % d1) * t.s1 + i2 * t.s2;
}

/* Group reductions of a float2 (sum, or max per component), every item
 * getting the result, in two levels: within sub-groups, then over the
 * sub-groups' partials in local memory, which every item reads in the same
 * order (all items get the same bits). Sub-group level by what the device
 * has (TSR_ROWS_REDUCE): 2, NVIDIA warp shuffles (inline PTX, which NVIDIA's
 * OpenCL compiles); 1, the sub_group_reduce builtins of cl_intel_subgroups;
 * 0, local memory alone (32-item slices summed by their first item). The
 * leading barrier lets a reduction follow another on the same scratch. */
#ifndef TSR_ROWS_REDUCE
#if TSR_CL_DEVICE_NV_SM >= 70 && TSR_CL_DEVICE_WARP == 32 && TSR_THREADS >= 32
#define TSR_ROWS_REDUCE 2
#elif TSR_CL_DEVICE_INTEL_SUBGROUPS
#define TSR_ROWS_REDUCE 1
#else
#define TSR_ROWS_REDUCE 0
#endif
#endif

#if TSR_ROWS_REDUCE == 1
#pragma OPENCL EXTENSION cl_intel_subgroups : enable
#endif

#if TSR_ROWS_REDUCE == 2
inline float rows_shuffle_xor(float v, int lane_mask) {
  uint r;
  __asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;"
                 : "=r"(r)
                 : "r"(as_uint(v)), "r"(lane_mask));
  return as_float(r);
}
#endif

#if TSR_ROWS_REDUCE == 0
#define ROWS_SLICE 32
#define ROWS_PARTIALS ((TSR_THREADS + ROWS_SLICE - 1) / ROWS_SLICE)
#endif

inline float2 rows_reduce2(float2 v, __local float2 *scratch, bool is_max) {
  int t = (int)get_local_id(0);
  barrier(CLK_LOCAL_MEM_FENCE);
#if TSR_ROWS_REDUCE == 2
  for (int lane_mask = 16; lane_mask > 0; lane_mask >>= 1) {
    float2 o = (float2)(rows_shuffle_xor(v.x, lane_mask), rows_shuffle_xor(v.y, lane_mask));
    v = is_max ? fmax(v, o) : v + o;
  }
  int partials = (TSR_THREADS + 31) / 32;
  if ((t & 31) == 0)
    scratch[t >> 5] = v;
#elif TSR_ROWS_REDUCE == 1
  v = is_max ? (float2)(sub_group_reduce_max(v.x), sub_group_reduce_max(v.y))
             : (float2)(sub_group_reduce_add(v.x), sub_group_reduce_add(v.y));
  int partials = (int)get_num_sub_groups();
  if (get_sub_group_local_id() == 0)
    scratch[get_sub_group_id()] = v;
#else
  int partials = ROWS_PARTIALS;
  scratch[t] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (t % ROWS_SLICE == 0)
    for (int i = 1; i < ROWS_SLICE && t + i < TSR_THREADS; i++)
      v = is_max ? fmax(v, scratch[t + i]) : v + scratch[t + i];
  barrier(CLK_LOCAL_MEM_FENCE); /* every slice read before partials overwrite it */
  if (t % ROWS_SLICE == 0)
    scratch[t / ROWS_SLICE] = v;
#endif
  barrier(CLK_LOCAL_MEM_FENCE);
  float2 total = scratch[0];
  for (int i = 1; i < partials; i++)
    total = is_max ? fmax(total, scratch[i]) : total + scratch[i];
  return total;
}

inline float2 rows_sum2(float2 v, __local float2 *scratch) {
  return rows_reduce2(v, scratch, false);
}

inline float2 rows_max2(float2 v, __local float2 *scratch) {
  return rows_reduce2(v, scratch, true);
}

inline float rows_sum(float v, __local float2 *scratch) {
  return rows_sum2((float2)(v, 0.0f), scratch).x;
}

inline float rows_max(float v, __local float2 *scratch) {
  return rows_max2((float2)(v, 0.0f), scratch).x;
}

/* Columns of this work item: unit `it` of the cached path is column
 * (it * TSR_THREADS + tid) * TSR_VEC; the streaming path walks them all. */
#define ROWS_FIRST_COLUMN(tid) ((long)(tid)*TSR_VEC)
#define ROWS_COLUMN_STEP ((long)TSR_THREADS * TSR_VEC)
#define ROWS_CACHED_COLUMN(it) (((long)(it)*TSR_THREADS + tid) * TSR_VEC)

/* ---- rmsnorm ---- */

/* Where one row's h comes from: the rows' first elements and column
 * strides of x, residual and residual_out, and which of them are present. */
typedef struct rmsnorm_row {
  long bx, br, bo, xi, ri, oi;
  bool has_res, has_out;
} rmsnorm_row;

/* h = x (+ residual) of the unit at column c, residual_out written. */
inline rows_unit rmsnorm_in(const __global tsr_t *x, const __global tsr_t *res,
                            __global tsr_t *rout, rmsnorm_row k, long c) {
  rows_unit h = rows_load(x, k.bx, c, k.xi);
  if (k.has_res)
    h += rows_load(res, k.br, c, k.ri);
  if (k.has_out)
    rows_store(rout, k.bo, c, k.oi, h);
  return h;
}

/* h of column c read again for rows too long to keep: from residual_out
 * when it was written (it may alias x; this work item wrote this column),
 * else from x (+ residual), which nothing has overwritten yet. */
inline rows_unit rmsnorm_again(const __global tsr_t *x, const __global tsr_t *res,
                               const __global tsr_t *rout, rmsnorm_row k, long c) {
  if (k.has_out)
    return rows_load(rout, k.bo, c, k.oi);
  rows_unit h = rows_load(x, k.bx, c, k.xi);
  if (k.has_res)
    h += rows_load(res, k.br, c, k.ri);
  return h;
}

/* h = x (+ residual); y = h / sqrt(mean(h^2) + eps) * weight;
 * residual_out = h. Absent tensors get x's buffer and a clear flag. */
__kernel __attribute__((reqd_work_group_size(TSR_THREADS, 1, 1))) void
tsr_rmsnorm(const __global tsr_t *x, const __global tsr_t *res, const __global uchar *w,
            __global tsr_t *y, __global tsr_t *rout, tsr_cl_rmsnorm_params p) {
  __local float2 scratch[TSR_THREADS];
  const int tid = (int)get_local_id(0);
  const bool has_res = (ROWS_FLAGS(p) & TSR_CL_RMSNORM_RESIDUAL) != 0;
  const bool has_out = (ROWS_FLAGS(p) & TSR_CL_RMSNORM_RESIDUAL_OUT) != 0;
  const bool has_w = (ROWS_FLAGS(p) & TSR_CL_RMSNORM_WEIGHT) != 0;
  const int w_f32 = (ROWS_FLAGS(p) & TSR_CL_RMSNORM_WEIGHT_F32) != 0;
  for (long r = get_group_id(0); r < p.rows; r += get_num_groups(0)) {
    rmsnorm_row k = {rows_base(p.x, r, p.d1, p.d2),
                     rows_base(p.residual, r, p.d1, p.d2),
                     rows_base(p.residual_out, r, p.d1, p.d2),
                     p.x.inner,
                     p.residual.inner,
                     p.residual_out.inner,
                     has_res,
                     has_out};
    long by = rows_base(p.y, r, p.d1, p.d2);
    float squares = 0.0f;
#if TSR_ITEMS > 0
    /* Every load of the row before any store: the compiler must assume
     * outputs alias inputs, so a load after a store waits for it (loads and
     * stores interleaved kept one load in flight: 35% of copy on NVIDIA). */
    rows_unit h[ROWS_CACHE];
    ROWS_UNROLL
    for (int it = 0; it < TSR_ITEMS; it++)
      h[it] = ROWS_CACHED_COLUMN(it) < p.n ? rows_load(x, k.bx, ROWS_CACHED_COLUMN(it), k.xi)
                                           : (rows_unit)0.0f;
    if (has_res) {
      ROWS_UNROLL
      for (int it = 0; it < TSR_ITEMS; it++)
        if (ROWS_CACHED_COLUMN(it) < p.n)
          h[it] += rows_load(res, k.br, ROWS_CACHED_COLUMN(it), k.ri);
    }
    if (has_out) {
      ROWS_UNROLL
      for (int it = 0; it < TSR_ITEMS; it++)
        if (ROWS_CACHED_COLUMN(it) < p.n)
          rows_store(rout, k.bo, ROWS_CACHED_COLUMN(it), k.oi, h[it]);
    }
    ROWS_UNROLL
    for (int it = 0; it < TSR_ITEMS; it++)
      if (ROWS_CACHED_COLUMN(it) < p.n)
        squares += rows_unit_sum(h[it] * h[it]);
#else
    for (long c = ROWS_FIRST_COLUMN(tid); c < p.n; c += ROWS_COLUMN_STEP) {
      rows_unit v = rmsnorm_in(x, res, rout, k, c);
      squares += rows_unit_sum(v * v);
    }
#endif
    float total = rows_sum(squares, scratch);
    float scale = 1.0f / sqrt(total / (float)p.n + p.eps);
    if (total > ROWS_FLT_MAX) {
      /* The squares of finite values overflowed (|h| past ~1e19): again in
       * units of the row's largest |h|, mean(h^2) = big^2 mean((h/big)^2).
       * Uniform: every item has the same total. An infinite h keeps scale 0
       * (h * 0 is NaN there and 0 elsewhere, as in the reference). */
      float big = 0.0f;
#if TSR_ITEMS > 0
      ROWS_UNROLL
      for (int it = 0; it < TSR_ITEMS; it++)
        if (ROWS_CACHED_COLUMN(it) < p.n)
          big = fmax(big, rows_unit_max(fabs(h[it])));
#else
      for (long c = ROWS_FIRST_COLUMN(tid); c < p.n; c += ROWS_COLUMN_STEP)
        big = fmax(big, rows_unit_max(fabs(rmsnorm_again(x, res, rout, k, c))));
#endif
      big = rows_max(big, scratch);
      if (big <= ROWS_FLT_MAX) {
        float unit = 1.0f / big, small = 0.0f;
#if TSR_ITEMS > 0
        ROWS_UNROLL
        for (int it = 0; it < TSR_ITEMS; it++)
          if (ROWS_CACHED_COLUMN(it) < p.n) {
            rows_unit q = h[it] * unit;
            small += rows_unit_sum(q * q);
          }
#else
        for (long c = ROWS_FIRST_COLUMN(tid); c < p.n; c += ROWS_COLUMN_STEP) {
          rows_unit q = rmsnorm_again(x, res, rout, k, c) * unit;
          small += rows_unit_sum(q * q);
        }
#endif
        scale = unit / sqrt(rows_sum(small, scratch) / (float)p.n + p.eps * unit * unit);
      }
    }
#if TSR_ITEMS > 0
    /* The weights read before y is written, for the same reason. */
    ROWS_UNROLL
    for (int it = 0; it < TSR_ITEMS; it++)
      h[it] *= scale;
    if (has_w) {
      ROWS_UNROLL
      for (int it = 0; it < TSR_ITEMS; it++)
        if (ROWS_CACHED_COLUMN(it) < p.n)
          h[it] *= rows_param(w, p.w_first, p.w_stride, w_f32, ROWS_CACHED_COLUMN(it));
    }
    ROWS_UNROLL
    for (int it = 0; it < TSR_ITEMS; it++)
      if (ROWS_CACHED_COLUMN(it) < p.n)
        rows_store(y, by, ROWS_CACHED_COLUMN(it), p.y.inner, h[it]);
#else
    for (long c = ROWS_FIRST_COLUMN(tid); c < p.n; c += ROWS_COLUMN_STEP) {
      rows_unit v = rmsnorm_again(x, res, rout, k, c) * scale;
      if (has_w)
        v *= rows_param(w, p.w_first, p.w_stride, w_f32, c);
      rows_store(y, by, c, p.y.inner, v);
    }
#endif
  }
}

/* ---- layernorm ---- */

/* Writes the normalised unit q of column c with weight and bias applied. */
inline void layernorm_out(const __global uchar *w, const __global uchar *b, __global tsr_t *y,
                          tsr_cl_layernorm_params p, long by, long c, rows_unit q, bool has_w,
                          bool has_b, int w_f32, int b_f32) {
  if (has_w)
    q *= rows_param(w, p.w_first, p.w_stride, w_f32, c);
  if (has_b)
    q += rows_param(b, p.b_first, p.b_stride, b_f32, c);
  rows_store(y, by, c, p.y.inner, q);
}

/* y = (x - mean) / sqrt(var + eps) * weight + bias, the variance from
 * centred values (a second pass over private memory, or over x). */
__kernel __attribute__((reqd_work_group_size(TSR_THREADS, 1, 1))) void
tsr_layernorm(const __global tsr_t *x, const __global uchar *w, const __global uchar *b,
              __global tsr_t *y, tsr_cl_layernorm_params p) {
  __local float2 scratch[TSR_THREADS];
  const int tid = (int)get_local_id(0);
  const bool has_w = (ROWS_FLAGS(p) & TSR_CL_LAYERNORM_WEIGHT) != 0;
  const bool has_b = (ROWS_FLAGS(p) & TSR_CL_LAYERNORM_BIAS) != 0;
  const int w_f32 = (ROWS_FLAGS(p) & TSR_CL_LAYERNORM_WEIGHT_F32) != 0;
  const int b_f32 = (ROWS_FLAGS(p) & TSR_CL_LAYERNORM_BIAS_F32) != 0;
  for (long r = get_group_id(0); r < p.rows; r += get_num_groups(0)) {
    long bx = rows_base(p.x, r, p.d1, p.d2), by = rows_base(p.y, r, p.d1, p.d2);
    float sum = 0.0f;
#if TSR_ITEMS > 0
    rows_unit v[ROWS_CACHE];
    ROWS_UNROLL
    for (int it = 0; it < TSR_ITEMS; it++) {
      long c = ROWS_CACHED_COLUMN(it);
      if (c < p.n) {
        v[it] = rows_load(x, bx, c, p.x.inner);
        sum += rows_unit_sum(v[it]);
      }
    }
#else
    for (long c = ROWS_FIRST_COLUMN(tid); c < p.n; c += ROWS_COLUMN_STEP)
      sum += rows_unit_sum(rows_load(x, bx, c, p.x.inner));
#endif
    float mean = rows_sum(sum, scratch) / (float)p.n;
    float squares = 0.0f;
#if TSR_ITEMS > 0
    ROWS_UNROLL
    for (int it = 0; it < TSR_ITEMS; it++)
      if (ROWS_CACHED_COLUMN(it) < p.n) {
        rows_unit d = v[it] - mean;
        squares += rows_unit_sum(d * d);
      }
#else
    for (long c = ROWS_FIRST_COLUMN(tid); c < p.n; c += ROWS_COLUMN_STEP) {
      rows_unit d = rows_load(x, bx, c, p.x.inner) - mean;
      squares += rows_unit_sum(d * d);
    }
#endif
    float total = rows_sum(squares, scratch);
    float inv = 1.0f / sqrt(total / (float)p.n + p.eps);
    if (total > ROWS_FLT_MAX) {
      /* The squares of finite values overflowed (|x - mean| past ~1e19):
       * again in units of the largest |x - mean| (uniform). An infinite x
       * keeps inv 0, as the reference does (its row is NaN anyway). */
      float big = 0.0f;
#if TSR_ITEMS > 0
      ROWS_UNROLL
      for (int it = 0; it < TSR_ITEMS; it++)
        if (ROWS_CACHED_COLUMN(it) < p.n)
          big = fmax(big, rows_unit_max(fabs(v[it] - mean)));
#else
      for (long c = ROWS_FIRST_COLUMN(tid); c < p.n; c += ROWS_COLUMN_STEP)
        big = fmax(big, rows_unit_max(fabs(rows_load(x, bx, c, p.x.inner) - mean)));
#endif
      big = rows_max(big, scratch);
      if (big <= ROWS_FLT_MAX) {
        float unit = 1.0f / big, small = 0.0f;
#if TSR_ITEMS > 0
        ROWS_UNROLL
        for (int it = 0; it < TSR_ITEMS; it++)
          if (ROWS_CACHED_COLUMN(it) < p.n) {
            rows_unit d = (v[it] - mean) * unit;
            small += rows_unit_sum(d * d);
          }
#else
        for (long c = ROWS_FIRST_COLUMN(tid); c < p.n; c += ROWS_COLUMN_STEP) {
          rows_unit d = (rows_load(x, bx, c, p.x.inner) - mean) * unit;
          small += rows_unit_sum(d * d);
        }
#endif
        inv = unit / sqrt(rows_sum(small, scratch) / (float)p.n + p.eps * unit * unit);
      }
    }
#if TSR_ITEMS > 0
    /* Weights and biases read before y is written (see rmsnorm). */
    ROWS_UNROLL
    for (int it = 0; it < TSR_ITEMS; it++)
      v[it] = (v[it] - mean) * inv;
    if (has_w) {
      ROWS_UNROLL
      for (int it = 0; it < TSR_ITEMS; it++)
        if (ROWS_CACHED_COLUMN(it) < p.n)
          v[it] *= rows_param(w, p.w_first, p.w_stride, w_f32, ROWS_CACHED_COLUMN(it));
    }
    if (has_b) {
      ROWS_UNROLL
      for (int it = 0; it < TSR_ITEMS; it++)
        if (ROWS_CACHED_COLUMN(it) < p.n)
          v[it] += rows_param(b, p.b_first, p.b_stride, b_f32, ROWS_CACHED_COLUMN(it));
    }
    ROWS_UNROLL
    for (int it = 0; it < TSR_ITEMS; it++)
      if (ROWS_CACHED_COLUMN(it) < p.n)
        rows_store(y, by, ROWS_CACHED_COLUMN(it), p.y.inner, v[it]);
#else
    for (long c = ROWS_FIRST_COLUMN(tid); c < p.n; c += ROWS_COLUMN_STEP)
      layernorm_out(w, b, y, p, by, c, (rows_load(x, bx, c, p.x.inner) - mean) * inv, has_w, has_b,
                    w_f32, b_f32);
#endif
  }
}

/* ---- softmax ---- */

#define ROWS_NAN as_float(0x7fc00000u)

/* Running max m and sum s of exp((v - m) * scale) of one item's values; bad
 * set by a NaN. */
inline void softmax_online(float *m, float *s, bool *bad, float v, float scale) {
  if (isnan(v)) {
    *bad = true;
  } else if (v > *m) {
    *s = *s * exp((*m - v) * scale) + 1.0f;
    *m = v;
  } else if (v != -INFINITY) {
    *s += exp((v - *m) * scale);
  }
}

/* Softmax over each row of scale * x. A NaN or a +inf anywhere makes the
 * row NaN; a row of -inf only gives zeros (the reference's contract). The
 * max is taken over x and the exponents are (x - max) * scale (scale is
 * positive): the max's own is exactly 0, and nothing overflows where
 * x * scale would. */
__kernel __attribute__((reqd_work_group_size(TSR_THREADS, 1, 1))) void
tsr_softmax(const __global tsr_t *x, __global tsr_t *y, tsr_cl_softmax_params p) {
  __local float2 scratch[TSR_THREADS];
  const int tid = (int)get_local_id(0);
  for (long r = get_group_id(0); r < p.rows; r += get_num_groups(0)) {
    long bx = rows_base(p.x, r, p.d1, p.d2), by = rows_base(p.y, r, p.d1, p.d2);
#if TSR_ITEMS > 0
    /* The row is in private memory: its max, then exp((v - max) * scale)
     * once per element (kept for the output), then their sum. */
    rows_unit v[ROWS_CACHE];
    float m = -INFINITY;
    bool bad = false;
    ROWS_UNROLL
    for (int it = 0; it < TSR_ITEMS; it++) {
      long c = ROWS_CACHED_COLUMN(it);
      if (c < p.n) {
        v[it] = rows_load(x, bx, c, p.x.inner);
        bad = bad || rows_unit_nan(v[it]);
        m = fmax(m, rows_unit_max(v[it]));
      }
    }
    float2 top = rows_max2((float2)(m, bad ? 1.0f : 0.0f), scratch);
    float row_max = top.x;
    bool nan_row = top.y > 0.0f || row_max == INFINITY;
    bool special = nan_row || row_max == -INFINITY;
    float s = 0.0f;
    ROWS_UNROLL
    for (int it = 0; it < TSR_ITEMS; it++)
      if (ROWS_CACHED_COLUMN(it) < p.n) {
        v[it] = exp((v[it] - row_max) * p.scale);
        s += rows_unit_sum(v[it]);
      }
    float inv = 1.0f / rows_sum(s, scratch);
    float fill = nan_row ? ROWS_NAN : 0.0f;
    ROWS_UNROLL
    for (int it = 0; it < TSR_ITEMS; it++) {
      long c = ((long)it * TSR_THREADS + tid) * TSR_VEC;
      if (c < p.n)
        rows_store(y, by, c, p.y.inner, special ? (rows_unit)fill : v[it] * inv);
    }
#else
    /* Too long to keep: one online pass for the max and sum, one to write. */
    float m = -INFINITY, s = 0.0f;
    bool bad = false;
    for (long c = ROWS_FIRST_COLUMN(tid); c < p.n; c += ROWS_COLUMN_STEP) {
      rows_unit q = rows_load(x, bx, c, p.x.inner);
      ROWS_EACH_COMPONENT(q, softmax_online(&m, &s, &bad, ROWS_COMPONENT, p.scale));
    }
    float2 top = rows_max2((float2)(m, bad ? 1.0f : 0.0f), scratch);
    float row_max = top.x;
    bool nan_row = top.y > 0.0f || row_max == INFINITY;
    bool special = nan_row || row_max == -INFINITY;
    float part = (m == -INFINITY || special) ? 0.0f : s * exp((m - row_max) * p.scale);
    float inv = 1.0f / rows_sum(part, scratch);
    float fill = nan_row ? ROWS_NAN : 0.0f;
    for (long c = ROWS_FIRST_COLUMN(tid); c < p.n; c += ROWS_COLUMN_STEP) {
      rows_unit q = rows_load(x, bx, c, p.x.inner);
      rows_store(y, by, c, p.y.inner,
                 special ? (rows_unit)fill : exp((q - row_max) * p.scale) * inv);
    }
#endif
  }
}

/* ---- cross entropy ---- */

inline void entropy_online(float *m, float *s, bool *bad, float v) {
  if (isnan(v)) {
    *bad = true;
  } else if (v > *m) {
    *s = (*m == -INFINITY ? 0.0f : *s * exp(*m - v)) + 1.0f;
    *m = v;
  } else if (v != -INFINITY) {
    *s += exp(v - *m);
  }
}

/* Cross entropy per row of logits [rows, n]: lse = log(sum(exp(x))) in one
 * online pass, loss = lse - x[target]; loss 0 where target is ignore_index;
 * a target outside [0, n) gives NaN and its row (the smallest such, rows
 * past INT_MAX - 1 reported as INT_MAX - 1) in the queue's fault word
 * TSR_CL_FAULT_CE_TARGET, which queue_finish reports. TSR_ITEMS is 0 for
 * this kernel. */
__kernel __attribute__((reqd_work_group_size(TSR_THREADS, 1, 1))) void
tsr_cross_entropy(const __global tsr_t *x, const __global int *targets, __global float *loss,
                  __global float *lse, volatile __global int *status,
                  tsr_cl_cross_entropy_params p) {
  __local float2 scratch[TSR_THREADS];
  const int tid = (int)get_local_id(0);
  for (long r = get_group_id(0); r < p.rows; r += get_num_groups(0)) {
    long bx = rows_base(p.x, r, p.d1, p.d2);
    float m = -INFINITY, s = 0.0f;
    bool bad = false;
    for (long c = ROWS_FIRST_COLUMN(tid); c < p.n; c += ROWS_COLUMN_STEP) {
      rows_unit q = rows_load(x, bx, c, p.x.inner);
      ROWS_EACH_COMPONENT(q, entropy_online(&m, &s, &bad, ROWS_COMPONENT));
    }
    float2 top = rows_max2((float2)(m, bad ? 1.0f : 0.0f), scratch);
    float row_max = top.x;
    /* +inf logits make exp(v - m) NaN: the sum only matters for finite
     * maxima. */
    float part = (m == -INFINITY || row_max == INFINITY) ? 0.0f : s * exp(m - row_max);
    float total = rows_sum(part, scratch);
    if (tid == 0) {
      float row_lse;
      if (top.y > 0.0f)
        row_lse = ROWS_NAN;
      else if (row_max == -INFINITY || row_max == INFINITY)
        row_lse = row_max;
      else
        row_lse = row_max + log(total);
      if (p.flags & TSR_CL_CROSS_ENTROPY_LSE)
        lse[p.lse_first + r * p.lse_stride] = row_lse;
      long target = targets[p.t_first + r * p.t_stride];
      float value;
      if (target == p.ignore_index) {
        value = 0.0f;
      } else if (target < 0 || target >= p.n) {
        value = ROWS_NAN;
        atomic_min(&status[TSR_CL_FAULT_CE_TARGET], (int)min(r, (long)INT_MAX - 1));
      } else {
        value = row_lse - tsr_load(x, bx + target * p.x.inner);
      }
      loss[p.loss_first + r * p.loss_stride] = value;
    }
  }
}
