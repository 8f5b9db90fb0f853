#include "core/media/sample_clip.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numbers>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace seedvae::media {

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1).
double uniform(uint64_t& state) {
  return static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
}

double lattice(int64_t x, int64_t y, uint64_t seed) {
  uint64_t s = seed ^ (static_cast<uint64_t>(x) * 0x9E3779B97F4A7C15ull) ^
               (static_cast<uint64_t>(y) * 0xC2B2AE3D27D4EB4Full);
  return uniform(s) * 2.0 - 1.0;
}

// Smooth value noise in [-1, 1] with a lattice of `cell` pixels.
double value_noise(double x, double y, double cell, uint64_t seed) {
  const double fx = x / cell, fy = y / cell;
  const double x0 = std::floor(fx), y0 = std::floor(fy);
  double tx = fx - x0, ty = fy - y0;
  tx = tx * tx * (3 - 2 * tx);
  ty = ty * ty * (3 - 2 * ty);
  const auto ix = static_cast<int64_t>(x0), iy = static_cast<int64_t>(y0);
  const double a = lattice(ix, iy, seed), b = lattice(ix + 1, iy, seed);
  const double c = lattice(ix, iy + 1, seed), d = lattice(ix + 1, iy + 1, seed);
  return (a + (b - a) * tx) + ((c + (d - c) * tx) - (a + (b - a) * tx)) * ty;
}

double clamp01(double v) {
  return std::clamp(v, 0.0, 1.0);
}

struct Disc {
  double cx, cy, ax, ay, wx, wy, px, py, radius;
  double rgb[3];
};

// Everything a frame needs that depends on the seed alone.
struct Scene {
  int64_t W = 1, H = 1;
  double phase[3] = {};
  double hue_shift = 0;
  Disc discs[3] = {};
  uint64_t tex_seed = 0;
  double bar_w = 2, bar_speed = 1, grating_period = 3;
};

constexpr double kTau = 2 * std::numbers::pi;

Scene make_scene(int64_t W, int64_t H, uint64_t seed) {
  Scene s;
  s.W = W;
  s.H = H;
  uint64_t st = seed * 0xD1B54A32D192ED03ull + 0x5EEDu;
  for (double& p : s.phase) p = uniform(st) * kTau;
  s.hue_shift = uniform(st) * 0.2 - 0.1;
  const double m = static_cast<double>(std::min(W, H));
  for (int i = 0; i < 3; ++i) {
    Disc& d = s.discs[i];
    d.cx = (0.25 + 0.25 * i + 0.1 * (uniform(st) - 0.5)) * static_cast<double>(W);
    d.cy = (0.35 + 0.3 * uniform(st)) * static_cast<double>(H);
    d.ax = (0.12 + 0.1 * uniform(st)) * static_cast<double>(W);
    d.ay = (0.08 + 0.1 * uniform(st)) * static_cast<double>(H);
    d.wx = 0.05 + 0.06 * uniform(st);
    d.wy = 0.04 + 0.07 * uniform(st);
    d.px = uniform(st) * kTau;
    d.py = uniform(st) * kTau;
    d.radius = (0.07 + 0.06 * uniform(st)) * m + 1.0;
    for (double& c : d.rgb) c = 0.15 + 0.8 * uniform(st);
  }
  // Make the discs clearly coloured: one reddish, one greenish, one bluish.
  for (int i = 0; i < 3; ++i) s.discs[i].rgb[i] = std::max(s.discs[i].rgb[i], 0.85);
  s.tex_seed = splitmix64(st);
  s.bar_w = std::max(2.0, 0.06 * static_cast<double>(W));
  s.bar_speed = std::max(1.0, static_cast<double>(W) / 24.0);
  s.grating_period = std::max(3.0, m / 12.0);
  return s;
}

// Frame `index` of the clip into three planes `cstride` floats apart, starting at `o`. Every pixel
// depends on its coordinates alone, so rows are split among threads (OpenMP where the build has
// it) with a result independent of the thread count.
void render_frame(const Scene& s, int64_t index, float* o, int64_t cstride) {
  const int64_t W = s.W, H = s.H;
  const double td = static_cast<double>(index);
  const double pan = std::floor(td * 1.5);  // texture pans 1.5 px per frame (integer shift)
  const double bar_x = std::fmod(td * s.bar_speed, static_cast<double>(W) + s.bar_w) - s.bar_w;
  double dcx[3], dcy[3];
  for (int i = 0; i < 3; ++i) {
    const Disc& d = s.discs[i];
    dcx[i] = d.cx + d.ax * std::sin(d.wx * kTau * td + d.px);
    dcy[i] = d.cy + d.ay * std::cos(d.wy * kTau * td + d.py);
  }
#if defined(_OPENMP)
  // A reader thread beside the engine: at most 8 threads, and none for a small frame.
  const int team = static_cast<int>(
      std::clamp<int64_t>(W * H / (64 * 1024), 1, std::min(8, omp_get_num_procs())));
#pragma omp parallel for num_threads(team) schedule(static)
#endif
  for (int64_t y = 0; y < H; ++y) {
    const double v = (static_cast<double>(y) + 0.5) / static_cast<double>(H);
    for (int64_t x = 0; x < W; ++x) {
      const double u = (static_cast<double>(x) + 0.5) / static_cast<double>(W);
      double rgb[3];
      rgb[0] = 0.45 + s.hue_shift +
               0.22 * std::sin(kTau * (0.7 * u + 0.3 * v) + s.phase[0] + 0.05 * td) + 0.1 * v;
      rgb[1] = 0.45 + 0.22 * std::sin(kTau * (-0.4 * u + 0.8 * v) + s.phase[1] + 0.04 * td);
      rgb[2] =
          0.5 - s.hue_shift + 0.22 * std::cos(kTau * (0.5 * u - 0.2 * v) + s.phase[2] - 0.03 * td);

      // Fine texture that moves with the background.
      const double tex = 0.025 * value_noise(static_cast<double>(x) + pan, static_cast<double>(y),
                                             3.0, s.tex_seed) +
                         0.02 * value_noise(static_cast<double>(x) + pan, static_cast<double>(y),
                                            11.0, s.tex_seed ^ 0xABCDull);
      for (double& c : rgb) c += tex;

      // Slanted grating in a soft-edged patch in the lower left.
      {
        const double gx = (u - 0.2) / 0.16, gy = (v - 0.78) / 0.14;
        const double r2 = gx * gx + gy * gy;
        if (r2 < 1.0) {
          const double mask = std::clamp((1.0 - r2) * 4.0, 0.0, 1.0);
          const double g =
              0.5 +
              0.5 * std::sin(kTau * (static_cast<double>(x) * 0.8 + static_cast<double>(y) * 0.6) /
                                 s.grating_period +
                             0.3 * td);
          const double val = 0.2 + 0.6 * g;
          for (double& c : rgb) c = c * (1 - mask) + val * mask;
        }
      }

      // Discs, anti-aliased, lightly shaded (light from the upper left).
      for (int i = 0; i < 3; ++i) {
        const Disc& d = s.discs[i];
        const double dx = static_cast<double>(x) + 0.5 - dcx[i];
        const double dy = static_cast<double>(y) + 0.5 - dcy[i];
        const double dist = std::sqrt(dx * dx + dy * dy);
        const double cov = std::clamp(d.radius - dist + 0.5, 0.0, 1.0);
        if (cov <= 0) continue;
        const double shade = 1.0 - 0.25 * std::clamp((dx + dy) / (2 * d.radius) + 0.5, 0.0, 1.0);
        for (int c = 0; c < 3; ++c) rgb[c] = rgb[c] * (1 - cov) + d.rgb[c] * shade * cov;
      }

      // Hard-edged dark bar sweeping left to right.
      const double xd = static_cast<double>(x);
      if (xd >= bar_x && xd < bar_x + s.bar_w) {
        rgb[0] = 0.08;
        rgb[1] = 0.07;
        rgb[2] = 0.12;
      }

      const int64_t off = y * W + x;
      for (int c = 0; c < 3; ++c) {
        o[c * cstride + off] = static_cast<float>(clamp01(rgb[c]) * 2.0 - 1.0);
      }
    }
  }
}

}  // namespace

HostTensor make_sample_clip(int width, int height, int frames, uint64_t seed) {
  return make_sample_frames(width, height, 0, std::max(frames, 1), seed);
}

HostTensor make_sample_frames(int width, int height, int64_t first, int64_t count, uint64_t seed) {
  Result<HostTensor> r = generate_sample_frames(width, height, first, count, nullptr, seed);
  return r.is_ok() ? std::move(*r) : HostTensor{};  // without a token it always succeeds
}

Result<HostTensor> generate_sample_frames(int width, int height, int64_t first, int64_t count,
                                          const CancelToken* stop, uint64_t seed) {
  const int64_t W = std::max(width, 1), H = std::max(height, 1), T = std::max<int64_t>(count, 0);
  first = std::max<int64_t>(first, 0);
  HostTensor out(DType::kF32, Shape{1, 3, T, H, W});
  if (out.empty()) return out;
  const Scene scene = make_scene(W, H, seed);
  float* o = out.data<float>();
  const int64_t plane = H * W;
  for (int64_t t = 0; t < T; ++t) {
    if (stop != nullptr) SEEDVAE_TRY(stop->check());
    render_frame(scene, first + t, o + t * plane, T * plane);
  }
  return out;
}

std::filesystem::path find_demo_clip(const std::filesystem::path& exe_dir) {
  namespace fs = std::filesystem;
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("SEEDVAE_DEMO_CLIP"); env && *env) candidates.emplace_back(env);
  if (!exe_dir.empty()) candidates.push_back(exe_dir / ".." / "share" / "seedvae" / "demo-clip");
  for (const fs::path& c : candidates) {
    std::error_code ec;
    if (fs::is_directory(c, ec) && !fs::is_empty(c, ec)) return fs::weakly_canonical(c, ec);
  }
  return {};
}

}  // namespace seedvae::media
