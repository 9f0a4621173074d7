"""The ctypes structures are the installed headers' structures.

A C program compiled against the prefix's include/ prints sizeof and every
field's offsetof; each must equal what ctypes computes. A field renamed,
reordered, retyped or appended in the headers without the same change in
fusedmoe/_capi.py fails here, not as memory corruption later.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess

import pytest

from fusedmoe import _capi


def c_program() -> str:
    lines = ["#include <stdio.h>", "#include <stddef.h>", "#include <fusedmoe/fusedmoe.h>", "int main(void) {"]
    for cname, st in _capi.STRUCTS.items():
        lines.append(f'    printf("{cname} sizeof %zu\\n", sizeof({cname}));')
        for field, _ in st._fields_:
            lines.append(f'    printf("{cname} {field} %zu\\n", offsetof({cname}, {field}));')
    lines += ["    return 0;", "}"]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def c_layout(prefix, tmp_path_factory) -> dict[tuple[str, str], int]:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("abi")
    src, exe = d / "layout.c", d / "layout"
    src.write_text(c_program())
    r = subprocess.run(
        [cc, "-std=c11", "-I", os.path.join(prefix, "include"), str(src), "-o", str(exe)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    layout = {}
    for line in out.splitlines():
        name, field, value = line.split()
        layout[(name, field)] = int(value)
    return layout


@pytest.mark.parametrize("cname", list(_capi.STRUCTS))
def test_struct_layout(c_layout, cname):
    st = _capi.STRUCTS[cname]
    assert ctypes.sizeof(st) == c_layout[(cname, "sizeof")], f"{cname}: sizeof"
    for field, _ in st._fields_:
        assert getattr(st, field).offset == c_layout[(cname, field)], f"{cname}.{field}: offset"


def test_constants_match_the_headers(prefix):
    """Status, dtype, device, shard and EP values the package hard-codes."""
    header = open(os.path.join(prefix, "include", "fusedmoe", "common.h")).read()
    header += open(os.path.join(prefix, "include", "fusedmoe", "fusedmoe.h")).read()
    checks = {
        "FMOE_STATUS_INVALID_ARGUMENT": _capi.STATUS_INVALID_ARGUMENT,
        "FMOE_STATUS_BAD_STATE": _capi.STATUS_BAD_STATE,
        "FMOE_STATUS_INTERNAL": _capi.STATUS_INTERNAL,
        "FMOE_DTYPE_BF16": _capi.DTYPE_BF16,
        "FMOE_DTYPE_INT32": _capi.DTYPE_INT32,
        "FMOE_DTYPE_UE8M0": _capi.DTYPE_UE8M0,
        "FMOE_DEVICE_CUDA": _capi.DEVICE_CUDA,
        "FMOE_DEVICE_ROCM": _capi.DEVICE_ROCM,
        "FMOE_SHARD_W3": _capi.SHARD_W3,
        "FMOE_SHARD_FULL": _capi.SHARD_FULL,
        "FMOE_MAX_DIMS": _capi.MAX_DIMS,
        "FMOE_SCHEME_KEY_MAX": _capi.SCHEME_KEY_MAX,
        "FMOE_PLACEMENT_ROUND_ROBIN": _capi.PLACEMENT_ROUND_ROBIN,
        "FMOE_EP_MODE_INVALID": _capi.EP_MODE_INVALID,
        "FMOE_EP_MODE_LOW_LATENCY": _capi.EP_MODE_LOW_LATENCY,
        "FMOE_EP_MODE_HIGH_THROUGHPUT": _capi.EP_MODE_HIGH_THROUGHPUT,
        "FMOE_EP_DISPATCH_INVALID": _capi.EP_DISPATCH_INVALID,
        "FMOE_EP_DISPATCH_ACTIVATION": _capi.EP_DISPATCH_ACTIVATION,
        "FMOE_EP_DISPATCH_FP8_TOKEN": _capi.EP_DISPATCH_FP8_TOKEN,
        "FMOE_EP_DISPATCH_FP8_BLOCK": _capi.EP_DISPATCH_FP8_BLOCK,
        "FMOE_EP_UNIQUE_ID_BYTES": _capi.EP_UNIQUE_ID_BYTES,
    }
    for prefix_, table in (
        ("FMOE_VERDICT_", _capi.VERDICTS),
        ("FMOE_ROLE_", _capi.ROLES),
        ("FMOE_PLUGIN_STATE_", _capi.PLUGIN_STATES),
        ("FMOE_PROJ_", _capi.PROJECTIONS),
    ):
        for value, short in table.items():
            checks[prefix_ + short.upper()] = value
    for name, value in checks.items():
        assert f"#define {name} " in header, name
        defined = header.split(f"#define {name} ", 1)[1].split()[0].strip("()")
        assert int(defined) == value, name
