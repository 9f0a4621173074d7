"""Layer configuration and quantization scheme (fmoe_layer_config, fmoe_scheme)."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, fields
from typing import Any

from . import _capi
from ._dtypes import dtype_name, dtype_value
from ._library import check, lib, text
from .errors import FusedMoEError

_PLACEMENTS = {"linear": _capi.PLACEMENT_LINEAR, "round_robin": _capi.PLACEMENT_ROUND_ROBIN}
_PLACEMENT_NAMES = {v: k for k, v in _PLACEMENTS.items()}


@dataclass
class LayerConfig:
    """One routed-expert layer (fmoe_layer_config, include/fusedmoe/common.h).

    The four sizes must be set; every other field has the C default
    (fmoe_layer_config_init). Enumerations are names: ``activation`` "silu",
    "gelu", "gelu_tanh" (or "gelu_pytorch_tanh"), "relu2", "swigluoai",
    "swiglustep"; ``scoring`` "softmax", "sigmoid", "sqrtsoftplus";
    ``placement`` "linear" or "round_robin"; ``act_dtype`` "f32", "bf16",
    "f16", a PyTorch spelling ("bfloat16") or a torch dtype.

    ``num_experts`` counts logical experts; ``intermediate_size`` is the full
    size before the tensor-parallel split. See docs/ROUTING.md for what
    each routing field does and docs/PLACEMENT.md for TP/EP/EPLB.
    """

    num_experts: int = 0
    top_k: int = 0
    hidden_size: int = 0
    intermediate_size: int = 0
    activation: str = "silu"
    gated: bool = True
    has_bias: bool = False
    swiglu_alpha: float = 1.702
    swiglu_limit: float = 0.0
    act_dtype: Any = "bf16"
    scoring: str = "softmax"
    renormalize: bool = False
    grouped_topk: bool = False
    num_expert_group: int = 0
    topk_group: int = 0
    has_correction_bias: bool = False
    routed_scaling_factor: float = 1.0
    apply_router_weight_on_input: bool = False
    tp_size: int = 1
    tp_rank: int = 0
    ep_size: int = 1
    ep_rank: int = 0
    placement: str = "linear"
    enable_eplb: bool = False
    num_redundant_experts: int = 0
    max_num_tokens: int = 8192

    # ---- conversion ------------------------------------------------------

    def to_c(self) -> _capi.LayerConfig:
        """The C struct (starting from fmoe_layer_config_init, so fields a
        newer library appends keep their defaults)."""
        c = _capi.LayerConfig()
        lib().fmoe_layer_config_init(ctypes.byref(c))
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "activation":
                value = _enum(lib().fmoe_activation_from_name, value, "activation")
            elif f.name == "scoring":
                value = _enum(lib().fmoe_scoring_from_name, value, "scoring")
            elif f.name == "act_dtype":
                value = dtype_value(value, "act_dtype")
            elif f.name == "placement":
                if value not in _PLACEMENTS:
                    raise FusedMoEError(
                        FusedMoEError.INVALID_ARGUMENT, f"placement: '{value}' (expected linear or round_robin)"
                    )
                value = _PLACEMENTS[value]
            elif isinstance(value, bool):
                value = int(value)
            try:
                setattr(c, f.name, value)
            except TypeError:
                raise FusedMoEError(
                    FusedMoEError.INVALID_ARGUMENT, f"{f.name}: expected a number, got {value!r}"
                ) from None
            if isinstance(value, int) and not isinstance(value, bool) and getattr(c, f.name) != value:
                raise FusedMoEError(FusedMoEError.INVALID_ARGUMENT, f"{f.name}: {value} is out of range")
        return c

    @classmethod
    def from_c(cls, c: _capi.LayerConfig) -> "LayerConfig":
        kw: dict[str, Any] = {}
        for f in fields(cls):
            v = getattr(c, f.name)
            if f.name == "activation":
                v = text(lib().fmoe_activation_name(v))
            elif f.name == "scoring":
                v = text(lib().fmoe_scoring_name(v))
            elif f.name == "act_dtype":
                v = dtype_name(v)
            elif f.name == "placement":
                v = _PLACEMENT_NAMES.get(v, str(v))
            elif isinstance(f.default, bool):
                v = bool(v)
            elif isinstance(f.default, float):
                v = _shortest_f32(v)
            kw[f.name] = v
        return cls(**kw)

    # ---- checks and derived sizes -----------------------------------------

    def validate(self) -> "LayerConfig":
        """Check with fmoe_layer_config_validate; returns self.

        Raises:
            FusedMoEError: INVALID_ARGUMENT naming the field and what was expected.
        """
        c = self.to_c()
        check(lib().fmoe_layer_config_validate(ctypes.byref(c)), "layer config")
        return self

    @property
    def global_experts(self) -> int:
        """Physical experts over all EP ranks: logical + redundant."""
        c = self.validate().to_c()
        return int(lib().fmoe_layer_config_global_experts(ctypes.byref(c)))

    @property
    def local_experts(self) -> int:
        """Experts this EP rank holds."""
        c = self.validate().to_c()
        return int(lib().fmoe_layer_config_local_experts(ctypes.byref(c)))

    @property
    def intermediate_per_rank(self) -> int:
        """intermediate_size / tp_size."""
        c = self.validate().to_c()
        return int(lib().fmoe_layer_config_intermediate_per_rank(ctypes.byref(c)))

    def expert_map(self) -> list[int]:
        """For each global expert, its local index on this EP rank, or -1."""
        c = self.validate().to_c()
        n = lib().fmoe_layer_config_global_experts(ctypes.byref(c))
        buf = (ctypes.c_int32 * n)()
        check(lib().fmoe_layer_config_expert_map(ctypes.byref(c), buf, n), "expert_map")
        return list(buf)

    def local_to_global(self) -> list[int]:
        """For each local expert of this EP rank, its global id."""
        c = self.validate().to_c()
        n = lib().fmoe_layer_config_local_experts(ctypes.byref(c))
        buf = (ctypes.c_int32 * n)()
        check(lib().fmoe_layer_config_local_to_global(ctypes.byref(c), buf, n), "local_to_global")
        return list(buf)


def _shortest_f32(v: float) -> float:
    """The shortest decimal that is the same float32 (1.702, not 1.70200002)."""
    f32 = ctypes.c_float(v).value
    for digits in range(6, 10):
        d = float(f"{f32:.{digits}g}")
        if ctypes.c_float(d).value == f32:
            return d
    return f32


def _enum(parse, name: str, what: str) -> int:
    if not isinstance(name, str):
        raise FusedMoEError(FusedMoEError.INVALID_ARGUMENT, f"{what}: expected a name, got {name!r}")
    v = parse(name.encode())
    if v == 0:
        raise FusedMoEError(FusedMoEError.INVALID_ARGUMENT, f"{what}: unknown name '{name}'")
    return int(v)


class Scheme:
    """A quantization scheme, known by its canonical key (docs/SCHEMES.md).

    ``Scheme("bf16")``, ``Scheme("fp8e4m3:channel/fp8e4m3:token:dynamic")``.
    Two schemes are equal iff their canonical keys are. Anywhere a scheme is
    taken, its key as a string works too.
    """

    __slots__ = ("_c", "key")
    _c: _capi.Scheme
    key: str

    def __init__(self, key: "str | Scheme") -> None:
        if isinstance(key, Scheme):
            self._c, self.key = key._c, key.key
            return
        if not isinstance(key, str):
            raise FusedMoEError(FusedMoEError.INVALID_ARGUMENT, f"scheme: expected a key string, got {key!r}")
        c = _capi.sized(_capi.Scheme)
        check(lib().fmoe_scheme_parse(key.encode(), ctypes.byref(c)), f"scheme '{key}'")
        self._c = c
        self.key = _key_of(c)

    @classmethod
    def unquantized(cls, dtype: Any) -> "Scheme":
        """Unquantized weights stored as `dtype` (f32, bf16, f16 or a torch dtype)."""
        c = _capi.sized(_capi.Scheme)
        lib().fmoe_scheme_init_unquantized(ctypes.byref(c), dtype_value(dtype, "scheme dtype"))
        return cls._wrap(c)

    @classmethod
    def _wrap(cls, c: _capi.Scheme) -> "Scheme":
        s = cls.__new__(cls)
        s._c, s.key = c, _key_of(c)
        return s

    @property
    def c(self) -> _capi.Scheme:
        return self._c

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            try:
                other = Scheme(other)
            except FusedMoEError:
                return False
        return isinstance(other, Scheme) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __str__(self) -> str:
        return self.key

    def __repr__(self) -> str:
        return f"Scheme({self.key!r})"


def _key_of(c: _capi.Scheme) -> str:
    buf = ctypes.create_string_buffer(_capi.SCHEME_KEY_MAX)
    check(lib().fmoe_scheme_key(ctypes.byref(c), buf, len(buf)), "scheme key")
    return buf.value.decode()
