#include "core/base/host_blocks.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <unordered_map>

namespace seedvae {
namespace {

// 2 MiB: whole huge pages where the system backs memory with them unasked (no madvise: asking
// made every fault wait for the kernel to compact memory, 3x slower here)
constexpr size_t kAlign = size_t{2} << 20;
// Free blocks the cache keeps at most: a 4K chunk's few buffers.
constexpr size_t kMaxIdleBytes = size_t{2} << 30;

struct Idle {
  void* p;
  uint64_t generation;  // the trim period in which it was given back
};

struct Cache {
  std::mutex mutex;
  std::multimap<size_t, Idle> idle;         // by block size
  std::unordered_map<void*, size_t> taken;  // blocks out, with their size
  size_t idle_bytes = 0;
  uint64_t generation = 0;
  int64_t reused = 0, allocated = 0;
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: blocks may come back during static teardown
  return *c;
}

size_t rounded(size_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

void* system_block(size_t size) {
  return ::operator new (size, std::align_val_t{kAlign});
}

void free_block(void* p) {
  ::operator delete (p, std::align_val_t{kAlign});
}

}  // namespace

bool host_block_cache_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("SEEDVAE_HOST_BLOCK_CACHE");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

void* acquire_host_block(size_t bytes) {
  const size_t need = rounded(bytes);
  Cache& c = cache();
  if (host_block_cache_enabled()) {
    std::lock_guard lock(c.mutex);
    // the smallest free block that fits, if it is not much larger (a quarter at most)
    auto it = c.idle.lower_bound(need);
    if (it != c.idle.end() && it->first <= need + need / 4) {
      void* p = it->second.p;
      c.idle_bytes -= it->first;
      c.taken.emplace(p, it->first);
      c.idle.erase(it);
      ++c.reused;
      return p;
    }
  }
  void* p = system_block(need);
  std::lock_guard lock(c.mutex);
  try {
    c.taken.emplace(p, need);
  } catch (...) {
    free_block(p);
    throw;
  }
  ++c.allocated;
  return p;
}

void release_host_block(void* p) noexcept {
  if (p == nullptr) return;
  Cache& c = cache();
  std::unique_lock lock(c.mutex);
  auto it = c.taken.find(p);
  if (it == c.taken.end()) {  // not one of ours (cannot happen through HostTensor)
    lock.unlock();
    free_block(p);
    return;
  }
  const size_t size = it->second;
  c.taken.erase(it);
  if (host_block_cache_enabled() && c.idle_bytes + size <= kMaxIdleBytes) {
    try {
      c.idle.emplace(size, Idle{p, c.generation});
      c.idle_bytes += size;
      return;
    } catch (...) {  // no room for the entry: the block goes back to the system
    }
  }
  lock.unlock();
  free_block(p);
}

void trim_host_blocks(bool all) {
  Cache& c = cache();
  std::multimap<size_t, Idle> stale;
  {
    std::lock_guard lock(c.mutex);
    for (auto it = c.idle.begin(); it != c.idle.end();) {
      if (all || it->second.generation < c.generation) {
        c.idle_bytes -= it->first;
        stale.insert(c.idle.extract(it++));
      } else {
        ++it;
      }
    }
    ++c.generation;
  }
  for (auto& [size, block] : stale) free_block(block.p);  // outside the lock
}

HostBlockStats host_block_stats() {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  return {static_cast<int64_t>(c.idle_bytes), c.reused, c.allocated};
}

}  // namespace seedvae
