"""tools/bench_routing.py: the routing sets `fusedmoe bench --seed S` draws,
reproduced in Python for the peer harnesses.

The expected values were printed by the C code the port reproduces, not by the
port: cli/rng.c's cli_rng_fill_normal for the normals, and for the ids the
library's fmoe_reference_route on those logits with the bench's layer config
(renormalize = 1, softmax scoring), through a throwaway program linked against
libfusedmoe (session 53). Besides the values below, all 4 x 8192 x 256 logits
of DeepSeek-V3's M = 8192 sets at seed 1 hashed equal in both.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

import bench_routing as br  # noqa: E402


def test_normals_are_cli_rngs():
    got = br.normals(7, 7, "bench_logits", 5)
    want = [float.fromhex(h) for h in (
        "0x1.747dfep-2", "0x1.930034p+0", "-0x1.625fap-2", "0x1.05f8cep+0",
        "-0x1.318772p+0", "0x1.1fe2aep-3", "0x1.354c58p-1")]
    assert got.dtype == np.float32
    assert got.tolist() == want


def test_stream_depends_on_every_key():
    base = br.normals(4, 7, "bench_logits", 5)
    for other in (br.normals(4, 8, "bench_logits", 5), br.normals(4, 7, "bench_x", 5),
                  br.normals(4, 7, "bench_logits", 6)):
        assert not np.array_equal(base, other)
    # A prefix of a longer draw is the shorter draw (odd n ends mid-pair).
    assert np.array_equal(br.normals(9, 7, "bench_logits", 5)[:7], br.normals(7, 7, "bench_logits", 5))


@pytest.mark.parametrize("experts, top_k, tokens, seed, r, ids", [
    (16, 4, 3, 7, 1, [13, 9, 6, 12, 4, 15, 1, 3, 0, 6, 8, 10]),
    (128, 8, 2, 3, 3, [11, 39, 118, 6, 91, 115, 70, 15, 109, 60, 63, 12, 37, 107, 78, 110]),
])
def test_ids_are_the_reference_routers(experts, top_k, tokens, seed, r, ids):
    logits = br.normals(tokens * experts, seed, "bench_logits", br.set_index(tokens, r)).reshape(tokens, experts)
    got, w = br.route(logits, top_k)
    assert got.flatten().tolist() == ids
    assert np.allclose(w.sum(axis=1), 1.0, atol=1e-6)
    assert np.all(np.diff(w, axis=1) <= 0)  # descending, as the reference's slots


def test_weights_close_to_the_reference_routers():
    # fmoe_reference_route's first weights of the (16, 4, 3, seed 7, set 1) case (f32).
    logits = br.normals(48, 7, "bench_logits", br.set_index(3, 1)).reshape(3, 16)
    _, w = br.route(logits, 4)
    want = [0.538391709, 0.269257128, 0.105282769, 0.0870683864, 0.337080449, 0.311576247, 0.178513318, 0.172829971]
    assert np.allclose(w.flatten()[:8], want, rtol=1e-6, atol=0)


def test_deepseek_m16_set0_seed1():
    # The first 16 of the 128 ids the C code routed for DeepSeek-V3's shape (256, 8) at M = 16.
    sets = br.routing_sets(256, 8, 16, 1)
    assert len(sets) == br.ROUTING_SETS
    assert sets[0][0].flatten()[:16].tolist() == [201, 222, 80, 62, 30, 5, 180, 131,
                                                  69, 25, 40, 199, 166, 203, 247, 127]
    d = br.distinct_experts(sets)
    assert 64 <= d <= 128 and d == sum(len(set(ids.flatten().tolist())) for ids, _ in sets) / 4


def test_ties_go_to_the_lower_id():
    logits = np.array([[0.5, 2.0, 2.0, -1.0, 2.0]], dtype=np.float32)
    ids, w = br.route(logits, 2)
    assert ids.tolist() == [[1, 2]]
    assert w.tolist() == [[0.5, 0.5]]


def test_refusals():
    with pytest.raises(ValueError, match="routing set 4"):
        br.set_index(16, 4)
    with pytest.raises(ValueError, match="top_k 9 with 8 experts"):
        br.route(np.zeros((1, 8), dtype=np.float32) + 1.0, 9)
