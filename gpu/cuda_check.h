// CUDA / cuBLAS / cuDNN return codes -> core::Status. Included only by gpu/ sources (host .cpp
// files and .cu files); nothing here aborts: a failed call becomes a value naming the statement,
// the op and where it happened.
#pragma once

#include <cuda_runtime.h>

#include <source_location>
#include <string>
#include <string_view>

#include "core/base/status.h"

namespace seedvae::gpu {

inline Status cuda_status(cudaError_t err, std::string_view what,
                          std::source_location where = std::source_location::current()) {
  if (err == cudaSuccess) return Status::ok();
  std::string msg =
      std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
  if (err == cudaErrorMemoryAllocation) {
    return Status(StatusCode::kOutOfMemory, std::move(msg), where);
  }
  return Status(StatusCode::kDeviceError, std::move(msg), where);
}

// After a kernel launch: picks up launch-configuration errors (and sticky faults of earlier work).
inline Status check_launch(std::string_view what,
                           std::source_location where = std::source_location::current()) {
  return cuda_status(cudaGetLastError(), what, where);
}

}  // namespace seedvae::gpu

#define SEEDVAE_CUDA_TRY(expr, what)                                                             \
  do {                                                                                           \
    const cudaError_t seedvae_cuda_err_ = (expr);                                                \
    if (seedvae_cuda_err_ != cudaSuccess) {                                                      \
      return ::seedvae::gpu::cuda_status(seedvae_cuda_err_, std::string(what) + " [" #expr "]"); \
    }                                                                                            \
  } while (0)
