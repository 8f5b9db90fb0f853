#!/usr/bin/env bash
# The one script the GPU machine runs (from the repository root, through the device tool's `run`
# with `carry: ["build-gpu/dist"]`). It sets up the libraries, runs the GPU tests, the golden
# verification in every precision, the benchmarks and the ablation, and leaves logs and JSON under
# $OUT (packed into $OUT/results.tgz, since only a few files come back).
#
#   scripts/gpu-run.sh dist             (on the build machine) gather stripped binaries (xz),
#                                       oneDNN (xz) and the golden data into build-gpu/dist
#                                       (~35 MB; DIST_CLI=0: without the CLI, ~34 MB)
#   scripts/gpu-run.sh [phase ...]      (on the GPU machine) phases: info tests verify wan
#                                       wanbench bench hires extra small ablate cli demo
#                                       longvideo longprof (default: all but small, wan, wanbench,
#                                       longvideo and longprof; those two need a dist made with
#                                       DIST_MEDIA=1)
#
# Environment: OUT (results folder, default /tmp/seedvae-out), DIST (default build-gpu/dist),
# DIST_GOLDEN (dist: "wan" carries ../shared/golden-wan instead of the SeedVR2 golden set, for the
# wan phase; WAN_PRECISIONS, default fp32),
# BUILD (default build-gpu), GOLDEN_SRC (default ../shared/golden), BUDGET_S (stop starting new
# steps after this many seconds, default 540), ABLATE_SIZES (default "1920x1080 512x512"),
# BENCH_SIZES (default "512x512 1920x1080"), OFFLOAD_SIZES (default 1920x1080; " " for none),
# ABLATE_ONLY (run only the ablation rows whose name contains one of its comma-separated parts,
# plus the default row), HIRES_VARIANTS ('|'-separated --hires-chunk arguments, default
# "1|2|1 --offload-state|2 --offload-state"), HIRES_VERIFY (0: skip the fp32 pieces golden
# check), HIRES_512_CHUNKS (default "0 2"; "" for none), BENCH_VARIANT (bench options for a
# second run of each bench size, e.g. "--async-tiles off"), VERIFY_PRECISIONS (default
# "fp32 bf16 fp16 tf32"), VERIFY_VARIANT (more verify options for a second run of each precision,
# e.g. "--lean-convs"), EXTRA_BENCH ('|'-separated bench argument lists for the extra phase,
# e.g. "--size 1920x1080 --offload-state --offload-window-mib 256"), SMALL_CARD ('|'-separated
# "GiB:bench arguments": the bench with only GiB of the card left free by a helper process),
# TESTS (which GPU tests the tests phase runs, default "ops model telemetry allocator multi"),
# EXTRA_REPEATS (timed runs of each extra bench, default 3), WAN_BENCH ('|'-separated
# `seedvae_gpu_bench wanbench` argument lists for the wanbench phase; WAN_PROFILE_LINES: how many
# lines of each run's op profile to print, default 40).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/seedvae-out}
DIST=${DIST:-$ROOT/build-gpu/dist}
BUILD=${BUILD:-$ROOT/build-gpu}
BUDGET_S=${BUDGET_S:-540}

if [ "${1:-}" = "dist" ]; then
  set -e
  GOLDEN_SRC=${GOLDEN_SRC:-$ROOT/../shared/golden}
  rm -rf "$DIST"
  mkdir -p "$DIST/bin" "$DIST/lib" "$DIST/golden/real" "$DIST/golden/tiny"
  # The device tool carries the repository's tracked files (~26 MB, the demo model is 19.7 MB of
  # them) and the dist within 64 MiB, so the binaries travel xz-compressed (15 -> ~4 MB) and are
  # unpacked on the GPU machine. DIST_CLI=0 leaves out the CLI (only the `cli` phase needs it).
  bins="gpu/seedvae_gpu_bench gpu/tests/test_gpu_backend_ops gpu/tests/test_gpu_model gpu/tests/test_gpu_telemetry gpu/tests/test_gpu_allocator gpu/tests/test_gpu_multi"
  [ "${DIST_CLI:-1}" = 0 ] || bins="app/seedvae $bins"
  for b in $bins; do
    if [ -f "$BUILD/$b" ]; then
      # The GPU machine has neither OpenCV nor Qt: a binary that needs them fails there with
      # rc 127 (as a build configured with the defaults would).
      if readelf -d "$BUILD/$b" | grep -Eq 'NEEDED.*(libopencv|libQt6)'; then
        echo "gpu-run.sh dist: $BUILD/$b links OpenCV or Qt, which the GPU machine lacks;" \
             "configure $BUILD as gpu/README.md says (-DSEEDVAE_WITH_MEDIA=OFF" \
             "-DSEEDVAE_WITH_UI=OFF)" >&2
        exit 1
      fi
      strip -o "$DIST/bin/$(basename "$b")" "$BUILD/$b"
      xz -T2 -6 "$DIST/bin/$(basename "$b")"
    fi
  done
  if [ "${DIST_MEDIA:-0}" = 1 ]; then
    # the longvideo phase: the CLI with video I/O (a CUDA build with SEEDVAE_WITH_MEDIA=ON in
    # MEDIA_BUILD), Debian's ffmpeg (FFMPEG_BIN), and their libraries, stubs for the rest
    MB=${MEDIA_BUILD:-$ROOT/build-gpu-media}
    strip -o "$DIST/bin/seedvae" "$MB/app/seedvae"
    cp "${FFMPEG_BIN:-/usr/bin/ffmpeg}" "$DIST/bin/ffmpeg"
    xz -f -T2 -6 "$DIST/bin/seedvae" "$DIST/bin/ffmpeg"
    rm -rf "$DIST/media-libs"
    python3 "$ROOT/scripts/gpu-media-libs.py" "$DIST/media-libs" "$MB/app/seedvae" \
      "${FFMPEG_BIN:-/usr/bin/ffmpeg}" > /dev/null
    tar cf - -C "$DIST" media-libs | xz -T2 -6 > "$DIST/media-libs.tar.xz"
    rm -rf "$DIST/media-libs"
  fi
  xz -T2 -6 -c "$(readlink -f /usr/lib/x86_64-linux-gnu/libdnnl.so.2)" > "$DIST/lib/libdnnl.so.2.xz"
  for l in libOpenCL.so.1 libgomp.so.1; do
    cp -L "/usr/lib/x86_64-linux-gnu/$l" "$DIST/lib/" 2>/dev/null || true
  done
  if [ "${DIST_GOLDEN:-seedvr2}" = wan ]; then
    # the Wan reference data instead (3.3 MB; both sets do not fit beside the binaries)
    rm -rf "$DIST/golden"
    cp -r "${GOLDEN_WAN_SRC:-$ROOT/../shared/golden-wan}" "$DIST/golden-wan"
  else
    cp "$GOLDEN_SRC/manifest.json" "$DIST/golden/"
    cp "$GOLDEN_SRC"/real/*.safetensors "$DIST/golden/real/"
    for f in inputs golden_fp32 weights_fp16; do
      cp "$GOLDEN_SRC/tiny/$f.safetensors" "$DIST/golden/tiny/"
    done
  fi
  du -sh "$DIST"
  exit 0
fi

WORK=/tmp/seedvae-work
LOGS=$WORK/logs
rm -rf "$WORK"
mkdir -p "$LOGS" "$OUT"
START=$(date +%s)
PHASES=${*:-info tests verify bench hires extra ablate cli demo}

# ---- libraries: cuDNN / cuBLAS from python's NVIDIA wheels, oneDNN carried (xz) ----------------
. "$ROOT/scripts/gpu-env.sh"
LIBS=$CUDA_WHEEL_LIBS
mkdir -p /tmp/seedvae-lib
if [ -f "$DIST/lib/libdnnl.so.2.xz" ] && [ ! -f /tmp/seedvae-lib/libdnnl.so.2 ]; then
  xz -dc "$DIST/lib/libdnnl.so.2.xz" > /tmp/seedvae-lib/libdnnl.so.2
fi
# carried fallbacks last, so the machine's own copies win
export LD_LIBRARY_PATH="/tmp/seedvae-lib${LIBS}:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$DIST/lib"
export SEEDVAE_CACHE_DIR=/tmp/seedvae-cache
# the binaries travel xz-compressed (see dist above)
# (unpacked on every call: a warm machine may still hold an older call's binaries)
BIN=/tmp/seedvae-bin
rm -rf "$BIN"
mkdir -p "$BIN"
for f in "$DIST"/bin/*.xz; do
  [ -f "$f" ] || continue
  xz -dc "$f" > "$BIN/$(basename "$f" .xz)" && chmod +x "$BIN/$(basename "$f" .xz)"
done
GOLDEN=$DIST/golden

elapsed() { echo $(( $(date +%s) - START )); }
# step NAME TIMEOUT CMD...: runs CMD with a timeout, logs to $LOGS/NAME.log, prints a summary line.
step() {
  local name=$1 limit=$2
  shift 2
  local left=$(( BUDGET_S - $(elapsed) ))
  if [ "$left" -le 20 ]; then
    echo "SKIP $name (time budget used: $(elapsed) s)" | tee -a "$WORK/summary.txt"
    return 0
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0=$(date +%s)
  timeout --signal=INT --kill-after=10 "$limit" "$@" > "$LOGS/$name.log" 2>&1
  local rc=$?
  local dt=$(( $(date +%s) - t0 ))
  echo "[$name] rc=$rc ${dt}s: $*" | tee -a "$WORK/summary.txt"
  return 0
}

phase() { case " $PHASES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

if phase info; then
  {
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit \
      --format=csv 2>&1
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    ldd "$BIN/seedvae_gpu_bench" | grep -E "not found|cudnn|cublas|cudart" || true
    ldd "$BIN/test_gpu_backend_ops" | grep -E "not found|dnnl" || true
    [ -x "$BIN/seedvae" ] && "$BIN/seedvae" info 2>&1 | head -20
  } > "$LOGS/info.log" 2>&1
  cat "$LOGS/info.log" | head -20
  step rates 120 "$BIN/seedvae_gpu_bench" rates --json "$WORK/rates.json"
  tail -1 "$LOGS/rates.log"
fi

want_test() { case " ${TESTS:-ops model telemetry allocator multi} " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
if phase tests; then
  if want_test ops; then
    step test_ops 300 "$BIN/test_gpu_backend_ops"
    grep -E "^(FAIL|SKIP)|passed,|FAILED" "$LOGS/test_ops.log" | head -40
    sed -n '/worst error/,$p' "$LOGS/test_ops.log"
  fi
  if want_test model; then
    step test_model 240 "$BIN/test_gpu_model"
    grep -E "^(FAIL|PASS|SKIP)|passed,|FAILED" "$LOGS/test_model.log" | head -30
  fi
  if want_test telemetry; then
    step test_telemetry 120 "$BIN/test_gpu_telemetry"
    grep -E "^(FAIL|PASS|SKIP)|passed,|FAILED" "$LOGS/test_telemetry.log" | head -30
  fi
  if want_test allocator; then
    step test_allocator 60 "$BIN/test_gpu_allocator"
    grep -E "^(FAIL|PASS|SKIP)|passed,|FAILED" "$LOGS/test_allocator.log" | head -10
  fi
  if want_test multi; then  # two or more cards (77: skipped on one)
    step test_multi 240 "$BIN/test_gpu_multi"
    grep -E "^(FAIL|PASS|SKIP)|passed,|FAILED|identical|DIFFERENT|failing" "$LOGS/test_multi.log" | head -20
  fi
fi

if phase verify; then
  for p in ${VERIFY_PRECISIONS:-fp32 bf16 fp16 tf32}; do
    step "verify_$p" 180 "$BIN/seedvae_gpu_bench" verify --reference "$GOLDEN" --precision "$p" \
      --json "$WORK/verify_$p.json"
    grep -E "^verify|FAIL" "$LOGS/verify_$p.log" | head -8
    if [ -n "${VERIFY_VARIANT:-}" ]; then
      tag=$(echo "$VERIFY_VARIANT" | tr -d ' -')
      # shellcheck disable=SC2086
      step "verify_${p}_$tag" 180 "$BIN/seedvae_gpu_bench" verify --reference "$GOLDEN" --precision "$p" \
        $VERIFY_VARIANT --json "$WORK/verify_${p}_$tag.json"
      grep -E "^verify|FAIL" "$LOGS/verify_${p}_$tag.log" | head -8
    fi
  done
  # CUDA graphs record whole chunks, so the golden check runs without intermediates (observers
  # turn graphs off)
  step verify_fp32_graphs 180 "$BIN/seedvae_gpu_bench" verify --reference "$GOLDEN" --precision fp32 \
    --cuda-graphs --no-intermediates --json "$WORK/verify_fp32_graphs.json"
  grep -E "^verify|FAIL" "$LOGS/verify_fp32_graphs.log" | head -8
fi

# the Wan reference data (a dist made with DIST_GOLDEN=wan): every case on the CUDA backend
if phase wan; then
  for p in ${WAN_PRECISIONS:-fp32}; do
    step "verify_wan_$p" 300 "$BIN/seedvae_gpu_bench" verify --reference "$DIST/golden-wan" \
      --precision "$p" --json "$WORK/verify_wan_$p.json"
    grep -E "^verify|FAIL|weights" "$LOGS/verify_wan_$p.log" | head -12
  done
fi

if phase bench; then
  GEMM=$(python3 -c "import json;print(json.load(open('$WORK/rates.json'))['bf16_gemm_tflops'])" 2>/dev/null || echo 0)
  for s in ${BENCH_SIZES:-512x512 1920x1080}; do
    for extra in "" ${BENCH_VARIANT:+"$BENCH_VARIANT"}; do
      tag=$(echo "$extra" | tr -d ' -')
      # shellcheck disable=SC2086
      step "bench_bf16_$s$tag" 300 "$BIN/seedvae_gpu_bench" bench --size "$s" --frames 17 \
        --precision bf16 --repeats 3 --warmup 1 --gemm-tflops "$GEMM" $extra \
        --json "$WORK/bench_bf16_$s$tag.json"
      grep -E "^(encode|decode|memory)|error" "$LOGS/bench_bf16_$s$tag.log"
    done
  done
  for s in ${OFFLOAD_SIZES:-1920x1080}; do
    step "bench_bf16_offload_$s" 300 "$BIN/seedvae_gpu_bench" bench --size "$s" --frames 17 \
      --precision bf16 --offload-state --repeats 3 --warmup 1 --gemm-tflops "$GEMM" \
      --json "$WORK/bench_bf16_offload_$s.json"
    grep -E "^(encode|decode|memory)|error" "$LOGS/bench_bf16_offload_$s.log"
  done
fi

if phase hires; then
  # Chunked upsampling (--hires-chunk N) and the causal-state offload: memory and time at 1080p,
  # larger temporal chunks at 512², and a golden check of the pieces in fp32.
  GEMM=$(python3 -c "import json;print(json.load(open('$WORK/rates.json'))['bf16_gemm_tflops'])" 2>/dev/null || echo 0)
  if [ "${HIRES_VERIFY:-1}" = 1 ]; then
    step verify_fp32_hires1 180 "$BIN/seedvae_gpu_bench" verify --reference "$GOLDEN" --precision fp32 \
      --hires-chunk 1 --no-intermediates --json "$WORK/verify_fp32_hires1.json"
    grep -E "^verify|FAIL" "$LOGS/verify_fp32_hires1.log" | head -8
  fi
  IFS='|' read -r -a variants <<< "${HIRES_VARIANTS:-1|2|1 --offload-state|2 --offload-state}"
  for v in "${variants[@]}"; do
    tag=$(echo "$v" | tr -d ' -')
    # shellcheck disable=SC2086
    step "bench_hires_$tag" 240 "$BIN/seedvae_gpu_bench" bench --size 1920x1080 --frames 17 \
      --precision bf16 --hires-chunk $v --repeats 3 --warmup 1 --gemm-tflops "$GEMM" \
      --json "$WORK/bench_hires_$tag.json"
    grep -E "^(encode|decode|memory)|error" "$LOGS/bench_hires_$tag.log"
  done
  for c in ${HIRES_512_CHUNKS-0 2}; do
    step "bench_512_chunk$c" 200 "$BIN/seedvae_gpu_bench" bench --size 512x512 --frames 17 \
      --precision bf16 --chunk "$c" --repeats 5 --warmup 1 --gemm-tflops "$GEMM" \
      --json "$WORK/bench_512_chunk$c.json"
    grep -E "^(encode|decode|memory)|error" "$LOGS/bench_512_chunk$c.log"
  done
fi

if phase extra; then
  # EXTRA_BENCH: '|'-separated argument lists for more bench runs (bf16, 17 frames unless given)
  IFS='|' read -r -a extras <<< "${EXTRA_BENCH:-}"
  for v in "${extras[@]}"; do
    [ -n "$v" ] || continue
    tag=$(echo "$v" | tr -d ' -')
    # shellcheck disable=SC2086
    step "bench_extra_$tag" 240 "$BIN/seedvae_gpu_bench" bench --precision bf16 \
      --repeats "${EXTRA_REPEATS:-3}" --warmup 1 \
      $v --json "$WORK/bench_extra_$tag.json"
    grep -E "^(encode|decode|memory)|^  (device|pipeline)|^    waits|error" "$LOGS/bench_extra_$tag.log"
  done
fi

if phase wanbench; then
  # WAN_BENCH: '|'-separated `seedvae_gpu_bench wanbench` argument lists (bf16 unless given)
  IFS='|' read -r -a wans <<< "${WAN_BENCH:---family wan2.1 --size 1280x720 --frames 81 --repeats 1}"
  for v in "${wans[@]}"; do
    [ -n "$v" ] || continue
    tag=$(echo "$v" | tr -d ' -')
    # shellcheck disable=SC2086
    step "wanbench_$tag" 300 "$BIN/seedvae_gpu_bench" wanbench $v --json "$WORK/wanbench_$tag.json"
    grep -E "median|op profile|^ +[0-9.]+ ms" "$LOGS/wanbench_$tag.log" | head -${WAN_PROFILE_LINES:-40}
  done
fi

if phase small; then
  # SMALL_CARD: '|'-separated "GiB:bench arguments" entries. Each runs the bench while a helper
  # process (`seedvae_gpu_bench hold`) keeps all but GiB of the card, as another application
  # would: the engine's default budget is then that free memory minus its margin.
  IFS='|' read -r -a smalls <<< "${SMALL_CARD:-}"
  for v in "${smalls[@]}"; do
    [ -n "$v" ] || continue
    gib=${v%%:*}
    args=${v#*:}
    tag=$(echo "free${gib}_$args" | tr -d ' -')
    fifo=$WORK/hold.fifo
    rm -f "$fifo" && mkfifo "$fifo"
    "$BIN/seedvae_gpu_bench" hold --leave-free-gib "$gib" < "$fifo" > "$LOGS/hold_$tag.log" 2>&1 &
    holder=$!
    exec 9> "$fifo"  # the holder keeps its memory until this end closes
    for _ in $(seq 1 60); do grep -q holding "$LOGS/hold_$tag.log" && break; sleep 0.5; done
    cat "$LOGS/hold_$tag.log"
    # shellcheck disable=SC2086
    step "small_$tag" 300 "$BIN/seedvae_gpu_bench" bench --precision bf16 --repeats 1 --warmup 1 \
      --stage-device-runs 0 $args --json "$WORK/small_$tag.json"
    exec 9>&-
    wait "$holder"
    grep -E "^(encode|decode)|error" "$LOGS/small_$tag.log"
  done
fi

if phase ablate; then
  for s in ${ABLATE_SIZES:-512x512 1920x1080}; do
    ref=5
    reps=5
    [ "$s" = "1920x1080" ] && ref=2 && reps=3
    # shellcheck disable=SC2086
    step "ablate_$s" 360 "$BIN/seedvae_gpu_bench" ablate --size "$s" --frames 17 --repeats "$reps" \
      --ref-latents "$ref" ${ABLATE_ONLY:+--only "$ABLATE_ONLY"} --json "$WORK/ablate_$s.json"
    sed -n '/^configuration/,$p' "$LOGS/ablate_$s.log"
  done
fi

if phase cli && [ ! -x "$BIN/seedvae" ]; then
  echo "SKIP cli (no $BIN/seedvae: dist was made with DIST_CLI=0)" | tee -a "$WORK/summary.txt"
elif phase cli; then
  # The CLI path (make_backend + verify) as users run it: fp32, TF32 off, golden tolerance 1e-4.
  step cli_verify 240 "$BIN/seedvae" verify --reference "$GOLDEN" --backend cuda --no-intermediates
  tail -3 "$LOGS/cli_verify.log"
  # Low precision: bounded by PyTorch's own error for each tensor (manifest lowp_error_vs_fp32).
  for p in bf16 fp16; do
    step "cli_verify_$p" 240 "$BIN/seedvae" verify --reference "$GOLDEN" --backend cuda \
      --precision "$p" --config real
    grep -E "FAIL|^verify" "$LOGS/cli_verify_$p.log" | head -8
  done
  step cli_bench_512 240 "$BIN/seedvae" bench --backend cuda --precision bf16 --synthetic real \
    --size 512x512 --frames 17 --repeats 5 --json
  grep -E "ms_per_frame|peak_mib|tflops_per_s\"" "$LOGS/cli_bench_512.log" | head -8
  if "$BIN/seedvae" bench --help 2>/dev/null | grep -q -- "--precision"; then
    step cli_bench 240 "$BIN/seedvae" bench --backend cuda --precision bf16 --synthetic real \
      --size 1920x1080 --frames 17 --json
    tail -3 "$LOGS/cli_bench.log"
  fi
fi

if phase demo && [ ! -x "$BIN/seedvae" ]; then
  echo "SKIP demo (no $BIN/seedvae: dist was made with DIST_CLI=0)" | tee -a "$WORK/summary.txt"
elif phase demo; then
  # The shipped demo model through the CLI on the CPU (the reference) and CUDA backends, on the
  # built-in sample clip (this build has no video I/O), to compare the PSNRs by eye; the asserted
  # check is test_gpu_model's demo_model_matches_the_cpu_backend.
  for b in "cpu" "cuda --precision fp32" "cuda --precision bf16"; do
    tag=$(echo "$b" | tr -d ' -')
    # shellcheck disable=SC2086
    step "demo_$tag" 120 "$BIN/seedvae" roundtrip --sample-clip --size 256x256 --frames 17 \
      --weights resources/demo/demo_vae.safetensors --backend $b --json -q
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('demo', sys.argv[2], 'psnr %.3f dB ssim %.4f, %.1f ms/frame' % (d['psnr_db'], d['ssim'], d['ms_per_frame']))" \
      "$LOGS/demo_$tag.log" "$b" 2>&1 | tail -1
  done
fi

# the video phases' CLI, ffmpeg and libraries (a dist made with DIST_MEDIA=1)
media_setup() {
  M=/tmp/seedvae-media
  mkdir -p "$M"
  [ -f "$DIST/media-libs.tar.xz" ] && tar xJf "$DIST/media-libs.tar.xz" -C "$M"
  ML="$M/media-libs:$LD_LIBRARY_PATH"
  export SEEDVAE_DEMO_WEIGHTS=$ROOT/resources/demo/demo_vae.safetensors
  RT=(--backend cuda --precision bf16)
}

if phase longprof; then
  # Where a 1080p video round trip's time goes: PROF_S seconds (default 4) of 1080p at 24 fps,
  # the round trip with --json (read, encode, decode, metrics, write and checkpoint seconds, the
  # engine's waits) and the process's CPU time, for each '|'-separated argument list of
  # PROF_VARIANTS.
  media_setup
  env LD_LIBRARY_PATH="$ML" "$BIN/ffmpeg" -hide_banner -loglevel error -y \
    -f lavfi -i "testsrc2=size=1920x1080:rate=24" -f lavfi -i "sine=frequency=440:sample_rate=48000" \
    -t "${PROF_S:-4}" -c:v libx264 -preset veryfast -crf 18 -pix_fmt yuv420p -c:a aac -shortest \
    "$M/prof.mp4"
  IFS='|' read -r -a variants <<< "${PROF_VARIANTS:--o $M/prof_out.mp4 --codec h264 --preset ultrafast}"
  i=0
  for v in "${variants[@]}"; do
    i=$((i + 1))
    # a variant's leading NAME=value words set the environment (e.g. SEEDVAE_HOST_BLOCK_CACHE=0)
    envs=()
    args=()
    for word in $v; do
      if [ ${#args[@]} -eq 0 ] && [[ $word =~ ^[A-Z_][A-Z0-9_]*= ]]; then envs+=("$word"); else args+=("$word"); fi
    done
    python3 "$ROOT/scripts/thread-cpu.py" seedvae "$LOGS/prof$i.threads" > /dev/null &
    watcher=$!
    step "prof$i" 300 bash -c 'TIMEFORMAT="cpu: real %R user %U sys %S"; time env LD_LIBRARY_PATH="$0" "$@"' \
      "$ML" "${envs[@]}" "$BIN/seedvae" roundtrip "$M/prof.mp4" "${RT[@]}" --json -q --restart "${args[@]}"
    wait "$watcher"
    [ -n "${envs[*]}" ] && echo "  environment: ${envs[*]}" | tee -a "$WORK/summary.txt"
    python3 - "$LOGS/prof$i.log" <<'PY' | tee -a "$WORK/summary.txt"
import json, sys
t = open(sys.argv[1]).read()
j = t[t.find("{"):t.rfind("}") + 1]
try:
    d = json.loads(j)
    keys = ["frames", "total_seconds", "read_seconds", "read_wait_seconds",
            "read_engine_seconds", "encode_seconds",
            "decode_seconds", "metrics_seconds", "write_seconds", "checkpoint_seconds",
            "sink_wait_seconds", "peak_rss_mib", "settings"]
    print("  " + ", ".join(f"{k} {d.get(k)}" for k in keys))
except ValueError:
    print("  " + t[-600:].replace("\n", " | "))
print("  " + t[t.rfind("cpu:"):].strip())
PY
    cat "$LOGS/prof$i.threads" 2>/dev/null | tee -a "$WORK/summary.txt"
  done
fi

if phase longvideo; then
  # A long 1080p video through FFmpeg on CUDA, stopped and resumed (a dist made with DIST_MEDIA=1:
  # the CLI with video I/O, Debian's ffmpeg, and their libraries with stubs for what a video
  # round trip never calls, scripts/gpu-media-libs.py). ffmpeg makes LONG_S seconds (default
  # 600) of 1080p at 24 fps with a tone; the demo model's bf16 round trip writes H.264 with
  # --json. A call that cannot finish it stops it by SIGINT just after the last checkpoint that
  # leaves the call time for no other (judged by the time between checkpoints), and the next
  # call resumes it from there (a warm machine keeps /tmp/seedvae-long between calls). The
  # process's resident set is logged every 5 s and its threads' CPU time at its end. Then
  # SHORT_S seconds (default 10) of the clip into FFV1, stopped and resumed, against an
  # uninterrupted run (cmp). LONG_ARGS: more round trip options for the long video (e.g.
  # "--synthetic tiny").
  media_setup
  V=/tmp/seedvae-long
  mkdir -p "$V"
  # long_run NAME LIMIT ARGS...: the CLI's round trip, its resident set every 5 s in NAME.rss,
  # its threads' CPU time in NAME.threads; stopped after a checkpoint when the next one would
  # come after LIMIT (the checkpoint folder: the output's name with .seedvae-resume)
  long_run() {
    local name=$1 limit=$2 out="" prev="" a
    shift 2
    for a in "$@"; do
      [ "$prev" = -o ] && out=$a
      prev=$a
    done
    local left=$(( BUDGET_S - $(elapsed) ))
    [ "$limit" -gt "$left" ] && limit=$left
    [ "$limit" -le 5 ] && { echo "SKIP $name (time budget used)" | tee -a "$WORK/summary.txt"; return 0; }
    python3 "$ROOT/scripts/thread-cpu.py" seedvae "$LOGS/$name.threads" > /dev/null &
    local watcher=$!
    local t0=$(date +%s)
    env LD_LIBRARY_PATH="$ML" timeout --signal=INT --kill-after=30 "$limit" \
      "$BIN/seedvae" roundtrip "$@" > "$LOGS/$name.log" 2>&1 &
    local pid=$! child now ck last_ck="" gap=0
    while kill -0 "$pid" 2>/dev/null; do
      now=$(( $(date +%s) - t0 ))
      child=$(pgrep -P "$pid" | head -1)
      [ -n "$child" ] && echo "$now $(ps -o rss= -p "$child")" >> "$LOGS/$name.rss"
      ck=$(stat -c %Y "$out.seedvae-resume/checkpoint.json" 2>/dev/null || true)
      if [ -n "$ck" ] && [ "$ck" != "$last_ck" ]; then
        [ -n "$last_ck" ] && gap=$(( ck - last_ck ))
        last_ck=$ck
        echo "$now checkpoint" >> "$LOGS/$name.rss"
        # the next checkpoint would come after the limit: stop here, losing nothing
        if [ "$gap" -gt 0 ] && [ $(( now + gap + gap / 4 )) -ge "$limit" ] && [ -n "$child" ]; then
          echo "$now stopped after the checkpoint (every ~${gap} s)" >> "$LOGS/$name.rss"
          kill -INT "$child"
        fi
      fi
      sleep 5
    done
    wait "$pid"
    local rc=$?
    wait "$watcher"
    echo "[$name] rc=$rc $(( $(date +%s) - t0 ))s: roundtrip $*" | tee -a "$WORK/summary.txt"
    cat "$LOGS/$name.threads" 2>/dev/null | tee -a "$WORK/summary.txt"
  }
  if [ ! -f "$V/in.mp4" ]; then
    step long_make 400 env LD_LIBRARY_PATH="$ML" "$BIN/ffmpeg" -hide_banner -loglevel error -y \
      -f lavfi -i "testsrc2=size=1920x1080:rate=24" -f lavfi -i "sine=frequency=440:sample_rate=48000" \
      -t "${LONG_S:-600}" -c:v libx264 -preset veryfast -crf 18 -pix_fmt yuv420p -c:a aac -shortest \
      "$V/in.mp4"
    env LD_LIBRARY_PATH="$ML" "$BIN/seedvae" info "$V/in.mp4" 2>&1 | head -12
  fi
  if [ ! -f "$V/out.mkv" ] && [ "${SHORT_ONLY:-0}" != 1 ]; then
    # shellcheck disable=SC2086
    long_run long_run 600 "$V/in.mp4" -o "$V/out.mkv" "${RT[@]}" --codec h264 \
      --preset ultrafast --json ${LONG_ARGS:-}
    grep -E "resuming|stopped|cancelled|error" "$LOGS/long_run.log" | tail -3
    tr '\r' '\n' < "$LOGS/long_run.log" | grep -E "^(encode|decode) " | tail -2
    grep "stopped after" "$LOGS/long_run.rss" || true
    python3 - "$LOGS/long_run.log" <<'PY' | tee -a "$WORK/summary.txt"
import json, sys
t = open(sys.argv[1]).read()
i = t.find("{")
if i >= 0:
    d = json.loads(t[i:t.rfind("}") + 1])
    print("  " + ", ".join(f"{k} {d.get(k)}" for k in [
        "frames", "resumed_at_frame", "total_seconds", "read_seconds", "read_wait_seconds",
        "read_engine_seconds", "encode_seconds", "decode_seconds", "metrics_seconds",
        "write_seconds", "checkpoint_seconds", "sink_wait_seconds", "peak_rss_mib", "psnr_db",
        "ssim", "output"]))
PY
  fi
  if [ -f "$V/out.mkv" ] || [ "${SHORT_ONLY:-0}" = 1 ]; then
    [ -f "$V/out.mkv" ] && env LD_LIBRARY_PATH="$ML" "$BIN/seedvae" info "$V/out.mkv" 2>&1 | head -12
    step short_make 60 env LD_LIBRARY_PATH="$ML" "$BIN/ffmpeg" -hide_banner -loglevel error -y \
      -i "$V/in.mp4" -t "${SHORT_S:-10}" -c copy "$V/short.mp4"
    long_run short_whole 120 "$V/short.mp4" -o "$V/short_whole.mkv" "${RT[@]}" --codec ffv1 \
      --checkpoint-every 4
    long_run short_stopped 8 "$V/short.mp4" -o "$V/short_resumed.mkv" "${RT[@]}" --codec ffv1 \
      --checkpoint-every 4
    long_run short_resumed 120 "$V/short.mp4" -o "$V/short_resumed.mkv" "${RT[@]}" --codec ffv1 \
      --checkpoint-every 4
    cmp "$V/short_whole.mkv" "$V/short_resumed.mkv" && echo "short: resumed == uninterrupted" |
      tee -a "$WORK/summary.txt"
  fi
fi

cp -r /tmp/seedvae-cache "$WORK/" 2>/dev/null || true
(cd "$WORK" && tar czf "$OUT/results.tgz" . 2>/dev/null)
cp "$WORK/summary.txt" "$OUT/" 2>/dev/null || true
echo "total $(elapsed) s"
cat "$WORK/summary.txt"
