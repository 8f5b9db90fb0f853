// Composition root of the CLI: which backends exist in this build and how to make one.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/backend/backend.h"
#include "core/pipeline/run_options.h"

namespace seedvae::app {

// The backend a run's options ask for (RunOptions: backend, device, threads, precision and the
// CUDA engine's switches). threads 0 means every hardware thread.
Result<std::unique_ptr<Backend>> make_backend(const RunOptions& options);
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
