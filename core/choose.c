/* SPDX-License-Identifier: Apache-2.0 */
/* Variant choice, once per problem signature (the op cache calls it on a
 * miss; explain calls it directly): an explicit override (desc->variant, then
 * TESSERA_CONFIG read when the context was made), then the tuning database,
 * then the plugin's heuristic; the plugin turns the name into its config. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- TESSERA_CONFIG ---- */

/* One entry "[backend.]op:variant"; false (with a warning) when malformed. */
static bool parse_override(const char *text, size_t length, tsr__config_override *out) {
  memset(out, 0, sizeof *out);
  const char *colon = memchr(text, ':', length);
  if (!colon || colon == text || colon + 1 == text + length)
    return false;
  const char *op_start = text;
  const char *dot = memchr(text, '.', (size_t)(colon - text));
  if (dot) {
    size_t backend_length = (size_t)(dot - text);
    if (backend_length == 0 || backend_length >= sizeof out->backend)
      return false;
    memcpy(out->backend, text, backend_length);
    op_start = dot + 1;
  }
  size_t op_length = (size_t)(colon - op_start);
  bool found = false;
  for (int op = 0; op < TSR_OP_COUNT_ && !found; op++) {
    const char *name = tsr_op_name((tsr_op)op);
    if (strlen(name) == op_length && !memcmp(name, op_start, op_length)) {
      out->op = (tsr_op)op;
      found = true;
    }
  }
  size_t variant_length = (size_t)(text + length - colon - 1);
  if (!found || variant_length >= sizeof out->variant)
    return false;
  memcpy(out->variant, colon + 1, variant_length);
  return true;
}

void tsr__overrides_load(tsr_context *context) {
  context->overrides = NULL;
  context->override_count = 0;
  const char *config = tsr__getenv("TESSERA_CONFIG");
  if (!config || !*config)
    return;
  size_t entries = 1;
  for (const char *p = config; *p; p++)
    entries += *p == ',';
  context->overrides = calloc(entries, sizeof *context->overrides);
  if (!context->overrides) {
    tsr__log(TSR_LOG_WARN, "TESSERA_CONFIG ignored: out of host memory");
    return;
  }
  const char *p = config;
  while (*p) {
    while (*p == ',' || *p == ' ')
      p++;
    const char *end = p;
    while (*end && *end != ',')
      end++;
    size_t length = (size_t)(end - p);
    while (length > 0 && p[length - 1] == ' ')
      length--;
    if (length > 0) {
      tsr__config_override *o = &context->overrides[context->override_count];
      if (parse_override(p, length, o))
        context->override_count++;
      else
        tsr__log(TSR_LOG_WARN,
                 "TESSERA_CONFIG entry '%.*s' ignored: it is not [backend.]op:variant with op "
                 "one of tessera's ops (gemm, attention, rmsnorm, ...)",
                 (int)length, p);
    }
    p = end;
  }
}

void tsr__overrides_free(tsr_context *context) {
  free(context->overrides);
  context->overrides = NULL;
  context->override_count = 0;
}

/* The override for this device's backend and op: one naming the backend
 * wins over one that does not. */
static const tsr__config_override *find_override(const tsr_device *device, tsr_op op) {
  const tsr_context *context = device->context;
  const tsr__config_override *general = NULL;
  for (uint32_t i = 0; i < context->override_count; i++) {
    const tsr__config_override *o = &context->overrides[i];
    if (o->op != op)
      continue;
    if (!o->backend[0]) {
      if (!general)
        general = o;
    } else if (!strcmp(o->backend, device->info.backend)) {
      return o;
    }
  }
  return general;
}

/* ---- asking the plugin ---- */

tsr_status tsr__list_variants(tsr_device *device, void *handle, const tsr__op_args *args,
                              const char *call, tsr_plugin_variant_list *list) {
  /* The header only: the entries past `count` are never read. */
  list->struct_size = sizeof *list;
  list->count = 0;
  list->heuristic = 0;
  list->reason[0] = '\0';
  tsr_status st =
      device->plugin->table->op_variants(handle, args->op, tsr__op_args_pointer(args), list);
  if (st != TSR_OK)
    return tsr__fail_plugin(st, call, "the plugin could not list its variants");
  if (list->count == 0 || list->count > TSR_PLUGIN_MAX_VARIANTS || list->heuristic < 0 ||
      (uint32_t)list->heuristic >= list->count)
    return tsr__fail(TSR_ERROR_BACKEND, call,
                     "the %s plugin listed %u variants with heuristic index %d for %s",
                     device->info.backend, list->count, list->heuristic, tsr_op_name(args->op));
  return TSR_OK;
}

/* The config of variant `name` (NULL: the heuristic's). TSR_ERROR_NOT_FOUND,
 * with no error set, when the variant cannot run this problem. */
static tsr_status select_named(tsr_device *device, void *handle, const tsr__op_args *args,
                               const char *call, const char *name, tsr__selection *out) {
  const tsr_plugin_slot *plugin = device->plugin;
  out->config = NULL;
  out->name[0] = '\0';
  if (plugin->v1) {
    /* ABI 1 plugins run by name: the list says which names exist. */
    tsr_plugin_variant_list list;
    tsr_status st = tsr__list_variants(device, handle, args, call, &list);
    if (st != TSR_OK)
      return st;
    if (!name) {
      tsr__strlcpy(out->name, list.variants[list.heuristic].name, sizeof out->name);
      return TSR_OK;
    }
    for (uint32_t i = 0; i < list.count; i++)
      if (!strcmp(list.variants[i].name, name)) {
        tsr__strlcpy(out->name, name, sizeof out->name);
        return TSR_OK;
      }
    return TSR_ERROR_NOT_FOUND;
  }
  tsr_plugin_selection selection = {sizeof selection, NULL, NULL};
  tsr_status st =
      plugin->table->op_select(handle, args->op, tsr__op_args_pointer(args), name, &selection);
  if (st == TSR_ERROR_NOT_FOUND && name) {
    char ignored[8];
    tsr__take_plugin_error(ignored, sizeof ignored);
    return st;
  }
  if (st != TSR_OK)
    return tsr__fail_plugin(st, call, "the plugin could not choose a config");
  if (!selection.name || !selection.name[0] || strlen(selection.name) >= sizeof out->name)
    return tsr__fail(TSR_ERROR_BACKEND, call,
                     "the %s plugin chose a %s config without a name of 1 to %zu characters",
                     device->info.backend, tsr_op_name(args->op), sizeof out->name - 1);
  out->config = selection.config;
  tsr__strlcpy(out->name, selection.name, sizeof out->name);
  return TSR_OK;
}

static void list_names(const tsr_plugin_variant_list *list, char *buf, size_t capacity) {
  size_t used = 0;
  buf[0] = '\0';
  for (uint32_t i = 0; i < list->count && used < capacity; i++) {
    int n = snprintf(buf + used, capacity - used, "%s%s", i ? ", " : "", list->variants[i].name);
    if (n < 0)
      break;
    used += (size_t)n;
  }
}

/* The tuning database's question "does the device have this variant here?",
 * answered by selecting it (so a hit needs no second call). */
typedef struct tuning_probe {
  tsr_device *device;
  void *handle;
  const tsr__op_args *args;
  const char *call;
  tsr__selection *out;
  tsr_status error; /* a failure other than "no such variant" */
} tuning_probe;

static bool probe_variant(void *context, const char *name) {
  tuning_probe *probe = context;
  tsr_status st =
      select_named(probe->device, probe->handle, probe->args, probe->call, name, probe->out);
  if (st != TSR_OK && st != TSR_ERROR_NOT_FOUND)
    probe->error = st;
  return st == TSR_OK;
}

static void fill_choice(tsr_choice *choice, const char *variant, tsr_choice_rule rule,
                        const char *source) {
  if (!choice)
    return;
  tsr__strlcpy(choice->variant, variant, sizeof choice->variant);
  choice->rule = rule;
  tsr__strlcpy(choice->source, source, sizeof choice->source);
}

tsr_status tsr__select(tsr_device *device, void *handle, const tsr__op_args *args, const char *call,
                       tsr__selection *out, tsr_choice *choice) {
  const tsr_plugin_v2 *table = device->plugin->table;
  const char *op = tsr_op_name(args->op);
  if (choice) {
    size_t size = choice->struct_size;
    memset(choice, 0, sizeof *choice);
    choice->struct_size = size;
    tsr__strlcpy(choice->device_key, device->info.device_key, sizeof choice->device_key);
  }
  tsr_status st = table->op_supported(handle, args->op, tsr__op_args_pointer(args));
  if (st != TSR_OK) {
    char fallback[160];
    snprintf(fallback, sizeof fallback, "%s cannot run this %s problem", device->info.selector, op);
    return tsr__fail_plugin(st, call, fallback);
  }
  char shape_class[96];
  tsr__shape_class(args, shape_class, sizeof shape_class);
  if (choice)
    tsr__strlcpy(choice->shape_class, shape_class, sizeof choice->shape_class);

  const tsr__config_override *override = args->variant ? NULL : find_override(device, args->op);
  const char *wanted = args->variant ? args->variant : override ? override->variant : NULL;
  if (wanted) {
    const char *origin = args->variant ? "desc->variant" : "TESSERA_CONFIG";
    st = select_named(device, handle, args, call, wanted, out);
    if (st == TSR_ERROR_NOT_FOUND) {
      tsr_plugin_variant_list list;
      st = tsr__list_variants(device, handle, args, call, &list);
      if (st != TSR_OK)
        return st;
      char names[1024];
      list_names(&list, names, sizeof names);
      return tsr__fail(TSR_ERROR_NOT_FOUND, call,
                       "%s = '%s' is not a %s variant of %s for this problem (variants: %s)",
                       origin, wanted, op, device->info.selector, names);
    }
    if (st == TSR_OK)
      fill_choice(choice, out->name, TSR_CHOICE_OVERRIDE, origin);
    return st;
  }

  tsr__tuning_key key = {device->info.device_key, op, tsr__op_dtype_name(args), shape_class};
  tsr__tuning_match match;
  tuning_probe probe = {device, handle, args, call, out, TSR_OK};
  switch (tsr__tuning_find(&key, probe_variant, &probe, &match)) {
  case TSR__TUNING_HIT:
    fill_choice(choice, out->name, TSR_CHOICE_TUNING_DB, match.source);
    return TSR_OK;
  case TSR__TUNING_STALE:
    if (probe.error != TSR_OK)
      return probe.error;
    /* once per row and loaded database: a warning per call would flood a
     * program's output for as long as the row stays */
    if (match.first_warning)
      tsr__log(TSR_LOG_WARN, "%s: tuning row %s names variant '%s', which %s does not have here",
               call, match.source, match.variant, device->info.selector);
    break;
  case TSR__TUNING_MISS:
    break;
  }

  st = select_named(device, handle, args, call, NULL, out);
  if (st != TSR_OK || !choice)
    return st;
  /* explain also says why the heuristic chose it */
  tsr_plugin_variant_list list;
  st = tsr__list_variants(device, handle, args, call, &list);
  if (st != TSR_OK)
    return st;
  fill_choice(choice, out->name, TSR_CHOICE_HEURISTIC,
              list.reason[0] ? list.reason : "the plugin's default");
  return TSR_OK;
}
