// Checkpoint families and the Wan2.1 / Wan2.2 VAE configurations (docs/model.md "Checkpoint
// families"). This is the loading layer only: which network a checkpoint holds, its
// hyper-parameters as far as the tensors determine them, and a strict check of every name and
// shape. The networks themselves are WanModel (wan_model.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/tensor/dtype.h"
#include "core/tensor/shape.h"
#include "core/vae/vae_config.h"

namespace seedvae {

class TensorFile;

enum class VaeFamily { kSeedVR2, kWan21, kWan22 };

// "SeedVR2", "Wan2.1", "Wan2.2".
std::string_view family_name(VaeFamily family);

// The constructor arguments of the upstream `WanVAE_` that shape its state dict. Both families
// have `attn_scales = []` and dropout 0 (not visible in a state dict; other values are refused
// as unexpected tensors).
struct WanConfig {
  VaeFamily family = VaeFamily::kWan21;
  int dim = 96;      // encoder base width
  int dec_dim = 96;  // decoder base width (Wan2.1: = dim; Wan2.2: 256)
  int z_dim = 16;    // latent channels (the encoder emits 2x: mu, log_var)
  std::vector<int> dim_mult{1, 2, 4, 4};
  int num_res_blocks = 2;                                    // encoder; the decoder has one more
  std::vector<bool> temporal_downsample{false, true, true};  // per encoder level but the last
  int patch_size = 1;   // Wan2.2: 2 (2x2 pixel patchify before the encoder)
  int in_channels = 3;  // video channels (RGB)

  static WanConfig wan21();       // Wan2.1_VAE.pth: 126,892,531 parameters
  static WanConfig wan22();       // Wan2.2_VAE.pth: 704,688,668 parameters
  static WanConfig wan21_tiny();  // the reference data's tiny Wan2.1 (dim 4): 243,583
  static WanConfig wan22_tiny();  // the reference data's tiny Wan2.2 (dim 2, dec_dim 3): 149,796

  int levels() const { return static_cast<int>(dim_mult.size()); }
  int spatial_factor() const { return (1 << (levels() - 1)) * patch_size; }  // 8 or 16
  int temporal_factor() const;                                               // 4

  struct Param {
    std::string name;
    Shape shape;
  };
  // Every parameter, in checkpoint order (the upstream state dict's order).
  std::vector<Param> parameters() const;
  int64_t parameter_count() const;

  Status validate() const;
  // "Wan2.1: dim 96, z_dim 16, dim_mult [1, 2, 4, 4], 2 res blocks, temporal downsample
  //  [false, true, true]"
  std::string to_string() const;

  bool operator==(const WanConfig&) const = default;
};

// Infers a Wan configuration from the tensor names and shapes, then checks every tensor (names,
// shapes, nothing extra), listing the problems by name. kInvalidArgument when it is not a Wan VAE.
Result<WanConfig> infer_wan_config(const TensorFile& file);
Status check_wan_state_dict(const TensorFile& file, const WanConfig& config);

// What a checkpoint holds: its family, the configuration of that family, its parameters and dtype.
struct CheckpointInfo {
  VaeFamily family = VaeFamily::kSeedVR2;
  std::optional<VaeConfig> seedvr2;  // set for kSeedVR2
  std::optional<WanConfig> wan;      // set for kWan21 / kWan22
  int64_t parameters = 0;
  DType dtype = DType::kF16;  // the widest dtype among the parameters
  bool mixed_dtypes = false;

  // "Wan2.1 VAE (dim 96, ...), 126,892,531 parameters, fp32"
  std::string to_string() const;
};

// Identifies the family by marker tensors (a Wan VAE has `decoder.middle.0.residual.0.gamma`,
// Wan2.2 also `decoder.upsamples.0.upsamples.0.residual.2.weight`; SeedVR2 has diffusers names
// such as `encoder.conv_in.weight`), then infers and strictly checks that family's configuration.
// A file that is none of them (diffusers' AutoencoderKLWan included) is kInvalidArgument with a
// message naming what is missing or malformed.
Result<CheckpointInfo> identify_checkpoint(const TensorFile& file);

}  // namespace seedvae
