#include "core/base/file_lock.h"

#ifdef _WIN32
#include "core/base/windows_lean.h"
#else
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#endif

namespace seedvae {

namespace {

constexpr intptr_t kNone = -1;

// Opens (creating) the lock file; kNone on failure.
intptr_t open_lock_file(const std::filesystem::path& path, bool create) {
#ifdef _WIN32
  HANDLE h = CreateFileW(path.c_str(), GENERIC_READ | GENERIC_WRITE,
                         FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr,
                         create ? OPEN_ALWAYS : OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, nullptr);
  return h == INVALID_HANDLE_VALUE ? kNone : reinterpret_cast<intptr_t>(h);
#else
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0644);
  return fd < 0 ? kNone : fd;
#endif
}

bool lock(intptr_t h) {
#ifdef _WIN32
  OVERLAPPED o{};
  return LockFileEx(reinterpret_cast<HANDLE>(h),
                    LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &o) != 0;
#else
  return ::flock(static_cast<int>(h), LOCK_EX | LOCK_NB) == 0;
#endif
}

void close_handle(intptr_t h) {
#ifdef _WIN32
  CloseHandle(reinterpret_cast<HANDLE>(h));  // drops the lock
#else
  ::close(static_cast<int>(h));  // drops the lock
#endif
}

}  // namespace

Result<FileLock> FileLock::try_acquire(const std::filesystem::path& path) {
  const intptr_t h = open_lock_file(path, true);
  if (h == kNone) return io_error("cannot open the lock file " + path.string());
  if (!lock(h)) {
    close_handle(h);
    return invalid_argument(path.string() + " is locked by another process");
  }
  FileLock l;
  l.handle_ = h;
  return l;
}

bool FileLock::is_held(const std::filesystem::path& path) {
  const intptr_t h = open_lock_file(path, false);
  if (h == kNone) return false;
  const bool free = lock(h);
  close_handle(h);  // a lock taken just now goes with the handle
  return !free;
}

FileLock::FileLock(FileLock&& other) noexcept : handle_(other.handle_) {
  other.handle_ = kNone;
}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    release();
    handle_ = other.handle_;
    other.handle_ = kNone;
  }
  return *this;
}

FileLock::~FileLock() {
  release();
}

void FileLock::release() {
  if (handle_ != kNone) close_handle(handle_);
  handle_ = kNone;
}

}  // namespace seedvae
