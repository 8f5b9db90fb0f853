#include "core/schedule/exact_tiling.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <vector>

#include "core/cpu/rms_norm.h"
#include "core/vae/vae_model.h"
#include "core/vae/wan_model.h"

namespace seedvae {

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Bytes of the host's whole-frame tensors, now and at their peak.
struct HostCounter {
  int64_t current = 0, peak = 0;
};

// A whole-frame activation in host memory: fp32, contiguous [1, C, T, H, W] (empty in a dry run,
// where only its bytes are counted).
class HostFrames final : public Storage {
 public:
  HostFrames(HostTensor data, int64_t bytes, std::shared_ptr<HostCounter> counter)
      : data(std::move(data)), bytes_(bytes), counter_(std::move(counter)) {
    counter_->current += bytes_;
    counter_->peak = std::max(counter_->peak, counter_->current);
  }
  ~HostFrames() override { counter_->current -= bytes_; }
  HostTensor data;

 private:
  int64_t bytes_;
  std::shared_ptr<HostCounter> counter_;
};

// A normalisation (+ SiLU) applied on read: per-frame GroupNorm with statistics of the whole
// frame, in the CPU backend's form y = (x - mean) * (rstd * gamma) + beta, or the Wan RMS norm of
// every position over its channels, in the CPU kernel's arithmetic (core/cpu/rms_norm.h).
struct NormAct {
  bool rms = false;
  int64_t channels = 0, groups = 1;
  std::vector<float> mean;   // GroupNorm: [frames * groups]
  std::vector<float> scale;  // GroupNorm: [frames * channels]
  std::vector<float> shift;  // GroupNorm: beta [channels]; RMS norm: gamma [channels] or empty
  // RMS norm: 1 / max(||x||, eps) of every position, [1, 1, frames, H, W], and sqrt(channels)
  std::shared_ptr<const HostFrames> inv;
  float rms_scale = 1.f;
  bool silu = false;

  float apply(float v, int64_t t, int64_t c) const {
    const int64_t g = c / (channels / groups);
    float y = (v - mean[static_cast<size_t>(t * groups + g)]) *
                  scale[static_cast<size_t>(t * channels + c)] +
              shift[static_cast<size_t>(c)];
    if (silu) y = y / (1.f + std::exp(-y));
    return y;
  }

  // The n activated values of a row of channel c, frame t, whose first position in the frame is
  // `pos` (y * W + x).
  void apply_row(const float* x, float* y, int64_t n, int64_t t, int64_t c, int64_t pos) const {
    if (rms) {
      const Shape& s = inv->data.shape();
      const float* f = inv->data.data<float>() + t * s[3] * s[4] + pos;
      cpu::rms_apply(x, f, n, rms_scale, shift.empty() ? nullptr : &shift[static_cast<size_t>(c)],
                     silu, y);
      return;
    }
    for (int64_t j = 0; j < n; ++j) y[j] = apply(x[j], t, c);
  }
};

// group_norm's result: `source` (HostFrames) normalised on read.
class NormView final : public Storage {
 public:
  NormView(std::shared_ptr<Storage> source, NormAct norm)
      : source(std::move(source)), norm(std::move(norm)) {}
  std::shared_ptr<Storage> source;
  NormAct norm;
};

// causal_pad's result: `context` frames in front of `source` (HostFrames or NormView): the frames
// of `memory` (HostFrames, as they are), or copies of the source's (activated) first frame.
class PadView final : public Storage {
 public:
  PadView(std::shared_ptr<Storage> source, std::shared_ptr<Storage> memory, int64_t context)
      : source(std::move(source)), memory(std::move(memory)), context(context) {}
  std::shared_ptr<Storage> source, memory;
  int64_t context;
};

// A parameter: the caller's host tensor (referenced) or a copy; uploaded to the device when a
// layer needs it.
class HostWeight final : public Storage {
 public:
  const HostTensor* host = nullptr;
  HostTensor owned;
  std::string name;
  Shape shape;
  const HostTensor& values() const { return host ? *host : owned; }
};

// What a tensor of this backend reads as: frames [0, context) from `memory` as they are (or the
// activated frame 0 of `src` when there is no memory), then the frames of `src`, activated by
// `norm` when given.
struct View {
  const HostTensor* src = nullptr;
  const NormAct* norm = nullptr;
  const HostTensor* memory = nullptr;
  int64_t context = 0;
};

// Element (c, t, y, 0) of a [1, C, T, H, W] fp32 host tensor.
inline const float* row_ptr(const HostTensor& t, int64_t c, int64_t f, int64_t y) {
  const Shape& s = t.shape();
  return t.data<float>() + ((c * s[2] + f) * s[3] + y) * s[4];
}
inline float* row_ptr(HostTensor& t, int64_t c, int64_t f, int64_t y) {
  const Shape& s = t.shape();
  return t.data<float>() + ((c * s[2] + f) * s[3] + y) * s[4];
}

// Writes frames [e_begin, e_end) of `v` (channels C, frame H x W), region [y0, y0 + h) x
// [x0, x0 + w) of each (zero outside the frame), into frames [d0, d0 + e_end - e_begin) of `dst`
// [1, C, Td, h, w].
void fill(const View& v, HostTensor& dst, int64_t d0, int64_t e_begin, int64_t e_end, int64_t y0,
          int64_t x0) {
  const Shape& xs = v.src->shape();
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
    if (e < v.context) {
      if (v.memory != nullptr) {
        plane_row0 = row_ptr(*v.memory, c, e, 0);
        activate = false;
      } else {
        plane_row0 = row_ptr(*v.src, c, 0, 0);
      }
    } else {
      t = e - v.context;
      plane_row0 = row_ptr(*v.src, c, t, 0);
    }
    for (int64_t i = 0; i < wh; ++i) {
      float* d = row_ptr(dst, c, d0 + e - e_begin, i);
      const int64_t yy = y0 + i;
      if (yy < 0 || yy >= H || xb <= xa) {
        std::memset(d, 0, static_cast<size_t>(ww) * sizeof(float));
        continue;
      }
      const float* srow = plane_row0 + yy * W + x0;
      for (int64_t j = 0; j < xa; ++j) d[j] = 0.f;
      if (activate && v.norm != nullptr) {
        v.norm->apply_row(srow + xa, d + xa, xb - xa, t, c, yy * W + x0 + xa);
      } else {
        std::memcpy(d + xa, srow + xa, static_cast<size_t>(xb - xa) * sizeof(float));
      }
      for (int64_t j = xb; j < ww; ++j) d[j] = 0.f;
    }
  }
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

// Wan2.2's patchify of plain tensors, or with `inverse` its inverse: channel k = c*p*p + dx*p + dy
// of the patchified tensor at (i, j) is pixel (p*i + dy, p*j + dx) of channel c.
void patchify_plain(const HostTensor& x, HostTensor& y, int p, bool inverse) {
  const Shape& ps = inverse ? x.shape() : y.shape();  // the patchified tensor's
  const int64_t T = ps[2], h = ps[3], w = ps[4], jobs = ps[1] * T * h;
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
  for (int64_t job = 0; job < jobs; ++job) {
    const int64_t k = job / (T * h), t = (job / h) % T, i = job % h;
    const int64_t c = k / (p * p), dx = (k / p) % p, dy = k % p;
    if (inverse) {
      const float* s = row_ptr(x, k, t, i);
      float* d = row_ptr(y, c, t, p * i + dy) + dx;
      for (int64_t j = 0; j < w; ++j) d[p * j] = s[j];
    } else {
      const float* s = row_ptr(x, c, t, p * i + dy) + dx;
      float* d = row_ptr(y, k, t, i);
      for (int64_t j = 0; j < w; ++j) d[j] = s[p * j];
    }
  }
}

// The statistics of every (frame, group) of x over the whole frame, two passes in double like the
// CPU backend: the mean, then squared deviations from the float mean with the exact correction
// for the mean's rounding.
Result<NormAct> norm_statistics(const HostTensor& x, const HostTensor& gamma_any,
                                const HostTensor& beta_any, int groups, float eps, bool silu) {
  const Shape& s = x.shape();
  NormAct n;
  n.channels = s[1];
  n.groups = groups;
  n.silu = silu;
  const int64_t frames = s[2];
  const HostTensor gamma = gamma_any.to(DType::kF32), beta = beta_any.to(DType::kF32);
  const int64_t cg = n.channels / n.groups;
  const int64_t hw = s[3] * s[4];
  const int64_t count = cg * hw;
  try {
    n.mean.assign(static_cast<size_t>(frames * n.groups), 0.f);
    n.scale.assign(static_cast<size_t>(frames * n.channels), 0.f);
    n.shift.assign(beta.f32().begin(), beta.f32().end());
  } catch (const std::bad_alloc&) {
    return out_of_memory("exact tiling: out of memory for the GroupNorm statistics of " +
                         s.to_string());
  }
  const auto eps_d = static_cast<double>(eps);
  const int64_t jobs = frames * n.groups;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1)
#endif
  for (int64_t job = 0; job < jobs; ++job) {
    const int64_t t = job / n.groups, gi = job % n.groups;
    double sum = 0;
    for (int64_t c = gi * cg; c < (gi + 1) * cg; ++c) {
      const float* p = row_ptr(x, c, t, 0);
      double part = 0;
      for (int64_t i = 0; i < hw; ++i) part += p[i];
      sum += part;
    }
    const double mean_d = sum / static_cast<double>(count);
    const auto mean = static_cast<float>(mean_d);
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
    const double rstd = 1.0 / std::sqrt(var + eps_d);
    n.mean[static_cast<size_t>(job)] = mean;
    for (int64_t c = gi * cg; c < (gi + 1) * cg; ++c) {
      n.scale[static_cast<size_t>(t * n.channels + c)] =
          static_cast<float>(rstd * static_cast<double>(gamma.f32()[static_cast<size_t>(c)]));
    }
  }
  return n;
}

}  // namespace

struct ExactTilingBackend::Impl {
  const VaeWeights* weights = nullptr;
  CountingBackend* dry = nullptr;
  std::shared_ptr<HostCounter> host = std::make_shared<HostCounter>();
  std::map<std::string, Tensor> device_weights;  // on the device now, by name
  int64_t full_h = 0, full_w = 0;

  // A new whole-frame tensor (zero-filled; shape only in a dry run).
  Result<Tensor> frames(const Shape& shape) {
    Tensor t;
    t.shape = shape;
    t.dtype = DType::kF32;
    const int64_t bytes = shape.numel() * 4;
    if (dry) {
      t.storage = std::make_shared<HostFrames>(HostTensor(), bytes, host);
      return t;
    }
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor data, HostTensor::create(DType::kF32, shape));
    t.storage = std::make_shared<HostFrames>(std::move(data), bytes, host);
    return t;
  }

  static HostFrames* host_frames(const Tensor& t) {
    return dynamic_cast<HostFrames*>(t.storage.get());
  }

  Result<HostWeight*> weight(const Tensor& t, std::string_view op) const {
    auto* w = dynamic_cast<HostWeight*>(t.storage.get());
    if (w == nullptr) {
      return invalid_argument(std::string(op) + ": a parameter was not made by upload_weight");
    }
    return w;
  }

  Result<View> view(const Tensor& t, std::string_view op) const {
    const Storage* s = t.storage.get();
    View v;
    if (const auto* pad = dynamic_cast<const PadView*>(s)) {
      v.context = pad->context;
      if (pad->memory) v.memory = &static_cast<const HostFrames*>(pad->memory.get())->data;
      s = pad->source.get();
    }
    if (const auto* norm = dynamic_cast<const NormView*>(s)) {
      v.norm = &norm->norm;
      s = norm->source.get();
    }
    const auto* frames = dynamic_cast<const HostFrames*>(s);
    if (frames == nullptr) {
      return invalid_argument(std::string(op) + ": the tensor was not made by this backend");
    }
    v.src = &frames->data;
    return v;
  }

  // t as a plain whole-frame tensor: itself, or its view written out.
  Result<Tensor> materialise(const Tensor& t, std::string_view op) {
    if (host_frames(t) != nullptr) return t;
    SEEDVAE_ASSIGN_OR_RETURN(const View v, view(t, op));
    SEEDVAE_ASSIGN_OR_RETURN(Tensor out, frames(t.shape));
    if (!dry) fill(v, host_frames(out)->data, 0, 0, t.shape[2], 0, 0);
    return out;
  }

  // Puts the parameters `needed` on the device (and, unless `keep`, takes every other one off).
  Status on_device(const std::vector<const HostWeight*>& needed, bool keep, Backend& device) {
    if (!keep) {
      for (auto it = device_weights.begin(); it != device_weights.end();) {
        const bool wanted = std::any_of(needed.begin(), needed.end(),
                                        [&](const HostWeight* w) { return w->name == it->first; });
        it = wanted ? std::next(it) : device_weights.erase(it);
      }
    }
    for (const HostWeight* w : needed) {
      if (device_weights.count(w->name)) continue;
      if (dry) {
        device_weights.emplace(w->name, dry->declare_weight(w->shape));
      } else {
        SEEDVAE_ASSIGN_OR_RETURN(Tensor t, device.upload_weight(w->values(), w->name));
        device_weights.emplace(w->name, std::move(t));
      }
    }
    return Status::ok();
  }
  const Tensor& device_weight(const HostWeight* w) const { return device_weights.at(w->name); }
};

ExactTilingBackend::ExactTilingBackend(Backend& device, ExactTilingOptions options,
                                       const VaeWeights* weights)
    : ExactTilingBackend(device, options, weights, nullptr) {}

ExactTilingBackend::ExactTilingBackend(Backend& device, ExactTilingOptions options,
                                       const VaeWeights* weights, CountingBackend* dry)
    : device_(device), options_(options), impl_(std::make_unique<Impl>()) {
  impl_->weights = weights;
  impl_->dry = dry;
}

std::unique_ptr<ExactTilingBackend> ExactTilingBackend::dry_run(CountingBackend& device,
                                                                ExactTilingOptions options) {
  return std::unique_ptr<ExactTilingBackend>(
      new ExactTilingBackend(device, options, nullptr, &device));
}

ExactTilingBackend::~ExactTilingBackend() = default;

void ExactTilingBackend::set_frame(int64_t height, int64_t width) {
  impl_->full_h = height;
  impl_->full_w = width;
}

void ExactTilingBackend::set_hooks(Hooks hooks) {
  hooks_ = std::move(hooks);
}

int64_t ExactTilingBackend::host_bytes() const {
  return impl_->host->current;
}
int64_t ExactTilingBackend::host_peak_bytes() const {
  return impl_->host->peak;
}

std::string ExactTilingBackend::name() const {
  return "exact tiles " + std::to_string(options_.tile_w) + "x" + std::to_string(options_.tile_h) +
         " on " + device_.name();
}

void ExactTilingBackend::reset_peak() {
  device_.reset_peak();
  impl_->host->peak = impl_->host->current;
}

Tensor ExactTilingBackend::declare_weight(const Shape& shape, const std::string& name) {
  auto w = std::make_shared<HostWeight>();
  w->name = name;
  w->shape = shape;
  Tensor t;
  t.shape = shape;
  t.dtype = DType::kF32;
  t.storage = std::move(w);
  return t;
}

Tensor ExactTilingBackend::declare(const Shape& shape) {
  Tensor t;
  t.shape = shape;
  t.dtype = DType::kF32;
  t.storage = std::make_shared<HostFrames>(HostTensor(), shape.numel() * 4, impl_->host);
  return t;
}

Result<Tensor> ExactTilingBackend::upload(const HostTensor& host) {
  SEEDVAE_TRY(check_upload(host, "upload"));
  if (impl_->dry) return declare(host.shape());
  Tensor t;
  t.shape = host.shape();
  t.dtype = DType::kF32;
  HostTensor data = host.dtype() == DType::kF32 ? host : host.to(DType::kF32);
  t.storage = std::make_shared<HostFrames>(std::move(data), t.shape.numel() * 4, impl_->host);
  return t;
}

Result<Tensor> ExactTilingBackend::upload_weight(const HostTensor& host, std::string_view name) {
  SEEDVAE_TRY(check_upload(host, "upload_weight(" + std::string(name) + ")"));
  Tensor t = declare_weight(host.shape(), std::string(name));
  auto* w = static_cast<HostWeight*>(t.storage.get());
  if (const VaeWeights* weights = impl_->weights) {
    auto it = weights->tensors.find(w->name);
    if (it != weights->tensors.end() && &it->second == &host) w->host = &it->second;  // no copy
  }
  if (w->host == nullptr) w->owned = host;
  return t;
}

Result<HostTensor> ExactTilingBackend::download(const Tensor& t) {
  SEEDVAE_ASSIGN_OR_RETURN(Tensor m, impl_->materialise(t, "download"));
  if (impl_->dry) return HostTensor::create(DType::kF32, t.shape);
  return Impl::host_frames(m)->data;
}

Result<Tensor> ExactTilingBackend::conv3d(const Tensor& x, const Tensor& w, const Tensor& b,
                                          const Conv3dParams& p) {
  constexpr std::string_view op = "conv3d";
  SEEDVAE_ASSIGN_OR_RETURN(const Shape out_shape, conv3d_output_shape(x.shape, w.shape, p));
  SEEDVAE_TRY(check_conv3d_bias(b, w.shape));
  SEEDVAE_ASSIGN_OR_RETURN(const View v, impl_->view(x, op));
  SEEDVAE_ASSIGN_OR_RETURN(const HostWeight* wh, impl_->weight(w, op));
  std::vector<const HostWeight*> needed{wh};
  const HostWeight* bh = nullptr;
  if (b.defined()) {
    SEEDVAE_ASSIGN_OR_RETURN(bh, impl_->weight(b, op));
    needed.push_back(bh);
  }
  SEEDVAE_TRY(impl_->on_device(needed, options_.keep_weights, device_));
  const Tensor& wd = impl_->device_weight(wh);
  const Tensor bd = bh ? impl_->device_weight(bh) : Tensor{};
  if (impl_->full_h < 1 || impl_->full_w < 1) {
    return internal_error("exact tiling: set_frame() was not called before running");
  }

  const Shape& xs = x.shape;
  const int64_t cin = xs[1], text = xs[2];
  const int64_t kh = w.shape[3], kw = w.shape[4];
  const int64_t sh = p.stride_h, sw = p.stride_w;
  const int64_t ho = out_shape[3], wo = out_shape[4];
  // The tile scaled to this layer's resolution, balanced so the shifted last tile overlaps least.
  const int64_t lh = balanced_tile(ho, ceil_div(options_.tile_h * ho, impl_->full_h));
  const int64_t lw = balanced_tile(wo, ceil_div(options_.tile_w * wo, impl_->full_w));
  const std::vector<int64_t> rows = uniform_starts(ho, lh), cols = uniform_starts(wo, lw);
  const int64_t th = std::min(lh, ho), tw = std::min(lw, wo);
  const Shape window_shape{1, cin, text, (th - 1) * sh + kh, (tw - 1) * sw + kw};
  const auto total = static_cast<int64_t>(rows.size() * cols.size());
  last_conv_tiles_ = total;
  Conv3dParams cp;  // the windows carry the padding
  cp.stride_t = p.stride_t;
  cp.stride_h = p.stride_h;
  cp.stride_w = p.stride_w;
  SEEDVAE_ASSIGN_OR_RETURN(Tensor y, impl_->frames(out_shape));

  if (CountingBackend* dry = impl_->dry) {
    // Every window of the layer has one shape: run one, count the others.
    const double before = dry->flops();
    Tensor xt = dry->declare(window_shape);
    SEEDVAE_ASSIGN_OR_RETURN(Tensor yt, dry->conv3d(xt, wd, bd, cp));
    dry->add_flops((dry->flops() - before) * static_cast<double>(total - 1));
    steps_ += total;
    if (hooks_.report) hooks_.report->tiles_run += total;
    return y;
  }

  HostTensor& out = Impl::host_frames(y)->data;
  SEEDVAE_ASSIGN_OR_RETURN(HostTensor window, HostTensor::create(DType::kF32, window_shape));
  const bool final_layer = !hooks_.final_weight.empty() && hooks_.final_weight == wh->name;
  const int64_t cout = out_shape[1];
  for (size_t ri = 0; ri < rows.size(); ++ri) {
    for (size_t ci = 0; ci < cols.size(); ++ci) {
      const int64_t oy = rows[ri], ox = cols[ci];
      if (hooks_.cancel) SEEDVAE_TRY(hooks_.cancel->check());
      fill(v, window, 0, 0, text, oy * sh - p.pad_top, ox * sw - p.pad_left);
      SEEDVAE_ASSIGN_OR_RETURN(Tensor xt, device_.upload(window));
      SEEDVAE_ASSIGN_OR_RETURN(Tensor yt, device_.conv3d(xt, wd, bd, cp));
      xt = {};
      SEEDVAE_ASSIGN_OR_RETURN(HostTensor yh, device_.download(yt));
      yt = {};
      paste(out, yh, oy, ox);
      if (final_layer) {
        const auto index = static_cast<int64_t>(ri * cols.size() + ci);
        const int64_t k = hooks_.output_scale;
        const Rect px{oy * k, ox * k, th * k, tw * k};
        if (TileRunReport* rep = hooks_.report) {
          if (rep->tile_sums.size() < static_cast<size_t>(total)) {
            rep->tile_sums.assign(static_cast<size_t>(total), std::vector<double>(cout, 0.0));
            rep->tile_counts.assign(static_cast<size_t>(total), 0);
            rep->rects.assign(static_cast<size_t>(total), Rect{});
            rep->output_rects.assign(static_cast<size_t>(total), Rect{});
          }
          auto& sums = rep->tile_sums[static_cast<size_t>(index)];
          const int64_t per_c = yh.numel() / cout;
          for (int64_t c = 0; c < cout; ++c) {
            double s = 0;
            const float* q = yh.data<float>() + c * per_c;
            for (int64_t i = 0; i < per_c; ++i) s += q[i];
            sums[static_cast<size_t>(c)] += s;
          }
          rep->tile_counts[static_cast<size_t>(index)] += per_c;
          rep->rects[static_cast<size_t>(index)] = px;
          rep->output_rects[static_cast<size_t>(index)] = px;
        }
        if (hooks_.on_tile) {
          TileEvent ev;
          ev.index = index;
          ev.total = total;
          ev.chunk = hooks_.chunk;
          ev.first_frame = hooks_.first_frame;
          ev.pixel = px;
          const int64_t f = hooks_.spatial_factor;
          ev.latent = {px.y / f, px.x / f, ceil_div(px.y + px.h, f) - px.y / f,
                       ceil_div(px.x + px.w, f) - px.x / f};
          ev.data = &yh;
          SEEDVAE_TRY(hooks_.on_tile(ev));
        }
      }
      ++steps_;
      if (hooks_.report) ++hooks_.report->tiles_run;
      if (hooks_.progress) {
        hooks_.progress->report(hooks_.stage, steps_, std::max(steps_, hooks_.steps_total));
      }
    }
  }
  return y;
}

Result<Tensor> ExactTilingBackend::causal_pad(const Tensor& x, const Tensor* memory, int frames) {
  SEEDVAE_ASSIGN_OR_RETURN(const Shape out,
                           causal_pad_shape(x.shape, memory ? &memory->shape : nullptr, frames));
  Tensor src = x;
  if (dynamic_cast<const PadView*>(x.storage.get()) != nullptr) {
    SEEDVAE_ASSIGN_OR_RETURN(src, impl_->materialise(x, "causal_pad"));
  }
  SEEDVAE_TRY(impl_->view(src, "causal_pad").take_status());
  std::shared_ptr<Storage> mem;
  if (memory != nullptr) {
    SEEDVAE_ASSIGN_OR_RETURN(Tensor m, impl_->materialise(*memory, "causal_pad"));
    mem = m.storage;
  }
  Tensor t;
  t.shape = out;
  t.dtype = DType::kF32;
  t.storage = std::make_shared<PadView>(src.storage, std::move(mem), out[2] - x.shape[2]);
  return t;
}

Result<Tensor> ExactTilingBackend::slice_frames(const Tensor& x, int64_t begin, int64_t end) {
  SEEDVAE_ASSIGN_OR_RETURN(const Shape out, slice_frames_shape(x.shape, begin, end));
  SEEDVAE_ASSIGN_OR_RETURN(const View v, impl_->view(x, "slice_frames"));
  SEEDVAE_ASSIGN_OR_RETURN(Tensor y, impl_->frames(out));
  if (!impl_->dry) fill(v, Impl::host_frames(y)->data, 0, begin, end, 0, 0);
  return y;
}

Status ExactTilingBackend::copy_frames_into(Tensor& dst, int64_t dst_frame, const Tensor& src,
                                            int64_t src_frame, int64_t count) {
  SEEDVAE_TRY(check_frame_copy(dst.shape, dst_frame, src.shape, src_frame, count));
  HostFrames* d = Impl::host_frames(dst);
  if (d == nullptr) {
    return unsupported("exact tiling copies frames into whole-frame tensors only, not into views");
  }
  SEEDVAE_ASSIGN_OR_RETURN(const View v, impl_->view(src, "copy_frames_into"));
  if (!impl_->dry) fill(v, d->data, dst_frame, src_frame, src_frame + count, 0, 0);
  return Status::ok();
}

Result<Tensor> ExactTilingBackend::concat_frames(const Tensor& a, const Tensor& b) {
  SEEDVAE_ASSIGN_OR_RETURN(const Shape out, concat_frames_shape(a.shape, b.shape));
  SEEDVAE_ASSIGN_OR_RETURN(const View va, impl_->view(a, "concat_frames"));
  SEEDVAE_ASSIGN_OR_RETURN(const View vb, impl_->view(b, "concat_frames"));
  SEEDVAE_ASSIGN_OR_RETURN(Tensor y, impl_->frames(out));
  if (!impl_->dry) {
    fill(va, Impl::host_frames(y)->data, 0, 0, a.shape[2], 0, 0);
    fill(vb, Impl::host_frames(y)->data, a.shape[2], 0, b.shape[2], 0, 0);
  }
  return y;
}

Result<Tensor> ExactTilingBackend::group_norm(const Tensor& x, const Tensor& gamma,
                                              const Tensor& beta, const GroupNormParams& p) {
  constexpr std::string_view op = "group_norm";
  SEEDVAE_TRY(check_group_norm(x.shape, gamma, beta, p));
  if (!gamma.defined() || !beta.defined()) {
    return invalid_argument("group_norm: exact tiling needs the affine parameters");
  }
  SEEDVAE_ASSIGN_OR_RETURN(const HostWeight* g, impl_->weight(gamma, op));
  SEEDVAE_ASSIGN_OR_RETURN(const HostWeight* bt, impl_->weight(beta, op));
  SEEDVAE_ASSIGN_OR_RETURN(const Tensor source, impl_->materialise(x, op));
  NormAct norm;
  if (!impl_->dry) {
    SEEDVAE_ASSIGN_OR_RETURN(norm, norm_statistics(Impl::host_frames(source)->data, g->values(),
                                                   bt->values(), p.groups, p.eps, p.silu));
  }
  Tensor t;
  t.shape = x.shape;
  t.dtype = DType::kF32;
  t.storage = std::make_shared<NormView>(source.storage, std::move(norm));
  return t;
}

Status ExactTilingBackend::add_inplace(Tensor& acc, const Tensor& x) {
  SEEDVAE_TRY(check_add(acc.shape, x.shape));
  HostFrames* a = Impl::host_frames(acc);
  if (a == nullptr) return unsupported("add_inplace: exact tiling adds into whole-frame tensors");
  SEEDVAE_ASSIGN_OR_RETURN(const Tensor addend, impl_->materialise(x, "add_inplace"));
  if (impl_->dry) return Status::ok();
  float* d = a->data.data<float>();
  const float* s = Impl::host_frames(addend)->data.data<float>();
  const int64_t n = acc.shape.numel();
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
  for (int64_t i = 0; i < n; ++i) d[i] += s[i];
  return Status::ok();
}

// Upsample3D's rearrangement (docs/model.md §2.1): input channel k = ((ih*2 + iw)*Z + it)*C + c
// of frame f goes to output channel c, frame f*Z + it, pixel (2h + ih, 2w + iw); frame 1 is
// dropped when asked. A copy, so the host does it.
Result<Tensor> ExactTilingBackend::depth_to_space(const Tensor& x, int z, bool drop_frame_1, int) {
  SEEDVAE_ASSIGN_OR_RETURN(const Shape out, depth_to_space_shape(x.shape, z, drop_frame_1));
  SEEDVAE_ASSIGN_OR_RETURN(const Tensor in, impl_->materialise(x, "depth_to_space"));
  SEEDVAE_ASSIGN_OR_RETURN(Tensor y, impl_->frames(out));
  if (impl_->dry) return y;
  const HostTensor& src = Impl::host_frames(in)->data;
  HostTensor& dst = Impl::host_frames(y)->data;
  const int64_t C = out[1], T = x.shape[2], H = x.shape[3], W = x.shape[4];
  const int64_t jobs = C * T * z;
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
  for (int64_t job = 0; job < jobs; ++job) {
    const int64_t c = job / (T * z), f = (job / z) % T, it = job % z;
    int64_t of = f * z + it;
    if (drop_frame_1) {
      if (of == 1) continue;
      if (of > 1) --of;
    }
    for (int64_t ih = 0; ih < 2; ++ih) {
      for (int64_t iw = 0; iw < 2; ++iw) {
        const int64_t k = ((ih * 2 + iw) * z + it) * C + c;
        for (int64_t h = 0; h < H; ++h) {
          const float* s = row_ptr(src, k, f, h);
          float* d = row_ptr(dst, c, of, 2 * h + ih) + iw;
          for (int64_t w = 0; w < W; ++w) d[2 * w] = s[w];
        }
      }
    }
  }
  return y;
}

Result<Tensor> ExactTilingBackend::run_untiled(
    const Tensor& x, std::string_view op, const std::vector<Tensor*>& params,
    const std::function<Result<Tensor>(Backend&, const Tensor&)>& run) {
  std::vector<const HostWeight*> needed;
  for (const Tensor* t : params) {
    SEEDVAE_ASSIGN_OR_RETURN(const HostWeight* hw, impl_->weight(*t, op));
    needed.push_back(hw);
  }
  SEEDVAE_TRY(impl_->on_device(needed, options_.keep_weights, device_));
  for (size_t i = 0; i < needed.size(); ++i) *params[i] = impl_->device_weight(needed[i]);
  if (hooks_.cancel) SEEDVAE_TRY(hooks_.cancel->check());
  // Global over the frame: the whole (1/64- or, Wan2.2, 1/256-size) latent frame at once.
  SEEDVAE_ASSIGN_OR_RETURN(const Tensor in, impl_->materialise(x, op));
  SEEDVAE_ASSIGN_OR_RETURN(Tensor y, impl_->frames(x.shape));
  ++steps_;
  if (hooks_.report) ++hooks_.report->tiles_run;
  if (CountingBackend* dry = impl_->dry) {
    Tensor xt = dry->declare(x.shape);
    SEEDVAE_TRY(run(*dry, xt).take_status());
    return y;
  }
  SEEDVAE_ASSIGN_OR_RETURN(Tensor xt, device_.upload(Impl::host_frames(in)->data));
  SEEDVAE_ASSIGN_OR_RETURN(Tensor yt, run(device_, xt));
  xt = {};
  SEEDVAE_ASSIGN_OR_RETURN(Impl::host_frames(y)->data, device_.download(yt));
  if (hooks_.progress) {
    hooks_.progress->report(hooks_.stage, steps_, std::max(steps_, hooks_.steps_total));
  }
  return y;
}

Result<Tensor> ExactTilingBackend::attention(const Tensor& x, const AttentionWeights& w) {
  SEEDVAE_TRY(check_attention(x.shape, w));
  AttentionWeights dw = w;  // its parameters replaced by their device copies
  return run_untiled(x, "attention",
                     {&dw.norm_weight, &dw.norm_bias, &dw.wq, &dw.bq, &dw.wk, &dw.bk, &dw.wv,
                      &dw.bv, &dw.wo, &dw.bo},
                     [&](Backend& b, const Tensor& t) { return b.attention(t, dw); });
}

// ---- the Wan VAEs' ops --------------------------------------------------------------------------

Result<Tensor> ExactTilingBackend::zeros(const Shape& shape) {
  SEEDVAE_TRY(check_zeros(shape));
  return impl_->frames(shape);
}

// The RMS norm has no cross-pixel statistics, but it sits where GroupNorm sits (in front of every
// causal convolution, whose window extraction reads it), so it takes the same form: a view read
// while the windows are extracted, which needs only each position's inverse norm, computed here
// over the whole frame (1/C of the tensor), so the normalised tensor never exists whole.
Result<Tensor> ExactTilingBackend::rms_norm(const Tensor& x, const Tensor& gamma,
                                            const RmsNormParams& p) {
  constexpr std::string_view op = "rms_norm";
  SEEDVAE_TRY(check_rms_norm(x.shape, gamma, p));
  const HostWeight* g = nullptr;
  if (gamma.defined()) {
    SEEDVAE_ASSIGN_OR_RETURN(g, impl_->weight(gamma, op));
  }
  SEEDVAE_ASSIGN_OR_RETURN(const Tensor source, impl_->materialise(x, op));
  const Shape& s = x.shape;
  const int64_t channels = s[1], frames = s[2], plane = s[3] * s[4];
  SEEDVAE_ASSIGN_OR_RETURN(Tensor inv, impl_->frames(Shape{1, 1, frames, s[3], s[4]}));
  NormAct norm;
  norm.rms = true;
  norm.channels = channels;
  norm.silu = p.silu;
  if (!impl_->dry) {
    if (g != nullptr) {
      const HostTensor gain = g->values().to(DType::kF32);
      norm.shift.assign(gain.f32().begin(), gain.f32().end());
    }
    norm.rms_scale = cpu::rms_scale(channels);
    const float* src = Impl::host_frames(source)->data.data<float>();
    float* dst = Impl::host_frames(inv)->data.data<float>();
    constexpr int64_t kSpan = 4096;  // positions per job
    const int64_t spans = ceil_div(plane, kSpan), jobs = frames * spans;
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (int64_t job = 0; job < jobs; ++job) {
      const int64_t t = job / spans, i0 = job % spans * kSpan;
      cpu::rms_inverse_norms(src + t * plane + i0, std::min(kSpan, plane - i0), channels,
                             frames * plane, p.eps, dst + t * plane + i0);
    }
  }
  norm.inv = std::static_pointer_cast<const HostFrames>(inv.storage);
  Tensor t;
  t.shape = x.shape;
  t.dtype = DType::kF32;
  t.storage = std::make_shared<NormView>(source.storage, std::move(norm));
  return t;
}

// The resamplers' rearrangements (and AvgDown3D's means) are copies of whole frames, so the host
// does them, as depth_to_space; the arithmetic (AvgDown3D's float sums in expanded-channel order,
// then one multiply) is the CPU kernels' (core/cpu/wan_ops.cpp), so they give the same bits.
Result<Tensor> ExactTilingBackend::upsample_nearest(const Tensor& x) {
  SEEDVAE_ASSIGN_OR_RETURN(const Shape out, upsample_nearest_shape(x.shape));
  SEEDVAE_ASSIGN_OR_RETURN(const Tensor in, impl_->materialise(x, "upsample_nearest"));
  SEEDVAE_ASSIGN_OR_RETURN(Tensor y, impl_->frames(out));
  if (impl_->dry) return y;
  const HostTensor& src = Impl::host_frames(in)->data;
  HostTensor& dst = Impl::host_frames(y)->data;
  const int64_t T = out[2], H = out[3], W = x.shape[4], jobs = out[1] * T * H;
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
  for (int64_t job = 0; job < jobs; ++job) {
    const int64_t c = job / (T * H), f = (job / H) % T, oy = job % H;
    const float* s = row_ptr(src, c, f, oy / 2);
    float* d = row_ptr(dst, c, f, oy);
    for (int64_t w = 0; w < W; ++w) d[2 * w] = d[2 * w + 1] = s[w];
  }
  return y;
}

Result<Tensor> ExactTilingBackend::frames_from_channels(const Tensor& x, int factor) {
  SEEDVAE_ASSIGN_OR_RETURN(const Shape out, frames_from_channels_shape(x.shape, factor));
  SEEDVAE_ASSIGN_OR_RETURN(const Tensor in, impl_->materialise(x, "frames_from_channels"));
  SEEDVAE_ASSIGN_OR_RETURN(Tensor y, impl_->frames(out));
  if (impl_->dry) return y;
  const HostTensor& src = Impl::host_frames(in)->data;
  HostTensor& dst = Impl::host_frames(y)->data;
  const int64_t C = out[1], T = x.shape[2], jobs = C * T * factor;
  const auto bytes = static_cast<size_t>(out[3] * out[4]) * sizeof(float);
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
  for (int64_t job = 0; job < jobs; ++job) {  // y[c, f*t + i] = x[i*C + c, t]
    const int64_t c = job / (T * factor), t = (job / factor) % T, i = job % factor;
    std::memcpy(row_ptr(dst, c, t * factor + i, 0), row_ptr(src, i * C + c, t, 0), bytes);
  }
  return y;
}

Result<Tensor> ExactTilingBackend::patchify(const Tensor& x, int p) {
  SEEDVAE_ASSIGN_OR_RETURN(const Shape out, patchify_shape(x.shape, p));
  SEEDVAE_ASSIGN_OR_RETURN(const Tensor in, impl_->materialise(x, "patchify"));
  SEEDVAE_ASSIGN_OR_RETURN(Tensor y, impl_->frames(out));
  if (impl_->dry) return y;
  patchify_plain(Impl::host_frames(in)->data, Impl::host_frames(y)->data, p, false);
  return y;
}

Result<Tensor> ExactTilingBackend::unpatchify(const Tensor& x, int p) {
  SEEDVAE_ASSIGN_OR_RETURN(const Shape out, unpatchify_shape(x.shape, p));
  SEEDVAE_ASSIGN_OR_RETURN(const Tensor in, impl_->materialise(x, "unpatchify"));
  SEEDVAE_ASSIGN_OR_RETURN(Tensor y, impl_->frames(out));
  if (impl_->dry) return y;
  patchify_plain(Impl::host_frames(in)->data, Impl::host_frames(y)->data, p, true);
  return y;
}

// AvgDownParams: output channel o is the mean of expanded channels o*g .. o*g + g - 1, expanded
// channel k = c*f + (it*fs + ih)*fs + iw reading x[c, t*ft + it - pad, i*fs + ih, j*fs + iw] (the
// `pad` zero frames in front are skipped).
Result<Tensor> ExactTilingBackend::avg_down(const Tensor& x, const AvgDownParams& p) {
  SEEDVAE_ASSIGN_OR_RETURN(const Shape out, avg_down_shape(x.shape, p));
  SEEDVAE_ASSIGN_OR_RETURN(const Tensor in, impl_->materialise(x, "avg_down"));
  SEEDVAE_ASSIGN_OR_RETURN(Tensor y, impl_->frames(out));
  if (impl_->dry) return y;
  const HostTensor& src = Impl::host_frames(in)->data;
  HostTensor& dst = Impl::host_frames(y)->data;
  const int64_t ft = p.ft, fs = p.fs, f = ft * fs * fs, g = x.shape[1] * f / p.out_channels;
  const int64_t To = out[2], Ho = out[3], Wo = out[4], pad = To * ft - x.shape[2];
  const float inv_g = 1.f / static_cast<float>(g);
  const int64_t jobs = p.out_channels * To * Ho;
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
  for (int64_t job = 0; job < jobs; ++job) {
    const int64_t o = job / (To * Ho), to = (job / Ho) % To, i = job % Ho;
    float* d = row_ptr(dst, o, to, i);
    for (int64_t j = 0; j < Wo; ++j) {
      float sum = 0.f;
      for (int64_t k = o * g; k < o * g + g; ++k) {
        const int64_t c = k / f, rem = k % f;
        const int64_t it = rem / (fs * fs), ih = (rem / fs) % fs, iw = rem % fs;
        const int64_t t = to * ft + it - pad;
        if (t < 0) continue;
        sum += row_ptr(src, c, t, i * fs + ih)[j * fs + iw];
      }
      d[j] = sum * inv_g;
    }
  }
  return y;
}

// DupUpParams: y[o, t*ft + it, i*fs + ih, j*fs + iw] = x[(((o*ft + it)*fs + ih)*fs + iw) / r, t,
// i, j], the first ft - 1 output frames dropped with drop_first.
Result<Tensor> ExactTilingBackend::dup_up(const Tensor& x, const DupUpParams& p) {
  SEEDVAE_ASSIGN_OR_RETURN(const Shape out, dup_up_shape(x.shape, p));
  SEEDVAE_ASSIGN_OR_RETURN(const Tensor in, impl_->materialise(x, "dup_up"));
  SEEDVAE_ASSIGN_OR_RETURN(Tensor y, impl_->frames(out));
  if (impl_->dry) return y;
  const HostTensor& src = Impl::host_frames(in)->data;
  HostTensor& dst = Impl::host_frames(y)->data;
  const int64_t ft = p.ft, fs = p.fs, r = p.out_channels * ft * fs * fs / x.shape[1];
  const int64_t drop = p.drop_first ? ft - 1 : 0;
  const int64_t To = out[2], Ho = out[3], Wo = out[4], jobs = p.out_channels * To * Ho;
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
  for (int64_t job = 0; job < jobs; ++job) {
    const int64_t o = job / (To * Ho), of = (job / Ho) % To, oh = job % Ho;
    const int64_t t = (of + drop) / ft, it = (of + drop) % ft, i = oh / fs, ih = oh % fs;
    float* d = row_ptr(dst, o, of, oh);
    for (int64_t ow = 0; ow < Wo; ++ow) {
      const int64_t c = (((o * ft + it) * fs + ih) * fs + ow % fs) / r;
      d[ow] = row_ptr(src, c, t, i)[ow / fs];
    }
  }
  return y;
}

Result<Tensor> ExactTilingBackend::rms_attention(const Tensor& x, const RmsAttentionWeights& w) {
  SEEDVAE_TRY(check_rms_attention(x.shape, w));
  RmsAttentionWeights dw = w;  // its parameters replaced by their device copies
  return run_untiled(x, "rms_attention",
                     {&dw.gamma, &dw.wq, &dw.bq, &dw.wk, &dw.bk, &dw.wv, &dw.bv, &dw.wo, &dw.bo},
                     [&](Backend& b, const Tensor& t) { return b.rms_attention(t, dw); });
}

namespace {

// The tile executions of the last of `chunks` (input frames of each) run through `model` on a dry
// run `tiles` over a `height` x `width` frame.
Result<int64_t> dry_run_steps(ExactTilingBackend& tiles, VideoVae& model, int64_t in_channels,
                              bool encode, int64_t height, int64_t width,
                              const std::vector<int64_t>& chunks) {
  const int sf = model.spatial_factor();
  CausalState state;
  int64_t before = 0;
  for (const int64_t frames : chunks) {
    before = tiles.steps_done();
    const Tensor x =
        tiles.declare(encode ? Shape{1, in_channels, frames, height, width}
                             : Shape{1, model.latent_channels(), frames, height / sf, width / sf});
    SEEDVAE_TRY(
        (encode ? model.encode_chunk(x, state) : model.decode_chunk(x, state)).take_status());
  }
  return tiles.steps_done() - before;
}

}  // namespace

Result<int64_t> exact_steps_per_chunk(const VaeConfig& config, bool encode, int64_t height,
                                      int64_t width, const ExactTilingOptions& options) {
  CountingBackend device;
  auto tiles = ExactTilingBackend::dry_run(device, options);
  tiles->set_frame(height, width);
  SEEDVAE_ASSIGN_OR_RETURN(VaeModel model,
                           VaeModel::create(*tiles, config, [&](const VaeConfig::Param& p) {
                             return Result<Tensor>(tiles->declare_weight(p.shape, p.name));
                           }));
  return dry_run_steps(*tiles, model, config.in_channels, encode, height, width, {1});
}

Result<int64_t> exact_steps_per_chunk(const WanConfig& config, bool encode, int64_t height,
                                      int64_t width, const ExactTilingOptions& options) {
  CountingBackend device;
  auto tiles = ExactTilingBackend::dry_run(device, options);
  tiles->set_frame(height, width);
  SEEDVAE_ASSIGN_OR_RETURN(
      WanModel model,
      WanModel::create(*tiles, config, [&](const std::string& name, const Shape& shape) {
        return Result<Tensor>(tiles->declare_weight(shape, name));
      }));
  // A first chunk's frame 0 bypasses the temporal resamplers: a later chunk (4 frames, 1 latent
  // frame) is the one counted.
  return dry_run_steps(*tiles, model, config.in_channels, encode, height, width,
                       {1, encode ? config.temporal_factor() : 1});
}

}  // namespace seedvae
