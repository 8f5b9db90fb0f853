// Memory of the CPU backend: 64-byte-aligned, counted buffers and the Storage behind CPU Tensors.
//
// Every byte the backend allocates (tensors, packed conv weights, oneDNN scratchpads, reorder and
// attention temporaries) goes through Buffer, so MemoryStats reports the true high-water mark.
// Counters are shared (shared_ptr) between the backend and every Buffer, so a Tensor may outlive
// its backend without dangling. Internal to core/cpu.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#if !defined(SEEDVAE_CPU_ONEDNN)
#error \
    "SEEDVAE_CPU_ONEDNN (0 or 1) is set by core/cpu/CMakeLists.txt; core/cpu headers are internal"
#endif
#if SEEDVAE_CPU_ONEDNN
#include <dnnl.hpp>
#endif

#include "core/backend/backend.h"
#include "core/base/status.h"

namespace seedvae::cpu {

// Live and peak byte counts of one backend. Atomic so a Tensor may die on another thread.
struct MemoryCounters {
  std::atomic<int64_t> current{0};
  std::atomic<int64_t> peak{0};

  void add(int64_t bytes) {
    const int64_t now = current.fetch_add(bytes) + bytes;
    int64_t p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {
    }
  }
  void sub(int64_t bytes) { current.fetch_sub(bytes); }
};

// An owned, 64-byte-aligned block of `bytes` bytes, counted in MemoryCounters while alive.
// Move-only. Contents are uninitialised.
class Buffer {
 public:
  Buffer() = default;
  ~Buffer() { release(); }
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // kOutOfMemory (naming `what`) when the allocation fails.
  static Result<Buffer> allocate(int64_t bytes, std::shared_ptr<MemoryCounters> counters,
                                 std::string_view what);

  float* f32() const { return static_cast<float*>(ptr_); }
  void* data() const { return ptr_; }
  int64_t bytes() const { return bytes_; }

 private:
  void release();

  void* ptr_ = nullptr;
  int64_t bytes_ = 0;
  std::shared_ptr<MemoryCounters> counters_;
};

// Identifies the layout of a packed weight: the oneDNN memory descriptor a convolution asked for,
// or, for the portable kernels (conv3d_portable.h), a layout tag.
#if SEEDVAE_CPU_ONEDNN
using PackDesc = dnnl::memory::desc;
#else
struct PackDesc {
  int64_t tag = 0;
  bool operator==(const PackDesc&) const = default;
};
#endif

// A conv weight reordered into a layout a convolution asked for.
struct PackedWeight {
  PackDesc desc;
  Buffer buffer;
};

// Physical order of a CPU tensor's floats.
enum class Layout : uint8_t {
  kPlain,         // the logical row-major order (parameters; anything uploaded with upload_weight)
  kChannelsLast,  // 5-D activations [N, C, T, H, W] stored as [N, T, H, W, C] (NDHWC)
};

// Storage of a CPU Tensor: contiguous fp32 in `layout` order for `shape`, plus lazily made repacks
// of the same values for convolutions (dropped when the tensor is modified in place).
//
// Activations are channels-last because that is the layout oneDNN's fastest fp32 convolutions
// (brgconv) read and write: convolutions then run without reorders or temporary copies, attention
// sees token-major [H*W, C] frames, and per-frame ops touch one contiguous block per frame.
class CpuStorage final : public Storage {
 public:
  CpuStorage(Buffer b, Layout l, Shape s) : buffer(std::move(b)), layout(l), shape(std::move(s)) {}

  float* f32() const { return buffer.f32(); }

  Buffer buffer;
  Layout layout;
  Shape shape;  // the shape it was created with (a channels-last Tensor cannot be reshaped)
  std::vector<PackedWeight> packed;
};

}  // namespace seedvae::cpu
