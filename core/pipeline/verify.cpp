#include "core/pipeline/verify.h"

#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/io/safetensors.h"
#include "core/schedule/streaming.h"
#include "core/schedule/tiled.h"
#include "core/schedule/wan_stream.h"
#include "core/vae/state_dict.h"
#include "core/vae/vae_model.h"

namespace seedvae {

int VerifyReport::passed() const {
  return static_cast<int>(std::count_if(rows.begin(), rows.end(),
                                        [](const VerifyRow& r) { return r.status == "pass"; }));
}
int VerifyReport::failed() const {
  return static_cast<int>(std::count_if(rows.begin(), rows.end(),
                                        [](const VerifyRow& r) { return r.status == "FAIL"; }));
}
double VerifyRow::margin() const {
  if (status == "skip" || tolerance <= 0) return -1;
  double m = max_abs / tolerance;
  if (rms_tolerance > 0) m = std::max(m, rms / rms_tolerance);
  return m;
}

const VerifyRow* VerifyReport::worst() const {
  const VerifyRow* w = nullptr;
  for (const VerifyRow& r : rows) {
    if (r.margin() >= 0 && (w == nullptr || r.margin() > w->margin())) w = &r;
  }
  return w;
}

int VerifyReport::skipped() const {
  return static_cast<int>(std::count_if(rows.begin(), rows.end(),
                                        [](const VerifyRow& r) { return r.status == "skip"; }));
}

namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

Result<Json> read_manifest(const std::filesystem::path& dir) {
  const auto path = dir / "manifest.json";
  std::ifstream in(path);
  if (!in) return not_found("no manifest.json in " + dir.string());
  try {
    Json j = Json::parse(in);
    if (!j.is_object() || !j.contains("configs") || !j["configs"].is_object()) {
      return corrupt_data(path.string() + " has no \"configs\" object");
    }
    return j;
  } catch (const std::exception& e) {
    return corrupt_data(path.string() + " is not valid JSON: " + e.what());
  }
}

Result<VaeConfig> config_from_manifest(const Json& cfg, const std::string& name) {
  try {
    const Json& k = cfg.at("constructor_kwargs");
    VaeConfig c;
    c.in_channels = k.at("in_channels").get<int>();
    c.out_channels = k.at("out_channels").get<int>();
    c.latent_channels = k.at("latent_channels").get<int>();
    c.block_out_channels = k.at("block_out_channels").get<std::vector<int>>();
    c.layers_per_block = k.at("layers_per_block").get<int>();
    c.norm_groups = k.at("norm_num_groups").get<int>();
    c.temporal_scale_num = k.at("temporal_scale_num").get<int>();
    SEEDVAE_TRY(c.validate());
    return c;
  } catch (const std::exception& e) {
    return corrupt_data("manifest configuration " + name + ": " + e.what());
  }
}

// The "inputs" row of a reference configuration: every case of its manifest entry present in
// `inputs` with the manifest's shape.
VerifyRow inputs_row(const SafetensorsFile& inputs, const Json& cfg) {
  int bad = 0;
  std::string note;
  const Json cases = cfg.value("cases", Json::array());
  for (const auto& c : cases) {
    const std::string cname = c.value("name", "");
    auto v = inputs.get(cname);
    const Shape want(c.value("shape", std::vector<int64_t>{}));
    if (!v || v->shape != want) {
      ++bad;
      note += cname + (v ? " has shape " + v->shape.to_string() : " is missing") + "; ";
    }
  }
  return {"",
          "inputs",
          bad ? "FAIL" : "pass",
          0,
          0,
          0,
          0,
          bad ? note : std::to_string(cases.size()) + " cases"};
}

bool wanted(const VerifyOptions& o, const std::string& tensor) {
  if (o.only.empty()) return true;
  return std::any_of(o.only.begin(), o.only.end(),
                     [&](const std::string& s) { return tensor.find(s) != std::string::npos; });
}

// "V17.dec_of_mean_sliced_s4" -> case "V17", op "dec_of_mean", split 4 (0 = whole clip).
struct GoldenName {
  std::string case_name, op, variant;
  int split = 0;
};
GoldenName parse_name(const std::string& n) {
  GoldenName g;
  const auto dot = n.find('.');
  g.case_name = n.substr(0, dot);
  std::string rest = n.substr(dot + 1);
  if (auto p = rest.find("_sliced_s"); p != std::string::npos) {
    g.split = std::atoi(rest.c_str() + p + 9);
    rest = rest.substr(0, p);
  } else if (auto q = rest.find("_tiled_"); q != std::string::npos) {
    g.variant = rest.substr(q + 7);
    rest = rest.substr(0, q);
  }
  g.op = rest;
  return g;
}

// Error bounds of one tensor: max abs and (optional, < 0 = none) rms.
struct Bound {
  double max_abs = 1e-4;
  double rms = -1;
  std::string source;
};

class ConfigRun {
 public:
  ConfigRun(Backend& backend, const VerifyOptions& opt, std::string name,
            const std::function<void(const VerifyRow&)>& on_row, VerifyReport& report)
      : backend_(backend), opt_(opt), name_(std::move(name)), on_row_(on_row), report_(report) {}

  void add(VerifyRow row) {
    row.config = name_;
    if (on_row_) on_row_(row);
    report_.rows.push_back(std::move(row));
  }

  Status run(const Json& cfg, const CancelToken* cancel) {
    const auto dir = opt_.reference_dir;
    SEEDVAE_ASSIGN_OR_RETURN(VaeConfig config, config_from_manifest(cfg, name_));
    // Weights: an explicit file, the folder's file, or the synthetic recipe with the manifest seed.
    const uint64_t seed = cfg.value("weights", Json::object()).value("seed", uint64_t{0});
    std::optional<std::filesystem::path> wfile = opt_.weights;
    const Json wf = cfg.value("weights", Json::object()).value("file", Json());
    if (!wfile && wf.is_string()) wfile = dir / wf.get<std::string>();
    auto t0 = Clock::now();
    VaeWeights synthetic = synthesize_weights(config, seed);
    if (wfile) {
      SEEDVAE_ASSIGN_OR_RETURN(weights_, load_weights(*wfile));
      const bool same = fp16_digest(weights_) == fp16_digest(synthetic);
      VerifyRow row{"", "weights", same || opt_.weights ? "pass" : "FAIL"};
      row.note = wfile->filename().string() + (same ? " equals the synthetic recipe (seed " +
                                                          std::to_string(seed) + ") bit for bit"
                                                    : " differs from the synthetic recipe");
      row.seconds = seconds_since(t0);
      add(row);
    } else {
      weights_ = std::move(synthetic);
      add({"", "weights", "pass", 0, 0, 0, seconds_since(t0),
           "synthetic recipe, seed " + std::to_string(seed) + ", digest " +
               fp16_digest(weights_).substr(0, 16)});
    }
    if (!(weights_.config == config)) {
      return invalid_argument("weights configuration (" + weights_.config.to_string() +
                              ") differs from the manifest's (" + config.to_string() + ")");
    }

    const auto files = cfg.value("files", Json::object());
    auto file_path = [&](const char* key, const char* fallback) {
      if (files.contains(key) && files[key].contains("path")) {
        return dir / files[key]["path"].get<std::string>();
      }
      return dir / name_ / fallback;
    };
    SEEDVAE_ASSIGN_OR_RETURN(inputs_,
                             SafetensorsFile::open(file_path("inputs", "inputs.safetensors")));
    SEEDVAE_ASSIGN_OR_RETURN(
        golden_, SafetensorsFile::open(file_path("golden_fp32", "golden_fp32.safetensors")));
    const auto inter_path = file_path("intermediates_fp32", "intermediates_fp32.safetensors");
    if (opt_.intermediates && files.contains("intermediates_fp32") &&
        std::filesystem::exists(inter_path)) {
      SEEDVAE_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(inter_path));
      intermediates_ = std::move(f);
    }
    add(inputs_row(*inputs_, cfg));
    if (!opt_.run_model) return Status::ok();

    SEEDVAE_ASSIGN_OR_RETURN(VaeModel model, VaeModel::create(backend_, weights_));
    model_ = &model;
    tiled_decode_ = cfg.value("tiled_decode", Json::object());
    tiled_encode_ = cfg.value("tiled_encode", Json::object());
    const std::string& pr = opt_.run.precision;
    if (pr == "fp16" || pr == "bf16" || pr == "fidelity" || opt_.run.fp8_numerics) {
      // fidelity's bound: half of PyTorch's bf16 error; FP8 numerics, which PyTorch has no
      // reference for, are measured against its bf16 error (bound_for)
      const std::string mode = lowp_mode() + "_pure";
      lowp_ = cfg.value("lowp_error_vs_fp32", Json::object())
                  .value(mode, Json::object())
                  .value("errors", Json::object());
      if (lowp_.empty()) {
        return corrupt_data("the manifest has no lowp_error_vs_fp32." + mode +
                            " errors to compare " + opt_.run.precision + " with");
      }
    }
    const Json outputs = cfg.value("outputs_fp32", Json::object());
    for (const auto& [tensor, stats] : outputs.items()) {
      if (!wanted(opt_, tensor)) continue;
      if (cancel) SEEDVAE_TRY(cancel->check());
      SEEDVAE_TRY(check_output(tensor));
    }
    if (intermediates_ && (opt_.run.precision != "fp32" || opt_.run.fp8_numerics)) {
      add({"", "intermediates", "skip", 0, 0, 0, 0,
           "per-block intermediates have no reference error in " + opt_.run.precision +
               (opt_.run.fp8_numerics ? " with FP8 numerics" : "")});
    } else if (intermediates_) {
      for (const auto& n : intermediates_->names()) {
        if (!wanted(opt_, n)) continue;
        auto it = captured_.find(n);
        if (it == captured_.end()) {
          add({"", n, "skip", 0, 0, 0, 0, "its case was not run"});
          continue;
        }
        SEEDVAE_ASSIGN_OR_RETURN(TensorView ref, intermediates_->get(n));
        const HostTensor r = ref.to_host(DType::kF32);
        SEEDVAE_ASSIGN_OR_RETURN(DiffStats d, compare(it->second, r));
        const double tol = opt_.tolerance * std::max(1.0, d.ref_absmax);
        add({"", n, d.max_abs <= tol ? "pass" : "FAIL", d.max_abs, d.rms, tol, 0,
             "relative bound: tolerance x max(1, max|ref|)"});
      }
    }
    model_ = nullptr;
    return Status::ok();
  }

 private:
  // Temporal chunks of `chunk` latents, with the model options being verified.
  StreamOptions stream(int chunk) const {
    StreamOptions so = stream_options(opt_.run);
    so.chunk_latents = chunk;
    return so;
  }

  static double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }

  // The bound of a golden tensor in the run's precision: the tf32 recommendation, PyTorch's own
  // fp16/bf16 error (bound_of_kind), or half of its bf16 error for fidelity.
  Bound bound_for(const GoldenName& g) const {
    if (opt_.run.precision == "tf32" && !opt_.run.fp8_numerics) {
      return {1e-2, 1.5e-3, "tf32 bound of the golden README"};
    }
    if (lowp_.empty()) return {opt_.tolerance, 1e-5, ""};
    const std::string kind = g.op == "enc_mean" ? "enc_moments" : g.op;
    Bound b = bound_of_kind(g, kind);
    if (opt_.run.precision == "fidelity") {
      b.max_abs *= 0.5;
      b.rms *= 0.5;
      b.source = "half of " + b.source;
    }
    return b;
  }

  // PyTorch's error in the mode lowp_ holds for the same tensor kind (enc_moments / dec_of_mean /
  // dec) and case, or the worst over the cases of that kind when the case has no entry.
  // The manifest's low-precision mode the run is held to: bf16 for fidelity and FP8 numerics.
  std::string lowp_mode() const {
    const std::string& pr = opt_.run.precision;
    return pr == "fidelity" || opt_.run.fp8_numerics ? std::string("bf16") : pr;
  }

  Bound bound_of_kind(const GoldenName& g, const std::string& kind) const {
    Bound b{0, 0, "PyTorch " + lowp_mode() + "_pure"};
    const std::string exact = g.case_name + "." + kind;
    const bool variant = g.split != 0 || !g.variant.empty();
    for (const auto& [name, e] : lowp_.items()) {
      const bool same_kind = name.size() > kind.size() &&
                             name.compare(name.size() - kind.size(), kind.size(), kind) == 0 &&
                             name[name.size() - kind.size() - 1] == '.';
      if (name == exact && !variant)
        return {e.value("max_abs", 0.0), e.value("rms", 0.0), b.source};
      if (same_kind) {
        b.max_abs = std::max(b.max_abs, e.value("max_abs", 0.0));
        b.rms = std::max(b.rms, e.value("rms", 0.0));
      }
    }
    if (variant) {
      // PyTorch measured its low-precision error on whole-clip tensors only. Streamed and tiled
      // variants keep the rms bound of their kind (the stable figure) and get 25% headroom on the
      // max abs, whose single worst element moves with the different summation order.
      b.max_abs *= 1.25;
      b.source += " (variant: worst " + kind + " rms, 1.25x its max abs)";
    } else {
      b.source += " (worst case of " + kind + ")";
    }
    return b;
  }

  Result<HostTensor> input(const std::string& name) {
    SEEDVAE_ASSIGN_OR_RETURN(TensorView v, inputs_->get(name));
    return v.to_host(DType::kF32);
  }
  Result<HostTensor> golden(const std::string& name) {
    SEEDVAE_ASSIGN_OR_RETURN(TensorView v, golden_->get(name));
    return v.to_host(DType::kF32);
  }

  // Runs with an observer that keeps the blocks the intermediates file has for this case.
  template <typename F>
  Result<HostTensor> capture(const std::string& case_name, bool whole, F run) {
    if (intermediates_ && whole) {
      model_->set_observer([&](std::string_view block, const Tensor& t) -> Status {
        const std::string key = case_name + ".inter." + std::string(block);
        if (!intermediates_->contains(key)) return Status::ok();
        SEEDVAE_ASSIGN_OR_RETURN(captured_[key], backend_.download(t));
        return Status::ok();
      });
    }
    auto r = run();
    model_->set_observer({});
    return r;
  }

  Result<HostTensor> encode(const std::string& case_name, int split) {
    const std::string key = case_name + "/enc/" + std::to_string(split);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor x, input(case_name));
    const StreamOptions so = stream(split / weights_.config.temporal_factor());
    SEEDVAE_ASSIGN_OR_RETURN(
        HostTensor m, capture(case_name, split == 0, [&] { return encode_video(*model_, x, so); }));
    cache_[key] = m;
    return m;
  }

  Status check_output(const std::string& tensor) {
    const GoldenName g = parse_name(tensor);
    auto t0 = Clock::now();
    const int chunk = g.split / weights_.config.temporal_factor();
    Result<HostTensor> out = internal_error("unknown golden tensor kind " + g.op);
    if (!g.variant.empty()) {
      // Blended spatial tiling (docs/model.md §5) with the manifest's tile parameters.
      const bool enc = g.op == "enc_moments";
      const Json& params = (enc ? tiled_encode_ : tiled_decode_).value(g.variant, Json::object());
      TileOptions to;
      to.mode = TilingMode::kBlend;
      to.layout = TileLayout::kReference;
      try {
        const auto size = params.at("tile_size").get<std::vector<int64_t>>();
        const auto overlap = params.at("tile_overlap").get<std::vector<int64_t>>();
        to.spec = {size.at(0), size.at(1), overlap.at(0), overlap.at(1)};
      } catch (const std::exception& e) {
        return corrupt_data("manifest tile parameters of " + tensor + ": " + e.what());
      }
      auto x = input(g.case_name);
      if (!x) return x.take_status();
      out =
          enc ? tiled_encode(*model_, *x, to, stream(1)) : tiled_decode(*model_, *x, to, stream(1));
    } else if (g.op == "enc_moments") {
      out = encode(g.case_name, g.split);
    } else if (g.op == "enc_mean") {
      auto m = encode(g.case_name, g.split);
      out = m ? Result<HostTensor>(moments_mean(*m)) : m.take_status();
    } else if (g.op == "dec_of_mean" || g.op == "dec") {
      // dec_of_mean decodes the golden mean of the same variant, so the decoder is checked alone.
      Result<HostTensor> z = internal_error("unreachable");
      if (g.op == "dec") {
        z = input(g.case_name);
      } else {
        auto m = golden(g.case_name + (g.split ? ".enc_moments_sliced_s" + std::to_string(g.split)
                                               : ".enc_moments"));
        z = m ? Result<HostTensor>(moments_mean(*m)) : m.take_status();
      }
      if (!z) return z.take_status();
      out = capture(g.case_name, g.split == 0,
                    [&] { return decode_latent(*model_, *z, stream(chunk)); });
    }
    if (!out) {
      if (out.status().code() == StatusCode::kInternal) {
        add({"", tensor, "skip", 0, 0, 0, 0, out.status().message()});
        return Status::ok();
      }
      return out.take_status().with_context(tensor);
    }
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor ref, golden(tensor));
    SEEDVAE_ASSIGN_OR_RETURN(DiffStats d, compare(*out, ref));
    const Bound b = bound_for(g);
    const bool ok = d.max_abs <= b.max_abs && (b.rms < 0 || d.rms <= b.rms);
    std::string note = b.source;
    if (b.rms >= 0 && !b.source.empty()) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "; rms bound %.2e", b.rms);
      note += buf;
    }
    VerifyRow row{"",    tensor,    ok ? "pass" : "FAIL", d.max_abs,
                  d.rms, b.max_abs, seconds_since(t0),    note};
    row.rms_tolerance = b.rms;
    add(std::move(row));
    return Status::ok();
  }

  Backend& backend_;
  const VerifyOptions& opt_;
  std::string name_;
  const std::function<void(const VerifyRow&)>& on_row_;
  VerifyReport& report_;
  VaeWeights weights_;
  std::optional<SafetensorsFile> inputs_, golden_, intermediates_;
  VaeModel* model_ = nullptr;
  std::map<std::string, HostTensor> cache_;
  Json tiled_decode_, tiled_encode_, lowp_;
  std::map<std::string, HostTensor> captured_;
};

// One Wan configuration of a reference folder laid out like ../shared/golden-wan (its manifest's
// configs carry "family": "wan2.1" / "wan2.2"): the weights (the recipe's digest against the
// manifest's, and the folder's file bit for bit), the inputs, every golden tensor (`<V>.mu`,
// `.log_var`, `.latent` from the streamed encoder; `<V>.dec` and `L3.dec` decoded from the golden
// latent / the L3 input, unclamped as the reference) and the per-stage intermediates.
class WanConfigRun {
 public:
  WanConfigRun(Backend& backend, const VerifyOptions& opt, std::string name,
               const std::function<void(const VerifyRow&)>& on_row, VerifyReport& report)
      : backend_(backend), opt_(opt), name_(std::move(name)), on_row_(on_row), report_(report) {}

  Status run(const Json& cfg, const CancelToken* cancel) {
    const auto dir = opt_.reference_dir;
    WanConfig config;
    try {
      const std::string family = cfg.at("family").get<std::string>();
      const Json& k = cfg.at("constructor_kwargs");
      config = family == "wan2.2" ? WanConfig::wan22() : WanConfig::wan21();
      config.dim = k.at("dim").get<int>();
      config.dec_dim = k.value("dec_dim", config.family == VaeFamily::kWan22 ? 256 : config.dim);
      config.z_dim = k.at("z_dim").get<int>();
      config.dim_mult = k.at("dim_mult").get<std::vector<int>>();
      config.num_res_blocks = k.at("num_res_blocks").get<int>();
      config.temporal_downsample = k.at("temperal_downsample").get<std::vector<bool>>();
    } catch (const std::exception& e) {
      return corrupt_data("manifest configuration " + name_ + ": " + e.what());
    }
    SEEDVAE_TRY(config.validate());
    if (opt_.run.precision != "fp32" || opt_.run.fp8_numerics) {
      return unsupported("the Wan reference data has error bounds for fp32 only (no " +
                         opt_.run.precision + " measurements in its manifest)");
    }
    const Json weights = cfg.value("weights", Json::object());
    const uint64_t seed = weights.value("seed", uint64_t{0});
    auto t0 = Clock::now();
    VaeWeights synthetic = synthesize_wan_weights(config, seed);
    const std::string digest = fp16_digest(synthetic);
    const std::string want = weights.value("fp16_digest_checkpoint_order", std::string());
    add({"", "weights (recipe)", digest == want ? "pass" : "FAIL", 0, 0, 0, seconds_since(t0),
         "synthetic recipe, seed " + std::to_string(seed) + ", fp16 digest " +
             digest.substr(0, 16) + (digest == want ? " = manifest" : " != manifest")});
    std::optional<std::filesystem::path> wfile = opt_.weights;
    if (!wfile && weights.value("file", Json()).is_string()) {
      wfile = dir / weights["file"].get<std::string>();
    }
    if (wfile) {
      t0 = Clock::now();
      SEEDVAE_ASSIGN_OR_RETURN(weights_, load_weights(*wfile));
      if (!weights_.is_wan() || !(weights_.wan == config)) {
        return invalid_argument("weights configuration (" + weights_.describe() +
                                ") differs from the manifest's (" + config.to_string() + ")");
      }
      const bool same = fp16_digest(weights_) == digest;
      add({"", "weights", same || opt_.weights ? "pass" : "FAIL", 0, 0, 0, seconds_since(t0),
           wfile->filename().string() + (same ? " equals the synthetic recipe bit for bit"
                                              : " differs from the synthetic recipe")});
    } else {
      weights_ = std::move(synthetic);
    }
    SEEDVAE_ASSIGN_OR_RETURN(inputs_, SafetensorsFile::open(dir / name_ / "inputs.safetensors"));
    SEEDVAE_ASSIGN_OR_RETURN(golden_,
                             SafetensorsFile::open(dir / name_ / "golden_fp32.safetensors"));
    add(inputs_row(*inputs_, cfg));
    if (!opt_.run_model) return Status::ok();

    SEEDVAE_ASSIGN_OR_RETURN(WanModel model, WanModel::create(backend_, weights_));
    model_ = &model;
    const Json outputs = cfg.value("outputs_fp32", Json::object());
    for (const auto& [tensor, stats] : outputs.items()) {
      if (!wanted(opt_, tensor)) continue;
      if (cancel) SEEDVAE_TRY(cancel->check());
      SEEDVAE_TRY(check_output(tensor));
    }
    const auto inter_path = dir / name_ / "intermediates_fp32.safetensors";
    if (opt_.intermediates && std::filesystem::exists(inter_path)) {
      SEEDVAE_TRY(check_intermediates(inter_path));
    }
    model_ = nullptr;
    return Status::ok();
  }

 private:
  void add(VerifyRow row) {
    row.config = name_;
    if (on_row_) on_row_(row);
    report_.rows.push_back(std::move(row));
  }
  static double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }
  Result<HostTensor> read(const SafetensorsFile& f, const std::string& name) {
    SEEDVAE_ASSIGN_OR_RETURN(TensorView v, f.get(name));
    return v.to_host(DType::kF32);
  }
  // The run's temporal chunks (any chunking gives the reference's result, docs/model.md §10.5).
  WanStreamOptions wrapper(bool clamp) const {
    WanStreamOptions o;
    o.stream = stream_options(opt_.run);
    o.clamp = clamp;
    return o;
  }

  Result<WanEncoded> encode(const std::string& case_name) {
    if (auto it = encoded_.find(case_name); it != encoded_.end()) return it->second;
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor x, read(*inputs_, case_name));
    SEEDVAE_ASSIGN_OR_RETURN(WanEncoded e, wan_encode(*model_, x, wrapper(true)));
    encoded_[case_name] = e;
    return e;
  }

  Status check_output(const std::string& tensor) {
    const auto dot = tensor.find('.');
    const std::string case_name = tensor.substr(0, dot), kind = tensor.substr(dot + 1);
    auto t0 = Clock::now();
    Result<HostTensor> out = internal_error("unknown golden tensor kind " + kind);
    if (kind == "mu" || kind == "log_var" || kind == "latent") {
      auto e = encode(case_name);
      if (!e) return e.take_status().with_context(tensor);
      out = kind == "mu" ? e->mu : kind == "log_var" ? e->log_var : e->latent;
    } else if (kind == "dec") {
      // from the golden latent (the decoder checked alone), or the latent case's input
      auto z = golden_->contains(case_name + ".latent") ? read(*golden_, case_name + ".latent")
                                                        : read(*inputs_, case_name);
      if (!z) return z.take_status().with_context(tensor);
      out = wan_decode(*model_, *z, wrapper(false));
    }
    if (!out) {
      if (out.status().code() == StatusCode::kInternal) {
        add({"", tensor, "skip", 0, 0, 0, 0, out.status().message()});
        return Status::ok();
      }
      return out.take_status().with_context(tensor);
    }
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor ref, read(*golden_, tensor));
    SEEDVAE_ASSIGN_OR_RETURN(DiffStats d, compare(*out, ref));
    const double rms_bound = 1e-5;
    const bool ok = d.max_abs <= opt_.tolerance && d.rms <= rms_bound;
    VerifyRow row{"",    tensor,         ok ? "pass" : "FAIL", d.max_abs,
                  d.rms, opt_.tolerance, seconds_since(t0),    "fp32; rms bound 1.00e-05"};
    row.rms_tolerance = rms_bound;
    add(std::move(row));
    return Status::ok();
  }

  // The encoder stages of the first video case and the decoder stages of the latent case that
  // the file has, per chunk joined along T, against a relative bound.
  Status check_intermediates(const std::filesystem::path& path) {
    SEEDVAE_ASSIGN_OR_RETURN(SafetensorsFile inter, SafetensorsFile::open(path));
    std::map<std::string, HostTensor> got;
    std::string case_name;
    model_->set_observer([&](std::string_view stage, const Tensor& t) -> Status {
      const std::string key = case_name + ".inter." + std::string(stage);
      if (!inter.contains(key)) return Status::ok();
      SEEDVAE_ASSIGN_OR_RETURN(HostTensor h, backend_.download(t));
      auto it = got.find(key);
      if (it == got.end()) {
        got.emplace(key, std::move(h));
      } else {
        const HostTensor parts[] = {std::move(it->second), std::move(h)};
        SEEDVAE_ASSIGN_OR_RETURN(it->second, concat_time(parts));
      }
      return Status::ok();
    });
    std::set<std::string> cases;
    for (const auto& n : inter.names()) cases.insert(n.substr(0, n.find('.')));
    Status st = Status::ok();
    for (const std::string& c : cases) {
      case_name = c;
      auto x = read(*inputs_, c);
      if (!x) {
        st = x.take_status();
        break;
      }
      if (x->shape()[1] == model_->config().in_channels) {
        auto e = encode_video(*model_, *x, wrapper(false).stream);
        if (!e) st = e.take_status();
      } else {
        auto raw = wan_denormalize_latent(*x, model_->family());
        auto d = raw ? decode_latent(*model_, *raw, wrapper(false).stream) : raw.take_status();
        if (!d) st = d.take_status();
      }
      if (!st) break;
    }
    model_->set_observer({});
    SEEDVAE_TRY(st);
    for (const auto& n : inter.names()) {
      if (!wanted(opt_, n)) continue;
      auto it = got.find(n);
      if (it == got.end()) {
        add({"", n, "FAIL", 0, 0, 0, 0, "the model reported no such stage"});
        continue;
      }
      SEEDVAE_ASSIGN_OR_RETURN(HostTensor ref, read(inter, n));
      SEEDVAE_ASSIGN_OR_RETURN(DiffStats d, compare(it->second, ref));
      const double tol = opt_.tolerance * std::max(1.0, d.ref_absmax);
      add({"", n, d.max_abs <= tol ? "pass" : "FAIL", d.max_abs, d.rms, tol, 0,
           "relative bound: tolerance x max(1, max|ref|)"});
    }
    return Status::ok();
  }

  Backend& backend_;
  const VerifyOptions& opt_;
  std::string name_;
  const std::function<void(const VerifyRow&)>& on_row_;
  VerifyReport& report_;
  VaeWeights weights_;
  std::optional<SafetensorsFile> inputs_, golden_;
  WanModel* model_ = nullptr;
  std::map<std::string, WanEncoded> encoded_;
};

}  // namespace

Result<VerifyReport> run_verify(Backend& backend, const VerifyOptions& options,
                                const std::function<void(const VerifyRow&)>& on_row,
                                const CancelToken* cancel) {
  SEEDVAE_ASSIGN_OR_RETURN(Json manifest, read_manifest(options.reference_dir));
  VerifyReport report;
  std::vector<std::string> names = options.configs;
  if (names.empty()) {
    for (const auto& [k, v] : manifest["configs"].items()) names.push_back(k);
  }
  for (const auto& name : names) {
    if (!manifest["configs"].contains(name)) {
      return invalid_argument("the manifest has no configuration \"" + name + "\"");
    }
    const Json& cfg = manifest["configs"][name];
    if (cfg.value("family", std::string()).starts_with("wan")) {
      WanConfigRun run(backend, options, name, on_row, report);
      SEEDVAE_TRY(run.run(cfg, cancel).with_context("configuration " + name));
      continue;
    }
    ConfigRun run(backend, options, name, on_row, report);
    SEEDVAE_TRY(run.run(cfg, cancel).with_context("configuration " + name));
  }
  return report;
}

std::string verify_row_json(const VerifyRow& r) {
  return Json{{"config", r.config},   {"tensor", r.tensor}, {"status", r.status},
              {"max_abs", r.max_abs}, {"rms", r.rms},       {"tolerance", r.tolerance},
              {"seconds", r.seconds}, {"note", r.note},     {"rms_tolerance", r.rms_tolerance},
              {"margin", r.margin()}}
      .dump();
}

std::string margin_text(const VerifyRow& row) {
  const double m = row.margin();
  if (m < 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", m);
  return buf;
}

std::string worst_margin_text(const VerifyReport& report) {
  const VerifyRow* w = report.worst();
  if (w == nullptr) return "";
  return "; worst margin " + margin_text(*w) + " (" + w->config + " " + w->tensor + ")";
}

}  // namespace seedvae
