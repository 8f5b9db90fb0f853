#include "core/pipeline/job_progress.h"

#include <algorithm>

namespace seedvae {

namespace {

double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// The part of the job a stage report belongs to (JobProgress::report).
size_t part_of(std::string_view stage) {
  if (stage.starts_with("encode")) return 1;
  if (stage.starts_with("decode")) return 2;
  if (stage.starts_with("metrics") || stage.starts_with("write")) return 3;
  return 0;
}

}  // namespace

EtaEstimator::EtaEstimator(std::chrono::duration<double> window) : window_s_(window.count()) {}

double EtaEstimator::update(double done, double total, Clock::time_point now) {
  if (!samples_.empty() && done < last_done_) samples_.clear();
  last_done_ = done;
  if (done >= total) return 0;
  // One sample per 32nd of the window, however often reports come.
  if (samples_.empty() || seconds(now - samples_.back().t) >= window_s_ / 32) {
    samples_.push_back({now, done});
  }
  // The pace's start: the newest sample at least a window old (or the oldest one).
  while (samples_.size() > 1 && seconds(now - samples_[1].t) >= window_s_) samples_.pop_front();
  const Sample& from = samples_.front();
  const double span = seconds(now - from.t);
  const double progress = done - from.done;
  if (span < window_s_ / 60 || progress <= 0) return -1;
  return (total - done) * span / progress;
}

void JobProgress::report(std::string_view stage, int64_t done, int64_t total,
                         Clock::time_point now) {
  Part& p = parts_[part_of(stage)];
  if (p.first < 0) p.first = reports_;
  p.last = reports_++;
  if (total > 0) {
    p.done = std::max(p.done,
                      std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0));
  }
  // shown: with the parts a later one superseded; measured: only what was reported
  double shown = 0, measured = 0;
  for (size_t i = 0; i < parts_.size(); ++i) {
    bool superseded = false;
    for (size_t k = i + 1; k < parts_.size(); ++k) {
      superseded = superseded || parts_[k].first > parts_[i].last;
    }
    shown += parts_[i].weight * (superseded ? 1.0 : parts_[i].done);
    measured += parts_[i].weight * parts_[i].done;
  }
  fraction_ = std::clamp(std::max(fraction_, shown), 0.0, 1.0);
  eta_s_ = eta_.update(measured, measured + (1.0 - fraction_), now);
}

void JobProgress::finish() {
  fraction_ = 1;
  eta_s_ = 0;
}

}  // namespace seedvae
