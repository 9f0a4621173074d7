#!/usr/bin/env python3
"""Check tests/data/models/* against the float weights they were made from.

Run by hand (CI has no torch), after tools/gen_fixtures.py, in the same venv:

    /work/venv-fixtures/bin/python tools/check_fixtures.py

* bf16: bit-identical to the float weights gen_fixtures.py draws (same seed).
* compressed-tensors fixtures: the checkpoint tensors are put back into a module
  tree on which compressed-tensors' apply_quantization_config ran with the
  config.json's quantization_config (status "compressed"), and
  ModelCompressor.decompress_model dequantizes them with the library's own
  decompressors; every dequantized weight must lie within the format's rounding
  bound of the bf16 weight, element by element, with the bound taken from the
  element's own stored scale:
    fp8 e4m3: |err| <= max(2^-4 |w| + 2^-10 s, |w| - 448 s)  (half ulp, 3 mantissa bits; subnormal step 2^-9 s; saturation)
    int4 sym: |err| <= max((1/2 + 2^-5) s, |w| - 7 s)  (scale = amax/7.5 rounded to bf16, +7.5 s saturates to +7;
              w/s is computed in bf16 before rounding, which can move a value up to 2^-5 past the midpoint)
    nvfp4:    |err| <= s_eff = weight_scale / weight_global_scale  (half the widest e2m1 step, incl. saturation)
  plus 2^-8 |w| for the bf16 rounding of the decompressed result.
  Static input scales are checked against the calibration batch (inputs.safetensors).
* mxfp4: decoded with transformers' own gpt-oss decoder
  (transformers.integrations.mxfp4.convert_moe_packed_tensors) and with an
  independent ml_dtypes decode; |err| <= 2 * 2^scale (OCP floor rule can
  saturate 7.99 -> 6 in scale units); gate/up de-interleaved first.
* bf16-fused: bit-identical after undoing the gpt-oss layout.
Prints max abs / max rel (|err| / max|w| of the row) error per format.
"""

import json
import os
import re
import sys

import ml_dtypes as md
import numpy as np
import torch
from safetensors import safe_open

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_fixtures as G  # noqa: E402

from compressed_tensors.compressors import ModelCompressor  # noqa: E402
from compressed_tensors.quantization import (  # noqa: E402
    QuantizationConfig,
    QuantizationStatus,
    apply_quantization_config,
)
from compressed_tensors.utils import replace_direct_state_dict  # noqa: E402

ROOT = G.ROOT
failures = []


def _patch_naive_decompress():
    """compressed-tensors 0.18.0's naive (float-/int-quantized) decompressor
    calls dequantize() without args, so the strategy is guessed from the scale
    shape; a 128x128-block scale of shape [2, 1] (gate/up with H=128) is then
    taken for a per-channel scale and the multiply fails. 0.20.0 passes
    args=scheme.weights; do the same here (same library dequantize, g_idx kept)."""
    from compressed_tensors.compressors.naive_quantized.base import NaiveQuantizationCompressor
    from compressed_tensors.quantization.lifecycle.forward import dequantize

    def decompress(cls, state_dict, scheme):
        state_dict = state_dict.copy()
        weight = state_dict.pop("weight")
        state_dict["weight"] = dequantize(
            x_q=weight,
            scale=state_dict.get("weight_scale"),
            zero_point=state_dict.get("weight_zero_point", None),
            args=scheme.weights,
            g_idx=state_dict.get("weight_g_idx", None),
        )
        return state_dict

    NaiveQuantizationCompressor.decompress = classmethod(decompress)


_patch_naive_decompress()


def load_dir(d):
    sd = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors"):
            with safe_open(os.path.join(d, f), "pt") as h:
                for k in h.keys():
                    assert k not in sd, k
                    sd[k] = h.get_tensor(k)
    idx = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(idx):
        wm = json.load(open(idx))["weight_map"]
        assert set(wm) == set(sd), "index weight_map does not list exactly the stored tensors"
        total = json.load(open(idx))["metadata"]["total_size"]
        assert total == sum(t.numel() * t.element_size() for t in sd.values()), "index total_size"
    return sd


def expect(cond, msg):
    if not cond:
        failures.append(msg)
        print("  FAIL:", msg)


def report(name, errs):
    mabs = max(e[0] for e in errs)
    mrel = max(e[1] for e in errs)
    mratio = max(e[2] for e in errs)
    print(f"{name:16s} max abs err {mabs:.4e}  max rel err (vs row max) {mrel:.4e}  max err/bound {mratio:.3f}")
    expect(mratio <= 1.0, f"{name}: error over bound ({mratio})")


def err_stats(deq, ref, bound):
    deq, ref, bound = deq.float(), ref.float(), bound.float()
    err = (deq - ref).abs()
    rowmax = ref.abs().amax(dim=-1, keepdim=True).clamp_min(1e-30)
    return err.max().item(), (err / rowmax).max().item(), (err / bound).max().item()


def expand_scale(scale, shape, args, g_idx=None):
    """Per-element scale of a weight [N, K] from its stored scale."""
    n, k = shape
    s = scale.float()
    st = args.strategy.value if hasattr(args.strategy, "value") else args.strategy
    if st == "tensor":
        return s.reshape(1, 1).expand(n, k)
    if st == "channel":
        return s.reshape(n, 1).expand(n, k)
    if st in ("group", "tensor_group"):
        gi = g_idx.long() if g_idx is not None else torch.arange(k) // args.group_size
        return s[:, gi]
    if st == "block":
        bn, bk = args.block_structure
        return s.repeat_interleave(bn, 0)[:n].repeat_interleave(bk, 1)[:, :k]
    raise ValueError(st)


def check_ct(name, w):
    d = os.path.join(ROOT, name)
    cfg = json.load(open(os.path.join(d, "config.json")))
    qc = dict(cfg["quantization_config"])
    ck = load_dir(d)
    qconfig = QuantizationConfig.model_validate(qc)
    expect(qconfig.quantization_status == QuantizationStatus.COMPRESSED, f"{name}: status")
    scheme = qconfig.config_groups["group_0"]
    wargs, iargs = scheme.weights, scheme.input_activations

    model = G.MoeForCausalLM().to(torch.bfloat16)
    apply_quantization_config(model, qconfig, show_progress=False)
    raw = {}
    used = set()
    for mname, mod in model.named_modules():
        if getattr(mod, "quantization_scheme", None) is None:
            continue
        local = {k[len(mname) + 1:]: v for k, v in ck.items() if k.startswith(mname + ".")}
        used.update(mname + "." + k for k in local)
        raw[mname] = local
        replace_direct_state_dict(mod, {k: torch.nn.Parameter(v, requires_grad=False) for k, v in local.items()})
        mod.quantization_status = QuantizationStatus.COMPRESSED
    routers = {k for k in ck if re.fullmatch(r"model\.layers\.\d+\.mlp\.gate\.weight", k)}
    expect(set(ck) == used | routers, f"{name}: unexpected tensors {sorted(set(ck) - used - routers)[:4]}")
    ModelCompressor(quantization_config=qconfig).decompress_model(model)

    errs = []
    x = w["x"].float()
    for li, layer in enumerate(model.model.layers):
        lw = w["layers"][li]
        expect(torch.equal(ck[f"model.layers.{li}.mlp.gate.weight"], lw["router"]), f"{name}: router {li}")
        for e, ex in enumerate(layer.mlp.experts):
            inputs = G.expert_inputs(w, li, e)
            for pname, ref in (("gate_proj", lw["gate"][e]), ("up_proj", lw["up"][e]), ("down_proj", lw["down"][e])):
                mname = f"model.layers.{li}.mlp.experts.{e}.{pname}"
                r = raw[mname]
                deq = getattr(ex, pname).weight.data
                expect(deq.shape == ref.shape, f"{mname}: shape {tuple(deq.shape)}")
                s = expand_scale(r["weight_scale"], ref.shape, wargs, r.get("weight_g_idx"))
                refa = ref.float().abs()
                # (the clamp terms: a scale rounded down to bf16 puts amax/s a
                # little past the top code, which then saturates)
                if wargs.type == "float" and wargs.num_bits == 8:
                    bound = torch.maximum(2.0**-4 * refa + 2.0**-10 * s, refa - 448.0 * s)
                elif wargs.type == "int":
                    bound = torch.maximum((0.5 + 2.0**-5) * s, refa - 7.0 * s)
                else:  # nvfp4
                    bound = s / r["weight_global_scale"].float()
                bound = bound + 2.0**-8 * refa + 1e-12
                errs.append(err_stats(deq, ref, bound))
                if "weight_g_idx" in r:
                    gi = r["weight_g_idx"]
                    counts = torch.bincount(gi.long())
                    expect(bool((counts == wargs.group_size).all()), f"{mname}: g_idx group sizes")
                    expect(not torch.equal(gi.long(), torch.arange(gi.numel()) // wargs.group_size), f"{mname}: trivial g_idx")
                if iargs is not None and iargs.dynamic is False:
                    amax = inputs[pname].abs().max()
                    got = r["input_scale"].float().item()
                    want = (amax / 448.0).to(torch.bfloat16).float().item()
                    expect(got == want, f"{mname}: input_scale {got} != amax/448 {want}")
                if iargs is not None and iargs.dynamic == "local":
                    amax = inputs[pname].abs().max()
                    got = r["input_global_scale"].item()
                    want = (448.0 * 6.0 / amax).item()
                    expect(abs(got - want) <= 1e-6 * want, f"{mname}: input_global_scale {got} != {want}")
            # vLLM requires w1/w3 input scales of one expert to be equal
            for key in ("input_scale", "input_global_scale"):
                a = raw.get(f"model.layers.{li}.mlp.experts.{e}.gate_proj", {}).get(key)
                b = raw.get(f"model.layers.{li}.mlp.experts.{e}.up_proj", {}).get(key)
                if a is not None:
                    expect(torch.equal(a, b), f"{name}: gate/up {key} differ (layer {li} expert {e})")
            if "weight_global_scale" in raw[f"model.layers.{li}.mlp.experts.{e}.gate_proj"]:
                a = raw[f"model.layers.{li}.mlp.experts.{e}.gate_proj"]["weight_global_scale"]
                b = raw[f"model.layers.{li}.mlp.experts.{e}.up_proj"]["weight_global_scale"]
                expect(torch.equal(a, b), f"{name}: gate/up weight_global_scale differ")
    report(name, errs)


def check_bf16(w):
    ck = load_dir(os.path.join(ROOT, "bf16"))
    n = 0
    for li, lw in enumerate(w["layers"]):
        p = f"model.layers.{li}.mlp"
        expect(torch.equal(ck[f"{p}.gate.weight"], lw["router"]), "bf16 router")
        for e in range(G.E):
            for pn, key in (("gate_proj", "gate"), ("up_proj", "up"), ("down_proj", "down")):
                expect(torch.equal(ck[f"{p}.experts.{e}.{pn}.weight"], lw[key][e]), f"bf16 {li}.{e}.{pn}")
                n += 1
    expect(len(ck) == n + G.LAYERS, "bf16: tensor count")
    with safe_open(os.path.join(ROOT, "inputs.safetensors"), "pt") as h:
        expect(torch.equal(h.get_tensor("x"), w["x"]), "inputs.safetensors x")
    print(f"{'bf16':16s} bit-identical to the seeded float weights ({n} expert tensors, 2 shards + index)")


def mx_decode_np(blocks, scales):
    b = blocks.numpy()
    lo, hi = b & 0x0F, b >> 4
    codes = np.stack([lo, hi], axis=-1).reshape(*b.shape[:-1], 32).astype(np.uint8)
    vals = codes.view(md.float4_e2m1fn).astype(np.float32)
    sc = scales.numpy().view(md.float8_e8m0fnu).astype(np.float32)
    out = vals * sc[..., None]
    return torch.from_numpy(out.reshape(*b.shape[:-2], -1)), torch.from_numpy(sc)


def check_gpt_oss(w):
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    mx = load_dir(os.path.join(ROOT, "mxfp4"))
    fu = load_dir(os.path.join(ROOT, "bf16-fused"))
    errs = []
    for li, lw in enumerate(w["layers"]):
        p = f"model.layers.{li}.mlp"
        b = w["gptoss_bias"][li]
        for ck in (mx, fu):
            expect(torch.equal(ck[f"{p}.router.weight"], lw["router"]), "gpt-oss router weight")
            expect(torch.equal(ck[f"{p}.router.bias"], b["router"]), "gpt-oss router bias")
            expect(torch.equal(ck[f"{p}.experts.gate_up_proj_bias"], b["gate_up"]), "gate_up bias")
            expect(torch.equal(ck[f"{p}.experts.down_proj_bias"], b["down"]), "down bias")
        # bf16-fused: [E, H, 2I] interleaved columns, [E, I, H]
        gu = fu[f"{p}.experts.gate_up_proj"]
        expect(torch.equal(gu[:, :, 0::2].transpose(1, 2), lw["gate"]), "bf16-fused gate")
        expect(torch.equal(gu[:, :, 1::2].transpose(1, 2), lw["up"]), "bf16-fused up")
        expect(torch.equal(fu[f"{p}.experts.down_proj"].transpose(1, 2), lw["down"]), "bf16-fused down")
        # mxfp4
        for proj, refs in (("gate_up_proj", (lw["gate"], lw["up"])), ("down_proj", (lw["down"],))):
            blocks, scales = mx[f"{p}.experts.{proj}_blocks"], mx[f"{p}.experts.{proj}_scales"]
            hf = convert_moe_packed_tensors(blocks, scales, dtype=torch.float32).transpose(1, 2)  # back to [E, N, K]
            own, sc = mx_decode_np(blocks, scales)
            expect(torch.equal(hf, own), f"mxfp4 {proj}: transformers and ml_dtypes decodes differ")
            s = sc.repeat_interleave(32, dim=-1)
            if proj == "gate_up_proj":
                pairs = ((hf[:, 0::2], refs[0], s[:, 0::2]), (hf[:, 1::2], refs[1], s[:, 1::2]))
            else:
                pairs = ((hf, refs[0], s),)
            for deq, ref, ss in pairs:
                errs.append(err_stats(deq, ref, 2.0 * ss + 1e-12))
    report("mxfp4", errs)
    print(f"{'bf16-fused':16s} bit-identical after undoing the gpt-oss layout")


def main():
    w = G.make_float_weights()
    check_bf16(w)
    for name in ("fp8-tensor", "fp8-channel", "fp8-block", "nvfp4", "w4a16", "w4a16-actorder", "w4a8"):
        check_ct(name, w)
    check_gpt_oss(w)
    sizes = []
    for dp, _, fs in os.walk(ROOT):
        for f in fs:
            sizes.append((os.path.getsize(os.path.join(dp, f)), os.path.relpath(os.path.join(dp, f), ROOT)))
    total = sum(s for s, _ in sizes)
    big = [p for s, p in sizes if s > G.MAX_FILE]
    print(f"total {total} bytes in {len(sizes)} files; largest {max(sizes)[0]} ({max(sizes)[1]})")
    expect(not big, f"files over 2 MB: {big}")
    expect(total < 20 * 1024 * 1024, "tests/data/models over 20 MB")
    if failures:
        sys.exit(f"{len(failures)} failure(s)")
    print("all fixtures OK")


if __name__ == "__main__":
    main()
