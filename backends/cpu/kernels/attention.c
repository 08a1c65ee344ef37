/* SPDX-License-Identifier: Apache-2.0 */
/* Attention forward on the CPU, flash style. A task owns a block of query
 * positions of all the query heads that share one kv head (GQA/MQA groups
 * use each key and value tile once for the whole group) and streams the
 * visible key tiles through an online softmax, so nothing of size Sq x Skv
 * is ever held.
 *
 * Per key tile: S = Q K^T and O += P V are products of the GEMM's own
 * micro-kernels (cpu_tile_gemm_f32), reading f32 keys and values where they
 * lie (any strides; other dtypes are converted into a tile first). Between
 * the two products a row-wise online softmax turns S into P in place, with
 * the causal / sliding-window mask, and rescales O's rows when their running
 * maximum grows. That step comes in plain C and, on x86-64, AVX2 and AVX-512
 * versions picked by the plugin's instruction set. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "configs.h"
#include "cpu_internal.h"
#include "cpu_kernel_util.h"

enum { FLOATS_PER_LINE = 16 };
/* Extra floats per tile row: rows a power of two apart would all fall into
 * the same few cache sets. */
enum { ROW_PAD = 16 };

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

/* ---- plain C ---- */

static void softmax_rows_generic(float *s, int64_t ld, int64_t rows, int64_t keys,
                                 const visible_keys *visible, int all_visible, float *row_max,
                                 float *row_sum, float *correction) {
  for (int64_t r = 0; r < rows; r++) {
    float *row = s + r * ld;
    int64_t first = all_visible ? 0 : visible[r].first;
    int64_t last = all_visible ? keys - 1 : visible[r].last;
    float tile_max = -INFINITY;
    for (int64_t j = first; j <= last; j++)
      tile_max = row[j] > tile_max ? row[j] : tile_max;
    float new_max = tile_max > row_max[r] ? tile_max : row_max[r];
    float shift = safe_shift(new_max);
    float sum = 0.0f;
    for (int64_t j = 0; j < keys; j++) {
      float p = 0.0f;
      if (j >= first && j <= last)
        p = isinf(row[j]) ? NAN : exp_f32(row[j] - shift);
      row[j] = p;
      sum += p;
    }
    correction[r] = exp_f32(row_max[r] - shift);
    row_sum[r] = row_sum[r] * correction[r] + sum;
    row_max[r] = new_max;
  }
}

static void rescale_rows_generic(float *o, int64_t ld, int64_t rows, int64_t dim,
                                 const float *correction) {
  for (int64_t r = 0; r < rows; r++) {
    if (correction[r] == 1.0f)
      continue;
    for (int64_t c = 0; c < dim; c++)
      o[r * ld + c] *= correction[r];
  }
}

static void transpose_generic(float *dst, int64_t dst_ld, const float *src, int64_t src_ld,
                              int64_t keys, int64_t dim) {
  for (int64_t j = 0; j < keys; j++)
    for (int64_t d = 0; d < dim; d++)
      dst[d * dst_ld + j] = src[j * src_ld + d];
}

static const attention_kernels GENERIC_KERNELS = {softmax_rows_generic, rescale_rows_generic,
                                                  transpose_generic};

#if CPU_KERNELS_HAVE_AVX2

/* ---- AVX2 ---- */

TARGET_AVX2 static void softmax_rows_avx2(float *s, int64_t ld, int64_t rows, int64_t keys,
                                          const visible_keys *visible, int all_visible,
                                          float *row_max, float *row_sum, float *correction) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 inf = _mm256_set1_ps(INFINITY);
  for (int64_t r = 0; r < rows; r++) {
    float *row = s + r * ld;
    int32_t first = all_visible ? 0 : visible[r].first;
    int32_t last = all_visible ? (int32_t)keys - 1 : visible[r].last;
    const __m256i lo = _mm256_set1_epi32(first - 1), hi = _mm256_set1_epi32(last + 1);
    __m256 max = _mm256_set1_ps(-INFINITY);
    for (int64_t j = 0; j < keys; j += 8) {
      __m256i index = _mm256_add_epi32(lane, _mm256_set1_epi32((int32_t)j));
      __m256i seen = _mm256_and_si256(_mm256_cmpgt_epi32(index, lo), _mm256_cmpgt_epi32(hi, index));
      __m256 v = _mm256_maskload_ps(row + j, seen);
      max = _mm256_blendv_ps(max, _mm256_max_ps(max, v), _mm256_castsi256_ps(seen));
    }
    float tile_max = max_lanes_avx2(max);
    float new_max = tile_max > row_max[r] ? tile_max : row_max[r];
    const __m256 shift = _mm256_set1_ps(safe_shift(new_max));
    __m256 sum = _mm256_setzero_ps();
    for (int64_t j = 0; j < keys; j += 8) {
      __m256i index = _mm256_add_epi32(lane, _mm256_set1_epi32((int32_t)j));
      __m256i seen = _mm256_and_si256(_mm256_cmpgt_epi32(index, lo), _mm256_cmpgt_epi32(hi, index));
      __m256 v = _mm256_maskload_ps(row + j, seen); /* 0 where unseen */
      __m256 p = exp_avx2(_mm256_sub_ps(v, shift));
      /* all ones (a NaN) where the score is infinite */
      p = _mm256_or_ps(p, _mm256_cmp_ps(_mm256_and_ps(v, magnitude), inf, _CMP_EQ_OQ));
      p = _mm256_and_ps(p, _mm256_castsi256_ps(seen));
      sum = _mm256_add_ps(sum, p);
      if (keys - j >= 8)
        _mm256_storeu_ps(row + j, p);
      else
        _mm256_maskstore_ps(row + j, lanes_avx2(keys - j), p);
    }
    __m256d low = _mm256_setzero_pd(), high = low;
    accumulate_pd_avx2(&low, &high, sum);
    correction[r] = exp_f32(row_max[r] - safe_shift(new_max));
    row_sum[r] = row_sum[r] * correction[r] + (float)sum_lanes_pd_avx2(_mm256_add_pd(low, high));
    row_max[r] = new_max;
  }
}

TARGET_AVX2 static void rescale_rows_avx2(float *o, int64_t ld, int64_t rows, int64_t dim,
                                          const float *correction) {
  for (int64_t r = 0; r < rows; r++) {
    if (correction[r] == 1.0f)
      continue;
    const __m256 f = _mm256_set1_ps(correction[r]);
    float *row = o + r * ld;
    int64_t c = 0;
    for (; c + 8 <= dim; c += 8)
      _mm256_storeu_ps(row + c, _mm256_mul_ps(_mm256_loadu_ps(row + c), f));
    for (; c < dim; c++)
      row[c] *= correction[r];
  }
}

/* 8 x 8 blocks: unpack pairs, then 64-bit pairs, then 128-bit halves. */
TARGET_AVX2 static void transpose_avx2(float *dst, int64_t dst_ld, const float *src, int64_t src_ld,
                                       int64_t keys, int64_t dim) {
  int64_t j0 = 0;
  for (; j0 + 8 <= keys; j0 += 8) {
    int64_t d0 = 0;
    for (; d0 + 8 <= dim; d0 += 8) {
      __m256 a[8], t[8], u[8];
      for (int i = 0; i < 8; i++)
        a[i] = _mm256_loadu_ps(src + (j0 + i) * src_ld + d0);
      for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(a[2 * i], a[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(a[2 * i], a[2 * i + 1]);
      }
      for (int i = 0; i < 2; i++) {
        __m256d x = _mm256_castps_pd(t[4 * i]), y = _mm256_castps_pd(t[4 * i + 2]);
        __m256d z = _mm256_castps_pd(t[4 * i + 1]), w = _mm256_castps_pd(t[4 * i + 3]);
        u[4 * i] = _mm256_castpd_ps(_mm256_unpacklo_pd(x, y));
        u[4 * i + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(x, y));
        u[4 * i + 2] = _mm256_castpd_ps(_mm256_unpacklo_pd(z, w));
        u[4 * i + 3] = _mm256_castpd_ps(_mm256_unpackhi_pd(z, w));
      }
      /* u[m] holds column m (low half) and m + 4 (high half) of rows 0-3,
       * u[4 + m] the same of rows 4-7. */
      for (int m = 0; m < 4; m++) {
        _mm256_storeu_ps(dst + (d0 + m) * dst_ld + j0,
                         _mm256_permute2f128_ps(u[m], u[4 + m], 0x20));
        _mm256_storeu_ps(dst + (d0 + m + 4) * dst_ld + j0,
                         _mm256_permute2f128_ps(u[m], u[4 + m], 0x31));
      }
    }
    transpose_generic(dst + d0 * dst_ld + j0, dst_ld, src + j0 * src_ld + d0, src_ld, 8, dim - d0);
  }
  transpose_generic(dst + j0, dst_ld, src + j0 * src_ld, src_ld, keys - j0, dim);
}

static const attention_kernels AVX2_KERNELS = {softmax_rows_avx2, rescale_rows_avx2,
                                               transpose_avx2};

/* ---- AVX-512 ---- */

TARGET_AVX512 static void softmax_rows_avx512(float *s, int64_t ld, int64_t rows, int64_t keys,
                                              const visible_keys *visible, int all_visible,
                                              float *row_max, float *row_sum, float *correction) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512 nan = _mm512_set1_ps(NAN);
  for (int64_t r = 0; r < rows; r++) {
    float *row = s + r * ld;
    int32_t first = all_visible ? 0 : visible[r].first;
    int32_t last = all_visible ? (int32_t)keys - 1 : visible[r].last;
    const __m512i lo = _mm512_set1_epi32(first), hi = _mm512_set1_epi32(last);
    __m512 max = _mm512_set1_ps(-INFINITY);
    for (int64_t j = 0; j < keys; j += 16) {
      __m512i index = _mm512_add_epi32(lane, _mm512_set1_epi32((int32_t)j));
      __mmask16 seen = _mm512_cmpge_epi32_mask(index, lo) & _mm512_cmple_epi32_mask(index, hi);
      max = _mm512_mask_max_ps(max, seen, max, _mm512_maskz_loadu_ps(seen, row + j));
    }
    float tile_max = _mm512_reduce_max_ps(max);
    float new_max = tile_max > row_max[r] ? tile_max : row_max[r];
    const __m512 shift = _mm512_set1_ps(safe_shift(new_max));
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < keys; j += 16) {
      __m512i index = _mm512_add_epi32(lane, _mm512_set1_epi32((int32_t)j));
      __mmask16 seen = _mm512_cmpge_epi32_mask(index, lo) & _mm512_cmple_epi32_mask(index, hi);
      __m512 v = _mm512_maskz_loadu_ps(seen, row + j);
      __m512 p = _mm512_maskz_mov_ps(seen, exp_avx512(_mm512_sub_ps(v, shift)));
      /* NaN where a seen score is infinite (fpclass 0x18: +inf, -inf) */
      p = _mm512_mask_mov_ps(p, _mm512_fpclass_ps_mask(v, 0x18) & seen, nan);
      sum = _mm512_add_ps(sum, p);
      _mm512_mask_storeu_ps(row + j, lanes_avx512(keys - j), p);
    }
    correction[r] = exp_f32(row_max[r] - safe_shift(new_max));
    row_sum[r] = row_sum[r] * correction[r] + _mm512_reduce_add_ps(sum);
    row_max[r] = new_max;
  }
}

TARGET_AVX512 static void rescale_rows_avx512(float *o, int64_t ld, int64_t rows, int64_t dim,
                                              const float *correction) {
  for (int64_t r = 0; r < rows; r++) {
    if (correction[r] == 1.0f)
      continue;
    const __m512 f = _mm512_set1_ps(correction[r]);
    float *row = o + r * ld;
    for (int64_t c = 0; c < dim; c += 16) {
      __mmask16 m = lanes_avx512(dim - c);
      _mm512_mask_storeu_ps(row + c, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, row + c), f));
    }
  }
}

/* 16 x 16 blocks: unpack pairs, 64-bit pairs, then two rounds of 128-bit
 * lane shuffles; rows past `keys` and columns past `dim` are masked off. */
TARGET_AVX512 static void transpose_avx512(float *dst, int64_t dst_ld, const float *src,
                                           int64_t src_ld, int64_t keys, int64_t dim) {
  for (int64_t j0 = 0; j0 < keys; j0 += 16) {
    int64_t rows = keys - j0 < 16 ? keys - j0 : 16;
    __mmask16 out_mask = lanes_avx512(rows);
    for (int64_t d0 = 0; d0 < dim; d0 += 16) {
      __mmask16 in_mask = lanes_avx512(dim - d0);
      __m512 a[16], t[16], u[16];
      for (int i = 0; i < 16; i++)
        a[i] = i < rows ? _mm512_maskz_loadu_ps(in_mask, src + (j0 + i) * src_ld + d0)
                        : _mm512_setzero_ps();
      for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]);
      }
      for (int i = 0; i < 4; i++) {
        __m512d x = _mm512_castps_pd(t[4 * i]), y = _mm512_castps_pd(t[4 * i + 2]);
        __m512d z = _mm512_castps_pd(t[4 * i + 1]), w = _mm512_castps_pd(t[4 * i + 3]);
        u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(x, y));
        u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(x, y));
        u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(z, w));
        u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(z, w));
      }
      /* Lane l of u[4 * g + m] holds column 4 l + m of rows 4 g .. 4 g + 3. */
      for (int m = 0; m < 4; m++) {
        __m512 w0 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0x88);
        __m512 w1 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0xdd);
        __m512 w2 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0x88);
        __m512 w3 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0xdd);
        __m512 column[4] = {_mm512_shuffle_f32x4(w0, w2, 0x88), _mm512_shuffle_f32x4(w1, w3, 0x88),
                            _mm512_shuffle_f32x4(w0, w2, 0xdd), _mm512_shuffle_f32x4(w1, w3, 0xdd)};
        for (int l = 0; l < 4; l++) {
          int64_t d = d0 + 4 * l + m;
          if (d < dim)
            _mm512_mask_storeu_ps(dst + d * dst_ld + j0, out_mask, column[l]);
        }
      }
    }
  }
}

static const attention_kernels AVX512_KERNELS = {softmax_rows_avx512, rescale_rows_avx512,
                                                 transpose_avx512};

#endif /* CPU_KERNELS_HAVE_AVX2 */

static const attention_kernels *select_kernels(kernel_level level) {
#if CPU_KERNELS_HAVE_AVX2
  if (level == KERNEL_AVX512)
    return &AVX512_KERNELS;
  if (level == KERNEL_AVX2)
    return &AVX2_KERNELS;
#endif
  (void)level;
  return &GENERIC_KERNELS;
}

/* ---- the block loop ---- */

typedef struct attention_job {
  const tsr_attention_args *args;
  kernel_level level;
  const attention_kernels *kernels;
  const char *q_base, *k_base, *v_base;
  char *o_base;
  float *lse_base;
  int32_t dtype;
  int direct; /* f32 keys and values: their tiles are read where they lie */
  int64_t q_len, kv_len, q_heads, kv_heads, group, head_dim;
  /* A task holds block_positions query positions of each of the group's
   * heads: about block_q rows. */
  int64_t block_positions, block_kv, q_blocks;
  int64_t rows_max;                /* rows of a full task */
  int64_t q_ld, s_ld, o_ld, kv_ld; /* row pitches of the scratch tiles */
  size_t worker_floats;
  float *scratch;
} attention_job;

static int64_t round_up(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

static int64_t min_i64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

static int64_t max_i64(int64_t a, int64_t b) {
  return a > b ? a : b;
}

/* Scratch of one worker. */
typedef struct attention_tiles {
  float *q;     /* rows_max x q_ld: the task's queries, scaled */
  float *s;     /* rows_max x s_ld: scores, then probabilities */
  float *o;     /* rows_max x o_ld: the unnormalised output */
  float *k, *v; /* block_kv x kv_ld: converted key and value tiles */
  float *kt;    /* head_dim x s_ld: the key tile turned */
  float *row_max, *row_sum, *correction;
  visible_keys *visible;
} attention_tiles;

static attention_tiles worker_tiles(const attention_job *job, int worker) {
  attention_tiles t;
  float *p = job->scratch + (size_t)worker * job->worker_floats;
  t.q = p;
  p += job->rows_max * job->q_ld;
  t.s = p;
  p += job->rows_max * job->s_ld;
  t.o = p;
  p += job->rows_max * job->o_ld;
  t.k = p;
  p += job->direct ? 0 : job->block_kv * job->kv_ld;
  t.v = p;
  p += job->direct ? 0 : job->block_kv * job->kv_ld;
  t.kt = p;
  p += job->head_dim * job->s_ld;
  t.row_max = p;
  t.row_sum = t.row_max + job->rows_max;
  t.correction = t.row_sum + job->rows_max;
  t.visible = (visible_keys *)(t.correction + job->rows_max);
  return t;
}

static size_t tiles_floats(const attention_job *job) {
  int64_t floats = job->rows_max * (job->q_ld + job->s_ld + job->o_ld) +
                   (job->direct ? 0 : 2 * job->block_kv * job->kv_ld) + job->head_dim * job->s_ld +
                   3 * job->rows_max + 2 * job->rows_max /* visible_keys: two int32 per row */;
  return (size_t)round_up(floats, FLOATS_PER_LINE);
}

/* One task: query positions [i0, i0 + positions) of all the query heads that
 * share kv head `kv_head` in batch `batch`. Its rows are (head in group,
 * position), group-major. */
static void attention_block(const attention_job *job, const attention_tiles *t, int64_t task) {
  const tsr_attention_args *args = job->args;
  const tsr_plugin_tensor *q = &args->q, *k = &args->k, *v = &args->v;
  const int64_t head_dim = job->head_dim, group = job->group;
  int64_t q_block = task % job->q_blocks;
  int64_t batch_kv_head = task / job->q_blocks;
  int64_t kv_head = batch_kv_head % job->kv_heads;
  int64_t batch = batch_kv_head / job->kv_heads;
  int64_t i0 = q_block * job->block_positions;
  int64_t positions = min_i64(job->block_positions, job->q_len - i0);
  int64_t rows = group * positions;
  int64_t shift = job->kv_len - job->q_len; /* key position of query position 0 */
  /* Causal is window_right = 0 (the core sets it); the flag is honoured anyway. */
  int64_t left = args->window_left, right = args->causal ? 0 : args->window_right;

  for (int64_t r = 0; r < rows; r++) {
    t->row_max[r] = -INFINITY;
    t->row_sum[r] = 0.0f;
    memset(t->o + r * job->o_ld, 0, (size_t)head_dim * sizeof(float));
  }

  /* Keys any row of the block can see; tiles outside are never touched. */
  int64_t first_pos = i0 + shift, last_pos = i0 + positions - 1 + shift;
  int64_t key_lo = left < 0 ? 0 : max_i64(0, first_pos - left);
  int64_t key_hi = right < 0 ? job->kv_len - 1 : min_i64(job->kv_len - 1, last_pos + right);

  if (key_lo <= key_hi) {
    for (int64_t r = 0; r < rows; r++) {
      int64_t head = kv_head * group + r / positions, i = i0 + r % positions;
      int64_t offset = batch * q->strides[0] + i * q->strides[1] + head * q->strides[2];
      float *q_row = t->q + r * job->q_ld;
      load_row(job->level, q_row, job->q_base, job->dtype, offset, q->strides[3], head_dim, NULL);
      for (int64_t d = 0; d < head_dim; d++)
        q_row[d] *= args->scale;
    }
  }

  for (int64_t j0 = key_lo; j0 <= key_hi; j0 += job->block_kv) {
    int64_t keys = min_i64(job->block_kv, key_hi + 1 - j0);
    int64_t k_offset = batch * k->strides[0] + j0 * k->strides[1] + kv_head * k->strides[2];
    int64_t v_offset = batch * v->strides[0] + j0 * v->strides[1] + kv_head * v->strides[2];
    const float *k_tile, *v_tile;
    int64_t k_key_stride, v_key_stride, v_dim_stride;
    if (job->direct) {
      k_tile = (const float *)job->k_base + k_offset;
      v_tile = (const float *)job->v_base + v_offset;
      k_key_stride = k->strides[1];
      v_key_stride = v->strides[1];
      v_dim_stride = v->strides[3];
    } else {
      for (int64_t j = 0; j < keys; j++) {
        load_row(job->level, t->k + j * job->kv_ld, job->k_base, job->dtype,
                 k_offset + j * k->strides[1], k->strides[3], head_dim, NULL);
        load_row(job->level, t->v + j * job->kv_ld, job->v_base, job->dtype,
                 v_offset + j * v->strides[1], v->strides[3], head_dim, NULL);
      }
      k_tile = t->k;
      v_tile = t->v;
      k_key_stride = v_key_stride = job->kv_ld;
      v_dim_stride = 1;
    }

    /* S = Q K^T with K^T turned into rows first: the GEMM packs row-major
     * operands fastest. */
    job->kernels->transpose(t->kt, job->s_ld, k_tile, k_key_stride, keys, head_dim);
    cpu_tile_gemm_f32(rows, keys, head_dim, t->q, job->q_ld, t->kt, job->s_ld, 1, t->s, job->s_ld,
                      0);

    /* Each row sees one contiguous run [first, last] of the tile. */
    int all_visible = 1;
    for (int64_t r = 0; r < rows; r++) {
      int64_t pos = i0 + r % positions + shift;
      int64_t first = left < 0 ? 0 : max_i64(0, pos - left - j0);
      int64_t last = right < 0 ? keys - 1 : min_i64(keys - 1, pos + right - j0);
      first = min_i64(first, keys);
      last = max_i64(last, -1);
      all_visible &= first == 0 && last == keys - 1;
      t->visible[r].first = (int32_t)first;
      t->visible[r].last = (int32_t)last;
    }
    job->kernels->softmax_rows(t->s, job->s_ld, rows, keys, t->visible, all_visible, t->row_max,
                               t->row_sum, t->correction);
    job->kernels->rescale_rows(t->o, job->o_ld, rows, head_dim, t->correction);

    /* O += P V: B[j][c] is value j's channel c. */
    cpu_tile_gemm_f32(rows, head_dim, keys, t->s, job->s_ld, v_tile, v_key_stride, v_dim_stride,
                      t->o, job->o_ld, 1);
  }

  const tsr_plugin_tensor *o = &args->o, *lse = &args->lse;
  for (int64_t r = 0; r < rows; r++) {
    int64_t head = kv_head * group + r / positions, i = i0 + r % positions;
    float *o_row = t->o + r * job->o_ld;
    /* A row that saw no key (sum 0) gets 0 and lse -inf; a NaN sum (a
     * non-finite score) stays NaN through both. */
    float inverse = t->row_sum[r] == 0.0f ? 0.0f : 1.0f / t->row_sum[r];
    for (int64_t d = 0; d < head_dim; d++)
      o_row[d] *= inverse;
    int64_t offset = batch * o->strides[0] + i * o->strides[1] + head * o->strides[2];
    store_row(job->level, job->o_base, job->dtype, offset, o->strides[3], o_row, head_dim, 0);
    if (job->lse_base) {
      float value = t->row_sum[r] == 0.0f ? -INFINITY : t->row_max[r] + logf(t->row_sum[r]);
      job->lse_base[batch * lse->strides[0] + head * lse->strides[1] + i * lse->strides[2]] = value;
    }
  }
}

static void attention_range(void *context, int64_t begin, int64_t end, int worker) {
  const attention_job *job = context;
  attention_tiles tiles = worker_tiles(job, worker);
  for (int64_t task = begin; task < end; task++)
    attention_block(job, &tiles, task);
}

tsr_status cpu_attention_run(const cpu_exec *exec, const tsr_attention_args *args,
                             const cpu_attention_config *config) {
  attention_job job;
  memset(&job, 0, sizeof job);
  job.args = args;
  job.q_base = cpu_tensor_base(&args->q);
  job.k_base = cpu_tensor_base(&args->k);
  job.v_base = cpu_tensor_base(&args->v);
  job.o_base = cpu_tensor_base(&args->o);
  job.lse_base = args->lse.buffer ? (float *)cpu_tensor_base(&args->lse) : NULL;
  job.dtype = args->q.dtype;
  int64_t batch = args->q.shape[0];
  job.q_len = args->q.shape[1];
  job.q_heads = args->q.shape[2];
  job.head_dim = args->q.shape[3];
  job.kv_len = args->k.shape[1];
  job.kv_heads = args->k.shape[2];
  if (batch == 0 || job.q_len == 0 || job.q_heads == 0 || job.kv_heads == 0)
    return TSR_OK;
  job.group = job.q_heads / job.kv_heads;
  job.level = cpu_kernel_level();
  job.kernels = select_kernels(job.level);
  job.direct = job.dtype == TSR_DTYPE_F32 && args->k.strides[3] == 1 && args->v.strides[3] == 1;

  int64_t block_q = config && config->block_q > 0 ? config->block_q : 64;
  job.block_kv = config && config->block_kv > 0 ? config->block_kv : 64;
  job.block_positions = min_i64(max_i64(1, block_q / job.group), job.q_len);
  job.block_kv = max_i64(1, min_i64(job.block_kv, job.kv_len));
  job.q_blocks = (job.q_len + job.block_positions - 1) / job.block_positions;
  job.rows_max = job.group * job.block_positions;
  job.q_ld = round_up(job.head_dim, FLOATS_PER_LINE) + ROW_PAD;
  job.o_ld = job.q_ld;
  job.kv_ld = job.q_ld;
  job.s_ld = round_up(job.block_kv, FLOATS_PER_LINE) + ROW_PAD;
  job.worker_floats = tiles_floats(&job);

  int threads = cpu_pool_threads(exec->pool);
  size_t bytes = job.worker_floats * sizeof(float) * (size_t)(threads > 0 ? threads : 1);
  job.scratch = aligned_alloc(64, bytes);
  if (!job.scratch) {
    if (exec->error && exec->error_capacity > 0)
      snprintf(exec->error, exec->error_capacity, "cannot allocate %zu bytes of attention scratch",
               bytes);
    return TSR_ERROR_OUT_OF_MEMORY;
  }

  int64_t tasks = batch * job.kv_heads * job.q_blocks;
  cpu_pool_parallel_for(exec->pool, tasks, 1, attention_range, &job);
  free(job.scratch);
  return TSR_OK;
}
