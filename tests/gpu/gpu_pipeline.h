// Engines of jobs over several CUDA devices for the GPU tests (core/schedule/device_workers.h):
// engine i on devices[i], every one with the same options; optionally one whose convolutions fail
// after a number of calls (a card failing mid-job). No Qt.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "core/schedule/pipeline_decode.h"
#include "gpu/cuda_backend.h"
#include "tests/support/failing_backend.h"

namespace seedvae::test {

inline DeviceEngineFactory cuda_stages(gpu::CudaOptions options, const VaeWeights& weights,
                                       std::vector<int> devices, int fail_share = -1,
                                       int fail_after = 0) {
  return [=, &weights](int share) -> Result<DeviceEngine> {
    gpu::CudaOptions o = options;
    o.device = devices[static_cast<size_t>(share)];
    DeviceEngine stage;
    SEEDVAE_ASSIGN_OR_RETURN(stage.backend, gpu::create_cuda_backend(o));
    if (share == fail_share) {
      stage.backend = std::make_unique<FailingBackend>(std::move(stage.backend), fail_after);
    }
    SEEDVAE_ASSIGN_OR_RETURN(stage.model, make_video_vae(*stage.backend, weights));
    return stage;
  };
}

}  // namespace seedvae::test
