/* SPDX-License-Identifier: Apache-2.0 */
/* The skinny GEMM path (M up to ~16: decode): B, the weights, is read once,
 * unpacked, by all threads, and A's few rows stay in L1.
 *
 *   B with unit column stride ([K, N] row-major): the threads split K; each
 *     walks its rows of B four at a time (four sequential streams, which
 *     keeps more memory requests in flight than one) and adds
 *     a[i][k] * B[k][j] into its own f32 partial rows (M x N, in L1/L2).
 *   B with unit row stride ([N, K] row-major, B = W^T): the threads split
 *     N; each walks four columns of B at a time (four streams), with dot
 *     products along k in vector lanes.
 *   Other strides: rows of B gathered into f32 lines, then as the first case.
 *
 * A second pass over the columns (parallel) sums the partial rows and runs
 * the epilogue (alpha, beta * C, bias, activation, D's dtype). f16 and bf16
 * B are converted to f32 in registers as they are loaded. */
#include "gemv.h"

/* ------------------------------------------------------------------------ */
/* Portable kernels                                                          */
/* ------------------------------------------------------------------------ */

/* P[i][j] += sum over k in [k0, k1) of a[i][k] * line_k[j], one B row at a
 * time converted into `line` (any strides, any dtype). */
static void strided_rows_generic(const gemv_job *job, int64_t k0, int64_t k1, int64_t n0,
                                 int64_t n1, float *P, float *line) {
  const gemm_problem *p = job->p;
  const int64_t m = p->m;
  for (int64_t k = k0; k < k1; k++) {
    const char *row = gemm_at(&p->b, k, n0);
    for (int64_t j = 0; j < n1 - n0; j++)
      line[j] = tsr_load_as_f32(row, p->b.dtype, j * p->b.cs);
    for (int64_t i = 0; i < m; i++) {
      float a_ik = job->a[i * job->lda + k];
      float *out = P + i * job->ldp + n0;
      for (int64_t j = 0; j < n1 - n0; j++)
        out[j] += a_ik * line[j];
    }
  }
}

/* P[i][j] = sum over k in [k0, k1) of a[i][k] * B[k][j] for B with unit row
 * stride, one column at a time. */
static void columns_generic(const gemv_job *job, int64_t k0, int64_t k1, int64_t n0, int64_t n1,
                            float *P) {
  const gemm_problem *p = job->p;
  for (int64_t j = n0; j < n1; j++) {
    const char *column = gemm_at(&p->b, k0, j);
    for (int64_t i = 0; i < p->m; i++) {
      const float *a = job->a + i * job->lda;
      float sum = 0.0f;
      for (int64_t k = 0; k < k1 - k0; k++)
        sum += a[k0 + k] * tsr_load_as_f32(column, p->b.dtype, k);
      P[i * job->ldp + j] = sum;
    }
  }
}

/* ------------------------------------------------------------------------ */
/* Driver                                                                    */
/* ------------------------------------------------------------------------ */

/* Share t: with K split, part t of K over every column into its own partial
 * rows; with N split, a range of columns (whole K) into partials[0]. */
static void gemv_share(void *context, int64_t t, int64_t shares, int worker) {
  const gemv_job *job = context;
  const gemm_problem *p = job->p;
  (void)worker;
  int64_t k0 = 0, k1 = p->k, n0 = 0, n1 = p->n;
  float *P = job->partials;
  if (job->parts > 1) {
    /* Multiples of 4 rows, so that each part runs the 4-row loop. */
    int64_t quads = (p->k + 3) / 4;
    k0 = min64(p->k, quads * t / shares * 4);
    k1 = min64(p->k, quads * (t + 1) / shares * 4);
    P += t * job->part_stride;
  } else {
    int64_t align = job->layout == GEMV_B_COLUMNS ? 4 : 64;
    int64_t units = (p->n + align - 1) / align;
    n0 = min64(p->n, units * t / shares * align);
    n1 = min64(p->n, units * (t + 1) / shares * align);
  }
  if (n0 >= n1)
    return;
  /* The row kernels add into P, including the padding columns up to ldp
   * that the last vector store covers. */
  const int64_t zero_end = n1 == p->n ? job->ldp : n1;
  if (job->layout != GEMV_B_COLUMNS || k0 >= k1)
    for (int64_t i = 0; i < p->m; i++)
      memset(P + i * job->ldp + n0, 0, (size_t)(zero_end - n0) * sizeof *P);
  if (k0 >= k1)
    return;
#if CPU_HAVE_X86_KERNELS
  if (job->isa == CPU_ISA_AVX512 && job->layout == GEMV_B_ROWS) {
    cpu_gemv_rows_avx512(job, k0, k1, n0, n1, P);
    return;
  }
  if (job->isa == CPU_ISA_AVX512 && job->layout == GEMV_B_COLUMNS) {
    cpu_gemv_columns_avx512(job, k0, k1, n0, n1, P);
    return;
  }
  if (job->isa == CPU_ISA_AVX2 && job->layout == GEMV_B_ROWS) {
    cpu_gemv_rows_avx2(job, k0, k1, n0, n1, P);
    return;
  }
  if (job->isa == CPU_ISA_AVX2 && job->layout == GEMV_B_COLUMNS) {
    cpu_gemv_columns_avx2(job, k0, k1, n0, n1, P);
    return;
  }
#endif
  if (job->layout == GEMV_B_COLUMNS) {
    columns_generic(job, k0, k1, n0, n1, P);
    return;
  }
  float *line = malloc((size_t)(n1 - n0) * sizeof *line);
  if (line) {
    strided_rows_generic(job, k0, k1, n0, n1, P, line);
    free(line);
    return;
  }
  /* No memory for a line: one element at a time. */
  for (int64_t k = k0; k < k1; k++)
    for (int64_t i = 0; i < p->m; i++)
      for (int64_t j = n0; j < n1; j++)
        P[i * job->ldp + j] +=
            job->a[i * job->lda + k] * tsr_load_as_f32(gemm_at(&p->b, k, j), p->b.dtype, 0);
}

/* Puts columns stored as 32-column groups of [16 even][16 odd] (the bf16
 * layout of rows_avx512) back in order. GEMV_SUM_COLUMNS is a multiple of 32,
 * so a chunk starts at a group. */
static void gemv_unpair(float *sum, int cols) {
  float group[32];
  for (int g = 0; g < cols; g += 32) { /* sum holds whole groups */
    memcpy(group, sum + g, sizeof group);
    for (int r = 0; r < 32 && g + r < cols; r++)
      sum[g + r] = group[(r & 1) ? 16 + r / 2 : r / 2];
  }
}

/* Columns [begin, end) x GEMV_SUM_COLUMNS: sums the parts, then the
 * epilogue into D. */
static void gemv_finish(void *context, int64_t begin, int64_t end, int worker) {
  const gemv_job *job = context;
  const gemm_problem *p = job->p;
  (void)worker;
  float sums[16 * GEMV_SUM_COLUMNS];
  for (int64_t chunk = begin; chunk < end; chunk++) {
    int64_t j0 = chunk * GEMV_SUM_COLUMNS;
    int cols = (int)min64(GEMV_SUM_COLUMNS, p->n - j0);
    /* Paired columns: the last group's odd half sits past `cols`. */
    int stored = job->pairs ? (int)min64(GEMV_SUM_COLUMNS, job->ldp - j0) : cols;
    for (int64_t i0 = 0; i0 < p->m; i0 += 16) {
      int rows = (int)min64(16, p->m - i0);
      for (int i = 0; i < rows; i++) {
        float *sum = sums + i * GEMV_SUM_COLUMNS;
        const float *row = job->partials + (i0 + i) * job->ldp + j0;
        memcpy(sum, row, (size_t)stored * sizeof *sum);
        for (int part = 1; part < job->parts; part++) {
          const float *add = row + part * job->part_stride;
          for (int j = 0; j < stored; j++)
            sum[j] += add[j];
        }
        if (job->pairs)
          gemv_unpair(sum, cols);
      }
      gemm_tile_out out = {.rows = rows,
                           .cols = cols,
                           .alpha = job->alpha,
                           .activation = job->activation,
                           .bias = p->bias ? p->bias + j0 : NULL,
                           .dst = gemm_at(&p->d, i0, j0),
                           .dst_dtype = p->d.dtype,
                           .dst_rs = p->d.rs,
                           .dst_cs = p->d.cs};
      if (p->c.base) {
        out.c = gemm_at(&p->c, i0, j0);
        out.c_dtype = p->c.dtype;
        out.c_rs = p->c.rs;
        out.c_cs = p->c.cs;
        out.beta = job->beta;
      }
      out.vector_store = out.dst_cs == 1 && (!out.c || out.c_cs == 1) &&
                         (out.activation == TSR_ACT_NONE || out.activation == TSR_ACT_RELU);
#if CPU_HAVE_X86_KERNELS
      if (job->isa == CPU_ISA_AVX512) {
        cpu_gemm_store_block_avx512(&out, sums, GEMV_SUM_COLUMNS);
        continue;
      }
#endif
      gemm_store_block(&out, sums, GEMV_SUM_COLUMNS);
    }
  }
}

static tsr_status gemv_fail(const cpu_exec *exec, const char *message) {
  if (exec->error && exec->error_capacity > 0)
    snprintf(exec->error, exec->error_capacity, "%s", message);
  return TSR_ERROR_OUT_OF_MEMORY;
}

/* Allocates the partial sums (returns the block to free; sets partials,
 * ldp and part_stride). Rows are padded to 64 columns for the full-vector
 * stores of the row kernels (64 columns a step). Each part starts at a page offset 2 KiB away
 * from B's: a load of B and a store to P whose addresses agree in their low
 * 12 bits can be taken for dependent (4K aliasing) and stall the stream. */
static void *gemv_partials(gemv_job *job, int parts) {
  const gemm_problem *p = job->p;
  job->ldp = (p->n + 63) / 64 * 64;
  const int64_t page_floats = GEMV_PAGE_BYTES / (int64_t)sizeof(float);
  job->part_stride = (p->m * job->ldp + page_floats - 1) / page_floats * page_floats;
  size_t bytes = (size_t)(parts * job->part_stride + page_floats) * sizeof(float);
  char *block = aligned_alloc(GEMV_PAGE_BYTES, bytes);
  if (!block)
    return NULL;
  uintptr_t b_offset = (uintptr_t)p->b.base % GEMV_PAGE_BYTES;
  uintptr_t shift = (b_offset + GEMV_PAGE_BYTES / 2) % GEMV_PAGE_BYTES / 64 * 64;
  job->partials = (float *)(block + shift);
  return block;
}

static tsr_status gemv_one(const cpu_exec *exec, int isa, const gemm_problem *p, float alpha,
                           float beta, int32_t activation) {
  const int threads = cpu_pool_threads(exec->pool);
  gemv_job job = {.p = p, .isa = isa, .alpha = alpha, .beta = beta, .activation = activation};
  job.layout = p->b.cs == 1 ? GEMV_B_ROWS : p->b.rs == 1 ? GEMV_B_COLUMNS : GEMV_B_STRIDED;

  /* A as f32 rows with unit stride along k: used in place when it is. */
  float *a_copy = NULL;
  if (p->a.dtype == TSR_DTYPE_F32 && p->a.cs == 1) {
    job.a = (const float *)p->a.base;
    job.lda = p->a.rs;
  } else {
    a_copy = malloc((size_t)(p->m * (p->k > 0 ? p->k : 1)) * sizeof *a_copy);
    if (!a_copy)
      return gemv_fail(exec, "cpu gemv: cannot allocate the f32 copy of A");
    for (int64_t i = 0; i < p->m; i++)
      for (int64_t k = 0; k < p->k; k++)
        a_copy[i * p->k + k] = tsr_load_as_f32(gemm_at(&p->a, i, k), p->a.dtype, 0);
    job.a = a_copy;
    job.lda = p->k;
  }

  /* Split K where the columns are few (or for row-major B, where splitting
   * K keeps every thread on whole rows: sequential streams); else split N. */
  int parts = (int)min64(threads, p->k / GEMV_MIN_K_PER_PART);
  if (parts < 1)
    parts = 1;
  if (job.layout == GEMV_B_COLUMNS && p->n >= 16 * (int64_t)threads)
    parts = 1;
  /* the split cost model: no share smaller than its chunk of work */
  int64_t by_work = (int64_t)((double)p->k * (double)p->n * GEMV_NS_PER_WEIGHT / CPU_CHUNK_MIN_NS);
  if (parts > by_work)
    parts = by_work > 1 ? (int)by_work : 1;
  job.parts = parts;
  job.shares = parts > 1 ? parts : (int)min64(min64(threads, (p->n + 15) / 16), by_work);
  if (job.shares < 1)
    job.shares = 1;
  job.pairs = isa == CPU_ISA_AVX512 && job.layout == GEMV_B_ROWS && p->b.dtype == TSR_DTYPE_BF16;
  void *partials_block = gemv_partials(&job, parts);
  if (!partials_block) {
    free(a_copy);
    return gemv_fail(exec, "cpu gemv: cannot allocate the partial sums");
  }
  cpu_pool_run_threads(exec->pool, job.shares, gemv_share, &job);
  int64_t chunks = (p->n + GEMV_SUM_COLUMNS - 1) / GEMV_SUM_COLUMNS;
  cpu_pool_parallel_for(exec->pool, chunks,
                        cpu_grain(GEMV_NS_PER_WEIGHT * GEMV_SUM_COLUMNS * (double)parts),
                        gemv_finish, &job);
  free(partials_block);
  free(a_copy);
  return TSR_OK;
}

tsr_status cpu_gemv_run(const cpu_exec *exec, int isa, const gemm_problem *problems, int64_t count,
                        float alpha, float beta, int32_t activation) {
  for (int64_t i = 0; i < count; i++) {
    tsr_status status = gemv_one(exec, isa, &problems[i], alpha, beta, activation);
    if (status != TSR_OK)
      return status;
  }
  return TSR_OK;
}
