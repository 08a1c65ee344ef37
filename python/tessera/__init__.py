# SPDX-License-Identifier: Apache-2.0
"""tessera: Python bindings (ctypes) of the tessera compute library.

    import numpy as np, tessera
    a = np.random.rand(64, 32).astype(np.float32)
    b = np.random.rand(32, 16).astype(np.float32)
    d = tessera.gemm(a, b, activation="relu")     # a NumPy array, computed in place
    tessera.devices()                             # [Device cpu:0, ...]

See docs/PYTHON.md. The library is loaded on first use (TESSERA_LIBRARY, a
bundled copy, then the dynamic linker).
"""
from . import _abi
from ._device import Context, Device, context, device, device_for, devices
from .arrays import Tensor, bfloat16, empty, from_dlpack
from .errors import (BackendError, BadSize, DtypeMismatch, Error, FileError, InvalidArgument,
                     InvalidValue, NotFound, NullArgument, OutOfBounds, OutOfMemory, OverlapError,
                     RankError, ShapeMismatch, StructSizeError, Unsupported, WrongDevice)
from ._call import Choice, release_retired
from .ops import (attention, cross_entropy, gelu, gemm, grouped_gemm, kv_append, layernorm,
                  rmsnorm, rope, softmax, swiglu)
from .tools import CliResult, bench, check, cli_path, explain, variants
from ._lib import library_path, version as library_version

__version__ = "0.1.0"
DTYPES = tuple(_abi.DTYPE_BY_NAME)
OPS = _abi.OP_NAMES


def synchronize(device=None):
    """Waits for a device's queue and releases the imports of earlier calls made
    on a caller's stream (which waits for those streams)."""
    target = globals()["device"](device) if not isinstance(device, Device) else device
    release_retired(target)
    target.synchronize()


__all__ = [
    "Context", "Device", "context", "device", "device_for", "devices", "Tensor", "bfloat16",
    "empty", "from_dlpack", "Error", "InvalidArgument", "NullArgument", "InvalidValue",
    "StructSizeError", "DtypeMismatch", "RankError", "ShapeMismatch", "BadSize", "OutOfBounds",
    "WrongDevice", "OverlapError", "Unsupported", "OutOfMemory", "NotFound", "BackendError",
    "FileError", "Choice", "attention", "cross_entropy", "gelu", "gemm", "grouped_gemm", "kv_append",
    "layernorm", "rmsnorm", "rope", "softmax", "swiglu", "CliResult", "bench", "check",
    "cli_path", "explain", "variants", "library_path", "library_version", "synchronize",
    "DTYPES", "OPS",
]
