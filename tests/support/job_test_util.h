// Helpers of the tests that stop and resume jobs (tst_resume, tst_job_queue): a file's bytes, and
// a progress sink that requests a cancel once the decode has finished a number of chunks.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

#include "core/base/cancel.h"
#include "core/base/progress.h"

namespace seedvae::test {

inline std::string file_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Requests the cancel once the decode has finished `after` chunks.
class CancelAfter final : public ProgressSink {
 public:
  CancelAfter(CancelToken& token, int64_t after) : token_(token), after_(after) {}
  void report(std::string_view stage, int64_t done, int64_t) override {
    if (stage == "decode" && done >= after_) token_.request();
  }

 private:
  CancelToken& token_;
  int64_t after_;
};

}  // namespace seedvae::test
