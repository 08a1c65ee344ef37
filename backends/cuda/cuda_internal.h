/* SPDX-License-Identifier: Apache-2.0 */
/* What the CUDA plugin's files share: the plugin object (the GPU layer's,
 * with libcuda's entry points), the driver table over libcuda, the vendor
 * description (NVIDIA's kernels, tables and hooks) and the sm_90a launches.
 * Not installed. */
#ifndef TESSERA_CUDA_INTERNAL_H
#define TESSERA_CUDA_INTERNAL_H

#include "../gpu/gpu.h"
#include "cuda_api.h"

typedef struct cuda_plugin {
  gpu_plugin gpu; /* first: the handle the GPU layer's entries take */
  cuda_api api;   /* library NULL: no driver, no devices */
  int driver_version;
} cuda_plugin;

static inline const cuda_plugin *cuda_plugin_of(const gpu_plugin *plugin) {
  return (const cuda_plugin *)plugin;
}

/* ---- driver.c ---- */

/* Opens `library` (NULL or empty: libcuda.so.1) and resolves the driver
 * API; fills the plugin's driver table over it. Returns false with `why`
 * (a sentence) when that fails; nothing is then left open. */
bool cuda_driver_open(cuda_plugin *plugin, const char *library, char *why, size_t capacity);
void cuda_driver_close(cuda_plugin *plugin);
/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for a result. */
void cuda_describe(void *api, int result, char *buffer, size_t capacity);

/* The driver table's entries over libcuda, by subject (device.c, memory.c,
 * queue.c); their context is the plugin's cuda_api. */
void cuda_device_entries(gpu_driver *driver);
void cuda_memory_entries(gpu_driver *driver);
void cuda_queue_entries(gpu_driver *driver);

/* ---- device.c: the ABI entries that know the CUDA runtime ---- */

tsr_status cuda_init(const tsr_host_services_v2 *services, void **plugin, char *reason,
                     size_t reason_capacity);
void cuda_shutdown(void *plugin);
tsr_status cuda_device_info(void *plugin, uint32_t index, tsr_device_info *info);
tsr_status cuda_device_open(void *plugin, uint32_t index, void **device);
void cuda_device_close(void *device);

/* ---- configs.c ---- */

extern const gpu_vendor cuda_vendor;
/* The tile-table class of a device, by name ("sm_90"). */
const char *cuda_arch_name(int arch_major, int arch_minor);

/* ---- ops_sm90.c: the GPU_GEMM_VENDOR hooks ---- */

tsr_status cuda_gemm_sm90_run(gpu_queue *queue, const gpu_gemm_prepared *prepared,
                              const tsr_gemm_args *args, tsr_gpu_gemm_params *p, int64_t batch);
tsr_status cuda_grouped_gemm_sm90_run(gpu_queue *queue, const gpu_gemm_prepared *prepared,
                                      const tsr_grouped_gemm_args *args, tsr_gpu_gemm_params *p);
/* A 16-bit (or f32) GEMM operand as a 3-D TMA tensor map: dims {its
 * unit-stride dim, its other matrix dim, batch or group}, byte strides of
 * the last two. */
typedef struct cuda_tma_operand {
  bool k_major; /* the unit stride runs along K */
  bool batched; /* the third dim is indexed (else it has extent 1) */
  uint64_t dims[3];
  uint64_t strides[2];
} cuda_tma_operand;
/* Describes matrix dims `row_dim` and `k_dim` (and `batch_dim`, -1: none)
 * of a tensor as a TMA operand; false when TMA cannot load it: a start that
 * is not 16-byte aligned, no unit stride, other strides that are not
 * multiples of 16 bytes or not nested. */
bool cuda_tma_operand_of(const tsr_plugin_tensor *t, int row_dim, int k_dim, int batch_dim,
                         cuda_tma_operand *out);

#endif /* TESSERA_CUDA_INTERNAL_H */
