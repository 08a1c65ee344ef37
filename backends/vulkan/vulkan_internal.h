/* SPDX-License-Identifier: Apache-2.0 */
/* Internal declarations of the Vulkan plugin, shared by its files (plugin.c,
 * instance.c, device.c, memory.c, queue.c, pipeline.c, spirv_rewrite.c,
 * configs.c, ops.c, ops_gemm.c, ops_attention.c, ops_kv_append.c). Not installed.
 *
 * Shaders
 * -------
 * Every backends/vulkan/kernels/<stem>.comp is compiled by glslc at build time
 * (CMake globs the directory: adding a file is all it takes). A shader that
 * needs several builds lists them in lines of its own, one per build:
 *
 *     // @variant f16 -DDTYPE_F16 -DACC_F32
 *
 * which gives the SPIR-V blob "<stem>_f16" (a shader without such lines gives
 * one blob named "<stem>"). Blobs are embedded in the plugin; look one up with
 * vulkan_shader_find(), or just pass its name to vulkan_pipeline_get().
 * glslc targets Vulkan 1.2 SPIR-V (--target-env=vulkan1.2) with
 * `-I kernels/`, so shaders may #include "common.glsl" (bf16/f16 helpers,
 * subgroup reductions; see that file).
 * Note: Debian 12's glslc (glslang 11.13) knows GL_NV_cooperative_matrix but
 * not GL_KHR_cooperative_matrix; the device records both kinds of shapes.
 *
 * Binding convention
 * ------------------
 * Descriptor set 0 only; storage buffers at bindings 0..n-1 (at most
 * VULKAN_MAX_BINDINGS) in the order each shader documents in its header
 * comment; push constants at most VULKAN_PUSH_BYTES (128) bytes at offset 0,
 * visible to the compute stage. Every pipeline shares one layout with
 * VULKAN_MAX_BINDINGS push-descriptor bindings (VK_KHR_push_descriptor, which
 * the plugin requires of a device), so a shader may use any prefix of them.
 * A binding's offset must be a multiple of the device's
 * minStorageBufferOffsetAlignment: vulkan_bind_tensor() aligns the offset down
 * and returns the tensor's first element relative to the binding, which the
 * shader receives through its push constants.
 * Specialisation constants: ids 0..n-1, each 32 bits, in the order given to
 * vulkan_pipeline_get(); by convention id 0 is the workgroup size x
 * (layout(local_size_x_id = 0)), the rest are the shader's own.
 *
 * Ordering: vulkan_dispatch() records into the queue's open command buffer
 * after a full compute-to-compute memory barrier, so consecutive dispatches on
 * a queue see each other's writes; nothing else is needed between ops.
 */
#ifndef TESSERA_VULKAN_INTERNAL_H
#define TESSERA_VULKAN_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loader.h"
#include "tessera/plugin.h"
#include "tessera/plugin_helper.h"

enum {
  VULKAN_MAX_BINDINGS = 8,
  VULKAN_PUSH_BYTES = 128,
  VULKAN_MAX_SPEC_CONSTANTS = 16,
  VULKAN_MAX_COOPMAT_SHAPES = 32,
  VULKAN_UPLOAD_BYTES = 65536 /* vkCmdUpdateBuffer's limit */
};

/* Vendor ids (VkPhysicalDeviceProperties.vendorID). */
enum {
  VULKAN_VENDOR_AMD = 0x1002,
  VULKAN_VENDOR_NVIDIA = 0x10de,
  VULKAN_VENDOR_INTEL = 0x8086,
  VULKAN_VENDOR_MESA = 0x10005 /* lavapipe and other Mesa software devices */
};

/* One cooperative-matrix shape the device offers. Component types are
 * VkComponentTypeKHR values (the NV enum has the same numbers): 0 f16,
 * 1 f32, 2 f64, 3..6 s8..s64, 7..10 u8..u64. */
typedef struct vulkan_coopmat_shape {
  uint32_t m, n, k;
  uint32_t a_type, b_type, c_type, result_type;
  bool saturating;
  uint32_t scope; /* 3: subgroup */
} vulkan_coopmat_shape;

/* What init learned about one physical device. */
typedef struct vulkan_device_props {
  VkPhysicalDevice physical;
  char name[256];
  char uuid[64]; /* "GPU-xxxxxxxx-..." like CUDA's, from deviceUUID */
  char driver_name[64], driver_info[128];
  uint32_t api_version, driver_version;
  uint32_t vendor_id, device_id;
  VkPhysicalDeviceType type;
  uint64_t memory_bytes;   /* largest device-local heap */
  uint32_t compute_units;  /* when the vendor says (NVIDIA SMs, AMD CUs); else 0 */
  uint32_t queue_family;   /* a compute family */
  uint32_t timestamp_bits; /* timestampValidBits of that family; 0: no timing */
  float timestamp_period;  /* nanoseconds per tick */
  /* Limits and capabilities the shaders and tile tables care about. */
  uint32_t subgroup_size, subgroup_min, subgroup_max; /* min/max from size control */
  bool subgroup_arithmetic;                           /* subgroupAdd etc. in compute */
  bool subgroup_shuffle_vote;   /* subgroupShuffleXor and subgroupAny in compute */
  bool subgroup_size_control;   /* requiredSubgroupSize usable */
  uint32_t shared_memory_bytes; /* maxComputeSharedMemorySize */
  uint32_t max_workgroup_invocations;
  uint32_t max_workgroup_count[3];
  uint64_t max_storage_range; /* maxStorageBufferRange */
  uint64_t storage_alignment; /* minStorageBufferOffsetAlignment */
  uint64_t max_allocation;    /* maxMemoryAllocationSize */
  bool shader_float16;        /* shaderFloat16 */
  bool storage_16bit;         /* storageBuffer16BitAccess */
  bool shader_int16, shader_int64;
  /* VK_EXT_external_memory_host (tsr_buffer_wrap_host) and the alignment
   * an imported host range must have (minImportedHostPointerAlignment) */
  bool external_memory_host;
  uint64_t host_import_alignment;
  bool coopmat_khr, coopmat_nv; /* VK_KHR_ / VK_NV_cooperative_matrix enabled */
  uint32_t coopmat_khr_count, coopmat_nv_count;
  vulkan_coopmat_shape coopmat_khr_shapes[VULKAN_MAX_COOPMAT_SHAPES];
  vulkan_coopmat_shape coopmat_nv_shapes[VULKAN_MAX_COOPMAT_SHAPES];
} vulkan_device_props;

typedef struct vulkan_plugin {
  tsr_plugin_host host; /* tsr_plugin_log, tsr_plugin_fail ("vulkan: ..."), tsr_plugin_env */
  vulkan_loader loader; /* library NULL: no loader, no devices */
  VkInstance instance;
  size_t objects_before_instance;     /* shared objects loaded before it (loader.h) */
  VkDebugUtilsMessengerEXT messenger; /* TESSERA_VULKAN_VALIDATION=1 */
  uint32_t device_count;
  vulkan_device_props *devices;
} vulkan_plugin;

/* A block of device memory with one VkBuffer spanning it; tensors are
 * sub-allocated from it (memory.c). */
typedef struct vulkan_block vulkan_block;

typedef struct vulkan_buffer {
  vulkan_block *block; /* NULL for wrapped host memory */
  VkBuffer handle;     /* the block's buffer, or the one over the imported range */
  uint64_t offset;     /* of this allocation (or of the wrapped pointer) in that buffer */
  uint64_t bytes;
  void *mapped; /* host address of the first byte when host visible, else NULL */
  /* wrapped host memory: the application's pointer, and the imported range
   * released (never freed) with the buffer */
  void *host;
  VkDeviceMemory imported;
} vulkan_buffer;

typedef struct vulkan_pipeline {
  VkPipeline handle;
  uint32_t local_size[3]; /* as the pipeline was built (from the spec constants) */
} vulkan_pipeline;

typedef struct vulkan_device {
  vulkan_plugin *plugin;
  const vulkan_device_props *props;
  uint32_t index;
  VkDevice handle;
  vulkan_device_functions vk; /* device->vk.vkCmdDispatch(...) */
  VkQueue queue;              /* shared by every tessera queue (queue_lock) */
  pthread_mutex_t queue_lock; /* vkQueueSubmit on `queue` */
  VkDescriptorSetLayout set_layout;
  VkPipelineLayout layout; /* VULKAN_MAX_BINDINGS push descriptors + push constants */
  VkPipelineCache cache;
  char cache_path[1024]; /* "" when the cache is not saved */
  pthread_mutex_t pipeline_lock;
  struct vulkan_pipeline_entry *pipelines; /* lazily built (pipeline.c) */
  pthread_mutex_t memory_lock;
  vulkan_block *blocks; /* memory.c */
  uint32_t memory_type; /* device-local (and host-visible where that exists) */
  bool host_visible;    /* blocks are mapped */
  /* the mapped blocks are host-cached (lavapipe, integrated GPUs); where
   * not (a discrete GPU's memory through a PCIe BAR), host reads of them
   * crawl (0.03 GB/s on an H100), so reads go through staging */
  bool host_cached;
  bool mapping_off; /* TESSERA_VULKAN_NO_MAPPING: reads and writes through staging */
  uint32_t staging_type;
  struct vulkan_queue *queues; /* guarded by queue_lock */
  /* TESSERA_VULKAN_PIPELINE_STATS set and the driver can: each pipeline's
   * compiler statistics (registers, local memory, ...) logged at info level
   * when it is built. */
  bool pipeline_stats;
  bool coopmat_force_nv;  /* TESSERA_VULKAN_COOPMAT_NV: the NV build even where KHR exists */
  uint32_t coopmat_probe; /* TESSERA_VULKAN_COOPMAT_PROBE (gemm_coopmat.comp), 0: off */
  pthread_mutex_t config_lock;
  struct vulkan_config *configs; /* what op_select prepared (pipeline.c) */
} vulkan_device;

/* A command buffer in flight, retired when the timeline passes `value`. */
typedef struct vulkan_submission {
  VkCommandBuffer command;
  uint64_t value;
} vulkan_submission;

/* A command buffer a closed gate holds back (queue.c): ended, its timeline
 * value assigned, submitted once `gates_before` gates of its queue are
 * open. */
typedef struct vulkan_held {
  VkCommandBuffer command;
  uint64_t value;
  uint64_t gates_before;
} vulkan_held;

typedef struct vulkan_gate vulkan_gate;

/* The queue's gates (queue_gate, gate_open): what the queue's owner and
 * gate_open, on any thread, share, all under `lock`. Gate tickets count
 * from 1; `released` is the highest ticket with every ticket up to it open,
 * so a gate opened early releases nothing queued behind an earlier closed
 * one. While a gate is closed, the queue's command buffers wait here rather
 * than in the device's one VkQueue, where every other queue of the device
 * (the core's transfer queue among them) would wait behind them. */
typedef struct vulkan_gates {
  pthread_mutex_t lock;
  uint64_t issued;    /* gates queued so far */
  uint64_t released;  /* every gate up to this ticket is open */
  vulkan_gate *early; /* opened gates above released + 1, by ticket */
  vulkan_held *held;  /* in timeline order */
  uint32_t held_count, held_capacity;
  uint64_t live;     /* the highest timeline value handed to the VkQueue */
  tsr_status failed; /* a held submission that failed, for queue_finish */
} vulkan_gates;

typedef struct vulkan_queue {
  vulkan_device *device;
  struct vulkan_queue *next_in_device;
  VkCommandPool pool;
  VkSemaphore timeline;
  uint64_t submitted;   /* last value signalled by a submission */
  VkCommandBuffer open; /* being recorded, NULL when none */
  uint32_t open_dispatches;
  vulkan_submission *flight;
  uint32_t flight_count, flight_capacity;
  VkCommandBuffer *spare;
  uint32_t spare_count, spare_capacity;
  /* Timestamps for events: a pool of queries used round-robin; queries_used
   * counts every query handed out, so an event can tell its query was
   * reused. */
  VkQueryPool timestamps;
  uint64_t queries_used;
  /* Staging memory for reads and writes when buffers are not mapped. */
  vulkan_buffer *staging;
  /* Scratch for ops (vulkan_queue_scratch), grown on demand. */
  vulkan_buffer *scratch;
  /* Small tables ops upload (vulkan_queue_upload), made on first use. */
  vulkan_buffer *upload;
  /* TSR_PLUGIN_FAULT_COUNT int32 words on the device, each the smallest
   * index at fault of its kind (TSR_PLUGIN_FAULT_NONE: none), read and reset
   * by queue_finish when an op that can fault armed them
   * (vulkan_queue_faults); fault_context: the last cross_entropy's vocab and
   * ignore_index, for the sentence. */
  vulkan_buffer *faults;
  bool faults_armed;
  tsr_plugin_fault_context fault_context;
  tsr_status failed; /* a submission error, returned by queue_finish */
  vulkan_gates gates;
} vulkan_queue;

/* An event is recorded into the queue's open command buffer and submitted
 * with the work after it (event_wait and elapsed_ms submit it if nothing
 * else has), so no host time between two events is counted. */
typedef struct vulkan_event {
  vulkan_queue *queue;
  uint64_t value;  /* timeline value after which the event has happened */
  uint64_t serial; /* queries_used when recorded; UINT64_MAX when untimed */
  /* event_flush ended its command buffer: event_wait then reads no queue
   * state (it may run on any thread beside the queue's owner). */
  bool flushed;
} vulkan_event;

/* A storage-buffer binding: the buffer's VkBuffer, a byte offset that is a
 * multiple of the device's storage alignment, and a byte range
 * (VK_WHOLE_SIZE: to the end of the allocation). */
typedef struct vulkan_binding {
  VkBuffer buffer;
  uint64_t offset;
  uint64_t range;
} vulkan_binding;

/* One embedded SPIR-V blob. */
typedef struct vulkan_shader_blob {
  const char *name;
  const uint32_t *code;
  size_t bytes;
} vulkan_shader_blob;

/* Sets "vulkan: <what>: <VkResult name>" (tsr_plugin_fail; instance.c) and returns
 * TSR_ERROR_BACKEND (TSR_ERROR_OUT_OF_MEMORY for the out-of-memory
 * results). */
tsr_status vulkan_fail(const vulkan_plugin *plugin, VkResult result, const char *what);

/* ---- ABI entries outside plugin.c (instance.c, device.c, memory.c, queue.c) ---- */

tsr_status vulkan_init(const tsr_host_services_v2 *host, void **plugin, char *reason,
                       size_t reason_capacity);
void vulkan_shutdown(void *plugin);
uint32_t vulkan_device_count(void *plugin);
tsr_status vulkan_device_info(void *plugin, uint32_t index, tsr_device_info *info);

tsr_status vulkan_device_open(void *plugin, uint32_t index, void **device);
void vulkan_device_close(void *device);
tsr_status vulkan_buffer_alloc(void *device, uint64_t bytes, void **buffer);
void vulkan_buffer_free(void *device, void *buffer);
tsr_status vulkan_buffer_wrap(void *device, int32_t kind, void *pointer, uint64_t bytes,
                              void **buffer);
tsr_status vulkan_buffer_export(void *buffer, int32_t *kind, uint64_t *address);
tsr_status vulkan_queue_create(void *device, void **queue);
void vulkan_queue_destroy(void *queue);
tsr_status vulkan_queue_finish(void *queue);
tsr_status vulkan_buffer_write(void *queue, void *buffer, uint64_t offset, const void *src,
                               uint64_t bytes);
tsr_status vulkan_buffer_read(void *queue, void *buffer, uint64_t offset, void *dst,
                              uint64_t bytes);
tsr_status vulkan_buffer_copy(void *queue, void *src, uint64_t src_offset, void *dst,
                              uint64_t dst_offset, uint64_t bytes);
tsr_status vulkan_event_record(void *queue, void **event);
tsr_status vulkan_event_wait(void *event);
tsr_status vulkan_event_elapsed_ms(void *start, void *end, double *ms);
void vulkan_event_destroy(void *event);
tsr_status vulkan_event_flush(void *event);
tsr_status vulkan_queue_wait_event(void *queue, void *event);
tsr_status vulkan_queue_gate(void *queue, void **gate);
void vulkan_gate_open(void *gate);

/* ---- shaders and pipelines (pipeline.c, shaders generated by CMake) ---- */

const vulkan_shader_blob *vulkan_shader_find(const char *name);
/* The compute pipeline of shader `name` with specialisation constants
 * spec[0..n_spec) (ids 0..n_spec-1), built on first use through the device's
 * pipeline cache and kept until device_close. `required_subgroup_size` 0:
 * the driver's choice; else that size (with full subgroups), which the device
 * must allow (props.subgroup_min..max and subgroup_size_control). */
tsr_status vulkan_pipeline_get(vulkan_device *device, const char *name, const uint32_t *spec,
                               uint32_t n_spec, uint32_t required_subgroup_size,
                               const vulkan_pipeline **out);
/* As vulkan_pipeline_get for SPIR-V the caller supplies (rewritten at load
 * time, say): blob->name is the cache key, which the caller keeps unique per
 * code (shorter than 64 characters); blob->code and bytes are read during
 * the call only, and only by the first call for that key and spec. */
tsr_status vulkan_pipeline_get_code(vulkan_device *device, const vulkan_shader_blob *blob,
                                    const uint32_t *spec, uint32_t n_spec,
                                    uint32_t required_subgroup_size, const vulkan_pipeline **out);
/* The pipeline of a cooperative-matrix build (spirv_rewrite.c): the KHR
 * rewrite of its SPIR-V where the device lists the shape under
 * VK_KHR_cooperative_matrix, else the NV build in subgroups of 32. */
tsr_status vulkan_coopmat_pipeline(vulkan_device *device, const char *name, const uint32_t *spec,
                                   uint32_t n_spec, const vulkan_pipeline **out);

/* ---- memory (memory.c) ---- */

tsr_status vulkan_buffer_create(vulkan_device *device, uint64_t bytes, bool staging,
                                vulkan_buffer **out);
void vulkan_buffer_destroy(vulkan_device *device, vulkan_buffer *buffer);
void vulkan_memory_release(vulkan_device *device); /* every block, at device_close */

/* The binding of tensor `t` (a plugin tensor of this device): the buffer
 * offset aligned down to the storage alignment, the range up to the end of
 * the allocation (capped at maxStorageBufferRange), and in *first the index
 * of the tensor's first element from the binding's start, in elements of the
 * tensor's dtype (a shader reading 16-bit data as 32-bit words handles an odd
 * *first itself). False (with `why`) when the tensor does not fit one
 * binding or *first exceeds 32 bits, decided on the alignment of the
 * tensor's first byte rather than its exact offset (the same answer for
 * every problem of one signature). */
bool vulkan_bind_tensor(const vulkan_device *device, const tsr_plugin_tensor *t,
                        vulkan_binding *out, uint32_t *first, char *why, size_t why_capacity);
/* Elements from a tensor's first element to one past its last (strides are
 * non-negative after validation). */
int64_t vulkan_tensor_span(const tsr_plugin_tensor *t);
/* A stride as the shaders take it: 0 along extents of 1 (whatever the
 * caller gave there), else the element stride, which fits 32 bits once the
 * tensor fits one binding. */
uint32_t vulkan_stride_of(const tsr_plugin_tensor *t, int dim);

/* ---- queues (queue.c) ---- */

/* Records a dispatch of `pipeline` with bindings[0..n) at bindings 0..n-1 and
 * `push` (push_bytes <= VULKAN_PUSH_BYTES) into the queue's open command
 * buffer; groups beyond maxComputeWorkGroupCount fail with
 * TSR_ERROR_UNSUPPORTED. Submitted at the next read, write, event or finish. */
tsr_status vulkan_dispatch(vulkan_queue *queue, const vulkan_pipeline *pipeline,
                           const vulkan_binding *bindings, uint32_t n_bindings, const void *push,
                           uint32_t push_bytes, uint32_t groups_x, uint32_t groups_y,
                           uint32_t groups_z);
/* Fills `bytes` bytes (a multiple of 4, or VK_WHOLE_SIZE) at binding `b`
 * with the 32-bit `value`, ordered like a dispatch. */
tsr_status vulkan_fill(vulkan_queue *queue, const vulkan_binding *b, uint64_t bytes,
                       uint32_t value);
/* Scratch device memory of at least `bytes` for the op being queued: valid
 * until the next op on this queue (later ops reuse it; the barrier between
 * dispatches orders that). Contents undefined. */
tsr_status vulkan_queue_scratch(vulkan_queue *queue, uint64_t bytes, vulkan_binding *out);
/* Records a copy of `bytes` bytes of `data` (a multiple of 4, at most
 * VULKAN_UPLOAD_BYTES; copied into the command buffer now) into a small
 * device buffer of the queue, ordered like a dispatch, and gives its
 * binding: for per-op tables (grouped GEMM's tile prefix sums). Valid until
 * the next upload on this queue; independent of vulkan_queue_scratch. */
tsr_status vulkan_queue_upload(vulkan_queue *queue, const void *data, uint32_t bytes,
                               vulkan_binding *out);
/* The binding of the queue's fault words (TSR_PLUGIN_FAULT_COUNT int32,
 * word k the kind k of plugin.h; shaders atomicMin an index into one), and
 * arms queue_finish to read them. */
vulkan_binding vulkan_queue_faults(vulkan_queue *queue);
/* Submits the open command buffer (if any); wait: also waits for the queue. */
tsr_status vulkan_queue_flush(vulkan_queue *queue, bool wait);

/* ---- ops: configs op_select prepares, op_run records with ----
 * The core caches op_select's answer per problem signature (plugin.h): what
 * a config holds is decided from the signature alone (shapes, strides,
 * dtypes, which tensors are present, the alignment of each tensor's first
 * byte up to 256 bytes); exact offsets, rope's position_offset and grouped
 * GEMM's group sizes are read by run only. */

/* A prepared config, op_select's `config`: the variant's row and the
 * pipeline built for the problem, kept per device until device_close (one
 * per op, row, pipeline and width), so op_run looks nothing up. */
enum { VULKAN_CONFIG_EXTRA = 2 };

typedef struct vulkan_config {
  const char *name; /* the variant: the row's name */
  struct vulkan_config *next;
  tsr_op op;
  const void *row;                 /* the variant's row in its configs.c table */
  const vulkan_pipeline *pipeline; /* NULL: the problem is empty, nothing runs */
  uint32_t width;                  /* fused ops: elements per vector unit */
  /* Passes around the main one (serving attention: the plan pass, and the
   * decode path's combine pass); NULL where the op has none. */
  const vulkan_pipeline *extra[VULKAN_CONFIG_EXTRA];
} vulkan_config;

/* The device's config for (op, row, pipeline, width), made on first use
 * (pipeline.c); `name` is the row's. _with: and its extra pipelines. */
tsr_status vulkan_config_get(vulkan_device *device, tsr_op op, const char *name, const void *row,
                             const vulkan_pipeline *pipeline, uint32_t width,
                             const vulkan_config **out);
tsr_status vulkan_config_get_with(vulkan_device *device, tsr_op op, const char *name,
                                  const void *row, const vulkan_pipeline *pipeline, uint32_t width,
                                  const vulkan_pipeline *const extra[VULKAN_CONFIG_EXTRA],
                                  const vulkan_config **out);
void vulkan_configs_release(vulkan_device *device); /* at device_close */

/* One op family (ops.c: the fused ops; ops_gemm.c: GEMM and grouped GEMM;
 * ops_attention.c: attention; ops_kv_append.c: kv_append). `args` are copies of the op's args (see
 * tsr_plugin_args_copy) that live during the call.
 *   list     the variants that can run the problem, with the heuristic's
 *            pick and reason; else TSR_ERROR_UNSUPPORTED with `why`.
 *   prepare  the config of `name`, a variant list named for this problem
 *            (sets the error sentence on failure).
 *   run      records the op with a config prepare gave for a problem of the
 *            same signature (sets the error sentence on failure). */
typedef struct vulkan_op_family {
  tsr_status (*list)(const vulkan_device *device, tsr_op op, const void *args,
                     tsr_plugin_variant_list *out, char *why, size_t why_capacity);
  tsr_status (*prepare)(vulkan_device *device, tsr_op op, const void *args, const char *name,
                        const vulkan_config **out);
  tsr_status (*run)(vulkan_queue *queue, tsr_op op, const void *args, const vulkan_config *config);
} vulkan_op_family;

extern const vulkan_op_family vulkan_fused_family;
extern const vulkan_op_family vulkan_gemm_family;
extern const vulkan_op_family vulkan_attention_family;
extern const vulkan_op_family vulkan_kv_append_family;

#endif /* TESSERA_VULKAN_INTERNAL_H */
