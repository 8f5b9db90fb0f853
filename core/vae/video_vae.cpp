#include "core/vae/video_vae.h"

namespace seedvae {

int64_t CausalState::bytes() const {
  int64_t n = 0;
  for (const auto& [k, t] : memory) n += t.shape.numel() * dtype_size(t.dtype);
  return n;
}

}  // namespace seedvae
