/* SPDX-License-Identifier: Apache-2.0 */
/* Attention forward on the CPU, flash style. A task owns a block of query
 * positions of one sequence, of all the query heads that share one kv head
 * (GQA/MQA groups use each key and value tile once for the whole group), and
 * streams the visible key tiles through an online softmax, so nothing of
 * size Sq x Skv is ever held. Every layout runs here: where a sequence's
 * rows lie comes from attention_seq.c (dense, packed or paged, per-sequence
 * lengths); a shorter sequence's tasks past its end return at once. Decode
 * problems go to attention_decode.c instead (the config's method).
 *
 * Per key tile: S = Q K^T and O += P V are products of the GEMM's own
 * micro-kernels (cpu_tile_gemm_f32), reading f32 keys and values where they
 * lie (any strides; a paged tile's f32 keys are turned block by block, its
 * values and other dtypes are converted into a tile first). Between the two
 * products the softcap (when asked) and a row-wise online softmax turn S
 * into P in place, with the causal / sliding-window mask, and rescale O's
 * rows when their running maximum grows. Those steps come in plain C and, on
 * x86-64, AVX2 and AVX-512 versions picked by the plugin's instruction set. */
#include "attention.h"

enum { FLOATS_PER_LINE = 16 };
/* One thread's rate through the tile GEMM (AVX-512): the split cost
 * model's input (cpu_grain). */
#define ATTENTION_FLOPS_PER_NS 100.0
/* Extra floats per tile row: rows a power of two apart would all fall into
 * the same few cache sets. */
enum { ROW_PAD = 16 };

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

/* The softcap in plain C: tanhf, with a score that is not finite turned
 * into NaN. */
static void softcap_rows_generic(float *s, int64_t ld, int64_t rows, int64_t keys, float cap) {
  for (int64_t r = 0; r < rows; r++) {
    float *row = s + r * ld;
    for (int64_t j = 0; j < keys; j++)
      row[j] = isfinite(row[j]) ? cap * tanhf(row[j] / cap) : NAN;
  }
}

const attention_kernels cpu_attention_kernels_generic = {softmax_rows_generic, rescale_rows_generic,
                                                         transpose_generic, softcap_rows_generic};

/* ---- the tile loop ---- */

typedef struct attention_job {
  const tsr_attention_args *args;
  const attention_geometry *g;
  kernel_level level;
  const attention_kernels *kernels;
  const char *q_base, *k_base, *v_base;
  char *o_base;
  float *lse_base;
  int32_t dtype;
  int direct; /* f32 keys and values with unit dim stride: tiles read where they lie */
  int gather; /* some tiles are converted or gathered into scratch */
  int64_t q_heads, kv_heads, group, head_dim;
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
  float *k, *v; /* block_kv x kv_ld: converted or gathered key and value tiles */
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
  p += job->gather ? job->block_kv * job->kv_ld : 0;
  t.v = p;
  p += job->gather ? job->block_kv * job->kv_ld : 0;
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
                   (job->gather ? 2 * job->block_kv * job->kv_ld : 0) + job->head_dim * job->s_ld +
                   3 * job->rows_max + 2 * job->rows_max /* visible_keys: two int32 per row */;
  return (size_t)round_up(floats, FLOATS_PER_LINE);
}

/* One task: query positions [i0, i0 + positions) of all the query heads that
 * share kv head `kv_head` in sequence `batch`. Its rows are (head in group,
 * position), group-major. */
static void attention_block(const attention_job *job, const attention_tiles *t, int64_t task) {
  const tsr_attention_args *args = job->args;
  const attention_geometry *g = job->g;
  const tsr_plugin_tensor *q = &args->q, *k = &args->k, *v = &args->v;
  const int64_t head_dim = job->head_dim, group = job->group;
  int64_t q_block = task % job->q_blocks;
  int64_t batch_kv_head = task / job->q_blocks;
  int64_t kv_head = batch_kv_head % job->kv_heads;
  int64_t batch = batch_kv_head / job->kv_heads;
  const tsr_plugin_attention_seq *seq = &g->seqs[batch];
  int64_t i0 = q_block * job->block_positions;
  if (seq->fault >= 0 || i0 >= seq->q_len)
    return; /* at fault (poisoned already), or a block past a shorter sequence */
  int64_t positions = min_i64(job->block_positions, seq->q_len - i0);
  int64_t rows = group * positions;
  int64_t shift = seq->kv_len - seq->q_len; /* key position of query position 0 */
  /* Causal is window_right = 0 (the core sets it); the flag is honoured anyway. */
  int64_t left = args->window_left, right = args->causal ? 0 : args->window_right;

  for (int64_t r = 0; r < rows; r++) {
    t->row_max[r] = -INFINITY;
    t->row_sum[r] = 0.0f;
    memset(t->o + r * job->o_ld, 0, (size_t)head_dim * sizeof(float));
  }

  /* Keys any row of the block can see; tiles outside are never touched. */
  int64_t key_lo, key_hi;
  attention_key_range(seq->q_len, seq->kv_len, i0, positions, left, right, &key_lo, &key_hi);

  if (key_lo <= key_hi) {
    for (int64_t r = 0; r < rows; r++) {
      int64_t head = kv_head * group + r / positions, i = i0 + r % positions;
      float *q_row = t->q + r * job->q_ld;
      load_row(job->level, q_row, job->q_base, job->dtype, attention_q_offset(g, q, batch, head, i),
               g->q_dim_stride, head_dim, NULL);
      for (int64_t d = 0; d < head_dim; d++)
        q_row[d] *= args->scale;
    }
  }

  for (int64_t j0 = key_lo; j0 <= key_hi; j0 += job->block_kv) {
    int64_t keys = min_i64(job->block_kv, key_hi + 1 - j0);
    int64_t k_key_stride, v_key_stride;
    int64_t run = attention_kv_run(g, k, j0, &k_key_stride);
    attention_kv_run(g, v, j0, &v_key_stride);
    const float *v_tile;
    int64_t v_dim_stride;
    if (job->direct && run >= keys) {
      const float *k_tile =
          (const float *)job->k_base + attention_kv_offset(g, k, batch, kv_head, j0);
      v_tile = (const float *)job->v_base + attention_kv_offset(g, v, batch, kv_head, j0);
      v_dim_stride = g->v_dim_stride;
      /* S = Q K^T with K^T turned into rows first: the GEMM packs row-major
       * operands fastest. */
      job->kernels->transpose(t->kt, job->s_ld, k_tile, k_key_stride, keys, head_dim);
    } else if (job->direct) {
      /* f32 keys of a paged tile, block by block: turned where they lie
       * (the transpose copies them anyway); values gathered into a tile */
      for (int64_t r = 0; r < keys;) {
        int64_t n = min_i64(attention_kv_run(g, k, j0 + r, &k_key_stride), keys - r);
        const float *k_run =
            (const float *)job->k_base + attention_kv_offset(g, k, batch, kv_head, j0 + r);
        job->kernels->transpose(t->kt + r, job->s_ld, k_run, k_key_stride, n, head_dim);
        r += n;
      }
      attention_gather_rows(job->level, t->v, job->kv_ld, g, v, job->v_base, g->v_dim_stride, batch,
                            kv_head, j0, keys);
      v_tile = t->v;
      v_key_stride = job->kv_ld;
      v_dim_stride = 1;
    } else {
      attention_gather_rows(job->level, t->k, job->kv_ld, g, k, job->k_base, g->k_dim_stride, batch,
                            kv_head, j0, keys);
      attention_gather_rows(job->level, t->v, job->kv_ld, g, v, job->v_base, g->v_dim_stride, batch,
                            kv_head, j0, keys);
      v_tile = t->v;
      v_key_stride = job->kv_ld;
      v_dim_stride = 1;
      job->kernels->transpose(t->kt, job->s_ld, t->k, job->kv_ld, keys, head_dim);
    }
    cpu_tile_gemm_f32(rows, keys, head_dim, t->q, job->q_ld, t->kt, job->s_ld, 1, t->s, job->s_ld,
                      0);
    if (g->softcap > 0.0f)
      job->kernels->softcap_rows(t->s, job->s_ld, rows, keys, g->softcap);

    /* Each row sees one contiguous run [first, last] of the tile. */
    int all_visible = 1;
    for (int64_t r = 0; r < rows; r++) {
      t->visible[r] = attention_visible(i0 + r % positions + shift, j0, keys, left, right);
      all_visible &= t->visible[r].first == 0 && t->visible[r].last == keys - 1;
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
    store_row(job->level, job->o_base, job->dtype, attention_q_offset(g, o, batch, head, i),
              g->o_dim_stride, o_row, head_dim, 0);
    if (job->lse_base) {
      float value = t->row_sum[r] == 0.0f ? -INFINITY : t->row_max[r] + logf(t->row_sum[r]);
      job->lse_base[attention_lse_offset(g, lse, batch, head, i)] = value;
    }
  }
}

static void attention_range(void *context, int64_t begin, int64_t end, int worker) {
  const attention_job *job = context;
  attention_tiles tiles = worker_tiles(job, worker);
  for (int64_t task = begin; task < end; task++)
    attention_block(job, &tiles, task);
}

/* The flash-tile path: tasks (sequence, kv head, block of query positions),
 * as many blocks per sequence as the longest one needs (a shorter sequence's
 * extra tasks return at once). */
static tsr_status attention_tiles_run(const cpu_exec *exec, const attention_geometry *g,
                                      const cpu_attention_config *config) {
  const tsr_attention_args *args = g->args;
  attention_job job;
  memset(&job, 0, sizeof job);
  job.args = args;
  job.g = g;
  job.q_base = cpu_tensor_base(&args->q);
  job.k_base = cpu_tensor_base(&args->k);
  job.v_base = cpu_tensor_base(&args->v);
  job.o_base = cpu_tensor_base(&args->o);
  job.lse_base = args->lse.buffer ? (float *)cpu_tensor_base(&args->lse) : NULL;
  job.dtype = args->q.dtype;
  job.q_heads = g->q_heads;
  job.head_dim = g->head_dim;
  job.kv_heads = g->kv_heads;
  if (g->batch <= 0 || g->longest_q == 0 || job.q_heads == 0 || job.kv_heads == 0)
    return TSR_OK;
  job.group = g->group;
  job.level = cpu_kernel_level();
  job.kernels = select_kernels(job.level);
  job.direct = job.dtype == TSR_DTYPE_F32 && g->k_dim_stride == 1 && g->v_dim_stride == 1;
  /* paged tiles lie in one block only when the block holds whole tiles */
  job.gather = !job.direct || g->paged;

  int64_t block_q = config && config->block_q > 0 ? config->block_q : 64;
  job.block_kv = config && config->block_kv > 0 ? config->block_kv : 64;
  job.block_positions = min_i64(max_i64(1, block_q / job.group), g->longest_q);
  job.block_kv = max_i64(1, min_i64(job.block_kv, g->longest_kv));
  job.q_blocks = (g->longest_q + job.block_positions - 1) / job.block_positions;
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

  int64_t tasks = g->batch * job.kv_heads * job.q_blocks;
  /* a task's products: its rows against the longest key range, QK and PV */
  double task_flops = 4.0 * (double)job.rows_max * (double)g->longest_kv * (double)job.head_dim;
  cpu_pool_parallel_for(exec->pool, tasks, cpu_grain(task_flops / ATTENTION_FLOPS_PER_NS),
                        attention_range, &job);
  free(job.scratch);
  return TSR_OK;
}

tsr_status cpu_attention_run(const cpu_exec *exec, const tsr_attention_args *args,
                             const cpu_attention_config *config) {
  attention_geometry g;
  tsr_status status = attention_geometry_init(&g, exec, args);
  if (status == TSR_OK) {
    if (config && config->method == CPU_ATTENTION_DECODE)
      status = cpu_attention_decode_run(exec, &g, config);
    else
      status = attention_tiles_run(exec, &g, config);
  }
  attention_geometry_free(&g);
  return status;
}
