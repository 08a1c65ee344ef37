/* SPDX-License-Identifier: Apache-2.0 */
/* Init (libcuda dlopen'ed, cuInit, every GPU's properties), device_info,
 * and devices: the GPU's primary context, on which the GPU layer loads the
 * embedded fatbin and resolves its kernels. A missing driver, a failing
 * cuInit or no GPU leaves the plugin loaded with zero devices and the
 * reason at debug level. Also the driver table's device, module and launch
 * entries over libcuda. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

/* The fatbin nvcc built (generated .c file). */
extern const char tsr_cuda_fatbin_archs[];

/* ------------------------------------------------------------------------ */
/* Driver table entries                                                      */
/* ------------------------------------------------------------------------ */

static const int attribute_codes[GPU_ATTR_COUNT_] = {
    [GPU_ATTR_ARCH_MAJOR] = CU_ATTR_COMPUTE_CAPABILITY_MAJOR,
    [GPU_ATTR_ARCH_MINOR] = CU_ATTR_COMPUTE_CAPABILITY_MINOR,
    [GPU_ATTR_MULTIPROCESSORS] = CU_ATTR_MULTIPROCESSOR_COUNT,
    [GPU_ATTR_L2_BYTES] = CU_ATTR_L2_CACHE_SIZE,
    [GPU_ATTR_SMEM_PER_BLOCK_OPTIN] = CU_ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
    [GPU_ATTR_SMEM_PER_MULTIPROCESSOR] = CU_ATTR_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
    [GPU_ATTR_CLOCK_KHZ] = CU_ATTR_CLOCK_RATE,
    [GPU_ATTR_MEMORY_CLOCK_KHZ] = CU_ATTR_MEMORY_CLOCK_RATE,
    [GPU_ATTR_BUS_WIDTH_BITS] = CU_ATTR_GLOBAL_MEMORY_BUS_WIDTH,
    [GPU_ATTR_PCI_DOMAIN] = CU_ATTR_PCI_DOMAIN_ID,
    [GPU_ATTR_PCI_BUS] = CU_ATTR_PCI_BUS_ID,
    [GPU_ATTR_PCI_DEVICE] = CU_ATTR_PCI_DEVICE_ID,
};

static int device_attribute(void *context, int device, gpu_attribute attribute, int *value) {
  const cuda_api *api = context;
  return api->cuDeviceGetAttribute(value, attribute_codes[attribute], device);
}

static int device_enter(void *context, void *device_context) {
  const cuda_api *api = context;
  return api->cuCtxSetCurrent(device_context);
}

static int module_load(void *context, const void *image, void **module) {
  const cuda_api *api = context;
  CUmodule loaded = NULL;
  CUresult result = api->cuModuleLoadData(&loaded, image);
  *module = loaded;
  return result;
}

static int module_unload(void *context, void *module) {
  const cuda_api *api = context;
  return api->cuModuleUnload(module);
}

static int function_get(void *context, void *module, const char *name, void **function) {
  const cuda_api *api = context;
  CUfunction found = NULL;
  CUresult result = api->cuModuleGetFunction(&found, module, name);
  *function = found;
  return result;
}

static int function_set_dynamic_smem(void *context, void *function, int bytes) {
  const cuda_api *api = context;
  return api->cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
}

static int function_occupancy(void *context, void *function, int threads, size_t dynamic_smem,
                              int *blocks) {
  const cuda_api *api = context;
  return api->cuOccupancyMaxActiveBlocksPerMultiprocessor(blocks, function, threads, dynamic_smem);
}

static int launch(void *context, void *function, const unsigned grid[3], unsigned threads,
                  unsigned dynamic_smem, void *stream, void *params) {
  const cuda_api *api = context;
  void *arguments[] = {params};
  return api->cuLaunchKernel(function, grid[0], grid[1], grid[2], threads, 1, 1, dynamic_smem,
                             stream, arguments, NULL);
}

void cuda_device_entries(gpu_driver *driver) {
  driver->device_attribute = device_attribute;
  driver->device_enter = device_enter;
  driver->module_load = module_load;
  driver->module_unload = module_unload;
  driver->function_get = function_get;
  driver->function_set_dynamic_smem = function_set_dynamic_smem;
  driver->function_occupancy = function_occupancy;
  driver->launch = launch;
}

/* ------------------------------------------------------------------------ */
/* Init                                                                      */
/* ------------------------------------------------------------------------ */

static bool read_device(cuda_plugin *plugin, int ordinal, gpu_device_props *props, char *why,
                        size_t why_capacity) {
  const cuda_api *api = &plugin->api;
  props->ordinal = ordinal;
  CUresult result = api->cuDeviceGet(&props->handle, ordinal);
  if (result != CUDA_SUCCESS) {
    char described[256];
    cuda_describe(&plugin->api, result, described, sizeof described);
    snprintf(why, why_capacity, "cuDeviceGet(%d): %s", ordinal, described);
    return false;
  }
  if (api->cuDeviceGetName(props->name, (int)sizeof props->name, props->handle) != CUDA_SUCCESS)
    snprintf(props->name, sizeof props->name, "NVIDIA GPU %d", ordinal);
  CUuuid uuid;
  memset(&uuid, 0, sizeof uuid);
  if (api->cuDeviceGetUuid(&uuid, props->handle) == CUDA_SUCCESS)
    cuda_uuid_format(&uuid, props->uuid, sizeof props->uuid);
  else
    snprintf(props->uuid, sizeof props->uuid, "cuda-ordinal-%d", ordinal);
  if (api->cuDeviceTotalMem(&props->memory_bytes, props->handle) != CUDA_SUCCESS)
    props->memory_bytes = 0;
  gpu_props_read(&plugin->gpu, props);
  return true;
}

static tsr_status enumerate(cuda_plugin *plugin, char *reason, size_t reason_capacity) {
  gpu_plugin *gpu = &plugin->gpu;
  const cuda_api *api = &plugin->api;
  char why[400];
  CUresult result = api->cuInit(0);
  if (result != CUDA_SUCCESS) {
    char described[256];
    cuda_describe(&plugin->api, result, described, sizeof described);
    snprintf(why, sizeof why, "cuInit failed: %s", described);
    cuda_driver_close(plugin);
    return gpu_no_devices(&plugin->gpu, reason, reason_capacity, why);
  }
  api->cuDriverGetVersion(&plugin->driver_version);
  int count = 0;
  result = api->cuDeviceGetCount(&count);
  if (result != CUDA_SUCCESS || count <= 0) {
    snprintf(why, sizeof why, "the CUDA driver (version %d.%d) sees no GPU",
             plugin->driver_version / 1000, plugin->driver_version % 1000 / 10);
    cuda_driver_close(plugin);
    return gpu_no_devices(&plugin->gpu, reason, reason_capacity, why);
  }
  gpu->devices = calloc((size_t)count, sizeof *gpu->devices);
  if (!gpu->devices) {
    if (reason && reason_capacity > 0)
      snprintf(reason, reason_capacity, "cuda: out of memory");
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  for (int i = 0; i < count; i++) {
    gpu_device_props *props = &gpu->devices[gpu->device_count];
    if (!read_device(plugin, i, props, why, sizeof why)) {
      tsr_plugin_log(&gpu->host, TSR_LOG_WARN, "skipping GPU %d: %s", i, why);
      continue;
    }
    if (props->arch_major < 8) {
      tsr_plugin_log(&gpu->host, TSR_LOG_INFO,
                     "skipping GPU %d (%s): compute capability %d.%d, the kernels need 8.0 or "
                     "newer",
                     i, props->name, props->arch_major, props->arch_minor);
      continue;
    }
    tsr_plugin_log(&gpu->host, TSR_LOG_DEBUG, "GPU %d: %s, sm_%d%d, %d SMs, %.1f GiB", i,
                   props->name, props->arch_major, props->arch_minor, props->multiprocessors,
                   (double)props->memory_bytes / (1024.0 * 1024.0 * 1024.0));
    gpu->device_count++;
  }
  if (gpu->device_count == 0)
    return gpu_no_devices(&plugin->gpu, reason, reason_capacity,
                          "no GPU of compute capability 8.0 or newer could be used");
  return TSR_OK;
}

void cuda_shutdown(void *handle) {
  cuda_plugin *plugin = handle;
  if (!plugin)
    return;
  cuda_driver_close(plugin);
  gpu_plugin_shutdown(&plugin->gpu);
  free(plugin);
}

tsr_status cuda_init(const tsr_host_services_v2 *services, void **out, char *reason,
                     size_t reason_capacity) {
  if (!out) {
    if (reason && reason_capacity > 0)
      snprintf(reason, reason_capacity, "cuda: init needs an output");
    return TSR_ERROR_NULL_ARGUMENT;
  }
  cuda_plugin *plugin = calloc(1, sizeof *plugin);
  if (!plugin) {
    if (reason && reason_capacity > 0)
      snprintf(reason, reason_capacity, "cuda: out of memory");
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  tsr_status status =
      tsr_plugin_host_init(&plugin->gpu.host, "cuda", services, reason, reason_capacity);
  if (status == TSR_OK)
    status = gpu_plugin_init(&plugin->gpu, &cuda_vendor, reason, reason_capacity);
  if (status != TSR_OK) {
    free(plugin);
    return status;
  }
  /* TESSERA_CUDA_DRIVER names another driver library (tests use a missing
   * one to prove the plugin copes, and the stand-in of tests/cuda). */
  const char *library = tsr_plugin_env(&plugin->gpu.host, "TESSERA_CUDA_DRIVER");
  char why[400];
  if (!cuda_driver_open(plugin, library, why, sizeof why))
    status = gpu_no_devices(&plugin->gpu, reason, reason_capacity, why);
  else
    status = enumerate(plugin, reason, reason_capacity);
  if (status != TSR_OK) {
    cuda_shutdown(plugin);
    return status;
  }
  *out = plugin;
  return TSR_OK;
}

tsr_status cuda_device_info(void *handle, uint32_t index, tsr_device_info *info) {
  cuda_plugin *plugin = handle;
  if ((int)index >= plugin->gpu.device_count)
    return gpu_no_such_device(&plugin->gpu, index);
  const gpu_device_props *p = &plugin->gpu.devices[index];
  info->type = TSR_DEVICE_GPU;
  snprintf(info->vendor, sizeof info->vendor, "NVIDIA");
  snprintf(info->name, sizeof info->name, "%s", p->name);
  snprintf(info->arch, sizeof info->arch, "sm_%d%d", p->arch_major, p->arch_minor);
  snprintf(info->physical_id, sizeof info->physical_id, "%s", p->uuid);
  snprintf(info->driver_version, sizeof info->driver_version, "CUDA driver %d.%d",
           plugin->driver_version / 1000, plugin->driver_version % 1000 / 10);
  info->memory_bytes = p->memory_bytes;
  info->compute_units = (uint32_t)p->multiprocessors;
  info->dtype_mask = (1u << TSR_DTYPE_F32) | (1u << TSR_DTYPE_F16) | (1u << TSR_DTYPE_BF16) |
                     (1u << TSR_DTYPE_I32);
  info->op_mask = (1u << TSR_OP_COUNT_) - 1u;
  info->host_visible = 0;
  if (info->struct_size >= offsetof(tsr_device_info, native_ordinal) + sizeof info->native_ordinal)
    info->native_ordinal = p->ordinal;
  if (info->struct_size >= offsetof(tsr_device_info, details) + sizeof info->details)
    snprintf(info->details, sizeof info->details,
             "compute capability: %d.%d\n"
             "multiprocessors: %d\n"
             "L2 cache: %d KiB\n"
             "shared memory per block (opt-in): %d KiB\n"
             "shared memory per multiprocessor: %d KiB\n"
             "SM clock: %d MHz\n"
             "memory clock: %d MHz, bus %d bits\n"
             "PCI: %04x:%02x:%02x\n"
             "tile tables: %s\n"
             "kernels built for: %s",
             p->arch_major, p->arch_minor, p->multiprocessors, p->l2_bytes / 1024,
             p->smem_per_block_optin / 1024, p->smem_per_multiprocessor / 1024, p->clock_khz / 1000,
             p->memory_clock_khz / 1000, p->bus_width_bits, p->pci_domain, p->pci_bus,
             p->pci_device, cuda_arch_name(p->arch_major, p->arch_minor), tsr_cuda_fatbin_archs);
  return TSR_OK;
}

/* ------------------------------------------------------------------------ */
/* Devices                                                                   */
/* ------------------------------------------------------------------------ */

tsr_status cuda_device_open(void *handle, uint32_t index, void **out) {
  cuda_plugin *plugin = handle;
  if ((int)index >= plugin->gpu.device_count)
    return gpu_no_such_device(&plugin->gpu, index);
  const CUdevice ordinal = plugin->gpu.devices[index].handle;
  CUcontext context = NULL;
  CUresult result = plugin->api.cuDevicePrimaryCtxRetain(&context, ordinal);
  if (result != CUDA_SUCCESS)
    return gpu_fail(&plugin->gpu, result, "cuDevicePrimaryCtxRetain");
  result = plugin->api.cuCtxSetCurrent(context);
  tsr_status status =
      result == CUDA_SUCCESS ? TSR_OK : gpu_fail(&plugin->gpu, result, "cuCtxSetCurrent");
  gpu_device *device = NULL;
  if (status == TSR_OK)
    status = gpu_device_create(&plugin->gpu, index, context, &device);
  if (status != TSR_OK) {
    plugin->api.cuDevicePrimaryCtxRelease(ordinal);
    return status;
  }
  *out = device;
  return TSR_OK;
}

void cuda_device_close(void *handle) {
  gpu_device *device = handle;
  if (!device)
    return;
  const cuda_plugin *plugin = cuda_plugin_of(device->plugin);
  const CUdevice ordinal = device->props->handle;
  gpu_device_destroy(device);
  plugin->api.cuDevicePrimaryCtxRelease(ordinal);
}
