// Row-major fp32 matrix products through oneDNN's matmul primitive (brgemm kernels), with
// primitives cached per problem. Used by the attention block. Internal to core/cpu; same thread
// affinity as the backend.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>

#include <dnnl.hpp>

#include "core/base/status.h"
#include "core/cpu/cpu_storage.h"
#include "core/cpu/onednn_context.h"
#include "core/cpu/op_problems.h"

namespace seedvae::cpu {

class MatmulOneDnn {
 public:
  MatmulOneDnn(OneDnnContext& ctx, std::shared_ptr<MemoryCounters> counters);
  ~MatmulOneDnn();

  Status run(const MatmulProblem& p, const float* a, const float* b, const float* bias, float* c);

 private:
  struct Plan;
  using Key = std::array<int64_t, 9>;
  Result<Plan*> plan_for(const MatmulProblem& p);

  OneDnnContext& ctx_;
  std::shared_ptr<MemoryCounters> counters_;
  static constexpr size_t kMaxPlans = 64;  // least recently used plans beyond this are dropped
  std::map<Key, std::unique_ptr<Plan>> plans_;
  uint64_t clock_ = 0;
};

}  // namespace seedvae::cpu
