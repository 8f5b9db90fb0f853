#!/usr/bin/env bash
# Builds the Debian package of a native release tree with CPack (dependencies from
# dpkg-shlibdeps; cmake/Packaging.cmake). The tree must be configured already -- by default
# build/release, which scripts/build.sh (and so scripts/test.sh in CI) produces; it is brought up
# to date first (a no-op after scripts/build.sh).
#
#   scripts/package-deb.sh [BUILD_DIR]      (default build/release)
#
# Prints the .deb's path on the last line.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "${1:-$root/build/release}" && pwd)"
[[ -f "$build/CPackConfig.cmake" ]] || { echo "package-deb: $build is not a configured tree" >&2; exit 1; }
t0=$(date +%s)
cmake --build "$build" -j "${SEEDVAE_JOBS:-2}" >&2
t1=$(date +%s)
rm -f "$build"/seedvae-studio_*.deb
(cd "$build" && cpack -G DEB >&2)
t2=$(date +%s)
deb=$(ls "$build"/seedvae-studio_*.deb)
echo "times: build check $((t1 - t0)) s, cpack $((t2 - t1)) s; $(du -h "$deb" | cut -f1) package" >&2
echo "$deb"
