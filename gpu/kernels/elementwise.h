// Elementwise and layout kernels of the CUDA backend: residual add, per-channel bias, SiLU,
// dtype conversion, NCDHW <-> NDHWC transposes (also used to repack conv weights to KRSC), and
// asymmetric spatial zero padding. Launchers enqueue on `stream` and never synchronise; the caller
// checks cudaGetLastError() once per op (gpu/cuda_check.h).
#pragma once

#include <cstdint>

#include "gpu/kernels/kernel_args.h"

namespace seedvae::gpu {

// acc[i] += x[i], i < n (fp32 arithmetic, rounded once to the element type).
void launch_add_inplace(ElemType t, void* acc, const void* x, int64_t n, Stream stream);

// acc = acc + acc_bias[c] + x + x_bias[c] (either bias may be null): a residual add that also
// applies convolution biases left pending.
void launch_add_biased(ElemType t, Layout layout, void* acc, const float* acc_bias, const void* x,
                       const float* x_bias, const Dims5& d, Stream stream);

// y[n, c, ...] += bias[c] for a 5-D activation in `layout` (bias fp32).
void launch_add_bias(ElemType t, Layout layout, void* y, const float* bias, const Dims5& d,
                     Stream stream);

// y[i] = silu(y[i]).
void launch_silu_inplace(ElemType t, void* y, int64_t n, Stream stream);

// dst[i] = (dst type) src[i].
void launch_convert(ElemType src_t, const void* src, ElemType dst_t, void* dst, int64_t n,
                    Stream stream);

// dst = (dst type)(src + bias[c]) for a 5-D activation in `layout` (bias fp32, may be null: a
// plain conversion): the way back from an fp16 convolution output in fidelity precision.
void launch_convert_bias(ElemType src_t, const void* src, ElemType dst_t, void* dst,
                         const float* bias, Layout layout, const Dims5& d, Stream stream);

// Batched transpose with conversion. to_last: src [B, C, S] -> dst [B, S, C]; otherwise
// src [B, S, C] -> dst [B, C, S]. NCDHW -> NDHWC is (B = N, C, S = T*H*W); a conv weight
// [Cout, Cin, kT, kH, kW] -> [Cout, kT, kH, kW, Cin] is (B = Cout, C = Cin, S = kT*kH*kW).
void launch_transpose(ElemType src_t, const void* src, ElemType dst_t, void* dst, int64_t b,
                      int64_t c, int64_t s, bool to_last, Stream stream);

// Zero padding of H and W: x [N, C, T, H, W] -> y [N, C, T, H+top+bottom, W+left+right].
struct PadArgs {
  ElemType type = ElemType::kF32;
  Layout layout = Layout::kNDHWC;
  Dims5 in;
  int top = 0, bottom = 0, left = 0, right = 0;
  const void* x = nullptr;
  void* y = nullptr;
};
void launch_pad_hw(const PadArgs& a, Stream stream);

// Channel padding / slicing of a channels-last matrix: dst[r, c] = c < src_c ? src[r, c] : 0 for
// c < dst_c, r < rows (dst_c may be smaller than src_c: keeps the first dst_c channels).
void launch_pad_channels(ElemType t, const void* src, int64_t src_c, void* dst, int64_t dst_c,
                         int64_t rows, Stream stream);

// FP8 (e4m3) quantisation, the steps of core/backend/fp8_numerics.h's fake_quantize_e4m3 on the
// device: amax[r] = max |x[r * len + i]| over a row (amax zeroed first; `rows` of `len`
// elements: one row for a per-tensor scale, Cout rows of kT*kH*kW*Cin for a KRSC weight's
// per-output-channel scales); scale = amax / 448 (1 where amax is 0 or not finite);
// dst[i] = e4m3(src[i] / scale[i / row]), rounded to nearest even and saturated to +-448. dst
// holds one byte per element; the products of dst with its scales dequantise it.
void launch_row_amax(ElemType t, const void* x, int64_t rows, int64_t len, float* amax,
                     Stream stream);
void launch_e4m3_scales(const float* amax, float* scale, int64_t n, Stream stream);
void launch_quantize_e4m3(ElemType src_t, const void* src, void* dst, int64_t n, const float* scale,
                          int64_t row, Stream stream);

// Deterministic pseudo-random values in [-1, 1) (hash of index and seed), for benchmarks.
void launch_fill_random(ElemType t, void* dst, int64_t n, uint64_t seed, Stream stream);

}  // namespace seedvae::gpu
