/* SPDX-License-Identifier: Apache-2.0 */
/* What the attention files share (attention.c: the plain C steps and the
 * block loop; attention_avx2.c, attention_avx512.c: the vector steps): the
 * online-softmax, rescale and transpose steps of one vector level. */
#ifndef TESSERA_CPU_ATTENTION_H
#define TESSERA_CPU_ATTENTION_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "configs.h"
#include "cpu_internal.h"
#include "cpu_kernel_util.h"

/* Which keys of a tile a query row sees: [first, last] (empty: first > last). */
typedef struct visible_keys {
  int32_t first, last;
} visible_keys;

/* One online-softmax step for `rows` rows of s (row r at s + r * ld, `keys`
 * scores): row r keeps keys[r] (all keys when `all_visible`), turns its
 * scores into p = e^(s - max) in place (0 for the keys it does not see), and
 * updates its running max and sum; correction[r] receives the factor its
 * accumulated output must be multiplied by. An infinite score it sees (from
 * an infinity in q or k: the API masks no key with -inf) becomes p = NaN,
 * which makes the row's sum, output and lse NaN, as the reference has it;
 * e^(-inf) = 0 would hide it. */
typedef void (*softmax_rows_fn)(float *s, int64_t ld, int64_t rows, int64_t keys,
                                const visible_keys *visible, int all_visible, float *row_max,
                                float *row_sum, float *correction);
/* o[r][c] *= correction[r] for c < dim, rows `ld` apart. */
typedef void (*rescale_rows_fn)(float *o, int64_t ld, int64_t rows, int64_t dim,
                                const float *correction);

/* dst[d * dst_ld + j] = src[j * src_ld + d] for j < keys, d < dim: a key
 * tile turned so that the product S = Q K^T reads it row by row. */
typedef void (*transpose_fn)(float *dst, int64_t dst_ld, const float *src, int64_t src_ld,
                             int64_t keys, int64_t dim);

typedef struct attention_kernels {
  softmax_rows_fn softmax_rows;
  rescale_rows_fn rescale_rows;
  transpose_fn transpose;
} attention_kernels;

/* A row that has seen no finite score yet has nothing to rescale; its
 * exponentials are taken against 0 (e^-inf = 0). */
static float safe_shift(float max) {
  return max == -INFINITY ? 0.0f : max;
}

/* The plain C transpose, which the vector ones finish with. */
static inline void transpose_generic(float *dst, int64_t dst_ld, const float *src, int64_t src_ld,
                                     int64_t keys, int64_t dim) {
  for (int64_t j = 0; j < keys; j++)
    for (int64_t d = 0; d < dim; d++)
      dst[d * dst_ld + j] = src[j * src_ld + d];
}

/* The tables of each level (attention.c, attention_avx2.c,
 * attention_avx512.c) and select_kernels. */
CPU_KERNEL_TABLES(attention_kernels, attention)

#endif /* TESSERA_CPU_ATTENTION_H */
