"""The routing sets `fusedmoe bench --seed S` draws, in Python, so that a peer
harness (tools/bench_peers.py, tools/bench_vllm_triton.py) can time its layer
on the very routing our bench times ours on.

Why: the grid's small-M points are memory-bound and read the experts the
routing touches. With each harness drawing its own routing, DeepSeek-V3 at
M = 16 touched 104.75 distinct experts (of 256) in one run of ours and about
102 in the peer's, a 3 % difference in the bytes read, as large as the gaps
the comparison is about. With the same draws the two layers read the same
experts.

What is reproduced (cli/rng.c, cli/bench/cmd_bench.c, core/routing.c):
  - the stream (seed, "bench_logits", index): FNV-1a of the name, splitmix64
    finalizer mixing, splitmix64 steps, Box-Muller pairs (u1 in (0, 1],
    53-bit uniforms, cos first), each double rounded to f32;
  - set r of a point with M tokens is index M * ROUTING_SETS + r (cmd_bench.c's
    bench_routing_index), the logits [M, E] row-major;
  - the router the bench configures (softmax scoring, renormalized, no groups
    or bias): the top_k largest logits, descending, ties to the lower expert
    id, their softmax probabilities renormalized to sum to one.
The weights are computed in f64 and rounded to f32; the reference router works
in f32, so weights may differ from ours in the last bits (they are timing
inputs only). The ids are the same wherever the f32 logits are, and the logits
are the same values up to the platform's log/sin/cos (correctly rounded in
glibc and numpy alike for these arguments); a harness records the distinct
experts it touched, which tools/bench_plot.py compares with ours.

numpy is required (the device's torch environment has it).
"""
import numpy as np

ROUTING_SETS = 4  # cmd_bench.c's ROUTING_SETS: sets rotated between timed forwards
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M64 = (1 << 64) - 1


def _mix64_int(z):
    """splitmix64's finalizer on one Python int."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def _mix64(z):
    """splitmix64's finalizer on a uint64 array (wrapping products)."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def stream_state(seed, stream, index):
    """cli_rng_init's state for (seed, stream name, index)."""
    h = 0xCBF29CE484222325
    for b in stream.encode():
        h = ((h ^ b) * 0x100000001B3) & _M64
    return _mix64_int(seed ^ _mix64_int(h ^ _mix64_int((index + 0x9E3779B97F4A7C15) & _M64)))


def normals(n, seed, stream, index):
    """cli_rng_fill_normal(out, n, 1.0f, seed, stream, index) as float32."""
    pairs = (n + 1) // 2
    state = np.uint64(stream_state(seed, stream, index))
    steps = np.arange(1, 2 * pairs + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        raw = _mix64(state + steps * _GOLDEN)
    u1 = ((raw[0::2] >> np.uint64(11)) + np.uint64(1)).astype(np.float64) * 2.0**-53
    u2 = (raw[1::2] >> np.uint64(11)).astype(np.float64) * 2.0**-53
    radius = np.sqrt(-2.0 * np.log(u1))
    angle = 6.283185307179586476925 * u2
    out = np.empty(2 * pairs, dtype=np.float64)
    out[0::2] = radius * np.cos(angle)
    out[1::2] = radius * np.sin(angle)
    return out[:n].astype(np.float32)


def set_index(tokens, r):
    """The stream index of routing set r of a point with `tokens` tokens."""
    if not 0 <= r < ROUTING_SETS:
        raise ValueError("routing set %d: expected 0..%d" % (r, ROUTING_SETS - 1))
    return tokens * ROUTING_SETS + r


def route(logits, top_k):
    """The bench's router on f32 logits [M, E]: ids int64 [M, top_k] (largest
    logits first, ties to the lower id) and renormalized softmax weights f32."""
    m, e = logits.shape
    if not 0 < top_k <= e:
        raise ValueError("top_k %d with %d experts" % (top_k, e))
    # A stable sort of the negated logits keeps equal logits in id order.
    ids = np.argsort(-logits, axis=1, kind="stable")[:, :top_k]
    x = logits.astype(np.float64)
    p = np.exp(x - x.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    w = np.take_along_axis(p, ids, axis=1)
    w /= w.sum(axis=1, keepdims=True)
    return ids.astype(np.int64), w.astype(np.float32)


def routing_sets(experts, top_k, tokens, seed):
    """The ROUTING_SETS (ids, weights) pairs `fusedmoe bench --seed SEED` times a
    layer of `experts` experts and top-k `top_k` on at M = `tokens`."""
    sets = []
    for r in range(ROUTING_SETS):
        logits = normals(tokens * experts, seed, "bench_logits", set_index(tokens, r)).reshape(tokens, experts)
        sets.append(route(logits, top_k))
    return sets


def distinct_experts(sets):
    """The distinct experts a point's sets touch, averaged (the bench's `distinct_experts`)."""
    return sum(len(np.unique(ids)) for ids, _ in sets) / len(sets)
