// Row-major fp32 matrix products without oneDNN: Eigen's GEMM (header-only, multi-threaded with
// OpenMP on the backend's pool) on mapped, strided matrices. Same interface and semantics as
// MatmulOneDnn (op_problems.h). Internal to core/cpu; same thread affinity as the backend.
#pragma once

#include <memory>

#include "core/base/status.h"
#include "core/cpu/cpu_storage.h"
#include "core/cpu/op_problems.h"

namespace seedvae::cpu {

// The portable kernels keep no engine state; the type mirrors OneDnnContext.
struct PortableContext {};

class MatmulPortable {
 public:
  MatmulPortable(PortableContext& ctx, std::shared_ptr<MemoryCounters> counters);

  Status run(const MatmulProblem& p, const float* a, const float* b, const float* bias, float* c);
};

}  // namespace seedvae::cpu
