// Composition root of the CLI: which backends exist in this build and how to make one.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/backend/backend.h"

namespace seedvae::app {

struct BackendRequest {
  std::string name = "cpu";  // "cpu" or "cuda"
  int threads = 0;
  int device = 0;
};

Result<std::unique_ptr<Backend>> make_backend(const BackendRequest& request);
// Human-readable lines about every device (CPU and, when built, CUDA).
std::vector<std::string> describe_devices();

}  // namespace seedvae::app
