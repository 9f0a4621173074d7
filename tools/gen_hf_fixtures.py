#!/usr/bin/env python3
"""Tiny MoE models saved by transformers itself, with transformers' own outputs (tests/data/hf_models/).

For every model family core/model reads, a config object of the family's
transformers class is made with tiny sizes (no download), the model is built
from it (AutoModelForCausalLM / Llama4ForConditionalGeneration.from_config),
the MoE blocks' weights are redrawn with a fixed seed so that outputs are O(1)
(transformers' init has std 0.02), and save_pretrained writes it. So
config.json carries the keys as transformers spells them today (Qwen3-MoE:
"num_local_experts" and "dtype", DeepSeek-V2: "n_group": null, ...) and the
checkpoint the tensor names and layouts save_pretrained converts to.

Kept under tests/data/hf_models/<name>/:

  config.json        byte for byte as save_pretrained wrote it;
  model.safetensors  the tensors of the MoE blocks only (router, experts,
                     shared experts, correction bias), bytes as written;
  golden.safetensors transformers' own results, from the model reloaded
                     with from_pretrained from what save_pretrained wrote:
                     "x" [M, H] f32, and per MoE layer N
                     "layers.N.router_logits" [M, E] f32 (the router's
                     output), "layers.N.topk_ids" [M, k] i32 and
                     "layers.N.topk_weights" [M, k] f32 (its choice, in its
                     order), "layers.N.routed_out" [M, H] f32 (the output of
                     the block's experts module for x, captured by a
                     forward hook while the block runs: the routed part,
                     without shared experts).

Llama-4's router keeps the whole row (sigmoid of -inf for the others) and its
experts module runs every expert on its pre-scaled input; topk_ids are the
non-zero entries of that row and routed_out the sum over experts of the
experts module's output. Its router weights are drawn 30x larger, so several
logits of a token saturate sigmoid to 1.0 (the ranking issue of
docs/ROUTING.md: transformers ranks the logits).

Run from the repository root (CI does not; it uses the committed files):

    python3 -m venv /work/venv-fixtures
    /work/venv-fixtures/bin/pip install -r tools/requirements-fixtures.txt
    /work/venv-fixtures/bin/python tools/gen_hf_fixtures.py

Seeded; rerunning with the pinned versions rewrites the same files.
"""

import argparse
import json
import math
import os
import shutil
import sys
import tempfile

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import (
    AutoModelForCausalLM,
    DeepseekV2Config,
    DeepseekV3Config,
    GptOssConfig,
    Llama4Config,
    Llama4ForConditionalGeneration,
    Llama4TextConfig,
    MixtralConfig,
    Qwen2MoeConfig,
    Qwen3MoeConfig,
)

SEED = 20261129
H, I, E, M = 32, 16, 8, 16
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "hf_models")
MAX_FILE = 256 * 1024

# Attention and vocabulary sizes: only big enough for the classes to build.
SMALL = dict(vocab_size=16, hidden_size=H, num_attention_heads=2, num_key_value_heads=1)


def mixtral():
    return MixtralConfig(**SMALL, num_hidden_layers=2, intermediate_size=I, num_local_experts=E,
                         num_experts_per_tok=2, head_dim=16)


def qwen2_moe():
    # layer 0 dense (mlp_only_layers), layer 1 MoE with a gated shared expert
    return Qwen2MoeConfig(**SMALL, num_hidden_layers=2, intermediate_size=2 * I, moe_intermediate_size=I,
                          shared_expert_intermediate_size=2 * I, num_experts=E, num_experts_per_tok=2,
                          mlp_only_layers=[0])


def qwen3_moe():
    return Qwen3MoeConfig(**SMALL, num_hidden_layers=2, intermediate_size=2 * I, moe_intermediate_size=I,
                          num_experts=E, num_experts_per_tok=2, norm_topk_prob=True, head_dim=16)


MLA = dict(kv_lora_rank=8, q_lora_rank=8, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=8)


def deepseek_v2():
    # the class defaults: greedy softmax top-k, no renormalization, n_group
    # and topk_group saved as null
    return DeepseekV2Config(**SMALL, **MLA, num_hidden_layers=2, intermediate_size=2 * I, moe_intermediate_size=I,
                            n_routed_experts=E, num_experts_per_tok=2, n_shared_experts=1)


def deepseek_v3():
    # noaux_tc (the class has no topk_method key: V3 is always grouped,
    # biased): 4 groups of 2, keep 2; layer 0 dense
    return DeepseekV3Config(**SMALL, **MLA, num_hidden_layers=2, intermediate_size=2 * I, moe_intermediate_size=I,
                            n_routed_experts=E, num_experts_per_tok=2, n_shared_experts=1, n_group=4, topk_group=2,
                            first_k_dense_replace=1, routed_scaling_factor=2.5)


def gpt_oss():
    return GptOssConfig(**SMALL, num_hidden_layers=2, intermediate_size=I, num_local_experts=E,
                        num_experts_per_tok=2, head_dim=16)


LLAMA4_TEXT = dict(**SMALL, num_hidden_layers=2, intermediate_size=I, intermediate_size_mlp=2 * I,
                   num_local_experts=4, num_experts_per_tok=1, head_dim=16)


def llama4_text():
    # Maverick-style interleaving: layer 1 is the MoE layer
    return Llama4TextConfig(**LLAMA4_TEXT, interleave_moe_layer_step=2)


def llama4():
    vision = dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16, image_size=28,
                  patch_size=14, vision_output_dim=16, projector_input_dim=16, projector_output_dim=16)
    return Llama4Config(text_config=dict(LLAMA4_TEXT), vision_config=vision)


FAMILIES = {
    "mixtral": mixtral,
    "qwen2_moe": qwen2_moe,
    "qwen3_moe": qwen3_moe,
    "deepseek_v2": deepseek_v2,
    "deepseek_v3": deepseek_v3,
    "gpt_oss": gpt_oss,
    "llama4_text": llama4_text,
    "llama4": llama4,
}


def build(cfg):
    if isinstance(cfg, Llama4Config):
        return Llama4ForConditionalGeneration(cfg)
    return AutoModelForCausalLM.from_config(cfg)


def moe_blocks(model):
    """(layer index, block) of every MoE block: the modules with an
    `experts` child and a `gate` or `router` child, under a decoder layer."""
    out = []
    for name, mod in model.named_modules():
        if hasattr(mod, "experts") and (hasattr(mod, "gate") or hasattr(mod, "router")):
            parts = name.split(".")
            if "vision" in name:
                continue
            layer = int(parts[parts.index("layers") + 1])
            out.append((layer, mod))
    return sorted(out, key=lambda p: p[0])


def router_of(block):
    return block.router if hasattr(block, "router") else block.gate


def redraw(model, gen, llama4_router_scale):
    """O(1) outputs for O(1) inputs: weights std 1/sqrt(fan_in), biases and
    the correction bias std 0.1 (DeepSeek-V3's starts at zero)."""
    with torch.no_grad():
        for _, block in moe_blocks(model):
            for name, t in list(block.named_parameters()) + list(block.named_buffers()):
                if "bias" in name.split(".")[-1]:
                    std = 0.1
                elif "down_proj" in name:  # fan-in: the intermediate dim, whichever of the last two
                    fan_in = t.shape[-1] if t.shape[-1] != H else t.shape[-2]
                    std = 1.0 / math.sqrt(fan_in)
                else:  # router, gate/up (fused or not), shared_expert_gate: fan-in H
                    std = 1.0 / math.sqrt(H)
                if name.startswith("router.") and llama4_router_scale:
                    std *= 30.0
                t.copy_(torch.randn(t.shape, generator=gen, dtype=torch.float32) * std)


def golden(model, x):
    """transformers' router choice and experts output for every MoE block."""
    out = {"x": x.clone()}
    for layer, block in moe_blocks(model):
        got = {}
        h1 = router_of(block).register_forward_hook(lambda m, i, o: got.__setitem__("router", o))
        h2 = block.experts.register_forward_hook(lambda m, i, o: got.__setitem__("experts", o))
        with torch.no_grad():
            block(x[None])
        h1.remove()
        h2.remove()
        r = got["router"]
        if len(r) == 2:  # Llama-4: (scores [M, E] with sigmoid(-inf) = 0 off the top-k, logits)
            scores, logits = r
            k = 1
            nz = scores != 0
            if not bool((nz.sum(-1) == k).all()):
                sys.exit(f"layer {layer}: a token whose chosen sigmoid underflows to 0; change SEED")
            ids = nz.int().argmax(-1, keepdim=True)
            weights = scores.gather(1, ids)
            routed = got["experts"].reshape(logits.shape[1], M, H).sum(0)
        else:  # (logits, weights, indices)
            logits, weights, ids = r
            routed = got["experts"].reshape(M, H)
        p = f"layers.{layer}."
        out[p + "router_logits"] = logits.float().contiguous()
        out[p + "topk_ids"] = ids.to(torch.int32).contiguous()
        out[p + "topk_weights"] = weights.float().contiguous()
        out[p + "routed_out"] = routed.float().contiguous()
    return out


def make(name, gen):
    cfg = FAMILIES[name]()
    model = build(cfg).float().eval()
    redraw(model, gen, llama4_router_scale=name.startswith("llama4"))
    x = torch.randn(M, H, generator=gen, dtype=torch.float32)
    d = os.path.join(ROOT, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        shutil.copyfile(os.path.join(tmp, "config.json"), os.path.join(d, "config.json"))
        # transformers' names of the MoE blocks' tensors, as written
        reloaded = (Llama4ForConditionalGeneration if name == "llama4" else AutoModelForCausalLM).from_pretrained(
            tmp, dtype=torch.float32).eval()
        keep = {}
        blocks = ("block_sparse_moe.", "mlp.", "feed_forward.")
        moe_layers = {layer for layer, _ in moe_blocks(reloaded)}
        for f in sorted(os.listdir(tmp)):
            if not f.endswith(".safetensors"):
                continue
            with safe_open(os.path.join(tmp, f), "pt") as sf:
                for k in sf.keys():
                    parts = k.split(".")
                    if "layers" not in parts or "vision" in k:
                        continue
                    layer = int(parts[parts.index("layers") + 1])
                    if layer in moe_layers and any(b in k for b in blocks):
                        keep[k] = sf.get_tensor(k)
        save_file(dict(sorted(keep.items())), os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        save_file(golden(reloaded, x), os.path.join(d, "golden.safetensors"), metadata={"format": "pt"})
    for f in os.listdir(d):
        os.chmod(os.path.join(d, f), 0o644)  # save_file creates 0600


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*", choices=list(FAMILIES), help="fixtures to (re)write (default: all)")
    args = ap.parse_args()
    transformers.logging.set_verbosity_error()
    torch.use_deterministic_algorithms(True)
    # Every family always draws from the same stream position: its own
    # generator seeded from SEED and its name's position.
    for n, name in enumerate(FAMILIES):
        if args.only and name not in args.only:
            continue
        torch.manual_seed(SEED + n)  # the classes' own init (overwritten where it matters)
        make(name, torch.Generator().manual_seed(SEED + n))
        print(f"wrote {name}", file=sys.stderr)
    bad, total = [], 0
    for dp, _, fs in os.walk(ROOT):
        for f in fs:
            s = os.path.getsize(os.path.join(dp, f))
            total += s
            if s > MAX_FILE:
                bad.append((os.path.join(dp, f), s))
    print(f"total {total} bytes under tests/data/hf_models (transformers {transformers.__version__}, "
          f"torch {torch.__version__})", file=sys.stderr)
    if bad:
        sys.exit(f"files over {MAX_FILE} bytes: {bad}")


if __name__ == "__main__":
    main()
