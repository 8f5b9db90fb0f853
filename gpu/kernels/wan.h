// The Wan VAEs' own kernels (docs/model.md "The Wan VAEs"): RMS norm over the channels of each
// position (+ SiLU), and the data movement of their resampling and shortcuts -- nearest 2x
// upsampling, time_conv's channels to frames, Wan2.2's patchify/unpatchify, the AvgDown3D and
// DupUp3D shortcuts. Both layouts; the semantics are Backend's (core/backend/backend.h).
#pragma once

#include <cstdint>

#include "gpu/kernels/kernel_args.h"

namespace seedvae::gpu {

// y = x / max(||x||_2 over C, eps) * sqrt(C) * gamma[c] (gamma may be null), then SiLU if `silu`;
// the sum of squares in fp32.
struct RmsNormArgs {
  ElemType type = ElemType::kF32;
  Layout layout = Layout::kNDHWC;
  Dims5 d;
  const void* x = nullptr;
  void* y = nullptr;
  const float* gamma = nullptr;
  const float* bias = nullptr;  // a convolution's pending bias, added to x first (fused bias)
  float eps = 1e-12f;
  bool silu = false;
};
void launch_rms_norm(const RmsNormArgs& a, Stream stream);

enum class WanMove : uint8_t {
  kUpsampleNearest,     // y[.., 2i + a, 2j + b] = x[.., i, j]
  kFramesFromChannels,  // y[c, f*t + i] = x[i*C + c, t]   (factor = f)
  kPatchify,            // y[c*p*p + dx*p + dy, t, i, j] = x[c, t, p*i + dy, p*j + dx]  (factor = p)
  kUnpatchify,          // the inverse
  kDupUp,               // DupUp3D (out_channels, ft, fs, drop_first)
  kAvgDown,             // AvgDown3D (out_channels, ft, fs): a mean of g inputs, fp32 sum
};

struct WanMoveArgs {
  WanMove move = WanMove::kUpsampleNearest;
  ElemType type = ElemType::kF32;
  Layout layout = Layout::kNDHWC;
  Dims5 in, out;
  int factor = 1;  // frames_from_channels' f, patchify's p
  int ft = 1, fs = 1;
  bool drop_first = false;
  const void* x = nullptr;
  void* y = nullptr;
};
void launch_wan_move(const WanMoveArgs& a, Stream stream);

}  // namespace seedvae::gpu
