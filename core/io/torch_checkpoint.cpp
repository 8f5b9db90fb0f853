// The torch.save zip reader (see torch_checkpoint.h).
#include "core/io/torch_checkpoint.h"

#include <limits>
#include <map>
#include <new>
#include <utility>

#include "core/io/mapped_file.h"
#include "core/io/zip_archive.h"

namespace seedvae {
namespace {

std::string display(const std::filesystem::path& path) {
  const std::u8string u = path.u8string();
  return std::string(u.begin(), u.end());
}

std::string as_text(std::span<const std::byte> b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

}  // namespace

struct TorchCheckpoint::Impl {
  struct Entry {
    DType dtype;
    Shape shape;
    uint64_t begin;  // in the image
    uint64_t size;
  };
  std::filesystem::path path;
  MappedFile map;
  std::vector<std::byte> owned;
  std::span<const std::byte> image;
  std::vector<std::string> names;
  std::vector<Entry> entries;
  std::map<std::string, size_t, std::less<>> index;
  std::map<std::string, std::string> metadata;

  Status parse(const std::string& who, const TorchPickleLimits& limits) {
    auto corrupt = [&](const std::string& what) { return corrupt_data(who + ": " + what); };
    SEEDVAE_ASSIGN_OR_RETURN(const ZipArchive zip, ZipArchive::read(image, who));
    if (zip.entries().empty()) return corrupt("an empty zip archive, not a torch.save checkpoint");
    // Every record lives under one top folder, named after the file when it was saved.
    const std::string& first = zip.entries().front().name;
    const size_t slash = first.find('/');
    if (slash == std::string::npos || slash == 0) {
      return corrupt("zip entry '" + first.substr(0, 120) +
                     "' is not inside a top folder: not a torch.save archive");
    }
    const std::string prefix = first.substr(0, slash + 1);
    for (const ZipEntry& e : zip.entries()) {
      if (e.name.compare(0, prefix.size(), prefix) != 0) {
        return corrupt("zip entries under more than one top folder ('" + prefix + "', '" +
                       e.name.substr(0, 120) + "'): not a torch.save archive");
      }
    }
    const ZipEntry* pkl = zip.find(prefix + "data.pkl");
    if (pkl == nullptr) {
      if (zip.find(prefix + "constants.pkl") != nullptr) {
        return unsupported(who +
                           ": a TorchScript archive (torch.jit.save), not a torch.save "
                           "state dict");
      }
      return corrupt("no '" + prefix + "data.pkl' in the zip archive: not a torch.save checkpoint");
    }
    if (const ZipEntry* order = zip.find(prefix + "byteorder")) {
      const std::string text = as_text(zip.bytes(*order));
      if (text == "big") {
        return unsupported(who +
                           ": a big-endian archive (byteorder 'big'); re-save it on a "
                           "little-endian machine");
      }
      if (text != "little") return corrupt("its byteorder record is not 'little' or 'big'");
    }
    if (pkl->size > limits.max_bytes) {
      return corrupt("'" + pkl->name + "' of " + std::to_string(pkl->size) +
                     " bytes exceeds the pickle limit of " + std::to_string(limits.max_bytes) +
                     " bytes");
    }
    const auto pickle = zip.bytes(*pkl);
    if (crc32(pickle) != pkl->crc32) {
      return corrupt("'" + pkl->name + "' fails its CRC-32 check (a damaged file)");
    }
    SEEDVAE_ASSIGN_OR_RETURN(TorchStateDict sd,
                             unpickle_state_dict(pickle, who + ": " + pkl->name, limits));

    // Storages: each the stored entry data/<key>, exactly numel x element size bytes.
    std::vector<const ZipEntry*> storage_entries;
    storage_entries.reserve(sd.storages.size());
    for (const TorchStorage& s : sd.storages) {
      const std::string name = prefix + "data/" + s.key;
      const ZipEntry* e = zip.find(name);
      if (e == nullptr) {
        return corrupt("storage '" + s.key + "' has no record '" + name + "' in the archive");
      }
      const auto esize = static_cast<uint64_t>(dtype_size(s.dtype));
      if (s.numel > std::numeric_limits<uint64_t>::max() / esize || s.numel * esize != e->size) {
        return corrupt("storage '" + s.key + "' declares " + std::to_string(s.numel) + " " +
                       std::string(dtype_name(s.dtype)) + " elements, but '" + name + "' holds " +
                       std::to_string(e->size) + " bytes");
      }
      storage_entries.push_back(e);
    }
    names.reserve(sd.tensors.size());
    entries.reserve(sd.tensors.size());
    for (TorchTensorRecord& t : sd.tensors) {
      const TorchStorage& s = sd.storages[t.storage];
      const ZipEntry& e = *storage_entries[t.storage];
      const auto esize = static_cast<uint64_t>(dtype_size(s.dtype));
      // The unpickler checked offset + numel <= the storage's numel, whose bytes fit the entry.
      const auto numel = static_cast<uint64_t>(t.shape.numel());
      entries.push_back(
          {s.dtype, std::move(t.shape), e.data_offset + t.offset * esize, numel * esize});
      index.emplace(t.name, names.size());
      names.push_back(std::move(t.name));
    }
    return Status::ok();
  }
};

TorchCheckpoint::TorchCheckpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TorchCheckpoint::TorchCheckpoint(TorchCheckpoint&&) noexcept = default;
TorchCheckpoint& TorchCheckpoint::operator=(TorchCheckpoint&&) noexcept = default;
TorchCheckpoint::~TorchCheckpoint() = default;

namespace {
template <typename Fn>
Status guarded(const std::string& who, Fn&& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return out_of_memory(who + ": out of memory");
  } catch (const std::exception& e) {
    return internal_error(who + ": unexpected exception: " + e.what());
  }
}
}  // namespace

Result<TorchCheckpoint> TorchCheckpoint::open(const std::filesystem::path& path,
                                              const TorchPickleLimits& limits) {
  std::unique_ptr<Impl> impl;
  // Every message says what kind of file this is: a .pth given where safetensors were expected
  // is then recognised even when it is damaged.
  const std::string who = display(path) + ": PyTorch checkpoint";
  Status st = guarded(who, [&]() -> Status {
    SEEDVAE_ASSIGN_OR_RETURN(MappedFile map, MappedFile::open(path));
    impl = std::make_unique<Impl>();
    impl->path = path;
    impl->map = std::move(map);
    impl->image = impl->map.bytes();
    return impl->parse(who, limits);
  });
  if (!st.is_ok()) return st;
  return TorchCheckpoint(std::move(impl));
}

Result<TorchCheckpoint> TorchCheckpoint::parse(std::span<const std::byte> image,
                                               const TorchPickleLimits& limits) {
  std::unique_ptr<Impl> impl;
  const std::string who = "in-memory PyTorch checkpoint";
  Status st = guarded(who, [&]() -> Status {
    impl = std::make_unique<Impl>();
    impl->owned.assign(image.begin(), image.end());
    impl->image = impl->owned;
    return impl->parse(who, limits);
  });
  if (!st.is_ok()) return st;
  return TorchCheckpoint(std::move(impl));
}

const std::vector<std::string>& TorchCheckpoint::names() const {
  return impl_->names;
}
bool TorchCheckpoint::contains(std::string_view name) const {
  return impl_->index.find(name) != impl_->index.end();
}
Result<TensorView> TorchCheckpoint::get(std::string_view name) const {
  const auto it = impl_->index.find(name);
  if (it == impl_->index.end()) {
    const std::string who =
        impl_->path.empty() ? "in-memory PyTorch checkpoint" : display(impl_->path);
    return not_found(who + ": no tensor named '" + std::string(name.substr(0, 160)) + "'");
  }
  const Impl::Entry& e = impl_->entries[it->second];
  TensorView v;
  v.name = it->first;
  v.dtype = e.dtype;
  v.shape = e.shape;
  v.bytes = impl_->image.subspan(static_cast<size_t>(e.begin), static_cast<size_t>(e.size));
  return v;
}
const std::map<std::string, std::string>& TorchCheckpoint::metadata() const {
  return impl_->metadata;
}
const std::filesystem::path& TorchCheckpoint::path() const {
  return impl_->path;
}
uint64_t TorchCheckpoint::file_size() const {
  return impl_->image.size();
}

}  // namespace seedvae
