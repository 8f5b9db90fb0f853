// A clip kept for later reading without holding it in memory: the studio's scrubber, A/B
// comparison, report and export read a finished run's frames back from here, chunk by chunk.
//
// Frames are appended in order (the job's reader and decoder, on the engine thread) and read
// back by any thread. Storage is either host memory (tests, callers that want the whole clip) or
// an unnamed temporary file of fp32 (or fp16) frames: created in a directory the caller chooses,
// unlinked at once on POSIX (removed on close elsewhere), so nothing is left behind by a crash.
// File reads and writes go through the C library, not a memory map, so a spooled clip does not
// count in the process's resident memory.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <vector>

#include "core/base/status.h"
#include "core/tensor/host_tensor.h"

namespace seedvae::media {

class FrameSpool {
 public:
  // Held in host memory.
  static std::shared_ptr<FrameSpool> in_memory();
  // Held in a temporary file in `directory` (which must exist). kIoError names the directory.
  // `storage` (kF32 or kF16) is how the frames are stored: fp16 halves the file for frames
  // that are only shown (an 8-bit source's levels stay within 1/8 of a level).
  static Result<std::shared_ptr<FrameSpool>> on_disk(const std::filesystem::path& directory,
                                                     DType storage = DType::kF32);
  // An on-disk spool's file is closed on a thread of its own (freeing a large file's blocks takes
  // the kernel tens to hundreds of ms, which the dropping thread -- the GUI's -- must not wait
  // for).
  ~FrameSpool();
  FrameSpool(const FrameSpool&) = delete;
  FrameSpool& operator=(const FrameSpool&) = delete;

  // Appends the frames of `frames` ([1, C, k, H, W], any float dtype, stored as `storage`). The
  // first append fixes C, H and W; later ones must match (kInvalidArgument). A failed write (a full
  // disk: kIoError "no space left on device") appends nothing.
  Status append(const HostTensor& frames);
  // Frames [first, first + count) as fp32 [1, C, count, H, W]; kInvalidArgument outside the
  // frames appended so far.
  Result<HostTensor> read(int64_t first, int64_t count) const;
  Result<HostTensor> read_all() const { return read(0, frames()); }

  int64_t frames() const;
  // [1, C, frames, H, W]; rank 0 before the first append.
  Shape shape() const;
  bool on_disk() const { return file_ != nullptr; }
  // Bytes the frames take (in memory or on disk).
  int64_t bytes() const;

 private:
  FrameSpool() = default;
  int64_t frame_bytes() const {
    return channels_ * height_ * width_ * static_cast<int64_t>(dtype_size(storage_));
  }

  mutable std::mutex mu_;
  DType storage_ = DType::kF32;
  std::FILE* file_ = nullptr;
  std::filesystem::path path_;     // removed on close where the file could not be unlinked
  std::vector<std::byte> memory_;  // frame-major: frame t is [C, H, W]
  int64_t channels_ = 0, height_ = 0, width_ = 0, frames_ = 0;
};

}  // namespace seedvae::media
