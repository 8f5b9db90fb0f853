// Telemetry on the CUDA backend: device spans (Backend::begin_device_span/end_device_span, CUDA
// events on the compute stream) and the device time they give VaeModel's stage samples and the
// scheduler's "chunk" / "tile" summaries (core/base/telemetry.h). Contract checked here:
//  * every stage sample has device_ms > 0 and device_ms <= wall_ms (+ timer tolerance);
//  * the stages of one chunk (or one tile's chunk) add up to at most the summary's device time,
//    and to at most the backend report's per-chunk device time (upload to download);
//  * a failing or misused span gives -1, never an error of the run.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/schedule/streaming.h"
#include "core/schedule/tiled.h"
#include "core/vae/state_dict.h"
#include "core/vae/vae_model.h"
#include "gpu/cuda_backend.h"
#include "tests/gpu/gpu_test.h"
#include "tests/gpu/gpu_test_data.h"
#include "tests/support/telemetry_recorder.h"

using namespace seedvae;
using seedvae::gpu::CudaOptions;
using seedvae::gpu::Precision;

namespace {

// Event timestamps have ~0.5 us resolution and the host clock is another clock: allow a little.
constexpr double kTolMs = 0.05;

CudaOptions options(Precision p = Precision::kFp32) {
  CudaOptions o;
  o.precision = p;
  o.autotune_cache = "";
  return o;
}

using Recorder = test::TelemetryRecorder;
using test::is_summary;

std::string describe(const StageSample& s) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s chunk %lld tile %lld: wall %.4f ms, device %.4f ms",
                s.stage.c_str(), static_cast<long long>(s.chunk), static_cast<long long>(s.tile),
                s.wall_ms, s.device_ms);
  return buf;
}

// Checks the contract on one run's samples; `summary` is the expected summary stage name.
// Returns the per-(chunk, tile) sums of the stages' device time.
std::map<std::pair<int64_t, int64_t>, double> check_samples(const std::vector<StageSample>& v,
                                                            const std::string& summary,
                                                            const std::string& what) {
  std::map<std::pair<int64_t, int64_t>, double> stage_sum;
  std::map<std::pair<int64_t, int64_t>, const StageSample*> summaries;
  int stages = 0;
  for (const StageSample& s : v) {
    const auto key = std::make_pair(s.chunk, s.tile);
    if (is_summary(s)) {
      CHECK_MSG(s.stage == summary, what + ": unexpected summary " + describe(s));
      CHECK_MSG(summaries.count(key) == 0, what + ": two summaries for " + describe(s));
      summaries[key] = &s;
    } else {
      ++stages;
      CHECK_MSG(summaries.count(key) == 0, what + ": stage after its summary: " + describe(s));
      stage_sum[key] += s.device_ms;
    }
    CHECK_MSG(s.device_ms > 0 && std::isfinite(s.device_ms), what + ": " + describe(s));
    CHECK_MSG(s.device_ms <= s.wall_ms + kTolMs, what + ": device > wall: " + describe(s));
    CHECK_MSG(s.current_bytes > 0 && s.peak_bytes >= s.current_bytes, what + ": " + describe(s));
    CHECK_MSG(s.device_used_bytes > 0, what + ": " + describe(s));
  }
  CHECK_MSG(stages > 0, what + ": no stage samples");
  CHECK_MSG(summaries.size() == stage_sum.size(),
            what + ": summaries " + std::to_string(summaries.size()) + ", chunks with stages " +
                std::to_string(stage_sum.size()));
  for (const auto& [key, sum] : stage_sum) {
    auto it = summaries.find(key);
    CHECK_MSG(it != summaries.end(), what + ": no summary for chunk " + std::to_string(key.first) +
                                         " tile " + std::to_string(key.second));
    if (it == summaries.end()) continue;
    const double chunk_ms = it->second->device_ms;
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s: chunk %lld tile %lld: stages %.4f ms <= %s %.4f ms",
                  what.c_str(), static_cast<long long>(key.first),
                  static_cast<long long>(key.second), sum, summary.c_str(), chunk_ms);
    std::printf("    %s\n", buf);
    CHECK_MSG(sum <= chunk_ms * 1.001 + kTolMs, buf);
  }
  return stage_sum;
}

GPU_TEST(device_spans_time_queued_work) {
  auto b = gpu::create_cuda_backend(options());
  CHECK_MSG(b.is_ok(), b.status().to_string());
  if (!b) return;
  Backend& be = **b;
  // Some real work: a 3x3x3 convolution.
  REQUIRE_OK(Tensor x, be.upload(test::random_tensor(Shape{1, 64, 5, 64, 64}, 1)));
  REQUIRE_OK(Tensor w, be.upload_weight(test::random_tensor(Shape{64, 64, 3, 3, 3}, 2), "w"));
  REQUIRE_OK(Tensor bias, be.upload_weight(test::random_tensor(Shape{64}, 3), "b"));
  Conv3dParams p;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
  REQUIRE_OK(Tensor warm, be.conv3d(x, w, bias, p));  // algorithm search outside the spans
  CHECK_OK(be.synchronize());

  const int64_t outer = be.begin_device_span();
  CHECK(outer >= 0);
  const int64_t inner = be.begin_device_span();
  CHECK(inner >= 0 && inner != outer);
  REQUIRE_OK(Tensor y, be.conv3d(x, w, bias, p));
  const double inner_ms = be.end_device_span(inner);
  REQUIRE_OK(Tensor y2, be.conv3d(y, w, bias, p));
  const double outer_ms = be.end_device_span(outer);
  std::printf("    inner %.4f ms, outer %.4f ms\n", inner_ms, outer_ms);
  CHECK(inner_ms > 0);
  CHECK(outer_ms >= inner_ms);
  // Ended spans, unknown handles: -1, no error.
  CHECK(be.end_device_span(inner) == -1);
  CHECK(be.end_device_span(-1) == -1);
  CHECK(be.end_device_span(1 << 30) == -1);
  // More open spans than the pool holds: the oldest expire, the newest still time.
  std::vector<int64_t> open;
  for (int i = 0; i < Backend::kMaxOpenDeviceSpans + 3; ++i) open.push_back(be.begin_device_span());
  for (int64_t h : open) CHECK(h >= 0);
  CHECK(be.end_device_span(open.front()) == -1);
  CHECK(be.end_device_span(open.back()) >= 0);
  // Another thread (the backend is single-thread-owned): no span, no error.
  int64_t foreign = 0;
  double foreign_ms = 0;
  std::thread t([&] {
    foreign = be.begin_device_span();
    foreign_ms = be.end_device_span(open[open.size() - 2]);
  });
  t.join();
  CHECK(foreign == -1 && foreign_ms == -1);
  CHECK(be.end_device_span(open[open.size() - 2]) >= 0);  // still open for the owner
  // The backend is still healthy.
  REQUIRE_OK(HostTensor host, be.download(y2));
  CHECK(host.shape() == y2.shape);
  CHECK_OK(be.synchronize());
}

GPU_TEST(stage_samples_carry_device_time) {
  for (const Precision prec : {Precision::kFp32, Precision::kBf16}) {
    for (const int hires : {0, 1}) {
      const std::string what =
          std::string(gpu::precision_name(prec)) + (hires ? " hires-chunk 1" : "");
      auto b = gpu::create_cuda_backend(options(prec));
      CHECK_MSG(b.is_ok(), b.status().to_string());
      if (!b) continue;
      REQUIRE_OK(VaeModel m, VaeModel::create(**b, test::tiny_weights()));
      const StreamOptions so{.chunk_latents = 1, .hires_chunk_frames = hires};
      const HostTensor latent = test::random_tensor(Shape{1, 16, 4, 16, 16}, 2);
      const HostTensor video = test::random_tensor(Shape{1, 3, 9, 64, 64}, 1);
      // Warm-up without telemetry (algorithm search outside the measured runs).
      CHECK(decode_latent(m, latent, so).is_ok());
      CHECK(encode_video(m, video, so).is_ok());

      for (const bool encode : {false, true}) {
        Recorder rec(true);
        m.set_telemetry(&rec);
        // Per chunk, the backend's own event time (upload to the start of the download).
        std::vector<double> report_ms;
        double last = gpu::cuda_backend_report(**b)->device_ms;
        StreamHooks hooks;
        hooks.on_chunk = [&](int64_t, const HostTensor&) {
          const double now = gpu::cuda_backend_report(**b)->device_ms;
          report_ms.push_back(now - last);
          last = now;
          return Status::ok();
        };
        auto r = encode ? encode_video(m, video, so, hooks) : decode_latent(m, latent, so, hooks);
        m.set_telemetry(nullptr);
        CHECK_MSG(r.is_ok(), r.status().to_string());
        const std::string w = what + (encode ? " encode" : " decode");
        auto sums = check_samples(rec.samples, "chunk", w);
        CHECK_MSG(sums.size() == report_ms.size(), w + ": chunks");
        for (const auto& [key, sum] : sums) {
          const auto c = static_cast<size_t>(key.first);
          CHECK(key.second == -1);
          if (c >= report_ms.size()) continue;
          char buf[160];
          std::snprintf(buf, sizeof buf, "%s: chunk %zu: stages %.4f ms <= backend report %.4f ms",
                        w.c_str(), c, sum, report_ms[c]);
          CHECK_MSG(sum <= report_ms[c] * 1.001 + kTolMs, buf);
        }
        // A sink that does not want summaries gets the stages only.
        Recorder plain(false);
        m.set_telemetry(&plain);
        auto r2 = encode ? encode_video(m, video, so) : decode_latent(m, latent, so);
        m.set_telemetry(nullptr);
        CHECK(r2.is_ok());
        CHECK(!plain.samples.empty());
        for (const StageSample& s : plain.samples) {
          CHECK_MSG(!is_summary(s), describe(s));
          CHECK_MSG(s.device_ms > 0 && s.device_ms <= s.wall_ms + kTolMs, describe(s));
        }
      }
    }
  }
}

GPU_TEST(tile_summaries_in_blended_tiling) {
  auto b = gpu::create_cuda_backend(options(Precision::kBf16));
  CHECK_MSG(b.is_ok(), b.status().to_string());
  if (!b) return;
  REQUIRE_OK(VaeModel m, VaeModel::create(**b, test::tiny_weights()));
  const HostTensor latent = test::random_tensor(Shape{1, 16, 3, 16, 16}, 3);
  TileOptions to;
  to.mode = TilingMode::kBlend;
  to.spec = {64, 64, 16, 16};
  to.layout = TileLayout::kUniform;
  for (const TileOrder order : {TileOrder::kChunkMajor, TileOrder::kTileMajor}) {
    to.order = order;
    CHECK(tiled_decode(m, latent, to, {1}).is_ok());  // warm-up
    Recorder rec(true);
    m.set_telemetry(&rec);
    TileRunReport report;
    TileHooks th;
    th.report = &report;
    auto r = tiled_decode(m, latent, to, {1}, {}, &th);
    m.set_telemetry(nullptr);
    CHECK_MSG(r.is_ok(), r.status().to_string());
    const std::string w = order == TileOrder::kChunkMajor ? "chunk-major" : "tile-major";
    auto sums = check_samples(rec.samples, "tile", w);
    CHECK_MSG(static_cast<int64_t>(sums.size()) == report.tiles_run,
              w + ": " + std::to_string(sums.size()) + " tile summaries, " +
                  std::to_string(report.tiles_run) + " tiles run");
    CHECK(report.tiles_run > 1);
    for (const auto& [key, sum] : sums) CHECK(key.second >= 0 && key.first >= 0);
  }
}

// A deferred sink (TelemetrySink::StageTiming::kDeferred): no drain per stage, yet the same
// stage samples in the same order as a synchronised sink, each with device time (wall_ms =
// device_ms), and every sample of a chunk in before the chunk after it is handed on.
GPU_TEST(deferred_stage_samples) {
  auto b = gpu::create_cuda_backend(options(Precision::kBf16));
  CHECK_MSG(b.is_ok(), b.status().to_string());
  if (!b) return;
  REQUIRE_OK(VaeModel m, VaeModel::create(**b, test::tiny_weights()));
  const HostTensor latent = test::random_tensor(Shape{1, 16, 5, 16, 16}, 2);
  const HostTensor video = test::random_tensor(Shape{1, 3, 17, 64, 64}, 1);
  TileOptions blend;
  blend.mode = TilingMode::kBlend;
  blend.spec = {64, 64, 16, 16};
  blend.layout = TileLayout::kUniform;
  blend.order = TileOrder::kChunkMajor;
  using Timing = TelemetrySink::StageTiming;
  for (const int hires : {0, 1}) {
    for (const int kind : {0, 1, 2}) {  // decode, encode, blended decode
      const StreamOptions so{.chunk_latents = 1, .hires_chunk_frames = hires};
      const std::string what = std::string(kind == 0   ? "decode"
                                           : kind == 1 ? "encode"
                                                       : "tiled") +
                               (hires ? " hires-chunk 1" : "");
      auto run = [&](Recorder& rec, StreamHooks hooks) {
        m.set_telemetry(&rec);
        auto r = kind == 0   ? decode_latent(m, latent, so, hooks)
                 : kind == 1 ? encode_video(m, video, so, hooks)
                             : tiled_decode(m, latent, blend, so, hooks);
        m.set_telemetry(nullptr);
        CHECK_MSG(r.is_ok(), what + ": " + r.status().to_string());
      };
      Recorder warm(false);
      run(warm, {});
      Recorder sync(false), deferred(false, Timing::kDeferred);
      run(sync, {});
      int64_t handed = 0;
      StreamHooks hooks;
      hooks.on_chunk = [&](int64_t, const HostTensor&) {
        // every sample of the chunks before the one handed on is in
        int64_t before = 0, before_sync = 0;
        for (const StageSample& s : deferred.samples) before += s.chunk < handed;
        for (const StageSample& s : sync.samples) before_sync += s.chunk < handed;
        ++handed;
        return before == before_sync ? Status::ok()
                                     : internal_error("chunk " + std::to_string(handed - 1) +
                                                      " handed on with samples missing");
      };
      run(deferred, hooks);
      CHECK_MSG(handed > 2, what + ": chunks handed on");
      CHECK_MSG(deferred.samples.size() == sync.samples.size(),
                what + ": " + std::to_string(deferred.samples.size()) + " deferred samples, " +
                    std::to_string(sync.samples.size()) + " synchronised");
      double sync_ms = 0, deferred_ms = 0;
      for (size_t i = 0; i < std::min(deferred.samples.size(), sync.samples.size()); ++i) {
        const StageSample& d = deferred.samples[i];
        const StageSample& y = sync.samples[i];
        CHECK_MSG(d.stage == y.stage && d.chunk == y.chunk && d.tile == y.tile,
                  what + ": " + describe(d) + " vs " + describe(y));
        CHECK_MSG(d.device_ms > 0 && d.wall_ms == d.device_ms, what + ": " + describe(d));
        CHECK_MSG(d.current_bytes > 0 && d.peak_bytes >= d.current_bytes, describe(d));
        sync_ms += y.device_ms;
        deferred_ms += d.device_ms;
      }
      std::printf("    %s: device time of the stages: synchronised %.3f ms, deferred %.3f ms\n",
                  what.c_str(), sync_ms, deferred_ms);
      CHECK(deferred_ms > 0);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const auto info = gpu::runtime_info();
  if (!info.error.empty()) gpu_test::skip_all(info.error.c_str());
  return gpu_test::run_all(argc, argv);
}
