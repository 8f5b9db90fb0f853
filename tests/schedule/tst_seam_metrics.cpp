// Seam metrics on constructed images: a smooth image is seamless at any borders, a step added
// at the tile borders raises the seam energy, offsets against a reference and against raw tile
// means, and the JSON form.
#include <QtTest>

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/schedule/seam_metrics.h"
#include "core/schedule/streaming.h"

using namespace seedvae;

namespace {

HostTensor smooth(int64_t c, int64_t t, int64_t h, int64_t w) {
  HostTensor img(DType::kF32, Shape{1, c, t, h, w});
  float* p = img.data<float>();
  for (int64_t k = 0; k < c * t; ++k) {
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t x = 0; x < w; ++x) *p++ = static_cast<float>(std::sin(0.1 * x + 0.05 * y + k));
    }
  }
  return img;
}

std::vector<Rect> grid(int64_t h, int64_t w, int64_t th, int64_t tw) {
  std::vector<Rect> r;
  for (int64_t y = 0; y < h; y += th) {
    for (int64_t x = 0; x < w; x += tw)
      r.push_back({y, x, std::min(th, h - y), std::min(tw, w - x)});
  }
  return r;
}

}  // namespace

class tst_SeamMetrics : public QObject {
  Q_OBJECT

 private slots:
  void smoothImageIsSeamless() {
    const HostTensor img = smooth(3, 2, 64, 96);
    auto m = seam_energy(img, grid(64, 96, 32, 32));
    QVERIFY2(m.is_ok(), m.status().to_string().c_str());
    qInfo("smooth: seam energy %.4f (%lld seam pairs, %lld interior)", m->seam_energy,
          static_cast<long long>(m->seam_pairs), static_cast<long long>(m->interior_pairs));
    QVERIFY(std::abs(m->seam_energy - 1.0) < 0.05);
    // One column of borders at x = 32, 64 (64 rows each) and one row at y = 32 (96 columns).
    QCOMPARE(m->seam_pairs, int64_t{6 * (2 * 64 + 96)});
    auto single = seam_energy(img, grid(64, 96, 64, 96));
    QVERIFY(single.is_ok());
    QCOMPARE(single->seam_pairs, int64_t{0});
    QCOMPARE(single->seam_energy, 1.0);
  }

  void stepsAtBordersRaiseEnergyAndOffsets() {
    const HostTensor ref = smooth(2, 1, 64, 64);
    HostTensor tiled = ref;
    const auto rects = grid(64, 64, 32, 32);
    // Tile k gets a constant offset of 0.1 * k in channel 0.
    for (size_t k = 0; k < rects.size(); ++k) {
      const Rect& r = rects[k];
      for (int64_t y = r.y; y < r.y_end(); ++y) {
        for (int64_t x = r.x; x < r.x_end(); ++x) tiled.data<float>()[y * 64 + x] += 0.1f * k;
      }
    }
    TileRunReport rep;
    rep.rects = rects;
    rep.output_rects = rects;
    // Raw tile sums: raw tile k = reference + 0.2 in channel 1 (a tile brighter than the blend).
    for (size_t k = 0; k < rects.size(); ++k) {
      std::vector<double> sums(2, 0.0);
      for (int64_t c = 0; c < 2; ++c) {
        for (int64_t y = rects[k].y; y < rects[k].y_end(); ++y) {
          for (int64_t x = rects[k].x; x < rects[k].x_end(); ++x) {
            sums[static_cast<size_t>(c)] +=
                tiled.data<float>()[(c * 64 + y) * 64 + x] + (c == 1 ? 0.2 : 0.0);
          }
        }
      }
      rep.tile_sums.push_back(sums);
      rep.tile_counts.push_back(rects[k].area());
    }
    auto m = seam_metrics(tiled, rep, &ref);
    QVERIFY2(m.is_ok(), m.status().to_string().c_str());
    qInfo("steps: seam energy %.3f (reference %.3f), max_abs %.3f", m->seam_energy,
          m->reference_seam_energy, m->max_abs);
    QVERIFY(m->has_reference);
    QVERIFY(m->seam_energy > 1.5);
    QVERIFY(std::abs(m->reference_seam_energy - 1.0) < 0.1);
    QVERIFY(std::abs(m->max_abs - 0.3) < 1e-6);
    QCOMPARE(m->per_tile.size(), size_t{4});
    for (size_t k = 0; k < 4; ++k) {
      QVERIFY(std::abs(m->per_tile[k].offset_vs_reference[0] - 0.1 * k) < 1e-6);
      QVERIFY(std::abs(m->per_tile[k].offset_vs_reference[1]) < 1e-9);
      QVERIFY(std::abs(m->per_tile[k].offset_vs_output[1] - 0.2) < 1e-6);
      QVERIFY(std::abs(m->per_tile[k].offset_vs_output[0]) < 1e-6);
    }
    QVERIFY(std::abs(m->max_tile_offset - 0.3) < 1e-6);

    const auto j = nlohmann::json::parse(seam_metrics_json(*m));
    QCOMPARE(j["tiles"].size(), size_t{4});
    QCOMPARE(j["per_tile"][2]["rect"]["y"].get<int64_t>(), int64_t{32});
    QVERIFY(std::abs(j["seam_energy"].get<double>() - m->seam_energy) < 1e-12);
    QVERIFY(j["has_reference"].get<bool>());
  }

  // The accumulator over chunks of frames equals seam_metrics() of the whole output, with a
  // reference and raw tile sums.
  void accumulatorEqualsWholeOutput() {
    const int64_t T = 7, H = 40, W = 56;
    HostTensor out = smooth(3, T, H, W), ref = smooth(3, T, H, W);
    float* o = out.data<float>();
    for (int64_t i = 0; i < out.numel(); ++i) o[i] += 0.05f * static_cast<float>((i * 7919) % 13);
    TileRunReport rep;
    rep.rects = grid(H, W, 24, 32);
    rep.output_rects = rep.rects;
    for (size_t k = 0; k < rep.rects.size(); ++k) {
      rep.tile_sums.push_back({1.0 * k, 2.0, 3.0});
      rep.tile_counts.push_back(100);
    }
    auto whole = seam_metrics(out, rep, &ref);
    QVERIFY(whole.is_ok());
    SeamAccumulator acc;
    for (auto [b, e] : {std::pair<int64_t, int64_t>{0, 3}, {3, 4}, {4, 7}}) {
      const HostTensor fr = slice_time(ref, b, e);
      QVERIFY(acc.add(slice_time(out, b, e), seam_output_rects(rep), &fr).is_ok());
    }
    // Another frame size, or no reference after one, does not continue the output.
    QVERIFY(!acc.add(smooth(3, 1, H, W + 8), seam_output_rects(rep)).is_ok());
    QVERIFY(!acc.add(slice_time(out, 0, 1), seam_output_rects(rep)).is_ok());
    auto got = acc.result(&rep);
    QVERIFY(got.is_ok());
    auto close = [](double x, double y) { return std::abs(x - y) <= 1e-9 * (1 + std::abs(y)); };
    QVERIFY(close(got->seam_energy, whole->seam_energy));
    QVERIFY(close(got->reference_seam_energy, whole->reference_seam_energy));
    QCOMPARE(got->max_abs, whole->max_abs);
    QVERIFY(close(got->rms, whole->rms));
    QVERIFY(close(got->mean_abs, whole->mean_abs));
    QCOMPARE(got->seam_pairs, whole->seam_pairs);
    QCOMPARE(got->per_tile.size(), whole->per_tile.size());
    for (size_t k = 0; k < got->per_tile.size(); ++k) {
      for (size_t c = 0; c < 3; ++c) {
        QVERIFY(close(got->per_tile[k].offset_vs_reference[c],
                      whole->per_tile[k].offset_vs_reference[c]));
        QVERIFY(
            close(got->per_tile[k].offset_vs_output[c], whole->per_tile[k].offset_vs_output[c]));
      }
    }
  }

  void errors() {
    HostTensor bad(DType::kF32, Shape{4, 4});
    QVERIFY(!seam_energy(bad, {}).is_ok());
    const HostTensor a = smooth(1, 1, 8, 8), b = smooth(1, 1, 8, 16);
    TileRunReport rep;
    QVERIFY(!seam_metrics(a, rep, &b).is_ok());
  }
};

QTEST_GUILESS_MAIN(tst_SeamMetrics)
#include "tst_seam_metrics.moc"
