#!/usr/bin/env bash
# The main job on built-in defaults: install dependencies (Debian 12, root), build, then open the
# studio on the built-in model (the trained demo model) and the built-in demo clip and start a run.
# Without a display the studio runs the same job headless and writes its report (Markdown, JSON,
# stills, video) to out/studio-demo. A build without the studio runs the CLI round trip of the
# demo clip instead (out/demo_roundtrip.mp4). Extra arguments go to the program.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
mkdir -p out
if [ -x build/release/app/seedvae-studio ]; then
  exec ./build/release/app/seedvae-studio --demo -o out/studio-demo "$@"
fi
if [ -d build/release/share/seedvae/demo-clip ]; then
  exec ./build/release/app/seedvae roundtrip build/release/share/seedvae/demo-clip \
    -o out/demo_roundtrip.mp4 "$@"
fi
exec ./build/release/app/seedvae roundtrip --sample-clip -o out/sample_roundtrip.mp4 "$@"
