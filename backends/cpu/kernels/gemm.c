/* GEMM and grouped GEMM for the CPU plugin, blocked in the BLIS way:
 *
 *   for each NC-wide panel of columns
 *     for each row block (bounded so its f32 accumulator stays small)
 *       for each KC-deep slice of K
 *         pack B[KC x NC] into NR-wide strips (f32)
 *         for each MC x (part of NC) unit, in parallel
 *           pack A[MC x KC] into MR-tall strips (f32, per worker)
 *           for each NR strip, for each MR strip: micro-kernel (MR x NR in registers)
 *
 * Packing converts f16/bf16 to f32 and applies any strides (transposes are
 * strides), padding partial strips with zeros, so the micro-kernels only ever
 * see full MR x NR blocks. Partial sums of earlier KC slices live in an f32
 * accumulator; the last slice applies the epilogue (alpha, beta * C, bias,
 * activation) and stores only the valid part of each block into D's dtype.
 *
 * The micro-kernels are plain C written so that the compiler keeps the
 * accumulators in vector registers; each is compiled for the baseline target
 * and, on x86-64, for AVX2+FMA and AVX-512, and the active instruction set
 * picks among them at run time. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "configs.h"
#include "cpu_internal.h"

/* f32 partial sums kept between KC slices, per problem run: bounds the rows
 * processed together when K needs more than one slice. */
#ifndef CPU_GEMM_ACCUM_BUDGET_BYTES
#define CPU_GEMM_ACCUM_BUDGET_BYTES (8 << 20)
#endif

enum {
  GEMM_MAX_MR = 32,
  GEMM_MAX_NR = 64,
  GEMM_MAX_KC = 2048,
  /* Below this many packed B elements a panel is packed by one thread. */
  GEMM_PARALLEL_PACK_ELEMENTS = 1 << 16,
};

/* ------------------------------------------------------------------------ */
/* Micro-kernels                                                             */
/* ------------------------------------------------------------------------ */

/* block[i * NR + j] = sum over k of a[k * MR + i] * b[k * NR + j], for an
 * MR x NR block. The block is written densely and merged with partial sums by
 * the caller: loads or strided stores inside the kernel keep GCC from
 * vectorising the block as a whole. */
typedef void (*micro_kernel_fn)(int64_t kc, const float *restrict a, const float *restrict b,
                                float *restrict block);

#if defined(__clang__)
#define GEMM_UNROLL _Pragma("unroll")
#define GEMM_K_LOOP _Pragma("clang loop vectorize(disable) interleave(disable)")
#define GEMM_MICRO_OPTIONS
#elif defined(__GNUC__)
#define GEMM_UNROLL _Pragma("GCC unroll 64")
#define GEMM_K_LOOP
/* Loop-vectorising the k loop would turn each accumulator into a reduction;
 * with it off, the unrolled MR x NR body is vectorised as a block (SLP) and
 * the accumulators stay in registers. ISO C mode disables contraction, which
 * FMA targets need to fuse acc += a * b. */
#define GEMM_MICRO_OPTIONS __attribute__((optimize("no-tree-loop-vectorize", "fp-contract=fast")))
#else
#define GEMM_UNROLL
#define GEMM_K_LOOP
#define GEMM_MICRO_OPTIONS
#endif

#define GEMM_DEFINE_MICRO_KERNEL(NAME, MR, NR, TARGET)                                             \
  TARGET GEMM_MICRO_OPTIONS static void NAME(int64_t kc, const float *restrict a,                  \
                                             const float *restrict b, float *restrict block) {     \
    float acc[MR][NR];                                                                             \
    GEMM_UNROLL for (int i = 0; i < MR; i++) GEMM_UNROLL for (int j = 0; j < NR; j++) acc[i][j] =  \
        0.0f;                                                                                      \
    GEMM_K_LOOP for (int64_t k = 0; k < kc; k++) {                                                 \
      GEMM_UNROLL for (int i = 0; i < MR; i++) GEMM_UNROLL for (int j = 0; j < NR; j++)            \
          acc[i][j] += a[k * MR + i] * b[k * NR + j];                                              \
    }                                                                                              \
    GEMM_UNROLL for (int i = 0; i < MR; i++) GEMM_UNROLL for (int j = 0; j < NR; j++)              \
        block[i * NR + j] = acc[i][j];                                                             \
  }

/* One set of register blocks per instruction set; configs.c only uses these. */
#define GEMM_DEFINE_MICRO_KERNEL_SET(SUFFIX, TARGET)                                               \
  GEMM_DEFINE_MICRO_KERNEL(micro_4x8_##SUFFIX, 4, 8, TARGET)                                       \
  GEMM_DEFINE_MICRO_KERNEL(micro_4x16_##SUFFIX, 4, 16, TARGET)                                     \
  GEMM_DEFINE_MICRO_KERNEL(micro_6x16_##SUFFIX, 6, 16, TARGET)                                     \
  GEMM_DEFINE_MICRO_KERNEL(micro_8x16_##SUFFIX, 8, 16, TARGET)                                     \
  GEMM_DEFINE_MICRO_KERNEL(micro_8x32_##SUFFIX, 8, 32, TARGET)

#define GEMM_MICRO_KERNEL_ENTRIES(SUFFIX, ISA)                                                     \
  {4, 8, ISA, micro_4x8_##SUFFIX}, {4, 16, ISA, micro_4x16_##SUFFIX},                              \
      {6, 16, ISA, micro_6x16_##SUFFIX}, {8, 16, ISA, micro_8x16_##SUFFIX},                        \
      {8, 32, ISA, micro_8x32_##SUFFIX},

GEMM_DEFINE_MICRO_KERNEL_SET(generic, )
#if CPU_HAVE_X86_KERNELS
GEMM_DEFINE_MICRO_KERNEL_SET(avx2, __attribute__((target("avx2,fma"))))
GEMM_DEFINE_MICRO_KERNEL_SET(avx512, __attribute__((target("avx512f,avx2,fma"))))
#endif

typedef struct micro_kernel_entry {
  int mr, nr;
  cpu_isa isa;
  micro_kernel_fn fn;
} micro_kernel_entry;

static const micro_kernel_entry micro_kernels[] = {
    GEMM_MICRO_KERNEL_ENTRIES(generic, CPU_ISA_GENERIC)
#if CPU_HAVE_X86_KERNELS
        GEMM_MICRO_KERNEL_ENTRIES(avx2, CPU_ISA_AVX2)
            GEMM_MICRO_KERNEL_ENTRIES(avx512, CPU_ISA_AVX512)
#endif
};

/* The kernel for (mr, nr) of the highest instruction set not above `isa`. */
static micro_kernel_fn find_micro_kernel(int mr, int nr, cpu_isa isa) {
  const micro_kernel_entry *best = NULL;
  for (size_t i = 0; i < sizeof micro_kernels / sizeof micro_kernels[0]; i++) {
    const micro_kernel_entry *e = &micro_kernels[i];
    if (e->mr == mr && e->nr == nr && e->isa <= isa && (!best || e->isa > best->isa))
      best = e;
  }
  return best ? best->fn : NULL;
}

/* ------------------------------------------------------------------------ */
/* Operands, conversion, packing                                             */
/* ------------------------------------------------------------------------ */

/* A matrix view: element (row, col) at base + (row * row_stride + col *
 * col_stride) elements of dtype. */
typedef struct gemm_operand {
  char *base;
  int32_t dtype;
  int64_t row_stride, col_stride;
} gemm_operand;

static size_t dtype_bytes(int32_t dtype) {
  return dtype == TSR_DTYPE_F32 ? 4 : 2;
}

static char *operand_at(const gemm_operand *o, int64_t row, int64_t col) {
  return o->base + (row * o->row_stride + col * o->col_stride) * (int64_t)dtype_bytes(o->dtype);
}

static int64_t min64(int64_t x, int64_t y) {
  return x < y ? x : y;
}

static int64_t round_up(int64_t x, int64_t multiple) {
  return (x + multiple - 1) / multiple * multiple;
}

/* dst[i] = element i of a strided run starting at src, as f32. */
static void load_run(float *dst, const char *src, int32_t dtype, int64_t stride, int64_t count) {
  if (dtype == TSR_DTYPE_F32) {
    const float *s = (const float *)src;
    if (stride == 1) {
      memcpy(dst, s, (size_t)count * sizeof *dst);
    } else {
      for (int64_t i = 0; i < count; i++)
        dst[i] = s[i * stride];
    }
  } else if (dtype == TSR_DTYPE_F16) {
    const uint16_t *s = (const uint16_t *)src;
    for (int64_t i = 0; i < count; i++)
      dst[i] = tsr_f16_to_f32(s[i * stride]);
  } else {
    const uint16_t *s = (const uint16_t *)src;
    for (int64_t i = 0; i < count; i++)
      dst[i] = tsr_bf16_to_f32(s[i * stride]);
  }
}

static void store_run(char *dst, int32_t dtype, int64_t stride, const float *src, int64_t count) {
  if (dtype == TSR_DTYPE_F32) {
    float *d = (float *)dst;
    for (int64_t i = 0; i < count; i++)
      d[i * stride] = src[i];
  } else if (dtype == TSR_DTYPE_F16) {
    uint16_t *d = (uint16_t *)dst;
    for (int64_t i = 0; i < count; i++)
      d[i * stride] = tsr_f32_to_f16(src[i]);
  } else {
    uint16_t *d = (uint16_t *)dst;
    for (int64_t i = 0; i < count; i++)
      d[i * stride] = tsr_f32_to_bf16(src[i]);
  }
}

/* Packs rows [row0, row0 + rows) x columns [k0, k0 + kc) of A into MR-tall
 * strips: strip s holds element (s * mr + r, k) at [s * mr * kc + k * mr + r];
 * rows past the end are zero. Reads follow A's contiguous direction. */
static void pack_a(const gemm_operand *a, int64_t row0, int64_t rows, int64_t k0, int64_t kc,
                   int mr, float *dst) {
  int64_t strips = (rows + mr - 1) / mr;
  if (a->col_stride == 1 && a->row_stride != 1) {
    /* Rows contiguous along k: read each row in one run. */
    float line[GEMM_MAX_KC];
    for (int64_t s = 0; s < strips; s++) {
      float *strip = dst + s * mr * kc;
      int strip_rows = (int)min64(mr, rows - s * mr);
      for (int r = 0; r < strip_rows; r++) {
        load_run(line, operand_at(a, row0 + s * mr + r, k0), a->dtype, 1, kc);
        for (int64_t k = 0; k < kc; k++)
          strip[k * mr + r] = line[k];
      }
      for (int r = strip_rows; r < mr; r++)
        for (int64_t k = 0; k < kc; k++)
          strip[k * mr + r] = 0.0f;
    }
    return;
  }
  /* Columns contiguous (A transposed) or both strides large: for each k,
   * read the block's column from top to bottom. */
  for (int64_t k = 0; k < kc; k++) {
    for (int64_t s = 0; s < strips; s++) {
      float *dst_k = dst + s * mr * kc + k * mr;
      int strip_rows = (int)min64(mr, rows - s * mr);
      load_run(dst_k, operand_at(a, row0 + s * mr, k0 + k), a->dtype, a->row_stride, strip_rows);
      for (int r = strip_rows; r < mr; r++)
        dst_k[r] = 0.0f;
    }
  }
}

/* B panel rows [k0, k0 + kc) x columns [col0, col0 + cols) packed into
 * NR-wide strips: strip s holds element (k, s * nr + j) at
 * [s * nr * kc + k * nr + j]; columns past the end are zero. */
typedef struct gemm_pack_b_job {
  const gemm_operand *b;
  int64_t k0, kc, col0, cols;
  int nr;
  float *b_pack;
} gemm_pack_b_job;

/* Units are rows k of the panel: each row of B is read from left to right
 * (B with contiguous rows, or both strides large). */
static void pack_b_rows(void *context, int64_t begin, int64_t end, int worker) {
  const gemm_pack_b_job *job = context;
  (void)worker;
  const int nr = job->nr;
  int64_t strips = (job->cols + nr - 1) / nr;
  for (int64_t k = begin; k < end; k++) {
    for (int64_t s = 0; s < strips; s++) {
      float *dst_k = job->b_pack + s * nr * job->kc + k * nr;
      int cols = (int)min64(nr, job->cols - s * nr);
      load_run(dst_k, operand_at(job->b, job->k0 + k, job->col0 + s * nr), job->b->dtype,
               job->b->col_stride, cols);
      for (int j = cols; j < nr; j++)
        dst_k[j] = 0.0f;
    }
  }
}

/* Units are strips: each column of B (B transposed: contiguous along k) is
 * read from top to bottom. */
static void pack_b_columns(void *context, int64_t begin, int64_t end, int worker) {
  const gemm_pack_b_job *job = context;
  (void)worker;
  const int nr = job->nr;
  const int64_t kc = job->kc;
  float line[GEMM_MAX_KC];
  for (int64_t s = begin; s < end; s++) {
    float *strip = job->b_pack + s * nr * kc;
    int cols = (int)min64(nr, job->cols - s * nr);
    for (int j = 0; j < cols; j++) {
      load_run(line, operand_at(job->b, job->k0, job->col0 + s * nr + j), job->b->dtype,
               job->b->row_stride, kc);
      for (int64_t k = 0; k < kc; k++)
        strip[k * nr + j] = line[k];
    }
    for (int64_t k = 0; k < kc; k++)
      for (int j = cols; j < nr; j++)
        strip[k * nr + j] = 0.0f;
  }
}

/* ------------------------------------------------------------------------ */
/* The blocked driver                                                        */
/* ------------------------------------------------------------------------ */

/* One matrix product: a batch item or a non-empty group. */
typedef struct gemm_problem {
  gemm_operand a, b, c, d; /* c.base NULL: no C term */
  const float *bias;       /* n values, or NULL */
  int64_t m, n, k;
} gemm_problem;

/* Scratch of one worker. In a problem split over the pool, b_pack and accum
 * of the calling worker are shared and a_pack is each worker's own. */
typedef struct gemm_workspace {
  float *a_pack;
  float *b_pack;
  float *accum;
  int64_t packed_block; /* which row block of the current step a_pack holds; -1 none */
} gemm_workspace;

typedef struct gemm_plan {
  const cpu_gemm_config *config;
  micro_kernel_fn micro;
  float alpha, beta;
  int32_t activation;
  int64_t row_block; /* rows that share one pass over K (a multiple of mc) */
  int64_t accum_ld;  /* row stride of the accumulator */
  cpu_pool *pool;
  int threads;
  gemm_workspace *workspaces; /* threads entries */
} gemm_plan;

/* One KC slice of one row block of one column panel. */
typedef struct gemm_step {
  const gemm_plan *plan;
  const gemm_problem *problem;
  const gemm_workspace *shared; /* b_pack, accum */
  int64_t col0, cols;
  int64_t row0, rows;
  int64_t k0, kc;
  bool first, last; /* first / last KC slice */
  int64_t strips;   /* NR strips in the panel */
  int64_t chunks;   /* parts the panel's strips are split into */
  int64_t chunk_strips;
} gemm_step;

/* The epilogue for a rows x cols corner of an MR x NR result block:
 * d = act(alpha * acc + beta * c + bias), read c before writing d (c may be d). */
static void store_block(const gemm_plan *plan, const gemm_problem *p, const float *block,
                        int64_t block_ld, int64_t row0, int rows, int64_t col0, int cols) {
  float values[GEMM_MAX_NR];
  float c_values[GEMM_MAX_NR];
  for (int r = 0; r < rows; r++) {
    const float *acc = block + r * block_ld;
    for (int j = 0; j < cols; j++)
      values[j] = plan->alpha * acc[j];
    if (p->c.base) {
      load_run(c_values, operand_at(&p->c, row0 + r, col0), p->c.dtype, p->c.col_stride, cols);
      for (int j = 0; j < cols; j++)
        values[j] += plan->beta * c_values[j];
    }
    if (p->bias) {
      for (int j = 0; j < cols; j++)
        values[j] += p->bias[col0 + j];
    }
    if (plan->activation != TSR_ACT_NONE) {
      for (int j = 0; j < cols; j++)
        values[j] = cpu_activation(plan->activation, values[j]);
    }
    store_run(operand_at(&p->d, row0 + r, col0), p->d.dtype, p->d.col_stride, values, cols);
  }
}

static void copy_block(float *acc, int64_t acc_ld, const float *block, int mr, int nr) {
  for (int i = 0; i < mr; i++)
    memcpy(acc + i * acc_ld, block + i * nr, (size_t)nr * sizeof *acc);
}

static void add_block(float *acc, int64_t acc_ld, const float *block, int mr, int nr) {
  for (int i = 0; i < mr; i++) {
    float *row = acc + i * acc_ld;
    const float *add = block + i * nr;
    for (int j = 0; j < nr; j++)
      row[j] += add[j];
  }
}

/* Work units of a step: unit u is row block u / chunks (MC rows) times strip
 * chunk u % chunks. */
static void compute_units(void *context, int64_t begin, int64_t end, int worker) {
  const gemm_step *step = context;
  const gemm_plan *plan = step->plan;
  const gemm_problem *p = step->problem;
  const cpu_gemm_config *cfg = plan->config;
  gemm_workspace *own = &plan->workspaces[worker];
  const int mr = cfg->mr, nr = cfg->nr;
  const int64_t kc = step->kc;
  float block[GEMM_MAX_MR * GEMM_MAX_NR];

  for (int64_t u = begin; u < end; u++) {
    int64_t row_block = u / step->chunks;
    int64_t chunk = u % step->chunks;
    int64_t ic = step->row0 + row_block * cfg->mc;
    int64_t block_rows = min64(cfg->mc, step->row0 + step->rows - ic);
    if (own->packed_block != row_block) {
      pack_a(&p->a, ic, block_rows, step->k0, kc, mr, own->a_pack);
      own->packed_block = row_block;
    }
    int64_t strip_end = min64(step->strips, (chunk + 1) * step->chunk_strips);
    for (int64_t s = chunk * step->chunk_strips; s < strip_end; s++) {
      const float *b_panel = step->shared->b_pack + s * nr * kc;
      int64_t col = step->col0 + s * nr;
      int cols = (int)min64(nr, step->col0 + step->cols - col);
      for (int64_t r = 0; r * mr < block_rows; r++) {
        const float *a_panel = own->a_pack + r * mr * kc;
        int64_t row = ic + r * mr;
        int rows = (int)min64(mr, block_rows - r * mr);
        plan->micro(kc, a_panel, b_panel, block);
        if (step->first && step->last) {
          store_block(plan, p, block, nr, row, rows, col, cols);
          continue;
        }
        float *acc = step->shared->accum + (row - step->row0) * plan->accum_ld + s * nr;
        if (step->first)
          copy_block(acc, plan->accum_ld, block, mr, nr);
        else
          add_block(acc, plan->accum_ld, block, mr, nr);
        if (step->last)
          store_block(plan, p, acc, plan->accum_ld, row, rows, col, cols);
      }
    }
  }
}

/* Runs one problem, on the whole pool (`parallel`) or on worker `worker`
 * alone. */
static void run_problem(const gemm_plan *plan, const gemm_problem *p, int worker, bool parallel) {
  const cpu_gemm_config *cfg = plan->config;
  const gemm_workspace *shared = &plan->workspaces[worker];
  int64_t k_slices = p->k > 0 ? (p->k + cfg->kc - 1) / cfg->kc : 1;
  for (int64_t col0 = 0; col0 < p->n; col0 += cfg->nc) {
    int64_t cols = min64(cfg->nc, p->n - col0);
    int64_t strips = (cols + cfg->nr - 1) / cfg->nr;
    for (int64_t row0 = 0; row0 < p->m; row0 += plan->row_block) {
      int64_t rows = min64(plan->row_block, p->m - row0);
      int64_t row_blocks = (rows + cfg->mc - 1) / cfg->mc;
      for (int64_t slice = 0; slice < k_slices; slice++) {
        int64_t k0 = slice * cfg->kc;
        int64_t kc = min64(cfg->kc, p->k - k0);

        gemm_pack_b_job pack = {&p->b, k0, kc, col0, cols, cfg->nr, shared->b_pack};
        bool by_rows = p->b.col_stride == 1 || p->b.row_stride != 1;
        cpu_range_fn pack_fn = by_rows ? pack_b_rows : pack_b_columns;
        int64_t pack_units = by_rows ? kc : strips;
        if (parallel) {
          int64_t unit_elements = by_rows ? cols : (int64_t)cfg->nr * kc;
          int64_t grain = GEMM_PARALLEL_PACK_ELEMENTS / (unit_elements > 0 ? unit_elements : 1) + 1;
          cpu_pool_parallel_for(plan->pool, pack_units, grain, pack_fn, &pack);
        } else {
          pack_fn(&pack, 0, pack_units, worker);
        }

        gemm_step step = {.plan = plan,
                          .problem = p,
                          .shared = shared,
                          .col0 = col0,
                          .cols = cols,
                          .row0 = row0,
                          .rows = rows,
                          .k0 = k0,
                          .kc = kc,
                          .first = slice == 0,
                          .last = slice == k_slices - 1,
                          .strips = strips,
                          .chunks = 1};
        /* Few row blocks (skinny M): split the panel's strips too, so that
         * every thread gets work. */
        if (parallel) {
          while (row_blocks * step.chunks < 2 * plan->threads && step.chunks * 2 <= strips)
            step.chunks *= 2;
        }
        step.chunk_strips = (strips + step.chunks - 1) / step.chunks;
        step.chunks = (strips + step.chunk_strips - 1) / step.chunk_strips;
        if (parallel) {
          for (int t = 0; t < plan->threads; t++)
            plan->workspaces[t].packed_block = -1;
          cpu_pool_parallel_for(plan->pool, row_blocks * step.chunks, 1, compute_units, &step);
        } else {
          plan->workspaces[worker].packed_block = -1;
          compute_units(&step, 0, row_blocks * step.chunks, worker);
        }
      }
    }
  }
}

typedef struct gemm_problem_set {
  const gemm_plan *plan;
  const gemm_problem *problems;
} gemm_problem_set;

static void run_problems_serially(void *context, int64_t begin, int64_t end, int worker) {
  const gemm_problem_set *set = context;
  for (int64_t i = begin; i < end; i++)
    run_problem(set->plan, &set->problems[i], worker, false);
}

/* Packing memory is kept by the calling thread between calls (a queue's
 * worker runs every kernel of its queue), so that repeated GEMMs do not fault
 * in fresh pages each time. Larger needs than the cap are not kept. */
enum { GEMM_KEPT_WORKSPACE_MAX_BYTES = 64 << 20 };
static _Thread_local struct {
  char *memory;
  size_t bytes;
} thread_workspace;

void cpu_gemm_release_thread_workspace(void) {
  free(thread_workspace.memory);
  thread_workspace.memory = NULL;
  thread_workspace.bytes = 0;
}

/* 64-byte aligned memory of at least `bytes`; *owned says whether the caller
 * must free it (not kept for the thread). */
static char *workspace_acquire(size_t bytes, bool *owned) {
  *owned = false;
  if (bytes <= thread_workspace.bytes)
    return thread_workspace.memory;
  if (bytes > GEMM_KEPT_WORKSPACE_MAX_BYTES) {
    *owned = true;
    return aligned_alloc(64, bytes);
  }
  cpu_gemm_release_thread_workspace();
  thread_workspace.memory = aligned_alloc(64, bytes);
  thread_workspace.bytes = thread_workspace.memory ? bytes : 0;
  return thread_workspace.memory;
}

/* Bytes of `count` floats rounded up to whole 64-byte lines. */
static size_t float_bytes(int64_t count) {
  return (size_t)round_up(count > 0 ? count : 1, 16) * sizeof(float);
}

static tsr_status fail(const cpu_exec *exec, tsr_status status, const char *message) {
  if (exec->error && exec->error_capacity > 0)
    snprintf(exec->error, exec->error_capacity, "%s", message);
  return status;
}

/* Runs a set of problems sharing n, k and the scalars. Problems that are too
 * small to keep every thread busy run side by side, one per thread; larger
 * ones run one after another, each over the whole pool. */
static tsr_status gemm_execute(const cpu_exec *exec, const cpu_gemm_config *config,
                               const gemm_problem *problems, int64_t count, float alpha, float beta,
                               int32_t activation) {
  if (!config || config->mr < 1 || config->mr > GEMM_MAX_MR || config->nr < 1 ||
      config->nr > GEMM_MAX_NR || config->kc < 1 || config->kc > GEMM_MAX_KC ||
      config->mc < config->mr || config->mc % config->mr != 0 || config->nc < config->nr ||
      config->nc % config->nr != 0)
    return fail(exec, TSR_ERROR_INVALID_VALUE, "cpu gemm: the variant's blocking is not usable");
  gemm_plan plan = {.config = config,
                    .alpha = alpha,
                    .beta = beta,
                    .activation = activation,
                    .pool = exec->pool,
                    .threads = cpu_pool_threads(exec->pool)};
  plan.micro = find_micro_kernel(config->mr, config->nr, cpu_isa_active());
  if (!plan.micro) {
    char message[128];
    snprintf(message, sizeof message, "cpu gemm: no %dx%d micro-kernel in this build", config->mr,
             config->nr);
    return fail(exec, TSR_ERROR_UNSUPPORTED, message);
  }
  if (count == 0)
    return TSR_OK;

  int64_t max_m = 0, sum_m = 0;
  for (int64_t i = 0; i < count; i++) {
    max_m = problems[i].m > max_m ? problems[i].m : max_m;
    sum_m += problems[i].m;
  }
  const int64_t n = problems[0].n, k = problems[0].k;
  bool side_by_side =
      plan.threads > 1 && count >= plan.threads && sum_m / count < 2 * config->mc * plan.threads;
  int busy_workspaces = side_by_side ? plan.threads : 1;

  int64_t kc = min64(config->kc, k > 0 ? k : 1);
  int64_t panel_cols = round_up(min64(config->nc, n), config->nr);
  plan.accum_ld = panel_cols;
  plan.row_block = max_m;
  if (k > config->kc) {
    int64_t budget_rows = CPU_GEMM_ACCUM_BUDGET_BYTES / busy_workspaces / (panel_cols * 4);
    int64_t rows = budget_rows / config->mc * config->mc;
    rows = rows < config->mc ? config->mc : rows;
    plan.row_block = min64(max_m, rows);
  }

  size_t a_bytes = float_bytes(round_up(min64(config->mc, max_m), config->mr) * kc);
  size_t b_bytes = float_bytes(panel_cols * kc);
  size_t accum_bytes =
      k > config->kc ? float_bytes(round_up(plan.row_block, config->mr) * panel_cols) : 0;
  size_t total = (size_t)plan.threads * a_bytes + (size_t)busy_workspaces * (b_bytes + accum_bytes);
  bool owned = false;
  char *memory = workspace_acquire(total, &owned);
  plan.workspaces = calloc((size_t)plan.threads, sizeof *plan.workspaces);
  if (!memory || !plan.workspaces) {
    if (owned)
      free(memory);
    free(plan.workspaces);
    return fail(exec, TSR_ERROR_OUT_OF_MEMORY, "cpu gemm: cannot allocate packing workspace");
  }
  for (int t = 0; t < plan.threads; t++) {
    gemm_workspace *w = &plan.workspaces[t];
    w->a_pack = (float *)memory;
    memory += a_bytes;
    if (t < busy_workspaces) {
      w->b_pack = (float *)memory;
      memory += b_bytes;
      w->accum = accum_bytes ? (float *)memory : NULL;
      memory += accum_bytes;
    }
  }

  gemm_problem_set set = {&plan, problems};
  if (side_by_side)
    cpu_pool_parallel_for(plan.pool, count, 1, run_problems_serially, &set);
  else
    for (int64_t i = 0; i < count; i++)
      run_problem(&plan, &problems[i], 0, plan.threads > 1);
  if (owned)
    free(plan.workspaces[0].a_pack);
  free(plan.workspaces);
  return TSR_OK;
}

static gemm_operand operand_of(const tsr_plugin_tensor *t, int row_dim, int64_t offset) {
  gemm_operand o = {cpu_tensor_base(t) + offset * (int64_t)dtype_bytes(t->dtype), t->dtype,
                    t->strides[row_dim], t->strides[row_dim + 1]};
  return o;
}

/* bias[j * stride] for j < n as f32, into a new array. */
static float *convert_bias(const tsr_plugin_tensor *bias, int64_t offset, int64_t stride,
                           int64_t n) {
  float *values = malloc((size_t)(n > 0 ? n : 1) * sizeof *values);
  if (values)
    load_run(values, cpu_tensor_base(bias) + offset * (int64_t)dtype_bytes(bias->dtype),
             bias->dtype, stride, n);
  return values;
}

tsr_status cpu_gemm_run(const cpu_exec *exec, const tsr_gemm_args *args,
                        const cpu_gemm_config *config) {
  const int64_t batch = args->d.shape[0], m = args->d.shape[1], n = args->d.shape[2];
  const int64_t k = args->a.shape[2];
  if (batch <= 0 || m <= 0 || n <= 0)
    return TSR_OK;
  bool has_c = args->c.buffer != NULL && args->beta != 0.0f;
  float *bias = NULL;
  if (args->bias.buffer) {
    bias = convert_bias(&args->bias, 0, args->bias.strides[0], n);
    if (!bias)
      return fail(exec, TSR_ERROR_OUT_OF_MEMORY, "cpu gemm: cannot allocate the bias row");
  }
  gemm_problem *problems = calloc((size_t)batch, sizeof *problems);
  if (!problems) {
    free(bias);
    return fail(exec, TSR_ERROR_OUT_OF_MEMORY, "cpu gemm: cannot allocate the batch list");
  }
  for (int64_t i = 0; i < batch; i++) {
    gemm_problem *p = &problems[i];
    p->a = operand_of(&args->a, 1, i * args->a.strides[0]);
    p->b = operand_of(&args->b, 1, i * args->b.strides[0]);
    p->d = operand_of(&args->d, 1, i * args->d.strides[0]);
    if (has_c)
      p->c = operand_of(&args->c, 1, i * args->c.strides[0]);
    p->bias = bias;
    p->m = m;
    p->n = n;
    p->k = k;
  }
  tsr_status status = gemm_execute(exec, config, problems, batch, args->alpha,
                                   has_c ? args->beta : 0.0f, args->activation);
  free(problems);
  free(bias);
  return status;
}

tsr_status cpu_grouped_gemm_run(const cpu_exec *exec, const tsr_grouped_gemm_args *args,
                                const cpu_gemm_config *config) {
  const int64_t groups = args->group_count, n = args->d.shape[1], k = args->a.shape[1];
  if (groups <= 0 || n <= 0)
    return TSR_OK;
  float *bias = NULL;
  if (args->bias.buffer) {
    bias = malloc((size_t)(groups * n) * sizeof *bias);
    if (!bias)
      return fail(exec, TSR_ERROR_OUT_OF_MEMORY, "cpu grouped gemm: cannot allocate bias rows");
    for (int64_t g = 0; g < groups; g++)
      load_run(bias + g * n,
               cpu_tensor_base(&args->bias) +
                   g * args->bias.strides[0] * (int64_t)dtype_bytes(args->bias.dtype),
               args->bias.dtype, args->bias.strides[1], n);
  }
  gemm_problem *problems = calloc((size_t)groups, sizeof *problems);
  if (!problems) {
    free(bias);
    return fail(exec, TSR_ERROR_OUT_OF_MEMORY, "cpu grouped gemm: cannot allocate group list");
  }
  int64_t count = 0, start = 0;
  for (int64_t g = 0; g < groups; g++) {
    int64_t rows = args->group_sizes[g];
    if (rows > 0) {
      gemm_problem *p = &problems[count++];
      p->a = operand_of(&args->a, 0, start * args->a.strides[0]);
      p->b = operand_of(&args->b, 1, g * args->b.strides[0]);
      p->d = operand_of(&args->d, 0, start * args->d.strides[0]);
      p->bias = bias ? bias + g * n : NULL;
      p->m = rows;
      p->n = n;
      p->k = k;
    }
    start += rows > 0 ? rows : 0;
  }
  tsr_status status =
      gemm_execute(exec, config, problems, count, args->alpha, 0.0f, args->activation);
  free(problems);
  free(bias);
  return status;
}
