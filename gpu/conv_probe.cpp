// probe_convolutions() (cuda_backend.h): which convolution precisions cuDNN runs on this card,
// how fast, and how exact -- the measurements behind the FP8 and fidelity work.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "gpu/allocator.h"
#include "gpu/cuda_backend.h"
#include "gpu/cuda_check.h"
#include "gpu/cudnn/conv3d_cudnn.h"
#include "gpu/cudnn/conv_graph.h"
#include "gpu/kernels/elementwise.h"

namespace seedvae::gpu {
namespace {

struct Shape5 {
  int64_t cin, t, h, w, cout;
  int64_t out_t() const { return t - 2; }
  int64_t in() const { return cin * t * h * w; }
  int64_t out() const { return cout * out_t() * h * w; }
  int64_t weights() const { return cout * 27 * cin; }
  double flops() const { return 2.0 * double(out()) * double(cin) * 27.0; }
  std::string name() const {
    return std::to_string(cin) + "x" + std::to_string(t) + "x" + std::to_string(h) + "x" +
           std::to_string(w) + " -> " + std::to_string(cout) + ", 3x3x3";
  }
};

ConvProblem legacy_problem(const Shape5& s, ElemType t) {
  ConvProblem p;
  p.type = t;
  p.layout = Layout::kNDHWC;
  p.cin = s.cin;
  p.t = s.t;
  p.h = s.h;
  p.w = s.w;
  p.cout = s.cout;
  p.kt = p.kh = p.kw = 3;
  p.ph = p.pw = 1;
  return p;
}

GraphConvProblem graph_problem(const Shape5& s, GraphType x, GraphType y) {
  return graph_problem_of(legacy_problem(s, ElemType::kF32), x, y);
}

GraphConvArgs args(const void* x, const void* w, void* y) {
  GraphConvArgs a;
  a.x = x;
  a.w = w;
  a.y = y;
  return a;
}

// The fp64 reference on the host: x [t, h, w, cin], w [cout, 3, 3, 3, cin], y [t-2, h, w, cout].
std::vector<double> host_conv(const Shape5& s, const std::vector<float>& x,
                              const std::vector<float>& w) {
  std::vector<double> y(static_cast<size_t>(s.out()), 0.0);
  for (int64_t t = 0; t < s.out_t(); ++t) {
    for (int64_t i = 0; i < s.h; ++i) {
      for (int64_t j = 0; j < s.w; ++j) {
        double* out = &y[static_cast<size_t>(((t * s.h + i) * s.w + j) * s.cout)];
        for (int64_t a = 0; a < 3; ++a) {
          for (int64_t b = 0; b < 3; ++b) {
            const int64_t ii = i + b - 1;
            if (ii < 0 || ii >= s.h) continue;
            for (int64_t c = 0; c < 3; ++c) {
              const int64_t jj = j + c - 1;
              if (jj < 0 || jj >= s.w) continue;
              const float* xp = &x[static_cast<size_t>((((t + a) * s.h + ii) * s.w + jj) * s.cin)];
              for (int64_t o = 0; o < s.cout; ++o) {
                const float* wp = &w[static_cast<size_t>(((o * 3 + a) * 3 + b) * 3 + c) * s.cin];
                double acc = 0;
                for (int64_t k = 0; k < s.cin; ++k) acc += double(xp[k]) * double(wp[k]);
                out[o] += acc;
              }
            }
          }
        }
      }
    }
  }
  return y;
}

}  // namespace

Result<std::vector<ConvProbeRow>> probe_convolutions(int device, bool timing) {
  SEEDVAE_CUDA_TRY(cudaSetDevice(device), "cudaSetDevice");
  cudaStream_t s = nullptr;
  SEEDVAE_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  auto alloc = std::make_shared<DeviceAllocator>(true, s);
  ConvOptions co;
  co.autotune = true;
  SEEDVAE_ASSIGN_OR_RETURN(auto legacy, Conv3dCudnn::create(s, alloc, co));
  SEEDVAE_ASSIGN_OR_RETURN(auto graph, GraphConv::create(s, alloc, true));
  std::vector<ConvProbeRow> rows;

  cudaEvent_t e0 = nullptr, e1 = nullptr;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  // Median-free: the mean of `iters` runs after the first (which chooses the algorithm).
  auto timed = [&](ConvProbeRow& row, const Shape5& sh, const std::function<Status()>& body) {
    Status st = body();
    if (st.is_ok()) st = body();
    if (st.is_ok()) {
      const int iters = 5;
      cudaEventRecord(e0, s);
      for (int i = 0; i < iters && st.is_ok(); ++i) st = body();
      cudaEventRecord(e1, s);
      float ms = 0;
      if (st.is_ok() && cudaEventSynchronize(e1) == cudaSuccess &&
          cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess) {
        row.ms = ms / iters;
        row.tflops = sh.flops() / (row.ms * 1e9);
      } else if (st.is_ok()) {
        st = Status(StatusCode::kDeviceError, cudaGetErrorString(cudaGetLastError()));
      }
    }
    cudaGetLastError();
    row.status = st.is_ok() ? "ok" : st.to_string();
  };
  auto graph_info = [&](ConvProbeRow& row, const GraphConvProblem& p) {
    const GraphConv::PlanInfo pi = graph->plan_info(p);
    row.offered = pi.offered;
    row.built = pi.built;
    row.chosen = pi.chosen;
  };

  // ---- exactness on a small shape --------------------------------------------------------------
  {
    const Shape5 sh{64, 4, 32, 32, 64};
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<float> x(static_cast<size_t>(sh.in())), w(static_cast<size_t>(sh.weights()));
    for (float& v : x) v = u(rng);
    const float ws = std::sqrt(3.f / (27.f * float(sh.cin)));
    for (float& v : w) v = ws * u(rng) * (1.f + 0.5f * u(rng));
    const std::vector<double> ref = host_conv(sh, x, w);
    double ref_sq = 0, ref_max = 0;
    for (double v : ref) {
      ref_sq += v * v;
      ref_max = std::max(ref_max, std::abs(v));
    }
    const double ref_rms = std::sqrt(ref_sq / double(ref.size()));
    // device copies: fp32 originals, then each mode's operands
    SEEDVAE_ASSIGN_OR_RETURN(BlockPtr x32, alloc->allocate(x.size() * 4, "probe x"));
    SEEDVAE_ASSIGN_OR_RETURN(BlockPtr w32, alloc->allocate(w.size() * 4, "probe w"));
    SEEDVAE_ASSIGN_OR_RETURN(BlockPtr xq, alloc->allocate(x.size() * 2, "probe x operand"));
    SEEDVAE_ASSIGN_OR_RETURN(BlockPtr wq, alloc->allocate(w.size() * 2, "probe w operand"));
    SEEDVAE_ASSIGN_OR_RETURN(BlockPtr y, alloc->allocate(size_t(sh.out()) * 4, "probe y"));
    SEEDVAE_ASSIGN_OR_RETURN(BlockPtr y32, alloc->allocate(size_t(sh.out()) * 4, "probe y fp32"));
    // scales at 16-byte aligned offsets (the graph's tensors declare 16-byte alignment):
    // [0] x's, [4] its inverse, [8, 8 + cout) w's, [8 + cout, 8 + 2 cout) their inverses
    const int64_t wi = 8, wv = 8 + (sh.cout + 3) / 4 * 4;
    SEEDVAE_ASSIGN_OR_RETURN(BlockPtr scales,
                             alloc->allocate(size_t(wv + sh.cout) * 4, "probe scales"));
    SEEDVAE_CUDA_TRY(cudaMemcpyAsync(x32->ptr, x.data(), x.size() * 4, cudaMemcpyHostToDevice, s),
                     "probe upload");
    SEEDVAE_CUDA_TRY(cudaMemcpyAsync(w32->ptr, w.data(), w.size() * 4, cudaMemcpyHostToDevice, s),
                     "probe upload");
    // FP8 scales: the tensor's amax to 448 for x, each output channel's for w; the
    // quantisation divides by the inverses, the graph multiplies by them.
    float xmax = 0;
    for (float v : x) xmax = std::max(xmax, std::abs(v));
    std::vector<float> sc(static_cast<size_t>(wv + sh.cout));
    sc[0] = 448.f / xmax;
    sc[4] = 1.f / sc[0];
    const int64_t row_len = 27 * sh.cin;
    for (int64_t o = 0; o < sh.cout; ++o) {
      float m = 0;
      for (int64_t k = 0; k < row_len; ++k) m = std::max(m, std::abs(w[size_t(o * row_len + k)]));
      sc[size_t(wi + o)] = 448.f / m;
      sc[size_t(wv + o)] = m / 448.f;
    }
    SEEDVAE_CUDA_TRY(
        cudaMemcpyAsync(scales->ptr, sc.data(), sc.size() * 4, cudaMemcpyHostToDevice, s),
        "probe upload");
    const float* sp = static_cast<const float*>(scales->ptr);

    auto measure = [&](ConvProbeRow& row, GraphType yt) {
      const ElemType ye = yt == GraphType::kF32   ? ElemType::kF32
                          : yt == GraphType::kF16 ? ElemType::kF16
                                                  : ElemType::kBF16;
      launch_convert(ye, y->ptr, ElemType::kF32, y32->ptr, sh.out(), s);
      std::vector<float> got(static_cast<size_t>(sh.out()));
      if (cudaMemcpyAsync(got.data(), y32->ptr, got.size() * 4, cudaMemcpyDeviceToHost, s) !=
              cudaSuccess ||
          cudaStreamSynchronize(s) != cudaSuccess) {
        cudaGetLastError();
        row.status = "download failed";
        return;
      }
      double sq = 0, mx = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        const double d = double(got[i]) - ref[i];
        sq += d * d;
        mx = std::max(mx, std::abs(d));
      }
      row.rel_rms = std::sqrt(sq / double(got.size())) / ref_rms;
      row.rel_max = mx / ref_max;
    };
    auto check = [&](const std::string& mode, GraphType yt, const std::function<Status()>& body) {
      ConvProbeRow row;
      row.shape = sh.name();
      row.mode = mode;
      Status st = body();
      if (st.is_ok()) st = body();  // the second run uses the chosen plan
      if (st.is_ok() && cudaStreamSynchronize(s) != cudaSuccess) {
        st = Status(StatusCode::kDeviceError, cudaGetErrorString(cudaGetLastError()));
      }
      row.status = st.is_ok() ? "ok" : st.to_string();
      if (st.is_ok()) measure(row, yt);
      cudaGetLastError();
      rows.push_back(row);
      return rows.size() - 1;
    };
    for (ElemType et : {ElemType::kF32, ElemType::kBF16, ElemType::kF16}) {
      if (et != ElemType::kF32) {  // xq and wq hold 2 bytes per element
        launch_convert(ElemType::kF32, x32->ptr, et, xq->ptr, sh.in(), s);
        launch_convert(ElemType::kF32, w32->ptr, et, wq->ptr, sh.weights(), s);
      }
      const void* xo = et == ElemType::kF32 ? x32->ptr : xq->ptr;
      const void* wo = et == ElemType::kF32 ? w32->ptr : wq->ptr;
      const GraphType gt = et == ElemType::kF32   ? GraphType::kF32
                           : et == ElemType::kF16 ? GraphType::kF16
                                                  : GraphType::kBF16;
      if (et != ElemType::kF32) {
        check(std::string("legacy ") + graph_type_name(gt), gt,
              [&] { return legacy->run(legacy_problem(sh, et), xo, wo, y->ptr, "probe legacy"); });
      }
      const GraphConvProblem gp = graph_problem(sh, gt, GraphType::kF32);
      const size_t r =
          check(std::string("graph ") + graph_type_name(gt) + " -> f32", GraphType::kF32,
                [&] { return graph->run(gp, args(xo, wo, y->ptr), "probe graph"); });
      graph_info(rows[r], gp);
      if (et == ElemType::kF16) {
        // fp16 accumulation (the compute type of the convolution), fp16 out
        GraphConvProblem hp = graph_problem(sh, gt, GraphType::kF16);
        hp.half_accumulate = true;
        const size_t h = check("graph f16 -> f16, fp16 accumulation", GraphType::kF16, [&] {
          return graph->run(hp, args(xo, wo, y->ptr), "probe graph fp16 accumulation");
        });
        graph_info(rows[h], hp);
      }
    }
    // FP8: quantised operands, dequantised in the epilogue, bf16 out
    launch_quantize_e4m3(ElemType::kF32, x32->ptr, xq->ptr, sh.in(), sp + 4, sh.in(), s);
    launch_quantize_e4m3(ElemType::kF32, w32->ptr, wq->ptr, sh.weights(), sp + wv, row_len, s);
    GraphConvProblem fp = graph_problem(sh, GraphType::kFp8E4M3, GraphType::kBF16);
    fp.x_scale = fp.w_scale = true;
    GraphConvArgs fa = args(xq->ptr, wq->ptr, y->ptr);
    fa.x_scale = sp + 4;
    fa.w_scale = sp + wv;
    const size_t r = check("graph e4m3 (scaled) -> bf16", GraphType::kBF16,
                           [&] { return graph->run(fp, fa, "probe graph e4m3"); });
    graph_info(rows[r], fp);
    // every engine's result, not only the fastest's
    for (int i = 0; i < rows[r].built; ++i) {
      const size_t ri = check("  e4m3 plan " + std::to_string(i), GraphType::kBF16,
                              [&] { return graph->run_plan(fp, fa, i, "probe graph e4m3"); });
      rows[ri].chosen = i;
    }
    // without the scales: fp32 out, compared after dividing by sx * sw[c] on the host
    GraphConvProblem fu = graph_problem(sh, GraphType::kFp8E4M3, GraphType::kF32);
    GraphConvArgs ua = fa;
    ua.x_scale = ua.w_scale = nullptr;
    {
      ConvProbeRow row;
      row.shape = sh.name();
      row.mode = "graph e4m3 (unscaled) -> f32";
      Status st = graph->run(fu, ua, "probe graph e4m3 unscaled");
      if (st.is_ok()) st = graph->run(fu, ua, "probe graph e4m3 unscaled");
      std::vector<float> got(static_cast<size_t>(sh.out()));
      if (st.is_ok() && (cudaMemcpyAsync(got.data(), y->ptr, got.size() * 4, cudaMemcpyDeviceToHost,
                                         s) != cudaSuccess ||
                         cudaStreamSynchronize(s) != cudaSuccess)) {
        st = Status(StatusCode::kDeviceError, cudaGetErrorString(cudaGetLastError()));
      }
      row.status = st.is_ok() ? "ok" : st.to_string();
      if (st.is_ok()) {
        double sq = 0, mx = 0;
        for (size_t i = 0; i < got.size(); ++i) {
          const size_t c = i % static_cast<size_t>(sh.cout);
          const double v = double(got[i]) / (double(sc[0]) * double(sc[size_t(wi) + c]));
          sq += (v - ref[i]) * (v - ref[i]);
          mx = std::max(mx, std::abs(v - ref[i]));
        }
        row.rel_rms = std::sqrt(sq / double(got.size())) / ref_rms;
        row.rel_max = mx / ref_max;
      }
      graph_info(row, fu);
      rows.push_back(row);
    }
  }

  // ---- speed on the decoders' largest shapes: SeedVR2 at 1080p, Wan2.1 at 720p ----------------
  if (timing) {
    for (const Shape5 sh : {Shape5{512, 6, 270, 480, 512}, Shape5{256, 6, 540, 960, 256},
                            Shape5{128, 6, 1080, 1920, 128}, Shape5{96, 6, 720, 1280, 96},
                            Shape5{192, 6, 360, 640, 192}}) {
      SEEDVAE_ASSIGN_OR_RETURN(BlockPtr x, alloc->allocate(size_t(sh.in()) * 4, "probe x"));
      SEEDVAE_ASSIGN_OR_RETURN(BlockPtr w, alloc->allocate(size_t(sh.weights()) * 4, "probe w"));
      SEEDVAE_ASSIGN_OR_RETURN(BlockPtr y, alloc->allocate(size_t(sh.out()) * 4, "probe y"));
      SEEDVAE_ASSIGN_OR_RETURN(BlockPtr one, alloc->allocate(size_t(4 + sh.cout) * 4, "scales"));
      std::vector<float> ones(static_cast<size_t>(4 + sh.cout), 1.f);
      SEEDVAE_CUDA_TRY(
          cudaMemcpyAsync(one->ptr, ones.data(), ones.size() * 4, cudaMemcpyHostToDevice, s),
          "probe upload");
      const float* op = static_cast<const float*>(one->ptr);
      for (ElemType et : {ElemType::kBF16, ElemType::kF16}) {
        launch_fill_random(et, x->ptr, sh.in(), 1, s);
        launch_fill_random(et, w->ptr, sh.weights(), 2, s);
        const GraphType gt = et == ElemType::kF16 ? GraphType::kF16 : GraphType::kBF16;
        ConvProbeRow lr{sh.name(), std::string("legacy ") + graph_type_name(gt)};
        timed(lr, sh, [&] {
          return legacy->run(legacy_problem(sh, et), x->ptr, w->ptr, y->ptr, "probe legacy");
        });
        rows.push_back(lr);
        for (GraphType yt : {gt, GraphType::kF32}) {
          const GraphConvProblem gp = graph_problem(sh, gt, yt);
          ConvProbeRow gr{sh.name(), std::string("graph ") + graph_type_name(gt) + " -> " +
                                         graph_type_name(yt)};
          timed(gr, sh,
                [&] { return graph->run(gp, args(x->ptr, w->ptr, y->ptr), "probe graph"); });
          graph_info(gr, gp);
          rows.push_back(gr);
        }
        if (et == ElemType::kF16) {
          GraphConvProblem hp = graph_problem(sh, gt, GraphType::kF16);
          hp.half_accumulate = true;
          ConvProbeRow hr{sh.name(), "graph f16 -> f16, fp16 accumulation"};
          timed(hr, sh, [&] {
            return graph->run(hp, args(x->ptr, w->ptr, y->ptr), "probe graph fp16 accumulation");
          });
          graph_info(hr, hp);
          rows.push_back(hr);
        }
      }
      // FP8 operands from fp32 values in [-1, 1) (scale 1)
      SEEDVAE_ASSIGN_OR_RETURN(BlockPtr f, alloc->allocate(size_t(sh.in()) * 4, "probe fp32"));
      launch_fill_random(ElemType::kF32, f->ptr, sh.in(), 3, s);
      launch_quantize_e4m3(ElemType::kF32, f->ptr, x->ptr, sh.in(), op, sh.in(), s);
      launch_fill_random(ElemType::kF32, f->ptr, sh.weights(), 4, s);
      launch_quantize_e4m3(ElemType::kF32, f->ptr, w->ptr, sh.weights(), op, sh.weights(), s);
      f.reset();
      GraphConvProblem fp = graph_problem(sh, GraphType::kFp8E4M3, GraphType::kBF16);
      fp.x_scale = fp.w_scale = true;
      ConvProbeRow fr{sh.name(), "graph e4m3 (scaled) -> bf16"};
      GraphConvArgs fa = args(x->ptr, w->ptr, y->ptr);
      fa.x_scale = op;
      fa.w_scale = op + 4;  // 16-byte aligned
      timed(fr, sh, [&] { return graph->run(fp, fa, "probe graph e4m3"); });
      graph_info(fr, fp);
      rows.push_back(fr);
    }
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  graph.reset();
  legacy.reset();
  alloc.reset();
  cudaStreamDestroy(s);
  return rows;
}

}  // namespace seedvae::gpu
