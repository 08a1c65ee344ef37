# SPDX-License-Identifier: Apache-2.0
"""tessera.Error and its subclasses, one per tsr_status.

Every exception raised for a failed tsr_ call carries the status (`status`,
`status_name`) and tsr_last_error()'s sentence as its message. Checks the
package makes itself (before calling C) raise the same classes with the status
the library would have used.
"""
from . import _abi


class Error(Exception):
    """A tessera call failed. `status` is the tsr_status value."""

    status = None

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.status_name = _abi.STATUS_NAMES.get(status, "TSR_STATUS_%d" % status)
        self.message = message

    def __str__(self):
        return "%s (%s)" % (self.message, self.status_name) if self.message else self.status_name


class InvalidArgument(Error, ValueError):
    """An argument is not allowed: the base of the validation errors."""


class NullArgument(InvalidArgument):
    pass


class InvalidValue(InvalidArgument):
    pass


class StructSizeError(InvalidArgument):
    pass


class DtypeMismatch(InvalidArgument, TypeError):
    pass


class RankError(InvalidArgument):
    pass


class ShapeMismatch(InvalidArgument):
    pass


class BadSize(InvalidArgument):
    pass


class OutOfBounds(InvalidArgument):
    pass


class WrongDevice(InvalidArgument):
    pass


class OverlapError(InvalidArgument):
    pass


class Unsupported(Error, NotImplementedError):
    """Valid, but this device or plugin cannot do it."""


class OutOfMemory(Error, MemoryError):
    pass


class NotFound(Error, LookupError):
    """No device matches a selector, an unknown variant, or a missing library/CLI."""


class BackendError(Error, RuntimeError):
    """The plugin or vendor runtime failed."""


class FileError(Error):
    """TSR_ERROR_IO: a file could not be read or written."""


_CLASS_BY_STATUS = {
    1: NullArgument,
    2: InvalidValue,
    3: StructSizeError,
    4: DtypeMismatch,
    5: RankError,
    6: ShapeMismatch,
    7: BadSize,
    8: OutOfBounds,
    9: WrongDevice,
    10: Unsupported,
    11: OutOfMemory,
    12: NotFound,
    13: BackendError,
    14: FileError,
    15: OverlapError,
}


def error_class(status):
    return _CLASS_BY_STATUS.get(status, Error)


def make_error(status, message):
    return error_class(status)(status, message)


def python_error(status_name, message):
    """An error the package raises itself, classified like the library's."""
    status = _abi.STATUS[status_name]
    return make_error(status, message)
