#include "app/backends.h"

#include <thread>
#include <vector>

#ifdef _WIN32
#include "core/base/windows_lean.h"  // GetModuleFileNameW
#endif

#include "core/backend/fp8_numerics.h"
#include "core/base/build_info.h"
#include "core/cpu/cpu_backend.h"
#ifdef SEEDVAE_HAVE_CUDA
#include "gpu/cuda_backend.h"
#endif

namespace seedvae::app {

std::filesystem::path executable_dir() {
  std::error_code ec;
#ifdef _WIN32
  std::vector<wchar_t> buf(32768);
  const DWORD n = GetModuleFileNameW(nullptr, buf.data(), static_cast<DWORD>(buf.size()));
  if (n == 0 || n >= buf.size()) return {};
  return std::filesystem::path(std::wstring(buf.data(), n)).parent_path();
#else
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path() : exe.parent_path();
#endif
}

namespace {
Result<std::unique_ptr<Backend>> make_plain_backend(const RunOptions& r);
}  // namespace

Result<std::unique_ptr<Backend>> make_backend(const RunOptions& r) {
  SEEDVAE_ASSIGN_OR_RETURN(std::unique_ptr<Backend> b, make_plain_backend(r));
  if (r.fp8_numerics) return make_fp8_numerics_backend(std::move(b));
  return b;
}

namespace {
Result<std::unique_ptr<Backend>> make_plain_backend(const RunOptions& r) {
  SEEDVAE_TRY(validate(r));
  if (r.backend == "cpu") {
    if (r.precision != "fp32") {
      return unsupported("the CPU backend computes in fp32; --precision " + r.precision +
                         " needs --backend cuda");
    }
    return create_cpu_backend({r.threads});
  }
  if (r.backend == "cuda") {
#ifdef SEEDVAE_HAVE_CUDA
    const auto info = gpu::runtime_info();
    if (!info.error.empty()) return unsupported(info.error);
    gpu::CudaOptions o;
    o.device = r.device;
    const auto p = gpu::precision_from_name(r.precision);
    if (!p) {
      return invalid_argument("unknown precision \"" + r.precision +
                              "\" (choose fp32, tf32, fp16, bf16 or fidelity)");
    }
    o.precision = *p;
    static_cast<CudaSwitches&>(o) = r;  // the switches are one struct in both
    o.budget_bytes = budget_bytes(r);
    return gpu::create_cuda_backend(o);
#else
    return unsupported("this build has no CUDA backend (configure with -DSEEDVAE_WITH_CUDA=ON)");
#endif
  }
  return invalid_argument("unknown backend \"" + r.backend + "\" (choose cpu or cuda)");
}
}  // namespace

std::vector<std::string> describe_devices() {
  std::vector<std::string> out;
  out.push_back("cpu: " + std::to_string(std::thread::hardware_concurrency()) +
                " hardware threads (" +
                (build_info().onednn ? "oneDNN" : "portable kernels, no oneDNN") + ")");
#ifdef SEEDVAE_HAVE_CUDA
  const auto info = gpu::runtime_info();
  std::string rt = "cuda: runtime " + gpu::format_cuda_version(info.runtime_version) + ", driver " +
                   (info.driver_version ? gpu::format_cuda_version(info.driver_version) : "none") +
                   ", cuDNN " + std::to_string(info.cudnn_version);
  if (!info.error.empty()) rt += " (" + info.error + ")";
  out.push_back(rt);
  for (const auto& d : gpu::list_devices()) {
    out.push_back("cuda:" + std::to_string(d.index) + ": " + d.name + ", compute " +
                  std::to_string(d.compute_major) + "." + std::to_string(d.compute_minor) + ", " +
                  std::to_string(d.total_bytes >> 20) + " MiB (" +
                  std::to_string(d.free_bytes >> 20) + " MiB free), " +
                  std::to_string(d.multiprocessors) + " SMs");
  }
#else
  out.push_back("cuda: not built");
#endif
  return out;
}

std::string version_report(std::string_view program,
                           const std::vector<std::pair<std::string, std::string>>& extra) {
  const BuildInfo& b = build_info();
  VersionLines lines;
  lines.emplace_back("build", b.build_type + ", " + b.compiler + ", " + b.target);
  lines.emplace_back("cpu backend", cpu_backend_libraries());
#ifdef SEEDVAE_HAVE_CUDA
  lines.emplace_back("cuda backend", gpu::version_report());
#else
  lines.emplace_back("cuda backend", "not built");
#endif
  lines.emplace_back("video i/o", b.media ? "OpenCV " + b.opencv : "not built (no OpenCV)");
  for (const auto& line : extra) lines.push_back(line);
  lines.emplace_back("license", "MIT; third-party notices in THIRD_PARTY_NOTICES.md");
  return format_version_report(program, lines);
}

}  // namespace seedvae::app
