/* SPDX-License-Identifier: Apache-2.0 */
/* cuBLASLt baseline for bench's GEMM rows on CUDA devices (see cublaslt.h
 * and docs/PERFORMANCE.md). The CUDA driver API is the plugin's declaration
 * (backends/cuda/cuda_api.h); the cuBLASLt declarations below are ours: the
 * types, constants and entry points this file uses, with the values of the
 * public headers (CUDA 12 and 13). */
#include "cublaslt.h"
#include "vendor_blas.h"

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../backends/cuda/cuda_api.h"
#include "common.h"

/* ---- cuBLASLt (the part used here) ---- */

typedef int lt_status; /* cublasStatus_t: 0 is success */
typedef struct lt_context_opaque *lt_handle;
typedef struct lt_matmul_desc_opaque *lt_matmul_desc;
typedef struct lt_layout_opaque *lt_layout;
typedef struct lt_preference_opaque *lt_preference;
typedef struct lt_algo {
  uint64_t data[8];
} lt_algo;
typedef struct lt_heuristic {
  lt_algo algo;
  size_t workspace_size;
  lt_status state;
  float waves_count;
  int reserved[4];
} lt_heuristic;

enum {
  LT_R_32F = 0, /* cudaDataType_t */
  LT_R_16F = 2,
  LT_R_16BF = 14,
  LT_COMPUTE_32F = 68, /* cublasComputeType_t */
  LT_COMPUTE_32F_FAST_TF32 = 77,
  LT_OP_N = 0, /* cublasOperation_t */
  LT_OP_T = 1,
  LT_DESC_TRANSA = 3, /* cublasLtMatmulDescAttributes_t */
  LT_DESC_TRANSB = 4,
  LT_PREF_MAX_WORKSPACE_BYTES = 1 /* cublasLtMatmulPreferenceAttributes_t */
};

typedef struct lt_api {
  void *library;
  lt_status (*create)(lt_handle *handle);
  lt_status (*destroy)(lt_handle handle);
  size_t (*get_version)(void);
  lt_status (*desc_create)(lt_matmul_desc *desc, int compute_type, int scale_type);
  lt_status (*desc_destroy)(lt_matmul_desc desc);
  lt_status (*desc_set)(lt_matmul_desc desc, int attribute, const void *value, size_t size);
  lt_status (*layout_create)(lt_layout *layout, int type, uint64_t rows, uint64_t cols, int64_t ld);
  lt_status (*layout_destroy)(lt_layout layout);
  lt_status (*preference_create)(lt_preference *preference);
  lt_status (*preference_destroy)(lt_preference preference);
  lt_status (*preference_set)(lt_preference preference, int attribute, const void *value,
                              size_t size);
  lt_status (*heuristic)(lt_handle handle, lt_matmul_desc desc, lt_layout a, lt_layout b,
                         lt_layout c, lt_layout d, lt_preference preference, int requested,
                         lt_heuristic *results, int *returned);
  lt_status (*matmul)(lt_handle handle, lt_matmul_desc desc, const void *alpha, const void *a,
                      lt_layout a_layout, const void *b, lt_layout b_layout, const void *beta,
                      const void *c, lt_layout c_layout, void *d, lt_layout d_layout,
                      const lt_algo *algo, void *workspace, size_t workspace_size, CUstream stream);
} lt_api;

/* cuBLAS recommends 32 MiB of workspace on Hopper. */
#define CUBLASLT_WORKSPACE_BYTES ((size_t)32 << 20)

struct cublaslt_session {
  cuda_api cu;
  lt_api lt;
  CUdevice device;
  CUcontext context;
  bool context_retained;
  CUstream stream;
  CUevent events[2 * TIMING_BATCH]; /* timing_sample's slots */
  lt_handle handle;
  CUdeviceptr workspace;
  problem_allocator allocator;
  tsr_device *allocating_on; /* unused; the allocator gets the device per call */
  char description[1200];
};

/* ------------------------------------------------------------------------ */
/* Loading                                                                   */
/* ------------------------------------------------------------------------ */

static void *symbol(void *library, const char *name, const char *fallback) {
  void *s = dlsym(library, name);
  if (s == NULL && fallback != NULL)
    s = dlsym(library, fallback);
  return s;
}

#define BIND(api, field, name, fallback)                                                           \
  do {                                                                                             \
    *(void **)&(api)->field = symbol((api)->library, name, fallback);                              \
    if ((api)->field == NULL) {                                                                    \
      snprintf(why, why_capacity, "%s lacks %s", what, name);                                      \
      return false;                                                                                \
    }                                                                                              \
  } while (0)

static bool load_driver(cuda_api *cu, char *why, size_t why_capacity) {
  memset(cu, 0, sizeof *cu);
  const char *what = getenv("TESSERA_CUDA_DRIVER");
  if (what == NULL || what[0] == '\0')
    what = "libcuda.so.1";
  void *library = dlopen(what, RTLD_NOW | RTLD_LOCAL);
  if (library == NULL) {
    snprintf(why, why_capacity, "no CUDA driver (%s): %s", what, dlerror());
    return false;
  }
  const char *missing = cuda_api_load(cu, library);
  if (!missing && !cu->cuMemcpyDtoH)
    missing = "cuMemcpyDtoH_v2";
  if (missing) {
    snprintf(why, why_capacity, "%s lacks %s", what, missing);
    memset(cu, 0, sizeof *cu);
    dlclose(library);
    return false;
  }
  return true;
}

static bool bind_cublaslt(lt_api *lt, const char *what, char *why, size_t why_capacity) {
  BIND(lt, create, "cublasLtCreate", NULL);
  BIND(lt, destroy, "cublasLtDestroy", NULL);
  BIND(lt, get_version, "cublasLtGetVersion", NULL);
  BIND(lt, desc_create, "cublasLtMatmulDescCreate", NULL);
  BIND(lt, desc_destroy, "cublasLtMatmulDescDestroy", NULL);
  BIND(lt, desc_set, "cublasLtMatmulDescSetAttribute", NULL);
  BIND(lt, layout_create, "cublasLtMatrixLayoutCreate", NULL);
  BIND(lt, layout_destroy, "cublasLtMatrixLayoutDestroy", NULL);
  BIND(lt, preference_create, "cublasLtMatmulPreferenceCreate", NULL);
  BIND(lt, preference_destroy, "cublasLtMatmulPreferenceDestroy", NULL);
  BIND(lt, preference_set, "cublasLtMatmulPreferenceSetAttribute", NULL);
  BIND(lt, heuristic, "cublasLtMatmulAlgoGetHeuristic", NULL);
  BIND(lt, matmul, "cublasLtMatmul", NULL);
  return true;
}

void *cublaslt_load_library(char *loaded, size_t loaded_capacity, char *why, size_t why_capacity) {
  loaded[0] = '\0';
  why[0] = '\0';
  const char *path = getenv("TESSERA_CUBLASLT");
  char candidate[1024];
  if (path != NULL && path[0] != '\0') {
    /* A directory holds the library under one of its usual names. */
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
      static const char *const names[] = {"libcublasLt.so.13", "libcublasLt.so.12",
                                          "libcublasLt.so"};
      for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(candidate, sizeof candidate, "%s/%s", path, names[i]);
        void *library = dlopen(candidate, RTLD_NOW | RTLD_LOCAL);
        if (library != NULL) {
          snprintf(loaded, loaded_capacity, "%s", candidate);
          return library;
        }
      }
      snprintf(why, why_capacity, "TESSERA_CUBLASLT=%s: no libcublasLt.so.13/.12/.so there", path);
      return NULL;
    }
    void *library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL)
      snprintf(why, why_capacity, "TESSERA_CUBLASLT=%s: %s", path, dlerror());
    else
      snprintf(loaded, loaded_capacity, "%s", path);
    return library;
  }
  static const char *const names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    void *library = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (library != NULL) {
      snprintf(loaded, loaded_capacity, "%s", names[i]);
      return library;
    }
  }
  snprintf(why, why_capacity,
           "libcublasLt.so.13, .so.12 and .so not found by the dynamic linker (set "
           "TESSERA_CUBLASLT to the library or its directory)");
  return NULL;
}

static const char *cu_error(const cublaslt_session *s, CUresult result) {
  const char *text = NULL;
  if (s->cu.cuGetErrorString == NULL || s->cu.cuGetErrorString(result, &text) != 0 || !text)
    return "unknown CUDA error";
  return text;
}

/* ------------------------------------------------------------------------ */
/* Session                                                                   */
/* ------------------------------------------------------------------------ */

static tsr_status allocator_create(void *user, tsr_device *device, size_t bytes,
                                   tsr_buffer **buffer, uint64_t *address) {
  cublaslt_session *s = user;
  *buffer = NULL;
  *address = 0;
  if (s->cu.cuCtxSetCurrent(s->context) != 0)
    return TSR_ERROR_BACKEND;
  CUdeviceptr pointer = 0;
  CUresult result = s->cu.cuMemAlloc(&pointer, bytes);
  if (result != 0) {
    cli_error("cuMemAlloc(%zu): %s", bytes, cu_error(s, result));
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  tsr_status status = tsr_buffer_wrap_cuda(device, (uint64_t)pointer, bytes, buffer);
  if (status != TSR_OK) {
    s->cu.cuMemFree(pointer);
    return status;
  }
  *address = (uint64_t)pointer;
  return TSR_OK;
}

static void allocator_release(void *user, uint64_t address) {
  cublaslt_session *s = user;
  s->cu.cuCtxSetCurrent(s->context);
  s->cu.cuMemFree((CUdeviceptr)address);
}

void cublaslt_close(cublaslt_session *s) {
  if (s == NULL)
    return;
  if (s->context != NULL)
    s->cu.cuCtxSetCurrent(s->context);
  if (s->handle != NULL)
    s->lt.destroy(s->handle);
  if (s->workspace)
    s->cu.cuMemFree(s->workspace);
  for (int i = 0; i < 2 * TIMING_BATCH; i++)
    if (s->events[i])
      s->cu.cuEventDestroy(s->events[i]);
  if (s->stream)
    s->cu.cuStreamDestroy(s->stream);
  if (s->context_retained)
    s->cu.cuDevicePrimaryCtxRelease(s->device);
  /* The libraries stay loaded: the plugin shares libcuda, and unloading
   * cuBLASLt's runtime at exit order is not worth the risk. */
  free(s);
}

cublaslt_session *cublaslt_open(const tsr_device_info *info, char *why, size_t why_capacity) {
  why[0] = '\0';
  if (strcmp(info->backend, "cuda") != 0) {
    snprintf(why, why_capacity, "not a CUDA device");
    return NULL;
  }
  cublaslt_session *s = calloc(1, sizeof *s);
  if (s == NULL) {
    snprintf(why, why_capacity, "out of host memory");
    return NULL;
  }
  char loaded[1024];
  if (!load_driver(&s->cu, why, why_capacity)) {
    free(s);
    return NULL;
  }
  s->lt.library = cublaslt_load_library(loaded, sizeof loaded, why, why_capacity);
  if (s->lt.library == NULL || !bind_cublaslt(&s->lt, loaded, why, why_capacity)) {
    free(s);
    return NULL;
  }
  CUresult result = s->cu.cuInit(0);
  int count = 0;
  if (result == 0)
    result = s->cu.cuDeviceGetCount(&count);
  if (result != 0) {
    snprintf(why, why_capacity, "cuInit: %s", cu_error(s, result));
    free(s);
    return NULL;
  }
  /* The tessera device is the CUDA device with its UUID; its backend
   * index where no UUID matches. */
  int ordinal = -1;
  for (int i = 0; i < count && ordinal < 0; i++) {
    CUdevice d;
    CUuuid uuid;
    char text[64];
    if (s->cu.cuDeviceGet(&d, i) == 0 && s->cu.cuDeviceGetUuid(&uuid, d) == 0) {
      cuda_uuid_format(&uuid, text, sizeof text);
      if (strcmp(text, info->physical_id) == 0)
        ordinal = i;
    }
  }
  if (ordinal < 0)
    ordinal = (int)info->backend_index;
  if (ordinal >= count || s->cu.cuDeviceGet(&s->device, ordinal) != 0) {
    snprintf(why, why_capacity, "no CUDA device %d for %s", ordinal, info->selector);
    free(s);
    return NULL;
  }
  result = s->cu.cuDevicePrimaryCtxRetain(&s->context, s->device);
  if (result == 0) {
    s->context_retained = true;
    result = s->cu.cuCtxSetCurrent(s->context);
  }
  if (result == 0)
    result = s->cu.cuStreamCreate(&s->stream, CU_STREAM_NON_BLOCKING);
  for (int i = 0; i < 2 * TIMING_BATCH && result == 0; i++)
    result = s->cu.cuEventCreate(&s->events[i], CU_EVENT_DEFAULT);
  if (result == 0)
    result = s->cu.cuMemAlloc(&s->workspace, CUBLASLT_WORKSPACE_BYTES);
  if (result != 0) {
    snprintf(why, why_capacity, "CUDA setup for cuBLASLt: %s", cu_error(s, result));
    cublaslt_close(s);
    return NULL;
  }
  lt_status status = s->lt.create(&s->handle);
  if (status != 0) {
    snprintf(why, why_capacity, "cublasLtCreate: status %d", status);
    s->handle = NULL;
    cublaslt_close(s);
    return NULL;
  }
  snprintf(s->description, sizeof s->description, "%s, version %zu, CUDA device %d", loaded,
           s->lt.get_version(), ordinal);
  s->allocator.create = allocator_create;
  s->allocator.release = allocator_release;
  s->allocator.user = s;
  return s;
}

const char *cublaslt_describe(const cublaslt_session *s) {
  return s->description;
}

const problem_allocator *cublaslt_allocator(cublaslt_session *s) {
  return &s->allocator;
}

bool cublaslt_handles(const problem_spec *spec) {
  if (spec->dtype != TSR_DTYPE_F32 && spec->dtype != TSR_DTYPE_F16 && spec->dtype != TSR_DTYPE_BF16)
    return false;
  if (spec->op == TSR_OP_GEMM) {
    const gemm_spec *g = &spec->gemm;
    return g->batch <= 1 && !g->has_c && !g->has_bias && !g->out_f32 && g->alpha == 1.0f &&
           g->activation == TSR_ACT_NONE;
  }
  if (spec->op == TSR_OP_GROUPED_GEMM) {
    const grouped_gemm_spec *g = &spec->grouped;
    return !g->has_bias && !g->out_f32 && g->alpha == 1.0f && g->activation == TSR_ACT_NONE;
  }
  return false;
}

/* ------------------------------------------------------------------------ */
/* One GEMM as cuBLASLt sees it                                              */
/* ------------------------------------------------------------------------ */

/* tessera's row-major D[M,N] = A[M,K] B[K,N] is cuBLASLt's column-major
 * D^T[N,M] = B^T[N,K] A^T[K,M]: cuBLASLt's "A" is tessera's b, its "B" is
 * tessera's a, its m = N, n = M. A row-major matrix with row stride ld is
 * the column-major transpose with leading dimension ld; a tessera operand
 * viewed transposed (unit stride along its first dimension) is a
 * column-major matrix with op T. */
typedef struct lt_operand {
  uint64_t rows, cols; /* of the stored column-major matrix */
  int64_t ld;
  int op;
} lt_operand;

/* The column-major description of tessera's 2-D view `v` ([R, C]) as the
 * operand X^T (C x R). False when neither dimension has a unit stride. */
static bool operand_of(const tsr_tensor *v, lt_operand *out) {
  int64_t r = v->shape[v->rank - 2], c = v->shape[v->rank - 1];
  int64_t sr = v->strides[v->rank - 2], sc = v->strides[v->rank - 1];
  if (sc == 1 || c == 1) { /* row-major rows: column-major C x R, no transpose */
    out->rows = (uint64_t)c;
    out->cols = (uint64_t)r;
    out->ld = r > 1 ? sr : c;
    out->op = LT_OP_N;
    return out->ld >= c;
  }
  if (sr == 1 || r == 1) { /* stored [C, R] row-major: column-major R x C, transposed */
    out->rows = (uint64_t)r;
    out->cols = (uint64_t)c;
    out->ld = c > 1 ? sc : r;
    out->op = LT_OP_T;
    return out->ld >= r;
  }
  return false;
}

typedef struct lt_call {
  lt_matmul_desc desc;
  lt_layout a, b, d;
  lt_algo algo;
  size_t workspace;
  float waves;
  const void *a_ptr, *b_ptr;
  void *d_ptr;
} lt_call;

static void call_destroy(const cublaslt_session *s, lt_call *c) {
  if (c->a)
    s->lt.layout_destroy(c->a);
  if (c->b)
    s->lt.layout_destroy(c->b);
  if (c->d)
    s->lt.layout_destroy(c->d);
  if (c->desc)
    s->lt.desc_destroy(c->desc);
  memset(c, 0, sizeof *c);
}

static int data_type(tsr_dtype dtype) {
  return dtype == TSR_DTYPE_BF16 ? LT_R_16BF : dtype == TSR_DTYPE_F16 ? LT_R_16F : LT_R_32F;
}

/* Sets up D = A B for tessera views a [M,K], b [K,N], d [M,N] (row-major
 * d) at device addresses; compute_tf32 for f32 with tf32 allowed. */
static bool call_create(const cublaslt_session *s, const tsr_tensor *a, uint64_t a_address,
                        const tsr_tensor *b, uint64_t b_address, const tsr_tensor *d,
                        uint64_t d_address, bool compute_tf32, lt_call *c, char *error,
                        size_t capacity) {
  memset(c, 0, sizeof *c);
  lt_operand la, lb;
  /* cuBLASLt's A is tessera's b (as b^T, N x K), its B is tessera's a. */
  if (!operand_of(b, &la) || !operand_of(a, &lb)) {
    snprintf(error, capacity, "an operand has no unit stride");
    return false;
  }
  int64_t m = d->shape[d->rank - 2], n = d->shape[d->rank - 1];
  int64_t d_ld = m > 1 ? d->strides[d->rank - 2] : n;
  if (d->strides[d->rank - 1] != 1 && n > 1) {
    snprintf(error, capacity, "d has no unit column stride");
    return false;
  }
  int type = data_type(d->dtype);
  int compute = compute_tf32 ? LT_COMPUTE_32F_FAST_TF32 : LT_COMPUTE_32F;
  lt_status status = s->lt.desc_create(&c->desc, compute, LT_R_32F);
  int32_t op_a = la.op, op_b = lb.op;
  if (status == 0)
    status = s->lt.desc_set(c->desc, LT_DESC_TRANSA, &op_a, sizeof op_a);
  if (status == 0)
    status = s->lt.desc_set(c->desc, LT_DESC_TRANSB, &op_b, sizeof op_b);
  if (status == 0)
    status = s->lt.layout_create(&c->a, type, la.rows, la.cols, la.ld);
  if (status == 0)
    status = s->lt.layout_create(&c->b, type, lb.rows, lb.cols, lb.ld);
  if (status == 0)
    status = s->lt.layout_create(&c->d, type, (uint64_t)n, (uint64_t)m, d_ld);
  if (status != 0) {
    snprintf(error, capacity, "cuBLASLt descriptors: status %d", status);
    call_destroy(s, c);
    return false;
  }
  lt_preference preference = NULL;
  status = s->lt.preference_create(&preference);
  uint64_t workspace = CUBLASLT_WORKSPACE_BYTES;
  if (status == 0)
    status =
        s->lt.preference_set(preference, LT_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace);
  lt_heuristic result;
  memset(&result, 0, sizeof result);
  int returned = 0;
  if (status == 0)
    status = s->lt.heuristic(s->handle, c->desc, c->a, c->b, c->d, c->d, preference, 1, &result,
                             &returned);
  if (preference)
    s->lt.preference_destroy(preference);
  if (status != 0 || returned < 1) {
    snprintf(error, capacity, "cublasLtMatmulAlgoGetHeuristic: status %d, %d algorithms", status,
             returned);
    call_destroy(s, c);
    return false;
  }
  c->algo = result.algo;
  c->workspace = result.workspace_size;
  c->waves = result.waves_count;
  c->a_ptr = (const void *)(uintptr_t)(b_address + b->offset);
  c->b_ptr = (const void *)(uintptr_t)(a_address + a->offset);
  c->d_ptr = (void *)(uintptr_t)(d_address + d->offset);
  return true;
}

static lt_status call_run(const cublaslt_session *s, const lt_call *c) {
  const float alpha = 1.0f, beta = 0.0f;
  return s->lt.matmul(s->handle, c->desc, &alpha, c->a_ptr, c->a, c->b_ptr, c->b, &beta, c->d_ptr,
                      c->d, c->d_ptr, c->d, &c->algo, (void *)(uintptr_t)s->workspace,
                      CUBLASLT_WORKSPACE_BYTES, s->stream);
}

/* The calls of one problem: one for a GEMM, one per non-empty group for a
 * grouped GEMM (a [T,K] split by rows, b [G,K,N], d [T,N]). */
typedef struct lt_plan {
  int count;
  lt_call calls[PROBLEM_MAX_GROUPS];
} lt_plan;

static void plan_destroy(const cublaslt_session *s, lt_plan *plan) {
  for (int i = 0; i < plan->count; i++)
    call_destroy(s, &plan->calls[i]);
  plan->count = 0;
}

static bool plan_create(const cublaslt_session *s, const problem *p, lt_plan *plan, char *error,
                        size_t capacity) {
  memset(plan, 0, sizeof *plan);
  const problem_tensor *a = vendor_blas_tensor(p, "a"), *b = vendor_blas_tensor(p, "b"),
                       *d = vendor_blas_tensor(p, "d");
  if (a == NULL || b == NULL || d == NULL || !a->device_address || !b->device_address ||
      !d->device_address) {
    snprintf(error, capacity, "the problem's buffers have no known device address");
    return false;
  }
  bool tf32 = p->spec.dtype == TSR_DTYPE_F32 && p->spec.op == TSR_OP_GEMM &&
              p->spec.gemm.compute == TSR_COMPUTE_TF32;
  vendor_blas_gemm gemms[PROBLEM_MAX_GROUPS];
  int count = vendor_blas_gemms(p, &a->view, &b->view, &d->view, gemms);
  for (int i = 0; i < count; i++) {
    if (!call_create(s, &gemms[i].a, a->device_address, &gemms[i].b, b->device_address, &gemms[i].d,
                     d->device_address, tf32, &plan->calls[i], error, capacity)) {
      plan_destroy(s, plan);
      return false;
    }
    plan->count++;
  }
  return true;
}

static bool plan_run(const cublaslt_session *s, const lt_plan *plan, char *error, size_t capacity) {
  for (int i = 0; i < plan->count; i++) {
    lt_status status = call_run(s, &plan->calls[i]);
    if (status != 0) {
      snprintf(error, capacity, "cublasLtMatmul: status %d", status);
      return false;
    }
  }
  return true;
}

/* The runs of the warm-up (timing_warm_up) and of the timed samples. */
typedef struct lt_runner {
  const cublaslt_session *s;
  const lt_plan *plans;
  int set_count;
  cublaslt_timing *out;
} lt_runner;

static bool lt_run(void *context, int i) {
  lt_runner *w = context;
  return plan_run(w->s, &w->plans[i % w->set_count], w->out->error, sizeof w->out->error);
}

static bool lt_finish(void *context) {
  lt_runner *w = context;
  if (w->s->cu.cuStreamSynchronize(w->s->stream) == 0)
    return true;
  snprintf(w->out->error, sizeof w->out->error, "cuBLASLt stream failed in the warm-up");
  return false;
}

/* timing_sample's events: the session's slots on its stream. */
static bool lt_record(void *context, int slot) {
  lt_runner *w = context;
  CUresult result = w->s->cu.cuEventRecord(w->s->events[slot], w->s->stream);
  if (result != 0)
    snprintf(w->out->error, sizeof w->out->error, "timing cuBLASLt: %s", cu_error(w->s, result));
  return result == 0;
}

static bool lt_elapsed(void *context, int from, int to, double *ms) {
  lt_runner *w = context;
  float elapsed = 0.0f;
  CUresult result = w->s->cu.cuEventSynchronize(w->s->events[to]);
  if (result == 0)
    result = w->s->cu.cuEventElapsedTime(&elapsed, w->s->events[from], w->s->events[to]);
  if (result != 0)
    snprintf(w->out->error, sizeof w->out->error, "timing cuBLASLt: %s", cu_error(w->s, result));
  *ms = elapsed;
  return result == 0;
}

/* ||x - y|| / ||y|| over two host copies of d. */
static double relative_difference(const unsigned char *x, const unsigned char *y, tsr_dtype dtype,
                                  int64_t count) {
  double diff = 0.0, norm = 0.0;
  for (int64_t i = 0; i < count; i++) {
    double a = dtype_load(x, dtype, i), b = dtype_load(y, dtype, i);
    diff += (a - b) * (a - b);
    norm += b * b;
  }
  return norm > 0.0 ? sqrt(diff / norm) : (diff > 0.0 ? INFINITY : 0.0);
}

bool cublaslt_time(cublaslt_session *s, problem *sets, int set_count, tsr_queue *queue,
                   const timing_plan *plan, cublaslt_timing *out) {
  memset(out, 0, sizeof *out);
  out->median_ms = NAN;
  out->difference = NAN;
  if (!cublaslt_handles(&sets[0].spec)) {
    snprintf(out->error, sizeof out->error, "not a plain GEMM");
    return false;
  }
  tsr_status finished = tsr_queue_finish(queue); /* tessera is done with the buffers */
  if (finished != TSR_OK) {
    snprintf(out->error, sizeof out->error, "tsr_queue_finish: %s", tsr_last_error());
    return false;
  }
  s->cu.cuCtxSetCurrent(s->context);
  lt_plan plans[3];
  int made = 0;
  bool ok = true;
  for (; made < set_count && made < 3 && ok; made++)
    ok = plan_create(s, &sets[made], &plans[made], out->error, sizeof out->error);
  if (!ok)
    made--;
  if (ok) {
    const lt_call *first = &plans[0].calls[0];
    snprintf(out->algo, sizeof out->algo, "%d call%s, workspace %zu KiB, waves %.2f",
             plans[0].count, plans[0].count == 1 ? "" : "s", first->workspace >> 10,
             (double)first->waves);
  }

  /* Tessera's product, then cuBLASLt's in the same buffer. */
  const problem_tensor *d = vendor_blas_tensor(&sets[0], "d");
  size_t d_bytes = (size_t)d->numel * tsr_dtype_size(d->view.dtype);
  unsigned char *mine = ok ? malloc(d_bytes) : NULL, *theirs = ok ? malloc(d_bytes) : NULL;
  if (ok && (mine == NULL || theirs == NULL)) {
    snprintf(out->error, sizeof out->error, "out of host memory");
    ok = false;
  }
  if (ok) {
    tsr_status status = tsr_buffer_read(queue, d->view.buffer, d->view.offset, mine, d_bytes);
    if (status != TSR_OK) {
      snprintf(out->error, sizeof out->error, "reading tessera's d: %s", tsr_last_error());
      ok = false;
    }
  }
  if (ok)
    ok = plan_run(s, &plans[0], out->error, sizeof out->error);
  if (ok) {
    CUresult result = s->cu.cuStreamSynchronize(s->stream);
    if (result == 0)
      result =
          s->cu.cuMemcpyDtoH(theirs, (CUdeviceptr)(d->device_address + d->view.offset), d_bytes);
    if (result != 0) {
      snprintf(out->error, sizeof out->error, "cuBLASLt run: %s", cu_error(s, result));
      ok = false;
    } else {
      out->difference = relative_difference(theirs, mine, d->view.dtype, d->numel);
    }
  }
  free(mine);
  free(theirs);

  /* The same plan as tessera's (time_problem), its warm-up included: both
   * sides must meet the GPU in the same state (after 0.2 s of back-to-back
   * 4096^3 GEMMs an H100 runs them ~10% slower than after one). */
  double samples[TIMING_MAX_SAMPLES];
  int count = 0;
  lt_runner warm = {s, plans, set_count, out};
  if (ok)
    ok = timing_warm_up(plan, set_count, lt_run, lt_finish, &warm);
  timing_ops ops = {&warm, lt_run, lt_record, lt_elapsed};
  if (ok)
    ok = timing_sample(plan, set_count, &ops, samples, &count);
  if (ok && s->cu.cuStreamSynchronize(s->stream) != 0) {
    snprintf(out->error, sizeof out->error, "cuBLASLt stream failed");
    ok = false;
  }
  for (int i = 0; i < made; i++)
    plan_destroy(s, &plans[i]);
  if (ok && count > 0) {
    out->median_ms = median(samples, count);
    out->runs = count;
  }
  return ok && count > 0;
}

/* ------------------------------------------------------------------------ */
/* tessera __cublaslt-probe                                                  */
/* ------------------------------------------------------------------------ */

int cmd_cublaslt_probe(int argc, char **argv) {
  (void)argc;
  (void)argv;
  char loaded[1024], why[512];
  void *library = cublaslt_load_library(loaded, sizeof loaded, why, sizeof why);
  if (library == NULL) {
    printf("cuBLASLt: not available: %s\n", why);
    return EXIT_FAILED;
  }
  lt_api lt;
  memset(&lt, 0, sizeof lt);
  lt.library = library;
  if (!bind_cublaslt(&lt, loaded, why, sizeof why)) {
    printf("cuBLASLt: not available: %s\n", why);
    return EXIT_FAILED;
  }
  printf("cuBLASLt: %s, version %zu\n", loaded, lt.get_version());
  return EXIT_OK;
}
