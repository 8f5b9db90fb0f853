// A backend whose convolutions fail from a given call on: a device failing mid-job, for the
// pipelined decode's tests (CPU and CUDA). No Qt.
#pragma once

#include <memory>
#include <utility>

#include "core/backend/forwarding_backend.h"

namespace seedvae::test {

// A ForwardingBackend that owns the backend it forwards to: the base of the test backends that
// change one op of a device's backend.
class OwningForwardingBackend : public ForwardingBackend {
 protected:
  explicit OwningForwardingBackend(std::unique_ptr<Backend> inner)
      : ForwardingBackend(*inner), owned_(std::move(inner)) {}

 private:
  std::unique_ptr<Backend> owned_;
};

class FailingBackend final : public OwningForwardingBackend {
 public:
  FailingBackend(std::unique_ptr<Backend> inner, int fail_after)
      : OwningForwardingBackend(std::move(inner)), left_(fail_after) {}
  Result<Tensor> conv3d(const Tensor& x, const Tensor& w, const Tensor& b,
                        const Conv3dParams& p) override {
    if (left_-- <= 0) return internal_error("injected device failure");
    return ForwardingBackend::conv3d(x, w, b, p);
  }

 private:
  int left_;
};

}  // namespace seedvae::test
