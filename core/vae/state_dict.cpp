#include "core/vae/state_dict.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "core/base/sha256.h"
#include "core/io/tensor_file.h"
#include "core/vae/wan_config.h"
#include "core/vae/wan_model.h"

namespace seedvae {

Result<TensorView> resolve_tensor(const TensorFile& file, const std::string& canonical) {
  if (file.contains(canonical)) return file.get(canonical);
  static const std::pair<const char*, const char*> kLegacy[] = {{".to_q.", ".query."},
                                                                {".to_k.", ".key."},
                                                                {".to_v.", ".value."},
                                                                {".to_out.0.", ".proj_attn."}};
  for (const auto& [now, old] : kLegacy) {
    const auto pos = canonical.find(now);
    if (pos == std::string::npos) continue;
    std::string legacy = canonical;
    legacy.replace(pos, std::string_view(now).size(), old);
    if (file.contains(legacy)) return file.get(legacy);
  }
  return not_found("tensor " + canonical + " is not in " + file.path().string());
}

int64_t VaeWeights::parameter_count() const {
  int64_t n = 0;
  for (const auto& [name, t] : tensors) n += t.numel();
  return n;
}

int VaeWeights::latent_channels() const {
  return is_wan() ? wan.z_dim : config.latent_channels;
}

int VaeWeights::spatial_factor() const {
  return is_wan() ? wan.spatial_factor() : config.spatial_factor();
}

int VaeWeights::temporal_factor() const {
  return is_wan() ? wan.temporal_factor() : config.temporal_factor();
}

std::string VaeWeights::describe() const {
  return is_wan() ? wan.to_string() : "SeedVR2: " + config.to_string();
}

Result<VaeWeights> load_weights(const std::filesystem::path& path) {
  // safetensors or a torch.save .pth, by content.
  SEEDVAE_ASSIGN_OR_RETURN(const std::unique_ptr<TensorFile> opened, open_tensor_file(path));
  const TensorFile& file = *opened;
  // The family first, so that each family's checks run on its own files (and a file of neither
  // is named as such instead of failing SeedVR2's checks tensor by tensor).
  SEEDVAE_ASSIGN_OR_RETURN(const CheckpointInfo info, identify_checkpoint(file));
  VaeWeights w;
  w.family = info.family;
  w.source = path.string();
  // name in the weights -> name in the file
  std::vector<std::string> names;
  if (info.wan) {
    w.wan = *info.wan;
    for (const auto& p : w.wan.parameters()) names.push_back(p.name);
  } else {
    w.config = *info.seedvr2;
    for (const auto& p : w.config.parameters()) names.push_back(p.name);
  }
  bool first = true;
  for (const std::string& name : names) {
    // SeedVR2's .pth spells some attention tensors the legacy way; Wan's names are the file's.
    SEEDVAE_ASSIGN_OR_RETURN(TensorView v,
                             w.is_wan() ? file.get(name) : resolve_tensor(file, name));
    if (v.dtype != DType::kF16 && v.dtype != DType::kBF16 && v.dtype != DType::kF32) {
      return unsupported(
          path.string() + ": tensor " + v.name + " is " + std::string(dtype_name(v.dtype)) + "; " +
          std::string(family_name(w.family)) + " checkpoints are read in fp16, bf16 or fp32");
    }
    // Mixed files are legal safetensors; report the widest dtype.
    if (first || dtype_size(v.dtype) > dtype_size(w.dtype)) w.dtype = v.dtype;
    first = false;
    w.tensors.emplace(name, v.to_host());
  }
  SEEDVAE_ASSIGN_OR_RETURN(w.sha256, sha256_file(path));
  return w;
}

uint64_t recipe_base(std::string_view name, uint64_t seed) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a 64
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h ^ seed;
}

double recipe_raw_value(uint64_t base, uint64_t i) {
  uint64_t z = base + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z = z ^ (z >> 31);
  const double u = static_cast<double>(z >> 11) * 0x1.0p-53;
  return (2.0 * u - 1.0) * std::sqrt(3.0);
}

namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

HostTensor synthesize_tensor(const std::string& name, const Shape& shape, uint64_t seed) {
  HostTensor t(DType::kF16, shape);
  auto* out = t.data<uint16_t>();
  const uint64_t base = recipe_base(name, seed);
  const int64_t n = shape.numel();
  const bool is_norm = contains(name, ".norm1.") || contains(name, ".norm2.") ||
                       contains(name, ".group_norm.") || contains(name, "conv_norm_out.");
  const bool matrix = ends_with(name, ".weight") && shape.rank() >= 2;
  const int64_t fan_in = matrix ? n / shape[0] : 1;
  const double inv_sqrt_fan_in = 1.0 / std::sqrt(static_cast<double>(fan_in));
  const bool half_scale = contains(name, ".conv2.") || contains(name, ".to_out.0.");
  const bool upscale = contains(name, ".upscale_conv.");
  const int64_t cin = matrix ? shape[1] : 1;
  const int64_t per_out = matrix ? fan_in : 1;
  for (int64_t i = 0; i < n; ++i) {
    const double r = recipe_raw_value(base, static_cast<uint64_t>(i));
    double w;
    if (matrix) {
      w = r * inv_sqrt_fan_in;
      if (upscale) {
        // Identity repeated: I[o, c, 0, 0, 0] = 1 if c == o mod Cin (1x1x1 kernel).
        const int64_t o = i / per_out, c = i % per_out;
        w = (c == o % cin ? 1.0 : 0.0) + 0.5 * w;
      } else if (half_scale) {
        w *= 0.5;
      }
    } else if (is_norm && ends_with(name, ".weight")) {
      w = 1.0 + 0.1 * r;
    } else if (is_norm && ends_with(name, ".bias")) {
      w = 0.1 * r;
    } else {
      w = 0.05 * r;
    }
    out[i] = float_to_half_bits(static_cast<float>(w));
  }
  return t;
}

}  // namespace

const std::vector<std::string>& synthetic_weight_names() {
  static const std::vector<std::string> kNames{"tiny",       "real",       "wan21-tiny",
                                               "wan21-real", "wan22-tiny", "wan22-real"};
  return kNames;
}

Result<VaeWeights> synthetic_weights(std::string_view name) {
  if (name == "tiny") return synthesize_weights(VaeConfig::tiny(), kTinySeed);
  if (name == "real") return synthesize_weights(VaeConfig::real(), kRealSeed);
  for (const bool v22 : {false, true}) {
    for (const bool real : {false, true}) {
      if (name != std::string(v22 ? "wan22-" : "wan21-") + (real ? "real" : "tiny")) continue;
      const WanConfig c = v22 ? (real ? WanConfig::wan22() : WanConfig::wan22_tiny())
                              : (real ? WanConfig::wan21() : WanConfig::wan21_tiny());
      return synthesize_wan_weights(c, wan_reference_seed(c.family, real));
    }
  }
  std::string known;
  for (const std::string& n : synthetic_weight_names()) known += (known.empty() ? "" : ", ") + n;
  return invalid_argument("no synthetic weights are called \"" + std::string(name) +
                          "\" (known: " + known + ")");
}

VaeWeights synthesize_weights(const VaeConfig& config, uint64_t seed) {
  VaeWeights w;
  w.config = config;
  w.dtype = DType::kF16;
  w.source = "synthetic (portable recipe, seed " + std::to_string(seed) + ")";
  for (const auto& p : config.parameters()) {
    w.tensors.emplace(p.name, synthesize_tensor(p.name, p.shape, seed));
  }
  return w;
}

Status save_weights(const std::filesystem::path& path, const VaeWeights& weights, DType dtype,
                    std::map<std::string, std::string> extra_metadata) {
  std::vector<HostTensor> converted;
  converted.reserve(weights.tensors.size());
  std::vector<NamedTensor> list;
  for (const auto& [name, t] : weights.tensors) {
    converted.push_back(t.dtype() == dtype ? t : t.to(dtype));
  }
  size_t i = 0;
  for (const auto& [name, t] : weights.tensors) list.push_back({name, &converted[i++]});
  // Wan files carry no configuration: the names and shapes are all there is to it (identify).
  auto meta =
      weights.is_wan() ? std::map<std::string, std::string>{} : weights.config.to_metadata();
  meta["format"] = "pt";
  meta.merge(extra_metadata);
  return write_safetensors(path, list, meta);
}

std::string fp16_digest(const VaeWeights& weights) {
  std::vector<std::string> order;
  if (weights.is_wan()) {
    for (const auto& p : weights.wan.parameters()) order.push_back(p.name);
  } else {
    for (const auto& p : weights.config.parameters()) order.push_back(p.name);
  }
  Sha256 sha;
  for (const std::string& name : order) {
    auto it = weights.tensors.find(name);
    if (it == weights.tensors.end()) continue;
    const HostTensor h =
        it->second.dtype() == DType::kF16 ? it->second : it->second.to(DType::kF16);
    sha.update(h.raw(), static_cast<size_t>(h.nbytes()));  // little-endian hosts only
  }
  return sha.finish_hex();
}

Result<std::string> sha256_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error("cannot open " + path.string());
  Sha256 sha;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto got = in.gcount();
    if (got > 0) sha.update(buf.data(), static_cast<size_t>(got));
  }
  if (in.bad()) return io_error("read error in " + path.string());
  return sha.finish_hex();
}

std::filesystem::path find_demo_weights(const std::filesystem::path& exe_dir) {
  namespace fs = std::filesystem;
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("SEEDVAE_DEMO_WEIGHTS"); env && *env)
    candidates.emplace_back(env);
  if (!exe_dir.empty()) {
    candidates.push_back(exe_dir / ".." / "share" / "seedvae" / "demo_vae.safetensors");
    candidates.push_back(exe_dir / "demo_vae.safetensors");
  }
  for (const fs::path& c : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(c, ec)) return fs::weakly_canonical(c, ec);
  }
  return {};
}

}  // namespace seedvae
