"""Expert-parallel groups from Python (EPGroup; docs/EP.md), on the reference
plugin's in-process groups: ranks are Python threads of this process, the
way one process drives several GPUs.

What tests/ep/test_ep_reference.c asserts in C, here through the package:
N ranks, each forwarding its own tokens with global expert ids, give the
single-rank layer's output bit for bit with dispatch "activation", and
within bf16's tolerance with FP8 dispatch when the single-rank layer is fed
the tokens as the dispatch carries them; the ranks' load records sum to
the single-rank record; timing counts the forwards; both bootstraps; a rank
with M = 0; and the errors of misuse.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Callable

import numpy as np
import pytest
import torch

import fusedmoe
from conftest import make_context
from helpers import expect_error, random_weights

K, H, I = 3, 128, 64
MAXM = 8  # max_tokens_per_rank
JOIN_S = 60.0  # a thread still running after this is a hang, reported as such


def run_ranks(n: int, body: Callable[[int], Any]) -> list[Any]:
    """body(rank) on n threads at once; its results in rank order. An
    exception on any rank is raised here, naming the rank."""
    results: list[Any] = [None] * n
    errors: list[BaseException | None] = [None] * n

    def main(r: int) -> None:
        try:
            results[r] = body(r)
        except BaseException as e:  # re-raised in the test's thread
            errors[r] = e

    threads = [threading.Thread(target=main, args=(r,), name=f"ep-rank-{r}") for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_S)
    hung = [r for r, t in enumerate(threads) if t.is_alive()]
    assert not hung, f"rank(s) {hung} still running after {JOIN_S} s"
    for r, e in enumerate(errors):
        if e is not None:
            raise AssertionError(f"rank {r}: {e!r}") from e
    return results


def layer_config(experts: int, **kw) -> fusedmoe.LayerConfig:
    return fusedmoe.LayerConfig(
        num_experts=experts, top_k=K, hidden_size=H, intermediate_size=I, act_dtype="bf16", max_num_tokens=64, **kw
    )


def load_by_global_id(layer: fusedmoe.Layer, w13: torch.Tensor, w2: torch.Tensor) -> int:
    """Offer every logical expert by its global id; the layer keeps its own.
    Returns how many it took."""
    taken = 0
    for e in range(w13.shape[0]):
        t13 = layer.load("w13_weight", w13[e], expert=e)
        t2 = layer.load("w2_weight", w2[e], expert=e)
        assert t13 == t2, f"expert {e}: w13 taken {t13}, w2 taken {t2}"
        taken += t13
    layer.finalize()
    return taken


def round_through_dispatch(x: torch.Tensor, dispatch: str) -> torch.Tensor:
    """What the experts see of bf16 tokens after an FP8 dispatch: e4m3 with
    an f32 scale (amax / 448) per token or per 1x128 group, dequantized."""
    if dispatch == "activation":
        return x
    block = 128 if dispatch == "fp8_block" else x.shape[1]
    f = x.float().reshape(x.shape[0], -1, block)
    scale = f.abs().amax(-1, keepdim=True) / 448.0
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    q = (f / scale).to(torch.float8_e4m3fn).float() * scale
    return q.reshape(x.shape).bfloat16()


def make_tokens(rng: np.random.Generator, total: int, experts: int, hot: bool):
    """bf16 tokens in [-1, 1), k distinct global ids (slot 0 expert 0 when
    `hot`), positive weights."""
    x = torch.from_numpy(rng.uniform(-1, 1, size=(total, H)).astype(np.float32)).bfloat16()
    ids = np.empty((total, K), dtype=np.int32)
    for t in range(total):
        rest = rng.permutation(np.arange(1, experts) if hot else np.arange(experts))
        ids[t] = np.concatenate([[0], rest[: K - 1]]) if hot else rest[:K]
    w = rng.uniform(0.2, 0.8, size=(total, K)).astype(np.float32)
    return x, torch.from_numpy(w), torch.from_numpy(ids)


def assert_bf16_close(got: torch.Tensor, want: torch.Tensor, seed: int, what: str) -> None:
    """The C test's close_bf16: |a - b| <= 2e-2 + 2e-2 |b|, all finite."""
    g, w = got.float(), want.float()
    assert torch.isfinite(g).all(), f"seed {seed}: {what}: non-finite values"
    bad = (g - w).abs() > 2e-2 + 2e-2 * w.abs()
    assert not bad.any(), f"seed {seed}: {what}: {int(bad.sum())} values off, max |diff| {(g - w).abs().max():.3e}"


CASES = {
    # id: (ranks, tokens per rank, placement, redundant, dispatch, bootstrap, hot)
    "2-linear-id": (2, [5, 3], "linear", 0, "activation", "unique_id", False),
    "2-m0-roundrobin-comm": (2, [6, 0], "round_robin", 0, "activation", "comm", False),
    "4-m0-linear-id": (4, [3, 0, 8, 2], "linear", 0, "activation", "unique_id", False),
    "4-roundrobin-comm-hot": (4, [2, 4, 0, 5], "round_robin", 0, "activation", "comm", True),
    "2-eplb-id": (2, [4, 4], "linear", 2, "activation", "unique_id", False),
    "2-fp8-token": (2, [5, 0], "linear", 0, "fp8_token", "unique_id", False),
    "4-fp8-block": (4, [1, 3, 0, 4], "round_robin", 0, "fp8_block", "comm", False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_ranks_equal_one_rank(ref_ctx, rng, seed, case):
    n, ms, placement, redundant, dispatch, bootstrap, hot = CASES[case]
    logical = 8
    cfg = layer_config(logical, placement=placement, num_redundant_experts=redundant, enable_eplb=redundant > 0)
    physical = logical + redundant
    w13n, w2n = random_weights(rng, logical, H, I)
    w13, w2 = torch.from_numpy(w13n).bfloat16(), torch.from_numpy(w2n).bfloat16()
    x, w, ids = make_tokens(rng, sum(ms), physical, hot)
    x = round_through_dispatch(x, dispatch)

    # The oracle: one layer on one rank, all tokens.
    with ref_ctx.layer(cfg, "bf16", backend="reference") as one:
        load_by_global_id(one, w13, w2)
        want = one.forward(x, w, ids)
        load_one = one.expert_load()
    assert want.float().abs().max() > 0.05, f"seed {seed}: the oracle's output is nearly zero"

    first = np.concatenate([[0], np.cumsum(ms)]).astype(int)
    comm = ctypes.c_int(0)  # any address the ranks share is the reference's "communicator"
    boot: dict[str, Any] = (
        {"unique_id": fusedmoe.EPGroup.make_unique_id(ref_ctx, backend="reference")}
        if bootstrap == "unique_id"
        else {"comm": ctypes.addressof(comm)}
    )

    def rank(r: int):
        sl = slice(first[r], first[r + 1])
        with fusedmoe.EPGroup(
            ref_ctx,
            rank=r,
            size=n,
            max_tokens_per_rank=MAXM,
            hidden_size=H,
            top_k=K,
            num_experts=physical,
            dispatch=dispatch,
            timing=True,
            backend="reference",
            **boot,
        ) as g:
            layer = ref_ctx.layer(cfg, "bf16", ep_group=g)
            assert layer.ep_group is g and (layer.config.ep_size, layer.config.ep_rank) == (n, r)
            taken = load_by_global_id(layer, w13, w2)
            outs = []
            for _ in range(2):  # the group is reusable; both results are checked
                out = torch.full((ms[r], H), float("nan"), dtype=torch.bfloat16)
                outs.append(layer.forward(x[sl].clone(), w[sl].clone(), ids[sl].clone(), out=out))
            return dict(
                outs=outs,
                taken=taken,
                local=layer.config.local_experts,
                load=layer.expert_load(),
                timing=g.timing(),
                rank=(g.rank, g.size),
            )

    got = run_ranks(n, rank)
    load_sum = [0] * physical
    for r, res in enumerate(got):
        assert res["rank"] == (r, n)
        want_r = want[first[r] : first[r + 1]]
        for rep, out in enumerate(res["outs"]):
            what = f"rank {r} forward {rep + 1}"
            if dispatch == "activation":
                assert torch.equal(out, want_r), f"seed {seed}: {what}: not bit-equal to one rank"
            else:
                assert_bf16_close(out, want_r, seed, what)
        assert res["timing"].forwards == 2
        assert res["timing"].dispatch_seconds >= 0 and res["timing"].combine_seconds >= 0
        load_sum = [a + b for a, b in zip(load_sum, res["load"])]
    # Each logical expert is taken by the rank(s) holding it (replicas too).
    assert sum(res["taken"] for res in got) >= logical
    assert all(res["taken"] > 0 for res in got)
    assert load_sum == [2 * c for c in load_one], f"seed {seed}: load records {load_sum} vs one rank {load_one}"


def test_forward_logits_on_a_group(ref_ctx, rng, seed):
    """The core routes the logits, then dispatches; rank 1 has M = 0."""
    experts, n, m = 8, 2, 6
    cfg = layer_config(experts, renormalize=True)
    w13n, w2n = random_weights(rng, experts, H, I)
    w13, w2 = torch.from_numpy(w13n).bfloat16(), torch.from_numpy(w2n).bfloat16()
    x = torch.from_numpy(rng.uniform(-1, 1, size=(m, H)).astype(np.float32)).bfloat16()
    logits = torch.from_numpy(rng.standard_normal((m, experts)).astype(np.float32))
    with ref_ctx.layer(cfg, "bf16", backend="reference") as one:
        load_by_global_id(one, w13, w2)
        want = one.forward_logits(x, logits)
    uid = ref_ctx.ep_unique_id(backend="reference")

    def rank(r: int):
        with ref_ctx.ep_group(
            rank=r, size=n, max_tokens_per_rank=MAXM, hidden_size=H, top_k=K, num_experts=experts, unique_id=uid
        ) as g:
            layer = ref_ctx.layer(cfg, "bf16", ep_group=g)
            load_by_global_id(layer, w13, w2)
            mr = m if r == 0 else 0
            return layer.forward_logits(x[:mr], logits[:mr])

    got = run_ranks(n, rank)
    assert torch.equal(got[0], want), f"seed {seed}: rank 0 differs from one rank"
    assert tuple(got[1].shape) == (0, H)


# ---- a group of one: queries, options, lifetimes ---------------------------


def one_rank_group(ctx, **kw) -> fusedmoe.EPGroup:
    opts = dict(rank=0, size=1, max_tokens_per_rank=4, hidden_size=H, top_k=2, num_experts=8, backend="reference")
    opts.update(kw)
    if "comm" not in opts and "unique_id" not in opts:
        opts["unique_id"] = fusedmoe.EPGroup.make_unique_id(ctx, backend="reference")
    return fusedmoe.EPGroup(ctx, **opts)


def test_group_queries(ref_ctx):
    uid = fusedmoe.EPGroup.make_unique_id(ref_ctx, backend="reference")
    assert isinstance(uid, bytes) and len(uid) == fusedmoe.ep.UNIQUE_ID_BYTES == 256
    assert uid[:8] == b"fmoe-ep1" and b"reference" in uid[:64]
    with one_rank_group(ref_ctx, unique_id=bytearray(uid), mode="high_throughput", dispatch="fp8_token") as g:
        assert (g.rank, g.size, g.plugin, g.device) == (0, 1, "reference", fusedmoe.Device("cpu", 0))
        o = g.options
        assert (o.max_tokens_per_rank, o.hidden_size, o.top_k, o.num_experts) == (4, H, 2, 8)
        assert (o.act_dtype, o.dispatch, o.mode, o.timing) == ("bf16", "fp8_token", "high_throughput", False)
        assert "rank 0 of 1" in repr(g) and "open" in repr(g)
        with expect_error(fusedmoe.FusedMoEError.UNSUPPORTED, "EP timing", "without timing"):
            g.timing()
        assert g.context is ref_ctx and not g.closed
    assert g.closed and "closed" in repr(g)
    # comm as a ctypes pointer or c_void_p (the reference takes any address); sizes as numpy ints
    shared = ctypes.c_int(0)
    for comm in (ctypes.pointer(shared), ctypes.c_void_p(ctypes.addressof(shared))):
        with one_rank_group(ref_ctx, comm=comm, hidden_size=np.int64(H)) as g:
            assert g.options.hidden_size == H and g.plugin == "reference"


def test_timing_reset(ref_ctx, rng):
    cfg = fusedmoe.LayerConfig(num_experts=8, top_k=2, hidden_size=H, intermediate_size=I, act_dtype="bf16")
    with one_rank_group(ref_ctx, timing=True) as g:
        layer = ref_ctx.layer(cfg, "bf16", ep_group=g)
        w13n, w2n = random_weights(rng, 8, H, I)
        layer.load("w13_weight", torch.from_numpy(w13n).bfloat16())
        layer.load("w2_weight", torch.from_numpy(w2n).bfloat16())
        layer.finalize()
        x = torch.ones(3, H, dtype=torch.bfloat16)
        w = torch.full((3, 2), 0.5)
        ids = torch.tensor([[0, 1], [2, 7], [5, 3]], dtype=torch.int32)
        for _ in range(3):
            layer.forward(x, w, ids)
        assert g.timing(reset=True).forwards == 3
        assert g.timing().forwards == 0
        assert layer.expert_load(reset=True) == [3, 3, 3, 3, 0, 3, 0, 3]
        assert layer.expert_load() == [0] * 8


def test_lifetimes(manifests):
    """Closing the group closes its layers; closing the context closes both."""
    ctx = make_context(manifests, "reference")
    cfg = fusedmoe.LayerConfig(num_experts=8, top_k=2, hidden_size=H, intermediate_size=I, act_dtype="bf16")
    g = one_rank_group(ctx)
    layer = ctx.layer(cfg, "bf16", ep_group=g)
    g.close()
    with expect_error(fusedmoe.FusedMoEError.BAD_STATE, "the layer is closed"):
        layer.params()
    g.close()  # idempotent
    with expect_error(fusedmoe.FusedMoEError.BAD_STATE, "the EP group is closed"):
        g.timing()
    with expect_error(fusedmoe.FusedMoEError.BAD_STATE, "the EP group is closed"):
        _ = g.rank
    with expect_error(fusedmoe.FusedMoEError.BAD_STATE, "ep_group: the EP group is closed"):
        ctx.layer(cfg, "bf16", ep_group=g)
    g2 = one_rank_group(ctx)
    layer2 = ctx.layer(cfg, "bf16", ep_group=g2)
    ctx.close()
    assert g2.closed
    with expect_error(fusedmoe.FusedMoEError.BAD_STATE, "the layer is closed"):
        layer2.params()
    with expect_error(fusedmoe.FusedMoEError.BAD_STATE, "the context is closed"):
        fusedmoe.EPGroup.make_unique_id(ctx)
    with expect_error(fusedmoe.FusedMoEError.BAD_STATE, "the context is closed"):
        one_rank_group(ctx, comm=ctypes.addressof(ctypes.c_int(0)))


# ---- misuse ----------------------------------------------------------------


def test_group_from_another_context(ref_ctx, manifests):
    cfg = fusedmoe.LayerConfig(num_experts=8, top_k=2, hidden_size=H, intermediate_size=I, act_dtype="bf16")
    with make_context(manifests, "reference") as other, one_rank_group(other) as g:
        with expect_error(fusedmoe.FusedMoEError.INVALID_ARGUMENT, "ep_group", "another context"):
            ref_ctx.layer(cfg, "bf16", ep_group=g)
    with expect_error(fusedmoe.FusedMoEError.INVALID_ARGUMENT, "ep_group: expected a fusedmoe.EPGroup, got int"):
        ref_ctx.layer(cfg, "bf16", ep_group=1234)


def test_layer_must_match_its_group(ref_ctx):
    with one_rank_group(ref_ctx) as g:
        bad_h = fusedmoe.LayerConfig(num_experts=8, top_k=2, hidden_size=64, intermediate_size=I, act_dtype="bf16")
        with expect_error(fusedmoe.FusedMoEError.INVALID_ARGUMENT, "hidden_size is 64, the group's 128"):
            ref_ctx.layer(bad_h, "bf16", ep_group=g)
        bad_ep = fusedmoe.LayerConfig(
            num_experts=8, top_k=2, hidden_size=H, intermediate_size=I, act_dtype="bf16", ep_size=2, ep_rank=1
        )
        with expect_error(fusedmoe.FusedMoEError.INVALID_ARGUMENT, "ep_size 2, ep_rank 1; the group is rank 0 of 1"):
            ref_ctx.layer(bad_ep, "bf16", ep_group=g)


def test_too_many_tokens_and_m0(ref_ctx, rng):
    cfg = fusedmoe.LayerConfig(num_experts=8, top_k=2, hidden_size=H, intermediate_size=I, act_dtype="bf16")
    with one_rank_group(ref_ctx) as g:
        layer = ref_ctx.layer(cfg, "bf16", ep_group=g)
        assert layer.config.max_num_tokens == 1 * 4 * 2  # the group's expert capacity
        w13n, w2n = random_weights(rng, 8, H, I)
        layer.load("w13_weight", torch.from_numpy(w13n).bfloat16())
        layer.load("w2_weight", torch.from_numpy(w2n).bfloat16())
        layer.finalize()
        x = torch.ones(5, H, dtype=torch.bfloat16)
        w = torch.full((5, 2), 0.5)
        ids = torch.zeros(5, 2, dtype=torch.int32)
        ids[:, 1] = 3
        with expect_error(fusedmoe.FusedMoEError.INVALID_ARGUMENT, "5 tokens on EP rank 0 exceed", "= 4"):
            layer.forward(x, w, ids)
        y = layer.forward(x[:0], w[:0], ids[:0])
        assert tuple(y.shape) == (0, H)


def test_bad_options(ref_ctx):
    uid = fusedmoe.EPGroup.make_unique_id(ref_ctx, backend="reference")
    E = fusedmoe.FusedMoEError
    with expect_error(E.INVALID_ARGUMENT, "dispatch: 'bf16' (expected one of activation, fp8_token, fp8_block)"):
        one_rank_group(ref_ctx, dispatch="bf16")
    with expect_error(E.INVALID_ARGUMENT, "mode: 'fast' (expected one of low_latency, high_throughput)"):
        one_rank_group(ref_ctx, mode="fast")
    with expect_error(E.INVALID_ARGUMENT, "unique_id: expected the 256 bytes", "got 255 bytes"):
        one_rank_group(ref_ctx, unique_id=uid[:255])
    with expect_error(E.INVALID_ARGUMENT, "unique_id: expected the 256 bytes", "got str"):
        one_rank_group(ref_ctx, unique_id="x" * 256)
    with expect_error(E.INVALID_ARGUMENT, "comm: expected the communicator's handle", "got object"):
        one_rank_group(ref_ctx, comm=object())
    with expect_error(E.INVALID_ARGUMENT, "comm: 0x0 is not a communicator handle"):
        one_rank_group(ref_ctx, comm=ctypes.c_void_p())
    with expect_error(E.INVALID_ARGUMENT, "rank: expected an integer"):
        one_rank_group(ref_ctx, rank=-1)
    with expect_error(E.INVALID_ARGUMENT, "top_k: expected an integer", "got 2.0"):
        one_rank_group(ref_ctx, top_k=2.0)
    with expect_error(E.INVALID_ARGUMENT, "comm: expected the communicator's handle", "got bool"):
        one_rank_group(ref_ctx, comm=True)
    with expect_error(E.INVALID_ARGUMENT, "act_dtype: unknown dtype 'nosuch'"):
        one_rank_group(ref_ctx, act_dtype="nosuch")
    # The library's own checks, with its messages.
    comm = ctypes.c_int(0)
    with expect_error(E.INVALID_ARGUMENT, "EP group", "got both"):
        one_rank_group(ref_ctx, unique_id=uid, comm=ctypes.addressof(comm))
    with expect_error(E.INVALID_ARGUMENT, "EP group", "rank = 2, expected 0..1"):
        one_rank_group(ref_ctx, unique_id=uid, rank=2, size=2)
    with expect_error(E.INVALID_ARGUMENT, "max_tokens_per_rank = 0"):
        one_rank_group(ref_ctx, unique_id=uid, max_tokens_per_rank=0)
    with expect_error(E.INVALID_ARGUMENT, "multiple of 128, got 100"):
        one_rank_group(ref_ctx, unique_id=uid, hidden_size=100, dispatch="fp8_block")
    with expect_error(E.UNSUPPORTED, "no plugin matching nosuch"):
        one_rank_group(ref_ctx, unique_id=uid, backend="nosuch")
    other = bytearray(uid)
    other[8:13] = b"cuda\0"
    with expect_error(E.INVALID_ARGUMENT, "made by plugin 'cuda'"):
        one_rank_group(ref_ctx, unique_id=bytes(other))
    other[:8] = bytes(8)
    with expect_error(E.INVALID_ARGUMENT, "bad magic"):
        one_rank_group(ref_ctx, unique_id=bytes(other))
    with expect_error(E.UNSUPPORTED, "EP unique id"):
        fusedmoe.EPGroup.make_unique_id(ref_ctx, backend="nosuch")


def test_missing_rank_fails_naming_it(manifests):
    """A group of three where two ranks come: both fail after ep_timeout_ms
    naming rank 2, instead of hanging."""
    with make_context(manifests, "reference", plugin_options={"reference": {"ep_timeout_ms": 300}}) as ctx:
        uid = ctx.ep_unique_id(backend="reference")

        def rank(r: int):
            with expect_error(fusedmoe.FusedMoEError.DEVICE_ERROR, "rank(s) 2 of 3 never joined"):
                one_rank_group(ctx, rank=r, size=3, unique_id=uid)
            return True

        assert run_ranks(2, rank) == [True, True]


def test_layer_from_checkpoint_on_a_group(ref_ctx):
    """fusedmoe run --model DIR --gpus 2, as two threads: each rank loads the
    checkpoint's experts it holds and forwards its own tokens; together they
    give the single-rank layer's output bit for bit, and transformers' routed
    output (tests/data/hf_models golden) within f32 rounding."""
    from test_checkpoint import MODELS, golden

    g = golden("qwen3_moe")
    x, w, ids = g["x"], g["layers.1.topk_weights"], g["layers.1.topk_ids"]
    with ref_ctx.layer_from_checkpoint(MODELS / "qwen3_moe", 1) as one:
        want = one.forward(x, w, ids)
    split = [0, 10, 16]
    uid = ref_ctx.ep_unique_id(backend="reference")

    def rank(r: int):
        sl = slice(split[r], split[r + 1])
        sizes = dict(max_tokens_per_rank=10, hidden_size=32, top_k=2, num_experts=8, act_dtype="f32")
        with ref_ctx.ep_group(rank=r, size=2, unique_id=uid, **sizes) as grp:
            layer = ref_ctx.layer_from_checkpoint(MODELS / "qwen3_moe", 1, ep_group=grp)
            assert layer.params()[0].shape[0] == 4  # its half of the 8 experts
            rows = (np.ascontiguousarray(a[sl]) for a in (x, w, ids))
            return layer.forward(*rows)

    got = np.concatenate(run_ranks(2, rank))
    np.testing.assert_array_equal(got, want)
    routed = g["layers.1.routed_out"]
    np.testing.assert_allclose(got, routed, rtol=1e-4, atol=1e-5 * np.abs(routed).max())


def test_one_process_per_rank(ref_ctx, manifests, prefix, rng, seed):
    """Three ranks in three spawned processes, joined by the unique id this
    process made (the bytes travel as pickled data, as an application sends
    them by MPI or a store): bit for bit the single-rank layer, M = 0 on one."""
    import multiprocessing

    import ep_worker

    experts, ms = 6, [4, 0, 5]
    config = dict(num_experts=experts, top_k=2, hidden_size=32, intermediate_size=16, act_dtype="f32")
    group = dict(max_tokens_per_rank=MAXM, hidden_size=32, top_k=2, num_experts=experts, act_dtype="f32")
    w13, w2 = random_weights(rng, experts, 32, 16)
    total = sum(ms)
    x = rng.standard_normal((total, 32)).astype(np.float32)
    ids = np.stack([rng.choice(experts, 2, replace=False) for _ in range(total)]).astype(np.int32)
    w = rng.uniform(0.2, 0.8, size=(total, 2)).astype(np.float32)
    with ref_ctx.layer(fusedmoe.LayerConfig(**config), "f32", backend="reference") as one:
        one.load("w13_weight", w13)
        one.load("w2_weight", w2)
        one.finalize()
        want = one.forward(x, w, ids)
    assert np.abs(want).max() > 0.1, f"seed {seed}: the oracle's output is nearly zero"
    uid = ref_ctx.ep_unique_id(backend="reference")
    first = np.concatenate([[0], np.cumsum(ms)]).astype(int)
    common = dict(prefix=prefix, manifest=manifests["reference"], size=len(ms), unique_id=uid, config=config)
    common.update(group=group, w13=w13, w2=w2)
    jobs = []
    for r in range(len(ms)):
        sl = slice(first[r], first[r + 1])
        jobs.append(dict(common, rank=r, x=x[sl], w=w[sl], ids=ids[sl]))
    with multiprocessing.get_context("spawn").Pool(len(ms)) as pool:
        outs = pool.map_async(ep_worker.rank_main, jobs).get(JOIN_S)
    for r, out in enumerate(outs):
        assert out.shape == (ms[r], 32)
        np.testing.assert_array_equal(out, want[first[r] : first[r + 1]], err_msg=f"seed {seed}: rank {r}")
