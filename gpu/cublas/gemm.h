// cuBLASLt matrix products for the CUDA backend (attention projections and scores, 1x1x1
// convolutions). Row-major helpers on top of one cached cublasLtMatmul wrapper; the matmul
// descriptor, layouts and the heuristic's algorithm are cached per shape key on the owning thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "core/base/status.h"
#include "gpu/kernels/kernel_args.h"

namespace seedvae::gpu {

class DeviceAllocator;
struct DeviceBlock;

enum class MathMode : uint8_t {
  kStrict,  // fp32 inputs: plain fp32 FMA; half inputs: fp32 accumulation
  kTf32,    // fp32 inputs may use TF32 tensor cores
};

// Row-major product D[M, N] = alpha * op(A) op(B) + beta * C (+ bias[N] broadcast over rows),
// where op(A) is A[M, K] (lda) or, with trans_a, A stored [K, M]; op(B) is B[K, N] (ldb) or, with
// trans_b, B stored [N, K] (the PyTorch Linear weight case: y = x W^T -> trans_b = true).
struct RowGemm {
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t lda = 0;
  bool trans_a = false;
  const void* b = nullptr;
  int64_t ldb = 0;
  bool trans_b = false;
  const void* c = nullptr;  // may be null when beta == 0; may differ from d
  int64_t ldc = 0;
  void* d = nullptr;
  int64_t ldd = 0;
  float alpha = 1.f, beta = 0.f;
  const float* bias = nullptr;  // [N] fp32, optional
  ElemType ab_type = ElemType::kF32;
  ElemType cd_type = ElemType::kF32;
};

class Gemm {
 public:
  static Result<std::unique_ptr<Gemm>> create(Stream stream,
                                              std::shared_ptr<DeviceAllocator> alloc);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // `what` names the product in error messages.
  Status run(const RowGemm& g, MathMode math, const std::string& what);
  int version() const;

 private:
  Gemm() = default;
  struct Plan;
  Result<Plan*> plan_for(const RowGemm& g, MathMode math, bool with_bias, const std::string& what);

  void* handle_ = nullptr;  // cublasLtHandle_t
  Stream stream_ = nullptr;
  std::shared_ptr<DeviceAllocator> alloc_;
  std::shared_ptr<DeviceBlock> workspace_;
  size_t workspace_bytes_ = 0;
  std::map<std::string, std::unique_ptr<Plan>> plans_;
};

}  // namespace seedvae::gpu
