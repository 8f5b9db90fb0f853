#include "core/media/frame_spool.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>
#include <string>
#include <thread>

#include "core/base/thread_name.h"

#if defined(_WIN32)
#include <process.h>
#else
#include <unistd.h>
#endif

namespace seedvae::media {

namespace {

int seek(std::FILE* f, int64_t offset) {
#if defined(_WIN32)
  return _fseeki64(f, offset, SEEK_SET);
#else
  return fseeko(f, static_cast<off_t>(offset), SEEK_SET);
#endif
}

int process_id() {
#if defined(_WIN32)
  return _getpid();
#else
  return static_cast<int>(getpid());
#endif
}

std::string quoted(const std::filesystem::path& p) {
  std::string q(1, '\'');
  q += p.string();
  q += '\'';
  return q;
}

}  // namespace

std::shared_ptr<FrameSpool> FrameSpool::in_memory() {
  return std::shared_ptr<FrameSpool>(new FrameSpool());
}

Result<std::shared_ptr<FrameSpool>> FrameSpool::on_disk(const std::filesystem::path& directory,
                                                        DType storage) {
  if (storage != DType::kF32 && storage != DType::kF16) {
    return invalid_argument("frames are kept as fp32 or fp16");
  }
  static std::atomic<uint64_t> counter{0};
  std::shared_ptr<FrameSpool> s(new FrameSpool());
  s->storage_ = storage;
  const uint64_t salt = std::random_device{}();
  for (int attempt = 0; attempt < 16 && !s->file_; ++attempt) {
    char name[96];
    std::snprintf(name, sizeof name, "seedvae-frames-%d-%llu-%llu.f32", process_id(),
                  static_cast<unsigned long long>(counter++),
                  static_cast<unsigned long long>(salt % 100000));
    s->path_ = directory / name;
    // "x": fail if the name exists (C11), so two spools never share a file.
    s->file_ = std::fopen(s->path_.string().c_str(), "wb+x");
    if (!s->file_ && errno != EEXIST) break;
  }
  if (!s->file_) {
    return io_error("cannot create a temporary frame file in " + quoted(directory) + ": " +
                    std::strerror(errno));
  }
#if !defined(_WIN32)
  // Unlinked at once: the open stream keeps the data, and no file outlives the process.
  if (std::remove(s->path_.string().c_str()) == 0) s->path_.clear();
#endif
  return s;
}

FrameSpool::~FrameSpool() {
  if (!file_) return;
  // Closing the last handle of a large unlinked file frees its blocks in the kernel: 150 ms for
  // a 720p run's spools, measured on the studio's GUI thread, which drops a finished run's
  // frames when the next one ends. The file is closed on a thread of its own, so whoever drops
  // the spool never waits (at exit the system closes it).
  std::thread([file = file_, path = path_] {
    set_current_thread_name("seedvae-spool");
    std::fclose(file);
    if (!path.empty()) {
      std::error_code ec;
      std::filesystem::remove(path, ec);
    }
  }).detach();
}

Status FrameSpool::append(const HostTensor& frames) {
  const Shape& s = frames.shape();
  if (s.rank() != 5 || s[0] != 1 || s[1] < 1 || s[3] < 1 || s[4] < 1) {
    return invalid_argument("frames to keep must be [1, C, k, H, W], got " + s.to_string());
  }
  if (s[2] == 0) return Status::ok();
  const HostTensor converted = frames.dtype() == storage_ ? HostTensor() : frames.to(storage_);
  const auto* src =
      static_cast<const std::byte*>((frames.dtype() == storage_ ? frames : converted).raw());
  std::lock_guard lock(mu_);
  if (frames_ == 0 && channels_ == 0) {
    channels_ = s[1];
    height_ = s[3];
    width_ = s[4];
  } else if (s[1] != channels_ || s[3] != height_ || s[4] != width_) {
    return invalid_argument("frames of " + s.to_string() + " do not match the kept clip's " +
                            std::to_string(channels_) + " x " + std::to_string(height_) + " x " +
                            std::to_string(width_));
  }
  const int64_t k = s[2], fb = frame_bytes(), plane = fb / channels_;
  // [C, k, H, W] -> frame-major [k][C, H, W].
  std::vector<std::byte> frame(static_cast<size_t>(fb));
  for (int64_t t = 0; t < k; ++t) {
    for (int64_t c = 0; c < channels_; ++c) {
      std::memcpy(frame.data() + c * plane, src + (c * k + t) * plane, static_cast<size_t>(plane));
    }
    if (!file_) {
      memory_.insert(memory_.end(), frame.begin(), frame.end());
      continue;
    }
    errno = 0;
    if (seek(file_, (frames_ + t) * fb) != 0 ||
        std::fwrite(frame.data(), 1, frame.size(), file_) != frame.size() ||
        std::fflush(file_) != 0) {
      const int err = errno;
      return io_error("cannot keep frame " + std::to_string(frames_ + t) +
                      " in the temporary frame file in " + quoted(path_.parent_path()) + ": " +
                      (err == ENOSPC || err == 0 ? std::string("no space left on device")
                                                 : std::string(std::strerror(err))));
    }
  }
  frames_ += k;
  return Status::ok();
}

Result<HostTensor> FrameSpool::read(int64_t first, int64_t count) const {
  std::lock_guard lock(mu_);
  if (first < 0 || count < 0 || first + count > frames_) {
    return invalid_argument("frames [" + std::to_string(first) + ", " +
                            std::to_string(first + count) + ") are not kept (" +
                            std::to_string(frames_) + " frames)");
  }
  const int64_t fb = frame_bytes(), plane = channels_ > 0 ? fb / channels_ : 0;
  SEEDVAE_ASSIGN_OR_RETURN(
      HostTensor out, HostTensor::create(storage_, Shape{1, channels_, count, height_, width_}));
  auto* dst = static_cast<std::byte*>(out.raw());
  std::vector<std::byte> frame(file_ ? static_cast<size_t>(fb) : 0);
  for (int64_t t = 0; t < count; ++t) {
    const std::byte* src = nullptr;
    if (file_) {
      if (seek(file_, (first + t) * fb) != 0 ||
          std::fread(frame.data(), 1, frame.size(), file_) != frame.size()) {
        return io_error("cannot read frame " + std::to_string(first + t) +
                        " back from the temporary frame file: " + std::strerror(errno));
      }
      src = frame.data();
    } else {
      src = memory_.data() + (first + t) * fb;
    }
    for (int64_t c = 0; c < channels_; ++c) {
      std::memcpy(dst + (c * count + t) * plane, src + c * plane, static_cast<size_t>(plane));
    }
  }
  if (storage_ == DType::kF32) return out;
  return out.to(DType::kF32);
}

int64_t FrameSpool::frames() const {
  std::lock_guard lock(mu_);
  return frames_;
}

Shape FrameSpool::shape() const {
  std::lock_guard lock(mu_);
  if (channels_ == 0) return Shape{};
  return Shape{1, channels_, frames_, height_, width_};
}

int64_t FrameSpool::bytes() const {
  std::lock_guard lock(mu_);
  return frames_ * frame_bytes();
}

}  // namespace seedvae::media
