// im2col, tap gathering and bias+convert for the few-channel convolutions (see conv_small.h).
//
// PyTorch equivalent: F.conv3d(x, w, b, stride, padding) for Cin or Cout <= 8.
// im2col: one thread per output pixel writing its K values (k = tap * Cin + ci, the KRSC weight
// row order; zero outside the input and for k >= taps * Cin) as 16-byte vectors.
// Tap gather: one thread per output pixel; the products' columns are ordered (kh, kw, kt, co), so
// each spatial neighbour contributes a contiguous run; sums for every temporal tap kt go to output
// frame frame - kt when it exists (fp32).
#include <algorithm>

#include "gpu/kernels/common.cuh"
#include "gpu/kernels/conv_small.h"

namespace seedvae::gpu {
namespace {

using dev::from_f32;
using dev::to_f32;

int grid_for(int64_t n) {
  return static_cast<int>(std::clamp<int64_t>(dev::ceil_div(n, 256), 1, 65535 * 8));
}

// One thread per output pixel: builds its K = kp values in registers, V at a time, and stores them
// as 16-byte vectors (kp is a multiple of V).
template <typename T>
__global__ void im2col_kernel(Im2colArgs a) {
  constexpr int V = 16 / sizeof(T);
  const T* x = static_cast<const T*>(a.x);
  T* col = static_cast<T*>(a.col);
  const int64_t pixels = a.frames * a.ho * a.wo;
  const int64_t kreal = int64_t(a.kt) * a.kh * a.kw * a.cin;
  for (int64_t p = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; p < pixels;
       p += int64_t(gridDim.x) * blockDim.x) {
    const int64_t xo = p % a.wo;
    const int64_t yo = (p / a.wo) % a.ho;
    const int64_t to = a.t0 + p / (a.wo * a.ho);
    T* dst = col + p * a.kp;
    for (int64_t k0 = 0; k0 < a.kp; k0 += V) {
      dev::Vec16<T> v;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const int64_t k = k0 + j;
        float val = 0.f;
        if (k < kreal) {
          const int64_t ci = k % a.cin;
          int64_t tap = k / a.cin;
          const int kwi = static_cast<int>(tap % a.kw);
          tap /= a.kw;
          const int khi = static_cast<int>(tap % a.kh);
          const int kti = static_cast<int>(tap / a.kh);
          const int64_t ti = to * a.st + kti;
          const int64_t yi = yo * a.sh + khi - a.ph;
          const int64_t xi = xo * a.sw + kwi - a.pw;
          if (yi >= 0 && yi < a.h && xi >= 0 && xi < a.w) {
            val = to_f32(x[((ti * a.h + yi) * a.w + xi) * a.cin + ci]);
          }
        }
        v.v[j] = from_f32<T>(val);
      }
      dev::store16(dst + k0, v);
    }
  }
}

// One thread per output pixel. The products' columns are ordered (kh, kw, kt, co), so each of the
// kh x kw neighbours contributes one contiguous run of kt * cout values.
template <int KT, int CO>
__global__ void tap_gather_kernel(TapGatherArgs a) {
  const int64_t total = a.ho * a.wo;
  for (int64_t p = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; p < total;
       p += int64_t(gridDim.x) * blockDim.x) {
    const int64_t xo = p % a.wo, yo = p / a.wo;
    float s[KT][CO];
#pragma unroll
    for (int i = 0; i < KT; ++i)
#pragma unroll
      for (int c = 0; c < CO; ++c) s[i][c] = 0.f;
    for (int khi = 0; khi < a.kh; ++khi) {
      const int64_t yi = yo + khi - a.ph;
      if (yi < 0 || yi >= a.h) continue;
      for (int kwi = 0; kwi < a.kw; ++kwi) {
        const int64_t xi = xo + kwi - a.pw;
        if (xi < 0 || xi >= a.w) continue;
        const float* row = a.y + (yi * a.w + xi) * a.ldy + (int64_t(khi) * a.kw + kwi) * KT * CO;
#pragma unroll
        for (int i = 0; i < KT; ++i)
#pragma unroll
          for (int c = 0; c < CO; ++c) s[i][c] += row[i * CO + c];
      }
    }
#pragma unroll
    for (int i = 0; i < KT; ++i) {
      const int64_t to = a.frame - i;
      if (to < 0 || to >= a.t_out) continue;
      float* out = a.acc + (to * a.ho * a.wo + p) * CO;
#pragma unroll
      for (int c = 0; c < CO; ++c) out[c] += s[i][c];
    }
  }
}

template <typename T>
__global__ void bias_convert_kernel(const float* acc, const float* bias, int64_t n, int64_t c,
                                    T* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = from_f32<T>(acc[i] + (bias ? bias[i % c] : 0.f));
  }
}

}  // namespace

void launch_im2col(const Im2colArgs& a, Stream stream) {
  const int64_t total = a.frames * a.ho * a.wo;
  if (total <= 0) return;
  SEEDVAE_DISPATCH_ELEM(a.type, T, { im2col_kernel<T><<<grid_for(total), 256, 0, stream>>>(a); });
}

template <int KT>
void gather_kt(const TapGatherArgs& a, Stream stream, int64_t total) {
  switch (a.cout) {
    case 1: tap_gather_kernel<KT, 1><<<grid_for(total), 256, 0, stream>>>(a); break;
    case 2: tap_gather_kernel<KT, 2><<<grid_for(total), 256, 0, stream>>>(a); break;
    case 3: tap_gather_kernel<KT, 3><<<grid_for(total), 256, 0, stream>>>(a); break;
    case 4: tap_gather_kernel<KT, 4><<<grid_for(total), 256, 0, stream>>>(a); break;
    case 5: tap_gather_kernel<KT, 5><<<grid_for(total), 256, 0, stream>>>(a); break;
    case 6: tap_gather_kernel<KT, 6><<<grid_for(total), 256, 0, stream>>>(a); break;
    case 7: tap_gather_kernel<KT, 7><<<grid_for(total), 256, 0, stream>>>(a); break;
    default: break;
  }
}

bool tap_gather_supported(int kt, int64_t cout) {
  return kt >= 1 && kt <= 3 && cout >= 1 && cout <= 7;
}

void launch_tap_gather(const TapGatherArgs& a, Stream stream) {
  const int64_t total = a.ho * a.wo;
  if (total <= 0) return;
  switch (a.kt) {
    case 1: gather_kt<1>(a, stream, total); break;
    case 2: gather_kt<2>(a, stream, total); break;
    case 3: gather_kt<3>(a, stream, total); break;
    default: break;
  }
}

void launch_bias_convert(const float* acc, const float* bias, int64_t rows, int64_t c, ElemType t,
                         void* out, Stream stream) {
  const int64_t n = rows * c;
  if (n <= 0) return;
  SEEDVAE_DISPATCH_ELEM(t, T, {
    bias_convert_kernel<T><<<grid_for(n), 256, 0, stream>>>(acc, bias, n, c, static_cast<T*>(out));
  });
}

}  // namespace seedvae::gpu
