/* SPDX-License-Identifier: Apache-2.0 */
/* hipBLASLt / rocBLAS baseline for bench's GEMM rows on HIP devices (see
 * hipblaslt.h). The HIP runtime is the plugin's declaration
 * (backends/hip/hip_api.h); the BLAS declarations below are ours, the types,
 * constants and entry points this file uses, with the values of the public
 * headers:
 * - hipBLASLt 0.6 and later (ROCm 6.0+; libhipblaslt.so.0, .so.1 from ROCm
 *   7): hipblaslt.h, hipblas-common.h (ROCm 6.3+; hipblas.h before, same
 *   values) and hip/library_types.h. hipBLASLt before 0.6 (ROCm 5.x, also
 *   libhipblaslt.so.0) had its own data and compute type values
 *   (HIPBLASLT_R_16F = 150, HIPBLASLT_COMPUTE_F32 = 300): it is refused by
 *   its version (hipblasLtGetVersion), never fed these.
 * - rocBLAS 3 and 4 (ROCm 5 and 6+; librocblas.so.3, .so.4):
 *   rocblas-types.h, rocblas-functions.h (rocblas_gemm_ex without the
 *   workspace arguments of rocBLAS 1, rocblas_int 32-bit: the LP64 build). */
#include "hipblaslt.h"
#include "vendor_blas.h"

#include "cublaslt.h"

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backends/hip/hip_api.h"
#include "common.h"

/* ---- hipBLASLt (the part used here) ---- */

typedef int hb_status; /* hipblasStatus_t: 0 is success */
typedef struct hb_algo {
  uint8_t data[16];
  size_t max_workspace_bytes;
} hb_algo;
typedef struct hb_heuristic {
  hb_algo algo;
  size_t workspace_size;
  hb_status state;
  float waves_count;
  int reserved[4];
} hb_heuristic;

enum {
  HB_R_32F = 0, /* hipDataType */
  HB_R_16F = 2,
  HB_R_16BF = 14,
  HB_COMPUTE_32F = 2,           /* hipblasComputeType_t */
  HB_COMPUTE_32F_FAST_TF32 = 6, /* xf32 on gfx94x (hipBLASLt maps it) */
  HB_OP_N = 111,                /* hipblasOperation_t */
  HB_OP_T = 112,
  HB_DESC_TRANSA = 0, /* hipblasLtMatmulDescAttributes_t */
  HB_DESC_TRANSB = 1,
  HB_PREF_MAX_WORKSPACE_BYTES = 1, /* hipblasLtMatmulPreferenceAttributes_t */
  HB_FIRST_VERSION = 600           /* 0.6.0 as hipblasLtGetVersion gives it */
};

typedef struct hb_api {
  void *library;
  hb_status (*create)(void **handle);
  hb_status (*destroy)(void *handle);
  hb_status (*get_version)(void *handle, int *version);
  hb_status (*desc_create)(void **desc, int compute_type, int scale_type);
  hb_status (*desc_destroy)(void *desc);
  hb_status (*desc_set)(void *desc, int attribute, const void *value, size_t size);
  hb_status (*layout_create)(void **layout, int type, uint64_t rows, uint64_t cols, int64_t ld);
  hb_status (*layout_destroy)(void *layout);
  hb_status (*preference_create)(void **preference);
  hb_status (*preference_destroy)(void *preference);
  hb_status (*preference_set)(void *preference, int attribute, const void *value, size_t size);
  hb_status (*heuristic)(void *handle, void *desc, void *a, void *b, void *c, void *d,
                         void *preference, int requested, hb_heuristic *results, int *returned);
  hb_status (*matmul)(void *handle, void *desc, const void *alpha, const void *a, void *a_layout,
                      const void *b, void *b_layout, const void *beta, const void *c,
                      void *c_layout, void *d, void *d_layout, const hb_algo *algo, void *workspace,
                      size_t workspace_size, hipStream_t stream);
} hb_api;

/* ---- rocBLAS (the part used here) ---- */

enum {
  RB_F16_R = 150, /* rocblas_datatype */
  RB_F32_R = 151,
  RB_BF16_R = 168,
  RB_OP_NONE = 111, /* rocblas_operation */
  RB_OP_TRANSPOSE = 112,
  RB_GEMM_ALGO_STANDARD = 0, /* rocblas_gemm_algo */
  RB_DEFAULT_MATH = 0,       /* rocblas_math_mode (rocBLAS 2.45+) */
  RB_XF32_XDL_MATH_OP = 1
};

typedef struct rb_api {
  void *library;
  int (*create)(void **handle);
  int (*destroy)(void *handle);
  int (*set_stream)(void *handle, hipStream_t stream);
  int (*gemm_ex)(void *handle, int trans_a, int trans_b, int32_t m, int32_t n, int32_t k,
                 const void *alpha, const void *a, int a_type, int32_t lda, const void *b,
                 int b_type, int32_t ldb, const void *beta, const void *c, int c_type, int32_t ldc,
                 void *d, int d_type, int32_t ldd, int compute_type, int algo,
                 int32_t solution_index, uint32_t flags);
  int (*set_math_mode)(void *handle, int mode);     /* optional */
  int (*version_string)(char *text, size_t length); /* optional */
} rb_api;

/* The workspace hipBLASLt's heuristic may use, as cuBLASLt gets. */
#define HIPBLASLT_WORKSPACE_BYTES ((size_t)32 << 20)

struct hipblaslt_session {
  hip_api hip;
  int ordinal;
  bool xf32; /* the device has xf32 (gfx94x): rocBLAS's math mode for tf32 rows */
  hipStream_t stream;
  hipEvent_t events[2 * TIMING_BATCH]; /* timing_sample's slots */
  bool lt;                             /* hipBLASLt; else rocBLAS */
  hb_api hb;
  void *hb_handle;
  void *workspace;
  rb_api rb;
  void *rb_handle;
  problem_allocator allocator;
  bool wrap_refused; /* tsr_buffer_wrap_hip failed once: plain buffers, copied */
  char description[1200];
};

/* ------------------------------------------------------------------------ */
/* Loading                                                                   */
/* ------------------------------------------------------------------------ */

/* The first of `names` the dynamic linker finds; `loaded` gets its name. */
static void *open_first(const char *const *names, size_t count, char *loaded, size_t capacity) {
  for (size_t i = 0; i < count; i++) {
    void *library = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (library != NULL) {
      snprintf(loaded, capacity, "%s", names[i]);
      return library;
    }
  }
  return NULL;
}

static const char *hip_error(const hipblaslt_session *s, hipError_t error) {
  static char number[32];
  const char *text = s->hip.hipGetErrorString ? s->hip.hipGetErrorString(error) : NULL;
  if (text != NULL)
    return text;
  snprintf(number, sizeof number, "HIP error %d", (int)error);
  return number;
}

/* The HIP runtime the plugin loads: TESSERA_HIP_RUNTIME, else the usual
 * sonames, newest first. */
static bool load_runtime(hip_api *hip, char *loaded, size_t loaded_capacity, char *why,
                         size_t why_capacity) {
  const char *named = getenv("TESSERA_HIP_RUNTIME");
  void *library = NULL;
  if (named != NULL && named[0] != '\0') {
    library = dlopen(named, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
      snprintf(why, why_capacity, "TESSERA_HIP_RUNTIME=%s: %s", named, dlerror());
      return false;
    }
    snprintf(loaded, loaded_capacity, "%s", named);
  } else {
    static const char *const names[] = {"libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5"};
    library = open_first(names, sizeof names / sizeof names[0], loaded, loaded_capacity);
    if (library == NULL) {
      snprintf(why, why_capacity,
               "no HIP runtime: libamdhip64.so.7, .so.6 and .so.5 not found by the dynamic "
               "linker (TESSERA_HIP_RUNTIME names another)");
      return false;
    }
  }
  const char *missing = hip_api_load(hip, library);
  if (missing != NULL) {
    snprintf(why, why_capacity, "%s lacks %s", loaded, missing);
    dlclose(library);
    return false;
  }
  return true;
}

/* hipBLASLt on the current device; false with the reason. */
static bool open_hipblaslt(hipblaslt_session *s, char *text, size_t text_capacity, char *why,
                           size_t why_capacity) {
  static const char *const names[] = {"libhipblaslt.so.1", "libhipblaslt.so.0"};
  char loaded[64];
  hb_api *hb = &s->hb;
  hb->library = open_first(names, sizeof names / sizeof names[0], loaded, sizeof loaded);
  if (hb->library == NULL) {
    snprintf(why, why_capacity, "libhipblaslt.so.1 and .so.0 not found by the dynamic linker");
    return false;
  }
  bool ok =
      vendor_blas_bind(hb->library, &hb->create, "hipblasLtCreate", loaded, why, why_capacity) &&
      vendor_blas_bind(hb->library, &hb->destroy, "hipblasLtDestroy", loaded, why, why_capacity) &&
      vendor_blas_bind(hb->library, &hb->get_version, "hipblasLtGetVersion", loaded, why,
                       why_capacity) &&
      vendor_blas_bind(hb->library, &hb->desc_create, "hipblasLtMatmulDescCreate", loaded, why,
                       why_capacity) &&
      vendor_blas_bind(hb->library, &hb->desc_destroy, "hipblasLtMatmulDescDestroy", loaded, why,
                       why_capacity) &&
      vendor_blas_bind(hb->library, &hb->desc_set, "hipblasLtMatmulDescSetAttribute", loaded, why,
                       why_capacity) &&
      vendor_blas_bind(hb->library, &hb->layout_create, "hipblasLtMatrixLayoutCreate", loaded, why,
                       why_capacity) &&
      vendor_blas_bind(hb->library, &hb->layout_destroy, "hipblasLtMatrixLayoutDestroy", loaded,
                       why, why_capacity) &&
      vendor_blas_bind(hb->library, &hb->preference_create, "hipblasLtMatmulPreferenceCreate",
                       loaded, why, why_capacity) &&
      vendor_blas_bind(hb->library, &hb->preference_destroy, "hipblasLtMatmulPreferenceDestroy",
                       loaded, why, why_capacity) &&
      vendor_blas_bind(hb->library, &hb->preference_set, "hipblasLtMatmulPreferenceSetAttribute",
                       loaded, why, why_capacity) &&
      vendor_blas_bind(hb->library, &hb->heuristic, "hipblasLtMatmulAlgoGetHeuristic", loaded, why,
                       why_capacity) &&
      vendor_blas_bind(hb->library, &hb->matmul, "hipblasLtMatmul", loaded, why, why_capacity);
  if (!ok)
    return false;
  hb_status status = hb->create(&s->hb_handle);
  if (status != 0) {
    s->hb_handle = NULL;
    snprintf(why, why_capacity, "hipblasLtCreate: status %d", status);
    return false;
  }
  int version = 0;
  status = hb->get_version(s->hb_handle, &version);
  if (status != 0 || version < HB_FIRST_VERSION) {
    snprintf(why, why_capacity,
             "%s is version %d.%d.%d: before 0.6 (ROCm 6.0) its type values differ from "
             "hipDataType's",
             loaded, version / 100000, version / 100 % 1000, version % 100);
    hb->destroy(s->hb_handle);
    s->hb_handle = NULL;
    return false;
  }
  hipError_t error = s->hip.hipMalloc(&s->workspace, HIPBLASLT_WORKSPACE_BYTES);
  if (error != hipSuccess) {
    s->workspace = NULL;
    snprintf(why, why_capacity, "hipMalloc of the workspace: %s", hip_error(s, error));
    hb->destroy(s->hb_handle);
    s->hb_handle = NULL;
    return false;
  }
  snprintf(text, text_capacity, "hipBLASLt %d.%d.%d (%s)", version / 100000, version / 100 % 1000,
           version % 100, loaded);
  return true;
}

/* rocBLAS on the current device, on the session's stream. */
static bool open_rocblas(hipblaslt_session *s, char *text, size_t text_capacity, char *why,
                         size_t why_capacity) {
  static const char *const names[] = {"librocblas.so.4", "librocblas.so.3"};
  char loaded[64];
  rb_api *rb = &s->rb;
  rb->library = open_first(names, sizeof names / sizeof names[0], loaded, sizeof loaded);
  if (rb->library == NULL) {
    snprintf(why, why_capacity, "librocblas.so.4 and .so.3 not found by the dynamic linker");
    return false;
  }
  bool ok =
      vendor_blas_bind(rb->library, &rb->create, "rocblas_create_handle", loaded, why,
                       why_capacity) &&
      vendor_blas_bind(rb->library, &rb->destroy, "rocblas_destroy_handle", loaded, why,
                       why_capacity) &&
      vendor_blas_bind(rb->library, &rb->set_stream, "rocblas_set_stream", loaded, why,
                       why_capacity) &&
      vendor_blas_bind(rb->library, &rb->gemm_ex, "rocblas_gemm_ex", loaded, why, why_capacity);
  if (!ok)
    return false;
  /* Optional: older rocBLAS has no math mode (tf32 rows then run f32). */
  void *address = dlsym(rb->library, "rocblas_set_math_mode");
  memcpy(&rb->set_math_mode, &address, sizeof address);
  address = dlsym(rb->library, "rocblas_get_version_string");
  memcpy(&rb->version_string, &address, sizeof address);
  int status = rb->create(&s->rb_handle);
  if (status == 0)
    status = rb->set_stream(s->rb_handle, s->stream);
  if (status != 0) {
    snprintf(why, why_capacity, "rocblas_create_handle / rocblas_set_stream: status %d", status);
    if (s->rb_handle != NULL)
      rb->destroy(s->rb_handle);
    s->rb_handle = NULL;
    return false;
  }
  char version[64] = "";
  if (rb->version_string != NULL && rb->version_string(version, sizeof version) != 0)
    version[0] = '\0';
  snprintf(text, text_capacity, "rocBLAS%s%s (%s)", version[0] ? " " : "", version, loaded);
  return true;
}

/* ------------------------------------------------------------------------ */
/* Session                                                                   */
/* ------------------------------------------------------------------------ */

/* The HIP ordinal of the tessera device: the one at the PCI address its
 * details give ("PCI: dddd:bb:dd"), as cublaslt.c matches by UUID; where
 * none does, its backend index (both plugins see HIP_VISIBLE_DEVICES). */
static int find_ordinal(const hipblaslt_session *s, const tsr_device_info *info, int count,
                        char *how, size_t how_capacity) {
  const char *pci = strstr(info->details, "PCI: ");
  unsigned domain = 0, bus = 0, device = 0;
  if (pci != NULL && sscanf(pci + 5, "%x:%x:%x", &domain, &bus, &device) == 3) {
    for (int i = 0; i < count; i++) {
      int d = -1, b = -1, v = -1;
      if (s->hip.hipDeviceGetAttribute(&d, hipDeviceAttributePciDomainID, i) == hipSuccess &&
          s->hip.hipDeviceGetAttribute(&b, hipDeviceAttributePciBusId, i) == hipSuccess &&
          s->hip.hipDeviceGetAttribute(&v, hipDeviceAttributePciDeviceId, i) == hipSuccess &&
          (unsigned)d == domain && (unsigned)b == bus && (unsigned)v == device) {
        snprintf(how, how_capacity, "PCI %04x:%02x:%02x", domain, bus, device);
        return i;
      }
    }
  }
  snprintf(how, how_capacity, "by index: no PCI address matched");
  return (int)info->backend_index;
}

/* The problem's buffers in this module's hipMalloc memory, wrapped as
 * tessera buffers (tsr_buffer_wrap_hip), so both run on the same memory;
 * where the plugin refuses the wrap, tessera's own buffers (address 0),
 * which hipblaslt_time copies. */
static tsr_status allocator_create(void *user, tsr_device *device, size_t bytes,
                                   tsr_buffer **buffer, uint64_t *address) {
  hipblaslt_session *s = user;
  *buffer = NULL;
  *address = 0;
  if (!s->wrap_refused) {
    void *pointer = NULL;
    s->hip.hipSetDevice(s->ordinal);
    hipError_t result = s->hip.hipMalloc(&pointer, bytes ? bytes : 1);
    if (result != hipSuccess) {
      cli_error("hipMalloc(%zu): %s", bytes, hip_error(s, result));
      return TSR_ERROR_OUT_OF_MEMORY;
    }
    if (tsr_buffer_wrap_hip(device, (uint64_t)(uintptr_t)pointer, bytes, buffer) == TSR_OK) {
      *address = (uint64_t)(uintptr_t)pointer;
      return TSR_OK;
    }
    s->hip.hipFree(pointer);
    s->wrap_refused = true;
    *buffer = NULL;
  }
  return tsr_buffer_create(device, bytes, buffer);
}

static void allocator_release(void *user, uint64_t address) {
  hipblaslt_session *s = user;
  s->hip.hipSetDevice(s->ordinal);
  s->hip.hipFree((void *)(uintptr_t)address);
}

void hipblaslt_close(hipblaslt_session *s) {
  if (s == NULL)
    return;
  if (s->hip.hipSetDevice != NULL)
    s->hip.hipSetDevice(s->ordinal);
  if (s->hb_handle != NULL)
    s->hb.destroy(s->hb_handle);
  if (s->rb_handle != NULL)
    s->rb.destroy(s->rb_handle);
  if (s->workspace != NULL)
    s->hip.hipFree(s->workspace);
  for (int i = 0; i < 2 * TIMING_BATCH; i++)
    if (s->events[i] != NULL)
      s->hip.hipEventDestroy(s->events[i]);
  if (s->stream != NULL)
    s->hip.hipStreamDestroy(s->stream);
  /* The libraries stay loaded: the plugin shares the runtime, and unloading
   * the BLAS libraries' runtimes at exit is not worth the risk. */
  free(s);
}

hipblaslt_session *hipblaslt_open(const tsr_device_info *info, char *why, size_t why_capacity) {
  why[0] = '\0';
  if (strcmp(info->backend, "hip") != 0) {
    snprintf(why, why_capacity, "not a HIP device");
    return NULL;
  }
  hipblaslt_session *s = calloc(1, sizeof *s);
  if (s == NULL) {
    snprintf(why, why_capacity, "out of host memory");
    return NULL;
  }
  char runtime[256];
  if (!load_runtime(&s->hip, runtime, sizeof runtime, why, why_capacity)) {
    free(s);
    return NULL;
  }
  int count = 0;
  const char *call = "hipInit";
  hipError_t error = s->hip.hipInit(0);
  if (error == hipSuccess) {
    call = "hipGetDeviceCount";
    error = s->hip.hipGetDeviceCount(&count);
  }
  if (error != hipSuccess) {
    snprintf(why, why_capacity, "%s: %s: %s (%d)", runtime, call, hip_error(s, error), (int)error);
    free(s);
    return NULL;
  }
  char how[64];
  s->ordinal = find_ordinal(s, info, count, how, sizeof how);
  if (s->ordinal < 0 || s->ordinal >= count) {
    snprintf(why, why_capacity, "no HIP device %d for %s (%d found)", s->ordinal, info->selector,
             count);
    free(s);
    return NULL;
  }
  s->xf32 = strncmp(info->arch, "gfx94", 5) == 0;
  error = s->hip.hipSetDevice(s->ordinal);
  if (error == hipSuccess)
    error = s->hip.hipStreamCreateWithFlags(&s->stream, hipStreamNonBlocking);
  for (int i = 0; i < 2 * TIMING_BATCH && error == hipSuccess; i++)
    error = s->hip.hipEventCreateWithFlags(&s->events[i], hipEventDefault);
  if (error != hipSuccess) {
    snprintf(why, why_capacity, "HIP stream and events on device %d: %s", s->ordinal,
             hip_error(s, error));
    hipblaslt_close(s);
    return NULL;
  }
  /* hipBLASLt first (what AMD tunes for LLM GEMMs), else rocBLAS. */
  char library[512], hb_why[256], rb_why[256];
  s->lt = open_hipblaslt(s, library, sizeof library, hb_why, sizeof hb_why);
  if (!s->lt && !open_rocblas(s, library, sizeof library, rb_why, sizeof rb_why)) {
    snprintf(why, why_capacity, "hipBLASLt: %s; rocBLAS: %s", hb_why, rb_why);
    hipblaslt_close(s);
    return NULL;
  }
  if (!s->lt) { /* say why not hipBLASLt */
    size_t used = strlen(library);
    snprintf(library + used, sizeof library - used, "; not hipBLASLt: %s", hb_why);
  }
  int version = 0;
  if (s->hip.hipRuntimeGetVersion == NULL || s->hip.hipRuntimeGetVersion(&version) != hipSuccess)
    version = 0;
  snprintf(s->description, sizeof s->description, "%s, HIP runtime %d (%s), device %d (%s)",
           library, version, runtime, s->ordinal, how);
  s->allocator = (problem_allocator){allocator_create, allocator_release, s};
  return s;
}

const char *hipblaslt_name(const hipblaslt_session *s) {
  return s->lt ? "hipBLASLt" : "rocBLAS";
}

const char *hipblaslt_describe(const hipblaslt_session *s) {
  return s->description;
}

const problem_allocator *hipblaslt_allocator(hipblaslt_session *s) {
  return &s->allocator;
}

bool hipblaslt_handles(const problem_spec *spec) {
  /* The same problems as cuBLASLt's: no epilogue, alpha 1, one batch, in
   * one call the way tessera's row does. */
  return cublaslt_handles(spec);
}

/* ------------------------------------------------------------------------ */
/* One GEMM in column-major terms                                            */
/* ------------------------------------------------------------------------ */

/* Both libraries are column-major. tessera's row-major D[M,N] = A[M,K] B[K,N]
 * is, read column-major, D^T[N,M] = B^T[N,K] A^T[K,M]: the library's first
 * operand is tessera's b, its second tessera's a, its m = N, n = M. */
typedef struct cm_operand {
  int64_t rows, cols; /* of the matrix as stored, column-major */
  int64_t ld;
  bool transposed; /* the library applies op T to it */
} cm_operand;

/* tessera's view X [R, C] as the column-major operand X^T (C x R): a view
 * with unit stride along C is stored as X^T already (op N, ld = row
 * stride); one with unit stride along R is X itself stored column-major
 * (op T, ld = column stride). A dimension of extent 1 counts as either. */
static bool column_major_of(const tsr_tensor *v, cm_operand *out) {
  int last = v->rank - 1;
  int64_t r = v->shape[last - 1], c = v->shape[last];
  int64_t sr = v->strides[last - 1], sc = v->strides[last];
  if (sc == 1 || c == 1) {
    *out = (cm_operand){c, r, r > 1 ? sr : c, false};
    return out->ld >= c && out->ld >= 1;
  }
  if (sr == 1 || r == 1) {
    *out = (cm_operand){r, c, c > 1 ? sc : r, true};
    return out->ld >= r && out->ld >= 1;
  }
  return false;
}

typedef struct cm_call {
  cm_operand a, b; /* the library's operands: tessera's b, then a */
  int64_t m, n, k, ldd;
  const void *a_ptr, *b_ptr;
  void *d_ptr;
  int hb_type, rb_type;
  bool tf32;
  /* hipBLASLt's descriptors and algorithm */
  void *desc, *a_layout, *b_layout, *d_layout;
  hb_algo algo;
  size_t workspace;
  bool fell_back; /* xf32 asked, no such algorithm: f32 compute */
} cm_call;

static void call_destroy(const hipblaslt_session *s, cm_call *c) {
  if (c->a_layout != NULL)
    s->hb.layout_destroy(c->a_layout);
  if (c->b_layout != NULL)
    s->hb.layout_destroy(c->b_layout);
  if (c->d_layout != NULL)
    s->hb.layout_destroy(c->d_layout);
  if (c->desc != NULL)
    s->hb.desc_destroy(c->desc);
  c->desc = c->a_layout = c->b_layout = c->d_layout = NULL;
}

/* hipBLASLt's descriptors and its heuristic's first algorithm for `c` with
 * the compute type; false (nothing held) on failure. */
static bool lt_prepare(const hipblaslt_session *s, cm_call *c, int compute, char *error,
                       size_t capacity) {
  const hb_api *hb = &s->hb;
  hb_status status = hb->desc_create(&c->desc, compute, HB_R_32F);
  int32_t op_a = c->a.transposed ? HB_OP_T : HB_OP_N, op_b = c->b.transposed ? HB_OP_T : HB_OP_N;
  if (status == 0)
    status = hb->desc_set(c->desc, HB_DESC_TRANSA, &op_a, sizeof op_a);
  if (status == 0)
    status = hb->desc_set(c->desc, HB_DESC_TRANSB, &op_b, sizeof op_b);
  if (status == 0)
    status = hb->layout_create(&c->a_layout, c->hb_type, (uint64_t)c->a.rows, (uint64_t)c->a.cols,
                               c->a.ld);
  if (status == 0)
    status = hb->layout_create(&c->b_layout, c->hb_type, (uint64_t)c->b.rows, (uint64_t)c->b.cols,
                               c->b.ld);
  if (status == 0)
    status = hb->layout_create(&c->d_layout, c->hb_type, (uint64_t)c->m, (uint64_t)c->n, c->ldd);
  if (status != 0) {
    snprintf(error, capacity, "hipBLASLt descriptors: status %d", status);
    call_destroy(s, c);
    return false;
  }
  void *preference = NULL;
  uint64_t workspace = HIPBLASLT_WORKSPACE_BYTES;
  status = hb->preference_create(&preference);
  if (status == 0)
    status =
        hb->preference_set(preference, HB_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace);
  /* Room past the one result asked for: a library whose result struct grew
   * must not write past ours. */
  hb_heuristic results[4];
  memset(results, 0, sizeof results);
  int returned = 0;
  if (status == 0)
    status = hb->heuristic(s->hb_handle, c->desc, c->a_layout, c->b_layout, c->d_layout,
                           c->d_layout, preference, 1, results, &returned);
  if (preference != NULL)
    hb->preference_destroy(preference);
  if (status != 0 || returned < 1) {
    snprintf(error, capacity, "hipblasLtMatmulAlgoGetHeuristic: status %d, %d algorithms", status,
             returned);
    call_destroy(s, c);
    return false;
  }
  c->algo = results[0].algo;
  c->workspace = results[0].workspace_size;
  return true;
}

/* Sets up D = A B for tessera views a [M,K], b [K,N], d [M,N] (row-major
 * d) at this module's device addresses. */
static bool call_create(const hipblaslt_session *s, const tsr_tensor *a, const char *a_base,
                        const tsr_tensor *b, const char *b_base, const tsr_tensor *d, char *d_base,
                        bool tf32, cm_call *c, char *error, size_t capacity) {
  memset(c, 0, sizeof *c);
  if (!column_major_of(b, &c->a) || !column_major_of(a, &c->b)) {
    snprintf(error, capacity, "an operand has no unit stride");
    return false;
  }
  int last = d->rank - 1;
  int64_t rows = d->shape[last - 1], cols = d->shape[last];
  if (d->strides[last] != 1 && cols > 1) {
    snprintf(error, capacity, "d has no unit column stride");
    return false;
  }
  c->m = cols;
  c->n = rows;
  c->k = a->shape[a->rank - 1];
  c->ldd = rows > 1 ? d->strides[last - 1] : cols;
  if (c->ldd < cols || c->ldd < 1) {
    snprintf(error, capacity, "d's rows overlap");
    return false;
  }
  c->a_ptr = b_base + b->offset;
  c->b_ptr = a_base + a->offset;
  c->d_ptr = d_base + d->offset;
  c->tf32 = tf32;
  c->hb_type = d->dtype == TSR_DTYPE_BF16  ? HB_R_16BF
               : d->dtype == TSR_DTYPE_F16 ? HB_R_16F
                                           : HB_R_32F;
  c->rb_type = d->dtype == TSR_DTYPE_BF16  ? RB_BF16_R
               : d->dtype == TSR_DTYPE_F16 ? RB_F16_R
                                           : RB_F32_R;
  if (!s->lt) {
    /* rocblas_int is 32-bit. */
    int64_t largest = c->m > c->n ? c->m : c->n;
    largest = c->k > largest ? c->k : largest;
    largest = c->a.ld > largest ? c->a.ld : largest;
    largest = c->b.ld > largest ? c->b.ld : largest;
    largest = c->ldd > largest ? c->ldd : largest;
    if (largest > INT32_MAX) {
      snprintf(error, capacity, "a size beyond rocBLAS's 32-bit integers");
      return false;
    }
    return true;
  }
  if (tf32 && lt_prepare(s, c, HB_COMPUTE_32F_FAST_TF32, error, capacity))
    return true;
  /* No xf32 algorithm (an arch without it): the strict f32 one, noted. */
  c->fell_back = tf32;
  return lt_prepare(s, c, HB_COMPUTE_32F, error, capacity);
}

static bool call_run(const hipblaslt_session *s, const cm_call *c, char *error, size_t capacity) {
  const float alpha = 1.0f, beta = 0.0f;
  if (s->lt) {
    hb_status status =
        s->hb.matmul(s->hb_handle, c->desc, &alpha, c->a_ptr, c->a_layout, c->b_ptr, c->b_layout,
                     &beta, c->d_ptr, c->d_layout, c->d_ptr, c->d_layout, &c->algo, s->workspace,
                     HIPBLASLT_WORKSPACE_BYTES, s->stream);
    if (status != 0)
      snprintf(error, capacity, "hipblasLtMatmul: status %d", status);
    return status == 0;
  }
  int status = 0;
  if (s->rb.set_math_mode != NULL)
    status = s->rb.set_math_mode(s->rb_handle,
                                 c->tf32 && s->xf32 ? RB_XF32_XDL_MATH_OP : RB_DEFAULT_MATH);
  if (status == 0)
    status =
        s->rb.gemm_ex(s->rb_handle, c->a.transposed ? RB_OP_TRANSPOSE : RB_OP_NONE,
                      c->b.transposed ? RB_OP_TRANSPOSE : RB_OP_NONE, (int32_t)c->m, (int32_t)c->n,
                      (int32_t)c->k, &alpha, c->a_ptr, c->rb_type, (int32_t)c->a.ld, c->b_ptr,
                      c->rb_type, (int32_t)c->b.ld, &beta, c->d_ptr, c->rb_type, (int32_t)c->ldd,
                      c->d_ptr, c->rb_type, (int32_t)c->ldd, RB_F32_R, RB_GEMM_ALGO_STANDARD, 0, 0);
  if (status != 0)
    snprintf(error, capacity, "rocblas_gemm_ex: status %d", status);
  return status == 0;
}

/* ------------------------------------------------------------------------ */
/* A problem's calls on this module's copies                                 */
/* ------------------------------------------------------------------------ */

/* Where a problem's buffers a, b and d are for the library: the allocator's
 * memory that tessera wrapped (the same buffers), else copies into this
 * module's memory (owned): the same bytes at the same offsets, so tessera's
 * views address either. */
typedef struct mirror {
  char *a, *b, *d;
  bool owned[3];
} mirror;

/* The calls of one problem: one for a GEMM, one per non-empty group for a
 * grouped GEMM (a [T,K] split by rows, b [G,K,N], d [T,N]). */
typedef struct cm_plan {
  int count;
  cm_call calls[PROBLEM_MAX_GROUPS];
  mirror memory;
} cm_plan;

static void plan_destroy(const hipblaslt_session *s, cm_plan *plan) {
  for (int i = 0; i < plan->count; i++)
    call_destroy(s, &plan->calls[i]);
  plan->count = 0;
  char *held[3] = {plan->memory.a, plan->memory.b, plan->memory.d};
  for (int i = 0; i < 3; i++)
    if (held[i] != NULL && plan->memory.owned[i])
      s->hip.hipFree(held[i]);
  memset(&plan->memory, 0, sizeof plan->memory);
}

/* The device address of tensor `t`'s whole buffer: the allocator's, else
 * a copy (`owned`) rounded to 4 bytes (for the memset), holding its
 * contents when `copy` (through `staging`). */
static bool mirror_tensor(const hipblaslt_session *s, const problem_tensor *t, tsr_queue *queue,
                          bool copy, unsigned char **staging, size_t *staging_bytes, char **out,
                          bool *owned, char *error, size_t capacity) {
  if (t->device_address != 0) {
    *out = (char *)(uintptr_t)t->device_address;
    *owned = false;
    return true;
  }
  size_t bytes = 0;
  if (tsr_buffer_size(t->view.buffer, &bytes) != TSR_OK) {
    snprintf(error, capacity, "the size of %s's buffer: %s", t->name, tsr_last_error());
    return false;
  }
  size_t rounded = (bytes + 3) & ~(size_t)3;
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
  s->hip.hipSetDevice(s->ordinal); /* the plugin may have made another current */
  void *pointer = NULL;
  hipError_t result = s->hip.hipMalloc(&pointer, rounded);
  if (result != hipSuccess) {
    snprintf(error, capacity, "hipMalloc(%zu) for a copy of %s: %s", rounded, t->name,
             hip_error(s, result));
    return false;
  }
  *out = pointer;
  *owned = true;
  /* d starts at 0: beta is 0, but a NaN left in fresh memory must not
   * depend on whether the library reads C. */
  result = copy ? s->hip.hipMemcpyHtoDAsync(pointer, *staging, bytes, s->stream)
                : s->hip.hipMemsetD32Async(pointer, 0, rounded / 4, s->stream);
  if (result == hipSuccess)
    result = s->hip.hipStreamSynchronize(s->stream);
  if (result != hipSuccess) {
    snprintf(error, capacity, "copying %s to the device: %s", t->name, hip_error(s, result));
    return false;
  }
  return true;
}

static bool plan_create(const hipblaslt_session *s, const problem *p, tsr_queue *queue,
                        unsigned char **staging, size_t *staging_bytes, cm_plan *plan, char *error,
                        size_t capacity) {
  memset(plan, 0, sizeof *plan);
  const problem_tensor *a = vendor_blas_tensor(p, "a"), *b = vendor_blas_tensor(p, "b"),
                       *d = vendor_blas_tensor(p, "d");
  if (a == NULL || b == NULL || d == NULL || a->alias >= 0 || b->alias >= 0 || d->alias >= 0) {
    snprintf(error, capacity, "the problem has no separate a, b and d buffers");
    return false;
  }
  mirror *m = &plan->memory;
  if (!mirror_tensor(s, a, queue, true, staging, staging_bytes, &m->a, &m->owned[0], error,
                     capacity) ||
      !mirror_tensor(s, b, queue, true, staging, staging_bytes, &m->b, &m->owned[1], error,
                     capacity) ||
      !mirror_tensor(s, d, queue, false, staging, staging_bytes, &m->d, &m->owned[2], error,
                     capacity)) {
    plan_destroy(s, plan);
    return false;
  }
  bool tf32 = p->spec.op == TSR_OP_GEMM && p->spec.dtype == TSR_DTYPE_F32 &&
              p->spec.gemm.compute == TSR_COMPUTE_TF32;
  vendor_blas_gemm gemms[PROBLEM_MAX_GROUPS];
  int count = vendor_blas_gemms(p, &a->view, &b->view, &d->view, gemms);
  for (int i = 0; i < count; i++) {
    if (!call_create(s, &gemms[i].a, plan->memory.a, &gemms[i].b, plan->memory.b, &gemms[i].d,
                     plan->memory.d, tf32, &plan->calls[i], error, capacity)) {
      plan_destroy(s, plan);
      return false;
    }
    plan->count++;
  }
  return true;
}

static bool plan_run(const hipblaslt_session *s, const cm_plan *plan, char *error,
                     size_t capacity) {
  for (int i = 0; i < plan->count; i++)
    if (!call_run(s, &plan->calls[i], error, capacity))
      return false;
  return true;
}

/* ------------------------------------------------------------------------ */
/* Timing                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct runner {
  const hipblaslt_session *s;
  const cm_plan *plans;
  int set_count;
  hipblaslt_timing *out;
} runner;

static bool runner_run(void *context, int i) {
  runner *w = context;
  return plan_run(w->s, &w->plans[i % w->set_count], w->out->error, sizeof w->out->error);
}

static bool runner_finish(void *context) {
  runner *w = context;
  hipError_t result = w->s->hip.hipStreamSynchronize(w->s->stream);
  if (result != hipSuccess)
    snprintf(w->out->error, sizeof w->out->error, "%s stream failed in the warm-up: %s",
             hipblaslt_name(w->s), hip_error(w->s, result));
  return result == hipSuccess;
}

/* timing_sample's events: the session's slots on its stream. */
static bool runner_record(void *context, int slot) {
  runner *w = context;
  hipError_t result = w->s->hip.hipEventRecord(w->s->events[slot], w->s->stream);
  if (result != hipSuccess)
    snprintf(w->out->error, sizeof w->out->error, "timing %s: %s", hipblaslt_name(w->s),
             hip_error(w->s, result));
  return result == hipSuccess;
}

static bool runner_elapsed(void *context, int from, int to, double *ms) {
  runner *w = context;
  float elapsed = 0.0f;
  hipError_t result = w->s->hip.hipEventSynchronize(w->s->events[to]);
  if (result == hipSuccess)
    result = w->s->hip.hipEventElapsedTime(&elapsed, w->s->events[from], w->s->events[to]);
  if (result != hipSuccess)
    snprintf(w->out->error, sizeof w->out->error, "timing %s: %s", hipblaslt_name(w->s),
             hip_error(w->s, result));
  *ms = elapsed;
  return result == hipSuccess;
}

/* ||x - y|| / ||y|| over `count` elements of two host copies of d. */
static double normwise_difference(const unsigned char *x, const unsigned char *y, tsr_dtype dtype,
                                  int64_t count) {
  double squared = 0.0, reference = 0.0;
  for (int64_t i = 0; i < count; i++) {
    double u = dtype_load(x, dtype, i), v = dtype_load(y, dtype, i);
    squared += (u - v) * (u - v);
    reference += v * v;
  }
  if (reference > 0.0)
    return sqrt(squared / reference);
  return squared > 0.0 ? INFINITY : 0.0;
}

/* Runs sets[0]'s plan once and compares its d with tessera's. */
static bool compare_with_tessera(const hipblaslt_session *s, const problem *p, const cm_plan *plan,
                                 tsr_queue *queue, hipblaslt_timing *out) {
  const problem_tensor *d = vendor_blas_tensor(p, "d");
  size_t bytes = (size_t)d->numel * tsr_dtype_size(d->view.dtype);
  unsigned char *mine = malloc(bytes ? bytes : 1), *theirs = malloc(bytes ? bytes : 1);
  bool ok = mine != NULL && theirs != NULL;
  if (!ok)
    snprintf(out->error, sizeof out->error, "out of host memory");
  if (ok && tsr_buffer_read(queue, d->view.buffer, d->view.offset, mine, bytes) != TSR_OK) {
    snprintf(out->error, sizeof out->error, "reading tessera's d: %s", tsr_last_error());
    ok = false;
  }
  if (ok) {
    s->hip.hipSetDevice(s->ordinal);
    ok = plan_run(s, plan, out->error, sizeof out->error);
  }
  if (ok) {
    hipError_t result =
        s->hip.hipMemcpyDtoHAsync(theirs, plan->memory.d + d->view.offset, bytes, s->stream);
    if (result == hipSuccess)
      result = s->hip.hipStreamSynchronize(s->stream);
    if (result != hipSuccess) {
      snprintf(out->error, sizeof out->error, "%s run: %s", hipblaslt_name(s),
               hip_error(s, result));
      ok = false;
    } else {
      out->difference = normwise_difference(theirs, mine, d->view.dtype, d->numel);
    }
  }
  free(mine);
  free(theirs);
  return ok;
}

bool hipblaslt_time(hipblaslt_session *s, problem *sets, int set_count, tsr_queue *queue,
                    const timing_plan *plan, hipblaslt_timing *out) {
  memset(out, 0, sizeof *out);
  out->median_ms = NAN;
  out->difference = NAN;
  if (!hipblaslt_handles(&sets[0].spec)) {
    snprintf(out->error, sizeof out->error, "not a plain GEMM");
    return false;
  }
  if (tsr_queue_finish(queue) != TSR_OK) { /* tessera is done with the buffers */
    snprintf(out->error, sizeof out->error, "tsr_queue_finish: %s", tsr_last_error());
    return false;
  }
  cm_plan *plans = calloc(3, sizeof *plans); /* a few hundred KiB: not on the stack */
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
    const cm_call *first = &plans[0].calls[0];
    const char *compute = !first->tf32       ? "f32"
                          : first->fell_back ? "f32: no xf32 algorithm"
                          : s->lt || s->xf32 ? "xf32"
                                             : "f32: no xf32 here";
    const char *where = plans[0].memory.owned[0] ? "copies" : "same buffers";
    if (s->lt)
      snprintf(out->algo, sizeof out->algo, "%d call%s, workspace %zu KiB, %s compute, %s",
               plans[0].count, plans[0].count == 1 ? "" : "s", first->workspace >> 10, compute,
               where);
    else
      snprintf(out->algo, sizeof out->algo, "%d call%s, rocblas_gemm_ex standard, %s compute, %s",
               plans[0].count, plans[0].count == 1 ? "" : "s", compute, where);
    ok = compare_with_tessera(s, &sets[0], &plans[0], queue, out);
  }

  /* The same plan as tessera's (time_problem), its warm-up included, so
   * both sides meet the GPU in the same state. */
  double samples[TIMING_MAX_SAMPLES];
  int count = 0;
  runner warm = {s, plans, set_count, out};
  if (ok)
    ok = timing_warm_up(plan, set_count, runner_run, runner_finish, &warm);
  timing_ops ops = {&warm, runner_run, runner_record, runner_elapsed};
  if (ok)
    ok = timing_sample(plan, set_count, &ops, samples, &count);
  if (ok && s->hip.hipStreamSynchronize(s->stream) != hipSuccess) {
    snprintf(out->error, sizeof out->error, "%s stream failed", hipblaslt_name(s));
    ok = false;
  }
  if (!ok)
    s->hip.hipStreamSynchronize(s->stream); /* nothing queued may outlive the copies */
  for (int i = 0; i < made; i++)
    plan_destroy(s, &plans[i]);
  free(plans);
  if (ok && count > 0) {
    out->median_ms = median(samples, count);
    out->runs = count;
  }
  return ok && count > 0;
}
