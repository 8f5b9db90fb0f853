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

}  // namespace seedvae
