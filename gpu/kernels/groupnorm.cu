// Per-frame GroupNorm (+ SiLU), fp32 statistics.
//
// PyTorch equivalent: x.permute(0,2,1,3,4).reshape(N*T, C, H, W) -> F.group_norm(G, gamma, beta,
// eps) [-> F.silu] -> back to [N, C, T, H, W]; statistics over C/G channels x H x W of one frame,
// biased variance.
//
// Three launches:
//  1. stats: per (frame, pixel chunk, channel) the sums S = sum(x - s_c) and Q = sum((x - s_c)^2)
//     in fp32, where the shift s_c is the frame's first pixel of channel c (keeps Q - S^2/n free of
//     cancellation; a pending per-channel input bias b_c cancels in x - s_c and only moves the
//     shift). NDHWC: a block covers a pixel chunk of one frame for up to 256 channel vectors
//     (16-byte loads, 4 or 8 channels per thread); NCDHW: a block covers a chunk of one channel
//     plane. One read of x.
//  2. finalize: one block per (frame, group) combines chunks and channels in fp64 (Chan's parallel
//     variance), and writes per (frame, channel) a = rstd*gamma and b = beta - mean*a.
//  3. apply: y = x*a + b (then SiLU if fused), one read of x and one write of y, 16-byte vectors.
// The unfused path (backend toggle) runs apply without SiLU and a separate SiLU kernel.
#include <algorithm>

#include "gpu/kernels/common.cuh"
#include "gpu/kernels/elementwise.h"
#include "gpu/kernels/groupnorm.h"

namespace seedvae::gpu {
namespace {

using dev::from_f32;
using dev::to_f32;
using dev::Vec16;

constexpr int kThreads = 256;

struct Plan {
  int vec = 1;         // channels per thread (NDHWC)
  int lanes = 1;       // channel vectors per block (NDHWC)
  int zgroups = 1;     // blocks along channels
  int rows = 1;        // pixel rows per block pass
  int64_t chunks = 1;  // pixel chunks per frame
  int64_t partial_floats = 0;
  int64_t coef_floats = 0;
};

Plan make_plan(const GroupNormArgs& a) {
  Plan p;
  const int64_t frames = a.d.n * a.d.t, hw = a.d.hw(), c = a.d.c;
  const int64_t target_blocks = 4LL * std::max(1, a.num_sms);
  if (a.layout == Layout::kNDHWC) {
    const int v16 = a.type == ElemType::kF32 ? 4 : 8;
    const bool al =
        ((reinterpret_cast<uintptr_t>(a.x) | reinterpret_cast<uintptr_t>(a.y)) & 15) == 0;
    p.vec = (c % v16 == 0 && al) ? v16 : 1;
    const int64_t cv = c / p.vec;
    p.lanes = static_cast<int>(std::min<int64_t>(cv, kThreads));
    p.zgroups = static_cast<int>(dev::ceil_div(cv, p.lanes));
    p.rows = kThreads / p.lanes;
    const int64_t per = frames * p.zgroups;
    const int64_t want = dev::ceil_div(target_blocks, per);
    // at least ~8 pixel rows per thread per chunk
    const int64_t max_chunks = std::max<int64_t>(1, hw / (8LL * p.rows));
    p.chunks = std::clamp<int64_t>(want, 1, max_chunks);
  } else {
    const int64_t per = frames * c;
    const int64_t want = dev::ceil_div(target_blocks, per);
    const int64_t max_chunks = std::max<int64_t>(1, hw / (8LL * kThreads));
    p.chunks = std::clamp<int64_t>(want, 1, max_chunks);
  }
  p.partial_floats = frames * p.chunks * c * 2;
  p.coef_floats = frames * c * 2;
  return p;
}

// x value used as the shift of channel c in frame f.
template <typename T>
__device__ __forceinline__ float shift_of(const T* x, Layout layout, const Dims5& d, int64_t f,
                                          int64_t c) {
  if (layout == Layout::kNDHWC) return to_f32(x[f * d.hw() * d.c + c]);
  const int64_t n = f / d.t, t = f % d.t;
  return to_f32(x[((n * d.c + c) * d.t + t) * d.hw()]);
}

template <typename T, int V>
__global__ void __launch_bounds__(kThreads)
    stats_last_kernel(const T* __restrict__ x, Dims5 d, int lanes, int rows, int64_t chunks,
                      float* __restrict__ partial) {
  __shared__ float red[kThreads * 2 * V];
  const int64_t chunk = blockIdx.x, f = blockIdx.y;
  const int tid = threadIdx.x;
  const int lane = tid % lanes, row = tid / lanes;
  const int64_t cv = int64_t(blockIdx.z) * lanes + lane;
  const int64_t hw = d.hw(), c = d.c;
  const bool active = row < rows && cv * V < c;
  float s[V], q[V], sh[V];
#pragma unroll
  for (int j = 0; j < V; ++j) s[j] = q[j] = sh[j] = 0.f;
  if (active) {
    const int64_t p0 = chunk * hw / chunks, p1 = (chunk + 1) * hw / chunks;
    const T* xf = x + f * hw * c + cv * V;
#pragma unroll
    for (int j = 0; j < V; ++j) sh[j] = to_f32(xf[j]);
    for (int64_t p = p0 + row; p < p1; p += rows) {
      if constexpr (V * sizeof(T) == 16) {
        const Vec16<T> v = dev::load16(xf + p * c);
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const float dv = to_f32(v.v[j]) - sh[j];
          s[j] += dv;
          q[j] = fmaf(dv, dv, q[j]);
        }
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const float dv = to_f32(xf[p * c + j]) - sh[j];
          s[j] += dv;
          q[j] = fmaf(dv, dv, q[j]);
        }
      }
    }
  }
#pragma unroll
  for (int j = 0; j < V; ++j) {
    red[(row * lanes + lane) * 2 * V + j] = s[j];
    red[(row * lanes + lane) * 2 * V + V + j] = q[j];
  }
  __syncthreads();
  if (row == 0 && cv * V < c) {
    for (int r = 1; r < rows; ++r) {
#pragma unroll
      for (int j = 0; j < V; ++j) {
        s[j] += red[(r * lanes + lane) * 2 * V + j];
        q[j] += red[(r * lanes + lane) * 2 * V + V + j];
      }
    }
#pragma unroll
    for (int j = 0; j < V; ++j) {
      float* out = partial + ((f * chunks + chunk) * c + cv * V + j) * 2;
      out[0] = s[j];
      out[1] = q[j];
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    stats_first_kernel(const T* __restrict__ x, Dims5 d, int64_t chunks,
                       float* __restrict__ partial) {
  __shared__ float scratch[32];
  const int64_t chunk = blockIdx.x, f = blockIdx.y, c = blockIdx.z;
  const int64_t hw = d.hw();
  const int64_t n = f / d.t, t = f % d.t;
  const T* plane = x + ((n * d.c + c) * d.t + t) * hw;
  const float sh = to_f32(plane[0]);
  const int64_t p0 = chunk * hw / chunks, p1 = (chunk + 1) * hw / chunks;
  float s = 0.f, q = 0.f;
  for (int64_t p = p0 + threadIdx.x; p < p1; p += blockDim.x) {
    const float dv = to_f32(plane[p]) - sh;
    s += dv;
    q = fmaf(dv, dv, q);
  }
  s = dev::block_sum(s, scratch);
  q = dev::block_sum(q, scratch);
  if (threadIdx.x == 0) {
    float* out = partial + ((f * chunks + chunk) * d.c + c) * 2;
    out[0] = s;
    out[1] = q;
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    finalize_kernel(const T* __restrict__ x, Dims5 d, Layout layout, int groups, float eps,
                    int64_t chunks, const float* __restrict__ partial,
                    const float* __restrict__ gamma, const float* __restrict__ beta,
                    const float* __restrict__ in_bias, float* __restrict__ coef) {
  __shared__ double scratch[32];
  const int g = blockIdx.x;
  const int64_t f = blockIdx.y;
  const int64_t cg = d.c / groups, hw = d.hw();
  const double n_c = static_cast<double>(hw);
  // pass 1: group mean
  double sum_x = 0;
  for (int64_t j = threadIdx.x; j < cg; j += blockDim.x) {
    const int64_t c = g * cg + j;
    double sc = 0;
    for (int64_t k = 0; k < chunks; ++k) sc += partial[((f * chunks + k) * d.c + c) * 2];
    const double shift =
        static_cast<double>(shift_of(x, layout, d, f, c)) + (in_bias ? in_bias[c] : 0.f);
    sum_x += shift * n_c + sc;
  }
  const double mean = dev::block_sum(sum_x, scratch) / (n_c * static_cast<double>(cg));
  // pass 2: sum of squared deviations about the group mean
  double m2 = 0;
  for (int64_t j = threadIdx.x; j < cg; j += blockDim.x) {
    const int64_t c = g * cg + j;
    double sc = 0, qc = 0;
    for (int64_t k = 0; k < chunks; ++k) {
      sc += partial[((f * chunks + k) * d.c + c) * 2];
      qc += partial[((f * chunks + k) * d.c + c) * 2 + 1];
    }
    const double shift =
        static_cast<double>(shift_of(x, layout, d, f, c)) + (in_bias ? in_bias[c] : 0.f);
    const double mean_c = shift + sc / n_c;
    const double dev_c = mean_c - mean;
    m2 += (qc - sc * sc / n_c) + n_c * dev_c * dev_c;
  }
  m2 = dev::block_sum(m2, scratch);
  double var = m2 / (n_c * static_cast<double>(cg));
  if (var < 0) var = 0;
  const double rstd = 1.0 / sqrt(var + static_cast<double>(eps));
  for (int64_t j = threadIdx.x; j < cg; j += blockDim.x) {
    const int64_t c = g * cg + j;
    const double ga = gamma ? static_cast<double>(gamma[c]) : 1.0;
    const double be = beta ? static_cast<double>(beta[c]) : 0.0;
    const double a = rstd * ga;
    const double ib = in_bias ? static_cast<double>(in_bias[c]) : 0.0;
    coef[(f * d.c + c) * 2] = static_cast<float>(a);
    coef[(f * d.c + c) * 2 + 1] = static_cast<float>(be + (ib - mean) * a);
  }
}

template <typename T, int V, bool kSilu>
// x and y may be the same buffer (in-place GroupNorm): no __restrict__ on them.
__global__ void apply_last_kernel(const T* x, T* y, int64_t nvec, int64_t c, int64_t frame_elems,
                                  const float* __restrict__ coef) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < nvec;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t e = i * V;
    const int64_t f = e / frame_elems;
    const int64_t c0 = e % c;
    const float* cf = coef + (f * c + c0) * 2;
    if constexpr (V * sizeof(T) == 16) {
      Vec16<T> v = dev::load16(x + e);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        float r = fmaf(to_f32(v.v[j]), cf[2 * j], cf[2 * j + 1]);
        if (kSilu) r = dev::silu(r);
        v.v[j] = from_f32<T>(r);
      }
      dev::store16(y + e, v);
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j) {
        float r = fmaf(to_f32(x[e + j]), cf[2 * j], cf[2 * j + 1]);
        if (kSilu) r = dev::silu(r);
        y[e + j] = from_f32<T>(r);
      }
    }
  }
}

template <typename T, bool kSilu>
__global__ void apply_first_kernel(const T* x, T* y, int64_t n, Dims5 d,
                                   const float* __restrict__ coef) {
  const int64_t hw = d.hw();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t plane = i / hw;
    const int64_t t = plane % d.t;
    const int64_t c = (plane / d.t) % d.c;
    const int64_t nn = plane / (d.t * d.c);
    const float* cf = coef + ((nn * d.t + t) * d.c + c) * 2;
    float r = fmaf(to_f32(x[i]), cf[0], cf[1]);
    if (kSilu) r = dev::silu(r);
    y[i] = from_f32<T>(r);
  }
}

int grid_for(int64_t n) {
  const int64_t b = dev::ceil_div(n, kThreads);
  return static_cast<int>(std::clamp<int64_t>(b, 1, 65535 * 8));
}

template <typename T>
void run(const GroupNormArgs& a, Stream stream) {
  const Plan p = make_plan(a);
  const int64_t frames = a.d.n * a.d.t;
  float* partial = a.workspace;
  float* coef = a.workspace + p.partial_floats;
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  if (a.layout == Layout::kNDHWC) {
    const dim3 grid(static_cast<unsigned>(p.chunks), static_cast<unsigned>(frames),
                    static_cast<unsigned>(p.zgroups));
    if (p.vec == 1) {
      stats_last_kernel<T, 1>
          <<<grid, kThreads, 0, stream>>>(x, a.d, p.lanes, p.rows, p.chunks, partial);
    } else {
      stats_last_kernel<T, 16 / sizeof(T)>
          <<<grid, kThreads, 0, stream>>>(x, a.d, p.lanes, p.rows, p.chunks, partial);
    }
  } else {
    const dim3 grid(static_cast<unsigned>(p.chunks), static_cast<unsigned>(frames),
                    static_cast<unsigned>(a.d.c));
    stats_first_kernel<T><<<grid, kThreads, 0, stream>>>(x, a.d, p.chunks, partial);
  }
  finalize_kernel<T><<<dim3(a.groups, static_cast<unsigned>(frames)), kThreads, 0, stream>>>(
      x, a.d, a.layout, a.groups, a.eps, p.chunks, partial, a.gamma, a.beta, a.in_bias, coef);
  const int64_t n = a.d.numel();
  if (a.layout == Layout::kNDHWC) {
    const int64_t frame_elems = a.d.hw() * a.d.c;
    if (p.vec == 1) {
      if (a.silu) {
        apply_last_kernel<T, 1, true>
            <<<grid_for(n), kThreads, 0, stream>>>(x, y, n, a.d.c, frame_elems, coef);
      } else {
        apply_last_kernel<T, 1, false>
            <<<grid_for(n), kThreads, 0, stream>>>(x, y, n, a.d.c, frame_elems, coef);
      }
    } else {
      constexpr int V = 16 / sizeof(T);
      if (a.silu) {
        apply_last_kernel<T, V, true>
            <<<grid_for(n / V), kThreads, 0, stream>>>(x, y, n / V, a.d.c, frame_elems, coef);
      } else {
        apply_last_kernel<T, V, false>
            <<<grid_for(n / V), kThreads, 0, stream>>>(x, y, n / V, a.d.c, frame_elems, coef);
      }
    }
  } else {
    if (a.silu) {
      apply_first_kernel<T, true><<<grid_for(n), kThreads, 0, stream>>>(x, y, n, a.d, coef);
    } else {
      apply_first_kernel<T, false><<<grid_for(n), kThreads, 0, stream>>>(x, y, n, a.d, coef);
    }
  }
}

}  // namespace

int64_t group_norm_workspace_floats(const GroupNormArgs& a) {
  const Plan p = make_plan(a);
  return p.partial_floats + p.coef_floats;
}

void launch_group_norm(const GroupNormArgs& a, Stream stream) {
  if (a.d.numel() <= 0) return;
  SEEDVAE_DISPATCH_ELEM(a.type, T, { run<T>(a, stream); });
}

}  // namespace seedvae::gpu
