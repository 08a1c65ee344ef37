/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA plugin's ABI table (tsr_plugin_v2, the only version it speaks)
 * and its two exported symbols. The entries that know the CUDA runtime are
 * device.c's; buffers, queues, events and ops are the GPU layer's
 * (backends/gpu), over the driver table driver.c fills. */
#include "cuda_internal.h"

#define CUDA_STRINGIFY_(x) #x
#define CUDA_STRINGIFY(x) CUDA_STRINGIFY_(x)
#define CUDA_PLUGIN_VERSION                                                                        \
  CUDA_STRINGIFY(TSR_VERSION_MAJOR)                                                                \
  "." CUDA_STRINGIFY(TSR_VERSION_MINOR) "." CUDA_STRINGIFY(TSR_VERSION_PATCH)

static const tsr_plugin_v2 cuda_plugin_table = {
    .struct_size = sizeof(tsr_plugin_v2),
    .abi_version = 2,
    .name = "cuda",
    .version = CUDA_PLUGIN_VERSION,
    .init = cuda_init,
    .shutdown = cuda_shutdown,
    .device_count = gpu_device_count,
    .device_info = cuda_device_info,
    .device_open = cuda_device_open,
    .device_close = cuda_device_close,
    GPU_LAYER_PLUGIN_ENTRIES,
};

TSR_PLUGIN_EXPORT_V2(cuda_plugin_table)
