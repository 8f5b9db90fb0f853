// Cancellation shared between the thread that asks (GUI, signal handler) and the thread that works.
// Plain C++ (no Qt): the engine polls it between temporal chunks and spatial tiles. The asking side
// calls request() directly, never through a queued signal (a queued cancel arrives after the job).
#pragma once

#include <atomic>

#include "core/base/status.h"

namespace seedvae {

class CancelToken {
 public:
  void request() noexcept { flag_.store(true, std::memory_order_relaxed); }
  void reset() noexcept { flag_.store(false, std::memory_order_relaxed); }
  bool requested() const noexcept { return flag_.load(std::memory_order_relaxed); }

  // OK, or a kCancelled status to return from the current job.
  Status check() const { return requested() ? cancelled() : Status::ok(); }

 private:
  std::atomic<bool> flag_{false};
};

}  // namespace seedvae
