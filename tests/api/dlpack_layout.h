/* SPDX-License-Identifier: Apache-2.0 */
/* The DLPack struct layout as one translation unit sees it, so that
 * test_dlpack.c can compare tessera's own declarations
 * (dlpack_layout_own.c) with the system header's and the documented ABI. */
#ifndef TESSERA_TEST_DLPACK_LAYOUT_H
#define TESSERA_TEST_DLPACK_LAYOUT_H

#include <stddef.h>

typedef struct dlpack_layout {
  size_t device_size, device_id;
  size_t dtype_size, dtype_bits, dtype_lanes;
  size_t tensor_size, tensor_device, tensor_ndim, tensor_dtype, tensor_shape, tensor_strides,
      tensor_byte_offset;
  size_t managed_size, managed_ctx, managed_deleter;
  size_t version_size, version_minor;
  size_t versioned_size, versioned_ctx, versioned_deleter, versioned_flags, versioned_tensor;
  size_t device_type_size; /* the enum's */
  unsigned long read_only_flag, is_copied_flag;
} dlpack_layout;

/* Fills `out` from the DLPack declarations in scope. */
#define DLPACK_LAYOUT_FILL(out)                                                                    \
  do {                                                                                             \
    (out)->device_size = sizeof(DLDevice);                                                         \
    (out)->device_id = offsetof(DLDevice, device_id);                                              \
    (out)->dtype_size = sizeof(DLDataType);                                                        \
    (out)->dtype_bits = offsetof(DLDataType, bits);                                                \
    (out)->dtype_lanes = offsetof(DLDataType, lanes);                                              \
    (out)->tensor_size = sizeof(DLTensor);                                                         \
    (out)->tensor_device = offsetof(DLTensor, device);                                             \
    (out)->tensor_ndim = offsetof(DLTensor, ndim);                                                 \
    (out)->tensor_dtype = offsetof(DLTensor, dtype);                                               \
    (out)->tensor_shape = offsetof(DLTensor, shape);                                               \
    (out)->tensor_strides = offsetof(DLTensor, strides);                                           \
    (out)->tensor_byte_offset = offsetof(DLTensor, byte_offset);                                   \
    (out)->managed_size = sizeof(DLManagedTensor);                                                 \
    (out)->managed_ctx = offsetof(DLManagedTensor, manager_ctx);                                   \
    (out)->managed_deleter = offsetof(DLManagedTensor, deleter);                                   \
    (out)->version_size = sizeof(DLPackVersion);                                                   \
    (out)->version_minor = offsetof(DLPackVersion, minor);                                         \
    (out)->versioned_size = sizeof(DLManagedTensorVersioned);                                      \
    (out)->versioned_ctx = offsetof(DLManagedTensorVersioned, manager_ctx);                        \
    (out)->versioned_deleter = offsetof(DLManagedTensorVersioned, deleter);                        \
    (out)->versioned_flags = offsetof(DLManagedTensorVersioned, flags);                            \
    (out)->versioned_tensor = offsetof(DLManagedTensorVersioned, dl_tensor);                       \
    (out)->device_type_size = sizeof(DLDeviceType);                                                \
    (out)->read_only_flag = DLPACK_FLAG_BITMASK_READ_ONLY;                                         \
    (out)->is_copied_flag = DLPACK_FLAG_BITMASK_IS_COPIED;                                         \
  } while (0)

/* dlpack_layout_own.c: tessera_dlpack.h's own declarations. */
void dlpack_layout_own(dlpack_layout *out);
/* The enum constants of the own declarations, in this order: kDLCPU, kDLCUDA,
 * kDLCUDAHost, kDLOpenCL, kDLVulkan, kDLMetal, kDLVPI, kDLROCM, kDLROCMHost,
 * kDLExtDev, kDLCUDAManaged, kDLInt, kDLUInt, kDLFloat, kDLOpaqueHandle,
 * kDLBfloat, kDLComplex. */
#define DLPACK_LAYOUT_CONSTANTS 17
void dlpack_constants_own(int out[DLPACK_LAYOUT_CONSTANTS]);

#define DLPACK_CONSTANTS_FILL(out)                                                                 \
  do {                                                                                             \
    int values_[DLPACK_LAYOUT_CONSTANTS] = {                                                       \
        kDLCPU,  kDLCUDA,  kDLCUDAHost,     kDLOpenCL, kDLVulkan,      kDLMetal,                   \
        kDLVPI,  kDLROCM,  kDLROCMHost,     kDLExtDev, kDLCUDAManaged, kDLInt,                     \
        kDLUInt, kDLFloat, kDLOpaqueHandle, kDLBfloat, kDLComplex};                                \
    for (int i_ = 0; i_ < DLPACK_LAYOUT_CONSTANTS; i_++)                                           \
      (out)[i_] = values_[i_];                                                                     \
  } while (0)

#endif /* TESSERA_TEST_DLPACK_LAYOUT_H */
