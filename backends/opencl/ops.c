/* SPDX-License-Identifier: Apache-2.0 */
/* The fused ops (rmsnorm, layernorm, softmax, cross_entropy: kernels/rows.cl;
 * swiglu, gelu, rope: kernels/elementwise.cl): the build options a
 * problem's signature decides (dtype, work items per group, units kept per
 * work item, vector width, contiguity), the parameters
 * (kernels/params_rows.h) and the launches; the variant tables and
 * heuristic are in configs.c. Mirrors the Vulkan plugin's ops.c, with
 * 64-bit element indexing throughout. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/opencl_types.h"

#include "kernels/params_rows.h"
#include "opencl_internal.h"

#include "configs.h"

_Static_assert(sizeof(tsr_cl_row_view) == 40 && sizeof(tsr_cl_elem_view) == 40,
               "views are five 64-bit fields");
_Static_assert(sizeof(tsr_cl_rmsnorm_params) == 216 && sizeof(tsr_cl_layernorm_params) == 152 &&
                   sizeof(tsr_cl_softmax_params) == 120 &&
                   sizeof(tsr_cl_cross_entropy_params) == 136 &&
                   sizeof(tsr_cl_swiglu_params) == 152 && sizeof(tsr_cl_gelu_params) == 120 &&
                   sizeof(tsr_cl_rope_params) == 144,
               "fused params have the layout OpenCL C gives them (no host padding)");

/* Row-op groups per launch at most (groups loop over further rows), so the
 * global size stays far below any driver's limit. */
enum { FUSED_MAX_ROW_GROUPS = 1 << 20 };
/* Elementwise groups per compute unit (the grid-stride loop does the rest). */
enum { FUSED_GROUPS_PER_UNIT = 32 };

/* What one launch needs, gathered while checking the problem: the same code
 * answers list (no queue), prepare and run. */
typedef struct fused_launch {
  union {
    tsr_cl_rmsnorm_params rmsnorm;
    tsr_cl_layernorm_params layernorm;
    tsr_cl_softmax_params softmax;
    tsr_cl_cross_entropy_params cross_entropy;
    tsr_cl_swiglu_params swiglu;
    tsr_cl_gelu_params gelu;
    tsr_cl_rope_params rope;
  } params;
  size_t params_bytes;
  cl_mem mems[5]; /* the kernel's buffers, in argument order */
  uint32_t mem_count;
  const char *source, *kernel;
  int32_t dtype;
  int64_t rows, n; /* row ops: rows and row length */
  int64_t count;   /* elementwise: elements (rope: row-pair items) */
  uint32_t vec;    /* the widest unit every tensor allows */
  bool contiguous; /* elementwise: every tensor dense row-major */
} fused_launch;

/* Whether a tensor's first element lies at an address that is a multiple of
 * `bytes` (the buffer's own base for wrapped host memory; allocations are
 * aligned far beyond 16 bytes). */
static bool fused_aligned(const tsr_plugin_tensor *t, uint64_t bytes) {
  const opencl_buffer *b = t->buffer;
  uint64_t address = (b && b->host ? (uint64_t)(uintptr_t)b->host : 0) + t->offset;
  return address % bytes == 0;
}

/* The leading dims of a row tensor folded into (d0, d1, d2). */
static tsr_cl_row_view fused_row_view(const tsr_plugin_tensor *t, int64_t *d1, int64_t *d2) {
  int64_t shape[3] = {1, 1, 1}, stride[3] = {0, 0, 0};
  int lead = t->rank - 1;
  for (int i = 0; i < lead; i++) {
    shape[3 - lead + i] = t->shape[i];
    stride[3 - lead + i] = t->shape[i] > 1 ? t->strides[i] : 0;
  }
  if (d1)
    *d1 = shape[1];
  if (d2)
    *d2 = shape[2];
  int64_t n = t->shape[t->rank - 1];
  return (tsr_cl_row_view){opencl_tensor_first(t), stride[0], stride[1], stride[2],
                           n > 1 ? t->strides[t->rank - 1] : 1};
}

/* Whether a row tensor's rows can be read in aligned units of `vec`. */
static bool fused_row_vec_ok(const tsr_plugin_tensor *t, const tsr_cl_row_view *v, uint32_t vec) {
  uint64_t size = tsr_plugin_dtype_size(t->dtype);
  return v->inner == 1 && fused_aligned(t, vec * size) && v->first % vec == 0 && v->s0 % vec == 0 &&
         v->s1 % vec == 0 && v->s2 % vec == 0;
}

/* Narrows l->vec to what the row tensor allows. */
static void fused_row_tensor(fused_launch *l, const tsr_plugin_tensor *t,
                             const tsr_cl_row_view *v) {
  while (l->vec > 1 && !fused_row_vec_ok(t, v, l->vec))
    l->vec /= 2;
  if (l->vec == 2)
    l->vec = 1;
}

/* A tensor of rank up to 4 with leading extents of 1 added; clears
 * *contiguous unless it is dense row-major. */
static tsr_cl_elem_view fused_elem_view(const tsr_plugin_tensor *t, bool *contiguous) {
  int64_t stride[4] = {0, 0, 0, 0}, dense = 1;
  for (int i = t->rank - 1; i >= 0; i--) {
    int64_t s = t->shape[i] > 1 ? t->strides[i] : 0;
    stride[4 - t->rank + i] = s;
    if (t->shape[i] > 1 && s != dense)
      *contiguous = false;
    dense *= t->shape[i];
  }
  return (tsr_cl_elem_view){opencl_tensor_first(t), stride[0], stride[1], stride[2], stride[3]};
}

static void fused_elem_shape(const tsr_plugin_tensor *t, int64_t *d1, int64_t *d2, int64_t *d3) {
  int64_t shape[4] = {1, 1, 1, 1};
  for (int i = 0; i < t->rank; i++)
    shape[4 - t->rank + i] = t->shape[i];
  *d1 = shape[1];
  *d2 = shape[2];
  *d3 = shape[3];
}

static int64_t fused_element_count(const tsr_plugin_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++)
    n *= t->shape[i];
  return n;
}

/* Narrows l->vec for an elementwise tensor: units need a dense layout and
 * an aligned first element. */
static void fused_elem_tensor(fused_launch *l, const tsr_plugin_tensor *t) {
  uint64_t size = tsr_plugin_dtype_size(t->dtype);
  while (l->vec > 1 && !(fused_aligned(t, l->vec * size) && opencl_tensor_first(t) % l->vec == 0))
    l->vec /= 2;
  if (l->vec == 2)
    l->vec = 1;
}

/* A mem for an optional tensor: its own, or `fallback` (never touched). */
static cl_mem fused_mem_or(const tsr_plugin_tensor *t, cl_mem fallback) {
  return t->buffer ? opencl_tensor_mem(t) : fallback;
}

/* 16-byte units: 4 elements of f32, 8 of f16 / bf16. */
static uint32_t fused_widest(int32_t dtype) {
  return dtype == TSR_DTYPE_F32 ? 4 : 8;
}

/* What rmsnorm, layernorm and softmax planning share: x and y as row views
 * (x's leading dimensions folded into d1, d2), 16-byte units where every
 * view allows them, and the row count and length. */
typedef struct fused_row_shape {
  tsr_cl_row_view *x, *y;
  int64_t *d1, *d2, *rows, *n;
} fused_row_shape;

static void fused_plan_rows(fused_launch *l, const char *kernel, const tsr_plugin_tensor *x,
                            const tsr_plugin_tensor *y, fused_row_shape out) {
  l->source = "rows";
  l->kernel = kernel;
  l->dtype = x->dtype;
  l->vec = fused_widest(l->dtype);
  *out.x = fused_row_view(x, out.d1, out.d2);
  *out.y = fused_row_view(y, NULL, NULL);
  fused_row_tensor(l, x, out.x);
  fused_row_tensor(l, y, out.y);
  l->n = x->shape[x->rank - 1];
  l->rows = tsr_plugin_row_count(x);
  *out.rows = l->rows;
  *out.n = l->n;
}

static void fused_plan_rmsnorm(const tsr_rmsnorm_args *a, fused_launch *l) {
  tsr_cl_rmsnorm_params *q = &l->params.rmsnorm;
  fused_plan_rows(l, "tsr_rmsnorm", &a->x, &a->y,
                  (fused_row_shape){&q->x, &q->y, &q->d1, &q->d2, &q->rows, &q->n});
  q->residual = q->x;
  q->residual_out = q->x;
  cl_mem x = opencl_tensor_mem(&a->x);
  l->mems[0] = x;
  l->mems[1] = fused_mem_or(&a->residual, x);
  l->mems[2] = fused_mem_or(&a->weight, x);
  l->mems[3] = opencl_tensor_mem(&a->y);
  l->mems[4] = fused_mem_or(&a->residual_out, x);
  l->mem_count = 5;
  if (a->residual.buffer) {
    q->residual = fused_row_view(&a->residual, NULL, NULL);
    fused_row_tensor(l, &a->residual, &q->residual);
    q->flags |= TSR_CL_RMSNORM_RESIDUAL;
  }
  if (a->residual_out.buffer) {
    q->residual_out = fused_row_view(&a->residual_out, NULL, NULL);
    fused_row_tensor(l, &a->residual_out, &q->residual_out);
    q->flags |= TSR_CL_RMSNORM_RESIDUAL_OUT;
  }
  if (a->weight.buffer) {
    q->w_first = opencl_tensor_first(&a->weight);
    q->w_stride = a->weight.strides[0];
    q->flags |= TSR_CL_RMSNORM_WEIGHT;
    if (a->weight.dtype == TSR_DTYPE_F32)
      q->flags |= TSR_CL_RMSNORM_WEIGHT_F32;
  }
  q->eps = a->eps;
  l->params_bytes = sizeof *q;
}

static void fused_plan_layernorm(const tsr_layernorm_args *a, fused_launch *l) {
  tsr_cl_layernorm_params *q = &l->params.layernorm;
  fused_plan_rows(l, "tsr_layernorm", &a->x, &a->y,
                  (fused_row_shape){&q->x, &q->y, &q->d1, &q->d2, &q->rows, &q->n});
  cl_mem x = opencl_tensor_mem(&a->x);
  l->mems[0] = x;
  l->mems[1] = fused_mem_or(&a->weight, x);
  l->mems[2] = fused_mem_or(&a->bias, x);
  l->mems[3] = opencl_tensor_mem(&a->y);
  l->mem_count = 4;
  if (a->weight.buffer) {
    q->w_first = opencl_tensor_first(&a->weight);
    q->w_stride = a->weight.strides[0];
    q->flags |= TSR_CL_LAYERNORM_WEIGHT;
    if (a->weight.dtype == TSR_DTYPE_F32)
      q->flags |= TSR_CL_LAYERNORM_WEIGHT_F32;
  }
  if (a->bias.buffer) {
    q->b_first = opencl_tensor_first(&a->bias);
    q->b_stride = a->bias.strides[0];
    q->flags |= TSR_CL_LAYERNORM_BIAS;
    if (a->bias.dtype == TSR_DTYPE_F32)
      q->flags |= TSR_CL_LAYERNORM_BIAS_F32;
  }
  q->eps = a->eps;
  l->params_bytes = sizeof *q;
}

static void fused_plan_softmax(const tsr_softmax_args *a, fused_launch *l) {
  tsr_cl_softmax_params *q = &l->params.softmax;
  fused_plan_rows(l, "tsr_softmax", &a->x, &a->y,
                  (fused_row_shape){&q->x, &q->y, &q->d1, &q->d2, &q->rows, &q->n});
  l->mems[0] = opencl_tensor_mem(&a->x);
  l->mems[1] = opencl_tensor_mem(&a->y);
  l->mem_count = 2;
  q->scale = a->scale;
  l->params_bytes = sizeof *q;
}

/* mems[4], the queue's status word, is filled in at run time. */
static void fused_plan_cross_entropy(const tsr_cross_entropy_args *a, fused_launch *l) {
  tsr_cl_cross_entropy_params *q = &l->params.cross_entropy;
  l->source = "rows";
  l->kernel = "tsr_cross_entropy";
  l->dtype = a->logits.dtype;
  l->vec = fused_widest(l->dtype);
  q->x = fused_row_view(&a->logits, NULL, NULL);
  /* rank 2: the row stride is s2, with d1 = 1 and d2 = rows */
  q->d1 = 1;
  q->d2 = a->logits.shape[0] > 0 ? a->logits.shape[0] : 1;
  fused_row_tensor(l, &a->logits, &q->x);
  l->mems[0] = opencl_tensor_mem(&a->logits);
  l->mems[1] = opencl_tensor_mem(&a->targets);
  l->mems[2] = opencl_tensor_mem(&a->loss);
  l->mems[3] = fused_mem_or(&a->lse, l->mems[2]);
  l->mems[4] = l->mems[2];
  l->mem_count = 5;
  q->t_first = opencl_tensor_first(&a->targets);
  q->t_stride = a->targets.strides[0];
  q->loss_first = opencl_tensor_first(&a->loss);
  q->loss_stride = a->loss.strides[0];
  if (a->lse.buffer) {
    q->lse_first = opencl_tensor_first(&a->lse);
    q->lse_stride = a->lse.strides[0];
    q->flags |= TSR_CL_CROSS_ENTROPY_LSE;
  }
  q->ignore_index = a->ignore_index;
  l->n = a->logits.shape[1];
  l->rows = a->logits.shape[0];
  q->rows = l->rows;
  q->n = l->n;
  l->params_bytes = sizeof *q;
}

static void fused_plan_swiglu(const tsr_swiglu_args *a, fused_launch *l) {
  tsr_cl_swiglu_params *q = &l->params.swiglu;
  l->source = "elementwise";
  l->kernel = "tsr_swiglu";
  l->dtype = a->gate.dtype;
  l->vec = fused_widest(l->dtype);
  l->contiguous = true;
  q->gate = fused_elem_view(&a->gate, &l->contiguous);
  q->up = fused_elem_view(&a->up, &l->contiguous);
  q->y = fused_elem_view(&a->y, &l->contiguous);
  fused_elem_tensor(l, &a->gate);
  fused_elem_tensor(l, &a->up);
  fused_elem_tensor(l, &a->y);
  fused_elem_shape(&a->gate, &q->d1, &q->d2, &q->d3);
  l->mems[0] = opencl_tensor_mem(&a->gate);
  l->mems[1] = opencl_tensor_mem(&a->up);
  l->mems[2] = opencl_tensor_mem(&a->y);
  l->mem_count = 3;
  l->count = q->count = fused_element_count(&a->gate);
  l->params_bytes = sizeof *q;
}

static void fused_plan_gelu(const tsr_gelu_args *a, fused_launch *l) {
  tsr_cl_gelu_params *q = &l->params.gelu;
  l->source = "elementwise";
  l->kernel = "tsr_gelu";
  l->dtype = a->x.dtype;
  l->vec = fused_widest(l->dtype);
  l->contiguous = true;
  q->x = fused_elem_view(&a->x, &l->contiguous);
  q->y = fused_elem_view(&a->y, &l->contiguous);
  fused_elem_tensor(l, &a->x);
  fused_elem_tensor(l, &a->y);
  fused_elem_shape(&a->x, &q->d1, &q->d2, &q->d3);
  q->approximate = a->approximate == TSR_GELU_TANH ? 1 : 0;
  l->mems[0] = opencl_tensor_mem(&a->x);
  l->mems[1] = opencl_tensor_mem(&a->y);
  l->mem_count = 2;
  l->count = q->count = fused_element_count(&a->x);
  l->params_bytes = sizeof *q;
}

/* One work item per (row, pair); strided access, so no units. */
static void fused_plan_rope(const tsr_rope_args *a, fused_launch *l) {
  tsr_cl_rope_params *q = &l->params.rope;
  bool unused = true;
  l->source = "elementwise";
  l->kernel = "tsr_rope";
  l->dtype = a->x.dtype;
  l->vec = 1;
  l->contiguous = false;
  q->x = fused_elem_view(&a->x, &unused);
  q->y = fused_elem_view(&a->y, &unused);
  q->seq = a->x.shape[1];
  q->heads = a->x.shape[2];
  q->pairs = a->x.shape[3] / 2;
  q->rows = a->x.shape[0] * a->x.shape[1] * a->x.shape[2];
  q->half_rotary = a->rotary_dim / 2;
  q->position_offset = a->position_offset;
  q->gptj = a->style == TSR_ROPE_GPTJ;
  q->log2_theta = (float)log2((double)a->theta);
  q->rotary_dim = (float)a->rotary_dim;
  l->mems[0] = opencl_tensor_mem(&a->x);
  l->mems[1] = opencl_tensor_mem(&a->y);
  l->mem_count = 2;
  l->count = q->rows * q->pairs;
  l->params_bytes = sizeof *q;
}

/* Builds the launch of a fused op; false with the reason when the plugin
 * cannot run the problem. */
static bool fused_plan(const opencl_device_props *p, tsr_op op, const void *args, fused_launch *l,
                       char *why, size_t capacity) {
  memset(l, 0, sizeof *l);
  switch (op) {
  case TSR_OP_RMSNORM:
    fused_plan_rmsnorm(args, l);
    break;
  case TSR_OP_LAYERNORM:
    fused_plan_layernorm(args, l);
    break;
  case TSR_OP_SOFTMAX:
    fused_plan_softmax(args, l);
    break;
  case TSR_OP_CROSS_ENTROPY:
    fused_plan_cross_entropy(args, l);
    break;
  case TSR_OP_SWIGLU:
    fused_plan_swiglu(args, l);
    break;
  case TSR_OP_GELU:
    fused_plan_gelu(args, l);
    break;
  case TSR_OP_ROPE:
    fused_plan_rope(args, l);
    break;
  default:
    snprintf(why, capacity, "not a fused op");
    return false;
  }
  if (l->dtype != TSR_DTYPE_F32 && l->dtype != TSR_DTYPE_F16 && l->dtype != TSR_DTYPE_BF16) {
    snprintf(why, capacity, "dtype %s is not f32, f16 or bf16", tsr_plugin_dtype_name(l->dtype));
    return false;
  }
  if (opencl_fused_is_row_op(op)) {
    if (l->n % l->vec != 0)
      l->vec = l->n % 4 == 0 && l->vec >= 4 ? 4 : 1;
  } else if (!l->contiguous || !opencl_fused_elementwise_units(p)) {
    l->vec = 1;
  }
  return true;
}

static tsr_status fused_list(const opencl_device *device, tsr_op op, const void *args,
                             tsr_plugin_variant_list *out, char *why, size_t capacity) {
  fused_launch l;
  if (!fused_plan(device->props, op, args, &l, why, capacity))
    return TSR_ERROR_UNSUPPORTED;
  return opencl_fused_variants(device->props, op, l.n, l.vec, out, why, capacity);
}

/* Row units (TSR_ITEMS) each work item keeps: a power of two up to
 * OPENCL_FUSED_MAX_ITEMS, else 0 (stream the row); cross entropy always streams
 * (one online pass). Powers of two keep the number of builds small. */
static uint32_t fused_items(tsr_op op, const fused_launch *l, uint32_t threads) {
  if (op == TSR_OP_CROSS_ENTROPY)
    return 0;
  uint64_t units = ((uint64_t)l->n + l->vec - 1) / l->vec;
  uint64_t per_item = (units + threads - 1) / threads;
  if (per_item > OPENCL_FUSED_MAX_ITEMS)
    return 0;
  uint32_t items = 1;
  while (items < per_item)
    items *= 2;
  return items;
}

/* GPUs build rmsnorm and layernorm for the call's flags and parameter
 * strides (all in the op signature, so one config per signature still
 * holds): fewer registers (see rows.cl). CPUs (PoCL) keep one build for
 * all of them: their compiles are slow and registers no issue. */
static void fused_row_specialise(const opencl_device_props *p, tsr_op op, const fused_launch *l,
                                 char *options, size_t capacity) {
  if (p->device_class == OPENCL_CLASS_POCL_CPU || (p->type & CL_DEVICE_TYPE_CPU))
    return;
  uint32_t flags;
  bool unit;
  if (op == TSR_OP_RMSNORM) {
    const tsr_cl_rmsnorm_params *q = &l->params.rmsnorm;
    flags = q->flags;
    unit = !(flags & TSR_CL_RMSNORM_WEIGHT) || q->w_stride == 1;
  } else if (op == TSR_OP_LAYERNORM) {
    const tsr_cl_layernorm_params *q = &l->params.layernorm;
    flags = q->flags;
    unit = (!(flags & TSR_CL_LAYERNORM_WEIGHT) || q->w_stride == 1) &&
           (!(flags & TSR_CL_LAYERNORM_BIAS) || q->b_stride == 1);
  } else {
    return;
  }
  snprintf(options, capacity, " -DTSR_ROW_FLAGS=%u -DTSR_ROW_PARAMS_UNIT=%d", flags, unit ? 1 : 0);
}

static bool fused_empty(tsr_op op, const fused_launch *l) {
  return opencl_fused_is_row_op(op) ? l->rows <= 0 || l->n <= 0 : l->count <= 0;
}

static tsr_status fused_prepare(opencl_device *device, tsr_op op, const void *args,
                                const char *name, const opencl_config **out) {
  const tsr_plugin_host *host = &device->plugin->host;
  char why[TSR_PLUGIN_MESSAGE_CAPACITY];
  fused_launch l;
  if (!fused_plan(device->props, op, args, &l, why, sizeof why))
    return tsr_plugin_fail(host, TSR_ERROR_UNSUPPORTED, "%s: %s", tsr_plugin_op_name(op), why);
  const opencl_fused_row *row = opencl_fused_row_find(op, name);
  if (!row)
    return tsr_plugin_fail(host, TSR_ERROR_NOT_FOUND, "%s: no variant named %s",
                           tsr_plugin_op_name(op), name);
  const opencl_kernel *kernel = NULL;
  if (!fused_empty(op, &l)) {
    char options[192];
    if (opencl_fused_is_row_op(op)) {
      int used = snprintf(options, sizeof options,
                          "-DTSR_DTYPE=%d -DTSR_THREADS=%u -DTSR_ITEMS=%u -DTSR_VEC=%u",
                          (int)l.dtype, row->threads, fused_items(op, &l, row->threads), l.vec);
      fused_row_specialise(device->props, op, &l, options + used, sizeof options - (size_t)used);
    } else
      snprintf(options, sizeof options,
               "-DTSR_DTYPE=%d -DTSR_THREADS=%u -DTSR_CONTIG=%d -DTSR_VEC=%u", (int)l.dtype,
               row->threads, l.contiguous ? 1 : 0, l.vec);
    tsr_status status = opencl_kernel_get(device, l.source, options, l.kernel, &kernel);
    if (status != TSR_OK)
      return status;
    if (kernel->max_work_group < row->threads)
      return tsr_plugin_fail(host, TSR_ERROR_UNSUPPORTED,
                             "%s: variant %s needs %u work items per group, the kernel allows "
                             "%zu on %s",
                             tsr_plugin_op_name(op), row->name, row->threads,
                             kernel->max_work_group, device->props->name);
  }
  return opencl_config_get(device, op, row->name, row, kernel, NULL, l.vec, out);
}

static tsr_status fused_run(opencl_queue *queue, tsr_op op, const void *args,
                            const opencl_config *config) {
  const opencl_device_props *p = queue->device->props;
  char why[TSR_PLUGIN_MESSAGE_CAPACITY];
  fused_launch l;
  if (!fused_plan(p, op, args, &l, why, sizeof why))
    return tsr_plugin_fail(&queue->device->plugin->host, TSR_ERROR_UNSUPPORTED, "%s: %s",
                           tsr_plugin_op_name(op), why);
  if (!config->kernel || fused_empty(op, &l))
    return TSR_OK;
  const opencl_fused_row *row = config->row;
  uint64_t groups;
  if (opencl_fused_is_row_op(op)) {
    groups = (uint64_t)l.rows < FUSED_MAX_ROW_GROUPS ? (uint64_t)l.rows : FUSED_MAX_ROW_GROUPS;
  } else {
    uint64_t work = ((uint64_t)l.count + config->width - 1) / config->width;
    uint64_t cap = (uint64_t)(p->compute_units ? p->compute_units : 1) * FUSED_GROUPS_PER_UNIT;
    groups = (work + row->threads - 1) / row->threads;
    if (groups > cap)
      groups = cap;
  }
  if (op == TSR_OP_CROSS_ENTROPY) {
    const tsr_cross_entropy_args *a = args;
    tsr_status status = opencl_queue_status(queue, a->logits.shape[1], a->ignore_index, &l.mems[4]);
    if (status != TSR_OK)
      return status;
  }
  opencl_arg list[6];
  for (uint32_t i = 0; i < l.mem_count; i++)
    list[i] = OPENCL_ARG(l.mems[i]);
  list[l.mem_count] = (opencl_arg){l.params_bytes, &l.params};
  size_t global[3] = {(size_t)groups * row->threads, 1, 1}, local[3] = {row->threads, 1, 1};
  return opencl_launch(queue, config->kernel, list, l.mem_count + 1, 1, global, local);
}

const opencl_op_family opencl_fused_family = {fused_list, fused_prepare, fused_run};
