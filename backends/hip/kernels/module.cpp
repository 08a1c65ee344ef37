/* SPDX-License-Identifier: Apache-2.0 */
/* The HIP plugin's kernel module, one translation unit: the portable
 * kernels of every op family (backends/gpu/kernels, found through -I), then
 * the AMD matrix-core and 16-bit SIMT GEMMs, which use portable.cu's GEMM
 * helpers, then flash attention on matrix cores, which uses attention.cu's
 * and gemm_matrix.cpp's helpers.
 * Compiled with hipcc / clang for AMD targets, or with nvcc and
 * -DTSR_HIP_EMULATE_MATRIX=1 to run the matrix kernels on an NVIDIA GPU. */
#include "portable.cu"

#include "gemm_matrix.cpp"

#include "attention_matrix.cpp"
