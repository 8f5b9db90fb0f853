// seedvae: the headless command-line tool. Every subcommand maps errors to an exit code (see
// kExitCodes) and prints progress on stderr; --json makes stdout machine-readable. The engine
// and model options come from the run options table (app/run_options_cli.h); encode, decode and
// the round trip run as jobs of the job layer (core/pipeline/job.h).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "app/backends.h"
#include "app/run_options_cli.h"
#include "core/base/atomic_file.h"
#include "core/base/cancel.h"
#include "core/base/process_memory.h"
#include "core/base/progress.h"
#include "core/io/output_path.h"
#include "core/io/safetensors.h"
#include "core/io/tensor_file.h"
#include "core/media/video_io.h"
#include "core/pipeline/bench.h"
#include "core/pipeline/job.h"
#include "core/pipeline/job_progress.h"
#include "core/pipeline/job_queue.h"
#include "core/pipeline/prediction.h"
#include "core/pipeline/verify.h"
#include "core/schedule/planner.h"
#include "core/schedule/seam_metrics.h"
#include "core/vae/state_dict.h"
#include "core/vae/wan_config.h"
#include "core/vae/wan_model.h"
#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>
#else
#include <io.h>
#define isatty _isatty
#endif

namespace seedvae::app {
namespace {

using Json = nlohmann::json;

constexpr const char* kExitCodes =
    "Exit codes: 0 success; 1 verification failed (queue run: a job failed); 2 bad command line; 3 "
    "bad input (unreadable,\n"
    "malformed or mismatched file); 4 out of memory; 5 device error; 6 unsupported in this build;\n"
    "7 I/O error writing output; 70 internal error; 130, 143, 129 cancelled by SIGINT (Ctrl-C),\n"
    "SIGTERM, SIGHUP (a second signal ends the process at once).";

enum Exit {
  kOk = 0,
  kVerifyFailed = 1,
  kUsage = 2,
  kBadInput = 3,
  kOom = 4,
  kDevice = 5,
  kUnsupported = 6,
  kIo = 7,
  kInternal = 70,
  kCancelled = 130
};

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

std::atomic<int> g_signal{0};  // the termination signal received, 0 if none

int fail(const Status& s) {
  std::cerr << "seedvae: " << s.to_string() << "\n";
  if (s.code() == StatusCode::kCancelled && g_signal != 0) return 128 + g_signal;
  return exit_code(s);
}

CancelToken g_cancel;

#if defined(__unix__) || defined(__APPLE__)
// SIGINT, SIGTERM and SIGHUP are blocked in every thread and taken by one thread with sigwait(),
// outside signal-handler context: the first cancels the job (it stops within one chunk or tile,
// and every temporary file is removed as the stack unwinds; the exit code is then 128 + the
// signal); a second ends the process at once, after removing the temporaries still alive.
void handle_termination_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before any other thread exists: they inherit it
  std::thread([set] {
    for (;;) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) continue;
      int none = 0;
      if (g_signal.compare_exchange_strong(none, sig)) {
        g_cancel.request();
        continue;
      }
      remove_live_temporaries();
      std::fprintf(stderr, "seedvae: terminated by a second signal\n");
      std::_Exit(128 + sig);
    }
  }).detach();
}
#else
extern "C" void on_sigint(int) {
  g_signal = SIGINT;
  g_cancel.request();
}
void handle_termination_signals() {
  std::signal(SIGINT, on_sigint);
}
#endif

// Prints "decode 3/5" on stderr: one updating line on a terminal, one line per report otherwise;
// silent with --quiet.
class StderrProgress final : public ProgressSink {
 public:
  explicit StderrProgress(bool quiet) : quiet_(quiet), tty_(isatty(2) != 0) {}
  void report(std::string_view stage, int64_t done, int64_t total) override {
    if (quiet_) return;
    // The phase's remaining time at its recent pace.
    const double left =
        etas_[std::string(stage)].update(static_cast<double>(done), static_cast<double>(total));
    std::string eta;
    if (left >= 0 && done < total) {
      char t[48];
      std::snprintf(t, sizeof t, ", ETA %d:%02d", static_cast<int>(left) / 60,
                    static_cast<int>(left) % 60);
      eta = t;
    }
    std::fprintf(stderr, "%s%.*s %lld/%lld%s%s", tty_ ? "\r" : "", static_cast<int>(stage.size()),
                 stage.data(), static_cast<long long>(done), static_cast<long long>(total),
                 eta.c_str(), !tty_ || done == total ? "\n" : "   ");
    std::fflush(stderr);
  }

 private:
  bool quiet_;
  bool tty_;
  std::map<std::string, EtaEstimator> etas_;
};

double mib(int64_t b) {
  return static_cast<double>(b) / (1 << 20);
}

void print_json(const Json& j) {
  std::cout << j.dump(2) << "\n";
}

// ---- what every model command takes besides the run options ------------------------------
struct ModelArgs {
  std::string weights;
  std::string synthetic;  // synthetic_weight_names()
  bool quiet = false;
  bool json = false;
  RunOptions run;

  void add_to(CLI::App* c, std::initializer_list<OptionGroup> groups) {
    auto* w = c->add_option("--weights", weights,
                            "VAE checkpoint: SeedVR2, Wan2.1 or Wan2.2 (.safetensors or .pth; "
                            "fp16, bf16 or fp32; the family is recognised from the tensors)")
                  ->check(CLI::ExistingFile);
    c->add_option("--synthetic", synthetic,
                  "use the portable synthetic weights of a configuration instead of a file "
                  "(tiny and real: SeedVR2; wan21-* and wan22-*: the Wan VAEs; default: the "
                  "demo model when installed or $SEEDVAE_DEMO_WEIGHTS is set, else tiny)")
        ->check(CLI::IsMember(synthetic_weight_names()))
        ->excludes(w);
    c->add_flag("--quiet,-q", quiet, "no progress on stderr");
    c->add_flag("--json", json, "machine-readable output on stdout");
    add_run_options(c, run, groups);
  }

  Result<std::shared_ptr<const VaeWeights>> load() const {
    auto shared = [](VaeWeights w) { return std::make_shared<const VaeWeights>(std::move(w)); };
    if (!weights.empty()) {
      SEEDVAE_ASSIGN_OR_RETURN(VaeWeights w, load_weights(weights));
      return shared(std::move(w));
    }
    if (synthetic.empty()) {  // the built-in default: the trained demo model when present
      if (const auto demo = find_demo_weights(executable_dir()); !demo.empty()) {
        SEEDVAE_ASSIGN_OR_RETURN(VaeWeights w, load_weights(demo));
        return shared(std::move(w));
      }
    }
    SEEDVAE_ASSIGN_OR_RETURN(VaeWeights w,
                             synthetic_weights(synthetic.empty() ? "tiny" : synthetic));
    return shared(std::move(w));
  }
};

// ---- the input of encode and roundtrip ----------------------------------------------------

std::optional<long long> whole_number(const std::string& t) {
  long long v = 0;
  const auto r = std::from_chars(t.data(), t.data() + t.size(), v);
  if (r.ec != std::errc() || r.ptr != t.data() + t.size() || t.empty()) return std::nullopt;
  return v;
}

// A whole number of at least `min` (CLI11's own range checks print the limits of a double).
CLI::Validator at_least(long long min, const std::string& meaning) {
  return CLI::Validator(
      [min, meaning](std::string& t) -> std::string {
        const auto v = whole_number(t);
        if (v && *v >= min) return {};
        return "must be a whole number of at least " + std::to_string(min) + " (" + meaning +
               "), got " + t;
      },
      "", "at least " + std::to_string(min));
}

// An existing file or directory, or a printf frame pattern (frames/%05d.png) whose files the
// reader finds.
CLI::Validator existing_path_or_pattern() {
  return CLI::Validator(
      [](std::string& t) -> std::string {
        std::error_code ec;
        if (std::filesystem::exists(t, ec) || media::is_frame_pattern(t)) return {};
        return "no such file, directory or frame pattern: " + t;
      },
      "", "PATH");
}
struct InputArgs {
  std::string input;
  bool sample_clip = false;
  int64_t first = 0;
  int64_t frames = -1;
  int stride = 1;
  std::string size;  // "WxH" resize

  void add_to(CLI::App* c) {
    auto* in = c->add_option("video", input, "input video, image sequence directory or pattern");
    c->add_flag("--sample-clip", sample_clip,
                "use the built-in synthetic sample clip instead of a file")
        ->excludes(in);
    in->check(existing_path_or_pattern());
    c->add_option("--first", first, "first frame to read")
        ->check(at_least(0, "the index of the first frame to read, from 0"));
    c->add_option("--frames", frames, "number of frames to read (-1: all)")
        ->check(CLI::Validator(
            [](std::string& t) -> std::string {
              const auto v = whole_number(t);
              return v && (*v == -1 || *v >= 1)
                         ? std::string()
                         : "must be -1 (all frames) or a number of frames of at least 1, got " + t;
            },
            "", "frames"));
    c->add_option("--stride", stride, "read every n-th frame")
        ->check(at_least(1, "read every n-th frame; 1 reads every frame"));
    c->add_option("--size", size, "resize frames to WxH before encoding (the sample clip's size)");
  }

  Result<JobInput> job_input() const {
    JobInput in;
    int w = 0, h = 0;
    if (!size.empty()) {
      SEEDVAE_ASSIGN_OR_RETURN(const PixelSize s, PixelSize::parse(size));
      w = static_cast<int>(s.width);
      h = static_cast<int>(s.height);
    }
    if (sample_clip || input.empty()) {
      in.sample_width = w > 0 ? w : 256;
      in.sample_height = h > 0 ? h : 256;
      in.sample_frames = frames > 0 ? static_cast<int>(frames) : 17;
      return in;
    }
    in.path = input;
    in.first_frame = first;
    in.max_frames = frames;
    in.stride = stride;
    in.resize_width = w;
    in.resize_height = h;
    return in;
  }
};

// ---- running a job ----------------------------------------------------------------------------

Result<JobResult> run_job(JobSpec job, const ModelArgs& mo) {
  StderrProgress progress(mo.quiet);
  job.options = mo.run;
  SEEDVAE_ASSIGN_OR_RETURN(job.weights, mo.load());
  if (!mo.quiet) {
    std::cerr << "weights: " << job.weights->source << " (" << job.weights->describe() << ", "
              << job.weights->parameter_count() << " parameters)\n";
  }
  Session session(make_backend);
  JobCallbacks cb;
  cb.cancel = &g_cancel;
  cb.progress = &progress;
  JobResult r;
  if (std::string why; !mo.quiet && resumable(job, &why)) {
    if (auto at = checkpoint_frame(job.output); at && !job.restart) {
      std::cerr << "resuming from the checkpoint in " << checkpoint_dir(job.output).string()
                << " at frame " << *at << "\n";
    }
  }
  const Status st = session.run(job, cb, r);
  if (!st) {
    if (st.code() == StatusCode::kCancelled && checkpoint_frame(job.output)) {
      std::cerr << "seedvae: stopped; the job resumes from frame " << *checkpoint_frame(job.output)
                << " when run again (--restart starts over)\n";
    }
    return st;
  }
  if (!mo.quiet) {
    std::cerr << "backend: " << r.backend_name << "\n";
    if (!r.plan_note.empty()) std::cerr << "plan: " << r.plan_note << "\n";
    for (const JobResult::DeviceShare& d : r.device_shares) {
      std::cerr << "device " << d.backend << ": " << d.share << ", busy "
                << static_cast<int64_t>(d.busy_ms) << " ms, peak "
                << static_cast<int64_t>(mib(d.memory.peak_bytes)) << " MiB live\n";
    }
  }
  for (const std::string& w : r.warnings) std::cerr << "seedvae: warning: " << w << "\n";
  return r;
}

// The read / prefetch part of the --json reports.
void add_read_json(Json& j, const JobResult& r) {
  j["warnings"] = r.warnings;
  j["prefetch"] = r.prefetch;
  j["read_seconds"] = r.read_s;
  j["read_wait_seconds"] = r.read_wait_s;
  j["read_engine_seconds"] = r.read_engine_s;
  j["read_overlapped_seconds"] = r.read_overlap_s();
  j["read_encode_seconds"] = r.read_wait_s + r.encode_s;
  j["metrics_seconds"] = r.metrics_s;
  j["write_seconds"] = r.write_s;
  j["sink_wait_seconds"] = r.sink_wait_s;
  j["checkpoint_seconds"] = r.checkpoint_s;
  j["total_seconds"] = r.total_s;
}

// ---- info -----------------------------------------------------------------------------------
int cmd_info(const std::vector<std::string>& paths, bool json) {
  Json out = Json::object();
  int rc = kOk;
  for (const auto& p : paths) {
    const std::filesystem::path path(p);
    Json item{{"path", p}};
    const std::string ext = path.extension().string();
    if (ext == ".safetensors" || ext == ".pt" || ext == ".pth" || ext == ".ckpt") {
      auto opened = open_tensor_file(path);  // safetensors or a torch.save .pth, by content
      if (!opened) {
        item["error"] = opened.status().to_string();
        rc = exit_code(opened.status());
      } else {
        const TensorFile& file = **opened;
        item["container"] = std::string(file.container());
        item["tensors"] = file.names().size();
        item["bytes"] = file.file_size();
        auto id = identify_checkpoint(file);
        if (id) {
          item["kind"] = "vae_checkpoint";
          item["family"] = std::string(family_name(id->family));
          item["config"] = id->wan ? id->wan->to_string() : id->seedvr2->to_string();
          item["parameters"] = id->parameters;
          item["dtype"] = std::string(dtype_name(id->dtype));
          if (id->mixed_dtypes) item["mixed_dtypes"] = true;
          if (id->wan) {
            item["latent_channels"] = id->wan->z_dim;
            item["compression"] = std::to_string(id->wan->temporal_factor()) + "x" +
                                  std::to_string(id->wan->spatial_factor()) + "x" +
                                  std::to_string(id->wan->spatial_factor());
            item["note"] =
                "encode, decode, roundtrip and bench run it; its untiled runs are predicted and "
                "fitted to a budget (the automatic schedule), while plan and the tile search "
                "model SeedVR2 only";
          }
          if (auto sha = sha256_file(path)) item["sha256"] = *sha;
        } else {
          item["kind"] = "tensors";
          item["not_a_vae"] = id.status().message();
          for (const auto& n : file.names()) {
            auto v = file.get(n);
            item["shapes"][n] = v->shape.dims();
          }
        }
        if (!file.metadata().empty()) item["metadata"] = file.metadata();
      }
    } else {
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
        item["bit_depth"] = info->bit_depth;
        if (info->source_kind == "video") {
          item["codec"] = info->codec;
          item["rotation"] = info->rotation;
          item["audio_streams"] = info->audio_streams;
        }
      }
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
int cmd_verify(VerifyOptions opt, const RunOptions& run, bool json, bool quiet) {
  opt.run = run;
  auto backend = make_backend(run);
  if (!backend) return fail(backend.status());
  if (!quiet) std::cerr << "backend: " << (*backend)->name() << "\n";
  auto print_row = [&](const VerifyRow& r) {
    if (json) return;
    std::printf("%-6s %-5s %-40s max_abs %.3e  rms %.3e  tol %.1e  margin %s  %6.2fs  %s\n",
                r.config.c_str(), r.status.c_str(), r.tensor.c_str(), r.max_abs, r.rms, r.tolerance,
                margin_text(r).c_str(), r.seconds, r.note.c_str());
    std::fflush(stdout);
  };
  auto report = run_verify(**backend, opt, print_row, &g_cancel);
  if (!report) return fail(report.status());
  if (json) {
    Json j;
    for (const auto& r : report->rows) {
      j["rows"].push_back(Json::parse(verify_row_json(r)));
    }
    j["passed"] = report->passed();
    j["failed"] = report->failed();
    j["skipped"] = report->skipped();
    if (const VerifyRow* w = report->worst())
      j["worst_margin"] = {{"tensor", w->config + " " + w->tensor}, {"margin", w->margin()}};
    print_json(j);
  } else {
    std::printf("verify: %d passed, %d failed, %d skipped%s\n", report->passed(), report->failed(),
                report->skipped(), worst_margin_text(*report).c_str());
  }
  return report->failed() ? kVerifyFailed : kOk;
}

// ---- encode / decode / roundtrip -------------------------------------------------------------
int cmd_encode(const InputArgs& in, const ModelArgs& mo, const std::string& output, bool sample,
               uint64_t seed, bool dit, bool raw) {
  JobSpec job;
  job.kind = JobKind::kEncode;
  auto input = in.job_input();
  if (!input) return fail(input.status());
  job.input = *input;
  job.sample_latent = sample;
  job.seed = seed;
  job.dit_latent = dit;
  job.raw_latent = raw;
  job.output = output;
  auto r = run_job(std::move(job), mo);
  if (!r) return fail(r.status());
  Json j{{"output", output},
         {"latent_shape", r->latent.shape().dims()},
         {"encode_seconds", r->encode_s},
         {"ms_per_frame", r->ms_per_frame()},
         {"peak_backend_mib", mib(r->peak_bytes)},
         {"peak_rss_mib", mib(peak_rss_bytes())}};
  add_read_json(j, *r);
  if (mo.json) {
    print_json(j);
  } else {
    std::cout << "wrote " << output << " latent " << r->latent.shape().to_string() << " in "
              << r->encode_s << " s\n";
  }
  return kOk;
}

int cmd_decode(const std::string& input, const ModelArgs& mo, const std::string& output,
               double fps_override, bool restart) {
  JobSpec job;
  job.kind = JobKind::kDecode;
  job.restart = restart;
  if (Status st = read_decode_latent(input, job); !st) return fail(st);
  if (fps_override > 0) job.latent_fps = fps_override;
  job.output = output;
  auto r = run_job(std::move(job), mo);
  if (!r) return fail(r.status());
  const int64_t frames = r->plan.frames;
  const Json j{{"output", output},
               {"frames", frames},
               {"decode_seconds", r->decode_s},
               {"ms_per_frame", r->ms_per_frame()},
               {"peak_backend_mib", mib(r->peak_bytes)},
               {"warnings", r->warnings},
               {"checkpointed", r->checkpointed},
               {"resumed_at_frame", r->resumed_at_frame}};
  if (mo.json) {
    print_json(j);
  } else {
    std::cout << "wrote " << output << " (" << frames << " frames) in " << r->decode_s << " s\n";
  }
  return kOk;
}

int cmd_roundtrip(const InputArgs& in, const ModelArgs& mo, const std::string& output,
                  bool restart) {
  JobSpec job;
  job.kind = JobKind::kRoundTrip;
  job.restart = restart;
  auto input = in.job_input();
  if (!input) return fail(input.status());
  job.input = *input;
  job.output = output;
  auto r = run_job(std::move(job), mo);
  if (!r) return fail(r.status());
  if (!r->quality) return fail(internal_error("the round trip measured no quality"));
  Json seams;
  if (r->seams) seams = Json::parse(seam_metrics_json(*r->seams));
  Json j{{"input", in.sample_clip || in.input.empty() ? "sample clip" : in.input},
         {"output", output},
         {"frames", r->plan.frames},
         {"width", r->plan.width},
         {"height", r->plan.height},
         {"weights", r->weights_source},
         {"backend", r->backend_name},
         {"chunk_latents", mo.run.chunk_latents},
         {"async_tiles", r->async_tiles},
         {"settings", describe(mo.run)},
         {"psnr_db", r->quality->psnr_db},
         {"ssim", r->quality->ssim},
         {"encode_seconds", r->encode_s},
         {"decode_seconds", r->decode_s},
         {"ms_per_frame", r->ms_per_frame()},
         {"peak_backend_mib", mib(r->peak_bytes)},
         {"peak_rss_mib", mib(peak_rss_bytes())},
         {"tiling", mo.run.tiling},
         {"checkpointed", r->checkpointed},
         {"resumed_at_frame", r->resumed_at_frame}};
  if (!seams.is_null()) j["decode_seams"] = seams;
  add_read_json(j, *r);
  if (mo.json) {
    print_json(j);
    return kOk;
  }
  if (!seams.is_null()) {
    std::printf("decode tiling %s: %zu tiles, seam energy %.3f (1.0 = no visible seams)\n",
                mo.run.tiling.c_str(), r->tiles.rects.size(), seams.value("seam_energy", 0.0));
  }
  std::printf("round trip of %lld frames %lldx%lld: PSNR %.2f dB, SSIM %.4f\n",
              static_cast<long long>(r->plan.frames), static_cast<long long>(r->plan.width),
              static_cast<long long>(r->plan.height), r->quality->psnr_db, r->quality->ssim);
  std::printf(
      "time: encode %.2f s + decode %.2f s = %.1f ms/frame; peak memory: engine %.0f "
      "MiB, process %.0f MiB\n",
      r->encode_s, r->decode_s, r->ms_per_frame(), mib(r->peak_bytes), mib(peak_rss_bytes()));
  std::printf("read: %.2f s%s\n", r->read_s,
              r->prefetch ? (" on the prefetch thread, " + std::to_string(r->read_wait_s) +
                             " s of it waited for")
                                .c_str()
                          : " on the engine thread as it encoded (no prefetch)");
  if (!output.empty()) std::printf("wrote %s\n", output.c_str());
  return kOk;
}

// ---- queue -----------------------------------------------------------------------------------

std::filesystem::path queue_file(const std::string& given) {
  return given.empty() ? JobQueue::default_path() : std::filesystem::path(given);
}

Json queued_json(const QueuedJob& j) {
  return Json{{"id", j.id},
              {"kind", std::string(queued_kind_name(j.kind))},
              {"state", std::string(queue_state_name(j.state))},
              {"input", j.input.empty() ? "sample clip" : j.input},
              {"output", j.output},
              {"weights", j.weights.empty() ? "default" : j.weights},
              {"settings", describe(j.options)},
              {"message", j.message},
              {"phase", j.phase},
              {"progress", j.progress},
              {"eta_seconds", j.eta_s},
              {"frames", j.frames},
              {"seconds", j.seconds},
              {"ms_per_frame", j.ms_per_frame},
              {"peak_backend_mib", mib(j.peak_bytes)},
              {"psnr_db", j.psnr_db},
              {"ssim", j.ssim},
              {"resumed_at_frame", j.resumed_at_frame}};
}

// `queue add`: the job's settings are the preset file's (--settings), with the run options given on
// the command line over them. A round trip of the input, or with `latent` a decode of that file.
int cmd_queue_add(CLI::App* sub, const InputArgs& in, const ModelArgs& mo,
                  const std::string& preset, const std::string& output, const std::string& latent,
                  const std::string& qfile) {
  auto input = in.job_input();
  if (!input) return fail(input.status());
  QueuedJob job;
  job.options = mo.run;
  if (!preset.empty()) {
    std::ifstream f(preset);
    if (!f) return fail(not_found("cannot read the preset " + preset));
    std::stringstream text;
    text << f.rdbuf();
    std::vector<std::string> warnings;
    job.options = run_options_from_json(text.str(), &warnings);
    for (const std::string& w : warnings)
      std::cerr << "seedvae: warning: " << preset << ": " << w << "\n";
    for (const OptionSpec& spec : run_option_table()) {
      const bool given =
          sub->count(std::string(spec.flag)) > 0 ||
          (!spec.negative_flag.empty() && sub->count(std::string(spec.negative_flag)) > 0);
      if (given) {
        if (Status st = set_option(job.options, spec, option_value(mo.run, spec)); !st)
          return fail(st);
      }
    }
  }
  if (Status st = validate(job.options); !st) return fail(st);
  std::error_code ec;
  if (!latent.empty()) {
    job.kind = JobKind::kDecode;
    job.input = std::filesystem::absolute(latent, ec).string();
  } else if (!input->is_sample()) {
    job.input = std::filesystem::absolute(input->path, ec).string();
  }
  if (!output.empty()) job.output = std::filesystem::absolute(output, ec).string();
  job.first_frame = input->first_frame;
  job.max_frames = input->max_frames;
  job.stride = input->stride;
  job.resize_width = input->resize_width;
  job.resize_height = input->resize_height;
  job.sample_width = input->sample_width;
  job.sample_height = input->sample_height;
  job.sample_frames = input->sample_frames;
  if (!mo.weights.empty()) {
    job.weights = std::filesystem::absolute(mo.weights, ec).string();
  } else if (!mo.synthetic.empty()) {
    job.weights = "synthetic:" + mo.synthetic;
  }
  // The latent's and the output's checks now, so that a job that cannot run fails when added,
  // not hours later.
  if (Status st = check_queued_job(job); !st) return fail(st);
  int64_t id = 0;
  const auto path = queue_file(qfile);
  if (Status st = JobQueue::update(path,
                                   [&](JobQueue& q) {
                                     id = q.add(job);
                                     return Status::ok();
                                   });
      !st) {
    return fail(st);
  }
  if (mo.json) {
    print_json(Json{{"id", id}, {"queue", path.string()}});
  } else {
    std::cout << "queued job " << id << " in " << path.string() << "\n";
  }
  return kOk;
}

int cmd_queue_list(const std::string& qfile, bool json) {
  auto q = JobQueue::load(queue_file(qfile));
  if (!q) return fail(q.status());
  if (json) {
    Json jobs = Json::array();
    for (const QueuedJob& j : q->jobs()) jobs.push_back(queued_json(j));
    print_json(Json{{"queue", q->path().string()}, {"jobs", jobs}});
    return kOk;
  }
  if (q->jobs().empty()) std::cout << "the queue " << q->path().string() << " is empty\n";
  for (const QueuedJob& j : q->jobs()) {
    std::printf("%3lld  %-9s %s%s -> %s", static_cast<long long>(j.id),
                std::string(queue_state_name(j.state)).c_str(),
                j.kind == JobKind::kDecode ? "decode " : "",
                j.input.empty() ? "sample clip" : j.input.c_str(),
                j.output.empty() ? "(no output)" : j.output.c_str());
    if (j.state == QueueState::kRunning && !j.phase.empty()) {
      std::printf("  [%s %.0f %%", j.phase.c_str(), 100 * j.progress);
      if (j.eta_s >= 0)
        std::printf(", ETA %d:%02d", static_cast<int>(j.eta_s) / 60,
                    static_cast<int>(j.eta_s) % 60);
      std::printf("]");
    }
    if (j.state == QueueState::kDone) {
      std::printf("  %lld frames, %.1f ms/frame, peak %.0f MiB", static_cast<long long>(j.frames),
                  j.ms_per_frame, mib(j.peak_bytes));
      if (j.kind == JobKind::kRoundTrip) std::printf(", PSNR %.2f dB", j.psnr_db);
    }
    if (!j.message.empty()) std::printf("  (%s)", j.message.c_str());
    std::printf("\n");
  }
  return kOk;
}

int cmd_queue_edit(const std::string& qfile, const std::string& what, int64_t id,
                   int64_t position) {
  const Status st = JobQueue::update(queue_file(qfile), [&](JobQueue& q) -> Status {
    if (what == "remove") return q.remove(id);
    if (what == "move") return q.move(id, position);
    if (what == "pause") return q.pause(id);
    return q.resume(id);
  });
  if (!st) return fail(st);
  return kOk;
}

int cmd_queue_run(const std::string& qfile, bool quiet) {
  StderrProgress progress(quiet);
  Session session(make_backend);
  QueueRunHooks hooks;
  hooks.cancel = &g_cancel;
  hooks.progress = &progress;
  hooks.load_weights = [](const std::string& w) -> Result<std::shared_ptr<const VaeWeights>> {
    ModelArgs m;
    if (w.rfind("synthetic:", 0) == 0) {
      m.synthetic = w.substr(10);
    } else {
      m.weights = w;
    }
    return m.load();
  };
  hooks.on_start = [&](const QueuedJob& j) {
    if (!quiet) {
      std::cerr << "job " << j.id << ": " << (j.kind == JobKind::kDecode ? "decode " : "")
                << (j.input.empty() ? "sample clip" : j.input) << " -> "
                << (j.output.empty() ? "(no output)" : j.output) << " (" << describe(j.options)
                << ")\n";
    }
  };
  hooks.on_end = [&](const QueuedJob& j) {
    if (j.state == QueueState::kDone) {
      char quality[64] = "";
      if (j.kind == JobKind::kRoundTrip) {
        std::snprintf(quality, sizeof quality, ", PSNR %.2f dB, SSIM %.4f", j.psnr_db, j.ssim);
      }
      std::printf("job %lld done: %lld frames, %.1f ms/frame, peak %.0f MiB%s%s\n",
                  static_cast<long long>(j.id), static_cast<long long>(j.frames), j.ms_per_frame,
                  mib(j.peak_bytes), quality,
                  j.resumed_at_frame > 0
                      ? (", resumed at frame " + std::to_string(j.resumed_at_frame)).c_str()
                      : "");
    } else {
      std::printf("job %lld %s: %s\n", static_cast<long long>(j.id),
                  std::string(queue_state_name(j.state)).c_str(), j.message.c_str());
    }
    std::fflush(stdout);
  };
  auto ran = run_queue(queue_file(qfile), session, hooks);
  if (!ran) return fail(ran.status());
  if (!quiet) std::cerr << "queue: " << *ran << (*ran == 1 ? " job" : " jobs") << " ran\n";
  // A failed job does not fail the run, but the exit code says one did.
  auto q = JobQueue::load(queue_file(qfile));
  if (q) {
    for (const QueuedJob& j : q->jobs()) {
      if (j.state == QueueState::kFailed) return kVerifyFailed;
    }
  }
  return kOk;
}

// ---- plan -----------------------------------------------------------------------------------
struct PlanArgs {
  std::string op = "decode", size = "1920x1080", config = "real", weights;
  int64_t frames = 17;
};

int cmd_plan(const PlanArgs& pa, const RunOptions& run, bool json) {
  VaeConfig config = pa.config == "tiny" ? VaeConfig::tiny() : VaeConfig::real();
  if (!pa.weights.empty()) {
    auto f = open_tensor_file(pa.weights);
    if (!f) return fail(f.status());
    auto id = identify_checkpoint(**f);
    if (!id) return fail(id.status());
    if (!id->seedvr2) {
      return fail(unsupported(pa.weights + " is a " + id->to_string() +
                              " checkpoint: the planner models SeedVR2 VAEs only for now"));
    }
    config = *id->seedvr2;
  }
  if (Status s = validate(run); !s) return fail(s);
  auto size = PixelSize::parse(pa.size);
  if (!size) return fail(size.status());
  const bool encode = pa.op == "encode";
  PlanRequest req = plan_request(run, config, encode, size->height, size->width, pa.frames);
  req.spec = {run.tile.height, run.tile.width, run.overlap.height, run.overlap.width};
  req.auto_tile = run.tile == PixelSize{} && req.mode != TilingMode::kOff;
  req.chunk_latents = std::max(1, run.chunk_latents);
  req.budget_bytes = budget_bytes(run);
  auto rep = plan(req);
  if (!rep) return fail(rep.status());
  if (json) {
    std::cout << plan_report_json(*rep) << "\n";
  } else {
    std::printf("%s %s %lldx%lldx%lld, %s\n", pa.op.c_str(), config.to_string().c_str(),
                static_cast<long long>(req.width), static_cast<long long>(req.height),
                static_cast<long long>(req.frames), describe(run).c_str());
    std::printf("chosen:  %s\nuntiled: %s\n%s\n", describe(rep->chosen).c_str(),
                describe(rep->untiled).c_str(), rep->message.c_str());
  }
  return rep->fits ? kOk : kOom;
}

// ---- bench ----------------------------------------------------------------------------------

// What bench checks before it allocates or computes: its options, the host memory of its clip,
// and its report's path (not the weights file, its directory writable).
Status check_bench_run(const BenchOptions& bo, const VaeWeights& weights,
                       const std::string& output) {
  SEEDVAE_TRY(validate(bo.run));
  SEEDVAE_TRY(check_host_memory(bo.run, weights, bo.width, bo.height, bo.frames));
  if (output.empty()) return Status::ok();
  std::error_code ec;
  std::vector<PathInput> inputs;
  if (std::filesystem::is_regular_file(weights.source, ec)) {
    inputs.push_back({weights.source, "weights", false});
  }
  return check_output_path(output, inputs);
}
int cmd_bench(const ModelArgs& mo, BenchOptions bo, const std::string& size,
              const std::string& output) {
  if (!size.empty()) {
    auto s = PixelSize::parse(size);
    if (!s) return fail(s.status());
    bo.width = static_cast<int>(s->width);
    bo.height = static_cast<int>(s->height);
  }
  bo.run = mo.run;
  auto weights = mo.load();
  if (!weights) return fail(weights.status());
  if (Status s = check_bench_run(bo, **weights, output); !s) return fail(s);
  if (auto devices = parse_devices(bo.run.devices); devices && !devices->empty()) {
    bo.run.device = devices->front();  // the first of several devices runs the encode
  }
  auto backend = make_backend(bo.run);
  if (!backend) return fail(backend.status());
  // The automatic schedule, as a job chooses it; a new backend when the offload turns on.
  auto remake = choose_bench_schedule(bo, **weights, **backend);
  if (!remake) return fail(remake.status());
  if (!bo.schedule_note.empty() && !mo.quiet) std::cerr << "plan: " << bo.schedule_note << "\n";
  if (*remake) {
    backend->reset();
    backend = make_backend(bo.run);
    if (!backend) return fail(backend.status());
  }
  if (!mo.quiet) {
    std::cerr << "bench: " << (*backend)->name() << ", " << (*weights)->describe() << ", "
              << bo.width << "x" << bo.height << "x" << bo.frames << ", " << describe(bo.run)
              << "\n";
  }
  auto r = run_bench(**backend, **weights, bo, make_backend);
  if (!r) return fail(r.status());
  const std::string j = bench_json(*r, (*weights)->source);
  if (!output.empty()) {
    if (Status st = write_file_atomic(output, j + "\n"); !st) return fail(st);
  }
  if (mo.json) {
    std::cout << j << "\n";
    return kOk;
  }
  for (const auto& op : r->ops) {
    std::printf("%s: %.1f ms (%.2f ms/frame), %.3f TFLOP, %.1f GFLOP/s, peak %.0f MiB live",
                op.op.c_str(), op.total_ms, op.ms_per_frame, op.tflop, op.tflops_per_s * 1000,
                mib(op.peak_bytes));
    if (op.reserved_peak_bytes >= 0)
      std::printf(", %.0f MiB reserved", mib(op.reserved_peak_bytes));
    if (op.device_peak_bytes >= 0) std::printf(", %.0f MiB device", mib(op.device_peak_bytes));
    if (op.host_peak_bytes >= 0) std::printf(", host %.0f MiB", mib(op.host_peak_bytes));
    std::printf(", tiling %s", op.tiling.c_str());
    if (op.tiling != "off") {
      std::printf(" %lldx%lld (%lld tiles)", static_cast<long long>(op.tile_w),
                  static_cast<long long>(op.tile_h), static_cast<long long>(op.tiles));
    }
    std::printf("\n");
    for (const auto& d : op.devices) {
      std::printf("  device %s: units %s, busy %.1f ms, peak %.0f MiB live", d.backend.c_str(),
                  d.units.c_str(), d.busy_ms, mib(d.peak_bytes));
      if (d.device_level_bytes() >= 0) {
        std::printf(", %.0f MiB device level", mib(d.device_level_bytes()));
      }
      std::printf("\n");
    }
  }
  for (const auto& s : r->stages) {
    std::printf("  %-7s %-28s %9.1f ms %9.2f GFLOP %8.1f GFLOP/s\n", s.op.c_str(), s.stage.c_str(),
                s.ms, s.gflop, s.ms > 0 ? s.gflop / (s.ms / 1000) : 0.0);
  }
  return kOk;
}

int cmd_make_weights(const std::string& which, uint64_t seed, const std::string& dtype_s,
                     const std::string& output) {
  const auto dtype = dtype_from_name(dtype_s);
  if (!dtype || *dtype == DType::kF64) {
    return fail(invalid_argument("--dtype must be fp16, bf16 or fp32"));
  }
  if (Status s = check_output_path(output, {}); !s) return fail(s);
  if (which.starts_with("wan")) {
    // "wan21-tiny", "wan22-real", ...: the Wan reference data's configurations and seeds
    const bool v22 = which.starts_with("wan22"), real = which.ends_with("real");
    const WanConfig wc = v22 ? (real ? WanConfig::wan22() : WanConfig::wan22_tiny())
                             : (real ? WanConfig::wan21() : WanConfig::wan21_tiny());
    if (seed == 0) seed = wan_reference_seed(wc.family, real);
    const VaeWeights w = synthesize_wan_weights(wc, seed);
    if (Status s = save_weights(output, w, *dtype, {{"seedvae.seed", std::to_string(seed)}}); !s) {
      return fail(s);
    }
    std::cout << "wrote " << output << ": " << wc.to_string() << ", " << w.parameter_count()
              << " parameters, fp16 digest " << fp16_digest(w) << "\n";
    return kOk;
  }
  const VaeConfig cfg = which == "real" ? VaeConfig::real() : VaeConfig::tiny();
  if (seed == 0) seed = which == "real" ? kRealSeed : kTinySeed;
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

namespace {

int cli_main(int argc, char** argv) {
  using namespace seedvae;
  using namespace seedvae::app;
  handle_termination_signals();

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
  RunOptions vrun;
  std::string vweights;
  bool vjson = false, vquiet = false, inputs_only = false, no_inter = false;
  auto* verify = app.add_subcommand("verify", "compare the engine with reference tensors");
  verify->add_option("--reference", vopt.reference_dir, "folder laid out like shared/golden")
      ->required()
      ->check(CLI::ExistingDirectory);
  verify->add_option("--config", vopt.configs, "configuration(s) to check (default: all)");
  verify->add_option("--only", vopt.only, "check only tensors whose name contains this");
  verify->add_option("--tolerance", vopt.tolerance, "max abs error bound")
      ->check(CLI::PositiveNumber);
  verify->add_option("--weights", vweights, "use these weights instead of the folder's/synthetic")
      ->check(CLI::ExistingFile);
  verify->add_flag("--inputs-only", inputs_only, "check inputs and weights, do not run the model");
  verify->add_flag("--no-intermediates", no_inter, "skip per-block intermediates");
  add_run_options(verify, vrun, {OptionGroup::kEngine, OptionGroup::kCuda});
  verify->add_flag("--json", vjson, "machine-readable output");
  verify->add_flag("--quiet,-q", vquiet, "no progress on stderr");

  // make-weights
  std::string mw_which = "tiny", mw_dtype = "fp16", mw_out;
  uint64_t mw_seed = 0;
  auto* mw = app.add_subcommand("make-weights", "write the synthetic (portable recipe) weights");
  mw->add_option("--synthetic", mw_which,
                 "configuration: SeedVR2 tiny or real, or the Wan reference data's wan21-tiny, "
                 "wan21-real, wan22-tiny, wan22-real")
      ->check(
          CLI::IsMember({"tiny", "real", "wan21-tiny", "wan21-real", "wan22-tiny", "wan22-real"}));
  mw->add_option("--seed", mw_seed, "seed (default: the golden data's)");
  mw->add_option("--dtype", mw_dtype, "fp16, bf16 or fp32");
  mw->add_option("-o,--output", mw_out, "output .safetensors")->required();

  // encode / decode / roundtrip
  ModelArgs enc_mo, dec_mo, rt_mo;
  InputArgs enc_in, rt_in;
  std::string enc_out, dec_in, dec_out, rt_out;
  bool enc_sample = false, enc_dit = false, enc_raw = false;
  uint64_t enc_seed = 0;
  double dec_fps = 0;
  auto* enc = app.add_subcommand("encode", "encode a video into a latent (.safetensors)");
  enc_in.add_to(enc);
  enc_mo.add_to(enc, kEncodeOptionGroups);
  enc->add_option("-o,--output", enc_out, "output latent .safetensors")->required();
  enc->add_flag("--sample", enc_sample,
                "sample mean + std * noise (official SeedVR2) instead of the mean");
  enc->add_option("--seed", enc_seed, "noise seed for --sample");
  enc->add_flag("--dit", enc_dit, "SeedVR2: write DiT-space latents (x 0.9152)");
  enc->add_flag("--raw-latent", enc_raw,
                "Wan: write the raw posterior mean instead of the normalised latent "
                "((mu - mean) / std per channel, as the upstream wrapper returns it)");

  auto* dec = app.add_subcommand("decode", "decode a latent (.safetensors) into a video");
  dec->add_option("latent", dec_in, "latent written by `seedvae encode`")
      ->required()
      ->check(CLI::ExistingFile);
  dec_mo.add_to(dec, {OptionGroup::kEngine, OptionGroup::kCuda, OptionGroup::kStreaming,
                      OptionGroup::kTiling, OptionGroup::kMemory, OptionGroup::kOutput});
  dec->add_option("-o,--output", dec_out,
                  "output video (.mp4/.mov/.mkv/.avi) or image-sequence directory")
      ->required();
  dec->add_option("--fps", dec_fps, "frame rate of the output (default: from the latent)");
  bool dec_restart = false;
  dec->add_flag("--restart", dec_restart,
                "discard a checkpoint of this output (<output>.seedvae-resume) and start over "
                "instead of resuming it");

  auto* rt =
      app.add_subcommand("roundtrip", "encode and decode a video; report PSNR/SSIM, time, memory");
  rt_in.add_to(rt);
  rt_mo.add_to(rt, kAllOptionGroups);
  rt->add_option("-o,--output", rt_out,
                 "write the reconstruction (.mp4/.mov/.mkv/.avi or image-sequence directory); a "
                 "video keeps the input's timestamps, colour description and audio");
  bool rt_restart = false;
  rt->add_flag("--restart", rt_restart,
               "discard a checkpoint of this output (<output>.seedvae-resume) and start over "
               "instead of resuming it");

  // queue
  auto* queue = app.add_subcommand(
      "queue",
      "a queue of round trips run one after another (add, list, run, remove, move, pause, resume)");
  std::string q_file;
  queue->add_option("--queue-file", q_file,
                    "the queue's file (default: $SEEDVAE_QUEUE_FILE, else "
                    "~/.local/share/seedvae/queue.json)");
  queue->require_subcommand(1);
  InputArgs qa_in;
  ModelArgs qa_mo;
  std::string qa_out, qa_preset, qa_latent;
  auto* qadd = queue->add_subcommand(
      "add",
      "queue a round trip (input, weights, settings, output, frames) or a decode (--decode)");
  qa_in.add_to(qadd);
  qa_mo.add_to(qadd, kAllOptionGroups);
  qadd->add_option("-o,--output", qa_out,
                   "the reconstruction or the decoded video (a video file or frame directory)");
  auto* qa_decode = qadd->add_option("--decode", qa_latent,
                                     "queue a decode of this latent (.safetensors, as `seedvae "
                                     "encode` writes it) instead of a round trip");
  qa_decode->check(CLI::ExistingFile);
  for (const char* frames_option :
       {"video", "--sample-clip", "--first", "--frames", "--stride", "--size"}) {
    qa_decode->excludes(qadd->get_option(frames_option));
  }
  qadd->add_option("--settings", qa_preset,
                   "the settings of a preset file (the studio's JSON); run options given here "
                   "override it")
      ->check(CLI::ExistingFile);
  bool ql_json = false;
  auto* qlist = queue->add_subcommand("list", "the jobs, their state, progress, ETA and results");
  qlist->add_flag("--json", ql_json, "machine-readable output");
  bool qr_quiet = false;
  auto* qrun = queue->add_subcommand(
      "run", "run the queued jobs one after another (Ctrl-C stops; the job resumes next time)");
  qrun->add_flag("--quiet,-q", qr_quiet, "no progress on stderr");
  int64_t q_id = 0, q_pos = 0;
  std::map<std::string, CLI::App*> qedits;
  for (const char* e : {"remove", "move", "pause", "resume"}) {
    const std::string name = e;
    const char* help = name == "remove"  ? "remove a job (not the running one)"
                       : name == "move"  ? "move a job to a position (0 = first)"
                       : name == "pause" ? "keep a queued job from running until resumed"
                                         : "queue a paused, failed or cancelled job again";
    CLI::App* c = queue->add_subcommand(name, help);
    c->add_option("id", q_id, "the job's id (queue list)")->required();
    if (name == "move") c->add_option("position", q_pos, "its new position, 0 = first")->required();
    qedits[name] = c;
  }

  // bench
  ModelArgs bench_mo;
  BenchOptions bench_o;
  std::string bench_size, bench_out;
  auto* bench =
      app.add_subcommand("bench", "measure encode/decode time, FLOP rate and memory per stage");
  bench_mo.add_to(bench, {OptionGroup::kEngine, OptionGroup::kCuda, OptionGroup::kStreaming,
                          OptionGroup::kTiling, OptionGroup::kMemory});
  bench->add_option("--size", bench_size, "frame size WxH (default 256x256)");
  bench->add_option("--frames", bench_o.frames, "frames (4n+1, default 17)");
  bench->add_option("--repeats", bench_o.repeats, "measured runs (median)")
      ->check(CLI::Range(1, 1000));
  bench->add_option("--warmup", bench_o.warmup, "unmeasured runs first")->check(CLI::Range(0, 100));
  bench->add_option("--output", bench_out, "also write the JSON report to this file");
  bool bench_no_encode = false, bench_no_decode = false;
  bench->add_flag("--no-encode", bench_no_encode, "skip the encoder");
  bench->add_flag("--no-decode", bench_no_decode, "skip the decoder");

  // plan
  RunOptions plan_run;
  PlanArgs plan_a;
  bool plan_json = false;
  auto* planc =
      app.add_subcommand("plan", "predict memory and time of a tiling plan without running it");
  planc->add_option("--op", plan_a.op, "decode or encode")
      ->check(CLI::IsMember({"decode", "encode"}));
  planc->add_option("--size", plan_a.size, "frame size WxH in pixels (default 1920x1080)");
  planc->add_option("--frames", plan_a.frames, "frames (4n+1)");
  planc->add_option("--config", plan_a.config, "tiny or real (default)")
      ->check(CLI::IsMember({"tiny", "real"}));
  planc->add_option("--weights", plan_a.weights, "take the configuration from this checkpoint")
      ->check(CLI::ExistingFile);
  add_run_options(planc, plan_run,
                  {OptionGroup::kEngine, OptionGroup::kCuda, OptionGroup::kStreaming,
                   OptionGroup::kTiling, OptionGroup::kMemory});
  planc->add_flag("--json", plan_json, "machine-readable output");

  // A first argument that is no option and no subcommand: name it and list the subcommands (CLI11
  // would only say that a subcommand is required).
  const std::vector<CLI::App*> subcommands = app.get_subcommands({});
  if (argc > 1 && argv[1][0] != '-' &&
      std::none_of(subcommands.begin(), subcommands.end(),
                   [&](const CLI::App* c) { return c->check_name(argv[1]); })) {
    std::string names;
    for (const CLI::App* c : subcommands) names += (names.empty() ? "" : ", ") + c->get_name();
    std::cerr << "seedvae: unknown subcommand '" << argv[1] << "'; the subcommands are: " << names
              << "\nRun with --help for more information.\n";
    return kUsage;
  }
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
    return cmd_verify(vopt, vrun, vjson, vquiet);
  }
  if (mw->parsed()) return cmd_make_weights(mw_which, mw_seed, mw_dtype, mw_out);
  if (planc->parsed()) return cmd_plan(plan_a, plan_run, plan_json);
  if (bench->parsed()) {
    bench_o.encode = !bench_no_encode;
    bench_o.decode = !bench_no_decode;
    return cmd_bench(bench_mo, bench_o, bench_size, bench_out);
  }
  if (enc->parsed())
    return cmd_encode(enc_in, enc_mo, enc_out, enc_sample, enc_seed, enc_dit, enc_raw);
  if (dec->parsed()) return cmd_decode(dec_in, dec_mo, dec_out, dec_fps, dec_restart);
  if (rt->parsed()) return cmd_roundtrip(rt_in, rt_mo, rt_out, rt_restart);
  if (queue->parsed()) {
    if (qadd->parsed()) {
      return cmd_queue_add(qadd, qa_in, qa_mo, qa_preset, qa_out, qa_latent, q_file);
    }
    if (qlist->parsed()) return cmd_queue_list(q_file, ql_json);
    if (qrun->parsed()) return cmd_queue_run(q_file, qr_quiet);
    for (const auto& [name, c] : qedits) {
      if (c->parsed()) return cmd_queue_edit(q_file, name, q_id, q_pos);
    }
  }
  return kUsage;
}

}  // namespace

// No exception leaves the program: whatever escapes a command (the engine returns Status values;
// this is the last resort) is reported with its exit code.
int main(int argc, char** argv) {
  using seedvae::app::Exit;
  try {
    return cli_main(argc, argv);
  } catch (const std::bad_alloc&) {
    std::cerr << "seedvae: out of memory: a host allocation failed; use a smaller size, fewer "
                 "frames or tiling\n";
    return Exit::kOom;
  } catch (const std::exception& e) {
    std::cerr << "seedvae: internal error: " << e.what() << "\n";
    return Exit::kInternal;
  } catch (...) {
    std::cerr << "seedvae: internal error: unknown exception\n";
    return Exit::kInternal;
  }
}
