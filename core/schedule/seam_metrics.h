// Seam metrics of a tiled run, for `--json` and the UI's tile overlay.
//
//  * With an untiled reference: max / rms / mean |tiled - reference| and, per tile, the mean
//    offset (tiled - reference) per channel over the tile's rectangle (colour drift).
//  * Without a reference:
//      - seam energy: the mean |difference of horizontally or vertically adjacent values| across
//        tile borders divided by the same mean everywhere else. About 1 for seamless output (the
//        content's own statistics), above 1 where tile borders show; computed on the reference
//        too when one is given (reference_seam_energy), so the two can be compared;
//      - per tile, the mean offset of its raw (pre-blend) output from the final output over its
//        rectangle (needs the TileRunReport of the run).
//  * The tile rectangles themselves (in the input/output pixel coordinates of the run).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/schedule/tiled.h"
#include "core/tensor/host_tensor.h"

namespace seedvae {

struct TileSeamStat {
  int64_t index = 0;
  Rect rect;                                // overlay rectangle (TileRunReport::rects)
  Rect output_rect;                         // the same region in the output tensor
  std::vector<double> offset_vs_reference;  // per channel: mean(tiled - reference); empty without
  std::vector<double> offset_vs_output;     // per channel: mean(raw tile) - mean(output); empty
                                            // without raw tile sums
};

struct SeamMetrics {
  bool has_reference = false;
  double max_abs = 0, rms = 0, mean_abs = 0;  // |tiled - reference| (with a reference)
  double seam_energy = 0;                     // seam gradient / interior gradient
  double seam_gradient = 0, interior_gradient = 0;
  int64_t seam_pairs = 0,
          interior_pairs = 0;         // adjacent-value pairs in each set (per channel/frame)
  double reference_seam_energy = -1;  // the same ratio on the reference (-1: none)
  double max_tile_offset = 0;         // largest |per-tile per-channel offset| (either kind)
  std::vector<Rect> tiles;            // overlay rectangles
  std::vector<TileSeamStat> per_tile;
};

// `output`: the tiled result [1, C, T, H, W]; `report`: its TileRunReport (tile rectangles and
// raw tile sums); `reference`: an untiled result of the same shape, or null.
Result<SeamMetrics> seam_metrics(const HostTensor& output, const TileRunReport& report,
                                 const HostTensor* reference = nullptr);

// seam_metrics() of an output that arrives chunk by chunk (a streamed decode), with only a chunk in
// memory: the gradient sums, the differences from the reference and the per-tile region sums
// accumulate. Every add() gives the same frame size, rectangles and (either always or never) a
// reference. The result equals seam_metrics() of the concatenated frames up to the order of
// floating-point sums.
class SeamAccumulator {
 public:
  // Frames of the output [1, C, k, H, W] fp32 (and the same frames of the reference), tile
  // borders given as output rectangles (seam_output_rects()).
  Status add(const HostTensor& output, const std::vector<Rect>& output_rects,
             const HostTensor* reference = nullptr);
  // With the run's report: per-tile figures and the reference figures; without: seam energy only.
  Result<SeamMetrics> result(const TileRunReport* report) const;

 private:
  struct Energy {
    double seam = 0, interior = 0;
    int64_t seam_n = 0, interior_n = 0;
    double ratio() const;
  };
  void set_borders(int64_t h, int64_t w, const std::vector<Rect>& rects);
  void add_energy(const HostTensor& img, Energy& e) const;

  int64_t h_ = 0, w_ = 0, channels_ = 0, frames_ = 0;
  bool has_reference_ = false;
  std::vector<Rect> rects_;
  std::vector<uint8_t> across_x_, across_y_;  // [h][w]: pair (x-1, x) / (y-1, y) crosses a border
  Energy energy_, reference_energy_;
  double max_abs_ = 0, sum_abs_ = 0, sum_sq_ = 0;
  int64_t elements_ = 0;
  std::vector<std::vector<double>> output_sums_, offset_sums_;  // per tile, per channel
};

// The rectangles a report's tiles cover in the output tensor.
const std::vector<Rect>& seam_output_rects(const TileRunReport& report);

// Seam energy of `image` for borders given as output rectangles (no report needed).
Result<SeamMetrics> seam_energy(const HostTensor& image, const std::vector<Rect>& output_rects);

// Compact JSON object (keys as the struct's fields) for the CLI's --json.
std::string seam_metrics_json(const SeamMetrics& m);

}  // namespace seedvae
