#!/usr/bin/env python3
"""tests/conformance/conform_device.py - `fusedmoe conform` for a plugin that
needs a device this machine may not have (a GPU backend), skipped when it
has none.

Usage: conform_device.py FUSEDMOE REFERENCE_MANIFEST PLUGIN_MANIFEST NAME

Asks `fusedmoe probe --json` first: when plugin NAME reports no available
device, prints why and exits 77 (meson's SKIP) at the cost of one probe;
otherwise runs conform on every mode and exits with its code.
"""

import json
import os
import subprocess
import sys

SKIP = 77

if len(sys.argv) != 5:
    sys.exit("usage: conform_device.py FUSEDMOE REFERENCE_MANIFEST PLUGIN_MANIFEST NAME")
fusedmoe, reference, manifest = (os.path.abspath(a) for a in sys.argv[1:4])
name = sys.argv[4]

probe = subprocess.run([fusedmoe, "--isolated", "--plugin", manifest, "probe", "--json"], capture_output=True, text=True,
                       timeout=120)
if probe.returncode != 0:
    sys.exit("fusedmoe probe failed (exit %d): %s" % (probe.returncode, probe.stderr.strip()))
devices = [d for d in json.loads(probe.stdout)["devices"] if d["plugin"] == name]
if not any(d["available"] for d in devices):
    why = "; ".join("%s: %s" % (d["device"], d["reason"]) for d in devices) or "it reported no device"
    print("SKIP: plugin %s has no available device here (%s)" % (name, why))
    sys.exit(SKIP)
sys.stdout.flush()
os.execv(fusedmoe, [fusedmoe, "--isolated", "--plugin", reference, "conform", "--plugin", manifest])
