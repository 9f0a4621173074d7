"""The one exception type of the package, and the status names it carries."""

from __future__ import annotations

from . import _capi

# The names fmoe_status_name gives (stable; common.h). Kept here too so that
# an error raised before the library is loaded (it was not found, or its
# version does not match) still carries a status name.
STATUS_NAMES: dict[int, str] = {
    _capi.STATUS_OK: "ok",
    _capi.STATUS_UNSUPPORTED: "unsupported",
    _capi.STATUS_INVALID_ARGUMENT: "invalid-argument",
    _capi.STATUS_OUT_OF_MEMORY: "out-of-memory",
    _capi.STATUS_NOT_FOUND: "not-found",
    _capi.STATUS_IO_ERROR: "io-error",
    _capi.STATUS_PARSE_ERROR: "parse-error",
    _capi.STATUS_ABI_MISMATCH: "abi-mismatch",
    _capi.STATUS_PLUGIN_ERROR: "plugin-error",
    _capi.STATUS_DEVICE_ERROR: "device-error",
    _capi.STATUS_BAD_STATE: "bad-state",
    _capi.STATUS_INTERNAL: "internal",
}


class FusedMoEError(Exception):
    """Any failure of fusedmoe, from the C library or from this package.

    Attributes:
        status: the fmoe_status code (``FusedMoEError.INVALID_ARGUMENT``, ...).
        status_name: its stable name ("invalid-argument", "unsupported", ...).
        message: the library's text (fmoe_last_error) or the package's own,
            naming the tensor, parameter, file or option at fault.
    """

    OK = _capi.STATUS_OK
    UNSUPPORTED = _capi.STATUS_UNSUPPORTED
    INVALID_ARGUMENT = _capi.STATUS_INVALID_ARGUMENT
    OUT_OF_MEMORY = _capi.STATUS_OUT_OF_MEMORY
    NOT_FOUND = _capi.STATUS_NOT_FOUND
    IO_ERROR = _capi.STATUS_IO_ERROR
    PARSE_ERROR = _capi.STATUS_PARSE_ERROR
    ABI_MISMATCH = _capi.STATUS_ABI_MISMATCH
    PLUGIN_ERROR = _capi.STATUS_PLUGIN_ERROR
    DEVICE_ERROR = _capi.STATUS_DEVICE_ERROR
    BAD_STATE = _capi.STATUS_BAD_STATE
    INTERNAL = _capi.STATUS_INTERNAL

    def __init__(self, status: int, message: str) -> None:
        self.status = int(status)
        self.status_name = STATUS_NAMES.get(self.status, "unknown")
        self.message = message
        super().__init__(f"[{self.status_name}] {message}")

    def __reduce__(self):  # picklable across processes (multiprocessing, EP ranks)
        return (type(self), (self.status, self.message))
