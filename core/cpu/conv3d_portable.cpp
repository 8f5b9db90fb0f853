// See conv3d_portable.h. PyTorch equivalent: F.conv3d(x, w, b, stride, padding=0) after
// F.pad(x, (pad_left, pad_right, pad_top, pad_bottom)) (temporal padding is always 0: callers use
// causal_pad).
#include "core/cpu/conv3d_portable.h"

#include <Eigen/Core>
#include <algorithm>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "core/cpu/parallel.h"

namespace seedvae::cpu {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Stride = Eigen::OuterStride<>;
using ConstMatMap = Eigen::Map<const RowMat, Eigen::Unaligned, Stride>;
using MatMap = Eigen::Map<RowMat, Eigen::Unaligned, Stride>;

constexpr int64_t kGatherMaxK = 512;  // taps * Cin up to which a row's patches are gathered
constexpr int64_t kPackTagOdhwi = 1;  // PackDesc tag of a [cout, kt, kh, kw, cin] weight copy

std::string problem_string(const ConvProblem& pr) {
  auto s = [](int64_t v) { return std::to_string(v); };
  return "conv3d x [" + s(pr.x.n) + ", " + s(pr.x.c) + ", " + s(pr.x.t) + ", " + s(pr.x.h) + ", " +
         s(pr.x.w) + "] w [" + s(pr.cout) + ", " + s(pr.x.c) + ", " + s(pr.kt) + ", " + s(pr.kh) +
         ", " + s(pr.kw) + "]";
}

// Output columns [lo, hi) whose input column ow * stride - pad_left + dw lies inside [0, W).
void valid_columns(const ConvProblem& pr, int64_t dw, int64_t* lo, int64_t* hi) {
  const int64_t s = pr.p.stride_w, pl = pr.p.pad_left, W = pr.x.w;
  const int64_t first = pl - dw;  // smallest ow * s that is inside
  *lo = first <= 0 ? 0 : (first + s - 1) / s;
  const int64_t last = W - 1 + pl - dw;  // largest ow * s that is inside
  *hi = last < 0 ? 0 : std::min(pr.y.w, last / s + 1);
  if (*hi < *lo) *hi = *lo;
}

}  // namespace

Conv3dPortable::Conv3dPortable(PortableContext&, std::shared_ptr<MemoryCounters> counters)
    : counters_(std::move(counters)) {}

Status Conv3dPortable::run(const ConvProblem& pr, const float* x, CpuStorage& weights,
                           const float* bias, float* y) {
  const int64_t cin = pr.x.c, cout = pr.cout;
  const int64_t T = pr.x.t, H = pr.x.h, W = pr.x.w;
  const int64_t to = pr.y.t, ho = pr.y.h, wo = pr.y.w;
  const int64_t taps = pr.kt * pr.kh * pr.kw;
  const int64_t K = taps * cin;
  const int64_t out_rows = pr.y.n * to * ho;  // rows of wo output pixels
  if (out_rows == 0 || wo == 0) return Status::ok();
  const int threads = std::max(1, omp_max_threads());  // the backend's ThreadScope set it

  try {
    // Weights as [cout, taps, cin] (odhwi): channels-last storage already is; a plain (oidhw)
    // weight gets a packed copy kept on its storage (dropped when the weight is modified).
    const float* wk = weights.f32();
    if (weights.layout == Layout::kPlain && taps > 1) {
      const PackDesc want{kPackTagOdhwi};
      PackedWeight* found = nullptr;
      for (auto& pw : weights.packed) {
        if (pw.desc == want) found = &pw;
      }
      if (found == nullptr) {
        SEEDVAE_ASSIGN_OR_RETURN(
            Buffer buf,
            Buffer::allocate(cout * K * 4, counters_, "packed weights of " + problem_string(pr)));
        const float* src = weights.f32();
        float* dst = buf.f32();
        parallel_for(cout, threads, [&](int64_t o) {
          for (int64_t ci = 0; ci < cin; ++ci) {
            for (int64_t tap = 0; tap < taps; ++tap) {
              dst[(o * taps + tap) * cin + ci] = src[(o * cin + ci) * taps + tap];
            }
          }
        });
        weights.packed.push_back({want, std::move(buf)});
        found = &weights.packed.back();
      }
      wk = found->buffer.f32();
    }

    const bool gathered = K <= kGatherMaxK;
    const int team = static_cast<int>(std::min<int64_t>(threads, out_rows));
    Buffer scratch;  // gathered path: one row of patches per thread
    if (gathered) {
      SEEDVAE_ASSIGN_OR_RETURN(scratch, Buffer::allocate(team * wo * K * 4, counters_,
                                                         "patch row of " + problem_string(pr)));
    }
    std::vector<int64_t> col_lo(static_cast<size_t>(pr.kw)), col_hi(static_cast<size_t>(pr.kw));
    for (int64_t dw = 0; dw < pr.kw; ++dw) {
      valid_columns(pr, dw, &col_lo[static_cast<size_t>(dw)], &col_hi[static_cast<size_t>(dw)]);
    }

    std::vector<char> failed(static_cast<size_t>(team), 0);
    // Output row r = (nb, ot, oh): y[r * wo .. (r + 1) * wo) x cout.
    auto do_row = [&](int64_t r, int slot) {
      const int64_t oh = r % ho;
      const int64_t ot = (r / ho) % to;
      const int64_t nb = r / (ho * to);
      float* yr = y + r * wo * cout;
      MatMap Y(yr, wo, cout, Stride(cout));
      try {
        if (gathered) {
          float* cols = scratch.f32() + slot * wo * K;
          std::memset(cols, 0, static_cast<size_t>(wo * K) * sizeof(float));
          for (int64_t dt = 0; dt < pr.kt; ++dt) {
            const int64_t it = ot * pr.p.stride_t + dt;
            for (int64_t dh = 0; dh < pr.kh; ++dh) {
              const int64_t ih = oh * pr.p.stride_h - pr.p.pad_top + dh;
              if (ih < 0 || ih >= H) continue;
              const float* xrow = x + ((nb * T + it) * H + ih) * W * cin;
              for (int64_t dw = 0; dw < pr.kw; ++dw) {
                const int64_t tap = (dt * pr.kh + dh) * pr.kw + dw;
                const int64_t lo = col_lo[static_cast<size_t>(dw)];
                const int64_t hi = col_hi[static_cast<size_t>(dw)];
                for (int64_t ow = lo; ow < hi; ++ow) {
                  const int64_t iw = ow * pr.p.stride_w - pr.p.pad_left + dw;
                  std::memcpy(cols + ow * K + tap * cin, xrow + iw * cin,
                              static_cast<size_t>(cin) * sizeof(float));
                }
              }
            }
          }
          const ConstMatMap A(cols, wo, K, Stride(K));
          const ConstMatMap B(wk, cout, K, Stride(K));
          Y.noalias() = A * B.transpose();
          if (bias != nullptr) Y.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(bias, cout);
          return;
        }
        if (bias != nullptr) {
          Y.rowwise() = Eigen::Map<const Eigen::RowVectorXf>(bias, cout);
        } else {
          Y.setZero();
        }
        for (int64_t dt = 0; dt < pr.kt; ++dt) {
          const int64_t it = ot * pr.p.stride_t + dt;
          for (int64_t dh = 0; dh < pr.kh; ++dh) {
            const int64_t ih = oh * pr.p.stride_h - pr.p.pad_top + dh;
            if (ih < 0 || ih >= H) continue;  // zero padding: contributes nothing
            const float* xrow = x + ((nb * T + it) * H + ih) * W * cin;
            for (int64_t dw = 0; dw < pr.kw; ++dw) {
              const int64_t lo = col_lo[static_cast<size_t>(dw)];
              const int64_t hi = col_hi[static_cast<size_t>(dw)];
              if (hi <= lo) continue;
              const int64_t tap = (dt * pr.kh + dh) * pr.kw + dw;
              const int64_t iw = lo * pr.p.stride_w - pr.p.pad_left + dw;
              const ConstMatMap A(xrow + iw * cin, hi - lo, cin, Stride(pr.p.stride_w * cin));
              const ConstMatMap B(wk + tap * cin, cout, cin, Stride(K));
              MatMap Yv(yr + lo * cout, hi - lo, cout, Stride(cout));
              Yv.noalias() += A * B.transpose();
            }
          }
        }
      } catch (const std::bad_alloc&) {
        failed[static_cast<size_t>(slot)] = 1;
      }
    };
    if (team <= 1) {
      for (int64_t r = 0; r < out_rows; ++r) do_row(r, 0);
    } else {
#pragma omp parallel num_threads(team)
      {
#if defined(_OPENMP)
        const int slot = omp_get_thread_num();
#else
        const int slot = 0;
#endif
#pragma omp for schedule(static)
        for (int64_t r = 0; r < out_rows; ++r) do_row(r, slot);
      }
    }
    for (char f : failed) {
      if (f) return out_of_memory("out of memory in the GEMMs of " + problem_string(pr));
    }
    return Status::ok();
  } catch (const std::bad_alloc&) {
    return out_of_memory("out of memory running " + problem_string(pr));
  }
}

}  // namespace seedvae::cpu
