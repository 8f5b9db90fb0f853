#include "ui/channels.h"

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
  put_count_ = 0;
}

void FrameStore::set_total(qint64 total, double fps) {
  std::lock_guard lock(mutex_);
  total_ = total;
  fps_ = fps > 0 ? fps : 24;
}

void FrameStore::put(qint64 index, QImage image) {
  if (index < 0) return;
  std::lock_guard lock(mutex_);
  if (index == put_count_) ++put_count_;
  frames_.insert(index, std::move(image));
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
  return reconstruction_ ? reconstruction_->frames() : put_count_;
}

qint64 FrameStore::original_count() const {
  std::lock_guard lock(mutex_);
  return originals_ ? originals_->frames() : 0;
}

QImage FrameStore::lookup(Cache& cache, const media::FrameSpool* spool, qint64 index) const {
  if (index < 0) return {};
  QImage image = cache.find(index);
  if (!image.isNull() || spool == nullptr || index >= spool->frames()) return image;
  auto frames = spool->read(index, 1);
  if (!frames.is_ok()) return {};
  image = frame_to_image(*frames, 0);
  cache.insert(index, image);
  return image;
}

QImage FrameStore::frame(qint64 index) const {
  std::lock_guard lock(mutex_);
  return lookup(frames_, reconstruction_.get(), index);
}

QImage FrameStore::original(qint64 index) const {
  std::lock_guard lock(mutex_);
  return lookup(original_images_, originals_.get(), index);
}

qint64 FrameStore::cached_bytes() const {
  std::lock_guard lock(mutex_);
  return frames_.bytes + original_images_.bytes;
}

}  // namespace seedvae::ui
