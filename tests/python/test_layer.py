"""Layers: create, load, finalize, forward, forward_logits, and their errors."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

import fusedmoe
from helpers import (
    FakeCudaArray,
    expect_error,
    moe_reference,
    random_routing,
    random_weights,
    softmax_topk,
)

E, K, H, I = 8, 2, 64, 32
M = 7
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
# Against float64 math: f32 accumulation order; bf16/f16 rounding of x,
# weights and the output (each a relative 2^-8 / 2^-11).
TOL = {"f32": 1e-5, "bf16": 2e-2, "f16": 3e-3}


def make_layer(ctx, backend, dtype="f32", rng=None, **cfg_kw):
    cfg = fusedmoe.LayerConfig(num_experts=E, top_k=K, hidden_size=H, intermediate_size=I, act_dtype=dtype, **cfg_kw)
    layer = ctx.layer(cfg, fusedmoe.Scheme.unquantized(dtype), backend=backend)
    w13, w2 = random_weights(rng, E, H, I)
    td = DTYPES[dtype]
    w13_t, w2_t = torch.from_numpy(w13).to(td), torch.from_numpy(w2).to(td)
    layer.load("w13_weight", w13_t)
    layer.load("w2_weight", w2_t)
    layer.finalize()
    return layer, w13_t.float().numpy(), w2_t.float().numpy()


def assert_close(got, want, rel, seed, what="out"):
    got = np.asarray(got, dtype=np.float64)
    scale = np.abs(want).max()
    assert scale > 0.1, f"seed {seed}: reference {what} is nearly zero (max {scale})"
    err = np.abs(got - want).max()
    assert err <= rel * scale, f"seed {seed}: {what} max |diff| {err:.3e} > {rel} * {scale:.3e}"


def test_params_declared(host_ctx, backend):
    cfg = fusedmoe.LayerConfig(num_experts=E, top_k=K, hidden_size=H, intermediate_size=I)
    layer = host_ctx.layer(cfg, "bf16", backend=backend)
    params = {p.name: p for p in layer.params()}
    assert set(params) == {"w13_weight", "w2_weight"}
    w13, w2 = params["w13_weight"], params["w2_weight"]
    assert (w13.dtype, w13.shape, w13.projection, w13.role) == ("bf16", (E, 2 * I, H), "w13", "weight")
    assert (w2.dtype, w2.shape, w2.projection, w2.role) == ("bf16", (E, H, I), "w2", "weight")
    assert w13.per_expert and w13.required and w2.per_expert and w2.required
    assert layer.backend.startswith(backend + "/")
    assert layer.device == fusedmoe.Device("cpu", 0)
    assert layer.scheme == "bf16"
    assert layer.config.hidden_size == H and layer.config.act_dtype == "bf16"
    assert layer.selection.chosen is not None and layer.selection.chosen.plugin == backend
    assert backend in repr(layer)
    layer.close()


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_forward_torch(host_ctx, backend, dtype, rng, seed):
    layer, w13, w2 = make_layer(host_ctx, backend, dtype, rng)
    x = torch.from_numpy(rng.standard_normal((M, H)).astype(np.float32)).to(DTYPES[dtype])
    w, ids = random_routing(rng, M, E, K)
    y = layer.forward(x, torch.from_numpy(w), torch.from_numpy(ids))
    assert isinstance(y, torch.Tensor) and y.dtype == DTYPES[dtype] and tuple(y.shape) == (M, H)
    assert_close(y.float().numpy(), moe_reference(x.float().numpy(), w13, w2, w, ids), TOL[dtype], seed)
    # out given: written in place and returned
    out = torch.full((M, H), float("nan"), dtype=DTYPES[dtype])
    assert layer.forward(x, torch.from_numpy(w), torch.from_numpy(ids), out=out) is out
    assert torch.equal(out, y)


def test_forward_numpy(host_ctx, backend, rng, seed):
    layer, w13, w2 = make_layer(host_ctx, backend, "f32", rng)
    x = rng.standard_normal((M, H)).astype(np.float32)
    w, ids = random_routing(rng, M, E, K)
    y = layer(x, w, ids)  # __call__ is forward
    assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.shape == (M, H)
    assert_close(y, moe_reference(x, w13, w2, w, ids), TOL["f32"], seed)
    # read-only inputs are fine: fusedmoe only reads them
    for a in (x, w, ids):
        a.setflags(write=False)
    out = np.empty((M, H), np.float32)
    assert layer.forward(x, w, ids, out=out) is out
    np.testing.assert_array_equal(out, y)


def test_forward_logits(host_ctx, backend, rng, seed):
    layer, w13, w2 = make_layer(host_ctx, backend, "f32", rng, renormalize=True)
    x = rng.standard_normal((M, H)).astype(np.float32)
    logits = rng.standard_normal((M, E)).astype(np.float32) * 2
    tw = np.full((M, K), np.nan, np.float32)
    ti = np.full((M, K), -1, np.int32)
    y = layer.forward_logits(x, logits, topk_weights_out=tw, topk_ids_out=ti)
    want_w, want_ids = softmax_topk(logits, K, renormalize=True)
    np.testing.assert_array_equal(np.sort(ti, -1), np.sort(want_ids, -1), err_msg=f"seed {seed}")
    order, want_order = np.argsort(ti, -1), np.argsort(want_ids, -1)
    np.testing.assert_allclose(
        np.take_along_axis(tw, order, -1), np.take_along_axis(want_w, want_order, -1), rtol=1e-5, err_msg=f"seed {seed}"
    )
    assert_close(y, moe_reference(x, w13, w2, want_w, want_ids), TOL["f32"], seed)
    # bf16 logits are accepted too
    yb = layer.forward_logits(x, torch.from_numpy(logits).bfloat16())
    assert yb.shape == (M, H)


def test_zero_tokens_is_a_no_op(ref_ctx, rng):
    layer, _, _ = make_layer(ref_ctx, "reference", "f32", rng)
    y = layer.forward(np.empty((0, H), np.float32), np.empty((0, K), np.float32), np.empty((0, K), np.int32))
    assert y.shape == (0, H)


def test_row_strided_x(ref_ctx, rng, seed):
    """Rows need only be dense: x may be the left part of a wider array."""
    layer, w13, w2 = make_layer(ref_ctx, "reference", "f32", rng)
    wide = rng.standard_normal((M, H + 16)).astype(np.float32)
    w, ids = random_routing(rng, M, E, K)
    y = layer.forward(wide[:, :H], w, ids)
    assert_close(y, moe_reference(wide[:, :H], w13, w2, w, ids), TOL["f32"], seed)
    with expect_error(fusedmoe.FusedMoEError.INVALID_ARGUMENT, "x: rows must be dense"):
        layer.forward(np.asfortranarray(wide[:, :H]), w, ids)


def test_load_per_expert_and_shard(ref_ctx, rng, seed):
    """Loading expert by expert (w1 / w3 halves, w2) is the same as whole."""
    whole, w13, w2 = make_layer(ref_ctx, "reference", "f32", rng)
    cfg = fusedmoe.LayerConfig(num_experts=E, top_k=K, hidden_size=H, intermediate_size=I, act_dtype="f32")
    parts = ref_ctx.layer(cfg, "f32")
    for e in range(E):
        assert parts.load("w13_weight", np.ascontiguousarray(w13[e, :I]), expert=e, shard="w1") is True
        assert parts.load("w13_weight", np.ascontiguousarray(w13[e, I:]), expert=e, shard="w3") is True
        assert parts.load("w2_weight", w2[e], expert=e, shard="w2") is True
    parts.finalize()
    x = rng.standard_normal((M, H)).astype(np.float32)
    w, ids = random_routing(rng, M, E, K)
    np.testing.assert_array_equal(parts.forward(x, w, ids), whole.forward(x, w, ids), err_msg=f"seed {seed}")


def test_ep_load_skips_other_ranks_experts(ref_ctx, rng):
    cfg = fusedmoe.LayerConfig(
        num_experts=E, top_k=K, hidden_size=H, intermediate_size=I, act_dtype="f32", ep_size=2, ep_rank=1
    )
    layer = ref_ctx.layer(cfg, "f32")
    assert layer.params()[0].shape[0] == E // 2
    w13, _ = random_weights(rng, E, H, I)
    assert layer.load("w13_weight", w13[0], expert=0, shard="full") is False  # rank 0 holds expert 0
    assert layer.load("w13_weight", w13[E - 1], expert=E - 1, shard="full") is True


def test_concurrent_forwards(host_ctx, backend, rng, seed):
    layer, _, _ = make_layer(host_ctx, backend, "f32", rng)
    inputs = [(rng.standard_normal((M, H)).astype(np.float32), *random_routing(rng, M, E, K)) for _ in range(4)]
    want = [layer.forward(*a) for a in inputs]
    got: list = [None] * 8

    def run(j):
        got[j] = layer.forward(*inputs[j % 4])

    threads = [threading.Thread(target=run, args=(j,)) for j in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for j in range(8):
        np.testing.assert_array_equal(got[j], want[j % 4], err_msg=f"seed {seed}: thread {j}")


# ---- errors -------------------------------------------------------------------


@pytest.fixture
def f32_layer(ref_ctx, rng):
    layer, _, _ = make_layer(ref_ctx, "reference", "f32", rng)
    yield layer
    layer.close()


@pytest.fixture
def routing(rng):
    x = rng.standard_normal((M, H)).astype(np.float32)
    return (x, *random_routing(rng, M, E, K))


def test_error_wrong_shape(f32_layer, routing):
    x, w, ids = routing
    INV = fusedmoe.FusedMoEError.INVALID_ARGUMENT
    with expect_error(INV, "x: expected f32 [*, 64], got f32 [7, 65]"):
        f32_layer.forward(np.ones((M, H + 1), np.float32), w, ids)
    with expect_error(INV, "topk_weights: expected f32 [7, 2], got f32 [7, 3]"):
        f32_layer.forward(x, np.ones((M, K + 1), np.float32), ids)
    with expect_error(INV, "topk_ids"):
        f32_layer.forward(x, w, ids[:-1])
    with expect_error(INV, "out: expected f32 [7, 64]"):
        f32_layer.forward(x, w, ids, out=np.empty((M + 1, H), np.float32))
    with expect_error(INV, "router_logits: expected"):
        f32_layer.forward_logits(x, np.ones((M, E + 1), np.float32))
    with expect_error(INV, "5 dimensions"):
        f32_layer.forward(np.ones((1, 1, 1, 1, H), np.float32), w, ids)


def test_error_wrong_dtype(f32_layer, routing):
    x, w, ids = routing
    INV = fusedmoe.FusedMoEError.INVALID_ARGUMENT
    with expect_error(INV, "x: expected f32", "got bf16"):
        f32_layer.forward(torch.from_numpy(x).bfloat16(), w, ids)
    with expect_error(INV, "topk_ids: expected int32", "got int64"):
        f32_layer.forward(x, w, ids.astype(np.int64))
    with expect_error(INV, "topk_weights: expected f32", "got f64"):
        f32_layer.forward(x, w.astype(np.float64), ids)
    with expect_error(INV, "router_logits: dtype f16, expected f32 or bf16"):
        f32_layer.forward_logits(x, np.ones((M, E), np.float16))
    with expect_error(INV, "x:", "has no fusedmoe dtype"):
        f32_layer.forward(x.astype(np.complex64), w, ids)
    with expect_error(INV, "x:", "not an array"):
        f32_layer.forward(x.tolist(), w, ids)


def test_error_wrong_device(f32_layer, routing):
    """A CUDA array for a host layer is refused before its memory is read:
    by the library for x and out, by the package for the routing tensors
    (the library hands those to the backend unchecked)."""
    x, w, ids = routing
    INV = fusedmoe.FusedMoEError.INVALID_ARGUMENT
    with expect_error(INV, "x: on cuda:0, but the layer runs on cpu:0"):
        f32_layer.forward(FakeCudaArray(x), w, ids, out=np.empty((M, H), np.float32))
    with expect_error(INV, "out: on cuda:1, but the layer runs on cpu:0"):
        f32_layer.forward(x, w, ids, out=FakeCudaArray(np.empty((M, H), np.float32), index=1))
    with expect_error(INV, "topk_weights: on cuda:0, but the layer runs on cpu:0"):
        f32_layer.forward(x, FakeCudaArray(w), ids)
    with expect_error(INV, "topk_ids: on cuda:0, but the layer runs on cpu:0"):
        f32_layer.forward(x, w, FakeCudaArray(ids))
    with expect_error(INV, "torch device 'meta'"):
        f32_layer.forward(torch.empty((M, H), device="meta"), w, ids)
    with expect_error(INV, "stream: the layer runs on the host"):
        f32_layer.forward(x, w, ids, stream=1)


def test_error_read_only_out(f32_layer, routing):
    x, w, ids = routing
    out = np.empty((M, H), np.float32)
    out.setflags(write=False)
    with expect_error(fusedmoe.FusedMoEError.INVALID_ARGUMENT, "out: the array is read-only"):
        f32_layer.forward(x, w, ids, out=out)


def test_error_unloaded_parameter(ref_ctx, rng, routing):
    x, w, ids = routing
    cfg = fusedmoe.LayerConfig(num_experts=E, top_k=K, hidden_size=H, intermediate_size=I, act_dtype="f32")
    layer = ref_ctx.layer(cfg, "f32")
    w13, _ = random_weights(rng, E, H, I)
    layer.load("w13_weight", w13)
    with expect_error(fusedmoe.FusedMoEError.BAD_STATE, "forward before fmoe_layer_finalize"):
        layer.forward(x, w, ids)
    with expect_error(fusedmoe.FusedMoEError.BAD_STATE, "w2_weight"):
        layer.finalize()
    # half of an expert's w13 loaded is still unloaded
    layer2 = ref_ctx.layer(cfg, "f32")
    layer2.load("w2_weight", random_weights(rng, E, H, I)[1])
    for e in range(E):
        layer2.load("w13_weight", np.ascontiguousarray(w13[e, :I]), expert=e, shard="w1")
    with expect_error(fusedmoe.FusedMoEError.BAD_STATE, "w13_weight"):
        layer2.finalize()


def test_error_load(ref_ctx, f32_layer, rng):
    cfg = fusedmoe.LayerConfig(num_experts=E, top_k=K, hidden_size=H, intermediate_size=I, act_dtype="f32")
    layer = ref_ctx.layer(cfg, "f32")
    w13, w2 = random_weights(rng, E, H, I)
    INV = fusedmoe.FusedMoEError.INVALID_ARGUMENT
    with expect_error(INV, "w13_weight", "[8, 64, 64]"):
        layer.load("w13_weight", w13[:, :, :-1].copy())
    with expect_error(INV, "w2_weight", "bf16"):
        layer.load("w2_weight", torch.from_numpy(w2).bfloat16())
    with pytest.raises(fusedmoe.FusedMoEError, match="no_such_weight") as e:
        layer.load("no_such_weight", w2)
    assert e.value.status in (fusedmoe.FusedMoEError.NOT_FOUND, INV)
    with expect_error(INV, "shard: 'gate'"):
        layer.load("w2_weight", w2, shard="gate")
    with expect_error(INV, "cannot view f32 elements as bf16"):
        layer.load("w2_weight", w2, dtype="bf16")
    with expect_error(INV, "checkpoint tensors must be in host memory"):
        layer.load("w2_weight", FakeCudaArray(w2))
    with expect_error(fusedmoe.FusedMoEError.BAD_STATE, "already finalized"):
        f32_layer.load("w2_weight", w2)


def test_error_closed(ref_ctx, rng, routing):
    x, w, ids = routing
    ctx = fusedmoe.Context(plugins=[p.manifest for p in ref_ctx.plugins()], isolated=True, ignore_environment=True)
    layer, _, _ = make_layer(ctx, "reference", "f32", rng)
    ctx.close()  # closes its layers first
    with expect_error(fusedmoe.FusedMoEError.BAD_STATE, "the layer is closed"):
        layer.forward(x, w, ids)
    with expect_error(fusedmoe.FusedMoEError.BAD_STATE, "the context is closed"):
        ctx.plugins()
    ctx.close()  # idempotent
    layer.close()


def test_error_no_backend(ref_ctx):
    """UNSUPPORTED with every candidate's reason: the only plugin is restricted away."""
    cfg = fusedmoe.LayerConfig(num_experts=E, top_k=K, hidden_size=H, intermediate_size=I)
    with pytest.raises(fusedmoe.FusedMoEError) as e:
        ref_ctx.layer(cfg, "bf16", backend="no-such-plugin*")
    assert e.value.status in (fusedmoe.FusedMoEError.UNSUPPORTED, fusedmoe.FusedMoEError.NOT_FOUND)
    assert "no-such-plugin" in e.value.message
    assert str(e.value).startswith(f"[{e.value.status_name}] ")
