// A Backend that forwards every op to another one: the base of backends that change a few ops
// and pass the rest through (the FP8 numerics wrapper, test probes). Graph capture is not
// forwarded (a wrapper that changes an op could not be recorded faithfully), so
// graphs_enabled() keeps the interface's default, false.
#pragma once

#include <memory>
#include <string>

#include "core/backend/backend.h"

namespace seedvae {

class ForwardingBackend : public Backend {
 public:
  // `inner` must outlive this backend.
  explicit ForwardingBackend(Backend& inner) : inner_(inner) {}

  std::string name() const override { return inner_.name(); }
  DType activation_dtype() const override { return inner_.activation_dtype(); }
  Result<Tensor> upload(const HostTensor& host) override { return inner_.upload(host); }
  Result<Tensor> upload_weight(const HostTensor& host, std::string_view name) override {
    return inner_.upload_weight(host, name);
  }
  Result<HostTensor> download(const Tensor& t) override { return inner_.download(t); }
  Status download_frames(const Tensor& t, HostTensor& dst, int64_t frame_offset) override {
    return inner_.download_frames(t, dst, frame_offset);
  }
  Result<std::unique_ptr<PendingCopy>> download_frames_async(const Tensor& t, HostTensor& dst,
                                                             int64_t frame_offset) override {
    return inner_.download_frames_async(t, dst, frame_offset);
  }
  Status save_tuning() override { return inner_.save_tuning(); }
  // The source's innermost backend, so the inner backend sees its own kind (CUDA: peer copies).
  Result<Tensor> import_tensor(Backend& from, const Tensor& src) override {
    Backend* f = &from;
    while (auto* w = dynamic_cast<ForwardingBackend*>(f)) f = &w->inner_;
    return inner_.import_tensor(*f, src);
  }
  Result<Tensor> conv3d(const Tensor& x, const Tensor& w, const Tensor& b,
                        const Conv3dParams& p) override {
    return inner_.conv3d(x, w, b, p);
  }
  Result<Tensor> causal_pad(const Tensor& x, const Tensor* memory, int frames) override {
    return inner_.causal_pad(x, memory, frames);
  }
  Result<Tensor> slice_frames(const Tensor& x, int64_t begin, int64_t end) override {
    return inner_.slice_frames(x, begin, end);
  }
  Status copy_frames_into(Tensor& dst, int64_t dst_frame, const Tensor& src, int64_t src_frame,
                          int64_t count) override {
    return inner_.copy_frames_into(dst, dst_frame, src, src_frame, count);
  }
  Result<Tensor> concat_frames(const Tensor& a, const Tensor& b) override {
    return inner_.concat_frames(a, b);
  }
  Result<Tensor> group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const GroupNormParams& p) override {
    return inner_.group_norm(x, gamma, beta, p);
  }
  Status group_norm_inplace(Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const GroupNormParams& p) override {
    return inner_.group_norm_inplace(x, gamma, beta, p);
  }
  Status add_inplace(Tensor& acc, const Tensor& x) override { return inner_.add_inplace(acc, x); }
  Result<Tensor> depth_to_space(const Tensor& x, int temporal_factor, bool drop_frame_1,
                                int context_frames = 2) override {
    return inner_.depth_to_space(x, temporal_factor, drop_frame_1, context_frames);
  }
  Result<Tensor> attention(const Tensor& x, const AttentionWeights& w) override {
    return inner_.attention(x, w);
  }
  Result<Tensor> zeros(const Shape& shape) override { return inner_.zeros(shape); }
  Result<Tensor> rms_norm(const Tensor& x, const Tensor& gamma, const RmsNormParams& p) override {
    return inner_.rms_norm(x, gamma, p);
  }
  Result<Tensor> upsample_nearest(const Tensor& x) override { return inner_.upsample_nearest(x); }
  Result<Tensor> frames_from_channels(const Tensor& x, int factor) override {
    return inner_.frames_from_channels(x, factor);
  }
  Result<Tensor> patchify(const Tensor& x, int p) override { return inner_.patchify(x, p); }
  Result<Tensor> unpatchify(const Tensor& x, int p) override { return inner_.unpatchify(x, p); }
  Result<Tensor> avg_down(const Tensor& x, const AvgDownParams& p) override {
    return inner_.avg_down(x, p);
  }
  Result<Tensor> dup_up(const Tensor& x, const DupUpParams& p) override {
    return inner_.dup_up(x, p);
  }
  Result<Tensor> rms_attention(const Tensor& x, const RmsAttentionWeights& w) override {
    return inner_.rms_attention(x, w);
  }
  Status offload_hint(const Tensor& t) override { return inner_.offload_hint(t); }
  Status synchronize() override { return inner_.synchronize(); }
  MemoryStats memory_stats() const override { return inner_.memory_stats(); }
  void reset_peak() override { inner_.reset_peak(); }
  std::function<int64_t()> device_memory_probe() const override {
    return inner_.device_memory_probe();
  }
  void release_cached_memory() override { inner_.release_cached_memory(); }
  double device_busy_ms() const override { return inner_.device_busy_ms(); }
  int64_t begin_device_span() override { return inner_.begin_device_span(); }
  bool close_device_span(int64_t span) override { return inner_.close_device_span(span); }
  double read_device_span(int64_t span, bool wait) override {
    return inner_.read_device_span(span, wait);
  }

 protected:
  Backend& inner_;
};

}  // namespace seedvae
