// Blend tiles spread over several devices (TileOptions::devices, core/schedule/tiled.h) on CPU
// backends of the tiny model: decode and encode, chunk-major and tile-major, two and three devices,
// one of them slower so that tiles finish out of order, equal the one-device run bit for bit, with
// the tile events and progress in the one-device order and every tile run once per chunk; a device
// that fails (at creation or mid-run) stops the run with its error, and the same devices' run
// afterwards on working engines gives the one-device result; a cancel or a tile hook's error stops
// every device; the job layer (Session::run) with --devices 0,1 --tiling blend decodes and
// round-trips as one device does and reports each device's tiles.
#include <QtTest>

#include <utility>
#include <vector>

#include "core/pipeline/job.h"
#include "core/schedule/tiled.h"
#include "tests/support/cpu_devices.h"
#include "tests/support/synthetic_video.h"

using namespace seedvae;

namespace {

class CountingProgress final : public ProgressSink {
 public:
  void report(std::string_view, int64_t done, int64_t total) override {
    in_order &= done == last + 1;
    last = done;
    this->total = total;
  }
  int64_t last = 0, total = 0;
  bool in_order = true;
};

struct TiledRun {
  HostTensor out;
  std::vector<std::pair<int64_t, int64_t>> events;  // (chunk, tile) in the order they came
  TileRunReport report;
  int64_t steps = 0, total = 0;
  bool progress_in_order = false;
};

}  // namespace

class TstTileDevices : public QObject {
  Q_OBJECT

  VaeWeights weights_ = synthesize_weights(VaeConfig::tiny(), 7);
  // 5 latents of 12x12: four chunks, and 3x3 tiles of 48x48 output pixels
  HostTensor latent_ = test::random_latent(16, 5, 12, 12, 3);
  HostTensor video_ = test::synthetic_video(17, 96, 96, 5);

  static Result<TiledRun> run(VaeModel& m, DeviceWorkers* devices, bool encode, TileOrder order,
                              const HostTensor& in, const CancelToken* cancel = nullptr,
                              size_t refuse_event = 0) {
    TileOptions o;
    o.mode = TilingMode::kBlend;
    o.spec = {48, 48, 16, 16};
    o.order = order;
    o.devices = devices;
    TiledRun r;
    CountingProgress progress;
    StreamHooks hooks;
    hooks.progress = &progress;
    hooks.cancel = cancel;
    TileHooks th;
    th.report = &r.report;
    th.on_tile = [&](const TileEvent& e) {
      r.events.emplace_back(e.chunk, e.index);
      // a sink that refuses a tile (the studio's preview stopped, say)
      return r.events.size() == refuse_event ? io_error("injected: the sink refused a tile")
                                             : Status::ok();
    };
    Result<HostTensor> out = encode ? tiled_encode(m, in, o, StreamOptions{}, hooks, &th)
                                    : tiled_decode(m, in, o, StreamOptions{}, hooks, &th);
    if (!out.is_ok()) return out.take_status();
    r.out = std::move(out).value();
    r.steps = progress.last;
    r.total = progress.total;
    r.progress_in_order = progress.in_order;
    return r;
  }

  static double max_abs_diff(const HostTensor& a, const HostTensor& b) {
    if (a.shape() != b.shape()) return -1;
    double m = 0;
    auto x = a.f32(), y = b.f32();
    for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(double(x[i]) - double(y[i])));
    return m;
  }

 private slots:
  void equalsOneDevice() {
    test::TinyCpuModel m;
    QVERIFY(test::make_first_device(m, weights_).is_ok());
    for (const int n : {2, 3}) {
      // device 1 slower: the others take more tiles, and finish theirs out of order
      auto devices = DeviceWorkers::create(
          *m.model, test::cpu_devices(weights_, {.slow = 1, .slow_ms = 2}), n);
      QVERIFY2(devices.is_ok(), devices.status().to_string().c_str());
      for (const bool encode : {false, true}) {
        for (const TileOrder order : {TileOrder::kChunkMajor, TileOrder::kTileMajor}) {
          const std::string what = std::to_string(n) + " devices, " +
                                   (encode ? "encode" : "decode") + ", " +
                                   (order == TileOrder::kChunkMajor ? "chunk" : "tile") + "-major";
          const HostTensor& in = encode ? video_ : latent_;
          auto one = run(*m.model, nullptr, encode, order, in);
          auto many = run(*m.model, devices->get(), encode, order, in);
          QVERIFY2(one.is_ok(), one.status().to_string().c_str());
          QVERIFY2(many.is_ok(), (what + ": " + many.status().to_string()).c_str());
          QVERIFY2(max_abs_diff(one->out, many->out) == 0.0, what.c_str());
          // the events and the progress in the one-device order
          QVERIFY2(one->events == many->events, what.c_str());
          QVERIFY(many->progress_in_order);
          QCOMPARE(many->steps, one->steps);
          QCOMPARE(many->total, one->total);
          QCOMPARE(many->report.tiles_run, one->report.tiles_run);
          QCOMPARE(many->report.tile_sums, one->report.tile_sums);
          // every device took tiles; together, each tile once per chunk (tile-major: once)
          const auto& d = many->report.devices;
          QCOMPARE(static_cast<int>(d.size()), n);
          int64_t taken = 0;
          for (const TileDeviceStats& s : d) {
            QVERIFY2(s.tiles > 0, what.c_str());
            QVERIFY(!s.backend.empty());
            taken += s.tiles;
          }
          const int64_t tiles = static_cast<int64_t>(many->report.rects.size());
          QCOMPARE(tiles, int64_t{9});
          QCOMPARE(taken, order == TileOrder::kTileMajor ? tiles : many->report.tiles_run);
          QVERIFY(one->report.devices.empty());
          qInfo("%s: tiles per device %lld / %lld%s", what.c_str(),
                static_cast<long long>(d[0].tiles), static_cast<long long>(d[1].tiles),
                n == 3 ? (" / " + std::to_string(d[2].tiles)).c_str() : "");
        }
      }
    }
  }

  // A device that cannot make its engine, or fails mid-run, stops the run with its error; new
  // engines on the same devices then give the one-device result.
  void failingDeviceStopsTheRun() {
    test::TinyCpuModel m;
    QVERIFY(test::make_first_device(m, weights_).is_ok());
    auto none = DeviceWorkers::create(
        *m.model, test::cpu_devices(weights_, {.fail = 1, .fail_after = -1}), 2);
    QVERIFY(!none.is_ok());
    QVERIFY(none.status().to_string().find("injected") != std::string::npos);
    for (const TileOrder order : {TileOrder::kChunkMajor, TileOrder::kTileMajor}) {
      auto failing = DeviceWorkers::create(
          *m.model, test::cpu_devices(weights_, {.fail = 1, .fail_after = 30}), 2);
      QVERIFY(failing.is_ok());
      auto r = run(*m.model, failing->get(), false, order, latent_);
      QVERIFY(!r.is_ok());
      const std::string msg = r.status().to_string();
      qInfo("device 1 failing after 30 convolutions: %s", msg.c_str());
      QVERIFY(msg.find("injected device failure") != std::string::npos);
      QVERIFY(msg.find("device 1") != std::string::npos);
    }
    auto working = DeviceWorkers::create(*m.model, test::cpu_devices(weights_), 2);
    QVERIFY(working.is_ok());
    auto again = run(*m.model, working->get(), false, TileOrder::kChunkMajor, latent_);
    auto one = run(*m.model, nullptr, false, TileOrder::kChunkMajor, latent_);
    QVERIFY(again.is_ok() && one.is_ok());
    QCOMPARE(max_abs_diff(again->out, one->out), 0.0);
  }

  // A cancel, or a tile hook's error, stops every device.
  void cancelStopsEveryDevice() {
    test::TinyCpuModel m;
    QVERIFY(test::make_first_device(m, weights_).is_ok());
    auto devices = DeviceWorkers::create(*m.model, test::cpu_devices(weights_), 2);
    QVERIFY(devices.is_ok());
    CancelToken cancel;
    cancel.request();
    auto r = run(*m.model, devices->get(), false, TileOrder::kChunkMajor, latent_, &cancel);
    QVERIFY(!r.is_ok());
    QCOMPARE(r.status().code(), StatusCode::kCancelled);
    // a tile hook's error, while the other device is still at work, stops the run with it
    for (const TileOrder order : {TileOrder::kChunkMajor, TileOrder::kTileMajor}) {
      auto refused = run(*m.model, devices->get(), false, order, latent_, nullptr, 5);
      QVERIFY(!refused.is_ok());
      QVERIFY2(refused.status().to_string().find("the sink refused") != std::string::npos,
               refused.status().to_string().c_str());
    }
  }

  // Through the job layer: a decode job and a round trip with --devices 0,1 --tiling blend give
  // the one-device job's frames, and each device reports its tiles.
  void sessionSpreadsBlendTiles() {
    Session session([](const RunOptions&) { return create_cpu_backend({.threads = 1}); });
    auto weights = std::make_shared<const VaeWeights>(weights_);
    for (const JobKind kind : {JobKind::kDecode, JobKind::kRoundTrip}) {
      JobSpec job;
      job.kind = kind;
      job.weights = weights;
      if (kind == JobKind::kDecode) {
        job.latent = std::make_shared<const HostTensor>(latent_);
      } else {
        job.input.sample_width = 96;
        job.input.sample_height = 96;
      }
      job.options.tiling = "blend";
      job.options.tile = {48, 48};
      job.options.overlap = {16, 16};
      auto run_job = [&](const std::string& devices, std::vector<HostTensor>& frames,
                         JobResult& r) {
        return test::run_job_on(session, job, devices, frames, r);
      };
      std::vector<HostTensor> one, two;
      JobResult r1, r2;
      const Status s1 = run_job("", one, r1);
      QVERIFY2(s1.is_ok(), s1.to_string().c_str());
      const Status s2 = run_job("0,1", two, r2);
      QVERIFY2(s2.is_ok(), s2.to_string().c_str());
      QCOMPARE(two.size(), one.size());
      for (size_t i = 0; i < one.size(); ++i) QCOMPARE(max_abs_diff(two[i], one[i]), 0.0);
      QVERIFY(r1.device_shares.empty());
      QCOMPARE(static_cast<int>(r2.device_shares.size()), 2);
      for (const auto& d : r2.device_shares) {
        QVERIFY2(d.share.find("decode tiles") != std::string::npos, d.share.c_str());
      }
    }
  }
};

QTEST_GUILESS_MAIN(TstTileDevices)
#include "tst_tile_devices.moc"
