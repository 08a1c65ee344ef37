/* SPDX-License-Identifier: Apache-2.0 */
/* Split-KV attention for decode (flash-decoding): few query rows per
 * sequence against long keys, where reading K and V is the whole cost.
 *
 * A unit is (sequence, a block of its query positions) with every query
 * head: its rows are (head, position), so the rows of one kv head's GQA
 * group are adjacent and each key and value row is read once per kv head
 * and serves the whole group. A unit's visible keys are cut into chunks; a
 * work item is one chunk of one unit. Items are handed out one by one,
 * longest first, so a long sequence cannot hold up the end of the call; an
 * item of a unit with one chunk writes o and lse itself, the others write
 * partial (o, max, sum) that one combine pass then merges per row.
 *
 * An item walks its keys in tiles of 32 (at D = 128) and reads each tile's
 * rows in order, every kv head's piece of a row together (a key row's heads
 * lie side by side in every layout): first the key rows, for every head's
 * scores, then the value rows, for every head's P V. (One item per kv head,
 * reading 256 bytes of every 2 KiB row on its own, read paged decode at
 * 2.8 GB/s of 22; reading a tile head by head instead of row by row still
 * cost a quarter of the rate.) The rows are either converted into f32
 * tiles (any dtype, strides, layout; attention_decode_avx*.c products) or,
 * for bf16 on AVX512_BF16, used as they are (attention_decode_bf16.c); the
 * scores are softcapped and masked in the online softmax (attention.h's
 * steps). While a tile is read, the next tile's rows are prefetched into
 * L2: in a paged cache they lie in other blocks, where the hardware's
 * prefetchers do not look. */
#include "attention.h"

enum {
  DECODE_Q_BLOCK = 16,         /* query positions per unit, at most */
  DECODE_UNIT_ROWS = 256,      /* (head, position) rows per unit, about: q and o stay in L2 */
  DECODE_MIN_CHUNK = 512,      /* auto chunks: no shorter (a partial costs a row write) */
  DECODE_ITEMS_PER_THREAD = 4, /* auto chunks: about this many items per thread */
  DECODE_FLOATS_PER_LINE = 16
};
/* Partials kept at most (floats): a fixed chunk on long prefill problems
 * would otherwise ask for the output times the chunks; longer chunks then. */
#define DECODE_MAX_PARTIAL_FLOATS ((int64_t)1 << 26)

/* ---- plain C kernels ---- */

static void decode_scores_generic(const float *q, int64_t q_ld, int64_t rows, const float *k,
                                  int64_t k_ld, int64_t keys, int64_t dim, float *s, int64_t s_ld) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < keys; j++) {
      const float *a = q + r * q_ld, *b = k + j * k_ld;
      float sum = 0.0f;
      for (int64_t c = 0; c < dim; c++)
        sum += a[c] * b[c];
      s[r * s_ld + j] = sum;
    }
}

static void decode_pv_generic(const float *p, int64_t p_ld, int64_t rows, const float *v,
                              int64_t v_ld, int64_t keys, int64_t dim, float *o, int64_t o_ld) {
  for (int64_t r = 0; r < rows; r++) {
    float *out = o + r * o_ld;
    for (int64_t j = 0; j < keys; j++) {
      const float w = p[r * p_ld + j], *row = v + j * v_ld;
      for (int64_t c = 0; c < dim; c++)
        out[c] += w * row[c];
    }
  }
}

const decode_kernels cpu_decode_kernels_generic = {decode_scores_generic, decode_pv_generic};

/* ---- units, items, scratch ---- */

typedef struct decode_unit {
  int64_t b, i0, positions;
  int64_t key_lo, key_hi; /* the keys any of its rows sees (empty: lo > hi) */
  int64_t chunks;
  int64_t partial; /* its first partial slot when chunks > 1 */
} decode_unit;

typedef struct decode_item {
  int64_t unit, chunk;
  int64_t key_lo, key_hi;
} decode_item;

/* One thread's read rate of K/V rows (bytes per ns): the split cost model's
 * input. */
#define DECODE_BYTES_PER_NS 12.0

typedef struct decode_job {
  const attention_geometry *g;
  int64_t total_keys; /* over every unit: the work to split */
  const tsr_attention_args *args;
  kernel_level level;
  const attention_kernels *steps;
  const decode_kernels *kernels;
  const decode_bf16_kernels *bf16; /* bf16 rows read in place; NULL: the f32 tiles */
  const char *q_base, *k_base, *v_base;
  char *o_base;
  float *lse_base;
  int64_t left, right;    /* the windows (-1: unbounded) */
  int64_t tile;           /* keys per tile, a multiple of 16 */
  int64_t unit_positions; /* query positions per unit */
  int64_t rows_max, dim_padded, q_ld, s_ld, pairs_ld;
  decode_unit *units;
  decode_item *items;
  int64_t item_count;
  int64_t *split_units; /* units with partials, for the combine pass */
  int64_t split_count;
  float *partials; /* slot: rows_max x (head_dim + 2): o, then max, then sum */
  int64_t slot_floats;
  size_t worker_floats;
  float *scratch;
  int64_t next; /* the next item to take (atomic) */
} decode_job;

typedef struct decode_tiles {
  float *q;  /* rows_max x q_ld: the unit's queries, scaled (bf16 path: raw bf16) */
  float *s;  /* rows_max x s_ld: scores, then probabilities */
  float *o;  /* rows_max x q_ld: the unnormalised output */
  float *kv; /* tile x q_ld: key rows, then value rows, as f32 */
  /* bf16 path: rows_max x pairs_ld probabilities; the tile's value rows in
   * pairs (kv_heads x tile x head_dim); its rows and the next tile's (tile
   * + 16 pointers each) */
  uint16_t *pairs, *v_pairs;
  const uint16_t **k_rows, **v_rows, **k_next, **v_next;
  float *spare; /* q_ld: a row of output put in order */
  float *row_max, *row_sum, *correction;
  visible_keys *visible; /* rows of one kv head's group (the same for each) */
} decode_tiles;

static int64_t round_up(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

static int64_t min_i64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

/* Floats that hold `pointers` pointers, rounded to whole lines. */
static int64_t pointer_floats(int64_t pointers) {
  return round_up(pointers * (int64_t)sizeof(void *) / (int64_t)sizeof(float),
                  DECODE_FLOATS_PER_LINE);
}

static decode_tiles worker_tiles(const decode_job *job, int worker) {
  decode_tiles t;
  float *p = job->scratch + (size_t)worker * job->worker_floats;
  t.q = p;
  p += job->rows_max * job->q_ld;
  t.s = p;
  p += job->rows_max * job->s_ld;
  t.o = p;
  p += job->rows_max * job->q_ld;
  t.kv = p;
  p += job->bf16 ? 0 : job->g->kv_heads * job->tile * job->q_ld;
  t.pairs = (uint16_t *)p;
  p += job->bf16 ? job->rows_max * job->pairs_ld / 2 : 0;
  t.v_pairs = (uint16_t *)p;
  p += job->bf16 ? job->g->kv_heads * job->tile * job->g->head_dim / 2 : 0;
  const uint16_t ***lists[4] = {&t.k_rows, &t.v_rows, &t.k_next, &t.v_next};
  for (int i = 0; i < 4; i++) {
    *lists[i] = (const uint16_t **)p;
    p += job->bf16 ? pointer_floats(job->tile + 16) : 0;
  }
  t.spare = p;
  p += job->q_ld;
  t.row_max = p;
  t.row_sum = t.row_max + job->rows_max;
  t.correction = t.row_sum + job->rows_max;
  t.visible = (visible_keys *)(t.correction + job->rows_max);
  return t;
}

static size_t tiles_floats(const decode_job *job) {
  int64_t floats = job->rows_max * (2 * job->q_ld + job->s_ld) + job->q_ld + 3 * job->rows_max +
                   2 * job->rows_max /* visible_keys */;
  if (job->bf16)
    floats += job->rows_max * job->pairs_ld / 2 +
              job->g->kv_heads * job->tile * job->g->head_dim / 2 +
              4 * pointer_floats(job->tile + 16);
  else
    floats += job->g->kv_heads * job->tile * job->q_ld;
  return (size_t)round_up(floats, DECODE_FLOATS_PER_LINE);
}

/* ---- one item ---- */

/* Writes row r = (head, position) of a unit (its normalised output, and
 * lse) from the unnormalised o row and its max and sum: a row that saw no key
 * (sum 0) gets 0 and -inf, a NaN sum stays NaN through both. The bf16 path's
 * channels are put back in order first (through `spare`, a row of scratch). */
static void finish_row(const decode_job *job, const decode_unit *unit, int64_t r, float *o_row,
                       float max, float sum, float *spare) {
  const attention_geometry *g = job->g;
  int64_t head = r / unit->positions, i = unit->i0 + r % unit->positions;
  float inverse = sum == 0.0f ? 0.0f : 1.0f / sum;
  if (job->bf16) {
    for (int64_t c0 = 0; c0 < g->head_dim; c0 += 32)
      for (int64_t at = 0; at < 32; at++) /* at = 16 h + 4 L + i: channel 8 L + 4 h + i */
        spare[c0 + 8 * ((at >> 2) & 3) + 4 * (at >> 4) + (at & 3)] = o_row[c0 + at];
    o_row = spare;
  }
  for (int64_t d = 0; d < g->head_dim; d++)
    o_row[d] *= inverse;
  store_row(job->level, job->o_base, job->args->o.dtype,
            attention_q_offset(g, &job->args->o, unit->b, head, i), g->o_dim_stride, o_row,
            g->head_dim, 0);
  if (job->lse_base)
    job->lse_base[attention_lse_offset(g, &job->args->lse, unit->b, head, i)] =
        sum == 0.0f ? -INFINITY : max + logf(sum);
}

/* Before kv head `kv_head` of a tile: its rows in the next tile
 * ([j0, j0 + keys)), into L2 (attention_prefetch_rows says why). */
static void prefetch_next(const decode_job *job, int64_t b, int64_t kv_head, int64_t j0,
                          int64_t keys) {
  const attention_geometry *g = job->g;
  if (keys <= 0)
    return;
  if (g->k_dim_stride == 1)
    attention_prefetch_rows(g, &job->args->k, job->k_base, kv_head, g->head_dim, b, j0, keys);
  if (g->v_dim_stride == 1)
    attention_prefetch_rows(g, &job->args->v, job->v_base, kv_head, g->head_dim, b, j0, keys);
}

/* Rows [j0, j0 + keys) of every kv head of t as f32, key by key (so memory
 * is read in order): head h's key j at tiles + (h * tile + j) * ld. */
static void gather_all_heads(const decode_job *job, const tsr_plugin_tensor *t, const char *base,
                             int64_t dim_stride, int64_t b, int64_t j0, int64_t keys,
                             float *tiles) {
  const attention_geometry *g = job->g;
  const int64_t ld = job->q_ld, head_stride = t->strides[t->rank - 2];
  for (int64_t r = 0; r < keys;) {
    int64_t key_stride;
    int64_t run = attention_kv_run(g, t, j0 + r, &key_stride);
    if (run > keys - r)
      run = keys - r;
    int64_t offset = attention_kv_offset(g, t, b, 0, j0 + r);
    for (int64_t i = 0; i < run; i++, r++, offset += key_stride)
      for (int64_t h = 0; h < g->kv_heads; h++)
        load_row(job->level, tiles + (h * job->tile + r) * ld, base, t->dtype,
                 offset + h * head_stride, dim_stride, g->head_dim, NULL);
  }
}

/* One tile of keys [j0, j0 + keys) for every kv head, f32 tiles: the key
 * rows of every head converted in order into t->kv (any dtype, strides,
 * layout), each head scored, then the value rows the same way and each
 * head's P V. The next tile's rows are prefetched while these are read. */
static void tile_f32(const decode_job *job, const decode_tiles *t, int64_t b, int64_t j0,
                     int64_t keys, int64_t next, int64_t ahead, int64_t group_rows,
                     int all_visible) {
  const attention_geometry *g = job->g;
  const tsr_plugin_tensor *k = &job->args->k, *v = &job->args->v;
  const int64_t q_ld = job->q_ld, s_ld = job->s_ld, head_tile = job->tile * q_ld;
  for (int64_t kv_head = 0; kv_head < g->kv_heads; kv_head++)
    prefetch_next(job, b, kv_head, next, ahead);
  gather_all_heads(job, k, job->k_base, g->k_dim_stride, b, j0, keys, t->kv);
  for (int64_t kv_head = 0; kv_head < g->kv_heads; kv_head++) {
    const int64_t r0 = kv_head * group_rows;
    float *s = t->s + r0 * s_ld, *o = t->o + r0 * q_ld;
    job->kernels->scores(t->q + r0 * q_ld, q_ld, group_rows, t->kv + kv_head * head_tile, q_ld,
                         keys, job->dim_padded, s, s_ld);
    if (g->softcap > 0.0f)
      job->steps->softcap_rows(s, s_ld, group_rows, keys, g->softcap);
    job->steps->softmax_rows(s, s_ld, group_rows, keys, t->visible, all_visible, t->row_max + r0,
                             t->row_sum + r0, t->correction + r0);
    job->steps->rescale_rows(o, q_ld, group_rows, g->head_dim, t->correction + r0);
  }
  gather_all_heads(job, v, job->v_base, g->v_dim_stride, b, j0, keys, t->kv);
  for (int64_t kv_head = 0; kv_head < g->kv_heads; kv_head++) {
    const int64_t r0 = kv_head * group_rows;
    job->kernels->pv(t->s + r0 * s_ld, s_ld, group_rows, t->kv + kv_head * head_tile, q_ld, keys,
                     job->dim_padded, t->o + r0 * q_ld, q_ld);
  }
}

/* Row pointers (kv head 0) of keys [j0, j0 + keys) of sequence b in t,
 * the last repeated up to a multiple of 16. */
static void row_pointers(const attention_geometry *g, const tsr_plugin_tensor *t, const char *base,
                         int64_t b, int64_t j0, int64_t keys, const uint16_t **rows) {
  for (int64_t r = 0; r < keys;) {
    int64_t key_stride;
    int64_t run = attention_kv_run(g, t, j0 + r, &key_stride);
    if (run > keys - r)
      run = keys - r;
    const uint16_t *row = (const uint16_t *)base + attention_kv_offset(g, t, b, 0, j0 + r);
    for (int64_t i = 0; i < run; i++, r++, row += key_stride)
      rows[r] = row;
  }
  for (int64_t r = keys; r < round_up(keys, 16); r++)
    rows[r] = rows[keys - 1];
}

/* The same tile for bf16 rows read in place (attention_decode_bf16.c): the
 * key rows in order for every head's scores, the softmax per head, the
 * value rows in order into interleaved pairs, P V per head. */
static void tile_bf16(const decode_job *job, const decode_tiles *t, int64_t b, int64_t j0,
                      int64_t keys, int64_t next, int64_t ahead, int64_t group_rows,
                      int all_visible) {
  const attention_geometry *g = job->g;
  const tsr_plugin_tensor *k = &job->args->k, *v = &job->args->v;
  const int64_t q_ld = job->q_ld, s_ld = job->s_ld, kr = k->rank;
  row_pointers(g, k, job->k_base, b, j0, keys, t->k_rows);
  row_pointers(g, v, job->v_base, b, j0, keys, t->v_rows);
  if (ahead > 0) {
    row_pointers(g, k, job->k_base, b, next, ahead, t->k_next);
    row_pointers(g, v, job->v_base, b, next, ahead, t->v_next);
  }
  const decode_bf16_tile tile = {
      t->k_rows, t->v_rows,   t->k_next,   t->v_next,          keys,
      ahead,     g->kv_heads, g->head_dim, k->strides[kr - 2], v->strides[kr - 2]};
  job->bf16->scores(&tile, (const uint16_t *)t->q, 2 * q_ld, group_rows, job->args->scale, t->s,
                    s_ld);
  const int64_t rows = g->kv_heads * group_rows;
  if (g->softcap > 0.0f)
    job->steps->softcap_rows(t->s, s_ld, rows, keys, g->softcap);
  for (int64_t kv_head = 0; kv_head < g->kv_heads; kv_head++) {
    const int64_t r0 = kv_head * group_rows;
    job->steps->softmax_rows(t->s + r0 * s_ld, s_ld, group_rows, keys, t->visible, all_visible,
                             t->row_max + r0, t->row_sum + r0, t->correction + r0);
  }
  job->steps->rescale_rows(t->o, q_ld, rows, g->head_dim, t->correction);
  job->bf16->p_pairs(t->s, s_ld, rows, keys, t->pairs, job->pairs_ld);
  job->bf16->interleave(&tile, t->v_pairs);
  const int64_t head_pairs = (keys + 1) / 2 * 2 * g->head_dim;
  for (int64_t kv_head = 0; kv_head < g->kv_heads; kv_head++) {
    const int64_t r0 = kv_head * group_rows;
    job->bf16->pv(t->pairs + r0 * job->pairs_ld, job->pairs_ld, group_rows,
                  t->v_pairs + kv_head * head_pairs, keys, g->head_dim, t->o + r0 * q_ld, q_ld);
  }
}

static void run_item(const decode_job *job, const decode_tiles *t, const decode_item *item) {
  const attention_geometry *g = job->g;
  const tsr_plugin_tensor *q = &job->args->q;
  const decode_unit *unit = &job->units[item->unit];
  const tsr_plugin_attention_seq *seq = &g->seqs[unit->b];
  const int64_t b = unit->b, positions = unit->positions, head_dim = g->head_dim;
  const int64_t rows = g->q_heads * positions, group_rows = g->group * positions;
  const int64_t shift = seq->kv_len - seq->q_len; /* key position of query 0 */
  const int64_t q_ld = job->q_ld;

  for (int64_t r = 0; r < rows; r++) {
    t->row_max[r] = -INFINITY;
    t->row_sum[r] = 0.0f;
    memset(t->o + r * q_ld, 0, (size_t)head_dim * sizeof(float));
  }
  for (int64_t r = 0; item->key_lo <= item->key_hi && r < rows; r++) {
    int64_t offset = attention_q_offset(g, q, b, r / positions, unit->i0 + r % positions);
    if (job->bf16) { /* bf16 as it is: the pair products need it so */
      uint16_t *q_row = (uint16_t *)t->q + r * 2 * q_ld;
      const uint16_t *from = (const uint16_t *)job->q_base + offset;
      for (int64_t d = 0; d < head_dim; d++)
        q_row[d] = from[d * g->q_dim_stride];
      continue;
    }
    float *q_row = t->q + r * q_ld;
    load_row(job->level, q_row, job->q_base, q->dtype, offset, g->q_dim_stride, head_dim, NULL);
    for (int64_t d = 0; d < head_dim; d++)
      q_row[d] *= job->args->scale;
  }

  for (int64_t j0 = item->key_lo; j0 <= item->key_hi; j0 += job->tile) {
    const int64_t keys = min_i64(job->tile, item->key_hi + 1 - j0);
    const int64_t next = j0 + keys, ahead = min_i64(job->tile, item->key_hi + 1 - next);
    int all_visible = 1;
    for (int64_t r = 0; r < group_rows; r++) {
      t->visible[r] =
          attention_visible(unit->i0 + r % positions + shift, j0, keys, job->left, job->right);
      all_visible &= t->visible[r].first == 0 && t->visible[r].last == keys - 1;
    }
    if (job->bf16)
      tile_bf16(job, t, b, j0, keys, next, ahead, group_rows, all_visible);
    else
      tile_f32(job, t, b, j0, keys, next, ahead, group_rows, all_visible);
  }

  if (unit->chunks == 1) {
    for (int64_t r = 0; r < rows; r++)
      finish_row(job, unit, r, t->o + r * q_ld, t->row_max[r], t->row_sum[r], t->spare);
    return;
  }
  float *slot = job->partials + (unit->partial + item->chunk) * job->slot_floats;
  for (int64_t r = 0; r < rows; r++)
    memcpy(slot + r * head_dim, t->o + r * q_ld, (size_t)head_dim * sizeof(float));
  memcpy(slot + rows * head_dim, t->row_max, (size_t)rows * sizeof(float));
  memcpy(slot + rows * (head_dim + 1), t->row_sum, (size_t)rows * sizeof(float));
}

/* Each thread takes items one at a time (they are sorted longest first). */
static void run_items(void *context, int64_t share, int64_t shares, int worker) {
  (void)share;
  (void)shares;
  decode_job *job = context;
  decode_tiles tiles = worker_tiles(job, worker);
  for (;;) {
    int64_t i = __atomic_fetch_add(&job->next, 1, __ATOMIC_RELAXED);
    if (i >= job->item_count)
      break;
    run_item(job, &tiles, &job->items[i]);
  }
}

/* ---- the combine pass ---- */

/* Merges the chunks of one unit per row: M = the largest max, L = sum of
 * sum_c e^(max_c - M), o = sum of o_c e^(max_c - M) / L. A NaN sum of any
 * chunk makes L, o and lse NaN, as one pass over all keys would. */
static void combine_range(void *context, int64_t begin, int64_t end, int worker) {
  const decode_job *job = context;
  const int64_t head_dim = job->g->head_dim;
  decode_tiles tiles = worker_tiles(job, worker);
  for (int64_t u = begin; u < end; u++) {
    const decode_unit *unit = &job->units[job->split_units[u]];
    const int64_t rows = job->g->q_heads * unit->positions;
    const float *first = job->partials + unit->partial * job->slot_floats;
    for (int64_t r = 0; r < rows; r++) {
      float max = -INFINITY;
      for (int64_t c = 0; c < unit->chunks; c++) {
        float m = first[c * job->slot_floats + rows * head_dim + r];
        max = m > max ? m : max;
      }
      const float shift = safe_shift(max);
      float *o_row = tiles.o; /* one row of scratch */
      memset(o_row, 0, (size_t)head_dim * sizeof(float));
      float sum = 0.0f;
      for (int64_t c = 0; c < unit->chunks; c++) {
        const float *slot = first + c * job->slot_floats;
        float weight = exp_f32(slot[rows * head_dim + r] - shift);
        sum += slot[rows * (head_dim + 1) + r] * weight;
        const float *o_c = slot + r * head_dim;
        for (int64_t d = 0; d < head_dim; d++)
          o_row[d] += o_c[d] * weight;
      }
      finish_row(job, unit, r, o_row, max, sum, tiles.spare);
    }
  }
}

/* ---- planning ---- */

/* Keys per chunk for the config: fixed, whole, or (auto) the visible keys
 * of all units over DECODE_ITEMS_PER_THREAD items per thread, at least
 * DECODE_MIN_CHUNK; a multiple of the tile in every case. */
static int64_t chunk_keys(const cpu_attention_config *config, int64_t total_keys, int threads,
                          int64_t tile) {
  int64_t chunk;
  if (config->chunk == CPU_DECODE_CHUNK_WHOLE)
    return INT64_MAX;
  if (config->chunk > 0) {
    chunk = config->chunk;
  } else {
    int64_t items = (int64_t)(threads > 0 ? threads : 1) * DECODE_ITEMS_PER_THREAD;
    chunk = (total_keys + items - 1) / items;
    chunk = chunk < DECODE_MIN_CHUNK ? DECODE_MIN_CHUNK : chunk;
  }
  return round_up(chunk, tile);
}

static int compare_items(const void *a, const void *b) {
  const decode_item *x = a, *y = b;
  int64_t lx = x->key_hi - x->key_lo, ly = y->key_hi - y->key_lo;
  if (lx != ly)
    return lx > ly ? -1 : 1;
  return x->unit != y->unit ? (x->unit < y->unit ? -1 : 1) : (x->chunk < y->chunk ? -1 : 1);
}

static tsr_status out_of_memory(const cpu_exec *exec, const char *what) {
  if (exec->error && exec->error_capacity > 0)
    snprintf(exec->error, exec->error_capacity, "cannot allocate %s for split-KV attention", what);
  return TSR_ERROR_OUT_OF_MEMORY;
}

/* The split cost model: no more threads than CPU_CHUNK_MIN_NS pieces of the
 * K/V bytes at one thread's read rate. */
static int decode_threads(const decode_job *job, int threads) {
  const attention_geometry *g = job->g;
  double bytes = 2.0 * (double)job->total_keys * (double)g->kv_heads * (double)g->head_dim *
                 (double)tsr_plugin_dtype_size(job->args->k.dtype);
  double pieces = bytes / DECODE_BYTES_PER_NS / CPU_CHUNK_MIN_NS;
  return pieces < 1.0 ? 1 : pieces < threads ? (int)pieces : threads;
}

/* Units for every sequence computed, their chunks, the items. */
static tsr_status plan(decode_job *job, const cpu_exec *exec, const cpu_attention_config *config,
                       int threads) {
  const attention_geometry *g = job->g;
  const int64_t step = job->unit_positions;
  int64_t unit_count = 0;
  for (int64_t b = 0; b < g->batch; b++)
    if (g->seqs[b].fault < 0)
      unit_count += (g->seqs[b].q_len + step - 1) / step;
  if (unit_count == 0)
    return TSR_OK;
  job->units = malloc((size_t)unit_count * sizeof *job->units);
  if (!job->units)
    return out_of_memory(exec, "the work units");
  int64_t u = 0, total_keys = 0;
  for (int64_t b = 0; b < g->batch; b++) {
    const tsr_plugin_attention_seq *s = &g->seqs[b];
    if (s->fault >= 0)
      continue;
    for (int64_t i0 = 0; i0 < s->q_len; i0 += step, u++) {
      int64_t positions = min_i64(step, s->q_len - i0), lo, hi;
      attention_key_range(s->q_len, s->kv_len, i0, positions, job->left, job->right, &lo, &hi);
      job->units[u] = (decode_unit){b, i0, positions, lo, hi, 1, 0};
      total_keys += hi >= lo ? hi - lo + 1 : 0;
    }
  }
  job->total_keys = total_keys;
  int64_t chunk = chunk_keys(config, total_keys, threads, job->tile);
  /* Longer chunks while the partials would pass their bound. */
  for (;;) {
    int64_t items = 0, slots = 0;
    for (u = 0; u < unit_count; u++) {
      decode_unit *unit = &job->units[u];
      int64_t keys = unit->key_hi >= unit->key_lo ? unit->key_hi - unit->key_lo + 1 : 0;
      unit->chunks = keys > chunk ? (keys + chunk - 1) / chunk : 1;
      unit->partial = unit->chunks > 1 ? slots : 0;
      slots += unit->chunks > 1 ? unit->chunks : 0;
      items += unit->chunks;
    }
    if (slots * job->slot_floats <= DECODE_MAX_PARTIAL_FLOATS || chunk > INT64_MAX / 2) {
      job->item_count = items;
      if (slots > 0) {
        job->partials = malloc((size_t)(slots * job->slot_floats) * sizeof(float));
        if (!job->partials)
          return out_of_memory(exec, "the partial results");
      }
      break;
    }
    chunk *= 2;
  }
  job->items = malloc((size_t)job->item_count * sizeof *job->items);
  job->split_units = malloc((size_t)unit_count * sizeof *job->split_units);
  if (!job->items || !job->split_units)
    return out_of_memory(exec, "the work items");
  int64_t i = 0;
  for (u = 0; u < unit_count; u++) {
    const decode_unit *unit = &job->units[u];
    if (unit->chunks > 1)
      job->split_units[job->split_count++] = u;
    for (int64_t c = 0; c < unit->chunks; c++, i++) {
      int64_t lo = unit->key_lo + c * chunk;
      int64_t hi = unit->chunks == 1 ? unit->key_hi : min_i64(unit->key_hi, lo + chunk - 1);
      job->items[i] = (decode_item){u, c, lo, hi};
    }
  }
  qsort(job->items, (size_t)job->item_count, sizeof *job->items, compare_items);
  return TSR_OK;
}

static void release(decode_job *job) {
  free(job->units);
  free(job->items);
  free(job->split_units);
  free(job->partials);
  free(job->scratch);
}

tsr_status cpu_attention_decode_run(const cpu_exec *exec, const attention_geometry *g,
                                    const cpu_attention_config *config) {
  const tsr_attention_args *args = g->args;
  if (g->batch <= 0 || g->longest_q == 0 || g->q_heads == 0 || g->kv_heads == 0)
    return TSR_OK;
  decode_job job;
  memset(&job, 0, sizeof job);
  job.g = g;
  job.args = args;
  job.level = cpu_kernel_level();
  job.steps = select_kernels(job.level);
  job.kernels = select_decode_kernels(job.level);
  job.q_base = cpu_tensor_base(&args->q);
  job.k_base = cpu_tensor_base(&args->k);
  job.v_base = cpu_tensor_base(&args->v);
  job.o_base = cpu_tensor_base(&args->o);
  job.lse_base = args->lse.buffer ? (float *)cpu_tensor_base(&args->lse) : NULL;
  job.left = args->window_left;
  job.right = args->causal ? 0 : args->window_right;
  job.dim_padded = round_up(g->head_dim, 16);
#if CPU_KERNELS_HAVE_AVX2
  /* bf16 rows in place: dense channels in blocks of 32 (q's may be strided) */
  if (args->q.dtype == TSR_DTYPE_BF16 && cpu_isa_includes(cpu_isa_active(), CPU_ISA_AVX512_BF16) &&
      g->head_dim % 32 == 0 && g->k_dim_stride == 1 && g->v_dim_stride == 1)
    job.bf16 = &cpu_decode_kernels_bf16;
#endif
  /* 16 KiB of f32 per kv head and tile (32 keys at D = 128): long enough to
   * spread each row's softmax work, short enough that a tile's rows are
   * read within a short time (64 read slower than 32 in a paged cache, and
   * 16 cost more work than it saved: scratch measurements, within their
   * noise). */
  job.tile = round_up(4096 / (job.dim_padded > 0 ? job.dim_padded : 16), 16);
  job.tile = job.tile < 16 ? 16 : job.tile > 64 ? 64 : job.tile;
  /* about DECODE_UNIT_ROWS (head, position) rows: 16 positions of 16 heads,
   * 8 of 32 */
  job.unit_positions = DECODE_UNIT_ROWS / g->q_heads;
  job.unit_positions = job.unit_positions < 1                ? 1
                       : job.unit_positions > DECODE_Q_BLOCK ? DECODE_Q_BLOCK
                                                             : job.unit_positions;
  job.rows_max = g->q_heads * min_i64(job.unit_positions, g->longest_q);
  job.q_ld = job.dim_padded + DECODE_FLOATS_PER_LINE; /* rows a power of two apart share sets */
  job.s_ld = job.tile;
  job.pairs_ld = round_up(job.tile, 32) + 32;
  job.slot_floats = job.rows_max * (g->head_dim + 2);
  job.worker_floats = tiles_floats(&job);

  int threads = cpu_pool_threads(exec->pool);
  threads = threads > 0 ? threads : 1;
  tsr_status status = plan(&job, exec, config, threads);
  if (status == TSR_OK && job.item_count > 0) {
    size_t bytes = job.worker_floats * sizeof(float) * (size_t)threads;
    job.scratch = aligned_alloc(64, bytes);
    if (!job.scratch) {
      status = out_of_memory(exec, "scratch tiles");
    } else {
      /* the tiles' padding (past the head dimension) must read as zeros */
      memset(job.scratch, 0, bytes);
      cpu_pool_run_threads(exec->pool, decode_threads(&job, threads), run_items, &job);
      if (job.split_count > 0)
        cpu_pool_parallel_for(exec->pool, job.split_count, 1, combine_range, &job);
    }
  }
  release(&job);
  return status;
}
