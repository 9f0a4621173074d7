#!/usr/bin/env bash
# Pack what a MegaMoE device run needs from a build directory into
# ${DEVRUN:-.devrun-mm}/b.tar.gz (git-ignored: .devrun*), for the device
# tool's carried tree. The build tree's layout is kept, so on the device
#   tar -C DIR -xzf DIR/b.tar.gz && ln -sfn DIR/b BUILD_DIR
# makes the paths compiled into the tests (the plugin's path) valid again.
# From the repository root:  bash bench/megamoe/pack.sh BUILD_DIR
set -euo pipefail
B=${1:?usage: pack.sh BUILD_DIR}
R=${DEVRUN:-.devrun-mm}
D=$R/b
rm -rf "$D" && mkdir -p "$D"/cli "$D"/plugins/reference "$D"/plugins/megamoe "$D"/tests/megamoe "$R"/lib
find "$B" -maxdepth 1 -name "libfusedmoe.so*" ! -type d -exec cp -a {} "$D"/ \;
cp "$B"/cli/fusedmoe "$D"/cli/
cp "$B"/plugins/reference/libfmoe-reference.so "$B"/plugins/reference/reference.toml "$D"/plugins/reference/
cp "$B"/plugins/megamoe/libfmoe-megamoe.so "$B"/plugins/megamoe/megamoe.toml "$D"/plugins/megamoe/
for t in test_megamoe_method test_megamoe_sm90_plan; do
  [ -x "$B"/tests/megamoe/$t ] && cp "$B"/tests/megamoe/$t "$D"/tests/megamoe/
done
for lib in libjansson.so.4 libtomlplusplus.so.3 libsubunit.so.0 libcheck.so.0; do
  cp -L "/lib/x86_64-linux-gnu/$lib" "$R"/lib/ 2>/dev/null || true
done
find "$D" -type f \( -name "*.so*" -o -perm -u+x \) -exec strip --strip-debug {} + 2>/dev/null || true
tar -C "$R" -czf "$R"/b.tar.gz b && rm -rf "$D"
du -sh "$R"
