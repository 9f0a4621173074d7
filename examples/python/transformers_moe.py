#!/usr/bin/env python3
"""fusedmoe as a drop-in MoE block in Hugging Face transformers.

Builds tiny random Qwen3-MoE and Mixtral models from transformers' own
config classes (nothing is downloaded), runs them once as transformers
ships them, then swaps every decoder layer's sparse-MoE block for
:class:`FusedMoEBlock` (the router stays in torch, the experts run in
fusedmoe) and runs them again on the same tokens. The whole model's logits
must match transformers' own: within float32 rounding for f32 models, within
the bf16 tolerance below for bf16 models.

    FUSEDMOE_PREFIX=$PWD/_install python examples/python/transformers_moe.py
    ... --device cuda --plugin _install/lib/x86_64-linux-gnu/fusedmoe/plugins/cuda.toml

Exit status 0 when every model matches, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import torch
import transformers

import fusedmoe

FAMILIES = ("qwen3_moe", "mixtral")

# Whole-model tolerance: |got - ref| <= RTOL * max|ref| elementwise. f32:
# both compute in f32 and differ only in summation order. bf16: transformers
# rounds each expert's GEMM outputs, the activation product and every
# index_add to bf16, fusedmoe accumulates in f32 and rounds once (as vLLM
# does); the logits, bf16 themselves, then differ by an ulp or two (2^-8
# relative in the top binade; 2e-2 of the largest logit is about 3 of them).
RTOL = {torch.float32: 1e-4, torch.bfloat16: 2e-2}


def tiny_config(family: str) -> transformers.PretrainedConfig:
    """A tiny config of the family's own transformers class: 2 decoder
    layers, both sparse-MoE, 8 experts top-2, hidden 64, expert size 32."""
    common = dict(
        vocab_size=256,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        num_experts_per_tok=2,
        max_position_embeddings=128,
        hidden_act="silu",
    )
    if family == "qwen3_moe":
        return transformers.Qwen3MoeConfig(
            num_experts=8, moe_intermediate_size=32, intermediate_size=96, norm_topk_prob=True, **common
        )
    if family == "mixtral":
        return transformers.MixtralConfig(num_local_experts=8, intermediate_size=32, **common)
    raise ValueError(f"family '{family}': expected one of {', '.join(FAMILIES)}")


def build_model(family: str, dtype: torch.dtype, seed: int, device: str = "cpu") -> torch.nn.Module:
    """The family's CausalLM with weights drawn from torch's RNG seeded with
    `seed` (transformers' own initialisation), in `dtype`, in eval mode."""
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(tiny_config(family), dtype=torch.float32)
    return model.to(device=device, dtype=dtype).eval()


def is_sparse_moe_block(module: torch.nn.Module) -> bool:
    """transformers 5's sparse-MoE blocks: a router `gate` and an `experts`
    module holding gate_up_proj [E, 2I, H] (gate rows, then up) and
    down_proj [E, H, I]."""
    experts = getattr(module, "experts", None)
    return (
        hasattr(module, "gate")
        and experts is not None
        and isinstance(getattr(experts, "gate_up_proj", None), torch.Tensor)
        and isinstance(getattr(experts, "down_proj", None), torch.Tensor)
    )


class FusedMoEBlock(torch.nn.Module):
    """A sparse-MoE block whose experts run in fusedmoe.

    The router is the original block's `gate` module (so routing is exactly
    transformers'); its top-k weights and ids go to
    :meth:`fusedmoe.Layer.forward`. The expert weights are copied into the
    fusedmoe layer once, at construction; the layer runs on the device the
    registry picks among the context's plugins (restricted by `device` and
    `backend`).
    """

    def __init__(
        self,
        block: torch.nn.Module,
        ctx: fusedmoe.Context,
        *,
        act: str,
        max_num_tokens: int = 4096,
        device: str | None = None,
        backend: str | None = None,
    ) -> None:
        super().__init__()
        self.gate = block.gate
        gate_up = block.experts.gate_up_proj.detach()
        down = block.experts.down_proj.detach()
        num_experts, two_i, hidden = gate_up.shape
        dtype = gate_up.dtype
        cfg = fusedmoe.LayerConfig(
            num_experts=num_experts,
            top_k=self.gate.top_k,
            hidden_size=hidden,
            intermediate_size=two_i // 2,
            activation=act,
            act_dtype=dtype,
            max_num_tokens=max_num_tokens,
        )
        self.layer = ctx.layer(cfg, fusedmoe.Scheme.unquantized(dtype), device=device, backend=backend)
        # fusedmoe loads from host memory; its w13 is [gate; up] like gate_up_proj.
        self.layer.load("w13_weight", gate_up.cpu().contiguous())
        self.layer.load("w2_weight", down.cpu().contiguous())
        self.layer.finalize()

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        shape = hidden_states.shape
        x = hidden_states.reshape(-1, shape[-1]).contiguous()
        _, weights, ids = self.gate(x)
        # The router's weights as transformers uses them (Qwen3 rounds them to
        # the model dtype first), widened exactly to the f32 fusedmoe takes.
        y = self.layer.forward(x, weights.float().contiguous(), ids.to(torch.int32).contiguous())
        return y.reshape(shape)


def swap_moe_blocks(model: torch.nn.Module, ctx: fusedmoe.Context, **kwargs) -> list[FusedMoEBlock]:
    """Replace the sparse-MoE block of every decoder layer; returns the new blocks."""
    act = model.config.hidden_act
    swapped = []
    for layer in model.model.layers:
        if is_sparse_moe_block(layer.mlp):
            layer.mlp = FusedMoEBlock(layer.mlp, ctx, act=act, **kwargs)
            swapped.append(layer.mlp)
    return swapped


# A token whose routed experts differ between the two runs is a routing
# flip: rounding moved a near tie of the router (the k-th and (k+1)-th
# probabilities of transformers' own run closer than FLIP_MARGIN, half a bf16
# ulp at 0.25..0.5). Such a token's logits are not compared (they run
# different experts), nor, when the flip is not in the last layer, those of
# the later tokens of its sequence (they attend to it). A flip at a larger
# margin, or more than MAX_FLIPPED of the tokens excluded, fails.
FLIP_MARGIN = 2.0**-9
MAX_FLIPPED = 1 / 8


@dataclass
class Flip:
    layer: int
    token: int  # row of the flattened [batch * seq] tokens
    margin: float  # k-th minus (k+1)-th router probability, transformers' run


@dataclass
class Result:
    family: str
    dtype: torch.dtype
    backends: list[str]
    experts_impl: str
    max_abs: float  # over the compared tokens
    ref_max: float
    tol: float
    seed: int
    tokens: int
    excluded: int  # tokens not compared because of routing flips
    flips: list[Flip]

    @property
    def passed(self) -> bool:
        return (
            self.max_abs <= self.tol
            and all(f.margin < FLIP_MARGIN for f in self.flips)
            and self.excluded <= MAX_FLIPPED * self.tokens
        )

    def line(self) -> str:
        dt = str(self.dtype).replace("torch.", "")
        flips = ", ".join(f"layer {f.layer} token {f.token} margin {f.margin:.1e}" for f in self.flips)
        return (
            f"{self.family:<10} {dt:<9} {','.join(sorted(set(self.backends))):<28} "
            f"{self.max_abs:9.2e} {self.tol:9.2e} {self.ref_max:8.3f} {self.tokens - self.excluded:3d}/{self.tokens:<3d} "
            f"seed {self.seed}  {'PASS' if self.passed else 'FAIL'}" + (f"  (routing flips: {flips})" if flips else "")
        )


def _record_routing(model: torch.nn.Module) -> tuple[list[list[torch.Tensor]], list]:
    """Hook every sparse-MoE router: per layer, the (x, top-k ids) of each run."""
    runs: list[list[torch.Tensor]] = []
    hooks = []
    for i, layer in enumerate(model.model.layers):
        if not is_sparse_moe_block(layer.mlp):
            continue
        runs.append([])

        def hook(_mod, inp, out, seen=runs[-1], index=i):
            seen.append((index, inp[0].detach().float(), out[2].detach()))

        hooks.append(layer.mlp.gate.register_forward_hook(hook))
    return runs, hooks


def _flips(model: torch.nn.Module, runs: list, seq: int) -> tuple[list[Flip], torch.Tensor]:
    """Routing flips between the first (transformers) and second (fusedmoe)
    run, and the mask of tokens whose logits are comparable."""
    n = runs[0][0][1].shape[0]
    keep = torch.ones(n, dtype=torch.bool)
    flips = []
    last = len(model.model.layers) - 1
    for (index, x_ref, ids_ref), (_, _, ids_got) in runs:
        differ = (ids_ref.sort(-1).values != ids_got.sort(-1).values).any(-1).cpu()
        if not differ.any():
            continue
        gate = model.model.layers[index].mlp.gate
        probs = torch.nn.functional.linear(x_ref, gate.weight.float()).softmax(-1)
        k = ids_ref.shape[-1]
        top = probs.topk(k + 1, -1).values.cpu()
        for t in differ.nonzero().flatten().tolist():
            flips.append(Flip(index, t, (top[t, k - 1] - top[t, k]).item()))
            end = (t // seq + 1) * seq if index < last else t + 1
            keep[t:end] = False
    return flips, keep


def compare(
    family: str,
    dtype: torch.dtype,
    ctx: fusedmoe.Context,
    *,
    seed: int = 0,
    device: str = "cpu",
    backend: str | None = None,
    batch: int = 2,
    seq: int = 16,
) -> Result:
    """Logits of the model as transformers ships it vs. with fusedmoe blocks."""
    model = build_model(family, dtype, seed, device)
    gen = torch.Generator().manual_seed(seed + 1)
    tokens = torch.randint(0, model.config.vocab_size, (batch, seq), generator=gen).to(device)
    runs, hooks = _record_routing(model)
    with torch.no_grad():
        ref = model(tokens).logits.float()
        blocks = swap_moe_blocks(model, ctx, device=device, backend=backend, max_num_tokens=batch * seq)
        got = model(tokens).logits.float()
    for h in hooks:
        h.remove()
    if not blocks:
        raise RuntimeError(f"{family}: no sparse-MoE block found to swap")
    flips, keep = _flips(model, runs, seq)
    keep = keep.to(ref.device).reshape(batch, seq)
    ref_max = ref.abs().max().item()
    diff = (got - ref).abs()[keep]
    return Result(
        family=family,
        dtype=dtype,
        backends=[b.layer.backend for b in blocks],
        experts_impl=str(model.config._experts_implementation),
        max_abs=diff.max().item() if diff.numel() else 0.0,
        ref_max=ref_max,
        tol=RTOL[dtype] * ref_max,
        seed=seed,
        tokens=batch * seq,
        excluded=int((~keep).sum().item()),
        flips=flips,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prefix", help="libfusedmoe install prefix (default: FUSEDMOE_PREFIX, pkg-config, ...)")
    ap.add_argument("--family", choices=FAMILIES, action="append", help="default: all")
    ap.add_argument("--dtype", choices=("f32", "bf16"), action="append", help="default: both")
    ap.add_argument("--device", default="cpu", help="cpu or cuda[:N] (the model and the layers)")
    ap.add_argument("--backend", help="plugin-name glob the layers must use (e.g. reference, cpu, cuda)")
    ap.add_argument(
        "--plugin",
        action="append",
        default=[],
        help="plugin manifest to load; repeatable (default: the plugins installed beside libfusedmoe)",
    )
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    info = fusedmoe.load_library(prefix=args.prefix) if args.prefix else fusedmoe.load_library()
    print(f"libfusedmoe {info.version} from {info.path} ({info.found_by}); transformers {transformers.__version__}")
    # Exactly the plugins named (or those installed beside the library):
    # nothing else on the machine or in the environment changes the result.
    plugins = args.plugin or info.installed_plugins()
    ctx = fusedmoe.Context(plugins=plugins, isolated=True, ignore_environment=True)
    dtypes = [{"f32": torch.float32, "bf16": torch.bfloat16}[d] for d in (args.dtype or ["f32", "bf16"])]
    print(f"{'model':<10} {'dtype':<9} {'fusedmoe backend':<28} {'max |d|':>9} {'tol':>9} {'max|ref|':>8} compared")
    ok = True
    for family in args.family or FAMILIES:
        for dtype in dtypes:
            r = compare(family, dtype, ctx, seed=args.seed, device=args.device, backend=args.backend)
            print(r.line())
            ok &= r.passed
    print(f"transformers' experts implementation: {r.experts_impl}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
