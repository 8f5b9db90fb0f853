// The tensors of a checkpoint, whatever its container: a safetensors file (safetensors.h) or a
// PyTorch `torch.save` zip archive (torch_checkpoint.h). Both hand out the same zero-copy
// `TensorView`s (dtype, shape, the contiguous row-major bytes), so everything above core/io reads
// a .pth exactly like a .safetensors file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/tensor/host_tensor.h"

namespace seedvae {

// A tensor inside a mapped file: valid while the file object that handed it out lives.
struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  std::span<const std::byte> bytes;

  int64_t numel() const { return shape.numel(); }
  // Copy into an owning host tensor (same dtype), or converted to `dtype`.
  HostTensor to_host() const;
  HostTensor to_host(DType dtype) const;
};

// A validated, read-only set of named tensors.
class TensorFile {
 public:
  virtual ~TensorFile() = default;

  // Tensor names in file order (safetensors: data-offset order; .pth: the pickle's order, which
  // is the state dict's order).
  virtual const std::vector<std::string>& names() const = 0;
  virtual bool contains(std::string_view name) const = 0;
  // The view of `name`, or kNotFound.
  virtual Result<TensorView> get(std::string_view name) const = 0;
  // safetensors' __metadata__; empty for a .pth.
  virtual const std::map<std::string, std::string>& metadata() const = 0;
  virtual const std::filesystem::path& path() const = 0;
  virtual uint64_t file_size() const = 0;
  // "safetensors" or "PyTorch zip (.pth)".
  virtual std::string_view container() const = 0;
};

// Opens a checkpoint by its content, not its name: a zip archive ("PK") is read as a `torch.save`
// file (TorchCheckpoint), anything else as safetensors (which names a legacy pickle as such).
Result<std::unique_ptr<TensorFile>> open_tensor_file(const std::filesystem::path& path);

}  // namespace seedvae
