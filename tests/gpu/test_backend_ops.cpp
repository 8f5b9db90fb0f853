// Every CUDA backend op against the CPU backend (the definition of correctness), on random shapes
// including odd channel counts, single frames and 1x1 pixels, in every precision and layout and
// with each toggle; plus error handling (bad arguments, out of memory, wrong thread) and memory
// statistics. Inputs are rounded to the GPU precision first, so only the arithmetic differs.
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "core/backend/fp8_numerics.h"
#include "core/cpu/cpu_backend.h"
#include "gpu/cuda_backend.h"
#include "tests/gpu/gpu_test.h"

using namespace seedvae;
using seedvae::gpu::CudaOptions;
using seedvae::gpu::Precision;

namespace {

struct Config {
  std::string name;
  CudaOptions opt;
  double tol_max;  // max abs <= tol_max * max(1, max |ref|)
  double tol_rms;  // rms(diff) <= tol_rms * max(rms(ref), 1e-3)
};

CudaOptions base(Precision p) {
  CudaOptions o;
  o.precision = p;
  o.autotune_cache = "";  // tests never touch the user's cache
  return o;
}

std::vector<Config>& configs() {
  static std::vector<Config> c = [] {
    std::vector<Config> v;
    v.push_back({"fp32", base(Precision::kFp32), 1e-4, 2e-5});
    {
      CudaOptions o = base(Precision::kFp32);
      o.channels_last = false;
      v.push_back({"fp32-ncdhw", o, 1e-4, 2e-5});
    }
    {
      CudaOptions o = base(Precision::kFp32);
      o.fused_gn_silu = false;
      o.fused_attention = false;
      o.buffer_reuse = false;
      o.caching_allocator = false;
      o.autotune = false;
      o.max_conv_elements = 8000;  // forces temporal splitting of the larger convolutions
      v.push_back({"fp32-unfused-split", o, 1e-4, 2e-5});
    }
    {
      CudaOptions o = base(Precision::kBf16);
      // Below one frame of the 64-channel case with its causal frames: those convolutions run
      // frame by frame in bands of rows (Conv3dCudnn::run_bands), as 4K frames do (bf16: strict
      // fp32 has no channels-last cuDNN algorithm for them and detours through NCDHW).
      o.max_conv_elements = 4100;
      v.push_back({"bf16-row-bands", o, 5e-2, 2e-2});
    }
    {
      CudaOptions o = base(Precision::kBf16);
      o.channels_last = false;
      o.max_conv_elements = 8000;  // strided NCDHW pieces
      v.push_back({"bf16-ncdhw-split", o, 5e-2, 2e-2});
    }
    v.push_back({"tf32", base(Precision::kTf32), 1e-2, 3e-3});
    v.push_back({"fp16", base(Precision::kFp16), 1e-2, 3e-3});
    v.push_back({"bf16", base(Precision::kBf16), 5e-2, 2e-2});
    {
      // convolutions on the faster of cuDNN's legacy and graph APIs (--graph-api)
      CudaOptions o = base(Precision::kBf16);
      o.graph_api = true;
      v.push_back({"bf16-graph-api", o, 5e-2, 2e-2});
    }
    {
      // 3-D convolutions accumulating in fp16 (cuDNN's graph engines): a few times fp16's error
      CudaOptions o = base(Precision::kFp16);
      o.fp16_accumulation = true;
      v.push_back({"fp16-acc16", o, 2e-2, 6e-3});
    }
    // fp32 storage, convolutions on fp16 copies: fp16's error of one rounding, not several
    v.push_back({"fidelity", base(Precision::kFidelity), 5e-3, 1.5e-3});
    {
      CudaOptions o = base(Precision::kFidelity);
      o.channels_last = false;
      v.push_back({"fidelity-ncdhw", o, 5e-3, 1.5e-3});
    }
    for (Precision p : {Precision::kBf16, Precision::kFp16}) {
      // The kernels of a card with 99 KiB of shared memory per block (RTX 50xx): the head-512
      // attention on the SIMT kernel instead of the tensor-core one.
      CudaOptions o = base(p);
      o.smem_limit_kib = 99;
      v.push_back(p == Precision::kBf16 ? Config{"bf16-smem99", o, 5e-2, 2e-2}
                                        : Config{"fp16-smem99", o, 1e-2, 3e-3});
    }
    {
      CudaOptions o = base(Precision::kBf16);
      o.channels_last = false;
      v.push_back({"bf16-ncdhw", o, 5e-2, 2e-2});
    }
    {
      CudaOptions o = base(Precision::kBf16);
      o.fused_gn_silu = false;
      o.fused_attention = false;
      o.buffer_reuse = false;
      o.fuse_bias = false;
      o.autotune = false;
      v.push_back({"bf16-unfused", o, 5e-2, 2e-2});
    }
    {
      CudaOptions o = base(Precision::kFp16);
      o.channels_last = false;
      o.fused_attention = false;
      v.push_back({"fp16-ncdhw-materialised", o, 1e-2, 3e-3});
    }
    {
      CudaOptions o = base(Precision::kBf16);
      o.offload_state = true;
      o.offload_min_bytes = 0;  // every slice goes to host memory and back
      o.offload_window_mib = 0;
      v.push_back({"bf16-offload", o, 5e-2, 2e-2});
    }
    return v;
  }();
  return c;
}

Backend& cpu() {
  static std::unique_ptr<Backend> b = [] {
    auto r = create_cpu_backend({});
    if (!r) {
      std::printf("cannot create the CPU backend: %s\n", r.status().to_string().c_str());
      std::exit(1);
    }
    return std::move(r).value();
  }();
  return *b;
}

// One backend per configuration, created on first use (on the main thread).
Backend* gpu(size_t i) {
  static std::map<size_t, std::unique_ptr<Backend>> made;
  auto it = made.find(i);
  if (it != made.end()) return it->second.get();
  auto r = gpu::create_cuda_backend(configs()[i].opt);
  if (!r) {
    std::printf("    cannot create CUDA backend %s: %s\n", configs()[i].name.c_str(),
                r.status().to_string().c_str());
    made[i] = nullptr;
    return nullptr;
  }
  Backend* b = r.value().get();
  made[i] = std::move(r).value();
  return b;
}

DType storage_type(Precision p) {
  return p == Precision::kFp16 ? DType::kF16 : p == Precision::kBf16 ? DType::kBF16 : DType::kF32;
}

HostTensor random_tensor(const Shape& s, uint32_t seed, float scale = 1.f, float offset = 0.f) {
  HostTensor t(DType::kF32, s);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (float& v : t.f32()) v = offset + scale * u(rng);
  return t;
}

HostTensor rounded(const HostTensor& t, Precision p) {
  const DType d = storage_type(p);
  if (d == DType::kF32) return t;
  return t.to(d).to(DType::kF32);
}

struct Worst {
  double ratio = 0;
  std::string where;
};
std::map<std::string, Worst>& worst() {
  static std::map<std::string, Worst> w;
  return w;
}

void expect_close(const HostTensor& got, const HostTensor& want, const Config& cfg,
                  const std::string& what) {
  auto d = compare(got, want);
  CHECK_MSG(d.is_ok(), what + " [" + cfg.name + "]: " + d.status().to_string());
  if (!d) return;
  double ref_sq = 0;
  for (float v : want.f32()) ref_sq += double(v) * v;
  const double ref_rms = std::sqrt(ref_sq / std::max<int64_t>(1, want.numel()));
  const double lim_max = cfg.tol_max * std::max(1.0, d->ref_absmax);
  const double lim_rms = cfg.tol_rms * std::max(ref_rms, 1e-3);
  const bool ok = d->max_abs <= lim_max && d->rms <= lim_rms && std::isfinite(d->max_abs);
  const double ratio = std::max(d->max_abs / lim_max, d->rms / lim_rms);
  Worst& w = worst()[cfg.name];
  if (!(ratio <= w.ratio)) w = {ratio, what};
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s [%s]: max abs %.3g (limit %.3g), rms %.3g (limit %.3g)",
                what.c_str(), cfg.name.c_str(), d->max_abs, lim_max, d->rms, lim_rms);
  CHECK_MSG(ok, buf);
}

// Runs f(cfg, backend) for every configuration.
template <typename F>
void for_each_config(F f) {
  for (size_t i = 0; i < configs().size(); ++i) {
    Backend* b = gpu(i);
    CHECK_MSG(b != nullptr, "backend " + configs()[i].name);
    if (b) f(configs()[i], *b);
  }
}

struct Pair {
  Tensor c, g;
};

// Uploads the same (precision-rounded) values to the CPU and the CUDA backend.
bool upload_pair(Backend& g, const Config& cfg, const HostTensor& h, bool weight, Pair* out,
                 const std::string& name = "w") {
  const HostTensor r = (weight && h.shape().rank() == 1) ? h : rounded(h, cfg.opt.precision);
  auto c = weight ? cpu().upload_weight(r, name) : cpu().upload(r);
  auto d = weight ? g.upload_weight(r, name) : g.upload(r);
  CHECK_MSG(c.is_ok(), c.status().to_string());
  CHECK_MSG(d.is_ok(), d.status().to_string());
  if (!c || !d) return false;
  out->c = std::move(c).value();
  out->g = std::move(d).value();
  return true;
}

void compare_results(Backend& g, const Config& cfg, const Result<Tensor>& rc,
                     const Result<Tensor>& rg, const std::string& what) {
  CHECK_MSG(rc.is_ok(), what + " cpu: " + rc.status().to_string());
  CHECK_MSG(rg.is_ok(), what + " [" + cfg.name + "]: " + rg.status().to_string());
  if (!rc || !rg) return;
  CHECK_MSG(rg->shape == rc->shape,
            what + ": shape " + rg->shape.to_string() + " vs " + rc->shape.to_string());
  auto hc = cpu().download(*rc);
  auto hg = g.download(*rg);
  CHECK_MSG(hc.is_ok() && hg.is_ok(), what + ": download failed");
  if (hc && hg) expect_close(*hg, *hc, cfg, what);
}

// ---- convolution ---------------------------------------------------------------------------

struct ConvCase {
  Shape x, w;
  Conv3dParams p;
  bool bias = true;
};

std::vector<ConvCase> conv_cases() {
  std::vector<ConvCase> v;
  auto sym = [](int pad) {
    Conv3dParams p;
    p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = pad;
    return p;
  };
  Conv3dParams down_t;  // Downsample3D temporal: stride 2, pad (0,1,0,1)
  down_t.stride_t = down_t.stride_h = down_t.stride_w = 2;
  down_t.pad_bottom = down_t.pad_right = 1;
  Conv3dParams down_s = down_t;
  down_s.stride_t = 1;
  v.push_back({{1, 3, 5, 9, 7}, {8, 3, 3, 3, 3}, sym(1)});            // odd Cin (conv_in-like)
  v.push_back({{1, 16, 4, 6, 10}, {7, 16, 3, 3, 3}, sym(1)});         // odd Cout
  v.push_back({{1, 16, 5, 8, 8}, {16, 16, 3, 3, 3}, down_t});         // temporal downsample
  v.push_back({{1, 16, 1, 9, 9}, {16, 16, 1, 3, 3}, down_s});         // spatial downsample, odd H/W
  v.push_back({{2, 8, 3, 5, 5}, {8, 8, 3, 3, 3}, sym(1)});            // N = 2
  v.push_back({{1, 32, 2, 4, 4}, {64, 32, 1, 1, 1}, {}});             // pointwise (GEMM)
  v.push_back({{2, 12, 2, 3, 3}, {5, 12, 1, 1, 1}, {}});              // pointwise, N = 2, odd Cout
  v.push_back({{1, 8, 3, 1, 1}, {8, 8, 3, 1, 1}, {}});                // 1x1 pixels, temporal taps
  v.push_back({{1, 8, 3, 1, 1}, {8, 8, 3, 3, 3}, sym(1)});            // 1x1 pixels, 3x3 padded
  v.push_back({{1, 24, 9, 6, 6}, {16, 24, 3, 3, 3}, sym(1), false});  // no bias, 9 frames
  v.push_back({{1, 64, 4, 5, 7}, {64, 64, 3, 3, 3}, sym(1)});         // real-ish channel count
  v.push_back({{1, 16, 6, 9, 11}, {3, 16, 3, 3, 3}, sym(1)});         // conv_out-like (few outputs)
  v.push_back({{1, 3, 5, 10, 9}, {16, 3, 3, 3, 3}, down_t});          // few inputs, stride 2, asym
  v.push_back({{1, 8, 2, 5, 5}, {3, 8, 1, 3, 3}, sym(1)});            // few outputs, kT = 1
  return v;
}

GPU_TEST(conv3d_matches_cpu) {
  uint32_t seed = 1;
  for (const ConvCase& cc : conv_cases()) {
    const HostTensor xh = random_tensor(cc.x, seed++);
    const double fan = double(cc.w[1] * cc.w[2] * cc.w[3] * cc.w[4]);
    const HostTensor wh = random_tensor(cc.w, seed++, float(std::sqrt(3.0 / fan)));
    const HostTensor bh = random_tensor(Shape{cc.w[0]}, seed++, 0.1f);
    const std::string what = "conv3d " + cc.x.to_string() + " * " + cc.w.to_string();
    for_each_config([&](const Config& cfg, Backend& g) {
      Pair x, w, b;
      if (!upload_pair(g, cfg, xh, false, &x) || !upload_pair(g, cfg, wh, true, &w)) return;
      if (cc.bias && !upload_pair(g, cfg, bh, true, &b)) return;
      compare_results(g, cfg, cpu().conv3d(x.c, w.c, b.c, cc.p), g.conv3d(x.g, w.g, b.g, cc.p),
                      what);
    });
  }
}

// The model's output (Conv3dParams::model_output) comes back in fp32 from a 16-bit backend,
// computed from the 16-bit operands without rounding: within fp32 round-off of the CPU oracle on
// the same rounded operands. Frame copies take it; compute ops refuse it.
GPU_TEST(model_output_is_fp32_and_not_rounded) {
  Conv3dParams p;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
  p.model_output = true;
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{1, 16, 6, 9, 11}, {3, 16, 3, 3, 3}},   // the decoder's conv_out (few outputs)
      {{1, 64, 5, 5, 7}, {32, 64, 3, 3, 3}}};  // the encoder's conv_out (fp32 copies)
  uint32_t seed = 900;
  for (const auto& [xs, ws] : cases) {
    const HostTensor xh = random_tensor(xs, seed++);
    const HostTensor wh = random_tensor(ws, seed++, float(std::sqrt(3.0 / (ws[1] * 27.0))));
    const HostTensor bh = random_tensor(Shape{ws[0]}, seed++, 0.1f);
    const std::string what = "model output " + xs.to_string() + " * " + ws.to_string();
    for_each_config([&](const Config& cfg, Backend& g) {
      Pair x, w, b;
      if (!upload_pair(g, cfg, xh, false, &x) || !upload_pair(g, cfg, wh, true, &w) ||
          !upload_pair(g, cfg, bh, true, &b)) {
        return;
      }
      const bool half = g.activation_dtype() != DType::kF32;
      auto rg = g.conv3d(x.g, w.g, b.g, p);
      CHECK_MSG(rg.is_ok(), what + " [" + cfg.name + "]: " + rg.status().to_string());
      if (!rg) return;
      CHECK_MSG(rg->dtype == DType::kF32, what + " [" + cfg.name + "]: not fp32");
      const Config tight{cfg.name, cfg.opt, 1e-4, 2e-5};
      compare_results(g, half ? tight : cfg, cpu().conv3d(x.c, w.c, b.c, p), rg, what);
      // frame copies keep it fp32 and equal
      auto sl = g.slice_frames(*rg, 1, 3);
      auto cat = sl ? g.concat_frames(*sl, *sl) : Result<Tensor>(sl.status());
      CHECK_MSG(cat.is_ok() && cat->dtype == DType::kF32,
                what + " [" + cfg.name + "] slice/concat: " + cat.status().to_string());
      if (half) {
        GroupNormParams gp;
        gp.groups = 1;
        auto gn = g.group_norm(*rg, Tensor{}, Tensor{}, gp);
        CHECK_MSG(!gn.is_ok() && gn.status().code() == StatusCode::kInvalidArgument &&
                      gn.status().message().find("model output") != std::string::npos,
                  what + " [" + cfg.name + "]: a compute op took the fp32 output");
      }
    });
  }
}

// fp16 accumulation runs the 3-D convolutions on cuDNN's graph engines (counted by the report);
// without the switch none do. The results are checked against the CPU in conv3d_matches_cpu.
GPU_TEST(fp16_accumulation_uses_the_graph_engines) {
  for (const Config& cfg : configs()) {
    if (cfg.name != "fp16-acc16" && cfg.name != "fp16") continue;
    auto b = gpu::create_cuda_backend(cfg.opt);
    CHECK_MSG(b.is_ok(), b.status().to_string());
    if (!b) continue;
    Conv3dParams p;
    p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
    auto x = (*b)->upload(random_tensor({1, 64, 4, 8, 8}, 77));
    auto w = (*b)->upload_weight(random_tensor({64, 64, 3, 3, 3}, 78, 0.03f), "w");
    CHECK(x.is_ok() && w.is_ok());
    if (!x || !w) continue;
    auto y = (*b)->conv3d(*x, *w, Tensor{}, p);
    CHECK_MSG(y.is_ok(), y.status().to_string());
    auto r = gpu::cuda_backend_report(**b);
    CHECK(r.has_value());
    if (r) {
      const int64_t want = cfg.opt.fp16_accumulation ? 1 : 0;
      CHECK_MSG(r->fp16_accumulated_convs == want, cfg.name + ": " +
                                                       std::to_string(r->fp16_accumulated_convs) +
                                                       " convolutions with fp16 accumulation");
      CHECK((gpu::describe_options(r->options).find("fp16 accumulation") != std::string::npos) ==
            cfg.opt.fp16_accumulation);
    }
  }
}

// With autotune and graph engines (--graph-api), a 16-bit convolution runs on the faster of
// cuDNN's two APIs. The choice is kept
// in the autotune cache: a second backend that loads the cache runs the same kernel (same bits,
// same count of graph-API convolutions) without timing again, and the result matches the CPU.
// The 96-channel problem is one where the graph API wins on an H200.
GPU_TEST(api_choice_is_persisted_with_the_autotune_cache) {
  const std::string cache = "/tmp/seedvae-test-api-choice-" + std::to_string(::getpid()) + ".tsv";
  std::remove(cache.c_str());
  const HostTensor xh = random_tensor({1, 96, 6, 48, 80}, 81);
  const HostTensor wh = random_tensor({96, 96, 3, 3, 3}, 82, 0.02f);
  Conv3dParams p;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
  std::vector<HostTensor> out;
  std::vector<int64_t> graph_convs;
  for (int run = 0; run < 2; ++run) {
    CudaOptions o = base(Precision::kBf16);
    o.autotune_cache = cache;
    o.graph_api = true;
    auto b = gpu::create_cuda_backend(o);
    CHECK_MSG(b.is_ok(), b.status().to_string());
    if (!b) return;
    auto x = (*b)->upload(xh);
    auto w = (*b)->upload_weight(wh, "w");
    CHECK(x.is_ok() && w.is_ok());
    if (!x || !w) return;
    auto y = (*b)->conv3d(*x, *w, Tensor{}, p);
    CHECK_MSG(y.is_ok(), y.status().to_string());
    if (!y) return;
    // a second call of the same problem takes the same path
    auto y2 = (*b)->conv3d(*x, *w, Tensor{}, p);
    auto h = (*b)->download(*y);
    auto h2 = y2 ? (*b)->download(*y2) : Result<HostTensor>(y2.status());
    CHECK(h.is_ok() && h2.is_ok());
    if (!h || !h2) return;
    auto same = compare(*h, *h2);
    CHECK(same.is_ok() && same->max_abs == 0.0);
    out.push_back(std::move(*h));
    auto r = gpu::cuda_backend_report(**b);
    CHECK(r.has_value());
    graph_convs.push_back(r ? r->graph_api_convs : -1);
    if (run == 0) CHECK(r && r->conv_searched >= 1);
    if (run == 1) CHECK(r && r->conv_cache_loaded >= 1);
    CHECK((*b)->save_tuning().is_ok());
  }
  if (out.size() != 2) return;
  auto d = compare(out[0], out[1]);
  CHECK_MSG(d.is_ok() && d->max_abs == 0.0, "the second backend ran another kernel: max abs " +
                                                std::to_string(d.is_ok() ? d->max_abs : -1.0));
  CHECK_MSG(graph_convs[1] == graph_convs[0] && (graph_convs[0] == 0 || graph_convs[0] == 2),
            "graph-API convolutions: " + std::to_string(graph_convs[0]) + " then " +
                std::to_string(graph_convs[1]));
  std::printf("    96-channel bf16 convolution: %s API\n", graph_convs[0] > 0 ? "graph" : "legacy");
  auto ref = cpu().conv3d(*cpu().upload(xh), *cpu().upload_weight(wh, "w"), Tensor{}, p);
  CHECK(ref.is_ok());
  if (ref) {
    auto dr = compare(out[0], *cpu().download(*ref));
    CHECK(dr.is_ok() && dr->max_abs <= 0.05);
  }
  std::remove(cache.c_str());
}

// FP8 convolutions equal the CPU backend under the FP8 numerics wrapper (the same e4m3 rounding
// of the same bf16 operands: x per tensor, w per output channel) up to the bf16 rounding of the
// output; plain bf16 differs from that oracle by FP8's own error (a few percent rms), so the
// limits tell the paths apart. The report counts every convolution as FP8. A card without FP8
// tensor cores refuses the switch by name.
GPU_TEST(fp8_convolutions_match_the_emulation) {
  struct Case {
    Shape x, w;
    Conv3dParams p;
  };
  std::vector<Case> cases;
  {
    Conv3dParams p;
    p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
    cases.push_back({{1, 32, 6, 8, 8}, {32, 32, 3, 3, 3}, p});  // a resnet convolution
    cases.push_back({{1, 64, 4, 7, 9}, {16, 64, 3, 3, 3}, p});  // channel change, odd frame
  }
  cases.push_back({{1, 64, 3, 6, 6}, {32, 64, 1, 1, 1}, {}});  // a 1x1x1 shortcut
  {
    Conv3dParams p;  // Downsample3D: stride 2, padding (0, 1, 0, 1)
    p.stride_h = p.stride_w = 2;
    p.pad_bottom = p.pad_right = 1;
    cases.push_back({{1, 32, 2, 8, 8}, {32, 32, 1, 3, 3}, p});
  }
  std::unique_ptr<Backend> oracle = make_fp8_numerics_backend(cpu());
  std::vector<Config> fp8_configs;
  {
    CudaOptions o = base(Precision::kBf16);
    o.fp8_convs = true;
    fp8_configs.push_back({"bf16-fp8", o, 2e-2, 8e-3});
    o.fuse_bias = false;
    o.max_conv_elements = 16000;  // pieces of a few output frames
    fp8_configs.push_back({"bf16-fp8-split-unfused", o, 2e-2, 8e-3});
  }
  for (const Config& cfg : fp8_configs) {
    auto made = gpu::create_cuda_backend(cfg.opt);
    if (!made) {
      CHECK_MSG(made.status().code() == StatusCode::kUnsupported &&
                    made.status().message().find("FP8 tensor cores") != std::string::npos,
                cfg.name + ": " + made.status().to_string());
      std::printf("    %s: refused on this card (%s)\n", cfg.name.c_str(),
                  made.status().message().c_str());
      continue;
    }
    Backend& g = **made;
    uint32_t seed = 1200;
    for (const Case& c : cases) {
      const std::string what = "fp8 conv3d " + c.x.to_string() + " * " + c.w.to_string();
      const HostTensor xh = random_tensor(c.x, seed++, 2.f);
      const double fan = double(c.w[1] * c.w[2] * c.w[3] * c.w[4]);
      const HostTensor wh = random_tensor(c.w, seed++, float(std::sqrt(3.0 / fan)));
      const HostTensor bh = random_tensor(Shape{c.w[0]}, seed++, 0.1f);
      Pair x, w, b;
      if (!upload_pair(g, cfg, xh, false, &x) || !upload_pair(g, cfg, wh, true, &w) ||
          !upload_pair(g, cfg, bh, true, &b)) {
        continue;
      }
      compare_results(g, cfg, oracle->conv3d(x.c, w.c, b.c, c.p), g.conv3d(x.g, w.g, b.g, c.p),
                      what);
      // the plain bf16 oracle is further away than the limits (the FP8 rounding is real)
      auto plain = cpu().conv3d(x.c, w.c, b.c, c.p);
      auto got = g.conv3d(x.g, w.g, b.g, c.p);
      if (plain && got) {
        auto hp = cpu().download(*plain);
        auto hg = g.download(*got);
        auto d = hp && hg ? compare(*hg, *hp) : Result<DiffStats>(hp.status());
        CHECK_MSG(d.is_ok(), what + ": " + d.status().to_string());
        if (d) {
          double sq = 0;
          for (float v : hp->f32()) sq += double(v) * v;
          const double rel = d->rms / std::sqrt(sq / double(hp->numel()));
          std::printf("    %s [%s]: rms vs exact bf16 %.3g of the output's rms\n", what.c_str(),
                      cfg.name.c_str(), rel);
          CHECK_MSG(rel > cfg.tol_rms, what + ": FP8 output as close to bf16 as bf16 itself");
        }
      }
    }
    auto r = gpu::cuda_backend_report(g);
    CHECK(r.has_value());
    if (r) {
      CHECK_MSG(r->fp8_convs == int64_t(2 * cases.size()) && r->fp8_refused_convs == 0,
                cfg.name + ": " + std::to_string(r->fp8_convs) + " FP8, " +
                    std::to_string(r->fp8_refused_convs) + " refused");
      CHECK(gpu::describe_options(r->options).find("FP8 convolutions") != std::string::npos);
    }
  }
  // without the switch, none
  for (size_t i = 0; i < configs().size(); ++i) {
    Backend* g = configs()[i].name == "bf16" ? gpu(i) : nullptr;
    if (!g) continue;
    auto r = gpu::cuda_backend_report(*g);
    CHECK(r && r->fp8_convs == 0);
  }
}

// ---- the Wan VAEs' ops -------------------------------------------------------------------

// Every Wan op against the CPU backend in every configuration (both layouts, every precision).
GPU_TEST(wan_ops_match_cpu) {
  uint32_t seed = 3000;
  for_each_config([&](const Config& cfg, Backend& g) {
    auto run = [&](const std::string& what, const HostTensor& xh, auto op) {
      Pair x;
      if (!upload_pair(g, cfg, xh, false, &x)) return;
      compare_results(g, cfg, op(cpu(), x.c), op(g, x.g), what);
    };
    // channels-last rows of 16-byte vectors take 1 to 32 lanes per row (24, 64, 96, 1024
    // channels); 3 channels (and 1024 in fp32: more vectors than the lanes hold) the plain kernel
    for (const Shape& s : {Shape{1, 24, 3, 5, 7}, Shape{1, 64, 2, 4, 4}, Shape{1, 3, 1, 2, 3},
                           Shape{1, 96, 2, 3, 5}, Shape{1, 1024, 1, 3, 3}}) {
      const HostTensor gh = random_tensor(Shape{s.c()}, seed++, 0.5f, 1.f);
      Pair gamma;
      if (!upload_pair(g, cfg, gh, true, &gamma, "gamma")) return;
      for (const bool silu : {false, true}) {
        run("rms_norm" + std::string(silu ? "+silu " : " ") + s.to_string(),
            random_tensor(s, seed++, 2.f), [&](Backend& b, const Tensor& x) {
              return b.rms_norm(x, &b == &cpu() ? gamma.c : gamma.g, {.silu = silu});
            });
      }
    }
    // whole channel vectors (8 channels) and single elements (3)
    for (const int64_t c : {8, 3}) {
      run("upsample_nearest C=" + std::to_string(c), random_tensor({1, c, 2, 3, 5}, seed++),
          [](Backend& b, const Tensor& x) { return b.upsample_nearest(x); });
    }
    {
      // a convolution's pending bias added by the RMS norm (fused bias) and room for the causal
      // context in front of its output
      const HostTensor wh = random_tensor({16, 16, 1, 1, 1}, seed++, 0.3f);
      const HostTensor bh = random_tensor({16}, seed++, 0.5f);
      const HostTensor gh = random_tensor({16}, seed++, 0.5f, 1.f);
      Pair w, bias, gamma;
      if (!upload_pair(g, cfg, wh, true, &w, "w") || !upload_pair(g, cfg, bh, true, &bias, "b") ||
          !upload_pair(g, cfg, gh, true, &gamma, "gamma")) {
        return;
      }
      run("conv3d (bias) -> rms_norm+silu -> causal_pad", random_tensor({1, 16, 2, 3, 4}, seed++),
          [&](Backend& b, const Tensor& x) -> Result<Tensor> {
            const bool c = &b == &cpu();
            SEEDVAE_ASSIGN_OR_RETURN(Tensor y, b.conv3d(x, c ? w.c : w.g, c ? bias.c : bias.g, {}));
            SEEDVAE_ASSIGN_OR_RETURN(
                y, b.rms_norm(y, c ? gamma.c : gamma.g, {.silu = true, .context_frames = 2}));
            return b.causal_pad(y, nullptr, 2);
          });
    }
    run("frames_from_channels", random_tensor({1, 16, 3, 4, 5}, seed++),
        [](Backend& b, const Tensor& x) { return b.frames_from_channels(x, 2); });
    run("patchify", random_tensor({1, 3, 2, 6, 8}, seed++),
        [](Backend& b, const Tensor& x) { return b.patchify(x, 2); });
    run("unpatchify", random_tensor({1, 12, 2, 3, 4}, seed++),
        [](Backend& b, const Tensor& x) { return b.unpatchify(x, 2); });
    for (const AvgDownParams& p :
         {AvgDownParams{16, 2, 2}, AvgDownParams{8, 1, 2}, AvgDownParams{64, 2, 2}}) {
      run("avg_down to " + std::to_string(p.out_channels) + " (" + std::to_string(p.ft) + ", " +
              std::to_string(p.fs) + ")",
          random_tensor({1, 8, 3, 4, 6}, seed++),
          [&](Backend& b, const Tensor& x) { return b.avg_down(x, p); });
    }
    for (const bool drop : {false, true}) {
      for (const DupUpParams& p : {DupUpParams{8, 2, 2, drop}, DupUpParams{16, 1, 2, drop}}) {
        run("dup_up to " + std::to_string(p.out_channels) + (drop ? " drop" : ""),
            random_tensor({1, 16, 2, 3, 4}, seed++),
            [&](Backend& b, const Tensor& x) { return b.dup_up(x, p); });
      }
    }
    {
      auto z = g.zeros({1, 4, 2, 3, 3});
      CHECK_MSG(z.is_ok(), "zeros [" + cfg.name + "]: " + z.status().to_string());
      auto h = z ? g.download(*z) : Result<HostTensor>(z.status());
      bool all_zero = h.is_ok();
      if (h) {
        for (float v : h->f32()) all_zero = all_zero && v == 0.f;
      }
      CHECK_MSG(all_zero, "zeros [" + cfg.name + "] are not all zero");
    }
    // 32 channels, and the Wan2.1 middle's 384 (the tensor-core kernel in 16 bits on Hopper)
    for (const int64_t c : {int64_t{32}, int64_t{384}}) {
      const double sc = std::sqrt(1.0 / double(c));
      RmsAttentionWeights wc, wg;
      Pair p[9];
      const std::vector<HostTensor> hs = {
          random_tensor({c}, seed++, 0.5f, 1.f), random_tensor({c, c}, seed++, float(sc)),
          random_tensor({c}, seed++, 0.1f),      random_tensor({c, c}, seed++, float(sc)),
          random_tensor({c}, seed++, 0.1f),      random_tensor({c, c}, seed++, float(sc)),
          random_tensor({c}, seed++, 0.1f),      random_tensor({c, c}, seed++, float(sc)),
          random_tensor({c}, seed++, 0.1f)};
      for (int i = 0; i < 9; ++i) {
        if (!upload_pair(g, cfg, hs[size_t(i)], true, &p[i], "attention " + std::to_string(i))) {
          return;
        }
      }
      Tensor RmsAttentionWeights::*members[9] = {
          &RmsAttentionWeights::gamma, &RmsAttentionWeights::wq, &RmsAttentionWeights::bq,
          &RmsAttentionWeights::wk,    &RmsAttentionWeights::bk, &RmsAttentionWeights::wv,
          &RmsAttentionWeights::bv,    &RmsAttentionWeights::wo, &RmsAttentionWeights::bo};
      for (int i = 0; i < 9; ++i) {
        wc.*members[i] = p[i].c;
        wg.*members[i] = p[i].g;
      }
      const Shape xs = c == 32 ? Shape{1, c, 2, 4, 5} : Shape{1, c, 2, 10, 19};  // 190 tokens
      run("rms_attention", random_tensor(xs, seed++),
          [&](Backend& b, const Tensor& x) { return b.rms_attention(x, &b == &cpu() ? wc : wg); });
      const bool half =
          cfg.opt.precision == Precision::kBf16 || cfg.opt.precision == Precision::kFp16;
      if (c == 384 && half && cfg.opt.fused_attention) {
        const auto r = gpu::cuda_backend_report(g);
        CHECK(r && r->attention_kernel == (cfg.opt.smem_limit_kib == 99 ? "simt" : "mma"));
      }
    }
  });
}

// ---- frames: causal pad, slice, concat -----------------------------------------------------

GPU_TEST(causal_pad_slice_concat_match_cpu) {
  const std::vector<Shape> shapes = {
      {1, 8, 3, 5, 6}, {1, 5, 1, 1, 1}, {2, 3, 2, 4, 3}, {1, 16, 4, 7, 9}};
  uint32_t seed = 100;
  for (const Shape& s : shapes) {
    const HostTensor xh = random_tensor(s, seed++);
    Shape ms = s;
    ms[2] = 2;
    const HostTensor mh = random_tensor(ms, seed++);
    const std::string tag = s.to_string();
    for_each_config([&](const Config& cfg, Backend& g) {
      Pair x, m;
      if (!upload_pair(g, cfg, xh, false, &x) || !upload_pair(g, cfg, mh, false, &m)) return;
      compare_results(g, cfg, cpu().causal_pad(x.c, nullptr, 2), g.causal_pad(x.g, nullptr, 2),
                      "causal_pad replicate " + tag);
      compare_results(g, cfg, cpu().causal_pad(x.c, &m.c, 2), g.causal_pad(x.g, &m.g, 2),
                      "causal_pad memory " + tag);
      compare_results(g, cfg, cpu().slice_frames(x.c, s.t() - 1, s.t()),
                      g.slice_frames(x.g, s.t() - 1, s.t()), "slice_frames " + tag);
      compare_results(g, cfg, cpu().concat_frames(m.c, x.c), g.concat_frames(m.g, x.g),
                      "concat_frames " + tag);
      // in place (the causal-state update of CUDA graphs): the last frame of x into frame 0 of a
      // copy of m, then frame 0 over frame 1 of the same tensor
      auto dc = cpu().slice_frames(m.c, 0, 2);
      auto dg = g.slice_frames(m.g, 0, 2);
      CHECK(dc.is_ok() && dg.is_ok());
      if (!dc || !dg) return;
      CHECK_OK(cpu().copy_frames_into(*dc, 0, x.c, s.t() - 1, 1));
      CHECK_OK(g.copy_frames_into(*dg, 0, x.g, s.t() - 1, 1));
      CHECK_OK(cpu().copy_frames_into(*dc, 1, *dc, 0, 1));
      CHECK_OK(g.copy_frames_into(*dg, 1, *dg, 0, 1));
      compare_results(g, cfg, *dc, *dg, "copy_frames_into " + tag);
      CHECK(!g.copy_frames_into(*dg, 1, x.g, 0, 2).is_ok());  // past the destination's end
      CHECK(!cpu().copy_frames_into(*dc, 1, x.c, 0, 2).is_ok());
    });
  }
}

// The in-place causal padding (buffer reuse) must leave its input intact, and a second padding of
// the same tensor must not overwrite the first one's context frames.
GPU_TEST(causal_pad_in_place_is_safe) {
  const Shape s{1, 16, 3, 5, 7};
  const HostTensor xh = random_tensor(s, 7);
  Shape ms = s;
  ms[2] = 2;
  const HostTensor m1h = random_tensor(ms, 8), m2h = random_tensor(ms, 9);
  const HostTensor gh = random_tensor(Shape{16}, 10, 0.1f, 1.f),
                   bh = random_tensor(Shape{16}, 11, 0.1f);
  for_each_config([&](const Config& cfg, Backend& g) {
    Pair x, m1, m2, ga, be;
    if (!upload_pair(g, cfg, xh, false, &x) || !upload_pair(g, cfg, m1h, false, &m1) ||
        !upload_pair(g, cfg, m2h, false, &m2) || !upload_pair(g, cfg, gh, true, &ga) ||
        !upload_pair(g, cfg, bh, true, &be)) {
      return;
    }
    GroupNormParams gp{4, 1e-6f, true};
    auto hc = cpu().group_norm(x.c, ga.c, be.c, gp);
    auto hg = g.group_norm(x.g, ga.g, be.g, gp);  // has spare frames when buffer reuse is on
    if (!hc || !hg) {
      CHECK_MSG(false, "group_norm failed");
      return;
    }
    auto e1c = cpu().causal_pad(*hc, &m1.c, 2);
    auto e1g = g.causal_pad(*hg, &m1.g, 2);
    auto e2c = cpu().causal_pad(*hc, &m2.c, 2);
    auto e2g = g.causal_pad(*hg, &m2.g, 2);
    compare_results(g, cfg, e1c, e1g, "first in-place pad");
    compare_results(g, cfg, e2c, e2g, "second pad of the same tensor");
    compare_results(g, cfg, hc, hg, "padded tensor unchanged");
  });
}

// A convolution's bias may stay pending until its consumer (fused bias): GroupNorm and the
// residual add must see x + bias, and a second consumer must still see it.
GPU_TEST(pending_bias_reaches_every_consumer) {
  const Shape xs{1, 16, 3, 6, 5};
  const HostTensor xh = random_tensor(xs, 61);
  const HostTensor wh = random_tensor(Shape{32, 16, 3, 3, 3}, 62, 0.1f);
  const HostTensor bh = random_tensor(Shape{32}, 63, 0.5f);
  const HostTensor w2h = random_tensor(Shape{32, 16, 3, 3, 3}, 64, 0.1f);
  const HostTensor b2h = random_tensor(Shape{32}, 65, 0.5f);
  Conv3dParams p;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
  for_each_config([&](const Config& cfg, Backend& g) {
    Pair x, w, b, w2, b2;
    if (!upload_pair(g, cfg, xh, false, &x) || !upload_pair(g, cfg, wh, true, &w) ||
        !upload_pair(g, cfg, bh, true, &b) || !upload_pair(g, cfg, w2h, true, &w2) ||
        !upload_pair(g, cfg, b2h, true, &b2)) {
      return;
    }
    auto yc = cpu().conv3d(x.c, w.c, b.c, p);
    auto yg = g.conv3d(x.g, w.g, b.g, p);
    auto zc = cpu().conv3d(x.c, w2.c, b2.c, p);
    auto zg = g.conv3d(x.g, w2.g, b2.g, p);
    if (!yc || !yg || !zc || !zg) {
      CHECK(false);
      return;
    }
    GroupNormParams gp{8, 1e-6f, true};
    compare_results(g, cfg, cpu().group_norm(*yc, {}, {}, gp), g.group_norm(*yg, {}, {}, gp),
                    "group_norm of a biased conv output");
    CHECK_OK(cpu().add_inplace(*yc, *zc));
    CHECK_OK(g.add_inplace(*yg, *zg));
    compare_results(g, cfg, yc, yg, "residual add of two biased conv outputs");
    compare_results(g, cfg, zc, zg, "the addend keeps its bias");
    compare_results(g, cfg, cpu().group_norm(*zc, {}, {}, gp), g.group_norm(*zg, {}, {}, gp),
                    "group_norm after the add");
  });
}

// ---- GroupNorm, add, depth-to-space --------------------------------------------------------

GPU_TEST(group_norm_matches_cpu) {
  struct Case {
    Shape s;
    int groups;
    bool affine;
  };
  const std::vector<Case> cases = {{{1, 32, 3, 7, 9}, 8, true},  {{1, 64, 1, 1, 1}, 32, true},
                                   {{2, 6, 2, 5, 5}, 3, true},   {{1, 128, 2, 33, 17}, 32, true},
                                   {{1, 12, 2, 4, 4}, 4, false}, {{1, 512, 2, 6, 5}, 32, true}};
  uint32_t seed = 200;
  for (const Case& cs : cases) {
    // A non-zero mean per channel exercises the shifted statistics.
    const HostTensor xh = random_tensor(cs.s, seed++, 2.f, 0.5f);
    const HostTensor gh = random_tensor(Shape{cs.s.c()}, seed++, 0.1f, 1.f);
    const HostTensor bh = random_tensor(Shape{cs.s.c()}, seed++, 0.1f);
    for (bool silu : {false, true}) {
      const std::string what = "group_norm " + cs.s.to_string() + " G" + std::to_string(cs.groups) +
                               (silu ? " +silu" : "");
      for_each_config([&](const Config& cfg, Backend& g) {
        Pair x, ga, be;
        if (!upload_pair(g, cfg, xh, false, &x)) return;
        if (cs.affine &&
            (!upload_pair(g, cfg, gh, true, &ga) || !upload_pair(g, cfg, bh, true, &be))) {
          return;
        }
        GroupNormParams p{cs.groups, 1e-6f, silu};
        compare_results(g, cfg, cpu().group_norm(x.c, ga.c, be.c, p),
                        g.group_norm(x.g, ga.g, be.g, p), what);
      });
    }
  }
}

GPU_TEST(add_inplace_matches_cpu) {
  for (const Shape& s : {Shape{1, 8, 3, 5, 5}, Shape{2, 3, 1, 1, 1}, Shape{1, 16, 2, 4, 8}}) {
    const HostTensor ah = random_tensor(s, 300), bh = random_tensor(s, 301);
    for_each_config([&](const Config& cfg, Backend& g) {
      Pair a, b;
      if (!upload_pair(g, cfg, ah, false, &a) || !upload_pair(g, cfg, bh, false, &b)) return;
      CHECK_OK(cpu().add_inplace(a.c, b.c));
      CHECK_OK(g.add_inplace(a.g, b.g));
      compare_results(g, cfg, Result<Tensor>(a.c), Result<Tensor>(a.g),
                      "add_inplace " + s.to_string());
    });
  }
}

GPU_TEST(depth_to_space_matches_cpu) {
  struct Case {
    Shape s;
    int z;
    bool drop;
  };
  const std::vector<Case> cases = {{{1, 64, 2, 3, 5}, 2, false}, {{1, 64, 2, 3, 5}, 2, true},
                                   {{1, 32, 3, 4, 4}, 1, false}, {{2, 16, 1, 2, 3}, 2, true},
                                   {{1, 12, 2, 3, 3}, 1, false}, {{1, 24, 1, 1, 1}, 2, true}};
  uint32_t seed = 400;
  for (const Case& cs : cases) {
    const HostTensor xh = random_tensor(cs.s, seed++);
    const std::string what = "depth_to_space " + cs.s.to_string() + " z" + std::to_string(cs.z) +
                             (cs.drop ? " drop" : "");
    for_each_config([&](const Config& cfg, Backend& g) {
      Pair x;
      if (!upload_pair(g, cfg, xh, false, &x)) return;
      compare_results(g, cfg, cpu().depth_to_space(x.c, cs.z, cs.drop),
                      g.depth_to_space(x.g, cs.z, cs.drop), what);
    });
  }
}

// ---- attention -----------------------------------------------------------------------------

GPU_TEST(attention_matches_cpu) {
  struct Case {
    Shape s;
    int groups;
  };
  const std::vector<Case> cases = {
      {{1, 64, 3, 8, 8}, 32},   {{1, 64, 2, 5, 7}, 32},    {{1, 64, 1, 1, 1}, 32},
      {{1, 512, 2, 9, 11}, 32}, {{1, 512, 1, 16, 16}, 32}, {{1, 48, 2, 6, 6}, 8},
      {{2, 64, 1, 4, 4}, 32},   {{1, 128, 1, 13, 11}, 32}, {{1, 512, 1, 1, 3}, 32}};
  uint32_t seed = 500;
  for (const Case& cs : cases) {
    const int64_t c = cs.s.c();
    const HostTensor xh = random_tensor(cs.s, seed++);
    const float ws = float(std::sqrt(3.0 / double(c)));
    std::vector<HostTensor> mats, vecs;
    for (int i = 0; i < 4; ++i) mats.push_back(random_tensor(Shape{c, c}, seed++, ws));
    for (int i = 0; i < 4; ++i) vecs.push_back(random_tensor(Shape{c}, seed++, 0.05f));
    const HostTensor ng = random_tensor(Shape{c}, seed++, 0.1f, 1.f);
    const HostTensor nb = random_tensor(Shape{c}, seed++, 0.1f);
    const std::string what = "attention " + cs.s.to_string();
    for_each_config([&](const Config& cfg, Backend& g) {
      Pair x, m[4], v[4], gn, bn;
      if (!upload_pair(g, cfg, xh, false, &x)) return;
      for (int i = 0; i < 4; ++i) {
        if (!upload_pair(g, cfg, mats[i], true, &m[i]) ||
            !upload_pair(g, cfg, vecs[i], true, &v[i])) {
          return;
        }
      }
      if (!upload_pair(g, cfg, ng, true, &gn) || !upload_pair(g, cfg, nb, true, &bn)) return;
      auto make = [&](bool gpu_side) {
        auto pick = [&](const Pair& p) { return gpu_side ? p.g : p.c; };
        AttentionWeights a;
        a.norm_weight = pick(gn);
        a.norm_bias = pick(bn);
        a.wq = pick(m[0]);
        a.bq = pick(v[0]);
        a.wk = pick(m[1]);
        a.bk = pick(v[1]);
        a.wv = pick(m[2]);
        a.bv = pick(v[2]);
        a.wo = pick(m[3]);
        a.bo = pick(v[3]);
        a.groups = cs.groups;
        a.eps = 1e-6f;
        return a;
      };
      compare_results(g, cfg, cpu().attention(x.c, make(false)), g.attention(x.g, make(true)),
                      what);
      // Head 512 in 16-bit: the tensor-core kernel where a block may take its shared memory
      // (Hopper), the SIMT one where it may not (the smem99 configurations, as on RTX 50xx).
      const bool half =
          cfg.opt.precision == Precision::kBf16 || cfg.opt.precision == Precision::kFp16;
      if (c == 512 && half && cfg.opt.fused_attention) {
        const auto r = gpu::cuda_backend_report(g);
        CHECK(r && r->attention_kernel == (cfg.opt.smem_limit_kib == 99 ? "simt" : "mma"));
      }
    });
  }
}

// A longer sequence where scores are far from uniform (large logits) exercises the online
// softmax rescaling across many key tiles.
GPU_TEST(attention_long_sequence_sharp_softmax) {
  const Shape s{1, 512, 1, 40, 45};  // 1800 tokens: 29 key tiles
  const int64_t c = 512;
  uint32_t seed = 900;
  const HostTensor xh = random_tensor(s, seed++);
  std::vector<HostTensor> mats, vecs;
  for (int i = 0; i < 4; ++i) {
    mats.push_back(random_tensor(Shape{c, c}, seed++, i < 2 ? 0.35f : 0.05f));
  }
  for (int i = 0; i < 4; ++i) vecs.push_back(random_tensor(Shape{c}, seed++, 0.05f));
  const HostTensor ng = random_tensor(Shape{c}, seed++, 0.1f, 1.f);
  const HostTensor nb = random_tensor(Shape{c}, seed++, 0.1f);
  for_each_config([&](const Config& cfg, Backend& g) {
    Pair x, m[4], v[4], gn, bn;
    if (!upload_pair(g, cfg, xh, false, &x)) return;
    for (int i = 0; i < 4; ++i) {
      if (!upload_pair(g, cfg, mats[i], true, &m[i]) || !upload_pair(g, cfg, vecs[i], true, &v[i]))
        return;
    }
    if (!upload_pair(g, cfg, ng, true, &gn) || !upload_pair(g, cfg, nb, true, &bn)) return;
    auto make = [&](bool gs) {
      auto pick = [&](const Pair& p) { return gs ? p.g : p.c; };
      AttentionWeights a;
      a.norm_weight = pick(gn);
      a.norm_bias = pick(bn);
      a.wq = pick(m[0]);
      a.bq = pick(v[0]);
      a.wk = pick(m[1]);
      a.bk = pick(v[1]);
      a.wv = pick(m[2]);
      a.bv = pick(v[2]);
      a.wo = pick(m[3]);
      a.bo = pick(v[3]);
      return a;
    };
    // Peaked softmax: the probabilities' own rounding (bf16 keeps 8 bits) dominates, in the
    // materialised path as much as in the fused one, so allow twice the usual bound.
    Config loose = cfg;
    loose.tol_max *= 2;
    loose.tol_rms *= 2;
    compare_results(g, loose, cpu().attention(x.c, make(false)), g.attention(x.g, make(true)),
                    "attention 1800 tokens, sharp");
  });
}

// ---- errors, memory, threads ---------------------------------------------------------------

GPU_TEST(errors_are_values_and_backend_stays_usable) {
  Backend* g = gpu(0);
  if (!g) return;
  const HostTensor xh = random_tensor(Shape{1, 8, 3, 4, 4}, 1);
  REQUIRE_OK(Tensor x, g->upload(xh));
  REQUIRE_OK(Tensor w, g->upload_weight(random_tensor(Shape{8, 6, 3, 3, 3}, 2), "w"));
  auto bad = g->conv3d(x, w, {}, {});
  CHECK(!bad.is_ok());
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK_MSG(bad.status().message().find("conv3d") != std::string::npos, bad.status().message());
  auto bad_gn = g->group_norm(x, {}, {}, GroupNormParams{3, 1e-6f, false});
  CHECK(!bad_gn.is_ok());
  // still usable
  auto ok = g->group_norm(x, {}, {}, GroupNormParams{4, 1e-6f, true});
  CHECK_MSG(ok.is_ok(), ok.status().to_string());
  CHECK_OK(g->synchronize());
}

GPU_TEST(out_of_memory_is_reported_and_recoverable) {
  Backend* g = gpu(0);
  if (!g) return;
  const MemoryStats before = g->memory_stats();
  CHECK(before.device_total_bytes > 0);
  const HostTensor xh = random_tensor(Shape{1, 64, 1, 64, 64}, 3);  // 1 MiB per frame
  REQUIRE_OK(Tensor x, g->upload(xh));
  const int64_t frame_bytes = 64 * 64 * 64 * 4;
  const int frames = static_cast<int>(before.device_total_bytes / frame_bytes + 64);
  auto huge = g->causal_pad(x, nullptr, frames);
  CHECK(!huge.is_ok());
  CHECK_MSG(huge.status().code() == StatusCode::kOutOfMemory, huge.status().to_string());
  CHECK_MSG(huge.status().message().find("causal_pad") != std::string::npos,
            huge.status().message());
  std::printf("    OOM message: %s\n", huge.status().message().c_str());
  auto again = g->causal_pad(x, nullptr, 2);
  CHECK_MSG(again.is_ok(), again.status().to_string());
  CHECK_OK(g->synchronize());
}

GPU_TEST(other_threads_are_refused) {
  Backend* g = gpu(0);
  if (!g) return;
  Status st;
  std::thread t([&] { st = g->upload(random_tensor(Shape{1, 1, 1, 1, 1}, 1)).take_status(); });
  t.join();
  CHECK(!st.is_ok());
  CHECK_MSG(st.message().find("thread") != std::string::npos, st.to_string());
}

GPU_TEST(memory_stats_track_live_and_peak) {
  Backend* g = gpu(0);
  if (!g) return;
  g->reset_peak();
  const MemoryStats m0 = g->memory_stats();
  {
    REQUIRE_OK(Tensor x, g->upload(random_tensor(Shape{1, 16, 4, 32, 32}, 1)));
    const MemoryStats m1 = g->memory_stats();
    CHECK(m1.current_bytes >= m0.current_bytes + 16 * 4 * 32 * 32 * 4);
    CHECK(m1.peak_bytes >= m1.current_bytes);
    CHECK(m1.device_used_bytes > 0);
  }
  const MemoryStats m2 = g->memory_stats();
  CHECK(m2.current_bytes == m0.current_bytes);
  CHECK(m2.peak_bytes >= m0.current_bytes + 16 * 4 * 32 * 32 * 4);
}

GPU_TEST(options_are_validated) {
  CudaOptions o;
  o.device = 1000;
  auto r = gpu::create_cuda_backend(o);
  CHECK(!r.is_ok());
  CHECK(r.status().code() == StatusCode::kNotFound);
  o = CudaOptions{};
  o.workspace_mib = -1;
  CHECK(!gpu::validate_options(o).is_ok());
  CHECK(gpu::precision_from_name("bf16") == Precision::kBf16);
  CHECK(gpu::precision_from_name("fidelity") == Precision::kFidelity);
  CHECK(gpu::precision_name(Precision::kFidelity) == "fidelity");
  CHECK(!gpu::precision_from_name("int8").has_value());
}

}  // namespace

int main(int argc, char** argv) {
  const auto info = gpu::runtime_info();
  if (!info.error.empty()) gpu_test::skip_all(info.error.c_str());
  const auto devs = gpu::list_devices();
  if (!devs.empty()) {
    std::printf("device: %s (sm_%d%d), cuDNN %d\n", devs[0].name.c_str(), devs[0].compute_major,
                devs[0].compute_minor, info.cudnn_version);
  }
  const int rc = gpu_test::run_all(argc, argv);
  std::printf("worst error / limit per configuration:\n");
  for (const auto& [name, w] : worst()) {
    std::printf("  %-26s %6.3f  (%s)\n", name.c_str(), w.ratio, w.where.c_str());
  }
  return rc;
}
