// The CUDA backend's smaller ops: causal padding (in place into spare frames in front of the
// input where buffer reuse allows), frame slices, concatenation and in-place frame copies,
// GroupNorm (+SiLU, with a pending convolution bias folded in), the residual add and
// depth-to-space. Each checks its arguments and queues copies or one kernel on the stream.
#include <algorithm>

#include "gpu/backend/cuda_backend_impl.h"
#include "gpu/cuda_check.h"
#include "gpu/kernels/elementwise.h"
#include "gpu/kernels/groupnorm.h"
#include "gpu/kernels/resample.h"

namespace seedvae::gpu::detail {

Result<Tensor> CudaBackend::causal_pad(const Tensor& x, const Tensor* memory, int frames) {
  constexpr std::string_view op = "causal_pad";
  SEEDVAE_TRY(check_thread(op));
  SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * xs, activation_of(x, op, "input"));
  const bool has_memory = memory != nullptr && memory->defined();
  CudaStorage* ms = nullptr;
  if (has_memory) {
    SEEDVAE_ASSIGN_OR_RETURN(ms, activation_of(*memory, op, "memory"));
  }
  SEEDVAE_ASSIGN_OR_RETURN(
      const Shape out_shape,
      causal_pad_shape(x.shape, has_memory ? &memory->shape : nullptr, frames));
  const int64_t k = out_shape.t() - x.shape.t();
  if (k == 0) return x;
  const std::string what = "causal_pad " + str(x.shape) + " + " + std::to_string(k) + " frames";
  const int64_t frame_bytes = x.shape.c() * x.shape.h() * x.shape.w() * dtype_size(act_);
  // In place: write the context into the spare frames in front of x (same block, no copy of x).
  if (opt_.buffer_reuse && xs->layout == Layout::kNDHWC && x.shape.n() == 1 &&
      xs->head_frames >= k && !xs->block->headroom_claimed) {
    xs->block->headroom_claimed = true;
    auto view = std::make_shared<CudaStorage>();
    view->block = xs->block;
    view->offset = xs->offset - static_cast<size_t>(k * frame_bytes);
    view->kind = Kind::kActivation;
    view->layout = Layout::kNDHWC;
    view->head_frames = xs->head_frames - k;
    char* dst = static_cast<char*>(view->ptr());
    if (has_memory) {
      SEEDVAE_CUDA_TRY(
          cudaMemcpyAsync(dst, ms->ptr(), k * frame_bytes, cudaMemcpyDeviceToDevice, stream_),
          what);
    } else {
      for (int64_t f = 0; f < k; ++f) {
        SEEDVAE_CUDA_TRY(cudaMemcpyAsync(dst + f * frame_bytes, xs->ptr(), frame_bytes,
                                         cudaMemcpyDeviceToDevice, stream_),
                         what);
      }
    }
    Tensor t;
    t.storage = std::move(view);
    t.shape = out_shape;
    t.dtype = act_;
    return t;
  }
  SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_activation(out_shape, 0, what));
  if (has_memory) {
    SEEDVAE_TRY(copy_frames(y, 0, *memory, 0, k, what));
  } else {
    for (int64_t f = 0; f < k; ++f) SEEDVAE_TRY(copy_frames(y, f, x, 0, 1, what));
  }
  SEEDVAE_TRY(copy_frames(y, k, x, 0, x.shape.t(), what));
  return y;
}

Result<Tensor> CudaBackend::slice_frames(const Tensor& x, int64_t begin, int64_t end) {
  constexpr std::string_view op = "slice_frames";
  SEEDVAE_TRY(check_thread(op));
  // A pending bias is per channel: the slice carries it on, so its consumer (or a download, in
  // fp32) still adds it with one rounding.
  SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * s, activation_of(x, op, "input", true, true));
  const float* bias = s->pending_bias;
  std::shared_ptr<Storage> bias_owner = s->bias_owner;
  SEEDVAE_ASSIGN_OR_RETURN(const Shape out_shape, slice_frames_shape(x.shape, begin, end));
  const std::string what = "slice_frames " + str(x.shape);
  SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_activation(out_shape, 0, what, x.dtype));
  SEEDVAE_TRY(copy_frames(y, 0, x, begin, end - begin, what));
  if (bias != nullptr) {
    storage(y)->pending_bias = bias;
    storage(y)->bias_owner = std::move(bias_owner);
  }
  return y;
}

Result<Tensor> CudaBackend::concat_frames(const Tensor& a, const Tensor& b) {
  constexpr std::string_view op = "concat_frames";
  SEEDVAE_TRY(check_thread(op));
  // Two outputs of one convolution (VaeModel's lean convolutions) carry the same pending bias:
  // the concatenation carries it on, so its consumer still adds it in fp32 (fused bias).
  const auto* pa = dynamic_cast<const CudaStorage*>(a.storage.get());
  const auto* pb = dynamic_cast<const CudaStorage*>(b.storage.get());
  const bool same_bias = pa && pb && pa->pending_bias && pa->pending_bias == pb->pending_bias;
  const float* bias = same_bias ? pa->pending_bias : nullptr;
  std::shared_ptr<Storage> bias_owner = same_bias ? pa->bias_owner : nullptr;
  SEEDVAE_TRY(activation_of(a, op, "first", same_bias, true).take_status());
  SEEDVAE_TRY(activation_of(b, op, "second", same_bias, true).take_status());
  if (a.dtype != b.dtype) return invalid_argument("concat_frames: the tensors differ in dtype");
  SEEDVAE_ASSIGN_OR_RETURN(const Shape out_shape, concat_frames_shape(a.shape, b.shape));
  const Shape& sa = a.shape;
  const Shape& sb = b.shape;
  const std::string what = "concat_frames " + str(sa) + " + " + str(sb);
  SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_activation(out_shape, 0, what, a.dtype));
  SEEDVAE_TRY(copy_frames(y, 0, a, 0, sa.t(), what));
  SEEDVAE_TRY(copy_frames(y, sa.t(), b, 0, sb.t(), what));
  if (same_bias) {
    storage(y)->pending_bias = bias;
    storage(y)->bias_owner = std::move(bias_owner);
  }
  return y;
}

Result<CudaBackend::NormArgs> CudaBackend::norm_args(const Tensor& x, const Tensor& gamma,
                                                     const Tensor& beta, const GroupNormParams& p,
                                                     std::string_view op) {
  SEEDVAE_TRY(check_thread(op));
  NormArgs a;
  SEEDVAE_ASSIGN_OR_RETURN(a.x, activation_of(x, op, "input", true));
  SEEDVAE_TRY(check_group_norm(x.shape, gamma, beta, p, op));
  if (gamma.defined()) {
    SEEDVAE_ASSIGN_OR_RETURN(a.gamma, vector_of(gamma, op, "gamma"));
  }
  if (beta.defined()) {
    SEEDVAE_ASSIGN_OR_RETURN(a.beta, vector_of(beta, op, "beta"));
  }
  return a;
}

Result<Tensor> CudaBackend::group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                       const GroupNormParams& p) {
  SEEDVAE_ASSIGN_OR_RETURN(const NormArgs a, norm_args(x, gamma, beta, p, "group_norm"));
  const std::string what = "group_norm " + str(x.shape);
  // GroupNorm+SiLU feeds a causal convolution in the model: give it spare frames in front.
  SEEDVAE_ASSIGN_OR_RETURN(
      Tensor y,
      new_activation(x.shape, p.silu ? std::max(p.context_frames, 0) : 0, what + " output"));
  if (x.shape.numel() == 0) return y;
  SEEDVAE_TRY(run_group_norm(a.x->ptr(), storage(y)->ptr(), a.x->layout, dims5(x.shape), a.gamma,
                             a.beta, p.groups, p.eps, p.silu, what, a.x->pending_bias));
  return y;
}

Status CudaBackend::group_norm_inplace(Tensor& x, const Tensor& gamma, const Tensor& beta,
                                       const GroupNormParams& p) {
  SEEDVAE_ASSIGN_OR_RETURN(const NormArgs a, norm_args(x, gamma, beta, p, "group_norm_inplace"));
  CudaStorage* xs = a.x;
  if (x.shape.numel() == 0) return Status::ok();
  // the kernels read every element before writing it (statistics and coefficients first, then
  // one read and one write per element by the same thread), so the output may be the input
  SEEDVAE_TRY(run_group_norm(xs->ptr(), xs->ptr(), xs->layout, dims5(x.shape), a.gamma, a.beta,
                             p.groups, p.eps, p.silu, "group_norm_inplace " + str(x.shape),
                             xs->pending_bias));
  xs->pending_bias = nullptr;  // folded into the normalisation
  xs->bias_owner.reset();
  return Status::ok();
}

Status CudaBackend::add_inplace(Tensor& acc, const Tensor& x) {
  constexpr std::string_view op = "add_inplace";
  SEEDVAE_TRY(check_thread(op));
  SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * as, storage_of(acc, op, "accumulator", true));
  SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * xs, storage_of(x, op, "addend", true));
  SEEDVAE_TRY(check_add(acc.shape, x.shape));
  if (as->kind != xs->kind || as->layout != xs->layout || acc.dtype != x.dtype) {
    return invalid_argument("add_inplace: accumulator and addend differ in layout or dtype");
  }
  if (as->pending_bias || xs->pending_bias) {
    if (acc.shape.rank() != 5) {
      return internal_error("add_inplace: pending bias on a non-activation");
    }
    // x's pending bias stays pending for x's other consumers (it is only read here)
    launch_add_biased(elem_of(acc.dtype), as->layout, as->ptr(), as->pending_bias, xs->ptr(),
                      xs->pending_bias, dims5(acc.shape), stream_);
    as->pending_bias = nullptr;
    as->bias_owner.reset();
  } else {
    launch_add_inplace(elem_of(acc.dtype), as->ptr(), xs->ptr(), acc.shape.numel(), stream_);
  }
  return check_launch("add_inplace " + str(acc.shape));
}

Result<Tensor> CudaBackend::depth_to_space(const Tensor& x, int temporal_factor, bool drop_frame_1,
                                           int context_frames) {
  constexpr std::string_view op = "depth_to_space";
  SEEDVAE_TRY(check_thread(op));
  SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * xs, activation_of(x, op, "input"));
  const int z = temporal_factor;
  const Shape& s = x.shape;
  SEEDVAE_ASSIGN_OR_RETURN(const Shape out_shape, depth_to_space_shape(s, z, drop_frame_1));
  const std::string what = "depth_to_space " + str(s);
  SEEDVAE_ASSIGN_OR_RETURN(
      Tensor y, new_activation(out_shape, std::max(context_frames, 0), what + " output"));
  DepthToSpaceArgs a;
  a.type = elem_of(act_);
  a.layout = xs->layout;
  a.in = dims5(s);
  a.z = z;
  a.drop_frame_1 = drop_frame_1;
  a.x = xs->ptr();
  a.y = storage(y)->ptr();
  launch_depth_to_space(a, stream_);
  SEEDVAE_TRY(check_launch(what));
  return y;
}

Status CudaBackend::copy_frames_into(Tensor& dst, int64_t dst_frame, const Tensor& src,
                                     int64_t src_frame, int64_t count) {
  constexpr std::string_view op = "copy_frames_into";
  SEEDVAE_TRY(check_thread(op));
  SEEDVAE_TRY(check_frame_copy(dst.shape, dst_frame, src.shape, src_frame, count));
  SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * ds, activation_of(dst, op, "destination", false, true));
  SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * ss, activation_of(src, op, "source", false, true));
  if (ds->layout != ss->layout || dst.dtype != src.dtype) {
    return invalid_argument("copy_frames_into: source and destination differ in layout or dtype");
  }
  return copy_frames(dst, dst_frame, src, src_frame, count,
                     "copy_frames_into " + str(src.shape) + " -> " + str(dst.shape));
}

// Copies frames [src_begin, src_begin + count) of src into frames starting at dst_begin of dst
// (same N, C, H, W and layout).
Status CudaBackend::copy_frames(const Tensor& dst, int64_t dst_begin, const Tensor& src,
                                int64_t src_begin, int64_t count, const std::string& what) {
  if (count <= 0) return Status::ok();
  CudaStorage* ds = storage(dst);
  CudaStorage* ss = storage(src);
  const Shape& d = dst.shape;
  const Shape& s = src.shape;
  const int64_t es = dtype_size(src.dtype);
  const int64_t hw = s.h() * s.w();
  char* dp = static_cast<char*>(ds->ptr());
  const char* sp = static_cast<const char*>(ss->ptr());
  if (ds->layout == Layout::kNDHWC) {
    const int64_t frame = hw * s.c() * es;
    SEEDVAE_CUDA_TRY(
        cudaMemcpy2DAsync(dp + dst_begin * frame, d.t() * frame, sp + src_begin * frame,
                          s.t() * frame, count * frame, s.n(), cudaMemcpyDeviceToDevice, stream_),
        what);
  } else {
    const int64_t frame = hw * es;
    SEEDVAE_CUDA_TRY(cudaMemcpy2DAsync(dp + dst_begin * frame, d.t() * frame,
                                       sp + src_begin * frame, s.t() * frame, count * frame,
                                       s.n() * s.c(), cudaMemcpyDeviceToDevice, stream_),
                     what);
  }
  return Status::ok();
}

Status CudaBackend::run_group_norm(const void* x, void* y, Layout layout, const Dims5& d,
                                   const float* gamma, const float* beta, int groups, float eps,
                                   bool silu, const std::string& what, const float* in_bias) {
  GroupNormArgs a;
  a.type = elem_of(act_);
  a.layout = layout;
  a.d = d;
  a.groups = groups;
  a.eps = eps;
  a.silu = silu && opt_.fused_gn_silu;
  a.x = x;
  a.y = y;
  a.gamma = gamma;
  a.beta = beta;
  a.in_bias = in_bias;
  a.num_sms = sms_;
  const int64_t wsf = group_norm_workspace_floats(a);
  SEEDVAE_ASSIGN_OR_RETURN(BlockPtr ws, alloc_->allocate(wsf * 4, what + " statistics"));
  a.workspace = static_cast<float*>(ws->ptr);
  launch_group_norm(a, stream_);
  if (silu && !opt_.fused_gn_silu) launch_silu_inplace(a.type, y, d.numel(), stream_);
  return check_launch(what);
}

}  // namespace seedvae::gpu::detail
