#!/usr/bin/env python3
"""tests/rocm/check_listing.py FUSEDMOE ROCM_MANIFEST - with every GPU
hidden (HIP/ROCR/CUDA_VISIBLE_DEVICES empty, so no machine's GPUs change
the outcome): `fusedmoe plugins --json` lists rocm as loaded, and
`fusedmoe probe --json` gives its one device report, unavailable, score 0,
reason "no AMD GPU: ..." (the runtime is missing, or sees no device)."""
import json
import os
import subprocess
import sys

exe, manifest = sys.argv[1], sys.argv[2]
env = dict(os.environ, HIP_VISIBLE_DEVICES="", ROCR_VISIBLE_DEVICES="", CUDA_VISIBLE_DEVICES="")


def run_json(*args):
    run = subprocess.run([exe, "--isolated", "--plugin", manifest, *args, "--json"], env=env,
                         capture_output=True, text=True, check=False)
    if run.returncode != 0:
        sys.exit(f"fusedmoe {' '.join(args)} failed ({run.returncode}): {run.stderr}")
    return json.loads(run.stdout)


plugins = [p for p in run_json("plugins").get("plugins", []) if p.get("name") == "rocm"]
if len(plugins) != 1 or plugins[0].get("state") != "loaded":
    sys.exit(f"rocm should be listed once, loaded: {plugins}")
devices = [d for d in run_json("probe").get("devices", []) if d.get("plugin") == "rocm"]
if len(devices) != 1:
    sys.exit(f"expected one (unavailable) rocm device report, got {devices}")
d = devices[0]
if d.get("available") is not False or d.get("score") != 0 or d.get("kind") != "rocm":
    sys.exit(f"with no visible GPU the report must be an unavailable rocm device with score 0: {d}")
if not str(d.get("reason", "")).startswith("no AMD GPU: "):
    sys.exit(f"reason should start with 'no AMD GPU: ': {d.get('reason')!r}")
print(f"ok - rocm loaded; rocm:0 unavailable: {d.get('reason')}")
