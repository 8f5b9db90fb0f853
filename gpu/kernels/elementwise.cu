// Elementwise and layout kernels (see elementwise.h).
//
// PyTorch equivalents: acc.add_(x); y.add_(bias.view(1, C, 1, 1, 1)); F.silu(y, inplace=True);
// x.to(dtype); x.permute(0, 2, 3, 4, 1).contiguous() (and back); F.pad(x, (l, r, t, b)).
// Mapping: grid-stride loops, one thread per 16-byte vector where sizes and alignment allow
// (4 floats or 8 halves), else one element. Arithmetic in fp32, one rounding per output.
// Transpose: 32x32 tiles through shared memory (fp32 tile, +1 column padding against bank
// conflicts), reads coalesced along the source's fastest axis, writes along the destination's.
#include <cuda_fp8.h>

#include "gpu/kernels/common.cuh"
#include "gpu/kernels/elementwise.h"

namespace seedvae::gpu {
namespace {

using dev::from_f32;
using dev::to_f32;
using dev::Vec16;

int grid_for(int64_t n, int threads = 256) {
  const int64_t b = dev::ceil_div(n, threads);
  return static_cast<int>(b < 1 ? 1 : (b > 65535 * 8 ? 65535 * 8 : b));
}

bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

template <typename T>
__global__ void add_vec_kernel(T* acc, const T* x, int64_t nvec) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < nvec;
       i += int64_t(gridDim.x) * blockDim.x) {
    Vec16<T> a = dev::load16(acc + i * Vec16<T>::kN);
    const Vec16<T> b = dev::load16(x + i * Vec16<T>::kN);
#pragma unroll
    for (int j = 0; j < Vec16<T>::kN; ++j) a.v[j] = from_f32<T>(to_f32(a.v[j]) + to_f32(b.v[j]));
    dev::store16(acc + i * Vec16<T>::kN, a);
  }
}

template <typename T>
__global__ void add_scalar_kernel(T* acc, const T* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    acc[i] = from_f32<T>(to_f32(acc[i]) + to_f32(x[i]));
  }
}

template <typename T>
__global__ void bias_last_vec_kernel(T* y, const float* bias, int64_t nvec, int64_t c) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < nvec;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t e = i * Vec16<T>::kN;
    const int64_t c0 = e % c;
    Vec16<T> a = dev::load16(y + e);
#pragma unroll
    for (int j = 0; j < Vec16<T>::kN; ++j) a.v[j] = from_f32<T>(to_f32(a.v[j]) + bias[c0 + j]);
    dev::store16(y + e, a);
  }
}

// inner = number of contiguous elements sharing one channel (T*H*W for NCDHW, 1 for NDHWC).
template <typename T>
__global__ void bias_scalar_kernel(T* y, const float* bias, int64_t n, int64_t c, int64_t inner) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    y[i] = from_f32<T>(to_f32(y[i]) + bias[(i / inner) % c]);
  }
}

template <typename T>
__global__ void silu_kernel(T* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    y[i] = from_f32<T>(dev::silu(to_f32(y[i])));
  }
}

template <typename S, typename D>
__global__ void convert_kernel(const S* src, D* dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    dst[i] = from_f32<D>(to_f32(src[i]));
  }
}

// inner as in bias_scalar_kernel; bias may be null.
template <typename S, typename D>
__global__ void convert_bias_kernel(const S* src, D* dst, const float* bias, int64_t n, int64_t c,
                                    int64_t inner) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    dst[i] = from_f32<D>(to_f32(src[i]) + (bias ? bias[(i / inner) % c] : 0.f));
  }
}

// grid: x over tiles of S (up to 2^31 - 1 blocks), y over tiles of C, z over the batch.
// to_last: src [B, C, S] (s fastest) -> dst [B, S, C]. Otherwise src [B, S, C] -> dst [B, C, S].
template <typename S, typename D>
__global__ void transpose_kernel(const S* src, D* dst, int64_t c, int64_t s, bool to_last) {
  __shared__ float tile[32][33];
  const int64_t b = blockIdx.z;
  const int tx = threadIdx.x, ty = threadIdx.y;  // 32 x 8
  const int64_t base = b * c * s;
  const int64_t s0 = int64_t(blockIdx.x) * 32, c0 = int64_t(blockIdx.y) * 32;
  if (to_last) {
    for (int j = ty; j < 32; j += 8) {
      const int64_t cc = c0 + j, ss = s0 + tx;
      tile[j][tx] = (cc < c && ss < s) ? to_f32(src[base + cc * s + ss]) : 0.f;
    }
    __syncthreads();
    for (int j = ty; j < 32; j += 8) {
      const int64_t ss = s0 + j, cc = c0 + tx;
      if (ss < s && cc < c) dst[base + ss * c + cc] = from_f32<D>(tile[tx][j]);
    }
  } else {
    for (int j = ty; j < 32; j += 8) {
      const int64_t ss = s0 + j, cc = c0 + tx;
      tile[j][tx] = (ss < s && cc < c) ? to_f32(src[base + ss * c + cc]) : 0.f;
    }
    __syncthreads();
    for (int j = ty; j < 32; j += 8) {
      const int64_t cc = c0 + j, ss = s0 + tx;
      if (cc < c && ss < s) dst[base + cc * s + ss] = from_f32<D>(tile[tx][j]);
    }
  }
}

// Channels-last padding, one thread per (output pixel, channel vector of V elements).
template <typename T, int V>
__global__ void pad_last_kernel(const T* x, T* y, int64_t frames, int64_t h, int64_t w, int64_t c,
                                int top, int left, int64_t ho, int64_t wo) {
  const int64_t cv = c / V;
  const int64_t total = frames * ho * wo * cv;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t v = i % cv;
    int64_t r = i / cv;
    const int64_t xo = r % wo;
    r /= wo;
    const int64_t yo = r % ho;
    const int64_t f = r / ho;
    const int64_t yi = yo - top, xi = xo - left;
    T* dst = y + ((f * ho + yo) * wo + xo) * c + v * V;
    if (yi >= 0 && yi < h && xi >= 0 && xi < w) {
      const T* src = x + ((f * h + yi) * w + xi) * c + v * V;
      if constexpr (V * sizeof(T) == 16) {
        dev::store16(dst, dev::load16(src));
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j) dst[j] = src[j];
      }
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j) dst[j] = from_f32<T>(0.f);
    }
  }
}

// Channels-first padding: planes = N*C*T planes of h x w.
template <typename T>
__global__ void pad_first_kernel(const T* x, T* y, int64_t planes, int64_t h, int64_t w, int top,
                                 int left, int64_t ho, int64_t wo) {
  const int64_t total = planes * ho * wo;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t xo = i % wo;
    const int64_t yo = (i / wo) % ho;
    const int64_t p = i / (wo * ho);
    const int64_t yi = yo - top, xi = xo - left;
    y[i] = (yi >= 0 && yi < h && xi >= 0 && xi < w) ? x[(p * h + yi) * w + xi] : from_f32<T>(0.f);
  }
}

template <typename T>
__global__ void pad_channels_kernel(const T* x, int64_t src_c, T* y, int64_t dst_c, int64_t rows) {
  const int64_t total = rows * dst_c;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = i % dst_c, r = i / dst_c;
    y[i] = c < src_c ? x[r * src_c + c] : from_f32<T>(0.f);
  }
}

// inner = contiguous elements sharing a channel (1 for NDHWC), c channels.
template <typename T, int V>
__global__ void add_biased_kernel(T* acc, const float* ab, const T* x, const float* xb, int64_t n,
                                  int64_t c, int64_t inner) {
  const int64_t nv = n / V;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < nv;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t e = i * V;
    if constexpr (V * sizeof(T) == 16) {
      Vec16<T> a = dev::load16(acc + e);
      const Vec16<T> b = dev::load16(x + e);
      const int64_t c0 = (e / inner) % c;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const int64_t cc = inner == 1 ? c0 + j : c0;
        float r = to_f32(a.v[j]) + to_f32(b.v[j]);
        if (ab) r += ab[cc];
        if (xb) r += xb[cc];
        a.v[j] = from_f32<T>(r);
      }
      dev::store16(acc + e, a);
    } else {
      const int64_t cc = (e / inner) % c;
      float r = to_f32(acc[e]) + to_f32(x[e]);
      if (ab) r += ab[cc];
      if (xb) r += xb[cc];
      acc[e] = from_f32<T>(r);
    }
  }
}

template <typename T>
__global__ void fill_random_kernel(T* y, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint64_t z = seed + (uint64_t(i) + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    y[i] = from_f32<T>(float(z >> 40) * (2.f / 16777216.f) - 1.f);
  }
}

}  // namespace

void launch_fill_random(ElemType t, void* dst, int64_t n, uint64_t seed, Stream stream) {
  if (n <= 0) return;
  SEEDVAE_DISPATCH_ELEM(t, T, {
    fill_random_kernel<T><<<grid_for(n), 256, 0, stream>>>(static_cast<T*>(dst), n, seed);
  });
}

void launch_pad_channels(ElemType t, const void* src, int64_t src_c, void* dst, int64_t dst_c,
                         int64_t rows, Stream stream) {
  if (rows <= 0 || dst_c <= 0) return;
  SEEDVAE_DISPATCH_ELEM(t, T, {
    pad_channels_kernel<T><<<grid_for(rows * dst_c), 256, 0, stream>>>(
        static_cast<const T*>(src), src_c, static_cast<T*>(dst), dst_c, rows);
  });
}

void launch_add_inplace(ElemType t, void* acc, const void* x, int64_t n, Stream stream) {
  if (n <= 0) return;
  SEEDVAE_DISPATCH_ELEM(t, T, {
    constexpr int V = Vec16<T>::kN;
    if (n % V == 0 && aligned16(acc) && aligned16(x)) {
      add_vec_kernel<T><<<grid_for(n / V), 256, 0, stream>>>(static_cast<T*>(acc),
                                                             static_cast<const T*>(x), n / V);
    } else {
      add_scalar_kernel<T>
          <<<grid_for(n), 256, 0, stream>>>(static_cast<T*>(acc), static_cast<const T*>(x), n);
    }
  });
}

void launch_add_biased(ElemType t, Layout layout, void* acc, const float* acc_bias, const void* x,
                       const float* x_bias, const Dims5& d, Stream stream) {
  const int64_t n = d.numel();
  if (n <= 0) return;
  const int64_t inner = layout == Layout::kNDHWC ? 1 : d.t * d.h * d.w;
  SEEDVAE_DISPATCH_ELEM(t, T, {
    constexpr int V = Vec16<T>::kN;
    const bool vec = aligned16(acc) && aligned16(x) &&
                     (layout == Layout::kNDHWC ? d.c % V == 0 : inner % V == 0);
    if (vec) {
      add_biased_kernel<T, V><<<grid_for(n / V), 256, 0, stream>>>(
          static_cast<T*>(acc), acc_bias, static_cast<const T*>(x), x_bias, n, d.c, inner);
    } else {
      add_biased_kernel<T, 1><<<grid_for(n), 256, 0, stream>>>(
          static_cast<T*>(acc), acc_bias, static_cast<const T*>(x), x_bias, n, d.c, inner);
    }
  });
}

void launch_add_bias(ElemType t, Layout layout, void* y, const float* bias, const Dims5& d,
                     Stream stream) {
  const int64_t n = d.numel();
  if (n <= 0) return;
  SEEDVAE_DISPATCH_ELEM(t, T, {
    constexpr int V = Vec16<T>::kN;
    if (layout == Layout::kNDHWC) {
      if (d.c % V == 0 && aligned16(y)) {
        bias_last_vec_kernel<T>
            <<<grid_for(n / V), 256, 0, stream>>>(static_cast<T*>(y), bias, n / V, d.c);
      } else {
        bias_scalar_kernel<T><<<grid_for(n), 256, 0, stream>>>(static_cast<T*>(y), bias, n, d.c, 1);
      }
    } else {
      bias_scalar_kernel<T>
          <<<grid_for(n), 256, 0, stream>>>(static_cast<T*>(y), bias, n, d.c, d.t * d.h * d.w);
    }
  });
}

void launch_silu_inplace(ElemType t, void* y, int64_t n, Stream stream) {
  if (n <= 0) return;
  SEEDVAE_DISPATCH_ELEM(
      t, T, { silu_kernel<T><<<grid_for(n), 256, 0, stream>>>(static_cast<T*>(y), n); });
}

void launch_convert(ElemType src_t, const void* src, ElemType dst_t, void* dst, int64_t n,
                    Stream stream) {
  if (n <= 0) return;
  SEEDVAE_DISPATCH_ELEM(src_t, S, {
    SEEDVAE_DISPATCH_ELEM(dst_t, D, {
      convert_kernel<S, D>
          <<<grid_for(n), 256, 0, stream>>>(static_cast<const S*>(src), static_cast<D*>(dst), n);
    });
  });
}

void launch_convert_bias(ElemType src_t, const void* src, ElemType dst_t, void* dst,
                         const float* bias, Layout layout, const Dims5& d, Stream stream) {
  const int64_t n = d.numel();
  if (n <= 0) return;
  const int64_t inner = layout == Layout::kNDHWC ? 1 : d.t * d.h * d.w;
  SEEDVAE_DISPATCH_ELEM(src_t, S, {
    SEEDVAE_DISPATCH_ELEM(dst_t, D, {
      convert_bias_kernel<S, D><<<grid_for(n), 256, 0, stream>>>(
          static_cast<const S*>(src), static_cast<D*>(dst), bias, n, d.c, inner);
    });
  });
}

// Largest |x| per row: block-local maxima, then one atomicMax per block on the float's bits
// (non-negative floats order like their bit patterns). NaN is ignored (fmaxf).
template <typename T>
__global__ void row_amax_kernel(const T* x, int64_t len, float* amax) {
  const T* row = x + blockIdx.y * len;
  float m = 0.f;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < len;
       i += int64_t(gridDim.x) * blockDim.x) {
    m = fmaxf(m, fabsf(to_f32(row[i])));
  }
  for (int o = dev::kWarp / 2; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  __shared__ float warp_max[32];
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (unsigned w = 1; w < blockDim.x / 32; ++w) m = fmaxf(m, warp_max[w]);
    atomicMax(reinterpret_cast<int*>(amax + blockIdx.y), __float_as_int(m));
  }
}

__global__ void e4m3_scales_kernel(const float* amax, float* scale, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float a = amax[i];
    // the same expression as the host's fake_quantize_e4m3 (core/backend/fp8_numerics.cpp)
    scale[i] = a > 0.f && isfinite(a) ? __fdiv_rn(a, 448.f) : 1.f;
  }
}

template <typename T>
__global__ void quantize_e4m3_kernel(const T* src, __nv_fp8_storage_t* dst, int64_t n,
                                     const float* scale, int64_t row) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    dst[i] =
        __nv_cvt_float_to_fp8(__fdiv_rn(to_f32(src[i]), scale[i / row]), __NV_SATFINITE, __NV_E4M3);
  }
}

void launch_row_amax(ElemType t, const void* x, int64_t rows, int64_t len, float* amax,
                     Stream stream) {
  if (rows <= 0) return;
  cudaMemsetAsync(amax, 0, rows * sizeof(float), stream);
  if (len <= 0) return;
  const int64_t per_row = dev::ceil_div(len, 256);
  const dim3 grid(static_cast<unsigned>(per_row < 1024 ? per_row : 1024),
                  static_cast<unsigned>(rows));
  SEEDVAE_DISPATCH_ELEM(
      t, T, { row_amax_kernel<T><<<grid, 256, 0, stream>>>(static_cast<const T*>(x), len, amax); });
}

void launch_e4m3_scales(const float* amax, float* scale, int64_t n, Stream stream) {
  if (n <= 0) return;
  e4m3_scales_kernel<<<grid_for(n), 256, 0, stream>>>(amax, scale, n);
}

void launch_quantize_e4m3(ElemType src_t, const void* src, void* dst, int64_t n, const float* scale,
                          int64_t row, Stream stream) {
  if (n <= 0 || row <= 0) return;
  SEEDVAE_DISPATCH_ELEM(src_t, T, {
    quantize_e4m3_kernel<T><<<grid_for(n), 256, 0, stream>>>(
        static_cast<const T*>(src), static_cast<__nv_fp8_storage_t*>(dst), n, scale, row);
  });
}

void launch_transpose(ElemType src_t, const void* src, ElemType dst_t, void* dst, int64_t b,
                      int64_t c, int64_t s, bool to_last, Stream stream) {
  if (b <= 0 || c <= 0 || s <= 0) return;
  const dim3 block(32, 8);
  const dim3 grid(static_cast<unsigned>(dev::ceil_div(s, 32)),
                  static_cast<unsigned>(dev::ceil_div(c, 32)), static_cast<unsigned>(b));
  SEEDVAE_DISPATCH_ELEM(src_t, S, {
    SEEDVAE_DISPATCH_ELEM(dst_t, D, {
      transpose_kernel<S, D><<<grid, block, 0, stream>>>(static_cast<const S*>(src),
                                                         static_cast<D*>(dst), c, s, to_last);
    });
  });
}

void launch_pad_hw(const PadArgs& a, Stream stream) {
  const int64_t ho = a.in.h + a.top + a.bottom, wo = a.in.w + a.left + a.right;
  SEEDVAE_DISPATCH_ELEM(a.type, T, {
    const T* x = static_cast<const T*>(a.x);
    T* y = static_cast<T*>(a.y);
    if (a.layout == Layout::kNDHWC) {
      constexpr int V = Vec16<T>::kN;
      const int64_t frames = a.in.n * a.in.t;
      if (a.in.c % V == 0 && aligned16(x) && aligned16(y)) {
        pad_last_kernel<T, V><<<grid_for(frames * ho * wo * (a.in.c / V)), 256, 0, stream>>>(
            x, y, frames, a.in.h, a.in.w, a.in.c, a.top, a.left, ho, wo);
      } else {
        pad_last_kernel<T, 1><<<grid_for(frames * ho * wo * a.in.c), 256, 0, stream>>>(
            x, y, frames, a.in.h, a.in.w, a.in.c, a.top, a.left, ho, wo);
      }
    } else {
      const int64_t planes = a.in.n * a.in.c * a.in.t;
      pad_first_kernel<T><<<grid_for(planes * ho * wo), 256, 0, stream>>>(
          x, y, planes, a.in.h, a.in.w, a.top, a.left, ho, wo);
    }
  });
}

}  // namespace seedvae::gpu
