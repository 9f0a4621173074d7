"""The same API with CUDA tensors, on a machine with an NVIDIA GPU and a
prefix whose install has the cuda plugin (meson -Dcuda=enabled). Skipped
otherwise. docs/PYTHON.md, "CUDA", gives the command.

Checked: results against the reference backend on the host; torch's current
stream is the one used (work on a side stream, read after synchronizing
only that stream); capture in a CUDA graph and replay with new inputs; DLPack
arrays on the device; device mismatches; the transformers drop-in on the GPU.
"""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest
import torch

import fusedmoe
from conftest import REPO, make_context
from helpers import DLPackOnly, expect_error, moe_reference, random_routing, random_weights

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

E, K, H, I = 8, 2, 256, 128
M = 33
# bf16 output of f32-accumulated experts vs float64: bf16 rounding of x, the
# weights, the intermediate activation and the output.
TOL = 2e-2


@pytest.fixture(scope="module")
def cuda_ctx(manifests):
    return make_context(manifests, "cuda", "reference")


def cuda_layer(ctx, rng):
    td = torch.bfloat16
    cfg = fusedmoe.LayerConfig(
        num_experts=E,
        top_k=K,
        hidden_size=H,
        intermediate_size=I,
        act_dtype="bf16",
        renormalize=True,
        max_num_tokens=256,
    )
    layer = ctx.layer(cfg, "bf16", device="cuda:0", backend="cuda")
    assert layer.device == fusedmoe.Device("cuda", 0)
    w13, w2 = (torch.from_numpy(a).to(td) for a in random_weights(rng, E, H, I))
    layer.load("w13_weight", w13)  # weights load from host memory
    layer.load("w2_weight", w2)
    layer.finalize()
    return layer, w13.float().numpy(), w2.float().numpy(), td


def inputs(rng, td, m=M):
    x = torch.from_numpy(rng.standard_normal((m, H)).astype(np.float32)).to(td)
    w, ids = random_routing(rng, m, E, K)
    return x, torch.from_numpy(w), torch.from_numpy(ids)


def check(y, x, w13, w2, w, ids, seed):
    want = moe_reference(x.float().cpu().numpy(), w13, w2, w.cpu().numpy(), ids.cpu().numpy())
    err = np.abs(y.float().cpu().numpy() - want).max()
    scale = np.abs(want).max()
    assert scale > 0.1 and err <= TOL * scale, f"seed {seed}: max |diff| {err:.3e} vs {TOL} * {scale:.3e}"


def test_forward_cuda(cuda_ctx, rng, seed):
    """bf16 (the cuda plugin's unquantized scheme takes bf16 activations only)."""
    layer, w13, w2, td = cuda_layer(cuda_ctx, rng)
    x, w, ids = inputs(rng, td)
    y = layer.forward(x.cuda(), w.cuda(), ids.cuda())
    assert y.is_cuda and y.dtype == td
    torch.cuda.synchronize()
    check(y, x, w13, w2, w, ids, seed)


def test_forward_logits_cuda(cuda_ctx, rng, seed):
    layer, w13, w2, td = cuda_layer(cuda_ctx, rng)
    x, _, _ = inputs(rng, td)
    logits = torch.from_numpy(rng.standard_normal((M, E)).astype(np.float32))
    tw = torch.empty((M, K), dtype=torch.float32, device="cuda")
    ti = torch.empty((M, K), dtype=torch.int32, device="cuda")
    y = layer.forward_logits(x.cuda(), logits.cuda(), topk_weights_out=tw, topk_ids_out=ti)
    torch.cuda.synchronize()
    p = logits.softmax(-1)
    want_w, want_ids = p.topk(K, -1)
    want_w = want_w / want_w.sum(-1, keepdim=True)
    assert torch.equal(ti.cpu().sort(-1).values, want_ids.int().sort(-1).values), f"seed {seed}"
    check(y, x, w13, w2, want_w, want_ids, seed)


def test_current_stream_is_used(cuda_ctx, rng, seed):
    """Inputs written on a side stream, forward on it, only it synchronized."""
    layer, w13, w2, td = cuda_layer(cuda_ctx, rng)
    x, w, ids = inputs(rng, td)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        xd, wd, idd = x.cuda(non_blocking=True), w.cuda(non_blocking=True), ids.cuda(non_blocking=True)
        y = layer.forward(xd, wd, idd)
    side.synchronize()
    check(y, x, w13, w2, w, ids, seed)
    # an explicit stream argument, also as a raw handle
    y2 = torch.empty_like(xd)
    layer.forward(xd, wd, idd, out=y2, stream=side)
    layer.synchronize(side)
    assert torch.equal(y2, y)
    y3 = torch.empty_like(xd)
    layer.forward(xd, wd, idd, out=y3, stream=side.cuda_stream)
    side.synchronize()
    assert torch.equal(y3, y)


def test_cuda_graph_capture_and_replay(cuda_ctx, rng, seed):
    layer, w13, w2, td = cuda_layer(cuda_ctx, rng)
    sx, sw, sids = (t.cuda() for t in inputs(rng, td))
    sout = torch.empty_like(sx)
    layer.forward(sx, sw, sids, out=sout)  # warm up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        layer.forward(sx, sw, sids, out=sout)
    for _ in range(3):
        x, w, ids = inputs(rng, td)
        sx.copy_(x)
        sw.copy_(w)
        sids.copy_(ids)
        graph.replay()
        torch.cuda.synchronize()
        check(sout, x, w13, w2, w, ids, seed)
        eager = layer.forward(sx, sw, sids)
        torch.cuda.synchronize()
        assert torch.equal(eager, sout), f"seed {seed}: replay differs from eager"


def test_dlpack_on_device(cuda_ctx, rng, seed):
    layer, w13, w2, td = cuda_layer(cuda_ctx, rng)
    x, w, ids = (t.cuda() for t in inputs(rng, td))
    out = torch.empty_like(x)
    wrapped = [DLPackOnly(t) for t in (x, w, ids, out)]
    layer.forward(*wrapped[:3], out=wrapped[3])
    torch.cuda.synchronize()
    assert torch.equal(out, layer.forward(x, w, ids))
    stream = torch.cuda.current_stream().cuda_stream or 1
    assert all(c.calls[0]["stream"] == stream for c in wrapped), [c.calls for c in wrapped]


def test_device_mismatch(cuda_ctx, rng):
    layer, _, _, td = cuda_layer(cuda_ctx, rng)
    x, w, ids = inputs(rng, td)
    INV = fusedmoe.FusedMoEError.INVALID_ARGUMENT
    with expect_error(INV, "x: on cpu:0, but the layer runs on cuda:0"):
        layer.forward(x, w.cuda(), ids.cuda(), out=torch.empty_like(x.cuda()))
    with expect_error(INV, "topk_ids: on cpu:0, but the layer runs on cuda:0"):
        layer.forward(x.cuda(), w.cuda(), ids)
    with expect_error(INV, "checkpoint tensors must be in host memory"):
        cfg = fusedmoe.LayerConfig(num_experts=E, top_k=K, hidden_size=H, intermediate_size=I)
        cuda_ctx.layer(cfg, "bf16", device="cuda:0").load("w2_weight", torch.ones(E, H, I, dtype=td, device="cuda"))


def test_transformers_drop_in_cuda(cuda_ctx):
    spec = importlib.util.spec_from_file_location(
        "transformers_moe", REPO / "examples" / "python" / "transformers_moe.py"
    )
    example = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = example
    spec.loader.exec_module(example)
    for family in example.FAMILIES:
        r = example.compare(family, torch.bfloat16, cuda_ctx, seed=0, device="cuda", backend="cuda")
        assert r.passed, r.line()
        assert all(b.startswith("cuda/") for b in r.backends), r.backends
