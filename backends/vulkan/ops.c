/* SPDX-License-Identifier: Apache-2.0 */
/* The fused ops' launches: bindings, push constants (push_constants.h),
 * pipeline choice (dtype build, subgroup build, workgroup size, registers
 * per invocation, vector width) and grids. The shaders are
 * kernels/{rmsnorm, layernorm, softmax, cross_entropy, swiglu, gelu,
 * rope}.comp; each documents its bindings. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "configs.h"
#include "push_constants.h"
#include "vulkan_internal.h"

/* What one launch needs, gathered while checking the problem: the same code
 * answers op_supported (no queue) and runs the op. */
typedef struct launch {
  vulkan_binding bindings[VULKAN_MAX_BINDINGS];
  uint32_t n_bindings;
  union {
    vulkan_rmsnorm_push rmsnorm;
    vulkan_layernorm_push layernorm;
    vulkan_softmax_push softmax;
    vulkan_cross_entropy_push cross_entropy;
    vulkan_swiglu_push swiglu;
    vulkan_gelu_push gelu;
    vulkan_rope_push rope;
  } push;
  uint32_t push_bytes;
  bool vec4;        /* every tensor allows 4-element vector access */
  bool vec8;        /* ... and 8-element access (16-byte units of 16-bit data) */
  int64_t per_item; /* row length (row ops) or element count */
  uint64_t items;   /* rows, or work items of elementwise ops */
  const char *family;
  int32_t dtype;
} launch;

/* 32-bit word code of a tensor read through word_decode (common.glsl). */
static uint32_t word_code(int32_t dtype) {
  return dtype == TSR_DTYPE_F16 ? 1u : dtype == TSR_DTYPE_BF16 ? 2u : 0u;
}

static bool bind(const vulkan_device *device, launch *l, uint32_t slot, const tsr_plugin_tensor *t,
                 uint32_t *first, char *why, size_t capacity) {
  if (!vulkan_bind_tensor(device, t, &l->bindings[slot], first, why, capacity))
    return false;
  if (slot + 1 > l->n_bindings)
    l->n_bindings = slot + 1;
  return true;
}

/* Leading dims of a row tensor folded into (d0, d1, d2); the shared d1, d2
 * come from the first tensor (validation made the shapes equal). */
static bool row_tensor_of(const vulkan_device *device, launch *l, uint32_t slot,
                          const tsr_plugin_tensor *t, vulkan_row_tensor *out, uint32_t *d1,
                          uint32_t *d2, char *why, size_t capacity) {
  uint32_t first = 0;
  if (!bind(device, l, slot, t, &first, why, capacity))
    return false;
  int64_t shape[3] = {1, 1, 1}, stride[3] = {0, 0, 0};
  int lead = t->rank - 1;
  for (int i = 0; i < lead; i++) {
    shape[3 - lead + i] = t->shape[i];
    stride[3 - lead + i] = t->shape[i] > 1 ? t->strides[i] : 0;
  }
  out->first = first;
  out->s0 = (uint32_t)stride[0];
  out->s1 = (uint32_t)stride[1];
  out->s2 = (uint32_t)stride[2];
  out->inner = (uint32_t)(t->shape[t->rank - 1] > 1 ? t->strides[t->rank - 1] : 1);
  if (d1)
    *d1 = (uint32_t)shape[1];
  if (d2)
    *d2 = (uint32_t)shape[2];
  if (out->inner != 1 || first % 4 || out->s0 % 4 || out->s1 % 4 || out->s2 % 4)
    l->vec4 = false;
  if (out->inner != 1 || first % 8 || out->s0 % 8 || out->s1 % 8 || out->s2 % 8)
    l->vec8 = false;
  return true;
}

/* A tensor of up to rank 4 with leading extents of 1 added. */
static bool elem_tensor_of(const vulkan_device *device, launch *l, uint32_t slot,
                           const tsr_plugin_tensor *t, vulkan_elem_tensor *out, bool *contiguous,
                           char *why, size_t capacity) {
  uint32_t first = 0;
  if (!bind(device, l, slot, t, &first, why, capacity))
    return false;
  int64_t stride[4] = {0, 0, 0, 0};
  int64_t dense = 1;
  for (int i = t->rank - 1; i >= 0; i--) {
    int64_t s = t->shape[i] > 1 ? t->strides[i] : 0;
    stride[4 - t->rank + i] = s;
    if (t->shape[i] > 1 && s != dense)
      *contiguous = false;
    dense *= t->shape[i];
  }
  *out = (vulkan_elem_tensor){first, (uint32_t)stride[0], (uint32_t)stride[1], (uint32_t)stride[2],
                              (uint32_t)stride[3]};
  if (first % 4)
    l->vec4 = false;
  return true;
}

static void elem_shape(const tsr_plugin_tensor *t, uint32_t *d1, uint32_t *d2, uint32_t *d3) {
  int64_t shape[4] = {1, 1, 1, 1};
  for (int i = 0; i < t->rank; i++)
    shape[4 - t->rank + i] = t->shape[i];
  *d1 = (uint32_t)shape[1];
  *d2 = (uint32_t)shape[2];
  *d3 = (uint32_t)shape[3];
}

static int64_t element_count(const tsr_plugin_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++)
    n *= t->shape[i];
  return n;
}

/* Builds the launch of a fused op; false with the reason when this device
 * cannot run the problem. */
static bool plan(const vulkan_device *device, tsr_op op, const void *args, launch *l, char *why,
                 size_t capacity) {
  memset(l, 0, sizeof *l);
  l->vec4 = l->vec8 = true;
  const vulkan_device_props *p = device->props;
  switch (op) {
  case TSR_OP_RMSNORM: {
    const tsr_rmsnorm_args *a = args;
    vulkan_rmsnorm_push *q = &l->push.rmsnorm;
    l->family = "rmsnorm";
    l->dtype = a->x.dtype;
    if (!row_tensor_of(device, l, 0, &a->x, &q->x, &q->d1, &q->d2, why, capacity) ||
        !row_tensor_of(device, l, 3, &a->y, &q->y, NULL, NULL, why, capacity))
      return false;
    l->bindings[1] = l->bindings[2] = l->bindings[4] = l->bindings[0];
    l->n_bindings = 5;
    if (a->residual.buffer) {
      if (!row_tensor_of(device, l, 1, &a->residual, &q->residual, NULL, NULL, why, capacity))
        return false;
      q->flags |= 1;
    }
    if (a->weight.buffer) {
      if (!bind(device, l, 2, &a->weight, &q->w_first, why, capacity))
        return false;
      q->w_stride = (uint32_t)a->weight.strides[0];
      q->w_code = word_code(a->weight.dtype);
      q->flags |= 2;
    }
    if (a->residual_out.buffer) {
      if (!row_tensor_of(device, l, 4, &a->residual_out, &q->residual_out, NULL, NULL, why,
                         capacity))
        return false;
      q->flags |= 4;
    }
    l->per_item = a->x.shape[a->x.rank - 1];
    l->items = (uint64_t)tsr_plugin_row_count(&a->x);
    q->rows = (uint32_t)l->items;
    q->n = (uint32_t)l->per_item;
    q->eps = a->eps;
    l->push_bytes = sizeof *q;
    break;
  }
  case TSR_OP_LAYERNORM: {
    const tsr_layernorm_args *a = args;
    vulkan_layernorm_push *q = &l->push.layernorm;
    l->family = "layernorm";
    l->dtype = a->x.dtype;
    if (!row_tensor_of(device, l, 0, &a->x, &q->x, &q->d1, &q->d2, why, capacity) ||
        !row_tensor_of(device, l, 3, &a->y, &q->y, NULL, NULL, why, capacity))
      return false;
    l->bindings[1] = l->bindings[2] = l->bindings[0];
    if (a->weight.buffer) {
      if (!bind(device, l, 1, &a->weight, &q->w_first, why, capacity))
        return false;
      q->w_stride = (uint32_t)a->weight.strides[0];
      q->w_code = word_code(a->weight.dtype);
      q->flags |= 1;
    }
    if (a->bias.buffer) {
      if (!bind(device, l, 2, &a->bias, &q->b_first, why, capacity))
        return false;
      q->b_stride = (uint32_t)a->bias.strides[0];
      q->b_code = word_code(a->bias.dtype);
      q->flags |= 2;
    }
    l->per_item = a->x.shape[a->x.rank - 1];
    l->items = (uint64_t)tsr_plugin_row_count(&a->x);
    q->rows = (uint32_t)l->items;
    q->n = (uint32_t)l->per_item;
    q->eps = a->eps;
    l->push_bytes = sizeof *q;
    break;
  }
  case TSR_OP_SOFTMAX: {
    const tsr_softmax_args *a = args;
    vulkan_softmax_push *q = &l->push.softmax;
    l->family = "softmax";
    l->dtype = a->x.dtype;
    if (!row_tensor_of(device, l, 0, &a->x, &q->x, &q->d1, &q->d2, why, capacity) ||
        !row_tensor_of(device, l, 1, &a->y, &q->y, NULL, NULL, why, capacity))
      return false;
    l->per_item = a->x.shape[a->x.rank - 1];
    l->items = (uint64_t)tsr_plugin_row_count(&a->x);
    q->rows = (uint32_t)l->items;
    q->n = (uint32_t)l->per_item;
    q->scale = a->scale;
    l->push_bytes = sizeof *q;
    break;
  }
  case TSR_OP_CROSS_ENTROPY: {
    const tsr_cross_entropy_args *a = args;
    vulkan_cross_entropy_push *q = &l->push.cross_entropy;
    l->family = "cross_entropy";
    l->dtype = a->logits.dtype;
    if (!row_tensor_of(device, l, 0, &a->logits, &q->x, &q->d1, &q->d2, why, capacity) ||
        !bind(device, l, 1, &a->targets, &q->t_first, why, capacity) ||
        !bind(device, l, 2, &a->loss, &q->loss_first, why, capacity))
      return false;
    q->t_stride = (uint32_t)a->targets.strides[0];
    q->loss_stride = (uint32_t)a->loss.strides[0];
    l->bindings[3] = l->bindings[2];
    if (a->lse.buffer) {
      if (!bind(device, l, 3, &a->lse, &q->lse_first, why, capacity))
        return false;
      q->lse_stride = (uint32_t)a->lse.strides[0];
      q->flags |= 1;
    }
    if (a->ignore_index >= INT32_MIN && a->ignore_index <= INT32_MAX) {
      q->ignore_index = (int32_t)a->ignore_index;
      q->flags |= 2;
    }
    l->n_bindings = 5; /* 4: the queue's status word, added at run time */
    l->per_item = a->logits.shape[1];
    l->items = (uint64_t)a->logits.shape[0];
    q->rows = (uint32_t)l->items;
    q->n = (uint32_t)l->per_item;
    l->push_bytes = sizeof *q;
    break;
  }
  case TSR_OP_SWIGLU: {
    const tsr_swiglu_args *a = args;
    vulkan_swiglu_push *q = &l->push.swiglu;
    bool contiguous = true;
    l->family = "swiglu";
    l->dtype = a->gate.dtype;
    if (!elem_tensor_of(device, l, 0, &a->gate, &q->gate, &contiguous, why, capacity) ||
        !elem_tensor_of(device, l, 1, &a->up, &q->up, &contiguous, why, capacity) ||
        !elem_tensor_of(device, l, 2, &a->y, &q->y, &contiguous, why, capacity))
      return false;
    elem_shape(&a->gate, &q->d1, &q->d2, &q->d3);
    l->per_item = element_count(&a->gate);
    q->count = (uint32_t)l->per_item;
    l->vec4 = l->vec4 && contiguous && l->per_item % 4 == 0;
    l->items = contiguous ? 1 : 0; /* reused below as the CONTIG flag */
    l->push_bytes = sizeof *q;
    break;
  }
  case TSR_OP_GELU: {
    const tsr_gelu_args *a = args;
    vulkan_gelu_push *q = &l->push.gelu;
    bool contiguous = true;
    l->family = "gelu";
    l->dtype = a->x.dtype;
    if (!elem_tensor_of(device, l, 0, &a->x, &q->x, &contiguous, why, capacity) ||
        !elem_tensor_of(device, l, 1, &a->y, &q->y, &contiguous, why, capacity))
      return false;
    elem_shape(&a->x, &q->d1, &q->d2, &q->d3);
    l->per_item = element_count(&a->x);
    q->count = (uint32_t)l->per_item;
    q->approximate = a->approximate == TSR_GELU_TANH ? 1u : 0u;
    l->vec4 = l->vec4 && contiguous && l->per_item % 4 == 0;
    l->items = contiguous ? 1 : 0;
    l->push_bytes = sizeof *q;
    break;
  }
  case TSR_OP_ROPE: {
    const tsr_rope_args *a = args;
    vulkan_rope_push *q = &l->push.rope;
    bool contiguous = true;
    l->family = "rope";
    l->dtype = a->x.dtype;
    if (!elem_tensor_of(device, l, 0, &a->x, &q->x, &contiguous, why, capacity) ||
        !elem_tensor_of(device, l, 1, &a->y, &q->y, &contiguous, why, capacity))
      return false;
    q->seq = (uint32_t)a->x.shape[1];
    q->heads = (uint32_t)a->x.shape[2];
    q->pairs = (uint32_t)(a->x.shape[3] / 2);
    q->rows = (uint32_t)(a->x.shape[0] * a->x.shape[1] * a->x.shape[2]);
    q->half_rotary = (uint32_t)(a->rotary_dim / 2);
    q->gptj = a->style == TSR_ROPE_GPTJ;
    q->position_offset = (int32_t)a->position_offset;
    q->log2_theta = (float)log2((double)a->theta);
    q->rotary_dim = (float)a->rotary_dim;
    l->per_item = (int64_t)q->rows * q->pairs;
    l->vec4 = false;
    l->items = 0;
    l->push_bytes = sizeof *q;
    break;
  }
  default:
    snprintf(why, capacity, "not a fused op");
    return false;
  }
  if (!vulkan_dtype_suffix(l->dtype)) {
    snprintf(why, capacity, "dtype %d is not f32, f16 or bf16", (int)l->dtype);
    return false;
  }
  if (l->dtype != TSR_DTYPE_F32 && !p->storage_16bit) {
    snprintf(why, capacity, "%s has no 16-bit storage buffer access (storageBuffer16BitAccess)",
             p->name);
    return false;
  }
  return true;
}

static tsr_status fused_list(const vulkan_device *device, tsr_op op, const void *args,
                             tsr_plugin_variant_list *out, char *why, size_t capacity) {
  launch l;
  if (!plan(device, op, args, &l, why, capacity))
    return TSR_ERROR_UNSUPPORTED;
  vulkan_fused_variants(device->props, op, l.per_item, out);
  if (out->count == 0) {
    snprintf(why, capacity, "no variant can run this problem");
    return TSR_ERROR_UNSUPPORTED;
  }
  return TSR_OK;
}

/* Elements per vector unit: for row ops units of 16 bytes where the tensors
 * allow (8 elements of 16-bit data: 8-byte units ran at two thirds of a
 * copy's bandwidth on an H100), else 4 elements, else 1. */
static uint32_t fused_width(tsr_op op, const launch *l) {
  if (vulkan_is_row_op(op)) {
    uint32_t width = 1;
    if (l->vec4 && l->per_item % 4 == 0)
      width = 4;
    if (l->dtype != TSR_DTYPE_F32 && l->vec8 && l->per_item % 8 == 0)
      width = 8;
    return width;
  }
  return op != TSR_OP_ROPE && l->vec4 ? 4 : 1;
}

/* Workgroups of a launch: one per row for row ops; else the work items
 * (pairs for rope, vector units for the others) over `threads`. */
static uint64_t fused_groups(tsr_op op, const launch *l, uint32_t threads, uint32_t width) {
  if (vulkan_is_row_op(op))
    return l->items;
  uint64_t work = ((uint64_t)l->per_item + width - 1) / width;
  return (work + threads - 1) / threads;
}

/* The pipeline: the dtype (and subgroup) build of the op's shader, with the
 * workgroup size, registers per invocation (row ops) or contiguity, and the
 * vector width as specialisation constants. */
static tsr_status fused_prepare(vulkan_device *device, tsr_op op, const void *args,
                                const char *name, const vulkan_config **out) {
  const vulkan_device_props *p = device->props;
  const tsr_plugin_host *host = &device->plugin->host;
  char why[TSR_PLUGIN_MESSAGE_CAPACITY];
  launch l;
  if (!plan(device, op, args, &l, why, sizeof why))
    return tsr_plugin_fail(host, TSR_ERROR_UNSUPPORTED, "%s: %s", tsr_plugin_op_name(op), why);
  const vulkan_fused_config *row = vulkan_fused_config_find(op, name);
  if (!row)
    return tsr_plugin_fail(host, TSR_ERROR_NOT_FOUND, "%s: no variant named %s",
                           tsr_plugin_op_name(op), name);
  uint32_t threads = row->threads, width = fused_width(op, &l);
  const vulkan_pipeline *pipeline = NULL;
  if (fused_groups(op, &l, threads, width) > 0) {
    char shader[64];
    uint32_t spec[3] = {threads, 0, width};
    if (vulkan_is_row_op(op)) {
      uint64_t units = ((uint64_t)l.per_item + width - 1) / width;
      uint64_t items = (units + threads - 1) / threads;
      if (items > VULKAN_ROWS_MAX_ITEMS || op == TSR_OP_CROSS_ENTROPY)
        items = 0;
      spec[1] = (uint32_t)items;
      snprintf(shader, sizeof shader, "%s_%s%s", l.family, vulkan_dtype_suffix(l.dtype),
               p->subgroup_arithmetic ? "_sg" : "");
    } else {
      spec[1] = (uint32_t)l.items; /* CONTIG (0 for rope) */
      snprintf(shader, sizeof shader, "%s_%s", l.family, vulkan_dtype_suffix(l.dtype));
    }
    tsr_status status = vulkan_pipeline_get(device, shader, spec, 3, 0, &pipeline);
    if (status != TSR_OK)
      return status;
  }
  return vulkan_config_get(device, op, row->name, row, pipeline, width, out);
}

/* Folds `groups` workgroups into x and y of the grid. */
static void fold(uint64_t groups, uint32_t limit, uint32_t *gx, uint32_t *gy) {
  *gx = groups < limit ? (uint32_t)groups : limit;
  *gy = *gx ? (uint32_t)((groups + *gx - 1) / *gx) : 0;
}

/* Whether a 1-D parameter (weight, bias) of `first` and `stride` can be read
 * a unit of `width` elements at a time. */
static bool param_vector(uint32_t first, uint32_t stride, uint32_t width) {
  return width >= 4 && stride == 1 && first % width == 0;
}

/* Flags the weight / bias the row shaders may read in vector units. */
static void vector_params(tsr_op op, launch *l, uint32_t width) {
  if (op == TSR_OP_RMSNORM) {
    vulkan_rmsnorm_push *q = &l->push.rmsnorm;
    if ((q->flags & 2) && param_vector(q->w_first, q->w_stride, width))
      q->flags |= 8;
  } else if (op == TSR_OP_LAYERNORM) {
    vulkan_layernorm_push *q = &l->push.layernorm;
    if ((q->flags & 1) && param_vector(q->w_first, q->w_stride, width))
      q->flags |= 4;
    if ((q->flags & 2) && param_vector(q->b_first, q->b_stride, width))
      q->flags |= 8;
  }
}

static tsr_status fused_run(vulkan_queue *queue, tsr_op op, const void *args,
                            const vulkan_config *config) {
  vulkan_device *device = queue->device;
  const vulkan_device_props *p = device->props;
  const tsr_plugin_host *host = &device->plugin->host;
  char why[TSR_PLUGIN_MESSAGE_CAPACITY];
  launch l;
  if (!plan(device, op, args, &l, why, sizeof why))
    return tsr_plugin_fail(host, TSR_ERROR_UNSUPPORTED, "%s: %s", tsr_plugin_op_name(op), why);
  if (op == TSR_OP_ROPE) {
    /* Not part of the signature: decided here, for each call. */
    const tsr_rope_args *a = args;
    if (a->position_offset < INT32_MIN || a->position_offset > INT32_MAX - a->x.shape[1])
      return tsr_plugin_fail(host, TSR_ERROR_UNSUPPORTED,
                             "rope: position_offset %lld with %lld tokens leaves the 32-bit "
                             "positions the shader computes with",
                             (long long)a->position_offset, (long long)a->x.shape[1]);
  }
  const vulkan_fused_config *row = config->row;
  uint64_t groups = fused_groups(op, &l, row->threads, config->width);
  if (groups == 0 || !config->pipeline)
    return TSR_OK;
  if (vulkan_is_row_op(op))
    vector_params(op, &l, config->width);
  if (op == TSR_OP_CROSS_ENTROPY) {
    const tsr_cross_entropy_args *a = args;
    /* Word 0 (TSR_PLUGIN_FAULT_CE_TARGET) is the shader's bad_row. */
    l.bindings[4] = vulkan_queue_faults(queue);
    queue->fault_context.vocab = a->logits.shape[1];
    queue->fault_context.ignore_index = a->ignore_index;
  }
  uint32_t gx, gy;
  fold(groups, p->max_workgroup_count[0], &gx, &gy);
  return vulkan_dispatch(queue, config->pipeline, l.bindings, l.n_bindings, &l.push, l.push_bytes,
                         gx, gy, 1);
}

const vulkan_op_family vulkan_fused_family = {fused_list, fused_prepare, fused_run};
