#include "core/media/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace seedvae::media {

namespace {

constexpr double kSigma = 1.5;
constexpr int kWindow = 11;
constexpr double kC1 = (0.01 * 1.0) * (0.01 * 1.0);
constexpr double kC2 = (0.03 * 1.0) * (0.03 * 1.0);

std::vector<double> gaussian_window(int size) {
  std::vector<double> g(static_cast<size_t>(size));
  const int r = size / 2;
  double sum = 0;
  for (int i = 0; i < size; ++i) {
    const double d = i - r;
    g[static_cast<size_t>(i)] = std::exp(-(d * d) / (2 * kSigma * kSigma));
    sum += g[static_cast<size_t>(i)];
  }
  for (double& v : g) v /= sum;
  return g;
}

// SSIM of two single-channel [0, 1] images of h x w (row-major).
double ssim_plane(const std::vector<double>& x, const std::vector<double>& y, int64_t h,
                  int64_t w) {
  int win = static_cast<int>(std::min<int64_t>({kWindow, h, w}));
  if (win % 2 == 0) --win;
  const std::vector<double> g = gaussian_window(win);
  const int64_t ow = w - win + 1, oh = h - win + 1;
  // Horizontal pass of x, y, x^2, y^2, xy: h rows of ow values each.
  std::vector<double> hx(static_cast<size_t>(h * ow)), hy(hx.size()), hxx(hx.size()),
      hyy(hx.size()), hxy(hx.size());
  for (int64_t r = 0; r < h; ++r) {
    const double* xr = x.data() + r * w;
    const double* yr = y.data() + r * w;
    for (int64_t c = 0; c < ow; ++c) {
      double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
      for (int k = 0; k < win; ++k) {
        const double gk = g[static_cast<size_t>(k)];
        const double a = xr[c + k], b = yr[c + k];
        sx += gk * a;
        sy += gk * b;
        sxx += gk * a * a;
        syy += gk * b * b;
        sxy += gk * a * b;
      }
      const size_t i = static_cast<size_t>(r * ow + c);
      hx[i] = sx;
      hy[i] = sy;
      hxx[i] = sxx;
      hyy[i] = syy;
      hxy[i] = sxy;
    }
  }
  double total = 0;
  for (int64_t r = 0; r < oh; ++r) {
    for (int64_t c = 0; c < ow; ++c) {
      double mx = 0, my = 0, exx = 0, eyy = 0, exy = 0;
      for (int k = 0; k < win; ++k) {
        const double gk = g[static_cast<size_t>(k)];
        const size_t i = static_cast<size_t>((r + k) * ow + c);
        mx += gk * hx[i];
        my += gk * hy[i];
        exx += gk * hxx[i];
        eyy += gk * hyy[i];
        exy += gk * hxy[i];
      }
      const double vx = exx - mx * mx, vy = eyy - my * my, cxy = exy - mx * my;
      total +=
          ((2 * mx * my + kC1) * (2 * cxy + kC2)) / ((mx * mx + my * my + kC1) * (vx + vy + kC2));
    }
  }
  return total / static_cast<double>(oh * ow);
}

}  // namespace

namespace {

// One frame's share of the sums: squared and largest differences over its three channels, its
// SSIM, and the flat index of its first non-finite element (-1: none).
struct FrameSums {
  double squares = 0, max_abs = 0, ssim = 0;
  int64_t non_finite = -1;
};

// Frame (bn, t) of two [N, 3, T, H, W] clips read as T (float or double): every value is widened
// to double as it is read, exactly as a double copy of the clip would hold it.
template <typename T>
FrameSums frame_sums(const T* pa, const T* pb, int64_t bn, int64_t t, int64_t frames, int64_t h,
                     int64_t w) {
  FrameSums f;
  const int64_t plane = h * w;
  std::vector<double> ya(static_cast<size_t>(plane), 0.0), yb(ya.size(), 0.0);
  constexpr double kY[3] = {0.299, 0.587, 0.114};
  for (int64_t c = 0; c < 3; ++c) {
    const int64_t base = ((bn * 3 + c) * frames + t) * plane;
    for (int64_t i = 0; i < plane; ++i) {
      const double a = static_cast<double>(pa[base + i]), b = static_cast<double>(pb[base + i]);
      if (!std::isfinite(a) || !std::isfinite(b)) {
        if (f.non_finite < 0) f.non_finite = base + i;
        continue;
      }
      const double d = std::abs(a - b) * 0.5;  // [-1, 1] -> [0, 1] halves differences
      f.max_abs = std::max(f.max_abs, d);
      f.squares += d * d;
      ya[static_cast<size_t>(i)] += kY[c] * (a + 1.0) * 0.5;
      yb[static_cast<size_t>(i)] += kY[c] * (b + 1.0) * 0.5;
    }
  }
  if (f.non_finite < 0) f.ssim = ssim_plane(ya, yb, h, w);
  return f;
}

}  // namespace

Status QualityAccumulator::add(const HostTensor& a, const HostTensor& b) {
  if (a.shape() != b.shape()) {
    return invalid_argument("cannot compare clips of different shapes " + a.shape().to_string() +
                            " and " + b.shape().to_string());
  }
  const Shape& s = a.shape();
  if (s.rank() != 5 || s.c() != 3) {
    return invalid_argument("clips must be [N, 3, T, H, W], got " + s.to_string());
  }
  int64_t n = 0;
  if (!s.checked_numel(&n) || n == 0) {
    return invalid_argument("cannot compare empty clips " + s.to_string());
  }
  if (n * dtype_size(a.dtype()) != a.nbytes() || n * dtype_size(b.dtype()) != b.nbytes()) {
    return invalid_argument("clip " + s.to_string() + " does not match its storage");
  }
  // Read in place when both are fp32 or both fp64; other pairs through exact fp64 copies.
  const bool f32 = a.dtype() == DType::kF32 && b.dtype() == DType::kF32;
  const bool f64 = a.dtype() == DType::kF64 && b.dtype() == DType::kF64;
  HostTensor a64, b64;
  if (!f32 && !f64) {
    a64 = a.to(DType::kF64);
    b64 = b.to(DType::kF64);
  }
  const HostTensor& da = f32 || f64 ? a : a64;
  const HostTensor& db = f32 || f64 ? b : b64;

  // Frames are independent: each is measured on its own thread (the stream's engine thread waits
  // for this, and a 720p chunk is ~0.3 s of one core) and the sums are added in frame order, so
  // the result does not depend on the thread count.
  const int64_t N = s.n(), T = s.t(), H = s.h(), W = s.w();
  const int64_t frames = N * T;
  std::vector<FrameSums> per(static_cast<size_t>(frames));
#if defined(_OPENMP)
#pragma omp parallel for schedule(dynamic) \
    num_threads(static_cast <int>(std::clamp <int64_t>(frames, 1, omp_get_num_procs())))
#endif
  for (int64_t f = 0; f < frames; ++f) {
    per[static_cast<size_t>(f)] =
        f32 ? frame_sums(da.data<float>(), db.data<float>(), f / T, f % T, T, H, W)
            : frame_sums(da.data<double>(), db.data<double>(), f / T, f % T, T, H, W);
  }
  int64_t bad = -1;
  double sq = 0, max_abs = 0, ssim_sum = 0;
  for (const FrameSums& f : per) {
    if (f.non_finite >= 0 && (bad < 0 || f.non_finite < bad)) bad = f.non_finite;
    sq += f.squares;
    max_abs = std::max(max_abs, f.max_abs);
    ssim_sum += f.ssim;
  }
  if (bad >= 0) {
    return invalid_argument("clip contains non-finite values (element " +
                            std::to_string(elements_ + bad) + ")");
  }
  // Committed only once the whole chunk is valid.
  elements_ += n;
  squares_ += sq;
  max_abs_ = std::max(max_abs_, max_abs);
  ssim_sum_ += ssim_sum;
  frames_ += frames;
  return Status::ok();
}

Result<QualityStats> QualityAccumulator::result() const {
  if (elements_ == 0) return invalid_argument("no frames were compared");
  QualityStats q;
  const double mse = squares_ / static_cast<double>(elements_);
  q.max_abs = max_abs_;
  q.rms = std::sqrt(mse);
  q.psnr_db = mse == 0 ? std::numeric_limits<double>::infinity() : -10.0 * std::log10(mse);
  q.ssim = ssim_sum_ / static_cast<double>(frames_);
  return q;
}

Result<QualityStats> compare_clips(const HostTensor& a, const HostTensor& b) {
  QualityAccumulator acc;
  SEEDVAE_TRY(acc.add(a, b));
  return acc.result();
}

}  // namespace seedvae::media
