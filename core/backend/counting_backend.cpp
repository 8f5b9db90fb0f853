#include "core/backend/counting_backend.h"

namespace seedvae {
namespace {

// Shape-only storage; its lifetime is what the byte counters track.
class CountedStorage final : public Storage {
 public:
  CountedStorage(int64_t bytes, std::shared_ptr<int64_t> current, std::shared_ptr<int64_t> peak)
      : bytes_(bytes), current_(std::move(current)), peak_(std::move(peak)) {
    *current_ += bytes_;
    *peak_ = std::max(*peak_, *current_);
  }
  ~CountedStorage() override { *current_ -= bytes_; }

 private:
  int64_t bytes_;
  std::shared_ptr<int64_t> current_, peak_;
};

Status check5(const Tensor& x, const char* op) {
  if (x.shape.rank() != 5) {
    return invalid_argument(std::string(op) + ": expected a 5-D tensor, got " + x.shape.to_string());
  }
  return Status::ok();
}

}  // namespace

Tensor CountingBackend::make(Shape shape, bool weight) {
  const int64_t bytes = shape.numel() * dtype_size(dtype_);
  Tensor t;
  t.shape = std::move(shape);
  t.dtype = dtype_;
  if (weight) {
    weight_bytes_ += bytes;
    t.storage = std::make_shared<Storage>();
  } else {
    t.storage = std::make_shared<CountedStorage>(bytes, current_, peak_);
  }
  return t;
}

Result<Tensor> CountingBackend::upload(const HostTensor& host) { return make(host.shape()); }

Result<Tensor> CountingBackend::upload_weight(const HostTensor& host, std::string_view) {
  return make(host.shape(), true);
}

Result<HostTensor> CountingBackend::download(const Tensor& t) {
  return HostTensor(DType::kF32, t.shape);
}

Result<Tensor> CountingBackend::conv3d(const Tensor& x, const Tensor& w, const Tensor&,
                                       const Conv3dParams& p) {
  SEEDVAE_TRY(check5(x, "conv3d"));
  const Shape& k = w.shape;
  if (k.rank() != 5 || k[1] != x.shape[1]) {
    return invalid_argument("conv3d: weight " + k.to_string() + " does not fit input " +
                            x.shape.to_string());
  }
  const int64_t to = (x.shape[2] - k[2]) / p.stride_t + 1;
  const int64_t ho = (x.shape[3] + p.pad_top + p.pad_bottom - k[3]) / p.stride_h + 1;
  const int64_t wo = (x.shape[4] + p.pad_left + p.pad_right - k[4]) / p.stride_w + 1;
  if (to < 1 || ho < 1 || wo < 1) {
    return invalid_argument("conv3d: input " + x.shape.to_string() + " too small for kernel " +
                            k.to_string());
  }
  flops_ += 2.0 * static_cast<double>(k.numel()) * static_cast<double>(x.shape[0] * to * ho * wo);
  return make({x.shape[0], k[0], to, ho, wo});
}

Result<Tensor> CountingBackend::causal_pad(const Tensor& x, const Tensor* memory, int frames) {
  SEEDVAE_TRY(check5(x, "causal_pad"));
  Shape s = x.shape;
  s[2] += memory ? memory->shape[2] : frames;
  return make(s);
}

Result<Tensor> CountingBackend::slice_frames(const Tensor& x, int64_t begin, int64_t end) {
  SEEDVAE_TRY(check5(x, "slice_frames"));
  if (begin < 0 || end > x.shape[2] || begin >= end) {
    return invalid_argument("slice_frames: bad range");
  }
  Shape s = x.shape;
  s[2] = end - begin;
  return make(s);
}

Result<Tensor> CountingBackend::concat_frames(const Tensor& a, const Tensor& b) {
  Shape s = a.shape;
  s[2] += b.shape[2];
  return make(s);
}

Status CountingBackend::copy_frames_into(Tensor& dst, int64_t dst_frame, const Tensor& src,
                                         int64_t src_frame, int64_t count) {
  return check_frame_copy(dst.shape, dst_frame, src.shape, src_frame, count);
}

Result<Tensor> CountingBackend::group_norm(const Tensor& x, const Tensor&, const Tensor&,
                                           const GroupNormParams&) {
  SEEDVAE_TRY(check5(x, "group_norm"));
  return make(x.shape);
}

Status CountingBackend::add_inplace(Tensor& acc, const Tensor& x) {
  if (acc.shape != x.shape) return invalid_argument("add_inplace: shape mismatch");
  return Status::ok();
}

Result<Tensor> CountingBackend::depth_to_space(const Tensor& x, int z, bool drop_frame_1, int) {
  SEEDVAE_TRY(check5(x, "depth_to_space"));
  SEEDVAE_ASSIGN_OR_RETURN(const Shape s, depth_to_space_shape(x.shape, z, drop_frame_1));
  return make(s);
}

Result<Tensor> CountingBackend::attention(const Tensor& x, const AttentionWeights&) {
  SEEDVAE_TRY(check5(x, "attention"));
  const double c = static_cast<double>(x.shape[1]);
  const double n = static_cast<double>(x.shape[3] * x.shape[4]);
  const double frames = static_cast<double>(x.shape[0] * x.shape[2]);
  // 4 projections (N x C x C) + QK^T and AV (N x N x C each), 2 FLOPs per MAC.
  flops_ += frames * 2.0 * (4.0 * n * c * c + 2.0 * n * n * c);
  return make(x.shape);
}

MemoryStats CountingBackend::memory_stats() const {
  MemoryStats m;
  m.current_bytes = *current_;
  m.peak_bytes = *peak_;
  return m;
}

void CountingBackend::reset_peak() { *peak_ = *current_; }

}  // namespace seedvae
