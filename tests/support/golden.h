// Where tests find ../shared/golden: the SEEDVAE_GOLDEN_DIR environment variable if set, else the
// CMake cache path compiled in. Tests that need it QSKIP with this message when it is absent.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace seedvae::test {

inline std::filesystem::path golden_dir() {
  if (const char* env = std::getenv("SEEDVAE_GOLDEN_DIR"); env && *env) return env;
#ifdef SEEDVAE_GOLDEN_DIR
  return SEEDVAE_GOLDEN_DIR;
#else
  return "../shared/golden";
#endif
}

inline bool have_golden() {
  return std::filesystem::exists(golden_dir() / "manifest.json");
}

inline std::string golden_missing_message() {
  return "reference data not found at " + golden_dir().string() +
         " (set -DSEEDVAE_GOLDEN_DIR=... or the SEEDVAE_GOLDEN_DIR environment variable)";
}

// The Wan reference data (../shared/golden-wan): $SEEDVAE_GOLDEN_WAN_DIR, else the CMake cache path
// compiled in (tests that define SEEDVAE_GOLDEN_WAN_DIR).
inline std::filesystem::path golden_wan_dir() {
  if (const char* env = std::getenv("SEEDVAE_GOLDEN_WAN_DIR"); env && *env) return env;
#ifdef SEEDVAE_GOLDEN_WAN_DIR
  return SEEDVAE_GOLDEN_WAN_DIR;
#else
  return "../shared/golden-wan";
#endif
}

inline bool have_golden_wan() {
  return std::filesystem::exists(golden_wan_dir() / "manifest.json");
}

inline std::string golden_wan_missing_message() {
  return "Wan reference data not found at " + golden_wan_dir().string() +
         " (set -DSEEDVAE_GOLDEN_WAN_DIR=... or the SEEDVAE_GOLDEN_WAN_DIR environment variable)";
}

}  // namespace seedvae::test
