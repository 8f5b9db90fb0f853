// The Wan2.1 and Wan2.2 causal video VAEs (docs/model.md §10) on any Backend that has
// the Wan ops (backend.h), one temporal chunk at a time. This is the only description of both
// networks: block names are the upstream state-dict prefixes, and the causal temporal memory is an
// explicit CausalState passed into every call.
//
// Streaming: every causal convolution keeps the last 2 frames of its extended input (zeros before
// the first chunk); a downsampler's time_conv keeps its last input frame; on a stream's first
// chunk frame 0 bypasses the temporal resamplers (the upsampler's time_conv sees zeros, not frame
// 0, as history) and Wan2.2's DupUp3D drops its first frame. Any chunking (encoder: 4k+1 frames,
// then multiples of 4; decoder: any number of latent frames per call) gives the same result up to
// fp32 reassociation.
//
// The upstream wrappers' per-channel latent normalisation, (mu - mean) * (1/std), is here
// (wan_normalize_latent); the streamed wrapper with the clamp is core/schedule/wan_stream.h.
//
// Thread affinity: the model, its state and its backend belong to one thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/tensor/host_tensor.h"
#include "core/vae/state_dict.h"
#include "core/vae/video_vae.h"
#include "core/vae/wan_config.h"

namespace seedvae {

// The reference data's recipe for the Wan weights (every value a function of name, index and seed;
// the gain / bias / time_up / half / conv rules), rounded f64 -> f32 -> f16. Loading, saving and
// digests are the families' common ones (core/vae/state_dict.h: load_weights, save_weights,
// fp16_digest).
VaeWeights synthesize_wan_weights(const WanConfig& config, uint64_t seed);
// The reference data's seeds: wan21 tiny 20250621, real 20251621; wan22 tiny 20250622, real
// 20251622.
uint64_t wan_reference_seed(VaeFamily family, bool real);
// The upstream wrappers' per-channel latent constants (z values each).
const std::vector<float>& wan_latent_mean(VaeFamily family);
const std::vector<float>& wan_latent_std(VaeFamily family);
// latent = (mu - mean) * (1 / std) and its inverse latent / (1 / std) + mean, per channel, in
// fp32 as upstream (1/std rounded to fp32 first). x is [N, z, t, h, w] fp32.
Result<HostTensor> wan_normalize_latent(const HostTensor& mu, VaeFamily family);
Result<HostTensor> wan_denormalize_latent(const HostTensor& latent, VaeFamily family);

class WanModel final : public VideoVae {
 public:
  // Uploads every parameter to `backend` (which must outlive the model). kInvalidArgument for
  // weights of another family.
  static Result<WanModel> create(Backend& backend, const VaeWeights& weights);
  // Every parameter of `config` made by `make` (e.g. CountingBackend::declare_weight for a dry
  // run); `make` gets the backend-side name and shape (WanModel::parameter_shapes).
  using ParameterFactory =
      std::function<Result<Tensor>(const std::string& name, const Shape& shape)>;
  static Result<WanModel> create(Backend& backend, const WanConfig& config,
                                 const ParameterFactory& make);
  // The parameters as the model holds them: RMS gains as [C], 2-D convolutions as [C', C, 1, k,
  // k], the attention's to_qkv split into "<block>.to_qkv.{q,k,v}.{weight,bias}" ([C, C], [C]) and
  // proj as [C, C]; everything else as in the checkpoint.
  static std::vector<WanConfig::Param> parameter_shapes(const WanConfig& config);

  WanModel(WanModel&&) noexcept = default;
  WanModel& operator=(WanModel&&) noexcept = default;

  const WanConfig& config() const { return config_; }
  Backend& backend() const override { return *backend_; }
  VaeFamily family() const override { return config_.family; }
  int latent_channels() const override { return config_.z_dim; }
  int spatial_factor() const override { return config_.spatial_factor(); }
  int temporal_factor() const override { return config_.temporal_factor(); }
  int64_t decoder_reach() const override;
  // "decoder.conv1" (with the pointwise conv2 before it), "decoder.middle.0", ".1" (the
  // attention), ".2", each residual block and upsampler of Wan2.1 ("decoder.upsamples.<k>"),
  // each whole level of Wan2.2 ("decoder.upsamples.<i>": its DupUp3D shortcut reads the level's
  // input), "decoder.head".
  std::vector<std::string> decoder_units() const override { return units_; }
  // Called with "encoder.level<i>(<module>)", "encoder.middle(middle.2)", "encoder.head(head.2)",
  // "conv2", "decoder.conv1", "decoder.middle(middle.2)", "decoder.level<i>(<module>)": the
  // reference data's intermediate stage names, per chunk.
  void set_observer(BlockObserver observer) override { observer_ = std::move(observer); }

  // x: [1, 3, T, H, W], H and W multiples of spatial_factor(); first chunk T = 4k+1, later 4k.
  // Returns [1, 2z, t, H/s, W/s]: the quant conv's output (mu, then log_var).
  Result<Tensor> encode_chunk(const Tensor& x, CausalState& state,
                              const ChunkOptions& options = {}) override;
  // z: [1, z, t, h, w] un-normalised latent. Returns [1, 3, 4t-3 (first chunk) or 4t, 8h or 16h,
  // ...]: the decoder's output before the clamp.
  Result<Tensor> decode_chunk(const Tensor& z, CausalState& state,
                              const ChunkOptions& options = {}) override;

 private:
  class Pass;  // one encode_chunk / decode_chunk call (wan_model.cpp)

  WanModel() = default;
  Backend* backend_ = nullptr;
  WanConfig config_;
  std::vector<std::string> units_;         // decoder_units()
  std::map<std::string, int> unit_index_;  // position in units_
  std::map<std::string, Tensor> weights_;
  BlockObserver observer_;
};

}  // namespace seedvae
