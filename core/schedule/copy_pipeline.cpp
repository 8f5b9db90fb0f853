#include "core/schedule/copy_pipeline.h"

namespace seedvae {

Status CopyPipeline::download(const Tensor& t, HostTensor& dst, int64_t frame_offset) {
  if (!async_) return backend_.download_frames(t, dst, frame_offset);
  SEEDVAE_ASSIGN_OR_RETURN(std::unique_ptr<PendingCopy> copy,
                           backend_.download_frames_async(t, dst, frame_offset));
  building_.push_back(std::move(copy));
  return Status::ok();
}

Status CopyPipeline::complete(Step& step) {
  for (auto& copy : step.copies) SEEDVAE_TRY(copy->wait());
  step.copies.clear();
  return step.finish ? step.finish() : Status::ok();
}

Status CopyPipeline::end_step(Finish finish) {
  Step step{std::move(building_), std::move(finish)};
  building_.clear();
  if (!async_) return complete(step);
  SEEDVAE_TRY(drain());
  pending_.emplace(std::move(step));
  return Status::ok();
}

Status CopyPipeline::drain() {
  if (!pending_) return Status::ok();
  Step step = std::move(*pending_);
  pending_.reset();
  return complete(step);
}

}  // namespace seedvae
