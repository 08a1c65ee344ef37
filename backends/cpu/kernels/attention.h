/* SPDX-License-Identifier: Apache-2.0 */
/* What the attention files share (attention.c: the plain C steps and the
 * tile loop; attention_avx2.c, attention_avx512.c: the vector steps;
 * attention_seq.c: the serving geometry and its faults; attention_decode*.c:
 * the split-KV decode path): the online-softmax, rescale, transpose and
 * softcap steps of one vector level, and where each sequence's rows lie. */
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

/* s = cap * tanh(s / cap) for `keys` scores of `rows` rows: the softcap,
 * applied to the scaled scores before masking. A score that is not finite
 * becomes NaN (tanh would turn an infinity into +-cap and hide it; the
 * reference poisons the row). */
typedef void (*softcap_rows_fn)(float *s, int64_t ld, int64_t rows, int64_t keys, float cap);

typedef struct attention_kernels {
  softmax_rows_fn softmax_rows;
  rescale_rows_fn rescale_rows;
  transpose_fn transpose;
  softcap_rows_fn softcap_rows;
} attention_kernels;

/* A row that has seen no finite score yet has nothing to rescale; its
 * exponentials are taken against 0 (e^-inf = 0). */
static inline float safe_shift(float max) {
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

/* ---- where sequences lie (attention_seq.c) ---- */

/* One problem's layouts and every sequence's geometry, read once from the
 * host copies of the index tensors (tsr_plugin_attention_seq_of decides
 * each sequence, faults included). A dense problem is the same with B
 * sequences of Sq queries and Skv keys. */
typedef struct attention_geometry {
  const tsr_attention_args *args;
  int packed_q, packed_kv, paged;
  int64_t batch, q_heads, kv_heads, group, head_dim;
  int64_t q_dim_stride, k_dim_stride, v_dim_stride, o_dim_stride; /* elements */
  int64_t block_size;                                             /* paged: keys per block */
  const int32_t *block_table;                                     /* paged */
  int64_t table_row_stride, table_column_stride;
  tsr_plugin_attention_seq *seqs; /* batch entries; seqs[b].fault >= 0: not computed */
  int64_t longest_q, longest_kv;  /* the most query rows and keys of a sequence computed */
  float softcap;                  /* 0: none */
} attention_geometry;

/* Fills `g` and records the faults (cpu_fault_record, the smallest b of each
 * kind), writing NaN into o and lse of each sequence at fault whose query
 * rows can be located. TSR_ERROR_OUT_OF_MEMORY (with exec's error) when the
 * sequence table cannot be allocated. */
tsr_status attention_geometry_init(attention_geometry *g, const cpu_exec *exec,
                                   const tsr_attention_args *args);
void attention_geometry_free(attention_geometry *g);

/* Element offset of query row i of head `head` of sequence b in q or o. */
static inline int64_t attention_q_offset(const attention_geometry *g, const tsr_plugin_tensor *t,
                                         int64_t b, int64_t head, int64_t i) {
  if (g->packed_q)
    return (g->seqs[b].q_first + i) * t->strides[0] + head * t->strides[1];
  return b * t->strides[0] + i * t->strides[1] + head * t->strides[2];
}

/* Element offset of lse's entry for query row i of head `head` of sequence
 * b: [B, Hq, Sq] dense, [Hq, total_q] packed. */
static inline int64_t attention_lse_offset(const attention_geometry *g,
                                           const tsr_plugin_tensor *lse, int64_t b, int64_t head,
                                           int64_t i) {
  if (g->packed_q)
    return head * lse->strides[0] + (g->seqs[b].q_first + i) * lse->strides[1];
  return b * lse->strides[0] + head * lse->strides[1] + i * lse->strides[2];
}

/* Element offset of key row j of kv head `kv_head` of sequence b in k or v
 * (which share shapes; strides may differ). */
static inline int64_t attention_kv_offset(const attention_geometry *g, const tsr_plugin_tensor *t,
                                          int64_t b, int64_t kv_head, int64_t j) {
  if (g->paged) {
    int64_t block =
        g->block_table[b * g->table_row_stride + (j / g->block_size) * g->table_column_stride];
    return block * t->strides[0] + (j % g->block_size) * t->strides[1] + kv_head * t->strides[2];
  }
  if (g->packed_kv)
    return (g->seqs[b].kv_first + j) * t->strides[0] + kv_head * t->strides[1];
  return b * t->strides[0] + j * t->strides[1] + kv_head * t->strides[2];
}

/* How many keys from j on lie at one stride (the rest of j's block when
 * paged), and that stride in elements. */
static inline int64_t attention_kv_run(const attention_geometry *g, const tsr_plugin_tensor *t,
                                       int64_t j, int64_t *key_stride) {
  if (g->paged) {
    *key_stride = t->strides[1];
    return g->block_size - j % g->block_size;
  }
  *key_stride = t->strides[g->packed_kv ? 0 : 1];
  return INT64_MAX;
}

/* dst[r * ld + d] = key row j0 + r of kv head `kv_head` of sequence b in
 * tensor t (k or v, at `base`) as f32, for r < keys and d < head_dim: run by
 * run of evenly strided rows (a paged block's rows). */
static inline void attention_gather_rows(kernel_level level, float *dst, int64_t ld,
                                         const attention_geometry *g, const tsr_plugin_tensor *t,
                                         const char *base, int64_t dim_stride, int64_t b,
                                         int64_t kv_head, int64_t j0, int64_t keys) {
  for (int64_t r = 0; r < keys;) {
    int64_t key_stride;
    int64_t run = attention_kv_run(g, t, j0 + r, &key_stride);
    if (run > keys - r)
      run = keys - r;
    int64_t offset = attention_kv_offset(g, t, b, kv_head, j0 + r);
    for (int64_t i = 0; i < run; i++, r++)
      load_row(level, dst + r * ld, base, t->dtype, offset + i * key_stride, dim_stride,
               g->head_dim, NULL);
  }
}

/* The keys [lo, hi] that query rows [i0, i0 + positions) of a sequence of
 * q_len queries and kv_len keys can see (empty: lo > hi), with the window
 * bounds (-1: unbounded; causal is right = 0). */
static inline void attention_key_range(int64_t q_len, int64_t kv_len, int64_t i0, int64_t positions,
                                       int64_t left, int64_t right, int64_t *lo, int64_t *hi) {
  int64_t shift = kv_len - q_len; /* key position of query 0 */
  int64_t first_pos = i0 + shift, last_pos = i0 + positions - 1 + shift;
  *lo = left < 0 || left >= first_pos ? 0 : first_pos - left;
  *hi = right < 0 || right >= kv_len - 1 - last_pos ? kv_len - 1 : last_pos + right;
}

/* Row r's visible keys [first, last] within a tile of `keys` keys from j0,
 * for a query at key position pos (clamped to [0, keys - 1], empty as
 * first > last). Compared before adding, so that no window overflows. */
static inline visible_keys attention_visible(int64_t pos, int64_t j0, int64_t keys, int64_t left,
                                             int64_t right) {
  int64_t first = left < 0 || left >= pos - j0 ? 0 : pos - left - j0;
  int64_t last = right < 0 || right >= j0 + keys - 1 - pos ? keys - 1 : pos + right - j0;
  if (first > keys)
    first = keys;
  if (last < -1)
    last = -1;
  visible_keys v = {(int32_t)first, (int32_t)last};
  return v;
}

/* Prefetches (into L2) `span` elements from kv head `kv_head` on of key
 * rows [j0, j0 + keys) of sequence b in t (unit dim stride). The f32-tile
 * decode path asks for the next tile's rows of a kv head just before it
 * works on the head in this tile: in a paged cache those lie in another
 * block, where the hardware's prefetchers do not look, and a head's rows are
 * 256-byte pieces a row pitch apart, a pattern they follow badly (a scratch
 * read of that pattern on a busy 2-vCPU machine: 4 GB/s without, 7-9 with
 * this; with PREFETCHT0 into L1 instead, 5). */
static inline void attention_prefetch_rows(const attention_geometry *g, const tsr_plugin_tensor *t,
                                           const char *base, int64_t kv_head, int64_t span,
                                           int64_t b, int64_t j0, int64_t keys) {
#if defined(__GNUC__) || defined(__clang__)
  const int64_t element = t->dtype == TSR_DTYPE_F32 ? 4 : 2, bytes = span * element;
  for (int64_t r = 0; r < keys;) {
    int64_t key_stride;
    int64_t run = attention_kv_run(g, t, j0 + r, &key_stride);
    if (run > keys - r)
      run = keys - r;
    const char *row = base + attention_kv_offset(g, t, b, kv_head, j0 + r) * element;
    for (int64_t i = 0; i < run; i++, r++, row += key_stride * element)
      for (int64_t at = 0; at < bytes; at += 64)
        __builtin_prefetch(row + at, 0, 2);
  }
#else
  (void)g, (void)t, (void)base, (void)kv_head, (void)span, (void)b, (void)j0, (void)keys;
#endif
}

/* ---- split-KV decode (attention_decode.c) ---- */

/* s[r * s_ld + j] = sum_c q[r * q_ld + c] * k[j * k_ld + c] for r < rows,
 * j < keys (a kernel may also write j up to keys rounded up to 16, reading
 * that many rows of k: the tile holds them), c < dim (a multiple of 16; the
 * rows are zero past the head dimension). */
typedef void (*decode_scores_fn)(const float *q, int64_t q_ld, int64_t rows, const float *k,
                                 int64_t k_ld, int64_t keys, int64_t dim, float *s, int64_t s_ld);
/* o[r * o_ld + c] += sum_j p[r * p_ld + j] * v[j * v_ld + c] for r < rows,
 * j < keys, c < dim (a multiple of 16). */
typedef void (*decode_pv_fn)(const float *p, int64_t p_ld, int64_t rows, const float *v,
                             int64_t v_ld, int64_t keys, int64_t dim, float *o, int64_t o_ld);

typedef struct decode_kernels {
  decode_scores_fn scores;
  decode_pv_fn pv;
} decode_kernels;

extern const decode_kernels cpu_decode_kernels_generic;
#if CPU_KERNELS_HAVE_AVX2
extern const decode_kernels cpu_decode_kernels_avx2, cpu_decode_kernels_avx512;
#endif

static inline const decode_kernels *select_decode_kernels(kernel_level level) {
#if CPU_KERNELS_HAVE_AVX2
  if (level == KERNEL_AVX512)
    return &cpu_decode_kernels_avx512;
  if (level == KERNEL_AVX2)
    return &cpu_decode_kernels_avx2;
#endif
  (void)level;
  return &cpu_decode_kernels_generic;
}

/* bf16 keys and values on AVX512_BF16 (attention_decode_bf16.c), read in
 * place. A tile: k_rows[j] and v_rows[j] point at key j's row (kv head 0;
 * head h is h * head_stride further), for j up to keys rounded up to 16 (the
 * caller repeats a valid row past the end); k_next and v_next the next
 * tile's next_keys rows, prefetched while this tile is read; dim a multiple
 * of 32. */
typedef struct decode_bf16_tile {
  const uint16_t *const *k_rows, *const *v_rows, *const *k_next, *const *v_next;
  int64_t keys, next_keys, heads, dim, k_head_stride, v_head_stride;
} decode_bf16_tile;
/* Scores of every kv head's group_rows bf16 query rows (head h's from row
 * h * group_rows of q and s), multiplied by `scale`. */
typedef void (*decode_scores_bf16_fn)(const decode_bf16_tile *tile, const uint16_t *q, int64_t q_ld,
                                      int64_t group_rows, float scale, float *s, int64_t s_ld);
/* The probabilities as bf16, with a 0 after an odd last key. */
typedef void (*decode_p_pairs_fn)(const float *s, int64_t s_ld, int64_t rows, int64_t keys,
                                  uint16_t *p, int64_t p_ld);
/* The tile's value rows interleaved in pairs by channel, every head
 * ((keys + 1) / 2 * 2 * dim bf16 per head, head after head). */
typedef void (*decode_interleave_fn)(const decode_bf16_tile *tile, uint16_t *pairs);
/* o += P V for one head's rows from its interleaved pairs; each 32-channel
 * block [c0, c0 + 32) of o holds channel c0 + 8 L + 4 h + i at
 * c0 + 16 h + 4 L + i (L < 4, h < 2, i < 4): the order of vpunpck{l,h}wd. */
typedef void (*decode_pv_bf16_fn)(const uint16_t *p, int64_t p_ld, int64_t rows,
                                  const uint16_t *pairs, int64_t keys, int64_t dim, float *o,
                                  int64_t o_ld);
typedef struct decode_bf16_kernels {
  decode_scores_bf16_fn scores;
  decode_p_pairs_fn p_pairs;
  decode_interleave_fn interleave;
  decode_pv_bf16_fn pv;
} decode_bf16_kernels;
#if CPU_KERNELS_HAVE_AVX2
extern const decode_bf16_kernels cpu_decode_kernels_bf16;
#endif

/* Runs the problem with the split-KV decode method of `config`. */
tsr_status cpu_attention_decode_run(const cpu_exec *exec, const attention_geometry *g,
                                    const cpu_attention_config *config);

#endif /* TESSERA_CPU_ATTENTION_H */
