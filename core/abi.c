/* SPDX-License-Identifier: Apache-2.0 */
/* The plugin ABI versions the core speaks, as loader.c sees them: every
 * table in ABI 2 form, and the entries a table must have. */
#include <string.h>

#include "internal.h"

/* The required entries (of either ABI, in ABI 2 form); the rest may be
 * NULL (unsupported). */
const char *tsr__plugin_missing_entry(const tsr_plugin_v2 *t, bool has_init, bool has_op_run) {
  if (!t->name)
    return "name";
  if (!has_init)
    return "init";
  if (!t->device_count)
    return "device_count";
  if (!t->device_info)
    return "device_info";
  if (!t->device_open)
    return "device_open";
  if (!t->device_close)
    return "device_close";
  if (!t->buffer_alloc)
    return "buffer_alloc";
  if (!t->buffer_free)
    return "buffer_free";
  if (!t->queue_create)
    return "queue_create";
  if (!t->queue_destroy)
    return "queue_destroy";
  if (!t->queue_finish)
    return "queue_finish";
  if (!t->buffer_write)
    return "buffer_write";
  if (!t->buffer_read)
    return "buffer_read";
  if (!t->op_supported)
    return "op_supported";
  if (!t->op_variants)
    return "op_variants";
  if (!has_op_run)
    return "op_run";
  return NULL;
}

/* An ABI 1 table in ABI 2 form: the entries of one meaning, copied; init and
 * op_run, whose arguments differ, stay with `v1` (dispatched by the core). */
void tsr__plugin_entries_from_v1(const tsr_plugin_v1 *v1, tsr_plugin_v2 *out) {
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  out->abi_version = 1;
  out->name = v1->name;
  out->version = v1->version;
  out->shutdown = v1->shutdown;
  out->device_count = v1->device_count;
  out->device_info = v1->device_info;
  out->device_open = v1->device_open;
  out->device_close = v1->device_close;
  out->buffer_alloc = v1->buffer_alloc;
  out->buffer_free = v1->buffer_free;
  out->buffer_host_pointer = v1->buffer_host_pointer;
  out->queue_create = v1->queue_create;
  out->queue_destroy = v1->queue_destroy;
  out->queue_finish = v1->queue_finish;
  out->buffer_write = v1->buffer_write;
  out->buffer_read = v1->buffer_read;
  out->buffer_copy = v1->buffer_copy;
  out->event_record = v1->event_record;
  out->event_wait = v1->event_wait;
  out->event_elapsed_ms = v1->event_elapsed_ms;
  out->event_destroy = v1->event_destroy;
  out->buffer_wrap = v1->buffer_wrap;
  out->op_supported = v1->op_supported;
  out->op_variants = v1->op_variants;
}
