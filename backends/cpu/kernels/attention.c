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
#include "attention.h"

enum { FLOATS_PER_LINE = 16 };
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

const attention_kernels cpu_attention_kernels_generic = {softmax_rows_generic, rescale_rows_generic,
                                                         transpose_generic};

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
