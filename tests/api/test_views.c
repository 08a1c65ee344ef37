/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The public f16/bf16 conversions against hand-worked bit patterns, and the
 * checked view helpers (tsr_tensor_slice, _permute, _strided, _alloc, _like):
 * the views they make against hand-computed shapes, strides and offsets, an
 * op through a slice on cpu:0, and each bad input with its status, sentence
 * and an untouched *out.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "api_test.h"

static float from_bits(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static void check_conversions(void) {
  /* f16: 1, -2, the largest finite, the smallest subnormal, infinity */
  CHECK_INT(tsr_f32_to_f16(1.0f), 0x3c00);
  CHECK_INT(tsr_f32_to_f16(-2.0f), 0xc000);
  CHECK_INT(tsr_f32_to_f16(65504.0f), 0x7bff);
  CHECK_INT(tsr_f32_to_f16(65520.0f), 0x7c00); /* halfway to 2^16 rounds up: inf */
  CHECK_INT(tsr_f32_to_f16(65519.0f), 0x7bff);
  CHECK_INT(tsr_f32_to_f16(ldexpf(1.0f, -24)), 0x0001);
  CHECK_INT(tsr_f32_to_f16(ldexpf(1.0f, -26)), 0x0000); /* below half of it */
  CHECK_INT(tsr_f32_to_f16(-0.0f), 0x8000);
  /* ties to even: 1 + 2^-11 lies halfway between 0x3c00 and 0x3c01 */
  CHECK_INT(tsr_f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3c00);
  CHECK_INT(tsr_f32_to_f16(1.0f + 3 * ldexpf(1.0f, -11)), 0x3c02);
  CHECK_INT(tsr_f32_to_f16(INFINITY), 0x7c00);
  uint16_t nan16 = tsr_f32_to_f16(NAN);
  CHECK((nan16 & 0x7c00) == 0x7c00 && (nan16 & 0x3ff) != 0);
  CHECK(tsr_f16_to_f32(0x3c00) == 1.0f);
  CHECK(tsr_f16_to_f32(0xc000) == -2.0f);
  CHECK(tsr_f16_to_f32(0x7bff) == 65504.0f);
  CHECK(tsr_f16_to_f32(0x0001) == ldexpf(1.0f, -24));
  CHECK(tsr_f16_to_f32(0x03ff) == ldexpf(1023.0f, -24)); /* largest subnormal */
  CHECK(isinf(tsr_f16_to_f32(0xfc00)) && tsr_f16_to_f32(0xfc00) < 0);
  CHECK(isnan(tsr_f16_to_f32(0x7e00)));
  /* bf16: the top half, ties to even, NaN stays NaN */
  CHECK_INT(tsr_f32_to_bf16(1.0f), 0x3f80);
  CHECK_INT(tsr_f32_to_bf16(1.0f + ldexpf(1.0f, -8)), 0x3f80); /* halfway: even */
  CHECK_INT(tsr_f32_to_bf16(1.0f + 3 * ldexpf(1.0f, -8)), 0x3f82);
  CHECK_INT(tsr_f32_to_bf16(-3.0f), 0xc040);
  CHECK_INT(tsr_f32_to_bf16(from_bits(0x7f7fffffu)), 0x7f80); /* f32 max rounds to inf */
  uint16_t nan_bf = tsr_f32_to_bf16(from_bits(0x7f800001u));  /* a NaN whose bits would round */
  CHECK((nan_bf & 0x7f80) == 0x7f80 && (nan_bf & 0x7f) != 0);
  CHECK(tsr_bf16_to_f32(0x3f80) == 1.0f);
  CHECK(tsr_bf16_to_f32(0xc040) == -3.0f);
  CHECK(isnan(tsr_bf16_to_f32(0x7fc0)));
  /* every f16 survives f16 -> f32 -> f16 */
  int mismatches = 0;
  for (uint32_t h = 0; h < 0x10000u; h++) {
    float f = tsr_f16_to_f32((uint16_t)h);
    if (isnan(f))
      continue;
    mismatches += tsr_f32_to_f16(f) != h;
  }
  CHECK_INT(mismatches, 0);
}

static tsr_tensor sentinel(void) {
  tsr_tensor t;
  memset(&t, 0x5a, sizeof t);
  return t;
}

static bool unchanged(const tsr_tensor *t) {
  tsr_tensor s = sentinel();
  return memcmp(t, &s, sizeof s) == 0;
}

static void check_views(tsr_device *device) {
  tsr_buffer *buffer = NULL;
  REQUIRE_OK(tsr_buffer_create(device, 256, &buffer));
  /* [4, 6] f32 at byte 16 */
  tsr_tensor base = tsr_tensor_make(buffer, 16, TSR_DTYPE_F32, 2, (int64_t[]){4, 6});
  tsr_tensor t = sentinel();
  CHECK_STATUS(tsr_tensor_slice(&base, 1, 2, 6, 2, &t), TSR_OK); /* columns 2, 4 */
  CHECK_INT(t.shape[0], 4);
  CHECK_INT(t.shape[1], 2);
  CHECK_INT(t.strides[0], 6);
  CHECK_INT(t.strides[1], 2);
  CHECK_INT(t.offset, 16 + 2 * 4);
  CHECK(t.buffer == buffer);
  CHECK_STATUS(tsr_tensor_slice(&base, 0, 1, 4, 2, &t), TSR_OK); /* rows 1, 3 */
  CHECK_INT(t.shape[0], 2);
  CHECK_INT(t.strides[0], 12);
  CHECK_INT(t.offset, 16 + 6 * 4);
  CHECK_STATUS(tsr_tensor_slice(&base, 1, 1, 6, 3, &t), TSR_OK); /* columns 1, 4 */
  CHECK_INT(t.shape[1], 2);
  CHECK_STATUS(tsr_tensor_slice(&base, 1, 3, 3, 1, &t), TSR_OK); /* empty */
  CHECK_INT(t.shape[1], 0);
  tsr_tensor in_place = base; /* out may be the input */
  CHECK_STATUS(tsr_tensor_slice(&in_place, 0, 2, 4, 1, &in_place), TSR_OK);
  CHECK_INT(in_place.shape[0], 2);
  CHECK_INT(in_place.offset, 16 + 12 * 4);

  struct {
    const char *what;
    int32_t dim;
    int64_t start, stop, step;
    tsr_status status;
    const char *mention;
  } slices[] = {
      {"dim past rank", 2, 0, 1, 1, TSR_ERROR_INVALID_VALUE, "dim = 2 but the tensor has rank 2"},
      {"negative dim", -1, 0, 1, 1, TSR_ERROR_INVALID_VALUE, "dim = -1"},
      {"step 0", 1, 0, 6, 0, TSR_ERROR_INVALID_VALUE, "step = 0"},
      {"stop past extent", 1, 0, 7, 1, TSR_ERROR_OUT_OF_BOUNDS,
       "stop = 7 on dimension 1 of extent 6"},
      {"negative start", 0, -1, 2, 1, TSR_ERROR_OUT_OF_BOUNDS, "start = -1"},
      {"start after stop", 0, 3, 2, 1, TSR_ERROR_OUT_OF_BOUNDS, "start = 3, stop = 2"},
  };
  for (size_t i = 0; i < API_COUNT(slices); i++) {
    printf("slice: %s\n", slices[i].what);
    t = sentinel();
    CHECK_STATUS(
        tsr_tensor_slice(&base, slices[i].dim, slices[i].start, slices[i].stop, slices[i].step, &t),
        slices[i].status);
    CHECK_ERROR("tsr_tensor_slice", slices[i].mention);
    CHECK(unchanged(&t));
  }
  tsr_tensor bad = base;
  bad.rank = 0;
  CHECK_STATUS(tsr_tensor_slice(&bad, 0, 0, 1, 1, &t), TSR_ERROR_RANK);
  CHECK_ERROR("tsr_tensor_slice", "tensor->rank = 0");
  bad = base;
  bad.dtype = TSR_DTYPE_INVALID;
  CHECK_STATUS(tsr_tensor_slice(&bad, 0, 0, 1, 1, &t), TSR_ERROR_INVALID_VALUE);
  CHECK_ERROR("tsr_tensor_slice", "tensor->dtype = 0");
  CHECK_STATUS(tsr_tensor_slice(NULL, 0, 0, 1, 1, &t), TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_tensor_slice", "tensor is NULL");
  CHECK_STATUS(tsr_tensor_slice(&base, 0, 0, 1, 1, NULL), TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_tensor_slice", "out is NULL");
  CHECK(unchanged(&t));

  /* permute: [2, 3, 4] row-major (strides 12, 4, 1) by {2, 0, 1} */
  tsr_tensor cube = tsr_tensor_make(buffer, 0, TSR_DTYPE_F16, 3, (int64_t[]){2, 3, 4});
  t = sentinel();
  CHECK_STATUS(tsr_tensor_permute(&cube, (int32_t[]){2, 0, 1}, &t), TSR_OK);
  CHECK_INT(t.shape[0], 4);
  CHECK_INT(t.shape[1], 2);
  CHECK_INT(t.shape[2], 3);
  CHECK_INT(t.strides[0], 1);
  CHECK_INT(t.strides[1], 12);
  CHECK_INT(t.strides[2], 4);
  CHECK_INT(t.dtype, TSR_DTYPE_F16);
  t = sentinel();
  CHECK_STATUS(tsr_tensor_permute(&cube, (int32_t[]){0, 0, 1}, &t), TSR_ERROR_INVALID_VALUE);
  CHECK_ERROR("tsr_tensor_permute", "order[1] = 0: order must hold each of 0..2 once");
  CHECK_STATUS(tsr_tensor_permute(&cube, (int32_t[]){0, 3, 1}, &t), TSR_ERROR_INVALID_VALUE);
  CHECK_ERROR("tsr_tensor_permute", "order[1] = 3");
  CHECK_STATUS(tsr_tensor_permute(&cube, NULL, &t), TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_tensor_permute", "order is NULL");
  CHECK(unchanged(&t));

  /* strided: explicit strides, NULL strides, bounds */
  t = sentinel();
  CHECK_STATUS(
      tsr_tensor_strided(buffer, 8, TSR_DTYPE_F32, 2, (int64_t[]){3, 4}, (int64_t[]){1, 3}, &t),
      TSR_OK);
  CHECK_INT(t.strides[0], 1);
  CHECK_INT(t.strides[1], 3);
  CHECK_INT(t.offset, 8);
  CHECK_STATUS(tsr_tensor_strided(buffer, 0, TSR_DTYPE_BF16, 2, (int64_t[]){8, 16}, NULL, &t),
               TSR_OK); /* exactly the 256 bytes */
  CHECK_INT(t.strides[0], 16);
  CHECK_INT(t.strides[1], 1);
  /* a broadcast (stride 0) view of one element */
  CHECK_STATUS(
      tsr_tensor_strided(buffer, 252, TSR_DTYPE_F32, 1, (int64_t[]){100}, (int64_t[]){0}, &t),
      TSR_OK);
  struct {
    const char *what;
    size_t offset;
    tsr_dtype dtype;
    int32_t rank;
    int64_t shape[2], strides[2];
    tsr_status status;
    const char *mention;
  } strided[] = {
      {"one byte too far",
       2,
       TSR_DTYPE_BF16,
       2,
       {8, 16},
       {16, 1},
       TSR_ERROR_OUT_OF_BOUNDS,
       "reaches byte 258 of the 256-byte buffer"},
      {"negative stride",
       0,
       TSR_DTYPE_F32,
       2,
       {2, 2},
       {-1, 1},
       TSR_ERROR_INVALID_VALUE,
       "strides[0] = -1 is negative"},
      {"negative extent",
       0,
       TSR_DTYPE_F32,
       2,
       {2, -3},
       {3, 1},
       TSR_ERROR_BAD_SIZE,
       "shape[1] = -3"},
      {"rank 5", 0, TSR_DTYPE_F32, 5, {1, 1}, {1, 1}, TSR_ERROR_RANK, "rank = 5"},
      {"bad dtype", 0, (tsr_dtype)9, 2, {1, 1}, {1, 1}, TSR_ERROR_INVALID_VALUE, "dtype = 9"},
      {"overflow", 0, TSR_DTYPE_F32, 2, {2, 2}, {INT64_MAX, 1}, TSR_ERROR_BAD_SIZE, "overflow"},
  };
  for (size_t i = 0; i < API_COUNT(strided); i++) {
    printf("strided: %s\n", strided[i].what);
    t = sentinel();
    CHECK_STATUS(tsr_tensor_strided(buffer, strided[i].offset, strided[i].dtype, strided[i].rank,
                                    strided[i].shape, strided[i].strides, &t),
                 strided[i].status);
    CHECK_ERROR("tsr_tensor_strided", strided[i].mention);
    CHECK(unchanged(&t));
  }
  CHECK_STATUS(tsr_tensor_strided(NULL, 0, TSR_DTYPE_F32, 1, (int64_t[]){1}, NULL, &t),
               TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_tensor_strided", "buffer is NULL");

  /* alloc and like: dense row-major, of like's shape whatever its strides */
  tsr_tensor a = sentinel();
  CHECK_STATUS(tsr_tensor_alloc(device, TSR_DTYPE_F16, 2, (int64_t[]){2, 3}, &a), TSR_OK);
  size_t bytes = 0;
  CHECK_STATUS(tsr_buffer_size(a.buffer, &bytes), TSR_OK);
  CHECK_INT(bytes, 12);
  CHECK_INT(a.strides[0], 3);
  CHECK_INT(a.offset, 0);
  tsr_tensor transposed = tsr_tensor_transpose(a, 0, 1);
  tsr_tensor l = sentinel();
  CHECK_STATUS(tsr_tensor_like(device, &transposed, &l), TSR_OK);
  CHECK_INT(l.shape[0], 3);
  CHECK_INT(l.shape[1], 2);
  CHECK_INT(l.strides[0], 2);
  CHECK_INT(l.strides[1], 1);
  CHECK_INT(l.dtype, TSR_DTYPE_F16);
  CHECK(l.buffer != a.buffer);
  tsr_buffer_destroy(l.buffer);
  tsr_buffer_destroy(a.buffer);
  CHECK_STATUS(tsr_tensor_alloc(device, TSR_DTYPE_I32, 1, (int64_t[]){0}, &a), TSR_OK);
  CHECK_STATUS(tsr_buffer_size(a.buffer, &bytes), TSR_OK);
  CHECK_INT(bytes, 4); /* no element: one element's buffer */
  tsr_buffer_destroy(a.buffer);
  a = sentinel();
  CHECK_STATUS(tsr_tensor_alloc(device, TSR_DTYPE_F32, 2, (int64_t[]){2, -1}, &a),
               TSR_ERROR_BAD_SIZE);
  CHECK_ERROR("tsr_tensor_alloc", "shape[1] = -1");
  CHECK_STATUS(tsr_tensor_alloc(device, TSR_DTYPE_F32, 2, (int64_t[]){INT64_MAX / 2, 4}, &a),
               TSR_ERROR_BAD_SIZE);
  CHECK_ERROR("tsr_tensor_alloc", "shape[0] = 4611686018427387903");
  CHECK_STATUS(tsr_tensor_alloc(device, TSR_DTYPE_F32, 0, (int64_t[]){1}, &a), TSR_ERROR_RANK);
  CHECK_ERROR("tsr_tensor_alloc", "rank = 0");
  CHECK_STATUS(tsr_tensor_alloc(NULL, TSR_DTYPE_F32, 1, (int64_t[]){1}, &a),
               TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_tensor_alloc", "device is NULL");
  CHECK(unchanged(&a));
  tsr_tensor no_dtype = transposed;
  no_dtype.dtype = TSR_DTYPE_INVALID;
  CHECK_STATUS(tsr_tensor_like(device, &no_dtype, &a), TSR_ERROR_INVALID_VALUE);
  CHECK_ERROR("tsr_tensor_like", "like->dtype = 0");
  CHECK_STATUS(tsr_tensor_like(device, NULL, &a), TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_tensor_like", "like is NULL");
  CHECK(unchanged(&a));

  /* a destroyed buffer is refused */
  tsr_buffer_destroy(buffer);
  CHECK_STATUS(tsr_tensor_strided(buffer, 0, TSR_DTYPE_F32, 1, (int64_t[]){1}, NULL, &t),
               TSR_ERROR_INVALID_VALUE);
  CHECK_ERROR("tsr_tensor_strided", "was destroyed");
}

/* gelu through views: the strided columns of a matrix into a slice. */
static void check_op_on_views(tsr_device *device) {
  tsr_queue *queue = NULL;
  REQUIRE_OK(tsr_queue_create(device, &queue));
  tsr_tensor m;
  REQUIRE_OK(tsr_tensor_alloc(device, TSR_DTYPE_F32, 2, (int64_t[]){4, 6}, &m));
  float values[24];
  for (int i = 0; i < 24; i++)
    values[i] = (float)i * 0.25f - 3.0f;
  REQUIRE_OK(tsr_buffer_write(queue, m.buffer, 0, values, sizeof values));
  /* x: column 1 (rows 0..3) as a rank-1 view, stride 6 */
  tsr_tensor col, x;
  REQUIRE_OK(tsr_tensor_slice(&m, 1, 1, 2, 1, &col));
  REQUIRE_OK(tsr_tensor_permute(&col, (int32_t[]){1, 0}, &col)); /* [1, 4] */
  tsr_tensor y;
  REQUIRE_OK(tsr_tensor_like(device, &col, &y));
  x = col;
  tsr_gelu_desc gelu = TSR_GELU_DESC_INIT;
  gelu.x = x;
  gelu.y = y;
  CHECK_STATUS(tsr_gelu(queue, &gelu), TSR_OK);
  float out[4];
  REQUIRE_OK(tsr_buffer_read(queue, y.buffer, 0, out, sizeof out));
  for (int r = 0; r < 4; r++) {
    double v = values[r * 6 + 1];
    double want = 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
    CHECK(fabs(out[r] - want) < 1e-5);
  }
  tsr_buffer_destroy(y.buffer);
  tsr_buffer_destroy(m.buffer);
  tsr_queue_destroy(queue);
}

int main(void) {
  check_conversions();
  tsr_context *context = api_context();
  tsr_device *device = api_cpu_device(context);
  check_views(device);
  check_op_on_views(device);
  tsr_context_destroy(context);
  return api_finish("test_views");
}
