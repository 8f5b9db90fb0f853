#!/usr/bin/env bash
# Fuzzes the .pth reader (restricted unpickler, zip reader, TorchCheckpoint) with libFuzzer + ASan
# + UBSan for a bounded time.
#
#   scripts/fuzz-torch-pickle.sh [SECONDS]      (default 60)
#
# Configures the clang build of scripts/fuzz-safetensors.sh (build-fuzz/, -DSEEDVAE_FUZZ=ON),
# builds only the fuzz_torch_pickle target and generates a seed corpus with CPython's own pickler
# and zipfile module (stand-in modules named torch and torch._utils make it write exactly the
# globals and opcodes of torch.save; PyTorch itself is not needed): state dicts of every dtype in
# protocols 2 and 4, with and without _metadata, as bare pickles and as archives, plus a few
# hostile pickles. Then runs the fuzzer. The growing corpus is kept in build-fuzz/fuzz-corpus/
# and any crashing input in build-fuzz/fuzz-artifacts/. Prints the number of executions and
# findings; exits non-zero when the fuzzer found something.
#
# Environment: SEEDVAE_GOLDEN_DIR (passed to the shared configure, default ../shared/golden),
# SEEDVAE_FUZZ_JOBS (build parallelism, default 2), CC/CXX (default clang/clang++).
set -euo pipefail

seconds="${1:-60}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -lt 1 ]]; then
  echo "usage: $0 [SECONDS]" >&2
  exit 2
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build-fuzz"
golden="${SEEDVAE_GOLDEN_DIR:-$root/../shared/golden}"
jobs="${SEEDVAE_FUZZ_JOBS:-2}"
seeds="$build/fuzz-seeds/torch_pickle"
corpus="$build/fuzz-corpus/torch_pickle"
artifacts="$build/fuzz-artifacts/torch_pickle"
log="$build/fuzz-torch-pickle.log"

echo "== configure ($build)"
cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_C_COMPILER="${CC:-clang}" -DCMAKE_CXX_COMPILER="${CXX:-clang++}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSEEDVAE_FUZZ=ON -DSEEDVAE_BUILD_TESTS=OFF -DSEEDVAE_WITH_UI=OFF -DSEEDVAE_WITH_MEDIA=OFF \
  -DSEEDVAE_WITH_CUDA=OFF -DSEEDVAE_GOLDEN_DIR="$golden" >/dev/null

echo "== build fuzz_torch_pickle"
ninja -C "$build" -j "$jobs" fuzz_torch_pickle
fuzzer="$build/tests/fuzz/fuzz_torch_pickle"

echo "== seed corpus ($seeds)"
rm -rf "$seeds"
mkdir -p "$seeds" "$corpus" "$artifacts"
python3 - "$seeds" <<'PY'
import collections, io, os, pickle, struct, sys, types, zipfile

out = sys.argv[1]
# Stand-ins for the names torch.save's pickles refer to, so that CPython's own pickler writes the
# same opcodes and globals (torch is not installed).
torch = types.ModuleType("torch"); utils = types.ModuleType("torch._utils")
sys.modules["torch"] = torch; sys.modules["torch._utils"] = utils
def _rebuild_tensor_v2(*a): pass
_rebuild_tensor_v2.__module__ = "torch._utils"; utils._rebuild_tensor_v2 = _rebuild_tensor_v2
class Storage:
    def __init__(self, cls, key, numel, data): self.cls, self.key, self.numel, self.data = cls, key, numel, data
for n in ("FloatStorage", "HalfStorage", "BFloat16Storage", "DoubleStorage"):
    c = type(n, (), {}); c.__module__ = "torch"; setattr(torch, n, c)
SIZE = {"FloatStorage": 4, "HalfStorage": 2, "BFloat16Storage": 2, "DoubleStorage": 8}
class Tensor:
    def __init__(self, storage, offset, shape, stride=None):
        self.storage, self.offset, self.shape = storage, offset, tuple(shape)
        if stride is None:
            stride, e = [], 1
            for d in reversed(shape): stride.insert(0, e); e *= max(d, 1)
        self.stride = tuple(stride)
    def __reduce__(self):
        return (_rebuild_tensor_v2, (self.storage, self.offset, self.shape, self.stride, False,
                                     collections.OrderedDict()))
class P(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", getattr(torch, obj.cls), obj.key, "cpu", obj.numel)
        return None

def state_dict(tensors, protocol=2, metadata=True):
    sd = collections.OrderedDict()
    for name, t in tensors: sd[name] = t
    if metadata: sd._metadata = collections.OrderedDict([("", {"version": 1})])
    buf = io.BytesIO(); P(buf, protocol=protocol).dump(sd); return buf.getvalue()

def pth(tensors, storages, **kw):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", state_dict(tensors, **kw))
        z.writestr("archive/byteorder", "little")
        for s in storages: z.writestr("archive/data/" + s.key, s.data)
        z.writestr("archive/version", "3\n")
    return buf.getvalue()

def emit(name, blob):
    with open(os.path.join(out, name), "wb") as f: f.write(blob)

def storage(cls, key, numel):
    return Storage(cls, key, numel, bytes((i * 7 + 3) & 0xFF for i in range(numel * SIZE[cls])))

s0 = storage("FloatStorage", "0", 6); s1 = storage("HalfStorage", "1", 4)
s2 = storage("BFloat16Storage", "2", 3); s3 = storage("DoubleStorage", "3", 1)
ts = [("enc.w", Tensor(s0, 0, [2, 3])), ("enc.h", Tensor(s1, 0, [4])), ("dec.b", Tensor(s2, 0, [3])),
      ("s", Tensor(s3, 0, [])), ("view", Tensor(s0, 2, [4, 1], [1, 9])), ("empty", Tensor(s1, 4, [0, 2]))]
for proto in (2, 4):
    emit(f"sd_p{proto}.pkl", state_dict(ts, protocol=proto))
    emit(f"sd_p{proto}.pth", pth(ts, [s0, s1, s2, s3], protocol=proto))
emit("sd_nometa.pkl", state_dict(ts[:2], metadata=False))
emit("empty.pkl", state_dict([]))
emit("empty.pth", pth([], []))
# Hostile seeds: an unknown global, a self-referential dict, a truncated pickle.
emit("os_system.pkl", b"\x80\x02cos\nsystem\nX\x02\x00\x00\x00idq\x00\x85R.")
emit("self_ref.pkl", b"\x80\x02}q\x00X\x01\x00\x00\x00ah\x00s.")
emit("truncated.pkl", state_dict(ts)[:200])
print(f"{len(os.listdir(out))} seed files")
PY

before_list="$build/fuzz-artifacts-before.txt"
find "$artifacts" -type f | sort >"$before_list"
echo "== fuzz for ${seconds}s (corpus $corpus)"
set +e
"$fuzzer" "$corpus" "$seeds" \
  -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -dict="$root/tests/fuzz/torch_pickle.dict" -artifact_prefix="$artifacts/" \
  -print_final_stats=1 >"$log" 2>&1
rc=$?
set -e

grep -E "^#[0-9]+[[:space:]]+(INITED|DONE)|stat::|ERROR|invariant|SUMMARY" "$log" | tail -n 20 || true
execs="$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}' | tail -n 1)"
execs="${execs:-$(grep -oE "^#[0-9]+" "$log" | tail -n 1 | tr -d "#")}"
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
