// The platform layer of core/io: a read-only memory map of a whole file, and a plain sequential
// file writer that flushes to stable storage before closing. One implementation per platform
// (mapped_file_posix.cpp, mapped_file_win32.cpp), selected in core/io/CMakeLists.txt; this header
// and its callers contain no platform conditionals.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <utility>

#include "core/base/status.h"

namespace seedvae {

// A read-only, private mapping of an entire file. The bytes stay valid (and unchanged by this
// process) until the MappedFile is destroyed or moved from. A file of 0 bytes is not mapped at all
// (a zero-length mapping is invalid on every OS): bytes() is then an empty span.
//
// Errors: kNotFound when the file does not exist, kIoError for every other OS refusal (including
// a path that is not a regular file: directories, FIFOs and devices are refused without blocking).
class MappedFile {
 public:
  MappedFile() = default;
  static Result<MappedFile> open(const std::filesystem::path& path);

  MappedFile(MappedFile&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  MappedFile& operator=(MappedFile&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() { release(); }

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  uint64_t size() const { return size_; }

 private:
  MappedFile(const std::byte* data, size_t size) : data_(data), size_(size) {}
  void release() noexcept;  // platform-specific unmap; leaves the object empty

  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

// Sequential binary output to a new file (created, or truncated if it exists). close() flushes the
// OS buffers to the device (fsync / FlushFileBuffers) so that a following rename publishes complete
// content; destroying an unclosed writer closes the handle without that guarantee. All errors are
// kIoError naming the path.
class FileWriter {
 public:
  FileWriter() = default;
  static Result<FileWriter> create(const std::filesystem::path& path);

  FileWriter(FileWriter&& other) noexcept
      : handle_(std::exchange(other.handle_, kNoHandle)), path_(std::move(other.path_)) {}
  FileWriter& operator=(FileWriter&& other) noexcept {
    if (this != &other) {
      abandon();
      handle_ = std::exchange(other.handle_, kNoHandle);
      path_ = std::move(other.path_);
    }
    return *this;
  }
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;
  ~FileWriter() { abandon(); }

  Status write(std::span<const std::byte> bytes);
  Status close();

 private:
  FileWriter(intptr_t handle, std::filesystem::path path)
      : handle_(handle), path_(std::move(path)) {}
  void abandon() noexcept;  // platform-specific close without flushing; leaves no handle

  static constexpr intptr_t kNoHandle = -1;
  intptr_t handle_ = kNoHandle;  // a POSIX fd or a Win32 HANDLE
  std::filesystem::path path_;
};

}  // namespace seedvae
