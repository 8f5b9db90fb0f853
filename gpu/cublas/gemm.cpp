// cuBLASLt wrapper: row-major products mapped onto cuBLAS's column-major convention
// (D^T = op(B)^T op(A)^T), fp32 accumulation, optional bias epilogue, per-shape plan cache.
#include "gpu/cublas/gemm.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "gpu/allocator.h"
#include "gpu/cuda_check.h"
#include "gpu/kernels/elementwise.h"

namespace seedvae::gpu {
namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

cudaDataType_t cuda_type(ElemType t) {
  switch (t) {
    case ElemType::kF32: return CUDA_R_32F;
    case ElemType::kF16: return CUDA_R_16F;
    case ElemType::kBF16: return CUDA_R_16BF;
  }
  return CUDA_R_32F;
}

Status blas_status(cublasStatus_t st, const std::string& what) {
  if (st == CUBLAS_STATUS_SUCCESS) return Status::ok();
  std::string msg =
      what + ": cuBLASLt " + cublasLtGetStatusName(st) + " (" + cublasLtGetStatusString(st) + ")";
  if (st == CUBLAS_STATUS_ALLOC_FAILED) return out_of_memory(msg);
  return Status(StatusCode::kDeviceError, msg);
}

int alignment_of(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  int a = 256;
  while (a > 1 && (v % static_cast<uintptr_t>(a)) != 0) a /= 2;
  return a;
}

}  // namespace

struct Gemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr, ld = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

Result<std::unique_ptr<Gemm>> Gemm::create(Stream stream, std::shared_ptr<DeviceAllocator> alloc) {
  std::unique_ptr<Gemm> g(new Gemm());
  cublasLtHandle_t h = nullptr;
  SEEDVAE_TRY(blas_status(cublasLtCreate(&h), "creating the cuBLASLt handle"));
  g->handle_ = h;
  g->stream_ = stream;
  g->alloc_ = std::move(alloc);
  return g;
}

Gemm::~Gemm() {
  plans_.clear();
  if (handle_) cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
}

int Gemm::version() const {
  return static_cast<int>(cublasLtGetVersion());
}

Result<Gemm::Plan*> Gemm::plan_for(const RowGemm& g, MathMode math, bool with_bias,
                                   const std::string& what) {
  const int aa = alignment_of(g.a), ab = alignment_of(g.b), ac = alignment_of(g.c ? g.c : g.d),
            ad = alignment_of(g.d);
  std::string key;
  key.reserve(160);
  for (int64_t v : {g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.ldd}) key += std::to_string(v) + ",";
  key += std::to_string(g.trans_a) + std::to_string(g.trans_b) + std::to_string(with_bias) +
         std::to_string(g.beta != 0.f) + std::to_string(static_cast<int>(g.ab_type)) +
         std::to_string(static_cast<int>(g.cd_type)) + std::to_string(static_cast<int>(math)) +
         "," + std::to_string(aa) + "," + std::to_string(ab) + "," + std::to_string(ac) + "," +
         std::to_string(ad);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();  // null: no algorithm with the bias epilogue

  auto p = std::make_unique<Plan>();
  const cublasComputeType_t compute = (g.ab_type == ElemType::kF32 && math == MathMode::kTf32)
                                          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F;
  SEEDVAE_TRY(blas_status(cublasLtMatmulDescCreate(&p->desc, compute, CUDA_R_32F), what));
  // Column-major view: D^T[N, M] = X[N, K] * Y[K, M], X from B, Y from A.
  const cublasOperation_t op_x = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_y = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  SEEDVAE_TRY(blas_status(
      cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_x, sizeof op_x),
      what));
  SEEDVAE_TRY(blas_status(
      cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_y, sizeof op_y),
      what));
  if (with_bias) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    SEEDVAE_TRY(blas_status(
        cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi),
        what));
    const cudaDataType_t bt = CUDA_R_32F;
    SEEDVAE_TRY(blas_status(cublasLtMatmulDescSetAttribute(
                                p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt),
                            what));
  }
  const cudaDataType_t tab = cuda_type(g.ab_type), tcd = cuda_type(g.cd_type);
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  // X (stored B): op N -> [N x K] ld ldb; op T -> [K x N].
  SEEDVAE_TRY(blas_status(g.trans_b
                              ? cublasLtMatrixLayoutCreate(&p->la, tab, u(g.k), u(g.n), g.ldb)
                              : cublasLtMatrixLayoutCreate(&p->la, tab, u(g.n), u(g.k), g.ldb),
                          what));
  // Y (stored A): op N -> [K x M] ld lda; op T -> [M x K].
  SEEDVAE_TRY(blas_status(g.trans_a
                              ? cublasLtMatrixLayoutCreate(&p->lb, tab, u(g.m), u(g.k), g.lda)
                              : cublasLtMatrixLayoutCreate(&p->lb, tab, u(g.k), u(g.m), g.lda),
                          what));
  SEEDVAE_TRY(blas_status(
      cublasLtMatrixLayoutCreate(&p->lc, tcd, u(g.n), u(g.m), g.c ? g.ldc : g.ldd), what));
  SEEDVAE_TRY(blas_status(cublasLtMatrixLayoutCreate(&p->ld, tcd, u(g.n), u(g.m), g.ldd), what));

  cublasLtMatmulPreference_t pref = nullptr;
  SEEDVAE_TRY(blas_status(cublasLtMatmulPreferenceCreate(&pref), what));
  const uint64_t ws = kWorkspaceBytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                       sizeof ws);
  const uint32_t al[4] = {static_cast<uint32_t>(ab), static_cast<uint32_t>(aa),
                          static_cast<uint32_t>(ac), static_cast<uint32_t>(ad)};
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al[0], 4);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al[1], 4);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al[2], 4);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al[3], 4);
  cublasLtMatmulHeuristicResult_t res{};
  int count = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(handle_), p->desc, p->la, p->lb,
                                     p->lc, p->ld, pref, 1, &res, &count);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || count == 0) {
    if (with_bias) {  // remembered; the caller retries without the epilogue
      plans_.emplace(std::move(key), nullptr);
      return static_cast<Plan*>(nullptr);
    }
    return Status(StatusCode::kUnsupported,
                  what + ": cuBLASLt has no algorithm for [" + std::to_string(g.m) + " x " +
                      std::to_string(g.k) + "] x [" + std::to_string(g.k) + " x " +
                      std::to_string(g.n) + "] (" + cublasLtGetStatusName(st) + ")");
  }
  p->algo = res.algo;
  Plan* raw = p.get();
  plans_.emplace(std::move(key), std::move(p));
  return raw;
}

Status Gemm::run(const RowGemm& g, MathMode math, const std::string& what) {
  if (g.m <= 0 || g.n <= 0 || g.k <= 0) return Status::ok();
  if (!workspace_) {
    SEEDVAE_ASSIGN_OR_RETURN(workspace_, alloc_->allocate(kWorkspaceBytes, "cuBLASLt workspace"));
    workspace_bytes_ = kWorkspaceBytes;
  }
  bool bias_in_epilogue = g.bias != nullptr;
  Plan* plan = nullptr;
  if (bias_in_epilogue) {
    SEEDVAE_ASSIGN_OR_RETURN(plan, plan_for(g, math, true, what));
    if (plan == nullptr) bias_in_epilogue = false;
  }
  if (plan == nullptr) {
    SEEDVAE_ASSIGN_OR_RETURN(plan, plan_for(g, math, false, what));
    if (plan == nullptr) return internal_error(what + ": no cuBLASLt plan");
  }
  if (bias_in_epilogue) {
    const void* bp = g.bias;
    SEEDVAE_TRY(blas_status(cublasLtMatmulDescSetAttribute(
                                plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp),
                            what));
  }
  const float alpha = g.alpha, beta = g.beta;
  SEEDVAE_TRY(
      blas_status(cublasLtMatmul(static_cast<cublasLtHandle_t>(handle_), plan->desc, &alpha, g.b,
                                 plan->la, g.a, plan->lb, &beta, g.c ? g.c : g.d, plan->lc, g.d,
                                 plan->ld, &plan->algo, workspace_->ptr, workspace_bytes_, stream_),
                  what + " (" + std::to_string(g.m) + " x " + std::to_string(g.n) + " x " +
                      std::to_string(g.k) + ")"));
  if (g.bias != nullptr && !bias_in_epilogue) {
    if (g.ldd != g.n) return internal_error(what + ": bias without epilogue needs a dense output");
    Dims5 d;
    d.c = g.n;
    d.h = g.m;
    launch_add_bias(g.cd_type, Layout::kNDHWC, g.d, g.bias, d, stream_);
    SEEDVAE_TRY(check_launch(what + " bias"));
  }
  return Status::ok();
}

}  // namespace seedvae::gpu
