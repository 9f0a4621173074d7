"""Layer: a routed-expert layer served by the backend the registry chose."""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import _capi
from ._dtypes import Device, dtype_name, dtype_value, torch_module
from ._library import check, lib, text
from ._owned import Owned
from ._tensor import TensorDesc, describe, empty_like
from .config import LayerConfig, Scheme
from .errors import FusedMoEError

if TYPE_CHECKING:
    from .context import Context, Selection
    from .ep import EPGroup
    from .model import Checkpoint, Model, QuantConfig

_SHARDS = {"w1": _capi.SHARD_W1, "w2": _capi.SHARD_W2, "w3": _capi.SHARD_W3, "full": _capi.SHARD_FULL}


@dataclass(frozen=True)
class ParamInfo:
    """A parameter the layer's method declared (shapes local to this rank)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    projection: str  # "w13", "w2" or "none"
    role: str  # "weight", "bias", "weight_scale", ...
    per_expert: bool  # axis 0 indexes local experts
    required: bool  # finalize refuses the layer until it is loaded


class Layer(Owned):
    """A layer (fmoe_layer). Made by :meth:`Context.layer` or
    :meth:`Context.layer_from_checkpoint`; then :meth:`load` each parameter,
    :meth:`finalize`, and :meth:`forward` as often as needed. Calls on one
    layer from several threads are serialized by the library; forwards of
    different layers run in parallel (ctypes releases the GIL).
    """

    selection: "Selection"
    """The selection this layer was created from (``fusedmoe explain``)."""
    device: Device
    """The device it runs on (every forward tensor must be there)."""
    backend: str
    """"plugin/method" that serves it."""
    scheme: str
    """Canonical scheme key."""
    config: LayerConfig
    """The layer config as the library holds it (validated, defaults filled)."""

    def __init__(self, ctx: "Context", handle: int) -> None:
        """Internal: use :meth:`Context.layer` or :meth:`Context.layer_from_checkpoint`."""
        from .context import selection_from_c

        self._ctx = ctx  # the context outlives its layers
        self._ep_group: "EPGroup | None" = None  # and the group its layers (set by _create)
        self._lock = threading.Lock()
        self._finalized = False
        self.selection = selection_from_c(lib().fmoe_layer_selection(handle))
        chosen = self.selection.chosen
        if chosen is None:  # fmoe_layer_create succeeded, so one was chosen
            raise FusedMoEError(FusedMoEError.INTERNAL, "layer created without a selected candidate")
        self.device = chosen.device
        self.backend = f"{chosen.plugin}/{chosen.method}"
        self.scheme = self.selection.scheme
        self.config = LayerConfig.from_c(lib().fmoe_layer_get_config(handle).contents)
        # Owned only from here: if anything above raised, _create destroys
        # the handle and this object's close() (and __del__) find nothing.
        self._h: int | None = handle
        ctx._adopt(self)

    @classmethod
    def _create(
        cls,
        ctx: "Context",
        config: LayerConfig,
        scheme: Scheme,
        device: "Device | str | None",
        backend: str | None,
        ep_group: "EPGroup | None" = None,
    ) -> "Layer":
        from .ep import EPGroup

        c = config.to_c()
        opts = _capi.LayerOptions()
        lib().fmoe_layer_options_init(ctypes.byref(opts))
        if device is not None:
            d = Device.parse(device)
            opts.device_kind, opts.device_index = d.kind_value, d.index
        if backend is not None:
            opts.backend = backend.encode()
        if ep_group is not None:
            if not isinstance(ep_group, EPGroup):
                raise FusedMoEError(
                    FusedMoEError.INVALID_ARGUMENT,
                    f"ep_group: expected a fusedmoe.EPGroup, got {type(ep_group).__name__}",
                )
            opts.ep_group = ep_group._bind_check(ctx)
        h = ctypes.c_void_p()
        check(
            lib().fmoe_layer_create(
                ctx.handle, ctypes.byref(c), ctypes.byref(scheme.c), ctypes.byref(opts), ctypes.byref(h)
            ),
            "layer",
        )
        assert h.value is not None
        try:
            layer = cls(ctx, h.value)
        except BaseException:
            lib().fmoe_layer_destroy(h.value)
            raise
        if ep_group is not None:
            layer._ep_group = ep_group
            ep_group._adopt(layer)
        return layer

    # ---- lifetime (Owned: handle, close, with) ------------------------------
    # close() must not race with a forward.
    _destroy = "fmoe_layer_destroy"
    _noun = "layer"

    @property
    def ep_group(self) -> "EPGroup | None":
        """The EP group the layer is bound to (None: none)."""
        return self._ep_group

    def __repr__(self) -> str:
        state = "closed" if self._h is None else "ready" if self._finalized else "loading"
        return f"<fusedmoe.Layer {self.backend} on {self.device}, scheme {self.scheme}, {state}>"

    # ---- parameters --------------------------------------------------------

    def params(self) -> list[ParamInfo]:
        """The parameters the method declared, in declaration order."""
        L, h = lib(), self.handle
        out = []
        for i in range(L.fmoe_layer_param_count(h)):
            p = _capi.sized(_capi.ParamInfo)
            check(L.fmoe_layer_param(h, i, ctypes.byref(p)), "param")
            out.append(
                ParamInfo(
                    name=text(p.name),
                    dtype=dtype_name(p.dtype),
                    shape=tuple(p.shape[j] for j in range(p.ndim)),
                    projection=_capi.PROJECTIONS.get(p.projection, str(p.projection)),
                    role=_capi.ROLES.get(p.role, str(p.role)),
                    per_expert=bool(p.per_expert),
                    required=bool(p.required),
                )
            )
        return out

    def load(
        self,
        name: str,
        tensor: Any,
        expert: int | None = None,
        shard: str = "full",
        *,
        dtype: Any = None,
    ) -> bool:
        """Copy a host tensor into declared parameter `name`.

        Args:
            tensor: host memory (a CPU torch tensor, a numpy array, any DLPack
                object on the CPU); copied, so it may be freed afterwards.
            expert: a global logical expert id, with `tensor` that expert's
                slice as stored in the checkpoint (unsharded: the layer
                narrows it for TP). None: all local experts at once, `tensor`
                being the whole parameter (already sharded).
            shard: "w1" (gate: first half of w13), "w3" (up: second half),
                "w2" (down) or "full" (the parameter's whole slice).
            dtype: view the elements as this fusedmoe dtype first (same
                element size), e.g. "fp4_e2m1x2" for packed fp4 held as uint8.

        Returns:
            False when another EP rank owns `expert` (nothing copied), else True.

        Raises:
            FusedMoEError: INVALID_ARGUMENT naming the parameter, the expert
                and both shapes on any mismatch; BAD_STATE after finalize.
        """
        if shard not in _SHARDS:
            raise FusedMoEError(FusedMoEError.INVALID_ARGUMENT, f"shard: '{shard}' (expected w1, w3, w2 or full)")
        as_dtype = dtype_value(dtype, "dtype") if dtype is not None else None
        desc = describe(tensor, name, as_dtype=as_dtype)
        taken = ctypes.c_uint32()
        e = _capi.ALL_LOCAL_EXPERTS if expert is None else int(expert)
        check(
            lib().fmoe_layer_load(
                self.handle, name.encode(), e, _SHARDS[shard], ctypes.byref(desc.c), ctypes.byref(taken)
            )
        )
        return bool(taken.value)

    def load_checkpoint(
        self, model: "Model", layer_index: int, checkpoint: "Checkpoint", quant: "QuantConfig | None" = None
    ) -> tuple[int, int]:
        """Load every tensor of MoE layer `layer_index` from a checkpoint
        (fmoe_model_load_layer). Returns (tensors loaded, of which another EP
        rank holds the expert)."""
        stats = _capi.sized(_capi.ModelLoadStats)
        check(
            lib().fmoe_model_load_layer(
                model.handle,
                layer_index,
                checkpoint.handle,
                quant.handle if quant else None,
                self.handle,
                ctypes.byref(stats),
            ),
            f"layer {layer_index}",
        )
        return int(stats.tensors), int(stats.not_local)

    def finalize(self) -> None:
        """Hand the loaded weights to the backend (repack, upload).

        Raises:
            FusedMoEError: BAD_STATE naming the first parameters still unloaded.
        """
        check(lib().fmoe_layer_finalize(self.handle))
        self._finalized = True

    # ---- forward -----------------------------------------------------------

    def _stream(self, stream: Any) -> int | None:
        """The stream handle for a device layer: the given one, else torch's
        current stream on the layer's device, else the legacy default (NULL)."""
        if self.device.kind == "cpu":
            if stream is not None:
                raise FusedMoEError(FusedMoEError.INVALID_ARGUMENT, "stream: the layer runs on the host")
            return None
        if stream is not None:
            if hasattr(stream, "cuda_stream"):  # torch.cuda.Stream
                return int(stream.cuda_stream)
            if hasattr(stream, "__cuda_stream__"):  # the CUDA stream protocol: (version, handle)
                return int(stream.__cuda_stream__()[1])
            if hasattr(stream, "ptr"):  # cupy.cuda.Stream
                return int(stream.ptr)
            return int(stream)
        torch = torch_module()
        if torch is not None and self.device.kind in ("cuda", "rocm") and torch.cuda.is_available():
            return int(torch.cuda.current_stream(self.device.index).cuda_stream)
        return 0

    def _on_device(self, desc: TensorDesc, what: str) -> None:
        if desc.device != self.device:
            raise FusedMoEError(
                FusedMoEError.INVALID_ARGUMENT, f"{what}: on {desc.device}, but the layer runs on {self.device}"
            )

    def _run(self, args: _capi.ForwardArgs, stream: int | None) -> None:
        args.stream = stream or None
        check(lib().fmoe_layer_forward(self.handle, ctypes.byref(args)), "forward")

    def forward(self, x: Any, topk_weights: Any, topk_ids: Any, out: Any = None, *, stream: Any = None) -> Any:
        """out = sum_k topk_weights[:, k] * expert[topk_ids[:, k]](x).

        Args:
            x: [M, hidden_size] in the layer's act_dtype, rows dense.
            topk_weights: [M, top_k] float32, contiguous.
            topk_ids: [M, top_k] int32 global physical expert ids, contiguous.
            out: [M, hidden_size] act_dtype, written completely; None: a new
                array like x (torch tensor, or any array-API array).
            stream: device layers only: a torch.cuda.Stream, an object with
                ``__cuda_stream__``, or a raw handle. None: torch's current
                stream on the layer's device (so the call is capturable in
                a CUDA graph), else the legacy default stream.

        All tensors must be on the layer's device. Returns `out`.

        Raises:
            FusedMoEError: INVALID_ARGUMENT naming the tensor for a wrong
                shape, dtype or device; BAD_STATE before finalize.
        """
        s = self._stream(stream)
        dx = describe(x, "x", stream=s)
        dw = describe(topk_weights, "topk_weights", stream=s)
        di = describe(topk_ids, "topk_ids", stream=s)
        if out is None:
            out = empty_like(x, (dx.shape[0] if dx.shape else 0, self.config.hidden_size), "out")
        do = describe(out, "out", stream=s, writable=True)
        # The library checks x and out against the layer's device; the
        # routing tensors are handed to the backend as they are.
        for d, what in ((dw, "topk_weights"), (di, "topk_ids")):
            self._on_device(d, what)
        a = _capi.sized(_capi.ForwardArgs)
        a.x, a.topk_weights, a.topk_ids, a.out = (ctypes.pointer(d.c) for d in (dx, dw, di, do))
        self._run(a, s)
        return out

    def forward_logits(
        self,
        x: Any,
        router_logits: Any,
        out: Any = None,
        *,
        topk_weights_out: Any = None,
        topk_ids_out: Any = None,
        stream: Any = None,
    ) -> Any:
        """Route with the layer's own routing (scoring, top-k, renormalize,
        grouped top-k, correction bias, scaling), then run the experts.

        Args:
            router_logits: [M, num_experts] float32 or bfloat16. For a
                modular backend (routing done by the library on the host) on
                a device, the logits must be host memory.
            topk_weights_out, topk_ids_out: optional [M, top_k] float32 /
                int32 arrays that receive the routing used (logical ids).

        Other arguments as :meth:`forward`. Returns `out`.
        """
        s = self._stream(stream)
        dx = describe(x, "x", stream=s)
        dl = describe(router_logits, "router_logits", stream=s)
        if out is None:
            out = empty_like(x, (dx.shape[0] if dx.shape else 0, self.config.hidden_size), "out")
        do = describe(out, "out", stream=s, writable=True)
        a = _capi.sized(_capi.ForwardArgs)
        a.x, a.router_logits, a.out = ctypes.pointer(dx.c), ctypes.pointer(dl.c), ctypes.pointer(do.c)
        keep = []
        if topk_weights_out is not None:
            d = describe(topk_weights_out, "topk_weights_out", stream=s, writable=True)
            a.topk_weights_out = ctypes.pointer(d.c)
            keep.append(d)
        if topk_ids_out is not None:
            d = describe(topk_ids_out, "topk_ids_out", stream=s, writable=True)
            a.topk_ids_out = ctypes.pointer(d.c)
            keep.append(d)
        self._run(a, s)
        return out

    __call__ = forward

    def expert_load(self, reset: bool = False) -> list[int]:
        """The load record (fmoe_layer_expert_load; docs/PLACEMENT.md): for
        each global physical expert, the routing slots this layer's forwards
        sent it since finalize or the last reset (``reset`` zeroes it after
        the read). On an EP group each rank counts its own tokens; the sum
        over the ranks is the load EPLB balances.

        Raises:
            FusedMoEError: UNSUPPORTED when the routing stayed on a device.
        """
        n = self.config.global_experts
        counts = (ctypes.c_uint64 * max(n, 1))()
        check(lib().fmoe_layer_expert_load(self.handle, counts, n, int(bool(reset))), "expert load")
        return [int(counts[i]) for i in range(n)]

    def synchronize(self, stream: Any = None) -> None:
        """Wait for work queued on `stream` (None: the whole device); a no-op
        on the host."""
        s = None if self.device.kind == "cpu" else (self._stream(stream) if stream is not None else None)
        check(lib().fmoe_layer_synchronize(self.handle, s or None), "synchronize")
