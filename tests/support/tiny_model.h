// The model most engine tests run: the tiny configuration with synthetic weights on a CPU backend.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include "core/backend/backend.h"
#include "core/base/status.h"
#include "core/cpu/cpu_backend.h"
#include "core/vae/state_dict.h"
#include "core/vae/vae_model.h"

namespace seedvae::test {

struct TinyCpuModel {
  std::unique_ptr<Backend> backend;
  std::optional<VaeModel> model;  // uses *backend: keep both together
};

// A CPU backend and VaeModel over synthesize_weights(VaeConfig::tiny(), seed).
inline Status make_tiny_cpu_model(TinyCpuModel& out, uint64_t seed = 7) {
  auto b = create_cpu_backend();
  if (!b) return b.take_status();
  out.backend = std::move(*b);
  auto m = VaeModel::create(*out.backend, synthesize_weights(VaeConfig::tiny(), seed));
  if (!m) return m.take_status();
  out.model.emplace(std::move(*m));
  return Status::ok();
}

}  // namespace seedvae::test
