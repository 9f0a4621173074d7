"""Hugging Face model configs, quantization configs and safetensors
checkpoints (include/fusedmoe/model.h and the checkpoint part of fusedmoe.h)."""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from typing import Any

from . import _capi
from ._dtypes import dtype_name
from ._library import check, encode, lib, text
from ._owned import Owned
from .config import LayerConfig, Scheme
from .errors import FusedMoEError


class _Handle(Owned):
    """An owned C handle, destroyed by close() / ``with`` / collection."""

    def __init__(self, handle: int | None) -> None:
        if not handle:  # the create call returned OK, so this is a library bug
            raise FusedMoEError(FusedMoEError.INTERNAL, f"{type(self).__name__}: OK without a handle")
        self._h = handle


@dataclass(frozen=True)
class SharedExperts:
    """Shared experts of a MoE layer, which the routed layer does not compute."""

    count: int
    intermediate_size: int
    gated: bool


class Model(_Handle):
    """A model config.json of a supported MoE family (docs/MODELS.md).

    Raises (on construction):
        FusedMoEError: NOT_FOUND / IO_ERROR / PARSE_ERROR for the file,
            INVALID_ARGUMENT / UNSUPPORTED for its contents (naming the key).
    """

    _destroy = "fmoe_model_destroy"

    def __init__(self, path: str | os.PathLike) -> None:
        p = os.fspath(path)
        if os.path.isdir(p):
            p = os.path.join(p, "config.json")
        h = ctypes.c_void_p()
        check(lib().fmoe_model_config_load(encode(p), ctypes.byref(h)))
        super().__init__(h.value)
        self.path = p

    @property
    def family(self) -> str:
        """ "mixtral", "qwen3_moe", "deepseek_v3", ..."""
        return text(lib().fmoe_model_family(self.handle))

    @property
    def layer_count(self) -> int:
        """Decoder layers, MoE or dense."""
        return int(lib().fmoe_model_layer_count(self.handle))

    @property
    def dtype(self) -> str:
        """Activation dtype (torch_dtype): "f32", "bf16" or "f16"."""
        return dtype_name(lib().fmoe_model_dtype(self.handle))

    def is_moe(self, layer: int) -> bool:
        return bool(lib().fmoe_model_layer_is_moe(self.handle, layer))

    @property
    def moe_layers(self) -> list[int]:
        return [i for i in range(self.layer_count) if self.is_moe(i)]

    def layer_config(self, layer: int) -> LayerConfig:
        """The LayerConfig of MoE layer `layer` (parallel fields at their defaults)."""
        c = _capi.LayerConfig()
        lib().fmoe_layer_config_init(ctypes.byref(c))
        check(lib().fmoe_model_layer_config(self.handle, _u32(layer, "layer"), ctypes.byref(c)))
        return LayerConfig.from_c(c)

    def shared(self, layer: int) -> SharedExperts:
        s = _capi.sized(_capi.ModelShared)
        check(lib().fmoe_model_layer_shared(self.handle, _u32(layer, "layer"), ctypes.byref(s)))
        return SharedExperts(int(s.count), int(s.intermediate_size), bool(s.gated))

    def names(self, layer: int) -> dict[str, Any]:
        """Checkpoint tensor names of MoE layer `layer` (fmoe_model_names):
        router_weight, experts, expert_gate, fused_gate_up, ...; None where
        the family has no such tensor."""
        n = _capi.sized(_capi.ModelNames)
        check(lib().fmoe_model_layer_names(self.handle, _u32(layer, "layer"), ctypes.byref(n)))
        out: dict[str, Any] = {}
        for field in _capi.ModelNames._fields_[1:]:
            name = field[0]
            v = getattr(n, name)
            out[name] = bool(v) if name == "fused_interleaved" else (v.decode() if v else None)
        return out

    def _expert_modules(self, layer: int) -> _capi.ExpertModules:
        m = _capi.ExpertModules()
        lib().fmoe_expert_modules_init(ctypes.byref(m))
        check(lib().fmoe_model_layer_expert_modules(self.handle, _u32(layer, "layer"), ctypes.byref(m)))
        return m


class QuantConfig(_Handle):
    """A checkpoint's quantization_config (read from its config.json)."""

    _destroy = "fmoe_quant_config_destroy"

    def __init__(self, path: str | os.PathLike) -> None:
        p = os.fspath(path)
        if os.path.isdir(p):
            p = os.path.join(p, "config.json")
        h = ctypes.c_void_p()
        check(lib().fmoe_quant_config_load(encode(p), ctypes.byref(h)))
        super().__init__(h.value)

    @property
    def method(self) -> str:
        """ "compressed-tensors", "fp8", "modelopt", "gptq", "mxfp4" or "none"."""
        return text(lib().fmoe_quant_config_method(self.handle))

    def scheme(self, model: Model, layer: int) -> Scheme:
        """The scheme of MoE layer `layer`: every expert projection resolved."""
        m = model._expert_modules(layer)
        s = _capi.sized(_capi.Scheme)
        check(lib().fmoe_quant_config_scheme(self.handle, ctypes.byref(m), ctypes.byref(s)))
        return Scheme._wrap(s)


# numpy dtype names of the fusedmoe dtypes numpy has.
_NUMPY = {
    _capi.DTYPE_F32: "float32",
    _capi.DTYPE_F16: "float16",
    _capi.DTYPE_F64: "float64",
    _capi.DTYPE_INT8: "int8",
    _capi.DTYPE_UINT8: "uint8",
    _capi.DTYPE_INT32: "int32",
    _capi.DTYPE_INT64: "int64",
}


class Checkpoint(_Handle):
    """Safetensors files: a directory (index + shards, or model.safetensors),
    an index .json or one .safetensors file, validated up front
    (docs/CHECKPOINTS.md)."""

    _destroy = "fmoe_checkpoint_close"

    def __init__(self, path: str | os.PathLike) -> None:
        h = ctypes.c_void_p()
        check(lib().fmoe_checkpoint_open(encode(os.fspath(path)), ctypes.byref(h)))
        super().__init__(h.value)

    def names(self) -> list[str]:
        """Tensor names, sorted."""
        L, h = lib(), self.handle
        return [text(L.fmoe_checkpoint_tensor_name(h, i)) for i in range(L.fmoe_checkpoint_tensor_count(h))]

    def __contains__(self, name: str) -> bool:
        return lib().fmoe_checkpoint_find(self.handle, name.encode()) != ctypes.c_size_t(-1).value

    def _tensor(self, name: str) -> _capi.Tensor:
        i = lib().fmoe_checkpoint_find(self.handle, name.encode())
        if i == ctypes.c_size_t(-1).value:
            raise FusedMoEError(FusedMoEError.NOT_FOUND, f"checkpoint: no tensor '{name}'")
        t = _capi.sized(_capi.Tensor)
        check(lib().fmoe_checkpoint_tensor(self.handle, i, ctypes.byref(t)), name)
        return t

    def info(self, name: str) -> tuple[str, tuple[int, ...]]:
        """(dtype name, shape) of a tensor."""
        t = self._tensor(name)
        return dtype_name(t.dtype), tuple(t.shape[i] for i in range(t.ndim))

    def numpy(self, name: str) -> Any:
        """A copy of a tensor as a numpy array (dtypes numpy has: f32, f16,
        f64 and the integers; others raise INVALID_ARGUMENT)."""
        import numpy as np

        t = self._tensor(name)
        np_name = _NUMPY.get(t.dtype)
        if np_name is None:
            raise FusedMoEError(FusedMoEError.INVALID_ARGUMENT, f"{name}: {dtype_name(t.dtype)} has no numpy dtype")
        shape = tuple(t.shape[i] for i in range(t.ndim))
        dt = np.dtype(np_name)
        n = int(np.prod(shape)) if shape else 1
        buf = (ctypes.c_char * (n * dt.itemsize)).from_address(t.data) if n else b""
        return np.frombuffer(bytes(buf), dtype=dt).reshape(shape).copy()


def _u32(v: int, what: str) -> int:
    if not isinstance(v, int) or v < 0 or v > 0xFFFFFFFF:
        raise FusedMoEError(FusedMoEError.INVALID_ARGUMENT, f"{what}: expected an index >= 0, got {v!r}")
    return v
