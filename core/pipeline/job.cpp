#include "core/pipeline/job.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/base/process_memory.h"
#include "core/base/serial_worker.h"
#include "core/io/output_path.h"
#include "core/io/safetensors.h"
#include "core/media/frame_spool.h"
#include "core/media/prefetch.h"
#include "core/media/sample_clip.h"
#include "core/media/video_io.h"
#include "core/pipeline/prediction.h"
#include "core/schedule/pipeline_decode.h"
#include "core/schedule/planner.h"
#include "core/schedule/streaming.h"
#include "core/vae/wan_model.h"

namespace seedvae {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A streamed phase's engine time (JobResult::encode_s): its host time less the caller's work,
// but no less than the device's own time of the phase's chunks, which that work may have
// overlapped.
double engine_seconds(double host_s, const Backend& backend, double device_ms_before) {
  const double device_ms = backend.device_busy_ms();
  const double device_s =
      device_ms >= 0 && device_ms_before >= 0 ? (device_ms - device_ms_before) / 1000.0 : 0.0;
  return std::max({0.0, host_s, device_s});
}

constexpr float kDitScale = 0.9152f;  // SeedVR2's DiT latent space: (latent - 0) * 0.9152

// What the reader reads of a file input.
media::ReadOptions read_options(const JobInput& in) {
  media::ReadOptions ro;
  ro.first_frame = in.first_frame;
  ro.max_frames = in.max_frames;
  ro.stride = in.stride;
  ro.resize_width = in.resize_width;
  ro.resize_height = in.resize_height;
  return ro;
}

// Frames are padded to a multiple of this (the model's factor, or the larger one asked for).
int spatial_multiple(const JobSpec& job) {
  return std::max(job.weights->spatial_factor(), job.options.spatial_multiple);
}

// The padded size of a job's input frames, from its first frame read apart (one frame decoded).
Result<std::pair<int64_t, int64_t>> padded_frame_size(const JobSpec& job) {
  media::ReadOptions ro = read_options(job.input);
  ro.max_frames = 1;
  SEEDVAE_ASSIGN_OR_RETURN(media::FrameReader reader, media::FrameReader::open(job.input.path, ro));
  SEEDVAE_ASSIGN_OR_RETURN(const HostTensor first, reader.read(1));
  if (first.shape().rank() != 5)
    return corrupt_data("no frame to read in " + job.input.path.string());
  const media::PadPlan p =
      media::plan_padding(1, first.shape()[3], first.shape()[4], spatial_multiple(job));
  return std::make_pair(p.padded_height, p.padded_width);
}

}  // namespace

double JobResult::ms_per_frame() const {
  // a resumed run timed only the frames after its checkpoint
  const int64_t ran = plan.frames - resumed_at_frame;
  return ran > 0 ? 1000.0 * (encode_s + decode_s) / static_cast<double>(ran) : 0;
}

// ---- the steps -------------------------------------------------------------------------------

Result<TileOptions> tile_options(const RunOptions& o, const VaeWeights& weights, bool encode,
                                 int64_t height, int64_t width, int64_t frames, std::string* note) {
  TileOptions to;
  SEEDVAE_ASSIGN_OR_RETURN(to.mode, parse_tiling_mode(o.tiling));
  to.weights = &weights;
  to.exact_keep_weights = o.exact_keep_weights;
  to.layout = o.tile_layout == "uniform" ? TileLayout::kUniform : TileLayout::kReference;
  if (to.mode == TilingMode::kOff) return to;
  if (weights.is_wan() && o.budget_gb > 0 && o.tile == PixelSize{}) {
    // A Wan decode's halo tiles are sized by replaying them (fit_wan_tiles); an encode's are not.
    if (encode) {
      return unsupported("a memory budget cannot size the tiles of a " +
                         std::string(family_name(weights.family)) +
                         " encode: give a tile size (--tile WxH)");
    }
    SEEDVAE_ASSIGN_OR_RETURN(
        const std::optional<WanTileFit> fit,
        fit_wan_tiles(o, weights.wan, height, width, frames, budget_bytes(o), false));
    if (!fit) {
      return out_of_memory("no halo tiles of the " + std::string(family_name(weights.family)) +
                           " decode fit the memory budget of " + format_bytes(budget_bytes(o)));
    }
    to.spec = {fit->options.tile.height, fit->options.tile.width, 0, 0};
    if (note) {
      *note = "halo tiles of " + fit->options.tile.to_string() + " (predicted peak " +
              format_bytes(fit->peak_bytes) + ")";
    }
    return to;
  }
  SEEDVAE_ASSIGN_OR_RETURN(to.spec,
                           resolve_tile(o, weights.config, encode, height, width, frames, note));
  return to;
}

Result<HostTensor> encode_clip(VideoVae& model, const VaeWeights& weights, const HostTensor& video,
                               const RunOptions& options, const StreamHooks& hooks,
                               TileHooks* tile_hooks, std::string* note, DeviceWorkers* devices) {
  const Shape& s = video.shape();
  SEEDVAE_ASSIGN_OR_RETURN(TileOptions to,
                           tile_options(options, weights, true, s[3], s[4], s[2], note));
  to.devices = devices;
  return tiled_encode(model, video, to, stream_options(options), hooks, tile_hooks);
}

Result<HostTensor> decode_clip(VideoVae& model, const VaeWeights& weights, const HostTensor& latent,
                               const RunOptions& options, const StreamHooks& hooks,
                               TileHooks* tile_hooks, std::string* note, DeviceWorkers* devices) {
  const Shape& s = latent.shape();
  if (s.rank() != 5) return invalid_argument("a latent must be 5-D, got " + s.to_string());
  const int64_t tf = weights.temporal_factor(), sf = weights.spatial_factor();
  SEEDVAE_ASSIGN_OR_RETURN(TileOptions to, tile_options(options, weights, false, s[3] * sf,
                                                        s[4] * sf, (s[2] - 1) * tf + 1, note));
  to.devices = devices;
  return tiled_decode(model, latent, to, stream_options(options), hooks, tile_hooks);
}

Result<bool> use_prefetch(const RunOptions& o, std::string* why) {
  std::string reason;
  if (o.prefetch == "off") {
    reason = "off";
  } else if (o.tiling != "off") {
    reason = find_option("prefetch")->not_applicable(o);
  } else if (o.chunk_latents == 0 && o.prefetch == "auto") {
    reason = "a whole-clip chunk leaves nothing to overlap the reading with";
  }
  if (why) *why = reason;
  if (reason.empty()) return true;
  if (o.prefetch == "on") return invalid_argument("--prefetch on does not apply: " + reason);
  return false;
}

// ---- checks before any work -------------------------------------------------------------------

Status check_job_paths(const JobSpec& job) {
  SEEDVAE_TRY(check_output_against(job.output, job.kind, job.input,
                                   job.weights ? job.weights->source : std::string(),
                                   job.latent_path));
  if (job.output.empty() || job.kind == JobKind::kEncode) return Status::ok();
  return media::check_clip_destination(job.output, write_options(job.options, 24, nullptr));
}

media::WriteOptions write_options(const RunOptions& o, double fps, const JobInput* input) {
  media::WriteOptions w;
  w.fps = fps;
  w.crf_like_quality = o.crf;
  w.codec = o.codec == "auto" ? std::string() : o.codec;
  w.preset = o.preset == "auto" ? std::string() : o.preset;
  w.lossless = o.lossless;
  w.bit_depth = o.bit_depth == "auto" ? 0 : std::atoi(o.bit_depth.c_str());
  if (input != nullptr && !input->is_sample()) {
    w.source = input->path;
    w.source_first_frame = input->first_frame;
    w.source_stride = input->stride;
  }
  return w;
}

Status check_output_against(const std::filesystem::path& output, JobKind kind,
                            const JobInput& input, const std::string& weights_source,
                            const std::filesystem::path& latent_path) {
  namespace fs = std::filesystem;
  if (output.empty()) return Status::ok();
  if (kind == JobKind::kEncode) {
    std::string ext = output.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (ext != ".safetensors") {
      return invalid_argument("an encode writes a latent as a .safetensors file; the output '" +
                              output.string() + "' has " +
                              (ext.empty() ? std::string("no extension") : "the extension " + ext));
    }
  } else {
    SEEDVAE_TRY(media::check_clip_destination(output));
  }
  std::vector<PathInput> inputs;
  std::error_code ec;
  if (kind != JobKind::kDecode && !input.is_sample()) {
    const fs::path& in = input.path;
    if (!fs::exists(in, ec) && media::is_frame_pattern(in)) {
      const fs::path dir = in.parent_path().empty() ? fs::path(".") : in.parent_path();
      inputs.push_back({dir, "input frame directory", true});
    } else {
      inputs.push_back({in, "input", fs::is_directory(in, ec)});
    }
  }
  if (!latent_path.empty()) inputs.push_back({latent_path, "latent", false});
  if (!weights_source.empty() && fs::is_regular_file(weights_source, ec)) {
    inputs.push_back({weights_source, "weights", false});
  }
  return check_output_path(output, inputs);
}

Status check_host_memory(const RunOptions& o, const VaeWeights& weights, int64_t width,
                         int64_t height, int64_t frames) {
  const int64_t have = media::physical_memory_bytes();
  if (have <= 0 || width <= 0 || height <= 0 || frames <= 0) return Status::ok();
  constexpr double kGiB = double(int64_t{1} << 30);
  const media::PadPlan p = media::plan_padding(
      frames, height, width, std::max(weights.spatial_factor(), o.spatial_multiple));
  // At least the first chunk of padded fp32 frames (frames stream through the job); in doubles,
  // so that no size overflows.
  const double clip = 3.0 * 4.0 * static_cast<double>(std::min<int64_t>(p.padded_frames, 5)) *
                      static_cast<double>(p.padded_height) * static_cast<double>(p.padded_width);
  double buffers = clip, engine = 0;
  // (the planner's count of the host buffers and the CPU engine is SeedVR2's; a Wan run is
  // checked for its frames only)
  auto pred = predict_memory(o, weights, width, height, frames);
  if (pred.is_ok()) {
    buffers = std::max(clip, static_cast<double>(pred->host_bytes));
    if (o.backend == "cpu") engine = static_cast<double>(pred->engine_bytes);
  }
  const double need = buffers + engine;
  if (need <= static_cast<double>(have)) return Status::ok();
  auto gib = [&](double bytes) {
    char t[32];
    std::snprintf(t, sizeof t, "%.1f GiB", bytes / kGiB);
    return std::string(t);
  };
  return out_of_memory("a " + std::to_string(width) + "x" + std::to_string(height) + " clip of " +
                       std::to_string(frames) + (frames == 1 ? " frame" : " frames") + " needs " +
                       gib(need) + " of host memory (frame buffers " + gib(buffers) +
                       (engine > 0 ? ", the CPU engine " + gib(engine) : std::string()) +
                       "); this machine has " + gib(static_cast<double>(have)) +
                       ": choose a smaller size or fewer frames" +
                       (engine > 0 ? std::string(", or spatial tiling") : std::string()));
}

Status check_finite_weights(const VaeWeights& weights) {
  for (const auto& [name, t] : weights.tensors) {
    // Exponent bits all set: infinite or NaN, in the tensor's own format (no conversion).
    int64_t bad = -1;
    const int64_t n = t.numel();
    if (t.dtype() == DType::kF32) {
      const auto* v = t.data<uint32_t>();
      for (int64_t i = 0; i < n && bad < 0; ++i) bad = (v[i] & 0x7f800000u) == 0x7f800000u ? i : -1;
    } else if (t.dtype() == DType::kF16 || t.dtype() == DType::kBF16) {
      const uint16_t mask = t.dtype() == DType::kF16 ? 0x7c00 : 0x7f80;
      const auto* v = t.data<uint16_t>();
      for (int64_t i = 0; i < n && bad < 0; ++i) bad = (v[i] & mask) == mask ? i : -1;
    }
    if (bad >= 0) {
      const float value = t.to(DType::kF32).f32()[static_cast<size_t>(bad)];
      return corrupt_data(
          "the weights " + weights.source + " hold a non-finite value (" +
          (std::isnan(value) ? std::string("NaN") : std::string(value > 0 ? "+inf" : "-inf")) +
          ") in tensor " + name + " at element " + std::to_string(bad) +
          "; every output would be NaN");
    }
  }
  return Status::ok();
}

// ---- latent files ------------------------------------------------------------------------------

std::string_view latent_space_name(LatentSpace space) {
  switch (space) {
    case LatentSpace::kRaw: return "raw";
    case LatentSpace::kDit: return "dit";
    case LatentSpace::kWanNormalized: return "wan-normalized";
  }
  return "raw";
}

LatentSpace latent_space(const VaeWeights& weights, const JobSpec& job) {
  if (weights.is_wan()) return job.raw_latent ? LatentSpace::kRaw : LatentSpace::kWanNormalized;
  return job.dit_latent ? LatentSpace::kDit : LatentSpace::kRaw;
}

Result<HostTensor> as_decoded(const VaeWeights& weights, const HostTensor& mu) {
  if (!weights.is_wan()) return mu;
  SEEDVAE_ASSIGN_OR_RETURN(HostTensor normalized, wan_normalize_latent(mu, weights.family));
  return wan_denormalize_latent(normalized, weights.family);
}

Result<LatentFile> read_latent_file(const std::filesystem::path& path) {
  SEEDVAE_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(path));
  auto view = file.get("latent");
  if (!view) return invalid_argument(path.string() + " has no tensor named \"latent\"");
  LatentFile out;
  out.latent = view->to_host(DType::kF32);
  const Shape& s = out.latent.shape();
  if (s.rank() != 5 || s[0] != 1 || s[2] < 1) {
    return invalid_argument(path.string() + ": the latent " + s.to_string() +
                            " is not [1, C, t, h, w]");
  }
  const auto& meta = file.metadata();
  auto meta_int = [&](const char* k) {
    auto it = meta.find(k);
    return it == meta.end() ? 0 : std::atoll(it->second.c_str());
  };
  if (auto it = meta.find("seedvae.family"); it != meta.end()) {
    for (const VaeFamily f : {VaeFamily::kSeedVR2, VaeFamily::kWan21, VaeFamily::kWan22}) {
      if (it->second == family_name(f)) out.family = f;
    }
    if (!out.family) {
      return invalid_argument(path.string() + " was written by an unknown VAE family \"" +
                              it->second + "\"");
    }
  }
  const auto space = meta.find("seedvae.latent_space");
  const std::string space_name = space == meta.end() ? "raw" : space->second;
  if (space_name == "dit") {
    out.space = LatentSpace::kDit;
    for (float& v : out.latent.f32()) v /= kDitScale;
  } else if (space_name == "wan-normalized") {
    if (!out.family || *out.family == VaeFamily::kSeedVR2) {
      return invalid_argument(path.string() +
                              " holds a Wan-normalised latent without naming its Wan family");
    }
    out.space = LatentSpace::kWanNormalized;
    SEEDVAE_ASSIGN_OR_RETURN(out.latent, wan_denormalize_latent(out.latent, *out.family));
  } else if (space_name != "raw") {
    return invalid_argument(path.string() + ": unknown latent space \"" + space_name + "\"");
  }
  // The source's size within the decoded frames; 0 (unrecorded): the whole decode.
  out.plan.frames = meta_int("seedvae.frames");
  out.plan.height = meta_int("seedvae.height");
  out.plan.width = meta_int("seedvae.width");
  if (auto it = meta.find("seedvae.fps"); it != meta.end()) out.fps = std::atof(it->second.c_str());
  if (!(out.fps > 0)) out.fps = 24;
  return out;
}

Status read_decode_latent(const std::filesystem::path& path, JobSpec& job) {
  SEEDVAE_ASSIGN_OR_RETURN(LatentFile file, read_latent_file(path));
  job.latent = std::make_shared<const HostTensor>(std::move(file.latent));
  job.latent_path = path;
  job.latent_plan = file.plan;
  job.latent_family = file.family;
  job.latent_fps = file.fps;
  return Status::ok();
}

Status write_latent_file(const std::filesystem::path& path, const HostTensor& latent_in,
                         const media::PadPlan& plan, double fps, const VaeWeights& weights,
                         LatentSpace space) {
  HostTensor latent = latent_in;
  if (space == LatentSpace::kDit) {
    if (weights.is_wan()) return invalid_argument("the DiT scale 0.9152 is SeedVR2's");
    for (float& v : latent.f32()) v *= kDitScale;
  } else if (space == LatentSpace::kWanNormalized) {
    if (!weights.is_wan()) return invalid_argument("a SeedVR2 latent has no Wan normalisation");
    SEEDVAE_ASSIGN_OR_RETURN(latent, wan_normalize_latent(latent_in, weights.family));
  }
  std::map<std::string, std::string> meta{
      {"seedvae.frames", std::to_string(plan.frames)},
      {"seedvae.height", std::to_string(plan.height)},
      {"seedvae.width", std::to_string(plan.width)},
      {"seedvae.fps", std::to_string(fps)},
      {"seedvae.latent_space", std::string(latent_space_name(space))},
      {"seedvae.family", std::string(family_name(weights.family))},
      {"seedvae.weights", weights.source}};
  NamedTensor nt{"latent", &latent};
  return write_safetensors(path, {&nt, 1}, meta);
}

// ---- resumable jobs ----------------------------------------------------------------------------

std::filesystem::path checkpoint_dir(const std::filesystem::path& output) {
  std::filesystem::path p = output;
  while (!p.has_filename() && p.has_relative_path()) p = p.parent_path();
  p += ".seedvae-resume";
  return p;
}

bool resumable(const JobSpec& job, std::string* why) {
  std::string reason;
  const RunOptions& o = job.options;
  const bool decode = job.kind == JobKind::kDecode;
  if (job.kind == JobKind::kEncode) {
    reason = "an encode writes a latent file in one piece";
  } else if (job.output.empty()) {
    reason = "no output file";
  } else if (o.checkpoint_chunks <= 0) {
    reason = "checkpoints off";
  } else if (decode && o.tiling != "off") {
    reason = "a tiled decode runs each tile over the whole latent";
  } else if (std::string r = find_option("checkpoint_chunks")->not_applicable(o); !r.empty()) {
    reason = r;
  } else if (decode && !job.latent) {
    reason = "no latent";
  } else if (!decode && job.sample_latent) {
    reason = "a sampled latent draws its noise over the whole clip";
  } else if (job.keep_original || job.keep_reconstruction) {
    reason = "the frames are kept for the caller";
  } else if (!media::writes_in_segments(job.output)) {
    reason = "a single image output";
  }
  if (why) *why = reason;
  return reason.empty();
}

std::optional<int64_t> checkpoint_frame(const std::filesystem::path& output) {
  std::ifstream in(checkpoint_dir(output) / "checkpoint.json");
  if (!in) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object() || !j.contains("next_frame") || !j["next_frame"].is_number_integer()) {
    return std::nullopt;
  }
  return j["next_frame"].get<int64_t>();
}

// ---- the session -----------------------------------------------------------------------------

struct Session::State {
  BackendFactory make_backend;
  // Destroyed model first (its tensors live on the backend).
  std::unique_ptr<Backend> backend;
  std::string backend_key;
  std::unique_ptr<VideoVae> model;  // the weights' family's network
  std::shared_ptr<const VaeWeights> model_weights;
  // The other devices' engines of a job on several devices (a pipelined decode, or blend tiles
  // spread over them), kept for the next job with the same engine, devices and weights
  // (destroyed before the model, device 0's).
  std::unique_ptr<DeviceWorkers> workers;
  std::string workers_key;

  Status ensure_engine(const RunOptions& o, const std::shared_ptr<const VaeWeights>& weights);
  // The engines of `devices` (the first: this session's engine, `first`).
  Result<DeviceWorkers*> ensure_workers(VideoVae& first, const RunOptions& o,
                                        const std::vector<int>& devices);
  // The decode of z pipelined over `devices`.
  Status decode_pipelined(VideoVae& first, const VaeWeights& weights, const HostTensor& z,
                          const RunOptions& o, const std::vector<int>& devices,
                          const StreamHooks& hooks, JobResult& r);
  Status run(const JobSpec& job, const JobCallbacks& cb, JobResult& r);
};

Session::Session(BackendFactory make_backend) : s_(std::make_unique<State>()) {
  s_->make_backend = std::move(make_backend);
}

Session::~Session() {
  release();
}

void Session::release() {
  s_->workers.reset();
  s_->model.reset();
  s_->model_weights.reset();
  s_->backend.reset();
  s_->backend_key.clear();
}

Backend* Session::backend() const {
  return s_->backend.get();
}

Status Session::State::ensure_engine(const RunOptions& o,
                                     const std::shared_ptr<const VaeWeights>& weights) {
  const std::string key = seedvae::backend_key(o);
  if (!backend || key != backend_key || model_weights != weights) workers.reset();
  if (!backend || key != backend_key) {
    model.reset();  // the model's tensors live on the old backend
    model_weights.reset();
    backend.reset();
    SEEDVAE_ASSIGN_OR_RETURN(backend, make_backend(o));
    backend_key = key;
  }
  if (!model || model_weights != weights) {
    model.reset();
    SEEDVAE_TRY(check_finite_weights(*weights));
    SEEDVAE_ASSIGN_OR_RETURN(model, make_video_vae(*backend, *weights));
    model_weights = weights;
  }
  return Status::ok();
}

Result<DeviceWorkers*> Session::State::ensure_workers(VideoVae& first, const RunOptions& o,
                                                      const std::vector<int>& devices) {
  const std::string key = seedvae::backend_key(o) + "|devices " + o.devices;
  if (!workers || key != workers_key) {
    workers.reset();
    // each device's engine, made on its own thread as the session's was (copies: the workers
    // keep the factory)
    DeviceEngineFactory make = [make_backend = make_backend, o, devices,
                                weights = model_weights](int index) -> Result<DeviceEngine> {
      RunOptions d = o;
      d.device = devices[static_cast<size_t>(index)];
      DeviceEngine engine;
      SEEDVAE_ASSIGN_OR_RETURN(engine.backend, make_backend(d));
      SEEDVAE_ASSIGN_OR_RETURN(engine.model, make_video_vae(*engine.backend, *weights));
      return engine;
    };
    SEEDVAE_ASSIGN_OR_RETURN(
        workers, DeviceWorkers::create(first, std::move(make), static_cast<int>(devices.size())));
    workers_key = key;
  }
  return workers.get();
}

Status Session::State::decode_pipelined(VideoVae& first, const VaeWeights& weights,
                                        const HostTensor& z, const RunOptions& o,
                                        const std::vector<int>& devices, const StreamHooks& hooks,
                                        JobResult& r) {
  const StreamOptions stream = stream_options(o);
  SEEDVAE_ASSIGN_OR_RETURN(const std::vector<int> cuts, parse_pipeline_cuts(o.pipeline_cuts));
  SEEDVAE_ASSIGN_OR_RETURN(const PipelinePlan plan,
                           plan_pipeline(weights, static_cast<int>(devices.size()), z.shape()[3],
                                         z.shape()[4], stream, cuts, backend->activation_dtype()));
  SEEDVAE_ASSIGN_OR_RETURN(DeviceWorkers * engines, ensure_workers(first, o, devices));
  PipelineStats stats;
  const Status st = seedvae::decode_pipelined(*engines, plan, z, stream, hooks, &stats).status();
  if (!st.is_ok()) workers.reset();  // a device may be in an error state: make them anew
  for (size_t i = 0; i < stats.backends.size(); ++i) {
    JobResult::DeviceShare share;
    share.backend = stats.backends[i];
    share.busy_ms = stats.busy_ms[i];
    share.memory = stats.memory[i];
    share.share = "units " + plan.describe_share(static_cast<int>(i));
    r.device_shares.push_back(std::move(share));
  }
  return st;
}

namespace {

// What a job checks before it reads, allocates or computes anything: the output path, and the
// host memory of the sizes known in advance (the sample clip's, a latent's decoded frames).
Status preflight(const JobSpec& job) {
  SEEDVAE_TRY(check_job_paths(job));
  const VaeWeights& w = *job.weights;
  if (w.is_wan() && job.dit_latent) {
    return invalid_argument("--dit is SeedVR2's latent scale; a " +
                            std::string(family_name(w.family)) +
                            " latent is normalised for its DiT by default (--raw-latent: not)");
  }
  if (!w.is_wan() && job.options.tiling == "exact" && job.options.hires_chunk_frames > 0) {
    return exact_tiling_refuses_hires();  // (a Wan decode's halo tiles take it)
  }
  if (job.kind == JobKind::kDecode && job.latent_family && *job.latent_family != w.family) {
    return invalid_argument("the latent was made by a " +
                            std::string(family_name(*job.latent_family)) + " VAE; these weights (" +
                            w.source + ") are a " + std::string(family_name(w.family)) + " VAE");
  }
  if (job.kind != JobKind::kDecode && job.input.is_sample()) {
    const JobInput& in = job.input;
    return check_host_memory(job.options, w, in.sample_width, in.sample_height, in.sample_frames);
  }
  if (job.kind == JobKind::kDecode && job.latent && job.latent->shape().rank() == 5) {
    const Shape& ls = job.latent->shape();
    return check_host_memory(job.options, w, ls[4] * w.spatial_factor(), ls[3] * w.spatial_factor(),
                             (ls[2] - 1) * w.temporal_factor() + 1);
  }
  return Status::ok();
}

}  // namespace

Status Session::run(const JobSpec& job, const JobCallbacks& cb, JobResult& result) {
  result = JobResult{};
  if (!job.weights) return invalid_argument("the job has no weights");
  SEEDVAE_TRY(validate(job.options));
  SEEDVAE_TRY(preflight(job));
  Status st;
  try {
    st = s_->run(job, cb, result);
  } catch (const std::bad_alloc&) {
    st = out_of_memory(
        "host memory exhausted during the run; try a smaller frame range, a "
        "downscale or tiling");
  }
  if (s_->model) {
    s_->model->set_telemetry(nullptr);
    s_->model->set_observer({});
  }
  release_free_host_memory(true);  // the job's large blocks no longer wait for reuse
  return st;
}

namespace {

// The job's input as a padded, chunk-by-chunk frame source (on a prefetch thread or not).
Result<std::unique_ptr<media::VideoFrameSource>> open_source(const JobSpec& job,
                                                             const RunOptions& o, bool prefetch,
                                                             const CancelToken* cancel,
                                                             int64_t resume_frames = 0) {
  const VaeWeights& weights = *job.weights;
  media::VideoSourceOptions so;
  so.read = read_options(job.input);
  so.spatial_multiple = spatial_multiple(job);
  SEEDVAE_ASSIGN_OR_RETURN(so.temporal_pad, media::temporal_pad_from_name(o.temporal_pad));
  so.prefetch = prefetch;
  std::tie(so.first_chunk_frames, so.chunk_frames) =
      media::encoder_chunk_frames(o.chunk_latents, weights.temporal_factor(), o.lone_head);
  if (resume_frames > 0) {
    so.resume_frames = resume_frames;
    so.first_chunk_frames = so.chunk_frames;
  }
  if (job.keep_original) {
    media::FrameSpool* keep = job.keep_original.get();
    so.on_frames = [keep](const HostTensor& frames) { return keep->append(frames); };
  }
  const JobInput& in = job.input;
  if (in.is_sample()) {
    return media::VideoFrameSource::sample(in.sample_width, in.sample_height, in.sample_frames, so,
                                           cancel);
  }
  return media::VideoFrameSource::open(in.path, so, cancel);
}

// The source frames again, unpadded and in order, for the round trip's metrics: the input is
// read a second time while the decode streams out, so no copy of the clip is kept.
Result<media::ChunkProducer> open_originals(const JobInput& in, const CancelToken* cancel,
                                            int64_t skip = 0) {
  if (in.is_sample()) {
    return media::sample_frames(in.sample_width, in.sample_height, in.sample_frames, skip);
  }
  media::ReadOptions ro = read_options(in);
  ro.first_frame += skip * std::max(1, ro.stride);
  if (ro.max_frames >= 0) ro.max_frames = std::max<int64_t>(1, ro.max_frames - skip);
  SEEDVAE_ASSIGN_OR_RETURN(media::FrameReader reader,
                           media::FrameReader::open(in.path, ro, cancel));
  auto shared = std::make_shared<media::FrameReader>(std::move(reader));
  return media::ChunkProducer(
      [shared](int64_t n, const CancelToken* stop) { return shared->read(n, stop); });
}

// Every frame a source delivers, as one tensor (a tiled encode needs the whole padded clip).
Result<HostTensor> read_all_frames(media::VideoFrameSource& source) {
  std::vector<HostTensor> parts;
  constexpr int64_t kChunk = 64;
  for (;;) {
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor part, source.next(kChunk));
    const int64_t k = part.empty() ? 0 : part.shape()[2];
    if (k > 0) parts.push_back(std::move(part));
    if (k < kChunk) break;
  }
  if (parts.empty()) return internal_error("the frame source delivered no frames");
  return concat_time(parts);
}

// Frames [0, k) of a decoded chunk, cropped to the source's height x width and clamped to
// [-1, 1]: the reconstruction's frames (`clamp` false: a padded source chunk's frames as they are).
HostTensor trim_chunk(const HostTensor& chunk, int64_t k, int64_t height, int64_t width,
                      bool clamp = true) {
  const Shape& s = chunk.shape();
  HostTensor out(DType::kF32, Shape{1, s[1], k, height, width});
  const float* src = chunk.data<float>();
  float* dst = out.data<float>();
  for (int64_t c = 0; c < s[1]; ++c) {
    for (int64_t t = 0; t < k; ++t) {
      for (int64_t y = 0; y < height; ++y) {
        const float* row = src + ((c * s[2] + t) * s[3] + y) * s[4];
        float* o = dst + ((c * k + t) * height + y) * width;
        if (clamp) {
          for (int64_t x = 0; x < width; ++x) o[x] = std::clamp(row[x], -1.f, 1.f);
        } else {
          std::memcpy(o, row, static_cast<size_t>(width) * sizeof(float));
        }
      }
    }
  }
  return out;
}

// ---- resumable jobs ----------------------------------------------------------------------------

using Json = nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kCheckpointFormat = "seedvae-resume 1";
constexpr const char* kCheckpointFile = "checkpoint.json";

// What identifies a file on disk for a fingerprint: its absolute path, size and time stamp.
Json file_identity(const fs::path& p) {
  std::error_code ec;
  Json j;
  j["path"] = fs::absolute(p, ec).lexically_normal().string();
  if (fs::is_regular_file(p, ec)) {
    j["size"] = static_cast<int64_t>(fs::file_size(p, ec));
    j["mtime"] = static_cast<int64_t>(fs::last_write_time(p, ec).time_since_epoch().count());
  }
  return j;
}

// A 64-bit digest of a tensor's bytes (FNV-1a over 8-byte words, four lanes): what identifies a
// decode job's latent, wherever it was read from.
std::string content_digest(const HostTensor& t) {
  constexpr uint64_t kPrime = 0x100000001b3ull;
  uint64_t lane[4] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull, 0x9e3779b97f4a7c15ull,
                      0xc2b2ae3d27d4eb4full};
  const auto* p = static_cast<const unsigned char*>(t.raw());
  const auto n = static_cast<size_t>(t.nbytes());
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int l = 0; l < 4; ++l) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * l, 8);
      lane[l] = (lane[l] ^ w) * kPrime;
    }
  }
  for (; i < n; ++i) lane[0] = (lane[0] ^ p[i]) * kPrime;
  uint64_t h = n;
  for (const uint64_t l : lane) h = (h ^ l) * kPrime;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

// The job a checkpoint belongs to: its kind; a round trip's input and frame selection, or a
// decode's latent (its contents, the size and frame rate its frames are written at); weights,
// every setting that can change the output (prefetch and async tiles cannot), the output.
Json job_fingerprint(const JobSpec& job) {
  Json j;
  if (job.kind == JobKind::kDecode) {
    j["kind"] = "decode";
    const HostTensor& z = *job.latent;
    const media::PadPlan& p = job.latent_plan;
    j["latent"] = {{"shape", z.shape().dims()},
                   {"digest", content_digest(z)},
                   {"size", {p.frames, p.height, p.width}},
                   {"fps", job.latent_fps}};
  } else {
    j["kind"] = "round trip";
    const JobInput& in = job.input;
    if (in.is_sample()) {
      j["input"] = Json{{"sample", {in.sample_width, in.sample_height, in.sample_frames}}};
    } else {
      j["input"] = file_identity(in.path);
    }
    j["frames"] = {in.first_frame, in.max_frames, in.stride, in.resize_width, in.resize_height};
  }
  j["weights"] = file_identity(job.weights->source);
  Json opts = Json::parse(to_json(job.options), nullptr, false);
  if (opts.is_object()) {
    opts.erase("prefetch");
    opts.erase("async_tiles");
  }
  j["settings"] = opts;
  j["output"] = file_identity(job.output)["path"];
  return j;
}

// What differs between two fingerprints, for the refusal ("the setting chunk_latents: 1 then 2").
std::string fingerprint_difference(const Json& saved, const Json& now) {
  if (saved.value("kind", Json()) != now.value("kind", Json())) {
    return "the kind of job (" + saved.value("kind", Json()).dump() + " then, " +
           now.value("kind", Json()).dump() + " now)";
  }
  for (auto it = now.begin(); it != now.end(); ++it) {
    const Json& old = saved.contains(it.key()) ? saved.at(it.key()) : Json();
    if (old == it.value()) continue;
    if (it.key() == "settings" && old.is_object() && it->is_object()) {
      for (auto o = it->begin(); o != it->end(); ++o) {
        const Json before = old.contains(o.key()) ? old.at(o.key()) : Json();
        if (before != o.value()) {
          return "the setting " + o.key() + " (" + before.dump() + " then, " + o.value().dump() +
                 " now)";
        }
      }
    }
    return "the " + it.key() + " (" + old.dump() + " then, " + it.value().dump() + " now)";
  }
  return "the checkpoint's format";
}

struct Checkpoint {
  int64_t next_frame = 0;      // source frames the encoder has taken (a decode: frames decoded)
  int64_t frames_written = 0;  // reconstruction frames in the closed segments
  int64_t chunks = 0;          // chunks done
  int64_t segments = 0;        // closed segments
  std::string state_file;      // the causal states
  media::QualityAccumulator::Sums quality;
  int64_t every = 0;  // chunks between checkpoints (checkpoint_every; 0: not recorded)
};

// Chunks between checkpoints: the option's `chunks`, or more where the causal state is large, so
// that checkpoints write at most 32 MiB per chunk on average (the demo model's 1080p state is
// 6.2 GB in bf16: a checkpoint every 186 chunks, 744 frames, instead of every 16).
int64_t checkpoint_every(int64_t chunks, int64_t state_bytes) {
  constexpr int64_t kBytesPerChunk = int64_t{32} << 20;
  return std::max(chunks, (state_bytes + kBytesPerChunk - 1) / kBytesPerChunk);
}

// The causal states in their device dtype (bf16 on a 16-bit GPU backend: exact, half the bytes of
// fp32), one tensor at a time: a 1080p state is gigabytes, which the host never holds at once.
Status save_states(const fs::path& path, Backend& backend, const CausalState& enc,
                   const CausalState& dec) {
  std::vector<StreamedTensor> specs;
  std::vector<const Tensor*> sources;
  const std::pair<const char*, const CausalState*> states[] = {{"encoder/", &enc},
                                                               {"decoder/", &dec}};
  for (const auto& [prefix, st] : states) {
    for (const auto& [key, t] : st->memory) {
      specs.push_back({std::string(prefix) + key, t.dtype, t.shape});
      sources.push_back(&t);
    }
  }
  const std::map<std::string, std::string> meta{{"encoder.started", enc.started ? "1" : "0"},
                                                {"decoder.started", dec.started ? "1" : "0"}};
  return write_safetensors_streamed(
      path, specs,
      [&](size_t i) -> Result<HostTensor> {
        SEEDVAE_ASSIGN_OR_RETURN(HostTensor h, backend.download(*sources[i]));
        return h.dtype() == sources[i]->dtype ? std::move(h) : h.to(sources[i]->dtype);
      },
      meta);
}

Status load_states(const fs::path& path, Backend& backend, CausalState& enc, CausalState& dec) {
  SEEDVAE_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(path));
  enc.reset();
  dec.reset();
  auto started = [&](const char* k) {
    auto it = file.metadata().find(k);
    return it != file.metadata().end() && it->second == "1";
  };
  enc.started = started("encoder.started");
  dec.started = started("decoder.started");
  for (const std::string& name : file.names()) {
    SEEDVAE_ASSIGN_OR_RETURN(TensorView view, file.get(name));
    SEEDVAE_ASSIGN_OR_RETURN(Tensor t, backend.upload(view.to_host()));
    if (name.rfind("encoder/", 0) == 0) {
      enc.memory[name.substr(8)] = std::move(t);
    } else if (name.rfind("decoder/", 0) == 0) {
      dec.memory[name.substr(8)] = std::move(t);
    } else {
      return corrupt_data("the checkpoint state " + path.string() + " holds an unknown tensor " +
                          name);
    }
  }
  return Status::ok();
}

Result<std::optional<Checkpoint>> read_checkpoint(const fs::path& dir, const Json& fingerprint,
                                                  bool* other_job, std::string* difference) {
  std::error_code ec;
  const fs::path file = dir / kCheckpointFile;
  if (!fs::exists(file, ec)) return std::optional<Checkpoint>();
  std::ifstream in(file);
  Json j = Json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("format", "") != kCheckpointFormat) {
    return corrupt_data("the checkpoint " + file.string() +
                        " cannot be read; run with --restart to discard it");
  }
  if (j.value("job", Json()) != fingerprint) {
    *other_job = true;
    *difference = fingerprint_difference(j.value("job", Json()), fingerprint);
    return std::optional<Checkpoint>();
  }
  Checkpoint c;
  try {
    c.next_frame = j.at("next_frame").get<int64_t>();
    c.frames_written = j.at("frames_written").get<int64_t>();
    c.chunks = j.at("chunks").get<int64_t>();
    c.segments = j.at("segments").get<int64_t>();
    c.state_file = j.at("state_file").get<std::string>();
    c.every = j.value("every", int64_t{0});
    const Json& q = j.at("quality");
    c.quality = {q.at("elements").get<int64_t>(), q.at("frames").get<int64_t>(),
                 q.at("squares").get<double>(), q.at("max_abs").get<double>(),
                 q.at("ssim_sum").get<double>()};
  } catch (const Json::exception& e) {
    return corrupt_data("the checkpoint " + file.string() + " is incomplete (" + e.what() +
                        "); run with --restart to discard it");
  }
  if (c.next_frame < 1 || c.chunks < 1 || c.segments < 1 ||
      c.state_file.find('/') != std::string::npos) {
    return corrupt_data("the checkpoint " + file.string() + " is inconsistent");
  }
  return std::optional<Checkpoint>(c);
}

// Commits a checkpoint: the states first, then the JSON that names them (the commit point), then
// the previous states file goes.
Status write_checkpoint(const fs::path& dir, const Json& fingerprint, const Checkpoint& c,
                        Backend& backend, const CausalState& enc, const CausalState& dec,
                        const std::string& previous_state) {
  SEEDVAE_TRY(save_states(dir / c.state_file, backend, enc, dec));
  Json j{{"format", kCheckpointFormat},
         {"job", fingerprint},
         {"next_frame", c.next_frame},
         {"frames_written", c.frames_written},
         {"chunks", c.chunks},
         {"segments", c.segments},
         {"state_file", c.state_file},
         {"every", c.every},
         {"quality",
          {{"elements", c.quality.elements},
           {"frames", c.quality.frames},
           {"squares", c.quality.squares},
           {"max_abs", c.quality.max_abs},
           {"ssim_sum", c.quality.ssim_sum}}}};
  SEEDVAE_TRY(write_file_atomic(dir / kCheckpointFile, j.dump(1)));
  if (!previous_state.empty() && previous_state != c.state_file) {
    std::error_code ec;
    fs::remove(dir / previous_state, ec);
  }
  return Status::ok();
}

// The chunks of a clip of `frames` source frames (progress totals), -1 when unknown.
int64_t expected_chunks(int64_t frames, const RunOptions& o, int temporal_factor) {
  if (frames <= 0) return -1;
  const int64_t latents = (media::next_4n_plus_1(frames) - 1) / temporal_factor + 1;
  return static_cast<int64_t>(plan_chunks(latents, o.chunk_latents, o.lone_head).size());
}

struct ResumableRun {
  const JobSpec& job;
  const JobCallbacks& cb;
  JobResult& r;
  const RunOptions& o;  // after the automatic schedule
  VideoVae& m;
  Backend& backend;
  std::function<void(std::string_view)> phase;
  std::function<void()> trim_heap;

  Status run();
};

// A resumable round trip's source frames, from the encoder (each chunk as it was uploaded, on the
// engine thread) to the metrics (the same frames in the same order, a chunk or two later, on the
// sink's thread): the frames the encoder saw, without reading the input a second time. They are
// padded (right/bottom, and the end's temporal padding follows the last frame, never taken).
class FrameQueue {
 public:
  void push(HostTensor frames) {
    std::lock_guard<std::mutex> lock(mu_);
    parts_.push_back(std::move(frames));
  }
  // The next n frames.
  Result<HostTensor> take(int64_t n) {
    std::vector<HostTensor> out;
    std::lock_guard<std::mutex> lock(mu_);
    while (n > 0 && !parts_.empty()) {
      HostTensor& front = parts_.front();
      const int64_t k = front.shape()[2] - offset_;
      if (offset_ == 0 && k <= n) {
        out.push_back(std::move(front));
      } else {
        out.push_back(slice_time(front, offset_, offset_ + std::min(k, n)));
      }
      if (k <= n) {
        parts_.pop_front();
        offset_ = 0;
      } else {
        offset_ += n;
      }
      n -= std::min(k, n);
    }
    if (n > 0) return internal_error("the source frames ran out before the reconstruction's");
    if (out.size() == 1) return std::move(out.front());
    return concat_time(out);
  }

 private:
  std::mutex mu_;
  std::deque<HostTensor> parts_;
  int64_t offset_ = 0;  // frames of parts_.front() already taken
};

// A resumable run's chunks: each chunk's latent, from the round trip's source frames through the
// encoder (its causal state carried on) or sliced from a decode job's latent, and the source
// frames of the round trip's metrics.
class ChunkLatents {
 public:
  // Opened at checkpoint `ck` (a fresh one: the start).
  static Result<ChunkLatents> open(const ResumableRun& run, const Checkpoint& ck) {
    ChunkLatents c;
    const JobSpec& job = run.job;
    const RunOptions& o = run.o;
    const int tf = job.weights->temporal_factor();
    c.round_trip_ = job.kind == JobKind::kRoundTrip;
    c.stream_ = stream_options(o);
    if (c.round_trip_) {
      SEEDVAE_ASSIGN_OR_RETURN(c.source_,
                               open_source(job, o, run.r.prefetch, run.cb.cancel, ck.next_frame));
      std::tie(c.first_chunk_, c.chunk_frames_) =
          media::encoder_chunk_frames(o.chunk_latents, tf, o.lone_head);
      c.total_ = expected_chunks(c.source_->expected_frames(), o, tf);
      return c;
    }
    c.latent_chunks_ = plan_chunks(job.latent->shape()[2], o.chunk_latents, o.lone_head);
    c.total_ = std::ssize(c.latent_chunks_);
    if (ck.chunks > 0) {  // the checkpoint's frame starts its next chunk
      const bool fits = ck.chunks < c.total_;
      const int64_t b = fits ? c.latent_chunks_[static_cast<size_t>(ck.chunks)].first : 0;
      if (!fits || ck.next_frame != (b - 1) * tf + 1) {
        return corrupt_data("the checkpoint in " + checkpoint_dir(job.output).string() +
                            " does not fit the latent's chunks; run with --restart to discard it");
      }
    }
    return c;
  }

  bool round_trip() const { return round_trip_; }
  double fps(double latent_fps) const { return source_ ? source_->fps() : latent_fps; }
  int64_t total_chunks() const { return total_; }  // -1: unknown

  // Chunk `chunk`'s latent, raw as the decoder takes it; empty once the input is used up.
  // `inputs`: the source frames it encoded, or the frames it decodes to.
  Result<HostTensor> next(ResumableRun& run, CausalState& enc, int64_t chunk, int64_t* inputs) {
    *inputs = 0;
    if (!round_trip_) {
      if (chunk >= total_) return HostTensor{};
      const auto [b, e] = latent_chunks_[static_cast<size_t>(chunk)];
      const int64_t tf = run.job.weights->temporal_factor();
      *inputs = b == 0 ? (e - 1) * tf + 1 : (e - b) * tf;
      return slice_time(*run.job.latent, b, e);
    }
    const auto ts = Clock::now();
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor x_host,
                             source_->next(chunk == 0 ? first_chunk_ : chunk_frames_));
    source_s_ += seconds_since(ts);
    const int64_t k = x_host.empty() ? 0 : x_host.shape()[2];
    if (k == 0) return HostTensor{};
    *inputs = k;
    const auto t = Clock::now();
    SEEDVAE_ASSIGN_OR_RETURN(Tensor x, run.backend.upload(x_host));
    originals_->push(std::move(x_host));  // for the metrics
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y,
                             run.m.encode_chunk(x, enc, stream_.chunk_options(chunk, -1)));
    x = {};
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor moments, run.backend.download(y));
    y = {};
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor mean, as_decoded(*run.job.weights, moments_mean(moments)));
    encode_s_ += seconds_since(t);
    return mean;
  }

  // Whether the chunk just taken was the last; the clip's size (a round trip's is complete once
  // the source has finished).
  bool finished(int64_t chunk) const {
    return round_trip_ ? source_->finished() : chunk + 1 >= total_;
  }
  const media::PadPlan& plan(const JobResult& r) const {
    return source_ ? source_->plan() : r.plan;
  }

  // A round trip's metrics of the reconstruction frames `recon` against the source frames (on
  // the sink's thread, the chunks in order).
  Status compare(media::QualityAccumulator& quality, const HostTensor& recon) {
    if (!round_trip_) return Status::ok();
    const Shape& rs = recon.shape();
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor padded, originals_->take(rs[2]));
    if (padded.shape()[3] < rs[3] || padded.shape()[4] < rs[4]) {
      return internal_error("the source frames " + padded.shape().to_string() +
                            " are smaller than the reconstruction frames " + rs.to_string());
    }
    const HostTensor original = trim_chunk(padded, rs[2], rs[3], rs[4], /*clamp=*/false);
    if (original.shape() != recon.shape()) {
      return internal_error("the source frames " + original.shape().to_string() +
                            " do not match the reconstruction frames " + recon.shape().to_string());
    }
    return quality.add(recon, original);
  }

  // After the last chunk: the round trip's reading (timings, the clip's size, warnings).
  Status finish(JobResult& r) {
    if (!round_trip_) return Status::ok();
    if (!source_->finished()) {
      return internal_error("the frame source did not reach the end of the clip");
    }
    const media::PrefetchStats ps = source_->stats();
    r.read_s = ps.read_seconds;
    r.read_wait_s = ps.wait_seconds;
    r.read_engine_s = std::max(0.0, source_s_ - ps.wait_seconds);
    r.encode_s = encode_s_;  // (timed from each chunk's frames in hand: no waits in it)
    r.plan = source_->plan();
    if (std::string w = source_->warning(); !w.empty()) r.warnings.push_back(std::move(w));
    source_.reset();
    return Status::ok();
  }

 private:
  bool round_trip_ = false;
  StreamOptions stream_;
  std::unique_ptr<media::VideoFrameSource> source_;  // the round trip's
  // the round trip's source frames (padded), for the metrics
  std::unique_ptr<FrameQueue> originals_ = std::make_unique<FrameQueue>();
  int64_t first_chunk_ = 0, chunk_frames_ = 0;
  std::vector<std::pair<int64_t, int64_t>> latent_chunks_;  // a decode's
  int64_t total_ = -1;
  double encode_s_ = 0;
  double source_s_ = 0;  // in the source's next(), its waits included
};

Status ResumableRun::run() {
  const fs::path dir = checkpoint_dir(job.output);
  const Json fingerprint = job_fingerprint(job);
  std::error_code ec;
  if (job.restart) fs::remove_all(dir, ec);
  bool other_job = false;
  std::string difference;
  SEEDVAE_ASSIGN_OR_RETURN(std::optional<Checkpoint> saved,
                           read_checkpoint(dir, fingerprint, &other_job, &difference));
  if (other_job) {
    return invalid_argument(dir.string() + " holds the checkpoint of another job: " + difference +
                            " differs; run with --restart to discard it, or write another output");
  }
  fs::create_directories(dir, ec);
  if (ec) return io_error("cannot create " + dir.string() + ": " + ec.message());
  Checkpoint ck = saved.value_or(Checkpoint{});
  const bool resumed = saved.has_value();
  r.checkpointed = true;
  r.resumed_at_frame = ck.next_frame;
  // Without a checkpoint to keep, a failure leaves no folder behind.
  struct Tidy {
    const fs::path& dir;
    bool keep = false;
    ~Tidy() {
      std::error_code e;
      if (!keep && !fs::exists(dir / kCheckpointFile, e)) fs::remove_all(dir, e);
    }
  } tidy{dir};

  // ---- input, metrics, engine state ----
  SEEDVAE_ASSIGN_OR_RETURN(ChunkLatents input, ChunkLatents::open(*this, ck));
  r.fps = input.fps(r.fps);
  media::QualityAccumulator quality;
  quality.restore(ck.quality);
  CausalState enc, dec;  // a decode's encoder state stays empty
  if (resumed) SEEDVAE_TRY(load_states(dir / ck.state_file, backend, enc, dec));
  // (without the job's cancel token while the chunks stream: see the sink below)
  SEEDVAE_ASSIGN_OR_RETURN(
      media::SegmentedClipWriter writer,
      media::SegmentedClipWriter::open(
          job.output, write_options(o, r.fps, input.round_trip() ? &job.input : nullptr), dir));
  SEEDVAE_TRY(writer.discard_from(ck.segments, ck.frames_written));

  const StreamOptions stream = stream_options(o);
  const int64_t total_chunks = input.total_chunks();
  auto report = [&](std::string_view stage, int64_t done) {
    if (cb.progress) {
      cb.progress->report(stage, done, total_chunks > 0 ? std::max(total_chunks, done) : done + 1);
    }
  };
  phase(input.round_trip() ? "encode" : "decode");
  double decode_s = 0, metrics_s = 0, write_s = 0;
  int64_t frames_in = ck.next_frame, frames_out = ck.frames_written;
  int64_t chunk = ck.chunks;
  int64_t in_segment = 0;  // chunks in the open segment
  // Fixed by the first chunk's state and kept in the checkpoint, so that a resumed run closes its
  // segments where an uninterrupted one does (a checkpoint of an older build: the option).
  int64_t every = ck.every > 0 ? ck.every : (resumed ? o.checkpoint_chunks : 0);
  ck.every = every;
  // Each chunk's metrics and writing run on the sink's thread while the engine goes on with the
  // next chunk; the engine waits for it (drain) before it closes a segment or checkpoints. A
  // cancel is seen by the engine between chunks: the sink finishes the chunk it is writing and
  // drops the rest, so a chunk is written whole or not at all (the writer has no cancel token
  // until the join). Last of the locals its tasks use, so it stops before they go.
  SerialWorker sink("seedvae-sink");
  for (;; ++chunk) {
    if (cb.cancel) SEEDVAE_TRY(cb.cancel->check());
    int64_t inputs = 0;
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor latent, input.next(*this, enc, chunk, &inputs));
    if (latent.empty()) break;
    if (input.round_trip()) report("encode", chunk + 1);
    // decode the chunk's latent, the decoder's causal state carried on
    auto t = Clock::now();
    SEEDVAE_ASSIGN_OR_RETURN(Tensor z, backend.upload(latent));
    latent = {};
    SEEDVAE_ASSIGN_OR_RETURN(Tensor d, m.decode_chunk(z, dec, stream.chunk_options(chunk, -1)));
    z = {};
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor decoded, backend.download(d));
    d = {};
    decode_s += seconds_since(t);
    frames_in += inputs;
    const bool last = input.finished(chunk);
    // the temporal padding (at the end) is dropped; a round trip's clip size is known at its end
    const media::PadPlan& plan = input.plan(r);
    const int64_t kk = decoded.shape()[2];
    const int64_t real =
        input.round_trip() && !last ? kk : std::clamp<int64_t>(plan.frames - frames_out, 0, kk);
    if (real > 0) {
      // trimmed on the sink's thread, unless the caller takes the frames here
      std::shared_ptr<const HostTensor> recon;
      if (cb.on_decoded) {
        recon =
            std::make_shared<const HostTensor>(trim_chunk(decoded, real, plan.height, plan.width));
        decoded = {};
        SEEDVAE_TRY(cb.on_decoded(frames_out, *recon));
      }
      auto measure_and_write = [&, recon, raw = std::make_shared<HostTensor>(std::move(decoded)),
                                real, h = plan.height, w = plan.width, segment = ck.segments,
                                first = frames_out]() mutable -> Status {
        if (!recon) recon = std::make_shared<const HostTensor>(trim_chunk(*raw, real, h, w));
        raw.reset();
        auto ts = Clock::now();
        SEEDVAE_TRY(input.compare(quality, *recon));
        metrics_s += seconds_since(ts);
        ts = Clock::now();
        if (!writer.in_segment()) SEEDVAE_TRY(writer.begin_segment(segment, first));
        SEEDVAE_TRY(writer.write(*recon));
        write_s += seconds_since(ts);
        return Status::ok();
      };
      SEEDVAE_TRY(sink.post(std::move(measure_and_write)));
      frames_out += real;
    }
    report("decode", chunk + 1);
    trim_heap();
    // a closed segment and a checkpoint every `every` chunks (not after the last)
    if (every == 0) {
      every = ck.every = checkpoint_every(o.checkpoint_chunks, enc.bytes() + dec.bytes());
    }
    if (++in_segment == every && !last) {
      SEEDVAE_TRY(sink.drain());
      if (writer.in_segment()) {
        t = Clock::now();
        SEEDVAE_TRY(writer.end_segment());
        const std::string previous = ck.state_file;
        ck.next_frame = frames_in;
        ck.frames_written = frames_out;
        ck.chunks = chunk + 1;
        ck.segments += 1;
        ck.quality = quality.sums();
        ck.state_file = "state_" + std::to_string(ck.chunks) + ".safetensors";
        SEEDVAE_TRY(write_checkpoint(dir, fingerprint, ck, backend, enc, dec, previous));
        in_segment = 0;
        r.checkpoint_s += seconds_since(t);
      }
    }
  }
  SEEDVAE_TRY(sink.drain());
  r.sink_wait_s = sink.wait_seconds();
  SEEDVAE_TRY(input.finish(r));
  r.decode_s = decode_s;
  r.metrics_s = metrics_s;
  m.flush_telemetry();
  if (frames_out != r.plan.frames) {
    return internal_error("the resumable run wrote " + std::to_string(frames_out) + " of " +
                          std::to_string(r.plan.frames) + " frames");
  }
  if (input.round_trip()) {
    if (cb.on_input) SEEDVAE_TRY(cb.on_input(InputClip{r.plan, r.fps}));
    if (auto q = quality.result(); q.is_ok()) r.quality = *q;
  }

  // ---- the output: the last segment closed, all of them joined ----
  phase("write");
  const auto tw = Clock::now();
  int64_t segments = ck.segments;
  if (writer.in_segment()) {
    SEEDVAE_TRY(writer.end_segment());
    ++segments;
  }
  if (cb.progress) cb.progress->report("write", 0, 1);
  writer.set_cancel(cb.cancel);
  SEEDVAE_TRY(writer.join(segments, frames_out, static_cast<int>(r.plan.width),
                          static_cast<int>(r.plan.height)));
  if (cb.progress) cb.progress->report("write", 1, 1);
  r.write_s = write_s + seconds_since(tw);
  for (std::string& w : writer.warnings()) r.warnings.push_back(std::move(w));
  if (std::string w = media::stored_size_note(job.output, r.plan.width, r.plan.height);
      !w.empty()) {
    r.warnings.push_back(std::move(w));
  }
  r.output = job.output;
  fs::remove_all(dir, ec);  // the output is in place: the checkpoint has done its work
  tidy.keep = true;
  return Status::ok();
}

}  // namespace

Status Session::State::run(const JobSpec& job, const JobCallbacks& cb, JobResult& r) {
  const auto t0 = Clock::now();
  RunOptions o = job.options;  // the automatic schedule may change the memory options
  const VaeWeights& weights = *job.weights;
  auto phase = [&](std::string_view p) {
    if (cb.on_phase) cb.on_phase(p);
  };
  if (cb.cancel) SEEDVAE_TRY(cb.cancel->check());
  // several devices: the session's engine is the first one's; an untiled decode is pipelined
  // over them, blend tiles are spread over them (the encode's and the decode's)
  SEEDVAE_ASSIGN_OR_RETURN(const std::vector<int> devices, parse_devices(o.devices));
  if (!devices.empty()) o.device = devices.front();
  const bool several = devices.size() >= 2;
  SEEDVAE_TRY(ensure_engine(o, job.weights));
  r.weights_source = weights.source;
  const bool encodes = job.kind != JobKind::kDecode;
  const bool decodes = job.kind != JobKind::kEncode;
  auto predict = [&](const media::PadPlan& p) {
    if (!job.predict) return;
    auto pred = predict_memory(o, weights, p.width, p.height, p.frames);  // none for Wan
    if (pred.is_ok()) r.predicted_peak_bytes = pred->engine_bytes;
  };

  // Every few chunks the heap's free pages go back to the system, so that a long stream's
  // resident set stays flat (release_free_host_memory); not every chunk, which would make the
  // engine fault its buffers in afresh each time (+19 % time for the tiny model at 256x256).
  int64_t chunks = 0;
  auto trim_heap = [&chunks] {
    if (++chunks % 8 == 0) release_free_host_memory();
  };

  // ---- input: the frames stream from the reader (on a prefetch thread or not) ----
  std::unique_ptr<media::VideoFrameSource> source;  // stopped and joined on every way out
  int64_t frame_h = 0, frame_w = 0;                 // padded frame size, before the encode
  if (encodes) {
    phase("read");
    std::string why;
    SEEDVAE_ASSIGN_OR_RETURN(r.prefetch, use_prefetch(o, &why));
    if (!r.prefetch) r.prefetch_note = why == "off" ? why : "does not apply: " + why;
    if (job.input.is_sample()) {
      const media::PadPlan p = media::plan_padding(1, job.input.sample_height,
                                                   job.input.sample_width, spatial_multiple(job));
      frame_h = p.padded_height;
      frame_w = p.padded_width;
    } else {
      SEEDVAE_ASSIGN_OR_RETURN(std::tie(frame_h, frame_w), padded_frame_size(job));
    }
    if (cb.cancel) SEEDVAE_TRY(cb.cancel->check());
  } else {
    if (!job.latent) return invalid_argument("a decode job needs a latent");
    const Shape& ls = job.latent->shape();
    if (ls.rank() != 5 || ls[0] != 1 || ls[1] != weights.latent_channels() || ls[2] < 1) {
      return invalid_argument("the latent " + ls.to_string() + " does not fit the " +
                              std::to_string(weights.latent_channels()) + "-channel " +
                              std::string(family_name(weights.family)) + " model");
    }
    // The decoded frames' size; the source size (what the padding is trimmed to) within it (a
    // latent without a recorded size decodes whole).
    r.plan = job.latent_plan;
    r.plan.padded_frames = (ls[2] - 1) * weights.temporal_factor() + 1;
    r.plan.padded_height = ls[3] * weights.spatial_factor();
    r.plan.padded_width = ls[4] * weights.spatial_factor();
    auto within = [](int64_t v, int64_t whole) { return v <= 0 ? whole : std::min(v, whole); };
    r.plan.frames = within(r.plan.frames, r.plan.padded_frames);
    r.plan.height = within(r.plan.height, r.plan.padded_height);
    r.plan.width = within(r.plan.width, r.plan.padded_width);
    r.fps = job.latent_fps;
    predict(r.plan);
  }

  // ---- the automatic schedule: the planner's peak against the backend's device budget ----
  std::string schedule_note;
  if (o.backend == "cuda" && o.auto_schedule &&
      find_option("auto_schedule")->not_applicable(o).empty()) {
    // Encodes: the peak is a chunk's, so the clip's length does not matter (17 frames).
    const int64_t h = encodes ? frame_h : r.plan.padded_height;
    const int64_t w = encodes ? frame_w : r.plan.padded_width;
    const int64_t t = encodes ? 17 : r.plan.padded_frames;
    SEEDVAE_ASSIGN_OR_RETURN(ScheduleChoice choice,
                             choose_schedule(o, weights, encodes, decodes, h, w, t,
                                             backend->memory_stats().budget_bytes));
    if (!choice.note.empty()) {
      if (several && choice.options.tiling == "exact") {
        return out_of_memory("the decode does not fit the device budget untiled (" + choice.note +
                             "), and exact tiles run on one device: raise --budget-gb, decode "
                             "on one device, or spread blend tiles over the devices (--tiling "
                             "blend)");
      }
      o = choice.options;
      schedule_note = choice.note;
      SEEDVAE_TRY(ensure_engine(o, job.weights));  // a new backend when the offload turns on
      if (!encodes) predict(r.plan);
    }
  }
  VideoVae& m = *model;
  r.backend_name = backend->name();
  if (weights.is_wan() && o.lean_convs) {
    r.warnings.push_back("lean convolutions are SeedVR2's; the " +
                         std::string(family_name(weights.family)) +
                         " network convolves each extended input whole");
  }
  if (weights.is_wan() && o.hires_chunk_frames > 0 && encodes) {
    r.warnings.push_back("chunked upsampling applies to the " +
                         std::string(family_name(weights.family)) +
                         " decoder only; its encoder runs each chunk whole");
  }
  r.weight_bytes = backend->memory_stats().current_bytes;
  const StreamOptions stream = stream_options(o);
  r.async_tiles = stream.async_tiles;
  if (!r.async_tiles) {
    r.async_tiles_note =
        o.async_tiles == "off"
            ? "off"
            : "does not apply: " + option_not_applicable(o, *find_option("async_tiles"));
  }

  // ---- engine hooks: telemetry, and cancel after every block ----
  backend->reset_peak();
  m.set_telemetry(cb.telemetry);
  if (cb.cancel) {
    const CancelToken* cancel = cb.cancel;
    m.set_observer([cancel](std::string_view, const Tensor&) { return cancel->check(); });
  }

  // ---- a resumable round trip or decode: chunk by chunk, with checkpoints ----
  // (with the options the automatic schedule chose: one that turned to tiling is not resumable)
  JobSpec effective = job;
  effective.options = o;
  // a blend run spreads its tiles over the devices; an untiled decode is pipelined over them
  DeviceWorkers* tile_devices = nullptr;
  if (several && o.tiling == "blend") {
    SEEDVAE_ASSIGN_OR_RETURN(tile_devices, ensure_workers(m, o, devices));
  }
  const bool pipelined = several && o.tiling == "off";
  if (!several && resumable(effective)) {
    ResumableRun run{job, cb, r, o, m, *backend, phase, trim_heap};
    SEEDVAE_TRY(run.run());
    if (!schedule_note.empty()) {
      r.plan_note = schedule_note + (r.plan_note.empty() ? "" : "; " + r.plan_note);
    }
    r.peak_bytes = backend->memory_stats().peak_bytes;
    r.total_s = seconds_since(t0);
    return Status::ok();
  }

  // ---- encode ----
  HostTensor latent;
  if (encodes) {
    SEEDVAE_ASSIGN_OR_RETURN(source, open_source(job, o, r.prefetch, cb.cancel));
    phase("encode");
    const auto te = Clock::now();
    const double device_before = backend->device_busy_ms();
    HostTensor moments;
    StreamHooks hooks{cb.cancel, cb.progress, {}, -1};
    // The posterior mean is taken chunk by chunk, so the moments (twice the latent) of the whole
    // clip are never held; sampling draws its noise over the whole moments, in their order.
    std::vector<HostTensor> means;
    if (!job.sample_latent) {
      hooks.on_chunk = [&](int64_t, const HostTensor& part) -> Status {
        means.push_back(moments_mean(part));
        trim_heap();
        return Status::ok();
      };
      hooks.keep_output = false;
    }
    if (o.tiling == "off") {
      // Frames arrive chunk by chunk; bit-identical to encoding the whole padded clip.
      SEEDVAE_ASSIGN_OR_RETURN(moments, encode_stream(m, *source, stream, hooks));
    } else {
      // Tiles run over every chunk: the whole padded clip first.
      SEEDVAE_ASSIGN_OR_RETURN(HostTensor video, read_all_frames(*source));
      Result<HostTensor> encoded =
          encode_clip(m, weights, video, o, hooks, nullptr, &r.plan_note, tile_devices);
      if (!encoded.is_ok() && tile_devices) workers.reset();  // a device may be in an error state
      SEEDVAE_ASSIGN_OR_RETURN(moments, std::move(encoded));
    }
    if (!source->finished()) {
      return internal_error("the frame source did not reach the end of the clip");
    }
    const media::PrefetchStats ps = source->stats();
    r.read_s = ps.read_seconds;
    r.read_wait_s = ps.wait_seconds;
    // the engine's time: less the waits for frames and the caller's work on them (keep_original)
    r.encode_s = engine_seconds(seconds_since(te) - r.read_wait_s - ps.hook_seconds, *backend,
                                device_before);
    r.plan = source->plan();
    r.fps = source->fps();
    if (std::string w = source->warning(); !w.empty()) r.warnings.push_back(std::move(w));
    source.reset();  // the reader has finished; join it
    predict(r.plan);
    if (cb.on_input) SEEDVAE_TRY(cb.on_input(InputClip{r.plan, r.fps}));
    if (job.sample_latent) {
      latent = moments_sample(moments, job.seed);
    } else if (!means.empty()) {
      SEEDVAE_ASSIGN_OR_RETURN(latent, concat_time(means));
    } else {
      latent = moments_mean(moments);
    }
  }

  // ---- decode: each finished chunk is trimmed, compared, written and kept as it arrives ----
  if (decodes) {
    std::optional<media::ClipWriter> writer;
    if (!job.output.empty()) {
      const bool from_input = job.kind == JobKind::kRoundTrip;
      SEEDVAE_ASSIGN_OR_RETURN(
          writer,
          media::ClipWriter::open(
              job.output, write_options(o, r.fps, from_input ? &job.input : nullptr), cb.cancel));
    }
    const bool compare = job.kind == JobKind::kRoundTrip;
    media::ChunkProducer originals;
    if (compare) {
      SEEDVAE_ASSIGN_OR_RETURN(originals, open_originals(job.input, cb.cancel));
    }
    media::QualityAccumulator quality;
    SeamAccumulator seams;
    Status seam_status;
    double metrics_s = 0, write_s = 0, sink_s = 0;
    ChunkSink sink = [&](int64_t first, const HostTensor& chunk) -> Status {
      const auto ts = Clock::now();
      const Status st = [&]() -> Status {
        // Seam figures on the raw decoded frames, as the tiles produced them.
        if (!r.tiles.rects.empty() && seam_status.is_ok()) {
          seam_status = seams.add(chunk, seam_output_rects(r.tiles));
        }
        const int64_t k = std::min(chunk.shape()[2], r.plan.frames - first);
        if (k <= 0) return Status::ok();  // temporal padding
        const HostTensor recon = trim_chunk(chunk, k, r.plan.height, r.plan.width);
        if (compare) {
          const auto tm = Clock::now();
          // A cancel stops the originals between frames (the sample clip's are generated).
          SEEDVAE_ASSIGN_OR_RETURN(HostTensor original, originals(k, cb.cancel));
          if (original.empty() || original.shape() != recon.shape()) {
            return internal_error("the input read again gave " + original.shape().to_string() +
                                  " for reconstruction frames " + recon.shape().to_string());
          }
          SEEDVAE_TRY(quality.add(recon, original));
          metrics_s += seconds_since(tm);
        }
        if (writer) {
          const auto tw = Clock::now();
          SEEDVAE_TRY(writer->write(recon));
          write_s += seconds_since(tw);
        }
        if (job.keep_reconstruction) SEEDVAE_TRY(job.keep_reconstruction->append(recon));
        if (cb.on_decoded) SEEDVAE_TRY(cb.on_decoded(first, recon));
        trim_heap();
        return Status::ok();
      }();
      sink_s += seconds_since(ts);
      return st;
    };
    phase("decode");
    const auto td = Clock::now();
    const double device_before = backend->device_busy_ms();
    TileHooks th;
    th.report = &r.tiles;
    th.on_tile = cb.on_tile;
    std::string note;
    StreamHooks hooks{cb.cancel, cb.progress, sink, -1};
    hooks.keep_output = false;
    // a round trip decodes the latent as the family's wrapper hands it over (as_decoded)
    HostTensor to_decode;
    if (encodes) {
      SEEDVAE_ASSIGN_OR_RETURN(to_decode, as_decoded(weights, latent));
    }
    const HostTensor& z = encodes ? to_decode : *job.latent;
    if (pipelined) {
      SEEDVAE_TRY(decode_pipelined(m, weights, z, o, devices, hooks, r));
    } else {
      const Status st = decode_clip(m, weights, z, o, hooks, &th, &note, tile_devices).status();
      if (!st.is_ok() && tile_devices) workers.reset();  // a device may be in an error state
      SEEDVAE_TRY(st);
      for (const TileDeviceStats& d : r.tiles.devices) {
        r.device_shares.push_back(
            {d.backend, std::to_string(d.tiles) + " decode tiles", d.busy_ms, d.memory});
      }
    }
    to_decode = {};
    if (r.plan_note.empty()) r.plan_note = note;
    r.decode_s = engine_seconds(seconds_since(td) - sink_s, *backend, device_before);
    r.metrics_s = metrics_s;
    r.write_s = write_s;
    if (r.tiles.mode != TilingMode::kOff && seam_status.is_ok()) {
      if (auto sm = seams.result(&r.tiles); sm.is_ok()) r.seams = std::move(*sm);
    }
    if (compare) {
      if (auto q = quality.result(); q.is_ok()) r.quality = *q;
    }
    if (writer) {
      phase("write");
      const auto tw = Clock::now();
      SEEDVAE_TRY(writer->commit());
      r.write_s += seconds_since(tw);
      for (std::string& w : writer->warnings()) r.warnings.push_back(std::move(w));
      if (std::string w = media::stored_size_note(job.output, r.plan.width, r.plan.height);
          !w.empty()) {
        r.warnings.push_back(std::move(w));
      }
      r.output = job.output;
    }
  }
  if (!schedule_note.empty()) {
    r.plan_note = schedule_note + (r.plan_note.empty() ? "" : "; " + r.plan_note);
  }
  r.peak_bytes = backend->memory_stats().peak_bytes;  // Session::run detaches the hooks
  if (encodes) r.latent = std::move(latent);

  // ---- an encode writes its latent ----
  if (job.kind == JobKind::kEncode && !job.output.empty()) {
    phase("write");
    const auto tw = Clock::now();
    SEEDVAE_TRY(write_latent_file(job.output, r.latent, r.plan, r.fps, weights,
                                  latent_space(weights, job)));
    r.output = job.output;
    r.write_s = seconds_since(tw);
  }
  r.total_s = seconds_since(t0);
  return Status::ok();
}

}  // namespace seedvae
