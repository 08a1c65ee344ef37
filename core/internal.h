/* Internal declarations shared by the core's source files. Not installed. */
#ifndef TESSERA_CORE_INTERNAL_H
#define TESSERA_CORE_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>

#include "tessera/plugin.h"

/* ---- errors and logging (error.c, log.c) ---- */

/* Sets this thread's last error to "<call>: <formatted>" and returns status. */
tsr_status tsr__fail(tsr_status status, const char *call, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Clears this thread's last error (called at the start of public calls). */
void tsr__clear_error(void);
/* Plugin-provided detail (host services set_error) waiting to be attached to
 * the error of the call in progress; "" when none. Consumed by tsr__take_plugin_error. */
void tsr__set_plugin_error_v(const char *fmt, va_list ap);
/* Copies and clears the pending plugin detail; returns false when none. */
bool tsr__take_plugin_error(char *buf, size_t capacity);
/* Fails with the plugin's detail when it gave one, else with `fallback`. */
tsr_status tsr__fail_plugin(tsr_status status, const char *call, const char *fallback);

/* Log level in force: TESSERA_LOG (error|warn|info|debug) unless overridden. */
int tsr__log_level(void);
void tsr__set_log_level(int level);
void tsr__log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- environment and strings (util.c) ---- */

/* secure_getenv: NULL in setuid/setgid programs. */
const char *tsr__getenv(const char *name);
/* Copies with truncation, always terminated. */
void tsr__strlcpy(char *dst, const char *src, size_t capacity);
/* true when `name` is one of the comma-separated names in `list`. */
bool tsr__list_contains(const char *list, const char *name);

/* ---- plugins and devices (loader.c, context.c) ---- */

typedef struct tsr_plugin_slot {
  tsr_plugin_report report;
  void *library; /* dlopen handle */
  const tsr_plugin_v1 *table;
  void *state; /* from init */
  tsr_host_services host;
  struct tsr_context *context;
} tsr_plugin_slot;

struct tsr_device {
  struct tsr_context *context;
  tsr_plugin_slot *plugin;
  uint32_t plugin_index; /* index within the plugin */
  tsr_device_info info;
  void *handle; /* opened on first use */
  pthread_mutex_t lock;
};

/* Objects made from a context, so that destroying it frees them all. */
typedef struct tsr_object_link {
  struct tsr_object_link *prev, *next;
} tsr_object_link;

struct tsr_buffer {
  tsr_object_link link; /* first member */
  tsr_device *device;
  void *handle;
  size_t size;
};

struct tsr_queue {
  tsr_object_link link;
  tsr_device *device;
  void *handle;
};

struct tsr_event {
  tsr_object_link link;
  tsr_queue *queue;
  void *handle;
};

struct tsr_context {
  tsr_plugin_slot *plugins;
  uint32_t plugin_count;
  tsr_device **devices;
  uint32_t device_count;
  pthread_mutex_t lock; /* guards the object lists */
  tsr_object_link buffers, queues, events;
};

/* Reads manifests, loads plugins into context->plugins (loader.c). */
tsr_status tsr__load_plugins(struct tsr_context *context, const tsr_context_options *options);
void tsr__unload_plugins(struct tsr_context *context);
/* Frees every buffer, queue and event still linked to the context (memory.c). */
void tsr__destroy_objects(struct tsr_context *context);
/* Opens the plugin device on first use. */
tsr_status tsr__device_handle(tsr_device *device, const char *call, void **handle);

/* ---- validation (validate.c) ---- */

/* Normalised arguments of any op, ready for a plugin. */
typedef struct tsr__op_args {
  tsr_op op;
  const char *variant; /* desc->variant (not copied) */
  tsr_plugin_any_args u;
} tsr__op_args;

/* Validates `desc` of `op` for running on `device` and fills `out`. `call`
 * names the public function in error messages ("tsr_gemm"). Every tensor must
 * live in a buffer of `device`. On failure returns the status and has set the
 * last error; `out` is then unspecified. */
tsr_status tsr__validate_op(tsr_device *device, tsr_op op, const void *desc, const char *call,
                            tsr__op_args *out);
/* Pointer to the plugin args inside `args` (for the ABI's `const void *args`). */
const void *tsr__op_args_pointer(const tsr__op_args *args);

/* ---- tuning database and variant choice (tuning.c) ---- */

/* "m4096n4096k4096"-style key of the problem (bucketed extents). */
void tsr__shape_class(const tsr__op_args *args, char *buf, size_t capacity);
/* The dtype name a tuning row uses for this problem ("f32", "bf16", ...). */
const char *tsr__op_dtype_name(const tsr__op_args *args);
/* Normalised device key "backend:vendor:arch:name", lowercase, spaces as '-'. */
void tsr__device_key(const tsr_device_info *info, char *buf, size_t capacity);
/* Looks a row up: user database first, then system files in sorted order.
 * On a hit copies the variant and "file:line" into source. */
bool tsr__tuning_lookup(const char *device_key, const char *op, const char *dtype,
                        const char *shape_class, char *variant, size_t variant_capacity,
                        char *source, size_t source_capacity);
/* Resolves override, database, heuristic in that order. */
tsr_status tsr__choose_variant(tsr_device *device, const tsr__op_args *args, const char *call,
                               tsr_choice *choice);

/* Directory of the loaded libtessera (for prefix-relative paths); "" if unknown. */
const char *tsr__library_dir(void);

#endif /* TESSERA_CORE_INTERNAL_H */
