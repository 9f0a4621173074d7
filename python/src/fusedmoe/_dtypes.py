"""fusedmoe dtypes and devices as names, and their torch / DLPack spellings."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from . import _capi
from ._library import lib, text
from .errors import FusedMoEError

# DLPack (dlpack.h): device types and (type code, bits) of the dtypes fusedmoe has.
DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_ROCM, DL_ROCM_HOST, DL_CUDA_MANAGED = 1, 2, 3, 10, 11, 13
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_BFLOAT = 0, 1, 2, 4
_DL_F8_E4M3FN, _DL_F8_E4M3FNUZ, _DL_F8_E5M2, _DL_F8_E8M0FNU = 10, 11, 12, 14
DLPACK_DTYPES: dict[tuple[int, int], int] = {
    (_DL_FLOAT, 32): _capi.DTYPE_F32,
    (_DL_BFLOAT, 16): _capi.DTYPE_BF16,
    (_DL_FLOAT, 16): _capi.DTYPE_F16,
    (_DL_FLOAT, 64): _capi.DTYPE_F64,
    (_DL_F8_E4M3FN, 8): _capi.DTYPE_FP8_E4M3FN,
    (_DL_F8_E4M3FNUZ, 8): _capi.DTYPE_FP8_E4M3FNUZ,
    (_DL_F8_E5M2, 8): _capi.DTYPE_FP8_E5M2,
    (_DL_F8_E8M0FNU, 8): _capi.DTYPE_UE8M0,
    (_DL_INT, 8): _capi.DTYPE_INT8,
    (_DL_UINT, 8): _capi.DTYPE_UINT8,
    (_DL_INT, 32): _capi.DTYPE_INT32,
    (_DL_INT, 64): _capi.DTYPE_INT64,
}

# torch dtype attribute names -> fusedmoe dtype (looked up lazily: torch is optional).
_TORCH_NAMES: dict[str, int] = {
    "float32": _capi.DTYPE_F32,
    "bfloat16": _capi.DTYPE_BF16,
    "float16": _capi.DTYPE_F16,
    "float64": _capi.DTYPE_F64,
    "float8_e4m3fn": _capi.DTYPE_FP8_E4M3FN,
    "float8_e4m3fnuz": _capi.DTYPE_FP8_E4M3FNUZ,
    "float8_e5m2": _capi.DTYPE_FP8_E5M2,
    "float8_e8m0fnu": _capi.DTYPE_UE8M0,
    "float4_e2m1fn_x2": _capi.DTYPE_FP4_E2M1X2,
    "int8": _capi.DTYPE_INT8,
    "uint8": _capi.DTYPE_UINT8,
    "int32": _capi.DTYPE_INT32,
    "int64": _capi.DTYPE_INT64,
}
_torch_map: dict[Any, int] | None = None


def torch_module() -> Any:
    """torch if the application imported it, else None (never imports it)."""
    return sys.modules.get("torch")


def torch_dtypes() -> dict[Any, int]:
    global _torch_map
    if _torch_map is None:
        torch = torch_module()
        _torch_map = {getattr(torch, n): v for n, v in _TORCH_NAMES.items() if hasattr(torch, n)}
    return _torch_map


def dtype_name(dtype: int) -> str:
    """The library's name of a dtype value ("bf16", "fp8_e4m3fn", ...)."""
    return text(lib().fmoe_dtype_name(dtype))


def dtype_value(dtype: Any, what: str = "dtype") -> int:
    """A fusedmoe dtype from a name ("bf16", "bfloat16", "float32"), a torch
    dtype or a numpy dtype. INVALID_ARGUMENT names `what` when unknown."""
    torch = torch_module()
    if torch is not None and isinstance(dtype, torch.dtype):
        v = torch_dtypes().get(dtype)
        if v is None:
            raise FusedMoEError(FusedMoEError.INVALID_ARGUMENT, f"{what}: {dtype} has no fusedmoe dtype")
        return v
    if isinstance(dtype, str):
        name = dtype
    elif isinstance(dtype, type):  # numpy.float32 and friends
        name = dtype.__name__
    else:  # numpy.dtype("float32").name, or anything that prints as a name
        name = str(getattr(dtype, "name", dtype))
    v = lib().fmoe_dtype_from_name(name.encode())
    if v == _capi.DTYPE_INVALID:
        raise FusedMoEError(
            FusedMoEError.INVALID_ARGUMENT,
            f"{what}: unknown dtype '{name}' (expected f32, bf16, f16, ... or a PyTorch spelling such as bfloat16)",
        )
    return v


def dtype_size(dtype: int) -> int:
    return int(lib().fmoe_dtype_size(dtype))


@dataclass(frozen=True)
class Device:
    """A device as fusedmoe names it: kind "cpu", "cuda" or "rocm", and an index."""

    kind: str
    index: int = 0

    def __str__(self) -> str:
        return f"{self.kind}:{self.index}"

    @property
    def kind_value(self) -> int:
        return {"cpu": _capi.DEVICE_CPU, "cuda": _capi.DEVICE_CUDA, "rocm": _capi.DEVICE_ROCM}[self.kind]

    @staticmethod
    def from_c(kind: int, index: int) -> "Device":
        return Device(text(lib().fmoe_device_kind_name(kind)), int(index))

    @staticmethod
    def parse(spec: "str | Device | Any") -> "Device":
        """ "cpu", "cuda", "cuda:1", a Device, or a torch.device."""
        if isinstance(spec, Device):
            return spec
        s = str(spec)
        kind, _, idx = s.partition(":")
        if kind not in ("cpu", "cuda", "rocm") or (idx and not idx.isdigit()):
            raise FusedMoEError(
                FusedMoEError.INVALID_ARGUMENT, f"device '{s}': expected cpu, cuda, rocm, optionally ':<index>'"
            )
        return Device(kind, int(idx) if idx else 0)
