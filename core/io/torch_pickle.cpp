// The restricted state-dict unpickler (see torch_pickle.h). Opcode semantics follow CPython's
// pickletools documentation; only the subset below exists here.
#include "core/io/torch_pickle.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace seedvae {
namespace {

// ---------------------------------------------------------------------------------------------
// Objects

enum class Kind {
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kTuple,
  kList,
  kDict,
  kGlobal,
  kStorage,
  kTensor
};

enum class Global { kOrderedDict, kRebuildTensorV2, kStorage };

struct Obj;
using Ref = std::shared_ptr<Obj>;

struct Obj {
  Kind kind = Kind::kNone;
  bool frozen = false;        // held by another object: no longer mutable
  DType dtype = DType::kF32;  // storage class of a kStorage global or storage
  Global global = Global::kOrderedDict;
  int depth = 0;  // containers: 1 + the deepest child
  int64_t i = 0;  // int, bool; storage: index into the storage table
  double f = 0;
  std::string s;           // string; global: its dotted name
  std::vector<Ref> items;  // tuple, list
  // Dicts (insertion order plus a key index) and tensors: allocated only for those kinds, so
  // that the many small objects of a hostile pickle stay small (see TorchPickleLimits).
  struct DictData {
    std::vector<std::pair<std::string, Ref>> items;
    std::map<std::string, size_t, std::less<>> keys;
  };
  std::unique_ptr<DictData> dict;
  std::unique_ptr<TorchTensorRecord> tensor;
};

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kNone: return "None";
    case Kind::kBool: return "a bool";
    case Kind::kInt: return "an int";
    case Kind::kFloat: return "a float";
    case Kind::kString: return "a string";
    case Kind::kTuple: return "a tuple";
    case Kind::kList: return "a list";
    case Kind::kDict: return "a dict";
    case Kind::kGlobal: return "a global";
    case Kind::kStorage: return "a storage";
    case Kind::kTensor: return "a tensor";
  }
  return "an object";
}

bool is_container(const Obj& o) {
  return o.kind == Kind::kTuple || o.kind == Kind::kList || o.kind == Kind::kDict;
}

// The opcodes of protocols 0-5 that this reader refuses, named for the message.
const char* refused_opcode_name(uint8_t op) {
  switch (op) {
    case '0': return "POP";
    case '1': return "POP_MARK";
    case '2': return "DUP";
    case 'F': return "FLOAT";
    case 'I': return "INT";
    case 'L': return "LONG";
    case 'P': return "PERSID";
    case 'S': return "STRING";
    case 'V': return "UNICODE";
    case 'd': return "DICT";
    case 'g': return "GET";
    case 'i': return "INST";
    case 'l': return "LIST";
    case 'o': return "OBJ";
    case 'p': return "PUT";
    case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";
    case 0x81: return "NEWOBJ";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x8b: return "LONG4";
    case 0x8d: return "BINUNICODE8";
    case 0x8e: return "BINBYTES8";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x92: return "NEWOBJ_EX";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return nullptr;
  }
}

// Printable ASCII kept, the rest escaped, long text cut: untrusted text in a message.
std::string quoted(std::string_view s) {
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < 160; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7F || c == '\'') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > 160) out += "...";
  return out + "'";
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1, cp = c & 0x1Fu;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2, cp = c & 0x0Fu;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3, cp = c & 0x07u;
    } else {
      return false;
    }
    if (s.size() - i <= n) return false;
    for (size_t k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3Fu);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

constexpr std::string_view kAllowed =
    "a state dict of tensors needs only collections.OrderedDict, torch._utils._rebuild_tensor_v2 "
    "and torch.{Float,Half,BFloat16,Double}Storage; nothing is imported or called";

// ---------------------------------------------------------------------------------------------
// The machine

struct TooManyObjects {};

class Machine {
 public:
  Machine(std::span<const std::byte> in, const std::string& who, const TorchPickleLimits& limits)
      : in_(in), who_(who), limits_(limits) {}

  Result<TorchStateDict> run() {
    if (in_.size() > limits_.max_bytes) {
      return corrupt_data(who_ + ": the pickle of " + std::to_string(in_.size()) +
                          " bytes exceeds the limit of " + std::to_string(limits_.max_bytes) +
                          " bytes (a state dict's is a few tens of KB)");
    }
    try {
      for (;;) {
        if (pos_ >= in_.size()) {
          return fail_at(in_.size(), "the pickle ends without STOP (truncated)");
        }
        op_at_ = pos_;
        const uint8_t op = byte();
        bool stop = false;
        SEEDVAE_TRY(step(op, stop));
        if (stop) break;
      }
    } catch (const TooManyObjects&) {
      return fail_at(op_at_, "more than " + std::to_string(limits_.max_objects) +
                                 " objects (a state dict needs about 20 per tensor)");
    }
    if (pos_ != in_.size()) {
      return fail_at(pos_, std::to_string(in_.size() - pos_) + " bytes follow STOP");
    }
    if (!marks_.empty()) return fail_at(op_at_, "STOP with an open MARK");
    if (stack_.size() != 1) {
      return fail_at(op_at_, "STOP with " + std::to_string(stack_.size()) +
                                 " objects on the stack instead of 1");
    }
    return finish(*stack_.back());
  }

 private:
  // --- input ---
  uint8_t byte() { return static_cast<uint8_t>(in_[pos_++]); }

  Status need(uint64_t n, const char* what) {
    if (n > in_.size() - pos_) {
      return fail_at(op_at_, std::string(what) + " needs " + std::to_string(n) +
                                 " bytes but the pickle ends after " +
                                 std::to_string(in_.size() - pos_) + " (truncated)");
    }
    return Status::ok();
  }

  Result<uint64_t> read_le(int n, const char* what) {
    SEEDVAE_TRY(need(static_cast<uint64_t>(n), what));
    uint64_t v = 0;
    for (int k = n - 1; k >= 0; --k) {
      v = (v << 8) | static_cast<uint8_t>(in_[pos_ + static_cast<size_t>(k)]);
    }
    pos_ += static_cast<size_t>(n);
    return v;
  }

  Result<std::string> read_bytes(uint64_t n, const char* what) {
    SEEDVAE_TRY(need(n, what));
    std::string s(reinterpret_cast<const char*>(in_.data() + pos_), static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }

  // A GLOBAL argument: text up to '\n' (at most 256 bytes).
  Result<std::string> read_line() {
    const size_t start = pos_;
    while (pos_ < in_.size() && pos_ - start <= 256) {
      if (static_cast<char>(in_[pos_]) == '\n') {
        std::string s(reinterpret_cast<const char*>(in_.data() + start), pos_ - start);
        ++pos_;
        return s;
      }
      ++pos_;
    }
    return fail_at(op_at_, "GLOBAL's module or name is not a line of at most 256 bytes");
  }

  // --- errors ---
  Status fail_at(size_t at, const std::string& what) const {
    return corrupt_data(who_ + ": " + what + " (at byte " + std::to_string(at) + ")");
  }

  // --- stack ---
  Result<Ref> pop(const char* op) {
    if (stack_.empty() || (!marks_.empty() && stack_.size() == marks_.back())) {
      return fail_at(op_at_, std::string(op) + " on an empty stack");
    }
    Ref r = std::move(stack_.back());
    stack_.pop_back();
    return r;
  }
  Result<Ref> top(const char* op) {
    if (stack_.empty() || (!marks_.empty() && stack_.size() == marks_.back())) {
      return fail_at(op_at_, std::string(op) + " on an empty stack");
    }
    return stack_.back();
  }
  // The objects above the last MARK, which is removed.
  Result<std::vector<Ref>> pop_mark(const char* op) {
    if (marks_.empty()) return fail_at(op_at_, std::string(op) + " without a MARK");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<Ref> items(std::make_move_iterator(stack_.begin() + static_cast<ptrdiff_t>(m)),
                           std::make_move_iterator(stack_.end()));
    stack_.resize(m);
    return items;
  }

  Ref make(Kind k) {
    if (++objects_ > limits_.max_objects) {
      throw TooManyObjects{};  // caught in run(): a Status, never an exception out of this file
    }
    auto r = std::make_shared<Obj>();
    r->kind = k;
    if (k == Kind::kDict) r->dict = std::make_unique<Obj::DictData>();
    return r;
  }

  // `child` becomes part of `parent` (a tuple being built, a list or a dict).
  Status adopt(Obj& parent, const Ref& child) {
    if (child.get() == &parent) {
      return fail_at(op_at_, std::string("a ") + (parent.kind == Kind::kDict ? "dict" : "list") +
                                 " would contain itself (a self-referential structure)");
    }
    child->frozen = true;
    if (is_container(*child) || child->kind == Kind::kTensor) {
      parent.depth = std::max(parent.depth, child->depth + 1);
    }
    if (parent.depth > limits_.max_depth) {
      return fail_at(op_at_,
                     "containers nested more than " + std::to_string(limits_.max_depth) + " deep");
    }
    return Status::ok();
  }

  Status mutable_container(const Obj& o, Kind kind, const char* op) {
    if (o.kind != kind) {
      return fail_at(op_at_,
                     std::string(op) + " on " + kind_name(o.kind) + ", not " + kind_name(kind));
    }
    if (o.frozen) {
      return fail_at(op_at_, std::string(op) + " changes " + kind_name(o.kind) +
                                 " that another object already holds (memo abuse: torch.save "
                                 "never does this)");
    }
    return Status::ok();
  }

  Result<Ref> tuple_of(std::vector<Ref> items) {
    Ref t = make(Kind::kTuple);
    t->depth = 1;
    for (const Ref& c : items) SEEDVAE_TRY(adopt(*t, c));
    t->items = std::move(items);
    return t;
  }

  Status set_item(Obj& dict, const Ref& key, const Ref& value) {
    if (key->kind != Kind::kString) {
      return fail_at(op_at_,
                     std::string("a dict key is ") + kind_name(key->kind) + ", not a string");
    }
    if (dict.dict->keys.count(key->s) != 0) {
      return fail_at(op_at_, "duplicate key " + quoted(key->s));
    }
    SEEDVAE_TRY(adopt(dict, value));
    dict.dict->keys.emplace(key->s, dict.dict->items.size());
    dict.dict->items.emplace_back(key->s, value);
    return Status::ok();
  }

  Status push_global(const std::string& module, const std::string& name) {
    const std::string dotted = module + "." + name;
    Ref g = make(Kind::kGlobal);
    g->s = dotted;
    if (dotted == "collections.OrderedDict") {
      g->global = Global::kOrderedDict;
    } else if (dotted == "torch._utils._rebuild_tensor_v2") {
      g->global = Global::kRebuildTensorV2;
    } else if (module == "torch" && (name == "FloatStorage" || name == "HalfStorage" ||
                                     name == "BFloat16Storage" || name == "DoubleStorage")) {
      g->global = Global::kStorage;
      g->dtype = name == "FloatStorage"      ? DType::kF32
                 : name == "HalfStorage"     ? DType::kF16
                 : name == "BFloat16Storage" ? DType::kBF16
                                             : DType::kF64;
    } else {
      return fail_at(op_at_, "unknown global " + quoted(dotted) + ": " + std::string(kAllowed));
    }
    stack_.push_back(std::move(g));
    return Status::ok();
  }

  Result<int64_t> as_int(const Ref& o, const std::string& what) {
    if (o->kind != Kind::kInt) {
      return fail_at(op_at_, what + " is " + kind_name(o->kind) + ", not an int");
    }
    return o->i;
  }

  // BINPERSID: ('storage', torch.<T>Storage, key, location, numel).
  Status persistent_load(const Ref& pid) {
    if (pid->kind != Kind::kTuple || pid->items.size() != 5) {
      return fail_at(op_at_, std::string("a persistent id is ") + kind_name(pid->kind) +
                                 (pid->kind == Kind::kTuple
                                      ? " of " + std::to_string(pid->items.size()) + " items"
                                      : std::string()) +
                                 ", not ('storage', type, key, location, numel)");
    }
    const auto& it = pid->items;
    if (it[0]->kind != Kind::kString || it[0]->s != "storage") {
      return fail_at(op_at_, "a persistent id is not a 'storage' record");
    }
    if (it[1]->kind != Kind::kGlobal || it[1]->global != Global::kStorage) {
      return fail_at(op_at_,
                     "a storage's type is " +
                         (it[1]->kind == Kind::kGlobal ? quoted(it[1]->s)
                                                       : std::string(kind_name(it[1]->kind))) +
                         ", not torch.{Float,Half,BFloat16,Double}Storage");
    }
    if (it[2]->kind != Kind::kString || it[3]->kind != Kind::kString) {
      return fail_at(op_at_, "a storage's key or location is not a string");
    }
    const std::string& key = it[2]->s;
    // torch.save names storages by number; letters, digits and '_' keep every key a valid
    // record name of the archive (no '/', no control bytes a zip name cannot hold)
    const bool plain = std::all_of(key.begin(), key.end(), [](char c) {
      return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    });
    if (key.empty() || key.size() > 64 || !plain) {
      return fail_at(op_at_, "storage key " + quoted(key) + " is not a plain record name");
    }
    SEEDVAE_ASSIGN_OR_RETURN(const int64_t numel,
                             as_int(it[4], "storage " + quoted(key) + "'s size"));
    if (numel < 0) {
      return fail_at(op_at_,
                     "storage " + quoted(key) + " has a negative size " + std::to_string(numel));
    }
    const DType dtype = it[1]->dtype;
    size_t index = 0;
    if (auto found = storage_index_.find(key); found != storage_index_.end()) {
      index = found->second;
      const TorchStorage& s = out_.storages[index];
      if (s.dtype != dtype || s.numel != static_cast<uint64_t>(numel)) {
        return fail_at(op_at_, "storage " + quoted(key) + " is declared twice, as " +
                                   std::string(dtype_name(s.dtype)) + " x " +
                                   std::to_string(s.numel) + " and as " +
                                   std::string(dtype_name(dtype)) + " x " + std::to_string(numel));
      }
    } else {
      index = out_.storages.size();
      out_.storages.push_back({key, dtype, static_cast<uint64_t>(numel), it[3]->s});
      storage_index_.emplace(key, index);
    }
    Ref s = make(Kind::kStorage);
    s->i = static_cast<int64_t>(index);
    s->dtype = dtype;
    stack_.push_back(std::move(s));
    return Status::ok();
  }

  // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks
  // [, metadata]).
  Result<Ref> rebuild_tensor(const Obj& args) {
    const auto& a = args.items;
    if (a.size() != 6 && a.size() != 7) {
      return fail_at(op_at_,
                     "_rebuild_tensor_v2 takes 6 or 7 arguments, got " + std::to_string(a.size()));
    }
    if (a[0]->kind != Kind::kStorage) {
      return fail_at(op_at_, std::string("_rebuild_tensor_v2's storage is ") +
                                 kind_name(a[0]->kind) + " (a storage comes from BINPERSID)");
    }
    const TorchStorage& storage = out_.storages[static_cast<size_t>(a[0]->i)];
    const std::string t = "a tensor in storage " + quoted(storage.key);
    SEEDVAE_ASSIGN_OR_RETURN(const int64_t offset, as_int(a[1], t + ": the storage offset"));
    if (offset < 0) {
      return fail_at(op_at_, t + " has a negative storage offset " + std::to_string(offset));
    }
    if (a[2]->kind != Kind::kTuple || a[3]->kind != Kind::kTuple) {
      return fail_at(op_at_, t + ": its size and stride are not tuples");
    }
    const auto& size = a[2]->items;
    const auto& stride = a[3]->items;
    if (size.size() > static_cast<size_t>(limits_.max_rank)) {
      return fail_at(op_at_, t + " has " + std::to_string(size.size()) + " dimensions, more than " +
                                 std::to_string(limits_.max_rank));
    }
    if (stride.size() != size.size()) {
      return fail_at(op_at_, t + " has " + std::to_string(size.size()) + " sizes but " +
                                 std::to_string(stride.size()) + " strides");
    }
    std::vector<int64_t> dims, strides;
    for (size_t d = 0; d < size.size(); ++d) {
      SEEDVAE_ASSIGN_OR_RETURN(const int64_t n, as_int(size[d], t + ": a size"));
      SEEDVAE_ASSIGN_OR_RETURN(const int64_t s, as_int(stride[d], t + ": a stride"));
      if (n < 0) return fail_at(op_at_, t + " has a negative size " + std::to_string(n));
      dims.push_back(n);
      strides.push_back(s);
    }
    Shape shape(dims);
    int64_t numel = 0;
    if (!shape.checked_numel(&numel)) {
      return fail_at(op_at_,
                     t + " has a shape " + shape.to_string() + " whose element count overflows");
    }
    // Row-major contiguity as PyTorch defines it: dimensions of size 1 may have any stride, and
    // an empty tensor is contiguous.
    if (numel > 0) {
      int64_t expected = 1;
      for (size_t d = dims.size(); d-- > 0;) {
        if (dims[d] != 1 && strides[d] != expected) {
          std::vector<int64_t> want(dims.size());
          int64_t e = 1;
          for (size_t k = dims.size(); k-- > 0;) {
            want[k] = e;
            e *= dims[k];
          }
          return fail_at(op_at_, t + " of shape " + shape.to_string() +
                                     " has non-contiguous strides " + Shape(strides).to_string() +
                                     " (expected " + Shape(want).to_string() + ")");
        }
        expected *= dims[d];
      }
    }
    const auto uoffset = static_cast<uint64_t>(offset);
    const auto unumel = static_cast<uint64_t>(numel);
    if (uoffset > storage.numel || unumel > storage.numel - uoffset) {
      return fail_at(op_at_, t + " reads elements [" + std::to_string(uoffset) + ", " +
                                 (unumel > std::numeric_limits<uint64_t>::max() - uoffset
                                      ? std::string("overflow")
                                      : std::to_string(uoffset + unumel)) +
                                 ") beyond the storage's " + std::to_string(storage.numel) +
                                 " elements");
    }
    if (a[4]->kind != Kind::kBool) {
      return fail_at(op_at_, t + ": requires_grad is " + kind_name(a[4]->kind) + ", not a bool");
    }
    for (size_t k = 5; k < a.size(); ++k) {
      const Obj& extra = *a[k];
      if (!(extra.kind == Kind::kNone ||
            (extra.kind == Kind::kDict && extra.dict->items.empty()))) {
        return fail_at(op_at_, t + (k == 5 ? " has backward hooks" : " has tensor metadata") +
                                   " (" + kind_name(extra.kind) + "), not an empty OrderedDict");
      }
    }
    Ref r = make(Kind::kTensor);
    r->tensor = std::make_unique<TorchTensorRecord>();
    r->tensor->storage = static_cast<size_t>(a[0]->i);
    r->tensor->offset = uoffset;
    r->tensor->shape = std::move(shape);
    return r;
  }

  Status reduce() {
    SEEDVAE_ASSIGN_OR_RETURN(Ref args, pop("REDUCE"));
    SEEDVAE_ASSIGN_OR_RETURN(Ref fn, pop("REDUCE"));
    if (fn->kind != Kind::kGlobal || fn->global == Global::kStorage) {
      return fail_at(op_at_, "REDUCE calls " +
                                 (fn->kind == Kind::kGlobal ? quoted(fn->s)
                                                            : std::string(kind_name(fn->kind))) +
                                 "; only collections.OrderedDict and "
                                 "torch._utils._rebuild_tensor_v2 may be called");
    }
    if (args->kind != Kind::kTuple) {
      return fail_at(
          op_at_, "REDUCE's arguments are " + std::string(kind_name(args->kind)) + ", not a tuple");
    }
    if (fn->global == Global::kOrderedDict) {
      if (!args->items.empty()) {
        return fail_at(op_at_,
                       "collections.OrderedDict is called with arguments (torch.save "
                       "calls it with none and adds the items with SETITEMS)");
      }
      Ref d = make(Kind::kDict);
      d->depth = 1;
      stack_.push_back(std::move(d));
      return Status::ok();
    }
    SEEDVAE_ASSIGN_OR_RETURN(Ref tensor, rebuild_tensor(*args));
    stack_.push_back(std::move(tensor));
    return Status::ok();
  }

  Status memo_put(uint64_t index) {
    SEEDVAE_ASSIGN_OR_RETURN(Ref r, top("a memo put"));
    memo_[index] = std::move(r);
    return Status::ok();
  }
  Status memo_get(uint64_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) {
      return fail_at(op_at_, "memo entry " + std::to_string(index) + " is read but was never set");
    }
    stack_.push_back(it->second);
    return Status::ok();
  }

  Status push_string(std::string s, bool unicode) {
    if (unicode && !valid_utf8(s)) return fail_at(op_at_, "a string is not valid UTF-8");
    Ref r = make(Kind::kString);
    r->s = std::move(s);
    stack_.push_back(std::move(r));
    return Status::ok();
  }
  void push_int(int64_t v) {
    Ref r = make(Kind::kInt);
    r->i = v;
    stack_.push_back(std::move(r));
  }

  Status step(uint8_t op, bool& stop) {
    switch (op) {
      case 0x80: {  // PROTO
        SEEDVAE_ASSIGN_OR_RETURN(const uint64_t v, read_le(1, "PROTO"));
        if (v < 2 || v > 5) {
          return fail_at(op_at_, "pickle protocol " + std::to_string(v) + " (torch.save writes 2)");
        }
        return Status::ok();
      }
      case 0x95: {  // FRAME: a length hint
        SEEDVAE_ASSIGN_OR_RETURN(const uint64_t n, read_le(8, "FRAME"));
        if (n > in_.size() - pos_) return fail_at(op_at_, "a FRAME runs past the end (truncated)");
        return Status::ok();
      }
      case '.': stop = true; return Status::ok();                      // STOP
      case '(': marks_.push_back(stack_.size()); return Status::ok();  // MARK
      case '}': {                                                      // EMPTY_DICT
        Ref d = make(Kind::kDict);
        d->depth = 1;
        stack_.push_back(std::move(d));
        return Status::ok();
      }
      case ']': {  // EMPTY_LIST
        Ref l = make(Kind::kList);
        l->depth = 1;
        stack_.push_back(std::move(l));
        return Status::ok();
      }
      case ')': {  // EMPTY_TUPLE
        SEEDVAE_ASSIGN_OR_RETURN(Ref t, tuple_of({}));
        stack_.push_back(std::move(t));
        return Status::ok();
      }
      case 't': {  // TUPLE
        SEEDVAE_ASSIGN_OR_RETURN(std::vector<Ref> items, pop_mark("TUPLE"));
        SEEDVAE_ASSIGN_OR_RETURN(Ref t, tuple_of(std::move(items)));
        stack_.push_back(std::move(t));
        return Status::ok();
      }
      case 0x85:    // TUPLE1
      case 0x86:    // TUPLE2
      case 0x87: {  // TUPLE3
        const size_t n = op - 0x84u;
        std::vector<Ref> items(n);
        for (size_t k = n; k-- > 0;) {
          SEEDVAE_ASSIGN_OR_RETURN(items[k], pop("TUPLEn"));
        }
        SEEDVAE_ASSIGN_OR_RETURN(Ref t, tuple_of(std::move(items)));
        stack_.push_back(std::move(t));
        return Status::ok();
      }
      case 's': {  // SETITEM
        SEEDVAE_ASSIGN_OR_RETURN(Ref value, pop("SETITEM"));
        SEEDVAE_ASSIGN_OR_RETURN(Ref key, pop("SETITEM"));
        SEEDVAE_ASSIGN_OR_RETURN(Ref dict, top("SETITEM"));
        SEEDVAE_TRY(mutable_container(*dict, Kind::kDict, "SETITEM"));
        return set_item(*dict, key, value);
      }
      case 'u': {  // SETITEMS
        SEEDVAE_ASSIGN_OR_RETURN(std::vector<Ref> items, pop_mark("SETITEMS"));
        if (items.size() % 2 != 0) return fail_at(op_at_, "SETITEMS with an odd item count");
        SEEDVAE_ASSIGN_OR_RETURN(Ref dict, top("SETITEMS"));
        SEEDVAE_TRY(mutable_container(*dict, Kind::kDict, "SETITEMS"));
        for (size_t k = 0; k < items.size(); k += 2) {
          SEEDVAE_TRY(set_item(*dict, items[k], items[k + 1]));
        }
        return Status::ok();
      }
      case 'a': {  // APPEND
        SEEDVAE_ASSIGN_OR_RETURN(Ref value, pop("APPEND"));
        SEEDVAE_ASSIGN_OR_RETURN(Ref list, top("APPEND"));
        SEEDVAE_TRY(mutable_container(*list, Kind::kList, "APPEND"));
        SEEDVAE_TRY(adopt(*list, value));
        list->items.push_back(std::move(value));
        return Status::ok();
      }
      case 'e': {  // APPENDS
        SEEDVAE_ASSIGN_OR_RETURN(std::vector<Ref> items, pop_mark("APPENDS"));
        SEEDVAE_ASSIGN_OR_RETURN(Ref list, top("APPENDS"));
        SEEDVAE_TRY(mutable_container(*list, Kind::kList, "APPENDS"));
        for (Ref& v : items) {
          SEEDVAE_TRY(adopt(*list, v));
          list->items.push_back(std::move(v));
        }
        return Status::ok();
      }
      case 'X': {  // BINUNICODE
        SEEDVAE_ASSIGN_OR_RETURN(const uint64_t n, read_le(4, "BINUNICODE"));
        SEEDVAE_ASSIGN_OR_RETURN(std::string s, read_bytes(n, "BINUNICODE"));
        return push_string(std::move(s), true);
      }
      case 0x8c: {  // SHORT_BINUNICODE
        SEEDVAE_ASSIGN_OR_RETURN(const uint64_t n, read_le(1, "SHORT_BINUNICODE"));
        SEEDVAE_ASSIGN_OR_RETURN(std::string s, read_bytes(n, "SHORT_BINUNICODE"));
        return push_string(std::move(s), true);
      }
      case 'T': {  // BINSTRING (signed 32-bit length)
        SEEDVAE_ASSIGN_OR_RETURN(const uint64_t n, read_le(4, "BINSTRING"));
        if (n > 0x7FFFFFFF) return fail_at(op_at_, "BINSTRING with a negative length");
        SEEDVAE_ASSIGN_OR_RETURN(std::string s, read_bytes(n, "BINSTRING"));
        return push_string(std::move(s), true);
      }
      case 'U': {  // SHORT_BINSTRING
        SEEDVAE_ASSIGN_OR_RETURN(const uint64_t n, read_le(1, "SHORT_BINSTRING"));
        SEEDVAE_ASSIGN_OR_RETURN(std::string s, read_bytes(n, "SHORT_BINSTRING"));
        return push_string(std::move(s), true);
      }
      case 'J': {  // BININT
        SEEDVAE_ASSIGN_OR_RETURN(const uint64_t v, read_le(4, "BININT"));
        push_int(static_cast<int32_t>(static_cast<uint32_t>(v)));
        return Status::ok();
      }
      case 'K': {  // BININT1
        SEEDVAE_ASSIGN_OR_RETURN(const uint64_t v, read_le(1, "BININT1"));
        push_int(static_cast<int64_t>(v));
        return Status::ok();
      }
      case 'M': {  // BININT2
        SEEDVAE_ASSIGN_OR_RETURN(const uint64_t v, read_le(2, "BININT2"));
        push_int(static_cast<int64_t>(v));
        return Status::ok();
      }
      case 0x8a: {  // LONG1: n bytes, two's complement, little-endian
        SEEDVAE_ASSIGN_OR_RETURN(const uint64_t n, read_le(1, "LONG1"));
        if (n > 8)
          return fail_at(op_at_, "an integer of " + std::to_string(n) + " bytes (over 64 bits)");
        if (n == 0) {
          push_int(0);
          return Status::ok();
        }
        SEEDVAE_ASSIGN_OR_RETURN(uint64_t v, read_le(static_cast<int>(n), "LONG1"));
        if (n < 8 && (v >> (8 * n - 1)) & 1u) v |= ~uint64_t{0} << (8 * n);  // sign-extend
        int64_t s = 0;
        std::memcpy(&s, &v, sizeof s);
        push_int(s);
        return Status::ok();
      }
      case 'G': {  // BINFLOAT (big-endian)
        SEEDVAE_TRY(need(8, "BINFLOAT"));
        uint64_t v = 0;
        for (int k = 0; k < 8; ++k) v = (v << 8) | byte();
        Ref r = make(Kind::kFloat);
        std::memcpy(&r->f, &v, sizeof v);
        stack_.push_back(std::move(r));
        return Status::ok();
      }
      case 'N': stack_.push_back(make(Kind::kNone)); return Status::ok();  // NONE
      case 0x88:                                                           // NEWTRUE
      case 0x89: {                                                         // NEWFALSE
        Ref r = make(Kind::kBool);
        r->i = op == 0x88 ? 1 : 0;
        stack_.push_back(std::move(r));
        return Status::ok();
      }
      case 'q': {  // BINPUT
        SEEDVAE_ASSIGN_OR_RETURN(const uint64_t i, read_le(1, "BINPUT"));
        return memo_put(i);
      }
      case 'r': {  // LONG_BINPUT
        SEEDVAE_ASSIGN_OR_RETURN(const uint64_t i, read_le(4, "LONG_BINPUT"));
        return memo_put(i);
      }
      case 0x94: return memo_put(memo_.size());  // MEMOIZE
      case 'h': {                                // BINGET
        SEEDVAE_ASSIGN_OR_RETURN(const uint64_t i, read_le(1, "BINGET"));
        return memo_get(i);
      }
      case 'j': {  // LONG_BINGET
        SEEDVAE_ASSIGN_OR_RETURN(const uint64_t i, read_le(4, "LONG_BINGET"));
        return memo_get(i);
      }
      case 'c': {  // GLOBAL
        SEEDVAE_ASSIGN_OR_RETURN(std::string module, read_line());
        SEEDVAE_ASSIGN_OR_RETURN(std::string name, read_line());
        return push_global(module, name);
      }
      case 0x93: {  // STACK_GLOBAL
        SEEDVAE_ASSIGN_OR_RETURN(Ref name, pop("STACK_GLOBAL"));
        SEEDVAE_ASSIGN_OR_RETURN(Ref module, pop("STACK_GLOBAL"));
        if (module->kind != Kind::kString || name->kind != Kind::kString) {
          return fail_at(op_at_, "STACK_GLOBAL's module or name is not a string");
        }
        return push_global(module->s, name->s);
      }
      case 'R': return reduce();  // REDUCE
      case 'Q': {                 // BINPERSID
        SEEDVAE_ASSIGN_OR_RETURN(Ref pid, pop("BINPERSID"));
        return persistent_load(pid);
      }
      case 'b': {  // BUILD: only a dict's attribute dict (a state dict's _metadata), ignored
        SEEDVAE_ASSIGN_OR_RETURN(Ref state, pop("BUILD"));
        SEEDVAE_ASSIGN_OR_RETURN(Ref target, top("BUILD"));
        if (target->kind != Kind::kDict || state->kind != Kind::kDict) {
          return fail_at(op_at_, std::string("BUILD sets the state of ") + kind_name(target->kind) +
                                     " from " + kind_name(state->kind) +
                                     "; only an OrderedDict's attributes (a state dict's "
                                     "_metadata) are accepted");
        }
        if (state.get() == target.get()) {
          return fail_at(op_at_, "BUILD with a dict as its own state (self-referential)");
        }
        state->frozen = true;
        return Status::ok();
      }
      default: break;
    }
    if (const char* name = refused_opcode_name(op)) {
      return fail_at(op_at_, std::string("opcode ") + name +
                                 " is not allowed in a state-dict pickle (" +
                                 std::string(kAllowed) + ")");
    }
    char buf[8];
    std::snprintf(buf, sizeof buf, "0x%02x", op);
    return fail_at(op_at_, std::string("unknown opcode ") + buf);
  }

  // The result: a dict of tensors.
  Result<TorchStateDict> finish(const Obj& root) {
    if (root.kind != Kind::kDict) {
      return corrupt_data(who_ + ": the pickle holds " + kind_name(root.kind) +
                          ", not a state dict (a dict of tensors)");
    }
    for (const auto& [key, value] : root.dict->items) {
      if (value->kind != Kind::kTensor) {
        return corrupt_data(who_ + ": the state dict's entry " + quoted(key) + " is " +
                            kind_name(value->kind) +
                            ", not a tensor (a training checkpoint? save its model's "
                            "state_dict() alone)");
      }
      TorchTensorRecord rec = *value->tensor;
      rec.name = key;
      out_.tensors.push_back(std::move(rec));
    }
    return std::move(out_);
  }

  std::span<const std::byte> in_;
  const std::string& who_;
  TorchPickleLimits limits_;
  size_t pos_ = 0;
  size_t op_at_ = 0;
  std::vector<Ref> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Ref> memo_;
  std::map<std::string, size_t, std::less<>> storage_index_;
  TorchStateDict out_;
  uint64_t objects_ = 0;
};

}  // namespace

Result<TorchStateDict> unpickle_state_dict(std::span<const std::byte> pickle,
                                           const std::string& who,
                                           const TorchPickleLimits& limits) {
  try {
    Machine m(pickle, who, limits);
    return m.run();
  } catch (const std::bad_alloc&) {
    return out_of_memory(who + ": out of memory while reading the pickle");
  } catch (const std::exception& e) {
    return internal_error(who + ": unexpected exception: " + e.what());
  }
}

}  // namespace seedvae
