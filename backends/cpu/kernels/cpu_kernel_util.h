/* Helpers shared by the CPU plugin's kernel files: strided row loads and
 * stores through f32, and a vectorisable f32 exp. */
#ifndef TESSERA_CPU_KERNEL_UTIL_H
#define TESSERA_CPU_KERNEL_UTIL_H

#include <stdint.h>

#include "cpu_internal.h"

/* x86-64 builds with gcc or clang also compile AVX2 versions of hot loops
 * (__attribute__((target))) and pick them at run time. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CPU_KERNELS_HAVE_AVX2 1
#else
#define CPU_KERNELS_HAVE_AVX2 0
#endif
#define ALWAYS_INLINE __attribute__((always_inline)) inline

/* dst[i] = element (offset + i * stride) of a tensor base, as f32. */
static inline void load_span(float *dst, const char *base, int32_t dtype, int64_t offset,
                             int64_t stride, int64_t count) {
  switch (dtype) {
  case TSR_DTYPE_F32: {
    const float *src = (const float *)base + offset;
    for (int64_t i = 0; i < count; i++)
      dst[i] = src[i * stride];
    break;
  }
  case TSR_DTYPE_F16: {
    const uint16_t *src = (const uint16_t *)base + offset;
    for (int64_t i = 0; i < count; i++)
      dst[i] = tsr_f16_to_f32(src[i * stride]);
    break;
  }
  case TSR_DTYPE_BF16: {
    const uint16_t *src = (const uint16_t *)base + offset;
    for (int64_t i = 0; i < count; i++)
      dst[i] = tsr_bf16_to_f32(src[i * stride]);
    break;
  }
  default:
    for (int64_t i = 0; i < count; i++)
      dst[i] = tsr_load_as_f32(base, dtype, offset + i * stride);
    break;
  }
}

static inline void store_span(char *base, int32_t dtype, int64_t offset, int64_t stride,
                              const float *src, int64_t count) {
  switch (dtype) {
  case TSR_DTYPE_F32: {
    float *dst = (float *)base + offset;
    for (int64_t i = 0; i < count; i++)
      dst[i * stride] = src[i];
    break;
  }
  case TSR_DTYPE_F16: {
    uint16_t *dst = (uint16_t *)base + offset;
    for (int64_t i = 0; i < count; i++)
      dst[i * stride] = tsr_f32_to_f16(src[i]);
    break;
  }
  case TSR_DTYPE_BF16: {
    uint16_t *dst = (uint16_t *)base + offset;
    for (int64_t i = 0; i < count; i++)
      dst[i * stride] = tsr_f32_to_bf16(src[i]);
    break;
  }
  default:
    for (int64_t i = 0; i < count; i++)
      tsr_store_from_f32(base, dtype, offset + i * stride, src[i]);
    break;
  }
}

static const float LOG2_E = 1.44269504088896341f;
/* ln 2 split in two so that n * LN2_HIGH is exact for |n| <= 128. */
static const float LN2_HIGH = 0.693145751953125f;
static const float LN2_LOW = 1.428606765330187e-6f;

/* e^x in f32 (within 1.2 ulp) in plain arithmetic so that loops over it
 * vectorise: reduction to r in [-ln2/2, ln2/2], a degree-7 Taylor polynomial,
 * 2^n from exponent bits. Below the smallest normal gives 0 (so -inf does),
 * large x gives inf, NaN stays NaN. */
static ALWAYS_INLINE float exp_f32(float x) {
  /* Special cases are found and selected with integer masks on the bit
   * pattern: branch-free integer code vectorises where float compares and
   * selects (which may trap, so stay branches) do not. */
  union {
    float f;
    uint32_t u;
  } in = {x}, safe, shifted, magic = {12582912.0f}, half_a, half_b, out;
  const uint32_t ln_flt_min = 0x42aeac50u, ln_flt_max = 0x42b17218u; /* magnitudes */
  uint32_t magnitude = in.u & 0x7fffffffu;
  uint32_t negative = 0u - (in.u >> 31); /* masks: all ones when true */
  uint32_t is_nan = 0u - (uint32_t)(magnitude > 0x7f800000u);
  uint32_t underflow = negative & (0u - (uint32_t)(magnitude > ln_flt_min)) & ~is_nan;
  uint32_t overflow = ~negative & (0u - (uint32_t)(magnitude > ln_flt_max)) & ~is_nan;
  /* |x| clamped to ln(FLT_MAX) keeps n in [-128, 128]; the masks fix what the
   * clamp changed. (A constant here would let the compiler branch.) */
  safe.u = (in.u & 0x80000000u) | (magnitude < ln_flt_max ? magnitude : ln_flt_max);
  /* magic = 1.5 * 2^23: adding it rounds to an integer n, kept in the low bits. */
  shifted.f = safe.f * LOG2_E + magic.f;
  float n = shifted.f - magic.f;
  float r = safe.f - n * LN2_HIGH;
  r = r - n * LN2_LOW;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  /* 2^n in two halves so that each is a normal float. */
  uint32_t biased = shifted.u - magic.u + 128u; /* n + 128, in [0, 256] */
  uint32_t first = biased >> 1;
  half_a.u = (first + 63u) << 23;
  half_b.u = (biased - first + 63u) << 23;
  out.f = p * half_a.f * half_b.f;
  out.u &= ~underflow;
  out.u = (out.u & ~overflow) | (0x7f800000u & overflow);
  out.u = (out.u & ~is_nan) | (in.u & is_nan);
  return out.f;
}

#endif /* TESSERA_CPU_KERNEL_UTIL_H */
