"""One EP rank in its own process (one process per device), for test_ep.py.

Kept apart from the test module so that a spawned child imports only numpy
and fusedmoe: the arguments and the result are plain picklable data.
"""

from __future__ import annotations

import numpy as np

import fusedmoe


def rank_main(job: dict) -> np.ndarray:
    """Join the group with the id rank 0 made, load every expert by its global
    id (the layer keeps its own), forward this rank's tokens, return out."""
    fusedmoe.load_library(prefix=job["prefix"])
    with fusedmoe.Context(plugins=[job["manifest"]], isolated=True, ignore_environment=True) as ctx:
        cfg = fusedmoe.LayerConfig(**job["config"])
        with ctx.ep_group(rank=job["rank"], size=job["size"], unique_id=job["unique_id"], **job["group"]) as g:
            layer = ctx.layer(cfg, "f32", ep_group=g)
            w13, w2 = job["w13"], job["w2"]
            for e in range(w13.shape[0]):
                layer.load("w13_weight", w13[e], expert=e)
                layer.load("w2_weight", w2[e], expert=e)
            layer.finalize()
            out = layer.forward(job["x"], job["w"], job["ids"])
            return np.array(out, copy=True)
