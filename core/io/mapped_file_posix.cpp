// POSIX implementation of core/io/mapped_file.h: open + fstat + mmap(PROT_READ, MAP_PRIVATE),
// open/write/fsync/close.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <system_error>

#include "core/io/mapped_file.h"

namespace seedvae {
namespace {

std::string os_message(int err) {
  return std::system_category().message(err);
}

Status open_error(const std::filesystem::path& path, int err) {
  std::string msg = "cannot open " + path.string() + ": " + os_message(err);
  if (err == ENOENT) return not_found(std::move(msg));
  return io_error(std::move(msg));
}

}  // namespace

Result<MappedFile> MappedFile::open(const std::filesystem::path& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below as not regular).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return open_error(path, errno);

  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return io_error("cannot stat " + path.string() + ": " + os_message(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return io_error("cannot map " + path.string() + ": not a regular file");
  }
  if (st.st_size < 0 || static_cast<uint64_t>(st.st_size) > SIZE_MAX) {
    ::close(fd);
    return io_error("cannot map " + path.string() + ": file of " + std::to_string(st.st_size) +
                    " bytes does not fit the address space");
  }
  const auto size = static_cast<size_t>(st.st_size);
  if (size == 0) {  // mmap of length 0 fails with EINVAL: an empty file maps to an empty span
    ::close(fd);
    return MappedFile();
  }
  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);  // the mapping keeps its own reference to the file
  if (addr == MAP_FAILED) {
    return io_error("cannot map " + path.string() + " (" + std::to_string(size) +
                    " bytes): " + os_message(map_err));
  }
  return MappedFile(static_cast<const std::byte*>(addr), size);
}

void MappedFile::release() noexcept {
  if (data_ != nullptr && size_ != 0) {
    ::munmap(const_cast<std::byte*>(data_), size_);
  }
  data_ = nullptr;
  size_ = 0;
}

Result<FileWriter> FileWriter::create(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0666);
  if (fd < 0) {
    const int err = errno;
    return io_error("cannot create " + path.string() + ": " + os_message(err));
  }
  return FileWriter(fd, path);
}

Status FileWriter::write(std::span<const std::byte> bytes) {
  if (handle_ == kNoHandle) return io_error("cannot write " + path_.string() + ": file is closed");
  const int fd = static_cast<int>(handle_);
  const std::byte* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const size_t chunk = left < (size_t{1} << 30) ? left : (size_t{1} << 30);
    const ssize_t n = ::write(fd, p, chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      return io_error("cannot write " + path_.string() + ": " + os_message(err));
    }
    if (n == 0) return io_error("cannot write " + path_.string() + ": no progress");
    p += n;
    left -= static_cast<size_t>(n);
  }
  return Status::ok();
}

Status FileWriter::close() {
  if (handle_ == kNoHandle) return Status::ok();
  const int fd = static_cast<int>(std::exchange(handle_, kNoHandle));
  // EINVAL/ENOTSUP: the file system cannot sync this file (e.g. some FUSE or special mounts);
  // nothing more can be done for it, and it is not a failed write.
  if (::fsync(fd) != 0 && errno != EINVAL && errno != ENOTSUP) {
    const int err = errno;
    ::close(fd);
    return io_error("cannot flush " + path_.string() + ": " + os_message(err));
  }
  if (::close(fd) != 0 && errno != EINTR) {
    const int err = errno;
    return io_error("cannot close " + path_.string() + ": " + os_message(err));
  }
  return Status::ok();
}

void FileWriter::abandon() noexcept {
  if (handle_ != kNoHandle) ::close(static_cast<int>(handle_));
  handle_ = kNoHandle;
}

}  // namespace seedvae
