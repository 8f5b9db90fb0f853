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

struct Energy {
  double seam = 0, interior = 0;
  int64_t seam_n = 0, interior_n = 0;
  double ratio() const {
    if (seam_n == 0 || interior_n == 0) return 1.0;
    const double in = interior / static_cast<double>(interior_n);
    return in > 0 ? (seam / static_cast<double>(seam_n)) / in : 1.0;
  }
};

// Masks of adjacent pairs lying across a tile border: vertical borders (pair (x-1, x) of row y)
// and horizontal borders (pair (y-1, y) of column x).
struct SeamMasks {
  int64_t h = 0, w = 0;
  std::vector<uint8_t> across_x;  // [h][w]: pair (x-1, x) at index y*w + x, x >= 1
  std::vector<uint8_t> across_y;  // [h][w]: pair (y-1, y) at index y*w + x, y >= 1
};

SeamMasks seam_masks(int64_t h, int64_t w, const std::vector<Rect>& rects) {
  SeamMasks m;
  m.h = h;
  m.w = w;
  m.across_x.assign(static_cast<size_t>(h * w), 0);
  m.across_y.assign(static_cast<size_t>(h * w), 0);
  if (rects.size() < 2) return m;
  for (const Rect& r0 : rects) {
    const Rect r = clip(r0, h, w);
    if (r.area() == 0) continue;
    for (int64_t x : {r.x, r.x_end()}) {
      if (x <= 0 || x >= w) continue;
      for (int64_t y = r.y; y < r.y_end(); ++y) m.across_x[static_cast<size_t>(y * w + x)] = 1;
    }
    for (int64_t y : {r.y, r.y_end()}) {
      if (y <= 0 || y >= h) continue;
      for (int64_t x = r.x; x < r.x_end(); ++x) m.across_y[static_cast<size_t>(y * w + x)] = 1;
    }
  }
  return m;
}

Energy energy(const HostTensor& img, const SeamMasks& m) {
  Energy e;
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
          if (m.across_x[i]) {
            e.seam += d;
            ++e.seam_n;
          } else {
            e.interior += d;
            ++e.interior_n;
          }
        }
        if (y > 0) {
          const double d = std::abs(static_cast<double>(v[i]) - v[i - static_cast<size_t>(w)]);
          if (m.across_y[i]) {
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
  return e;
}

// Per-channel mean of `t` (minus `ref` if given) over rectangle r, all frames.
std::vector<double> region_mean(const HostTensor& t, const HostTensor* ref, const Rect& r) {
  const Shape& s = t.shape();
  std::vector<double> out(static_cast<size_t>(s[1]), 0.0);
  if (r.area() == 0) return out;
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
    out[static_cast<size_t>(c)] = sum / static_cast<double>(r.area() * s[2]);
  }
  return out;
}

Status check_5d(const HostTensor& t, const char* what) {
  if (t.shape().rank() != 5 || t.dtype() != DType::kF32) {
    return invalid_argument(std::string("seam metrics: ") + what +
                            " must be an fp32 [N, C, T, H, W] tensor, got " +
                            t.shape().to_string());
  }
  return Status::ok();
}

}  // namespace

Result<SeamMetrics> seam_energy(const HostTensor& image, const std::vector<Rect>& output_rects) {
  SEEDVAE_TRY(check_5d(image, "image"));
  SeamMetrics m;
  const Shape& s = image.shape();
  const Energy e = energy(image, seam_masks(s[3], s[4], output_rects));
  m.seam_energy = e.ratio();
  m.seam_gradient = e.seam_n ? e.seam / static_cast<double>(e.seam_n) : 0.0;
  m.interior_gradient = e.interior_n ? e.interior / static_cast<double>(e.interior_n) : 0.0;
  m.seam_pairs = e.seam_n;
  m.interior_pairs = e.interior_n;
  m.tiles = output_rects;
  return m;
}

Result<SeamMetrics> seam_metrics(const HostTensor& output, const TileRunReport& report,
                                 const HostTensor* reference) {
  SEEDVAE_TRY(check_5d(output, "output"));
  const std::vector<Rect>& out_rects =
      report.output_rects.empty() ? report.rects : report.output_rects;
  SEEDVAE_ASSIGN_OR_RETURN(SeamMetrics m, seam_energy(output, out_rects));
  m.tiles = report.rects;
  const Shape& s = output.shape();
  if (reference != nullptr) {
    SEEDVAE_TRY(check_5d(*reference, "reference"));
    SEEDVAE_ASSIGN_OR_RETURN(DiffStats d, compare(output, *reference));
    m.has_reference = true;
    m.max_abs = d.max_abs;
    m.rms = d.rms;
    m.mean_abs = d.mean_abs;
    m.reference_seam_energy = energy(*reference, seam_masks(s[3], s[4], out_rects)).ratio();
  }
  for (size_t i = 0; i < out_rects.size(); ++i) {
    TileSeamStat t;
    t.index = static_cast<int64_t>(i);
    t.rect = i < report.rects.size() ? report.rects[i] : out_rects[i];
    t.output_rect = clip(out_rects[i], s[3], s[4]);
    if (reference) t.offset_vs_reference = region_mean(output, reference, t.output_rect);
    if (i < report.tile_sums.size() && i < report.tile_counts.size() && report.tile_counts[i] > 0 &&
        !report.tile_sums[i].empty()) {
      const std::vector<double> final_mean = region_mean(output, nullptr, t.output_rect);
      t.offset_vs_output.resize(report.tile_sums[i].size());
      for (size_t c = 0; c < t.offset_vs_output.size() && c < final_mean.size(); ++c) {
        t.offset_vs_output[c] =
            report.tile_sums[i][c] / static_cast<double>(report.tile_counts[i]) - final_mean[c];
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
