// A restricted unpickler for the `data.pkl` of a `torch.save` state dict.
//
// It runs a pickle virtual machine that knows only the opcodes a tensor state dict needs (PROTO,
// FRAME, MARK, STOP, EMPTY_DICT/TUPLE/LIST, TUPLE/TUPLE1-3, SETITEM(S), APPEND(S), the string,
// integer, float, bool and None opcodes, the memo (BINPUT, LONG_BINPUT, MEMOIZE, BINGET,
// LONG_BINGET), GLOBAL/STACK_GLOBAL, REDUCE, BINPERSID and BUILD) and only the globals
// `collections.OrderedDict`, `torch._utils._rebuild_tensor_v2` and
// `torch.{Float,Half,BFloat16,Double}Storage`. It never imports or calls anything: a global is a
// name compared with that list, and REDUCE builds a dict or a tensor record from checked
// arguments. Every other opcode or global is refused by name ("unknown global 'os.system'").
// Containers cannot be changed once another object holds them, so self-referential structures
// cannot arise and nesting depth is known and bounded.
//
// What comes out is a list of tensor records (name, storage, element offset, contiguous shape),
// each checked to lie inside its storage's declared element count; the caller matches storages
// to their bytes (torch_checkpoint.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/tensor/dtype.h"
#include "core/tensor/shape.h"

namespace seedvae {

struct TorchStorage {
  std::string key;  // the zip entry data/<key>
  DType dtype = DType::kF32;
  uint64_t numel = 0;    // declared elements
  std::string location;  // "cpu", "cuda:0", ...
};

struct TorchTensorRecord {
  std::string name;
  size_t storage = 0;   // index into TorchStateDict::storages
  uint64_t offset = 0;  // in elements
  Shape shape;          // row-major contiguous; offset + numel <= the storage's numel
};

struct TorchStateDict {
  std::vector<TorchTensorRecord> tensors;  // pickle (state dict) order
  std::vector<TorchStorage> storages;      // first-use order
};

struct TorchPickleLimits {
  uint64_t max_bytes = 64ull << 20;  // a 200-tensor state dict's pickle is about 30 KB
  int max_depth = 32;                // container nesting (a state dict needs 4)
  int max_rank = 64;
  // Objects created (about 100 bytes each): a 200-tensor state dict makes about 4,000; the limit
  // keeps a hostile pickle of one-byte opcodes from taking gigabytes.
  uint64_t max_objects = 2'000'000;
};

// Parses `pickle` (the bytes of data.pkl). `who` prefixes every message (e.g. "x.pth: data.pkl").
// Errors are kCorruptData and name the opcode, global, key or tensor and the byte offset.
Result<TorchStateDict> unpickle_state_dict(std::span<const std::byte> pickle,
                                           const std::string& who,
                                           const TorchPickleLimits& limits = {});

}  // namespace seedvae
