#!/usr/bin/env bash
# Builds and tests both packages (CI runs it after scripts/test.sh; see packaging/README.md):
#   1. scripts/install-packaging-deps.sh (root; idempotent): mingw-w64, nsis, wine, Eigen, ...
#   2. Windows: scripts/package-windows.sh (mingw-w64 cross build of the CLI into build-mingw,
#      cpack -G NSIS), then tests/packaging/test-nsis-wine.sh (install, run, uninstall under wine);
#   3. Linux: scripts/package-deb.sh on the release tree (default build/release, built by
#      scripts/test.sh), then tests/packaging/test-deb.sh.
# Prints the time of every step.
#
#   scripts/test-packages.sh [--system-install] [--deb-tree DIR] [--mingw-tree DIR] [--skip-windows] [--skip-deb]
#
# --system-install also installs the .deb with dpkg -i and removes it again (root; CI).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
deb_tree="$root/build/release"
mingw_tree="$root/build-mingw"
deb_args=()
windows=1
debian=1
while (($#)); do
  case "$1" in
    --system-install) deb_args+=(--system-install) ;;
    --deb-tree) deb_tree="$2"; shift ;;
    --mingw-tree) mingw_tree="$2"; shift ;;
    --skip-windows) windows=0 ;;
    --skip-deb) debian=0 ;;
    *) echo "usage: $0 [--system-install] [--deb-tree DIR] [--mingw-tree DIR] [--skip-windows] [--skip-deb]" >&2; exit 2 ;;
  esac
  shift
done

summary=()
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
step() {  # step NAME COMMAND...: runs it (stdout to $out), records its time
  local name=$1 t0
  shift
  echo "==== $name" >&2
  t0=$(date +%s)
  "$@" >"$out"
  summary+=("$(printf '%-34s %4d s' "$name" $(($(date +%s) - t0)))")
  cat "$out"
}

if [[ $EUID == 0 ]]; then
  step "install packaging dependencies" ./scripts/install-packaging-deps.sh
fi
if [[ $windows == 1 ]]; then
  step "windows: cross build + NSIS" ./scripts/package-windows.sh "$mingw_tree"
  installer=$(tail -n 1 "$out")
  step "windows: installer test (wine)" ./tests/packaging/test-nsis-wine.sh "$installer"
fi
if [[ $debian == 1 ]]; then
  step "linux: cpack -G DEB" ./scripts/package-deb.sh "$deb_tree"
  deb=$(tail -n 1 "$out")
  export QT_QPA_PLATFORM=offscreen
  step "linux: package test" ./tests/packaging/test-deb.sh "${deb_args[@]}" "$deb"
fi
echo "==== packaging steps"
printf '%s\n' "${summary[@]}"
