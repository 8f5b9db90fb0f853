// Exact segments (core/schedule/segments.h): the decoders' temporal reach, and a stretch of a
// clip decoded from `reach` latent frames before it equal, bit for bit, to the whole-clip decode's
// frames -- SeedVR2, Wan2.1 and Wan2.2 (tiny configurations, CPU backend), with upstream's
// chunking and with longer chunks; one frame less of warm-up is not exact (the reach is tight).
#include <QtTest>

#include <random>

#include "core/schedule/segments.h"
#include "core/vae/wan_model.h"
#include "tests/support/synthetic_video.h"
#include "tests/support/tiny_model.h"

using namespace seedvae;

namespace {

// Decodes the whole latent, then [begin, end) from its segment start; the range must equal the
// whole decode's frames exactly, and with one latent frame less of warm-up it must not.
void check_segment(VideoVae& model, const HostTensor& latent, int64_t begin, int64_t end,
                   const StreamOptions& options, const std::string& what) {
  auto whole = decode_latent(model, latent, options);
  QVERIFY2(whole.is_ok(), whole.status().to_string().c_str());
  const FrameRange fr = frames_of_latents(begin, end, model.temporal_factor());
  const HostTensor want = slice_time(*whole, fr.begin, fr.end);
  const int64_t reach = model.decoder_reach();
  const int64_t s = segment_start(begin, reach, options);
  QVERIFY2(s > 0, (what + ": the test needs a segment that starts after the clip").c_str());
  // only the window the segment needs, as a task of a batch engine would hold it
  const HostTensor window = slice_time(latent, s, latent.shape()[2]);
  auto got = decode_range(model, window, s, begin, end, options);
  QVERIFY2(got.is_ok(), got.status().to_string().c_str());
  QCOMPARE(got->shape(), want.shape());
  auto d = compare(*got, want);
  QVERIFY(d.is_ok());
  qInfo("%s: reach %lld, segment from latent %lld: max abs %.3g", what.c_str(),
        static_cast<long long>(reach), static_cast<long long>(s), d->max_abs);
  QVERIFY2(d->max_abs == 0.0, (what + ": not bit-identical").c_str());
  // a window that starts later is refused, not decoded wrongly
  auto short_window =
      decode_range(model, slice_time(latent, s + 1, latent.shape()[2]), s + 1, begin, end, options);
  QVERIFY(!short_window.is_ok());
  QCOMPARE(short_window.status().code(), StatusCode::kInvalidArgument);
  // one frame less of warm-up: the first kept frames differ
  if (options.chunk_latents == 1) {
    auto early = decode_range(model, latent, 0, begin, end, options, {}, reach - 1);
    QVERIFY2(early.is_ok(), early.status().to_string().c_str());
    auto e = compare(*early, want);
    QVERIFY(e.is_ok());
    qInfo("%s: with reach %lld: max abs %.3g", what.c_str(), static_cast<long long>(reach - 1),
          e->max_abs);
    QVERIFY2(e->max_abs > 0.0, (what + ": the reach is not tight").c_str());
  }
}

}  // namespace

class TstSegments : public QObject {
  Q_OBJECT

 private slots:
  void frameArithmetic() {
    QCOMPARE(frames_of_latents(0, 1, 4).begin, int64_t{0});
    QCOMPARE(frames_of_latents(0, 1, 4).end, int64_t{1});
    QCOMPARE(frames_of_latents(1, 3, 4).begin, int64_t{1});
    QCOMPARE(frames_of_latents(1, 3, 4).end, int64_t{9});
    QCOMPARE(frames_of_latents(5, 6, 4).begin, int64_t{17});
    QCOMPARE(frames_of_latents(5, 6, 4).end, int64_t{21});
    StreamOptions one;  // upstream: chunks of 1 latent, a first chunk of 2
    QCOMPARE(segment_start(100, 37, one), int64_t{63});
    QCOMPARE(segment_start(30, 37, one), int64_t{0});
    StreamOptions four{.chunk_latents = 4};  // boundaries 1 + 4k; first chunk 5 latents
    QCOMPARE(segment_start(100, 37, four), int64_t{60});
    StreamOptions head{.chunk_latents = 4, .lone_head = true};
    QCOMPARE(segment_start(100, 37, head), int64_t{60});
    StreamOptions big{.chunk_latents = 64};  // the warm-up chunk must end by `begin`
    QCOMPARE(segment_start(100, 37, big), int64_t{0});
    QCOMPARE(segment_start(200, 37, big), int64_t{128});
    StreamOptions whole{.chunk_latents = 0};
    QCOMPARE(segment_start(100, 37, whole), int64_t{63});
  }

  void reaches() {
    test::TinyCpuModel m;
    QVERIFY(test::make_tiny_cpu_model(m).is_ok());
    QCOMPARE(m.model->decoder_reach(), int64_t{37});
    auto cpu = create_cpu_backend();
    QVERIFY(cpu.is_ok());
    for (const WanConfig& c : {WanConfig::wan21(), WanConfig::wan22()}) {
      // the real and tiny configurations share the structure, so the reach
      const WanConfig tiny =
          c.family == VaeFamily::kWan21 ? WanConfig::wan21_tiny() : WanConfig::wan22_tiny();
      auto w = WanModel::create(**cpu, synthesize_wan_weights(tiny, 1));
      QVERIFY(w.is_ok());
      qInfo("%s: decoder reach %lld latent frames", std::string(family_name(c.family)).c_str(),
            static_cast<long long>(w->decoder_reach()));
      QCOMPARE(w->decoder_reach(), int64_t{38});
    }
  }

  void seedvr2SegmentEqualsWholeClip() {
    test::TinyCpuModel m;
    QVERIFY(test::make_tiny_cpu_model(m).is_ok());
    const int64_t reach = m.model->decoder_reach();
    const HostTensor z = test::random_latent(16, reach + 8, 2, 2, 11);
    check_segment(*m.model, z, reach + 5, reach + 8, {}, "SeedVR2, chunks of 1");
    check_segment(*m.model, z, reach + 6, reach + 8, {.chunk_latents = 2, .lone_head = true},
                  "SeedVR2, lone head and chunks of 2");
  }

  void wanSegmentEqualsWholeClip() {
    auto cpu = create_cpu_backend();
    QVERIFY(cpu.is_ok());
    for (const WanConfig& c : {WanConfig::wan21_tiny(), WanConfig::wan22_tiny()}) {
      auto w =
          WanModel::create(**cpu, synthesize_wan_weights(c, wan_reference_seed(c.family, false)));
      QVERIFY(w.is_ok());
      const int64_t reach = w->decoder_reach();
      const HostTensor z = test::random_latent(c.z_dim, reach + 6, 2, 2, 12);
      check_segment(*w, z, reach + 3, reach + 6, {.chunk_latents = 1, .lone_head = true},
                    std::string(family_name(c.family)) + ", upstream chunking");
    }
  }
};

QTEST_GUILESS_MAIN(TstSegments)
#include "tst_segments.moc"
