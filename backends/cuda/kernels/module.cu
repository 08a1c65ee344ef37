/* SPDX-License-Identifier: Apache-2.0 */
/* The one translation unit nvcc compiles into the plugin's fatbin: every op
 * family's kernels in one module, loaded once per device with
 * cuModuleLoadData. */
#include "attention.cu"
#include "elementwise.cu"
#include "gemm.cu"
#include "gemm_sm90.cu" /* after gemm.cu: shares its tile and epilogue helpers */
#include "norm.cu"
