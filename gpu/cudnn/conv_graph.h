// A 3-D convolution through cuDNN's graph (backend) API, for what the legacy API cannot do: FP8
// (e4m3) operands with dequantisation scales, and an output type other than the inputs' (fp16 or
// bf16 operands into an fp32 output). The graph is conv (fp32 accumulation, a virtual fp32
// result), then optional pointwise steps in fp32 -- times a per-tensor scale, times a per-output-
// channel scale, plus a per-channel bias -- and the output in its own type. NDHWC, N = 1,
// symmetric spatial padding.
//
// Plans are built once per problem: the heuristics' engine configurations are finalised and, on
// the first run, each buildable one is timed on the real buffers and the fastest kept (like
// cudnnFindConvolutionForwardAlgorithmEx). A problem no engine supports is kUnsupported, naming
// how many configurations the heuristics offered and why the first failed.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "core/base/status.h"
#include "gpu/cudnn/conv3d_cudnn.h"
#include "gpu/kernels/kernel_args.h"

namespace seedvae::gpu {

class DeviceAllocator;

enum class GraphType : uint8_t { kF32, kF16, kBF16, kFp8E4M3 };
const char* graph_type_name(GraphType t);
int64_t graph_type_size(GraphType t);

struct GraphConvProblem {
  GraphType x_type = GraphType::kBF16, w_type = GraphType::kBF16, y_type = GraphType::kBF16;
  int64_t cin = 1, t = 1, h = 1, w = 1;      // input (N = 1, NDHWC)
  int64_t cout = 1, kt = 1, kh = 1, kw = 1;  // weight [cout, kt, kh, kw, cin]
  int st = 1, sh = 1, sw = 1;
  int ph = 0, pw = 0;
  bool x_scale = false;  // y *= x_scale[0]
  bool w_scale = false;  // y[.., c] *= w_scale[c]
  bool bias = false;     // y[.., c] += bias[c]
  // Accumulate in the inputs' 16-bit type (the convolution's compute type) instead of fp32: the
  // fast path of GeForce cards, whose fp16-accumulate tensor rate is twice the fp32 one.
  bool half_accumulate = false;

  int64_t out_t() const { return (t - kt) / st + 1; }
  int64_t out_h() const { return (h + 2 * ph - kh) / sh + 1; }
  int64_t out_w() const { return (w + 2 * pw - kw) / sw + 1; }
  std::string key() const;
};

// The problem of a legacy convolution (NDHWC) in the graph API, with these types.
GraphConvProblem graph_problem_of(const ConvProblem& p, GraphType x, GraphType y);

struct GraphConvArgs {
  const void* x = nullptr;
  const void* w = nullptr;
  const float* x_scale = nullptr;  // device, 1 value
  const float* w_scale = nullptr;  // device, cout values
  const float* bias = nullptr;     // device, cout values
  void* y = nullptr;
};

class GraphConv {
 public:
  // `autotune`: time every buildable engine configuration on the first run of a problem.
  static Result<std::unique_ptr<GraphConv>> create(Stream stream,
                                                   std::shared_ptr<DeviceAllocator> alloc,
                                                   bool autotune = true);
  ~GraphConv();
  GraphConv(const GraphConv&) = delete;
  GraphConv& operator=(const GraphConv&) = delete;

  Status run(const GraphConvProblem& p, const GraphConvArgs& a, const std::string& what);
  // Runs the problem with its `index`-th buildable plan (0 <= index < plan_info().built), the
  // others untouched: for checking every engine's result, not only the fastest's.
  Status run_plan(const GraphConvProblem& p, const GraphConvArgs& a, int index,
                  const std::string& what);

  // What the plan of a problem that has run is: the heuristics' configurations, how many could
  // be built, the chosen one's engine id (its index in the heuristics' list) and its timed ms.
  struct PlanInfo {
    int offered = 0;
    int built = 0;
    int chosen = -1;
    double ms = 0;
    int64_t workspace = 0;
  };
  PlanInfo plan_info(const GraphConvProblem& p) const;
  // The engine configuration (PlanInfo::chosen, an index in the heuristics' list) a problem's
  // first run takes instead of timing every one -- an earlier process's choice, persisted, so the
  // same problem runs the same engine from run to run and on every device. Ignored once the
  // problem has run, or when that configuration cannot be built here.
  void prefer(const GraphConvProblem& p, int engine) { preferred_[p.key()] = engine; }

 private:
  GraphConv() = default;
  struct Plan;
  Result<Plan*> plan_for(const GraphConvProblem& p, const std::string& what);
  Result<Plan*> make_plan(const GraphConvProblem& p, const std::string& key,
                          const std::string& what);
  void* handle_ = nullptr;
  Stream stream_ = nullptr;
  std::shared_ptr<DeviceAllocator> alloc_;
  bool autotune_ = true;
  std::map<std::string, std::unique_ptr<Plan>> plans_;
  std::map<std::string, Status> refused_;  // problems no engine took, asked once
  std::map<std::string, int> preferred_;   // prefer()
};

}  // namespace seedvae::gpu
