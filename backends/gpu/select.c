/* SPDX-License-Identifier: Apache-2.0 */
/* What can run a problem and which variant the heuristics pick:
 * op_supported, op_variants and op_select. Every answer depends only on the
 * problem's signature (the core caches op_select's answer per signature):
 * shapes, strides, dtypes, which tensors are present, and address
 * alignment up to 256 bytes; never on the addresses themselves, grouped
 * GEMM's group sizes or RoPE's position offset. op_select answers with a
 * config prepared at device_open (device.c), so the op path (ops.c) never
 * looks anything up. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "gpu.h"
#include "kernels/kernel_list.h"

/* ------------------------------------------------------------------------ */
/* GEMM: what can run a problem                                              */
/* ------------------------------------------------------------------------ */

static const gpu_catalog *catalog_of(const gpu_device *device) {
  return &device->plugin->catalog;
}

static bool in_arch_table(const gpu_device *device, int config) {
  return catalog_of(device)->gemm_rank[device->arch][config] >= 0;
}

/* Blocks of a config's kernel resident per SM (0: it cannot run here). */
static int resident_blocks(const gpu_device *device, int config, int32_t dtype) {
  int slot = gpu_dtype_slot(dtype);
  int kernel = slot < 0 ? -1 : catalog_of(device)->gemm_kernel[config][slot];
  return kernel >= 0 ? device->kernels[kernel].blocks_per_sm : 0;
}

/* Grouped GEMM: the mean rows per group from the rows of A and the group
 * count, both part of the signature (the sizes themselves are not). */
static gpu_gemm_shape shape_of(tsr_op op, const void *args) {
  gpu_gemm_shape s;
  memset(&s, 0, sizeof s);
  if (op == TSR_OP_GEMM) {
    const tsr_gemm_args *g = args;
    s.plain = g;
    s.m = g->d.shape[1];
    s.n = g->d.shape[2];
    s.k = g->a.shape[2];
    s.batch = g->d.shape[0];
    s.dtype = g->a.dtype;
    s.compute = g->compute;
  } else {
    const tsr_grouped_gemm_args *g = args;
    s.grouped = true;
    s.groups = g;
    int64_t rows = g->a.shape[0];
    s.m = g->group_count > 0 ? (rows + g->group_count - 1) / g->group_count : 0;
    s.n = g->d.shape[1];
    s.k = g->a.shape[1];
    s.batch = 1;
    s.dtype = g->a.dtype;
    s.compute = g->compute;
  }
  return s;
}

/* A tensor's dims other than `unit` (the unit-stride one) step in whole
 * 16-byte units, and it starts on 16 bytes: 16-byte loads reach every row. */
static bool rows_of_16_bytes(const tsr_plugin_tensor *t, int unit) {
  if (t->strides[unit] != 1 || gpu_tensor_address(t) % 16 != 0)
    return false;
  for (int d = 0; d < 3; d++)
    if (d != unit && t->shape[d] > 1 && (t->strides[d] * 2) % 16 != 0)
      return false;
  return true;
}

/* The decode kernels load 16 bytes (8 elements) at a time: A along K, B
 * along K or along N, with K (and, for N-contiguous B, N) a multiple of 8. */
static bool stream_layout_ok(const tsr_gemm_args *g) {
  int64_t k = g->a.shape[2], n = g->b.shape[2];
  if (k < 1 || k % 8 != 0 || !rows_of_16_bytes(&g->a, 2))
    return false;
  return rows_of_16_bytes(&g->b, 1) || (n % 8 == 0 && rows_of_16_bytes(&g->b, 2));
}

static bool gemm_config_runs(const gpu_device *device, int i, const gpu_gemm_shape *s) {
  const gpu_gemm_config *c = catalog_of(device)->gemm[i];
  switch (c->kind) {
  case GPU_GEMM_VENDOR:
    return in_arch_table(device, i) && resident_blocks(device, i, s->dtype) > 0 &&
           catalog_of(device)->vendor->gemm_runs(device, c, s);
  case GPU_GEMM_MMA:
    /* 16-bit data, or f32 where the row has an f32 kernel (HIP's MFMA f32:
     * true f32 products, so any compute mode) */
    return (s->dtype == TSR_DTYPE_F16 || s->dtype == TSR_DTYPE_BF16 ||
            (s->dtype == TSR_DTYPE_F32 && c->kernels[0] != NULL)) &&
           in_arch_table(device, i) && resident_blocks(device, i, s->dtype) > 0;
  case GPU_GEMM_TF32:
    return s->dtype == TSR_DTYPE_F32 && s->compute == TSR_COMPUTE_TF32 &&
           in_arch_table(device, i) && resident_blocks(device, i, s->dtype) > 0;
  case GPU_GEMM_SIMT:
    return s->dtype == TSR_DTYPE_F32;
  case GPU_GEMM_STREAM:
    return (s->dtype == TSR_DTYPE_F16 || s->dtype == TSR_DTYPE_BF16) && !s->grouped && s->m <= 16 &&
           in_arch_table(device, i) && resident_blocks(device, i, s->dtype) > 0 &&
           stream_layout_ok(s->plain);
  case GPU_GEMM_GEMV:
    return !s->grouped && s->m <= 16 &&
           (s->plain->b.strides[1] == 1 || s->plain->b.strides[2] == 1);
  }
  return false;
}

/* Tiles a config makes of the problem (grouped: of groups of the mean
 * size). */
static int64_t gemm_tiles(const gpu_gemm_config *c, const gpu_gemm_shape *s) {
  int64_t tiles_n = (s->n + c->bn - 1) / c->bn;
  if (!s->grouped)
    return (s->m + c->bm - 1) / c->bm * tiles_n * s->batch;
  return (s->m + c->bm - 1) / c->bm * tiles_n * s->groups->group_count;
}

/* Wave quantisation: the share of the device's block slots a config's tiles
 * keep busy in their last wave (with fewer tiles than SMs: the share of SMs
 * busy). */
static double gemm_utilisation(const gpu_device *device, int i, const gpu_gemm_shape *s,
                               int64_t *tiles_out, int *per_sm_out) {
  const gpu_gemm_config *c = catalog_of(device)->gemm[i];
  const int sms = device->props->multiprocessors;
  int per_sm = c->kind == GPU_GEMM_SIMT ? 1 : resident_blocks(device, i, s->dtype);
  if (per_sm < 1)
    per_sm = 1;
  int64_t tiles = gemm_tiles(c, s);
  int64_t slots = (int64_t)sms * per_sm;
  *tiles_out = tiles;
  *per_sm_out = per_sm;
  if (tiles <= 0)
    return 1.0;
  if (tiles <= slots)
    return (double)(tiles < sms ? tiles : sms) / sms;
  return (double)tiles / (double)(((tiles + slots - 1) / slots) * slots);
}

/* GEMV for M up to this; above it the tensor-core tiles won on an H200
 * (16x4096x4096: 64x64 tiles 0.067 ms, GEMV 0.125 ms; 1x8192x8192: GEMV
 * 0.084 ms, 64x64 tiles 0.122 ms). */
enum { GEMV_MAX_ROWS = 4 };
/* 16-bit GEMMs with at most this many rows take the 16-row mma tiles split
 * over K (docs/PERFORMANCE.md). */
enum { SKINNY_MAX_ROWS = 16 };
/* Strict f32: tiles per SM from which the two-blocks-an-SM SIMT kernel leads. */
enum { SIMT_MANY_WAVES = 6 };
/* A config whose last wave keeps this share of the block slots busy counts
 * as filling the GPU. */
#define GEMM_GOOD_UTILISATION 0.8

static double speedup_of(const gpu_gemm_config *c) {
  return c->speedup > 0.0 ? c->speedup : 1.0;
}

/* The arch table lists tile configs fastest first (measured on an H200 for
 * sm_90: 64x128 beat 128x128 and 128x256 at 4096^3..8192^3, since these
 * mma.sync kernels gain more from resident warps than from tile size; the
 * vendor's wgmma configs, measured on an H100, come before them all and
 * weigh their utilisation by their speedup). The pick is the first config
 * whose tiles fill the GPU; when none does (small problems), the one that
 * keeps the most SMs busy. Returns a place in `candidates`. */
static int gemm_heuristic(const gpu_device *device, const gpu_gemm_shape *s, const int *candidates,
                          int count, char *reason, size_t capacity) {
  const gpu_catalog *catalog = catalog_of(device);
  const int sms = device->props->multiprocessors;
  /* Decode shapes whose rows 16-byte loads reach: the stream configs. Up to
   * 64 MiB of weights two chunks a batch (more bytes in flight per warp
   * early on), beyond that one (more resident warps): H100, queued,
   * 16x4096x4096 17.1 against 18.7 us, 1x8192x8192 51.2 against 54.1,
   * 16x8192x28672 173-175 against 178-182 (docs/PERFORMANCE.md). */
  const bool many_weights = (double)s->k * (double)s->n * (double)s->batch * 2.0 > 64.0 * 1048576;
  const char *stream_pick = many_weights ? "stream_16x32_w8_u1" : "stream_16x32_w8_u2";
  /* Every stream config runs the same problems: one is a candidate iff all
   * of them are (each arch table lists them all). */
  int stream = -1;
  for (int i = 0; i < count && stream < 0; i++)
    if (strcmp(catalog->gemm[candidates[i]]->name, stream_pick) == 0)
      stream = i;
  if (stream >= 0) {
    if (reason)
      snprintf(reason, capacity,
               "M = %lld <= %d, 16-byte rows: B streamed straight into tensor-core fragments "
               "(16x32 tiles, split over K so that the blocks fill %d SMs; %s MiB of B)",
               (long long)s->m, SKINNY_MAX_ROWS, sms, many_weights ? "more than 64" : "up to 64");
    return stream;
  }
  /* Other decode shapes stream B once too. 16-bit: 16-row tensor-core tiles
   * split over K, except one row against a K-contiguous B, where the GEMV's
   * warp per column streamed faster (H100: 54.5 against 60.3 us at
   * 1x8192x8192). */
  bool gemv_k = s->m == 1 && !s->grouped && s->plain->b.strides[1] == 1;
  bool skinny = !s->grouped && s->dtype != TSR_DTYPE_F32 && s->m <= SKINNY_MAX_ROWS && !gemv_k;
  bool gemv = !skinny && s->m <= GEMV_MAX_ROWS;
  if (skinny) {
    /* No 16-row tensor-core tile here (a GPU without matrix cores): the GEMV
     * kernels, which take up to 16 rows, still stream B once. */
    bool tile16 = false;
    for (int i = 0; i < count && !tile16; i++)
      tile16 = catalog->gemm[candidates[i]]->kind == GPU_GEMM_MMA &&
               catalog->gemm[candidates[i]]->bm == 16;
    skinny = tile16;
    gemv = !tile16;
  }
  for (int i = 0; i < count && (skinny || gemv); i++) {
    const gpu_gemm_config *c = catalog->gemm[candidates[i]];
    if ((skinny && c->kind == GPU_GEMM_MMA && c->bm == 16) || (gemv && c->kind == GPU_GEMM_GEMV)) {
      if (reason)
        snprintf(reason, capacity,
                 "M = %lld <= %d: %s, split over K so that the blocks fill %d SMs", (long long)s->m,
                 skinny ? SKINNY_MAX_ROWS : GEMV_MAX_ROWS,
                 skinny ? "16-row tensor-core tiles stream B (the last block of a tile sums the "
                          "K slices in order)"
                        : "B streamed once by the GEMV kernels",
                 sms);
      return i;
    }
  }
  if (s->dtype == TSR_DTYPE_F32 && s->compute != TSR_COMPUTE_TF32) {
    /* Two blocks an SM hide more latency but spill a few registers: worth
     * it once the tiles fill the SMs SIMT_MANY_WAVES times over (H100,
     * queued: 4096^3 3.43 against 3.54 ms, 3072^3 1.67 against 1.65,
     * 1024^3 0.147 against 0.119; docs/PERFORMANCE.md). */
    int simt = -1, simt_two = -1;
    for (int i = 0; i < count; i++) {
      if (catalog->gemm[candidates[i]]->kind != GPU_GEMM_SIMT)
        continue;
      int per_sm = resident_blocks(device, candidates[i], s->dtype);
      if (per_sm >= 2 && simt_two < 0)
        simt_two = i;
      else if (per_sm == 1 && simt < 0)
        simt = i;
    }
    const int64_t tiles = simt_two >= 0 ? gemm_tiles(catalog->gemm[candidates[simt_two]], s) : 0;
    const bool many = simt_two >= 0 && tiles >= (int64_t)SIMT_MANY_WAVES * sms;
    int pick = many || simt < 0 ? simt_two : simt;
    if (pick >= 0) {
      if (reason)
        snprintf(reason, capacity,
                 "f32 with strict compute: true f32 products on CUDA cores (128x128 tiles, %s: "
                 "%lld tiles %s %d x %d SMs)",
                 many ? "two blocks an SM" : "one block an SM", (long long)tiles, many ? ">=" : "<",
                 SIMT_MANY_WAVES, sms);
      return pick;
    }
  }
  const gpu_arch_table *table = &catalog->vendor->arch_tables[device->arch];
  int best = -1, chosen = -1, best_per_sm = 1;
  double best_util = -1.0;
  int64_t best_tiles = 0;
  for (int t = 0; t < table->gemm_count && chosen < 0; t++) {
    for (int i = 0; i < count; i++) {
      if (catalog->gemm_rank[device->arch][candidates[i]] != t ||
          catalog->gemm[candidates[i]]->kind == GPU_GEMM_GEMV) /* no tiles: decode only */
        continue;
      int64_t tiles;
      int per_sm;
      double util = gemm_utilisation(device, candidates[i], s, &tiles, &per_sm) *
                    speedup_of(catalog->gemm[candidates[i]]);
      if (util > best_util + 1e-9 || util >= GEMM_GOOD_UTILISATION) {
        best = i;
        best_util = util;
        best_tiles = tiles;
        best_per_sm = per_sm;
      }
      if (util >= GEMM_GOOD_UTILISATION)
        chosen = i;
    }
  }
  if (best < 0)
    best = 0;
  if (reason) {
    const gpu_gemm_config *c = catalog->gemm[candidates[best]];
    char weighed[64] = "";
    if (speedup_of(c) != 1.0)
      snprintf(weighed, sizeof weighed, " (weighed x%.0f: %.*s)", speedup_of(c),
               (int)strcspn(c->name, "_"), c->name);
    snprintf(reason, capacity,
             "%sM = %lld, N = %lld, K = %lld: %lld tiles of %dx%d over %d SMs x %d resident keep "
             "%.0f%% of the last wave's block slots busy%s; %s",
             s->grouped ? "grouped, mean rows per group " : "", (long long)s->m, (long long)s->n,
             (long long)s->k, (long long)best_tiles, c->bm, c->bn, sms, best_per_sm,
             best_util / speedup_of(c) * 100.0, weighed,
             chosen >= 0 ? "the fastest config of the table that fills the GPU"
                         : "no config fills the GPU: the one that keeps the most SMs busy");
  }
  return best;
}

/* The configs that run a GEMM (indices into the catalogue, in its order)
 * and the heuristic's place among them (with `reason`); 0 when none runs. */
static int gemm_candidates(const gpu_device *device, tsr_op op, const void *args,
                           int candidates[GPU_MAX_GEMM_CONFIGS], int *pick, char *reason,
                           size_t capacity) {
  gpu_gemm_shape s = shape_of(op, args);
  int count = 0;
  for (int i = 0; i < catalog_of(device)->gemm_count; i++)
    if (gemm_config_runs(device, i, &s))
      candidates[count++] = i;
  *pick = count > 0 ? gemm_heuristic(device, &s, candidates, count, reason, capacity) : -1;
  return count;
}

/* ------------------------------------------------------------------------ */
/* Attention                                                                 */
/* ------------------------------------------------------------------------ */

/* An attention problem's extents in any layout: dense q [B, Sq, Hq, D] or
 * packed [total_q, Hq, D]; dense or paged k [., ., Hkv, D] or packed
 * [total_kv, Hkv, D]. An older core's args (no serving fields) are dense. */
typedef struct attention_shape {
  bool serving, paged_or_capped;
  int64_t batch, heads_q, heads_kv, head_dim, max_q, max_kv;
} attention_shape;

static attention_shape attention_shape_of(const tsr_attention_args *a) {
  attention_shape s;
  const bool appended = a->struct_size >= sizeof(tsr_attention_args);
  const bool packed_q = appended && a->cu_seqlens_q.buffer;
  const bool packed_kv = appended && a->cu_seqlens_kv.buffer;
  s.serving = tsr_plugin_attention_is_serving(a);
  s.paged_or_capped = appended && (a->block_table.buffer || a->softcap != 0.0f);
  s.heads_q = a->q.shape[packed_q ? 1 : 2];
  s.head_dim = a->q.shape[packed_q ? 2 : 3];
  s.heads_kv = a->k.shape[packed_kv ? 1 : 2];
  s.batch = appended ? a->batch : a->q.shape[0];
  s.max_q = appended ? a->max_seqlen_q : a->q.shape[1];
  s.max_kv = appended ? a->max_seqlen_kv : a->k.shape[1];
  return s;
}

/* Attention on tensor cores needs 16-bit data, a head dim that is a multiple
 * of 8 up to DP, unit stride along the head dim and 16-byte aligned rows. */
static bool flash_layout_ok(const tsr_attention_args *a, char *why, size_t capacity) {
  const tsr_plugin_tensor *tensors[3] = {&a->q, &a->k, &a->v};
  const char *names[3] = {"q", "k", "v"};
  if (a->q.dtype != TSR_DTYPE_F16 && a->q.dtype != TSR_DTYPE_BF16) {
    snprintf(why, capacity, "tensor-core attention needs f16 or bf16");
    return false;
  }
  if (a->q.shape[a->q.rank - 1] % 8 != 0) {
    snprintf(why, capacity, "tensor-core attention needs a head dim that is a multiple of 8");
    return false;
  }
  /* any layout: dense and paged tensors are rank 4, packed ones rank 3 */
  for (int i = 0; i < 3; i++) {
    const tsr_plugin_tensor *t = tensors[i];
    const int last = t->rank - 1;
    bool ok = t->strides[last] == 1 && gpu_tensor_address(t) % 16 == 0;
    for (int d = 0; d < last && ok; d++)
      ok = t->shape[d] == 1 || (t->strides[d] * 2) % 16 == 0;
    if (!ok) {
      snprintf(why, capacity,
               "tensor-core attention needs %s with unit stride along the head dim and 16-byte "
               "aligned rows",
               names[i]);
      return false;
    }
  }
  return true;
}

/* Whether config i exists on this GPU at all (its architecture and a
 * loaded kernel for the dtype), apart from any problem's shape. */
static bool attention_config_on_device(const gpu_device *device, int i, tsr_dtype dtype, char *why,
                                       size_t capacity) {
  const gpu_attention_config *c = catalog_of(device)->attention[i];
  if (c->arch_classes && !(c->arch_classes & (1u << (unsigned)device->arch))) {
    snprintf(why, capacity, "%s is %s", c->name, c->arch_note ? c->arch_note : "for other GPUs");
    return false;
  }
  if (c->arch_exact &&
      (device->props->arch_major != c->arch_major || device->props->arch_minor != c->arch_minor)) {
    snprintf(why, capacity, "%s is %s", c->name, c->arch_note);
    return false;
  }
  int slot = gpu_dtype_slot(dtype);
  int kernel = slot < 0 ? -1 : catalog_of(device)->attention_kernel[i][slot];
  if (kernel < 0 || !device->kernels[kernel].function) {
    snprintf(why, capacity, "%s has no %s kernel for this GPU's architecture", c->name,
             tsr_plugin_dtype_name(dtype));
    return false;
  }
  return true;
}

/* k or v can be read in 16-byte vectors along D from any row: unit stride
 * there, a 16-byte aligned start and rows 16 bytes apart in every layout. */
static bool kv_rows_of_16_bytes(const tsr_plugin_tensor *t) {
  const int esize = (int)tsr_plugin_dtype_size(t->dtype), last = t->rank - 1;
  if (t->strides[last] != 1 || gpu_tensor_address(t) % 16 != 0)
    return false;
  for (int d = 0; d < last; d++)
    if (t->shape[d] > 1 && (t->strides[d] * esize) % 16 != 0)
      return false;
  return true;
}

/* The split kernel decode row i launches for dtype slot `slot` and head-dim
 * class `dim` (NULL: none): a tile variant's own (prepared with the row),
 * else the class's default. */
static const gpu_kernel *decode_kernel_of(const gpu_device *device, int i, int slot, int dim,
                                          int64_t tile_rows) {
  const gpu_attention_config *c = catalog_of(device)->attention[i];
  if (slot < 0 || dim < 0)
    return NULL;
  if (c->mma && c->block_kv > 0)
    return device->attention[i][slot].kernel;
  return c->mma ? device->decode_mma[slot][dim] : device->decode[slot][dim][tile_rows == 4 ? 0 : 1];
}

/* The split-KV decode kernels: few query rows a sequence (max_seqlen_q up
 * to TSR_GPU_DECODE_MAX_Q), head dims up to 256 in whole 16-byte vectors,
 * k and v readable 16 bytes at a time; a tile variant only its class's
 * head dims. */
static bool decode_runs(const gpu_device *device, int i, const tsr_attention_args *a,
                        const attention_shape *s, char *why, size_t capacity) {
  const gpu_attention_config *c = catalog_of(device)->attention[i];
  const int slot = gpu_dtype_slot(a->q.dtype), dim = gpu_decode_dim_class(s->head_dim);
  const int64_t vector = 16 / (int64_t)tsr_plugin_dtype_size(a->q.dtype);
  const int64_t group = s->heads_q / s->heads_kv;
  const int64_t rows = group * s->max_q;
  const int64_t tile = c->mma ? TSR_GPU_DECODE_MMA_ROWS : gpu_decode_tile_rows(rows);
  if (slot < 0 || (c->mma && a->q.dtype != TSR_DTYPE_F16 && a->q.dtype != TSR_DTYPE_BF16)) {
    snprintf(why, capacity, "%s takes %s", c->name, c->mma ? "f16 and bf16" : "f32, f16 and bf16");
    return false;
  }
  if (s->max_q > TSR_GPU_DECODE_MAX_Q) {
    snprintf(why, capacity, "split-KV decode takes up to %d query rows a sequence (here %lld)",
             TSR_GPU_DECODE_MAX_Q, (long long)s->max_q);
    return false;
  }
  if (dim < 0 || s->head_dim % vector != 0) {
    snprintf(why, capacity,
             "split-KV decode takes head dims up to 256 in whole 16-byte vectors (here %lld)",
             (long long)s->head_dim);
    return false;
  }
  if (c->block_kv > 0 && dim != gpu_decode_dim_class(c->head_dim_max)) {
    snprintf(why, capacity, "%s takes head dims from %d to %d (here %lld)", c->name,
             c->head_dim_max / 2 + 1, c->head_dim_max, (long long)s->head_dim);
    return false;
  }
  if (!kv_rows_of_16_bytes(&a->k) || !kv_rows_of_16_bytes(&a->v)) {
    snprintf(why, capacity,
             "split-KV decode needs k and v with unit stride along the head dim and 16-byte "
             "aligned rows");
    return false;
  }
  if (s->batch > 65535 || s->heads_kv * ((rows + tile - 1) / tile) > 65535) {
    snprintf(why, capacity, "split-KV decode's grid holds up to 65535 sequences and kv-head tiles");
    return false;
  }
  const gpu_kernel *kernel = decode_kernel_of(device, i, slot, dim, tile);
  const gpu_kernel *combine = device->decode_combine[slot];
  if (!kernel || !kernel->function || kernel->blocks_per_sm < 1 || !combine || !combine->function) {
    snprintf(why, capacity, "%s has no %s kernel for this GPU", c->name,
             tsr_plugin_dtype_name(a->q.dtype));
    return false;
  }
  return true;
}

static bool attention_config_runs(const gpu_device *device, int i, const tsr_attention_args *a,
                                  char *why, size_t capacity) {
  const gpu_attention_config *c = catalog_of(device)->attention[i];
  const attention_shape s = attention_shape_of(a);
  if (c->kind == GPU_ATTENTION_GENERIC) {
    if (gpu_attention_generic_tile(s.head_dim, device->dynamic_smem_limit) < 1) {
      snprintf(why, capacity,
               "head dim %lld needs more shared memory than the %d bytes a block has",
               (long long)s.head_dim, device->dynamic_smem_limit);
      return false;
    }
    return true;
  }
  if (c->kind == GPU_ATTENTION_DECODE)
    return decode_runs(device, i, a, &s, why, capacity);
  if (!attention_config_on_device(device, i, a->q.dtype, why, capacity))
    return false;
  if (s.serving && !c->serving) {
    /* (packed or paged layouts, per-sequence lengths and softcap: the
     * serving rows, the generic and decode kernels) */
    snprintf(why, capacity,
             "%s takes dense attention only (no cu_seqlens, block table, seqlens_kv or softcap)",
             c->name);
    return false;
  }
  if (!s.serving && c->serving) {
    snprintf(why, capacity, "%s is the serving form (the dense rows take dense attention)",
             c->name);
    return false;
  }
  if (c->serving == 2 && s.paged_or_capped) {
    snprintf(why, capacity, "%s is the varlen form (no block table, no softcap)", c->name);
    return false;
  }
  if (c->serving == 1 && (s.max_q + c->block_q - 1) / c->block_q > 65535) {
    /* (its grid's z holds the query tiles; the varlen form's x) */
    snprintf(why, capacity, "%s takes up to 65535 query tiles of %d (max_seqlen_q %lld)", c->name,
             c->block_q, (long long)s.max_q);
    return false;
  }
  if (!flash_layout_ok(a, why, capacity))
    return false;
  if (s.head_dim > c->head_dim_max) {
    snprintf(why, capacity, "%s covers head dims up to %d", c->name, c->head_dim_max);
    return false;
  }
  int kernel = catalog_of(device)->attention_kernel[i][gpu_dtype_slot(a->q.dtype)];
  if (device->kernels[kernel].blocks_per_sm < 1) {
    snprintf(why, capacity, "%s needs %d bytes of shared memory, more than this GPU gives a block",
             c->name, c->smem);
    return false;
  }
  return true;
}

/* The attention configs that run a problem (catalogue indices, in order)
 * and the heuristic's place among them; 0 with `why` when none does. The
 * first config of the smallest head-dim class that holds the head dim;
 * 64-row blocks when there are few query rows; the generic kernel last. */
static int attention_candidates(const gpu_device *device, const tsr_attention_args *a,
                                int candidates[GPU_MAX_ATTENTION_CONFIGS], int *pick, char *reason,
                                size_t capacity, char *why, size_t why_capacity) {
  const gpu_catalog *catalog = catalog_of(device);
  char first_why[256] = "";
  int why_dim = 0; /* head dim of the config first_why is about */
  int count = 0, flash_pick = -1, flash_short_pick = -1, pick_dim = 0;
  for (int i = 0; i < catalog->attention_count; i++) {
    const gpu_attention_config *c = catalog->attention[i];
    char not_here[256];
    if (!attention_config_runs(device, i, a, not_here, sizeof not_here)) {
      /* The reason shown is that of the widest config this GPU has (the
       * shape or layout it refused), else that of the first config at all. */
      bool exists = c->kind == GPU_ATTENTION_FLASH &&
                    attention_config_on_device(device, i, a->q.dtype, NULL, 0);
      if (c->kind == GPU_ATTENTION_FLASH &&
          (first_why[0] == '\0' || (exists && c->head_dim_max > why_dim))) {
        snprintf(first_why, sizeof first_why, "%s", not_here);
        why_dim = exists ? c->head_dim_max : 0;
      }
      continue;
    }
    /* (the variant list holds TSR_PLUGIN_MAX_VARIANTS; the generic kernel,
     * last, always has its place) */
    if (count == TSR_PLUGIN_MAX_VARIANTS - 1 && c->kind != GPU_ATTENTION_GENERIC)
      continue;
    if (c->kind == GPU_ATTENTION_FLASH) {
      if (flash_pick < 0 || c->head_dim_max < pick_dim) {
        flash_pick = count;
        pick_dim = c->head_dim_max;
        flash_short_pick = -1;
      }
      if (flash_short_pick < 0 && c->head_dim_max == pick_dim && c->block_q <= 64)
        flash_short_pick = count;
    }
    candidates[count++] = i;
  }
  if (count == 0) {
    snprintf(why, why_capacity, "%s", first_why);
    return 0;
  }
  /* Serving problems with few query rows a sequence: split-KV decode (its
   * heuristic's split count) on tensor cores where that runs, else on CUDA
   * cores; dense ones keep the tensor-core picks. */
  const attention_shape shape = attention_shape_of(a);
  const int slot = gpu_dtype_slot(a->q.dtype), dim = gpu_decode_dim_class(shape.head_dim);
  int decode_pick = -1, decode_rank = 0;
  for (int i = 0; i < count && shape.serving; i++) {
    const gpu_attention_config *c = catalog->attention[candidates[i]];
    if (c->kind != GPU_ATTENTION_DECODE || c->splits != 0)
      continue;
    const gpu_kernel *kernel = decode_kernel_of(device, candidates[i], slot, dim, 4);
    /* the class's default tensor-core row, then a tile variant (on the H200
     * each measured slower than the default's 64-key tiles: tune lists them),
     * then CUDA cores */
    const int rank = !c->mma ? 1 : c->block_kv > 0 ? 2 : kernel ? 3 : 0;
    if (rank > decode_rank) {
      decode_pick = i;
      decode_rank = rank;
    }
  }
  if (decode_pick >= 0) {
    const gpu_attention_config *c = catalog->attention[candidates[decode_pick]];
    *pick = decode_pick;
    if (reason) {
      char tiles[96] = "";
      if (c->mma && c->block_kv > 0)
        snprintf(tiles, sizeof tiles, " (%d-key K/V tiles, %d stages through shared memory)",
                 c->block_kv, c->kv_stages);
      else if (c->mma)
        snprintf(tiles, sizeof tiles, " (K/V tiles pipelined through shared memory)");
      snprintf(reason, capacity,
               "at most %lld query rows a sequence against up to %lld keys: split-KV decode%s%s, "
               "each K/V row read once for the %lld query heads of its kv head",
               (long long)shape.max_q, (long long)shape.max_kv, c->mma ? " on tensor cores" : "",
               tiles, (long long)(shape.heads_q / shape.heads_kv));
    }
    return count;
  }
  /* (max_q: dense Sq, or the bound on a sequence's query rows) */
  const char *form = shape.serving ? " (serving form: per-sequence rows and keys)" : "";
  if (flash_pick >= 0 && shape.max_q <= 64 && flash_short_pick >= 0) {
    *pick = flash_short_pick;
    if (reason)
      snprintf(reason, capacity,
               "head dim %lld, %lld query rows: the smallest tensor-core tile that holds the head "
               "dim, 64 rows a block%s",
               (long long)shape.head_dim, (long long)shape.max_q, form);
  } else if (flash_pick >= 0) {
    *pick = flash_pick;
    if (reason)
      snprintf(reason, capacity,
               "head dim %lld: the smallest tensor-core tile that holds it, the first such "
               "config in this GPU's table (fastest first where measured)%s",
               (long long)shape.head_dim, form);
  } else {
    *pick = count - 1;
    if (reason)
      snprintf(reason, capacity, "the generic kernel: %s", first_why);
  }
  return count;
}

/* ------------------------------------------------------------------------ */
/* Row and elementwise ops                                                   */
/* ------------------------------------------------------------------------ */

/* Row length of a row op. */
static int64_t row_length(tsr_op op, const void *args) {
  switch (op) {
  case TSR_OP_RMSNORM: {
    const tsr_rmsnorm_args *r = args;
    return r->x.shape[r->x.rank - 1];
  }
  case TSR_OP_LAYERNORM: {
    const tsr_layernorm_args *r = args;
    return r->x.shape[r->x.rank - 1];
  }
  case TSR_OP_SOFTMAX: {
    const tsr_softmax_args *r = args;
    return r->x.shape[r->x.rank - 1];
  }
  default: {
    const tsr_cross_entropy_args *r = args;
    return r->logits.shape[1];
  }
  }
}

/* Measured on an H200 at 16384 x 8192 bf16: cross entropy (reductions
 * only) fastest with 128 threads, the norms and softmax with 256 (512 within
 * 1%). */
static int rows_heuristic(tsr_op op, const void *args) {
  return op == TSR_OP_CROSS_ENTROPY || row_length(op, args) <= 1024 ? 0 : 1;
}

/* The dtype of an op's main tensor (the prepared configs are per dtype). */
static int32_t op_dtype(tsr_op op, const void *args) {
  switch (op) {
  case TSR_OP_GEMM:
    return ((const tsr_gemm_args *)args)->a.dtype;
  case TSR_OP_GROUPED_GEMM:
    return ((const tsr_grouped_gemm_args *)args)->a.dtype;
  case TSR_OP_ATTENTION:
    return ((const tsr_attention_args *)args)->q.dtype;
  case TSR_OP_CROSS_ENTROPY:
    return ((const tsr_cross_entropy_args *)args)->logits.dtype;
  case TSR_OP_KV_APPEND:
    return ((const tsr_kv_append_args *)args)->k_new.dtype;
  case TSR_OP_SWIGLU:
    return ((const tsr_swiglu_args *)args)->gate.dtype;
  default: /* rmsnorm, layernorm, softmax, rope, gelu: x first */
    return ((const tsr_rmsnorm_args *)args)->x.dtype;
  }
}

/* ------------------------------------------------------------------------ */
/* Limits and answers                                                        */
/* ------------------------------------------------------------------------ */

/* Limits of the launch shapes that the core's validation does not imply. */
static bool problem_fits(tsr_op op, const void *args, char *why, size_t capacity) {
  if (op == TSR_OP_ATTENTION) {
    const attention_shape s = attention_shape_of(args);
    const tsr_attention_args *a = args;
    const int64_t dense_kv = a->k.rank == 4 ? a->k.shape[1] : 0;
    if (s.batch > 65535 || s.heads_q > 65535 || s.max_q > INT_MAX || s.max_kv > INT_MAX ||
        dense_kv > INT_MAX) {
      snprintf(why, capacity,
               "attention with batch %lld, %lld heads, Sq %lld, Skv %lld exceeds the launch "
               "limits (65535 batches and heads, 2^31 positions)",
               (long long)s.batch, (long long)s.heads_q, (long long)s.max_q,
               (long long)(s.max_kv > dense_kv ? s.max_kv : dense_kv));
      return false;
    }
  }
  if (op == TSR_OP_GROUPED_GEMM) {
    const tsr_grouped_gemm_args *g = args;
    if (g->a.shape[0] > INT_MAX) {
      snprintf(why, capacity, "grouped gemm with %lld rows exceeds 2^31 rows",
               (long long)g->a.shape[0]);
      return false;
    }
  }
  if (gpu_dtype_slot(op_dtype(op, args)) < 0) {
    snprintf(why, capacity, "dtype %d is not one the kernels take", (int)op_dtype(op, args));
    return false;
  }
  return true;
}

/* Every config that runs the problem, in list order: prepared configs, and
 * the heuristic's place among them (with `reason`). 0 with `why` when none
 * runs. */
static int candidates_of(const gpu_device *device, tsr_op op, const void *args,
                         const gpu_prepared *out[TSR_PLUGIN_MAX_VARIANTS], int *pick, char *reason,
                         size_t reason_capacity, char *why, size_t why_capacity) {
  if (!problem_fits(op, args, why, why_capacity))
    return 0;
  const int slot = gpu_dtype_slot(op_dtype(op, args));
  int found[GPU_MAX_GEMM_CONFIGS > GPU_MAX_ATTENTION_CONFIGS ? GPU_MAX_GEMM_CONFIGS
                                                             : GPU_MAX_ATTENTION_CONFIGS];
  int count = 0;
  switch (op) {
  case TSR_OP_GEMM:
  case TSR_OP_GROUPED_GEMM:
    count = gemm_candidates(device, op, args, found, pick, reason, reason_capacity);
    if (count == 0)
      snprintf(why, why_capacity, "no GEMM kernel of this build runs dtype %d on this GPU",
               (int)op_dtype(op, args));
    for (int i = 0; i < count; i++)
      out[i] = &device->gemm[found[i]][slot].head;
    return count;
  case TSR_OP_ATTENTION:
    count =
        attention_candidates(device, args, found, pick, reason, reason_capacity, why, why_capacity);
    for (int i = 0; i < count; i++)
      out[i] = &device->attention[found[i]][slot].head;
    return count;
  case TSR_OP_RMSNORM:
  case TSR_OP_LAYERNORM:
  case TSR_OP_SOFTMAX:
  case TSR_OP_CROSS_ENTROPY: {
    const int r = gpu_rows_op_index(op);
    for (int i = 0; i < 3; i++)
      out[i] = &device->rows[r][i][slot].head;
    *pick = rows_heuristic(op, args);
    if (reason)
      snprintf(reason, reason_capacity, "%s rows of %lld: %d threads a row",
               op == TSR_OP_CROSS_ENTROPY ? "cross-entropy" : "norm/softmax",
               (long long)row_length(op, args), gpu_rows_configs[*pick].threads);
    return 3;
  }
  case TSR_OP_KV_APPEND:
    out[0] = &device->kv_append[slot].head;
    *pick = 0;
    if (reason)
      snprintf(reason, reason_capacity, "the only variant of this op");
    return 1;
  case TSR_OP_ROPE:
  case TSR_OP_SWIGLU:
  case TSR_OP_GELU:
    out[0] = &device->elementwise[gpu_elementwise_op_index(op)][slot].head;
    *pick = 0;
    if (reason)
      snprintf(reason, reason_capacity, "the only variant of this op");
    return 1;
  default:
    snprintf(why, why_capacity, "op %d is unknown", (int)op);
    return 0;
  }
}

/* ------------------------------------------------------------------------ */
/* Descriptions                                                              */
/* ------------------------------------------------------------------------ */

static void describe_gemm(const gpu_gemm_config *c, char *buf, size_t capacity) {
  switch (c->kind) {
  case GPU_GEMM_VENDOR:
    snprintf(buf, capacity, "%s", c->description ? c->description : c->name);
    break;
  case GPU_GEMM_MMA:
    if (c->description) {
      snprintf(buf, capacity, "%s", c->description);
      break;
    }
    snprintf(buf, capacity,
             "mma.sync m16n8k16: block %dx%dx%d, %dx%d warps, %d cp.async stages, %d KiB "
             "shared%s",
             c->bm, c->bn, c->bk, c->warps_m, c->warps_n, c->stages, c->smem / 1024,
             c->bm == 16 ? ", split over K when the tiles cannot fill the GPU" : "");
    break;
  case GPU_GEMM_TF32:
    snprintf(
        buf, capacity,
        "tf32 mma.sync m16n8k8: block %dx%dx%d, %dx%d warps, %d cp.async stages, %d KiB shared",
        c->bm, c->bn, c->bk, c->warps_m, c->warps_n, c->stages, c->smem / 1024);
    break;
  case GPU_GEMM_SIMT:
    snprintf(buf, capacity,
             "true f32 FMA on CUDA cores: block 128x128x%d, 8x8 outputs a thread, cp.async "
             "staging, %s",
             c->bk,
             c->kernels[0] && strcmp(c->kernels[0], TSR_GEMM_SIMT16_B2_NAME) == 0
                 ? "two blocks an SM (128 registers)"
                 : "one block an SM");
    break;
  case GPU_GEMM_STREAM:
    snprintf(buf, capacity,
             "M <= 16: 16x32 tiles, B streamed by 16-byte loads into mma.sync fragments, "
             "%d warps split K, 2 x %d chunks of 32 a warp in registers",
             c->warps_n, c->stages);
    break;
  case GPU_GEMM_GEMV:
    snprintf(buf, capacity,
             "GEMV for M <= 16: B streamed once with 16-byte loads, split over K into f32 "
             "partials when N is small");
    break;
  }
}

static void describe(tsr_op op, const gpu_prepared *prepared, char *buf, size_t capacity) {
  switch (op) {
  case TSR_OP_GEMM:
  case TSR_OP_GROUPED_GEMM:
    describe_gemm(((const gpu_gemm_prepared *)prepared)->config, buf, capacity);
    return;
  case TSR_OP_ATTENTION: {
    const gpu_attention_config *c = ((const gpu_attention_prepared *)prepared)->config;
    if (c->kind == GPU_ATTENTION_DECODE) {
      char splits[32] = "~4 waves";
      if (c->splits > 0)
        snprintf(splits, sizeof splits, "%d", c->splits);
      if (c->mma && c->block_kv > 0)
        snprintf(buf, capacity,
                 "split-KV decode on tensor cores, D %d-%d, <= %d query rows/seq: block "
                 "per (seq, kv head, 16 rows, key chunk; chunks: %s), %d-key tiles, %d stages",
                 c->head_dim_max / 2 + 1, c->head_dim_max, TSR_GPU_DECODE_MAX_Q, splits,
                 c->block_kv, c->kv_stages);
      else if (c->mma)
        snprintf(buf, capacity,
                 "split-KV decode on tensor cores, <= %d query rows/seq: block per (seq, kv head, "
                 "16 rows, key chunk; chunks: %s), cp.async K/V stages, f32 partials merged",
                 TSR_GPU_DECODE_MAX_Q, splits);
      else
        snprintf(buf, capacity,
                 "split-KV decode, <= %d query rows/seq: block per (seq, kv head, 4|8 rows, key "
                 "chunk; chunks: %s), 16-byte K/V loads, f32 partials merged",
                 TSR_GPU_DECODE_MAX_Q, splits);
    } else if (c->kind == GPU_ATTENTION_FLASH)
      snprintf(buf, capacity,
               "flash on tensor cores (%s): %d query rows (%d threads) x %d keys a tile, head "
               "dim padded to %d, %d key/value stage%s%s",
               c->engine, c->block_q, c->warps * 32, c->block_kv, c->head_dim_max, c->kv_stages,
               c->kv_stages > 1 ? "s" : "",
               c->serving == 2   ? "; varlen form (packed or per-sequence keys)"
               : c->serving == 1 ? "; serving form (packed/paged, softcap)"
                                 : "");
    else
      snprintf(
          buf, capacity,
          "flash without matrix instructions: any dtype, head dim and strides; 32 lanes per query "
          "row, f32");
    return;
  }
  case TSR_OP_ROPE:
  case TSR_OP_SWIGLU:
  case TSR_OP_GELU:
    snprintf(buf, capacity,
             "grid-stride loop, 256 threads a block, 16-byte vectors over dense data");
    return;
  case TSR_OP_KV_APPEND:
    snprintf(buf, capacity,
             "grid-stride loop, 256 threads a block, a thread per 16-byte vector of a row (any "
             "strides: per element)");
    return;
  default:
    snprintf(buf, capacity,
             "a block of %d threads per row, 16-byte accesses when aligned, row kept in shared "
             "memory up to %d KiB",
             ((const gpu_rows_prepared *)prepared)->config->threads, GPU_ROWS_CACHE_BYTES / 1024);
    return;
  }
}

/* ------------------------------------------------------------------------ */
/* ABI entries                                                               */
/* ------------------------------------------------------------------------ */

/* Every config that runs the problem and the heuristic's place among them
 * (with `reason`); 0 after tsr_plugin_fail (TSR_ERROR_UNSUPPORTED) when
 * none does. */
static int runnable(const gpu_device *device, tsr_op op, const void *args,
                    const gpu_prepared *out[TSR_PLUGIN_MAX_VARIANTS], int *pick, char *reason,
                    size_t reason_capacity) {
  const tsr_plugin_host *host = &device->plugin->host;
  if (!tsr_plugin_op_known(op)) {
    tsr_plugin_fail(host, TSR_ERROR_UNSUPPORTED, "op %d is unknown", (int)op);
    return 0;
  }
  tsr_plugin_any_args copy;
  args = gpu_args_view(op, args, &copy);
  char why[TSR_PLUGIN_MESSAGE_CAPACITY];
  int count = candidates_of(device, op, args, out, pick, reason, reason_capacity, why, sizeof why);
  if (count == 0)
    tsr_plugin_fail(host, TSR_ERROR_UNSUPPORTED, "%s: %s", tsr_plugin_op_name(op), why);
  return count;
}

tsr_status gpu_op_supported(void *handle, tsr_op op, const void *args) {
  const gpu_prepared *list[TSR_PLUGIN_MAX_VARIANTS];
  int pick;
  return runnable(handle, op, args, list, &pick, NULL, 0) > 0 ? TSR_OK : TSR_ERROR_UNSUPPORTED;
}

static tsr_status fill_variants(void *handle, tsr_op op, const void *args,
                                tsr_plugin_variant_list *out) {
  const gpu_prepared *list[TSR_PLUGIN_MAX_VARIANTS];
  int pick = 0;
  int count = runnable(handle, op, args, list, &pick, out->reason, sizeof out->reason);
  if (count == 0)
    return TSR_ERROR_UNSUPPORTED;
  for (int i = 0; i < count; i++) {
    char description[sizeof out->variants[0].description];
    describe(op, list[i], description, sizeof description);
    tsr_plugin_variants_add(out, list[i]->name, "%s", description);
  }
  out->heuristic = pick;
  return TSR_OK;
}

tsr_status gpu_op_variants(void *handle, tsr_op op, const void *args,
                           tsr_plugin_variant_list *out) {
  gpu_device *device = handle;
  return tsr_plugin_variants_serve(&device->plugin->host, device, op, args, out, fill_variants);
}

tsr_status gpu_op_select(void *handle, tsr_op op, const void *args, const char *variant,
                         tsr_plugin_selection *out) {
  gpu_device *device = handle;
  const gpu_prepared *list[TSR_PLUGIN_MAX_VARIANTS];
  int pick = 0;
  int count = runnable(device, op, args, list, &pick, NULL, 0);
  if (count == 0)
    return TSR_ERROR_UNSUPPORTED;
  if (variant) {
    pick = -1;
    for (int i = 0; i < count && pick < 0; i++)
      if (strcmp(list[i]->name, variant) == 0)
        pick = i;
  }
  if (pick < 0) {
    char why[TSR_PLUGIN_MESSAGE_CAPACITY];
    size_t used = (size_t)snprintf(
        why, sizeof why, "variant '%s' cannot run this problem here; these can:", variant);
    for (int i = 0; i < count && used < sizeof why; i++)
      used += (size_t)snprintf(why + used, sizeof why - used, "%s %s", i ? "," : "", list[i]->name);
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_NOT_FOUND, "%s: %s",
                           tsr_plugin_op_name(op), why);
  }
  return tsr_plugin_select_row(out, list[pick]);
}
