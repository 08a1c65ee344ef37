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

#endif /* TESSERA_OPENCL_TYPES_H */
