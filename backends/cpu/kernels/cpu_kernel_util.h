/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the CPU plugin's kernel files: the vector level a kernel
 * runs at, strided row loads and stores through f32 (plain C and, for unit
 * stride, AVX2 and AVX-512 versions with streaming stores), and exp in plain
 * C (vectorisable), AVX2 and AVX-512. */
#ifndef TESSERA_CPU_KERNEL_UTIL_H
#define TESSERA_CPU_KERNEL_UTIL_H

#include <math.h>
#include <stdint.h>

#include "configs.h"
#include "cpu_internal.h"

/* x86-64 builds with gcc or clang also compile AVX2 and AVX-512 versions of
 * the hot loops (__attribute__((target))) and pick one at run time. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CPU_KERNELS_HAVE_AVX2 1
#include <immintrin.h>
#else
#define CPU_KERNELS_HAVE_AVX2 0
#endif
#define ALWAYS_INLINE __attribute__((always_inline)) inline

#if CPU_KERNELS_HAVE_AVX2
#define TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#endif

/* The vector width the fused kernels run at. */
typedef enum kernel_level { KERNEL_GENERIC = 0, KERNEL_AVX2 = 1, KERNEL_AVX512 = 2 } kernel_level;

/* Declares a kernel family's tables, cpu_<family>_kernels_generic, _avx2 and
 * _avx512 (the vector ones only in builds that have them), and
 * select_kernels(level), which picks the one of a level. */
#if CPU_KERNELS_HAVE_AVX2
#define CPU_KERNEL_TABLES(type, family)                                                            \
  extern const type cpu_##family##_kernels_generic, cpu_##family##_kernels_avx2,                   \
      cpu_##family##_kernels_avx512;                                                               \
  static inline const type *select_kernels(kernel_level level) {                                   \
    return level == KERNEL_AVX512 ? &cpu_##family##_kernels_avx512                                 \
           : level == KERNEL_AVX2 ? &cpu_##family##_kernels_avx2                                   \
                                  : &cpu_##family##_kernels_generic;                               \
  }
#else
#define CPU_KERNEL_TABLES(type, family)                                                            \
  extern const type cpu_##family##_kernels_generic;                                                \
  static inline const type *select_kernels(kernel_level level) {                                   \
    (void)level;                                                                                   \
    return &cpu_##family##_kernels_generic;                                                        \
  }
#endif

/* Follows the plugin's instruction-set level (cpu_isa_active(), which
 * TESSERA_CPU_ISA may lower; the AVX2 level includes FMA and F16C, the
 * AVX-512 one F/BW/VL/DQ); asked per call, as a test may change it. */
static inline kernel_level cpu_kernel_level(void) {
#if CPU_KERNELS_HAVE_AVX2
  cpu_isa isa = cpu_isa_active();
  if (cpu_isa_includes(isa, CPU_ISA_AVX512))
    return KERNEL_AVX512;
  if (cpu_isa_includes(isa, CPU_ISA_AVX2))
    return KERNEL_AVX2;
#endif
  return KERNEL_GENERIC;
}

/* Outputs at least this large are written with non-temporal (streaming)
 * stores: they will not be read back from the cache, and streaming skips
 * reading each destination line before it is written (a third of a copy's
 * traffic). Smaller outputs stay in the cache for the op that reads them
 * next: 2 MiB instead was tried and taken back (docs/PERFORMANCE.md): a
 * rmsnorm of 4 MiB called again and again went from 0.5 of the one-thread
 * time to 1.0, its data no longer in L3. A constant, as the cache sizes
 * reported inside virtual machines cannot be trusted (one here reports a
 * 320 MiB L3 for a 32 MiB one). */
enum { STREAM_MIN_BYTES = 8 << 20 };

static inline int should_stream(int64_t elements, int32_t dtype) {
  int64_t element_bytes = dtype == TSR_DTYPE_F32 ? 4 : 2;
  return elements * element_bytes >= STREAM_MIN_BYTES;
}

/* ---- plain C: strided spans, any dtype ---- */

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
/* 1.5 * 2^23: adding it rounds a float of magnitude < 2^22 to an integer. */
static const float ROUND_MAGIC = 12582912.0f;

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
  } in = {x}, safe, shifted, magic = {ROUND_MAGIC}, half_a, half_b, out;
  const uint32_t ln_flt_min = 0x42aeac50u, ln_flt_max = 0x42b17218u; /* magnitudes */
  uint32_t magnitude = in.u & 0x7fffffffu;
  uint32_t negative = 0u - (in.u >> 31); /* masks: all ones when true */
  uint32_t is_nan = 0u - (uint32_t)(magnitude > 0x7f800000u);
  uint32_t underflow = negative & (0u - (uint32_t)(magnitude > ln_flt_min)) & ~is_nan;
  uint32_t overflow = ~negative & (0u - (uint32_t)(magnitude > ln_flt_max)) & ~is_nan;
  /* |x| clamped to ln(FLT_MAX) keeps n in [-128, 128]; the masks fix what the
   * clamp changed. (A constant here would let the compiler branch.) */
  safe.u = (in.u & 0x80000000u) | (magnitude < ln_flt_max ? magnitude : ln_flt_max);
  /* The magic constant rounds to an integer n, kept in the low bits. */
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

/* Software prefetch for a pass that reads a row from memory: at element i
 * of its row the pass prefetches element i of each stream in `rows` (up to
 * two: x and a residual), for i < limit. The streams start some way ahead
 * of the current row (see plan_ahead), so the row's later passes and the
 * next row's first pass find their data in cache. A streaming loop that
 * also computes reads memory slower than a copy unless it prefetches; which
 * hint and distance win depends on the core: on Zen 4 PREFETCHT2 (into L2)
 * 4-32 KiB ahead, T0 being slower; on Zen 5 T0 4 KiB ahead, where T2 reads
 * ~15% slower (scratch rr.c: the pipelined row loop at 63-64 GB/s with T0
 * against 53-56 with T2 and 62-69 for a plain copy). The machine this is
 * judged on now is the Zen 5 one. */
typedef struct row_ahead {
  const char *rows[2];
  int count;
  int element_bytes;
  int64_t limit;
} row_ahead;

static ALWAYS_INLINE void prefetch_ahead(const row_ahead *ahead, int64_t i) {
#if CPU_KERNELS_HAVE_AVX2
  if (ahead && i < ahead->limit)
    for (int k = 0; k < ahead->count; k++)
      _mm_prefetch(ahead->rows[k] + i * ahead->element_bytes, _MM_HINT_T0);
#else
  (void)ahead;
  (void)i;
#endif
}

/* How far ahead a row pass prefetches: a row when rows are shorter. */
enum { PREFETCH_AHEAD_BYTES = 4 << 10 };

/* Prefetch plan for the first pass over row `row` of rows [.., end) that a
 * worker owns, for tensors a and b (b NULL or absent: only a; a and b share
 * a dtype and a shape). Dense rows (each starting where the last ended) form
 * one stream, prefetched PREFETCH_AHEAD_BYTES or a row ahead, whichever is
 * less; otherwise the next row is prefetched. NULL when nothing is. */
static inline const row_ahead *plan_ahead(row_ahead *ahead, const tsr_plugin_tensor *a,
                                          const tsr_plugin_tensor *b, int64_t row, int64_t end) {
  const int64_t width = a->shape[a->rank - 1];
  ahead->count = 0;
  ahead->element_bytes = a->dtype == TSR_DTYPE_F32 ? 4 : 2;
  ahead->limit = width;
  if (row + 1 >= end)
    return NULL;
  const tsr_plugin_tensor *tensors[2] = {a, b};
  int64_t distance = PREFETCH_AHEAD_BYTES / ahead->element_bytes;
  for (int k = 0; k < 2; k++) {
    const tsr_plugin_tensor *t = tensors[k];
    if (t && t->buffer && t->strides[t->rank - 1] == 1) {
      int64_t here = tsr_plugin_row_offset(t, row), next = tsr_plugin_row_offset(t, row + 1);
      if (next - here != width || distance > width)
        distance = width;
    }
  }
  for (int k = 0; k < 2; k++) {
    const tsr_plugin_tensor *t = tensors[k];
    if (t && t->buffer && t->strides[t->rank - 1] == 1) {
      int64_t here = tsr_plugin_row_offset(t, row), next = tsr_plugin_row_offset(t, row + 1);
      int64_t start = distance == width ? next : here + distance;
      ahead->rows[ahead->count++] = (const char *)cpu_tensor_base(t) + start * ahead->element_bytes;
    }
  }
  return ahead->count > 0 ? ahead : NULL;
}

#if CPU_KERNELS_HAVE_AVX2

/* ---- AVX2 ---- */

/* exp_f32 on 8 lanes. */
TARGET_AVX2 static ALWAYS_INLINE __m256 exp_avx2(__m256 x) {
  const __m256 magic = _mm256_set1_ps(ROUND_MAGIC);
  __m256 clamped = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-88.0f)), _mm256_set1_ps(89.0f));
  __m256 shifted = _mm256_fmadd_ps(clamped, _mm256_set1_ps(LOG2_E), magic);
  __m256 n = _mm256_sub_ps(shifted, magic);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_HIGH), clamped);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_LOW), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  __m256i biased =
      _mm256_add_epi32(_mm256_sub_epi32(_mm256_castps_si256(shifted), _mm256_castps_si256(magic)),
                       _mm256_set1_epi32(128));
  __m256i first = _mm256_srli_epi32(biased, 1);
  __m256i bias = _mm256_set1_epi32(63);
  __m256 half_a = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(first, bias), 23));
  __m256 half_b = _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(biased, first), bias), 23));
  __m256 result = _mm256_mul_ps(_mm256_mul_ps(p, half_a), half_b);
  /* The clamp dropped NaN and the range ends; the blends restore them. */
  __m256 underflow = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3365448f), _CMP_LT_OQ);
  __m256 overflow = _mm256_cmp_ps(x, _mm256_set1_ps(88.7228394f), _CMP_GT_OQ);
  __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  result = _mm256_andnot_ps(underflow, result);
  result = _mm256_blendv_ps(result, _mm256_set1_ps(INFINITY), overflow);
  return _mm256_blendv_ps(result, x, nan);
}

/* Lane mask of the first `count` (0..8) lanes, for maskload/maskstore. */
TARGET_AVX2 static ALWAYS_INLINE __m256i lanes_avx2(int64_t count) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)count),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Loads `count` (1..8) floats; whole vectors when count is 8. */
TARGET_AVX2 static ALWAYS_INLINE __m256 load_avx2(const float *src, int64_t count) {
  return count >= 8 ? _mm256_loadu_ps(src) : _mm256_maskload_ps(src, lanes_avx2(count));
}

/* y[i] = block(context, i, count) for i in steps of 8 (count = 8, fewer at
 * the end); streaming stores (the caller fences) after a head that aligns y
 * to 32 bytes. Inlined with the block, so the block's loads of 8 fold into
 * plain loads. */
typedef __m256 (*block_avx2_fn)(void *context, int64_t i, int64_t count);
TARGET_AVX2 static ALWAYS_INLINE void map_avx2(float *y, int64_t n, int stream, block_avx2_fn block,
                                               void *context) {
  int64_t i = 0;
  if (stream) {
    int64_t head = (int64_t)((32u - ((uintptr_t)y & 31u)) & 31u) / 4;
    head = head < n ? head : n;
    if (head > 0)
      _mm256_maskstore_ps(y, lanes_avx2(head), block(context, 0, head));
    for (i = head; i + 8 <= n; i += 8)
      _mm256_stream_ps(y + i, block(context, i, 8));
  } else {
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(y + i, block(context, i, 8));
  }
  if (i < n)
    _mm256_maskstore_ps(y + i, lanes_avx2(n - i), block(context, i, n - i));
}

/* Stores 8 floats: a streaming store when asked for and p is 32-byte
 * aligned, else an ordinary one (the caller fences). */
TARGET_AVX2 static ALWAYS_INLINE void store8_avx2(float *p, __m256 v, int stream) {
  if (stream && ((uintptr_t)p & 31u) == 0)
    _mm256_stream_ps(p, v);
  else
    _mm256_storeu_ps(p, v);
}

/* Horizontal reductions. */
TARGET_AVX2 static ALWAYS_INLINE float max_lanes_avx2(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

TARGET_AVX2 static ALWAYS_INLINE double sum_lanes_pd_avx2(__m256d v) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
  return _mm_cvtsd_f64(s);
}

/* Adds the 8 lanes of v, widened to double, into two accumulators. */
TARGET_AVX2 static ALWAYS_INLINE void accumulate_pd_avx2(__m256d *low, __m256d *high, __m256 v) {
  *low = _mm256_add_pd(*low, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  *high = _mm256_add_pd(*high, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

/* 8 f16 or bf16 values (unit stride) as f32. */
TARGET_AVX2 static ALWAYS_INLINE __m256 load8_half_avx2(const uint16_t *src, int32_t dtype) {
  __m128i raw = _mm_loadu_si128((const __m128i *)src);
  if (dtype == TSR_DTYPE_F16)
    return _mm256_cvtph_ps(raw);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
}

/* f32 to bf16 bits (round to nearest even, NaN kept quiet) in 32-bit lanes. */
TARGET_AVX2 static ALWAYS_INLINE __m256i bf16_bits_avx2(__m256 v) {
  __m256i x = _mm256_castps_si256(v);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb), 16);
  __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
  __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  return _mm256_blendv_epi8(rounded, quiet, _mm256_castps_si256(nan));
}

/* 8 f32 as f16 or bf16 bits. */
TARGET_AVX2 static ALWAYS_INLINE __m128i to_half8_avx2(__m256 v, int32_t dtype) {
  if (dtype == TSR_DTYPE_F16)
    return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256i bits = bf16_bits_avx2(v);
  return _mm_packus_epi32(_mm256_castsi256_si128(bits), _mm256_extracti128_si256(bits, 1));
}

/* 16 f32 as bf16 bits by vcvtneps2bf16 (AVX512_BF16; the caller checks
 * cpu_isa_includes(cpu_isa_active(), CPU_ISA_AVX512_BF16)): one instruction
 * for to_half16_avx512's nine, the same rounding to nearest even and quiet
 * NaN, but f32 subnormals (below 1.2e-38) become zero. Inline assembly, so
 * the loops that use it need no target of their own. */
TARGET_AVX512 static ALWAYS_INLINE __m256i to_bf16_hw16_avx512(__m512 v) {
  __m256i h;
  __asm__("vcvtneps2bf16 %1, %0" : "=v"(h) : "v"(v));
  return h;
}

/* dst[0..count) = unit-stride elements of src (f32, f16 or bf16) as f32. */
TARGET_AVX2 static inline void load_f32_avx2(float *dst, const void *src, int32_t dtype,
                                             int64_t count, const row_ahead *ahead) {
  int64_t i = 0;
  if (dtype == TSR_DTYPE_F32) {
    const float *s = src;
    for (; i + 8 <= count; i += 8) {
      prefetch_ahead(ahead, i);
      _mm256_storeu_ps(dst + i, _mm256_loadu_ps(s + i));
    }
    for (; i < count; i++)
      dst[i] = s[i];
    return;
  }
  const uint16_t *s = src;
  for (; i + 8 <= count; i += 8) {
    prefetch_ahead(ahead, i);
    _mm256_storeu_ps(dst + i, load8_half_avx2(s + i, dtype));
  }
  load_span(dst + i, (const char *)src, dtype, i, 1, count - i);
}

/* Unit-stride dst[0..count) = src as dtype; `stream` writes whole aligned
 * vectors with non-temporal stores (the caller fences). */
TARGET_AVX2 static inline void store_f32_avx2(void *dst, int32_t dtype, const float *src,
                                              int64_t count, int stream) {
  int64_t i = 0;
  if (dtype == TSR_DTYPE_F32) {
    float *d = dst;
    if (stream) {
      for (; i < count && ((uintptr_t)(d + i) & 31u) != 0; i++)
        d[i] = src[i];
      for (; i + 8 <= count; i += 8)
        _mm256_stream_ps(d + i, _mm256_loadu_ps(src + i));
    } else {
      for (; i + 8 <= count; i += 8)
        _mm256_storeu_ps(d + i, _mm256_loadu_ps(src + i));
    }
    for (; i < count; i++)
      d[i] = src[i];
    return;
  }
  uint16_t *d = dst;
  if (stream) {
    for (; i < count && ((uintptr_t)(d + i) & 15u) != 0; i++)
      store_span((char *)dst, dtype, i, 1, src + i, 1);
    for (; i + 8 <= count; i += 8)
      _mm_stream_si128((__m128i *)(d + i), to_half8_avx2(_mm256_loadu_ps(src + i), dtype));
  } else {
    for (; i + 8 <= count; i += 8)
      _mm_storeu_si128((__m128i *)(d + i), to_half8_avx2(_mm256_loadu_ps(src + i), dtype));
  }
  store_span((char *)dst, dtype, i, 1, src + i, count - i);
}

/* ---- AVX-512 ---- */

/* e^x on 16 lanes: 2^n * p(r) with vscalefps, which gives inf, 0 and
 * subnormals at the ends of the range without blends. NaN passes through
 * the clamp (max/min return their second operand when either is NaN). */
TARGET_AVX512 static ALWAYS_INLINE __m512 exp_avx512(__m512 x) {
  __m512 clamped = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(clamped, _mm512_set1_ps(LOG2_E)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_HIGH), clamped);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_LOW), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

/* A degree-5 minimax polynomial for e^r on [-ln2/2, ln2/2], highest power
 * first (relative error 7.5e-8 from a Remez fit; 1.4e-7 with the
 * coefficients rounded to f32). */
static const float EXP5_COEFFICIENTS[6] = {0.008297654800117016f, 0.04191538318991661f,
                                           0.16667574644088745f,  0.49998894333839417f,
                                           0.9999997019767761f,   1.0000001192092896f};
/* ln 2 as one constant: its rounding error times |n| <= 150 stays under 3e-7
 * of the result, under 4e-8 where |x| < 14 (where a row's norm lives). */
static const float LN2_ONE = 0.693147180559945f;

/* e^x for x <= 0 (or NaN, which stays NaN), four vectors step by step: a
 * softmax's shifted scores. One exp is a chain of ~10 dependent
 * instructions and the core keeps too few in flight when the chains come one
 * after another (softmax measured ~18 cycles a vector on Zen 5); four side by
 * side give the scheduler independent work. Cheaper than exp_avx512 where the
 * range allows: no upper clamp, LN2_ONE, EXP5_COEFFICIENTS. -inf gives 0
 * through the lower clamp. */
TARGET_AVX512 static ALWAYS_INLINE void exp4_nonpositive_avx512(__m512 v[4]) {
  __m512 n[4], r[4], p[4];
  for (int u = 0; u < 4; u++) {
    __m512 clamped = _mm512_max_ps(_mm512_set1_ps(-104.0f), v[u]);
    n[u] = _mm512_roundscale_ps(_mm512_mul_ps(clamped, _mm512_set1_ps(LOG2_E)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r[u] = _mm512_fnmadd_ps(n[u], _mm512_set1_ps(LN2_ONE), clamped);
    p[u] = _mm512_set1_ps(EXP5_COEFFICIENTS[0]);
  }
  for (int c = 1; c < 6; c++)
    for (int u = 0; u < 4; u++)
      p[u] = _mm512_fmadd_ps(p[u], r[u], _mm512_set1_ps(EXP5_COEFFICIENTS[c]));
  for (int u = 0; u < 4; u++)
    v[u] = _mm512_scalef_ps(p[u], n[u]);
}

/* x * sigmoid(x) = x / (1 + e^-x), to a few ulp, for activations: e^-x as in
 * exp4_nonpositive_avx512, clamped to at most e^87 so that 1 + e^-x stays
 * finite, and the division as a reciprocal estimate with one Newton step
 * (relative error ~2^-28 before rounding), 3 cheap instructions where vdivps
 * was the costliest of the loop. Below x = -87 (|silu| < 6e-37) the result
 * is 0, -inf included; NaN stays NaN. */
TARGET_AVX512 static ALWAYS_INLINE __m512 silu_fast_avx512(__m512 x) {
  __m512 clamped =
      _mm512_min_ps(_mm512_set1_ps(87.0f),
                    _mm512_max_ps(_mm512_set1_ps(-104.0f), _mm512_sub_ps(_mm512_setzero_ps(), x)));
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(clamped, _mm512_set1_ps(LOG2_E)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_ONE), clamped);
  __m512 p = _mm512_set1_ps(EXP5_COEFFICIENTS[0]);
  for (int c = 1; c < 6; c++)
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP5_COEFFICIENTS[c]));
  __m512 d = _mm512_add_ps(_mm512_set1_ps(1.0f), _mm512_scalef_ps(p, n));
  __m512 inverse = _mm512_rcp14_ps(d);
  inverse = _mm512_mul_ps(inverse, _mm512_fnmadd_ps(d, inverse, _mm512_set1_ps(2.0f)));
  __mmask16 in_range = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_NLT_UQ);
  return _mm512_maskz_mul_ps(in_range, x, inverse);
}

static ALWAYS_INLINE __mmask16 lanes_avx512(int64_t count) {
  return (__mmask16)(count >= 16 ? 0xffffu : (1u << count) - 1u);
}

/* y[i] = block(context, i, mask) for i in steps of 16 (mask: the lanes that
 * exist); streaming stores (the caller fences) after a head that aligns y to
 * 64 bytes. Inlined with the block, so full-mask loads fold into plain ones. */
typedef __m512 (*block_avx512_fn)(void *context, int64_t i, __mmask16 mask);
TARGET_AVX512 static ALWAYS_INLINE void map_avx512(float *y, int64_t n, int stream,
                                                   block_avx512_fn block, void *context) {
  int64_t i = 0;
  if (stream) {
    int64_t head = (int64_t)((64u - ((uintptr_t)y & 63u)) & 63u) / 4;
    head = head < n ? head : n;
    if (head > 0) {
      __mmask16 m = lanes_avx512(head);
      _mm512_mask_storeu_ps(y, m, block(context, 0, m));
    }
    for (i = head; i + 16 <= n; i += 16)
      _mm512_stream_ps(y + i, block(context, i, 0xffff));
  } else {
    for (; i + 16 <= n; i += 16)
      _mm512_storeu_ps(y + i, block(context, i, 0xffff));
  }
  if (i < n) {
    __mmask16 m = lanes_avx512(n - i);
    _mm512_mask_storeu_ps(y + i, m, block(context, i, m));
  }
}

/* Stores the lanes of `mask`: a streaming store when asked for, the mask is
 * full and p is 64-byte aligned, else a masked one (the caller fences). */
TARGET_AVX512 static ALWAYS_INLINE void store16_avx512(float *p, __m512 v, __mmask16 mask,
                                                       int stream) {
  if (stream && mask == 0xffff && ((uintptr_t)p & 63u) == 0)
    _mm512_stream_ps(p, v);
  else
    _mm512_mask_storeu_ps(p, mask, v);
}

/* Adds the 16 lanes of v, widened to double, into two accumulators. */
TARGET_AVX512 static ALWAYS_INLINE void accumulate_pd_avx512(__m512d *low, __m512d *high,
                                                             __m512 v) {
  *low = _mm512_add_pd(*low, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
  *high = _mm512_add_pd(
      *high, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
}

/* Adds the squares of the 16 lanes of v, widened to double, into two
 * accumulators. */
TARGET_AVX512 static ALWAYS_INLINE void accumulate_squares_pd_avx512(__m512d *low, __m512d *high,
                                                                     __m512 v) {
  __m512d d0 = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
  __m512d d1 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  *low = _mm512_fmadd_pd(d0, d0, *low);
  *high = _mm512_fmadd_pd(d1, d1, *high);
}

/* Up to 16 f16 or bf16 values (unit stride, the lanes in `mask`) as f32. */
TARGET_AVX512 static ALWAYS_INLINE __m512 load16_half_avx512(const uint16_t *src, int32_t dtype,
                                                             __mmask16 mask) {
  __m256i raw = _mm256_maskz_loadu_epi16(mask, src);
  if (dtype == TSR_DTYPE_F16)
    return _mm512_cvtph_ps(raw);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
}

/* 16 f32 as f16 or bf16 bits (bf16: round to nearest even, NaN kept quiet). */
TARGET_AVX512 static ALWAYS_INLINE __m256i to_half16_avx512(__m512 v, int32_t dtype) {
  if (dtype == TSR_DTYPE_F16)
    return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512i x = _mm512_castps_si512(v);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb), 16);
  __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
}

/* dst[0..count) = unit-stride elements of src (f32, f16 or bf16) as f32. */
TARGET_AVX512 static inline void load_f32_avx512(float *dst, const void *src, int32_t dtype,
                                                 int64_t count, const row_ahead *ahead) {
  if (dtype == TSR_DTYPE_F32) {
    const float *s = src;
    for (int64_t i = 0; i < count; i += 16) {
      prefetch_ahead(ahead, i);
      __mmask16 m = lanes_avx512(count - i);
      _mm512_mask_storeu_ps(dst + i, m, _mm512_maskz_loadu_ps(m, s + i));
    }
    return;
  }
  const uint16_t *s = src;
  for (int64_t i = 0; i < count; i += 16) {
    prefetch_ahead(ahead, i);
    __mmask16 m = lanes_avx512(count - i);
    _mm512_mask_storeu_ps(dst + i, m, load16_half_avx512(s + i, dtype, m));
  }
}

/* Unit-stride dst[0..count) = src as dtype; `stream` writes whole aligned
 * vectors with non-temporal stores (the caller fences). */
TARGET_AVX512 static inline void store_f32_avx512(void *dst, int32_t dtype, const float *src,
                                                  int64_t count, int stream) {
  int64_t i = 0;
  if (dtype == TSR_DTYPE_F32) {
    float *d = dst;
    if (stream) {
      int64_t head = (int64_t)((64u - ((uintptr_t)d & 63u)) & 63u) / 4;
      head = head < count ? head : count;
      __mmask16 m = lanes_avx512(head);
      _mm512_mask_storeu_ps(d, m, _mm512_maskz_loadu_ps(m, src));
      for (i = head; i + 16 <= count; i += 16)
        _mm512_stream_ps(d + i, _mm512_loadu_ps(src + i));
    }
    for (; i < count; i += 16) {
      __mmask16 m = lanes_avx512(count - i);
      _mm512_mask_storeu_ps(d + i, m, _mm512_maskz_loadu_ps(m, src + i));
    }
    return;
  }
  uint16_t *d = dst;
  if (stream) {
    int64_t head = (int64_t)((32u - ((uintptr_t)d & 31u)) & 31u) / 2;
    head = head < count ? head : count;
    __mmask16 m = lanes_avx512(head);
    _mm256_mask_storeu_epi16(d, m, to_half16_avx512(_mm512_maskz_loadu_ps(m, src), dtype));
    for (i = head; i + 16 <= count; i += 16)
      _mm256_stream_si256((__m256i *)(d + i), to_half16_avx512(_mm512_loadu_ps(src + i), dtype));
  }
  for (; i < count; i += 16) {
    __mmask16 m = lanes_avx512(count - i);
    _mm256_mask_storeu_epi16(d + i, m, to_half16_avx512(_mm512_maskz_loadu_ps(m, src + i), dtype));
  }
}

#endif /* CPU_KERNELS_HAVE_AVX2 */

/* Row `count` elements `stride` apart from `offset` of a tensor base into f32
 * dst, with the level's vector code (and `ahead`'s prefetches) for unit
 * stride. */
static inline void load_row(kernel_level level, float *dst, const char *base, int32_t dtype,
                            int64_t offset, int64_t stride, int64_t count, const row_ahead *ahead) {
  size_t element = dtype == TSR_DTYPE_F32 ? 4 : 2;
#if CPU_KERNELS_HAVE_AVX2
  if (stride == 1 && level == KERNEL_AVX512) {
    load_f32_avx512(dst, base + (size_t)offset * element, dtype, count, ahead);
    return;
  }
  if (stride == 1 && level == KERNEL_AVX2) {
    load_f32_avx2(dst, base + (size_t)offset * element, dtype, count, ahead);
    return;
  }
#endif
  (void)level;
  (void)element;
  (void)ahead;
  load_span(dst, base, dtype, offset, stride, count);
}

/* The inverse of load_row; `stream` as for store_f32_avx512 (the caller
 * issues the fence). */
static inline void store_row(kernel_level level, char *base, int32_t dtype, int64_t offset,
                             int64_t stride, const float *src, int64_t count, int stream) {
  size_t element = dtype == TSR_DTYPE_F32 ? 4 : 2;
#if CPU_KERNELS_HAVE_AVX2
  if (stride == 1 && level == KERNEL_AVX512) {
    store_f32_avx512(base + (size_t)offset * element, dtype, src, count, stream);
    return;
  }
  if (stride == 1 && level == KERNEL_AVX2) {
    store_f32_avx2(base + (size_t)offset * element, dtype, src, count, stream);
    return;
  }
#endif
  (void)level;
  (void)element;
  (void)stream;
  store_span(base, dtype, offset, stride, src, count);
}

/* Orders this thread's non-temporal stores before whatever signals that the
 * work is done. */
static inline void stream_fence(kernel_level level) {
#if CPU_KERNELS_HAVE_AVX2
  if (level != KERNEL_GENERIC)
    _mm_sfence();
#endif
  (void)level;
}

#endif /* TESSERA_CPU_KERNEL_UTIL_H */
