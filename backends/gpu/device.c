/* SPDX-License-Identifier: Apache-2.0 */
/* The plugin's catalogue, a device's attributes, and opening a device: its
 * module (the vendor's embedded image), every kernel resolved once (with its
 * shared-memory limit raised and its occupancy measured), and every config
 * op_select can answer with prepared, so that the op path finds its kernels
 * by pointer. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"

tsr_status gpu_fail(const gpu_plugin *plugin, int error, const char *what) {
  char described[256];
  plugin->driver.describe(plugin->driver.context, error, described, sizeof described);
  return tsr_plugin_fail(&plugin->host,
                         error == plugin->driver.out_of_memory ? TSR_ERROR_OUT_OF_MEMORY
                                                               : TSR_ERROR_BACKEND,
                         "%s: %s", what, described);
}

tsr_status gpu_enter(const gpu_device *device) {
  const gpu_driver *d = &device->plugin->driver;
  int error = d->device_enter(d->context, device->context);
  return error == 0 ? TSR_OK : gpu_fail(device->plugin, error, "making the device current");
}

tsr_status gpu_plugin_init(gpu_plugin *plugin, const gpu_vendor *vendor, char *reason,
                           size_t reason_capacity) {
  char why[256];
  if (gpu_catalog_build(&plugin->catalog, vendor, why, sizeof why))
    return TSR_OK;
  if (reason && reason_capacity > 0)
    snprintf(reason, reason_capacity, "%s: %s", plugin->host.name, why);
  return TSR_ERROR_BACKEND;
}

tsr_status gpu_no_devices(const gpu_plugin *plugin, char *reason, size_t capacity,
                          const char *why) {
  tsr_plugin_log(&plugin->host, TSR_LOG_DEBUG, "no devices: %s", why);
  if (reason && capacity > 0)
    snprintf(reason, capacity, "no devices: %s", why);
  return TSR_OK;
}

tsr_status gpu_no_such_device(const gpu_plugin *plugin, uint32_t index) {
  return tsr_plugin_fail(&plugin->host, TSR_ERROR_NOT_FOUND, "device %u does not exist (%d found)",
                         index, plugin->device_count);
}

uint32_t gpu_device_count(void *plugin) {
  return (uint32_t)((const gpu_plugin *)plugin)->device_count;
}

void gpu_plugin_shutdown(gpu_plugin *plugin) {
  free(plugin->devices);
  plugin->devices = NULL;
  plugin->device_count = 0;
}

void gpu_props_read(const gpu_plugin *plugin, gpu_device_props *props) {
  static const struct {
    gpu_attribute attribute;
    size_t offset;
  } fields[] = {
      {GPU_ATTR_ARCH_MAJOR, offsetof(gpu_device_props, arch_major)},
      {GPU_ATTR_ARCH_MINOR, offsetof(gpu_device_props, arch_minor)},
      {GPU_ATTR_MULTIPROCESSORS, offsetof(gpu_device_props, multiprocessors)},
      {GPU_ATTR_L2_BYTES, offsetof(gpu_device_props, l2_bytes)},
      {GPU_ATTR_SMEM_PER_BLOCK_OPTIN, offsetof(gpu_device_props, smem_per_block_optin)},
      {GPU_ATTR_SMEM_PER_MULTIPROCESSOR, offsetof(gpu_device_props, smem_per_multiprocessor)},
      {GPU_ATTR_CLOCK_KHZ, offsetof(gpu_device_props, clock_khz)},
      {GPU_ATTR_MEMORY_CLOCK_KHZ, offsetof(gpu_device_props, memory_clock_khz)},
      {GPU_ATTR_BUS_WIDTH_BITS, offsetof(gpu_device_props, bus_width_bits)},
      {GPU_ATTR_PCI_DOMAIN, offsetof(gpu_device_props, pci_domain)},
      {GPU_ATTR_PCI_BUS, offsetof(gpu_device_props, pci_bus)},
      {GPU_ATTR_PCI_DEVICE, offsetof(gpu_device_props, pci_device)},
  };
  const gpu_driver *d = &plugin->driver;
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
    int value = 0;
    if (d->device_attribute(d->context, props->handle, fields[i].attribute, &value) != 0)
      value = 0;
    memcpy((char *)props + fields[i].offset, &value, sizeof value);
  }
  if (props->multiprocessors < 1)
    props->multiprocessors = 1;
  if (props->smem_per_block_optin < 48 * 1024)
    props->smem_per_block_optin = 48 * 1024;
}

/* Resolves every kernel of the module, raises the shared-memory limit of
 * those that need more than 48 KiB, and records how many blocks of each fit
 * an SM (the heuristics' wave count; 0 marks a kernel this GPU cannot run). */
static tsr_status load_kernels(gpu_device *device) {
  gpu_plugin *plugin = device->plugin;
  const gpu_driver *d = &plugin->driver;
  const int count = plugin->catalog.kernel_count;
  device->kernels = calloc((size_t)count, sizeof *device->kernels);
  if (!device->kernels)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_OUT_OF_MEMORY,
                           "out of host memory for the kernel table");
  /* Kernels sized by the device take what a block may have, less a margin
   * for their static shared memory. */
  device->dynamic_smem_limit = device->props->smem_per_block_optin - 1024;
  for (int k = 0; k < count; k++) {
    const gpu_kernel_info *info = gpu_catalog_kernel(&plugin->catalog, k);
    gpu_kernel *kernel = &device->kernels[k];
    kernel->name = info->name;
    int error = d->function_get(d->context, device->module, info->name, &kernel->function);
    if (error != 0 && error == d->not_found && plugin->catalog.vendor->kernels_per_target) {
      kernel->function = NULL; /* blocks_per_sm stays 0: never chosen */
      continue;
    }
    if (error != 0)
      return gpu_fail(plugin, error, info->name);
    int want = info->dynamic_smem < 0 ? device->dynamic_smem_limit : info->dynamic_smem;
    if (want > device->props->smem_per_block_optin) {
      tsr_plugin_log(&plugin->host, TSR_LOG_DEBUG,
                     "%s needs %d bytes of shared memory; this GPU gives %d", info->name, want,
                     device->props->smem_per_block_optin);
      continue;
    }
    if (want > 48 * 1024) {
      error = d->function_set_dynamic_smem(d->context, kernel->function, want);
      if (error != 0) {
        char what[160];
        snprintf(what, sizeof what, "raising the shared memory of %s to %d bytes", info->name,
                 want);
        return gpu_fail(plugin, error, what);
      }
    }
    int blocks = 1;
    if (info->threads > 0 && d->function_occupancy(d->context, kernel->function, info->threads,
                                                   (size_t)want, &blocks) != 0)
      blocks = 0;
    kernel->blocks_per_sm = blocks;
  }
  return TSR_OK;
}

static const gpu_kernel *kernel_at(const gpu_device *device, int index) {
  return index >= 0 ? &device->kernels[index] : NULL;
}

static uint32_t op_bit(tsr_op op) {
  return 1u << (unsigned)op;
}

/* Every answer op_select can give, per config and dtype: the kernels it
 * launches resolved to pointers. */
static void prepare_configs(gpu_device *device) {
  const gpu_catalog *c = &device->plugin->catalog;
  for (int slot = 0; slot < GPU_DTYPE_SLOTS; slot++) {
    for (int i = 0; i < c->gemm_count; i++) {
      gpu_gemm_prepared *p = &device->gemm[i][slot];
      p->head.name = c->gemm[i]->name;
      p->head.ops = op_bit(TSR_OP_GEMM) | op_bit(TSR_OP_GROUPED_GEMM);
      p->config = c->gemm[i];
      p->kernel = kernel_at(device, c->gemm_kernel[i][slot]);
    }
    for (int i = 0; i < c->attention_count; i++) {
      gpu_attention_prepared *p = &device->attention[i][slot];
      p->head.name = c->attention[i]->name;
      p->head.ops = op_bit(TSR_OP_ATTENTION);
      p->config = c->attention[i];
      p->kernel = kernel_at(device, c->attention_kernel[i][slot]);
    }
    for (int op = 0; op < GPU_ROW_OPS; op++) {
      for (int i = 0; i < 3; i++) {
        gpu_rows_prepared *p = &device->rows[op][i][slot];
        p->head.name = gpu_rows_configs[i].name;
        p->head.ops = op_bit(gpu_row_ops[op]);
        p->config = &gpu_rows_configs[i];
        p->kernel = kernel_at(device, c->rows_kernel[op][slot][0]);
        p->kernel_b4 = kernel_at(device, c->rows_kernel[op][slot][1]);
      }
    }
    for (int op = 0; op < GPU_ELEMENTWISE_OPS; op++) {
      gpu_elementwise_prepared *p = &device->elementwise[op][slot];
      p->head.name = gpu_elementwise_config.name;
      p->head.ops = op_bit(gpu_elementwise_ops[op]);
      p->config = &gpu_elementwise_config;
      p->kernel = kernel_at(device, c->elementwise_kernel[op][slot]);
    }
    for (int layout = 0; layout < 2; layout++)
      for (int r = 0; r < 3; r++)
        device->gemv[layout][slot][r] = kernel_at(device, c->gemv_kernel[layout][slot][r]);
    for (int dim = 0; dim < GPU_DECODE_DIMS; dim++)
      for (int t = 0; t < GPU_DECODE_TILES; t++)
        device->decode[slot][dim][t] = kernel_at(device, c->decode_kernel[slot][dim][t]);
    device->decode_combine[slot] = kernel_at(device, c->decode_combine_kernel[slot]);
    for (int dim = 0; dim < GPU_DECODE_DIMS; dim++)
      device->decode_mma[slot][dim] = kernel_at(device, c->decode_mma_kernel[slot][dim]);
    gpu_elementwise_prepared *kv = &device->kv_append[slot];
    kv->head.name = gpu_kv_append_config.name;
    kv->head.ops = op_bit(TSR_OP_KV_APPEND);
    kv->config = &gpu_kv_append_config;
    kv->kernel = kernel_at(device, c->kv_append_kernel[slot == 0 ? 1 : 0]);
  }
  device->splitk = kernel_at(device, c->splitk_kernel);
  device->pack[0] = kernel_at(device, c->pack_kernel[0]);
  device->pack[1] = kernel_at(device, c->pack_kernel[1]);
}

void gpu_device_destroy(gpu_device *device) {
  const gpu_driver *d = &device->plugin->driver;
  bool entered = d->device_enter(d->context, device->context) == 0;
  /* Registrations of wrapped host memory whose buffers were never freed. */
  while (device->registrations) {
    gpu_host_registration *r = device->registrations;
    device->registrations = r->next;
    if (entered)
      d->host_unregister(d->context, r->start);
    free(r);
  }
  if (device->module && entered)
    d->module_unload(d->context, device->module);
  free(device->kernels);
  free(device->peer_serials);
  pthread_mutex_destroy(&device->lock);
  free(device);
}

tsr_status gpu_device_create(gpu_plugin *plugin, uint32_t index, void *context, gpu_device **out) {
  gpu_device *device = calloc(1, sizeof *device);
  if (!device)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_OUT_OF_MEMORY,
                           "out of host memory for a device");
  device->plugin = plugin;
  device->props = &plugin->devices[index];
  device->context = context;
  device->arch =
      plugin->catalog.vendor->arch_of(device->props->arch_major, device->props->arch_minor);
  pthread_mutex_init(&device->lock, NULL);
  /* Numbered from 1: 0 marks a peer not set up yet (memory.c). */
  static uint64_t serials;
  device->serial = __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED);
  device->peer_serials = calloc((size_t)plugin->device_count, sizeof *device->peer_serials);
  if (!device->peer_serials) {
    gpu_device_destroy(device);
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_OUT_OF_MEMORY,
                           "out of host memory for a device");
  }
  const gpu_driver *d = &plugin->driver;
  const gpu_vendor *vendor = plugin->catalog.vendor;
  int error = d->module_load(d->context, vendor->image, &device->module);
  tsr_status status = TSR_OK;
  if (error != 0) {
    device->module = NULL;
    char what[600];
    snprintf(what, sizeof what, "loading the kernel module (built for %s) on %s (arch %d.%d)",
             vendor->image_targets, device->props->name, device->props->arch_major,
             device->props->arch_minor);
    status = gpu_fail(plugin, error, what);
  }
  if (status == TSR_OK)
    status = load_kernels(device);
  if (status != TSR_OK) {
    gpu_device_destroy(device);
    return status;
  }
  prepare_configs(device);
  *out = device;
  return TSR_OK;
}
