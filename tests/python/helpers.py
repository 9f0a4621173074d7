"""Reference math and array stand-ins shared by the tests."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import pytest

import fusedmoe


def silu(v: np.ndarray) -> np.ndarray:
    return v / (1.0 + np.exp(-v))


def moe_reference(x, w13, w2, topk_weights, topk_ids) -> np.ndarray:
    """Gated-SiLU experts in float64: out[t] = sum_j w[t,j] * W2[e] (silu(g) * u),
    [g; u] = W13[e] x[t]; the semantics of docs/ROUTING.md."""
    x, w13, w2 = (np.asarray(a, dtype=np.float64) for a in (x, w13, w2))
    inter = w13.shape[1] // 2
    out = np.zeros((x.shape[0], w2.shape[1]))
    for t in range(x.shape[0]):
        for j in range(topk_ids.shape[1]):
            e = int(topk_ids[t, j])
            h = w13[e] @ x[t]
            out[t] += float(topk_weights[t, j]) * (w2[e] @ (silu(h[:inter]) * h[inter:]))
    return out


def softmax_topk(logits: np.ndarray, k: int, renormalize: bool) -> tuple[np.ndarray, np.ndarray]:
    """Softmax routing: top-k probabilities (lower id wins ties), optionally renormalized."""
    z = logits.astype(np.float64)
    p = np.exp(z - z.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    ids = np.argsort(-p, axis=-1, kind="stable")[:, :k]
    w = np.take_along_axis(p, ids, -1)
    if renormalize:
        w /= w.sum(-1, keepdims=True)
    return w.astype(np.float32), ids.astype(np.int32)


def random_routing(rng: np.random.Generator, m: int, e: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """k distinct experts per token and positive weights summing to 1."""
    ids = np.stack([rng.choice(e, size=k, replace=False) for _ in range(m)]).astype(np.int32)
    w = rng.uniform(0.2, 1.0, size=(m, k)).astype(np.float32)
    return (w / w.sum(-1, keepdims=True)).astype(np.float32), ids


def random_weights(rng: np.random.Generator, e: int, h: int, i: int) -> tuple[np.ndarray, np.ndarray]:
    """w13 [E, 2I, H] and w2 [E, H, I], std 1/sqrt(fan-in) (non-zero, O(1) outputs)."""
    w13 = (rng.standard_normal((e, 2 * i, h)) / np.sqrt(h)).astype(np.float32)
    w2 = (rng.standard_normal((e, h, i)) / np.sqrt(i)).astype(np.float32)
    return w13, w2


def expect_error(status: int, *fragments: str):
    """pytest.raises for FusedMoEError with `status` and every fragment in the message."""

    class _Check:
        def __enter__(self):
            self.ctx = pytest.raises(fusedmoe.FusedMoEError)
            self.info = self.ctx.__enter__()
            return self.info

        def __exit__(self, *exc):
            suppressed = self.ctx.__exit__(*exc)
            err = self.info.value
            assert err.status == status, f"status {err.status_name}, expected {status}: {err.message}"
            for f in fragments:
                assert f in err.message, f"'{f}' not in: {err.message}"
            return suppressed

    return _Check()


class DLPackOnly:
    """An array known to fusedmoe only through the DLPack protocol.

    legacy=True: a producer from before DLPack 1.0 (no max_version)."""

    def __init__(self, array: Any, legacy: bool = False) -> None:
        self._a = array
        self._legacy = legacy
        self.calls: list[dict] = []

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()

    def __dlpack__(self, stream=None, **kwargs):
        self.calls.append(dict(stream=stream, **kwargs))
        if self._legacy:
            if kwargs:
                raise TypeError("__dlpack__() got an unexpected keyword argument")
            return self._a.__dlpack__(stream=stream)
        return self._a.__dlpack__(stream=stream, **kwargs)


# --- a DLPack array that claims to live on a CUDA device -------------------
# fusedmoe must refuse it for a host layer before touching its memory; the
# data pointer is a real host buffer all the same, so a missing check shows
# up as a wrong result rather than a crash.


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

_NUMPY_DL = {np.dtype("float32"): (2, 32), np.dtype("int32"): (0, 32), np.dtype("float16"): (2, 16)}


class FakeCudaArray:
    """A numpy array presented through legacy DLPack as if on cuda:`index`."""

    def __init__(self, array: np.ndarray, index: int = 0) -> None:
        self.array = np.ascontiguousarray(array)
        self.index = index
        n = self.array.ndim
        self._shape = (ctypes.c_int64 * n)(*self.array.shape)
        self._strides = (ctypes.c_int64 * n)(*(s // self.array.itemsize for s in self.array.strides))
        code, bits = _NUMPY_DL[self.array.dtype]
        self._managed = _DLManagedTensor()
        t = self._managed.dl_tensor
        t.data = self.array.ctypes.data
        t.device = _DLDevice(2, index)
        t.ndim = n
        t.dtype = _DLDataType(code, bits, 1)
        t.shape = self._shape
        t.strides = self._strides
        self.streams: list = []

    def __dlpack_device__(self):
        return (2, self.index)

    def __dlpack__(self, stream=None):  # legacy: no max_version
        self.streams.append(stream)
        return _capsule_new(ctypes.addressof(self._managed), b"dltensor", None)
