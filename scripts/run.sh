#!/usr/bin/env bash
# The main job on built-in defaults: install dependencies (Debian 12, root), build, then encode and
# decode the built-in sample clip with the built-in model on the CPU backend, printing PSNR/SSIM,
# time per frame and peak memory, and writing the reconstruction to out/sample_roundtrip.mp4.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
mkdir -p out
./build/release/app/seedvae roundtrip --sample-clip -o out/sample_roundtrip.mp4 "$@"
