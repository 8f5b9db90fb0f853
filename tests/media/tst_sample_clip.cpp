// make_sample_clip: shape, range, determinism, seed dependence, motion and content (not flat, all
// three colours present, edges present); find_demo_clip's lookup order.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/media/metrics.h"
#include "core/media/sample_clip.h"
#include "tests/media/media_test_util.h"

using namespace seedvae;
using namespace seedvae::media;
using namespace seedvae::test;

class TestSampleClip : public QObject {
  Q_OBJECT

 private slots:
  void shapeAndRange() {
    const HostTensor v = make_sample_clip(64, 48, 9);
    QCOMPARE(v.dtype(), DType::kF32);
    QCOMPARE(v.shape(), (Shape{1, 3, 9, 48, 64}));
    for (float x : v.f32()) QVERIFY(std::isfinite(x) && x >= -1.0f && x <= 1.0f);
    QCOMPARE(make_sample_clip(0, -5, 0).shape(), (Shape{1, 3, 1, 1, 1}));
  }

  void deterministic() {
    const HostTensor a = make_sample_clip(50, 30, 5, 42);
    const HostTensor b = make_sample_clip(50, 30, 5, 42);
    QVERIFY(std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.nbytes())) == 0);
    const HostTensor c = make_sample_clip(50, 30, 5, 43);
    QVERIFY(max_abs_diff(a, c) > 0.2);
    // A longer clip starts with the same frames.
    const HostTensor d = make_sample_clip(50, 30, 8, 42);
    QCOMPARE(max_abs_diff(frames_of(d, {0, 1, 2, 3, 4}), a), 0.0);
  }

  void contentIsNatural() {
    const HostTensor v = make_sample_clip(128, 96, 6, 0);
    // Not flat: per-channel standard deviation well above zero.
    for (int64_t c = 0; c < 3; ++c) {
      double s = 0, s2 = 0;
      const int64_t n = 96 * 128;
      for (int64_t y = 0; y < 96; ++y)
        for (int64_t x = 0; x < 128; ++x) {
          const double p = at(v, c, 0, y, x);
          s += p;
          s2 += p * p;
        }
      const double sd = std::sqrt(s2 / n - (s / n) * (s / n));
      QVERIFY2(sd > 0.1, qPrintable(QString("channel %1 sd %2").arg(c).arg(sd)));
    }
    // Each primary dominates somewhere (the coloured discs).
    for (int64_t c = 0; c < 3; ++c) {
      bool found = false;
      for (int64_t t = 0; t < 6 && !found; ++t)
        for (int64_t y = 0; y < 96 && !found; ++y)
          for (int64_t x = 0; x < 128 && !found; ++x) {
            const float p = at(v, c, t, y, x);
            found = p > 0.4f && p - at(v, (c + 1) % 3, t, y, x) > 0.3f &&
                    p - at(v, (c + 2) % 3, t, y, x) > 0.3f;
          }
      QVERIFY2(found, qPrintable(QString("no pixel dominated by channel %1").arg(c)));
    }
    // Hard edges exist (the bar): some horizontal neighbour step above half the range.
    double max_step = 0;
    for (int64_t y = 0; y < 96; ++y)
      for (int64_t x = 1; x < 128; ++x)
        max_step = std::max(
            max_step, static_cast<double>(std::abs(at(v, 1, 2, y, x) - at(v, 1, 2, y, x - 1))));
    QVERIFY(max_step > 0.5);
  }

  void moves() {
    const HostTensor v = make_sample_clip(96, 64, 4, 1);
    for (int64_t t = 1; t < 4; ++t) {
      auto q = compare_clips(frames_of(v, {t - 1}), frames_of(v, {t}));
      QVERIFY(q.is_ok());
      // Consecutive frames differ, but are similar (smooth motion).
      QVERIFY2(q->psnr_db < 40 && q->psnr_db > 12, qPrintable(QString::number(q->psnr_db)));
    }
  }

  // $SEEDVAE_DEMO_CLIP (a non-empty folder) first, then <exe>/../share/seedvae/demo-clip, else
  // nothing; empty folders and files are not clips.
  void demoClipLookup() {
    namespace fs = std::filesystem;
    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    const fs::path root = tmp.path().toStdString();
    const fs::path exe = root / "bin";
    const fs::path installed = root / "share" / "seedvae" / "demo-clip";
    const fs::path env_clip = root / "mine";
    fs::create_directories(exe);
    fs::create_directories(installed);
    fs::create_directories(env_clip);
    qunsetenv("SEEDVAE_DEMO_CLIP");
    QVERIFY(find_demo_clip(exe).empty());  // the installed folder is still empty
    std::ofstream(installed / "000.jpg") << "x";
    QCOMPARE(find_demo_clip(exe), fs::weakly_canonical(installed));
    qputenv("SEEDVAE_DEMO_CLIP", QByteArray::fromStdString(env_clip.string()));
    QCOMPARE(find_demo_clip(exe), fs::weakly_canonical(installed));  // empty: skipped
    std::ofstream(env_clip / "000.png") << "x";
    QCOMPARE(find_demo_clip(exe), fs::weakly_canonical(env_clip));
    qputenv("SEEDVAE_DEMO_CLIP", QByteArray::fromStdString((env_clip / "000.png").string()));
    QCOMPARE(find_demo_clip(exe), fs::weakly_canonical(installed));  // a file is not a clip
    qunsetenv("SEEDVAE_DEMO_CLIP");
    QVERIFY(find_demo_clip(fs::path()).empty());
    QVERIFY(find_demo_clip(root / "nowhere").empty());
  }
};

QTEST_GUILESS_MAIN(TestSampleClip)
#include "tst_sample_clip.moc"
