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

// A frame is measured in bands of this many SSIM-map rows, the bands of all frames of a chunk
// spread over the cores; the sums are added band by band in order, so the result does not depend
// on the thread count.
constexpr int64_t kBandRows = 32;

struct BandSums {
  double squares = 0, max_abs = 0, ssim = 0;
  int64_t non_finite = -1;  // the first non-finite element's index in the clip, or -1
};

// One band of one frame: the squared and largest differences of pixel rows [p0, p1) of every
// channel, and the sum of the SSIM map (on luma, Gaussian window `g` of `win` taps) over map rows
// [r0, r1), which read luma rows [r0, r1 + win - 1). `base` is the frame's first element (channel
// 0), `cstride` the distance between channels. The scratch is the calling thread's own, reused
// from band to band and kept for the next call (fresh buffers would cost a page fault per 4 KiB;
// it holds 42 rows of 7 doubles a pixel: 4.5 MB per thread at 1080p).
template <typename T>
BandSums band_sums(const T* pa, const T* pb, int64_t base, int64_t cstride, int64_t w,
                   const std::vector<double>& g, int64_t p0, int64_t p1, int64_t r0, int64_t r1) {
  BandSums f;
  for (int64_t c = 0; c < 3; ++c) {
    const int64_t off = base + c * cstride;
    for (int64_t i = p0 * w; i < p1 * w; ++i) {
      const double a = static_cast<double>(pa[off + i]), b = static_cast<double>(pb[off + i]);
      if (!std::isfinite(a) || !std::isfinite(b)) {
        if (f.non_finite < 0) f.non_finite = off + i;
        continue;
      }
      const double d = std::abs(a - b) * 0.5;  // [-1, 1] -> [0, 1] halves differences
      f.max_abs = std::max(f.max_abs, d);
      f.squares += d * d;
    }
  }
  if (f.non_finite >= 0 || r1 <= r0) return f;
  const int win = static_cast<int>(g.size());
  const int64_t rows = r1 - r0 + win - 1, ow = w - win + 1;
  thread_local std::vector<double> scratch;
  scratch.resize(static_cast<size_t>(2 * rows * w + 5 * rows * ow));
  double* ya = scratch.data();
  double* yb = ya + rows * w;
  double* hx = yb + rows * w;
  double* hy = hx + rows * ow;
  double* hxx = hy + rows * ow;
  double* hyy = hxx + rows * ow;
  double* hxy = hyy + rows * ow;
  // luma of [-1, 1] RGB mapped to [0, 1]
  constexpr double kY[3] = {0.299, 0.587, 0.114};
  for (int64_t i = 0; i < rows * w; ++i) {
    double la = 0.0, lb = 0.0;
    for (int64_t c = 0; c < 3; ++c) {
      const int64_t k = base + c * cstride + r0 * w + i;
      la += kY[c] * (static_cast<double>(pa[k]) + 1.0) * 0.5;
      lb += kY[c] * (static_cast<double>(pb[k]) + 1.0) * 0.5;
    }
    ya[i] = la;
    yb[i] = lb;
  }
  // the window's horizontal pass, then its vertical one
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = ya + r * w;
    const double* yr = yb + r * w;
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
      const int64_t i = r * ow + c;
      hx[i] = sx;
      hy[i] = sy;
      hxx[i] = sxx;
      hyy[i] = syy;
      hxy[i] = sxy;
    }
  }
  for (int64_t r = 0; r < r1 - r0; ++r) {
    for (int64_t c = 0; c < ow; ++c) {
      double mx = 0, my = 0, exx = 0, eyy = 0, exy = 0;
      for (int k = 0; k < win; ++k) {
        const double gk = g[static_cast<size_t>(k)];
        const int64_t i = (r + k) * ow + c;
        mx += gk * hx[i];
        my += gk * hy[i];
        exx += gk * hxx[i];
        eyy += gk * hyy[i];
        exy += gk * hxy[i];
      }
      const double vx = exx - mx * mx, vy = eyy - my * my, cxy = exy - mx * my;
      f.ssim +=
          ((2 * mx * my + kC1) * (2 * cxy + kC2)) / ((mx * mx + my * my + kC1) * (vx + vy + kC2));
    }
  }
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

  // Every frame's bands are independent and run on the cores (a 1080p chunk is a few hundred ms
  // of one core); the sums are added in frame and band order, so the result does not depend on
  // the thread count.
  const int64_t N = s.n(), T = s.t(), H = s.h(), W = s.w();
  const int64_t frames = N * T;
  int win = static_cast<int>(std::min<int64_t>({kWindow, H, W}));
  if (win % 2 == 0) --win;
  const std::vector<double> g = gaussian_window(win);
  const int64_t oh = H - win + 1, ow = W - win + 1;
  const int64_t bands = std::max<int64_t>(1, (oh + kBandRows - 1) / kBandRows);
  const int64_t items = frames * bands;
  std::vector<BandSums> per(static_cast<size_t>(items));
#if defined(_OPENMP)
#pragma omp parallel for schedule(dynamic) \
    num_threads(static_cast <int>(std::clamp <int64_t>(items, 1, omp_get_num_procs())))
#endif
  for (int64_t it = 0; it < items; ++it) {
    const int64_t f = it / bands, band = it % bands;
    const int64_t base = ((f / T) * 3 * T + f % T) * H * W, cstride = T * H * W;
    const int64_t r0 = band * kBandRows, r1 = std::min(oh, r0 + kBandRows);
    const int64_t p1 = band + 1 == bands ? H : r1;  // the last band takes the rows below the map
    per[static_cast<size_t>(it)] =
        f32 ? band_sums(da.data<float>(), db.data<float>(), base, cstride, W, g, r0, p1, r0, r1)
            : band_sums(da.data<double>(), db.data<double>(), base, cstride, W, g, r0, p1, r0, r1);
  }
  int64_t bad = -1;
  double sq = 0, max_abs = 0, ssim_sum = 0;
  for (int64_t f = 0; f < frames; ++f) {
    double ssim = 0;
    for (int64_t band = 0; band < bands; ++band) {
      const BandSums& part = per[static_cast<size_t>(f * bands + band)];
      if (part.non_finite >= 0 && (bad < 0 || part.non_finite < bad)) bad = part.non_finite;
      sq += part.squares;
      max_abs = std::max(max_abs, part.max_abs);
      ssim += part.ssim;
    }
    ssim_sum += ssim / static_cast<double>(oh * ow);
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
