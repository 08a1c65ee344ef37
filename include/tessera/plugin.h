/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tessera plugin ABI.
 *
 * The only contract between libtessera (the core) and a backend plugin. A
 * plugin is a shared library that does NOT link against libtessera. It exports
 * two symbols:
 *
 *   uint32_t tsr_plugin_negotiate(uint32_t core_max_abi);
 *       The core offers the highest ABI version it speaks; the plugin answers
 *       with the highest version it speaks that is <= core_max_abi, or 0 when
 *       it speaks none of them.
 *
 *   const void *tsr_plugin_entry(uint32_t abi);
 *       The function table for that version (abi 2: tsr_plugin_v2, abi 1:
 *       tsr_plugin_v1), which stays valid while the library is loaded.
 *
 * ABI 2 is the op path of choose-once: the core asks op_select for a config
 * of a problem once, caches it per problem signature (below), and a repeated
 * call is validation, a cache hit and op_run(config). ABI 1 plugins keep
 * loading; their op_run takes the variant's name instead of a config.
 * tessera/plugin_helper.h holds what every plugin would otherwise repeat.
 *
 * Rules that keep the ABI stable:
 * - Every table and argument struct starts with its size; fields are only
 *   appended. A reader checks struct_size before touching a later field.
 * - A NULL function pointer means "not supported"; the core says so to users.
 * - The core validates every op argument before a plugin sees it: a plugin may
 *   rely on shapes, dtypes, ranks and bounds being consistent (see each args
 *   struct), and only has to say whether it can run the case.
 * - A plugin loads on a machine without its vendor runtime: it dlopens the
 *   runtime in init and reports zero devices (with the reason logged at debug
 *   level) when it is missing.
 * - Functions return tsr_status values; on failure a plugin may describe the
 *   problem through host->set_error before returning.
 */
#ifndef TESSERA_PLUGIN_H
#define TESSERA_PLUGIN_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The highest ABI version this header describes (and the core speaks). */
#define TSR_PLUGIN_ABI_VERSION 2
#define TSR_PLUGIN_NEGOTIATE_SYMBOL "tsr_plugin_negotiate"
#define TSR_PLUGIN_ENTRY_SYMBOL "tsr_plugin_entry"

typedef uint32_t (*tsr_plugin_negotiate_fn)(uint32_t core_max_abi);
typedef const void *(*tsr_plugin_entry_fn)(uint32_t abi);

/* ------------------------------------------------------------------------ */
/* Host services: what the core offers a plugin (passed to init)             */
/* ------------------------------------------------------------------------ */

typedef struct tsr_host_services {
  uint32_t struct_size;
  uint32_t abi_version;
  /* Logs a message at a tsr_log_level; the core prefixes the plugin name. */
  void (*log)(void *host_handle, int level, const char *fmt, ...)
      __attribute__((format(printf, 3, 4)));
  /* Sets the detail of the error the current call is about to return; the
   * core turns it into tsr_last_error() ("tsr_gemm: <detail>"). */
  void (*set_error)(void *host_handle, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
  void *(*alloc)(size_t bytes);
  void (*free)(void *pointer);
  /* Environment lookup, NULL in setuid programs for the core's own paths. */
  const char *(*get_env)(const char *name);
  /* Looks up the tuning database (user file first, then system files) for a
   * row; writes the variant and returns 1 when found, 0 otherwise. */
  int (*tuning_lookup)(void *host_handle, const char *device_key, const char *op, const char *dtype,
                       const char *shape_class, char *variant, size_t capacity);
  void *host_handle; /* first argument of log, set_error, tuning_lookup */
} tsr_host_services;

/* ABI 2: what a plugin uses of the core. Environment reads belong in init and
 * device_open, never on the op path (docs/PLUGINS.md). */
typedef struct tsr_host_services_v2 {
  uint32_t struct_size;
  uint32_t abi_version;
  /* Logs a message at a tsr_log_level; the core prefixes the plugin name. */
  void (*log)(void *host_handle, int level, const char *fmt, ...)
      __attribute__((format(printf, 3, 4)));
  /* Sets the detail of the error the current call is about to return. */
  void (*set_error)(void *host_handle, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
  /* Environment lookup (NULL in setuid programs for the core's own paths). */
  const char *(*get_env)(const char *name);
  void *host_handle; /* first argument of log and set_error */
} tsr_host_services_v2;

/* ------------------------------------------------------------------------ */
/* Tensors and op arguments as plugins receive them                          */
/* ------------------------------------------------------------------------ */

/* A validated tensor. `buffer` is the plugin's own buffer handle (from
 * buffer_alloc); NULL means the optional tensor is absent. Validation has
 * checked that every element lies inside the buffer. */
typedef struct tsr_plugin_tensor {
  void *buffer;
  uint64_t offset; /* bytes */
  int32_t dtype;   /* tsr_dtype */
  int32_t rank;
  int64_t shape[TSR_MAX_RANK];
  int64_t strides[TSR_MAX_RANK]; /* elements */
} tsr_plugin_tensor;

/* gemm: a [batch, M, K], b [batch, K, N], d [batch, M, N] (always rank 3: the
 * core adds a batch of 1 with stride 0 for 2-D calls); c absent or as d; bias
 * absent or rank 1 [N]. alpha, beta as given (beta is 0 when c is absent). */
typedef struct tsr_gemm_args {
  uint32_t struct_size;
  tsr_plugin_tensor a, b, c, bias, d;
  float alpha, beta;
  int32_t activation; /* tsr_activation */
  int32_t compute;    /* tsr_compute_mode */
} tsr_gemm_args;

/* grouped gemm: a [T, K], b [G, K, N], bias absent or [G, N], d [T, N].
 * group_sizes (G entries, sum T) is core memory valid during the call only:
 * a plugin that runs the op later copies it. */
typedef struct tsr_grouped_gemm_args {
  uint32_t struct_size;
  tsr_plugin_tensor a, b, bias, d;
  const int64_t *group_sizes;
  int64_t group_count;
  float alpha;
  int32_t activation;
  int32_t compute;
} tsr_grouped_gemm_args;

/* attention: q [B, Sq, Hq, D], k/v [B, Skv, Hkv, D], o like q, lse absent or
 * f32 [B, Hq, Sq]. scale already resolved (never 0). window_right is 0 when
 * causal was asked. Windows are -1 (unbounded) or 0 <= window_left < Skv and
 * 0 <= window_right < Sq: the core passes wider or negative ones as -1, so
 * position +- window never overflows.
 *
 * Serving (appended; read them only when struct_size covers them, and a
 * plugin built before them never gets a problem that uses them: the core
 * sends those only to devices whose op_mask has TSR_OP_KV_APPEND). The
 * layouts are tessera.h's tsr_attention_desc:
 * - cu_seqlens_q present: q, o [total_q, Hq, D] (rank 3), lse [Hq, total_q].
 * - cu_seqlens_kv present: k, v [total_kv, Hkv, D] (rank 3).
 * - block_table present: k, v [num_blocks, block_size, Hkv, D], block_size a
 *   multiple of 8; seqlens_kv then present.
 * - batch is B; max_seqlen_q and max_seqlen_kv are resolved bounds (never 0
 *   unless every length is 0): dense q gives Sq, dense k Skv. Windows are
 *   normalised against these bounds as above.
 * - softcap: 0 none, else > 0 and finite.
 * The i32 tensors are device data: a kernel checks what it uses (offsets
 * non-decreasing within the layout, lengths within the layout and the bounds,
 * block entries in [0, num_blocks)) and reports a fault through its queue
 * (TSR_PLUGIN_FAULT_*, tsr_plugin_fault_report), writing NaN into o and lse
 * of the sequence where it can. Their alignment is not in the op cache's
 * signature: read them as plain int32 at any 4-byte address. */
typedef struct tsr_attention_args {
  uint32_t struct_size;
  tsr_plugin_tensor q, k, v, o, lse;
  float scale;
  int32_t causal;
  int64_t window_left, window_right;
  /* ---- appended: serving ---- */
  tsr_plugin_tensor cu_seqlens_q, cu_seqlens_kv, block_table, seqlens_kv;
  int64_t batch;
  int64_t max_seqlen_q, max_seqlen_kv;
  float softcap;
  int32_t reserved;
} tsr_attention_args;

/* True when a problem uses any serving field (a plugin that has only the dense
 * kernels declines these). */
static inline int tsr_plugin_attention_is_serving(const tsr_attention_args *a) {
  return a->struct_size >= sizeof(tsr_attention_args) &&
         (a->cu_seqlens_q.buffer || a->cu_seqlens_kv.buffer || a->block_table.buffer ||
          a->seqlens_kv.buffer || a->softcap != 0.0f);
}

/* Faults kernels find in device-resident indices (cross-entropy targets,
 * attention offsets and block tables, kv_append slots), reported by
 * queue_finish. A GPU plugin keeps TSR_PLUGIN_FAULT_COUNT int32 words per
 * queue, each the smallest index at fault of its kind (an atomic min), reset
 * to TSR_PLUGIN_FAULT_NONE; the CPU plugin records them directly. */
enum {
  TSR_PLUGIN_FAULT_CE_TARGET = 0,     /* cross_entropy: the row */
  TSR_PLUGIN_FAULT_CU_SEQLENS_Q = 1,  /* attention: the sequence b */
  TSR_PLUGIN_FAULT_CU_SEQLENS_KV = 2, /* attention: b */
  TSR_PLUGIN_FAULT_SEQLENS_KV = 3,    /* attention: b (negative or past the layout) */
  TSR_PLUGIN_FAULT_BLOCK_TABLE = 4,   /* attention: b (an entry outside the cache) */
  TSR_PLUGIN_FAULT_MAX_SEQLEN_Q = 5,  /* attention: b (longer than max_seqlen_q) */
  TSR_PLUGIN_FAULT_MAX_SEQLEN_KV = 6, /* attention: b (longer than max_seqlen_kv) */
  TSR_PLUGIN_FAULT_KV_SLOT = 7,       /* kv_append: the row t */
  TSR_PLUGIN_FAULT_COUNT = 8
};
#define TSR_PLUGIN_FAULT_NONE 0x7fffffff

/* Sequence b of a serving attention problem, read from host copies of the
 * index tensors (each pointer at the tensor's first element, or NULL when
 * absent): what the CPU plugin and the reference use, and what every GPU
 * kernel must decide the same way. Checks, in order: cu_seqlens_q, then the
 * keys' layout (cu_seqlens_kv), seqlens_kv against it, the two bounds, then
 * every block-table entry covering keys [0, kv_len). */
typedef struct tsr_plugin_attention_seq {
  int64_t q_first;   /* packed: first row of q; dense: 0 (row 0 of batch b) */
  int64_t q_len;     /* Lq(b) */
  int64_t kv_first;  /* packed keys: first row of k; otherwise 0 */
  int64_t kv_len;    /* Lkv(b) */
  int32_t fault;     /* a TSR_PLUGIN_FAULT_* kind, or -1 */
  int32_t q_located; /* nonzero when q_first and q_len are meaningful */
} tsr_plugin_attention_seq;

static inline tsr_plugin_attention_seq tsr_plugin_attention_seq_of(const tsr_attention_args *a,
                                                                   int64_t b, const int32_t *cu_q,
                                                                   const int32_t *cu_kv,
                                                                   const int32_t *block_table,
                                                                   const int32_t *seqlens_kv) {
  tsr_plugin_attention_seq s = {0, 0, 0, 0, -1, 1};
  int serving = a->struct_size >= sizeof(tsr_attention_args);
  if (serving && cu_q) {
    int64_t lo = cu_q[b * a->cu_seqlens_q.strides[0]];
    int64_t hi = cu_q[(b + 1) * a->cu_seqlens_q.strides[0]];
    if (lo < 0 || hi < lo || hi > a->q.shape[0]) {
      s.fault = TSR_PLUGIN_FAULT_CU_SEQLENS_Q;
      s.q_located = 0;
      return s;
    }
    s.q_first = lo;
    s.q_len = hi - lo;
  } else {
    s.q_len = a->q.shape[1];
  }
  int64_t capacity;
  if (serving && cu_kv) {
    int64_t lo = cu_kv[b * a->cu_seqlens_kv.strides[0]];
    int64_t hi = cu_kv[(b + 1) * a->cu_seqlens_kv.strides[0]];
    if (lo < 0 || hi < lo || hi > a->k.shape[0]) {
      s.fault = TSR_PLUGIN_FAULT_CU_SEQLENS_KV;
      return s;
    }
    s.kv_first = lo;
    capacity = hi - lo;
  } else if (serving && block_table) {
    capacity = a->block_table.shape[1] * a->k.shape[1];
  } else {
    capacity = a->k.shape[1];
  }
  s.kv_len = capacity;
  if (serving && seqlens_kv) {
    int64_t len = seqlens_kv[b * a->seqlens_kv.strides[0]];
    if (len < 0 || len > capacity) {
      s.fault = TSR_PLUGIN_FAULT_SEQLENS_KV;
      return s;
    }
    s.kv_len = len;
  }
  /* a bound of 0 is none (args filled by hand with the serving fields zeroed;
   * the core resolves both) */
  if (serving && a->max_seqlen_q > 0 && s.q_len > a->max_seqlen_q) {
    s.fault = TSR_PLUGIN_FAULT_MAX_SEQLEN_Q;
    return s;
  }
  if (serving && a->max_seqlen_kv > 0 && s.kv_len > a->max_seqlen_kv) {
    s.fault = TSR_PLUGIN_FAULT_MAX_SEQLEN_KV;
    return s;
  }
  if (serving && block_table) {
    const int64_t block_size = a->k.shape[1], blocks = (s.kv_len + block_size - 1) / block_size;
    for (int64_t j = 0; j < blocks; j++) {
      int64_t e = block_table[b * a->block_table.strides[0] + j * a->block_table.strides[1]];
      if (e < 0 || e >= a->k.shape[0]) {
        s.fault = TSR_PLUGIN_FAULT_BLOCK_TABLE;
        return s;
      }
    }
  }
  return s;
}

/* kv_append: k_new [T, Hkv, D], k_cache [num_blocks, block_size, Hkv, D],
 * slots i32 [T]; v_new and v_cache absent together or shaped as the k ones.
 * Slots are device data: negative skips, >= num_blocks * block_size is a
 * fault (TSR_PLUGIN_FAULT_KV_SLOT, the row not written). */
typedef struct tsr_kv_append_args {
  uint32_t struct_size;
  tsr_plugin_tensor k_new, v_new, k_cache, v_cache, slots;
} tsr_kv_append_args;

/* Row ops: the last dimension is the row; earlier dimensions (any strides)
 * index the rows. tsr_plugin_row_count / tsr_plugin_row_offset walk them. */
typedef struct tsr_rmsnorm_args {
  uint32_t struct_size;
  tsr_plugin_tensor x, residual, weight, y, residual_out;
  float eps;
} tsr_rmsnorm_args;

typedef struct tsr_layernorm_args {
  uint32_t struct_size;
  tsr_plugin_tensor x, weight, bias, y;
  float eps;
} tsr_layernorm_args;

typedef struct tsr_softmax_args {
  uint32_t struct_size;
  tsr_plugin_tensor x, y;
  float scale; /* resolved, positive */
} tsr_softmax_args;

/* rope: x, y [B, S, H, D]; theta and rotary_dim resolved (never 0). */
typedef struct tsr_rope_args {
  uint32_t struct_size;
  tsr_plugin_tensor x, y;
  int64_t position_offset;
  float theta;
  int32_t rotary_dim;
  int32_t style; /* tsr_rope_style */
} tsr_rope_args;

typedef struct tsr_swiglu_args {
  uint32_t struct_size;
  tsr_plugin_tensor gate, up, y;
} tsr_swiglu_args;

typedef struct tsr_gelu_args {
  uint32_t struct_size;
  tsr_plugin_tensor x, y;
  int32_t approximate; /* tsr_gelu_approx */
} tsr_gelu_args;

/* cross entropy: logits [R, V], targets i32 [R], loss f32 [R], lse absent or
 * f32 [R]. */
typedef struct tsr_cross_entropy_args {
  uint32_t struct_size;
  tsr_plugin_tensor logits, targets, loss, lse;
  int64_t ignore_index;
} tsr_cross_entropy_args;

/* ------------------------------------------------------------------------ */
/* Kernel variants                                                           */
/* ------------------------------------------------------------------------ */

#define TSR_PLUGIN_MAX_VARIANTS 32

typedef struct tsr_plugin_variant {
  char name[64];         /* stable: used in tuning rows and overrides */
  char description[160]; /* parameters, for `tessera explain` */
} tsr_plugin_variant;

typedef struct tsr_plugin_variant_list {
  uint32_t struct_size;
  uint32_t count;    /* variants that can run this problem */
  int32_t heuristic; /* index the built-in heuristic picks */
  char reason[256];  /* why the heuristic picked it */
  tsr_plugin_variant variants[TSR_PLUGIN_MAX_VARIANTS];
} tsr_plugin_variant_list;

/* ------------------------------------------------------------------------ */
/* The function table, ABI version 1                                         */
/* ------------------------------------------------------------------------ */

typedef struct tsr_plugin_v1 {
  uint32_t struct_size;
  uint32_t abi_version; /* 1 */
  const char *name;     /* backend name: "cpu", "cuda", ... */
  const char *version;  /* the plugin's own version string */

  /* Loads the vendor runtime and enumerates devices. Returning an error makes
   * the core skip the plugin (with `reason` in its report); no runtime or no
   * device is not an error: return TSR_OK and report zero devices. */
  tsr_status (*init)(const tsr_host_services *host, void **plugin, char *reason,
                     size_t reason_capacity);
  void (*shutdown)(void *plugin);

  uint32_t (*device_count)(void *plugin);
  /* Fills the fields it knows; the core fills backend, selector, device_key. */
  tsr_status (*device_info)(void *plugin, uint32_t index, tsr_device_info *info);
  tsr_status (*device_open)(void *plugin, uint32_t index, void **device);
  void (*device_close)(void *device);

  tsr_status (*buffer_alloc)(void *device, uint64_t bytes, void **buffer);
  void (*buffer_free)(void *device, void *buffer);
  /* Host address of a buffer's first byte; NULL when not host visible. */
  void *(*buffer_host_pointer)(void *device, void *buffer);

  tsr_status (*queue_create)(void *device, void **queue);
  void (*queue_destroy)(void *queue);
  /* Waits for the queue; returns (and clears) the first deferred op error. */
  tsr_status (*queue_finish)(void *queue);
  /* Ordered after earlier work; write returns when src may be reused, read
   * when dst holds the data. */
  tsr_status (*buffer_write)(void *queue, void *buffer, uint64_t offset, const void *src,
                             uint64_t bytes);
  tsr_status (*buffer_read)(void *queue, void *buffer, uint64_t offset, void *dst, uint64_t bytes);
  tsr_status (*buffer_copy)(void *queue, void *src, uint64_t src_offset, void *dst,
                            uint64_t dst_offset, uint64_t bytes);

  tsr_status (*event_record)(void *queue, void **event);
  tsr_status (*event_wait)(void *event);
  tsr_status (*event_elapsed_ms)(void *start, void *end, double *ms);
  void (*event_destroy)(void *event);

  /* TSR_OK when the device can run this exact validated problem; otherwise
   * TSR_ERROR_UNSUPPORTED with the reason through host->set_error. `args`
   * points at the op's tsr_*_args. */
  tsr_status (*op_supported)(void *device, tsr_op op, const void *args);
  /* Lists the variants that can run the problem and the heuristic's pick. */
  tsr_status (*op_variants)(void *device, tsr_op op, const void *args,
                            tsr_plugin_variant_list *out);
  /* Queues the op with the named variant (one of op_variants' names). */
  tsr_status (*op_run)(void *queue, tsr_op op, const void *args, const char *variant);

  /* Wraps external memory as a buffer without copying; `kind` is a
   * tsr_external_kind, `handle` the pointer (a CUdeviceptr cast through
   * uintptr_t for TSR_EXTERNAL_CUDA_DEVICE_POINTER). buffer_free on such a
   * buffer releases only the wrapper. NULL, or TSR_ERROR_UNSUPPORTED for a
   * kind, when the plugin cannot use that memory. */
  tsr_status (*buffer_wrap)(void *device, int32_t kind, void *handle, uint64_t bytes,
                            void **buffer);
} tsr_plugin_v1;

/* ------------------------------------------------------------------------ */
/* The function table, ABI version 2                                         */
/* ------------------------------------------------------------------------ */

/* What op_select answers: an opaque config the core hands back to op_run,
 * and the variant's name (for explain, tuning rows and errors). Both stay
 * valid until device_close of the device that made them. */
typedef struct tsr_plugin_selection {
  uint32_t struct_size;
  const void *config;
  const char *name;
} tsr_plugin_selection;

/* The problem signature under which the core caches op_select's answer:
 * everything in the args struct except the buffer handles (only whether a
 * tensor is present), byte offsets (only the alignment, up to 256 bytes, of
 * the address they make), rope's position_offset and grouped gemm's
 * group_sizes (only their count). Two problems with one signature share a
 * config, so op_supported, op_variants and op_select must answer the same for
 * both, and op_run(config) must run either. */

typedef struct tsr_plugin_v2 {
  uint32_t struct_size;
  uint32_t abi_version; /* 2 */
  const char *name;     /* backend name: "cpu", "cuda", ... */
  const char *version;  /* the plugin's own version string */

  /* As in ABI 1, with the ABI 2 host services. */
  tsr_status (*init)(const tsr_host_services_v2 *host, void **plugin, char *reason,
                     size_t reason_capacity);
  void (*shutdown)(void *plugin);

  uint32_t (*device_count)(void *plugin);
  tsr_status (*device_info)(void *plugin, uint32_t index, tsr_device_info *info);
  tsr_status (*device_open)(void *plugin, uint32_t index, void **device);
  void (*device_close)(void *device);

  tsr_status (*buffer_alloc)(void *device, uint64_t bytes, void **buffer);
  void (*buffer_free)(void *device, void *buffer);
  void *(*buffer_host_pointer)(void *device, void *buffer);

  tsr_status (*queue_create)(void *device, void **queue);
  void (*queue_destroy)(void *queue);
  tsr_status (*queue_finish)(void *queue);
  tsr_status (*buffer_write)(void *queue, void *buffer, uint64_t offset, const void *src,
                             uint64_t bytes);
  tsr_status (*buffer_read)(void *queue, void *buffer, uint64_t offset, void *dst, uint64_t bytes);
  tsr_status (*buffer_copy)(void *queue, void *src, uint64_t src_offset, void *dst,
                            uint64_t dst_offset, uint64_t bytes);

  tsr_status (*event_record)(void *queue, void **event);
  tsr_status (*event_wait)(void *event);
  tsr_status (*event_elapsed_ms)(void *start, void *end, double *ms);
  void (*event_destroy)(void *event);

  tsr_status (*buffer_wrap)(void *device, int32_t kind, void *handle, uint64_t bytes,
                            void **buffer);

  /* As in ABI 1; the core calls them once per problem signature (and for
   * tune and explain), not per op call. */
  tsr_status (*op_supported)(void *device, tsr_op op, const void *args);
  tsr_status (*op_variants)(void *device, tsr_op op, const void *args,
                            tsr_plugin_variant_list *out);
  /* The config of variant `variant` (one of op_variants' names; NULL: the
   * heuristic's pick) for this problem. TSR_ERROR_NOT_FOUND when that variant
   * cannot run it. May prepare per-device state (load a kernel). */
  tsr_status (*op_select)(void *device, tsr_op op, const void *args, const char *variant,
                          tsr_plugin_selection *out);
  /* Queues the op with a config op_select gave for a problem of the same
   * signature. The steady-state path: no environment reads, no string
   * formatting, no variant lists. */
  tsr_status (*op_run)(void *queue, tsr_op op, const void *args, const void *config);

  /* ---- Appended to ABI 2 (interop). The core reads an entry below only
   * when the table's struct_size covers it, so a plugin built before they
   * existed keeps loading (with both treated as NULL). ---- */

  /* The native address of byte 0 of a buffer (one from buffer_alloc or
   * buffer_wrap) and its kind: TSR_EXTERNAL_HOST_POINTER for memory the host
   * can address, TSR_EXTERNAL_CUDA_DEVICE_POINTER (a CUdeviceptr of the
   * device's primary context), TSR_EXTERNAL_HIP_DEVICE_POINTER. Used to hand
   * tensors to other libraries (DLPack); the address must stay valid until
   * buffer_free. NULL, or TSR_ERROR_UNSUPPORTED, when the memory has no such
   * address (Vulkan, OpenCL): the core then falls back to
   * buffer_host_pointer. */
  tsr_status (*buffer_export)(void *buffer, int32_t *kind, uint64_t *address);
  /* A queue over the caller's native stream: `kind` is
   * TSR_EXTERNAL_CUDA_STREAM or TSR_EXTERNAL_HIP_STREAM, `stream` the
   * CUstream / hipStream_t cast through uintptr_t (0: the default stream).
   * Every queue entry works on it: ops and copies are queued on that stream
   * in the order the core calls them, with no synchronisation added, and
   * queue_finish synchronises the stream. queue_destroy on such a queue
   * releases only the wrapper, never the stream. NULL, or
   * TSR_ERROR_UNSUPPORTED (with a sentence) for a kind the device cannot
   * use. */
  tsr_status (*queue_wrap)(void *device, int32_t kind, uint64_t stream, void **queue);

  /* ---- Appended to ABI 2 (several devices). Read only when struct_size
   * covers them; a plugin without them still runs everything on one device,
   * and the core then does waits and copies across devices on the calling
   * thread. ---- */

  /* Work queued on `queue` after this call starts only once `event` (one of
   * this plugin's events, of this device or another) has passed; the calling
   * thread does not wait. TSR_ERROR_UNSUPPORTED, without a sentence, when the
   * device cannot wait for that event itself (an event of another device
   * where the API has no shared sync object): the core then waits for it on
   * the host in a helper thread and releases the queue through a gate. The
   * event's queue is not locked during this call; event_flush ran on it
   * first. */
  tsr_status (*queue_wait_event)(void *queue, void *event);
  /* Makes sure `event` will pass without any further call on its queue
   * (submits a command buffer still being recorded). Called under the
   * queue's lock; afterwards event_wait(event) may run on any thread without
   * that lock, alongside other calls on the queue. NULL: event_wait never
   * needs the queue's lock. */
  tsr_status (*event_flush)(void *event);
  /* A gate: work queued on `queue` after this call starts only after
   * gate_open(*gate). queue_finish, event waits and queue_destroy wait for it
   * as for any queued work. gate_open is called exactly once per gate, from
   * any thread, without the queue's lock, and frees the gate; the core keeps
   * the queue alive until it returns. Gates of one queue may be opened in any
   * order; each holds only the work queued after it. */
  tsr_status (*queue_gate)(void *queue, void **gate);
  void (*gate_open)(void *gate);
  /* Queues a copy of `bytes` from `src` (a buffer of src_device) to `dst` (of
   * dst_device), two devices of this plugin of which the queue's device is
   * one, peer to peer where the hardware allows. It is ordered on `queue`
   * only: the other device's queues are ordered by the caller with events.
   * TSR_ERROR_UNSUPPORTED, without a sentence, when the devices cannot copy
   * between them: the core then stages the copy through host memory. */
  tsr_status (*buffer_copy_peer)(void *queue, void *src_device, void *src, uint64_t src_offset,
                                 void *dst_device, void *dst, uint64_t dst_offset, uint64_t bytes);
} tsr_plugin_v2;

/* The struct_size of the first ABI 2 table: the smallest the core accepts.
 * Entries after it were appended and are read only when struct_size covers
 * them. */
#define TSR_PLUGIN_V2_MIN_SIZE offsetof(tsr_plugin_v2, buffer_export)

/* ------------------------------------------------------------------------ */
/* Helpers for plugin authors (header-only: plugins do not link libtessera)   */
/* ------------------------------------------------------------------------ */

/* f16/bf16 conversions: tsr_f16_to_f32, tsr_f32_to_f16, tsr_bf16_to_f32 and
 * tsr_f32_to_bf16 are static inline in tessera.h (included above), shared
 * with applications. */

/* Room for the args of any op, for plugins (and tools) that keep a copy. */
typedef union tsr_plugin_any_args {
  tsr_gemm_args gemm;
  tsr_grouped_gemm_args grouped_gemm;
  tsr_attention_args attention;
  tsr_rmsnorm_args rmsnorm;
  tsr_layernorm_args layernorm;
  tsr_softmax_args softmax;
  tsr_rope_args rope;
  tsr_swiglu_args swiglu;
  tsr_gelu_args gelu;
  tsr_cross_entropy_args cross_entropy;
  tsr_kv_append_args kv_append;
} tsr_plugin_any_args;

/* Bytes per element of a dtype; 0 for an invalid one. */
static inline size_t tsr_plugin_dtype_size(int32_t dtype) {
  switch (dtype) {
  case TSR_DTYPE_F32:
  case TSR_DTYPE_I32:
    return 4;
  case TSR_DTYPE_F16:
  case TSR_DTYPE_BF16:
    return 2;
  default:
    return 0;
  }
}

/* Size of the args struct of an op (what op_run's `args` points at); 0 for
 * an unknown op. A plugin that runs ops later copies this many bytes. */
static inline size_t tsr_plugin_args_size(tsr_op op) {
  switch (op) {
  case TSR_OP_GEMM:
    return sizeof(tsr_gemm_args);
  case TSR_OP_GROUPED_GEMM:
    return sizeof(tsr_grouped_gemm_args);
  case TSR_OP_ATTENTION:
    return sizeof(tsr_attention_args);
  case TSR_OP_RMSNORM:
    return sizeof(tsr_rmsnorm_args);
  case TSR_OP_LAYERNORM:
    return sizeof(tsr_layernorm_args);
  case TSR_OP_SOFTMAX:
    return sizeof(tsr_softmax_args);
  case TSR_OP_ROPE:
    return sizeof(tsr_rope_args);
  case TSR_OP_SWIGLU:
    return sizeof(tsr_swiglu_args);
  case TSR_OP_GELU:
    return sizeof(tsr_gelu_args);
  case TSR_OP_CROSS_ENTROPY:
    return sizeof(tsr_cross_entropy_args);
  case TSR_OP_KV_APPEND:
    return sizeof(tsr_kv_append_args);
  default:
    return 0;
  }
}

/* Reads element `index` (in elements from base) of a dtype as float. */
static inline float tsr_load_as_f32(const void *base, int32_t dtype, int64_t index) {
  switch (dtype) {
  case TSR_DTYPE_F32:
    return ((const float *)base)[index];
  case TSR_DTYPE_F16:
    return tsr_f16_to_f32(((const uint16_t *)base)[index]);
  case TSR_DTYPE_BF16:
    return tsr_bf16_to_f32(((const uint16_t *)base)[index]);
  case TSR_DTYPE_I32:
    return (float)((const int32_t *)base)[index];
  default:
    return NAN;
  }
}

static inline void tsr_store_from_f32(void *base, int32_t dtype, int64_t index, float value) {
  switch (dtype) {
  case TSR_DTYPE_F32:
    ((float *)base)[index] = value;
    break;
  case TSR_DTYPE_F16:
    ((uint16_t *)base)[index] = tsr_f32_to_f16(value);
    break;
  case TSR_DTYPE_BF16:
    ((uint16_t *)base)[index] = tsr_f32_to_bf16(value);
    break;
  case TSR_DTYPE_I32:
    ((int32_t *)base)[index] = (int32_t)value;
    break;
  default:
    break;
  }
}

/* Rows of a row-op tensor: the product of all but the last extent. */
static inline int64_t tsr_plugin_row_count(const tsr_plugin_tensor *t) {
  int64_t rows = 1;
  for (int32_t i = 0; i + 1 < t->rank; i++)
    rows *= t->shape[i];
  return rows;
}

/* Element offset (from the tensor's first element) of the start of row `row`,
 * rows numbered in row-major order of the leading extents. */
static inline int64_t tsr_plugin_row_offset(const tsr_plugin_tensor *t, int64_t row) {
  int64_t offset = 0;
  for (int32_t i = t->rank - 2; i >= 0; i--) {
    int64_t extent = t->shape[i];
    offset += (row % extent) * t->strides[i];
    row /= extent;
  }
  return offset;
}

/* Element offset of a full index (rank entries). */
static inline int64_t tsr_plugin_element_offset(const tsr_plugin_tensor *t, const int64_t *index) {
  int64_t offset = 0;
  for (int32_t i = 0; i < t->rank; i++)
    offset += index[i] * t->strides[i];
  return offset;
}

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_PLUGIN_H */
