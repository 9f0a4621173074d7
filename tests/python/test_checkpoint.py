"""Layers straight from checkpoint directories (tests/data/hf_models, saved by
transformers itself) against transformers' own outputs, with the CLI's
TP / EP / EPLB options."""

from __future__ import annotations

import numpy as np
import pytest

import fusedmoe
from conftest import REPO
from helpers import expect_error

MODELS = REPO / "tests" / "data" / "hf_models"


def golden(family: str) -> dict[str, np.ndarray]:
    with fusedmoe.Checkpoint(MODELS / family / "golden.safetensors") as ck:
        return {n: ck.numpy(n) for n in ck.names()}


@pytest.mark.parametrize("family", ["qwen3_moe", "mixtral"])
def test_model_queries(lib_info, family):
    with fusedmoe.Model(MODELS / family) as m:
        assert m.family == family and m.layer_count == 2 and m.moe_layers == [0, 1] and m.dtype == "f32"
        cfg = m.layer_config(1)
        assert (cfg.num_experts, cfg.top_k, cfg.hidden_size, cfg.intermediate_size) == (8, 2, 32, 16)
        assert cfg.renormalize and cfg.scoring == "softmax" and cfg.act_dtype == "f32"
        names = m.names(1)
        block = "block_sparse_moe" if family == "mixtral" else "mlp"  # as save_pretrained writes them
        assert names["router_weight"] == f"model.layers.1.{block}.gate.weight"
        assert names["experts"] == f"model.layers.1.{block}.experts" and names["shared"] is None
        assert m.shared(1) == fusedmoe.SharedExperts(0, 0, False)
    with fusedmoe.QuantConfig(MODELS / family) as qc, fusedmoe.Model(MODELS / family) as m:
        assert qc.method == "none" and qc.scheme(m, 0) == "f32"


def test_checkpoint_reads(lib_info):
    with fusedmoe.Checkpoint(MODELS / "mixtral") as ck:
        name = "model.layers.0.block_sparse_moe.gate.weight"
        assert name in ck and "nope" not in ck
        assert ck.info(name) == ("f32", (8, 32))
        w = ck.numpy(name)
        assert w.shape == (8, 32) and w.dtype == np.float32 and np.abs(w).max() > 0
    with expect_error(fusedmoe.FusedMoEError.BAD_STATE, "closed"):
        ck.names()


@pytest.mark.parametrize("family", ["qwen3_moe", "mixtral"])
@pytest.mark.parametrize("layer_index", [0, 1])
def test_layer_from_checkpoint_matches_transformers(ref_ctx, family, layer_index):
    """forward_logits on transformers' router logits gives transformers'
    routing and routed output (f32 model: f32 rounding only)."""
    g = golden(family)
    x, logits = g["x"], g[f"layers.{layer_index}.router_logits"]
    # the router, from the checkpoint, reproduces transformers' logits
    with fusedmoe.Checkpoint(MODELS / family) as ck, fusedmoe.Model(MODELS / family) as m:
        router = ck.numpy(m.names(layer_index)["router_weight"])
    np.testing.assert_allclose(x @ router.T, logits, rtol=1e-5, atol=1e-5)
    layer = ref_ctx.layer_from_checkpoint(MODELS / family, layer_index, max_num_tokens=16)
    assert layer.backend == "reference/unquantized" and layer.scheme == "f32"
    ids = np.empty((16, 2), np.int32)
    w = np.empty((16, 2), np.float32)
    y = layer.forward_logits(x, logits, topk_ids_out=ids, topk_weights_out=w)
    np.testing.assert_array_equal(ids, g[f"layers.{layer_index}.topk_ids"])
    np.testing.assert_allclose(w, g[f"layers.{layer_index}.topk_weights"], rtol=1e-6)
    want = g[f"layers.{layer_index}.routed_out"]
    assert np.abs(want).max() > 0.1
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())
    # the same with transformers' routing given
    y2 = layer.forward(x, g[f"layers.{layer_index}.topk_weights"], g[f"layers.{layer_index}.topk_ids"])
    np.testing.assert_allclose(y2, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize(
    "opts",
    [
        [dict(tp_size=2, tp_rank=r) for r in range(2)],
        [dict(ep_size=2, ep_rank=r) for r in range(2)],
        [dict(ep_size=3, ep_rank=r, placement="round_robin") for r in range(3)],
    ],
    ids=["tp2", "ep2", "ep3-round-robin"],
)
def test_parallel_ranks_sum_to_the_whole(ref_ctx, opts):
    """Each TP/EP rank computes its part; the parts add up to the whole
    layer (the all-reduce the caller does)."""
    g = golden("qwen3_moe")
    x, w, ids = g["x"], g["layers.1.topk_weights"], g["layers.1.topk_ids"]
    parts = []
    for o in opts:
        layer = ref_ctx.layer_from_checkpoint(MODELS / "qwen3_moe", 1, **o)
        parts.append(layer.forward(x, w, ids))
        if "tp_size" in o:
            assert layer.config.tp_size == o["tp_size"] and layer.params()[0].shape[1] == 2 * 16 // o["tp_size"]
    want = g["layers.1.routed_out"]
    assert all(np.abs(p).max() > 0 for p in parts)
    np.testing.assert_allclose(sum(parts), want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


def test_eplb_replicas(ref_ctx):
    """EPLB with redundant experts: routing by logits maps to replicas, same result."""
    g = golden("mixtral")
    layer = ref_ctx.layer_from_checkpoint(MODELS / "mixtral", 0, redundant_experts=3)
    assert layer.config.enable_eplb and layer.config.num_redundant_experts == 3
    assert layer.params()[0].shape[0] == 8 + 3
    y = layer.forward_logits(g["x"], g["layers.0.router_logits"])
    want = g["layers.0.routed_out"]
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


def test_checkpoint_errors(ref_ctx, tmp_path):
    with pytest.raises(fusedmoe.FusedMoEError) as e:
        ref_ctx.layer_from_checkpoint(tmp_path, 0)
    assert e.value.status in (fusedmoe.FusedMoEError.NOT_FOUND, fusedmoe.FusedMoEError.IO_ERROR)
    assert str(tmp_path) in e.value.message
    with expect_error(fusedmoe.FusedMoEError.INVALID_ARGUMENT, "mlp_only_layers"):
        ref_ctx.layer_from_checkpoint(MODELS / "qwen2_moe", 0)  # a dense layer
    with pytest.raises(fusedmoe.FusedMoEError) as e:
        ref_ctx.layer_from_checkpoint(MODELS / "mixtral", 7)
    assert e.value.status == fusedmoe.FusedMoEError.INVALID_ARGUMENT and "7" in e.value.message
    with expect_error(fusedmoe.FusedMoEError.INVALID_ARGUMENT, "ep_rank"):
        ref_ctx.layer_from_checkpoint(MODELS / "mixtral", 0, ep_size=2, ep_rank=2)
    with expect_error(fusedmoe.FusedMoEError.INVALID_ARGUMENT, "layer: expected an index"):
        fusedmoe.Model(MODELS / "mixtral").layer_config(-1)
