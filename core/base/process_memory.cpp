#include "core/base/process_memory.h"

#include "core/base/host_blocks.h"

#if defined(_WIN32)
#include "core/base/windows_lean.h"
// windows_lean.h first: psapi.h needs the Windows types.
#include <psapi.h>
#else
#include <sys/resource.h>

#include <fstream>
#include <string>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#endif

namespace seedvae {

#if defined(_WIN32)

int64_t peak_rss_bytes() {
  PROCESS_MEMORY_COUNTERS c{};
  if (!GetProcessMemoryInfo(GetCurrentProcess(), &c, sizeof c)) return -1;
  return static_cast<int64_t>(c.PeakWorkingSetSize);
}

bool reset_peak_rss() {
  return false;
}

void release_free_host_memory(bool all) {
  trim_host_blocks(all);
}

#else

int64_t peak_rss_bytes() {
#if defined(__linux__)
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // kB
  }
#endif
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return -1;
#if defined(__APPLE__)
  return static_cast<int64_t>(u.ru_maxrss);  // bytes on macOS
#else
  return static_cast<int64_t>(u.ru_maxrss) * 1024;  // KiB
#endif
}

bool reset_peak_rss() {
#if defined(__linux__)
  std::ofstream out("/proc/self/clear_refs");
  out << "5";  // "reset the peak resident set size" (proc(5))
  out.flush();
  return static_cast<bool>(out);
#else
  return false;
#endif
}

void release_free_host_memory(bool all) {
  trim_host_blocks(all);
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

#endif

}  // namespace seedvae
