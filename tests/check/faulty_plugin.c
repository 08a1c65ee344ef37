/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A test plugin for `tessera check` itself: a host-memory device whose ops
 * are the fp64 reference rounded to the output dtype, so a correct run
 * passes every case, plus one deliberate fault chosen with TESSERA_FAULT.
 * The check suite runs `tessera check` against it with each fault and
 * expects a failure that names the right op, proving the harness catches
 * wrong masks, missing epilogues, unwritten or stray elements and
 * precision loss rather than trusting any device.
 *
 * Unlike a real plugin it links libtessera, for tsr_reference_*.
 *
 * TESSERA_FAULT values:
 *   none         correct results
 *   bias         gemm ignores the bias
 *   causal       attention's causal mask is off by one (sees one future key)
 *   window       attention ignores window_left
 *   unwritten    the last element of every output is not written
 *   overrun      one element past the end of every output is written
 *   input        the first element of every op's first input is overwritten
 *   precision    f32 outputs are rounded to bf16
 *   rope_offset  rope uses position_offset + 1
 *   ignore_index cross entropy does not ignore any row
 *   lse          attention's lse is in base 2
 *   alpha        gemm ignores alpha
 *   groups       grouped gemm uses the next group's weights for the last group
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tessera/plugin.h"
#include "tessera/reference.h"

#define EXPORT __attribute__((visibility("default")))

typedef struct fake_buffer {
  unsigned char *data;
  uint64_t bytes;
} fake_buffer;

typedef struct fake_event {
  double ms; /* host clock when recorded: the queue is synchronous */
} fake_event;

static const tsr_host_services *host;
static char fault[32] = "none";
static int device_marker, queue_marker; /* handles: any non-NULL pointer */

static bool is_fault(const char *name) {
  return strcmp(fault, name) == 0;
}

static tsr_status fake_init(const tsr_host_services *services, void **plugin, char *reason,
                            size_t capacity) {
  (void)reason;
  (void)capacity;
  host = services;
  const char *value = getenv("TESSERA_FAULT");
  if (value != NULL && value[0] != '\0')
    snprintf(fault, sizeof fault, "%s", value);
  *plugin = &device_marker;
  return TSR_OK;
}

static void fake_shutdown(void *plugin) {
  (void)plugin;
}

static uint32_t fake_device_count(void *plugin) {
  (void)plugin;
  return 1;
}

static tsr_status fake_device_info(void *plugin, uint32_t index, tsr_device_info *info) {
  (void)plugin;
  (void)index;
  snprintf(info->vendor, sizeof info->vendor, "tessera tests");
  snprintf(info->name, sizeof info->name, "faulty reference device (fault: %s)", fault);
  snprintf(info->arch, sizeof info->arch, "reference");
  info->type = TSR_DEVICE_OTHER;
  info->memory_bytes = (uint64_t)1 << 30;
  info->compute_units = 1;
  info->dtype_mask = (1u << TSR_DTYPE_F32) | (1u << TSR_DTYPE_F16) | (1u << TSR_DTYPE_BF16) |
                     (1u << TSR_DTYPE_I32);
  /* every op but kv_append, whose absence also keeps the serving forms of
   * attention (which it does not model) away */
  info->op_mask = ((1u << TSR_OP_COUNT_) - 1u) & ~(1u << TSR_OP_KV_APPEND);
  info->host_visible = 1;
  return TSR_OK;
}

static tsr_status fake_device_open(void *plugin, uint32_t index, void **device) {
  (void)plugin;
  (void)index;
  *device = &device_marker;
  return TSR_OK;
}

static void fake_device_close(void *device) {
  (void)device;
}

static tsr_status fake_buffer_alloc(void *device, uint64_t bytes, void **out) {
  (void)device;
  fake_buffer *b = calloc(1, sizeof *b);
  if (b == NULL || (b->data = malloc(bytes)) == NULL) {
    free(b);
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  b->bytes = bytes;
  *out = b;
  return TSR_OK;
}

static void fake_buffer_free(void *device, void *buffer) {
  (void)device;
  fake_buffer *b = buffer;
  if (b != NULL)
    free(b->data);
  free(b);
}

static void *fake_host_pointer(void *device, void *buffer) {
  (void)device;
  return ((fake_buffer *)buffer)->data;
}

static tsr_status fake_queue_create(void *device, void **queue) {
  (void)device;
  *queue = &queue_marker;
  return TSR_OK;
}

static void fake_queue_destroy(void *queue) {
  (void)queue;
}

static tsr_status fake_queue_finish(void *queue) {
  (void)queue;
  return TSR_OK;
}

static tsr_status fake_write(void *queue, void *buffer, uint64_t offset, const void *src,
                             uint64_t bytes) {
  (void)queue;
  memcpy(((fake_buffer *)buffer)->data + offset, src, bytes);
  return TSR_OK;
}

static tsr_status fake_read(void *queue, void *buffer, uint64_t offset, void *dst, uint64_t bytes) {
  (void)queue;
  memcpy(dst, ((fake_buffer *)buffer)->data + offset, bytes);
  return TSR_OK;
}

static tsr_status fake_copy(void *queue, void *src, uint64_t src_offset, void *dst,
                            uint64_t dst_offset, uint64_t bytes) {
  (void)queue;
  memmove(((fake_buffer *)dst)->data + dst_offset, ((fake_buffer *)src)->data + src_offset, bytes);
  return TSR_OK;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static tsr_status fake_event_record(void *queue, void **event) {
  (void)queue;
  fake_event *e = malloc(sizeof *e);
  if (e == NULL)
    return TSR_ERROR_OUT_OF_MEMORY;
  e->ms = now_ms();
  *event = e;
  return TSR_OK;
}

static tsr_status fake_event_wait(void *event) {
  (void)event;
  return TSR_OK;
}

static tsr_status fake_event_elapsed(void *start, void *end, double *ms) {
  *ms = ((fake_event *)end)->ms - ((fake_event *)start)->ms;
  return TSR_OK;
}

static void fake_event_destroy(void *event) {
  free(event);
}

static tsr_status fake_op_supported(void *device, tsr_op op, const void *args) {
  (void)device;
  (void)op;
  (void)args;
  return TSR_OK;
}

static tsr_status fake_op_variants(void *device, tsr_op op, const void *args,
                                   tsr_plugin_variant_list *out) {
  (void)device;
  (void)op;
  (void)args;
  out->count = 2;
  out->heuristic = 0;
  snprintf(out->reason, sizeof out->reason, "the reference is the only algorithm");
  snprintf(out->variants[0].name, sizeof out->variants[0].name, "reference");
  snprintf(out->variants[0].description, sizeof out->variants[0].description,
           "fp64 reference, rounded to the output dtype");
  snprintf(out->variants[1].name, sizeof out->variants[1].name, "reference_again");
  snprintf(out->variants[1].description, sizeof out->variants[1].description,
           "the same, under a second name (so tuning has a choice)");
  return TSR_OK;
}

/* ---- running ops: reference in double, stored in the output dtype ---- */

/* The tensor with its buffer replaced by the host address, as the
 * reference takes it. */
static tsr_plugin_tensor on_host(tsr_plugin_tensor t) {
  if (t.buffer != NULL)
    t.buffer = ((fake_buffer *)t.buffer)->data;
  return t;
}

static int64_t numel(const tsr_plugin_tensor *t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->rank; i++)
    n *= t->shape[i];
  return n;
}

static int64_t element_offset(const tsr_plugin_tensor *t, int64_t linear) {
  int64_t offset = 0;
  for (int32_t i = t->rank - 1; i >= 0; i--) {
    offset += (linear % t->shape[i]) * t->strides[i];
    linear /= t->shape[i];
  }
  return offset;
}

/* Writes dense row-major values into the strided device tensor. */
static void store(const tsr_plugin_tensor *device_tensor, const double *values) {
  if (device_tensor->buffer == NULL || values == NULL)
    return;
  tsr_plugin_tensor t = on_host(*device_tensor);
  unsigned char *base = (unsigned char *)t.buffer + t.offset;
  int64_t n = numel(&t);
  if (is_fault("unwritten"))
    n--;
  for (int64_t e = 0; e < n; e++) {
    float value = (float)values[e];
    if (is_fault("precision") && t.dtype == TSR_DTYPE_F32)
      value = tsr_bf16_to_f32(tsr_f32_to_bf16(value));
    tsr_store_from_f32(base, t.dtype, element_offset(&t, e), value);
  }
  if (is_fault("overrun")) {
    int64_t last = element_offset(&t, numel(&t) - 1);
    tsr_store_from_f32(base, t.dtype, last + 1, 0.0f);
  }
}

static void clobber_input(const tsr_plugin_tensor *device_tensor) {
  if (!is_fault("input") || device_tensor->buffer == NULL)
    return;
  tsr_plugin_tensor t = on_host(*device_tensor);
  tsr_store_from_f32((unsigned char *)t.buffer + t.offset, t.dtype, 0, 0.125f);
}

static double *scratch(const tsr_plugin_tensor *t) {
  if (t->buffer == NULL)
    return NULL;
  return calloc((size_t)(numel(t) > 0 ? numel(t) : 1), sizeof(double));
}

static tsr_status fake_op_run(void *queue, tsr_op op, const void *arguments, const char *variant) {
  (void)queue;
  (void)variant;
  tsr_status status = TSR_OK;
  double *out0 = NULL, *out1 = NULL;
  switch (op) {
  case TSR_OP_GEMM: {
    tsr_gemm_args a = *(const tsr_gemm_args *)arguments;
    out0 = scratch(&a.d);
    tsr_gemm_args h = a;
    h.a = on_host(a.a);
    h.b = on_host(a.b);
    h.c = on_host(a.c);
    h.bias = is_fault("bias") ? (tsr_plugin_tensor){0} : on_host(a.bias);
    h.d = on_host(a.d);
    if (is_fault("alpha"))
      h.alpha = 1.0f;
    status = tsr_reference_gemm(&h, out0);
    clobber_input(&a.a);
    store(&a.d, out0);
    break;
  }
  case TSR_OP_GROUPED_GEMM: {
    tsr_grouped_gemm_args a = *(const tsr_grouped_gemm_args *)arguments;
    out0 = scratch(&a.d);
    tsr_grouped_gemm_args h = a;
    h.a = on_host(a.a);
    h.b = on_host(a.b);
    h.bias = on_host(a.bias);
    h.d = on_host(a.d);
    int64_t sizes[64];
    if (is_fault("groups") && a.group_count >= 2 && a.group_count <= 64) {
      /* The last two groups trade rows: the last group's rows meet the
       * wrong weights whenever both have rows. */
      memcpy(sizes, a.group_sizes, sizeof(int64_t) * (size_t)a.group_count);
      int64_t g = a.group_count - 1;
      sizes[g - 1] += sizes[g];
      sizes[g] = 0;
      h.group_sizes = sizes;
    }
    status = tsr_reference_grouped_gemm(&h, out0);
    clobber_input(&a.a);
    store(&a.d, out0);
    break;
  }
  case TSR_OP_ATTENTION: {
    tsr_attention_args a = *(const tsr_attention_args *)arguments;
    out0 = scratch(&a.o);
    out1 = scratch(&a.lse);
    tsr_attention_args h = a;
    h.q = on_host(a.q);
    h.k = on_host(a.k);
    h.v = on_host(a.v);
    h.o = on_host(a.o);
    h.lse = on_host(a.lse);
    if (is_fault("causal") && a.causal) {
      h.causal = 0;
      h.window_right = 1;
    }
    if (is_fault("window"))
      h.window_left = -1;
    status = tsr_reference_attention(&h, out0, out1);
    if (is_fault("lse") && out1 != NULL)
      for (int64_t i = 0; i < numel(&a.lse); i++)
        out1[i] /= log(2.0);
    clobber_input(&a.q);
    store(&a.o, out0);
    store(&a.lse, out1);
    break;
  }
  case TSR_OP_RMSNORM: {
    tsr_rmsnorm_args a = *(const tsr_rmsnorm_args *)arguments;
    out0 = scratch(&a.y);
    out1 = scratch(&a.residual_out);
    tsr_rmsnorm_args h = a;
    h.x = on_host(a.x);
    h.residual = on_host(a.residual);
    h.weight = on_host(a.weight);
    h.y = on_host(a.y);
    h.residual_out = on_host(a.residual_out);
    status = tsr_reference_rmsnorm(&h, out0, out1);
    clobber_input(&a.x);
    store(&a.y, out0);
    store(&a.residual_out, out1);
    break;
  }
  case TSR_OP_LAYERNORM: {
    tsr_layernorm_args a = *(const tsr_layernorm_args *)arguments;
    out0 = scratch(&a.y);
    tsr_layernorm_args h = a;
    h.x = on_host(a.x);
    h.weight = on_host(a.weight);
    h.bias = on_host(a.bias);
    h.y = on_host(a.y);
    status = tsr_reference_layernorm(&h, out0);
    clobber_input(&a.x);
    store(&a.y, out0);
    break;
  }
  case TSR_OP_SOFTMAX: {
    tsr_softmax_args a = *(const tsr_softmax_args *)arguments;
    out0 = scratch(&a.y);
    tsr_softmax_args h = a;
    h.x = on_host(a.x);
    h.y = on_host(a.y);
    status = tsr_reference_softmax(&h, out0);
    clobber_input(&a.x);
    store(&a.y, out0);
    break;
  }
  case TSR_OP_ROPE: {
    tsr_rope_args a = *(const tsr_rope_args *)arguments;
    out0 = scratch(&a.y);
    tsr_rope_args h = a;
    h.x = on_host(a.x);
    h.y = on_host(a.y);
    if (is_fault("rope_offset"))
      h.position_offset++;
    status = tsr_reference_rope(&h, out0);
    if (a.x.buffer != a.y.buffer) /* in place: the input is the output */
      clobber_input(&a.x);
    store(&a.y, out0);
    break;
  }
  case TSR_OP_SWIGLU: {
    tsr_swiglu_args a = *(const tsr_swiglu_args *)arguments;
    out0 = scratch(&a.y);
    tsr_swiglu_args h = a;
    h.gate = on_host(a.gate);
    h.up = on_host(a.up);
    h.y = on_host(a.y);
    status = tsr_reference_swiglu(&h, out0);
    clobber_input(&a.gate);
    store(&a.y, out0);
    break;
  }
  case TSR_OP_GELU: {
    tsr_gelu_args a = *(const tsr_gelu_args *)arguments;
    out0 = scratch(&a.y);
    tsr_gelu_args h = a;
    h.x = on_host(a.x);
    h.y = on_host(a.y);
    status = tsr_reference_gelu(&h, out0);
    clobber_input(&a.x);
    store(&a.y, out0);
    break;
  }
  case TSR_OP_CROSS_ENTROPY: {
    tsr_cross_entropy_args a = *(const tsr_cross_entropy_args *)arguments;
    out0 = scratch(&a.loss);
    out1 = scratch(&a.lse);
    tsr_cross_entropy_args h = a;
    h.logits = on_host(a.logits);
    h.targets = on_host(a.targets);
    h.loss = on_host(a.loss);
    h.lse = on_host(a.lse);
    if (is_fault("ignore_index")) {
      /* Rows that should be ignored get the loss of class 0 instead. */
      status = tsr_reference_cross_entropy(&h, out0, out1);
      for (int64_t r = 0; r < numel(&a.loss); r++) {
        int32_t target;
        memcpy(&target,
               (unsigned char *)h.targets.buffer + h.targets.offset +
                   (size_t)(r * h.targets.strides[0]) * 4,
               4);
        if (target == h.ignore_index)
          out0[r] = out1 != NULL ? out1[r] : 1.0;
      }
    } else {
      status = tsr_reference_cross_entropy(&h, out0, out1);
    }
    clobber_input(&a.logits);
    store(&a.loss, out0);
    store(&a.lse, out1);
    break;
  }
  default:
    status = TSR_ERROR_UNSUPPORTED;
  }
  free(out0);
  free(out1);
  if (status != TSR_OK && host != NULL)
    host->set_error(host->host_handle, "faulty plugin: reference failed (%d)", (int)status);
  return status;
}

static const tsr_plugin_v1 table = {
    .struct_size = sizeof(tsr_plugin_v1),
    .abi_version = 1,
    .name = "faulty",
    .version = "1.0",
    .init = fake_init,
    .shutdown = fake_shutdown,
    .device_count = fake_device_count,
    .device_info = fake_device_info,
    .device_open = fake_device_open,
    .device_close = fake_device_close,
    .buffer_alloc = fake_buffer_alloc,
    .buffer_free = fake_buffer_free,
    .buffer_host_pointer = fake_host_pointer,
    .queue_create = fake_queue_create,
    .queue_destroy = fake_queue_destroy,
    .queue_finish = fake_queue_finish,
    .buffer_write = fake_write,
    .buffer_read = fake_read,
    .buffer_copy = fake_copy,
    .event_record = fake_event_record,
    .event_wait = fake_event_wait,
    .event_elapsed_ms = fake_event_elapsed,
    .event_destroy = fake_event_destroy,
    .op_supported = fake_op_supported,
    .op_variants = fake_op_variants,
    .op_run = fake_op_run,
    .buffer_wrap = NULL,
};

EXPORT uint32_t tsr_plugin_negotiate(uint32_t core_max_abi) {
  return core_max_abi >= 1 ? 1 : 0;
}

EXPORT const void *tsr_plugin_entry(uint32_t abi) {
  return abi == 1 ? &table : NULL;
}
