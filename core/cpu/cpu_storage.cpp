#include "core/cpu/cpu_storage.h"

#include <cstdlib>
#include <string>

#if defined(__linux__)
#include <sys/mman.h>
#endif
#if defined(_WIN32)
#include <malloc.h>
#endif

namespace seedvae::cpu {

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    counters_ = std::move(o.counters_);
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void Buffer::release() {
  if (ptr_ != nullptr) {
#if defined(_WIN32)
    _aligned_free(ptr_);
#else
    std::free(ptr_);
#endif
    if (counters_) counters_->sub(bytes_);
  }
  ptr_ = nullptr;
  bytes_ = 0;
  counters_.reset();
}

Result<Buffer> Buffer::allocate(int64_t bytes, std::shared_ptr<MemoryCounters> counters,
                                std::string_view what) {
  constexpr int64_t kHugePage = int64_t{2} << 20;
  constexpr int64_t kHugeFrom = int64_t{16} << 20;
  if (bytes < 0 || bytes > INT64_MAX - kHugePage) {
    return out_of_memory("cannot allocate " + std::string(what) + ": size overflows");
  }
  // Large blocks are 2 MiB aligned and advised for transparent huge pages: first touch of fresh
  // memory (a page fault per 4 KiB page, costly under virtualisation) is then ~2x cheaper.
  // aligned_alloc wants a multiple of the alignment; keep at least one line for empty tensors.
  const int64_t align = bytes >= kHugeFrom ? kHugePage : 64;
  const int64_t rounded = bytes == 0 ? align : (bytes + align - 1) / align * align;
#if defined(_WIN32)  // the Windows C runtimes have no aligned_alloc
  void* p = _aligned_malloc(static_cast<size_t>(rounded), static_cast<size_t>(align));
#else
  void* p = std::aligned_alloc(static_cast<size_t>(align), static_cast<size_t>(rounded));
#endif
  if (p == nullptr) {
    return out_of_memory("host allocation of " + std::to_string(bytes) + " bytes failed for " +
                         std::string(what));
  }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (align == kHugePage) madvise(p, static_cast<size_t>(rounded), MADV_HUGEPAGE);
#endif
  Buffer b;
  b.ptr_ = p;
  b.bytes_ = bytes;
  b.counters_ = std::move(counters);
  if (b.counters_) b.counters_->add(bytes);
  return b;
}

}  // namespace seedvae::cpu
