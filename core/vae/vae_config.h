// The SeedVR2 VAE configuration (docs/model.md §1) and its state dict (§3).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/tensor/shape.h"

namespace seedvae {

class TensorFile;

struct VaeConfig {
  int in_channels = 3;
  int out_channels = 3;
  int latent_channels = 16;  // the encoder emits 2x this (mean, logvar)
  std::vector<int> block_out_channels{128, 256, 512, 512};
  int layers_per_block = 2;    // encoder resnets per level; decoder has +1
  int temporal_scale_num = 2;  // temporal x2 levels in encoder and decoder
  int norm_groups = 32;
  float norm_eps = 1e-6f;

  static VaeConfig real();  // ema_vae_fp16.safetensors: 250,648,227 parameters
  static VaeConfig tiny();  // ../shared/golden tiny test configuration: 3,999,475 parameters

  int levels() const { return static_cast<int>(block_out_channels.size()); }
  int spatial_factor() const { return 1 << (levels() - 1); }       // 8
  int temporal_factor() const { return 1 << temporal_scale_num; }  // 4
  // Encoder level i downsamples in time (docs/model.md §2.2).
  bool encoder_temporal_down(int level) const {
    return level >= levels() - temporal_scale_num - 1 && level < levels() - 1;
  }
  bool decoder_temporal_up(int level) const { return level < temporal_scale_num; }

  // Every parameter, in the module registration order of docs/model.md §3.
  struct Param {
    std::string name;
    Shape shape;
  };
  std::vector<Param> parameters() const;
  int64_t parameter_count() const;

  // Checks internal consistency (channel counts divisible by norm_groups, >= 2 levels, ...).
  Status validate() const;
  // "channels [128, 256, 512, 512], latent 16, 2 layers/block, 2 temporal levels, 32 groups"
  std::string to_string() const;
  // Key/value form stored in a safetensors __metadata__ ("seedvae.block_out_channels" ...).
  std::map<std::string, std::string> to_metadata() const;

  bool operator==(const VaeConfig&) const = default;
};

// Infers the configuration from tensor names and shapes: channels per level, latent channels,
// layers per block, temporal levels. GroupNorm's group count is not visible in shapes: it comes
// from the file's __metadata__ ("seedvae.norm_groups") when present, else 8 for the reference tiny
// configuration (block_out_channels [16, 32, 64, 64]) and 32 otherwise (SeedVR2's value).
// Afterwards every key is checked; missing, unexpected and mis-shaped tensors are each listed by
// name in the error.
Result<VaeConfig> infer_config(const TensorFile& file);

// Checks `file` against `config`: every expected tensor present with the right shape, no extra
// tensors. Lists every problem (up to a limit) in one message.
Status check_state_dict(const TensorFile& file, const VaeConfig& config);

}  // namespace seedvae
