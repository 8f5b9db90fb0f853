// The oneDNN CPU engine and stream shared by the backend's convolution and matmul caches, plus the
// conversion of oneDNN exceptions into Status. Internal to core/cpu; same thread affinity as the
// backend.
#pragma once

#include <string>

#include <dnnl.hpp>

#include "core/base/status.h"

namespace seedvae::cpu {

struct OneDnnContext {
  OneDnnContext() : engine(dnnl::engine::kind::cpu, 0), stream(engine) {}
  dnnl::engine engine;
  dnnl::stream stream;
};

inline Status onednn_status(const dnnl::error& e, const std::string& what) {
  if (e.status == dnnl_out_of_memory) {
    return out_of_memory("oneDNN ran out of memory in " + what + ": " + e.what());
  }
  if (e.status == dnnl_unimplemented) {
    return unsupported("oneDNN has no implementation for " + what + ": " + e.what());
  }
  return internal_error("oneDNN failed in " + what + ": " + e.what());
}

}  // namespace seedvae::cpu
