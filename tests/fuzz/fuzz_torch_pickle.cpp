// libFuzzer target for the .pth reader: the restricted unpickler, the stored-entry zip reader
// and TorchCheckpoint.
//
// An input starting with "PK" is a whole archive (TorchCheckpoint::parse); anything else is a
// data.pkl (unpickle_state_dict) and, when it is accepted, is also wrapped into an archive with
// storages of the declared sizes (when they are small), so both layers run on the same pickle.
// Any input must give an error Status of the documented kinds or tensors whose invariants hold:
// each record inside its storage, each view inside the image with numel x element size bytes,
// conversions run. A violated invariant aborts (a finding); crashes, leaks and UB are caught by
// ASan/UBSan.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/io/torch_checkpoint.h"
#include "core/io/torch_pickle.h"
#include "tests/io/pth_writer.h"

using namespace seedvae;

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "fuzz_torch_pickle invariant violated: %s %s\n", what, detail.c_str());
  std::abort();
}

void check(bool ok, const char* what, const std::string& detail = {}) {
  if (!ok) fail(what, detail);
}

void check_error(const Status& st) {
  check(st.code() == StatusCode::kCorruptData || st.code() == StatusCode::kUnsupported,
        "unexpected error code", st.to_string());
  check(!st.message().empty(), "empty error message");
}

void check_checkpoint(const TorchCheckpoint& f, std::span<const std::byte> input) {
  check(f.file_size() == input.size(), "file_size");
  for (const std::string& name : f.names()) {
    check(f.contains(name), "name not found", name);
    auto v = f.get(name);
    check(v.is_ok(), "get failed", name);
    int64_t numel = 0;
    check(v->shape.checked_numel(&numel), "shape overflows", name);
    check(static_cast<uint64_t>(numel) * static_cast<uint64_t>(dtype_size(v->dtype)) ==
              v->bytes.size(),
          "view size", name);
    if (numel <= 4096) {
      const HostTensor h = v->to_host(DType::kF32);
      check(h.numel() == numel, "conversion", name);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
  if (size >= 2 && data[0] == 'P' && data[1] == 'K') {
    auto parsed = TorchCheckpoint::parse(input);
    if (!parsed.is_ok()) {
      check_error(parsed.status());
      return 0;
    }
    check_checkpoint(parsed.value(), input);
    return 0;
  }
  auto sd = unpickle_state_dict(input, "fuzz");
  if (!sd.is_ok()) {
    check(sd.status().code() == StatusCode::kCorruptData, "unexpected pickle error code",
          sd.status().to_string());
    return 0;
  }
  uint64_t total = 0;
  for (const TorchStorage& s : sd->storages)
    total += s.numel * static_cast<uint64_t>(dtype_size(s.dtype));
  for (const TorchTensorRecord& t : sd->tensors) {
    check(t.storage < sd->storages.size(), "storage index", t.name);
    const TorchStorage& s = sd->storages[t.storage];
    int64_t numel = 0;
    check(t.shape.checked_numel(&numel), "record shape overflows", t.name);
    check(t.offset <= s.numel && static_cast<uint64_t>(numel) <= s.numel - t.offset,
          "record outside its storage", t.name);
  }
  if (total > (1u << 20)) return 0;
  // The same pickle inside an archive with storages of the declared sizes.
  std::vector<test::ZipFileSpec> files;
  files.push_back({"archive/data.pkl", std::string(reinterpret_cast<const char*>(data), size)});
  for (const TorchStorage& s : sd->storages) {
    files.push_back({"archive/data/" + s.key,
                     std::string(s.numel * static_cast<uint64_t>(dtype_size(s.dtype)), '\x3c')});
  }
  const std::string archive = test::zip_archive(files);
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(archive.data()),
                                         archive.size());
  auto parsed = TorchCheckpoint::parse(bytes);
  check(parsed.is_ok(), "an accepted pickle in a well-formed archive was refused",
        parsed.status().to_string());
  check(parsed->names().size() == sd->tensors.size(), "tensor count");
  check_checkpoint(parsed.value(), bytes);
  return 0;
}
