// The Wan VAEs' kernels (gpu/kernels/wan.h).
//
// RMS norm: channels-last, one warp per position (its C channels are contiguous; fp32 sum of
// squares by warp shuffles, then a second pass scales); NCDHW, one thread per position walking
// the channels at stride T*H*W (neighbouring threads read neighbouring positions).
// Data movement: one thread per output element, which computes its source element (or, for
// AvgDown3D, the g sources it averages, summed in fp32 in the CPU kernel's order). Simple index
// arithmetic rather than vectorised copies: these ops move a few percent of a decode's bytes.
#include <cmath>

#include "gpu/kernels/common.cuh"
#include "gpu/kernels/wan.h"

namespace seedvae::gpu {
namespace {

using dev::from_f32;
using dev::to_f32;

int blocks_for(int64_t n, int threads = 256) {
  const int64_t b = dev::ceil_div(n, threads);
  return static_cast<int>(b < 1 ? 1 : (b > 65535 * 8 ? 65535 * 8 : b));
}

// Offset of element (n, c, t, h, w) of a tensor of dims d.
__device__ __forceinline__ int64_t at(const Dims5& d, bool last, int64_t n, int64_t c, int64_t t,
                                      int64_t h, int64_t w) {
  return last ? (((n * d.t + t) * d.h + h) * d.w + w) * d.c + c
              : (((n * d.c + c) * d.t + t) * d.h + h) * d.w + w;
}

template <typename T>
__global__ void rms_last_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t C,
                                const float* __restrict__ gamma, float eps, float scale,
                                bool silu) {
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / dev::kWarp);
  const int lane = threadIdx.x % dev::kWarp;
  for (int64_t r = blockIdx.x * int64_t(blockDim.x / dev::kWarp) + threadIdx.x / dev::kWarp;
       r < rows; r += warps) {
    const T* xr = x + r * C;
    T* yr = y + r * C;
    float ss = 0.f;
    for (int64_t c = lane; c < C; c += dev::kWarp) {
      const float v = to_f32(xr[c]);
      ss = fmaf(v, v, ss);
    }
    for (int o = dev::kWarp / 2; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const float inv = 1.f / fmaxf(sqrtf(ss), eps);
    for (int64_t c = lane; c < C; c += dev::kWarp) {
      float v = to_f32(xr[c]) * inv * scale;
      if (gamma) v *= gamma[c];
      yr[c] = from_f32<T>(silu ? dev::silu(v) : v);
    }
  }
}

template <typename T>
__global__ void rms_first_kernel(const T* __restrict__ x, T* __restrict__ y, Dims5 d,
                                 const float* __restrict__ gamma, float eps, float scale,
                                 bool silu) {
  const int64_t plane = d.t * d.h * d.w, total = d.n * plane;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = i / plane, p = i % plane;
    const T* xp = x + n * d.c * plane + p;
    T* yp = y + n * d.c * plane + p;
    float ss = 0.f;
    for (int64_t c = 0; c < d.c; ++c) {
      const float v = to_f32(xp[c * plane]);
      ss = fmaf(v, v, ss);
    }
    const float inv = 1.f / fmaxf(sqrtf(ss), eps);
    for (int64_t c = 0; c < d.c; ++c) {
      float v = to_f32(xp[c * plane]) * inv * scale;
      if (gamma) v *= gamma[c];
      yp[c * plane] = from_f32<T>(silu ? dev::silu(v) : v);
    }
  }
}

template <typename T>
__global__ void wan_move_kernel(WanMoveArgs a, const T* __restrict__ x, T* __restrict__ y) {
  const Dims5 in = a.in, out = a.out;
  const bool last = a.layout == Layout::kNDHWC;
  const int64_t total = out.numel();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    // (n, c, t, h, w) of output element i in its layout
    int64_t n, c, t, h, w, r = i;
    if (last) {
      c = r % out.c, r /= out.c;
      w = r % out.w, r /= out.w;
      h = r % out.h, r /= out.h;
      t = r % out.t, n = r / out.t;
    } else {
      w = r % out.w, r /= out.w;
      h = r % out.h, r /= out.h;
      t = r % out.t, r /= out.t;
      c = r % out.c, n = r / out.c;
    }
    switch (a.move) {
      case WanMove::kUpsampleNearest: y[i] = x[at(in, last, n, c, t, h / 2, w / 2)]; break;
      case WanMove::kFramesFromChannels: {
        const int64_t f = a.factor;
        y[i] = x[at(in, last, n, (t % f) * out.c + c, t / f, h, w)];
        break;
      }
      case WanMove::kPatchify: {
        const int64_t p = a.factor, pp = p * p;
        const int64_t cs = c / pp, dx = (c % pp) / p, dy = c % p;
        y[i] = x[at(in, last, n, cs, t, p * h + dy, p * w + dx)];
        break;
      }
      case WanMove::kUnpatchify: {
        const int64_t p = a.factor;
        const int64_t dy = h % p, dx = w % p;
        y[i] = x[at(in, last, n, c * p * p + dx * p + dy, t, h / p, w / p)];
        break;
      }
      case WanMove::kDupUp: {
        const int64_t ft = a.ft, fs = a.fs, f = ft * fs * fs;
        const int64_t rep = out.c * f / in.c;
        const int64_t ot = t + (a.drop_first ? ft - 1 : 0);
        const int64_t it = ot % ft, ih = h % fs, iw = w % fs;
        const int64_t k = (((c * ft + it) * fs + ih) * fs + iw) / rep;
        y[i] = x[at(in, last, n, k, ot / ft, h / fs, w / fs)];
        break;
      }
      case WanMove::kAvgDown: {
        const int64_t ft = a.ft, fs = a.fs, f = ft * fs * fs;
        const int64_t g = in.c * f / out.c;
        const int64_t pad = out.t * ft - in.t;
        float s = 0.f;
        for (int64_t k = c * g; k < c * g + g; ++k) {
          const int64_t ci = k / f, rem = k % f;
          const int64_t it = rem / (fs * fs), ih = (rem / fs) % fs, iw = rem % fs;
          const int64_t ti = t * ft + it - pad;
          if (ti < 0) continue;  // the zero frames in front
          s += to_f32(x[at(in, last, n, ci, ti, h * fs + ih, w * fs + iw)]);
        }
        y[i] = from_f32<T>(s * (1.f / static_cast<float>(g)));
        break;
      }
    }
  }
}

}  // namespace

void launch_rms_norm(const RmsNormArgs& a, Stream stream) {
  const int64_t rows = a.d.n * a.d.t * a.d.h * a.d.w;
  if (rows <= 0 || a.d.c <= 0) return;
  const float scale = sqrtf(static_cast<float>(a.d.c));
  SEEDVAE_DISPATCH_ELEM(a.type, T, {
    if (a.layout == Layout::kNDHWC) {
      constexpr int kWarpsPerBlock = 8;
      rms_last_kernel<T>
          <<<blocks_for(rows, kWarpsPerBlock), kWarpsPerBlock * dev::kWarp, 0, stream>>>(
              static_cast<const T*>(a.x), static_cast<T*>(a.y), rows, a.d.c, a.gamma, a.eps, scale,
              a.silu);
    } else {
      rms_first_kernel<T><<<blocks_for(rows), 256, 0, stream>>>(
          static_cast<const T*>(a.x), static_cast<T*>(a.y), a.d, a.gamma, a.eps, scale, a.silu);
    }
  });
}

void launch_wan_move(const WanMoveArgs& a, Stream stream) {
  const int64_t n = a.out.numel();
  if (n <= 0) return;
  SEEDVAE_DISPATCH_ELEM(a.type, T, {
    wan_move_kernel<T>
        <<<blocks_for(n), 256, 0, stream>>>(a, static_cast<const T*>(a.x), static_cast<T*>(a.y));
  });
}

}  // namespace seedvae::gpu
