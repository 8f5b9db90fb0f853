#!/usr/bin/env bash
# The studio on the GPU machine (which has no Qt and no OpenCV): the real seedvae-studio, its GPU
# Qt test (tests/ui/tst_studio_gpu.cpp) and the CLI, built here without OpenCV, travel with the
# Debian runtime libraries they need (Qt 6 and its dependencies, the offscreen platform plugin, a
# font), xz-compressed, and run there on the built-in sample clip.
#
#   scripts/studio-gpu.sh dist    (on the build machine) configure and build build-studio
#                                 (CUDA for sm_90, no OpenCV, the studio, the tests), then gather
#                                 build-studio/dist (~35 MB)
#   scripts/studio-gpu.sh run     (on the GPU machine, through the device tool's `run` with
#                                 carry ["build-studio/dist"]) runs test_gpu_telemetry, then
#                                 tst_studio_gpu with the real
#                                 configuration's synthetic weights; logs, the A/B report and the
#                                 window's screenshot go to $OUT (default /tmp/seedvae-out)
#
# Environment: OUT, DIST (default build-studio/dist), BUILD (default build-studio),
# CUDA_ARCHS (default 90), TEST_ARGS (Qt Test arguments, e.g. a test function's name),
# TEST_TIMEOUT_S (default 480), ROUNDTRIP_FRAMES (the CLI round trips first, default "33 201"),
# STALL_STACKS_MS (print the GUI thread's stack during any stall that long; default 0: off).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-$ROOT/build-studio}
DIST=${DIST:-$BUILD/dist}
OUT=${OUT:-/tmp/seedvae-out}

if [ "${1:-}" = "dist" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSEEDVAE_WITH_CUDA=ON \
    -DSEEDVAE_WITH_MEDIA=OFF -DSEEDVAE_WITH_UI=ON -DSEEDVAE_BUILD_TESTS=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" > /dev/null
  ninja -C "$BUILD" seedvae seedvae-studio tst_studio_gpu test_gpu_telemetry
  rm -rf "$DIST"
  stage=$(mktemp -d)
  mkdir -p "$stage/bin" "$stage/lib" "$stage/plugins/platforms" "$stage/fonts" "$DIST"
  for b in app/seedvae app/seedvae-studio tests/ui/tst_studio_gpu gpu/tests/test_gpu_telemetry; do
    strip -o "$stage/bin/$(basename "$b")" "$BUILD/$b"
  done
  qtplugins=$(dirname "$(dirname "$(find /usr/lib -name libqoffscreen.so -path '*qt6*' | head -1)")")
  cp -L "$qtplugins/platforms/libqoffscreen.so" "$stage/plugins/platforms/"
  # Every library the binaries and the plugin load, but the C library's own, the C++ runtime
  # (the GPU machine's newer one serves) and CUDA's (Python's NVIDIA wheels provide them there).
  skip='^(libc|libm|libpthread|libdl|librt|libresolv|ld-linux.*|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libcudnn.*|libnvrtc.*|libnvidia.*)\.so'
  for f in "$stage"/bin/* "$stage/plugins/platforms/libqoffscreen.so"; do
    ldd "$f" | awk '/=> \// {print $1, $3}' | while read -r name path; do
      echo "$name" | grep -Eq "$skip" || cp -Ln "$path" "$stage/lib/$name"
    done
  done
  cp /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf /usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf \
    "$stage/fonts/" 2>/dev/null || echo "studio-gpu.sh: no DejaVu fonts (apt-get install fonts-dejavu-core)" >&2
  tar -C "$stage" -cf - . | xz -T2 -6 > "$DIST/studio.tar.xz"
  rm -rf "$stage"
  du -sh "$DIST"
  exit 0
fi

if [ "${1:-}" != "run" ]; then
  echo "usage: scripts/studio-gpu.sh dist|run" >&2
  exit 2
fi

WORK=/tmp/seedvae-studio
rm -rf "$WORK"
mkdir -p "$WORK" "$OUT"
xz -dc "$DIST/studio.tar.xz" | tar -C "$WORK" -xf -
. "$ROOT/scripts/gpu-env.sh"
# the machine's own libraries first, the carried ones for what it lacks
export LD_LIBRARY_PATH="${CUDA_WHEEL_LIBS#:}:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$WORK/lib"
export QT_PLUGIN_PATH=$WORK/plugins QT_QPA_PLATFORM=offscreen
export QT_SCALE_FACTOR=1 QT_FONT_DPI=96 QT_STYLE_OVERRIDE=Fusion
cat > "$WORK/fonts.conf" <<CONF
<?xml version="1.0"?>
<fontconfig><dir>$WORK/fonts</dir><cachedir>$WORK/fontcache</cachedir></fontconfig>
CONF
export FONTCONFIG_FILE=$WORK/fonts.conf
export XDG_CONFIG_HOME=$WORK/config XDG_DATA_HOME=$WORK/data
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
  ldd "$WORK/bin/seedvae-studio" | grep -E "not found" || echo "every library found"
  "$WORK/bin/seedvae-studio" --version
} > "$OUT/info.log" 2>&1
cat "$OUT/info.log"
"$WORK/bin/seedvae" make-weights --synthetic real -o "$WORK/real.safetensors" > /dev/null
mkdir -p "$OUT/studio"
export SEEDVAE_STUDIO_GPU_WEIGHTS=$WORK/real.safetensors SEEDVAE_STUDIO_GPU_OUT=$OUT/studio
set +e
# The CLI's round trip on the card: host memory with the clip's length (ROUNDTRIP_FRAMES).
for n in ${ROUNDTRIP_FRAMES:-33 201}; do
  "$WORK/bin/seedvae" roundtrip --weights "$WORK/real.safetensors" --backend cuda --precision bf16 \
    --sample-clip --size 1280x720 --frames "$n" --json > "$OUT/roundtrip_$n.json" \
    2>> "$OUT/roundtrip.log"
  echo "roundtrip $n frames: rc=$? $(tr -d '\n' < "$OUT/roundtrip_$n.json" | head -c 400)"
done
# The engine's telemetry on the card (the studio's deferred stage timing included).
"$WORK/bin/test_gpu_telemetry" > "$OUT/test_gpu_telemetry.log" 2>&1
echo "test_gpu_telemetry rc=$? $(tail -1 "$OUT/test_gpu_telemetry.log")" | tee -a "$OUT/info.log"
# the test's bench step runs the CLI by the path it was built with; run it from the carried copy.
# STALL_STACKS_MS: print the GUI thread's stack during any stall that long (tests/ui/stall_stacks.h)
SEEDVAE_STALL_STACKS=${STALL_STACKS_MS:-0} SEEDVAE_CLI="$WORK/bin/seedvae" QTEST_FUNCTION_TIMEOUT=450000 \
  timeout "${TEST_TIMEOUT_S:-480}" "$WORK/bin/tst_studio_gpu" ${TEST_ARGS:-} > "$OUT/tst_studio_gpu.log" 2>&1
echo "tst_studio_gpu rc=$?" | tee -a "$OUT/info.log"
grep -E "PASS|FAIL|QINFO|QWARN|Totals|SKIP" "$OUT/tst_studio_gpu.log" | tail -40
tar -C "$OUT" -czf "$OUT/results.tgz" studio tst_studio_gpu.log test_gpu_telemetry.log info.log \
  roundtrip* 2>/dev/null
exit 0
