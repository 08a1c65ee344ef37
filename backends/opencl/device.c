/* SPDX-License-Identifier: Apache-2.0 */
/* Init and devices: every platform's GPU, accelerator and CPU devices of
 * OpenCL 1.2 or later, their facts from clGetDeviceInfo, and a context per
 * opened device. A CPU OpenCL device (PoCL) is a CPU device, so it sorts
 * after the GPUs and after the native CPU plugin ("cpu" < "opencl"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "configs.h"
#include "opencl_internal.h"

bool opencl_api_open(opencl_api *api, const char *library, char *why, size_t capacity);
void opencl_api_close(opencl_api *api);
void opencl_programs_release(opencl_device *device); /* program.c */
void opencl_configs_release(opencl_device *device);  /* program.c */
void opencl_cache_dir(opencl_plugin *plugin);        /* program.c */

/* ------------------------------------------------------------------------ */
/* Device facts                                                              */
/* ------------------------------------------------------------------------ */

static void info_string(const opencl_api *cl, cl_device_id id, cl_device_info what, char *out,
                        size_t capacity) {
  out[0] = '\0';
  size_t size = 0;
  if (cl->clGetDeviceInfo(id, what, capacity - 1, out, &size) != CL_SUCCESS)
    out[0] = '\0';
  out[capacity - 1] = '\0';
}

static uint64_t info_u64(const opencl_api *cl, cl_device_id id, cl_device_info what) {
  cl_ulong v = 0;
  return cl->clGetDeviceInfo(id, what, sizeof v, &v, NULL) == CL_SUCCESS ? v : 0;
}

static uint32_t info_u32(const opencl_api *cl, cl_device_id id, cl_device_info what) {
  cl_uint v = 0;
  return cl->clGetDeviceInfo(id, what, sizeof v, &v, NULL) == CL_SUCCESS ? v : 0;
}

static size_t info_size(const opencl_api *cl, cl_device_id id, cl_device_info what) {
  size_t v = 0;
  return cl->clGetDeviceInfo(id, what, sizeof v, &v, NULL) == CL_SUCCESS ? v : 0;
}

static bool has_extension(const char *extensions, const char *name) {
  size_t n = strlen(name);
  for (const char *p = extensions; (p = strstr(p, name)) != NULL; p += n)
    if ((p == extensions || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
      return true;
  return false;
}

/* "OpenCL C 1.2 ..." -> 1, 2 */
static void c_version(const char *text, int *major, int *minor) {
  *major = *minor = 0;
  const char *p = strstr(text, "OpenCL C ");
  if (p)
    sscanf(p + 9, "%d.%d", major, minor);
}

static void read_props(const opencl_api *cl, cl_platform_id platform, cl_device_id id,
                       opencl_device_props *p) {
  memset(p, 0, sizeof *p);
  p->platform = platform;
  p->id = id;
  info_string(cl, id, CL_DEVICE_NAME, p->name, sizeof p->name);
  info_string(cl, id, CL_DEVICE_VENDOR, p->vendor, sizeof p->vendor);
  info_string(cl, id, CL_DRIVER_VERSION, p->driver_version, sizeof p->driver_version);
  info_string(cl, id, CL_DEVICE_VERSION, p->version, sizeof p->version);
  info_string(cl, id, CL_DEVICE_EXTENSIONS, p->extensions, sizeof p->extensions);
  char text[128];
  info_string(cl, id, CL_DEVICE_OPENCL_C_VERSION, text, sizeof text);
  c_version(text, &p->cl_major, &p->cl_minor);
  if (cl->clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof p->platform_name - 1,
                            p->platform_name, NULL) != CL_SUCCESS)
    p->platform_name[0] = '\0';
  if (cl->clGetPlatformInfo(platform, CL_PLATFORM_VERSION, sizeof p->platform_version - 1,
                            p->platform_version, NULL) != CL_SUCCESS)
    p->platform_version[0] = '\0';
  p->decode_miscompiled = strstr(p->platform_version, "PoCL 5.") != NULL;
  cl_device_type type = 0;
  cl->clGetDeviceInfo(id, CL_DEVICE_TYPE, sizeof type, &type, NULL);
  p->type = type;
  p->vendor_id = info_u32(cl, id, CL_DEVICE_VENDOR_ID);
  p->compute_units = info_u32(cl, id, CL_DEVICE_MAX_COMPUTE_UNITS);
  p->memory_bytes = info_u64(cl, id, CL_DEVICE_GLOBAL_MEM_SIZE);
  p->max_allocation = info_u64(cl, id, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
  p->local_memory_bytes = info_u64(cl, id, CL_DEVICE_LOCAL_MEM_SIZE);
  cl_device_local_mem_type local_type = CL_LOCAL;
  cl->clGetDeviceInfo(id, CL_DEVICE_LOCAL_MEM_TYPE, sizeof local_type, &local_type, NULL);
  p->local_is_global = local_type == CL_GLOBAL;
  p->max_work_group = info_size(cl, id, CL_DEVICE_MAX_WORK_GROUP_SIZE);
  cl->clGetDeviceInfo(id, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof p->max_work_item, p->max_work_item,
                      NULL);
  p->preferred_vector_float = info_u32(cl, id, CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT);
  p->address_align = info_u32(cl, id, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8;
  p->host_unified = info_u32(cl, id, CL_DEVICE_HOST_UNIFIED_MEMORY) != 0;
  p->timer_resolution_ns = info_size(cl, id, CL_DEVICE_PROFILING_TIMER_RESOLUTION);
  p->fp16 = has_extension(p->extensions, "cl_khr_fp16");
  p->fp64 = has_extension(p->extensions, "cl_khr_fp64");
  p->intel_subgroups = has_extension(p->extensions, "cl_intel_subgroups");
  p->subgroups = p->intel_subgroups || has_extension(p->extensions, "cl_khr_subgroups");
#ifdef CL_DEVICE_SUB_GROUP_SIZES_INTEL
  if (p->intel_subgroups) {
    size_t sizes[8] = {0}, bytes = 0;
    if (cl->clGetDeviceInfo(id, CL_DEVICE_SUB_GROUP_SIZES_INTEL, sizeof sizes, sizes, &bytes) ==
        CL_SUCCESS)
      for (size_t i = 0; i < bytes / sizeof sizes[0] && i < 8; i++)
        p->subgroup_sizes[p->subgroup_size_count++] = (uint32_t)sizes[i];
  }
#endif
#ifdef CL_DEVICE_WARP_SIZE_NV
  if (has_extension(p->extensions, "cl_nv_device_attribute_query")) {
    p->warp_size = info_u32(cl, id, CL_DEVICE_WARP_SIZE_NV);
    p->nv_sm = info_u32(cl, id, CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV) * 10 +
               info_u32(cl, id, CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV);
  }
#endif
#ifdef CL_DEVICE_WAVEFRONT_WIDTH_AMD
  if (has_extension(p->extensions, "cl_amd_device_attribute_query"))
    p->warp_size = info_u32(cl, id, CL_DEVICE_WAVEFRONT_WIDTH_AMD);
#endif
  if (p->warp_size && p->subgroup_size_count == 0)
    p->subgroup_sizes[p->subgroup_size_count++] = p->warp_size;
#ifdef CL_DEVICE_UUID_KHR
  if (has_extension(p->extensions, "cl_khr_device_uuid")) {
    unsigned char u[CL_UUID_SIZE_KHR];
    if (cl->clGetDeviceInfo(id, CL_DEVICE_UUID_KHR, sizeof u, u, NULL) == CL_SUCCESS)
      /* CUDA's form, so NVIDIA's OpenCL device groups with cuda:N. */
      snprintf(p->uuid, sizeof p->uuid,
               "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
               u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
               u[14], u[15]);
  }
#endif
#ifdef CL_DEVICE_PCI_BUS_INFO_KHR
  if (has_extension(p->extensions, "cl_khr_pci_bus_info")) {
    cl_device_pci_bus_info_khr pci;
    if (cl->clGetDeviceInfo(id, CL_DEVICE_PCI_BUS_INFO_KHR, sizeof pci, &pci, NULL) == CL_SUCCESS)
      snprintf(p->pci, sizeof p->pci, "%04x:%02x:%02x.%x", pci.pci_domain, pci.pci_bus,
               pci.pci_device, pci.pci_function);
  }
#endif
  p->device_class = opencl_class_of(p);
}

/* ------------------------------------------------------------------------ */
/* Init and shutdown                                                         */
/* ------------------------------------------------------------------------ */

static tsr_status no_devices(opencl_plugin *plugin, char *reason, size_t capacity,
                             const char *why) {
  tsr_plugin_log(&plugin->host, TSR_LOG_DEBUG, "no devices: %s", why);
  if (reason && capacity > 0)
    snprintf(reason, capacity, "no devices: %s", why);
  return TSR_OK;
}

/* Appends the devices of one platform that the plugin serves. */
static void add_platform_devices(opencl_plugin *plugin, cl_platform_id platform, char *why,
                                 size_t capacity) {
  const opencl_api *cl = &plugin->cl;
  cl_uint count = 0;
  cl_int error = cl->clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, NULL, &count);
  if (error != CL_SUCCESS || count == 0)
    return;
  cl_device_id *ids = calloc(count, sizeof *ids);
  opencl_device_props *grown =
      realloc(plugin->devices, (plugin->device_count + count) * sizeof *plugin->devices);
  if (!ids || !grown) {
    free(ids);
    return;
  }
  plugin->devices = grown;
  if (cl->clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, count, ids, NULL) == CL_SUCCESS) {
    for (cl_uint i = 0; i < count; i++) {
      opencl_device_props *p = &plugin->devices[plugin->device_count];
      read_props(cl, platform, ids[i], p);
      bool available = info_u32(cl, ids[i], CL_DEVICE_AVAILABLE) != 0;
      bool compiler = info_u32(cl, ids[i], CL_DEVICE_COMPILER_AVAILABLE) != 0;
      if (!available || !compiler || p->cl_major < 1 || (p->cl_major == 1 && p->cl_minor < 2) ||
          (p->type & CL_DEVICE_TYPE_CUSTOM)) {
        snprintf(why, capacity, "%s (%s) is skipped: %s", p->name, p->platform_name,
                 !available                          ? "not available"
                 : !compiler                         ? "no OpenCL C compiler"
                 : (p->type & CL_DEVICE_TYPE_CUSTOM) ? "a custom device (no OpenCL C)"
                                                     : "below OpenCL C 1.2");
        tsr_plugin_log(&plugin->host, TSR_LOG_INFO, "%s", why);
        continue;
      }
      plugin->device_count++;
    }
  }
  free(ids);
}

tsr_status opencl_init(const tsr_host_services_v2 *host, void **out, char *reason,
                       size_t reason_capacity) {
  tsr_plugin_host checked;
  tsr_status status = tsr_plugin_host_init(&checked, "opencl", host, reason, reason_capacity);
  if (status != TSR_OK)
    return status;
  if (!out) {
    if (reason && reason_capacity > 0)
      snprintf(reason, reason_capacity, "opencl: init needs an output");
    return TSR_ERROR_NULL_ARGUMENT;
  }
  opencl_plugin *plugin = calloc(1, sizeof *plugin);
  if (!plugin) {
    if (reason && reason_capacity > 0)
      snprintf(reason, reason_capacity, "opencl: out of host memory");
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  plugin->host = checked;
  *out = plugin;

  /* TESSERA_OPENCL_LIBRARY names another ICD loader (tests use a missing one
   * to prove the plugin copes). */
  char why[600] = "";
  if (!opencl_api_open(&plugin->cl, tsr_plugin_env(&plugin->host, "TESSERA_OPENCL_LIBRARY"), why,
                       sizeof why))
    return no_devices(plugin, reason, reason_capacity, why);
  cl_uint platforms = 0;
  cl_int error = plugin->cl.clGetPlatformIDs(0, NULL, &platforms);
  if (error != CL_SUCCESS || platforms == 0) {
    snprintf(why, sizeof why, "the ICD loader lists no platform (%s)",
             error == CL_SUCCESS ? "no ICD installed" : opencl_error_name(error));
    return no_devices(plugin, reason, reason_capacity, why);
  }
  cl_platform_id *ids = calloc(platforms, sizeof *ids);
  if (!ids)
    return no_devices(plugin, reason, reason_capacity, "out of host memory");
  if (plugin->cl.clGetPlatformIDs(platforms, ids, NULL) == CL_SUCCESS)
    for (cl_uint i = 0; i < platforms; i++)
      add_platform_devices(plugin, ids[i], why, sizeof why);
  free(ids);
  /* GPUs, then accelerators, then CPUs, each in the loader's order: so
   * opencl:0 is the GPU wherever PoCL is installed beside a GPU's ICD. */
  opencl_device_props *sorted =
      calloc(plugin->device_count ? plugin->device_count : 1, sizeof *sorted);
  if (sorted) {
    uint32_t used = 0;
    for (int pass = 0; pass < 3; pass++)
      for (uint32_t i = 0; i < plugin->device_count; i++) {
        cl_device_type t = plugin->devices[i].type;
        bool gpu = t & CL_DEVICE_TYPE_GPU, accelerator = !gpu && (t & CL_DEVICE_TYPE_ACCELERATOR);
        bool here = pass == 0 ? gpu : pass == 1 ? accelerator : !gpu && !accelerator;
        if (here)
          sorted[used++] = plugin->devices[i];
      }
    memcpy(plugin->devices, sorted, used * sizeof *sorted);
    free(sorted);
  }
  if (plugin->device_count == 0) {
    if (!why[0])
      snprintf(why, sizeof why, "%u platform%s without a device", platforms,
               platforms == 1 ? "" : "s");
    return no_devices(plugin, reason, reason_capacity, why);
  }
  opencl_cache_dir(plugin);
  return TSR_OK;
}

void opencl_shutdown(void *handle) {
  opencl_plugin *plugin = handle;
  if (!plugin)
    return;
  free(plugin->devices);
  opencl_api_close(&plugin->cl);
  free(plugin);
}

uint32_t opencl_device_count(void *handle) {
  return ((opencl_plugin *)handle)->device_count;
}

/* ------------------------------------------------------------------------ */
/* Device info                                                               */
/* ------------------------------------------------------------------------ */

static const char *vendor_name(const opencl_device_props *p) {
  switch (p->vendor_id) {
  case 0x10de:
    return "NVIDIA";
  case 0x1002:
    return "AMD";
  case 0x8086:
    return "Intel";
  case 0x13b5:
    return "ARM";
  case 0x5143:
    return "Qualcomm";
  default:
    return NULL;
  }
}

tsr_status opencl_device_info(void *handle, uint32_t index, tsr_device_info *info) {
  opencl_plugin *plugin = handle;
  if (index >= plugin->device_count)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_NOT_FOUND,
                           "device %u does not exist (%u found)", index, plugin->device_count);
  const opencl_device_props *p = &plugin->devices[index];
  if (p->type & CL_DEVICE_TYPE_GPU)
    info->type = p->host_unified ? TSR_DEVICE_INTEGRATED_GPU : TSR_DEVICE_GPU;
  else if (p->type & CL_DEVICE_TYPE_CPU)
    info->type = TSR_DEVICE_CPU;
  else
    info->type = TSR_DEVICE_OTHER;
  /* A CPU device's vendor id is whatever the platform chose (PoCL says
   * Intel's on any x86): its vendor string names the CPU's maker. */
  const char *vendor = p->type & CL_DEVICE_TYPE_CPU ? NULL : vendor_name(p);
  snprintf(info->vendor, sizeof info->vendor, "%.63s", vendor ? vendor : p->vendor);
  snprintf(info->name, sizeof info->name, "%s", p->name);
  snprintf(info->arch, sizeof info->arch, "%s", opencl_class_name(p->device_class));
  if (p->uuid[0])
    snprintf(info->physical_id, sizeof info->physical_id, "%s", p->uuid);
  else if (p->pci[0])
    snprintf(info->physical_id, sizeof info->physical_id, "pci:%s", p->pci);
  snprintf(info->driver_version, sizeof info->driver_version, "%.63s", p->driver_version);
  info->memory_bytes = p->memory_bytes;
  info->compute_units = p->compute_units;
  /* f16 and bf16 are 16-bit storage with f32 math (vload_half, bit shifts):
   * every OpenCL 1.2 device has both. */
  info->dtype_mask = (1u << TSR_DTYPE_F32) | (1u << TSR_DTYPE_F16) | (1u << TSR_DTYPE_BF16) |
                     (1u << TSR_DTYPE_I32);
  /* Every op through kv_append; TSR_OP_KV_APPEND also says that every
   * serving form of attention runs (packed, paged, seqlens, softcap). */
  info->op_mask = (1u << (TSR_OP_KV_APPEND + 1)) - 1u;
  info->host_visible = 0;
  if (info->struct_size >= offsetof(tsr_device_info, details) + sizeof info->details) {
    char sizes[64] = "";
    size_t used = 0;
    for (uint32_t i = 0; i < p->subgroup_size_count && used + 8 < sizeof sizes; i++)
      used += (size_t)snprintf(sizes + used, sizeof sizes - used, "%s%u", i ? " " : "",
                               p->subgroup_sizes[i]);
    snprintf(info->details, sizeof info->details,
             "platform: %s (%s)\n"
             "device version: %s, OpenCL C %d.%d\n"
             "driver: %s\n"
             "vendor id: 0x%04x\n"
             "local memory: %llu KiB%s\n"
             "max work-group: %zu, preferred float vector: %u\n"
             "max allocation: %llu MiB\n"
             "subgroups: %s%s%s\n"
             "fp16 arithmetic: %s, fp64: %s\n"
             "PCI: %s\n"
             "tile tables: %s",
             p->platform_name, p->platform_version, p->version, p->cl_major, p->cl_minor,
             p->driver_version, p->vendor_id, (unsigned long long)(p->local_memory_bytes >> 10),
             p->local_is_global ? " (in global memory)" : "", p->max_work_group,
             p->preferred_vector_float, (unsigned long long)(p->max_allocation >> 20),
             p->subgroups ? (p->intel_subgroups ? "cl_intel_subgroups" : "cl_khr_subgroups")
                          : "none",
             sizes[0] ? ", sizes " : "", sizes, p->fp16 ? "yes" : "no", p->fp64 ? "yes" : "no",
             p->pci[0] ? p->pci : "unknown", opencl_class_name(p->device_class));
  }
  return TSR_OK;
}

/* ------------------------------------------------------------------------ */
/* Open and close                                                            */
/* ------------------------------------------------------------------------ */

tsr_status opencl_device_open(void *handle, uint32_t index, void **out) {
  opencl_plugin *plugin = handle;
  if (index >= plugin->device_count)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_NOT_FOUND,
                           "device %u does not exist (%u found)", index, plugin->device_count);
  opencl_device *device = calloc(1, sizeof *device);
  if (!device)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_OUT_OF_MEMORY, "device_open: out of memory");
  device->plugin = plugin;
  device->props = &plugin->devices[index];
  device->index = index;
  cl_context_properties properties[] = {CL_CONTEXT_PLATFORM,
                                        (cl_context_properties)device->props->platform, 0};
  cl_int error = CL_SUCCESS;
  device->context =
      plugin->cl.clCreateContext(properties, 1, &device->props->id, NULL, NULL, &error);
  if (!device->context || error != CL_SUCCESS) {
    free(device);
    return opencl_fail(plugin, error, "clCreateContext");
  }
  pthread_mutex_init(&device->program_lock, NULL);
  pthread_mutex_init(&device->config_lock, NULL);
  *out = device;
  return TSR_OK;
}

void opencl_device_close(void *handle) {
  opencl_device *device = handle;
  if (!device)
    return;
  opencl_configs_release(device);
  opencl_programs_release(device);
  device->plugin->cl.clReleaseContext(device->context);
  pthread_mutex_destroy(&device->program_lock);
  pthread_mutex_destroy(&device->config_lock);
  free(device);
}
