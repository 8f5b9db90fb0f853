// FP8 numerics (core/backend/fp8_numerics.h): the e4m3 rounding against values worked out by
// hand, the per-row scales, the wrapper's convolutions against the CPU backend's on rounded
// operands (and untouched where an FP8 engine would leave them), and what FP8 convolutions do to
// a decode, measured: the trained demo model on the held-out natural clips and the real
// configuration (synthetic weights) on a random latent, each decoded with and without FP8
// numerics from the same latent (CPU backend, fp32), PSNR printed and bounded.
#include <QtTest>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "core/backend/fp8_numerics.h"
#include "core/cpu/cpu_backend.h"
#include "core/media/metrics.h"
#include "core/media/video_io.h"
#include "core/schedule/streaming.h"
#include "core/vae/state_dict.h"
#include "core/vae/vae_model.h"

using namespace seedvae;

namespace {

HostTensor random_tensor(const Shape& s, uint32_t seed, float scale = 1.f) {
  HostTensor t(DType::kF32, s);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (float& v : t.f32()) v = scale * u(rng);
  return t;
}

std::unique_ptr<Backend> cpu_backend() {
  auto b = create_cpu_backend({});
  if (!b) qFatal("%s", b.status().to_string().c_str());
  return std::move(b).value();
}

// The largest difference between two tensors of one shape (-1 when they differ in shape).
double max_diff(const HostTensor& a, const HostTensor& b) {
  if (a.shape() != b.shape()) return -1;
  const auto x = a.f32();
  const auto y = b.f32();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(double(x[i]) - double(y[i])));
  return m;
}

// Decodes `latent` with `weights` on the CPU backend, with or without FP8 numerics.
HostTensor decode(const VaeWeights& weights, const HostTensor& latent, bool fp8) {
  auto cpu = cpu_backend();
  std::unique_ptr<Backend> wrapped = fp8 ? make_fp8_numerics_backend(*cpu) : nullptr;
  Backend& b = fp8 ? *wrapped : *cpu;
  auto m = VaeModel::create(b, weights);
  if (!m) qFatal("%s", m.status().to_string().c_str());
  auto r = decode_latent(*m, latent, {1});
  if (!r) qFatal("%s", r.status().to_string().c_str());
  return std::move(r).value();
}

}  // namespace

class tst_Fp8Numerics : public QObject {
  Q_OBJECT

 private slots:
  void roundsToE4m3() {
    // normals: 3 mantissa bits; ties to the even mantissa
    QCOMPARE(round_to_e4m3(1.0f), 1.0f);
    QCOMPARE(round_to_e4m3(1.0625f), 1.0f);   // halfway 1 / 1.125: even is 1.0
    QCOMPARE(round_to_e4m3(1.1875f), 1.25f);  // halfway 1.125 / 1.25: even is 1.25
    QCOMPARE(round_to_e4m3(1.2f), 1.25f);
    QCOMPARE(round_to_e4m3(-3.3f), -3.25f);  // steps of 0.25 in [2, 4)
    QCOMPARE(round_to_e4m3(300.f), 288.f);   // steps of 32 in [256, 448]
    QCOMPARE(round_to_e4m3(440.f), 448.f);
    QCOMPARE(round_to_e4m3(1000.f), 448.f);  // saturates
    QCOMPARE(round_to_e4m3(-1e30f), -448.f);
    // subnormals: steps of 2^-9 below 2^-6
    QCOMPARE(round_to_e4m3(std::ldexp(1.f, -6)), std::ldexp(1.f, -6));
    QCOMPARE(round_to_e4m3(std::ldexp(3.f, -10)), std::ldexp(1.f, -8));  // 1.5 steps -> 2
    QCOMPARE(round_to_e4m3(std::ldexp(1.f, -10)), 0.f);                  // half a step -> 0
    QCOMPARE(round_to_e4m3(0.f), 0.f);
    QVERIFY(std::isnan(round_to_e4m3(std::nanf(""))));
  }

  void quantisesEachRowAtItsOwnScale() {
    std::vector<float> v{0.5f, -2.f, 0.3f, 0.f, 0.f, 0.f, 1e-3f, 7e-3f, -1e-4f};
    fake_quantize_e4m3(v.data(), 9, 3);
    QCOMPARE(v[1], -2.f);  // each row's largest magnitude is exact (448 x its scale)
    QCOMPARE(v[7], 7e-3f);
    QCOMPARE(v[3], 0.f);  // a zero row stays zero
    // 0.3 at scale 2/448: 67.2 -> 64 (steps of 8 in [64, 128))
    QVERIFY(std::abs(v[2] - 64.f * 2.f / 448.f) < 1e-7f);
    QVERIFY(std::abs(v[0] - 0.5f) < 1e-7f);  // 112 is an e4m3 value
  }

  // Convolutions of 16 or more channels run on rounded operands; others are untouched.
  void wrapsTheConvolutions() {
    auto cpu = cpu_backend();
    auto fp8 = make_fp8_numerics_backend(*cpu);
    Conv3dParams p;
    p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
    const HostTensor xh = random_tensor({1, 32, 3, 6, 5}, 1);
    const HostTensor wh = random_tensor({32, 32, 3, 3, 3}, 2, 0.05f);
    const HostTensor bh = random_tensor({32}, 3, 0.1f);
    auto x = cpu->upload(xh);
    auto w = cpu->upload_weight(wh, "w");
    auto b = cpu->upload_weight(bh, "b");
    QVERIFY(x && w && b);
    auto got = fp8->conv3d(*x, *w, *b, p);
    QVERIFY2(got.is_ok(), got.status().to_string().c_str());
    HostTensor xq = xh, wq = wh;
    fake_quantize_e4m3(xq.f32().data(), xq.shape().numel(), 1);
    fake_quantize_e4m3(wq.f32().data(), wq.shape().numel(), 32);
    auto xr = cpu->upload(xq);
    auto wr = cpu->upload_weight(wq, "wq");
    auto want = cpu->conv3d(*xr, *wr, *b, p);
    auto plain = cpu->conv3d(*x, *w, *b, p);
    QVERIFY(want && plain);
    const HostTensor g = *cpu->download(*got), e = *cpu->download(*want),
                     u = *cpu->download(*plain);
    QCOMPARE(max_diff(g, e), 0.0);   // the same arithmetic on the same rounded values
    QVERIFY(max_diff(g, u) > 1e-3);  // and the rounding is real
    // the model's output convolution and a 3-channel one stay as they are
    Conv3dParams out = p;
    out.model_output = true;
    auto o1 = fp8->conv3d(*x, *w, *b, out);
    auto o2 = cpu->conv3d(*x, *w, *b, out);
    QVERIFY(o1 && o2);
    QCOMPARE(max_diff(*cpu->download(*o1), *cpu->download(*o2)), 0.0);
    auto x3 = cpu->upload(random_tensor({1, 3, 3, 6, 5}, 4));
    auto w3 = cpu->upload_weight(random_tensor({32, 3, 3, 3, 3}, 5, 0.2f), "w3");
    auto c1 = fp8->conv3d(*x3, *w3, *b, p);
    auto c2 = cpu->conv3d(*x3, *w3, *b, p);
    QVERIFY(c1 && c2);
    QCOMPARE(max_diff(*cpu->download(*c1), *cpu->download(*c2)), 0.0);
  }

  // What FP8 convolutions do to a decode: PSNR against the same latent decoded without them.
  void measuresTheDecode() {
    struct Case {
      std::string name;
      VaeWeights weights;
      HostTensor latent;
      double floor_db, ceiling_db;
    };
    std::vector<Case> cases;
    auto demo = load_weights(SEEDVAE_DEMO_WEIGHTS);
    QVERIFY2(demo.is_ok(), demo.status().to_string().c_str());
    for (const char* clip : {"ladybird", "boats"}) {
      auto c = media::read_clip(std::filesystem::path(SEEDVAE_DEMO_CLIPS_DIR) / clip);
      QVERIFY2(c.is_ok(), c.status().to_string().c_str());
      auto cpu = cpu_backend();
      auto m = VaeModel::create(*cpu, *demo);
      QVERIFY(m.is_ok());
      auto moments = encode_video(*m, c->video, {1});
      QVERIFY2(moments.is_ok(), moments.status().to_string().c_str());
      cases.push_back({std::string("demo model, ") + clip, *demo, moments_mean(*moments), 15, 60});
    }
    const VaeWeights real = synthetic_weights("real").value();
    cases.push_back({"real configuration (synthetic weights), random latent", real,
                     random_tensor({1, 16, 2, 8, 8}, 11), 15, 60});
    for (const Case& c : cases) {
      const HostTensor ref = decode(c.weights, c.latent, false);
      const HostTensor got = decode(c.weights, c.latent, true);
      auto q = media::compare_clips(got, ref);
      QVERIFY2(q.is_ok(), q.status().to_string().c_str());
      std::printf(
          "FP8 numerics, %s: decode PSNR %.2f dB, SSIM %.4f, max abs %.3e, rms %.3e "
          "against the fp32 decode of the same latent\n",
          c.name.c_str(), q->psnr_db, q->ssim, q->max_abs, q->rms);
      // bounds that only catch a broken measurement: no rounding at all, or garbage
      QVERIFY(q->psnr_db > c.floor_db);
      QVERIFY(q->psnr_db < c.ceiling_db);
    }
  }
};

QTEST_GUILESS_MAIN(tst_Fp8Numerics)
#include "tst_fp8_numerics.moc"
