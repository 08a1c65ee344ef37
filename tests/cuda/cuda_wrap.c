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

#include "cuda_api.h"

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

int main(void) {
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!cuda) {
    fprintf(stderr, "skipped: no libcuda.so.1\n");
    return 77;
  }
  cuda_api cu;
  const char *missing = cuda_api_load(&cu, cuda);
  if (!missing && (!cu.cuMemcpyHtoD || !cu.cuMemcpyDtoH))
    missing = "cuMemcpyHtoD_v2 or cuMemcpyDtoH_v2";
  if (missing) {
    fprintf(stderr, "skipped: libcuda lacks %s\n", missing);
    return 77;
  }
  CUdevice dev;
  CUcontext ctx;
  if (cu.cuInit(0) != 0 || cu.cuDeviceGet(&dev, 0) != 0) {
    fprintf(stderr, "skipped: no CUDA device\n");
    return 77;
  }
  if (cu.cuDevicePrimaryCtxRetain(&ctx, dev) != 0 || cu.cuCtxSetCurrent(ctx) != 0) {
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
  CUdeviceptr memory;
  CHECK(cu.cuMemAlloc(&memory, 3 * sizeof gate) == 0, "cuMemAlloc");
  CHECK(cu.cuMemcpyHtoD(memory, gate, sizeof gate) == 0, "copy gate");
  CHECK(cu.cuMemcpyHtoD(memory + sizeof gate, up, sizeof up) == 0, "copy up");

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
  CHECK(cu.cuMemcpyDtoH(y, memory + 2 * sizeof gate, sizeof y) == 0, "read y");
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
  CHECK(cu.cuMemFree(memory) == 0, "the application frees its own memory");
  if (failures)
    fprintf(stderr, "cuda_wrap: %d failure(s)\n", failures);
  else
    printf("cuda_wrap: all checks passed\n");
  return failures ? 1 : 0;
}
