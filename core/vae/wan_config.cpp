#include "core/vae/wan_config.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/io/tensor_file.h"
#include "core/vae/state_dict.h"

namespace seedvae {

std::string_view family_name(VaeFamily family) {
  switch (family) {
    case VaeFamily::kSeedVR2: return "SeedVR2";
    case VaeFamily::kWan21: return "Wan2.1";
    case VaeFamily::kWan22: return "Wan2.2";
  }
  return "?";
}

WanConfig WanConfig::wan21() {
  return WanConfig{};
}

WanConfig WanConfig::wan22() {
  WanConfig c;
  c.family = VaeFamily::kWan22;
  c.dim = 160;
  c.dec_dim = 256;
  c.z_dim = 48;
  c.patch_size = 2;
  return c;
}

WanConfig WanConfig::wan21_tiny() {
  WanConfig c = wan21();
  c.dim = 4;
  c.dec_dim = 4;
  return c;
}

WanConfig WanConfig::wan22_tiny() {
  WanConfig c = wan22();
  c.dim = 2;
  c.dec_dim = 3;
  return c;
}

int WanConfig::temporal_factor() const {
  int f = 1;
  for (bool t : temporal_downsample) f *= t ? 2 : 1;
  return f;
}

namespace {

using Params = std::vector<WanConfig::Param>;

// Names and shapes of the upstream modules (RMS_norm gains, causal convs, the attention block,
// Resample), in registration order.
void residual_block(Params& out, const std::string& p, int64_t cin, int64_t cout) {
  out.push_back({p + ".residual.0.gamma", {cin, 1, 1, 1}});
  out.push_back({p + ".residual.2.weight", {cout, cin, 3, 3, 3}});
  out.push_back({p + ".residual.2.bias", {cout}});
  out.push_back({p + ".residual.3.gamma", {cout, 1, 1, 1}});
  out.push_back({p + ".residual.6.weight", {cout, cout, 3, 3, 3}});
  out.push_back({p + ".residual.6.bias", {cout}});
  if (cin != cout) {
    out.push_back({p + ".shortcut.weight", {cout, cin, 1, 1, 1}});
    out.push_back({p + ".shortcut.bias", {cout}});
  }
}

void attention_block(Params& out, const std::string& p, int64_t c) {
  out.push_back({p + ".norm.gamma", {c, 1, 1}});
  out.push_back({p + ".to_qkv.weight", {3 * c, c, 1, 1}});
  out.push_back({p + ".to_qkv.bias", {3 * c}});
  out.push_back({p + ".proj.weight", {c, c, 1, 1}});
  out.push_back({p + ".proj.bias", {c}});
}

void middle(Params& out, const std::string& p, int64_t c) {
  residual_block(out, p + ".0", c, c);
  attention_block(out, p + ".1", c);
  residual_block(out, p + ".2", c, c);
}

// Resample: the 2-D conv `resample.1`, then (3-D modes) the temporal conv `time_conv`.
void resample(Params& out, const std::string& p, int64_t c, int64_t c2d_out, bool temporal,
              bool up) {
  out.push_back({p + ".resample.1.weight", {c2d_out, c, 3, 3}});
  out.push_back({p + ".resample.1.bias", {c2d_out}});
  if (temporal) {
    const int64_t tout = up ? 2 * c : c;
    out.push_back({p + ".time_conv.weight", {tout, c, 3, 1, 1}});
    out.push_back({p + ".time_conv.bias", {tout}});
  }
}

void head(Params& out, const std::string& p, int64_t cin, int64_t cout) {
  out.push_back({p + ".0.gamma", {cin, 1, 1, 1}});
  out.push_back({p + ".2.weight", {cout, cin, 3, 3, 3}});
  out.push_back({p + ".2.bias", {cout}});
}

}  // namespace

std::vector<WanConfig::Param> WanConfig::parameters() const {
  Params out;
  const bool v22 = family == VaeFamily::kWan22;
  const int n = levels();
  const int64_t video = static_cast<int64_t>(in_channels) * patch_size * patch_size;
  const int64_t z = z_dim;
  // Encoder: widths dim * [1, dim_mult...].
  std::vector<int64_t> enc{dim};
  for (int m : dim_mult) enc.push_back(static_cast<int64_t>(dim) * m);
  out.push_back({"encoder.conv1.weight", {enc[0], video, 3, 3, 3}});
  out.push_back({"encoder.conv1.bias", {enc[0]}});
  int flat = 0;  // Wan2.1: one flat list of blocks
  for (int i = 0; i < n; ++i) {
    int64_t cin = enc[static_cast<size_t>(i)];
    const int64_t cout = enc[static_cast<size_t>(i) + 1];
    const std::string level = "encoder.downsamples." + std::to_string(i) + ".downsamples.";
    for (int r = 0; r < num_res_blocks; ++r) {
      residual_block(
          out, v22 ? level + std::to_string(r) : "encoder.downsamples." + std::to_string(flat++),
          cin, cout);
      cin = cout;
    }
    if (i != n - 1) {
      const bool t = static_cast<size_t>(i) < temporal_downsample.size() &&
                     temporal_downsample[static_cast<size_t>(i)];
      resample(out,
               v22 ? level + std::to_string(num_res_blocks)
                   : "encoder.downsamples." + std::to_string(flat++),
               cout, cout, t, /*up=*/false);
    }
  }
  const int64_t top = enc.back();
  middle(out, "encoder.middle", top);
  head(out, "encoder.head", top, 2 * z);
  out.push_back({"conv1.weight", {2 * z, 2 * z, 1, 1, 1}});
  out.push_back({"conv1.bias", {2 * z}});
  out.push_back({"conv2.weight", {z, z, 1, 1, 1}});
  out.push_back({"conv2.bias", {z}});
  // Decoder: widths dec_dim * [dim_mult[-1], reversed dim_mult...].
  std::vector<int64_t> dec{static_cast<int64_t>(dec_dim) * dim_mult.back()};
  for (int i = n - 1; i >= 0; --i)
    dec.push_back(static_cast<int64_t>(dec_dim) * dim_mult[static_cast<size_t>(i)]);
  out.push_back({"decoder.conv1.weight", {dec[0], z, 3, 3, 3}});
  out.push_back({"decoder.conv1.bias", {dec[0]}});
  middle(out, "decoder.middle", dec[0]);
  flat = 0;
  for (int i = 0; i < n; ++i) {
    int64_t cin = dec[static_cast<size_t>(i)];
    const int64_t cout = dec[static_cast<size_t>(i) + 1];
    // Wan2.1's upsamplers halve the channels, so every level after the first starts from half
    // the previous level's width; Wan2.2's keep them.
    if (!v22 && i > 0) cin /= 2;
    const std::string level = "decoder.upsamples." + std::to_string(i) + ".upsamples.";
    for (int r = 0; r < num_res_blocks + 1; ++r) {
      residual_block(
          out, v22 ? level + std::to_string(r) : "decoder.upsamples." + std::to_string(flat++), cin,
          cout);
      cin = cout;
    }
    if (i != n - 1) {
      // The decoder's temporal upsampling mirrors the encoder's downsampling.
      const size_t k = temporal_downsample.size() - 1 - static_cast<size_t>(i);
      const bool t = static_cast<size_t>(i) < temporal_downsample.size() && temporal_downsample[k];
      resample(out,
               v22 ? level + std::to_string(num_res_blocks + 1)
                   : "decoder.upsamples." + std::to_string(flat++),
               cout, v22 ? cout : cout / 2, t, /*up=*/true);
    }
  }
  head(out, "decoder.head", dec.back(), video);
  return out;
}

int64_t WanConfig::parameter_count() const {
  int64_t n = 0;
  for (const Param& p : parameters()) n += p.shape.numel();
  return n;
}

Status WanConfig::validate() const {
  auto bad = [&](const std::string& why) {
    return invalid_argument("invalid " + std::string(family_name(family)) + " VAE configuration (" +
                            to_string() + "): " + why);
  };
  if (family != VaeFamily::kWan21 && family != VaeFamily::kWan22) return bad("not a Wan family");
  if (dim < 1 || dec_dim < 1 || z_dim < 1 || in_channels < 1) {
    return bad("widths must be positive");
  }
  if (dim > (1 << 20) || dec_dim > (1 << 20) || z_dim > (1 << 20)) return bad("widths too large");
  if (dim_mult.size() < 2 || dim_mult.size() > 8) return bad("2 to 8 levels are supported");
  for (int m : dim_mult) {
    if (m < 1 || m > 64) return bad("dim_mult entries must be 1..64");
  }
  if (num_res_blocks < 1 || num_res_blocks > 16) return bad("num_res_blocks must be 1..16");
  if (temporal_downsample.size() != dim_mult.size() - 1) {
    return bad("temporal_downsample needs one entry per level but the last");
  }
  if (patch_size != (family == VaeFamily::kWan22 ? 2 : 1)) {
    return bad(family == VaeFamily::kWan22 ? "Wan2.2 patchifies 2x2" : "Wan2.1 has no patchify");
  }
  if (family == VaeFamily::kWan21 && dec_dim != dim) return bad("Wan2.1's decoder width is dim");
  if (family == VaeFamily::kWan21) {
    for (size_t i = 0; i + 1 < dim_mult.size(); ++i) {
      if ((static_cast<int64_t>(dec_dim) * dim_mult[i]) % 2 != 0) {
        return bad("Wan2.1's upsamplers halve the channels: widths must be even");
      }
    }
  }
  return Status::ok();
}

std::string WanConfig::to_string() const {
  auto list = [](const auto& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) s += ", ";
      if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::vector<bool>>) {
        s += v[i] ? "true" : "false";
      } else {
        s += std::to_string(v[i]);
      }
    }
    return s + "]";
  };
  std::string s = "dim " + std::to_string(dim);
  if (family == VaeFamily::kWan22 || dec_dim != dim) s += ", dec_dim " + std::to_string(dec_dim);
  s += ", z_dim " + std::to_string(z_dim) + ", dim_mult " + list(dim_mult) + ", " +
       std::to_string(num_res_blocks) + " res blocks, temporal downsample " +
       list(temporal_downsample);
  if (patch_size > 1) {
    s += ", patch " + std::to_string(patch_size) + "x" + std::to_string(patch_size);
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// Inference

namespace {

constexpr const char* kWanMarker = "decoder.middle.0.residual.0.gamma";
constexpr const char* kWan22Marker = "decoder.upsamples.0.upsamples.0.residual.2.weight";

bool has_prefix(const TensorFile& f, const std::string& prefix) {
  return std::any_of(f.names().begin(), f.names().end(),
                     [&](const std::string& s) { return s.rfind(prefix, 0) == 0; });
}

std::optional<Shape> shape_of(const TensorFile& f, const std::string& name) {
  auto v = f.get(name);
  if (!v) return std::nullopt;
  return v->shape;
}

struct Block {
  bool resample = false;
  bool temporal = false;
  int64_t width = 0;  // a residual block's output channels
};

// The blocks under `prefix.0.`, `prefix.1.`, ...: residual blocks and resamplers.
Result<std::vector<Block>> walk(const TensorFile& f, const std::string& prefix) {
  std::vector<Block> out;
  for (int k = 0; k < 1024; ++k) {
    const std::string p = prefix + "." + std::to_string(k);
    if (!has_prefix(f, p + ".")) break;
    Block b;
    if (f.contains(p + ".resample.1.weight")) {
      b.resample = true;
      b.temporal = f.contains(p + ".time_conv.weight");
    } else if (auto s = shape_of(f, p + ".residual.2.weight"); s && s->rank() == 5) {
      b.width = (*s)[0];
    } else {
      return invalid_argument(p + " is neither a residual block (" + p +
                              ".residual.2.weight, 5-D) nor a resampler (" + p +
                              ".resample.1.weight)");
    }
    out.push_back(b);
  }
  return out;
}

// Levels from a flat block list: residual blocks, each level but the last closed by a resampler.
Status levels_from(const std::vector<std::vector<Block>>& levels, WanConfig& c) {
  if (levels.size() < 2) {
    return invalid_argument("found " + std::to_string(levels.size()) + " encoder levels");
  }
  c.dim_mult.clear();
  c.temporal_downsample.clear();
  c.num_res_blocks = 0;
  for (size_t i = 0; i < levels.size(); ++i) {
    const auto& l = levels[i];
    int blocks = 0;
    int64_t width = 0;
    for (const Block& b : l) {
      if (!b.resample) {
        ++blocks;
        width = b.width;
      }
    }
    if (blocks == 0)
      return invalid_argument("encoder level " + std::to_string(i) + " has no residual block");
    if (i == 0) c.num_res_blocks = blocks;
    if (width % c.dim != 0) {
      return invalid_argument("encoder level " + std::to_string(i) + "'s width " +
                              std::to_string(width) + " is not a multiple of dim " +
                              std::to_string(c.dim));
    }
    c.dim_mult.push_back(static_cast<int>(width / c.dim));
    if (i + 1 < levels.size()) {
      if (l.empty() || !l.back().resample) {
        return invalid_argument("encoder level " + std::to_string(i) + " ends without a resampler");
      }
      c.temporal_downsample.push_back(l.back().temporal);
    }
  }
  return Status::ok();
}

Result<WanConfig> infer_shapes(const TensorFile& f, VaeFamily family) {
  WanConfig c;
  c.family = family;
  const bool v22 = family == VaeFamily::kWan22;
  const auto conv_in = shape_of(f, "encoder.conv1.weight");
  if (!conv_in || conv_in->rank() != 5) {
    return invalid_argument("encoder.conv1.weight is missing or not a 5-D convolution");
  }
  c.dim = static_cast<int>((*conv_in)[0]);
  const int64_t video = (*conv_in)[1];
  c.patch_size = v22 ? 2 : 1;
  c.in_channels = static_cast<int>(video / (c.patch_size * c.patch_size));
  if (c.in_channels * c.patch_size * c.patch_size != video) {
    return invalid_argument("encoder.conv1.weight takes " + std::to_string(video) +
                            " channels, not a multiple of the " +
                            std::to_string(c.patch_size * c.patch_size) + " patch pixels");
  }
  const auto conv2 = shape_of(f, "conv2.weight");
  if (!conv2 || conv2->rank() != 5) {
    return invalid_argument("the post-quant conv conv2.weight is missing or not 5-D");
  }
  c.z_dim = static_cast<int>((*conv2)[0]);
  std::vector<std::vector<Block>> levels;
  if (v22) {
    for (int i = 0; i < 64 && has_prefix(f, "encoder.downsamples." + std::to_string(i) + ".");
         ++i) {
      SEEDVAE_ASSIGN_OR_RETURN(
          std::vector<Block> l,
          walk(f, "encoder.downsamples." + std::to_string(i) + ".downsamples"));
      levels.push_back(std::move(l));
    }
    const auto head0 = shape_of(f, "decoder.head.0.gamma");
    if (!head0 || head0->rank() != 4) {
      return invalid_argument("decoder.head.0.gamma is missing or not [C, 1, 1, 1]");
    }
    c.dec_dim = static_cast<int>((*head0)[0]);
  } else {
    SEEDVAE_ASSIGN_OR_RETURN(std::vector<Block> flat, walk(f, "encoder.downsamples"));
    levels.emplace_back();
    for (const Block& b : flat) {
      levels.back().push_back(b);
      if (b.resample) levels.emplace_back();
    }
    c.dec_dim = c.dim;
  }
  SEEDVAE_TRY(levels_from(levels, c));
  SEEDVAE_TRY(c.validate());
  return c;
}

std::string who(const TensorFile& f) {
  return f.path().empty() ? std::string("in-memory checkpoint") : f.path().string();
}

}  // namespace

Result<WanConfig> infer_wan_config(const TensorFile& file) {
  if (!file.contains(kWanMarker)) {
    return invalid_argument(who(file) + " is not a Wan VAE checkpoint: it has no tensor " +
                            std::string(kWanMarker));
  }
  const VaeFamily family = file.contains(kWan22Marker) ? VaeFamily::kWan22 : VaeFamily::kWan21;
  auto c = infer_shapes(file, family);
  if (!c) {
    return invalid_argument("cannot infer a " + std::string(family_name(family)) +
                            " VAE configuration from " + who(file) + ": " + c.status().message());
  }
  SEEDVAE_TRY(check_wan_state_dict(file, *c));
  return c;
}

Status check_wan_state_dict(const TensorFile& file, const WanConfig& config) {
  std::vector<std::string> missing, misshaped, unexpected;
  std::set<std::string> expected;
  for (const auto& p : config.parameters()) {
    expected.insert(p.name);
    auto v = file.get(p.name);
    if (!v) {
      missing.push_back(p.name);
    } else if (v->shape != p.shape) {
      misshaped.push_back(p.name + " is " + v->shape.to_string() + ", expected " +
                          p.shape.to_string());
    }
  }
  for (const auto& n : file.names()) {
    if (!expected.count(n)) unexpected.push_back(n);
  }
  if (missing.empty() && misshaped.empty() && unexpected.empty()) return Status::ok();
  std::string msg = who(file) + " does not match the " + std::string(family_name(config.family)) +
                    " VAE configuration (" + config.to_string() + "):";
  auto list = [&](const char* what, const std::vector<std::string>& v) {
    if (v.empty()) return;
    msg += "\n  " + std::to_string(v.size()) + " " + what + ":";
    for (size_t i = 0; i < v.size() && i < 20; ++i) msg += "\n    " + v[i];
    if (v.size() > 20) msg += "\n    ... and " + std::to_string(v.size() - 20) + " more";
  };
  list("missing tensors", missing);
  list("mis-shaped tensors", misshaped);
  list("unexpected tensors", unexpected);
  return invalid_argument(msg);
}

// ---------------------------------------------------------------------------------------------
// Identification

std::string CheckpointInfo::to_string() const {
  std::string s = std::string(family_name(family)) + " VAE (" +
                  (wan       ? wan->to_string()
                   : seedvr2 ? seedvr2->to_string()
                             : std::string()) +
                  "), " + std::to_string(parameters) + " parameters, " +
                  std::string(dtype_name(dtype));
  if (mixed_dtypes) s += " (mixed dtypes)";
  return s;
}

namespace {

// The prefix in front of a marker name, when every name carries it (e.g. "vae.").
std::optional<std::string> prefix_of(const TensorFile& f, std::string_view marker) {
  for (const auto& n : f.names()) {
    if (n.size() > marker.size() &&
        n.compare(n.size() - marker.size(), marker.size(), marker) == 0) {
      return n.substr(0, n.size() - marker.size());
    }
  }
  return std::nullopt;
}

template <typename Params, typename Lookup>
void count(const Params& params, Lookup&& lookup, CheckpointInfo& info) {
  bool first = true;
  for (const auto& p : params) {
    auto v = lookup(p.name);
    if (!v) continue;
    info.parameters += v->numel();
    if (first) {
      info.dtype = v->dtype;
      first = false;
    } else if (v->dtype != info.dtype) {
      info.mixed_dtypes = true;
      if (dtype_size(v->dtype) > dtype_size(info.dtype)) info.dtype = v->dtype;
    }
  }
}

}  // namespace

Result<CheckpointInfo> identify_checkpoint(const TensorFile& file) {
  CheckpointInfo info;
  if (file.contains(kWanMarker)) {
    SEEDVAE_ASSIGN_OR_RETURN(WanConfig c, infer_wan_config(file));
    info.family = c.family;
    count(
        c.parameters(), [&](const std::string& n) { return file.get(n); }, info);
    info.wan = std::move(c);
    return info;
  }
  const bool gamma =
      std::any_of(file.names().begin(), file.names().end(), [](const std::string& n) {
        return n.size() > 6 && n.compare(n.size() - 6, 6, ".gamma") == 0;
      });
  if (file.contains("decoder.norm_out.gamma") ||
      (gamma && file.contains("encoder.conv_in.weight"))) {
    return invalid_argument(
        who(file) +
        " is a Wan VAE in diffusers' naming (AutoencoderKLWan: decoder.norm_out.gamma, "
        "encoder.conv_in.weight, ...), which is not supported: use the original "
        "Wan2.1_VAE.pth / Wan2.2_VAE.pth or the ComfyUI repackaged "
        "wan_2.1_vae.safetensors / wan2.2_vae.safetensors");
  }
  if (!file.contains("encoder.conv_in.weight")) {
    for (std::string_view marker :
         {std::string_view(kWanMarker), std::string_view("encoder.conv_in.weight")}) {
      if (auto p = prefix_of(file, marker)) {
        return invalid_argument(who(file) + ": its tensor names carry the prefix '" +
                                p->substr(0, 80) + "' (e.g. '" + *p + std::string(marker) +
                                "'); a VAE checkpoint holds the VAE's state dict alone");
      }
    }
    std::string first;
    for (size_t i = 0; i < file.names().size() && i < 3; ++i) {
      first += (i ? ", " : "") + file.names()[i].substr(0, 80);
    }
    return invalid_argument(
        who(file) +
        " is neither a SeedVR2 nor a Wan2.1/Wan2.2 VAE checkpoint: it has no tensor "
        "encoder.conv_in.weight (SeedVR2) and no " +
        std::string(kWanMarker) + " (Wan); its " + std::to_string(file.names().size()) +
        " tensors" + (first.empty() ? std::string() : " begin with " + first));
  }
  SEEDVAE_ASSIGN_OR_RETURN(VaeConfig c, infer_config(file));
  info.family = VaeFamily::kSeedVR2;
  count(
      c.parameters(), [&](const std::string& n) { return resolve_tensor(file, n); }, info);
  info.seedvr2 = std::move(c);
  return info;
}

}  // namespace seedvae
