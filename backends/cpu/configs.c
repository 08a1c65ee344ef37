/* The CPU plugin's kernel variants (tile configurations), the heuristics
 * that pick one per problem, and the instruction set the GEMM micro-kernels
 * are dispatched to. The same tables answer op_variants and op_run. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "configs.h"

/* ------------------------------------------------------------------------ */
/* Instruction set                                                           */
/* ------------------------------------------------------------------------ */

static const char *const isa_names[CPU_ISA_COUNT_] = {"generic", "avx2", "avx512"};

/* -1 until detected or set. */
static atomic_int active_isa = -1;

cpu_isa cpu_isa_detect(void) {
#if CPU_HAVE_X86_KERNELS
  __builtin_cpu_init();
  int fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (fma && __builtin_cpu_supports("avx512f"))
    return CPU_ISA_AVX512;
  if (fma)
    return CPU_ISA_AVX2;
#endif
  return CPU_ISA_GENERIC;
}

const char *cpu_isa_name(cpu_isa isa) {
  return (int)isa >= 0 && (int)isa < CPU_ISA_COUNT_ ? isa_names[isa] : "unknown";
}

int cpu_isa_from_name(const char *name, cpu_isa *isa) {
  for (int i = 0; i < CPU_ISA_COUNT_; i++) {
    if (name && strcmp(name, isa_names[i]) == 0) {
      *isa = (cpu_isa)i;
      return 1;
    }
  }
  return 0;
}

cpu_isa cpu_isa_active(void) {
  int isa = atomic_load(&active_isa);
  if (isa < 0) {
    isa = (int)cpu_isa_detect();
    atomic_store(&active_isa, isa);
  }
  return (cpu_isa)isa;
}

void cpu_isa_set_active(cpu_isa isa) {
  atomic_store(&active_isa, (int)isa);
}

/* ------------------------------------------------------------------------ */
/* Tables                                                                    */
/* ------------------------------------------------------------------------ */

/* Register blocks sized for the vector registers of each instruction set:
 * 8x32 keeps 16 of AVX-512's 32 zmm registers as accumulators, 8x16 keeps 8;
 * 4x16 keeps 8 of AVX2's 16 ymm registers (6x16 would use 12, but compilers
 * spill it) and wastes the least on matrices of a few rows; 4x8 keeps 8 of
 * SSE's 16 xmm registers. KC is large because every KC slice beyond the first
 * costs a pass over the f32 accumulator; MC x KC blocks of A stay in L2. */
static const cpu_gemm_config gemm_configs[] = {
    {"cpu_gemm_mr8nr32_kc1024_mc128_nc1024", 8, 32, 128, 1024, 1024},
    {"cpu_gemm_mr8nr16_kc1024_mc128_nc2048", 8, 16, 128, 1024, 2048},
    {"cpu_gemm_mr4nr16_kc1024_mc128_nc1024", 4, 16, 128, 1024, 1024},
    {"cpu_gemm_mr6nr16_kc512_mc96_nc1024", 6, 16, 96, 512, 1024},
    {"cpu_gemm_mr4nr8_kc512_mc128_nc1024", 4, 8, 128, 512, 1024},
};
enum {
  GEMM_8X32,
  GEMM_8X16,
  GEMM_4X16,
  GEMM_6X16,
  GEMM_4X8,
  GEMM_CONFIG_COUNT = sizeof gemm_configs / sizeof gemm_configs[0]
};

/* The heuristic's picks per instruction set, for matrices of many rows and of
 * at most GEMM_FEW_ROWS rows. The micro-kernels are plain C, so the best
 * register block depends on how the compiler allocated registers: measured on
 * a Zen 4 machine, clang 14 spills the 8x32 (AVX-512) and 4x16 (AVX2) blocks
 * that GCC 12 keeps in registers. */
enum { GEMM_FEW_ROWS = 4 };
typedef struct gemm_pick {
  int many_rows, few_rows;
  const char *why;
} gemm_pick;
static const gemm_pick gemm_picks[CPU_ISA_COUNT_] = {
#if defined(__clang__)
    {GEMM_4X8, GEMM_4X8, "4x8 uses 8 of the 16 registers of the baseline instruction set"},
    {GEMM_4X8, GEMM_4X8, "4x8 is the AVX2 block this compiler keeps in registers"},
    {GEMM_8X16, GEMM_4X16, "8x16 is the AVX-512 block this compiler keeps in registers"},
#else
    {GEMM_4X8, GEMM_4X8, "4x8 uses 8 of the 16 registers of the baseline instruction set"},
    {GEMM_4X16, GEMM_4X16, "4x16 uses 8 of the 16 ymm registers for accumulators"},
    {GEMM_8X32, GEMM_4X16, "8x32 uses 16 of the 32 zmm registers for accumulators"},
#endif
};

static const cpu_attention_config attention_configs[] = {
    {"cpu_attention_bq32_bkv64", 32, 64},
    {"cpu_attention_bq64_bkv128", 64, 128},
};
enum { ATTENTION_SMALL, ATTENTION_LARGE, ATTENTION_CONFIG_COUNT = 2 };

static const cpu_simple_config rows_config = {
    "cpu_rows", "one row per task, f32 arithmetic, rows split over the thread pool"};
static const cpu_simple_config elementwise_config = {
    "cpu_elementwise", "contiguous runs converted through f32 buffers, split over the thread pool"};

static int op_is_row_op(tsr_op op) {
  return op == TSR_OP_RMSNORM || op == TSR_OP_LAYERNORM || op == TSR_OP_SOFTMAX ||
         op == TSR_OP_CROSS_ENTROPY;
}

static int op_is_elementwise(tsr_op op) {
  return op == TSR_OP_ROPE || op == TSR_OP_SWIGLU || op == TSR_OP_GELU;
}

/* ------------------------------------------------------------------------ */
/* Heuristics                                                                */
/* ------------------------------------------------------------------------ */

/* Rows per matrix product, columns and depth of a gemm or grouped gemm. */
static void gemm_shape(tsr_op op, const void *args, int64_t *m, int64_t *n, int64_t *k) {
  if (op == TSR_OP_GEMM) {
    const tsr_gemm_args *g = args;
    *m = g->d.shape[1];
    *n = g->d.shape[2];
    *k = g->a.shape[2];
    return;
  }
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
}

static int gemm_heuristic(tsr_op op, const void *args, char *reason, size_t capacity) {
  int64_t m, n, k;
  gemm_shape(op, args, &m, &n, &k);
  cpu_isa isa = cpu_isa_active();
  const char *isa_name = cpu_isa_name(isa);
  const char *rows_word = op == TSR_OP_GEMM ? "M" : "mean rows per group";
  const gemm_pick *picks = &gemm_picks[isa];
  bool few = m <= GEMM_FEW_ROWS;
  int pick = few ? picks->few_rows : picks->many_rows;
  const char *why =
      few ? "few rows: a 4-row register block wastes the least work on padding" : picks->why;
  if (reason)
    snprintf(reason, capacity, "%s = %lld, N = %lld, K = %lld on %s: %s", rows_word, (long long)m,
             (long long)n, (long long)k, isa_name, why);
  return pick;
}

static int attention_heuristic(const tsr_attention_args *args, char *reason, size_t capacity) {
  int64_t q_len = args->q.shape[1], kv_len = args->k.shape[1];
  int pick = q_len <= 32 || kv_len <= 256 ? ATTENTION_SMALL : ATTENTION_LARGE;
  if (reason)
    snprintf(reason, capacity,
             pick == ATTENTION_SMALL
                 ? "Sq = %lld, Skv = %lld: short sequences, small tiles keep every thread busy"
                 : "Sq = %lld, Skv = %lld: long sequences, large tiles reuse each key tile longer",
             (long long)q_len, (long long)kv_len);
  return pick;
}

/* ------------------------------------------------------------------------ */
/* Listing and lookup                                                        */
/* ------------------------------------------------------------------------ */

static void put_variant(tsr_plugin_variant_list *out, const char *name, const char *description) {
  if (out->count >= TSR_PLUGIN_MAX_VARIANTS)
    return;
  tsr_plugin_variant *v = &out->variants[out->count++];
  snprintf(v->name, sizeof v->name, "%s", name);
  snprintf(v->description, sizeof v->description, "%s", description);
}

tsr_status cpu_op_variants(tsr_op op, const void *args, tsr_plugin_variant_list *out) {
  out->count = 0;
  out->heuristic = 0;
  out->reason[0] = '\0';
  char description[160];
  if (op == TSR_OP_GEMM || op == TSR_OP_GROUPED_GEMM) {
    for (int i = 0; i < GEMM_CONFIG_COUNT; i++) {
      const cpu_gemm_config *c = &gemm_configs[i];
      snprintf(description, sizeof description,
               "register block MR=%d x NR=%d; cache blocks KC=%d MC=%d NC=%d; %s micro-kernel; "
               "f32 accumulation",
               c->mr, c->nr, c->kc, c->mc, c->nc, cpu_isa_name(cpu_isa_active()));
      put_variant(out, c->name, description);
    }
    out->heuristic = gemm_heuristic(op, args, out->reason, sizeof out->reason);
    return TSR_OK;
  }
  if (op == TSR_OP_ATTENTION) {
    for (int i = 0; i < ATTENTION_CONFIG_COUNT; i++) {
      const cpu_attention_config *c = &attention_configs[i];
      snprintf(description, sizeof description,
               "query tile %d rows x key tile %d rows, online softmax in f32", c->block_q,
               c->block_kv);
      put_variant(out, c->name, description);
    }
    out->heuristic = attention_heuristic(args, out->reason, sizeof out->reason);
    return TSR_OK;
  }
  const cpu_simple_config *only = op_is_row_op(op)        ? &rows_config
                                  : op_is_elementwise(op) ? &elementwise_config
                                                          : NULL;
  if (!only)
    return TSR_ERROR_UNSUPPORTED;
  put_variant(out, only->name, only->description);
  snprintf(out->reason, sizeof out->reason, "the only variant of this op");
  return TSR_OK;
}

const void *cpu_op_find_variant(tsr_op op, const char *name) {
  if (!name)
    return NULL;
  if (op == TSR_OP_GEMM || op == TSR_OP_GROUPED_GEMM) {
    for (int i = 0; i < GEMM_CONFIG_COUNT; i++)
      if (strcmp(name, gemm_configs[i].name) == 0)
        return &gemm_configs[i];
    return NULL;
  }
  if (op == TSR_OP_ATTENTION) {
    for (int i = 0; i < ATTENTION_CONFIG_COUNT; i++)
      if (strcmp(name, attention_configs[i].name) == 0)
        return &attention_configs[i];
    return NULL;
  }
  if (op_is_row_op(op))
    return strcmp(name, rows_config.name) == 0 ? &rows_config : NULL;
  if (op_is_elementwise(op))
    return strcmp(name, elementwise_config.name) == 0 ? &elementwise_config : NULL;
  return NULL;
}

const void *cpu_op_default_variant(tsr_op op, const void *args) {
  if (op == TSR_OP_GEMM || op == TSR_OP_GROUPED_GEMM)
    return &gemm_configs[gemm_heuristic(op, args, NULL, 0)];
  if (op == TSR_OP_ATTENTION)
    return &attention_configs[attention_heuristic(args, NULL, 0)];
  if (op_is_row_op(op))
    return &rows_config;
  if (op_is_elementwise(op))
    return &elementwise_config;
  return NULL;
}

void cpu_op_variant_names(tsr_op op, char *buffer, size_t capacity) {
  if (capacity == 0)
    return;
  buffer[0] = '\0';
  size_t used = 0;
  const char *names[GEMM_CONFIG_COUNT + ATTENTION_CONFIG_COUNT];
  int count = 0;
  if (op == TSR_OP_GEMM || op == TSR_OP_GROUPED_GEMM) {
    for (int i = 0; i < GEMM_CONFIG_COUNT; i++)
      names[count++] = gemm_configs[i].name;
  } else if (op == TSR_OP_ATTENTION) {
    for (int i = 0; i < ATTENTION_CONFIG_COUNT; i++)
      names[count++] = attention_configs[i].name;
  } else if (op_is_row_op(op)) {
    names[count++] = rows_config.name;
  } else if (op_is_elementwise(op)) {
    names[count++] = elementwise_config.name;
  }
  for (int i = 0; i < count && used + 1 < capacity; i++) {
    int written = snprintf(buffer + used, capacity - used, "%s%s", i > 0 ? ", " : "", names[i]);
    if (written < 0)
      break;
    used += (size_t)written;
  }
}
