/* SPDX-License-Identifier: Apache-2.0 */
/* Internal declarations shared by the core's source files. Not installed. */
#ifndef TESSERA_CORE_INTERNAL_H
#define TESSERA_CORE_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>

#include <string.h>

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
/* Reads TESSERA_LOG again (context creation). */
void tsr__log_read_env(void);
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
  /* The plugin's entries in ABI 2 form (points at `entries`): an ABI 1
   * plugin's are copied there too, with `v1` kept for its init and op_run. */
  const tsr_plugin_v2 *table;
  tsr_plugin_v2 entries;
  const tsr_plugin_v1 *v1;
  void *state;                  /* from init */
  tsr_host_services host;       /* handed to ABI 1 plugins */
  tsr_host_services_v2 host_v2; /* handed to ABI 2 plugins */
  struct tsr_context *context;
  /* The plugin's last log message (any level) while init and enumeration
   * run: a loaded plugin with no device says why there. Guarded by a lock
   * of loader.c (plugins may log from their own threads). */
  bool capture_log;
  char last_message[512];
} tsr_plugin_slot;

/* One directory of the plugin search path, in search order. */
typedef struct tsr__search_dir {
  char *path;
  bool exists;    /* a directory that could be listed */
  char note[160]; /* "exists, 2 manifests", "does not exist", "not searched: ..." */
} tsr__search_dir;

/* A parsed manifest. Values that do not fit are refused, never cut. */
typedef struct tsr__manifest {
  char library[1024];
  uint32_t abi;  /* 0: not given */
  char arch[64]; /* "": not given */
} tsr__manifest;

/* Parses manifest text ("key = value" lines, '#' comments) of `size` bytes,
 * which need not be terminated and may hold any bytes. `origin` names it in
 * debug notes. Returns false with a reason for malformed text. */
bool tsr__parse_manifest(const char *text, size_t size, const char *origin, tsr__manifest *out,
                         char *reason, size_t capacity);
/* Copies the plugin's captured last message; "" when none. */
void tsr__plugin_last_message(tsr_plugin_slot *slot, char *buf, size_t capacity);
/* Ends the capture of the plugin's log messages (context.c, after enumeration). */
void tsr__plugin_capture_end(tsr_plugin_slot *slot);

struct tsr_device {
  struct tsr_context *context;
  tsr_plugin_slot *plugin;
  uint32_t plugin_index; /* index within the plugin */
  tsr_device_info info;
  void *handle; /* opened on first use */
  pthread_mutex_t lock;
  /* A queue of the core's own on this device, for copies between devices
   * staged through host memory (cross_device.c): made on first use, used
   * under transfer_lock, destroyed with the context. */
  void *transfer_queue;
  pthread_mutex_t transfer_lock;
};

/* Objects made from a context, so that destroying it frees them all. */
typedef struct tsr_object_link {
  struct tsr_object_link *prev, *next;
} tsr_object_link;

/* tsr_buffer.state: LIVE until tsr_buffer_destroy. A destroyed record stays
 * allocated for a while (memory.c) so a stale handle is reported, not read
 * after free. */
#define TSR__BUFFER_LIVE 0x6c697665u /* "live" */
#define TSR__BUFFER_DEAD 0x64656164u /* "dead" */

/* Queues get one of 63 slots of a context; the 64th bit stands for every
 * queue past those. */
#define TSR__QUEUE_SLOTS 63
#define TSR__QUEUE_BIT_OVERFLOW (UINT64_C(1) << 63)

struct tsr_buffer {
  tsr_object_link link; /* first member: the live list, then the dead list */
  tsr_device *device;
  void *handle;
  size_t size;
  uint32_t state;       /* TSR__BUFFER_*, atomic */
  uint64_t queues_used; /* queue bits of every queue given work on it, atomic */
  /* log2 of the alignment of the buffer's first byte, up to 8 (256 bytes):
   * 8 for plugin allocations, that of the caller's pointer for wrapped
   * memory. Part of an op's signature (op_cache.c). */
  uint8_t address_align_log2;
  /* References, atomic: 1 for the application's handle until
   * tsr_buffer_destroy, 1 per DLPack export not yet deleted. The memory is
   * freed when the last goes (tsr__buffer_unref). */
  uint32_t refs;
  /* Called once after the memory is released (a DLPack import's deleter);
   * NULL when none. */
  void (*on_free)(void *arg);
  void *on_free_arg;
};

/* The part of a DLPack export record the context knows (dlpack.c): linked
 * into context->exports while its deleter has not run, so that destroying
 * the context can cut it off from the buffer it frees (buffer = NULL). */
typedef struct tsr__export_link {
  tsr_object_link link;
  struct tsr_buffer *buffer;
} tsr__export_link;

struct tsr_queue {
  tsr_object_link link;
  tsr_device *device;
  void *handle;
  /* Serialises the plugin calls on this queue: its owner's (uncontended) and
   * those of a thread that drains it before freeing a buffer or waits on one
   * of its events. Plugins may then keep a queue's state without locks. */
  pthread_mutex_t lock;
  uint64_t bit;                   /* 1 << slot, or TSR__QUEUE_BIT_OVERFLOW */
  uint32_t drainers;              /* threads about to drain it (context->lock) */
  struct tsr__op_cache *op_cache; /* chosen configs by problem signature (lock) */
  struct tsr__op_fast *op_fast;   /* validated structures of repeated calls (lock) */
  /* Helper threads of cross_device.c that still use this queue (a gate on
   * it, or an event of it they wait for): tsr_queue_destroy waits for none
   * (context->lock, context->bridged). */
  uint32_t bridge_jobs;
  /* The first failure of a copy staged for this queue since its last
   * finish (context->lock; `bridge_failed` is read first without it). */
  uint32_t bridge_failed;
  tsr_status bridge_status;
  char bridge_message[384];
};

struct tsr_event {
  tsr_object_link link;
  tsr_queue *queue;
  void *handle;
  /* 1 for the application's handle until tsr_event_destroy, 1 per helper
   * thread that waits for it (atomic); the last frees it. */
  uint32_t refs;
};

struct tsr_context {
  tsr_plugin_slot *plugins;
  uint32_t plugin_count;
  tsr_device **devices;
  uint32_t device_count;
  tsr__search_dir *search_dirs; /* loader.c */
  uint32_t search_dir_count;
  pthread_mutex_t lock;   /* guards the object lists, queue slots and drainers */
  pthread_cond_t drained; /* a queue's drainers reached 0 */
  pthread_cond_t bridged; /* a helper thread of cross_device.c ended */
  uint32_t bridge_jobs;   /* helper threads running (lock) */
  tsr_object_link buffers, queues, events;
  tsr_object_link dead_buffers; /* destroyed records, oldest first */
  tsr_object_link exports;      /* tsr__export_link of live DLPack exports */
  size_t dead_buffer_count;
  uint64_t queue_slots; /* bits of the slots in use */
  /* TESSERA_CONFIG, read when the context was created (choose.c). */
  struct tsr__config_override *overrides;
  uint32_t override_count;
};

/* true while `buffer` has not been destroyed (memory.c). */
static inline bool tsr__buffer_live(const struct tsr_buffer *buffer) {
  return __atomic_load_n(&buffer->state, __ATOMIC_ACQUIRE) == TSR__BUFFER_LIVE;
}
/* Remembers that work on `queue` may use `buffer` (before the work is queued). */
static inline void tsr__buffer_mark(struct tsr_buffer *buffer, const struct tsr_queue *queue) {
  if (!(__atomic_load_n(&buffer->queues_used, __ATOMIC_RELAXED) & queue->bit))
    __atomic_fetch_or(&buffer->queues_used, queue->bit, __ATOMIC_RELAXED);
}
/* log2 of the alignment, up to 256 bytes, of the address `offset` bytes into
 * `buffer`: the buffer's own or the offset's, the smaller (op signatures). */
static inline unsigned tsr__address_align_log2(const struct tsr_buffer *buffer, uint64_t offset) {
  unsigned align = buffer->address_align_log2;
  if (offset & 255u) {
    unsigned offset_align = (unsigned)__builtin_ctzll(offset);
    align = offset_align < align ? offset_align : align;
  }
  return align;
}

/* A key of words, hashed as it is built (op_cache.c's signatures and
 * op_fast.c's structures). Passed by value so that the count and hash stay in
 * registers: through a pointer, every store to `words` could alias them. */
typedef struct tsr__key_builder {
  uint64_t *words;
  uint32_t count;
  uint64_t hash;
} tsr__key_builder;

static inline tsr__key_builder tsr__key_begin(uint64_t *words) {
  return (tsr__key_builder){.words = words, .count = 0, .hash = 0x9e3779b97f4a7c15u};
}

static inline tsr__key_builder tsr__key_add(tsr__key_builder k, uint64_t word) {
  k.words[k.count++] = word;
  k.hash = (k.hash ^ word) * 0xff51afd7ed558ccdu;
  return k;
}

/* A variant name of `length` (< 64) bytes, zero-padded to whole words. */
static inline tsr__key_builder tsr__key_add_name(tsr__key_builder k, const char *name,
                                                 size_t length) {
  if (!length)
    return k; /* the common case: no variant, nothing to clear */
  uint64_t words[8] = {0};
  memcpy(words, name, length);
  for (size_t i = 0; i * 8 < length; i++)
    k = tsr__key_add(k, words[i]);
  return k;
}

/* The finished hash, never 0 (0 marks an empty cache slot). */
static inline uint64_t tsr__key_hash(tsr__key_builder k) {
  uint64_t h = k.hash ^ (k.hash >> 32);
  return h ? h : 1;
}

/* Object lists, locks and the dead-buffer list of a new context, and their release. */
void tsr__objects_init(struct tsr_context *context);
void tsr__objects_release(struct tsr_context *context);

/* The entries a table lacks of those required (ABI 2 form; init and op_run
 * checked by the caller, since their types differ by version), NULL when
 * none (abi.c). */
const char *tsr__plugin_missing_entry(const tsr_plugin_v2 *t, bool has_init, bool has_op_run);
/* An ABI 1 table in ABI 2 form; init and op_run stay with the v1 table. */
void tsr__plugin_entries_from_v1(const tsr_plugin_v1 *v1, tsr_plugin_v2 *out);

/* Buffers (memory.c). tsr__buffer_wrap is tsr_buffer_wrap_* for any kind,
 * failing as `call`. */
tsr_status tsr__buffer_wrap(tsr_device *device, tsr_external_kind kind, void *handle, size_t bytes,
                            struct tsr_buffer **out, const char *call);
/* Takes a reference on a live buffer; false (nothing taken) when it was
 * destroyed. */
bool tsr__buffer_ref(struct tsr_buffer *buffer);
/* Drops a reference; the last one frees the memory (after the queues that
 * used it) and calls on_free. */
void tsr__buffer_unref(struct tsr_buffer *buffer);
/* Links and unlinks an export record (context->lock). */
void tsr__export_add(struct tsr_context *context, tsr__export_link *record);
void tsr__export_remove(struct tsr_context *context, tsr__export_link *record);

/* Reads manifests, loads plugins into context->plugins (loader.c). */
tsr_status tsr__load_plugins(struct tsr_context *context, const tsr_context_options *options);
void tsr__unload_plugins(struct tsr_context *context);
/* Frees every buffer, queue and event still linked to the context (memory.c). */
void tsr__destroy_objects(struct tsr_context *context);
/* ---- several devices (cross_device.c) ---- */

/* The plugin table of a device. */
static inline const tsr_plugin_v2 *tsr__table(const struct tsr_device *device) {
  return device->plugin->table;
}
/* The queue's lock, held around every plugin call on the queue. */
static inline void tsr__queue_lock(tsr_queue *queue) {
  pthread_mutex_lock(&queue->lock);
}
static inline void tsr__queue_unlock(tsr_queue *queue) {
  pthread_mutex_unlock(&queue->lock);
}
/* true when the plugin keeps the contract of the entries appended for
 * several devices (it has gates; event_flush NULL then means its event_wait
 * needs no queue lock). Older plugins' entries are NULL (loader.c). */
static inline bool tsr__plugin_multi(const struct tsr_device *device) {
  return device->plugin->table->queue_gate && device->plugin->table->gate_open;
}
/* tsr_buffer_copy between buffers of two devices, checked by the caller. */
tsr_status tsr__copy_across(tsr_queue *queue, struct tsr_buffer *src, size_t src_offset,
                            struct tsr_buffer *dst, size_t dst_offset, size_t bytes);
/* Drops a reference on an event; the last destroys it (memory.c). */
void tsr__event_unref(tsr_event *event);
/* Waits until no helper thread uses `queue` (NULL: none at all). */
void tsr__bridges_wait(struct tsr_context *context, tsr_queue *queue);
/* The failure a staged copy left on the queue, taken (TSR_OK when none). */
tsr_status tsr__bridge_take_failure(tsr_queue *queue, const char *call);
/* Destroys the devices' transfer queues (context destruction). */
void tsr__transfer_queues_destroy(struct tsr_context *context);

/* Opens the plugin device on first use. */
tsr_status tsr__device_handle(tsr_device *device, const char *call, void **handle);

/* ---- validation (validate.c) ---- */

/* Most tensor arguments of one op (attention: q, k, v, o, lse and the four
 * serving index tensors). */
#define TSR__OP_MAX_TENSORS 9

/* Normalised arguments of any op, ready for a plugin. */
typedef struct tsr__op_args {
  tsr_op op;
  const char *variant; /* desc->variant (not copied) */
  tsr_plugin_any_args u;
  /* The buffers the op's tensors live in (repeats allowed), so the queue
   * that runs it can be marked on each. */
  struct tsr_buffer *buffers[TSR__OP_MAX_TENSORS];
  int buffer_count;
  /* Per tensor of the args struct, in order: log2 of the alignment (up to
   * 256 bytes) of its first byte's address; 0xff when absent. */
  uint8_t tensor_align_log2[TSR__OP_MAX_TENSORS];
} tsr__op_args;

/* Validates `desc` of `op` for running on `device` and fills `out`. `call`
 * names the public function in error messages ("tsr_gemm"). Every tensor must
 * live in a buffer of `device`. On failure returns the status and has set the
 * last error; `out` is then unspecified. */
tsr_status tsr__validate_op(tsr_device *device, tsr_op op, const void *desc, const char *call,
                            tsr__op_args *out);
/* The tensors of an op's plugin args, which follow struct_size: 0 for an
 * unknown op. */
int tsr__op_tensor_count(tsr_op op);
/* Pointer to the plugin args inside `args` (for the ABI's `const void *args`). */
const void *tsr__op_args_pointer(const tsr__op_args *args);

/* ---- tuning database and variant choice (tuning.c) ---- */

/* "m4096n4096k4096"-style key of the problem (bucketed extents). */
void tsr__shape_class(const tsr__op_args *args, char *buf, size_t capacity);
/* The dtype name a tuning row uses for this problem ("f32", "bf16", ...). */
const char *tsr__op_dtype_name(const tsr__op_args *args);
/* Normalised device key "backend:vendor:arch:name", lowercase, spaces as '-'. */
void tsr__device_key(const tsr_device_info *info, char *buf, size_t capacity);
/* ---- variant choice (choose.c) and the op cache (op_cache.c) ---- */

/* One TESSERA_CONFIG entry: "[backend.]op:variant". */
typedef struct tsr__config_override {
  char backend[32]; /* "" applies to every backend */
  tsr_op op;
  char variant[64];
} tsr__config_override;

/* Parses TESSERA_CONFIG into context->overrides (warning about entries it
 * cannot read); frees them. */
void tsr__overrides_load(struct tsr_context *context);
void tsr__overrides_free(struct tsr_context *context);

/* A chosen config: what op_run needs, and the name it goes by. */
typedef struct tsr__selection {
  const void *config; /* ABI 2: the plugin's; ABI 1: NULL (op_run takes `name`) */
  char name[64];
} tsr__selection;

/* Resolves override (desc->variant, then TESSERA_CONFIG), tuning database,
 * heuristic, in that order, and asks the plugin for the config. With
 * `choice`, also fills it for explain (with the heuristic's reason). */
tsr_status tsr__select(tsr_device *device, void *device_handle, const tsr__op_args *args,
                       const char *call, tsr__selection *out, tsr_choice *choice);

/* The plugin's variant list for a validated problem, checked for sense. */
tsr_status tsr__list_variants(tsr_device *device, void *device_handle, const tsr__op_args *args,
                              const char *call, tsr_plugin_variant_list *list);

/* The repeated-call path (op_fast.c): a descriptor's structure, validated
 * once per queue, with the buffers checked on each call. */
#define TSR__DESC_KEY_WORDS 64
typedef struct tsr__desc_key {
  bool usable; /* false: this call has no key (it is always validated) */
  uint32_t count;
  uint64_t hash;
  uint64_t words[TSR__DESC_KEY_WORDS];
} tsr__desc_key;
typedef struct tsr__op_fast tsr__op_fast;
void tsr__op_fast_free(tsr__op_fast *fast);
/* Runs the op when the queue remembers its structure and its buffers pass
 * the per-call checks (true, with the status); else false, with `key` filled
 * for tsr__op_fast_remember. Takes and releases queue->lock. */
bool tsr__op_fast_run(tsr_queue *queue, tsr_op op, const void *desc, const char *call,
                      uint64_t generation, tsr__desc_key *key, tsr_status *status);
/* After the validated path ran the op (queue->lock held). */
void tsr__op_fast_remember(tsr_queue *queue, const tsr__desc_key *key, uint64_t generation,
                           const tsr__op_args *args, const tsr__selection *selection);

/* Per-queue cache of selections by problem signature (op_cache.c). */
typedef struct tsr__op_cache tsr__op_cache;
void tsr__op_cache_free(tsr__op_cache *cache);
/* Runs a validated op on `queue`: a cached selection when the signature and
 * the tuning generation match, else tsr__select and remember it; then
 * remembers the call's structure under `key` for the repeated-call path.
 * Takes and releases queue->lock. */
tsr_status tsr__op_cache_run(tsr_queue *queue, void *device_handle, const tsr__op_args *args,
                             const char *call, const tsr__desc_key *key, uint64_t generation);
/* Marks the op's buffers and queues it with a chosen config (queue->lock
 * held); the status with the plugin's sentence on failure. */
tsr_status tsr__op_run_selected(tsr_queue *queue, const tsr__op_args *args,
                                const tsr__selection *selection, const char *call);

/* ---- the tuning database (tuning_db.c) ---- */

struct stat;

typedef struct tsr__tuning_key {
  const char *device_key, *op, *dtype, *shape_class;
} tsr__tuning_key;

/* Looks a row up: user database first, then system files in sorted order.
 * On a hit copies the variant and "file:line" into source. */
bool tsr__tuning_lookup(const char *device_key, const char *op, const char *dtype,
                        const char *shape_class, char *variant, size_t variant_capacity,
                        char *source, size_t source_capacity);

typedef enum tsr__tuning_found {
  TSR__TUNING_MISS,
  TSR__TUNING_HIT,
  TSR__TUNING_STALE /* the row names a variant has_variant rejects */
} tsr__tuning_found;

typedef struct tsr__tuning_match {
  char variant[128];
  char source[4096 + 16]; /* "file:line", a path of up to PATH_MAX */
  /* STALE, and the first lookup to meet this row since its file was loaded:
   * the one that should warn. */
  bool first_warning;
} tsr__tuning_match;

/* tsr__tuning_lookup with a check of the row's variant (has_variant may be
 * NULL: every variant exists). Stats the database files and loads them again
 * first when one changed. */
tsr__tuning_found tsr__tuning_find(const tsr__tuning_key *key,
                                   bool (*has_variant)(void *context, const char *name),
                                   void *context, tsr__tuning_match *out);
/* The database in force after the same check: changes whenever a lookup
 * could answer differently (files loaded again, tsr_tuning_record), so a
 * choice cached with it stays right while it is unchanged. Never 0 unless
 * out of memory. */
uint64_t tsr__tuning_generation(void);
/* Files parsed since the process started (for tests). */
uint64_t tsr__tuning_parse_count(void);
/* Drops the loaded database (after tsr_tuning_record wrote a row). */
void tsr__tuning_invalidate(void);
/* The user database path from TESSERA_TUNING_DB, XDG_CACHE_HOME, HOME (the
 * latter two only when absolute): snprintf's result, or -1 when none is set. */
int tsr__tuning_user_path_env(char *buf, size_t capacity);
/* Reads a whole regular file without blocking on a FIFO: 0 with *text (NUL
 * terminated, to free) and *size; -1 when it is not a regular file; else an
 * errno value (EFBIG: over max_size). *identity is set once it is open. */
int tsr__tuning_read_file(const char *path, size_t max_size, char **text, size_t *size,
                          struct stat *identity);
/* Splits one line (no '\n') into the 5 fields of a row: false for blank,
 * comment-only, malformed lines and lines holding a NUL byte. */
bool tsr__tuning_split_row(const char *line, size_t length, const char *field[5],
                           size_t field_length[5]);

/* Parsed rows keyed by device key, op, dtype and shape class. */
typedef struct tsr__tuning_index tsr__tuning_index;
typedef struct tsr__tuning_row {
  int file; /* the `file` it was added with */
  int line;
  const char *variant; /* inside the index */
  uint32_t id;         /* for tsr__tuning_index_claim_warning */
} tsr__tuning_row;

tsr__tuning_index *tsr__tuning_index_create(void);
void tsr__tuning_index_destroy(tsr__tuning_index *index);
/* Adds the rows of text[0, size) (any bytes) as file number `file`; files
 * must be added in lookup order (a lower number shadows a higher one). false
 * when out of memory. */
bool tsr__tuning_index_add(tsr__tuning_index *index, int file, const char *text, size_t size);
size_t tsr__tuning_index_rows(const tsr__tuning_index *index);
/* The row a lookup uses: of the first file with an exact or '*' row, its
 * last exact row, else its first '*' row. */
bool tsr__tuning_index_find(const tsr__tuning_index *index, const tsr__tuning_key *key,
                            tsr__tuning_row *out);
/* true the first time for each row (thread-safe). */
bool tsr__tuning_index_claim_warning(tsr__tuning_index *index, uint32_t id);

/* Directory of the loaded libtessera (for prefix-relative paths); "" if unknown. */
const char *tsr__library_dir(void);

#endif /* TESSERA_CORE_INTERNAL_H */
