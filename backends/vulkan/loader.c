/* SPDX-License-Identifier: Apache-2.0 */
/* libvulkan.so.1 opened with dlopen and its entry points resolved through
 * vkGetInstanceProcAddr / vkGetDeviceProcAddr, so the plugin loads (and
 * reports zero devices) on a machine without a Vulkan loader. */
#include "loader.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool vulkan_loader_open(vulkan_loader *loader, const char *library, char *why, size_t capacity) {
  memset(loader, 0, sizeof *loader);
  const char *name = library && *library ? library : "libvulkan.so.1";
  void *handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *error = dlerror();
    snprintf(why, capacity, "cannot load the Vulkan loader %s: %s", name,
             error ? error : "unknown error");
    return false;
  }
  /* dlsym returns void *; POSIX guarantees the conversion to a function
   * pointer, which memcpy spells without a pedantic warning. */
  void *symbol = dlsym(handle, "vkGetInstanceProcAddr");
  if (!symbol) {
    snprintf(why, capacity, "%s has no vkGetInstanceProcAddr", name);
    dlclose(handle);
    return false;
  }
  memcpy(&loader->vkGetInstanceProcAddr, &symbol, sizeof symbol);
  loader->library = handle;
#define VULKAN_GLOBAL(fn)                                                                          \
  loader->fn = (PFN_##fn)loader->vkGetInstanceProcAddr(NULL, #fn);                                 \
  if (!loader->fn && strcmp(#fn, "vkEnumerateInstanceVersion") != 0) {                             \
    snprintf(why, capacity, "%s does not provide %s", name, #fn);                                  \
    vulkan_loader_close(loader);                                                                   \
    return false;                                                                                  \
  }
  VULKAN_GLOBAL(vkCreateInstance)
  VULKAN_GLOBAL(vkEnumerateInstanceVersion)
  VULKAN_GLOBAL(vkEnumerateInstanceExtensionProperties)
  VULKAN_GLOBAL(vkEnumerateInstanceLayerProperties)
#undef VULKAN_GLOBAL
  return true;
}

bool vulkan_loader_instance(vulkan_loader *loader, VkInstance instance, char *why,
                            size_t capacity) {
#define VULKAN_INSTANCE(fn)                                                                        \
  loader->fn = (PFN_##fn)loader->vkGetInstanceProcAddr(instance, #fn);                             \
  if (!loader->fn) {                                                                               \
    snprintf(why, capacity, "the Vulkan instance does not provide %s", #fn);                       \
    return false;                                                                                  \
  }
  VULKAN_INSTANCE_FUNCTIONS(VULKAN_INSTANCE)
#undef VULKAN_INSTANCE
#define VULKAN_OPTIONAL(fn) loader->fn = (PFN_##fn)loader->vkGetInstanceProcAddr(instance, #fn);
  VULKAN_OPTIONAL(vkCreateDebugUtilsMessengerEXT)
  VULKAN_OPTIONAL(vkDestroyDebugUtilsMessengerEXT)
  VULKAN_OPTIONAL(vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)
  VULKAN_OPTIONAL(vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)
#undef VULKAN_OPTIONAL
  return true;
}

bool vulkan_loader_device(const vulkan_loader *loader, VkDevice device,
                          vulkan_device_functions *out, char *why, size_t capacity) {
  memset(out, 0, sizeof *out);
#define VULKAN_DEVICE(fn)                                                                          \
  out->fn = (PFN_##fn)loader->vkGetDeviceProcAddr(device, #fn);                                    \
  if (!out->fn) {                                                                                  \
    snprintf(why, capacity, "the Vulkan device does not provide %s", #fn);                         \
    return false;                                                                                  \
  }
  VULKAN_DEVICE_FUNCTIONS(VULKAN_DEVICE)
  VULKAN_DEVICE(vkCmdPushDescriptorSetKHR)
#undef VULKAN_DEVICE
  out->vkGetPipelineExecutablePropertiesKHR =
      (PFN_vkGetPipelineExecutablePropertiesKHR)loader->vkGetDeviceProcAddr(
          device, "vkGetPipelineExecutablePropertiesKHR");
  out->vkGetPipelineExecutableStatisticsKHR =
      (PFN_vkGetPipelineExecutableStatisticsKHR)loader->vkGetDeviceProcAddr(
          device, "vkGetPipelineExecutableStatisticsKHR");
  out->vkGetMemoryHostPointerPropertiesEXT =
      (PFN_vkGetMemoryHostPointerPropertiesEXT)loader->vkGetDeviceProcAddr(
          device, "vkGetMemoryHostPointerPropertiesEXT");
  return true;
}

static int count_object(struct dl_phdr_info *info, size_t size, void *data) {
  (void)info;
  (void)size;
  ++*(size_t *)data;
  return 0;
}

size_t vulkan_loader_object_count(void) {
  size_t count = 0;
  dl_iterate_phdr(count_object, &count);
  return count;
}

typedef struct pin_walk {
  size_t index, from;
} pin_walk;

static int pin_object(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  pin_walk *walk = data;
  if (walk->index++ >= walk->from && info->dlpi_name && info->dlpi_name[0]) {
    /* Marks the loaded object never to be unloaded; takes no reference. */
    void *handle = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
    if (handle)
      dlclose(handle);
  }
  return 0;
}

void vulkan_loader_pin_objects_since(size_t count) {
  if (!getenv("TESSERA_NO_DLCLOSE"))
    return;
  pin_walk walk = {0, count};
  dl_iterate_phdr(pin_object, &walk);
}

void vulkan_loader_close(vulkan_loader *loader) {
  /* TESSERA_NO_DLCLOSE (as the core honours it): the loader and the driver
   * stay mapped, so that leak reports at exit can name their frames. */
  if (loader->library && !getenv("TESSERA_NO_DLCLOSE"))
    dlclose(loader->library);
  memset(loader, 0, sizeof *loader);
}

const char *vulkan_result_name(VkResult result) {
  switch (result) {
#define VULKAN_RESULT(r)                                                                           \
  case r:                                                                                          \
    return #r;
    VULKAN_RESULT(VK_SUCCESS)
    VULKAN_RESULT(VK_NOT_READY)
    VULKAN_RESULT(VK_TIMEOUT)
    VULKAN_RESULT(VK_INCOMPLETE)
    VULKAN_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    VULKAN_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    VULKAN_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    VULKAN_RESULT(VK_ERROR_DEVICE_LOST)
    VULKAN_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    VULKAN_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    VULKAN_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    VULKAN_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    VULKAN_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    VULKAN_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    VULKAN_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
    VULKAN_RESULT(VK_ERROR_FRAGMENTED_POOL)
    VULKAN_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
    VULKAN_RESULT(VK_ERROR_INVALID_SHADER_NV)
#undef VULKAN_RESULT
  default:
    return "VkResult (unknown)";
  }
}
