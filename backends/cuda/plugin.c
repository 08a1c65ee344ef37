/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA plugin's ABI table (tsr_plugin_v1). init dlopens the driver
 * (libcuda.so.1) and reads every GPU's properties; a missing driver, a failing
 * cuInit or no GPU leaves the plugin loaded with zero devices and the reason
 * at debug level. A device is the GPU's primary context plus the kernel
 * module (the fatbin embedded at build time, loaded with cuModuleLoadData);
 * buffers are cuMemAlloc memory; each queue is a CUDA stream; events are
 * CUDA events with timing. Errors a kernel finds on the device (a
 * cross-entropy target out of range) go to a status word of the queue that
 * queue_finish reads. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "configs.h"
#include "cuda_internal.h"
#include "kernels/kernel_params.h"

#define CUDA_STRINGIFY_(x) #x
#define CUDA_STRINGIFY(x) CUDA_STRINGIFY_(x)
#define CUDA_PLUGIN_VERSION                                                                        \
  CUDA_STRINGIFY(TSR_VERSION_MAJOR)                                                                \
  "." CUDA_STRINGIFY(TSR_VERSION_MINOR) "." CUDA_STRINGIFY(TSR_VERSION_PATCH)

/* The fatbin nvcc built (generated .c file). */
extern const unsigned char tsr_cuda_fatbin[];
extern const unsigned long long tsr_cuda_fatbin_size;
extern const char tsr_cuda_fatbin_archs[];

_Static_assert(TSR_GPU_F32 == TSR_DTYPE_F32 && TSR_GPU_F16 == TSR_DTYPE_F16 &&
                   TSR_GPU_BF16 == TSR_DTYPE_BF16 && TSR_GPU_I32 == TSR_DTYPE_I32,
               "kernel dtype codes follow tsr_dtype");
_Static_assert(TSR_GPU_ACT_SILU == TSR_ACT_SILU && TSR_GPU_ACT_GELU_ERF == TSR_ACT_GELU_ERF &&
                   TSR_GPU_ACT_GELU_TANH == TSR_ACT_GELU_TANH && TSR_GPU_ACT_RELU == TSR_ACT_RELU,
               "kernel activation codes follow tsr_activation");

enum { STATUS_NONE = INT_MAX };

/* ------------------------------------------------------------------------ */
/* Host services                                                             */
/* ------------------------------------------------------------------------ */

void cuda_log(const cuda_plugin *plugin, int level, const char *fmt, ...) {
  if (!plugin->host.log)
    return;
  char message[CUDA_MESSAGE_CAPACITY];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  plugin->host.log(plugin->host.host_handle, level, "%s", message);
}

void cuda_set_error(const cuda_plugin *plugin, const char *fmt, ...) {
  if (!plugin->host.set_error)
    return;
  char message[CUDA_MESSAGE_CAPACITY];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  plugin->host.set_error(plugin->host.host_handle, "%s", message);
}

tsr_status cuda_fail(const cuda_plugin *plugin, CUresult result, const char *what) {
  char described[256];
  cuda_driver_describe(&plugin->driver, result, described, sizeof described);
  cuda_set_error(plugin, "cuda: %s: %s", what, described);
  return result == 2 /* CUDA_ERROR_OUT_OF_MEMORY */ ? TSR_ERROR_OUT_OF_MEMORY : TSR_ERROR_BACKEND;
}

tsr_status cuda_enter(const cuda_device *device) {
  CUresult result = device->plugin->driver.cuCtxSetCurrent(device->context);
  return result == CUDA_SUCCESS ? TSR_OK : cuda_fail(device->plugin, result, "cuCtxSetCurrent");
}

static const char *op_name(tsr_op op) {
  static const char *const names[TSR_OP_COUNT_] = {
      "gemm",    "grouped_gemm", "attention", "rmsnorm", "layernorm",
      "softmax", "rope",         "swiglu",    "gelu",    "cross_entropy"};
  return (int)op >= 0 && op < TSR_OP_COUNT_ ? names[op] : "unknown op";
}

/* ------------------------------------------------------------------------ */
/* Init: driver and device properties                                        */
/* ------------------------------------------------------------------------ */

static int attribute(const cuda_plugin *plugin, CUdevice device, int which) {
  int value = 0;
  if (plugin->driver.cuDeviceGetAttribute(&value, which, device) != CUDA_SUCCESS)
    return 0;
  return value;
}

static void format_uuid(const CUuuid *uuid, char *out, size_t capacity) {
  const unsigned char *b = (const unsigned char *)uuid->bytes;
  snprintf(out, capacity,
           "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
           b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
           b[15]);
}

static tsr_status read_device(cuda_plugin *plugin, int ordinal, cuda_device_props *props, char *why,
                              size_t why_capacity) {
  const cuda_driver *d = &plugin->driver;
  CUresult result = d->cuDeviceGet(&props->handle, ordinal);
  if (result != CUDA_SUCCESS) {
    char described[256];
    cuda_driver_describe(d, result, described, sizeof described);
    snprintf(why, why_capacity, "cuDeviceGet(%d): %s", ordinal, described);
    return TSR_ERROR_BACKEND;
  }
  if (d->cuDeviceGetName(props->name, (int)sizeof props->name, props->handle) != CUDA_SUCCESS)
    snprintf(props->name, sizeof props->name, "NVIDIA GPU %d", ordinal);
  CUuuid uuid;
  memset(&uuid, 0, sizeof uuid);
  if (d->cuDeviceGetUuid(&uuid, props->handle) == CUDA_SUCCESS)
    format_uuid(&uuid, props->uuid, sizeof props->uuid);
  else
    snprintf(props->uuid, sizeof props->uuid, "cuda-ordinal-%d", ordinal);
  if (d->cuDeviceTotalMem(&props->memory_bytes, props->handle) != CUDA_SUCCESS)
    props->memory_bytes = 0;
  CUdevice h = props->handle;
  props->cc_major = attribute(plugin, h, CU_ATTR_COMPUTE_CAPABILITY_MAJOR);
  props->cc_minor = attribute(plugin, h, CU_ATTR_COMPUTE_CAPABILITY_MINOR);
  props->multiprocessors = attribute(plugin, h, CU_ATTR_MULTIPROCESSOR_COUNT);
  props->l2_bytes = attribute(plugin, h, CU_ATTR_L2_CACHE_SIZE);
  props->smem_per_block_optin = attribute(plugin, h, CU_ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  props->smem_per_multiprocessor =
      attribute(plugin, h, CU_ATTR_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  props->clock_khz = attribute(plugin, h, CU_ATTR_CLOCK_RATE);
  props->memory_clock_khz = attribute(plugin, h, CU_ATTR_MEMORY_CLOCK_RATE);
  props->bus_width_bits = attribute(plugin, h, CU_ATTR_GLOBAL_MEMORY_BUS_WIDTH);
  props->pci_domain = attribute(plugin, h, CU_ATTR_PCI_DOMAIN_ID);
  props->pci_bus = attribute(plugin, h, CU_ATTR_PCI_BUS_ID);
  props->pci_device = attribute(plugin, h, CU_ATTR_PCI_DEVICE_ID);
  if (props->multiprocessors < 1)
    props->multiprocessors = 1;
  if (props->smem_per_block_optin < 48 * 1024)
    props->smem_per_block_optin = 48 * 1024;
  return TSR_OK;
}

/* Reports "no devices" with the reason at debug level and in `reason`
 * (which the core also logs at debug level). */
static tsr_status no_devices(cuda_plugin *plugin, char *reason, size_t capacity, const char *why) {
  cuda_log(plugin, TSR_LOG_DEBUG, "no devices: %s", why);
  if (reason && capacity > 0)
    snprintf(reason, capacity, "no devices: %s", why);
  return TSR_OK;
}

static tsr_status cuda_init(const tsr_host_services *host, void **out, char *reason,
                            size_t reason_capacity) {
  if (!host || !out) {
    if (reason && reason_capacity > 0)
      snprintf(reason, reason_capacity, "cuda plugin: init needs host services and an output");
    return TSR_ERROR_NULL_ARGUMENT;
  }
  cuda_plugin *plugin = calloc(1, sizeof *plugin);
  if (!plugin) {
    if (reason && reason_capacity > 0)
      snprintf(reason, reason_capacity, "cuda plugin: out of memory");
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  size_t size = host->struct_size < sizeof plugin->host ? host->struct_size : sizeof plugin->host;
  memcpy(&plugin->host, host, size);
  *out = plugin;

  /* TESSERA_CUDA_DRIVER names another driver library (tests use a missing
   * one to prove the plugin copes). */
  const char *library = plugin->host.get_env ? plugin->host.get_env("TESSERA_CUDA_DRIVER") : NULL;
  char why[400];
  if (!cuda_driver_open(&plugin->driver, library, why, sizeof why))
    return no_devices(plugin, reason, reason_capacity, why);
  const cuda_driver *d = &plugin->driver;
  CUresult result = d->cuInit(0);
  if (result != CUDA_SUCCESS) {
    char described[256];
    cuda_driver_describe(d, result, described, sizeof described);
    snprintf(why, sizeof why, "cuInit failed: %s", described);
    cuda_driver_close(&plugin->driver);
    return no_devices(plugin, reason, reason_capacity, why);
  }
  d->cuDriverGetVersion(&plugin->driver_version);
  int count = 0;
  result = d->cuDeviceGetCount(&count);
  if (result != CUDA_SUCCESS || count <= 0) {
    snprintf(why, sizeof why, "the CUDA driver (version %d.%d) sees no GPU",
             plugin->driver_version / 1000, plugin->driver_version % 1000 / 10);
    cuda_driver_close(&plugin->driver);
    return no_devices(plugin, reason, reason_capacity, why);
  }
  plugin->devices = calloc((size_t)count, sizeof *plugin->devices);
  if (!plugin->devices) {
    cuda_driver_close(&plugin->driver);
    free(plugin);
    *out = NULL;
    if (reason && reason_capacity > 0)
      snprintf(reason, reason_capacity, "cuda plugin: out of memory");
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  for (int i = 0; i < count; i++) {
    cuda_device_props *props = &plugin->devices[plugin->device_count];
    if (read_device(plugin, i, props, why, sizeof why) != TSR_OK) {
      cuda_log(plugin, TSR_LOG_WARN, "skipping GPU %d: %s", i, why);
      continue;
    }
    if (props->cc_major < 8) {
      cuda_log(plugin, TSR_LOG_INFO,
               "skipping GPU %d (%s): compute capability %d.%d, the kernels need 8.0 or newer", i,
               props->name, props->cc_major, props->cc_minor);
      continue;
    }
    cuda_log(plugin, TSR_LOG_DEBUG, "GPU %d: %s, sm_%d%d, %d SMs, %.1f GiB", i, props->name,
             props->cc_major, props->cc_minor, props->multiprocessors,
             (double)props->memory_bytes / (1024.0 * 1024.0 * 1024.0));
    plugin->device_count++;
  }
  if (plugin->device_count == 0)
    return no_devices(plugin, reason, reason_capacity,
                      "no GPU of compute capability 8.0 or newer could be used");
  return TSR_OK;
}

static void cuda_shutdown(void *handle) {
  cuda_plugin *plugin = handle;
  if (!plugin)
    return;
  cuda_driver_close(&plugin->driver);
  free(plugin->devices);
  free(plugin);
}

static uint32_t cuda_device_count(void *handle) {
  return (uint32_t)((cuda_plugin *)handle)->device_count;
}

static tsr_status cuda_device_info(void *handle, uint32_t index, tsr_device_info *info) {
  cuda_plugin *plugin = handle;
  if ((int)index >= plugin->device_count) {
    cuda_set_error(plugin, "cuda: device %u does not exist (%d found)", index,
                   plugin->device_count);
    return TSR_ERROR_NOT_FOUND;
  }
  const cuda_device_props *p = &plugin->devices[index];
  info->type = TSR_DEVICE_GPU;
  snprintf(info->vendor, sizeof info->vendor, "NVIDIA");
  snprintf(info->name, sizeof info->name, "%s", p->name);
  snprintf(info->arch, sizeof info->arch, "sm_%d%d", p->cc_major, p->cc_minor);
  snprintf(info->physical_id, sizeof info->physical_id, "%s", p->uuid);
  snprintf(info->driver_version, sizeof info->driver_version, "CUDA driver %d.%d",
           plugin->driver_version / 1000, plugin->driver_version % 1000 / 10);
  info->memory_bytes = p->memory_bytes;
  info->compute_units = (uint32_t)p->multiprocessors;
  info->dtype_mask = (1u << TSR_DTYPE_F32) | (1u << TSR_DTYPE_F16) | (1u << TSR_DTYPE_BF16) |
                     (1u << TSR_DTYPE_I32);
  info->op_mask = (1u << TSR_OP_COUNT_) - 1u;
  info->host_visible = 0;
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
             p->cc_major, p->cc_minor, p->multiprocessors, p->l2_bytes / 1024,
             p->smem_per_block_optin / 1024, p->smem_per_multiprocessor / 1024, p->clock_khz / 1000,
             p->memory_clock_khz / 1000, p->bus_width_bits, p->pci_domain, p->pci_bus,
             p->pci_device, cuda_arch_class_name(cuda_arch_of(p)), tsr_cuda_fatbin_archs);
  return TSR_OK;
}

/* ------------------------------------------------------------------------ */
/* Device: context, module, kernels                                          */
/* ------------------------------------------------------------------------ */

static void release_device(cuda_device *device) {
  const cuda_driver *d = &device->plugin->driver;
  if (device->context) {
    d->cuCtxSetCurrent(device->context);
    if (device->module)
      d->cuModuleUnload(device->module);
    d->cuDevicePrimaryCtxRelease(device->props->handle);
  }
  free(device->functions);
  free(device->blocks_per_sm);
  pthread_mutex_destroy(&device->lock);
  free(device);
}

/* Resolves every kernel of the module, raises the shared-memory limit of
 * those that need more than 48 KiB, and records how many blocks of each fit
 * an SM (the heuristics' wave count; 0 marks a kernel this GPU cannot run). */
static tsr_status load_kernels(cuda_device *device) {
  cuda_plugin *plugin = device->plugin;
  const cuda_driver *d = &plugin->driver;
  int count = cuda_kernel_count();
  device->functions = calloc((size_t)count, sizeof *device->functions);
  device->blocks_per_sm = calloc((size_t)count, sizeof *device->blocks_per_sm);
  if (!device->functions || !device->blocks_per_sm) {
    cuda_set_error(plugin, "cuda: out of host memory for the kernel table");
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  /* Kernels sized by the device take what a block may have, less a margin
   * for their static shared memory. */
  device->dynamic_smem_limit = device->props->smem_per_block_optin - 1024;
  for (int k = 0; k < count; k++) {
    const cuda_kernel_info *info = cuda_kernel_at(k);
    CUresult result = d->cuModuleGetFunction(&device->functions[k], device->module, info->name);
    if (result != CUDA_SUCCESS)
      return cuda_fail(plugin, result, info->name);
    int want = info->dynamic_smem < 0 ? device->dynamic_smem_limit : info->dynamic_smem;
    if (want > device->props->smem_per_block_optin) {
      cuda_log(plugin, TSR_LOG_DEBUG, "%s needs %d bytes of shared memory; this GPU gives %d",
               info->name, want, device->props->smem_per_block_optin);
      continue;
    }
    if (want > 48 * 1024) {
      result = d->cuFuncSetAttribute(device->functions[k],
                                     CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, want);
      if (result != CUDA_SUCCESS) {
        char what[160];
        snprintf(what, sizeof what, "raising the shared memory of %s to %d bytes", info->name,
                 want);
        return cuda_fail(plugin, result, what);
      }
    }
    int blocks = 1;
    if (info->threads > 0) {
      blocks = 0;
      result = d->cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, device->functions[k],
                                                              info->threads, (size_t)want);
      if (result != CUDA_SUCCESS)
        blocks = 0;
    }
    device->blocks_per_sm[k] = blocks;
  }
  return TSR_OK;
}

static tsr_status cuda_device_open(void *handle, uint32_t index, void **out) {
  cuda_plugin *plugin = handle;
  if ((int)index >= plugin->device_count) {
    cuda_set_error(plugin, "cuda: device %u does not exist (%d found)", index,
                   plugin->device_count);
    return TSR_ERROR_NOT_FOUND;
  }
  cuda_device *device = calloc(1, sizeof *device);
  if (!device) {
    cuda_set_error(plugin, "cuda: out of host memory for a device");
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  device->plugin = plugin;
  device->props = &plugin->devices[index];
  pthread_mutex_init(&device->lock, NULL);
  const cuda_driver *d = &plugin->driver;
  CUresult result = d->cuDevicePrimaryCtxRetain(&device->context, device->props->handle);
  if (result != CUDA_SUCCESS) {
    device->context = NULL;
    tsr_status status = cuda_fail(plugin, result, "cuDevicePrimaryCtxRetain");
    release_device(device);
    return status;
  }
  tsr_status status = cuda_enter(device);
  if (status == TSR_OK) {
    result = d->cuModuleLoadData(&device->module, tsr_cuda_fatbin);
    if (result != CUDA_SUCCESS) {
      device->module = NULL;
      char what[600];
      snprintf(what, sizeof what,
               "loading the kernel module (built for %s) on %s (sm_%d%d) with cuModuleLoadData",
               tsr_cuda_fatbin_archs, device->props->name, device->props->cc_major,
               device->props->cc_minor);
      status = cuda_fail(plugin, result, what);
    }
  }
  if (status == TSR_OK)
    status = load_kernels(device);
  if (status != TSR_OK) {
    release_device(device);
    return status;
  }
  *out = device;
  return TSR_OK;
}

static void cuda_device_close(void *handle) {
  cuda_device *device = handle;
  if (device)
    release_device(device);
}

/* ------------------------------------------------------------------------ */
/* Buffers                                                                   */
/* ------------------------------------------------------------------------ */

static tsr_status cuda_buffer_alloc(void *handle, uint64_t bytes, void **out) {
  cuda_device *device = handle;
  tsr_status status = cuda_enter(device);
  if (status != TSR_OK)
    return status;
  cuda_buffer *buffer = calloc(1, sizeof *buffer);
  if (!buffer) {
    cuda_set_error(device->plugin, "cuda: out of host memory for a buffer");
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  CUresult result = device->plugin->driver.cuMemAlloc(&buffer->pointer, bytes > 0 ? bytes : 1);
  if (result != CUDA_SUCCESS) {
    free(buffer);
    char what[96];
    snprintf(what, sizeof what, "cuMemAlloc of %llu bytes", (unsigned long long)bytes);
    return cuda_fail(device->plugin, result, what);
  }
  buffer->bytes = bytes;
  *out = buffer;
  return TSR_OK;
}

/* The core has waited for every queue that was given work on the buffer
 * (plugin rule: buffer_free comes after that work); a wrapped pointer is
 * only forgotten, so freeing it waits for no other stream. */
static void cuda_buffer_free(void *handle, void *buffer_handle) {
  cuda_device *device = handle;
  cuda_buffer *buffer = buffer_handle;
  if (!buffer)
    return;
  if (!buffer->wrapped && cuda_enter(device) == TSR_OK)
    device->plugin->driver.cuMemFree(buffer->pointer);
  free(buffer);
}

/* Wraps an application's device pointer. The driver confirms that the whole
 * range lies in one allocation of this context, so a stale or foreign pointer
 * is refused here instead of faulting in a kernel. */
static tsr_status cuda_buffer_wrap(void *handle, int32_t kind, void *pointer, uint64_t bytes,
                                   void **out) {
  cuda_device *device = handle;
  if (kind != TSR_EXTERNAL_CUDA_DEVICE_POINTER) {
    cuda_set_error(device->plugin, "cuda: only CUDA device pointers can be wrapped (kind %d)",
                   (int)kind);
    return TSR_ERROR_UNSUPPORTED;
  }
  tsr_status status = cuda_enter(device);
  if (status != TSR_OK)
    return status;
  CUdeviceptr start = (CUdeviceptr)(uintptr_t)pointer, base = 0;
  size_t size = 0;
  CUresult result = device->plugin->driver.cuMemGetAddressRange(&base, &size, start);
  if (result != CUDA_SUCCESS)
    return cuda_fail(device->plugin, result,
                     "cuMemGetAddressRange (is the pointer device memory of this GPU?)");
  if (start - base > size || bytes > size - (start - base)) {
    cuda_set_error(
        device->plugin,
        "cuda: %llu bytes at 0x%llx pass the end of their %llu-byte allocation at 0x%llx",
        (unsigned long long)bytes, (unsigned long long)start, (unsigned long long)size,
        (unsigned long long)base);
    return TSR_ERROR_OUT_OF_BOUNDS;
  }
  cuda_buffer *buffer = calloc(1, sizeof *buffer);
  if (!buffer) {
    cuda_set_error(device->plugin, "cuda: out of host memory for a buffer");
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  buffer->pointer = start;
  buffer->bytes = bytes;
  buffer->wrapped = true;
  *out = buffer;
  return TSR_OK;
}

static bool check_range(const cuda_plugin *plugin, const char *what, const cuda_buffer *buffer,
                        uint64_t offset, uint64_t bytes) {
  if (offset <= buffer->bytes && bytes <= buffer->bytes - offset)
    return true;
  cuda_set_error(
      plugin, "cuda: %s of %llu bytes at offset %llu passes the end of a %llu-byte buffer", what,
      (unsigned long long)bytes, (unsigned long long)offset, (unsigned long long)buffer->bytes);
  return false;
}

/* ------------------------------------------------------------------------ */
/* Queues                                                                    */
/* ------------------------------------------------------------------------ */

static tsr_status cuda_queue_create(void *handle, void **out) {
  cuda_device *device = handle;
  const cuda_driver *d = &device->plugin->driver;
  tsr_status status = cuda_enter(device);
  if (status != TSR_OK)
    return status;
  cuda_queue *queue = calloc(1, sizeof *queue);
  if (!queue) {
    cuda_set_error(device->plugin, "cuda: out of host memory for a queue");
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  queue->device = device;
  CUresult result = d->cuStreamCreate(&queue->stream, CU_STREAM_NON_BLOCKING);
  if (result != CUDA_SUCCESS) {
    free(queue);
    return cuda_fail(device->plugin, result, "cuStreamCreate");
  }
  result = d->cuMemAlloc(&queue->status, sizeof(int32_t));
  if (result == CUDA_SUCCESS)
    result = d->cuMemsetD32Async(queue->status, STATUS_NONE, 1, queue->stream);
  if (result == CUDA_SUCCESS)
    result = d->cuStreamSynchronize(queue->stream);
  if (result != CUDA_SUCCESS) {
    if (queue->status)
      d->cuMemFree(queue->status);
    d->cuStreamDestroy(queue->stream);
    free(queue);
    return cuda_fail(device->plugin, result, "creating the queue's status word");
  }
  pthread_mutex_lock(&device->lock);
  queue->next_in_device = device->queues;
  device->queues = queue;
  pthread_mutex_unlock(&device->lock);
  *out = queue;
  return TSR_OK;
}

static void cuda_queue_destroy(void *handle) {
  cuda_queue *queue = handle;
  if (!queue)
    return;
  cuda_device *device = queue->device;
  const cuda_driver *d = &device->plugin->driver;
  if (cuda_enter(device) == TSR_OK) {
    d->cuStreamSynchronize(queue->stream);
    if (queue->workspace)
      d->cuMemFree(queue->workspace);
    d->cuMemFree(queue->status);
    d->cuStreamDestroy(queue->stream);
  }
  pthread_mutex_lock(&device->lock);
  for (cuda_queue **link = &device->queues; *link; link = &(*link)->next_in_device) {
    if (*link == queue) {
      *link = queue->next_in_device;
      break;
    }
  }
  pthread_mutex_unlock(&device->lock);
  free(queue);
}

/* Waits for the stream; a fault of queued work (the driver reports it at
 * the wait) or a bad cross-entropy target found by a kernel is returned
 * here, once. */
static tsr_status cuda_queue_finish(void *handle) {
  cuda_queue *queue = handle;
  cuda_plugin *plugin = queue->device->plugin;
  const cuda_driver *d = &plugin->driver;
  tsr_status status = cuda_enter(queue->device);
  if (status != TSR_OK)
    return status;
  CUresult result = d->cuStreamSynchronize(queue->stream);
  if (result != CUDA_SUCCESS)
    return cuda_fail(plugin, result, "queued work failed on the GPU");
  if (!queue->status_armed)
    return TSR_OK;
  queue->status_armed = false;
  int32_t bad_row = STATUS_NONE;
  result = d->cuMemcpyDtoHAsync(&bad_row, queue->status, sizeof bad_row, queue->stream);
  if (result == CUDA_SUCCESS)
    result = d->cuMemsetD32Async(queue->status, STATUS_NONE, 1, queue->stream);
  if (result == CUDA_SUCCESS)
    result = d->cuStreamSynchronize(queue->stream);
  if (result != CUDA_SUCCESS)
    return cuda_fail(plugin, result, "reading the queue's status word");
  if (bad_row != STATUS_NONE) {
    cuda_set_error(plugin,
                   "cross_entropy: targets[%d] is outside [0, %lld) and is not ignore_index "
                   "(%lld); its loss is NaN",
                   (int)bad_row, (long long)queue->status_vocab,
                   (long long)queue->status_ignore_index);
    return TSR_ERROR_INVALID_VALUE;
  }
  return TSR_OK;
}

static tsr_status cuda_buffer_write(void *handle, void *buffer_handle, uint64_t offset,
                                    const void *src, uint64_t bytes) {
  cuda_queue *queue = handle;
  cuda_plugin *plugin = queue->device->plugin;
  cuda_buffer *buffer = buffer_handle;
  if (!check_range(plugin, "write", buffer, offset, bytes))
    return TSR_ERROR_OUT_OF_BOUNDS;
  if (bytes == 0)
    return TSR_OK;
  tsr_status status = cuda_enter(queue->device);
  if (status != TSR_OK)
    return status;
  /* The source may be reused once this returns: wait for the copy. */
  CUresult result =
      plugin->driver.cuMemcpyHtoDAsync(buffer->pointer + offset, src, (size_t)bytes, queue->stream);
  if (result == CUDA_SUCCESS)
    result = plugin->driver.cuStreamSynchronize(queue->stream);
  return result == CUDA_SUCCESS ? TSR_OK : cuda_fail(plugin, result, "writing a buffer");
}

static tsr_status cuda_buffer_read(void *handle, void *buffer_handle, uint64_t offset, void *dst,
                                   uint64_t bytes) {
  cuda_queue *queue = handle;
  cuda_plugin *plugin = queue->device->plugin;
  cuda_buffer *buffer = buffer_handle;
  if (!check_range(plugin, "read", buffer, offset, bytes))
    return TSR_ERROR_OUT_OF_BOUNDS;
  if (bytes == 0)
    return TSR_OK;
  tsr_status status = cuda_enter(queue->device);
  if (status != TSR_OK)
    return status;
  CUresult result =
      plugin->driver.cuMemcpyDtoHAsync(dst, buffer->pointer + offset, (size_t)bytes, queue->stream);
  if (result == CUDA_SUCCESS)
    result = plugin->driver.cuStreamSynchronize(queue->stream);
  return result == CUDA_SUCCESS ? TSR_OK : cuda_fail(plugin, result, "reading a buffer");
}

static tsr_status cuda_buffer_copy(void *handle, void *src_handle, uint64_t src_offset,
                                   void *dst_handle, uint64_t dst_offset, uint64_t bytes) {
  cuda_queue *queue = handle;
  cuda_plugin *plugin = queue->device->plugin;
  cuda_buffer *src = src_handle, *dst = dst_handle;
  if (!check_range(plugin, "copy source", src, src_offset, bytes) ||
      !check_range(plugin, "copy destination", dst, dst_offset, bytes))
    return TSR_ERROR_OUT_OF_BOUNDS;
  if (bytes == 0)
    return TSR_OK;
  tsr_status status = cuda_enter(queue->device);
  if (status != TSR_OK)
    return status;
  CUresult result = plugin->driver.cuMemcpyDtoDAsync(
      dst->pointer + dst_offset, src->pointer + src_offset, (size_t)bytes, queue->stream);
  return result == CUDA_SUCCESS ? TSR_OK : cuda_fail(plugin, result, "copying between buffers");
}

/* ------------------------------------------------------------------------ */
/* Events                                                                    */
/* ------------------------------------------------------------------------ */

static tsr_status cuda_event_record(void *handle, void **out) {
  cuda_queue *queue = handle;
  cuda_plugin *plugin = queue->device->plugin;
  tsr_status status = cuda_enter(queue->device);
  if (status != TSR_OK)
    return status;
  cuda_event *event = calloc(1, sizeof *event);
  if (!event) {
    cuda_set_error(plugin, "cuda: out of host memory for an event");
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  event->device = queue->device;
  CUresult result = plugin->driver.cuEventCreate(&event->event, CU_EVENT_DEFAULT);
  if (result == CUDA_SUCCESS) {
    result = plugin->driver.cuEventRecord(event->event, queue->stream);
    if (result != CUDA_SUCCESS)
      plugin->driver.cuEventDestroy(event->event);
  }
  if (result != CUDA_SUCCESS) {
    free(event);
    return cuda_fail(plugin, result, "recording an event");
  }
  *out = event;
  return TSR_OK;
}

static tsr_status cuda_event_wait(void *handle) {
  cuda_event *event = handle;
  cuda_plugin *plugin = event->device->plugin;
  tsr_status status = cuda_enter(event->device);
  if (status != TSR_OK)
    return status;
  CUresult result = plugin->driver.cuEventSynchronize(event->event);
  return result == CUDA_SUCCESS ? TSR_OK : cuda_fail(plugin, result, "waiting for an event");
}

static tsr_status cuda_event_elapsed_ms(void *start_handle, void *end_handle, double *ms) {
  cuda_event *start = start_handle, *end = end_handle;
  cuda_plugin *plugin = start->device->plugin;
  tsr_status status = cuda_enter(start->device);
  if (status != TSR_OK)
    return status;
  CUresult result = plugin->driver.cuEventSynchronize(start->event);
  if (result == CUDA_SUCCESS)
    result = plugin->driver.cuEventSynchronize(end->event);
  float elapsed = 0.0f;
  if (result == CUDA_SUCCESS)
    result = plugin->driver.cuEventElapsedTime(&elapsed, start->event, end->event);
  if (result != CUDA_SUCCESS)
    return cuda_fail(plugin, result, "timing two events");
  *ms = elapsed;
  return TSR_OK;
}

static void cuda_event_destroy(void *handle) {
  cuda_event *event = handle;
  if (!event)
    return;
  if (cuda_enter(event->device) == TSR_OK)
    event->device->plugin->driver.cuEventDestroy(event->event);
  free(event);
}

/* ------------------------------------------------------------------------ */
/* Ops                                                                       */
/* ------------------------------------------------------------------------ */

/* Limits of the launch shapes that the core's validation does not imply. */
static bool problem_fits(const cuda_device *device, tsr_op op, const void *args, char *why,
                         size_t capacity) {
  (void)device;
  if (op == TSR_OP_ATTENTION) {
    const tsr_attention_args *a = args;
    if (a->q.shape[0] > 65535 || a->q.shape[2] > 65535 || a->q.shape[1] > INT_MAX ||
        a->k.shape[1] > INT_MAX) {
      snprintf(why, capacity,
               "attention with batch %lld, %lld heads, Sq %lld, Skv %lld exceeds the launch "
               "limits (65535 batches and heads, 2^31 positions)",
               (long long)a->q.shape[0], (long long)a->q.shape[2], (long long)a->q.shape[1],
               (long long)a->k.shape[1]);
      return false;
    }
  }
  if (op == TSR_OP_GROUPED_GEMM) {
    const tsr_grouped_gemm_args *g = args;
    if (g->a.shape[0] > INT_MAX) {
      snprintf(why, capacity, "grouped gemm with %lld rows exceeds 2^31 rows",
               (long long)g->a.shape[0]);
      return false;
    }
  }
  return true;
}

static tsr_status cuda_op_supported(void *handle, tsr_op op, const void *args) {
  cuda_device *device = handle;
  if ((int)op < 0 || op >= TSR_OP_COUNT_) {
    cuda_set_error(device->plugin, "cuda: op %d is unknown", (int)op);
    return TSR_ERROR_UNSUPPORTED;
  }
  char why[CUDA_MESSAGE_CAPACITY];
  if (!problem_fits(device, op, args, why, sizeof why) ||
      !cuda_op_config(device, op, args, NULL, why, sizeof why)) {
    cuda_set_error(device->plugin, "cuda: %s: %s", op_name(op), why);
    return TSR_ERROR_UNSUPPORTED;
  }
  return TSR_OK;
}

static tsr_status cuda_op_variants_entry(void *handle, tsr_op op, const void *args,
                                         tsr_plugin_variant_list *out) {
  cuda_device *device = handle;
  const size_t header = offsetof(tsr_plugin_variant_list, variants);
  if (out->struct_size < header) {
    cuda_set_error(device->plugin,
                   "cuda: variant list struct_size %u is below the %zu bytes of ABI 1",
                   out->struct_size, header);
    return TSR_ERROR_STRUCT_SIZE;
  }
  if ((int)op < 0 || op >= TSR_OP_COUNT_) {
    cuda_set_error(device->plugin, "cuda: op %d is unknown", (int)op);
    return TSR_ERROR_UNSUPPORTED;
  }
  char why[CUDA_MESSAGE_CAPACITY];
  if (out->struct_size >= sizeof *out) {
    /* the whole list fits: filled in place (no allocation on the op path) */
    uint32_t size = out->struct_size;
    tsr_status status = cuda_op_variants(device, op, args, out, why, sizeof why);
    out->struct_size = size;
    if (status != TSR_OK)
      cuda_set_error(device->plugin, "cuda: %s: %s", op_name(op), why);
    return status;
  }
  tsr_plugin_variant_list *full = malloc(sizeof *full);
  if (!full) {
    cuda_set_error(device->plugin, "cuda: out of host memory for a variant list");
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  tsr_status status = cuda_op_variants(device, op, args, full, why, sizeof why);
  if (status != TSR_OK) {
    free(full);
    cuda_set_error(device->plugin, "cuda: %s: %s", op_name(op), why);
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

static tsr_status cuda_op_run(void *handle, tsr_op op, const void *args, const char *variant) {
  cuda_queue *queue = handle;
  cuda_device *device = queue->device;
  if ((int)op < 0 || op >= TSR_OP_COUNT_) {
    cuda_set_error(device->plugin, "cuda: op %d is unknown", (int)op);
    return TSR_ERROR_UNSUPPORTED;
  }
  /* Copy what both sides of the ABI know of the args struct. */
  union {
    tsr_gemm_args gemm;
    tsr_grouped_gemm_args grouped_gemm;
    tsr_attention_args attention;
    tsr_rmsnorm_args rmsnorm;
    tsr_layernorm_args layernorm;
    tsr_softmax_args softmax;
    tsr_rope_args rope;
    tsr_swiglu_args swiglu;
    tsr_gelu_args gelu;
    tsr_cross_entropy_args cross_entropy;
  } copy;
  memset(&copy, 0, sizeof copy);
  size_t size = tsr_plugin_args_size(op);
  uint32_t given = *(const uint32_t *)args;
  memcpy(&copy, args, given < size ? given : size);

  char why[CUDA_MESSAGE_CAPACITY];
  if (!problem_fits(device, op, &copy, why, sizeof why)) {
    cuda_set_error(device->plugin, "cuda: %s: %s", op_name(op), why);
    return TSR_ERROR_UNSUPPORTED;
  }
  const void *config = cuda_op_config(device, op, &copy, variant, why, sizeof why);
  if (!config) {
    cuda_set_error(device->plugin, "cuda: %s: %s", op_name(op), why);
    return variant ? TSR_ERROR_NOT_FOUND : TSR_ERROR_UNSUPPORTED;
  }
  tsr_status status = cuda_enter(device);
  if (status != TSR_OK)
    return status;
  return cuda_op_launch(queue, op, &copy, config);
}

/* ------------------------------------------------------------------------ */
/* Entry points                                                              */
/* ------------------------------------------------------------------------ */

static const tsr_plugin_v1 cuda_plugin_table = {
    .struct_size = sizeof(tsr_plugin_v1),
    .abi_version = 1,
    .name = "cuda",
    .version = CUDA_PLUGIN_VERSION,
    .init = cuda_init,
    .shutdown = cuda_shutdown,
    .device_count = cuda_device_count,
    .device_info = cuda_device_info,
    .device_open = cuda_device_open,
    .device_close = cuda_device_close,
    .buffer_alloc = cuda_buffer_alloc,
    .buffer_free = cuda_buffer_free,
    .buffer_host_pointer = NULL,
    .queue_create = cuda_queue_create,
    .queue_destroy = cuda_queue_destroy,
    .queue_finish = cuda_queue_finish,
    .buffer_write = cuda_buffer_write,
    .buffer_read = cuda_buffer_read,
    .buffer_copy = cuda_buffer_copy,
    .event_record = cuda_event_record,
    .event_wait = cuda_event_wait,
    .event_elapsed_ms = cuda_event_elapsed_ms,
    .event_destroy = cuda_event_destroy,
    .op_supported = cuda_op_supported,
    .op_variants = cuda_op_variants_entry,
    .op_run = cuda_op_run,
    .buffer_wrap = cuda_buffer_wrap,
};

__attribute__((visibility("default"))) uint32_t tsr_plugin_negotiate(uint32_t core_max_abi);
__attribute__((visibility("default"))) const void *tsr_plugin_entry(uint32_t abi);

uint32_t tsr_plugin_negotiate(uint32_t core_max_abi) {
  return core_max_abi >= 1 ? 1 : 0;
}

const void *tsr_plugin_entry(uint32_t abi) {
  return abi == 1 ? &cuda_plugin_table : NULL;
}
