#!/usr/bin/env python3
"""A tiny DeepSeek-V4-style checkpoint with its expected MoE outputs (tests/data/models/deepseek-v4/).

DeepSeek-V4's original checkpoints (what vLLM's deepseek_v4.py loads) store
the routed experts as MXFP4 and the rest as block FP8:

* `layers.N.ffn.gate.weight` [E, H] bf16 (the router), `layers.N.ffn.gate.bias`
  [E] f32 (the selection bias of topk_method "noaux_tc"; hash-routed layers
  have `gate.tid2eid` instead, and this fixture has none);
* `layers.N.ffn.experts.E.{w1,w3,w2}.weight` int8 holding two e2m1 codes per
  byte (element 2j in the low nibble), [rows, K/2], and `.scale` F8_E8M0
  [rows, K/32] (value 2^(byte - 127)); w1 = gate, w3 = up, w2 = down;
* `layers.N.ffn.shared_experts.{w1,w3,w2}.weight` F8_E4M3 with `.scale`
  F8_E8M0 per 128 x 128 block (not part of the routed layer);
* config.json with `expert_dtype: "fp4"` and an fp8 `quantization_config`.

There is no CPU-only producer of these files to call, so the weights are
drawn here (numpy, fixed seed) and encoded with ml_dtypes: MXFP4 by the OCP
rule (block scale 2^(floor(log2 amax) - 2), elements RNE saturated to +-6, as
tools/gen_fixtures.py does for gpt-oss), FP8 blocks with the power-of-two
scale 2^ceil(log2(amax / 448)).

expected.safetensors holds, per layer N, what the layer must compute for the
bundled x, written here from docs/MEGAMOE.md's table with numpy (float64
products, rounded where the scheme rounds), independent of the C code:
`layers.N.router_logits` [M, E] f32 (x W_r^T), `layers.N.topk_ids` [M, k] i32
and `layers.N.topk_weights` [M, k] f32 (sqrt(softplus(logits)), top-k of
s + bias, weights s / sum * routed_scaling_factor, best first),
`layers.N.y` [M, H] bf16 (FP8 per-32 input, MXFP4 GEMM1, bf16 gate/up, clamp,
SwiGLU times the routing weight, FP8 per-32 requantization, GEMM2 rounded to
bf16, slots summed in order and rounded to bf16) and `layers.N.y_float`
[M, H] f32 (the same experts on the dequantized weights in float64 with no
activation quantization: how far the scheme is from its float model).

Run from the repository root (CI does not; it reads the committed files):

    /work/venv-fixtures/bin/python tools/gen_v4_fixture.py

The seed is fixed; rerunning with the pinned versions
(tools/requirements-fixtures.txt) reproduces the files byte for byte.
"""

import argparse
import json
import os
import shutil
import sys

import ml_dtypes as md
import numpy as np
import torch
from safetensors.torch import save_file

SEED = 20261128
E, TOP_K, H, I, LAYERS, M = 8, 2, 128, 64, 2, 16
SHARED = 1  # n_shared_experts: one MLP of SHARED * I
SWIGLU_LIMIT = 1.5  # small enough that the clamp bites (about 1 in 8 gate/up values)
SCALING = 1.5
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "models", "deepseek-v4")
MAX_BYTES = 400_000  # the whole directory
FP8_MAX = 448.0

# --------------------------------------------------------------------------
# Number formats
# --------------------------------------------------------------------------


def bf16(x):
    return np.asarray(x, dtype=np.float32).astype(md.bfloat16).astype(np.float32)


def e4m3(x):
    """Round f32 to e4m3fn (RNE) and back; |x| <= 448 by construction."""
    x = np.asarray(x, dtype=np.float32)
    assert np.all(np.abs(x) <= FP8_MAX)
    return x.astype(md.float8_e4m3fn).astype(np.float32)


def pow2_ceil_exponent(v):
    """The exponent byte of the power of two a positive f32 v rounds up to:
    the exponent field, plus 1 when the mantissa is not zero."""
    bits = np.asarray(v, dtype=np.float32).view(np.uint32)
    return ((bits >> 23) & 0xFF).astype(np.int64) + ((bits & 0x7FFFFF) != 0)


def exp2_byte(b):
    return np.ldexp(np.float32(1.0), (np.asarray(b, dtype=np.int64) - 127).astype(np.int32)).astype(np.float32)


def mxfp4_encode(w):
    """[n, k] f32 -> (packed int8 [n, k/2], scale bytes uint8 [n, k/32], dequantized f32 [n, k])."""
    n, k = w.shape
    wb = w.reshape(n, k // 32, 32)
    amax = np.abs(wb).max(axis=-1)
    _, ex = np.frexp(np.where(amax > 0, amax, 1.0).astype(np.float32))  # amax = m 2^ex, m in [0.5, 1)
    e = np.clip(np.where(amax > 0, (ex - 1) - 2, -127), -127, 127).astype(np.int32)
    scale = np.ldexp(np.float32(1.0), e).astype(np.float32)
    q = np.clip(wb / scale[..., None], -6.0, 6.0).astype(md.float4_e2m1fn)
    deq = (q.astype(np.float32) * scale[..., None]).reshape(n, k)
    codes = (q.view(np.uint8) & 0x0F).reshape(n, k)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    return packed.view(np.int8), (e + 127).astype(np.uint8), deq


def fp8_block_encode(w):
    """[n, k] f32 -> (e4m3 bytes [n, k], UE8M0 bytes [ceil(n/128), ceil(k/128)]) per 128 x 128 block."""
    n, k = w.shape
    bn, bk = -(-n // 128), -(-k // 128)
    q = np.zeros((n, k), dtype=np.float32)
    sb = np.zeros((bn, bk), dtype=np.uint8)
    for i in range(bn):
        for j in range(bk):
            blk = w[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128]
            b = int(np.clip(pow2_ceil_exponent(np.float32(max(np.abs(blk).max(), 1e-4) / FP8_MAX)), 1, 254))
            sb[i, j] = b
            q[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128] = e4m3(blk / exp2_byte(b))
    return q.astype(md.float8_e4m3fn).view(np.uint8), sb


# --------------------------------------------------------------------------
# The MoE layer as docs/MEGAMOE.md states it
# --------------------------------------------------------------------------


def quantize_input(x):
    """GEMM1 input, per 32: s = 2^ceil(log2(max(amax, 1e-4) / 448)), byte in [1, 254]."""
    g = x.reshape(-1, 32)
    amax = np.maximum(np.abs(g).max(axis=1), np.float32(1e-4)).astype(np.float32)
    b = np.clip(pow2_ceil_exponent((amax / np.float32(FP8_MAX)).astype(np.float32)), 1, 254)
    s = exp2_byte(b)[:, None]
    return (e4m3(g / s) * s).reshape(x.shape)


def requantize(a):
    """GEMM2 input, per 32: sf = 2^(bits of amax * (1/448) rounded up), no floor (all zero: 0)."""
    g = a.reshape(-1, 32)
    out = np.zeros_like(g)
    for r in range(g.shape[0]):
        amax = np.float32(np.abs(g[r]).max())
        if amax == 0:
            continue
        scaled = np.float32(amax * np.float32(1.0 / FP8_MAX))
        sf = exp2_byte(pow2_ceil_exponent(scaled))
        out[r] = e4m3(np.clip(g[r] / sf, -FP8_MAX, FP8_MAX)) * sf
    return out.reshape(a.shape)


STATS = {"clamped": 0, "values": 0, "bias_moved": 0}


def route(logits, bias):
    s = np.sqrt(np.logaddexp(0.0, logits.astype(np.float64))).astype(np.float32)  # sqrt(softplus), f32
    choice = (s + bias).astype(np.float32)
    ids = np.zeros((M, TOP_K), dtype=np.int32)
    w = np.zeros((M, TOP_K), dtype=np.float32)
    for t in range(M):
        order = sorted(range(E), key=lambda e: (-choice[t, e], e))  # ties: the lower id
        ids[t] = order[:TOP_K]
        unbiased = sorted(range(E), key=lambda e: (-s[t, e], e))[:TOP_K]
        STATS["bias_moved"] += sorted(unbiased) != sorted(ids[t].tolist())
        chosen = s[t, ids[t]].astype(np.float64)
        w[t] = (chosen / max(chosen.sum(), 1e-20)).astype(np.float32) * np.float32(SCALING)
    return ids, w


def expert_quantized(xq, w13, w2, weight):
    h = (w13.astype(np.float64) @ xq.astype(np.float64)).astype(np.float32)
    g, u = bf16(h[:I]), bf16(h[I:])
    lim = bf16(SWIGLU_LIMIT)
    STATS["clamped"] += int((g > lim).sum() + (np.abs(u) > lim).sum())
    STATS["values"] += 2 * I
    g = np.minimum(g, lim)
    u = np.clip(u, -lim, lim)
    a = ((g / (np.float32(1.0) + np.exp(-g))) * u).astype(np.float32) * np.float32(weight)
    aq = requantize(a.astype(np.float32))
    return bf16((w2.astype(np.float64) @ aq.astype(np.float64)).astype(np.float32))


def expert_float(x, w13, w2, weight):
    h = w13.astype(np.float64) @ x.astype(np.float64)
    g, u = np.minimum(h[:I], SWIGLU_LIMIT), np.clip(h[I:], -SWIGLU_LIMIT, SWIGLU_LIMIT)
    return (w2.astype(np.float64) @ (g / (1.0 + np.exp(-g)) * u)) * weight


def layer_outputs(x, router, bias, w13s, w2s):
    logits = (x.astype(np.float64) @ router.astype(np.float64).T).astype(np.float32)
    ids, w = route(logits, bias)
    y = np.zeros((M, H), dtype=np.float32)
    y_float = np.zeros((M, H), dtype=np.float64)
    for t in range(M):
        xq = quantize_input(x[t])
        acc = np.float32(0.0)
        for j in range(TOP_K):
            e = ids[t, j]
            acc = (acc + expert_quantized(xq, w13s[e], w2s[e], w[t, j])).astype(np.float32)
            y_float[t] += expert_float(x[t], w13s[e], w2s[e], w[t, j])
        y[t] = bf16(acc)
    return logits, ids, w, y, y_float.astype(np.float32)


# --------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------


def config():
    return {
        "architectures": ["DeepseekV4ForCausalLM"],
        "model_type": "deepseek_v4",
        "torch_dtype": "bfloat16",
        "expert_dtype": "fp4",
        "hidden_size": H,
        "moe_intermediate_size": I,
        "num_hidden_layers": LAYERS,
        "num_hash_layers": 0,
        "num_nextn_predict_layers": 1,
        "n_routed_experts": E,
        "n_shared_experts": SHARED,
        "num_experts_per_tok": TOP_K,
        "scoring_func": "sqrtsoftplus",
        "topk_method": "noaux_tc",
        "norm_topk_prob": True,
        "routed_scaling_factor": SCALING,
        "swiglu_limit": SWIGLU_LIMIT,
        "hidden_act": "silu",
        "vocab_size": 1024,
        "rms_norm_eps": 1e-06,
        "hc_mult": 4,
        "quantization_config": {
            "activation_scheme": "dynamic",
            "fmt": "e4m3",
            "quant_method": "fp8",
            "scale_fmt": "ue8m0",
            "weight_block_size": [128, 128],
        },
    }


def u8(a, dtype):
    return torch.from_numpy(np.ascontiguousarray(a).view(np.uint8)).view(dtype)


def main():
    argparse.ArgumentParser(description=__doc__.split("\n")[0]).parse_args()
    rng = np.random.default_rng(SEED)

    def randn(*shape, std):
        return bf16(rng.standard_normal(shape, dtype=np.float32) * np.float32(std))

    x = randn(M, H, std=1.0)
    tensors, expected = {}, {}
    for n in range(LAYERS):
        STATS.update(clamped=0, values=0, bias_moved=0)
        p = f"layers.{n}.ffn"
        router = randn(E, H, std=1.0 / np.sqrt(H))
        bias = (rng.standard_normal(E, dtype=np.float32) * np.float32(0.5)).astype(np.float32)
        tensors[f"{p}.gate.weight"] = torch.from_numpy(router.astype(md.bfloat16).view(np.uint16)).view(torch.bfloat16)
        tensors[f"{p}.gate.bias"] = torch.from_numpy(bias)
        w13s, w2s = [], []
        for e in range(E):
            deq = {}
            for name, rows, k in (("w1", I, H), ("w3", I, H), ("w2", H, I)):
                packed, scale, deq[name] = mxfp4_encode(randn(rows, k, std=1.0 / np.sqrt(k)))
                tensors[f"{p}.experts.{e}.{name}.weight"] = torch.from_numpy(np.ascontiguousarray(packed))
                tensors[f"{p}.experts.{e}.{name}.scale"] = u8(scale, torch.float8_e8m0fnu)
            w13s.append(np.concatenate([deq["w1"], deq["w3"]]))
            w2s.append(deq["w2"])
        for name, rows, k in (("w1", SHARED * I, H), ("w3", SHARED * I, H), ("w2", H, SHARED * I)):
            q, s = fp8_block_encode(randn(rows, k, std=1.0 / np.sqrt(k)))
            tensors[f"{p}.shared_experts.{name}.weight"] = u8(q, torch.float8_e4m3fn)
            tensors[f"{p}.shared_experts.{name}.scale"] = u8(s, torch.float8_e8m0fnu)
        logits, ids, w, y, y_float = layer_outputs(x, router, bias, w13s, w2s)
        expected[f"layers.{n}.router_logits"] = torch.from_numpy(logits)
        expected[f"layers.{n}.topk_ids"] = torch.from_numpy(ids)
        expected[f"layers.{n}.topk_weights"] = torch.from_numpy(w)
        expected[f"layers.{n}.y"] = u8(y.astype(md.bfloat16), torch.bfloat16)
        expected[f"layers.{n}.y_float"] = torch.from_numpy(y_float)
        err = np.abs(y - y_float)
        print(f"layer {n}: max |y| {np.abs(y).max():.4f}, scheme vs float model: max abs {err.max():.4f}, "
              f"rms {np.sqrt((err ** 2).mean()):.4f}; clamped {STATS['clamped']} of {STATS['values']} gate/up "
              f"values; the bias changed the experts of {STATS['bias_moved']} of {M} tokens", file=sys.stderr)
        assert STATS["clamped"] > 0 and STATS["bias_moved"] > 0, "the fixture must exercise the clamp and the bias"

    if os.path.isdir(ROOT):
        shutil.rmtree(ROOT)
    os.makedirs(ROOT)
    with open(os.path.join(ROOT, "config.json"), "w") as f:
        json.dump(config(), f, indent=2, sort_keys=True)
        f.write("\n")
    meta = {"format": "pt"}
    save_file(dict(sorted(tensors.items())), os.path.join(ROOT, "model.safetensors"), metadata=meta)
    save_file({"x": u8(x.astype(md.bfloat16), torch.bfloat16)}, os.path.join(ROOT, "inputs.safetensors"), metadata=meta)
    save_file(dict(sorted(expected.items())), os.path.join(ROOT, "expected.safetensors"), metadata=meta)
    total = sum(os.path.getsize(os.path.join(ROOT, f)) for f in os.listdir(ROOT))
    print(f"wrote {ROOT}: {total} bytes (torch {torch.__version__}, ml_dtypes {md.__version__})", file=sys.stderr)
    if total > MAX_BYTES:
        sys.exit(f"the fixture is {total} bytes, over {MAX_BYTES}")


if __name__ == "__main__":
    main()
