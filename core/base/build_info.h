// What this build is, for --version and reports: project version, git commit, compiler, build
// type, target, and which optional modules it contains. Configure-time facts come from a header
// CMake generates (cmake/BuildInfo.cmake); the git commit is refreshed on every build. The
// versions of the libraries behind each module are reported by the module that links them
// (cpu_backend_libraries() in core/cpu, gpu::version_report() in gpu/, Qt by the studio), and the
// programs assemble them (app/backends.h version_report()), so core names no Qt, OpenCV or CUDA
// header.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace seedvae {

struct BuildInfo {
  std::string version;     // project version, "0.1.0"
  std::string git_commit;  // "1a2b3c4d5e6f", "1a2b3c4d5e6f-dirty", or "" (not built from git)
  std::string compiler;    // "GNU 12.2.0"
  std::string build_type;  // "Release" (the configuration of a multi-config generator)
  std::string target;      // "Linux x86_64", "Windows AMD64"
  bool cuda = false;       // the CUDA backend (gpu/) was built
  bool media = false;      // video I/O (OpenCV) was built
  bool ui = false;         // the Qt studio was built
  bool onednn = false;     // the CPU backend uses oneDNN (otherwise its portable kernels)
  std::string opencv;      // OpenCV version video I/O was built against ("" without)
};

const BuildInfo& build_info();

// Ordered "key: value" lines under the first line of a --version report.
using VersionLines = std::vector<std::pair<std::string, std::string>>;

// "<program> <version> (git <commit>)\n  <key>: <value>\n..." ("(git ...)" only when known).
std::string format_version_report(std::string_view program, const VersionLines& lines);

}  // namespace seedvae
