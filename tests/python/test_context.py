"""Contexts: plugins(), devices(), explain(), configuration, logging, errors."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import fusedmoe
from conftest import make_context
from helpers import expect_error, random_weights, softmax_topk

CFG = dict(num_experts=8, top_k=2, hidden_size=64, intermediate_size=32)


def test_plugins(ref_ctx, manifests):
    (p,) = ref_ctx.plugins()
    assert (p.name, p.state, p.reason, p.loaded) == ("reference", "loaded", "", True)
    assert p.manifest == manifests["reference"]
    assert p.path.endswith("libfmoe-reference.so")
    assert p.abi[0] == fusedmoe.library_info().plugin_abi[0]
    assert "bf16" in p.schemes and "f32" in p.schemes
    mono = {o.name: o for o in p.options}["monolithic"]
    assert (mono.type, mono.default, mono.value, mono.source) == ("bool", "false", "false", "default")
    assert mono.domain == "true|false" and mono.help


def test_devices(ref_ctx):
    (d,) = ref_ctx.devices()
    assert d.plugin == "reference" and d.device == fusedmoe.Device("cpu", 0) and d.available and d.score > 0


def test_isolated_sees_nothing_installed():
    ctx = fusedmoe.Context(isolated=True, ignore_environment=True)
    assert ctx.plugins() == [] and ctx.devices() == []
    assert ctx.config_path == ""  # built-in defaults
    sel = ctx.explain(fusedmoe.LayerConfig(**CFG), "bf16")
    assert sel.chosen is None and sel.candidates == () and sel.summary
    with pytest.raises(fusedmoe.FusedMoEError) as e:
        ctx.layer(fusedmoe.LayerConfig(**CFG), "bf16")
    assert e.value.status == fusedmoe.FusedMoEError.UNSUPPORTED


def test_explain(host_ctx, backend):
    cfg = fusedmoe.LayerConfig(**CFG)
    sel = host_ctx.explain(cfg, fusedmoe.Scheme("bf16"))
    assert sel.scheme == "bf16"
    assert sel.chosen is not None and sel.chosen.verdict == "selected"
    assert sum(c.verdict == "selected" for c in sel.candidates) == 1
    assert {c.plugin for c in sel.candidates} == {p.name for p in host_ctx.plugins()}
    layer = host_ctx.layer(cfg, "bf16")  # no restriction: the selection's choice
    assert layer.backend == f"{sel.chosen.plugin}/{sel.chosen.method}"
    assert "bf16" in str(sel) and sel.chosen.plugin in str(sel)


def test_explain_nothing_serves(manifests):
    """Only the cpu plugin, and a scheme it does not serve: a report, no raise."""
    ctx = make_context(manifests, "cpu")
    sel = ctx.explain(fusedmoe.LayerConfig(**CFG), "fp8e4m3:channel/fp8e4m3:token:dynamic")
    assert sel.chosen is None
    assert [c.verdict for c in sel.candidates] != [] and all(c.verdict != "selected" for c in sel.candidates)
    assert all(c.reason for c in sel.candidates)


def test_explain_bad_config(ref_ctx):
    with expect_error(fusedmoe.FusedMoEError.INVALID_ARGUMENT, "top_k"):
        ref_ctx.explain(fusedmoe.LayerConfig(num_experts=4, top_k=5, hidden_size=64, intermediate_size=32), "bf16")


def test_config_file_sets_plugin_option(manifests, tmp_path, rng, seed):
    """[plugins.reference.options] reaches the plugin: monolithic routing
    inside the plugin gives the same result as the core's routing."""
    toml = tmp_path / "fusedmoe.toml"
    toml.write_text("[plugins.reference.options]\nmonolithic = true\n")
    mono = make_context(manifests, "reference", config=toml)
    assert mono.config_path == str(toml)
    opt = {o.name: o for o in mono.plugins()[0].options}["monolithic"]
    assert (opt.value, opt.source) == ("true", "config")
    plain = make_context(manifests, "reference")
    cfg = fusedmoe.LayerConfig(**CFG, act_dtype="f32", renormalize=True)
    w13, w2 = random_weights(rng, 8, 64, 32)
    x = rng.standard_normal((5, 64)).astype(np.float32)
    logits = rng.standard_normal((5, 8)).astype(np.float32)
    outs = []
    for ctx in (mono, plain):
        layer = ctx.layer(cfg, "f32")
        layer.load("w13_weight", w13)
        layer.load("w2_weight", w2)
        layer.finalize()
        outs.append(layer.forward_logits(x, logits))
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-6, err_msg=f"seed {seed}")
    assert np.abs(outs[0]).max() > 0.05, f"seed {seed}"
    # monolithic methods take router logits only
    w, ids = softmax_topk(logits, 2, True)
    with expect_error(fusedmoe.FusedMoEError.INVALID_ARGUMENT, "monolithic"):
        layer = mono.layer(cfg, "f32")
        layer.load("w13_weight", w13)
        layer.load("w2_weight", w2)
        layer.finalize()
        layer.forward(x, w, ids)


def test_plugin_options_from_the_application(manifests, tmp_path):
    """plugin_options (dict or FMOE_OPTIONS text) beat the TOML, and are
    checked against the manifest's declarations."""
    toml = tmp_path / "fusedmoe.toml"
    toml.write_text("[plugins.reference.options]\nnvfp4_globals = \"dequant\"\n")
    for given in ({"reference": {"nvfp4_globals": "quant", "monolithic": True}},
                  "reference.nvfp4_globals=quant,reference.monolithic=true"):
        ctx = make_context(manifests, "reference", config=toml, plugin_options=given)
        opts = {o.name: o for o in ctx.plugins()[0].options}
        assert (opts["nvfp4_globals"].value, opts["nvfp4_globals"].source) == ("quant", "application")
        assert (opts["monolithic"].value, opts["monolithic"].source) == ("true", "application")
    bad = make_context(manifests, "reference", plugin_options={"reference": {"monolithic": "sometimes"}})
    (p,) = bad.plugins()
    assert p.state == "failed"
    assert p.reason == ("fmoe_context_options.plugin_options: option 'monolithic' of plugin 'reference' = "
                        "\"sometimes\": expected a boolean (true or false)")
    with expect_error(fusedmoe.FusedMoEError.INVALID_ARGUMENT, "is not <plugin>.<option>=<value>"):
        make_context(manifests, "reference", plugin_options="monolithic=true")


def test_config_file_disables_plugin(manifests, tmp_path):
    toml = tmp_path / "fusedmoe.toml"
    toml.write_text('[select]\ndisable = ["reference"]\n')
    ctx = make_context(manifests, "reference", config=toml)
    (p,) = ctx.plugins()
    assert p.state == "disabled" and p.reason and not p.loaded


def test_config_errors(tmp_path):
    with expect_error(fusedmoe.FusedMoEError.NOT_FOUND, str(tmp_path / "missing.toml")):
        fusedmoe.Context(config=tmp_path / "missing.toml", isolated=True, ignore_environment=True)
    bad = tmp_path / "bad.toml"
    bad.write_text("[select]\nfallback = 3\n")
    with pytest.raises(fusedmoe.FusedMoEError) as e:
        fusedmoe.Context(config=bad, isolated=True, ignore_environment=True)
    assert e.value.status in (fusedmoe.FusedMoEError.PARSE_ERROR, fusedmoe.FusedMoEError.INVALID_ARGUMENT)
    assert str(bad) in e.value.message and "fallback" in e.value.message


def test_missing_plugin_is_recorded(tmp_path):
    ctx = fusedmoe.Context(plugins=[tmp_path / "nope.toml"], isolated=True, ignore_environment=True)
    (p,) = ctx.plugins()
    assert p.state == "failed" and "nope.toml" in (p.reason + p.manifest + p.path)


def test_log_handler(manifests):
    lines: list[tuple[str, str, str]] = []
    lock = threading.Lock()

    def handler(level, category, message):
        with lock:
            lines.append((level, category, message))

    make_context(manifests, "reference", log_level="info", log_handler=handler)
    assert any(c == "loader" and "fusedmoe " + fusedmoe.__version__ in m for _, c, m in lines), lines
    assert all(lv in ("error", "warn", "info") for lv, _, _ in lines)
    quiet: list = []
    make_context(manifests, "reference", log_level="error", log_handler=lambda *a: quiet.append(a))
    assert quiet == []


def test_log_handler_exception_does_not_unwind(manifests, capsys):
    def handler(*_):
        raise RuntimeError("handler bug")

    ctx = make_context(manifests, "reference", log_level="info", log_handler=handler)
    assert ctx.plugins()[0].loaded
    assert "handler bug" in capsys.readouterr().err


def test_log_level_checked():
    with expect_error(fusedmoe.FusedMoEError.INVALID_ARGUMENT, "log_level: 'verbose'"):
        fusedmoe.Context(log_level="verbose", isolated=True, ignore_environment=True)
    with expect_error(fusedmoe.FusedMoEError.INVALID_ARGUMENT, "log_categories"):
        fusedmoe.Context(log_categories=["a,b"], isolated=True, ignore_environment=True)


def test_ignore_environment(manifests, monkeypatch, tmp_path):
    """FMOE_* in the environment: honoured unless ignore_environment."""
    toml = tmp_path / "disable.toml"
    toml.write_text('[select]\ndisable = ["reference"]\n')
    monkeypatch.setenv("FMOE_CONFIG", str(toml))
    seen = fusedmoe.Context(plugins=[manifests["reference"]], isolated=True)
    assert seen.config_path == str(toml) and seen.plugins()[0].state == "disabled"
    ignored = fusedmoe.Context(plugins=[manifests["reference"]], isolated=True, ignore_environment=True)
    assert ignored.config_path == "" and ignored.plugins()[0].loaded


def test_context_manager(manifests):
    with make_context(manifests, "reference") as ctx:
        assert ctx.plugins()
    with expect_error(fusedmoe.FusedMoEError.BAD_STATE, "closed"):
        ctx.devices()
