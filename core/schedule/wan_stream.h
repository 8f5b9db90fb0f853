// The Wan VAEs' wrappers (docs/model.md §10.5) over the streamed scheduler: encode returns mu,
// log_var and the normalised latent (mu - mean) * (1/std); decode undoes the normalisation,
// decodes and clamps to [-1, 1], as upstream's WanVAE / Wan2_2_VAE do.
#pragma once

#include <optional>

#include "core/schedule/streaming.h"
#include "core/schedule/wan_tiles.h"
#include "core/vae/wan_model.h"

namespace seedvae {

struct WanStreamOptions {
  // Upstream's chunking: frame 0 alone, then one latent frame (4 video frames) per chunk. Any
  // other chunking gives the same result up to fp32 reassociation.
  StreamOptions stream{.chunk_latents = 1, .lone_head = true};
  bool normalized_latent = true;  // the latent is (mu - mean) / std (upstream); false: raw mu
  bool clamp = true;              // the decoded video clamped to [-1, 1] (upstream's wrapper)
  // decode only: in halo tiles (wan_tiles.h: the same result, one tile's state on the backend;
  // the chunks reach the hooks once every tile has run)
  std::optional<WanTileOptions> tiles;
};

struct WanEncoded {
  HostTensor mu, log_var, latent;  // fp32 [1, z, t, h, w]
};

Result<WanEncoded> wan_encode(WanModel& model, const HostTensor& video,
                              const WanStreamOptions& options = {}, const StreamHooks& hooks = {});
Result<HostTensor> wan_decode(WanModel& model, const HostTensor& latent,
                              const WanStreamOptions& options = {}, const StreamHooks& hooks = {});

}  // namespace seedvae
