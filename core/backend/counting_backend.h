// A Backend that computes nothing: it infers output shapes, counts floating-point operations and
// tracks the bytes a real backend would hold (allocation on creation, release when the last Tensor
// dies). Running the model through it gives the exact FLOP count of vae_spec.md §7 per stage and a
// dry-run activation-memory profile for the planner, in milliseconds and without weights' values.
#pragma once

#include <string>

#include "core/backend/backend.h"

namespace seedvae {

class CountingBackend final : public Backend {
 public:
  explicit CountingBackend(DType activation_dtype = DType::kF32) : dtype_(activation_dtype) {}

  std::string name() const override { return "counting (dry run)"; }
  DType activation_dtype() const override { return dtype_; }

  Result<Tensor> upload(const HostTensor& host) override;
  Result<Tensor> upload_weight(const HostTensor& host, std::string_view name) override;
  Result<HostTensor> download(const Tensor& t) override;  // zeros of the right shape

  Result<Tensor> conv3d(const Tensor& x, const Tensor& w, const Tensor& b,
                        const Conv3dParams& p) override;
  Result<Tensor> causal_pad(const Tensor& x, const Tensor* memory, int frames) override;
  Result<Tensor> slice_frames(const Tensor& x, int64_t begin, int64_t end) override;
  Result<Tensor> concat_frames(const Tensor& a, const Tensor& b) override;
  Status copy_frames_into(Tensor& dst, int64_t dst_frame, const Tensor& src, int64_t src_frame,
                          int64_t count) override;
  Result<Tensor> group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const GroupNormParams& p) override;
  Status add_inplace(Tensor& acc, const Tensor& x) override;
  Result<Tensor> depth_to_space(const Tensor& x, int temporal_factor, bool drop_frame_1,
                                int context_frames = 2) override;
  Result<Tensor> attention(const Tensor& x, const AttentionWeights& w) override;

  MemoryStats memory_stats() const override;
  void reset_peak() override;

  // Multiply-add FLOPs (2 per MAC) of convolutions, projections and attention matmuls since the
  // last reset_flops().
  double flops() const { return flops_; }
  void reset_flops() { flops_ = 0; }
  // Weights are counted separately from activations.
  int64_t weight_bytes() const { return weight_bytes_; }

 private:
  Tensor make(Shape shape, bool weight = false);

  DType dtype_;
  double flops_ = 0;
  int64_t weight_bytes_ = 0;
  std::shared_ptr<int64_t> current_ = std::make_shared<int64_t>(0);
  std::shared_ptr<int64_t> peak_ = std::make_shared<int64_t>(0);
};

}  // namespace seedvae
