// libFuzzer target for the safetensors reader (and, on accepted inputs, the writer).
//
// Any input must give either an error Status of the documented kinds or a file whose invariants
// hold: every tensor's view lies in the image, views tile the data area exactly, conversions run,
// and serialize -> parse reproduces the same tensors and metadata. A violated invariant aborts
// (a finding); crashes, leaks and UB are caught by ASan/UBSan.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/io/safetensors.h"

using namespace seedvae;

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "fuzz_safetensors invariant violated: %s %s\n", what, detail.c_str());
  std::abort();
}

void check(bool ok, const char* what, const std::string& detail = {}) {
  if (!ok) fail(what, detail);
}

uint64_t header_length(const uint8_t* data) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
  auto parsed = SafetensorsFile::parse(input);
  if (!parsed.is_ok()) {
    const Status& st = parsed.status();
    check(st.code() == StatusCode::kCorruptData || st.code() == StatusCode::kUnsupported,
          "unexpected error code", st.to_string());
    check(!st.message().empty(), "empty error message");
    return 0;
  }
  const SafetensorsFile& file = parsed.value();
  check(file.file_size() == size, "file_size");
  check(size >= 8, "accepted a file shorter than 8 bytes");
  const uint64_t data_start = 8 + header_length(data);
  check(data_start <= size, "header beyond the file");

  // Views: inside the copied image, in offset order, tiling the data area.
  const std::byte* expected = nullptr;
  uint64_t total = 0;
  std::vector<HostTensor> hosts;
  std::vector<NamedTensor> named;
  hosts.reserve(file.names().size());
  for (const std::string& name : file.names()) {
    check(file.contains(name), "contains() false for a listed name", name);
    auto view = file.get(name);
    check(view.is_ok(), "get() failed for a listed name", name);
    const TensorView& v = view.value();
    check(v.name == name, "view name");
    int64_t numel = 0;
    check(v.shape.checked_numel(&numel), "accepted an overflowing shape", name);
    check(
        static_cast<uint64_t>(numel) * static_cast<uint64_t>(dtype_size(v.dtype)) == v.bytes.size(),
        "view size != numel x dtype size", name);
    if (expected != nullptr && !v.bytes.empty())
      check(v.bytes.data() == expected, "views not contiguous", name);
    if (!v.bytes.empty()) expected = v.bytes.data() + v.bytes.size();
    total += v.bytes.size();

    // Copies and conversions (bounded: the data came from the input, so sizes are small).
    hosts.push_back(v.to_host());
    check(hosts.back().nbytes() == static_cast<int64_t>(v.bytes.size()), "to_host size", name);
    check(v.bytes.empty() || std::memcmp(hosts.back().raw(), v.bytes.data(), v.bytes.size()) == 0,
          "to_host bytes", name);
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kF64}) {
      const HostTensor c = v.to_host(t);
      check(c.numel() == numel && c.dtype() == t, "to_host(dtype)", name);
    }
    named.push_back({name, nullptr});
  }
  check(total == size - data_start, "views do not cover the data area");
  for (size_t i = 0; i < named.size(); ++i) named[i].tensor = &hosts[i];

  // Writer round trip: serialize what was read, parse it back, compare.
  auto bytes = serialize_safetensors(named, file.metadata());
  check(bytes.is_ok(), "serialize failed on a parsed file", bytes.status().to_string());
  auto again = SafetensorsFile::parse(bytes.value());
  check(again.is_ok(), "re-parse of serialized file failed", again.status().to_string());
  check(again->metadata() == file.metadata(), "metadata round trip");
  check(again->names().size() == file.names().size(), "tensor count round trip");
  for (const std::string& name : file.names()) {
    auto a = file.get(name);
    auto b = again->get(name);
    check(b.is_ok(), "tensor lost in round trip", name);
    check(a->dtype == b->dtype && a->shape == b->shape, "dtype/shape round trip", name);
    check(a->bytes.size() == b->bytes.size() &&
              (a->bytes.empty() ||
               std::memcmp(a->bytes.data(), b->bytes.data(), a->bytes.size()) == 0),
          "bytes round trip", name);
  }
  // Serialisation is canonical: a second pass gives identical bytes.
  std::vector<HostTensor> hosts2;
  std::vector<NamedTensor> named2;
  hosts2.reserve(again->names().size());
  for (const std::string& name : again->names()) {
    hosts2.push_back(again->get(name)->to_host());
    named2.push_back({name, &hosts2.back()});
  }
  auto bytes2 = serialize_safetensors(named2, again->metadata());
  check(bytes2.is_ok() && bytes2.value() == bytes.value(), "serialization not canonical");
  return 0;
}
