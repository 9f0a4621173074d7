"""fusedmoe: the fused Mixture-of-Experts layer of libfusedmoe, from Python.

A pure-Python binding (ctypes) of the installed C library: it finds
libfusedmoe (:func:`load_library`), checks its version, and wraps the C API
(include/fusedmoe/fusedmoe.h, model.h) in a few classes::

    import fusedmoe, torch
    ctx = fusedmoe.Context()                      # config, plugins, devices
    cfg = fusedmoe.LayerConfig(num_experts=8, top_k=2, hidden_size=64,
                               intermediate_size=32, act_dtype="bf16")
    layer = ctx.layer(cfg, "bf16")                # the registry picks a backend
    layer.load("w13_weight", w13)                 # [E, 2I, H]: gate rows, then up
    layer.load("w2_weight", w2)                   # [E, H, I]
    layer.finalize()
    y = layer.forward(x, topk_weights, topk_ids)  # or forward_logits(x, logits)

Tensors are torch tensors, numpy arrays or any object with ``__dlpack__``;
every failure raises :class:`FusedMoEError`. docs/PYTHON.md has the rest.
"""

from ._dtypes import Device
from ._library import LibraryInfo, library_info, load_library
from ._version import __version__
from .config import LayerConfig, Scheme
from .context import Candidate, Context, DeviceInfo, PluginInfo, PluginOption, Selection
from .ep import EP_DISPATCHES, EP_MODES, EPGroup, EPGroupOptions, EPTiming
from .errors import FusedMoEError
from .layer import Layer, ParamInfo
from .model import Checkpoint, Model, QuantConfig, SharedExperts

__all__ = [
    "Candidate",
    "Checkpoint",
    "Context",
    "Device",
    "DeviceInfo",
    "EPGroup",
    "EPGroupOptions",
    "EPTiming",
    "EP_DISPATCHES",
    "EP_MODES",
    "FusedMoEError",
    "Layer",
    "LayerConfig",
    "LibraryInfo",
    "Model",
    "ParamInfo",
    "PluginInfo",
    "PluginOption",
    "QuantConfig",
    "Scheme",
    "Selection",
    "SharedExperts",
    "__version__",
    "library_info",
    "load_library",
]
