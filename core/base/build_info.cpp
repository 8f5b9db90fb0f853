#include "core/base/build_info.h"

#include "core/base/build_info_config.h"  // generated at configure time
#include "core/base/build_info_git.h"     // generated on every build (SEEDVAE_GIT_COMMIT)

#ifndef SEEDVAE_BUILD_CONFIG  // set per configuration by cmake/BuildInfo.cmake
#define SEEDVAE_BUILD_CONFIG ""
#endif

namespace seedvae {

const BuildInfo& build_info() {
  static const BuildInfo info = [] {
    BuildInfo b;
    b.version = SEEDVAE_BUILD_VERSION;
    b.git_commit = SEEDVAE_GIT_COMMIT;
    b.compiler = SEEDVAE_BUILD_COMPILER;
    b.build_type = SEEDVAE_BUILD_CONFIG;
    if (b.build_type.empty()) b.build_type = "unspecified build type";
    b.target = SEEDVAE_BUILD_TARGET;
    b.cuda = SEEDVAE_BUILD_HAVE_CUDA;
    b.media = SEEDVAE_BUILD_HAVE_MEDIA;
    b.ui = SEEDVAE_BUILD_HAVE_UI;
    b.onednn = SEEDVAE_BUILD_HAVE_ONEDNN;
    b.opencv = SEEDVAE_BUILD_OPENCV_VERSION;
    return b;
  }();
  return info;
}

std::string format_version_report(std::string_view program, const VersionLines& lines) {
  const BuildInfo& b = build_info();
  std::string out(program);
  out += " " + b.version;
  if (!b.git_commit.empty()) out += " (git " + b.git_commit + ")";
  out += "\n";
  for (const auto& [key, value] : lines) out += "  " + key + ": " + value + "\n";
  return out;
}

}  // namespace seedvae
