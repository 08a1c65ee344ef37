/* SPDX-License-Identifier: Apache-2.0 */
/* tsr_reference_prepare: the core's normalisation handed to testers, with
 * host copies in place of device buffers. */
#include <math.h>
#include <string.h>

#include <tessera/reference.h>

#include "api_test.h"

typedef struct host_map {
  const tsr_buffer *buffers[API_BUFFERS];
  unsigned char copies[API_BUFFERS][8];
} host_map;

static const void *host_of(void *user, const tsr_buffer *buffer) {
  host_map *map = user;
  for (int i = 0; i < API_BUFFERS; i++)
    if (map->buffers[i] == buffer)
      return map->copies[i];
  return NULL;
}

static const void *no_host(void *user, const tsr_buffer *buffer) {
  (void)user;
  (void)buffer;
  return NULL;
}

int main(void) {
  api_fixture f;
  api_fixture_open(&f);
  host_map map;
  memset(&map, 0, sizeof map);
  for (int i = 0; i < API_BUFFERS; i++)
    map.buffers[i] = f.buffers[i];

  /* A 2-D gemm without c: batch of 1 with stride 0, beta forced to 0, host
   * pointers in place of the buffers. */
  tsr_gemm_desc gemm = TSR_GEMM_DESC_INIT;
  gemm.a = api_tensor(f.buffers[0], 0, TSR_DTYPE_F32, 2, 4, 8, 0, 0);
  gemm.b = api_tensor(f.buffers[1], 0, TSR_DTYPE_F32, 2, 8, 5, 0, 0);
  gemm.d = api_tensor(f.buffers[2], 0, TSR_DTYPE_F32, 2, 4, 5, 0, 0);
  gemm.beta = 3.0f;
  tsr_gemm_args args;
  memset(&args, 0xab, sizeof args);
  CHECK_STATUS(
      tsr_reference_prepare(f.device, TSR_OP_GEMM, &gemm, host_of, &map, &args, sizeof args),
      TSR_OK);
  CHECK(args.a.buffer == map.copies[0]);
  CHECK(args.b.buffer == map.copies[1]);
  CHECK(args.d.buffer == map.copies[2]);
  CHECK(args.c.buffer == NULL);
  CHECK_INT(args.a.rank, 3);
  CHECK_INT(args.a.shape[0], 1);
  CHECK_INT(args.a.strides[0], 0);
  CHECK_INT(args.d.shape[1], 4);
  CHECK_INT(args.d.shape[2], 5);
  CHECK(args.beta == 0.0f);

  /* Attention defaults: scale 1/sqrt(D), causal as window_right 0. */
  tsr_attention_desc attention = TSR_ATTENTION_DESC_INIT;
  attention.q = api_tensor(f.buffers[0], 0, TSR_DTYPE_F32, 4, 1, 3, 2, 16);
  attention.k = api_tensor(f.buffers[1], 0, TSR_DTYPE_F32, 4, 1, 5, 1, 16);
  attention.v = api_tensor(f.buffers[2], 0, TSR_DTYPE_F32, 4, 1, 5, 1, 16);
  attention.o = api_tensor(f.buffers[3], 0, TSR_DTYPE_F32, 4, 1, 3, 2, 16);
  attention.causal = 1;
  tsr_attention_args attention_args;
  CHECK_STATUS(tsr_reference_prepare(f.device, TSR_OP_ATTENTION, &attention, host_of, &map,
                                     &attention_args, sizeof attention_args),
               TSR_OK);
  CHECK(fabsf(attention_args.scale - 0.25f) < 1e-7f);
  CHECK_INT(attention_args.window_right, 0);
  CHECK(attention_args.o.buffer == map.copies[3]);

  /* Errors: each is named, and args is left alone. */
  unsigned char before[sizeof args];
  memcpy(before, &args, sizeof args);
  CHECK_STATUS(tsr_reference_prepare(NULL, TSR_OP_GEMM, &gemm, host_of, &map, &args, sizeof args),
               TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_reference_prepare", "device");
  CHECK_STATUS(
      tsr_reference_prepare(f.device, TSR_OP_GEMM, &gemm, host_of, &map, &args, sizeof args - 1),
      TSR_ERROR_BAD_SIZE);
  CHECK_ERROR("tsr_reference_prepare", "capacity");
  CHECK_STATUS(
      tsr_reference_prepare(f.device, (tsr_op)77, &gemm, host_of, &map, &args, sizeof args),
      TSR_ERROR_INVALID_VALUE);
  CHECK_STATUS(
      tsr_reference_prepare(f.device, TSR_OP_GEMM, &gemm, no_host, NULL, &args, sizeof args),
      TSR_ERROR_NOT_FOUND);
  CHECK_ERROR("tsr_reference_prepare", "host copy");
  gemm.b.shape[0] = 6; /* validation runs exactly as for the op */
  CHECK_STATUS(
      tsr_reference_prepare(f.device, TSR_OP_GEMM, &gemm, host_of, &map, &args, sizeof args),
      TSR_ERROR_SHAPE_MISMATCH);
  CHECK_ERROR("tsr_reference_prepare", "a.shape[1] = 8 but b.shape[0] = 6");
  CHECK(memcmp(before, &args, sizeof args) == 0);

  api_fixture_close(&f);
  return api_finish("test_reference_prepare");
}
