#include "core/schedule/wan_stream.h"

#include <algorithm>
#include <cstring>

namespace seedvae {

Result<WanEncoded> wan_encode(WanModel& model, const HostTensor& video,
                              const WanStreamOptions& options, const StreamHooks& hooks) {
  SEEDVAE_ASSIGN_OR_RETURN(HostTensor m, encode_video(model, video, options.stream, hooks));
  // mu and log_var: the two halves of the channels (N = 1)
  const Shape& s = m.shape();
  const int64_t z = model.latent_channels(), half = z * s[2] * s[3] * s[4];
  WanEncoded e;
  e.mu = moments_mean(m);
  e.log_var = HostTensor(DType::kF32, e.mu.shape());
  std::memcpy(e.log_var.raw(), m.data<float>() + half, static_cast<size_t>(half) * sizeof(float));
  if (options.normalized_latent) {
    SEEDVAE_ASSIGN_OR_RETURN(e.latent, wan_normalize_latent(e.mu, model.family()));
  } else {
    e.latent = e.mu;
  }
  return e;
}

Result<HostTensor> wan_decode(WanModel& model, const HostTensor& latent,
                              const WanStreamOptions& options, const StreamHooks& hooks) {
  HostTensor raw = latent.dtype() == DType::kF32 ? latent : latent.to(DType::kF32);
  if (options.normalized_latent) {
    SEEDVAE_ASSIGN_OR_RETURN(raw, wan_denormalize_latent(raw, model.family()));
  }
  SEEDVAE_ASSIGN_OR_RETURN(HostTensor y,
                           options.tiles
                               ? wan_tiled_decode(model, raw, *options.tiles, options.stream, hooks)
                               : decode_latent(model, raw, options.stream, hooks));
  if (options.clamp) {
    // on every core: a 720p clip of 81 frames is 224 M values, ~0.2 s on one
    float* v = y.data<float>();
    const int64_t n = y.numel();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) v[i] = std::clamp(v[i], -1.f, 1.f);
  }
  return y;
}

}  // namespace seedvae
