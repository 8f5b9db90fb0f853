// The values the Backend ops (backend.h) take: the Tensor handle and the parameter structs of
// conv3d, group_norm and attention. A header of their own so that the shared argument checks
// (op_checks.h) can name them without the Backend interface.
#pragma once

#include <memory>

#include "core/tensor/dtype.h"
#include "core/tensor/shape.h"

namespace seedvae {

// Backend-owned memory behind a Tensor. Released when the last Tensor referring to it dies.
class Storage {
 public:
  virtual ~Storage() = default;
};

// A tensor on a backend: shared, reference-counted storage plus its logical shape and dtype.
// Copying a Tensor shares the storage (like a torch.Tensor handle); ops never modify their inputs
// except where the op says "in place".
struct Tensor {
  std::shared_ptr<Storage> storage;
  Shape shape;
  DType dtype = DType::kF32;

  bool defined() const { return storage != nullptr; }
};

// Plain 3-D cross-correlation (PyTorch conv3d) with zero padding in H and W only; temporal context
// (causal padding) is made explicit by the caller with causal_pad().
struct Conv3dParams {
  int stride_t = 1, stride_h = 1, stride_w = 1;
  int pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  // The model's output (the encoder's and the decoder's conv_out): a backend that computes in 16
  // bits returns it in fp32 (the result's dtype says so), so the output is not rounded to 16
  // bits. Such a tensor is only downloaded, sliced, concatenated or copied (frame copies).
  bool model_output = false;
};

// GroupNorm over (C/groups channels x H x W) of each frame separately, then optional SiLU.
struct GroupNormParams {
  int groups = 32;
  float eps = 1e-6f;
  bool silu = false;
  // Frames of causal context a causal_pad() will put in front of a SiLU output (which feeds a
  // causal convolution in the model): a backend may reserve that room in front of the output so
  // the pad copies nothing. 0 when the output is not padded (VaeModel's lean convolutions).
  int context_frames = 2;
};

// Weights of the mid-block spatial self-attention (one head, head_dim = C).
struct AttentionWeights {
  Tensor norm_weight, norm_bias;  // [C]
  Tensor wq, bq, wk, bk, wv, bv;  // [C, C], [C]
  Tensor wo, bo;                  // to_out.0
  int groups = 32;
  float eps = 1e-6f;
};

// RMS norm over the channels of every position (n, t, h, w) separately (the Wan VAEs' RMS_norm):
// y_c = x_c / max(||x||_2, eps) * sqrt(C) * gamma_c, no mean subtracted, no bias; then optional
// SiLU. eps is the floor of the Euclidean norm (F.normalize's 1e-12), not a term under the root.
struct RmsNormParams {
  bool silu = false;
  float eps = 1e-12f;
  // As GroupNormParams::context_frames: the causal context a causal_pad() will put in front of
  // a SiLU output, room a backend may reserve so the pad copies nothing (0: not padded).
  int context_frames = 0;
};

// Weights of the Wan middle-block attention: RMS norm (gain [C], no bias), one head of width C
// whose q/k/v come from one 1x1 convolution C -> 3C (split here into three [C, C] projections),
// output projection [C, C]. Biases [C].
struct RmsAttentionWeights {
  Tensor gamma;
  Tensor wq, bq, wk, bk, wv, bv;
  Tensor wo, bo;
};

// Wan2.2's AvgDown3D shortcut (Backend::avg_down): f = ft * fs * fs phases of every input channel
// become f expanded channels E[c*f + (it*fs + ih)*fs + iw] = x[c, t*ft + it, i*fs + ih, j*fs + iw]
// (zero frames in front pad T to a multiple of ft), and output channel o is the mean of the g =
// Cin*f/Cout consecutive expanded channels o*g .. o*g + g - 1.
struct AvgDownParams {
  int64_t out_channels = 0;
  int ft = 1, fs = 1;
};

// Wan2.2's DupUp3D shortcut (Backend::dup_up): r = Cout*f/Cin, y[o, t*ft + it, i*fs + ih, j*fs +
// iw] = x[(((o*ft + it)*fs + ih)*fs + iw) / r, t, i, j]; with drop_first the first ft - 1 output
// frames are removed (a stream's first chunk).
struct DupUpParams {
  int64_t out_channels = 0;
  int ft = 1, fs = 1;
  bool drop_first = false;
};

}  // namespace seedvae
