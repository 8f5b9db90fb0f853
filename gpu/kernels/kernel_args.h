// Plain-C++ pieces shared by the kernel launchers' argument structs (no CUDA header here; the
// stream travels as CUstream_st*, which is what cudaStream_t is).
#pragma once

#include <cstdint>

struct CUstream_st;

namespace seedvae::gpu {

using Stream = CUstream_st*;

// Element type of device tensors.
enum class ElemType : uint8_t { kF32, kF16, kBF16 };

constexpr int elem_size(ElemType t) {
  return t == ElemType::kF32 ? 4 : 2;
}

// Physical layout of a 5-D activation [N, C, T, H, W]: NCDHW (PyTorch default) or NDHWC
// (channels-last; with N = 1 every frame is one contiguous [H, W, C] block).
enum class Layout : uint8_t { kNCDHW, kNDHWC };

struct Dims5 {
  int64_t n = 1, c = 1, t = 1, h = 1, w = 1;
  constexpr int64_t numel() const { return n * c * t * h * w; }
  constexpr int64_t hw() const { return h * w; }
};

}  // namespace seedvae::gpu
