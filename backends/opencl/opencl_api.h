/* SPDX-License-Identifier: Apache-2.0 */
/* The OpenCL API as the plugin uses it: Khronos' headers for the types, and
 * a table of the entry points resolved from the ICD loader (libOpenCL.so.1)
 * with dlsym at init (driver.c), so the plugin links nothing of OpenCL's.
 * Only OpenCL 1.2 entry points: every device of 1.2 or later is served. */
#ifndef TESSERA_OPENCL_API_H
#define TESSERA_OPENCL_API_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <CL/cl_ext.h>

#define OPENCL_API_FUNCTIONS(X)                                                                    \
  X(clGetPlatformIDs)                                                                              \
  X(clGetPlatformInfo)                                                                             \
  X(clGetDeviceIDs)                                                                                \
  X(clGetDeviceInfo)                                                                               \
  X(clCreateContext)                                                                               \
  X(clReleaseContext)                                                                              \
  X(clCreateCommandQueue)                                                                          \
  X(clReleaseCommandQueue)                                                                         \
  X(clCreateBuffer)                                                                                \
  X(clReleaseMemObject)                                                                            \
  X(clCreateProgramWithSource)                                                                     \
  X(clCreateProgramWithBinary)                                                                     \
  X(clBuildProgram)                                                                                \
  X(clGetProgramInfo)                                                                              \
  X(clGetProgramBuildInfo)                                                                         \
  X(clReleaseProgram)                                                                              \
  X(clCreateKernel)                                                                                \
  X(clReleaseKernel)                                                                               \
  X(clSetKernelArg)                                                                                \
  X(clGetKernelWorkGroupInfo)                                                                      \
  X(clEnqueueNDRangeKernel)                                                                        \
  X(clEnqueueReadBuffer)                                                                           \
  X(clEnqueueWriteBuffer)                                                                          \
  X(clEnqueueCopyBuffer)                                                                           \
  X(clEnqueueFillBuffer)                                                                           \
  X(clEnqueueMarkerWithWaitList)                                                                   \
  X(clEnqueueBarrierWithWaitList)                                                                  \
  X(clCreateUserEvent)                                                                             \
  X(clSetUserEventStatus)                                                                          \
  X(clFlush)                                                                                       \
  X(clFinish)                                                                                      \
  X(clWaitForEvents)                                                                               \
  X(clGetEventInfo)                                                                                \
  X(clGetEventProfilingInfo)                                                                       \
  X(clReleaseEvent)

typedef struct opencl_api {
  void *library; /* dlopen handle; NULL when no loader */
#define OPENCL_API_MEMBER(name) __typeof__(&name) name;
  OPENCL_API_FUNCTIONS(OPENCL_API_MEMBER)
#undef OPENCL_API_MEMBER
} opencl_api;

#endif /* TESSERA_OPENCL_API_H */
