#!/usr/bin/env python3
"""The grid record tools (tools/device/merge_grid.py, tools/bench_plot.py)
on two synthetic device calls whose figures are chosen here, so that every
expected value below is worked out by hand: the merged record's points and
per-call keys, the table rows (ratio to the floor, effective rates, the
best of two peers), the geomean line, and the refusals. TAP output.

Usage: test_grid_tools.py REPO_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
MERGE = os.path.join(ROOT, "tools", "device", "merge_grid.py")
PLOT = os.path.join(ROOT, "tools", "bench_plot.py")

results = []


def check(name, ok, detail=""):
    results.append((name, bool(ok), detail))


def point(tokens, us, floor_us, gbps, flops):
    return {"shape": "toy", "experts": 4, "model_experts": 8, "top_k": 2, "hidden": 256, "intermediate": 128,
            "tokens": tokens, "us": us, "floor_us": floor_us, "effective_GBps": gbps, "flops": flops,
            "device_copy_GBps": 4000.0, "device_read_GBps": 3900.0}


def peer(tokens, us, name="torch._grouped_mm"):
    return {"shape": "toy", "experts": 4, "top_k": 2, "hidden": 256, "intermediate": 128, "tokens": tokens,
            "peer": name, "us": us}


def write(path, doc):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f)


def run(*args):
    return subprocess.run([sys.executable] + list(args), capture_output=True, text=True)


with tempfile.TemporaryDirectory() as tmp:
    c1, c2, rec = (os.path.join(tmp, d) for d in ("c1", "c2", "rec"))
    for d in (c1, c2):
        os.makedirs(d)
    # Call 1: M = 1 (ours 20 us, floor 10: 2.00; 5e6 flops in 20 us = 0.25 TFLOP/s);
    # call 2: M = 64 (ours 40, floor 80: 0.50; 8e9 flops in 40 us = 200 TFLOP/s).
    head = {"scheme": "bf16", "gemm_peak_tflops": 800.0, "command": "bench call 1", "date": "d1",
            "device": {"copy_GBps": 4000.0}}
    write(os.path.join(c1, "g1-cuda-bf16.json"), dict(head, points=[point(1, 20.0, 10.0, 2500.0, 5e6)]))
    write(os.path.join(c2, "g2-cuda-bf16.json"),
          dict(head, command="bench call 2", date="d2", gemm_peak_tflops=790.0,
               points=[point(64, 40.0, 80.0, 3500.0, 8e9)]))
    # The peer: slower than ours at M = 1 (30 us), faster at M = 64 (35 us).
    write(os.path.join(c1, "g1-peers-bf16.json"), {"command": "peers 1", "points": [peer(1, 30.0)]})
    write(os.path.join(c2, "g2-peers-bf16.json"), {"command": "peers 2", "points": [peer(64, 35.0)]})
    # vLLM's Triton peer: faster than torch at M = 1 (25 us: the best peer there, still slower than
    # ours), between ours and torch at M = 64 (38 us).
    vllm = "vllm-triton fused_moe_kernel"
    write(os.path.join(c1, "g1-vllm-bf16.json"), {"command": "vllm 1", "points": [peer(1, 25.0, vllm)]})
    write(os.path.join(c2, "g2-vllm-bf16.json"), {"command": "vllm 2", "points": [peer(64, 38.0, vllm)]})
    # A stray file of another kind is not merged.
    write(os.path.join(c1, "g1-peaks.json"), {"peak_tflops": {"bf16": 800.0}})

    r = run(MERGE, "--note", "toy record", rec, "grid", os.path.join(c1, "g1"), os.path.join(c2, "g2"))
    check("merge_grid exits 0", r.returncode == 0, r.stderr)
    merged = json.load(open(os.path.join(rec, "grid-cuda-bf16.json")))
    check("merged points of both calls, in order", [p["tokens"] for p in merged["points"]] == [1, 64])
    check("first call's header kept", merged["command"] == "bench call 1" and merged["gemm_peak_tflops"] == 800.0)
    check("second call's per-call keys as _b", merged.get("command_b") == "bench call 2"
          and merged.get("date_b") == "d2" and merged.get("gemm_peak_tflops_b") == 790.0)
    check("note stored", merged.get("note") == "toy record")
    check("peers merged too", os.path.exists(os.path.join(rec, "grid-peers-bf16.json")))
    vmerged = json.load(open(os.path.join(rec, "grid-vllm-bf16.json")))
    check("vLLM peer merged, both calls' points", [p["us"] for p in vmerged["points"]] == [25.0, 38.0]
          and vmerged.get("command_b") == "vllm 2")
    check("peaks file not merged", not os.path.exists(os.path.join(rec, "grid-peaks.json")))

    md = os.path.join(tmp, "summary.md")
    r = run(PLOT, rec, "grid", "--schemes", "bf16", "--md", md)
    check("bench_plot exits 0", r.returncode == 0, r.stderr)
    text = open(md, encoding="utf-8").read() if os.path.exists(md) else ""
    check("header names read and copy rates and the peak",
          "### bf16 (bf16; read 3900 GB/s, copy 4000 GB/s, GEMM peak 800 TFLOP/s)" in text, text[:200])
    check("M = 1 row: ratio, effective rates, the best peer (vLLM's), faster",
          "| toy | 4/8 | 1 | 20.0 | 10.0 | 2.00 | 2500 | 0.2 | 25.0 | vllm-triton | 2.50 | yes |" in text, text)
    check("M = 64 row: the best peer (torch's), slower than it is flagged",
          "| toy | 4/8 | 64 | 40.0 | 80.0 | 0.50 | 3500 | 200 | 35.0 | torch | 0.44 | **no** |" in text, text)
    # geomean of 2.00 and 0.50 is 1.00; best peers 2.50 and 0.4375: sqrt(1.09375) = 1.0458; at
    # M = 64 both peers (35 and 38 us) are faster than ours (40).
    check("geomean line", "geomean ours/floor **1.00** (worst 2.00); best peer/floor 1.05; ours faster at 1 of 2 "
          "points (behind torch at 1, vllm-triton at 1)" in text, text)

    # A peer timed on our routing sets (--routing-seed) must have touched the experts ours did.
    same = os.path.join(tmp, "same")
    os.makedirs(same)
    write(os.path.join(same, "s-cuda-bf16.json"), dict(head, points=[dict(point(1, 20.0, 10.0, 2500.0, 5e6),
                                                                          distinct_experts=2.0)]))
    write(os.path.join(same, "s-vllm-bf16.json"), {"command": "vllm s", "points": [
        dict(peer(1, 25.0, vllm), distinct_experts=2.0, routing_seed=7)]})
    r = run(PLOT, same, "s", "--schemes", "bf16")
    check("bench_plot takes a peer on our routing that touched the same experts", r.returncode == 0, r.stderr)
    write(os.path.join(same, "s-vllm-bf16.json"), {"command": "vllm s", "points": [
        dict(peer(1, 25.0, vllm), distinct_experts=1.75, routing_seed=7)]})
    r = run(PLOT, same, "s", "--schemes", "bf16")
    check("bench_plot refuses a peer on our routing that touched other experts",
          r.returncode != 0 and "touched 1.75 distinct experts against our 2.0" in r.stderr, r.stderr)

    r = run(MERGE, rec, "grid2", os.path.join(c1, "nothing"), os.path.join(c2, "g2"))
    check("merge_grid refuses a prefix without records", r.returncode != 0 and "no " in r.stderr, r.stderr)
    os.remove(os.path.join(c2, "g2-peers-bf16.json"))
    r = run(MERGE, rec, "grid3", os.path.join(c1, "g1"), os.path.join(c2, "g2"))
    check("merge_grid refuses a second call missing a kind", r.returncode != 0 and "g2-peers-bf16.json" in r.stderr,
          r.stderr)

print("1..%d" % len(results))
for i, (name, ok, detail) in enumerate(results, 1):
    print("%s %d - %s" % ("ok" if ok else "not ok", i, name))
    if not ok and detail:
        for line in str(detail).splitlines()[:20]:
            print("# " + line)
sys.exit(0 if all(ok for _, ok, _ in results) else 1)
