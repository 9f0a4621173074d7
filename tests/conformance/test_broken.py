#!/usr/bin/env python3
"""tests/conformance/test_broken.py - `fusedmoe conform` must catch plugins
that are wrong on purpose (broken_plugin.c). TAP on stdout.

Usage: test_broken.py FUSEDMOE REFERENCE_MANIFEST [MANIFEST MODE CASE_ID]...

For each plugin: conform exits 1, its JSON report marks CASE_ID as FAIL, the
text report prints a repro line for it, and that repro line (run as printed)
fails again on its own.
"""

import json
import os
import shlex
import subprocess
import sys
import tempfile

FUSEDMOE = os.path.abspath(sys.argv[1])
REFERENCE = os.path.abspath(sys.argv[2])
TRIPLES = [sys.argv[i:i + 3] for i in range(3, len(sys.argv), 3)]

n = 0
failed = 0


def ok(cond, name, diag=""):
    global n, failed
    n += 1
    if cond:
        print("ok %d - %s" % (n, name))
    else:
        failed += 1
        print("not ok %d - %s" % (n, name))
        for line in diag.splitlines()[-40:]:
            print("# " + line)


def run(argv):
    return subprocess.run(argv, capture_output=True, text=True, timeout=280)


with tempfile.TemporaryDirectory(prefix="fusedmoe-conform-") as tmp:
    for manifest, mode, case_id in TRIPLES:
        label = "%s (%s)" % (os.path.basename(manifest), case_id)
        report = os.path.join(tmp, "report.json")
        argv = [FUSEDMOE, "--isolated", "--plugin", REFERENCE, "conform", "--plugin", os.path.abspath(manifest),
                "--mode", mode, "--seed", "7", "--json", report]
        p = run(argv)
        diag = "$ %s\nrc=%d\n--- stdout\n%s--- stderr\n%s" % (shlex.join(argv), p.returncode, p.stdout, p.stderr)
        ok(p.returncode == 1, "conform exits 1 for " + label, diag)
        try:
            with open(report, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            ok(False, "JSON report for " + label, "%s\n%s" % (e, diag))
            continue
        cases = {c["id"]: c for c in doc["cases"]}
        case = cases.get(case_id)
        ok(case is not None and case["status"] == "FAIL", "%s is FAIL in the JSON report" % label,
           json.dumps(case) if case else "no such case; failing: %s\n%s" %
           ([c for c in cases if cases[c]["status"] == "FAIL"], diag))
        ok(doc["result"] == "FAIL" and doc["totals"]["fail"] >= 1, "report result FAIL for " + label, diag)
        repro = None
        for line in p.stdout.splitlines():
            if line.strip().startswith("repro:") and ("--filter " + case_id) in line.replace("'", ""):
                repro = line.split("repro:", 1)[1].strip()
        ok(repro is not None, "repro line printed for " + label, diag)
        if repro and mode == "test":
            words = shlex.split(repro)
            words[0] = FUSEDMOE
            q = run(words)
            ok(q.returncode == 1 and ("FAIL" in q.stdout) and case_id in q.stdout,
               "the repro line fails again on its own for " + label,
               "$ %s\nrc=%d\n%s%s" % (repro, q.returncode, q.stdout, q.stderr))

print("1..%d" % n)
sys.exit(1 if failed else 0)
