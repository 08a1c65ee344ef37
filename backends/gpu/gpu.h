/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU layer that the CUDA plugin and the HIP plugin share: devices,
 * buffers, queues, events and every op's host logic, written over the
 * driver table (gpu_driver.h) and the vendor's description (configs.h). A
 * plugin supplies the driver table, its vendor description (its own kernels
 * and tables) and the entries that know its runtime (init, enumeration,
 * device_info, device contexts); the rest of its ABI 2 table points here.
 * Not installed. */
#ifndef TESSERA_GPU_H
#define TESSERA_GPU_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "configs.h"
#include "gpu_driver.h"
#include "tessera/plugin_helper.h"

/* What init learned about one GPU. */
typedef struct gpu_device_props {
  int handle;  /* the vendor's device handle (CUdevice) */
  int ordinal; /* the vendor runtime's device number (DLPack's device_id) */
  char name[256];
  char uuid[64];
  int arch_major, arch_minor;
  int multiprocessors;
  int l2_bytes;
  int smem_per_block_optin;
  int smem_per_multiprocessor;
  int clock_khz, memory_clock_khz, bus_width_bits;
  int pci_domain, pci_bus, pci_device;
  size_t memory_bytes;
} gpu_device_props;

typedef struct gpu_plugin {
  tsr_plugin_host host; /* log, fail: sentences start with the plugin's name */
  gpu_driver driver;    /* filled by the vendor; library loaded while devices exist */
  gpu_catalog catalog;
  int device_count;
  gpu_device_props *devices;
} gpu_plugin;

/* Host memory this plugin registered with the driver for wrapped buffers
 * (gpu_device's list): buffers inside one range share it, and the last one
 * freed unregisters it. */
typedef struct gpu_host_registration {
  struct gpu_host_registration *next;
  char *start;
  size_t bytes;
  int users;
} gpu_host_registration;

typedef struct gpu_device {
  gpu_plugin *plugin;
  const gpu_device_props *props;
  void *context; /* the vendor's device context (device_enter's argument) */
  void *module;
  int arch;               /* index of the vendor's arch table */
  int dynamic_smem_limit; /* what kernels with dynamic_smem -1 may use */
  gpu_kernel *kernels;    /* per kernel index of the catalogue */
  /* op_select's answers, prepared at device_open: [config][dtype slot] */
  gpu_gemm_prepared gemm[GPU_MAX_GEMM_CONFIGS][GPU_DTYPE_SLOTS];
  gpu_attention_prepared attention[GPU_MAX_ATTENTION_CONFIGS][GPU_DTYPE_SLOTS];
  gpu_rows_prepared rows[GPU_ROW_OPS][3][GPU_DTYPE_SLOTS];
  gpu_elementwise_prepared elementwise[GPU_ELEMENTWISE_OPS][GPU_DTYPE_SLOTS];
  const gpu_kernel *gemv[2][GPU_DTYPE_SLOTS][3], *splitk, *pack[2];
  /* decode attention (configs.h's decode table) and kv_append */
  const gpu_kernel *decode[GPU_DTYPE_SLOTS][GPU_DECODE_DIMS][GPU_DECODE_TILES];
  const gpu_kernel *decode_combine[GPU_DTYPE_SLOTS];
  const gpu_kernel *decode_mma[GPU_DTYPE_SLOTS][GPU_DECODE_DIMS]; /* NULL: none */
  gpu_elementwise_prepared kv_append[GPU_DTYPE_SLOTS];
  pthread_mutex_t lock; /* guards the queue list and the registrations */
  struct gpu_queue *queues;
  gpu_host_registration *registrations;
  /* Peer access (memory.c): this opening's number, unique in the process,
   * and per device index of the plugin the number of the opening of it
   * that peer access was set up with (0: none yet). A peer closed and
   * opened again (a new context) gets a new number, so it is set up again. */
  uint64_t serial;
  uint64_t *peer_serials;
} gpu_device;

typedef struct gpu_buffer {
  gpu_address pointer; /* device address (of host memory too, when mapped) */
  uint64_t bytes;
  bool wrapped; /* the application's memory: never freed here */
  int32_t kind; /* tsr_external_kind: the vendor's device pointers, or host memory */
  void *host;   /* wrapped host memory: the application's address */
  /* the registration that maps `host` when this plugin made it (released at
   * buffer_free); NULL when the application registered the memory itself */
  gpu_host_registration *registration;
} gpu_buffer;

typedef struct gpu_queue {
  gpu_device *device;
  struct gpu_queue *next_in_device;
  void *stream;
  bool stream_wrapped; /* the application's stream (queue_wrap): never destroyed here */
  /* TSR_PLUGIN_FAULT_COUNT int32 words on the device, one per fault kind
   * (plugin.h): the smallest index at fault (an atomic min by the kernels;
   * TSR_PLUGIN_FAULT_NONE: none), read and reset by queue_finish after an op
   * that can fault (armed). */
  gpu_address status;
  bool status_armed;
  tsr_plugin_fault_context fault_context; /* the last cross_entropy's vocab and ignore_index */
  /* Scratch: split-K counters and partials, packed operands; grown on demand. */
  gpu_address workspace;
  size_t workspace_bytes;
  /* The plain GEMM's parameter block (ops_gemm.c): group arrays always zero. */
  tsr_gpu_gemm_params gemm_params;
  /* Gates (queue.c): the host word the stream waits on; NULL until the
   * first gate. */
  struct gpu_gate_opener *gates;
} gpu_queue;

typedef struct gpu_event {
  gpu_device *device;
  void *event;
} gpu_event;

static inline gpu_address gpu_tensor_address(const tsr_plugin_tensor *t) {
  return ((const gpu_buffer *)t->buffer)->pointer + t->offset;
}

/* `args` as this header knows it: itself, or (an older core's shorter
 * struct) its copy in `copy` with the fields it lacks zeroed. */
static inline const void *gpu_args_view(tsr_op op, const void *args, tsr_plugin_any_args *copy) {
  if (*(const uint32_t *)args >= tsr_plugin_args_size(op) || !tsr_plugin_args_copy(op, args, copy))
    return args;
  return copy;
}

/* ---- errors and the current device (device.c) ---- */

/* Sets "<plugin>: <what>: <driver's description>" and returns
 * TSR_ERROR_OUT_OF_MEMORY for an allocation failure, else TSR_ERROR_BACKEND. */
tsr_status gpu_fail(const gpu_plugin *plugin, int error, const char *what);
/* Makes the device's context current on the calling thread. */
tsr_status gpu_enter(const gpu_device *device);

/* ---- plugin and devices (device.c) ---- */

/* After the vendor filled host and driver: the catalogue. */
tsr_status gpu_plugin_init(gpu_plugin *plugin, const gpu_vendor *vendor, char *reason,
                           size_t reason_capacity);
void gpu_plugin_shutdown(gpu_plugin *plugin);
/* "no devices: <why>" at debug level and in `reason`; TSR_OK (a plugin
 * without devices still loads). */
tsr_status gpu_no_devices(const gpu_plugin *plugin, char *reason, size_t capacity, const char *why);
/* TSR_ERROR_NOT_FOUND naming a device index past the count. */
tsr_status gpu_no_such_device(const gpu_plugin *plugin, uint32_t index);
/* The ABI's device_count for a plugin object that starts with gpu_plugin. */
uint32_t gpu_device_count(void *plugin);
/* The attributes of device props->handle (name, uuid and memory are the
 * vendor's to fill). */
void gpu_props_read(const gpu_plugin *plugin, gpu_device_props *props);
/* A device on `context` (current on this thread): loads the vendor's image,
 * resolves every kernel, prepares every config. */
tsr_status gpu_device_create(gpu_plugin *plugin, uint32_t index, void *context, gpu_device **out);
/* Unloads the module and frees the device (its context is the vendor's). */
void gpu_device_destroy(gpu_device *device);

/* ---- ABI entries over the driver table (memory.c, queue.c, select.c, ops.c) ---- */

tsr_status gpu_buffer_alloc(void *device, uint64_t bytes, void **buffer);
void gpu_buffer_free(void *device, void *buffer);
tsr_status gpu_buffer_wrap(void *device, int32_t kind, void *handle, uint64_t bytes, void **buffer);
tsr_status gpu_buffer_export(void *buffer, int32_t *kind, uint64_t *address);
tsr_status gpu_buffer_write(void *queue, void *buffer, uint64_t offset, const void *src,
                            uint64_t bytes);
tsr_status gpu_buffer_read(void *queue, void *buffer, uint64_t offset, void *dst, uint64_t bytes);
tsr_status gpu_buffer_copy(void *queue, void *src, uint64_t src_offset, void *dst,
                           uint64_t dst_offset, uint64_t bytes);
tsr_status gpu_buffer_copy_peer(void *queue, void *src_device, void *src, uint64_t src_offset,
                                void *dst_device, void *dst, uint64_t dst_offset, uint64_t bytes);
tsr_status gpu_queue_create(void *device, void **queue);
tsr_status gpu_queue_wrap(void *device, int32_t kind, uint64_t stream, void **queue);
void gpu_queue_destroy(void *queue);
tsr_status gpu_queue_finish(void *queue);
tsr_status gpu_event_record(void *queue, void **event);
tsr_status gpu_event_wait(void *event);
tsr_status gpu_event_elapsed_ms(void *start, void *end, double *ms);
void gpu_event_destroy(void *event);
tsr_status gpu_queue_wait_event(void *queue, void *event);
tsr_status gpu_queue_gate(void *queue, void **gate);
void gpu_gate_open(void *gate);
tsr_status gpu_op_supported(void *device, tsr_op op, const void *args);
tsr_status gpu_op_variants(void *device, tsr_op op, const void *args, tsr_plugin_variant_list *out);
tsr_status gpu_op_select(void *device, tsr_op op, const void *args, const char *variant,
                         tsr_plugin_selection *out);
tsr_status gpu_op_run(void *queue, tsr_op op, const void *args, const void *config);

/* The ABI 2 table entries a GPU plugin takes from this layer, for its
 * tsr_plugin_v2 initialiser (after its own init ... device_close).
 * event_flush is NULL: an event is submitted when recorded, and event_wait
 * (cuEventSynchronize / hipEventSynchronize) touches no queue state, so it
 * may run on any thread without the queue's lock. */
#define GPU_LAYER_PLUGIN_ENTRIES                                                                   \
  .buffer_alloc = gpu_buffer_alloc, .buffer_free = gpu_buffer_free, .buffer_host_pointer = NULL,   \
  .queue_create = gpu_queue_create, .queue_destroy = gpu_queue_destroy,                            \
  .queue_finish = gpu_queue_finish, .buffer_write = gpu_buffer_write,                              \
  .buffer_read = gpu_buffer_read, .buffer_copy = gpu_buffer_copy,                                  \
  .event_record = gpu_event_record, .event_wait = gpu_event_wait,                                  \
  .event_elapsed_ms = gpu_event_elapsed_ms, .event_destroy = gpu_event_destroy,                    \
  .buffer_wrap = gpu_buffer_wrap, .op_supported = gpu_op_supported,                                \
  .op_variants = gpu_op_variants, .op_select = gpu_op_select, .op_run = gpu_op_run,                \
  .buffer_export = gpu_buffer_export, .queue_wrap = gpu_queue_wrap,                                \
  .queue_wait_event = gpu_queue_wait_event, .event_flush = NULL, .queue_gate = gpu_queue_gate,     \
  .gate_open = gpu_gate_open, .buffer_copy_peer = gpu_buffer_copy_peer

#endif /* TESSERA_GPU_H */
