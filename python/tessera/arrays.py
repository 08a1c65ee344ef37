# SPDX-License-Identifier: Apache-2.0
"""tessera.Tensor and the import of DLPack arrays (NumPy, PyTorch, CuPy, JAX).

Import rules (docs/PYTHON.md, "Arrays and zero-copy"):
- copy=None (default): wrap the array's memory in place. When the device cannot
  wrap it and the array lives in memory that is the device's own (host memory
  on the native cpu backend, CUDA memory on cuda, ROCm memory on hip), fail:
  that is never silently a copy. Otherwise (NumPy memory given to vulkan:0)
  copy in, and copy outputs back after the op.
- copy=False: always wrap in place, or fail.
- copy=True: always copy through tsr_buffer_write / tsr_buffer_read.
"""
import ctypes
import sys

from . import _abi, _dlpack, _lib
from ._device import device as _device_by_selector, device_for
from .errors import python_error, make_error

_DTYPE_BY_DLPACK = {
    (_dlpack.KDL_FLOAT, 32): _abi.DTYPE_F32,
    (_dlpack.KDL_FLOAT, 16): _abi.DTYPE_F16,
    (_dlpack.KDL_BFLOAT, 16): _abi.DTYPE_BF16,
    (_dlpack.KDL_INT, 32): _abi.DTYPE_I32,
}
_DLPACK_BY_DTYPE = {value: key for key, value in _DTYPE_BY_DLPACK.items()}
_DTYPE_ALIASES = {"float32": "f32", "float16": "f16", "half": "f16", "bfloat16": "bf16",
                  "int32": "i32", "f32": "f32", "f16": "f16", "bf16": "bf16", "i32": "i32"}
# Statuses after which a copy may stand in for a wrap that did not work.
_WRAP_REFUSALS = (_abi.STATUS["TSR_ERROR_UNSUPPORTED"], _abi.STATUS["TSR_ERROR_WRONG_DEVICE"])


def dtype_name(dtype):
    """Normalises "float32", "f32", numpy/torch dtypes (by str) to f32/f16/bf16/i32."""
    text = str(dtype).rsplit(".", 1)[-1]
    name = _DTYPE_ALIASES.get(text)
    if name is None:
        raise python_error("TSR_ERROR_INVALID_VALUE",
                           "dtype %r is not one of f32, f16, bf16, i32" % (dtype,))
    return name


class BFloat16View:
    """Marks a 16-bit integer array (NumPy has no bfloat16) as holding bf16
    bits: tessera.bfloat16(np_uint16_array)."""

    _tessera_reinterpret = _abi.DTYPE_BF16

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def bfloat16(array):
    """Views a uint16/int16 array's elements as bf16 bit patterns."""
    return BFloat16View(array)


def _unwrap(array):
    return array.array if isinstance(array, BFloat16View) else array


def framework_of(array):
    """"numpy", "torch", "cupy", "jax", "tessera" or another top-level module name."""
    return type(_unwrap(array)).__module__.split(".", 1)[0]


def _row_major_strides(shape):
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= max(int(extent), 1)
    return tuple(reversed(strides))


def _span_elements(shape, strides):
    if any(extent == 0 for extent in shape):
        return 0
    return 1 + sum((extent - 1) * stride for extent, stride in zip(shape, strides))


class Tensor:
    """A tessera tensor: a tsr_tensor view of a buffer on one device, plus what
    keeps the memory alive. Speaks DLPack (numpy.from_dlpack(t),
    torch.from_dlpack(t)). Made by tessera.empty, tessera.from_dlpack, or
    returned by ops whose inputs are not NumPy/PyTorch/CuPy arrays."""

    def __init__(self, device, view, owns_buffer=True, keepalive=(), writeback=None):
        self.device = device
        self.view = view
        self._owns_buffer = owns_buffer
        self._keepalive = list(keepalive)
        self._writeback = writeback  # (host address, bytes) of a copied output
        self._copied_from = None  # (host address, bytes) the copy path read

    @property
    def _tessera_device(self):
        return self.device

    @property
    def shape(self):
        return tuple(self.view.shape[i] for i in range(self.view.rank))

    @property
    def strides(self):
        """In elements, as in tsr_tensor."""
        return tuple(self.view.strides[i] for i in range(self.view.rank))

    @property
    def dtype(self):
        return _abi.DTYPE_NAMES.get(self.view.dtype, "invalid")

    @property
    def itemsize(self):
        return _abi.DTYPE_SIZES.get(self.view.dtype, 0)

    def __repr__(self):
        return "<tessera.Tensor %s %s on %s>" % (self.dtype, list(self.shape),
                                                 self.device.selector)

    def close(self):
        """Releases the buffer now (tsr_buffer_destroy waits for queued work on
        it); for an imported array this gives the producer's memory back."""
        buffer = self.view.buffer
        if buffer and self._owns_buffer:
            self.view.buffer = None
            _lib.library().tsr_buffer_destroy(buffer)
        self._keepalive = []

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: modules may be gone
            pass

    def _copy_back(self, queue):
        if self._writeback is not None:
            address, size = self._writeback
            _lib.check(_lib.library().tsr_buffer_read(queue, self.view.buffer, 0, address, size))

    def to(self, device):
        """A copy of this tensor on `device` (a Device or a selector such as
        "cuda:1"), with the same strides: tsr_buffer_copy of the span the view
        covers, peer to peer between GPUs of one plugin, staged through host
        memory between plugins. Returns when the copy is done."""
        device = _device_by_selector(device) if not hasattr(device, "handle") else device
        span = _span_elements(self.shape, self.strides)
        size = max(span, 1) * self.itemsize
        buffer = ctypes.c_void_p()
        _lib.check(_lib.library().tsr_buffer_create(device.handle, size, ctypes.byref(buffer)))
        view = _abi.Tensor(buffer=buffer.value, offset=0, dtype=self.view.dtype,
                           rank=self.view.rank)
        for i in range(self.view.rank):
            view.shape[i], view.strides[i] = self.view.shape[i], self.view.strides[i]
        result = Tensor(device, view)
        queue, lock = self.device.queue()
        with lock:
            if span:
                _lib.check(_lib.library().tsr_buffer_copy(
                    queue, self.view.buffer, self.view.offset, buffer.value, 0,
                    span * self.itemsize))
            _lib.check(_lib.library().tsr_queue_finish(queue))
        return result

    def numpy(self):
        """A NumPy copy of the contents (bf16 as uint16 bit patterns)."""
        import numpy
        numpy_dtype = {"f32": numpy.float32, "f16": numpy.float16, "bf16": numpy.uint16,
                       "i32": numpy.int32}[self.dtype]
        span = _span_elements(self.shape, self.strides)
        raw = numpy.empty(max(span, 1), dtype=numpy_dtype)
        queue, lock = self.device.queue()
        with lock:
            if span:
                _lib.check(_lib.library().tsr_buffer_read(
                    queue, self.view.buffer, self.view.offset, raw.ctypes.data,
                    span * self.itemsize))
        item = raw.itemsize
        view = numpy.lib.stride_tricks.as_strided(
            raw, self.shape, tuple(stride * item for stride in self.strides))
        return numpy.array(view, copy=True)

    def __dlpack_device__(self):
        cached = getattr(self, "_dlpack_device", None)
        if cached is None:
            cached = self.device.dlpack_device()
            if _lib.has("tsr_tensor_to_dlpack"):
                # The library knows the native ordinal; ask it with a throwaway export.
                managed = ctypes.c_void_p()
                if _lib.library().tsr_tensor_to_dlpack(ctypes.byref(self.view),
                                                       ctypes.byref(managed)) == _abi.OK:
                    exported = _dlpack.DLManagedTensor.from_address(managed.value)
                    cached = (exported.dl_tensor.device.device_type,
                              exported.dl_tensor.device.device_id)
                    _dlpack.DELETER(exported.deleter)(managed.value)
            self._dlpack_device = cached
        return cached

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        # Ops finish their own queue before returning a Tensor, so `stream` needs
        # no ordering here.
        if copy:
            raise BufferError("tessera.Tensor.__dlpack__: copy=True is not supported")
        if dl_device is not None and tuple(dl_device) != tuple(self.__dlpack_device__()):
            raise BufferError("tessera.Tensor.__dlpack__: cannot export to device %r"
                              % (tuple(dl_device),))
        versioned = (max_version is not None and max_version[0] >= 1
                     and _lib.has("tsr_tensor_to_dlpack_versioned"))
        function = "tsr_tensor_to_dlpack_versioned" if versioned else "tsr_tensor_to_dlpack"
        if _lib.has(function):
            managed = ctypes.c_void_p()
            _lib.check(getattr(_lib.library(), function)(ctypes.byref(self.view),
                                                         ctypes.byref(managed)))
            return _dlpack.make_capsule(managed.value, versioned)
        return _export_mapped(self)


# --- export without tsr_tensor_to_dlpack: a host-visible buffer, mapped.
class _ExportRecord(ctypes.Structure):
    _fields_ = [("managed", _dlpack.DLManagedTensor),
                ("shape", ctypes.c_int64 * _abi.MAX_RANK),
                ("strides", ctypes.c_int64 * _abi.MAX_RANK)]


_exports = {}
_export_keys = iter(range(1, sys.maxsize))


def _release_export(managed_address):
    key = _dlpack.DLManagedTensor.from_address(managed_address).manager_ctx
    _exports.pop(key, None)


_EXPORT_DELETER = _dlpack.DELETER(_release_export)


def _export_mapped(tensor):
    host = ctypes.c_void_p()
    status = _lib.library().tsr_buffer_map(tensor.view.buffer, ctypes.byref(host))
    if status != _abi.OK:
        raise make_error(status, _lib.last_error() + " (tessera.Tensor.__dlpack__ needs "
                         "tsr_tensor_to_dlpack or a host-visible buffer)")
    record = _ExportRecord()
    key = next(_export_keys)
    _exports[key] = (record, tensor)
    dl = record.managed.dl_tensor
    dl.data = host.value
    dl.byte_offset = tensor.view.offset
    dl.device.device_type, dl.device.device_id = _dlpack.KDL_CPU, 0
    dl.ndim = tensor.view.rank
    dl.dtype.code, dl.dtype.bits = _DLPACK_BY_DTYPE[tensor.view.dtype]
    dl.dtype.lanes = 1
    for i in range(tensor.view.rank):
        record.shape[i] = tensor.view.shape[i]
        record.strides[i] = tensor.view.strides[i]
    dl.shape = ctypes.cast(record.shape, ctypes.POINTER(ctypes.c_int64))
    dl.strides = ctypes.cast(record.strides, ctypes.POINTER(ctypes.c_int64))
    record.managed.manager_ctx = key
    record.managed.deleter = ctypes.cast(_EXPORT_DELETER, ctypes.c_void_p).value
    return _dlpack.make_capsule(ctypes.addressof(record.managed), False)


def empty(shape, dtype="f32", device=None):
    """An uninitialised row-major tessera.Tensor allocated on `device`."""
    device = _device_by_selector(device) if not hasattr(device, "handle") else device
    dtype_value = _abi.DTYPE_BY_NAME[dtype_name(dtype)]
    shape = tuple(int(extent) for extent in shape)
    if not 1 <= len(shape) <= _abi.MAX_RANK:
        raise python_error("TSR_ERROR_RANK", "tessera.empty: shape %r has rank %d, not 1..%d"
                           % (shape, len(shape), _abi.MAX_RANK))
    size = _abi.DTYPE_SIZES[dtype_value]
    for extent in shape:
        size *= extent
    buffer = ctypes.c_void_p()
    _lib.check(_lib.library().tsr_buffer_create(device.handle, size, ctypes.byref(buffer)))
    view = _abi.Tensor(buffer=buffer.value, offset=0, dtype=dtype_value, rank=len(shape))
    for i, (extent, stride) in enumerate(zip(shape, _row_major_strides(shape))):
        view.shape[i], view.strides[i] = extent, stride
    return Tensor(device, view)


def _capsule_of(array, stream):
    kwargs = {} if stream is None else {"stream": stream}
    try:
        return array.__dlpack__(max_version=(1, 0), **kwargs)
    except TypeError:  # producers before DLPack 1.0 (NumPy 1.24) take no max_version
        return array.__dlpack__(**kwargs)


def _aliasing_expected(device, dl_device_type):
    if dl_device_type in _dlpack.HOST_ACCESSIBLE:
        return device.backend == "cpu"
    if dl_device_type == _dlpack.KDL_CUDA:
        return device.backend == "cuda"
    if dl_device_type == _dlpack.KDL_ROCM:
        return device.backend == "hip"
    return False


def import_array(array, device, *, copy=None, writable=False, stream=None, queue=None,
                 what="array"):
    """A Tensor viewing `array` on `device` (see the module's rules). `queue`
    orders the copy-in of the copy path; `stream` is passed to __dlpack__."""
    if isinstance(array, Tensor):
        if array.device is not device:
            raise python_error("TSR_ERROR_WRONG_DEVICE", "%s is a tessera.Tensor on %s, not %s"
                               % (what, array.device.selector, device.selector))
        return array
    source = _unwrap(array)
    if not hasattr(source, "__dlpack__"):
        raise python_error("TSR_ERROR_INVALID_VALUE",
                           "%s: %s is not a DLPack array (no __dlpack__)"
                           % (what, type(source).__name__))
    capsule = _capsule_of(source, stream)
    address, managed, versioned = _dlpack.managed_from_capsule(capsule)
    dl = managed.dl_tensor
    if versioned and writable and managed.flags & _dlpack.FLAG_READ_ONLY:
        raise python_error("TSR_ERROR_INVALID_VALUE", "%s is read-only but the op writes it"
                           % what)
    reinterpret = getattr(array, "_tessera_reinterpret", None)
    if reinterpret is not None:
        if dl.dtype.bits != 16 or dl.dtype.code not in (_dlpack.KDL_INT, _dlpack.KDL_UINT):
            raise python_error("TSR_ERROR_DTYPE_MISMATCH",
                               "tessera.bfloat16 needs a 16-bit integer array, %s has code %d "
                               "bits %d" % (what, dl.dtype.code, dl.dtype.bits))
        dl.dtype.code = _dlpack.KDL_BFLOAT  # the capsule's struct is ours to adjust until used
    keep = (source, capsule)
    refusal = None
    if copy is not True:
        function = ("tsr_tensor_from_dlpack_versioned" if versioned
                    else "tsr_tensor_from_dlpack")
        if _lib.has(function):
            view = _abi.Tensor()
            status = getattr(_lib.library(), function)(device.handle, address,
                                                       ctypes.byref(view))
            if status == _abi.OK:
                _dlpack.mark_capsule_used(capsule, versioned)
                return Tensor(device, view, keepalive=(source,))
            refusal = (status, _lib.last_error())
        else:
            view, refusal = _wrap_manually(device, dl, what)
            if refusal is None:
                return Tensor(device, view, keepalive=keep)
        if refusal[0] not in _WRAP_REFUSALS:
            raise make_error(*refusal)
        if copy is False or _aliasing_expected(device, dl.device.device_type):
            status, message = refusal
            raise make_error(status, "%s (%s could not be used in place on %s; pass copy=True "
                             "to copy it)" % (message, what, device.selector))
    return _copy_in(device, dl, keep, writable, queue, what)


def _shape_strides_dtype(dl, what):
    key = (dl.dtype.code, dl.dtype.bits)
    dtype = _DTYPE_BY_DLPACK.get(key)
    if dtype is None or dl.dtype.lanes != 1:
        raise python_error("TSR_ERROR_DTYPE_MISMATCH",
                           "%s has DLPack dtype code %d, %d bits, %d lanes: not f32, f16, bf16 "
                           "or i32" % (what, dl.dtype.code, dl.dtype.bits, dl.dtype.lanes))
    if not 1 <= dl.ndim <= _abi.MAX_RANK:
        raise python_error("TSR_ERROR_RANK", "%s has rank %d; tessera tensors have rank 1..%d"
                           % (what, dl.ndim, _abi.MAX_RANK))
    shape = tuple(dl.shape[i] for i in range(dl.ndim))
    strides = (tuple(dl.strides[i] for i in range(dl.ndim)) if dl.strides
               else _row_major_strides(shape))
    if any(stride < 0 for stride in strides):
        raise python_error("TSR_ERROR_INVALID_VALUE", "%s has negative strides %r"
                           % (what, strides))
    return shape, strides, dtype


def _view(buffer, offset, dtype, shape, strides):
    view = _abi.Tensor(buffer=buffer, offset=offset, dtype=dtype, rank=len(shape))
    for i, (extent, stride) in enumerate(zip(shape, strides)):
        view.shape[i], view.strides[i] = extent, stride
    return view


def _wrap_manually(device, dl, what):
    """Wraps the DLTensor's memory with tsr_buffer_wrap_*: (view, None) or
    (None, (status, message)) when the device refuses."""
    shape, strides, dtype = _shape_strides_dtype(dl, what)
    size = (dl.byte_offset + _span_elements(shape, strides) * _abi.DTYPE_SIZES[dtype])
    lib = _lib.library()
    buffer = ctypes.c_void_p()
    kind = dl.device.device_type
    if kind in _dlpack.HOST_ACCESSIBLE:
        status = lib.tsr_buffer_wrap_host(device.handle, dl.data, size, ctypes.byref(buffer))
    elif kind == _dlpack.KDL_CUDA:
        status = lib.tsr_buffer_wrap_cuda(device.handle, dl.data or 0, size, ctypes.byref(buffer))
    elif kind == _dlpack.KDL_ROCM:
        status = lib.tsr_buffer_wrap_hip(device.handle, dl.data or 0, size, ctypes.byref(buffer))
    else:
        return None, (_abi.STATUS["TSR_ERROR_UNSUPPORTED"],
                      "%s: DLPack device type %d cannot be wrapped" % (what, kind))
    if status != _abi.OK:
        return None, (status, _lib.last_error())
    return _view(buffer.value, dl.byte_offset, dtype, shape, strides), None


def _copy_in(device, dl, keep, writable, queue, what):
    if dl.device.device_type not in _dlpack.HOST_ACCESSIBLE:
        raise python_error("TSR_ERROR_UNSUPPORTED",
                           "%s lives on DLPack device type %d, which tessera cannot copy to %s "
                           "(only host memory is copied)" % (what, dl.device.device_type,
                                                             device.selector))
    shape, strides, dtype = _shape_strides_dtype(dl, what)
    size = _span_elements(shape, strides) * _abi.DTYPE_SIZES[dtype]
    lib = _lib.library()
    buffer = ctypes.c_void_p()
    _lib.check(lib.tsr_buffer_create(device.handle, size, ctypes.byref(buffer)))
    tensor = Tensor(device, _view(buffer.value, 0, dtype, shape, strides), keepalive=keep)
    host = (dl.data or 0) + dl.byte_offset
    # Outputs are copied in too: gaps between strided elements and an in-place
    # accumulator must survive the copy back.
    _lib.check(lib.tsr_buffer_write(queue, buffer.value, 0, host, size))
    tensor._copied_from = (host, size)
    if writable:
        tensor._writeback = tensor._copied_from
    return tensor


def from_dlpack(array, device=None, copy=None):
    """A tessera.Tensor for any DLPack array, kept for reuse across ops
    (avoids importing it on every call). Same copy rules as the ops."""
    device = device_for(array) if device is None else _device_by_selector(device)
    queue, lock = device.queue()
    with lock:
        tensor = import_array(array, device, copy=copy, writable=False, queue=queue)
        _lib.check(_lib.library().tsr_queue_finish(queue))
    return tensor


def numpy_dtype(dtype_value):
    import numpy
    return {_abi.DTYPE_F32: numpy.float32, _abi.DTYPE_F16: numpy.float16,
            _abi.DTYPE_BF16: numpy.uint16, _abi.DTYPE_I32: numpy.int32}[dtype_value]


def allocate_like(reference, shape, dtype_value, device):
    """A new array for an op's output: of the reference input's framework where
    it can hold the dtype (NumPy: np.empty, bf16 as uint16; PyTorch: torch.empty
    on the input's device; CuPy: cupy.empty), else a tessera.Tensor on `device`.
    Returns (user-facing result, what to import)."""
    framework = framework_of(reference)
    source = _unwrap(reference)
    shape = tuple(int(extent) for extent in shape)
    if framework == "numpy":
        import numpy
        result = numpy.empty(shape, dtype=numpy_dtype(dtype_value))
        return result, (BFloat16View(result) if dtype_value == _abi.DTYPE_BF16 else result)
    if framework == "torch":
        torch = sys.modules["torch"]
        torch_dtype = {_abi.DTYPE_F32: torch.float32, _abi.DTYPE_F16: torch.float16,
                       _abi.DTYPE_BF16: torch.bfloat16, _abi.DTYPE_I32: torch.int32}[dtype_value]
        result = torch.empty(shape, dtype=torch_dtype, device=source.device)
        return result, result
    if framework == "cupy" and dtype_value != _abi.DTYPE_BF16:
        cupy = sys.modules["cupy"]
        with source.device:
            result = cupy.empty(shape, dtype=numpy_dtype(dtype_value))
        return result, result
    result = empty(shape, _abi.DTYPE_NAMES[dtype_value], device)
    return result, result
