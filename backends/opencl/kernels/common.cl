/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers every OpenCL program has in its prelude (after opencl_types.h and
 * the params_*.h headers): storage of the three float dtypes with f32 math.
 *
 * A program is built for one storage dtype, -DTSR_DTYPE=1 (f32), 2 (f16) or
 * 3 (bf16); `tsr_t` is its storage type and tsr_load / tsr_store convert.
 * f16 goes through vload_half / vstore_half (core OpenCL 1.2, no cl_khr_fp16
 * needed; round to nearest even); bf16 is the high half of an f32, rounded
 * to nearest even, NaN kept quiet. Programs that mix dtypes use the explicit
 * tsr_load_f16 etc. below. */

#ifndef TSR_DTYPE
#define TSR_DTYPE TSR_CL_F32
#endif

inline float tsr_bf16_to_f32(ushort h) {
  return as_float(((uint)h) << 16);
}

inline ushort tsr_f32_to_bf16(float f) {
  uint u = as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (ushort)((u >> 16) | 0x40u); /* NaN stays NaN (quiet) */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (ushort)(u >> 16);
}

inline float tsr_load_f32(const __global float *p, long i) {
  return p[i];
}
inline float tsr_load_f16(const __global ushort *p, long i) {
  return vload_half(i, (const __global half *)p);
}
inline float tsr_load_bf16(const __global ushort *p, long i) {
  return tsr_bf16_to_f32(p[i]);
}
inline void tsr_store_f32(__global float *p, long i, float v) {
  p[i] = v;
}
inline void tsr_store_f16(__global ushort *p, long i, float v) {
  vstore_half_rte(v, i, (__global half *)p);
}
inline void tsr_store_bf16(__global ushort *p, long i, float v) {
  p[i] = tsr_f32_to_bf16(v);
}

#if TSR_DTYPE == TSR_CL_F32
typedef float tsr_t;
#define tsr_load(p, i) tsr_load_f32((p), (i))
#define tsr_store(p, i, v) tsr_store_f32((p), (i), (v))
#elif TSR_DTYPE == TSR_CL_F16
typedef ushort tsr_t;
#define tsr_load(p, i) tsr_load_f16((p), (i))
#define tsr_store(p, i, v) tsr_store_f16((p), (i), (v))
#elif TSR_DTYPE == TSR_CL_BF16
typedef ushort tsr_t;
#define tsr_load(p, i) tsr_load_bf16((p), (i))
#define tsr_store(p, i, v) tsr_store_bf16((p), (i), (v))
#else
#error "TSR_DTYPE must be 1 (f32), 2 (f16) or 3 (bf16)"
#endif

/* Sum and max over a work-group of `n` work items (n a power of two, at
 * most the size of `scratch`), every item getting the result; `scratch` is
 * __local float[n]. Ends with a barrier, so scratch may be reused at once. */
inline float tsr_group_sum(float v, __local float *scratch, int n) {
  int t = (int)get_local_id(0);
  scratch[t] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = n >> 1; s > 0; s >>= 1) {
    if (t < s)
      scratch[t] += scratch[t + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  float r = scratch[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

inline float tsr_group_max(float v, __local float *scratch, int n) {
  int t = (int)get_local_id(0);
  scratch[t] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = n >> 1; s > 0; s >>= 1) {
    if (t < s)
      scratch[t] = fmax(scratch[t], scratch[t + s]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  float r = scratch[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}
