#!/usr/bin/env python3
"""tests/conformance/test_tolerance.py - a manifest's [[tolerance]] is applied
by `fusedmoe conform`, and only as far as it goes. TAP on stdout.

Usage: test_tolerance.py FUSEDMOE REFERENCE_MANIFEST TOLERATED_MANIFEST

The plugin (broken_plugin.c, BROKEN_ONE_ELEMENT) puts one element of every
output of >= 2048 elements 3x past the suite's bound. Its manifest allows a
mismatch of 0.001: every test case passes, the large ones with a note that
names the count, the reason and the link; the small ones (not perturbed)
without it. The same library under a manifest without the entry is caught
by test_broken.py.
"""

import json
import os
import subprocess
import sys
import tempfile

FUSEDMOE, REFERENCE, TOLERATED = (os.path.abspath(a) for a in sys.argv[1:4])
CASE = "test/bf16/tokens:m64.e8.k2.h128.i64.silu.gated"  # 8192 elements: perturbed
SMALL = "test/bf16/tokens:m1.e8.k2.h128.i64.silu.gated"  # 128 elements: exact

n = 0
failed = 0


def ok(cond, name, diag=""):
    global n, failed
    n += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", n, name))
    if not cond:
        failed += 1
        for line in diag.splitlines()[-40:]:
            print("# " + line)


with tempfile.TemporaryDirectory(prefix="fusedmoe-tolerance-") as tmp:
    report = os.path.join(tmp, "report.json")
    # The token-count cases: one shard each, so one element is off (sharded
    # cases sum several shards' perturbed element).
    argv = [FUSEDMOE, "--isolated", "--plugin", REFERENCE, "conform", "--plugin", TOLERATED, "--mode", "test",
            "--scheme", "bf16", "--filter", "test/bf16/tokens:", "--seed", "7", "--json", report]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=280)
    diag = "$ %s\nrc=%d\n--- stdout\n%s--- stderr\n%s" % (" ".join(argv), p.returncode, p.stdout, p.stderr)
    ok(p.returncode == 0, "conform passes the plugin whose manifest declares the mismatch", diag)
    with open(report, encoding="utf-8") as f:
        cases = {c["id"]: c for c in json.load(f)["cases"]}
    case = cases.get(CASE)
    ok(case is not None and case["status"] == "PASS", CASE + " passes", json.dumps(case))
    detail = case["detail"] if case else ""
    ok("1 of 8192 element(s) outside" in detail and "within the manifest's mismatch 0.001" in detail,
       "its note gives the count and the allowance", detail)
    ok("one element of each output is off on purpose" in detail and
       "https://example.org/fusedmoe/tests/tolerance" in detail, "its note gives the reason and the link", detail)
    small = cases.get(SMALL)
    ok(small is not None and small["status"] == "PASS" and "manifest" not in small["detail"],
       SMALL + " passes without the allowance (nothing perturbed)", json.dumps(small))
    used = [c for c in cases.values() if "within the manifest's mismatch" in c.get("detail", "")]
    ok(len(used) > 0 and all(c["status"] == "PASS" for c in used), "every case that used it passed",
       json.dumps(used[:3]))

print("1..%d" % n)
sys.exit(1 if failed else 0)
