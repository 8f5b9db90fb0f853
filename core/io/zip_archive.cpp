// The stored-entry zip reader (see zip_archive.h). Layout references: the PKWARE APPNOTE
// (sections 4.3.7 local header, 4.3.12 central directory header, 4.3.14-4.3.16 zip64 and
// end-of-central-directory records, 4.5.3 the zip64 extended-information extra field).
#include "core/io/zip_archive.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <limits>
#include <utility>

namespace seedvae {
namespace {

constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kEnd64Sig = 0x06064b50;
constexpr uint32_t kEnd64LocatorSig = 0x07064b50;
constexpr uint64_t kLocalFixed = 30;
constexpr uint64_t kCentralFixed = 46;
constexpr uint64_t kEndFixed = 22;
constexpr uint64_t kEnd64LocatorSize = 20;
constexpr uint64_t kEnd64Fixed = 56;
constexpr uint16_t kZip64ExtraId = 0x0001;

// Little-endian reads at checked offsets: the caller has checked `at + n <= image.size()`.
uint64_t le(std::span<const std::byte> b, uint64_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i)
    v = (v << 8) | static_cast<uint8_t>(b[at + static_cast<uint64_t>(i)]);
  return v;
}

// `at + n <= size` without overflow.
bool fits(uint64_t at, uint64_t n, uint64_t size) {
  return at <= size && n <= size - at;
}

// An entry name for messages: printable ASCII kept, everything else escaped, long names cut.
std::string shown(std::string_view s) {
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < 120; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c >= 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > 120) out += "...";
  return out + "'";
}

std::string num(uint64_t v) {
  return std::to_string(v);
}

struct EndRecord {
  uint64_t entries = 0;
  uint64_t cd_size = 0;
  uint64_t cd_offset = 0;
  uint64_t cd_limit = 0;  // where the central directory must end (the first end record)
};

Result<EndRecord> read_end(std::span<const std::byte> image, const std::string& who) {
  auto corrupt = [&](const std::string& what) { return corrupt_data(who + ": " + what); };
  const uint64_t size = image.size();
  if (size < kEndFixed) {
    return corrupt("file of " + num(size) + " bytes is too short for a zip archive (truncated)");
  }
  // The end record is the last 22 bytes plus a comment of at most 65535 bytes: search backwards
  // for a signature whose comment length reaches exactly the end of the file.
  uint64_t pos = size - kEndFixed;
  const uint64_t lowest = size - kEndFixed > 0xFFFF ? size - kEndFixed - 0xFFFF : 0;
  bool found = false;
  for (;;) {
    if (le(image, pos, 4) == kEndSig && pos + kEndFixed + le(image, pos + 20, 2) == size) {
      found = true;
      break;
    }
    if (pos == lowest) break;
    --pos;
  }
  if (!found) {
    return corrupt(
        "no zip end-of-central-directory record (a truncated or damaged archive: a complete "
        "torch.save file ends with one)");
  }
  EndRecord r;
  const uint64_t disk = le(image, pos + 4, 2), cd_disk = le(image, pos + 6, 2);
  const uint64_t disk_entries = le(image, pos + 8, 2);
  r.entries = le(image, pos + 10, 2);
  r.cd_size = le(image, pos + 12, 4);
  r.cd_offset = le(image, pos + 16, 4);
  r.cd_limit = pos;
  // zip64: a locator right before the end record points at the zip64 end record.
  if (pos >= kEnd64LocatorSize && le(image, pos - kEnd64LocatorSize, 4) == kEnd64LocatorSig) {
    const uint64_t loc = pos - kEnd64LocatorSize;
    const uint64_t rec = le(image, loc + 8, 8);
    if (le(image, loc + 4, 4) != 0 || le(image, loc + 16, 4) > 1) {
      return unsupported(who + ": multi-disk (split) zip archives are not supported");
    }
    if (!fits(rec, kEnd64Fixed, loc) || le(image, rec, 4) != kEnd64Sig) {
      return corrupt("the zip64 end-of-central-directory locator points at offset " + num(rec) +
                     ", where there is no zip64 end record");
    }
    const uint64_t rec_size = le(image, rec + 4, 8);
    if (rec_size < kEnd64Fixed - 12 || rec_size > loc - rec - 12) {
      return corrupt("the zip64 end-of-central-directory record declares a size of " +
                     num(rec_size) + " bytes that does not fit before its locator");
    }
    if (le(image, rec + 16, 4) != 0 || le(image, rec + 20, 4) != 0) {
      return unsupported(who + ": multi-disk (split) zip archives are not supported");
    }
    const uint64_t disk_entries64 = le(image, rec + 24, 8);
    r.entries = le(image, rec + 32, 8);
    r.cd_size = le(image, rec + 40, 8);
    r.cd_offset = le(image, rec + 48, 8);
    r.cd_limit = rec;
    if (disk_entries64 != r.entries) {
      return unsupported(who + ": multi-disk (split) zip archives are not supported");
    }
  } else {
    if (disk != 0 || cd_disk != 0 || disk_entries != r.entries) {
      return unsupported(who + ": multi-disk (split) zip archives are not supported");
    }
    if (r.entries == 0xFFFF || r.cd_size == 0xFFFFFFFF || r.cd_offset == 0xFFFFFFFF) {
      return corrupt("the end record asks for zip64 values, but there is no zip64 locator");
    }
  }
  if (r.entries > ZipArchive::kMaxEntries) {
    return corrupt("the archive declares " + num(r.entries) + " entries, above the limit of " +
                   num(ZipArchive::kMaxEntries));
  }
  if (!fits(r.cd_offset, r.cd_size, r.cd_limit)) {
    return corrupt("the central directory at offset " + num(r.cd_offset) + " of " + num(r.cd_size) +
                   " bytes lies outside the archive's " + num(r.cd_limit) +
                   " bytes before its end record (truncated?)");
  }
  if (r.entries > r.cd_size / kCentralFixed) {
    return corrupt("the archive declares " + num(r.entries) + " entries, more than its " +
                   num(r.cd_size) + "-byte central directory can hold");
  }
  return r;
}

}  // namespace

uint32_t crc32(std::span<const std::byte> bytes, uint32_t crc) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (std::byte b : bytes) crc = table[(crc ^ static_cast<uint8_t>(b)) & 0xFFu] ^ (crc >> 8);
  return ~crc;
}

const ZipEntry* ZipArchive::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

Result<ZipArchive> ZipArchive::read(std::span<const std::byte> image, const std::string& who) {
  auto corrupt = [&](const std::string& what) { return corrupt_data(who + ": " + what); };
  SEEDVAE_ASSIGN_OR_RETURN(const EndRecord end, read_end(image, who));
  ZipArchive z;
  z.image_ = image;
  z.entries_.reserve(static_cast<size_t>(end.entries));
  struct Span {
    uint64_t begin, end;
    size_t entry;
  };
  std::vector<Span> spans;  // local header + data of each entry
  spans.reserve(static_cast<size_t>(end.entries));
  const uint64_t cd_end = end.cd_offset + end.cd_size;
  uint64_t at = end.cd_offset;
  for (uint64_t i = 0; i < end.entries; ++i) {
    if (!fits(at, kCentralFixed, cd_end) || le(image, at, 4) != kCentralSig) {
      return corrupt("central directory entry " + num(i) + " of " + num(end.entries) +
                     " at offset " + num(at) + " is missing or damaged");
    }
    const uint64_t flags = le(image, at + 8, 2), method = le(image, at + 10, 2);
    const auto crc = static_cast<uint32_t>(le(image, at + 16, 4));
    uint64_t comp = le(image, at + 20, 4), size = le(image, at + 24, 4);
    const uint64_t name_len = le(image, at + 28, 2), extra_len = le(image, at + 30, 2),
                   comment_len = le(image, at + 32, 2);
    uint64_t disk = le(image, at + 34, 2), local = le(image, at + 42, 4);
    const uint64_t var_len = name_len + extra_len + comment_len;
    if (!fits(at + kCentralFixed, var_len, cd_end)) {
      return corrupt("central directory entry " + num(i) + " runs past the central directory");
    }
    const uint64_t name_at = at + kCentralFixed;
    std::string name(reinterpret_cast<const char*>(image.data() + name_at),
                     static_cast<size_t>(name_len));
    if (name.empty() || name_len > kMaxNameBytes || name.find('\0') != std::string::npos) {
      return corrupt("central directory entry " + num(i) + " has an invalid name " + shown(name));
    }
    // Extra fields: the zip64 one replaces the 32-bit values that are all ones, in this order.
    uint64_t x = name_at + name_len;
    const uint64_t x_end = x + extra_len;
    while (x < x_end) {
      if (!fits(x, 4, x_end))
        return corrupt("entry " + shown(name) + " has a malformed extra field");
      const uint64_t id = le(image, x, 2), len = le(image, x + 2, 2);
      if (!fits(x + 4, len, x_end)) {
        return corrupt("entry " + shown(name) + " has an extra field running past its end");
      }
      if (id == kZip64ExtraId) {
        uint64_t p = x + 4;
        const uint64_t p_end = p + len;
        auto take = [&](uint64_t& v, int n) {
          if (!fits(p, static_cast<uint64_t>(n), p_end)) return false;
          v = le(image, p, n);
          p += static_cast<uint64_t>(n);
          return true;
        };
        if ((size == 0xFFFFFFFF && !take(size, 8)) || (comp == 0xFFFFFFFF && !take(comp, 8)) ||
            (local == 0xFFFFFFFF && !take(local, 8)) || (disk == 0xFFFF && !take(disk, 4))) {
          return corrupt("entry " + shown(name) + " has a zip64 extra field too short for the " +
                         "values it must supply");
        }
      }
      x += 4 + len;
    }
    if (disk != 0) return unsupported(who + ": multi-disk (split) zip archives are not supported");
    if (flags & 0x41u) {
      return unsupported(who + ": entry " + shown(name) + " is encrypted");
    }
    if (method != 0) {
      return unsupported(who + ": entry " + shown(name) + " is compressed (method " + num(method) +
                         (method == 8 ? ", deflate" : "") +
                         "); torch.save stores entries uncompressed, and this reader takes stored "
                         "entries only (re-save the checkpoint with torch.save)");
    }
    if (comp != size) {
      return corrupt("stored entry " + shown(name) + " declares " + num(size) +
                     " bytes but a stored size of " + num(comp));
    }
    // The local header: its own name and extra lengths place the data (PyTorch pads the local
    // extra field to align the data; the central one has no padding).
    if (!fits(local, kLocalFixed, end.cd_offset) || le(image, local, 4) != kLocalSig) {
      return corrupt("entry " + shown(name) + " points at offset " + num(local) +
                     ", where there is no local file header before the central directory");
    }
    const uint64_t l_name = le(image, local + 26, 2), l_extra = le(image, local + 28, 2);
    if (le(image, local + 8, 2) != method) {
      return corrupt("entry " + shown(name) + ": the local header's method differs");
    }
    if (!fits(local + kLocalFixed, l_name + l_extra, end.cd_offset) || l_name != name_len ||
        std::string_view(reinterpret_cast<const char*>(image.data() + local + kLocalFixed),
                         static_cast<size_t>(l_name)) != name) {
      return corrupt("entry " + shown(name) + ": the local header names another entry");
    }
    const uint64_t data = local + kLocalFixed + l_name + l_extra;
    if (!fits(data, size, end.cd_offset)) {
      return corrupt("entry " + shown(name) + " declares " + num(size) + " bytes at offset " +
                     num(data) + ", beyond the " + num(end.cd_offset) +
                     " bytes before the central directory (truncated file or hostile size)");
    }
    if (!z.index_.emplace(name, z.entries_.size()).second) {
      return corrupt("duplicate entry " + shown(name));
    }
    spans.push_back({local, data + size, z.entries_.size()});
    z.entries_.push_back({std::move(name), data, size, crc});
    at += kCentralFixed + var_len;
  }
  // Entries may not share bytes (overlapping entries are the trick of some zip bombs).
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].begin < spans[i - 1].end) {
      return corrupt("entries " + shown(z.entries_[spans[i - 1].entry].name) + " and " +
                     shown(z.entries_[spans[i].entry].name) + " overlap");
    }
  }
  return z;
}

}  // namespace seedvae
