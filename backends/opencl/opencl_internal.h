/* SPDX-License-Identifier: Apache-2.0 */
/* Internal declarations of the OpenCL plugin, shared by its files (plugin.c,
 * driver.c, device.c, memory.c, queue.c, program.c, configs.c, ops.c,
 * ops_gemm.c, ops_attention.c). Not installed.
 *
 * Kernels
 * -------
 * Every backends/opencl/kernels/<stem>.cl is embedded as source by CMake
 * (the directory is globbed: adding a file is all it takes) and built at run
 * time for each device, cached as a program binary on disk (program.c). A
 * program is built from one source with a prelude in front of it: the
 * device's feature macros and extension pragmas, then kernels/opencl_types.h,
 * every kernels/params_*.h (the parameter structs, shared with the host) and
 * kernels/common.cl (dtype load/store and reduction helpers), so a .cl file
 * uses neither #include nor its own copy of them. Options are -D definitions chosen by the host
 * (dtype, tile sizes): opencl_kernel_get(device, "rows", "-DTSR_DTYPE=2 -DTSR_THREADS=256",
 *                       "tsr_rmsnorm", &kernel)
 *
 * Argument convention
 * -------------------
 * A kernel takes its tensors' buffers first, one `__global` pointer each
 * (cl_mem on the host; absent optional tensors get any valid buffer and a
 * flag in the params), then one params struct by value from
 * its params_*.h, whose fields are 64-bit first, then 32-bit, with
 * the size a multiple of 8 (OpenCL C and C agree on such a layout). Element
 * offsets of tensors travel in the params (OpenCL 1.2 has no pointer into a
 * buffer on the host side). Every global size is a multiple of the local
 * size (OpenCL 1.2).
 *
 * Ordering: each tessera queue is one in-order cl_command_queue, so
 * consecutive launches on a queue see each other's writes.
 */
#ifndef TESSERA_OPENCL_INTERNAL_H
#define TESSERA_OPENCL_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "opencl_api.h"
#include "tessera/plugin.h"
#include "tessera/plugin_helper.h"

/* Device classes: which tile table a device takes (configs.c). */
typedef enum opencl_class {
  OPENCL_CLASS_GENERIC = 0,
  OPENCL_CLASS_NVIDIA,
  OPENCL_CLASS_AMD,
  OPENCL_CLASS_INTEL,
  OPENCL_CLASS_MALI,
  OPENCL_CLASS_ADRENO,
  OPENCL_CLASS_POCL_CPU, /* PoCL's CPU device (and other CPU devices) */
  OPENCL_CLASS_COUNT
} opencl_class;

/* What init learned about one device (clGetDeviceInfo). */
typedef struct opencl_device_props {
  cl_platform_id platform;
  cl_device_id id;
  char name[256], vendor[128], platform_name[128];
  char driver_version[128]; /* CL_DRIVER_VERSION */
  char version[128];        /* CL_DEVICE_VERSION, "OpenCL 3.0 CUDA" */
  char platform_version[128];
  char uuid[64];          /* "GPU-..." from cl_khr_device_uuid, else "" */
  char pci[32];           /* "0000:41:00.0" from cl_khr_pci_bus_info, else "" */
  int cl_major, cl_minor; /* of CL_DEVICE_OPENCL_C_VERSION */
  cl_device_type type;
  uint32_t vendor_id;
  opencl_class device_class;
  uint32_t compute_units;
  uint64_t memory_bytes;   /* CL_DEVICE_GLOBAL_MEM_SIZE */
  uint64_t max_allocation; /* CL_DEVICE_MAX_MEM_ALLOC_SIZE */
  uint64_t
      local_memory_bytes; /* CL_DEVICE_LOCAL_MEM_SIZE (0 when not dedicated: see local_is_global) */
  bool local_is_global;   /* CL_GLOBAL local memory (CPUs) */
  size_t max_work_group;  /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
  size_t max_work_item[3];
  uint32_t preferred_vector_float; /* CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT */
  uint32_t address_align;          /* CL_DEVICE_MEM_BASE_ADDR_ALIGN in bytes */
  bool host_unified;               /* CL_DEVICE_HOST_UNIFIED_MEMORY */
  bool fp16;                       /* cl_khr_fp16: half arithmetic */
  bool fp64;                       /* cl_khr_fp64 */
  bool subgroups;                  /* cl_khr_subgroups or cl_intel_subgroups */
  bool intel_subgroups;            /* cl_intel_subgroups (shuffles, block reads) */
  uint32_t subgroup_sizes[8];      /* CL_DEVICE_SUB_GROUP_SIZES_INTEL, or the warp size known */
  uint32_t subgroup_size_count;
  uint32_t warp_size;           /* NVIDIA 32, AMD 64 / 32 when known, else 0 */
  uint32_t nv_sm;               /* NVIDIA compute capability (90: sm_90), else 0 */
  uint64_t timer_resolution_ns; /* CL_DEVICE_PROFILING_TIMER_RESOLUTION */
  char extensions[4096];        /* CL_DEVICE_EXTENSIONS (truncated) */
  /* PoCL 5.x (LLVM 16) miscompiles the decode kernel (attention_decode.cl)
   * for some shapes, right with -cl-opt-disable: flash serves decode there
   * (docs/PERFORMANCE.md, "PoCL 5") */
  bool decode_miscompiled;
} opencl_device_props;

typedef struct opencl_plugin {
  tsr_plugin_host host; /* tsr_plugin_log, tsr_plugin_fail ("opencl: ..."), tsr_plugin_env */
  opencl_api cl;        /* library NULL: no ICD loader, no devices */
  uint32_t device_count;
  opencl_device_props *devices;
  char cache_dir[1024]; /* program binaries; "" when caching is off */
} opencl_plugin;

typedef struct opencl_buffer {
  cl_mem mem;
  uint64_t bytes;
  void *host;   /* wrapped host memory (CL_MEM_USE_HOST_PTR), else NULL */
  bool wrapped; /* not ours to free beyond the cl_mem */
} opencl_buffer;

/* A kernel of a built program. OpenCL kernel objects hold their arguments,
 * so setting them and enqueueing is done under `lock` (opencl_launch). */
typedef struct opencl_kernel {
  cl_kernel handle;
  pthread_mutex_t lock;
  size_t max_work_group;               /* CL_KERNEL_WORK_GROUP_SIZE on this device */
  size_t preferred_multiple;           /* CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE */
  uint64_t private_bytes, local_bytes; /* CL_KERNEL_PRIVATE/LOCAL_MEM_SIZE */
} opencl_kernel;

typedef struct opencl_device {
  opencl_plugin *plugin;
  const opencl_device_props *props;
  uint32_t index;
  cl_context context;
  pthread_mutex_t program_lock;
  struct opencl_program_entry *programs; /* built on first use (program.c) */
  pthread_mutex_t config_lock;
  struct opencl_config *configs; /* what op_select prepared */
  struct opencl_queue *queues;   /* guarded by program_lock */
} opencl_device;

typedef struct opencl_queue {
  opencl_device *device;
  struct opencl_queue *next_in_device;
  cl_command_queue handle; /* in order, with profiling */
  /* Scratch for ops (opencl_queue_scratch), grown on demand. */
  cl_mem scratch;
  uint64_t scratch_bytes;
  /* int32 words on the device: TSR_PLUGIN_FAULT_COUNT fault words (each the
   * smallest index at fault of its kind, TSR_PLUGIN_FAULT_NONE when none),
   * read and reset by queue_finish when armed, then the word events fill. */
  cl_mem status;
  bool status_armed;
  tsr_plugin_fault_context fault_context; /* the last cross_entropy's, for the sentence */
  tsr_status failed;                      /* an enqueue error, returned by queue_finish */
} opencl_queue;

/* An event is a marker enqueued on the queue (clEnqueueMarkerWithWaitList). */
typedef struct opencl_event {
  opencl_queue *queue;
  cl_event handle;
} opencl_event;

/* Sets "opencl: <what>: <CL error name>" (tsr_plugin_fail) and returns
 * TSR_ERROR_BACKEND (TSR_ERROR_OUT_OF_MEMORY for the allocation errors). */
tsr_status opencl_fail(const opencl_plugin *plugin, cl_int error, const char *what);
const char *opencl_error_name(cl_int error);

/* ---- ABI entries outside plugin.c ---- */

tsr_status opencl_init(const tsr_host_services_v2 *host, void **plugin, char *reason,
                       size_t reason_capacity);
void opencl_shutdown(void *plugin);
uint32_t opencl_device_count(void *plugin);
tsr_status opencl_device_info(void *plugin, uint32_t index, tsr_device_info *info);
tsr_status opencl_device_open(void *plugin, uint32_t index, void **device);
void opencl_device_close(void *device);
tsr_status opencl_buffer_alloc(void *device, uint64_t bytes, void **buffer);
void opencl_buffer_free(void *device, void *buffer);
tsr_status opencl_buffer_wrap(void *device, int32_t kind, void *handle, uint64_t bytes,
                              void **buffer);
tsr_status opencl_queue_create(void *device, void **queue);
void opencl_queue_destroy(void *queue);
tsr_status opencl_queue_finish(void *queue);
tsr_status opencl_buffer_write(void *queue, void *buffer, uint64_t offset, const void *src,
                               uint64_t bytes);
tsr_status opencl_buffer_read(void *queue, void *buffer, uint64_t offset, void *dst,
                              uint64_t bytes);
tsr_status opencl_buffer_copy(void *queue, void *src, uint64_t src_offset, void *dst,
                              uint64_t dst_offset, uint64_t bytes);
tsr_status opencl_event_record(void *queue, void **event);
tsr_status opencl_event_wait(void *event);
tsr_status opencl_event_elapsed_ms(void *start, void *end, double *ms);
void opencl_event_destroy(void *event);
tsr_status opencl_queue_wait_event(void *queue, void *event);
tsr_status opencl_queue_gate(void *queue, void **gate);
void opencl_gate_open(void *gate);

/* ---- programs (program.c) ---- */

/* The kernel `kernel` of embedded source `source` (kernels/<source>.cl) built
 * with `options` for this device: built on first use (through the on-disk
 * binary cache) and kept until device_close. Fails with the build log in
 * the error sentence (TSR_ERROR_BACKEND), or TSR_ERROR_NOT_FOUND for an
 * unknown source or kernel name. */
tsr_status opencl_kernel_get(opencl_device *device, const char *source, const char *options,
                             const char *kernel, const opencl_kernel **out);

/* ---- memory and launches (memory.c, queue.c) ---- */

/* The buffer of a plugin tensor and the element offset of its first element
 * (offset bytes / dtype size; offsets are whole elements after validation). */
cl_mem opencl_tensor_mem(const tsr_plugin_tensor *t);
int64_t opencl_tensor_first(const tsr_plugin_tensor *t);
/* Elements from a tensor's first element to one past its last. */
int64_t opencl_tensor_span(const tsr_plugin_tensor *t);

/* One kernel argument: clSetKernelArg(kernel, i, size, value). Use
 * OPENCL_ARG(x) for a value (a cl_mem, a params struct). */
typedef struct opencl_arg {
  size_t size;
  const void *value;
} opencl_arg;
#define OPENCL_ARG(x) ((opencl_arg){sizeof(x), &(x)})

/* Sets args[0..n) and enqueues `kernel` over `global` work items (each a
 * multiple of `local`; local NULL: the implementation's choice) in `dims`
 * dimensions on the queue. Fails with TSR_ERROR_UNSUPPORTED when the local
 * size exceeds the kernel's limit. */
tsr_status opencl_launch(opencl_queue *queue, const opencl_kernel *kernel, const opencl_arg *args,
                         uint32_t n, uint32_t dims, const size_t global[3], const size_t local[3]);
/* Fills `bytes` bytes at byte `offset` of `mem` with the 32-bit `value`,
 * ordered like a launch. */
tsr_status opencl_fill(opencl_queue *queue, cl_mem mem, uint64_t offset, uint64_t bytes,
                       uint32_t value);
/* Scratch device memory of at least `bytes` for the op being queued: valid
 * until the next op on this queue. Contents undefined. */
tsr_status opencl_queue_scratch(opencl_queue *queue, uint64_t bytes, cl_mem *out);
/* A read-only buffer holding a copy of `bytes` bytes of `data` (copied now),
 * for per-op tables (grouped GEMM's tile prefix sums). The caller releases
 * it (clReleaseMemObject) once the launches using it are enqueued; OpenCL
 * keeps it until they complete. */
tsr_status opencl_queue_upload(opencl_queue *queue, const void *data, uint64_t bytes, cl_mem *out);
/* The queue's fault words (TSR_PLUGIN_FAULT_COUNT int32 from byte 0 of
 * `out`; kernels atomic_min an index into word[kind]), armed so that
 * queue_finish reads them and reports the first kind at fault
 * (tsr_plugin_fault_report). opencl_queue_status is cross_entropy's: it
 * also keeps the vocabulary and ignore_index for the sentence. */
tsr_status opencl_queue_faults(opencl_queue *queue, cl_mem *out);
tsr_status opencl_queue_status(opencl_queue *queue, int64_t vocab, int64_t ignore_index,
                               cl_mem *out);

/* ---- ops: configs op_select prepares, op_run launches with ----
 * The core caches op_select's answer per problem signature (plugin.h): what
 * a config holds is decided from the signature alone (shapes, strides,
 * dtypes, which tensors are present, the alignment of each tensor's first
 * byte up to 256 bytes); exact offsets, rope's position_offset and grouped
 * GEMM's group sizes are read by run only. */
typedef struct opencl_config {
  const char *name; /* the variant: the row's name */
  struct opencl_config *next;
  tsr_op op;
  const void *row;              /* the variant's row in its table */
  const opencl_kernel *kernel;  /* NULL: the problem is empty, nothing runs */
  const opencl_kernel *kernel2; /* a second kernel (a reduction after split-K), or NULL */
  uint32_t width;               /* fused ops: elements per work item */
} opencl_config;

/* The device's config for (op, row, kernel, kernel2, width), made on first
 * use (program.c) and kept until device_close; `name` is the row's. */
tsr_status opencl_config_get(opencl_device *device, tsr_op op, const char *name, const void *row,
                             const opencl_kernel *kernel, const opencl_kernel *kernel2,
                             uint32_t width, const opencl_config **out);

/* One op family, as the Vulkan plugin's (ops.c: the fused ops; ops_gemm.c:
 * GEMM and grouped GEMM; ops_attention.c: attention). `args` are copies of
 * the op's args (tsr_plugin_args_copy) that live during the call.
 *   list     the variants that can run the problem, with the heuristic's
 *            pick and reason; else TSR_ERROR_UNSUPPORTED with `why`.
 *   prepare  the config of `name`, a variant list named for this problem
 *            (sets the error sentence on failure).
 *   run      launches the op with a config prepare gave for a problem of
 *            the same signature (sets the error sentence on failure). */
typedef struct opencl_op_family {
  tsr_status (*list)(const opencl_device *device, tsr_op op, const void *args,
                     tsr_plugin_variant_list *out, char *why, size_t why_capacity);
  tsr_status (*prepare)(opencl_device *device, tsr_op op, const void *args, const char *name,
                        const opencl_config **out);
  tsr_status (*run)(opencl_queue *queue, tsr_op op, const void *args, const opencl_config *config);
} opencl_op_family;

extern const opencl_op_family opencl_fused_family;
extern const opencl_op_family opencl_gemm_family;
extern const opencl_op_family opencl_attention_family;

#endif /* TESSERA_OPENCL_INTERNAL_H */
