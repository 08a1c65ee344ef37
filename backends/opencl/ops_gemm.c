/* SPDX-License-Identifier: Apache-2.0 */
/* GEMM and grouped GEMM (kernels/gemm.cl): the build options a problem's
 * signature decides (tile, vector widths of each operand, dtypes), the
 * parameters and the launches; the variant table and heuristic are in
 * configs.c. Two paths:
 * "tile_*" (local-memory tiles, a register block per work item, any shape)
 * and "gemv_*" (M <= 16: B streamed once, split over K into f32 scratch
 * with a reduction kernel after when the columns alone do not fill the
 * device). Grouped GEMM runs the same kernels over a group table. tf32
 * compute runs as strict f32, as on the Vulkan plugin. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/params_gemm.h"
#include "opencl_internal.h"

#include "configs.h"

/* ---- problems ---- */

static opencl_gemm_problem problem_of(tsr_op op, const void *args) {
  opencl_gemm_problem g;
  memset(&g, 0, sizeof g);
  if (op == TSR_OP_GEMM) {
    const tsr_gemm_args *x = args;
    g.a = &x->a;
    g.b = &x->b;
    g.c = x->c.buffer ? &x->c : NULL;
    g.bias = x->bias.buffer ? &x->bias : NULL;
    g.d = &x->d;
    g.m = x->a.shape[1];
    g.n = x->b.shape[2];
    g.k = x->a.shape[2];
    g.batch = x->d.shape[0];
    g.alpha = x->alpha;
    g.beta = g.c ? x->beta : 0.0f;
    g.activation = x->activation;
  } else {
    const tsr_grouped_gemm_args *x = args;
    g.a = &x->a;
    g.b = &x->b;
    g.bias = x->bias.buffer ? &x->bias : NULL;
    g.d = &x->d;
    g.m = x->a.shape[0];
    g.n = x->b.shape[2];
    g.k = x->a.shape[1];
    g.batch = x->group_count;
    g.grouped = true;
    g.group_sizes = x->group_sizes;
    g.alpha = x->alpha;
    g.activation = x->activation;
  }
  g.dtype = g.a->dtype;
  g.out_f32 = g.d->dtype == TSR_DTYPE_F32 && g.dtype != TSR_DTYPE_F32;
  return g;
}

static bool gemm_empty(const opencl_gemm_problem *g) {
  return g->m <= 0 || g->n <= 0 || g->batch <= 0;
}

/* A stride as the kernels use it: 0 where the extent is 1 (never stepped),
 * so that layout tests ignore strides nothing walks. */
static int64_t stride_of(const tsr_plugin_tensor *t, int dim) {
  return t->shape[dim] > 1 ? t->strides[dim] : 0;
}

static int64_t dtype_bytes(int32_t dtype) {
  return dtype == TSR_DTYPE_F32 ? 4 : 2;
}

/* Whether the tensor's first element lies on a multiple of `elements`
 * elements in memory (its byte address, wrapped host memory included). */
static bool first_aligned(const tsr_plugin_tensor *t, int64_t elements) {
  const opencl_buffer *buffer = t->buffer;
  uint64_t unit = (uint64_t)(elements * dtype_bytes(t->dtype));
  uint64_t address = t->offset + (buffer && buffer->host ? (uint64_t)(uintptr_t)buffer->host : 0);
  return address % unit == 0;
}

/* ---- layouts: the kernel builds a signature asks for ---- */

typedef struct gemm_layout {
  int a_kfast, a_vec, b_nfast, b_vec, epi_vec; /* tile */
  int gv_nfast, gv_vec, gv_avec, gv_columns;   /* gemv */
} gemm_layout;

/* The widest vector (of `widths`, largest first) for which `ok` holds. */
static int widest(const int *widths, int count, bool (*ok)(const opencl_gemm_problem *, int, int),
                  const opencl_gemm_problem *g, int extra) {
  for (int i = 0; i < count; i++)
    if (ok(g, widths[i], extra))
      return widths[i];
  return 1;
}

/* A along k (extra: BK): unit k stride, K, the row and batch strides and the
 * start multiples of v. */
static bool a_vec_k(const opencl_gemm_problem *g, int v, int bk) {
  const tsr_plugin_tensor *a = g->a;
  int mi = g->grouped ? 0 : 1;
  int64_t sb = g->grouped ? 0 : stride_of(a, 0);
  return bk % v == 0 && stride_of(a, mi + 1) == 1 && g->k % v == 0 && stride_of(a, mi) % v == 0 &&
         sb % v == 0 && first_aligned(a, v);
}

/* A along m (extra: BM): not grouped (a group may start anywhere). */
static bool a_vec_m(const opencl_gemm_problem *g, int v, int bm) {
  const tsr_plugin_tensor *a = g->a;
  return !g->grouped && bm % v == 0 && stride_of(a, 1) == 1 && g->m % v == 0 &&
         stride_of(a, 2) % v == 0 && stride_of(a, 0) % v == 0 && first_aligned(a, v);
}

static bool b_vec_n(const opencl_gemm_problem *g, int v, int bn) {
  const tsr_plugin_tensor *b = g->b;
  return bn % v == 0 && stride_of(b, 2) == 1 && g->n % v == 0 && stride_of(b, 1) % v == 0 &&
         stride_of(b, 0) % v == 0 && first_aligned(b, v);
}

static bool b_vec_k(const opencl_gemm_problem *g, int v, int bk) {
  const tsr_plugin_tensor *b = g->b;
  return bk % v == 0 && stride_of(b, 1) == 1 && g->k % v == 0 && stride_of(b, 2) % v == 0 &&
         stride_of(b, 0) % v == 0 && first_aligned(b, v);
}

/* D (and C, bias) four columns at a time. */
static bool out_vec4(const tsr_plugin_tensor *t, bool grouped, int64_t n) {
  if (!t)
    return true;
  int r = t->rank;
  if (n % 4 || stride_of(t, r - 1) != 1 || !first_aligned(t, 4))
    return false;
  for (int i = 0; i < r - 1; i++)
    if (stride_of(t, i) % 4)
      return false;
  (void)grouped;
  return true;
}

static gemm_layout layout_of(const opencl_gemm_problem *g, const opencl_gemm_row *row) {
  static const int wide16[] = {8, 4, 2}, wide32[] = {4, 2};
  const int *widths = g->dtype == TSR_DTYPE_F32 ? wide32 : wide16;
  int count = g->dtype == TSR_DTYPE_F32 ? 2 : 3;
  gemm_layout l;
  memset(&l, 0, sizeof l);
  int mi = g->grouped ? 0 : 1; /* A's m dimension */
  int64_t a_sm = stride_of(g->a, mi), a_sk = stride_of(g->a, mi + 1);
  int64_t b_sk = stride_of(g->b, 1), b_sn = stride_of(g->b, 2);
  if (row->kind == OPENCL_GEMM_TILE) {
    /* the contiguous dimension, else the smaller stride */
    l.a_kfast = a_sk == 1 ? 1 : a_sm == 1 ? 0 : a_sk <= a_sm;
    l.a_vec = l.a_kfast ? widest(widths, count, a_vec_k, g, (int)row->bk)
                        : widest(widths, count, a_vec_m, g, (int)row->bm);
    l.b_nfast = b_sn == 1 ? 1 : b_sk == 1 ? 0 : b_sn <= b_sk;
    l.b_vec = l.b_nfast ? widest(widths, count, b_vec_n, g, (int)row->bn)
                        : widest(widths, count, b_vec_k, g, (int)row->bk);
    l.epi_vec = out_vec4(g->d, g->grouped, g->n) && out_vec4(g->c, g->grouped, g->n) &&
                out_vec4(g->bias, g->grouped, g->n);
    return l;
  }
  /* gemv: n-fast vectors stay at 4 (each is a column's sums for every row) */
  static const int wide_n[] = {4, 2};
  l.gv_nfast = b_sn == 1 ? 1 : b_sk == 1 ? 0 : b_sn <= b_sk;
  if (l.gv_nfast) {
    l.gv_vec = widest(wide_n, 2, b_vec_n, g, 4);
    l.gv_avec = 1;
    l.gv_columns = l.gv_vec;
  } else {
    l.gv_vec = widest(widths, count, b_vec_k, g, 8);
    l.gv_avec = a_vec_k(g, l.gv_vec, 8) ? l.gv_vec : 1;
    /* several columns per work item once there are rows to share A over */
    l.gv_columns = g->m >= 4 ? 4 : g->m >= 2 ? 2 : 1;
  }
  return l;
}

/* ---- listing ---- */

static bool problem_ok(const opencl_device_props *props, const opencl_gemm_problem *g, char *why,
                       size_t capacity) {
  (void)props;
  if (g->dtype != TSR_DTYPE_F32 && g->dtype != TSR_DTYPE_F16 && g->dtype != TSR_DTYPE_BF16) {
    snprintf(why, capacity, "a's dtype %s is not f32, f16 or bf16",
             tsr_plugin_dtype_name(g->dtype));
    return false;
  }
  if (g->d->dtype != g->dtype && g->d->dtype != TSR_DTYPE_F32) {
    snprintf(why, capacity, "d's dtype must be a's or f32");
    return false;
  }
  /* the kernels index rows, columns and k in int, a tile past the end */
  const int64_t most = INT32_MAX - 1024;
  if (g->m > most || g->n > most || g->k > most || g->batch > most) {
    snprintf(why, capacity, "extents beyond 2^31 - 1025 (M %lld, N %lld, K %lld, batch %lld)",
             (long long)g->m, (long long)g->n, (long long)g->k, (long long)g->batch);
    return false;
  }
  return true;
}

static tsr_status gemm_list(const opencl_device *device, tsr_op op, const void *args,
                            tsr_plugin_variant_list *out, char *why, size_t why_capacity) {
  const opencl_device_props *props = device->props;
  opencl_gemm_problem g = problem_of(op, args);
  if (!problem_ok(props, &g, why, why_capacity))
    return TSR_ERROR_UNSUPPORTED;
  return opencl_gemm_variants(props, &g, out, why, why_capacity);
}

/* ---- preparing ---- */

/* GEMV geometry: columns per work-group, K splits and the K chunk. The
 * splits are chosen from the signature so the device gets about
 * `groups_per_unit` * 2 work-groups per compute unit, each split keeping at
 * least 32 k steps per work item. */
typedef struct gemv_geometry {
  uint32_t k_threads, columns, splits, k_chunk;
  uint64_t groups;
} gemv_geometry;

static gemv_geometry gemv_geometry_of(const opencl_device_props *props,
                                      const opencl_gemm_problem *g, const opencl_gemm_row *row,
                                      const gemm_layout *l) {
  gemv_geometry q;
  q.k_threads = l->gv_nfast ? row->k_threads_n : row->k_threads_k;
  uint32_t vk = l->gv_nfast ? 1 : (uint32_t)l->gv_vec;
  q.columns = row->threads / q.k_threads * (uint32_t)l->gv_columns;
  uint64_t blocks = opencl_ceil_div((uint64_t)g->n, q.columns) * (uint64_t)g->batch;
  q.splits = 1;
  if (!g->grouped) {
    uint64_t want = 2ull * opencl_gemm_groups_per_unit(props) *
                    (props->compute_units ? props->compute_units : 16);
    uint64_t step = (uint64_t)q.k_threads * vk; /* k elements per work-group step */
    uint64_t most = (uint64_t)g->k / (32 * step);
    while (blocks * q.splits < want && q.splits * 2 <= most && q.splits < 64)
      q.splits *= 2;
  }
  /* chunks of whole vectors, so a split never cuts one */
  q.k_chunk = (uint32_t)(opencl_ceil_div(opencl_ceil_div((uint64_t)g->k, q.splits), vk) * vk);
  q.splits = (uint32_t)opencl_ceil_div((uint64_t)g->k, q.k_chunk);
  q.groups = blocks * q.splits;
  return q;
}

static void build_options(const opencl_gemm_problem *g, const opencl_gemm_row *row,
                          const gemm_layout *l, char *options, size_t capacity) {
  int n = snprintf(options, capacity, "-DTSR_DTYPE=%d -DTSR_OUT_F32=%d -DTSR_GROUPED=%d ",
                   (int)g->dtype, g->out_f32 ? 1 : 0, g->grouped ? 1 : 0);
  if (n < 0 || (size_t)n >= capacity)
    return;
  if (row->kind == OPENCL_GEMM_TILE)
    snprintf(options + n, capacity - (size_t)n,
             "-DTSR_GEMM_TILE -DTSR_EPI_VEC=%d -DTSR_BM=%u -DTSR_BN=%u -DTSR_BK=%u -DTSR_TM=%u "
             "-DTSR_TN=%u -DTSR_DB=%d -DTSR_A_KFAST=%d -DTSR_A_VEC=%d -DTSR_B_NFAST=%d "
             "-DTSR_B_VEC=%d",
             l->epi_vec, row->bm, row->bn, row->bk, row->tm, row->tn, row->double_buffer ? 1 : 0,
             l->a_kfast, l->a_vec, l->b_nfast, l->b_vec);
  else
    snprintf(options + n, capacity - (size_t)n,
             "-DTSR_GEMM_GEMV -DTSR_GV_THREADS=%u -DTSR_GV_KT=%u -DTSR_GV_NFAST=%d "
             "-DTSR_GV_VEC=%d -DTSR_GV_AVEC=%d -DTSR_GV_CN=%d -DTSR_GV_ROWS=%lld",
             row->threads, l->gv_nfast ? row->k_threads_n : row->k_threads_k, l->gv_nfast,
             l->gv_vec, l->gv_avec, l->gv_columns, (long long)g->m);
}

static tsr_status gemm_prepare(opencl_device *device, tsr_op op, const void *args, const char *name,
                               const opencl_config **out) {
  const tsr_plugin_host *host = &device->plugin->host;
  const char *op_name = tsr_plugin_op_name(op);
  opencl_gemm_problem g = problem_of(op, args);
  const opencl_gemm_row *row = opencl_gemm_row_find(name);
  if (!row)
    return tsr_plugin_fail(host, TSR_ERROR_NOT_FOUND, "%s: no variant named %s", op_name, name);
  char why[TSR_PLUGIN_MESSAGE_CAPACITY];
  if (!problem_ok(device->props, &g, why, sizeof why))
    return tsr_plugin_fail(host, TSR_ERROR_UNSUPPORTED, "%s: %s", op_name, why);
  if (!opencl_gemm_row_takes(device->props, &g, row))
    return tsr_plugin_fail(host, TSR_ERROR_NOT_FOUND, "%s: variant %s cannot run this problem%s",
                           op_name, name,
                           row->kind == OPENCL_GEMM_GEMV ? " (GEMV takes M <= 16)" : "");
  const opencl_kernel *kernel = NULL, *kernel2 = NULL;
  if (!gemm_empty(&g)) {
    gemm_layout l = layout_of(&g, row);
    char options[512];
    build_options(&g, row, &l, options, sizeof options);
    bool tile = row->kind == OPENCL_GEMM_TILE;
    tsr_status status = opencl_kernel_get(device, "gemm", options,
                                          tile ? "tsr_gemm_tile" : "tsr_gemm_gemv", &kernel);
    if (status != TSR_OK)
      return status;
    if (kernel->max_work_group < opencl_gemm_row_threads(row))
      return tsr_plugin_fail(host, TSR_ERROR_UNSUPPORTED,
                             "%s: variant %s needs %u work items but its kernel takes %zu on %s",
                             op_name, name, opencl_gemm_row_threads(row), kernel->max_work_group,
                             device->props->name);
    if (!tile && gemv_geometry_of(device->props, &g, row, &l).splits > 1) {
      status = opencl_kernel_get(device, "gemm", options, "tsr_gemm_splitk_reduce", &kernel2);
      if (status != TSR_OK)
        return status;
    }
  }
  return opencl_config_get(device, op, row->name, row, kernel, kernel2, 0, out);
}

/* ---- running ---- */

static void params_of(const opencl_gemm_problem *g, tsr_cl_gemm_params *p) {
  memset(p, 0, sizeof *p);
  const tsr_plugin_tensor *a = g->a, *b = g->b, *c = g->c, *bias = g->bias, *d = g->d;
  p->a_first = opencl_tensor_first(a);
  p->b_first = opencl_tensor_first(b);
  p->d_first = opencl_tensor_first(d);
  if (g->grouped) {
    /* a [T, K], b [G, K, N], bias [G, N], d [T, N] */
    p->a_sm = stride_of(a, 0);
    p->a_sk = stride_of(a, 1);
    p->d_sm = stride_of(d, 0);
    p->d_sn = stride_of(d, 1);
    if (bias) {
      p->bias_first = opencl_tensor_first(bias);
      p->bias_sb = stride_of(bias, 0);
      p->bias_sn = stride_of(bias, 1);
    }
  } else {
    p->a_sb = stride_of(a, 0);
    p->a_sm = stride_of(a, 1);
    p->a_sk = stride_of(a, 2);
    p->d_sb = stride_of(d, 0);
    p->d_sm = stride_of(d, 1);
    p->d_sn = stride_of(d, 2);
    if (c) {
      p->c_first = opencl_tensor_first(c);
      p->c_sb = stride_of(c, 0);
      p->c_sm = stride_of(c, 1);
      p->c_sn = stride_of(c, 2);
    }
    if (bias) {
      p->bias_first = opencl_tensor_first(bias);
      p->bias_sn = stride_of(bias, 0);
    }
  }
  p->b_sb = stride_of(b, 0);
  p->b_sk = stride_of(b, 1);
  p->b_sn = stride_of(b, 2);
  p->m = (tsr_cl_i32)g->m;
  p->n = (tsr_cl_i32)g->n;
  p->k = (tsr_cl_i32)g->k;
  p->batch = (tsr_cl_i32)g->batch;
  /* BLAS convention: beta == 0 leaves C unread (NaN in C stays out) */
  p->flags = (c && g->beta != 0.0f ? TSR_CL_GEMM_HAS_C : 0) | (bias ? TSR_CL_GEMM_HAS_BIAS : 0) |
             (g->activation << TSR_CL_GEMM_ACTIVATION_SHIFT);
  p->alpha = g->alpha;
  p->beta = g->beta;
  p->splits = 1;
  p->swizzle = 1;
}

/* The group table (opencl_queue_upload): prefix sums of M tiles of `bm`
 * rows, then of rows; with `rows_only` the row sums alone (GEMV). The total
 * of M tiles goes to *tiles. */
static tsr_status group_table(opencl_queue *queue, const opencl_gemm_problem *g, uint32_t bm,
                              bool rows_only, cl_mem *out, uint64_t *tiles) {
  uint64_t count = (uint64_t)g->batch;
  uint64_t words = rows_only ? count + 1 : 2 * count + 2;
  uint32_t *table = malloc(words * sizeof *table);
  if (!table)
    return tsr_plugin_fail(&queue->device->plugin->host, TSR_ERROR_OUT_OF_MEMORY,
                           "grouped_gemm: out of host memory for a group table");
  uint32_t *row_sums = rows_only ? table : table + count + 1;
  uint64_t tile_sum = 0;
  row_sums[0] = 0;
  if (!rows_only)
    table[0] = 0;
  for (uint64_t i = 0; i < count; i++) {
    row_sums[i + 1] = row_sums[i] + (uint32_t)g->group_sizes[i];
    if (!rows_only) {
      tile_sum += opencl_ceil_div((uint64_t)g->group_sizes[i], bm);
      table[i + 1] = (uint32_t)tile_sum;
    }
  }
  *tiles = tile_sum;
  tsr_status status = opencl_queue_upload(queue, table, words * sizeof *table, out);
  free(table);
  return status;
}

static tsr_status gemm_run(opencl_queue *queue, tsr_op op, const void *args,
                           const opencl_config *config) {
  opencl_gemm_problem g = problem_of(op, args);
  if (gemm_empty(&g) || !config->kernel)
    return TSR_OK;
  const opencl_gemm_row *row = config->row;
  const opencl_device_props *props = queue->device->props;
  tsr_cl_gemm_params p;
  params_of(&g, &p);
  cl_mem a = opencl_tensor_mem(g.a), b = opencl_tensor_mem(g.b), d = opencl_tensor_mem(g.d);
  cl_mem c = g.c ? opencl_tensor_mem(g.c) : d, bias = g.bias ? opencl_tensor_mem(g.bias) : d;
  cl_mem aux = d, table = NULL;
  size_t global[3] = {0, 1, 1}, local[3] = {opencl_gemm_row_threads(row), 1, 1};
  tsr_status status = TSR_OK;

  if (row->kind == OPENCL_GEMM_TILE) {
    uint64_t tiles_n = opencl_ceil_div((uint64_t)g.n, row->bn), tiles_m;
    if (g.grouped) {
      status = group_table(queue, &g, row->bm, false, &table, &tiles_m);
      if (status != TSR_OK)
        return status;
      aux = table;
    } else {
      tiles_m = opencl_ceil_div((uint64_t)g.m, row->bm);
    }
    p.tiles_m = (tsr_cl_i32)tiles_m;
    p.tiles_n = (tsr_cl_i32)tiles_n;
    /* bands of 8 M tiles walk N together: their A panels and the B panels
     * of the band's columns stay in the cache */
    p.swizzle = tiles_m < 8 ? (tsr_cl_i32)(tiles_m ? tiles_m : 1) : 8;
    global[0] = (size_t)(tiles_m * tiles_n * (g.grouped ? 1 : (uint64_t)g.batch)) * local[0];
  } else {
    gemm_layout l = layout_of(&g, row);
    gemv_geometry q = gemv_geometry_of(props, &g, row, &l);
    p.splits = (tsr_cl_i32)q.splits;
    p.k_chunk = (tsr_cl_i32)q.k_chunk;
    if (g.grouped) {
      uint64_t unused;
      status = group_table(queue, &g, 1, true, &table, &unused);
      if (status != TSR_OK)
        return status;
      aux = table;
    } else if (q.splits > 1) {
      p.split_stride = (tsr_cl_i64)((uint64_t)g.batch * (uint64_t)g.m * (uint64_t)g.n);
      status = opencl_queue_scratch(queue, (uint64_t)q.splits * (uint64_t)p.split_stride * 4, &aux);
      if (status != TSR_OK)
        return status;
    }
    global[0] = (size_t)q.groups * local[0];
  }

  opencl_arg list[7] = {OPENCL_ARG(a), OPENCL_ARG(b),   OPENCL_ARG(c), OPENCL_ARG(bias),
                        OPENCL_ARG(d), OPENCL_ARG(aux), OPENCL_ARG(p)};
  status = opencl_launch(queue, config->kernel, list, 7, 1, global, local);
  if (table)
    queue->device->plugin->cl.clReleaseMemObject(table);
  if (status != TSR_OK || p.splits <= 1)
    return status;
  if (!config->kernel2)
    return tsr_plugin_fail(&queue->device->plugin->host, TSR_ERROR_BACKEND,
                           "%s: split-K run without its reduction kernel", tsr_plugin_op_name(op));
  size_t reduce_local =
      config->kernel2->max_work_group < 256 ? config->kernel2->max_work_group : 256;
  size_t reduce_global[3] = {0, 1, 1}, reduce_locals[3] = {reduce_local, 1, 1};
  reduce_global[0] = (size_t)opencl_ceil_div((uint64_t)p.split_stride, reduce_local) * reduce_local;
  opencl_arg list2[5] = {OPENCL_ARG(aux), OPENCL_ARG(c), OPENCL_ARG(bias), OPENCL_ARG(d),
                         OPENCL_ARG(p)};
  return opencl_launch(queue, config->kernel2, list2, 5, 1, reduce_global, reduce_locals);
}

const opencl_op_family opencl_gemm_family = {gemm_list, gemm_prepare, gemm_run};
