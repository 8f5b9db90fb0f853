// The CPU backend: oneDNN for convolutions and matrix products, plain multi-threaded loops for the
// rest. fp32 activations and weights (fp16/bf16 weights are widened exactly on upload). It is the
// definition of correctness the CUDA backend is tested against.
//
// Internals (core/cpu/README.md): activations are stored channels-last (NDHWC), the layout of
// oneDNN's fastest convolutions; download() always returns contiguous NCDHW. All parallel work,
// oneDNN's included, runs on one OpenMP pool of `threads` threads, set for the calling thread on
// entry to every op. Tensors must keep the shape they were created with (no reshaping).
#pragma once

#include <memory>
#include <string>

#include "core/backend/backend.h"

namespace seedvae {

struct CpuBackendOptions {
  int threads = 0;  // 0: all processors this process may run on (omp_get_num_procs)
};

Result<std::unique_ptr<Backend>> create_cpu_backend(const CpuBackendOptions& options = {});

// The libraries behind the CPU kernels of this build, for --version: "oneDNN 2.6.3 (runtime
// 2.6.3), OpenMP 201511" or "portable kernels, Eigen 3.4.0 GEMM (no oneDNN), OpenMP 201511".
std::string cpu_backend_libraries();

}  // namespace seedvae
