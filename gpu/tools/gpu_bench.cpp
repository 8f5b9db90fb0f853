// seedvae_gpu_bench: the CUDA engine's measurement driver (used by scripts/gpu-run.sh on the GPU
// machine; links only seedvae_core and seedvae_gpu, no Qt, no OpenCV).
//
//   seedvae_gpu_bench rates                       measured device ceilings (bf16 GEMM, copies)
//   seedvae_gpu_bench convprobe [--no-timing]     convolution precisions cuDNN runs here: legacy
//                                                 and graph API, bf16/fp16/fp32 out/FP8, error
//                                                 on a small shape, speed on the decoders' largest
//                                                 shapes (SeedVR2 1080p, Wan2.1 720p)
//   seedvae_gpu_bench verify --reference DIR      golden check in one precision / toggle set
//   seedvae_gpu_bench bench --size WxH ...        core/pipeline/bench on the CUDA backend
//   seedvae_gpu_bench ablate --size WxH ...       each toggle flipped alone from the default:
//                                                 time, peak memory, max abs vs an fp32 reference
//   seedvae_gpu_bench wanbench --family wan2.1|wan2.2 --size WxH --frames N
//                                                 a Wan VAE (real configuration, the reference
//                                                 recipe's weights) end to end: the wrappers'
//                                                 encode and decode, clip on the host in and out;
//                                                 --op-profile: one more run with every op timed;
//                                                 --halo-tile WxH: the decode in halo tiles
//
// Run options (verify, bench): every flag of `seedvae`'s options table (core/pipeline/
// run_options.cpp: --precision, --no-autotune, --offload-state, --cudnn-workspace-mib N,
// --chunk N, --lean-convs, --tiling ..., `seedvae bench --help` lists them), with bf16 as the
// default precision; and the driver's diagnostics --census (what was live at the memory peak)
// and --memory-limit-mib N (reserve at most N MiB, as on a smaller card), --smem-limit-kib N (a
// block's shared memory at most N KiB: 99 picks the kernels an RTX 50xx runs).
// Results are printed and written as JSON (--json).
//
// bench also measures each stage's device time (CUDA events, the stage telemetry's device_ms):
// --stage-device-runs N (default: --repeats; 0: off) more runs of each op with stage telemetry,
// the median over them of each stage's device time summed over the chunks ("device_ms" and
// "device_runs_ms" of each "stages" entry; "wall_ms": the same runs' host time per stage;
// "peak_gib": the largest device-memory peak reached inside the stage).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/backend/op_profile.h"
#include "core/media/metrics.h"
#include "core/pipeline/bench.h"
#include "core/pipeline/run_options.h"
#include "core/pipeline/verify.h"
#include "core/schedule/streaming.h"
#include "core/schedule/tiled.h"
#include "core/schedule/wan_stream.h"
#include "core/vae/state_dict.h"
#include "core/vae/vae_model.h"
#include "core/vae/wan_model.h"
#include "gpu/cuda_backend.h"

using namespace seedvae;
using seedvae::gpu::CudaOptions;
using seedvae::gpu::Precision;
using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::vector<std::string> v;
  bool flag(const std::string& name) const {
    return std::find(v.begin(), v.end(), name) != v.end();
  }
  std::string get(const std::string& name, const std::string& def) const {
    for (size_t i = 0; i + 1 < v.size(); ++i) {
      if (v[i] == name) return v[i + 1];
    }
    return def;
  }
  int geti(const std::string& name, int def) const {
    return std::stoi(get(name, std::to_string(def)));
  }
};

int fail(const Status& s) {
  std::fprintf(stderr, "error: %s\n", s.to_string().c_str());
  return 1;
}

// The run options through the options table, so the driver takes the CLI's flags: "--flag
// VALUE", a switch "--flag" or its "--no-..." form. Backend cuda, default precision bf16; other
// arguments are the driver's own.
Result<RunOptions> run_options_from(const Args& a) {
  RunOptions r;
  r.backend = "cuda";
  r.precision = "bf16";
  for (const OptionSpec& spec : run_option_table()) {
    const std::string flag(spec.flag);
    Result<OptionValue> v = OptionValue(true);
    if (spec.kind == OptionKind::kBool) {
      if (!spec.negative_flag.empty() && a.flag(std::string(spec.negative_flag))) {
        v = OptionValue(false);
      } else if (!a.flag(flag)) {
        continue;
      }
    } else if (a.flag(flag)) {
      v = parse_option_value(spec, a.get(flag, ""));
    } else {
      continue;
    }
    if (!v) return v.status();
    SEEDVAE_TRY(set_option(r, spec, *v));
  }
  SEEDVAE_TRY(validate(r));
  return r;
}

// Refuses a flag that is neither a run option nor one of the driver's own, so that a misspelt
// switch never measures another configuration than the one asked for.
Status check_flags(const Args& a) {
  static const std::set<std::string> own{
      "--census",      "--config",     "--family",           "--frames",
      "--gemm-tflops", "--json",       "--memory-limit-mib", "--leave-free-gib",
      "--no-decode",   "--no-encode",  "--no-intermediates", "--no-timing",
      "--only",        "--op-profile", "--ref-latents",      "--reference",
      "--repeats",     "--size",       "--smem-limit-kib",   "--stage-device-runs",
      "--tolerance",   "--warmup",     "--halo-tile"};
  for (const std::string& arg : a.v) {
    if (arg.rfind("--", 0) != 0 || own.count(arg)) continue;
    bool known = false;
    for (const OptionSpec& spec : run_option_table()) {
      known |= arg == spec.flag || arg == spec.negative_flag;
    }
    if (!known) {
      return invalid_argument("unknown flag " + arg +
                              " (run options as `seedvae bench --help` lists them)");
    }
  }
  return {};
}

// The backend's options: the run's switches, device and precision, and the diagnostics.
Result<CudaOptions> cuda_options_from(const RunOptions& r, const Args& a) {
  CudaOptions o;
  static_cast<CudaSwitches&>(o) = r;
  o.device = r.device;
  const auto p = gpu::precision_from_name(r.precision);
  if (!p) return invalid_argument("unknown --precision " + r.precision);
  o.precision = *p;
  o.memory_census = a.flag("--census");
  o.memory_limit_mib = a.geti("--memory-limit-mib", 0);
  o.smem_limit_kib = a.geti("--smem-limit-kib", 0);
  o.budget_bytes = budget_bytes(r);
  return o;
}

Json report_json(const Backend& b) {
  Json j;
  if (auto r = gpu::cuda_backend_report(b)) {
    j = {{"device", r->device},
         {"options", gpu::describe_options(r->options)},
         {"peak_live_mib", r->peak_live_bytes / 1048576.0},
         {"peak_reserved_mib", r->peak_reserved_bytes / 1048576.0},
         {"driver_allocs", r->driver_allocs},
         {"cache_hits", r->cache_hits},
         {"stream_waits", r->stream_waits},
         {"graphs_captured", r->graphs_captured},
         {"graphs_discarded", r->graphs_discarded},
         {"graph_launches", r->graph_launches},
         {"graph_pool_mib", r->graph_pool_bytes / 1048576.0},
         {"graph_discard_reason", r->graph_discard_reason},
         {"conv_searched", r->conv_searched},
         {"conv_heuristic", r->conv_heuristic},
         {"conv_cache_loaded", r->conv_cache_loaded},
         {"autotune_cache", r->autotune_cache_file},
         {"attention_kernel", r->attention_kernel},
         {"fp16_accumulated_convs", r->fp16_accumulated_convs},
         {"graph_api_convs", r->graph_api_convs},
         {"fp8_convs", r->fp8_convs},
         {"fp8_refused_convs", r->fp8_refused_convs},
         {"upload_ms", r->upload_ms},
         {"download_ms", r->download_ms},
         {"offloaded_mib", r->offloaded_bytes / 1048576.0},
         {"prefetched_mib", r->prefetched_bytes / 1048576.0},
         {"offload_stalls", r->offload_stalls},
         {"prefetch_evictions", r->prefetch_evictions},
         {"pinned_mib", r->pinned_bytes / 1048576.0},
         {"download_alloc_ms", r->download_alloc_ms},
         {"device_ms", r->device_ms},
         {"upload_mib", r->upload_bytes / 1048576.0},
         {"download_mib", r->download_bytes / 1048576.0}};
    for (const auto& e : r->peak_census) {
      j["peak_census"].push_back(
          {{"what", e.what}, {"count", e.count}, {"mib", e.bytes / 1048576.0}});
    }
  }
  return j;
}

void write_json(const Args& a, const Json& j) {
  const std::string path = a.get("--json", "");
  if (path.empty()) return;
  std::ofstream f(path);
  f << j.dump(2) << "\n";
}

// --config: a synthetic_weights() name ("real" by default; "tiny", "wan21-real", ...).
VaeWeights load_weights_for(const Args& a) {
  const std::string cfg = a.get("--config", "real");
  const auto t0 = Clock::now();
  auto w = synthetic_weights(cfg);
  if (!w) {
    std::fprintf(stderr, "%s\n", w.status().to_string().c_str());
    std::exit(2);
  }
  std::fprintf(stderr, "weights: synthetic %s (%.1f s)\n", cfg.c_str(),
               std::chrono::duration<double>(Clock::now() - t0).count());
  return std::move(*w);
}

// --size WxH (default 512x512).
bool parse_size(const Args& a, int* w, int* h) {
  const auto s = PixelSize::parse(a.get("--size", "512x512"));
  if (!s.is_ok() || s->width <= 0 || s->height <= 0) return false;
  *w = static_cast<int>(s->width);
  *h = static_cast<int>(s->height);
  return true;
}

// ---- rates ---------------------------------------------------------------------------------

int cmd_rates(const Args& a) {
  auto r = gpu::measure_device_rates(a.geti("--device", 0));
  if (!r) return fail(r.status());
  std::printf(
      "device %s: bf16 GEMM %.0f TFLOP/s, fp16 GEMM %.0f, tf32 GEMM %.0f; D2D copy %.0f GB/s "
      "(read+write); pinned H2D %.1f GB/s, D2H %.1f GB/s, both ways %.1f GB/s\n",
      r->device.c_str(), r->bf16_gemm_tflops, r->fp16_gemm_tflops, r->tf32_gemm_tflops, r->d2d_gbps,
      r->h2d_gbps, r->d2h_gbps, r->bidirectional_gbps);
  write_json(a, {{"device", r->device},
                 {"bf16_gemm_tflops", r->bf16_gemm_tflops},
                 {"fp16_gemm_tflops", r->fp16_gemm_tflops},
                 {"tf32_gemm_tflops", r->tf32_gemm_tflops},
                 {"d2d_gbps", r->d2d_gbps},
                 {"h2d_gbps", r->h2d_gbps},
                 {"d2h_gbps", r->d2h_gbps},
                 {"bidirectional_gbps", r->bidirectional_gbps}});
  return 0;
}

int cmd_convprobe(const Args& a) {
  auto rows = gpu::probe_convolutions(a.geti("--device", 0), !a.flag("--no-timing"));
  if (!rows) return fail(rows.status());
  Json out = Json::array();
  std::printf("%-34s %-30s %9s %8s %9s %9s %s\n", "shape", "mode", "ms", "TFLOP/s", "rel rms",
              "rel max", "plans (offered/built/chosen), status");
  for (const gpu::ConvProbeRow& r : *rows) {
    std::printf("%-34s %-30s %9.3f %8.1f %9.2e %9.2e %d/%d/%d %s\n", r.shape.c_str(),
                r.mode.c_str(), r.ms, r.tflops, r.rel_rms, r.rel_max, r.offered, r.built, r.chosen,
                r.status.c_str());
    out.push_back({{"shape", r.shape},
                   {"mode", r.mode},
                   {"status", r.status},
                   {"ms", r.ms},
                   {"tflops", r.tflops},
                   {"offered", r.offered},
                   {"built", r.built},
                   {"chosen", r.chosen},
                   {"rel_rms", r.rel_rms},
                   {"rel_max", r.rel_max}});
  }
  write_json(a, {{"rows", out}});
  return 0;
}

// ---- verify --------------------------------------------------------------------------------

int cmd_verify(const Args& a) {
  auto run = run_options_from(a);
  if (!run) return fail(run.status());
  auto o = cuda_options_from(*run, a);
  if (!o) return fail(o.status());
  auto b = gpu::create_cuda_backend(*o);
  if (!b) return fail(b.status());
  std::printf("verify: %s\n", (*b)->name().c_str());
  VerifyOptions vo;
  // fp32 uses --tolerance; tf32, fp16 and bf16 use the bounds of VerifyOptions::run.precision (the
  // golden README's tf32 bound, PyTorch's own low-precision error from the manifest).
  vo.run = *run;
  vo.reference_dir = a.get("--reference", "");
  const std::string cfg = a.get("--config", "");
  if (!cfg.empty()) vo.configs = {cfg};
  vo.tolerance = std::stod(a.get("--tolerance", "1e-4"));
  vo.intermediates = !a.flag("--no-intermediates");
  Json rows = Json::array();
  auto rep = run_verify(**b, vo, [&](const VerifyRow& r) {
    std::printf("  %-5s %-28s %-5s max abs %.3e rms %.3e margin %s %s\n", r.config.c_str(),
                r.tensor.c_str(), r.status.c_str(), r.max_abs, r.rms, margin_text(r).c_str(),
                r.note.c_str());
    std::fflush(stdout);
    rows.push_back(Json::parse(verify_row_json(r)));
  });
  if (!rep) return fail(rep.status());
  if (o->cuda_graphs) {
    if (auto r = gpu::cuda_backend_report(**b)) {
      std::printf("CUDA graphs: %lld recorded, %lld launches, %lld discarded %s\n",
                  static_cast<long long>(r->graphs_captured),
                  static_cast<long long>(r->graph_launches),
                  static_cast<long long>(r->graphs_discarded), r->graph_discard_reason.c_str());
    }
  }
  std::printf("verify %s: %d passed, %d failed, %d skipped%s\n",
              std::string(gpu::precision_name(o->precision)).c_str(), rep->passed(), rep->failed(),
              rep->skipped(), worst_margin_text(*rep).c_str());
  write_json(a, {{"precision", gpu::precision_name(o->precision)},
                 {"backend", (*b)->name()},
                 {"passed", rep->passed()},
                 {"failed", rep->failed()},
                 {"worst_margin",
                  rep->worst() ? Json{{"tensor", rep->worst()->config + " " + rep->worst()->tensor},
                                      {"margin", rep->worst()->margin()}}
                               : Json()},
                 {"rows", rows}});
  return rep->failed() == 0 ? 0 : 2;
}

// ---- bench ---------------------------------------------------------------------------------

HostTensor random_latent(const Shape& s, uint64_t seed) {
  HostTensor t(DType::kF32, s);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (float& v : t.f32()) v = u(rng);
  return t;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? -1 : v[v.size() / 2];
}

// Per run: each stage's device and wall time summed over the run's chunks, in stage order, and
// the largest device-memory peak inside the stage (the backend's peak is reset after every
// sample, which arrives on the engine thread, so each sample's peak is its own stage's).
class StageClock final : public TelemetrySink {
 public:
  explicit StageClock(Backend& b) : backend_(b) { backend_.reset_peak(); }
  void on_stage(const StageSample& s) override {
    auto [it, fresh] = index_.try_emplace(s.stage, stages.size());
    if (fresh) stages.push_back({s.stage, 0, 0, 0});
    Stage& st = stages[it->second];
    st.wall_ms += s.wall_ms;
    st.device_ms = s.device_ms < 0 || st.device_ms < 0 ? -1 : st.device_ms + s.device_ms;
    st.peak_bytes = std::max(st.peak_bytes, s.peak_bytes);
    backend_.reset_peak();
  }
  struct Stage {
    std::string name;
    double wall_ms, device_ms;
    int64_t peak_bytes;
  };
  std::vector<Stage> stages;

 private:
  Backend& backend_;
  std::map<std::string, size_t> index_;
};

struct StageDevice {
  std::string op, stage;
  std::vector<double> device_runs_ms, wall_runs_ms;
  int64_t peak_bytes = 0;
};

// `runs` runs of each op of `bo` with stage telemetry on a fresh model (the backend has done
// run_bench's warm-up, so the convolution algorithms are chosen already).
Result<std::vector<StageDevice>> stage_device_times(Backend& b, const VaeWeights& w,
                                                    const BenchOptions& bo, int runs) {
  std::vector<StageDevice> out;
  if (runs <= 0 || w.is_wan()) return out;  // WanModel has no stage telemetry
  SEEDVAE_ASSIGN_OR_RETURN(VaeModel m, VaeModel::create(b, w));
  const VaeConfig& c = w.config;
  const int f = c.temporal_factor(), sf = c.spatial_factor();
  for (const bool enc : {true, false}) {
    if ((enc && !bo.encode) || (!enc && !bo.decode)) continue;
    const Shape in =
        enc ? Shape{1, c.in_channels, bo.frames, bo.height, bo.width}
            : Shape{1, c.latent_channels, (bo.frames - 1) / f + 1, bo.height / sf, bo.width / sf};
    const HostTensor x = random_latent(in, enc ? 1 : 2);
    const size_t first = out.size();
    for (int i = 0; i < runs; ++i) {
      StageClock clock(b);
      m.set_telemetry(&clock);
      const StreamOptions so = stream_options(bo.run);
      auto r = enc ? encode_video(m, x, so) : decode_latent(m, x, so);
      m.set_telemetry(nullptr);
      if (!r) return r.take_status();
      for (const auto& st : clock.stages) {
        auto it = std::find_if(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
                               [&](const StageDevice& d) { return d.stage == st.name; });
        if (it == out.end()) {
          out.push_back({enc ? "encode" : "decode", st.name, {}, {}});
          it = out.end() - 1;
        }
        it->device_runs_ms.push_back(st.device_ms);
        it->wall_runs_ms.push_back(st.wall_ms);
        it->peak_bytes = std::max(it->peak_bytes, st.peak_bytes);
      }
    }
  }
  return out;
}

int cmd_bench(const Args& a) {
  auto run = run_options_from(a);
  if (!run) return fail(run.status());
  auto o = cuda_options_from(*run, a);
  if (!o) return fail(o.status());
  BenchOptions bo;
  bo.run = *run;
  if (!parse_size(a, &bo.width, &bo.height)) {
    return fail(invalid_argument("--size WxH"));
  }
  bo.frames = a.geti("--frames", 17);
  bo.repeats = a.geti("--repeats", 3);
  bo.warmup = a.geti("--warmup", 1);
  bo.encode = !a.flag("--no-encode");
  bo.decode = !a.flag("--no-decode");
  const VaeWeights w = load_weights_for(a);
  if (auto devices = parse_devices(bo.run.devices); devices && !devices->empty()) {
    bo.run.device = devices->front();  // the first of several devices runs the encode
    o = cuda_options_from(bo.run, a);
    if (!o) return fail(o.status());
  }
  auto b = gpu::create_cuda_backend(*o);
  if (!b) return fail(b.status());
  // The automatic schedule, as a job chooses it; a new backend when the offload turns on.
  auto remake = choose_bench_schedule(bo, w, **b);
  if (!remake) return fail(remake.status());
  if (!bo.schedule_note.empty()) std::printf("plan: %s\n", bo.schedule_note.c_str());
  if (*remake) {
    b->reset();
    o = cuda_options_from(bo.run, a);
    if (!o) return fail(o.status());
    b = gpu::create_cuda_backend(*o);
    if (!b) return fail(b.status());
  }
  std::printf("bench: %s, %dx%dx%d, chunk %d\n", (*b)->name().c_str(), bo.width, bo.height,
              bo.frames, bo.run.chunk_latents);
  // the other devices of a pipelined decode, made as this one was
  const BenchBackendFactory other = [&a](const RunOptions& r) -> Result<std::unique_ptr<Backend>> {
    SEEDVAE_ASSIGN_OR_RETURN(CudaOptions co, cuda_options_from(r, a));
    co.device = r.device;
    return gpu::create_cuda_backend(co);
  };
  auto r = run_bench(**b, w, bo, other);
  if (!r) return fail(r.status());
  const Json rep = report_json(**b);  // of run_bench's runs only
  const int stage_runs = a.geti("--stage-device-runs", bo.repeats);
  auto sd = stage_device_times(**b, w, bo, stage_runs);
  if (!sd) return fail(sd.status());
  const double gemm = std::stod(a.get("--gemm-tflops", "0"));
  Json j{{"backend", r->backend},
         {"schedule", bo.schedule_note.empty() ? "as set" : bo.schedule_note},
         {"width", bo.width},
         {"height", bo.height},
         {"frames", bo.frames},
         {"chunk_latents", bo.run.chunk_latents},
         {"hires_chunk_frames", bo.run.hires_chunk_frames},
         {"async_tiles", bo.run.async_tiles},
         {"lone_head", bo.run.lone_head},
         {"lean_convs", bo.run.lean_convs},
         {"repeats", bo.repeats},
         {"stage_device_runs", stage_runs},
         {"report", rep}};
  for (const auto& op : r->ops) {
    auto gib = [](int64_t bytes) { return static_cast<double>(bytes) / 1073741824.0; };
    std::printf(
        "%s %dx%d: %.1f ms (%.2f ms/frame), %.1f TFLOP, %.0f TFLOP/s%s, peak %.2f GiB live, "
        "%.2f GiB reserved, %.2f GiB device (fixed %.2f GiB, budget %.2f GiB), host %.2f GiB\n",
        op.op.c_str(), bo.width, bo.height, op.total_ms, op.ms_per_frame, op.tflop, op.tflops_per_s,
        gemm > 0 ? (" (" + std::to_string(int(100 * op.tflops_per_s / gemm)) +
                    "% of measured bf16 GEMM)")
                       .c_str()
                 : "",
        gib(op.peak_bytes), gib(op.reserved_peak_bytes), gib(op.device_peak_bytes),
        gib(op.fixed_bytes), gib(op.budget_bytes), gib(op.host_peak_bytes));
    j["ops"].push_back({{"op", op.op},
                        {"total_ms", op.total_ms},
                        {"ms_per_frame", op.ms_per_frame},
                        {"tflop", op.tflop},
                        {"tflops_per_s", op.tflops_per_s},
                        {"peak_gib", gib(op.peak_bytes)},
                        {"reserved_peak_gib", gib(op.reserved_peak_bytes)},
                        {"device_peak_gib", gib(op.device_peak_bytes)},
                        {"fixed_gib", gib(op.fixed_bytes)},
                        {"budget_gib", gib(op.budget_bytes)},
                        {"host_peak_gib", gib(op.host_peak_bytes)},
                        {"tiling", op.tiling},
                        {"plan", op.plan_note},
                        {"runs_ms", op.runs_ms}});
    if (!op.devices.empty()) {
      // a pipelined decode's shares, or blend tiles spread over the devices
      if (!op.pipeline.empty()) std::printf("  pipeline %s\n", op.pipeline.c_str());
      Json dj = Json::array();
      for (const auto& d : op.devices) {
        std::printf(
            "  device %s: %s, busy %.1f ms (import %.1f ms, %.2f GiB), peak %.2f GiB live, %.2f "
            "GiB device level\n"
            "    waits: input %.1f, output %.1f, enqueue %.1f, sync %.1f, host %.1f ms\n",
            d.backend.c_str(), d.units.c_str(), d.busy_ms, d.import_ms, gib(d.imported_bytes),
            gib(d.peak_bytes), gib(d.device_level_bytes()), d.waits.input_ms, d.waits.output_ms,
            d.waits.enqueue_ms, d.waits.sync_ms, d.waits.host_ms);
        dj.push_back({{"backend", d.backend},
                      {"units", d.units},
                      {"busy_ms", d.busy_ms},
                      {"import_ms", d.import_ms},
                      {"imported_gib", gib(d.imported_bytes)},
                      {"peak_gib", gib(d.peak_bytes)},
                      {"device_level_gib", gib(d.device_level_bytes())},
                      {"waits_ms", Json::object()}});
        for (const auto& [k, v] : d.waits.fields()) dj.back()["waits_ms"][k] = v;
      }
      if (!op.pipeline.empty()) j["ops"].back()["pipeline"] = op.pipeline;
      j["ops"].back()["devices"] = dj;
    }
  }
  if (!sd->empty()) {
    std::printf(
        "  stages: ms = host time of one staged run; device = median of %d runs' CUDA-event "
        "time\n",
        stage_runs);
  }
  for (const auto& s : r->stages) {
    Json js{{"op", s.op}, {"stage", s.stage}, {"ms", s.ms}, {"gflop", s.gflop}};
    double dev = -1;
    int64_t peak = -1;
    for (const StageDevice& d : *sd) {
      if (d.op != s.op || d.stage != s.stage) continue;
      dev = median_of(d.device_runs_ms);
      js["device_ms"] = dev;
      js["device_runs_ms"] = d.device_runs_ms;
      js["wall_ms"] = median_of(d.wall_runs_ms);
      js["peak_gib"] = d.peak_bytes / 1073741824.0;
      peak = d.peak_bytes;
    }
    std::printf("  %-7s %-28s %9.1f ms %9.1f GFLOP %7.0f TFLOP/s", s.op.c_str(), s.stage.c_str(),
                s.ms, s.gflop, s.ms > 0 ? s.gflop / s.ms : 0.0);
    if (dev >= 0) {
      std::printf("   device %9.1f ms %7.0f TFLOP/s", dev, dev > 0 ? s.gflop / dev : 0.0);
    }
    if (peak >= 0) std::printf("   peak %6.2f GiB", peak / 1073741824.0);
    std::printf("\n");
    j["stages"].push_back(js);
  }
  std::printf(
      "device time (CUDA events, all runs incl. warm-up, upload to download per chunk): %.1f ms\n",
      rep.value("device_ms", 0.0));
  std::printf(
      "memory: peak live %.2f GiB, peak reserved %.2f GiB; cuDNN searched %lld, loaded %lld; "
      "attention %s; all runs: upload %.1f ms (%.0f MiB), download %.1f ms (%.0f MiB, of "
      "which %.1f ms host allocation)\n",
      rep.value("peak_live_mib", 0.0) / 1024, rep.value("peak_reserved_mib", 0.0) / 1024,
      static_cast<long long>(rep.value("conv_searched", 0)),
      static_cast<long long>(rep.value("conv_cache_loaded", 0)),
      rep.value("attention_kernel", std::string("?")).c_str(), rep.value("upload_ms", 0.0),
      rep.value("upload_mib", 0.0), rep.value("download_ms", 0.0), rep.value("download_mib", 0.0),
      rep.value("download_alloc_ms", 0.0));
  if (rep.contains("peak_census")) {
    double total = 0;
    for (const auto& e : rep["peak_census"]) total += e.value("mib", 0.0);
    std::printf("live at the last op's memory peak (--census), %.2f GiB, largest first:\n",
                total / 1024);
    int shown = 0;
    for (const auto& e : rep["peak_census"]) {
      if (++shown > 40) break;
      std::printf("  %9.1f MiB  %3lld x  %s\n", e.value("mib", 0.0),
                  static_cast<long long>(e.value("count", 0)),
                  e.value("what", std::string()).c_str());
    }
  }
  write_json(a, j);
  return 0;
}

// ---- ablation ------------------------------------------------------------------------------

struct Row {
  std::string name;
  CudaOptions opt;
  int hires_chunk = 0;  // ChunkOptions::hires_chunk_frames
  bool async_tiles = true;
  int64_t blend_tile = 0;   // > 0: blend tiling with this tile (px) and a 64 px overlap
  bool lean_convs = false;  // ChunkOptions::lean_convs
  bool lone_head = false;   // StreamOptions::lone_head
};

int cmd_ablate(const Args& a) {
  int width = 0, height = 0;
  if (!parse_size(a, &width, &height)) return fail(invalid_argument("--size"));
  const int frames = a.geti("--frames", 17);
  const int repeats = a.geti("--repeats", 2);
  const VaeWeights w = load_weights_for(a);
  const VaeConfig& c = w.config;
  const int latents = (frames - 1) / c.temporal_factor() + 1;
  const HostTensor z = random_latent(
      Shape{1, c.latent_channels, latents, height / c.spatial_factor(), width / c.spatial_factor()},
      2);
  const int ref_latents = std::min(latents, a.geti("--ref-latents", latents));
  const int ref_frames = (ref_latents - 1) * c.temporal_factor() + 1;
  const std::string only = a.get("--only", "");

  // fp32 reference (TF32 off) of the first ref_latents latents: outputs are causal, so they equal
  // the first ref_frames frames of the full decode.
  HostTensor ref;
  {
    CudaOptions o;
    o.precision = Precision::kFp32;
    // cuDNN has FMA-only (no TF32) 3-D algorithms for every NCDHW shape; not for large NDHWC ones.
    o.channels_last = false;
    auto b = gpu::create_cuda_backend(o);
    if (!b) return fail(b.status());
    auto m = VaeModel::create(**b, w);
    if (!m) return fail(m.status());
    const auto t0 = Clock::now();
    auto r = decode_latent(*m, slice_time(z, 0, ref_latents), {1});
    if (!r) return fail(r.status());
    ref = std::move(r).value();
    std::printf("fp32 reference: %d latents -> %d frames in %.1f s\n", ref_latents, ref_frames,
                std::chrono::duration<double>(Clock::now() - t0).count());
  }

  CudaOptions def;
  def.precision = Precision::kBf16;
  def.autotune_cache = a.get("--autotune-cache", "auto");
  std::vector<Row> rows;
  rows.push_back({"default (bf16)", def});
  auto add = [&](const std::string& n, auto f) {
    CudaOptions o = def;
    f(o);
    rows.push_back({n, o});
  };
  add("precision fp16", [](CudaOptions& o) { o.precision = Precision::kFp16; });
  add("precision fidelity", [](CudaOptions& o) { o.precision = Precision::kFidelity; });
  add("precision fp16, fp16 accumulation", [](CudaOptions& o) {
    o.precision = Precision::kFp16;
    o.fp16_accumulation = true;
  });
  add("precision bf16, FP8 convolutions", [](CudaOptions& o) { o.fp8_convs = true; });
  add("precision tf32", [](CudaOptions& o) { o.precision = Precision::kTf32; });
  add("precision fp32", [](CudaOptions& o) { o.precision = Precision::kFp32; });
  add("no autotune (heuristic)", [](CudaOptions& o) { o.autotune = false; });
  add("graph engines (--graph-api)", [](CudaOptions& o) { o.graph_api = true; });
  add("no channels-last (NCDHW)", [](CudaOptions& o) { o.channels_last = false; });
  add("no fused GN+SiLU", [](CudaOptions& o) { o.fused_gn_silu = false; });
  add("no fused attention", [](CudaOptions& o) { o.fused_attention = false; });
  add("no caching allocator", [](CudaOptions& o) { o.caching_allocator = false; });
  add("no buffer reuse", [](CudaOptions& o) { o.buffer_reuse = false; });
  add("no fused bias", [](CudaOptions& o) { o.fuse_bias = false; });
  add("offload state (on)", [](CudaOptions& o) { o.offload_state = true; });
  add("CUDA graphs (on)", [](CudaOptions& o) { o.cuda_graphs = true; });
  rows.push_back({"no async tiles", def, 0, false});
  // Blended tiles: a pair of its own, since tiling changes the output (seams are blended).
  rows.push_back({"blend tiles 512 (async)", def, 0, true, 512});
  rows.push_back({"blend tiles 512, no async", def, 0, false, 512});
  rows.push_back({"chunked upsampling 1 (on)", def, 1});
  rows.push_back({"chunked upsampling 2 (on)", def, 2});
  {
    CudaOptions o = def;
    o.offload_state = true;
    rows.push_back({"chunked 2 + offload (on)", o, 2});
    rows.push_back({"chunked 1 + offload (on)", o, 1});
    o.offload_window_mib = 8192;  // the full-resolution state comes back during the low levels
    rows.push_back({"chunked 1 + offload, 8 GiB window", o, 1});
  }
  rows.push_back({"lone head (on)", def, 0, true, 0, false, true});
  rows.push_back({"lean convs + lone head (on)", def, 0, true, 0, true, true});
  {
    CudaOptions o = def;
    o.offload_state = true;
    rows.push_back({"lean + lone head + offload (on)", o, 0, true, 0, true, true});
  }

  Json out = Json::array();
  HostTensor default_out;
  std::printf("\n%-28s %10s %10s %10s %9s %9s %10s %10s %8s\n", "configuration", "ms/frame",
              "dev ms/fr", "total ms", "peak GiB", "rsv GiB", "maxabs32", "rms32", "PSNR32");
  for (const Row& row : rows) {
    // --only a,b,...: the rows whose name contains one of the comma-separated parts
    bool wanted = only.empty() || row.name == "default (bf16)";
    for (size_t p = 0; !wanted && p <= only.size();) {
      const size_t q = std::min(only.find(',', p), only.size());
      const std::string part = only.substr(p, q - p);
      wanted = !part.empty() && row.name.find(part) != std::string::npos;
      p = q + 1;
    }
    if (!wanted) continue;
    Json j{{"name", row.name}, {"options", gpu::describe_options(row.opt)}};
    auto b = gpu::create_cuda_backend(row.opt);
    if (!b) {
      j["error"] = b.status().to_string();
      std::printf("%-28s %s\n", row.name.c_str(), b.status().to_string().c_str());
      out.push_back(j);
      continue;
    }
    auto m = VaeModel::create(**b, w);
    if (!m) {
      j["error"] = m.status().to_string();
      out.push_back(j);
      continue;
    }
    j["hires_chunk_frames"] = row.hires_chunk;
    j["lean_convs"] = row.lean_convs;
    j["lone_head"] = row.lone_head;
    j["async_tiles"] = row.async_tiles;
    j["blend_tile"] = row.blend_tile;
    std::vector<double> ms, dev_ms;
    HostTensor last;
    int64_t peak = 0;
    Status err;
    int runs = repeats + 1;
    for (int i = 0; i < runs && err.is_ok(); ++i) {
      (*b)->reset_peak();
      const double dev0 = gpu::cuda_backend_report(**b)->device_ms;
      const auto t0 = Clock::now();
      const StreamOptions so{.chunk_latents = 1,
                             .async_tiles = row.async_tiles,
                             .lone_head = row.lone_head,
                             .hires_chunk_frames = row.hires_chunk,
                             .lean_convs = row.lean_convs};
      TileOptions to;
      to.mode = TilingMode::kBlend;
      to.spec = {row.blend_tile, row.blend_tile, 64, 64};
      auto r = row.blend_tile > 0 ? tiled_decode(*m, z, to, so) : decode_latent(*m, z, so);
      if (!r) {
        err = r.take_status();
        break;
      }
      if (Status s = (*b)->synchronize(); !s) err = s;
      const double t = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (i > 0) ms.push_back(t);  // the first run is warm-up (and autotune)
      if (i > 0) dev_ms.push_back(gpu::cuda_backend_report(**b)->device_ms - dev0);
      if (i == 0 && t > 10000) runs = 2;  // very slow configurations: one measured run
      if (i > 0) peak = std::max(peak, (*b)->memory_stats().peak_bytes);
      last = std::move(r).value();
    }
    if (!err.is_ok()) {
      j["error"] = err.to_string();
      std::printf("%-28s %s\n", row.name.c_str(), err.to_string().c_str());
      out.push_back(j);
      continue;
    }
    std::sort(ms.begin(), ms.end());
    std::sort(dev_ms.begin(), dev_ms.end());
    const double med = ms[ms.size() / 2];
    const double dmed = dev_ms.empty() ? 0 : dev_ms[dev_ms.size() / 2];
    const HostTensor first = slice_time(last, 0, ref_frames);
    auto d32 = compare(first, ref);
    // PSNR and SSIM against the fp32 decode, as the product measures a reconstruction
    // (core/media/metrics.h: [0, 1] scale, not clamped)
    auto q32 = media::compare_clips(first, ref);
    if (default_out.empty()) default_out = last;
    auto ddef = compare(last, default_out);
    const Json rep = report_json(**b);
    j["ms_per_frame"] = med / frames;
    j["device_ms_per_frame"] = dmed / frames;
    j["device_runs_ms"] = dev_ms;
    j["total_ms"] = med;
    j["runs_ms"] = ms;
    j["peak_gib"] = peak / 1073741824.0;
    j["peak_reserved_gib"] = rep.value("peak_reserved_mib", 0.0) / 1024;
    j["attention_kernel"] = rep.value("attention_kernel", std::string());
    j["offload_stalls"] = rep.value("offload_stalls", 0);
    j["report"] = rep;
    if (d32) {
      j["max_abs_vs_fp32"] = d32->max_abs;
      j["rms_vs_fp32"] = d32->rms;
    }
    if (q32) {
      // JSON has no infinity: identical clips (the fp32 row, when deterministic) give null
      j["psnr_vs_fp32_db"] = std::isfinite(q32->psnr_db) ? Json(q32->psnr_db) : Json();
      j["ssim_vs_fp32"] = q32->ssim;
    }
    if (ddef) j["max_abs_vs_default"] = ddef->max_abs;
    std::printf("%-28s %10.2f %10.2f %10.1f %9.2f %9.2f %10.3e %10.3e %8.2f\n", row.name.c_str(),
                med / frames, dmed / frames, med, peak / 1073741824.0,
                rep.value("peak_reserved_mib", 0.0) / 1024, d32 ? d32->max_abs : -1.0,
                d32 ? d32->rms : -1.0, q32 ? q32->psnr_db : -1.0);
    std::fflush(stdout);
    out.push_back(j);
  }
  write_json(a, {{"size", std::to_string(width) + "x" + std::to_string(height)},
                 {"frames", frames},
                 {"ref_frames", ref_frames},
                 {"repeats", repeats},
                 {"rows", out}});
  return 0;
}

// `hold --leave-free-gib N`: another application on the card. Allocates until only N GiB are
// free, prints "holding", and keeps the memory until its standard input closes or it is killed,
// so a benchmark started meanwhile sees a small card (docs/benchmarks.md, scripts/gpu-run.sh).
// ---- wanbench --------------------------------------------------------------------------------

// The upstream wrappers' encode (video -> normalised latent) and decode (latent -> clamped video),
// each on a backend of its own so its peaks are its own; one untimed run (autotune) then
// --repeats timed ones; the chunking is upstream's unless --chunk N (latent frames per call).
int cmd_wanbench(const Args& a) {
  auto run = run_options_from(a);
  if (!run) return fail(run.status());
  auto o = cuda_options_from(*run, a);
  if (!o) return fail(o.status());
  const std::string fam = a.get("--family", "wan2.1");
  if (fam != "wan2.1" && fam != "wan2.2") return fail(invalid_argument("--family wan2.1|wan2.2"));
  const VaeFamily family = fam == "wan2.2" ? VaeFamily::kWan22 : VaeFamily::kWan21;
  const WanConfig config = family == VaeFamily::kWan22 ? WanConfig::wan22() : WanConfig::wan21();
  const auto size = PixelSize::parse(a.get("--size", "832x480"));
  if (!size) return fail(size.status());
  const int frames = a.geti("--frames", 81), repeats = std::max(1, a.geti("--repeats", 2));
  auto t0 = Clock::now();
  const VaeWeights weights = synthesize_wan_weights(config, wan_reference_seed(family, true));
  std::printf("%s: %s, weights %.1f s\n", fam.c_str(), config.to_string().c_str(),
              std::chrono::duration<double>(Clock::now() - t0).count());
  HostTensor video(DType::kF32, Shape{1, 3, frames, size->height, size->width});
  {
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (float& v : video.f32()) v = u(rng);
  }
  WanStreamOptions so;
  so.stream.hires_chunk_frames = run->hires_chunk_frames;  // the decoder's (--hires-chunk)
  if (const std::string t = a.get("--halo-tile", ""); !t.empty()) {
    // the decode in halo tiles (core/schedule/wan_tiles.h)
    const auto tile = PixelSize::parse(t);
    if (!tile) return fail(tile.status());
    so.tiles = WanTileOptions{.tile_h = tile->height, .tile_w = tile->width};
  }
  if (a.get("--chunk", "").size() > 0) {
    so.stream.chunk_latents = run->chunk_latents;
    so.stream.lone_head = run->lone_head;
  }
  Json out = {{"family", fam},
              {"config", config.to_string()},
              {"size", std::to_string(size->width) + "x" + std::to_string(size->height)},
              {"frames", frames},
              {"halo_tile", a.get("--halo-tile", "")}};
  HostTensor latent;
  for (const bool encode : {true, false}) {
    auto b = gpu::create_cuda_backend(*o);
    if (!b) return fail(b.status());
    auto m = WanModel::create(**b, weights);
    if (!m) return fail(m.status());
    (*b)->reset_peak();
    std::vector<double> ms;
    for (int r = 0; r <= repeats; ++r) {
      t0 = Clock::now();
      if (encode) {
        auto e = wan_encode(*m, video, so);
        if (!e) return fail(e.status());
        latent = std::move(e->latent);
      } else {
        auto d = wan_decode(*m, latent, so);
        if (!d) return fail(d.status());
      }
      if (r > 0) ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    const char* name = encode ? "encode" : "decode";
    Json j = {{"median_ms", ms[ms.size() / 2]}, {"runs_ms", ms}, {"backend", report_json(**b)}};
    double device_gib = 0;
    if (auto rep = gpu::cuda_backend_report(**b)) {
      // what the card must have free: the context and library handles plus the allocator's
      // largest reserve (its cached blocks included)
      device_gib =
          double(std::max<int64_t>(0, rep->fixed_bytes) + rep->peak_reserved_bytes) / (1 << 30);
      j["peak_live_gib"] = rep->peak_live_bytes / double(1 << 30);
      j["device_level_gib"] = device_gib;
    }
    std::printf(
        "%s %s %dx%dx%d: %.0f ms (median of %d), peak live %.2f GiB, device level %.2f "
        "GiB\n",
        fam.c_str(), name, int(size->width), int(size->height), frames, ms[ms.size() / 2], repeats,
        j.value("peak_live_gib", 0.0), device_gib);
    if (a.flag("--op-profile")) {
      // one more run with every op timed between synchronisations (core/backend/op_profile.h)
      OpProfileBackend prof(**b);
      auto pm = WanModel::create(prof, weights);
      if (!pm) return fail(pm.status());
      const Status s =
          encode ? wan_encode(*pm, video, so).status() : wan_decode(*pm, latent, so).status();
      if (!s.ok()) return fail(s);
      std::printf("  op profile (%.0f ms in ops):\n", prof.total_ms());
      Json rows = Json::array();
      for (const auto& r : prof.rows()) {
        if (rows.size() < 40) {
          std::printf("  %9.1f ms %6lld x %s %s\n", r.ms, static_cast<long long>(r.calls),
                      r.op.c_str(), r.shape.c_str());
        }
        rows.push_back({{"op", r.op}, {"shape", r.shape}, {"calls", r.calls}, {"ms", r.ms}});
      }
      j["op_profile"] = rows;
    }
    out[name] = j;
  }
  write_json(a, out);
  return 0;
}

int cmd_hold(const Args& a) {
  const double gib = std::stod(a.get("--leave-free-gib", "8"));
  auto held =
      gpu::hold_device_memory(a.geti("--device", 0), static_cast<int64_t>(gib * 1073741824.0));
  if (!held) return fail(held.status());
  const auto devices = gpu::list_devices();
  const int64_t free_now = devices.empty() ? -1 : devices.front().free_bytes;
  std::printf("holding: %.2f GiB free\n", static_cast<double>(free_now) / 1073741824.0);
  std::fflush(stdout);
  char c = 0;
  while (std::fread(&c, 1, 1, stdin) == 1) {
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: seedvae_gpu_bench rates|verify|bench|ablate|wanbench|hold [options]\n");
    return 64;
  }
  Args a;
  for (int i = 2; i < argc; ++i) a.v.emplace_back(argv[i]);
  const std::string cmd = argv[1];
  if (const Status st = check_flags(a); !st.is_ok()) {
    std::fprintf(stderr, "error: %s\n", st.to_string().c_str());
    return 64;
  }
  const auto info = gpu::runtime_info();
  if (!info.error.empty()) {
    std::fprintf(stderr, "no CUDA device: %s\n", info.error.c_str());
    return 77;
  }
  if (cmd == "rates") return cmd_rates(a);
  if (cmd == "convprobe") return cmd_convprobe(a);
  if (cmd == "hold") return cmd_hold(a);
  if (cmd == "verify") return cmd_verify(a);
  if (cmd == "bench") return cmd_bench(a);
  if (cmd == "ablate") return cmd_ablate(a);
  if (cmd == "wanbench") return cmd_wanbench(a);
  std::fprintf(stderr, "unknown command %s\n", cmd.c_str());
  return 64;
}
