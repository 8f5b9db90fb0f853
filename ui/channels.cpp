#include "ui/channels.h"

#include "core/base/thread_name.h"
#include "ui/image_convert.h"

namespace seedvae::ui {

QImage FrameStore::Cache::find(qint64 index) {
  for (auto it = items.begin(); it != items.end(); ++it) {
    if (it->first != index) continue;
    QImage image = it->second;
    if (std::next(it) != items.end()) {  // most recent last
      auto item = std::move(*it);
      items.erase(it);
      items.push_back(std::move(item));
    }
    return image;
  }
  return {};
}

void FrameStore::Cache::insert(qint64 index, QImage image) {
  if (image.isNull()) return;
  for (auto it = items.begin(); it != items.end(); ++it) {
    if (it->first == index) {
      bytes -= it->second.sizeInBytes();
      items.erase(it);
      break;
    }
  }
  bytes += image.sizeInBytes();
  items.emplace_back(index, std::move(image));
  // Keep at least the newest few frames, whatever their size.
  while ((bytes > kCacheBytes || static_cast<qint64>(items.size()) > kCacheFrames) &&
         items.size() > 4) {
    bytes -= items.front().second.sizeInBytes();
    items.pop_front();
  }
}

void FrameStore::set_sources(std::shared_ptr<const media::FrameSpool> originals,
                             std::shared_ptr<const media::FrameSpool> reconstruction) {
  std::lock_guard lock(mutex_);
  originals_ = std::move(originals);
  reconstruction_ = std::move(reconstruction);
  frames_ = {};
  original_images_ = {};
}

void FrameStore::set_total(qint64 total, double fps) {
  std::lock_guard lock(mutex_);
  total_ = total;
  fps_ = fps > 0 ? fps : 24;
}

qint64 FrameStore::total() const {
  std::lock_guard lock(mutex_);
  return total_;
}

double FrameStore::fps() const {
  std::lock_guard lock(mutex_);
  return fps_;
}

qint64 FrameStore::available() const {
  std::lock_guard lock(mutex_);
  return reconstruction_ ? reconstruction_->frames() : 0;
}

qint64 FrameStore::original_count() const {
  std::lock_guard lock(mutex_);
  return originals_ ? originals_->frames() : 0;
}

// The spool is read and the frame converted outside the lock (tens of ms for a large frame on a
// slow host), so a thread that finds its frame cached never waits for another's conversion.
QImage FrameStore::lookup(bool original, qint64 index) const {
  if (index < 0) return {};
  Cache& cache = original ? original_images_ : frames_;
  std::shared_ptr<const media::FrameSpool> spool;
  {
    std::lock_guard lock(mutex_);
    QImage image = cache.find(index);
    spool = original ? originals_ : reconstruction_;
    if (!image.isNull() || spool == nullptr || index >= spool->frames()) return image;
  }
  auto frames = spool->read(index, 1);
  if (!frames.is_ok()) return {};
  QImage image = frame_to_image(*frames, 0);
  std::lock_guard lock(mutex_);
  // the run's sources may have changed meanwhile: cache only a frame of the current ones
  if ((original ? originals_ : reconstruction_) == spool) cache.insert(index, image);
  return image;
}

QImage FrameStore::frame(qint64 index) const {
  return lookup(false, index);
}

QImage FrameStore::original(qint64 index) const {
  return lookup(true, index);
}

QImage FrameStore::cached(bool original, qint64 index) const {
  std::lock_guard lock(mutex_);
  return (original ? original_images_ : frames_).find(index);
}

qint64 FrameStore::cached_bytes() const {
  std::lock_guard lock(mutex_);
  return frames_.bytes + original_images_.bytes;
}

LatestTaskThread::LatestTaskThread(const char* name)
    : thread_([this, name] {
        set_current_thread_name(name);
        loop();
      }) {}

LatestTaskThread::~LatestTaskThread() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
    next_ = nullptr;
  }
  cv_.notify_all();
  thread_.join();
}

void LatestTaskThread::post(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    next_ = std::move(task);
  }
  cv_.notify_all();
}

void LatestTaskThread::flush() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [this] { return stop_ || (!next_ && !running_); });
}

void LatestTaskThread::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || next_; });
    if (stop_) return;
    std::function<void()> task = std::move(next_);
    next_ = nullptr;
    running_ = true;
    lock.unlock();
    task();
    task = nullptr;  // its captures go before flush() returns
    lock.lock();
    running_ = false;
    cv_.notify_all();
  }
}

}  // namespace seedvae::ui
