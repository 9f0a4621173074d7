#!/usr/bin/env python3
"""Summarize a CUDA grid record (tools/device/run_grid.sh): a markdown table of
every point (ours, floor, the best peer) with the targets of spec/performance.md
(geomean of time / floor, worst point, faster than the best peer), and a PNG plot.

Usage: bench_plot.py DIR TAG [--schemes LIST] [--png FILE] [--md FILE]
Reads DIR/TAG-cuda-SCHEME.json and, when they exist, the peers' records
DIR/TAG-peers-SCHEME.json (torch, tools/bench_peers.py) and
DIR/TAG-vllm-SCHEME.json (vLLM's Triton fused MoE, tools/bench_vllm_triton.py)
for each scheme of LIST (default bf16,fp8; run_grid.sh's names: also fp8block,
int4g128, mxfp4, nvfp4). A point's peer is the fastest of them there, as
spec/performance.md's "best peer".
"""
import argparse
import collections
import json
import math
import os
import sys


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def shape_key(p):
    return (p["experts"], p["top_k"], p["hidden"], p["intermediate"])


# The peers' records beside ours: TAG-<kind>-SCHEME.json.
PEER_KINDS = ("peers", "vllm")


def peer_label(name):
    """A peer's short name for the table: torch._grouped_mm -> torch."""
    return name.split()[0].split(".")[0] if name else "peer"


def same_routing(p, q):
    """A peer point timed on our routing sets (`--routing-seed`, tools/bench_routing.py)
    touched the experts ours touched: else the seeds differ or the Python draw no
    longer matches the bench's, and the two times are not of the same work."""
    if q.get("routing_seed") is None or "distinct_experts" not in p:
        return
    if abs(q.get("distinct_experts", -1.0) - p["distinct_experts"]) > 1e-9:
        raise SystemExit("bench_plot.py: %s M=%d: the peer %s ran on fusedmoe bench --seed %d's routing but touched "
                         "%s distinct experts against our %s: time both with the same seed" % (
                             p["shape"], p["tokens"], q.get("peer", "?"), q["routing_seed"],
                             q.get("distinct_experts"), p["distinct_experts"]))


def rows(directory, tag, dtype):
    ours = load(os.path.join(directory, "%s-cuda-%s.json" % (tag, dtype)))
    candidates = {}  # (shape, M) -> the peers' points there
    for kind in PEER_KINDS:
        path = os.path.join(directory, "%s-%s-%s.json" % (tag, kind, dtype))
        for q in load(path)["points"] if os.path.exists(path) else []:
            candidates.setdefault((shape_key(q), q["tokens"]), []).append(q)
    out = []
    for p in ours["points"]:
        qs = candidates.get((shape_key(p), p["tokens"]), [])
        timed = [q for q in qs if q.get("us")]
        for q in timed:
            same_routing(p, q)
        best = min(timed, key=lambda q: q["us"]) if timed else {}
        slower = sorted(peer_label(q.get("peer", "")) for q in timed if q["us"] < p["us"])
        out.append({"shape": p["shape"], "experts": p["experts"], "model_experts": p["model_experts"],
                    "m": p["tokens"], "us": p["us"], "floor": p["floor_us"], "peer": best.get("us"),
                    "gbps": p.get("effective_GBps"), "tflops": p["flops"] / p["us"] * 1e-6 if p.get("flops") else None,
                    "peer_name": best.get("peer", ""), "peer_error": bool(qs) and not timed,
                    "faster_peers": slower})
    return ours, out


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def table(dtype, ours, rs):
    first = ours["points"][0] if ours["points"] else {}
    copy = first.get("device_copy_GBps") or 0
    # Records since plugin ABI 1.4 also have the read rate; the floor divides by the higher.
    read = ("read %.0f GB/s, " % first["device_read_GBps"]) if first.get("device_read_GBps") else ""
    lines = ["### %s (%s; %scopy %.0f GB/s, GEMM peak %.0f TFLOP/s)" % (
        dtype, ours["scheme"], read, copy, ours.get("gemm_peak_tflops", 0)),
        "", "| shape | experts | M | ours µs | floor µs | ours/floor | ours GB/s | ours TFLOP/s | peer µs | peer "
        "| peer/floor | ours faster |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rs:
        peer = "%.1f" % r["peer"] if r["peer"] else ("error" if r["peer_error"] else "-")
        # Effective rates: the weight bytes of the experts touched, and the flops, over our time.
        gbps = "%.0f" % r["gbps"] if r["gbps"] else "-"
        tflops = ("%.1f" if r["tflops"] < 10 else "%.0f") % r["tflops"] if r["tflops"] else "-"
        lines.append("| %s | %s | %d | %.1f | %.1f | %.2f | %s | %s | %s | %s | %s | %s |" % (
            r["shape"], r["experts"] if r["experts"] == r["model_experts"] else
            "%d/%d" % (r["experts"], r["model_experts"]), r["m"], r["us"], r["floor"], r["us"] / r["floor"], gbps,
            tflops, peer, peer_label(r["peer_name"]) if r["peer"] else "-",
            "%.2f" % (r["peer"] / r["floor"]) if r["peer"] else "-",
            ("yes" if r["us"] < r["peer"] else "**no**") if r["peer"] else "-"))
    ratios = [r["us"] / r["floor"] for r in rs]
    peer_ratios = [r["peer"] / r["floor"] for r in rs if r["peer"]]
    wins = sum(1 for r in rs if r["peer"] and r["us"] < r["peer"])
    if peer_ratios:
        peers = "best peer/floor %.2f; ours faster at %d of %d points" % (
            geomean(peer_ratios), wins, len(peer_ratios))
        behind = collections.Counter(name for r in rs for name in r["faster_peers"])
        if behind:
            peers += " (behind %s)" % ", ".join("%s at %d" % kv for kv in sorted(behind.items()))
    else:
        peers = "no peer in this record"
    lines += ["", "geomean ours/floor **%.2f** (worst %.2f); %s" % (geomean(ratios), max(ratios), peers), ""]
    return lines


def plot(path, data):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    shapes = []
    for _, rs in data.values():
        for r in rs:
            if r["shape"] not in shapes:
                shapes.append(r["shape"])
    fig, axes = plt.subplots(len(data), len(shapes), figsize=(4 * len(shapes), 3.4 * len(data)), squeeze=False)
    for i, (dtype, (_, rs)) in enumerate(data.items()):
        for j, shape in enumerate(shapes):
            ax = axes[i][j]
            pts = [r for r in rs if r["shape"] == shape]
            if not pts:  # e.g. int4 g128 on gpt-oss-120b (H 2880): no layer, no axes to scale
                ax.set_title("%s %s" % (shape, dtype), fontsize=9)
                ax.text(0.5, 0.5, "no point", ha="center", va="center", transform=ax.transAxes)
                ax.set_axis_off()
                continue
            ms = [r["m"] for r in pts]
            ax.plot(ms, [r["us"] / r["floor"] for r in pts], "o-", label="fusedmoe cuda")
            peer = [(r["m"], r["peer"] / r["floor"]) for r in pts if r["peer"]]
            if peer:
                ax.plot(*zip(*peer), "s--", label="best peer")
            ax.axhline(1.0, color="k", lw=0.8)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title("%s %s" % (shape, dtype), fontsize=9)
            ax.set_xlabel("tokens M")
            ax.set_ylabel("time / floor")
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("tag")
    ap.add_argument("--schemes", default="bf16,fp8", help="comma-separated (default bf16,fp8)")
    ap.add_argument("--png")
    ap.add_argument("--md")
    args = ap.parse_args()
    data = {}
    for dtype in [d for d in args.schemes.split(",") if d]:
        if os.path.exists(os.path.join(args.dir, "%s-cuda-%s.json" % (args.tag, dtype))):
            data[dtype] = rows(args.dir, args.tag, dtype)
    lines = []
    for dtype, (ours, rs) in data.items():
        lines += table(dtype, ours, rs)
    text = "\n".join(lines)
    print(text)
    if args.md:
        with open(args.md, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    if args.png:
        plot(args.png, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
