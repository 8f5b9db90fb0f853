#include "core/vae/video_vae.h"

#include "core/backend/counting_backend.h"
#include "core/vae/state_dict.h"
#include "core/vae/vae_model.h"
#include "core/vae/wan_model.h"

namespace seedvae {

int64_t decoder_reach_of(const std::vector<ReachStep>& from_output, int factor) {
  // far from the start, so the walk never reaches frame 0 (the map is shift-invariant there)
  const int64_t last = int64_t{1} << 20;
  int64_t need = factor * last - (factor - 1);  // the first output frame of latent `last`
  for (const ReachStep& s : from_output) need = s.up2 ? (need + 1) / 2 : need - s.back;
  return last - need;
}

int64_t CausalState::bytes() const {
  int64_t n = 0;
  for (const auto& [k, t] : memory) n += t.shape.numel() * dtype_size(t.dtype);
  return n;
}

Result<std::unique_ptr<VideoVae>> make_video_vae(Backend& backend, const VaeWeights& weights) {
  if (weights.is_wan()) {
    SEEDVAE_ASSIGN_OR_RETURN(WanModel m, WanModel::create(backend, weights));
    return std::unique_ptr<VideoVae>(std::make_unique<WanModel>(std::move(m)));
  }
  SEEDVAE_ASSIGN_OR_RETURN(VaeModel m, VaeModel::create(backend, weights));
  return std::unique_ptr<VideoVae>(std::make_unique<VaeModel>(std::move(m)));
}

Result<std::unique_ptr<VideoVae>> make_dry_video_vae(CountingBackend& backend,
                                                     const VaeWeights& weights) {
  if (weights.is_wan()) {
    SEEDVAE_ASSIGN_OR_RETURN(
        WanModel m, WanModel::create(backend, weights.wan, [&](const std::string&, const Shape& s) {
          return Result<Tensor>(backend.declare_weight(s));
        }));
    return std::unique_ptr<VideoVae>(std::make_unique<WanModel>(std::move(m)));
  }
  SEEDVAE_ASSIGN_OR_RETURN(
      VaeModel m, VaeModel::create(backend, weights.config, [&](const VaeConfig::Param& p) {
        return Result<Tensor>(backend.declare_weight(p.shape));
      }));
  return std::unique_ptr<VideoVae>(std::make_unique<VaeModel>(std::move(m)));
}

}  // namespace seedvae
