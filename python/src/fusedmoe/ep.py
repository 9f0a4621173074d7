"""Expert-parallel groups (fmoe_ep_group; docs/EP.md).

A layer whose experts do not fit one device runs over a group: each rank
(one device) holds its share of the experts, forwards its own tokens with
routing over global expert ids, and gets its own output back. The
application owns the communication: it passes its communicator handle, or
sends every rank the bytes of a unique id that one rank made. One process
per device and one process driving several devices (a thread per rank)
both work: group creation and forwards are collective C calls, and ctypes
releases the GIL while they wait for the other ranks.
"""

from __future__ import annotations

import ctypes
import operator
import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import _capi
from ._dtypes import Device, dtype_name, dtype_value
from ._library import check, lib, text
from ._owned import Owned
from .errors import FusedMoEError

if TYPE_CHECKING:
    from .context import Context

EP_DISPATCHES = ("activation", "fp8_token", "fp8_block")
"""How tokens travel to their experts' ranks: unchanged in ``act_dtype``, e4m3
with one f32 scale per token, or e4m3 with one scale per 1x128 group
(``hidden_size % 128 == 0``). The combine always carries ``act_dtype``."""
EP_MODES = ("low_latency", "high_throughput")
"""low_latency (decode): buffers sized at creation, no host synchronization,
graph-capturable; high_throughput (prefill): buffers sized by the counts."""
UNIQUE_ID_BYTES = _capi.EP_UNIQUE_ID_BYTES


@dataclass(frozen=True)
class EPTiming:
    """What :meth:`EPGroup.timing` returns: seconds summed over ``forwards``."""

    forwards: int
    dispatch_seconds: float
    experts_seconds: float
    combine_seconds: float


@dataclass(frozen=True)
class EPGroupOptions:
    """A group's options as the library holds them (defaults resolved, the
    device the plugin chose): fmoe_ep_group_get_options."""

    rank: int
    size: int
    device: Device
    max_tokens_per_rank: int
    hidden_size: int
    top_k: int
    num_experts: int
    act_dtype: str
    dispatch: str
    mode: str
    timing: bool


def _name_value(value: str, names: tuple[str, ...], parse: Any, what: str) -> int:
    if not isinstance(value, str) or value not in names:
        raise FusedMoEError(FusedMoEError.INVALID_ARGUMENT, f"{what}: {value!r} (expected one of {', '.join(names)})")
    return int(parse(value.encode()))


def _base_options(backend: str | None, device: "Device | str | None") -> _capi.EPGroupOptions:
    o = _capi.EPGroupOptions()
    lib().fmoe_ep_group_options_init(ctypes.byref(o))
    if backend is not None:
        if not isinstance(backend, str):
            raise FusedMoEError(
                FusedMoEError.INVALID_ARGUMENT, f"backend: expected a plugin-name glob, got {backend!r}"
            )
        o.backend = backend.encode()
    if device is not None:
        d = Device.parse(device)
        o.device_kind, o.device_index = d.kind_value, d.index
    return o


def _unsigned(value: Any, what: str) -> int:
    """A uint32_t field: any integer (numpy's too), never a bool or a float."""
    try:
        v = None if isinstance(value, bool) else operator.index(value)
    except TypeError:
        v = None
    if v is None or not 0 <= v <= 0xFFFFFFFF:
        raise FusedMoEError(FusedMoEError.INVALID_ARGUMENT, f"{what}: expected an integer in 0..2^32-1, got {value!r}")
    return v


def _comm_handle(comm: Any) -> int:
    """The communicator as a pointer value. Only explicit handles are taken:
    an arbitrary object's id() passed as an ncclComm_t would crash the
    plugin, so the caller must say which pointer it means."""
    if isinstance(comm, ctypes.c_void_p):
        value = comm.value or 0
    elif isinstance(comm, ctypes._Pointer):  # type: ignore[attr-defined]
        value = ctypes.cast(comm, ctypes.c_void_p).value or 0
    elif isinstance(comm, int) and not isinstance(comm, bool):
        value = comm
    else:
        raise FusedMoEError(
            FusedMoEError.INVALID_ARGUMENT,
            f"comm: expected the communicator's handle as an int, ctypes.c_void_p or ctypes pointer "
            f"(an ncclComm_t for the cuda plugin), got {type(comm).__name__}",
        )
    if not 0 < value < 1 << 64:
        raise FusedMoEError(FusedMoEError.INVALID_ARGUMENT, f"comm: {value:#x} is not a communicator handle")
    return value


class EPGroup(Owned):
    """This rank's membership of an expert-parallel group (fmoe_ep_group).

    Creation is collective: it returns when all ``size`` ranks have joined
    with the same sizes, dtype, dispatch and mode, or raises (a rank that
    never comes fails the others after the plugin's timeout, naming it).
    Bind layers with ``ctx.layer(..., ep_group=group)``; their forwards are
    collective too. Close the group on every rank (``with`` does it); that
    closes its layers first.

    Args:
        ctx: the context whose plugins serve the group; its layers must come
            from the same context.
        rank, size: this rank (``0 <= rank < size``) and the group's size.
        max_tokens_per_rank: the most tokens one rank passes one forward
            (the same on every rank, as are the sizes below).
        hidden_size, top_k: H and k of the group's layers.
        num_experts: global physical experts of its layers (logical +
            redundant), at least ``size``.
        act_dtype: x / out dtype of its layers ("bf16", a torch dtype, ...).
        dispatch: one of :data:`EP_DISPATCHES`.
        mode: one of :data:`EP_MODES`.
        timing: let the plugin measure its phases (:meth:`timing`).
        backend: a plugin-name glob; None: any plugin with EP on the device.
        device: this rank's device ("cpu", "cuda:1"); None: the plugin's first.
        unique_id: the bytes :meth:`make_unique_id` made on one rank.
        comm: or the application's communicator for this rank, as a handle
            (an ncclComm_t for the cuda plugin; for the reference plugin any
            address the ranks, threads of one process, share). Borrowed: it
            must outlive the group. Exactly one of ``unique_id`` and ``comm``.

    Raises:
        FusedMoEError: INVALID_ARGUMENT naming the field; UNSUPPORTED when no
            plugin serves EP on the device; DEVICE_ERROR naming the ranks that
            never joined.
    """

    def __init__(
        self,
        ctx: "Context",
        *,
        rank: int,
        size: int,
        max_tokens_per_rank: int,
        hidden_size: int,
        top_k: int,
        num_experts: int,
        act_dtype: Any = "bf16",
        dispatch: str = "activation",
        mode: str = "low_latency",
        timing: bool = False,
        backend: str | None = None,
        device: "Device | str | None" = None,
        unique_id: "bytes | bytearray | memoryview | None" = None,
        comm: Any = None,
    ) -> None:
        self._h: int | None = None
        o = _base_options(backend, device)
        for field, value in (
            ("rank", rank),
            ("size", size),
            ("max_tokens_per_rank", max_tokens_per_rank),
            ("hidden_size", hidden_size),
            ("top_k", top_k),
            ("num_experts", num_experts),
        ):
            setattr(o, field, _unsigned(value, field))
        o.act_dtype = dtype_value(act_dtype, "act_dtype")
        o.dispatch = _name_value(dispatch, EP_DISPATCHES, lib().fmoe_ep_dispatch_from_name, "dispatch")
        o.mode = _name_value(mode, EP_MODES, lib().fmoe_ep_mode_from_name, "mode")
        o.timing = int(bool(timing))
        # Both or neither are left to the library to refuse, so the message
        # is the one C callers get.
        self._id = None
        if unique_id is not None:
            raw = bytes(unique_id) if isinstance(unique_id, (bytes, bytearray, memoryview)) else None
            if raw is None or len(raw) != UNIQUE_ID_BYTES:
                got = f"{len(raw)} bytes" if raw is not None else type(unique_id).__name__
                raise FusedMoEError(
                    FusedMoEError.INVALID_ARGUMENT,
                    f"unique_id: expected the {UNIQUE_ID_BYTES} bytes of EPGroup.make_unique_id, got {got}",
                )
            self._id = _capi.EPUniqueId.from_buffer_copy(raw)
            o.unique_id = ctypes.pointer(self._id)
        self._comm = comm  # borrowed by the plugin: keep the object alive as long as the group
        if comm is not None:
            o.comm = _comm_handle(comm)
        h = ctypes.c_void_p()
        check(lib().fmoe_ep_group_create(ctx.handle, ctypes.byref(o), ctypes.byref(h)), "EP group")
        assert h.value is not None
        self._ctx = ctx  # the context outlives its groups
        self._h = h.value
        self._lock = threading.Lock()
        self._layers: "weakref.WeakSet[Any]" = weakref.WeakSet()
        L = lib()
        g = L.fmoe_ep_group_get_options(self._h).contents
        self.options = EPGroupOptions(
            rank=int(g.rank),
            size=int(g.size),
            device=Device.from_c(g.device_kind, g.device_index),
            max_tokens_per_rank=int(g.max_tokens_per_rank),
            hidden_size=int(g.hidden_size),
            top_k=int(g.top_k),
            num_experts=int(g.num_experts),
            act_dtype=dtype_name(g.act_dtype),
            dispatch=text(L.fmoe_ep_dispatch_name(g.dispatch)),
            mode=text(L.fmoe_ep_mode_name(g.mode)),
            timing=bool(g.timing),
        )
        self.plugin = text(L.fmoe_ep_group_plugin(self._h))
        ctx._adopt_group(self)

    @staticmethod
    def make_unique_id(ctx: "Context", *, backend: str | None = None, device: "Device | str | None" = None) -> bytes:
        """Make a unique id on one rank (fmoe_ep_unique_id_make) with the
        plugin ``backend`` / ``device`` select, as the group will. Send the
        bytes to every rank by any means (they are plain data) and pass them
        as ``unique_id``."""
        o = _base_options(backend, device)
        out = _capi.EPUniqueId()
        check(lib().fmoe_ep_unique_id_make(ctx.handle, ctypes.byref(o), ctypes.byref(out)), "EP unique id")
        return bytes(out.bytes)

    # ---- lifetime (Owned: handle, close, with) ------------------------------
    # close() closes this rank's layers bound to the group, then leaves it
    # (fmoe_ep_group_destroy; call it on every rank).
    _destroy = "fmoe_ep_group_destroy"
    _noun = "EP group"
    _dependents = ("_layers",)

    @property
    def context(self) -> "Context":
        return self._ctx

    @property
    def closed(self) -> bool:
        return self._h is None

    def __repr__(self) -> str:
        state = "closed" if self._h is None else "open"
        o = self.options
        return (
            f"<fusedmoe.EPGroup rank {o.rank} of {o.size} on {self.plugin} {o.device}, "
            f"{o.dispatch} {o.mode}, {state}>"
        )

    # ---- queries -----------------------------------------------------------

    @property
    def rank(self) -> int:
        return int(lib().fmoe_ep_group_rank(self.handle))

    @property
    def size(self) -> int:
        return int(lib().fmoe_ep_group_size(self.handle))

    @property
    def device(self) -> Device:
        return self.options.device

    def timing(self, reset: bool = False) -> EPTiming:
        """Forwards and seconds spent dispatching, in the experts and
        combining since creation or the last reset, as the plugin measures
        them. ``reset`` zeroes them after the read.

        Raises:
            FusedMoEError: UNSUPPORTED when the group was made without
                ``timing=True`` or its plugin does not measure.
        """
        t = _capi.sized(_capi.EPTiming)
        check(lib().fmoe_ep_group_timing(self.handle, int(bool(reset)), ctypes.byref(t)), "EP timing")
        return EPTiming(int(t.forwards), float(t.dispatch_seconds), float(t.experts_seconds), float(t.combine_seconds))

    # ---- internal ----------------------------------------------------------

    def _bind_check(self, ctx: "Context") -> int:
        """The handle for a layer of `ctx`, or a clear error."""
        if self._h is None:
            raise FusedMoEError(FusedMoEError.BAD_STATE, "ep_group: the EP group is closed")
        if self._ctx is not ctx:
            raise FusedMoEError(
                FusedMoEError.INVALID_ARGUMENT, "ep_group: the group belongs to another context than the layer's"
            )
        return self._h

    def _adopt(self, layer: Any) -> None:
        self._layers.add(layer)
