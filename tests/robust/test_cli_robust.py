#!/usr/bin/env python3
"""tests/robust/test_cli_robust.py - `fusedmoe run` on hostile but legal
input (docs/ROBUSTNESS.md). TAP on stdout.

Usage: test_cli_robust.py FUSEDMOE REFERENCE_MANIFEST

  - a model of 5000 experts (more than any fixed buffer once held) runs and
    passes;
  - a FIFO as --input, as config.json or as a shard is refused at once with
    a message naming it (a FIFO with no writer used to block open() for
    ever: each run has a timeout, so a hang is a failure);
  - a checkpoint whose tensors all sit at odd addresses gives the same
    results as the original, byte for byte.

Runs are hermetic as in tests/cli/test_cli.py: FMOE_* variables dropped,
an empty TOML file, --isolated, the reference plugin given with --plugin.
"""

import atexit
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

EXIT_OK, EXIT_CHECK, EXIT_USAGE, EXIT_CONFIG = range(4)

FUSEDMOE = os.path.abspath(sys.argv[1])
MANIFEST = os.path.abspath(sys.argv[2])
MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "models")
TMP = tempfile.mkdtemp(prefix="fusedmoe-robust-")
atexit.register(shutil.rmtree, TMP, ignore_errors=True)
EMPTY_TOML = os.path.join(TMP, "empty.toml")
with open(EMPTY_TOML, "w", encoding="utf-8") as f:
    f.write("# no settings\n")


class Result:
    def __init__(self, rc, out, err):
        self.rc, self.out, self.err = rc, out, err

    def __repr__(self):
        return "rc=%s\n--- stdout\n%s--- stderr\n%s" % (self.rc, self.out, self.err)


def fmoe(*args, timeout=120):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FMOE_")}
    env["FMOE_CONFIG"] = EMPTY_TOML
    argv = [FUSEDMOE, "--isolated", "--plugin", MANIFEST] + list(args)
    try:
        p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        return Result("timeout after %d s" % timeout, e.stdout or "", e.stderr or "")
    return Result(p.returncode, p.stdout, p.stderr)


class Failure(Exception):
    pass


def check(cond, what, result=None):
    if not cond:
        raise Failure(what + ("\n" + repr(result) if result is not None else ""))


# --- writing small checkpoints ----------------------------------------------------


def bf16_bytes(values):
    """float -> bf16 (round to nearest even), little-endian."""
    out = bytearray()
    for v in values:
        bits = struct.unpack("<I", struct.pack("<f", v))[0]
        bits += 0x7FFF + ((bits >> 16) & 1)
        out += struct.pack("<H", (bits >> 16) & 0xFFFF)
    return bytes(out)


def write_safetensors(path, tensors, pad_to_odd=False):
    """tensors: list of (name, dtype, shape, bytes)."""
    header, offset = {}, 0
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    while pad_to_odd and (8 + len(text)) % 8 != 1:
        text += b" "
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, _, _, data in tensors:
            f.write(data)


def lcg(seed):
    """Deterministic values in [-1, 1) without numpy."""
    state = seed
    while True:
        state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        yield ((state >> 11) / float(1 << 53)) * 2.0 - 1.0


def many_experts_model(experts, hidden=8, inter=8):
    d = os.path.join(TMP, "experts%d" % experts)
    os.mkdir(d)
    config = {
        "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "num_hidden_layers": 1,
        "num_experts": experts, "num_experts_per_tok": 2, "hidden_size": hidden,
        "moe_intermediate_size": inter, "norm_topk_prob": True, "torch_dtype": "bfloat16",
    }
    with open(os.path.join(d, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    rnd = lcg(20261124)
    scale = hidden ** -0.5
    tensors = [("model.layers.0.mlp.gate.weight", "BF16", [experts, hidden],
                bf16_bytes([next(rnd) * scale for _ in range(experts * hidden)]))]
    for e in range(experts):
        for proj, shape in (("gate_proj", [inter, hidden]), ("up_proj", [inter, hidden]), ("down_proj", [hidden, inter])):
            n = shape[0] * shape[1]
            tensors.append(("model.layers.0.mlp.experts.%d.%s.weight" % (e, proj), "BF16", shape,
                            bf16_bytes([next(rnd) * scale for _ in range(n)])))
    write_safetensors(os.path.join(d, "model.safetensors"), tensors)
    return d


# --- the checks --------------------------------------------------------------------

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


@test
def five_thousand_experts():
    d = many_experts_model(5000)
    r = fmoe("run", "--model", d, "--tokens", "4", "--seed", "7", "--json", timeout=300)
    check(r.rc == EXIT_OK, "a 5000-expert model runs (exit 0)", r)
    doc = json.loads(r.out)
    check(doc["result"] == "PASS" and len(doc["layers"]) == 1, "and passes", r)


@test
def fifo_as_input():
    fifo = os.path.join(TMP, "input.fifo")
    os.mkfifo(fifo)
    r = fmoe("run", "--model", os.path.join(MODELS, "bf16"), "--input", fifo, timeout=30)
    check(r.rc == EXIT_CONFIG, "a FIFO as --input is refused (exit 3), not waited on", r)
    check("%s: is a FIFO, not a regular file" % fifo in r.err, "the message names the FIFO", r)


@test
def fifo_as_config_and_shard():
    for special in ("config.json", "model.safetensors"):
        d = os.path.join(TMP, "fifo-" + special)
        shutil.copytree(os.path.join(MODELS, "bf16"), d)
        for name in os.listdir(d):
            if name.endswith(".safetensors") or name == "model.safetensors.index.json":
                os.remove(os.path.join(d, name))
        if special == "model.safetensors":
            shutil.copy(os.path.join(MODELS, "bf16", "config.json"), os.path.join(d, "config.json"))
        else:
            os.remove(os.path.join(d, "config.json"))
        path = os.path.join(d, special)
        os.mkfifo(path)
        r = fmoe("run", "--model", d, timeout=30)
        check(r.rc == EXIT_CONFIG, "a FIFO as %s is refused (exit 3)" % special, r)
        check("%s: is a FIFO, not a regular file" % path in r.err, "the message names it", r)


@test
def odd_addresses_same_results():
    src = os.path.join(MODELS, "bf16")
    d = os.path.join(TMP, "odd-bf16")
    os.mkdir(d)
    for name in os.listdir(src):
        if not name.endswith(".safetensors"):
            shutil.copy(os.path.join(src, name), os.path.join(d, name))
            continue
        with open(os.path.join(src, name), "rb") as f:
            data = f.read()
        n = struct.unpack("<Q", data[:8])[0]
        header = data[8:8 + n]
        while (8 + len(header)) % 8 != 1:
            header += b" "
        with open(os.path.join(d, name), "wb") as f:
            f.write(struct.pack("<Q", len(header)) + header + data[8 + n:])
    inputs = os.path.join(MODELS, "inputs.safetensors")
    a = fmoe("run", "--model", src, "--input", inputs, "--json", "--output", os.path.join(TMP, "a.safetensors"))
    b = fmoe("run", "--model", d, "--input", inputs, "--json", "--output", os.path.join(TMP, "b.safetensors"))
    check(a.rc == EXIT_OK, "the original runs", a)
    check(b.rc == EXIT_OK, "the copy whose tensors are at odd addresses runs", b)
    with open(os.path.join(TMP, "a.safetensors"), "rb") as fa, open(os.path.join(TMP, "b.safetensors"), "rb") as fb:
        check(fa.read() == fb.read(), "and writes the same outputs, byte for byte")


def main():
    print("1..%d" % len(TESTS))
    failed = 0
    for n, fn in enumerate(TESTS, 1):
        try:
            fn()
            print("ok %d - %s" % (n, fn.__name__))
        except Exception as e:  # noqa: BLE001 - every failure is reported the same way
            failed += 1
            print("not ok %d - %s" % (n, fn.__name__))
            for line in str(e).splitlines() or [type(e).__name__]:
                print("# " + line)
        sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
