// The Wan VAEs' kernels (gpu/kernels/wan.h).
//
// RMS norm (a pending convolution bias added on the fly): channels-last with rows of whole
// 16-byte vectors (C a multiple of 8 in 16 bits, of 4 in fp32), G lanes per position (G the
// smallest power of two with at most 4 vectors per lane), the row held in registers between the
// sum of squares (a shuffle reduction over the G lanes) and the scaling, so x is read once; other
// channel-last rows, one warp per position (fp32 sum of squares by warp shuffles, then a second
// pass scales); NCDHW, one thread per position walking the channels at stride T*H*W
// (neighbouring threads read neighbouring positions).
// Data movement: nearest upsampling and frames_from_channels in channels-last copy whole channel
// vectors (an output position's channels are one contiguous run of an input position's), one
// thread per 16-byte piece. The rest: one thread per output element, which computes its source
// element (or, for AvgDown3D, the g sources it averages, summed in fp32 in the CPU kernel's
// order); those run on Wan2.2's patchify and AvgDown3D, a small share of the bytes. DupUp3D in
// channels-last: a block per output position, its threads over the channels.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

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
                                const float* __restrict__ gamma, const float* __restrict__ bias,
                                float eps, float scale, bool silu) {
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / dev::kWarp);
  const int lane = threadIdx.x % dev::kWarp;
  for (int64_t r = blockIdx.x * int64_t(blockDim.x / dev::kWarp) + threadIdx.x / dev::kWarp;
       r < rows; r += warps) {
    const T* xr = x + r * C;
    T* yr = y + r * C;
    float ss = 0.f;
    for (int64_t c = lane; c < C; c += dev::kWarp) {
      const float v = to_f32(xr[c]) + (bias ? bias[c] : 0.f);
      ss = fmaf(v, v, ss);
    }
    for (int o = dev::kWarp / 2; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const float inv = 1.f / fmaxf(sqrtf(ss), eps);
    for (int64_t c = lane; c < C; c += dev::kWarp) {
      float v = (to_f32(xr[c]) + (bias ? bias[c] : 0.f)) * inv * scale;
      if (gamma) v *= gamma[c];
      yr[c] = from_f32<T>(silu ? dev::silu(v) : v);
    }
  }
}

// Channels-last, rows of V 16-byte vectors, G lanes per row, at most kMaxVec vectors per lane.
constexpr int kMaxVec = 4;
template <typename T, int G>
__global__ void rms_last_vec_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int V,
                                    const float* __restrict__ gamma, const float* __restrict__ bias,
                                    float eps, float scale, bool silu) {
  using Vec = dev::Vec16<T>;
  constexpr int N = Vec::kN;
  constexpr int kRowsPerWarp = dev::kWarp / G;
  const int lane = threadIdx.x % G;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / dev::kWarp);
  const int64_t C = int64_t(V) * N;
  // the loop is uniform per warp (rows past the end take part in the shuffles with nothing)
  for (int64_t rb = (blockIdx.x * int64_t(blockDim.x / dev::kWarp) + threadIdx.x / dev::kWarp) *
                    kRowsPerWarp;
       rb < rows; rb += warps * kRowsPerWarp) {
    const int64_t r = rb + (threadIdx.x % dev::kWarp) / G;
    const bool active = r < rows;
    const T* xr = x + r * C;
    T* yr = y + r * C;
    float v[kMaxVec][N];
    float ss = 0.f;
#pragma unroll
    for (int k = 0; k < kMaxVec; ++k) {
      const int q = lane + k * G;
      if (active && q < V) {
        const Vec in = dev::load16(xr + int64_t(q) * N);
#pragma unroll
        for (int e = 0; e < N; ++e) {
          v[k][e] = to_f32(in.v[e]) + (bias ? bias[q * N + e] : 0.f);
          ss = fmaf(v[k][e], v[k][e], ss);
        }
      }
    }
    // the G lanes of a row are aligned within the warp: reduce over them only
#pragma unroll
    for (int o = G / 2; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o, G);
    const float inv = 1.f / fmaxf(sqrtf(ss), eps) * scale;
#pragma unroll
    for (int k = 0; k < kMaxVec; ++k) {
      const int q = lane + k * G;
      if (active && q < V) {
        Vec out;
#pragma unroll
        for (int e = 0; e < N; ++e) {
          float u = v[k][e] * inv;
          if (gamma) u *= gamma[q * N + e];
          out.v[e] = from_f32<T>(silu ? dev::silu(u) : u);
        }
        dev::store16(yr + int64_t(q) * N, out);
      }
    }
  }
}

// Channels-last gathers of whole channel vectors (nearest upsampling, frames_from_channels): the
// output position (n, t, h, w) copies Q 16-byte pieces from its source position, starting at the
// source's channel c0 (frames_from_channels: (t % f) * C_out).
__global__ void wan_gather_vec_kernel(WanMoveArgs a, const uint4* __restrict__ x,
                                      uint4* __restrict__ y, int64_t Q, int64_t Qin) {
  const Dims5 in = a.in, out = a.out;
  const int64_t total = out.n * out.t * out.h * out.w * Q;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = i;
    const int64_t q = r % Q;
    r /= Q;
    const int64_t w = r % out.w;
    r /= out.w;
    const int64_t h = r % out.h;
    r /= out.h;
    const int64_t t = r % out.t, n = r / out.t;
    int64_t st = t, sh = h, sw = w, q0 = 0;
    if (a.move == WanMove::kUpsampleNearest) {
      sh = h / 2, sw = w / 2;
    } else {  // kFramesFromChannels
      st = t / a.factor, q0 = (t % a.factor) * Q;
    }
    y[i] = x[(((n * in.t + st) * in.h + sh) * in.w + sw) * Qin + q0 + q];
  }
}

// DupUp3D in channels-last: one block per output position at a time (its source position worked
// out once), the threads over its channels (coalesced writes; the reads gather from one source
// position's channels, which stay in cache).
template <typename T>
__global__ void dup_up_last_kernel(WanMoveArgs a, const T* __restrict__ x, T* __restrict__ y) {
  const Dims5 in = a.in, out = a.out;
  const int64_t ft = a.ft, fs = a.fs, f = ft * fs * fs;
  const int64_t rep = out.c * f / in.c;
  const int64_t positions = out.n * out.t * out.h * out.w;
  for (int64_t p = blockIdx.x; p < positions; p += gridDim.x) {
    int64_t r = p;
    const int64_t w = r % out.w;
    r /= out.w;
    const int64_t h = r % out.h;
    r /= out.h;
    const int64_t t = r % out.t, n = r / out.t;
    const int64_t ot = t + (a.drop_first ? ft - 1 : 0);
    const int64_t phase = ((ot % ft) * fs + h % fs) * fs + w % fs;
    const T* src = x + (((n * in.t + ot / ft) * in.h + h / fs) * in.w + w / fs) * in.c;
    T* dst = y + p * out.c;
    for (int64_t c = threadIdx.x; c < out.c; c += blockDim.x) dst[c] = src[(c * f + phase) / rep];
  }
}

template <typename T>
__global__ void rms_first_kernel(const T* __restrict__ x, T* __restrict__ y, Dims5 d,
                                 const float* __restrict__ gamma, const float* __restrict__ bias,
                                 float eps, float scale, bool silu) {
  const int64_t plane = d.t * d.h * d.w, total = d.n * plane;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = i / plane, p = i % plane;
    const T* xp = x + n * d.c * plane + p;
    T* yp = y + n * d.c * plane + p;
    float ss = 0.f;
    for (int64_t c = 0; c < d.c; ++c) {
      const float v = to_f32(xp[c * plane]) + (bias ? bias[c] : 0.f);
      ss = fmaf(v, v, ss);
    }
    const float inv = 1.f / fmaxf(sqrtf(ss), eps);
    for (int64_t c = 0; c < d.c; ++c) {
      float v = (to_f32(xp[c * plane]) + (bias ? bias[c] : 0.f)) * inv * scale;
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
  const int es = a.type == ElemType::kF32 ? 4 : 2;
  const bool vec = a.layout == Layout::kNDHWC && (a.d.c * es) % 16 == 0 &&
                   (reinterpret_cast<uintptr_t>(a.x) | reinterpret_cast<uintptr_t>(a.y)) % 16 == 0;
  const int64_t V = vec ? a.d.c * es / 16 : 0;
  int G = 1;
  while (G < dev::kWarp && G * kMaxVec < V) G *= 2;
  if (vec && G * kMaxVec >= V) {
    SEEDVAE_DISPATCH_ELEM(a.type, T, {
      constexpr int kThreads = 256;
      auto go = [&](auto lanes) {
        constexpr int kG = decltype(lanes)::value;
        rms_last_vec_kernel<T, kG><<<blocks_for(rows, kThreads / kG), kThreads, 0, stream>>>(
            static_cast<const T*>(a.x), static_cast<T*>(a.y), rows, static_cast<int>(V), a.gamma,
            a.bias, a.eps, scale, a.silu);
      };
      switch (G) {
        case 1: go(std::integral_constant<int, 1>{}); break;
        case 2: go(std::integral_constant<int, 2>{}); break;
        case 4: go(std::integral_constant<int, 4>{}); break;
        case 8: go(std::integral_constant<int, 8>{}); break;
        case 16: go(std::integral_constant<int, 16>{}); break;
        default: go(std::integral_constant<int, 32>{}); break;
      }
    });
    return;
  }
  SEEDVAE_DISPATCH_ELEM(a.type, T, {
    if (a.layout == Layout::kNDHWC) {
      constexpr int kWarpsPerBlock = 8;
      rms_last_kernel<T>
          <<<blocks_for(rows, kWarpsPerBlock), kWarpsPerBlock * dev::kWarp, 0, stream>>>(
              static_cast<const T*>(a.x), static_cast<T*>(a.y), rows, a.d.c, a.gamma, a.bias, a.eps,
              scale, a.silu);
    } else {
      rms_first_kernel<T><<<blocks_for(rows), 256, 0, stream>>>(static_cast<const T*>(a.x),
                                                                static_cast<T*>(a.y), a.d, a.gamma,
                                                                a.bias, a.eps, scale, a.silu);
    }
  });
}

void launch_wan_move(const WanMoveArgs& a, Stream stream) {
  const int64_t n = a.out.numel();
  if (n <= 0) return;
  const int es = a.type == ElemType::kF32 ? 4 : 2;
  if (a.layout == Layout::kNDHWC &&
      (a.move == WanMove::kUpsampleNearest || a.move == WanMove::kFramesFromChannels) &&
      (a.out.c * es) % 16 == 0 &&
      (reinterpret_cast<uintptr_t>(a.x) | reinterpret_cast<uintptr_t>(a.y)) % 16 == 0) {
    const int64_t Q = a.out.c * es / 16, Qin = a.in.c * es / 16;
    wan_gather_vec_kernel<<<blocks_for(n / (a.out.c) * Q), 256, 0, stream>>>(
        a, static_cast<const uint4*>(a.x), static_cast<uint4*>(a.y), Q, Qin);
    return;
  }
  if (a.layout == Layout::kNDHWC && a.move == WanMove::kDupUp) {
    const int64_t positions = n / a.out.c;
    const int threads = a.out.c >= 256 ? 256 : (a.out.c >= 128 ? 128 : 64);
    const unsigned grid = static_cast<unsigned>(std::min<int64_t>(positions, 65535 * 16));
    SEEDVAE_DISPATCH_ELEM(a.type, T, {
      dup_up_last_kernel<T>
          <<<grid, threads, 0, stream>>>(a, static_cast<const T*>(a.x), static_cast<T*>(a.y));
    });
    return;
  }
  SEEDVAE_DISPATCH_ELEM(a.type, T, {
    wan_move_kernel<T>
        <<<blocks_for(n), 256, 0, stream>>>(a, static_cast<const T*>(a.x), static_cast<T*>(a.y));
  });
}

}  // namespace seedvae::gpu
