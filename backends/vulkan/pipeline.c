/* SPDX-License-Identifier: Apache-2.0 */
/* Compute pipelines, built on first use from the embedded SPIR-V (the
 * registry CMake generates) with the caller's specialisation constants, and
 * kept per device until it closes, as are the configs op_select prepares
 * (a variant's row and its pipeline). Every pipeline shares the device's layout
 * (VULKAN_MAX_BINDINGS push descriptors, VULKAN_PUSH_BYTES of push
 * constants). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vulkan_internal.h"

/* The generated registry (vulkan_shader_registry.c), ended by a NULL name. */
extern const struct vulkan_shader_row {
  const char *name;
  const unsigned char *code;
  const size_t *bytes;
} vulkan_shader_rows[];

typedef struct vulkan_pipeline_entry {
  struct vulkan_pipeline_entry *next;
  char name[64];
  uint32_t spec[VULKAN_MAX_SPEC_CONSTANTS];
  uint32_t n_spec;
  uint32_t subgroup;
  vulkan_pipeline pipeline;
} vulkan_pipeline_entry;

/* Blobs are looked up by name a few times per op; a linear scan over a few
 * dozen names costs nothing next to a dispatch. */
const vulkan_shader_blob *vulkan_shader_find(const char *name) {
  static _Thread_local vulkan_shader_blob found;
  for (size_t i = 0; vulkan_shader_rows[i].name; i++) {
    if (strcmp(vulkan_shader_rows[i].name, name) == 0) {
      found.name = vulkan_shader_rows[i].name;
      found.code = (const uint32_t *)(const void *)vulkan_shader_rows[i].code;
      found.bytes = *vulkan_shader_rows[i].bytes;
      return &found;
    }
  }
  return NULL;
}

/* Logs the compiler's statistics of a pipeline's executables, one line
 * each: "name: Register Count 128, Local Memory Size 0, ...". */
static void log_statistics(vulkan_device *device, VkPipeline pipeline, const char *name) {
  VkPipelineInfoKHR info = {.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, .pipeline = pipeline};
  VkPipelineExecutablePropertiesKHR executables[4];
  uint32_t count = 4;
  for (uint32_t i = 0; i < count; i++)
    executables[i] = (VkPipelineExecutablePropertiesKHR){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR};
  VkResult result =
      device->vk.vkGetPipelineExecutablePropertiesKHR(device->handle, &info, &count, executables);
  if (result != VK_SUCCESS && result != VK_INCOMPLETE)
    return;
  for (uint32_t e = 0; e < count; e++) {
    VkPipelineExecutableInfoKHR which = {.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR,
                                         .pipeline = pipeline,
                                         .executableIndex = e};
    VkPipelineExecutableStatisticKHR stats[16];
    uint32_t n = 16;
    for (uint32_t i = 0; i < n; i++)
      stats[i] = (VkPipelineExecutableStatisticKHR){
          .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR};
    result = device->vk.vkGetPipelineExecutableStatisticsKHR(device->handle, &which, &n, stats);
    if (result != VK_SUCCESS && result != VK_INCOMPLETE)
      continue;
    char line[1024];
    size_t used = 0;
    for (uint32_t i = 0; i < n && used < sizeof line; i++) {
      const VkPipelineExecutableStatisticKHR *s = &stats[i];
      int wrote;
      switch (s->format) {
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
        wrote = snprintf(line + used, sizeof line - used, "%s%s %s", i ? ", " : "", s->name,
                         s->value.b32 ? "yes" : "no");
        break;
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
        wrote = snprintf(line + used, sizeof line - used, "%s%s %lld", i ? ", " : "", s->name,
                         (long long)s->value.i64);
        break;
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
        wrote = snprintf(line + used, sizeof line - used, "%s%s %llu", i ? ", " : "", s->name,
                         (unsigned long long)s->value.u64);
        break;
      default:
        wrote = snprintf(line + used, sizeof line - used, "%s%s %g", i ? ", " : "", s->name,
                         s->value.f64);
        break;
      }
      if (wrote < 0)
        break;
      used += (size_t)wrote;
    }
    if (used >= sizeof line)
      used = sizeof line - 1;
    line[used] = 0;
    tsr_plugin_log(&device->plugin->host, TSR_LOG_INFO, "pipeline %s (%s): %s", name,
                   executables[e].name, line);
  }
}

static tsr_status build(vulkan_device *device, const vulkan_shader_blob *blob,
                        vulkan_pipeline_entry *entry) {
  VkShaderModuleCreateInfo module_info = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                          .codeSize = blob->bytes,
                                          .pCode = blob->code};
  VkShaderModule module;
  VkResult result = device->vk.vkCreateShaderModule(device->handle, &module_info, NULL, &module);
  if (result != VK_SUCCESS) {
    char what[128];
    snprintf(what, sizeof what, "vkCreateShaderModule(%s)", blob->name);
    return vulkan_fail(device->plugin, result, what);
  }
  VkSpecializationMapEntry map[VULKAN_MAX_SPEC_CONSTANTS];
  for (uint32_t i = 0; i < entry->n_spec; i++)
    map[i] = (VkSpecializationMapEntry){
        .constantID = i, .offset = i * (uint32_t)sizeof(uint32_t), .size = sizeof(uint32_t)};
  VkSpecializationInfo spec = {.mapEntryCount = entry->n_spec,
                               .pMapEntries = map,
                               .dataSize = entry->n_spec * sizeof(uint32_t),
                               .pData = entry->spec};
  VkPipelineShaderStageRequiredSubgroupSizeCreateInfoEXT required = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO_EXT,
      .requiredSubgroupSize = entry->subgroup};
  VkComputePipelineCreateInfo create = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .flags = device->pipeline_stats ? VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR : 0,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .pNext = entry->subgroup ? &required : NULL,
                .flags = entry->subgroup
                             ? VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT_EXT
                             : 0,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = module,
                .pName = "main",
                .pSpecializationInfo = entry->n_spec ? &spec : NULL},
      .layout = device->layout};
  result = device->vk.vkCreateComputePipelines(device->handle, device->cache, 1, &create, NULL,
                                               &entry->pipeline.handle);
  device->vk.vkDestroyShaderModule(device->handle, module, NULL);
  if (result != VK_SUCCESS) {
    char what[128];
    snprintf(what, sizeof what, "vkCreateComputePipelines(%s)", blob->name);
    return vulkan_fail(device->plugin, result, what);
  }
  if (device->pipeline_stats)
    log_statistics(device, entry->pipeline.handle, blob->name);
  entry->pipeline.local_size[0] = entry->n_spec > 0 ? entry->spec[0] : 1;
  entry->pipeline.local_size[1] = 1;
  entry->pipeline.local_size[2] = 1;
  return TSR_OK;
}

tsr_status vulkan_pipeline_get(vulkan_device *device, const char *name, const uint32_t *spec,
                               uint32_t n_spec, uint32_t required_subgroup_size,
                               const vulkan_pipeline **out) {
  const vulkan_shader_blob *blob = vulkan_shader_find(name);
  if (!blob) {
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_NOT_FOUND,
                           "no embedded shader named %s", name);
  }
  return vulkan_pipeline_get_code(device, blob, spec, n_spec, required_subgroup_size, out);
}

tsr_status vulkan_pipeline_get_code(vulkan_device *device, const vulkan_shader_blob *blob,
                                    const uint32_t *spec, uint32_t n_spec,
                                    uint32_t required_subgroup_size, const vulkan_pipeline **out) {
  const char *name = blob->name;
  if (n_spec > VULKAN_MAX_SPEC_CONSTANTS ||
      strlen(name) >= sizeof(((vulkan_pipeline_entry *)0)->name)) {
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_INVALID_VALUE,
                           "pipeline %s: %u specialisation constants (max %d) or a name of "
                           "%d characters or more",
                           name, n_spec, VULKAN_MAX_SPEC_CONSTANTS,
                           (int)sizeof(((vulkan_pipeline_entry *)0)->name));
  }
  const vulkan_device_props *p = device->props;
  if (required_subgroup_size &&
      (!p->subgroup_size_control || required_subgroup_size < p->subgroup_min ||
       required_subgroup_size > p->subgroup_max)) {
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_UNSUPPORTED,
                           "pipeline %s wants subgroups of %u; the device allows %u..%u%s", name,
                           required_subgroup_size, p->subgroup_min, p->subgroup_max,
                           p->subgroup_size_control ? "" : " (no size control)");
  }
  pthread_mutex_lock(&device->pipeline_lock);
  for (vulkan_pipeline_entry *e = device->pipelines; e; e = e->next) {
    if (e->n_spec == n_spec && e->subgroup == required_subgroup_size &&
        strcmp(e->name, name) == 0 &&
        (n_spec == 0 || memcmp(e->spec, spec, n_spec * sizeof *spec) == 0)) {
      *out = &e->pipeline;
      pthread_mutex_unlock(&device->pipeline_lock);
      return TSR_OK;
    }
  }
  tsr_status status = TSR_OK;
  vulkan_pipeline_entry *entry = calloc(1, sizeof *entry);
  if (!entry) {
    status = tsr_plugin_fail(&device->plugin->host, TSR_ERROR_OUT_OF_MEMORY,
                             "out of host memory for a pipeline");
  } else {
    snprintf(entry->name, sizeof entry->name, "%s", name);
    if (n_spec)
      memcpy(entry->spec, spec, n_spec * sizeof *spec);
    entry->n_spec = n_spec;
    entry->subgroup = required_subgroup_size;
    status = build(device, blob, entry);
    if (status == TSR_OK) {
      entry->next = device->pipelines;
      device->pipelines = entry;
      *out = &entry->pipeline;
    } else {
      free(entry);
    }
  }
  pthread_mutex_unlock(&device->pipeline_lock);
  return status;
}

void vulkan_pipelines_release(vulkan_device *device) {
  vulkan_pipeline_entry *e = device->pipelines;
  while (e) {
    vulkan_pipeline_entry *next = e->next;
    device->vk.vkDestroyPipeline(device->handle, e->pipeline.handle, NULL);
    free(e);
    e = next;
  }
  device->pipelines = NULL;
}

/* ------------------------------------------------------------------------ */
/* Prepared configs (op_select's answers)                                    */
/* ------------------------------------------------------------------------ */

tsr_status vulkan_config_get(vulkan_device *device, tsr_op op, const char *name, const void *row,
                             const vulkan_pipeline *pipeline, uint32_t width,
                             const vulkan_config **out) {
  const vulkan_pipeline *none[VULKAN_CONFIG_EXTRA] = {NULL};
  return vulkan_config_get_with(device, op, name, row, pipeline, width, none, out);
}

tsr_status vulkan_config_get_with(vulkan_device *device, tsr_op op, const char *name,
                                  const void *row, const vulkan_pipeline *pipeline, uint32_t width,
                                  const vulkan_pipeline *const extra[VULKAN_CONFIG_EXTRA],
                                  const vulkan_config **out) {
  pthread_mutex_lock(&device->config_lock);
  vulkan_config *config = device->configs;
  while (config &&
         !(config->op == op && config->row == row && config->pipeline == pipeline &&
           config->width == width && memcmp(config->extra, extra, sizeof config->extra) == 0))
    config = config->next;
  if (!config) {
    config = calloc(1, sizeof *config);
    if (config) {
      *config = (vulkan_config){name, device->configs, op, row, pipeline, width, {NULL}};
      memcpy(config->extra, extra, sizeof config->extra);
      device->configs = config;
    }
  }
  pthread_mutex_unlock(&device->config_lock);
  if (!config)
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_OUT_OF_MEMORY,
                           "out of host memory for a config");
  *out = config;
  return TSR_OK;
}

void vulkan_configs_release(vulkan_device *device) {
  vulkan_config *config = device->configs;
  while (config) {
    vulkan_config *next = config->next;
    free(config);
    config = next;
  }
  device->configs = NULL;
}
