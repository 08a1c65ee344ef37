/* SPDX-License-Identifier: Apache-2.0 */
/* The HIP plugin's ABI table (tsr_plugin_v2, the only version it speaks)
 * and its two exported symbols. The entries that know the HIP runtime are
 * device.c's; buffers, queues, events and ops are the GPU layer's
 * (backends/gpu, shared with CUDA), over the driver table driver.c fills. */
#include "hip_internal.h"

#define HIP_STRINGIFY_(x) #x
#define HIP_STRINGIFY(x) HIP_STRINGIFY_(x)
#define HIP_PLUGIN_VERSION                                                                         \
  HIP_STRINGIFY(TSR_VERSION_MAJOR)                                                                 \
  "." HIP_STRINGIFY(TSR_VERSION_MINOR) "." HIP_STRINGIFY(TSR_VERSION_PATCH)

static const tsr_plugin_v2 hip_plugin_table = {
    .struct_size = sizeof(tsr_plugin_v2),
    .abi_version = 2,
    .name = "hip",
    .version = HIP_PLUGIN_VERSION,
    .init = hip_init,
    .shutdown = hip_shutdown,
    .device_count = gpu_device_count,
    .device_info = hip_device_info,
    .device_open = hip_device_open,
    .device_close = hip_device_close,
    GPU_LAYER_PLUGIN_ENTRIES,
};

TSR_PLUGIN_EXPORT_V2(hip_plugin_table)
