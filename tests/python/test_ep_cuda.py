"""Expert-parallel groups of the cuda plugin from Python: one process, one
Python thread per GPU (the one-process-several-GPUs form of docs/EP.md).
Skipped without two CUDA devices and the cuda plugin in the prefix under
test; docs/PYTHON.md, "CUDA", gives the command.

Checked on 2 ranks (and 4 where the machine has 4 GPUs): the ranks' outputs,
CUDA tensors on each rank's own device, equal the single-GPU cuda layer's
over all tokens within bf16's tolerance, for activation and FP8 per-token
dispatch, in both modes; their load records sum to the routing's slot count; a
low-latency forward captured in a torch CUDA graph on every rank replays
with new inputs to the new result; capturing a high-throughput forward
raises, naming the mode.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
import torch

import fusedmoe
from conftest import make_context
from helpers import expect_error, random_weights
from test_ep import assert_bf16_close, load_by_global_id, make_tokens, round_through_dispatch, run_ranks

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs two CUDA devices"
)

K, H, I, E = 3, 128, 64, 8
MAXM = 8


def nccl_options() -> dict[str, dict[str, object]]:
    """The NCCL the cuda plugin loads: the one of torch's own wheel when
    there is one (the plugin's default name would find it anyway once torch
    has loaded it; naming it makes the test independent of that)."""
    try:
        import nvidia.nccl as n  # torch's CUDA wheels ship it
    except ImportError:
        return {}
    lib = os.path.join(list(n.__path__)[0], "lib", "libnccl.so.2")
    return {"cuda": {"nccl_library": lib}} if os.path.exists(lib) else {}


@pytest.fixture(scope="module")
def cuda_ctx(manifests):
    return make_context(manifests, "cuda", "reference", plugin_options=nccl_options())


def layer_config() -> fusedmoe.LayerConfig:
    return fusedmoe.LayerConfig(
        num_experts=E, top_k=K, hidden_size=H, intermediate_size=I, act_dtype="bf16", max_num_tokens=64
    )


def one_gpu(ctx, w13, w2, x, w, ids) -> torch.Tensor:
    """The oracle: the cuda layer on cuda:0 over every token. (Its load
    record is the core's, which cannot count routing that stays on the
    device: the ranks' records are checked against the ids instead.)"""
    with ctx.layer(layer_config(), "bf16", device="cuda:0", backend="cuda") as one:
        load_by_global_id(one, w13, w2)
        y = one.forward(x.cuda(0), w.cuda(0), ids.cuda(0))
        torch.cuda.synchronize(0)
        return y.cpu()


def group(ctx, r: int, n: int, uid: bytes, dispatch: str, mode: str) -> fusedmoe.EPGroup:
    return fusedmoe.EPGroup(
        ctx,
        rank=r,
        size=n,
        max_tokens_per_rank=MAXM,
        hidden_size=H,
        top_k=K,
        num_experts=E,
        dispatch=dispatch,
        mode=mode,
        backend="cuda",
        device=f"cuda:{r}",
        unique_id=uid,
    )


RANKS = [2, 4]
MODES = ["low_latency", "high_throughput"]
DISPATCH = ["activation", "fp8_token"]


@pytest.mark.parametrize("n", RANKS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dispatch", DISPATCH)
def test_ranks_equal_one_gpu(cuda_ctx, rng, seed, n, mode, dispatch):
    if torch.cuda.device_count() < n:
        pytest.skip(f"needs {n} CUDA devices")
    ms = [5, 0, 8, 3][:n]  # rank 1 passes no tokens
    w13n, w2n = random_weights(rng, E, H, I)
    w13, w2 = torch.from_numpy(w13n).bfloat16(), torch.from_numpy(w2n).bfloat16()
    x, w, ids = make_tokens(rng, sum(ms), E, hot=False)
    x = round_through_dispatch(x, dispatch)
    want = one_gpu(cuda_ctx, w13, w2, x, w, ids)
    load_want = np.bincount(ids.numpy().ravel(), minlength=E).tolist()  # every id is valid
    assert want.float().abs().max() > 0.05, f"seed {seed}: the oracle's output is nearly zero"
    first = np.concatenate([[0], np.cumsum(ms)]).astype(int)
    uid = fusedmoe.EPGroup.make_unique_id(cuda_ctx, backend="cuda", device="cuda:0")

    def rank(r: int) -> dict[str, Any]:
        torch.cuda.set_device(r)
        sl = slice(first[r], first[r + 1])
        dev = torch.device("cuda", r)
        with group(cuda_ctx, r, n, uid, dispatch, mode) as g:
            layer = cuda_ctx.layer(layer_config(), "bf16", ep_group=g)
            assert layer.device == fusedmoe.Device("cuda", r)
            load_by_global_id(layer, w13, w2)
            out = torch.full((ms[r], H), float("nan"), dtype=torch.bfloat16, device=dev)
            layer.forward(x[sl].to(dev), w[sl].to(dev), ids[sl].to(dev), out=out)
            torch.cuda.synchronize(dev)
            return dict(out=out.cpu(), load=layer.expert_load())

    got = run_ranks(n, rank)
    load_sum = [0] * E
    for r, res in enumerate(got):
        assert_bf16_close(res["out"], want[first[r] : first[r + 1]], seed, f"{n} ranks, rank {r}")
        load_sum = [a + b for a, b in zip(load_sum, res["load"])]
    assert load_sum == load_want, f"seed {seed}: load records {load_sum} vs the routing's {load_want}"


@pytest.mark.parametrize("mode", MODES)
def test_graph_capture_on_every_rank(cuda_ctx, rng, seed, mode):
    """Low latency: each rank captures its forward (thread-local capture:
    the ranks capture at once), then every rank replays it after writing
    new inputs, twice, and each replay equals the oracle on those inputs.
    High throughput: the capture raises, naming the mode."""
    n, ms = 2, [4, 6]
    w13n, w2n = random_weights(rng, E, H, I)
    w13, w2 = torch.from_numpy(w13n).bfloat16(), torch.from_numpy(w2n).bfloat16()
    rounds = [make_tokens(rng, sum(ms), E, hot=False) for _ in range(3)]
    wants = [one_gpu(cuda_ctx, w13, w2, *t) for t in rounds]
    first = np.concatenate([[0], np.cumsum(ms)]).astype(int)
    uid = fusedmoe.EPGroup.make_unique_id(cuda_ctx, backend="cuda", device="cuda:0")
    barrier = __import__("threading").Barrier(n)

    def rank(r: int) -> list[torch.Tensor]:
        torch.cuda.set_device(r)
        dev = torch.device("cuda", r)
        sl = slice(first[r], first[r + 1])
        with group(cuda_ctx, r, n, uid, "activation", mode) as g:
            layer = cuda_ctx.layer(layer_config(), "bf16", ep_group=g)
            load_by_global_id(layer, w13, w2)
            x, w, ids = (t[sl].to(dev) for t in rounds[0])
            out = torch.empty((ms[r], H), dtype=torch.bfloat16, device=dev)
            side = torch.cuda.Stream(dev)
            with torch.cuda.stream(side):
                layer.forward(x, w, ids, out=out)  # eager first, collective like every forward
            side.synchronize()
            outs = [out.cpu()]
            graph = torch.cuda.CUDAGraph()
            if mode == "high_throughput":
                with expect_error(fusedmoe.FusedMoEError.INVALID_ARGUMENT, "high_throughput"):
                    with torch.cuda.graph(graph, stream=side, capture_error_mode="thread_local"):
                        layer.forward(x, w, ids, out=out)
                return outs
            with torch.cuda.graph(graph, stream=side, capture_error_mode="thread_local"):
                layer.forward(x, w, ids, out=out)
            for t in rounds[1:]:
                for dst, src in zip((x, w, ids), t):
                    dst.copy_(src[sl])
                out.fill_(float("nan"))
                torch.cuda.synchronize(dev)
                barrier.wait()  # the ranks' replays meet in the same forward
                graph.replay()
                torch.cuda.synchronize(dev)
                outs.append(out.cpu())
            return outs

    got = run_ranks(n, rank)
    for r, outs in enumerate(got):
        for i, out in enumerate(outs):
            assert_bf16_close(out, wants[i][first[r] : first[r + 1]], seed, f"rank {r}, forward {i}")
