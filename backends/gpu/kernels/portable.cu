/* SPDX-License-Identifier: Apache-2.0 */
/* The portable kernels, every op family, as one piece of a translation
 * unit: a vendor's module (backends/cuda/kernels/module.cu) includes this,
 * then its own kernels, which may use these files' helpers. Only what
 * gpu_portability.h abstracts is used here; instructions one vendor lacks
 * sit behind its TSR_GPU_HAS_* tests with a portable path or a trap. */
#include "attention.cu"
#include "attention_decode.cu"     /* after attention.cu: its serving helpers */
#include "attention_decode_mma.cu" /* after both: their helpers and partials */
#include "elementwise.cu"
#include "gemm.cu"
#include "gemv.cu" /* after gemm.cu: shares its tile and epilogue helpers */
#include "kv_cache.cu"
#include "norm.cu"
