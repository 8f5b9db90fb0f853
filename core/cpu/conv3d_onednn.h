// 3-D convolution of the CPU backend through oneDNN (convolution_forward, direct algorithm, fp32,
// forward_inference). Activations are channels-last (NDHWC), the layout oneDNN's brgconv kernels
// read and write, so source and destination are used in place, with no reorders. Weights are
// reordered once into the layout the primitive asks for (format_tag::any) and the pack is kept on
// the weight tensor's storage (CpuStorage::packed), keyed by the oneDNN memory descriptor.
// Primitives are cached per problem (creating one costs milliseconds of JIT). Scratchpads are
// user-managed and counted in MemoryStats.
// Internal to core/cpu; one instance per backend, same thread affinity as the backend.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <dnnl.hpp>

#include "core/backend/backend.h"
#include "core/cpu/cpu_storage.h"
#include "core/cpu/kernels.h"
#include "core/cpu/onednn_context.h"
#include "core/cpu/op_problems.h"

namespace seedvae::cpu {

class Conv3dOneDnn {
 public:
  Conv3dOneDnn(OneDnnContext& ctx, std::shared_ptr<MemoryCounters> counters);
  ~Conv3dOneDnn();

  // y = conv(x, weights) + bias with x and y channels-last; `weights` (either layout) may gain a
  // packed copy. Shapes were validated by the caller.
  Status run(const ConvProblem& prob, const float* x, CpuStorage& weights, const float* bias,
             float* y);

 private:
  struct Plan;
  using Key = std::array<int64_t, 17>;
  Result<Plan*> plan_for(const ConvProblem& prob);

  OneDnnContext& ctx_;
  std::shared_ptr<MemoryCounters> counters_;
  static constexpr size_t kMaxPlans = 64;  // least recently used plans beyond this are dropped
  std::map<Key, std::unique_ptr<Plan>> plans_;
  uint64_t clock_ = 0;
};

}  // namespace seedvae::cpu
