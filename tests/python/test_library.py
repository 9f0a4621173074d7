"""Finding libfusedmoe: each way, what it reports, and the errors.

One process holds one library, so every case runs in a fresh interpreter
with an environment made for it (nothing inherited can change the outcome).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import fusedmoe
from fusedmoe import _library

PKG_ROOT = str(Path(fusedmoe.__file__).resolve().parents[1])

PROBE = """
import json, sys, fusedmoe, fusedmoe._library as L
{patch}
try:
    info = fusedmoe.load_library({args})
    print(json.dumps(dict(ok=True, found_by=info.found_by, path=info.path, detail=info.detail,
                          version=info.version, abi=list(info.plugin_abi))))
except fusedmoe.FusedMoEError as e:
    print(json.dumps(dict(ok=False, status=e.status_name, message=e.message)))
"""


def probe(args: str = "", env: dict[str, str] | None = None, patch: str = "") -> dict:
    base = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": PKG_ROOT,
        # nothing found unless a case says so
        "PKG_CONFIG_PATH": "",
        "PKG_CONFIG_LIBDIR": "/nonexistent",
        "LD_LIBRARY_PATH": "",
    }
    base.update(env or {})
    r = subprocess.run(
        [sys.executable, "-c", PROBE.format(args=args, patch=patch)],
        env=base,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def libfile(lib_info) -> str:
    return lib_info.path


def test_explicit_path(libfile):
    r = probe(f"{libfile!r}")
    assert r["ok"] and r["found_by"] == "explicit path" and r["path"] == libfile
    assert r["version"] == fusedmoe.__version__


def test_install_prefix(prefix, libfile):
    r = probe(f"prefix={prefix!r}")
    assert r["ok"] and r["found_by"] == "install prefix" and r["path"] == libfile and prefix in r["detail"]


def test_environment(prefix, libfile):
    r = probe(env={"FUSEDMOE_LIBRARY": libfile})
    assert r["ok"] and r["found_by"] == "environment FUSEDMOE_LIBRARY"
    r = probe(env={"FUSEDMOE_PREFIX": prefix})
    assert r["ok"] and r["found_by"] == "environment FUSEDMOE_PREFIX" and r["path"] == libfile


@pytest.mark.skipif(shutil.which("pkg-config") is None, reason="pkg-config is not installed")
def test_pkg_config(libfile):
    pc_dir = str(Path(libfile).parent / "pkgconfig")
    r = probe(env={"PKG_CONFIG_PATH": pc_dir, "PKG_CONFIG_LIBDIR": pc_dir})
    assert r["ok"] and r["found_by"] == "pkg-config" and r["path"] == libfile


def test_dynamic_loader(libfile):
    r = probe(env={"LD_LIBRARY_PATH": str(Path(libfile).parent)})
    assert r["ok"] and r["found_by"] == "dynamic loader"
    assert os.path.realpath(r["path"]) == os.path.realpath(libfile)


def test_not_found_lists_every_way():
    # a soname no system has, so an installed libfusedmoe cannot answer
    r = probe(patch="L.SONAME = 'libfusedmoe-absent-for-test.so.0'")
    assert not r["ok"] and r["status"] == "not-found"
    for part in (
        "explicit path or prefix: none given",
        "FUSEDMOE_LIBRARY and FUSEDMOE_PREFIX: unset",
        "pkg-config",
        "dynamic loader",
        "FUSEDMOE_PREFIX",
    ):
        assert part in r["message"], r["message"]


def test_named_but_missing_is_an_error(tmp_path, prefix):
    """A way that names a library which is not there fails; it never falls
    through to the next way."""
    r = probe(f"{str(tmp_path / 'libfusedmoe.so.0')!r}")
    assert not r["ok"] and r["status"] == "not-found" and "explicit path" in r["message"]
    r = probe(f"prefix={str(tmp_path)!r}")
    assert not r["ok"] and "install prefix: no libfusedmoe.so.0 under " + str(tmp_path) in r["message"]
    r = probe(env={"FUSEDMOE_LIBRARY": str(tmp_path / "x.so"), "FUSEDMOE_PREFIX": prefix})
    assert not r["ok"] and "environment FUSEDMOE_LIBRARY" in r["message"]
    r = probe(f"{str(tmp_path)!r}, prefix={prefix!r}")
    assert not r["ok"] and r["status"] == "invalid-argument"


def test_version_mismatch(libfile):
    r = probe(f"{libfile!r}", patch="L.__version__ = '0.2.0'")
    assert not r["ok"] and r["status"] == "abi-mismatch"
    assert "is libfusedmoe 0.1" in r["message"] and "needs 0.2.x" in r["message"], r["message"]


@pytest.mark.parametrize(
    "lib_version,pkg_version,ok",
    [
        ("0.1.0", "0.1.0", True),
        ("0.1.7", "0.1.0", True),
        ("0.2.0", "0.1.0", False),
        ("0.0.9", "0.1.0", False),
        ("1.3.0", "1.2.0", True),
        ("1.1.0", "1.2.0", False),
        ("2.0.0", "1.2.0", False),
        ("x.y", "0.1.0", False),
    ],
)
def test_version_rule(monkeypatch, lib_version, pkg_version, ok):
    monkeypatch.setattr(_library, "__version__", pkg_version)
    if ok:
        _library._check_version(lib_version, "lib")
    else:
        with pytest.raises(fusedmoe.FusedMoEError) as e:
            _library._check_version(lib_version, "lib")
        assert e.value.status == fusedmoe.FusedMoEError.ABI_MISMATCH


def test_one_library_per_process(lib_info, tmp_path):
    assert fusedmoe.load_library() is lib_info
    assert fusedmoe.library_info() is lib_info
    assert fusedmoe.load_library(lib_info.path) is lib_info
    other = tmp_path / "libfusedmoe.so.0"
    shutil.copy(lib_info.path, other)
    with pytest.raises(fusedmoe.FusedMoEError) as e:
        fusedmoe.load_library(other)
    assert e.value.status == fusedmoe.FusedMoEError.BAD_STATE and lib_info.path in e.value.message


def test_installed_plugins(lib_info):
    names = [Path(p).name for p in lib_info.installed_plugins()]
    assert "reference.toml" in names and names == sorted(names)
    assert lib_info.plugin_dir == os.path.join(lib_info.libdir, "fusedmoe", "plugins")


def test_package_is_pure_python():
    """No compiled part: one install serves any build of the library."""
    files = [p for p in Path(fusedmoe.__file__).parent.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert files and all(p.suffix in (".py", ".typed") for p in files), files


def test_package_version_is_the_distributions():
    """pyproject.toml's version is the one fusedmoe checks the library against."""
    import importlib.metadata

    try:
        dist = importlib.metadata.version("fusedmoe")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("fusedmoe is imported from a source tree, not installed")
    assert dist == fusedmoe.__version__
