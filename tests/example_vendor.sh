#!/usr/bin/env bash
# Build examples/vendor-plugin against the fusedmoe installed at $1, put it
# in a directory of its own, point a TOML file at that directory, and check
# that the installed `fusedmoe` loads it, selects it and runs it correctly.
set -euo pipefail
prefix=$1
src="$(cd "$(dirname "$0")/.." && pwd)/examples/vendor-plugin"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

pcdir=$(dirname "$(find "$prefix" -name fusedmoe-plugin.pc | head -n1)")
PKG_CONFIG_PATH="$pcdir" meson setup "$work/build" "$src" >/dev/null
ninja -C "$work/build" >/dev/null

mkdir "$work/vendor"
cp "$work/build/libfmoe-example-vendor.so" "$work/build/example_vendor.toml" "$work/vendor/"
cat > "$work/fusedmoe.toml" <<TOML
[search]
paths = ["$work/vendor"]
[select.schemes]
"f32" = "example_vendor"
TOML

fusedmoe="$prefix/bin/fusedmoe"
check() { # description, command...
  local what=$1; shift
  if ! out=$("$@" 2>&1); then echo "FAIL: $what"; echo "$out"; exit 1; fi
  echo "ok: $what"
}
check "installed fusedmoe lists the vendor plugin as loaded" \
  bash -c "'$fusedmoe' --config '$work/fusedmoe.toml' plugins | grep -E '^example_vendor +1\.0\.0 .*loaded'"
check "the TOML names it for f32 and explain selects it" \
  bash -c "'$fusedmoe' --config '$work/fusedmoe.toml' explain --scheme f32 --dtype f32 | grep -E 'example_vendor.*selected'"
check "run through the vendor plugin matches the reference" \
  "$fusedmoe" --config "$work/fusedmoe.toml" run --scheme f32 --dtype f32
check "the vendor plugin passes every conformance mode (it is the template vendors copy)" \
  "$fusedmoe" --config "$work/fusedmoe.toml" conform --plugin example_vendor --seed 1
check "its declared option is listed with its value, source and domain" \
  bash -c "'$fusedmoe' --config '$work/fusedmoe.toml' plugins --verbose | grep -F 'option   score = 50 (default; int 1..100'"
cat > "$work/bad-option.toml" <<TOML
[search]
paths = ["$work/vendor"]
[plugins.example_vendor.options]
score = 101
TOML
check "a value outside the option's domain fails the plugin, naming the option" \
  bash -c "'$fusedmoe' --config '$work/bad-option.toml' plugins | grep -F 'expected an integer in 1..100'"
check "the vendor plugin refuses a layer it cannot serve, strictly" \
  bash -c "! '$fusedmoe' --config '$work/fusedmoe.toml' explain --scheme f32 --dtype f32 --bias"
check "with no --config the installed default fusedmoe.toml is used" \
  bash -c "'$fusedmoe' plugins | grep -Fx 'config: $prefix/share/fusedmoe/fusedmoe.toml'"
check "the installed reference plugin is found beside libfusedmoe and loads" \
  bash -c "'$fusedmoe' plugins | grep -E '^reference +[0-9.]+ +1\.[0-9]+ +loaded'"
# Every installed plugin; the rocm plugin's kernel library beside it
# (libfmoe-rocm-kernels.so, dlopen'd by the plugin) is not one.
for so in "$work/vendor/libfmoe-example-vendor.so" $(find "$prefix" -name 'libfmoe-*.so' ! -name '*-kernels.so'); do
  check "$(basename "$so") exports exactly fmoe_plugin_entry" \
    bash -c "[ \"\$(nm -D --defined-only '$so' | awk '{print \$3}')\" = fmoe_plugin_entry ]"
done
