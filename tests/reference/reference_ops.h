// Plain, obviously-correct reference implementations of the Backend ops, used only as test
// oracles. Naive loops straight from the definitions in docs/model.md §2.1, accumulated in double;
// inputs and outputs are contiguous fp32 HostTensors in PyTorch layout. No threading, no tricks.
#pragma once

#include <cstdint>

#include "core/backend/backend.h"
#include "core/tensor/host_tensor.h"

namespace seedvae::ref {

// PyTorch F.conv3d(F.pad(x, (left, right, top, bottom)), w, b, stride); b may be null.
HostTensor conv3d(const HostTensor& x, const HostTensor& w, const HostTensor* b,
                  const Conv3dParams& p);

// [memory, x] along T if memory, else `frames` copies of x's frame 0 then x.
HostTensor causal_pad(const HostTensor& x, const HostTensor* memory, int frames);

// x[:, :, begin:end].
HostTensor slice_frames(const HostTensor& x, int64_t begin, int64_t end);

// torch.cat([a, b], dim=2).
HostTensor concat_frames(const HostTensor& a, const HostTensor& b);

// a + b.
HostTensor add(const HostTensor& a, const HostTensor& b);

// Per-frame GroupNorm (mean, biased variance over C/groups x H x W of one frame), affine
// (gamma/beta may be null), then optional SiLU.
HostTensor group_norm(const HostTensor& x, const HostTensor* gamma, const HostTensor* beta,
                      int groups, double eps, bool silu);

// einops "b (x y z c) f h w -> b c (f z) (h x) (w y)", optionally dropping output frame 1.
HostTensor depth_to_space(const HostTensor& x, int z, bool drop_frame_1);

struct AttentionHost {
  HostTensor norm_weight, norm_bias, wq, bq, wk, bk, wv, bv, wo, bo;
  int groups = 32;
  double eps = 1e-6;
};

// Per frame: t = GN(x) as [N, C]; q,k,v = t W^T + b; o = softmax(q k^T / sqrt(C)) v W_o^T + b_o;
// out = x + o.
HostTensor attention(const HostTensor& x, const AttentionHost& w);

}  // namespace seedvae::ref
