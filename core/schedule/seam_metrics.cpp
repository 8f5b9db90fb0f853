#include "core/schedule/seam_metrics.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

namespace seedvae {

namespace {

Rect clip(const Rect& r, int64_t h, int64_t w) {
  const int64_t y0 = std::clamp<int64_t>(r.y, 0, h), x0 = std::clamp<int64_t>(r.x, 0, w);
  const int64_t y1 = std::clamp<int64_t>(r.y_end(), 0, h),
                x1 = std::clamp<int64_t>(r.x_end(), 0, w);
  return {y0, x0, y1 - y0, x1 - x0};
}

Status check_5d(const HostTensor& t, const char* what) {
  if (t.shape().rank() != 5 || t.dtype() != DType::kF32) {
    return invalid_argument(std::string("seam metrics: ") + what +
                            " must be an fp32 [N, C, T, H, W] tensor, got " +
                            t.shape().to_string());
  }
  return Status::ok();
}

// Per-channel sum of `t` (minus `ref` if given) over rectangle r, all frames, added to `sums`.
void add_region_sums(const HostTensor& t, const HostTensor* ref, const Rect& r,
                     std::vector<double>& sums) {
  const Shape& s = t.shape();
  sums.resize(static_cast<size_t>(s[1]), 0.0);
  if (r.area() == 0) return;
  for (int64_t c = 0; c < s[1]; ++c) {
    double sum = 0;
    for (int64_t f = 0; f < s[2]; ++f) {
      const int64_t plane = (c * s[2] + f) * s[3] * s[4];
      for (int64_t y = r.y; y < r.y_end(); ++y) {
        const float* a = t.data<float>() + plane + y * s[4];
        const float* b = ref ? ref->data<float>() + plane + y * s[4] : nullptr;
        for (int64_t x = r.x; x < r.x_end(); ++x)
          sum += b ? static_cast<double>(a[x]) - b[x] : a[x];
      }
    }
    sums[static_cast<size_t>(c)] += sum;
  }
}

}  // namespace

// Masks of adjacent pairs lying across a tile border: vertical borders (pair (x-1, x) of row y)
// and horizontal borders (pair (y-1, y) of column x).
void SeamAccumulator::set_borders(int64_t h, int64_t w, const std::vector<Rect>& rects) {
  h_ = h;
  w_ = w;
  rects_ = rects;
  across_x_.assign(static_cast<size_t>(h * w), 0);
  across_y_.assign(static_cast<size_t>(h * w), 0);
  if (rects.size() < 2) return;
  for (const Rect& r0 : rects) {
    const Rect r = clip(r0, h, w);
    if (r.area() == 0) continue;
    for (int64_t x : {r.x, r.x_end()}) {
      if (x <= 0 || x >= w) continue;
      for (int64_t y = r.y; y < r.y_end(); ++y) across_x_[static_cast<size_t>(y * w + x)] = 1;
    }
    for (int64_t y : {r.y, r.y_end()}) {
      if (y <= 0 || y >= h) continue;
      for (int64_t x = r.x; x < r.x_end(); ++x) across_y_[static_cast<size_t>(y * w + x)] = 1;
    }
  }
}

void SeamAccumulator::add_energy(const HostTensor& img, Energy& e) const {
  const Shape& s = img.shape();
  const int64_t h = s[3], w = s[4];
  const int64_t planes = s[0] * s[1] * s[2];
  const float* base = img.data<float>();
  for (int64_t p = 0; p < planes; ++p) {
    const float* v = base + p * h * w;
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t x = 0; x < w; ++x) {
        const auto i = static_cast<size_t>(y * w + x);
        if (x > 0) {
          const double d = std::abs(static_cast<double>(v[i]) - v[i - 1]);
          if (across_x_[i]) {
            e.seam += d;
            ++e.seam_n;
          } else {
            e.interior += d;
            ++e.interior_n;
          }
        }
        if (y > 0) {
          const double d = std::abs(static_cast<double>(v[i]) - v[i - static_cast<size_t>(w)]);
          if (across_y_[i]) {
            e.seam += d;
            ++e.seam_n;
          } else {
            e.interior += d;
            ++e.interior_n;
          }
        }
      }
    }
  }
}

double SeamAccumulator::Energy::ratio() const {
  if (seam_n == 0 || interior_n == 0) return 1.0;
  const double in = interior / static_cast<double>(interior_n);
  return in > 0 ? (seam / static_cast<double>(seam_n)) / in : 1.0;
}

Status SeamAccumulator::add(const HostTensor& output, const std::vector<Rect>& output_rects,
                            const HostTensor* reference) {
  SEEDVAE_TRY(check_5d(output, "output"));
  const Shape& s = output.shape();
  if (reference) {
    SEEDVAE_TRY(check_5d(*reference, "reference"));
    if (reference->shape() != s) {
      return invalid_argument("seam metrics: the reference " + reference->shape().to_string() +
                              " does not match the output " + s.to_string());
    }
  }
  if (frames_ == 0) {
    set_borders(s[3], s[4], output_rects);
    channels_ = s[1];
    has_reference_ = reference != nullptr;
  } else if (s[1] != channels_ || s[3] != h_ || s[4] != w_ || output_rects != rects_ ||
             has_reference_ != (reference != nullptr)) {
    return invalid_argument("seam metrics: frames of " + s.to_string() +
                            " do not continue the frames added before");
  }
  add_energy(output, energy_);
  if (reference) {
    add_energy(*reference, reference_energy_);
    const float* a = output.data<float>();
    const float* b = reference->data<float>();
    const int64_t n = output.numel();
    for (int64_t i = 0; i < n; ++i) {
      const double d = std::abs(static_cast<double>(a[i]) - b[i]);
      max_abs_ = std::max(max_abs_, d);
      sum_abs_ += d;
      sum_sq_ += d * d;
    }
    elements_ += n;
  }
  output_sums_.resize(rects_.size());
  offset_sums_.resize(reference ? rects_.size() : 0);
  for (size_t i = 0; i < rects_.size(); ++i) {
    const Rect r = clip(rects_[i], h_, w_);
    add_region_sums(output, nullptr, r, output_sums_[i]);
    if (reference) add_region_sums(output, reference, r, offset_sums_[i]);
  }
  frames_ += s[0] * s[2];
  return Status::ok();
}

Result<SeamMetrics> SeamAccumulator::result(const TileRunReport* report) const {
  if (frames_ == 0) return invalid_argument("seam metrics: no frames were added");
  SeamMetrics m;
  m.seam_energy = energy_.ratio();
  m.seam_gradient = energy_.seam_n ? energy_.seam / static_cast<double>(energy_.seam_n) : 0.0;
  m.interior_gradient =
      energy_.interior_n ? energy_.interior / static_cast<double>(energy_.interior_n) : 0.0;
  m.seam_pairs = energy_.seam_n;
  m.interior_pairs = energy_.interior_n;
  m.tiles = report ? report->rects : rects_;
  if (!report) return m;
  if (has_reference_) {
    m.has_reference = true;
    m.max_abs = max_abs_;
    m.rms = elements_ ? std::sqrt(sum_sq_ / static_cast<double>(elements_)) : 0.0;
    m.mean_abs = elements_ ? sum_abs_ / static_cast<double>(elements_) : 0.0;
    m.reference_seam_energy = reference_energy_.ratio();
  }
  for (size_t i = 0; i < rects_.size(); ++i) {
    TileSeamStat t;
    t.index = static_cast<int64_t>(i);
    t.rect = i < report->rects.size() ? report->rects[i] : rects_[i];
    t.output_rect = clip(rects_[i], h_, w_);
    const double n = static_cast<double>(t.output_rect.area() * frames_);
    auto mean = [&](const std::vector<double>& sums) {
      std::vector<double> out(static_cast<size_t>(channels_), 0.0);
      if (n > 0) {
        for (size_t c = 0; c < out.size() && c < sums.size(); ++c) out[c] = sums[c] / n;
      }
      return out;
    };
    if (has_reference_) t.offset_vs_reference = mean(offset_sums_[i]);
    if (i < report->tile_sums.size() && i < report->tile_counts.size() &&
        report->tile_counts[i] > 0 && !report->tile_sums[i].empty()) {
      const std::vector<double> final_mean = mean(output_sums_[i]);
      t.offset_vs_output.resize(report->tile_sums[i].size());
      for (size_t c = 0; c < t.offset_vs_output.size() && c < final_mean.size(); ++c) {
        t.offset_vs_output[c] =
            report->tile_sums[i][c] / static_cast<double>(report->tile_counts[i]) - final_mean[c];
      }
    }
    for (double v : t.offset_vs_reference)
      m.max_tile_offset = std::max(m.max_tile_offset, std::abs(v));
    for (double v : t.offset_vs_output)
      m.max_tile_offset = std::max(m.max_tile_offset, std::abs(v));
    m.per_tile.push_back(std::move(t));
  }
  return m;
}

const std::vector<Rect>& seam_output_rects(const TileRunReport& report) {
  return report.output_rects.empty() ? report.rects : report.output_rects;
}

Result<SeamMetrics> seam_energy(const HostTensor& image, const std::vector<Rect>& output_rects) {
  SeamAccumulator acc;
  SEEDVAE_TRY(acc.add(image, output_rects));
  SeamMetrics m;
  SEEDVAE_ASSIGN_OR_RETURN(m, acc.result(nullptr));
  m.tiles = output_rects;
  return m;
}

Result<SeamMetrics> seam_metrics(const HostTensor& output, const TileRunReport& report,
                                 const HostTensor* reference) {
  SeamAccumulator acc;
  SEEDVAE_TRY(acc.add(output, seam_output_rects(report), reference));
  return acc.result(&report);
}

std::string seam_metrics_json(const SeamMetrics& m) {
  using nlohmann::json;
  auto rect = [](const Rect& r) { return json{{"x", r.x}, {"y", r.y}, {"w", r.w}, {"h", r.h}}; };
  json j;
  j["has_reference"] = m.has_reference;
  if (m.has_reference) {
    j["max_abs"] = m.max_abs;
    j["rms"] = m.rms;
    j["mean_abs"] = m.mean_abs;
    j["reference_seam_energy"] = m.reference_seam_energy;
  }
  j["seam_energy"] = m.seam_energy;
  j["seam_gradient"] = m.seam_gradient;
  j["interior_gradient"] = m.interior_gradient;
  j["seam_pairs"] = m.seam_pairs;
  j["interior_pairs"] = m.interior_pairs;
  j["max_tile_offset"] = m.max_tile_offset;
  j["tiles"] = json::array();
  for (const Rect& r : m.tiles) j["tiles"].push_back(rect(r));
  j["per_tile"] = json::array();
  for (const TileSeamStat& t : m.per_tile) {
    json o{{"index", t.index}, {"rect", rect(t.rect)}, {"output_rect", rect(t.output_rect)}};
    if (!t.offset_vs_reference.empty()) o["offset_vs_reference"] = t.offset_vs_reference;
    if (!t.offset_vs_output.empty()) o["offset_vs_output"] = t.offset_vs_output;
    j["per_tile"].push_back(std::move(o));
  }
  return j.dump();
}

}  // namespace seedvae
