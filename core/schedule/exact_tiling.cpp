#include "core/schedule/exact_tiling.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace seedvae {

int64_t ExactStreamState::bytes() const {
  int64_t n = 0;
  for (const auto& [k, t] : memory) n += t.nbytes();
  return n;
}

// Per-frame GroupNorm (+ SiLU) with statistics of the whole frame, in the CPU backend's form:
// y = (x - mean) * (rstd * gamma) + beta.
struct ExactTiledVae::NormAct {
  int64_t channels = 0, frames = 0, groups = 1;
  std::vector<float> mean;   // [frames * groups]
  std::vector<float> scale;  // [frames * channels]
  std::vector<float> shift;  // [channels]
  bool silu = false;

  float apply(float v, int64_t t, int64_t c) const {
    const int64_t g = c / (channels / groups);
    float y = (v - mean[static_cast<size_t>(t * groups + g)]) *
                  scale[static_cast<size_t>(t * channels + c)] +
              shift[static_cast<size_t>(c)];
    if (silu) y = y / (1.f + std::exp(-y));
    return y;
  }
};

struct ExactTiledVae::ConvSpec {
  std::string prefix;  // "<...>.conv1": weight prefix and causal-memory key
  int stride_t = 1, stride_hw = 1;
  bool downsample_pad = false;           // Downsample3D: zero pad (0, 1, 0, 1), no other padding
  const HostTensor* residual = nullptr;  // raw block input added to the output (resnet)
  std::string shortcut;                  // 1x1x1 conv applied to the residual first (if not empty)
  int64_t full_h = 0, full_w = 0;        // full-resolution frame (tile scaling)
  bool final_layer = false;              // tiles reported through on_tile
};

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Element (c, t, y, x) of a [1, C, T, H, W] fp32 host tensor.
inline const float* row_ptr(const HostTensor& t, int64_t c, int64_t f, int64_t y) {
  const Shape& s = t.shape();
  return t.data<float>() + ((c * s[2] + f) * s[3] + y) * s[4];
}
inline float* row_ptr(HostTensor& t, int64_t c, int64_t f, int64_t y) {
  const Shape& s = t.shape();
  return t.data<float>() + ((c * s[2] + f) * s[3] + y) * s[4];
}

// Copies `src` [1, C, T, h, w] into `dst` [1, C, T, H, W] at (y0, x0).
void paste(HostTensor& dst, const HostTensor& src, int64_t y0, int64_t x0) {
  const Shape& s = src.shape();
  const int64_t planes = s[1] * s[2];
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
  for (int64_t p = 0; p < planes; ++p) {
    const int64_t c = p / s[2], f = p % s[2];
    for (int64_t y = 0; y < s[3]; ++y) {
      std::memcpy(row_ptr(dst, c, f, y0 + y) + x0, row_ptr(src, c, f, y),
                  static_cast<size_t>(s[4]) * sizeof(float));
    }
  }
}

// Region [y0, y0+h) x [x0, x0+w) of every channel and frame (inside the tensor).
HostTensor crop(const HostTensor& src, int64_t y0, int64_t x0, int64_t h, int64_t w) {
  const Shape& s = src.shape();
  HostTensor out(DType::kF32, Shape{1, s[1], s[2], h, w});
  const int64_t planes = s[1] * s[2];
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
  for (int64_t p = 0; p < planes; ++p) {
    const int64_t c = p / s[2], f = p % s[2];
    for (int64_t y = 0; y < h; ++y) {
      std::memcpy(row_ptr(out, c, f, y), row_ptr(src, c, f, y0 + y) + x0,
                  static_cast<size_t>(w) * sizeof(float));
    }
  }
  return out;
}

}  // namespace

ExactTiledVae::ExactTiledVae(Backend& backend, const VaeWeights& weights, ExactOptions options)
    : backend_(backend), weights_(weights), options_(options) {}

const HostTensor* ExactTiledVae::host_param(const std::string& name) const {
  auto it = weights_.tensors.find(name);
  return it == weights_.tensors.end() ? nullptr : &it->second;
}

Result<Tensor> ExactTiledVae::weight(const std::string& name) {
  if (auto it = cache_.find(name); it != cache_.end()) return it->second;
  const HostTensor* h = host_param(name);
  if (h == nullptr) return not_found("exact tiling: the weights lack " + name);
  SEEDVAE_ASSIGN_OR_RETURN(Tensor t, backend_.upload_weight(*h, name));
  cache_.emplace(name, t);
  return t;
}

void ExactTiledVae::release_weights() {
  if (!options_.keep_weights) cache_.clear();
}

Status ExactTiledVae::step_done(ExactContext& ctx) {
  ++ctx.steps_done;
  if (ctx.report) ++ctx.report->tiles_run;
  if (ctx.progress) {
    ctx.progress->report(ctx.stage, ctx.steps_done, std::max(ctx.steps_done, ctx.steps_total));
  }
  return Status::ok();
}

Result<ExactTiledVae::NormAct> ExactTiledVae::norm_for(const HostTensor& x,
                                                       const std::string& prefix, bool silu) const {
  const HostTensor* g = host_param(prefix + ".weight");
  const HostTensor* b = host_param(prefix + ".bias");
  if (g == nullptr || b == nullptr) return not_found("exact tiling: the weights lack " + prefix);
  const Shape& s = x.shape();
  NormAct n;
  n.channels = s[1];
  n.frames = s[2];
  n.groups = weights_.config.norm_groups;
  n.silu = silu;
  if (n.groups < 1 || n.channels % n.groups != 0) {
    return invalid_argument("exact tiling: " + std::to_string(n.channels) +
                            " channels are not divisible into " + std::to_string(n.groups) +
                            " groups");
  }
  const HostTensor gamma = g->to(DType::kF32), beta = b->to(DType::kF32);
  const int64_t cg = n.channels / n.groups;
  const int64_t hw = s[3] * s[4];
  const int64_t count = cg * hw;
  n.mean.assign(static_cast<size_t>(n.frames * n.groups), 0.f);
  n.scale.assign(static_cast<size_t>(n.frames * n.channels), 0.f);
  n.shift.assign(beta.f32().begin(), beta.f32().end());
  const double eps = static_cast<double>(weights_.config.norm_eps);
  const int64_t jobs = n.frames * n.groups;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1)
#endif
  for (int64_t job = 0; job < jobs; ++job) {
    const int64_t t = job / n.groups, gi = job % n.groups;
    // Two passes in double, like the CPU backend: mean, then squared deviations from the float
    // mean with the exact correction for the mean's rounding.
    double sum = 0;
    for (int64_t c = gi * cg; c < (gi + 1) * cg; ++c) {
      const float* p = row_ptr(x, c, t, 0);
      double part = 0;
      for (int64_t i = 0; i < hw; ++i) part += p[i];
      sum += part;
    }
    const double mean_d = sum / static_cast<double>(count);
    const float mean = static_cast<float>(mean_d);
    double ss = 0;
    for (int64_t c = gi * cg; c < (gi + 1) * cg; ++c) {
      const float* p = row_ptr(x, c, t, 0);
      double part = 0;
      for (int64_t i = 0; i < hw; ++i) {
        const double d = static_cast<double>(p[i]) - mean;
        part += d * d;
      }
      ss += part;
    }
    const double bias = mean_d - static_cast<double>(mean);
    double var = ss / static_cast<double>(count) - bias * bias;
    if (var < 0) var = 0;
    const double rstd = 1.0 / std::sqrt(var + eps);
    n.mean[static_cast<size_t>(job)] = mean;
    for (int64_t c = gi * cg; c < (gi + 1) * cg; ++c) {
      n.scale[static_cast<size_t>(t * n.channels + c)] =
          static_cast<float>(rstd * static_cast<double>(gamma.f32()[static_cast<size_t>(c)]));
    }
  }
  return n;
}

namespace {

// Frames of a causal convolution's extended input: E context frames (the stored memory, already
// activated, or E copies of the activated frame 0) followed by the chunk's activated frames.
struct ExtSource {
  const HostTensor* x = nullptr;
  const HostTensor* memory = nullptr;  // [1, C, E, H, W] or null
  int64_t context = 0;                 // E
  template <typename Norm>
  void fill(HostTensor& dst, const Norm* norm, int64_t e_begin, int64_t e_end, int64_t y0,
            int64_t x0) const {
    const Shape& xs = x->shape();
    const Shape& ds = dst.shape();
    const int64_t C = xs[1], H = xs[3], W = xs[4];
    const int64_t wh = ds[3], ww = ds[4], frames = e_end - e_begin;
    const int64_t jobs = C * frames;
    const int64_t xa = std::max<int64_t>(0, -x0), xb = std::min<int64_t>(ww, W - x0);
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (int64_t job = 0; job < jobs; ++job) {
      const int64_t c = job / frames, e = e_begin + job % frames;
      const float* plane_row0 = nullptr;
      int64_t t = 0;
      bool activate = true;
      if (e < context) {
        if (memory != nullptr) {
          plane_row0 = row_ptr(*memory, c, e, 0);
          activate = false;
        } else {
          plane_row0 = row_ptr(*x, c, 0, 0);
        }
      } else {
        t = e - context;
        plane_row0 = row_ptr(*x, c, t, 0);
      }
      for (int64_t i = 0; i < wh; ++i) {
        float* d = row_ptr(dst, c, e - e_begin, i);
        const int64_t yy = y0 + i;
        if (yy < 0 || yy >= H || xb <= xa) {
          std::memset(d, 0, static_cast<size_t>(ww) * sizeof(float));
          continue;
        }
        const float* srow = plane_row0 + yy * W + x0;
        for (int64_t j = 0; j < xa; ++j) d[j] = 0.f;
        if (activate && norm != nullptr) {
          for (int64_t j = xa; j < xb; ++j) d[j] = norm->apply(srow[j], t, c);
        } else {
          std::memcpy(d + xa, srow + xa, static_cast<size_t>(xb - xa) * sizeof(float));
        }
        for (int64_t j = xb; j < ww; ++j) d[j] = 0.f;
      }
    }
  }
};

}  // namespace

int64_t ExactTiledVae::tiles_for(int64_t h, int64_t w, int64_t full_h, int64_t full_w) const {
  const int64_t lh = balanced_tile(h, ceil_div(options_.tile_h * h, full_h));
  const int64_t lw = balanced_tile(w, ceil_div(options_.tile_w * w, full_w));
  return static_cast<int64_t>(uniform_starts(h, lh).size() * uniform_starts(w, lw).size());
}

Result<HostTensor> ExactTiledVae::conv(const HostTensor& x, const NormAct* norm,
                                       const ConvSpec& spec, ExactStreamState& state,
                                       ExactContext& ctx) {
  const HostTensor* hw_param = host_param(spec.prefix + ".weight");
  if (hw_param == nullptr) return not_found("exact tiling: the weights lack " + spec.prefix);
  const Shape& ws = hw_param->shape();
  const Shape& xs = x.shape();
  if (ws.rank() != 5 || ws[1] != xs[1]) {
    return invalid_argument("exact tiling: " + spec.prefix + " expects " + std::to_string(ws[1]) +
                            " input channels, got " + xs.to_string());
  }
  const int64_t cout = ws[0], kt = ws[2], kh = ws[3], kw = ws[4];
  const int64_t C = xs[1], T = xs[2], H = xs[3], W = xs[4];
  const int64_t sh = spec.stride_hw, sw = spec.stride_hw, st = spec.stride_t;
  const int64_t pt = spec.downsample_pad ? 0 : kh / 2, pb = spec.downsample_pad ? 1 : kh / 2;
  const int64_t pl = spec.downsample_pad ? 0 : kw / 2, pr = spec.downsample_pad ? 1 : kw / 2;
  const int64_t ho = (H + pt + pb - kh) / sh + 1, wo = (W + pl + pr - kw) / sw + 1;
  // Temporal context: kT - 1 replicated frames on the first chunk, the stored kT - sT frames
  // later (as InflatedCausalConv3d / VaeModel::causal_conv do).
  ExtSource src;
  src.x = &x;
  src.context = kt - 1;
  if (kt > 1 && state.started) {
    auto it = state.memory.find(spec.prefix);
    if (it == state.memory.end()) {
      return internal_error("exact tiling: causal memory of " + spec.prefix +
                            " is missing in a continued stream");
    }
    src.memory = &it->second;
    src.context = it->second.shape()[2];
  }
  const int64_t text = src.context + T;
  if (text < kt || ho < 1 || wo < 1) {
    return invalid_argument("exact tiling: input " + xs.to_string() + " is too small for " +
                            spec.prefix);
  }
  const int64_t to = (text - kt) / st + 1;

  SEEDVAE_ASSIGN_OR_RETURN(Tensor wt, weight(spec.prefix + ".weight"));
  SEEDVAE_ASSIGN_OR_RETURN(Tensor bt, weight(spec.prefix + ".bias"));
  Tensor wsc, bsc;
  if (!spec.shortcut.empty()) {
    SEEDVAE_ASSIGN_OR_RETURN(wsc, weight(spec.shortcut + ".weight"));
    SEEDVAE_ASSIGN_OR_RETURN(bsc, weight(spec.shortcut + ".bias"));
  }

  // The tile scaled to this layer's resolution, balanced so the shifted last tile overlaps least.
  const int64_t lh = balanced_tile(ho, ceil_div(options_.tile_h * ho, spec.full_h));
  const int64_t lw = balanced_tile(wo, ceil_div(options_.tile_w * wo, spec.full_w));
  const std::vector<int64_t> rows = uniform_starts(ho, lh), cols = uniform_starts(wo, lw);
  const int64_t th = std::min(lh, ho), tw = std::min(lw, wo);
  const int64_t win_h = (th - 1) * sh + kh, win_w = (tw - 1) * sw + kw;

  SEEDVAE_ASSIGN_OR_RETURN(HostTensor out,
                           HostTensor::create(DType::kF32, Shape{1, cout, to, ho, wo}));
  SEEDVAE_ASSIGN_OR_RETURN(HostTensor window,
                           HostTensor::create(DType::kF32, Shape{1, C, text, win_h, win_w}));
  Conv3dParams cp;
  cp.stride_t = static_cast<int>(st);
  cp.stride_h = static_cast<int>(sh);
  cp.stride_w = static_cast<int>(sw);
  const int64_t total = static_cast<int64_t>(rows.size() * cols.size());
  for (int64_t oy : rows) {
    for (int64_t ox : cols) {
      if (ctx.cancel) SEEDVAE_TRY(ctx.cancel->check());
      src.fill(window, norm, 0, text, oy * sh - pt, ox * sw - pl);
      SEEDVAE_ASSIGN_OR_RETURN(Tensor xt, backend_.upload(window));
      SEEDVAE_ASSIGN_OR_RETURN(Tensor y, backend_.conv3d(xt, wt, bt, cp));
      xt = {};
      if (spec.residual != nullptr) {
        const Shape& rs = spec.residual->shape();
        if (rs[2] != to || rs[3] != ho || rs[4] != wo) {
          return internal_error("exact tiling: residual " + rs.to_string() + " does not match " +
                                spec.prefix);
        }
        SEEDVAE_ASSIGN_OR_RETURN(Tensor r, backend_.upload(crop(*spec.residual, oy, ox, th, tw)));
        if (!spec.shortcut.empty()) {
          SEEDVAE_ASSIGN_OR_RETURN(r, backend_.conv3d(r, wsc, bsc, {}));
        }
        SEEDVAE_TRY(backend_.add_inplace(y, r));
      }
      SEEDVAE_ASSIGN_OR_RETURN(HostTensor yh, backend_.download(y));
      y = {};
      paste(out, yh, oy, ox);
      if (spec.final_layer) {
        const Rect px{oy, ox, th, tw};
        const int64_t index = static_cast<int64_t>(
            (std::find(rows.begin(), rows.end(), oy) - rows.begin()) * cols.size() +
            (std::find(cols.begin(), cols.end(), ox) - cols.begin()));
        if (ctx.report) {
          auto& rep = *ctx.report;
          if (rep.tile_sums.size() < static_cast<size_t>(total)) {
            rep.tile_sums.assign(static_cast<size_t>(total), std::vector<double>(cout, 0.0));
            rep.tile_counts.assign(static_cast<size_t>(total), 0);
          }
          auto& sums = rep.tile_sums[static_cast<size_t>(index)];
          const int64_t per_c = yh.numel() / cout;
          for (int64_t c = 0; c < cout; ++c) {
            double s = 0;
            const float* p = yh.data<float>() + c * per_c;
            for (int64_t i = 0; i < per_c; ++i) s += p[i];
            sums[static_cast<size_t>(c)] += s;
          }
          rep.tile_counts[static_cast<size_t>(index)] += per_c;
          if (rep.rects.size() < static_cast<size_t>(total)) {
            rep.rects.assign(static_cast<size_t>(total), Rect{});
            rep.output_rects.assign(static_cast<size_t>(total), Rect{});
          }
          rep.rects[static_cast<size_t>(index)] = px;
          rep.output_rects[static_cast<size_t>(index)] = px;
        }
        if (ctx.on_tile) {
          TileEvent ev;
          ev.index = index;
          ev.total = total;
          ev.chunk = ctx.chunk;
          ev.first_frame = ctx.first_frame;
          ev.pixel = px;
          ev.latent = {oy / 8, ox / 8, ceil_div(oy + th, 8) - oy / 8,
                       ceil_div(ox + tw, 8) - ox / 8};
          ev.data = &yh;
          SEEDVAE_TRY(ctx.on_tile(ev));
        }
      }
      SEEDVAE_TRY(step_done(ctx));
    }
  }
  // Causal memory: the last kT - sT frames of the extended (activated) input, whole frame.
  const int64_t keep = kt > 1 ? kt - st : 0;
  if (keep > 0) {
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor mem,
                             HostTensor::create(DType::kF32, Shape{1, C, keep, H, W}));
    src.fill(mem, norm, text - keep, text, 0, 0);
    state.memory[spec.prefix] = std::move(mem);
  }
  return out;
}

Result<HostTensor> ExactTiledVae::resnet(const HostTensor& x, const std::string& p, int64_t full_h,
                                         int64_t full_w, ExactStreamState& state,
                                         ExactContext& ctx) {
  SEEDVAE_ASSIGN_OR_RETURN(NormAct n1, norm_for(x, p + ".norm1", true));
  ConvSpec c1;
  c1.prefix = p + ".conv1";
  c1.full_h = full_h;
  c1.full_w = full_w;
  SEEDVAE_ASSIGN_OR_RETURN(HostTensor h, conv(x, &n1, c1, state, ctx));
  SEEDVAE_ASSIGN_OR_RETURN(NormAct n2, norm_for(h, p + ".norm2", true));
  ConvSpec c2;
  c2.prefix = p + ".conv2";
  c2.full_h = full_h;
  c2.full_w = full_w;
  c2.residual = &x;
  if (host_param(p + ".conv_shortcut.weight") != nullptr) c2.shortcut = p + ".conv_shortcut";
  SEEDVAE_ASSIGN_OR_RETURN(HostTensor out, conv(h, &n2, c2, state, ctx));
  release_weights();
  return out;
}

Result<HostTensor> ExactTiledVae::attention(const HostTensor& x, const std::string& a) {
  AttentionWeights aw;
  SEEDVAE_ASSIGN_OR_RETURN(aw.norm_weight, weight(a + ".group_norm.weight"));
  SEEDVAE_ASSIGN_OR_RETURN(aw.norm_bias, weight(a + ".group_norm.bias"));
  SEEDVAE_ASSIGN_OR_RETURN(aw.wq, weight(a + ".to_q.weight"));
  SEEDVAE_ASSIGN_OR_RETURN(aw.bq, weight(a + ".to_q.bias"));
  SEEDVAE_ASSIGN_OR_RETURN(aw.wk, weight(a + ".to_k.weight"));
  SEEDVAE_ASSIGN_OR_RETURN(aw.bk, weight(a + ".to_k.bias"));
  SEEDVAE_ASSIGN_OR_RETURN(aw.wv, weight(a + ".to_v.weight"));
  SEEDVAE_ASSIGN_OR_RETURN(aw.bv, weight(a + ".to_v.bias"));
  SEEDVAE_ASSIGN_OR_RETURN(aw.wo, weight(a + ".to_out.0.weight"));
  SEEDVAE_ASSIGN_OR_RETURN(aw.bo, weight(a + ".to_out.0.bias"));
  aw.groups = weights_.config.norm_groups;
  aw.eps = weights_.config.norm_eps;
  SEEDVAE_ASSIGN_OR_RETURN(Tensor xt, backend_.upload(x));
  SEEDVAE_ASSIGN_OR_RETURN(Tensor y, backend_.attention(xt, aw));
  xt = {};
  SEEDVAE_ASSIGN_OR_RETURN(HostTensor out, backend_.download(y));
  release_weights();
  return out;
}

Result<HostTensor> ExactTiledVae::upsample(const HostTensor& x, const std::string& p, bool temporal,
                                           int64_t full_h, int64_t full_w, ExactStreamState& state,
                                           ExactContext& ctx) {
  const Shape& s = x.shape();
  const int64_t C = s[1], T = s[2], H = s[3], W = s[4];
  const int z = temporal ? 2 : 1;
  const bool drop = temporal && !state.started;
  SEEDVAE_ASSIGN_OR_RETURN(Tensor wu, weight(p + ".upscale_conv.weight"));
  SEEDVAE_ASSIGN_OR_RETURN(Tensor bu, weight(p + ".upscale_conv.bias"));
  SEEDVAE_ASSIGN_OR_RETURN(
      HostTensor u,
      HostTensor::create(DType::kF32, Shape{1, C, T * z - (drop ? 1 : 0), 2 * H, 2 * W}));
  const int64_t lh = balanced_tile(H, ceil_div(options_.tile_h * H, full_h));
  const int64_t lw = balanced_tile(W, ceil_div(options_.tile_w * W, full_w));
  const int64_t th = std::min(lh, H), tw = std::min(lw, W);
  for (int64_t oy : uniform_starts(H, lh)) {
    for (int64_t ox : uniform_starts(W, lw)) {
      if (ctx.cancel) SEEDVAE_TRY(ctx.cancel->check());
      SEEDVAE_ASSIGN_OR_RETURN(Tensor xt, backend_.upload(crop(x, oy, ox, th, tw)));
      SEEDVAE_ASSIGN_OR_RETURN(Tensor y, backend_.conv3d(xt, wu, bu, {}));
      xt = {};
      SEEDVAE_ASSIGN_OR_RETURN(y, backend_.depth_to_space(y, z, drop));
      SEEDVAE_ASSIGN_OR_RETURN(HostTensor yh, backend_.download(y));
      y = {};
      paste(u, yh, 2 * oy, 2 * ox);
      SEEDVAE_TRY(step_done(ctx));
    }
  }
  ConvSpec cs;
  cs.prefix = p + ".conv";
  cs.full_h = full_h;
  cs.full_w = full_w;
  SEEDVAE_ASSIGN_OR_RETURN(HostTensor out, conv(u, nullptr, cs, state, ctx));
  release_weights();
  return out;
}

Result<HostTensor> ExactTiledVae::decode_chunk(const HostTensor& z_in, ExactStreamState& state,
                                               ExactContext& ctx) {
  const VaeConfig& c = weights_.config;
  const Shape& zs = z_in.shape();
  if (zs.rank() != 5 || zs[0] != 1 || zs[1] != c.latent_channels || zs[2] < 1) {
    return invalid_argument("decoder input must be [1, " + std::to_string(c.latent_channels) +
                            ", t, h, w], got " + zs.to_string());
  }
  const HostTensor z = z_in.dtype() == DType::kF32 ? z_in : z_in.to(DType::kF32);
  const int64_t full_h = zs[3] * c.spatial_factor(), full_w = zs[4] * c.spatial_factor();
  ConvSpec cin;
  cin.prefix = "decoder.conv_in";
  cin.full_h = full_h;
  cin.full_w = full_w;
  SEEDVAE_ASSIGN_OR_RETURN(HostTensor h, conv(z, nullptr, cin, state, ctx));
  release_weights();
  SEEDVAE_ASSIGN_OR_RETURN(h, resnet(h, "decoder.mid_block.resnets.0", full_h, full_w, state, ctx));
  SEEDVAE_ASSIGN_OR_RETURN(h, attention(h, "decoder.mid_block.attentions.0"));
  SEEDVAE_TRY(step_done(ctx));
  SEEDVAE_ASSIGN_OR_RETURN(h, resnet(h, "decoder.mid_block.resnets.1", full_h, full_w, state, ctx));
  for (int l = 0; l < c.levels(); ++l) {
    const std::string p = "decoder.up_blocks." + std::to_string(l);
    for (int j = 0; j < c.layers_per_block + 1; ++j) {
      SEEDVAE_ASSIGN_OR_RETURN(
          h, resnet(h, p + ".resnets." + std::to_string(j), full_h, full_w, state, ctx));
    }
    if (l < c.levels() - 1) {
      SEEDVAE_ASSIGN_OR_RETURN(h, upsample(h, p + ".upsamplers.0", c.decoder_temporal_up(l), full_h,
                                           full_w, state, ctx));
    }
  }
  SEEDVAE_ASSIGN_OR_RETURN(NormAct n, norm_for(h, "decoder.conv_norm_out", true));
  ConvSpec cout;
  cout.prefix = "decoder.conv_out";
  cout.full_h = full_h;
  cout.full_w = full_w;
  cout.final_layer = true;
  SEEDVAE_ASSIGN_OR_RETURN(HostTensor out, conv(h, &n, cout, state, ctx));
  release_weights();
  state.started = true;
  return out;
}

Result<HostTensor> ExactTiledVae::encode_chunk(const HostTensor& x_in, ExactStreamState& state,
                                               ExactContext& ctx) {
  const VaeConfig& c = weights_.config;
  const Shape& xs = x_in.shape();
  if (xs.rank() != 5 || xs[0] != 1 || xs[1] != c.in_channels) {
    return invalid_argument("encoder input must be [1, " + std::to_string(c.in_channels) +
                            ", T, H, W], got " + xs.to_string());
  }
  const int64_t t = xs[2];
  const int f = c.temporal_factor();
  if (!state.started ? (t % f != 1 % f) : (t % f != 0)) {
    return invalid_argument("encoder chunk of " + std::to_string(t) + " frames: the first chunk " +
                            "needs 4k+1 frames, later chunks 4k");
  }
  if (xs[3] % c.spatial_factor() || xs[4] % c.spatial_factor()) {
    return invalid_argument("frame size " + std::to_string(xs[4]) + "x" + std::to_string(xs[3]) +
                            " is not a multiple of " + std::to_string(c.spatial_factor()));
  }
  const HostTensor x = x_in.dtype() == DType::kF32 ? x_in : x_in.to(DType::kF32);
  const int64_t full_h = xs[3], full_w = xs[4];
  ConvSpec cin;
  cin.prefix = "encoder.conv_in";
  cin.full_h = full_h;
  cin.full_w = full_w;
  SEEDVAE_ASSIGN_OR_RETURN(HostTensor h, conv(x, nullptr, cin, state, ctx));
  release_weights();
  for (int l = 0; l < c.levels(); ++l) {
    const std::string p = "encoder.down_blocks." + std::to_string(l);
    for (int j = 0; j < c.layers_per_block; ++j) {
      SEEDVAE_ASSIGN_OR_RETURN(
          h, resnet(h, p + ".resnets." + std::to_string(j), full_h, full_w, state, ctx));
    }
    if (l < c.levels() - 1) {
      ConvSpec ds;
      ds.prefix = p + ".downsamplers.0.conv";
      ds.stride_t = c.encoder_temporal_down(l) ? 2 : 1;
      ds.stride_hw = 2;
      ds.downsample_pad = true;
      ds.full_h = full_h;
      ds.full_w = full_w;
      SEEDVAE_ASSIGN_OR_RETURN(h, conv(h, nullptr, ds, state, ctx));
      release_weights();
    }
  }
  SEEDVAE_ASSIGN_OR_RETURN(h, resnet(h, "encoder.mid_block.resnets.0", full_h, full_w, state, ctx));
  SEEDVAE_ASSIGN_OR_RETURN(h, attention(h, "encoder.mid_block.attentions.0"));
  SEEDVAE_TRY(step_done(ctx));
  SEEDVAE_ASSIGN_OR_RETURN(h, resnet(h, "encoder.mid_block.resnets.1", full_h, full_w, state, ctx));
  SEEDVAE_ASSIGN_OR_RETURN(NormAct n, norm_for(h, "encoder.conv_norm_out", true));
  ConvSpec co;
  co.prefix = "encoder.conv_out";
  co.full_h = full_h;
  co.full_w = full_w;
  co.final_layer = true;
  SEEDVAE_ASSIGN_OR_RETURN(HostTensor out, conv(h, &n, co, state, ctx));
  release_weights();
  state.started = true;
  return out;
}

int64_t ExactTiledVae::decode_steps(int64_t lh, int64_t lw) const {
  const VaeConfig& c = weights_.config;
  const int64_t fh = lh * c.spatial_factor(), fw = lw * c.spatial_factor();
  int64_t h = lh, w = lw;
  int64_t n = tiles_for(h, w, fh, fw) * 5 + 1;  // conv_in, 4 mid convs, attention
  for (int l = 0; l < c.levels(); ++l) {
    n += tiles_for(h, w, fh, fw) * 2 * (c.layers_per_block + 1);
    if (l < c.levels() - 1) {
      n += tiles_for(h, w, fh, fw);  // upscale tiles
      h *= 2;
      w *= 2;
      n += tiles_for(h, w, fh, fw);  // upsampler conv
    }
  }
  return n + tiles_for(h, w, fh, fw);  // conv_out
}

int64_t ExactTiledVae::encode_steps(int64_t fh, int64_t fw) const {
  const VaeConfig& c = weights_.config;
  int64_t h = fh, w = fw;
  int64_t n = tiles_for(h, w, fh, fw);  // conv_in
  for (int l = 0; l < c.levels(); ++l) {
    n += tiles_for(h, w, fh, fw) * 2 * c.layers_per_block;
    if (l < c.levels() - 1) {
      h /= 2;
      w /= 2;
      n += tiles_for(h, w, fh, fw);
    }
  }
  return n + tiles_for(h, w, fh, fw) * 5 + 1;  // mid convs, attention, conv_out
}

}  // namespace seedvae
