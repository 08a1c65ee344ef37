/* SPDX-License-Identifier: Apache-2.0 */
/* Plugin init and shutdown: init dlopens the Vulkan loader (libvulkan.so.1,
 * or TESSERA_VULKAN_LOADER; loader.c), creates a compute-only instance (with
 * the validation layer when TESSERA_VULKAN_VALIDATION=1) and reads every
 * physical device's properties, features and cooperative-matrix shapes; a
 * missing loader, no Vulkan 1.2 or no usable device leaves the plugin loaded
 * with zero devices and the reason at debug level. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vulkan_internal.h"

/* ------------------------------------------------------------------------ */
/* Host services                                                             */
/* ------------------------------------------------------------------------ */

tsr_status vulkan_fail(const vulkan_plugin *plugin, VkResult result, const char *what) {
  return tsr_plugin_fail(&plugin->host,
                         result == VK_ERROR_OUT_OF_DEVICE_MEMORY ||
                                 result == VK_ERROR_OUT_OF_HOST_MEMORY
                             ? TSR_ERROR_OUT_OF_MEMORY
                             : TSR_ERROR_BACKEND,
                         "%s: %s", what, vulkan_result_name(result));
}

/* ------------------------------------------------------------------------ */
/* Init: loader, instance, physical devices                                  */
/* ------------------------------------------------------------------------ */

/* Validation messages (TESSERA_VULKAN_VALIDATION=1): errors are logged at
 * error level with a fixed prefix that tests look for; warnings at debug. */
static VKAPI_ATTR VkBool32 VKAPI_CALL validation_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
    const VkDebugUtilsMessengerCallbackDataEXT *data, void *user) {
  (void)types;
  const vulkan_plugin *plugin = user;
  const char *text = data && data->pMessage ? data->pMessage : "(no message)";
  if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)
    tsr_plugin_log(&plugin->host, TSR_LOG_ERROR, "vulkan validation error: %s", text);
  else
    tsr_plugin_log(&plugin->host, TSR_LOG_DEBUG, "vulkan validation: %s", text);
  return VK_FALSE;
}

static bool instance_has_extension(const vulkan_loader *l, const char *name) {
  uint32_t count = 0;
  if (l->vkEnumerateInstanceExtensionProperties(NULL, &count, NULL) != VK_SUCCESS || !count)
    return false;
  VkExtensionProperties *list = calloc(count, sizeof *list);
  bool found = false;
  if (list && l->vkEnumerateInstanceExtensionProperties(NULL, &count, list) == VK_SUCCESS)
    for (uint32_t i = 0; i < count && !found; i++)
      found = strcmp(list[i].extensionName, name) == 0;
  free(list);
  return found;
}

static bool instance_has_layer(const vulkan_loader *l, const char *name) {
  uint32_t count = 0;
  if (l->vkEnumerateInstanceLayerProperties(&count, NULL) != VK_SUCCESS || !count)
    return false;
  VkLayerProperties *list = calloc(count, sizeof *list);
  bool found = false;
  if (list && l->vkEnumerateInstanceLayerProperties(&count, list) == VK_SUCCESS)
    for (uint32_t i = 0; i < count && !found; i++)
      found = strcmp(list[i].layerName, name) == 0;
  free(list);
  return found;
}

static void format_uuid(const uint8_t *b, char *out, size_t capacity) {
  snprintf(out, capacity,
           "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
           b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
           b[15]);
}

typedef struct extension_list {
  VkExtensionProperties *items;
  uint32_t count;
} extension_list;

static bool has_extension(const extension_list *list, const char *name) {
  for (uint32_t i = 0; i < list->count; i++)
    if (strcmp(list->items[i].extensionName, name) == 0)
      return true;
  return false;
}

static void read_coopmat_shapes(vulkan_plugin *plugin, vulkan_device_props *p,
                                const extension_list *extensions) {
  const vulkan_loader *l = &plugin->loader;
  if (has_extension(extensions, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME) &&
      l->vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR) {
    uint32_t count = 0;
    l->vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR(p->physical, &count, NULL);
    if (count > VULKAN_MAX_COOPMAT_SHAPES)
      count = VULKAN_MAX_COOPMAT_SHAPES;
    VkCooperativeMatrixPropertiesKHR shapes[VULKAN_MAX_COOPMAT_SHAPES];
    for (uint32_t i = 0; i < count; i++) {
      memset(&shapes[i], 0, sizeof shapes[i]);
      shapes[i].sType = VULKAN_STYPE_COOPMAT_PROPERTIES_KHR;
    }
    VkResult r = l->vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR(p->physical, &count, shapes);
    if ((r == VK_SUCCESS || r == VK_INCOMPLETE) && count > 0) {
      p->coopmat_khr = true;
      p->coopmat_khr_count = count;
      for (uint32_t i = 0; i < count; i++)
        p->coopmat_khr_shapes[i] = (vulkan_coopmat_shape){shapes[i].MSize,
                                                          shapes[i].NSize,
                                                          shapes[i].KSize,
                                                          (uint32_t)shapes[i].AType,
                                                          (uint32_t)shapes[i].BType,
                                                          (uint32_t)shapes[i].CType,
                                                          (uint32_t)shapes[i].ResultType,
                                                          shapes[i].saturatingAccumulation != 0,
                                                          (uint32_t)shapes[i].scope};
    }
  }
  if (has_extension(extensions, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME) &&
      l->vkGetPhysicalDeviceCooperativeMatrixPropertiesNV) {
    uint32_t count = 0;
    l->vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(p->physical, &count, NULL);
    if (count > VULKAN_MAX_COOPMAT_SHAPES)
      count = VULKAN_MAX_COOPMAT_SHAPES;
    VkCooperativeMatrixPropertiesNV shapes[VULKAN_MAX_COOPMAT_SHAPES];
    for (uint32_t i = 0; i < count; i++) {
      memset(&shapes[i], 0, sizeof shapes[i]);
      shapes[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
    }
    VkResult r = l->vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(p->physical, &count, shapes);
    if ((r == VK_SUCCESS || r == VK_INCOMPLETE) && count > 0) {
      p->coopmat_nv = true;
      p->coopmat_nv_count = count;
      for (uint32_t i = 0; i < count; i++)
        p->coopmat_nv_shapes[i] =
            (vulkan_coopmat_shape){shapes[i].MSize,           shapes[i].NSize,
                                   shapes[i].KSize,           (uint32_t)shapes[i].AType,
                                   (uint32_t)shapes[i].BType, (uint32_t)shapes[i].CType,
                                   (uint32_t)shapes[i].DType, false,
                                   (uint32_t)shapes[i].scope};
    }
  }
}

/* Reads one physical device; false (with `why`) when the plugin cannot use
 * it: no Vulkan 1.2, no compute queue, no push descriptors or timeline
 * semaphores. */
static bool read_device(vulkan_plugin *plugin, VkPhysicalDevice physical, vulkan_device_props *p,
                        char *why, size_t capacity) {
  const vulkan_loader *l = &plugin->loader;
  memset(p, 0, sizeof *p);
  p->physical = physical;
  VkPhysicalDeviceProperties base;
  l->vkGetPhysicalDeviceProperties(physical, &base);
  snprintf(p->name, sizeof p->name, "%s", base.deviceName);
  p->api_version = base.apiVersion;
  p->driver_version = base.driverVersion;
  p->vendor_id = base.vendorID;
  p->device_id = base.deviceID;
  p->type = base.deviceType;
  if (VK_API_VERSION_MAJOR(base.apiVersion) == 1 && VK_API_VERSION_MINOR(base.apiVersion) < 2) {
    snprintf(why, capacity, "Vulkan %u.%u (the plugin needs 1.2)",
             VK_API_VERSION_MAJOR(base.apiVersion), VK_API_VERSION_MINOR(base.apiVersion));
    return false;
  }
  extension_list extensions = {NULL, 0};
  l->vkEnumerateDeviceExtensionProperties(physical, NULL, &extensions.count, NULL);
  extensions.items = calloc(extensions.count ? extensions.count : 1, sizeof *extensions.items);
  if (!extensions.items) {
    snprintf(why, capacity, "out of host memory");
    return false;
  }
  l->vkEnumerateDeviceExtensionProperties(physical, NULL, &extensions.count, extensions.items);
  if (!has_extension(&extensions, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME)) {
    snprintf(why, capacity, "no %s", VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
    free(extensions.items);
    return false;
  }
  bool vk13 =
      VK_API_VERSION_MINOR(base.apiVersion) >= 3 || VK_API_VERSION_MAJOR(base.apiVersion) > 1;
  bool size_control =
      vk13 || has_extension(&extensions, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);

  /* Properties: ids, driver, subgroups, vendor core counts. */
  VkPhysicalDeviceIDProperties ids = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
  VkPhysicalDeviceDriverProperties driver = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES, .pNext = &ids};
  VkPhysicalDeviceSubgroupProperties subgroup = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES, .pNext = &driver};
  VkPhysicalDeviceSubgroupSizeControlPropertiesEXT sizes = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES_EXT};
  VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
  VkPhysicalDeviceShaderCorePropertiesAMD amd = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD};
  VkPhysicalDeviceExternalMemoryHostPropertiesEXT host_import = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT};
  VkPhysicalDeviceProperties2 properties = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                            .pNext = &subgroup};
  void **tail = &ids.pNext;
  if (size_control) {
    *tail = &sizes;
    tail = &sizes.pNext;
  }
  bool has_sm = has_extension(&extensions, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME);
  if (has_sm) {
    *tail = &sm;
    tail = &sm.pNext;
  }
  bool has_amd = has_extension(&extensions, VK_AMD_SHADER_CORE_PROPERTIES_EXTENSION_NAME);
  if (has_amd) {
    *tail = &amd;
    tail = &amd.pNext;
  }
  p->external_memory_host = has_extension(&extensions, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
  if (p->external_memory_host) {
    *tail = &host_import;
    tail = &host_import.pNext;
  }
  l->vkGetPhysicalDeviceProperties2(physical, &properties);
  p->host_import_alignment = host_import.minImportedHostPointerAlignment;
  if (p->external_memory_host && p->host_import_alignment == 0)
    p->external_memory_host = false; /* a driver that gives no alignment is not trusted */
  format_uuid(ids.deviceUUID, p->uuid, sizeof p->uuid);
  /* Truncating the driver's strings is fine: they are for people. */
  if (snprintf(p->driver_name, sizeof p->driver_name, "%s", driver.driverName) < 0)
    p->driver_name[0] = '\0';
  if (snprintf(p->driver_info, sizeof p->driver_info, "%s", driver.driverInfo) < 0)
    p->driver_info[0] = '\0';
  p->subgroup_size = subgroup.subgroupSize ? subgroup.subgroupSize : 1;
  p->subgroup_arithmetic = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                           (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
  p->subgroup_shuffle_vote = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                             (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT) &&
                             (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_VOTE_BIT);
  p->subgroup_min =
      size_control && sizes.minSubgroupSize ? sizes.minSubgroupSize : p->subgroup_size;
  p->subgroup_max =
      size_control && sizes.maxSubgroupSize ? sizes.maxSubgroupSize : p->subgroup_size;
  if (has_sm)
    p->compute_units = sm.shaderSMCount;
  else if (has_amd)
    p->compute_units =
        amd.shaderEngineCount * amd.shaderArraysPerEngineCount * amd.computeUnitsPerShaderArray;
  const VkPhysicalDeviceLimits *lim = &base.limits;
  p->shared_memory_bytes = lim->maxComputeSharedMemorySize;
  p->max_workgroup_invocations = lim->maxComputeWorkGroupInvocations;
  memcpy(p->max_workgroup_count, lim->maxComputeWorkGroupCount, sizeof p->max_workgroup_count);
  p->max_storage_range = lim->maxStorageBufferRange;
  p->storage_alignment =
      lim->minStorageBufferOffsetAlignment ? lim->minStorageBufferOffsetAlignment : 4;
  if (p->storage_alignment < 16)
    p->storage_alignment = 16; /* keeps 16-byte vector views of a binding aligned */
  p->timestamp_period = lim->timestampPeriod;

  /* Features. */
  VkPhysicalDeviceVulkan11Features f11 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features f12 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, .pNext = &f11};
  VkPhysicalDeviceSubgroupSizeControlFeaturesEXT fsize = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT};
  VkPhysicalDeviceFeatures2 features = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                        .pNext = &f12};
  if (size_control)
    f11.pNext = &fsize;
  l->vkGetPhysicalDeviceFeatures2(physical, &features);
  if (!f12.timelineSemaphore) {
    snprintf(why, capacity, "no timeline semaphores");
    free(extensions.items);
    return false;
  }
  p->shader_float16 = f12.shaderFloat16;
  p->storage_16bit = f11.storageBuffer16BitAccess;
  p->shader_int16 = features.features.shaderInt16;
  p->shader_int64 = features.features.shaderInt64;
  p->subgroup_size_control =
      size_control && fsize.subgroupSizeControl && fsize.computeFullSubgroups;

  /* Memory: the largest device-local heap. */
  VkPhysicalDeviceMemoryProperties memory;
  l->vkGetPhysicalDeviceMemoryProperties(physical, &memory);
  for (uint32_t h = 0; h < memory.memoryHeapCount; h++)
    if ((memory.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) &&
        memory.memoryHeaps[h].size > p->memory_bytes)
      p->memory_bytes = memory.memoryHeaps[h].size;

  /* A compute queue family: one without graphics where there is one (the
   * dedicated compute engine), else any with compute. */
  uint32_t families = 0;
  l->vkGetPhysicalDeviceQueueFamilyProperties(physical, &families, NULL);
  VkQueueFamilyProperties *family = calloc(families ? families : 1, sizeof *family);
  if (!family) {
    free(extensions.items);
    snprintf(why, capacity, "out of host memory");
    return false;
  }
  l->vkGetPhysicalDeviceQueueFamilyProperties(physical, &families, family);
  int chosen = -1;
  for (uint32_t f = 0; f < families; f++) {
    if (!(family[f].queueFlags & VK_QUEUE_COMPUTE_BIT) || family[f].queueCount == 0)
      continue;
    if (chosen < 0 ||
        (!(family[f].queueFlags & VK_QUEUE_GRAPHICS_BIT) &&
         (family[chosen].queueFlags & VK_QUEUE_GRAPHICS_BIT) && family[f].timestampValidBits > 0))
      chosen = (int)f;
  }
  if (chosen < 0) {
    snprintf(why, capacity, "no compute queue");
    free(family);
    free(extensions.items);
    return false;
  }
  p->queue_family = (uint32_t)chosen;
  p->timestamp_bits = lim->timestampComputeAndGraphics || family[chosen].timestampValidBits
                          ? family[chosen].timestampValidBits
                          : 0;
  free(family);
  read_coopmat_shapes(plugin, p, &extensions);
  free(extensions.items);
  /* TESSERA_VULKAN_NO_SUBGROUPS=1 takes the shared-memory reductions, so
   * tests cover them on devices that have subgroup arithmetic. */
  const char *no_subgroups = tsr_plugin_env(&plugin->host, "TESSERA_VULKAN_NO_SUBGROUPS");
  if (no_subgroups && *no_subgroups && strcmp(no_subgroups, "0") != 0)
    p->subgroup_arithmetic = false;
  return true;
}

/* Reports "no devices" with the reason at debug level and in `reason`. */
static tsr_status no_devices(vulkan_plugin *plugin, char *reason, size_t capacity,
                             const char *why) {
  tsr_plugin_log(&plugin->host, TSR_LOG_DEBUG, "no devices: %s", why);
  if (reason && capacity > 0)
    snprintf(reason, capacity, "no devices: %s", why);
  return TSR_OK;
}

static void release_instance(vulkan_plugin *plugin) {
  if (plugin->instance) {
    if (plugin->messenger && plugin->loader.vkDestroyDebugUtilsMessengerEXT)
      plugin->loader.vkDestroyDebugUtilsMessengerEXT(plugin->instance, plugin->messenger, NULL);
    /* The drivers and layers the instance loaded, all loaded by now. */
    vulkan_loader_pin_objects_since(plugin->objects_before_instance);
    if (plugin->loader.vkDestroyInstance)
      plugin->loader.vkDestroyInstance(plugin->instance, NULL);
  }
  plugin->instance = NULL;
  plugin->messenger = NULL;
  vulkan_loader_close(&plugin->loader);
}

tsr_status vulkan_init(const tsr_host_services_v2 *host, void **out, char *reason,
                       size_t reason_capacity) {
  tsr_plugin_host checked;
  tsr_status status = tsr_plugin_host_init(&checked, "vulkan", host, reason, reason_capacity);
  if (status != TSR_OK)
    return status;
  if (!out) {
    if (reason && reason_capacity > 0)
      snprintf(reason, reason_capacity, "vulkan: init needs an output");
    return TSR_ERROR_NULL_ARGUMENT;
  }
  vulkan_plugin *plugin = calloc(1, sizeof *plugin);
  if (!plugin) {
    if (reason && reason_capacity > 0)
      snprintf(reason, reason_capacity, "vulkan: out of host memory");
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  plugin->host = checked;
  *out = plugin;

  /* TESSERA_VULKAN_LOADER names another loader library (tests use a missing
   * one to prove the plugin copes). */
  char why[400];
  if (!vulkan_loader_open(&plugin->loader, tsr_plugin_env(&plugin->host, "TESSERA_VULKAN_LOADER"),
                          why, sizeof why))
    return no_devices(plugin, reason, reason_capacity, why);
  vulkan_loader *l = &plugin->loader;
  plugin->objects_before_instance = vulkan_loader_object_count();
  if (getenv("TESSERA_NO_DLCLOSE")) {
    /* Sanitizer runs: a bare instance loads the drivers once, and they stay
     * mapped (loader.h), before the queries below load and unload them. */
    VkInstanceCreateInfo bare = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    VkInstance probe = NULL;
    if (l->vkCreateInstance(&bare, NULL, &probe) == VK_SUCCESS) {
      vulkan_loader_pin_objects_since(plugin->objects_before_instance);
      PFN_vkDestroyInstance destroy =
          (PFN_vkDestroyInstance)l->vkGetInstanceProcAddr(probe, "vkDestroyInstance");
      if (destroy)
        destroy(probe, NULL);
    }
  }
  uint32_t instance_version = VK_API_VERSION_1_0;
  if (l->vkEnumerateInstanceVersion)
    l->vkEnumerateInstanceVersion(&instance_version);
  if (VK_API_VERSION_MAJOR(instance_version) == 1 && VK_API_VERSION_MINOR(instance_version) < 2) {
    snprintf(why, sizeof why, "the Vulkan loader speaks %u.%u (the plugin needs 1.2)",
             VK_API_VERSION_MAJOR(instance_version), VK_API_VERSION_MINOR(instance_version));
    release_instance(plugin);
    return no_devices(plugin, reason, reason_capacity, why);
  }

  /* No surface or display extensions: a compute-only instance. Validation
   * (layer and debug-utils messenger) only when asked for. */
  const char *layers[1], *extensions[2];
  uint32_t layer_count = 0, extension_count = 0;
  const char *validation = tsr_plugin_env(&plugin->host, "TESSERA_VULKAN_VALIDATION");
  bool validate = validation && *validation && strcmp(validation, "0") != 0;
  if (validate) {
    if (!instance_has_layer(l, "VK_LAYER_KHRONOS_validation") ||
        !instance_has_extension(l, VK_EXT_DEBUG_UTILS_EXTENSION_NAME)) {
      tsr_plugin_log(&plugin->host, TSR_LOG_ERROR,
                     "vulkan validation error: TESSERA_VULKAN_VALIDATION is set but "
                     "VK_LAYER_KHRONOS_validation or %s is missing",
                     VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
      validate = false;
    } else {
      layers[layer_count++] = "VK_LAYER_KHRONOS_validation";
      extensions[extension_count++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    }
  }
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                           .pApplicationName = "tessera",
                           .pEngineName = "tessera",
                           .engineVersion = VK_MAKE_API_VERSION(
                               0, TSR_VERSION_MAJOR, TSR_VERSION_MINOR, TSR_VERSION_PATCH),
                           .apiVersion = VK_API_VERSION_1_3};
  VkDebugUtilsMessengerCreateInfoEXT messenger = {
      .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
      .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT |
                         VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT,
      .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
      .pfnUserCallback = validation_message,
      .pUserData = plugin};
  VkInstanceCreateInfo create = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                 .pNext = validate ? &messenger : NULL,
                                 .pApplicationInfo = &app,
                                 .enabledLayerCount = layer_count,
                                 .ppEnabledLayerNames = layers,
                                 .enabledExtensionCount = extension_count,
                                 .ppEnabledExtensionNames = extensions};
  VkResult result = l->vkCreateInstance(&create, NULL, &plugin->instance);
  if (result != VK_SUCCESS) {
    plugin->instance = NULL;
    snprintf(why, sizeof why, "vkCreateInstance failed: %s", vulkan_result_name(result));
    release_instance(plugin);
    return no_devices(plugin, reason, reason_capacity, why);
  }
  if (!vulkan_loader_instance(l, plugin->instance, why, sizeof why)) {
    release_instance(plugin);
    return no_devices(plugin, reason, reason_capacity, why);
  }
  if (validate && l->vkCreateDebugUtilsMessengerEXT) {
    if (l->vkCreateDebugUtilsMessengerEXT(plugin->instance, &messenger, NULL, &plugin->messenger) ==
        VK_SUCCESS)
      tsr_plugin_log(&plugin->host, TSR_LOG_INFO, "vulkan validation layer enabled");
    else
      plugin->messenger = NULL;
  }

  uint32_t count = 0;
  result = l->vkEnumeratePhysicalDevices(plugin->instance, &count, NULL);
  if (result != VK_SUCCESS || count == 0) {
    snprintf(why, sizeof why, "the Vulkan loader sees no device (%s)",
             result == VK_SUCCESS ? "no driver or no GPU" : vulkan_result_name(result));
    release_instance(plugin);
    return no_devices(plugin, reason, reason_capacity, why);
  }
  VkPhysicalDevice *physical = calloc(count, sizeof *physical);
  plugin->devices = calloc(count, sizeof *plugin->devices);
  if (!physical || !plugin->devices ||
      l->vkEnumeratePhysicalDevices(plugin->instance, &count, physical) < 0) {
    free(physical);
    free(plugin->devices);
    plugin->devices = NULL;
    release_instance(plugin);
    return no_devices(plugin, reason, reason_capacity, "cannot list the physical devices");
  }
  for (uint32_t i = 0; i < count; i++) {
    vulkan_device_props *p = &plugin->devices[plugin->device_count];
    if (!read_device(plugin, physical[i], p, why, sizeof why)) {
      tsr_plugin_log(&plugin->host, TSR_LOG_INFO, "skipping Vulkan device %u (%s): %s", i, p->name,
                     why);
      continue;
    }
    tsr_plugin_log(&plugin->host, TSR_LOG_DEBUG,
                   "device %u: %s, vendor 0x%04x, subgroup %u, %u KiB shared memory, "
                   "cooperative matrices: %u KHR, %u NV shapes",
                   i, p->name, p->vendor_id, p->subgroup_size, p->shared_memory_bytes / 1024,
                   p->coopmat_khr_count, p->coopmat_nv_count);
    plugin->device_count++;
  }
  free(physical);
  if (plugin->device_count == 0) {
    release_instance(plugin);
    return no_devices(plugin, reason, reason_capacity,
                      "no Vulkan device has Vulkan 1.2, push descriptors and a compute queue");
  }
  return TSR_OK;
}

void vulkan_shutdown(void *handle) {
  vulkan_plugin *plugin = handle;
  if (!plugin)
    return;
  release_instance(plugin);
  free(plugin->devices);
  free(plugin);
}

uint32_t vulkan_device_count(void *handle) {
  return ((vulkan_plugin *)handle)->device_count;
}
