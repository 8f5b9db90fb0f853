// Where a process's CPU time went, thread by thread: a monitor thread reads /proc/self/task/*
// every 250 ms and keeps, for every thread seen (exited ones too), its name, CPU time, time spent
// runnable but waiting for a core (schedstat) and the CPUs it may run on. report() lists the
// threads by CPU time with the process's page faults and the OpenMP environment: a test on a
// remote machine prints it to show whether slow work was starved, confined to few cores or
// merely busy. Linux only; elsewhere report() says so. No library reads these counters per
// thread, hence this helper.
#pragma once

#include <QString>
#include <QStringList>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>

#if defined(__linux__)
#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#endif

namespace seedvae::ui::test {

class ThreadCpuLog {
 public:
  ThreadCpuLog() {
#if defined(__linux__)
    thread_ = std::thread([this] {
      while (!stop_) {
        poll();
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
      }
    });
#endif
  }
  ~ThreadCpuLog() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  ThreadCpuLog(const ThreadCpuLog&) = delete;
  ThreadCpuLog& operator=(const ThreadCpuLog&) = delete;

  // The `top` busiest threads, one line each, then the process's totals.
  QStringList report(int top = 14) {
    QStringList out;
#if defined(__linux__)
    poll();
    std::vector<std::pair<int, Thread>> v;
    {
      std::lock_guard<std::mutex> lock(mu_);
      v.assign(threads_.begin(), threads_.end());
    }
    std::sort(v.begin(), v.end(),
              [](const auto& a, const auto& b) { return a.second.cpu_s > b.second.cpu_s; });
    double cpu = 0, wait = 0;
    for (const auto& [tid, t] : v) {
      cpu += t.cpu_s;
      wait += t.wait_s;
    }
    cpu_set_t set;
    const int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;
    out << QStringLiteral(
               "threads seen: %1, CPU %2 s, waiting for a core %3 s%4; %5 CPUs allowed, "
               "%6 online")
               .arg(v.size())
               .arg(cpu, 0, 'f', 1)
               .arg(wait, 0, 'f', 1)
               .arg(schedstat_ ? QString() : QStringLiteral(" (no schedstat)"))
               .arg(cpus)
               .arg(sysconf(_SC_NPROCESSORS_ONLN));
    for (size_t i = 0; i < v.size() && static_cast<int>(i) < top; ++i) {
      const Thread& t = v[i].second;
      out << QStringLiteral("  %1 %2: CPU %3 s, waiting %4 s, CPUs %5")
                 .arg(v[i].first)
                 .arg(QString::fromStdString(t.name), -16)
                 .arg(t.cpu_s, 0, 'f', 2)
                 .arg(t.wait_s, 0, 'f', 2)
                 .arg(QString::fromStdString(t.cpus));
    }
    const std::vector<std::string> stat = fields(read_file("/proc/self/stat"));
    if (stat.size() > 9) {  // minflt and majflt: proc(5) fields 10 and 12
      out << QStringLiteral("page faults: %1 minor, %2 major")
                 .arg(QString::fromStdString(stat[7]), QString::fromStdString(stat[9]));
    }
    QStringList env;
    for (const char* k : {"OMP_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES", "OMP_WAIT_POLICY",
                          "GOMP_CPU_AFFINITY", "GOMP_SPINCOUNT", "KMP_AFFINITY"}) {
      if (const char* e = std::getenv(k)) env << QStringLiteral("%1=%2").arg(k, e);
    }
    out << (env.isEmpty() ? QStringLiteral("OpenMP environment: none set")
                          : QStringLiteral("OpenMP environment: ") + env.join(' '));
#else
    out << QStringLiteral("per-thread CPU times: Linux only");
#endif
    return out;
  }

 private:
  struct Thread {
    std::string name, cpus;
    double cpu_s = 0, wait_s = 0;
  };

#if defined(__linux__)
  static std::string read_file(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  // The fields of a /proc stat line after the command name (which may hold spaces), numbered
  // as in proc(5) less 3: fields()[0] is the state.
  static std::vector<std::string> fields(const std::string& line) {
    std::vector<std::string> f;
    const size_t close = line.rfind(')');
    if (close == std::string::npos) return f;
    std::istringstream in(line.substr(close + 1));
    for (std::string s; in >> s;) f.push_back(s);
    return f;
  }

  void poll() {
    DIR* d = opendir("/proc/self/task");
    if (d == nullptr) return;
    const double tick = 1.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
    std::map<int, Thread> seen;
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      const std::string dir = std::string("/proc/self/task/") + e->d_name;
      Thread t;
      t.name = read_file(dir + "/comm");
      while (!t.name.empty() && t.name.back() == '\n') t.name.pop_back();
      const std::vector<std::string> f = fields(read_file(dir + "/stat"));
      // utime and stime: proc(5) fields 14 and 15
      if (f.size() > 12) t.cpu_s = (std::stod(f[11]) + std::stod(f[12])) * tick;
      std::istringstream sched(read_file(dir + "/schedstat"));
      double on_cpu_ns = 0, wait_ns = 0;
      if (sched >> on_cpu_ns >> wait_ns) {
        t.wait_s = wait_ns * 1e-9;
        schedstat_ = true;
      }
      std::istringstream status(read_file(dir + "/status"));
      for (std::string line; std::getline(status, line);) {
        if (line.rfind("Cpus_allowed_list:", 0) == 0) {
          t.cpus = line.substr(line.find_first_not_of(" \t", 18));
        }
      }
      seen[std::atoi(e->d_name)] = std::move(t);
    }
    closedir(d);
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [tid, t] : seen) threads_[tid] = std::move(t);
  }
#endif

  std::mutex mu_;
  std::map<int, Thread> threads_;
  std::atomic<bool> schedstat_{false};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace seedvae::ui::test
