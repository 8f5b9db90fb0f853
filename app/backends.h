// Composition root of the CLI: which backends exist in this build and how to make one.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/backend/backend.h"

namespace seedvae::app {

struct BackendRequest {
  std::string name = "cpu";  // "cpu" or "cuda"
  int threads = 0;           // cpu
  int device = 0;            // cuda
  // CUDA engine (ignored by the CPU backend; see gpu/cuda_backend.h CudaOptions and
  // docs/gpu-notes.md for what each switch does and measures).
  std::string precision = "fp32";  // fp32 | tf32 | fp16 | bf16
  bool autotune = true;             // cuDNN algorithm search vs heuristic
  std::string autotune_cache = "auto";
  bool channels_last = true;
  bool fused_gn_silu = true;
  bool fused_attention = true;
  bool caching_allocator = true;
  bool buffer_reuse = true;
  bool fuse_bias = true;
  bool offload_state = false;  // causal state in pinned host memory between chunks
  int offload_window_mib = 1024;  // at most this much of it prefetched back ahead of use
  bool cuda_graphs = false;  // record a chunk once, replay it for later chunks (VaeModel)
  int cudnn_workspace_mib = 512;
};

Result<std::unique_ptr<Backend>> make_backend(const BackendRequest& request);
// Human-readable lines about every device (CPU and, when built, CUDA).
std::vector<std::string> describe_devices();

// Folder of the running executable (for the install-relative demo weights); empty if unknown.
std::filesystem::path executable_dir();

// The --version text of `program`: version and git commit, compiler and build type, the CPU
// kernels' libraries, the CUDA runtime/cuDNN/cuBLAS versions (when built), OpenCV (when built),
// then `extra` lines (the studio adds Qt).
std::string version_report(std::string_view program,
                           const std::vector<std::pair<std::string, std::string>>& extra = {});

}  // namespace seedvae::app
