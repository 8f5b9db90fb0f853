// Stage telemetry on the CPU backend (core/base/telemetry.h): samples arrive for every top-level
// block, labelled by chunk and tile; device_ms is -1 ("no device timer"); the "chunk" / "tile"
// summaries reach only sinks that want them and span their stages. The CUDA side of the contract
// (device_ms > 0, stages <= summary) is tests/gpu/test_telemetry.cpp.
#include <QtTest>

#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/backend/counting_backend.h"
#include "core/cpu/cpu_backend.h"
#include "core/schedule/streaming.h"
#include "core/schedule/tiled.h"
#include "core/vae/state_dict.h"
#include "tests/support/telemetry_recorder.h"

using namespace seedvae;

namespace {

HostTensor random_tensor(Shape s, uint64_t seed) {
  HostTensor t(DType::kF32, std::move(s));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (float& v : t.f32()) v = u(rng);
  return t;
}

using Recorder = test::TelemetryRecorder;
using test::is_summary;

}  // namespace

class tst_Telemetry : public QObject {
  Q_OBJECT

  std::unique_ptr<Backend> backend_;
  std::optional<VaeModel> model_;

  // Every sample: no device time on the CPU, sane wall time and memory. Summaries (when wanted):
  // exactly one per (chunk, tile) that has stages, after them, named `summary`, and at least as
  // long as its stages together (same clock, stages inside the summary's span).
  void checkSamples(const std::vector<StageSample>& v, bool summaries, const char* summary) {
    std::map<std::pair<int64_t, int64_t>, double> stage_wall;
    std::map<std::pair<int64_t, int64_t>, double> summary_wall;
    for (const StageSample& s : v) {
      QCOMPARE(s.device_ms, -1.0);
      QVERIFY(s.wall_ms >= 0);
      QVERIFY(s.current_bytes > 0);
      QVERIFY(s.peak_bytes >= s.current_bytes);
      QCOMPARE(s.device_used_bytes, int64_t{-1});
      const auto key = std::make_pair(s.chunk, s.tile);
      QVERIFY(s.chunk >= 0);
      if (is_summary(s)) {
        QVERIFY(summaries);
        QCOMPARE(s.stage, std::string(summary));
        QVERIFY2(!summary_wall.count(key), "one summary per chunk and tile");
        summary_wall[key] = s.wall_ms;
      } else {
        QVERIFY2(!summary_wall.count(key), "stages come before their summary");
        QVERIFY2(s.stage.rfind("encoder.", 0) == 0 || s.stage.rfind("decoder.", 0) == 0,
                 s.stage.c_str());
        stage_wall[key] += s.wall_ms;
      }
    }
    QVERIFY(!stage_wall.empty());
    if (!summaries) return;
    QCOMPARE(summary_wall.size(), stage_wall.size());
    for (const auto& [key, sum] : stage_wall) {
      QVERIFY(summary_wall.count(key));
      QVERIFY2(sum <= summary_wall[key] + 1e-6,
               (std::to_string(sum) + " > " + std::to_string(summary_wall[key])).c_str());
    }
  }

 private slots:
  void initTestCase() {
    auto b = create_cpu_backend();
    QVERIFY2(b.is_ok(), b.status().to_string().c_str());
    backend_ = std::move(*b);
    auto m = VaeModel::create(*backend_, synthesize_weights(VaeConfig::tiny(), kTinySeed));
    QVERIFY2(m.is_ok(), m.status().to_string().c_str());
    model_.emplace(std::move(*m));
  }

  // Backends without a device timer: no span, no time, never an error.
  void noDeviceTimer() {
    QCOMPARE(backend_->begin_device_span(), int64_t{-1});
    QCOMPARE(backend_->end_device_span(-1), -1.0);
    QCOMPARE(backend_->end_device_span(0), -1.0);
    CountingBackend counting;
    QCOMPARE(counting.begin_device_span(), int64_t{-1});
    QCOMPARE(counting.end_device_span(3), -1.0);
  }

  void streamedStages_data() {
    QTest::addColumn<bool>("encode");
    QTest::addColumn<bool>("summaries");
    QTest::addColumn<int>("hires");
    QTest::addColumn<bool>("deferred");
    QTest::newRow("decode") << false << false << 0 << false;
    QTest::newRow("decode, summaries") << false << true << 0 << false;
    QTest::newRow("decode, summaries, hires-chunk 1") << false << true << 1 << false;
    QTest::newRow("encode") << true << false << 0 << false;
    QTest::newRow("encode, summaries, hires-chunk 2") << true << true << 2 << false;
    // Without a device timer a deferred sink gets the synchronised samples, as they happen.
    QTest::newRow("decode, deferred") << false << false << 0 << true;
    QTest::newRow("encode, summaries, deferred") << true << true << 0 << true;
  }

  void streamedStages() {
    QFETCH(bool, encode);
    QFETCH(bool, summaries);
    QFETCH(int, hires);
    QFETCH(bool, deferred);
    VaeModel& m = *model_;
    const HostTensor in =
        encode ? random_tensor({1, 3, 9, 32, 32}, 1) : random_tensor({1, 16, 3, 4, 4}, 2);
    Recorder rec(summaries, deferred ? TelemetrySink::StageTiming::kDeferred
                                     : TelemetrySink::StageTiming::kSynchronized);
    m.set_telemetry(&rec);
    const StreamOptions so{.chunk_latents = 1, .hires_chunk_frames = hires};
    // every sample of a chunk is in when the chunk is handed on
    StreamHooks hooks;
    hooks.on_chunk = [&](int64_t, const HostTensor&) {
      return rec.samples.empty() ||
                     rec.samples.back().stage.find("conv_out") != std::string::npos ||
                     is_summary(rec.samples.back())
                 ? Status::ok()
                 : internal_error("chunk handed on before its last stage sample");
    };
    auto r = encode ? encode_video(m, in, so, hooks) : decode_latent(m, in, so, hooks);
    m.set_telemetry(nullptr);
    QVERIFY2(r.is_ok(), r.status().to_string().c_str());
    checkSamples(rec.samples, summaries, "chunk");
    // Chunks 0 and 1 (3 latents / 9 frames at 1 latent per chunk: [0, 2), [2, 3)), untiled, and
    // the first and last block of the model among the stages.
    std::vector<int64_t> chunks;
    bool first = false, last = false;
    for (const StageSample& s : rec.samples) {
      QCOMPARE(s.tile, int64_t{-1});
      if (chunks.empty() || chunks.back() != s.chunk) chunks.push_back(s.chunk);
      first |= s.stage == (encode ? "encoder.conv_in" : "decoder.conv_in");
      last |= s.stage == (encode ? "encoder.conv_out" : "decoder.conv_out");
    }
    QCOMPARE(chunks, (std::vector<int64_t>{0, 1}));
    QVERIFY(first && last);
    int n_summaries = 0;
    for (const StageSample& s : rec.samples) n_summaries += is_summary(s);
    QCOMPARE(n_summaries, summaries ? 2 : 0);
  }

  void blendedTiles_data() {
    QTest::addColumn<bool>("summaries");
    QTest::addColumn<int>("order");
    QTest::newRow("chunk-major") << false << static_cast<int>(TileOrder::kChunkMajor);
    QTest::newRow("chunk-major, summaries") << true << static_cast<int>(TileOrder::kChunkMajor);
    QTest::newRow("tile-major, summaries") << true << static_cast<int>(TileOrder::kTileMajor);
  }

  void blendedTiles() {
    QFETCH(bool, summaries);
    QFETCH(int, order);
    VaeModel& m = *model_;
    TileOptions to;
    to.mode = TilingMode::kBlend;
    to.spec = {24, 24, 8, 8};
    to.layout = TileLayout::kUniform;
    to.order = static_cast<TileOrder>(order);
    TileRunReport report;
    TileHooks th;
    th.report = &report;
    Recorder rec(summaries);
    m.set_telemetry(&rec);
    auto r = tiled_decode(m, random_tensor({1, 16, 3, 5, 5}, 3), to, {1}, {}, &th);
    m.set_telemetry(nullptr);
    QVERIFY2(r.is_ok(), r.status().to_string().c_str());
    QVERIFY(report.tiles_run > 2);
    checkSamples(rec.samples, summaries, "tile");
    int n_summaries = 0;
    for (const StageSample& s : rec.samples) {
      QVERIFY(s.tile >= 0);
      n_summaries += is_summary(s);
    }
    QCOMPARE(static_cast<int64_t>(n_summaries), summaries ? report.tiles_run : 0);
  }
};

QTEST_GUILESS_MAIN(tst_Telemetry)
#include "tst_telemetry.moc"
