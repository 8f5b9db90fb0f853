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
# Environment: as scripts/fuzz-lib.sh says.
set -euo pipefail

# shellcheck source=scripts/fuzz-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/fuzz-lib.sh"
fuzz_setup fuzz_torch_pickle torch_pickle "${1:-60}"
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

fuzz_run "$root/tests/fuzz/torch_pickle.dict"
