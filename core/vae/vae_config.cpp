#include "core/vae/vae_config.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "core/io/safetensors.h"
#include "core/vae/state_dict.h"

namespace seedvae {

VaeConfig VaeConfig::real() {
  return VaeConfig{};
}

VaeConfig VaeConfig::tiny() {
  VaeConfig c;
  c.block_out_channels = {16, 32, 64, 64};
  c.norm_groups = 8;
  return c;
}

namespace {

void add_resnet(std::vector<VaeConfig::Param>& out, const std::string& p, int64_t cin,
                int64_t cout) {
  out.push_back({p + ".norm1.weight", {cin}});
  out.push_back({p + ".norm1.bias", {cin}});
  out.push_back({p + ".conv1.weight", {cout, cin, 3, 3, 3}});
  out.push_back({p + ".conv1.bias", {cout}});
  out.push_back({p + ".norm2.weight", {cout}});
  out.push_back({p + ".norm2.bias", {cout}});
  out.push_back({p + ".conv2.weight", {cout, cout, 3, 3, 3}});
  out.push_back({p + ".conv2.bias", {cout}});
  if (cin != cout) {
    out.push_back({p + ".conv_shortcut.weight", {cout, cin, 1, 1, 1}});
    out.push_back({p + ".conv_shortcut.bias", {cout}});
  }
}

void add_mid_block(std::vector<VaeConfig::Param>& out, const std::string& p, int64_t c) {
  add_resnet(out, p + ".resnets.0", c, c);
  const std::string a = p + ".attentions.0";
  out.push_back({a + ".group_norm.weight", {c}});
  out.push_back({a + ".group_norm.bias", {c}});
  for (const char* proj : {".to_q", ".to_k", ".to_v", ".to_out.0"}) {
    out.push_back({a + proj + ".weight", {c, c}});
    out.push_back({a + proj + ".bias", {c}});
  }
  add_resnet(out, p + ".resnets.1", c, c);
}

}  // namespace

std::vector<VaeConfig::Param> VaeConfig::parameters() const {
  std::vector<Param> out;
  const int n = levels();
  const auto& ch = block_out_channels;
  // Encoder (docs/model.md §2.2).
  out.push_back({"encoder.conv_in.weight", {ch[0], in_channels, 3, 3, 3}});
  out.push_back({"encoder.conv_in.bias", {ch[0]}});
  for (int l = 0; l < n; ++l) {
    const std::string p = "encoder.down_blocks." + std::to_string(l);
    const int64_t cin = l == 0 ? ch[0] : ch[l - 1];
    const int64_t cout = ch[l];
    for (int j = 0; j < layers_per_block; ++j) {
      add_resnet(out, p + ".resnets." + std::to_string(j), j == 0 ? cin : cout, cout);
    }
    if (l < n - 1) {
      const int64_t kt = encoder_temporal_down(l) ? 3 : 1;
      out.push_back({p + ".downsamplers.0.conv.weight", {cout, cout, kt, 3, 3}});
      out.push_back({p + ".downsamplers.0.conv.bias", {cout}});
    }
  }
  add_mid_block(out, "encoder.mid_block", ch[n - 1]);
  out.push_back({"encoder.conv_norm_out.weight", {ch[n - 1]}});
  out.push_back({"encoder.conv_norm_out.bias", {ch[n - 1]}});
  out.push_back({"encoder.conv_out.weight", {2 * latent_channels, ch[n - 1], 3, 3, 3}});
  out.push_back({"encoder.conv_out.bias", {2 * latent_channels}});
  // Decoder (§2.3): levels in reverse channel order.
  std::vector<int64_t> rev(ch.rbegin(), ch.rend());
  out.push_back({"decoder.conv_in.weight", {rev[0], latent_channels, 3, 3, 3}});
  out.push_back({"decoder.conv_in.bias", {rev[0]}});
  add_mid_block(out, "decoder.mid_block", rev[0]);
  for (int l = 0; l < n; ++l) {
    const std::string p = "decoder.up_blocks." + std::to_string(l);
    const int64_t cin = l == 0 ? rev[0] : rev[l - 1];
    const int64_t cout = rev[l];
    for (int j = 0; j < layers_per_block + 1; ++j) {
      add_resnet(out, p + ".resnets." + std::to_string(j), j == 0 ? cin : cout, cout);
    }
    if (l < n - 1) {
      const int64_t r = decoder_temporal_up(l) ? 8 : 4;
      out.push_back({p + ".upsamplers.0.upscale_conv.weight", {cout * r, cout, 1, 1, 1}});
      out.push_back({p + ".upsamplers.0.upscale_conv.bias", {cout * r}});
      out.push_back({p + ".upsamplers.0.conv.weight", {cout, cout, 3, 3, 3}});
      out.push_back({p + ".upsamplers.0.conv.bias", {cout}});
    }
  }
  out.push_back({"decoder.conv_norm_out.weight", {rev[n - 1]}});
  out.push_back({"decoder.conv_norm_out.bias", {rev[n - 1]}});
  out.push_back({"decoder.conv_out.weight", {out_channels, rev[n - 1], 3, 3, 3}});
  out.push_back({"decoder.conv_out.bias", {out_channels}});
  return out;
}

int64_t VaeConfig::parameter_count() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.shape.numel();
  return n;
}

Status VaeConfig::validate() const {
  if (levels() < 2 || levels() > 6) {
    return invalid_argument("the VAE needs 2 to 6 levels, got " + std::to_string(levels()));
  }
  if (temporal_scale_num < 0 || temporal_scale_num > levels() - 1) {
    return invalid_argument("temporal_scale_num " + std::to_string(temporal_scale_num) +
                            " does not fit " + std::to_string(levels()) + " levels");
  }
  if (in_channels < 1 || out_channels < 1 || latent_channels < 1 || layers_per_block < 1) {
    return invalid_argument("channel and layer counts must be positive");
  }
  if (norm_groups < 1) return invalid_argument("norm_groups must be positive");
  for (int c : block_out_channels) {
    if (c < 1 || c % norm_groups != 0) {
      return invalid_argument("block channel count " + std::to_string(c) +
                              " is not a positive multiple of the " + std::to_string(norm_groups) +
                              " GroupNorm groups");
    }
  }
  return Status::ok();
}

std::string VaeConfig::to_string() const {
  std::ostringstream s;
  s << "channels [";
  for (size_t i = 0; i < block_out_channels.size(); ++i) {
    s << (i ? ", " : "") << block_out_channels[i];
  }
  s << "], latent " << latent_channels << ", " << layers_per_block << " layers/block, "
    << temporal_scale_num << " temporal levels, " << norm_groups << " groups";
  return s.str();
}

std::map<std::string, std::string> VaeConfig::to_metadata() const {
  std::string ch;
  for (size_t i = 0; i < block_out_channels.size(); ++i) {
    if (i) ch += ',';
    ch += std::to_string(block_out_channels[i]);
  }
  return {{"seedvae.block_out_channels", ch},
          {"seedvae.latent_channels", std::to_string(latent_channels)},
          {"seedvae.layers_per_block", std::to_string(layers_per_block)},
          {"seedvae.temporal_scale_num", std::to_string(temporal_scale_num)},
          {"seedvae.norm_groups", std::to_string(norm_groups)}};
}

namespace {

Result<Shape> shape_of(const TensorFile& f, const std::string& name) {
  SEEDVAE_ASSIGN_OR_RETURN(TensorView v, resolve_tensor(f, name));
  return v.shape;
}

int count_indexed(const TensorFile& f, const std::string& prefix) {
  // Counts prefix.0., prefix.1., ... that exist in the file.
  int n = 0;
  for (;; ++n) {
    const std::string p = prefix + "." + std::to_string(n) + ".";
    const bool any = std::any_of(f.names().begin(), f.names().end(),
                                 [&](const std::string& s) { return s.rfind(p, 0) == 0; });
    if (!any) break;
  }
  return n;
}

}  // namespace

Result<VaeConfig> infer_config(const TensorFile& file) {
  auto fail = [&](const std::string& why) {
    return invalid_argument("cannot infer a SeedVR2 VAE configuration from " +
                            file.path().string() + ": " + why);
  };
  VaeConfig c;
  auto conv_in = shape_of(file, "encoder.conv_in.weight");
  if (!conv_in) return fail("tensor encoder.conv_in.weight is missing");
  if (conv_in->rank() != 5) return fail("encoder.conv_in.weight is not a 5-D conv weight");
  c.in_channels = static_cast<int>((*conv_in)[1]);

  const int levels = count_indexed(file, "encoder.down_blocks");
  if (levels < 2) return fail("found " + std::to_string(levels) + " encoder.down_blocks levels");
  c.block_out_channels.clear();
  for (int l = 0; l < levels; ++l) {
    // The level's width by majority over the tensors that state it, so that one misshaped tensor
    // (two dimensions swapped) is reported alone instead of misleading the whole configuration.
    const std::string r0 = "encoder.down_blocks." + std::to_string(l) + ".resnets.";
    auto first = shape_of(file, r0 + "0.conv1.weight");
    if (!first || first->rank() != 5) {
      return fail("encoder level " + std::to_string(l) + " has no resnet");
    }
    std::map<int64_t, int> votes;
    ++votes[(*first)[0]];
    for (const auto& [name, dim] : {std::pair<std::string, int>{r0 + "0.conv2.weight", 0},
                                    {r0 + "0.conv2.weight", 1},
                                    {r0 + "0.norm2.weight", 0},
                                    {r0 + "1.conv1.weight", 0},
                                    {r0 + "1.conv1.weight", 1},
                                    {r0 + "1.norm1.weight", 0}}) {
      auto s = shape_of(file, name);
      if (s && s->rank() > dim) ++votes[(*s)[static_cast<size_t>(dim)]];
    }
    const auto best =
        std::max_element(votes.begin(), votes.end(),
                         [](const auto& a, const auto& b) { return a.second < b.second; });
    c.block_out_channels.push_back(static_cast<int>(best->first));
  }
  c.layers_per_block = count_indexed(file, "encoder.down_blocks.0.resnets");
  int temporal = 0;
  for (int l = 0; l + 1 < levels; ++l) {
    auto s =
        shape_of(file, "encoder.down_blocks." + std::to_string(l) + ".downsamplers.0.conv.weight");
    if (s && s->rank() == 5 && (*s)[2] == 3) ++temporal;
  }
  c.temporal_scale_num = temporal;
  auto conv_out = shape_of(file, "encoder.conv_out.weight");
  if (!conv_out || conv_out->rank() != 5 || (*conv_out)[0] % 2 != 0) {
    return fail("encoder.conv_out.weight is missing or has an odd channel count");
  }
  c.latent_channels = static_cast<int>((*conv_out)[0] / 2);
  auto dec_out = shape_of(file, "decoder.conv_out.weight");
  if (!dec_out || dec_out->rank() != 5) return fail("decoder.conv_out.weight is missing");
  c.out_channels = static_cast<int>((*dec_out)[0]);

  const auto& meta = file.metadata();
  if (auto it = meta.find("seedvae.norm_groups"); it != meta.end()) {
    try {
      c.norm_groups = std::stoi(it->second);
    } catch (...) {
      return fail("metadata seedvae.norm_groups is not a number");
    }
  } else {
    c.norm_groups = c.block_out_channels == std::vector<int>{16, 32, 64, 64} ? 8 : 32;
  }
  SEEDVAE_TRY(c.validate().with_context("inferred configuration of " + file.path().string()));
  SEEDVAE_TRY(check_state_dict(file, c));
  return c;
}

Status check_state_dict(const TensorFile& file, const VaeConfig& config) {
  std::vector<std::string> missing, misshaped, unexpected;
  std::set<std::string> used;
  for (const auto& p : config.parameters()) {
    auto v = resolve_tensor(file, p.name);
    if (!v) {
      missing.push_back(p.name);
      continue;
    }
    used.insert(v->name);
    if (v->shape != p.shape) {
      misshaped.push_back(p.name + " is " + v->shape.to_string() + ", expected " +
                          p.shape.to_string());
    }
  }
  for (const auto& n : file.names()) {
    if (!used.count(n)) unexpected.push_back(n);
  }
  if (missing.empty() && misshaped.empty() && unexpected.empty()) return Status::ok();
  std::string msg =
      file.path().string() + " does not match the configuration (" + config.to_string() + "):";
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

}  // namespace seedvae
