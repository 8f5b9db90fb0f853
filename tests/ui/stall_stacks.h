// Where a GUI stall happens: with SEEDVAE_STALL_STACKS=<ms> set, a watchdog thread notices when
// the GUI thread's probe timer has not ticked for that long and prints the GUI thread's call
// stack to stderr (a signal to that thread, glibc's backtrace()), up to 4 times 20 ms apart per
// gap; while the GUI thread waits in the kernel, the other threads running or waiting
// uninterruptibly are listed with it, and print their stacks too. The handlers the studio traces
// itself (SEEDVAE_STUDIO_TRACE) do not cover painting or Qt's own work; this finds any stall.
// Linux/glibc only; elsewhere, and unset, it does nothing. Symbols of the test's own code need the
// executable's symbols exported (ENABLE_EXPORTS). No library samples one thread's stack on demand,
// hence this helper.
#pragma once

#include <QtGlobal>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#if defined(__linux__) && defined(__GLIBC__)
#include <dirent.h>
#include <execinfo.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#define SEEDVAE_STALL_STACKS 1
#endif

namespace seedvae::ui::test {

class StallStacks {
 public:
  // Constructed on the GUI thread.
  StallStacks() {
#ifdef SEEDVAE_STALL_STACKS
    threshold_ms_ = qEnvironmentVariableIntValue("SEEDVAE_STALL_STACKS");
    if (threshold_ms_ <= 0) return;
    gui_ = pthread_self();
    const std::string task = "/proc/self/task/" + std::to_string(gettid());
    syscall_fd_ = ::open((task + "/syscall").c_str(), O_RDONLY | O_CLOEXEC);
    wchan_fd_ = ::open((task + "/wchan").c_str(), O_RDONLY | O_CLOEXEC);
    void* warm[4];
    backtrace(warm, 4);  // loads the unwinder now, not inside the signal handler
    struct sigaction sa {};
    sa.sa_handler = &StallStacks::dump;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR2, &sa, nullptr);
    tick();
    thread_ = std::thread([this] { watch(); });
#endif
  }
  ~StallStacks() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
#ifdef SEEDVAE_STALL_STACKS
    if (syscall_fd_ >= 0) ::close(syscall_fd_);
    if (wchan_fd_ >= 0) ::close(wchan_fd_);
#endif
  }
  StallStacks(const StallStacks&) = delete;
  StallStacks& operator=(const StallStacks&) = delete;

  // On every probe tick (GUI thread); pause() before the test's own long work.
  void tick() {
    last_tick_ms_ = now_ms();
    paused_ = false;
  }
  void pause() {
    paused_ = true;
  }

 private:
  static int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

#ifdef SEEDVAE_STALL_STACKS
  // The signal handler: the receiving thread's stack, headed by its thread id (no allocation).
  static void dump(int) {
    void* frames[64];
    const int n = backtrace(frames, 64);
    char head[64] = "--- stack of thread ";
    size_t len = std::strlen(head);
    char digits[16];
    int k = 0;
    for (pid_t tid = gettid(); tid > 0 && k < 16; tid /= 10)
      digits[k++] = static_cast<char>('0' + tid % 10);
    while (k > 0 && len < sizeof head - 12) head[len++] = digits[--k];
    std::memcpy(head + len, " during a stall:\n", 18);
    (void)!::write(STDERR_FILENO, head, std::strlen(head));
    backtrace_symbols_fd(frames, n, STDERR_FILENO);
  }

  void watch() {
    int64_t gap_of = -1, last_dump = 0;
    int dumps = 0;
    while (!stop_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      const int64_t last = last_tick_ms_, now = now_ms();
      if (paused_ || now - last < threshold_ms_) continue;
      if (last != gap_of) {
        gap_of = last;
        dumps = 0;
      }
      if (dumps < 4 && now - last_dump >= 20) {
        ++dumps;
        last_dump = now;
        // In the kernel (blocked), the signal waits for the way out: first where it waits --
        // the system call and its arguments, or "running", and the kernel function it sleeps in.
        std::string where = "--- GUI thread after " + std::to_string(now - last) + " ms: syscall ";
        where += read_proc(syscall_fd_) + ", wchan " + read_proc(wchan_fd_) + "\n";
        if (where.find("syscall running") == std::string::npos) where += others();
        (void)!::write(STDERR_FILENO, where.data(), where.size());
        pthread_kill(gui_, SIGUSR2);
      }
    }
  }

  // While the GUI thread is blocked in the kernel: the process's other threads that are running
  // (R) or in an uninterruptible wait (D), with their system call and kernel function -- the
  // holder of what the GUI thread waits for (a lock of the address space, say) is among them.
  static std::string others() {
    std::string out;
    DIR* d = opendir("/proc/self/task");
    if (d == nullptr) return out;
    const std::string self = std::to_string(gettid());
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.' || self == e->d_name) continue;
      const std::string task = std::string("/proc/self/task/") + e->d_name;
      const std::string stat = read_path(task + "/stat");
      const size_t close = stat.rfind(')');
      const char state =
          close != std::string::npos && close + 2 < stat.size() ? stat[close + 2] : '?';
      if (state != 'R' && state != 'D') continue;
      out += "    " + std::string(e->d_name) + " " + read_path(task + "/comm") + " " + state +
             ": syscall " + read_path(task + "/syscall") + ", wchan " + read_path(task + "/wchan") +
             "\n";
      // and its stack, printed by the thread itself once it leaves the kernel
      tgkill(getpid(), std::atoi(e->d_name), SIGUSR2);
    }
    closedir(d);
    return out;
  }

  static std::string read_path(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    std::string s = read_proc(fd);
    if (fd >= 0) ::close(fd);
    return s;
  }

  static std::string read_proc(int fd) {
    char buf[256];
    const ssize_t n = fd >= 0 ? ::pread(fd, buf, sizeof buf - 1, 0) : -1;
    if (n <= 0) return "?";
    std::string s(buf, static_cast<size_t>(n));
    while (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  }

  pthread_t gui_{};
  int syscall_fd_ = -1, wchan_fd_ = -1;
#endif
  int threshold_ms_ = 0;
  std::atomic<int64_t> last_tick_ms_{0};
  std::atomic<bool> paused_{false};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace seedvae::ui::test
