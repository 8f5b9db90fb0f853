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
// thread's CPU time in the gap. Run-queue wait is excused whoever caused it, the application's
// own worker threads included: the CPU backend's "auto" thread count leaves one hardware thread
// free for the GUI for that reason (ui/backend_catalog.cpp).
//
// A shared host can also make the GUI thread's own code run slower for a while, with no steal
// reported. Here the compare view's repaint took 0.35 ms of CPU with the engine idle, 3-8 ms in
// a noisy stretch of a run and once 68 ms; whole runs of tst_studio_stall went from no gap over
// 20 ms to gaps of 120 ms of the GUI thread's CPU, at random. So the probe also times a fixed
// piece of work (a 512 KiB fill and an integer loop, the kind of work a repaint does) every
// 100 ms. A gap's slowdown is the median gauge within 1 s of it over the median gauge of the
// whole run (at least 1), and own / slowdown is what the gap costs at the run's usual speed: the
// figure a test asserts on. A noisy stretch is excused; a run that is slow throughout is not, and
// neither is a long handler of the application, which leaves the gauges around it at their usual
// speed (a 120 ms busy loop in a handler still fails tst_studio_stall).
//
// Only Linux exposes the scheduler's counters; elsewhere only the slowdown is excused. No library
// offers this attribution, hence this helper.
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
  double at = 0;         // s: when it began, since the probe started
  double wall = 0;       // between the two ticks
  double cpu = 0;        // the GUI thread on a CPU
  double run_queue = 0;  // runnable, waiting for a core
  double steal = 0;      // the thread's virtual CPU(s) taken by the hypervisor
  double slowdown = 1;   // the gauge around the gap over its median in the run (>= 1)
  // Steal is counted per virtual CPU at 10 ms resolution and may fall while another thread held
  // that CPU, so the thread's own CPU time bounds "own" from below.
  double own() const { return std::max(cpu, wall - run_queue - steal); }
  double at_usual_speed() const { return own() / slowdown; }
  QString describe() const {
    return QString(
               "%1 ms at %6 s (GUI thread on CPU %2 ms, waiting for a core %3 ms, stolen by the "
               "hypervisor %4 ms: the application's own %5 ms)")
               .arg(wall, 0, 'f', 1)
               .arg(cpu, 0, 'f', 1)
               .arg(run_queue, 0, 'f', 1)
               .arg(steal, 0, 'f', 1)
               .arg(own(), 0, 'f', 1)
               .arg(at, 0, 'f', 2) +
           (slowdown > 1.05 ? QString("; the GUI thread ran %1x slower than usual in the run: %2 "
                                      "ms at its usual speed")
                                  .arg(slowdown, 0, 'f', 1)
                                  .arg(at_usual_speed(), 0, 'f', 1)
                            : QString());
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
    const Point p = sample();
    if (last_.wall >= 0) {
      Pending e{{}, last_, p};
      e.gap.at = static_cast<double>(last_.wall) / 1e9;
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
    if (p.wall - last_gauge_ >= 100'000'000) {
      last_gauge_ = p.wall;
      gauges_.push_back({p.wall, run_gauge()});
      last_ = sample();  // the gauge is not part of the next gap
    }
  }

  // The time until the next tick is not a gap (the test itself keeps the GUI thread busy).
  void pause() {
    last_.wall = -1;
  }

  // After the last tick: waits for the monitor's next sample, then decomposes the rest.
  void finish() {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    settle(INT64_MAX);
    const double usual = gauge(0.5) * 1e6;
    for (Gap& g : long_) {
      const auto from = static_cast<int64_t>(g.at * 1e9) - 1'000'000'000;
      const auto to = static_cast<int64_t>(g.at * 1e9 + g.wall * 1e6) + 1'000'000'000;
      std::vector<int64_t> near;
      for (const auto& [when, ns] : gauges_) {
        if (when >= from && when <= to) near.push_back(ns);
      }
      if (near.empty() || usual <= 0) continue;
      std::nth_element(near.begin(), near.begin() + near.size() / 2, near.end());
      g.slowdown = std::max(1.0, static_cast<double>(near[near.size() / 2]) / usual);
    }
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
  // The gap that costs most at the run's usual speed (after finish()).
  Gap longestOwn() const {
    Gap best;
    for (const Gap& g : long_) {
      if (g.at_usual_speed() > best.at_usual_speed()) best = g;
    }
    return best;
  }
  // The gauge's CPU time, ms, at quantile q of the run (0: the fastest); 0 before the first.
  double gauge(double q) const {
    if (gauges_.empty()) return 0.0;
    std::vector<int64_t> ns;
    for (const auto& [when, t] : gauges_) ns.push_back(t);
    const auto k = static_cast<size_t>(q * static_cast<double>(ns.size() - 1));
    std::nth_element(ns.begin(), ns.begin() + k, ns.end());
    return static_cast<double>(ns[k]) / 1e6;
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

  Point sample() const {
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
    return p;
  }

  static int64_t thread_cpu_ns() {
#if defined(CLOCK_THREAD_CPUTIME_ID)
    timespec ts{};
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0)
      return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
#endif
    return 0;
  }

  // The fixed piece of work, on the GUI thread: its CPU time in ns (about 0.1 ms on a quiet core).
  int64_t run_gauge() {
    const int64_t start = thread_cpu_ns();
    gauge_buffer_.assign(512 * 1024, static_cast<unsigned char>(gauges_.size()));
    uint64_t x = 0x9e3779b97f4a7c15ull + gauges_.size();
    for (int i = 0; i < 50'000; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
    }
    gauge_sink_ = gauge_sink_ + x + gauge_buffer_[x % gauge_buffer_.size()];
    return thread_cpu_ns() - start;
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
  int64_t last_gauge_ = INT64_MIN / 2;
  std::vector<std::pair<int64_t, int64_t>> gauges_;  // (when, CPU ns of the gauge)
  std::vector<unsigned char> gauge_buffer_;
  volatile uint64_t gauge_sink_ = 0;  // keeps the gauge's loop
};

}  // namespace seedvae::ui::test
