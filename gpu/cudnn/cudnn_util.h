// What the two cuDNN users (conv3d_cudnn.cpp: the legacy API; conv_graph.cpp: the graph API)
// share: a cuDNN status as a Status, and a handle bound to the backend's stream.
#pragma once

#include <cudnn.h>

#include <string>

#include "core/base/status.h"
#include "gpu/kernels/kernel_args.h"

namespace seedvae::gpu {

inline Status cudnn_status(cudnnStatus_t st, const std::string& what) {
  if (st == CUDNN_STATUS_SUCCESS) return Status::ok();
  std::string msg = what + ": cuDNN " + cudnnGetErrorString(st);
  if (st == CUDNN_STATUS_ALLOC_FAILED) return out_of_memory(msg);
  if (st == CUDNN_STATUS_NOT_SUPPORTED || st == CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH) {
    return unsupported(msg);
  }
  return Status(StatusCode::kDeviceError, msg);
}

// A new handle on `stream` (stored in *out, which the caller destroys, also after a failure).
inline Status make_cudnn_handle(Stream stream, cudnnHandle_t* out, const std::string& what) {
  SEEDVAE_TRY(cudnn_status(cudnnCreate(out), "creating the cuDNN handle for " + what));
  return cudnn_status(cudnnSetStream(*out, stream), "binding the cuDNN handle to the stream");
}

}  // namespace seedvae::gpu
