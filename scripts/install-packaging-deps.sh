#!/usr/bin/env bash
# Installs what the packaging tests need on top of scripts/install-deps.sh (Debian 12, root).
# Idempotent: apt runs only when a package is missing.
#   - the Windows cross build of the CLI: mingw-w64 (POSIX threads, for std::thread and OpenMP),
#     Eigen (header-only GEMM of the portable CPU kernels)
#   - the NSIS installer: nsis (makensis)
#   - the installer test: wine (64-bit)
#   - the .deb: dpkg-dev (dpkg-shlibdeps), file, desktop-file-utils (desktop-file-validate)
set -euo pipefail
packages=(
  g++-mingw-w64-x86-64-posix gcc-mingw-w64-x86-64-posix mingw-w64-x86-64-dev
  libeigen3-dev nsis wine64 dpkg-dev file desktop-file-utils
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
