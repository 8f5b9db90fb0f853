// An advisory lock on a file held by one process at a time (flock on POSIX, LockFileEx on
// Windows; the operating system drops it when the process ends, however it ends). The job queue's
// runner holds one beside the queue file, so that a second runner refuses and a job marked
// running is known to be running rather than left over from a runner that died. Neither the C++
// library nor the project's other libraries in core offer a cross-process lock (Qt's QLockFile
// lives in the UI layer), hence these few lines.
#pragma once

#include <cstdint>
#include <filesystem>

#include "core/base/status.h"

namespace seedvae {

class FileLock {
 public:
  // Takes the lock on `path` (created if missing) without waiting: kInvalidArgument when another
  // process holds it, kIoError when the file cannot be opened.
  static Result<FileLock> try_acquire(const std::filesystem::path& path);
  // Whether the lock on `path` is held now, by another process or by another FileLock of this
  // one (false when nobody holds it or the file is missing).
  static bool is_held(const std::filesystem::path& path);

  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

 private:
  FileLock() = default;
  void release();
  intptr_t handle_ = -1;  // a file descriptor, or a Windows HANDLE
};

}  // namespace seedvae
