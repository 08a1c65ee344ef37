# SPDX-License-Identifier: Apache-2.0
"""DLPack: the C structs (dlpack.h, v1.0) and the PyCapsule plumbing of the
Python protocol (__dlpack__ / __dlpack_device__)."""
import ctypes

# DLDeviceType values used here.
KDL_CPU = 1
KDL_CUDA = 2
KDL_CUDA_HOST = 3
KDL_OPENCL = 4
KDL_VULKAN = 7
KDL_ROCM = 10
KDL_ROCM_HOST = 11
KDL_CUDA_MANAGED = 13
# Memory the host can read and write through the data pointer.
HOST_ACCESSIBLE = (KDL_CPU, KDL_CUDA_HOST, KDL_ROCM_HOST, KDL_CUDA_MANAGED)

# DLDataTypeCode values.
KDL_INT, KDL_UINT, KDL_FLOAT, KDL_BFLOAT = 0, 1, 2, 4

FLAG_READ_ONLY = 1 << 0

NAME_LEGACY = b"dltensor"
NAME_VERSIONED = b"dltensor_versioned"
NAME_LEGACY_USED = b"used_dltensor"
NAME_VERSIONED_USED = b"used_dltensor_versioned"


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.c_void_p),  # void (*)(DLManagedTensor *)
]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),  # void (*)(DLManagedTensorVersioned *)
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


C_NAMES = {
    DLDevice: "DLDevice",
    DLDataType: "DLDataType",
    DLTensor: "DLTensor",
    DLManagedTensor: "DLManagedTensor",
    DLPackVersion: "DLPackVersion",
    DLManagedTensorVersioned: "DLManagedTensorVersioned",
}

# --- the CPython capsule API, called with raw pointers so that a destructor
# running on a dying capsule never touches its reference count.
_api = ctypes.pythonapi
CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, CAPSULE_DESTRUCTOR]
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int

_raw_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _api))
_raw_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))

# Capsule names must outlive their capsules: module-lifetime buffers.
_NAME_BUFFERS = {name: ctypes.create_string_buffer(name) for name in
                 (NAME_LEGACY, NAME_VERSIONED, NAME_LEGACY_USED, NAME_VERSIONED_USED)}


def capsule_name(capsule):
    return _api.PyCapsule_GetName(capsule)


def capsule_pointer(capsule, name):
    return _api.PyCapsule_GetPointer(capsule, name)


def mark_capsule_used(capsule, versioned):
    """Renames a consumed capsule so its producer's destructor leaves it alone."""
    name = NAME_VERSIONED_USED if versioned else NAME_LEGACY_USED
    if _api.PyCapsule_SetName(capsule, ctypes.cast(_NAME_BUFFERS[name], ctypes.c_char_p)) != 0:
        raise RuntimeError("PyCapsule_SetName failed")


def _call_deleter(managed_pointer, struct_class):
    managed = struct_class.from_address(managed_pointer)
    if managed.deleter:
        DELETER(managed.deleter)(managed_pointer)


def _destroy_unconsumed_capsule(capsule_pointer_value):
    # A consumer renames the capsule when it takes ownership; only a capsule
    # still carrying its original name owns the managed tensor.
    for name, struct_class in ((NAME_LEGACY, DLManagedTensor),
                               (NAME_VERSIONED, DLManagedTensorVersioned)):
        if _raw_is_valid(capsule_pointer_value, name):
            _call_deleter(_raw_get_pointer(capsule_pointer_value, name), struct_class)
            return


_CAPSULE_DESTRUCTOR = CAPSULE_DESTRUCTOR(_destroy_unconsumed_capsule)


def make_capsule(managed_pointer, versioned):
    """A capsule owning `managed_pointer` (a DLManagedTensor[Versioned] *)."""
    name = NAME_VERSIONED if versioned else NAME_LEGACY
    return _api.PyCapsule_New(managed_pointer, ctypes.cast(_NAME_BUFFERS[name], ctypes.c_char_p),
                              _CAPSULE_DESTRUCTOR)


def managed_from_capsule(capsule):
    """(pointer, struct, versioned) of a fresh DLPack capsule; raises when it
    is not one (already consumed, or another kind of capsule)."""
    name = capsule_name(capsule)
    if name == NAME_VERSIONED:
        pointer = capsule_pointer(capsule, NAME_VERSIONED)
        return pointer, DLManagedTensorVersioned.from_address(pointer), True
    if name == NAME_LEGACY:
        pointer = capsule_pointer(capsule, NAME_LEGACY)
        return pointer, DLManagedTensor.from_address(pointer), False
    raise ValueError("__dlpack__ returned a capsule named %r, expected 'dltensor' or "
                     "'dltensor_versioned' (a capsule can be consumed only once)" % (name,))
