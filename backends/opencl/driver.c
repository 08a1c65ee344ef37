/* SPDX-License-Identifier: Apache-2.0 */
/* The ICD loader at run time: dlopen of libOpenCL.so.1 (or the library
 * TESSERA_OPENCL_LIBRARY names), its entry points resolved into the
 * opencl_api table, and the plugin's error sentences. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opencl_internal.h"

bool opencl_api_open(opencl_api *api, const char *library, char *why, size_t capacity) {
  memset(api, 0, sizeof *api);
  const char *name = library && *library ? library : "libOpenCL.so.1";
  void *handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *error = dlerror();
    snprintf(why, capacity, "no OpenCL ICD loader (%s): %s", name,
             error ? error : "unknown dlopen error");
    return false;
  }
#define OPENCL_API_RESOLVE(fn)                                                                     \
  *(void **)&api->fn = dlsym(handle, #fn);                                                         \
  if (!api->fn) {                                                                                  \
    snprintf(why, capacity, "the OpenCL library %s lacks %s (not OpenCL 1.2)", name, #fn);         \
    dlclose(handle);                                                                               \
    memset(api, 0, sizeof *api);                                                                   \
    return false;                                                                                  \
  }
  OPENCL_API_FUNCTIONS(OPENCL_API_RESOLVE)
#undef OPENCL_API_RESOLVE
  api->library = handle;
  return true;
}

void opencl_api_close(opencl_api *api) {
  /* TESSERA_NO_DLCLOSE (as the core honours it): ICDs stay mapped, so that
   * leak reports at exit can name their frames. */
  if (api->library && !getenv("TESSERA_NO_DLCLOSE"))
    dlclose(api->library);
  memset(api, 0, sizeof *api);
}

const char *opencl_error_name(cl_int error) {
  switch (error) {
#define OPENCL_ERROR(e)                                                                            \
  case e:                                                                                          \
    return #e;
    OPENCL_ERROR(CL_SUCCESS)
    OPENCL_ERROR(CL_DEVICE_NOT_FOUND)
    OPENCL_ERROR(CL_DEVICE_NOT_AVAILABLE)
    OPENCL_ERROR(CL_COMPILER_NOT_AVAILABLE)
    OPENCL_ERROR(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    OPENCL_ERROR(CL_OUT_OF_RESOURCES)
    OPENCL_ERROR(CL_OUT_OF_HOST_MEMORY)
    OPENCL_ERROR(CL_PROFILING_INFO_NOT_AVAILABLE)
    OPENCL_ERROR(CL_MEM_COPY_OVERLAP)
    OPENCL_ERROR(CL_BUILD_PROGRAM_FAILURE)
    OPENCL_ERROR(CL_MAP_FAILURE)
    OPENCL_ERROR(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    OPENCL_ERROR(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    OPENCL_ERROR(CL_COMPILE_PROGRAM_FAILURE)
    OPENCL_ERROR(CL_LINKER_NOT_AVAILABLE)
    OPENCL_ERROR(CL_LINK_PROGRAM_FAILURE)
    OPENCL_ERROR(CL_INVALID_VALUE)
    OPENCL_ERROR(CL_INVALID_DEVICE_TYPE)
    OPENCL_ERROR(CL_INVALID_PLATFORM)
    OPENCL_ERROR(CL_INVALID_DEVICE)
    OPENCL_ERROR(CL_INVALID_CONTEXT)
    OPENCL_ERROR(CL_INVALID_QUEUE_PROPERTIES)
    OPENCL_ERROR(CL_INVALID_COMMAND_QUEUE)
    OPENCL_ERROR(CL_INVALID_HOST_PTR)
    OPENCL_ERROR(CL_INVALID_MEM_OBJECT)
    OPENCL_ERROR(CL_INVALID_BINARY)
    OPENCL_ERROR(CL_INVALID_BUILD_OPTIONS)
    OPENCL_ERROR(CL_INVALID_PROGRAM)
    OPENCL_ERROR(CL_INVALID_PROGRAM_EXECUTABLE)
    OPENCL_ERROR(CL_INVALID_KERNEL_NAME)
    OPENCL_ERROR(CL_INVALID_KERNEL_DEFINITION)
    OPENCL_ERROR(CL_INVALID_KERNEL)
    OPENCL_ERROR(CL_INVALID_ARG_INDEX)
    OPENCL_ERROR(CL_INVALID_ARG_VALUE)
    OPENCL_ERROR(CL_INVALID_ARG_SIZE)
    OPENCL_ERROR(CL_INVALID_KERNEL_ARGS)
    OPENCL_ERROR(CL_INVALID_WORK_DIMENSION)
    OPENCL_ERROR(CL_INVALID_WORK_GROUP_SIZE)
    OPENCL_ERROR(CL_INVALID_WORK_ITEM_SIZE)
    OPENCL_ERROR(CL_INVALID_GLOBAL_OFFSET)
    OPENCL_ERROR(CL_INVALID_EVENT_WAIT_LIST)
    OPENCL_ERROR(CL_INVALID_EVENT)
    OPENCL_ERROR(CL_INVALID_OPERATION)
    OPENCL_ERROR(CL_INVALID_BUFFER_SIZE)
    OPENCL_ERROR(CL_INVALID_GLOBAL_WORK_SIZE)
#undef OPENCL_ERROR
  default:
    return "an unknown OpenCL error";
  }
}

tsr_status opencl_fail(const opencl_plugin *plugin, cl_int error, const char *what) {
  tsr_status status = error == CL_OUT_OF_HOST_MEMORY || error == CL_MEM_OBJECT_ALLOCATION_FAILURE ||
                              error == CL_INVALID_BUFFER_SIZE
                          ? TSR_ERROR_OUT_OF_MEMORY
                          : TSR_ERROR_BACKEND;
  return tsr_plugin_fail(&plugin->host, status, "%s: %s (%d)", what, opencl_error_name(error),
                         (int)error);
}
