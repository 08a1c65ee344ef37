/* SPDX-License-Identifier: Apache-2.0 */
/* What the GEMM driver (gemm.c), the per-instruction-set micro-kernels
 * (gemm_avx2.c, gemm_avx512.c) and the skinny path (gemv.c) share: matrix
 * views, packed formats, the epilogue description a micro-kernel applies in
 * its store, and the kernel tables. Not installed. */
#ifndef TESSERA_CPU_GEMM_KERNELS_H
#define TESSERA_CPU_GEMM_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "configs.h"
#include "cpu_internal.h"

#define GEMM_ALWAYS_INLINE inline __attribute__((always_inline))
#if CPU_HAVE_X86_KERNELS
#define GEMM_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define GEMM_TARGET_AVX512                                                                         \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define GEMM_TARGET_AVX512_BF16                                                                    \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")))
#endif

enum {
  GEMM_MAX_MR = 16,
  GEMM_MAX_NR = 64,
};

/* A matrix view: element (row, col) at base + (row * rs + col * cs)
 * elements of dtype. */
typedef struct gemm_operand {
  char *base;
  int32_t dtype;
  int64_t rs, cs;
} gemm_operand;

static inline int64_t gemm_dtype_bytes(int32_t dtype) {
  return dtype == TSR_DTYPE_F32 ? 4 : 2;
}

static inline char *gemm_at(const gemm_operand *o, int64_t row, int64_t col) {
  return o->base + (row * o->rs + col * o->cs) * gemm_dtype_bytes(o->dtype);
}

/* Packed formats of A and B strips.
 *   F32:        A strip [k][MR] floats, B strip [k][NR] floats.
 *   BF16_PAIRS: k taken two at a time (an odd tail padded with 0): A strip
 *               [k/2][MR] pairs, B strip [k/2][NR] pairs, a pair being the
 *               bf16 of k (low half) and k + 1 (high half): vdpbf16ps. */
enum { GEMM_FORMAT_F32 = 0, GEMM_FORMAT_BF16_PAIRS = 1 };

/* Where an MR x NR block goes, and the epilogue on the way:
 *   v = alpha * block + prior + beta * c + bias;  v = act(v);  dst = v
 * for the valid rows x cols corner. `prior` (f32, unit column stride) holds
 * partial sums of earlier K slices; c, bias, act and prior are each
 * optional. `vector_store`: prior/c/dst have unit column stride and the
 * activation is none or relu, so the kernel stores with vector code;
 * otherwise it spills the block and calls gemm_store_block. */
typedef struct gemm_tile_out {
  int rows, cols;
  float alpha;
  const float *prior;
  int64_t prior_ld;
  const char *c;
  int32_t c_dtype;
  int64_t c_rs, c_cs;
  float beta;
  const float *bias;
  int32_t activation;
  char *dst;
  int32_t dst_dtype;
  int64_t dst_rs, dst_cs;
  bool vector_store;
} gemm_tile_out;

/* block[i * NR + j] = sum over k of a(i, k) * b(k, j) (packed strips, kc
 * values of k), then the epilogue into `out`. */
typedef void (*gemm_micro_fn)(int64_t kc, const void *a, const void *b, const gemm_tile_out *out);

typedef struct gemm_kernel {
  int isa; /* family: generic, avx2, avx512 */
  int format;
  int mr, nr;
  gemm_micro_fn fn;
} gemm_kernel;

/* The epilogue for a block spilled to memory (block[i * ld + j]), in
 * scalar code: any dtype, stride and activation. */
void gemm_store_block(const gemm_tile_out *out, const float *block, int64_t ld);

#if CPU_HAVE_X86_KERNELS
extern const gemm_kernel cpu_gemm_avx2_kernels[];
extern const int cpu_gemm_avx2_kernel_count;
extern const gemm_kernel cpu_gemm_avx512_kernels[];
extern const int cpu_gemm_avx512_kernel_count;

/* gemm_store_block with AVX-512 vector code where o->vector_store allows
 * (any number of columns). */
void cpu_gemm_store_block_avx512(const gemm_tile_out *o, const float *block, int64_t ld);

/* AVX-512 packing of one A strip (MR rows) / B strip (NR columns) into
 * `format` for the common layouts (unit stride along k or along the strip);
 * false when the layout is not one of them (the caller packs in C). */
bool cpu_gemm_pack_a_avx512(const gemm_operand *a, int64_t row0, int rows, int64_t k0, int64_t kc,
                            int mr, int format, void *dst);
bool cpu_gemm_pack_b_avx512(const gemm_operand *b, int64_t k0, int64_t kc, int64_t col0, int cols,
                            int nr, int format, void *dst);

/* dst[i] = src[i * stride] as f32 with F16C (f16 sources). */
void cpu_gemm_f16_to_f32_avx2(float *dst, const uint16_t *src, int64_t stride, int64_t count);
#endif

/* ---- the skinny path (gemv.c) ---- */

/* One matrix product: a batch item or a non-empty group. */
typedef struct gemm_problem {
  gemm_operand a, b, c, d; /* c.base NULL: no C term */
  const float *bias;       /* n values, or NULL */
  int64_t m, n, k;
} gemm_problem;

/* Runs `count` products sharing alpha, beta and the activation with kernels
 * of family `isa` over the pool. */
tsr_status cpu_gemv_run(const cpu_exec *exec, int isa, const gemm_problem *problems, int64_t count,
                        float alpha, float beta, int32_t activation);

#endif /* TESSERA_CPU_GEMM_KERNELS_H */
