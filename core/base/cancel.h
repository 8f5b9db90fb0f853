// Cancellation shared between the thread that asks (GUI, signal handler) and the thread that works.
// Plain C++ (no Qt): the engine polls it between temporal chunks and spatial tiles. The asking side
// calls request() directly, never through a queued signal (a queued cancel arrives after the job).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "core/base/status.h"

namespace seedvae {

class CancelToken {
 public:
  // Async-signal-safe (a lock-free atomic and the monotonic clock).
  void request() noexcept {
    int64_t none = 0;
    requested_at_.compare_exchange_strong(none, now_ns(), std::memory_order_relaxed);
    flag_.store(true, std::memory_order_relaxed);
  }
  void reset() noexcept {
    flag_.store(false, std::memory_order_relaxed);
    requested_at_.store(0, std::memory_order_relaxed);
  }
  bool requested() const noexcept { return flag_.load(std::memory_order_relaxed); }
  // Seconds since the first request(), -1 when none: how long the work took to stop.
  double seconds_since_request() const noexcept {
    const int64_t at = requested_at_.load(std::memory_order_relaxed);
    return at == 0 ? -1.0 : static_cast<double>(now_ns() - at) / 1e9;
  }

  // OK, or a kCancelled status to return from the current job.
  Status check() const { return requested() ? cancelled() : Status::ok(); }

 private:
  static int64_t now_ns() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  std::atomic<bool> flag_{false};
  std::atomic<int64_t> requested_at_{0};  // steady-clock ns of the first request, 0: none
};

}  // namespace seedvae
