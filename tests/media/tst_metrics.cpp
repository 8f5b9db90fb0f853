// seedvae_media metrics: PSNR/SSIM/max/rms on identical clips, on perturbations with values known
// in closed form, against a direct (non-separable) SSIM written here, and their error handling.
#include <QtTest>

#include <cmath>
#include <limits>
#include <vector>

#include "core/media/metrics.h"
#include "core/media/sample_clip.h"
#include "core/schedule/streaming.h"
#include "tests/media/media_test_util.h"

using namespace seedvae;
using namespace seedvae::media;
using namespace seedvae::test;

namespace {

HostTensor add_constant(const HostTensor& v, float c) {
  HostTensor out = v;
  for (float& x : out.f32()) x += c;
  return out;
}

// Direct SSIM of one luma frame with an explicit 2-D Gaussian window, valid positions only.
double direct_ssim(const HostTensor& a, const HostTensor& b, int64_t t) {
  const int64_t H = a.shape().h(), W = a.shape().w();
  auto luma = [&](const HostTensor& v, int64_t y, int64_t x) {
    return 0.299 * (at(v, 0, t, y, x) + 1.0) / 2 + 0.587 * (at(v, 1, t, y, x) + 1.0) / 2 +
           0.114 * (at(v, 2, t, y, x) + 1.0) / 2;
  };
  double w[11][11], sum = 0;
  for (int i = 0; i < 11; ++i)
    for (int j = 0; j < 11; ++j)
      sum += (w[i][j] = std::exp(-((i - 5) * (i - 5) + (j - 5) * (j - 5)) / 4.5));
  double total = 0;
  int64_t count = 0;
  for (int64_t y = 0; y + 11 <= H; ++y)
    for (int64_t x = 0; x + 11 <= W; ++x) {
      double mx = 0, my = 0, sxx = 0, syy = 0, sxy = 0;
      for (int i = 0; i < 11; ++i)
        for (int j = 0; j < 11; ++j) {
          const double g = w[i][j] / sum, p = luma(a, y + i, x + j), q = luma(b, y + i, x + j);
          mx += g * p;
          my += g * q;
          sxx += g * p * p;
          syy += g * q * q;
          sxy += g * p * q;
        }
      const double vx = sxx - mx * mx, vy = syy - my * my, c = sxy - mx * my;
      const double c1 = 1e-4, c2 = 9e-4;
      total += (2 * mx * my + c1) * (2 * c + c2) / ((mx * mx + my * my + c1) * (vx + vy + c2));
      ++count;
    }
  return total / static_cast<double>(count);
}

}  // namespace

class TestMetrics : public QObject {
  Q_OBJECT

 private slots:
  void identical() {
    const HostTensor a = make_sample_clip(40, 24, 3, 1);
    auto q = compare_clips(a, a);
    QVERIFY(q.is_ok());
    QVERIFY(std::isinf(q->psnr_db) && q->psnr_db > 0);
    QCOMPARE(q->psnr_db, std::numeric_limits<double>::infinity());
    QCOMPARE(q->ssim, 1.0);
    QCOMPARE(q->max_abs, 0.0);
    QCOMPARE(q->rms, 0.0);
  }

  void constantOffset() {
    // +0.1 in [-1, 1] is 0.05 in [0, 1]: PSNR = 20 log10(1 / 0.05) = 26.0206 dB.
    const HostTensor a = make_sample_clip(40, 24, 3, 2);
    const HostTensor b = add_constant(a, 0.1f);
    auto q = compare_clips(a, b);
    QVERIFY(q.is_ok());
    QVERIFY2(std::abs(q->psnr_db - 26.0206) < 0.01, qPrintable(QString::number(q->psnr_db)));
    QVERIFY(std::abs(q->rms - 0.05) < 1e-5);
    QVERIFY(std::abs(q->max_abs - 0.05) < 1e-5);
    QVERIFY(q->ssim < 1.0 && q->ssim > 0.9);
    // Symmetric.
    auto r = compare_clips(b, a);
    QCOMPARE(r->psnr_db, q->psnr_db);
    QVERIFY(std::abs(r->ssim - q->ssim) < 1e-12);
  }

  void knownMse() {
    // Checkerboard error of +-0.2 in [-1, 1] = 0.1 in [0, 1]: MSE 0.01, PSNR 20 dB.
    const HostTensor a =
        clip_from(2, 16, 16, [](int64_t, int64_t, int64_t, int64_t) { return 0.0f; });
    const HostTensor b = clip_from(2, 16, 16, [](int64_t, int64_t, int64_t y, int64_t x) {
      return ((x + y) % 2) ? 0.2f : -0.2f;
    });
    auto q = compare_clips(a, b);
    QVERIFY(q.is_ok());
    QVERIFY(std::abs(q->psnr_db - 20.0) < 1e-5);
    QVERIFY(std::abs(q->max_abs - 0.1) < 1e-6);
  }

  void ssimOfFlatFramesIsClosedForm() {
    // Flat frames 0.5 and 0.6 (in [0, 1]): variances vanish, SSIM = (2 mx my + C1) / (mx^2 + my^2 +
    // C1).
    const HostTensor a =
        clip_from(1, 20, 30, [](int64_t, int64_t, int64_t, int64_t) { return 0.0f; });
    const HostTensor b =
        clip_from(1, 20, 30, [](int64_t, int64_t, int64_t, int64_t) { return 0.2f; });
    auto q = compare_clips(a, b);
    QVERIFY(q.is_ok());
    const double expected = (2 * 0.5 * 0.6 + 1e-4) / (0.25 + 0.36 + 1e-4);
    QVERIFY2(std::abs(q->ssim - expected) < 1e-6, qPrintable(QString::number(q->ssim, 'g', 10)));
  }

  void ssimMatchesDirectComputation() {
    // 29 rows: one band; 100 rows: the SSIM map's 90 rows make three bands of 32 and a partial
    // one, and the pixel sums of the last band take the rows below the map. PSNR against a
    // direct sum.
    struct Case {
      int width, height;
      uint32_t seed;
      float amplitude;
    };
    for (const Case& c : {Case{37, 29, 99, 0.3f}, Case{23, 100, 7, 0.3f}}) {
      const HostTensor a = make_sample_clip(c.width, c.height, 2, 3);
      HostTensor b = a;
      uint32_t s = c.seed;
      for (float& x : b.f32()) {
        s = s * 1664525u + 1013904223u;
        x = std::clamp(x + (static_cast<float>(s >> 8) / 16777216.0f - 0.5f) * c.amplitude, -1.0f,
                       1.0f);
      }
      auto q = compare_clips(a, b);
      QVERIFY(q.is_ok());
      const double expected = (direct_ssim(a, b, 0) + direct_ssim(a, b, 1)) / 2;
      qInfo("%dx%d with noise: SSIM %.6f (direct %.6f), PSNR %.2f dB", c.width, c.height, q->ssim,
            expected, q->psnr_db);
      QVERIFY(std::abs(q->ssim - expected) < 1e-9);
      QVERIFY(q->ssim < 0.95);
      double sq = 0;
      for (size_t i = 0; i < a.f32().size(); ++i) {
        const double d = (static_cast<double>(a.f32()[i]) - b.f32()[i]) * 0.5;
        sq += d * d;
      }
      const double psnr = -10.0 * std::log10(sq / static_cast<double>(a.f32().size()));
      QVERIFY2(std::abs(q->psnr_db - psnr) < 1e-9, qPrintable(QString::number(q->psnr_db)));
    }
  }

  void ssimIsOnLuma() {
    // A colour change that keeps BT.601 luma constant leaves SSIM at 1 but lowers PSNR.
    const HostTensor a = make_sample_clip(24, 24, 1, 4);
    HostTensor b = a;
    const int64_t plane = 24 * 24;
    float* p = b.data<float>();
    for (int64_t i = 0; i < plane; ++i) {
      p[i] += 0.02f;                                             // R
      p[plane + i] -= static_cast<float>(0.02 * 0.299 / 0.587);  // G compensates
    }
    auto q = compare_clips(a, b);
    QVERIFY(q.is_ok());
    QVERIFY(std::isfinite(q->psnr_db));
    QVERIFY2(std::abs(q->ssim - 1.0) < 1e-5, qPrintable(QString::number(q->ssim, 'g', 10)));
  }

  void smallFrames() {
    const HostTensor a = make_sample_clip(5, 4, 2, 5);
    auto q = compare_clips(a, a);
    QVERIFY(q.is_ok());
    QCOMPARE(q->ssim, 1.0);
    auto r = compare_clips(a, add_constant(a, -0.3f));
    QVERIFY(r.is_ok());
    QVERIFY(r->ssim < 1.0 && r->ssim > 0.0);
    const HostTensor one = make_sample_clip(1, 1, 1, 5);
    QVERIFY(compare_clips(one, one).is_ok());
  }

  void otherDtypes() {
    const HostTensor a = make_sample_clip(16, 16, 2, 6);
    auto q = compare_clips(a.to(DType::kBF16), a);
    QVERIFY(q.is_ok());
    QVERIFY(q->psnr_db > 40 && std::isfinite(q->psnr_db));
    QVERIFY(q->max_abs <= 0.5 * std::ldexp(1.0, -8) + 1e-9);  // bf16 rounding, halved
  }

  // The accumulator over chunks of frames equals compare_clips() of the whole clips.
  void accumulatorEqualsWholeClip() {
    const HostTensor a = make_sample_clip(40, 28, 9, 1);
    const HostTensor b = make_sample_clip(40, 28, 9, 2);
    auto whole = compare_clips(a, b);
    QVERIFY(whole.is_ok());
    QualityAccumulator acc;
    QVERIFY(!acc.result().is_ok());  // nothing added yet
    for (auto [first, end] : {std::pair{0, 2}, std::pair{2, 7}, std::pair{7, 9}}) {
      QVERIFY(acc.add(slice_time(a, first, end), slice_time(b, first, end)).is_ok());
    }
    QCOMPARE(acc.frames(), int64_t{9});
    auto got = acc.result();
    QVERIFY(got.is_ok());
    QCOMPARE(got->max_abs, whole->max_abs);
    QVERIFY(std::abs(got->psnr_db - whole->psnr_db) < 1e-9);
    QVERIFY(std::abs(got->rms - whole->rms) < 1e-12);
    QVERIFY(std::abs(got->ssim - whole->ssim) < 1e-12);
    // A chunk that fails the checks adds nothing.
    HostTensor bad = slice_time(b, 0, 1);
    bad.f32()[5] = std::numeric_limits<float>::quiet_NaN();
    QVERIFY(!acc.add(slice_time(a, 0, 1), bad).is_ok());
    QVERIFY(!acc.add(slice_time(a, 0, 1), slice_time(b, 0, 2)).is_ok());
    QCOMPARE(acc.frames(), int64_t{9});
  }

  void errors() {
    const HostTensor a = make_sample_clip(8, 8, 2);
    QCOMPARE(compare_clips(a, make_sample_clip(8, 8, 3)).status().code(),
             StatusCode::kInvalidArgument);
    const HostTensor four(DType::kF32, Shape{1, 4, 2, 8, 8});
    QCOMPARE(compare_clips(four, four).status().code(), StatusCode::kInvalidArgument);
    const HostTensor empty(DType::kF32, Shape{1, 3, 0, 8, 8});
    QCOMPARE(compare_clips(empty, empty).status().code(), StatusCode::kInvalidArgument);
    HostTensor nan = a;
    nan.data<float>()[17] = NAN;
    auto r = compare_clips(a, nan);
    QCOMPARE(r.status().code(), StatusCode::kInvalidArgument);
    QVERIFY(r.status().message().find("non-finite") != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(TestMetrics)
#include "tst_metrics.moc"
