// A job's progress as its users see it: the fraction of the whole job done and the time left,
// from the stage reports a ProgressSink receives. The CLI, the queue runner and the studio all
// show these, so they are computed here once.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <string_view>

namespace seedvae {

// The time a piece of work has left, at its recent pace.
//
// The average pace since the start misleads on long work: a stall at the start counts for the
// whole run. A 10-minute 1080p round trip waits about 26 s on its one scan of the source before
// its first chunk is written, then takes 0.3 s a chunk (H200); averaged from the start, its
// estimate read 8.7 hours after 3 chunks and was still 28 % high after 4.5 minutes. The pace here
// is that of the last `window` (at least one report interval when reports come slower), so a
// stall leaves the estimate once it is a window old.
class EtaEstimator {
 public:
  using Clock = std::chrono::steady_clock;
  explicit EtaEstimator(std::chrono::duration<double> window = std::chrono::seconds(60));

  // `done` of `total` at `now`: the seconds left at the recent pace; 0 once done >= total; -1
  // while not known (the first report, no progress over the window, or less than a 60th of the
  // window measured). A `done` below the last one starts the measurement again.
  double update(double done, double total, Clock::time_point now = Clock::now());

 private:
  struct Sample {
    Clock::time_point t;
    double done = 0;
  };
  double window_s_;
  double last_done_ = 0;
  std::deque<Sample> samples_;  // at most ~33: one kept per 32nd of the window
};

// One job's progress as a whole. Each stage report updates its part of the job; the parts' shares
// are a round trip's: reading (and loading) 5 %, encoding 30 %, decoding 60 % (the decoder does
// about twice the encoder's work at the same resolution, docs/model.md §7), metrics and writing
// 5 %.
//
// A part counts as finished once a later part has reported and it has not reported since; so a
// decode job's encoding counts as done, and a streamed round trip, whose encode and decode reports
// alternate chunk by chunk, counts both as they go (the fraction does not jump between them).
// The time left is measured on the work actually reported, so a part counted as finished
// without reports does not speed up the estimate. The fraction never goes back.
class JobProgress {
 public:
  using Clock = EtaEstimator::Clock;

  // A report of `stage`, by its ProgressSink name: "encode..." and "decode..." (including "decode
  // tiles") are those parts; "metrics" and "write" the last one; anything else ("prepare", "load
  // weights", "read") the first.
  void report(std::string_view stage, int64_t done, int64_t total,
              Clock::time_point now = Clock::now());
  // The job has ended: the fraction is 1 and no time is left.
  void finish();

  double fraction() const { return fraction_; }
  double eta_s() const { return eta_s_; }  // -1: not known yet

 private:
  struct Part {
    double weight;
    double done = 0;     // 0..1 of the part, the most reported
    int64_t first = -1;  // the sequence number of the part's first report (-1: none yet)
    int64_t last = -1;   // and of its last
  };
  std::array<Part, 4> parts_{{{0.05}, {0.30}, {0.60}, {0.05}}};
  int64_t reports_ = 0;
  double fraction_ = 0;
  double eta_s_ = -1;
  EtaEstimator eta_;
};

}  // namespace seedvae
