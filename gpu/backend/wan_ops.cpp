// The CUDA backend's Wan VAE ops (core/backend/backend.h, docs/model.md "The Wan VAEs"): zeros,
// RMS norm (+ SiLU) and the data movement of the Wan resampling and shortcuts, on the kernels of
// gpu/kernels/wan.h, in both layouts. rms_attention shares the attention path (attention.cpp).
#include <algorithm>

#include "gpu/backend/cuda_backend_impl.h"
#include "gpu/cuda_check.h"

namespace seedvae::gpu::detail {

Result<Tensor> CudaBackend::zeros(const Shape& shape) {
  constexpr std::string_view op = "zeros";
  SEEDVAE_TRY(check_thread(op));
  if (shape.rank() != 5) {
    return invalid_argument("zeros: an activation is 5-D [N, C, T, H, W], got " + str(shape));
  }
  const std::string what = "zeros " + str(shape);
  SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_activation(shape, 0, what));
  const int64_t bytes = shape.numel() * dtype_size(act_);
  // all-zero bits are +0 in fp32, fp16 and bf16
  if (bytes > 0) SEEDVAE_CUDA_TRY(cudaMemsetAsync(storage(y)->ptr(), 0, bytes, stream_), what);
  return y;
}

Result<Tensor> CudaBackend::rms_norm(const Tensor& x, const Tensor& gamma, const RmsNormParams& p) {
  constexpr std::string_view op = "rms_norm";
  SEEDVAE_TRY(check_thread(op));
  // a convolution's pending bias is added in the kernel (fused bias)
  SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * xs, activation_of(x, op, "input", true));
  SEEDVAE_TRY(check_rms_norm(x.shape, gamma, p));
  const float* g = nullptr;
  if (gamma.defined()) {
    SEEDVAE_ASSIGN_OR_RETURN(g, vector_of(gamma, op, "gamma"));
  }
  const std::string what = "rms_norm " + str(x.shape);
  // RMS norm + SiLU feeds a causal convolution in the model: give it spare frames in front
  SEEDVAE_ASSIGN_OR_RETURN(
      Tensor y,
      new_activation(x.shape, p.silu ? std::max(p.context_frames, 0) : 0, what + " output"));
  RmsNormArgs a;
  a.type = elem_of(act_);
  a.layout = xs->layout;
  a.d = dims5(x.shape);
  a.x = xs->ptr();
  a.y = storage(y)->ptr();
  a.gamma = g;
  a.bias = xs->pending_bias;
  a.eps = p.eps;
  a.silu = p.silu;
  launch_rms_norm(a, stream_);
  SEEDVAE_TRY(check_launch(what));
  return y;
}

Result<Tensor> CudaBackend::wan_move(const Tensor& x, const Shape& out, WanMoveArgs a,
                                     std::string_view op) {
  SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * xs, activation_of(x, op, "input"));
  const std::string what = std::string(op) + " " + str(x.shape);
  SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_activation(out, 0, what + " output"));
  a.type = elem_of(act_);
  a.layout = xs->layout;
  a.in = dims5(x.shape);
  a.out = dims5(out);
  a.x = xs->ptr();
  a.y = storage(y)->ptr();
  launch_wan_move(a, stream_);
  SEEDVAE_TRY(check_launch(what));
  return y;
}

Result<Tensor> CudaBackend::upsample_nearest(const Tensor& x) {
  constexpr std::string_view op = "upsample_nearest";
  SEEDVAE_TRY(check_thread(op));
  SEEDVAE_ASSIGN_OR_RETURN(const Shape out, upsample_nearest_shape(x.shape));
  WanMoveArgs a;
  a.move = WanMove::kUpsampleNearest;
  return wan_move(x, out, a, op);
}

Result<Tensor> CudaBackend::frames_from_channels(const Tensor& x, int factor) {
  constexpr std::string_view op = "frames_from_channels";
  SEEDVAE_TRY(check_thread(op));
  SEEDVAE_ASSIGN_OR_RETURN(const Shape out, frames_from_channels_shape(x.shape, factor));
  WanMoveArgs a;
  a.move = WanMove::kFramesFromChannels;
  a.factor = factor;
  return wan_move(x, out, a, op);
}

Result<Tensor> CudaBackend::patchify(const Tensor& x, int p) {
  constexpr std::string_view op = "patchify";
  SEEDVAE_TRY(check_thread(op));
  SEEDVAE_ASSIGN_OR_RETURN(const Shape out, patchify_shape(x.shape, p));
  WanMoveArgs a;
  a.move = WanMove::kPatchify;
  a.factor = p;
  return wan_move(x, out, a, op);
}

Result<Tensor> CudaBackend::unpatchify(const Tensor& x, int p) {
  constexpr std::string_view op = "unpatchify";
  SEEDVAE_TRY(check_thread(op));
  SEEDVAE_ASSIGN_OR_RETURN(const Shape out, unpatchify_shape(x.shape, p));
  WanMoveArgs a;
  a.move = WanMove::kUnpatchify;
  a.factor = p;
  return wan_move(x, out, a, op);
}

Result<Tensor> CudaBackend::avg_down(const Tensor& x, const AvgDownParams& p) {
  constexpr std::string_view op = "avg_down";
  SEEDVAE_TRY(check_thread(op));
  SEEDVAE_ASSIGN_OR_RETURN(const Shape out, avg_down_shape(x.shape, p));
  WanMoveArgs a;
  a.move = WanMove::kAvgDown;
  a.ft = p.ft;
  a.fs = p.fs;
  return wan_move(x, out, a, op);
}

Result<Tensor> CudaBackend::dup_up(const Tensor& x, const DupUpParams& p) {
  constexpr std::string_view op = "dup_up";
  SEEDVAE_TRY(check_thread(op));
  SEEDVAE_ASSIGN_OR_RETURN(const Shape out, dup_up_shape(x.shape, p));
  WanMoveArgs a;
  a.move = WanMove::kDupUp;
  a.ft = p.ft;
  a.fs = p.fs;
  a.drop_first = p.drop_first;
  return wan_move(x, out, a, op);
}

}  // namespace seedvae::gpu::detail
