#include "core/media/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

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
  const HostTensor a64 = a.to(DType::kF64);
  const HostTensor b64 = b.to(DType::kF64);
  const double* pa = a64.data<double>();
  const double* pb = b64.data<double>();

  double sq = 0, max_abs = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(pa[i]) || !std::isfinite(pb[i])) {
      return invalid_argument("clip contains non-finite values (element " +
                              std::to_string(elements_ + i) + ")");
    }
    const double d = std::abs(pa[i] - pb[i]) * 0.5;  // [-1, 1] -> [0, 1] halves differences
    max_abs = std::max(max_abs, d);
    sq += d * d;
  }

  const int64_t N = s.n(), T = s.t(), H = s.h(), W = s.w();
  const int64_t plane = H * W;
  std::vector<double> ya(static_cast<size_t>(plane)), yb(static_cast<size_t>(plane));
  double ssim_sum = 0;
  for (int64_t bn = 0; bn < N; ++bn) {
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t i = 0; i < plane; ++i) {
        double la = 0, lb = 0;
        constexpr double kY[3] = {0.299, 0.587, 0.114};
        for (int64_t c = 0; c < 3; ++c) {
          const int64_t off = (((bn * 3 + c) * T + t) * plane) + i;
          la += kY[c] * (pa[off] + 1.0) * 0.5;
          lb += kY[c] * (pb[off] + 1.0) * 0.5;
        }
        ya[static_cast<size_t>(i)] = la;
        yb[static_cast<size_t>(i)] = lb;
      }
      ssim_sum += ssim_plane(ya, yb, H, W);
    }
  }
  // Committed only once the whole chunk is valid.
  elements_ += n;
  squares_ += sq;
  max_abs_ = std::max(max_abs_, max_abs);
  ssim_sum_ += ssim_sum;
  frames_ += N * T;
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
