"""Context: configuration, plugins, devices, selection; the factory of layers."""

from __future__ import annotations

import ctypes
import os
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from . import _capi
from ._dtypes import Device
from ._library import check, encode, lib, load_library, text
from ._owned import Owned
from .config import LayerConfig, Scheme
from .errors import FusedMoEError

LOG_LEVELS = ("error", "warn", "info", "debug")

LogHandler = Callable[[str, str, str], None]
"""log_handler(level, category, message): level is "error", "warn", "info" or
"debug"; category "loader", "select", "dispatch", "plugin:<name>", ..."""


@dataclass(frozen=True)
class PluginOption:
    """One option of a plugin: its declaration and the value in effect."""

    name: str
    type: str
    domain: str
    default: str
    value: str
    source: str  # "default", "config" or "environment"
    help: str


@dataclass(frozen=True)
class PluginInfo:
    """A plugin as the registry saw it (``fusedmoe plugins``)."""

    name: str
    version: str
    vendor: str
    path: str
    manifest: str
    abi: tuple[int, int]
    state: str  # "loaded", "disabled", "skipped", "failed"
    reason: str  # why not loaded; "" when loaded
    schemes: tuple[str, ...]
    options: tuple[PluginOption, ...]

    @property
    def loaded(self) -> bool:
        return self.state == "loaded"


@dataclass(frozen=True)
class DeviceInfo:
    """A device as a loaded plugin reported it (``fusedmoe probe``)."""

    plugin: str
    device: Device
    available: bool
    score: int
    name: str
    arch: str
    id: str
    driver: str
    reason: str
    memory_bytes: int


@dataclass(frozen=True)
class Candidate:
    """One (plugin, method, device) the selection considered."""

    plugin: str
    method: str
    device: Device
    verdict: str  # "selected", "accepted", "refused", "excluded", "unavailable", "error"
    score: int
    preference: int  # position in the configured order, -1 if not named
    reason: str


@dataclass(frozen=True)
class Selection:
    """The selection for one (layer config, scheme): ``fusedmoe explain``.

    ``chosen`` is the selected candidate, or None when nothing could serve
    (``summary`` then says why, and each candidate's ``reason`` too).
    """

    scheme: str
    summary: str
    candidates: tuple[Candidate, ...]
    chosen: Candidate | None

    def __str__(self) -> str:
        lines = [f"scheme {self.scheme}: {self.summary}"]
        for c in self.candidates:
            lines.append(f"  {c.verdict:<11} {c.plugin}/{c.method or '-'} on {c.device} (score {c.score}): {c.reason}")
        return "\n".join(lines)


def selection_from_c(sel: int) -> Selection:
    """Read an fmoe_selection (owned by the caller)."""
    L = lib()
    cands = []
    for i in range(L.fmoe_selection_candidate_count(sel)):
        c = _capi.sized(_capi.Candidate)
        check(L.fmoe_selection_candidate(sel, i, ctypes.byref(c)), "selection candidate")
        cands.append(
            Candidate(
                plugin=text(c.plugin),
                method=text(c.method),
                device=Device.from_c(c.device_kind, c.device_index),
                verdict=_capi.VERDICTS.get(c.verdict, str(c.verdict)),
                score=int(c.score),
                preference=int(c.preference),
                reason=text(c.reason),
            )
        )
    chosen = L.fmoe_selection_chosen(sel)
    return Selection(
        scheme=text(L.fmoe_selection_scheme_key(sel)),
        summary=text(L.fmoe_selection_summary(sel)),
        candidates=tuple(cands),
        chosen=cands[chosen] if 0 <= chosen < len(cands) else None,
    )


def _log_spec(level: str | None, categories: Sequence[str]) -> bytes | None:
    if level is not None and level not in LOG_LEVELS:
        raise FusedMoEError(
            FusedMoEError.INVALID_ARGUMENT, f"log_level: '{level}' (expected one of {', '.join(LOG_LEVELS)})"
        )
    words = ([level] if level else []) + [str(c) for c in categories]
    for w in words:
        if not w or "," in w:
            raise FusedMoEError(FusedMoEError.INVALID_ARGUMENT, f"log_categories: '{w}' is not a category name")
    return ",".join(words).encode() if words else None


def _plugin_options_text(options: "str | Mapping[str, Mapping[str, object]] | None") -> bytes | None:
    """{"cpu": {"isa": "avx2", "amx": False}} -> b"cpu.isa=avx2,cpu.amx=false"."""
    if options is None:
        return None
    if isinstance(options, str):
        return options.encode()
    items = []
    for plugin, opts in options.items():
        for key, value in opts.items():
            text = ("true" if value else "false") if isinstance(value, bool) else str(value)
            if "," in text or "=" in str(key) or "," in str(key):
                raise FusedMoEError(FusedMoEError.INVALID_ARGUMENT,
                                    f"plugin_options: {plugin}.{key}={text}: ',' and '=' cannot appear in an option")
            items.append(f"{plugin}.{key}={text}")
    return ",".join(items).encode() if items else None


class Context(Owned):
    """A fusedmoe context (fmoe_context): configuration read, plugins loaded,
    devices probed. Create layers from it; close it (or use ``with``) when
    done. Layers keep their context alive.

    Args:
        config: a TOML configuration file (docs/CONFIG.md). None: $FMOE_CONFIG,
            else the installed default, else built-in defaults (with
            ``isolated``, only the first or the last).
        plugins: plugin manifests (``.toml``) or libraries (``.so``) loaded
            before any search path.
        log_level: "error", "warn", "info" or "debug" (applied after the
            TOML [log] level and $FMOE_LOG); None leaves them.
        log_categories: only these log categories ("dispatch", "select", ...).
        log_handler: called as ``handler(level, category, message)`` for each
            log line instead of writing to stderr; from any thread, so it
            must be thread-safe. An exception in it is printed and dropped.
        ignore_environment: read no FMOE_* variable (FMOE_CONFIG,
            FMOE_OPTIONS, FMOE_PLUGIN_PATH, ...).
        isolated: see nothing installed on the machine: no default config
            file, no plugins beside libfusedmoe. With ``ignore_environment``
            the context sees only what is passed here (what tests want).
        plugin_options: plugin options set by the application, as
            ``{"cpu": {"isa": "avx2"}}`` or the FMOE_OPTIONS string
            ``"cpu.isa=avx2"``; checked against each plugin's declared
            options, and applied last (over the TOML and FMOE_OPTIONS).

    Raises:
        FusedMoEError: PARSE_ERROR for a broken configuration (file:line:col),
            NOT_FOUND for a named file that does not exist. A plugin that fails
            to load does not raise: see :meth:`plugins`.
    """

    def __init__(
        self,
        config: str | os.PathLike | None = None,
        plugins: Sequence[str | os.PathLike] = (),
        *,
        log_level: str | None = None,
        log_categories: Sequence[str] = (),
        log_handler: LogHandler | None = None,
        ignore_environment: bool = False,
        isolated: bool = False,
        plugin_options: "str | Mapping[str, Mapping[str, object]] | None" = None,
    ) -> None:
        load_library()
        L = lib()
        if isinstance(plugins, (str, os.PathLike)):
            plugins = [plugins]
        files = [encode(p) for p in plugins]
        opts = _capi.ContextOptions()
        L.fmoe_context_options_init(ctypes.byref(opts))
        opts.config_path = encode(config)
        self._files = (ctypes.c_char_p * max(len(files), 1))(*files)
        opts.plugin_files = self._files if files else None
        opts.n_plugin_files = len(files)
        opts.ignore_environment = int(bool(ignore_environment))
        opts.isolated = int(bool(isolated))
        self._plugin_options = _plugin_options_text(plugin_options)
        opts.plugin_options = self._plugin_options
        opts.log_spec = _log_spec(log_level, log_categories)
        self._log_cb = None
        if log_handler is not None:
            self._log_cb = _capi.LogFn(_log_trampoline(log_handler))
            opts.log_fn = self._log_cb
        handle = ctypes.c_void_p()
        check(L.fmoe_context_create(ctypes.byref(opts), ctypes.byref(handle)), "context")
        self._h = handle.value
        self._layers: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self._groups: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self._lock = threading.Lock()

    # ---- lifetime (Owned: handle, close, with) ------------------------------
    # close() destroys every layer made from the context, then its EP groups,
    # then the context.
    _destroy = "fmoe_context_destroy"
    _noun = "context"
    _dependents = ("_layers", "_groups")

    # ---- queries -----------------------------------------------------------

    @property
    def config_path(self) -> str:
        """The configuration file that was read, "" for built-in defaults."""
        return text(lib().fmoe_context_config_path(self.handle))

    def plugins(self) -> list[PluginInfo]:
        """Every plugin the registry found: loaded, disabled, skipped or
        failed, with the reason and its options."""
        L, h = lib(), self.handle
        out = []
        for i in range(L.fmoe_context_plugin_count(h)):
            p = _capi.sized(_capi.PluginInfo)
            check(L.fmoe_context_plugin(h, i, ctypes.byref(p)), "plugin")
            options = []
            for j in range(L.fmoe_context_plugin_option_count(h, i)):
                o = _capi.sized(_capi.PluginOptionInfo)
                check(L.fmoe_context_plugin_option(h, i, j, ctypes.byref(o)), "plugin option")
                options.append(
                    PluginOption(
                        text(o.name),
                        text(o.type),
                        text(o.domain),
                        text(o.default_value),
                        text(o.value),
                        text(o.source),
                        text(o.help),
                    )
                )
            out.append(
                PluginInfo(
                    name=text(p.name),
                    version=text(p.version),
                    vendor=text(p.vendor),
                    path=text(p.path),
                    manifest=text(p.manifest),
                    abi=(int(p.abi_major), int(p.abi_minor)),
                    state=_capi.PLUGIN_STATES.get(p.state, str(p.state)),
                    reason=text(p.reason),
                    schemes=tuple(s.strip() for s in text(p.schemes).split(",") if s.strip()),
                    options=tuple(options),
                )
            )
        return out

    def devices(self) -> list[DeviceInfo]:
        """Devices the loaded plugins reported (``fusedmoe probe``)."""
        L, h = lib(), self.handle
        out = []
        for i in range(L.fmoe_context_device_count(h)):
            d = _capi.sized(_capi.DeviceInfo)
            check(L.fmoe_context_device(h, i, ctypes.byref(d)), "device")
            out.append(
                DeviceInfo(
                    plugin=text(d.plugin),
                    device=Device.from_c(d.kind, d.index),
                    available=bool(d.available),
                    score=int(d.score),
                    name=text(d.name),
                    arch=text(d.arch),
                    id=text(d.id),
                    driver=text(d.driver),
                    reason=text(d.reason),
                    memory_bytes=int(d.memory_bytes),
                )
            )
        return out

    def explain(self, config: LayerConfig, scheme: "Scheme | str") -> Selection:
        """Run the selection for (config, scheme) without creating a layer.

        Returns the report also when nothing can serve (``chosen`` is None).

        Raises:
            FusedMoEError: INVALID_ARGUMENT for a bad config or scheme.
        """
        c = config.to_c()
        s = Scheme(scheme)
        sel = ctypes.c_void_p()
        status = lib().fmoe_context_explain(self.handle, ctypes.byref(c), ctypes.byref(s.c), ctypes.byref(sel))
        if status not in (_capi.STATUS_OK, _capi.STATUS_UNSUPPORTED):
            check(status, "explain")
        if not sel.value:
            raise FusedMoEError(FusedMoEError.INTERNAL, f"explain: status {status} without a report")
        try:
            return selection_from_c(sel.value)
        finally:
            lib().fmoe_selection_destroy(sel.value)

    # ---- layers ------------------------------------------------------------

    def layer(
        self,
        config: LayerConfig,
        scheme: "Scheme | str",
        *,
        device: "Device | str | None" = None,
        backend: str | None = None,
        ep_group: "EPGroup | None" = None,
    ) -> "Layer":
        """Create a layer: select a backend method for (config, scheme) and
        declare its parameters. Load them (:meth:`Layer.load`), then
        :meth:`Layer.finalize`.

        Args:
            device: restrict selection to a device ("cpu", "cuda:0"); None: any.
            backend: a plugin-name glob ("cpu", "cuda*"); strict: if none of
                the matching plugins accepts the layer, this fails with their
                reasons.
            ep_group: bind the layer to this rank's :class:`EPGroup` (of this
                context). The layer runs on the group's plugin and device,
                takes the group's ep_size/ep_rank (leave the config's at 1/0),
                loads global expert ids keeping this rank's, and its forwards
                are collective: every rank forwards its own tokens, M = 0
                included. Closing the group closes the layer.

        Raises:
            FusedMoEError: UNSUPPORTED when no backend can serve (every
                candidate's reason in the message), INVALID_ARGUMENT for a bad
                config.
        """
        from .layer import Layer

        return Layer._create(self, config, Scheme(scheme), device, backend, ep_group)

    def ep_group(self, **options: Any) -> "EPGroup":
        """Join this rank to an expert-parallel group: ``EPGroup(self, **options)``."""
        from .ep import EPGroup

        return EPGroup(self, **options)

    def ep_unique_id(self, *, backend: str | None = None, device: "Device | str | None" = None) -> bytes:
        """``EPGroup.make_unique_id(self, ...)``: the bytes one rank makes and
        sends to every rank."""
        from .ep import EPGroup

        return EPGroup.make_unique_id(self, backend=backend, device=device)

    def layer_from_checkpoint(
        self,
        path: str | os.PathLike,
        layer_index: int,
        *,
        tp_size: int = 1,
        tp_rank: int = 0,
        ep_size: int = 1,
        ep_rank: int = 0,
        placement: str = "linear",
        redundant_experts: int = 0,
        max_num_tokens: int | None = None,
        device: "Device | str | None" = None,
        backend: str | None = None,
        finalize: bool = True,
        ep_group: "EPGroup | None" = None,
    ) -> "Layer":
        """Create, load and (by default) finalize decoder layer `layer_index`
        of a Hugging Face checkpoint directory, as ``fusedmoe run --model DIR
        --layer N`` does: config.json gives the layer config and the scheme
        (its quantization_config), the safetensors files the weights.

        The parallel options are those of the CLI: ``tp_size``/``tp_rank``
        (--tp/--tp-rank), ``ep_size``/``ep_rank`` (--ep/--ep-rank),
        ``placement`` (--placement), ``redundant_experts`` (--redundant:
        EPLB with that many replicas). The router is not part of the layer:
        compute the logits from :meth:`Model.names` ``router_weight``.
        With ``ep_group`` the layer is bound to that group (:meth:`layer`)
        and takes its EP size and rank: leave ``ep_size``/``ep_rank`` unset.

        Raises:
            FusedMoEError: INVALID_ARGUMENT for a dense or out-of-range layer,
                a tensor that does not fit (naming it), and the errors of
                :meth:`layer`.
        """
        from .model import Checkpoint, Model, QuantConfig

        config_json = os.path.join(os.fspath(path), "config.json")
        with Model(config_json) as model, QuantConfig(config_json) as qc, Checkpoint(path) as ck:
            cfg = model.layer_config(layer_index)
            cfg.tp_size, cfg.tp_rank, cfg.ep_size, cfg.ep_rank = tp_size, tp_rank, ep_size, ep_rank
            cfg.placement = placement
            cfg.enable_eplb = redundant_experts > 0
            cfg.num_redundant_experts = redundant_experts
            if max_num_tokens is not None:
                cfg.max_num_tokens = max_num_tokens
            scheme = qc.scheme(model, layer_index)
            layer = self.layer(cfg, scheme, device=device, backend=backend, ep_group=ep_group)
            try:
                layer.load_checkpoint(model, layer_index, ck, qc)
                if finalize:
                    layer.finalize()
            except BaseException:
                layer.close()
                raise
            return layer

    def _adopt(self, layer: Any) -> None:
        self._layers.add(layer)

    def _adopt_group(self, group: Any) -> None:
        self._groups.add(group)


def _log_trampoline(handler: LogHandler):
    names = dict(enumerate(LOG_LEVELS))

    def call(_user, level, category, msg):  # runs on whatever thread logs
        try:
            handler(names.get(level, str(level)), text(category), text(msg))
        except Exception:  # never unwind into C
            import traceback

            traceback.print_exc()

    return call


from .ep import EPGroup  # noqa: E402  (types for annotations)
from .layer import Layer  # noqa: E402  (type for annotations; layer imports context lazily)
