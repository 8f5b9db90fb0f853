#include "gpu/allocator.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

#include "gpu/cuda_check.h"

namespace seedvae::gpu {
namespace {

constexpr size_t kSmall = size_t{1} << 20;
constexpr size_t kLargeGranule = size_t{2} << 20;

size_t round_size(size_t bytes) {
  if (bytes <= kSmall) return (bytes + 511) / 512 * 512;
  return (bytes + kLargeGranule - 1) / kLargeGranule * kLargeGranule;
}

}  // namespace

std::string format_bytes(int64_t bytes) {
  char buf[64];
  const double b = static_cast<double>(bytes);
  if (bytes >= (int64_t{1} << 30)) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1 << 30));
  } else if (bytes >= (int64_t{1} << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1 << 20));
  } else if (bytes >= 1024) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024);
  } else {
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  }
  return buf;
}

DeviceBlock::~DeviceBlock() {
  if (owner) {
    owner->give_back(*this);
  } else if (free_after != nullptr) {
    cudaEventDestroy(free_after);
  }
}

DeviceAllocator::FreeList::iterator DeviceAllocator::find_ready(FreeList& list,
                                                                FreeList::iterator it,
                                                                size_t max_capacity) {
  for (auto j = it; j != list.end() && j->first <= max_capacity; ++j) {
    if (j->second.ready == nullptr) return j;
    if (cudaEventQuery(j->second.ready) == cudaSuccess) {
      cudaEventDestroy(j->second.ready);
      j->second.ready = nullptr;
      return j;
    }
    cudaGetLastError();  // cudaErrorNotReady is not an error
  }
  return list.end();
}

void* DeviceAllocator::take_cached(FreeList& list, FreeList::iterator it) {
  Cached c = it->second;
  list.erase(it);
  if (c.ready != nullptr) {
    // Stream-ordered free: the compute stream's later work waits for the other stream's use.
    // Should the wait fail to queue, waiting here on the host keeps the reuse safe.
    if (cudaStreamWaitEvent(stream_, c.ready, 0) != cudaSuccess) {
      cudaGetLastError();
      cudaEventSynchronize(c.ready);
    }
    cudaEventDestroy(c.ready);
    ++stats_.stream_waits;
  }
  return c.ptr;
}

DeviceAllocator::~DeviceAllocator() {
  release_cached();
  release_graph_pool();
}

Result<BlockPtr> DeviceAllocator::allocate(size_t bytes, std::string_view what) {
  auto block = std::make_shared<DeviceBlock>();
  block->bytes = bytes;
  if (bytes == 0) return block;  // no owner: nothing to give back
  // The captures' pool always caches: its memory must outlive the capture for the replays.
  const bool caching = caching_ || in_graph_pool_;
  FreeList& list = in_graph_pool_ ? graph_free_ : free_;
  const size_t cap = caching ? round_size(bytes) : bytes;
  void* ptr = nullptr;
  size_t got = cap;
  // A cached block whose last use on another stream is still running (a state copy to the host)
  // is the last resort: taking it stalls the compute stream until that copy ends, so a new block
  // is tried first (what PyTorch's allocator does with record_stream blocks).
  FreeList::iterator pending = list.end();
  if (caching) {
    auto it = list.lower_bound(cap);
    // Large blocks may serve requests up to 1/4 smaller (e.g. the first chunk's 5+2-frame
    // tensors serve later chunks' 4+2-frame ones), small ones up to half.
    const size_t slack = cap <= kSmall ? cap : cap / 4;
    if (it != list.end() && it->first <= cap + slack) {
      auto ready = find_ready(list, it, cap + slack);
      if (ready != list.end()) {
        got = ready->first;
        ptr = take_cached(list, ready);
        ++stats_.cache_hits;
      } else {
        pending = it;
      }
    }
  }
  // Over the reserve limit (an emulated smaller card) a new block counts as no room.
  auto driver_alloc = [&](void** p) {
    if (reserve_limit_ > 0 && stats_.reserved_bytes + static_cast<int64_t>(cap) > reserve_limit_) {
      return cudaErrorMemoryAllocation;
    }
    return cudaMalloc(p, cap);
  };
  if (ptr == nullptr) {
    cudaError_t err = driver_alloc(&ptr);
    if (err == cudaErrorMemoryAllocation && pending != list.end()) {
      // no room for a new block: reuse the pending one in stream order
      cudaGetLastError();
      got = pending->first;
      ptr = take_cached(list, pending);
      ++stats_.cache_hits;
      err = cudaSuccess;
    } else {
      // (no release-and-retry while capturing: cudaFree is not allowed then)
      if (err == cudaErrorMemoryAllocation && caching_ && !in_graph_pool_ && !free_.empty()) {
        cudaGetLastError();
        release_cached();
        err = driver_alloc(&ptr);
      }
      if (err == cudaErrorMemoryAllocation && caching_ && !in_graph_pool_ && reclaim_ &&
          reclaim_() > 0) {
        cudaGetLastError();
        release_cached();
        err = driver_alloc(&ptr);
      }
      if (err != cudaSuccess) {
        cudaGetLastError();  // an allocation failure is not sticky; clear it
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        const std::string limit =
            reserve_limit_ > 0 ? ", limit " + format_bytes(reserve_limit_) : std::string();
        const std::string msg =
            "out of device memory allocating " + format_bytes(static_cast<int64_t>(cap)) + " for " +
            std::string(what) + " (SeedVAE holds " + format_bytes(stats_.live_bytes) + " live, " +
            format_bytes(stats_.reserved_bytes) + " reserved" + limit + "; device " +
            format_bytes(static_cast<int64_t>(free_b)) + " free of " +
            format_bytes(static_cast<int64_t>(total_b)) +
            "). Try spatial tiles (smaller tile size), exact tiling, a smaller temporal chunk, or "
            "a "
            "lower precision (--precision bf16)";
        if (err == cudaErrorMemoryAllocation) return out_of_memory(msg);
        return cuda_status(err, "cudaMalloc for " + std::string(what));
      }
      ++stats_.driver_allocs;
      if (in_graph_pool_) graph_reserved_ += static_cast<int64_t>(cap);
      stats_.reserved_bytes += static_cast<int64_t>(cap);
      stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
    }
  }
  block->ptr = ptr;
  block->capacity = got;
  block->graph_pool = in_graph_pool_;
  block->owner = shared_from_this();
  stats_.live_bytes += static_cast<int64_t>(bytes);
  if (census_) census_live_[ptr] = {std::string(what), static_cast<int64_t>(bytes)};
  if (stats_.live_bytes > stats_.peak_live_bytes) {
    stats_.peak_live_bytes = stats_.live_bytes;
    if (census_) snapshot_census();
  }
  return block;
}

void DeviceAllocator::give_back(const DeviceBlock& b) {
  void* ptr = b.ptr;
  const size_t capacity = b.capacity;
  CUevent_st* ready = b.free_after;
  stats_.live_bytes -= static_cast<int64_t>(b.bytes);
  if (census_ && ptr != nullptr) census_live_.erase(ptr);
  if (ptr == nullptr) {
    if (ready != nullptr) cudaEventDestroy(ready);
    return;
  }
  if (b.graph_pool) {
    graph_free_.emplace(capacity, Cached{ptr, ready});
    return;
  }
  if (in_graph_pool_) ++eager_frees_in_capture_;
  if (caching_) {
    free_.emplace(capacity, Cached{ptr, ready});
  } else {
    if (ready != nullptr) {  // plain cudaMalloc/cudaFree: the other stream's use must end first
      cudaEventSynchronize(ready);
      cudaEventDestroy(ready);
    }
    cudaFree(ptr);
    stats_.reserved_bytes -= static_cast<int64_t>(capacity);
  }
}

int64_t DeviceAllocator::free_list(FreeList& list) {
  // Work queued on the stream may still use freed blocks' memory only if it was freed while in
  // flight; the backend frees blocks in stream order, and cudaFree itself synchronises the device.
  // Blocks freed in stream order wait for their other stream's use first.
  int64_t freed = 0;
  for (auto& [cap, c] : list) {
    if (c.ready != nullptr) {
      cudaEventSynchronize(c.ready);
      cudaEventDestroy(c.ready);
    }
    cudaFree(c.ptr);
    freed += static_cast<int64_t>(cap);
  }
  list.clear();
  stats_.reserved_bytes -= freed;
  return freed;
}

void DeviceAllocator::release_cached() {
  free_list(free_);
}

void DeviceAllocator::begin_graph_pool() {
  in_graph_pool_ = true;
  eager_frees_in_capture_ = 0;
}

int64_t DeviceAllocator::end_graph_pool() {
  in_graph_pool_ = false;
  return eager_frees_in_capture_;
}

void DeviceAllocator::note_graph_replay() {
  int64_t idle = 0;
  for (const auto& [cap, c] : graph_free_) idle += static_cast<int64_t>(cap);
  stats_.peak_live_bytes = std::max(stats_.peak_live_bytes, stats_.live_bytes + idle);
}

void DeviceAllocator::set_census(bool on) {
  census_ = on;
  census_live_.clear();
  census_peak_.clear();
}

void DeviceAllocator::snapshot_census() {
  census_peak_.clear();
  census_peak_.reserve(census_live_.size());
  for (const auto& [ptr, e] : census_live_) census_peak_.push_back(e);
}

std::vector<DeviceAllocator::CensusEntry> DeviceAllocator::peak_census() const {
  std::map<std::string, CensusEntry> merged;
  for (const auto& [what, bytes] : census_peak_) {
    CensusEntry& e = merged[what];
    e.what = what;
    ++e.count;
    e.bytes += bytes;
  }
  std::vector<CensusEntry> out;
  for (auto& [k, e] : merged) out.push_back(std::move(e));
  std::sort(out.begin(), out.end(),
            [](const CensusEntry& a, const CensusEntry& b) { return a.bytes > b.bytes; });
  return out;
}

void DeviceAllocator::release_graph_pool() {
  graph_reserved_ -= free_list(graph_free_);
}

}  // namespace seedvae::gpu
