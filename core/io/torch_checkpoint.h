// PyTorch `torch.save` checkpoints (.pth/.pt/.ckpt, the zip format PyTorch writes since 1.6) read
// as a TensorFile: the zip's `<archive>/data.pkl` goes through the restricted unpickler
// (torch_pickle.h), each storage is the stored entry `<archive>/data/<key>` of exactly its
// declared byte size, and every tensor is a zero-copy view of its storage's bytes in the memory
// map. Nothing in the file is executed. Only plain state dicts (a dict of tensors, as
// `torch.save(model.state_dict())` writes) are accepted; the legacy pre-1.6 pickle format,
// TorchScript archives and big-endian archives are refused with a message saying so.
#pragma once

#include <filesystem>
#include <memory>
#include <span>

#include "core/io/tensor_file.h"
#include "core/io/torch_pickle.h"

namespace seedvae {

class TorchCheckpoint final : public TensorFile {
 public:
  // Maps and validates `path`. Errors name the file and the problem.
  static Result<TorchCheckpoint> open(const std::filesystem::path& path,
                                      const TorchPickleLimits& limits = {});
  // Validates an in-memory image (the fuzzer and tests); the bytes are copied.
  static Result<TorchCheckpoint> parse(std::span<const std::byte> image,
                                       const TorchPickleLimits& limits = {});

  TorchCheckpoint(TorchCheckpoint&&) noexcept;
  TorchCheckpoint& operator=(TorchCheckpoint&&) noexcept;
  ~TorchCheckpoint() override;

  const std::vector<std::string>& names() const override;  // the state dict's order
  bool contains(std::string_view name) const override;
  Result<TensorView> get(std::string_view name) const override;
  const std::map<std::string, std::string>& metadata() const override;  // empty
  const std::filesystem::path& path() const override;
  uint64_t file_size() const override;
  std::string_view container() const override { return "PyTorch zip (.pth)"; }

 private:
  struct Impl;
  explicit TorchCheckpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace seedvae
