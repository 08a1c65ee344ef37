/* SPDX-License-Identifier: Apache-2.0 */
/* AVX2 + FMA GEMM micro-kernels: MR x 16 blocks (two ymm vectors of B per
 * k), MR x 2 accumulators of the 16 ymm registers. The epilogue runs on the
 * accumulators for f32 outputs (masked loads and stores for partial
 * blocks); f16/bf16 outputs, other activations and strided outputs go
 * through gemm_store_block. */
#include "gemm_kernels.h"

#if CPU_HAVE_X86_KERNELS
#include <immintrin.h>

/* Lane j of the mask is all ones when j < cols. */
static GEMM_ALWAYS_INLINE GEMM_TARGET_AVX2 __m256i columns_mask(int cols) {
  __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), lanes);
}

static GEMM_ALWAYS_INLINE GEMM_TARGET_AVX2 void store_row(const gemm_tile_out *o, int i, __m256 v0,
                                                          __m256 v1, __m256i m0, __m256i m1) {
  __m256 alpha = _mm256_set1_ps(o->alpha);
  v0 = _mm256_mul_ps(v0, alpha);
  v1 = _mm256_mul_ps(v1, alpha);
  if (o->prior) {
    const float *p = o->prior + i * o->prior_ld;
    v0 = _mm256_add_ps(v0, _mm256_maskload_ps(p, m0));
    v1 = _mm256_add_ps(v1, _mm256_maskload_ps(p + 8, m1));
  }
  if (o->c) {
    const float *p = (const float *)o->c + i * o->c_rs;
    __m256 beta = _mm256_set1_ps(o->beta);
    v0 = _mm256_fmadd_ps(beta, _mm256_maskload_ps(p, m0), v0);
    v1 = _mm256_fmadd_ps(beta, _mm256_maskload_ps(p + 8, m1), v1);
  }
  if (o->bias) {
    v0 = _mm256_add_ps(v0, _mm256_maskload_ps(o->bias, m0));
    v1 = _mm256_add_ps(v1, _mm256_maskload_ps(o->bias + 8, m1));
  }
  if (o->activation == TSR_ACT_RELU) {
    v0 = _mm256_max_ps(_mm256_setzero_ps(), v0); /* NaN passes (second operand) */
    v1 = _mm256_max_ps(_mm256_setzero_ps(), v1);
  }
  float *d = (float *)o->dst + i * o->dst_rs;
  _mm256_maskstore_ps(d, m0, v0);
  _mm256_maskstore_ps(d + 8, m1, v1);
}

#define ROWS4(X) X(0) X(1) X(2) X(3)
#define ROWS6(X) ROWS4(X) X(4) X(5)

#define DECLARE_ACC(i) __m256 acc##i##_0 = _mm256_setzero_ps(), acc##i##_1 = _mm256_setzero_ps();
#define FMA_F32(i)                                                                                 \
  {                                                                                                \
    __m256 a_i = _mm256_broadcast_ss(a + i);                                                       \
    acc##i##_0 = _mm256_fmadd_ps(a_i, b0, acc##i##_0);                                             \
    acc##i##_1 = _mm256_fmadd_ps(a_i, b1, acc##i##_1);                                             \
  }
#define STORE_ROW(i)                                                                               \
  if (i < o->rows)                                                                                 \
    store_row(o, i, acc##i##_0, acc##i##_1, m0, m1);
#define SPILL_ROW(i)                                                                               \
  _mm256_storeu_ps(block + i * 16, acc##i##_0);                                                    \
  _mm256_storeu_ps(block + i * 16 + 8, acc##i##_1);

#define DEFINE_F32_KERNEL(MR, ROWS)                                                                \
  GEMM_TARGET_AVX2 static void f32_##MR##x16(int64_t kc, const void *a_pack, const void *b_pack,   \
                                             const gemm_tile_out *o) {                             \
    const float *a = a_pack;                                                                       \
    const float *b = b_pack;                                                                       \
    ROWS(DECLARE_ACC)                                                                              \
    for (int64_t k = 0; k < kc; k++) {                                                             \
      __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);                                   \
      ROWS(FMA_F32)                                                                                \
      a += MR;                                                                                     \
      b += 16;                                                                                     \
    }                                                                                              \
    if (o->vector_store && o->dst_dtype == TSR_DTYPE_F32 &&                                        \
        (!o->c || o->c_dtype == TSR_DTYPE_F32)) {                                                  \
      __m256i m0 = columns_mask(o->cols), m1 = columns_mask(o->cols - 8);                          \
      ROWS(STORE_ROW)                                                                              \
    } else {                                                                                       \
      float block[MR * 16];                                                                        \
      ROWS(SPILL_ROW)                                                                              \
      gemm_store_block(o, block, 16);                                                              \
    }                                                                                              \
  }

DEFINE_F32_KERNEL(6, ROWS6)
DEFINE_F32_KERNEL(4, ROWS4)

const gemm_kernel cpu_gemm_avx2_kernels[] = {
    {CPU_ISA_AVX2, GEMM_FORMAT_F32, 6, 16, f32_6x16},
    {CPU_ISA_AVX2, GEMM_FORMAT_F32, 4, 16, f32_4x16},
};
const int cpu_gemm_avx2_kernel_count =
    (int)(sizeof cpu_gemm_avx2_kernels / sizeof cpu_gemm_avx2_kernels[0]);

/* F16C: 8 values at a time, strided sources gathered first. */
GEMM_TARGET_AVX2 void cpu_gemm_f16_to_f32_avx2(float *dst, const uint16_t *src, int64_t stride,
                                               int64_t count) {
  int64_t i = 0;
  if (stride == 1) {
    for (; i + 8 <= count; i += 8)
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
  } else {
    for (; i + 8 <= count; i += 8) {
      uint16_t lanes[8];
      for (int j = 0; j < 8; j++)
        lanes[j] = src[(i + j) * stride];
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)lanes)));
    }
  }
  if (i < count) {
    uint16_t lanes[8] = {0};
    float values[8];
    for (int64_t j = i; j < count; j++)
      lanes[j - i] = src[j * stride];
    _mm256_storeu_ps(values, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)lanes)));
    for (int64_t j = i; j < count; j++)
      dst[j] = values[j - i];
  }
}

#endif /* CPU_HAVE_X86_KERNELS */
