#include "core/schedule/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>

#include <nlohmann/json.hpp>

#include "core/schedule/exact_tiling.h"
#include "core/schedule/streaming.h"
#include "core/vae/vae_model.h"

namespace seedvae {

std::string format_bytes(int64_t b) {
  char buf[64];
  const double v = static_cast<double>(b);
  if (v >= 1024.0 * 1024 * 1024) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", v / (1024.0 * 1024 * 1024));
  } else if (v >= 1024.0 * 1024) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", v / (1024.0 * 1024));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f KiB", v / 1024.0);
  }
  return buf;
}

std::string describe(const PlanEstimate& e) {
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "tile %lldx%lld px, chunk %d latent(s), %lld tile(s): peak %s (weights %s, "
                "activations %s at %s), host %s, time x%.2f of untiled%s",
                static_cast<long long>(e.spec.tile_w), static_cast<long long>(e.spec.tile_h),
                e.chunk_latents, static_cast<long long>(e.tiles),
                format_bytes(e.peak_bytes).c_str(), format_bytes(e.weight_bytes).c_str(),
                format_bytes(e.activation_peak_bytes).c_str(), e.peak_at.c_str(),
                format_bytes(e.host_bytes).c_str(), e.relative_time,
                e.fits ? "" : " (over budget)");
  return buf;
}

namespace {

// The model replayed on a dry-run backend: one measured stream of chunks.
struct StreamResult {
  int64_t peak = 0;          // every byte the backend holds (weights included)
  int64_t weight_bytes = 0;  // resident weights (packed copies included)
  int64_t weight_peak = 0;   // weights at their peak (exact tiling: + one layer's)
  std::string peak_at;
  double flops = 0;
  int64_t memory_bytes = 0;  // causal state at the end
  int64_t host_peak = 0;     // exact tiling: the host's whole-frame tensors; else offloaded state
  int64_t tiles = 1;         // exact tiling: tiles of the output layer
};

DType activation_dtype(const PlanRequest& r) {
  return r.activation_bytes <= 2 ? DType::kBF16 : DType::kF32;
}

// The latent ranges of the clip's chunks, as the schedulers make them.
std::vector<int64_t> chunk_sizes(const PlanRequest& r, int64_t latents, int chunk) {
  std::vector<int64_t> s;
  for (const auto& [b, e] : plan_chunks(latents, chunk, r.lone_head)) s.push_back(e - b);
  return s;
}

// Remembers in which top-level block the backend's peak was reached.
class PeakTracker {
 public:
  explicit PeakTracker(const CountingBackend& device) : device_(device) {}
  Status operator()(std::string_view block, const Tensor&) {
    const int64_t peak = device_.memory_stats().peak_bytes;
    if (peak > last_) {
      last_ = peak;
      at_ = std::string(block) + " (" + device_.peak_at() + ")";
    }
    return Status::ok();
  }
  const std::string& at() const { return at_; }

 private:
  const CountingBackend& device_;
  int64_t last_ = -1;
  std::string at_;
};

VaeModel::ParameterFactory declare_on(CountingBackend& device) {
  return [&device](const VaeConfig::Param& p) -> Result<Tensor> {
    return device.declare_weight(p.shape);
  };
}

// Streams the clip's chunks through `model` (on `device`, or on `tiles` over it) on a
// (lat_h, lat_w)-latent region: the peak over the first two chunks (the first is the largest,
// the second has every causal memory live), the FLOPs of all chunks (a middle chunk repeats the
// second exactly). `declare` makes a chunk's input.
template <typename Declare>
Status replay_chunks(const PlanRequest& r, VaeModel& model, CountingBackend& device, int64_t lat_h,
                     int64_t lat_w, int chunk, Declare declare, StreamResult& out,
                     CausalState& state) {
  const VaeConfig& c = r.config;
  const int tf = c.temporal_factor(), sf = c.spatial_factor();
  const int64_t latents = (r.frames - 1) / tf + 1;
  const auto sizes = chunk_sizes(r, latents, chunk);
  const bool exact = r.mode == TilingMode::kExact;
  const ChunkOptions options{.hires_chunk_frames = exact ? 0 : r.hires_chunk_frames,
                             .lean_convs = !exact && r.lean_convs};
  auto input = [&](size_t i) {
    if (r.op == PlanOp::kDecode) return Shape{1, c.latent_channels, sizes[i], lat_h, lat_w};
    const int64_t frames = i == 0 ? (sizes[i] - 1) * tf + 1 : sizes[i] * tf;
    return Shape{1, c.in_channels, frames, lat_h * sf, lat_w * sf};
  };
  double flops_second = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i >= 2 && i + 1 < sizes.size() && sizes[i] == sizes[1]) {
      out.flops += flops_second;
      continue;
    }
    const double before = device.flops();
    const Tensor x = declare(input(i));
    SEEDVAE_TRY((r.op == PlanOp::kDecode ? model.decode_chunk(x, state, options)
                                         : model.encode_chunk(x, state, options))
                    .take_status());
    out.flops += device.flops() - before;
    if (i == 1) flops_second = device.flops() - before;
  }
  out.memory_bytes = state.bytes();
  return Status::ok();
}

// The untiled model (or one blended tile) streamed over a (lat_h, lat_w)-latent region.
Result<StreamResult> simulate_stream(const PlanRequest& r, int64_t lat_h, int64_t lat_w,
                                     int chunk) {
  CountingBackend device(activation_dtype(r), r.backend, r.weight_bytes);
  SEEDVAE_ASSIGN_OR_RETURN(VaeModel model, VaeModel::create(device, r.config, declare_on(device)));
  auto declare = [&](const Shape& s) { return device.declare(s); };
  StreamResult out;
  {  // warm-up: the first chunk once, which packs the weights it runs (as a backend's first run)
    PlanRequest first = r;
    first.frames = 1;
    StreamResult ignored;
    CausalState state;
    SEEDVAE_TRY(replay_chunks(first, model, device, lat_h, lat_w, chunk, declare, ignored, state));
  }
  out.weight_bytes = device.weight_bytes();
  device.reset_peak();
  device.reset_flops();
  PeakTracker tracker(device);
  model.set_observer(std::ref(tracker));
  CausalState state;
  SEEDVAE_TRY(replay_chunks(r, model, device, lat_h, lat_w, chunk, declare, out, state));
  out.peak = device.memory_stats().peak_bytes;
  out.weight_peak = device.weight_peak_bytes();
  out.peak_at = tracker.at();
  out.host_peak = device.offloaded_peak_bytes();
  return out;
}

// Exact tiling: the device model (resident, never run) and the model on an ExactTilingBackend
// dry run over the same device.
Result<StreamResult> simulate_exact(const PlanRequest& r, const TileSpec& tile, int chunk) {
  CountingBackend device(activation_dtype(r), r.backend, r.weight_bytes);
  SEEDVAE_ASSIGN_OR_RETURN(VaeModel resident,
                           VaeModel::create(device, r.config, declare_on(device)));
  auto tiles = ExactTilingBackend::dry_run(
      device, ExactTilingOptions{tile.tile_h, tile.tile_w, r.exact_keep_weights});
  tiles->set_frame(r.height, r.width);
  SEEDVAE_ASSIGN_OR_RETURN(VaeModel model,
                           VaeModel::create(*tiles, r.config, [&](const VaeConfig::Param& p) {
                             return Result<Tensor>(tiles->declare_weight(p.shape, p.name));
                           }));
  StreamResult out;
  out.weight_bytes = device.weight_bytes();
  device.reset_peak();
  device.reset_flops();
  PeakTracker tracker(device);
  model.set_observer(std::ref(tracker));
  const int sf = r.config.spatial_factor();
  CausalState state;
  SEEDVAE_TRY(replay_chunks(
      r, model, device, r.height / sf, r.width / sf, chunk,
      [&](const Shape& s) { return tiles->declare(s); }, out, state));
  out.peak = device.memory_stats().peak_bytes;
  out.weight_peak = device.weight_peak_bytes();
  out.peak_at = tracker.at();
  out.host_peak = tiles->host_peak_bytes();
  out.tiles = tiles->last_conv_tiles();
  return out;
}

// Parameter bytes of the convolution weights the op runs (the decoder's for decode), which a
// backend packs (BackendMemoryModel::conv_weight_copies).
int64_t packed_weight_bytes(const PlanRequest& r) {
  const std::string side = r.op == PlanOp::kEncode ? "encoder." : "decoder.";
  int64_t b = 0;
  for (const auto& p : r.config.parameters()) {
    if (p.shape.rank() == 5 && p.name.rfind(side, 0) == 0) b += p.shape.numel() * r.weight_bytes;
  }
  return static_cast<int64_t>(static_cast<double>(b) * (r.backend.conv_weight_copies - 1.0));
}

Status validate(const PlanRequest& r) {
  SEEDVAE_TRY(r.config.validate());
  const int sf = r.config.spatial_factor(), tf = r.config.temporal_factor();
  if (r.height < sf || r.width < sf || r.height % sf || r.width % sf) {
    return invalid_argument("plan: frame " + std::to_string(r.width) + "x" +
                            std::to_string(r.height) + " must be a positive multiple of " +
                            std::to_string(sf));
  }
  if (r.frames < 1 || (r.frames - 1) % tf != 0) {
    return invalid_argument("plan: " + std::to_string(r.frames) + " frames is not 4n+1");
  }
  if (r.activation_bytes < 1 || r.weight_bytes < 1) {
    return invalid_argument("plan: element sizes must be positive");
  }
  if (r.max_chunk_latents < 1 || r.chunk_latents < 0) {
    return invalid_argument("plan: chunk sizes must be positive");
  }
  return Status::ok();
}

}  // namespace

int64_t causal_state_bytes(const VaeConfig& config, bool encode, int64_t lat_h, int64_t lat_w,
                           int chunk_latents, int64_t activation_bytes) {
  PlanRequest r;
  r.config = config;
  r.op = encode ? PlanOp::kEncode : PlanOp::kDecode;
  r.activation_bytes = activation_bytes;
  r.mode = TilingMode::kOff;
  const int c = std::max(1, chunk_latents);
  r.frames = (2 * c + 1 - 1) * config.temporal_factor() + 1;  // two chunks: every memory exists
  auto s = simulate_stream(r, lat_h, lat_w, c);
  return s.is_ok() ? s->memory_bytes : 0;
}

Result<PlanEstimate> estimate(const PlanRequest& r, const TileSpec& tile, int chunk) {
  SEEDVAE_TRY(validate(r));
  const VaeConfig& c = r.config;
  const int sf = c.spatial_factor(), tf = c.temporal_factor();
  const int64_t lat_h = r.height / sf, lat_w = r.width / sf;
  const int64_t latents = (r.frames - 1) / tf + 1;
  PlanEstimate e;
  e.spec = tile;
  e.chunk_latents = chunk;
  PlanRequest untiled_request = r;
  untiled_request.mode = TilingMode::kOff;
  SEEDVAE_ASSIGN_OR_RETURN(const StreamResult whole,
                           simulate_stream(untiled_request, lat_h, lat_w, chunk));
  const int64_t out_c = r.op == PlanOp::kDecode ? c.out_channels : 2 * c.latent_channels;
  const int64_t out_h = r.op == PlanOp::kDecode ? r.height : lat_h;
  const int64_t out_w = r.op == PlanOp::kDecode ? r.width : lat_w;
  const auto sizes = chunk_sizes(r, latents, chunk);
  const int64_t first_chunk_frames =
      r.op == PlanOp::kDecode ? (sizes.front() - 1) * tf + 1 : sizes.front();

  int64_t peak = 0;
  if (r.mode == TilingMode::kOff) {
    e.spec = {r.height, r.width, 0, 0};
    e.tiles = 1;
    e.weight_bytes = whole.weight_bytes;
    peak = whole.peak;
    e.peak_at = whole.peak_at;
    e.flops = whole.flops;
    e.relative_time = 1.0;
    e.host_bytes = whole.host_peak;  // the offloaded causal state (pinned)
  } else if (r.mode == TilingMode::kBlend) {
    SEEDVAE_ASSIGN_OR_RETURN(TilePlan plan, make_tile_plan(lat_h, lat_w, tile, r.layout, sf));
    e.tiles = static_cast<int64_t>(plan.tiles.size());
    std::map<std::pair<int64_t, int64_t>, StreamResult> by_shape;
    e.tile_shapes = 0;
    double flops = 0;
    int64_t parked = 0;
    for (const PlannedTile& t : plan.tiles) {
      auto key = std::make_pair(t.latent.h, t.latent.w);
      auto it = by_shape.find(key);
      if (it == by_shape.end()) {
        SEEDVAE_ASSIGN_OR_RETURN(StreamResult s, simulate_stream(r, t.latent.h, t.latent.w, chunk));
        it = by_shape.emplace(key, std::move(s)).first;
        ++e.tile_shapes;
      }
      flops += it->second.flops;
      parked += it->second.memory_bytes;
      if (it->second.peak > peak) {
        peak = it->second.peak;
        e.weight_bytes = it->second.weight_bytes;
        e.peak_at = it->second.peak_at;
      }
    }
    e.flops = flops;
    e.relative_time = whole.flops > 0 ? flops / whole.flops : 1.0;
    // Host: the weight sum and the largest raw tile, plus either the chunk accumulator and the
    // parked states of every tile (chunk-major) or the whole-clip accumulator (tile-major),
    // whichever TileOrder::kAuto picks (the smaller).
    const int64_t max_tile_px =
        plan.rows.tile * plan.cols.tile * (r.op == PlanOp::kDecode ? sf * sf : 1);
    int64_t total_frames = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      total_frames +=
          r.op == PlanOp::kDecode ? (i == 0 ? (sizes[i] - 1) * tf + 1 : sizes[i] * tf) : sizes[i];
    }
    const int64_t chunk_major =
        4 * out_c * first_chunk_frames * out_h * out_w + (sizes.size() > 1 ? parked : 0);
    const int64_t tile_major = 4 * out_c * total_frames * out_h * out_w;
    e.host_bytes =
        4 * (out_h * out_w + out_c * first_chunk_frames * max_tile_px) +
        (sizes.size() > 1 && e.tiles > 1 ? std::min(chunk_major, tile_major) : chunk_major);
  } else {
    SEEDVAE_ASSIGN_OR_RETURN(const StreamResult s, simulate_exact(r, tile, chunk));
    e.tiles = s.tiles;
    e.weight_bytes = s.weight_bytes;                        // the device model's, resident
    e.exact_weight_bytes = s.weight_peak - s.weight_bytes;  // the layer uploads at their largest
    peak = s.peak;
    e.peak_at = s.peak_at;
    e.flops = s.flops;
    e.relative_time =
        (whole.flops > 0 ? e.flops / whole.flops : 1.0) * (1.0 + r.backend.exact_host_overhead);
    e.host_bytes = s.host_peak;
  }
  e.activation_peak_bytes = peak - e.weight_bytes - e.exact_weight_bytes;
  e.peak_bytes = peak + r.backend.fixed_bytes;
  e.peak_bytes_upper = e.peak_bytes;
  if (e.tile_shapes > 1 && r.backend.max_weight_packs > 1) {
    const int64_t packs = std::min<int64_t>(r.backend.max_weight_packs, e.tile_shapes);
    e.peak_bytes_upper += (packs - 1) * packed_weight_bytes(r);
  }
  e.fits = r.budget_bytes <= 0 || e.peak_bytes <= r.budget_bytes;
  return e;
}

Result<TilePlanReport> plan(const PlanRequest& r) {
  SEEDVAE_TRY(validate(r));
  TilePlanReport rep;
  rep.request = r;
  const int sf = r.config.spatial_factor();
  std::vector<int> chunks;
  if (r.auto_chunk) {
    for (int c = r.max_chunk_latents; c >= 1; --c) chunks.push_back(c);
  } else {
    chunks.push_back(r.chunk_latents);
  }
  // Tile candidates (pixels), largest first.
  std::vector<TileSpec> tiles;
  if (r.mode == TilingMode::kOff) {
    tiles.push_back({r.height, r.width, 0, 0});
  } else if (!r.auto_tile) {
    tiles.push_back(r.spec);
  } else {
    const int64_t side = std::max(r.height, r.width);
    std::vector<int64_t> sides;
    for (int64_t s = (side + 63) / 64 * 64; s >= 128; s -= 64) sides.push_back(s);
    for (int64_t s = std::min<int64_t>(112, (side + 15) / 16 * 16); s >= 16; s -= 16)
      sides.push_back(s);
    sides.push_back(8);
    for (int64_t s : sides) {
      TileSpec t = r.spec;
      t.tile_h = std::min(s, r.height);
      t.tile_w = std::min(s, r.width);
      if (r.mode == TilingMode::kBlend) {
        // The tile must exceed its overlap (uniform layout refuses otherwise; the reference
        // layout would clamp the overlap silently).
        if ((t.tile_h / sf) <= (t.overlap_h + sf - 1) / sf && t.tile_h < r.height) continue;
        if ((t.tile_w / sf) <= (t.overlap_w + sf - 1) / sf && t.tile_w < r.width) continue;
      }
      if (!tiles.empty() && tiles.back().tile_h == t.tile_h && tiles.back().tile_w == t.tile_w)
        continue;
      tiles.push_back(t);
    }
  }
  bool found = false;
  for (const TileSpec& t : tiles) {
    for (int c : chunks) {
      auto e = estimate(r, t, c);
      if (!e.is_ok()) {
        if (!r.auto_tile) return e.take_status();
        continue;  // e.g. a uniform tile smaller than its overlap
      }
      rep.candidates.push_back(*e);
      if (e->fits && !found) {
        rep.chosen = *e;
        found = true;
      }
    }
    if (found) break;
  }
  if (rep.candidates.empty()) return invalid_argument("plan: no tile candidate is valid");
  if (!found) {
    // Report the smallest-peak candidate.
    rep.chosen = *std::min_element(
        rep.candidates.begin(), rep.candidates.end(),
        [](const PlanEstimate& a, const PlanEstimate& b) { return a.peak_bytes < b.peak_bytes; });
  }
  rep.fits = found;
  {
    PlanRequest whole = r;
    whole.mode = TilingMode::kOff;
    auto u = estimate(whole, {r.height, r.width, 0, 0}, rep.chosen.chunk_latents);
    if (u.is_ok()) rep.untiled = *u;
  }
  if (r.mode == TilingMode::kBlend) {
    auto p = make_tile_plan(r.height / sf, r.width / sf, rep.chosen.spec, r.layout, sf);
    if (p.is_ok()) rep.plan = std::move(*p);
  }
  rep.message = (found ? std::string("fits: ")
                       : std::string("does not fit the budget of ") + format_bytes(r.budget_bytes) +
                             "; smallest: ") +
                describe(rep.chosen);
  return rep;
}

namespace {

nlohmann::json estimate_json(const PlanEstimate& e) {
  return {{"tile", {{"h", e.spec.tile_h}, {"w", e.spec.tile_w}}},
          {"overlap", {{"h", e.spec.overlap_h}, {"w", e.spec.overlap_w}}},
          {"chunk_latents", e.chunk_latents},
          {"tiles", e.tiles},
          {"tile_shapes", e.tile_shapes},
          {"weight_bytes", e.weight_bytes},
          {"exact_weight_bytes", e.exact_weight_bytes},
          {"activation_peak_bytes", e.activation_peak_bytes},
          {"peak_bytes", e.peak_bytes},
          {"peak_bytes_upper", e.peak_bytes_upper},
          {"host_bytes", e.host_bytes},
          {"peak_at", e.peak_at},
          {"flops", e.flops},
          {"relative_time", e.relative_time},
          {"fits", e.fits}};
}

}  // namespace

std::string plan_report_json(const TilePlanReport& rep) {
  using nlohmann::json;
  const PlanRequest& r = rep.request;
  json j;
  j["request"] = {{"op", r.op == PlanOp::kDecode ? "decode" : "encode"},
                  {"height", r.height},
                  {"width", r.width},
                  {"frames", r.frames},
                  {"mode", std::string(tiling_mode_name(r.mode))},
                  {"layout", std::string(tile_layout_name(r.layout))},
                  {"activation_bytes", r.activation_bytes},
                  {"weight_bytes", r.weight_bytes},
                  {"budget_bytes", r.budget_bytes},
                  {"backend_model", r.backend.name},
                  {"lone_head", r.lone_head},
                  {"lean_convs", r.lean_convs},
                  {"hires_chunk_frames", r.hires_chunk_frames},
                  {"config", r.config.to_string()}};
  j["fits"] = rep.fits;
  j["message"] = rep.message;
  j["chosen"] = estimate_json(rep.chosen);
  j["untiled"] = estimate_json(rep.untiled);
  j["tiles"] = json::array();
  for (const PlannedTile& t : rep.plan.tiles) {
    j["tiles"].push_back({{"x", t.pixel.x}, {"y", t.pixel.y}, {"w", t.pixel.w}, {"h", t.pixel.h}});
  }
  j["candidates"] = json::array();
  for (const PlanEstimate& e : rep.candidates) j["candidates"].push_back(estimate_json(e));
  return j.dump();
}

}  // namespace seedvae
