// Public face of the CUDA module: device queries (and, with the CUDA engine issue, the backend
// factory). Includes no CUDA header, so the CLI and tests can include it from plain C++.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace seedvae::gpu {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0, compute_minor = 0;
  int64_t total_bytes = 0;
  int64_t free_bytes = 0;
  int multiprocessors = 0;
};

struct RuntimeInfo {
  int driver_version = 0;   // e.g. 13000 for CUDA 13.0; 0 when no driver is installed
  int runtime_version = 0;  // CUDA runtime this build links
  int cudnn_version = 0;    // cuDNN runtime version (e.g. 91900), 0 if it cannot be loaded
  int cublas_version = 0;
  std::string error;        // why no device is usable, empty if at least one is
};

// Never fails: a machine without a driver or GPU yields an empty list and RuntimeInfo::error.
RuntimeInfo runtime_info();
std::vector<DeviceInfo> list_devices();
// "13.0" from 13000.
std::string format_cuda_version(int v);

}  // namespace seedvae::gpu
