/* SPDX-License-Identifier: Apache-2.0 */
/* The Vulkan plugin's ABI table (tsr_plugin_v1). init dlopens the Vulkan
 * loader (libvulkan.so.1, or TESSERA_VULKAN_LOADER), creates a compute-only
 * instance and reads every physical device's properties; a missing loader, no
 * Vulkan 1.2 or no usable device leaves the plugin loaded with zero devices
 * and the reason at debug level. Devices (device.c), memory (memory.c),
 * queues and events (queue.c), pipelines (pipeline.c) and ops (ops.c,
 * ops_matrix.c) live in their own files; this one holds the table and the
 * entry points that only route. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "configs.h"
#include "vulkan_internal.h"

#define VULKAN_STRINGIFY_(x) #x
#define VULKAN_STRINGIFY(x) VULKAN_STRINGIFY_(x)
#define VULKAN_PLUGIN_VERSION                                                                      \
  VULKAN_STRINGIFY(TSR_VERSION_MAJOR)                                                              \
  "." VULKAN_STRINGIFY(TSR_VERSION_MINOR) "." VULKAN_STRINGIFY(TSR_VERSION_PATCH)

/* ------------------------------------------------------------------------ */
/* Host services                                                             */
/* ------------------------------------------------------------------------ */

void vulkan_log(const vulkan_plugin *plugin, int level, const char *fmt, ...) {
  if (!plugin->host.log)
    return;
  char message[VULKAN_MESSAGE_CAPACITY];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  plugin->host.log(plugin->host.host_handle, level, "%s", message);
}

void vulkan_set_error(const vulkan_plugin *plugin, const char *fmt, ...) {
  if (!plugin->host.set_error)
    return;
  char message[VULKAN_MESSAGE_CAPACITY];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  plugin->host.set_error(plugin->host.host_handle, "%s", message);
}

tsr_status vulkan_fail(const vulkan_plugin *plugin, VkResult result, const char *what) {
  vulkan_set_error(plugin, "vulkan: %s: %s", what, vulkan_result_name(result));
  return result == VK_ERROR_OUT_OF_DEVICE_MEMORY || result == VK_ERROR_OUT_OF_HOST_MEMORY
             ? TSR_ERROR_OUT_OF_MEMORY
             : TSR_ERROR_BACKEND;
}

const char *vulkan_op_name(tsr_op op) {
  static const char *const names[TSR_OP_COUNT_] = {
      "gemm",    "grouped_gemm", "attention", "rmsnorm", "layernorm",
      "softmax", "rope",         "swiglu",    "gelu",    "cross_entropy"};
  return (int)op >= 0 && op < TSR_OP_COUNT_ ? names[op] : "unknown op";
}

static const char *env(const vulkan_plugin *plugin, const char *name) {
  return plugin->host.get_env ? plugin->host.get_env(name) : NULL;
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
    vulkan_log(plugin, TSR_LOG_ERROR, "vulkan validation error: %s", text);
  else
    vulkan_log(plugin, TSR_LOG_DEBUG, "vulkan validation: %s", text);
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
  l->vkGetPhysicalDeviceProperties2(physical, &properties);
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
  const char *no_subgroups = env(plugin, "TESSERA_VULKAN_NO_SUBGROUPS");
  if (no_subgroups && *no_subgroups && strcmp(no_subgroups, "0") != 0)
    p->subgroup_arithmetic = false;
  return true;
}

/* Reports "no devices" with the reason at debug level and in `reason`. */
static tsr_status no_devices(vulkan_plugin *plugin, char *reason, size_t capacity,
                             const char *why) {
  vulkan_log(plugin, TSR_LOG_DEBUG, "no devices: %s", why);
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

static tsr_status vulkan_init(const tsr_host_services *host, void **out, char *reason,
                              size_t reason_capacity) {
  if (!host || !out) {
    if (reason && reason_capacity > 0)
      snprintf(reason, reason_capacity, "vulkan plugin: init needs host services and an output");
    return TSR_ERROR_NULL_ARGUMENT;
  }
  vulkan_plugin *plugin = calloc(1, sizeof *plugin);
  if (!plugin) {
    if (reason && reason_capacity > 0)
      snprintf(reason, reason_capacity, "vulkan plugin: out of memory");
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  size_t size = host->struct_size < sizeof plugin->host ? host->struct_size : sizeof plugin->host;
  memcpy(&plugin->host, host, size);
  *out = plugin;

  /* TESSERA_VULKAN_LOADER names another loader library (tests use a missing
   * one to prove the plugin copes). */
  char why[400];
  if (!vulkan_loader_open(&plugin->loader, env(plugin, "TESSERA_VULKAN_LOADER"), why, sizeof why))
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
  const char *validation = env(plugin, "TESSERA_VULKAN_VALIDATION");
  bool validate = validation && *validation && strcmp(validation, "0") != 0;
  if (validate) {
    if (!instance_has_layer(l, "VK_LAYER_KHRONOS_validation") ||
        !instance_has_extension(l, VK_EXT_DEBUG_UTILS_EXTENSION_NAME)) {
      vulkan_log(plugin, TSR_LOG_ERROR,
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
      vulkan_log(plugin, TSR_LOG_INFO, "vulkan validation layer enabled");
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
      vulkan_log(plugin, TSR_LOG_INFO, "skipping Vulkan device %u (%s): %s", i, p->name, why);
      continue;
    }
    vulkan_log(plugin, TSR_LOG_DEBUG,
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

static void vulkan_shutdown(void *handle) {
  vulkan_plugin *plugin = handle;
  if (!plugin)
    return;
  release_instance(plugin);
  free(plugin->devices);
  free(plugin);
}

static uint32_t vulkan_device_count(void *handle) {
  return ((vulkan_plugin *)handle)->device_count;
}

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

static tsr_status vulkan_device_info(void *handle, uint32_t index, tsr_device_info *info) {
  vulkan_plugin *plugin = handle;
  if (index >= plugin->device_count) {
    vulkan_set_error(plugin, "vulkan: device %u does not exist (%u found)", index,
                     plugin->device_count);
    return TSR_ERROR_NOT_FOUND;
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
  snprintf(info->arch, sizeof info->arch, "%s",
           vulkan_config_class_name(vulkan_config_class_of(p)));
  snprintf(info->physical_id, sizeof info->physical_id, "%s", p->uuid);
  format_driver_version(p, info->driver_version, sizeof info->driver_version);
  info->memory_bytes = p->memory_bytes;
  info->compute_units = p->compute_units;
  info->dtype_mask = (1u << TSR_DTYPE_F32) | (1u << TSR_DTYPE_I32);
  if (p->storage_16bit)
    info->dtype_mask |= (1u << TSR_DTYPE_F16) | (1u << TSR_DTYPE_BF16);
  info->op_mask = (1u << TSR_OP_COUNT_) - 1u;
  if (!VULKAN_HAVE_MATRIX)
    info->op_mask &=
        ~((1u << TSR_OP_GEMM) | (1u << TSR_OP_GROUPED_GEMM) | (1u << TSR_OP_ATTENTION));
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
             (double)p->timestamp_period, vulkan_config_class_name(vulkan_config_class_of(p)));
  }
  return TSR_OK;
}

/* ------------------------------------------------------------------------ */
/* Ops: fused ops here (ops.c), GEMM and attention in ops_matrix.c           */
/* ------------------------------------------------------------------------ */

static bool is_matrix_op(tsr_op op) {
  return op == TSR_OP_GEMM || op == TSR_OP_GROUPED_GEMM || op == TSR_OP_ATTENTION;
}

static tsr_status list_variants(const vulkan_device *device, tsr_op op, const void *args,
                                tsr_plugin_variant_list *out, char *why, size_t capacity) {
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  if (is_matrix_op(op)) {
#if VULKAN_HAVE_MATRIX
    return vulkan_matrix_variants(device, op, args, out, why, capacity);
#else
    snprintf(why, capacity, "not written yet in this build of the Vulkan plugin");
    return TSR_ERROR_UNSUPPORTED;
#endif
  }
  return vulkan_ops_variants(device, op, args, out, why, capacity);
}

/* Runs on every op call: fused ops only plan the launch; the matrix ops'
 * list goes on the stack (no allocation on the op path). */
static tsr_status vulkan_op_supported(void *handle, tsr_op op, const void *args) {
  vulkan_device *device = handle;
  if ((int)op < 0 || op >= TSR_OP_COUNT_) {
    vulkan_set_error(device->plugin, "vulkan: op %d is unknown", (int)op);
    return TSR_ERROR_UNSUPPORTED;
  }
  char why[VULKAN_MESSAGE_CAPACITY] = "";
  tsr_status status;
  if (is_matrix_op(op)) {
    tsr_plugin_variant_list list;
    status = list_variants(device, op, args, &list, why, sizeof why);
    if (status == TSR_OK && list.count == 0) {
      snprintf(why, sizeof why, "no variant can run this problem");
      status = TSR_ERROR_UNSUPPORTED;
    }
  } else {
    status = vulkan_ops_supported(device, op, args, why, sizeof why);
  }
  if (status != TSR_OK)
    vulkan_set_error(device->plugin, "vulkan: %s: %s", vulkan_op_name(op), why);
  return status;
}

static tsr_status vulkan_op_variants_entry(void *handle, tsr_op op, const void *args,
                                           tsr_plugin_variant_list *out) {
  vulkan_device *device = handle;
  const size_t header = offsetof(tsr_plugin_variant_list, variants);
  if (out->struct_size < header) {
    vulkan_set_error(device->plugin,
                     "vulkan: variant list struct_size %u is below the %zu bytes of ABI 1",
                     out->struct_size, header);
    return TSR_ERROR_STRUCT_SIZE;
  }
  if ((int)op < 0 || op >= TSR_OP_COUNT_) {
    vulkan_set_error(device->plugin, "vulkan: op %d is unknown", (int)op);
    return TSR_ERROR_UNSUPPORTED;
  }
  char why[VULKAN_MESSAGE_CAPACITY] = "";
  if (out->struct_size >= sizeof *out) {
    /* The whole list fits (the core's case, on every op call): in place. */
    uint32_t size = out->struct_size;
    tsr_status status = list_variants(device, op, args, out, why, sizeof why);
    out->struct_size = size;
    if (status != TSR_OK)
      vulkan_set_error(device->plugin, "vulkan: %s: %s", vulkan_op_name(op), why);
    return status;
  }
  tsr_plugin_variant_list *full = malloc(sizeof *full);
  if (!full) {
    vulkan_set_error(device->plugin, "vulkan: out of host memory for a variant list");
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  tsr_status status = list_variants(device, op, args, full, why, sizeof why);
  if (status != TSR_OK) {
    free(full);
    vulkan_set_error(device->plugin, "vulkan: %s: %s", vulkan_op_name(op), why);
    return status;
  }
  size_t room = (out->struct_size - header) / sizeof(tsr_plugin_variant);
  if (room > TSR_PLUGIN_MAX_VARIANTS)
    room = TSR_PLUGIN_MAX_VARIANTS;
  out->count = full->count < room ? full->count : (uint32_t)room;
  out->heuristic = full->heuristic < (int32_t)out->count ? full->heuristic : 0;
  memcpy(out->reason, full->reason, sizeof out->reason);
  memcpy(out->variants, full->variants, out->count * sizeof(tsr_plugin_variant));
  free(full);
  return TSR_OK;
}

static tsr_status vulkan_op_run(void *handle, tsr_op op, const void *args, const char *variant) {
  vulkan_queue *queue = handle;
  vulkan_device *device = queue->device;
  if ((int)op < 0 || op >= TSR_OP_COUNT_) {
    vulkan_set_error(device->plugin, "vulkan: op %d is unknown", (int)op);
    return TSR_ERROR_UNSUPPORTED;
  }
  /* Copy what both sides of the ABI know of the args struct. */
  tsr_plugin_any_args copy;
  memset(&copy, 0, sizeof copy);
  size_t size = tsr_plugin_args_size(op);
  uint32_t given = *(const uint32_t *)args;
  memcpy(&copy, args, given < size ? given : size);
  if (is_matrix_op(op)) {
#if VULKAN_HAVE_MATRIX
    switch (op) {
    case TSR_OP_GEMM:
      return vulkan_run_gemm(queue, &copy.gemm, variant);
    case TSR_OP_GROUPED_GEMM:
      return vulkan_run_grouped_gemm(queue, &copy.grouped_gemm, variant);
    default:
      return vulkan_run_attention(queue, &copy.attention, variant);
    }
#else
    vulkan_set_error(device->plugin, "vulkan: %s: not written yet in this build",
                     vulkan_op_name(op));
    return TSR_ERROR_UNSUPPORTED;
#endif
  }
  return vulkan_ops_run(queue, op, &copy, variant);
}

/* ------------------------------------------------------------------------ */
/* Entry points                                                              */
/* ------------------------------------------------------------------------ */

static const tsr_plugin_v1 vulkan_plugin_table = {
    .struct_size = sizeof(tsr_plugin_v1),
    .abi_version = 1,
    .name = "vulkan",
    .version = VULKAN_PLUGIN_VERSION,
    .init = vulkan_init,
    .shutdown = vulkan_shutdown,
    .device_count = vulkan_device_count,
    .device_info = vulkan_device_info,
    .device_open = vulkan_device_open,
    .device_close = vulkan_device_close,
    .buffer_alloc = vulkan_buffer_alloc,
    .buffer_free = vulkan_buffer_free,
    .buffer_host_pointer = NULL,
    .queue_create = vulkan_queue_create,
    .queue_destroy = vulkan_queue_destroy,
    .queue_finish = vulkan_queue_finish,
    .buffer_write = vulkan_buffer_write,
    .buffer_read = vulkan_buffer_read,
    .buffer_copy = vulkan_buffer_copy,
    .event_record = vulkan_event_record,
    .event_wait = vulkan_event_wait,
    .event_elapsed_ms = vulkan_event_elapsed_ms,
    .event_destroy = vulkan_event_destroy,
    .op_supported = vulkan_op_supported,
    .op_variants = vulkan_op_variants_entry,
    .op_run = vulkan_op_run,
    .buffer_wrap = NULL,
};

__attribute__((visibility("default"))) uint32_t tsr_plugin_negotiate(uint32_t core_max_abi);
__attribute__((visibility("default"))) const void *tsr_plugin_entry(uint32_t abi);

uint32_t tsr_plugin_negotiate(uint32_t core_max_abi) {
  return core_max_abi >= 1 ? 1 : 0;
}

const void *tsr_plugin_entry(uint32_t abi) {
  return abi == 1 ? &vulkan_plugin_table : NULL;
}
