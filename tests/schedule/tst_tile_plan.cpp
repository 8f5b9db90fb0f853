// Tile plans (pure integer math): the reference grid of docs/model.md §5 and the uniform layout —
// coverage, equal shapes, overlap bounds, single tile, tile larger than the frame, odd sizes,
// refusals, and blend weights summing to one.
#include <QtTest>

#include <numeric>

#include "core/schedule/tile_plan.h"

using namespace seedvae;

namespace {

std::string str(int64_t h, int64_t w, const TileSpec& s, TileLayout l) {
  return std::to_string(w) + "x" + std::to_string(h) + " latents, tile " +
         std::to_string(s.tile_w) + "x" + std::to_string(s.tile_h) + " overlap " +
         std::to_string(s.overlap_w) + "x" + std::to_string(s.overlap_h) + " " +
         std::string(tile_layout_name(l));
}

// Every latent of the frame is covered, every tile lies inside the frame, tiles are row-major.
void check_coverage(const TilePlan& p, const std::string& what) {
  std::vector<int> cover(static_cast<size_t>(p.latent_h() * p.latent_w()), 0);
  int64_t prev_row = -1, prev_col = -1;
  for (const PlannedTile& t : p.tiles) {
    QVERIFY2(t.latent.y >= 0 && t.latent.x >= 0 && t.latent.h > 0 && t.latent.w > 0, what.c_str());
    QVERIFY2(t.latent.y_end() <= p.latent_h() && t.latent.x_end() <= p.latent_w(), what.c_str());
    QCOMPARE(t.pixel, (Rect{8 * t.latent.y, 8 * t.latent.x, 8 * t.latent.h, 8 * t.latent.w}));
    QVERIFY(t.row > prev_row || (t.row == prev_row && t.col > prev_col));
    prev_row = t.row;
    prev_col = t.col;
    for (int64_t y = t.latent.y; y < t.latent.y_end(); ++y) {
      for (int64_t x = t.latent.x; x < t.latent.x_end(); ++x) {
        ++cover[static_cast<size_t>(y * p.latent_w() + x)];
      }
    }
  }
  for (int c : cover) QVERIFY2(c >= 1, ("uncovered latent: " + what).c_str());
  QCOMPARE(static_cast<int64_t>(p.tiles.size()), p.rows.count() * p.cols.count());
}

// Sum over tiles of the 1-D weights along one axis, per unit.
std::vector<double> axis_sum(const TilePlan& p, bool rows, BlendSpace space) {
  const AxisPlan& a = rows ? p.rows : p.cols;
  const int64_t unit = space == BlendSpace::kPixels ? p.scale : 1;
  std::vector<double> sum(static_cast<size_t>(a.extent * unit), 0.0);
  for (int64_t k = 0; k < a.count(); ++k) {
    const auto w = axis_blend_weights(p, rows, k, space);
    const auto kk = static_cast<size_t>(k);
    if (static_cast<int64_t>(w.size()) != (a.ends[kk] - a.starts[kk]) * unit) return {};
    for (size_t i = 0; i < w.size(); ++i) {
      if (!(w[i] >= 0.f && w[i] <= 1.f)) return {};
      sum[static_cast<size_t>(a.starts[kk] * unit) + i] += w[i];
    }
  }
  return sum;
}

}  // namespace

class tst_TilePlan : public QObject {
  Q_OBJECT

 private slots:
  // The golden README's tiled parameters (section 4, "Tiled parameters").
  void referenceGoldenCases() {
    auto a = make_tile_plan(8, 12, {32, 32, 16, 16}, TileLayout::kReference);
    QVERIFY(a.is_ok());
    QCOMPARE(a->rows.tile, int64_t{4});
    QCOMPARE(a->rows.overlap, int64_t{2});
    QCOMPARE(a->rows.stride, int64_t{2});
    QCOMPARE(a->rows.starts, (std::vector<int64_t>{0, 2, 4}));
    QCOMPARE(a->cols.starts, (std::vector<int64_t>{0, 2, 4, 6, 8}));
    QCOMPARE(a->tiles.size(), size_t{15});
    QCOMPARE(a->tiles.back().latent, (Rect{4, 8, 4, 4}));

    auto b = make_tile_plan(8, 12, {40, 48, 12, 20}, TileLayout::kReference);
    QVERIFY(b.is_ok());
    QCOMPARE(b->rows.tile, int64_t{5});
    QCOMPARE(b->rows.overlap, int64_t{1});
    QCOMPARE(b->rows.stride, int64_t{4});
    QCOMPARE(b->cols.tile, int64_t{6});
    QCOMPARE(b->cols.overlap, int64_t{2});
    QCOMPARE(b->cols.stride, int64_t{4});
    QCOMPARE(b->rows.starts, (std::vector<int64_t>{0, 4}));
    QCOMPARE(b->rows.ends, (std::vector<int64_t>{5, 8}));
    QCOMPARE(b->cols.starts, (std::vector<int64_t>{0, 4, 8}));
    QCOMPARE(b->cols.ends, (std::vector<int64_t>{6, 10, 12}));
    QCOMPARE(b->tiles.size(), size_t{6});
    QCOMPARE(b->rows.ramp_px, int64_t{12});
    QCOMPARE(b->cols.ramp_px, int64_t{20});
  }

  // docs/model.md §5 clamping: lt >= 1, lo <= lt - 1, stride >= 1; tiles inside the previous
  // overlap are skipped.
  void referenceClamps() {
    auto p = make_tile_plan(5, 5, {4, 4, 100, 100}, TileLayout::kReference);  // tile < 1 latent
    QVERIFY(p.is_ok());
    QCOMPARE(p->rows.tile, int64_t{1});
    QCOMPARE(p->rows.overlap, int64_t{0});
    QCOMPARE(p->rows.stride, int64_t{1});
    QCOMPARE(p->tiles.size(), size_t{25});
    p = make_tile_plan(10, 10, {32, 32, 64, 64}, TileLayout::kReference);  // overlap > tile
    QVERIFY(p.is_ok());
    QCOMPARE(p->rows.overlap, int64_t{3});
    QCOMPARE(p->rows.stride, int64_t{1});
    QCOMPARE(p->rows.starts, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
  }

  void singleTileAndTileLargerThanFrame() {
    for (TileLayout l : {TileLayout::kReference, TileLayout::kUniform}) {
      for (auto [h, w] : {std::pair<int64_t, int64_t>{1, 1}, {8, 12}, {7, 3}}) {
        auto p = make_tile_plan(h, w, {512, 512, 64, 64}, l);
        QVERIFY2(p.is_ok(), p.status().to_string().c_str());
        QVERIFY(p->single());
        QCOMPARE(p->tiles[0].latent, (Rect{0, 0, h, w}));
        // A single tile is never faded.
        for (bool rows : {true, false}) {
          for (BlendSpace s : {BlendSpace::kPixels, BlendSpace::kLatents}) {
            for (float v : axis_blend_weights(*p, rows, 0, s)) QCOMPARE(v, 1.f);
          }
        }
      }
      // Exactly one tile's size.
      auto p = make_tile_plan(8, 8, {64, 64, 16, 16}, l);
      QVERIFY(p.is_ok());
      QVERIFY(p->single());
    }
  }

  // Sweep: coverage for both layouts; uniform: equal shapes, last tile on the border, overlap
  // within [requested, tile - 1], no redundant tile, strictly increasing starts.
  void sweepCoverageShapesOverlaps() {
    int plans = 0;
    for (int64_t h : {1, 2, 3, 5, 7, 8, 9, 13, 16, 17, 31, 40}) {
      for (int64_t w : {1, 4, 6, 11, 12, 19, 33}) {
        for (int64_t tile : {8, 16, 24, 32, 40, 56, 64, 100, 512}) {
          for (int64_t ov : {0, 4, 8, 12, 16, 20, 24, 32, 48}) {
            for (TileLayout l : {TileLayout::kReference, TileLayout::kUniform}) {
              const TileSpec spec{tile, tile + 8, ov, ov / 2};
              const std::string what = str(h, w, spec, l);
              auto p = make_tile_plan(h, w, spec, l);
              if (l == TileLayout::kUniform &&
                  ((ov + 7) / 8 >= tile / 8 || (ov / 2 + 7) / 8 >= (tile + 8) / 8)) {
                QVERIFY2(!p.is_ok(), what.c_str());
                QCOMPARE(p.status().code(), StatusCode::kInvalidArgument);
                continue;
              }
              QVERIFY2(p.is_ok(), (what + ": " + p.status().to_string()).c_str());
              ++plans;
              check_coverage(*p, what);
              if (l != TileLayout::kUniform) continue;
              for (const AxisPlan* a : {&p->rows, &p->cols}) {
                const int64_t size = std::min(a->tile, a->extent);
                for (size_t k = 0; k < a->starts.size(); ++k) {
                  QCOMPARE(a->ends[k] - a->starts[k], size);  // equal shapes
                  if (k == 0) continue;
                  QVERIFY2(a->starts[k] > a->starts[k - 1], what.c_str());
                  const int64_t overlap = a->ends[k - 1] - a->starts[k];
                  QVERIFY2(overlap >= a->overlap && overlap <= a->tile - 1, what.c_str());
                  // Redundancy: without tile k-1, k-2 and k would leave a gap or less overlap.
                  if (k >= 2) QVERIFY2(a->ends[k - 2] < a->starts[k] + a->overlap, what.c_str());
                }
                QCOMPARE(a->ends.back(), a->extent);  // last tile shifted onto the border
              }
              for (const PlannedTile& t : p->tiles) {
                QCOMPARE(t.latent.h, p->tiles[0].latent.h);
                QCOMPARE(t.latent.w, p->tiles[0].latent.w);
              }
            }
          }
        }
      }
    }
    QVERIFY(plans > 1000);
  }

  void uniformRefusesTooSmallTiles() {
    auto p = make_tile_plan(16, 16, {4, 64, 0, 0}, TileLayout::kUniform);
    QVERIFY(!p.is_ok());
    QCOMPARE(p.status().code(), StatusCode::kInvalidArgument);
    QVERIFY(p.status().message().find("smaller than one latent") != std::string::npos);
    p = make_tile_plan(16, 16, {64, 64, 64, 16}, TileLayout::kUniform);
    QVERIFY(!p.is_ok());
    QVERIFY2(p.status().message().find("must be larger than its overlap") != std::string::npos,
             p.status().message().c_str());
    p = make_tile_plan(16, 16, {64, 64, 60, 16}, TileLayout::kUniform);  // ceil(60/8) = 8 latents
    QVERIFY(!p.is_ok());
    p = make_tile_plan(16, 16, {64, 64, -8, 16}, TileLayout::kUniform);
    QVERIFY(!p.is_ok());
    p = make_tile_plan(0, 16, {64, 64, 8, 8}, TileLayout::kReference);
    QVERIFY(!p.is_ok());
    // The same request is accepted (and clamped) by the reference layout, like upstream.
    QVERIFY(make_tile_plan(16, 16, {64, 64, 64, 16}, TileLayout::kReference).is_ok());
  }

  void uniformStartsWithoutOverlap() {
    QCOMPARE(uniform_starts(10, 4), (std::vector<int64_t>{0, 4, 6}));
    QCOMPARE(uniform_starts(8, 4), (std::vector<int64_t>{0, 4}));
    QCOMPARE(uniform_starts(3, 4), (std::vector<int64_t>{0}));
    QCOMPARE(uniform_starts(13, 8, 4), (std::vector<int64_t>{0, 4, 5}));
    QCOMPARE(uniform_starts(1, 1), (std::vector<int64_t>{0}));
    for (int64_t e = 1; e < 50; ++e) {
      for (int64_t t = 1; t < 20; ++t) {
        const auto s = uniform_starts(e, t);
        QCOMPARE(s.front(), int64_t{0});
        QCOMPARE(s.back() + std::min(t, e), e);
        QCOMPARE(static_cast<int64_t>(s.size()), (e + t - 1) / t);
      }
    }
  }

  // Exact mode's per-layer tile: the fewest equal tiles no larger than asked, least overlap.
  void balancedTile() {
    QCOMPARE(balanced_tile(1088, 512), int64_t{363});  // 3 tiles: 0, 363, 725
    QCOMPARE(balanced_tile(1920, 512), int64_t{480});
    QCOMPARE(balanced_tile(100, 200), int64_t{100});
    QCOMPARE(balanced_tile(7, 1), int64_t{1});
    for (int64_t e = 1; e < 80; ++e) {
      for (int64_t t = 1; t < 90; ++t) {
        const int64_t b = balanced_tile(e, t);
        QVERIFY(b >= 1 && b <= std::min(e, t));
        QCOMPARE((e + b - 1) / b, (e + std::min(e, t) - 1) / std::min(e, t));  // same tile count
        const auto s = uniform_starts(e, b);
        QVERIFY(s.back() + b == e);
        if (s.size() > 1) QVERIFY(s[s.size() - 2] + b - s.back() < static_cast<int64_t>(s.size()));
      }
    }
  }

  void cosineRamp() {
    QCOMPARE(cosine_ramp(1), (std::vector<double>{0.0}));
    const auto r = cosine_ramp(16);
    QCOMPARE(r.size(), size_t{16});
    QCOMPARE(r.front(), 0.0);
    QVERIFY(std::abs(r.back() - 1.0) < 1e-15);
    for (size_t i = 0; i < r.size(); ++i) QVERIFY(std::abs(r[i] + r[15 - i] - 1.0) < 1e-12);
    QVERIFY(cosine_ramp(0).empty());
  }

  // Uniform layout: the weights of all tiles sum to one at every pixel (decode) and latent
  // (encode), before any normalisation — for every plan of the sweep, including odd overlaps,
  // zero overlap (hard cut) and the enlarged overlap of the shifted last tile.
  void uniformWeightsSumToOne() {
    int checked = 0;
    for (int64_t h : {1, 3, 8, 9, 13, 16, 21, 40}) {
      for (int64_t tile : {8, 16, 24, 32, 40, 64, 128}) {
        for (int64_t ov : {0, 1, 4, 8, 12, 16, 20, 24, 32, 56}) {
          auto p = make_tile_plan(h, h + 3, {tile, tile, ov, ov}, TileLayout::kUniform);
          if (!p.is_ok()) continue;
          for (bool rows : {true, false}) {
            for (BlendSpace s : {BlendSpace::kPixels, BlendSpace::kLatents}) {
              const auto sum = axis_sum(*p, rows, s);
              QVERIFY2(!sum.empty(), "weights out of [0, 1] or of the wrong length");
              for (double v : sum) {
                QVERIFY2(std::abs(v - 1.0) < 1e-6,
                         (str(h, h + 3, {tile, tile, ov, ov}, TileLayout::kUniform) + " sum " +
                          std::to_string(v))
                             .c_str());
              }
              ++checked;
            }
          }
          // 2-D, explicitly, for one axis combination.
          if (p->tiles.size() > 1) {
            std::vector<double> sum2(static_cast<size_t>(64 * p->latent_h() * p->latent_w()), 0);
            for (const PlannedTile& t : p->tiles) {
              const auto wr = axis_blend_weights(*p, true, t.row, BlendSpace::kPixels);
              const auto wc = axis_blend_weights(*p, false, t.col, BlendSpace::kPixels);
              for (size_t i = 0; i < wr.size(); ++i) {
                for (size_t j = 0; j < wc.size(); ++j) {
                  sum2[static_cast<size_t>(
                           (t.pixel.y + static_cast<int64_t>(i)) * 8 * p->latent_w() + t.pixel.x) +
                       j] += wr[i] * wc[j];
                }
              }
            }
            for (double v : sum2) QVERIFY(std::abs(v - 1.0) < 1e-6);
          }
        }
      }
    }
    QVERIFY(checked > 500);
  }

  // Reference layout: with a pixel overlap that is a multiple of 8 the ramp spans exactly the
  // overlap and neighbours sum to one (spec §5 notes); case B's 12/20 px ramps do not (the
  // division by the accumulated weight renormalises), but every pixel keeps a positive weight.
  void referenceWeights() {
    auto a = make_tile_plan(8, 12, {32, 32, 16, 16}, TileLayout::kReference);
    QVERIFY(a.is_ok());
    for (bool rows : {true, false}) {
      for (double v : axis_sum(*a, rows, BlendSpace::kPixels)) QVERIFY(std::abs(v - 1.0) < 1e-6);
      // Encode: linspace(0, 1, 2) -> ramp [0, 1]: a hard switch; still sums to one.
      for (double v : axis_sum(*a, rows, BlendSpace::kLatents)) QVERIFY(std::abs(v - 1.0) < 1e-6);
    }
    // The first row tile fades out over its last 16 px, the second fades in over its first 16.
    const auto w0 = axis_blend_weights(*a, true, 0, BlendSpace::kPixels);
    const auto w1 = axis_blend_weights(*a, true, 1, BlendSpace::kPixels);
    QCOMPARE(w0.size(), size_t{32});
    QCOMPARE(w0[15], 1.f);
    QCOMPARE(w0[16], 1.f);  // 1 - ramp[0]
    QCOMPARE(w0[31], 0.f);  // 1 - ramp[15]
    QCOMPARE(w1[0], 0.f);
    QCOMPARE(w1[15], 1.f);
    const auto e0 = axis_blend_weights(*a, true, 0, BlendSpace::kLatents);
    QCOMPARE(e0, (std::vector<float>{1.f, 1.f, 1.f, 0.f}));

    auto b = make_tile_plan(8, 12, {40, 48, 12, 20}, TileLayout::kReference);
    QVERIFY(b.is_ok());
    bool differs = false;
    for (bool rows : {true, false}) {
      for (double v : axis_sum(*b, rows, BlendSpace::kPixels)) {
        QVERIFY(v > 0.0);
        differs |= std::abs(v - 1.0) > 1e-3;
      }
    }
    QVERIFY(differs);
    // Row tile 1 of B: 32 px, faded in over 12 px (cosine over linspace(0, 1, 12)).
    const auto r1 = axis_blend_weights(*b, true, 1, BlendSpace::kPixels);
    QCOMPARE(r1.size(), size_t{32});
    const auto ramp = cosine_ramp(12);
    for (size_t i = 0; i < 12; ++i) QCOMPARE(r1[i], static_cast<float>(ramp[i]));
    QCOMPARE(r1[12], 1.f);
  }

  void describe() {
    auto a = make_tile_plan(8, 12, {32, 32, 16, 16}, TileLayout::kReference);
    QVERIFY(a.is_ok());
    QCOMPARE(
        a->describe(),
        std::string("3x5 tiles of 4x4 latents (32x32 px), overlap 2x2 latents, reference layout"));
  }
};

QTEST_GUILESS_MAIN(tst_TilePlan)
#include "tst_tile_plan.moc"
