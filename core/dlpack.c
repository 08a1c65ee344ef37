/* SPDX-License-Identifier: Apache-2.0 */
/* DLPack import and export (tessera_dlpack.h). An import wraps the
 * producer's memory through the plugin's buffer_wrap and runs the producer's
 * deleter when the buffer's memory is released; an export takes a reference
 * on the buffer (memory.c) that the export's deleter drops, so the memory
 * outlives tsr_buffer_destroy while another library still holds it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tessera/tessera_dlpack.h"

static const char *dl_device_name(int32_t type) {
  switch (type) {
  case kDLCPU:
    return "kDLCPU";
  case kDLCUDA:
    return "kDLCUDA";
  case kDLCUDAHost:
    return "kDLCUDAHost";
  case kDLOpenCL:
    return "kDLOpenCL";
  case kDLVulkan:
    return "kDLVulkan";
  case kDLMetal:
    return "kDLMetal";
  case kDLROCM:
    return "kDLROCM";
  case kDLROCMHost:
    return "kDLROCMHost";
  case kDLCUDAManaged:
    return "kDLCUDAManaged";
  default:
    return "an unknown device type";
  }
}

static const char *dl_code_name(unsigned code) {
  static const char *const names[] = {"kDLInt",    "kDLUInt",    "kDLFloat", "kDLOpaqueHandle",
                                      "kDLBfloat", "kDLComplex", "kDLBool"};
  return code < sizeof names / sizeof names[0] ? names[code] : "unknown";
}

static tsr_dtype dtype_from_dl(DLDataType t) {
  if (t.lanes != 1)
    return TSR_DTYPE_INVALID;
  if (t.code == kDLFloat && t.bits == 32)
    return TSR_DTYPE_F32;
  if (t.code == kDLFloat && t.bits == 16)
    return TSR_DTYPE_F16;
  if (t.code == kDLBfloat && t.bits == 16)
    return TSR_DTYPE_BF16;
  if (t.code == kDLInt && t.bits == 32)
    return TSR_DTYPE_I32;
  return TSR_DTYPE_INVALID;
}

static DLDataType dtype_to_dl(tsr_dtype dtype) {
  DLDataType t = {.code = kDLFloat, .bits = 32, .lanes = 1};
  if (dtype == TSR_DTYPE_F16)
    t.bits = 16;
  else if (dtype == TSR_DTYPE_BF16)
    t = (DLDataType){.code = kDLBfloat, .bits = 16, .lanes = 1};
  else if (dtype == TSR_DTYPE_I32)
    t.code = kDLInt;
  return t;
}

static bool has_backend(const tsr_device *device, const char *name) {
  return strcmp(device->info.backend, name) == 0;
}

/* The CUDA / HIP ordinal: the plugin's word, else its device index (the
 * same unless it skipped a GPU). */
static int32_t native_ordinal(const tsr_device *device) {
  return device->info.native_ordinal >= 0 ? device->info.native_ordinal
                                          : (int32_t)device->info.backend_index;
}

/* The external kind under which `device` can use memory of DLPack device
 * `dl`; fails as `call` when it cannot. */
static tsr_status import_kind(tsr_device *device, DLDevice dl, tsr_external_kind *kind,
                              const char *call) {
  const bool cuda = has_backend(device, "cuda"), hip = has_backend(device, "hip");
  const int32_t type = (int32_t)dl.device_type;
  switch (type) {
  case kDLCPU:
    *kind = TSR_EXTERNAL_HOST_POINTER;
    return TSR_OK;
  case kDLCUDAHost:
  case kDLCUDAManaged: /* addressable by the GPU with the same pointer */
    *kind = cuda ? TSR_EXTERNAL_CUDA_DEVICE_POINTER : TSR_EXTERNAL_HOST_POINTER;
    return TSR_OK;
  case kDLROCMHost:
    *kind = hip ? TSR_EXTERNAL_HIP_DEVICE_POINTER : TSR_EXTERNAL_HOST_POINTER;
    return TSR_OK;
  case kDLCUDA:
  case kDLROCM: {
    const bool want_cuda = type == kDLCUDA;
    const char *vendor = want_cuda ? "CUDA" : "HIP";
    if (want_cuda ? !cuda : !hip)
      return tsr__fail(TSR_ERROR_WRONG_DEVICE, call,
                       "the tensor is in %s memory of %s device %d but %s is a \"%s\" device "
                       "(tsr_device_from_dlpack finds the right one)",
                       dl_device_name(type), vendor, (int)dl.device_id, device->info.selector,
                       device->info.backend);
    if (dl.device_id != native_ordinal(device))
      return tsr__fail(TSR_ERROR_WRONG_DEVICE, call,
                       "the tensor is in memory of %s device %d but %s is %s device %d", vendor,
                       (int)dl.device_id, device->info.selector, vendor, native_ordinal(device));
    *kind = want_cuda ? TSR_EXTERNAL_CUDA_DEVICE_POINTER : TSR_EXTERNAL_HIP_DEVICE_POINTER;
    return TSR_OK;
  }
  default:
    return tsr__fail(TSR_ERROR_UNSUPPORTED, call,
                     "device_type %d (%s) cannot be imported: tessera takes kDLCPU, kDLCUDA, "
                     "kDLCUDAHost, kDLCUDAManaged, kDLROCM and kDLROCMHost memory",
                     (int)type, dl_device_name(type));
  }
}

/* Checks a DLTensor and wraps its memory; on TSR_OK `release(arg)` runs
 * when the buffer's memory goes. */
static tsr_status import(tsr_device *device, const DLTensor *dl, void (*release)(void *), void *arg,
                         tsr_tensor *out, const char *call) {
  if (dl->ndim < 0 || dl->ndim > TSR_MAX_RANK)
    return tsr__fail(TSR_ERROR_RANK, call, "dl_tensor.ndim = %d (tessera takes 0 to %d)",
                     (int)dl->ndim, TSR_MAX_RANK);
  if (dl->ndim > 0 && !dl->shape)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "dl_tensor.shape is NULL but ndim = %d",
                     (int)dl->ndim);
  tsr_dtype dtype = dtype_from_dl(dl->dtype);
  if (dtype == TSR_DTYPE_INVALID)
    return tsr__fail(TSR_ERROR_UNSUPPORTED, call,
                     "dl_tensor.dtype is code %u (%s), bits %u, lanes %u: tessera takes float32, "
                     "float16, bfloat16 and int32 with 1 lane",
                     (unsigned)dl->dtype.code, dl_code_name(dl->dtype.code),
                     (unsigned)dl->dtype.bits, (unsigned)dl->dtype.lanes);
  const int64_t esize = (int64_t)tsr_dtype_size(dtype);
  tsr_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = dtype;
  t.rank = dl->ndim > 0 ? dl->ndim : 1;
  t.shape[0] = t.strides[0] = 1; /* rank 0: one element */
  int64_t numel = 1, last = 0;   /* last: the farthest element reached, in elements */
  for (int32_t i = 0; i < dl->ndim; i++) {
    if (dl->shape[i] < 0)
      return tsr__fail(TSR_ERROR_BAD_SIZE, call, "dl_tensor.shape[%d] = %lld is negative", (int)i,
                       (long long)dl->shape[i]);
    if (__builtin_mul_overflow(numel, dl->shape[i], &numel))
      return tsr__fail(TSR_ERROR_BAD_SIZE, call, "the element count overflows at shape[%d] = %lld",
                       (int)i, (long long)dl->shape[i]);
    t.shape[i] = dl->shape[i];
  }
  int64_t dense = 1;
  for (int32_t i = dl->ndim - 1; i >= 0; i--) {
    int64_t stride = dense;
    if (dl->strides) {
      stride = dl->strides[i];
      if (stride < 0)
        return tsr__fail(TSR_ERROR_UNSUPPORTED, call,
                         "dl_tensor.strides[%d] = %lld: negative strides are not supported", (int)i,
                         (long long)stride);
    }
    t.strides[i] = stride;
    dense *= t.shape[i] > 0 ? t.shape[i] : 1; /* numel fits, so this does */
  }
  for (int32_t i = 0; i < dl->ndim && numel > 0; i++) {
    int64_t reach;
    if (__builtin_mul_overflow(t.shape[i] - 1, t.strides[i], &reach) ||
        __builtin_add_overflow(last, reach, &last))
      return tsr__fail(TSR_ERROR_BAD_SIZE, call, "the elements' offsets overflow at strides[%d]",
                       (int)i);
  }
  int64_t span = 0;
  uint64_t bytes = 0;
  if (numel > 0 && (__builtin_mul_overflow(last + 1, esize, &span) ||
                    __builtin_add_overflow(dl->byte_offset, (uint64_t)span, &bytes) ||
                    bytes > (uint64_t)INT64_MAX || bytes > (uint64_t)SIZE_MAX))
    return tsr__fail(TSR_ERROR_BAD_SIZE, call,
                     "byte_offset %llu plus the tensor's %lld elements' reach overflows",
                     (unsigned long long)dl->byte_offset, (long long)last + 1);
  tsr_external_kind kind;
  tsr_status st = import_kind(device, dl->device, &kind, call);
  if (st != TSR_OK)
    return st;
  tsr_buffer *buffer = NULL;
  if (numel == 0) {
    /* Nothing to share, and a wrap needs bytes: a one-element buffer. */
    st = tsr_buffer_create(device, (size_t)esize, &buffer);
    if (st != TSR_OK) {
      char why[512];
      tsr__strlcpy(why, tsr_last_error(), sizeof why);
      return tsr__fail(st, call, "%s", why);
    }
  } else {
    if (!dl->data)
      return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "dl_tensor.data is NULL for %lld elements",
                       (long long)numel);
    /* From data, not data + byte_offset: the allocation's start carries its
     * alignment, which kernels may use. */
    st = tsr__buffer_wrap(device, kind, dl->data, (size_t)bytes, &buffer, call);
    if (st != TSR_OK)
      return st;
    t.offset = (size_t)dl->byte_offset;
  }
  buffer->on_free = release;
  buffer->on_free_arg = arg;
  t.buffer = buffer;
  *out = t;
  return TSR_OK;
}

static void release_managed(void *arg) {
  DLManagedTensor *managed = arg;
  if (managed->deleter)
    managed->deleter(managed);
}

static void release_versioned(void *arg) {
  DLManagedTensorVersioned *managed = arg;
  if (managed->deleter)
    managed->deleter(managed);
}

tsr_status tsr_tensor_from_dlpack(tsr_device *device, DLManagedTensor *managed, tsr_tensor *out) {
  static const char call[] = "tsr_tensor_from_dlpack";
  tsr__clear_error();
  if (!device || !managed || !out)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL",
                     !device    ? "device"
                     : !managed ? "managed"
                                : "out");
  return import(device, &managed->dl_tensor, release_managed, managed, out, call);
}

tsr_status tsr_tensor_from_dlpack_versioned(tsr_device *device, DLManagedTensorVersioned *managed,
                                            tsr_tensor *out) {
  static const char call[] = "tsr_tensor_from_dlpack_versioned";
  tsr__clear_error();
  if (!device || !managed || !out)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL",
                     !device    ? "device"
                     : !managed ? "managed"
                                : "out");
  /* A later major version may lay dl_tensor out differently: read nothing. */
  if (managed->version.major != 1)
    return tsr__fail(TSR_ERROR_UNSUPPORTED, call,
                     "managed->version is %u.%u but tessera reads DLPack 1.x",
                     (unsigned)managed->version.major, (unsigned)managed->version.minor);
  return import(device, &managed->dl_tensor, release_versioned, managed, out, call);
}

/* ---- export ---- */

/* One allocation per export: what the deleter frees. */
typedef struct export_record {
  tsr__export_link base; /* first: the context's list */
  DLManagedTensor plain;
  DLManagedTensorVersioned versioned;
  int64_t shape[TSR_MAX_RANK];
  int64_t strides[TSR_MAX_RANK];
} export_record;

static void export_release(export_record *record) {
  tsr_buffer *buffer = record->base.buffer;
  if (buffer) { /* NULL: the context went first and freed the buffer */
    tsr__export_remove(buffer->device->context, &record->base);
    tsr__buffer_unref(buffer);
  }
  free(record);
}

static void delete_plain(DLManagedTensor *self) {
  export_release(self->manager_ctx);
}

static void delete_versioned(DLManagedTensorVersioned *self) {
  export_release(self->manager_ctx);
}

/* Checks the view, finds its address and fills a record holding a reference
 * on the buffer. */
static tsr_status export_tensor(const tsr_tensor *tensor, const void *out, export_record **record,
                                const char *call) {
  tsr__clear_error();
  if (!tensor || !out || !tensor->buffer)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL",
                     !tensor ? "tensor"
                     : !out  ? "out"
                             : "tensor->buffer");
  tsr_buffer *buffer = tensor->buffer;
  if (!tsr__buffer_live(buffer))
    return tsr__fail(TSR_ERROR_INVALID_VALUE, call,
                     "tensor->buffer (%p) was destroyed by tsr_buffer_destroy", (void *)buffer);
  if (tsr_dtype_size(tensor->dtype) == 0)
    return tsr__fail(TSR_ERROR_INVALID_VALUE, call, "tensor->dtype = %d is not a tessera dtype",
                     (int)tensor->dtype);
  if (tensor->rank < 1 || tensor->rank > TSR_MAX_RANK)
    return tsr__fail(TSR_ERROR_RANK, call, "tensor->rank = %d (must be 1 to %d)", (int)tensor->rank,
                     TSR_MAX_RANK);
  int64_t numel = 1, last = 0;
  for (int32_t i = 0; i < tensor->rank; i++) {
    if (tensor->shape[i] < 0 || __builtin_mul_overflow(numel, tensor->shape[i], &numel))
      return tsr__fail(TSR_ERROR_BAD_SIZE, call, "tensor->shape[%d] = %lld", (int)i,
                       (long long)tensor->shape[i]);
    if (tensor->strides[i] < 0)
      return tsr__fail(TSR_ERROR_INVALID_VALUE, call, "tensor->strides[%d] = %lld is negative",
                       (int)i, (long long)tensor->strides[i]);
  }
  for (int32_t i = 0; i < tensor->rank && numel > 0; i++) {
    int64_t reach;
    if (__builtin_mul_overflow(tensor->shape[i] - 1, tensor->strides[i], &reach) ||
        __builtin_add_overflow(last, reach, &last))
      return tsr__fail(TSR_ERROR_BAD_SIZE, call, "the elements' offsets overflow at strides[%d]",
                       (int)i);
  }
  const uint64_t esize = tsr_dtype_size(tensor->dtype);
  uint64_t end = tensor->offset;
  if (numel > 0 && (__builtin_mul_overflow((uint64_t)last + 1, esize, &end) ||
                    __builtin_add_overflow(end, (uint64_t)tensor->offset, &end)))
    end = UINT64_MAX;
  if (end > buffer->size)
    return tsr__fail(TSR_ERROR_OUT_OF_BOUNDS, call,
                     "the view reaches byte %llu of the %zu-byte buffer (offset %zu)",
                     (unsigned long long)end, buffer->size, tensor->offset);

  tsr_device *device = buffer->device;
  const tsr_plugin_v2 *t = device->plugin->table;
  int32_t kind = 0;
  uint64_t address = 0;
  tsr_status st = TSR_ERROR_UNSUPPORTED;
  if (t->buffer_export)
    st = t->buffer_export(buffer->handle, &kind, &address);
  if (st == TSR_ERROR_UNSUPPORTED) {
    char ignored[8];
    tsr__take_plugin_error(ignored, sizeof ignored); /* the fallback may answer */
    void *host =
        t->buffer_host_pointer ? t->buffer_host_pointer(device->handle, buffer->handle) : NULL;
    if (!host)
      return tsr__fail(TSR_ERROR_UNSUPPORTED, call,
                       "memory of %s (the %s plugin) has no address another library can use",
                       device->info.selector, device->info.backend);
    kind = TSR_EXTERNAL_HOST_POINTER;
    address = (uint64_t)(uintptr_t)host;
  } else if (st != TSR_OK) {
    return tsr__fail_plugin(st, call, "the plugin could not give the buffer's address");
  }
  DLDevice dl_device = {.device_type = kDLCPU, .device_id = 0};
  if (kind == TSR_EXTERNAL_CUDA_DEVICE_POINTER)
    dl_device = (DLDevice){.device_type = kDLCUDA, .device_id = native_ordinal(device)};
  else if (kind == TSR_EXTERNAL_HIP_DEVICE_POINTER)
    dl_device = (DLDevice){.device_type = kDLROCM, .device_id = native_ordinal(device)};
  else if (kind != TSR_EXTERNAL_HOST_POINTER)
    return tsr__fail(TSR_ERROR_BACKEND, call, "the %s plugin gave address kind %d for a buffer",
                     device->info.backend, (int)kind);

  export_record *r = calloc(1, sizeof *r);
  if (!r)
    return tsr__fail(TSR_ERROR_OUT_OF_MEMORY, call, "out of host memory");
  if (!tsr__buffer_ref(buffer)) {
    free(r);
    return tsr__fail(TSR_ERROR_INVALID_VALUE, call,
                     "tensor->buffer (%p) was destroyed by tsr_buffer_destroy", (void *)buffer);
  }
  r->base.buffer = buffer;
  for (int32_t i = 0; i < tensor->rank; i++) {
    r->shape[i] = tensor->shape[i];
    r->strides[i] = tensor->strides[i];
  }
  DLTensor dl = {
      .data = (void *)(uintptr_t)address,
      .device = dl_device,
      .ndim = tensor->rank,
      .dtype = dtype_to_dl(tensor->dtype),
      .shape = r->shape,
      .strides = r->strides,
      .byte_offset = tensor->offset,
  };
  r->plain.dl_tensor = dl;
  r->versioned.dl_tensor = dl;
  tsr__export_add(device->context, &r->base);
  *record = r;
  return TSR_OK;
}

tsr_status tsr_tensor_to_dlpack(const tsr_tensor *tensor, DLManagedTensor **out) {
  export_record *r;
  tsr_status st = export_tensor(tensor, out, &r, "tsr_tensor_to_dlpack");
  if (st != TSR_OK)
    return st;
  r->plain.manager_ctx = r;
  r->plain.deleter = delete_plain;
  *out = &r->plain;
  return TSR_OK;
}

tsr_status tsr_tensor_to_dlpack_versioned(const tsr_tensor *tensor,
                                          DLManagedTensorVersioned **out) {
  export_record *r;
  tsr_status st = export_tensor(tensor, out, &r, "tsr_tensor_to_dlpack_versioned");
  if (st != TSR_OK)
    return st;
  r->versioned.version.major = 1;
  r->versioned.version.minor = 0;
  r->versioned.manager_ctx = r;
  r->versioned.deleter = delete_versioned;
  r->versioned.flags = 0;
  *out = &r->versioned;
  return TSR_OK;
}

/* ---- devices ---- */

tsr_status tsr_device_from_dlpack(tsr_context *context, int32_t device_type, int32_t device_id,
                                  tsr_device **out) {
  static const char call[] = "tsr_device_from_dlpack";
  tsr__clear_error();
  if (!context || !out)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL", !context ? "context" : "out");
  if (device_id < 0)
    return tsr__fail(TSR_ERROR_INVALID_VALUE, call, "device_id = %d is negative", (int)device_id);
  const char *backend;
  bool host = false;
  switch (device_type) {
  case kDLCPU:
  case kDLCUDAHost:
  case kDLCUDAManaged:
  case kDLROCMHost:
    backend = "cpu";
    host = true;
    break;
  case kDLCUDA:
    backend = "cuda";
    break;
  case kDLROCM:
    backend = "hip";
    break;
  default:
    return tsr__fail(TSR_ERROR_NOT_FOUND, call,
                     "no tessera device uses %s (device_type %d) memory in place: tessera takes "
                     "kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged, kDLROCM and kDLROCMHost",
                     dl_device_name(device_type), (int)device_type);
  }
  for (uint32_t i = 0; i < context->device_count; i++) {
    tsr_device *d = context->devices[i];
    if (!has_backend(d, backend))
      continue;
    if (host ? d->info.backend_index == 0 : native_ordinal(d) == device_id) {
      *out = d;
      return TSR_OK;
    }
  }
  if (host)
    return tsr__fail(TSR_ERROR_NOT_FOUND, call,
                     "%s memory is used by the CPU plugin's cpu:0, which this context lacks",
                     dl_device_name(device_type));
  return tsr__fail(TSR_ERROR_NOT_FOUND, call,
                   "no \"%s\" device of this context has %s device ordinal %d (%s device %d)",
                   backend, device_type == kDLCUDA ? "CUDA" : "HIP", (int)device_id,
                   dl_device_name(device_type), (int)device_id);
}
