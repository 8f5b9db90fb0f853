// Device queries through the CUDA runtime, cuDNN and cuBLAS. Compiled by the host compiler (no
// kernels here); CUDA headers stay inside gpu/.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "gpu/cuda_backend.h"

namespace seedvae::gpu {

std::string format_cuda_version(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string version_report() {
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);  // 0 without a driver
  auto dotted = [](int v) {       // cuDNN 9 / cuBLAS: major * 10000 + minor * 100 + patch
    return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
           std::to_string(v % 100);
  };
  int cb_major = 0, cb_minor = 0, cb_patch = 0;
  cublasGetProperty(MAJOR_VERSION, &cb_major);
  cublasGetProperty(MINOR_VERSION, &cb_minor);
  cublasGetProperty(PATCH_LEVEL, &cb_patch);
  return "CUDA runtime " + format_cuda_version(runtime) + " (built with " +
         format_cuda_version(CUDART_VERSION) + "), driver " +
         (driver ? format_cuda_version(driver) : std::string("none")) + "; cuDNN " +
         dotted(static_cast<int>(cudnnGetVersion())) + " (built with " + dotted(CUDNN_VERSION) +
         "); cuBLAS " + dotted(cb_major * 10000 + cb_minor * 100 + cb_patch) + " (built with " +
         dotted(CUBLAS_VERSION) + ")";
}

RuntimeInfo runtime_info() {
  RuntimeInfo info;
  cudaDriverGetVersion(&info.driver_version);
  cudaRuntimeGetVersion(&info.runtime_version);
  info.cudnn_version = static_cast<int>(cudnnGetVersion());
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    info.error = std::string("no usable CUDA device: ") + cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
  } else if (count == 0) {
    info.error = "no CUDA device found";
  }
  if (info.error.empty()) {
    cublasHandle_t h = nullptr;
    if (cublasCreate(&h) == CUBLAS_STATUS_SUCCESS) {
      cublasGetVersion(h, &info.cublas_version);
      cublasDestroy(h);
    }
  }
  return info;
}

std::vector<DeviceInfo> list_devices() {
  std::vector<DeviceInfo> out;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return out;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    DeviceInfo d;
    d.index = i;
    d.name = p.name;
    d.compute_major = p.major;
    d.compute_minor = p.minor;
    d.total_bytes = static_cast<int64_t>(p.totalGlobalMem);
    d.multiprocessors = p.multiProcessorCount;
    int prev = 0;
    cudaGetDevice(&prev);
    if (cudaSetDevice(i) == cudaSuccess) {
      size_t free_b = 0, total_b = 0;
      if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
        d.free_bytes = static_cast<int64_t>(free_b);
      cudaSetDevice(prev);
    }
    out.push_back(d);
  }
  return out;
}

}  // namespace seedvae::gpu
