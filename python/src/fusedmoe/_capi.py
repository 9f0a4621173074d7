"""The C API of libfusedmoe as ctypes declarations (include/fusedmoe/*.h).

This module only describes: structures field for field in header order, the
constants the package uses, and each function's argument and result types.
It loads nothing; :func:`declare` applies the prototypes to a loaded library.
tests/python/test_abi_layout.py compiles the installed headers and checks
every structure's size and field offsets against these declarations.
"""

from __future__ import annotations

import ctypes
from typing import TypeVar
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_char_p,
    c_double,
    c_float,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_uint32,
    c_uint64,
    c_void_p,
)

MAX_DIMS = 4
SCHEME_KEY_MAX = 128
ALL_LOCAL_EXPERTS = -1

# fmoe_status (common.h): stable values.
STATUS_OK = 0
STATUS_UNSUPPORTED = 1
STATUS_INVALID_ARGUMENT = 2
STATUS_OUT_OF_MEMORY = 3
STATUS_NOT_FOUND = 4
STATUS_IO_ERROR = 5
STATUS_PARSE_ERROR = 6
STATUS_ABI_MISMATCH = 7
STATUS_PLUGIN_ERROR = 8
STATUS_DEVICE_ERROR = 9
STATUS_BAD_STATE = 10
STATUS_INTERNAL = 11

# fmoe_dtype values the package maps to array dtypes (common.h).
DTYPE_INVALID = 0
DTYPE_F32 = 1
DTYPE_BF16 = 2
DTYPE_F16 = 3
DTYPE_F64 = 4
DTYPE_FP8_E4M3FN = 5
DTYPE_FP8_E4M3FNUZ = 6
DTYPE_FP8_E5M2 = 7
DTYPE_INT8 = 8
DTYPE_UINT8 = 9
DTYPE_INT32 = 10
DTYPE_INT64 = 11
DTYPE_FP4_E2M1X2 = 12
DTYPE_UE8M0 = 13

DEVICE_ANY = -1
DEVICE_CPU = 0
DEVICE_CUDA = 1
DEVICE_ROCM = 2

PLACEMENT_LINEAR = 1
PLACEMENT_ROUND_ROBIN = 2

# Expert-parallel groups (common.h): modes, dispatch dtypes, id size.
EP_MODE_INVALID = 0
EP_MODE_LOW_LATENCY = 1
EP_MODE_HIGH_THROUGHPUT = 2
EP_DISPATCH_INVALID = 0
EP_DISPATCH_ACTIVATION = 1
EP_DISPATCH_FP8_TOKEN = 2
EP_DISPATCH_FP8_BLOCK = 3
EP_UNIQUE_ID_BYTES = 256

SHARD_W1 = 1
SHARD_W2 = 2
SHARD_W3 = 3
SHARD_FULL = 4

LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG = 0, 1, 2, 3

PLUGIN_STATES = {0: "loaded", 1: "disabled", 2: "skipped", 3: "failed"}
VERDICTS = {0: "selected", 1: "accepted", 2: "refused", 3: "excluded", 4: "unavailable", 5: "error"}
PROJECTIONS = {0: "none", 1: "w13", 2: "w2"}
ROLES = {
    1: "weight",
    2: "bias",
    3: "weight_scale",
    4: "weight_global_scale",
    5: "input_scale",
    6: "input_global_scale",
    7: "zero_point",
    8: "g_idx",
    9: "routing_bias",
}

I64x4 = c_int64 * MAX_DIMS


class Tensor(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("dtype", c_int32),
        ("device_kind", c_int32),
        ("device_index", c_int32),
        ("ndim", c_uint32),
        ("shape", I64x4),
        ("strides", I64x4),
        ("data", c_void_p),
    ]


class LayerConfig(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("num_experts", c_uint32),
        ("num_redundant_experts", c_uint32),
        ("top_k", c_uint32),
        ("hidden_size", c_uint32),
        ("intermediate_size", c_uint32),
        ("activation", c_int32),
        ("gated", c_uint32),
        ("has_bias", c_uint32),
        ("swiglu_alpha", c_float),
        ("swiglu_limit", c_float),
        ("act_dtype", c_int32),
        ("scoring", c_int32),
        ("renormalize", c_uint32),
        ("grouped_topk", c_uint32),
        ("num_expert_group", c_uint32),
        ("topk_group", c_uint32),
        ("has_correction_bias", c_uint32),
        ("routed_scaling_factor", c_float),
        ("apply_router_weight_on_input", c_uint32),
        ("tp_size", c_uint32),
        ("tp_rank", c_uint32),
        ("ep_size", c_uint32),
        ("ep_rank", c_uint32),
        ("placement", c_int32),
        ("enable_eplb", c_uint32),
        ("max_num_tokens", c_uint32),
    ]


class Scheme(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("w_dtype", c_int32),
        ("w_strategy", c_int32),
        ("w_group_size", c_uint32),
        ("w_block_n", c_uint32),
        ("w_block_k", c_uint32),
        ("w_scale_dtype", c_int32),
        ("w_symmetric", c_uint32),
        ("w_actorder", c_int32),
        ("a_dtype", c_int32),
        ("a_strategy", c_int32),
        ("a_group_size", c_uint32),
        ("a_dynamic", c_uint32),
        ("a_symmetric", c_uint32),
    ]


LogFn = CFUNCTYPE(None, c_void_p, c_int32, c_char_p, c_char_p)


class ContextOptions(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("config_path", c_char_p),
        ("plugin_files", POINTER(c_char_p)),
        ("n_plugin_files", c_uint32),
        ("log_fn", LogFn),
        ("log_user", c_void_p),
        ("ignore_environment", c_uint32),
        ("log_spec", c_char_p),
        ("isolated", c_uint32),
        ("plugin_options", c_char_p),
    ]


class PluginInfo(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("name", c_char_p),
        ("version", c_char_p),
        ("vendor", c_char_p),
        ("path", c_char_p),
        ("manifest", c_char_p),
        ("abi_major", c_uint32),
        ("abi_minor", c_uint32),
        ("state", c_int32),
        ("reason", c_char_p),
        ("schemes", c_char_p),
    ]


class PluginOptionInfo(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("name", c_char_p),
        ("type", c_char_p),
        ("domain", c_char_p),
        ("default_value", c_char_p),
        ("value", c_char_p),
        ("source", c_char_p),
        ("help", c_char_p),
    ]


class PluginTolerance(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("mismatch", c_double),
        ("schemes", c_char_p),
        ("reason", c_char_p),
        ("link", c_char_p),
    ]


class DeviceInfo(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("plugin", c_char_p),
        ("kind", c_int32),
        ("index", c_int32),
        ("available", c_uint32),
        ("score", c_uint32),
        ("name", c_char_p),
        ("arch", c_char_p),
        ("id", c_char_p),
        ("driver", c_char_p),
        ("reason", c_char_p),
        ("memory_bytes", c_uint64),
    ]


class Candidate(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("plugin", c_char_p),
        ("method", c_char_p),
        ("device_kind", c_int32),
        ("device_index", c_int32),
        ("verdict", c_int32),
        ("score", c_uint32),
        ("preference", c_int32),
        ("reason", c_char_p),
    ]


class ParamInfo(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("name", c_char_p),
        ("dtype", c_int32),
        ("ndim", c_uint32),
        ("shape", I64x4),
        ("projection", c_int32),
        ("role", c_int32),
        ("per_expert", c_uint32),
        ("required", c_uint32),
    ]


class LayerOptions(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("device_kind", c_int32),
        ("device_index", c_int32),
        ("backend", c_char_p),
        ("ep_group", c_void_p),  # fmoe_ep_group *
    ]


class EPUniqueId(Structure):
    _fields_ = [("bytes", ctypes.c_uint8 * EP_UNIQUE_ID_BYTES)]


class EPGroupOptions(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("backend", c_char_p),
        ("device_kind", c_int32),
        ("device_index", c_int32),
        ("rank", c_uint32),
        ("size", c_uint32),
        ("max_tokens_per_rank", c_uint32),
        ("hidden_size", c_uint32),
        ("top_k", c_uint32),
        ("num_experts", c_uint32),
        ("act_dtype", c_int32),
        ("dispatch", c_int32),
        ("mode", c_int32),
        ("timing", c_uint32),
        ("comm", c_void_p),
        ("unique_id", POINTER(EPUniqueId)),
    ]


class EPTiming(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("forwards", c_uint64),
        ("dispatch_seconds", c_double),
        ("experts_seconds", c_double),
        ("combine_seconds", c_double),
    ]


class ForwardArgs(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("x", POINTER(Tensor)),
        ("topk_weights", POINTER(Tensor)),
        ("topk_ids", POINTER(Tensor)),
        ("router_logits", POINTER(Tensor)),
        ("out", POINTER(Tensor)),
        ("topk_weights_out", POINTER(Tensor)),
        ("topk_ids_out", POINTER(Tensor)),
        ("stream", c_void_p),
    ]


class ModelLoadStats(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("tensors", c_uint64),
        ("not_local", c_uint64),
    ]


class ExpertModules(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("prefix", c_char_p),
        ("num_experts", c_uint32),
        ("gate", c_char_p),
        ("up", c_char_p),
        ("down", c_char_p),
        ("fused", c_uint32),
    ]


class ModelShared(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("count", c_uint32),
        ("intermediate_size", c_uint32),
        ("gated", c_uint32),
    ]


class ModelNames(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("router_weight", c_char_p),
        ("router_bias", c_char_p),
        ("correction_bias", c_char_p),
        ("experts", c_char_p),
        ("expert_gate", c_char_p),
        ("expert_up", c_char_p),
        ("expert_down", c_char_p),
        ("fused_gate_up", c_char_p),
        ("fused_gate_up_bias", c_char_p),
        ("fused_down", c_char_p),
        ("fused_down_bias", c_char_p),
        ("fused_interleaved", c_uint32),
        ("mxfp4_gate_up_blocks", c_char_p),
        ("mxfp4_gate_up_scales", c_char_p),
        ("mxfp4_down_blocks", c_char_p),
        ("mxfp4_down_scales", c_char_p),
        ("shared", c_char_p),
        ("shared_gate_weight", c_char_p),
    ]


# Every structure, by its C name (the layout test walks this table).
STRUCTS: dict[str, type[Structure]] = {
    "fmoe_tensor": Tensor,
    "fmoe_layer_config": LayerConfig,
    "fmoe_scheme": Scheme,
    "fmoe_context_options": ContextOptions,
    "fmoe_plugin_info": PluginInfo,
    "fmoe_plugin_option_info": PluginOptionInfo,
    "fmoe_plugin_tolerance": PluginTolerance,
    "fmoe_device_info": DeviceInfo,
    "fmoe_candidate": Candidate,
    "fmoe_param_info": ParamInfo,
    "fmoe_layer_options": LayerOptions,
    "fmoe_forward_args": ForwardArgs,
    "fmoe_ep_unique_id": EPUniqueId,
    "fmoe_ep_group_options": EPGroupOptions,
    "fmoe_ep_timing": EPTiming,
    "fmoe_model_load_stats": ModelLoadStats,
    "fmoe_expert_modules": ExpertModules,
    "fmoe_model_shared": ModelShared,
    "fmoe_model_names": ModelNames,
}

st = c_int32  # fmoe_status
P = c_void_p  # opaque handles: fmoe_context*, fmoe_layer*, fmoe_selection*, ...

# name: (restype, argtypes)
PROTOTYPES: dict[str, tuple[object, list[object]]] = {
    "fmoe_version": (c_char_p, []),
    "fmoe_plugin_abi": (None, [POINTER(c_uint32), POINTER(c_uint32)]),
    "fmoe_last_error": (c_char_p, []),
    "fmoe_status_name": (c_char_p, [st]),
    "fmoe_dtype_name": (c_char_p, [c_int32]),
    "fmoe_activation_name": (c_char_p, [c_int32]),
    "fmoe_scoring_name": (c_char_p, [c_int32]),
    "fmoe_device_kind_name": (c_char_p, [c_int32]),
    "fmoe_dtype_from_name": (c_int32, [c_char_p]),
    "fmoe_activation_from_name": (c_int32, [c_char_p]),
    "fmoe_scoring_from_name": (c_int32, [c_char_p]),
    "fmoe_dtype_size": (c_size_t, [c_int32]),
    "fmoe_tensor_init": (st, [POINTER(Tensor), c_int32, c_uint32, POINTER(c_int64), c_void_p]),
    "fmoe_tensor_numel": (c_int64, [POINTER(Tensor)]),
    "fmoe_tensor_is_contiguous": (c_int, [POINTER(Tensor)]),
    "fmoe_layer_config_init": (None, [POINTER(LayerConfig)]),
    "fmoe_layer_config_validate": (st, [POINTER(LayerConfig)]),
    "fmoe_layer_config_global_experts": (c_uint32, [POINTER(LayerConfig)]),
    "fmoe_layer_config_local_experts": (c_uint32, [POINTER(LayerConfig)]),
    "fmoe_layer_config_intermediate_per_rank": (c_uint32, [POINTER(LayerConfig)]),
    "fmoe_layer_config_expert_map": (st, [POINTER(LayerConfig), POINTER(c_int32), c_uint32]),
    "fmoe_layer_config_local_to_global": (st, [POINTER(LayerConfig), POINTER(c_int32), c_uint32]),
    "fmoe_scheme_init_unquantized": (None, [POINTER(Scheme), c_int32]),
    "fmoe_scheme_key": (st, [POINTER(Scheme), c_char_p, c_size_t]),
    "fmoe_scheme_parse": (st, [c_char_p, POINTER(Scheme)]),
    "fmoe_quant_config_load": (st, [c_char_p, POINTER(P)]),
    "fmoe_quant_config_destroy": (None, [P]),
    "fmoe_quant_config_method": (c_char_p, [P]),
    "fmoe_quant_config_dtype": (c_int32, [P]),
    "fmoe_expert_modules_init": (None, [POINTER(ExpertModules)]),
    "fmoe_quant_config_scheme": (st, [P, POINTER(ExpertModules), POINTER(Scheme)]),
    "fmoe_checkpoint_open": (st, [c_char_p, POINTER(P)]),
    "fmoe_checkpoint_close": (None, [P]),
    "fmoe_checkpoint_tensor_count": (c_size_t, [P]),
    "fmoe_checkpoint_tensor_name": (c_char_p, [P, c_size_t]),
    "fmoe_checkpoint_find": (c_size_t, [P, c_char_p]),
    "fmoe_checkpoint_tensor": (st, [P, c_size_t, POINTER(Tensor)]),
    "fmoe_context_options_init": (None, [POINTER(ContextOptions)]),
    "fmoe_context_create": (st, [POINTER(ContextOptions), POINTER(P)]),
    "fmoe_context_destroy": (None, [P]),
    "fmoe_context_config_path": (c_char_p, [P]),
    "fmoe_context_plugin_count": (c_uint32, [P]),
    "fmoe_context_plugin": (st, [P, c_uint32, POINTER(PluginInfo)]),
    "fmoe_context_plugin_option_count": (c_uint32, [P, c_uint32]),
    "fmoe_context_plugin_option": (st, [P, c_uint32, c_uint32, POINTER(PluginOptionInfo)]),
    "fmoe_context_device_count": (c_uint32, [P]),
    "fmoe_context_device": (st, [P, c_uint32, POINTER(DeviceInfo)]),
    "fmoe_context_explain": (st, [P, POINTER(LayerConfig), POINTER(Scheme), POINTER(P)]),
    "fmoe_selection_candidate_count": (c_uint32, [P]),
    "fmoe_selection_candidate": (st, [P, c_uint32, POINTER(Candidate)]),
    "fmoe_selection_chosen": (c_int32, [P]),
    "fmoe_selection_summary": (c_char_p, [P]),
    "fmoe_selection_scheme_key": (c_char_p, [P]),
    "fmoe_selection_destroy": (None, [P]),
    "fmoe_layer_options_init": (None, [POINTER(LayerOptions)]),
    "fmoe_layer_create": (st, [P, POINTER(LayerConfig), POINTER(Scheme), POINTER(LayerOptions), POINTER(P)]),
    "fmoe_layer_destroy": (None, [P]),
    "fmoe_layer_selection": (P, [P]),
    "fmoe_layer_get_config": (POINTER(LayerConfig), [P]),
    "fmoe_layer_param_count": (c_uint32, [P]),
    "fmoe_layer_param": (st, [P, c_uint32, POINTER(ParamInfo)]),
    "fmoe_layer_load": (st, [P, c_char_p, c_int32, c_int32, POINTER(Tensor), POINTER(c_uint32)]),
    "fmoe_layer_finalize": (st, [P]),
    "fmoe_layer_forward": (st, [P, POINTER(ForwardArgs)]),
    "fmoe_layer_synchronize": (st, [P, c_void_p]),
    "fmoe_layer_expert_load": (st, [P, POINTER(c_uint64), c_uint32, c_uint32]),
    "fmoe_ep_group_options_init": (None, [POINTER(EPGroupOptions)]),
    "fmoe_ep_unique_id_make": (st, [P, POINTER(EPGroupOptions), POINTER(EPUniqueId)]),
    "fmoe_ep_group_create": (st, [P, POINTER(EPGroupOptions), POINTER(P)]),
    "fmoe_ep_group_destroy": (None, [P]),
    "fmoe_ep_group_rank": (c_uint32, [P]),
    "fmoe_ep_group_size": (c_uint32, [P]),
    "fmoe_ep_group_get_options": (POINTER(EPGroupOptions), [P]),
    "fmoe_ep_group_plugin": (c_char_p, [P]),
    "fmoe_ep_group_timing": (st, [P, c_uint32, POINTER(EPTiming)]),
    "fmoe_ep_mode_name": (c_char_p, [c_int32]),
    "fmoe_ep_dispatch_name": (c_char_p, [c_int32]),
    "fmoe_ep_mode_from_name": (c_int32, [c_char_p]),
    "fmoe_ep_dispatch_from_name": (c_int32, [c_char_p]),
    "fmoe_model_config_load": (st, [c_char_p, POINTER(P)]),
    "fmoe_model_destroy": (None, [P]),
    "fmoe_model_family": (c_char_p, [P]),
    "fmoe_model_layer_count": (c_uint32, [P]),
    "fmoe_model_layer_is_moe": (c_int, [P, c_uint32]),
    "fmoe_model_dtype": (c_int32, [P]),
    "fmoe_model_layer_config": (st, [P, c_uint32, POINTER(LayerConfig)]),
    "fmoe_model_layer_shared": (st, [P, c_uint32, POINTER(ModelShared)]),
    "fmoe_model_layer_names": (st, [P, c_uint32, POINTER(ModelNames)]),
    "fmoe_model_layer_expert_modules": (st, [P, c_uint32, POINTER(ExpertModules)]),
    "fmoe_model_load_layer": (st, [P, c_uint32, P, P, P, POINTER(ModelLoadStats)]),
}


def declare(lib: ctypes.CDLL) -> None:
    """Set restype/argtypes of every function the package calls.

    A missing symbol raises AttributeError naming it: the library is older
    than the declarations (the version check runs first and says so).
    """
    for name, (restype, argtypes) in PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


S = TypeVar("S", bound=Structure)


def sized(struct_type: type[S]) -> S:
    """A zeroed structure with struct_size set, as the ABI rules ask."""
    s = struct_type()
    s.struct_size = ctypes.sizeof(struct_type)  # type: ignore[attr-defined]
    return s
