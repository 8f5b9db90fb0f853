#!/usr/bin/env bash
# Installs dependencies (Debian 12, root), builds, and runs the whole test suite (no display and no
# GPU needed; GPU tests skip without a device). Reference data: ../shared/golden, or pass
# -DSEEDVAE_GOLDEN_DIR=... through SEEDVAE_CMAKE_ARGS. The long real-model golden run is
# `ctest --test-dir build/release -L long`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
# shellcheck disable=SC2086
./scripts/build.sh ${SEEDVAE_CMAKE_ARGS:-}
export QT_QPA_PLATFORM=offscreen
ctest --test-dir build/release --output-on-failure -LE long -j 2 "$@"
