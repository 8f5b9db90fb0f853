// The probe of tst_studio_stall: how long the GUI thread's event loop goes between two ticks of a
// 1 ms timer, and how much of each gap the application itself is responsible for.
//
// A gap between ticks is the time the event loop could not answer the user. On a shared machine
// (CI runs in virtual machines) part of a gap can be outside the process's control:
//   - run-queue wait: the thread was runnable but another thread had the core
//     (/proc/thread-self/schedstat, second field, in ns);
//   - steal: the hypervisor ran another guest on the thread's virtual CPU (/proc/stat, the eighth
//     value of the cpuN line, in USER_HZ ticks), sampled every 2 ms by a monitor thread.
// What remains ("own") is time the GUI thread spent running the application's code or blocked in
// it (locks, I/O, page faults): the stall the application causes, never less than the GUI
// thread's CPU time in the gap. Run-queue wait is excused whoever caused it, the application's own
// worker threads included: the CPU backend's "auto" thread count leaves one hardware thread free
// for the GUI for that reason (ui/backend_catalog.cpp). Only Linux exposes these counters;
// elsewhere nothing is excused and "own" is the whole gap. No library offers this attribution,
// hence this helper.
#pragma once

#include <QString>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#endif

namespace seedvae::ui::test {

// One gap between ticks, decomposed (all in ms).
struct Gap {
  double wall = 0;       // between the two ticks
  double cpu = 0;        // the GUI thread on a CPU
  double run_queue = 0;  // runnable, waiting for a core
  double steal = 0;      // the thread's virtual CPU(s) taken by the hypervisor
  // Steal is counted per virtual CPU at 10 ms resolution and may fall while another thread held
  // that CPU, so the thread's own CPU time bounds "own" from below.
  double own() const { return std::max(cpu, wall - run_queue - steal); }
  QString describe() const {
    return QString(
               "%1 ms (GUI thread on CPU %2 ms, waiting for a core %3 ms, stolen by the "
               "hypervisor %4 ms: the application's own %5 ms)")
        .arg(wall, 0, 'f', 1)
        .arg(cpu, 0, 'f', 1)
        .arg(run_queue, 0, 'f', 1)
        .arg(steal, 0, 'f', 1)
        .arg(own(), 0, 'f', 1);
  }
};

using Clock = std::chrono::steady_clock;

inline int64_t ns_since(Clock::time_point epoch) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - epoch).count();
}

// Samples per-CPU steal time on its own thread; answers "how much steal on CPU c between two
// moments" (ns since `epoch`).
class StealMonitor {
 public:
  explicit StealMonitor(Clock::time_point epoch) : epoch_(epoch) {
#if defined(__linux__)
    const long hz = sysconf(_SC_CLK_TCK);
    ms_per_tick_ = hz > 0 ? 1000.0 / static_cast<double>(hz) : 10.0;
    fd_ = ::open("/proc/stat", O_RDONLY | O_CLOEXEC);
    if (fd_ >= 0) thread_ = std::thread([this] { loop(); });
#endif
  }
  ~StealMonitor() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
#if defined(__linux__)
    if (fd_ >= 0) ::close(fd_);
#endif
  }
  StealMonitor(const StealMonitor&) = delete;
  StealMonitor& operator=(const StealMonitor&) = delete;

  bool available() const {
    return fd_ >= 0;
  }

  // Steal in ms on `cpu` between t0 and t1 (ns since the epoch): the counter's last sample at or
  // before t0 against its first sample at or after t1 (or the latest one).
  double steal_ms(int cpu, int64_t t0, int64_t t1) const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (samples_.empty() || cpu < 0) return 0;
    const Sample* before = &samples_.front();
    const Sample* after = &samples_.back();
    for (const Sample& s : samples_) {
      if (s.at <= t0) before = &s;
      if (s.at >= t1) {
        after = &s;
        break;
      }
    }
    const auto c = static_cast<size_t>(cpu);
    if (c >= before->steal.size() || c >= after->steal.size()) return 0;
    return static_cast<double>(after->steal[c] - before->steal[c]) * ms_per_tick_;
  }

 private:
  struct Sample {
    int64_t at = 0;
    std::vector<int64_t> steal;  // USER_HZ ticks per CPU
  };

#if defined(__linux__)
  void loop() {
    std::vector<char> buf(1 << 16);
    while (!stop_) {
      const ssize_t n = ::pread(fd_, buf.data(), buf.size() - 1, 0);
      if (n > 0) {
        buf[static_cast<size_t>(n)] = '\0';
        Sample s;
        s.at = ns_since(epoch_);
        // Lines "cpuN user nice system idle iowait irq softirq steal ...", after the "cpu " total.
        for (const char* line = buf.data(); line && *line; line = std::strchr(line, '\n')) {
          if (*line == '\n') ++line;
          if (std::strncmp(line, "cpu", 3) != 0 || line[3] < '0' || line[3] > '9') continue;
          char* p = nullptr;
          const long index = std::strtol(line + 3, &p, 10);
          int64_t v[8] = {};
          for (int64_t& x : v) x = std::strtoll(p, &p, 10);
          if (index >= 0 && index < 4096) {
            if (s.steal.size() <= static_cast<size_t>(index))
              s.steal.resize(static_cast<size_t>(index) + 1);
            s.steal[static_cast<size_t>(index)] = v[7];
          }
        }
        std::lock_guard<std::mutex> lock(mutex_);
        samples_.push_back(std::move(s));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
#endif

  const Clock::time_point epoch_;
  double ms_per_tick_ = 10.0;
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;
  std::vector<Sample> samples_;
  std::thread thread_;
};

// Called on every tick, on the GUI thread: decomposes every gap of 20 ms or more.
class StallProbe {
 public:
  StallProbe() : epoch_(Clock::now()), steal_(epoch_) {
#if defined(__linux__)
    schedstat_fd_ = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
#endif
  }
  ~StallProbe() {
#if defined(__linux__)
    if (schedstat_fd_ >= 0) ::close(schedstat_fd_);
#endif
  }
  StallProbe(const StallProbe&) = delete;
  StallProbe& operator=(const StallProbe&) = delete;

  // True when run-queue wait and steal are measured (Linux); otherwise "own" is the whole gap.
  bool attributes() const {
    return schedstat_fd_ >= 0 && steal_.available();
  }

  void tick() {
    Point p;
    p.wall = ns_since(epoch_);
    p.cpu = thread_cpu_ns();
#if defined(__linux__)
    p.cpu_index = sched_getcpu();
    if (schedstat_fd_ >= 0) {
      char buf[128];
      const ssize_t n = ::pread(schedstat_fd_, buf, sizeof buf - 1, 0);
      if (n > 0) {
        buf[n] = '\0';
        char* q = nullptr;
        std::strtoull(buf, &q, 10);  // time on a CPU; the thread clock serves for that
        p.run_delay = static_cast<int64_t>(std::strtoull(q, nullptr, 10));
      }
    }
#endif
    if (last_.wall >= 0) {
      Pending e{{}, last_, p};
      e.gap.wall = static_cast<double>(p.wall - last_.wall) / 1e6;
      e.gap.cpu = static_cast<double>(p.cpu - last_.cpu) / 1e6;
      e.gap.run_queue = static_cast<double>(p.run_delay - last_.run_delay) / 1e6;
      max_wall_ = std::max(max_wall_, e.gap.wall);
      // Steal is looked up later, once the monitor has sampled past the gap.
      if (e.gap.wall >= 20.0) pending_.push_back(e);
    }
    last_ = p;
    ++ticks_;
    if (!pending_.empty()) settle(p.wall - 10'000'000);
  }

  // The time until the next tick is not a gap (the test itself keeps the GUI thread busy).
  void pause() {
    last_.wall = -1;
  }

  // After the last tick: waits for the monitor's next sample, then decomposes the rest.
  void finish() {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    settle(INT64_MAX);
  }

  int64_t ticks() const {
    return ticks_;
  }
  double seconds() const {
    return static_cast<double>(ns_since(epoch_)) / 1e9;
  }
  double longestWall() const {
    return max_wall_;
  }
  // The gaps of 20 ms or more, decomposed, longest first (after finish()).
  std::vector<Gap> longGaps() const {
    std::vector<Gap> v = long_;
    std::sort(v.begin(), v.end(), [](const Gap& a, const Gap& b) { return a.wall > b.wall; });
    return v;
  }
  Gap longestOwn() const {
    Gap best;
    for (const Gap& g : long_) {
      if (g.own() > best.own()) best = g;
    }
    return best;
  }

 private:
  struct Point {
    int64_t wall = -1;
    int64_t cpu = 0;
    int64_t run_delay = 0;
    int cpu_index = -1;
  };
  struct Pending {
    Gap gap;
    Point from, to;
  };

  static int64_t thread_cpu_ns() {
#if defined(CLOCK_THREAD_CPUTIME_ID)
    timespec ts{};
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0)
      return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
#endif
    return 0;
  }

  // Decomposes the pending gaps that ended before `until`.
  void settle(int64_t until) {
    std::vector<Pending> keep;
    for (const Pending& e : pending_) {
      if (e.to.wall > until) {
        keep.push_back(e);
        continue;
      }
      Gap g = e.gap;
      g.steal = steal_.steal_ms(e.from.cpu_index, e.from.wall, e.to.wall);
      if (e.to.cpu_index != e.from.cpu_index)
        g.steal += steal_.steal_ms(e.to.cpu_index, e.from.wall, e.to.wall);
      g.steal = std::min(g.steal, std::max(0.0, g.wall - g.run_queue));
      long_.push_back(g);
    }
    pending_.swap(keep);
  }

  const Clock::time_point epoch_;
  StealMonitor steal_;
  int schedstat_fd_ = -1;
  Point last_;
  int64_t ticks_ = 0;
  double max_wall_ = 0;
  std::vector<Pending> pending_;
  std::vector<Gap> long_;
};

}  // namespace seedvae::ui::test
