// safetensors reader and writer (see safetensors.h).
//
// The header is parsed with nlohmann-json's SAX interface into a small state machine instead of a
// DOM: the DOM silently keeps one of two duplicate keys, while the SAX handler sees every key and
// rejects duplicates at the top level, inside tensor entries and inside __metadata__. The handler
// accepts exactly the shapes the format allows (a top object of objects, arrays of integers only
// under "shape" and "data_offsets") and stops at the first deviation, so hostile nesting never
// builds anything. No nlohmann exception leaves this file.
#include "core/io/safetensors.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>

#include "core/base/atomic_file.h"
#include "core/io/mapped_file.h"

namespace seedvae {
namespace {

using Json = nlohmann::json;

constexpr size_t kMaxRank = 64;
constexpr std::string_view kMetadataKey = "__metadata__";

// An untrusted string made safe for an error message: control bytes escaped, long text shortened
// (at a UTF-8 character boundary). With `ascii_only`, bytes >= 0x80 are escaped too (for text that
// may be arbitrary binary, such as what the JSON lexer read).
std::string escaped(std::string_view s, bool ascii_only = false, size_t max_shown = 160) {
  size_t shown = s.size();
  if (shown > max_shown) {
    shown = max_shown;
    while (shown > 0 && (static_cast<unsigned char>(s[shown]) & 0xC0u) == 0x80u) --shown;
  }
  std::string out;
  for (size_t i = 0; i < shown; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7F || (ascii_only && c >= 0x80)) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (shown < s.size()) out += "...";
  return out;
}

// A tensor name, key or dtype quoted for an error message.
std::string quote_name(std::string_view s) {
  return "'" + escaped(s) + "'";
}

// A path for messages, as UTF-8 (path::string() can throw on Windows for non-ANSI characters).
std::string display(const std::filesystem::path& path) {
  const std::u8string u = path.u8string();
  return std::string(u.begin(), u.end());
}

std::string range_string(uint64_t begin, uint64_t end) {
  // Appended piecewise: `"[" + std::to_string(...)` trips GCC 12's -Wrestrict false positive.
  std::string s = "[";
  s += std::to_string(begin);
  s += ", ";
  s += std::to_string(end);
  s += "]";
  return s;
}

// safetensors dtypes this engine does not compute with: a valid file, refused as unsupported.
bool is_other_safetensors_dtype(std::string_view s) {
  static constexpr std::array<std::string_view, 17> kOther = {
      "BOOL",    "U8",      "I8",      "I16",     "U16",     "I32", "U32", "I64",      "U64",
      "F8_E5M2", "F8_E4M3", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4",  "C64", "F8_E4M3FN"};
  return std::find(kOther.begin(), kOther.end(), s) != kOther.end();
}

// ---------------------------------------------------------------------------------------------
// Header SAX handler

struct RawEntry {
  std::string name;
  std::string dtype;
  std::vector<uint64_t> shape;
  std::vector<uint64_t> offsets;
  unsigned seen = 0;  // bit per field
};

enum Field : unsigned { kFieldDtype = 1, kFieldShape = 2, kFieldOffsets = 4 };

class HeaderHandler {
 public:
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;

  std::vector<RawEntry> entries;
  std::map<std::string, std::string> metadata;
  std::string error;  // first problem found; empty while parsing succeeds

  bool null() { return type_error("null"); }
  bool boolean(bool) { return type_error("boolean"); }
  bool number_integer(number_integer_t v) {
    if (v >= 0) return number_unsigned(static_cast<number_unsigned_t>(v));  // "-0"
    if (state_ == State::kShape) {
      return fail("tensor " + quote_name(entry().name) + " has a negative shape dimension " +
                  std::to_string(v));
    }
    if (state_ == State::kOffsets) {
      return fail("tensor " + quote_name(entry().name) + " has a negative data offset " +
                  std::to_string(v));
    }
    return type_error("number");
  }
  bool number_unsigned(number_unsigned_t v) {
    if (state_ == State::kShape) {
      if (entry().shape.size() >= kMaxRank) {
        return fail("tensor " + quote_name(entry().name) + " has more than " +
                    std::to_string(kMaxRank) + " shape dimensions");
      }
      entry().shape.push_back(v);
      return true;
    }
    if (state_ == State::kOffsets) {
      if (entry().offsets.size() >= 2) return offsets_count_error();
      entry().offsets.push_back(v);
      return true;
    }
    return type_error("number");
  }
  bool number_float(number_float_t, const string_t& text) {
    if (state_ == State::kShape) {
      return fail("tensor " + quote_name(entry().name) +
                  " has a non-integer or out-of-range shape dimension " + quote_name(text));
    }
    if (state_ == State::kOffsets) {
      return fail("tensor " + quote_name(entry().name) +
                  " has a non-integer or out-of-range data offset " + quote_name(text));
    }
    return type_error("number");
  }
  bool string(string_t& s) {
    if (state_ == State::kEntry && field_ == kFieldDtype) {
      entry().dtype = std::move(s);
      return true;
    }
    if (state_ == State::kMetadata) {
      metadata.emplace(std::move(key_), std::move(s));
      return true;
    }
    return type_error("string");
  }
  bool binary(binary_t&) { return type_error("binary value"); }

  bool start_object(std::size_t) {
    if (state_ == State::kBeforeTop) {
      state_ = State::kTop;
      return true;
    }
    if (state_ == State::kTop) {
      if (key_ == kMetadataKey) {
        state_ = State::kMetadata;
        return true;
      }
      entries.emplace_back();
      entries.back().name = std::move(key_);
      state_ = State::kEntry;
      return true;
    }
    return type_error("object");
  }

  bool key(string_t& k) {
    switch (state_) {
      case State::kTop:
        if (!top_keys_.insert(k).second) {
          return fail("duplicate key " + quote_name(k) + " in the header");
        }
        key_ = std::move(k);
        return true;
      case State::kMetadata:
        if (metadata.count(k) != 0) {
          return fail("duplicate key " + quote_name(k) + " in " + std::string(kMetadataKey));
        }
        key_ = std::move(k);
        return true;
      case State::kEntry: {
        unsigned f = 0;
        if (k == "dtype") {
          f = kFieldDtype;
        } else if (k == "shape") {
          f = kFieldShape;
        } else if (k == "data_offsets") {
          f = kFieldOffsets;
        } else {
          return fail("tensor " + quote_name(entry().name) + " has an unknown field " +
                      quote_name(k));
        }
        if (entry().seen & f) {
          return fail("tensor " + quote_name(entry().name) + " has a duplicate key " +
                      quote_name(k));
        }
        entry().seen |= f;
        field_ = static_cast<Field>(f);
        return true;
      }
      default:
        return fail("unexpected key " + quote_name(k));  // unreachable: keys come inside objects
    }
  }

  bool end_object() {
    switch (state_) {
      case State::kTop: state_ = State::kDone; return true;
      case State::kMetadata: state_ = State::kTop; return true;
      case State::kEntry: {
        const RawEntry& e = entry();
        for (const auto& [bit, name] :
             {std::pair{kFieldDtype, "dtype"}, std::pair{kFieldShape, "shape"},
              std::pair{kFieldOffsets, "data_offsets"}}) {
          if (!(e.seen & bit)) {
            return fail("tensor " + quote_name(e.name) + " is missing the field '" + name + "'");
          }
        }
        state_ = State::kTop;
        return true;
      }
      default: return fail("unbalanced object");  // unreachable: the parser balances brackets
    }
  }

  bool start_array(std::size_t) {
    if (state_ == State::kEntry && field_ == kFieldShape) {
      state_ = State::kShape;
      return true;
    }
    if (state_ == State::kEntry && field_ == kFieldOffsets) {
      state_ = State::kOffsets;
      return true;
    }
    return type_error("array");
  }

  bool end_array() {
    if (state_ == State::kShape) {
      state_ = State::kEntry;
      return true;
    }
    if (state_ == State::kOffsets) {
      if (entry().offsets.size() != 2) return offsets_count_error();
      state_ = State::kEntry;
      return true;
    }
    return fail("unbalanced array");  // unreachable
  }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) {
    // ex.what() names the line/column, what was read and what was expected; what was read may be
    // binary garbage, so it is shown ASCII-only.
    std::string_view what = ex.what();
    if (const size_t tag = what.find("] ");
        what.starts_with("[json.exception") && tag != std::string_view::npos) {
      what.remove_prefix(tag + 2);  // drop "[json.exception.parse_error.101] "
    }
    return fail("malformed JSON in the header near byte " + std::to_string(position) + ": " +
                escaped(what, /*ascii_only=*/true, /*max_shown=*/400));
  }

 private:
  enum class State { kBeforeTop, kTop, kEntry, kMetadata, kShape, kOffsets, kDone };

  RawEntry& entry() { return entries.back(); }

  bool fail(std::string message) {
    if (error.empty()) error = std::move(message);
    return false;
  }

  bool offsets_count_error() {
    return fail("tensor " + quote_name(entry().name) +
                " has data_offsets that are not exactly two integers [begin, end]");
  }

  // A value of the wrong JSON type for where it appears.
  bool type_error(const char* kind) {
    const std::string_view k = kind;
    const std::string a = std::string(k == "array" || k == "object" ? "an " : "a ") + kind;
    switch (state_) {
      case State::kBeforeTop: return fail("the header is not a JSON object (it is " + a + ")");
      case State::kTop:
        if (key_ == kMetadataKey) {
          return fail(std::string(kMetadataKey) + " is not a JSON object (it is " + a + ")");
        }
        return fail("the entry for tensor " + quote_name(key_) + " is not a JSON object (it is " +
                    a + ")");
      case State::kMetadata:
        return fail(std::string(kMetadataKey) + " value of " + quote_name(key_) +
                    " is not a string (it is " + a + ")");
      case State::kEntry:
        if (field_ == kFieldDtype) {
          return fail("tensor " + quote_name(entry().name) +
                      " has a dtype that is not a string (it is " + a + ")");
        }
        if (field_ == kFieldShape) {
          return fail("tensor " + quote_name(entry().name) +
                      " has a shape that is not an array of integers (it is " + a + ")");
        }
        return offsets_count_error();
      case State::kShape:
        return fail("tensor " + quote_name(entry().name) + " has a shape dimension that is " + a +
                    ", not a non-negative integer");
      case State::kOffsets: return offsets_count_error();
      case State::kDone: break;
    }
    return fail("unexpected " + a);  // unreachable: strict parsing rejects trailing values
  }

  State state_ = State::kBeforeTop;
  Field field_ = kFieldDtype;
  std::string key_;  // the current key at the top level or in __metadata__
  std::set<std::string> top_keys_;
};

// ---------------------------------------------------------------------------------------------
// SafetensorsFile

// The state of an open file. SafetensorsFile::Impl derives from it: Impl is private to the class,
// and the free parser below must be able to name the type it fills.
struct Contents {
  struct Entry {
    DType dtype;
    Shape shape;
    uint64_t begin;
    uint64_t end;
  };

  std::filesystem::path path;
  MappedFile map;
  std::vector<std::byte> owned;
  std::span<const std::byte> image;  // the whole file: map.bytes() or owned
  uint64_t data_start = 0;
  std::vector<std::string> names;  // data-offset order
  std::vector<Entry> entries;      // parallel to names
  std::map<std::string, size_t, std::less<>> index;
  std::map<std::string, std::string> metadata;
};

// PyTorch checkpoints (.pt, .pth, .ckpt) are the usual wrong file: torch.save writes a zip archive
// ("PK\x03\x04"; a legacy one, a bare pickle: 0x80 then the protocol 2..5). They are recognised
// and named instead of failing as a safetensors header; they are not read (unpickling runs code).
Status check_not_a_pickle(std::span<const std::byte> image, const std::string& who) {
  auto at = [&](size_t i) { return static_cast<unsigned char>(image[i]); };
  // A safetensors header starts with '{' after its 8-byte length; the length's bytes alone can
  // look like a pickle's (0x80 0x02 is a header of 640 bytes).
  if (image.size() > 8 && at(8) == '{') return Status::ok();
  const bool zip = at(0) == 'P' && at(1) == 'K' && at(2) == 3 && at(3) == 4;
  const bool pickle = at(0) == 0x80 && at(1) >= 2 && at(1) <= 5;
  if (!zip && !pickle) return Status::ok();
  return corrupt_data(
      who + ": this is a PyTorch checkpoint (" +
      (zip ? std::string("a zip archive, as torch.save writes .pt/.pth/.ckpt files")
           : std::string("a pickle, as older torch.save wrote .pt/.pth/.ckpt files")) +
      "), not a safetensors file. SeedVAE reads safetensors only; convert it with PyTorch: "
      "safetensors.torch.save_file(torch.load(path, weights_only=True), \"vae.safetensors\") "
      "(the state dict, under \"state_dict\" in some checkpoints)");
}

// Validates `impl.image` and fills the tables. `who` names the file in every message.
Status parse_image(Contents& impl, const std::string& who) {
  const std::span<const std::byte> image = impl.image;
  auto corrupt = [&who](const std::string& what) { return corrupt_data(who + ": " + what); };

  if (image.size() < 8) {
    return corrupt("file of " + std::to_string(image.size()) +
                   " bytes is too short for the 8-byte header length (truncated)");
  }
  SEEDVAE_TRY(check_not_a_pickle(image, who));
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) {
    header_len = (header_len << 8) | static_cast<uint64_t>(image[static_cast<size_t>(i)]);
  }
  if (header_len > SafetensorsFile::kMaxHeaderBytes) {
    return corrupt("header length " + std::to_string(header_len) + " exceeds the limit of " +
                   std::to_string(SafetensorsFile::kMaxHeaderBytes) + " bytes");
  }
  if (header_len > image.size() - 8) {
    return corrupt("header length " + std::to_string(header_len) + " exceeds the file size of " +
                   std::to_string(image.size()) + " bytes (truncated file?)");
  }
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = image.size() - data_start;

  const char* json_begin = reinterpret_cast<const char*>(image.data()) + 8;
  // nlohmann's lexer takes a NUL byte for the end of input, so "{...}\0<anything>" would parse.
  // JSON text never contains a raw NUL (inside strings it must be escaped): refuse it up front.
  if (const void* nul = std::memchr(json_begin, 0, static_cast<size_t>(header_len))) {
    return corrupt("malformed JSON in the header: NUL byte at header offset " +
                   std::to_string(static_cast<const char*>(nul) - json_begin));
  }
  HeaderHandler handler;
  const bool parsed = Json::sax_parse(json_begin, json_begin + header_len, &handler,
                                      nlohmann::json::input_format_t::json, /*strict=*/true,
                                      /*ignore_comments=*/false);
  if (!parsed || !handler.error.empty()) {
    return corrupt(handler.error.empty() ? std::string("malformed JSON in the header")
                                         : handler.error);
  }

  struct Checked {
    size_t raw;  // index into handler.entries
    uint64_t begin, end;
  };
  std::vector<Checked> checked;
  checked.reserve(handler.entries.size());
  for (size_t i = 0; i < handler.entries.size(); ++i) {
    const RawEntry& e = handler.entries[i];
    const std::string t = "tensor " + quote_name(e.name);
    const std::optional<DType> dtype = dtype_from_safetensors_name(e.dtype);
    if (!dtype) {
      if (is_other_safetensors_dtype(e.dtype)) {
        return unsupported(who + ": " + t + " has the unsupported dtype " + quote_name(e.dtype) +
                           " (supported: F32, F16, BF16, F64)");
      }
      return corrupt(t + " has an unknown dtype " + quote_name(e.dtype));
    }
    std::vector<int64_t> dims;
    dims.reserve(e.shape.size());
    for (uint64_t d : e.shape) {
      if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return corrupt(t + " has a shape dimension " + std::to_string(d) + " that overflows int64");
      }
      dims.push_back(static_cast<int64_t>(d));
    }
    Shape shape(std::move(dims));
    int64_t numel = 0;
    if (!shape.checked_numel(&numel)) {
      return corrupt(t + " has a shape " + shape.to_string() + " whose element count overflows");
    }
    const int64_t esize = dtype_size(*dtype);
    if (numel > std::numeric_limits<int64_t>::max() / esize) {
      return corrupt(t + " has a shape " + shape.to_string() + " whose byte size overflows");
    }
    const auto nbytes = static_cast<uint64_t>(numel * esize);
    const uint64_t begin = e.offsets[0];
    const uint64_t end = e.offsets[1];
    if (begin > end) {
      return corrupt(t + " has data_offsets " + range_string(begin, end) + " with begin after end");
    }
    if (end - begin != nbytes) {
      return corrupt(t + " has data_offsets " + range_string(begin, end) + " spanning " +
                     std::to_string(end - begin) + " bytes, but " + e.dtype + " x " +
                     shape.to_string() + " needs " + std::to_string(nbytes) + " bytes");
    }
    if (end > data_size) {
      return corrupt(t + " has data_offsets " + range_string(begin, end) +
                     " outside the data area of " + std::to_string(data_size) + " bytes");
    }
    checked.push_back({i, begin, end});
    impl.entries.push_back({*dtype, std::move(shape), begin, end});
  }

  // The sorted ranges must tile [0, data_size) exactly: no overlap, no gap, no trailing bytes.
  std::vector<size_t> order(checked.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Checked& x = checked[a];
    const Checked& y = checked[b];
    if (x.begin != y.begin) return x.begin < y.begin;
    if (x.end != y.end) return x.end < y.end;
    return handler.entries[x.raw].name < handler.entries[y.raw].name;
  });
  uint64_t cursor = 0;
  const std::string* previous = nullptr;
  for (size_t k : order) {
    const Checked& c = checked[k];
    const std::string& name = handler.entries[c.raw].name;
    if (c.begin < cursor) {
      return corrupt("tensor " + quote_name(name) + " at " + range_string(c.begin, c.end) +
                     " overlaps tensor " + quote_name(previous ? *previous : std::string()) +
                     " ending at " + std::to_string(cursor));
    }
    if (c.begin > cursor) {
      return corrupt("gap in the data area: bytes [" + std::to_string(cursor) + ", " +
                     std::to_string(c.begin) + ") before tensor " + quote_name(name) +
                     " belong to no tensor");
    }
    cursor = c.end;
    previous = &name;
  }
  if (cursor != data_size) {
    return corrupt("trailing bytes in the data area: bytes [" + std::to_string(cursor) + ", " +
                   std::to_string(data_size) + ") after the last tensor belong to no tensor");
  }

  // Tables in data-offset order.
  std::vector<Contents::Entry> entries;
  entries.reserve(order.size());
  impl.names.reserve(order.size());
  for (size_t k : order) {
    entries.push_back(std::move(impl.entries[k]));
    impl.names.push_back(std::move(handler.entries[checked[k].raw].name));
    impl.index.emplace(impl.names.back(), impl.names.size() - 1);
  }
  impl.entries = std::move(entries);
  impl.metadata = std::move(handler.metadata);
  impl.data_start = data_start;
  return Status::ok();
}

// Runs `fn` converting allocation failures and any stray exception to a Status.
template <typename Fn>
Status guarded(const std::string& who, Fn&& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return out_of_memory(who + ": out of memory");
  } catch (const std::exception& e) {
    return internal_error(who + ": unexpected exception: " + e.what());
  } catch (...) {
    return internal_error(who + ": unexpected exception");
  }
}

}  // namespace

struct SafetensorsFile::Impl : Contents {};

SafetensorsFile::SafetensorsFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;
SafetensorsFile::~SafetensorsFile() = default;

Result<SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path) {
  std::unique_ptr<Impl> impl;
  const std::string who = display(path);
  Status st = guarded(who, [&]() -> Status {
    SEEDVAE_ASSIGN_OR_RETURN(MappedFile map, MappedFile::open(path));
    impl = std::make_unique<Impl>();
    impl->path = path;
    impl->map = std::move(map);
    impl->image = impl->map.bytes();
    return parse_image(*impl, who);
  });
  if (!st.is_ok()) return st;
  return SafetensorsFile(std::move(impl));
}

Result<SafetensorsFile> SafetensorsFile::parse(std::span<const std::byte> image) {
  std::unique_ptr<Impl> impl;
  const std::string who = "in-memory safetensors image";
  Status st = guarded(who, [&]() -> Status {
    impl = std::make_unique<Impl>();
    impl->owned.assign(image.begin(), image.end());
    impl->image = impl->owned;
    return parse_image(*impl, who);
  });
  if (!st.is_ok()) return st;
  return SafetensorsFile(std::move(impl));
}

const std::vector<std::string>& SafetensorsFile::names() const {
  return impl_->names;
}

bool SafetensorsFile::contains(std::string_view name) const {
  return impl_->index.find(name) != impl_->index.end();
}

Result<TensorView> SafetensorsFile::get(std::string_view name) const {
  const auto it = impl_->index.find(name);
  if (it == impl_->index.end()) {
    const std::string who =
        impl_->path.empty() ? "in-memory safetensors image" : display(impl_->path);
    return not_found(who + ": no tensor named " + quote_name(name));
  }
  const Impl::Entry& e = impl_->entries[it->second];
  TensorView v;
  v.name = it->first;
  v.dtype = e.dtype;
  v.shape = e.shape;
  v.bytes = impl_->image.subspan(static_cast<size_t>(impl_->data_start + e.begin),
                                 static_cast<size_t>(e.end - e.begin));
  return v;
}

const std::map<std::string, std::string>& SafetensorsFile::metadata() const {
  return impl_->metadata;
}
const std::filesystem::path& SafetensorsFile::path() const {
  return impl_->path;
}
uint64_t SafetensorsFile::file_size() const {
  return impl_->image.size();
}

// ---------------------------------------------------------------------------------------------
// TensorView

HostTensor TensorView::to_host() const {
  HostTensor out(dtype, shape);
  const size_t n = std::min(bytes.size(), static_cast<size_t>(out.nbytes()));
  if (n != 0) std::memcpy(out.raw(), bytes.data(), n);
  return out;
}

HostTensor TensorView::to_host(DType target) const {
  if (target == dtype) return to_host();
  // convert_elements reads typed elements: copy first when the mapping is not aligned for them
  // (the data area is 8-byte aligned only when the header length is a multiple of 8).
  const auto addr = reinterpret_cast<uintptr_t>(bytes.data());
  if (addr % static_cast<uintptr_t>(dtype_size(dtype)) != 0) return to_host().to(target);
  HostTensor out(target, shape);
  if (static_cast<int64_t>(bytes.size()) != numel() * dtype_size(dtype) ||
      out.nbytes() != numel() * dtype_size(target)) {
    return out;  // a hand-made view whose bytes do not match its shape: nothing sane to convert
  }
  convert_elements(bytes.data(), dtype, out.raw(), target, numel());
  return out;
}

// ---------------------------------------------------------------------------------------------
// Writer

namespace {

// One tensor of a file being written: where it comes from (index into the caller's span).
struct Entry {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  int64_t nbytes = 0;
  size_t index = 0;
};

struct Plan {
  std::vector<std::byte> prefix;  // 8-byte length + padded header
  std::vector<Entry> order;       // the file's order: ascending names
  uint64_t data_size = 0;
};

// An entry for a tensor of `shape` and `dtype`, or why it cannot be stored.
Result<Entry> make_entry(const std::string& name, DType dtype, const Shape& shape, size_t index) {
  if (name == kMetadataKey) {
    return invalid_argument("a tensor cannot be named " + std::string(kMetadataKey));
  }
  int64_t numel = 0;
  if (!shape.checked_numel(&numel) ||
      numel > std::numeric_limits<int64_t>::max() / dtype_size(dtype)) {
    return invalid_argument("tensor " + quote_name(name) + " of shape " + shape.to_string() +
                            " is too large");
  }
  return Entry{name, dtype, shape, numel * dtype_size(dtype), index};
}

Result<Plan> plan_file(std::vector<Entry> entries,
                       const std::map<std::string, std::string>& metadata) {
  Plan plan;
  plan.order = std::move(entries);
  std::sort(plan.order.begin(), plan.order.end(),
            [](const Entry& a, const Entry& b) { return a.name < b.name; });
  for (size_t i = 1; i < plan.order.size(); ++i) {
    if (plan.order[i].name == plan.order[i - 1].name) {
      return invalid_argument("duplicate tensor name " + quote_name(plan.order[i].name));
    }
  }

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header[std::string(kMetadataKey)] = std::move(meta);
  }
  uint64_t offset = 0;
  for (const Entry& t : plan.order) {
    const auto nbytes = static_cast<uint64_t>(t.nbytes);
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    entry["dtype"] = std::string(dtype_safetensors_name(t.dtype));
    entry["shape"] = t.shape.dims();
    entry["data_offsets"] = {offset, offset + nbytes};
    header[t.name] = std::move(entry);
    offset += nbytes;
  }
  plan.data_size = offset;

  std::string text;
  try {
    text = header.dump();  // strict UTF-8 check: throws type_error 316 on invalid names/metadata
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument(std::string("tensor names and metadata must be valid UTF-8: ") +
                            e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  plan.prefix.resize(8 + text.size());
  uint64_t len = text.size();
  for (size_t i = 0; i < 8; ++i) {
    plan.prefix[i] = static_cast<std::byte>(len & 0xFFu);
    len >>= 8;
  }
  std::memcpy(plan.prefix.data() + 8, text.data(), text.size());
  return plan;
}

// The entries of in-memory tensors, each checked to hold numel x dtype size bytes.
Result<std::vector<Entry>> entries_of(std::span<const NamedTensor> tensors) {
  std::vector<Entry> entries;
  entries.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const NamedTensor& t = tensors[i];
    if (t.tensor == nullptr) return invalid_argument("tensor " + quote_name(t.name) + " is null");
    SEEDVAE_ASSIGN_OR_RETURN(Entry e, make_entry(t.name, t.tensor->dtype(), t.tensor->shape(), i));
    if (e.nbytes != t.tensor->nbytes()) {
      return invalid_argument("tensor " + quote_name(t.name) + " of shape " +
                              t.tensor->shape().to_string() + " holds " +
                              std::to_string(t.tensor->nbytes()) + " bytes, not numel x " +
                              std::to_string(dtype_size(t.tensor->dtype())));
    }
    entries.push_back(std::move(e));
  }
  return entries;
}

std::span<const std::byte> tensor_bytes(const HostTensor& t) {
  return {static_cast<const std::byte*>(t.raw()), static_cast<size_t>(t.nbytes())};
}

}  // namespace

Result<std::vector<std::byte>> serialize_safetensors(
    std::span<const NamedTensor> tensors, const std::map<std::string, std::string>& metadata) {
  std::vector<std::byte> out;
  Status st = guarded("serializing safetensors", [&]() -> Status {
    SEEDVAE_ASSIGN_OR_RETURN(std::vector<Entry> entries, entries_of(tensors));
    SEEDVAE_ASSIGN_OR_RETURN(Plan plan, plan_file(std::move(entries), metadata));
    out = std::move(plan.prefix);
    out.reserve(out.size() + plan.data_size);
    for (const Entry& e : plan.order) {
      const auto b = tensor_bytes(*tensors[e.index].tensor);
      out.insert(out.end(), b.begin(), b.end());
    }
    return Status::ok();
  });
  if (!st.is_ok()) return st;
  return out;
}

namespace {

// Writes the file of `plan` atomically; `bytes_of(entry, write)` hands the entry's bytes to write.
using EntryWriter =
    std::function<Status(const Entry&, const std::function<Status(std::span<const std::byte>)>&)>;
Status write_planned(const std::filesystem::path& path, const Plan& plan,
                     const EntryWriter& bytes_of) {
  AtomicFile atomic(path);  // removes its temporary on every early return below
  SEEDVAE_ASSIGN_OR_RETURN(FileWriter writer, FileWriter::create(atomic.temp_path()));
  SEEDVAE_TRY(writer.write(plan.prefix));
  auto write = [&writer](std::span<const std::byte> b) { return writer.write(b); };
  for (const Entry& e : plan.order) SEEDVAE_TRY(bytes_of(e, write));
  SEEDVAE_TRY(writer.close());
  return atomic.commit();
}

}  // namespace

Status write_safetensors(const std::filesystem::path& path, std::span<const NamedTensor> tensors,
                         const std::map<std::string, std::string>& metadata) {
  const std::string who = "writing " + display(path);
  auto body = [&]() -> Status {
    SEEDVAE_ASSIGN_OR_RETURN(std::vector<Entry> entries, entries_of(tensors));
    SEEDVAE_ASSIGN_OR_RETURN(Plan plan, plan_file(std::move(entries), metadata));
    return write_planned(path, plan, [&](const Entry& e, const auto& write) {
      return write(tensor_bytes(*tensors[e.index].tensor));
    });
  };
  return guarded(who, [&]() -> Status {
    Status st = body();
    return st.is_ok() ? st : std::move(st).with_context(who);
  });
}

Status write_safetensors_streamed(const std::filesystem::path& path,
                                  std::span<const StreamedTensor> tensors,
                                  const TensorProducer& produce,
                                  const std::map<std::string, std::string>& metadata) {
  const std::string who = "writing " + display(path);
  auto body = [&]() -> Status {
    std::vector<Entry> entries;
    entries.reserve(tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      SEEDVAE_ASSIGN_OR_RETURN(Entry e,
                               make_entry(tensors[i].name, tensors[i].dtype, tensors[i].shape, i));
      entries.push_back(std::move(e));
    }
    SEEDVAE_ASSIGN_OR_RETURN(Plan plan, plan_file(std::move(entries), metadata));
    return write_planned(path, plan, [&](const Entry& e, const auto& write) -> Status {
      SEEDVAE_ASSIGN_OR_RETURN(HostTensor t, produce(e.index));
      if (t.dtype() != e.dtype || t.shape() != e.shape || t.nbytes() != e.nbytes) {
        return internal_error("tensor " + quote_name(e.name) + " came as " + t.shape().to_string() +
                              " " + std::string(dtype_safetensors_name(t.dtype())) + ", declared " +
                              e.shape.to_string() + " " +
                              std::string(dtype_safetensors_name(e.dtype)));
      }
      return write(tensor_bytes(t));
    });
  };
  return guarded(who, [&]() -> Status {
    Status st = body();
    return st.is_ok() ? st : std::move(st).with_context(who);
  });
}

}  // namespace seedvae
