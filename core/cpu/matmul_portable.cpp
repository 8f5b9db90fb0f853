// See matmul_portable.h. Eigen evaluates `C = A * B` with its cache-blocked GEMM; called outside an
// OpenMP parallel region it splits the product over omp_get_max_threads() threads (the backend's
// ThreadScope sets that), inside one it runs on the calling thread.
#include "core/cpu/matmul_portable.h"

#include <new>
#include <string>

#include <Eigen/Core>

namespace seedvae::cpu {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Stride = Eigen::OuterStride<>;
using ConstMatMap = Eigen::Map<const RowMat, Eigen::Unaligned, Stride>;
using MatMap = Eigen::Map<RowMat, Eigen::Unaligned, Stride>;
using ConstRowMap = Eigen::Map<const Eigen::RowVectorXf>;

std::string describe(const MatmulProblem& p) {
  return "matmul [" + std::to_string(p.m) + " x " + std::to_string(p.k) + "] x [" +
         std::to_string(p.k) + " x " + std::to_string(p.n) + "]";
}

}  // namespace

MatmulPortable::MatmulPortable(PortableContext&, std::shared_ptr<MemoryCounters>) {}

Status MatmulPortable::run(const MatmulProblem& p, const float* a, const float* b,
                           const float* bias, float* c) {
  if (p.m <= 0 || p.n <= 0) return Status::ok();
  try {
    const ConstMatMap A(a, p.m, p.k, Stride(p.lda));
    MatMap C(c, p.m, p.n, Stride(p.ldc));
    if (p.b_transposed) {
      const ConstMatMap Bt(b, p.n, p.k, Stride(p.ldb));
      if (p.accumulate) {
        C.noalias() += A * Bt.transpose();
      } else {
        C.noalias() = A * Bt.transpose();
      }
    } else {
      const ConstMatMap B(b, p.k, p.n, Stride(p.ldb));
      if (p.accumulate) {
        C.noalias() += A * B;
      } else {
        C.noalias() = A * B;
      }
    }
    if (p.bias) C.rowwise() += ConstRowMap(bias, p.n);
    return Status::ok();
  } catch (const std::bad_alloc&) {
    return out_of_memory("out of memory running " + describe(p));
  }
}

}  // namespace seedvae::cpu
