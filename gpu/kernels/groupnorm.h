// Per-frame GroupNorm (+ optional fused SiLU) of the CUDA backend (docs/model.md §2.1 "GN").
#pragma once

#include <cstdint>

#include "gpu/kernels/kernel_args.h"

namespace seedvae::gpu {

struct GroupNormArgs {
  ElemType type = ElemType::kF32;
  Layout layout = Layout::kNDHWC;
  Dims5 d;
  int groups = 32;
  float eps = 1e-6f;
  bool silu = false;
  const void* x = nullptr;
  void* y = nullptr;             // must not alias x
  const float* gamma = nullptr;  // [C] or null (1)
  const float* beta = nullptr;   // [C] or null (0)
  // Per-channel bias still to be added to x (a convolution's bias left pending): the statistics
  // and the output are those of x + in_bias.
  const float* in_bias = nullptr;
  float* workspace = nullptr;  // group_norm_workspace_floats() floats
  int num_sms = 108;
};

// fp32 scratch the launcher needs (partial sums + per-frame, per-channel coefficients).
int64_t group_norm_workspace_floats(const GroupNormArgs& a);

void launch_group_norm(const GroupNormArgs& a, Stream stream);

}  // namespace seedvae::gpu
