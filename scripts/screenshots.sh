#!/usr/bin/env bash
# Screenshots of the studio's main views, taken from the real application (not mock-ups):
# seedvae-studio --screenshots runs the A/B demo (built-in model, sample clip; A untiled, B blend
# tiles) in the real main window and saves PNGs of the live run, split, side by side, difference,
# A/B, tile-overlay and settings/memory views into docs/images/, once per window size: at 1366x768
# as studio-<view>.png (the pictures README.md and docs/studio.md show), at any other size as
# studio-<view>-<W>x<H>.png.
#
# Usage: scripts/screenshots.sh [path/to/seedvae-studio] [output dir] [WxH ...]
#        (sizes default to 1366x768 1920x1080)
# The window renders on Qt's offscreen platform (no display needed); set SEEDVAE_SCREENSHOT_XVFB=1
# to render under Xvfb instead (needs the xvfb package).
set -euo pipefail
cd "$(dirname "$0")/.."
studio="${1:-}"
if [[ -z "$studio" ]]; then
  for candidate in build/release/app/seedvae-studio build-ui/app/seedvae-studio build/cpu/app/seedvae-studio; do
    if [[ -x "$candidate" ]]; then studio="$candidate"; break; fi
  done
fi
if [[ -z "$studio" || ! -x "$studio" ]]; then
  echo "screenshots.sh: seedvae-studio not found; build it first (scripts/build.sh)" >&2
  exit 1
fi
out="${2:-docs/images}"
shift $(( $# < 2 ? $# : 2 ))
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(1366x768 1920x1080)
mkdir -p "$out"
# Reproducible rendering: 96 dpi, scale 1, the Fusion style, a private settings location.
export QT_SCALE_FACTOR=1 QT_FONT_DPI=96 QT_STYLE_OVERRIDE=Fusion
export XDG_CONFIG_HOME="$(mktemp -d)" XDG_DATA_HOME="$(mktemp -d)"
trap 'rm -rf "$XDG_CONFIG_HOME" "$XDG_DATA_HOME"' EXIT
if [[ "${SEEDVAE_SCREENSHOT_XVFB:-0}" == 1 ]]; then
  command -v xvfb-run >/dev/null || { echo "screenshots.sh: xvfb-run missing (apt-get install xvfb)" >&2; exit 1; }
fi
for size in "${sizes[@]}"; do
  if [[ "${SEEDVAE_SCREENSHOT_XVFB:-0}" == 1 ]]; then
    QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 ${size}x24" \
      "$studio" --screenshots "$out" --screenshot-size "$size"
  else
    QT_QPA_PLATFORM=offscreen "$studio" --screenshots "$out" --screenshot-size "$size"
  fi
done
ls -1 "$out"/studio-*.png
