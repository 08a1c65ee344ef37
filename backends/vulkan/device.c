/* SPDX-License-Identifier: Apache-2.0 */
/* A tessera device on Vulkan: one logical device per physical device with
 * one compute queue, the pipeline layout every shader shares (push
 * descriptors, push constants), and the pipeline cache kept on disk under
 * $XDG_CACHE_HOME/tessera/ (~/.cache/tessera/), one file per device UUID and
 * driver version, so shaders are not recompiled by the driver at every run. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "configs.h"
#include "vulkan_internal.h"

void vulkan_pipelines_release(vulkan_device *device); /* pipeline.c */
tsr_status vulkan_memory_init(vulkan_device *device); /* memory.c */

/* ------------------------------------------------------------------------ */
/* Pipeline cache on disk                                                    */
/* ------------------------------------------------------------------------ */

static bool make_directories(char *path) {
  for (char *p = path + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    bool ok = mkdir(path, 0755) == 0 || errno == EEXIST;
    *p = '/';
    if (!ok)
      return false;
  }
  return mkdir(path, 0755) == 0 || errno == EEXIST;
}

static void cache_path(vulkan_device *device) {
  const vulkan_plugin *plugin = device->plugin;
  const char *get = NULL;
  char dir[900] = "";
  if ((get = tsr_plugin_env(&plugin->host, "XDG_CACHE_HOME")) && *get == '/')
    snprintf(dir, sizeof dir, "%s/tessera", get);
  else if ((get = tsr_plugin_env(&plugin->host, "HOME")) && *get == '/')
    snprintf(dir, sizeof dir, "%s/.cache/tessera", get);
  device->cache_path[0] = '\0';
  if (!dir[0] || !make_directories(dir))
    return;
  snprintf(device->cache_path, sizeof device->cache_path, "%s/vulkan-%s-%08x.pipelines", dir,
           device->props->uuid, device->props->driver_version);
}

static void *read_file(const char *path, size_t *size) {
  *size = 0;
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  void *data = NULL;
  if (fseek(f, 0, SEEK_END) == 0) {
    long length = ftell(f);
    if (length > 0 && length < (64l << 20) && fseek(f, 0, SEEK_SET) == 0) {
      data = malloc((size_t)length);
      if (data && fread(data, 1, (size_t)length, f) == (size_t)length) {
        *size = (size_t)length;
      } else {
        free(data);
        data = NULL;
      }
    }
  }
  fclose(f);
  return data;
}

/* Writes the cache through a temporary file and a rename, so a concurrent
 * reader sees the old file or the new one, never half of one. */
static void save_cache(vulkan_device *device) {
  if (!device->cache || !device->cache_path[0])
    return;
  size_t size = 0;
  if (device->vk.vkGetPipelineCacheData(device->handle, device->cache, &size, NULL) != VK_SUCCESS ||
      size == 0)
    return;
  void *data = malloc(size);
  if (!data)
    return;
  if (device->vk.vkGetPipelineCacheData(device->handle, device->cache, &size, data) == VK_SUCCESS) {
    char temporary[1100];
    snprintf(temporary, sizeof temporary, "%s.%ld.tmp", device->cache_path, (long)getpid());
    FILE *f = fopen(temporary, "wb");
    if (f) {
      bool ok = fwrite(data, 1, size, f) == size;
      ok = fclose(f) == 0 && ok;
      if (!ok || rename(temporary, device->cache_path) != 0)
        remove(temporary);
    }
  }
  free(data);
}

/* ------------------------------------------------------------------------ */
/* Device info                                                               */
/* ------------------------------------------------------------------------ */

static const char *vendor_name(uint32_t id) {
  switch (id) {
  case VULKAN_VENDOR_NVIDIA:
    return "NVIDIA";
  case VULKAN_VENDOR_AMD:
    return "AMD";
  case VULKAN_VENDOR_INTEL:
    return "Intel";
  case VULKAN_VENDOR_MESA:
    return "Mesa";
  case 0x13b5:
    return "ARM";
  case 0x5143:
    return "Qualcomm";
  case 0x1010:
    return "ImgTec";
  default:
    return NULL;
  }
}

/* The driver version as its vendor packs it. */
static void format_driver_version(const vulkan_device_props *p, char *out, size_t capacity) {
  uint32_t v = p->driver_version;
  int written;
  if (p->vendor_id == VULKAN_VENDOR_NVIDIA)
    written = snprintf(out, capacity, "%s %u.%u.%u", p->driver_name, (v >> 22) & 0x3ff,
                       (v >> 14) & 0xff, (v >> 6) & 0xff);
  else if (p->vendor_id == VULKAN_VENDOR_INTEL)
    written = snprintf(out, capacity, "%s %u.%u", p->driver_name, v >> 14, v & 0x3fff);
  else
    written = snprintf(out, capacity, "%s %s", p->driver_name, p->driver_info);
  if (written < 0 && capacity > 0)
    out[0] = '\0';
}

tsr_status vulkan_device_info(void *handle, uint32_t index, tsr_device_info *info) {
  vulkan_plugin *plugin = handle;
  if (index >= plugin->device_count) {
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_NOT_FOUND,
                           "device %u does not exist (%u found)", index, plugin->device_count);
  }
  const vulkan_device_props *p = &plugin->devices[index];
  /* lavapipe and other CPU implementations are CPU devices: they sort after
   * every GPU and after the native CPU plugin (same type, "cpu" < "vulkan"),
   * so "best" never prefers a software rasteriser. */
  switch (p->type) {
  case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
    info->type = TSR_DEVICE_GPU;
    break;
  case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
    info->type = TSR_DEVICE_INTEGRATED_GPU;
    break;
  case VK_PHYSICAL_DEVICE_TYPE_CPU:
    info->type = TSR_DEVICE_CPU;
    break;
  default:
    info->type = TSR_DEVICE_OTHER;
    break;
  }
  const char *vendor = vendor_name(p->vendor_id);
  if (vendor)
    snprintf(info->vendor, sizeof info->vendor, "%s", vendor);
  else
    snprintf(info->vendor, sizeof info->vendor, "0x%04x", p->vendor_id);
  snprintf(info->name, sizeof info->name, "%s", p->name);
  snprintf(info->arch, sizeof info->arch, "%s", vulkan_class_of(p)->name);
  snprintf(info->physical_id, sizeof info->physical_id, "%s", p->uuid);
  format_driver_version(p, info->driver_version, sizeof info->driver_version);
  info->memory_bytes = p->memory_bytes;
  info->compute_units = p->compute_units;
  info->dtype_mask = (1u << TSR_DTYPE_F32) | (1u << TSR_DTYPE_I32);
  if (p->storage_16bit)
    info->dtype_mask |= (1u << TSR_DTYPE_F16) | (1u << TSR_DTYPE_BF16);
  /* Named one by one: an op a newer header adds is not claimed until this
   * plugin runs it (kv_append's bit also says every serving attention form
   * runs here: the core sends those only to devices that set it). */
  info->op_mask = (1u << TSR_OP_GEMM) | (1u << TSR_OP_GROUPED_GEMM) | (1u << TSR_OP_ATTENTION) |
                  (1u << TSR_OP_RMSNORM) | (1u << TSR_OP_LAYERNORM) | (1u << TSR_OP_SOFTMAX) |
                  (1u << TSR_OP_ROPE) | (1u << TSR_OP_SWIGLU) | (1u << TSR_OP_GELU) |
                  (1u << TSR_OP_CROSS_ENTROPY) | (1u << TSR_OP_KV_APPEND);
  info->host_visible = 0;
  if (info->struct_size >= offsetof(tsr_device_info, details) + sizeof info->details) {
    char shapes[256] = "";
    size_t used = 0;
    for (uint32_t i = 0; i < p->coopmat_khr_count && used + 24 < sizeof shapes; i++)
      used += (size_t)snprintf(shapes + used, sizeof shapes - used, "%s%ux%ux%u", i ? " " : "",
                               p->coopmat_khr_shapes[i].m, p->coopmat_khr_shapes[i].n,
                               p->coopmat_khr_shapes[i].k);
    snprintf(info->details, sizeof info->details,
             "Vulkan: %u.%u.%u\n"
             "driver: %s (%s)\n"
             "vendor id: 0x%04x, device id: 0x%04x\n"
             "subgroup size: %u (min %u, max %u%s)\n"
             "subgroup arithmetic: %s\n"
             "shared memory per workgroup: %u KiB\n"
             "max storage buffer range: %llu MiB\n"
             "shaderFloat16: %s, 16-bit storage: %s\n"
             "cooperative matrices: KHR %u shapes%s%s, NV %u shapes\n"
             "timestamps: %u bits, %.3f ns per tick\n"
             "tile tables: %s",
             VK_API_VERSION_MAJOR(p->api_version), VK_API_VERSION_MINOR(p->api_version),
             VK_API_VERSION_PATCH(p->api_version), p->driver_name, p->driver_info, p->vendor_id,
             p->device_id, p->subgroup_size, p->subgroup_min, p->subgroup_max,
             p->subgroup_size_control ? ", size control" : "",
             p->subgroup_arithmetic ? "yes" : "no", p->shared_memory_bytes / 1024,
             (unsigned long long)(p->max_storage_range >> 20), p->shader_float16 ? "yes" : "no",
             p->storage_16bit ? "yes" : "no", p->coopmat_khr_count,
             p->coopmat_khr_count ? ": " : "", shapes, p->coopmat_nv_count, p->timestamp_bits,
             (double)p->timestamp_period, vulkan_class_of(p)->name);
  }
  return TSR_OK;
}

/* ------------------------------------------------------------------------ */
/* Open and close                                                            */
/* ------------------------------------------------------------------------ */

static void release_device(vulkan_device *device) {
  if (device->handle) {
    device->vk.vkDeviceWaitIdle(device->handle);
    vulkan_configs_release(device);
    vulkan_pipelines_release(device);
    save_cache(device);
    if (device->cache)
      device->vk.vkDestroyPipelineCache(device->handle, device->cache, NULL);
    vulkan_memory_release(device);
    if (device->layout)
      device->vk.vkDestroyPipelineLayout(device->handle, device->layout, NULL);
    if (device->set_layout)
      device->vk.vkDestroyDescriptorSetLayout(device->handle, device->set_layout, NULL);
    device->vk.vkDestroyDevice(device->handle, NULL);
  }
  pthread_mutex_destroy(&device->queue_lock);
  pthread_mutex_destroy(&device->pipeline_lock);
  pthread_mutex_destroy(&device->memory_lock);
  pthread_mutex_destroy(&device->config_lock);
  free(device);
}

static bool device_has_extension(const vulkan_plugin *plugin, VkPhysicalDevice physical,
                                 const char *name) {
  uint32_t count = 0;
  plugin->loader.vkEnumerateDeviceExtensionProperties(physical, NULL, &count, NULL);
  VkExtensionProperties *list = calloc(count ? count : 1, sizeof *list);
  bool found = false;
  if (list &&
      plugin->loader.vkEnumerateDeviceExtensionProperties(physical, NULL, &count, list) >= 0)
    for (uint32_t i = 0; i < count && !found; i++)
      found = strcmp(list[i].extensionName, name) == 0;
  free(list);
  return found;
}

/* Creates the logical device with the features the shaders may use, each
 * only when the physical device has it. */
static tsr_status create_logical_device(vulkan_device *device) {
  vulkan_plugin *plugin = device->plugin;
  const vulkan_device_props *p = device->props;
  const vulkan_loader *l = &plugin->loader;

  VkPhysicalDeviceVulkan11Features has11 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features has12 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, .pNext = &has11};
  VkPhysicalDeviceFeatures2 has = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                   .pNext = &has12};
  l->vkGetPhysicalDeviceFeatures2(p->physical, &has);

  const char *extensions[6];
  uint32_t extension_count = 0;
  extensions[extension_count++] = VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME;
  bool vk13 = VK_API_VERSION_MINOR(p->api_version) >= 3 || VK_API_VERSION_MAJOR(p->api_version) > 1;
  if (p->subgroup_size_control && !vk13)
    extensions[extension_count++] = VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME;
  if (p->external_memory_host) /* tsr_buffer_wrap_host (memory.c) */
    extensions[extension_count++] = VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME;
  if (p->coopmat_khr)
    extensions[extension_count++] = VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME;
  if (p->coopmat_nv &&
      device_has_extension(plugin, p->physical, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME))
    extensions[extension_count++] = VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME;
  /* Diagnosis switches, read here once so that no op reads the environment:
   * the compiler's statistics of every pipeline (pipeline.c), the NV build
   * of the coopmat shaders and the coopmat probe (spirv_rewrite.c, ops_gemm.c). */
  const char *want_stats = tsr_plugin_env(&plugin->host, "TESSERA_VULKAN_PIPELINE_STATS");
  const char *force_nv = tsr_plugin_env(&plugin->host, "TESSERA_VULKAN_COOPMAT_NV");
  const char *probe = tsr_plugin_env(&plugin->host, "TESSERA_VULKAN_COOPMAT_PROBE");
  device->coopmat_force_nv = force_nv != NULL;
  device->coopmat_probe = probe ? (uint32_t)atoi(probe) : 0u;
  device->pipeline_stats =
      want_stats && *want_stats && strcmp(want_stats, "0") != 0 &&
      device_has_extension(plugin, p->physical,
                           VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
  if (device->pipeline_stats)
    extensions[extension_count++] = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;

  VkPhysicalDeviceVulkan11Features f11 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
      .storageBuffer16BitAccess = has11.storageBuffer16BitAccess,
      .uniformAndStorageBuffer16BitAccess = has11.uniformAndStorageBuffer16BitAccess};
  VkPhysicalDeviceVulkan12Features f12 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
      .pNext = &f11,
      .timelineSemaphore = VK_TRUE,
      .shaderFloat16 = has12.shaderFloat16,
      .shaderInt8 = has12.shaderInt8,
      .storageBuffer8BitAccess = has12.storageBuffer8BitAccess,
      .shaderSubgroupExtendedTypes = has12.shaderSubgroupExtendedTypes,
      .vulkanMemoryModel = has12.vulkanMemoryModel,
      .vulkanMemoryModelDeviceScope = has12.vulkanMemoryModelDeviceScope};
  VkPhysicalDeviceSubgroupSizeControlFeaturesEXT fsize = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT,
      .subgroupSizeControl = VK_TRUE,
      .computeFullSubgroups = VK_TRUE};
  VkPhysicalDeviceCooperativeMatrixFeaturesKHR fkhr = {.sType = VULKAN_STYPE_COOPMAT_FEATURES_KHR,
                                                       .cooperativeMatrix = VK_TRUE};
  VkPhysicalDeviceCooperativeMatrixFeaturesNV fnv = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV,
      .cooperativeMatrix = VK_TRUE};
  void **tail = &f11.pNext;
  if (p->subgroup_size_control) {
    *tail = &fsize;
    tail = &fsize.pNext;
  }
  if (p->coopmat_khr) {
    *tail = &fkhr;
    tail = &fkhr.pNext;
  }
  if (p->coopmat_nv) {
    *tail = &fnv;
    tail = &fnv.pNext;
  }
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR fstats = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
      .pipelineExecutableInfo = VK_TRUE};
  if (device->pipeline_stats) {
    *tail = &fstats;
    tail = &fstats.pNext;
  }
  VkPhysicalDeviceFeatures2 features = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                        .pNext = &f12};
  features.features.shaderInt16 = has.features.shaderInt16;
  features.features.shaderInt64 = has.features.shaderInt64;
  features.features.shaderFloat64 = has.features.shaderFloat64;

  float priority = 1.0f;
  VkDeviceQueueCreateInfo queue = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = p->queue_family,
                                   .queueCount = 1,
                                   .pQueuePriorities = &priority};
  VkDeviceCreateInfo create = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                               .pNext = &features,
                               .queueCreateInfoCount = 1,
                               .pQueueCreateInfos = &queue,
                               .enabledExtensionCount = extension_count,
                               .ppEnabledExtensionNames = extensions};
  VkResult result = l->vkCreateDevice(p->physical, &create, NULL, &device->handle);
  if (result != VK_SUCCESS) {
    device->handle = NULL;
    char what[400];
    snprintf(what, sizeof what, "vkCreateDevice on %s", p->name);
    return vulkan_fail(plugin, result, what);
  }
  char why[200];
  if (!vulkan_loader_device(l, device->handle, &device->vk, why, sizeof why)) {
    device->vk.vkDestroyDevice =
        (PFN_vkDestroyDevice)l->vkGetDeviceProcAddr(device->handle, "vkDestroyDevice");
    if (device->vk.vkDestroyDevice)
      device->vk.vkDestroyDevice(device->handle, NULL);
    device->handle = NULL;
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_BACKEND, "%s", why);
  }
  if (!device->vk.vkGetPipelineExecutableStatisticsKHR ||
      !device->vk.vkGetPipelineExecutablePropertiesKHR)
    device->pipeline_stats = false;
  device->vk.vkGetDeviceQueue(device->handle, p->queue_family, 0, &device->queue);
  return TSR_OK;
}

static tsr_status create_layouts(vulkan_device *device) {
  VkDescriptorSetLayoutBinding bindings[VULKAN_MAX_BINDINGS];
  for (uint32_t i = 0; i < VULKAN_MAX_BINDINGS; i++)
    bindings[i] =
        (VkDescriptorSetLayoutBinding){.binding = i,
                                       .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                       .descriptorCount = 1,
                                       .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
  VkDescriptorSetLayoutCreateInfo set = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
      .flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR,
      .bindingCount = VULKAN_MAX_BINDINGS,
      .pBindings = bindings};
  VkResult result =
      device->vk.vkCreateDescriptorSetLayout(device->handle, &set, NULL, &device->set_layout);
  if (result != VK_SUCCESS) {
    device->set_layout = NULL;
    return vulkan_fail(device->plugin, result, "vkCreateDescriptorSetLayout");
  }
  VkPushConstantRange push = {
      .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = VULKAN_PUSH_BYTES};
  VkPipelineLayoutCreateInfo layout = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                       .setLayoutCount = 1,
                                       .pSetLayouts = &device->set_layout,
                                       .pushConstantRangeCount = 1,
                                       .pPushConstantRanges = &push};
  result = device->vk.vkCreatePipelineLayout(device->handle, &layout, NULL, &device->layout);
  if (result != VK_SUCCESS) {
    device->layout = NULL;
    return vulkan_fail(device->plugin, result, "vkCreatePipelineLayout");
  }
  return TSR_OK;
}

static tsr_status create_cache(vulkan_device *device) {
  cache_path(device);
  size_t size = 0;
  void *data = device->cache_path[0] ? read_file(device->cache_path, &size) : NULL;
  VkPipelineCacheCreateInfo create = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
                                      .initialDataSize = size,
                                      .pInitialData = data};
  VkResult result = device->vk.vkCreatePipelineCache(device->handle, &create, NULL, &device->cache);
  if (result != VK_SUCCESS && data) {
    /* A cache the driver refuses is only lost time: start empty. */
    create.initialDataSize = 0;
    create.pInitialData = NULL;
    result = device->vk.vkCreatePipelineCache(device->handle, &create, NULL, &device->cache);
  }
  free(data);
  if (result != VK_SUCCESS) {
    device->cache = NULL;
    return vulkan_fail(device->plugin, result, "vkCreatePipelineCache");
  }
  tsr_plugin_log(&device->plugin->host, TSR_LOG_DEBUG, "pipeline cache: %s (%zu bytes read)",
                 device->cache_path[0] ? device->cache_path : "(not saved)", size);
  return TSR_OK;
}

tsr_status vulkan_device_open(void *handle, uint32_t index, void **out) {
  vulkan_plugin *plugin = handle;
  if (index >= plugin->device_count) {
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_NOT_FOUND,
                           "device %u does not exist (%u found)", index, plugin->device_count);
  }
  vulkan_device *device = calloc(1, sizeof *device);
  if (!device) {
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_OUT_OF_MEMORY,
                           "out of host memory for a device");
  }
  device->plugin = plugin;
  device->props = &plugin->devices[index];
  device->index = index;
  pthread_mutex_init(&device->queue_lock, NULL);
  pthread_mutex_init(&device->pipeline_lock, NULL);
  pthread_mutex_init(&device->memory_lock, NULL);
  pthread_mutex_init(&device->config_lock, NULL);
  tsr_status status = create_logical_device(device);
  if (status == TSR_OK)
    status = create_layouts(device);
  if (status == TSR_OK)
    status = create_cache(device);
  if (status == TSR_OK)
    status = vulkan_memory_init(device);
  if (status != TSR_OK) {
    release_device(device);
    return status;
  }
  *out = device;
  return TSR_OK;
}

void vulkan_device_close(void *handle) {
  if (handle)
    release_device(handle);
}
