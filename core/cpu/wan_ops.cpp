// The Wan VAEs' data-movement and normalisation kernels of the CPU backend (docs/model.md "The Wan
// VAEs"), on channels-last activations: a 5-D [n, c, t, h, w] tensor is stored as [n, t, h, w, c],
// so one pixel's channels are contiguous and every op below moves whole channel vectors.
//
// PyTorch equivalents (upstream modules of the Wan VAEs):
//   rms_norm_cl          F.normalize(x, dim=1) * C**0.5 * gamma  [then SiLU]
//   upsample_nearest_cl  nn.Upsample(scale_factor=(2., 2.), mode="nearest-exact") per frame
//   frames_from_channels x.view(n, f, C, t, h, w).permute(0, 2, 3, 1, 4, 5).reshape(n, C, t*f, h,
//   w) patchify_cl          rearrange(x, "b c f (h q) (w r) -> b (c r q) f h w", q=p, r=p)
//   avg_down_cl          AvgDown3D (front zero pad to a multiple of ft, view/permute, group mean)
//   dup_up_cl            DupUp3D (repeat_interleave over channels, view/permute, first-chunk drop)
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/cpu/kernels.h"
#include "core/cpu/parallel.h"
#include "core/cpu/rms_norm.h"

namespace seedvae::cpu {
namespace {

// One position's inverse norm and one normalised value: the arithmetic of both layouts' loops
// (rms_norm.h).
inline float inverse_norm(double sum_squares, float eps) {
  return 1.f / std::max(static_cast<float>(std::sqrt(sum_squares)), eps);
}
inline float rms_value(float x, float inv, float scale, const float* gamma, bool silu) {
  float v = x * inv * scale;
  if (gamma) v *= *gamma;
  return silu ? silu_f32(v) : v;
}

SEEDVAE_SIMD_CLONES void rms_rows(const float* x, float* y, int64_t rows, int64_t C,
                                  const float* gamma, float eps, bool silu) {
  const float scale = rms_scale(C);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * C;
    float* yr = y + r * C;
    double ss = 0;
    for (int64_t c = 0; c < C; ++c) ss += static_cast<double>(xr[c]) * xr[c];
    const float inv = inverse_norm(ss, eps);
    for (int64_t c = 0; c < C; ++c) {
      yr[c] = rms_value(xr[c], inv, scale, gamma ? gamma + c : nullptr, silu);
    }
  }
}

}  // namespace

float rms_scale(int64_t channels) {
  return static_cast<float>(std::sqrt(static_cast<double>(channels)));
}

SEEDVAE_SIMD_CLONES void rms_inverse_norms(const float* x, int64_t n, int64_t channels,
                                           int64_t channel_stride, float eps, float* inv) {
  // blocks of positions, each position's sum over the channels in channel order
  constexpr int64_t kBlock = 256;
  double ss[kBlock];
  for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const int64_t m = std::min(kBlock, n - i0);
    std::fill_n(ss, m, 0.0);
    for (int64_t c = 0; c < channels; ++c) {
      const float* xc = x + c * channel_stride + i0;
      for (int64_t i = 0; i < m; ++i) ss[i] += static_cast<double>(xc[i]) * xc[i];
    }
    for (int64_t i = 0; i < m; ++i) inv[i0 + i] = inverse_norm(ss[i], eps);
  }
}

SEEDVAE_SIMD_CLONES void rms_apply(const float* x, const float* inv, int64_t n, float scale,
                                   const float* gamma, bool silu, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = rms_value(x[i], inv[i], scale, gamma, silu);
}

void rms_norm_cl(const float* x, float* y, const Dims5& d, const float* gamma, float eps, bool silu,
                 int threads) {
  const int64_t C = d.c, pixels = d.frames() * d.h * d.w;
  if (pixels == 0 || C == 0) return;
  constexpr int64_t kRows = 256;
  parallel_for((pixels + kRows - 1) / kRows, threads, [&](int64_t job) {
    const int64_t r0 = job * kRows;
    rms_rows(x + r0 * C, y + r0 * C, std::min(kRows, pixels - r0), C, gamma, eps, silu);
  });
}

void upsample_nearest_cl(const float* x, float* y, const Dims5& d, int threads) {
  const int64_t C = d.c, H = d.h, W = d.w;
  const size_t bytes = static_cast<size_t>(C) * sizeof(float);
  // one output row per job: (frame, output row)
  parallel_for(d.frames() * 2 * H, threads, [&](int64_t job) {
    const int64_t f = job / (2 * H), oh = job % (2 * H);
    const float* src = x + (f * H + oh / 2) * W * C;
    float* dst = y + (f * 2 * H + oh) * 2 * W * C;
    for (int64_t ow = 0; ow < 2 * W; ++ow) std::memcpy(dst + ow * C, src + (ow / 2) * C, bytes);
  });
}

void frames_from_channels_cl(const float* x, float* y, const Dims5& in, int factor, int threads) {
  const int64_t Cin = in.c, C = Cin / factor, P = in.h * in.w;
  const size_t bytes = static_cast<size_t>(C) * sizeof(float);
  // job: (n, t, i) -> output frame (n, t*factor + i)
  parallel_for(in.frames() * factor, threads, [&](int64_t job) {
    const int64_t nt = job / factor, i = job % factor;
    const int64_t n = nt / in.t, t = nt % in.t;
    const float* src = x + nt * P * Cin + i * C;
    float* dst = y + (n * in.t * factor + t * factor + i) * P * C;
    for (int64_t p = 0; p < P; ++p) std::memcpy(dst + p * C, src + p * Cin, bytes);
  });
}

void patchify_cl(const float* x, float* y, const Dims5& in, int p, bool inverse, int threads) {
  // `in` are the patchified (low-resolution) dims when inverse, the pixel dims otherwise.
  const int64_t Cp = inverse ? in.c : in.c * p * p;  // channels of the patchified tensor
  const int64_t C = Cp / (p * p);
  const int64_t h = inverse ? in.h : in.h / p, w = inverse ? in.w : in.w / p;
  const int64_t H = h * p, W = w * p;
  parallel_for(in.frames() * h, threads, [&](int64_t job) {
    const int64_t f = job / h, i = job % h;
    for (int64_t j = 0; j < w; ++j) {
      float* pv = nullptr;
      const float* cpv = nullptr;
      if (inverse) {
        cpv = x + ((f * h + i) * w + j) * Cp;
      } else {
        pv = y + ((f * h + i) * w + j) * Cp;
      }
      for (int64_t dx = 0; dx < p; ++dx) {
        for (int64_t dy = 0; dy < p; ++dy) {
          const int64_t pix = (f * H + p * i + dy) * W + p * j + dx;
          for (int64_t c = 0; c < C; ++c) {
            const int64_t k = c * p * p + dx * p + dy;
            if (inverse) {
              y[pix * C + c] = cpv[k];
            } else {
              pv[k] = x[pix * C + c];
            }
          }
        }
      }
    }
  });
}

void avg_down_cl(const float* x, float* y, const Dims5& in, int64_t cout, int ft, int fs,
                 int threads) {
  const int64_t Cin = in.c, f = int64_t{ft} * fs * fs, g = Cin * f / cout;
  const int64_t To = (in.t + ft - 1) / ft, pad = To * ft - in.t;
  const int64_t Ho = in.h / fs, Wo = in.w / fs;
  const float inv_g = 1.f / static_cast<float>(g);
  parallel_for(in.n * To * Ho, threads, [&](int64_t job) {
    const int64_t i = job % Ho, nt = job / Ho, to = nt % To, n = nt / To;
    for (int64_t j = 0; j < Wo; ++j) {
      float* out = y + ((nt * Ho + i) * Wo + j) * cout;
      for (int64_t o = 0; o < cout; ++o) {
        float s = 0.f;
        for (int64_t k = o * g; k < o * g + g; ++k) {
          const int64_t c = k / f, rem = k % f;
          const int64_t it = rem / (fs * fs), ih = (rem / fs) % fs, iw = rem % fs;
          const int64_t t = to * ft + it - pad;
          if (t < 0) continue;  // the zero frames in front
          s += x[(((n * in.t + t) * in.h + i * fs + ih) * in.w + j * fs + iw) * Cin + c];
        }
        out[o] = s * inv_g;
      }
    }
  });
}

void dup_up_cl(const float* x, float* y, const Dims5& in, int64_t cout, int ft, int fs,
               bool drop_first, int threads) {
  const int64_t Cin = in.c, f = int64_t{ft} * fs * fs, r = cout * f / Cin;
  const int64_t drop = drop_first ? ft - 1 : 0;
  const int64_t To = in.t * ft - drop, Ho = in.h * fs, Wo = in.w * fs;
  parallel_for(in.n * To * Ho, threads, [&](int64_t job) {
    const int64_t oh = job % Ho, nt = job / Ho, ot = nt % To + drop, n = nt / To;
    const int64_t t = ot / ft, it = ot % ft, i = oh / fs, ih = oh % fs;
    for (int64_t ow = 0; ow < Wo; ++ow) {
      const int64_t j = ow / fs, iw = ow % fs;
      const float* src = x + (((n * in.t + t) * in.h + i) * in.w + j) * Cin;
      float* out = y + ((nt * Ho + oh) * Wo + ow) * cout;
      for (int64_t o = 0; o < cout; ++o) out[o] = src[(((o * ft + it) * fs + ih) * fs + iw) / r];
    }
  });
}

}  // namespace seedvae::cpu
