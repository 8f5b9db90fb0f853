// Device engines on CPU backends for the tests of jobs over several devices (the pipelined
// decode, blend tiles spread over devices: core/schedule/device_workers.h). No Qt.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/cpu/cpu_backend.h"
#include "core/pipeline/job.h"
#include "core/schedule/device_workers.h"
#include "tests/support/failing_backend.h"
#include "tests/support/tiny_model.h"

namespace seedvae::test {

// A backend whose convolutions each take `ms` longer: a slower device, so that devices finish
// their work out of order.
class SlowBackend final : public OwningForwardingBackend {
 public:
  SlowBackend(std::unique_ptr<Backend> inner, int ms)
      : OwningForwardingBackend(std::move(inner)), ms_(ms) {}
  Result<Tensor> conv3d(const Tensor& x, const Tensor& w, const Tensor& b,
                        const Conv3dParams& p) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
    return ForwardingBackend::conv3d(x, w, b, p);
  }

 private:
  int ms_;
};

struct CpuDeviceFaults {
  int fail = -1;       // this device's backend fails ...
  int fail_after = 0;  // ... after this many convolutions (-1: at creation)
  int slow = -1;       // this device's convolutions ...
  int slow_ms = 0;     // ... each take this much longer
};

// Engines of devices 1.. on CPU backends of one thread each: oneDNN picks its algorithms by the
// thread count, and every device must run the algorithms one backend would (make_first_device).
inline DeviceEngineFactory cpu_devices(const VaeWeights& weights, CpuDeviceFaults f = {}) {
  return [&weights, f](int index) -> Result<DeviceEngine> {
    if (index == f.fail && f.fail_after < 0) {
      return out_of_memory("injected: no memory for the device's engine");
    }
    DeviceEngine engine;
    SEEDVAE_ASSIGN_OR_RETURN(engine.backend, create_cpu_backend({.threads = 1}));
    if (index == f.fail) {
      engine.backend = std::make_unique<FailingBackend>(std::move(engine.backend), f.fail_after);
    }
    if (index == f.slow) {
      engine.backend = std::make_unique<SlowBackend>(std::move(engine.backend), f.slow_ms);
    }
    SEEDVAE_ASSIGN_OR_RETURN(engine.model, make_video_vae(*engine.backend, weights));
    return engine;
  };
}

// Device 0's engine, configured as cpu_devices' are.
inline Status make_first_device(TinyCpuModel& m, const VaeWeights& weights) {
  SEEDVAE_ASSIGN_OR_RETURN(m.backend, create_cpu_backend({.threads = 1}));
  SEEDVAE_ASSIGN_OR_RETURN(VaeModel model, VaeModel::create(*m.backend, weights));
  m.model.emplace(std::move(model));
  return Status::ok();
}

// Runs `job` through `session` on `devices` (RunOptions::devices), its decoded chunks into
// `frames`.
inline Status run_job_on(Session& session, JobSpec& job, const std::string& devices,
                         std::vector<HostTensor>& frames, JobResult& r) {
  job.options.devices = devices;
  JobCallbacks cb;
  cb.on_decoded = [&frames](int64_t, const HostTensor& chunk) {
    frames.push_back(chunk);
    return Status::ok();
  };
  return session.run(job, cb, r);
}

}  // namespace seedvae::test
