/* SPDX-License-Identifier: Apache-2.0 */
/* Init (libamdhip64 dlopen'ed, hipInit, every GPU's properties and gfx
 * target), device_info, and devices: the GPU made current with hipSetDevice,
 * on which the GPU layer loads the code-object bundle and resolves its
 * kernels. A missing runtime, a failing hipInit or no GPU leaves the plugin
 * loaded with zero devices and the reason at debug level; a GPU whose target
 * the bundle lacks is skipped with the reason at info level, never left to
 * fail at its first launch. Also the driver table's device, module and
 * launch entries over the runtime. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hip_internal.h"

/* ------------------------------------------------------------------------ */
/* Driver table entries                                                      */
/* ------------------------------------------------------------------------ */

/* AMD GPUs give a block all of a CU's LDS (64 KiB) with no opt-in, so both
 * shared-memory attributes read the per-block figure (the AMD-specific
 * attribute numbers moved between ROCm 5 and 6; these did not). */
static const int attribute_codes[GPU_ATTR_COUNT_] = {
    [GPU_ATTR_ARCH_MAJOR] = hipDeviceAttributeComputeCapabilityMajor,
    [GPU_ATTR_ARCH_MINOR] = hipDeviceAttributeComputeCapabilityMinor,
    [GPU_ATTR_MULTIPROCESSORS] = hipDeviceAttributeMultiprocessorCount,
    [GPU_ATTR_L2_BYTES] = hipDeviceAttributeL2CacheSize,
    [GPU_ATTR_SMEM_PER_BLOCK_OPTIN] = hipDeviceAttributeMaxSharedMemoryPerBlock,
    [GPU_ATTR_SMEM_PER_MULTIPROCESSOR] = hipDeviceAttributeMaxSharedMemoryPerBlock,
    [GPU_ATTR_CLOCK_KHZ] = hipDeviceAttributeClockRate,
    [GPU_ATTR_MEMORY_CLOCK_KHZ] = hipDeviceAttributeMemoryClockRate,
    [GPU_ATTR_BUS_WIDTH_BITS] = hipDeviceAttributeMemoryBusWidth,
    [GPU_ATTR_PCI_DOMAIN] = hipDeviceAttributePciDomainID,
    [GPU_ATTR_PCI_BUS] = hipDeviceAttributePciBusId,
    [GPU_ATTR_PCI_DEVICE] = hipDeviceAttributePciDeviceId,
};

static int device_attribute(void *context, int device, gpu_attribute attribute, int *value) {
  const hip_api *api = context;
  return api->hipDeviceGetAttribute(value, attribute_codes[attribute], device);
}

/* A device's "context" is its ordinal + 1 (the runtime keeps one context
 * per device; hipSetDevice makes it current on the calling thread). */
static int device_enter(void *context, void *device_context) {
  const hip_api *api = context;
  return api->hipSetDevice((int)((intptr_t)device_context - 1));
}

static int module_load(void *context, const void *image, void **module) {
  const hip_api *api = context;
  hipModule_t loaded = NULL;
  hipError_t result = api->hipModuleLoadData(&loaded, image);
  *module = loaded;
  return result;
}

static int module_unload(void *context, void *module) {
  const hip_api *api = context;
  return api->hipModuleUnload(module);
}

static int function_get(void *context, void *module, const char *name, void **function) {
  const hip_api *api = context;
  hipFunction_t found = NULL;
  hipError_t result = api->hipModuleGetFunction(&found, module, name);
  *function = found;
  return result;
}

/* No opt-in on AMD: a block may use up to 64 KiB of LDS as it is launched. */
static int function_set_dynamic_smem(void *context, void *function, int bytes) {
  (void)context, (void)function;
  return bytes <= 64 * 1024 ? hipSuccess : hipErrorInvalidValue;
}

static int function_occupancy(void *context, void *function, int threads, size_t dynamic_smem,
                              int *blocks) {
  const hip_api *api = context;
  return api->hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(blocks, function, threads,
                                                                 dynamic_smem);
}

static int launch(void *context, void *function, const unsigned grid[3], unsigned threads,
                  unsigned dynamic_smem, void *stream, void *params) {
  const hip_api *api = context;
  void *arguments[] = {params};
  return api->hipModuleLaunchKernel(function, grid[0], grid[1], grid[2], threads, 1, 1,
                                    dynamic_smem, stream, arguments, NULL);
}

void hip_device_entries(gpu_driver *driver) {
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
/* The code objects                                                          */
/* ------------------------------------------------------------------------ */

/* Reads the bundle TESSERA_HIP_CODE_OBJECTS names (code objects built for a
 * GPU the plugin's own bundle lacks, or the test bundle of tests/hip). */
static bool read_bundle_file(hip_plugin *plugin, const char *path, char *why, size_t capacity) {
  FILE *file = fopen(path, "rb");
  if (!file) {
    snprintf(why, capacity, "TESSERA_HIP_CODE_OBJECTS=%s: %s", path, strerror(errno));
    return false;
  }
  long size = -1;
  if (fseek(file, 0, SEEK_END) == 0)
    size = ftell(file);
  if (size <= 0 || size > (1L << 30) || fseek(file, 0, SEEK_SET) != 0) {
    snprintf(why, capacity, "TESSERA_HIP_CODE_OBJECTS=%s: not a readable file of 1 byte to 1 GiB",
             path);
    fclose(file);
    return false;
  }
  plugin->loaded = malloc((size_t)size);
  bool ok = plugin->loaded && fread(plugin->loaded, 1, (size_t)size, file) == (size_t)size;
  fclose(file);
  char parse_why[200];
  if (!ok)
    snprintf(why, capacity, "TESSERA_HIP_CODE_OBJECTS=%s: cannot read it", path);
  else if (!hip_bundle_parse(&plugin->bundle, plugin->loaded, (size_t)size, parse_why,
                             sizeof parse_why)) {
    snprintf(why, capacity, "TESSERA_HIP_CODE_OBJECTS=%s: %s", path, parse_why);
    ok = false;
  }
  if (!ok) {
    free(plugin->loaded);
    plugin->loaded = NULL;
  }
  return ok;
}

static bool open_bundle(hip_plugin *plugin, char *why, size_t capacity) {
  const char *path = tsr_plugin_env(&plugin->gpu.host, "TESSERA_HIP_CODE_OBJECTS");
  if (path && *path) {
    if (!read_bundle_file(plugin, path, why, capacity))
      return false;
  } else {
    char parse_why[200];
    if (!hip_bundle_parse(&plugin->bundle, tsr_hip_code_objects, (size_t)tsr_hip_code_objects_size,
                          parse_why, sizeof parse_why)) {
      snprintf(why, capacity, "the plugin's own code objects: %s", parse_why);
      return false;
    }
  }
  hip_bundle_describe(&plugin->bundle, plugin->targets, sizeof plugin->targets);
  plugin->vendor.image = plugin->bundle.data;
  plugin->vendor.image_targets = plugin->targets;
  return true;
}

/* ------------------------------------------------------------------------ */
/* Init                                                                      */
/* ------------------------------------------------------------------------ */

static bool read_device(hip_plugin *plugin, int ordinal, gpu_device_props *props,
                        hip_device_extra *extra, char *why, size_t why_capacity) {
  const hip_api *api = &plugin->api;
  props->ordinal = ordinal;
  hipError_t result = api->hipDeviceGet(&props->handle, ordinal);
  if (result != hipSuccess) {
    char described[256];
    hip_describe(&plugin->api, result, described, sizeof described);
    snprintf(why, why_capacity, "hipDeviceGet(%d): %s", ordinal, described);
    return false;
  }
  if (api->hipDeviceGetName(props->name, (int)sizeof props->name, props->handle) != hipSuccess)
    snprintf(props->name, sizeof props->name, "AMD GPU %d", ordinal);
  unsigned char *raw = calloc(1, HIP_DEVICE_PROPS_BUFFER);
  if (raw && api->hipGetDeviceProperties(raw, ordinal) == hipSuccess)
    hip_arch_from_props(raw, HIP_DEVICE_PROPS_BUFFER, extra->arch_name, sizeof extra->arch_name);
  free(raw);
  if (api->hipDeviceTotalMem(&props->memory_bytes, props->handle) != hipSuccess)
    props->memory_bytes = 0;
  gpu_props_read(&plugin->gpu, props);
  /* The GPU layer's smem attributes read the per-block LDS (see
   * attribute_codes); the arch is the gfx target, not HIP's compute
   * capability (9.0 for every gfx9). */
  if (!hip_arch_parse(extra->arch_name, &props->arch_major, &props->arch_minor)) {
    snprintf(why, why_capacity, "the runtime reports no gfx target for %s ('%s')", props->name,
             extra->arch_name);
    return false;
  }
  hip_physical_id(props->pci_domain, props->pci_bus, props->pci_device, extra->pci_function,
                  props->uuid, sizeof props->uuid);
  hipUUID uuid;
  memset(&uuid, 0, sizeof uuid);
  if (api->hipDeviceGetUuid && api->hipDeviceGetUuid(&uuid, props->handle) == hipSuccess)
    hip_format_uuid((const unsigned char *)uuid.bytes, extra->hip_uuid, sizeof extra->hip_uuid);
  return true;
}

static tsr_status enumerate(hip_plugin *plugin, char *reason, size_t reason_capacity) {
  gpu_plugin *gpu = &plugin->gpu;
  const hip_api *api = &plugin->api;
  char why[1024];
  hipError_t result = api->hipInit(0);
  if (result != hipSuccess) {
    char described[256];
    hip_describe(&plugin->api, result, described, sizeof described);
    snprintf(why, sizeof why, "hipInit failed: %s (no AMD GPU, or no access to /dev/kfd)",
             described);
    hip_driver_close(plugin);
    return gpu_no_devices(&plugin->gpu, reason, reason_capacity, why);
  }
  api->hipDriverGetVersion(&plugin->driver_version);
  if (api->hipRuntimeGetVersion)
    api->hipRuntimeGetVersion(&plugin->runtime_version);
  int count = 0;
  result = api->hipGetDeviceCount(&count);
  if (result != hipSuccess || count <= 0) {
    snprintf(why, sizeof why, "the HIP runtime sees no GPU");
    hip_driver_close(plugin);
    return gpu_no_devices(&plugin->gpu, reason, reason_capacity, why);
  }
  gpu->devices = calloc((size_t)count, sizeof *gpu->devices);
  plugin->extras = calloc((size_t)count, sizeof *plugin->extras);
  if (!gpu->devices || !plugin->extras) {
    if (reason && reason_capacity > 0)
      snprintf(reason, reason_capacity, "hip: out of memory");
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  char skipped[1024] = "";
  for (int i = 0; i < count; i++) {
    gpu_device_props *props = &gpu->devices[gpu->device_count];
    hip_device_extra *extra = &plugin->extras[gpu->device_count];
    memset(props, 0, sizeof *props);
    memset(extra, 0, sizeof *extra);
    bool usable = read_device(plugin, i, props, extra, why, sizeof why);
    if (usable && hip_bundle_find(&plugin->bundle, extra->arch_name) < 0) {
      snprintf(why, sizeof why,
               "GPU %d (%s) is %s; the code objects are built for %s (build the plugin with "
               "TESSERA_HIP_ARCHS naming it, or point TESSERA_HIP_CODE_OBJECTS at a bundle "
               "built for it)",
               i, props->name, extra->arch_name, plugin->targets);
      usable = false;
    }
    if (!usable) {
      tsr_plugin_log(&gpu->host, TSR_LOG_INFO, "skipping GPU %d: %s", i, why);
      snprintf(skipped, sizeof skipped, "%s", why);
      continue;
    }
    tsr_plugin_log(&gpu->host, TSR_LOG_DEBUG, "GPU %d: %s, %s, %d CUs, %.1f GiB", i, props->name,
                   extra->arch_name, props->multiprocessors,
                   (double)props->memory_bytes / (1024.0 * 1024.0 * 1024.0));
    gpu->device_count++;
  }
  if (gpu->device_count == 0)
    return gpu_no_devices(&plugin->gpu, reason, reason_capacity, skipped);
  return TSR_OK;
}

void hip_shutdown(void *handle) {
  hip_plugin *plugin = handle;
  if (!plugin)
    return;
  hip_driver_close(plugin);
  gpu_plugin_shutdown(&plugin->gpu);
  free(plugin->extras);
  free(plugin->loaded);
  free(plugin);
}

tsr_status hip_init(const tsr_host_services_v2 *services, void **out, char *reason,
                    size_t reason_capacity) {
  if (!out) {
    if (reason && reason_capacity > 0)
      snprintf(reason, reason_capacity, "hip: init needs an output");
    return TSR_ERROR_NULL_ARGUMENT;
  }
  hip_plugin *plugin = calloc(1, sizeof *plugin);
  if (!plugin) {
    if (reason && reason_capacity > 0)
      snprintf(reason, reason_capacity, "hip: out of memory");
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  plugin->vendor = hip_vendor;
  tsr_status status =
      tsr_plugin_host_init(&plugin->gpu.host, "hip", services, reason, reason_capacity);
  if (status == TSR_OK)
    status = gpu_plugin_init(&plugin->gpu, &plugin->vendor, reason, reason_capacity);
  if (status != TSR_OK) {
    free(plugin);
    return status;
  }
  char why[600];
  if (!open_bundle(plugin, why, sizeof why)) {
    status = gpu_no_devices(&plugin->gpu, reason, reason_capacity, why);
  } else {
    /* TESSERA_HIP_RUNTIME names another runtime library (tests use a missing
     * one, and the runtime over CUDA of tests/hip). */
    const char *library = tsr_plugin_env(&plugin->gpu.host, "TESSERA_HIP_RUNTIME");
    if (!hip_driver_open(plugin, library, why, sizeof why))
      status = gpu_no_devices(&plugin->gpu, reason, reason_capacity, why);
    else
      status = enumerate(plugin, reason, reason_capacity);
  }
  if (status != TSR_OK) {
    hip_shutdown(plugin);
    return status;
  }
  *out = plugin;
  return TSR_OK;
}

tsr_status hip_device_info(void *handle, uint32_t index, tsr_device_info *info) {
  hip_plugin *plugin = handle;
  if ((int)index >= plugin->gpu.device_count)
    return gpu_no_such_device(&plugin->gpu, index);
  const gpu_device_props *p = &plugin->gpu.devices[index];
  const hip_device_extra *x = &plugin->extras[index];
  info->type = TSR_DEVICE_GPU;
  snprintf(info->vendor, sizeof info->vendor, "AMD");
  snprintf(info->name, sizeof info->name, "%s", p->name);
  snprintf(info->arch, sizeof info->arch, "%.*s", (int)strcspn(x->arch_name, ":"), x->arch_name);
  snprintf(info->physical_id, sizeof info->physical_id, "%s", p->uuid);
  int v = plugin->driver_version;
  snprintf(info->driver_version, sizeof info->driver_version, "HIP %d.%d.%d", v / 10000000,
           v / 100000 % 100, v % 100000);
  info->memory_bytes = p->memory_bytes;
  info->compute_units = (uint32_t)p->multiprocessors;
  info->dtype_mask = (1u << TSR_DTYPE_F32) | (1u << TSR_DTYPE_F16) | (1u << TSR_DTYPE_BF16) |
                     (1u << TSR_DTYPE_I32);
  info->op_mask = (1u << TSR_OP_COUNT_) - 1u;
  info->host_visible = 0;
  if (info->struct_size >= offsetof(tsr_device_info, native_ordinal) + sizeof info->native_ordinal)
    info->native_ordinal = p->ordinal;
  if (info->struct_size >= offsetof(tsr_device_info, details) + sizeof info->details) {
    int entry = hip_bundle_find(&plugin->bundle, x->arch_name);
    snprintf(info->details, sizeof info->details,
             "gfx target: %s\n"
             "compute units: %d\n"
             "L2 cache: %d KiB\n"
             "LDS per block: %d KiB\n"
             "clock: %d MHz\n"
             "memory clock: %d MHz, bus %d bits\n"
             "PCI: %04x:%02x:%02x\n"
             "HIP UUID: %s\n"
             "tile tables: %s\n"
             "code object used: %s\n"
             "code objects built for: %s",
             x->arch_name, p->multiprocessors, p->l2_bytes / 1024, p->smem_per_block_optin / 1024,
             p->clock_khz / 1000, p->memory_clock_khz / 1000, p->bus_width_bits, p->pci_domain,
             p->pci_bus, p->pci_device, x->hip_uuid[0] ? x->hip_uuid : "-",
             hip_arch_class_name(p->arch_major, p->arch_minor),
             entry >= 0 ? plugin->bundle.targets[entry].id : "-", plugin->targets);
  }
  return TSR_OK;
}

/* ------------------------------------------------------------------------ */
/* Devices                                                                   */
/* ------------------------------------------------------------------------ */

tsr_status hip_device_open(void *handle, uint32_t index, void **out) {
  hip_plugin *plugin = handle;
  if ((int)index >= plugin->gpu.device_count)
    return gpu_no_such_device(&plugin->gpu, index);
  const int ordinal = plugin->gpu.devices[index].handle;
  hipError_t result = plugin->api.hipSetDevice(ordinal);
  if (result != hipSuccess)
    return gpu_fail(&plugin->gpu, result, "hipSetDevice");
  gpu_device *device = NULL;
  tsr_status status =
      gpu_device_create(&plugin->gpu, index, (void *)(intptr_t)(ordinal + 1), &device);
  if (status != TSR_OK)
    return status;
  *out = device;
  return TSR_OK;
}

void hip_device_close(void *handle) {
  gpu_device *device = handle;
  if (device)
    gpu_device_destroy(device);
}
