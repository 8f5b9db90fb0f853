#include "core/base/atomic_file.h"

#include <mutex>
#include <random>
#include <set>
#include <system_error>

namespace seedvae {

namespace {

// The temporaries of the AtomicFile objects alive now.
struct LiveTemporaries {
  std::mutex mu;
  std::set<std::filesystem::path> paths;
};

LiveTemporaries& live() {
  static LiveTemporaries* l = new LiveTemporaries;  // never destroyed: used until exit
  return *l;
}

void forget(const std::filesystem::path& p) {
  std::lock_guard<std::mutex> lk(live().mu);
  live().paths.erase(p);
}

}  // namespace

AtomicFile::AtomicFile(std::filesystem::path destination) : dest_(std::move(destination)) {
  std::random_device rd;
  const unsigned long long tag = (static_cast<unsigned long long>(rd()) << 32) ^ rd();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", tag);
  temp_ = dest_;
  temp_.replace_filename(dest_.stem().string() + ".tmp-" + hex + dest_.extension().string());
  std::lock_guard<std::mutex> lk(live().mu);
  live().paths.insert(temp_);
}

AtomicFile::~AtomicFile() {
  if (!committed_) {
    std::error_code ec;
    std::filesystem::remove_all(temp_, ec);
  }
  forget(temp_);
}

Status AtomicFile::commit() {
  std::error_code ec;
  std::filesystem::rename(temp_, dest_, ec);
  if (ec) {
    return io_error("cannot move " + temp_.string() + " to " + dest_.string() + ": " +
                    ec.message());
  }
  committed_ = true;
  forget(temp_);
  return Status::ok();
}

void remove_live_temporaries() {
  std::lock_guard<std::mutex> lk(live().mu);
  for (const auto& p : live().paths) {
    std::error_code ec;
    std::filesystem::remove_all(p, ec);
  }
  live().paths.clear();
}

}  // namespace seedvae
