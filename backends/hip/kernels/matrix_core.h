/* SPDX-License-Identifier: Apache-2.0 */
/* AMD matrix instructions for the HIP GEMM kernels: which targets have
 * which, their register layouts (matrix_layouts.h) as engine types, and
 * one wrapper a kernel calls per instruction, D = A B + C with f32
 * accumulators.
 *
 * Engines (template argument of the GEMM body):
 *   tsr_mx_engine<T, tsr_mx_mfma32>     v_mfma_f32_32x32x8_{bf16_1k,f16}
 *   tsr_mx_engine<T, tsr_mx_mfma16>     v_mfma_f32_16x16x16_{bf16_1k,f16}
 *   tsr_mx_engine<float, tsr_mx_mfma16f32> v_mfma_f32_16x16x4_f32
 *   tsr_mx_engine<T, tsr_mx_wmma11>     v_wmma_f32_16x16x16_{f16,bf16} (gfx11)
 *   tsr_mx_engine<T, tsr_mx_wmma12>     the same on gfx12 (its own layout)
 * Fragments are arrays of 32-bit words holding the builtin's vector operand
 * (two 16-bit elements a word, element 2j in the low half, as the vector
 * lies in registers); accumulators are the builtin's f32 vector.
 *
 * Emulation (nvcc with -DTSR_HIP_EMULATE_MATRIX=1): every instruction is
 * computed in software from the same layout functions, so the whole GEMM
 * (tiling, fragment loads, epilogue) runs and is checked on an NVIDIA GPU:
 * lanes store their A and B elements to a per-wave shared scratch at the
 * (row, k) / (k, col) the layout gives, the wave synchronises, each lane
 * forms its D elements in f32, the wave synchronises again. A wave64 is two
 * warps joined by named barrier wave + 1 (so at most 15 waves a block); a
 * wave32 is one warp. */
#ifndef TESSERA_HIP_MATRIX_CORE_H
#define TESSERA_HIP_MATRIX_CORE_H

#include "gpu_portability.h"

#define TSR_MX_FN static __host__ __device__ inline
#include "matrix_layouts.h"

/* ---- which instructions this compilation has ---- */
#if defined(__HIPCC__)
#if defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__)
#define TSR_HIP_HAS_MFMA 1
#endif
#if defined(__gfx1100__) || defined(__gfx1101__) || defined(__gfx1102__) ||                        \
    defined(__gfx1103__) || defined(__gfx1150__) || defined(__gfx1151__)
#define TSR_HIP_HAS_WMMA11 1
#endif
#if defined(__gfx1200__) || defined(__gfx1201__)
#define TSR_HIP_HAS_WMMA12 1
#endif
#define TSR_HIP_MX_EMULATED 0
#elif defined(TSR_HIP_EMULATE_MATRIX) && TSR_HIP_EMULATE_MATRIX
#define TSR_HIP_HAS_MFMA 1
#define TSR_HIP_HAS_WMMA11 1
#define TSR_HIP_HAS_WMMA12 1
#define TSR_HIP_MX_EMULATED 1
#else
#define TSR_HIP_MX_EMULATED 0
#endif
#ifndef TSR_HIP_HAS_MFMA
#define TSR_HIP_HAS_MFMA 0
#endif
#ifndef TSR_HIP_HAS_WMMA11
#define TSR_HIP_HAS_WMMA11 0
#endif
#ifndef TSR_HIP_HAS_WMMA12
#define TSR_HIP_HAS_WMMA12 0
#endif

/* f32 scratch a wave needs for emulation: A (M x K) and B (K x N) of the
 * largest instruction. */
#define TSR_MX_SCRATCH_FLOATS 512

/* ---- layouts as types ---- */

enum { TSR_MX_MFMA32, TSR_MX_MFMA16, TSR_MX_MFMA16F32, TSR_MX_WMMA11, TSR_MX_WMMA12 };

/* REPLICATED: lanes 16-31 repeat lanes 0-15's A and B (gfx11 WMMA). */
#define TSR_MX_LAYOUT(type, id, P, replicated)                                                     \
  struct type {                                                                                    \
    static constexpr int ID = id, M = P##_M, N = P##_N, K = P##_K, WAVE = P##_WAVE;                \
    static constexpr int AB = P##_AB_REGS, C = P##_C_REGS, RUN = P##_RUN;                          \
    static constexpr bool REPLICATED = replicated;                                                 \
  };
TSR_MX_LAYOUT(tsr_mx_mfma32, TSR_MX_MFMA32, TSR_MFMA32, false)
TSR_MX_LAYOUT(tsr_mx_mfma16, TSR_MX_MFMA16, TSR_MFMA16, false)
TSR_MX_LAYOUT(tsr_mx_mfma16f32, TSR_MX_MFMA16F32, TSR_MFMA16F32, false)
TSR_MX_LAYOUT(tsr_mx_wmma11, TSR_MX_WMMA11, TSR_WMMA11, true)
TSR_MX_LAYOUT(tsr_mx_wmma12, TSR_MX_WMMA12, TSR_WMMA12, false)
#undef TSR_MX_LAYOUT

/* The layout functions by id (constant-folded once the engine is known). */
#define TSR_MX_DISPATCH(fn)                                                                        \
  template <int ID> TSR_DEVICE int tsr_mx_##fn(int lane, int r) {                                  \
    if constexpr (ID == TSR_MX_MFMA32)                                                             \
      return tsr_mfma32_##fn(lane, r);                                                             \
    else if constexpr (ID == TSR_MX_MFMA16)                                                        \
      return tsr_mfma16_##fn(lane, r);                                                             \
    else if constexpr (ID == TSR_MX_MFMA16F32)                                                     \
      return tsr_mfma16f32_##fn(lane, r);                                                          \
    else if constexpr (ID == TSR_MX_WMMA11)                                                        \
      return tsr_wmma11_##fn(lane, r);                                                             \
    else                                                                                           \
      return tsr_wmma12_##fn(lane, r);                                                             \
  }
TSR_MX_DISPATCH(a_row)
TSR_MX_DISPATCH(a_k)
TSR_MX_DISPATCH(b_col)
TSR_MX_DISPATCH(b_k)
TSR_MX_DISPATCH(c_row)
TSR_MX_DISPATCH(c_col)
#undef TSR_MX_DISPATCH

/* A lane's place in its wave (and, emulated, the wave's scratch). */
struct tsr_mx_wave {
  int lane, wave;
  float *scratch;
};

/* ---- accumulator vectors ---- */
#if TSR_HIP_MX_EMULATED || !defined(__HIPCC__)
template <int C> struct tsr_mx_acc {
  float v[C];
  __device__ __forceinline__ float &operator[](int i) {
    return v[i];
  }
  __device__ __forceinline__ float operator[](int i) const {
    return v[i];
  }
};
#else
typedef float tsr_mx_v4f __attribute__((ext_vector_type(4)));
typedef float tsr_mx_v8f __attribute__((ext_vector_type(8)));
typedef float tsr_mx_v16f __attribute__((ext_vector_type(16)));
template <int C> struct tsr_mx_acc_of;
template <> struct tsr_mx_acc_of<4> { typedef tsr_mx_v4f type; };
template <> struct tsr_mx_acc_of<8> { typedef tsr_mx_v8f type; };
template <> struct tsr_mx_acc_of<16> { typedef tsr_mx_v16f type; };
template <int C> using tsr_mx_acc = typename tsr_mx_acc_of<C>::type;
typedef short tsr_mx_v4s __attribute__((ext_vector_type(4)));
typedef short tsr_mx_v8s __attribute__((ext_vector_type(8)));
typedef short tsr_mx_v16s __attribute__((ext_vector_type(16)));
typedef _Float16 tsr_mx_v4h __attribute__((ext_vector_type(4)));
typedef _Float16 tsr_mx_v8h __attribute__((ext_vector_type(8)));
typedef _Float16 tsr_mx_v16h __attribute__((ext_vector_type(16)));
#endif

/* ---- emulation ---- */
#if TSR_HIP_MX_EMULATED

template <int WAVE> TSR_DEVICE void tsr_mx_wave_sync(const tsr_mx_wave &w) {
  if constexpr (WAVE == 64)
    asm volatile("bar.sync %0, 64;" ::"r"(w.wave + 1) : "memory");
  else
    __syncwarp();
}

/* Element r of a fragment as f32. */
template <typename T> TSR_DEVICE float tsr_mx_element(const uint32_t *words, int r) {
  if constexpr (sizeof(T) == 4) {
    return __uint_as_float(words[r]);
  } else {
    unsigned short bits = (unsigned short)(words[r / 2] >> (16 * (r & 1)));
    T x;
    memcpy(&x, &bits, 2);
    return tsr_elem<T>::to_float(x);
  }
}

template <typename T, class L>
TSR_DEVICE void tsr_mx_emulate(tsr_mx_acc<L::C> &c, const uint32_t *a, const uint32_t *b,
                               const tsr_mx_wave &w) {
  float *sa = w.scratch, *sb = w.scratch + L::M * L::K; /* [M][K], [K][N] */
  const bool writer = !L::REPLICATED || w.lane < 16;
  if (writer) {
#pragma unroll
    for (int r = 0; r < L::AB; r++) {
      sa[tsr_mx_a_row<L::ID>(w.lane, r) * L::K + tsr_mx_a_k<L::ID>(w.lane, r)] =
          tsr_mx_element<T>(a, r);
      sb[tsr_mx_b_k<L::ID>(w.lane, r) * L::N + tsr_mx_b_col<L::ID>(w.lane, r)] =
          tsr_mx_element<T>(b, r);
    }
  }
  tsr_mx_wave_sync<L::WAVE>(w);
  if (!writer) {
    /* The instruction requires lanes 16-31 to repeat lanes 0-15: a kernel
     * that breaks this would compute garbage on the GPU, so it traps here. */
#pragma unroll
    for (int r = 0; r < L::AB; r++) {
      float x = sa[tsr_mx_a_row<L::ID>(w.lane, r) * L::K + tsr_mx_a_k<L::ID>(w.lane, r)];
      float y = sb[tsr_mx_b_k<L::ID>(w.lane, r) * L::N + tsr_mx_b_col<L::ID>(w.lane, r)];
      if (__float_as_uint(x) != __float_as_uint(tsr_mx_element<T>(a, r)) ||
          __float_as_uint(y) != __float_as_uint(tsr_mx_element<T>(b, r)))
        TSR_TRAP();
    }
  }
#pragma unroll
  for (int r = 0; r < L::C; r++) {
    const int row = tsr_mx_c_row<L::ID>(w.lane, r), col = tsr_mx_c_col<L::ID>(w.lane, r);
    float sum = c[r];
    for (int k = 0; k < L::K; k++)
      sum = fmaf(sa[row * L::K + k], sb[k * L::N + col], sum);
    c[r] = sum;
  }
  tsr_mx_wave_sync<L::WAVE>(w); /* the scratch is free for the next instruction */
}
#endif

/* ---- the engines ---- */

template <typename T, class L> struct tsr_mx_engine : L {
  typedef tsr_mx_acc<L::C> acc;
  /* 32-bit words of an A or B fragment. */
  static constexpr int WORDS = (L::AB * (int)sizeof(T) + 3) / 4;

  static __device__ __forceinline__ void zero(acc &c) {
#pragma unroll
    for (int r = 0; r < L::C; r++)
      c[r] = 0.0f;
  }

  /* c = a b + c. */
  static __device__ __forceinline__ void mma(acc &c, const uint32_t *a, const uint32_t *b,
                                             const tsr_mx_wave &w) {
#if TSR_HIP_MX_EMULATED
    tsr_mx_emulate<T, L>(c, a, b, w);
#else
    (void)w;
    constexpr bool BF16 = std::is_same<T, tsr_bf16>::value;
    constexpr bool F16 = std::is_same<T, tsr_f16>::value;
    static_assert(BF16 || F16 || L::ID == TSR_MX_MFMA16F32, "bf16 or f16 operands");
    if constexpr (L::ID == TSR_MX_MFMA32 || L::ID == TSR_MX_MFMA16) {
#if TSR_HIP_HAS_MFMA
      if constexpr (BF16) {
        tsr_mx_v4s va, vb;
        __builtin_memcpy(&va, a, 8);
        __builtin_memcpy(&vb, b, 8);
        if constexpr (L::ID == TSR_MX_MFMA32)
          c = __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(va, vb, c, 0, 0, 0);
        else
          c = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(va, vb, c, 0, 0, 0);
      } else {
        tsr_mx_v4h va, vb;
        __builtin_memcpy(&va, a, 8);
        __builtin_memcpy(&vb, b, 8);
        if constexpr (L::ID == TSR_MX_MFMA32)
          c = __builtin_amdgcn_mfma_f32_32x32x8f16(va, vb, c, 0, 0, 0);
        else
          c = __builtin_amdgcn_mfma_f32_16x16x16f16(va, vb, c, 0, 0, 0);
      }
#endif
    } else if constexpr (L::ID == TSR_MX_MFMA16F32) {
#if TSR_HIP_HAS_MFMA
      c = __builtin_amdgcn_mfma_f32_16x16x4f32(__uint_as_float(a[0]), __uint_as_float(b[0]), c, 0,
                                               0, 0);
#endif
    } else if constexpr (L::ID == TSR_MX_WMMA11) {
#if TSR_HIP_HAS_WMMA11
      if constexpr (BF16) {
        tsr_mx_v16s va, vb;
        __builtin_memcpy(&va, a, 32);
        __builtin_memcpy(&vb, b, 32);
        c = __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32(va, vb, c);
      } else {
        tsr_mx_v16h va, vb;
        __builtin_memcpy(&va, a, 32);
        __builtin_memcpy(&vb, b, 32);
        c = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(va, vb, c);
      }
#endif
    } else {
#if TSR_HIP_HAS_WMMA12
      if constexpr (BF16) {
        tsr_mx_v8s va, vb;
        __builtin_memcpy(&va, a, 16);
        __builtin_memcpy(&vb, b, 16);
        c = __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32_gfx12(va, vb, c);
      } else {
        tsr_mx_v8h va, vb;
        __builtin_memcpy(&va, a, 16);
        __builtin_memcpy(&vb, b, 16);
        c = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(va, vb, c);
      }
#endif
    }
#endif
  }
};

#endif /* TESSERA_HIP_MATRIX_CORE_H */
