// seedvae: the headless command-line tool. Every subcommand maps errors to an exit code (see
// kExitCodes) and prints progress on stderr; --json makes stdout machine-readable.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>

#include "app/backends.h"
#include "app/cuda_cli_options.h"
#include "core/base/atomic_file.h"
#include "core/base/cancel.h"
#include "core/base/progress.h"
#include "core/io/safetensors.h"
#include "core/pipeline/bench.h"
#include "core/pipeline/verify.h"
#include "core/schedule/planner.h"
#include "core/schedule/seam_metrics.h"
#include "core/schedule/streaming.h"
#include "core/schedule/tiled.h"
#include "core/vae/state_dict.h"
#include "core/vae/vae_model.h"
#ifdef SEEDVAE_HAVE_MEDIA
#include "core/media/metrics.h"
#include "core/media/prefetch.h"
#include "core/media/sample_clip.h"
#include "core/media/vae_padding.h"
#include "core/media/video_io.h"
#endif
#if defined(__unix__) || defined(__APPLE__)
#include <sys/resource.h>
#include <unistd.h>
#else
#include <io.h>
#define isatty _isatty
#endif

namespace seedvae::app {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kExitCodes =
    "Exit codes: 0 success; 1 verification failed; 2 bad command line; 3 bad input (unreadable,\n"
    "malformed or mismatched file); 4 out of memory; 5 device error; 6 unsupported in this build;\n"
    "7 I/O error writing output; 70 internal error; 130 cancelled (Ctrl-C).";

enum Exit { kOk = 0, kVerifyFailed = 1, kUsage = 2, kBadInput = 3, kOom = 4, kDevice = 5,
            kUnsupported = 6, kIo = 7, kInternal = 70, kCancelled = 130 };

int exit_code(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk: return kOk;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kCorruptData: return kBadInput;
    case StatusCode::kIoError: return kIo;
    case StatusCode::kUnsupported: return kUnsupported;
    case StatusCode::kOutOfMemory: return kOom;
    case StatusCode::kCancelled: return kCancelled;
    case StatusCode::kDeviceError: return kDevice;
    case StatusCode::kInternal: return kInternal;
  }
  return kInternal;
}

int fail(const Status& s) {
  std::cerr << "seedvae: " << s.to_string() << "\n";
  return exit_code(s);
}

CancelToken g_cancel;
extern "C" void on_sigint(int) { g_cancel.request(); }

// Prints "decode 3/5" on stderr: one updating line on a terminal, one line per report otherwise;
// silent with --quiet.
class StderrProgress final : public ProgressSink {
 public:
  explicit StderrProgress(bool quiet) : quiet_(quiet), tty_(isatty(2) != 0) {}
  void report(std::string_view stage, int64_t done, int64_t total) override {
    if (quiet_) return;
    std::fprintf(stderr, "%s%.*s %lld/%lld%s", tty_ ? "\r" : "", static_cast<int>(stage.size()),
                 stage.data(), static_cast<long long>(done), static_cast<long long>(total),
                 !tty_ || done == total ? "\n" : "");
    std::fflush(stderr);
  }

 private:
  bool quiet_;
  bool tty_;
};

int64_t peak_rss_bytes() {
#if defined(__unix__) || defined(__APPLE__)
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;  // Linux reports KiB
#else
  return -1;
#endif
}

double mib(int64_t b) { return static_cast<double>(b) / (1 << 20); }

// ---- options shared by the model commands --------------------------------------------------
struct ModelOptions {
  std::string weights;
  std::string synthetic;  // "tiny" or "real"
  BackendRequest backend;
  int chunk = 1;
  int hires_chunk = 0;  // VaeModel::set_hires_chunk_frames
  bool quiet = false;
  bool json = false;
  std::string tiling = "off";  // off | blend | exact
  std::string tile, overlap;   // WxH pixels
  double budget_gb = 0;        // pick the tile (and chunk) that fits this many GiB
  std::string async_tiles = "auto";  // auto | on | off (StreamOptions::async_tiles)
  bool lone_head = false;   // StreamOptions::lone_head
  bool lean_convs = false;  // VaeModel::set_lean_convs

  void add_to(CLI::App* c) {
    auto* w = c->add_option("--weights", weights, "SeedVR2 VAE checkpoint (.safetensors; fp16, bf16 or fp32)")
                  ->check(CLI::ExistingFile);
    c->add_option("--synthetic", synthetic,
                  "use the portable synthetic weights of a configuration instead of a file "
                  "(default: the demo model when installed or $SEEDVAE_DEMO_WEIGHTS is set, "
                  "else tiny)")
        ->check(CLI::IsMember({"tiny", "real"}))
        ->excludes(w);
    c->add_option("--backend", backend.name, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
    c->add_option("--threads", backend.threads, "CPU threads (0: all)")->check(CLI::Range(0, 1024));
    add_backend_options(c, backend);
    c->add_option("--chunk", chunk,
                  "latent frames per temporal chunk (1 latent = 4 frames); 0 = whole clip at once")
        ->check(CLI::Range(0, 1 << 20));
    c->add_option("--hires-chunk", hires_chunk,
                  "chunked upsampling: run the full-frame-rate high-resolution stages (decoder "
                  "after its last temporal upsampling, encoder before its first temporal "
                  "downsampling) N frames at a time; exact, less memory; 0 = off")
        ->check(CLI::Range(0, 1 << 20));
    c->add_flag("--lone-head", lone_head,
                "temporal chunks: the first frame (latent) alone, then --chunk latents each, so "
                "no chunk is larger than the others (upstream: the first chunk has one latent "
                "more); the same result, a smaller decode peak");
    c->add_flag("--lean-convs", lean_convs,
                "lean convolutions: the decoder's causal convolutions never build their "
                "context-extended input (two cuDNN calls each, a few frame copies); exact, less "
                "memory, somewhat slower. With --lone-head and --offload-state: the 1080p decode "
                "in 12 GiB");
    c->add_flag("--quiet,-q", quiet, "no progress on stderr");
    c->add_flag("--json", json, "machine-readable output on stdout");
    c->add_option("--tiling", tiling,
                  "spatial tiling: off, blend (the ComfyUI port's cosine-blended tiles) or exact "
                  "(tiled computation, output equal to untiled)")
        ->check(CLI::IsMember({"off", "blend", "exact"}));
    c->add_option("--tile", tile, "tile size WxH in output pixels (default 512x512)");
    c->add_option("--overlap", overlap, "blend overlap WxH in pixels (default 64x64)");
    c->add_option("--budget-gb", budget_gb,
                  "memory budget in GiB: choose the largest tile that fits (with --tiling)")
        ->check(CLI::NonNegativeNumber);
    c->add_option("--async-tiles", async_tiles,
                  "async tiles: queue the next chunk/tile on the device before finishing the "
                  "previous one (its download, blending, output), so copies and host work overlap "
                  "the compute; identical output. auto = on except with --tiling exact")
        ->check(CLI::IsMember({"auto", "on", "off"}));
  }

  // The temporal slicing and copy/compute overlap options of a run (async tiles checked against
  // the tiling mode: exact tiling moves its windows through host memory layer by layer).
  Result<StreamOptions> stream() const {
    StreamOptions so;
    so.chunk_latents = chunk;
    so.async_tiles = async_tiles != "off";
    so.lone_head = lone_head;
    so.hires_chunk_frames = hires_chunk;
    so.lean_convs = lean_convs;
    if (tiling == "exact") {
      if (async_tiles == "on") {
        return invalid_argument("--async-tiles on does not apply to --tiling exact, which moves "
                                "every layer's windows through host memory; use auto or off");
      }
      so.async_tiles = false;
    }
    return so;
  }

  Result<VaeWeights> load() const {
    if (!weights.empty()) return load_weights(weights);
    if (synthetic.empty()) {  // the built-in default: the trained demo model when present
      if (const auto demo = find_demo_weights(executable_dir()); !demo.empty()) {
        return load_weights(demo);
      }
    }
    if (synthetic == "real") return synthesize_weights(VaeConfig::real(), kRealSeed);
    return synthesize_weights(VaeConfig::tiny(), kTinySeed);
  }
};

void print_json(const Json& j) { std::cout << j.dump(2) << "\n"; }

Status parse_wxh(const std::string& s, const char* what, int64_t* w, int64_t* h) {
  long long a = 0, b = 0;
  if (std::sscanf(s.c_str(), "%lldx%lld", &a, &b) != 2 || a < 0 || b < 0) {
    return invalid_argument(std::string(what) + " must be WxH (e.g. 512x512), got \"" + s + "\"");
  }
  *w = a;
  *h = b;
  return Status::ok();
}

// Tile options from --tiling/--tile/--overlap/--budget-gb for a clip of `h` x `w` pixels and
// `frames` frames; with a budget and no --tile, the planner picks the largest tile that fits.
Result<TileOptions> tile_options(const ModelOptions& mo, const VaeWeights& weights, bool encode,
                                 int64_t h, int64_t w, int64_t frames, std::string* plan_note) {
  TileOptions to;
  SEEDVAE_ASSIGN_OR_RETURN(to.mode, parse_tiling_mode(mo.tiling));
  if (to.mode == TilingMode::kExact && mo.hires_chunk > 0) {
    return invalid_argument("--hires-chunk does not apply to --tiling exact, which runs layer by "
                            "layer on tiles (its memory is already bounded by the tile); drop one");
  }
  if (to.mode == TilingMode::kExact && (mo.lone_head || mo.lean_convs)) {
    return invalid_argument(std::string(mo.lean_convs ? "--lean-convs" : "--lone-head") +
                            " does not apply to --tiling exact, which has its own layer-by-layer "
                            "schedule and chunking; drop one");
  }
  to.weights = &weights;
  if (!mo.tile.empty()) SEEDVAE_TRY(parse_wxh(mo.tile, "--tile", &to.spec.tile_w, &to.spec.tile_h));
  if (!mo.overlap.empty()) {
    SEEDVAE_TRY(parse_wxh(mo.overlap, "--overlap", &to.spec.overlap_w, &to.spec.overlap_h));
  }
  if (mo.budget_gb > 0 && mo.tile.empty()) {
    PlanRequest req;
    req.op = encode ? PlanOp::kEncode : PlanOp::kDecode;
    req.config = weights.config;
    req.height = h;
    req.width = w;
    req.frames = frames;
    req.mode = to.mode;
    req.spec = to.spec;
    req.auto_tile = to.mode != TilingMode::kOff;
    req.chunk_latents = std::max(1, mo.chunk);
    req.hires_chunk_frames = mo.hires_chunk;
    req.auto_chunk = false;
    req.budget_bytes = static_cast<int64_t>(mo.budget_gb * (1 << 30));
    SEEDVAE_ASSIGN_OR_RETURN(TilePlanReport rep, plan(req));
    if (!rep.fits) return out_of_memory("no tile fits --budget-gb " + std::to_string(mo.budget_gb) + ": " + rep.message);
    to.spec = rep.chosen.spec;
    if (plan_note) *plan_note = describe(rep.chosen);
  }
  return to;
}

Result<HostTensor> run_encode_op(VaeModel& model, const VaeWeights& weights,
                                 const HostTensor& video, const ModelOptions& mo,
                                 const StreamHooks& hooks, TileRunReport* report) {
  const Shape& s = video.shape();
  std::string note;
  SEEDVAE_ASSIGN_OR_RETURN(TileOptions to, tile_options(mo, weights, true, s[3], s[4], s[2], &note));
  if (!note.empty() && !mo.quiet) std::cerr << "plan: " << note << "\n";
  SEEDVAE_ASSIGN_OR_RETURN(const StreamOptions so, mo.stream());
  if (to.mode == TilingMode::kOff) return encode_video(model, video, so, hooks);
  TileHooks th;
  th.report = report;
  return tiled_encode(model, video, to, so, hooks, &th);
}

Result<HostTensor> run_decode_op(VaeModel& model, const VaeWeights& weights,
                                 const HostTensor& latent, const ModelOptions& mo,
                                 const StreamHooks& hooks, TileRunReport* report) {
  const Shape& s = latent.shape();
  const int64_t f = weights.config.temporal_factor(), sf = weights.config.spatial_factor();
  std::string note;
  SEEDVAE_ASSIGN_OR_RETURN(TileOptions to, tile_options(mo, weights, false, s[3] * sf, s[4] * sf,
                                                        (s[2] - 1) * f + 1, &note));
  if (!note.empty() && !mo.quiet) std::cerr << "plan: " << note << "\n";
  SEEDVAE_ASSIGN_OR_RETURN(const StreamOptions so, mo.stream());
  if (to.mode == TilingMode::kOff) return decode_latent(model, latent, so, hooks);
  TileHooks th;
  th.report = report;
  return tiled_decode(model, latent, to, so, hooks, &th);
}

// ---- info -----------------------------------------------------------------------------------
int cmd_info(const std::vector<std::string>& paths, bool json) {
  Json out = Json::object();
  int rc = kOk;
  for (const auto& p : paths) {
    const std::filesystem::path path(p);
    Json item{{"path", p}};
    if (path.extension() == ".safetensors") {
      auto file = SafetensorsFile::open(path);
      if (!file) {
        item["error"] = file.status().to_string();
        rc = exit_code(file.status());
      } else {
        item["tensors"] = file->names().size();
        item["bytes"] = file->file_size();
        auto cfg = infer_config(*file);
        if (cfg) {
          auto w = load_weights(path);
          item["kind"] = "vae_checkpoint";
          item["config"] = cfg->to_string();
          item["parameters"] = cfg->parameter_count();
          if (w) {
            item["dtype"] = std::string(dtype_name(w->dtype));
            item["sha256"] = w->sha256;
          }
        } else {
          item["kind"] = "tensors";
          item["not_a_vae"] = cfg.status().message();
          for (const auto& n : file->names()) {
            auto v = file->get(n);
            item["shapes"][n] = v->shape.dims();
          }
        }
        if (!file->metadata().empty()) item["metadata"] = file->metadata();
      }
    } else {
#ifdef SEEDVAE_HAVE_MEDIA
      auto info = media::probe(path);
      if (!info) {
        item["error"] = info.status().to_string();
        rc = exit_code(info.status());
      } else {
        item["kind"] = info->source_kind;
        item["width"] = info->width;
        item["height"] = info->height;
        item["fps"] = info->fps;
        item["frames"] = info->frame_count;
      }
#else
      item["error"] = "this build has no video support";
      rc = kUnsupported;
#endif
    }
    out["files"].push_back(item);
  }
  out["devices"] = describe_devices();
  out["version"] = SEEDVAE_VERSION;
  if (json) {
    print_json(out);
    return rc;
  }
  for (const auto& item : out.value("files", Json::array())) {
    std::cout << item["path"].get<std::string>() << "\n";
    for (const auto& [k, v] : item.items()) {
      if (k == "path" || k == "shapes") continue;
      std::cout << "  " << k << ": " << (v.is_string() ? v.get<std::string>() : v.dump()) << "\n";
    }
  }
  std::cout << "devices:\n";
  for (const auto& d : out["devices"]) std::cout << "  " << d.get<std::string>() << "\n";
  return rc;
}

// ---- verify ---------------------------------------------------------------------------------
int cmd_verify(const VerifyOptions& opt, const BackendRequest& br, bool json, bool quiet) {
  auto backend = make_backend(br);
  if (!backend) return fail(backend.status());
  if (!quiet) std::cerr << "backend: " << (*backend)->name() << "\n";
  auto print_row = [&](const VerifyRow& r) {
    if (json) return;
    std::printf("%-6s %-5s %-40s max_abs %.3e  rms %.3e  tol %.1e  %6.2fs  %s\n", r.config.c_str(),
                r.status.c_str(), r.tensor.c_str(), r.max_abs, r.rms, r.tolerance, r.seconds,
                r.note.c_str());
    std::fflush(stdout);
  };
  auto report = run_verify(**backend, opt, print_row, &g_cancel);
  if (!report) return fail(report.status());
  if (json) {
    Json j;
    for (const auto& r : report->rows) {
      j["rows"].push_back({{"config", r.config}, {"tensor", r.tensor}, {"status", r.status},
                           {"max_abs", r.max_abs}, {"rms", r.rms}, {"tolerance", r.tolerance},
                           {"seconds", r.seconds}, {"note", r.note}});
    }
    j["passed"] = report->passed();
    j["failed"] = report->failed();
    j["skipped"] = report->skipped();
    print_json(j);
  } else {
    std::printf("verify: %d passed, %d failed, %d skipped\n", report->passed(), report->failed(),
                report->skipped());
  }
  return report->failed() ? kVerifyFailed : kOk;
}

#ifdef SEEDVAE_HAVE_MEDIA
// ---- encode / decode / roundtrip -------------------------------------------------------------
struct VideoOptions {
  std::string input;
  bool sample_clip = false;
  int64_t first = 0;
  int64_t frames = -1;
  int stride = 1;
  std::string size;  // "WxH" resize
  int multiple = 8;
  std::string temporal_pad = "mirror";
  std::string prefetch = "auto";  // auto | on | off (--no-prefetch = off)
  bool no_prefetch = false;

  void add_to(CLI::App* c, bool input_required) {
    auto* in = c->add_option("video", input, "input video, image sequence directory or pattern");
    auto* s = c->add_flag("--sample-clip", sample_clip,
                          "use the built-in synthetic sample clip instead of a file");
    if (input_required) {
      in->check(CLI::ExistingPath);
      s->excludes(in);
    }
    c->add_option("--first", first, "first frame to read")->check(CLI::NonNegativeNumber);
    c->add_option("--frames", frames, "number of frames to read (-1: all)");
    c->add_option("--stride", stride, "read every n-th frame")->check(CLI::PositiveNumber);
    c->add_option("--size", size, "resize frames to WxH before encoding");
    c->add_option("--multiple", multiple, "pad frames to a multiple of 8 or 16 pixels")
        ->check(CLI::IsMember({8, 16}));
    c->add_option("--temporal-pad", temporal_pad,
                  "how to reach 4n+1 frames: mirror (ComfyUI port, default) or repeat-last "
                  "(official SeedVR2)")
        ->check(CLI::IsMember({"mirror", "repeat-last"}));
    auto* p = c->add_option("--prefetch", prefetch,
                            "read and convert frames on their own thread, a few chunks ahead of "
                            "the encoder: auto (default: on for a video file or image sequence "
                            "encoded in temporal chunks without tiling), on or off")
                  ->check(CLI::IsMember({"auto", "on", "off"}));
    c->add_flag("--no-prefetch", no_prefetch, "same as --prefetch off: read the whole clip first")
        ->excludes(p);
  }

  bool from_file() const { return !sample_clip && !input.empty(); }

  Result<media::ReadOptions> read_options() const {
    media::ReadOptions ro;
    ro.first_frame = first;
    ro.max_frames = frames;
    ro.stride = stride;
    if (!size.empty() && std::sscanf(size.c_str(), "%dx%d", &ro.resize_width, &ro.resize_height) != 2) {
      return invalid_argument("--size must be WxH, got " + size);
    }
    return ro;
  }

  Result<media::Clip> read() const {
    if (sample_clip || input.empty()) {
      int w = 256, h = 256;
      if (!size.empty() && std::sscanf(size.c_str(), "%dx%d", &w, &h) != 2) {
        return invalid_argument("--size must be WxH, got " + size);
      }
      const int n = frames > 0 ? static_cast<int>(frames) : 17;
      return media::Clip{media::make_sample_clip(w, h, n), 24.0};
    }
    SEEDVAE_ASSIGN_OR_RETURN(media::ReadOptions ro, read_options());
    return media::read_clip(input, ro, &g_cancel);
  }
  media::TemporalPad pad_mode() const {
    return temporal_pad == "repeat-last" ? media::TemporalPad::kRepeatLast
                                         : media::TemporalPad::kMirror;
  }
};

struct Engine {
  std::unique_ptr<Backend> backend;
  std::optional<VaeModel> model;
  VaeWeights weights;
};

Result<Engine> make_engine(const ModelOptions& mo) {
  if (mo.lean_convs && mo.backend.cuda_graphs) {
    return invalid_argument("--lean-convs and --cuda-graphs do not combine: recorded chunks update "
                            "the causal state in place, which the lean convolutions replace; use "
                            "one of them");
  }
  Engine e;
  SEEDVAE_ASSIGN_OR_RETURN(e.weights, mo.load());
  SEEDVAE_ASSIGN_OR_RETURN(e.backend, make_backend(mo.backend));
  SEEDVAE_ASSIGN_OR_RETURN(VaeModel m, VaeModel::create(*e.backend, e.weights));
  e.model.emplace(std::move(m));
  if (!mo.quiet) {
    std::cerr << "weights: " << e.weights.source << " (" << e.weights.config.to_string() << ", "
              << e.weights.parameter_count() << " parameters)\nbackend: " << e.backend->name()
              << "\n";
  }
  return e;
}

struct EncodeResult {
  HostTensor latent;  // [1, 16, t, h, w], raw VAE latent
  media::PadPlan plan;
  double fps = 24;
  double seconds = 0;       // encode; with prefetch including the waits for frames
  HostTensor padded_input;  // only when asked for (the round trip's reference)
  bool prefetch = false;
  double read_seconds = 0;       // reading + converting frames (on the prefetch thread, or before)
  double read_wait_seconds = 0;  // of which the engine thread waited for
  double total_seconds = 0;      // read + pad + encode, wall clock
};

// Whether to read ahead on a prefetch thread (--prefetch / --no-prefetch). Prefetch feeds the
// untiled temporal stream chunk by chunk (encode_stream); the combinations that need the whole clip
// before the first chunk do not use it under auto and are refused with the reason under "on".
Result<bool> use_prefetch(const VideoOptions& vo, const ModelOptions& mo) {
  const std::string mode = vo.no_prefetch ? "off" : vo.prefetch;
  if (mode == "off") return false;
  std::string why;
  if (!vo.from_file()) {
    why = "the sample clip is generated in memory, there are no frames to read ahead";
  } else if (mo.tiling != "off") {
    why = "--tiling " + mo.tiling + " encodes every tile over the whole clip, so it needs all "
          "frames in memory before it starts";
  } else if (mo.budget_gb > 0) {
    why = "--budget-gb plans the run from the clip's size and length, known only once it is read";
  }
  if (!why.empty()) {
    if (mode == "on") return invalid_argument("--prefetch on does not apply: " + why);
    return false;
  }
  if (mo.chunk == 0 && mode == "auto") return false;  // one chunk: nothing to overlap with
  return true;
}

Result<EncodeResult> run_encode(Engine& e, const VideoOptions& vo, const ModelOptions& mo,
                                bool sample, uint64_t seed, ProgressSink& progress,
                                bool keep_input) {
  SEEDVAE_ASSIGN_OR_RETURN(const bool prefetch, use_prefetch(vo, mo));
  EncodeResult r;
  r.prefetch = prefetch;
  const auto start = Clock::now();
  HostTensor moments;
  if (prefetch) {
    // Frames are read, converted and padded chunk by chunk on the prefetch thread while the
    // engine encodes the chunks already read; bit-identical to the path below.
    media::VideoSourceOptions so;
    SEEDVAE_ASSIGN_OR_RETURN(so.read, vo.read_options());
    so.spatial_multiple = vo.multiple;
    so.temporal_pad = vo.pad_mode();
    so.prefetch = true;
    std::tie(so.first_chunk_frames, so.chunk_frames) =
        media::encoder_chunk_frames(mo.chunk, e.weights.config.temporal_factor(), mo.lone_head);
    so.keep_input = keep_input;
    SEEDVAE_ASSIGN_OR_RETURN(auto source, media::VideoFrameSource::open(vo.input, so, &g_cancel));
    const auto t0 = Clock::now();
    const StreamHooks hooks{&g_cancel, &progress};
    SEEDVAE_ASSIGN_OR_RETURN(const StreamOptions stream, mo.stream());
    SEEDVAE_ASSIGN_OR_RETURN(moments, encode_stream(*e.model, *source, stream, hooks));
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    r.plan = source->plan();
    r.fps = source->fps();
    if (keep_input) {
      SEEDVAE_ASSIGN_OR_RETURN(r.padded_input, source->input());
    }
    const media::PrefetchStats st = source->stats();
    r.read_seconds = st.read_seconds;
    r.read_wait_seconds = st.wait_seconds;
  } else {
    SEEDVAE_ASSIGN_OR_RETURN(media::Clip clip, vo.read());
    const Shape& s = clip.video.shape();
    r.fps = clip.fps;
    r.plan = media::plan_padding(s[2], s[3], s[4], vo.multiple);
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor padded, media::apply_padding(clip.video, r.plan, vo.pad_mode()));
    clip = {};
    r.read_seconds = r.read_wait_seconds =
        std::chrono::duration<double>(Clock::now() - start).count();
    const auto t0 = Clock::now();
    const StreamHooks hooks{&g_cancel, &progress};
    SEEDVAE_ASSIGN_OR_RETURN(moments, run_encode_op(*e.model, e.weights, padded, mo, hooks, nullptr));
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (keep_input) r.padded_input = std::move(padded);
  }
  r.total_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.latent = sample ? moments_sample(moments, seed) : moments_mean(moments);
  return r;
}

// The read / prefetch part of the --json reports.
void add_read_json(Json& j, const EncodeResult& r) {
  j["prefetch"] = r.prefetch;
  j["read_seconds"] = r.read_seconds;
  j["read_wait_seconds"] = r.read_wait_seconds;
  j["read_overlapped_seconds"] = std::max(0.0, r.read_seconds - r.read_wait_seconds);
  j["read_encode_seconds"] = r.total_seconds;
}

std::map<std::string, std::string> plan_metadata(const media::PadPlan& p, double fps) {
  return {{"seedvae.frames", std::to_string(p.frames)},
          {"seedvae.height", std::to_string(p.height)},
          {"seedvae.width", std::to_string(p.width)},
          {"seedvae.fps", std::to_string(fps)}};
}

int cmd_encode(const VideoOptions& vo, const ModelOptions& mo, const std::string& output,
               bool sample, uint64_t seed, bool dit) {
  StderrProgress progress(mo.quiet);
  auto e = make_engine(mo);
  if (!e) return fail(e.status());
  auto r = run_encode(*e, vo, mo, sample, seed, progress, false);
  if (!r) return fail(r.status());
  HostTensor latent = r->latent;
  if (dit) {  // SeedVR2's DiT space: (latent - 0) * 0.9152
    for (float& v : latent.f32()) v *= 0.9152f;
  }
  auto meta = plan_metadata(r->plan, r->fps);
  meta["seedvae.latent_space"] = dit ? "dit" : "raw";
  meta["seedvae.weights"] = e->weights.source;
  NamedTensor nt{"latent", &latent};
  if (Status s = write_safetensors(output, {&nt, 1}, meta); !s) return fail(s);
  Json j{{"output", output}, {"latent_shape", latent.shape().dims()},
         {"encode_seconds", r->seconds},
         {"ms_per_frame", 1000 * r->seconds / static_cast<double>(r->plan.padded_frames)},
         {"peak_backend_mib", mib(e->backend->memory_stats().peak_bytes)},
         {"peak_rss_mib", mib(peak_rss_bytes())}};
  add_read_json(j, *r);
  if (mo.json) print_json(j);
  else std::cout << "wrote " << output << " latent " << latent.shape().to_string() << " in "
                 << r->seconds << " s\n";
  return kOk;
}

int cmd_decode(const std::string& input, const ModelOptions& mo, const std::string& output,
               double fps_override) {
  StderrProgress progress(mo.quiet);
  auto file = SafetensorsFile::open(input);
  if (!file) return fail(file.status());
  auto view = file->get("latent");
  if (!view) return fail(invalid_argument(input + " has no tensor named \"latent\""));
  HostTensor latent = view->to_host(DType::kF32);
  const auto& meta = file->metadata();
  auto meta_int = [&](const char* k, int64_t def) {
    auto it = meta.find(k);
    return it == meta.end() ? def : std::atoll(it->second.c_str());
  };
  if (auto it = meta.find("seedvae.latent_space"); it != meta.end() && it->second == "dit") {
    for (float& v : latent.f32()) v /= 0.9152f;
  }
  auto e = make_engine(mo);
  if (!e) return fail(e.status());
  if (latent.shape().rank() != 5 || latent.shape()[1] != e->weights.config.latent_channels) {
    return fail(invalid_argument("latent " + latent.shape().to_string() + " does not fit the " +
                                 std::to_string(e->weights.config.latent_channels) +
                                 "-channel model"));
  }
  const auto t0 = Clock::now();
  auto video = run_decode_op(*e->model, e->weights, latent, mo, {&g_cancel, &progress}, nullptr);
  if (!video) return fail(video.status());
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const Shape& s = video->shape();
  media::PadPlan plan{meta_int("seedvae.frames", s[2]), meta_int("seedvae.height", s[3]),
                      meta_int("seedvae.width", s[4]), s[2], s[3], s[4]};
  HostTensor out = media::remove_padding(*video, plan);
  double fps = fps_override > 0 ? fps_override : 24.0;
  if (auto it = meta.find("seedvae.fps"); fps_override <= 0 && it != meta.end()) {
    fps = std::atof(it->second.c_str());
  }
  if (Status st = media::write_clip(output, out, {fps}); !st) return fail(st);
  const Json j{{"output", output}, {"frames", out.shape()[2]}, {"decode_seconds", secs},
               {"ms_per_frame", 1000 * secs / static_cast<double>(s[2])},
               {"peak_backend_mib", mib(e->backend->memory_stats().peak_bytes)}};
  if (mo.json) print_json(j);
  else std::cout << "wrote " << output << " (" << out.shape()[2] << " frames) in " << secs << " s\n";
  return kOk;
}

int cmd_roundtrip(const VideoOptions& vo, const ModelOptions& mo, const std::string& output) {
  StderrProgress progress(mo.quiet);
  auto e = make_engine(mo);
  if (!e) return fail(e.status());
  auto enc = run_encode(*e, vo, mo, false, 0, progress, true);
  if (!enc) return fail(enc.status());
  const auto t0 = Clock::now();
  TileRunReport tiles;
  auto video = run_decode_op(*e->model, e->weights, enc->latent, mo, {&g_cancel, &progress}, &tiles);
  if (!video) return fail(video.status());
  const double dec_s = std::chrono::duration<double>(Clock::now() - t0).count();
  HostTensor out = media::remove_padding(*video, enc->plan);
  for (float& v : out.f32()) v = std::clamp(v, -1.f, 1.f);
  HostTensor original = media::remove_padding(enc->padded_input, enc->plan);
  auto q = media::compare_clips(out, original);
  if (!q) return fail(q.status());
  if (!output.empty()) {
    if (Status st = media::write_clip(output, out, {enc->fps}); !st) return fail(st);
  }
  const double frames = static_cast<double>(enc->plan.frames);
  Json seams;
  if (tiles.mode != TilingMode::kOff) {
    auto m = seam_metrics(*video, tiles);
    if (m) seams = Json::parse(seam_metrics_json(*m));
  }
  Json j{{"input", vo.sample_clip || vo.input.empty() ? "sample clip" : vo.input},
               {"output", output},
               {"frames", enc->plan.frames},
               {"width", enc->plan.width},
               {"height", enc->plan.height},
               {"weights", e->weights.source},
               {"backend", e->backend->name()},
               {"chunk_latents", mo.chunk},
               {"async_tiles", mo.stream().is_ok() && mo.stream()->async_tiles},
               {"psnr_db", q->psnr_db},
               {"ssim", q->ssim},
               {"encode_seconds", enc->seconds},
               {"decode_seconds", dec_s},
               {"ms_per_frame", 1000 * (enc->seconds + dec_s) / frames},
               {"peak_backend_mib", mib(e->backend->memory_stats().peak_bytes)},
               {"peak_rss_mib", mib(peak_rss_bytes())},
               {"tiling", mo.tiling}};
  if (!seams.is_null()) j["decode_seams"] = seams;
  add_read_json(j, *enc);
  if (mo.json) {
    print_json(j);
  } else {
    if (!seams.is_null()) {
      std::printf("decode tiling %s: %zu tiles, seam energy %.3f (1.0 = no visible seams)\n",
                  mo.tiling.c_str(), tiles.rects.size(), seams.value("seam_energy", 0.0));
    }
    std::printf("round trip of %lld frames %lldx%lld: PSNR %.2f dB, SSIM %.4f\n",
                static_cast<long long>(enc->plan.frames), static_cast<long long>(enc->plan.width),
                static_cast<long long>(enc->plan.height), q->psnr_db, q->ssim);
    std::printf("time: encode %.2f s + decode %.2f s = %.1f ms/frame; peak memory: engine %.0f "
                "MiB, process %.0f MiB\n",
                enc->seconds, dec_s, 1000 * (enc->seconds + dec_s) / frames,
                mib(e->backend->memory_stats().peak_bytes), mib(peak_rss_bytes()));
    std::printf("read: %.2f s%s\n", enc->read_seconds,
                enc->prefetch ? (" on the prefetch thread, " +
                                 std::to_string(enc->read_wait_seconds) + " s of it waited for")
                                    .c_str()
                              : " before encoding (no prefetch)");
    if (!output.empty()) std::printf("wrote %s\n", output.c_str());
  }
  return kOk;
}
#endif  // SEEDVAE_HAVE_MEDIA

// ---- plan -----------------------------------------------------------------------------------
struct PlanCli {
  std::string op = "decode", size = "1920x1080", config = "real", weights, precision = "fp32",
              backend = "cpu";
  int64_t frames = 17;
};

int cmd_plan(const PlanCli& pc, const ModelOptions& mo) {
  PlanRequest req;
  req.op = pc.op == "encode" ? PlanOp::kEncode : PlanOp::kDecode;
  if (!pc.weights.empty()) {
    auto f = SafetensorsFile::open(pc.weights);
    if (!f) return fail(f.status());
    auto c = infer_config(*f);
    if (!c) return fail(c.status());
    req.config = *c;
  } else {
    req.config = pc.config == "tiny" ? VaeConfig::tiny() : VaeConfig::real();
  }
  if (Status s = parse_wxh(pc.size, "--size", &req.width, &req.height); !s) return fail(s);
  req.frames = pc.frames;
  const bool half = pc.precision == "bf16" || pc.precision == "fp16";
  req.activation_bytes = half ? 2 : 4;
  req.weight_bytes = half ? 2 : 4;
  req.backend = pc.backend == "cuda" ? BackendMemoryModel::cuda() : BackendMemoryModel::cpu();
  auto mode = parse_tiling_mode(mo.tiling);
  if (!mode) return fail(mode.status());
  req.mode = *mode;
  if (!mo.overlap.empty()) {
    if (Status s = parse_wxh(mo.overlap, "--overlap", &req.spec.overlap_w, &req.spec.overlap_h); !s) return fail(s);
  }
  req.auto_tile = mo.tile.empty() && req.mode != TilingMode::kOff;
  if (!mo.tile.empty()) {
    if (Status s = parse_wxh(mo.tile, "--tile", &req.spec.tile_w, &req.spec.tile_h); !s) return fail(s);
  }
  req.chunk_latents = std::max(1, mo.chunk);
  req.hires_chunk_frames = mo.hires_chunk;
  req.budget_bytes = static_cast<int64_t>(mo.budget_gb * (1 << 30));
  auto rep = plan(req);
  if (!rep) return fail(rep.status());
  if (mo.json) {
    std::cout << plan_report_json(*rep) << "\n";
  } else {
    std::printf("%s %s %lldx%lldx%lld, %s, tiling %s\n", pc.op.c_str(),
                req.config.to_string().c_str(), static_cast<long long>(req.width),
                static_cast<long long>(req.height), static_cast<long long>(req.frames),
                pc.precision.c_str(), mo.tiling.c_str());
    std::printf("chosen:  %s\nuntiled: %s\n%s\n", describe(rep->chosen).c_str(),
                describe(rep->untiled).c_str(), rep->message.c_str());
  }
  return rep->fits ? kOk : kOom;
}

// ---- bench ----------------------------------------------------------------------------------
int cmd_bench(const ModelOptions& mo, BenchOptions bo, const std::string& size,
              const std::string& output) {
  if (!size.empty() && std::sscanf(size.c_str(), "%dx%d", &bo.width, &bo.height) != 2) {
    return fail(invalid_argument("--size must be WxH, got " + size));
  }
  bo.chunk_latents = mo.chunk;
  bo.hires_chunk_frames = mo.hires_chunk;
  bo.async_tiles = mo.async_tiles != "off";
  bo.lone_head = mo.lone_head;
  bo.lean_convs = mo.lean_convs;
  auto weights = mo.load();
  if (!weights) return fail(weights.status());
  auto backend = make_backend(mo.backend);
  if (!backend) return fail(backend.status());
  if (!mo.quiet) {
    std::cerr << "bench: " << (*backend)->name() << ", " << weights->config.to_string() << ", "
              << bo.width << "x" << bo.height << "x" << bo.frames << ", chunk " << bo.chunk_latents
              << "\n";
  }
  auto r = run_bench(**backend, *weights, bo);
  if (!r) return fail(r.status());
  Json j{{"backend", r->backend}, {"config", r->config}, {"weights", weights->source},
         {"width", bo.width}, {"height", bo.height}, {"frames", bo.frames},
         {"chunk_latents", bo.chunk_latents}, {"hires_chunk_frames", bo.hires_chunk_frames},
         {"async_tiles", bo.async_tiles}, {"lone_head", bo.lone_head},
         {"lean_convs", bo.lean_convs}, {"warmup", bo.warmup}, {"repeats", bo.repeats},
         {"version", SEEDVAE_VERSION}};
  for (const auto& op : r->ops) {
    j["ops"].push_back({{"op", op.op}, {"total_ms", op.total_ms}, {"ms_per_frame", op.ms_per_frame},
                        {"tflop", op.tflop}, {"tflops_per_s", op.tflops_per_s},
                        {"gflops_per_s", op.tflops_per_s * 1000}, {"peak_mib", mib(op.peak_bytes)},
                        {"runs_ms", op.runs_ms}});
  }
  for (const auto& s : r->stages) {
    j["stages"].push_back({{"op", s.op}, {"stage", s.stage}, {"ms", s.ms}, {"gflop", s.gflop},
                           {"gflops_per_s", s.ms > 0 ? s.gflop / (s.ms / 1000) : 0}});
  }
  if (!output.empty()) {
    AtomicFile out(output);
    {
      std::ofstream f(out.temp_path());
      f << j.dump(2) << "\n";
      if (!f) return fail(io_error("cannot write " + output));
    }
    if (Status st = out.commit(); !st) return fail(st);
  }
  if (mo.json) {
    print_json(j);
    return kOk;
  }
  for (const auto& op : r->ops) {
    std::printf("%s: %.1f ms (%.2f ms/frame), %.3f TFLOP, %.1f GFLOP/s, peak %.0f MiB\n",
                op.op.c_str(), op.total_ms, op.ms_per_frame, op.tflop, op.tflops_per_s * 1000,
                mib(op.peak_bytes));
  }
  for (const auto& s : r->stages) {
    std::printf("  %-7s %-28s %9.1f ms %9.2f GFLOP %8.1f GFLOP/s\n", s.op.c_str(), s.stage.c_str(),
                s.ms, s.gflop, s.ms > 0 ? s.gflop / (s.ms / 1000) : 0.0);
  }
  return kOk;
}

int cmd_make_weights(const std::string& which, uint64_t seed, const std::string& dtype_s,
                     const std::string& output) {
  const VaeConfig cfg = which == "real" ? VaeConfig::real() : VaeConfig::tiny();
  if (seed == 0) seed = which == "real" ? kRealSeed : kTinySeed;
  const auto dtype = dtype_from_name(dtype_s);
  if (!dtype || *dtype == DType::kF64) return fail(invalid_argument("--dtype must be fp16, bf16 or fp32"));
  const VaeWeights w = synthesize_weights(cfg, seed);
  if (Status s = save_weights(output, w, *dtype, {{"seedvae.seed", std::to_string(seed)}}); !s) {
    return fail(s);
  }
  std::cout << "wrote " << output << ": " << cfg.to_string() << ", " << w.parameter_count()
            << " parameters, fp16 digest " << fp16_digest(w) << "\n";
  return kOk;
}

}  // namespace
}  // namespace seedvae::app

int main(int argc, char** argv) {
  using namespace seedvae;
  using namespace seedvae::app;
  std::signal(SIGINT, on_sigint);

  CLI::App app{"seedvae " SEEDVAE_VERSION ": encode, decode and verify with the SeedVR2 video VAE",
               "seedvae"};
  app.footer(kExitCodes);
  app.require_subcommand(1);
  app.set_version_flag("--version", [] {  // CLI11 adds the final newline
    std::string v = version_report("seedvae");
    if (!v.empty() && v.back() == '\n') v.pop_back();
    return v;
  });

  // info
  std::vector<std::string> info_paths;
  bool info_json = false;
  auto* info = app.add_subcommand("info", "describe checkpoints, videos and compute devices");
  info->add_option("paths", info_paths, "checkpoint (.safetensors) or video files");
  info->add_flag("--json", info_json, "machine-readable output");

  // verify
  VerifyOptions vopt;
  BackendRequest vbackend;
  std::string vweights;
  bool vjson = false, vquiet = false, inputs_only = false, no_inter = false;
  auto* verify = app.add_subcommand("verify", "compare the engine with reference tensors");
  verify->add_option("--reference", vopt.reference_dir, "folder laid out like shared/golden")
      ->required()
      ->check(CLI::ExistingDirectory);
  verify->add_option("--config", vopt.configs, "configuration(s) to check (default: all)");
  verify->add_option("--only", vopt.only, "check only tensors whose name contains this");
  verify->add_option("--tolerance", vopt.tolerance, "max abs error bound")->check(CLI::PositiveNumber);
  verify->add_option("--weights", vweights, "use these weights instead of the folder's/synthetic")
      ->check(CLI::ExistingFile);
  verify->add_flag("--inputs-only", inputs_only, "check inputs and weights, do not run the model");
  verify->add_flag("--no-intermediates", no_inter, "skip per-block intermediates");
  verify->add_option("--backend", vbackend.name, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  verify->add_option("--threads", vbackend.threads, "CPU threads (0: all)");
  add_backend_options(verify, vbackend);
  verify->add_flag("--json", vjson, "machine-readable output");
  verify->add_flag("--quiet,-q", vquiet, "no progress on stderr");

  // make-weights
  std::string mw_which = "tiny", mw_dtype = "fp16", mw_out;
  uint64_t mw_seed = 0;
  auto* mw = app.add_subcommand("make-weights", "write the synthetic (portable recipe) weights");
  mw->add_option("--synthetic", mw_which, "configuration")->check(CLI::IsMember({"tiny", "real"}));
  mw->add_option("--seed", mw_seed, "seed (default: the golden data's)");
  mw->add_option("--dtype", mw_dtype, "fp16, bf16 or fp32");
  mw->add_option("-o,--output", mw_out, "output .safetensors")->required();

#ifdef SEEDVAE_HAVE_MEDIA
  ModelOptions enc_mo, dec_mo, rt_mo;
  VideoOptions enc_vo, rt_vo;
  std::string enc_out, dec_in, dec_out, rt_out;
  bool enc_sample = false, enc_dit = false;
  uint64_t enc_seed = 0;
  double dec_fps = 0;
  auto* enc = app.add_subcommand("encode", "encode a video into a latent (.safetensors)");
  enc_vo.add_to(enc, true);
  enc_mo.add_to(enc);
  enc->add_option("-o,--output", enc_out, "output latent .safetensors")->required();
  enc->add_flag("--sample", enc_sample, "sample mean + std * noise (official SeedVR2) instead of the mean");
  enc->add_option("--seed", enc_seed, "noise seed for --sample");
  enc->add_flag("--dit", enc_dit, "write DiT-space latents (x 0.9152)");

  auto* dec = app.add_subcommand("decode", "decode a latent (.safetensors) into a video");
  dec->add_option("latent", dec_in, "latent written by `seedvae encode`")->required()->check(CLI::ExistingFile);
  dec_mo.add_to(dec);
  dec->add_option("-o,--output", dec_out, "output video (.mp4/.avi/.mkv) or PNG directory")->required();
  dec->add_option("--fps", dec_fps, "frame rate of the output (default: from the latent)");

  auto* rt = app.add_subcommand("roundtrip", "encode and decode a video; report PSNR/SSIM, time, memory");
  rt_vo.add_to(rt, true);
  rt_mo.add_to(rt);
  rt->add_option("-o,--output", rt_out, "write the reconstruction (.mp4/.avi/.mkv or PNG directory)");
#endif

  ModelOptions bench_mo;
  BenchOptions bench_o;
  std::string bench_size, bench_out;
  auto* bench = app.add_subcommand("bench", "measure encode/decode time, FLOP rate and memory per stage");
  bench_mo.add_to(bench);
  bench->add_option("--size", bench_size, "frame size WxH (default 256x256)");
  bench->add_option("--frames", bench_o.frames, "frames (4n+1, default 17)");
  bench->add_option("--repeats", bench_o.repeats, "measured runs (median)")->check(CLI::Range(1, 1000));
  bench->add_option("--warmup", bench_o.warmup, "unmeasured runs first")->check(CLI::Range(0, 100));
  bench->add_option("--output", bench_out, "also write the JSON report to this file");
  bool bench_no_encode = false, bench_no_decode = false;
  bench->add_flag("--no-encode", bench_no_encode, "skip the encoder");
  bench->add_flag("--no-decode", bench_no_decode, "skip the decoder");

  ModelOptions plan_mo;
  PlanCli plan_c;
  auto* planc = app.add_subcommand("plan", "predict memory and time of a tiling plan without running it");
  planc->add_option("--op", plan_c.op, "decode or encode")->check(CLI::IsMember({"decode", "encode"}));
  planc->add_option("--size", plan_c.size, "frame size WxH in pixels (default 1920x1080)");
  planc->add_option("--frames", plan_c.frames, "frames (4n+1)");
  planc->add_option("--config", plan_c.config, "tiny or real (default)")->check(CLI::IsMember({"tiny", "real"}));
  planc->add_option("--weights", plan_c.weights, "take the configuration from this checkpoint")
      ->check(CLI::ExistingFile);
  planc->add_option("--precision", plan_c.precision, "fp32, tf32, fp16 or bf16 (bytes per element)")
      ->check(CLI::IsMember({"fp32", "tf32", "fp16", "bf16"}));
  planc->add_option("--device", plan_c.backend, "memory model: cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  planc->add_option("--tiling", plan_mo.tiling, "off, blend or exact")->check(CLI::IsMember({"off", "blend", "exact"}));
  planc->add_option("--tile", plan_mo.tile, "tile WxH (default: the largest that fits the budget)");
  planc->add_option("--overlap", plan_mo.overlap, "blend overlap WxH");
  planc->add_option("--budget-gb", plan_mo.budget_gb, "memory budget in GiB")->check(CLI::NonNegativeNumber);
  planc->add_option("--chunk", plan_mo.chunk, "latent frames per temporal chunk");
  planc->add_option("--hires-chunk", plan_mo.hires_chunk,
                    "chunked upsampling: high-resolution stages N frames at a time (0 = off)")
      ->check(CLI::Range(0, 1 << 20));
  planc->add_flag("--json", plan_mo.json, "machine-readable output");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : kUsage;
  }

  if (info->parsed()) return cmd_info(info_paths, info_json);
  if (verify->parsed()) {
    if (!vweights.empty()) vopt.weights = vweights;
    vopt.run_model = !inputs_only;
    vopt.intermediates = !no_inter;
    vopt.precision = vbackend.precision;
    return cmd_verify(vopt, vbackend, vjson, vquiet);
  }
  if (mw->parsed()) return cmd_make_weights(mw_which, mw_seed, mw_dtype, mw_out);
  if (planc->parsed()) return cmd_plan(plan_c, plan_mo);
  if (bench->parsed()) {
    bench_o.encode = !bench_no_encode;
    bench_o.decode = !bench_no_decode;
    return cmd_bench(bench_mo, bench_o, bench_size, bench_out);
  }
#ifdef SEEDVAE_HAVE_MEDIA
  if (enc->parsed()) return cmd_encode(enc_vo, enc_mo, enc_out, enc_sample, enc_seed, enc_dit);
  if (dec->parsed()) return cmd_decode(dec_in, dec_mo, dec_out, dec_fps);
  if (rt->parsed()) return cmd_roundtrip(rt_vo, rt_mo, rt_out);
#endif
  return kUsage;
}
