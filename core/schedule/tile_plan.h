// Spatial tile plans (pure integer math, no tensors) and the blend weights of the tiles.
//
// Two layouts:
//  * kReference: the grid of the most used SeedVR2 port, exactly as docs/model.md §5 describes it
//    (tile and overlap in output pixels, converted to a latent-unit grid: lt = max(1, th/8),
//    lo = max(0, min(oh/8, lt-1)), stride = max(1, lt-lo); tiles at 0, stride, 2*stride, ...,
//    clipped at the frame border; tiles lying entirely inside the previous tile's overlap are
//    skipped). Tiles at the right/bottom border are smaller than the others. Its blend weights
//    are the upstream ones (cosine ramps of the *requested* pixel overlap, fade-out applied after
//    fade-in, normalised by the accumulated weight), so golden tensors L2.dec_tiled_A/B and
//    V5.enc_moments_tiled_A are reproduced.
//  * kUniform: every tile has exactly the same shape (the last tile of a row/column is shifted
//    inward so it ends on the border), so a GPU backend can reuse one plan/graph for all tiles.
//    Requests the reference layout would silently clamp (a tile of less than one latent, an
//    overlap not smaller than the tile) are refused with kInvalidArgument. Its blend weights are
//    an exact partition of unity: between two neighbours a cosine ramp of min(overlap, actual
//    overlap) pixels centred in their common region, so the weights of all tiles sum to one at
//    every pixel before any normalisation.
//
// Units: "latent" = one latent pixel = `scale` (8) output pixels. Decode blends in output pixels,
// encode blends the moments in latent units.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace seedvae {

// An axis-aligned rectangle [y, y+h) x [x, x+w).
struct Rect {
  int64_t y = 0, x = 0, h = 0, w = 0;
  int64_t y_end() const { return y + h; }
  int64_t x_end() const { return x + w; }
  int64_t area() const { return h * w; }
  bool operator==(const Rect&) const = default;
};

enum class TileLayout { kReference, kUniform };
std::string_view tile_layout_name(TileLayout layout);  // "reference", "uniform"

// What the user asks for, in output pixels (the CLI's --tile HxW --overlap HxW).
struct TileSpec {
  int64_t tile_h = 512, tile_w = 512;
  int64_t overlap_h = 64, overlap_w = 64;
};

// One axis of a plan, in latent units.
struct AxisPlan {
  int64_t extent = 0;   // frame size along the axis (latents)
  int64_t tile = 0;     // nominal tile size (latents)
  int64_t overlap = 0;  // nominal overlap (latents)
  int64_t stride = 0;   // nominal stride (latents)
  int64_t ramp_px = 0;  // decode blend ramp length in output pixels (the requested overlap)
  std::vector<int64_t> starts, ends;  // kept tiles, [start, end) in latents, ascending
  int64_t count() const { return static_cast<int64_t>(starts.size()); }
};

struct PlannedTile {
  int64_t index = 0;  // row-major over the kept rows and columns
  int64_t row = 0, col = 0;
  Rect latent;  // latent units
  Rect pixel;   // output pixels (= scale * latent)
};

struct TilePlan {
  TileLayout layout = TileLayout::kReference;
  int scale = 8;
  TileSpec spec;  // the request, in pixels
  AxisPlan rows, cols;
  std::vector<PlannedTile> tiles;

  // True when the frame fits one tile: the reference then runs the plain (untiled) path.
  bool single() const { return tiles.size() == 1; }
  int64_t latent_h() const { return rows.extent; }
  int64_t latent_w() const { return cols.extent; }
  // "3x5 tiles of 4x4 latents (32x32 px), overlap 2x2 latents, reference layout"
  std::string describe() const;
};

// Builds the plan for a frame of latent_h x latent_w latents. kReference never fails for positive
// sizes (it reproduces the upstream clamping); kUniform refuses tiles of less than one latent and
// overlaps not smaller than the tile.
Result<TilePlan> make_tile_plan(int64_t latent_h, int64_t latent_w, const TileSpec& spec,
                                TileLayout layout, int scale = 8);

// Uniform tile starts without overlap: ceil(extent / tile) tiles of exactly `tile` units (or one
// tile of `extent` when extent <= tile), the last shifted inward. Used by exact mode per layer.
std::vector<int64_t> uniform_starts(int64_t extent, int64_t tile, int64_t overlap = 0);

// The tile size <= `tile` that covers `extent` with the fewest tiles of equal size and the least
// overlap: ceil(extent / ceil(extent / tile)) (exact mode sizes its per-layer tiles this way).
int64_t balanced_tile(int64_t extent, int64_t tile);

// Where blend weights live: decode blends output pixels, encode blends latent moments.
enum class BlendSpace { kPixels, kLatents };

// 1-D blend weights of tile `k` along the rows (`along_rows`) or columns, one value per unit of
// the tile's extent in `space`. The full 2-D weight is the outer product rows x cols.
std::vector<float> axis_blend_weights(const TilePlan& plan, bool along_rows, int64_t k,
                                      BlendSpace space);

// Upstream's ramp: 0.5 - 0.5*cos(pi * linspace(0, 1, n)) (n values; [0] for n == 1).
std::vector<double> cosine_ramp(int64_t n);

}  // namespace seedvae
