# SPDX-License-Identifier: Apache-2.0
"""Contexts, devices and the queues ops run on."""
import ctypes
import threading

from . import _abi, _dlpack, _lib
from .errors import python_error

_default_context = None
_default_lock = threading.Lock()


class Context:
    """A tsr_context: the loaded plugins and their devices.

    The default context (tessera.context()) is created on first use and lives
    until the process exits; it is never destroyed, so tensors that outlive
    the interpreter's shutdown order never touch a freed context.
    """

    def __init__(self, backends=None, disable_backends=None, add_plugin_path=None):
        lib = _lib.library()
        options = _abi.new_desc(_abi.ContextOptions)
        self._option_strings = [s.encode() if s is not None else None
                                for s in (backends, disable_backends, add_plugin_path)]
        options.backends, options.disable_backends, options.add_plugin_path = \
            self._option_strings
        handle = ctypes.c_void_p()
        _lib.check(lib.tsr_context_create(ctypes.byref(options), ctypes.byref(handle)))
        self.handle = handle.value
        self._devices = {}
        self._lock = threading.Lock()

    def _device_for_handle(self, handle):
        with self._lock:
            device = self._devices.get(handle)
            if device is None:
                device = Device(self, handle)
                self._devices[handle] = device
            return device

    def devices(self):
        """Every device of the loaded plugins, in tessera's stable order."""
        lib = _lib.library()
        count = ctypes.c_uint32()
        _lib.check(lib.tsr_device_count(self.handle, ctypes.byref(count)))
        result = []
        for index in range(count.value):
            handle = ctypes.c_void_p()
            _lib.check(lib.tsr_device_get(self.handle, index, ctypes.byref(handle)))
            result.append(self._device_for_handle(handle.value))
        return result

    def device(self, selector=None):
        """The device a selector names ("cpu", "cuda:0", "vulkan:0", "gpu",
        "best", an index; None: TESSERA_DEVICE, else "best")."""
        if isinstance(selector, Device):
            return selector
        handle = ctypes.c_void_p()
        encoded = None if selector is None else str(selector).encode()
        _lib.check(_lib.library().tsr_device_open(self.handle, encoded, ctypes.byref(handle)))
        return self._device_for_handle(handle.value)

    def device_from_dlpack(self, device_type, device_id):
        """The device that holds memory of a DLPack device (type, id)."""
        lib = _lib.library()
        if _lib.has("tsr_device_from_dlpack"):
            handle = ctypes.c_void_p()
            _lib.check(lib.tsr_device_from_dlpack(self.handle, device_type, device_id,
                                                  ctypes.byref(handle)))
            return self._device_for_handle(handle.value)
        selector = _SELECTOR_BY_DLPACK_TYPE.get(device_type)
        if selector is None:
            raise python_error("TSR_ERROR_NOT_FOUND",
                               "device_for: no tessera backend holds DLPack device type %d "
                               "(id %d)" % (device_type, device_id))
        if device_type in _dlpack.HOST_ACCESSIBLE:
            return self.device("cpu")
        return self.device("%s:%d" % (selector, device_id))

    def plugin_reports(self):
        """What happened to each plugin manifest: list of dicts (name, state, reason...)."""
        lib = _lib.library()
        count = ctypes.c_uint32()
        _lib.check(lib.tsr_plugin_count(self.handle, ctypes.byref(count)))
        reports = []
        for index in range(count.value):
            report = _abi.new_desc(_abi.PluginReport)
            _lib.check(lib.tsr_plugin_get_report(self.handle, index, ctypes.byref(report)))
            reports.append({
                "name": report.name.decode(), "manifest": report.manifest.decode(),
                "library": report.library.decode(),
                "state": ("loaded", "skipped", "filtered")[report.state],
                "abi_version": report.abi_version, "device_count": report.device_count,
                "reason": report.reason.decode(),
            })
        return reports

    def close(self):
        """Destroys the context and everything made from it. Tensors made on its
        devices must not be used afterwards. The default context refuses."""
        if self is _default_context:
            raise python_error("TSR_ERROR_INVALID_VALUE",
                               "Context.close: the default context lives until exit")
        if self.handle:
            for device in self._devices.values():
                device._forget_queues()
            _lib.library().tsr_context_destroy(self.handle)
            self.handle = None


_SELECTOR_BY_DLPACK_TYPE = {
    _dlpack.KDL_CPU: "cpu", _dlpack.KDL_CUDA_HOST: "cpu", _dlpack.KDL_ROCM_HOST: "cpu",
    _dlpack.KDL_CUDA_MANAGED: "cpu", _dlpack.KDL_CUDA: "cuda", _dlpack.KDL_ROCM: "hip",
}


class Device:
    """One tessera device. Info fields are plain attributes (see docs/PYTHON.md)."""

    def __init__(self, context, handle):
        self.context = context
        self.handle = handle
        info = _abi.new_desc(_abi.DeviceInfo)
        _lib.check(_lib.library().tsr_device_get_info(handle, ctypes.byref(info)))
        text = lambda field: getattr(info, field).decode("utf-8", "replace")
        self.backend = text("backend")
        self.selector = text("selector")
        self.backend_index = info.backend_index
        self.type = _abi.DEVICE_TYPE_NAMES.get(info.type, "other")
        self.vendor = text("vendor")
        self.name = text("name")
        self.arch = text("arch")
        self.physical_id = text("physical_id")
        self.driver_version = text("driver_version")
        self.memory = info.memory_bytes
        self.compute_units = info.compute_units
        self.dtypes = tuple(name for value, name in sorted(_abi.DTYPE_NAMES.items())
                            if info.dtype_mask & (1 << value))
        self.ops = tuple(name for value, name in enumerate(_abi.OP_NAMES)
                         if info.op_mask & (1 << value))
        self.host_visible = bool(info.host_visible)
        self.device_key = text("device_key")
        # CUDA/HIP ordinal (-1: none); older libraries lack the field and leave it 0.
        self.native_ordinal = info.native_ordinal
        self.details = dict(line.split(": ", 1) if ": " in line else (line, "")
                            for line in text("details").splitlines() if line)
        self._queue = None
        self._queue_lock = threading.RLock()
        self._stream_queues = {}

    def __repr__(self):
        return "<tessera.Device %s %r>" % (self.selector, self.name)

    def info(self):
        """The device's facts as a dict."""
        keys = ("selector", "backend", "backend_index", "type", "vendor", "name", "arch",
                "physical_id", "driver_version", "memory", "compute_units", "dtypes", "ops",
                "host_visible", "device_key", "native_ordinal", "details")
        return {key: getattr(self, key) for key in keys}

    @property
    def memory_aliases_host(self):
        """Whether host (NumPy) memory is this device's own memory, so an op on
        it is expected to run in place (the native cpu backend)."""
        return self.backend == "cpu"

    def dlpack_device(self):
        """(DLDeviceType, id) of memory this device allocates and exports."""
        ordinal = self.native_ordinal if self.native_ordinal >= 0 else self.backend_index
        if self.backend == "cuda":
            return (_dlpack.KDL_CUDA, ordinal)
        if self.backend == "hip":
            return (_dlpack.KDL_ROCM, ordinal)
        return (_dlpack.KDL_CPU, 0)

    def queue(self):
        """The device's own queue (created on first use), with the lock that
        keeps it to one thread at a time."""
        with self._queue_lock:
            if self._queue is None:
                handle = ctypes.c_void_p()
                _lib.check(_lib.library().tsr_queue_create(self.handle, ctypes.byref(handle)))
                self._queue = handle.value
            return self._queue, self._queue_lock

    def stream_queue(self, stream, kind, owner=None):
        """A queue wrapping the caller's CUDA/HIP stream (kind "cuda" or "hip"),
        cached per stream handle; `owner`, the framework's stream object, is
        kept alive with it so the stream outlives the queue."""
        key = (kind, stream)
        with self._queue_lock:
            entry = self._stream_queues.get(key)
            queue = entry[0] if entry else None
            if queue is None:
                function = "tsr_queue_wrap_%s_stream" % kind
                if not _lib.has(function):
                    raise python_error("TSR_ERROR_UNSUPPORTED",
                                       "%s: this libtessera has no %s" % (self.selector, function))
                handle = ctypes.c_void_p()
                _lib.check(getattr(_lib.library(), function)(self.handle, stream,
                                                             ctypes.byref(handle)))
                queue = handle.value
                self._stream_queues[key] = (queue, owner)
            return queue, self._queue_lock

    def _forget_queues(self):
        self._queue = None
        self._stream_queues.clear()

    def synchronize(self):
        """Waits for the device queue's work (ops on wrapped streams excepted)."""
        queue, lock = self.queue()
        with lock:
            _lib.check(_lib.library().tsr_queue_finish(queue))


def context():
    """The default context, created on first use."""
    global _default_context
    if _default_context is None:
        with _default_lock:
            if _default_context is None:
                _default_context = Context()
    return _default_context


def devices():
    """Every device of the default context."""
    return context().devices()


def device(selector=None):
    """A device of the default context by selector ("cpu", "cuda:0", ...)."""
    return context().device(selector)


def device_for(array):
    """The device that holds `array` (any DLPack producer or tessera.Tensor)."""
    owner = getattr(array, "_tessera_device", None)
    if owner is not None:
        return owner
    if not hasattr(array, "__dlpack_device__"):
        raise python_error("TSR_ERROR_INVALID_VALUE",
                           "device_for: %s has no __dlpack_device__ (not a DLPack array)"
                           % type(array).__name__)
    device_type, device_id = array.__dlpack_device__()
    return context().device_from_dlpack(int(device_type), int(device_id))
