# SPDX-License-Identifier: Apache-2.0
"""Finds and loads libtessera and declares the prototypes of its functions.

Search order (docs/PYTHON.md, "Loading"):
1. TESSERA_LIBRARY: a path to the library; nothing else is tried when it is set.
2. A library bundled in the package: tessera/lib/libtessera.so.<major> (with
   tessera/share/tessera/plugins.d beside it, mirroring the install tree so
   that the library finds its plugins).
3. The dynamic linker: ctypes.util.find_library("tessera"), then
   "libtessera.so.<major>" (the SONAME; CMake sets SOVERSION to the major).
A build tree is never guessed: point TESSERA_LIBRARY at build/lib/libtessera.so.
"""
import ctypes
import ctypes.util
import os
import threading

from . import _abi
from .errors import make_error, python_error

SONAME_MAJOR = 0
SONAME = "libtessera.so.%d" % SONAME_MAJOR
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

_lock = threading.Lock()
_library = None
_library_path = None

c_void_p = ctypes.c_void_p
c_char_p = ctypes.c_char_p
c_int = ctypes.c_int
c_uint32 = ctypes.c_uint32
c_int32 = ctypes.c_int32
c_uint64 = ctypes.c_uint64
c_size_t = ctypes.c_size_t
P = ctypes.POINTER

_PROTOTYPES = {
    "tsr_status_name": (c_char_p, [c_int]),
    "tsr_last_error": (c_char_p, []),
    "tsr_version": (c_char_p, []),
    "tsr_context_create": (c_int, [P(_abi.ContextOptions), P(c_void_p)]),
    "tsr_context_destroy": (None, [c_void_p]),
    "tsr_plugin_count": (c_int, [c_void_p, P(c_uint32)]),
    "tsr_plugin_get_report": (c_int, [c_void_p, c_uint32, P(_abi.PluginReport)]),
    "tsr_device_count": (c_int, [c_void_p, P(c_uint32)]),
    "tsr_device_get": (c_int, [c_void_p, c_uint32, P(c_void_p)]),
    "tsr_device_open": (c_int, [c_void_p, c_char_p, P(c_void_p)]),
    "tsr_device_get_info": (c_int, [c_void_p, P(_abi.DeviceInfo)]),
    "tsr_buffer_create": (c_int, [c_void_p, c_size_t, P(c_void_p)]),
    "tsr_buffer_destroy": (None, [c_void_p]),
    "tsr_buffer_size": (c_int, [c_void_p, P(c_size_t)]),
    "tsr_buffer_map": (c_int, [c_void_p, P(c_void_p)]),
    "tsr_buffer_wrap_host": (c_int, [c_void_p, c_void_p, c_size_t, P(c_void_p)]),
    "tsr_buffer_wrap_cuda": (c_int, [c_void_p, c_uint64, c_size_t, P(c_void_p)]),
    "tsr_buffer_wrap_hip": (c_int, [c_void_p, c_uint64, c_size_t, P(c_void_p)]),
    "tsr_queue_create": (c_int, [c_void_p, P(c_void_p)]),
    "tsr_queue_destroy": (None, [c_void_p]),
    "tsr_queue_finish": (c_int, [c_void_p]),
    "tsr_buffer_write": (c_int, [c_void_p, c_void_p, c_size_t, c_void_p, c_size_t]),
    "tsr_buffer_read": (c_int, [c_void_p, c_void_p, c_size_t, c_void_p, c_size_t]),
    "tsr_buffer_copy": (c_int, [c_void_p, c_void_p, c_size_t, c_void_p, c_size_t, c_size_t]),
    "tsr_op_run": (c_int, [c_void_p, c_int, c_void_p]),
    "tsr_op_variants": (c_int, [c_void_p, c_int, c_void_p, P(_abi.VariantList)]),
    "tsr_op_explain": (c_int, [c_void_p, c_int, c_void_p, P(_abi.Choice)]),
    "tsr_tuning_record": (c_int, [c_void_p, c_int, c_void_p, c_char_p, c_char_p]),
}

# Declared in tessera_dlpack.h; used when the library has them, otherwise the
# package wraps DLPack memory itself (tsr_buffer_wrap_*) or cannot stream-wrap.
_OPTIONAL_PROTOTYPES = {
    "tsr_tensor_from_dlpack": (c_int, [c_void_p, c_void_p, P(_abi.Tensor)]),
    "tsr_tensor_from_dlpack_versioned": (c_int, [c_void_p, c_void_p, P(_abi.Tensor)]),
    "tsr_tensor_to_dlpack": (c_int, [P(_abi.Tensor), P(c_void_p)]),
    "tsr_tensor_to_dlpack_versioned": (c_int, [P(_abi.Tensor), P(c_void_p)]),
    "tsr_device_from_dlpack": (c_int, [c_void_p, c_int32, c_int32, P(c_void_p)]),
    "tsr_queue_wrap_cuda_stream": (c_int, [c_void_p, c_uint64, P(c_void_p)]),
    "tsr_queue_wrap_hip_stream": (c_int, [c_void_p, c_uint64, P(c_void_p)]),
}


def _candidates():
    explicit = os.environ.get("TESSERA_LIBRARY")
    if explicit:
        return [explicit], True
    names = []
    bundled = os.path.join(PACKAGE_DIR, "lib", SONAME)
    if os.path.exists(bundled):
        names.append(bundled)
    found = ctypes.util.find_library("tessera")
    if found:
        names.append(found)
    names.append(SONAME)
    return names, False


def _declare(library, table, optional):
    for name, (restype, argtypes) in table.items():
        try:
            function = getattr(library, name)
        except AttributeError:
            if optional:
                continue
            raise
        function.restype = restype
        function.argtypes = argtypes


def library():
    """The loaded libtessera (ctypes.CDLL), loading it on first use."""
    global _library, _library_path
    if _library is not None:
        return _library
    with _lock:
        if _library is not None:
            return _library
        names, explicit = _candidates()
        failures = []
        for name in names:
            try:
                loaded = ctypes.CDLL(name)
            except OSError as error:
                failures.append("%s: %s" % (name, error))
                continue
            _declare(loaded, _PROTOTYPES, optional=False)
            _declare(loaded, _OPTIONAL_PROTOTYPES, optional=True)
            _library, _library_path = loaded, name
            return _library
        where = "TESSERA_LIBRARY=%s" % names[0] if explicit else ", ".join(names)
        raise python_error("TSR_ERROR_NOT_FOUND",
                           "cannot load libtessera (tried %s): %s; set TESSERA_LIBRARY to the "
                           "library's path" % (where, "; ".join(failures)))


def library_path():
    """The path the library was loaded from (resolved through the linker when
    it was loaded by name)."""
    library()
    address = ctypes.cast(_library.tsr_version, c_void_p).value
    info = _DlInfo()
    if _dladdr(ctypes.c_void_p(address), ctypes.byref(info)) and info.dli_fname:
        return os.path.realpath(info.dli_fname.decode())
    return _library_path


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", c_char_p), ("dli_fbase", c_void_p),
                ("dli_sname", c_char_p), ("dli_saddr", c_void_p)]


try:
    _dladdr = ctypes.CDLL(None).dladdr
    _dladdr.argtypes = [c_void_p, P(_DlInfo)]
    _dladdr.restype = c_int
except (AttributeError, OSError):  # not glibc-like: fall back to the name loaded
    def _dladdr(_address, _info):
        return 0


def has(name):
    """Whether the loaded library exports `name` (optional, newer entry points)."""
    return hasattr(library(), name)


def last_error():
    message = library().tsr_last_error()
    return message.decode("utf-8", "replace") if message else ""


def check(status):
    """Raises the tessera.Error for a failed status, with tsr_last_error()."""
    if status != _abi.OK:
        raise make_error(status, last_error())


def version():
    return library().tsr_version().decode()
