// Windows implementation of core/io/mapped_file.h: CreateFileW + CreateFileMappingW(PAGE_READONLY)
// + MapViewOfFile(FILE_MAP_READ); CreateFileW/WriteFile/FlushFileBuffers/CloseHandle.
#include "core/base/windows_lean.h"

#include <cstdint>
#include <string>
#include <system_error>

#include "core/io/mapped_file.h"

namespace seedvae {
namespace {

// UTF-8 for messages (path::string() may throw for characters outside the ANSI code page).
std::string display(const std::filesystem::path& path) {
  const std::u8string u = path.u8string();
  return std::string(u.begin(), u.end());
}

std::string os_message(DWORD err) {
  return std::system_category().message(static_cast<int>(err));
}

HANDLE to_handle(intptr_t h) {
  return reinterpret_cast<HANDLE>(h);
}

}  // namespace

Result<MappedFile> MappedFile::open(const std::filesystem::path& path) {
  HANDLE file = ::CreateFileW(path.c_str(), GENERIC_READ, FILE_SHARE_READ, nullptr, OPEN_EXISTING,
                              FILE_ATTRIBUTE_NORMAL, nullptr);
  if (file == INVALID_HANDLE_VALUE) {
    const DWORD err = ::GetLastError();
    std::string msg = "cannot open " + display(path) + ": " + os_message(err);
    if (err == ERROR_FILE_NOT_FOUND || err == ERROR_PATH_NOT_FOUND)
      return not_found(std::move(msg));
    return io_error(std::move(msg));
  }
  if (::GetFileType(file) != FILE_TYPE_DISK) {
    ::CloseHandle(file);
    return io_error("cannot map " + display(path) + ": not a regular file");
  }
  LARGE_INTEGER size{};
  if (!::GetFileSizeEx(file, &size)) {
    const DWORD err = ::GetLastError();
    ::CloseHandle(file);
    return io_error("cannot stat " + display(path) + ": " + os_message(err));
  }
  if (size.QuadPart < 0 || static_cast<uint64_t>(size.QuadPart) > SIZE_MAX) {
    ::CloseHandle(file);
    return io_error("cannot map " + display(path) + ": file of " + std::to_string(size.QuadPart) +
                    " bytes does not fit the address space");
  }
  if (size.QuadPart == 0) {  // CreateFileMapping refuses empty files: map to an empty span
    ::CloseHandle(file);
    return MappedFile();
  }
  HANDLE mapping = ::CreateFileMappingW(file, nullptr, PAGE_READONLY, 0, 0, nullptr);
  if (mapping == nullptr) {
    const DWORD err = ::GetLastError();
    ::CloseHandle(file);
    return io_error("cannot map " + display(path) + ": " + os_message(err));
  }
  void* view = ::MapViewOfFile(mapping, FILE_MAP_READ, 0, 0, 0);
  const DWORD view_err = ::GetLastError();
  // The view keeps the mapping and the file alive; both handles can go now.
  ::CloseHandle(mapping);
  ::CloseHandle(file);
  if (view == nullptr) {
    return io_error("cannot map " + display(path) + ": " + os_message(view_err));
  }
  return MappedFile(static_cast<const std::byte*>(view), static_cast<size_t>(size.QuadPart));
}

void MappedFile::release() noexcept {
  if (data_ != nullptr) ::UnmapViewOfFile(data_);
  data_ = nullptr;
  size_ = 0;
}

Result<FileWriter> FileWriter::create(const std::filesystem::path& path) {
  HANDLE file = ::CreateFileW(path.c_str(), GENERIC_WRITE, 0, nullptr, CREATE_ALWAYS,
                              FILE_ATTRIBUTE_NORMAL, nullptr);
  if (file == INVALID_HANDLE_VALUE) {
    const DWORD err = ::GetLastError();
    return io_error("cannot create " + display(path) + ": " + os_message(err));
  }
  return FileWriter(reinterpret_cast<intptr_t>(file), path);
}

Status FileWriter::write(std::span<const std::byte> bytes) {
  if (handle_ == kNoHandle) return io_error("cannot write " + display(path_) + ": file is closed");
  const std::byte* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const DWORD chunk = left < (size_t{1} << 30) ? static_cast<DWORD>(left) : (DWORD{1} << 30);
    DWORD written = 0;
    if (!::WriteFile(to_handle(handle_), p, chunk, &written, nullptr)) {
      const DWORD err = ::GetLastError();
      return io_error("cannot write " + display(path_) + ": " + os_message(err));
    }
    if (written == 0) return io_error("cannot write " + display(path_) + ": no progress");
    p += written;
    left -= written;
  }
  return Status::ok();
}

Status FileWriter::close() {
  if (handle_ == kNoHandle) return Status::ok();
  HANDLE file = to_handle(std::exchange(handle_, kNoHandle));
  if (!::FlushFileBuffers(file)) {
    const DWORD err = ::GetLastError();
    ::CloseHandle(file);
    return io_error("cannot flush " + display(path_) + ": " + os_message(err));
  }
  if (!::CloseHandle(file)) {
    const DWORD err = ::GetLastError();
    return io_error("cannot close " + display(path_) + ": " + os_message(err));
  }
  return Status::ok();
}

void FileWriter::abandon() noexcept {
  if (handle_ != kNoHandle) ::CloseHandle(to_handle(handle_));
  handle_ = kNoHandle;
}

}  // namespace seedvae
