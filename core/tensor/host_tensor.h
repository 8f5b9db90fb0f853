// A tensor in host memory that owns its bytes: the currency between file formats, the video
// reader/writer, backends (upload/download) and tests. Contiguous, row-major.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "core/base/host_blocks.h"
#include "core/base/status.h"
#include "core/tensor/dtype.h"
#include "core/tensor/shape.h"

namespace seedvae {

// An allocator whose elements are default-initialised (for bytes: not at all), so that
// HostTensor zero-fills its bytes itself: a large tensor on every core (a whole 4K clip is
// gigabytes, and its first touch on one thread takes seconds). Blocks of 16 MiB and more are
// recycled (host_blocks.h).
template <typename T>
struct UninitAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = UninitAllocator<U>;
  };
  UninitAllocator() = default;
  template <typename U>
  UninitAllocator(const UninitAllocator<U>&) noexcept {}
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  // Large blocks come from the process's cache of them (core/base/host_blocks.h).
  T* allocate(size_t n) {
    if (n * sizeof(T) >= kLargeHostBlock) return static_cast<T*>(acquire_host_block(n * sizeof(T)));
    return std::allocator<T>::allocate(n);
  }
  void deallocate(T* p, size_t n) noexcept {
    if (n * sizeof(T) >= kLargeHostBlock) return release_host_block(p);
    std::allocator<T>::deallocate(p, n);
  }
};

class HostTensor {
 public:
  HostTensor() = default;
  // Zero-initialised tensor. Aborts nothing: an impossible size yields an empty tensor; use
  // HostTensor::create() on untrusted shapes.
  HostTensor(DType dtype, Shape shape);

  static Result<HostTensor> create(DType dtype, Shape shape);
  // Copies `n = shape.numel()` elements of `dtype` from `data`.
  static HostTensor from_bytes(DType dtype, Shape shape, const void* data);
  static HostTensor from_floats(Shape shape, std::span<const float> values);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return shape_.numel(); }
  int64_t nbytes() const { return static_cast<int64_t>(bytes_.size()); }
  bool empty() const { return bytes_.empty(); }

  void* raw() { return bytes_.data(); }
  const void* raw() const { return bytes_.data(); }
  template <typename T>
  T* data() {
    return reinterpret_cast<T*>(bytes_.data());
  }
  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(bytes_.data());
  }
  // Valid only for kF32 tensors.
  std::span<float> f32() { return {data<float>(), static_cast<size_t>(numel())}; }
  std::span<const float> f32() const { return {data<float>(), static_cast<size_t>(numel())}; }

  // A copy converted to `dtype` (round to nearest even when narrowing).
  HostTensor to(DType dtype) const;
  // Same bytes, new shape with the same element count.
  Result<HostTensor> reshaped(Shape shape) const;

 private:
  DType dtype_ = DType::kF32;
  Shape shape_;
  std::vector<std::byte, UninitAllocator<std::byte>> bytes_;
};

// Comparison statistics between two same-shape tensors (any dtypes, computed in double).
struct DiffStats {
  double max_abs = 0;
  double rms = 0;
  double mean_abs = 0;
  double ref_absmax = 0;
  int64_t count = 0;
};
Result<DiffStats> compare(const HostTensor& actual, const HostTensor& reference);

}  // namespace seedvae
