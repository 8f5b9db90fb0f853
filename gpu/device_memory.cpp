#include "gpu/device_memory.h"

#if defined(_WIN32)
#include "core/base/windows_lean.h"
#else
#include <dlfcn.h>
#endif

#include <mutex>

namespace seedvae::gpu {

namespace {

// The few NVML declarations used here (nvml.h is not part of the CUDA toolkit packages this
// project builds with); the ABI of these entry points is stable since NVML 2 (the _v2 names).
struct NvmlMemory {
  unsigned long long total, free, used;
};
using NvmlInit = int (*)();
using NvmlByPci = int (*)(const char*, void**);
using NvmlMemInfo = int (*)(void*, NvmlMemory*);

struct Nvml {
  bool ok = false;
  std::string error;
  NvmlByPci by_pci = nullptr;
  NvmlMemInfo mem_info = nullptr;
};

const Nvml& nvml() {
  static Nvml n;
  static std::once_flag once;
  std::call_once(once, [] {
#if defined(_WIN32)
    HMODULE lib = LoadLibraryA("nvml.dll");
    auto sym = [&](const char* name) {
      return lib ? reinterpret_cast<void*>(GetProcAddress(lib, name)) : nullptr;
    };
#else
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    auto sym = [&](const char* name) { return lib ? dlsym(lib, name) : nullptr; };
#endif
    if (!lib) {
      n.error = "NVML (the driver's libnvidia-ml) is not installed";
      return;
    }
    auto init = reinterpret_cast<NvmlInit>(sym("nvmlInit_v2"));
    n.by_pci = reinterpret_cast<NvmlByPci>(sym("nvmlDeviceGetHandleByPciBusId_v2"));
    n.mem_info = reinterpret_cast<NvmlMemInfo>(sym("nvmlDeviceGetMemoryInfo"));
    if (!init || !n.by_pci || !n.mem_info) {
      n.error = "NVML lacks nvmlInit_v2/nvmlDeviceGetHandleByPciBusId_v2/nvmlDeviceGetMemoryInfo";
      return;
    }
    if (const int rc = init(); rc != 0) {
      n.error = "nvmlInit_v2 failed (NVML error " + std::to_string(rc) + ")";
      return;
    }
    n.ok = true;  // never shut down: probes may be read until the process exits
  });
  return n;
}

}  // namespace

std::shared_ptr<DeviceMemoryProbe> DeviceMemoryProbe::open(const std::string& pci_bus_id,
                                                           std::string* why) {
  const Nvml& n = nvml();
  if (!n.ok) {
    if (why) *why = n.error;
    return nullptr;
  }
  std::shared_ptr<DeviceMemoryProbe> p(new DeviceMemoryProbe());
  if (const int rc = n.by_pci(pci_bus_id.c_str(), &p->device_); rc != 0) {
    if (why)
      *why = "NVML does not know the card " + pci_bus_id + " (error " + std::to_string(rc) + ")";
    return nullptr;
  }
  NvmlMemory m{};
  if (n.mem_info(p->device_, &m) != 0) {
    if (why) *why = "NVML cannot read the memory of " + pci_bus_id;
    return nullptr;
  }
  p->total_ = static_cast<int64_t>(m.total);
  return p;
}

int64_t DeviceMemoryProbe::used_bytes() const {
  NvmlMemory m{};
  if (nvml().mem_info(device_, &m) != 0) return -1;
  return static_cast<int64_t>(m.used);
}

}  // namespace seedvae::gpu
