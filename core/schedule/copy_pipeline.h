// "Async tiles": one step of look-ahead between the device and the host for the schedulers
// (streaming.cpp, tiled.cpp). A step is one chunk (untiled) or one tile of a chunk (blend
// tiling): upload, compute, download. With async on, step i+1's upload, compute and download
// are queued before step i is finished -- its copy waited for, its output blended, the hooks
// and progress called -- so the host's work and the transfers overlap the device's compute
// (Backend::download_frames_async). With async off every step is finished before the next is
// queued, through the synchronous Backend::download_frames(). Both give bit-identical output:
// only the time at which the host does its part moves.
//
// Costs with async on: the device holds one more step's output until the host has taken it, and
// progress, on_chunk and on_tile arrive one step later. A telemetry sink that wants summaries
// (VaeModel::end_summary) synchronises each step, which removes most of the overlap.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "core/backend/backend.h"

namespace seedvae {

class CopyPipeline {
 public:
  using Finish = std::function<Status()>;

  CopyPipeline(Backend& backend, bool async) : backend_(backend), async_(async) {}
  // An unfinished step is dropped: its copies are discarded (PendingCopy's destructor), its
  // finish never runs.
  ~CopyPipeline() = default;
  CopyPipeline(const CopyPipeline&) = delete;
  CopyPipeline& operator=(const CopyPipeline&) = delete;

  bool async() const { return async_; }
  // Queues a copy of t into frames [frame_offset, +T) of dst for the step being built. dst's
  // bytes must stay alive until that step is finished (moving the HostTensor is fine).
  Status download(const Tensor& t, HostTensor& dst, int64_t frame_offset);
  // Closes the step being built; `finish` runs once its copies have landed. Async: first
  // finishes the previous step (so it runs while this one computes). Sync: finishes this one.
  Status end_step(Finish finish);
  // Finishes the step still pending; call before reading anything a step writes.
  Status drain();

 private:
  struct Step {
    std::vector<std::unique_ptr<PendingCopy>> copies;
    Finish finish;
  };
  static Status complete(Step& step);

  Backend& backend_;
  bool async_;
  std::vector<std::unique_ptr<PendingCopy>> building_;
  std::optional<Step> pending_;
};

}  // namespace seedvae
