#!/usr/bin/env python3
"""Compile one CUDA source for sm_90a with ptxas's report (-Xptxas -v) and
fail where ptxas says it made a kernel slower than its source asks:

- wgmma performance notes (C7510-C7519): wgmma instructions serialized
  (each followed by a full wait), or waits injected because an accumulator
  was read while its wgmma may still run. The kernel stays correct, so only
  the report shows it; the overlapped kinds of bench/cuda/RESULTS.md at 5ddad69,
  "Prefill: ping-pong and overlapped GEMM kinds" met both.
- with --no-spills, any kernel that spills registers to local memory,
  except one named by --allow-spill=NAME:STORES:LOADS (a substring of its
  symbol), a spill chosen by measurement: it may spill up to that many
  bytes, and more fails (the choice was measured at that size);
- with --max-registers=N, any kernel using more than N registers a thread
  (a launch of that many threads would fail: plugins/megamoe's SM100 kernel
  runs 288 threads, one CTA an SM, so at most 224);
- --arch=sm_XXa compiles for that target instead of sm_90a.

This needs no GPU, so CI runs it (meson test check_ptxas_*, suite cuda).

    check_ptxas.py [--no-spills] [--allow-spill=NAME:STORES:LOADS]... [--max-registers=N] [--arch=sm_XXa]
                   NVCC SOURCE [NVCC_ARGS...]
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

NOTE = re.compile(r"\((C751\d)\)")
ENTRY = re.compile(r"Function properties for (\S+)")
SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
REGS = re.compile(r"Used (\d+) registers")


def readable(symbol):
    """The kernel's C++ name where c++filt is installed, else the symbol."""
    tool = shutil.which("c++filt")
    if not tool or not symbol:
        return symbol
    out = subprocess.run([tool, symbol], capture_output=True, text=True)
    return out.stdout.strip() or symbol


def main(argv):
    no_spills = "--no-spills" in argv
    allowed = []  # (symbol substring, stores, loads)
    for a in argv:
        if a.startswith("--allow-spill="):
            name, stores, loads = a[len("--allow-spill="):].rsplit(":", 2)
            allowed.append((name, int(stores), int(loads)))
    max_regs = next((int(a.split("=", 1)[1]) for a in argv if a.startswith("--max-registers=")), None)
    arch = next((a.split("=", 1)[1] for a in argv if a.startswith("--arch=")), "sm_90a")
    args = [a for a in argv if a != "--no-spills" and not a.startswith(("--allow-spill=", "--max-registers=", "--arch="))]
    if len(args) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    nvcc, source, extra = args[0], args[1], args[2:]
    with tempfile.TemporaryDirectory() as tmp:
        # --split-compile=0: cicc and ptxas work on the kernels in parallel, one thread a
        # CPU (wq_ring.cu: 250 s on one core, 148 s on two). The report is the same, per
        # kernel, as one thread's (gg_w4_swap.cu compared line by line).
        cmd = [nvcc, "-std=c++17", "-O3", f"-gencode=arch=compute_{arch[3:]},code={arch}", "-Xptxas", "-v",
               "--split-compile=0", *extra, "-c", source, "-o", os.path.join(tmp, "x.o")]
        run = subprocess.run(cmd, capture_output=True, text=True)
    report = run.stdout + run.stderr
    if run.returncode != 0:
        print(report)
        print(f"FAIL: nvcc exited {run.returncode}: {' '.join(cmd)}")
        return 1
    problems = []
    kernels = 0
    current = None
    for line in report.splitlines():
        note = NOTE.search(line)
        if note:
            problems.append(f"{note.group(1)}: {line.split(': ', 1)[-1].strip()}")
        entry = ENTRY.search(line)
        if entry:
            current = entry.group(1)
            kernels += 1
        regs = REGS.search(line)
        if regs and max_regs is not None and int(regs.group(1)) > max_regs:
            problems.append(f"uses {regs.group(1)} registers a thread, more than {max_regs}: {readable(current)}")
        spill = SPILL.search(line)
        if spill and no_spills and (int(spill.group(1)) or int(spill.group(2))):
            stores, loads = int(spill.group(1)), int(spill.group(2))
            bound = next(((s_, l_) for n, s_, l_ in allowed if current and n in current), None)
            if bound is None or stores > bound[0] or loads > bound[1]:
                within = "" if bound is None else f" (allowed: {bound[0]} B stored, {bound[1]} B loaded)"
                problems.append(f"spills {stores} B stored, {loads} B loaded{within}: {readable(current)}")
    if kernels == 0:
        print(report)
        print(f"FAIL: ptxas reported no kernel for {source} (did -Xptxas -v change its output?)")
        return 1
    name = os.path.basename(source)
    if problems:
        for p in problems:
            print(f"FAIL {name}: {p}")
        return 1
    spills = ", no spills" + (" beyond those allowed" if allowed else "")
    print(f"PASS {name}: {kernels} kernels, no wgmma performance notes" + (spills if no_spills else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
