// Large host blocks (16 MiB and more: a streamed chunk's frames, a download, a trimmed chunk)
// recycled within the process instead of being handed back to the system on every free.
//
// Why by hand: glibc serves blocks this large with mmap and returns them with munmap on free, so
// every chunk of a stream faults its buffers in afresh (a 1080p chunk is 100 MB, 25,000 pages
// the kernel zeroes) and every free shoots the pages out of every core's TLB. In a virtual
// machine each of those is an exit to the host. The C library's tunables only raise its mmap
// threshold to 32 MiB or turn mmap off for the whole process, the Windows heap keeps no such
// blocks either, and a stream allocates the same few sizes chunk after chunk, so a small cache
// of free blocks by size serves it.
//
// Bounded: at most kMaxIdleBytes wait in the cache, and trim_host_blocks() (called with
// release_free_host_memory, every few chunks) frees those that waited a whole period unused,
// so a stream's resident set stays flat and an idle process gives its memory back.
#pragma once

#include <cstddef>
#include <cstdint>

namespace seedvae {

inline constexpr size_t kLargeHostBlock = size_t{16} << 20;

// A block of at least `bytes` (>= kLargeHostBlock), 2 MiB aligned; its contents are
// unspecified. Throws std::bad_alloc like operator new.
void* acquire_host_block(size_t bytes);
// Gives back a block from acquire_host_block (the cache knows its size); it waits in the cache.
void release_host_block(void* p) noexcept;
// Frees the cached blocks that were not taken again since the previous call (all of them:
// every cached block, at the end of a job).
void trim_host_blocks(bool all = false);

struct HostBlockStats {
  int64_t idle_bytes = 0;  // free blocks waiting in the cache
  int64_t reused = 0;      // acquisitions served from the cache
  int64_t allocated = 0;   // acquisitions served by the system
};
HostBlockStats host_block_stats();
// Off (every block straight from and back to the system, as before) when the environment
// variable SEEDVAE_HOST_BLOCK_CACHE is 0, to measure what the cache does; read once.
bool host_block_cache_enabled();

}  // namespace seedvae
