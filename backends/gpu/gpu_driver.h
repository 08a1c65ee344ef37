/* SPDX-License-Identifier: Apache-2.0 */
/* The driver table: everything the shared GPU layer (backends/gpu) asks of
 * a vendor's driver, as function pointers over an opaque context. The CUDA
 * plugin fills it over the dlopen'ed libcuda (backends/cuda/driver.c); a HIP
 * plugin fills it over libamdhip64 the same way.
 *
 * Every entry returns 0 on success or the vendor's error code, which
 * `describe` puts into words. Device memory is a 64-bit device address;
 * modules, functions, streams and events are the vendor's handles. */
#ifndef TESSERA_GPU_DRIVER_H
#define TESSERA_GPU_DRIVER_H

#include <stddef.h>
#include <stdint.h>

typedef uint64_t gpu_address;

/* The device attributes the layer reads (enumeration, configs). */
typedef enum gpu_attribute {
  GPU_ATTR_ARCH_MAJOR, /* compute capability major (CUDA), gfx major (HIP) */
  GPU_ATTR_ARCH_MINOR,
  GPU_ATTR_MULTIPROCESSORS,
  GPU_ATTR_L2_BYTES,
  GPU_ATTR_SMEM_PER_BLOCK_OPTIN, /* dynamic shared memory a kernel may opt in to */
  GPU_ATTR_SMEM_PER_MULTIPROCESSOR,
  GPU_ATTR_CLOCK_KHZ,
  GPU_ATTR_MEMORY_CLOCK_KHZ,
  GPU_ATTR_BUS_WIDTH_BITS,
  GPU_ATTR_PCI_DOMAIN,
  GPU_ATTR_PCI_BUS,
  GPU_ATTR_PCI_DEVICE,
  GPU_ATTR_COUNT_
} gpu_attribute;

typedef struct gpu_driver {
  void *context;     /* first argument of every entry */
  int out_of_memory; /* the error code of an allocation that found no memory */
  int not_found;     /* the error code of function_get for a name the module lacks */
  /* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for an error code. */
  void (*describe)(void *context, int error, char *buffer, size_t capacity);

  /* Devices: `device` is the vendor's device handle (gpu_device_props). */
  int (*device_attribute)(void *context, int device, gpu_attribute attribute, int *value);
  /* Makes a device's context (the vendor's, from device_open) current on the
   * calling thread; every other entry acts on the current one. */
  int (*device_enter)(void *context, void *device_context);

  /* Modules and kernels: a module from an embedded image, a kernel by name,
   * its dynamic shared memory raised past the default limit, its resident
   * blocks per multiprocessor, and a launch with one parameter block. */
  int (*module_load)(void *context, const void *image, void **module);
  int (*module_unload)(void *context, void *module);
  int (*function_get)(void *context, void *module, const char *name, void **function);
  int (*function_set_dynamic_smem)(void *context, void *function, int bytes);
  int (*function_occupancy)(void *context, void *function, int threads, size_t dynamic_smem,
                            int *blocks);
  int (*launch)(void *context, void *function, const unsigned grid[3], unsigned threads,
                unsigned dynamic_smem, void *stream, void *params);

  /* Device memory. mem_range: the allocation holding `address` (for
   * wrapping memory the application owns). */
  int (*mem_alloc)(void *context, size_t bytes, gpu_address *address);
  int (*mem_free)(void *context, gpu_address address);
  int (*mem_range)(void *context, gpu_address address, gpu_address *base, size_t *bytes);
  int (*memset32)(void *context, gpu_address dst, uint32_t value, size_t count, void *stream);
  int (*copy_h2d)(void *context, gpu_address dst, const void *src, size_t bytes, void *stream);
  int (*copy_d2h)(void *context, void *dst, gpu_address src, size_t bytes, void *stream);
  int (*copy_d2d)(void *context, gpu_address dst, gpu_address src, size_t bytes, void *stream);

  /* Streams (in-order, not synchronising with other streams) and events
   * (with timing). */
  int (*stream_create)(void *context, void **stream);
  int (*stream_destroy)(void *context, void *stream);
  int (*stream_sync)(void *context, void *stream);
  int (*event_create)(void *context, void **event);
  int (*event_destroy)(void *context, void *event);
  int (*event_record)(void *context, void *event, void *stream);
  int (*event_sync)(void *context, void *event);
  int (*event_elapsed)(void *context, void *start, void *end, float *ms);

  /* Interop with the application's own objects; each may be NULL where the
   * runtime lacks it. stream_owner: the device context (in device_enter's
   * terms) a stream of the application belongs to, so queue_wrap refuses a
   * stream of another GPU or context. host_register: host memory page-locked
   * and mapped for the device in place (fails with host_already_registered
   * when part of it already is); host_address: the device address of a
   * registered host address; host_unregister undoes host_register. */
  int (*stream_owner)(void *context, void *stream, void **device_context);
  int (*host_register)(void *context, void *pointer, size_t bytes);
  int (*host_unregister)(void *context, void *pointer);
  int (*host_address)(void *context, void *pointer, gpu_address *address);
  int host_already_registered;

  /* Several GPUs of one plugin (the ABI's queue_wait_event, queue_gate and
   * buffer_copy_peer); each may be NULL where the runtime lacks it, and the
   * layer then answers TSR_ERROR_UNSUPPORTED so the core falls back.
   * stream_wait_event: later work on `stream` waits for `event`, which may
   * be another device's. host_alloc / host_free: pinned host memory mapped
   * for every device (host_address gives its device address).
   * stream_wait_value32: later work on `stream` waits until the 32-bit word
   * at `address` is >= `value`. peer_can_access: whether device `device`
   * (a handle, as gpu_device_props) can map the memory of device `peer`.
   * peer_enable: the current context may use the memory of the context
   * `peer_context` (peer_already_enabled: its error when it already may).
   * copy_peer: a copy from a device address of one context to one of
   * another, on `stream`; the runtime stages it through host memory where
   * peer access is off. */
  int (*stream_wait_event)(void *context, void *stream, void *event);
  int (*host_alloc)(void *context, size_t bytes, void **pointer);
  int (*host_free)(void *context, void *pointer);
  int (*stream_wait_value32)(void *context, void *stream, gpu_address address, uint32_t value);
  int (*peer_can_access)(void *context, int device, int peer, int *can);
  int (*peer_enable)(void *context, void *peer_context);
  int (*copy_peer)(void *context, gpu_address dst, void *dst_context, gpu_address src,
                   void *src_context, size_t bytes, void *stream);
  int peer_already_enabled;
} gpu_driver;

#endif /* TESSERA_GPU_DRIVER_H */
