#!/usr/bin/env bash
# Configures and builds into build/release (CUDA backend included when a CUDA toolkit is found).
# Usage: scripts/build.sh [extra cmake -D options]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DSEEDVAE_WITH_CUDA=AUTO "$@"
cmake --build build/release -j "$jobs"
