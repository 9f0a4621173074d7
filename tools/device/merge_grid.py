#!/usr/bin/env python3
"""Merge the two device calls of a grid record (tools/device/run_grid.sh) into one.

The whole grid does not fit one device call, so it runs as two (for example
M = 1,16 and M = 128,1024,8192), each with its own TAG. This writes
OUT/TAG-{cuda,peers,vllm}-SCHEME.json: the first call's header, the points of
both calls in order, and the second call's command, date, GEMM peaks and copy
and read rates as `<key>_b` (each call measured its own floor, and the points keep the
floor of the call that timed them). tools/bench_plot.py then reads OUT and TAG.
Every kind the first call wrote (cuda-SCHEME, peers-SCHEME, vllm-SCHEME: run_grid.sh's SCHEMES)
is merged; the second call must have written the same kinds.

Usage: merge_grid.py [--note TEXT] OUT TAG FIRST_PREFIX SECOND_PREFIX
where FIRST_PREFIX is e.g. call1/grid-a (the files are FIRST_PREFIX-cuda-bf16.json, ...).
"""
import argparse
import glob
import json
import os
import sys

# Header keys that belong to one call: the second call's are kept beside the first's.
PER_CALL = ("command", "date", "gemm_peak_tflops", "peak_tflops", "copy_GBps", "device")


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit("merge_grid: %s: %s" % (path, e))
    if not isinstance(doc, dict) or not isinstance(doc.get("points"), list):
        sys.exit("merge_grid: %s: expected a JSON object with a 'points' list" % path)
    return doc


def kinds_of(prefix):
    """The kinds (cuda-bf16, peers-fp8, vllm-fp8block, cuda-mxfp4, ...) a call wrote under prefix."""
    kinds = []
    for path in sorted(glob.glob(glob.escape(prefix) + "-*.json")):
        kind = path[len(prefix) + 1:-len(".json")]
        if kind.startswith(("cuda-", "peers-", "vllm-")):
            kinds.append(kind)
    return kinds


def merge(first, second, note):
    out = {k: v for k, v in first.items() if k != "points"}
    if note:
        out["note"] = note
    for key in PER_CALL:
        if key in second:
            out[key + "_b"] = second[key]
    out["points"] = first["points"] + second["points"]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--note", help="what the record is (build, calls); stored as 'note'")
    ap.add_argument("out")
    ap.add_argument("tag")
    ap.add_argument("first")
    ap.add_argument("second")
    args = ap.parse_args()
    kinds = kinds_of(args.first)
    if not kinds:
        sys.exit("merge_grid: no %s-cuda-*.json, %s-peers-*.json or %s-vllm-*.json files" % ((args.first,) * 3))
    calls = [(kind, load("%s-%s.json" % (args.first, kind)), load("%s-%s.json" % (args.second, kind)))
             for kind in kinds]
    os.makedirs(args.out, exist_ok=True)
    for kind, first, second in calls:
        path = os.path.join(args.out, "%s-%s.json" % (args.tag, kind))
        with open(path, "w", encoding="utf-8") as f:
            json.dump(merge(first, second, args.note), f, indent=2)
            f.write("\n")
        print("%s: %d + %d points" % (path, len(first["points"]), len(second["points"])))


if __name__ == "__main__":
    main()
