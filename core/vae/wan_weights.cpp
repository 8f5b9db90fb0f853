// Wan weights on the host (wan_model.h): the reference data's synthetic recipe and the wrappers'
// latent constants.
#include <cmath>

#include "core/base/sha256.h"
#include "core/io/safetensors.h"
#include "core/io/tensor_file.h"
#include "core/vae/state_dict.h"
#include "core/vae/wan_model.h"

namespace seedvae {

namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Step 2 of the recipe, tested in this order: gain, bias, time_up, half, conv.
HostTensor synthesize_wan_tensor(const std::string& name, const Shape& shape, uint64_t seed) {
  HostTensor t(DType::kF16, shape);
  auto* out = t.data<uint16_t>();
  const uint64_t base = recipe_base(name, seed);
  const int64_t n = shape.numel();
  enum class Rule { kGain, kBias, kTimeUp, kHalf, kConv } rule;
  if (ends_with(name, ".gamma")) {
    rule = Rule::kGain;
  } else if (ends_with(name, ".bias")) {
    rule = Rule::kBias;
  } else if (name.starts_with("decoder.") && ends_with(name, ".time_conv.weight")) {
    rule = Rule::kTimeUp;
  } else if (ends_with(name, ".residual.6.weight") || ends_with(name, ".proj.weight")) {
    rule = Rule::kHalf;
  } else {
    rule = Rule::kConv;
  }
  const int64_t fan_in = shape.rank() >= 2 ? n / shape[0] : 1;
  const double inv_sqrt_fan_in = 1.0 / std::sqrt(static_cast<double>(fan_in));
  const int64_t cin = shape.rank() >= 2 ? shape[1] : 1;
  const int64_t taps = fan_in / cin;  // kT*kH*kW (3 for a time conv)
  for (int64_t i = 0; i < n; ++i) {
    const double r = recipe_raw_value(base, static_cast<uint64_t>(i));
    double w = 0;
    switch (rule) {
      case Rule::kGain: w = 1.0 + 0.1 * r; break;
      case Rule::kBias: w = 0.05 * r; break;
      case Rule::kHalf: w = 0.5 * r * inv_sqrt_fan_in; break;
      case Rule::kConv: w = r * inv_sqrt_fan_in; break;
      case Rule::kTimeUp: {
        // I[o, c, 2, 0, 0] = 1 if c == o mod C: the current-frame tap of both output halves
        const int64_t o = i / fan_in, c = (i / taps) % cin, tap = i % taps;
        w = (tap == 2 && c == o % cin ? 1.0 : 0.0) + 0.5 * r * inv_sqrt_fan_in;
        break;
      }
    }
    out[i] = float_to_half_bits(static_cast<float>(w));
  }
  return t;
}

}  // namespace

VaeWeights synthesize_wan_weights(const WanConfig& config, uint64_t seed) {
  VaeWeights w;
  w.family = config.family;
  w.wan = config;
  w.dtype = DType::kF16;
  w.source = "synthetic (portable recipe, seed " + std::to_string(seed) + ")";
  for (const auto& p : config.parameters()) {
    w.tensors.emplace(p.name, synthesize_wan_tensor(p.name, p.shape, seed));
  }
  return w;
}

uint64_t wan_reference_seed(VaeFamily family, bool real) {
  const bool v22 = family == VaeFamily::kWan22;
  return real ? (v22 ? 20251622 : 20251621) : (v22 ? 20250622 : 20250621);
}

const std::vector<float>& wan_latent_mean(VaeFamily family) {
  static const std::vector<float> k21{-0.7571f, -0.7089f, -0.9113f, 0.1075f,  -0.1745f, 0.9653f,
                                      -0.1517f, 1.5508f,  0.4134f,  -0.0715f, 0.5517f,  -0.3632f,
                                      -0.1922f, -0.9497f, 0.2503f,  -0.2921f};
  static const std::vector<float> k22{
      -0.2289f, -0.0052f, -0.1323f, -0.2339f, -0.2799f, 0.0174f,  0.1838f,  0.1557f,
      -0.1382f, 0.0542f,  0.2813f,  0.0891f,  0.1570f,  -0.0098f, 0.0375f,  -0.1825f,
      -0.2246f, -0.1207f, -0.0698f, 0.5109f,  0.2665f,  -0.2108f, -0.2158f, 0.2502f,
      -0.2055f, -0.0322f, 0.1109f,  0.1567f,  -0.0729f, 0.0899f,  -0.2799f, -0.1230f,
      -0.0313f, -0.1649f, 0.0117f,  0.0723f,  -0.2839f, -0.2083f, -0.0520f, 0.3748f,
      0.0152f,  0.1957f,  0.1433f,  -0.2944f, 0.3573f,  -0.0548f, -0.1681f, -0.0667f};
  return family == VaeFamily::kWan22 ? k22 : k21;
}

const std::vector<float>& wan_latent_std(VaeFamily family) {
  static const std::vector<float> k21{2.8184f, 1.4541f, 2.3275f, 2.6558f, 1.2196f, 1.7708f,
                                      2.6052f, 2.0743f, 3.2687f, 2.1526f, 2.8652f, 1.5579f,
                                      1.6382f, 1.1253f, 2.8251f, 1.9160f};
  static const std::vector<float> k22{
      0.4765f, 1.0364f, 0.4514f, 1.1677f, 0.5313f, 0.4990f, 0.4818f, 0.5013f, 0.8158f, 1.0344f,
      0.5894f, 1.0901f, 0.6885f, 0.6165f, 0.8454f, 0.4978f, 0.5759f, 0.3523f, 0.7135f, 0.6804f,
      0.5833f, 1.4146f, 0.8986f, 0.5659f, 0.7069f, 0.5338f, 0.4889f, 0.4917f, 0.4069f, 0.4999f,
      0.6866f, 0.4093f, 0.5709f, 0.6065f, 0.6415f, 0.4944f, 0.5726f, 1.2042f, 0.5458f, 1.6887f,
      0.3971f, 1.0600f, 0.3943f, 0.5537f, 0.5444f, 0.4089f, 0.7468f, 0.7744f};
  return family == VaeFamily::kWan22 ? k22 : k21;
}

namespace {

// y[n, c, ...] = f(x[n, c, ...], mean[c], 1/std[c]) for a Wan latent.
template <typename F>
Result<HostTensor> per_channel(const HostTensor& x, VaeFamily family, const char* what, F f) {
  const std::vector<float>& mean = wan_latent_mean(family);
  const std::vector<float>& stdv = wan_latent_std(family);
  const Shape& s = x.shape();
  if (s.rank() != 5 || x.dtype() != DType::kF32 || s[1] != static_cast<int64_t>(mean.size())) {
    return invalid_argument(std::string(what) + ": a " + std::string(family_name(family)) +
                            " latent is an fp32 [N, " + std::to_string(mean.size()) +
                            ", t, h, w] tensor, got " + s.to_string());
  }
  HostTensor y(DType::kF32, s);
  const int64_t plane = s[2] * s[3] * s[4];
  for (int64_t n = 0; n < s[0]; ++n) {
    for (int64_t c = 0; c < s[1]; ++c) {
      const float m = mean[static_cast<size_t>(c)];
      const float inv = 1.f / stdv[static_cast<size_t>(c)];  // fp32, as upstream's 1.0 / std
      const float* xs = x.data<float>() + (n * s[1] + c) * plane;
      float* ys = y.data<float>() + (n * s[1] + c) * plane;
      for (int64_t i = 0; i < plane; ++i) ys[i] = f(xs[i], m, inv);
    }
  }
  return y;
}

}  // namespace

Result<HostTensor> wan_normalize_latent(const HostTensor& mu, VaeFamily family) {
  return per_channel(mu, family, "wan_normalize_latent",
                     [](float v, float m, float inv) { return (v - m) * inv; });
}

Result<HostTensor> wan_denormalize_latent(const HostTensor& latent, VaeFamily family) {
  return per_channel(latent, family, "wan_denormalize_latent",
                     [](float v, float m, float inv) { return v / inv + m; });
}

}  // namespace seedvae
