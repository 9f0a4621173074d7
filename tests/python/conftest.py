"""Fixtures of the Python suite.

The library under test comes from an install prefix given explicitly
(--fusedmoe-prefix or FUSEDMOE_TEST_PREFIX; tests/python/run.sh passes it);
without one the session fails instead of testing whatever is installed.
Every context is isolated + ignore_environment with the plugin manifests of
that prefix named explicitly, so nothing else on the machine or in FMOE_*
changes an outcome. Random inputs come from a seed derived from the test's
id, printed with any failure.
"""

from __future__ import annotations

import os
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fusedmoe  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fusedmoe-prefix",
        default=os.environ.get("FUSEDMOE_TEST_PREFIX"),
        help="install prefix of the libfusedmoe under test (default: $FUSEDMOE_TEST_PREFIX)",
    )


@pytest.fixture(scope="session")
def prefix(pytestconfig: pytest.Config) -> str:
    p = pytestconfig.getoption("--fusedmoe-prefix")
    if not p:
        pytest.fail("no library to test: pass --fusedmoe-prefix PREFIX or set FUSEDMOE_TEST_PREFIX")
    return os.path.abspath(p)


@pytest.fixture(scope="session")
def lib_info(prefix: str) -> fusedmoe.LibraryInfo:
    return fusedmoe.load_library(prefix=prefix)


@pytest.fixture(scope="session")
def manifests(lib_info: fusedmoe.LibraryInfo) -> dict[str, str]:
    """Installed plugin manifests by plugin name (file stem)."""
    found = {Path(p).stem: p for p in lib_info.installed_plugins()}
    assert "reference" in found, f"no reference.toml in {lib_info.plugin_dir}"
    return found


def make_context(manifests: dict[str, str], *names: str, **kwargs) -> fusedmoe.Context:
    """An isolated context with exactly the named installed plugins."""
    missing = [n for n in names if n not in manifests]
    if missing:
        pytest.skip(f"plugin {', '.join(missing)} is not installed in the prefix under test")
    return fusedmoe.Context(plugins=[manifests[n] for n in names], isolated=True, ignore_environment=True, **kwargs)


@pytest.fixture(scope="session")
def ref_ctx(manifests: dict[str, str]) -> fusedmoe.Context:
    """Only the reference plugin."""
    return make_context(manifests, "reference")


HOST_BACKENDS = ("reference", "cpu")


@pytest.fixture(scope="session", params=HOST_BACKENDS)
def backend(request: pytest.FixtureRequest, manifests: dict[str, str]) -> str:
    """Each host backend installed (cpu needs oneDNN at build time)."""
    if request.param not in manifests:
        pytest.skip(f"plugin {request.param} is not installed in the prefix under test")
    return request.param


@pytest.fixture(scope="session")
def host_ctx(manifests: dict[str, str]) -> fusedmoe.Context:
    """Every installed host plugin (the tests pick one with backend=)."""
    return make_context(manifests, *[n for n in HOST_BACKENDS if n in manifests])


@pytest.fixture
def seed(request: pytest.FixtureRequest) -> int:
    s = zlib.crc32(request.node.nodeid.encode())
    request.node.user_properties.append(("seed", s))
    return s


@pytest.fixture
def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        seeds = [v for k, v in item.user_properties if k == "seed"]
        if seeds:
            report.sections.append(
                ("seed", f"random inputs were drawn with seed {seeds[0]} (crc32 of the test id: reruns reproduce it)")
            )
