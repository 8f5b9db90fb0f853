#include "ui/channels.h"

namespace seedvae::ui {

void FrameStore::set_total(qint64 total, double fps) {
  std::lock_guard lock(mutex_);
  total_ = total;
  fps_ = fps > 0 ? fps : 24;
  frames_.reserve(static_cast<size_t>(std::max<qint64>(0, total)));
}

void FrameStore::set_originals(QVector<QImage> originals) {
  std::lock_guard lock(mutex_);
  originals_.assign(originals.begin(), originals.end());
}

void FrameStore::put(qint64 index, QImage image) {
  if (index < 0) return;
  std::lock_guard lock(mutex_);
  const auto i = static_cast<size_t>(index);
  if (i >= frames_.size()) frames_.resize(i + 1);
  frames_[i] = std::move(image);
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
  qint64 n = 0;
  for (const QImage& f : frames_) {
    if (f.isNull()) break;
    ++n;
  }
  return n;
}

qint64 FrameStore::original_count() const {
  std::lock_guard lock(mutex_);
  return static_cast<qint64>(originals_.size());
}

QImage FrameStore::frame(qint64 index) const {
  std::lock_guard lock(mutex_);
  if (index < 0 || index >= static_cast<qint64>(frames_.size())) return {};
  return frames_[static_cast<size_t>(index)];
}

QImage FrameStore::original(qint64 index) const {
  std::lock_guard lock(mutex_);
  if (index < 0 || index >= static_cast<qint64>(originals_.size())) return {};
  return originals_[static_cast<size_t>(index)];
}

}  // namespace seedvae::ui
