// Device-wide memory use read through NVML (the driver's management library, loaded at run time):
// what nvidia-smi shows, for every process on the card, without a CUDA context and from any
// thread. The CUDA backend measures its device-level footprint with it (the baseline before its
// context exists, the context and library handles after, the peak a sampler sees during a run).
// NVML is loaded with dlopen because it ships with the driver, not with the CUDA toolkit: a build
// machine without a driver links and runs, and probes report "unavailable".
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace seedvae::gpu {

class DeviceMemoryProbe {
 public:
  // The card with this PCI bus id ("0000:65:00.0", cudaDeviceGetPCIBusId); null when NVML or the
  // card is not available (`why` says which).
  static std::shared_ptr<DeviceMemoryProbe> open(const std::string& pci_bus_id, std::string* why);
  // Used bytes of the whole card; -1 on a failed read.
  int64_t used_bytes() const;
  int64_t total_bytes() const { return total_; }

 private:
  DeviceMemoryProbe() = default;
  void* device_ = nullptr;  // nvmlDevice_t
  int64_t total_ = 0;
};

}  // namespace seedvae::gpu
