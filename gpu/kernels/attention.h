// Attention core of the mid-block self-attention (one head, head_dim = C, per frame):
// O = softmax(Q K^T * scale) V for each of `frames` independent [tokens, dim] problems.
// The projections, GroupNorm and residual are done by the backend around these kernels.
#pragma once

#include <cstdint>

#include "gpu/kernels/kernel_args.h"

namespace seedvae::gpu {

struct FlashArgs {
  ElemType type = ElemType::kF32;
  const void* q = nullptr;  // [frames * tokens, dim], row-major, contiguous
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  int64_t frames = 1, tokens = 1, dim = 1;
  float scale = 1.f;
};

enum class FlashKernel {
  kNone,  // dim too large for the fused kernels: use the materialised path
  kMma,   // tensor-core kernel (fp16/bf16, dim in {128, 256, 384, 512}, sm_80+ with enough smem)
  kSimt,  // fp32-arithmetic kernel for any dtype, dim <= 512
};

// Which fused kernel runs for these arguments on a device with `smem_optin` bytes of shared
// memory per block and compute capability `cc` (major*10 + minor).
FlashKernel choose_flash_kernel(const FlashArgs& a, int smem_optin, int cc);

// Runs the chosen fused kernel (O(tokens) memory, fp32 online softmax). Does nothing for kNone.
void launch_flash_attention(const FlashArgs& a, FlashKernel k, Stream stream);

// Materialised path: p[r, :] = softmax(s[r, :]) for `rows` rows of `cols` fp32 scores (already
// scaled); p in `out_type`, fp32 arithmetic.
void launch_softmax_rows(ElemType out_type, const float* s, void* p, int64_t rows, int64_t cols,
                         Stream stream);

}  // namespace seedvae::gpu
