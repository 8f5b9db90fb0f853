// Helpers for 3-D convolutions with very few input or output channels (the encoder's conv_in,
// 3 -> 128, and the decoder's conv_out, 128 -> 3), where cuDNN's implicit GEMM wastes most of its
// tensor-core tiles. Both reduce the convolution to one dense cuBLASLt product per frame:
//  * few input channels: im2col (K = taps * Cin, zero-padded to a multiple of 8) then
//    [pixels, K] x [K, Cout];
//  * few output channels: [pixels, Cin] x [Cin, taps * Cout] for each input frame, then each
//    output pixel gathers its taps from the neighbouring rows (fp32 accumulation).
// NDHWC, one sample, symmetric spatial padding.
#pragma once

#include <cstdint>

#include "gpu/kernels/kernel_args.h"

namespace seedvae::gpu {

struct Im2colArgs {
  ElemType type = ElemType::kBF16;
  const void* x = nullptr;  // [T, H, W, Cin]
  int64_t h = 1, w = 1, cin = 1;
  int kt = 1, kh = 1, kw = 1, st = 1, sh = 1, sw = 1, ph = 0, pw = 0;
  int64_t ho = 1, wo = 1;
  int64_t t0 = 0, frames = 1;  // output frames [t0, t0 + frames)
  int64_t kp = 8;              // padded K (>= kt*kh*kw*cin)
  void* col = nullptr;         // [frames * ho * wo, kp]
};
void launch_im2col(const Im2colArgs& a, Stream stream);

struct TapGatherArgs {
  // one input frame's products [h * w, ldy], column ((kh * kw_n + kw) * kt_n + kt) * cout + co
  const float* y = nullptr;
  int64_t ldy = 1;
  float* acc = nullptr;  // [t_out, ho, wo, cout] fp32
  int64_t frame = 0;     // index of the input frame
  int64_t t_out = 1, h = 1, w = 1, ho = 1, wo = 1, cout = 1;
  int kt = 1, kh = 1, kw = 1, ph = 0, pw = 0;
};
// kt in 1..3 and cout in 1..7 (tap_gather_supported); im2col's kp must be a multiple of 16 bytes'
// worth of elements (8 for fp16/bf16, 4 for fp32).
bool tap_gather_supported(int kt, int64_t cout);
void launch_tap_gather(const TapGatherArgs& a, Stream stream);

// out[i] = (type) (acc[i] + bias[i % c]) for rows * c elements (bias may be null).
void launch_bias_convert(const float* acc, const float* bias, int64_t rows, int64_t c, ElemType t,
                         void* out, Stream stream);

}  // namespace seedvae::gpu
