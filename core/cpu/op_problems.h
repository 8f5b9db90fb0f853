// The problem descriptions of the CPU backend's convolutions and matrix products, shared by both
// implementations (oneDNN: conv3d_onednn/matmul_onednn; portable: conv3d_portable/
// matmul_portable; gemm_engine.h picks one per build). Internal to core/cpu.
#pragma once

#include <cstdint>

#include "core/backend/backend.h"
#include "core/cpu/kernels.h"

namespace seedvae::cpu {

// One convolution problem: x [n, cin, t, h, w] * w [cout, cin, kt, kh, kw] (+ bias) -> y.
struct ConvProblem {
  Dims5 x, y;
  int64_t cout = 0, kt = 0, kh = 0, kw = 0;
  Conv3dParams p;
  bool has_bias = false;
};

// C[m, n] (row stride ldc) = A[m, k] (row stride lda) * op(B) (+ bias[n]) (+ C if accumulate),
// op(B) = B [k, n] (row stride ldb) or, with b_transposed, the transpose of B [n, k] (row stride
// ldb) -- the layout of a Linear weight [out, in].
struct MatmulProblem {
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  bool b_transposed = false;
  bool bias = false;
  bool accumulate = false;
};

}  // namespace seedvae::cpu
