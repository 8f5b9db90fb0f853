// The bounded channels from the engine worker to the GUI (../shared/docs/style.md, rule 10).
//
//  * FrameStore: the decoded frames of a run (and the matching original frames) for the scrubber,
//    read at any time: a bounded cache of images in front of the run's frame spools
//    (media::FrameSpool, a temporary file), so the studio's memory does not grow with the clip.
//    QImage copies are cheap and safe across threads (implicit sharing with an atomic count); the
//    worker never modifies an image after storing it.
//  * LatestChannel<T>: a single "latest value" slot. The producer overwrites it; a slow consumer
//    simply sees fewer values (frames are dropped, never queued). publish() returns true only when
//    no notification is pending, so at most one queued notification is in flight.
//  * BoundedQueue<T>: telemetry samples, bounded (oldest dropped and counted), drained in batches
//    with the same one-notification-in-flight rule.
//  * ProgressThrottle: lets a progress update through when it moved >= 1% or >= 100 ms passed.
//  * LatestTaskThread: runs the newest posted task on a thread of its own, dropping older ones
//    that have not started (the live preview's image conversion: neither the engine thread nor
//    the GUI thread spends the 5-50 ms a large frame takes).
#pragma once

#include <QImage>
#include <QVector>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/media/frame_spool.h"

namespace seedvae::ui {

class FrameStore {
 public:
  // At most this many images, and bytes of them, of each kind (reconstruction, original) stay
  // cached (the frames around the scrubber's position); others are converted again from the run's
  // spools when asked for.
  static constexpr qint64 kCacheFrames = 32;
  static constexpr qint64 kCacheBytes = qint64{64} << 20;

  FrameStore() = default;
  FrameStore(const FrameStore&) = delete;
  FrameStore& operator=(const FrameStore&) = delete;

  // Where every frame of the run is kept (the job appends to them as it goes): the source frames
  // and the reconstruction, fp32. Either may be null.
  void set_sources(std::shared_ptr<const media::FrameSpool> originals,
                   std::shared_ptr<const media::FrameSpool> reconstruction);
  void set_total(qint64 total, double fps);

  qint64 total() const;
  double fps() const;
  qint64 available() const;  // decoded frames, contiguous from 0
  qint64 original_count() const;
  QImage frame(qint64 index) const;     // null image if not decoded yet
  QImage original(qint64 index) const;  // null image if not read
  // The same images if converted already (cached), else a null image: never converts, for the
  // GUI thread.
  QImage cached_frame(qint64 index) const { return cached(false, index); }
  QImage cached_original(qint64 index) const { return cached(true, index); }
  // Images cached now, of both kinds (bounded by kCacheBytes each).
  qint64 cached_bytes() const;

 private:
  // A bounded most-recently-used cache of converted frames.
  struct Cache {
    std::deque<std::pair<qint64, QImage>> items;  // most recent last
    qint64 bytes = 0;
    QImage find(qint64 index);
    void insert(qint64 index, QImage image);
  };
  QImage lookup(bool original, qint64 index) const;
  QImage cached(bool original, qint64 index) const;

  mutable std::mutex mutex_;
  qint64 total_ = 0;
  double fps_ = 24;
  std::shared_ptr<const media::FrameSpool> originals_, reconstruction_;
  mutable Cache frames_, original_images_;
};

template <typename T>
class LatestChannel {
 public:
  // Producer side (any thread). Returns true if the consumer must be notified.
  bool publish(T value) {
    {
      std::lock_guard lock(mutex_);
      if (slot_) ++dropped_;
      slot_ = std::move(value);
    }
    return !pending_.exchange(true);
  }
  // Consumer side. Clears the pending flag first, so a publish that races with take() notifies
  // again instead of being lost.
  std::optional<T> take() {
    pending_.store(false);
    std::lock_guard lock(mutex_);
    std::optional<T> out = std::move(slot_);
    slot_.reset();
    return out;
  }
  long long dropped() const {
    std::lock_guard lock(mutex_);
    return dropped_;
  }

 private:
  mutable std::mutex mutex_;
  std::optional<T> slot_;
  std::atomic<bool> pending_{false};
  long long dropped_ = 0;
};

template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity = 8192) : capacity_(std::max<size_t>(1, capacity)) {}
  bool push(T value) {
    {
      std::lock_guard lock(mutex_);
      if (queue_.size() >= capacity_) {
        queue_.pop_front();
        ++dropped_;
      }
      queue_.push_back(std::move(value));
    }
    return !pending_.exchange(true);
  }
  QVector<T> drain() {
    pending_.store(false);
    std::lock_guard lock(mutex_);
    QVector<T> out;
    out.reserve(static_cast<qsizetype>(queue_.size()));
    for (auto& v : queue_) out.push_back(std::move(v));
    queue_.clear();
    return out;
  }
  long long dropped() const {
    std::lock_guard lock(mutex_);
    return dropped_;
  }

 private:
  mutable std::mutex mutex_;
  std::deque<T> queue_;
  size_t capacity_;
  std::atomic<bool> pending_{false};
  long long dropped_ = 0;
};

class ProgressThrottle {
 public:
  explicit ProgressThrottle(double min_step = 0.01,
                            std::chrono::milliseconds min_interval = std::chrono::milliseconds(100))
      : min_step_(min_step), min_interval_(min_interval) {}
  // True if an update with this overall fraction should be sent now. `force` for stage changes
  // and completion.
  bool should_send(double fraction, bool force = false) {
    const auto now = std::chrono::steady_clock::now();
    if (force || !sent_any_ || fraction - last_fraction_ >= min_step_ ||
        now - last_time_ >= min_interval_) {
      sent_any_ = true;
      last_fraction_ = fraction;
      last_time_ = now;
      return true;
    }
    return false;
  }

 private:
  double min_step_;
  std::chrono::milliseconds min_interval_;
  bool sent_any_ = false;
  double last_fraction_ = 0;
  std::chrono::steady_clock::time_point last_time_{};
};

class LatestTaskThread {
 public:
  // `name`: the thread's name (set_current_thread_name).
  explicit LatestTaskThread(const char* name);
  ~LatestTaskThread();  // the running task finishes, a waiting one is dropped
  LatestTaskThread(const LatestTaskThread&) = delete;
  LatestTaskThread& operator=(const LatestTaskThread&) = delete;

  // Any thread. Replaces the task waiting to run, if any.
  void post(std::function<void()> task);
  // Returns once every task posted before the call has run or been replaced.
  void flush();

 private:
  void loop();
  std::mutex mutex_;
  std::condition_variable cv_;
  std::function<void()> next_;
  bool running_ = false, stop_ = false;
  std::thread thread_;  // last: started after the state it uses
};

}  // namespace seedvae::ui
