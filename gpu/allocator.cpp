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
  if (owner) owner->give_back(ptr, capacity, bytes);
}

DeviceAllocator::~DeviceAllocator() { release_cached(); }

Result<BlockPtr> DeviceAllocator::allocate(size_t bytes, std::string_view what) {
  auto block = std::make_shared<DeviceBlock>();
  block->bytes = bytes;
  if (bytes == 0) return block;  // no owner: nothing to give back
  const size_t cap = caching_ ? round_size(bytes) : bytes;
  void* ptr = nullptr;
  size_t got = cap;
  if (caching_) {
    auto it = free_.lower_bound(cap);
    // Large blocks may serve requests up to 1/4 smaller (e.g. the first chunk's 5+2-frame
    // tensors serve later chunks' 4+2-frame ones), small ones up to half.
    const size_t slack = cap <= kSmall ? cap : cap / 4;
    if (it != free_.end() && it->first <= cap + slack) {
      ptr = it->second;
      got = it->first;
      free_.erase(it);
      ++stats_.cache_hits;
    }
  }
  if (ptr == nullptr) {
    cudaError_t err = cudaMalloc(&ptr, cap);
    if (err == cudaErrorMemoryAllocation && caching_ && !free_.empty()) {
      cudaGetLastError();
      release_cached();
      err = cudaMalloc(&ptr, cap);
    }
    if (err != cudaSuccess) {
      cudaGetLastError();  // an allocation failure is not sticky; clear it
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      const std::string msg =
          "out of device memory allocating " + format_bytes(static_cast<int64_t>(cap)) + " for " +
          std::string(what) + " (SeedVAE holds " + format_bytes(stats_.live_bytes) + " live, " +
          format_bytes(stats_.reserved_bytes) + " reserved; device " +
          format_bytes(static_cast<int64_t>(free_b)) + " free of " +
          format_bytes(static_cast<int64_t>(total_b)) +
          "). Try spatial tiles (smaller tile size), exact tiling, a smaller temporal chunk, or a "
          "lower precision (--precision bf16)";
      if (err == cudaErrorMemoryAllocation) return out_of_memory(msg);
      return cuda_status(err, "cudaMalloc for " + std::string(what));
    }
    ++stats_.driver_allocs;
    stats_.reserved_bytes += static_cast<int64_t>(cap);
    stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  }
  block->ptr = ptr;
  block->capacity = got;
  block->owner = shared_from_this();
  stats_.live_bytes += static_cast<int64_t>(bytes);
  stats_.peak_live_bytes = std::max(stats_.peak_live_bytes, stats_.live_bytes);
  return block;
}

void DeviceAllocator::give_back(void* ptr, size_t capacity, size_t bytes) {
  stats_.live_bytes -= static_cast<int64_t>(bytes);
  if (ptr == nullptr) return;
  if (caching_) {
    free_.emplace(capacity, ptr);
  } else {
    cudaFree(ptr);
    stats_.reserved_bytes -= static_cast<int64_t>(capacity);
  }
}

void DeviceAllocator::release_cached() {
  if (free_.empty()) return;
  // Work queued on the stream may still use freed blocks' memory only if it was freed while in
  // flight; the backend frees blocks in stream order, and cudaFree itself synchronises the device.
  for (auto& [cap, p] : free_) {
    cudaFree(p);
    stats_.reserved_bytes -= static_cast<int64_t>(cap);
  }
  free_.clear();
}

}  // namespace seedvae::gpu
