/* Attention forward on the CPU, flash style. A task owns a block of query
 * positions of all the query heads that share one kv head (GQA/MQA groups
 * load each key and value tile once) and streams the visible key blocks
 * through an online softmax, so nothing of size Sq x Skv is ever held.
 *
 * Layout: the task's query rows are stored transposed (qt[d][r], scaled), so
 * that scores come out as s[j][r] = k_j . q_r with the rows in vector lanes.
 * Key and value rows are converted to f32 tiles, the softmax update runs
 * across rows in lanes, and p v accumulates into acc[r][c]. The ISA-specific
 * pieces sit behind a small table: plain C, and on x86-64 AVX2+FMA (with
 * F16C), picked by the plugin's instruction set. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "configs.h"
#include "cpu_internal.h"

#include "cpu_kernel_util.h"

/* Query rows are padded to ROW_BLOCK (one AVX2 vector of rows); value tiles
 * copied to scratch are padded to DIM_BLOCK channels. */
enum { ROW_BLOCK = 8, DIM_BLOCK = 16, FLOATS_PER_LINE = 16 };
/* Extra floats per tile row: tile rows a power of two apart would all fall
 * into the same few cache sets. */
enum { LANE_PAD = 8 };

/* The ISA-specific pieces of the block loop. `rows` is always a multiple of
 * ROW_BLOCK; s and p tiles are [keys][lanes] with lanes >= rows. */
typedef struct attention_kernels {
  const char *name;
  /* dst[i] = element i (of `count`, `stride` apart) from `offset` of a tensor, as f32. */
  void (*load_row)(float *dst, const char *base, int32_t dtype, int64_t offset, int64_t stride,
                   int64_t count);
  /* scores[j][r] = sum_d k[j * k_stride + d] * qt[d][r]; qt and scores keep
   * rows `lanes` floats apart. */
  void (*score)(const float *qt, int64_t lanes, int64_t rows, const float *k, int64_t k_stride,
                int64_t keys, int64_t head_dim, float *scores);
  /* Online softmax step over one tile: row r sees keys [lo[r], hi[r]] of it
   * (every key when all_visible). Turns scores into p in place, updates the
   * running max and sum, and writes the factor that rescales acc. */
  void (*softmax)(float *scores, int64_t lanes, int64_t rows, int64_t keys, const int32_t *lo,
                  const int32_t *hi, int all_visible, float *row_max, float *row_sum,
                  float *correction);
  /* acc[r][c] = acc[r][c] * correction[r] + sum_j p[j][r] * v[j * v_stride + c]
   * for c < dim (a multiple of DIM_BLOCK); acc rows are dim floats apart. */
  void (*accumulate)(const float *p, int64_t lanes, int64_t rows, const float *v, int64_t v_stride,
                     int64_t keys, int64_t dim, const float *correction, float *acc);
} attention_kernels;

typedef struct attention_job {
  const tsr_attention_args *args;
  const attention_kernels *kernels;
  const char *q_base, *k_base, *v_base;
  char *o_base;
  float *lse_base;
  int32_t dtype;
  int64_t q_len, kv_len, q_heads, kv_heads, group, head_dim;
  /* A task holds block_positions query positions of each of the group's
   * heads: about block_q rows. */
  int64_t block_positions, block_kv, q_blocks;
  int64_t rows_pad; /* rows of a full task rounded up to ROW_BLOCK */
  int64_t dim_pad;  /* head_dim rounded up to DIM_BLOCK */
  int64_t v_stride; /* floats between value rows in the tile */
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

/* ---- baseline kernels: plain C, any ISA ---- */

/* The baseline row load is the shared strided load. */
static void load_row_baseline(float *dst, const char *base, int32_t dtype, int64_t offset,
                              int64_t stride, int64_t count) {
  load_span(dst, base, dtype, offset, stride, count);
}

static void score_baseline(const float *qt, int64_t lanes, int64_t rows, const float *k,
                           int64_t k_stride, int64_t keys, int64_t head_dim, float *scores) {
  for (int64_t j = 0; j < keys; j++) {
    const float *k_row = k + j * k_stride;
    for (int64_t r0 = 0; r0 < rows; r0 += ROW_BLOCK) {
      float acc[ROW_BLOCK] = {0};
      for (int64_t d = 0; d < head_dim; d++)
        for (int r = 0; r < ROW_BLOCK; r++)
          acc[r] += k_row[d] * qt[d * lanes + r0 + r];
      for (int r = 0; r < ROW_BLOCK; r++)
        scores[j * lanes + r0 + r] = acc[r];
    }
  }
}

static void softmax_baseline(float *scores, int64_t lanes, int64_t rows, int64_t keys,
                             const int32_t *lo, const int32_t *hi, int all_visible, float *row_max,
                             float *row_sum, float *correction) {
  for (int64_t r = 0; r < rows; r++) {
    int64_t first = all_visible ? 0 : lo[r], last = all_visible ? keys - 1 : hi[r];
    float tile_max = -INFINITY;
    for (int64_t j = first; j <= last; j++)
      tile_max = scores[j * lanes + r] > tile_max ? scores[j * lanes + r] : tile_max;
    float new_max = tile_max > row_max[r] ? tile_max : row_max[r];
    /* Until a row has seen a finite score it has nothing to rescale. */
    float shift = new_max == -INFINITY ? 0.0f : new_max;
    float sum = 0.0f;
    for (int64_t j = 0; j < keys; j++) {
      float p = j >= first && j <= last ? exp_f32(scores[j * lanes + r] - shift) : 0.0f;
      scores[j * lanes + r] = p;
      sum += p;
    }
    correction[r] = exp_f32(row_max[r] - shift);
    row_sum[r] = row_sum[r] * correction[r] + sum;
    row_max[r] = new_max;
  }
}

static void accumulate_baseline(const float *p, int64_t lanes, int64_t rows, const float *v,
                                int64_t v_stride, int64_t keys, int64_t dim,
                                const float *correction, float *acc) {
  for (int64_t r = 0; r < rows; r++) {
    float *acc_row = acc + r * dim;
    for (int64_t c = 0; c < dim; c++)
      acc_row[c] *= correction[r];
    for (int64_t j = 0; j < keys; j++) {
      float weight = p[j * lanes + r];
      const float *v_row = v + j * v_stride;
      for (int64_t c = 0; c < dim; c++)
        acc_row[c] += weight * v_row[c];
    }
  }
}

static const attention_kernels BASELINE_KERNELS = {"baseline", load_row_baseline, score_baseline,
                                                   softmax_baseline, accumulate_baseline};

/* ---- AVX2 + FMA + F16C kernels (x86-64, chosen at run time) ---- */

#if CPU_KERNELS_HAVE_AVX2
#define AVX2 __attribute__((target("avx2,fma,f16c")))

AVX2 static void load_row_avx2(float *dst, const char *base, int32_t dtype, int64_t offset,
                               int64_t stride, int64_t count) {
  if (stride != 1 || dtype == TSR_DTYPE_F32) {
    load_row_baseline(dst, base, dtype, offset, stride, count);
    return;
  }
  const uint16_t *src = (const uint16_t *)base + offset;
  int64_t i = 0;
  if (dtype == TSR_DTYPE_F16) {
    for (; i + 8 <= count; i += 8)
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < count; i++)
      dst[i] = tsr_f16_to_f32(src[i]);
  } else if (dtype == TSR_DTYPE_BF16) {
    for (; i + 8 <= count; i += 8) {
      __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
      _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));
    }
    for (; i < count; i++)
      dst[i] = tsr_bf16_to_f32(src[i]);
  } else {
    load_row_baseline(dst, base, dtype, offset, stride, count);
  }
}

/* Score block: 4 keys by 16 rows (8 accumulators); then 8-row and 1-key tails. */
AVX2 static void score_avx2(const float *qt, int64_t lanes, int64_t rows, const float *k,
                            int64_t k_stride, int64_t keys, int64_t head_dim, float *scores) {
  int64_t j = 0;
  for (; j + 4 <= keys; j += 4) {
    const float *k0 = k + j * k_stride, *k1 = k0 + k_stride, *k2 = k1 + k_stride,
                *k3 = k2 + k_stride;
    float *s = scores + j * lanes;
    int64_t r0 = 0;
    for (; r0 + 16 <= rows; r0 += 16) {
      __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00,
             a30 = a00, a31 = a00;
      const float *q = qt + r0;
      for (int64_t d = 0; d < head_dim; d++) {
        __m256 q0 = _mm256_loadu_ps(q + d * lanes), q1 = _mm256_loadu_ps(q + d * lanes + 8);
        __m256 b = _mm256_broadcast_ss(k0 + d);
        a00 = _mm256_fmadd_ps(b, q0, a00);
        a01 = _mm256_fmadd_ps(b, q1, a01);
        b = _mm256_broadcast_ss(k1 + d);
        a10 = _mm256_fmadd_ps(b, q0, a10);
        a11 = _mm256_fmadd_ps(b, q1, a11);
        b = _mm256_broadcast_ss(k2 + d);
        a20 = _mm256_fmadd_ps(b, q0, a20);
        a21 = _mm256_fmadd_ps(b, q1, a21);
        b = _mm256_broadcast_ss(k3 + d);
        a30 = _mm256_fmadd_ps(b, q0, a30);
        a31 = _mm256_fmadd_ps(b, q1, a31);
      }
      _mm256_storeu_ps(s + r0, a00);
      _mm256_storeu_ps(s + r0 + 8, a01);
      _mm256_storeu_ps(s + lanes + r0, a10);
      _mm256_storeu_ps(s + lanes + r0 + 8, a11);
      _mm256_storeu_ps(s + 2 * lanes + r0, a20);
      _mm256_storeu_ps(s + 2 * lanes + r0 + 8, a21);
      _mm256_storeu_ps(s + 3 * lanes + r0, a30);
      _mm256_storeu_ps(s + 3 * lanes + r0 + 8, a31);
    }
    if (r0 < rows) { /* 8 rows left */
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      const float *q = qt + r0;
      for (int64_t d = 0; d < head_dim; d++) {
        __m256 q0 = _mm256_loadu_ps(q + d * lanes);
        a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(k0 + d), q0, a0);
        a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(k1 + d), q0, a1);
        a2 = _mm256_fmadd_ps(_mm256_broadcast_ss(k2 + d), q0, a2);
        a3 = _mm256_fmadd_ps(_mm256_broadcast_ss(k3 + d), q0, a3);
      }
      _mm256_storeu_ps(s + r0, a0);
      _mm256_storeu_ps(s + lanes + r0, a1);
      _mm256_storeu_ps(s + 2 * lanes + r0, a2);
      _mm256_storeu_ps(s + 3 * lanes + r0, a3);
    }
  }
  for (; j < keys; j++) {
    const float *k0 = k + j * k_stride;
    for (int64_t r0 = 0; r0 < rows; r0 += 8) {
      /* Two chains over even and odd channels hide the FMA latency a little. */
      __m256 even = _mm256_setzero_ps(), odd = even;
      int64_t d = 0;
      for (; d + 2 <= head_dim; d += 2) {
        even = _mm256_fmadd_ps(_mm256_broadcast_ss(k0 + d), _mm256_loadu_ps(qt + d * lanes + r0),
                               even);
        odd = _mm256_fmadd_ps(_mm256_broadcast_ss(k0 + d + 1),
                              _mm256_loadu_ps(qt + (d + 1) * lanes + r0), odd);
      }
      if (d < head_dim)
        even = _mm256_fmadd_ps(_mm256_broadcast_ss(k0 + d), _mm256_loadu_ps(qt + d * lanes + r0),
                               even);
      _mm256_storeu_ps(scores + j * lanes + r0, _mm256_add_ps(even, odd));
    }
  }
}

AVX2 static void softmax_avx2(float *scores, int64_t lanes, int64_t rows, int64_t keys,
                              const int32_t *lo, const int32_t *hi, int all_visible, float *row_max,
                              float *row_sum, float *correction) {
  const __m256 minus_inf = _mm256_set1_ps(-INFINITY);
  for (int64_t r0 = 0; r0 < rows; r0 += 8) {
    __m256i first = _mm256_setzero_si256(), last = _mm256_set1_epi32((int32_t)keys - 1);
    if (!all_visible) {
      first = _mm256_loadu_si256((const __m256i *)(lo + r0));
      last = _mm256_loadu_si256((const __m256i *)(hi + r0));
    }
    /* Masked scores become -inf, so their exponentials are exactly 0. */
    __m256 tile_max = minus_inf;
    for (int64_t j = 0; j < keys; j++) {
      float *s = scores + j * lanes + r0;
      __m256 value = _mm256_loadu_ps(s);
      if (!all_visible) {
        __m256i index = _mm256_set1_epi32((int32_t)j);
        __m256i hidden =
            _mm256_or_si256(_mm256_cmpgt_epi32(first, index), _mm256_cmpgt_epi32(index, last));
        value = _mm256_blendv_ps(value, minus_inf, _mm256_castsi256_ps(hidden));
        _mm256_storeu_ps(s, value);
      }
      tile_max = _mm256_max_ps(tile_max, value);
    }
    __m256 old_max = _mm256_loadu_ps(row_max + r0);
    __m256 new_max = _mm256_max_ps(old_max, tile_max);
    /* Until a row has seen a finite score it has nothing to rescale. */
    __m256 shift = _mm256_andnot_ps(_mm256_cmp_ps(new_max, minus_inf, _CMP_EQ_OQ), new_max);
    __m256 sum = _mm256_setzero_ps();
    for (int64_t j = 0; j < keys; j++) {
      float *s = scores + j * lanes + r0;
      __m256 p = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(s), shift));
      _mm256_storeu_ps(s, p);
      sum = _mm256_add_ps(sum, p);
    }
    __m256 factor = exp_avx2(_mm256_sub_ps(old_max, shift));
    _mm256_storeu_ps(correction + r0, factor);
    _mm256_storeu_ps(row_sum + r0, _mm256_fmadd_ps(_mm256_loadu_ps(row_sum + r0), factor, sum));
    _mm256_storeu_ps(row_max + r0, new_max);
  }
}

/* Block: 4 rows by 16 channels (8 accumulators). */
AVX2 static void accumulate_avx2(const float *p, int64_t lanes, int64_t rows, const float *v,
                                 int64_t v_stride, int64_t keys, int64_t dim,
                                 const float *correction, float *acc) {
  for (int64_t r0 = 0; r0 < rows; r0 += 4) {
    const float *p0 = p + r0;
    __m256 f0 = _mm256_broadcast_ss(correction + r0), f1 = _mm256_broadcast_ss(correction + r0 + 1),
           f2 = _mm256_broadcast_ss(correction + r0 + 2),
           f3 = _mm256_broadcast_ss(correction + r0 + 3);
    for (int64_t c0 = 0; c0 < dim; c0 += 16) {
      float *o = acc + r0 * dim + c0;
      __m256 a00 = _mm256_mul_ps(_mm256_loadu_ps(o), f0);
      __m256 a01 = _mm256_mul_ps(_mm256_loadu_ps(o + 8), f0);
      __m256 a10 = _mm256_mul_ps(_mm256_loadu_ps(o + dim), f1);
      __m256 a11 = _mm256_mul_ps(_mm256_loadu_ps(o + dim + 8), f1);
      __m256 a20 = _mm256_mul_ps(_mm256_loadu_ps(o + 2 * dim), f2);
      __m256 a21 = _mm256_mul_ps(_mm256_loadu_ps(o + 2 * dim + 8), f2);
      __m256 a30 = _mm256_mul_ps(_mm256_loadu_ps(o + 3 * dim), f3);
      __m256 a31 = _mm256_mul_ps(_mm256_loadu_ps(o + 3 * dim + 8), f3);
      const float *v_col = v + c0;
      for (int64_t j = 0; j < keys; j++) {
        __m256 v0 = _mm256_loadu_ps(v_col + j * v_stride);
        __m256 v1 = _mm256_loadu_ps(v_col + j * v_stride + 8);
        const float *pj = p0 + j * lanes;
        __m256 b = _mm256_broadcast_ss(pj);
        a00 = _mm256_fmadd_ps(b, v0, a00);
        a01 = _mm256_fmadd_ps(b, v1, a01);
        b = _mm256_broadcast_ss(pj + 1);
        a10 = _mm256_fmadd_ps(b, v0, a10);
        a11 = _mm256_fmadd_ps(b, v1, a11);
        b = _mm256_broadcast_ss(pj + 2);
        a20 = _mm256_fmadd_ps(b, v0, a20);
        a21 = _mm256_fmadd_ps(b, v1, a21);
        b = _mm256_broadcast_ss(pj + 3);
        a30 = _mm256_fmadd_ps(b, v0, a30);
        a31 = _mm256_fmadd_ps(b, v1, a31);
      }
      _mm256_storeu_ps(o, a00);
      _mm256_storeu_ps(o + 8, a01);
      _mm256_storeu_ps(o + dim, a10);
      _mm256_storeu_ps(o + dim + 8, a11);
      _mm256_storeu_ps(o + 2 * dim, a20);
      _mm256_storeu_ps(o + 2 * dim + 8, a21);
      _mm256_storeu_ps(o + 3 * dim, a30);
      _mm256_storeu_ps(o + 3 * dim + 8, a31);
    }
  }
}

static const attention_kernels AVX2_KERNELS = {"avx2", load_row_avx2, score_avx2, softmax_avx2,
                                               accumulate_avx2};
#endif

/* The plugin's instruction set (TESSERA_CPU_ISA may lower it), and F16C,
 * which AVX2 machines have but __builtin_cpu_supports cannot ask about in
 * clang 14: CPUID.1:ECX bit 29. */
static const attention_kernels *select_kernels(void) {
#if CPU_KERNELS_HAVE_AVX2
  unsigned int eax, ebx, ecx, edx;
  int f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx >> 29 & 1u);
  if (cpu_isa_active() >= CPU_ISA_AVX2 && f16c)
    return &AVX2_KERNELS;
#endif
  return &BASELINE_KERNELS;
}

/* ---- the block loop ---- */

/* One task: query positions [i0, i0 + positions) of all the query heads that
 * share kv head `kv_head` in batch `batch`. Its rows are (head in group,
 * position), group-major, so each key and value tile is loaded once for the
 * whole group (GQA, MQA and decoding with Sq = 1 gain the most). */
static void attention_block(const attention_job *job, float *scratch, int64_t task) {
  const attention_kernels *kernels = job->kernels;
  const tsr_attention_args *args = job->args;
  const tsr_plugin_tensor *q = &args->q, *k = &args->k, *v = &args->v;
  const int64_t head_dim = job->head_dim, dim_pad = job->dim_pad, group = job->group;
  int64_t q_block = task % job->q_blocks;
  int64_t batch_kv_head = task / job->q_blocks;
  int64_t kv_head = batch_kv_head % job->kv_heads;
  int64_t batch = batch_kv_head / job->kv_heads;
  int64_t i0 = q_block * job->block_positions;
  int64_t positions = min_i64(job->block_positions, job->q_len - i0);
  int64_t rows = group * positions;
  int64_t rows_pad = round_up(rows, ROW_BLOCK);
  int64_t lanes = rows_pad + LANE_PAD;
  int64_t shift = job->kv_len - job->q_len; /* key position of query position 0 */
  /* Causal is window_right = 0 (the core sets it); the flag is honoured anyway. */
  int64_t left = args->window_left, right = args->causal ? 0 : args->window_right;

  const int64_t v_stride = job->v_stride, lanes_max = job->rows_pad + LANE_PAD;
  float *qt = scratch;
  float *k_tile = qt + head_dim * lanes_max;
  float *v_tile = k_tile + job->block_kv * head_dim;
  float *scores = v_tile + job->block_kv * v_stride;
  float *acc = scores + job->block_kv * lanes_max;
  float *row_max = acc + job->rows_pad * dim_pad;
  float *row_sum = row_max + job->rows_pad;
  float *correction = row_sum + job->rows_pad;
  float *q_row = correction + job->rows_pad;
  int32_t *lo = (int32_t *)(q_row + head_dim);
  int32_t *hi = lo + job->rows_pad;

  for (int64_t r = 0; r < rows_pad; r++) {
    row_max[r] = -INFINITY;
    row_sum[r] = 0.0f;
  }
  memset(acc, 0, (size_t)(rows_pad * dim_pad) * sizeof(float));

  /* Keys any row of the block can see; key blocks outside are never touched. */
  int64_t first_pos = i0 + shift, last_pos = i0 + positions - 1 + shift;
  int64_t key_lo = left < 0 ? 0 : max_i64(0, first_pos - left);
  int64_t key_hi = right < 0 ? job->kv_len - 1 : min_i64(job->kv_len - 1, last_pos + right);

  if (key_lo <= key_hi) {
    for (int64_t r = 0; r < rows_pad; r++) {
      if (r < rows) {
        int64_t head = kv_head * group + r / positions, i = i0 + r % positions;
        int64_t offset = batch * q->strides[0] + i * q->strides[1] + head * q->strides[2];
        kernels->load_row(q_row, job->q_base, job->dtype, offset, q->strides[3], head_dim);
        for (int64_t d = 0; d < head_dim; d++)
          qt[d * lanes + r] = q_row[d] * args->scale;
      } else { /* padding rows take part in the products: keep them finite */
        for (int64_t d = 0; d < head_dim; d++)
          qt[d * lanes + r] = 0.0f;
      }
    }
  }

  for (int64_t j0 = key_lo; j0 <= key_hi; j0 += job->block_kv) {
    int64_t keys = min_i64(job->block_kv, key_hi + 1 - j0);
    int64_t k_offset = batch * k->strides[0] + j0 * k->strides[1] + kv_head * k->strides[2];
    int64_t v_offset = batch * v->strides[0] + j0 * v->strides[1] + kv_head * v->strides[2];
    /* Copied even for f32: rows of a BSHD tensor are often 4 KiB apart, which
     * makes the tile loops miss in cache. Value channels past head_dim stay
     * zero from the first clear. */
    for (int64_t j = 0; j < keys; j++) {
      kernels->load_row(k_tile + j * head_dim, job->k_base, job->dtype,
                        k_offset + j * k->strides[1], k->strides[3], head_dim);
      kernels->load_row(v_tile + j * v_stride, job->v_base, job->dtype,
                        v_offset + j * v->strides[1], v->strides[3], head_dim);
    }

    kernels->score(qt, lanes, rows_pad, k_tile, head_dim, keys, head_dim, scores);

    /* Each row sees one contiguous run [lo, hi] of the tile (empty: lo > hi). */
    int all_visible = 1;
    for (int64_t r = 0; r < rows_pad; r++) {
      int64_t first = 1, last = 0;
      if (r < rows) {
        int64_t pos = i0 + r % positions + shift;
        first = left < 0 ? 0 : max_i64(0, pos - left - j0);
        last = right < 0 ? keys - 1 : min_i64(keys - 1, pos + right - j0);
        first = min_i64(first, keys);
        last = max_i64(last, -1);
        all_visible &= first == 0 && last == keys - 1;
      }
      lo[r] = (int32_t)first;
      hi[r] = (int32_t)last;
    }
    kernels->softmax(scores, lanes, rows_pad, keys, lo, hi, all_visible, row_max, row_sum,
                     correction);
    kernels->accumulate(scores, lanes, rows_pad, v_tile, v_stride, keys, dim_pad, correction, acc);
  }

  const tsr_plugin_tensor *o = &args->o, *lse = &args->lse;
  for (int64_t r = 0; r < rows; r++) {
    int64_t head = kv_head * group + r / positions, i = i0 + r % positions;
    float *acc_row = acc + r * dim_pad;
    float inverse = row_sum[r] > 0.0f ? 1.0f / row_sum[r] : 0.0f;
    int64_t offset = batch * o->strides[0] + i * o->strides[1] + head * o->strides[2];
    for (int64_t d = 0; d < head_dim; d++)
      tsr_store_from_f32(job->o_base, job->dtype, offset + d * o->strides[3], acc_row[d] * inverse);
    if (job->lse_base) {
      float value = row_sum[r] > 0.0f ? row_max[r] + logf(row_sum[r]) : -INFINITY;
      job->lse_base[batch * lse->strides[0] + head * lse->strides[1] + i * lse->strides[2]] = value;
    }
  }
}

static void attention_range(void *context, int64_t begin, int64_t end, int worker) {
  const attention_job *job = context;
  float *scratch = job->scratch + (size_t)worker * job->worker_floats;
  for (int64_t task = begin; task < end; task++)
    attention_block(job, scratch, task);
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

  int64_t block_q = config && config->block_q > 0 ? config->block_q : 64;
  job.block_kv = config && config->block_kv > 0 ? config->block_kv : 64;
  job.block_positions = min_i64(max_i64(1, block_q / job.group), job.q_len);
  job.block_kv = max_i64(1, min_i64(job.block_kv, job.kv_len));
  job.q_blocks = (job.q_len + job.block_positions - 1) / job.block_positions;
  job.rows_pad = round_up(job.group * job.block_positions, ROW_BLOCK);
  job.dim_pad = round_up(job.head_dim, DIM_BLOCK);
  job.v_stride = job.dim_pad + LANE_PAD;
  job.kernels = select_kernels();
  /* qt, k tile, v tile, scores, acc, max, sum, correction, one q row, lo, hi */
  int64_t lanes = job.rows_pad + LANE_PAD;
  int64_t floats = job.head_dim * lanes + job.block_kv * job.head_dim +
                   job.block_kv * job.v_stride + job.block_kv * lanes + job.rows_pad * job.dim_pad +
                   3 * job.rows_pad + job.head_dim + 2 * job.rows_pad;
  job.worker_floats = (size_t)round_up(floats, FLOATS_PER_LINE);

  int threads = cpu_pool_threads(exec->pool);
  size_t bytes = job.worker_floats * sizeof(float) * (size_t)(threads > 0 ? threads : 1);
  job.scratch = aligned_alloc(64, bytes);
  if (!job.scratch) {
    if (exec->error && exec->error_capacity > 0)
      snprintf(exec->error, exec->error_capacity, "cannot allocate %zu bytes of attention scratch",
               bytes);
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  /* Zeroed once: tile padding (value channels past head_dim) is never written. */
  memset(job.scratch, 0, bytes);

  int64_t tasks = batch * job.kv_heads * job.q_blocks;
  cpu_pool_parallel_for(exec->pool, tasks, 1, attention_range, &job);
  free(job.scratch);
  return TSR_OK;
}
