// Device memory for the CUDA backend: a caching allocator (default) or plain cudaMalloc/cudaFree
// (the ablation toggle), with live/peak/reserved statistics.
//
// Caching: freed blocks go to a size-ordered free list and are handed out again to requests of the
// same size class (sizes are rounded up to 512 B below 1 MiB and to 2 MiB above; a cached block is
// reused for a request when the request is at most 1/4 smaller). Everything runs on the one stream of the
// owning thread, so a block freed here may be reused by the next launch without events. When
// cudaMalloc fails, every cached block is returned to the driver and the allocation retried once;
// if it still fails the caller gets an out-of-memory Status naming what was being allocated.
//
// Statistics: `live` counts the bytes of blocks currently handed out (what the tensors use, like
// torch.cuda.memory_allocated), `reserved` what the allocator holds from the driver (live + cache).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "core/base/status.h"

namespace seedvae::gpu {

class DeviceAllocator;

// One device allocation; returned to its allocator when the last owner drops it.
struct DeviceBlock {
  void* ptr = nullptr;
  size_t bytes = 0;     // requested
  size_t capacity = 0;  // actually reserved (>= bytes)
  std::shared_ptr<DeviceAllocator> owner;
  // The backend's in-place causal padding writes the frames before a tensor's data into spare room
  // at the start of its block; set once that room is taken so it is never written twice.
  bool headroom_claimed = false;

  DeviceBlock() = default;
  DeviceBlock(const DeviceBlock&) = delete;
  DeviceBlock& operator=(const DeviceBlock&) = delete;
  ~DeviceBlock();
};
using BlockPtr = std::shared_ptr<DeviceBlock>;

struct AllocatorStats {
  int64_t live_bytes = 0;
  int64_t peak_live_bytes = 0;
  int64_t reserved_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  int64_t driver_allocs = 0;  // cudaMalloc calls
  int64_t cache_hits = 0;
};

class DeviceAllocator : public std::enable_shared_from_this<DeviceAllocator> {
 public:
  explicit DeviceAllocator(bool caching) : caching_(caching) {}
  ~DeviceAllocator();
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  // `what` names the allocation in an out-of-memory message ("conv3d output [1, 128, 4, ...]").
  Result<BlockPtr> allocate(size_t bytes, std::string_view what);
  // Returns every cached (unused) block to the driver.
  void release_cached();
  bool caching() const { return caching_; }

  AllocatorStats stats() const { return stats_; }
  void reset_peak() {
    stats_.peak_live_bytes = stats_.live_bytes;
    stats_.peak_reserved_bytes = stats_.reserved_bytes;
  }

 private:
  friend struct DeviceBlock;
  void give_back(void* ptr, size_t capacity, size_t bytes);

  bool caching_;
  std::multimap<size_t, void*> free_;  // capacity -> pointer
  AllocatorStats stats_;
};

// "1.50 GiB", "12.0 MiB", "512 B".
std::string format_bytes(int64_t bytes);

}  // namespace seedvae::gpu
