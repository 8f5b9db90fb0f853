#include "core/schedule/tile_plan.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace seedvae {

std::string_view tile_layout_name(TileLayout layout) {
  return layout == TileLayout::kReference ? "reference" : "uniform";
}

namespace {

// docs/model.md §5, one axis: the upstream loop `for y in range(0, extent, stride)` with the skip
// of tiles lying inside the previous tile's overlap.
AxisPlan reference_axis(int64_t extent, int64_t tile_px, int64_t overlap_px, int scale) {
  AxisPlan a;
  a.extent = extent;
  a.tile = std::max<int64_t>(1, tile_px / scale);
  a.overlap = std::max<int64_t>(0, std::min(overlap_px / scale, a.tile - 1));
  a.stride = std::max<int64_t>(1, a.tile - a.overlap);
  a.ramp_px = std::max<int64_t>(0, overlap_px);
  for (int64_t y = 0; y < extent; y += a.stride) {
    const int64_t end = std::min(y + a.tile, extent);
    if (y > 0 && end - y <= a.overlap) continue;
    a.starts.push_back(y);
    a.ends.push_back(end);
  }
  return a;
}

Result<AxisPlan> uniform_axis(int64_t extent, int64_t tile_px, int64_t overlap_px, int scale,
                              const char* axis) {
  const auto px = [&](int64_t v) { return std::to_string(v) + " px"; };
  if (tile_px < scale) {
    return invalid_argument(std::string("uniform tiling: tile ") + axis + " " + px(tile_px) +
                            " is smaller than one latent (" + px(scale) + ")");
  }
  if (overlap_px < 0) {
    return invalid_argument(std::string("uniform tiling: overlap ") + axis + " " + px(overlap_px) +
                            " is negative");
  }
  AxisPlan a;
  a.extent = extent;
  a.tile = tile_px / scale;
  a.overlap = (overlap_px + scale - 1) / scale;  // at least the requested pixels
  if (a.overlap >= a.tile) {
    return invalid_argument(std::string("uniform tiling: tile ") + axis + " " + px(tile_px) + " (" +
                            std::to_string(a.tile) + " latents) must be larger than its " +
                            "overlap " + px(overlap_px) + " (" + std::to_string(a.overlap) +
                            " latents): tiles smaller than the overlap allows are refused");
  }
  a.stride = a.tile - a.overlap;
  a.ramp_px = overlap_px;
  a.starts = uniform_starts(extent, a.tile, a.overlap);
  const int64_t t = std::min(a.tile, extent);
  for (int64_t s : a.starts) a.ends.push_back(s + t);
  return a;
}

// Ramp position of a transition window [w0, w0 + len): 0 before, cosine (sampled at pixel
// centres, so r_i + r_{len-1-i} = 1 exactly in real arithmetic) inside, 1 after.
double window_step(int64_t p, int64_t w0, int64_t len) {
  if (p < w0) return 0.0;
  if (p >= w0 + len) return 1.0;
  return 0.5 - 0.5 * std::cos(std::numbers::pi * (static_cast<double>(p - w0) + 0.5) /
                              static_cast<double>(len));
}

// Uniform layout: one transition window per neighbour pair, centred in the pair's common region,
// min(ramp, overlap) long, made disjoint and ordered (so the weights telescope to exactly one).
std::vector<std::pair<int64_t, int64_t>> uniform_windows(const AxisPlan& a, int64_t unit,
                                                         int64_t ramp) {
  std::vector<std::pair<int64_t, int64_t>> win;  // (start, length) in units
  int64_t prev_end = 0;
  for (size_t k = 0; k + 1 < a.starts.size(); ++k) {
    const int64_t lo = a.starts[k + 1] * unit;  // common region [lo, hi)
    const int64_t hi = a.ends[k] * unit;
    const int64_t ov = std::max<int64_t>(0, hi - lo);
    int64_t len = std::min(ramp, ov);
    int64_t w0 = lo + (ov - len) / 2;
    const int64_t w1 = w0 + len;
    if (w0 < prev_end) {
      w0 = std::min(prev_end, w1);
      len = w1 - w0;
    }
    win.emplace_back(w0, len);
    prev_end = w0 + len;
  }
  return win;
}

}  // namespace

std::vector<int64_t> uniform_starts(int64_t extent, int64_t tile, int64_t overlap) {
  std::vector<int64_t> s;
  if (extent <= 0) return s;
  if (tile <= 0 || extent <= tile) {
    s.push_back(0);
    return s;
  }
  const int64_t stride = std::max<int64_t>(1, tile - std::max<int64_t>(0, overlap));
  int64_t y = 0;
  s.push_back(y);
  while (y + tile < extent) {
    y += stride;
    if (y + tile >= extent) y = extent - tile;  // shift the last tile inward
    s.push_back(y);
  }
  return s;
}

int64_t balanced_tile(int64_t extent, int64_t tile) {
  if (extent <= 0) return 0;
  tile = std::clamp<int64_t>(tile, 1, extent);
  const int64_t n = (extent + tile - 1) / tile;
  return (extent + n - 1) / n;
}

std::vector<double> cosine_ramp(int64_t n) {
  std::vector<double> r(static_cast<size_t>(std::max<int64_t>(0, n)));
  for (int64_t i = 0; i < n; ++i) {
    const double t = n == 1 ? 0.0 : static_cast<double>(i) / static_cast<double>(n - 1);
    r[static_cast<size_t>(i)] = 0.5 - 0.5 * std::cos(t * std::numbers::pi);
  }
  return r;
}

Result<TilePlan> make_tile_plan(int64_t latent_h, int64_t latent_w, const TileSpec& spec,
                                TileLayout layout, int scale) {
  if (latent_h < 1 || latent_w < 1) {
    return invalid_argument("tile plan: frame of " + std::to_string(latent_w) + "x" +
                            std::to_string(latent_h) + " latents is empty");
  }
  if (scale < 1) return invalid_argument("tile plan: scale must be >= 1");
  TilePlan p;
  p.layout = layout;
  p.scale = scale;
  p.spec = spec;
  if (layout == TileLayout::kReference) {
    p.rows = reference_axis(latent_h, spec.tile_h, spec.overlap_h, scale);
    p.cols = reference_axis(latent_w, spec.tile_w, spec.overlap_w, scale);
  } else {
    SEEDVAE_ASSIGN_OR_RETURN(p.rows,
                             uniform_axis(latent_h, spec.tile_h, spec.overlap_h, scale, "height"));
    SEEDVAE_ASSIGN_OR_RETURN(p.cols,
                             uniform_axis(latent_w, spec.tile_w, spec.overlap_w, scale, "width"));
  }
  for (int64_t r = 0; r < p.rows.count(); ++r) {
    for (int64_t c = 0; c < p.cols.count(); ++c) {
      PlannedTile t;
      t.index = static_cast<int64_t>(p.tiles.size());
      t.row = r;
      t.col = c;
      const auto ri = static_cast<size_t>(r), ci = static_cast<size_t>(c);
      t.latent = {p.rows.starts[ri], p.cols.starts[ci], p.rows.ends[ri] - p.rows.starts[ri],
                  p.cols.ends[ci] - p.cols.starts[ci]};
      t.pixel = {t.latent.y * scale, t.latent.x * scale, t.latent.h * scale, t.latent.w * scale};
      p.tiles.push_back(t);
    }
  }
  return p;
}

std::string TilePlan::describe() const {
  auto s = std::to_string(rows.count()) + "x" + std::to_string(cols.count()) + " tiles of " +
           std::to_string(rows.tile) + "x" + std::to_string(cols.tile) + " latents (" +
           std::to_string(rows.tile * scale) + "x" + std::to_string(cols.tile * scale) +
           " px), overlap " + std::to_string(rows.overlap) + "x" + std::to_string(cols.overlap) +
           " latents, " + std::string(tile_layout_name(layout)) + " layout";
  return s;
}

std::vector<float> axis_blend_weights(const TilePlan& plan, bool along_rows, int64_t k,
                                      BlendSpace space) {
  const AxisPlan& a = along_rows ? plan.rows : plan.cols;
  if (k < 0 || k >= a.count()) return {};
  const int64_t unit = space == BlendSpace::kPixels ? plan.scale : 1;
  const auto kk = static_cast<size_t>(k);
  const int64_t start = a.starts[kk] * unit;
  const int64_t n = (a.ends[kk] - a.starts[kk]) * unit;
  std::vector<float> w(static_cast<size_t>(n), 1.f);
  if (plan.layout == TileLayout::kReference) {
    // Upstream: ramp over the requested pixel overlap (decode) or the latent overlap (encode);
    // ov = min(ramp, n - 1); fade in at interior starts, then fade out at interior ends
    // (overwriting where they meet).
    const int64_t ramp_len = space == BlendSpace::kPixels ? a.ramp_px : a.overlap;
    const int64_t ov = std::max<int64_t>(0, std::min(ramp_len, n - 1));
    if (ov > 0) {
      const std::vector<double> ramp = cosine_ramp(ramp_len);
      if (a.starts[kk] > 0) {
        for (int64_t i = 0; i < ov; ++i)
          w[static_cast<size_t>(i)] = static_cast<float>(ramp[static_cast<size_t>(i)]);
      }
      if (a.ends[kk] < a.extent) {
        for (int64_t i = 0; i < ov; ++i) {
          w[static_cast<size_t>(n - ov + i)] =
              static_cast<float>(1.0 - ramp[static_cast<size_t>(i)]);
        }
      }
    }
    return w;
  }
  // Uniform: partition of unity from the transition windows.
  const int64_t ramp = space == BlendSpace::kPixels ? a.ramp_px : a.overlap;
  const auto win = uniform_windows(a, unit, ramp);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = start + i;
    double v = 1.0;
    if (k > 0) v *= window_step(p, win[kk - 1].first, win[kk - 1].second);
    if (k + 1 < a.count()) v *= 1.0 - window_step(p, win[kk].first, win[kk].second);
    w[static_cast<size_t>(i)] = static_cast<float>(v);
  }
  return w;
}

}  // namespace seedvae
