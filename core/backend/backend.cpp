#include "core/backend/backend.h"

#include <cstring>

namespace seedvae {

Result<Tensor> Backend::import_tensor(Backend& from, const Tensor& src) {
  SEEDVAE_ASSIGN_OR_RETURN(HostTensor host, from.download(src));
  return upload(host);
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

Status Backend::begin_capture() {
  return unsupported(name() + " does not record graphs");
}

Result<int64_t> Backend::end_capture(bool keep) {
  (void)keep;
  return unsupported(name() + " does not record graphs");
}

Status Backend::launch_graph(int64_t id) {
  (void)id;
  return unsupported(name() + " does not record graphs");
}

Status Backend::wan_op_unsupported(std::string_view op) const {
  return unsupported(name() + " has no " + std::string(op) +
                     " op (the Wan VAEs run on the CPU backend)");
}

Result<Tensor> Backend::zeros(const Shape& shape) {
  (void)shape;
  return wan_op_unsupported("zeros");
}
Result<Tensor> Backend::rms_norm(const Tensor& x, const Tensor& gamma, const RmsNormParams& p) {
  (void)x, (void)gamma, (void)p;
  return wan_op_unsupported("rms_norm");
}
Result<Tensor> Backend::upsample_nearest(const Tensor& x) {
  (void)x;
  return wan_op_unsupported("upsample_nearest");
}
Result<Tensor> Backend::frames_from_channels(const Tensor& x, int factor) {
  (void)x, (void)factor;
  return wan_op_unsupported("frames_from_channels");
}
Result<Tensor> Backend::patchify(const Tensor& x, int p) {
  (void)x, (void)p;
  return wan_op_unsupported("patchify");
}
Result<Tensor> Backend::unpatchify(const Tensor& x, int p) {
  (void)x, (void)p;
  return wan_op_unsupported("unpatchify");
}
Result<Tensor> Backend::avg_down(const Tensor& x, const AvgDownParams& p) {
  (void)x, (void)p;
  return wan_op_unsupported("avg_down");
}
Result<Tensor> Backend::dup_up(const Tensor& x, const DupUpParams& p) {
  (void)x, (void)p;
  return wan_op_unsupported("dup_up");
}
Result<Tensor> Backend::rms_attention(const Tensor& x, const RmsAttentionWeights& w) {
  (void)x, (void)w;
  return wan_op_unsupported("rms_attention");
}

}  // namespace seedvae
