#!/usr/bin/env python3
"""tests/cli/test_cli.py - drives the built `fusedmoe` binary and checks what it
prints and how it exits. TAP on stdout.

Usage: test_cli.py FUSEDMOE REFERENCE_MANIFEST SKEWED_MANIFEST DEVICE_PLUGIN

SKEWED_MANIFEST is tests/cli/skewed_plugin.c, a backend that is wrong on
purpose (its `mode` option picks how), so `run` can be seen to fail.

Each check runs the binary in a clean environment: FMOE_* variables from the
caller are dropped, FMOE_CONFIG points at an empty TOML file and --isolated
keeps the plugin search away from the install directory and the library's
own, so neither the installed configuration nor installed plugins can change
the outcome.
The reference plugin is given with --plugin (or FMOE_PLUGIN_PATH where that
is what is being tested).
"""

import json
import os
import shlex
import subprocess
import sys
import atexit
import shutil
import tempfile

EXIT_OK, EXIT_CHECK, EXIT_USAGE, EXIT_CONFIG, EXIT_NO_BACKEND, EXIT_INTERNAL = range(6)

LAYER_FLAGS = [
    "--experts", "--top-k", "--hidden", "--intermediate", "--activation", "--no-gated", "--bias",
    "--swiglu-alpha", "--swiglu-limit", "--dtype", "--scoring", "--renormalize", "--groups",
    "--topk-group", "--correction-bias", "--scaling-factor", "--weight-on-input", "--tp", "--tp-rank",
    "--ep", "--ep-rank", "--placement", "--eplb", "--redundant", "--max-tokens",
]

MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "models")
# Tiny random models saved by Hugging Face transformers itself, with its own
# router and experts outputs (tools/gen_hf_fixtures.py, tests/data/hf_models).
HF_MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "hf_models")
FUSEDMOE = os.path.abspath(sys.argv[1])
MANIFEST = os.path.abspath(sys.argv[2])
SKEWED = os.path.abspath(sys.argv[3])
# A pretend accelerator (tests/plugins/fixture_plugin.c, FIXTURE_DEVICE): its
# "device memory" only passes its own copies, so a run through it proves the
# tool moved every tensor to the device and back.
DEVICE = os.path.abspath(sys.argv[4])
TMP = tempfile.mkdtemp(prefix="fusedmoe-cli-test-")
atexit.register(shutil.rmtree, TMP, ignore_errors=True)


def write(name, text):
    path = os.path.join(TMP, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


EMPTY_TOML = write("empty.toml", "# no settings\n")
MONOLITHIC_TOML = write("monolithic.toml", "[plugins.reference.options]\nmonolithic = true\n")
DISABLED_TOML = write("disabled.toml", "[plugins.reference]\nenabled = false\n")
BAD_KEY_TOML = write("bad_key.toml", "[select]\nfallbak = true\n")
BAD_SYNTAX_TOML = write("bad_syntax.toml", "[log]\nlevel = \"warn\n")
SKEWED_TOML = {mode: write("skewed_%s.toml" % mode, "[plugins.skewed.options]\nmode = \"%s\"\n" % mode)
               for mode in ["zero", "fail_finalize", "fail_apply", "nan"]}


class Result:
    def __init__(self, proc):
        self.rc = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr

    def json(self):
        return json.loads(self.out)

    def __repr__(self):
        return "rc=%d\n--- stdout\n%s--- stderr\n%s" % (self.rc, self.out, self.err)


def fmoe(*args, env=None, plugin=True, config=EMPTY_TOML, skewed=False):
    """Run the tool; `plugin` adds --plugin MANIFEST before the command,
    `skewed` the wrong-on-purpose backend too."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("FMOE_")}
    e["FMOE_CONFIG"] = config
    e.update(env or {})
    # --isolated: plugins installed on this machine (say by tools/run.sh into
    # _install/, which the build's library would otherwise search) must not
    # change what these checks see.
    argv = [FUSEDMOE, "--isolated"] + (["--plugin", MANIFEST] if plugin else []) + (["--plugin", SKEWED] if skewed else [])
    argv += list(args)
    proc = subprocess.run(argv, capture_output=True, text=True, env=e, timeout=300)
    return Result(proc)


# --- a small TAP harness ------------------------------------------------------

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


class Failure(Exception):
    pass


def check(cond, what, result=None):
    if not cond:
        raise Failure(what + ("\n" + repr(result) if result is not None else ""))


def expect_rc(r, rc, what):
    check(r.rc == rc, "%s: expected exit %d, got %d" % (what, rc, r.rc), r)


# --- help, version, usage errors ---------------------------------------------------------


@test
def top_level_help():
    r = fmoe("--help", plugin=False)
    expect_rc(r, EXIT_OK, "--help")
    for word in ["plugins", "probe", "explain", "run", "--config", "--plugin", "--log", "--version"]:
        check(word in r.out, "--help mentions " + word, r)
    for code in range(6):
        check("  %d  " % code in r.out, "--help documents exit code %d" % code, r)


@test
def version():
    r = fmoe("--version", plugin=False)
    expect_rc(r, EXIT_OK, "--version")
    check(r.out.startswith("fusedmoe 0.") and "plugin ABI 1." in r.out, "--version text", r)


@test
def command_help():
    wanted = {
        "plugins": ["--json"],
        "probe": ["--json"],
        "explain": ["--scheme", "--json"] + LAYER_FLAGS,
        "run": ["--scheme", "--tokens", "--seed", "--backend", "--logits", "--json"] + LAYER_FLAGS,
    }
    for cmd, flags in wanted.items():
        for argv in ([cmd, "--help"], ["help", cmd]):
            r = fmoe(*argv, plugin=False)
            expect_rc(r, EXIT_OK, " ".join(argv))
            for flag in flags:
                check(flag in r.out, "%s mentions %s" % (" ".join(argv), flag), r)
            width = max(len(line) for line in r.out.splitlines())
            check(width <= 100, "%s fits 100 columns (widest line %d)" % (" ".join(argv), width), r)


@test
def usage_errors():
    cases = [
        ["frobnicate"],
        [],
        ["--frobnicate", "plugins"],
        ["plugins", "--frobnicate"],
        ["probe", "--frobnicate"],
        ["explain", "--frobnicate"],
        ["run", "--frobnicate"],
        ["run", "--json=1"],
        ["--config"],
        ["explain", "--scheme"],
        ["run", "--activation", "swish"],
        ["run", "--scoring", "maxout"],
        ["run", "--placement", "random"],
        ["run", "--dtype", "f12"],
    ]
    for argv in cases:
        r = fmoe(*argv)
        expect_rc(r, EXIT_USAGE, " ".join(argv) or "(no command)")
        check(r.err.startswith("fusedmoe: "), "usage error on stderr with prefix", r)


@test
def strict_numbers():
    bad = ["8x", "-1", "+1", " 8", "8 ", "", "0x10", "1e3", "4294967296", "99999999999999999999999"]
    for flag in ["--experts", "--hidden", "--tp", "--max-tokens", "--redundant"]:
        for value in bad:
            for cmd in ["run", "explain"]:
                r = fmoe(cmd, flag, value)
                expect_rc(r, EXIT_USAGE, "%s %s %r" % (cmd, flag, value))
                check(flag in r.err, "the error names %s" % flag, r)
    for flag in ["--swiglu-alpha", "--swiglu-limit", "--scaling-factor"]:
        for value in ["nan", "inf", "-inf", "1e999", "2.5x", "", "x"]:
            r = fmoe("explain", flag, value)
            expect_rc(r, EXIT_USAGE, "explain %s %r" % (flag, value))
            check(flag in r.err, "the error names %s" % flag, r)
    for argv in (["run", "--tokens", "0"], ["run", "--tokens", "-5"], ["run", "--seed", "-1"],
                 ["run", "--seed", "18446744073709551616"]):
        r = fmoe(*argv)
        expect_rc(r, EXIT_USAGE, " ".join(argv))
        check(argv[1] in r.err, "the error names " + argv[1], r)
    # Both spellings of a value are accepted.
    r = fmoe("explain", "--experts=16", "--top-k", "4", "--json")
    expect_rc(r, EXIT_OK, "--experts=16 --top-k 4")
    check(r.json()["layer"]["num_experts"] == 16 and r.json()["layer"]["top_k"] == 4, "--flag=value", r)


# --- plugins and probe ----------------------------------------------------------------


def reference_entry(doc):
    entries = [p for p in doc["plugins"] if p["name"] == "reference"]
    check(len(entries) == 1, "exactly one reference plugin listed: %r" % doc)
    return entries[0]


@test
def plugins_json_with_plugin_flag():
    r = fmoe("plugins", "--json")
    expect_rc(r, EXIT_OK, "plugins --json")
    doc = r.json()
    check(doc["config"] == EMPTY_TOML, "config path reported", r)
    p = reference_entry(doc)
    check(p["state"] == "loaded", "reference is loaded", r)
    check(p["reason"] is None, "no reason when loaded", r)
    check(p["abi_major"] == 1 and p["abi"].startswith("1."), "ABI 1.x", r)
    check(os.path.realpath(p["manifest"]) == os.path.realpath(MANIFEST), "manifest path", r)
    check(os.path.basename(p["path"]) == "libfmoe-reference.so", "library path", r)
    check({"f32", "bf16", "f16"} <= set(p["schemes"]), "schemes listed", r)
    check(p["version"] and p["vendor"], "version and vendor", r)


@test
def plugins_verbose_lists_options():
    r = fmoe("plugins", "--verbose")
    expect_rc(r, EXIT_OK, "plugins --verbose")
    check("    option   monolithic = false (default; bool true|false, default false): " in r.out,
          "the reference plugin's bool option, its value, source, domain and default", r)
    check("    option   nvfp4_globals = quant (default; enum quant|dequant, default quant): " in r.out,
          "the enum option", r)
    r = fmoe("plugins", "--json", env={"FMOE_OPTIONS": "reference.nvfp4_globals=dequant"})
    opts = {o["name"]: o for o in reference_entry(r.json())["options"]}
    check(opts["nvfp4_globals"]["value"] == "dequant" and opts["nvfp4_globals"]["source"] == "environment",
          "FMOE_OPTIONS overrides, and says so", r)
    check(opts["monolithic"]["value"] == "false" and opts["monolithic"]["type"] == "bool", "defaults in JSON", r)


@test
def plugins_bad_option_fails_the_plugin_naming_it():
    cfg = os.path.join(TMP, "bad-option.toml")
    with open(cfg, "w") as f:
        f.write("[plugins.reference.options]\nmonolithic = \"sometimes\"\n")
    r = fmoe("plugins", "--json", config=cfg)
    p = reference_entry(r.json())
    check(p["state"] == "failed", "a bad value fails the plugin", r)
    check(p["reason"] == cfg + " [plugins.reference.options]: option 'monolithic' of plugin 'reference' = "
          "\"sometimes\": expected a boolean (true or false)", "the reason names file, option and domain", r)


@test
def plugins_json_with_plugin_path():
    r = fmoe("plugins", "--json", plugin=False, env={"FMOE_PLUGIN_PATH": os.path.dirname(MANIFEST)})
    expect_rc(r, EXIT_OK, "plugins --json via FMOE_PLUGIN_PATH")
    check(reference_entry(r.json())["state"] == "loaded", "reference loaded from FMOE_PLUGIN_PATH", r)


@test
def plugins_table():
    r = fmoe("plugins")
    expect_rc(r, EXIT_OK, "plugins")
    lines = r.out.splitlines()
    header = [l for l in lines if l.startswith("NAME")]
    check(header and header[0].split() == ["NAME", "VERSION", "ABI", "STATE", "SCHEMES"], "table header", r)
    row = [l for l in lines if l.startswith("reference ")]
    check(row and row[0].split()[3] == "loaded", "reference row says loaded", r)
    # Columns line up: every cell of the row starts where its header does.
    for title, value in [("STATE", "loaded"), ("SCHEMES", "f32")]:
        check(header[0].index(title) == row[0].index(value), "column %s aligned" % title, r)
    check(any(l.startswith("    manifest: ") for l in lines), "manifest on an indented line", r)


@test
def plugins_disabled_shows_reason():
    r = fmoe("plugins", "--json", config=DISABLED_TOML)
    expect_rc(r, EXIT_OK, "plugins --json with the reference disabled")
    p = reference_entry(r.json())
    check(p["state"] == "disabled" and p["reason"], "disabled with a reason", r)
    t = fmoe("plugins", config=DISABLED_TOML)
    expect_rc(t, EXIT_OK, "plugins with the reference disabled")
    check("disabled" in t.out and "    reason:   " + p["reason"] in t.out, "reason on its own indented line", t)


@test
def probe_json():
    r = fmoe("probe", "--json")
    expect_rc(r, EXIT_OK, "probe --json")
    devs = [d for d in r.json()["devices"] if d["plugin"] == "reference"]
    check(devs, "the reference reported a device", r)
    d = devs[0]
    check(d["kind"] == "cpu" and d["device"] == "cpu:0" and d["available"] is True, "a usable cpu:0", r)
    check(d["score"] >= 1 and d["name"], "score and name", r)
    for key in ["arch", "id", "driver", "memory_bytes", "reason", "index"]:
        check(key in d, "device has " + key, r)
    t = fmoe("probe")
    expect_rc(t, EXIT_OK, "probe")
    check("cpu:0" in t.out and "PLUGIN" in t.out, "probe table", t)


# --- explain --------------------------------------------------------------------------


@test
def explain_selects_reference():
    r = fmoe("explain", "--scheme", "bf16")
    expect_rc(r, EXIT_OK, "explain --scheme bf16")
    check("selected: reference/" in r.out, "reference selected", r)
    j = fmoe("explain", "--scheme", "bf16", "--json")
    expect_rc(j, EXIT_OK, "explain --json")
    doc = j.json()
    check(doc["scheme"] == "bf16" and doc["selected"]["plugin"] == "reference", "selected in JSON", j)
    check(doc["candidates"][doc["chosen"]]["verdict"] == "selected", "chosen candidate's verdict", j)
    check(doc["summary"], "summary present", j)


@test
def explain_no_backend():
    scheme = "fp8e4m3fnuz:channel/fp8e4m3fnuz:token:dynamic"  # a ROCm scheme: the reference does not serve it
    j = fmoe("explain", "--scheme", scheme, "--json")
    expect_rc(j, EXIT_NO_BACKEND, "explain fnuz --json")
    doc = j.json()
    check(doc["chosen"] is None and doc["selected"] is None, "nothing chosen", j)
    ref = [c for c in doc["candidates"] if c["plugin"] == "reference"]
    check(ref and ref[0]["verdict"] == "refused" and ref[0]["reason"], "reference refused with a reason", j)
    r = fmoe("explain", "--scheme", scheme)
    expect_rc(r, EXIT_NO_BACKEND, "explain fnuz")
    check(ref[0]["reason"] in r.out, "the refusal reason is printed", r)
    check("refused" in r.out, "verdict printed", r)


@test
def explain_replay_round_trip():
    """The replay line the library prints parses back to the same layer."""
    flags = ["--experts", "16", "--top-k", "4", "--hidden", "128", "--intermediate", "256",
             "--activation", "swigluoai", "--bias", "--swiglu-alpha", "1.5", "--swiglu-limit", "7",
             "--dtype", "f16", "--scoring", "sigmoid", "--renormalize", "--groups", "4", "--topk-group", "2",
             "--correction-bias", "--scaling-factor", "2.5", "--ep", "4", "--ep-rank", "3",
             "--placement", "round_robin", "--eplb", "--redundant", "4", "--max-tokens", "1024"]
    r = fmoe("explain", "--json", *flags)
    expect_rc(r, EXIT_OK, "explain with every flag")
    first = r.json()["layer"]
    again = fmoe("explain", "--json", *shlex.split(first["args"]))
    expect_rc(again, EXIT_OK, "explain with the replay flags")
    check(again.json()["layer"] == first, "replay gives the same layer", again)
    for flag in ["--activation swigluoai", "--groups 4 --topk-group 2", "--eplb --redundant 4", "--ep 4 --ep-rank 3"]:
        check(flag in first["args"], "replay line has " + flag, r)


# --- run ----------------------------------------------------------------------------


RUN_CONFIGS = [
    [],
    ["--dtype", "f32"],
    ["--dtype", "f16"],
    ["--activation", "gelu", "--no-gated", "--bias"],
    ["--scoring", "sigmoid", "--groups", "4", "--topk-group", "2", "--correction-bias", "--renormalize",
     "--scaling-factor", "2.5"],
    ["--ep", "2", "--ep-rank", "1"],
    ["--tp", "2", "--tp-rank", "0"],
    ["--eplb", "--redundant", "3"],
    ["--ep", "3", "--ep-rank", "2", "--eplb", "--redundant", "4", "--placement", "round_robin"],
    ["--experts", "10", "--ep", "4", "--ep-rank", "1", "--activation", "relu2"],
    ["--top-k", "1", "--weight-on-input", "--tokens", "7"],
]


@test
def run_passes():
    for flags in RUN_CONFIGS:
        r = fmoe("run", "--seed", "1234", *flags)
        expect_rc(r, EXIT_OK, "run " + " ".join(flags))
        for word in ["seed:", "1234", "rerun:", "backend:", "reference/", "why:", "max abs:", "max rel:",
                     "nmse:", "tokens/s", "PASS"]:
            check(word in r.out, "run output has %r" % word, r)


@test
def run_json_and_rerun():
    # A config path and a glob that need shell quoting in the rerun line.
    odd = write("odd 'name'.toml", "[select]\nfallback = false\n")
    r = fmoe("--config", odd, "run", "--seed", "99", "--json", "--ep", "2", "--ep-rank", "1", "--bias",
             "--backend", "ref*")
    expect_rc(r, EXIT_OK, "run --json")
    doc = r.json()
    check(doc["pass"] is True and doc["result"] == "PASS" and doc["seed"] == 99, "pass, seed", r)
    check(doc["errors"]["nonfinite"] == 0 and doc["errors"]["elements"] == 64 * 256, "error counts", r)
    check(doc["selection"]["selected"]["plugin"] == "reference", "selection in JSON", r)
    check(doc["timing"]["runs"] >= 3 and doc["timing"]["tokens_per_s"] > 0, "timing", r)
    check(doc["tolerance"]["dtype"] == "bf16", "bf16 tolerance", r)
    # The rerun line repeats the run exactly.
    argv = shlex.split(doc["rerun"])
    check(argv[0] == "fusedmoe" and "--seed" in argv and "99" in argv, "rerun line", r)
    check(odd in argv and "ref*" in argv, "quoted words survive the shell", r)
    again = fmoe(*(argv[1:] + ["--json"]), plugin=False)
    expect_rc(again, EXIT_OK, "the rerun line")
    check(again.json()["errors"] == doc["errors"] and again.json()["layer"] == doc["layer"],
          "the rerun gives the same result", again)


@test
def run_fresh_seed_is_printed():
    r = fmoe("run", "--json", "--tokens", "4")
    expect_rc(r, EXIT_OK, "run without --seed")
    check(isinstance(r.json()["seed"], int), "the seed is reported", r)
    check("--seed %d" % r.json()["seed"] in r.json()["rerun"], "and is in the rerun line", r)


@test
def run_logits_monolithic():
    r = fmoe("run", "--seed", "5", "--logits", "--json", "--eplb", "--redundant", "3", config=MONOLITHIC_TOML)
    expect_rc(r, EXIT_OK, "run --logits with the monolithic reference")
    doc = r.json()
    check(doc["routing"] == "logits" and "monolithic" in doc["selection"]["selected"]["method"],
          "the monolithic method served, routing from logits", r)
    r2 = fmoe("run", "--seed", "5", "--logits", "--correction-bias", "--scoring", "sigmoid", config=MONOLITHIC_TOML)
    expect_rc(r2, EXIT_OK, "run --logits --correction-bias, monolithic")
    # Top-k routing cannot be given to a backend that routes itself.
    r3 = fmoe("run", "--seed", "5", config=MONOLITHIC_TOML)
    check(r3.rc not in (EXIT_OK, EXIT_CHECK), "topk routing refused by a monolithic backend", r3)
    check("--logits" in r3.err, "the error suggests --logits", r3)


# Quantized schemes `run` synthesizes (cli/synth): each family once, with a
# layer config that exercises its loading (TP narrowing of group scales and
# g_idx, EP with per-expert static scales, biases, non-gated).
RUN_QUANTIZED = [
    ("fp8e4m3:tensor/fp8e4m3:tensor", ["--ep", "2", "--ep-rank", "1"]),
    ("fp8e4m3:tensor/fp8e4m3:tensor:dynamic", []),
    ("fp8e4m3:channel/fp8e4m3:token:dynamic", ["--bias"]),
    ("fp8e4m3:block128x128:scale-ue8m0/fp8e4m3:group128:dynamic", ["--intermediate", "256", "--tp", "2",
                                                                   "--tp-rank", "1"]),
    ("fp8e4m3:group32:scale-ue8m0/fp8e4m3:group32:dynamic", []),
    ("fp4:group32:scale-ue8m0/fp4:group32:dynamic", ["--no-gated", "--activation", "relu2"]),
    ("fp4:tgroup16:scale-fp8e4m3", ["--eplb", "--redundant", "3"]),
    ("fp4:tgroup16:scale-fp8e4m3/fp4:tgroup16:dynamic", ["--bias"]),
    ("int4:group32:actorder", ["--tp", "2", "--tp-rank", "1"]),
    ("int4:group32:asym", ["--dtype", "f16"]),
    ("int8:channel", []),
    ("int8:tensor/int8:token:dynamic", []),
    ("int4:group128/fp8e4m3:token:dynamic", []),
    ("int4:channel/int8:token:dynamic:asym", ["--dtype", "f32"]),
    ("int4:group32:scale-bf16/int8:token:dynamic:asym", ["--top-k", "1", "--weight-on-input"]),
]


@test
def run_quantized_schemes():
    for key, flags in RUN_QUANTIZED:
        argv = ["run", "--scheme", key, "--seed", "21", "--tokens", "16", "--intermediate", "128", "--json"] + flags
        r = fmoe(*argv)
        expect_rc(r, EXIT_OK, "run " + " ".join(argv[1:]))
        doc = r.json()
        check(doc["scheme"] == key and doc["pass"] is True, "%s: scheme and PASS" % key, r)
        # The selected backend is the reference here: identical tensors give identical outputs.
        check(doc["errors"]["nmse"] == 0 and doc["errors"]["nonfinite"] == 0, "%s: identical outputs" % key, r)


@test
def run_quantized_rerun_is_identical():
    key = "int4:group32:actorder"
    argv = ["run", "--scheme", key, "--seed", "8", "--tokens", "8", "--intermediate", "128", "--json", "--logits"]
    a = fmoe(*argv, config=MONOLITHIC_TOML)
    expect_rc(a, EXIT_OK, "run %s on the monolithic reference" % key)
    again = fmoe(*(shlex.split(a.json()["rerun"])[1:] + ["--json"]), plugin=False, config=MONOLITHIC_TOML)
    expect_rc(again, EXIT_OK, "its rerun line")
    check(again.json()["errors"] == a.json()["errors"], "the rerun synthesizes the same layer", again)


@test
def run_quantized_size_rule():
    # The reference refuses an NVFP4 layer whose H is not a multiple of 16; run says why.
    r = fmoe("run", "--scheme", "fp4:tgroup16:scale-fp8e4m3", "--hidden", "40", "--intermediate", "128")
    check(r.rc not in (EXIT_OK, EXIT_CHECK), "NVFP4 with H = 40 is refused", r)
    check("divisible by the scale group of 16" in r.err, "the size rule is named", r)


@test
def conform_quantized_schemes_have_generators():
    j = os.path.join(TMP, "conform_quant.json")
    r = fmoe("conform", "--plugin", MANIFEST, "--mode", "test", "--scheme", "int4:*", "--filter", "tokens:m16",
             "--seed", "3", "--json", j)
    expect_rc(r, EXIT_OK, "conform --scheme 'int4:*'")
    with open(j, encoding="utf-8") as f:
        doc = json.load(f)
    ids = [c["id"] for c in doc["cases"]]
    check(doc["totals"]["unsupported"] == 0 and doc["totals"]["fail"] == 0, "every int4 case ran and passed", r)
    for key in ["int4:group128", "int4:group32:asym", "int4:group32:actorder", "int4:group128/fp8e4m3:token:dynamic",
                "int4:channel/int8:token:dynamic:asym", "int4:group32:scale-bf16/int8:token:dynamic:asym"]:
        check(any(i.startswith("test/%s/tokens:m16." % key) for i in ids), "a case for " + key, r)


@test
def run_backend_glob():
    r = fmoe("run", "--seed", "1", "--backend", "ref*", "--tokens", "8")
    expect_rc(r, EXIT_OK, "--backend ref*")
    n = fmoe("run", "--seed", "1", "--backend", "nosuch*")
    expect_rc(n, EXIT_NO_BACKEND, "--backend nosuch*")
    check(n.err.startswith("fusedmoe: "), "error on stderr", n)


@test
def run_no_backend_for_scheme():
    r = fmoe("run", "--scheme", "fp8e4m3fnuz:channel/fp8e4m3fnuz:token:dynamic")
    expect_rc(r, EXIT_NO_BACKEND, "run with an e4m3fnuz scheme")
    check("reference" in r.err, "the refusal names the reference", r)


@test
def run_fail_on_nan_says_nan():
    r = fmoe("run", "--seed", "3", "--tokens", "4", skewed=True, config=SKEWED_TOML["nan"])
    expect_rc(r, EXIT_CHECK, "run on a backend that writes NaN")
    h = 256  # the random layer's default hidden size (cli/layer_flags.c)
    check("result:     FAIL: %d of %d elements outside" % (4 * h, 4 * h) in r.out, "every element counted", r)
    check(", %d NaN/inf; first non-finite at token 0, column 0: out -nan, ref " % (4 * h) in r.out,
          "the FAIL says NaN and where", r)


@test
def run_catches_a_wrong_backend():
    r = fmoe("run", "--seed", "3", skewed=True, config=SKEWED_TOML["zero"])
    expect_rc(r, EXIT_CHECK, "run on a backend that writes zeros")
    check("backend:    skewed/skewed on cpu:0" in r.out, "the skewed backend was selected (score 100)", r)
    check("oracle:     reference/" in r.out, "checked against the reference", r)
    check("result:     FAIL: " in r.out and "; worst at token " in r.out and "PASS" not in r.out,
          "FAIL with the count, the bound and the worst element", r)
    j = fmoe("run", "--seed", "3", "--json", "--tokens", "8", skewed=True, config=SKEWED_TOML["zero"])
    expect_rc(j, EXIT_CHECK, "run --json on the wrong backend")
    doc = j.json()
    check(doc["pass"] is False and doc["result"] == "FAIL" and doc["errors"]["outside"] > 0, "FAIL in JSON", j)
    check(doc["errors"]["max_rel"] > 0.5, "zeros are far off", j)
    # --backend pins the check to the reference again.
    ok = fmoe("run", "--seed", "3", "--backend", "reference", skewed=True, config=SKEWED_TOML["zero"])
    expect_rc(ok, EXIT_OK, "--backend reference")


@test
def run_plugin_errors():
    for mode in ["fail_finalize", "fail_apply"]:
        r = fmoe("run", "--seed", "3", skewed=True, config=SKEWED_TOML[mode])
        expect_rc(r, EXIT_INTERNAL, "run with a backend whose %s fails" % mode)
        check("on purpose" in r.err and r.err.startswith("fusedmoe: "), "the plugin's error is shown", r)


@test
def two_plugins_listed_and_ranked():
    r = fmoe("plugins", skewed=True)
    expect_rc(r, EXIT_OK, "plugins with two plugins")
    lines = r.out.splitlines()
    header = [l for l in lines if l.startswith("NAME")][0]
    rows = [l for l in lines if l.startswith("reference ") or l.startswith("skewed ")]
    check(len(rows) == 2, "both plugins listed", r)
    for row in rows:
        check(row.index("loaded") == header.index("STATE"), "STATE column aligned", r)
    e = fmoe("explain", "--json", skewed=True)
    expect_rc(e, EXIT_OK, "explain with two plugins")
    doc = e.json()
    verdicts = {c["plugin"]: c["verdict"] for c in doc["candidates"]}
    check(verdicts == {"skewed": "selected", "reference": "accepted"}, "ranked by score: %r" % verdicts, e)
    t = fmoe("explain", skewed=True)
    check("skewed accepts (and will be wrong)" in t.out, "each candidate's reason is printed", t)


# --- configuration and input errors ---------------------------------------------------------


@test
def invalid_layer_config():
    cases = [
        (["--top-k", "9"], "top_k"),
        (["--tp", "3"], "tp_size"),
        (["--redundant", "2"], "redundant"),
        (["--dtype", "int8"], "act_dtype"),
        (["--ep", "2", "--ep-rank", "2"], "ep_rank"),
        (["--weight-on-input"], "top_k"),
    ]
    for flags, word in cases:
        for cmd in ["run", "explain"]:
            r = fmoe(cmd, *flags)
            expect_rc(r, EXIT_CONFIG, "%s %s" % (cmd, " ".join(flags)))
            check(r.err.startswith("fusedmoe: ") and word in r.err, "validation message names %s" % word, r)
    r = fmoe("run", "--tokens", "100", "--max-tokens", "64")
    expect_rc(r, EXIT_CONFIG, "--tokens above --max-tokens")


@test
def bad_scheme():
    for cmd in ["run", "explain"]:
        r = fmoe(cmd, "--scheme", "fp7")
        expect_rc(r, EXIT_CONFIG, cmd + " --scheme fp7")
        check("fp7" in r.err, "the error names the key", r)


@test
def scheme_from_config_json():
    """--scheme takes a checkpoint's config.json; its quantization_config
    decides the scheme of every expert under --modules."""
    fp8 = write("fp8_config.json", json.dumps({
        "torch_dtype": "bfloat16",
        "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic",
                                "weight_block_size": [128, 128]}}))
    r = fmoe("explain", "--scheme", fp8, "--json")
    check(r.json()["scheme"] == "fp8e4m3:block128x128/fp8e4m3:group128:dynamic", "scheme from fp8 config", r)
    plain = write("plain_config.json", json.dumps({"torch_dtype": "bfloat16"}))
    r = fmoe("run", "--scheme", plain, "--tokens", "4", "--seed", "3")
    expect_rc(r, EXIT_OK, "run with an unquantized config.json")
    # Expert 2 of layer 1 ignored (left in f32: no torch_dtype): the experts disagree.
    ct = write("ct_config.json", json.dumps({
        "quantization_config": {
            "quant_method": "compressed-tensors", "format": "pack-quantized",
            "config_groups": {"g": {"targets": ["Linear"], "weights": {
                "num_bits": 4, "type": "int", "strategy": "group", "group_size": 128}}},
            "ignore": ["model.layers.1.mlp.experts.2.up_proj"]}}))
    r = fmoe("explain", "--scheme", ct, "--json")
    check(r.json()["scheme"] == "int4:group128", "layer 0 is int4", r)
    r = fmoe("explain", "--scheme", ct, "--modules", "model.layers.1.mlp.experts")
    expect_rc(r, EXIT_CONFIG, "experts that disagree")
    check(r.err == ("fusedmoe: --scheme: %s: model.layers.1.mlp.experts: All MoE projections need to have "
                    "same quantization scheme but found multiple: model.layers.1.mlp.experts.0.gate_proj is "
                    "'int4:group128', model.layers.1.mlp.experts.2.up_proj is 'f32'\n" % ct), "exact message", r)
    r = fmoe("run", "--scheme", os.path.join(TMP, "none", "config.json"))
    expect_rc(r, EXIT_CONFIG, "a missing config.json")
    check("none/config.json: No such file or directory" in r.err, "names the file", r)


# --- run on a checkpoint (--model) ------------------------------------------------------


def model(name):
    return os.path.join(MODELS, name)


@test
def run_on_models_saved_by_transformers():
    families = sorted(d for d in os.listdir(HF_MODELS) if os.path.isdir(os.path.join(HF_MODELS, d)))
    check(len(families) >= 8, "the eight transformers fixtures are there", families)
    for fam in families:
        d = os.path.join(HF_MODELS, fam)
        r = fmoe("run", "--model", d, "--input", os.path.join(d, "golden.safetensors"), "--json")
        expect_rc(r, EXIT_OK, "run --model on %s as transformers saved it" % fam)
        check(r.json()["result"] == "PASS", "%s: every layer PASS against the reference" % fam, r)


@test
def run_model_every_moe_layer():
    r = fmoe("run", "--model", model("bf16"), "--json")
    expect_rc(r, EXIT_OK, "run --model bf16")
    j = r.json()
    check(j["family"] == "qwen3_moe" and j["quant_method"] == "none", "family and method", r)
    check([l["layer"] for l in j["layers"]] == [0, 1], "both MoE layers ran", r)
    check(all(l["scheme"] == "bf16" and l["result"] == "PASS" for l in j["layers"]), "bf16, PASS", r)
    check(j["input"].endswith("random N(0,1) from the seed"), "random input without inputs.safetensors", r)
    t = fmoe("run", "--model", model("bf16"))
    expect_rc(t, EXIT_OK, "the table")
    for word in ["layer", "scheme", "backend", "max abs", "max rel", "tokens/s", "reference/unquantized", "why:"]:
        check(word in t.out, "the table shows " + word, t)


@test
def run_model_bundled_inputs():
    """A checkpoint directory with inputs.safetensors (as the bundled model
    is installed) feeds its x to every layer."""
    d = os.path.join(TMP, "with-inputs")
    shutil.copytree(model("bf16"), d)
    shutil.copy(os.path.join(MODELS, "inputs.safetensors"), d)
    r = fmoe("run", "--model", d, "--json")
    expect_rc(r, EXIT_OK, "run --model with inputs.safetensors")
    check(r.json()["input"] == os.path.join(d, "inputs.safetensors"), "x from the directory's inputs", r)
    check(r.json()["tokens"] == 16, "every row of x", r)


@test
def run_model_on_a_device():
    """A layer on a (pretend) accelerator gets its tensors through the
    plugin's memory table (ABI 1.1) and must match the host reference."""
    r = fmoe("--plugin", DEVICE, "run", "--model", model("bf16"), "--backend", "fixture_device", "--json")
    expect_rc(r, EXIT_OK, "run --model on fixture_device")
    j = r.json()
    check(all(l["backend"].startswith("fixture_device/") and "cuda:0" in l["backend"] and l["result"] == "PASS"
              for l in j["layers"]), "every layer on cuda:0 and PASS", r)
    r = fmoe("--plugin", DEVICE, "run", "--model", model("bf16"), "--backend", "fixture_device", "--redundant", "3",
             "--layer", "1")
    expect_rc(r, EXIT_OK, "with EPLB replicas (routing mapped for the device)")


@test
def run_random_layer_on_a_device():
    """`run` without --model on a (pretend) accelerator: x, the routing and
    out go through the plugin's memory table, checked and timed there."""
    for flags in ([], ["--dtype", "f32", "--eplb", "--redundant", "3"], ["--ep", "2", "--ep-rank", "1"]):
        r = fmoe("--plugin", DEVICE, "run", "--backend", "fixture_device", "--tokens", "8", "--json", *flags)
        expect_rc(r, EXIT_OK, "run on fixture_device " + " ".join(flags))
        j = r.json()
        check(j["backend"] == "fixture_device/unquantized on cuda:0" and j["result"] == "PASS"
              and j["timing"]["runs"] > 0, "on cuda:0, PASS and timed", r)
    # The core routes only host logits, so a modular method on a device
    # takes top-k routing: --logits is refused with a hint.
    r = fmoe("--plugin", DEVICE, "run", "--backend", "fixture_device", "--tokens", "8", "--logits")
    expect_rc(r, EXIT_NO_BACKEND, "--logits on a modular device method")
    check("is modular and the logits are on cuda" in r.err and "drop --logits" in r.err, "says why and what to do", r)


@test
def run_model_fused_gpt_oss():
    r = fmoe("run", "--model", model("bf16-fused"), "--layer", "1", "--json")
    expect_rc(r, EXIT_OK, "gpt-oss fused bf16")
    j = r.json()
    check(j["family"] == "gpt_oss" and len(j["layers"]) == 1 and j["layers"][0]["layer"] == 1, "layer 1 only", r)


@test
def run_model_sharded_and_eplb():
    for flags in (["--tp", "2", "--tp-rank", "1"], ["--ep", "4", "--ep-rank", "3"],
                  ["--ep", "2", "--ep-rank", "0", "--placement", "round_robin"], ["--redundant", "4"]):
        r = fmoe("run", "--model", model("bf16"), "--layer", "0", *flags)
        expect_rc(r, EXIT_OK, "run --model with " + " ".join(flags))


@test
def run_model_output_and_input_round_trip():
    out = os.path.join(TMP, "y.safetensors")
    r = fmoe("run", "--model", model("bf16"), "--layer", "0", "--seed", "5", "--output", out)
    expect_rc(r, EXIT_OK, "--output")
    with open(out, "rb") as f:
        blob = f.read()
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    check(header["y"]["shape"] == [16, 128] and header["y"]["dtype"] == "BF16", "y [M, H] bf16", r)
    check(header["topk_ids"] == {"dtype": "I32", "shape": [16, 2], "data_offsets": [4096, 4224]}, "topk_ids [M, k]", r)
    check(header["topk_weights"]["dtype"] == "F32", "topk_weights f32", r)
    check(n % 8 == 0 and 8 + n + header["topk_weights"]["data_offsets"][1] == len(blob), "aligned, no slack", r)
    # The bundled hidden states as --input: x only.
    r = fmoe("run", "--model", model("bf16"), "--input", os.path.join(MODELS, "inputs.safetensors"),
             "--tokens", "4", "--json")
    expect_rc(r, EXIT_OK, "--input inputs.safetensors")
    check(r.json()["tokens"] == 4, "--tokens takes the first rows", r)
    # The output file is not an input (no x).
    r = fmoe("run", "--model", model("bf16"), "--input", out)
    expect_rc(r, EXIT_CONFIG, "--input without x")
    check("expected a tensor 'x' [M, 128]" in r.err, "names the tensor", r)


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], blob[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in header.items()}


def write_safetensors(path, tensors):
    header, data = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + data)


def broken_checkpoint(name, edit):
    """The bf16 fixture in one file, changed by edit(tensors)."""
    d = os.path.join(TMP, name)
    os.makedirs(d)
    shutil.copy(os.path.join(model("bf16"), "config.json"), d)
    tensors = {}
    for shard in sorted(os.listdir(model("bf16"))):
        if shard.endswith(".safetensors"):
            tensors.update(read_safetensors(os.path.join(model("bf16"), shard)))
    edit(tensors)
    write_safetensors(os.path.join(d, "model.safetensors"), tensors)
    return d


@test
def run_model_reports_what_it_found():
    """Router and input refusals name the tensor, what was found and what was
    expected; the bundled inputs are never blamed on --input."""
    def router_1d(t):
        dtype, shape, raw = t["model.layers.0.mlp.gate.weight"]
        t["model.layers.0.mlp.gate.weight"] = (dtype, [shape[0] * shape[1]], raw)
    d = broken_checkpoint("router-1d", router_1d)
    r = fmoe("run", "--model", d)
    expect_rc(r, EXIT_CONFIG, "a 1-D router weight")
    check("model.layers.0.mlp.gate.weight: expected the router weight [8, 128] (experts, hidden) of f32, bf16 or "
          "f16 in the checkpoint; found [1024] bf16" in r.err, "shape and dtype found", r)
    # A broken inputs.safetensors inside the model directory.
    d = broken_checkpoint("bad-bundled-inputs", lambda t: None)
    write_safetensors(os.path.join(d, "inputs.safetensors"), {"x": ("F32", [2, 64], b"\x00\x00\x80\x3f" * 128)})
    r = fmoe("run", "--model", d)
    expect_rc(r, EXIT_CONFIG, "bundled inputs of the wrong width")
    check("(the model's bundled inputs): expected a tensor 'x' [M, 128] of f32, bf16 or f16 with M >= 1; "
          "found [2, 64] f32" in r.err, "the bundled file is named as such, with what it holds", r)
    check("--input" not in r.err, "not blamed on --input", r)


@test
def run_model_checkpoint_errors():
    """Every tensor under a layer's experts is loaded or refused by name."""
    L = "model.layers.0.mlp.experts"

    def extra(t):
        t[L + ".3.up_proj.weight_foo"] = t[L + ".3.up_proj.weight"]

    def expert9(t):
        t[L + ".9.gate_proj.weight"] = t[L + ".0.gate_proj.weight"]

    def stray(t):
        t[L + ".gate_up_proj"] = t[L + ".0.gate_proj.weight"]

    def missing(t):
        del t[L + ".5.down_proj.weight"]

    def transposed(t):
        dtype, shape, raw = t[L + ".2.down_proj.weight"]
        t[L + ".2.down_proj.weight"] = (dtype, shape[::-1], raw)

    cases = [
        (extra, L + ".3.up_proj.weight_foo: the layer's method has no parameter w13_weight_foo for it "
                "(declared: w13_weight, w2_weight); the checkpoint does not match the scheme"),
        (expert9, L + ".9.gate_proj.weight: expert 9, but the layer has 8 experts"),
        (stray, L + ".gate_up_proj: not a tensor of this layer's experts (expected " + L +
                ".<expert>.<gate_proj|up_proj|down_proj>.<name>)"),
        (missing, "w2_weight"),
        (transposed, L + ".2.down_proj.weight: w2_weight expert 2 (w2): tensor gives [256, 128], the layer "
                     "expects [128, 256]"),
    ]
    for edit, message in cases:
        d = broken_checkpoint("broken-" + edit.__name__, edit)
        r = fmoe("run", "--model", d, "--layer", "0")
        expect_rc(r, EXIT_CONFIG, edit.__name__)
        check(message in r.err, "%s: the message names the tensor: %s" % (edit.__name__, message), r)
    r = fmoe("run", "--model", broken_checkpoint("broken-missing-2", missing), "--layer", "0")
    check("expert 5" in r.err, "a missing tensor: finalize names the expert", r)


@test
def run_model_errors():
    r = fmoe("run", "--model", os.path.join(TMP, "nowhere"))
    expect_rc(r, EXIT_CONFIG, "a missing checkpoint")
    check("nowhere/config.json: No such file or directory" in r.err, "names config.json", r)
    r = fmoe("run", "--model", model("bf16"), "--layer", "7")
    expect_rc(r, EXIT_CONFIG, "--layer past the model")
    check("--layer 7: not a MoE layer" in r.err, "says why", r)
    r = fmoe("run", "--model", model("bf16"), "--experts", "4")
    expect_rc(r, EXIT_USAGE, "a synthetic-layer flag with --model")
    r = fmoe("run", "--model", model("bf16"), "--tp", "3")
    expect_rc(r, EXIT_CONFIG, "tp that does not divide the intermediate size")


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * abs(b)


@test
def bench_small_grid():
    out = os.path.join(TMP, "bench.json")
    # 64 experts of 3*256*128 bf16 (192 KiB) in 0.5 MiB: scaled to 2 = k.
    r = fmoe("bench", "--shape", "8,2,64,32", "--shape", "64,2,256,128", "--max-gib", "0.00049",
             "--tokens", "1,4", "--iters", "2", "--seed", "9", "--json", out)
    expect_rc(r, EXIT_OK, "bench")
    for word in ["read bandwidth", "floor", "%floor", "GB/s", "reference us", "8,2,64,32", "2/64"]:
        check(word in r.out, "bench prints " + word, r)
    # Each point is reported on stderr as soon as it is measured (a run cut
    # short keeps them), in the table's order, with the table's time.
    progress = [l for l in r.err.splitlines() if l.startswith("measured ")]
    check([l.split(":")[0] for l in progress] ==
          ["measured 8,2,64,32 M=1", "measured 8,2,64,32 M=4", "measured 64,2,256,128 M=1",
           "measured 64,2,256,128 M=4"], "a progress line per point", r)
    h = fmoe("bench", "--help", plugin=False)
    check(all(n in h.out for n in ["qwen3-30b-a3b", "mixtral-8x7b", "gpt-oss-120b", "deepseek-v3"]), "named shapes", h)
    with open(out, encoding="utf-8") as f:
        doc = json.load(f)
    check(doc["machine"]["read_bandwidth_all_threads_GBps"] > 0, "bandwidth measured", r)
    pts = doc["points"]
    check([(p["shape"], p["tokens"]) for p in pts] ==
          [("8,2,64,32", 1), ("8,2,64,32", 4), ("64,2,256,128", 1), ("64,2,256,128", 4)], "every point", r)
    q = pts[2]
    check(q["experts"] == 2 and q["model_experts"] == 64, "experts scaled to fit, not below k", r)
    check(q["distinct_experts"] == 2 and q["bytes"] == 2 * 3 * 256 * 128 * 2 + 4 * 256, "bytes of M=1", r)
    check(all(p["us"] > 0 and p["floor_us"] > 0 and p["reference_us"] is not None for p in pts), "timed", r)
    for line, p in zip(progress, pts):
        check(line.endswith(": %.1f us (floor %.1f us)" % (p["us"], p["floor_us"])), "progress = the point's time", r)
    # On the host the floor divides by the host's read bandwidth (the higher
    # of one thread and all), and each point's effective rate is bytes / time.
    bw = max(doc["machine"]["read_bandwidth_1_thread_GBps"], doc["machine"]["read_bandwidth_all_threads_GBps"])
    for p in pts:
        check(p["floor_rate"] == "host read" and abs(p["floor_GBps"] - bw) <= 1e-9 * bw, "host floor rate", r)
        check(close(p["floor_us"], p["bytes"] / (bw * 1e9) * 1e6), "floor = bytes / host read bandwidth", r)
        check(close(p["effective_GBps"], p["bytes"] / p["us"] * 1e-3), "effective GB/s = bytes / time", r)
    check("device" not in doc and "device_read_GBps" not in pts[0], "no device rates on the host", r)
    r = fmoe("bench", "--shape", "nonsense")
    expect_rc(r, EXIT_USAGE, "a bad shape")
    # A shape the backend refuses for the scheme (H = 64 has no group of 128)
    # is skipped with the backend's reason; the other shapes still run.
    sk = os.path.join(TMP, "bench-skip.json")
    r = fmoe("bench", "--scheme", "int4:group128", "--shape", "8,2,64,128", "--shape", "8,2,128,128", "--tokens", "1",
             "--iters", "2", "--max-gib", "0.001", "--seed", "3", "--json", sk)
    expect_rc(r, EXIT_OK, "bench with a refused shape")
    check("skipped:   8,2,64,128:" in r.out and "not divisible by group_size 128" in r.out, "refused shape reported", r)
    with open(sk, encoding="utf-8") as f:
        doc = json.load(f)
    check([p["shape"] for p in doc["points"]] == ["8,2,128,128"], "the other shape measured", r)
    check([k["shape"] for k in doc["skipped"]] == ["8,2,64,128"] and "group_size 128" in doc["skipped"][0]["reason"],
          "skipped shape in the JSON", r)
    r = fmoe("bench", "--scheme", "int4:group128", "--shape", "8,2,64,128", "--tokens", "1", "--iters", "2")
    expect_rc(r, EXIT_CONFIG, "bench with every shape refused")
    check("not divisible by group_size 128" in r.err, "the refusal is the error", r)
    # A device layer: inputs and routing sets live on its device, the plugin
    # times the replays and measures the copy rate (ABI 1.2), and the floor
    # takes the GEMM peak given.
    dev = os.path.join(TMP, "bench-device.json")
    r = fmoe("--plugin", DEVICE, "bench", "--backend", "fixture_device", "--shape", "8,2,64,32", "--tokens", "2,64",
             "--iters", "2", "--no-reference", "--gemm-peak", "0.000001", "--json", dev)
    expect_rc(r, EXIT_OK, "bench on fixture_device")
    check("copy rate" in r.out and "read rate" in r.out and "timed by the plugin" in r.out and
          "GEMM peak 0 TFLOP/s" in r.out and "eff GB/s" in r.out, "says the device floor", r)
    with open(dev, encoding="utf-8") as f:
        doc = json.load(f)
    check(doc["gemm_peak_tflops"] == 0.000001, "peak recorded", r)
    for p in doc["points"]:
        check(p["device_copy_GBps"] > 0 and p["device_read_GBps"] > 0 and p["us"] > 0, "both rates and time per point",
              r)
        check(p["floor_GBps"] == max(p["device_copy_GBps"], p["device_read_GBps"]), "memory rate = the higher", r)
        check(p["floor_rate"] == ("device read" if p["device_read_GBps"] >= p["device_copy_GBps"] else "device copy"),
              "names the rate it took", r)
        # At 1 MFLOP/s the compute floor binds: flops / peak.
        check(abs(p["floor_us"] - p["flops"] / 1e6 * 1e6) <= 1e-6 * p["floor_us"], "floor = flops / peak", r)
        check(close(p["effective_GBps"], p["bytes"] / p["us"] * 1e-3), "effective GB/s on the device", r)
    check(doc["device"]["copy_GBps"] == doc["points"][0]["device_copy_GBps"] and
          doc["device"]["read_GBps"] == doc["points"][0]["device_read_GBps"], "device rates in the header", r)
    # Rates the plugin fixes (copy 2 GB/s, read 3 GB/s): the memory floor is
    # bytes / 3 GB/s. Built for ABI 1.3 the same plugin has no read rate:
    # bytes / 2 GB/s, and the table says why.
    for name, read, floor_rate, words in [
            ("fixture_device_rates", 3.0, "device read", ["read rate 3 GB/s", "bytes / 3 GB/s (the read rate"]),
            ("fixture_device_rates_v13", None, "device copy",
             ["read rate not measured (the plugin does not offer read_rate, plugin ABI 1.4)",
              "bytes / 2 GB/s (the copy rate: no read rate)"])]:
        path = os.path.join(TMP, name + ".json")
        r = fmoe("--plugin", os.path.join(os.path.dirname(DEVICE), "lib%s.so" % name), "bench", "--backend", name,
                 "--shape", "8,2,64,32", "--tokens", "2,64", "--iters", "2", "--no-reference", "--json", path)
        expect_rc(r, EXIT_OK, "bench on " + name)
        for word in words:
            check(word in r.out, "%s: prints '%s'" % (name, word), r)
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        check(doc["device"] == {"copy_GBps": 2.0, "read_GBps": read, "floor_rate": floor_rate}, name + " rates", r)
        for p in doc["points"]:
            rate = (read or 2.0) * 1e9
            check(p["device_copy_GBps"] == 2.0 and p["device_read_GBps"] == read, name + " rates per point", r)
            check(p["floor_rate"] == floor_rate and p["floor_GBps"] == rate * 1e-9, name + " floor rate", r)
            check(close(p["floor_us"], p["bytes"] / rate * 1e6), name + ": floor = bytes / the higher rate", r)
            check(close(p["pct_of_floor"], 100 * p["floor_us"] / p["us"]), name + " % of floor", r)
    r = fmoe("bench", "--gemm-peak", "-3")
    expect_rc(r, EXIT_USAGE, "a bad --gemm-peak")


@test
def bad_config_file():
    for path, where in [(BAD_KEY_TOML, ":2:1:"), (BAD_SYNTAX_TOML, ":2:")]:
        for argv in (["plugins"], ["explain"], ["run"]):
            r = fmoe(*argv, config=path)
            expect_rc(r, EXIT_CONFIG, "%s with %s" % (argv[0], os.path.basename(path)))
            check(r.err.startswith("fusedmoe: " + path + where), "file:line:column in the error", r)
        # --config is the same as FMOE_CONFIG.
        r = fmoe("--config", path, "plugins")
        expect_rc(r, EXIT_CONFIG, "--config " + os.path.basename(path))
        check(path + where in r.err, "file:line:column with --config", r)
    r = fmoe("--config", os.path.join(TMP, "missing.toml"), "plugins")
    expect_rc(r, EXIT_CONFIG, "a missing config file")
    check("missing.toml" in r.err, "names the file", r)


@test
def log_option():
    r = fmoe("--log", "debug", "plugins", "--json")
    expect_rc(r, EXIT_OK, "--log debug")
    check("[loader]" in r.err, "debug log on stderr", r)
    json.loads(r.out)  # the log never mixes into stdout


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
