/* SPDX-License-Identifier: Apache-2.0 */
/* Elementwise ops: swiglu, gelu (a grid-stride loop over elements) and rope
 * (over (row, pair) items); params in params_rows.h. Options besides
 * -DTSR_DTYPE:
 *   TSR_THREADS  work items per group
 *   TSR_CONTIG   1: every tensor is dense row-major (element e is first + e)
 *   TSR_VEC      1, or 4 / 8 with TSR_CONTIG when every tensor's first
 *                element sits at an address aligned to TSR_VEC elements
 *                (aligned 16-byte loads; 8 for 16-bit dtypes): units of
 *                TSR_VEC elements, the last count % TSR_VEC elements alone.
 * Strided tensors take the element's 4-D index apart, in 32-bit arithmetic
 * when the count allows. Outputs may alias inputs (the same view): each
 * element is read and written by one work item. */

#ifndef TSR_THREADS
#define TSR_THREADS 256
#endif
#ifndef TSR_CONTIG
#define TSR_CONTIG 0
#endif
#ifndef TSR_VEC
#define TSR_VEC 1
#endif

#define ELEM_CAT_(a, b) a##b
#define ELEM_CAT(a, b) ELEM_CAT_(a, b)
#define ELEM_V(name) ELEM_CAT(name, TSR_VEC)

#if TSR_VEC == 1
typedef float elem_unit;
#elif TSR_VEC == 4 || TSR_VEC == 8
typedef ELEM_V(float) elem_unit;
#else
#error "TSR_VEC must be 1, 4 or 8"
#endif

/* ---- element addressing ---- */

/* The 4-D index (i0, i1, i2, i3) of element e of a (d0, d1, d2, d3) shape. */
inline long4 elem_split(long e, long d1, long d2, long d3, bool narrow) {
  if (narrow) {
    uint u = (uint)e, e1 = (uint)d1, e2 = (uint)d2, e3 = (uint)d3;
    uint i3 = u % e3;
    u /= e3;
    uint i2 = u % e2;
    u /= e2;
    return (long4)(u / e1, u % e1, i2, i3);
  }
  long i3 = e % d3;
  e /= d3;
  long i2 = e % d2;
  e /= d2;
  return (long4)(e / d1, e % d1, i2, i3);
}

inline long elem_at(tsr_cl_elem_view t, long4 i) {
  return t.first + i.s0 * t.s0 + i.s1 * t.s1 + i.s2 * t.s2 + i.s3 * t.s3;
}

#if TSR_VEC > 1
/* Unit u of a tensor whose first element is unit-aligned: element
 * first + u * TSR_VEC onwards. */
inline elem_unit elem_load_unit(const __global tsr_t *p, long first, long u) {
  long i = first / TSR_VEC + u;
#if TSR_DTYPE == TSR_CL_F32
  return ((const __global elem_unit *)p)[i];
#elif TSR_DTYPE == TSR_CL_F16
  return ELEM_V(vloada_half)(i, (const __global half *)p);
#else
  ELEM_V(ushort) bits = ((const __global ELEM_V(ushort) *)p)[i];
  return ELEM_CAT(as_float, TSR_VEC)(ELEM_CAT(convert_uint, TSR_VEC)(bits) << 16);
#endif
}

inline void elem_store_unit(__global tsr_t *p, long first, long u, elem_unit v) {
  long i = first / TSR_VEC + u;
#if TSR_DTYPE == TSR_CL_F32
  ((__global elem_unit *)p)[i] = v;
#elif TSR_DTYPE == TSR_CL_F16
  ELEM_CAT(ELEM_V(vstorea_half), _rte)(v, i, (__global half *)p);
#else
  ELEM_V(uint) x = ELEM_CAT(as_uint, TSR_VEC)(v);
  ELEM_V(uint) rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  ELEM_V(uint) quiet = (x >> 16) | 0x40u; /* NaN stays NaN */
  rounded = select(rounded, quiet, (x & 0x7fffffffu) > 0x7f800000u);
  ((__global ELEM_V(ushort) *)p)[i] = ELEM_CAT(convert_ushort, TSR_VEC)(rounded);
#endif
}
#endif

/* ---- activations ---- */

/* x sigmoid(x) = x / (1 + e^-x). Below -88 it is under 6e-37 in magnitude:
 * 0 there, which -inf needs (-inf / inf is NaN). NaN fails the compare and
 * stays NaN. */
inline float silu(float a) {
  return select(a / (1.0f + exp(-a)), 0.0f, a < -88.0f);
}

/* erfc(z) for z >= 0: a Chebyshev fit whose relative error stays below
 * 1.2e-7 for any argument, so the left tail of GELU (where 1 + erf is tiny)
 * keeps its precision. */
inline float erfc_nonneg(float z) {
  float t = 1.0f / (1.0f + 0.5f * z);
  float poly = 0.17087277f;
  poly = poly * t - 0.82215223f;
  poly = poly * t + 1.48851587f;
  poly = poly * t - 1.13520398f;
  poly = poly * t + 0.27886807f;
  poly = poly * t - 0.18628806f;
  poly = poly * t + 0.09678418f;
  poly = poly * t + 0.37409196f;
  poly = poly * t + 1.00002368f;
  poly = poly * t - 1.26551223f;
  return t * exp(-z * z + poly);
}

/* GELU, exact (erf, through erfc) or tanh approximation; the latter as the
 * logistic 0.5 (1 + tanh u) = 1 / (1 + e^-2u), written through e^-2|u|
 * (which cannot overflow) so neither tail cancels. Below -20 either form is
 * under 1e-80 in magnitude: 0, which -inf needs (v times a vanishing factor
 * is NaN there). NaN fails the compare and stays NaN. Branch-free (selects):
 * CPU compilers vectorise it across work items (PoCL: 25% faster). */
inline float gelu(float v, int approximate) {
  float r;
  if (approximate == 0) {
    float u = -v * 0.70710678118654752f; /* 1 + erf(v / sqrt 2) = erfc(u) */
    float ec = erfc_nonneg(fabs(u));
    r = 0.5f * v * select(2.0f - ec, ec, u >= 0.0f);
  } else {
    float u = 0.79788456080286536f * (v + 0.044715f * v * v * v);
    float e = exp(-2.0f * fabs(u));
    r = v * select(1.0f, e, u < 0.0f) / (1.0f + e);
  }
  return select(r, 0.0f, v < -20.0f);
}

#if TSR_VEC > 1
/* Units go through the scalar functions component by component: GPUs run
 * vectors as scalars anyway, and CPU compilers vectorise across items.
 * Unrolled so the arrays become registers (NVIDIA kept rolled ones in
 * stack memory). */
#define ELEM_UNROLL _Pragma("unroll")
inline elem_unit silu_unit(elem_unit a, elem_unit b) {
  float t[TSR_VEC], u[TSR_VEC];
  ELEM_V(vstore)(a, 0, t);
  ELEM_V(vstore)(b, 0, u);
  ELEM_UNROLL
  for (int k = 0; k < TSR_VEC; k++)
    t[k] = silu(t[k]) * u[k];
  return ELEM_V(vload)(0, t);
}

inline elem_unit gelu_unit(elem_unit a, int approximate) {
  float t[TSR_VEC];
  ELEM_V(vstore)(a, 0, t);
  ELEM_UNROLL
  for (int k = 0; k < TSR_VEC; k++)
    t[k] = gelu(t[k], approximate);
  return ELEM_V(vload)(0, t);
}
#endif

/* ---- swiglu ---- */

/* y = silu(gate) * up; y may alias gate or up. */
__kernel __attribute__((reqd_work_group_size(TSR_THREADS, 1, 1))) void
tsr_swiglu(const __global tsr_t *gate, const __global tsr_t *up, __global tsr_t *y,
           tsr_cl_swiglu_params p) {
  const long start = get_global_id(0), step = get_global_size(0);
  long e = start;
#if TSR_VEC > 1
  const long units = p.count / TSR_VEC;
  for (long u = start; u < units; u += step) {
    elem_unit a = elem_load_unit(gate, p.gate.first, u);
    elem_unit b = elem_load_unit(up, p.up.first, u);
    elem_store_unit(y, p.y.first, u, silu_unit(a, b));
  }
  e = units * TSR_VEC + start;
#endif
#if !TSR_CONTIG
  const bool narrow = p.count <= 0xffffffffL;
#endif
  for (; e < p.count; e += step) {
#if TSR_CONTIG
    long og = p.gate.first + e, ou = p.up.first + e, oy = p.y.first + e;
#else
    long4 i = elem_split(e, p.d1, p.d2, p.d3, narrow);
    long og = elem_at(p.gate, i), ou = elem_at(p.up, i), oy = elem_at(p.y, i);
#endif
    tsr_store(y, oy, silu(tsr_load(gate, og)) * tsr_load(up, ou));
  }
}

/* ---- gelu ---- */

__kernel __attribute__((reqd_work_group_size(TSR_THREADS, 1, 1))) void
tsr_gelu(const __global tsr_t *x, __global tsr_t *y, tsr_cl_gelu_params p) {
  const long start = get_global_id(0), step = get_global_size(0);
  long e = start;
#if TSR_VEC > 1
  const long units = p.count / TSR_VEC;
  for (long u = start; u < units; u += step)
    elem_store_unit(y, p.y.first, u, gelu_unit(elem_load_unit(x, p.x.first, u), p.approximate));
  e = units * TSR_VEC + start;
#endif
#if !TSR_CONTIG
  const bool narrow = p.count <= 0xffffffffL;
#endif
  for (; e < p.count; e += step) {
#if TSR_CONTIG
    long ox = p.x.first + e, oy = p.y.first + e;
#else
    long4 i = elem_split(e, p.d1, p.d2, p.d3, narrow);
    long ox = elem_at(p.x, i), oy = elem_at(p.y, i);
#endif
    tsr_store(y, oy, gelu(tsr_load(x, ox), p.approximate));
  }
}

/* ---- rope ---- */

/* Rotary position embedding on x [B, S, H, D]: item (row, i) with
 * row = (b*S + s)*H + h rotates pair i < rotary_dim/2 (neox: i and
 * i + rotary_dim/2; gpt-j: 2i and 2i+1) by (position_offset + s) *
 * theta^(-2i/rotary_dim), and copies the two elements rotary_dim +
 * 2(i - half) and the next one past the rotary part. The angle is reduced
 * to [-pi, pi] in two steps (6.28125 has 8 significant bits, so k * 6.28125
 * is exact while k fits 16 bits) before sin and cos. Positions are f32 as
 * in the other plugins: exact up to 2^24. */
__kernel __attribute__((reqd_work_group_size(TSR_THREADS, 1, 1))) void
tsr_rope(const __global tsr_t *x, __global tsr_t *y, tsr_cl_rope_params p) {
  const long step = get_global_size(0), items = p.rows * p.pairs;
  const bool narrow = items <= 0xffffffffL;
  for (long item = get_global_id(0); item < items; item += step) {
    long4 at = elem_split(item, p.seq, p.heads, p.pairs, narrow); /* b, s, h, i */
    long s = at.s1, i = at.s3;
    long bx = p.x.first + at.s0 * p.x.s0 + s * p.x.s1 + at.s2 * p.x.s2;
    long by = p.y.first + at.s0 * p.y.s0 + s * p.y.s1 + at.s2 * p.y.s2;
    if (i >= p.half_rotary) {
      long c = 2 * i;
      float a0 = tsr_load(x, bx + c * p.x.s3), a1 = tsr_load(x, bx + (c + 1) * p.x.s3);
      tsr_store(y, by + c * p.y.s3, a0);
      tsr_store(y, by + (c + 1) * p.y.s3, a1);
      continue;
    }
    long c0 = p.gptj ? 2 * i : i;
    long c1 = p.gptj ? 2 * i + 1 : i + p.half_rotary;
    float position = (float)(p.position_offset + s);
    float angle = position * exp2(-(float)(2 * i) / p.rotary_dim * p.log2_theta);
    float k = rint(angle * 0.15915494309189535f);
    float reduced = (angle - k * 6.28125f) - k * 0.0019353071795864769f;
    float cs;
    float sn = sincos(reduced, &cs);
    float a0 = tsr_load(x, bx + c0 * p.x.s3), a1 = tsr_load(x, bx + c1 * p.x.s3);
    tsr_store(y, by + c0 * p.y.s3, a0 * cs - a1 * sn);
    tsr_store(y, by + c1 * p.y.s3, a1 * cs + a0 * sn);
  }
}
