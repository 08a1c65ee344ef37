/* SPDX-License-Identifier: Apache-2.0 */
/* GEMM and grouped GEMM for the CPU plugin, blocked in the BLIS way:
 *
 *   for each NC-wide panel of columns
 *     for each row block (bounded only when partial sums need scratch)
 *       for each KC-deep slice of K
 *         pack B[KC x NC] into NR-wide strips           (split over threads)
 *         units (MC row block, NR strip), equal shares per thread:
 *           pack A[MC x KC] into MR-tall strips         (per thread)
 *           for each MR strip: micro-kernel, epilogue in its store
 *
 * Packing converts f16 (F16C) and bf16 to f32, or keeps bf16 as k pairs for
 * the AVX512_BF16 kernels, and applies any strides (transposes are strides),
 * padding partial strips with zeros so the micro-kernels always compute full
 * MR x NR blocks; their stores write only the valid part. Between KC slices
 * partial sums live in D itself when D is f32 with unit column stride, else
 * in f32 scratch. The first slice adds beta * C and the bias, the last one
 * applies the activation and converts to D's dtype.
 *
 * Few rows (decode) go to the gemv path (gemv.c), which streams B once. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_kernels.h"
#include "machine.h"

/* f32 partial sums kept between KC slices when D cannot hold them: bounds
 * the rows processed together (each row block packs B again). */
#ifndef CPU_GEMM_ACCUM_BUDGET_BYTES
#define CPU_GEMM_ACCUM_BUDGET_BYTES (64 << 20)
/* One thread's rate on the fastest micro-kernel (f32 AVX-512 about 100-150
 * GFLOP/s a core; bf16 dot products twice that): the split cost model's input. */
#define GEMM_FLOPS_PER_NS 150.0
#endif

enum { GEMM_LINE_MAX = 4096 };

/* A spin-wait hint. */
static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static int64_t min64(int64_t x, int64_t y) {
  return x < y ? x : y;
}

static int64_t round_up(int64_t x, int64_t multiple) {
  return (x + multiple - 1) / multiple * multiple;
}

/* ------------------------------------------------------------------------ */
/* Epilogue in scalar code                                                   */
/* ------------------------------------------------------------------------ */

void gemm_store_block(const gemm_tile_out *o, const float *block, int64_t ld) {
  for (int i = 0; i < o->rows; i++) {
    for (int j = 0; j < o->cols; j++) {
      float v = o->alpha * block[i * ld + j];
      if (o->prior)
        v += o->prior[i * o->prior_ld + j];
      if (o->c)
        v += o->beta * tsr_load_as_f32(o->c, o->c_dtype, i * o->c_rs + j * o->c_cs);
      if (o->bias)
        v += o->bias[j];
      if (o->activation != TSR_ACT_NONE)
        v = cpu_activation(o->activation, v);
      tsr_store_from_f32(o->dst, o->dst_dtype, i * o->dst_rs + j * o->dst_cs, v);
    }
  }
}

/* ------------------------------------------------------------------------ */
/* Portable micro-kernel                                                     */
/* ------------------------------------------------------------------------ */

#if defined(__clang__)
#define GEMM_UNROLL _Pragma("unroll")
#define GEMM_K_LOOP _Pragma("clang loop vectorize(disable) interleave(disable)")
#define GEMM_MICRO_OPTIONS
#elif defined(__GNUC__)
#define GEMM_UNROLL _Pragma("GCC unroll 64")
#define GEMM_K_LOOP
/* Loop-vectorising the k loop would turn each accumulator into a reduction;
 * with it off the unrolled block is vectorised as a whole (SLP) and stays in
 * registers. */
#define GEMM_MICRO_OPTIONS __attribute__((optimize("no-tree-loop-vectorize")))
#else
#define GEMM_UNROLL
#define GEMM_K_LOOP
#define GEMM_MICRO_OPTIONS
#endif

enum { GENERIC_MR = 4, GENERIC_NR = 8 };

GEMM_MICRO_OPTIONS static void generic_f32_4x8(int64_t kc, const void *a_pack, const void *b_pack,
                                               const gemm_tile_out *out) {
  const float *restrict a = a_pack;
  const float *restrict b = b_pack;
  float acc[GENERIC_MR][GENERIC_NR];
  GEMM_UNROLL for (int i = 0; i < GENERIC_MR; i++) GEMM_UNROLL for (int j = 0; j < GENERIC_NR; j++)
      acc[i][j] = 0.0f;
  GEMM_K_LOOP for (int64_t k = 0; k < kc; k++) {
    GEMM_UNROLL for (int i = 0; i < GENERIC_MR; i++)
        GEMM_UNROLL for (int j = 0; j < GENERIC_NR; j++) acc[i][j] +=
        a[k * GENERIC_MR + i] * b[k * GENERIC_NR + j];
  }
  gemm_store_block(out, &acc[0][0], GENERIC_NR);
}

static const gemm_kernel generic_kernels[] = {
    {CPU_ISA_GENERIC, GEMM_FORMAT_F32, GENERIC_MR, GENERIC_NR, generic_f32_4x8},
};

static const gemm_kernel *find_kernel(int isa, int format, int mr, int nr) {
  const gemm_kernel *tables[3] = {generic_kernels, NULL, NULL};
  int counts[3] = {(int)(sizeof generic_kernels / sizeof generic_kernels[0]), 0, 0};
#if CPU_HAVE_X86_KERNELS
  tables[1] = cpu_gemm_avx2_kernels;
  counts[1] = cpu_gemm_avx2_kernel_count;
  tables[2] = cpu_gemm_avx512_kernels;
  counts[2] = cpu_gemm_avx512_kernel_count;
#endif
  for (int t = 0; t < 3; t++)
    for (int i = 0; i < counts[t]; i++) {
      const gemm_kernel *kernel = &tables[t][i];
      if (kernel->isa == isa && kernel->format == format && kernel->mr == mr && kernel->nr == nr)
        return kernel;
    }
  return NULL;
}

bool cpu_gemm_has_kernel(int isa, int mr, int nr) {
  return find_kernel(isa, GEMM_FORMAT_F32, mr, nr) != NULL;
}

/* ------------------------------------------------------------------------ */
/* Conversion and packing                                                    */
/* ------------------------------------------------------------------------ */

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
#if CPU_HAVE_X86_KERNELS
    if (cpu_isa_includes(cpu_isa_active(), CPU_ISA_AVX2)) {
      cpu_gemm_f16_to_f32_avx2(dst, s, stride, count);
      return;
    }
#endif
    for (int64_t i = 0; i < count; i++)
      dst[i] = tsr_f16_to_f32(s[i * stride]);
  } else {
    const uint16_t *s = (const uint16_t *)src;
    for (int64_t i = 0; i < count; i++)
      dst[i] = tsr_bf16_to_f32(s[i * stride]);
  }
}

/* One MR-tall strip of A, f32: element (r, k) at dst[k * mr + r]; rows past
 * `rows` are zero. */
static void pack_a_f32(const gemm_operand *a, int64_t row0, int rows, int64_t k0, int64_t kc,
                       int mr, float *dst) {
  if (a->cs == 1 && a->dtype == TSR_DTYPE_F32) {
    for (int r = 0; r < rows; r++) {
      const float *src = (const float *)gemm_at(a, row0 + r, k0);
      for (int64_t k = 0; k < kc; k++)
        dst[k * mr + r] = src[k];
    }
  } else if (a->rs == 1 || a->cs != 1) {
    /* Columns contiguous (A transposed) or both strides large: one column
     * segment per k. */
    for (int64_t k = 0; k < kc; k++)
      load_run(dst + k * mr, gemm_at(a, row0, k0 + k), a->dtype, a->rs, rows);
  } else {
    float line[GEMM_LINE_MAX];
    for (int r = 0; r < rows; r++) {
      for (int64_t k_start = 0; k_start < kc; k_start += GEMM_LINE_MAX) {
        int64_t count = min64(GEMM_LINE_MAX, kc - k_start);
        load_run(line, gemm_at(a, row0 + r, k0 + k_start), a->dtype, 1, count);
        for (int64_t k = 0; k < count; k++)
          dst[(k_start + k) * mr + r] = line[k];
      }
    }
  }
  if (rows < mr)
    for (int64_t k = 0; k < kc; k++)
      for (int r = rows; r < mr; r++)
        dst[k * mr + r] = 0.0f;
}

/* One NR-wide strip of B, f32: element (k, j) at dst[k * nr + j]; columns
 * past `cols` are zero. */
static void pack_b_f32(const gemm_operand *b, int64_t k0, int64_t kc, int64_t col0, int cols,
                       int nr, float *dst) {
  if (b->cs == 1 || b->rs != 1) {
    for (int64_t k = 0; k < kc; k++) {
      float *row = dst + k * nr;
      load_run(row, gemm_at(b, k0 + k, col0), b->dtype, b->cs, cols);
      for (int j = cols; j < nr; j++)
        row[j] = 0.0f;
    }
    return;
  }
  /* B transposed (contiguous along k): one column at a time. */
  float line[GEMM_LINE_MAX];
  for (int j = 0; j < cols; j++) {
    for (int64_t k_start = 0; k_start < kc; k_start += GEMM_LINE_MAX) {
      int64_t count = min64(GEMM_LINE_MAX, kc - k_start);
      load_run(line, gemm_at(b, k0 + k_start, col0 + j), b->dtype, 1, count);
      for (int64_t k = 0; k < count; k++)
        dst[(k_start + k) * nr + j] = line[k];
    }
  }
  for (int64_t k = 0; k < kc; k++)
    for (int j = cols; j < nr; j++)
      dst[k * nr + j] = 0.0f;
}

/* bf16 element (row, col) of an operand, 0 outside [0, limit) in k. */
static uint32_t bf16_bits(const gemm_operand *o, int64_t row, int64_t col) {
  return *(const uint16_t *)gemm_at(o, row, col);
}

/* One MR-tall strip of bf16 A as k pairs: pair (r, p) at dst[p * mr + r]. */
static void pack_a_bf16(const gemm_operand *a, int64_t row0, int rows, int64_t k0, int64_t kc,
                        int mr, uint32_t *dst) {
  int64_t pairs = (kc + 1) / 2, full = kc / 2;
  for (int r = 0; r < rows; r++) {
    if (a->cs == 1) {
      const uint16_t *src = (const uint16_t *)gemm_at(a, row0 + r, k0);
      for (int64_t p = 0; p < full; p++)
        dst[p * mr + r] = (uint32_t)src[2 * p] | (uint32_t)src[2 * p + 1] << 16;
    } else {
      for (int64_t p = 0; p < full; p++)
        dst[p * mr + r] =
            bf16_bits(a, row0 + r, k0 + 2 * p) | bf16_bits(a, row0 + r, k0 + 2 * p + 1) << 16;
    }
    if (full < pairs)
      dst[full * mr + r] = bf16_bits(a, row0 + r, k0 + kc - 1);
  }
  if (rows < mr)
    for (int64_t p = 0; p < pairs; p++)
      for (int r = rows; r < mr; r++)
        dst[p * mr + r] = 0;
}

/* One NR-wide strip of bf16 B as k pairs: pair (p, j) at dst[p * nr + j]. */
static void pack_b_bf16(const gemm_operand *b, int64_t k0, int64_t kc, int64_t col0, int cols,
                        int nr, uint32_t *dst) {
  int64_t pairs = (kc + 1) / 2;
  for (int64_t p = 0; p < pairs; p++) {
    uint32_t *row = dst + p * nr;
    int64_t k = k0 + 2 * p;
    bool second = 2 * p + 1 < kc;
    if (b->cs == 1) {
      const uint16_t *even = (const uint16_t *)gemm_at(b, k, col0);
      const uint16_t *odd = (const uint16_t *)gemm_at(b, second ? k + 1 : k, col0);
      for (int j = 0; j < cols; j++)
        row[j] = (uint32_t)even[j] | (second ? (uint32_t)odd[j] << 16 : 0u);
    } else {
      for (int j = 0; j < cols; j++)
        row[j] = bf16_bits(b, k, col0 + j) | (second ? bf16_bits(b, k + 1, col0 + j) << 16 : 0u);
    }
    for (int j = cols; j < nr; j++)
      row[j] = 0;
  }
}

/* ------------------------------------------------------------------------ */
/* The blocked driver                                                        */
/* ------------------------------------------------------------------------ */

/* Scratch of one worker. In a problem split over the pool, a_pack and the
 * own strips are each worker's; b_pack (packed by whichever thread needs a
 * strip first) and accum are the calling worker's, shared. */
typedef struct gemm_workspace {
  void *a_pack;
  void *b_pack;
  float *accum;
  atomic_int *strip_state; /* per B strip of a shared b_pack: STRIP_* */
  /* This worker's own B strips, where a step packs privately: `own_strips`
   * slots and, per slot, which strip of which step it holds (strip_key). */
  void *own_b_pack;
  int64_t *own_strip_key;
  int64_t own_strips;
} gemm_workspace;

/* B strips are packed by the first thread that needs one, in the same
 * parallel region as the products (no separate packing pass). */
enum { STRIP_EMPTY = 0, STRIP_PACKING = 1, STRIP_READY = 2 };

typedef struct gemm_plan {
  const cpu_gemm_config *config;
  const gemm_kernel *kernel;
  int mr, nr, format;
  int64_t mc, kc, nc; /* kc even for bf16 pairs */
  int64_t element_bytes;
  bool avx512_packing; /* the active level has AVX-512: vector packers */
  float alpha, beta;
  int32_t activation;
  int64_t row_block; /* rows that share one pass over K (a multiple of mc) */
  cpu_pool *pool;
  int threads;
  gemm_workspace *workspaces; /* threads entries */
} gemm_plan;

/* One KC slice of one row block of one column panel. */
typedef struct gemm_step {
  const gemm_plan *plan;
  const gemm_problem *problem;
  const gemm_workspace *shared; /* b_pack, accum */
  int64_t col0, cols, strips;
  int64_t row0, rows, blocks;
  int64_t mc; /* rows per block: rows split into equal blocks of at most plan->mc */
  int64_t k0, kc;
  bool first, last; /* first / last KC slice */
  bool accum_in_d;  /* partial sums live in D */
  int64_t serial;   /* this step's number in the process (strip_key) */
  int shares;       /* threads the units are split over */
} gemm_step;

static void pack_a_block(const gemm_plan *plan, const gemm_operand *a, int64_t row0, int64_t rows,
                         int64_t k0, int64_t kc, void *dst) {
  int64_t strip_elements =
      (int64_t)plan->mr * (plan->format == GEMM_FORMAT_F32 ? kc : round_up(kc, 2));
  for (int64_t s = 0; s * plan->mr < rows; s++) {
    int strip_rows = (int)min64(plan->mr, rows - s * plan->mr);
#if CPU_HAVE_X86_KERNELS
    if (plan->avx512_packing &&
        cpu_gemm_pack_a_avx512(a, row0 + s * plan->mr, strip_rows, k0, kc, plan->mr, plan->format,
                               (char *)dst + s * strip_elements * plan->element_bytes))
      continue;
#endif
    if (plan->format == GEMM_FORMAT_F32)
      pack_a_f32(a, row0 + s * plan->mr, strip_rows, k0, kc, plan->mr,
                 (float *)dst + s * strip_elements);
    else
      pack_a_bf16(a, row0 + s * plan->mr, strip_rows, k0, kc, plan->mr,
                  (uint32_t *)dst + s * strip_elements / 2);
  }
}

typedef struct gemm_pack_b_job {
  const gemm_plan *plan;
  const gemm_operand *b;
  int64_t k0, kc, col0, cols;
  void *b_pack;
} gemm_pack_b_job;

static void pack_b_strips(void *context, int64_t begin, int64_t end, int worker) {
  const gemm_pack_b_job *job = context;
  const gemm_plan *plan = job->plan;
  (void)worker;
  const int nr = plan->nr;
  const int64_t kc_packed = plan->format == GEMM_FORMAT_F32 ? job->kc : round_up(job->kc, 2);
  for (int64_t s = begin; s < end; s++) {
    int cols = (int)min64(nr, job->cols - s * nr);
#if CPU_HAVE_X86_KERNELS
    if (plan->avx512_packing &&
        cpu_gemm_pack_b_avx512(job->b, job->k0, job->kc, job->col0 + s * nr, cols, nr, plan->format,
                               (char *)job->b_pack + s * nr * kc_packed * plan->element_bytes))
      continue;
#endif
    if (plan->format == GEMM_FORMAT_F32)
      pack_b_f32(job->b, job->k0, job->kc, job->col0 + s * nr, cols, nr,
                 (float *)job->b_pack + s * nr * job->kc);
    else
      pack_b_bf16(job->b, job->k0, job->kc, job->col0 + s * nr, cols, nr,
                  (uint32_t *)job->b_pack + s * nr * (round_up(job->kc, 2) / 2));
  }
}

/* The epilogue of block (row, col) of a step. */
static void tile_out_for(const gemm_step *step, int64_t row, int64_t col, gemm_tile_out *o) {
  const gemm_plan *plan = step->plan;
  const gemm_problem *p = step->problem;
  o->rows = (int)min64(plan->mr, step->row0 + step->rows - row);
  o->cols = (int)min64(plan->nr, step->col0 + step->cols - col);
  o->alpha = plan->alpha;
  o->prior = NULL;
  o->c = NULL;
  o->bias = NULL;
  o->activation = TSR_ACT_NONE;
  if (!step->first) {
    if (step->accum_in_d) {
      o->prior = (const float *)gemm_at(&p->d, row, col);
      o->prior_ld = p->d.rs;
    } else {
      o->prior_ld = round_up(step->cols, plan->nr);
      o->prior = step->shared->accum + (row - step->row0) * o->prior_ld + (col - step->col0);
    }
  } else {
    if (p->c.base) {
      o->c = gemm_at(&p->c, row, col);
      o->c_dtype = p->c.dtype;
      o->c_rs = p->c.rs;
      o->c_cs = p->c.cs;
      o->beta = plan->beta;
    }
    if (p->bias)
      o->bias = p->bias + col;
  }
  if (step->last || step->accum_in_d) {
    o->dst = gemm_at(&p->d, row, col);
    o->dst_dtype = p->d.dtype;
    o->dst_rs = p->d.rs;
    o->dst_cs = p->d.cs;
  } else {
    int64_t ld = round_up(step->cols, plan->nr);
    o->dst = (char *)(step->shared->accum + (row - step->row0) * ld + (col - step->col0));
    o->dst_dtype = TSR_DTYPE_F32;
    o->dst_rs = ld;
    o->dst_cs = 1;
  }
  if (step->last)
    o->activation = plan->activation;
  o->vector_store = o->dst_cs == 1 && (!o->c || o->c_cs == 1) &&
                    (o->activation == TSR_ACT_NONE || o->activation == TSR_ACT_RELU);
}

/* Makes B strip s of the step's panel ready: packs it when no thread has,
 * waits while another thread packs it. */
static void ensure_b_strip(const gemm_step *step, int64_t s) {
  atomic_int *state = &step->shared->strip_state[s];
  if (atomic_load_explicit(state, memory_order_acquire) == STRIP_READY)
    return;
  int expected = STRIP_EMPTY;
  if (atomic_compare_exchange_strong_explicit(state, &expected, STRIP_PACKING, memory_order_acquire,
                                              memory_order_acquire)) {
    gemm_pack_b_job pack = {step->plan, &step->problem->b,   step->k0, step->kc, step->col0,
                            step->cols, step->shared->b_pack};
    pack_b_strips(&pack, s, s + 1, 0);
    atomic_store_explicit(state, STRIP_READY, memory_order_release);
    return;
  }
  while (atomic_load_explicit(state, memory_order_acquire) != STRIP_READY)
    cpu_relax();
}

/* B strip s of the step in slot s - first of this worker's own strips,
 * packed on first use: no line of it is written by one thread and read by
 * another. */
static const char *own_b_strip(const gemm_step *step, const gemm_workspace *own, int64_t s,
                               int64_t first, int64_t strip_bytes) {
  const int64_t slot = s - first, key = step->serial << 24 | s;
  char *strip = (char *)own->own_b_pack + slot * strip_bytes;
  if (own->own_strip_key[slot] != key) {
    /* pack_b_strips writes strip s at s strips past its base */
    gemm_pack_b_job pack = {step->plan, &step->problem->b,      step->k0, step->kc, step->col0,
                            step->cols, strip - s * strip_bytes};
    pack_b_strips(&pack, s, s + 1, 0);
    own->own_strip_key[slot] = key;
  }
  return strip;
}

/* Micro-tiles (MR-row strips) in row block `block` of a step. */
static int64_t block_tiles(const gemm_step *step, int64_t block) {
  int64_t rows = min64(step->mc, step->rows - block * step->mc);
  return (rows + step->plan->mr - 1) / step->plan->mr;
}

/* The first unit (row block, strip) at or past `target` micro-tiles of work,
 * counting units in row-block order. */
static int64_t unit_at_work(const gemm_step *step, int64_t target) {
  int64_t done = 0;
  for (int64_t block = 0; block < step->blocks; block++) {
    int64_t tiles = block_tiles(step, block);
    int64_t block_work = tiles * step->strips;
    if (done + block_work > target)
      return block * step->strips + (target - done + tiles - 1) / tiles;
    done += block_work;
  }
  return step->blocks * step->strips;
}

/* Share `t` of `shares`: units (row block, strip) in row-block order, split
 * into contiguous ranges of equal work (a short last block weighs less);
 * A is packed again when the block changes. */
static void compute_share(void *context, int64_t t, int64_t shares, int worker) {
  const gemm_step *step = context;
  const gemm_plan *plan = step->plan;
  const gemm_problem *p = step->problem;
  gemm_workspace *own = &plan->workspaces[worker];
  const int mr = plan->mr, nr = plan->nr;
  const int64_t work = (step->blocks - 1) * block_tiles(step, 0) * step->strips +
                       block_tiles(step, step->blocks - 1) * step->strips;
  const int64_t begin = unit_at_work(step, work * t / shares);
  const int64_t end = unit_at_work(step, work * (t + 1) / shares);
  const int64_t kc_packed = plan->format == GEMM_FORMAT_F32 ? step->kc : round_up(step->kc, 2);
  const int64_t a_strip_bytes = mr * kc_packed * plan->element_bytes;
  const int64_t b_strip_bytes = nr * kc_packed * plan->element_bytes;
  int64_t packed_block = -1;
  /* The strips this share uses: a range within one row block (a split
   * across columns), else all of them. It packs them itself when they fit
   * its own slots (gemm_execute sizes them). */
  int64_t first_strip = 0, strip_count = step->strips;
  if (begin < end && begin / step->strips == (end - 1) / step->strips) {
    first_strip = begin % step->strips;
    strip_count = (end - 1) % step->strips - first_strip + 1;
  }
  const bool pack_own = shares > 1 && strip_count <= own->own_strips;
  for (int64_t u = begin; u < end; u++) {
    int64_t block = u / step->strips, s = u % step->strips;
    int64_t ic = step->row0 + block * step->mc;
    int64_t block_rows = min64(step->mc, step->row0 + step->rows - ic);
    if (block != packed_block) {
      pack_a_block(plan, &p->a, ic, block_rows, step->k0, step->kc, own->a_pack);
      packed_block = block;
    }
    const char *b_strip;
    if (pack_own) {
      b_strip = own_b_strip(step, own, s, first_strip, b_strip_bytes);
    } else {
      ensure_b_strip(step, s);
      b_strip = (const char *)step->shared->b_pack + s * b_strip_bytes;
    }
    int64_t col = step->col0 + s * nr;
    for (int64_t r = 0; r * mr < block_rows; r++) {
      gemm_tile_out out;
      tile_out_for(step, ic + r * mr, col, &out);
      plan->kernel->fn(step->kc, (const char *)own->a_pack + r * a_strip_bytes, b_strip, &out);
    }
  }
}

/* Numbers the steps of every GEMM in the process, so that a worker's own
 * strip slot never seems to hold a strip of an earlier step. */
static atomic_llong gemm_step_serial = 1;

/* Runs one problem on the whole pool (`parallel`) or on worker `worker`. */
static void run_problem(const gemm_plan *plan, const gemm_problem *p, int worker, bool parallel) {
  const gemm_workspace *shared = &plan->workspaces[worker];
  const int64_t k_slices = p->k > 0 ? (p->k + plan->kc - 1) / plan->kc : 1;
  /* Equal slices (a last slice of a few k would cost a pass over the
   * partial sums for little work); even for bf16 pairs, at most plan->kc. */
  const int64_t slice_kc = min64(plan->kc, round_up((p->k + k_slices - 1) / k_slices, 2));
  const bool accum_in_d = p->d.dtype == TSR_DTYPE_F32 && p->d.cs == 1;
  for (int64_t col0 = 0; col0 < p->n; col0 += plan->nc) {
    int64_t cols = min64(plan->nc, p->n - col0);
    int64_t strips = (cols + plan->nr - 1) / plan->nr;
    for (int64_t row0 = 0; row0 < p->m; row0 += plan->row_block) {
      int64_t rows = min64(plan->row_block, p->m - row0);
      for (int64_t slice = 0; slice < k_slices; slice++) {
        int64_t k0 = slice * slice_kc;
        int64_t kc = min64(slice_kc, p->k - k0);
        for (int64_t strip = 0; strip < strips; strip++)
          atomic_store_explicit(&shared->strip_state[strip], STRIP_EMPTY, memory_order_relaxed);
        gemm_step step = {.plan = plan,
                          .problem = p,
                          .shared = shared,
                          .col0 = col0,
                          .cols = cols,
                          .strips = strips,
                          .row0 = row0,
                          .rows = rows,
                          .blocks = (rows + plan->mc - 1) / plan->mc,
                          .mc = plan->mc,
                          .k0 = k0,
                          .kc = kc,
                          .first = slice == 0,
                          .last = slice == k_slices - 1,
                          .accum_in_d = accum_in_d && k_slices > 1};
        step.mc = round_up((rows + step.blocks - 1) / step.blocks, plan->mr);
        int64_t units = step.blocks * step.strips;
        /* no share smaller than the split cost model's chunk */
        int64_t by_work = (int64_t)(2.0 * (double)rows * (double)cols * (double)kc /
                                    GEMM_FLOPS_PER_NS / CPU_CHUNK_MIN_NS);
        step.shares =
            parallel ? (int)min64(min64(plan->threads, units), by_work > 1 ? by_work : 1) : 1;
        step.serial = atomic_fetch_add_explicit(&gemm_step_serial, 1, memory_order_relaxed);
        if (step.shares > 1)
          cpu_pool_run_threads(plan->pool, step.shares, compute_share, &step);
        else
          compute_share(&step, 0, 1, worker);
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

/* Packing memory is kept between calls, so that repeated GEMMs do not fault
 * in fresh pages each time: per thread, in `kept`. The thread that runs a
 * queue's commands (its worker, or the application's thread inside
 * tsr_queue_finish) exchanges it with the queue's own for the time
 * (cpu_gemm_scratch_exchange), so the memory belongs to the queue; pool
 * workers keep theirs until they exit. Larger needs than the cap are not
 * kept. */
enum { GEMM_KEPT_WORKSPACE_MAX_BYTES = 160 << 20 };
static _Thread_local cpu_gemm_scratch kept CPU_TLS_INITIAL_EXEC;

void cpu_gemm_scratch_exchange(cpu_gemm_scratch *slot) {
  cpu_gemm_scratch mine = kept;
  kept = *slot;
  *slot = mine;
}

void cpu_gemm_scratch_free(cpu_gemm_scratch *slot) {
  free(slot->packing);
  free(slot->tile);
  *slot = (cpu_gemm_scratch){0};
}

void cpu_gemm_release_thread_workspace(void) {
  cpu_gemm_scratch_free(&kept);
}

/* 64-byte aligned memory of at least `bytes`; *owned says whether the caller
 * must free it (not kept for the thread). */
static char *workspace_acquire(size_t bytes, bool *owned) {
  *owned = false;
  if (bytes <= kept.packing_bytes)
    return kept.packing;
  if (bytes > GEMM_KEPT_WORKSPACE_MAX_BYTES) {
    *owned = true;
    return aligned_alloc(64, round_up((int64_t)bytes, 64));
  }
  free(kept.packing);
  kept.packing = aligned_alloc(64, round_up((int64_t)bytes, 64));
  kept.packing_bytes = kept.packing ? bytes : 0;
  return kept.packing;
}

/* Bytes rounded up to whole 64-byte lines (at least one). */
static size_t line_bytes(int64_t bytes) {
  return (size_t)round_up(bytes > 0 ? bytes : 1, 64);
}

static tsr_status fail(const cpu_exec *exec, tsr_status status, const char *message) {
  if (exec->error && exec->error_capacity > 0)
    snprintf(exec->error, exec->error_capacity, "%s", message);
  return status;
}

/* The kernel and packed format for a config, the inputs' dtype and the
 * active level: bf16 inputs use the vdpbf16ps kernel of the same block when
 * the level has AVX512_BF16, everything else f32 strips. */
static const gemm_kernel *choose_kernel(const cpu_gemm_config *config, int32_t input_dtype) {
  if (input_dtype == TSR_DTYPE_BF16 && config->isa == CPU_ISA_AVX512 &&
      cpu_isa_includes(cpu_isa_active(), CPU_ISA_AVX512_BF16)) {
    const gemm_kernel *kernel =
        find_kernel(config->isa, GEMM_FORMAT_BF16_PAIRS, config->mr, config->nr);
    if (kernel)
      return kernel;
  }
  return find_kernel(config->isa, GEMM_FORMAT_F32, config->mr, config->nr);
}

/* Runs a set of problems sharing n, k, the dtypes and the scalars. Problems
 * too small to keep every thread busy run side by side, one per thread;
 * larger ones run one after another, each over the whole pool. */
static tsr_status gemm_execute(const cpu_exec *exec, const cpu_gemm_config *config,
                               const gemm_problem *problems, int64_t count, float alpha, float beta,
                               int32_t activation) {
  if (!config)
    return fail(exec, TSR_ERROR_INVALID_VALUE, "cpu gemm: no variant");
  if (count == 0)
    return TSR_OK;
  if (config->method == CPU_GEMM_GEMV)
    return cpu_gemv_run(exec, config->isa, problems, count, alpha, beta, activation);
  const gemm_kernel *kernel = choose_kernel(config, problems[0].a.dtype);
  if (!kernel || config->mc < config->mr || config->mc % config->mr != 0 || config->kc < 2 ||
      config->nc < config->nr || config->nc % config->nr != 0) {
    char message[160];
    snprintf(message, sizeof message, "cpu gemm: variant %s has no usable kernel or blocking",
             config->name);
    return fail(exec, TSR_ERROR_UNSUPPORTED, message);
  }
  gemm_plan plan = {.config = config,
                    .kernel = kernel,
                    .mr = kernel->mr,
                    .nr = kernel->nr,
                    .format = kernel->format,
                    .mc = config->mc,
                    .kc = kernel->format == GEMM_FORMAT_F32 ? config->kc : round_up(config->kc, 2),
                    .nc = config->nc,
                    .element_bytes = kernel->format == GEMM_FORMAT_F32 ? 4 : 2,
                    .avx512_packing = cpu_isa_includes(cpu_isa_active(), CPU_ISA_AVX512),
                    .alpha = alpha,
                    .beta = beta,
                    .activation = activation,
                    .pool = exec->pool,
                    .threads = cpu_pool_threads(exec->pool)};

  int64_t max_m = 0, sum_m = 0;
  for (int64_t i = 0; i < count; i++) {
    max_m = problems[i].m > max_m ? problems[i].m : max_m;
    sum_m += problems[i].m;
  }
  const int64_t n = problems[0].n, k = problems[0].k;
  const bool side_by_side =
      plan.threads > 1 && count >= plan.threads && sum_m / count < 2 * plan.mc * plan.threads;
  const int busy_workspaces = side_by_side ? plan.threads : 1;

  /* Partial sums need scratch when K takes several slices and D cannot
   * hold them (not f32, or strided columns). */
  const int64_t kc = min64(plan.kc, k > 0 ? round_up(k, 2) : 2);
  const int64_t panel_cols = round_up(min64(plan.nc, n), plan.nr);
  const bool scratch_sums =
      k > plan.kc && !(problems[0].d.dtype == TSR_DTYPE_F32 && problems[0].d.cs == 1);
  plan.row_block = max_m;
  if (scratch_sums) {
    int64_t budget_rows = CPU_GEMM_ACCUM_BUDGET_BYTES / busy_workspaces / (panel_cols * 4);
    int64_t rows = budget_rows / plan.mc * plan.mc;
    plan.row_block = min64(max_m, rows < plan.mc ? plan.mc : rows);
  }

  size_t a_bytes = line_bytes(round_up(min64(plan.mc, max_m), plan.mr) * kc * plan.element_bytes);
  size_t b_bytes = line_bytes(panel_cols * kc * plan.element_bytes);
  size_t accum_bytes =
      scratch_sums ? line_bytes(round_up(plan.row_block, plan.mr) * panel_cols * 4) : 0;
  size_t state_bytes = line_bytes((int64_t)sizeof(atomic_int) * (panel_cols / plan.nr));
  /* Own B strips per worker (compute_share): a whole panel where it fits a
   * core's L2, else a share of a split across columns. A panel shared
   * between threads is written by one core and read by the others on every
   * call; where two cores share no cache (different chiplets, or a VM's
   * vCPUs placed so) that traffic cost as much as the product itself
   * (docs/PERFORMANCE.md), and packing again costs a few percent. */
  const int64_t panel_strips = panel_cols / plan.nr,
                strip_bytes = plan.nr * kc * plan.element_bytes;
  const int64_t l2 = cpu_machine_get()->caches.l2;
  int64_t own_strips = 0;
  if (plan.threads > 1 && !side_by_side)
    own_strips = (int64_t)b_bytes <= l2
                     ? panel_strips
                     : min64(panel_strips, (panel_strips + plan.threads - 1) / plan.threads + 1);
  size_t own_bytes = own_strips ? line_bytes(own_strips * strip_bytes) : 0;
  size_t key_bytes = own_strips ? line_bytes(own_strips * (int64_t)sizeof(int64_t)) : 0;
  size_t total = (size_t)plan.threads * (a_bytes + own_bytes + key_bytes) +
                 (size_t)busy_workspaces * (b_bytes + accum_bytes + state_bytes);
  bool owned = false;
  char *memory = workspace_acquire(total, &owned);
  plan.workspaces = calloc((size_t)plan.threads, sizeof *plan.workspaces);
  if (!memory || !plan.workspaces) {
    if (owned)
      free(memory);
    free(plan.workspaces);
    return fail(exec, TSR_ERROR_OUT_OF_MEMORY, "cpu gemm: cannot allocate packing workspace");
  }
  char *cursor = memory;
  for (int t = 0; t < plan.threads; t++) {
    gemm_workspace *w = &plan.workspaces[t];
    w->a_pack = cursor;
    cursor += a_bytes;
    if (own_strips) {
      w->own_b_pack = cursor;
      cursor += own_bytes;
      w->own_strip_key = (int64_t *)(void *)cursor;
      cursor += key_bytes;
      w->own_strips = own_strips;
      for (int64_t i = 0; i < own_strips; i++)
        w->own_strip_key[i] = -1;
    }
    if (t < busy_workspaces) {
      w->b_pack = cursor;
      cursor += b_bytes;
      w->accum = accum_bytes ? (float *)cursor : NULL;
      cursor += accum_bytes;
      w->strip_state = (atomic_int *)(void *)cursor;
      cursor += state_bytes;
    }
  }

  gemm_problem_set set = {&plan, problems};
  if (side_by_side)
    cpu_pool_parallel_for(plan.pool, count, 1, run_problems_serially, &set);
  else
    for (int64_t i = 0; i < count; i++)
      run_problem(&plan, &problems[i], 0, plan.threads > 1);
  if (owned)
    free(memory);
  free(plan.workspaces);
  return TSR_OK;
}

static gemm_operand operand_of(const tsr_plugin_tensor *t, int row_dim, int64_t offset) {
  gemm_operand o = {cpu_tensor_base(t) + offset * gemm_dtype_bytes(t->dtype), t->dtype,
                    t->strides[row_dim], t->strides[row_dim + 1]};
  return o;
}

/* bias[j * stride] for j < n as f32, into `values`. */
static void convert_bias(float *values, const tsr_plugin_tensor *bias, int64_t offset,
                         int64_t stride, int64_t n) {
  load_run(values, cpu_tensor_base(bias) + offset * gemm_dtype_bytes(bias->dtype), bias->dtype,
           stride, n);
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
    bias = malloc((size_t)n * sizeof *bias);
    if (!bias)
      return fail(exec, TSR_ERROR_OUT_OF_MEMORY, "cpu gemm: cannot allocate the bias row");
    convert_bias(bias, &args->bias, 0, args->bias.strides[0], n);
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
      convert_bias(bias + g * n, &args->bias, g * args->bias.strides[0], args->bias.strides[1], n);
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

/* ------------------------------------------------------------------------ */
/* Tile products for other kernels                                           */
/* ------------------------------------------------------------------------ */

/* The f32 kernel the active level's heuristic uses. */
static const gemm_kernel *tile_kernel(void) {
  cpu_isa level = cpu_isa_active();
#if CPU_HAVE_X86_KERNELS
  if (cpu_isa_includes(level, CPU_ISA_AVX512))
    return &cpu_gemm_avx512_kernels[0];
  if (cpu_isa_includes(level, CPU_ISA_AVX2))
    return &cpu_gemm_avx2_kernels[0];
#else
  (void)level;
#endif
  return &generic_kernels[0];
}

void cpu_tile_gemm_f32(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                       int64_t b_row_stride, int64_t b_col_stride, float *c, int64_t ldc,
                       int accumulate) {
  if (m <= 0 || n <= 0)
    return;
  const gemm_kernel *kernel = tile_kernel();
  const int mr = kernel->mr, nr = kernel->nr;
  /* K in slices of at most this many, so the scratch stays small. */
  const int64_t kc_max = 512;
  const int64_t kc_all = min64(k > 0 ? k : 1, kc_max);
  size_t a_bytes = line_bytes(round_up(m, mr) * kc_all * 4);
  size_t b_bytes = line_bytes(round_up(n, nr) * kc_all * 4);
  if (kept.tile_bytes < a_bytes + b_bytes) {
    free(kept.tile);
    kept.tile = aligned_alloc(64, a_bytes + b_bytes);
    kept.tile_bytes = kept.tile ? a_bytes + b_bytes : 0;
  }
  float *a_pack = (float *)kept.tile;
  float *b_pack = (float *)(kept.tile + a_bytes);
  if (!a_pack) { /* no scratch: plain loops, still correct */
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        float sum = accumulate ? c[i * ldc + j] : 0.0f;
        for (int64_t p = 0; p < k; p++)
          sum += a[i * lda + p] * b[p * b_row_stride + j * b_col_stride];
        c[i * ldc + j] = sum;
      }
    return;
  }
  const bool avx512 = cpu_isa_includes(cpu_isa_active(), CPU_ISA_AVX512);
  gemm_operand a_view = {(char *)a, TSR_DTYPE_F32, lda, 1};
  gemm_operand b_view = {(char *)b, TSR_DTYPE_F32, b_row_stride, b_col_stride};
  int64_t k_slices = k > 0 ? (k + kc_max - 1) / kc_max : 1;
  for (int64_t slice = 0; slice < k_slices; slice++) {
    int64_t k0 = slice * kc_max, kc = min64(kc_max, k - k0);
    if (kc < 0)
      kc = 0;
    for (int64_t s = 0; s * mr < m; s++) {
      int rows = (int)min64(mr, m - s * mr);
#if CPU_HAVE_X86_KERNELS
      if (avx512 && cpu_gemm_pack_a_avx512(&a_view, s * mr, rows, k0, kc, mr, GEMM_FORMAT_F32,
                                           a_pack + s * mr * kc))
        continue;
#endif
      pack_a_f32(&a_view, s * mr, rows, k0, kc, mr, a_pack + s * mr * kc);
    }
    for (int64_t s = 0; s * nr < n; s++) {
      int cols = (int)min64(nr, n - s * nr);
#if CPU_HAVE_X86_KERNELS
      if (avx512 && cpu_gemm_pack_b_avx512(&b_view, k0, kc, s * nr, cols, nr, GEMM_FORMAT_F32,
                                           b_pack + s * nr * kc))
        continue;
#endif
      pack_b_f32(&b_view, k0, kc, s * nr, cols, nr, b_pack + s * nr * kc);
    }
    bool add_prior = accumulate || slice > 0;
    for (int64_t js = 0; js * nr < n; js++) {
      for (int64_t is = 0; is * mr < m; is++) {
        float *tile = c + is * mr * ldc + js * nr;
        gemm_tile_out out = {.rows = (int)min64(mr, m - is * mr),
                             .cols = (int)min64(nr, n - js * nr),
                             .alpha = 1.0f,
                             .prior = add_prior ? tile : NULL,
                             .prior_ld = ldc,
                             .activation = TSR_ACT_NONE,
                             .dst = (char *)tile,
                             .dst_dtype = TSR_DTYPE_F32,
                             .dst_rs = ldc,
                             .dst_cs = 1,
                             .vector_store = true};
        kernel->fn(kc, a_pack + is * mr * kc, b_pack + js * nr * kc, &out);
      }
    }
  }
}
