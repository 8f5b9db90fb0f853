// Depth-to-space (einops "b (x y z c) f h w -> b c (f z) (h x) (w y)") with the optional removal
// of output frame 1 (Upsample3D's remove_head on the first chunk).
//
// Mapping: one thread per output element (NCDHW) or per 16-byte channel vector of one output
// pixel (NDHWC, where each output pixel copies a contiguous run of C channels from one input
// pixel). Pure data movement, no arithmetic.
#include <algorithm>

#include "gpu/kernels/common.cuh"
#include "gpu/kernels/resample.h"

namespace seedvae::gpu {
namespace {

template <typename T, int V>
__global__ void d2s_last_kernel(const T* __restrict__ x, T* __restrict__ y, Dims5 in, int64_t cout,
                                int z, bool drop, int64_t tout) {
  const int64_t ho = 2 * in.h, wo = 2 * in.w, cv = cout / V;
  const int64_t total = in.n * tout * ho * wo * cv;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t v = i % cv;
    int64_t r = i / cv;
    const int64_t xo = r % wo;
    r /= wo;
    const int64_t yo = r % ho;
    r /= ho;
    const int64_t fo = r % tout;
    const int64_t n = r / tout;
    const int64_t ff = (drop && fo >= 1) ? fo + 1 : fo;
    const int64_t f = ff / z, it = ff % z;
    const int64_t ih = yo & 1, iw = xo & 1, h = yo >> 1, w = xo >> 1;
    const int64_t k = ((ih * 2 + iw) * z + it) * cout + v * V;
    const T* src = x + (((n * in.t + f) * in.h + h) * in.w + w) * in.c + k;
    T* dst = y + i * V;
    if constexpr (V * sizeof(T) == 16) {
      dev::store16(dst, dev::load16(src));
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j) dst[j] = src[j];
    }
  }
}

template <typename T>
__global__ void d2s_first_kernel(const T* __restrict__ x, T* __restrict__ y, Dims5 in, int64_t cout,
                                 int z, bool drop, int64_t tout) {
  const int64_t ho = 2 * in.h, wo = 2 * in.w;
  const int64_t total = in.n * cout * tout * ho * wo;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t xo = i % wo;
    int64_t r = i / wo;
    const int64_t yo = r % ho;
    r /= ho;
    const int64_t fo = r % tout;
    r /= tout;
    const int64_t c = r % cout;
    const int64_t n = r / cout;
    const int64_t ff = (drop && fo >= 1) ? fo + 1 : fo;
    const int64_t f = ff / z, it = ff % z;
    const int64_t ih = yo & 1, iw = xo & 1, h = yo >> 1, w = xo >> 1;
    const int64_t k = ((ih * 2 + iw) * z + it) * cout + c;
    y[i] = x[(((n * in.c + k) * in.t + f) * in.h + h) * in.w + w];
  }
}

int grid_for(int64_t n) {
  return static_cast<int>(std::clamp<int64_t>(dev::ceil_div(n, 256), 1, 65535 * 8));
}

}  // namespace

void launch_depth_to_space(const DepthToSpaceArgs& a, Stream stream) {
  const int64_t cout = a.in.c / (4 * a.z);
  const int64_t tout = a.in.t * a.z - (a.drop_frame_1 ? 1 : 0);
  if (cout <= 0 || tout <= 0 || a.in.n <= 0 || a.in.h <= 0 || a.in.w <= 0) return;
  const int64_t nout = a.in.n * cout * tout * 4 * a.in.h * a.in.w;
  SEEDVAE_DISPATCH_ELEM(a.type, T, {
    const T* x = static_cast<const T*>(a.x);
    T* y = static_cast<T*>(a.y);
    if (a.layout == Layout::kNDHWC) {
      constexpr int V = 16 / sizeof(T);
      const bool al = ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) & 15) == 0;
      if (cout % V == 0 && al) {
        d2s_last_kernel<T, V>
            <<<grid_for(nout / V), 256, 0, stream>>>(x, y, a.in, cout, a.z, a.drop_frame_1, tout);
      } else {
        d2s_last_kernel<T, 1>
            <<<grid_for(nout), 256, 0, stream>>>(x, y, a.in, cout, a.z, a.drop_frame_1, tout);
      }
    } else {
      d2s_first_kernel<T>
          <<<grid_for(nout), 256, 0, stream>>>(x, y, a.in, cout, a.z, a.drop_frame_1, tout);
    }
  });
}

}  // namespace seedvae::gpu
