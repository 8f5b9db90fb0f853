// cuDNN graph-API convolution (conv_graph.h). Written against the C backend API (cudnn_graph.h):
// the C++ frontend is a header library outside Debian's and NVIDIA's packages we build with, and
// the few descriptors one convolution graph needs are plain attribute calls.
#include "gpu/cudnn/conv_graph.h"

#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <deque>
#include <vector>

#include "gpu/allocator.h"
#include "gpu/cuda_check.h"
#include "gpu/cudnn/cudnn_util.h"

namespace seedvae::gpu {
namespace {

cudnnDataType_t dnn(GraphType t) {
  switch (t) {
    case GraphType::kF32: return CUDNN_DATA_FLOAT;
    case GraphType::kF16: return CUDNN_DATA_HALF;
    case GraphType::kBF16: return CUDNN_DATA_BFLOAT16;
    case GraphType::kFp8E4M3: return CUDNN_DATA_FP8_E4M3;
  }
  return CUDNN_DATA_FLOAT;
}

// One backend descriptor, destroyed with its owner.
class Desc {
 public:
  Desc() = default;
  explicit Desc(cudnnBackendDescriptorType_t type) { create(type); }
  ~Desc() { reset(); }
  Desc(Desc&& o) noexcept : d_(o.d_), st_(o.st_) { o.d_ = nullptr; }
  Desc& operator=(Desc&& o) noexcept {
    if (this != &o) {
      reset();
      d_ = o.d_;
      st_ = o.st_;
      o.d_ = nullptr;
    }
    return *this;
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;

  void create(cudnnBackendDescriptorType_t type) {
    reset();
    st_ = cudnnBackendCreateDescriptor(type, &d_);
  }
  void reset() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
    d_ = nullptr;
  }
  // Attribute setters record the first failure; finalize() reports it.
  template <typename T>
  Desc& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t n,
            const T* values) {
    if (st_ == CUDNN_STATUS_SUCCESS) st_ = cudnnBackendSetAttribute(d_, name, type, n, values);
    return *this;
  }
  Desc& set_desc(cudnnBackendAttributeName_t name, const Desc& d) {
    cudnnBackendDescriptor_t v = d.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v);
  }
  Status finalize(const std::string& what) {
    if (st_ == CUDNN_STATUS_SUCCESS) st_ = cudnnBackendFinalize(d_);
    return cudnn_status(st_, what);
  }
  cudnnBackendDescriptor_t get() const { return d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
  cudnnStatus_t st_ = CUDNN_STATUS_SUCCESS;
};

// A tensor of the graph: [1, C, T, H, W] dims with channels-last strides (a per-channel vector
// is [1, C, 1, 1, 1], a scalar [1, 1, 1, 1, 1]).
Result<Desc> tensor(int64_t uid, GraphType type, std::array<int64_t, 5> dims, bool is_virtual,
                    const std::string& what) {
  const int64_t c = dims[1], t = dims[2], h = dims[3], w = dims[4];
  const std::array<int64_t, 5> strides{c * t * h * w, 1, h * w * c, w * c, c};
  const int64_t align = 16;
  const cudnnDataType_t dt = dnn(type);
  const bool virt = is_virtual;
  Desc d(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  d.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt)
      .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 5, dims.data())
      .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 5, strides.data())
      .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid)
      .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align)
      .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt);
  SEEDVAE_TRY(d.finalize(what + " tensor " + std::to_string(uid)));
  return d;
}

Result<Desc> pointwise(cudnnPointwiseMode_t mode, const Desc& x, const Desc* b, const Desc& y,
                       const std::string& what) {
  const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  Desc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
      .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
  SEEDVAE_TRY(pw.finalize(what + " pointwise"));
  Desc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw)
      .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x)
      .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
  if (b) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
  SEEDVAE_TRY(op.finalize(what + " pointwise op"));
  return op;
}

// Tensor ids in the graph and the variant pack.
enum Uid : int64_t { kX = 1, kW, kY, kXScale, kWScale, kBias, kVirtual = 100 };

}  // namespace

const char* graph_type_name(GraphType t) {
  switch (t) {
    case GraphType::kF32: return "f32";
    case GraphType::kF16: return "f16";
    case GraphType::kBF16: return "bf16";
    case GraphType::kFp8E4M3: return "e4m3";
  }
  return "?";
}

int64_t graph_type_size(GraphType t) {
  return t == GraphType::kF32 ? 4 : t == GraphType::kFp8E4M3 ? 1 : 2;
}

GraphConvProblem graph_problem_of(const ConvProblem& p, GraphType x, GraphType y) {
  GraphConvProblem g;
  g.x_type = g.w_type = x;
  g.y_type = y;
  g.cin = p.cin;
  g.t = p.t;
  g.h = p.h;
  g.w = p.w;
  g.cout = p.cout;
  g.kt = p.kt;
  g.kh = p.kh;
  g.kw = p.kw;
  g.st = p.st;
  g.sh = p.sh;
  g.sw = p.sw;
  g.ph = p.ph;
  g.pw = p.pw;
  return g;
}

std::string GraphConvProblem::key() const {
  return std::string(graph_type_name(x_type)) + "*" + graph_type_name(w_type) + "->" +
         graph_type_name(y_type) + " " + std::to_string(cin) + "x" + std::to_string(t) + "x" +
         std::to_string(h) + "x" + std::to_string(w) + " k" + std::to_string(cout) + "x" +
         std::to_string(kt) + "x" + std::to_string(kh) + "x" + std::to_string(kw) + " s" +
         std::to_string(st) + std::to_string(sh) + std::to_string(sw) + " p" + std::to_string(ph) +
         std::to_string(pw) + (x_scale ? " xs" : "") + (w_scale ? " ws" : "") + (bias ? " b" : "") +
         (half_accumulate ? " acc16" : "");
}

struct GraphConv::Plan {
  // The graph and what it references, alive as long as its plans.
  std::deque<Desc> parts;
  std::vector<Desc> plans;  // buildable execution plans, in the heuristics' order
  std::vector<int> index;   // their index in the heuristics' list
  std::vector<int64_t> workspace;
  int offered = 0;
  int chosen = -1;  // into plans, once timed
  double ms = 0;
};

Result<std::unique_ptr<GraphConv>> GraphConv::create(Stream stream,
                                                     std::shared_ptr<DeviceAllocator> alloc,
                                                     bool autotune) {
  std::unique_ptr<GraphConv> g(new GraphConv());
  cudnnHandle_t h = nullptr;
  const Status made = make_cudnn_handle(stream, &h, "graph convolutions");
  g->handle_ = h;
  SEEDVAE_TRY(made);
  g->stream_ = stream;
  g->alloc_ = std::move(alloc);
  g->autotune_ = autotune;
  return g;
}

GraphConv::~GraphConv() {
  plans_.clear();
  if (handle_) cudnnDestroy(static_cast<cudnnHandle_t>(handle_));
}

GraphConv::PlanInfo GraphConv::plan_info(const GraphConvProblem& p) const {
  PlanInfo info;
  auto it = plans_.find(p.key());
  if (it == plans_.end()) return info;
  const Plan& pl = *it->second;
  info.offered = pl.offered;
  info.built = static_cast<int>(pl.plans.size());
  if (pl.chosen >= 0) {
    info.chosen = pl.index[static_cast<size_t>(pl.chosen)];
    info.ms = pl.ms;
    info.workspace = pl.workspace[static_cast<size_t>(pl.chosen)];
  }
  return info;
}

Result<GraphConv::Plan*> GraphConv::plan_for(const GraphConvProblem& p, const std::string& what) {
  const std::string key = p.key();
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();
  if (auto it = refused_.find(key); it != refused_.end()) return it->second;
  Result<Plan*> made = make_plan(p, key, what);
  if (!made && made.status().code() == StatusCode::kUnsupported) refused_[key] = made.status();
  return made;
}

Result<GraphConv::Plan*> GraphConv::make_plan(const GraphConvProblem& p, const std::string& key,
                                              const std::string& what) {
  auto h = static_cast<cudnnHandle_t>(handle_);
  const std::string where = what + " [" + key + "]";
  const std::array<int64_t, 5> xd{1, p.cin, p.t, p.h, p.w};
  const std::array<int64_t, 5> wd{p.cout, p.cin, p.kt, p.kh, p.kw};
  const std::array<int64_t, 5> yd{1, p.cout, p.out_t(), p.out_h(), p.out_w()};
  const std::array<int64_t, 5> vec{1, p.cout, 1, 1, 1};
  const std::array<int64_t, 5> one{1, 1, 1, 1, 1};

  auto plan = std::make_unique<Plan>();
  std::deque<Desc>& tensors = plan->parts;
  SEEDVAE_ASSIGN_OR_RETURN(Desc x, tensor(kX, p.x_type, xd, false, where));
  SEEDVAE_ASSIGN_OR_RETURN(Desc w, tensor(kW, p.w_type, wd, false, where));
  SEEDVAE_ASSIGN_OR_RETURN(Desc y, tensor(kY, p.y_type, yd, false, where));
  // The steps after the convolution: each reads the previous result; the last writes y.
  struct Step {
    cudnnPointwiseMode_t mode;
    int64_t uid;
    std::array<int64_t, 5> dims;
  };
  std::vector<Step> steps;
  if (p.x_scale) steps.push_back({CUDNN_POINTWISE_MUL, kXScale, one});
  if (p.w_scale) steps.push_back({CUDNN_POINTWISE_MUL, kWScale, vec});
  if (p.bias) steps.push_back({CUDNN_POINTWISE_ADD, kBias, vec});
  // The convolution's result: y itself when nothing follows and the types allow, else virtual.
  const bool direct = steps.empty() && p.y_type != GraphType::kFp8E4M3 &&
                      (p.y_type == p.x_type || p.y_type == GraphType::kF32);
  int64_t next_virtual = kVirtual;
  Desc conv_out;
  if (!direct) {
    SEEDVAE_ASSIGN_OR_RETURN(conv_out, tensor(next_virtual++, GraphType::kF32, yd, true, where));
  }
  const cudnnDataType_t comp = p.half_accumulate ? dnn(p.x_type) : CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t dims = 3;
  const std::array<int64_t, 3> dil{1, 1, 1}, stride{p.st, p.sh, p.sw}, pad{0, p.ph, p.pw};
  Desc cd(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  cd.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp)
      .set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode)
      .set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims)
      .set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 3, dil.data())
      .set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 3, stride.data())
      .set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 3, pad.data())
      .set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 3, pad.data());
  SEEDVAE_TRY(cd.finalize(where + " convolution"));
  const float alpha = 1.f, beta = 0.f;
  std::vector<Desc> ops;
  {
    Desc op(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x)
        .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w)
        .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, direct ? y : conv_out)
        .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, cd)
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha)
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
    SEEDVAE_TRY(op.finalize(where + " convolution op"));
    ops.push_back(std::move(op));
  }
  if (!direct) {
    const Desc* prev = &conv_out;
    if (steps.empty()) {
      // a type conversion only (fp32 accumulation into fp8/another 16-bit type)
      SEEDVAE_ASSIGN_OR_RETURN(
          Desc op, pointwise(CUDNN_POINTWISE_IDENTITY, *prev, nullptr, y, where + " output"));
      ops.push_back(std::move(op));
    }
    for (size_t i = 0; i < steps.size(); ++i) {
      const Step& s = steps[i];
      SEEDVAE_ASSIGN_OR_RETURN(Desc operand, tensor(s.uid, GraphType::kF32, s.dims, false, where));
      const bool last = i + 1 == steps.size();
      Desc out;
      if (!last) {
        SEEDVAE_ASSIGN_OR_RETURN(out, tensor(next_virtual++, GraphType::kF32, yd, true, where));
      }
      SEEDVAE_ASSIGN_OR_RETURN(Desc op, pointwise(s.mode, *prev, &operand, last ? y : out,
                                                  where + " step " + std::to_string(i)));
      ops.push_back(std::move(op));
      tensors.push_back(std::move(operand));
      if (!last) {
        tensors.push_back(std::move(out));
        prev = &tensors.back();
      }
    }
  }
  std::vector<cudnnBackendDescriptor_t> op_list;
  for (const Desc& d : ops) op_list.push_back(d.get());
  Desc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph
      .set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
           static_cast<int64_t>(op_list.size()), op_list.data())
      .set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
  SEEDVAE_TRY(graph.finalize(where + " operation graph"));

  // Heuristics: mode A, then the fallback list, both as offered.
  std::string first_error;
  for (cudnnBackendHeurMode_t hm : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph)
        .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &hm);
    Status hs = heur.finalize(where + " heuristics");
    if (!hs.is_ok()) {
      if (first_error.empty()) first_error = hs.message();
      continue;
    }
    int64_t count = 0;
    cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                             CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr);
    count = std::min<int64_t>(count, 16);
    std::vector<Desc> cfgs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < count; ++i) {
      cfgs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
      raw.push_back(cfgs.back().get());
    }
    int64_t got = 0;
    if (count > 0) {
      Status gs = cudnn_status(
          cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data()),
          where + " heuristics results");
      if (!gs.is_ok()) {
        if (first_error.empty()) first_error = gs.message();
        continue;
      }
    }
    for (int64_t i = 0; i < got; ++i) {
      const int index = plan->offered++;
      Desc ep(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      ep.set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfgs[static_cast<size_t>(i)])
          .set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
      Status es = ep.finalize(where + " execution plan " + std::to_string(index));
      if (!es.is_ok()) {
        if (first_error.empty()) first_error = es.message();
        continue;
      }
      int64_t ws = 0, n = 0;
      cudnnBackendGetAttribute(ep.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
                               1, &n, &ws);
      plan->plans.push_back(std::move(ep));
      plan->index.push_back(index);
      plan->workspace.push_back(ws);
    }
    if (!plan->plans.empty()) break;
  }
  for (Desc* d : {&x, &w, &y, &conv_out, &cd, &graph}) tensors.push_back(std::move(*d));
  for (Desc& d : ops) tensors.push_back(std::move(d));
  if (plan->plans.empty()) {
    return unsupported(where + ": no cuDNN engine runs this graph (" +
                       std::to_string(plan->offered) + " configurations offered" +
                       (first_error.empty() ? "" : "; first failure: " + first_error) + ")");
  }
  Plan* raw_plan = plan.get();
  plans_[key] = std::move(plan);
  return raw_plan;
}

Status GraphConv::run(const GraphConvProblem& p, const GraphConvArgs& a, const std::string& what) {
  return run_plan(p, a, -1, what);
}

Status GraphConv::run_plan(const GraphConvProblem& p, const GraphConvArgs& a, int index,
                           const std::string& what) {
  SEEDVAE_ASSIGN_OR_RETURN(Plan * plan, plan_for(p, what));
  if (index >= static_cast<int>(plan->plans.size())) {
    return invalid_argument(what + ": plan " + std::to_string(index) + " of " +
                            std::to_string(plan->plans.size()));
  }
  auto h = static_cast<cudnnHandle_t>(handle_);
  std::vector<int64_t> uids{kX, kW, kY};
  std::vector<void*> ptrs{const_cast<void*>(a.x), const_cast<void*>(a.w), a.y};
  if (p.x_scale) {
    uids.push_back(kXScale);
    ptrs.push_back(const_cast<float*>(a.x_scale));
  }
  if (p.w_scale) {
    uids.push_back(kWScale);
    ptrs.push_back(const_cast<float*>(a.w_scale));
  }
  if (p.bias) {
    uids.push_back(kBias);
    ptrs.push_back(const_cast<float*>(a.bias));
  }
  auto execute = [&](size_t i) -> Status {
    BlockPtr ws;
    if (plan->workspace[i] > 0) {
      SEEDVAE_ASSIGN_OR_RETURN(ws, alloc_->allocate(static_cast<size_t>(plan->workspace[i]),
                                                    what + " cuDNN graph workspace"));
    }
    void* wsp = ws ? ws->ptr : nullptr;
    Desc vp(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    vp.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()),
           uids.data())
        .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
             static_cast<int64_t>(ptrs.size()), ptrs.data())
        .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &wsp);
    SEEDVAE_TRY(vp.finalize(what + " variant pack"));
    return cudnn_status(cudnnBackendExecute(h, plan->plans[i].get(), vp.get()), what);
  };
  if (index >= 0) return execute(static_cast<size_t>(index));
  if (plan->chosen < 0) {
    if (auto it = preferred_.find(p.key()); it != preferred_.end()) {
      const auto at = std::find(plan->index.begin(), plan->index.end(), it->second);
      if (at != plan->index.end()) plan->chosen = static_cast<int>(at - plan->index.begin());
    }
  }
  if (plan->chosen < 0) {
    // First run: time each buildable plan (one warm-up, one timed run) and keep the fastest.
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    SEEDVAE_CUDA_TRY(cudaEventCreate(&e0), what);
    SEEDVAE_CUDA_TRY(cudaEventCreate(&e1), what);
    double best = 1e30;
    std::string errors;
    const size_t n = autotune_ ? plan->plans.size() : 1;
    for (size_t i = 0; i < n; ++i) {
      Status s = execute(i);
      if (s.is_ok()) {
        cudaEventRecord(e0, stream_);
        s = execute(i);
        cudaEventRecord(e1, stream_);
      }
      float ms = 0;
      if (s.is_ok() && cudaEventSynchronize(e1) == cudaSuccess &&
          cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess && ms < best) {
        best = ms;
        plan->chosen = static_cast<int>(i);
      }
      if (!s.is_ok() && errors.empty()) errors = s.message();
      cudaGetLastError();
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    if (plan->chosen < 0) {
      return unsupported(what + ": every cuDNN graph plan failed to run (" + errors + ")");
    }
    plan->ms = best;
  }
  return execute(static_cast<size_t>(plan->chosen));
}

}  // namespace seedvae::gpu
