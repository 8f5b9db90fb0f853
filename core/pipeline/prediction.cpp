#include "core/pipeline/prediction.h"

#include <algorithm>

#include "core/media/vae_padding.h"
#include "core/schedule/planner.h"

namespace seedvae {

Result<TileSpec> resolve_tile(const RunOptions& o, const VaeConfig& config, bool encode,
                              int64_t height, int64_t width, int64_t frames, std::string* note) {
  TileSpec spec;
  spec.overlap_w = o.overlap.width;
  spec.overlap_h = o.overlap.height;
  const bool auto_tile = o.tile == PixelSize{};
  spec.tile_w = auto_tile ? 512 : o.tile.width;
  spec.tile_h = auto_tile ? 512 : o.tile.height;
  if (o.budget_gb <= 0 || !auto_tile || o.tiling == "off") return spec;
  PlanRequest req = plan_request(o, config, encode, height, width, frames);
  req.spec = spec;
  req.auto_tile = true;
  req.budget_bytes = budget_bytes(o);
  SEEDVAE_ASSIGN_OR_RETURN(TilePlanReport rep, plan(req));
  if (!rep.fits) {
    return out_of_memory("nothing fits the memory budget of " + format_bytes(req.budget_bytes) +
                         ": " + rep.message);
  }
  if (note) *note = describe(rep.chosen);
  return rep.chosen.spec;
}

PlanRequest plan_request(const RunOptions& o, const VaeConfig& config, bool encode, int64_t height,
                         int64_t width, int64_t frames) {
  PlanRequest req;
  req.op = encode ? PlanOp::kEncode : PlanOp::kDecode;
  req.config = config;
  req.height = height;
  req.width = width;
  req.frames = frames;
  req.mode = tiling_mode(o);
  req.layout = o.tile_layout == "uniform" ? TileLayout::kUniform : TileLayout::kReference;
  req.auto_tile = false;
  req.auto_chunk = false;
  req.chunk_latents = o.chunk_latents > 0
                          ? o.chunk_latents
                          : static_cast<int>((frames - 1) / config.temporal_factor() + 1);
  req.hires_chunk_frames = o.hires_chunk_frames;
  req.lean_convs = o.lean_convs;
  req.lone_head = o.lone_head;
  req.exact_keep_weights = o.exact_keep_weights;
  req.activation_bytes = req.weight_bytes = precision_bytes(o);
  req.backend = o.backend == "cuda" ? BackendMemoryModel::cuda() : BackendMemoryModel::cpu();
  if (o.backend == "cuda" && o.precision == "fidelity") {
    req.weight_bytes = 2;  // fp16 convolution weights; fp32 activations
    req.backend.conv_copy_bytes = 2;
  }
  if (o.backend == "cuda" && o.precision == "bf16" && o.fp8_convs) {
    req.weight_bytes = 3;             // bf16 weights and their e4m3 copies
    req.backend.conv_copy_bytes = 1;  // the e4m3 copy of a convolution's input (counted with
                                      // its output's size too: an upper bound)
  }
  if (o.backend == "cuda" && o.offload_state) {
    req.backend.offload_state = true;
    req.backend.offload_window_bytes = int64_t{o.offload_window_mib} << 20;
  }
  return req;
}

namespace {

struct Padded {
  int64_t h = 0, w = 0, t = 0;
};

Padded padded(const RunOptions& o, const VaeConfig& config, int64_t width, int64_t height,
              int64_t frames) {
  const int multiple = std::max(config.spatial_factor(), o.spatial_multiple);
  const media::PadPlan p = media::plan_padding(frames, height, width, multiple);
  return {p.padded_height, p.padded_width, p.padded_frames};
}

}  // namespace

Result<MemoryPrediction> predict_memory(const RunOptions& given, const VaeConfig& config,
                                        int64_t width, int64_t height, int64_t frames,
                                        int64_t device_budget_bytes) {
  if (width < 1 || height < 1 || frames < 1) return invalid_argument("predict: no input");
  const Padded pd = padded(given, config, width, height, frames);
  SEEDVAE_ASSIGN_OR_RETURN(
      const ScheduleChoice choice,
      choose_schedule(given, config, true, true, pd.h, pd.w, pd.t, device_budget_bytes));
  const RunOptions& o = choice.options;
  MemoryPrediction p;
  int64_t planner_host = 0;
  for (const bool encode : {true, false}) {
    PlanRequest req = plan_request(o, config, encode, pd.h, pd.w, pd.t);
    SEEDVAE_ASSIGN_OR_RETURN(req.spec, resolve_tile(o, config, encode, pd.h, pd.w, pd.t, nullptr));
    SEEDVAE_ASSIGN_OR_RETURN(const PlanEstimate e, estimate(req, req.spec, req.chunk_latents));
    planner_host = std::max(planner_host, e.host_bytes);
    if (e.peak_bytes <= p.engine_bytes) continue;
    p.engine_bytes = e.peak_bytes;
    p.weight_bytes = e.weight_bytes + e.exact_weight_bytes;
    p.activation_bytes = e.peak_bytes - p.weight_bytes;
    p.tiles = e.tiles;
    p.relative_time = e.relative_time;
    p.method = "planner (" + std::string(encode ? "encoder" : "decoder") + ", " + req.backend.name +
               " model): " + describe(e);
  }
  if (!choice.note.empty()) p.method = "automatic schedule: " + choice.note + "; " + p.method;
  // The job's host buffers. Frames stream (core/pipeline/job.h): a few chunks of fp32 frames are
  // alive at a time -- read ahead, padded, decoded (two in turn), trimmed, and the originals they
  // are compared with -- and the latent moments of the whole clip. A tiled encode reads the whole
  // padded clip first.
  const int sf = config.spatial_factor();
  const int64_t frame_bytes = pd.h * pd.w * 3 * 4;
  const int64_t chunk_frames =
      o.chunk_latents > 0
          ? std::min<int64_t>(pd.t, int64_t{o.chunk_latents} * config.temporal_factor() + 1)
          : pd.t;
  int64_t buffers = 6 * chunk_frames * frame_bytes;
  if (o.tiling != "off") buffers += pd.t * frame_bytes;
  const int64_t moments = 2 * config.latent_channels * ((pd.t - 1) / config.temporal_factor() + 1) *
                          (pd.h / sf) * (pd.w / sf) * 4;
  p.host_bytes = planner_host + buffers + moments;
  return p;
}

Result<ScheduleChoice> choose_schedule(const RunOptions& o, const VaeConfig& config, bool encode,
                                       bool decode, int64_t height, int64_t width, int64_t frames,
                                       int64_t budget_bytes) {
  ScheduleChoice c{o, {}};
  if (o.backend != "cuda" || !o.auto_schedule || budget_bytes <= 0 ||
      !find_option("auto_schedule")->not_applicable(o).empty()) {
    return c;
  }
  // Kernels the libraries load on first use (kLibraryAllowance) come on top of the planner's peak
  // (its fixed part is the context and handles), as the CUDA backend counts them. Under a reserve
  // cap the caching allocator also needs room beyond the live bytes (it does not split blocks): a
  // tenth of the planned activations and weights. Measured on an H100: the lean 512x512 decode
  // planned at 2.24 GiB failed under a 2.49 GiB budget, the 1080p (10.36 GiB) and 720p (5.16 GiB)
  // ones completed under 11.99 and 7.49 GiB.
  auto peak = [&](const RunOptions& r) -> Result<int64_t> {
    int64_t p = 0;
    for (const bool enc : {true, false}) {
      if ((enc && !encode) || (!enc && !decode)) continue;
      PlanRequest req = plan_request(r, config, enc, height, width, frames);
      // State prefetched ahead of use is dropped when an allocation finds no room: what must fit
      // is the rest.
      if (req.backend.offload_state) req.backend.offload_window_bytes = -1;
      SEEDVAE_ASSIGN_OR_RETURN(const PlanEstimate e, estimate(req, req.spec, req.chunk_latents));
      const int64_t engine = e.peak_bytes - req.backend.fixed_bytes;
      p = std::max(p, e.peak_bytes + engine / 10);
    }
    return p + kLibraryAllowance;
  };
  SEEDVAE_ASSIGN_OR_RETURN(const int64_t as_given, peak(o));
  if (as_given <= budget_bytes) return c;
  const std::string over = "the planned peak of " + format_bytes(as_given) +
                           " exceeds the device budget of " + format_bytes(budget_bytes);
  RunOptions lean = o;
  lean.offload_state = lean.lone_head = lean.lean_convs = true;
  SEEDVAE_ASSIGN_OR_RETURN(const int64_t lean_peak, peak(lean));
  if (lean_peak <= budget_bytes) {
    c.options = lean;
    c.note = over +
             ": offloading the causal state with a lone head and lean convolutions "
             "(the same output; planned peak " +
             format_bytes(lean_peak) + ")";
    return c;
  }
  RunOptions exact = o;
  exact.tiling = "exact";
  // The tile is the planner's largest within the budget less the same allowance and margin.
  exact.budget_gb = static_cast<double>(budget_bytes - kLibraryAllowance) / 1.1 /
                    static_cast<double>(int64_t{1} << 30);
  c.options = exact;
  c.note = over + ", and the offloaded lean schedule's " + format_bytes(lean_peak) +
           " too: exact tiling with the largest tile that fits (the same output, slower)";
  return c;
}

Result<BudgetFit> fit_to_budget(const RunOptions& o, const VaeConfig& config, int64_t width,
                                int64_t height, int64_t frames, int64_t budget_bytes) {
  if (width < 1 || height < 1 || frames < 1) return invalid_argument("fit: no input");
  const Padded pd = padded(o, config, width, height, frames);
  BudgetFit f;
  // Tiling is the lever: an untiled setting is fitted with exact (seam-free) tiling.
  f.tiling = o.tiling == "off" ? "exact" : o.tiling;
  RunOptions fitted = o;
  fitted.tiling = f.tiling;
  PlanRequest req = plan_request(fitted, config, false, pd.h, pd.w, pd.t);
  req.spec = {512, 512, o.overlap.height, o.overlap.width};
  req.auto_tile = true;
  req.auto_chunk = true;
  req.max_chunk_latents = std::max(1, o.chunk_latents > 0 ? o.chunk_latents : 4);
  req.budget_bytes = budget_bytes;
  SEEDVAE_ASSIGN_OR_RETURN(const TilePlanReport rep, plan(req));
  f.tile = {rep.chosen.spec.tile_w, rep.chosen.spec.tile_h};
  f.chunk_latents = rep.chosen.chunk_latents;
  f.fits = rep.fits;
  f.message = rep.message;
  f.peak_bytes = rep.chosen.peak_bytes;
  req.op = PlanOp::kEncode;
  auto enc = estimate(req, rep.chosen.spec, rep.chosen.chunk_latents);
  if (enc.is_ok()) {
    f.peak_bytes = std::max(f.peak_bytes, enc->peak_bytes);
    f.fits = f.fits && enc->peak_bytes <= budget_bytes;
  }
  return f;
}

Result<MemoryPrediction> predict_memory(const RunOptions& options, const VaeWeights& weights,
                                        int64_t width, int64_t height, int64_t frames,
                                        int64_t device_budget_bytes) {
  if (weights.is_wan()) return unsupported("the memory planner models SeedVR2 VAEs only");
  return predict_memory(options, weights.config, width, height, frames, device_budget_bytes);
}

}  // namespace seedvae
