#!/usr/bin/env python3
"""vLLM's Triton fused MoE kernel as a peer of `fusedmoe bench --plugin cuda`.

Issue 35 asks for the CUDA plugin to be faster than vLLM's Triton
`fused_moe_kernel` at every grid point for bf16, fp8 (per-channel weights x
dynamic per-token activations) and fp8block (128 x 128 weight blocks x dynamic
1 x 128 activation groups). vLLM is not installed on the device, so this loads
the kernel (and the @triton.jit helpers it calls) from vLLM's own source file
at run time, out of .peer/vllm/ (tools/device/fetch_vllm_peer.sh puts it there;
no vLLM code is in this repository), and drives it as vLLM's
`fused_experts_impl` does:

  routing given (ids, weights) -> expert assignment (vLLM's moe_align_block_size
  semantics, or its one-block-per-pair path when M * top_k * 4 <= E) ->
  activation quantization -> GEMM1 (fused_moe_kernel) -> silu_and_mul ->
  quantization -> GEMM2 (fused_moe_kernel, MUL_ROUTED_WEIGHT) -> sum over top-k.

vLLM runs the steps around the two kernels as its compiled CUDA ops; here they
are torch ops written for this harness (same results, more kernels), so `us` (the whole layer, one
CUDA graph per routing set, as tools/bench_peers.py times its peers) is an
upper bound on vLLM's layer and `us_kernels` (the two fused_moe_kernel launches
alone, in their own graphs, same buffers) a lower bound.

Configs: vLLM's tuned file for the device, (E, N = I), dtype and block shape,
at the nearest M when one exists, vLLM's get_default_config (re-implemented
below), and nearby tiles. Each is checked once against a torch f32 reference
of the same quantized math, then timed; the best is the point's `us`.

Usage (on the GPU machine, .peer carried):
  bench_vllm_triton.py --scheme bf16|fp8|fp8block [--shape NAME|E,k,H,I ...]
      [--tokens 1,16,...] [--reps N] [--budget-s S] --json OUT
  bench_vllm_triton.py --self-check [--scheme ...]    # CPU, Triton's interpreter
"""
import argparse
import ast
import builtins
import hashlib
import inspect
import json
import os
import re
import sys
import time

if "--self-check" in sys.argv:  # the interpreter is chosen when the kernel is decorated
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from bench_peers import (FP8, FP8_MAX, SHAPES, capture, copy_rate, gemm_peak,  # noqa: E402
                         distinct_experts, random_experts, routing_note, routing_sets, rowwise_fp8, shape_of,
                         timed_replays)

PEER = "vllm-triton fused_moe_kernel"
QBLOCK = 128  # the fp8block scheme's weight block and activation group


class Scheme:
    def __init__(self, name, key, config_dtype, fp8, per_channel, block, tol):
        self.name, self.key = name, key
        self.config_dtype = config_dtype  # vLLM's dtype in config file names
        self.fp8, self.per_channel, self.block = fp8, per_channel, block
        self.tol = tol  # relative Frobenius error allowed against the reference


# tol: the relative error against the harness's f32 reference of the same quantized values
# that a config may show, to catch a harness mistake (a wrong layout or scale gives ~1), not to
# judge vLLM. fp8 per-channel: the kernel sums all of K in FP8 wgmma, no promotion, and measured
# 1.25-2.0 % (DeepSeek-V3, K = 7168: 1.98-2.01 %, H100 and H200, 2026-12-02), so 3 % as the block
# path (0.4-0.6 %).
SCHEMES = {
    "bf16": Scheme("bf16", "bf16", None, False, False, None, 2e-2),
    "fp8": Scheme("fp8", "fp8e4m3:channel/fp8e4m3:token:dynamic", "fp8_w8a8", True, True, None, 3e-2),
    "fp8block": Scheme("fp8block", "fp8e4m3:block128x128/fp8e4m3:group128:dynamic", "fp8_w8a8", True, False,
                       (QBLOCK, QBLOCK), 3e-2),
}


def die(msg):
    sys.exit("bench_vllm_triton: " + msg)


def first_line(err):
    """An exception as one line for the record (its type when it has no message)."""
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:300]


def naive_assignment(pairs, experts):
    """vLLM's low-latency expert assignment (one block per (token, expert) pair, no
    align) serves calls of at most a quarter as many pairs as experts."""
    return pairs * 4 <= experts


def point_head(name, shape, m, scheme):
    """What every point of the record says first: the layer, M and the scheme."""
    e, k, h, i = shape
    return {"shape": name, "dtype": scheme.name, "scheme": scheme.key, "peer": PEER, "tokens": m, "experts": e,
            "top_k": k, "hidden": h, "intermediate": i}


# ---------------------------------------------------------------------------
# Loading the kernel out of vLLM's file

def _names_used(fn):
    """Global names a function reads: loaded names minus its parameters and locals."""
    params = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
    params |= {a.arg for a in (fn.args.vararg, fn.args.kwarg) if a is not None}
    stored, loaded = set(), set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else stored).add(node.id)
    # decorators and annotations are read at module level: they count too
    return loaded - params - stored


def _is_jit(fn):
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if isinstance(target, ast.Attribute) and target.attr == "jit":
            return True
    return False


def load_kernel(vllm_dir):
    """fused_moe_kernel from vllm_dir/fused_moe.py, with the @triton.jit functions and
    module-level constants it reaches, compiled under the file's own name and line
    numbers (Triton reads a kernel's source back with inspect)."""
    path = os.path.abspath(os.path.join(vllm_dir, "fused_moe.py"))
    if not os.path.exists(path):
        die("%s is missing: run tools/device/fetch_vllm_peer.sh (bench/cuda/README.md) and carry .peer" % path)
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    consts = {}
    for n in tree.body:
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AnnAssign) else []
        for t in targets:
            if isinstance(t, ast.Name):
                consts[t.id] = n
    provided = {"triton": triton, "tl": tl}
    taken, todo, seen = [], ["fused_moe_kernel"], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in funcs:
            node = funcs[name]
            if not _is_jit(node):
                die("%s: '%s' is not a @triton.jit function; the file's shape changed, "
                    "update tools/bench_vllm_triton.py" % (path, name))
        elif name in consts:
            node = consts[name]
        else:
            die("%s: no function 'fused_moe_kernel'" % path if name == "fused_moe_kernel" else
                "%s: the kernel uses '%s', which is neither a @triton.jit function nor a constant of "
                "that file nor triton/tl; the file's shape changed, update tools/bench_vllm_triton.py"
                % (path, name))
        taken.append(node)
        used = _names_used(node) if isinstance(node, ast.FunctionDef) else \
            {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)} if node.value is not None else set()
        for u in sorted(used):
            if u not in provided and not hasattr(builtins, u):
                todo.append(u)
    module = ast.Module(body=sorted(taken, key=lambda n: n.lineno), type_ignores=[])
    namespace = dict(provided, __name__="vllm_fused_moe_peer")
    exec(compile(module, path, "exec"), namespace)  # noqa: S102 - vLLM's kernel, parsed above
    kernel = namespace["fused_moe_kernel"]
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    info = {"file": "fused_moe.py", "sha256": digest,
            "functions": [n.name for n in taken if isinstance(n, ast.FunctionDef)]}
    commit_path = os.path.join(vllm_dir, "COMMIT")
    if os.path.exists(commit_path):
        with open(commit_path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        info["commit"] = lines[0].strip() if lines else ""
        info["source"] = lines[1].strip() if len(lines) > 1 else ""
    else:
        info["commit"] = "unknown (no %s)" % commit_path
    return kernel, info


class KernelCall:
    """Binds fused_moe_kernel's arguments by name, so that a changed signature fails
    with the parameter's name instead of a wrong launch."""

    # Arguments that may be missing from other vLLM versions' kernel while they hold
    # these values (the feature off): dropped then.
    OPTIONAL_OFF = {"b_bias_ptr": None, "stride_bbe": 0, "stride_bbn": 0, "HAS_BIAS": False, "USE_TD": False,
                    "SWAP_AB": False, "SPLIT_K": 1, "naive_block_assignment": False}

    def __init__(self, kernel):
        self.kernel = kernel
        fn = getattr(kernel, "fn", kernel)
        self.params = inspect.signature(fn).parameters

    def __call__(self, grid, args, **launch):
        bound = {}
        for name, value in args.items():
            if name in self.params:
                bound[name] = value
            elif not (name in self.OPTIONAL_OFF and self.OPTIONAL_OFF[name] == value):
                die("vLLM's fused_moe_kernel has no parameter '%s' (=%r), which this harness needs; "
                    "update tools/bench_vllm_triton.py" % (name, value))
        for name, p in self.params.items():
            if name not in bound and p.default is inspect.Parameter.empty:
                die("vLLM's fused_moe_kernel has a parameter '%s' this harness does not know; "
                    "update tools/bench_vllm_triton.py" % name)
        self.kernel[grid](**bound, **launch)


# ---------------------------------------------------------------------------
# The steps around the kernels, in torch (vLLM: compiled CUDA ops)

def quant_per_token(a):
    """vLLM's dynamic per-token fp8 (scaled_fp8_quant, use_per_token_if_dynamic):
    s = max(amax / 448, 1 / (448 * 512)) per row, q = e4m3(a / s); s is [rows, 1]."""
    amax = torch.linalg.vector_norm(a, float("inf"), dim=-1, keepdim=True, dtype=torch.float32)
    s = amax.div_(FP8_MAX).clamp_(min=1.0 / (FP8_MAX * 512.0))
    return torch.div(a, s).to(FP8), s


def quant_per_group(a, group=QBLOCK):
    """vLLM's per_token_group_quant_fp8 (1 x group, row-major scales):
    s = max(amax, 1e-10) / 448 per group, q = e4m3(a / s); s is [rows, K / group]."""
    rows, k = a.shape
    v = a.view(rows, k // group, group)
    s = torch.linalg.vector_norm(v, float("inf"), dim=-1, keepdim=True, dtype=torch.float32)
    s = s.clamp_(min=1e-10).div_(FP8_MAX)
    return torch.div(v, s).to(FP8).view(rows, k), s.view(rows, k // group)


def quantize(a, scheme):
    if not scheme.fp8:
        return a, None
    return quant_per_token(a) if scheme.per_channel else quant_per_group(a, scheme.block[1])


def dequantize(q, s, scheme):
    if s is None:
        return q.float()
    if scheme.per_channel:
        return q.float() * s
    rows, k = q.shape
    return (q.float().view(rows, k // scheme.block[1], scheme.block[1]) * s[:, :, None]).view(rows, k)


def silu_and_mul(h):
    """vLLM's silu_and_mul: silu(gate) * up, gate the first half, in f32, stored bf16."""
    i = h.size(-1) // 2
    return F.silu(h[:, :i].float()).mul_(h[:, i:]).to(torch.bfloat16)


def _const(st, key, make):
    """A constant index tensor of the forward, made outside any graph (the eager
    warm-up) and kept with the routing set."""
    if key not in st.consts:
        st.consts[key] = make()
    return st.consts[key]


def align_block_size(st, e, bm):
    """vLLM's moe_align_block_size in torch: the (token, slot) pairs sorted by expert,
    each expert's run padded to a multiple of bm with the sentinel numel;
    expert_ids[b] is block b's expert; num_tokens_post_padded the padded total.
    Sizes as vLLM allocates them (numel + E (bm - 1), capped at numel * bm when
    numel < E); blocks past the total are never read (the kernel returns first)."""
    flat = st.ids.view(-1)
    numel = flat.numel()
    padded_max = numel + e * (bm - 1)
    if numel < e:
        padded_max = min(padded_max, numel * bm)
    blocks = triton.cdiv(padded_max, bm)
    dev = flat.device
    ones = _const(st, ("ones", numel), lambda: torch.ones(numel, dtype=torch.int32, device=dev))
    rank = _const(st, ("rank", numel), lambda: torch.arange(numel, device=dev))
    starts = _const(st, ("starts", blocks, bm),
                    lambda: torch.arange(0, blocks * bm, bm, dtype=torch.int32, device=dev))
    counts = torch.zeros(e, dtype=torch.int32, device=dev).index_add_(0, flat, ones)
    pad = counts.neg().remainder_(bm)
    ends = torch.cumsum(counts + pad, 0, dtype=torch.int32)  # padded run ends, inclusive sums
    pad_before = torch.cumsum(pad, 0, dtype=torch.int32).sub_(pad)
    experts, order = torch.sort(flat, stable=True)
    # the r-th pair in expert order lands at r + the padding of the experts before it
    sorted_ids = torch.full((padded_max,), numel, dtype=torch.int32, device=dev)
    sorted_ids.index_copy_(0, rank + pad_before[experts], order.to(torch.int32))
    expert_ids = torch.searchsorted(ends, starts, right=True, out_int32=True).clamp_(max=e - 1)
    return sorted_ids, expert_ids, ends[-1:]


# ---------------------------------------------------------------------------
# vLLM's configs

def default_config(m, e, scheme):
    """vLLM's get_default_config for CUDA (not ROCm, not batch-invariant mode)."""
    if scheme.block is not None:
        bn, stages = scheme.block[0], 3
        if m <= 8 and scheme.block[0] % 64 == 0:  # decode: twice the N tiles, deeper pipeline at M <= 4
            bn, stages = 64, (4 if m <= 4 else 3)
        return {"BLOCK_SIZE_M": 16 if m <= 64 else 64, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": scheme.block[1],
                "GROUP_SIZE_M": 1 if m <= 16 else 32, "num_warps": 4, "num_stages": stages}
    bm = 16 if m <= 32 else 32 if m <= 96 else 64 if m <= 512 else 128
    return {"BLOCK_SIZE_M": bm,
            "BLOCK_SIZE_N": 64 if m <= 64 else 128,
            "BLOCK_SIZE_K": 128 if scheme.fp8 or m <= 64 else 64,
            "GROUP_SIZE_M": 16 if m // max(e, 1) > 128 else 1,
            "num_warps": 4 if m <= 128 else 8,
            "num_stages": 4 if m <= 32 else 3}


def device_file_name():
    """vLLM's device part of config file names (the H200 family maps to NVIDIA_H200)."""
    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name(0).replace(" ", "_")
    return "NVIDIA_H200" if "H200" in name.split("_") else name


def tuned_config(vllm_dir, m, e, i, scheme):
    """(config, file name) from vLLM's tuned file for this device, nearest M; None if none."""
    device = device_file_name()
    if device is None:
        return None, None
    name = "E=%d,N=%d,device_name=%s%s%s.json" % (
        e, i, device, ",dtype=" + scheme.config_dtype if scheme.config_dtype else "",
        ",block_shape=[%d,%d]" % scheme.block if scheme.block else "")
    # tools/device/fetch_vllm_peer.sh stores it with '_' for every character but [A-Za-z0-9._-]
    path = os.path.join(vllm_dir, "configs", re.sub(r"[^A-Za-z0-9._-]", "_", name))
    if not os.path.exists(path):
        return None, name
    with open(path, encoding="utf-8") as f:
        table = {int(k): v for k, v in json.load(f).items() if k.isdigit()}
    if not table:
        die("%s: no M entries" % path)
    cfg = dict(table[min(table, key=lambda key: abs(key - m))])
    cfg.setdefault("GROUP_SIZE_M", 1)
    cfg.setdefault("num_warps", 4)
    cfg.setdefault("num_stages", 3)
    return cfg, name


CONFIG_KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")


def config_text(c):
    return "BM%d BN%d BK%d G%d w%d s%d" % tuple(c[k] for k in CONFIG_KEYS)


def candidates(vllm_dir, m, e, i, scheme, limit):
    """[(config, source)]: vLLM's tuned config (if any), its default, then one-step
    neighbours of the first: M tile 16/32/64/128, N tile 64/128 (256 for bf16 and
    fp8 channel at large M), K tile 64/128, warps 4/8, stages 3/4. The block
    scheme keeps N tiles <= 128 and K tiles dividing 128 (its scale indexing)."""
    out = []

    def add(cfg, source):
        cfg = {k: int(cfg[k]) for k in CONFIG_KEYS}
        if scheme.block and (cfg["BLOCK_SIZE_N"] > scheme.block[0] or scheme.block[1] % min(
                cfg["BLOCK_SIZE_K"], scheme.block[1]) != 0) and source == "nearby":
            return
        if all(cfg != c for c, _ in out):
            out.append((cfg, source))

    tuned, tuned_name = tuned_config(vllm_dir, m, e, i, scheme)
    if tuned:
        add(tuned, "vllm tuned")
    add(default_config(m, e, scheme), "vllm default")
    base = dict(out[0][0])
    bm, bn, bk = base["BLOCK_SIZE_M"], base["BLOCK_SIZE_N"], base["BLOCK_SIZE_K"]
    steps = [{"BLOCK_SIZE_M": min(128, bm * 2)}, {"BLOCK_SIZE_M": max(16, bm // 2)},
             {"BLOCK_SIZE_N": {64: 128, 128: 64}.get(bn, 128)},
             {"BLOCK_SIZE_K": {128: 64, 64: 128}.get(bk, 128 if bk > 128 else 64)},
             {"num_warps": 8 if base["num_warps"] == 4 else 4},
             {"num_stages": 3 if base["num_stages"] == 4 else 4}]
    if not scheme.block and m >= 1024 and bn == 128:
        steps.append({"BLOCK_SIZE_N": 256, "num_stages": 3})
    for step in steps:
        add(dict(base, **step), "nearby")
    return out[:limit], tuned_name


# ---------------------------------------------------------------------------
# The layer

class Experts:
    """Random experts in vLLM's layouts: w13 [E, 2I, H] (gate rows first), w2 [E, H, I],
    K contiguous; fp8: e4m3 with scales [E, N, 1] (channel) or [E, N/128, K/128] (block).
    The torch peers' weights (tools/bench_peers.py random_experts)."""

    def __init__(self, shape, scheme, device="cuda"):
        e, _, _, i = shape
        w13, w2 = random_experts(shape, device)
        self.scheme, self.e, self.i = scheme, e, i
        if not scheme.fp8:
            self.w13, self.w2, self.s13, self.s2 = w13, w2, None, None
        else:
            self.w13, self.s13 = self._quantize(w13)
            del w13
            self.w2, self.s2 = self._quantize(w2)
            del w2

    def _quantize(self, w):
        e, n, k = w.shape
        q = torch.empty(e, n, k, dtype=FP8, device=w.device)
        if self.scheme.per_channel:
            s = torch.empty(e, n, 1, dtype=torch.float32, device=w.device)
        else:
            bn, bk = self.scheme.block
            s = torch.empty(e, n // bn, k // bk, dtype=torch.float32, device=w.device)
        for x in range(e):  # one expert at a time: the f32 temporaries of a whole layer need not fit
            if self.scheme.per_channel:
                q[x], s[x, :, 0] = rowwise_fp8(w[x])
            else:
                blk = w[x].float().view(n // bn, bn, k // bk, bk)
                sx = blk.abs().amax(dim=(1, 3)).div_(FP8_MAX).clamp_(min=1e-12)
                q[x] = (blk / sx[:, None, :, None]).to(FP8).view(n, k)
                s[x] = sx
        return q, s

    def dequant(self, which, x):
        """Expert x's w13 or w2 in f32."""
        w, s = (self.w13, self.s13) if which == 13 else (self.w2, self.s2)
        if s is None:
            return w[x].float()
        if self.scheme.per_channel:
            return w[x].float() * s[x]
        bn, bk = self.scheme.block
        return w[x].float() * s[x].repeat_interleave(bn, 0).repeat_interleave(bk, 1)


class RoutingSet:
    """One routing set's inputs and the tensors its last forward made."""

    def __init__(self, x, ids, w, out):
        self.x, self.ids, self.w, self.out = x, ids, w.contiguous(), out
        self.consts = {}


class Forward:
    """The layer forward of vLLM's fused_experts_impl with one kernel config."""

    def __init__(self, call, layer, cfg, sm90):
        self.call, self.layer, self.cfg, self.sm90 = call, layer, cfg, sm90
        self.scheme = layer.scheme

    def swap_ab(self):
        """vLLM's enable_swap_ab, for fp8 only: Hopper, M tile < 64, N tile >= 64."""
        return bool(self.scheme.fp8 and self.sm90 and self.cfg["BLOCK_SIZE_M"] < 64
                    and self.cfg["BLOCK_SIZE_N"] >= 64)

    def naive(self, st):
        return naive_assignment(st.ids.numel(), self.layer.e)

    def gemm(self, st, a, a_scale, b, b_scale, c, mul_routed_weight, top_k):
        cfg, scheme = self.cfg, self.scheme
        bm, bn = cfg["BLOCK_SIZE_M"], cfg["BLOCK_SIZE_N"]
        bk = cfg["BLOCK_SIZE_K"] if scheme.block is None else min(cfg["BLOCK_SIZE_K"], min(scheme.block))
        n, rows = b.size(1), a.size(0)
        if st.sorted_ids is None:
            em = rows * top_k * bm
        else:
            em = st.sorted_ids.size(0)
            if rows < bm:  # vLLM skips blocks that cannot hold a token at small batches
                em = min(em, rows * top_k * bm)
        a2 = a_scale is not None and a_scale.ndim == 2
        args = {
            "a_ptr": a, "b_ptr": b, "c_ptr": c, "b_bias_ptr": None, "a_scale_ptr": a_scale,
            "b_scale_ptr": b_scale, "topk_weights_ptr": st.w, "sorted_token_ids_ptr": st.sorted_ids,
            "expert_ids_ptr": st.expert_ids, "num_tokens_post_padded_ptr": st.post_padded,
            "N": n, "K": b.size(2), "EM": em, "num_valid_tokens": rows * top_k,
            "stride_am": a.stride(0), "stride_ak": a.stride(1),
            "stride_be": b.stride(0), "stride_bk": b.stride(2), "stride_bn": b.stride(1),
            "stride_cm": c.stride(1), "stride_cn": c.stride(2),
            "stride_asm": a_scale.stride(0) if a2 else 0, "stride_ask": a_scale.stride(1) if a2 else 0,
            "stride_bse": b_scale.stride(0) if b_scale is not None else 0,
            "stride_bsk": b_scale.stride(2) if b_scale is not None and b_scale.ndim == 3 else 0,
            "stride_bsn": b_scale.stride(1) if b_scale is not None and b_scale.ndim >= 2 and b_scale.size(1) > 1
            else 0,
            "stride_bbe": 0, "stride_bbn": 0,
            "group_n": scheme.block[0] if scheme.block else 0, "group_k": scheme.block[1] if scheme.block else 0,
            "naive_block_assignment": st.sorted_ids is None,
            "BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": cfg["GROUP_SIZE_M"],
            "SPLIT_K": 1, "MUL_ROUTED_WEIGHT": mul_routed_weight, "top_k": top_k, "compute_type": tl.bfloat16,
            "use_fp8_w8a8": scheme.fp8, "use_int8_w8a8": False, "use_int8_w8a16": False,
            "per_channel_quant": scheme.per_channel, "HAS_BIAS": False, "SWAP_AB": self.swap_ab(),
            "USE_TD": False,  # vLLM's tensor-descriptor path: sm100+ and unquantized only
        }
        grid = (triton.cdiv(em, bm) * triton.cdiv(n, bn),)
        self.call(grid, args, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])

    def __call__(self, st):
        layer = self.layer
        m, k = st.ids.shape
        h, i = st.x.size(1), layer.i
        if self.naive(st):
            st.sorted_ids, st.expert_ids = None, st.ids.view(-1)
            st.post_padded = torch.full((1,), st.ids.numel() * self.cfg["BLOCK_SIZE_M"], dtype=torch.int32,
                                        device=st.x.device)
        else:
            st.sorted_ids, st.expert_ids, st.post_padded = align_block_size(st, layer.e, self.cfg["BLOCK_SIZE_M"])
        st.a1, st.s1 = quantize(st.x, self.scheme)
        st.c1 = torch.empty(m, k, 2 * i, dtype=torch.bfloat16, device=st.x.device)
        self.gemm(st, st.a1, st.s1, layer.w13, layer.s13, st.c1, False, k)
        st.a2, st.s2 = quantize(silu_and_mul(st.c1.view(m * k, 2 * i)), self.scheme)
        st.c3 = torch.empty(m, k, h, dtype=torch.bfloat16, device=st.x.device)
        self.gemm(st, st.a2, st.s2, layer.w2, layer.s2, st.c3, True, 1)
        torch.sum(st.c3, dim=1, out=st.out)

    def kernels(self, st):
        """The two fused_moe_kernel launches alone, on the last forward's tensors."""
        m, k = st.ids.shape
        self.gemm(st, st.a1, st.s1, self.layer.w13, self.layer.s13, st.c1, False, k)
        self.gemm(st, st.a2, st.s2, self.layer.w2, self.layer.s2, st.c3, True, 1)


def reference(layer, x, ids, w):
    """The layer in f32 with the forward's quantized values: the same activation
    quantization, the kernels' bf16 stores of GEMM1 and of the activation, dequantized
    weights, f32 products and combine."""
    scheme = layer.scheme
    m, k = ids.shape
    xd = dequantize(*quantize(x, scheme), scheme)
    out = torch.zeros(m, x.size(1), dtype=torch.float32, device=x.device)
    flat, wflat = ids.reshape(-1), w.reshape(-1).float()
    for e in torch.unique(flat).tolist():
        pairs = (flat == e).nonzero().squeeze(1)
        tokens = pairs // k
        h = (xd[tokens] @ layer.dequant(13, e).t()).bfloat16()
        act = silu_and_mul(h)
        y = dequantize(*quantize(act, scheme), scheme) @ layer.dequant(2, e).t()
        out.index_add_(0, tokens, (y * wflat[pairs, None]).bfloat16().float())
    return out


def rel_err(got, ref):
    return float((got.float() - ref).norm() / ref.norm().clamp(min=1e-30))


# ---------------------------------------------------------------------------
# Measuring

def bench_point(call, layer, name, shape, m, args, vllm_dir, deadline):
    e, k, h, i = shape
    scheme = layer.scheme
    x = torch.randn(m, h, device=layer.w13.device, dtype=torch.bfloat16)
    out = torch.empty_like(x)
    routing = routing_sets(shape, m, 1000 + m, args.routing_seed)
    sets = [RoutingSet(x, ids, w, out) for ids, w in routing]
    ref = reference(layer, x, sets[0].ids, sets[0].w)
    cands, tuned_name = candidates(vllm_dir, m, e, i, scheme, args.max_configs)
    sm90 = torch.cuda.get_device_capability(0) == (9, 0)
    point = dict(point_head(name, shape, m, scheme), distinct_experts=distinct_experts(routing),
                 routing_seed=args.routing_seed,
                 naive_block_assignment=naive_assignment(m * k, e), configs=[])
    if tuned_name:
        found = any(source == "vllm tuned" for _, source in cands)
        point["tuned_file" if found else "tuned_file_absent"] = tuned_name
    best = None
    for cfg, source in cands:
        if time.monotonic() > deadline:
            point["partial"] = "budget reached after %d of %d configs" % (len(point["configs"]), len(cands))
            break
        row = {"config": cfg, "source": source}
        fwd = Forward(call, layer, cfg, sm90)
        row["swap_ab"] = fwd.swap_ab()
        t0 = time.monotonic()
        try:
            fwd(sets[0])  # compiles this config's two kernels
            torch.cuda.synchronize()
            row["first_call_s"] = time.monotonic() - t0
            row["rel_err"] = rel_err(out, ref)
            if not row["rel_err"] < scheme.tol:
                row["error"] = "relative error %.3g against the f32 reference (limit %g)" % (
                    row["rel_err"], scheme.tol)
            else:
                graphs = capture(fwd, [(st,) for st in sets])
                row["us"] = timed_replays(graphs, args.reps) * 1e6
                del graphs
        except Exception as err:  # noqa: BLE001 - a config that cannot run is recorded, not fatal
            row["error"] = first_line(err)
        point["configs"].append(row)
        if "us" in row and (best is None or row["us"] < best[1]["us"]):
            best = (fwd, row)
    if best is None:
        point["error"] = "no config ran: " + "; ".join(r.get("error", "?") for r in point["configs"])[:600]
        return point
    fwd, row = best
    point.update(us=row["us"], config=row["config"], config_source=row["source"], rel_err=row["rel_err"],
                 swap_ab=row["swap_ab"])
    try:
        for st in sets:  # fresh tensors of an eager forward for the kernels-only graphs
            fwd(st)
        torch.cuda.synchronize()
        graphs = capture(fwd.kernels, [(st,) for st in sets])
        point["us_kernels"] = timed_replays(graphs, args.reps) * 1e6
        del graphs
    except Exception as err:  # noqa: BLE001
        point["us_kernels_error"] = first_line(err)
    return point


def write_json(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def run(args):
    t_start = time.monotonic()
    deadline = t_start + args.budget_s
    scheme = SCHEMES[args.scheme]
    kernel, info = load_kernel(args.vllm_dir)
    call = KernelCall(kernel)
    tokens = [int(t) for t in args.tokens.split(",")]
    dev = torch.cuda.get_device_properties(0)
    peak_of = "fp8" if scheme.fp8 else "bf16"
    doc = {"device": dev.name, "sms": dev.multi_processor_count, "torch": torch.__version__,
           "triton": triton.__version__, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "command": " ".join(sys.argv), "routing": routing_note(args.routing_seed),
           "routing_seed": args.routing_seed, "peer": PEER, "scheme": scheme.key, "vllm_commit": info.get("commit"),
           "vllm_source": info.get("source"), "vllm_file": info, "budget_s": args.budget_s,
           "copy_GBps": copy_rate() * 1e-9, "peak_tflops": {peak_of: gemm_peak(peak_of) * 1e-12},
           "points": [], "skipped": []}
    print("device %s: copy %.0f GB/s, %s peak %.0f TFLOP/s; vLLM %s (%s)" % (
        dev.name, doc["copy_GBps"], peak_of, doc["peak_tflops"][peak_of], info.get("commit"),
        ", ".join(info["functions"])), flush=True)
    stopped = False
    for text in args.shape or list(SHAPES):
        name, shape = shape_of(text)
        _, _, h, i = shape
        if scheme.block and any(v % b for v in (h, i) for b in scheme.block):
            reason = "H = %d, I = %d: not both multiples of the %dx%d weight block" % (h, i, *scheme.block)
            doc["skipped"].append({"shape": name, "reason": reason})
            print("%-14s %-8s skipped: %s" % (name, scheme.name, reason), flush=True)
            continue
        if time.monotonic() > deadline:
            stopped = True
            break
        t0 = time.monotonic()
        try:
            layer = Experts(shape, scheme)
        except torch.OutOfMemoryError as err:
            doc["skipped"].append({"shape": name, "reason": "no memory for the layer: %s" % str(err)[:200]})
            print("%s %s: no memory for the layer (%s)" % (name, scheme.name, err), flush=True)
            continue
        torch.cuda.synchronize()
        print("%-14s %-8s weights in %.1f s" % (name, scheme.name, time.monotonic() - t0), flush=True)
        for m in tokens:
            if time.monotonic() > deadline:
                stopped = True
                break
            t0 = time.monotonic()
            try:
                point = bench_point(call, layer, name, shape, m, args, args.vllm_dir, deadline)
            except Exception as err:  # noqa: BLE001 - e.g. no memory for the reference: recorded, next point
                point = dict(point_head(name, shape, m, scheme), error=first_line(err))
            point["seconds"] = time.monotonic() - t0
            doc["points"].append(point)
            write_json(args.json, doc)
            if "us" in point:
                what = "%.1f us, kernels %s us, %s (%s), %d configs" % (
                    point["us"], "%.1f" % point["us_kernels"] if "us_kernels" in point else "-",
                    config_text(point["config"]), point["config_source"],
                    sum(1 for r in point["configs"] if "us" in r))
            else:
                what = "error: " + point["error"]
            print("%-14s %-8s M=%-5d %s [%.1f s, %.0f s in all]%s" % (
                name, scheme.name, m, what, point["seconds"], time.monotonic() - t_start,
                " PARTIAL" if "partial" in point else ""), flush=True)
            if "partial" in point:
                stopped = True
                break
        del layer
        torch.cuda.empty_cache()
        if stopped:
            break
    if stopped:
        doc["stopped"] = "--budget-s %g reached after %.0f s" % (args.budget_s, time.monotonic() - t_start)
        print(doc["stopped"] + "; the JSON has the points done", flush=True)
    write_json(args.json, doc)
    return 0


# ---------------------------------------------------------------------------
# Self-check: the harness's forward against the reference, on CPU

def self_check(args):
    """Runs the loaded kernel under Triton's interpreter on small layers, every config
    form the grid uses (align and one-block-per-pair assignment, SWAP_AB on and off
    for fp8), and compares the whole forward with the f32 reference."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        die("--self-check runs under TRITON_INTERPRET=1")
    _interpreter_bf16_fixes()
    kernel, info = load_kernel(args.vllm_dir)
    call = KernelCall(kernel)
    print("vLLM %s: %s" % (info.get("commit"), ", ".join(info["functions"])), flush=True)
    shape = (8, 2, 256, 256)  # M = 1 takes vLLM's one-block-per-pair path (1 * 2 * 4 <= 8)
    failed = 0
    for sname in [args.scheme] if args.scheme else list(SCHEMES):
        scheme = SCHEMES[sname]
        layer = Experts(shape, scheme, device="cpu")
        if scheme.fp8:  # the quantizers themselves: e4m3 keeps 3 mantissa bits, ~2-3 % RMS
            probe = torch.randn(64, shape[2], generator=torch.Generator().manual_seed(7)).bfloat16()
            err = rel_err(dequantize(*quantize(probe, scheme), scheme), probe.float())
            ok = 5e-3 < err < 5e-2
            failed += not ok
            print("%-8s activation quantize/dequantize: rel err %.2e %s" % (sname, err, "ok" if ok else "FAILED"))
        configs = [{"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1},
                   {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 4}]
        for m in (1, 3, 17, 64):  # 64: experts of more than one M tile
            gen = torch.Generator().manual_seed(1000 + m)
            x = torch.randn(m, shape[2], dtype=torch.bfloat16, generator=gen)
            logits = torch.randn(m, shape[0], generator=gen)
            w, ids = torch.topk(torch.softmax(logits, -1), shape[1], dim=-1)
            st = RoutingSet(x, ids, w / w.sum(-1, keepdim=True), torch.empty_like(x))
            ref = reference(layer, st.x, st.ids, st.w)
            for cfg in configs:
                for sm90 in ((False, True) if scheme.fp8 else (False,)):
                    fwd = Forward(call, layer, dict(cfg, num_warps=4, num_stages=3), sm90)
                    if sm90 and not fwd.swap_ab():
                        continue  # the same launch as without
                    fwd(st)
                    err = rel_err(st.out, ref)
                    ok = err < scheme.tol
                    failed += not ok
                    print("%-8s M=%-2d %s%s %s: rel err %.2e %s" % (
                        sname, m, config_text(fwd.cfg), " swap_ab" if fwd.swap_ab() else "",
                        "one block per pair" if fwd.naive(st) else "aligned", err, "ok" if ok else "FAILED"),
                        flush=True)
    print("self-check: %s" % ("all passed" if not failed else "%d FAILED" % failed), flush=True)
    return 1 if failed else 0


def _interpreter_bf16_fixes():
    """Two bf16 gaps of Triton 3.6's interpreter (it stores bf16 as uint16), closed so
    that it computes what the GPU does: tl.dot multiplied the operands' bit patterns
    (only 8-bit floats were converted first), and f32 -> bf16 casts truncated where
    the GPU rounds to nearest even."""
    try:
        import numpy as np
        from triton.runtime import interpreter
    except ImportError:
        return
    builder = getattr(interpreter, "InterpreterBuilder", None)
    if builder is None or not hasattr(builder, "create_dot") or not hasattr(builder, "cast_impl") \
            or getattr(builder, "_bf16_fixed", False):
        return
    dot, cast = builder.create_dot, builder.cast_impl

    def is_bf16(t):
        return getattr(t.dtype, "scalar", t.dtype) == tl.bfloat16

    def create_dot(self, a, b, d, *rest):
        def widen(t):
            return interpreter.TensorHandle((t.data.astype(np.uint32) << 16).view(np.float32), tl.float32) \
                if is_bf16(t) else t
        return dot(self, widen(a), widen(b), d, *rest)

    def cast_impl(self, src, dst_type):
        if getattr(src.dtype, "scalar", src.dtype) == tl.float32 and dst_type.scalar == tl.bfloat16:
            bits = np.ascontiguousarray(src.data, dtype=np.float32).view(np.uint32)
            rounded = (bits + (((bits >> 16) & 1) + 0x7FFF)) >> 16  # ties to even; no NaN here
            return interpreter.TensorHandle(rounded.astype(np.uint16), tl.bfloat16)
        return cast(self, src, dst_type)

    builder.create_dot, builder.cast_impl, builder._bf16_fixed = create_dot, cast_impl, True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scheme", choices=list(SCHEMES), help="required unless --self-check (then: all by default)")
    ap.add_argument("--shape", action="append", help="NAME or E,k,H,I; repeatable (default: the four grid models)")
    ap.add_argument("--tokens", default="1,16,128,1024,8192")
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--max-configs", type=int, default=7, help="configs tried per point (tuned, default, nearby)")
    ap.add_argument("--budget-s", type=float, default=500.0,
                    help="start no config after this many seconds; the JSON keeps what was done")
    ap.add_argument("--vllm-dir", default=".peer/vllm", help="what tools/device/fetch_vllm_peer.sh wrote")
    ap.add_argument("--routing-seed", type=int,
                    help="time on the routing sets `fusedmoe bench --seed N` draws (default: torch's own draws)")
    ap.add_argument("--json")
    ap.add_argument("--self-check", action="store_true",
                    help="CPU: the forward under Triton's interpreter against the reference, small shapes")
    args = ap.parse_args()
    if args.self_check:
        return self_check(args)
    if not args.scheme or not args.json:
        ap.error("--scheme and --json are required (or --self-check)")
    if not torch.cuda.is_available():
        die("no CUDA device (--self-check runs on CPU)")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
