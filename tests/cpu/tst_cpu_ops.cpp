// Every op of the CPU backend against the naive double-precision reference ops
// (tests/reference), on random data from a fixed seed, over awkward shapes: odd sizes, one frame,
// 1x1 pixels, stride 2 in each axis, asymmetric padding, 1x1x1 kernels, channel counts that are not
// multiples of 8 (or of oneDNN's 16-channel blocks), groups 1 and C, depth-to-space with Z = 1/2
// with and without the frame drop, attention with 1 token, odd token counts and several query
// blocks.
//
// Tolerance (all float ops): max |actual - reference| <= 1e-4 * max(1, max |reference|).
// Pure copies (pad/slice/concat/depth-to-space) must be bit-exact.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>

#include "core/backend/counting_backend.h"
#include "core/cpu/cpu_backend.h"
#include "tests/reference/reference_ops.h"

using namespace seedvae;

namespace {

constexpr double kRelTol = 1e-4;

HostTensor random_tensor(const Shape& shape, std::mt19937& rng, float scale = 1.f,
                         float offset = 0.f) {
  HostTensor t(DType::kF32, shape);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (float& v : t.f32()) v = offset + scale * dist(rng);
  return t;
}

Shape shape_of(const QList<int>& dims) {
  std::vector<int64_t> d(dims.begin(), dims.end());
  return Shape(std::move(d));
}

// "" when within tolerance, else a description.
std::string close_enough(const HostTensor& actual, const HostTensor& ref) {
  auto stats = compare(actual, ref);
  if (!stats) return stats.status().to_string();
  const double tol = kRelTol * std::max(1.0, stats->ref_absmax);
  if (qEnvironmentVariableIsSet("SEEDVAE_TEST_VERBOSE")) {
    qInfo("max abs error %.3g, rms %.3g, ref absmax %.3g (tolerance %.3g)", stats->max_abs,
          stats->rms, stats->ref_absmax, tol);
  }
  if (stats->max_abs <= tol) return {};
  return "max abs error " + std::to_string(stats->max_abs) + " > tolerance " + std::to_string(tol) +
         " (ref absmax " + std::to_string(stats->ref_absmax) + ", rms " +
         std::to_string(stats->rms) + ")";
}

bool bit_equal(const HostTensor& a, const HostTensor& b) {
  return a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.nbytes())) == 0;
}

#define CHECK_CLOSE(actual, ref)                            \
  do {                                                      \
    const std::string why_ = close_enough((actual), (ref)); \
    QVERIFY2(why_.empty(), why_.c_str());                   \
  } while (0)

#define ASSIGN_OK(decl, expr)                                           \
  auto SEEDVAE_CONCAT_(r_, __LINE__) = (expr);                          \
  QVERIFY2(SEEDVAE_CONCAT_(r_, __LINE__).is_ok(),                       \
           SEEDVAE_CONCAT_(r_, __LINE__).status().to_string().c_str()); \
  decl = std::move(SEEDVAE_CONCAT_(r_, __LINE__)).value()

}  // namespace

class tst_CpuOps : public QObject {
  Q_OBJECT

 private:
  std::unique_ptr<Backend> be_;

  Tensor up(const HostTensor& h) {
    auto r = be_->upload(h);
    if (!r) qFatal("upload failed: %s", r.status().to_string().c_str());
    return std::move(r).value();
  }
  HostTensor down(const Tensor& t) {
    auto r = be_->download(t);
    if (!r) qFatal("download failed: %s", r.status().to_string().c_str());
    return std::move(r).value();
  }

 private slots:
  void initTestCase() {
    auto r = create_cpu_backend({.threads = 2});
    QVERIFY2(r.is_ok(), r.status().to_string().c_str());
    be_ = std::move(r).value();
    qInfo("backend: %s", be_->name().c_str());
    QVERIFY(be_->name().find("oneDNN") != std::string::npos ||
            be_->name().find("portable") != std::string::npos);  // SEEDVAE_WITH_ONEDNN=OFF
    QCOMPARE(be_->activation_dtype(), DType::kF32);
  }

  void upload_converts_every_dtype() {
    std::mt19937 rng(11);
    const HostTensor x = random_tensor(Shape{2, 3, 4, 5, 6}, rng, 3.f);
    for (DType dt : {DType::kF32, DType::kF16, DType::kBF16, DType::kF64}) {
      const HostTensor src = x.to(dt);
      ASSIGN_OK(Tensor t, be_->upload_weight(src, "test.weight"));
      QCOMPARE(t.shape, x.shape());
      const HostTensor back = down(t);
      QVERIFY(bit_equal(back, src.to(DType::kF32)));  // widening is exact
    }
  }

  void conv3d_matches_reference_data() {
    QTest::addColumn<QList<int>>("x");       // N, Cin, T, H, W
    QTest::addColumn<QList<int>>("k");       // Cout, kT, kH, kW
    QTest::addColumn<QList<int>>("stride");  // t, h, w
    QTest::addColumn<QList<int>>("pad");     // top, bottom, left, right
    QTest::addColumn<bool>("bias");
    using L = QList<int>;
    QTest::newRow("3x3x3 pad1 16->16")
        << L{1, 16, 3, 8, 8} << L{16, 3, 3, 3} << L{1, 1, 1} << L{1, 1, 1, 1} << true;
    QTest::newRow("odd sizes 5->7")
        << L{1, 5, 4, 7, 9} << L{7, 3, 3, 3} << L{1, 1, 1} << L{1, 1, 1, 1} << true;
    QTest::newRow("1 frame 1x1 pixel 1x1x1")
        << L{1, 3, 1, 1, 1} << L{5, 1, 1, 1} << L{1, 1, 1} << L{0, 0, 0, 0} << true;
    QTest::newRow("1x1 pixel 3x3x3 pad1")
        << L{1, 8, 3, 1, 1} << L{6, 3, 3, 3} << L{1, 1, 1} << L{1, 1, 1, 1} << true;
    QTest::newRow("stride t2") << L{1, 6, 5, 6, 6} << L{9, 3, 3, 3} << L{2, 1, 1} << L{1, 1, 1, 1}
                               << true;
    QTest::newRow("stride h2") << L{1, 6, 3, 7, 6} << L{9, 3, 3, 3} << L{1, 2, 1} << L{1, 1, 1, 1}
                               << true;
    QTest::newRow("stride w2") << L{1, 6, 3, 6, 7} << L{9, 3, 3, 3} << L{1, 1, 2} << L{1, 1, 1, 1}
                               << true;
    QTest::newRow("temporal downsample 2x2x2 pad(0,1,0,1)")
        << L{1, 16, 5, 9, 8} << L{16, 3, 3, 3} << L{2, 2, 2} << L{0, 1, 0, 1} << true;
    QTest::newRow("spatial downsample 1x3x3 s(1,2,2)")
        << L{1, 12, 3, 8, 10} << L{12, 1, 3, 3} << L{1, 2, 2} << L{0, 1, 0, 1} << true;
    QTest::newRow("asymmetric pad (2,0,1,3)")
        << L{1, 7, 3, 5, 6} << L{10, 3, 3, 3} << L{1, 1, 1} << L{2, 0, 1, 3} << true;
    QTest::newRow("1x1x1 shortcut 24->40")
        << L{1, 24, 3, 5, 7} << L{40, 1, 1, 1} << L{1, 1, 1} << L{0, 0, 0, 0} << true;
    QTest::newRow("1x1x1 upscale 10->80")
        << L{1, 10, 2, 3, 3} << L{80, 1, 1, 1} << L{1, 1, 1} << L{0, 0, 0, 0} << true;
    QTest::newRow("batch 2, 35->17")
        << L{2, 35, 4, 6, 5} << L{17, 3, 3, 3} << L{1, 1, 1} << L{1, 1, 1, 1} << true;
    QTest::newRow("no bias 20->12")
        << L{1, 20, 3, 4, 5} << L{12, 3, 3, 3} << L{1, 1, 1} << L{1, 1, 1, 1} << false;
    QTest::newRow("conv_in 3->32")
        << L{1, 3, 5, 16, 16} << L{32, 3, 3, 3} << L{1, 1, 1} << L{1, 1, 1, 1} << true;
    QTest::newRow("64->64 12x12") << L{1, 64, 4, 12, 12} << L{64, 3, 3, 3} << L{1, 1, 1}
                                  << L{1, 1, 1, 1} << true;
    QTest::newRow("model width 512->512")
        << L{1, 512, 3, 4, 5} << L{512, 3, 3, 3} << L{1, 1, 1} << L{1, 1, 1, 1} << true;
    QTest::newRow("kernel 2x1x3 stride (1,2,2)")
        << L{1, 9, 4, 5, 7} << L{11, 2, 1, 3} << L{1, 2, 2} << L{0, 0, 1, 0} << true;
  }

  void conv3d_matches_reference() {
    QFETCH(QList<int>, x);
    QFETCH(QList<int>, k);
    QFETCH(QList<int>, stride);
    QFETCH(QList<int>, pad);
    QFETCH(bool, bias);
    std::mt19937 rng(1234);
    const Shape xs = shape_of(x);
    const Shape ws{k[0], x[1], k[1], k[2], k[3]};
    const HostTensor hx = random_tensor(xs, rng);
    const HostTensor hw = random_tensor(ws, rng, 1.f / std::sqrt(float(x[1] * k[1] * k[2] * k[3])));
    const HostTensor hb = random_tensor(Shape{k[0]}, rng);
    Conv3dParams p;
    p.stride_t = stride[0];
    p.stride_h = stride[1];
    p.stride_w = stride[2];
    p.pad_top = pad[0];
    p.pad_bottom = pad[1];
    p.pad_left = pad[2];
    p.pad_right = pad[3];
    const HostTensor ref = ref::conv3d(hx, hw, bias ? &hb : nullptr, p);
    ASSIGN_OK(Tensor w, be_->upload_weight(hw, "conv.weight"));
    const Tensor b = bias ? up(hb) : Tensor{};
    ASSIGN_OK(Tensor y, be_->conv3d(up(hx), w, b, p));
    QCOMPARE(y.shape, ref.shape());
    CHECK_CLOSE(down(y), ref);
    // A second call reuses the cached primitive and the packed weights.
    ASSIGN_OK(Tensor y2, be_->conv3d(up(hx), w, b, p));
    QVERIFY(bit_equal(down(y2), down(y)));
  }

  void conv3d_weights_follow_shape_and_in_place_updates() {
    std::mt19937 rng(77);
    const HostTensor hw = random_tensor(Shape{24, 20, 3, 3, 3}, rng, 0.1f);
    const HostTensor hb = random_tensor(Shape{24}, rng);
    ASSIGN_OK(Tensor w, be_->upload_weight(hw, "w"));
    const Tensor b = up(hb);
    Conv3dParams p;
    p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
    for (const Shape& xs : {Shape{1, 20, 3, 6, 6}, Shape{1, 20, 5, 13, 3}, Shape{2, 20, 3, 2, 9}}) {
      const HostTensor hx = random_tensor(xs, rng);
      ASSIGN_OK(Tensor y, be_->conv3d(up(hx), w, b, p));
      CHECK_CLOSE(down(y), ref::conv3d(hx, hw, &hb, p));
    }
    // Modifying the weight in place must invalidate its packed copies.
    const HostTensor delta = random_tensor(hw.shape(), rng, 0.1f);
    QVERIFY(be_->add_inplace(w, up(delta)).is_ok());
    const HostTensor hw2 = ref::add(hw, delta);
    const HostTensor hx = random_tensor(Shape{1, 20, 3, 6, 6}, rng);
    ASSIGN_OK(Tensor y, be_->conv3d(up(hx), w, b, p));
    CHECK_CLOSE(down(y), ref::conv3d(hx, hw2, &hb, p));
  }

  void conv3d_thread_counts_agree() {
    std::mt19937 rng(5);
    const HostTensor hx = random_tensor(Shape{1, 32, 4, 10, 10}, rng);
    const HostTensor hw = random_tensor(Shape{32, 32, 3, 3, 3}, rng, 0.05f);
    Conv3dParams p;
    p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
    auto one = create_cpu_backend({.threads = 1});
    QVERIFY(one.is_ok());
    QVERIFY(one.value()->name().find("1 thread") != std::string::npos);
    ASSIGN_OK(Tensor x1, one.value()->upload(hx));
    ASSIGN_OK(Tensor w1, one.value()->upload_weight(hw, "w"));
    ASSIGN_OK(Tensor y1, one.value()->conv3d(x1, w1, Tensor{}, p));
    ASSIGN_OK(HostTensor r1, one.value()->download(y1));
    ASSIGN_OK(Tensor y2, be_->conv3d(up(hx), up(hw), Tensor{}, p));
    const HostTensor ref = ref::conv3d(hx, hw, nullptr, p);
    CHECK_CLOSE(r1, ref);
    CHECK_CLOSE(down(y2), ref);
  }

  void layouts_never_change_results() {
    // upload() keeps 5-D tensors channels-last, upload_weight() keeps PyTorch order: every op must
    // accept either for any argument, with identical results.
    std::mt19937 rng(21);
    const HostTensor hx = random_tensor(Shape{1, 12, 3, 5, 6}, rng);
    const HostTensor hw = random_tensor(Shape{8, 12, 3, 3, 3}, rng, 0.1f);
    const HostTensor hb = random_tensor(Shape{8}, rng);
    Conv3dParams p;
    p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
    const HostTensor ref = ref::conv3d(hx, hw, &hb, p);
    for (int mode = 0; mode < 4; ++mode) {
      ASSIGN_OK(Tensor x, (mode & 1) ? be_->upload_weight(hx, "x") : be_->upload(hx));
      ASSIGN_OK(Tensor w, (mode & 2) ? be_->upload(hw) : be_->upload_weight(hw, "w"));
      ASSIGN_OK(Tensor y, be_->conv3d(x, w, up(hb), p));
      CHECK_CLOSE(down(y), ref);
      QVERIFY(bit_equal(down(x), hx));
      ASSIGN_OK(Tensor g, be_->group_norm(x, Tensor{}, Tensor{}, {.groups = 4}));
      CHECK_CLOSE(down(g), ref::group_norm(hx, nullptr, nullptr, 4, 1e-6, false));
      ASSIGN_OK(Tensor s, be_->slice_frames(x, 1, 3));
      QVERIFY(bit_equal(down(s), ref::slice_frames(hx, 1, 3)));
      ASSIGN_OK(Tensor d2s, be_->depth_to_space(x, 1, false));
      QVERIFY(bit_equal(down(d2s), ref::depth_to_space(hx, 1, false)));
    }
    // add_inplace across layouts, both ways.
    const HostTensor hy = random_tensor(hx.shape(), rng);
    for (int mode = 0; mode < 2; ++mode) {
      ASSIGN_OK(Tensor acc, mode ? be_->upload_weight(hx, "acc") : be_->upload(hx));
      ASSIGN_OK(Tensor add, mode ? be_->upload(hy) : be_->upload_weight(hy, "add"));
      QVERIFY(be_->add_inplace(acc, add).is_ok());
      QVERIFY(bit_equal(down(acc), ref::add(hx, hy)));
    }
  }

  void reshaping_an_activation_is_refused() {
    std::mt19937 rng(22);
    Tensor x = up(random_tensor(Shape{1, 4, 2, 3, 3}, rng));
    x.shape = Shape{1, 2, 4, 3, 3};  // same element count, different meaning
    auto r = be_->group_norm(x, Tensor{}, Tensor{}, {.groups = 2});
    QVERIFY(!r.is_ok());
    QCOMPARE(r.status().code(), StatusCode::kInvalidArgument);
    QVERIFY(!be_->download(x).is_ok());
  }

  void frame_ops_are_exact() {
    std::mt19937 rng(3);
    const HostTensor hx = random_tensor(Shape{2, 3, 4, 5, 7}, rng);
    const HostTensor hm = random_tensor(Shape{2, 3, 2, 5, 7}, rng);
    const Tensor x = up(hx);
    const Tensor m = up(hm);
    for (int frames : {0, 1, 2}) {
      ASSIGN_OK(Tensor y, be_->causal_pad(x, nullptr, frames));
      QVERIFY(bit_equal(down(y), ref::causal_pad(hx, nullptr, frames)));
    }
    ASSIGN_OK(Tensor pm, be_->causal_pad(x, &m, 2));
    QVERIFY(bit_equal(down(pm), ref::causal_pad(hx, &hm, 2)));
    const HostTensor one_frame = random_tensor(Shape{1, 5, 1, 1, 1}, rng);
    ASSIGN_OK(Tensor p1, be_->causal_pad(up(one_frame), nullptr, 2));
    QVERIFY(bit_equal(down(p1), ref::causal_pad(one_frame, nullptr, 2)));

    for (auto [b, e] : {std::pair<int64_t, int64_t>{0, 4}, {1, 3}, {3, 4}, {2, 2}}) {
      ASSIGN_OK(Tensor s, be_->slice_frames(x, b, e));
      QVERIFY(bit_equal(down(s), ref::slice_frames(hx, b, e)));
    }
    ASSIGN_OK(Tensor c, be_->concat_frames(m, x));
    QVERIFY(bit_equal(down(c), ref::concat_frames(hm, hx)));

    // copy_frames_into (causal-state update in place): frames of x into a copy of m, then
    // within one tensor; ranges past either end are refused and leave the destination as it was.
    {
      ASSIGN_OK(Tensor d, be_->slice_frames(m, 0, hm.shape()[2]));
      QVERIFY(be_->copy_frames_into(d, 0, x, 3, 1).is_ok());
      HostTensor want =
          ref::concat_frames(ref::slice_frames(hx, 3, 4), ref::slice_frames(hm, 1, hm.shape()[2]));
      QVERIFY(bit_equal(down(d), want));
      QVERIFY(be_->copy_frames_into(d, 1, d, 0, 1).is_ok());
      want = ref::concat_frames(ref::slice_frames(hx, 3, 4), ref::slice_frames(hx, 3, 4));
      QVERIFY(bit_equal(down(d), want));
      const auto past = be_->copy_frames_into(d, 1, x, 0, 2);
      QCOMPARE(past.code(), StatusCode::kInvalidArgument);
      QVERIFY(bit_equal(down(d), want));
      QVERIFY(!be_->copy_frames_into(d, 0, x, 4, 1).is_ok());
    }

    // add_inplace: float addition is exact to round-off, and the input is untouched.
    const HostTensor hy = random_tensor(hx.shape(), rng);
    Tensor acc = up(hx);
    const Tensor addend = up(hy);
    QVERIFY(be_->add_inplace(acc, addend).is_ok());
    QVERIFY(bit_equal(down(acc), ref::add(hx, hy)));
    QVERIFY(bit_equal(down(addend), hy));
  }

  void group_norm_matches_reference_data() {
    QTest::addColumn<QList<int>>("x");
    QTest::addColumn<int>("groups");
    QTest::addColumn<bool>("silu");
    QTest::addColumn<bool>("affine");
    QTest::addColumn<float>("offset");
    using L = QList<int>;
    QTest::newRow("64ch g32 silu") << L{1, 64, 3, 5, 7} << 32 << true << true << 0.f;
    QTest::newRow("groups 1") << L{2, 10, 2, 3, 3} << 1 << false << true << 0.f;
    QTest::newRow("groups C, 1x1 pixel") << L{1, 12, 2, 1, 1} << 12 << true << true << 0.f;
    QTest::newRow("groups C odd") << L{1, 6, 4, 9, 11} << 6 << false << true << 0.f;
    QTest::newRow("no affine") << L{1, 8, 2, 4, 4} << 4 << true << false << 0.f;
    QTest::newRow("large mean") << L{1, 32, 2, 17, 19} << 32 << true << true << 100.f;
    QTest::newRow("1 frame, big group") << L{1, 64, 1, 40, 33} << 2 << false << true << 3.f;
  }

  void group_norm_matches_reference() {
    QFETCH(QList<int>, x);
    QFETCH(int, groups);
    QFETCH(bool, silu);
    QFETCH(bool, affine);
    QFETCH(float, offset);
    std::mt19937 rng(99);
    const HostTensor hx = random_tensor(shape_of(x), rng, 2.f, offset);
    const HostTensor hg = random_tensor(Shape{x[1]}, rng, 1.f, 1.f);
    const HostTensor hb = random_tensor(Shape{x[1]}, rng);
    const GroupNormParams p{.groups = groups, .eps = 1e-6f, .silu = silu};
    const Tensor g = affine ? up(hg) : Tensor{};
    const Tensor b = affine ? up(hb) : Tensor{};
    ASSIGN_OK(Tensor y, be_->group_norm(up(hx), g, b, p));
    CHECK_CLOSE(down(y), ref::group_norm(hx, affine ? &hg : nullptr, affine ? &hb : nullptr, groups,
                                         1e-6, silu));
  }

  void depth_to_space_matches_reference_data() {
    QTest::addColumn<QList<int>>("x");
    QTest::addColumn<int>("z");
    QTest::addColumn<bool>("drop");
    using L = QList<int>;
    QTest::newRow("Z=1") << L{1, 12, 3, 4, 5} << 1 << false;
    QTest::newRow("Z=2") << L{1, 24, 3, 4, 5} << 2 << false;
    QTest::newRow("Z=2 drop") << L{1, 24, 3, 4, 5} << 2 << true;
    QTest::newRow("Z=2 drop, 1 frame, 1x1") << L{2, 8, 1, 1, 1} << 2 << true;
    QTest::newRow("Z=1 batch 2 odd") << L{2, 4, 2, 3, 7} << 1 << false;
  }

  void depth_to_space_matches_reference() {
    QFETCH(QList<int>, x);
    QFETCH(int, z);
    QFETCH(bool, drop);
    std::mt19937 rng(8);
    const HostTensor hx = random_tensor(shape_of(x), rng);
    ASSIGN_OK(Tensor y, be_->depth_to_space(up(hx), z, drop));
    QVERIFY(bit_equal(down(y), ref::depth_to_space(hx, z, drop)));
  }

  void depth_to_space_channel_order() {
    // Hand-checked against the spec: C = 1, Z = 2, 1x1 pixel, 1 frame. Channel k = (ih*2+iw)*2+it
    // lands at out[0, 0, it, ih, iw].
    std::vector<float> v(8);
    for (int k = 0; k < 8; ++k) v[size_t(k)] = float(k);
    const HostTensor hx = HostTensor::from_floats(Shape{1, 8, 1, 1, 1}, v);
    ASSIGN_OK(Tensor y, be_->depth_to_space(up(hx), 2, false));
    const HostTensor out = down(y);
    QCOMPARE(out.shape(), (Shape{1, 1, 2, 2, 2}));
    for (int it = 0; it < 2; ++it)
      for (int ih = 0; ih < 2; ++ih)
        for (int iw = 0; iw < 2; ++iw)
          QCOMPARE(out.f32()[size_t((it * 2 + ih) * 2 + iw)], float((ih * 2 + iw) * 2 + it));
  }

  void attention_matches_reference_data() {
    QTest::addColumn<QList<int>>("x");
    QTest::addColumn<int>("groups");
    QTest::addColumn<float>("wscale");  // multiplies 1/sqrt(C): larger = peakier softmax
    using L = QList<int>;
    QTest::newRow("32ch 4x4, 2 frames") << L{1, 32, 2, 4, 4} << 32 << 1.f;
    QTest::newRow("1 token") << L{1, 16, 2, 1, 1} << 8 << 1.f;
    QTest::newRow("odd tokens 3x5") << L{1, 24, 1, 3, 5} << 8 << 1.f;
    QTest::newRow("batch 2, 40ch, 7x9") << L{2, 40, 1, 7, 9} << 8 << 1.f;
    QTest::newRow("peaky softmax") << L{1, 16, 1, 5, 5} << 4 << 6.f;
    QTest::newRow("model width 512ch 4x5") << L{1, 512, 2, 4, 5} << 32 << 1.f;
    QTest::newRow("several query blocks 48x48") << L{1, 16, 1, 48, 48} << 4 << 1.f;
  }

  void attention_matches_reference() {
    QFETCH(QList<int>, x);
    QFETCH(int, groups);
    QFETCH(float, wscale);
    std::mt19937 rng(2024);
    const int64_t c = x[1];
    const float s = wscale / std::sqrt(float(c));
    ref::AttentionHost hw;
    hw.norm_weight = random_tensor(Shape{c}, rng, 0.5f, 1.f);
    hw.norm_bias = random_tensor(Shape{c}, rng, 0.5f);
    hw.wq = random_tensor(Shape{c, c}, rng, s);
    hw.wk = random_tensor(Shape{c, c}, rng, s);
    hw.wv = random_tensor(Shape{c, c}, rng, s);
    hw.wo = random_tensor(Shape{c, c}, rng, s);
    hw.bq = random_tensor(Shape{c}, rng, 0.5f);
    hw.bk = random_tensor(Shape{c}, rng, 0.5f);
    hw.bv = random_tensor(Shape{c}, rng, 0.5f);
    hw.bo = random_tensor(Shape{c}, rng, 0.5f);
    hw.groups = groups;
    hw.eps = 1e-6;
    AttentionWeights w;
    w.norm_weight = up(hw.norm_weight);
    w.norm_bias = up(hw.norm_bias);
    w.wq = up(hw.wq);
    w.wk = up(hw.wk);
    w.wv = up(hw.wv);
    w.wo = up(hw.wo);
    w.bq = up(hw.bq);
    w.bk = up(hw.bk);
    w.bv = up(hw.bv);
    w.bo = up(hw.bo);
    w.groups = groups;
    w.eps = 1e-6f;
    const HostTensor hx = random_tensor(shape_of(x), rng, 2.f);
    ASSIGN_OK(Tensor y, be_->attention(up(hx), w));
    CHECK_CLOSE(down(y), ref::attention(hx, hw));
  }

  // ---- the Wan VAEs' ops ---------------------------------------------------------------------
  void rms_norm_matches_reference() {
    std::mt19937 rng(31);
    // 3 channels (the tiny configurations' narrowest), 1 channel, odd sizes, model width 384
    for (const Shape& sh : {Shape{1, 3, 2, 5, 7}, Shape{1, 1, 1, 3, 3}, Shape{2, 17, 3, 4, 1},
                            Shape{1, 384, 1, 6, 5}}) {
      const HostTensor hx = random_tensor(sh, rng, 3.f);
      const HostTensor hg = random_tensor(Shape{sh[1]}, rng, 0.2f, 1.f);
      for (bool silu : {false, true}) {
        ASSIGN_OK(Tensor y, be_->rms_norm(up(hx), up(hg), {.silu = silu}));
        CHECK_CLOSE(down(y), ref::rms_norm(hx, &hg, silu));
        ASSIGN_OK(Tensor y1, be_->rms_norm(up(hx), Tensor{}, {.silu = silu}));
        CHECK_CLOSE(down(y1), ref::rms_norm(hx, nullptr, silu));
      }
    }
    // an all-zero channel vector stays zero (the 1e-12 floor, no NaN)
    const HostTensor z(DType::kF32, Shape{1, 4, 1, 2, 2});
    HostTensor zeros = z;
    std::fill(zeros.f32().begin(), zeros.f32().end(), 0.f);
    ASSIGN_OK(Tensor yz, be_->rms_norm(up(zeros), Tensor{}, {}));
    QVERIFY(bit_equal(down(yz), zeros));
  }

  void wan_copy_ops_are_exact() {
    std::mt19937 rng(32);
    for (const Shape& sh : {Shape{1, 6, 3, 4, 6}, Shape{2, 4, 1, 2, 2}, Shape{1, 12, 2, 8, 4}}) {
      const HostTensor hx = random_tensor(sh, rng);
      ASSIGN_OK(Tensor u, be_->upsample_nearest(up(hx)));
      QVERIFY(bit_equal(down(u), ref::upsample_nearest(hx)));
      for (int f : {1, 2}) {
        ASSIGN_OK(Tensor y, be_->frames_from_channels(up(hx), f));
        QVERIFY(bit_equal(down(y), ref::frames_from_channels(hx, f)));
      }
      ASSIGN_OK(Tensor p, be_->patchify(up(hx), 2));
      QVERIFY(bit_equal(down(p), ref::patchify(hx, 2)));
      ASSIGN_OK(Tensor back, be_->unpatchify(p, 2));
      QVERIFY(bit_equal(down(back), hx));
      if (sh[1] % 4 == 0) {
        ASSIGN_OK(Tensor q, be_->unpatchify(up(hx), 2));
        QVERIFY(bit_equal(down(q), ref::unpatchify(hx, 2)));
      }
      ASSIGN_OK(Tensor z, be_->zeros(sh));
      HostTensor hz(DType::kF32, sh);
      std::fill(hz.f32().begin(), hz.f32().end(), 0.f);
      QVERIFY(bit_equal(down(z), hz));
    }
    // patchify's channel order: the column offset is the more significant bit
    HostTensor px(DType::kF32, Shape{1, 1, 1, 2, 2});
    for (int i = 0; i < 4; ++i) px.f32()[size_t(i)] = float(i);  // value = row*2 + column
    ASSIGN_OK(Tensor pp, be_->patchify(up(px), 2));
    const HostTensor hp = down(pp);
    QCOMPARE(hp.f32()[1], 2.f);  // channel 1: dx 0, dy 1 -> row 1, column 0
    QCOMPARE(hp.f32()[2], 1.f);  // channel 2: dx 1, dy 0 -> row 0, column 1
    // time_conv's halves: channels [0, C) are the earlier frame
    HostTensor fx(DType::kF32, Shape{1, 2, 1, 1, 1});
    fx.f32()[0] = 5.f;
    fx.f32()[1] = 7.f;
    ASSIGN_OK(Tensor ff, be_->frames_from_channels(up(fx), 2));
    const HostTensor hf = down(ff);
    QCOMPARE(hf.shape(), (Shape{1, 1, 2, 1, 1}));
    QCOMPARE(hf.f32()[0], 5.f);
    QCOMPARE(hf.f32()[1], 7.f);
  }

  void avg_down_and_dup_up_match_reference() {
    std::mt19937 rng(33);
    struct Case {
      Shape x;
      int64_t cout;
      int ft, fs;
    };
    // the real instances' structure: (C, C, 1, 2), (C, 2C, 2, 2) with odd (first chunk) and even
    // frame counts, identity (1, 1); plus an uneven grouping
    for (const Case& c : {Case{{1, 4, 1, 4, 6}, 4, 1, 2}, Case{{1, 4, 1, 4, 4}, 8, 2, 2},
                          Case{{1, 4, 5, 2, 4}, 8, 2, 2}, Case{{1, 4, 4, 2, 2}, 8, 2, 2},
                          Case{{1, 6, 3, 2, 2}, 6, 1, 1}, Case{{2, 3, 2, 2, 2}, 6, 2, 2}}) {
      const HostTensor hx = random_tensor(c.x, rng);
      ASSIGN_OK(Tensor y, be_->avg_down(up(hx), {.out_channels = c.cout, .ft = c.ft, .fs = c.fs}));
      CHECK_CLOSE(down(y), ref::avg_down(hx, c.cout, c.ft, c.fs));
      CountingBackend counting;
      ASSIGN_OK(Tensor cy, counting.avg_down(counting.declare(c.x),
                                             {.out_channels = c.cout, .ft = c.ft, .fs = c.fs}));
      QCOMPARE(cy.shape, y.shape);
    }
    // DupUp3D: (C, C, 2, 2) r = 8, (C, C/2, 1, 2) r = 2, with and without the first-chunk drop
    for (const Case& c : {Case{{1, 8, 1, 2, 3}, 8, 2, 2}, Case{{1, 8, 3, 2, 2}, 8, 2, 2},
                          Case{{1, 8, 2, 3, 2}, 4, 1, 2}, Case{{1, 4, 2, 1, 1}, 2, 2, 1}}) {
      const HostTensor hx = random_tensor(c.x, rng);
      for (bool drop : {false, true}) {
        const DupUpParams p{.out_channels = c.cout, .ft = c.ft, .fs = c.fs, .drop_first = drop};
        ASSIGN_OK(Tensor y, be_->dup_up(up(hx), p));
        QVERIFY(bit_equal(down(y), ref::dup_up(hx, c.cout, c.ft, c.fs, drop)));
      }
    }
    // refused: spatial factor not dividing the frame, channels not dividing
    const Tensor odd = up(random_tensor(Shape{1, 4, 1, 3, 4}, rng));
    QCOMPARE(be_->avg_down(odd, {.out_channels = 4, .ft = 1, .fs = 2}).status().code(),
             StatusCode::kInvalidArgument);
    QCOMPARE(be_->dup_up(odd, {.out_channels = 3, .ft = 1, .fs = 1}).status().code(),
             StatusCode::kInvalidArgument);
  }

  void rms_attention_matches_reference() {
    std::mt19937 rng(34);
    for (const Shape& sh : {Shape{1, 16, 2, 4, 6}, Shape{1, 8, 1, 1, 1}, Shape{1, 12, 3, 2, 3},
                            Shape{1, 384, 1, 4, 5}, Shape{1, 8, 1, 48, 48}}) {
      const int64_t c = sh[1];
      const float s = 1.f / std::sqrt(float(c));
      ref::AttentionHost hw;
      hw.rms = true;
      hw.norm_weight = random_tensor(Shape{c}, rng, 0.2f, 1.f);
      hw.wq = random_tensor(Shape{c, c}, rng, s);
      hw.wk = random_tensor(Shape{c, c}, rng, s);
      hw.wv = random_tensor(Shape{c, c}, rng, s);
      hw.wo = random_tensor(Shape{c, c}, rng, s);
      hw.bq = random_tensor(Shape{c}, rng, 0.5f);
      hw.bk = random_tensor(Shape{c}, rng, 0.5f);
      hw.bv = random_tensor(Shape{c}, rng, 0.5f);
      hw.bo = random_tensor(Shape{c}, rng, 0.5f);
      RmsAttentionWeights w{up(hw.norm_weight), up(hw.wq), up(hw.bq), up(hw.wk), up(hw.bk),
                            up(hw.wv),          up(hw.bv), up(hw.wo), up(hw.bo)};
      const HostTensor hx = random_tensor(sh, rng, 2.f);
      ASSIGN_OK(Tensor y, be_->rms_attention(up(hx), w));
      CHECK_CLOSE(down(y), ref::attention(hx, hw));
    }
  }

  void memory_stats_track_allocations() {
    const MemoryStats base = be_->memory_stats();
    QVERIFY(base.current_bytes >= 0);
    be_->reset_peak();
    QCOMPARE(be_->memory_stats().peak_bytes, base.current_bytes);
    const int64_t big_bytes = int64_t{64} << 20;
    {
      HostTensor h(DType::kF32, Shape{1, 16, 4, 512, 512});  // 64 MiB
      QCOMPARE(h.nbytes(), big_bytes);
      ASSIGN_OK(Tensor t, be_->upload(h));
      const Tensor alias = t;  // shares storage: no new bytes
      const MemoryStats during = be_->memory_stats();
      QCOMPARE(during.current_bytes, base.current_bytes + big_bytes);
      QVERIFY(during.peak_bytes >= base.current_bytes + big_bytes);
      QCOMPARE(during.device_used_bytes, int64_t{-1});
      ASSIGN_OK(Tensor s, be_->slice_frames(t, 1, 3));  // half of it
      QCOMPARE(be_->memory_stats().current_bytes, base.current_bytes + big_bytes + big_bytes / 2);
    }
    const MemoryStats after = be_->memory_stats();
    QCOMPARE(after.current_bytes, base.current_bytes);
    QVERIFY(after.peak_bytes >= base.current_bytes + big_bytes + big_bytes / 2);
    be_->reset_peak();
    QCOMPARE(be_->memory_stats().peak_bytes, base.current_bytes);
  }

  void conv3d_temporaries_are_counted_and_freed() {
    std::mt19937 rng(1);
    const HostTensor hx = random_tensor(Shape{1, 32, 3, 16, 16}, rng);
    const HostTensor hw = random_tensor(Shape{32, 32, 3, 3, 3}, rng, 0.05f);
    ASSIGN_OK(Tensor w, be_->upload_weight(hw, "w"));
    const Tensor x = up(hx);
    be_->reset_peak();
    const int64_t before = be_->memory_stats().current_bytes;
    Conv3dParams p;
    p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
    {
      ASSIGN_OK(Tensor y, be_->conv3d(x, w, Tensor{}, p));
      const int64_t ybytes = y.shape.numel() * 4;
      // The output plus, possibly, the packed weight copy kept on w.
      QVERIFY(be_->memory_stats().current_bytes >= before + ybytes);
      QVERIFY(be_->memory_stats().peak_bytes >= be_->memory_stats().current_bytes);
    }
    const int64_t with_pack = be_->memory_stats().current_bytes;
    QVERIFY(with_pack >= before);
    QVERIFY(with_pack <= before + hw.nbytes() * 2);  // at most one (padded) weight pack
    w = Tensor{};                                    // frees the weight and its pack
    QVERIFY(be_->memory_stats().current_bytes <= with_pack - hw.nbytes());
  }

  void shape_mismatch_is_an_error_not_a_crash() {
    std::mt19937 rng(4);
    const Tensor x = up(random_tensor(Shape{1, 8, 3, 4, 4}, rng));
    const Tensor w_bad = up(random_tensor(Shape{8, 6, 3, 3, 3}, rng));
    auto expect_invalid = [](const Status& s, const char* op) {
      QVERIFY2(!s.is_ok(), op);
      QCOMPARE(s.code(), StatusCode::kInvalidArgument);
      QVERIFY2(s.message().find(op) != std::string::npos, s.message().c_str());
    };
    auto r1 = be_->conv3d(x, w_bad, Tensor{}, Conv3dParams{});
    expect_invalid(r1.status(), "conv3d");
    QVERIFY(r1.status().message().find("[8, 6, 3, 3, 3]") != std::string::npos);
    const Tensor w_big = up(random_tensor(Shape{8, 8, 5, 3, 3}, rng));
    expect_invalid(be_->conv3d(x, w_big, Tensor{}, Conv3dParams{}).status(), "conv3d");
    const Tensor w_ok = up(random_tensor(Shape{8, 8, 3, 3, 3}, rng));
    expect_invalid(be_->conv3d(x, w_ok, up(random_tensor(Shape{7}, rng)), Conv3dParams{}).status(),
                   "conv3d");
    Conv3dParams zero_stride;
    zero_stride.stride_h = 0;
    expect_invalid(be_->conv3d(x, w_ok, Tensor{}, zero_stride).status(), "conv3d");
    expect_invalid(be_->conv3d(Tensor{}, w_ok, Tensor{}, Conv3dParams{}).status(), "conv3d");

    Tensor acc = up(random_tensor(Shape{1, 8, 2, 4, 4}, rng));
    expect_invalid(be_->add_inplace(acc, x), "add_inplace");
    expect_invalid(be_->concat_frames(x, up(random_tensor(Shape{1, 8, 2, 4, 5}, rng))).status(),
                   "concat_frames");
    const Tensor mem = up(random_tensor(Shape{1, 4, 2, 4, 4}, rng));
    expect_invalid(be_->causal_pad(x, &mem, 2).status(), "causal_pad");
    expect_invalid(be_->slice_frames(x, 2, 5).status(), "slice_frames");
    expect_invalid(be_->group_norm(x, Tensor{}, Tensor{}, {.groups = 3}).status(), "group_norm");
    expect_invalid(
        be_->group_norm(x, up(random_tensor(Shape{4}, rng)), Tensor{}, {.groups = 2}).status(),
        "group_norm");
    expect_invalid(
        be_->depth_to_space(up(random_tensor(Shape{1, 12, 1, 2, 2}, rng)), 2, false).status(),
        "depth_to_space");
    expect_invalid(be_->depth_to_space(x, 1, true).status(), "depth_to_space");
    {  // the dry-run backend shares the same check (depth_to_space_shape)
      CountingBackend cb;
      ASSIGN_OK(Tensor cx, cb.upload(random_tensor(Shape{1, 12, 1, 2, 2}, rng)));
      expect_invalid(cb.depth_to_space(cx, 2, false).status(), "depth_to_space");
    }
    AttentionWeights aw;  // all undefined
    aw.groups = 4;
    expect_invalid(be_->attention(x, aw).status(), "attention");
    const Tensor four_d = up(random_tensor(Shape{8, 3, 4, 4}, rng));
    expect_invalid(be_->group_norm(four_d, Tensor{}, Tensor{}, {.groups = 2}).status(),
                   "group_norm");
  }

  void out_of_memory_is_a_status() {
    std::mt19937 rng(6);
    const Tensor x = up(random_tensor(Shape{1, 16, 1, 16, 16}, rng));
    const int64_t before = be_->memory_stats().current_bytes;
    // 2^31 frames of 16 x 16 x 16 floats: 32 TiB.
    auto r = be_->causal_pad(x, nullptr, 2147483647 - 1);
    QVERIFY(!r.is_ok());
    QCOMPARE(r.status().code(), StatusCode::kOutOfMemory);
    QVERIFY2(r.status().message().find("[1, 16, 2147483647, 16, 16]") != std::string::npos,
             r.status().message().c_str());
    QCOMPARE(be_->memory_stats().current_bytes, before);
  }
};

QTEST_GUILESS_MAIN(tst_CpuOps)
#include "tst_cpu_ops.moc"
