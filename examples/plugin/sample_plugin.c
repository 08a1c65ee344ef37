/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sample: a complete tessera plugin written only against tessera/plugin.h and
 * the header-only tessera/plugin_helper.h, speaking plugin ABI 2.
 *
 * It offers one host-memory device, "tessera sample device", whose queues run
 * work synchronously, and computes two elementwise ops in f32: swiglu and gelu
 * (erf and tanh forms). Everything else is answered TSR_ERROR_UNSUPPORTED with
 * a reason. It does not link libtessera: the core hands it a table of host
 * services at init, and that is all it uses of the core. Its one config per
 * op is a named row; op_select hands the core a pointer to it, and op_run
 * gets that pointer back on every call.
 */
/* clock_gettime and sysconf are POSIX; ask for them when the build did not. */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tessera/plugin.h>
#include <tessera/plugin_helper.h>

#define SAMPLE_BUFFER_ALIGNMENT 64u

typedef struct sample_plugin {
  tsr_plugin_host host;
} sample_plugin;

/* The configs, as data: one named row (the name first, as the helper's row
 * lookup wants). */
typedef struct sample_config {
  const char *name;
  const char *description;
} sample_config;

static const sample_config sample_configs[] = {
    {"elementwise-f32", "one scalar f32 pass over the elements in row-major order, synchronous"},
};
enum { SAMPLE_CONFIG_COUNT = sizeof sample_configs / sizeof sample_configs[0] };

typedef struct sample_device {
  sample_plugin *plugin;
} sample_device;

typedef struct sample_buffer {
  unsigned char *data;
  uint64_t bytes;
} sample_buffer;

typedef struct sample_queue {
  sample_device *device;
} sample_queue;

/* Work is done by the time a call returns, so an event is just the time at
 * which the queue reached it. */
typedef struct sample_event {
  struct timespec reached;
} sample_event;

/* ---- plugin lifetime and the device ---- */

static tsr_status sample_init(const tsr_host_services_v2 *host, void **plugin_out, char *reason,
                              size_t reason_capacity) {
  sample_plugin *plugin = calloc(1, sizeof *plugin);
  if (plugin == NULL) {
    snprintf(reason, reason_capacity, "sample: out of memory allocating the plugin state");
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  tsr_status status = tsr_plugin_host_init(&plugin->host, "sample", host, reason, reason_capacity);
  if (status != TSR_OK) {
    free(plugin);
    return status;
  }
  tsr_plugin_log(&plugin->host, TSR_LOG_DEBUG, "one host-memory device, synchronous queues");
  *plugin_out = plugin;
  return TSR_OK;
}

static void sample_shutdown(void *plugin) {
  free(plugin);
}

static uint32_t sample_device_count(void *plugin) {
  (void)plugin;
  return 1;
}

static uint64_t sample_host_memory_bytes(void) {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0)
    return 0;
  return (uint64_t)pages * (uint64_t)page_size;
}

static tsr_status sample_device_info(void *plugin_state, uint32_t index, tsr_device_info *info) {
  sample_plugin *plugin = plugin_state;
  if (index != 0) {
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_NOT_FOUND,
                           "device %u does not exist (there is one)", index);
  }
  /* Every field written here belongs to the first version of the struct. */
  if (info->struct_size < offsetof(tsr_device_info, device_key)) {
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_STRUCT_SIZE,
                           "tsr_device_info.struct_size = %zu is too small", info->struct_size);
  }
  info->type = TSR_DEVICE_CPU;
  snprintf(info->vendor, sizeof info->vendor, "tessera examples");
  snprintf(info->name, sizeof info->name, "tessera sample device");
  snprintf(info->arch, sizeof info->arch, "host-scalar");
  snprintf(info->physical_id, sizeof info->physical_id, "sample-host-0");
  snprintf(info->driver_version, sizeof info->driver_version, "sample 1.0");
  info->memory_bytes = sample_host_memory_bytes();
  info->compute_units = 1;
  info->dtype_mask = 1u << TSR_DTYPE_F32;
  info->op_mask = (1u << TSR_OP_SWIGLU) | (1u << TSR_OP_GELU);
  info->host_visible = 1;
  return TSR_OK;
}

static tsr_status sample_device_open(void *plugin_state, uint32_t index, void **device_out) {
  sample_plugin *plugin = plugin_state;
  if (index != 0) {
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_NOT_FOUND,
                           "device %u does not exist (there is one)", index);
  }
  sample_device *device = calloc(1, sizeof *device);
  if (device == NULL)
    return TSR_ERROR_OUT_OF_MEMORY;
  device->plugin = plugin;
  *device_out = device;
  return TSR_OK;
}

static void sample_device_close(void *device) {
  free(device);
}

/* ---- memory ---- */

static tsr_status sample_buffer_alloc(void *device_state, uint64_t bytes, void **buffer_out) {
  sample_device *device = device_state;
  /* aligned_alloc wants a multiple of the alignment; guard the round-up. */
  if (bytes == 0 || bytes > SIZE_MAX - SAMPLE_BUFFER_ALIGNMENT) {
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_BAD_SIZE, "cannot allocate %llu bytes",
                           (unsigned long long)bytes);
  }
  size_t rounded = (size_t)((bytes + SAMPLE_BUFFER_ALIGNMENT - 1) / SAMPLE_BUFFER_ALIGNMENT *
                            SAMPLE_BUFFER_ALIGNMENT);
  sample_buffer *buffer = malloc(sizeof *buffer);
  if (buffer == NULL)
    return TSR_ERROR_OUT_OF_MEMORY;
  buffer->data = aligned_alloc(SAMPLE_BUFFER_ALIGNMENT, rounded);
  if (buffer->data == NULL) {
    free(buffer);
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_OUT_OF_MEMORY,
                           "out of host memory allocating %llu bytes", (unsigned long long)bytes);
  }
  buffer->bytes = bytes;
  *buffer_out = buffer;
  return TSR_OK;
}

static void sample_buffer_free(void *device, void *buffer_state) {
  (void)device;
  sample_buffer *buffer = buffer_state;
  if (buffer == NULL)
    return;
  free(buffer->data);
  free(buffer);
}

static void *sample_buffer_host_pointer(void *device, void *buffer_state) {
  (void)device;
  return ((sample_buffer *)buffer_state)->data;
}

/* The core checks ranges before calling; a plugin still refuses what would
 * leave the buffer, since the check costs nothing. */
static int sample_range_fits(const sample_buffer *buffer, uint64_t offset, uint64_t bytes) {
  return offset <= buffer->bytes && bytes <= buffer->bytes - offset;
}

/* ---- queues and events ---- */

static tsr_status sample_queue_create(void *device_state, void **queue_out) {
  sample_queue *queue = calloc(1, sizeof *queue);
  if (queue == NULL)
    return TSR_ERROR_OUT_OF_MEMORY;
  queue->device = device_state;
  *queue_out = queue;
  return TSR_OK;
}

static void sample_queue_destroy(void *queue) {
  free(queue);
}

/* Every call has finished and reported its status before returning, so no
 * error is ever deferred to here. */
static tsr_status sample_queue_finish(void *queue) {
  (void)queue;
  return TSR_OK;
}

static tsr_status sample_buffer_write(void *queue_state, void *buffer_state, uint64_t offset,
                                      const void *src, uint64_t bytes) {
  sample_queue *queue = queue_state;
  sample_buffer *buffer = buffer_state;
  if (!sample_range_fits(buffer, offset, bytes)) {
    return tsr_plugin_fail(&queue->device->plugin->host, TSR_ERROR_OUT_OF_BOUNDS,
                           "write of %llu bytes at %llu leaves the buffer",
                           (unsigned long long)bytes, (unsigned long long)offset);
  }
  memcpy(buffer->data + offset, src, (size_t)bytes);
  return TSR_OK;
}

static tsr_status sample_buffer_read(void *queue_state, void *buffer_state, uint64_t offset,
                                     void *dst, uint64_t bytes) {
  sample_queue *queue = queue_state;
  sample_buffer *buffer = buffer_state;
  if (!sample_range_fits(buffer, offset, bytes)) {
    return tsr_plugin_fail(&queue->device->plugin->host, TSR_ERROR_OUT_OF_BOUNDS,
                           "read of %llu bytes at %llu leaves the buffer",
                           (unsigned long long)bytes, (unsigned long long)offset);
  }
  memcpy(dst, buffer->data + offset, (size_t)bytes);
  return TSR_OK;
}

static tsr_status sample_buffer_copy(void *queue_state, void *src_state, uint64_t src_offset,
                                     void *dst_state, uint64_t dst_offset, uint64_t bytes) {
  sample_queue *queue = queue_state;
  sample_buffer *src = src_state;
  sample_buffer *dst = dst_state;
  if (!sample_range_fits(src, src_offset, bytes) || !sample_range_fits(dst, dst_offset, bytes)) {
    return tsr_plugin_fail(&queue->device->plugin->host, TSR_ERROR_OUT_OF_BOUNDS,
                           "copy of %llu bytes leaves a buffer", (unsigned long long)bytes);
  }
  memmove(dst->data + dst_offset, src->data + src_offset, (size_t)bytes);
  return TSR_OK;
}

static tsr_status sample_event_record(void *queue, void **event_out) {
  (void)queue;
  sample_event *event = malloc(sizeof *event);
  if (event == NULL)
    return TSR_ERROR_OUT_OF_MEMORY;
  clock_gettime(CLOCK_MONOTONIC, &event->reached);
  *event_out = event;
  return TSR_OK;
}

static tsr_status sample_event_wait(void *event) {
  (void)event; /* reached when it was recorded */
  return TSR_OK;
}

static tsr_status sample_event_elapsed_ms(void *start_state, void *end_state, double *ms) {
  const sample_event *start = start_state;
  const sample_event *end = end_state;
  *ms = (double)(end->reached.tv_sec - start->reached.tv_sec) * 1e3 +
        (double)(end->reached.tv_nsec - start->reached.tv_nsec) * 1e-6;
  return TSR_OK;
}

static void sample_event_destroy(void *event) {
  free(event);
}

/* ---- ops ---- */

static tsr_status sample_require_f32(const sample_plugin *plugin, tsr_op op, const char *tensor,
                                     const tsr_plugin_tensor *t) {
  if (t->dtype == TSR_DTYPE_F32)
    return TSR_OK;
  return tsr_plugin_fail(&plugin->host, TSR_ERROR_UNSUPPORTED, "%s runs in f32 only, but %s is %s",
                         tsr_plugin_op_name(op), tensor, tsr_plugin_dtype_name(t->dtype));
}

static tsr_status sample_op_supported(void *device_state, tsr_op op, const void *args) {
  const sample_plugin *plugin = ((sample_device *)device_state)->plugin;
  tsr_status status;
  if (op == TSR_OP_SWIGLU) {
    const tsr_swiglu_args *swiglu = args;
    if ((status = sample_require_f32(plugin, op, "gate", &swiglu->gate)) != TSR_OK ||
        (status = sample_require_f32(plugin, op, "up", &swiglu->up)) != TSR_OK ||
        (status = sample_require_f32(plugin, op, "y", &swiglu->y)) != TSR_OK)
      return status;
    return TSR_OK;
  }
  if (op == TSR_OP_GELU) {
    const tsr_gelu_args *gelu = args;
    if ((status = sample_require_f32(plugin, op, "x", &gelu->x)) != TSR_OK ||
        (status = sample_require_f32(plugin, op, "y", &gelu->y)) != TSR_OK)
      return status;
    if (gelu->approximate != TSR_GELU_ERF && gelu->approximate != TSR_GELU_TANH) {
      return tsr_plugin_fail(&plugin->host, TSR_ERROR_UNSUPPORTED,
                             "gelu approximation %d is unknown", (int)gelu->approximate);
    }
    return TSR_OK;
  }
  return tsr_plugin_fail(&plugin->host, TSR_ERROR_UNSUPPORTED,
                         "the sample device runs only swiglu and gelu, not %s",
                         tsr_plugin_op_name(op));
}

static tsr_status sample_list_variants(void *device, tsr_op op, const void *args,
                                       tsr_plugin_variant_list *out) {
  tsr_status status = sample_op_supported(device, op, args);
  if (status != TSR_OK)
    return status;
  for (int i = 0; i < SAMPLE_CONFIG_COUNT; i++)
    tsr_plugin_variants_add(out, sample_configs[i].name, "%s", sample_configs[i].description);
  out->heuristic = 0;
  snprintf(out->reason, sizeof out->reason, "the sample plugin has one variant per op");
  return TSR_OK;
}

static tsr_status sample_op_variants(void *device, tsr_op op, const void *args,
                                     tsr_plugin_variant_list *out) {
  return tsr_plugin_variants_serve(&((sample_device *)device)->plugin->host, device, op, args, out,
                                   sample_list_variants);
}

/* Chooses once per problem signature (the core caches the answer). */
static tsr_status sample_op_select(void *device_state, tsr_op op, const void *args,
                                   const char *variant, tsr_plugin_selection *out) {
  sample_device *device = device_state;
  tsr_status status = sample_op_supported(device, op, args);
  if (status != TSR_OK)
    return status;
  const void *row = variant ? tsr_plugin_row_find(sample_configs, SAMPLE_CONFIG_COUNT,
                                                  sizeof sample_configs[0], variant)
                            : &sample_configs[0];
  if (!row)
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_NOT_FOUND,
                           "no %s variant \"%s\" (the only one is \"%s\")", tsr_plugin_op_name(op),
                           variant, sample_configs[0].name);
  return tsr_plugin_select_row(out, row);
}

static float *sample_element(const tsr_plugin_tensor *t, const int64_t *index) {
  float *base = (float *)(((sample_buffer *)t->buffer)->data + t->offset);
  return base + tsr_plugin_element_offset(t, index);
}

static float sample_gelu(float x, int32_t approximate) {
  if (approximate == TSR_GELU_TANH) {
    const float sqrt_2_over_pi = 0.7978845608028654f;
    return 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * (x + 0.044715f * x * x * x)));
  }
  return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
}

static float sample_silu(float x) {
  return x / (1.0f + expf(-x));
}

/* Walks y's index space in row-major order; inputs follow their own strides
 * (a stride of 0 broadcasts). `second` is NULL for a unary op. */
static void sample_elementwise(tsr_op op, const tsr_plugin_tensor *first,
                               const tsr_plugin_tensor *second, const tsr_plugin_tensor *y,
                               int32_t approximate) {
  int64_t index[TSR_MAX_RANK] = {0};
  int64_t total = 1;
  for (int32_t d = 0; d < y->rank; d++)
    total *= y->shape[d];
  for (int64_t n = 0; n < total; n++) {
    float x = *sample_element(first, index);
    float result = op == TSR_OP_SWIGLU ? sample_silu(x) * *sample_element(second, index)
                                       : sample_gelu(x, approximate);
    *sample_element(y, index) = result;
    for (int32_t d = y->rank - 1; d >= 0; d--) {
      if (++index[d] < y->shape[d])
        break;
      index[d] = 0;
    }
  }
}

/* The steady-state path: the config is the row op_select chose. */
static tsr_status sample_op_run(void *queue_state, tsr_op op, const void *args,
                                const void *config) {
  sample_queue *queue = queue_state;
  if (op != TSR_OP_SWIGLU && op != TSR_OP_GELU)
    return tsr_plugin_fail(&queue->device->plugin->host, TSR_ERROR_UNSUPPORTED,
                           "the sample device runs only swiglu and gelu, not %s",
                           tsr_plugin_op_name(op));
  (void)config; /* one config: nothing in it changes how the op runs */
  if (op == TSR_OP_SWIGLU) {
    const tsr_swiglu_args *swiglu = args;
    sample_elementwise(op, &swiglu->gate, &swiglu->up, &swiglu->y, 0);
  } else {
    const tsr_gelu_args *gelu = args;
    sample_elementwise(op, &gelu->x, NULL, &gelu->y, gelu->approximate);
  }
  return TSR_OK;
}

/* ---- the ABI ---- */

static const tsr_plugin_v2 sample_table = {
    .struct_size = sizeof(tsr_plugin_v2),
    .abi_version = 2,
    .name = "sample",
    .version = "1.0",
    .init = sample_init,
    .shutdown = sample_shutdown,
    .device_count = sample_device_count,
    .device_info = sample_device_info,
    .device_open = sample_device_open,
    .device_close = sample_device_close,
    .buffer_alloc = sample_buffer_alloc,
    .buffer_free = sample_buffer_free,
    .buffer_host_pointer = sample_buffer_host_pointer,
    .queue_create = sample_queue_create,
    .queue_destroy = sample_queue_destroy,
    .queue_finish = sample_queue_finish,
    .buffer_write = sample_buffer_write,
    .buffer_read = sample_buffer_read,
    .buffer_copy = sample_buffer_copy,
    .event_record = sample_event_record,
    .event_wait = sample_event_wait,
    .event_elapsed_ms = sample_event_elapsed_ms,
    .event_destroy = sample_event_destroy,
    .op_supported = sample_op_supported,
    .op_variants = sample_op_variants,
    .op_select = sample_op_select,
    .op_run = sample_op_run,
    .buffer_wrap = NULL, /* wraps no external memory */
};

/* tsr_plugin_negotiate and tsr_plugin_entry, for ABI 2 */
TSR_PLUGIN_EXPORT_V2(sample_table)
