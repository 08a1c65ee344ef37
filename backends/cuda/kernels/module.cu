/* SPDX-License-Identifier: Apache-2.0 */
/* The one translation unit nvcc compiles into the plugin's fatbin: the
 * portable kernels of backends/gpu/kernels (found through -I) and the
 * NVIDIA-only ones, in one module loaded once per device with
 * cuModuleLoadData. */
#include "portable.cu"
/* After the portable files: they share their helpers. */
#include "attention_sm90.cu"
#include "gemm_sm90.cu"
