// open_tensor_file: the container is chosen by the file's first bytes (see tensor_file.h).
#include "core/io/tensor_file.h"

#include <array>
#include <fstream>

#include "core/io/safetensors.h"
#include "core/io/torch_checkpoint.h"

namespace seedvae {

Result<std::unique_ptr<TensorFile>> open_tensor_file(const std::filesystem::path& path) {
  std::array<char, 4> head{};
  {
    std::ifstream in(path, std::ios::binary);
    if (in) in.read(head.data(), head.size());
  }
  // "PK\3\4": a local file header (torch.save); "PK\5\6": an empty archive.
  const bool zip = head[0] == 'P' && head[1] == 'K' &&
                   ((head[2] == 3 && head[3] == 4) || (head[2] == 5 && head[3] == 6));
  if (zip) {
    SEEDVAE_ASSIGN_OR_RETURN(TorchCheckpoint pth, TorchCheckpoint::open(path));
    return std::unique_ptr<TensorFile>(std::make_unique<TorchCheckpoint>(std::move(pth)));
  }
  // Everything else, unreadable files included: the safetensors reader names the problem (a
  // missing file, a legacy pickle, a damaged header).
  SEEDVAE_ASSIGN_OR_RETURN(SafetensorsFile st, SafetensorsFile::open(path));
  return std::unique_ptr<TensorFile>(std::make_unique<SafetensorsFile>(std::move(st)));
}

}  // namespace seedvae
