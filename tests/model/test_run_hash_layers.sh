#!/usr/bin/env bash
# tests/model/test_run_hash_layers.sh FUSEDMOE REFERENCE_MANIFEST V4_DIR -
# `fusedmoe run --model` on a DeepSeek-V4 checkpoint whose first layers are
# hash-routed (experts picked by tid2eid[input_ids], which no layer routed
# from logits can do): those layers are listed as skipped with the model's
# reason and the others run; naming one with --layer, or a model whose every
# MoE layer is hash-routed, is refused. The bundled V4 fixture (V4_DIR) with
# num_hash_layers 0 is copied and its config edited. TAP on stdout.
set -u
cli=$1
ref=$2
src=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fmoe-hash.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../tap.sh"
unset FMOE_OPTIONS FMOE_BACKENDS FMOE_CONFIG FMOE_PLUGIN_PATH FMOE_PLUGIN_FILES
model() { # model DIR HASH_LAYERS: the fixture with num_hash_layers set
    mkdir -p "$1" && cp "$src"/*.safetensors "$1"/ &&
        sed "s/\"num_hash_layers\": 0/\"num_hash_layers\": $2/" "$src/config.json" >"$1/config.json"
    grep -q "\"num_hash_layers\": $2" "$1/config.json"
}
fm() { "$cli" --isolated --plugin "$ref" "$@" >"$tmp/out" 2>&1; }

ok=0; model "$tmp/h1" 1 && model "$tmp/h2" 2 && ok=1
check "the fixture edited: num_hash_layers 1 and 2"

fm run --model "$tmp/h1"
rc=$?; ok=0
[ $rc = 0 ] && grep -q '^1  .* PASS$' "$tmp/out" && ! grep -q '^0  ' "$tmp/out" &&
    grep -q '^skipped: layer 0: .*layer 0 is hash-routed (num_hash_layers)' "$tmp/out" && ok=1
check "run --model: hash-routed layer 0 skipped with the reason, layer 1 PASS, exit 0"

fm run --model "$tmp/h1" --json
rc=$?; ok=0
[ $rc = 0 ] && python3 - "$tmp/out" <<'PY' && ok=1
import json, sys
d = json.load(open(sys.argv[1]))
assert [l["layer"] for l in d["layers"]] == [1] and d["layers"][0]["result"] == "PASS", d["layers"]
assert [s["layer"] for s in d["skipped"]] == [0] and "hash-routed" in d["skipped"][0]["why"], d["skipped"]
assert d["result"] == "PASS"
PY
check "run --model --json: layers [1], skipped [0] with its reason"

fm run --model "$tmp/h1" --layer 0
rc=$?; ok=0; [ $rc = 4 ] && grep -q 'layer 0 is hash-routed' "$tmp/out" && ok=1
check "run --model --layer 0 (hash-routed): refused with the reason, exit 4"

fm run --model "$tmp/h2"
rc=$?; ok=0; [ $rc = 4 ] && grep -q 'every MoE layer is left out; layer 0: .*hash-routed' "$tmp/out" && ok=1
check "run --model with every MoE layer hash-routed: refused, exit 4"

fm run --model "$src"
rc=$?; ok=0; [ $rc = 0 ] && ! grep -q '^skipped' "$tmp/out" && [ "$(grep -c ' PASS$' "$tmp/out")" = 2 ] && ok=1
check "run --model on the fixture as bundled (no hash layers): both layers PASS, nothing skipped"

tap_end
