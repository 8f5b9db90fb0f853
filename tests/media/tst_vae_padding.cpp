// seedvae_media padding (docs/model.md §6): plans, the exact temporal index lists of both
// modes for T = 1..13 (written out by hand from the spec, not computed), spatial pad values, and
// remove_padding() inverting apply_padding().
#include <QtTest>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/media/vae_padding.h"
#include "tests/media/media_test_util.h"

using namespace seedvae;
using namespace seedvae::media;
using namespace seedvae::test;

Q_DECLARE_METATYPE(seedvae::media::TemporalPad)

class TestVaePadding : public QObject {
  Q_OBJECT

  // Clip whose value encodes (c, t, y, x) uniquely, all inside (-1, 1) and never -1.
  static HostTensor coded(int64_t T, int64_t H, int64_t W) {
    return clip_from(T, H, W, [](int64_t c, int64_t t, int64_t y, int64_t x) {
      return static_cast<float>(c * 1000000 + t * 10000 + y * 100 + x) / 4e6f;
    });
  }
  static float code(int64_t c, int64_t t, int64_t y, int64_t x) {
    return static_cast<float>(c * 1000000 + t * 10000 + y * 100 + x) / 4e6f;
  }

 private slots:
  void next4n1() {
    const int64_t expected[] = {1, 5, 5, 5, 5, 9, 9, 9, 9, 13, 13, 13, 13, 17};
    for (int64_t t = 1; t <= 14; ++t) QCOMPARE(next_4n_plus_1(t), expected[t - 1]);
    QCOMPARE(next_4n_plus_1(121), int64_t{121});
    QCOMPARE(next_4n_plus_1(122), int64_t{125});
  }

  void plans() {
    PadPlan p = plan_padding(10, 37, 65, 8);
    QCOMPARE(p.frames, int64_t{10});
    QCOMPARE(p.height, int64_t{37});
    QCOMPARE(p.width, int64_t{65});
    QCOMPARE(p.padded_frames, int64_t{13});
    QCOMPARE(p.padded_height, int64_t{40});
    QCOMPARE(p.padded_width, int64_t{72});
    QVERIFY(!p.is_identity());
    p = plan_padding(10, 37, 65, 16);
    QCOMPARE(p.padded_height, int64_t{48});
    QCOMPARE(p.padded_width, int64_t{80});
    p = plan_padding(1, 64, 32, 16);
    QCOMPARE(p.padded_frames, int64_t{1});  // a single image stays one frame
    QVERIFY(p.is_identity());
    p = plan_padding(17, 1080, 1920, 16);
    QCOMPARE(p.padded_height, int64_t{1088});
    QCOMPARE(p.padded_width, int64_t{1920});
    QCOMPARE(p.padded_frames, int64_t{17});
    // Invalid inputs give a plan apply_padding() rejects.
    p = plan_padding(0, 8, 8, 8);
    QCOMPARE(p.padded_frames, int64_t{0});
    p = plan_padding(4, 8, 8, 0);
    QCOMPARE(p.padded_width, int64_t{0});
    auto r = apply_padding(coded(4, 8, 8), p, TemporalPad::kMirror);
    QCOMPARE(r.status().code(), StatusCode::kInvalidArgument);
  }

  void temporalIndices_data() {
    QTest::addColumn<TemporalPad>("mode");
    QTest::addColumn<qint64>("frames");
    QTest::addColumn<QList<qint64>>("expected");
    using L = QList<qint64>;
    const auto M = TemporalPad::kMirror;
    const auto R = TemporalPad::kRepeatLast;
    // Mirror: append T-2, T-3, ..., T-1-k; for T = 2 (k = 3 >= T): frames T-1..1 = {1}, then
    // k-T+1 = 2 copies of frame T-1 = 1.
    QTest::newRow("mirror T=1") << M << qint64(1) << L{0};
    QTest::newRow("mirror T=2") << M << qint64(2) << L{0, 1, 1, 1, 1};
    QTest::newRow("mirror T=3") << M << qint64(3) << L{0, 1, 2, 1, 0};
    QTest::newRow("mirror T=4") << M << qint64(4) << L{0, 1, 2, 3, 2};
    QTest::newRow("mirror T=5") << M << qint64(5) << L{0, 1, 2, 3, 4};
    QTest::newRow("mirror T=6") << M << qint64(6) << L{0, 1, 2, 3, 4, 5, 4, 3, 2};
    QTest::newRow("mirror T=7") << M << qint64(7) << L{0, 1, 2, 3, 4, 5, 6, 5, 4};
    QTest::newRow("mirror T=8") << M << qint64(8) << L{0, 1, 2, 3, 4, 5, 6, 7, 6};
    QTest::newRow("mirror T=9") << M << qint64(9) << L{0, 1, 2, 3, 4, 5, 6, 7, 8};
    QTest::newRow("mirror T=10") << M << qint64(10) << L{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 8, 7, 6};
    QTest::newRow("mirror T=11") << M << qint64(11) << L{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 9, 8};
    QTest::newRow("mirror T=12") << M << qint64(12) << L{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 10};
    QTest::newRow("mirror T=13") << M << qint64(13) << L{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    QTest::newRow("repeat T=1") << R << qint64(1) << L{0};
    QTest::newRow("repeat T=2") << R << qint64(2) << L{0, 1, 1, 1, 1};
    QTest::newRow("repeat T=3") << R << qint64(3) << L{0, 1, 2, 2, 2};
    QTest::newRow("repeat T=4") << R << qint64(4) << L{0, 1, 2, 3, 3};
    QTest::newRow("repeat T=5") << R << qint64(5) << L{0, 1, 2, 3, 4};
    QTest::newRow("repeat T=6") << R << qint64(6) << L{0, 1, 2, 3, 4, 5, 5, 5, 5};
    QTest::newRow("repeat T=7") << R << qint64(7) << L{0, 1, 2, 3, 4, 5, 6, 6, 6};
    QTest::newRow("repeat T=8") << R << qint64(8) << L{0, 1, 2, 3, 4, 5, 6, 7, 7};
    QTest::newRow("repeat T=9") << R << qint64(9) << L{0, 1, 2, 3, 4, 5, 6, 7, 8};
    QTest::newRow("repeat T=10") << R << qint64(10) << L{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9, 9};
    QTest::newRow("repeat T=11") << R << qint64(11) << L{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 10, 10};
    QTest::newRow("repeat T=12") << R << qint64(12) << L{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 11};
    QTest::newRow("repeat T=13") << R << qint64(13) << L{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  }

  void temporalIndices() {
    QFETCH(TemporalPad, mode);
    QFETCH(qint64, frames);
    QFETCH(QList<qint64>, expected);
    const PadPlan plan = plan_padding(frames, 3, 5, 8);
    QCOMPARE(plan.padded_frames, static_cast<int64_t>(expected.size()));
    const std::vector<int64_t> idx = temporal_source_indices(frames, plan.padded_frames, mode);
    QCOMPARE(QList<qint64>(idx.begin(), idx.end()), expected);

    // apply_padding copies exactly those frames and pads space with -1.
    const HostTensor v = coded(frames, 3, 5);
    auto r = apply_padding(v, plan, mode);
    QVERIFY2(r.is_ok(), r.status().to_string().c_str());
    const HostTensor& p = r.value();
    QCOMPARE(p.shape(), (Shape{1, 3, expected.size(), 8, 8}));
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t t = 0; t < p.shape().t(); ++t)
        for (int64_t y = 0; y < 8; ++y)
          for (int64_t x = 0; x < 8; ++x) {
            const float want = (y < 3 && x < 5) ? code(c, expected[t], y, x) : -1.0f;
            if (at(p, c, t, y, x) != want) {
              QFAIL(qPrintable(QString("c=%1 t=%2 y=%3 x=%4: %5, expected %6")
                                   .arg(c)
                                   .arg(t)
                                   .arg(y)
                                   .arg(x)
                                   .arg(at(p, c, t, y, x))
                                   .arg(want)));
            }
          }
    // remove_padding is the inverse.
    const HostTensor back = remove_padding(p, plan);
    QCOMPARE(back.shape(), v.shape());
    QCOMPARE(max_abs_diff(back, v), 0.0);
  }

  void bf16AndBatch() {
    // Works on any dtype and N > 1; the pad value is -1 in that dtype.
    const HostTensor v32 = HostTensor(DType::kF32, Shape{2, 3, 3, 5, 7});
    HostTensor v = v32;
    for (int64_t i = 0; i < v.numel(); ++i)
      v.data<float>()[i] = static_cast<float>(i % 97) / 100.0f;
    const HostTensor b = v.to(DType::kBF16);
    const PadPlan plan = plan_padding(3, 5, 7, 8);
    auto r = apply_padding(b, plan, TemporalPad::kMirror);
    QVERIFY(r.is_ok());
    QCOMPARE(r->dtype(), DType::kBF16);
    QCOMPARE(r->shape(), (Shape{2, 3, 5, 8, 8}));
    const HostTensor f = r->to(DType::kF32);
    QCOMPARE(at(f, 0, 0, 7, 7), -1.0f);  // N=0 channel 0 corner padding
    // Batch 1, channel 2, padded frame 3 = source frame 1.
    const float* pf = f.data<float>();
    const HostTensor src = b.to(DType::kF32);
    const float* ps = src.data<float>();
    auto idx = [](int64_t n, int64_t c, int64_t t, int64_t y, int64_t x, int64_t T, int64_t H,
                  int64_t W) { return (((n * 3 + c) * T + t) * H + y) * W + x; };
    QCOMPARE(pf[idx(1, 2, 3, 4, 6, 5, 8, 8)], ps[idx(1, 2, 1, 4, 6, 3, 5, 7)]);
    QCOMPARE(pf[idx(1, 2, 3, 5, 6, 5, 8, 8)], -1.0f);
    const HostTensor back = remove_padding(*r, plan);
    QCOMPARE(back.shape(), b.shape());
    QVERIFY(std::memcmp(back.raw(), b.raw(), static_cast<size_t>(b.nbytes())) == 0);
  }

  void errors() {
    const HostTensor v = coded(4, 6, 6);
    // Plan for another shape.
    auto r = apply_padding(v, plan_padding(5, 6, 6, 8), TemporalPad::kMirror);
    QCOMPARE(r.status().code(), StatusCode::kInvalidArgument);
    // Not 5-D.
    r = apply_padding(HostTensor(DType::kF32, Shape{3, 4, 6, 6}), plan_padding(4, 6, 6, 8),
                      TemporalPad::kMirror);
    QCOMPARE(r.status().code(), StatusCode::kInvalidArgument);
    // remove_padding of a tensor smaller than the original.
    const PadPlan plan = plan_padding(4, 6, 6, 8);
    auto rr = remove_padding_checked(coded(3, 8, 8), plan);
    QCOMPARE(rr.status().code(), StatusCode::kInvalidArgument);
    QVERIFY(remove_padding(coded(5, 5, 8), plan).empty());
    // A decoded tensor larger than the plan's padding (e.g. extra frames) is trimmed fine.
    auto ok = remove_padding_checked(coded(9, 16, 16), plan);
    QVERIFY(ok.is_ok());
    QCOMPARE(ok->shape(), (Shape{1, 3, 4, 6, 6}));
    QCOMPARE(at(*ok, 2, 3, 5, 5), code(2, 3, 5, 5));
  }

  void names() {
    QCOMPARE(temporal_pad_from_name("mirror").value(), TemporalPad::kMirror);
    QCOMPARE(temporal_pad_from_name("repeat-last").value(), TemporalPad::kRepeatLast);
    QCOMPARE(temporal_pad_from_name("official").value(), TemporalPad::kRepeatLast);
    QCOMPARE(temporal_pad_from_name("bogus").status().code(), StatusCode::kInvalidArgument);
    QVERIFY(temporal_pad_name(TemporalPad::kMirror) == "mirror");
    QVERIFY(temporal_pad_name(TemporalPad::kRepeatLast) == "repeat-last");
  }
};

QTEST_GUILESS_MAIN(TestVaePadding)
#include "tst_vae_padding.moc"
