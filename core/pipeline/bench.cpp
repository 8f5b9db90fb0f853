#include "core/pipeline/bench.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <random>

#include "core/backend/counting_backend.h"
#include "core/schedule/streaming.h"
#include "core/vae/vae_model.h"

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

// Structure-only weights (zero values): the counting backend only looks at shapes.
VaeWeights shape_weights(const VaeConfig& c) {
  VaeWeights w;
  w.config = c;
  for (const auto& p : c.parameters()) w.tensors.emplace(p.name, HostTensor(DType::kF16, p.shape));
  return w;
}

class StageTimes final : public TelemetrySink {
 public:
  void on_stage(const StageSample& s) override { ms[s.stage] += s.wall_ms; }
  std::map<std::string, double> ms;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Per-stage analytic FLOPs of one op.
Result<std::map<std::string, double>> stage_flops(const VaeConfig& config, bool encode,
                                                   const Shape& input, int chunk) {
  CountingBackend cb;
  SEEDVAE_ASSIGN_OR_RETURN(VaeModel m, VaeModel::create(cb, shape_weights(config)));
  std::map<std::string, double> out;
  double last = 0;
  m.set_observer([&](std::string_view block, const Tensor&) {
    out[std::string(block)] += cb.flops() - last;
    last = cb.flops();
    return Status::ok();
  });
  const HostTensor x(DType::kF32, input);
  if (encode) {
    SEEDVAE_TRY(encode_video(m, x, {chunk}).take_status());
  } else {
    SEEDVAE_TRY(decode_latent(m, x, {chunk}).take_status());
  }
  return out;
}

}  // namespace

Result<double> count_flops(const VaeConfig& config, bool encode, int frames, int height, int width,
                           int chunk_latents) {
  const int f = config.temporal_factor(), s = config.spatial_factor();
  const Shape in = encode ? Shape{1, config.in_channels, frames, height, width}
                          : Shape{1, config.latent_channels, (frames - 1) / f + 1, height / s, width / s};
  SEEDVAE_ASSIGN_OR_RETURN(auto per_stage, stage_flops(config, encode, in, chunk_latents));
  double total = 0;
  for (const auto& [k, v] : per_stage) total += v;
  return total;
}

Result<BenchResult> run_bench(Backend& backend, const VaeWeights& weights,
                              const BenchOptions& o) {
  const VaeConfig& c = weights.config;
  const int f = c.temporal_factor(), s = c.spatial_factor();
  if (o.frames < 1 || (o.frames - 1) % f != 0 || o.width % s || o.height % s) {
    return invalid_argument("bench needs 4n+1 frames and a size that is a multiple of 8");
  }
  BenchResult r;
  r.backend = backend.name();
  r.options = o;
  r.config = c.to_string();
  SEEDVAE_ASSIGN_OR_RETURN(VaeModel model, VaeModel::create(backend, weights));
  const int latents = (o.frames - 1) / f + 1;
  for (const bool enc : {true, false}) {
    if ((enc && !o.encode) || (!enc && !o.decode)) continue;
    const Shape in = enc ? Shape{1, c.in_channels, o.frames, o.height, o.width}
                         : Shape{1, c.latent_channels, latents, o.height / s, o.width / s};
    const HostTensor x = random_input(in, enc ? 1 : 2);
    SEEDVAE_ASSIGN_OR_RETURN(auto flops, stage_flops(c, enc, in, o.chunk_latents));
    BenchOpResult op;
    op.op = enc ? "encode" : "decode";
    std::map<std::string, std::vector<double>> stage_runs;
    // Warm-up runs, then `repeats` timed runs without telemetry (the op totals), then one run
    // with stage telemetry, which synchronises after every block (the per-stage split).
    for (int i = 0; i < o.warmup + o.repeats + 1; ++i) {
      StageTimes times;
      const bool measured = i >= o.warmup && i < o.warmup + o.repeats;
      const bool staged = i == o.warmup + o.repeats;
      model.set_telemetry(staged ? &times : nullptr);
      backend.reset_peak();
      const auto t0 = Clock::now();
      const StreamOptions so{.chunk_latents = o.chunk_latents,
                             .async_tiles = o.async_tiles,
                             .lone_head = o.lone_head,
                             .hires_chunk_frames = o.hires_chunk_frames,
                             .lean_convs = o.lean_convs};
      auto out = enc ? encode_video(model, x, so) : decode_latent(model, x, so);
      if (!out) return out.take_status();
      SEEDVAE_TRY(backend.synchronize());
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      model.set_telemetry(nullptr);
      for (const auto& [k, v] : times.ms) stage_runs[k].push_back(v);
      if (!measured) continue;
      op.runs_ms.push_back(ms);
      op.peak_bytes = std::max(op.peak_bytes, backend.memory_stats().peak_bytes);
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

}  // namespace seedvae
