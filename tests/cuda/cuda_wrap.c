/* SPDX-License-Identifier: Apache-2.0 */
/* tsr_buffer_wrap_cuda: memory the application allocated with the CUDA
 * driver is used in place, range-checked, and never freed by tessera.
 * Exit 77 (skipped) without libcuda or a CUDA device. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_device_get_fn)(int *, int);
typedef int (*cu_ctx_retain_fn)(void **, int);
typedef int (*cu_ctx_set_fn)(void *);
typedef int (*cu_alloc_fn)(unsigned long long *, size_t);
typedef int (*cu_free_fn)(unsigned long long);
typedef int (*cu_htod_fn)(unsigned long long, const void *, size_t);
typedef int (*cu_dtoh_fn)(void *, unsigned long long, size_t);

static int failures;
#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                              \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, " (last error: %s)\n", tsr_last_error());                                    \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

#define RESOLVE(type, name, symbol)                                                                \
  type name;                                                                                       \
  *(void **)&name = dlsym(cuda, symbol);                                                           \
  if (!name) {                                                                                     \
    fprintf(stderr, "skipped: libcuda lacks %s\n", symbol);                                        \
    return 77;                                                                                     \
  }

int main(void) {
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!cuda) {
    fprintf(stderr, "skipped: no libcuda.so.1\n");
    return 77;
  }
  RESOLVE(cu_init_fn, cu_init, "cuInit");
  RESOLVE(cu_device_get_fn, cu_device_get, "cuDeviceGet");
  RESOLVE(cu_ctx_retain_fn, cu_ctx_retain, "cuDevicePrimaryCtxRetain");
  RESOLVE(cu_ctx_set_fn, cu_ctx_set, "cuCtxSetCurrent");
  RESOLVE(cu_alloc_fn, cu_alloc, "cuMemAlloc_v2");
  RESOLVE(cu_free_fn, cu_free, "cuMemFree_v2");
  RESOLVE(cu_htod_fn, cu_htod, "cuMemcpyHtoD_v2");
  RESOLVE(cu_dtoh_fn, cu_dtoh, "cuMemcpyDtoH_v2");
  int dev;
  void *ctx;
  if (cu_init(0) != 0 || cu_device_get(&dev, 0) != 0) {
    fprintf(stderr, "skipped: no CUDA device\n");
    return 77;
  }
  if (cu_ctx_retain(&ctx, dev) != 0 || cu_ctx_set(ctx) != 0) {
    fprintf(stderr, "FAIL: cannot make the primary context current\n");
    return 1;
  }

  tsr_context *context;
  tsr_device *device;
  tsr_queue *queue;
  if (tsr_context_create(NULL, &context) != TSR_OK ||
      tsr_device_open(context, "cuda:0", &device) != TSR_OK ||
      tsr_queue_create(device, &queue) != TSR_OK) {
    fprintf(stderr, "FAIL: tessera sees no cuda:0: %s\n", tsr_last_error());
    return 1;
  }

  enum { N = 4096 };
  float gate[N], up[N], y[N];
  for (int i = 0; i < N; i++) {
    gate[i] = (float)((i % 97) - 48) / 16.0f;
    up[i] = (float)((i % 31) - 15) / 8.0f;
  }
  /* One application allocation holding gate, up and y back to back. */
  unsigned long long memory;
  CHECK(cu_alloc(&memory, 3 * sizeof gate) == 0, "cuMemAlloc");
  CHECK(cu_htod(memory, gate, sizeof gate) == 0, "copy gate");
  CHECK(cu_htod(memory + sizeof gate, up, sizeof up) == 0, "copy up");

  tsr_buffer *wrapped = NULL;
  CHECK(tsr_buffer_wrap_cuda(device, memory, 3 * sizeof gate, &wrapped) == TSR_OK, "wrap");
  tsr_swiglu_desc desc = TSR_SWIGLU_DESC_INIT;
  int64_t shape[1] = {N};
  desc.gate = tsr_tensor_make(wrapped, 0, TSR_DTYPE_F32, 1, shape);
  desc.up = tsr_tensor_make(wrapped, sizeof gate, TSR_DTYPE_F32, 1, shape);
  desc.y = tsr_tensor_make(wrapped, 2 * sizeof gate, TSR_DTYPE_F32, 1, shape);
  CHECK(tsr_swiglu(queue, &desc) == TSR_OK, "swiglu on wrapped memory");
  CHECK(tsr_queue_finish(queue) == TSR_OK, "finish");
  /* The result is in the application's memory, read with the driver. */
  CHECK(cu_dtoh(y, memory + 2 * sizeof gate, sizeof y) == 0, "read y");
  double worst = 0.0;
  for (int i = 0; i < N; i++) {
    double g = gate[i], want = g / (1.0 + exp(-g)) * up[i];
    double err = fabs(y[i] - want) / (fabs(want) + 1e-6);
    worst = err > worst ? err : worst;
  }
  CHECK(worst < 1e-5, "worst relative error %g", worst);

  /* A range past the allocation, host memory, NULL: refused, clearly. */
  tsr_buffer *bad = NULL;
  CHECK(tsr_buffer_wrap_cuda(device, memory + 16, 3 * sizeof gate, &bad) == TSR_ERROR_OUT_OF_BOUNDS,
        "range past the allocation");
  CHECK(strstr(tsr_last_error(), "tsr_buffer_wrap_cuda") != NULL, "message names the call");
  CHECK(tsr_buffer_wrap_host(device, gate, sizeof gate, &bad) == TSR_ERROR_UNSUPPORTED,
        "host memory on cuda");
  CHECK(tsr_buffer_wrap_cuda(device, 0, 16, &bad) == TSR_ERROR_NULL_ARGUMENT, "NULL pointer");
  CHECK(bad == NULL, "no buffer on failure");

  /* Destroying the wrapper leaves the memory to its owner: freeing it
   * afterwards succeeds (a double free would not). */
  tsr_buffer_destroy(wrapped);
  tsr_context_destroy(context);
  CHECK(cu_free(memory) == 0, "the application frees its own memory");
  if (failures)
    fprintf(stderr, "cuda_wrap: %d failure(s)\n", failures);
  else
    printf("cuda_wrap: all checks passed\n");
  return failures ? 1 : 0;
}
