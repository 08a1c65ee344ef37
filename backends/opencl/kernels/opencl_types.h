/* SPDX-License-Identifier: Apache-2.0 */
/* Types the OpenCL kernels' parameter structs (params_*.h) are written in,
 * the same widths in OpenCL C and in the plugin's C: the host includes the
 * params headers, and every program is built with them in its prelude
 * (opencl_internal.h). Fields go 64-bit first, then 32-bit, and a struct's
 * size is a multiple of 8, so both compilers lay it out alike. */
#ifndef TESSERA_OPENCL_TYPES_H
#define TESSERA_OPENCL_TYPES_H

#ifdef __OPENCL_C_VERSION__
typedef long tsr_cl_i64;
typedef int tsr_cl_i32;
typedef uint tsr_cl_u32;
typedef float tsr_cl_f32;
#else
#include <stdint.h>
typedef int64_t tsr_cl_i64;
typedef int32_t tsr_cl_i32;
typedef uint32_t tsr_cl_u32;
typedef float tsr_cl_f32;
#endif

/* dtype codes, as tsr_dtype */
#define TSR_CL_F32 1
#define TSR_CL_F16 2
#define TSR_CL_BF16 3
#define TSR_CL_I32 4

/* Device faults: each queue's block of TSR_CL_FAULT_COUNT int32 words, word
 * k the smallest index at fault of kind k (atomic_min), TSR_CL_FAULT_NONE
 * when none; the kinds are plugin.h's TSR_PLUGIN_FAULT_* (queue.c reports
 * them at queue_finish). */
#define TSR_CL_FAULT_CE_TARGET 0
#define TSR_CL_FAULT_CU_SEQLENS_Q 1
#define TSR_CL_FAULT_CU_SEQLENS_KV 2
#define TSR_CL_FAULT_SEQLENS_KV 3
#define TSR_CL_FAULT_BLOCK_TABLE 4
#define TSR_CL_FAULT_MAX_SEQLEN_Q 5
#define TSR_CL_FAULT_MAX_SEQLEN_KV 6
#define TSR_CL_FAULT_KV_SLOT 7
#define TSR_CL_FAULT_COUNT 8
#define TSR_CL_FAULT_NONE 0x7fffffff

#endif /* TESSERA_OPENCL_TYPES_H */
