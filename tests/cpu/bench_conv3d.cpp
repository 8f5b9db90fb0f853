// Micro-benchmark (not a test): one 512 -> 512 3x3x3 convolution (pad 1 in H and W, no temporal
// padding) on an input of [1, 512, 6, 32, 32] through the CPU backend, as in the VAE's mid and
// decoder blocks. Reports the best and median wall time and GFLOP/s = 2*Cout*Cin*27*T_out*H*W / t.
// Usage: bench_conv3d [threads (0 = all)] [iterations] [T H W]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/cpu/cpu_backend.h"

using namespace seedvae;

namespace {
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}
std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}
}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 0;
  const int iters = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  const int64_t t = argc > 5 ? std::atoll(argv[3]) : 6;
  const int64_t h = argc > 5 ? std::atoll(argv[4]) : 32;
  const int64_t w = argc > 5 ? std::atoll(argv[5]) : 32;
  constexpr int64_t kC = 512;

  auto be = create_cpu_backend({.threads = threads});
  if (!be) {
    std::fprintf(stderr, "%s\n", be.status().to_string().c_str());
    return 1;
  }
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  HostTensor hx(DType::kF32, Shape{1, kC, t, h, w});
  HostTensor hw(DType::kF32, Shape{kC, kC, 3, 3, 3});
  HostTensor hb(DType::kF32, Shape{kC});
  for (float& v : hx.f32()) v = dist(rng);
  for (float& v : hw.f32()) v = dist(rng) * 0.01f;
  for (float& v : hb.f32()) v = dist(rng);
  auto x = (*be)->upload(hx);
  auto wt = (*be)->upload_weight(hw, "conv.weight");
  auto b = (*be)->upload_weight(hb, "conv.bias");
  if (!x || !wt || !b) {
    std::fprintf(stderr, "upload failed\n");
    return 1;
  }
  Conv3dParams p;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;

  std::printf("load average before: %s\n", load_average().c_str());
  std::vector<double> seconds;
  double cpu_seconds = 0;
  for (int i = 0; i <= iters; ++i) {  // iteration 0: primitive creation + weight packing
    const double c0 = process_cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    auto y = (*be)->conv3d(*x, *wt, *b, p);
    const auto t1 = std::chrono::steady_clock::now();
    if (i > 0) cpu_seconds += process_cpu_seconds() - c0;
    if (!y) {
      std::fprintf(stderr, "%s\n", y.status().to_string().c_str());
      return 1;
    }
    const double s = std::chrono::duration<double>(t1 - t0).count();
    if (i == 0) {
      std::printf("first call (primitive creation, weight packing): %.1f ms\n", s * 1e3);
    } else {
      seconds.push_back(s);
    }
  }
  std::sort(seconds.begin(), seconds.end());
  const int64_t t_out = t - 2;
  const double flop = 2.0 * kC * kC * 27 * static_cast<double>(t_out * h * w);
  const double best = seconds.front();
  const double median = seconds[seconds.size() / 2];
  std::printf("%s\n", (*be)->name().c_str());
  std::printf("conv3d 512->512 3x3x3 on [1, 512, %lld, %lld, %lld] -> T_out %lld: %.2f GFLOP\n",
              static_cast<long long>(t), static_cast<long long>(h), static_cast<long long>(w),
              static_cast<long long>(t_out), flop * 1e-9);
  std::printf("best %.1f ms (%.1f GFLOP/s), median %.1f ms (%.1f GFLOP/s) over %d runs\n",
              best * 1e3, flop / best * 1e-9, median * 1e3, flop / median * 1e-9, iters);
  std::printf("CPU time per run %.1f ms (all threads); load average after: %s\n",
              cpu_seconds / iters * 1e3, load_average().c_str());
  const MemoryStats m = (*be)->memory_stats();
  std::printf("memory: current %.1f MiB, peak %.1f MiB\n", m.current_bytes / 1048576.0,
              m.peak_bytes / 1048576.0);
  return 0;
}
