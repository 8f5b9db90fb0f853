#include "core/base/atomic_file.h"

#include <random>
#include <system_error>

namespace seedvae {

AtomicFile::AtomicFile(std::filesystem::path destination) : dest_(std::move(destination)) {
  std::random_device rd;
  const unsigned long long tag = (static_cast<unsigned long long>(rd()) << 32) ^ rd();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", tag);
  temp_ = dest_;
  temp_.replace_filename(dest_.stem().string() + ".tmp-" + hex + dest_.extension().string());
}

AtomicFile::~AtomicFile() {
  if (!committed_) {
    std::error_code ec;
    std::filesystem::remove_all(temp_, ec);
  }
}

Status AtomicFile::commit() {
  std::error_code ec;
  std::filesystem::rename(temp_, dest_, ec);
  if (ec) {
    return io_error("cannot move " + temp_.string() + " to " + dest_.string() + ": " +
                    ec.message());
  }
  committed_ = true;
  return Status::ok();
}

}  // namespace seedvae
