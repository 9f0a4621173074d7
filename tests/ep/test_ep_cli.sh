#!/usr/bin/env bash
# tests/ep/test_ep_cli.sh FUSEDMOE REFERENCE_MANIFEST - the CLI's expert
# parallelism (docs/EP.md, docs/CLI.md) on the reference plugin's groups:
# `run --gpus N` for N = 2, 3, 4 on bf16 and FP8 layers with EPLB and FP8
# dispatch, the multi-process form (2 and 3 processes, the unique-id file,
# its bounded waits), usage errors, `conform --mode ep` and `bench --gpus`. TAP on stdout;
# the seed is printed.
set -u
cli=$1
ref=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fmoe-ep-cli.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
seed=$(( ($(date +%s) * 7919 + $$) % 1000000 ))
. "$(dirname "$0")/../tap.sh"
echo "# seed $seed"
TAP_NOTE="seed $seed"
unset FMOE_OPTIONS FMOE_BACKENDS FMOE_CONFIG FMOE_PLUGIN_PATH FMOE_PLUGIN_FILES
fm() { "$cli" --plugin "$ref" "$@" >"$tmp/out" 2>&1; }

for ranks in 2 3 4; do
    fm run --gpus "$ranks" --seed "$seed" --tokens 5 --hidden 128 --intermediate 128
    rc=$?
    ok=0
    [ $rc = 0 ] && grep -q '^result:     PASS' "$tmp/out" && grep -q "^ep:         $ranks ranks (threads" "$tmp/out" &&
        [ "$(grep -c '^rank ' "$tmp/out")" = "$ranks" ] && grep -q 'dispatch .* ms, experts .* ms, combine' "$tmp/out" && ok=1
    check "run --gpus $ranks: bf16 PASS against the one-device reference, per-rank phase times"
done

fm run --gpus 2 --seed "$seed" --tokens 4 --scheme fp8e4m3:block128x128/fp8e4m3:group128:dynamic \
    --hidden 256 --intermediate 256 --eplb --redundant 2 --ep-dispatch fp8_block
rc=$?; ok=0; [ $rc = 0 ] && grep -q '^max abs:    0.000e+00' "$tmp/out" && grep -q 'dispatch fp8_block' "$tmp/out" && ok=1
check "run --gpus 2: block FP8 with EPLB replicas and FP8 1x128 dispatch equals the reference exactly"

fm run --gpus 4 --seed "$seed" --tokens 3 --scheme fp8e4m3:channel/fp8e4m3:token:dynamic --placement round_robin \
    --ep-mode high_throughput --json
rc=$?; ok=0; [ $rc = 0 ] && grep -q '"pass": true' "$tmp/out" && ok=1
check "run --gpus 4 --json: channel FP8, round-robin placement, high-throughput mode"

# The multi-process form: N processes, rank 0 writes the id, the others
# read it; each checks its own rows (bit for bit: max abs 0).
for ranks in 2 3; do
    rm -f "$tmp/id"
    pids=""
    for r in $(seq 1 $((ranks - 1))); do
        "$cli" --plugin "$ref" run --ep "$ranks" --ep-rank "$r" --ep-id-file "$tmp/id" --ep-wait-ms 30000 \
            --seed "$seed" --tokens 3 --hidden 128 --intermediate 128 --placement round_robin >"$tmp/r$r" 2>&1 &
        pids="$pids $!"
    done
    fm run --ep "$ranks" --ep-rank 0 --ep-id-file "$tmp/id" --seed "$seed" --tokens 3 --hidden 128 \
        --intermediate 128 --placement round_robin
    rc0=$?
    ok=1
    [ $rc0 = 0 ] && grep -q '^max abs:    0.000e+00' "$tmp/out" && grep -q 'one process each' "$tmp/out" || ok=0
    for p in $pids; do wait "$p" || ok=0; done
    for r in $(seq 1 $((ranks - 1))); do
        cat "$tmp/r$r" >>"$tmp/out"
        grep -q '^max abs:    0.000e+00' "$tmp/r$r" && grep -q "this process ran rank $r\$" "$tmp/r$r" || ok=0
    done
    [ "$(wc -c <"$tmp/id")" = 256 ] || ok=0
    check "--ep-id-file: $ranks processes on one machine, each rank equal to the reference bit for bit"
done

# A rank > 0 alone: rank 0 never joins, the others fail after ep_timeout_ms naming it.
rm -f "$tmp/id"
FMOE_OPTIONS=reference.ep_timeout_ms=300 "$cli" --plugin "$ref" run --ep 2 --ep-rank 0 --ep-id-file "$tmp/id" \
    --seed "$seed" --tokens 2 >"$tmp/out" 2>&1
rc=$?; ok=0
[ $rc != 0 ] && grep -q 'rank(s) 1 of 2 never joined' "$tmp/out" && ok=1
check "--ep-id-file: rank 0 without its peers fails after ep_timeout_ms naming rank 1"

fm run --ep 2 --ep-rank 1 --ep-id-file "$tmp/none" --ep-wait-ms 200 --seed "$seed"
rc=$?; ok=0; [ $rc = 3 ] && grep -q 'did not write the unique id within 200 ms' "$tmp/out" && ok=1
check "--ep-id-file: a rank waits for the file at most --ep-wait-ms"

fm run --ep 2 --ep-rank 0 --ep-id-file "$tmp/id" --tokens 2
rc=$?; ok=0; [ $rc = 2 ] && grep -q 'give all ranks the same --seed N' "$tmp/out" && ok=1
check "--ep-id-file without --seed is a usage error (each process draws the layer)"

fm run --gpus 2 --ep 2 --ep-rank 1
rc=$?; ok=0; [ $rc = 2 ] && grep -q 'give one form' "$tmp/out" && ok=1
check "--gpus with --ep N is a usage error"
fm run --gpus 0
rc=$?; ok=0; [ $rc = 2 ] && ok=1
check "--gpus 0 is a usage error"
fm run --gpus 2 --logits
rc=$?; ok=0; [ $rc = 2 ] && grep -q 'travels with the tokens' "$tmp/out" && ok=1
check "--gpus with --logits is a usage error"
fm run --gpus 2 --ep-dispatch fp8
rc=$?; ok=0; [ $rc = 2 ] && ok=1
check "an unknown --ep-dispatch is a usage error"
fm run --gpus 2 --ep-mode fast
rc=$?; ok=0; [ $rc = 2 ] && grep -q -- '--ep-mode: expected low_latency or high_throughput' "$tmp/out" && ok=1
check "an unknown --ep-mode is a usage error naming the modes (run)"
fm bench --gpus 2 --ep-mode prefill
rc=$?; ok=0; [ $rc = 2 ] && grep -q -- '--ep-mode: expected low_latency or high_throughput' "$tmp/out" && ok=1
check "an unknown --ep-mode is a usage error naming the modes (bench)"
fm bench --gpus 2 --tokens 4,16 --ep-max-tokens 8
rc=$?; ok=0; [ $rc = 2 ] && grep -q -- '--tokens 16 exceeds --ep-max-tokens 8' "$tmp/out" && ok=1
check "bench --ep-max-tokens below a --tokens value is a usage error naming both"
fm bench --ep-max-tokens 8
rc=$?; ok=0; [ $rc = 2 ] && grep -q -- '--ep-max-tokens sizes an EP group: it needs --gpus' "$tmp/out" && ok=1
check "bench --ep-max-tokens without --gpus is a usage error"

fm conform --plugin reference --mode ep --seed "$seed"
rc=$?; ok=0
[ $rc = 0 ] && grep -Eq '^reference +ep +[1-9][0-9]* +0 +' "$tmp/out" && ok=1
check "conform --mode ep: the reference's N-rank groups equal one device for every scheme"

fm bench --gpus 2 --shape 8,2,128,128 --tokens 2,4 --iters 3 --seed "$seed" --json "$tmp/ep-bench.json"
rc=$?; ok=0
[ $rc = 0 ] && grep -q '^ep:        2 ranks' "$tmp/out" &&
    [ "$(grep -Ec '^8,2,128,128 +8 +[24] +[0-9.]+ +- +- +[1-4] +[0-9.]+ +[0-9.]+ +[0-9.]+$' "$tmp/out")" = 2 ] && ok=1
check "bench --gpus 2: layer time, no graph or floor on a host plugin, the busiest rank's experts, the split"

# The record: the group, and each point's times as the table printed them.
ok=0
python3 - "$tmp/ep-bench.json" "$tmp/out" "$seed" <<'PY' && ok=1
import json, re, sys
rec = json.load(open(sys.argv[1]))
table = [l.split() for l in open(sys.argv[2]) if re.match(r"^8,2,128,128 ", l)]
assert rec["seed"] == int(sys.argv[3]), rec["seed"]
assert rec["scheme"] == "bf16" and rec["command"].startswith("fusedmoe bench --gpus 2"), rec
ep = rec["ep"]
assert ep == {"ranks": 2, "dispatch": "activation", "mode": "low_latency", "max_tokens_per_rank": None,
              "forwards_per_graph": 8, "forwards_timed": 3}, ep
pts = rec["points"]
assert [p["tokens_per_rank"] for p in pts] == [2, 4] and len(table) == 2, (pts, table)
for p, row in zip(pts, table):
    assert (p["shape"], p["experts"], p["top_k"], p["hidden"], p["intermediate"]) == ("8,2,128,128", 8, 2, 128, 128), p
    assert p["graph_us"] is None and row[4] == "-", (p, row)  # a host plugin replays no graph
    assert p["floor_us"] is None and row[5] == "-", (p, row)  # and measures no device rate
    # 4 experts a rank; 2 x M tokens of top-2 touch at least one on the busiest rank
    assert 1 <= p["slowest_rank_experts"] <= 4 and row[6] == str(p["slowest_rank_experts"]), (p, row)
    for key, col in (("layer_us", 3), ("dispatch_us", 7), ("experts_us", 8), ("combine_us", 9)):
        assert p[key] > 0 and abs(p[key] - float(row[col])) <= 0.05 + 1e-6 * p[key], (key, p[key], row)
PY
check "bench --gpus 2 --json: the group and each point's times, as the table printed them"

fm bench --gpus 2 --shape 8,2,128,128 --tokens 2,4 --iters 3 --seed "$seed" --ep-mode high_throughput --ep-max-tokens 8
rc=$?; ok=0
[ $rc = 0 ] && grep -q '^ep:        2 ranks, dispatch activation, mode high_throughput, max_tokens_per_rank 8' "$tmp/out" &&
    [ "$(grep -Ec '^8,2,128,128 +8 +[24] +[0-9.]+ +- +- +[1-4] +[0-9.]+ +[0-9.]+ +[0-9.]+$' "$tmp/out")" = 2 ] && ok=1
check "bench --gpus 2 --ep-mode high_throughput --ep-max-tokens 8: a group sized beyond the tokens passed"

tap_end
