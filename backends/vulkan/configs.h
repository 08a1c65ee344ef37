/* SPDX-License-Identifier: Apache-2.0 */
/* Tile configurations of the Vulkan plugin's fused ops, the device classes
 * that key the tables (vendor, subgroup size, shared memory, cooperative
 * matrices), and the heuristics (configs.c). The GEMM / attention tables
 * live with their launches (ops_matrix.c) and key on the same classes. Not
 * installed. */
#ifndef TESSERA_VULKAN_CONFIGS_H
#define TESSERA_VULKAN_CONFIGS_H

#include <stdbool.h>
#include <stdint.h>

#include "vulkan_internal.h"

/* Device classes, one tile table each. */
typedef enum vulkan_config_class {
  VULKAN_CLASS_LAVAPIPE,   /* Mesa's CPU implementation (CI) */
  VULKAN_CLASS_NVIDIA,     /* subgroup 32, 48 KiB shared memory per workgroup */
  VULKAN_CLASS_AMD_WAVE32, /* RDNA: subgroups of 32 allowed */
  VULKAN_CLASS_AMD_WAVE64, /* GCN / CDNA: subgroups of 64 only */
  VULKAN_CLASS_INTEL,
  VULKAN_CLASS_GENERIC,
  VULKAN_CLASS_COUNT_
} vulkan_config_class;

vulkan_config_class vulkan_config_class_of(const vulkan_device_props *props);
/* "lavapipe", "nvidia", "amd-wave32", ...: the device's `arch` string. */
const char *vulkan_config_class_name(vulkan_config_class c);

/* A row op (norms, softmax, cross entropy) or elementwise op config:
 * invocations per workgroup. */
typedef struct vulkan_fused_config {
  const char *variant;
  uint32_t threads;
  const char *description;
} vulkan_fused_config;

/* Row units (VEC elements) an invocation keeps in registers at most; longer
 * rows are read again from memory. */
enum { VULKAN_ROWS_MAX_ITEMS = 8 };

/* Fills `out` with the fused-op variants this device class lists and the
 * heuristic's pick for a row (or element) count `n` per workgroup. */
void vulkan_fused_variants(const vulkan_device_props *props, tsr_op op, int64_t n,
                           tsr_plugin_variant_list *out);
/* The config of variant `name` (NULL: the heuristic's pick for n); NULL when
 * the device class does not list it. */
const vulkan_fused_config *vulkan_fused_config_of(const vulkan_device_props *props, tsr_op op,
                                                  int64_t n, const char *name);

#endif /* TESSERA_VULKAN_CONFIGS_H */
