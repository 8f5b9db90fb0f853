// VAE weights on the host, of any family (SeedVR2, Wan2.1, Wan2.2): loading from a checkpoint,
// the portable synthetic recipe of the reference data (docs/model.md), saving, and digests.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/io/safetensors.h"
#include "core/tensor/host_tensor.h"
#include "core/vae/vae_config.h"
#include "core/vae/wan_config.h"

namespace seedvae {

// Looks up a canonical (diffusers) parameter name, also under the legacy attention spellings of
// the official .pth (query/key/value/proj_attn for to_q/to_k/to_v/to_out.0; docs/model.md §3).
Result<TensorView> resolve_tensor(const TensorFile& file, const std::string& canonical);

// The weights of one checkpoint. `family` says which network they are for and which
// configuration holds: `config` for SeedVR2 (VaeModel), `wan` for Wan2.1 / Wan2.2 (WanModel).
struct VaeWeights {
  VaeFamily family = VaeFamily::kSeedVR2;
  VaeConfig config;  // SeedVR2's configuration (family kSeedVR2)
  WanConfig wan;     // the Wan configuration (family kWan21 / kWan22)
  // Every parameter by name (SeedVR2: the canonical diffusers names; Wan: the upstream state-dict
  // names), in the file's dtype.
  std::map<std::string, HostTensor> tensors;
  DType dtype = DType::kF16;  // the widest dtype among the parameters (fp16, bf16 or fp32)
  std::string source;         // file path, or "synthetic (portable recipe, seed ...)"
  std::string sha256;         // of the file, empty for synthetic weights

  bool is_wan() const { return family != VaeFamily::kSeedVR2; }
  int64_t parameter_count() const;
  // The family's geometry: latent channels, pixels per latent pixel, frames per latent frame.
  int latent_channels() const;
  int spatial_factor() const;
  int temporal_factor() const;
  // "SeedVR2: ..." / "Wan2.1: dim 96, ..." (the configuration's to_string, with the family).
  std::string describe() const;
};

// Opens a safetensors or .pth checkpoint (open_tensor_file), identifies its family and
// configuration (identify_checkpoint, which checks every name and shape strictly) and copies out
// every parameter. The file's tensors must be F16, BF16 or F32.
Result<VaeWeights> load_weights(const std::filesystem::path& path);

// The built-in default weights of the CLI and the studio: the trained demo model
// (docs/demo-model.md) when one is present, looked up as $SEEDVAE_DEMO_WEIGHTS, then
// <exe_dir>/../share/seedvae/demo_vae.safetensors (the install tree; the build tree has the same
// layout), then <exe_dir>/demo_vae.safetensors. Empty when none exists: callers fall back to the
// synthetic tiny weights.
std::filesystem::path find_demo_weights(const std::filesystem::path& exe_dir);

// The golden README's recipe: every value a function of (name, index, seed), rounded
// f64 -> f32 -> f16. Deterministic across platforms.
VaeWeights synthesize_weights(const VaeConfig& config, uint64_t seed);
constexpr uint64_t kTinySeed = 20250601;
// The recipe's step 1, shared by both families' synthetic weights: the base of tensor `name`
// (FNV-1a 64 of the name XOR the seed) and the raw value r in [-sqrt 3, sqrt 3) of its element i
// (splitmix64 finaliser).
uint64_t recipe_base(std::string_view name, uint64_t seed);
double recipe_raw_value(uint64_t base, uint64_t i);
constexpr uint64_t kRealSeed = 20251601;
// The synthetic weights by name, each with the seed of its reference data: "tiny" and "real"
// (SeedVR2), "wan21-tiny", "wan21-real", "wan22-tiny", "wan22-real". kInvalidArgument for
// another name.
Result<VaeWeights> synthetic_weights(std::string_view name);
// The names synthetic_weights takes, for help texts.
const std::vector<std::string>& synthetic_weight_names();

// Writes the weights as a safetensors checkpoint in `dtype` (atomic): SeedVR2's with the
// configuration in __metadata__, Wan's under the upstream names only (as ComfyUI's repackaged
// files hold them).
Status save_weights(const std::filesystem::path& path, const VaeWeights& weights, DType dtype,
                    std::map<std::string, std::string> extra_metadata = {});

// SHA-256 over the fp16 bit patterns, tensor by tensor in checkpoint order (SeedVR2: the
// reference data's Appendix A order; Wan: the upstream state dict's): the reference data's
// "checksums for synthesised weights".
std::string fp16_digest(const VaeWeights& weights);

// SHA-256 of a whole file, hex (streamed; no mapping needed).
Result<std::string> sha256_file(const std::filesystem::path& path);

}  // namespace seedvae
