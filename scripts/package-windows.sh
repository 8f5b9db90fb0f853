#!/usr/bin/env bash
# Cross-compiles the Qt-free CLI for 64-bit Windows with mingw-w64 (portable CPU kernels: no
# oneDNN, OpenCV, Qt or CUDA -- Debian has no mingw builds of them) and packs it into a 64-bit NSIS
# installer with CPack. Needs scripts/install-packaging-deps.sh. The full Windows build (MSVC, Qt,
# CUDA, oneDNN) is packaging/windows/windows-build.yml; see packaging/README.md.
#
#   scripts/package-windows.sh [BUILD_DIR]      (default build-mingw)
#
# Prints the installer's path on the last line. Environment: SEEDVAE_JOBS (default 2).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build-mingw}"
jobs="${SEEDVAE_JOBS:-2}"
t0=$(date +%s)

echo "== configure ($build)" >&2
mkdir -p "$build"
cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchains/mingw-w64-x86_64.cmake" \
  -DCMAKE_BUILD_TYPE=Release \
  -DSEEDVAE_WITH_ONEDNN=OFF -DSEEDVAE_WITH_MEDIA=OFF -DSEEDVAE_WITH_UI=OFF \
  -DSEEDVAE_WITH_CUDA=OFF -DSEEDVAE_BUILD_TESTS=OFF >"$build/configure.log" 2>&1 \
  || { cat "$build/configure.log" >&2; exit 1; }
t1=$(date +%s)

echo "== build seedvae.exe" >&2
cmake --build "$build" --target seedvae -j "$jobs" >&2
t2=$(date +%s)

# Self-contained: only Windows system DLLs may be imported (no MinGW runtime DLL to ship).
exe="$build/app/seedvae.exe"
imports=$(x86_64-w64-mingw32-objdump -p "$exe" | sed -n 's/^[[:space:]]*DLL Name: //p' | sort -u)
echo "imports: $(echo $imports)" >&2
if echo "$imports" | grep -viqE '^(kernel32|msvcrt|user32|advapi32|shell32|ws2_32|bcrypt|ucrtbase|api-ms-win-[a-z0-9-]+)\.dll$'; then
  echo "package-windows: seedvae.exe imports a non-system DLL:" >&2
  echo "$imports" | grep -viE '^(kernel32|msvcrt|user32|advapi32|shell32|ws2_32|bcrypt|ucrtbase|api-ms-win-[a-z0-9-]+)\.dll$' >&2
  exit 1
fi

echo "== cpack -G NSIS" >&2
rm -f "$build"/seedvae-studio-*-win64*.exe
(cd "$build" && cpack -G NSIS >&2) || { cat "$build/_CPack_Packages/win64/NSIS/NSISOutput.log" >&2 || true; exit 1; }
t3=$(date +%s)
installer=$(ls "$build"/seedvae-studio-*-win64*.exe)
echo "times: configure $((t1 - t0)) s, build $((t2 - t1)) s, cpack $((t3 - t2)) s; $(du -h "$installer" | cut -f1) installer" >&2
echo "$installer"
