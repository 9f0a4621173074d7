#!/usr/bin/env python3
"""The torch peers of `fusedmoe bench --plugin cuda`, and the device floor.

Runs on the GPU machine (python3 with torch there), in the same call as the
fusedmoe bench it accompanies (tools/device/run_grid.sh):

  floor   device-to-device copy rate (read + written bytes) and the GEMM peak
          of torch.matmul (bf16) and torch._scaled_mm (fp8, rowwise scales) on
          8192^3, on random data (spec/performance.md "The floor");
  peers   one MoE layer forward with routing given, as spec/performance.md
          times it: torch._grouped_mm (bf16) and torch._scaled_grouped_mm (fp8
          rowwise activations x per-channel weights), routing preparation
          (sort by expert, offsets, gather), SwiGLU, activation quantization
          and the weighted top-k combine included; each routing set captured
          in a CUDA graph, the sets replayed in turn, events around each replay,
          median.

Usage: bench_peers.py --shape NAME|E,k,H,I ... --tokens 1,16,... --json OUT
Prints one line per point; a point a peer cannot run is recorded with its
error instead of a time.
"""
import argparse
import json
import sys
import time

import torch
import torch.nn.functional as F

SHAPES = {
    "mixtral-8x7b": (8, 2, 4096, 14336),
    "gpt-oss-120b": (128, 4, 2880, 2880),
    "qwen3-30b-a3b": (128, 8, 2048, 768),
    "deepseek-v3": (256, 8, 7168, 2048),
}
FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
ROUTING_SETS = 4


def shape_of(text):
    if text in SHAPES:
        return text, SHAPES[text]
    e, k, h, i = (int(v) for v in text.split(","))
    return text, (e, k, h, i)


def timed_replays(graphs, reps):
    """Median seconds of `reps` replays, graph r % len(graphs)."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    for g in graphs:  # warm-up
        g.replay()
    times = []
    for r in range(reps):
        start.record()
        graphs[r % len(graphs)].replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    times.sort()
    return times[len(times) // 2]


def capture(fn, sets):
    """One CUDA graph per argument tuple of `sets`.

    The eager warm-up runs on a side stream, which does not wait for the
    current stream by itself: without wait_stream it read the routing ids
    (and x) before the current stream had written them - memory the caching
    allocator had just handed back, still holding the previous shape's ids.
    A DeepSeek layer (97 experts) built after a gpt-oss one (128) then
    counted an id >= 97 in index_add_ (`dstIndex < dstAddDimSize`)."""
    graphs = []
    stream = torch.cuda.Stream()
    for s in sets:
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn(*s)  # eager warm-up on the capture stream
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream):
            fn(*s)
        graphs.append(g)
    return graphs


def copy_rate(nbytes=1 << 30, reps=10):
    a = torch.full((nbytes // 4,), 1.5, device="cuda")
    b = torch.empty_like(a)
    b.copy_(a)
    best = 0.0
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(reps):
        start.record()
        b.copy_(a)
        end.record()
        end.synchronize()
        best = max(best, 2 * nbytes / (start.elapsed_time(end) * 1e-3))
    return best


def gemm_peak(dtype, n=8192, reps=10):
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    if dtype == "bf16":
        a, b = a.bfloat16(), b.bfloat16()

        def run():
            return a @ b.t()
    else:
        sa = (a.abs().amax(1, keepdim=True) / FP8_MAX).float()
        sb = (b.abs().amax(1, keepdim=True) / FP8_MAX).float()
        qa, qb = (a / sa).to(FP8), (b / sb).to(FP8)

        def run():
            return torch._scaled_mm(qa, qb.t(), scale_a=sa, scale_b=sb.t(), out_dtype=torch.bfloat16)
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        run()
    end.record()
    end.synchronize()
    return 2.0 * n ** 3 * reps / (start.elapsed_time(end) * 1e-3)


def rowwise_fp8(x):
    s = (x.abs().amax(-1, keepdim=True).float() / FP8_MAX).clamp(min=1e-12)
    return (x / s).to(FP8), s.squeeze(-1)


def random_experts(shape, device="cuda"):
    """Every peer's bf16 experts of one shape: w13 [E, 2I, H] (gate rows first) and
    w2 [E, H, I], seed 1, entries N(0, 1/K)."""
    e, _, h, i = shape
    gen = torch.Generator(device=device).manual_seed(1)
    w13 = torch.randn(e, 2 * i, h, device=device, dtype=torch.bfloat16, generator=gen) * (h ** -0.5)
    w2 = torch.randn(e, h, i, device=device, dtype=torch.bfloat16, generator=gen) * (i ** -0.5)
    return w13, w2


class Layer:
    """Random experts of one shape in the layouts the peers want."""

    def __init__(self, shape, fp8):
        e, _, h, i = shape
        w13, w2 = random_experts(shape)
        self.fp8 = fp8
        if fp8:
            q13, s13 = rowwise_fp8(w13)
            q2, s2 = rowwise_fp8(w2)
            del w13, w2
            # [E, K, N] views with K contiguous (column-major B), scales [E, N].
            self.w13, self.s13 = q13.transpose(1, 2), s13
            self.w2, self.s2 = q2.transpose(1, 2), s2
        else:
            self.w13, self.w2 = w13.transpose(1, 2), w2.transpose(1, 2)
        self.e, self.i = e, i

    def grouped(self, a, w, scale_w, offs):
        if not self.fp8:
            return torch._grouped_mm(a, w, offs=offs)
        qa, sa = rowwise_fp8(a)
        return torch._scaled_grouped_mm(qa, w, sa, scale_w, offs=offs, out_dtype=torch.bfloat16)

    def forward(self, x, ids, w, out):
        m, k = ids.shape
        flat = ids.flatten()
        order = torch.argsort(flat, stable=True)
        counts = torch.zeros(self.e, dtype=torch.int32, device=x.device)
        counts.index_add_(0, flat, torch.ones_like(flat, dtype=torch.int32))
        offs = torch.cumsum(counts, 0, dtype=torch.int32)
        token = order // k
        h = self.grouped(x[token], self.w13, getattr(self, "s13", None), offs)
        a = F.silu(h[:, : self.i]) * h[:, self.i:]
        y = self.grouped(a, self.w2, getattr(self, "s2", None), offs)
        out.zero_()
        out.index_add_(0, token, y * w.flatten()[order, None].to(y.dtype))


def routing_sets(shape, m, seed, fusedmoe_seed=None):
    """ROUTING_SETS (ids, weights) on the device: with fusedmoe_seed, the very
    sets `fusedmoe bench --seed fusedmoe_seed` times at M = m
    (tools/bench_routing.py), so that the peer reads the experts ours reads;
    otherwise drawn by torch from `seed`."""
    e, k, h, _ = shape
    sets = []
    if fusedmoe_seed is not None:
        import bench_routing
        if bench_routing.ROUTING_SETS != ROUTING_SETS:
            raise RuntimeError("bench_routing draws %d sets, this harness rotates %d"
                               % (bench_routing.ROUTING_SETS, ROUTING_SETS))
        for ids, w in bench_routing.routing_sets(e, k, m, fusedmoe_seed):
            sets.append((torch.from_numpy(ids).cuda(), torch.from_numpy(w).cuda()))
    gen = torch.Generator(device="cuda").manual_seed(seed)
    for _ in range(ROUTING_SETS if fusedmoe_seed is None else 0):
        logits = torch.randn(m, e, device="cuda", generator=gen)
        w, ids = torch.topk(torch.softmax(logits, -1), k, dim=-1)
        w = w / w.sum(-1, keepdim=True)
        sets.append((ids.to(torch.int64), w.float()))
    torch.cuda.synchronize()
    for ids, _ in sets:  # what index_add_ into [E] counts relies on
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0 or hi >= e:
            raise RuntimeError("routing ids in [%d, %d], outside [0, %d)" % (lo, hi, e))
    return sets


def distinct_experts(sets):
    """Distinct experts the sets touch, averaged (the bench's `distinct_experts`)."""
    return sum(int(torch.unique(ids).numel()) for ids, _ in sets) / len(sets)


def routing_note(seed):
    """The record's `routing`: where its points' routing sets came from."""
    if seed is None:
        return "torch.randn logits, generator seed 1000 + M, softmax top-k renormalized"
    return "fusedmoe bench --seed %d's sets (tools/bench_routing.py)" % seed


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", action="append", required=True)
    ap.add_argument("--tokens", default="1,16,128,1024,8192")
    ap.add_argument("--dtype", action="append", choices=["bf16", "fp8"])
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--peaks-only", action="store_true", help="measure the copy rate and GEMM peaks only")
    ap.add_argument("--routing-seed", type=int,
                    help="time on the routing sets `fusedmoe bench --seed N` draws (default: torch's own draws)")
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    tokens = [int(t) for t in args.tokens.split(",")]
    dtypes = args.dtype or ["bf16", "fp8"]
    dev = torch.cuda.get_device_properties(0)
    doc = {"device": dev.name, "sms": dev.multi_processor_count, "torch": torch.__version__,
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "command": " ".join(sys.argv),
           "routing": routing_note(args.routing_seed), "routing_seed": args.routing_seed,
           "copy_GBps": copy_rate() * 1e-9, "peak_tflops": {}, "points": []}
    for d in dtypes:
        doc["peak_tflops"][d] = gemm_peak(d) * 1e-12
    print("device %s: copy %.0f GB/s, GEMM peak %s" % (dev.name, doc["copy_GBps"],
          ", ".join("%s %.0f TFLOP/s" % kv for kv in doc["peak_tflops"].items())), flush=True)
    for text in [] if args.peaks_only else args.shape:
        name, shape = shape_of(text)
        e, k, h, i = shape
        for d in dtypes:
            try:
                layer = Layer(shape, d == "fp8")
            except torch.OutOfMemoryError as err:
                print("%s %s: no memory for the layer (%s)" % (name, d, err), flush=True)
                continue
            peer = "torch._scaled_grouped_mm" if d == "fp8" else "torch._grouped_mm"
            for m in tokens:
                x = torch.randn(m, h, device="cuda", dtype=torch.bfloat16)
                out = torch.empty_like(x)
                routing = routing_sets(shape, m, 1000 + m, args.routing_seed)
                sets = [(x, ids, w, out) for ids, w in routing]
                point = {"shape": name, "dtype": d, "peer": peer, "tokens": m, "distinct_experts":
                         distinct_experts(routing), "routing_seed": args.routing_seed, "experts": e, "top_k": k,
                         "hidden": h, "intermediate": i}
                try:
                    graphs = capture(layer.forward, sets)
                    point["us"] = timed_replays(graphs, args.reps) * 1e6
                    del graphs
                except Exception as err:  # noqa: BLE001 - a peer that cannot run is recorded, not fatal
                    point["error"] = str(err).splitlines()[0][:300]
                doc["points"].append(point)
                print("%-14s %-4s M=%-5d %s" % (name, d, m, "%.1f us" % point["us"] if "us" in point
                                                else "error: " + point["error"]), flush=True)
            del layer
            torch.cuda.empty_cache()
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
