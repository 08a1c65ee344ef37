/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tessera and DLPack: zero-copy exchange of tensors with other libraries
 * (PyTorch, JAX, CuPy, NumPy) through DLPack's C structs.
 *
 * The DLPack types come from <dlpack/dlpack.h> when it is available (or was
 * included first); otherwise this header declares the documented DLPack ABI
 * itself (the 1.0 layout, which is the 0.x layout plus the versioned struct).
 * DLPack 0.x headers lack the versioned struct: it is then declared here too.
 * Define TSR_DLPACK_OWN_DECLARATIONS to use the declarations here even when
 * the system header exists (tests compare the two layouts). Either way the
 * structs are ABI-identical, so a tensor from any DLPack producer works.
 *
 * Ownership: on TSR_OK an import (tsr_tensor_from_dlpack*) owns the managed
 * tensor and an export (tsr_tensor_to_dlpack*) hands one to the caller, which
 * must call its deleter exactly once. On failure nothing changes hands.
 */
#ifndef TESSERA_TESSERA_DLPACK_H
#define TESSERA_TESSERA_DLPACK_H

#include <stdint.h>

#include "tessera.h"

#if !defined(TSR_DLPACK_OWN_DECLARATIONS) && !defined(DLPACK_DLPACK_H_) && defined(__has_include)
#if __has_include(<dlpack/dlpack.h>)
#include <dlpack/dlpack.h>
#endif
#endif

#ifndef DLPACK_DLPACK_H_
/* No DLPack header: the documented ABI, declared here. Defining its include
 * guard keeps a later #include <dlpack/dlpack.h> from declaring it twice. */
#define DLPACK_DLPACK_H_
#define TSR_DLPACK_DECLARED_HERE 1

#ifdef __cplusplus
extern "C" {
#endif

#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 0

typedef enum {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3, /* pinned host memory (cudaMallocHost) */
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11, /* pinned host memory (hipMallocHost) */
  kDLExtDev = 12,
  kDLCUDAManaged = 13, /* cudaMallocManaged */
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16
} DLDeviceType;

typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  kDLComplex = 5U,
  kDLBool = 6U
} DLDataTypeCode;

typedef struct {
  uint8_t code; /* a DLDataTypeCode */
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void *data; /* the allocation; the tensor starts byte_offset bytes in */
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides; /* elements; NULL: compact row-major */
  uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

#ifdef __cplusplus
}
#endif
#endif /* !DLPACK_DLPACK_H_ */

/* DLPack 1.0's versioned struct: with the declarations above, or when the
 * DLPack header in use predates it (Debian 12's libdlpack-dev is 0.6). */
#if defined(TSR_DLPACK_DECLARED_HERE) || !defined(DLPACK_MAJOR_VERSION) || DLPACK_MAJOR_VERSION < 1
#ifndef TSR_DLPACK_VERSIONED_DECLARED_HERE
#define TSR_DLPACK_VERSIONED_DECLARED_HERE 1
#ifdef __cplusplus
extern "C" {
#endif
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned *self);
  uint64_t flags; /* DLPACK_FLAG_BITMASK_* */
  DLTensor dl_tensor;
} DLManagedTensorVersioned;
#ifdef __cplusplus
}
#endif
#endif
#endif

#ifndef DLPACK_FLAG_BITMASK_READ_ONLY
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#endif
#ifndef DLPACK_FLAG_BITMASK_IS_COPIED
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Wraps a DLPack tensor's memory as a tessera tensor on `device`, without
 * copying. `device` must be able to use that memory in place:
 * - kDLCPU, kDLCUDAHost, kDLCUDAManaged, kDLROCMHost: host memory (a host
 *   pointer; on a "cuda" device the CUDA kinds are wrapped as device
 *   pointers, on a "hip" device kDLROCMHost likewise);
 * - kDLCUDA: a "cuda" device whose CUDA ordinal (tsr_device_info's
 *   native_ordinal) is device_id; kDLROCM: likewise a "hip" device.
 * tsr_device_from_dlpack finds that device. dtypes: float32, float16,
 * bfloat16, int32, one lane. Strides (in elements) must be >= 0; NULL means
 * compact row-major. Rank 0 becomes shape [1]; at most TSR_MAX_RANK.
 * The buffer covers every element the shape and strides reach, from the
 * allocation's start `data` (so its alignment is the allocation's), and
 * out->offset = byte_offset. A tensor with no element gets a one-element
 * buffer of its own instead (there is nothing to share).
 * On TSR_OK tessera owns `managed`: out->buffer is a new buffer the caller
 * destroys with tsr_buffer_destroy, and the managed tensor's deleter (if not
 * NULL) runs exactly once, when that buffer's memory is released (after the
 * work queued on it, and after any DLPack export of it was deleted; or when
 * the context is destroyed). On failure the caller still owns `managed` and
 * *out is unchanged. Errors: TSR_ERROR_NULL_ARGUMENT, TSR_ERROR_RANK,
 * TSR_ERROR_BAD_SIZE (negative extent, byte size overflow),
 * TSR_ERROR_UNSUPPORTED (dtype, lanes, negative stride, device type tessera
 * cannot use, the plugin cannot wrap it), TSR_ERROR_WRONG_DEVICE (memory of
 * another device than `device`). */
TSR_API tsr_status tsr_tensor_from_dlpack(tsr_device *device, DLManagedTensor *managed,
                                          tsr_tensor *out);
/* The same for DLPack 1.0's versioned struct; version.major must be 1.
 * DLPACK_FLAG_BITMASK_READ_ONLY is accepted, but tessera cannot enforce it:
 * pass such a tensor only as an op input, never as an output. */
TSR_API tsr_status tsr_tensor_from_dlpack_versioned(tsr_device *device,
                                                    DLManagedTensorVersioned *managed,
                                                    tsr_tensor *out);

/* Hands a tessera view to another library, without copying: data is the
 * buffer's native address, byte_offset the tensor's offset, shape and
 * strides the view's (strides always given), dtype mapped back; device
 * kDLCPU (id 0) for host-addressable memory, kDLCUDA with the CUDA ordinal,
 * kDLROCM with the HIP ordinal. The buffer's memory stays allocated until the
 * returned tensor's deleter runs, even when the application destroys the
 * buffer first (the handle is dead then; the memory is not); destroying the
 * context frees it regardless, after which the tensor must not be used (its
 * deleter is still safe to call). The caller calls (*out)->deleter(*out)
 * exactly once. The caller orders access: tessera work queued on the buffer
 * must have finished (tsr_queue_finish) before another library reads it.
 * TSR_ERROR_UNSUPPORTED for memory without such an address (Vulkan,
 * OpenCL devices that are not host visible). */
TSR_API tsr_status tsr_tensor_to_dlpack(const tsr_tensor *tensor, DLManagedTensor **out);
/* The same as DLPack 1.0's versioned struct (version 1.0, flags 0). */
TSR_API tsr_status tsr_tensor_to_dlpack_versioned(const tsr_tensor *tensor,
                                                  DLManagedTensorVersioned **out);

/* The device that can use memory of a DLPack device zero-copy: kDLCPU (and
 * the host kinds kDLCUDAHost, kDLCUDAManaged, kDLROCMHost) the CPU plugin's
 * "cpu:0"; kDLCUDA id N the "cuda" device with CUDA ordinal N; kDLROCM id N
 * the "hip" device with HIP ordinal N. `device_type` is a DLDeviceType.
 * TSR_ERROR_NOT_FOUND, naming what was looked for, when the context has no
 * such device; TSR_ERROR_INVALID_VALUE for a negative device_id. */
TSR_API tsr_status tsr_device_from_dlpack(tsr_context *context, int32_t device_type,
                                          int32_t device_id, tsr_device **out);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_TESSERA_DLPACK_H */
