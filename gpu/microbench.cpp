// measure_device_rates(): the ceilings the engine's numbers are judged against.
#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "gpu/allocator.h"
#include "gpu/cublas/gemm.h"
#include "gpu/cuda_backend.h"
#include "gpu/cuda_check.h"
#include "gpu/kernels/elementwise.h"

namespace seedvae::gpu {
namespace {

struct Events {
  cudaEvent_t a = nullptr, b = nullptr;
  Events() {
    cudaEventCreate(&a);
    cudaEventCreate(&b);
  }
  ~Events() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
};

Result<double> time_ms(cudaStream_t s, int iters, const std::function<Status()>& body) {
  Events ev;
  SEEDVAE_TRY(body());  // warm-up
  SEEDVAE_TRY(body());
  SEEDVAE_CUDA_TRY(cudaStreamSynchronize(s), "warm-up");
  SEEDVAE_CUDA_TRY(cudaEventRecord(ev.a, s), "event");
  for (int i = 0; i < iters; ++i) SEEDVAE_TRY(body());
  SEEDVAE_CUDA_TRY(cudaEventRecord(ev.b, s), "event");
  SEEDVAE_CUDA_TRY(cudaEventSynchronize(ev.b), "event");
  float ms = 0;
  cudaEventElapsedTime(&ms, ev.a, ev.b);
  return double(ms) / iters;
}

}  // namespace

Result<DeviceRates> measure_device_rates(int device) {
  DeviceRates r;
  SEEDVAE_CUDA_TRY(cudaSetDevice(device), "cudaSetDevice");
  cudaDeviceProp p{};
  SEEDVAE_CUDA_TRY(cudaGetDeviceProperties(&p, device), "properties");
  r.device = p.name;
  cudaStream_t s = nullptr, s2 = nullptr;
  SEEDVAE_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  SEEDVAE_CUDA_TRY(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), "stream");
  auto alloc = std::make_shared<DeviceAllocator>(true, s);
  {
    SEEDVAE_ASSIGN_OR_RETURN(auto gemm, Gemm::create(s, alloc));
    constexpr int64_t n = 8192;
    for (ElemType t : {ElemType::kBF16, ElemType::kF16, ElemType::kF32}) {
      const int64_t es = elem_size(t);
      SEEDVAE_ASSIGN_OR_RETURN(BlockPtr a, alloc->allocate(n * n * es, "gemm A"));
      SEEDVAE_ASSIGN_OR_RETURN(BlockPtr b, alloc->allocate(n * n * es, "gemm B"));
      SEEDVAE_ASSIGN_OR_RETURN(BlockPtr c, alloc->allocate(n * n * es, "gemm C"));
      launch_fill_random(t, a->ptr, n * n, 1, s);
      launch_fill_random(t, b->ptr, n * n, 2, s);
      RowGemm g;
      g.m = g.n = g.k = n;
      g.a = a->ptr;
      g.lda = n;
      g.b = b->ptr;
      g.ldb = n;
      g.trans_b = true;
      g.d = c->ptr;
      g.ldd = n;
      g.ab_type = g.cd_type = t;
      const MathMode mm = t == ElemType::kF32 ? MathMode::kTf32 : MathMode::kStrict;
      SEEDVAE_ASSIGN_OR_RETURN(double ms, time_ms(s, 10, [&] { return gemm->run(g, mm, "gemm"); }));
      const double tf = 2.0 * n * n * n / (ms * 1e-3) / 1e12;
      (t == ElemType::kBF16  ? r.bf16_gemm_tflops
       : t == ElemType::kF16 ? r.fp16_gemm_tflops
                             : r.tf32_gemm_tflops) = tf;
    }
  }
  {
    const size_t bytes = size_t{2} << 30;
    SEEDVAE_ASSIGN_OR_RETURN(BlockPtr a, alloc->allocate(bytes, "copy A"));
    SEEDVAE_ASSIGN_OR_RETURN(BlockPtr b, alloc->allocate(bytes, "copy B"));
    launch_fill_random(ElemType::kF32, a->ptr, int64_t(bytes / 4), 3, s);
    SEEDVAE_ASSIGN_OR_RETURN(
        double ms, time_ms(s, 10, [&]() -> Status {
          SEEDVAE_CUDA_TRY(cudaMemcpyAsync(b->ptr, a->ptr, bytes, cudaMemcpyDeviceToDevice, s),
                           "d2d");
          return Status::ok();
        }));
    r.d2d_gbps = 2.0 * double(bytes) / (ms * 1e-3) / 1e9;
  }
  {
    const size_t bytes = size_t{1} << 30;
    void* h1 = nullptr;
    void* h2 = nullptr;
    SEEDVAE_CUDA_TRY(cudaMallocHost(&h1, bytes), "pinned host buffer");
    SEEDVAE_CUDA_TRY(cudaMallocHost(&h2, bytes), "pinned host buffer");
    SEEDVAE_ASSIGN_OR_RETURN(BlockPtr a, alloc->allocate(bytes, "h2d target"));
    SEEDVAE_ASSIGN_OR_RETURN(BlockPtr b, alloc->allocate(bytes, "d2h source"));
    auto h2d = time_ms(s, 5, [&]() -> Status {
      SEEDVAE_CUDA_TRY(cudaMemcpyAsync(a->ptr, h1, bytes, cudaMemcpyHostToDevice, s), "h2d");
      return Status::ok();
    });
    auto d2h = time_ms(s, 5, [&]() -> Status {
      SEEDVAE_CUDA_TRY(cudaMemcpyAsync(h2, b->ptr, bytes, cudaMemcpyDeviceToHost, s), "d2h");
      return Status::ok();
    });
    // both directions at once on two streams
    Events ev;
    cudaEventRecord(ev.a, s);
    cudaStreamWaitEvent(s2, ev.a, 0);
    for (int i = 0; i < 5; ++i) {
      cudaMemcpyAsync(a->ptr, h1, bytes, cudaMemcpyHostToDevice, s);
      cudaMemcpyAsync(h2, b->ptr, bytes, cudaMemcpyDeviceToHost, s2);
    }
    cudaEvent_t done2 = nullptr;
    cudaEventCreate(&done2);
    cudaEventRecord(done2, s2);
    cudaStreamWaitEvent(s, done2, 0);
    cudaEventRecord(ev.b, s);
    cudaEventSynchronize(ev.b);
    float ms = 0;
    cudaEventElapsedTime(&ms, ev.a, ev.b);
    cudaEventDestroy(done2);
    cudaFreeHost(h1);
    cudaFreeHost(h2);
    if (h2d) r.h2d_gbps = double(bytes) / (*h2d * 1e-3) / 1e9;
    if (d2h) r.d2h_gbps = double(bytes) / (*d2h * 1e-3) / 1e9;
    r.bidirectional_gbps = 2.0 * 5 * double(bytes) / (ms * 1e-3) / 1e9;
    cudaGetLastError();
  }
  cudaStreamDestroy(s);
  cudaStreamDestroy(s2);
  return r;
}

}  // namespace seedvae::gpu
