#!/usr/bin/env bash
# The include direction of docs/LAYERS.md: base/ sees only the public
# headers, registry/ sees base/, and plugins and examples see only what a
# vendor's plugin can (plugin.h and the kit). Prints each offending line.
set -euo pipefail
root=${1:?usage: check_layers.sh SOURCE_ROOT}
cd "$root"
bad=0
check() { # description, folders, forbidden include pattern
  local what=$1 dirs=$2 pattern=$3 hits
  # shellcheck disable=SC2086
  hits=$(grep -rnE "#include \"($pattern)/" $dirs --include='*.c' --include='*.h' --include='*.cpp' \
           --include='*.cu' --include='*.cuh' || true)
  if [ -n "$hits" ]; then
    echo "not ok - $what"; echo "$hits" | sed 's/^/# /'; bad=1
  else
    echo "ok - $what"
  fi
}
echo "1..3"
check "base/ includes only public headers" "base" "core|registry|cli|plugins"
check "registry/ includes base/ and public headers, never core/" "registry" "core|cli|plugins"
check "plugins and the vendor example use plugin.h and the kit only" "plugins examples" "core|registry|base|cli"
exit $bad
