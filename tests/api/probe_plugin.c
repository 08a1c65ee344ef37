/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A test plugin (ABI 2) that shows what the core's op path asks: one
 * host-memory device named "probe" running f32 gelu with two variants,
 * "probe-a" (the heuristic's) and "probe-b", whose results differ on purpose
 * (b adds 1), so a test sees which config ran. It counts op_select calls and
 * keeps the name of the config op_run was given; test_op_cache.c reads both
 * through the exported probe_stats (dlopen of the same library returns the
 * core's instance). Built again with PROBE_WITHOUT_OP_SELECT: an ABI 2 table
 * without op_select, which the core must skip.
 *
 * Interop (test_dlpack.c): it wraps host memory (buffer_wrap), gives buffer
 * addresses (buffer_export) and wraps "streams" (queue_wrap), recording what
 * it was asked. Built with PROBE_AS_CUDA it is a stand-in "cuda" plugin whose
 * device has CUDA ordinal 3: its memory is host memory the core is told is
 * CUDA device memory, and it wraps only CUDA streams (a "stream" is any
 * number; ops on a wrapped queue record it). Built with PROBE_OLD_TABLE it is
 * "oldprobe", whose table has the size of ABI 2's first release: the core
 * must load it and never read the interop entries past that size (they are
 * still filled in here, so reading them would show).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/plugin.h>
#include <tessera/plugin_helper.h>

typedef struct probe_config {
  const char *name;
  float add; /* added to every gelu result: what tells the configs apart */
} probe_config;

static const probe_config probe_configs[] = {{"probe-a", 0.0f}, {"probe-b", 1.0f}};
enum { PROBE_CONFIGS = sizeof probe_configs / sizeof probe_configs[0] };

__attribute__((visibility("default"))) struct probe_stats {
  int selects;         /* op_select calls */
  int runs;            /* op_run calls */
  char last_run[16];   /* name of the config the last op_run got */
  int variants_calls;  /* op_variants calls */
  int supported_calls; /* op_supported calls */
  /* interop */
  int wraps;                /* buffer_wrap calls that succeeded */
  int32_t last_wrap_kind;   /* tsr_external_kind of the last buffer_wrap */
  uint64_t last_wrap_bytes; /* its byte count */
  int frees;                /* buffer_free calls (wrapped or allocated) */
  int no_address;           /* set by a test: buffer_export and host pointers fail */
  uint64_t last_stream;     /* stream of the last queue_wrap */
  uint64_t last_run_stream; /* stream of the queue the last op ran on (0: own queue) */
  uint64_t last_finish_stream;
  int wrapped_released; /* queue_destroy calls on wrapped queues */
} probe_stats;

#if defined(PROBE_OLD_TABLE) /* a table of ABI 2's first release: no interop entries */
#define PROBE_NAME "oldprobe"
#define PROBE_MEMORY_KIND TSR_EXTERNAL_HOST_POINTER
#define PROBE_STREAM_KIND TSR_EXTERNAL_CUDA_STREAM
#define PROBE_TABLE_SIZE TSR_PLUGIN_V2_MIN_SIZE
#elif defined(PROBE_AS_CUDA)
#define PROBE_NAME "cuda"
#define PROBE_MEMORY_KIND TSR_EXTERNAL_CUDA_DEVICE_POINTER
#define PROBE_STREAM_KIND TSR_EXTERNAL_CUDA_STREAM
#else
#define PROBE_NAME "probe"
#define PROBE_MEMORY_KIND TSR_EXTERNAL_HOST_POINTER
#define PROBE_STREAM_KIND TSR_EXTERNAL_CUDA_STREAM
#endif
#ifndef PROBE_TABLE_SIZE
#define PROBE_TABLE_SIZE sizeof(tsr_plugin_v2)
#endif

typedef struct probe_plugin {
  tsr_plugin_host host;
} probe_plugin;

typedef struct probe_buffer {
  unsigned char *data;
  uint64_t bytes;
  int wrapped; /* data is the caller's */
} probe_buffer;

typedef struct probe_queue {
  int wrapped;
  uint64_t stream;
} probe_queue;

static tsr_status probe_init(const tsr_host_services_v2 *host, void **out, char *reason,
                             size_t capacity) {
  probe_plugin *plugin = calloc(1, sizeof *plugin);
  if (!plugin)
    return TSR_ERROR_OUT_OF_MEMORY;
  tsr_status status = tsr_plugin_host_init(&plugin->host, PROBE_NAME, host, reason, capacity);
  if (status != TSR_OK) {
    free(plugin);
    return status;
  }
  *out = plugin;
  return TSR_OK;
}

static void probe_shutdown(void *plugin) {
  free(plugin);
}

static uint32_t probe_device_count(void *plugin) {
  (void)plugin;
  return 1;
}

static tsr_status probe_device_info(void *plugin, uint32_t index, tsr_device_info *info) {
  if (index != 0)
    return tsr_plugin_fail(&((probe_plugin *)plugin)->host, TSR_ERROR_NOT_FOUND, "no device %u",
                           index);
  info->type = TSR_DEVICE_CPU;
  strcpy(info->vendor, "tessera tests");
  strcpy(info->name, "op path probe");
  strcpy(info->arch, "host");
  info->host_visible = 1;
  info->compute_units = 1;
  info->dtype_mask = 1u << TSR_DTYPE_F32;
  info->op_mask = 1u << TSR_OP_GELU;
#ifdef PROBE_AS_CUDA
  /* Not its index (0): the core must match DLPack ids against this. */
  if (info->struct_size >= offsetof(tsr_device_info, native_ordinal) + sizeof(int32_t))
    info->native_ordinal = 3;
#endif
  return TSR_OK;
}

static tsr_status probe_device_open(void *plugin, uint32_t index, void **device) {
  if (index != 0)
    return tsr_plugin_fail(&((probe_plugin *)plugin)->host, TSR_ERROR_NOT_FOUND, "no device %u",
                           index);
  *device = plugin;
  return TSR_OK;
}

static void probe_device_close(void *device) {
  (void)device;
}

static tsr_status probe_buffer_alloc(void *device, uint64_t bytes, void **out) {
  probe_buffer *buffer = calloc(1, sizeof *buffer);
  if (buffer)
    buffer->data = aligned_alloc(256, (bytes + 255) & ~(uint64_t)255);
  if (!buffer || !buffer->data) {
    free(buffer);
    return tsr_plugin_fail(&((probe_plugin *)device)->host, TSR_ERROR_OUT_OF_MEMORY,
                           "no memory for %llu bytes", (unsigned long long)bytes);
  }
  buffer->bytes = bytes;
  *out = buffer;
  return TSR_OK;
}

static void probe_buffer_free(void *device, void *handle) {
  (void)device;
  probe_buffer *buffer = handle;
  probe_stats.frees++;
  if (buffer && !buffer->wrapped)
    free(buffer->data);
  free(buffer);
}

static void *probe_buffer_host_pointer(void *device, void *handle) {
  (void)device;
#ifdef PROBE_AS_CUDA
  (void)handle;
  return NULL; /* "device memory" */
#else
  return probe_stats.no_address ? NULL : ((probe_buffer *)handle)->data;
#endif
}

static tsr_status probe_buffer_wrap(void *device, int32_t kind, void *pointer, uint64_t bytes,
                                    void **out) {
  if (kind != PROBE_MEMORY_KIND)
    return tsr_plugin_fail(&((probe_plugin *)device)->host, TSR_ERROR_UNSUPPORTED,
                           "cannot wrap memory of kind %d", (int)kind);
  probe_buffer *buffer = calloc(1, sizeof *buffer);
  if (!buffer)
    return TSR_ERROR_OUT_OF_MEMORY;
  buffer->data = pointer;
  buffer->bytes = bytes;
  buffer->wrapped = 1;
  probe_stats.wraps++;
  probe_stats.last_wrap_kind = kind;
  probe_stats.last_wrap_bytes = bytes;
  *out = buffer;
  return TSR_OK;
}

static tsr_status probe_buffer_export(void *handle, int32_t *kind, uint64_t *address) {
  if (probe_stats.no_address)
    return TSR_ERROR_UNSUPPORTED;
  *kind = PROBE_MEMORY_KIND;
  *address = (uint64_t)(uintptr_t)((probe_buffer *)handle)->data;
  return TSR_OK;
}

static tsr_status probe_queue_create(void *device, void **queue) {
  (void)device;
  probe_queue *q = calloc(1, sizeof *q);
  if (!q)
    return TSR_ERROR_OUT_OF_MEMORY;
  *queue = q;
  return TSR_OK;
}

static tsr_status probe_queue_wrap(void *device, int32_t kind, uint64_t stream, void **queue) {
  if (kind != PROBE_STREAM_KIND)
    return tsr_plugin_fail(&((probe_plugin *)device)->host, TSR_ERROR_UNSUPPORTED,
                           "streams of kind %d are not this device's", (int)kind);
  probe_queue *q = calloc(1, sizeof *q);
  if (!q)
    return TSR_ERROR_OUT_OF_MEMORY;
  q->wrapped = 1;
  q->stream = stream;
  probe_stats.last_stream = stream;
  *queue = q;
  return TSR_OK;
}

static void probe_queue_destroy(void *queue) {
  probe_queue *q = queue;
  if (q && q->wrapped)
    probe_stats.wrapped_released++;
  free(q);
}

static tsr_status probe_queue_finish(void *queue) {
  probe_stats.last_finish_stream = ((probe_queue *)queue)->stream;
  return TSR_OK;
}

static tsr_status probe_buffer_write(void *queue, void *handle, uint64_t offset, const void *src,
                                     uint64_t bytes) {
  (void)queue;
  memcpy(((probe_buffer *)handle)->data + offset, src, bytes);
  return TSR_OK;
}

static tsr_status probe_buffer_read(void *queue, void *handle, uint64_t offset, void *dst,
                                    uint64_t bytes) {
  (void)queue;
  memcpy(dst, ((probe_buffer *)handle)->data + offset, bytes);
  return TSR_OK;
}

static tsr_status probe_op_supported(void *device, tsr_op op, const void *args) {
  probe_stats.supported_calls++;
  const probe_plugin *plugin = device;
  if (op != TSR_OP_GELU)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_UNSUPPORTED, "%s is not run here",
                           tsr_plugin_op_name(op));
  const tsr_gelu_args *gelu = args;
  if (gelu->x.dtype != TSR_DTYPE_F32 || gelu->y.dtype != TSR_DTYPE_F32)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_UNSUPPORTED, "gelu runs in f32 only");
  return TSR_OK;
}

static tsr_status probe_list(void *device, tsr_op op, const void *args,
                             tsr_plugin_variant_list *out) {
  tsr_status status = probe_op_supported(device, op, args);
  if (status != TSR_OK)
    return status;
  for (int i = 0; i < PROBE_CONFIGS; i++)
    tsr_plugin_variants_add(out, probe_configs[i].name, "adds %g", (double)probe_configs[i].add);
  out->heuristic = 0;
  strcpy(out->reason, "the probe's first variant");
  return TSR_OK;
}

static tsr_status probe_op_variants(void *device, tsr_op op, const void *args,
                                    tsr_plugin_variant_list *out) {
  probe_stats.variants_calls++;
  return tsr_plugin_variants_serve(&((probe_plugin *)device)->host, device, op, args, out,
                                   probe_list);
}

__attribute__((unused)) static tsr_status probe_op_select(void *device, tsr_op op, const void *args,
                                                          const char *variant,
                                                          tsr_plugin_selection *out) {
  probe_stats.selects++;
  tsr_status status = probe_op_supported(device, op, args);
  if (status != TSR_OK)
    return status;
  const void *row =
      variant ? tsr_plugin_row_find(probe_configs, PROBE_CONFIGS, sizeof probe_configs[0], variant)
              : &probe_configs[0];
  if (!row)
    return tsr_plugin_fail(&((probe_plugin *)device)->host, TSR_ERROR_NOT_FOUND, "no variant '%s'",
                           variant);
  return tsr_plugin_select_row(out, row);
}

static tsr_status probe_op_run(void *queue, tsr_op op, const void *args, const void *config) {
  if (op != TSR_OP_GELU || !config)
    return TSR_ERROR_UNSUPPORTED;
  const probe_config *c = config;
  probe_stats.runs++;
  probe_stats.last_run_stream = ((probe_queue *)queue)->stream;
  strncpy(probe_stats.last_run, c->name, sizeof probe_stats.last_run - 1);
  const tsr_gelu_args *gelu = args;
  const probe_buffer *x = gelu->x.buffer, *y = gelu->y.buffer;
  int64_t count = 1;
  for (int32_t d = 0; d < gelu->y.rank; d++)
    count *= gelu->y.shape[d];
  /* Contiguous tensors only: the test gives no others. */
  const float *in = (const float *)(x->data + gelu->x.offset);
  float *result = (float *)(y->data + gelu->y.offset);
  for (int64_t i = 0; i < count; i++)
    result[i] = 0.5f * in[i] * (1.0f + erff(in[i] * 0.70710678f)) + c->add;
  return TSR_OK;
}

static const tsr_plugin_v2 probe_table = {
    .struct_size = PROBE_TABLE_SIZE,
    .abi_version = 2,
    .name = PROBE_NAME,
    .version = "1",
    .init = probe_init,
    .shutdown = probe_shutdown,
    .device_count = probe_device_count,
    .device_info = probe_device_info,
    .device_open = probe_device_open,
    .device_close = probe_device_close,
    .buffer_alloc = probe_buffer_alloc,
    .buffer_free = probe_buffer_free,
    .buffer_host_pointer = probe_buffer_host_pointer,
    .queue_create = probe_queue_create,
    .queue_destroy = probe_queue_destroy,
    .queue_finish = probe_queue_finish,
    .buffer_write = probe_buffer_write,
    .buffer_read = probe_buffer_read,
    .op_supported = probe_op_supported,
    .op_variants = probe_op_variants,
#ifndef PROBE_WITHOUT_OP_SELECT /* a table that breaks rule R4 for ABI 2 */
    .op_select = probe_op_select,
#endif
    .op_run = probe_op_run,
    .buffer_wrap = probe_buffer_wrap,
    .buffer_export = probe_buffer_export,
    .queue_wrap = probe_queue_wrap,
};

TSR_PLUGIN_EXPORT_V2(probe_table)
