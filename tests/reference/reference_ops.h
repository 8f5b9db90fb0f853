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
  bool rms = false;  // the Wan attention: rms_norm(x, norm_weight) instead of GroupNorm
};

// Per frame: t = GN(x) as [N, C]; q,k,v = t W^T + b; o = softmax(q k^T / sqrt(C)) v W_o^T + b_o;
// out = x + o.
HostTensor attention(const HostTensor& x, const AttentionHost& w);

// ---- the Wan VAEs' ops, straight from their definitions (op_params.h, backend.h) ------------

// x_c / max(sqrt(sum_c x_c^2), 1e-12) * sqrt(C) * gamma_c per position, then optional SiLU.
HostTensor rms_norm(const HostTensor& x, const HostTensor* gamma, bool silu);

// y[n, c, t, 2i + a, 2j + b] = x[n, c, t, i, j].
HostTensor upsample_nearest(const HostTensor& x);

// y[n, c, f*t + i] = x[n, i*C + c, t].
HostTensor frames_from_channels(const HostTensor& x, int f);

// y[n, c*p*p + dx*p + dy, t, i, j] = x[n, c, t, p*i + dy, p*j + dx]; unpatchify inverts it.
HostTensor patchify(const HostTensor& x, int p);
HostTensor unpatchify(const HostTensor& x, int p);

// AvgDown3D: zero frames in front to a multiple of ft, expanded channels
// E[c*f + (it*fs + ih)*fs + iw][t, i, j] = x[c, t*ft + it, i*fs + ih, j*fs + iw], group means.
HostTensor avg_down(const HostTensor& x, int64_t cout, int ft, int fs);

// DupUp3D: y[o, t*ft + it, i*fs + ih, j*fs + iw] = x[(((o*ft + it)*fs + ih)*fs + iw) / r, t, i, j]
// with r = cout*f/Cin, the first ft - 1 frames dropped with drop_first.
HostTensor dup_up(const HostTensor& x, int64_t cout, int ft, int fs, bool drop_first);

}  // namespace seedvae::ref
