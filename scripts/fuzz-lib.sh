# Shared by the fuzzing scripts (scripts/fuzz-safetensors.sh, scripts/fuzz-torch-pickle.sh):
# sourced, never run. fuzz_setup parses the time argument and builds one libFuzzer target in the
# clang build build-fuzz/ (-DSEEDVAE_FUZZ=ON, ASan + UBSan); the caller then writes its seed
# corpus into $seeds; fuzz_run runs the fuzzer and reports executions and findings, exiting
# non-zero when it found something.
#
# Environment: SEEDVAE_GOLDEN_DIR (reference data, default ../shared/golden), SEEDVAE_FUZZ_JOBS
# (build parallelism, default 2), CC/CXX (default clang/clang++).

# fuzz_setup TARGET NAME [SECONDS]: sets root, build, golden, seeds, corpus, artifacts, log,
# fuzzer and seconds; builds TARGET; empties $seeds.
fuzz_setup() {
  local target="$1" name="$2"
  seconds="${3:-60}"
  if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -lt 1 ]]; then
    echo "usage: $0 [SECONDS]" >&2
    exit 2
  fi
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  build="$root/build-fuzz"
  golden="${SEEDVAE_GOLDEN_DIR:-$root/../shared/golden}"
  local jobs="${SEEDVAE_FUZZ_JOBS:-2}"
  seeds="$build/fuzz-seeds/$name"
  corpus="$build/fuzz-corpus/$name"
  artifacts="$build/fuzz-artifacts/$name"
  log="$build/$target.log"

  echo "== configure ($build)"
  cmake -S "$root" -B "$build" -G Ninja \
    -DCMAKE_C_COMPILER="${CC:-clang}" -DCMAKE_CXX_COMPILER="${CXX:-clang++}" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSEEDVAE_FUZZ=ON -DSEEDVAE_BUILD_TESTS=OFF -DSEEDVAE_WITH_UI=OFF -DSEEDVAE_WITH_MEDIA=OFF \
    -DSEEDVAE_WITH_CUDA=OFF -DSEEDVAE_GOLDEN_DIR="$golden" >/dev/null

  echo "== build $target"
  ninja -C "$build" -j "$jobs" "$target"
  fuzzer="$build/tests/fuzz/$target"

  echo "== seed corpus ($seeds)"
  rm -rf "$seeds"
  mkdir -p "$seeds" "$corpus" "$artifacts"
}

# fuzz_run DICT: fuzzes for $seconds from $corpus and $seeds with the dictionary DICT.
fuzz_run() {
  local dict="$1"
  local before_list="$build/fuzz-artifacts-before.txt"
  find "$artifacts" -type f | sort >"$before_list"
  echo "== fuzz for ${seconds}s (corpus $corpus)"
  set +e
  "$fuzzer" "$corpus" "$seeds" \
    -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -dict="$dict" -artifact_prefix="$artifacts/" \
    -print_final_stats=1 >"$log" 2>&1
  local rc=$?
  set -e

  grep -E "^#[0-9]+[[:space:]]+(INITED|DONE)|stat::|ERROR|invariant|SUMMARY" "$log" | tail -n 20 || true
  local execs
  execs="$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}' | tail -n 1)"
  execs="${execs:-$(grep -oE "^#[0-9]+" "$log" | tail -n 1 | tr -d "#")}"
  local new_artifacts findings
  new_artifacts="$(find "$artifacts" -type f | sort | comm -13 "$before_list" -)"
  findings="$(printf '%s' "$new_artifacts" | grep -c . || true)"
  echo "== result: executions=${execs:-unknown} findings=${findings} fuzzer_exit=${rc} corpus_files=$(find "$corpus" -type f | wc -l)"
  if [[ "$findings" -gt 0 ]]; then
    echo "new artifacts (reproduce with: $fuzzer <file>):"
    printf '%s\n' "$new_artifacts" | head -n 20
  fi
  echo "full log: $log"
  if [[ "$rc" -ne 0 || "$findings" -gt 0 ]]; then
    exit 1
  fi
}
