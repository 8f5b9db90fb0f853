#!/usr/bin/env bash
# Fuzzes the safetensors reader with libFuzzer + ASan + UBSan for a bounded time.
#
#   scripts/fuzz-safetensors.sh [SECONDS]      (default 60)
#
# Configures a separate clang build (build-fuzz/, -DSEEDVAE_FUZZ=ON), builds only the
# fuzz_safetensors target, generates a seed corpus (small valid files of every dtype, plus the
# headers of ../shared/golden/tiny/*.safetensors shrunk to small data, and their raw headers with
# truncated data), then runs the fuzzer. The growing corpus is kept in build-fuzz/fuzz-corpus/ and
# any crashing input in build-fuzz/fuzz-artifacts/. Prints the number of executions and findings;
# exits non-zero when the fuzzer found something.
#
# Environment: as scripts/fuzz-lib.sh says.
set -euo pipefail

# shellcheck source=scripts/fuzz-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/fuzz-lib.sh"
fuzz_setup fuzz_safetensors safetensors "${1:-60}"
python3 - "$seeds" "$golden/tiny" <<'PY'
import glob, json, os, struct, sys

out, tiny = sys.argv[1], sys.argv[2]
count = 0

def emit(name, blob):
    global count
    with open(os.path.join(out, name), "wb") as f:
        f.write(blob)
    count += 1

def build(tensors, metadata=None, pad=True):
    """tensors: [(name, dtype, shape, bytes)] in the given order; contiguous offsets."""
    header, off, data = {}, 0, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, blob in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(blob)]}
        off += len(blob)
        data += blob
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data

# Small valid files.
emit("empty.st", build([]))
emit("empty_meta.st", build([], {"k": "v"}))
emit("f32.st", build([("w", "F32", [2, 2], struct.pack("<4f", 1, -2, 0.5, 3e38))]))
emit("f16.st", build([("h", "F16", [3], struct.pack("<3H", 0x98A2, 0x7C00, 0x0001))]))
emit("bf16.st", build([("b", "BF16", [2], struct.pack("<2H", 0x3F80, 0x7FC0))]))
emit("f64.st", build([("d", "F64", [1], struct.pack("<d", 1e300))]))
emit("scalar_zero.st", build([("s", "F32", [], struct.pack("<f", 7)), ("z", "F16", [0, 5], b"")],
                             {"format": "pt"}))
emit("mixed_unpadded.st", build([("a", "F64", [1], struct.pack("<d", -1)),
                                 ("b", "F16", [1], struct.pack("<H", 0x3C00)),
                                 ("c", "F32", [1], struct.pack("<f", 2))], pad=False))
emit("unsupported_i8.st", build([("i", "I8", [4], b"\x01\x02\x03\x04")]))

# The real headers: shrunk to tiny valid files, and raw with truncated data.
for path in sorted(glob.glob(os.path.join(tiny, "*.safetensors"))):
    base = os.path.splitext(os.path.basename(path))[0]
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header_bytes = f.read(n)
        head = json.loads(header_bytes)
        start = 8 + n
        meta = head.pop("__metadata__", None)
        entries = sorted(head.items(), key=lambda kv: kv[1]["data_offsets"])
        size = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8}
        small = []
        for name, e in entries[:12]:
            shape = [min(d, 2) for d in e["shape"]]
            numel = 1
            for d in shape:
                numel *= d
            f.seek(start + e["data_offsets"][0])
            small.append((name, e["dtype"], shape, f.read(numel * size.get(e["dtype"], 1))))
        emit(base + "_small.st", build(small, meta))
        # The complete original header, followed by only a little data (rejected: offsets beyond
        # the data area, but it drives the parser through the whole real header).
        f.seek(start)
        emit(base + "_header_truncated.st", struct.pack("<Q", n) + header_bytes + f.read(64))
print(f"{count} seed files")
PY

fuzz_run "$root/tests/fuzz/safetensors.dict"
