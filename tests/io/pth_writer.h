// A minimal writer of `torch.save` state-dict files for tests (there is no PyTorch here): a
// pickle builder that emits the opcodes PyTorch's protocol-2 pickler writes for a state dict, and
// a zip writer laid out like PyTorch's (stored entries under one top folder, data aligned to 64
// bytes by a padding extra field, a zip64 end record). Hostile tests build their pickles and
// archives from the same pieces and then break them.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/io/zip_archive.h"
#include "core/tensor/dtype.h"

namespace seedvae::test {

// ---- pickle -------------------------------------------------------------------------------------

class Pickle {
 public:
  std::string bytes;

  Pickle& raw(const std::string& s) {
    bytes += s;
    return *this;
  }
  Pickle& op(uint8_t o) {
    bytes += static_cast<char>(o);
    return *this;
  }
  Pickle& proto(int v = 2) { return op(0x80).op(static_cast<uint8_t>(v)); }
  Pickle& stop() { return op('.'); }
  Pickle& mark() { return op('('); }
  Pickle& global(const std::string& module, const std::string& name) {
    return op('c').raw(module + "\n" + name + "\n");
  }
  Pickle& str(const std::string& s) {  // BINUNICODE
    op('X');
    le(s.size(), 4);
    return raw(s);
  }
  Pickle& short_str(const std::string& s) {  // SHORT_BINUNICODE (protocol 4)
    op(0x8c);
    le(s.size(), 1);
    return raw(s);
  }
  // An int as Python's pickler writes it.
  Pickle& integer(int64_t v) {
    if (v >= 0 && v <= 0xFF) {
      op('K');
      return le(static_cast<uint64_t>(v), 1);
    }
    if (v >= 0 && v <= 0xFFFF) {
      op('M');
      return le(static_cast<uint64_t>(v), 2);
    }
    if (v >= INT32_MIN && v <= INT32_MAX) {
      op('J');
      return le(static_cast<uint64_t>(static_cast<uint32_t>(static_cast<int32_t>(v))), 4);
    }
    op(0x8a).op(8);
    return le(static_cast<uint64_t>(v), 8);
  }
  Pickle& put(uint32_t i) {
    if (i < 256) return op('q').le(i, 1);
    return op('r').le(i, 4);
  }
  Pickle& get(uint32_t i) {
    if (i < 256) return op('h').le(i, 1);
    return op('j').le(i, 4);
  }
  // A tuple of ints (sizes, strides) as protocol 2 writes it.
  Pickle& int_tuple(const std::vector<int64_t>& v) {
    if (v.empty()) return op(')');
    if (v.size() > 3) mark();
    for (int64_t x : v) integer(x);
    return v.size() > 3 ? op('t') : op(static_cast<uint8_t>(0x84 + v.size()));
  }
  Pickle& le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes += static_cast<char>((v >> (8 * i)) & 0xFF);
    return *this;
  }
};

inline const char* storage_class(DType t) {
  switch (t) {
    case DType::kF32: return "FloatStorage";
    case DType::kF16: return "HalfStorage";
    case DType::kBF16: return "BFloat16Storage";
    case DType::kF64: return "DoubleStorage";
  }
  return "?";
}

struct PthTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<std::byte> data;  // the storage's bytes (may hold more than the tensor reads)
  std::string key;              // storage key; empty: the tensor's index
  int64_t offset = 0;           // storage offset in elements
  std::vector<int64_t> stride;  // empty: contiguous
  int64_t storage_numel = -1;   // -1: data.size() / element size
};

inline std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t e = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    s[k] = e;
    e *= std::max<int64_t>(shape[k], 1);
  }
  return s;
}

struct PickleStyle {
  bool metadata = true;    // the `_metadata` BUILD of module.state_dict()
  bool protocol4 = false;  // FRAME, SHORT_BINUNICODE, MEMOIZE, STACK_GLOBAL
};

// The pickle torch.save writes for an OrderedDict of tensors (memo indices as Python assigns them).
inline std::string state_dict_pickle(const std::vector<PthTensor>& tensors,
                                     PickleStyle style = {}) {
  Pickle p;
  uint32_t memo = 0;
  std::map<std::string, uint32_t> memo_of;  // globals and strings already memoized
  auto memoize = [&]() {
    if (style.protocol4) {
      p.op(0x94);
      return memo++;
    }
    p.put(memo);
    return memo++;
  };
  auto text = [&](const std::string& s) {
    if (style.protocol4 && s.size() < 256) {
      p.short_str(s);
    } else {
      p.str(s);
    }
  };
  auto glob = [&](const std::string& module, const std::string& name) {
    const std::string key = module + "." + name;
    if (auto it = memo_of.find(key); it != memo_of.end()) {
      p.get(it->second);
      return;
    }
    if (style.protocol4) {
      text(module);
      memoize();
      text(name);
      memoize();
      p.op(0x93);
    } else {
      p.global(module, name);
    }
    memo_of[key] = memoize();
  };
  auto cached_text = [&](const std::string& s) {
    if (auto it = memo_of.find("'" + s); it != memo_of.end()) {
      p.get(it->second);
      return;
    }
    text(s);
    memo_of["'" + s] = memoize();
  };
  p.proto(style.protocol4 ? 4 : 2);
  const size_t frame_at = p.bytes.size();
  if (style.protocol4) p.op(0x95).le(0, 8);  // FRAME, length patched below
  glob("collections", "OrderedDict");
  p.op(')').op('R');
  memoize();
  p.mark();
  std::map<std::string, bool> storages_seen;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const PthTensor& t = tensors[i];
    text(t.name);
    memoize();
    glob("torch._utils", "_rebuild_tensor_v2");
    p.mark();
    const std::string key = t.key.empty() ? std::to_string(i) : t.key;
    const int64_t numel = t.storage_numel >= 0
                              ? t.storage_numel
                              : static_cast<int64_t>(t.data.size()) / dtype_size(t.dtype);
    // The persistent id ('storage', torch.<T>Storage, key, location, numel).
    p.mark();
    cached_text("storage");
    glob("torch", storage_class(t.dtype));
    text(key);
    memoize();
    cached_text("cpu");
    p.integer(numel);
    p.op('t');
    memoize();
    p.op('Q');
    memoize();
    p.integer(t.offset);
    p.int_tuple(t.shape);
    memoize();
    p.int_tuple(t.stride.empty() ? contiguous_strides(t.shape) : t.stride);
    memoize();
    p.op(0x89);  // requires_grad = False
    glob("collections", "OrderedDict");
    p.op(')').op('R');
    memoize();
    p.op('t');
    memoize();
    p.op('R');
    memoize();
  }
  p.op('u');
  if (style.metadata) {
    // {'_metadata': OrderedDict({'': {'version': 1}})}
    p.op('}');
    memoize();
    cached_text("_metadata");
    glob("collections", "OrderedDict");
    p.op(')').op('R');
    memoize();
    cached_text("");
    p.op('}');
    memoize();
    cached_text("version");
    p.integer(1);
    p.op('s');
    p.op('s');
    p.op('s');
    p.op('b');
  }
  p.stop();
  if (style.protocol4) {
    const uint64_t len = p.bytes.size() - frame_at - 9;
    for (int i = 0; i < 8; ++i)
      p.bytes[frame_at + 1 + i] = static_cast<char>((len >> (8 * i)) & 0xFF);
  }
  return p.bytes;
}

// ---- zip ----------------------------------------------------------------------------------------

struct ZipFileSpec {
  std::string name;
  std::string data;
  uint16_t method = 0;    // written as given (the data is never compressed)
  int64_t declared = -1;  // size written in the headers; -1: data.size()
  bool bad_crc = false;
};

struct ZipStyle {
  bool zip64_end = true;     // PyTorch's writer always adds the zip64 end record
  bool zip64_extra = false;  // sizes and offsets in zip64 extra fields (as for >4 GiB files)
  size_t align = 64;         // data alignment by a local "FB" padding field (0: none)
};

inline std::string zip_archive(const std::vector<ZipFileSpec>& files, ZipStyle style = {}) {
  std::string out, central;
  auto le = [](std::string& s, uint64_t v, int n) {
    for (int i = 0; i < n; ++i) s += static_cast<char>((v >> (8 * i)) & 0xFF);
  };
  for (const ZipFileSpec& f : files) {
    const uint64_t offset = out.size();
    const uint64_t size = f.declared >= 0 ? static_cast<uint64_t>(f.declared) : f.data.size();
    uint32_t crc = crc32({reinterpret_cast<const std::byte*>(f.data.data()), f.data.size()});
    if (f.bad_crc) crc ^= 1;
    std::string extra;
    if (style.zip64_extra) {
      le(extra, 0x0001, 2);
      le(extra, 16, 2);
      le(extra, size, 8);
      le(extra, size, 8);
    }
    if (style.align) {
      const size_t header = 30 + f.name.size() + extra.size() + 4;
      const size_t pad = (style.align - (offset + header) % style.align) % style.align;
      le(extra, 0x4246, 2);  // "FB", PyTorch's padding field
      le(extra, pad, 2);
      extra.append(pad, 'Z');
    }
    const uint64_t s32 = style.zip64_extra ? 0xFFFFFFFF : size;
    le(out, 0x04034b50, 4);
    le(out, 45, 2);
    le(out, 0, 2);
    le(out, f.method, 2);
    le(out, 0, 4);  // time, date
    le(out, crc, 4);
    le(out, s32, 4);
    le(out, s32, 4);
    le(out, f.name.size(), 2);
    le(out, extra.size(), 2);
    out += f.name + extra + f.data;

    std::string cextra;
    if (style.zip64_extra) {
      le(cextra, 0x0001, 2);
      le(cextra, 24, 2);
      le(cextra, size, 8);
      le(cextra, size, 8);
      le(cextra, offset, 8);
    }
    le(central, 0x02014b50, 4);
    le(central, 45, 2);
    le(central, 45, 2);
    le(central, 0, 2);
    le(central, f.method, 2);
    le(central, 0, 4);
    le(central, crc, 4);
    le(central, s32, 4);
    le(central, s32, 4);
    le(central, f.name.size(), 2);
    le(central, cextra.size(), 2);
    le(central, 0, 2);  // comment
    le(central, 0, 2);  // disk
    le(central, 0, 2);
    le(central, 0, 4);
    le(central, style.zip64_extra ? 0xFFFFFFFF : offset, 4);
    central += f.name + cextra;
  }
  const uint64_t cd_offset = out.size();
  out += central;
  const uint64_t n = files.size();
  if (style.zip64_end) {
    const uint64_t rec = out.size();
    le(out, 0x06064b50, 4);
    le(out, 44, 8);
    le(out, 45, 2);
    le(out, 45, 2);
    le(out, 0, 4);
    le(out, 0, 4);
    le(out, n, 8);
    le(out, n, 8);
    le(out, central.size(), 8);
    le(out, cd_offset, 8);
    le(out, 0x07064b50, 4);
    le(out, 0, 4);
    le(out, rec, 8);
    le(out, 1, 4);
  }
  le(out, 0x06054b50, 4);
  le(out, 0, 2);
  le(out, 0, 2);
  le(out, n, 2);
  le(out, n, 2);
  le(out, central.size(), 4);
  le(out, cd_offset, 4);
  le(out, 0, 2);
  return out;
}

// The records of a torch.save file: data.pkl, byteorder, one data/<key> per storage, version.
inline std::vector<ZipFileSpec> pth_records(const std::vector<PthTensor>& tensors,
                                            const std::string& pickle,
                                            const std::string& folder = "archive") {
  std::vector<ZipFileSpec> files;
  files.push_back({folder + "/data.pkl", pickle});
  files.push_back({folder + "/byteorder", "little"});
  std::map<std::string, bool> seen;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string key = tensors[i].key.empty() ? std::to_string(i) : tensors[i].key;
    if (seen[key]) continue;
    seen[key] = true;
    files.push_back(
        {folder + "/data/" + key, std::string(reinterpret_cast<const char*>(tensors[i].data.data()),
                                              tensors[i].data.size())});
  }
  files.push_back({folder + "/version", "3\n"});
  files.push_back({folder + "/.data/serialization_id", "1234567890"});
  return files;
}

inline std::string pth_file(const std::vector<PthTensor>& tensors, PickleStyle pstyle = {},
                            ZipStyle zstyle = {}) {
  return zip_archive(pth_records(tensors, state_dict_pickle(tensors, pstyle)), zstyle);
}

inline std::span<const std::byte> as_span(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

}  // namespace seedvae::test
