/* SPDX-License-Identifier: Apache-2.0 */
/* Device classes and the fused ops' tables. A row op runs one workgroup per
 * row; its size is the tile parameter: wide enough that each invocation keeps
 * a few 4-element units of the row in registers (one read of memory), small
 * enough that several workgroups share a compute unit. lavapipe runs a
 * workgroup's invocations as SIMD lanes of one CPU thread, so it prefers
 * small workgroups (fewer barrier round trips); GPUs want 256 and up. */
#include "configs.h"

#include <stdio.h>
#include <string.h>

vulkan_config_class vulkan_config_class_of(const vulkan_device_props *p) {
  if (p->type == VK_PHYSICAL_DEVICE_TYPE_CPU)
    return VULKAN_CLASS_LAVAPIPE;
  switch (p->vendor_id) {
  case VULKAN_VENDOR_NVIDIA:
    return VULKAN_CLASS_NVIDIA;
  case VULKAN_VENDOR_AMD:
    return p->subgroup_min <= 32 ? VULKAN_CLASS_AMD_WAVE32 : VULKAN_CLASS_AMD_WAVE64;
  case VULKAN_VENDOR_INTEL:
    return VULKAN_CLASS_INTEL;
  default:
    return VULKAN_CLASS_GENERIC;
  }
}

const char *vulkan_config_class_name(vulkan_config_class c) {
  static const char *const names[VULKAN_CLASS_COUNT_] = {"lavapipe",   "nvidia", "amd-wave32",
                                                         "amd-wave64", "intel",  "generic"};
  return c < VULKAN_CLASS_COUNT_ ? names[c] : "generic";
}

/* Bounded copy: op_variants runs on every op call, snprintf("%s") is slower. */
static void copy_string(char *dst, size_t capacity, const char *src) {
  size_t n = strlen(src);
  if (n >= capacity)
    n = capacity - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

bool vulkan_put_variant(tsr_plugin_variant_list *out, const char *name, const char *description) {
  if (out->count >= TSR_PLUGIN_MAX_VARIANTS)
    return false;
  tsr_plugin_variant *v = &out->variants[out->count++];
  copy_string(v->name, sizeof v->name, name);
  copy_string(v->description, sizeof v->description, description);
  return true;
}

/* Every config any class may list; each class's table picks from these. */
#define ROWS_UNITS " invocations per row, up to 8 16-byte units each in registers"
#define ELEMENTWISE_UNITS " invocations per workgroup, 4 elements each when contiguous and aligned"
static const vulkan_fused_config rows_configs[] = {{"rows_t64", 64, "64" ROWS_UNITS},
                                                   {"rows_t128", 128, "128" ROWS_UNITS},
                                                   {"rows_t256", 256, "256" ROWS_UNITS},
                                                   {"rows_t512", 512, "512" ROWS_UNITS},
                                                   {"rows_t1024", 1024, "1024" ROWS_UNITS}};
static const vulkan_fused_config elementwise_configs[] = {
    {"elementwise_t64", 64, "64" ELEMENTWISE_UNITS},
    {"elementwise_t128", 128, "128" ELEMENTWISE_UNITS},
    {"elementwise_t256", 256, "256" ELEMENTWISE_UNITS}};
enum { ROWS_CONFIGS = 5, ELEMENTWISE_CONFIGS = 3 };

/* Per class: the smallest and largest row workgroup, and the elementwise
 * workgroup (an index into elementwise_configs). */
typedef struct class_table {
  uint32_t rows_min, rows_max;
  int elementwise;
} class_table;

static const class_table tables[VULKAN_CLASS_COUNT_] = {
    [VULKAN_CLASS_LAVAPIPE] = {64, 256, 0},     [VULKAN_CLASS_NVIDIA] = {128, 1024, 2},
    [VULKAN_CLASS_AMD_WAVE32] = {128, 1024, 2}, [VULKAN_CLASS_AMD_WAVE64] = {64, 1024, 2},
    [VULKAN_CLASS_INTEL] = {64, 512, 1},        [VULKAN_CLASS_GENERIC] = {64, 256, 1}};

static bool is_row_op(tsr_op op) {
  return op == TSR_OP_RMSNORM || op == TSR_OP_LAYERNORM || op == TSR_OP_SOFTMAX ||
         op == TSR_OP_CROSS_ENTROPY;
}

/* Rows: about 16 elements per invocation (four vector units), within the
 * class's range and the device's workgroup limit. */
static int rows_pick(const vulkan_device_props *p, int64_t n) {
  const class_table *t = &tables[vulkan_config_class_of(p)];
  uint32_t want = t->rows_min;
  while (want < t->rows_max && (int64_t)want * 16 < n)
    want *= 2;
  int pick = 0;
  for (int i = 0; i < ROWS_CONFIGS; i++)
    if (rows_configs[i].threads <= want && rows_configs[i].threads <= p->max_workgroup_invocations)
      pick = i;
  return pick;
}

/* Whether the class lists row config i on this device. */
static bool rows_listed(const vulkan_device_props *p, const class_table *t, int i) {
  uint32_t threads = rows_configs[i].threads;
  return threads >= t->rows_min && threads <= t->rows_max &&
         threads <= p->max_workgroup_invocations;
}

void vulkan_fused_variants(const vulkan_device_props *p, tsr_op op, int64_t n,
                           tsr_plugin_variant_list *out) {
  vulkan_config_class c = vulkan_config_class_of(p);
  const class_table *t = &tables[c];
  out->count = 0;
  if (is_row_op(op)) {
    int pick = rows_pick(p, n);
    for (int i = 0; i < ROWS_CONFIGS; i++) {
      if (!rows_listed(p, t, i))
        continue;
      if (i == pick)
        out->heuristic = (int32_t)out->count;
      vulkan_put_variant(out, rows_configs[i].variant, rows_configs[i].description);
    }
    snprintf(out->reason, sizeof out->reason,
             "%s table: about 16 elements per invocation for rows of %lld, within %u..%u",
             vulkan_config_class_name(c), (long long)n, t->rows_min, t->rows_max);
    return;
  }
  for (int i = 0; i < ELEMENTWISE_CONFIGS; i++) {
    if (i == t->elementwise)
      out->heuristic = (int32_t)out->count;
    vulkan_put_variant(out, elementwise_configs[i].variant, elementwise_configs[i].description);
  }
  snprintf(out->reason, sizeof out->reason, "%s table: %s", vulkan_config_class_name(c),
           elementwise_configs[t->elementwise].variant);
}

/* No list is built: this runs on every op call. */
const vulkan_fused_config *vulkan_fused_config_of(const vulkan_device_props *p, tsr_op op,
                                                  int64_t n, const char *name) {
  const class_table *t = &tables[vulkan_config_class_of(p)];
  if (is_row_op(op)) {
    if (!name) {
      int pick = rows_pick(p, n);
      for (int i = 0; i < ROWS_CONFIGS && !rows_listed(p, t, pick); i++)
        pick = i; /* the pick is not listed (tiny workgroup limit): the first that is */
      return rows_listed(p, t, pick) ? &rows_configs[pick] : NULL;
    }
    for (int i = 0; i < ROWS_CONFIGS; i++)
      if (strcmp(rows_configs[i].variant, name) == 0)
        return rows_listed(p, t, i) ? &rows_configs[i] : NULL;
    return NULL;
  }
  if (!name)
    return &elementwise_configs[t->elementwise];
  for (int i = 0; i < ELEMENTWISE_CONFIGS; i++)
    if (strcmp(elementwise_configs[i].variant, name) == 0)
      return &elementwise_configs[i];
  return NULL;
}
