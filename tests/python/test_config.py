"""LayerConfig and Scheme against the C definitions."""

from __future__ import annotations

import ctypes
import dataclasses

import pytest
import torch

import fusedmoe
from fusedmoe import _capi
from fusedmoe._library import lib
from helpers import expect_error

INV = fusedmoe.FusedMoEError.INVALID_ARGUMENT


def test_defaults_are_the_libraries(lib_info):
    """LayerConfig() is fmoe_layer_config_init's struct, field for field."""
    c = _capi.LayerConfig()
    lib().fmoe_layer_config_init(ctypes.byref(c))
    assert fusedmoe.LayerConfig.from_c(c) == fusedmoe.LayerConfig()
    assert {f.name for f in dataclasses.fields(fusedmoe.LayerConfig)} == {n for n, _ in _capi.LayerConfig._fields_[1:]}


def test_round_trip(lib_info):
    cfg = fusedmoe.LayerConfig(
        num_experts=64,
        top_k=6,
        hidden_size=2048,
        intermediate_size=1408,
        activation="gelu_tanh",
        act_dtype=torch.float16,
        scoring="sigmoid",
        renormalize=True,
        grouped_topk=True,
        num_expert_group=8,
        topk_group=3,
        has_correction_bias=True,
        routed_scaling_factor=2.5,
        tp_size=2,
        tp_rank=1,
        max_num_tokens=256,
        swiglu_limit=7.0,
    )
    back = fusedmoe.LayerConfig.from_c(cfg.to_c())
    assert back == dataclasses.replace(cfg, act_dtype="f16")
    assert back.validate() is back
    assert cfg.intermediate_per_rank == 704
    # spellings the library accepts
    assert (
        fusedmoe.LayerConfig.from_c(dataclasses.replace(cfg, activation="gelu_pytorch_tanh", act_dtype="half").to_c())
        == back
    )


def test_derived_sizes(lib_info):
    cfg = fusedmoe.LayerConfig(
        num_experts=10, top_k=2, hidden_size=64, intermediate_size=32, ep_size=4, ep_rank=1, placement="round_robin"
    )
    assert cfg.global_experts == 10
    assert cfg.local_experts == 3  # 10 over 4 ranks: leftovers to the first ranks
    assert cfg.local_to_global() == [1, 5, 9]
    m = cfg.expert_map()
    assert [g for g, v in enumerate(m) if v >= 0] == [1, 5, 9] and [m[1], m[5], m[9]] == [0, 1, 2]
    eplb = dataclasses.replace(cfg, ep_size=1, ep_rank=0, enable_eplb=True, num_redundant_experts=2)
    assert eplb.global_experts == 12 and eplb.local_experts == 12


def test_validate_errors(lib_info):
    with expect_error(INV, "num_experts"):
        fusedmoe.LayerConfig(top_k=2, hidden_size=64, intermediate_size=32).validate()
    with expect_error(INV, "tp_size"):
        fusedmoe.LayerConfig(num_experts=8, top_k=2, hidden_size=64, intermediate_size=30, tp_size=4).validate()
    with expect_error(INV, "activation: unknown name 'swish'"):
        fusedmoe.LayerConfig(num_experts=8, top_k=2, hidden_size=64, intermediate_size=32, activation="swish").to_c()
    with expect_error(INV, "scoring: unknown name"):
        fusedmoe.LayerConfig(scoring="argmax").to_c()
    with expect_error(INV, "placement: 'striped'"):
        fusedmoe.LayerConfig(placement="striped").to_c()
    with expect_error(INV, "act_dtype: unknown dtype 'bf17'"):
        fusedmoe.LayerConfig(act_dtype="bf17").to_c()
    with expect_error(INV, "act_dtype: torch.complex64 has no fusedmoe dtype"):
        fusedmoe.LayerConfig(act_dtype=torch.complex64).to_c()
    with expect_error(INV, "tp_rank: -1 is out of range"):
        fusedmoe.LayerConfig(tp_rank=-1).to_c()
    with expect_error(INV, "top_k: expected a number"):
        fusedmoe.LayerConfig(top_k="two").to_c()


@pytest.mark.parametrize(
    "key,canonical",
    [
        ("bf16", "bf16"),
        ("f32", "f32"),
        ("fp8e4m3:channel/fp8e4m3:token:dynamic", "fp8e4m3:channel/fp8e4m3:token:dynamic"),
        ("int4:group128:actorder", "int4:group128:actorder"),
    ],
)
def test_scheme_keys(lib_info, key, canonical):
    s = fusedmoe.Scheme(key)
    assert s.key == canonical == str(s)
    assert s == canonical and s == fusedmoe.Scheme(s) and hash(s) == hash(fusedmoe.Scheme(canonical))


def test_scheme_unquantized_and_errors(lib_info):
    assert fusedmoe.Scheme.unquantized(torch.bfloat16) == "bf16"
    assert fusedmoe.Scheme.unquantized("float16").key == "f16"
    assert fusedmoe.Scheme("bf16") != "f16" and fusedmoe.Scheme("bf16") != "not a key"
    with expect_error(fusedmoe.FusedMoEError.PARSE_ERROR, "scheme 'fp8e4m3:chanel'", "chanel"):
        fusedmoe.Scheme("fp8e4m3:chanel")
    with expect_error(INV, "scheme: expected a key string"):
        fusedmoe.Scheme(16)
