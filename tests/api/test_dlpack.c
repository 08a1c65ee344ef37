/* SPDX-License-Identifier: Apache-2.0 */
/*
 * DLPack interop (core/dlpack.c) and native-stream queues, through the probe
 * plugin (host memory it wraps and exports) and its "cuda" build (a stand-in
 * CUDA device with CUDA ordinal 3, backend index 0), with hand-built
 * DLManagedTensors:
 * - tessera_dlpack.h's own DLPack declarations have the documented layout,
 *   the system header's when there is one;
 * - imports: compact, strided with a byte offset, every dtype, rank 0, size
 *   0, versioned; the producer's deleter runs exactly once, only when the
 *   buffer's memory goes (tsr_buffer_destroy, the last export, the context);
 *   every bad input fails with its status and sentence, leaves *out and the
 *   deleter alone;
 * - exports: fields, dtype and device mapping, the memory outliving
 *   tsr_buffer_destroy until the deleter, a deleter after the context,
 *   every bad input;
 * - tsr_device_from_dlpack and the CUDA ordinal; tsr_queue_wrap_*_stream
 *   routed to the plugin's queue_wrap, with ops, finish and destroy on it;
 * - a table of ABI 2's first release loads, its interop entries unread.
 * `api_test_dlpack cpu` runs the round trip on the CPU plugin (exit 77 while
 * it cannot wrap host memory).
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_test.h"
#include "dlpack_layout.h"
#include "tessera/tessera_dlpack.h"

/* The probe's statistics (probe_plugin.c), as far as they are read here. */
struct probe_stats {
  int selects, runs;
  char last_run[16];
  int variants_calls, supported_calls;
  int wraps;
  int32_t last_wrap_kind;
  uint64_t last_wrap_bytes;
  int frees;
  int no_address;
  uint64_t last_stream, last_run_stream, last_finish_stream;
  int wrapped_released;
};
static struct probe_stats *probe, *fake_cuda;

static tsr_context *context;
static tsr_device *probe_device, *cuda_device, *cpu_device;
static tsr_queue *probe_queue;

/* ---- hand-built DLPack tensors ---- */

static int deleted, deleted_versioned;
static void count_delete(DLManagedTensor *self) {
  (void)self;
  deleted++;
}
static void count_delete_versioned(DLManagedTensorVersioned *self) {
  (void)self;
  deleted_versioned++;
}

typedef struct dl_spec {
  void *data;
  int32_t device_type, device_id;
  uint8_t code, bits;
  uint16_t lanes;
  int32_t ndim;
  int64_t *shape, *strides;
  uint64_t byte_offset;
} dl_spec;

static DLManagedTensor managed_of(dl_spec s) {
  DLManagedTensor m;
  memset(&m, 0, sizeof m);
  m.dl_tensor.data = s.data;
  m.dl_tensor.device.device_type = (DLDeviceType)s.device_type;
  m.dl_tensor.device.device_id = s.device_id;
  m.dl_tensor.ndim = s.ndim;
  m.dl_tensor.dtype.code = s.code;
  m.dl_tensor.dtype.bits = s.bits;
  m.dl_tensor.dtype.lanes = s.lanes ? s.lanes : 1;
  m.dl_tensor.shape = s.shape;
  m.dl_tensor.strides = s.strides;
  m.dl_tensor.byte_offset = s.byte_offset;
  m.deleter = count_delete;
  return m;
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

/* ---- layout ---- */

static void check_layout(void) {
  dlpack_layout own, here;
  dlpack_layout_own(&own);
  DLPACK_LAYOUT_FILL(&here); /* the system header when it exists */
  CHECK(memcmp(&own, &here, sizeof own) == 0);
  int own_constants[DLPACK_LAYOUT_CONSTANTS], constants[DLPACK_LAYOUT_CONSTANTS];
  dlpack_constants_own(own_constants);
  DLPACK_CONSTANTS_FILL(constants);
  CHECK(memcmp(own_constants, constants, sizeof constants) == 0);
  /* The documented ABI (LP64): DLPack's own numbers. */
  const int documented[DLPACK_LAYOUT_CONSTANTS] = {1,  2,  3, 4, 7, 8, 9, 10, 11,
                                                   12, 13, 0, 1, 2, 3, 4, 5};
  CHECK(memcmp(own_constants, documented, sizeof documented) == 0);
  if (sizeof(void *) == 8) {
    CHECK_INT(own.device_size, 8);
    CHECK_INT(own.device_id, 4);
    CHECK_INT(own.dtype_size, 4);
    CHECK_INT(own.dtype_bits, 1);
    CHECK_INT(own.dtype_lanes, 2);
    CHECK_INT(own.tensor_size, 48);
    CHECK_INT(own.tensor_device, 8);
    CHECK_INT(own.tensor_ndim, 16);
    CHECK_INT(own.tensor_dtype, 20);
    CHECK_INT(own.tensor_shape, 24);
    CHECK_INT(own.tensor_strides, 32);
    CHECK_INT(own.tensor_byte_offset, 40);
    CHECK_INT(own.managed_size, 64);
    CHECK_INT(own.managed_ctx, 48);
    CHECK_INT(own.managed_deleter, 56);
    CHECK_INT(own.version_size, 8);
    CHECK_INT(own.version_minor, 4);
    CHECK_INT(own.versioned_size, 80);
    CHECK_INT(own.versioned_ctx, 8);
    CHECK_INT(own.versioned_deleter, 16);
    CHECK_INT(own.versioned_flags, 24);
    CHECK_INT(own.versioned_tensor, 32);
    CHECK_INT(own.device_type_size, 4);
  }
  CHECK_INT(own.read_only_flag, 1);
  CHECK_INT(own.is_copied_flag, 2);
#ifdef TSR_DLPACK_DECLARED_HERE
  printf("layout: no <dlpack/dlpack.h>; own declarations checked against the documented ABI\n");
#else
  printf("layout: own declarations match <dlpack/dlpack.h> and the documented ABI\n");
#endif
}

/* ---- imports ---- */

static float host[64];

static void fill_host(void) {
  for (int i = 0; i < 64; i++)
    host[i] = (float)i * 0.5f - 3.0f;
}

static float read_f32(tsr_queue *queue, const tsr_tensor *t, int64_t element) {
  float value = NAN;
  REQUIRE_OK(tsr_buffer_read(queue, t->buffer, t->offset + (size_t)element * 4, &value, 4));
  return value;
}

/* Compact, strided with an offset, dtypes, rank 0, size 0, versioned, on a
 * host-memory device. */
static void check_imports(tsr_device *device, tsr_queue *queue) {
  fill_host();
  /* compact 2 x 3 f32 */
  int64_t shape[2] = {2, 3};
  DLManagedTensor m = managed_of((dl_spec){.data = host,
                                           .device_type = kDLCPU,
                                           .code = kDLFloat,
                                           .bits = 32,
                                           .ndim = 2,
                                           .shape = shape});
  tsr_tensor t = sentinel();
  deleted = 0;
  if (!CHECK_STATUS(tsr_tensor_from_dlpack(device, &m, &t), TSR_OK))
    return;
  CHECK_INT(t.dtype, TSR_DTYPE_F32);
  CHECK_INT(t.rank, 2);
  CHECK_INT(t.shape[0], 2);
  CHECK_INT(t.shape[1], 3);
  CHECK_INT(t.strides[0], 3);
  CHECK_INT(t.strides[1], 1);
  CHECK_INT(t.offset, 0);
  size_t bytes = 0;
  CHECK_STATUS(tsr_buffer_size(t.buffer, &bytes), TSR_OK);
  CHECK_INT(bytes, 24);
  CHECK(read_f32(queue, &t, 4) == host[4]);
  /* zero copy: a write through tessera lands in the producer's array */
  float value = 42.0f;
  REQUIRE_OK(tsr_buffer_write(queue, t.buffer, 4, &value, 4));
  REQUIRE_OK(tsr_queue_finish(queue));
  CHECK(host[1] == 42.0f);
  CHECK_INT(deleted, 0);
  tsr_buffer_destroy(t.buffer);
  CHECK_INT(deleted, 1);
  tsr_buffer_destroy(t.buffer); /* ignored, with a warning */
  CHECK_INT(deleted, 1);

  /* strided, with a byte offset: element (i, j) at host[2 + 8 i + 2 j] */
  fill_host();
  int64_t strides[2] = {8, 2};
  m = managed_of((dl_spec){.data = host,
                           .device_type = kDLCPU,
                           .code = kDLFloat,
                           .bits = 32,
                           .ndim = 2,
                           .shape = shape,
                           .strides = strides,
                           .byte_offset = 8});
  t = sentinel();
  deleted = 0;
  if (CHECK_STATUS(tsr_tensor_from_dlpack(device, &m, &t), TSR_OK)) {
    CHECK_INT(t.offset, 8);
    CHECK_INT(t.strides[0], 8);
    CHECK_INT(t.strides[1], 2);
    CHECK_STATUS(tsr_buffer_size(t.buffer, &bytes), TSR_OK);
    CHECK_INT(bytes, 8 + (8 + 2 * 2 + 1) * 4); /* up to element (1, 2), from data */
    CHECK(read_f32(queue, &t, 1 * 8 + 2 * 2) == host[2 + 12]);
    tsr_buffer_destroy(t.buffer);
    CHECK_INT(deleted, 1);
  }

  /* every dtype: f16, bf16, i32 (4 elements each) */
  struct {
    uint8_t code, bits;
    tsr_dtype want;
    size_t size;
  } dtypes[] = {{kDLFloat, 16, TSR_DTYPE_F16, 2},
                {kDLBfloat, 16, TSR_DTYPE_BF16, 2},
                {kDLInt, 32, TSR_DTYPE_I32, 4},
                {kDLFloat, 32, TSR_DTYPE_F32, 4}};
  uint16_t halves[4] = {0x3c00, 0xc000, 0x3f80, 0x0001};
  int32_t ints[4] = {7, -8, 1 << 30, 0};
  for (size_t i = 0; i < API_COUNT(dtypes); i++) {
    int64_t four = 4;
    void *data = dtypes[i].size == 2        ? (void *)halves
                 : dtypes[i].code == kDLInt ? (void *)ints
                                            : (void *)host;
    m = managed_of((dl_spec){.data = data,
                             .device_type = kDLCPU,
                             .code = dtypes[i].code,
                             .bits = dtypes[i].bits,
                             .ndim = 1,
                             .shape = &four});
    t = sentinel();
    if (!CHECK_STATUS(tsr_tensor_from_dlpack(device, &m, &t), TSR_OK))
      continue;
    CHECK_INT(t.dtype, dtypes[i].want);
    CHECK_STATUS(tsr_buffer_size(t.buffer, &bytes), TSR_OK);
    CHECK_INT(bytes, 4 * dtypes[i].size);
    unsigned char back[16];
    REQUIRE_OK(tsr_buffer_read(queue, t.buffer, 0, back, bytes));
    CHECK(memcmp(back, data, bytes) == 0);
    tsr_buffer_destroy(t.buffer);
  }

  /* rank 0: shape [1] */
  m = managed_of(
      (dl_spec){.data = host + 5, .device_type = kDLCPU, .code = kDLFloat, .bits = 32, .ndim = 0});
  t = sentinel();
  if (CHECK_STATUS(tsr_tensor_from_dlpack(device, &m, &t), TSR_OK)) {
    CHECK_INT(t.rank, 1);
    CHECK_INT(t.shape[0], 1);
    CHECK_INT(t.strides[0], 1);
    CHECK(read_f32(queue, &t, 0) == host[5]);
    tsr_buffer_destroy(t.buffer);
  }

  /* size 0: no data needed, a buffer of its own, the deleter on destroy */
  int64_t empty[2] = {2, 0};
  m = managed_of((dl_spec){.data = NULL,
                           .device_type = kDLCPU,
                           .code = kDLFloat,
                           .bits = 32,
                           .ndim = 2,
                           .shape = empty});
  t = sentinel();
  deleted = 0;
  int wraps = probe->wraps;
  if (CHECK_STATUS(tsr_tensor_from_dlpack(device, &m, &t), TSR_OK)) {
    CHECK_INT(t.shape[0], 2);
    CHECK_INT(t.shape[1], 0);
    CHECK(t.buffer != NULL);
    if (device == probe_device)
      CHECK_INT(probe->wraps, wraps); /* nothing was wrapped */
    tsr_buffer_destroy(t.buffer);
    CHECK_INT(deleted, 1);
  }

  /* versioned, read-only accepted */
  DLManagedTensorVersioned v;
  memset(&v, 0, sizeof v);
  v.version.major = 1;
  v.version.minor = 0;
  v.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  v.dl_tensor = managed_of((dl_spec){.data = host,
                                     .device_type = kDLCPU,
                                     .code = kDLFloat,
                                     .bits = 32,
                                     .ndim = 2,
                                     .shape = shape})
                    .dl_tensor;
  v.deleter = count_delete_versioned;
  deleted_versioned = 0;
  t = sentinel();
  if (CHECK_STATUS(tsr_tensor_from_dlpack_versioned(device, &v, &t), TSR_OK)) {
    CHECK_INT(t.shape[1], 3);
    CHECK_INT(deleted_versioned, 0);
    tsr_buffer_destroy(t.buffer);
    CHECK_INT(deleted_versioned, 1);
  }
}

typedef struct bad_import {
  const char *what;
  dl_spec spec;
  tsr_status status;
  const char *mention;
} bad_import;

static void check_import_errors(void) {
  int64_t shape[2] = {2, 3}, negative[1] = {-1}, three[1] = {3}, back[1] = {-1};
  int64_t huge[2] = {INT64_MAX / 2, 4};
  const bad_import cases[] = {
      {"rank 5", {host, kDLCPU, 0, kDLFloat, 32, 1, 5, shape, NULL, 0}, TSR_ERROR_RANK, "ndim = 5"},
      {"rank -1",
       {host, kDLCPU, 0, kDLFloat, 32, 1, -1, shape, NULL, 0},
       TSR_ERROR_RANK,
       "ndim = -1"},
      {"no shape",
       {host, kDLCPU, 0, kDLFloat, 32, 1, 2, NULL, NULL, 0},
       TSR_ERROR_NULL_ARGUMENT,
       "shape is NULL but ndim = 2"},
      {"negative extent",
       {host, kDLCPU, 0, kDLFloat, 32, 1, 1, negative, NULL, 0},
       TSR_ERROR_BAD_SIZE,
       "shape[0] = -1"},
      {"negative stride",
       {host, kDLCPU, 0, kDLFloat, 32, 1, 1, three, back, 0},
       TSR_ERROR_UNSUPPORTED,
       "strides[0] = -1"},
      {"float64",
       {host, kDLCPU, 0, kDLFloat, 64, 1, 2, shape, NULL, 0},
       TSR_ERROR_UNSUPPORTED,
       "code 2 (kDLFloat), bits 64, lanes 1"},
      {"two lanes",
       {host, kDLCPU, 0, kDLFloat, 32, 2, 2, shape, NULL, 0},
       TSR_ERROR_UNSUPPORTED,
       "bits 32, lanes 2"},
      {"uint8",
       {host, kDLCPU, 0, kDLUInt, 8, 1, 2, shape, NULL, 0},
       TSR_ERROR_UNSUPPORTED,
       "code 1 (kDLUInt), bits 8"},
      {"vulkan memory",
       {host, kDLVulkan, 0, kDLFloat, 32, 1, 2, shape, NULL, 0},
       TSR_ERROR_UNSUPPORTED,
       "device_type 7 (kDLVulkan)"},
      {"CUDA memory",
       {host, kDLCUDA, 0, kDLFloat, 32, 1, 2, shape, NULL, 0},
       TSR_ERROR_WRONG_DEVICE,
       "CUDA device 0 but probe:0 is a \"probe\" device"},
      {"ROCm memory",
       {host, kDLROCM, 1, kDLFloat, 32, 1, 2, shape, NULL, 0},
       TSR_ERROR_WRONG_DEVICE,
       "HIP device 1"},
      {"no data",
       {NULL, kDLCPU, 0, kDLFloat, 32, 1, 2, shape, NULL, 0},
       TSR_ERROR_NULL_ARGUMENT,
       "data is NULL for 6 elements"},
      {"overflow",
       {host, kDLCPU, 0, kDLFloat, 32, 1, 2, huge, NULL, 0},
       TSR_ERROR_BAD_SIZE,
       "overflow"},
  };
  deleted = 0;
  int wraps = probe->wraps;
  for (size_t i = 0; i < API_COUNT(cases); i++) {
    DLManagedTensor m = managed_of(cases[i].spec);
    tsr_tensor t = sentinel();
    printf("import: %s\n", cases[i].what);
    CHECK_STATUS(tsr_tensor_from_dlpack(probe_device, &m, &t), cases[i].status);
    CHECK_ERROR("tsr_tensor_from_dlpack", cases[i].mention);
    CHECK(unchanged(&t));
  }
  CHECK_INT(deleted, 0);          /* the caller still owns every one */
  CHECK_INT(probe->wraps, wraps); /* and nothing was wrapped */

  DLManagedTensor m = managed_of((dl_spec){.data = host,
                                           .device_type = kDLCPU,
                                           .code = kDLFloat,
                                           .bits = 32,
                                           .ndim = 2,
                                           .shape = shape});
  tsr_tensor t = sentinel();
  CHECK_STATUS(tsr_tensor_from_dlpack(NULL, &m, &t), TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_tensor_from_dlpack", "device is NULL");
  CHECK_STATUS(tsr_tensor_from_dlpack(probe_device, NULL, &t), TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_tensor_from_dlpack", "managed is NULL");
  CHECK_STATUS(tsr_tensor_from_dlpack(probe_device, &m, NULL), TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_tensor_from_dlpack", "out is NULL");
  CHECK(unchanged(&t));
  /* the plugin refuses: the stand-in CUDA device takes no host pointer */
  CHECK_STATUS(tsr_tensor_from_dlpack(cuda_device, &m, &t), TSR_ERROR_UNSUPPORTED);
  CHECK_ERROR("tsr_tensor_from_dlpack", "cannot wrap memory of kind 1");
  CHECK(unchanged(&t));

  DLManagedTensorVersioned v;
  memset(&v, 0, sizeof v);
  v.version.major = 2;
  v.version.minor = 3;
  v.dl_tensor = m.dl_tensor;
  v.deleter = count_delete_versioned;
  deleted_versioned = 0;
  CHECK_STATUS(tsr_tensor_from_dlpack_versioned(probe_device, &v, &t), TSR_ERROR_UNSUPPORTED);
  CHECK_ERROR("tsr_tensor_from_dlpack_versioned", "version is 2.3");
  CHECK_STATUS(tsr_tensor_from_dlpack_versioned(probe_device, NULL, &t), TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_tensor_from_dlpack_versioned", "managed is NULL");
  CHECK(unchanged(&t));
  CHECK_INT(deleted, 0);
  CHECK_INT(deleted_versioned, 0);
}

/* ---- exports ---- */

static void check_exports(void) {
  tsr_buffer *buffer = NULL;
  REQUIRE_OK(tsr_buffer_create(probe_device, 64, &buffer));
  float pattern[16];
  for (int i = 0; i < 16; i++)
    pattern[i] = (float)i + 0.25f;
  REQUIRE_OK(tsr_buffer_write(probe_queue, buffer, 0, pattern, sizeof pattern));
  void *mapped = NULL;
  REQUIRE_OK(tsr_buffer_map(buffer, &mapped));

  /* a transposed view at byte 12 */
  int64_t shape[2] = {2, 3}, strides[2] = {1, 2};
  tsr_tensor view;
  REQUIRE_OK(tsr_tensor_strided(buffer, 12, TSR_DTYPE_F32, 2, shape, strides, &view));
  DLManagedTensor *m = NULL;
  if (!CHECK_STATUS(tsr_tensor_to_dlpack(&view, &m), TSR_OK))
    return;
  const DLTensor *dl = &m->dl_tensor;
  CHECK(dl->data == mapped);
  CHECK_INT(dl->device.device_type, kDLCPU);
  CHECK_INT(dl->device.device_id, 0);
  CHECK_INT(dl->ndim, 2);
  CHECK_INT(dl->dtype.code, kDLFloat);
  CHECK_INT(dl->dtype.bits, 32);
  CHECK_INT(dl->dtype.lanes, 1);
  CHECK_INT(dl->shape[0], 2);
  CHECK_INT(dl->shape[1], 3);
  CHECK_INT(dl->strides[0], 1);
  CHECK_INT(dl->strides[1], 2);
  CHECK_INT(dl->byte_offset, 12);
  /* the memory outlives tsr_buffer_destroy until the deleter */
  int frees = probe->frees;
  tsr_buffer_destroy(buffer);
  CHECK_INT(probe->frees, frees);
  size_t bytes;
  CHECK_STATUS(tsr_buffer_size(buffer, &bytes), TSR_ERROR_INVALID_VALUE); /* the handle is dead */
  const float *element = (const float *)((const char *)dl->data + dl->byte_offset);
  CHECK(element[1 * dl->strides[0] + 2 * dl->strides[1]] == pattern[3 + 1 + 4]);
  m->deleter(m);
  CHECK_INT(probe->frees, frees + 1);

  /* two exports: the memory goes with the last deleter */
  REQUIRE_OK(tsr_buffer_create(probe_device, 64, &buffer));
  tsr_tensor whole = tsr_tensor_make(buffer, 0, TSR_DTYPE_BF16, 1, (int64_t[]){32});
  DLManagedTensor *first = NULL;
  DLManagedTensorVersioned *second = NULL;
  REQUIRE_OK(tsr_tensor_to_dlpack(&whole, &first));
  REQUIRE_OK(tsr_tensor_to_dlpack_versioned(&whole, &second));
  CHECK_INT(second->version.major, 1);
  CHECK_INT(second->version.minor, 0);
  CHECK_INT(second->flags, 0);
  CHECK_INT(second->dl_tensor.dtype.code, kDLBfloat);
  CHECK_INT(second->dl_tensor.dtype.bits, 16);
  CHECK_INT(first->dl_tensor.strides[0], 1);
  frees = probe->frees;
  first->deleter(first); /* before destroy: the buffer stays usable */
  CHECK_STATUS(tsr_buffer_size(buffer, &bytes), TSR_OK);
  tsr_buffer_destroy(buffer);
  CHECK_INT(probe->frees, frees);
  second->deleter(second);
  CHECK_INT(probe->frees, frees + 1);

  /* dtype mapping of f16 and i32 */
  REQUIRE_OK(tsr_buffer_create(probe_device, 64, &buffer));
  const struct {
    tsr_dtype dtype;
    uint8_t code, bits;
  } maps[] = {{TSR_DTYPE_F16, kDLFloat, 16}, {TSR_DTYPE_I32, kDLInt, 32}};
  for (size_t i = 0; i < API_COUNT(maps); i++) {
    tsr_tensor t = tsr_tensor_make(buffer, 0, maps[i].dtype, 1, (int64_t[]){8});
    DLManagedTensor *e = NULL;
    if (!CHECK_STATUS(tsr_tensor_to_dlpack(&t, &e), TSR_OK))
      continue;
    CHECK_INT(e->dl_tensor.dtype.code, maps[i].code);
    CHECK_INT(e->dl_tensor.dtype.bits, maps[i].bits);
    e->deleter(e);
  }

  /* bad input: status, sentence, *out untouched, no reference taken */
  DLManagedTensor *const untouched = (DLManagedTensor *)&maps; /* any non-NULL marker */
  struct {
    const char *what;
    tsr_tensor tensor;
    tsr_status status;
    const char *mention;
  } cases[] = {
      {"no buffer", {0}, TSR_ERROR_NULL_ARGUMENT, "tensor->buffer is NULL"},
      {"bad dtype", tsr_tensor_make(buffer, 0, TSR_DTYPE_COUNT_, 1, (int64_t[]){4}),
       TSR_ERROR_INVALID_VALUE, "dtype = 5"},
      {"rank 0", tsr_tensor_make(buffer, 0, TSR_DTYPE_F32, 0, NULL), TSR_ERROR_RANK, "rank = 0"},
      {"past the end", tsr_tensor_make(buffer, 8, TSR_DTYPE_F32, 1, (int64_t[]){15}),
       TSR_ERROR_OUT_OF_BOUNDS, "reaches byte 68 of the 64-byte buffer"},
      {"negative extent", tsr_tensor_make(buffer, 0, TSR_DTYPE_F32, 1, (int64_t[]){-2}),
       TSR_ERROR_BAD_SIZE, "shape[0] = -2"},
  };
  tsr_tensor negative = tsr_tensor_make(buffer, 32, TSR_DTYPE_F32, 1, (int64_t[]){2});
  negative.strides[0] = -1;
  for (size_t i = 0; i < API_COUNT(cases); i++) {
    printf("export: %s\n", cases[i].what);
    DLManagedTensor *e = untouched;
    CHECK_STATUS(tsr_tensor_to_dlpack(&cases[i].tensor, &e), cases[i].status);
    CHECK_ERROR("tsr_tensor_to_dlpack", cases[i].mention);
    CHECK(e == untouched);
  }
  DLManagedTensor *e = untouched;
  CHECK_STATUS(tsr_tensor_to_dlpack(&negative, &e), TSR_ERROR_INVALID_VALUE);
  CHECK_ERROR("tsr_tensor_to_dlpack", "strides[0] = -1 is negative");
  CHECK_STATUS(tsr_tensor_to_dlpack(NULL, &e), TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_tensor_to_dlpack", "tensor is NULL");
  tsr_tensor fine = tsr_tensor_make(buffer, 0, TSR_DTYPE_F32, 1, (int64_t[]){4});
  CHECK_STATUS(tsr_tensor_to_dlpack(&fine, NULL), TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_tensor_to_dlpack", "out is NULL");
  CHECK_STATUS(tsr_tensor_to_dlpack_versioned(&fine, NULL), TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_tensor_to_dlpack_versioned", "out is NULL");
  /* memory without an address (a Vulkan or OpenCL buffer) */
  probe->no_address = 1;
  CHECK_STATUS(tsr_tensor_to_dlpack(&fine, &e), TSR_ERROR_UNSUPPORTED);
  CHECK_ERROR("tsr_tensor_to_dlpack", "memory of probe:0 (the probe plugin) has no address");
  probe->no_address = 0;
  CHECK(e == untouched);
  frees = probe->frees;
  tsr_buffer_destroy(buffer);
  CHECK_INT(probe->frees, frees + 1); /* no failed call kept a reference */
  CHECK_STATUS(tsr_tensor_to_dlpack(&fine, &e), TSR_ERROR_INVALID_VALUE);
  CHECK_ERROR("tsr_tensor_to_dlpack", "was destroyed");
  CHECK(e == untouched);
}

/* Imports exported again, and contexts destroyed before deleters. */
static void check_lifetimes(void) {
  /* import, export, destroy: the producer's deleter waits for the export */
  fill_host();
  int64_t shape[1] = {8};
  DLManagedTensor m = managed_of((dl_spec){.data = host,
                                           .device_type = kDLCPU,
                                           .code = kDLFloat,
                                           .bits = 32,
                                           .ndim = 1,
                                           .shape = shape});
  tsr_tensor t;
  deleted = 0;
  REQUIRE_OK(tsr_tensor_from_dlpack(probe_device, &m, &t));
  DLManagedTensor *e = NULL;
  REQUIRE_OK(tsr_tensor_to_dlpack(&t, &e));
  CHECK(e->dl_tensor.data == (void *)host);
  tsr_buffer_destroy(t.buffer);
  CHECK_INT(deleted, 0);
  e->deleter(e);
  CHECK_INT(deleted, 1);

  /* a second context: its destruction frees an imported buffer (deleter
   * called) and an exported one (the export's deleter then frees itself) */
  tsr_context *other = NULL;
  tsr_device *device = NULL;
  REQUIRE_OK(tsr_context_create(NULL, &other));
  REQUIRE_OK(tsr_device_open(other, "probe", &device));
  deleted = 0;
  REQUIRE_OK(tsr_tensor_from_dlpack(device, &m, &t));
  tsr_buffer *buffer = NULL;
  REQUIRE_OK(tsr_buffer_create(device, 16, &buffer));
  tsr_tensor four = tsr_tensor_make(buffer, 0, TSR_DTYPE_F32, 1, (int64_t[]){4});
  REQUIRE_OK(tsr_tensor_to_dlpack(&four, &e));
  tsr_buffer_destroy(buffer);
  tsr_context_destroy(other);
  CHECK_INT(deleted, 1);
  e->deleter(e); /* after the context: only frees itself (ASan would see more) */
}

/* ---- the stand-in CUDA device ---- */

static void check_cuda(void) {
  tsr_device_info info = {.struct_size = sizeof info};
  REQUIRE_OK(tsr_device_get_info(cuda_device, &info));
  CHECK_INT(info.native_ordinal, 3);
  CHECK_INT(info.backend_index, 0);
  tsr_device_info probe_info = {.struct_size = sizeof probe_info};
  REQUIRE_OK(tsr_device_get_info(probe_device, &probe_info));
  CHECK_INT(probe_info.native_ordinal, -1); /* the probe does not set it */
  /* a caller built before native_ordinal existed */
  tsr_device_info old = {.struct_size = offsetof(tsr_device_info, native_ordinal)};
  CHECK_STATUS(tsr_device_get_info(cuda_device, &old), TSR_OK);
  old.struct_size = offsetof(tsr_device_info, native_ordinal) - 1;
  CHECK_STATUS(tsr_device_get_info(cuda_device, &old), TSR_ERROR_STRUCT_SIZE);

  tsr_device *found = NULL;
  CHECK_STATUS(tsr_device_from_dlpack(context, kDLCUDA, 3, &found), TSR_OK);
  CHECK(found == cuda_device);
  tsr_device *const marker = probe_device;
  found = marker;
  CHECK_STATUS(tsr_device_from_dlpack(context, kDLCUDA, 0, &found), TSR_ERROR_NOT_FOUND);
  CHECK_ERROR("tsr_device_from_dlpack", "CUDA device ordinal 0");
  CHECK_STATUS(tsr_device_from_dlpack(context, kDLROCM, 0, &found), TSR_ERROR_NOT_FOUND);
  CHECK_ERROR("tsr_device_from_dlpack", "no \"hip\" device");
  CHECK_STATUS(tsr_device_from_dlpack(context, kDLVulkan, 0, &found), TSR_ERROR_NOT_FOUND);
  CHECK_ERROR("tsr_device_from_dlpack", "kDLVulkan (device_type 7)");
  CHECK_STATUS(tsr_device_from_dlpack(context, kDLCUDA, -1, &found), TSR_ERROR_INVALID_VALUE);
  CHECK_ERROR("tsr_device_from_dlpack", "device_id = -1");
  CHECK(found == marker);
  CHECK_STATUS(tsr_device_from_dlpack(NULL, kDLCPU, 0, &found), TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_device_from_dlpack", "context is NULL");
  CHECK_STATUS(tsr_device_from_dlpack(context, kDLCPU, 0, NULL), TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_device_from_dlpack", "out is NULL");
  if (cpu_device) {
    CHECK_STATUS(tsr_device_from_dlpack(context, kDLCPU, 0, &found), TSR_OK);
    CHECK(found == cpu_device);
    CHECK_STATUS(tsr_device_from_dlpack(context, kDLCUDAHost, 0, &found), TSR_OK);
    CHECK(found == cpu_device);
  }

  /* imports: the ordinal must match; the plugin gets CUDA device pointers */
  fill_host();
  int64_t shape[1] = {16};
  DLManagedTensor m = managed_of((dl_spec){.data = host,
                                           .device_type = kDLCUDA,
                                           .device_id = 3,
                                           .code = kDLFloat,
                                           .bits = 32,
                                           .ndim = 1,
                                           .shape = shape});
  tsr_tensor t = sentinel();
  deleted = 0;
  if (CHECK_STATUS(tsr_tensor_from_dlpack(cuda_device, &m, &t), TSR_OK)) {
    CHECK_INT(fake_cuda->last_wrap_kind, TSR_EXTERNAL_CUDA_DEVICE_POINTER);
    CHECK_INT(fake_cuda->last_wrap_bytes, 64);
    /* exported again: kDLCUDA with the ordinal, the same address */
    DLManagedTensor *e = NULL;
    if (CHECK_STATUS(tsr_tensor_to_dlpack(&t, &e), TSR_OK)) {
      CHECK_INT(e->dl_tensor.device.device_type, kDLCUDA);
      CHECK_INT(e->dl_tensor.device.device_id, 3);
      CHECK(e->dl_tensor.data == (void *)host);
      e->deleter(e);
    }
    tsr_buffer_destroy(t.buffer);
    CHECK_INT(deleted, 1);
  }
  m.dl_tensor.device.device_type = kDLCUDAManaged;
  m.dl_tensor.device.device_id = 0;
  fake_cuda->last_wrap_kind = 0;
  if (CHECK_STATUS(tsr_tensor_from_dlpack(cuda_device, &m, &t), TSR_OK)) {
    CHECK_INT(fake_cuda->last_wrap_kind, TSR_EXTERNAL_CUDA_DEVICE_POINTER);
    tsr_buffer_destroy(t.buffer);
  }
  m.dl_tensor.device.device_type = kDLCUDA;
  m.dl_tensor.device.device_id = 2;
  t = sentinel();
  deleted = 0;
  CHECK_STATUS(tsr_tensor_from_dlpack(cuda_device, &m, &t), TSR_ERROR_WRONG_DEVICE);
  CHECK_ERROR("tsr_tensor_from_dlpack", "CUDA device 2 but cuda:0 is CUDA device 3");
  CHECK(unchanged(&t));
  CHECK_INT(deleted, 0);
}

static void check_queue_wrap(void) {
  tsr_queue *queue = NULL;
  if (!CHECK_STATUS(tsr_queue_wrap_cuda_stream(cuda_device, 0xabc0, &queue), TSR_OK))
    return;
  CHECK_INT(fake_cuda->last_stream, 0xabc0);
  /* every queue call goes to the wrapped stream */
  tsr_buffer *buffer = NULL;
  REQUIRE_OK(tsr_buffer_create(cuda_device, 256, &buffer));
  float x[8] = {0, 1, -1, 2, -2, 0.5f, 3, -3};
  REQUIRE_OK(tsr_buffer_write(queue, buffer, 0, x, sizeof x));
  tsr_gelu_desc gelu = TSR_GELU_DESC_INIT;
  gelu.x = tsr_tensor_make(buffer, 0, TSR_DTYPE_F32, 1, (int64_t[]){8});
  gelu.y = tsr_tensor_make(buffer, 128, TSR_DTYPE_F32, 1, (int64_t[]){8});
  fake_cuda->last_run_stream = 0;
  CHECK_STATUS(tsr_gelu(queue, &gelu), TSR_OK);
  CHECK_INT(fake_cuda->last_run_stream, 0xabc0);
  fake_cuda->last_finish_stream = 0;
  CHECK_STATUS(tsr_queue_finish(queue), TSR_OK);
  CHECK_INT(fake_cuda->last_finish_stream, 0xabc0);
  float y[8];
  REQUIRE_OK(tsr_buffer_read(queue, buffer, 128, y, sizeof y));
  CHECK(fabsf(y[3] - 1.9544997f) < 1e-5f); /* gelu(2) */
  int released = fake_cuda->wrapped_released;
  tsr_buffer_destroy(buffer);
  tsr_queue_destroy(queue);
  CHECK_INT(fake_cuda->wrapped_released, released + 1);
  /* the default stream is a stream too */
  CHECK_STATUS(tsr_queue_wrap_cuda_stream(cuda_device, 0, &queue), TSR_OK);
  tsr_queue_destroy(queue);

  /* a HIP stream on a CUDA device: the plugin says no */
  tsr_queue *const marker = (tsr_queue *)&released;
  queue = marker;
  CHECK_STATUS(tsr_queue_wrap_hip_stream(cuda_device, 0x10, &queue), TSR_ERROR_UNSUPPORTED);
  CHECK_ERROR("tsr_queue_wrap_hip_stream", "streams of kind 5");
  CHECK(queue == marker);
  CHECK_STATUS(tsr_queue_wrap_cuda_stream(NULL, 0x10, &queue), TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_queue_wrap_cuda_stream", "device is NULL");
  CHECK_STATUS(tsr_queue_wrap_cuda_stream(cuda_device, 0x10, NULL), TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_queue_wrap_cuda_stream", "out is NULL");
  if (cpu_device) { /* no CUDA there, whether its plugin has queue_wrap or not */
    CHECK_STATUS(tsr_queue_wrap_cuda_stream(cpu_device, 0x10, &queue), TSR_ERROR_UNSUPPORTED);
    CHECK_ERROR("tsr_queue_wrap_cuda_stream", "cpu");
    printf("cpu:0 and a CUDA stream: %s\n", tsr_last_error());
  }
  CHECK(queue == marker);
}

/* "oldprobe": the same code with struct_size = TSR_PLUGIN_V2_MIN_SIZE. */
static void check_old_table(void) {
  tsr_device *old = NULL;
  if (!CHECK_STATUS(tsr_device_open(context, "oldprobe", &old), TSR_OK))
    return;
  tsr_queue *queue = NULL;
  CHECK_STATUS(tsr_queue_wrap_cuda_stream(old, 0x20, &queue), TSR_ERROR_UNSUPPORTED);
  CHECK_ERROR("tsr_queue_wrap_cuda_stream",
              "oldprobe:0 is not a CUDA device: the oldprobe plugin cannot wrap native streams");
  /* export: no buffer_export read, the host pointer instead */
  tsr_buffer *buffer = NULL;
  REQUIRE_OK(tsr_buffer_create(old, 32, &buffer));
  void *mapped = NULL;
  REQUIRE_OK(tsr_buffer_map(buffer, &mapped));
  tsr_tensor t = tsr_tensor_make(buffer, 0, TSR_DTYPE_F32, 1, (int64_t[]){8});
  DLManagedTensor *e = NULL;
  if (CHECK_STATUS(tsr_tensor_to_dlpack(&t, &e), TSR_OK)) {
    CHECK(e->dl_tensor.data == mapped);
    e->deleter(e);
  }
  tsr_buffer_destroy(buffer);
}

/* ---- the CPU plugin ---- */

/* Import, op, export on cpu:0: 77 (skip) while its plugin cannot wrap. */
static int check_cpu(void) {
  tsr_context *c = api_context();
  tsr_device *device = api_cpu_device(c);
  tsr_queue *queue = NULL;
  REQUIRE_OK(tsr_queue_create(device, &queue));
  float x[6] = {-2, -1, 0, 0.5f, 1, 2}, y[6] = {0};
  int64_t shape[1] = {6};
  DLManagedTensor in = managed_of((dl_spec){
      .data = x, .device_type = kDLCPU, .code = kDLFloat, .bits = 32, .ndim = 1, .shape = shape});
  DLManagedTensor out = in;
  out.dl_tensor.data = y;
  tsr_tensor tx, ty;
  tsr_status st = tsr_tensor_from_dlpack(device, &in, &tx);
  if (st == TSR_ERROR_UNSUPPORTED && strstr(tsr_last_error(), "cannot wrap")) {
    printf("SKIP: the CPU plugin cannot wrap host memory yet: %s\n", tsr_last_error());
    tsr_context_destroy(c);
    return 77;
  }
  deleted = 0;
  if (CHECK_STATUS(st, TSR_OK) && CHECK_STATUS(tsr_tensor_from_dlpack(device, &out, &ty), TSR_OK)) {
    tsr_gelu_desc gelu = TSR_GELU_DESC_INIT;
    gelu.x = tx;
    gelu.y = ty;
    CHECK_STATUS(tsr_gelu(queue, &gelu), TSR_OK);
    CHECK_STATUS(tsr_queue_finish(queue), TSR_OK);
    for (int i = 0; i < 6; i++) {
      double want = 0.5 * x[i] * (1.0 + erf(x[i] / sqrt(2.0)));
      CHECK(fabs(y[i] - want) < 1e-5);
    }
    DLManagedTensor *e = NULL;
    if (CHECK_STATUS(tsr_tensor_to_dlpack(&ty, &e), TSR_OK)) {
      CHECK(e->dl_tensor.data == (void *)y);
      CHECK_INT(e->dl_tensor.device.device_type, kDLCPU);
      e->deleter(e);
    }
    tsr_buffer_destroy(tx.buffer);
    tsr_buffer_destroy(ty.buffer);
    CHECK_INT(deleted, 2);
  }
  /* an export of a buffer the CPU plugin allocated */
  tsr_buffer *buffer = NULL;
  REQUIRE_OK(tsr_buffer_create(device, 64, &buffer));
  void *mapped = NULL;
  REQUIRE_OK(tsr_buffer_map(buffer, &mapped));
  tsr_tensor t = tsr_tensor_make(buffer, 16, TSR_DTYPE_F32, 1, (int64_t[]){4});
  DLManagedTensor *e = NULL;
  if (CHECK_STATUS(tsr_tensor_to_dlpack(&t, &e), TSR_OK)) {
    CHECK(e->dl_tensor.data == mapped);
    CHECK_INT(e->dl_tensor.byte_offset, 16);
    tsr_buffer_destroy(buffer);
    e->deleter(e);
  }
  tsr_queue_destroy(queue);
  tsr_context_destroy(c);
  return api_finish("test_dlpack cpu");
}

/* Writes `name`.conf for `library` into `dir`. */
static void write_manifest(const char *dir, const char *name, const char *library) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s.conf", dir, name);
  FILE *f = fopen(path, "w");
  REQUIRE(f != NULL);
  fprintf(f, "library = %s\nabi = 2\n", library);
  fclose(f);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "cpu") == 0)
    return check_cpu();
  check_layout();
  /* The probe and the stand-in "cuda" plugin, searched before this build's
   * plugins (so a real CUDA plugin is shadowed). */
  char dir[] = "/tmp/tessera-dlpack-XXXXXX";
  REQUIRE(mkdtemp(dir) != NULL);
  write_manifest(dir, "probe", TEST_PROBE_PLUGIN);
  write_manifest(dir, "cuda", TEST_PROBE_CUDA_PLUGIN);
  write_manifest(dir, "oldprobe", TEST_PROBE_OLD_PLUGIN);
  setenv("TESSERA_ADD_PLUGIN_PATH", dir, 1);
  void *probe_library = dlopen(TEST_PROBE_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  void *cuda_library = dlopen(TEST_PROBE_CUDA_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(probe_library != NULL && cuda_library != NULL);
  probe = dlsym(probe_library, "probe_stats");
  fake_cuda = dlsym(cuda_library, "probe_stats");
  REQUIRE(probe != NULL && fake_cuda != NULL && probe != fake_cuda);

  context = api_context();
  REQUIRE_OK(tsr_device_open(context, "probe", &probe_device));
  REQUIRE_OK(tsr_device_open(context, "cuda", &cuda_device));
  if (tsr_device_open(context, "cpu", &cpu_device) != TSR_OK)
    cpu_device = NULL;
  REQUIRE_OK(tsr_queue_create(probe_device, &probe_queue));

  check_imports(probe_device, probe_queue);
  check_import_errors();
  check_exports();
  check_lifetimes();
  check_cuda();
  check_queue_wrap();
  check_old_table();

  tsr_queue_destroy(probe_queue);
  tsr_context_destroy(context);
  dlclose(cuda_library);
  dlclose(probe_library);
  char path[512];
  snprintf(path, sizeof path, "%s/probe.conf", dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/cuda.conf", dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/oldprobe.conf", dir);
  unlink(path);
  rmdir(dir);
  return api_finish("test_dlpack");
}
