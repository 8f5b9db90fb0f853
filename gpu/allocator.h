// Device memory for the CUDA backend: a caching allocator (default) or plain cudaMalloc/cudaFree
// (the ablation toggle), with live/peak/reserved statistics.
//
// Caching: freed blocks go to a size-ordered free list and are handed out again to requests of the
// same size class (sizes are rounded up to 512 B below 1 MiB and to 2 MiB above; a cached block is
// reused for a request when the request is at most 1/4 smaller). Everything runs on the one stream
// of the owning thread, so a block freed here may be reused by the next launch without events. A
// block whose last use is on another stream (an offloaded causal-state slice still being copied to
// the host) is freed in stream order instead: it carries that use's event
// (`DeviceBlock::free_after`). A request takes such a block only when no other cached block fits
// and the driver has no room for a new one; the compute stream then waits for the event — what
// PyTorch's record_stream gives, without holding the memory until the host sees the copy finish.
// When cudaMalloc fails, every cached block is returned to the driver and the allocation retried
// once; if it still fails the caller gets an out-of-memory Status naming what was being allocated.
//
// Statistics: `live` counts the bytes of blocks currently handed out (what the tensors use, like
// torch.cuda.memory_allocated), `reserved` what the allocator holds from the driver (live + cache).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/base/status.h"

// cudaStream_t and cudaEvent_t, without the CUDA headers in this one.
struct CUstream_st;
struct CUevent_st;

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
  // An event recorded after this block's last use on a stream other than the compute stream; the
  // block goes back to the allocator with it (stream-ordered free). Owned: destroyed by the
  // allocator.
  CUevent_st* free_after = nullptr;
  bool graph_pool = false;  // from the pool of CUDA-graph captures (see DeviceAllocator)

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
  int64_t stream_waits = 0;  // reuses of a block whose other-stream use had not finished yet
};

class DeviceAllocator : public std::enable_shared_from_this<DeviceAllocator> {
 public:
  // `stream`: the compute stream; a reused block's pending `free_after` event is waited for there.
  DeviceAllocator(bool caching, CUstream_st* stream) : caching_(caching), stream_(stream) {}
  ~DeviceAllocator();
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  // `what` names the allocation in an out-of-memory message ("conv3d output [1, 128, 4, ...]").
  Result<BlockPtr> allocate(size_t bytes, std::string_view what);
  // Returns every cached (unused) block of the eager pool to the driver.
  void release_cached();

  // CUDA graphs: between begin_graph_pool() and end_graph_pool() (a stream capture) requests are
  // served from a second pool that only captures use, so the addresses a graph records are never
  // handed to a tensor outside a capture and replays overwrite nothing else. Blocks of that pool
  // go back to it when freed (also after the capture) and stay reserved until
  // release_graph_pool(), called once no graph exists. end_graph_pool() returns how many eager
  // blocks were freed during the capture: a graph that released such memory would write it again
  // on every replay, so the backend discards it.
  void begin_graph_pool();
  int64_t end_graph_pool();
  void release_graph_pool();
  int64_t graph_pool_bytes() const { return graph_reserved_; }
  // A replay uses every block of the captures' pool: counts the idle ones as live for the peak.
  void note_graph_replay();
  bool caching() const { return caching_; }
  // The most bytes this allocator reserves from the driver (0: no limit), to run as if the card
  // were that small: a request beyond it reuses a pending cached block, returns the cache to the
  // driver and retries, and only then fails with out of memory.
  void set_reserve_limit(int64_t bytes) { reserve_limit_ = bytes; }
  // Called when a request still finds no room after the cache went back to the driver: the owner
  // drops what it can rebuild (the CUDA backend: causal state prefetched ahead of use, whose host
  // copy stays valid) and returns the bytes it released; if any, the request is tried once more.
  void set_reclaim(std::function<int64_t()> reclaim) { reclaim_ = std::move(reclaim); }

  AllocatorStats stats() const { return stats_; }
  void reset_peak() {
    stats_.peak_live_bytes = stats_.live_bytes;
    stats_.peak_reserved_bytes = stats_.reserved_bytes;
    if (census_) snapshot_census();
  }

  // Memory census (a diagnostic, off by default): while on, every live block is remembered with
  // the name it was allocated under, and the list is copied whenever the live bytes reach a new
  // peak, so peak_census() tells what was live at the peak since the last reset_peak(): entries
  // of the same name are merged, largest total first.
  struct CensusEntry {
    std::string what;
    int64_t count = 0;
    int64_t bytes = 0;
  };
  void set_census(bool on);
  std::vector<CensusEntry> peak_census() const;

 private:
  friend struct DeviceBlock;
  struct Cached {
    void* ptr = nullptr;
    CUevent_st* ready = nullptr;  // pending other-stream use (null: free now)
  };
  using FreeList = std::multimap<size_t, Cached>;  // capacity -> block
  void give_back(const DeviceBlock& block);
  // The first block from `it` on (capacity <= max_capacity) that no other stream still uses, or
  // list.end().
  FreeList::iterator find_ready(FreeList& list, FreeList::iterator it, size_t max_capacity);
  // Takes the cached block at `it` of `list`, making the compute stream wait for a pending event.
  void* take_cached(FreeList& list, FreeList::iterator it);
  // Returns every block of `list` to the driver; the bytes released.
  int64_t free_list(FreeList& list);

  bool caching_;
  CUstream_st* stream_;
  FreeList free_;
  FreeList graph_free_;  // the captures' pool
  bool in_graph_pool_ = false;
  int64_t eager_frees_in_capture_ = 0;
  int64_t graph_reserved_ = 0;
  AllocatorStats stats_;
  void snapshot_census();
  int64_t reserve_limit_ = 0;
  std::function<int64_t()> reclaim_;
  bool census_ = false;
  std::unordered_map<const void*, std::pair<std::string, int64_t>> census_live_;
  std::vector<std::pair<std::string, int64_t>> census_peak_;
};

// "1.50 GiB", "12.0 MiB", "512 B".
std::string format_bytes(int64_t bytes);

}  // namespace seedvae::gpu
