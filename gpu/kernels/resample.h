// Depth-to-space of Upsample3D (docs/model.md §2.1): x [N, 4*Z*C, T, H, W] -> y [N, C, T*Z(-1), 2H,
// 2W], input channel k = ((ih*2 + iw)*Z + it)*C + c; with drop_frame_1 output frame 1 is skipped.
#pragma once

#include <cstdint>

#include "gpu/kernels/kernel_args.h"

namespace seedvae::gpu {

struct DepthToSpaceArgs {
  ElemType type = ElemType::kF32;
  Layout layout = Layout::kNDHWC;
  Dims5 in;  // input dims (c = 4*Z*C_out)
  int z = 1;
  bool drop_frame_1 = false;
  const void* x = nullptr;
  void* y = nullptr;
};

void launch_depth_to_space(const DepthToSpaceArgs& a, Stream stream);

}  // namespace seedvae::gpu
