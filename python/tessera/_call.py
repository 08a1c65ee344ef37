# SPDX-License-Identifier: Apache-2.0
"""One op call: picks the device and queue, imports the arrays, allocates the
outputs, runs (or explains) the descriptor and releases what it imported."""
import contextvars
import ctypes
import sys

from . import _abi, _lib
from ._device import Device, device as _device_by_selector, device_for
from .arrays import allocate_like, framework_of, import_array, _unwrap
from .errors import python_error

# What finishing a call does: None runs the op; "explain" / "variants" ask
# tsr_op_explain / tsr_op_variants about the same descriptor instead.
action = contextvars.ContextVar("tessera_op_action", default=None)

# Imports of arrays on a caller's stream are released in batches: releasing a
# buffer waits for its queue, and the point of using the caller's stream is
# not to wait for it on every call.
RETIRE_BATCH = 32


class Choice:
    """What tsr_op_explain answered: the variant, the rule that chose it
    ("override", "tuning_db", "heuristic"), the shape class (tuning key), the
    device key and the source (override origin, database line, heuristic's reason)."""

    def __init__(self, choice, device):
        self.variant = choice.variant.decode()
        self.rule = _abi.CHOICE_RULES.get(choice.rule, str(choice.rule))
        self.shape_class = choice.shape_class.decode()
        self.device_key = choice.device_key.decode()
        self.source = choice.source.decode()
        self.device = device

    def as_dict(self):
        return {key: getattr(self, key) for key in
                ("variant", "rule", "shape_class", "device_key", "source")}

    def __repr__(self):
        return ("<tessera.Choice %s by %s on %s: %s>"
                % (self.variant, self.rule, self.device.selector, self.source))


def enum_value(table, value, what):
    key = value.lower() if isinstance(value, str) else value
    if key not in table:
        names = sorted(name for name in table if isinstance(name, str))
        raise python_error("TSR_ERROR_INVALID_VALUE",
                           "%s = %r is not one of %s" % (what, value, ", ".join(names)))
    return table[key]


def _caller_stream(array, device):
    """(kind, stream handle, stream object) of the caller's current stream for
    PyTorch/CuPy GPU arrays on a CUDA/HIP device; (None, None, None)
    otherwise. The object is kept with the queue that wraps the handle: CuPy
    destroys a stream with its object, and a queue must not outlive its
    stream (releasing a buffer records events on every queue that used it)."""
    if device.backend not in ("cuda", "hip"):
        return None, None, None
    framework = framework_of(array)
    source = _unwrap(array)
    if framework == "torch" and getattr(source, "is_cuda", False):
        torch = sys.modules["torch"]
        stream = torch.cuda.current_stream(source.device)
        return device.backend, int(stream.cuda_stream), stream
    if framework == "cupy":
        cupy = sys.modules["cupy"]
        stream = cupy.cuda.get_current_stream()
        return device.backend, int(stream.ptr), stream
    return None, None, None


class OpCall:
    """Use as `with OpCall(...) as call:`; call.input / call.output build the
    descriptor's tensors, call.run(desc) finishes."""

    def __init__(self, op_name, arrays, device, copy, variant):
        self.op_name = op_name
        self.op = _abi.OP_BY_NAME[op_name]
        present = [array for array in arrays if array is not None]
        if not present:
            raise python_error("TSR_ERROR_NULL_ARGUMENT", "%s: no input array" % op_name)
        self.reference = present[0]
        if device is None:
            self.device = device_for(self.reference)
        elif isinstance(device, Device):
            self.device = device
        else:
            self.device = _device_by_selector(device)
        self.copy = copy
        self.variant = variant.encode() if variant else None
        self.stream_kind, stream, owner = _caller_stream(self.reference, self.device)
        if self.stream_kind:
            self.queue, self.lock = self.device.stream_queue(stream, self.stream_kind, owner)
            # The DLPack protocol names CUDA's legacy default stream 1, ROCm's 0.
            self.dlpack_stream = stream if stream or self.stream_kind == "hip" else 1
        else:
            self.queue, self.lock = self.device.queue()
            self.dlpack_stream = None
        self._imported = {}
        self._temporaries = []
        self._results = []
        self._keep = []

    def __enter__(self):
        self.lock.acquire()
        return self

    def __exit__(self, *exc):
        try:
            self._release()
        finally:
            self.lock.release()
        return False

    def keep(self, value):
        """Keeps a ctypes object (a host array the descriptor points to) alive."""
        self._keep.append(value)
        return value

    def _import(self, array, what, writable):
        # Keyed by id() with the array kept in the entry: an id is only unique
        # while its object lives, and an output's import target (a view) may
        # have no other reference, so a later array could reuse its id.
        entry = self._imported.get(id(array))
        tensor = entry[1] if entry is not None else None
        if tensor is None:
            tensor = import_array(array, self.device, copy=self.copy, writable=writable,
                                  stream=self.dlpack_stream, queue=self.queue, what=what)
            self._imported[id(array)] = (array, tensor)
            if tensor is not array:
                self._temporaries.append(tensor)
        elif writable and getattr(tensor, "_copied_from", None):
            tensor._writeback = tensor._copied_from  # an input that is also the output
        return tensor

    def input(self, array, what):
        """The tsr_tensor of an optional input (absent: a zeroed tensor)."""
        if array is None:
            return _abi.Tensor()
        return self._import(array, "%s: %s" % (self.op_name, what), False).view

    def output(self, out, shape, dtype_value, what):
        """The tsr_tensor of an output: `out` when given, else a new array of the
        reference input's framework (see allocate_like)."""
        if out is None:
            result, target = allocate_like(self.reference, shape, dtype_value, self.device)
        else:
            result = target = out
        self._results.append(result)
        return self._import(target, "%s: %s" % (self.op_name, what), True).view

    def run(self, desc):
        """Runs the op (or explains it) and returns the outputs: one, or a tuple."""
        lib = _lib.library()
        mode = action.get()
        if mode == "explain":
            choice = _abi.new_desc(_abi.Choice)
            _lib.check(lib.tsr_op_explain(self.device.handle, self.op, ctypes.byref(desc),
                                          ctypes.byref(choice)))
            return Choice(choice, self.device)
        if mode == "variants":
            variants = _abi.new_desc(_abi.VariantList)
            _lib.check(lib.tsr_op_variants(self.device.handle, self.op, ctypes.byref(desc),
                                           ctypes.byref(variants)))
            return [(variants.names[i].value.decode(), variants.descriptions[i].value.decode())
                    for i in range(variants.count)]
        _lib.check(lib.tsr_op_run(self.queue, self.op, ctypes.byref(desc)))
        if not self.stream_kind:
            _lib.check(lib.tsr_queue_finish(self.queue))
            for tensor in self._temporaries:
                tensor._copy_back(self.queue)
        return self._results[0] if len(self._results) == 1 else tuple(self._results)

    def _release(self):
        if self.stream_kind:
            retired = self.device.__dict__.setdefault("_retired", [])
            retired.extend(self._temporaries)
            if len(retired) >= RETIRE_BATCH:
                release_retired(self.device)
        else:
            for tensor in self._temporaries:
                tensor.close()
        self._temporaries = []


def release_retired(device):
    """Releases the imports of earlier stream-ordered calls (waits for their streams)."""
    retired = device.__dict__.get("_retired", [])
    while retired:
        retired.pop().close()
