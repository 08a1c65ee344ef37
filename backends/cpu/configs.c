/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU plugin's kernel variants (tile configurations) and the heuristics
 * that pick one per problem; the same tables answer op_variants and op_run. */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "configs.h"

/* ------------------------------------------------------------------------ */
/* GEMM variants                                                             */
/* ------------------------------------------------------------------------ */

/* The kernel family a level runs: avx512 for every AVX-512 level (bf16
 * inputs switch to vdpbf16ps inside it where the level has AVX512_BF16),
 * avx2, or the portable C kernels. */
static cpu_isa gemm_family(cpu_isa level) {
  if (cpu_isa_includes(level, CPU_ISA_AVX512))
    return CPU_ISA_AVX512;
  if (cpu_isa_includes(level, CPU_ISA_AVX2))
    return CPU_ISA_AVX2;
  return CPU_ISA_GENERIC;
}

/* Register blocks per family, the heuristic's choice first. AVX-512 has 32
 * zmm registers: 14x32 keeps 28 accumulators, two B vectors and the A
 * broadcast comes from memory inside the FMA; AVX2 has 16 ymm registers:
 * 6x16 keeps 12 accumulators. */
typedef struct gemm_shape {
  cpu_isa family;
  int mr, nr;
} gemm_shape;
static const gemm_shape gemm_shapes[] = {
    {CPU_ISA_AVX512, 14, 32}, {CPU_ISA_AVX512, 12, 32}, {CPU_ISA_AVX512, 8, 32},
    {CPU_ISA_AVX2, 6, 16},    {CPU_ISA_AVX2, 4, 16},    {CPU_ISA_GENERIC, 4, 8},
};

/* Cache blocks from the cache sizes, in f32 terms (a bf16 pair strip of
 * the same KC takes half the bytes). KC: the A micro-panel (MR x KC) fills
 * up to ~90% of L1d, so it stays there while the B micro-panel (KC x NR)
 * streams from L2 (the kernel keeps its rate with B in L2: measured 97% of
 * the FMA peak at KC = 1024); larger KC also means fewer passes over the
 * partial sums in D. MC: the packed A block (MC x KC) fills half of L2. NC:
 * the packed B panel (KC x NC) fills a quarter of L3. On the Zen 4 this was
 * tuned on (32 KiB / 1 MiB / 32 MiB) that gives 14x32: KC=512 MC=252
 * NC=4096, the best of the KC/MC/NC sweep in docs/PERFORMANCE.md.
 * `kc_numerator / kc_denominator` scales KC for the neighbours listed for
 * tuning. */
static void gemm_blocking(const cpu_caches *caches, int mr, int nr, int kc_numerator,
                          int kc_denominator, int *mc, int *kc, int *nc) {
  int64_t k = caches->l1d * 9 / 10 / (4 * mr);
  k = k * kc_numerator / kc_denominator;
  k = k / 64 * 64;
  k = k < 64 ? 64 : k > 2048 ? 2048 : k;
  int64_t m = caches->l2 / 2 / (4 * k);
  m = m / mr * mr;
  m = m < mr ? mr : m > 64 * mr ? 64 * mr : m;
  int64_t l3 = caches->l3 > 0 ? caches->l3 : caches->l2 * 4;
  int64_t n = l3 / 4 / (4 * k);
  n = n / nr * nr;
  n = n < 4 * nr ? 4 * nr : n > 8192 ? 8192 : n;
  *kc = (int)k;
  *mc = (int)m;
  *nc = (int)n;
}

enum { GEMM_MAX_CONFIGS = 24 };
static cpu_gemm_config gemm_configs[GEMM_MAX_CONFIGS];
static int gemm_config_count;
static pthread_once_t gemm_configs_once = PTHREAD_ONCE_INIT;

static void add_gemm_config(cpu_isa family, int method, int mr, int nr, int mc, int kc, int nc) {
  if (gemm_config_count >= GEMM_MAX_CONFIGS)
    return;
  cpu_gemm_config *c = &gemm_configs[gemm_config_count++];
  c->isa = family;
  c->method = method;
  c->mr = mr;
  c->nr = nr;
  c->mc = mc;
  c->kc = kc;
  c->nc = nc;
  c->name = c->name_text;
  const char *isa = cpu_isa_name(family);
  if (method == CPU_GEMM_GEMV) {
    snprintf(c->name_text, sizeof c->name_text, "cpu_gemv_%s", isa);
    snprintf(c->description, sizeof c->description,
             "%s gemv: B streamed once without packing, rows of A in registers, all threads; "
             "f32 accumulation",
             isa);
  } else if (method == CPU_GEMM_AUTO) {
    snprintf(c->name_text, sizeof c->name_text, "cpu_grouped_%s_auto", isa);
    snprintf(c->description, sizeof c->description,
             "picked per call from the group sizes: cpu_gemv_%s for a few rows per group, else "
             "the %s %dx%d register block",
             isa, isa, mr, nr);
  } else {
    snprintf(c->name_text, sizeof c->name_text, "cpu_gemm_%s_mr%dnr%d_kc%d_mc%d_nc%d", isa, mr, nr,
             kc, mc, nc);
    snprintf(c->description, sizeof c->description,
             "%s register block MR=%d x NR=%d; KC=%d MC=%d NC=%d; f32 accumulation", isa, mr, nr,
             kc, mc, nc);
  }
}

/* Every family this machine can run, best first: its register blocks with
 * the cache-derived blocking (the first also with half and double KC), its
 * gemv, and for grouped GEMM the row that picks between the gemv and the
 * first block per call. */
static void build_gemm_configs(void) {
  const cpu_machine *m = cpu_machine_get();
  static const cpu_isa families[] = {CPU_ISA_AVX512, CPU_ISA_AVX2, CPU_ISA_GENERIC};
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
    cpu_isa family = families[f];
    if (!cpu_isa_includes(m->best, family))
      continue;
    bool first = true;
    int first_mr = 0, first_nr = 0;
    for (size_t s = 0; s < sizeof gemm_shapes / sizeof gemm_shapes[0]; s++) {
      const gemm_shape *shape = &gemm_shapes[s];
      if (shape->family != family || !cpu_gemm_has_kernel(family, shape->mr, shape->nr))
        continue;
      int mc, kc, nc;
      gemm_blocking(&m->caches, shape->mr, shape->nr, 1, 1, &mc, &kc, &nc);
      add_gemm_config(family, CPU_GEMM_PACKED, shape->mr, shape->nr, mc, kc, nc);
      if (first) {
        first_mr = shape->mr;
        first_nr = shape->nr;
        static const int scales[][2] = {{1, 2}, {2, 1}};
        for (int i = 0; i < 2; i++) {
          int mc2, kc2, nc2;
          gemm_blocking(&m->caches, shape->mr, shape->nr, scales[i][0], scales[i][1], &mc2, &kc2,
                        &nc2);
          if (kc2 != kc)
            add_gemm_config(family, CPU_GEMM_PACKED, shape->mr, shape->nr, mc2, kc2, nc2);
        }
        first = false;
      }
    }
    add_gemm_config(family, CPU_GEMM_GEMV, 0, 0, 0, 0, 0);
    add_gemm_config(family, CPU_GEMM_AUTO, first_mr, first_nr, 0, 0, 0);
  }
}

static void ensure_gemm_configs(void) {
  pthread_once(&gemm_configs_once, build_gemm_configs);
}

/* A variant runs when the active level includes its family. */
static bool gemm_config_usable(const cpu_gemm_config *c) {
  return cpu_isa_includes(cpu_isa_active(), (cpu_isa)c->isa);
}

static const cpu_gemm_config *find_gemm_config(cpu_isa family, int method) {
  ensure_gemm_configs();
  for (int i = 0; i < gemm_config_count; i++)
    if (gemm_configs[i].isa == (int)family && gemm_configs[i].method == method)
      return &gemm_configs[i];
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* Attention, row and elementwise variants                                   */
/* ------------------------------------------------------------------------ */

/* Flash tiles (kernels/attention.c) for prefill, and split-KV decode
 * (kernels/attention_decode.c) for few query rows against long keys, with
 * several chunk policies for `tessera tune`. */
static const cpu_attention_config attention_configs[] = {
    {"cpu_attention_bq32_bkv64", "query tile 32 rows x key tile 64 rows, online softmax in f32",
     CPU_ATTENTION_TILES, 32, 64, 0},
    {"cpu_attention_bq64_bkv128", "query tile 64 rows x key tile 128 rows, online softmax in f32",
     CPU_ATTENTION_TILES, 64, 128, 0},
    {"cpu_attention_decode_split_auto",
     "split-KV decode: items (sequence, <= 16 positions x all heads, key chunk), GQA groups "
     "scored together, chunks from the key lengths; partials combined",
     CPU_ATTENTION_DECODE, 0, 0, CPU_DECODE_CHUNK_AUTO},
    {"cpu_attention_decode_split_none",
     "split-KV decode without the split: one item per (sequence, <= 16 positions x all heads) "
     "over all its keys; no combine pass",
     CPU_ATTENTION_DECODE, 0, 0, CPU_DECODE_CHUNK_WHOLE},
    {"cpu_attention_decode_split_kv512",
     "split-KV decode with key chunks of 512: items (sequence, <= 16 positions x all heads, "
     "512 keys), partials combined",
     CPU_ATTENTION_DECODE, 0, 0, 512},
    {"cpu_attention_decode_split_kv2048",
     "split-KV decode with key chunks of 2048: items (sequence, <= 16 positions x all heads, "
     "2048 keys), partials combined",
     CPU_ATTENTION_DECODE, 0, 0, 2048},
};
enum { ATTENTION_SMALL, ATTENTION_LARGE, ATTENTION_DECODE };
/* The small tiles up to these sequence lengths (queries, or keys). */
enum { ATTENTION_SMALL_MAX_Q = 32, ATTENTION_SMALL_MAX_KV = 256 };
/* Split-KV decode for at most this many query rows per sequence (with the
 * GQA group, up to 16 x group rows share each key row read) against at least
 * this many keys: reading K and V is the cost there, and the tile kernel's
 * GEMM blocks would run mostly empty. */
enum { ATTENTION_DECODE_MAX_Q = 16, ATTENTION_DECODE_MIN_KV = 128 };

/* kv_append has one variant. */
static const cpu_simple_config kv_append_configs[] = {
    {"cpu_kv_append", "rows copied into their slots, split over the thread pool by slot (each "
                      "slot written by one thread, rows in order)"}};

/* Row ops and elementwise ops have one variant each: the row-parallel kernel. */
static const cpu_simple_config rows_configs[] = {
    {"cpu_rows", "one row per task, f32 arithmetic, rows split over the thread pool"}};
static const cpu_simple_config elementwise_configs[] = {
    {"cpu_elementwise",
     "contiguous runs converted through f32 buffers, split over the thread pool"}};

/* The variant rows of each op whose rows are fixed (GEMM's are built from
 * the cache sizes). Every row starts with its name and its description. */
typedef struct op_table {
  const char *name; /* the op's */
  tsr_op op;
  const void *rows;
  size_t count, stride;
} op_table;

#define ROWS(rows) rows, sizeof rows / sizeof rows[0], sizeof rows[0]
static const op_table op_tables[] = {
    {"attention", TSR_OP_ATTENTION, ROWS(attention_configs)},
    {"rmsnorm", TSR_OP_RMSNORM, ROWS(rows_configs)},
    {"layernorm", TSR_OP_LAYERNORM, ROWS(rows_configs)},
    {"softmax", TSR_OP_SOFTMAX, ROWS(rows_configs)},
    {"cross_entropy", TSR_OP_CROSS_ENTROPY, ROWS(rows_configs)},
    {"rope", TSR_OP_ROPE, ROWS(elementwise_configs)},
    {"swiglu", TSR_OP_SWIGLU, ROWS(elementwise_configs)},
    {"gelu", TSR_OP_GELU, ROWS(elementwise_configs)},
    {"kv_append", TSR_OP_KV_APPEND, ROWS(kv_append_configs)},
};
#undef ROWS

static const op_table *op_table_of(tsr_op op) {
  for (size_t i = 0; i < sizeof op_tables / sizeof op_tables[0]; i++)
    if (op_tables[i].op == op)
      return &op_tables[i];
  return NULL;
}

static const void *op_table_row(const op_table *table, size_t i) {
  return (const char *)table->rows + i * table->stride;
}

/* The name and the description that lead every row of a table. */
static void op_table_text(const op_table *table, size_t i, const char **name,
                          const char **description) {
  const char *row = op_table_row(table, i);
  memcpy(name, row, sizeof *name);
  memcpy(description, row + sizeof *name, sizeof *description);
}

/* ------------------------------------------------------------------------ */
/* Heuristics                                                                */
/* ------------------------------------------------------------------------ */

/* Rows per matrix product, columns, depth, and whether B has a unit stride
 * in one direction (what the gemv path streams well). */
static void gemm_shape_of(tsr_op op, const void *args, int64_t *m, int64_t *n, int64_t *k,
                          bool *b_unit_stride, int32_t *b_dtype) {
  const tsr_plugin_tensor *b;
  int b_row_dim;
  if (op == TSR_OP_GEMM) {
    const tsr_gemm_args *g = args;
    *m = g->d.shape[1];
    *n = g->d.shape[2];
    *k = g->a.shape[2];
    b = &g->b;
    b_row_dim = 1;
  } else {
    const tsr_grouped_gemm_args *g = args;
    int64_t groups = 0, rows = 0;
    for (int64_t i = 0; i < g->group_count; i++) {
      if (g->group_sizes && g->group_sizes[i] > 0) {
        groups++;
        rows += g->group_sizes[i];
      }
    }
    *m = groups > 0 ? (rows + groups - 1) / groups : 0;
    *n = g->d.shape[1];
    *k = g->a.shape[1];
    b = &g->b;
    b_row_dim = 1;
  }
  *b_unit_stride = b->strides[b_row_dim + 1] == 1 || b->strides[b_row_dim] == 1;
  *b_dtype = b->dtype;
}

/* Up to this many rows the products are bound by reading B, and the gemv
 * path (B streamed once, no packing) is the faster one. Its partial sums
 * cost a load and a store per row of A for each vector of B, so with more
 * rows it turns bound by stores; the packed path's vdpbf16ps kernels make
 * bf16 cross over sooner (measured on Zen 5, 4096 x 4096: docs/PERFORMANCE.md). */
enum { GEMM_GEMV_MAX_ROWS = 8, GEMM_GEMV_MAX_ROWS_BF16 = 4 };

/* The most rows (per product) the gemv path takes in `family` at `level`. */
static int gemv_max_rows(cpu_isa family, cpu_isa level, int32_t b_dtype) {
  return b_dtype == TSR_DTYPE_BF16 && family == CPU_ISA_AVX512 &&
                 cpu_isa_includes(level, CPU_ISA_AVX512_BF16)
             ? GEMM_GEMV_MAX_ROWS_BF16
             : GEMM_GEMV_MAX_ROWS;
}

/* The gemv or the packed config of `family` for this problem; *gemv says
 * which. Group sizes count here, so for grouped GEMM it runs per call. */
static const cpu_gemm_config *gemm_pick(tsr_op op, const void *args, cpu_isa family, bool *gemv) {
  int64_t m, n, k;
  bool b_unit_stride;
  int32_t b_dtype;
  gemm_shape_of(op, args, &m, &n, &k, &b_unit_stride, &b_dtype);
  *gemv = m <= gemv_max_rows(family, cpu_isa_active(), b_dtype) && b_unit_stride;
  return find_gemm_config(family, *gemv ? CPU_GEMM_GEMV : CPU_GEMM_PACKED);
}

static const cpu_gemm_config *gemm_heuristic(const tsr_gemm_args *args, char *reason,
                                             size_t capacity) {
  cpu_isa level = cpu_isa_active();
  cpu_isa family = gemm_family(level);
  bool gemv;
  const cpu_gemm_config *pick = gemm_pick(TSR_OP_GEMM, args, family, &gemv);
  const long long m = args->d.shape[1], n = args->d.shape[2], k = args->a.shape[2];
  if (reason) {
    if (gemv)
      snprintf(reason, capacity,
               "M = %lld, N = %lld, K = %lld on %s: at most %d rows, reading B is the cost; "
               "stream it once, unpacked, over all threads",
               m, n, k, cpu_isa_name(level), gemv_max_rows(family, level, args->b.dtype));
    else
      snprintf(reason, capacity,
               "M = %lld, N = %lld, K = %lld on %s: the %s %dx%d register block with cache "
               "blocks from L1d/L2/L3",
               m, n, k, cpu_isa_name(level), cpu_isa_name(family), pick->mr, pick->nr);
  }
  return pick;
}

/* Grouped GEMM: the auto row of the level's family. The gemv or the packed
 * path is picked per call from the group sizes, which are not part of the
 * problem's signature (the core reuses one choice for every call with the
 * same shapes). */
static const cpu_gemm_config *grouped_heuristic(const tsr_grouped_gemm_args *args, char *reason,
                                                size_t capacity) {
  cpu_isa level = cpu_isa_active();
  cpu_isa family = gemm_family(level);
  const cpu_gemm_config *packed = find_gemm_config(family, CPU_GEMM_PACKED);
  if (reason)
    snprintf(reason, capacity,
             "%lld rows in %lld groups, N = %lld, K = %lld on %s: per call, the gemv while the "
             "non-empty groups average at most %d rows and B has a unit stride, else the %s "
             "%dx%d register block",
             (long long)args->a.shape[0], (long long)args->group_count, (long long)args->d.shape[1],
             (long long)args->a.shape[1], cpu_isa_name(level),
             gemv_max_rows(family, level, args->b.dtype), cpu_isa_name(family), packed->mr,
             packed->nr);
  return find_gemm_config(family, CPU_GEMM_AUTO);
}

/* The longest query and key sequences the problem can have: the resolved
 * bounds of a serving problem, the dense extents otherwise (and from a core
 * that predates the bounds). */
static void attention_bounds(const tsr_attention_args *args, int64_t *max_q, int64_t *max_kv) {
  if (args->struct_size >= sizeof *args && args->max_seqlen_q > 0) {
    *max_q = args->max_seqlen_q;
    *max_kv = args->max_seqlen_kv;
  } else {
    *max_q = args->q.shape[1];
    *max_kv = args->k.shape[1];
  }
}

static int attention_heuristic(const tsr_attention_args *args, char *reason, size_t capacity) {
  int64_t q_len, kv_len;
  attention_bounds(args, &q_len, &kv_len);
  int pick = q_len <= ATTENTION_DECODE_MAX_Q && kv_len >= ATTENTION_DECODE_MIN_KV ? ATTENTION_DECODE
             : q_len <= ATTENTION_SMALL_MAX_Q || kv_len <= ATTENTION_SMALL_MAX_KV ? ATTENTION_SMALL
                                                                                  : ATTENTION_LARGE;
  if (reason)
    snprintf(
        reason, capacity,
        pick == ATTENTION_DECODE
            ? "Sq up to %lld, Skv up to %lld: few query rows against long keys, reading K and V is "
              "the cost; split-KV decode, key chunks from the run-time lengths"
        : pick == ATTENTION_SMALL
            ? "Sq up to %lld, Skv up to %lld: short sequences, small tiles keep every thread busy"
            : "Sq up to %lld, Skv up to %lld: long sequences, large tiles reuse each key tile "
              "longer",
        (long long)q_len, (long long)kv_len);
  return pick;
}

/* ------------------------------------------------------------------------ */
/* Listing and lookup                                                        */
/* ------------------------------------------------------------------------ */

/* Whether op lists c: its family runs at the active level, and auto rows
 * are for grouped GEMM only. */
static bool gemm_config_listed(const cpu_gemm_config *c, tsr_op op) {
  return gemm_config_usable(c) && (c->method != CPU_GEMM_AUTO || op == TSR_OP_GROUPED_GEMM);
}

/* c's description, with the bf16 kernel named where the active level uses it
 * (the level can be forced after the configs are built). */
static void describe_gemm_config(const cpu_gemm_config *c, char *buffer, size_t capacity) {
  static const char bf16_note[] = "; bf16 inputs: vdpbf16ps";
  bool bf16 = c->method == CPU_GEMM_PACKED && c->isa == CPU_ISA_AVX512 &&
              cpu_isa_includes(cpu_isa_active(), CPU_ISA_AVX512_BF16);
  snprintf(buffer, capacity, "%s%s", c->description, bf16 ? bf16_note : "");
}

tsr_status cpu_op_variants(tsr_op op, const void *args, tsr_plugin_variant_list *out) {
  if (op == TSR_OP_GEMM || op == TSR_OP_GROUPED_GEMM) {
    ensure_gemm_configs();
    const cpu_gemm_config *pick = op == TSR_OP_GEMM
                                      ? gemm_heuristic(args, out->reason, sizeof out->reason)
                                      : grouped_heuristic(args, out->reason, sizeof out->reason);
    char description[sizeof out->variants[0].description];
    for (int i = 0; i < gemm_config_count; i++) {
      const cpu_gemm_config *c = &gemm_configs[i];
      if (!gemm_config_listed(c, op))
        continue;
      if (c == pick)
        out->heuristic = (int32_t)out->count;
      describe_gemm_config(c, description, sizeof description);
      tsr_plugin_variants_add(out, c->name, "%s", description);
    }
    return TSR_OK;
  }
  const op_table *table = op_table_of(op);
  if (!table)
    return TSR_ERROR_UNSUPPORTED;
  for (size_t i = 0; i < table->count; i++) {
    const char *name, *description;
    op_table_text(table, i, &name, &description);
    tsr_plugin_variants_add(out, name, "%s", description);
  }
  if (op == TSR_OP_ATTENTION)
    out->heuristic = attention_heuristic(args, out->reason, sizeof out->reason);
  else
    snprintf(out->reason, sizeof out->reason, "the only variant of this op");
  return TSR_OK;
}

const void *cpu_op_find_variant(tsr_op op, const char *name) {
  if (op == TSR_OP_GEMM || op == TSR_OP_GROUPED_GEMM) {
    ensure_gemm_configs();
    const cpu_gemm_config *c =
        tsr_plugin_row_find(gemm_configs, (size_t)gemm_config_count, sizeof gemm_configs[0], name);
    return c && gemm_config_listed(c, op) ? c : NULL;
  }
  const op_table *table = op_table_of(op);
  return table ? tsr_plugin_row_find(table->rows, table->count, table->stride, name) : NULL;
}

const void *cpu_op_default_variant(tsr_op op, const void *args) {
  if (op == TSR_OP_GEMM)
    return gemm_heuristic(args, NULL, 0);
  if (op == TSR_OP_GROUPED_GEMM)
    return grouped_heuristic(args, NULL, 0);
  const op_table *table = op_table_of(op);
  if (!table)
    return NULL;
  return op_table_row(table,
                      op == TSR_OP_ATTENTION ? (size_t)attention_heuristic(args, NULL, 0) : 0);
}

const void *cpu_op_run_config(tsr_op op, const void *args, const void *config) {
  const cpu_gemm_config *c = config;
  if (op != TSR_OP_GROUPED_GEMM || c->method != CPU_GEMM_AUTO)
    return config;
  bool gemv;
  return gemm_pick(op, args, (cpu_isa)c->isa, &gemv);
}
