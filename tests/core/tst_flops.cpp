// The dry-run CountingBackend reproduces the analytic FLOP counts of docs/model.md §7 and its
// memory profile matches the CPU backend's real allocations.
#include <QtTest>

#include <cmath>
#include <vector>

#include "core/backend/counting_backend.h"
#include "core/cpu/cpu_backend.h"
#include "core/pipeline/bench.h"
#include "core/schedule/streaming.h"

using namespace seedvae;

class tst_Flops : public QObject {
  Q_OBJECT

 private slots:
  void wholeClipFlopsMatchSpec_data() {
    QTest::addColumn<bool>("encode");
    QTest::addColumn<int>("height");
    QTest::addColumn<int>("width");
    QTest::addColumn<double>("tflop");
    // docs/model.md §7.1: encode 40.8 / 331.9 TFLOP, decode 106.4 / 851.4 TFLOP at 512² / 1080p.
    QTest::newRow("encode 512") << true << 512 << 512 << 40.8;
    QTest::newRow("decode 512") << false << 512 << 512 << 106.4;
    QTest::newRow("encode 1080p") << true << 1080 << 1920 << 331.9;
    QTest::newRow("decode 1080p") << false << 1080 << 1920 << 851.4;
  }
  void wholeClipFlopsMatchSpec() {
    QFETCH(bool, encode);
    QFETCH(int, height);
    QFETCH(int, width);
    QFETCH(double, tflop);
    auto f = count_flops(VaeConfig::real(), encode, 17, height, width, 0);
    QVERIFY2(f.is_ok(), f.status().to_string().c_str());
    const double got = *f / 1e12;
    // The spec rounds to 0.1 TFLOP.
    QVERIFY2(std::abs(got - tflop) <= 0.05 + 1e-4 * tflop,
             (std::to_string(got) + " TFLOP vs spec " + std::to_string(tflop)).c_str());
  }

  // Streaming adds only the upsamplers' rebuilt causal memory: every later chunk upscales again
  // the low-resolution frames the previous one kept (VaeModel::upsample), 2 frames at a spatial
  // level and 1 at a temporal one, through the 1x1x1 upscale_conv (C -> 4C or 8C).
  void streamingAddsOnlyTheRebuiltUpsamplerMemory() {
    const VaeConfig c = VaeConfig::real();
    auto whole = count_flops(c, false, 17, 64, 64, 0);
    auto sliced = count_flops(c, false, 17, 64, 64, 1);
    QVERIFY(whole.is_ok() && sliced.is_ok());
    const std::vector<int64_t> rev(c.block_out_channels.rbegin(), c.block_out_channels.rend());
    double per_chunk = 0;
    int64_t pixels = (64 / c.spatial_factor()) * (64 / c.spatial_factor());
    for (int l = 0; l < c.levels() - 1; ++l) {
      const double ch = static_cast<double>(rev[static_cast<size_t>(l)]);
      const bool temporal = c.decoder_temporal_up(l);
      per_chunk +=
          2.0 * ch * ((temporal ? 8 : 4) * ch) * (temporal ? 1 : 2) * static_cast<double>(pixels);
      pixels *= 4;
    }
    // Chunks after the first (17 frames = 5 latent frames; plan_chunks decides the split). The
    // first chunk has more than one latent frame, so every level keeps its low-resolution frames.
    const auto chunks = plan_chunks(5, 1);
    QVERIFY(chunks.front().second - chunks.front().first > 1);
    const double later_chunks = static_cast<double>(chunks.size() - 1);
    QCOMPARE(*sliced, *whole + later_chunks * per_chunk);
    QVERIFY(later_chunks * per_chunk < 5e-3 * *whole);  // and it stays under 0.5 %
  }

  // The dry run counts the op outputs the model keeps alive plus what the CPU memory model adds
  // (oneDNN's convolution scratchpad, the attention's buffers): after a warm-up run (which packs
  // the weights once) the CPU backend's activation peak equals the dry run's within 1 %.
  void dryRunPeakMatchesCpuBackend() {
    const VaeWeights w = synthesize_weights(VaeConfig::tiny(), 3);
    CountingBackend cb;
    auto cpu = create_cpu_backend();
    QVERIFY(cpu.is_ok());
    const HostTensor z(DType::kF32, {1, 16, 5, 6, 5});
    int64_t peaks[2];
    Backend* backends[2] = {&cb, cpu->get()};
    for (int i = 0; i < 2; ++i) {
      auto m = VaeModel::create(*backends[i], w);
      QVERIFY(m.is_ok());
      QVERIFY(decode_latent(*m, z, {1}).is_ok());  // warm-up: weight packing, plan caches
      const int64_t base = backends[i]->memory_stats().current_bytes;
      backends[i]->reset_peak();
      QVERIFY(decode_latent(*m, z, {1}).is_ok());
      peaks[i] = backends[i]->memory_stats().peak_bytes - base;
    }
    qInfo("decode peak: dry run %lld bytes, cpu %lld bytes", static_cast<long long>(peaks[0]),
          static_cast<long long>(peaks[1]));
    QVERIFY(peaks[0] > 0);
    QVERIFY2(
        std::abs(static_cast<double>(peaks[1] - peaks[0])) <= 0.01 * static_cast<double>(peaks[1]),
        (std::to_string(peaks[0]) + " vs " + std::to_string(peaks[1])).c_str());
  }
};

QTEST_GUILESS_MAIN(tst_Flops)
#include "tst_flops.moc"
