// Threading of the CPU backend. Debian's oneDNN 2.6 is built with the OpenMP runtime (libgomp), so
// the backend's own loops use OpenMP too: one thread pool for convolutions, GEMMs and elementwise
// work, no oversubscription. Each backend op runs inside a ThreadScope that sets the calling
// thread's OpenMP team size (which oneDNN reads through omp_get_max_threads()) to the backend's
// thread count and restores the previous value on exit. Internal to core/cpu.
#pragma once

#if defined(_OPENMP)
#include <omp.h>
#endif

#include <algorithm>
#include <cstdint>
#include <thread>

namespace seedvae::cpu {

// OpenMP queries, with serial fallbacks for a build without OpenMP.
#if defined(_OPENMP)
inline int omp_max_threads() {
  return omp_get_max_threads();
}
inline void omp_set_threads(int n) {
  omp_set_num_threads(n);
}
inline int processor_count() {
  return omp_get_num_procs();
}
#else
inline int omp_max_threads() {
  return 1;
}
inline void omp_set_threads(int) {}
inline int processor_count() {
  return static_cast<int>(std::thread::hardware_concurrency());
}
#endif

class ThreadScope {
 public:
  explicit ThreadScope(int threads) : previous_(omp_max_threads()), threads_(threads) {
    if (threads_ != previous_) omp_set_threads(threads_);
  }
  ~ThreadScope() {
    if (threads_ != previous_) omp_set_threads(previous_);
  }
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

 private:
  int previous_;
  int threads_;
};

// Runs f(i) for i in [0, n) on up to `threads` OpenMP threads (static schedule); serial when the
// work is tiny. `grain` is the smallest number of iterations worth a thread.
template <typename F>
void parallel_for(int64_t n, int threads, F&& f, int64_t grain = 1) {
  if (n <= 0) return;
  const int64_t useful = std::max<int64_t>(1, n / std::max<int64_t>(1, grain));
  const int team = static_cast<int>(std::min<int64_t>(threads, useful));
  if (team <= 1) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
#pragma omp parallel for num_threads(team) schedule(static)
  for (int64_t i = 0; i < n; ++i) f(i);
}

}  // namespace seedvae::cpu
