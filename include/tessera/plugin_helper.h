/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tessera plugin helpers: what every ABI 2 plugin would otherwise repeat.
 *
 * Header-only (plugins do not link libtessera), installed beside plugin.h.
 * - tsr_plugin_host: the init preamble (checking and copying the core's host
 *   services) and the log / error calls; error sentences start with the
 *   plugin's name as docs/PLUGINS.md asks.
 * - tsr_plugin_args_copy: the op args copied at the size both sides know.
 * - variant lists: adding rows, and serving op_variants to a caller whose
 *   list struct may be older (shorter) than this header's.
 * - named rows: finding a config row by variant name.
 * - TSR_PLUGIN_EXPORT_V2: the two exported symbols of an ABI 2 plugin.
 */
#ifndef TESSERA_PLUGIN_HELPER_H
#define TESSERA_PLUGIN_HELPER_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest log or error sentence a plugin passes on; longer ones are cut. */
#define TSR_PLUGIN_MESSAGE_CAPACITY 512

/* ---- host services ---- */

typedef struct tsr_plugin_host {
  tsr_host_services_v2 services; /* a copy: the core's table need not outlive init */
  const char *name;              /* the plugin's name, first word of every sentence */
} tsr_plugin_host;

/* The init preamble: keeps the plugin name and copies the fields of `services`
 * the core provided (an older core may pass a shorter table: the rest stay
 * NULL). TSR_ERROR_NULL_ARGUMENT or TSR_ERROR_STRUCT_SIZE, with `reason`
 * written, when the table is missing or too short to hold host_handle. */
static inline tsr_status tsr_plugin_host_init(tsr_plugin_host *host, const char *name,
                                              const tsr_host_services_v2 *services, char *reason,
                                              size_t reason_capacity) {
  memset(host, 0, sizeof *host);
  host->name = name;
  const size_t needed = offsetof(tsr_host_services_v2, host_handle) + sizeof(void *);
  if (!services || services->struct_size < needed) {
    if (reason && reason_capacity)
      snprintf(reason, reason_capacity, "%s: host services are %s (struct_size %u, need %zu)", name,
               services ? "too short" : "missing", services ? services->struct_size : 0u, needed);
    return services ? TSR_ERROR_STRUCT_SIZE : TSR_ERROR_NULL_ARGUMENT;
  }
  size_t size =
      services->struct_size < sizeof host->services ? services->struct_size : sizeof host->services;
  memcpy(&host->services, services, size);
  host->services.struct_size = (uint32_t)size;
  return TSR_OK;
}

static inline void tsr_plugin_log_v(const tsr_plugin_host *host, int level, const char *fmt,
                                    va_list ap) {
  if (!host->services.log)
    return;
  char message[TSR_PLUGIN_MESSAGE_CAPACITY];
  vsnprintf(message, sizeof message, fmt, ap);
  host->services.log(host->services.host_handle, level, "%s", message);
}

/* Logs a message at a tsr_log_level (the core names the plugin). */
static inline void tsr_plugin_log(const tsr_plugin_host *host, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void tsr_plugin_log(const tsr_plugin_host *host, int level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tsr_plugin_log_v(host, level, fmt, ap);
  va_end(ap);
}

static inline tsr_status tsr_plugin_fail_v(const tsr_plugin_host *host, tsr_status status,
                                           const char *fmt, va_list ap) {
  if (host->services.set_error) {
    char message[TSR_PLUGIN_MESSAGE_CAPACITY];
    vsnprintf(message, sizeof message, fmt, ap);
    host->services.set_error(host->services.host_handle, "%s: %s", host->name, message);
  }
  return status;
}

/* Sets the error sentence "<plugin>: <message>" and returns `status`, so a
 * failing path reads `return tsr_plugin_fail(host, TSR_ERROR_..., ...)`. */
static inline tsr_status tsr_plugin_fail(const tsr_plugin_host *host, tsr_status status,
                                         const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline tsr_status tsr_plugin_fail(const tsr_plugin_host *host, tsr_status status,
                                         const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tsr_plugin_fail_v(host, status, fmt, ap);
  va_end(ap);
  return status;
}

/* An environment variable, NULL when unset or when the core gave no lookup.
 * For init and device_open only (docs/PLUGINS.md). */
static inline const char *tsr_plugin_env(const tsr_plugin_host *host, const char *name) {
  return host->services.get_env ? host->services.get_env(name) : NULL;
}

/* Whether [offset, offset + bytes) lies inside a buffer of `size` bytes; if
 * not, sets "<what> of N bytes at offset O passes the end of a S-byte buffer"
 * (the core checks ranges first: this is the plugin's own guard). */
static inline bool tsr_plugin_range_inside(const tsr_plugin_host *host, const char *what,
                                           uint64_t size, uint64_t offset, uint64_t bytes) {
  if (offset <= size && bytes <= size - offset)
    return true;
  tsr_plugin_fail(host, TSR_ERROR_OUT_OF_BOUNDS,
                  "%s of %llu bytes at offset %llu passes the end of a %llu-byte buffer", what,
                  (unsigned long long)bytes, (unsigned long long)offset, (unsigned long long)size);
  return false;
}

/* ---- ops and args ---- */

static inline bool tsr_plugin_op_known(tsr_op op) {
  return (int)op >= 0 && op < TSR_OP_COUNT_;
}

/* The op's name as the core spells it ("gemm", "cross_entropy"). */
static inline const char *tsr_plugin_op_name(tsr_op op) {
  static const char *const names[TSR_OP_COUNT_] = {
      "gemm", "grouped_gemm", "attention", "rmsnorm",       "layernorm", "softmax",
      "rope", "swiglu",       "gelu",      "cross_entropy", "kv_append"};
  return tsr_plugin_op_known(op) ? names[op] : "unknown op";
}

/* The dtype's name as the core spells it ("f32", "bf16"); "invalid" for a
 * value that is none. */
static inline const char *tsr_plugin_dtype_name(int32_t dtype) {
  switch (dtype) {
  case TSR_DTYPE_F32:
    return "f32";
  case TSR_DTYPE_F16:
    return "f16";
  case TSR_DTYPE_BF16:
    return "bf16";
  case TSR_DTYPE_I32:
    return "i32";
  default:
    return "invalid";
  }
}

/* Copies the op's args at the size both sides know (the caller's struct_size
 * or this header's, the smaller), zeroing fields the caller did not have.
 * false for an unknown op or args without a struct_size. */
static inline bool tsr_plugin_args_copy(tsr_op op, const void *args, tsr_plugin_any_args *copy) {
  size_t size = tsr_plugin_args_size(op);
  if (!size || !args)
    return false;
  uint32_t given;
  memcpy(&given, args, sizeof given);
  if (given < sizeof given)
    return false;
  memcpy(copy, args, given < size ? given : size);
  if (given < size)
    memset((char *)copy + given, 0, size - given);
  return true;
}

/* ---- device faults ---- */

/* What a queue remembers of the ops that can fault, for the sentence. */
typedef struct tsr_plugin_fault_context {
  int64_t vocab, ignore_index; /* the last cross_entropy's */
} tsr_plugin_fault_context;

/* Fills a fault block with TSR_PLUGIN_FAULT_NONE. */
static inline void tsr_plugin_faults_clear(int32_t words[TSR_PLUGIN_FAULT_COUNT]) {
  for (int i = 0; i < TSR_PLUGIN_FAULT_COUNT; i++)
    words[i] = TSR_PLUGIN_FAULT_NONE;
}

/* TSR_OK when no word holds a fault; otherwise TSR_ERROR_INVALID_VALUE with a
 * sentence naming the first kind at fault and its index. */
static inline tsr_status tsr_plugin_fault_report(const tsr_plugin_host *host,
                                                 const int32_t words[TSR_PLUGIN_FAULT_COUNT],
                                                 const tsr_plugin_fault_context *context) {
  for (int kind = 0; kind < TSR_PLUGIN_FAULT_COUNT; kind++) {
    long long at = words[kind];
    if (at == TSR_PLUGIN_FAULT_NONE)
      continue;
    switch (kind) {
    case TSR_PLUGIN_FAULT_CE_TARGET:
      return tsr_plugin_fail(host, TSR_ERROR_INVALID_VALUE,
                             "cross_entropy: targets[%lld] is outside [0, %lld) and is not "
                             "ignore_index (%lld); its loss is NaN",
                             at, context ? (long long)context->vocab : -1LL,
                             context ? (long long)context->ignore_index : -1LL);
    case TSR_PLUGIN_FAULT_CU_SEQLENS_Q:
      return tsr_plugin_fail(host, TSR_ERROR_INVALID_VALUE,
                             "attention: cu_seqlens_q[%lld], cu_seqlens_q[%lld] decrease or leave "
                             "[0, q.shape[0]]; that sequence was not computed",
                             at, at + 1);
    case TSR_PLUGIN_FAULT_CU_SEQLENS_KV:
      return tsr_plugin_fail(host, TSR_ERROR_INVALID_VALUE,
                             "attention: cu_seqlens_kv[%lld], cu_seqlens_kv[%lld] decrease or "
                             "leave [0, k.shape[0]]; sequence %lld's output is NaN",
                             at, at + 1, at);
    case TSR_PLUGIN_FAULT_SEQLENS_KV:
      return tsr_plugin_fail(host, TSR_ERROR_INVALID_VALUE,
                             "attention: seqlens_kv[%lld] is negative or longer than the keys "
                             "the layout holds for it; sequence %lld's output is NaN",
                             at, at);
    case TSR_PLUGIN_FAULT_BLOCK_TABLE:
      return tsr_plugin_fail(host, TSR_ERROR_INVALID_VALUE,
                             "attention: block_table row %lld names a block outside [0, "
                             "k.shape[0]) among those its keys use; sequence %lld's output is NaN",
                             at, at);
    case TSR_PLUGIN_FAULT_MAX_SEQLEN_Q:
      return tsr_plugin_fail(host, TSR_ERROR_INVALID_VALUE,
                             "attention: sequence %lld has more query rows than max_seqlen_q; "
                             "its output is NaN",
                             at);
    case TSR_PLUGIN_FAULT_MAX_SEQLEN_KV:
      return tsr_plugin_fail(host, TSR_ERROR_INVALID_VALUE,
                             "attention: sequence %lld has more keys than max_seqlen_kv; its "
                             "output is NaN",
                             at);
    case TSR_PLUGIN_FAULT_KV_SLOT:
      return tsr_plugin_fail(host, TSR_ERROR_INVALID_VALUE,
                             "kv_append: slots[%lld] is at or past num_blocks * block_size; "
                             "that row was not written",
                             at);
    default:
      break;
    }
  }
  return TSR_OK;
}

/* ---- variant lists ---- */

/* Empties a list (struct_size kept) before a plugin adds its rows. */
static inline void tsr_plugin_variants_clear(tsr_plugin_variant_list *list) {
  list->count = 0;
  list->heuristic = 0;
  list->reason[0] = '\0';
}

/* Appends a variant: its name and a printf-style description. Returns its
 * index, or -1 when the list is full. */
static inline int tsr_plugin_variants_add(tsr_plugin_variant_list *list, const char *name,
                                          const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline int tsr_plugin_variants_add(tsr_plugin_variant_list *list, const char *name,
                                          const char *fmt, ...) {
  if (list->count >= TSR_PLUGIN_MAX_VARIANTS)
    return -1;
  tsr_plugin_variant *v = &list->variants[list->count];
  snprintf(v->name, sizeof v->name, "%s", name);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(v->description, sizeof v->description, fmt, ap);
  va_end(ap);
  return (int)list->count++;
}

/* Fills a whole list: the plugin's own lister, behind tsr_plugin_variants_serve.
 * Returns TSR_OK, or a status after tsr_plugin_fail. */
typedef tsr_status (*tsr_plugin_variants_fill_fn)(void *device, tsr_op op, const void *args,
                                                  tsr_plugin_variant_list *out);

/* op_variants for any caller: fills `out` in place when its struct is this
 * header's size or larger, else fills a whole list and copies what fits (an
 * older, shorter struct). */
static inline tsr_status tsr_plugin_variants_serve(const tsr_plugin_host *host, void *device,
                                                   tsr_op op, const void *args,
                                                   tsr_plugin_variant_list *out,
                                                   tsr_plugin_variants_fill_fn fill) {
  const size_t header = offsetof(tsr_plugin_variant_list, variants);
  if (!out || out->struct_size < header)
    return tsr_plugin_fail(host, TSR_ERROR_STRUCT_SIZE,
                           "variant list struct_size %u is below the %zu bytes of its header",
                           out ? out->struct_size : 0u, header);
  if (!tsr_plugin_op_known(op))
    return tsr_plugin_fail(host, TSR_ERROR_UNSUPPORTED, "op %d is unknown", (int)op);
  if (out->struct_size >= sizeof *out) {
    uint32_t size = out->struct_size;
    tsr_plugin_variants_clear(out);
    tsr_status status = fill(device, op, args, out);
    out->struct_size = size;
    return status;
  }
  tsr_plugin_variant_list *full = (tsr_plugin_variant_list *)malloc(sizeof *full);
  if (!full)
    return tsr_plugin_fail(host, TSR_ERROR_OUT_OF_MEMORY, "out of host memory for a variant list");
  full->struct_size = sizeof *full;
  tsr_plugin_variants_clear(full);
  tsr_status status = fill(device, op, args, full);
  if (status == TSR_OK) {
    size_t room = (out->struct_size - header) / sizeof(tsr_plugin_variant);
    out->count = full->count < room ? full->count : (uint32_t)room;
    out->heuristic = full->heuristic < (int32_t)out->count ? full->heuristic : 0;
    memcpy(out->reason, full->reason, sizeof out->reason);
    memcpy(out->variants, full->variants, out->count * sizeof(tsr_plugin_variant));
  }
  free(full);
  return status;
}

/* ---- named rows ---- */

/* Config tables are arrays of rows whose first member is the variant name
 * (`const char *`). The row named `name` among `count` rows of `stride`
 * bytes, or NULL. */
static inline const void *tsr_plugin_row_find(const void *rows, size_t count, size_t stride,
                                              const char *name) {
  for (size_t i = 0; i < count; i++) {
    const char *row = (const char *)rows + i * stride;
    const char *row_name;
    memcpy(&row_name, row, sizeof row_name);
    if (row_name && name && !strcmp(row_name, name))
      return row;
  }
  return NULL;
}

/* A selection answer for a config row whose first member is its name. */
static inline tsr_status tsr_plugin_select_row(tsr_plugin_selection *out, const void *row) {
  const char *name;
  memcpy(&name, row, sizeof name);
  out->config = row;
  out->name = name;
  return TSR_OK;
}

/* ---- exports ---- */

/* Defines tsr_plugin_negotiate and tsr_plugin_entry for a plugin that speaks
 * ABI 2 only, with `table` its const tsr_plugin_v2. */
#define TSR_PLUGIN_EXPORT_V2(table)                                                                \
  __attribute__((visibility("default"))) uint32_t tsr_plugin_negotiate(uint32_t core_max_abi);     \
  __attribute__((visibility("default"))) const void *tsr_plugin_entry(uint32_t abi);               \
  uint32_t tsr_plugin_negotiate(uint32_t core_max_abi) {                                           \
    return core_max_abi >= 2 ? 2u : 0u;                                                            \
  }                                                                                                \
  const void *tsr_plugin_entry(uint32_t abi) {                                                     \
    return abi == 2 ? (const void *)&(table) : NULL;                                               \
  }

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_PLUGIN_HELPER_H */
