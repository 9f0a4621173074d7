"""Arrays in: DLPack and torch descriptors, dtype by dtype, and round trips
through a layer of arrays fusedmoe sees only through DLPack."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fusedmoe
from fusedmoe._tensor import describe
from helpers import DLPackOnly, expect_error, random_routing, random_weights

# torch dtype -> the fusedmoe name the descriptor must carry
TORCH = {
    torch.float32: "f32",
    torch.bfloat16: "bf16",
    torch.float16: "f16",
    torch.float64: "f64",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.int8: "int8",
    torch.uint8: "uint8",
    torch.float8_e4m3fn: "fp8_e4m3fn",
    torch.float8_e5m2: "fp8_e5m2",
}
NUMPY = {
    "float32": "f32",
    "float16": "f16",
    "float64": "f64",
    "int32": "int32",
    "int64": "int64",
    "int8": "int8",
    "uint8": "uint8",
}


def fields(d):
    return (d.dtype_name, d.shape, d.strides, d.data, str(d.device))


@pytest.mark.parametrize("dtype", list(TORCH), ids=[str(t).replace("torch.", "") for t in TORCH])
def test_torch_direct_equals_dlpack(lib_info, dtype, rng):
    """The torch fast path reads what DLPack would say, for a strided view."""
    base = torch.from_numpy(rng.standard_normal((6, 10)).astype(np.float32) * 4).to(dtype)
    view = base[1:5, 2:9:3]  # byte offset and non-unit strides
    direct = describe(view, "t")
    via = describe(view, "t", via_dlpack=True)
    assert fields(direct) == fields(via)
    assert direct.dtype_name == TORCH[dtype]
    assert direct.shape == (4, 3) and direct.strides == (10, 3)
    assert direct.data == view.data_ptr() == base.data_ptr() + (1 * 10 + 2) * base.element_size()


@pytest.mark.parametrize("name", list(NUMPY))
def test_numpy_descriptor(lib_info, name, rng):
    a = (rng.standard_normal((5, 8)) * 10).astype(name)
    view = a[1:, ::2]
    d = describe(view, "a")
    assert d.dtype_name == NUMPY[name]
    assert d.shape == (4, 4)
    assert d.strides == tuple(s // a.itemsize for s in view.strides) == (8, 2)
    assert d.data == view.ctypes.data
    assert str(d.device) == "cpu:0"


def test_legacy_producer(lib_info, rng):
    """A producer without max_version (DLPack < 1.0) still works."""
    a = rng.standard_normal((3, 4)).astype(np.float32)
    wrapped = DLPackOnly(a, legacy=True)
    d = describe(wrapped, "a")
    assert d.data == a.ctypes.data and d.shape == (3, 4)
    assert wrapped.calls == [{"stream": None, "max_version": (1, 0)}, {"stream": None}]


def test_unsupported_dtypes(lib_info):
    with expect_error(fusedmoe.FusedMoEError.INVALID_ARGUMENT, "a:", "has no fusedmoe dtype"):
        describe(np.zeros(3, np.complex64), "a")
    with expect_error(fusedmoe.FusedMoEError.INVALID_ARGUMENT, "a:", "has no fusedmoe dtype"):
        describe(torch.zeros(3, dtype=torch.bool), "a")


def test_dtype_override(lib_info):
    """Packed formats held as uint8 are viewed as the parameter's dtype."""
    d = describe(np.zeros((2, 3), np.uint8), "w", as_dtype=12)  # FMOE_DTYPE_FP4_E2M1X2
    assert d.dtype_name == "fp4_e2m1x2"


E, K, H, I, M = 4, 2, 32, 16, 5


@pytest.mark.parametrize("dtype", ["f32", "bf16", "f16"])
def test_layer_round_trip_through_dlpack(ref_ctx, dtype, rng, seed):
    """Weights, x, routing and out handed over only as DLPack capsules give
    bit for bit what the same torch tensors give."""
    td = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    cfg = fusedmoe.LayerConfig(num_experts=E, top_k=K, hidden_size=H, intermediate_size=I, act_dtype=dtype)
    w13, w2 = (torch.from_numpy(a).to(td) for a in random_weights(rng, E, H, I))
    x = torch.from_numpy(rng.standard_normal((M, H)).astype(np.float32)).to(td)
    w, ids = (torch.from_numpy(a) for a in random_routing(rng, M, E, K))

    a = ref_ctx.layer(cfg, dtype)
    a.load("w13_weight", w13)
    a.load("w2_weight", w2)
    a.finalize()
    want = a.forward(x, w, ids)

    b = ref_ctx.layer(cfg, dtype)
    b.load("w13_weight", DLPackOnly(w13))
    b.load("w2_weight", DLPackOnly(w2))
    b.finalize()
    out = torch.full((M, H), float("nan"), dtype=td)
    wrapped = [DLPackOnly(t) for t in (x, w, ids, out)]
    b.forward(*wrapped[:3], out=wrapped[3])
    assert torch.equal(out, want), f"seed {seed}"
    assert all(c.calls for c in wrapped), "every tensor went through __dlpack__"
    assert want.abs().max() > 0.05, f"seed {seed}: output nearly zero"
    # a DLPack-only x without out: fusedmoe cannot allocate one like it
    with expect_error(fusedmoe.FusedMoEError.INVALID_ARGUMENT, "out: pass it explicitly"):
        b.forward(DLPackOnly(x), w, ids)
