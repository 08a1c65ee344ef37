/* SPDX-License-Identifier: Apache-2.0 */
/* The one place where CUDA and HIP differ for tessera's kernels: headers,
 * 16-bit float types, warp shuffles, and which tensor-core / async-copy
 * instructions exist. Kernel files include this and nothing vendor-specific,
 * so the HIP plugin compiles the same sources. Paths that need NVIDIA-only
 * instructions (mma.sync, ldmatrix, cp.async) test TSR_GPU_HAS_MMA_SYNC and
 * keep a portable path beside them. */
#ifndef TESSERA_GPU_PORTABILITY_H
#define TESSERA_GPU_PORTABILITY_H

#include <stdint.h>
#include <type_traits>

#if defined(__HIPCC__)
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#if __has_include(<hip/hip_bf16.h>)
#include <hip/hip_bf16.h> /* ROCm 6.0+ */
#else
/* ROCm 5.x (Debian 12: 5.2) has no __hip_bfloat16: a 16-bit storage type
 * and the two conversions the kernels use. */
struct __hip_bfloat16 {
  unsigned short data;
};
static __host__ __device__ inline float __bfloat162float(__hip_bfloat16 h) {
  return __uint_as_float((unsigned)h.data << 16);
}
static __host__ __device__ inline __hip_bfloat16 __float2bfloat16_rn(float f) {
  unsigned u = __float_as_uint(f);
  __hip_bfloat16 r;
  if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN stays a (quiet) NaN */
    r.data = (unsigned short)((u >> 16) | 0x40);
  else
    r.data = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  return r;
}
#endif
typedef __half tsr_f16;
typedef __hip_bfloat16 tsr_bf16;
/* The portable kernels are written for 32-lane warps (lane = tid & 31,
 * warp = tid >> 5, 32-wide shuffles). On wave64 (gfx9: CDNA, Vega) a
 * wavefront holds two such warps: shuffles take width 32 so they stay in
 * their half; on wave32 (gfx10/11/12: RDNA) it is the hardware width. */
#define TSR_GPU_WARP 32
#define TSR_SHFL_XOR(value, mask) __shfl_xor((value), (mask), 32)
#define TSR_SHFL(value, lane) __shfl((value), (lane), 32)
#define TSR_GPU_HAS_MMA_SYNC 0
#define TSR_PARAMS(type) const type
/* No lane-level barrier in HIP before ROCm 6.2: the wavefront runs in lock
 * step, so order shared-memory accesses and keep the compiler from moving
 * them (a 32-lane warp is one wavefront or half of one). */
#define TSR_SYNCWARP()                                                                             \
  do {                                                                                             \
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");                                         \
    __builtin_amdgcn_wave_barrier();                                                               \
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");                                         \
  } while (0)
#define TSR_TRAP() __builtin_trap()
/* L1-bypassing accesses of split-K partials (CUDA __stcg / __ldcg): the
 * agent-scope __threadfence already invalidates L1; non-temporal hints. */
#define TSR_STORE_CG(ptr, value) __builtin_nontemporal_store((value), (ptr))
#define TSR_LOAD_CG(ptr) __builtin_nontemporal_load(ptr)
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
typedef __half tsr_f16;
typedef __nv_bfloat16 tsr_bf16;
#define TSR_GPU_WARP 32
#define TSR_SHFL_XOR(value, mask) __shfl_xor_sync(0xffffffffu, (value), (mask))
#define TSR_SHFL(value, lane) __shfl_sync(0xffffffffu, (value), (lane))
/* Kernel parameters stay in constant memory even where a device function
 * takes their address. */
#define TSR_PARAMS(type) const __grid_constant__ type
#define TSR_SYNCWARP() __syncwarp()
#define TSR_TRAP() __trap()
#define TSR_STORE_CG(ptr, value) __stcg((ptr), (value))
#define TSR_LOAD_CG(ptr) __ldcg(ptr)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define TSR_GPU_HAS_MMA_SYNC 1
#else
#define TSR_GPU_HAS_MMA_SYNC 0
#endif
#endif

/* NVIDIA-only kernels (mma.sync / ldmatrix / cp.async tensor-core GEMMs,
 * the mma decode GEMM, flash attention): instantiated only where they can
 * run; elsewhere the host must not ask for them. */
#ifndef TSR_GPU_NVIDIA_KERNELS
#if defined(__HIPCC__)
#define TSR_GPU_NVIDIA_KERNELS 0
#else
#define TSR_GPU_NVIDIA_KERNELS 1
#endif
#endif

/* Every kernel has a C name, so the host finds it with one lookup. */
#define TSR_KERNEL extern "C" __global__
#define TSR_DEVICE static __device__ __forceinline__

/* ---- element types: load as f32, store from f32 (round to nearest) ---- */

template <typename T> struct tsr_elem;

template <> struct tsr_elem<float> {
  static constexpr int code = 1;
  TSR_DEVICE float to_float(float x) {
    return x;
  }
  TSR_DEVICE float from_float(float x) {
    return x;
  }
};

template <> struct tsr_elem<tsr_f16> {
  static constexpr int code = 2;
  TSR_DEVICE float to_float(tsr_f16 x) {
    return __half2float(x);
  }
  TSR_DEVICE tsr_f16 from_float(float x) {
    return __float2half_rn(x);
  }
};

template <> struct tsr_elem<tsr_bf16> {
  static constexpr int code = 3;
  TSR_DEVICE float to_float(tsr_bf16 x) {
    return __bfloat162float(x);
  }
  TSR_DEVICE tsr_bf16 from_float(float x) {
    return __float2bfloat16_rn(x);
  }
};

/* Load / store one element of a dtype known only at run time (epilogues,
 * f32 weights of 16-bit norms). */
TSR_DEVICE float tsr_load_any(const void *base, int dtype, int64_t index) {
  if (dtype == 1)
    return ((const float *)base)[index];
  if (dtype == 2)
    return __half2float(((const tsr_f16 *)base)[index]);
  return __bfloat162float(((const tsr_bf16 *)base)[index]);
}

TSR_DEVICE void tsr_store_any(void *base, int dtype, int64_t index, float value) {
  if (dtype == 1)
    ((float *)base)[index] = value;
  else if (dtype == 2)
    ((tsr_f16 *)base)[index] = __float2half_rn(value);
  else
    ((tsr_bf16 *)base)[index] = __float2bfloat16_rn(value);
}

/* 16 bytes of a dtype to f32: 4 floats or 8 halves. */
template <typename T> struct tsr_vec16;
template <> struct tsr_vec16<float> {
  static constexpr int count = 4;
  TSR_DEVICE void load(const void *p, float *out) {
    float4 v = *(const float4 *)p;
    out[0] = v.x;
    out[1] = v.y;
    out[2] = v.z;
    out[3] = v.w;
  }
  TSR_DEVICE void store(void *p, const float *in) {
    *(float4 *)p = make_float4(in[0], in[1], in[2], in[3]);
  }
};
template <typename H> struct tsr_vec16_half {
  static constexpr int count = 8;
  TSR_DEVICE void load(const void *p, float *out) {
    uint4 raw = *(const uint4 *)p;
    const H *h = (const H *)&raw;
#pragma unroll
    for (int i = 0; i < 8; i++)
      out[i] = tsr_elem<H>::to_float(h[i]);
  }
  TSR_DEVICE void store(void *p, const float *in) {
    uint4 raw;
    H *h = (H *)&raw;
#pragma unroll
    for (int i = 0; i < 8; i++)
      h[i] = tsr_elem<H>::from_float(in[i]);
    *(uint4 *)p = raw;
  }
};
template <> struct tsr_vec16<tsr_f16> : tsr_vec16_half<tsr_f16> {};
template <> struct tsr_vec16<tsr_bf16> : tsr_vec16_half<tsr_bf16> {};

/* ---- reductions ---- */

TSR_DEVICE float tsr_warp_sum(float v) {
#pragma unroll
  for (int mask = TSR_GPU_WARP / 2; mask > 0; mask >>= 1)
    v += TSR_SHFL_XOR(v, mask);
  return v;
}

TSR_DEVICE float tsr_warp_max(float v) {
#pragma unroll
  for (int mask = TSR_GPU_WARP / 2; mask > 0; mask >>= 1)
    v = fmaxf(v, TSR_SHFL_XOR(v, mask));
  return v;
}

/* ---- activations (GEMM epilogue, gelu, swiglu), f32 ---- */

/* silu and gelu tend to 0 at -inf, where their formulas give -inf * 0 or
 * -inf / inf = NaN; below -100 each is under 1e-40 in magnitude: 0 there.
 * NaN fails the compare and stays NaN. */
TSR_DEVICE float tsr_left_tail_zero(float x, float value) {
  return x < -100.0f ? 0.0f : value;
}
TSR_DEVICE float tsr_gelu_tanh(float x) {
  const float k0 = 0.7978845608028654f; /* sqrt(2 / pi) */
  return tsr_left_tail_zero(x, 0.5f * x * (1.0f + tanhf(k0 * (x + 0.044715f * x * x * x))));
}
TSR_DEVICE float tsr_gelu_erf(float x) {
  return tsr_left_tail_zero(x, 0.5f * x * (1.0f + erff(x * 0.7071067811865476f)));
}
TSR_DEVICE float tsr_silu(float x) {
  return tsr_left_tail_zero(x, x / (1.0f + expf(-x)));
}
TSR_DEVICE float tsr_activation(int activation, float x) {
  switch (activation) {
  case 1:
    return x < 0.0f ? 0.0f : x; /* NaN passes through (fmaxf(NaN, 0) is 0) */
  case 2:
    return tsr_gelu_tanh(x);
  case 3:
    return tsr_gelu_erf(x);
  case 4:
    return tsr_silu(x);
  default:
    return x;
  }
}

/* ---- NVIDIA async copies, ldmatrix and mma.sync (sm_80+) ---- */
#if !defined(__HIPCC__)

TSR_DEVICE uint32_t tsr_smem_address(const void *pointer) {
  return (uint32_t)__cvta_generic_to_shared(pointer);
}

/* Copies `valid_bytes` (0..16) of src and zero-fills the rest of 16 bytes. */
TSR_DEVICE void tsr_cp_async16(void *dst, const void *src, int valid_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(tsr_smem_address(dst)),
               "l"(src), "r"(valid_bytes));
}
/* 4 bytes (valid_bytes 4) or a zero (0): element-wise staging, which may
 * scatter, e.g. transpose a tile on its way to shared memory. */
TSR_DEVICE void tsr_cp_async4(void *dst, const void *src, int valid_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(tsr_smem_address(dst)),
               "l"(src), "r"(valid_bytes));
}
TSR_DEVICE void tsr_cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N> TSR_DEVICE void tsr_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

TSR_DEVICE void tsr_ldmatrix_x4(uint32_t *r, const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(tsr_smem_address(p)));
}
TSR_DEVICE void tsr_ldmatrix_x4_trans(uint32_t *r, const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(tsr_smem_address(p)));
}

/* Transposes an 8x8 matrix of 16-bit values held across the warp (lane l:
 * row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1, as ldmatrix leaves it). */
TSR_DEVICE uint32_t tsr_movmatrix_trans(uint32_t x) {
  uint32_t r;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(r) : "r"(x));
  return r;
}

/* 16 bytes of data read once (streamed weights): not kept in L1. */
TSR_DEVICE uint4 tsr_load16_stream(const void *p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

/* D = A B + D, m16n8k16, f32 accumulators; A, B bf16 or f16. */
template <typename T>
TSR_DEVICE void tsr_mma_16816(float *d, const uint32_t *a, const uint32_t *b) {
  if constexpr (std::is_same<T, tsr_bf16>::value) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    static_assert(std::is_same<T, tsr_f16>::value, "mma.sync m16n8k16 takes bf16 or f16");
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

/* D = A B + D, m16n8k8 in tf32 (operands are f32 bit patterns rounded to tf32). */
TSR_DEVICE void tsr_mma_1688_tf32(float *d, const uint32_t *a, const uint32_t *b) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
               "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

TSR_DEVICE uint32_t tsr_to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

#else /* __HIPCC__ */

/* No cp.async on gfx9/10/11: the "asynchronous" copies are synchronous
 * (zero-filled past valid_bytes), commit and wait are no-ops; callers
 * already end each stage with __syncthreads(). */
TSR_DEVICE void tsr_cp_async16(void *dst, const void *src, int valid_bytes) {
  if (valid_bytes == 16) {
    *(uint4 *)dst = *(const uint4 *)src;
  } else {
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    for (int i = 0; i < 16; i++)
      d[i] = i < valid_bytes ? s[i] : 0;
  }
}
TSR_DEVICE void tsr_cp_async4(void *dst, const void *src, int valid_bytes) {
  *(uint32_t *)dst = valid_bytes ? *(const uint32_t *)src : 0u;
}
TSR_DEVICE void tsr_cp_async_commit() {}
template <int N> TSR_DEVICE void tsr_cp_async_wait() {}

#endif

/* Two f32 values as one register of two 16-bit values (low half first). */
template <typename T> TSR_DEVICE uint32_t tsr_pack2(float lo, float hi) {
  T pair[2] = {tsr_elem<T>::from_float(lo), tsr_elem<T>::from_float(hi)};
  uint32_t r;
  memcpy(&r, pair, 4);
  return r;
}

#endif /* TESSERA_GPU_PORTABILITY_H */
