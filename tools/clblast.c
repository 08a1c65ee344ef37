/* SPDX-License-Identifier: Apache-2.0 */
/* CLBlast baseline for bench's GEMM rows on OpenCL GPUs (see clblast.h).
 * OpenCL's types come from Khronos' headers (found by tools/CMakeLists.txt;
 * without them this file builds a session that always says so); the
 * OpenCL and CLBlast entry points are looked up with dlsym, the latter
 * declared below with the values of CLBlast's public clblast_c.h (1.5):
 * layouts, transposes and status codes. */
#include "clblast.h"
#include "vendor_blas.h"

#include "cublaslt.h"

#include <stdio.h>
#include <string.h>

#include "common.h"

bool clblast_handles(const problem_spec *spec) {
  /* The same problems as cuBLASLt's: no epilogue, alpha 1, one batch. */
  return cublaslt_handles(spec);
}

#ifndef TSR_TOOLS_OPENCL_HEADERS

struct clblast_session {
  int unused;
};

clblast_session *clblast_open(const tsr_device_info *info, char *why, size_t why_capacity) {
  (void)info;
  snprintf(why, why_capacity, "this tessera was built without the OpenCL headers");
  return NULL;
}

void clblast_close(clblast_session *session) {
  (void)session;
}

const char *clblast_describe(const clblast_session *session) {
  (void)session;
  return "";
}

bool clblast_time(clblast_session *session, problem *sets, int set_count, tsr_queue *queue,
                  const timing_plan *plan, clblast_timing *out) {
  (void)session, (void)sets, (void)set_count, (void)queue, (void)plan;
  memset(out, 0, sizeof *out);
  snprintf(out->error, sizeof out->error, "built without the OpenCL headers");
  return false;
}

#else

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* cl_khr_device_uuid and cl_khr_pci_bus_info (cl_ext.h; older headers
 * lack them). */
#define CB_DEVICE_UUID_KHR 0x106A
#define CB_DEVICE_PCI_BUS_INFO_KHR 0x410F
#define CB_DEVICE_BOARD_NAME_AMD 0x4038
typedef struct cb_pci_bus_info {
  cl_uint domain, bus, device, function;
} cb_pci_bus_info;

/* ---- CLBlast (the part used here, clblast_c.h) ---- */

enum {
  CB_SUCCESS = 0,
  CB_ROW_MAJOR = 101,    /* CLBlastLayout */
  CB_TRANSPOSE_NO = 111, /* CLBlastTranspose */
  CB_TRANSPOSE_YES = 112,
  CB_INVALID_DIMENSION = -1017, /* CLBlastStatusCode */
  CB_INVALID_LOCAL_MEMORY = -2046,
  CB_NO_HALF_PRECISION = -2045
};
#define CB_HALF_ONE ((cl_half)0x3C00)
#define CB_HALF_ZERO ((cl_half)0x0000)

/* CLBlastSgemm / Hgemm with a temporary buffer of the caller's (CLBlast
 * 1.3+), so that no timed call allocates one. */
typedef int (*cb_sgemm_temp_fn)(int layout, int a_transpose, int b_transpose, size_t m, size_t n,
                                size_t k, float alpha, const cl_mem a, size_t a_offset, size_t a_ld,
                                const cl_mem b, size_t b_offset, size_t b_ld, float beta, cl_mem c,
                                size_t c_offset, size_t c_ld, cl_command_queue *queue,
                                cl_event *event, cl_mem temp);
typedef int (*cb_hgemm_temp_fn)(int layout, int a_transpose, int b_transpose, size_t m, size_t n,
                                size_t k, cl_half alpha, const cl_mem a, size_t a_offset,
                                size_t a_ld, const cl_mem b, size_t b_offset, size_t b_ld,
                                cl_half beta, cl_mem c, size_t c_offset, size_t c_ld,
                                cl_command_queue *queue, cl_event *event, cl_mem temp);
typedef int (*cb_temp_size_fn)(int layout, int a_transpose, int b_transpose, size_t m, size_t n,
                               size_t k, size_t a_offset, size_t a_ld, size_t b_offset, size_t b_ld,
                               size_t c_offset, size_t c_ld, cl_command_queue *queue,
                               size_t *bytes);

/* ---- OpenCL 1.2 (the part used here) ---- */

typedef struct cb_cl {
  cl_int (*GetPlatformIDs)(cl_uint, cl_platform_id *, cl_uint *);
  cl_int (*GetPlatformInfo)(cl_platform_id, cl_platform_info, size_t, void *, size_t *);
  cl_int (*GetDeviceIDs)(cl_platform_id, cl_device_type, cl_uint, cl_device_id *, cl_uint *);
  cl_int (*GetDeviceInfo)(cl_device_id, cl_device_info, size_t, void *, size_t *);
  cl_context (*CreateContext)(const cl_context_properties *, cl_uint, const cl_device_id *,
                              void(CL_CALLBACK *)(const char *, const void *, size_t, void *),
                              void *, cl_int *);
  cl_int (*ReleaseContext)(cl_context);
  cl_command_queue (*CreateCommandQueue)(cl_context, cl_device_id, cl_command_queue_properties,
                                         cl_int *);
  cl_int (*ReleaseCommandQueue)(cl_command_queue);
  cl_mem (*CreateBuffer)(cl_context, cl_mem_flags, size_t, void *, cl_int *);
  cl_int (*ReleaseMemObject)(cl_mem);
  cl_int (*EnqueueWriteBuffer)(cl_command_queue, cl_mem, cl_bool, size_t, size_t, const void *,
                               cl_uint, const cl_event *, cl_event *);
  cl_int (*EnqueueReadBuffer)(cl_command_queue, cl_mem, cl_bool, size_t, size_t, void *, cl_uint,
                              const cl_event *, cl_event *);
  cl_int (*EnqueueFillBuffer)(cl_command_queue, cl_mem, const void *, size_t, size_t, size_t,
                              cl_uint, const cl_event *, cl_event *);
  cl_int (*EnqueueMarkerWithWaitList)(cl_command_queue, cl_uint, const cl_event *, cl_event *);
  cl_int (*Finish)(cl_command_queue);
  cl_int (*WaitForEvents)(cl_uint, const cl_event *);
  cl_int (*GetEventProfilingInfo)(cl_event, cl_profiling_info, size_t, void *, size_t *);
  cl_int (*RetainEvent)(cl_event);
  cl_int (*ReleaseEvent)(cl_event);
} cb_cl;

struct clblast_session {
  cb_cl cl;
  cb_sgemm_temp_fn sgemm;
  cb_hgemm_temp_fn hgemm;
  cb_temp_size_fn sgemm_temp_size, hgemm_temp_size;
  cl_device_id device;
  cl_context context;
  cl_command_queue queue;
  bool fp16; /* cl_khr_fp16: what CLBlastHgemm needs */
  /* Timing: markers with profiling where the driver times them, else the
   * event of each run's last kernel (in an in-order queue the end of
   * everything queued so far either way). */
  bool markers;
  cl_event last; /* the last call's event (kernel mode) */
  cl_event events[2 * TIMING_BATCH];
  cl_mem temp; /* GEMM's temporary buffer, grown to the largest call's need */
  size_t temp_bytes;
  char description[1200];
};

/* ------------------------------------------------------------------------ */
/* Loading and finding the device                                            */
/* ------------------------------------------------------------------------ */

/* The OpenCL errors a session meets (the number is printed beside). */
static const char *cl_error_name(cl_int error) {
#define CB_NAME(e)                                                                                 \
  { e, #e }
  static const struct {
    cl_int code;
    const char *name;
  } names[] = {CB_NAME(CL_DEVICE_NOT_AVAILABLE),
               CB_NAME(CL_MEM_OBJECT_ALLOCATION_FAILURE),
               CB_NAME(CL_OUT_OF_RESOURCES),
               CB_NAME(CL_OUT_OF_HOST_MEMORY),
               CB_NAME(CL_PROFILING_INFO_NOT_AVAILABLE),
               CB_NAME(CL_BUILD_PROGRAM_FAILURE),
               CB_NAME(CL_INVALID_VALUE),
               CB_NAME(CL_INVALID_DEVICE),
               CB_NAME(CL_INVALID_QUEUE_PROPERTIES),
               CB_NAME(CL_INVALID_MEM_OBJECT),
               CB_NAME(CL_INVALID_OPERATION),
               CB_NAME(CL_INVALID_BUFFER_SIZE),
               {-1001, "CL_PLATFORM_NOT_FOUND_KHR (no OpenCL driver installed)"}};
#undef CB_NAME
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (names[i].code == error)
      return names[i].name;
  return "an OpenCL error";
}

/* CLBlast's status codes are OpenCL's above -1000, its own below. */
static const char *status_name(int status) {
  return status == CB_NO_HALF_PRECISION      ? "CLBlastNoHalfPrecision"
         : status == CB_INVALID_LOCAL_MEMORY ? "CLBlastInvalidLocalMemUsage"
         : status == CB_INVALID_DIMENSION    ? "CLBlastInvalidDimension"
         : status > -1000                    ? cl_error_name(status)
                                             : "a CLBlast error";
}

/* The library `variable` names, else the first of `names` the dynamic
 * linker finds; `loaded` gets what was opened. */
static void *open_library(const char *variable, const char *const *names, size_t count,
                          char *loaded, size_t loaded_capacity, char *why, size_t why_capacity) {
  const char *named = getenv(variable);
  if (named != NULL && named[0] != '\0') {
    void *library = dlopen(named, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL)
      snprintf(why, why_capacity, "%s=%s: %s", variable, named, dlerror());
    snprintf(loaded, loaded_capacity, "%s", named);
    return library;
  }
  const char *first_error = NULL;
  char error[256] = "";
  for (size_t i = 0; i < count; i++) {
    void *library = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (library != NULL) {
      snprintf(loaded, loaded_capacity, "%s", names[i]);
      return library;
    }
    if (first_error == NULL && (first_error = dlerror()) != NULL)
      snprintf(error, sizeof error, "%s", first_error);
  }
  snprintf(why, why_capacity, "%s and %s not found by the dynamic linker (%s names another)%s%s",
           names[0], names[count - 1], variable, error[0] ? ": " : "", error);
  return NULL;
}

static bool load_opencl(cb_cl *cl, char *loaded, size_t loaded_capacity, char *why,
                        size_t why_capacity) {
  static const char *const names[] = {"libOpenCL.so.1", "libOpenCL.so"};
  void *library =
      open_library("TESSERA_OPENCL_LIBRARY", names, 2, loaded, loaded_capacity, why, why_capacity);
  if (library == NULL)
    return false;
  const struct {
    void *field;
    const char *name;
  } entries[] = {
      {&cl->GetPlatformIDs, "clGetPlatformIDs"},
      {&cl->GetPlatformInfo, "clGetPlatformInfo"},
      {&cl->GetDeviceIDs, "clGetDeviceIDs"},
      {&cl->GetDeviceInfo, "clGetDeviceInfo"},
      {&cl->CreateContext, "clCreateContext"},
      {&cl->ReleaseContext, "clReleaseContext"},
      {&cl->CreateCommandQueue, "clCreateCommandQueue"},
      {&cl->ReleaseCommandQueue, "clReleaseCommandQueue"},
      {&cl->CreateBuffer, "clCreateBuffer"},
      {&cl->ReleaseMemObject, "clReleaseMemObject"},
      {&cl->EnqueueWriteBuffer, "clEnqueueWriteBuffer"},
      {&cl->EnqueueReadBuffer, "clEnqueueReadBuffer"},
      {&cl->EnqueueFillBuffer, "clEnqueueFillBuffer"},
      {&cl->EnqueueMarkerWithWaitList, "clEnqueueMarkerWithWaitList"},
      {&cl->Finish, "clFinish"},
      {&cl->WaitForEvents, "clWaitForEvents"},
      {&cl->GetEventProfilingInfo, "clGetEventProfilingInfo"},
      {&cl->RetainEvent, "clRetainEvent"},
      {&cl->ReleaseEvent, "clReleaseEvent"},
  };
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
    if (!vendor_blas_bind(library, entries[i].field, entries[i].name, loaded, why, why_capacity))
      return false; /* the loader stays loaded, as the libraries of a session do */
  return true;
}

/* CLBlast; `text` gets "CLBlast 1.5.3 (libclblast.so.1)". */
static bool load_clblast(clblast_session *s, char *text, size_t text_capacity, char *why,
                         size_t why_capacity) {
  static const char *const names[] = {"libclblast.so.1", "libclblast.so"};
  char loaded[256];
  void *library =
      open_library("TESSERA_CLBLAST", names, 2, loaded, sizeof loaded, why, why_capacity);
  if (library == NULL)
    return false;
  if (!vendor_blas_bind(library, &s->sgemm, "CLBlastSgemmWithTempBuffer", loaded, why,
                        why_capacity) ||
      !vendor_blas_bind(library, &s->hgemm, "CLBlastHgemmWithTempBuffer", loaded, why,
                        why_capacity) ||
      !vendor_blas_bind(library, &s->sgemm_temp_size, "CLBlastSGemmTempBufferSize", loaded, why,
                        why_capacity) ||
      !vendor_blas_bind(library, &s->hgemm_temp_size, "CLBlastHGemmTempBufferSize", loaded, why,
                        why_capacity)) {
    size_t used = strlen(why);
    snprintf(why + used, why_capacity - used, " (CLBlast 1.3 or later needed)");
    return false;
  }
  /* CLBlast has no version call: the file the linker resolved
   * (libclblast.so.1.5.3) tells it. */
  char version[32] = "";
  Dl_info where;
  void *symbol = dlsym(library, "CLBlastSgemmWithTempBuffer");
  char *path = NULL;
  if (dladdr(symbol, &where) != 0 && where.dli_fname != NULL &&
      (path = realpath(where.dli_fname, NULL)) != NULL) {
    const char *so = strstr(path, ".so.");
    if (so != NULL && strchr(so + 4, '.') != NULL) /* a soname alone is no version */
      snprintf(version, sizeof version, " %.20s", so + 4);
  }
  free(path);
  snprintf(text, text_capacity, "CLBlast%s (%s)", version, loaded);
  return true;
}

/* The device's info `what` as text (trailing blanks dropped); "" when it
 * has none. */
static void device_text(const cb_cl *cl, cl_device_id device, cl_device_info what, char *out,
                        size_t capacity) {
  out[0] = '\0';
  if (cl->GetDeviceInfo(device, what, capacity, out, NULL) != CL_SUCCESS)
    out[0] = '\0';
  out[capacity - 1] = '\0';
  size_t length = strlen(out);
  while (length > 0 && (out[length - 1] == ' ' || out[length - 1] == '\n'))
    out[--length] = '\0';
}

/* Whether the device lists extension `name` (a whole word). */
static bool has_extension(const cb_cl *cl, cl_device_id device, const char *name) {
  size_t bytes = 0;
  if (cl->GetDeviceInfo(device, CL_DEVICE_EXTENSIONS, 0, NULL, &bytes) != CL_SUCCESS || bytes == 0)
    return false;
  char *list = malloc(bytes + 1);
  bool found = false;
  if (list != NULL && cl->GetDeviceInfo(device, CL_DEVICE_EXTENSIONS, bytes, list, NULL) == 0) {
    list[bytes] = '\0';
    size_t length = strlen(name);
    for (const char *at = strstr(list, name); at != NULL && !found; at = strstr(at + 1, name))
      found = (at == list || at[-1] == ' ') && (at[length] == '\0' || at[length] == ' ');
  }
  free(list);
  return found;
}

/* Where a device is: its UUID and PCI address where known. */
typedef struct identity {
  bool has_uuid, has_pci;
  unsigned char uuid[16];
  unsigned pci[3]; /* domain, bus, device (the function is not compared) */
} identity;

/* A UUID as tessera's plugins write it ("GPU-" and 32 hex digits with
 * dashes) or bare. */
static bool parse_uuid(const char *text, unsigned char uuid[16]) {
  if (strncmp(text, "GPU-", 4) == 0)
    text += 4;
  int digits = 0;
  for (; *text != '\0'; text++) {
    if (*text == '-')
      continue;
    char c = *text;
    int value = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
    if (value < 0 || digits == 32)
      return false;
    uuid[digits / 2] = (unsigned char)(digits % 2 ? (uuid[digits / 2] << 4) | value : value);
    digits++;
  }
  return digits == 32;
}

/* "dddd:bb:dd[.f]" at the start of `text`. */
static bool parse_pci(const char *text, unsigned pci[3]) {
  int used = 0;
  return sscanf(text, "%x:%x:%x%n", &pci[0], &pci[1], &pci[2], &used) == 3 &&
         (text[used] == '\0' || text[used] == '.' || text[used] == '\n' || text[used] == ' ');
}

/* The tessera device's identity: its physical_id (a UUID or a PCI
 * address), else a "PCI: ..." line of its details. */
static identity tessera_identity(const tsr_device_info *info) {
  identity id;
  memset(&id, 0, sizeof id);
  id.has_uuid = parse_uuid(info->physical_id, id.uuid);
  id.has_pci = parse_pci(info->physical_id, id.pci);
  for (const char *line = info->details; !id.has_pci && line != NULL && *line != '\0';) {
    if (strncmp(line, "PCI", 3) == 0 || strncmp(line, "pci", 3) == 0) {
      const char *value = line + 3;
      while (*value == ':' || *value == ' ' || *value == '\t')
        value++;
      id.has_pci = parse_pci(value, id.pci);
    }
    line = strchr(line, '\n');
    line = line != NULL ? line + 1 : NULL;
  }
  return id;
}

static identity opencl_identity(const cb_cl *cl, cl_device_id device) {
  identity id;
  memset(&id, 0, sizeof id);
  if (has_extension(cl, device, "cl_khr_device_uuid"))
    id.has_uuid =
        cl->GetDeviceInfo(device, CB_DEVICE_UUID_KHR, sizeof id.uuid, id.uuid, NULL) == CL_SUCCESS;
  cb_pci_bus_info pci;
  if (has_extension(cl, device, "cl_khr_pci_bus_info") &&
      cl->GetDeviceInfo(device, CB_DEVICE_PCI_BUS_INFO_KHR, sizeof pci, &pci, NULL) == CL_SUCCESS) {
    id.has_pci = true;
    id.pci[0] = pci.domain;
    id.pci[1] = pci.bus;
    id.pci[2] = pci.device;
  }
  return id;
}

/* Whether the device's name is the tessera device's (AMD's drivers name
 * the architecture and give the product as the board name). */
static bool same_name(const cb_cl *cl, cl_device_id device, const char *name) {
  char text[256];
  device_text(cl, device, CL_DEVICE_NAME, text, sizeof text);
  if (strcmp(text, name) == 0)
    return true;
  device_text(cl, device, CB_DEVICE_BOARD_NAME_AMD, text, sizeof text);
  return text[0] != '\0' && strcmp(text, name) == 0;
}

/* The cl_device_id of the tessera device, among every platform's devices in
 * the loader's order: the one with its UUID, else its PCI address, else
 * one with its name (the one at its backend index when several are, as
 * the plugin counts them in the same order). `how` says which. */
static cl_device_id find_device(const cb_cl *cl, const tsr_device_info *info, char *how,
                                size_t how_capacity, char *why, size_t why_capacity) {
  enum { MAX_DEVICES = 64 };
  cl_platform_id platforms[16];
  cl_uint platform_count = 0;
  cl_int error = cl->GetPlatformIDs(16, platforms, &platform_count);
  if (error != CL_SUCCESS || platform_count == 0) {
    snprintf(why, why_capacity, "clGetPlatformIDs: %s (%d)",
             error != CL_SUCCESS ? cl_error_name(error) : "no platform", (int)error);
    return NULL;
  }
  cl_device_id devices[MAX_DEVICES];
  cl_uint count = 0;
  for (cl_uint p = 0; p < platform_count && p < 16 && count < MAX_DEVICES; p++) {
    cl_uint found = 0;
    if (cl->GetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, MAX_DEVICES - count, devices + count,
                         &found) == CL_SUCCESS)
      count += found < MAX_DEVICES - count ? found : MAX_DEVICES - count;
  }
  identity wanted = tessera_identity(info);
  char name[256];
  snprintf(name, sizeof name, "%s", info->name);
  for (size_t length = strlen(name); length > 0 && name[length - 1] == ' ';)
    name[--length] = '\0';
  cl_device_id by_name = NULL;
  for (cl_uint i = 0; i < count; i++) {
    identity id = opencl_identity(cl, devices[i]);
    if (wanted.has_uuid && id.has_uuid) {
      if (memcmp(wanted.uuid, id.uuid, sizeof id.uuid) == 0) {
        snprintf(how, how_capacity, "matched by UUID");
        return devices[i];
      }
      continue; /* another GPU */
    }
    if (wanted.has_pci && id.has_pci) {
      if (memcmp(wanted.pci, id.pci, sizeof id.pci) == 0) {
        snprintf(how, how_capacity, "matched by PCI address %04x:%02x:%02x", id.pci[0], id.pci[1],
                 id.pci[2]);
        return devices[i];
      }
      continue;
    }
    if (same_name(cl, devices[i], name) && (by_name == NULL || i == info->backend_index))
      by_name = devices[i];
  }
  if (by_name != NULL) {
    snprintf(how, how_capacity, "matched by name");
    return by_name;
  }
  snprintf(why, why_capacity, "none of the %u OpenCL devices the loader lists is %s", count,
           info->name);
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* Session                                                                   */
/* ------------------------------------------------------------------------ */

void clblast_close(clblast_session *s) {
  if (s == NULL)
    return;
  if (s->queue != NULL)
    s->cl.Finish(s->queue);
  for (int i = 0; i < 2 * TIMING_BATCH; i++)
    if (s->events[i] != NULL)
      s->cl.ReleaseEvent(s->events[i]);
  if (s->last != NULL)
    s->cl.ReleaseEvent(s->last);
  if (s->temp != NULL)
    s->cl.ReleaseMemObject(s->temp);
  if (s->queue != NULL)
    s->cl.ReleaseCommandQueue(s->queue);
  if (s->context != NULL)
    s->cl.ReleaseContext(s->context);
  /* The libraries stay loaded: CLBlast keeps compiled programs of the
   * context in a cache of its own, released at exit. */
  free(s);
}

/* Whether markers carry profiling times on this driver (OpenCL 1.2 says
 * they should; some drivers time only kernels). */
static bool markers_timed(const clblast_session *s) {
  cl_event marker = NULL;
  cl_ulong end = 0;
  bool ok = s->cl.EnqueueMarkerWithWaitList(s->queue, 0, NULL, &marker) == CL_SUCCESS &&
            s->cl.WaitForEvents(1, &marker) == CL_SUCCESS &&
            s->cl.GetEventProfilingInfo(marker, CL_PROFILING_COMMAND_END, sizeof end, &end, NULL) ==
                CL_SUCCESS &&
            end > 0;
  if (marker != NULL)
    s->cl.ReleaseEvent(marker);
  return ok;
}

clblast_session *clblast_open(const tsr_device_info *info, char *why, size_t why_capacity) {
  why[0] = '\0';
  if (strcmp(info->backend, "opencl") != 0) {
    snprintf(why, why_capacity, "not an OpenCL device");
    return NULL;
  }
  clblast_session *s = calloc(1, sizeof *s);
  if (s == NULL) {
    snprintf(why, why_capacity, "out of host memory");
    return NULL;
  }
  char loader[256], library[320], how[64];
  if (!load_opencl(&s->cl, loader, sizeof loader, why, why_capacity) ||
      !load_clblast(s, library, sizeof library, why, why_capacity) ||
      (s->device = find_device(&s->cl, info, how, sizeof how, why, why_capacity)) == NULL) {
    free(s);
    return NULL;
  }
  cl_int error = CL_SUCCESS;
  s->context = s->cl.CreateContext(NULL, 1, &s->device, NULL, NULL, &error);
  if (s->context != NULL)
    s->queue = s->cl.CreateCommandQueue(s->context, s->device, CL_QUEUE_PROFILING_ENABLE, &error);
  if (s->queue == NULL) {
    snprintf(why, why_capacity, "%s on %s: %s (%d)",
             s->context == NULL ? "clCreateContext" : "clCreateCommandQueue", info->name,
             cl_error_name(error), (int)error);
    clblast_close(s);
    return NULL;
  }
  s->fp16 = has_extension(&s->cl, s->device, "cl_khr_fp16");
  s->markers = markers_timed(s);
  cl_platform_id platform = NULL;
  char platform_name[128] = "", name[256], version[128], driver[128];
  if (s->cl.GetDeviceInfo(s->device, CL_DEVICE_PLATFORM, sizeof platform, &platform, NULL) ==
          CL_SUCCESS &&
      s->cl.GetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof platform_name, platform_name,
                            NULL) != CL_SUCCESS)
    platform_name[0] = '\0';
  platform_name[sizeof platform_name - 1] = '\0';
  device_text(&s->cl, s->device, CL_DEVICE_NAME, name, sizeof name);
  device_text(&s->cl, s->device, CL_DEVICE_VERSION, version, sizeof version);
  device_text(&s->cl, s->device, CL_DRIVER_VERSION, driver, sizeof driver);
  snprintf(s->description, sizeof s->description,
           "%.160s, %.160s, %.100s: %.200s (%.100s, driver %.100s), %s%s; timed with %s", library,
           loader, platform_name, name, version, driver, how,
           s->fp16 ? "" : "; no cl_khr_fp16: no f16 baseline",
           s->markers ? "marker events" : "kernel events (markers carry no profiling times)");
  return s;
}

const char *clblast_describe(const clblast_session *s) {
  return s->description;
}

/* ------------------------------------------------------------------------ */
/* One GEMM in CLBlast's row-major terms                                     */
/* ------------------------------------------------------------------------ */

/* A tessera view X [R, C] as a row-major CLBlast operand: unit stride along
 * C is X itself (no transpose, ld = row stride); unit stride along R is X^T
 * stored row-major (transposed, ld = column stride). A dimension of extent
 * 1 counts as either. */
typedef struct rm_operand {
  bool transposed;
  size_t ld;
} rm_operand;

static bool row_major_of(const tsr_tensor *v, rm_operand *out) {
  int last = v->rank - 1;
  int64_t r = v->shape[last - 1], c = v->shape[last];
  int64_t sr = v->strides[last - 1], sc = v->strides[last];
  int64_t ld = r > 1 ? sr : c;
  if ((sc == 1 || c == 1) && ld >= c && ld >= 1) {
    *out = (rm_operand){false, (size_t)ld};
    return true;
  }
  ld = c > 1 ? sc : r;
  if ((sr == 1 || r == 1) && ld >= r && ld >= 1) {
    *out = (rm_operand){true, (size_t)ld};
    return true;
  }
  return false;
}

typedef struct rm_call {
  rm_operand a, b;
  size_t m, n, k, ldd;
  size_t a_offset, b_offset, d_offset; /* elements */
} rm_call;

/* The call for D = A B on tessera views a [M,K], b [K,N], d [M,N]. */
static bool call_create(const tsr_tensor *a, const tsr_tensor *b, const tsr_tensor *d, rm_call *c,
                        char *error, size_t capacity) {
  memset(c, 0, sizeof *c);
  if (!row_major_of(a, &c->a) || !row_major_of(b, &c->b)) {
    snprintf(error, capacity, "an operand has no unit stride");
    return false;
  }
  int last = d->rank - 1;
  int64_t rows = d->shape[last - 1], cols = d->shape[last];
  int64_t ldd = rows > 1 ? d->strides[last - 1] : cols;
  if ((d->strides[last] != 1 && cols > 1) || ldd < cols) {
    snprintf(error, capacity, "d has no unit column stride or its rows overlap");
    return false;
  }
  c->m = (size_t)rows;
  c->n = (size_t)cols;
  c->k = (size_t)a->shape[a->rank - 1];
  c->ldd = (size_t)ldd;
  size_t es = tsr_dtype_size(d->dtype);
  c->a_offset = a->offset / es;
  c->b_offset = b->offset / es;
  c->d_offset = d->offset / es;
  if (c->m == 0 || c->n == 0 || c->k == 0) {
    snprintf(error, capacity, "an empty GEMM (CLBlast refuses zero sizes)");
    return false;
  }
  return true;
}

/* A problem's buffers in the session's context (copies of tessera's a and
 * b, a zeroed d of the same size) and its calls: one for a GEMM, one per
 * non-empty group for a grouped GEMM. */
typedef struct cb_plan {
  cl_mem a, b, d;
  bool half;
  int count;
  rm_call calls[PROBLEM_MAX_GROUPS];
} cb_plan;

static void plan_destroy(const clblast_session *s, cb_plan *plan) {
  cl_mem held[3] = {plan->a, plan->b, plan->d};
  for (int i = 0; i < 3; i++)
    if (held[i] != NULL)
      s->cl.ReleaseMemObject(held[i]);
  memset(plan, 0, sizeof *plan);
}

/* A buffer of the session holding tessera's buffer of `t` (`copy`) or
 * zeros, the whole buffer, so that tessera's offsets address it. */
static bool mirror_tensor(const clblast_session *s, const problem_tensor *t, tsr_queue *queue,
                          bool copy, unsigned char **staging, size_t *staging_bytes, cl_mem *out,
                          char *error, size_t capacity) {
  size_t bytes = 0;
  if (tsr_buffer_size(t->view.buffer, &bytes) != TSR_OK) {
    snprintf(error, capacity, "the size of %s's buffer: %s", t->name, tsr_last_error());
    return false;
  }
  if (copy && *staging_bytes < bytes) {
    unsigned char *grown = realloc(*staging, bytes);
    if (grown == NULL) {
      snprintf(error, capacity, "out of host memory");
      return false;
    }
    *staging = grown;
    *staging_bytes = bytes;
  }
  if (copy && tsr_buffer_read(queue, t->view.buffer, 0, *staging, bytes) != TSR_OK) {
    snprintf(error, capacity, "reading tessera's %s: %s", t->name, tsr_last_error());
    return false;
  }
  cl_int result = CL_SUCCESS;
  *out = s->cl.CreateBuffer(s->context, CL_MEM_READ_WRITE, bytes, NULL, &result);
  const char *call = "clCreateBuffer";
  if (*out != NULL) {
    /* d starts at 0: beta is 0, but a NaN left in fresh memory must not
     * depend on whether the library reads C. */
    const cl_uchar zero = 0;
    call = copy ? "clEnqueueWriteBuffer" : "clEnqueueFillBuffer";
    result =
        copy ? s->cl.EnqueueWriteBuffer(s->queue, *out, CL_TRUE, 0, bytes, *staging, 0, NULL, NULL)
             : s->cl.EnqueueFillBuffer(s->queue, *out, &zero, 1, 0, bytes, 0, NULL, NULL);
    if (result == CL_SUCCESS)
      result = s->cl.Finish(s->queue);
  }
  if (result != CL_SUCCESS) {
    snprintf(error, capacity, "%s (%zu bytes) for a copy of %s: %s (%d)", call, bytes, t->name,
             cl_error_name(result), (int)result);
    return false;
  }
  return true;
}

/* Grows the session's temporary buffer to what `c` needs. */
static bool reserve_temp(clblast_session *s, const rm_call *c, bool half, char *error,
                         size_t capacity) {
  size_t bytes = 0;
  cb_temp_size_fn size = half ? s->hgemm_temp_size : s->sgemm_temp_size;
  int status =
      size(CB_ROW_MAJOR, c->a.transposed ? CB_TRANSPOSE_YES : CB_TRANSPOSE_NO,
           c->b.transposed ? CB_TRANSPOSE_YES : CB_TRANSPOSE_NO, c->m, c->n, c->k, c->a_offset,
           c->a.ld, c->b_offset, c->b.ld, c->d_offset, c->ldd, &s->queue, &bytes);
  if (status != CB_SUCCESS) {
    snprintf(error, capacity, "CLBlast%cGemmTempBufferSize: %s (%d)", half ? 'H' : 'S',
             status_name(status), status);
    return false;
  }
  if (bytes <= s->temp_bytes)
    return true;
  s->cl.Finish(s->queue); /* the old one may still be in use */
  if (s->temp != NULL)
    s->cl.ReleaseMemObject(s->temp);
  s->temp_bytes = 0;
  cl_int result = CL_SUCCESS;
  s->temp = s->cl.CreateBuffer(s->context, CL_MEM_READ_WRITE, bytes, NULL, &result);
  if (s->temp == NULL) {
    snprintf(error, capacity, "clCreateBuffer (%zu bytes) for CLBlast's temporary buffer: %s",
             bytes, cl_error_name(result));
    return false;
  }
  s->temp_bytes = bytes;
  return true;
}

static bool plan_create(clblast_session *s, const problem *p, tsr_queue *queue,
                        unsigned char **staging, size_t *staging_bytes, cb_plan *plan, char *error,
                        size_t capacity) {
  memset(plan, 0, sizeof *plan);
  const problem_tensor *a = vendor_blas_tensor(p, "a"), *b = vendor_blas_tensor(p, "b"),
                       *d = vendor_blas_tensor(p, "d");
  if (a == NULL || b == NULL || d == NULL || a->alias >= 0 || b->alias >= 0 || d->alias >= 0) {
    snprintf(error, capacity, "the problem has no separate a, b and d buffers");
    return false;
  }
  plan->half = p->spec.dtype == TSR_DTYPE_F16;
  vendor_blas_gemm gemms[PROBLEM_MAX_GROUPS];
  int count = vendor_blas_gemms(p, &a->view, &b->view, &d->view, gemms);
  if (count == 0) {
    snprintf(error, capacity, "every group is empty");
    return false;
  }
  for (int i = 0; i < count; i++) {
    if (!call_create(&gemms[i].a, &gemms[i].b, &gemms[i].d, &plan->calls[i], error, capacity))
      return false;
    plan->count++;
  }
  for (int i = 0; i < plan->count; i++)
    if (!reserve_temp(s, &plan->calls[i], plan->half, error, capacity))
      return false;
  if (!mirror_tensor(s, a, queue, true, staging, staging_bytes, &plan->a, error, capacity) ||
      !mirror_tensor(s, b, queue, true, staging, staging_bytes, &plan->b, error, capacity) ||
      !mirror_tensor(s, d, queue, false, staging, staging_bytes, &plan->d, error, capacity)) {
    plan_destroy(s, plan);
    return false;
  }
  return true;
}

/* Queues the plan's calls; the last one's event becomes s->last. */
static bool plan_run(clblast_session *s, const cb_plan *plan, char *error, size_t capacity) {
  for (int i = 0; i < plan->count; i++) {
    const rm_call *c = &plan->calls[i];
    int ta = c->a.transposed ? CB_TRANSPOSE_YES : CB_TRANSPOSE_NO;
    int tb = c->b.transposed ? CB_TRANSPOSE_YES : CB_TRANSPOSE_NO;
    cl_event event = NULL;
    int status;
    if (plan->half)
      status = s->hgemm(CB_ROW_MAJOR, ta, tb, c->m, c->n, c->k, CB_HALF_ONE, plan->a, c->a_offset,
                        c->a.ld, plan->b, c->b_offset, c->b.ld, CB_HALF_ZERO, plan->d, c->d_offset,
                        c->ldd, &s->queue, &event, s->temp);
    else
      status = s->sgemm(CB_ROW_MAJOR, ta, tb, c->m, c->n, c->k, 1.0f, plan->a, c->a_offset, c->a.ld,
                        plan->b, c->b_offset, c->b.ld, 0.0f, plan->d, c->d_offset, c->ldd,
                        &s->queue, &event, s->temp);
    if (status != CB_SUCCESS) {
      snprintf(error, capacity, "CLBlast%cgemm %zux%zux%zu: %s (%d)", plan->half ? 'H' : 'S', c->m,
               c->n, c->k, status_name(status), status);
      return false;
    }
    if (s->last != NULL)
      s->cl.ReleaseEvent(s->last);
    s->last = event;
  }
  return true;
}

/* ------------------------------------------------------------------------ */
/* Timing                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct runner {
  clblast_session *s;
  const cb_plan *plans;
  int set_count;
  clblast_timing *out;
} runner;

static bool runner_run(void *context, int i) {
  runner *w = context;
  return plan_run(w->s, &w->plans[i % w->set_count], w->out->error, sizeof w->out->error);
}

static bool runner_finish(void *context) {
  runner *w = context;
  cl_int result = w->s->cl.Finish(w->s->queue);
  if (result != CL_SUCCESS)
    snprintf(w->out->error, sizeof w->out->error, "CLBlast's queue failed in the warm-up: %s (%d)",
             cl_error_name(result), (int)result);
  return result == CL_SUCCESS;
}

/* timing_sample's slot: a marker, else the last call's event. */
static bool runner_record(void *context, int slot) {
  runner *w = context;
  clblast_session *s = w->s;
  if (s->events[slot] != NULL)
    s->cl.ReleaseEvent(s->events[slot]);
  s->events[slot] = NULL;
  cl_int result = CL_SUCCESS;
  if (s->markers)
    result = s->cl.EnqueueMarkerWithWaitList(s->queue, 0, NULL, &s->events[slot]);
  else if (s->last != NULL && (result = s->cl.RetainEvent(s->last)) == CL_SUCCESS)
    s->events[slot] = s->last;
  if (result != CL_SUCCESS)
    snprintf(w->out->error, sizeof w->out->error, "timing CLBlast: %s (%d)", cl_error_name(result),
             (int)result);
  else if (s->events[slot] == NULL)
    snprintf(w->out->error, sizeof w->out->error, "timing CLBlast: no call to time from");
  return result == CL_SUCCESS && s->events[slot] != NULL;
}

static bool runner_elapsed(void *context, int from, int to, double *ms) {
  runner *w = context;
  clblast_session *s = w->s;
  cl_ulong start = 0, end = 0;
  cl_int result = s->cl.WaitForEvents(1, &s->events[to]);
  if (result == CL_SUCCESS)
    result = s->cl.GetEventProfilingInfo(s->events[from], CL_PROFILING_COMMAND_END, sizeof start,
                                         &start, NULL);
  if (result == CL_SUCCESS)
    result = s->cl.GetEventProfilingInfo(s->events[to], CL_PROFILING_COMMAND_END, sizeof end, &end,
                                         NULL);
  if (result != CL_SUCCESS)
    snprintf(w->out->error, sizeof w->out->error, "timing CLBlast: %s (%d)", cl_error_name(result),
             (int)result);
  *ms = end > start ? (double)(end - start) * 1e-6 : 0.0;
  return result == CL_SUCCESS;
}

/* ||x - y|| / ||y|| over the elements of view `d` in two host copies of
 * its span (from its offset). */
static double normwise_difference(const unsigned char *x, const unsigned char *y,
                                  const tsr_tensor *d) {
  int last = d->rank - 1;
  int64_t rows = d->shape[last - 1], cols = d->shape[last];
  double squared = 0.0, reference = 0.0;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) {
      int64_t at = r * d->strides[last - 1] + c * d->strides[last];
      double u = dtype_load(x, d->dtype, at), v = dtype_load(y, d->dtype, at);
      squared += (u - v) * (u - v);
      reference += v * v;
    }
  if (reference > 0.0)
    return sqrt(squared / reference);
  return squared > 0.0 ? INFINITY : 0.0;
}

/* Runs sets[0]'s plan once and compares its d with tessera's. */
static bool compare_with_tessera(clblast_session *s, const problem *p, const cb_plan *plan,
                                 tsr_queue *queue, clblast_timing *out) {
  const tsr_tensor *d = &vendor_blas_tensor(p, "d")->view;
  int last = d->rank - 1;
  size_t es = tsr_dtype_size(d->dtype);
  size_t bytes = ((size_t)((d->shape[last - 1] - 1) * d->strides[last - 1] +
                           (d->shape[last] - 1) * d->strides[last]) +
                  1) *
                 es;
  unsigned char *mine = malloc(bytes), *theirs = malloc(bytes);
  bool ok = mine != NULL && theirs != NULL;
  if (!ok)
    snprintf(out->error, sizeof out->error, "out of host memory");
  if (ok && tsr_buffer_read(queue, d->buffer, d->offset, mine, bytes) != TSR_OK) {
    snprintf(out->error, sizeof out->error, "reading tessera's d: %s", tsr_last_error());
    ok = false;
  }
  if (ok)
    ok = plan_run(s, plan, out->error, sizeof out->error);
  if (ok) {
    cl_int result = s->cl.EnqueueReadBuffer(s->queue, plan->d, CL_TRUE, d->offset, bytes, theirs, 0,
                                            NULL, NULL);
    if (result != CL_SUCCESS) {
      snprintf(out->error, sizeof out->error, "reading CLBlast's d: %s (%d)", cl_error_name(result),
               (int)result);
      ok = false;
    } else {
      out->difference = normwise_difference(theirs, mine, d);
    }
  }
  free(mine);
  free(theirs);
  return ok;
}

bool clblast_time(clblast_session *s, problem *sets, int set_count, tsr_queue *queue,
                  const timing_plan *plan, clblast_timing *out) {
  memset(out, 0, sizeof *out);
  out->median_ms = NAN;
  out->difference = NAN;
  tsr_dtype dtype = sets[0].spec.dtype;
  if (!clblast_handles(&sets[0].spec)) {
    snprintf(out->error, sizeof out->error, "not a plain GEMM");
    return false;
  }
  if (dtype == TSR_DTYPE_BF16) {
    snprintf(out->error, sizeof out->error, "no baseline: CLBlast has no bf16 GEMM");
    return false;
  }
  if (dtype == TSR_DTYPE_F16 && !s->fp16) {
    snprintf(out->error, sizeof out->error,
             "no baseline: the device has no cl_khr_fp16, which CLBlastHgemm needs");
    return false;
  }
  if (tsr_queue_finish(queue) != TSR_OK) { /* tessera is done with the buffers */
    snprintf(out->error, sizeof out->error, "tsr_queue_finish: %s", tsr_last_error());
    return false;
  }
  cb_plan *plans = calloc(3, sizeof *plans);
  if (plans == NULL) {
    snprintf(out->error, sizeof out->error, "out of host memory");
    return false;
  }
  unsigned char *staging = NULL;
  size_t staging_bytes = 0;
  int made = 0;
  bool ok = true;
  for (; made < set_count && made < 3 && ok; made++)
    ok = plan_create(s, &sets[made], queue, &staging, &staging_bytes, &plans[made], out->error,
                     sizeof out->error);
  if (!ok)
    made--;
  free(staging);
  if (ok) {
    bool tf32 = dtype == TSR_DTYPE_F32 && sets[0].spec.op == TSR_OP_GEMM &&
                sets[0].spec.gemm.compute == TSR_COMPUTE_TF32;
    snprintf(out->algo, sizeof out->algo, "%d call%s, CLBlast%cgemm, %s compute, copies",
             plans[0].count, plans[0].count == 1 ? "" : "s", plans[0].half ? 'H' : 'S',
             plans[0].half ? "f16"
             : tf32        ? "f32 (no tf32 in CLBlast)"
                           : "f32");
    ok = compare_with_tessera(s, &sets[0], &plans[0], queue, out);
  }

  /* The same plan as tessera's (time_problem), its warm-up included. */
  double samples[TIMING_MAX_SAMPLES];
  int count = 0;
  runner warm = {s, plans, set_count, out};
  if (ok)
    ok = timing_warm_up(plan, set_count, runner_run, runner_finish, &warm);
  timing_ops ops = {&warm, runner_run, runner_record, runner_elapsed};
  if (ok)
    ok = timing_sample(plan, set_count, &ops, samples, &count);
  cl_int finished = s->cl.Finish(s->queue); /* nothing queued may outlive the copies */
  if (ok && finished != CL_SUCCESS) {
    snprintf(out->error, sizeof out->error, "CLBlast's queue failed: %s (%d)",
             cl_error_name(finished), (int)finished);
    ok = false;
  }
  for (int i = 0; i < made; i++)
    plan_destroy(s, &plans[i]);
  free(plans);
  if (ok && count > 0) {
    out->median_ms = median(samples, count);
    out->runs = count;
  }
  return ok && count > 0;
}

#endif /* TSR_TOOLS_OPENCL_HEADERS */
