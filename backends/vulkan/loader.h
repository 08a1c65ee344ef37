/* SPDX-License-Identifier: Apache-2.0 */
/* The Vulkan entry points the plugin uses, resolved at run time from
 * libvulkan.so.1 (loader.c): the plugin has no link-time dependency on the
 * loader, only on the Vulkan headers. VK_NO_PROTOTYPES keeps the headers from
 * declaring functions nobody defines. Not installed. */
#ifndef TESSERA_VULKAN_LOADER_H
#define TESSERA_VULKAN_LOADER_H

#define VK_NO_PROTOTYPES
#include <stdbool.h>
#include <stddef.h>
#include <vulkan/vulkan.h>

/* VK_KHR_cooperative_matrix arrived in headers 1.3.255; older headers (Debian
 * 12 has 1.3.239) get the few definitions the plugin needs. */
#ifndef VK_KHR_cooperative_matrix
#define VK_KHR_cooperative_matrix 1
#define VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME "VK_KHR_cooperative_matrix"
#define VULKAN_STYPE_COOPMAT_FEATURES_KHR ((VkStructureType)1000506000)
#define VULKAN_STYPE_COOPMAT_PROPERTIES_KHR ((VkStructureType)1000506001)
typedef struct VkCooperativeMatrixPropertiesKHR {
  VkStructureType sType;
  void *pNext;
  uint32_t MSize, NSize, KSize;
  int32_t AType, BType, CType, ResultType;
  VkBool32 saturatingAccumulation;
  int32_t scope;
} VkCooperativeMatrixPropertiesKHR;
typedef struct VkPhysicalDeviceCooperativeMatrixFeaturesKHR {
  VkStructureType sType;
  void *pNext;
  VkBool32 cooperativeMatrix;
  VkBool32 cooperativeMatrixRobustBufferAccess;
} VkPhysicalDeviceCooperativeMatrixFeaturesKHR;
typedef VkResult(VKAPI_PTR *PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)(
    VkPhysicalDevice, uint32_t *, VkCooperativeMatrixPropertiesKHR *);
#else
#define VULKAN_STYPE_COOPMAT_FEATURES_KHR                                                          \
  VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR
#define VULKAN_STYPE_COOPMAT_PROPERTIES_KHR VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR
#endif

/* Instance-level functions (vkGetInstanceProcAddr with the instance). */
#define VULKAN_INSTANCE_FUNCTIONS(X)                                                               \
  X(vkDestroyInstance)                                                                             \
  X(vkEnumeratePhysicalDevices)                                                                    \
  X(vkGetPhysicalDeviceProperties)                                                                 \
  X(vkGetPhysicalDeviceProperties2)                                                                \
  X(vkGetPhysicalDeviceFeatures2)                                                                  \
  X(vkGetPhysicalDeviceMemoryProperties)                                                           \
  X(vkGetPhysicalDeviceQueueFamilyProperties)                                                      \
  X(vkEnumerateDeviceExtensionProperties)                                                          \
  X(vkCreateDevice)                                                                                \
  X(vkGetDeviceProcAddr)

/* Device-level functions, resolved once per logical device. */
#define VULKAN_DEVICE_FUNCTIONS(X)                                                                 \
  X(vkDestroyDevice)                                                                               \
  X(vkGetDeviceQueue)                                                                              \
  X(vkDeviceWaitIdle)                                                                              \
  X(vkAllocateMemory)                                                                              \
  X(vkFreeMemory)                                                                                  \
  X(vkMapMemory)                                                                                   \
  X(vkUnmapMemory)                                                                                 \
  X(vkCreateBuffer)                                                                                \
  X(vkDestroyBuffer)                                                                               \
  X(vkGetBufferMemoryRequirements)                                                                 \
  X(vkBindBufferMemory)                                                                            \
  X(vkCreateShaderModule)                                                                          \
  X(vkDestroyShaderModule)                                                                         \
  X(vkCreatePipelineCache)                                                                         \
  X(vkDestroyPipelineCache)                                                                        \
  X(vkGetPipelineCacheData)                                                                        \
  X(vkCreateComputePipelines)                                                                      \
  X(vkDestroyPipeline)                                                                             \
  X(vkCreateDescriptorSetLayout)                                                                   \
  X(vkDestroyDescriptorSetLayout)                                                                  \
  X(vkCreatePipelineLayout)                                                                        \
  X(vkDestroyPipelineLayout)                                                                       \
  X(vkCreateCommandPool)                                                                           \
  X(vkDestroyCommandPool)                                                                          \
  X(vkAllocateCommandBuffers)                                                                      \
  X(vkFreeCommandBuffers)                                                                          \
  X(vkResetCommandBuffer)                                                                          \
  X(vkBeginCommandBuffer)                                                                          \
  X(vkEndCommandBuffer)                                                                            \
  X(vkCmdBindPipeline)                                                                             \
  X(vkCmdPushConstants)                                                                            \
  X(vkCmdDispatch)                                                                                 \
  X(vkCmdPipelineBarrier)                                                                          \
  X(vkCmdCopyBuffer)                                                                               \
  X(vkCmdFillBuffer)                                                                               \
  X(vkCmdUpdateBuffer)                                                                             \
  X(vkCmdWriteTimestamp)                                                                           \
  X(vkCmdResetQueryPool)                                                                           \
  X(vkCreateQueryPool)                                                                             \
  X(vkDestroyQueryPool)                                                                            \
  X(vkGetQueryPoolResults)                                                                         \
  X(vkCreateSemaphore)                                                                             \
  X(vkDestroySemaphore)                                                                            \
  X(vkWaitSemaphores)                                                                              \
  X(vkGetSemaphoreCounterValue)                                                                    \
  X(vkQueueSubmit)

#define VULKAN_DECLARE_FUNCTION(name) PFN_##name name;

typedef struct vulkan_loader {
  void *library; /* NULL: not loaded */
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
  PFN_vkCreateInstance vkCreateInstance;
  PFN_vkEnumerateInstanceVersion vkEnumerateInstanceVersion;
  PFN_vkEnumerateInstanceExtensionProperties vkEnumerateInstanceExtensionProperties;
  PFN_vkEnumerateInstanceLayerProperties vkEnumerateInstanceLayerProperties;
  VULKAN_INSTANCE_FUNCTIONS(VULKAN_DECLARE_FUNCTION)
  /* Optional (extensions); NULL when absent. */
  PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT;
  PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT;
  PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR
      vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR;
  PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV
      vkGetPhysicalDeviceCooperativeMatrixPropertiesNV;
} vulkan_loader;

/* A logical device's function table. */
typedef struct vulkan_device_functions {
  VULKAN_DEVICE_FUNCTIONS(VULKAN_DECLARE_FUNCTION)
  PFN_vkCmdPushDescriptorSetKHR vkCmdPushDescriptorSetKHR;
  /* Optional (VK_KHR_pipeline_executable_properties); NULL when absent. */
  PFN_vkGetPipelineExecutablePropertiesKHR vkGetPipelineExecutablePropertiesKHR;
  PFN_vkGetPipelineExecutableStatisticsKHR vkGetPipelineExecutableStatisticsKHR;
  /* Optional (VK_EXT_external_memory_host, when enabled); NULL when absent. */
  PFN_vkGetMemoryHostPointerPropertiesEXT vkGetMemoryHostPointerPropertiesEXT;
} vulkan_device_functions;

/* dlopens `library` (NULL: libvulkan.so.1) and resolves the global entry
 * points; false with the reason in `why` when it cannot. */
bool vulkan_loader_open(vulkan_loader *loader, const char *library, char *why, size_t capacity);
/* Resolves the instance-level functions; false with the missing name. */
bool vulkan_loader_instance(vulkan_loader *loader, VkInstance instance, char *why, size_t capacity);
bool vulkan_loader_device(const vulkan_loader *loader, VkDevice device,
                          vulkan_device_functions *out, char *why, size_t capacity);
void vulkan_loader_close(vulkan_loader *loader);
/* With TESSERA_NO_DLCLOSE set (sanitizer runs), every shared object loaded
 * after the first `count` (vulkan_loader_object_count, taken before) stays
 * mapped for good: the loader unloads the driver (the ICD) when the
 * instance goes, and LeakSanitizer then reports what the driver's globals
 * still held (lavapipe: 128 bytes) as leaked, from an unknown module. */
size_t vulkan_loader_object_count(void);
void vulkan_loader_pin_objects_since(size_t count);
/* "VK_ERROR_OUT_OF_DEVICE_MEMORY" etc. */
const char *vulkan_result_name(VkResult result);

#endif /* TESSERA_VULKAN_LOADER_H */
