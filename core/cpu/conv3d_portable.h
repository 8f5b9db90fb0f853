// 3-D convolution of the CPU backend without oneDNN: implicit GEMM (Eigen), fp32, on the
// channels-last activations the backend stores. Same interface and results (to fp32 round-off) as
// Conv3dOneDnn; used when the build has no oneDNN (SEEDVAE_WITH_ONEDNN=OFF, e.g. the mingw-w64
// Windows CLI). Internal to core/cpu; one instance per backend, same thread affinity as it.
//
// Method (implicit GEMM, no im2col buffer). A channels-last input frame is a [H*W, Cin] matrix, so
// for one kernel tap (dt, dh, dw) the inputs of a row of output pixels are equally spaced rows of
// that matrix (spacing stride_w * Cin floats). Each output row (n, t, h) is computed as
// bias + sum over taps of X_tap [w_valid, Cin] * W_tap^T [Cin, Cout], one Eigen GEMM per tap
// accumulating into y in place, where w_valid excludes the columns that fall into the zero
// padding (their contribution is zero, so they are simply skipped). The weight is read as
// [Cout, taps, Cin] ("odhwi"), packed once per weight and kept on its storage like oneDNN's packs.
// Output rows run in parallel on the backend's OpenMP pool (a single-threaded GEMM each). The only
// temporary is for convolutions with a tiny reduction (taps * Cin <= kGatherMaxK, e.g. conv_in
// with 3 channels), whose patches of one output row are gathered into a per-thread buffer of
// w_out * taps * Cin floats and multiplied at once. So the convolution needs no memory beyond its
// output (and the one-time weight pack), as the planner (core/schedule/planner.h) assumes.
#pragma once

#include <memory>

#include "core/base/status.h"
#include "core/cpu/cpu_storage.h"
#include "core/cpu/matmul_portable.h"
#include "core/cpu/op_problems.h"

namespace seedvae::cpu {

class Conv3dPortable {
 public:
  Conv3dPortable(PortableContext& ctx, std::shared_ptr<MemoryCounters> counters);

  // y = conv(x, weights) + bias with x and y channels-last; `weights` (either layout) may gain a
  // packed copy. Shapes were validated by the caller.
  Status run(const ConvProblem& prob, const float* x, CpuStorage& weights, const float* bias,
             float* y);

 private:
  std::shared_ptr<MemoryCounters> counters_;
};

}  // namespace seedvae::cpu
