"""Array objects -> fmoe_tensor descriptors, without copying.

Any object with ``__dlpack__`` / ``__dlpack_device__`` is accepted (numpy,
torch, cupy, jax, ...). torch tensors are read directly from their
attributes (data_ptr, shape, stride, dtype, device): the same facts DLPack
would give, without building a capsule on every forward; the tests check
both ways agree.

DLPack capsules are borrowed, never consumed: the descriptor keeps the
capsule alive for the duration of the C call, and when the capsule is
collected its producer frees what it exported (the protocol's rule for a
capsule whose name was not changed to "used_dltensor").
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, Structure, c_int32, c_int64, c_uint8, c_uint16, c_uint32, c_uint64, c_void_p
from typing import Any

from . import _capi
from ._dtypes import (
    DL_CPU,
    DL_CUDA,
    DL_CUDA_HOST,
    DL_ROCM,
    DL_ROCM_HOST,
    DLPACK_DTYPES,
    Device,
    dtype_name,
    dtype_size,
    torch_dtypes,
    torch_module,
)
from .errors import FusedMoEError


class _DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class _DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class _DLTensor(Structure):
    _fields_ = [
        ("data", c_void_p),
        ("device", _DLDevice),
        ("ndim", c_int32),
        ("dtype", _DLDataType),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),
        ("byte_offset", c_uint64),
    ]


class _DLManagedTensor(Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", c_void_p), ("deleter", c_void_p)]


class _DLPackVersion(Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class _DLManagedTensorVersioned(Structure):
    _fields_ = [
        ("version", _DLPackVersion),
        ("manager_ctx", c_void_p),
        ("deleter", c_void_p),
        ("flags", c_uint64),
        ("dl_tensor", _DLTensor),
    ]


_DLPACK_READ_ONLY = 1
_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype = ctypes.c_char_p
_capsule_name.argtypes = [ctypes.py_object]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _invalid(msg: str) -> FusedMoEError:
    return FusedMoEError(FusedMoEError.INVALID_ARGUMENT, msg)


class TensorDesc:
    """A filled fmoe_tensor plus whatever must stay alive while C reads it."""

    __slots__ = ("c", "keep", "device")

    def __init__(self, c: _capi.Tensor, keep: Any, device: Device) -> None:
        self.c = c
        self.keep = keep
        self.device = device

    @property
    def dtype_name(self) -> str:
        return dtype_name(self.c.dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.c.shape[i] for i in range(self.c.ndim))

    @property
    def strides(self) -> tuple[int, ...]:
        return tuple(self.c.strides[i] for i in range(self.c.ndim))

    @property
    def data(self) -> int:
        return self.c.data or 0


def _fill(dtype: int, device: Device, shape: tuple[int, ...], strides: tuple[int, ...], data: int, what: str):
    if len(shape) > _capi.MAX_DIMS:
        raise _invalid(f"{what}: {len(shape)} dimensions, fusedmoe tensors have at most {_capi.MAX_DIMS}")
    t = _capi.sized(_capi.Tensor)
    t.dtype = dtype
    t.device_kind = device.kind_value
    t.device_index = device.index
    t.ndim = len(shape)
    for i, (n, s) in enumerate(zip(shape, strides)):
        t.shape[i] = n
        t.strides[i] = s
    t.data = data or None
    return t


def _torch_device(dev: Any, what: str) -> Device:
    if dev.type == "cpu":
        return Device("cpu", 0)
    if dev.type == "cuda":
        torch = torch_module()
        kind = "rocm" if getattr(torch.version, "hip", None) else "cuda"
        return Device(kind, dev.index if dev.index is not None else torch.cuda.current_device())
    raise _invalid(f"{what}: torch device '{dev}' is not one fusedmoe serves (cpu, cuda)")


def _from_torch(t: Any, what: str) -> TensorDesc:
    dtype = torch_dtypes().get(t.dtype)
    if dtype is None:
        raise _invalid(f"{what}: torch dtype {t.dtype} has no fusedmoe dtype")
    device = _torch_device(t.device, what)
    c = _fill(dtype, device, tuple(t.shape), tuple(t.stride()), t.data_ptr(), what)
    return TensorDesc(c, t, device)


def _dl_device(dev_type: int, dev_id: int, what: str) -> Device:
    if dev_type in (DL_CPU, DL_CUDA_HOST, DL_ROCM_HOST):  # pinned host memory is host memory
        return Device("cpu", 0)
    if dev_type == DL_CUDA:
        return Device("cuda", dev_id)
    if dev_type == DL_ROCM:
        return Device("rocm", dev_id)
    raise _invalid(f"{what}: DLPack device type {dev_type} is not one fusedmoe serves (CPU, CUDA, ROCm)")


def _from_dlpack(obj: Any, what: str, stream: int | None, writable: bool) -> TensorDesc:
    if not hasattr(obj, "__dlpack__") or not hasattr(obj, "__dlpack_device__"):
        raise _invalid(
            f"{what}: {type(obj).__module__}.{type(obj).__qualname__} is not an array "
            "(expected a torch tensor, a numpy array or any object with __dlpack__)"
        )
    # The device decides the stream argument; the capsule's own device field
    # is what the descriptor then says.
    dev_type, dev_id = (int(v) for v in obj.__dlpack_device__())
    kwargs: dict[str, Any] = {}
    if _dl_device(dev_type, dev_id, what).kind != "cpu":
        # The producer orders its pending work before this stream; 0 is not
        # allowed by the protocol, 1 is the legacy default stream it means.
        kwargs["stream"] = stream if stream else 1
    try:
        try:
            capsule = obj.__dlpack__(max_version=(1, 0), **kwargs)
        except TypeError:  # a producer from before DLPack 1.0
            capsule = obj.__dlpack__(**kwargs)
    except (BufferError, ValueError, RuntimeError) as e:
        raise _invalid(f"{what}: cannot export it through DLPack: {e}") from None
    name = _capsule_name(capsule)
    ptr = _capsule_pointer(capsule, name)
    flags = 0
    if name == b"dltensor_versioned":
        managed = _DLManagedTensorVersioned.from_address(ptr)
        if managed.version.major != 1:
            raise _invalid(f"{what}: DLPack {managed.version.major}.{managed.version.minor} (expected 1.x)")
        flags = managed.flags
        dl = managed.dl_tensor
    elif name == b"dltensor":
        dl = _DLManagedTensor.from_address(ptr).dl_tensor
    else:
        raise _invalid(f"{what}: __dlpack__ returned a capsule named {name!r}")
    if writable and flags & _DLPACK_READ_ONLY:
        raise _invalid(f"{what}: the array is read-only, and fusedmoe writes it")
    key = (dl.dtype.code, dl.dtype.bits)
    dtype = DLPACK_DTYPES.get(key)
    if dtype is None or dl.dtype.lanes != 1:
        raise _invalid(
            f"{what}: DLPack dtype (code {dl.dtype.code}, {dl.dtype.bits} bits, {dl.dtype.lanes} lanes) "
            "has no fusedmoe dtype"
        )
    ndim = dl.ndim
    shape = tuple(dl.shape[i] for i in range(ndim))
    if dl.strides:
        strides = tuple(dl.strides[i] for i in range(ndim))
    else:  # before DLPack 1.2 NULL strides meant row-major
        acc, rev = 1, []
        for n in reversed(shape):
            rev.append(acc)
            acc *= n
        strides = tuple(reversed(rev))
    data = (dl.data or 0) + dl.byte_offset
    device = _dl_device(dl.device.device_type, dl.device.device_id, what)
    c = _fill(dtype, device, shape, strides, data, what)
    return TensorDesc(c, (obj, capsule), device)


def is_torch_tensor(obj: Any) -> bool:
    torch = torch_module()
    return torch is not None and isinstance(obj, torch.Tensor)


def describe(
    obj: Any,
    what: str,
    *,
    stream: int | None = None,
    writable: bool = False,
    as_dtype: int | None = None,
    via_dlpack: bool = False,
) -> TensorDesc:
    """Describe `obj` for the C API.

    Args:
        what: the argument's name, used in every message.
        stream: for device arrays taken through DLPack, the stream the
            consumer will use (the producer orders its work before it).
        writable: the C side writes the array (refuse read-only ones).
        as_dtype: reinterpret the elements as this fusedmoe dtype (same
            element size), for formats an array library lacks (fp4 pairs
            held as uint8).
        via_dlpack: take torch tensors through DLPack too (tests).
    """
    if is_torch_tensor(obj) and not via_dlpack:
        desc = _from_torch(obj, what)
    else:
        desc = _from_dlpack(obj, what, stream, writable)
    if as_dtype is not None and as_dtype != desc.c.dtype:
        if dtype_size(as_dtype) != dtype_size(desc.c.dtype) or dtype_size(as_dtype) == 0:
            raise _invalid(
                f"{what}: cannot view {dtype_name(desc.c.dtype)} elements as {dtype_name(as_dtype)} "
                "(the element sizes differ)"
            )
        desc.c.dtype = as_dtype
    return desc


def empty_like(x: Any, shape: tuple[int, ...], what: str) -> Any:
    """A new array of x's kind, dtype and device (for out=None)."""
    if is_torch_tensor(x):
        return torch_module().empty(shape, dtype=x.dtype, device=x.device)
    ns = getattr(x, "__array_namespace__", None)
    if ns is not None:
        xp = ns()
        try:
            return xp.empty(shape, dtype=x.dtype, device=x.device)
        except TypeError:  # an array API before device= (numpy < 2)
            return xp.empty(shape, dtype=x.dtype)
    raise _invalid(f"{what}: pass it explicitly: fusedmoe cannot allocate an array like {type(x).__qualname__}")
