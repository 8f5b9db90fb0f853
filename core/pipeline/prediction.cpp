#include "core/pipeline/prediction.h"

#include <algorithm>

#include "core/media/vae_padding.h"
#include "core/schedule/planner.h"
#include "core/schedule/streaming.h"
#include "core/schedule/wan_tiles.h"
#include "core/vae/wan_model.h"

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

namespace {

// The dry-run backend's memory model for a run of `o`, and its bytes per parameter.
struct DryRunModel {
  BackendMemoryModel backend;
  int64_t weight_bytes = 4;
};

DryRunModel dry_run_model(const RunOptions& o) {
  DryRunModel m;
  m.weight_bytes = precision_bytes(o);
  m.backend = o.backend == "cuda" ? BackendMemoryModel::cuda() : BackendMemoryModel::cpu();
  if (o.backend == "cuda" && o.precision == "fidelity") {
    m.weight_bytes = 2;  // fp16 convolution weights; fp32 activations
    m.backend.conv_copy_bytes = 2;
  }
  if (o.backend == "cuda" && o.precision == "bf16" && o.fp8_convs) {
    m.weight_bytes = 3;             // bf16 weights and their e4m3 copies
    m.backend.conv_copy_bytes = 1;  // the e4m3 copy of a convolution's input (counted with
                                    // its output's size too: an upper bound)
  }
  if (o.backend == "cuda" && o.offload_state) {
    m.backend.offload_state = true;
    m.backend.offload_window_bytes = int64_t{o.offload_window_mib} << 20;
  }
  return m;
}

}  // namespace

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
  req.activation_bytes = precision_bytes(o);
  const DryRunModel m = dry_run_model(o);
  req.weight_bytes = m.weight_bytes;
  req.backend = m.backend;
  return req;
}

namespace {

struct Padded {
  int64_t h = 0, w = 0, t = 0;
};

Padded padded(const RunOptions& o, int spatial_factor, int64_t width, int64_t height,
              int64_t frames) {
  const int multiple = std::max(spatial_factor, o.spatial_multiple);
  const media::PadPlan p = media::plan_padding(frames, height, width, multiple);
  return {p.padded_height, p.padded_width, p.padded_frames};
}

// What the automatic schedule compares with the device budget, from a dry run's peak (its fixed
// part the context and handles): kernels the libraries load on first use (kLibraryAllowance) come
// on top, as the CUDA backend counts them, and under a reserve cap the caching allocator needs
// room beyond the live bytes (it does not split blocks): a tenth of the rest. Measured on an H100:
// the lean 512x512 SeedVR2 decode planned at 2.24 GiB failed under a 2.49 GiB budget, the 1080p
// (10.36 GiB) and 720p (5.16 GiB) ones completed under 11.99 and 7.49 GiB.
int64_t with_margins(int64_t peak, int64_t fixed) {
  return peak + (peak - fixed) / 10 + kLibraryAllowance;
}

// The larger of `peak_of(true)` (the encoder) and `peak_of(false)` (the decoder), over those the
// run has.
template <typename PeakOf>
Result<int64_t> worst_of(bool encode, bool decode, PeakOf peak_of) {
  int64_t worst = 0;
  for (const bool enc : {true, false}) {
    if ((enc && !encode) || (!enc && !decode)) continue;
    SEEDVAE_ASSIGN_OR_RETURN(const int64_t p, peak_of(enc));
    worst = std::max(worst, p);
  }
  return worst;
}

// The automatic schedule's note when the run as given does not fit ("planned" / "predicted").
std::string over_budget(std::string_view how, int64_t peak, int64_t budget_bytes) {
  return "the " + std::string(how) + " peak of " + format_bytes(peak) +
         " exceeds the device budget of " + format_bytes(budget_bytes);
}

// Whether the automatic schedule applies to a run of `o` within `budget_bytes`.
bool auto_schedule_applies(const RunOptions& o, int64_t budget_bytes) {
  return o.backend == "cuda" && o.auto_schedule && budget_bytes > 0 &&
         find_option("auto_schedule")->not_applicable(o).empty();
}

// The job's host buffers. Frames stream (core/pipeline/job.h): a few chunks of fp32 frames are
// alive at a time -- read ahead, padded, decoded (two in turn), trimmed, and the originals they
// are compared with -- and the latent moments of the whole clip. A tiled encode reads the whole
// padded clip first.
int64_t job_host_bytes(const RunOptions& o, const Padded& pd, int64_t tf, int64_t sf,
                       int64_t latent_channels) {
  const int64_t frame_bytes = pd.h * pd.w * 3 * 4;
  const int64_t chunk_frames =
      o.chunk_latents > 0 ? std::min<int64_t>(pd.t, int64_t{o.chunk_latents} * tf + 1) : pd.t;
  int64_t buffers = 6 * chunk_frames * frame_bytes;
  if (o.tiling != "off") buffers += pd.t * frame_bytes;
  const int64_t moments =
      2 * latent_channels * ((pd.t - 1) / tf + 1) * (pd.h / sf) * (pd.w / sf) * 4;
  return buffers + moments;
}

}  // namespace

Result<MemoryPrediction> predict_memory(const RunOptions& given, const VaeConfig& config,
                                        int64_t width, int64_t height, int64_t frames,
                                        int64_t device_budget_bytes) {
  if (width < 1 || height < 1 || frames < 1) return invalid_argument("predict: no input");
  const Padded pd = padded(given, config.spatial_factor(), width, height, frames);
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
  p.host_bytes = planner_host + job_host_bytes(o, pd, config.temporal_factor(),
                                               config.spatial_factor(), config.latent_channels);
  return p;
}

Result<ScheduleChoice> choose_schedule(const RunOptions& o, const VaeConfig& config, bool encode,
                                       bool decode, int64_t height, int64_t width, int64_t frames,
                                       int64_t budget_bytes) {
  ScheduleChoice c{o, {}};
  if (!auto_schedule_applies(o, budget_bytes)) return c;
  auto peak = [&](const RunOptions& r) {
    return worst_of(encode, decode, [&](bool enc) -> Result<int64_t> {
      PlanRequest req = plan_request(r, config, enc, height, width, frames);
      // State prefetched ahead of use is dropped when an allocation finds no room: what must fit
      // is the rest.
      if (req.backend.offload_state) req.backend.offload_window_bytes = -1;
      SEEDVAE_ASSIGN_OR_RETURN(const PlanEstimate e, estimate(req, req.spec, req.chunk_latents));
      return with_margins(e.peak_bytes, req.backend.fixed_bytes);
    });
  };
  SEEDVAE_ASSIGN_OR_RETURN(const int64_t as_given, peak(o));
  if (as_given <= budget_bytes) return c;
  const std::string over = over_budget("planned", as_given, budget_bytes);
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
  const Padded pd = padded(o, config.spatial_factor(), width, height, frames);
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

namespace {

// A Wan run's encoder or decoder on the dry-run backend (predict_memory's Wan form).
struct WanPeak {
  int64_t peak = 0;     // what the backend peaks at: weights, activations, causal state, fixed
  int64_t weights = 0;  // the resident parameters
  int64_t fixed = 0;    // the backend's own (context and handles)
};

// `must_fit`: as choose_schedule counts an offloaded state (what is prefetched ahead of use is
// dropped when an allocation finds no room, so what must fit is the rest).
// A decode with --tiling exact and a tile replays the halo tiles (core/schedule/wan_tiles.h).
Result<WanPeak> wan_peak(const RunOptions& o, const WanConfig& cfg, bool encode, int64_t height,
                         int64_t width, int64_t frames, bool must_fit = false) {
  const bool halo_tiles = !encode && o.tiling == "exact" && !(o.tile == PixelSize{});
  if (o.tiling != "off" && !halo_tiles) {
    return unsupported("the memory prediction of a " + std::string(family_name(cfg.family)) +
                       (encode ? " encode in tiles" : " decode in tiles without a tile size") +
                       ": a Wan VAE is predicted untiled, or as a decode in halo tiles of a "
                       "given size");
  }
  DryRunModel dm = dry_run_model(o);
  if (must_fit && dm.backend.offload_state) dm.backend.offload_window_bytes = -1;
  const BackendMemoryModel& model = dm.backend;
  const int64_t eb = precision_bytes(o);
  CountingBackend counting(eb == 2 ? DType::kBF16 : DType::kF32, model, dm.weight_bytes);
  SEEDVAE_ASSIGN_OR_RETURN(WanModel m,
                           WanModel::create(counting, cfg, [&](const std::string&, const Shape& s) {
                             return Result<Tensor>(counting.declare_weight(s));
                           }));
  WanPeak out;
  out.fixed = model.fixed_bytes;
  out.weights = counting.memory_stats().current_bytes;
  const StreamOptions so = stream_options(o);
  const ChunkOptions co = so.chunk_options(-1, -1);
  const int64_t tf = cfg.temporal_factor(), sf = cfg.spatial_factor();
  const auto chunks = plan_chunks((frames - 1) / tf + 1, so.chunk_latents, so.lone_head);
  auto replay = [&](size_t n) -> Status {
    CausalState st;
    for (size_t i = 0; i < std::min(n, chunks.size()); ++i) {
      const auto [b, e] = chunks[i];
      if (encode) {
        const int64_t t = b == 0 ? (e - 1) * tf + 1 : (e - b) * tf;
        SEEDVAE_TRY(
            m.encode_chunk(counting.declare(Shape{1, 3, t, height, width}), st, co).take_status());
      } else {
        const Shape z{1, cfg.z_dim, e - b, height / sf, width / sf};
        SEEDVAE_TRY(m.decode_chunk(counting.declare(z), st, co).take_status());
      }
    }
    return Status::ok();
  };
  if (halo_tiles) {
    // tile-major: every tile runs the same chunks; three latent frames hold every causal memory
    const HostTensor z(DType::kF32, Shape{1, cfg.z_dim, std::min<int64_t>(3, (frames - 1) / tf + 1),
                                          height / sf, width / sf});
    const WanTileOptions to{.tile_h = o.tile.height, .tile_w = o.tile.width, .assemble = false};
    SEEDVAE_TRY(wan_tiled_decode(m, z, to, so).status());
    out.peak = counting.memory_stats().peak_bytes + out.fixed;
    return out;
  }
  SEEDVAE_TRY(replay(1));
  counting.reset_peak();
  SEEDVAE_TRY(replay(3));
  out.peak = counting.memory_stats().peak_bytes + out.fixed;
  return out;
}

}  // namespace

Result<std::optional<WanTileFit>> fit_wan_tiles(const RunOptions& o, const WanConfig& cfg,
                                                int64_t height, int64_t width, int64_t frames,
                                                int64_t budget_bytes, bool may_set_pieces) {
  const int64_t sf = cfg.spatial_factor();
  const int64_t lh = height / sf, lw = width / sf;
  if (lh < 1 || lw < 1) return invalid_argument("fit: no frame");
  // Grids of more and more tiles, the longer side split first; in each, the decoder as given,
  // then with its full-frame-rate levels one frame at a time. Measured on an H200 (Wan2.1,
  // 1280x720x81, bf16): 2 tiles 1.31x the untiled time, with pieces 1.44x, 4 with pieces 1.76x.
  std::vector<std::pair<int64_t, int64_t>> grids;  // rows, columns
  for (int64_t n = 2; n <= 64; ++n) {
    for (int64_t r = 1; r <= n; ++r) {
      if (n % r != 0 || r > lh || n / r > lw) continue;
      const int64_t c = n / r;
      // near-square tiles only: the halo costs least around a square
      const double aspect = (static_cast<double>(lh) / static_cast<double>(r)) /
                            (static_cast<double>(lw) / static_cast<double>(c));
      if (aspect > 2.5 || aspect < 0.4) continue;
      grids.emplace_back(r, c);
    }
  }
  std::vector<int> piece_options{o.hires_chunk_frames};
  if (may_set_pieces && o.hires_chunk_frames != 1) piece_options.push_back(1);
  for (const auto& [r, c] : grids) {
    for (const int pieces : piece_options) {
      RunOptions t = o;
      t.tiling = "exact";
      t.tile = {((lw + c - 1) / c) * sf, ((lh + r - 1) / r) * sf};
      t.hires_chunk_frames = pieces;
      SEEDVAE_ASSIGN_OR_RETURN(const WanPeak w,
                               wan_peak(t, cfg, false, height, width, frames, true));
      const int64_t need = with_margins(w.peak, w.fixed);
      if (need <= budget_bytes) return std::optional<WanTileFit>(WanTileFit{t, need, r * c});
    }
  }
  return std::optional<WanTileFit>();
}

namespace {

Result<ScheduleChoice> choose_wan_schedule(const RunOptions& o, const WanConfig& cfg, bool encode,
                                           bool decode, int64_t height, int64_t width,
                                           int64_t frames, int64_t budget_bytes) {
  ScheduleChoice c{o, {}};
  if (!auto_schedule_applies(o, budget_bytes)) return c;
  auto peak = [&](const RunOptions& r) {
    return worst_of(encode, decode, [&](bool enc) -> Result<int64_t> {
      SEEDVAE_ASSIGN_OR_RETURN(const WanPeak w, wan_peak(r, cfg, enc, height, width, frames, true));
      return with_margins(w.peak, w.fixed);
    });
  };
  SEEDVAE_ASSIGN_OR_RETURN(const int64_t as_given, peak(o));
  if (as_given <= budget_bytes) return c;
  const std::string over = over_budget("predicted", as_given, budget_bytes);
  RunOptions pieces = o;
  if (decode) {
    pieces.hires_chunk_frames = 1;
    SEEDVAE_ASSIGN_OR_RETURN(const int64_t pieces_peak, peak(pieces));
    if (pieces_peak <= budget_bytes) {
      c.options = pieces;
      c.note = over +
               ": the decoder's full-frame-rate levels one frame at a time (chunked "
               "upsampling, the same output; predicted peak " +
               format_bytes(pieces_peak) + ")";
      return c;
    }
  }
  RunOptions offload = pieces;
  offload.offload_state = true;
  SEEDVAE_ASSIGN_OR_RETURN(const int64_t offload_peak, peak(offload));
  if (offload_peak <= budget_bytes) {
    c.options = offload;
    c.note = over + ": offloading the causal state" +
             (decode ? " with the decoder's full-frame-rate levels one frame at a time" : "") +
             " (the same output, slower; predicted peak " + format_bytes(offload_peak) + ")";
    return c;
  }
  if (decode && !encode) {
    SEEDVAE_ASSIGN_OR_RETURN(const std::optional<WanTileFit> fit,
                             fit_wan_tiles(o, cfg, height, width, frames, budget_bytes));
    if (fit) {
      c.options = fit->options;
      c.note = over + ", and the offloaded schedule's " + format_bytes(offload_peak) +
               " too: exact halo tiles of " + fit->options.tile.to_string() +
               (fit->options.hires_chunk_frames == 1
                    ? " with the decoder's full-frame-rate levels one frame at a time"
                    : "") +
               " (the same output, slower; predicted peak " + format_bytes(fit->peak_bytes) + ")";
      return c;
    }
  }
  c.note = over + ", and the offloaded schedule's " + format_bytes(offload_peak) + " too" +
           (decode && !encode ? ", and exact halo tiles up to 64 per frame too"
                              : "; a decode alone (seedvae decode) can run in exact tiles");
  return c;
}

}  // namespace

Result<ScheduleChoice> choose_schedule(const RunOptions& options, const VaeWeights& weights,
                                       bool encode, bool decode, int64_t height, int64_t width,
                                       int64_t frames, int64_t budget_bytes) {
  if (weights.is_wan()) {
    return choose_wan_schedule(options, weights.wan, encode, decode, height, width, frames,
                               budget_bytes);
  }
  return choose_schedule(options, weights.config, encode, decode, height, width, frames,
                         budget_bytes);
}

Result<MemoryPrediction> predict_memory(const RunOptions& options, const VaeWeights& weights,
                                        int64_t width, int64_t height, int64_t frames,
                                        int64_t device_budget_bytes) {
  if (!weights.is_wan()) {
    return predict_memory(options, weights.config, width, height, frames, device_budget_bytes);
  }
  if (width < 1 || height < 1 || frames < 1) return invalid_argument("predict: no input");
  const WanConfig& cfg = weights.wan;
  const Padded pd = padded(options, cfg.spatial_factor(), width, height, frames);
  SEEDVAE_ASSIGN_OR_RETURN(
      const ScheduleChoice choice,
      choose_wan_schedule(options, cfg, true, true, pd.h, pd.w, pd.t, device_budget_bytes));
  const RunOptions& o = choice.options;
  MemoryPrediction p;
  for (const bool encode : {true, false}) {
    SEEDVAE_ASSIGN_OR_RETURN(const WanPeak w, wan_peak(o, cfg, encode, pd.h, pd.w, pd.t));
    if (w.peak <= p.engine_bytes) continue;
    p.engine_bytes = w.peak;
    p.weight_bytes = w.weights;
    p.activation_bytes = w.peak - w.weights - w.fixed;
    p.method = "replay (" + std::string(encode ? "encoder" : "decoder") + ", " +
               (o.backend == "cuda" ? "cuda" : "cpu") + " model): peak " + format_bytes(w.peak);
  }
  if (!choice.note.empty()) p.method = "automatic schedule: " + choice.note + "; " + p.method;
  p.host_bytes = job_host_bytes(o, pd, cfg.temporal_factor(), cfg.spatial_factor(), cfg.z_dim);
  return p;
}

}  // namespace seedvae
