// The process's own memory: its resident set's peak, and a reset of that peak (Linux: VmHWM in
// /proc/self/status, reset through /proc/self/clear_refs; elsewhere getrusage / the Win32
// process counters, which cannot be reset). Host peaks of a run are measured with it.
#pragma once

#include <cstdint>

namespace seedvae {

// Peak resident bytes of this process since it started or since the last successful
// reset_peak_rss(); -1 where unknown.
int64_t peak_rss_bytes();
// Starts a new peak from the current resident set; false where the platform cannot.
bool reset_peak_rss();
// Returns the free pages of the heap to the operating system (glibc: malloc_trim). A stream
// frees a chunk's buffers while smaller long-lived blocks (the latent's chunks) sit above them
// in the heap, which glibc alone does not give back: without this, a long clip's peak resident
// set creeps up although the live bytes stay flat. Also frees the large blocks the process
// keeps for reuse (host_blocks.h) that were not reused since the previous call, or all of them
// (`all`, at the end of a job). Called every few chunks.
void release_free_host_memory(bool all = false);

}  // namespace seedvae
