// safetensors files (https://github.com/huggingface/safetensors format): a little-endian u64
// header length N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, ...,
// "__metadata__": {string: string}}, then the data area.
//
// SafetensorsFile memory-maps the file read-only and hands out zero-copy views into the mapping.
// open() validates everything before returning (ARCHITECTURE.md "Hostile input"): header length
// (<= file size, <= 100 MB), JSON syntax and top-level object, duplicate keys, dtypes, shapes
// (non-negative, no overflow), byte ranges (= numel x dtype size, inside the data area, no
// overlap), and that every byte of the data area belongs to exactly one tensor.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/io/tensor_file.h"
#include "core/tensor/host_tensor.h"

namespace seedvae {

class SafetensorsFile final : public TensorFile {
 public:
  static constexpr uint64_t kMaxHeaderBytes = 100'000'000;

  // Maps and validates `path`. Errors name the file and the problem.
  static Result<SafetensorsFile> open(const std::filesystem::path& path);
  // Validates an in-memory image (used by the fuzzer and tests); the bytes are copied.
  static Result<SafetensorsFile> parse(std::span<const std::byte> image);

  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  ~SafetensorsFile() override;

  // Tensor names in file (data-offset) order.
  const std::vector<std::string>& names() const override;
  bool contains(std::string_view name) const override;
  // The view of `name`, or kNotFound.
  Result<TensorView> get(std::string_view name) const override;
  const std::map<std::string, std::string>& metadata() const override;
  const std::filesystem::path& path() const override;
  uint64_t file_size() const override;
  std::string_view container() const override { return "safetensors"; }

 private:
  struct Impl;
  explicit SafetensorsFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// One tensor to write: name + host tensor (any supported dtype).
struct NamedTensor {
  std::string name;
  const HostTensor* tensor = nullptr;
};

// Writes tensors (stored in ascending name order, as PyTorch's safetensors does) and metadata.
// Atomic: writes `path` + ".tmp-<random>" then renames over `path`; on failure nothing is left.
Status write_safetensors(const std::filesystem::path& path, std::span<const NamedTensor> tensors,
                         const std::map<std::string, std::string>& metadata = {});

// A tensor of write_safetensors_streamed: its name, dtype and shape up front; its bytes come from
// the producer when its turn comes.
struct StreamedTensor {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
};
// Returns tensor `index` of the span (its dtype and shape as declared).
using TensorProducer = std::function<Result<HostTensor>(size_t index)>;

// write_safetensors with one tensor in memory at a time: the producer is called for each tensor
// in the file's order (ascending names) and its result written and dropped before the next (a
// causal state of many gigabytes is saved with the host memory of its largest tensor). The same
// bytes and atomicity as write_safetensors.
Status write_safetensors_streamed(const std::filesystem::path& path,
                                  std::span<const StreamedTensor> tensors,
                                  const TensorProducer& produce,
                                  const std::map<std::string, std::string>& metadata = {});

// Serialises to memory (the same bytes write_safetensors would write).
Result<std::vector<std::byte>> serialize_safetensors(
    std::span<const NamedTensor> tensors, const std::map<std::string, std::string>& metadata = {});

}  // namespace seedvae
