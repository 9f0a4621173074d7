#!/usr/bin/env bash
# Set up and run the main job: install dependencies, build, install into
# ./_install, and run `fusedmoe run` (through the selected backend, checked
# against the reference). Extra arguments go to `fusedmoe run`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh
if [ -f build/build.ninja ]; then
  meson configure build --prefix="$PWD/_install" >/dev/null
else
  meson setup build --prefix="$PWD/_install" >/dev/null
fi
meson compile -C build
meson install -C build --quiet
exec _install/bin/fusedmoe run "$@"
