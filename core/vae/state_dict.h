// VAE weights on the host: loading from a checkpoint, the portable synthetic recipe of
// ../shared/golden/README.md §7, saving, and digests.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>

#include "core/base/status.h"
#include "core/io/safetensors.h"
#include "core/tensor/host_tensor.h"
#include "core/vae/vae_config.h"

namespace seedvae {

// Looks up a canonical (diffusers) parameter name, also under the legacy attention spellings of
// the official .pth (query/key/value/proj_attn for to_q/to_k/to_v/to_out.0; docs/model.md §3).
Result<TensorView> resolve_tensor(const TensorFile& file, const std::string& canonical);

struct VaeWeights {
  VaeConfig config;
  std::map<std::string, HostTensor> tensors;  // canonical name -> values (file dtype)
  DType dtype = DType::kF16;                  // dtype of the source (fp16, bf16 or fp32)
  std::string source;                         // file path, or "synthetic tiny seed 20250601"
  std::string sha256;                         // of the file, empty for synthetic weights

  int64_t parameter_count() const;
};

// Opens a safetensors or .pth checkpoint (open_tensor_file), identifies its family
// (identify_checkpoint: infer_config + check_state_dict for SeedVR2) and copies out every
// parameter. The file's dtype must be F16, BF16 or F32. A Wan2.1/Wan2.2 checkpoint is kUnsupported
// here: the job layer runs SeedVR2 only for now; load_wan_weights (wan_model.h) loads it.
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
// The synthetic weights by name: "real" (the SeedVR2 configuration) or otherwise "tiny", each
// with the seed of the reference data.
VaeWeights synthetic_weights(std::string_view name);

// Writes the weights as a safetensors checkpoint in `dtype`, with the configuration in
// __metadata__ (atomic).
Status save_weights(const std::filesystem::path& path, const VaeWeights& weights, DType dtype,
                    std::map<std::string, std::string> extra_metadata = {});

// SHA-256 over the fp16 bit patterns, tensor by tensor in Appendix A order (the golden README's
// "checksums for synthesised weights").
std::string fp16_digest(const VaeWeights& weights);

// SHA-256 of a whole file, hex (streamed; no mapping needed).
Result<std::string> sha256_file(const std::filesystem::path& path);

}  // namespace seedvae
