#include "core/pipeline/bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/backend/counting_backend.h"
#include "core/base/process_memory.h"
#include "core/base/thread_name.h"
#include "core/pipeline/job.h"
#include "core/pipeline/prediction.h"
#include "core/schedule/pipeline_decode.h"
#include "core/schedule/streaming.h"
#include "core/vae/vae_model.h"
#include "core/vae/wan_model.h"

namespace seedvae {
namespace {

using Clock = std::chrono::steady_clock;

HostTensor random_input(Shape s, uint64_t seed) {
  HostTensor t(DType::kF32, std::move(s));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (float& v : t.f32()) v = u(rng);
  return t;
}

class StageTimes final : public TelemetrySink {
 public:
  void on_stage(const StageSample& s) override { ms[s.stage] += s.wall_ms; }
  std::map<std::string, double> ms;
};

// Samples the card's used memory every millisecond on a thread of its own while an op runs
// (Backend::device_memory_probe reads NVML there, so the owner thread is not disturbed), keeping
// the maximum: the device-level peak, transient library allocations included.
class DevicePeakSampler {
 public:
  explicit DevicePeakSampler(std::function<int64_t()> probe) : probe_(std::move(probe)) {
    if (!probe_) return;
    take();
    thread_ = std::thread([this] {
      set_current_thread_name("seedvae-memprobe");
      std::unique_lock<std::mutex> lock(mu_);
      while (!stop_) {
        lock.unlock();
        take();
        lock.lock();
        cv_.wait_for(lock, std::chrono::milliseconds(1), [this] { return stop_; });
      }
    });
  }
  ~DevicePeakSampler() { stop(); }
  // Stops sampling; the peak used bytes seen (-1 without a probe).
  int64_t stop() {
    if (thread_.joinable()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
      }
      cv_.notify_all();
      thread_.join();
      take();
    }
    return peak_.load();
  }

 private:
  void take() {
    const int64_t v = probe_();
    int64_t p = peak_.load();
    while (v > p && !peak_.compare_exchange_weak(p, v)) {
    }
  }
  std::function<int64_t()> probe_;
  std::atomic<int64_t> peak_{-1};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Per-stage analytic FLOPs of one op: the network (of `weights`' family and configuration; the
// values are not read) on a dry-run backend.
Result<std::map<std::string, double>> stage_flops(const VaeWeights& weights, bool encode,
                                                  const Shape& input, int chunk) {
  CountingBackend cb;
  SEEDVAE_ASSIGN_OR_RETURN(std::unique_ptr<VideoVae> model, make_dry_video_vae(cb, weights));
  VideoVae& m = *model;
  std::map<std::string, double> out;
  double last = 0;
  m.set_observer([&](std::string_view block, const Tensor&) {
    out[std::string(block)] += cb.flops() - last;
    last = cb.flops();
    return Status::ok();
  });
  const int tf = m.temporal_factor();
  CausalState state;
  const int64_t latents = encode ? (input[2] - 1) / tf + 1 : input[2];
  for (const auto& [b, e] : plan_chunks(latents, chunk)) {
    Shape s = input;
    s[2] = encode ? (b == 0 ? (e - 1) * tf + 1 : (e - b) * tf) : e - b;
    const Tensor x = cb.declare(s);
    SEEDVAE_TRY((encode ? m.encode_chunk(x, state) : m.decode_chunk(x, state)).take_status());
  }
  return out;
}

Result<double> total_flops(const VaeWeights& weights, bool encode, int frames, int height,
                           int width, int chunk_latents) {
  const int f = weights.temporal_factor(), s = weights.spatial_factor();
  const Shape in =
      encode ? Shape{1, 3, frames, height, width}
             : Shape{1, weights.latent_channels(), (frames - 1) / f + 1, height / s, width / s};
  SEEDVAE_ASSIGN_OR_RETURN(auto per_stage, stage_flops(weights, encode, in, chunk_latents));
  double total = 0;
  for (const auto& [k, v] : per_stage) total += v;
  return total;
}

}  // namespace

Result<double> count_flops(const VaeConfig& config, bool encode, int frames, int height, int width,
                           int chunk_latents) {
  VaeWeights shapes;  // the configuration only: the dry run declares its parameters
  shapes.config = config;
  return total_flops(shapes, encode, frames, height, width, chunk_latents);
}

Result<double> count_flops(const WanConfig& config, bool encode, int frames, int height, int width,
                           int chunk_latents) {
  VaeWeights shapes;
  shapes.family = config.family;
  shapes.wan = config;
  return total_flops(shapes, encode, frames, height, width, chunk_latents);
}

Result<BenchResult> run_bench(Backend& backend, const VaeWeights& weights, const BenchOptions& o,
                              const BenchBackendFactory& make_backend) {
  const int f = weights.temporal_factor(), s = weights.spatial_factor();
  if (o.frames < 1 || (o.frames - 1) % f != 0 || o.width % s || o.height % s) {
    return invalid_argument("bench needs 4n+1 frames and a size that is a multiple of " +
                            std::to_string(s));
  }
  SEEDVAE_TRY(validate(o.run));
  BenchResult r;
  r.backend = backend.name();
  r.options = o;
  r.config = weights.describe();
  SEEDVAE_ASSIGN_OR_RETURN(std::unique_ptr<VideoVae> made, make_video_vae(backend, weights));
  VideoVae& model = *made;
  const int latents = (o.frames - 1) / f + 1;
  // Several devices: an untiled decode is pipelined over them, blend tiles are spread over them;
  // their engines are made once for every run.
  SEEDVAE_ASSIGN_OR_RETURN(const std::vector<int> devices, parse_devices(o.run.devices));
  std::unique_ptr<DeviceWorkers> workers;
  const bool tiles_over_devices = devices.size() >= 2 && o.run.tiling == "blend";
  const bool pipelined = devices.size() >= 2 && o.run.tiling == "off" && o.decode;
  PipelinePlan plan;
  if (pipelined || tiles_over_devices) {
    if (!make_backend)
      return invalid_argument("this benchmark cannot make other devices' backends");
    const DeviceEngineFactory make = [&](int index) -> Result<DeviceEngine> {
      RunOptions d = o.run;
      d.device = devices[static_cast<size_t>(index)];
      DeviceEngine engine;
      SEEDVAE_ASSIGN_OR_RETURN(engine.backend, make_backend(d));
      SEEDVAE_ASSIGN_OR_RETURN(engine.model, make_video_vae(*engine.backend, weights));
      return engine;
    };
    SEEDVAE_ASSIGN_OR_RETURN(workers,
                             DeviceWorkers::create(model, make, static_cast<int>(devices.size())));
  }
  if (pipelined) {
    SEEDVAE_ASSIGN_OR_RETURN(const std::vector<int> cuts, parse_pipeline_cuts(o.run.pipeline_cuts));
    SEEDVAE_ASSIGN_OR_RETURN(
        plan, plan_pipeline(weights, static_cast<int>(devices.size()), o.height / s, o.width / s,
                            stream_options(o.run), cuts, backend.activation_dtype()));
  }
  DeviceWorkers* tile_devices = tiles_over_devices ? workers.get() : nullptr;
  for (const bool enc : {true, false}) {
    if ((enc && !o.encode) || (!enc && !o.decode)) continue;
    const Shape in = enc ? Shape{1, 3, o.frames, o.height, o.width}
                         : Shape{1, weights.latent_channels(), latents, o.height / s, o.width / s};
    const HostTensor x = random_input(in, enc ? 1 : 2);
    const bool piped = pipelined && !enc;
    // A network without stage telemetry (Wan) gets no per-stage run, nor a run over several
    // devices (its telemetry is only the first device's).
    const int staged_runs = weights.is_wan() || piped || tile_devices ? 0 : 1;
    SEEDVAE_ASSIGN_OR_RETURN(auto flops, stage_flops(weights, enc, in, o.run.chunk_latents));
    BenchOpResult op;
    op.op = enc ? "encode" : "decode";
    std::map<std::string, std::vector<double>> stage_runs;
    TileRunReport tiles;  // of the last run (every run tiles alike)
    // Each op starts from an empty cache, so its device-level peak is its own.
    backend.release_cached_memory();
    const bool host_reset = reset_peak_rss();
    DevicePeakSampler sampler(backend.device_memory_probe());
    // Warm-up runs, then `repeats` timed runs without telemetry (the op totals), then one run
    // with stage telemetry, which synchronises after every block (the per-stage split).
    for (int i = 0; i < o.warmup + o.repeats + staged_runs; ++i) {
      StageTimes times;
      const bool measured = i >= o.warmup && i < o.warmup + o.repeats;
      const bool staged = i == o.warmup + o.repeats;
      model.set_telemetry(staged ? &times : nullptr);
      backend.reset_peak();
      tiles = TileRunReport();
      TileHooks th;
      th.report = &tiles;
      std::string note;
      const auto t0 = Clock::now();
      PipelineStats ps;
      auto out = enc     ? encode_clip(model, weights, x, o.run, {}, &th, &note, tile_devices)
                 : piped ? decode_pipelined(*workers, plan, x, stream_options(o.run), {}, &ps)
                         : decode_clip(model, weights, x, o.run, {}, &th, &note, tile_devices);
      if (!out) return out.take_status();
      if (piped && measured) {
        op.pipeline = plan.describe();
        op.devices.clear();
        for (size_t d = 0; d < ps.backends.size(); ++d) {
          const MemoryStats& m = ps.memory[d];
          op.devices.push_back({ps.backends[d], plan.describe_share(static_cast<int>(d)),
                                ps.busy_ms[d], ps.import_ms[d], ps.imported_bytes[d], m.peak_bytes,
                                m.peak_reserved_bytes, m.fixed_bytes, ps.waits[d]});
        }
      }
      if (!tiles.devices.empty() && measured) {
        op.devices.clear();
        for (const TileDeviceStats& d : tiles.devices) {
          const MemoryStats& m = d.memory;
          op.devices.push_back({d.backend,
                                std::to_string(d.tiles) + " tiles",
                                d.busy_ms,
                                0,
                                0,
                                m.peak_bytes,
                                m.peak_reserved_bytes,
                                m.fixed_bytes,
                                {}});
        }
      }
      SEEDVAE_TRY(backend.synchronize());
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      model.set_telemetry(nullptr);
      for (const auto& [k, v] : times.ms) stage_runs[k].push_back(v);
      op.plan_note = note;
      if (!measured) continue;
      op.runs_ms.push_back(ms);
      const MemoryStats ms_now = backend.memory_stats();
      op.peak_bytes = std::max(op.peak_bytes, ms_now.peak_bytes);
      op.reserved_peak_bytes = std::max(op.reserved_peak_bytes, ms_now.peak_reserved_bytes);
    }
    const int64_t device_peak = sampler.stop();
    const MemoryStats after = backend.memory_stats();
    if (device_peak >= 0 && after.device_baseline_bytes >= 0) {
      op.device_peak_bytes = device_peak - after.device_baseline_bytes;
    }
    op.fixed_bytes = after.fixed_bytes;
    op.budget_bytes = after.budget_bytes;
    if (host_reset) op.host_peak_bytes = peak_rss_bytes();
    op.tiling = std::string(tiling_mode_name(tiles.mode));
    op.tiles = static_cast<int64_t>(std::max<size_t>(1, tiles.rects.size()));
    if (tiles.mode != TilingMode::kOff) {
      // The tile the runs used: resolved as encode_clip/decode_clip resolve it (with a budget,
      // the planner's choice).
      SEEDVAE_ASSIGN_OR_RETURN(const TileOptions to, tile_options(o.run, weights, enc, o.height,
                                                                  o.width, o.frames, nullptr));
      const TileSpec& spec = to.spec;
      op.tile_w = spec.tile_w;
      op.tile_h = spec.tile_h;
      op.overlap_w = tiles.mode == TilingMode::kBlend ? spec.overlap_w : 0;
      op.overlap_h = tiles.mode == TilingMode::kBlend ? spec.overlap_h : 0;
    }
    op.total_ms = median(op.runs_ms);
    for (const auto& [k, v] : flops) op.tflop += v / 1e12;
    op.ms_per_frame = op.total_ms / o.frames;
    op.tflops_per_s = op.total_ms > 0 ? op.tflop / (op.total_ms / 1000) : 0;
    for (const auto& [k, v] : stage_runs) {
      r.stages.push_back({op.op, k, median(v), flops.count(k) ? flops[k] / 1e9 : 0});
    }
    r.ops.push_back(op);
  }
  return r;
}

Result<bool> choose_bench_schedule(BenchOptions& o, const VaeWeights& weights,
                                   const Backend& backend) {
  SEEDVAE_ASSIGN_OR_RETURN(ScheduleChoice c,
                           choose_schedule(o.run, weights, o.encode, o.decode, o.height, o.width,
                                           o.frames, backend.memory_stats().budget_bytes));
  if (c.note.empty()) return false;
  const bool remake = backend_key(c.options) != backend_key(o.run);
  o.run = c.options;
  o.schedule_note = c.note;
  return remake;
}

std::string bench_json(const BenchResult& r, const std::string& weights_source) {
  using Json = nlohmann::ordered_json;
  auto mib_or_null = [](int64_t bytes) {
    return bytes < 0 ? Json(nullptr) : Json(static_cast<double>(bytes) / (1 << 20));
  };
  auto devices_json = [&](const std::vector<BenchOpResult::Device>& devices) {
    Json a = Json::array();
    for (const auto& d : devices) {
      a.push_back({{"backend", d.backend},
                   {"units", d.units},
                   {"busy_ms", d.busy_ms},
                   {"import_ms", d.import_ms},
                   {"imported_mib", static_cast<double>(d.imported_bytes) / (1 << 20)},
                   {"peak_mib", static_cast<double>(d.peak_bytes) / (1 << 20)},
                   {"reserved_peak_mib", mib_or_null(d.reserved_peak_bytes)},
                   {"device_level_mib", mib_or_null(d.device_level_bytes())},
                   {"waits_ms", Json::object()}});
      for (const auto& [k, v] : d.waits.fields()) a.back()["waits_ms"][k] = v;
    }
    return a;
  };
  const BenchOptions& o = r.options;
  Json j{{"backend", r.backend}, {"config", r.config},   {"weights", weights_source},
         {"width", o.width},     {"height", o.height},   {"frames", o.frames},
         {"warmup", o.warmup},   {"repeats", o.repeats}, {"version", SEEDVAE_VERSION}};
  j["options"] = Json::parse(to_json(o.run));
  j["settings"] = describe(o.run);
  j["schedule"] = o.schedule_note.empty() ? "as set" : o.schedule_note;
  // Flat copies of the streaming choices, as earlier reports had them.
  const StreamOptions so = stream_options(o.run);
  j["chunk_latents"] = so.chunk_latents;
  j["hires_chunk_frames"] = so.hires_chunk_frames;
  j["async_tiles"] = so.async_tiles;
  j["lone_head"] = so.lone_head;
  j["lean_convs"] = so.lean_convs;
  j["ops"] = Json::array();
  for (const auto& op : r.ops) {
    j["ops"].push_back(
        {{"op", op.op},
         {"total_ms", op.total_ms},
         {"ms_per_frame", op.ms_per_frame},
         {"tflop", op.tflop},
         {"tflops_per_s", op.tflops_per_s},
         {"gflops_per_s", op.tflops_per_s * 1000},
         {"peak_mib", static_cast<double>(op.peak_bytes) / (1 << 20)},
         {"reserved_peak_mib", mib_or_null(op.reserved_peak_bytes)},
         {"device_peak_mib", mib_or_null(op.device_peak_bytes)},
         {"fixed_mib", mib_or_null(op.fixed_bytes)},
         {"budget_mib", op.budget_bytes > 0 ? mib_or_null(op.budget_bytes) : Json(nullptr)},
         {"host_peak_mib", mib_or_null(op.host_peak_bytes)},
         {"runs_ms", op.runs_ms},
         {"pipeline", op.pipeline},
         {"devices", devices_json(op.devices)},
         {"tiling",
          {{"mode", op.tiling},
           {"tile", {{"w", op.tile_w}, {"h", op.tile_h}}},
           {"overlap", {{"w", op.overlap_w}, {"h", op.overlap_h}}},
           {"tiles", op.tiles},
           {"plan", op.plan_note}}}});
  }
  j["stages"] = Json::array();
  for (const auto& st : r.stages) {
    j["stages"].push_back({{"op", st.op},
                           {"stage", st.stage},
                           {"ms", st.ms},
                           {"gflop", st.gflop},
                           {"gflops_per_s", st.ms > 0 ? st.gflop / (st.ms / 1000) : 0}});
  }
  return j.dump(2);
}

}  // namespace seedvae
