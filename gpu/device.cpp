// Device queries through the CUDA runtime, cuDNN and cuBLAS. Compiled by the host compiler (no
// kernels here); CUDA headers stay inside gpu/.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <memory>

#include "gpu/cuda_backend.h"
#include "gpu/device_memory.h"

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
    // From the library's properties, not a handle: a handle would create the device's context,
    // which a backend created later must find absent to measure what its own context takes.
    int major = 0, minor = 0, patch = 0;
    if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS) {
      info.cublas_version = major * 10000 + minor * 100 + patch;
    }
  }
  return info;
}

Result<std::shared_ptr<void>> hold_device_memory(int device, int64_t leave_free_bytes) {
  if (cudaSetDevice(device) != cudaSuccess) {
    cudaGetLastError();
    return unsupported("cannot select CUDA device " + std::to_string(device));
  }
  auto blocks = std::shared_ptr<std::vector<void*>>(new std::vector<void*>, [](auto* v) {
    for (void* p : *v) cudaFree(p);
    delete v;
  });
  // In 256 MiB steps, then smaller ones, until the free memory is down to the target.
  for (int64_t step = int64_t{256} << 20; step >= (int64_t{2} << 20);) {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
      cudaGetLastError();
      return unsupported("cannot query the memory of CUDA device " + std::to_string(device));
    }
    const int64_t excess = static_cast<int64_t>(free_b) - leave_free_bytes;
    if (excess < step) {
      step /= 2;
      continue;
    }
    void* p = nullptr;
    if (cudaMalloc(&p, static_cast<size_t>(step)) != cudaSuccess) {
      cudaGetLastError();
      step /= 2;
      continue;
    }
    blocks->push_back(p);
  }
  return std::static_pointer_cast<void>(blocks);
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
    // Free memory from NVML: asking the runtime (cudaMemGetInfo) would create a context on every
    // card, about half a GiB each that stays for the process's life, on cards the user may not
    // run on. Only without NVML does the runtime answer.
    char bus[32] = {};
    std::shared_ptr<DeviceMemoryProbe> probe;
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, i) == cudaSuccess) {
      probe = DeviceMemoryProbe::open(bus, nullptr);
    } else {
      cudaGetLastError();
    }
    if (const int64_t used = probe ? probe->used_bytes() : -1; used >= 0) {
      d.free_bytes = probe->total_bytes() - used;
    } else {
      int prev = 0;
      cudaGetDevice(&prev);
      if (cudaSetDevice(i) == cudaSuccess) {
        size_t free_b = 0, total_b = 0;
        if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
          d.free_bytes = static_cast<int64_t>(free_b);
        cudaSetDevice(prev);
      }
      cudaGetLastError();
    }
    out.push_back(d);
  }
  return out;
}

}  // namespace seedvae::gpu
