// A TelemetrySink that keeps every sample, for the telemetry tests (CPU and GPU; no Qt).
#pragma once

#include <vector>

#include "core/base/telemetry.h"

namespace seedvae::test {

class TelemetryRecorder final : public TelemetrySink {
 public:
  explicit TelemetryRecorder(bool summaries, StageTiming timing = StageTiming::kSynchronized)
      : summaries_(summaries), timing_(timing) {}
  void on_stage(const StageSample& s) override { samples.push_back(s); }
  bool wants_summaries() const override { return summaries_; }
  StageTiming stage_timing() const override { return timing_; }
  std::vector<StageSample> samples;

 private:
  bool summaries_;
  StageTiming timing_;
};

// The scheduler's summary samples ("chunk", "tile"), as opposed to the model's stage samples.
inline bool is_summary(const StageSample& s) {
  return s.stage == "chunk" || s.stage == "tile";
}

}  // namespace seedvae::test
