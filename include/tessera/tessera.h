/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tessera: a portable compute library.
 *
 * The public API. An application creates one context, picks a device, creates
 * buffers and a queue on it, and calls ops on tensor views of those buffers.
 * Vendor code lives in plugins that the context loads at run time; nothing in
 * this header depends on a vendor SDK.
 *
 * Conventions:
 * - Every call returns a tsr_status. On failure tsr_last_error() gives a
 *   sentence naming the call, the argument and the values, and nothing the
 *   caller owns has been changed.
 * - Structs passed in start with `struct_size`; set it to sizeof(the struct)
 *   (the tsr_*_DESC_INIT macros do). Fields are only ever appended, so a caller
 *   built against an older header keeps working.
 * - Ops are asynchronous: they are queued and run in submission order on the
 *   queue. tsr_queue_finish() or an event waits for them.
 * - Threads: a context and its devices may be used from several threads at
 *   once, each queue from one thread at a time (ops on different queues run
 *   in parallel; no call takes a device-wide lock on the op path). Buffers,
 *   queues and events may be created and destroyed on any thread, and an event
 *   may be waited on from any thread. A context itself is destroyed by one
 *   thread once the others are done with it.
 * - A destroyed buffer passed to any call is refused with
 *   TSR_ERROR_INVALID_VALUE ("... was destroyed"): the record of each of a
 *   context's last 4096 destroyed buffers stays readable for this check.
 */
#ifndef TESSERA_TESSERA_H
#define TESSERA_TESSERA_H

#include <stddef.h>
#include <stdint.h>
#include <string.h> /* memcpy in the inline conversions */

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define TSR_API
#else
#define TSR_API __attribute__((visibility("default")))
#endif

#define TSR_VERSION_MAJOR 0
#define TSR_VERSION_MINOR 1
#define TSR_VERSION_PATCH 0

/* ------------------------------------------------------------------------ */
/* Status and errors                                                         */
/* ------------------------------------------------------------------------ */

typedef enum tsr_status {
  TSR_OK = 0,
  TSR_ERROR_NULL_ARGUMENT = 1,  /* a required handle or pointer is NULL */
  TSR_ERROR_INVALID_VALUE = 2,  /* an enum, flag, scalar or string is not allowed */
  TSR_ERROR_STRUCT_SIZE = 3,    /* struct_size is smaller than the first version */
  TSR_ERROR_DTYPE_MISMATCH = 4, /* tensors' dtypes do not fit together */
  TSR_ERROR_RANK = 5,           /* a tensor has the wrong number of dimensions */
  TSR_ERROR_SHAPE_MISMATCH = 6, /* tensors' extents do not fit together */
  TSR_ERROR_BAD_SIZE = 7,       /* a negative extent or one whose byte size overflows */
  TSR_ERROR_OUT_OF_BOUNDS = 8,  /* a tensor reaches outside its buffer */
  TSR_ERROR_WRONG_DEVICE = 9,   /* a buffer or queue belongs to another device */
  TSR_ERROR_UNSUPPORTED = 10,   /* valid, but this device/plugin cannot do it */
  TSR_ERROR_OUT_OF_MEMORY = 11, /* host or device allocation failed */
  TSR_ERROR_NOT_FOUND = 12,     /* no device matches a selector; unknown variant */
  TSR_ERROR_BACKEND = 13,       /* the plugin or vendor runtime failed */
  TSR_ERROR_IO = 14,            /* a file could not be read or written */
  TSR_ERROR_OVERLAP = 15        /* an output overlaps an input it may not alias */
} tsr_status;

/* A short constant name for a status, e.g. "TSR_ERROR_SHAPE_MISMATCH". */
TSR_API const char *tsr_status_name(tsr_status status);

/* The last error raised on this thread by any tsr_ call, as one sentence
 * ("tsr_gemm: a.shape[1] = 512 but b.shape[0] = 256"). Empty when the last
 * failing call left none. Valid until the next tsr_ call on this thread. */
TSR_API const char *tsr_last_error(void);

/* Library version as "major.minor.patch". */
TSR_API const char *tsr_version(void);

/* ------------------------------------------------------------------------ */
/* Data types                                                                */
/* ------------------------------------------------------------------------ */

typedef enum tsr_dtype {
  TSR_DTYPE_INVALID = 0,
  TSR_DTYPE_F32 = 1,
  TSR_DTYPE_F16 = 2,
  TSR_DTYPE_BF16 = 3,
  TSR_DTYPE_I32 = 4, /* indices only (cross_entropy targets) */
  TSR_DTYPE_COUNT_ = 5
} tsr_dtype;

/* Size in bytes of one element; 0 for an invalid dtype. */
TSR_API size_t tsr_dtype_size(tsr_dtype dtype);
/* "f32", "f16", "bf16", "i32"; "invalid" otherwise. */
TSR_API const char *tsr_dtype_name(tsr_dtype dtype);
/* Parses a dtype name; TSR_DTYPE_INVALID when unknown. */
TSR_API tsr_dtype tsr_dtype_from_name(const char *name);

/* f16 and bf16 conversions. They are static inline, not exported: plugins
 * never link libtessera (docs/PLUGINS.md, R6) and get these same definitions
 * through plugin.h, and a per-element conversion should inline. To f32 is
 * exact; to f16/bf16 rounds to nearest even, overflows to infinity and keeps
 * NaN a (quiet) NaN. */
static inline float tsr_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { /* subnormal: normalise */
      int e = -1;
      do {
        e++;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static inline uint16_t tsr_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) /* inf or NaN */
    return (uint16_t)(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) /* rounds to >= 65520: inf */
    return (uint16_t)(sign | 0x7c00u);
  if (abs < 0x38800000u) { /* below the smallest normal: subnormal or zero */
    if (abs < 0x33000000u) /* below half the smallest subnormal */
      return (uint16_t)sign;
    uint32_t e = abs >> 23;
    uint32_t m = (abs & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e; /* 14..24 */
    uint32_t half = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u)))
      half++;
    return (uint16_t)(sign | half);
  }
  uint32_t r = abs + 0xfffu + ((abs >> 13) & 1u); /* round to nearest even */
  return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

static inline float tsr_bf16_to_f32(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static inline uint16_t tsr_f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* ------------------------------------------------------------------------ */
/* Context                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct tsr_context tsr_context;
typedef struct tsr_device tsr_device;
typedef struct tsr_buffer tsr_buffer;
typedef struct tsr_queue tsr_queue;
typedef struct tsr_event tsr_event;

typedef enum tsr_log_level {
  TSR_LOG_DEFAULT = 0, /* TESSERA_LOG, else warnings */
  TSR_LOG_ERROR = 1,
  TSR_LOG_WARN = 2,
  TSR_LOG_INFO = 3,
  TSR_LOG_DEBUG = 4
} tsr_log_level;

typedef struct tsr_context_options {
  size_t struct_size;
  /* Comma-separated backend names to load ("cuda,cpu"); NULL: TESSERA_BACKENDS,
   * else all. */
  const char *backends;
  /* Comma-separated backend names to skip; NULL: TESSERA_DISABLE_BACKENDS. */
  const char *disable_backends;
  /* Colon-separated plugins.d directories searched before all others. */
  const char *add_plugin_path;
  /* Minimum level written to stderr. */
  tsr_log_level log_level;
} tsr_context_options;

#define TSR_CONTEXT_OPTIONS_INIT                                                                   \
  { sizeof(tsr_context_options), NULL, NULL, NULL, TSR_LOG_DEFAULT }

/* Creates a context: reads plugin manifests, loads the plugins that pass the
 * filters and enumerates their devices. Plugins that fail are skipped and
 * reported (tsr_plugin_report); a context with no device is still valid.
 * `options` may be NULL. */
TSR_API tsr_status tsr_context_create(const tsr_context_options *options, tsr_context **out);
/* Destroys the context and every device, buffer, queue and event made from it.
 * NULL is allowed. */
TSR_API void tsr_context_destroy(tsr_context *context);

typedef enum tsr_plugin_state {
  TSR_PLUGIN_LOADED = 0,
  TSR_PLUGIN_SKIPPED = 1, /* not loaded; `reason` says why */
  TSR_PLUGIN_FILTERED = 2 /* left out by TESSERA_BACKENDS / TESSERA_DISABLE_BACKENDS */
} tsr_plugin_state;

typedef struct tsr_plugin_report {
  size_t struct_size;
  char name[64];       /* manifest name (file name without .conf) */
  char manifest[1024]; /* manifest path */
  char library[1024];  /* library as resolved, or as written when not found */
  tsr_plugin_state state;
  uint32_t abi_version; /* negotiated; 0 when not loaded */
  uint32_t device_count;
  /* Why it was skipped; for a loaded plugin with no device, "no devices: "
   * and the plugin's own last message (a missing runtime or driver); else "". */
  char reason[512];
} tsr_plugin_report;

/* Number of manifests the context considered (loaded, skipped or filtered). */
TSR_API tsr_status tsr_plugin_count(tsr_context *context, uint32_t *count);
/* What happened to manifest `index` (set report->struct_size first). */
TSR_API tsr_status tsr_plugin_get_report(tsr_context *context, uint32_t index,
                                         tsr_plugin_report *report);
/* The directories the context searched for manifests, in search order. */
TSR_API tsr_status tsr_plugin_search_dir_count(tsr_context *context, uint32_t *count);
/* Directory `index`: its path, whether it exists (`exists` may be NULL) and a
 * note such as "exists, 3 manifests" or "not searched: more than 64
 * directories" (`note` may be NULL). The strings live as long as the context. */
TSR_API tsr_status tsr_plugin_search_dir(tsr_context *context, uint32_t index, const char **path,
                                         int *exists, const char **note);

/* ------------------------------------------------------------------------ */
/* Devices                                                                   */
/* ------------------------------------------------------------------------ */

typedef enum tsr_device_type {
  TSR_DEVICE_CPU = 0,
  TSR_DEVICE_GPU = 1, /* discrete GPU */
  TSR_DEVICE_INTEGRATED_GPU = 2,
  TSR_DEVICE_OTHER = 3 /* software rasteriser, accelerator */
} tsr_device_type;

typedef enum tsr_op {
  TSR_OP_GEMM = 0,
  TSR_OP_GROUPED_GEMM = 1,
  TSR_OP_ATTENTION = 2,
  TSR_OP_RMSNORM = 3,
  TSR_OP_LAYERNORM = 4,
  TSR_OP_SOFTMAX = 5,
  TSR_OP_ROPE = 6,
  TSR_OP_SWIGLU = 7,
  TSR_OP_GELU = 8,
  TSR_OP_CROSS_ENTROPY = 9,
  TSR_OP_KV_APPEND = 10,
  TSR_OP_COUNT_ = 11
} tsr_op;

/* "gemm", "grouped_gemm", "attention", ...; NULL for an unknown op. */
TSR_API const char *tsr_op_name(tsr_op op);
/* Parses an op name; returns TSR_OP_COUNT_ when unknown. */
TSR_API tsr_op tsr_op_from_name(const char *name);

typedef struct tsr_device_info {
  size_t struct_size;
  char backend[32];       /* plugin name: "cpu", "cuda", "vulkan", "hip" */
  char selector[48];      /* "cuda:0": opens exactly this device */
  uint32_t backend_index; /* index among this backend's devices */
  tsr_device_type type;
  char vendor[64];      /* "NVIDIA", "AMD", "Intel", "GenuineIntel" */
  char name[256];       /* "NVIDIA H100 80GB HBM3" */
  char arch[64];        /* "sm_90", "gfx942", "x86_64-avx512" */
  char physical_id[64]; /* UUID or PCI id: the same GPU seen by two plugins */
  char driver_version[64];
  uint64_t memory_bytes;  /* device memory (host RAM for the CPU) */
  uint32_t compute_units; /* SMs, CUs, cores */
  uint32_t dtype_mask;    /* bit (1u << tsr_dtype) per supported dtype */
  uint32_t op_mask;       /* bit (1u << tsr_op) per supported op */
  uint32_t host_visible;  /* nonzero when buffers can be mapped (tsr_buffer_map) */
  char device_key[256];   /* normalised key used by the tuning database */
  /* Plugin-specific facts, one "key: value" per line (instruction-set
   * features and the one in use, cache sizes, threads, compute capability):
   * what `tessera info` prints under "details". */
  char details[1024];
  /* The vendor runtime's number for this device: the CUDA or HIP device
   * ordinal (as CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES leave them), which
   * can differ from backend_index when the plugin skipped a GPU. -1 when the
   * backend has none or the plugin does not say (appended field: a caller's
   * older, shorter struct is still accepted). */
  int32_t native_ordinal;
} tsr_device_info;

/* Number of devices of all loaded plugins. */
TSR_API tsr_status tsr_device_count(tsr_context *context, uint32_t *count);
/* Device `index` in the stable order: GPUs (discrete, integrated), then other,
 * then CPU; within a type by backend name, then backend index. */
TSR_API tsr_status tsr_device_get(tsr_context *context, uint32_t index, tsr_device **out);
/* Device by selector: "cpu", "cuda", "cuda:1", "vulkan:0", "gpu" (first GPU),
 * "best" (first device: GPUs come first), a plain index "2", or NULL / "" for
 * TESSERA_DEVICE, else "best". TSR_ERROR_NOT_FOUND when nothing matches. With
 * several GPUs "gpu" and "best" are always the first of the stable order (of
 * the backend whose name sorts first: cuda:0 before vulkan:0), never chosen
 * by load; "cuda:N" counts the GPUs CUDA_VISIBLE_DEVICES leaves visible, and
 * physical_id tells which GPU of another backend is the same one. */
TSR_API tsr_status tsr_device_open(tsr_context *context, const char *selector, tsr_device **out);
/* Fills `info` (set info->struct_size first). */
TSR_API tsr_status tsr_device_get_info(tsr_device *device, tsr_device_info *info);

/* ------------------------------------------------------------------------ */
/* Buffers, queues, events                                                   */
/* ------------------------------------------------------------------------ */

/* Allocates `bytes` (> 0) of device memory. Contents are undefined. */
TSR_API tsr_status tsr_buffer_create(tsr_device *device, size_t bytes, tsr_buffer **out);
/* Frees a buffer after the work already queued on it has finished: it waits
 * for the queues that were given work on this buffer, and only those (a
 * buffer that no queue used is freed at once). NULL ok; a second destroy of
 * the same buffer is ignored with a warning. While a DLPack export of it
 * (tessera_dlpack.h) lives, the handle is dead at once but the memory stays
 * until the export's deleter runs. */
TSR_API void tsr_buffer_destroy(tsr_buffer *buffer);
TSR_API tsr_status tsr_buffer_size(const tsr_buffer *buffer, size_t *bytes);
TSR_API tsr_status tsr_buffer_device(const tsr_buffer *buffer, tsr_device **device);
/* Host pointer to the buffer's memory, for devices whose info says
 * host_visible; TSR_ERROR_UNSUPPORTED otherwise. Access it only while no
 * queued work uses the buffer. */
TSR_API tsr_status tsr_buffer_map(tsr_buffer *buffer, void **host_pointer);
typedef enum tsr_external_kind {
  TSR_EXTERNAL_HOST_POINTER = 1,        /* host memory (devices that are host visible) */
  TSR_EXTERNAL_CUDA_DEVICE_POINTER = 2, /* a CUdeviceptr of the device's CUDA context */
  TSR_EXTERNAL_HIP_DEVICE_POINTER = 3,  /* a HIP device pointer (hipMalloc) of the device */
  TSR_EXTERNAL_CUDA_STREAM = 4,         /* a CUstream / cudaStream_t (queues, not buffers) */
  TSR_EXTERNAL_HIP_STREAM = 5,          /* a hipStream_t (queues, not buffers) */
  TSR_EXTERNAL_COUNT_ = 6
} tsr_external_kind;

/* Wraps memory the application owns as a tessera buffer, without copying:
 * tensors on it are used in place. tsr_buffer_destroy releases the wrapper and
 * never frees the memory, which must stay valid (and not be freed or moved)
 * until then. TSR_ERROR_UNSUPPORTED when the device cannot use that kind of
 * memory. DLPack tensors: tessera/tessera_dlpack.h. */
TSR_API tsr_status tsr_buffer_wrap_host(tsr_device *device, void *pointer, size_t bytes,
                                        tsr_buffer **out);
/* `device_pointer` is a CUdeviceptr (e.g. torch.Tensor.data_ptr()) valid in
 * the device's primary context. */
TSR_API tsr_status tsr_buffer_wrap_cuda(tsr_device *device, uint64_t device_pointer, size_t bytes,
                                        tsr_buffer **out);
/* `device_pointer` is a HIP device pointer (hipMalloc, or a ROCm torch
 * tensor's data_ptr()) of the device's GPU, on a "hip" device. */
TSR_API tsr_status tsr_buffer_wrap_hip(tsr_device *device, uint64_t device_pointer, size_t bytes,
                                       tsr_buffer **out);

/* Creates an in-order queue on the device. */
TSR_API tsr_status tsr_queue_create(tsr_device *device, tsr_queue **out);
/* Waits for the queue's work, then destroys it. NULL ok. */
TSR_API void tsr_queue_destroy(tsr_queue *queue);
/* A queue over the caller's CUDA stream (a CUstream or cudaStream_t of the
 * device's primary context, cast to uint64_t; 0 is the default stream), on a
 * "cuda" device. Ops, copies and events are queued on that stream in call
 * order, with no synchronisation of their own: the caller orders the stream
 * against its other work as it would for its own kernels. Every queue call
 * works on it (tsr_queue_finish synchronises the stream). tsr_queue_destroy
 * releases the wrapper only; the stream stays the caller's, and must outlive
 * the queue. TSR_ERROR_UNSUPPORTED when the device's plugin cannot wrap
 * streams or the device is not a CUDA device. */
TSR_API tsr_status tsr_queue_wrap_cuda_stream(tsr_device *device, uint64_t stream, tsr_queue **out);
/* The same for a hipStream_t on a "hip" device. */
TSR_API tsr_status tsr_queue_wrap_hip_stream(tsr_device *device, uint64_t stream, tsr_queue **out);
/* Blocks until all work submitted to the queue has finished. Returns the first
 * error a queued op hit since the last finish, if any. On the CPU device the
 * calling thread runs the queued work itself when the queue's worker thread
 * is asleep, so a synchronous call costs its work, not a thread wake-up. */
TSR_API tsr_status tsr_queue_finish(tsr_queue *queue);

/* Copies host memory into the buffer at `offset`, after the queue's earlier
 * work; returns once `src` may be reused. */
TSR_API tsr_status tsr_buffer_write(tsr_queue *queue, tsr_buffer *buffer, size_t offset,
                                    const void *src, size_t bytes);
/* Copies from the buffer into host memory after the queue's earlier work;
 * returns once `dst` holds the data. */
TSR_API tsr_status tsr_buffer_read(tsr_queue *queue, const tsr_buffer *buffer, size_t offset,
                                   void *dst, size_t bytes);
/* Queues a copy between (or within, without overlap) buffers. src and dst
 * may be on two different devices, of one plugin or of two (cuda:0 to
 * cuda:1, cuda:0 to vulkan:1, cpu:0 to vulkan:0); the queue's device must be
 * one of them. The copy is ordered on `queue` alone: it starts after the
 * queue's earlier work, and the queue's later work starts after it. The
 * other device's queues are not synchronised with it: order them with
 * events (tsr_event_record on one side, tsr_queue_wait_event on the other),
 * as with CUDA's peer copies. Between GPUs of one plugin that can reach each
 * other the copy is peer to peer (CUDA peer access); otherwise a helper
 * thread of the context stages it through host memory once the queue
 * reaches it. Either way the calling thread does not wait, and a failure of
 * a staged copy is returned by the queue's next tsr_queue_finish. */
TSR_API tsr_status tsr_buffer_copy(tsr_queue *queue, const tsr_buffer *src, size_t src_offset,
                                   tsr_buffer *dst, size_t dst_offset, size_t bytes);

/* Records an event at this point of the queue. */
TSR_API tsr_status tsr_event_record(tsr_queue *queue, tsr_event **out);
/* Blocks until the queue has passed the event. */
TSR_API tsr_status tsr_event_wait(tsr_event *event);
/* Work queued on `queue` after this call starts only once `event` has
 * passed; the calling thread does not wait. The event may come from any
 * queue of any device: another queue of the same device, another GPU of the
 * same plugin (waited for on the device, e.g. cuStreamWaitEvent), or a
 * device of another plugin (a helper thread of the context waits for it on
 * the host, then releases the queue). The event may be destroyed right
 * after this call. */
TSR_API tsr_status tsr_queue_wait_event(tsr_queue *queue, tsr_event *event);
/* Milliseconds of device time between two completed events of one queue. */
TSR_API tsr_status tsr_event_elapsed_ms(tsr_event *start, tsr_event *end, double *ms);
TSR_API void tsr_event_destroy(tsr_event *event);

/* ------------------------------------------------------------------------ */
/* Tensors                                                                   */
/* ------------------------------------------------------------------------ */

#define TSR_MAX_RANK 4

/* A view of a buffer, by value. Element (i0, i1, ...) lives at byte
 * offset + (i0 * strides[0] + i1 * strides[1] + ...) * dtype size.
 * Strides are in elements and may be any non-negative value; a stride of 0
 * broadcasts (inputs only). An absent optional tensor has buffer == NULL. */
typedef struct tsr_tensor {
  tsr_buffer *buffer;
  size_t offset; /* bytes */
  tsr_dtype dtype;
  int32_t rank; /* 1..TSR_MAX_RANK */
  int64_t shape[TSR_MAX_RANK];
  int64_t strides[TSR_MAX_RANK];
} tsr_tensor;

/* A dense row-major view of `rank` extents at `offset` bytes into `buffer`.
 * Does not validate: the op that uses it does. */
TSR_API tsr_tensor tsr_tensor_make(tsr_buffer *buffer, size_t offset, tsr_dtype dtype, int32_t rank,
                                   const int64_t *shape);
/* The view with dimensions d0 and d1 swapped (a transpose, no copy). */
TSR_API tsr_tensor tsr_tensor_transpose(tsr_tensor tensor, int32_t d0, int32_t d1);
/* Number of elements (product of the shape); 0 for rank 0 or a bad shape. */
TSR_API int64_t tsr_tensor_numel(const tsr_tensor *tensor);

/* View helpers. tsr_tensor_make and tsr_tensor_transpose above return a view
 * and check nothing (the op that uses it does). The helpers below check their
 * arguments and return a tsr_status, so a slice or permutation that makes no
 * sense fails where it is written, with the values in tsr_last_error(); on
 * failure *out is unchanged. `out` may point at the input tensor. None of
 * them copies data. */

/* Elements start, start + step, ... below stop of dimension `dim`:
 * 0 <= start <= stop <= shape[dim], step >= 1 (no negative indices, no
 * clamping). The extent becomes ceil((stop - start) / step), possibly 0.
 * Looks only at the view, not at its buffer. */
TSR_API tsr_status tsr_tensor_slice(const tsr_tensor *tensor, int32_t dim, int64_t start,
                                    int64_t stop, int64_t step, tsr_tensor *out);
/* Dimension i of the result is dimension order[i] of the tensor; `order`
 * holds a permutation of 0..rank-1 (rank entries). */
TSR_API tsr_status tsr_tensor_permute(const tsr_tensor *tensor, const int32_t *order,
                                      tsr_tensor *out);
/* A view with explicit strides (in elements, >= 0; NULL: dense row-major),
 * checked against the live buffer: every element must lie inside it. */
TSR_API tsr_status tsr_tensor_strided(tsr_buffer *buffer, size_t offset, tsr_dtype dtype,
                                      int32_t rank, const int64_t *shape, const int64_t *strides,
                                      tsr_tensor *out);
/* Allocates a new buffer on `device` holding a dense row-major tensor of
 * `rank` extents (>= 0) and returns the view of it, at offset 0. A tensor with
 * no element still gets a buffer (of one element). The caller destroys
 * out->buffer with tsr_buffer_destroy. Contents are undefined. */
TSR_API tsr_status tsr_tensor_alloc(tsr_device *device, tsr_dtype dtype, int32_t rank,
                                    const int64_t *shape, tsr_tensor *out);
/* tsr_tensor_alloc with like's dtype and shape (dense, whatever like's
 * strides; like's buffer is not looked at and may be NULL). */
TSR_API tsr_status tsr_tensor_like(tsr_device *device, const tsr_tensor *like, tsr_tensor *out);

/* ------------------------------------------------------------------------ */
/* Ops                                                                       */
/* ------------------------------------------------------------------------ */

typedef enum tsr_activation {
  TSR_ACT_NONE = 0,
  TSR_ACT_RELU = 1,
  TSR_ACT_GELU_TANH = 2,
  TSR_ACT_GELU_ERF = 3,
  TSR_ACT_SILU = 4,
  TSR_ACT_COUNT_ = 5
} tsr_activation;

/* How f32 GEMM may compute. f16/bf16 inputs always accumulate in f32. */
typedef enum tsr_compute_mode {
  TSR_COMPUTE_STRICT = 0, /* true f32 products */
  TSR_COMPUTE_TF32 = 1,   /* f32 inputs may be rounded to tf32 (tensor cores) */
  TSR_COMPUTE_COUNT_ = 2
} tsr_compute_mode;

/* D = act(alpha * A B + beta * C + bias).
 * a [M, K] or [batch, M, K]; b [K, N] or [batch, K, N]; d [M, N] or
 * [batch, M, N]. Transposed operands are strides. A batch stride of 0 on a or b
 * shares that operand across the batch. a and b share a dtype; d, c and bias
 * have d's dtype, which is a's dtype or f32. c (optional) has d's shape and may
 * be d itself (in-place residual); bias (optional) is [N]. */
typedef struct tsr_gemm_desc {
  size_t struct_size;
  tsr_tensor a, b, c, bias, d;
  float alpha; /* the INIT macro sets 1 */
  float beta;  /* ignored without c */
  tsr_activation activation;
  tsr_compute_mode compute;
  const char *variant; /* force a kernel variant by name; NULL: automatic */
} tsr_gemm_desc;

/* Grouped GEMM for mixture-of-experts: group g multiplies rows
 * [start_g, start_g + group_sizes[g]) of a (start_g: sum of earlier sizes)
 * by b[g]. a [T, K]; b [G, K, N]; d [T, N]; bias optional [G, N].
 * group_sizes: host array of G non-negative counts summing to T, read during
 * the call only. Dtype rules as for tsr_gemm. */
typedef struct tsr_grouped_gemm_desc {
  size_t struct_size;
  tsr_tensor a, b, bias, d;
  const int64_t *group_sizes;
  int64_t group_count;
  float alpha;
  tsr_activation activation;
  tsr_compute_mode compute;
  const char *variant;
} tsr_grouped_gemm_desc;

/* Attention forward: o = softmax(scale * q k^T + mask) v per (batch, head).
 * q [B, Sq, Hq, D]; k, v [B, Skv, Hkv, D]; o [B, Sq, Hq, D], any strides
 * (BHSD data is a BSHD view with permuted strides). Hq is a multiple of Hkv
 * (GQA/MQA: query head h uses kv head h / (Hq / Hkv)). Query row i sits at key
 * position p = i + Skv - Sq (aligned to the end). Key j is visible when
 * j <= p + window_right (always when window_right < 0; causal means
 * window_right = 0) and j >= p - window_left (always when window_left < 0).
 * A row that sees no key gets o = 0 and lse = -inf. A NaN or an infinity in a
 * query row, or in a key row it sees, makes that row's o and lse NaN: an
 * infinite score is no mask. A window_left of Skv or more, or a window_right
 * of Sq or more, is unbounded, the same as -1.
 * lse (optional, f32 [B, Hq, Sq]) receives the natural-log log-sum-exp of the
 * scaled, masked scores. q, k, v, o share a dtype.
 *
 * Serving (fields appended; zeroed ones keep the dense form above). Each of
 * the B sequences has its own query length Lq(b) and key length Lkv(b); the
 * masks above apply per sequence with Sq = Lq(b), Skv = Lkv(b), so query row
 * i of sequence b sits at key position i + Lkv(b) - Lq(b).
 * - Packed queries: with cu_seqlens_q (i32 [B + 1], non-decreasing offsets
 *   within [0, total_q]), q and o are [total_q, Hq, D] and sequence b owns
 *   rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1] - 1; lse is f32 [Hq, total_q].
 *   Rows no sequence owns are not written. max_seqlen_q bounds every Lq(b)
 *   (0: total_q, always a bound, possibly more idle work).
 * - Packed keys: with cu_seqlens_kv (i32 [B + 1]), k and v are
 *   [total_kv, Hkv, D], sequence b owning rows cu_seqlens_kv[b] ..
 *   cu_seqlens_kv[b + 1] - 1.
 * - Paged keys (a KV cache in blocks): with block_table (i32 [B, max_blocks])
 *   k and v are [num_blocks, block_size, Hkv, D] (block_size a multiple of
 *   8); key j of sequence b is row j % block_size of block
 *   block_table[b, j / block_size]. Blocks may come in any order and be
 *   shared between sequences (a common prefix). seqlens_kv is required.
 * - seqlens_kv (i32 [B]) gives Lkv(b); without it Lkv(b) is Skv (dense) or
 *   the packed length. It may be shorter than what the dense or packed
 *   layout holds, never longer. max_seqlen_kv bounds every Lkv(b) (0: the
 *   layout's capacity).
 * q may be dense or packed, k/v dense, packed or paged, in any combination;
 * B is q.shape[0] or cu_seqlens_q.shape[0] - 1, and every other layout must
 * agree. A sequence of length 0 is allowed (queries: nothing to write; keys:
 * o = 0 and lse = -inf).
 * - softcap > 0 replaces each scaled score s by softcap * tanh(s / softcap)
 *   before masking (Gemma 2, Grok); 0: none.
 * Offsets, lengths and block-table entries live on the device and are
 * checked there: a cu_seqlens pair that decreases or leaves the layout, a
 * length past a hint or past the layout, or a block-table entry a sequence
 * uses that lies outside [0, num_blocks) is never followed. The sequence's
 * rows of o (when they can be located) and lse become NaN, and
 * tsr_queue_finish returns TSR_ERROR_INVALID_VALUE naming the first
 * sequence at fault. Few query rows against long keys (decode) run a
 * split-KV kernel where the plugin has one; `tessera explain` names it. */
typedef struct tsr_attention_desc {
  size_t struct_size;
  tsr_tensor q, k, v, o, lse;
  float scale; /* 0: 1/sqrt(D) */
  int32_t causal;
  int64_t window_left;  /* -1: unbounded */
  int64_t window_right; /* -1: unbounded; must be -1 or 0 when causal */
  const char *variant;
  /* ---- appended: serving ---- */
  tsr_tensor cu_seqlens_q;  /* optional i32 [B + 1]: packed queries */
  tsr_tensor cu_seqlens_kv; /* optional i32 [B + 1]: packed keys/values */
  tsr_tensor block_table;   /* optional i32 [B, max_blocks]: paged keys/values */
  tsr_tensor seqlens_kv;    /* optional i32 [B]: key lengths (required when paged) */
  int64_t max_seqlen_q;     /* host bound of the query lengths; 0: from the layout */
  int64_t max_seqlen_kv;    /* host bound of the key lengths; 0: from the layout */
  float softcap;            /* > 0: softcap * tanh(s / softcap); 0: none */
} tsr_attention_desc;

/* Writes one step's keys and values into a paged KV cache (what serving
 * engines call reshape-and-cache): row t of k_new and v_new [T, Hkv, D] goes
 * to row slots[t] % block_size of block slots[t] / block_size of k_cache and
 * v_cache [num_blocks, block_size, Hkv, D]. slots is i32 [T]; a negative slot
 * skips the row (padding). A slot at or past num_blocks * block_size is
 * never written: tsr_queue_finish returns TSR_ERROR_INVALID_VALUE naming the
 * first such row. Two rows naming one slot leave either row there. v_new and
 * v_cache are optional together (a cache of keys only). All four share f32,
 * f16 or bf16; any strides. */
typedef struct tsr_kv_append_desc {
  size_t struct_size;
  tsr_tensor k_new, v_new, k_cache, v_cache, slots;
  const char *variant;
} tsr_kv_append_desc;

/* RMSNorm over the last dimension N of x (rank 1..4):
 * h = x + residual (when residual is given), y = h / sqrt(mean(h^2) + eps) * weight.
 * residual_out (optional) receives h, so a transformer's residual stream is
 * updated in the same pass. weight optional [N]. All share x's shape; x,
 * residual, residual_out and y share a dtype; weight has x's dtype or f32. */
typedef struct tsr_rmsnorm_desc {
  size_t struct_size;
  tsr_tensor x, residual, weight, y, residual_out;
  float eps;
  const char *variant;
} tsr_rmsnorm_desc;

/* LayerNorm over the last dimension: y = (x - mean) / sqrt(var + eps) * weight + bias.
 * weight, bias optional [N] of x's dtype or f32. */
typedef struct tsr_layernorm_desc {
  size_t struct_size;
  tsr_tensor x, weight, bias, y;
  float eps;
  const char *variant;
} tsr_layernorm_desc;

/* Softmax over the last dimension of x (rank 1..4), y = softmax(scale * x).
 * A row of all -inf gives zeros. -inf entries get 0; a NaN or a +inf anywhere
 * in a row makes the whole row NaN. scale * x is taken without overflow, as in
 * exact arithmetic: a huge scale gives 1 at the row's maximum (shared equally
 * by ties) and 0 elsewhere. */
typedef struct tsr_softmax_desc {
  size_t struct_size;
  tsr_tensor x, y;
  float scale; /* 0: 1 */
  const char *variant;
} tsr_softmax_desc;

typedef enum tsr_rope_style {
  TSR_ROPE_NEOX = 0, /* pairs (i, i + rotary_dim/2) */
  TSR_ROPE_GPTJ = 1, /* pairs (2i, 2i + 1) */
  TSR_ROPE_COUNT_ = 2
} tsr_rope_style;

/* Rotary position embedding on x [B, S, H, D] into y (same shape; may be x).
 * Token s has position position_offset + s; pair i of the first rotary_dim
 * channels turns by angle position * theta^(-2i / rotary_dim); channels past
 * rotary_dim are copied. */
typedef struct tsr_rope_desc {
  size_t struct_size;
  tsr_tensor x, y;
  int64_t position_offset;
  float theta;        /* 0: 10000 */
  int32_t rotary_dim; /* 0: D; even, <= D */
  tsr_rope_style style;
  const char *variant;
} tsr_rope_desc;

/* y = silu(gate) * up, elementwise over equal shapes (rank 1..4). */
typedef struct tsr_swiglu_desc {
  size_t struct_size;
  tsr_tensor gate, up, y;
  const char *variant;
} tsr_swiglu_desc;

typedef enum tsr_gelu_approx {
  TSR_GELU_ERF = 0,
  TSR_GELU_TANH = 1,
  TSR_GELU_COUNT_ = 2
} tsr_gelu_approx;

/* y = gelu(x), elementwise (rank 1..4). */
typedef struct tsr_gelu_desc {
  size_t struct_size;
  tsr_tensor x, y;
  tsr_gelu_approx approximate;
  const char *variant;
} tsr_gelu_desc;

/* Per-row cross-entropy: loss[r] = lse(logits[r]) - logits[r, targets[r]],
 * logits [R, V]; targets i32 [R]; loss f32 [R]; lse optional f32 [R].
 * Rows whose target equals ignore_index get loss 0 (lse is still written).
 * Any other target outside [0, V) makes the op fail with
 * TSR_ERROR_INVALID_VALUE when detected on the device (loss is NaN there). */
typedef struct tsr_cross_entropy_desc {
  size_t struct_size;
  tsr_tensor logits, targets, loss, lse;
  int64_t ignore_index; /* the INIT macro sets -100 */
  const char *variant;
} tsr_cross_entropy_desc;

/* Initialisers: zeroed tensors (absent), defaults documented above. */
#define TSR_GEMM_DESC_INIT                                                                         \
  {                                                                                                \
    sizeof(tsr_gemm_desc), {0}, {0}, {0}, {0}, {0}, 1.0f, 0.0f, TSR_ACT_NONE, TSR_COMPUTE_STRICT,  \
        NULL                                                                                       \
  }
#define TSR_GROUPED_GEMM_DESC_INIT                                                                 \
  {                                                                                                \
    sizeof(tsr_grouped_gemm_desc), {0}, {0}, {0}, {0}, NULL, 0, 1.0f, TSR_ACT_NONE,                \
        TSR_COMPUTE_STRICT, NULL                                                                   \
  }
#define TSR_ATTENTION_DESC_INIT                                                                    \
  {                                                                                                \
    sizeof(tsr_attention_desc), {0}, {0}, {0}, {0}, {0}, 0.0f, 0, -1, -1, NULL, {0}, {0}, {0},     \
        {0}, 0, 0, 0.0f                                                                            \
  }
#define TSR_RMSNORM_DESC_INIT                                                                      \
  { sizeof(tsr_rmsnorm_desc), {0}, {0}, {0}, {0}, {0}, 1e-6f, NULL }
#define TSR_LAYERNORM_DESC_INIT                                                                    \
  { sizeof(tsr_layernorm_desc), {0}, {0}, {0}, {0}, 1e-5f, NULL }
#define TSR_SOFTMAX_DESC_INIT                                                                      \
  { sizeof(tsr_softmax_desc), {0}, {0}, 0.0f, NULL }
#define TSR_ROPE_DESC_INIT                                                                         \
  { sizeof(tsr_rope_desc), {0}, {0}, 0, 0.0f, 0, TSR_ROPE_NEOX, NULL }
#define TSR_SWIGLU_DESC_INIT                                                                       \
  { sizeof(tsr_swiglu_desc), {0}, {0}, {0}, NULL }
#define TSR_GELU_DESC_INIT                                                                         \
  { sizeof(tsr_gelu_desc), {0}, {0}, TSR_GELU_ERF, NULL }
#define TSR_CROSS_ENTROPY_DESC_INIT                                                                \
  { sizeof(tsr_cross_entropy_desc), {0}, {0}, {0}, {0}, -100, NULL }
#define TSR_KV_APPEND_DESC_INIT                                                                    \
  { sizeof(tsr_kv_append_desc), {0}, {0}, {0}, {0}, {0}, NULL }

/* Each op validates every argument before anything is queued (see tsr_status),
 * picks a kernel variant (desc->variant, TESSERA_CONFIG, the tuning database,
 * then the plugin's heuristic) and queues the work. */
TSR_API tsr_status tsr_gemm(tsr_queue *queue, const tsr_gemm_desc *desc);
TSR_API tsr_status tsr_grouped_gemm(tsr_queue *queue, const tsr_grouped_gemm_desc *desc);
TSR_API tsr_status tsr_attention(tsr_queue *queue, const tsr_attention_desc *desc);
TSR_API tsr_status tsr_rmsnorm(tsr_queue *queue, const tsr_rmsnorm_desc *desc);
TSR_API tsr_status tsr_layernorm(tsr_queue *queue, const tsr_layernorm_desc *desc);
TSR_API tsr_status tsr_softmax(tsr_queue *queue, const tsr_softmax_desc *desc);
TSR_API tsr_status tsr_rope(tsr_queue *queue, const tsr_rope_desc *desc);
TSR_API tsr_status tsr_swiglu(tsr_queue *queue, const tsr_swiglu_desc *desc);
TSR_API tsr_status tsr_gelu(tsr_queue *queue, const tsr_gelu_desc *desc);
TSR_API tsr_status tsr_cross_entropy(tsr_queue *queue, const tsr_cross_entropy_desc *desc);
TSR_API tsr_status tsr_kv_append(tsr_queue *queue, const tsr_kv_append_desc *desc);

/* Runs any op from its descriptor (`desc` points at the op's tsr_*_desc). */
TSR_API tsr_status tsr_op_run(tsr_queue *queue, tsr_op op, const void *desc);

/* ------------------------------------------------------------------------ */
/* Kernel variants, tuning, explanation                                      */
/* ------------------------------------------------------------------------ */

#define TSR_MAX_VARIANTS 32

typedef enum tsr_choice_rule {
  TSR_CHOICE_OVERRIDE = 0,  /* desc->variant or TESSERA_CONFIG */
  TSR_CHOICE_TUNING_DB = 1, /* a row of a tuning database */
  TSR_CHOICE_HEURISTIC = 2  /* the plugin's built-in choice */
} tsr_choice_rule;

typedef struct tsr_variant_list {
  size_t struct_size;
  uint32_t count;
  char names[TSR_MAX_VARIANTS][64];
  char descriptions[TSR_MAX_VARIANTS][160];
} tsr_variant_list;

typedef struct tsr_choice {
  size_t struct_size;
  char variant[64];
  tsr_choice_rule rule;
  char shape_class[96]; /* the database key for this problem */
  char device_key[256];
  char source[1024]; /* override origin, database file:line, or the heuristic's reason */
} tsr_choice;

/* The kernel variants the device has for this op and problem (every one that
 * can run it). `desc` is validated as by the op. */
TSR_API tsr_status tsr_op_variants(tsr_device *device, tsr_op op, const void *desc,
                                   tsr_variant_list *out);
/* Which variant the op would use on this device, and why. */
TSR_API tsr_status tsr_op_explain(tsr_device *device, tsr_op op, const void *desc, tsr_choice *out);
/* Appends (or replaces) the tuning row "device-key op dtype shape-class
 * variant" for this problem in the file `path` (NULL: the user database,
 * TESSERA_TUNING_DB or $XDG_CACHE_HOME/tessera/tuning.tsv). The variant must
 * be one of tsr_op_variants(). */
TSR_API tsr_status tsr_tuning_record(tsr_device *device, tsr_op op, const void *desc,
                                     const char *variant, const char *path);
/* The user tuning database path into buf (created directories not included). */
TSR_API tsr_status tsr_tuning_user_path(char *buf, size_t capacity);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_TESSERA_H */
