// The CPU backend: oneDNN for convolutions and matrix products, plain multi-threaded loops for the
// rest. fp32 activations and weights (fp16/bf16 weights are widened exactly on upload). It is the
// definition of correctness the CUDA backend is tested against.
#pragma once

#include <memory>

#include "core/backend/backend.h"

namespace seedvae {

struct CpuBackendOptions {
  int threads = 0;  // 0: all hardware threads
};

Result<std::unique_ptr<Backend>> create_cpu_backend(const CpuBackendOptions& options = {});

}  // namespace seedvae
