// A minimal reader of the zip archives `torch.save` writes: stored (uncompressed) entries only,
// handed out as zero-copy spans of the caller's bytes (a memory map).
//
// Why not libzip or minizip (both in Debian 12): a checkpoint's storages must stay views into the
// memory map, so the reader must give each entry's data offset in the file. libzip has no API for
// that (it only copies through zip_fread); minizip exposes it only through its own file-I/O layer.
// Either would also be a new dependency of the mingw-w64 Windows build and an uninstrumented
// library under the fuzzer, while the format subset needed here is small: the end-of-central-
// directory record (with its zip64 form, which PyTorch always writes), the central directory
// (zip64 extra fields included) and each entry's local header. Everything is bounds-checked with
// overflow-safe arithmetic; compressed and encrypted entries, multi-disk archives, duplicate
// names and entries that overlap are refused with a message naming the entry.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"

namespace seedvae {

struct ZipEntry {
  std::string name;
  uint64_t data_offset = 0;  // of the entry's bytes in the archive
  uint64_t size = 0;
  uint32_t crc32 = 0;  // as recorded in the central directory
};

class ZipArchive {
 public:
  // Far above any real checkpoint's entry count (a few hundred), far below what exhausts memory.
  static constexpr uint64_t kMaxEntries = 1'000'000;
  static constexpr uint64_t kMaxNameBytes = 4096;

  // Reads the directory of `image` (which must outlive the archive). `who` names the file in
  // every message.
  static Result<ZipArchive> read(std::span<const std::byte> image, const std::string& who);

  // Entries in central-directory order.
  const std::vector<ZipEntry>& entries() const { return entries_; }
  const ZipEntry* find(std::string_view name) const;
  std::span<const std::byte> bytes(const ZipEntry& e) const {
    return image_.subspan(static_cast<size_t>(e.data_offset), static_cast<size_t>(e.size));
  }

 private:
  std::span<const std::byte> image_;
  std::vector<ZipEntry> entries_;
  std::map<std::string, size_t, std::less<>> index_;
};

// CRC-32 (ISO 3309, the zip checksum).
uint32_t crc32(std::span<const std::byte> bytes, uint32_t crc = 0);

}  // namespace seedvae
