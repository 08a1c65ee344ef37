/* SPDX-License-Identifier: Apache-2.0 */
/* Internal declarations of the CUDA plugin: plugin, device, buffer, queue and
 * event objects, the kernel registry, and the op launchers (ops.c). Not
 * installed. */
#ifndef TESSERA_CUDA_INTERNAL_H
#define TESSERA_CUDA_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "driver.h"
#include "tessera/plugin.h"

enum { CUDA_MESSAGE_CAPACITY = 512 };

/* What init learned about one GPU. */
typedef struct cuda_device_props {
  CUdevice handle;
  char name[256];
  char uuid[64];
  int cc_major, cc_minor;
  int multiprocessors;
  int l2_bytes;
  int smem_per_block_optin;
  int smem_per_multiprocessor;
  int clock_khz, memory_clock_khz, bus_width_bits;
  int pci_domain, pci_bus, pci_device;
  size_t memory_bytes;
} cuda_device_props;

typedef struct cuda_plugin {
  tsr_host_services host;
  cuda_driver driver; /* library NULL: no driver, no devices */
  int driver_version;
  int device_count;
  cuda_device_props *devices;
} cuda_plugin;

/* The kernels of the embedded module (configs.c lists them). */
typedef struct cuda_kernel_info {
  const char *name;
  int dynamic_smem; /* the most dynamic shared memory it is launched with; -1: device limit */
  int threads;      /* block size (for the occupancy query), 0: not queried */
} cuda_kernel_info;

int cuda_kernel_count(void);
const cuda_kernel_info *cuda_kernel_at(int index);
/* Index of a kernel by name; -1 when there is none. */
int cuda_kernel_index(const char *name);

typedef struct cuda_device {
  cuda_plugin *plugin;
  const cuda_device_props *props;
  CUcontext context;
  CUmodule module;
  CUfunction *functions;  /* per kernel index */
  int *blocks_per_sm;     /* occupancy of each kernel at its launch shape (0: not run-able) */
  int dynamic_smem_limit; /* what kernels with dynamic_smem -1 may use */
  pthread_mutex_t lock;   /* guards the queue list */
  struct cuda_queue *queues;
} cuda_device;

typedef struct cuda_buffer {
  CUdeviceptr pointer;
  uint64_t bytes;
  bool wrapped; /* the application's memory: never freed here */
} cuda_buffer;

typedef struct cuda_queue {
  cuda_device *device;
  struct cuda_queue *next_in_device;
  CUstream stream;
  /* int32 on the device: the smallest row a cross_entropy found a bad target
   * in (INT32_MAX: none), checked and reset by queue_finish. */
  CUdeviceptr status;
  bool status_armed;
  int64_t status_vocab, status_ignore_index;
  /* f32 scratch for split-K partials, grown on demand. */
  CUdeviceptr workspace;
  size_t workspace_bytes;
} cuda_queue;

typedef struct cuda_event {
  cuda_device *device;
  CUevent event;
} cuda_event;

/* ---- helpers shared by plugin.c and ops.c ---- */

void cuda_set_error(const cuda_plugin *plugin, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void cuda_log(const cuda_plugin *plugin, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sets the error "cuda: <what>: <driver description>" and returns
 * TSR_ERROR_BACKEND (TSR_ERROR_OUT_OF_MEMORY for allocation failures). */
tsr_status cuda_fail(const cuda_plugin *plugin, CUresult result, const char *what);
/* Makes the device's context current on the calling thread. */
tsr_status cuda_enter(const cuda_device *device);

static inline CUdeviceptr cuda_tensor_address(const tsr_plugin_tensor *t) {
  return ((const cuda_buffer *)t->buffer)->pointer + t->offset;
}

/* ---- ops (ops.c) ---- */

/* Queues op `op` with the config configs.c resolved for `variant`. */
tsr_status cuda_op_launch(cuda_queue *queue, tsr_op op, const void *args, const void *config);

#endif /* TESSERA_CUDA_INTERNAL_H */
