/* SPDX-License-Identifier: Apache-2.0 */
/* Context: plugin loading, the device registry, its stable order and device
 * selection. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int type_rank(tsr_device_type type) {
  switch (type) {
  case TSR_DEVICE_GPU:
    return 0;
  case TSR_DEVICE_INTEGRATED_GPU:
    return 1;
  case TSR_DEVICE_OTHER:
    return 2;
  case TSR_DEVICE_CPU:
    return 3;
  }
  return 4;
}

/* GPUs before CPU, then backend name, then index within the backend. */
static int device_order(const void *pa, const void *pb) {
  const tsr_device *a = *(tsr_device *const *)pa;
  const tsr_device *b = *(tsr_device *const *)pb;
  int ra = type_rank(a->info.type), rb = type_rank(b->info.type);
  if (ra != rb)
    return ra < rb ? -1 : 1;
  int c = strcmp(a->info.backend, b->info.backend);
  if (c)
    return c;
  return a->plugin_index < b->plugin_index ? -1 : a->plugin_index > b->plugin_index;
}

static tsr_status enumerate_devices(tsr_context *context) {
  uint32_t total = 0;
  for (uint32_t i = 0; i < context->plugin_count; i++)
    if (context->plugins[i].report.state == TSR_PLUGIN_LOADED)
      total += context->plugins[i].report.device_count;
  if (total == 0)
    return TSR_OK;
  context->devices = calloc(total, sizeof *context->devices);
  if (!context->devices)
    return tsr__fail(TSR_ERROR_OUT_OF_MEMORY, "tsr_context_create", "out of memory");
  for (uint32_t p = 0; p < context->plugin_count; p++) {
    tsr_plugin_slot *slot = &context->plugins[p];
    if (slot->report.state != TSR_PLUGIN_LOADED)
      continue;
    for (uint32_t i = 0; i < slot->report.device_count; i++) {
      tsr_device *device = calloc(1, sizeof *device);
      if (!device)
        return tsr__fail(TSR_ERROR_OUT_OF_MEMORY, "tsr_context_create", "out of memory");
      device->context = context;
      device->plugin = slot;
      device->plugin_index = i;
      pthread_mutex_init(&device->lock, NULL);
      pthread_mutex_init(&device->transfer_lock, NULL);
      device->info.struct_size = sizeof device->info;
      device->info.native_ordinal = -1; /* a plugin that does not know the field */
      tsr_status st = slot->table->device_info(slot->state, i, &device->info);
      if (st != TSR_OK) {
        char detail[512] = "";
        tsr__take_plugin_error(detail, sizeof detail);
        tsr__log(TSR_LOG_WARN, "plugin '%s': device %u gives no info (%s%s%s); left out",
                 slot->report.name, i, tsr_status_name(st), detail[0] ? ": " : "", detail);
        pthread_mutex_destroy(&device->lock);
        free(device);
        continue;
      }
      /* The core owns these fields, so that every plugin spells them alike. */
      device->info.struct_size = sizeof device->info;
      tsr__strlcpy(device->info.backend, slot->table->name, sizeof device->info.backend);
      device->info.backend_index = i;
      snprintf(device->info.selector, sizeof device->info.selector, "%s:%u", device->info.backend,
               i);
      tsr__device_key(&device->info, device->info.device_key, sizeof device->info.device_key);
      context->devices[context->device_count++] = device;
    }
  }
  qsort(context->devices, context->device_count, sizeof *context->devices, device_order);
  return TSR_OK;
}

/* A loaded plugin that found no device says why in its report: the last
 * thing it logged during init and enumeration (plugins log that at debug
 * level, which users rarely turn on). */
static void explain_empty_plugins(tsr_context *context) {
  for (uint32_t p = 0; p < context->plugin_count; p++) {
    tsr_plugin_slot *slot = &context->plugins[p];
    tsr__plugin_capture_end(slot);
    if (slot->report.state != TSR_PLUGIN_LOADED)
      continue;
    uint32_t listed = 0;
    for (uint32_t i = 0; i < context->device_count; i++)
      listed += context->devices[i]->plugin == slot;
    if (listed > 0)
      continue;
    char last[sizeof slot->last_message];
    tsr__plugin_last_message(slot, last, sizeof last);
    const char *lead = slot->report.device_count ? "no device gave its info" : "no devices";
    /* Plugins often say "no devices: why" themselves. */
    const char *why = last[0] ? last : "the plugin gave no reason";
    if (strncmp(why, lead, strlen(lead)) == 0)
      snprintf(slot->report.reason, sizeof slot->report.reason, "%.500s", why);
    else
      snprintf(slot->report.reason, sizeof slot->report.reason, "%s: %.480s", lead, why);
  }
}

tsr_status tsr_context_create(const tsr_context_options *options, tsr_context **out) {
  static const char call[] = "tsr_context_create";
  tsr__clear_error();
  if (!out)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "out is NULL");
  if (options && options->struct_size < sizeof(tsr_context_options))
    return tsr__fail(TSR_ERROR_STRUCT_SIZE, call,
                     "options->struct_size = %zu but the smallest known is %zu",
                     options->struct_size, sizeof(tsr_context_options));
  if (options &&
      ((int)options->log_level < TSR_LOG_DEFAULT || (int)options->log_level > TSR_LOG_DEBUG))
    return tsr__fail(TSR_ERROR_INVALID_VALUE, call,
                     "options->log_level = %d is not a tsr_log_level", (int)options->log_level);
  tsr__log_read_env();
  if (options && options->log_level != TSR_LOG_DEFAULT)
    tsr__set_log_level(options->log_level);
  tsr_context *context = calloc(1, sizeof *context);
  if (!context)
    return tsr__fail(TSR_ERROR_OUT_OF_MEMORY, call, "out of memory");
  tsr__objects_init(context);
  tsr__overrides_load(context);
  tsr_status st = tsr__load_plugins(context, options);
  if (st == TSR_OK)
    st = enumerate_devices(context);
  if (st == TSR_OK)
    explain_empty_plugins(context);
  if (st != TSR_OK) {
    tsr_context_destroy(context);
    return st;
  }
  tsr__log(TSR_LOG_DEBUG, "context: %u plugin manifest(s), %u device(s)", context->plugin_count,
           context->device_count);
  *out = context;
  return TSR_OK;
}

void tsr_context_destroy(tsr_context *context) {
  if (!context)
    return;
  tsr__destroy_objects(context);
  for (uint32_t i = 0; i < context->device_count; i++) {
    tsr_device *device = context->devices[i];
    if (device->handle)
      device->plugin->table->device_close(device->handle);
    pthread_mutex_destroy(&device->lock);
    pthread_mutex_destroy(&device->transfer_lock);
    free(device);
  }
  free(context->devices);
  tsr__unload_plugins(context);
  tsr__overrides_free(context);
  tsr__objects_release(context);
  free(context);
}

tsr_status tsr_plugin_count(tsr_context *context, uint32_t *count) {
  tsr__clear_error();
  if (!context || !count)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, "tsr_plugin_count", "%s is NULL",
                     !context ? "context" : "count");
  *count = context->plugin_count;
  return TSR_OK;
}

/* Copies the prefix of a growing struct that both sides know. */
static tsr_status copy_sized(void *dst, size_t dst_size, const void *src, size_t src_size,
                             size_t min_size, const char *call, const char *what) {
  if (dst_size < min_size)
    return tsr__fail(TSR_ERROR_STRUCT_SIZE, call,
                     "%s->struct_size = %zu but the smallest known is %zu", what, dst_size,
                     min_size);
  size_t n = dst_size < src_size ? dst_size : src_size;
  memcpy(dst, src, n);
  *(size_t *)dst = dst_size;
  return TSR_OK;
}

tsr_status tsr_plugin_get_report(tsr_context *context, uint32_t index, tsr_plugin_report *report) {
  static const char call[] = "tsr_plugin_get_report";
  tsr__clear_error();
  if (!context || !report)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL", !context ? "context" : "report");
  if (index >= context->plugin_count)
    return tsr__fail(TSR_ERROR_OUT_OF_BOUNDS, call, "index = %u but there are %u plugin reports",
                     index, context->plugin_count);
  return copy_sized(report, report->struct_size, &context->plugins[index].report,
                    sizeof(tsr_plugin_report), sizeof(tsr_plugin_report), call, "report");
}

tsr_status tsr_plugin_search_dir_count(tsr_context *context, uint32_t *count) {
  tsr__clear_error();
  if (!context || !count)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, "tsr_plugin_search_dir_count", "%s is NULL",
                     !context ? "context" : "count");
  *count = context->search_dir_count;
  return TSR_OK;
}

tsr_status tsr_plugin_search_dir(tsr_context *context, uint32_t index, const char **path,
                                 int *exists, const char **note) {
  static const char call[] = "tsr_plugin_search_dir";
  tsr__clear_error();
  if (!context || !path)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL", !context ? "context" : "path");
  if (index >= context->search_dir_count)
    return tsr__fail(TSR_ERROR_OUT_OF_BOUNDS, call,
                     "index = %u but the search path has %u directories", index,
                     context->search_dir_count);
  const tsr__search_dir *dir = &context->search_dirs[index];
  *path = dir->path;
  if (exists)
    *exists = dir->exists;
  if (note)
    *note = dir->note;
  return TSR_OK;
}

tsr_status tsr_device_count(tsr_context *context, uint32_t *count) {
  tsr__clear_error();
  if (!context || !count)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, "tsr_device_count", "%s is NULL",
                     !context ? "context" : "count");
  *count = context->device_count;
  return TSR_OK;
}

tsr_status tsr_device_get(tsr_context *context, uint32_t index, tsr_device **out) {
  static const char call[] = "tsr_device_get";
  tsr__clear_error();
  if (!context || !out)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL", !context ? "context" : "out");
  if (index >= context->device_count)
    return tsr__fail(TSR_ERROR_NOT_FOUND, call, "index = %u but there are %u devices", index,
                     context->device_count);
  *out = context->devices[index];
  return TSR_OK;
}

static bool is_number(const char *s) {
  if (!*s)
    return false;
  for (; *s; s++)
    if (!isdigit((unsigned char)*s))
      return false;
  return true;
}

static tsr_device *find_by_selector(tsr_context *context, const char *selector) {
  if (!strcmp(selector, "best"))
    return context->device_count ? context->devices[0] : NULL;
  if (!strcmp(selector, "gpu")) {
    for (uint32_t i = 0; i < context->device_count; i++) {
      tsr_device_type t = context->devices[i]->info.type;
      if (t == TSR_DEVICE_GPU || t == TSR_DEVICE_INTEGRATED_GPU)
        return context->devices[i];
    }
    return NULL;
  }
  if (is_number(selector)) {
    unsigned long index = strtoul(selector, NULL, 10);
    return index < context->device_count ? context->devices[index] : NULL;
  }
  const char *colon = strchr(selector, ':');
  size_t name_len = colon ? (size_t)(colon - selector) : strlen(selector);
  long wanted = -1;
  if (colon) {
    if (!is_number(colon + 1))
      return NULL;
    wanted = strtol(colon + 1, NULL, 10);
  }
  for (uint32_t i = 0; i < context->device_count; i++) {
    tsr_device *d = context->devices[i];
    if (strlen(d->info.backend) == name_len && !strncmp(d->info.backend, selector, name_len) &&
        (wanted < 0 || (long)d->info.backend_index == wanted))
      return d;
  }
  /* "cpu" also means the first CPU-type device whatever its backend. */
  if (!colon && !strcmp(selector, "cpu"))
    for (uint32_t i = 0; i < context->device_count; i++)
      if (context->devices[i]->info.type == TSR_DEVICE_CPU)
        return context->devices[i];
  return NULL;
}

tsr_status tsr_device_open(tsr_context *context, const char *selector, tsr_device **out) {
  static const char call[] = "tsr_device_open";
  tsr__clear_error();
  if (!context || !out)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL", !context ? "context" : "out");
  const char *origin = "selector";
  if (!selector || !*selector) {
    selector = tsr__getenv("TESSERA_DEVICE");
    origin = "TESSERA_DEVICE";
    if (!selector || !*selector) {
      selector = "best";
      origin = "default selector";
    }
  }
  tsr_device *device = find_by_selector(context, selector);
  if (!device) {
    char available[512] = "";
    size_t used = 0;
    for (uint32_t i = 0; i < context->device_count && used < sizeof available; i++) {
      int n = snprintf(available + used, sizeof available - used, "%s%s", i ? ", " : "",
                       context->devices[i]->info.selector);
      if (n < 0)
        break;
      used += (size_t)n;
    }
    return tsr__fail(TSR_ERROR_NOT_FOUND, call, "%s '%s' matches no device (available: %s)", origin,
                     selector, context->device_count ? available : "none");
  }
  *out = device;
  return TSR_OK;
}

tsr_status tsr_device_get_info(tsr_device *device, tsr_device_info *info) {
  static const char call[] = "tsr_device_get_info";
  tsr__clear_error();
  if (!device || !info)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL", !device ? "device" : "info");
  /* native_ordinal was appended: a caller's struct without it still works. */
  return copy_sized(info, info->struct_size, &device->info, sizeof(tsr_device_info),
                    offsetof(tsr_device_info, native_ordinal), call, "info");
}

tsr_status tsr__device_handle(tsr_device *device, const char *call, void **handle) {
  /* Once open, a device stays open until its context ends: no lock to read. */
  void *open = __atomic_load_n(&device->handle, __ATOMIC_ACQUIRE);
  if (open) {
    *handle = open;
    return TSR_OK;
  }
  pthread_mutex_lock(&device->lock);
  tsr_status st = TSR_OK;
  if (!device->handle) {
    void *opened = NULL;
    st = device->plugin->table->device_open(device->plugin->state, device->plugin_index, &opened);
    if (st != TSR_OK)
      st = tsr__fail_plugin(st, call, "the plugin could not open the device");
    else
      __atomic_store_n(&device->handle, opened, __ATOMIC_RELEASE);
  }
  *handle = device->handle;
  pthread_mutex_unlock(&device->lock);
  return st;
}
