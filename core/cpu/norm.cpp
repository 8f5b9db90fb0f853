// Per-frame GroupNorm (+ optional SiLU) of the CPU backend, on channels-last activations.
//
// PyTorch equivalent: x.permute(0,2,1,3,4).reshape(N*T, C, H, W) -> F.group_norm(groups, gamma,
// beta, eps) -> [SiLU] -> back to [N, C, T, H, W] (docs/model.md §2.1, "GN").
//
// A frame (n, t) is one contiguous [H*W, C] block. Work is split into jobs of consecutive pixel
// rows of one frame (several jobs per frame when there are fewer frames than threads), and runs in
// three passes over the data:
//   1. per-channel sums (float accumulators over runs of 64 pixels, flushed into double), reduced
//      per (frame, group) into the mean;
//   2. per-channel sums of squared deviations from the group mean (same accumulation) -> biased
//      variance, corrected for the rounding of the float mean that was subtracted;
//   3. y = (x - mean) * (rstd * gamma) + beta, then optional SiLU, vectorised along channels.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/cpu/kernels.h"
#include "core/cpu/parallel.h"

namespace seedvae::cpu {
namespace {

constexpr int kLanes = 16;
constexpr int64_t kRun = 256;
constexpr int64_t kPixelRun = 64;  // pixels accumulated in float before a flush into double

// out[c] += sum over rows of x[r*C + c].
SEEDVAE_SIMD_CLONES void channel_sums(const float* x, int64_t rows, int64_t C, float* acc,
                                      double* out) {
  for (int64_t r0 = 0; r0 < rows; r0 += kPixelRun) {
    const int64_t r1 = std::min(rows, r0 + kPixelRun);
    std::fill(acc, acc + C, 0.f);
    for (int64_t r = r0; r < r1; ++r) {
      const float* row = x + r * C;
      for (int64_t c = 0; c < C; ++c) acc[c] += row[c];
    }
    for (int64_t c = 0; c < C; ++c) out[c] += acc[c];
  }
}

// out[c] += sum over rows of (x[r*C + c] - mean[c])^2.
SEEDVAE_SIMD_CLONES void channel_sq_dev(const float* x, int64_t rows, int64_t C, const float* mean,
                                        float* acc, double* out) {
  for (int64_t r0 = 0; r0 < rows; r0 += kPixelRun) {
    const int64_t r1 = std::min(rows, r0 + kPixelRun);
    std::fill(acc, acc + C, 0.f);
    for (int64_t r = r0; r < r1; ++r) {
      const float* row = x + r * C;
      for (int64_t c = 0; c < C; ++c) {
        const float dv = row[c] - mean[c];
        acc[c] += dv * dv;
      }
    }
    for (int64_t c = 0; c < C; ++c) out[c] += acc[c];
  }
}

SEEDVAE_SIMD_CLONES void apply_rows(const float* x, float* y, int64_t rows, int64_t C,
                                    const float* mean, const float* scale, const float* shift,
                                    bool silu) {
  if (silu) {
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * C;
      float* yr = y + r * C;
      for (int64_t c = 0; c < C; ++c) yr[c] = silu_f32((xr[c] - mean[c]) * scale[c] + shift[c]);
    }
  } else {
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * C;
      float* yr = y + r * C;
      for (int64_t c = 0; c < C; ++c) yr[c] = (xr[c] - mean[c]) * scale[c] + shift[c];
    }
  }
}

}  // namespace

SEEDVAE_SIMD_CLONES double sum_f32(const float* p, int64_t n) {
  double total = 0;
  for (int64_t i0 = 0; i0 < n; i0 += kRun) {
    const int64_t m = std::min(kRun, n - i0);
    const float* q = p + i0;
    float acc[kLanes] = {};
    int64_t j = 0;
    for (; j + kLanes <= m; j += kLanes) {
      for (int l = 0; l < kLanes; ++l) acc[l] += q[j + l];
    }
    double s = 0;
    for (int l = 0; l < kLanes; ++l) s += acc[l];
    for (; j < m; ++j) s += q[j];
    total += s;
  }
  return total;
}

void group_norm_cl(const float* x, float* y, const Dims5& d, const float* gamma, const float* beta,
                   int groups, float eps, bool silu, int threads) {
  const int64_t C = d.c, P = d.h * d.w, F = d.frames(), G = groups, cg = C / G;
  if (F == 0 || P == 0 || C == 0) return;
  // Jobs: consecutive pixel rows of one frame; >= 4 jobs per thread where frames allow.
  const int64_t want = std::max<int64_t>(1, (4 * threads + F - 1) / F);
  const int64_t chunk = (P + std::min(want, P) - 1) / std::min(want, P);
  const int64_t per_frame = (P + chunk - 1) / chunk;
  const int64_t jobs = F * per_frame;
  auto rows_of = [&](int64_t job, int64_t* f, int64_t* p0) {
    *f = job / per_frame;
    *p0 = (job % per_frame) * chunk;
    return std::min(P, *p0 + chunk) - *p0;
  };

  // All scratch is allocated here, outside the parallel regions (std::bad_alloc must not escape
  // an OpenMP region); it is O(jobs x C), small next to the tensor.
  std::vector<double> part(static_cast<size_t>(jobs * C), 0.0);
  std::vector<float> accs(static_cast<size_t>(jobs * C));
  parallel_for(jobs, threads, [&](int64_t job) {
    int64_t f, p0;
    const int64_t rows = rows_of(job, &f, &p0);
    channel_sums(x + (f * P + p0) * C, rows, C, &accs[static_cast<size_t>(job * C)],
                 &part[static_cast<size_t>(job * C)]);
  });

  const double count = static_cast<double>(cg * P);
  std::vector<double> mean_g(static_cast<size_t>(F * G), 0.0);
  std::vector<float> mean_c(static_cast<size_t>(F * C));
  for (int64_t f = 0; f < F; ++f) {
    for (int64_t g = 0; g < G; ++g) {
      double s = 0;
      for (int64_t j = f * per_frame; j < (f + 1) * per_frame; ++j) {
        for (int64_t c = g * cg; c < (g + 1) * cg; ++c) s += part[static_cast<size_t>(j * C + c)];
      }
      const double m = s / count;
      mean_g[static_cast<size_t>(f * G + g)] = m;
      std::fill_n(&mean_c[static_cast<size_t>(f * C + g * cg)], cg, static_cast<float>(m));
    }
  }

  std::fill(part.begin(), part.end(), 0.0);
  parallel_for(jobs, threads, [&](int64_t job) {
    int64_t f, p0;
    const int64_t rows = rows_of(job, &f, &p0);
    channel_sq_dev(x + (f * P + p0) * C, rows, C, &mean_c[static_cast<size_t>(f * C)],
                   &accs[static_cast<size_t>(job * C)], &part[static_cast<size_t>(job * C)]);
  });

  std::vector<float> scale_c(static_cast<size_t>(F * C)), shift_c(static_cast<size_t>(F * C));
  for (int64_t f = 0; f < F; ++f) {
    for (int64_t g = 0; g < G; ++g) {
      double ss = 0;
      for (int64_t j = f * per_frame; j < (f + 1) * per_frame; ++j) {
        for (int64_t c = g * cg; c < (g + 1) * cg; ++c) ss += part[static_cast<size_t>(j * C + c)];
      }
      // Deviations were taken from the float mean m; with the exact mean M,
      // sum (x - m)^2 = sum (x - M)^2 + count * (M - m)^2.
      const double m_exact = mean_g[static_cast<size_t>(f * G + g)];
      const double bias = m_exact - static_cast<double>(static_cast<float>(m_exact));
      const double var = std::max(0.0, ss / count - bias * bias);
      const double rstd = 1.0 / std::sqrt(var + static_cast<double>(eps));
      for (int64_t c = g * cg; c < (g + 1) * cg; ++c) {
        scale_c[static_cast<size_t>(f * C + c)] =
            static_cast<float>(rstd * (gamma ? static_cast<double>(gamma[c]) : 1.0));
        shift_c[static_cast<size_t>(f * C + c)] = beta ? beta[c] : 0.f;
      }
    }
  }

  parallel_for(jobs, threads, [&](int64_t job) {
    int64_t f, p0;
    const int64_t rows = rows_of(job, &f, &p0);
    const size_t o = static_cast<size_t>(f * C);
    apply_rows(x + (f * P + p0) * C, y + (f * P + p0) * C, rows, C, &mean_c[o], &scale_c[o],
               &shift_c[o], silu);
  });
}

}  // namespace seedvae::cpu
