#include "core/backend/backend.h"

#include <cstring>

namespace seedvae {

Status check_download_frames(const Shape& src, const HostTensor& dst, int64_t frame_offset) {
  const Shape& d = dst.shape();
  if (src.rank() != 5 || d.rank() != 5 || dst.dtype() != DType::kF32 || src[0] != d[0] ||
      src[1] != d[1] || src[3] != d[3] || src[4] != d[4] || frame_offset < 0 ||
      frame_offset + src[2] > d[2]) {
    return invalid_argument("download_frames: cannot place " + src.to_string() + " at frame " +
                            std::to_string(frame_offset) + " of an fp32 " + d.to_string() +
                            " host tensor");
  }
  return Status::ok();
}

Result<Shape> depth_to_space_shape(const Shape& s, int z, bool drop_frame_1) {
  if (z != 1 && z != 2) {
    return invalid_argument("depth_to_space: temporal factor must be 1 or 2, got " +
                            std::to_string(z));
  }
  if (drop_frame_1 && z != 2) {
    return invalid_argument("depth_to_space: drop_frame_1 needs temporal factor 2");
  }
  if (s.c() < 1 || s.c() % (4 * z) != 0) {
    return invalid_argument("depth_to_space: " + std::to_string(s.c()) + " channels of " +
                            s.to_string() + " are not a positive multiple of " +
                            std::to_string(4 * z));
  }
  if (drop_frame_1 && s.t() < 1) {
    return invalid_argument("depth_to_space: cannot drop frame 1 of an empty input " +
                            s.to_string());
  }
  return Shape{s.n(), s.c() / (4 * z), s.t() * z - (drop_frame_1 ? 1 : 0), 2 * s.h(), 2 * s.w()};
}

Status Backend::download_frames(const Tensor& t, HostTensor& dst, int64_t frame_offset) {
  SEEDVAE_TRY(check_download_frames(t.shape, dst, frame_offset));
  SEEDVAE_ASSIGN_OR_RETURN(HostTensor part, download(t));
  const Shape& s = t.shape;
  const int64_t plane = s[3] * s[4] * static_cast<int64_t>(sizeof(float));
  const int64_t td = dst.shape()[2];
  const auto* src = static_cast<const std::byte*>(part.raw());
  auto* out = static_cast<std::byte*>(dst.raw());
  for (int64_t nc = 0; nc < s[0] * s[1]; ++nc) {
    std::memcpy(out + (nc * td + frame_offset) * plane, src + nc * s[2] * plane,
                static_cast<size_t>(s[2] * plane));
  }
  return Status::ok();
}

namespace {

// The default "asynchronous" copy: already done when it is returned.
class FinishedCopy final : public PendingCopy {
 public:
  Status wait() override { return Status::ok(); }
};

}  // namespace

Result<std::unique_ptr<PendingCopy>> Backend::download_frames_async(const Tensor& t,
                                                                    HostTensor& dst,
                                                                    int64_t frame_offset) {
  SEEDVAE_TRY(download_frames(t, dst, frame_offset));
  return std::unique_ptr<PendingCopy>(std::make_unique<FinishedCopy>());
}

Status Backend::copy_frames_into(Tensor& dst, int64_t dst_frame, const Tensor& src,
                                 int64_t src_frame, int64_t count) {
  (void)dst, (void)dst_frame, (void)src, (void)src_frame, (void)count;
  return unsupported(name() + " cannot copy frames in place");
}

Status Backend::group_norm_inplace(Tensor& x, const Tensor& gamma, const Tensor& beta,
                                   const GroupNormParams& p) {
  SEEDVAE_ASSIGN_OR_RETURN(Tensor y, group_norm(x, gamma, beta, p));
  x = std::move(y);
  return Status::ok();
}

Status Backend::begin_capture() { return unsupported(name() + " does not record graphs"); }

Result<int64_t> Backend::end_capture(bool keep) {
  (void)keep;
  return unsupported(name() + " does not record graphs");
}

Status Backend::launch_graph(int64_t id) {
  (void)id;
  return unsupported(name() + " does not record graphs");
}

Status check_frame_copy(const Shape& dst, int64_t dst_frame, const Shape& src, int64_t src_frame,
                        int64_t count) {
  const bool same_rest = dst.rank() == 5 && src.rank() == 5 && dst[0] == src[0] &&
                         dst[1] == src[1] && dst[3] == src[3] && dst[4] == src[4];
  if (!same_rest || count < 0 || dst_frame < 0 || src_frame < 0 || dst_frame + count > dst[2] ||
      src_frame + count > src[2]) {
    return invalid_argument("copy_frames_into: frames [" + std::to_string(src_frame) + ", +" +
                            std::to_string(count) + ") of " + src.to_string() + " do not fit at " +
                            std::to_string(dst_frame) + " of " + dst.to_string());
  }
  return Status::ok();
}

}  // namespace seedvae
