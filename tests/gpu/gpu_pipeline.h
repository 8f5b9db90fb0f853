// Engines of a pipelined decode on CUDA devices for the GPU tests
// (core/schedule/pipeline_decode.h): share i on devices[i], every share with the same options;
// optionally one share whose convolutions fail after a number of calls (a card failing mid-job). No
// Qt.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "core/backend/forwarding_backend.h"
#include "core/schedule/pipeline_decode.h"
#include "gpu/cuda_backend.h"

namespace seedvae::test {

class FailingBackend final : public ForwardingBackend {
 public:
  FailingBackend(std::unique_ptr<Backend> inner, int fail_after)
      : ForwardingBackend(*inner), owned_(std::move(inner)), left_(fail_after) {}
  Result<Tensor> conv3d(const Tensor& x, const Tensor& w, const Tensor& b,
                        const Conv3dParams& p) override {
    if (left_-- <= 0) return internal_error("injected device failure");
    return ForwardingBackend::conv3d(x, w, b, p);
  }

 private:
  std::unique_ptr<Backend> owned_;
  int left_;
};

inline PipelineStageFactory cuda_stages(gpu::CudaOptions options, const VaeWeights& weights,
                                        std::vector<int> devices, int fail_share = -1,
                                        int fail_after = 0) {
  return [=, &weights](int share) -> Result<PipelineStage> {
    gpu::CudaOptions o = options;
    o.device = devices[static_cast<size_t>(share)];
    PipelineStage stage;
    SEEDVAE_ASSIGN_OR_RETURN(stage.backend, gpu::create_cuda_backend(o));
    if (share == fail_share) {
      stage.backend = std::make_unique<FailingBackend>(std::move(stage.backend), fail_after);
    }
    SEEDVAE_ASSIGN_OR_RETURN(stage.model, make_video_vae(*stage.backend, weights));
    return stage;
  };
}

}  // namespace seedvae::test
