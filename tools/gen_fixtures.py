#!/usr/bin/env python3
"""Tiny MoE checkpoints made by the real producer libraries (tests/data/models/).

One set of float weights (a 2-layer Qwen3-MoE-shaped MoE: E=8 experts, top-2,
H=128, I=256) is drawn once with a fixed seed, rounded to bf16 and stored as the
`bf16` checkpoint. Every other checkpoint is derived from exactly those bf16
values:

* compressed-tensors checkpoints (fp8-tensor, fp8-channel, fp8-block, nvfp4,
  w4a16, w4a16-actorder, w4a8): a torch module tree named like the HF model
  (model.layers.N.mlp.gate, model.layers.N.mlp.experts.E.{gate,up,down}_proj as
  nn.Linear) gets compressed-tensors' apply_quantization_config; the qparams
  are computed with compressed-tensors' own calculate_qparams / generate_gparam
  from min/max statistics gathered the way llm-compressor's min-max observers
  gather them (weights; and, for static activation scales, the calibration
  batch `x` pushed through every expert, as llm-compressor's
  calibrate_all_experts does); then ModelCompressor.from_pretrained_model +
  compress_model turns the modules into their on-disk form, the state dict is
  saved with safetensors and ModelCompressor.update_config writes the
  quantization_config into config.json.
* gpt-oss checkpoints (mxfp4, bf16-fused): fused 3-D expert tensors in the
  layout of openai/gpt-oss (gate/up rows interleaved), MXFP4 encoded here with
  numpy + ml_dtypes (OCP scale rule), since no CPU-only pip library writes them.

Run from the repository root (CI does not; it uses the committed files):

    python3 -m venv /work/venv-fixtures
    /work/venv-fixtures/bin/pip install -r tools/requirements-fixtures.txt
    /work/venv-fixtures/bin/python tools/gen_fixtures.py
    /work/venv-fixtures/bin/python tools/check_fixtures.py

The seed is fixed; rerunning with the pinned versions reproduces the files
byte for byte.
"""

import argparse
import json
import math
import os
import shutil
import sys

import ml_dtypes as md
import numpy as np
import torch
from safetensors.torch import save_file

import compressed_tensors
from compressed_tensors.compressors import ModelCompressor
from compressed_tensors.quantization import (
    QuantizationArgs,
    QuantizationConfig,
    QuantizationScheme,
    QuantizationStrategy,
    apply_quantization_config,
    preset_name_to_scheme,
)
from compressed_tensors.quantization.utils import calculate_qparams, generate_gparam

SEED = 20260415
E, TOP_K, H, I, LAYERS, M = 8, 2, 128, 256, 2, 16
ACTORDER_GROUP = 32
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "models")
MAX_FILE = 2 * 1024 * 1024
SHARD_LIMIT = 1_700_000  # bytes of tensor data per shard

# --------------------------------------------------------------------------
# Float weights (the single source of every fixture)
# --------------------------------------------------------------------------


def make_float_weights():
    g = torch.Generator().manual_seed(SEED)

    def randn(*shape, std):
        return (torch.randn(*shape, generator=g, dtype=torch.float32) * std).to(torch.bfloat16)

    w = {"x": randn(M, H, std=1.0), "layers": []}
    for _ in range(LAYERS):
        w["layers"].append(
            {
                # router logits O(1): std 1/sqrt(H) * |x| ~ 1
                "router": randn(E, H, std=1.0 / math.sqrt(H)),
                "gate": randn(E, I, H, std=1.0 / math.sqrt(H)),
                "up": randn(E, I, H, std=1.0 / math.sqrt(H)),
                "down": randn(E, H, I, std=1.0 / math.sqrt(I)),
            }
        )
    # gpt-oss only: biases (the Qwen3 checkpoints have none)
    w["gptoss_bias"] = []
    for _ in range(LAYERS):
        w["gptoss_bias"].append(
            {
                "router": randn(E, std=0.1),
                "gate_up": randn(E, 2 * I, std=0.1),
                "down": randn(E, H, std=0.1),
            }
        )
    return w


# --------------------------------------------------------------------------
# Module tree shaped like HF Qwen3-MoE (only the MoE parts)
# --------------------------------------------------------------------------


class Expert(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_proj = torch.nn.Linear(H, I, bias=False)
        self.up_proj = torch.nn.Linear(H, I, bias=False)
        self.down_proj = torch.nn.Linear(I, H, bias=False)


class SparseMoeBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = torch.nn.Linear(H, E, bias=False)
        self.experts = torch.nn.ModuleList([Expert() for _ in range(E)])


class DecoderLayer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = SparseMoeBlock()


class Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([DecoderLayer() for _ in range(LAYERS)])


class MoeForCausalLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.model = Inner()


def build_model(w):
    model = MoeForCausalLM().to(torch.bfloat16)
    with torch.no_grad():
        for li, layer in enumerate(model.model.layers):
            lw = w["layers"][li]
            layer.mlp.gate.weight.copy_(lw["router"])
            for e, ex in enumerate(layer.mlp.experts):
                ex.gate_proj.weight.copy_(lw["gate"][e])
                ex.up_proj.weight.copy_(lw["up"][e])
                ex.down_proj.weight.copy_(lw["down"][e])
    return model


def expert_inputs(w, li, e):
    """Calibration inputs (fp32) of an expert's projections: every token of x
    goes through every expert (llm-compressor's calibrate_all_experts); each
    layer's MoE block sees x (no attention / residual stream is modelled)."""
    x = w["x"].float()
    lw = w["layers"][li]
    g = x @ lw["gate"][e].float().T
    u = x @ lw["up"][e].float().T
    h = torch.nn.functional.silu(g) * u
    return {"gate_proj": x, "up_proj": x, "down_proj": h.to(torch.bfloat16).float()}


# --------------------------------------------------------------------------
# Observers: min/max statistics per strategy (what llm-compressor's
# memoryless min-max observer reduces), then compressed-tensors' own
# calculate_qparams / generate_gparam.
# --------------------------------------------------------------------------


def _minmax(t, strategy, args):
    t = t.float()
    if strategy == QuantizationStrategy.TENSOR:
        return t.amin().reshape(1), t.amax().reshape(1)
    if strategy == QuantizationStrategy.CHANNEL:
        return t.amin(dim=1, keepdim=True), t.amax(dim=1, keepdim=True)
    if strategy in (QuantizationStrategy.GROUP, QuantizationStrategy.TENSOR_GROUP):
        r = t.unflatten(-1, (t.shape[-1] // args.group_size, args.group_size))
        return r.amin(dim=-1), r.amax(dim=-1)
    if strategy == QuantizationStrategy.BLOCK:
        bn, bk = args.block_structure
        n, k = t.shape
        r = t.reshape(n // bn, bn, k // bk, bk)
        return r.amin(dim=(1, 3)), r.amax(dim=(1, 3))
    raise ValueError(strategy)


def set_param(module, name, value):
    p = getattr(module, name)
    with torch.no_grad():
        p.data = value.to(p.dtype).reshape(p.shape).clone()


def calibrate_weight(module, args, inputs, fused_global=None):
    wt = module.weight.data
    strategy = args.strategy
    global_scale = None
    if strategy == QuantizationStrategy.TENSOR_GROUP:
        if fused_global is not None:
            global_scale = fused_global
        else:
            mn, mx = wt.float().amin().reshape(1), wt.float().amax().reshape(1)
            global_scale = generate_gparam(mn, mx)
        set_param(module, "weight_global_scale", global_scale)
    if args.actorder is not None and str(args.actorder.value if hasattr(args.actorder, "value") else args.actorder) == "group":
        # GPTQ-style activation order: columns by decreasing Hessian diagonal
        # (H = 2 X^T X over the calibration batch); group i*gs..(i+1)*gs-1 of
        # that order is quantization group i; g_idx maps column -> group.
        hdiag = 2.0 * (inputs.float() ** 2).sum(dim=0)
        perm = torch.argsort(hdiag, descending=True, stable=True)
        g_idx = torch.empty(wt.shape[1], dtype=torch.int32)
        g_idx[perm] = torch.arange(wt.shape[1], dtype=torch.int32) // args.group_size
        set_param(module, "weight_g_idx", g_idx)
        mn, mx = _minmax(wt[:, perm], strategy, args)
    else:
        mn, mx = _minmax(wt, strategy, args)
    scale, zp = calculate_qparams(mn, mx, args, global_scale=global_scale)
    set_param(module, "weight_scale", scale)
    if hasattr(module, "weight_zero_point"):
        set_param(module, "weight_zero_point", zp)


def calibrate_input(module, args, inputs):
    if args.dynamic is True:
        return
    mn, mx = inputs.float().amin().reshape(1), inputs.float().amax().reshape(1)
    if args.strategy == QuantizationStrategy.TENSOR_GROUP:
        set_param(module, "input_global_scale", generate_gparam(mn, mx))
        return  # local scales are dynamic (DynamicType.LOCAL)
    scale, zp = calculate_qparams(mn, mx, args)
    set_param(module, "input_scale", scale)
    if hasattr(module, "input_zero_point"):
        set_param(module, "input_zero_point", zp)


# --------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------


def qwen3_moe_config():
    """config.json in the style of Qwen/Qwen3-30B-A3B (transformers 4.51),
    shrunk; attention fields kept so the config is complete."""
    return {
        "architectures": ["Qwen3MoeForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 151643,
        "decoder_sparse_step": 1,
        "eos_token_id": 151645,
        "head_dim": 64,
        "hidden_act": "silu",
        "hidden_size": H,
        "initializer_range": 0.02,
        "intermediate_size": 512,
        "max_position_embeddings": 40960,
        "max_window_layers": LAYERS,
        "mlp_only_layers": [],
        "model_type": "qwen3_moe",
        "moe_intermediate_size": I,
        "norm_topk_prob": True,
        "num_attention_heads": 2,
        "num_experts": E,
        "num_experts_per_tok": TOP_K,
        "num_hidden_layers": LAYERS,
        "num_key_value_heads": 1,
        "output_router_logits": False,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "router_aux_loss_coef": 0.001,
        "sliding_window": None,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.51.0",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": 151936,
    }


def gpt_oss_config(quantized):
    cfg = {
        "architectures": ["GptOssForCausalLM"],
        "attention_bias": True,
        "attention_dropout": 0.0,
        "eos_token_id": 200002,
        "experts_per_token": TOP_K,
        "head_dim": 64,
        "hidden_act": "silu",
        "hidden_size": H,
        "initial_context_length": 4096,
        "initializer_range": 0.02,
        "intermediate_size": I,
        "layer_types": ["sliding_attention", "full_attention"][:LAYERS],
        "max_position_embeddings": 131072,
        "model_type": "gpt_oss",
        "num_attention_heads": 2,
        "num_experts_per_tok": TOP_K,
        "num_hidden_layers": LAYERS,
        "num_key_value_heads": 1,
        "num_local_experts": E,
        "output_router_logits": False,
        "pad_token_id": 199999,
        "rms_norm_eps": 1e-05,
        "rope_scaling": {
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "factor": 32.0,
            "original_max_position_embeddings": 4096,
            "rope_type": "yarn",
            "truncate": False,
        },
        "rope_theta": 150000,
        "router_aux_loss_coef": 0.9,
        "sliding_window": 128,
        "swiglu_limit": 7.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.55.0.dev0",
        "use_cache": True,
        "vocab_size": 201088,
    }
    if quantized:
        cfg["quantization_config"] = {
            "modules_to_not_convert": [
                "model.layers.*.self_attn",
                "model.layers.*.mlp.router",
                "model.embed_tokens",
                "lm_head",
            ],
            "quant_method": "mxfp4",
        }
    return cfg


def write_config(d, cfg):
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")


def _nbytes(t):
    return t.numel() * t.element_size()


def save_checkpoint(d, sd):
    """model.safetensors, or shards + model.safetensors.index.json (as
    transformers' save_pretrained names them) when the data exceed the limit.
    Tensors go in layer order; a new shard starts when the next tensor would
    take the current one past SHARD_LIMIT."""
    sd = {k: v.contiguous() for k, v in sd.items()}
    total = sum(_nbytes(v) for v in sd.values())
    meta = {"format": "pt"}
    if total <= SHARD_LIMIT:
        save_file(sd, os.path.join(d, "model.safetensors"), metadata=meta)
        return
    shards, cur, cur_size = [], {}, 0
    for k in sorted(sd, key=lambda n: (int(n.split(".")[2]), n)):
        if cur and cur_size + _nbytes(sd[k]) > SHARD_LIMIT:
            shards.append(cur)
            cur, cur_size = {}, 0
        cur[k] = sd[k]
        cur_size += _nbytes(sd[k])
    shards.append(cur)
    weight_map = {}
    for i, shard in enumerate(shards):
        name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, os.path.join(d, name), metadata=meta)
        for k in shard:
            weight_map[k] = name
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2, sort_keys=True)
        f.write("\n")


def fresh_dir(name):
    d = os.path.join(ROOT, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    return d


# --------------------------------------------------------------------------
# compressed-tensors fixtures
# --------------------------------------------------------------------------


def ct_schemes():
    def preset(name):
        return preset_name_to_scheme(name, ["Linear"])

    w4a16_ao = preset("W4A16")
    w4a16_ao.weights = QuantizationArgs(
        num_bits=4, type="int", strategy="group", group_size=ACTORDER_GROUP,
        symmetric=True, dynamic=False, actorder="group",
    )
    w4a8 = QuantizationScheme(
        targets=["Linear"],
        weights=QuantizationArgs(num_bits=4, type="int", strategy="channel", symmetric=True, dynamic=False),
        input_activations=QuantizationArgs(num_bits=8, type="int", strategy="token", symmetric=True, dynamic=True),
    )
    return {
        "fp8-tensor": preset("FP8"),
        "fp8-channel": preset("FP8_DYNAMIC"),
        "fp8-block": preset("FP8_BLOCK"),
        "nvfp4": preset("NVFP4"),
        "w4a16": preset("W4A16"),
        "w4a16-actorder": w4a16_ao,
        "w4a8": w4a8,
    }


def make_ct_fixture(name, scheme, w):
    model = build_model(w)
    qcfg = QuantizationConfig(config_groups={"group_0": scheme}, ignore=["lm_head", "re:.*mlp.gate$"])
    apply_quantization_config(model, qcfg, show_progress=False)
    for li, layer in enumerate(model.model.layers):
        for e, ex in enumerate(layer.mlp.experts):
            inputs = expert_inputs(w, li, e)
            fused = None
            if scheme.weights.strategy == QuantizationStrategy.TENSOR_GROUP:
                # llm-compressor's update_fused_layer_weight_global_scales:
                # gate_proj and up_proj of one MLP share the smaller global scale
                gs = [
                    generate_gparam(m.weight.float().amin().reshape(1), m.weight.float().amax().reshape(1))
                    for m in (ex.gate_proj, ex.up_proj)
                ]
                fused = torch.minimum(gs[0], gs[1])
            for pname in ("gate_proj", "up_proj", "down_proj"):
                mod = getattr(ex, pname)
                calibrate_weight(mod, scheme.weights, inputs[pname], fused if pname != "down_proj" else None)
                if scheme.input_activations is not None:
                    calibrate_input(mod, scheme.input_activations, inputs[pname])
    compressor = ModelCompressor.from_pretrained_model(model)
    compressor.compress_model(model)
    sd = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    d = fresh_dir(name)
    write_config(d, qwen3_moe_config())
    compressor.update_config(d)
    # update_config rewrites config.json without a final newline; keep as written
    save_checkpoint(d, sd)
    return d


def make_bf16(w):
    sd = {}
    for li, lw in enumerate(w["layers"]):
        p = f"model.layers.{li}.mlp"
        sd[f"{p}.gate.weight"] = lw["router"]
        for e in range(E):
            sd[f"{p}.experts.{e}.gate_proj.weight"] = lw["gate"][e]
            sd[f"{p}.experts.{e}.up_proj.weight"] = lw["up"][e]
            sd[f"{p}.experts.{e}.down_proj.weight"] = lw["down"][e]
    d = fresh_dir("bf16")
    write_config(d, qwen3_moe_config())
    save_checkpoint(d, sd)


# --------------------------------------------------------------------------
# gpt-oss fixtures (mxfp4, bf16-fused)
# --------------------------------------------------------------------------


def interleave_gate_up(gate, up):
    """[E, I, H] x2 -> [E, 2I, H] with row 2i = gate i, row 2i+1 = up i
    (gpt-oss: gate = gate_up[..., ::2], up = gate_up[..., 1::2])."""
    return torch.stack([gate, up], dim=2).reshape(gate.shape[0], 2 * gate.shape[1], gate.shape[2])


def mxfp4_encode(wt):
    """[..., K] float -> (blocks uint8 [..., K/32, 16], scales uint8 [..., K/32]).
    OCP MX v1.0: shared scale 2^(floor(log2(amax)) - 2), elements E2M1 RNE with
    saturation to +-6, element 2j in the low nibble; scale byte = exponent + 127."""
    x = wt.float().numpy().astype(np.float32)
    *pre, k = x.shape
    xb = x.reshape(*pre, k // 32, 32)
    amax = np.abs(xb).max(axis=-1)
    _, ex = np.frexp(np.where(amax > 0, amax, 1.0).astype(np.float32))  # amax = m * 2^ex, m in [0.5, 1)
    e = np.where(amax > 0, (ex - 1) - 2, -127).astype(np.int32)
    e = np.clip(e, -127, 127)
    scale = np.ldexp(np.float32(1.0), e).astype(np.float32)
    q = np.clip(xb / scale[..., None], -6.0, 6.0).astype(md.float4_e2m1fn)
    codes = q.view(np.uint8) & 0x0F
    packed = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
    sbytes = (e + 127).astype(np.uint8)
    return torch.from_numpy(packed), torch.from_numpy(sbytes)


def make_gpt_oss(w, quantized):
    sd = {}
    for li, lw in enumerate(w["layers"]):
        b = w["gptoss_bias"][li]
        p = f"model.layers.{li}.mlp"
        sd[f"{p}.router.weight"] = lw["router"]
        sd[f"{p}.router.bias"] = b["router"]
        gu = interleave_gate_up(lw["gate"], lw["up"])  # [E, 2I, H]
        if quantized:
            blk, sc = mxfp4_encode(gu)
            sd[f"{p}.experts.gate_up_proj_blocks"] = blk
            sd[f"{p}.experts.gate_up_proj_scales"] = sc
            blk, sc = mxfp4_encode(lw["down"])  # [E, H, I]
            sd[f"{p}.experts.down_proj_blocks"] = blk
            sd[f"{p}.experts.down_proj_scales"] = sc
        else:
            # transformers GptOssExperts parameter layout: [E, H, 2I], [E, I, H]
            sd[f"{p}.experts.gate_up_proj"] = gu.transpose(1, 2).contiguous()
            sd[f"{p}.experts.down_proj"] = lw["down"].transpose(1, 2).contiguous()
        sd[f"{p}.experts.gate_up_proj_bias"] = b["gate_up"]
        sd[f"{p}.experts.down_proj_bias"] = b["down"]
    d = fresh_dir("mxfp4" if quantized else "bf16-fused")
    write_config(d, gpt_oss_config(quantized))
    save_checkpoint(d, sd)


# --------------------------------------------------------------------------


ALL = ["bf16", "fp8-tensor", "fp8-channel", "fp8-block", "nvfp4", "w4a16", "w4a16-actorder", "w4a8", "mxfp4", "bf16-fused"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*", choices=ALL, help="fixtures to (re)write (default: all)")
    args = ap.parse_args()
    todo = args.only or ALL
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    w = make_float_weights()
    os.makedirs(ROOT, exist_ok=True)
    save_file({"x": w["x"].contiguous()}, os.path.join(ROOT, "inputs.safetensors"), metadata={"format": "pt"})
    schemes = ct_schemes()
    for name in todo:
        if name == "bf16":
            make_bf16(w)
        elif name == "mxfp4":
            make_gpt_oss(w, True)
        elif name == "bf16-fused":
            make_gpt_oss(w, False)
        else:
            make_ct_fixture(name, schemes[name], w)
        print(f"wrote {name}", file=sys.stderr)
    bad = []
    total = 0
    for dp, _, fs in os.walk(ROOT):
        for f in fs:
            s = os.path.getsize(os.path.join(dp, f))
            total += s
            if s > MAX_FILE:
                bad.append((os.path.join(dp, f), s))
    print(f"total {total} bytes under tests/data/models (compressed-tensors {compressed_tensors.__version__}, torch {torch.__version__})", file=sys.stderr)
    if bad:
        sys.exit(f"files over 2 MB: {bad}")


if __name__ == "__main__":
    main()
